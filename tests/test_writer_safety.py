"""Writers never destroy what is not theirs: refusals, atomic replacement, the caller's umask,
SIGKILL at random points, concurrent writers."""
import os
import random
import signal
import socket
import stat
import subprocess
import sys
import textwrap
import time

import numpy as np
import pytest

import codec
from codec.formats.aeroset import write_aeroset
from codec.io.atomic import TEMP_MARK, atomic_write


def _tensors(seed=0, n=3):
    rng = np.random.default_rng(seed)
    return {f"t{i}": rng.standard_normal((64, 64)).astype(np.float32) for i in range(n)}


def _read_all(path) -> dict:
    with codec.open(path) as r:
        return {n: r.tensor(n).copy() for n in r.tensors}


def test_set_writer_refuses_an_ordinary_directory(tmp_path):
    d = tmp_path / "photos"
    d.mkdir()
    (d / "holiday.jpg").write_bytes(b"precious")
    with pytest.raises(codec.UsageError, match="not an AEROSET"):
        write_aeroset(d, _tensors())
    assert sorted(os.listdir(d)) == ["holiday.jpg"] and (d / "holiday.jpg").read_bytes() == b"precious"
    assert [n for n in os.listdir(tmp_path) if TEMP_MARK in n] == []


def test_set_writer_refuses_a_file_and_a_symlink(tmp_path):
    f = tmp_path / "model"
    f.write_bytes(b"x")
    with pytest.raises(codec.UsageError, match="not a directory"):
        write_aeroset(f, _tensors())
    link = tmp_path / "link"
    other = tmp_path / "other"
    other.mkdir()
    link.symlink_to(other)
    with pytest.raises(codec.UsageError):
        write_aeroset(link, _tensors())
    assert f.read_bytes() == b"x" and link.is_symlink()


def test_set_writer_refuses_a_set_holding_unlisted_files(tmp_path):
    d = tmp_path / "set"
    write_aeroset(d, _tensors(1))
    (d / "notes.txt").write_text("mine")
    before = sorted(os.listdir(d))
    with pytest.raises(codec.UsageError, match="does not list"):
        write_aeroset(d, _tensors(2))
    assert sorted(os.listdir(d)) == before and (d / "notes.txt").read_text() == "mine"
    got = _read_all(d)
    assert all(np.array_equal(got[k], v) for k, v in _tensors(1).items())


def test_replacing_a_set_swaps_it_whole(tmp_path):
    d = tmp_path / "set"
    write_aeroset(d, _tensors(1, n=8), max_shard_bytes=1 << 14, max_part_shards=1)
    write_aeroset(d, _tensors(2, n=2))
    got = _read_all(d)
    assert sorted(got) == ["t0", "t1"] and all(np.array_equal(got[k], v) for k, v in _tensors(2, n=2).items())
    listed = {"model.aeroset.json", "index.aero"} | {f"part-{k:03d}.aero" for k in range(1)}
    assert set(os.listdir(d)) == listed
    assert [n for n in os.listdir(tmp_path) if n != "set"] == []


@pytest.mark.parametrize("umask", [0o022, 0o027, 0o002])
def test_writers_follow_the_callers_umask(tmp_path, umask):
    code = textwrap.dedent(f"""
        import os, numpy as np, codec
        from codec.formats.aeroset import write_aeroset
        os.umask({umask})
        t = {{"w": np.zeros(4, np.float32)}}
        for fmt in ("aero", "mag", "oinf"):
            codec.write({str(tmp_path)!r} + "/m." + fmt, t, format=fmt)
        codec.write({str(tmp_path)!r} + "/m.stb", [np.zeros(4, np.float32)], format="stb")
        write_aeroset({str(tmp_path)!r} + "/set", t)
        from codec.tools.cli import main
        main(["fetch-tensor", {str(tmp_path)!r} + "/set", "w", {str(tmp_path)!r} + "/w.bin"])
    """)
    subprocess.run([sys.executable, "-c", code], check=True, timeout=120)
    files = ["m.aero", "m.mag", "m.oinf", "m.stb", "w.bin", "set/model.aeroset.json", "set/index.aero",
             "set/part-000.aero"]
    for f in files:
        assert stat.S_IMODE(os.stat(tmp_path / f).st_mode) == 0o666 & ~umask, f
    assert stat.S_IMODE(os.stat(tmp_path / "set").st_mode) == 0o777 & ~umask


