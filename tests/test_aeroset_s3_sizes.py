"""A set's part on object storage of another size than its index entry says: the set's finding
AEROSET-PART-HASH at ``index.parts[N].size_bytes``, naming the part, its URL and both sizes --
exactly as over HTTP (tests/test_aeroset_remote.py) -- through each s3:// store (obstore, s3fs),
on moto's standalone S3 server (the ``s3`` fixture of conftest.py); never the transport's
HTTP-RANGE or HTTP-REQUEST, a truncated-chunk finding about bytes that were never the part's, or
a pass.  (An empty part object too, whose first range S3 refuses; nginx answers that one with
the whole, empty file: over HTTP it is the server's NoRangeError.)"""
import json
import os
import uuid

import numpy as np
import pytest

import codec
from codec import errors as E
from codec.formats.aeroset import write_aeroset
from codec.schemas.aeroset import Rule

pytestmark = pytest.mark.timeout(300)
MiB = 1024 * 1024
#: how a part and its entry disagree: (what is changed, by how many bytes; None: the object is
#: empty -- an upload that failed so -- and a range from its first byte is refused: S3's 416)
CASES = {"index says more": ("index", +1), "index says less": ("index", -1),
         "object longer": ("object", +7), "object shorter": ("object", -7), "object empty": ("object", None)}
#: a part read whole when the set opens it (<= 256 KiB), or by ranges (a tensor its own request)
LAYOUTS = {"small parts": (40, 4096, 64 * 1024), "big parts": (12, 40000, 400 * 1024)}


def _model(count, n):
    rng = np.random.default_rng(11)
    return {f"t.{i}": rng.standard_normal(n).astype(np.float32) for i in range(count)}


def _options(s3, reads):
    """storage_options read through obstore, or kept with s3fs by an option only s3fs takes."""
    return s3.storage_options if reads == "obstore" else dict(s3.storage_options, default_block_size=5 * MiB)


@pytest.fixture(scope="module")
def sets(s3, tmp_path_factory):
    """{(layout, case): (the index URL, the part's name, its real size, the size its entry gives,
    {tensor: array} of that part, {tensor: array} of the others)}: one bucket, a set per case."""
    fs = s3.fs()
    bucket = f"z{uuid.uuid4().hex[:12]}"
    fs.mkdir(bucket)
    out = {}
    for layout, (count, n, shard) in LAYOUTS.items():
        t = _model(count, n)
        d = tmp_path_factory.mktemp("set")
        write_aeroset(d, t, max_shard_bytes=shard, max_part_shards=2)
        index = json.loads((d / "model.aeroset.json").read_text())
        entry = index["parts"][1]
        raw = (d / entry["path"]).read_bytes()
        assert entry["size_bytes"] == len(raw) and len(index["parts"]) >= 3
        assert (len(raw) > 256 * 1024) == (layout == "big parts")
        with codec.open(str(d)) as s:
            mine = {k for k, v in s.tensors.items() if os.path.basename(v.extra["part"]) == entry["path"]}
        for case, (what, by) in CASES.items():
            prefix = f"{bucket}/{layout.split()[0]}-{case.replace(' ', '-')}"
            for f in os.listdir(d):
                fs.put_file(str(d / f), f"{prefix}/{f}")
            real, said = len(raw), len(raw)
            if what == "index":
                said += by
                changed = json.loads(json.dumps(index))
                changed["parts"][1]["size_bytes"] = said
                fs.pipe_file(f"{prefix}/model.aeroset.json", json.dumps(changed).encode())
            else:
                now = raw[:0] if by is None else raw + bytes(by) if by > 0 else raw[:by]
                real = len(now)
                fs.pipe_file(f"{prefix}/{entry['path']}", now)
            out[layout, case] = (f"s3://{prefix}/model.aeroset.json", entry["path"], real, said,
                                 {k: t[k] for k in mine}, {k: v for k, v in t.items() if k not in mine})
    yield out
    fs.rm(bucket, recursive=True)


