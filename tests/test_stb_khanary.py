"""KHΛNARY glyph words: the 40 words of ../shared/vectors/stb/knu_vectors.json, and properties."""
import hashlib
import json
import mmap

import pytest
from hypothesis import given, strategies as st

from codec.formats.khanary import BinFileTable, GlyphError, GlyphFitError, MappedBin, decode, encode
from codec.schemas.khanary import Glyph, Rule

from .conftest import vectors_dir

VDIR = vectors_dir("stb")
KNU = json.loads((VDIR / "knu_vectors.json").read_text())
VALID = [w for w in KNU["words"] if w["expect"] == "valid"]
INVALID = [w for w in KNU["words"] if w["expect"] == "invalid"]


def table():
    return BinFileTable(KNU["bin_file_table"], base_dir=VDIR)


def test_forty_words():
    assert len(KNU["words"]) == 40


@pytest.mark.parametrize("w", VALID, ids=lambda w: w["word"])
def test_valid_word_decodes_encodes_and_resolves(w):
    word = int(w["word"], 16)
    g = decode(word)
    assert g.glyph.name == w["glyph"] and g.glyph_id == int(w["glyph_id"], 16)
    assert (g.ver, g.arity, g.auth_class, g.bin_file_id) == (w["ver"], w["arity"], w["auth_class"], w["bin_file_id"])
    assert g.flags == int(w["flags"].split()[0], 16) and g.payload == int(w["payload"], 16)
    assert g.shape_id == w.get("shape_id")
    assert encode(g.glyph, g.bin_file_id, g.shape_id, auth_class=g.auth_class, arity=g.arity, flags=g.flags) == word
    res = w["resolves_to"]
    with table() as t:
        out = t.run(word)
        r = t.reader(g.bin_file_id)
        assert r.source.endswith(res["file"])
        if g.glyph == Glyph.G_LOAD_BIN_TENSOR:
            info = r.tensors[str(res["tensor_id"])]
            assert info.dtype_name == res["dtype"] and list(info.shape) == res["dims"]
            assert (info.offset, info.nbytes) == (res["offset"], res["size_bytes"])
            assert hashlib.sha256(out.tobytes(order="A")).hexdigest() == res["sha256"]
        elif g.glyph == Glyph.G_MMAP_BIN_REGION:
            assert isinstance(out, MappedBin) and len(out.buf) == res["file_size"]
            assert (out.data_offset, out.file_size) == (res["data_offset"], res["file_size"])
        else:
            start, length = out
            assert start % mmap.PAGESIZE == 0 and start <= res["data_offset"]
            assert start + length >= res["file_size"]


EXPECT_INVALID = {
    "0x23002013": Rule.PARITY, "0x23000013": Rule.BIN_REF, "0x13002012": Rule.VER, "0x23002011": Rule.AUTH,
    "0x23002F12": Rule.BIN_FILE, "0x23002292": Rule.TENSOR, "0x23102803": Rule.BIN_FILE, "0x23201002": Rule.BIN_REF,
}


@pytest.mark.parametrize("w", INVALID, ids=lambda w: w["label"])
def test_invalid_word_is_a_typed_error(w):
    word = int(w["word"], 16)
    if "aliasing" in w["label"]:
        # the word itself decodes (to bin_file_id 1, shape_id 0); what is invalid is encoding
        # tensor_id 16, which must be refused instead of wrapping into the next field
        with pytest.raises(GlyphFitError) as ei:
            encode(Glyph.G_LOAD_BIN_TENSOR, 0, 16)
        assert ei.value.rule == Rule.FIT
        g = decode(word)
        assert (g.bin_file_id, g.shape_id) == (1, 0)
        return
    with pytest.raises(GlyphError) as ei:
        with table() as t:
            t.run(word)
    assert ei.value.rule == EXPECT_INVALID[w["word"]] and ei.value.format == "khanary"


def test_each_file_is_opened_once():
    with table() as t:
        a = t.reader(0)
        t.run(0x23002003)
        assert t.reader(0) is a


def test_bin_file_table_optional_checks():
    entry = dict(KNU["bin_file_table"]["1"])
    with BinFileTable({1: entry | {"size": 452, "alignment": 64}}, VDIR) as t:
        t.reader(1)
    with pytest.raises(GlyphError, match="bytes"):
        BinFileTable({1: entry | {"size": 1}}, VDIR).reader(1)
    with pytest.raises(GlyphError, match="float16"):
        BinFileTable({1: entry | {"dtype": "float16"}}, VDIR).reader(1)


words = st.builds(lambda g, b, s, a, ar, fl: (g, b, s, a, ar, fl),
                  st.sampled_from(list(Glyph)), st.integers(0, 255), st.integers(0, 15), st.integers(1, 7),
                  st.integers(0, 15), st.sampled_from([2, 3, 6, 7]))


@given(words)
def test_words_roundtrip_and_every_single_bit_flip_is_caught(args):
    g, b, s, auth, arity, flags = args
    if g == Glyph.G_LOAD_BIN_TENSOR:
        b = b & 0xF
        word = encode(g, b, s, auth_class=auth, arity=arity, flags=flags)
    else:
        word = encode(g, b, auth_class=auth, arity=arity, flags=flags)
    d = decode(word)
    assert (d.glyph, d.bin_file_id, d.auth_class, d.arity, d.flags) == (g, b, auth, arity, flags)
    assert bin(word).count("1") % 2 == 0
    for bit in range(32):
        with pytest.raises(GlyphError) as ei:
            decode(word ^ (1 << bit))
        assert ei.value.rule == Rule.PARITY


@pytest.mark.parametrize("kw", [dict(bin_file_id=16, shape_id=0), dict(bin_file_id=0, shape_id=-1),
                                dict(bin_file_id=0, shape_id=1, auth_class=8), dict(bin_file_id=0, shape_id=1, auth_class=0),
                                dict(bin_file_id=0, shape_id=1, arity=16)])
def test_out_of_range_values_are_errors(kw):
    with pytest.raises((GlyphFitError, GlyphError)):
        encode(Glyph.G_LOAD_BIN_TENSOR, **kw)
    with pytest.raises(GlyphFitError):
        encode(Glyph.G_MMAP_BIN_REGION, 256)


MUTATED = [
    (lambda w: (w & ~(0xFF << 20)) | (0x33 << 20), Rule.GLYPH),  # no such glyph
    (lambda w: w | (1 << 15), Rule.RESERVED),                    # FLAGS bit 15
]


def mutated(mutate) -> int:
    word = mutate(encode(Glyph.G_LOAD_BIN_TENSOR, 0, 1) & ~1)
    return word | bin(word).count("1") % 2  # parity fixed: the word is wrong only where mutated


@pytest.mark.parametrize("mutate, rule", MUTATED)
def test_an_unknown_glyph_or_a_reserved_flag_is_refused(mutate, rule):
    word = mutated(mutate)
    with pytest.raises(GlyphError) as ei:
        decode(word)
    assert ei.value.rule == rule and ei.value.format == "khanary" and f"0x{word:08X}" in str(ei.value)
