"""``modelcodec diff A B --html OUT``: the comparison as one self-contained page, checked in
Debian's Chromium (every request that is not ``file:`` refused and counted)."""
from __future__ import annotations

import numpy as np
import pytest

import codec
from codec.compare import HISTOGRAM_EDGES
from codec.tools.cli import main
from codec.tools.html_page import CSP

from .html_browser import browser, not_blank, opened


@pytest.fixture(scope="module")
def chromium():
    with browser() as b:
        yield b


def _models(tmp_path):
    rng = np.random.default_rng(3)
    base = {"w": rng.standard_normal((64, 32)).astype(np.float32), "b": np.arange(16, dtype=np.int32),
            "same": np.ones(8, np.float16), "gone": np.zeros(4, np.float32)}
    a = codec.write(str(tmp_path / "a.safetensors"), base, metadata={"k": "1", "old": "x"})
    changed = dict(base)
    w = base["w"].copy()
    w[0, :3] += np.array([1e-3, 2.0, 5e4], np.float32)  # three differences three decades apart and more
    changed["w"] = w
    changed["b"] = base["b"].astype(np.int64)  # a dtype change
    del changed["gone"]
    changed["new"] = np.ones(2, np.float32)
    b = codec.write(str(tmp_path / "b.aero"), changed, metadata={"k": "2", "added": "y"})
    return a, b, w, base["w"]


def test_diff_html_page(tmp_path, chromium, capsys):
    a, b, w_b, w_a = _models(tmp_path)
    out = tmp_path / "d.html"
    assert main(["diff", a, b, "--html", str(out)]) == 1  # the exit status is diff's, the page written anyway
    capsys.readouterr()
    text = out.read_text()
    assert CSP in text and "<script src" not in text and "http://" not in text.replace('xmlns="http://www.w3.org/2000/svg"', "")
    with opened(chromium, out) as seen:
        page = seen.page
        assert page.locator(".verdict.differ").count() == 1
        rows = page.eval_on_selector_all("#diff-tensors tbody tr",
                                         "els => els.map(e => [e.dataset.name, e.dataset.status])")
        assert dict(rows) == {"w": "different", "b": "dtype_changed", "same": "identical", "gone": "only_a",
                              "new": "only_b"}
        hists = page.eval_on_selector_all("[data-diff-histogram]", "els => els.map(e => e.dataset.diffHistogram)")
        assert hists == ["w"]
        bars = page.eval_on_selector_all('[data-diff-histogram="w"] g rect', "els => els.map(e => e.textContent)")
        d = np.abs(w_b.astype(np.float64) - w_a)[w_b != w_a]
        expected = np.histogram(d, bins=np.array(HISTOGRAM_EDGES[1:-1]))[0]
        assert sorted(int(x.replace(",", "")) for x in bars) == sorted(int(c) for c in expected if c)
        meta = dict(page.eval_on_selector_all("table.metadata tr[data-key]",
                                              "els => els.map(e => [e.dataset.key, e.dataset.change])"))
        assert meta == {"k": "changed", "old": "removed", "added": "added"}
        page.fill("#diff-tensors input", "only")
        shown = page.eval_on_selector_all("#diff-tensors tbody tr", "els => els.map(e => e.dataset.name)")
        assert sorted(shown) == ["gone", "new"]
        assert not_blank(page.screenshot())
        assert seen.console_errors == [] and seen.refused == []


def test_diff_html_of_equal_models(tmp_path, chromium, capsys):
    t = {"x": np.arange(10, dtype=np.float32)}
    a = codec.write(str(tmp_path / "a.gguf"), t)
    b = codec.write(str(tmp_path / "b.mag"), t)
    out = tmp_path / "same.html"
    assert main(["diff", a, b, "--html", str(out), "--json"]) == 0
    capsys.readouterr()
    with opened(chromium, out) as seen:
        assert seen.page.locator('.verdict.same[data-equal="true"]').count() == 1
        assert seen.page.locator("[data-diff-histogram]").count() == 0
        assert seen.console_errors == [] and seen.refused == []
