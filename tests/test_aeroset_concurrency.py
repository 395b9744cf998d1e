"""AEROSET readers and writers at the same time, with real processes: three writers replace a
set in a loop while a reader opens it and reads every tensor.  Every read is one writer's
complete set (index metadata, every part's metadata, every tensor), never a mix; at least 99%
of the reads succeed and the rest fail with a typed error; the directory ends holding one
complete set and nothing else."""
import multiprocessing
import os
import time
import traceback

import numpy as np
import pytest

import codec
from codec.formats.aeroset import write_aeroset

pytestmark = pytest.mark.timeout(60)

NAMES = [f"layer.{i}.w" for i in range(6)]
#: the reader reads at least this many times while the writers replace the set at least
#: WRITES times in all (a count, not a duration: a loaded machine takes longer, not fewer) ...
READS, WRITES = 60, 90
#: ... unless this many seconds pass first (a machine too loaded to get there)
AT_MOST = 20.0


def _tensors(k: int) -> dict:
    return {n: np.full((32, 32), k, dtype=np.int32) for n in NAMES}


def _write(d: str, k: int) -> None:
    # one shard per tensor, two shards per part: three parts and index.aero
    write_aeroset(d, _tensors(k), model_name=f"writer{k}", max_shard_bytes=4096, max_part_shards=2)


def _writer(d: str, k: int, go, stop, writes, out) -> None:
    n, err = 0, None
    try:
        go.wait()
        while not stop.is_set():
            _write(d, k)
            n += 1
            with writes.get_lock():
                writes.value += 1
    except BaseException:
        err = traceback.format_exc()
    out.put(("writer", k, n, err))


def _read_once(d: str) -> int:
    """The writer whose set was read; ValueError for a mix (never an error of the library's)."""
    with codec.open(d) as s:
        ks = {s.metadata["model_name"]}
        for i in range(len(s.index["parts"])):
            ks.add(s.part(i).metadata["model_name"])
        got = s.read_tensors(list(s.tensors))
        if sorted(got) != sorted(NAMES):
            raise ValueError(f"tensors {sorted(got)}")
        for a in got.values():
            ks |= {f"writer{int(v)}" for v in np.unique(a)}
    if len(ks) != 1:
        raise ValueError(f"a mix of {sorted(ks)}")
    return int(ks.pop().removeprefix("writer"))


def _reader(d: str, go, stop, writes, out) -> None:
    ok, typed, mixes, untyped = 0, {}, [], []
    go.set()  # (the writers start with the reader)
    end = time.monotonic() + AT_MOST
    while ok + sum(typed.values()) + len(mixes) + len(untyped) < READS or writes.value < WRITES:
        if time.monotonic() > end:
            break
        try:
            _read_once(d)
            ok += 1
        except codec.ModelcodecError as e:
            key = f"{type(e).__name__}: {str(e)[:200]}"
            typed[key] = typed.get(key, 0) + 1
        except ValueError as e:
            mixes.append(str(e))
        except BaseException:
            untyped.append(traceback.format_exc())
    stop.set()
    out.put(("reader", ok, typed, mixes[:5] + [len(mixes)], untyped[:3]))


def test_readers_never_see_a_mix_while_writers_replace_the_set(tmp_path):
    d = str(tmp_path / "set")
    _write(d, 9)
    ctx = multiprocessing.get_context("spawn")
    go, stop, out, writes = ctx.Event(), ctx.Event(), ctx.Queue(), ctx.Value("i", 0)
    procs = [ctx.Process(target=_writer, args=(d, k, go, stop, writes, out)) for k in (1, 2, 3)]
    procs.append(ctx.Process(target=_reader, args=(d, go, stop, writes, out)))
    for p in procs:
        p.start()
    try:  # (the reader starts the writers, and stops them once it has read enough)
        results = [out.get(timeout=AT_MOST + 30) for _ in procs]
    finally:
        stop.set()
        go.set()
        for p in procs:
            p.join(timeout=30)
            if p.is_alive():
                p.kill()
    writers = [r for r in results if r[0] == "writer"]
    assert all(err is None for _, _, _, err in writers), [err for *_, err in writers]
    assert all(n > 0 for _, _, n, _ in writers), writers
    (_, ok, typed, mixes, untyped), = [r for r in results if r[0] == "reader"]
    assert mixes == [0], f"{mixes[-1]} reads saw a mix of sets: {mixes[:-1]}"
    assert untyped == [], untyped
    failed = sum(typed.values())
    assert ok >= 1 and failed <= 0.01 * (ok + failed), (ok, typed)
    # the directory holds one writer's complete set, and nothing is left beside it
    assert _read_once(d) in (1, 2, 3)
    assert codec.validate(d, full=True).ok
    assert sorted(os.listdir(tmp_path)) == ["set"]
    with codec.open(d) as s:
        listed = {p["path"] for p in s.index["parts"]} | {s.index["global_tidx"]["path"]}
    assert sorted(os.listdir(d)) == sorted(listed | {"model.aeroset.json"})
    # the last writer wins
    _write(d, 4)
    assert _read_once(d) == 4 and sorted(os.listdir(tmp_path)) == ["set"]


