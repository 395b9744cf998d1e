"""The AERO and AEROSET writers' output, pinned byte for byte: deterministic inputs written
with many option combinations, the sha256 of every file written compared with pins computed
on the writer before its single-pass / vectorised rewrite (issue 13: speed changes, not bytes).

Regenerate (only when a format change is intended): ``python -m tests.test_writer_bytes``.
"""
from __future__ import annotations

import hashlib
import os

import ml_dtypes
import numpy as np
import pytest

from codec.formats.aero import TensorSpec, write_aero
from codec.formats.aeroset import write_aeroset
from codec.model import Packed

UUID = bytes(range(16))


def _mixed() -> list:
    rng = np.random.default_rng(13)
    big_be = rng.standard_normal((64, 33)).astype(">f4")
    strided = rng.standard_normal((40, 50)).astype(np.float64)[:, ::3]
    stream_src = rng.integers(0, 1 << 16, 5000, dtype=np.uint16)
    return [
        ("emb.weight", rng.standard_normal((300, 64)).astype(np.float32)),
        ("emb.half", rng.standard_normal((17, 9)).astype(np.float16)),
        ("bf", rng.standard_normal((33,)).astype(ml_dtypes.bfloat16)),
        ("empty", np.zeros((0, 4), np.float32)),
        ("scalar", np.array(3.5, np.float64)),
        ("i8", rng.integers(-128, 127, 7, dtype=np.int8)),
        ("u8", rng.integers(0, 255, 100_001, dtype=np.uint8)),
        ("i16", rng.integers(-9, 9, (3, 5), dtype=np.int16)),
        ("u16", rng.integers(0, 9, 11, dtype=np.uint16)),
        ("i32", rng.integers(-9, 9, 13, dtype=np.int32)),
        ("u32", rng.integers(0, 9, 2, dtype=np.uint32)),
        ("i64", rng.integers(-9, 9, 3, dtype=np.int64)),
        ("u64", rng.integers(0, 9, 1, dtype=np.uint64)),
        ("flags", rng.integers(0, 2, 19).astype(bool)),
        ("big_endian", big_be),
        ("strided", strided),
        ("streamed", TensorSpec(lambda: (stream_src[k:k + 1234] for k in range(0, 5000, 1234)),
                                dtype=np.uint16, shape=(50, 100))),
        ("spec_packed", TensorSpec(bytes(range(200)), dtype="packed", shape=(10, 40), quant_id=3,
                                   quant_params={"block": 32, "kind": "q4"})),
        ("gguf_q", Packed(rng.integers(0, 255, 68, dtype=np.uint8), (2, 32), {"ggml_type": 8})),
        ("empty2", np.zeros(0, np.int8)),
        ("ünïcode/name.w", rng.standard_normal(70_000).astype(np.float32)),
        ("tail", rng.standard_normal(5).astype(np.float32)),
    ]


def _tiny(n: int = 3000) -> list:
    rng = np.random.default_rng(5)
    sizes = rng.integers(1, 5, n)
    return [(f"model.layers.{i // 100}.expert{i % 100}.scale", rng.random(int(s), dtype=np.float32))
            for i, s in enumerate(sizes)]


def _gathered() -> list:
    """Many whole small pieces (< 64 KiB) adding up past the 1 MiB gather size, then a tensor of
    several 16 MiB pieces."""
    rng = np.random.default_rng(7)
    out = [(f"s{i}", rng.integers(0, 255, 30_000 + i, dtype=np.uint8)) for i in range(80)]
    out.append(("huge", rng.integers(0, 255, (17 << 20) + 3, dtype=np.uint8)))
    out.append(("after", rng.standard_normal(10).astype(np.float32)))
    return out