@pytest.mark.parametrize("reads", ["obstore", "s3fs"])
@pytest.mark.parametrize("layout", list(LAYOUTS))
@pytest.mark.parametrize("case", list(CASES))
def test_a_part_of_another_size_on_s3_is_the_sets_finding_as_over_http(s3, sets, reads, layout, case):
    url, part, real, said, mine, others = sets[layout, case]
    so = _options(s3, reads)
    folder = url.rsplit("/", 1)[0]
    with codec.open(url, storage_options=so, cache=False) as s:
        assert type(s.store.http).__name__ == ("ObstoreStore" if reads == "obstore" else "FsspecStore")
        for name in sorted(mine):  # each tensor of that part: the typed finding, never bytes
            with pytest.raises(E.IntegrityError) as ei:
                s.tensor(name)
            e = ei.value
            assert (e.format, e.rule, e.path, e.expected, e.actual) == ("aeroset", Rule.PART_HASH,
                                                                         "index.parts[1].size_bytes", said, real)
            assert f"{part} is {real} bytes at {folder}/{part}, the index says {said}" in str(e)
            assert e.source == url
        for name, a in others.items():  # the other parts read as they are
            assert s.tensor(name).tobytes() == a.tobytes()
    for full in (False, True):
        rep = codec.validate(url, full=full, storage_options=so, cache=False)
        assert not rep.ok
        assert {(type(v), v.rule, v.path) for v in rep.violations} == \
            {(E.IntegrityError, Rule.PART_HASH, "index.parts[1].size_bytes")}, rep.violations
        assert all(f"{part} is {real} bytes at {folder}/{part}, the index says {said}" in str(v)
                   for v in rep.violations)


def test_a_ranged_read_of_an_object_of_another_size_says_both_sizes(s3, bucket):
    """The store's own error (format-blind): a SizeMismatchError with both sizes, from a read
    of any range -- the ranges of a fetch and a streamed one -- through either store."""
    from codec.io.open_store import store_for
    from codec.io.remote import SizeMismatchError
    url = f"s3://{bucket}/o.bin"
    data = bytes(range(256)) * 40
    s3.fs().pipe_file(url.removeprefix("s3://"), data)
    for reads in ("obstore", "s3fs"):
        with store_for(url, storage_options=_options(s3, reads)) as store:
            for size in (len(data) + 1, len(data) - 1):
                with pytest.raises(SizeMismatchError) as ei:
                    store.fetch([(url, 10, 20, size)])
                assert (ei.value.expected, ei.value.actual, ei.value.source) == (size, len(data), url)
                assert f"the file is {len(data)} bytes on the server, the index says {size}" in str(ei.value)
                got = []
                with pytest.raises(SizeMismatchError):
                    store.read_into(url, 0, 100, size, lambda at, b: got.append(bytes(b)))
                assert got == []  # (nothing of it was given out)
            with pytest.raises(SizeMismatchError) as ei:  # (a range past its end: refused, S3's 416)
                store.fetch([(url, len(data) + 5, 3, len(data) + 10)])
            assert (ei.value.expected, ei.value.actual) == (len(data) + 10, len(data))
            assert bytes(store.fetch([(url, 10, 20, len(data))])[0]) == data[10:30]


def test_a_shorter_object_on_another_filesystem_is_a_size_mismatch_too():
    """(fsspec's memory://: no size comes with a range, so the object's size is looked up when
    an answer comes short.)"""
    import fsspec
    from codec.io.open_store import store_for
    from codec.io.remote import SizeMismatchError
    root = f"memory://sizes-{uuid.uuid4().hex[:8]}"
    fs = fsspec.filesystem("memory")
    fs.pipe_file(f"{root}/o.bin", b"x" * 100)
    try:
        with store_for(root) as store:
            with pytest.raises(SizeMismatchError) as ei:
                store.fetch([(f"{root}/o.bin", 50, 60, 110)])
            assert (ei.value.expected, ei.value.actual) == (110, 100)
    finally:
        fs.rm("/" + root.split("://")[1], recursive=True)
