"""A model in more files than the process may have descriptors open (``ulimit -n``) opens,
validates and loads exactly: a local file is read through a mapping that holds no descriptor
(codec.io.sources.FileMap), so an AEROSET holds only its directory open, however many parts it
has, and a model in several files (sharded safetensors, GGUF splits) none for the files it has
read.  Each case runs in a subprocess whose descriptor limit is below the number of files."""
import os
import subprocess
import sys

import numpy as np
import pytest

import codec
from codec.formats.aeroset import write_aeroset

pytestmark = pytest.mark.timeout(120)

#: the subprocess's descriptor limit, and the files of each model (more than the limit)
LIMIT, FILES = 64, 80


def _tensors() -> dict:
    return {f"t{i}": np.full(4, i, np.float32) for i in range(FILES)}


def _run(code: str) -> str:
    head = ("import resource, numpy as np, codec\n"
            f"resource.setrlimit(resource.RLIMIT_NOFILE, ({LIMIT}, {LIMIT}))\n")
    r = subprocess.run([sys.executable, "-c", head + code], capture_output=True, text=True, timeout=100,
                       env=dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path)))
    assert r.returncode == 0, r.stdout + r.stderr
    return r.stdout


def test_a_set_with_more_parts_than_the_descriptor_limit_opens_validates_and_loads(tmp_path):
    d = tmp_path / "set"
    write_aeroset(d, _tensors(), max_shard_bytes=16, max_part_shards=1)
    assert len(os.listdir(d)) == FILES + 2  # (the parts, index.aero and the index)
    out = _run(f"with codec.open({str(d)!r}) as s:\n"
               "    print(len(s.index['parts']), s.validate().ok, s.validate(full=True).ok)\n"
               "    got = s.read_tensors(list(s.tensors))\n"
               "    again = [s.tensor(n) for n in s.tensors]\n"
               f"    print(all(np.array_equal(got[f't{{i}}'], np.full(4, i, np.float32)) for i in range({FILES})),\n"
               "          all(np.array_equal(a, got[n]) for a, n in zip(again, s.tensors)))\n"
               "print(float(again[-1][0]))  # (a view stays valid after close)\n")
    assert out.split() == [str(FILES), "True", "True", "True", "True", f"{FILES - 1}.0"], out


@pytest.mark.parametrize("name", ["model.safetensors.index.json", "model.gguf"])
def test_a_model_in_more_files_than_the_descriptor_limit_loads(tmp_path, name):
    """Every file's tensors held at once: each file stays open in the reader."""
    codec.write(str(tmp_path / name), _tensors(), max_shard_size=16)
    first = sorted(n for n in os.listdir(tmp_path) if n.endswith((".json", ".gguf")))[0]
    assert len(os.listdir(tmp_path)) >= FILES
    out = _run(f"with codec.open({str(tmp_path / first)!r}) as r:\n"
               "    got = {n: r.tensor(n) for n in r.tensors}\n"
               "    print(r.validate().ok, len(got),\n"
               f"          all(np.array_equal(got[f't{{i}}'], np.full(4, i, np.float32)) for i in range({FILES})))\n")
    assert out.split() == ["True", str(FILES), "True"], out


def test_without_the_c_library_a_file_is_mapped_by_python(tmp_path, monkeypatch):
    """Where the C library's mmap cannot be called, Python's maps the file (a descriptor held
    per mapping): the bytes and the pages a writer may drop are the same."""
    from codec.io import sources
    monkeypatch.setattr(sources, "_LIBC", [None])
    p = str(tmp_path / "m.aero")
    codec.write(p, {"w": np.arange(1 << 16, dtype=np.float32)})
    with codec.open(p) as r:
        a = r.tensor("w")
        held = sources.file_map_of(a)
        assert r.validate(full=True).ok and np.array_equal(a, np.arange(1 << 16, dtype=np.float32))
        assert isinstance(held[0]._mm, sources.mmap.mmap) and held[1] == r.tensors["w"].offset
        held[0].madvise(sources.mmap.MADV_DONTNEED, 0, held[0].size)  # (the bytes come back from the file)
    assert np.array_equal(a, np.arange(1 << 16, dtype=np.float32))