def test_atomic_write_refuses_special_targets_and_writes_through_symlinks(tmp_path):
    fifo = tmp_path / "out.fifo"
    os.mkfifo(fifo)
    sock = socket.socket(socket.AF_UNIX)
    sock.bind(str(tmp_path / "out.sock"))
    try:
        for target in (fifo, tmp_path / "out.sock", "/dev/null", tmp_path):
            with pytest.raises(codec.UsageError, match="refusing to replace"):
                with atomic_write(target) as f:
                    f.write(b"x")
    finally:
        sock.close()
    real = tmp_path / "real.bin"
    real.write_bytes(b"keep")
    link = tmp_path / "link.bin"
    link.symlink_to(real)
    with atomic_write(link) as f:
        f.write(b"new")
    # (issue 30 §3: written through the link -- its target replaced, the link kept)
    assert link.is_symlink() and os.readlink(link) == str(real) and real.read_bytes() == b"new"
    fifo_link = tmp_path / "fifo.link"
    fifo_link.symlink_to(fifo)
    with pytest.raises(codec.UsageError, match="refusing to replace"):
        with atomic_write(fifo_link) as f:
            f.write(b"x")


def test_fetch_tensor_refuses_a_fifo_output(tmp_path):
    write_aeroset(tmp_path / "set", {"w": np.zeros(4, np.float32)})
    fifo = tmp_path / "out"
    os.mkfifo(fifo)
    r = subprocess.run([sys.executable, "-m", "codec.tools.cli", "fetch-tensor", str(tmp_path / "set"), "w", str(fifo)],
                       capture_output=True, text=True, timeout=30)
    assert r.returncode == 1 and "refusing to replace a FIFO" in r.stderr, r.stderr


_KILLED_WRITER = """
import sys, numpy as np, codec
from codec.formats.aeroset import write_aeroset
kind, target, seed = sys.argv[1], sys.argv[2], int(sys.argv[3])
rng = np.random.default_rng(seed)
t = {f"t{i}": rng.standard_normal(1 << 18).astype(np.float32) for i in range(24)}
print("ready", flush=True)
if kind == "aero":
    codec.write(target, t, format="aero", max_shard_bytes=1 << 21)
else:
    write_aeroset(target, t, max_shard_bytes=1 << 21, max_part_shards=2)
"""


@pytest.mark.parametrize("kind", ["aero", "aeroset"])
def test_sigkill_at_random_points_leaves_no_partial_target(tmp_path, kind):
    target = tmp_path / ("m.aero" if kind == "aero" else "set")
    rng = random.Random(1234)
    for attempt in range(8):
        p = subprocess.Popen([sys.executable, "-c", _KILLED_WRITER, kind, str(target), str(attempt)],
                             stdout=subprocess.PIPE, text=True)
        assert p.stdout.readline().strip() == "ready"
        time.sleep(rng.uniform(0.0, 0.4))
        p.send_signal(signal.SIGKILL)
        p.wait(timeout=30)
        p.stdout.close()
        if target.exists():  # either nothing, or a complete set/file from one of the writers
            assert len(_read_all(target)) == 24 and codec.validate(target, full=True).ok
    leftovers = [n for n in os.listdir(tmp_path) if TEMP_MARK in n]
    # a later write removes the killed writers' temporaries, and only those
    subprocess.run([sys.executable, "-c", _KILLED_WRITER, kind, str(target), "99"], check=True, timeout=120,
                   stdout=subprocess.DEVNULL)
    assert sorted(os.listdir(tmp_path)) == [target.name], (leftovers, os.listdir(tmp_path))
    assert len(_read_all(target)) == 24


