"""Every writer's output (AERO and AEROSET in many option combinations; safetensors, GGUF, MAG, OINF, STB), pinned byte for byte: deterministic inputs written
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
    "tiny_big": (lambda: _tiny(20_000), dict(uuid=UUID)),
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


# ---------------------------------------------------------------- every other writer (issue 35)
def _fit(name: str, items: list) -> list:
    """The items of ``items`` a format's writer takes, named as it accepts (plain arrays only)."""
    from codec import registry
    caps = registry.get(name).capabilities
    out = []
    for n, a in items:
        if not isinstance(a, np.ndarray) or a.dtype.name not in caps.dtypes or a.dtype.byteorder == ">":
            continue
        if not caps.min_rank <= a.ndim <= caps.max_rank or (not caps.zero_extents and 0 in a.shape):
            continue
        out.append((n, a))
    if caps.ids:
        out = [(str(i), a) for i, (_, a) in enumerate(out[:caps.max_tensors])]
    elif caps.names and not caps.names.startswith("(?"):
        out = [(f"t{i}.{n.encode('ascii', 'replace').decode().replace('?', '_').replace('/', '.')}", a)
               for i, (n, a) in enumerate(out)]
    return out


OTHER_CASES = {
    "safetensors_mixed": ("safetensors", _mixed, dict(metadata={"format": "np", "ü": "x"})),
    "safetensors_tiny": ("safetensors", _tiny, dict()),
    "safetensors_tiny_big": ("safetensors", lambda: _tiny(20_000), dict()),
    "safetensors_shards": ("safetensors", _mixed, dict(max_shard_size=100_000)),
    "gguf_mixed": ("gguf", _mixed, dict(metadata={"general.name": "m", "k": [1, 2, 3]})),
    "gguf_tiny": ("gguf", _tiny, dict()),
    "gguf_split": ("gguf", _mixed, dict(max_shard_size=100_000)),
    "mag_mixed": ("mag", _mixed, dict(metadata={"a": 1, "b": 2.5, "c": True})),
    "mag_tiny": ("mag", _tiny, dict()),
    "oinf_mixed": ("oinf", _mixed, dict(metadata={"a": 1, "s": "x"})),
    "oinf_tiny": ("oinf", _tiny, dict()),
    "stb_mixed": ("stb", _mixed, dict()),
    "stb_tiny": ("stb", _tiny, dict()),
}


def written_other(case: str, tmp) -> dict[str, str]:
    import codec
    fmt, make, opts = OTHER_CASES[case]
    codec.write(os.path.join(tmp, "m." + fmt), dict(_fit(fmt, make())), format=fmt, progress=False, **opts)
    return _files(tmp)


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


