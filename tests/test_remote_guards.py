"""The guards between a remote server and the bytes a caller gets, each shown by a server
that breaks it (tests/servers.py FaultServer modes): a file claimed to be huge, a file that
changes while it is read, a body longer than the range, a server that never answers; and
the guard between unread bytes of a remote file and a caller.  Also the stale-temp cleanup's
liveness check, with a live process other than this one."""
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import codec
from codec import errors as E
from codec.io import sources
from codec.io.atomic import TEMP_MARK, _host, remove_stale_temps
from codec.io.remote import HttpOptions
from codec.schemas.http import DEADLINE_SECONDS, MAX_FILE_BYTES

from .servers import FaultServer

pytestmark = pytest.mark.timeout(120)

FAST = HttpOptions(connect_timeout=2, read_timeout=2.0, retries=1, backoff=0.01, grace=0.5, min_rate=1024)


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    root = tmp_path_factory.mktemp("guards-www")
    rng = np.random.default_rng(6)
    codec.write(str(root / "m.safetensors"), {f"w{i}": rng.standard_normal((256, 256)).astype(np.float32)
                                              for i in range(4)})
    with FaultServer(root) as srv:
        yield srv


def test_a_claimed_size_over_the_limit_is_refused_before_anything_is_sized(server):
    server.claim = MAX_FILE_BYTES + 1
    with pytest.raises(E.LimitError) as ei:
        codec.open(f"{server.url}/claim/m.safetensors", http=FAST)
    assert ei.value.rule == "HTTP-LIMIT" and "the server says the file is 140737488355328 bytes" in str(ei.value)


def test_a_claimed_size_that_cannot_be_mapped_is_a_typed_error(server):
    """A claim of 2^40 bytes, under an address-space limit of 8 GiB (a child process): the
    mapping for its ranges cannot be reserved -- a LimitError, not an OSError."""
    server.claim = 1 << 40
    code = textwrap.dedent(f"""
        import resource, codec
        from codec.io.remote import HttpOptions
        resource.setrlimit(resource.RLIMIT_AS, (8 << 30, 8 << 30))
        try:
            codec.open({server.url + '/claim/m.safetensors'!r}, http=HttpOptions(retries=0))
            print("OPENED")
        except codec.errors.ModelcodecError as e:
            print(type(e).__name__, e.rule)
    """)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.stdout.split() == ["LimitError", "HTTP-LIMIT"], (out.stdout, out.stderr[-2000:])


def test_a_file_whose_etag_changes_while_it_is_read_is_refused(server):
    with pytest.raises(E.RemoteError) as ei:
        with codec.open(f"{server.url}/new-etag/m.safetensors", http=FAST) as r:
            for n in r.tensors:
                r.tensor(n)
    assert ei.value.rule == "HTTP-RANGE" and "changed on the server while being read" in str(ei.value)


def test_a_body_longer_than_the_range_is_refused(server):
    with pytest.raises(E.RemoteError) as ei:
        codec.open(f"{server.url}/overlong/m.safetensors", http=FAST)
    assert ei.value.rule == "HTTP-RANGE" and "sent more than" in str(ei.value)


def test_a_server_that_never_answers_fails_within_the_deadline(server):
    """Eleven attempts of a second each would be made without a deadline; the deadline of 1.5 s
    ends them after the second (counted by the server, not timed here)."""
    assert DEADLINE_SECONDS <= 60 and HttpOptions().deadline == DEADLINE_SECONDS
    slow = HttpOptions(connect_timeout=1, read_timeout=1, head_timeout=1, retries=10, backoff=0.01, deadline=1.5)
    server.reset()
    with pytest.raises(E.RemoteError) as ei:
        codec.open(f"{server.url}/mute/m.safetensors", http=slow)
    assert ei.value.rule == "HTTP-REQUEST" and "deadline" in str(ei.value)
    asked = [q for q in server.requests if q["mode"] == "mute"]
    assert 0 < len(asked) <= 3, server.requests


def test_bytes_of_a_remote_file_that_were_not_read_are_never_returned(server):
    """The reader's own source holds only what was fetched: asking it for a tensor's bytes
    without fetching them is a NotLocalError, never the zeros of the unread range."""
    with codec.open(f"{server.url}/ok/m.safetensors", http=FAST) as r:
        t = r.tensors["w2"]
        src = r.inner._src
        assert isinstance(src, sources.PartialSource) and not src.has(t.offset, t.nbytes)
        with pytest.raises(E.NotLocalError):
            r.inner.tensor("w2")
        with pytest.raises(E.NotLocalError):
            src.array(np.uint8, t.nbytes, t.offset)
        assert r.tensor("w2").tobytes() == codec.open(server.root + "/m.safetensors").tensor("w2").tobytes()
    part = sources.PartialSource("x", 100)
    part.add(10, b"\1" * 10)
    assert part.array(np.uint8, 10, 10).tolist() == [1] * 10
    for count, offset in ((11, 10), (1, 9), (5, 30), (1, 0)):
        with pytest.raises(E.NotLocalError):
            part.array(np.uint8, count, offset)


def test_stale_temps_are_removed_only_when_their_writer_is_gone(tmp_path):
    """Temporaries named for a live process other than this one stay; those of a process
    that has ended go."""
    target = tmp_path / "m.aero"
    live = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    try:
        names = {pid: f".m.aero{TEMP_MARK}{pid}@{_host()}.x1" for pid in (live.pid, dead.pid)}
        for n in names.values():
            (tmp_path / n).write_bytes(b"partial")
        removed = remove_stale_temps(str(target))
        assert [os.path.basename(p) for p in removed] == [names[dead.pid]]
        assert sorted(os.listdir(tmp_path)) == [names[live.pid]]
    finally:
        live.kill()
        live.wait()