AERO_CASES = {
    "default": (_mixed, dict(uuid=UUID)),
    "content_uuid": (_mixed, dict()),
    "no_hash": (_mixed, dict(uuid=UUID, tensor_hash=False)),
    "no_compress": (_mixed, dict(uuid=UUID, compress=False)),
    "shards": (_mixed, dict(uuid=UUID, max_shard_bytes=80_000)),
    "shards_tiny_cap": (_mixed, dict(uuid=UUID, max_shard_bytes=1)),
    "shards_no_hash": (_mixed, dict(uuid=UUID, max_shard_bytes=100_000, tensor_hash=False)),
    "pages": (_mixed, dict(uuid=UUID, page_hashes=True, page_size=4096, max_shard_bytes=200_000)),
    "pages_no_hash": (_mixed, dict(uuid=UUID, page_hashes=True, tensor_hash=False)),
    "integrity": (_mixed, dict(uuid=UUID, control_integrity=True, page_hashes=True, page_size=1000)),
    "metadata": (_mixed, dict(uuid=UUID, model_name="m", architecture="a",
                              metadata={"k": [1, 2.5, "ü"], "z": {"n": None}},
                              quant_descriptors=[{"id": 3, "name": "q4"}], first_shard=5)),
    "tiny": (_tiny, dict(uuid=UUID)),
    "tiny_no_hash_content_uuid": (_tiny, dict(tensor_hash=False)),
    "tiny_shards": (_tiny, dict(uuid=UUID, max_shard_bytes=4096, page_hashes=True, page_size=512)),
    "gathered": (_gathered, dict(uuid=UUID)),
    "gathered_pages_shards": (_gathered, dict(uuid=UUID, page_hashes=True, max_shard_bytes=2 << 20)),
    "gathered_no_hash": (_gathered, dict(tensor_hash=False, control_integrity=True)),
    "nothing": (lambda: [], dict(uuid=UUID)),
    "no_compress_tiny_content_uuid": (_tiny, dict(compress=False)),
    "no_compress_gathered": (_gathered, dict(compress=False, control_integrity=True, page_hashes=True,
                                             max_shard_bytes=2 << 20)),
    "no_compress_shards": (_mixed, dict(uuid=UUID, compress=False, max_shard_bytes=80_000, first_shard=2)),
    "only_empty": (lambda: [("e", np.zeros(0, np.float32))], dict(uuid=UUID, page_hashes=True)),
}

SET_CASES = {
    "set_parts": (_mixed, dict(model_name="m", architecture="a", max_shard_bytes=60_000, max_part_shards=2,
                               uuid=UUID)),
    "set_base_url": (_mixed, dict(max_shard_bytes=150_000, max_part_shards=1, base_url="https://example.org/m/",
                                  metadata={"license": "x"})),
    "set_no_hash_cache": (_tiny, dict(max_shard_bytes=3000, max_part_shards=3, tensor_hash=False,
                                      cache={"max_bytes": 10})),
    "set_one_part": (_gathered, dict(uuid=UUID)),
}


def _files(root) -> dict[str, str]:
    out = {}
    for dp, _, fs in os.walk(root):
        for f in fs:
            p = os.path.join(dp, f)
            with open(p, "rb") as fh:
                out[os.path.relpath(p, root)] = hashlib.sha256(fh.read()).hexdigest()
    return dict(sorted(out.items()))


def written(case: str, tmp) -> dict[str, str]:
    if case in AERO_CASES:
        make, opts = AERO_CASES[case]
        write_aero(os.path.join(tmp, "m.aero"), make(), progress=False, **opts)
    else:
        make, opts = SET_CASES[case]
        write_aeroset(os.path.join(tmp, "set"), make(), progress=False, **opts)
    return _files(tmp)


