"""The mutation check of the safety guards (.ci/mutants.py) stays true to the code: every
mutant still applies (its original text is found exactly once in its file, so a rewritten guard
cannot drop out of the check unnoticed), names test files that exist, and the committed result
(.ci/MUTANTS.md) lists every mutant as killed."""
import importlib.util
import re
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
_spec = importlib.util.spec_from_file_location("mutants", ROOT / ".ci" / "mutants.py")
mutants = importlib.util.module_from_spec(_spec)
sys.modules.setdefault("mutants", mutants)  # (its dataclasses look their module up there)
_spec.loader.exec_module(mutants)


@pytest.mark.parametrize("m", mutants.MUTANTS, ids=[m.id for m in mutants.MUTANTS])
def test_every_mutant_applies_to_the_code_as_it_is(m):
    assert mutants.check(m, (ROOT / m.file).read_text()) is None
    assert m.mutated != m.original
    assert all((ROOT / t).is_file() for t in m.tests), m.tests


def test_the_committed_result_lists_every_mutant_killed():
    rows = dict(re.findall(r"^\| `([^`]+)` \|.*\| (\w[^|]*?) \| [0-9.]+ \|$", (ROOT / ".ci" / "MUTANTS.md").read_text(),
                           re.M))
    assert set(rows) == {m.id for m in mutants.MUTANTS}, "re-run .ci/mutants.py and commit .ci/MUTANTS.md"
    assert {k for k, v in rows.items() if v != "killed"} == set()
