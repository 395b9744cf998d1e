"""codec.io.links: relations between the files of a set, evaluated from Linked / Agrees declarations."""
import hashlib

from codec import errors as E
from codec.io import links
from codec.schemas.dsl import Agrees, Linked

FILES = Linked(at=("main", "parts[]"), path="p", size="n", digest="h", algorithm="sha256", rule_missing="T-MISS",
               rule="T-HASH")
SAME = Agrees(source="the index", target="the part", key="name", fields=("dtype", "hash"), rule="T-SAME")


def test_entries_follow_the_declared_key_paths_in_order():
    doc = {"parts": [{"p": "a"}, {"p": "b"}, "not a map"], "main": {"p": "m"}}
    assert links.entries(FILES, doc, "index") == [("index.main", {"p": "m"}), ("index.parts[0]", {"p": "a"}),
                                                   ("index.parts[1]", {"p": "b"})]
    assert links.entries(FILES, {"parts": []}, "index") == links.entries(FILES, {"parts": {"p": 1}}, "index") == []


def test_size_and_digest_findings_carry_the_declared_rule_and_both_values():
    entry = {"p": "f.bin", "n": 3, "h": hashlib.sha256(b"abc").hexdigest().upper()}
    assert links.whole_findings(FILES, entry, "index.main", hashlib.sha256(b"abc").hexdigest(), 3, "FMT", "s") == []
    # a file of another size: that one finding (its digest, of other bytes, is not a second one)
    bad = links.whole_findings(FILES, entry, "index.main", hashlib.sha256(b"abcd").hexdigest(), 4, "FMT", "s")
    assert [(type(e), e.rule, e.path, e.offset) for e in bad] == [(E.IntegrityError, "T-HASH", "index.main.n", None)]
    assert (bad[0].expected, bad[0].actual) == (3, 4)
    bad = links.whole_findings(FILES, entry, "index.main", hashlib.sha256(b"abd").hexdigest(), 3, "FMT", "s")
    assert [(type(e), e.rule, e.path, e.offset) for e in bad] == [(E.IntegrityError, "T-HASH", "index.main.h", None)]
    assert bad[0].algorithm == "sha256" and bad[0].actual == hashlib.sha256(b"abd").hexdigest()
    assert [e.path for e in links.whole_findings(FILES, {"p": "f.bin", "n": 3}, "index.main", None, 4, "FMT", "s")] \
        == ["index.main.n"]  # (no digest given)
    links.check_bytes(FILES, entry, "index.main", b"abc", "f.bin", "FMT", None)
    try:
        links.check_bytes(FILES, entry, "index.main", b"abd", "f.bin", "FMT", None)
    except E.IntegrityError as e:
        assert e.rule == "T-HASH" and e.expected == entry["h"].lower()
    else:
        raise AssertionError("a wrong digest passed")
    links.check_bytes(FILES, {"p": "f.bin"}, "index.main", b"anything", "f.bin", "FMT", None)  # no digest given


def test_a_missing_file_is_the_declared_missing_rule(tmp_path):
    try:
        links.require_file(FILES, {"p": "gone"}, "index.parts[2]", False, False, "FMT", "idx")
    except E.StructureError as e:
        assert (e.rule, e.path) == ("T-MISS", "index.parts[2].p") and "no such file" in str(e)
    else:
        raise AssertionError("a missing file passed")
    (tmp_path / "x").write_bytes(b"hello")
    assert links.digest_file(FILES, str(tmp_path / "x")) == (hashlib.sha256(b"hello").hexdigest(), 5)


def test_agreement_compares_the_declared_fields_only():
    src = {"name": "w", "dtype": "f32", "hash": "AB"}
    assert links.agree(SAME, src, {"name": "w", "dtype": "f32", "hash": "ab", "other": 1}, "F", "p", "part", None) is None
    assert links.agree(SAME, {"name": "w", "dtype": "f32"}, {"name": "w", "dtype": "f32", "hash": "x"}, "F", "p",
                       "part", None) is None  # a field the source lacks is not compared
    e = links.agree(SAME, src, {"name": "w", "dtype": "f16", "hash": "ab"}, "F", "p", "part", None)
    assert e.rule == "T-SAME" and (e.expected, e.actual) == ("f32", "f16")
    e = links.agree(SAME, src, {"name": "w", "dtype": "f32"}, "F", "p", "part", None)
    assert e.rule == "T-SAME" and "hash" in str(e)
    assert links.agree(SAME, src, None, "F", "p", "part", None).rule == "T-SAME"


def test_a_files_list_is_described_by_what_it_declares():
    """The formats pages' sentence of a files list says only the checks it declares (one without
    size or digest keys rendered "equal its  when given")."""
    from codec.engine.relations import describe_relation
    from codec.schemas.dsl import Linked
    bare = Linked(("shards[]",), "path", None, None, "sha256", "X-MISSING", "X-HASH")
    both = Linked(("parts[]",), "path", "size_bytes", "sha256", "sha256", "X-MISSING", "X-HASH")
    assert describe_relation(bare) == "every entry at `shards[]` names an existing regular file by `path` (`X-MISSING`)"
    text = describe_relation(both)
    assert "whose size equals its `size_bytes` and sha256 digest equals its `sha256` when given (`X-HASH`)" in text
    assert "  " not in text + describe_relation(bare)