PINS = {'no_compress_gathered': {'m.aero': '64a3eb29920738acbe380c8fde4d6c4558e075c5b3fdc0fc8e80f0e81ff63ce0'},
 'no_compress_shards': {'m.aero': 'd390ef957546d8d706fdf5c3f805c42156d0b9f7de2867e3349e573701e43b91'},
 'no_compress_tiny_content_uuid': {'m.aero': '1b2cf87ff9029717a660cde9707f55ffe53481e7b24cf10ad9cb9c7975d0e490'},
 'content_uuid': {'m.aero': '3436b3044b1b89463b9d6208264387091c4cda22a0c30d1ac113859c0ebce93c'},
 'default': {'m.aero': '6fe470717d6313eb1b99788898c0a87891897f7185094593481ff3efe4d76d09'},
 'gathered': {'m.aero': '4aa80b549bb6c1645ba93fc864fdf4942b1aef09e52022597063de5fc19e0502'},
 'gathered_no_hash': {'m.aero': 'ae4b1629dbf4f5ef08ad5a0f17b94cb79dd9933e1a23d15c292b918fdde1c5b3'},
 'gathered_pages_shards': {'m.aero': 'ad10e30e246402081dd4db405c57a934543e432bfebcc239b5207d870096166c'},
 'integrity': {'m.aero': '0707b2eecd1ef01ea205c7bcbff0f85b2801213d8b94068da4d109631cffc2d7'},
 'metadata': {'m.aero': '44571908a7a68a0cbcd0125d2ac004d93f0aa2473aa5ec1c42dbdcce988d7efc'},
 'no_compress': {'m.aero': 'c48f578eb44b0ab1d47a81f5467208f02d5393da175b6b1cfb92299b329cb036'},
 'no_hash': {'m.aero': 'cadb1a5c9357d2b63cc78ae47d5f714b54871a4cb119188ededb73fc125a30d5'},
 'nothing': {'m.aero': '521d26819469ba28a9d405235cc36a8aa311743af2006ad964732ab05e1b5724'},
 'only_empty': {'m.aero': 'fdbf740faa6d6d50dda84587048c1a2f58d3cdb91507d98a6e90046dcc0eae88'},
 'pages': {'m.aero': '24cffcc32cab4596d3ad6ecf1e325c109377f33e5174fe005a7c27d5a7042f47'},
 'pages_no_hash': {'m.aero': '4a7b8d5b8793a9c23e290d4deff31432e431448750021c1a2c398eff3e77511f'},
 'set_base_url': {'set/index.aero': 'a5bb6b055e40afab1de1a39eb9fc169a88a30e320e121852dcde76a38cf4e2ca',
                  'set/model.aeroset.json': 'b832e391bfd629fb0507443f0b4760fd297a1a4f1ca358677c350419b6d3fdc5',
                  'set/part-000.aero': '924c96f9f3748b1698f02b899148235dacca4b06865bc4a28c912a67a3530e18',
                  'set/part-001.aero': '6abc2a34ae694d2614220c35e7a1adc41bc8f3712f6cde925bb54684f29b666f',
                  'set/part-002.aero': '40b30bc4196815d3a2327a6e5406b2e3a037f06867abd0540cf1e91c8bafe4b8',
                  'set/part-003.aero': 'be9f425b2975da08b9c3aa1e1363a6b5651d1fb0b428a54ccead71ec4c977699'},
 'set_no_hash_cache': {'set/index.aero': '4fa3b4030dffc2145dbed417f9d77b84c93cb0c820830d841fb2ffcf0cc6a227',
                       'set/model.aeroset.json': 'f42ae7f0cc28f35482f04cbc26b78ef82f353c8a66adfd647d351e946b3f019d',
                       'set/part-000.aero': '6d39bf69bbed79a30879a7533fd6f9c4b881bca79e3f29e25cfcebefb09f07e7',
                       'set/part-001.aero': '8da49c5f0c9b214df107fb815689e305f85242797e612893622b1e86a8ffb07b',
                       'set/part-002.aero': '654afa39fc8d0dd74c33a906542315c2d114e4a4b68dc9a22416e787978bb1d1',
                       'set/part-003.aero': 'a411195a3d7732f3d23c23fadb734797b046037c1b9e84d8e0c14139fba81b69',
                       'set/part-004.aero': 'ac5de062bb1b2159d90c024288c6fb5e392ad88659b11c4467d3276617909a8d',
                       'set/part-005.aero': 'd8af47124ef8a370745a6302aee085e47f47ccf1e24b38def78ed67fb6fb875e',
                       'set/part-006.aero': '12d998e2527ae3e3f74841d3631718d2ab2a7d271907443b90439907999cadfc',
                       'set/part-007.aero': '9313f37199aa64ead7792943b8aa4fb3e59b6ad7c3052479442382770fcf4e78',
                       'set/part-008.aero': '9ffb5f63c3449b0b4a24d32b426ad972c98f37da5b7ce9b244b1c6bbddd2d726',
                       'set/part-009.aero': 'f44f8d53e37d220ca9bbd11d621f60de6032a847b26f61f1f285236a6529854f',
                       'set/part-010.aero': '3acf72f5fb42cacb72dfa9e91437e0cdc57782cc89fc334e9ee8e9e671c972ff',
                       'set/part-011.aero': 'b26b56f11367be4197f3409c28f5059b4518c0fcd1ead6d7be1e351066eba5ce',
                       'set/part-012.aero': 'e2ebf8a22da8337959e452f53e04ce13c1a1494e344cfcbf072acf9a5faeb4b0',
                       'set/part-013.aero': 'c19837c055e1d17af435309d663a7be4ea0ee8bcf718ce814e20a8d56aff28c9',
                       'set/part-014.aero': 'b9c615ff67bc090fc0327b75a48b3594d3381788dc885805cf6edc6694422c08',
                       'set/part-015.aero': '092e93e53a2b6b0419b07e09dee71dd41ab904b5a9ba0b9183175be899e1762a',
                       'set/part-016.aero': 'f94e5cc40ef99b448d3ccf3ffec75e9a3d776e96d80e40d91599460bec6e69a2',
                       'set/part-017.aero': '6eacf9b736b57b580a7f756d6a1c76f998a5580cebb81a4e89cb418fc510f6fe',
                       'set/part-018.aero': '91bb44d0bfd4dc1dbe93ba930dc92e7b5ef293950f71fe6f6a397164b4afa05e',
                       'set/part-019.aero': '4d9b730b7ba86d89ac2ef52873c7c56203af98cfa26fc8106f70d75cc10993e9',
                       'set/part-020.aero': 'e2fdf1ea1877a63004a04b19152179f7dda63c30ff4edf80c4cb1889243a247e',
                       'set/part-021.aero': '69e499b8e03fa9ab30d874522904f071823702d60f31e368e937de690bd924ee'},
 'set_one_part': {'set/index.aero': 'f33b0515b713b50a3d30e9586c47b5acb0f9de97bdfc0d6c195b26e0bb5b5f28',
                  'set/model.aeroset.json': '17ea820e4ca720faec99d2bd2aad302105274f2dc6a47e2c50ceb712f8277343',
                  'set/part-000.aero': '4aa80b549bb6c1645ba93fc864fdf4942b1aef09e52022597063de5fc19e0502'},
 'set_parts': {'set/index.aero': 'a7764afd42255dc18f327d08ccde9c72b394da00a19e156772520e501d694360',
               'set/model.aeroset.json': '5115987e4cc6d1381f895ffe39a710af989e869587eef91ed8df1ae3280e5be3',
               'set/part-000.aero': '582565e3abe811244d8165dbfac5b4fba9b113f718c15633f9ba93158a061194',
               'set/part-001.aero': '65d52232483e24331ecb7b7bf44c6a4777e8d6d39e561450ad2daa6cd61a8cc4',
               'set/part-002.aero': 'f14e1d88f3b50e12762191433da56dd81761345dbefafc8655c23a0e8618accb'},
 'shards': {'m.aero': '1cebedd187bbef9c2feba60d448cccc80796f3cc1c63278675c12b1390bab798'},
 'shards_no_hash': {'m.aero': '04707046e283b79d787842bee6fbbffbf5d2cb12fdefc31f147c2255339896a2'},
 'shards_tiny_cap': {'m.aero': '2e66801013f78da7f8c736a2945bc43e02ae4b8885bd2db98998648e746ab3cd'},
 'tiny': {'m.aero': '10ab9fad584fa3aad33b3eb8854d29fce11b21bde1807f55391a8f197d631ba5'},
 'tiny_no_hash_content_uuid': {'m.aero': '7136732cbe19efeb0f99edb6f4f49087f13f3556e2f45afda55db0488c3dfc09'},
 'tiny_shards': {'m.aero': '290cab6a0a6f2247063d56eb6b343352bccec0d3dabd6f5abc6d3c23e23852ba'}}