PINS = {'content_uuid': {'m.aero': 'b79683b272686bfa895c5b4fa2dbd294b06ea5ab76001a6567cd7acb8f40cf9d'},
 'default': {'m.aero': '748104237a27802571a81699d6f8778aa392659234567f31ba42834dcffbce2f'},
 'gathered': {'m.aero': '8f65a1c0ba3a422bd8ce93cc6e538f1a727327ab0a7b6caa7f38cd4dffe3ab17'},
 'gathered_no_hash': {'m.aero': '60022d6d8f1092d02e2fa7fc2e11aa11106dfb32648c7a98fe91d56dcaabeac3'},
 'gathered_pages_shards': {'m.aero': '65315ae231d482af65eb3f2eb306b20f9555936483744cd77ed4359cbfe70f35'},
 'integrity': {'m.aero': '211f54bb75e4a6385d95f16de45f2ae672c7090ff7bf35d5422795efaaf91896'},
 'metadata': {'m.aero': '44571908a7a68a0cbcd0125d2ac004d93f0aa2473aa5ec1c42dbdcce988d7efc'},
 'no_compress': {'m.aero': 'd0752edc90dae7b9386ff9871eec57b77210b938f5c193287e5783ffc1092800'},
 'no_compress_gathered': {'m.aero': '6eecc310a63563084a9c79a8d0b17b7dabc03fc320871ee7791b7092b1df6f6a'},
 'no_compress_shards': {'m.aero': '6a510b35e6d13d3671993cd2102d8e19fa45b65b3142f61c167d85e1e05bc201'},
 'no_compress_tiny_content_uuid': {'m.aero': 'b79aa73f36c107869d3da21e0ffce0d3107552149f7b793a639fd69760a5bf5e'},
 'no_hash': {'m.aero': 'a93d6ea2c3f533166c936f3a5c2f9a942c1cfd598a2d8a6e4f2a183ffbb4e6f2'},
 'nothing': {'m.aero': '99d1a752b8f0a33ed55440806e0a3f03c4aa9e8772eeb08d8e7775d7b074787c'},
 'only_empty': {'m.aero': 'b5c79791b1356f4cc0373a63e2a81f92d1572eedc93907ecb35e16746ce5a330'},
 'pages': {'m.aero': 'c0901b8e0ef530eb2b15dcce045629ec86e5a6a8ac7b7107d0c1844f1c3bb2b5'},
 'pages_no_hash': {'m.aero': '53507bfaed0fed688c5fb862fa50226d2af99dc591b5dc6e8c6de8db05729f8c'},
 'set_base_url': {'set/index.aero': '5b3f9b626fe0ebaf65b2c17b2ba1631d30bec33092ccd278b7ad7a0a7ee73ebe',
                  'set/model.aeroset.json': 'bc951ea96966354606c3114c6248ef88cc30b165eec9ede34923817c3824cf25',
                  'set/part-000.aero': 'e1dc52543b70491e9a0e772bdb2dd076ab2e21825892344b2035b849e6a8dc8a',
                  'set/part-001.aero': '201a6e0dd678af142ba3729269af7f86ae7148a7634e6892ba8e6db98b5608c7',
                  'set/part-002.aero': 'fdcfaff5aad8e2e2d5b5b75ad2d34ad682e53037845d49a540328cdf6c182194',
                  'set/part-003.aero': 'de7723b1cfb843ca7170bb2ea9c5ba61a3fe9eabe8e849a3c31484e9665cf0d6'},
 'set_no_hash_cache': {'set/index.aero': '4fa3b4030dffc2145dbed417f9d77b84c93cb0c820830d841fb2ffcf0cc6a227',
                       'set/model.aeroset.json': '9df81d5268210416ce5ac15f4a4efab45b8cecc9aafed57da37db18ca0c6d311',
                       'set/part-000.aero': '565de5a0ebe544d1690042f0c828d309a5475df911941480f8f8d11c6a834981',
                       'set/part-001.aero': '62c65aaf0a00de10c9b8cae618170227606021255d48f6c3ea75a96e590f3396',
                       'set/part-002.aero': '20b4b911fb7edbfdb9c68f04e9d88418fbad97fda9a53003129dd63d0b1be13a',
                       'set/part-003.aero': '9d44cb840ba64ac6abd99f74c0fe892f61384d16eef0e7b4389129efebb05b0d',
                       'set/part-004.aero': 'b99240417d03486aeb60fd488cabcca808a3ac9b02cdc890ef5abf97f871bdf6',
                       'set/part-005.aero': 'fd3e9626a17ae0185c9c4ad575b291c2bfb5ad5363821bd2ff4e9eccbd50e8e5',
                       'set/part-006.aero': 'd04c787fac8a0ffd418beaeb1ceee7f2a2c4ebbe4f15e9a576b083f140776c3a',
                       'set/part-007.aero': '7c07839fcb1d059e17346bff21b6ae63cc0d08d12ac49f0959c06bdb716eb870',
                       'set/part-008.aero': 'ccd3eb53263a14594eef25ba02eacb3b557fa2d7996937b2ce23279d037c1507',
                       'set/part-009.aero': 'e3a6789e6a76312366a2868b01aa6cd8817f32754d5eb1ce0fce330cca47928b',
                       'set/part-010.aero': 'd2e97664f5b5c7f92f4c6af61dfabd6cb43caf3ac56f518f28ecf70f2c5b16f7',
                       'set/part-011.aero': 'f3f540e70e617101d748251453d04a81248e83059d0227f2f5b99b124cc88964',
                       'set/part-012.aero': '0a435a7a75e6666e11c239769bb8a2c22f29c899771d8f11f662405963fea3f6',
                       'set/part-013.aero': '278a3b86bdd39f39711f7416ccad238e2696260d0566f73f07d3c9a6495d51f6',
                       'set/part-014.aero': 'a6184939a2e36ae3bf6a5f18499d4263c332d455a53fbdefff48778b69f99097',
                       'set/part-015.aero': 'd5daa24e8bafeaba88e89b4ccf0bbcd8079f87e6c48eddc8b3f307b4ee461ca6',
                       'set/part-016.aero': '41178ce619567915243a2c0dc5dca89d61cee9962186fbac20e8f61ff2fed38f',
                       'set/part-017.aero': 'fda3e3a4fd2b385e905308b25ec3f172eae5303cb72b7c320c1ce80d1517b86a',
                       'set/part-018.aero': '983b026ef6452d4401091f291b06d7f4d2ea95546c27b2ed86f0d2fb109503e9',
                       'set/part-019.aero': 'c53e5c6ce40a2ac865fd75d9d69894422dd9404b5cb3917b7d4d24e3e29a016b',
                       'set/part-020.aero': '3d63228a67af6ecb1da60ba4812dd666d3859011a6636769fd87d794880e9447',
                       'set/part-021.aero': '400fbce7deb9d289054247c0ffe7d3cd56e724312b0c36d8c7e6a459d16351c3'},
 'set_one_part': {'set/index.aero': 'f33b0515b713b50a3d30e9586c47b5acb0f9de97bdfc0d6c195b26e0bb5b5f28',
                  'set/model.aeroset.json': '8ab7d4aba074b3efda6948d45f6b407b1e8eff28e7edb8c5bc62f97d00c2b503',
                  'set/part-000.aero': '8f65a1c0ba3a422bd8ce93cc6e538f1a727327ab0a7b6caa7f38cd4dffe3ab17'},
 'set_parts': {'set/index.aero': 'a7764afd42255dc18f327d08ccde9c72b394da00a19e156772520e501d694360',
               'set/model.aeroset.json': '5115987e4cc6d1381f895ffe39a710af989e869587eef91ed8df1ae3280e5be3',
               'set/part-000.aero': '582565e3abe811244d8165dbfac5b4fba9b113f718c15633f9ba93158a061194',
               'set/part-001.aero': '65d52232483e24331ecb7b7bf44c6a4777e8d6d39e561450ad2daa6cd61a8cc4',
               'set/part-002.aero': 'f14e1d88f3b50e12762191433da56dd81761345dbefafc8655c23a0e8618accb'},
 'shards': {'m.aero': '99b869826ce4aaa6107f4eedc370120f0eb10b3d334176ec416aa3dc81fad29f'},
 'shards_no_hash': {'m.aero': 'af8e8d22c17ab56cead9eaa2057fc7e380891e4a15567c99c617f446b04b7cac'},
 'shards_tiny_cap': {'m.aero': 'f9f2974b8875f7d086df10e6683aa0d7099e8c3c5e7f83de6a5abbb198ebe885'},
 'tiny': {'m.aero': 'ed10d39b2451b3c724039febcbbbddd702f6583e3e182bcbb294379175ea8413'},
 'tiny_big': {'m.aero': 'dd8160a42a4d8f418113632a3be80c19502032ff9e1b5baeb968ee09f40cacf7'},
 'tiny_no_hash_content_uuid': {'m.aero': 'f5d65a82ead791d61544fda5e4f5187590163f673e8877769ce27aa859f1c0fa'},
 'tiny_shards': {'m.aero': 'd5a68c782a8a68d6bdb488ffaf8f9fa9a219d478f572bee97d39c13234f5e852'}}

