"""A remote mirror cannot make us return or cache wrong bytes: trust flows from the index JSON
(sha256 of index.aero) to index.aero's hash_b3 of every tensor, and nothing unverified is cached."""
import hashlib
import json
import os
import shutil

import numpy as np
import pytest

from codec import errors as E
from codec.io.cache import DIGEST, RangeCache
from codec.formats.aero import OPEN_PREFIX, AeroReader, build_container
from codec.formats.aeroset import AeroSet, write_aeroset

from .servers import Nginx

pytestmark = pytest.mark.timeout(120)

TARGET = "t.17"


def _model():
    rng = np.random.default_rng(5)
    return {f"t.{i}": rng.standard_normal(16).astype(np.float32) for i in range(5000)}


def _rebuild(path, edit=lambda fc, data: data, extra=()):
    """The file rebuilt with every chunk stored uncompressed (so a same-length edit keeps the
    file's size), ``edit(fourcc, payload)`` applied to each payload, ``extra`` chunks added."""
    with AeroReader(str(path)) as r:
        chunks = [(c.fourcc, c.name, c.flags & ~1, edit(c.fourcc, bytes(r.chunk_bytes(c, verify=False))))
                  for c in r.chunks]
        uuid = r.uuid
    path.write_bytes(build_container(chunks + list(extra), uuid))


def _publish(d):
    """A genuine set whose files are stored uncompressed, the JSON's sha256/size updated."""
    write_aeroset(d, _model(), max_shard_bytes=1 << 20, max_part_shards=8)
    idx = json.loads((d / "model.aeroset.json").read_text())
    for ref in idx["parts"] + [idx["global_tidx"]]:
        # index.aero gets a chunk an opener has no reason to read: the file is not read whole
        _rebuild(d / ref["path"], extra=[(b"XPAD", "padding", 0, bytes(1 << 20))] if ref is idx["global_tidx"] else ())
        data = (d / ref["path"]).read_bytes()
        ref.update(sha256=hashlib.sha256(data).hexdigest(), size_bytes=len(data))
    (d / "model.aeroset.json").write_text(json.dumps(idx))
    return idx


def _forge_mirror(genuine, mirror):
    """The attack: index.aero and the part, each the same size as the genuine file, saying that
    TARGET hashes to what patched bytes hash to, and the part holding those patched bytes."""
    import blake3
    shutil.copytree(genuine, mirror)
    model = _model()
    patched = (model[TARGET] + 1).astype(np.float32).tobytes()
    old_h = blake3.blake3(model[TARGET].tobytes()).hexdigest().encode()
    new_h = blake3.blake3(patched).hexdigest().encode()
    swap = lambda fc, data: data.replace(old_h, new_h) if fc in (b"TIDX",) else data  # noqa: E731
    _rebuild(mirror / "index.aero", swap)

    def part_edit(fc, data):
        data = swap(fc, data)
        if fc == b"WTSH" and model[TARGET].tobytes() in data:
            data = data.replace(model[TARGET].tobytes(), patched)
        return data
    _rebuild(mirror / "part-000.aero", part_edit)
    for f in ("index.aero", "part-000.aero"):
        assert (mirror / f).stat().st_size == (genuine / f).stat().st_size
        assert (mirror / f).read_bytes() != (genuine / f).read_bytes()


def test_a_forged_mirror_cannot_return_or_poison_bytes(tmp_path):
    www = tmp_path / "www"
    genuine = www / "m"
    _publish(genuine)
    assert (genuine / "index.aero").stat().st_size > OPEN_PREFIX  # not read whole by the opener
    _forge_mirror(genuine, www / "mirror")
    cache = RangeCache(tmp_path / "cache")
    want = _model()[TARGET].tobytes()
    with Nginx(www) as n:
        url, mirror = n.url + "/m/model.aeroset.json", n.url + "/mirror"
        with pytest.raises(E.IntegrityError) as ei:
            with AeroSet(url, base_url=mirror, cache=cache) as s:
                s.tensor(TARGET)
        assert ei.value.rule == "AEROSET-PART-HASH"
        stored = [os.path.join(d, f) for d, _, fs in os.walk(tmp_path / "cache") for f in fs if len(f) == 64]
        assert not any(open(p, "rb").read()[:-DIGEST] == (www / "mirror" / "index.aero").read_bytes()
                       for p in stored)
        # the mirror is repaired: the right bytes come back through the same cache
        shutil.rmtree(www / "mirror")
        shutil.copytree(genuine, www / "mirror")
        with AeroSet(url, base_url=mirror, cache=cache) as s:
            assert s.verified and s.tensor(TARGET).tobytes() == want
        with AeroSet(url, base_url=mirror, cache=cache) as s:  # and again, from the cache
            assert s.tensor(TARGET).tobytes() == want


def test_a_forged_part_alone_is_refused_by_the_trusted_hash(tmp_path):
    """index.aero genuine (its sha256 checks out), the part forged consistently with itself:
    the part's own TIDX cannot vouch for its bytes."""
    www = tmp_path / "www"
    genuine = www / "m"
    _publish(genuine)
    _forge_mirror(genuine, www / "mirror")
    shutil.copy(genuine / "index.aero", www / "mirror" / "index.aero")
    cache = RangeCache(tmp_path / "cache")
    with Nginx(www) as n:
        url, mirror = n.url + "/m/model.aeroset.json", n.url + "/mirror"
        with AeroSet(url, base_url=mirror, cache=cache) as s:
            with pytest.raises(E.FormatError):
                s.tensor(TARGET)
            for verify in (True, False):
                try:
                    got = s.read_tensors([TARGET], verify=verify)[TARGET].tobytes()
                except E.FormatError:
                    continue
                assert not verify and got != _model()[TARGET].tobytes()  # asked for unverified bytes
        stored = [os.path.join(d, f) for d, _, fs in os.walk(tmp_path / "cache") for f in fs if len(f) == 64]
        patched = (_model()[TARGET] + 1).astype(np.float32).tobytes()
        assert not any(open(p, "rb").read()[:-DIGEST] == patched for p in stored)


def test_without_a_sha256_for_index_aero_remote_reads_say_they_are_unverified(tmp_path):
    www = tmp_path / "www"
    write_aeroset(www / "m", {"w": np.arange(8, dtype=np.float32)})
    p = www / "m" / "model.aeroset.json"
    idx = json.loads(p.read_text())
    del idx["global_tidx"]["sha256"]
    p.write_text(json.dumps(idx))
    cache = RangeCache(tmp_path / "cache")
    with Nginx(www) as n:
        with AeroSet(n.url + "/m/model.aeroset.json", cache=cache) as s:
            assert s.verified is False
            assert s.tensor("w").tobytes() == np.arange(8, dtype=np.float32).tobytes()
            assert s.describe()["verified"] is False
    # cached: only whole files the JSON's sha256 vouched for (the small part), never a tensor
    vouched = {ref["sha256"] for ref in idx["parts"]}
    for f in [os.path.join(d, f) for d, _, fs in os.walk(tmp_path / "cache") for f in fs if len(f) == 64]:
        assert hashlib.sha256(open(f, "rb").read()[:-DIGEST]).hexdigest() in vouched
    with AeroSet(www / "m") as s:  # the caller's own files
        assert s.verified is True