def test_concurrent_set_writers_end_in_one_complete_set(tmp_path):
    target = tmp_path / "set"
    procs = [subprocess.Popen([sys.executable, "-c", _KILLED_WRITER, "aeroset", str(target), str(s)],
                              stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True) for s in (1, 2, 3)]
    for p in procs:
        _, err = p.communicate(timeout=180)
        assert p.returncode == 0 or "modelcodec" in err, err
    assert codec.validate(target, full=True).ok
    rng_sets = []
    for s in (1, 2, 3):
        rng = np.random.default_rng(s)
        rng_sets.append({f"t{i}": rng.standard_normal(1 << 18).astype(np.float32) for i in range(24)})
    got = _read_all(target)
    assert any(all(np.array_equal(got[k], v) for k, v in exp.items()) for exp in rng_sets)
    assert sorted(os.listdir(tmp_path)) == ["set"]


def test_only_this_hosts_temporaries_of_gone_writers_are_removed(tmp_path):
    """A directory shared by several machines (NFS) or containers holds temporaries of writers
    whose pids mean nothing here: a later write removes only the temporaries of writers of
    this host that are gone -- never another host's, never one whose writer runs."""
    from codec.io.atomic import _host
    target = tmp_path / "m.aero"
    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait()
    here, head = _host(), "." + target.name + TEMP_MARK
    names = {"ours_gone": f"{head}{gone.pid}@{here}.x1.tmp", "ours_running": f"{head}{os.getpid()}@{here}.x2.tmp",
             "other_host": f"{head}{gone.pid}@another-machine.x3.tmp", "unnamed_host": f"{head}{gone.pid}.x4.tmp"}
    for n in names.values():
        (tmp_path / n).write_bytes(b"partial")
    codec.write(str(target), _tensors())
    left = set(os.listdir(tmp_path))
    assert names["ours_gone"] not in left
    assert {names[k] for k in ("ours_running", "other_host", "unnamed_host")} <= left and target.name in left


def test_a_destination_a_writer_refuses_is_refused_before_a_tensor_is_read(tmp_path, monkeypatch):
    """A typo in the destination's directory (or a directory, or a file where its directory
    should be) is the UsageError before any tensor is read -- not after the AERO writer's hash
    pass read them all (a remote source downloaded whole first) -- for write() and convert();
    a model in several files still makes its directories."""
    from codec import api
    from codec.io.writer_io import LazyTensor
    reads = []

    def lazy(name):
        return LazyTensor(np.float32, (4,), lambda: reads.append(name) or np.ones(4, np.float32))
    (tmp_path / "adir").mkdir()
    (tmp_path / "afile").write_bytes(b"x")
    src = str(tmp_path / "src.aero")
    codec.write(src, {"a": np.ones(4, np.float32)})
    whole = api.open_whole

    def opened(*a, **k):
        reads.append("source")
        return whole(*a, **k)
    monkeypatch.setattr(api, "open_whole", opened)
    for dst, fmt, says in [("nodir/m.aero", None, "does not exist"), ("afile/m.aero", None, "Not a directory"),
                           ("adir", "aero", "refusing to replace a directory"),
                           ("nodir/m.mag", None, "does not exist")]:
        with pytest.raises(codec.UsageError, match=says):
            codec.write(str(tmp_path / dst), {"a": lazy("a"), "b": lazy("b")}, format=fmt)
        with pytest.raises(codec.UsageError, match=says):
            codec.convert(src, str(tmp_path / dst), format=fmt)
        assert reads == [], (dst, reads)
    assert sorted(os.listdir(tmp_path)) == ["adir", "afile", "src.aero"] and not os.listdir(tmp_path / "adir")
    for dst, kw in [("new/set", {"format": "aeroset"}), ("new2/m.safetensors", {"max_shard_size": 8})]:
        codec.write(str(tmp_path / dst), {"a": lazy("a"), "b": lazy("b")}, **kw)  # (made as they were)
    assert set(reads) == {"a", "b"}