OTHER_PINS = {'gguf_mixed': {'m.gguf': '7fa5078224cd89efab4163f478bb41c06d7caf01cb2689817136e34500c09131'},
              'gguf_split': {'m-00001-of-00003.gguf': '0b862db66072d2cbf3202d0689623ffaf8659e021e0456efed7dc50c9601f04b',
                             'm-00002-of-00003.gguf': '97ece7d5a8045a1c17f2962ffe7617f2e56fb8c2be91868480a8bd4ce21b2fd1',
                             'm-00003-of-00003.gguf': '061e39da16e96162dfb23569a62a719660d4932eb1f072fbe85d2e4a95ba86b2'},
              'gguf_tiny': {'m.gguf': '617bb93b19857e27f4df17e7236e8d7d9050e226ab7e41d005daab053a851a43'},
              'mag_mixed': {'m.mag': 'f069a23bd89d3aa68a73e3bab7ebe48e58735e1fd88413973466c30ee359447c'},
              'mag_tiny': {'m.mag': '049c3d8bd1d9a53b675a77f040af4008ee2186f6fed539260e809ecc7f5ab0fe'},
              'oinf_mixed': {'m.oinf': '965cbe6de1f3fa970dbee5b2ebc1bbdd102273367a8ea3777a1a85185b5f8df7'},
              'oinf_tiny': {'m.oinf': '7fdfdd78517d1574edcd66cd4dadfdd2a527c2e752fe224e9677064c6ece3813'},
              'safetensors_mixed': {'m.safetensors': 'bbaeb4f9af5b510003bde682761642e74a3c819f4a746f4bf97308d492c4892a'},
              'safetensors_shards': {'m-00001-of-00005.safetensors': '25e284f7cda7a9b0a30e98e6995eb7132f575b23f0284bf6cf05373c70f7899e',
                                     'm-00002-of-00005.safetensors': '4b10286cd0387ac01ee9b2dd8476bbb868ccaaf86d5c53dc6afa554f3906b689',
                                     'm-00003-of-00005.safetensors': '799a120c01100c5b164c8af22de04e99a9975a8c6b2c57f11faa3dcccd6789d4',
                                     'm-00004-of-00005.safetensors': 'c594c67b53a1e19c0ef9f1b1fa2edb0310c0c7767a1df4211ef844958abab0e4',
                                     'm-00005-of-00005.safetensors': '96f63907583957dcf6cbed76ffa43353aeac731d5734dd4aa8d822ea2e13e0be',
                                     'm.safetensors.index.json': 'f8f44c3c005e7e0e9650534ccc14b1559b0cf4434eb8a73921672bb69859c8a7'},
              'safetensors_tiny': {'m.safetensors': '7b2571b2b08e62bf87bbf6a2acdc281c161be3c846b879d57cea61d5322db068'},
              'safetensors_tiny_big': {'m.safetensors': 'ea168c5b4965d8bf39451bfffc6b3d3a13c91f466bb7d208a741020a4c4096e7'},
              'stb_mixed': {'m.stb': 'dc71fb4a75d2dc5528dddfba554581fdad609cb1fa9d4598f0b7d813fca9aaeb'},
              'stb_tiny': {'m.stb': 'ecc9a4291f553a944af768c3d57a618904c66e1ee24b552e5044fc485be6f86c'}}


