"""The one-line rendering of each rule's error, pinned: every shared invalid vector's verdict and
every case of the AERO, MAG and safetensors rule tables, rendered as a user sees it (``FMT path @ 0xOFFSET:
message [RULE]``, without the file name), must equal tests/golden/rule_errors.txt.  A change of
wording, path or offset shows here; when it is meant, regenerate the file with
``MODELCODEC_UPDATE_GOLDEN=1 python -m pytest tests/test_rule_renderings.py`` and review the diff."""
import os

import codec
from codec import errors as E

from .conftest import ROOT, vectors_dir
from .test_aero_rules import CASES as AERO_CASES
from .test_conformance import VERDICTS
from .test_mag_rules import CASES as MAG_CASES
from .test_safetensors import CASES as SAFETENSORS_CASES

GOLDEN = ROOT / "tests" / "golden" / "rule_errors.txt"


def _line(e: E.FormatError) -> str:
    where = f" @ 0x{e.offset:x}" if e.offset is not None else ""
    path = f" {e.path}" if e.path else ""
    return f"{type(e).__name__}: {e.format}{path}{where}: {e.message} [{e.rule}]"


def _finding(source, fmt: str, cls, rule) -> E.FormatError:
    """The error a user meets first for that rule: raised at open, else listed by validation
    (structure, full, then control level)."""
    try:
        codec.open(source, format=fmt).close()
    except E.FormatError as e:
        if isinstance(e, cls) and e.rule == rule:
            return e
    for level in (dict(), dict(full=True), dict(control=True)):
        rep = codec.validate(source, format=fmt, **level)
        for v in rep.violations:
            for x in (v, *v.consequences):
                if isinstance(x, cls) and x.rule == rule:
                    return x
    raise AssertionError(f"{fmt}: no {cls.__name__}[{rule}]")


def _renderings() -> list[str]:
    out = []
    for fmt, table in VERDICTS.items():
        for name, (_, cls, rule) in table.items():
            out.append(f"{rule}\t{fmt}/{name}\t" + _line(_finding(vectors_dir(fmt) / name, fmt, cls, rule)))
    for rule, (_, cls, blob) in AERO_CASES.items():
        out.append(f"{rule}\taero case\t" + _line(_finding(blob, "aero", cls, rule)))
    for rule, (cls, blob) in MAG_CASES.items():
        out.append(f"{rule}\tmag case\t" + _line(_finding(blob, "mag", cls, rule)))
    for blob, rule, cls in SAFETENSORS_CASES:
        out.append(f"{rule}\tsafetensors case\t" + _line(_finding(blob, "safetensors", cls, rule)))
    return sorted(out)


def test_every_rule_error_renders_as_pinned():
    got = "\n".join(_renderings()) + "\n"
    if os.environ.get("MODELCODEC_UPDATE_GOLDEN") == "1":
        GOLDEN.write_text(got, encoding="utf-8")
    want = GOLDEN.read_text(encoding="utf-8")
    assert got.splitlines() == want.splitlines()
    assert all("\n" not in line for line in got.splitlines())  # one line each