@pytest.mark.parametrize("case", sorted(AERO_CASES) + sorted(SET_CASES))
def test_writer_output_is_byte_identical_to_the_pins(case, tmp_path):
    assert written(case, tmp_path) == PINS[case]


@pytest.mark.parametrize("case", ["default", "integrity", "tiny_shards", "nothing", "no_compress_gathered"])
def test_write_aero_file_reports_what_it_wrote(case, tmp_path):
    """The digest fed the written buffers is the file's sha256; the entries are the TIDX a
    reader decodes; and the bytes are write_aero's."""
    from codec.formats.aero import AeroReader, write_aero_file
    make, opts = AERO_CASES[case]
    path = str(tmp_path / "m.aero")
    w = write_aero_file(path, make(), progress=False, file_digest=hashlib.sha256(), **opts)
    assert _files(tmp_path) == PINS[case]
    with open(path, "rb") as f:
        data = f.read()
    assert w.digest == hashlib.sha256(data).hexdigest() and w.size == len(data) and w.path == path
    with AeroReader(path) as r:
        assert [dict(e) for e in r.entries] == w.entries


if __name__ == "__main__":
    import pprint
    import tempfile
    pins = {}
    for c in sorted(AERO_CASES) + sorted(SET_CASES):
        with tempfile.TemporaryDirectory() as d:
            pins[c] = written(c, d)
    pprint.pprint(pins, width=120)
