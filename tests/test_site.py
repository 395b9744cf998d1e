"""The documentation site: its generated pages are current, and ``mkdocs build --strict`` builds
it (a broken link, a missing page or an API name that does not resolve fails the build)."""
from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys

import codec
from codec.tools import site
from codec.tools.cli import build_parser

from .conftest import ROOT


def test_generated_pages_are_current():
    assert site.main(["--check"]) == 0, "run `python -m codec.tools.site`"


def test_the_cli_page_has_every_command_and_option():
    page = site.cli_page()
    for name, _, parser in site._commands(build_parser()):
        assert f"\n## {name}\n" in page
        for action in parser._actions:
            for flag in [] if isinstance(action, argparse._HelpAction) else action.option_strings:
                assert f"`{flag}`" in page, (name, flag)


def test_every_public_name_is_in_the_api_reference():
    page = (ROOT / "docs" / "reference" / "api.md").read_text()
    documented = set(re.findall(r"^::: ([\w.]+)$", page, re.M))
    short = {d.rsplit(".", 1)[-1] for d in documented}
    missing = [n for n in codec.__all__ if n not in short and n != "__version__"
               and not any(d == f"codec.{n}" or d.startswith(f"codec.{n}.") for d in documented)
               and getattr(codec, n).__module__ != "codec.errors"]  # (errors: the whole module is documented)
    assert not missing, missing


def test_the_site_builds_strictly(tmp_path):
    out = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "-q", "-d", str(tmp_path / "site")],
                         cwd=ROOT, capture_output=True, text=True, timeout=300,
                         env={**os.environ, "NO_MKDOCS_2_WARNING": "1"})
    assert out.returncode == 0, out.stderr[-3000:]
    built = {p.relative_to(tmp_path / "site").as_posix() for p in (tmp_path / "site").rglob("index.html")}
    for fmt in codec.schemas.FORMATS:
        assert f"formats/{fmt}/index.html" in built
    assert {"reference/cli/index.html", "reference/api/index.html", "benchmarks/index.html"} <= built
    api = (tmp_path / "site" / "reference" / "api" / "index.html").read_text()
    assert "codec.api.open" in api or 'id="codec.api.open"' in api


def test_help_groups_the_commands_and_each_command_gives_an_example():
    parser = build_parser()
    top = parser.format_help()
    for title in ("look at models:", "make and move models:", "the formats:"):
        assert f"\n  {title}\n" in top
    for name, _, sub in site._commands(parser):
        if " " in name or name == "oinf":  # (a format's tool group: its subcommands have their own help)
            continue
        assert sub.epilog and sub.epilog.startswith(("example", "examples")), name
        assert f"modelcodec {name}" in sub.epilog, name
