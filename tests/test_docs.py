"""docs/formats/<fmt>.md are generated from the schemas and must not drift."""
import pytest

from codec import registry
from codec.cli import main
from codec.docs import render

from .conftest import ROOT


@pytest.mark.parametrize("fmt", [f.name for f in registry.formats()])
def test_committed_docs_are_generated_from_the_schemas(fmt, capsys):
    entry = registry.get(fmt)
    committed = ROOT / "docs" / "formats" / f"{fmt}.md"
    assert committed.read_text() == render(entry.schema), \
        f"docs drifted: run `modelcodec schema {fmt} > docs/formats/{fmt}.md`"
    assert main(["schema", fmt]) == 0
    assert capsys.readouterr().out == committed.read_text()


@pytest.mark.parametrize("fmt", [f.name for f in registry.formats()])
def test_every_rule_is_documented(fmt):
    entry = registry.get(fmt)
    doc = render(entry.schema)
    for rule in entry.schema.Rule:
        assert f"`{rule.value}`" in doc and rule.doc, rule