@pytest.mark.parametrize("case", sorted(OTHER_CASES))
def test_every_writer_output_is_byte_identical_to_the_pins(case, tmp_path):
    """safetensors, GGUF, MAG, OINF and STB too, mixed and many tiny tensors (issue 35)."""
    assert written_other(case, tmp_path) == OTHER_PINS[case]


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


@pytest.mark.parametrize("case", ["tiny", "default", "gathered"])
def test_write_aero_file_without_entries_leaves_a_callers_prepared_tensors_whole(case, tmp_path):
    """A multi-file writer prepares once and hands each file its share: a write that frees what
    it made (entries=False, a shard laid out in memory) never empties the caller's list; and
    the entries it reports otherwise are the TIDX a reader decodes."""
    from codec.formats.aero import AeroReader, prepare, write_aero_file
    make, opts = AERO_CASES[case]
    items = prepare(make())
    before = [(it.name, it.nbytes) for it in items]
    w = write_aero_file(str(tmp_path / "m.aero"), items, progress=False, entries=False, **opts)
    assert w.entries == [] and [(it.name, it.nbytes) for it in items] == before
    assert _files(tmp_path) == PINS[case]
    os.remove(tmp_path / "m.aero")
    w = write_aero_file(str(tmp_path / "m.aero"), make(), progress=False, **opts)
    assert _files(tmp_path) == PINS[case]
    with AeroReader(w.path) as r:
        assert [dict(e) for e in r.entries] == w.entries


if __name__ == "__main__":
    import pprint
    import tempfile
    pins = {}
    for c in sorted(AERO_CASES) + sorted(SET_CASES):
        with tempfile.TemporaryDirectory() as d:
            pins[c] = written(c, d)
    pprint.pprint(pins, width=120)
    others = {}
    for c in sorted(OTHER_CASES):
        with tempfile.TemporaryDirectory() as d:
            others[c] = written_other(c, d)
    pprint.pprint(others, width=120)