@pytest.mark.parametrize("side", [32, 320])  # parts read whole at open (their sha256), or by ranges (hash_b3)
@pytest.mark.parametrize("opened", [False, True])  # the parts' control regions read before the replacement
def test_a_remote_set_republished_after_open_is_refused_never_mixed(tmp_path, side, opened):
    """A server without ETags (FaultServer's "ok"): only the hashes the index vouches for can
    tell the re-published files from the ones the reader opened."""
    from codec.formats.aeroset import AeroSet
    from .servers import FaultServer

    def publish(k):
        write_aeroset(tmp_path / "s", {n: np.full((side, side), k, np.int32) for n in NAMES}, model_name=f"writer{k}",
                      max_shard_bytes=side * side * 4, max_part_shards=2)
    publish(1)
    with FaultServer(tmp_path) as srv:
        with AeroSet(f"{srv.url}/ok/s/model.aeroset.json", cache=False) as s:
            if opened:
                for i in range(len(s.index["parts"])):
                    s.part(i)
            publish(2)  # the same layout and sizes, other values
            refused = set()
            for n in NAMES:
                try:
                    a = s.tensor(n)
                except codec.ModelcodecError as e:
                    refused.add(getattr(e, "rule", type(e).__name__))
                    continue
                assert s.metadata["model_name"] == "writer1" and np.all(a == 1), n
        assert refused <= {"AEROSET-PART-HASH", "AERO-HASH-B3", "AEROSET-TENSOR"}, refused
        assert refused or (opened and side == 32)  # (read whole at open: the old parts' bytes are held)
        with AeroSet(f"{srv.url}/ok/s/model.aeroset.json", cache=False) as s:
            assert s.metadata["model_name"] == "writer2" and all(np.all(a == 2) for a in s.read_tensors(NAMES).values())


def test_an_open_set_keeps_reading_its_version_after_it_is_replaced(tmp_path):
    d = str(tmp_path / "set")
    _write(d, 1)
    with codec.open(d) as s:
        s.tensor(NAMES[0])  # (one part parsed, the others not yet)
        _write(d, 2)
        assert sorted(os.listdir(tmp_path)) == ["set"]  # the old set's files are gone from the disk
        assert s.metadata["model_name"] == "writer1"
        assert all(s.part(i).metadata["model_name"] == "writer1" for i in range(len(s.index["parts"])))
        assert all(np.all(a == 1) for a in s.read_tensors(NAMES).values())
        assert s.validate(full=True).ok
    assert _read_once(d) == 2


def _replacing_before_pin(monkeypatch, d, times):
    """Each of the first ``times`` opens finds the set replaced between reading its index and
    opening the files it lists (its files removed)."""
    from codec.formats.aeroset.stores import LocalFiles
    pin, seen = LocalFiles.pin, []

    def replaced_first(self, index):
        if len(seen) < times:
            seen.append(index["model"]["name"])
            _write(d, 2 + len(seen))
        return pin(self, index)
    monkeypatch.setattr(LocalFiles, "pin", replaced_first)
    return seen


def test_a_set_replaced_while_it_is_opened_is_opened_again(tmp_path, monkeypatch):
    d = str(tmp_path / "set")
    _write(d, 1)
    seen = _replacing_before_pin(monkeypatch, d, 3)
    assert _read_once(d) == 5 and seen == ["writer1", "writer3", "writer4"]


def test_a_set_replaced_at_every_open_ends_in_a_typed_error(tmp_path, monkeypatch):
    from codec.formats.aeroset.reader import OPEN_ATTEMPTS
    d = str(tmp_path / "set")
    _write(d, 1)
    seen = _replacing_before_pin(monkeypatch, d, 10**6)
    with pytest.raises(codec.FormatError) as ei:
        codec.open(d)
    assert ei.value.rule == "AEROSET-MISSING" and "replaced" in str(ei.value) and len(seen) == OPEN_ATTEMPTS
    assert sorted(os.listdir(tmp_path)) == ["set"]


def test_no_descriptor_to_spare_is_a_typed_error(tmp_path):
    """A set holds only its directory open (its files are mapped: tests/test_descriptor_limit.py);
    a process with no descriptor left for the index gets a typed error, never an OSError."""
    import subprocess
    import sys
    d = tmp_path / "set"
    write_aeroset(d, {f"t{i}": np.full(4, i, np.float32) for i in range(40)}, max_shard_bytes=16, max_part_shards=1)
    code = ("import os, resource, codec\n"
            f"codec.open({str(d)!r}).close()  # (every module it needs imported)\n"
            "n = len(os.listdir('/proc/self/fd'))\n"
            "resource.setrlimit(resource.RLIMIT_NOFILE, (n, resource.getrlimit(resource.RLIMIT_NOFILE)[1]))\n"
            f"try:\n    codec.open({str(d / 'model.aeroset.json')!r})\n"
            "except codec.ModelcodecError as e:\n    print(type(e).__name__, e)\n")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60,
                       env=dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path)))
    assert r.stdout.startswith("UsageError") and "Too many open files" in r.stdout, r.stdout + r.stderr


def test_a_set_swapped_while_its_directory_is_listed_is_still_found(tmp_path, monkeypatch):
    """Telling a set's directory from other paths lists it: a writer swapping in a new set and
    emptying the old directory during that listing must not make it look like no set."""
    d = str(tmp_path / "set")
    _write(d, 1)
    real, swapped = os.listdir, []

    def listdir(p="."):
        if not swapped and (p == d or isinstance(p, int)):
            swapped.append(p)
            before = real(p)
            _write(d, 2)
            if isinstance(p, int):
                assert real(p) == [] and before  # the directory this listing had open was emptied
            return real(p) if isinstance(p, int) else []  # (by path: what that listing would have seen)
        return real(p)
    monkeypatch.setattr(os, "listdir", listdir)
    assert _read_once(d) == 2 and swapped
