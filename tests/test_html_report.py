"""``modelcodec inspect FILE --html OUT``: the page itself (self-contained, the byte map's
regions, the exit status), then every format's report in a real browser (Debian's Chromium under
Playwright, every request that is not file: refused and counted): a clean file's report loads
without a console error or a request, its innermost map regions tile the file, each tensor is
named and each numeric one has a histogram; a file with a flipped bit and a cut file show the
rule and mark the region at the violation's offset; a 100,000-tensor model's report stays
within 25 MB and loads (its load time is benchmarks/bench_html.py's)."""
from __future__ import annotations

import os
import re

import numpy as np
import pytest

import codec
from codec import registry
from codec.formats.hooks import fitted, flip_bit
from codec.tools import cli
from codec.tools.demo import sample_mlp
from codec.tools.html_map import tile
from codec.tools.html_page import CSP

from .html_browser import browser, leaves, not_blank, opened

FORMATS = sorted(d.name for d in registry.formats() if d.writer is not None and d.capabilities is not None)


def write_model(fmt: str, where, tensors=None) -> str:
    d = registry.get(fmt)
    caps = d.capabilities
    tensors = fitted(sample_mlp() if tensors is None else tensors, caps)
    if caps.names:  # a format naming its tensors its own way (by number): named so
        tensors = {k if re.fullmatch(caps.names, k) else str(i): a for i, (k, a) in enumerate(tensors.items())}
    path = os.path.join(where, "model" + ("" if d.directory else d.extensions[0]))
    codec.write(path, tensors, format=fmt)
    return path


def report(path: str, out: str, *extra: str) -> int:
    return cli.main(["inspect", path, "--html", out, *extra])


def files_of(path: str) -> list[str]:
    """The files a model is read from (a set: its AERO files)."""
    if os.path.isdir(path):
        return sorted(os.path.join(path, f) for f in os.listdir(path) if f.endswith(".aero"))
    return [path]


@pytest.fixture(scope="module")
def chromium():
    with browser() as b:
        yield b


# ------------------------------------------------------------------ the page, without a browser
def test_page_is_self_contained(tmp_path):
    path = write_model("safetensors", tmp_path)
    out = tmp_path / "r.html"
    assert report(path, str(out)) == 0
    text = out.read_text(encoding="utf-8")
    assert f'http-equiv="Content-Security-Policy" content="{CSP}"' in text
    assert "default-src 'none'" in CSP
    # nothing that would load: no src= or href= to anywhere, no url() in the styles
    assert not re.search(r"""\b(src|href)\s*=\s*["']?(?!#)""", text)
    assert "url(" not in text and "@import" not in text


@pytest.mark.parametrize("fmt", FORMATS)
def test_every_reader_says_where_its_bytes_lie(tmp_path, fmt):
    """Reader.byte_maps(): each file of the model, its header record at 0, what its format
    declares, and each tensor's data where TensorInfo says it is."""
    path = write_model(fmt, tmp_path)
    with codec.open(path) as r:
        maps = r.byte_maps()
        assert sorted(m[0] for m in maps) == files_of(path)
        regions = [x for m in maps for x in m[2]]
        for name, size, regs, src in maps:
            assert size == os.path.getsize(name) and regs[0][:3] == ("header", regs[0][1], 0)
            assert all(0 <= off and off + n <= size for _, _, off, n, _ in regs)
            assert {k for k, *_ in regs} - {"tensor", "header"}  # tables, metadata, chunks...
        placed = {(n, off, ln) for k, n, off, ln, _ in regions if k == "tensor"}
        assert placed == {(n, r.tensors[n].offset, r.tensors[n].nbytes) for n in r.tensors}


def test_tiling_explains_every_byte():
    regions = [("header", "H", 0, 8, {}), ("chunk", "C", 8, 40, {}), ("tensor", "a", 8, 10, {}),
               ("tensor", "b", 16, 8, {}), ("table", "T", 60, 10, {})]
    d = tile(80, regions, {"a": 0, "b": 1}, [(17, "R-1", "error")], lambda a, b: a >= 24)
    L = [d["leaves"][i:i + 5] for i in range(0, len(d["leaves"]), 5)]
    kinds = [d["kinds"][k] for _, _, k, _, _ in L]
    assert [(o, n) for o, n, *_ in L] == [(0, 8), (8, 8), (16, 2), (18, 6), (24, 24), (48, 12), (60, 10), (70, 10)]
    assert kinds == ["header", "tensor", "overlap", "tensor", "padding", "padding", "table", "padding"]
    assert d["labels"][L[2][3]] == "overlap: tensor a, tensor b"
    assert d["labels"][L[4][3]] == "zero bytes in chunk C"   # the chunk holds tensors: its rest is explained
    assert [m for *_, m in L] == [-1, -1, 0, -1, -1, -1, -1, -1] and d["marks"] == [["R-1", "error"]]
    assert d["outer"] and d["outer"][0][:3] == [8, 40, "chunk"]
    # non-zero bytes nobody declares are a gap; bytes not at hand say so
    d = tile(10, [("header", "H", 0, 4, {})], {}, [], lambda a, b: False)
    assert d["kinds"][d["leaves"][7]] == "gap"
    d = tile(10, [("header", "H", 0, 4, {})], {}, [], lambda a, b: None)
    assert d["labels"][d["leaves"][8]] == "bytes not read"


def test_statistics_and_histograms_of_samples():
    from codec.tools.html_page import histogram
    from codec.tools.html_stats import BLOCKS, limit_for, sample, stats_many
    rng = np.random.default_rng(3)
    big = rng.standard_normal(1 << 17).astype(np.float32)
    big[5], big[6], big[7] = np.nan, np.inf, 0
    arrays = [big, np.array([1, 2, 3, 0], np.int64), np.array([], np.float32), np.array([np.nan], np.float64),
              rng.standard_normal(1000).astype(np.float16)]
    for a, st in zip(arrays, stats_many(arrays)):  # large ones alone, small ones batched: numpy's numbers
        f = a[np.isfinite(a)].astype(np.float64)
        assert st["count"] == a.size and st["nan"] == np.isnan(a).sum() and st["inf"] == np.isinf(a).sum()
        if f.size:
            assert st["min"] == f.min() and st["max"] == f.max()
            assert st["mean"] == pytest.approx(f.mean(), rel=1e-9, abs=1e-12)
            assert st["std"] == pytest.approx(f.std(), rel=1e-9, abs=1e-12)
        else:
            assert st["min"] is st["mean"] is None
        assert st["zero_fraction"] == (np.count_nonzero(a == 0) / a.size if a.size else None)
    part, sampled = sample(np.arange(10_000_000), 1 << 20)
    assert sampled and part.size == (1 << 20) // BLOCKS * BLOCKS and part[0] == 0 and part[-1] == 9_999_999
    assert limit_for(10) == 1 << 20 and limit_for(100_000) == 1 << 16
    # numpy.histogram's counts; a range too narrow for float16 edges; a range past float32's
    v = rng.standard_normal(5000).astype(np.float32)
    assert histogram(v, 12)["counts"] == np.histogram(v, 12)[0].tolist()
    h = histogram(np.array([1, 1.0009765625], np.float16), 48)
    assert sum(h["counts"]) == 2 and h["counts"][0] == h["counts"][-1] == 1
    assert histogram(np.array([3e38, -3e38], np.float32), 4)["counts"] == [1, 0, 0, 1]
    assert histogram(np.array([np.nan])) is None


def test_packed_tensors_show_bytes_and_type_and_the_dequantize_hook(tmp_path, monkeypatch):
    import json
    from codec.model import Packed
    from codec.tools import html_stats
    from codec.tools.html_report import build
    q = Packed(np.arange(4 * 34, dtype=np.uint8), (128,), {"ggml_type": 8})  # Q8_0: 4 blocks of 32
    path = str(tmp_path / "q.gguf")
    codec.write(path, {"q": q, "f": np.ones(4, np.float32)})

    def rows(page):
        text = re.search(r'id="tensor-data">(.*?)</script>', page, re.S).group(1)
        return {r["name"]: r for r in json.loads(text)}
    page, rep = build(path)
    row = rows(page)["q"]
    assert rep.ok and row["dtype"] == "packed" and row["nbytes"] == 136 and row["packed"]["ggml_type"] == 8
    assert "stats" not in row and 'data-histogram="q"' not in page
    seen = []
    monkeypatch.setattr(html_stats, "dequantize", lambda t, raw: seen.append(raw.nbytes) or np.linspace(-1, 1, 128))
    page, _ = build(path)
    row = rows(page)["q"]
    assert seen == [136] and row["dequantized"] and row["stats"][:2] == [-1, 1] and 'data-histogram="q"' in page


def test_a_file_whose_tensors_live_elsewhere(tmp_path):
    """An index of a set lists tensors whose bytes are in other files: a report all the same."""
    path = write_model("aeroset", tmp_path)
    index = os.path.join(path, "index.aero")
    out = tmp_path / "r.html"
    assert report(index, str(out)) == 0
    assert out.read_text(encoding="utf-8").count("its bytes are not in this file") == len(sample_mlp())


def test_many_overlapping_regions_are_one_overlap_each_stretch():
    """Hostile tables: n regions all overlapping cost about n steps, not n^2."""
    n = 3000
    d = tile(2 * n, [("tensor", str(i), i, n, {}) for i in range(n)], {str(i): i for i in range(n)}, [],
             lambda a, b: True)
    L = [d["leaves"][i:i + 5] for i in range(0, len(d["leaves"]), 5)]
    assert sum(x[1] for x in L) == 2 * n and [x[0] for x in L] == sorted(x[0] for x in L)
    assert {d["kinds"][x[2]] for x in L} == {"tensor", "overlap", "padding"}
    assert max(len(label.split(", ")) for label in d["labels"]) <= 8


def test_exit_status_and_report_of_a_broken_file(tmp_path, capsys):
    path = write_model("gguf", tmp_path)
    cut = tmp_path / "cut.gguf"
    cut.write_bytes(open(path, "rb").read()[:5000])
    out = tmp_path / "r.html"
    assert report(str(cut), str(out)) == 1
    assert "GGUF-BOUNDS" in out.read_text(encoding="utf-8")
    assert cli.main(["inspect", path, "--full"]) == 1  # --full without --html: a usage error
    assert "--full goes with --html" in capsys.readouterr().err


def test_url_without_full_fetches_a_sample_of_each_tensor(tmp_path):
    from codec.formats.hooks import serve
    from codec.io.remote import Http
    from codec.tools.html_report import build
    big = np.arange(3 << 18, dtype=np.float32)  # 3 MiB
    path = write_model("safetensors", tmp_path, {"big": big, "small": np.ones(8, np.float32)})
    with serve(str(tmp_path)) as base:
        http = Http()
        try:
            page, rep = build(f"{base}/{os.path.basename(path)}", http=http)
        finally:
            http.close()
    assert rep.ok
    assert http.stats["bytes"] < 2 << 20  # the header, 1 MiB of "big", "small"
    assert "the first 1,048,576 bytes of 3,145,728" in page
    assert 'data-histogram="big"' in page and 'data-histogram="small"' in page


# ------------------------------------------------------------------ in the browser
def check_tiles(page, path: str) -> None:
    """Each map's innermost regions tile its file exactly."""
    sections = page.eval_on_selector_all(".bytemap", "els => els.map(e => [e.dataset.file, Number(e.dataset.size)])")
    assert len(sections) == len(files_of(path))
    for i, (name, size) in enumerate(sections):
        assert size == os.path.getsize(name)
        pos = 0
        for leaf in sorted(leaves(page, i), key=lambda x: x["offset"]):
            assert leaf["offset"] == pos and leaf["length"] > 0, (name, leaf, pos)
            pos += leaf["length"]
        assert pos == size


@pytest.mark.parametrize("fmt", FORMATS)
def test_clean_report_in_browser(chromium, tmp_path, fmt):
    path = write_model(fmt, tmp_path)
    out = tmp_path / "r.html"
    assert report(path, str(out)) == 0
    with opened(chromium, out) as seen:
        page = seen.page
        check_tiles(page, path)
        with codec.open(path) as r:
            names = list(r.tensors)
            numeric = [n for n in names if r.tensors[n].common_dtype != "packed" and r.tensors[n].nbytes]
        drawn = set(page.eval_on_selector_all("[data-name]", "els => els.map(e => e.dataset.name)"))
        assert drawn == set(names)  # on the map and in the table
        hists = set(page.eval_on_selector_all("[data-histogram]", "els => els.map(e => e.dataset.histogram)"))
        assert set(numeric) <= hists and numeric
        kinds = {x["kind"] for i in range(len(files_of(path))) for x in leaves(page, i)}
        assert {"header", "tensor"} <= kinds and kinds & {"table", "metadata", "strings"}, kinds
        assert page.locator(".verdict.ok").count() == 1
        assert not_blank(page.screenshot())
        assert seen.console_errors == [] and seen.refused == []


def test_table_sorts_filters_and_the_map_zooms(chromium, tmp_path):
    path = write_model("safetensors", tmp_path)
    out = tmp_path / "r.html"
    assert report(path, str(out)) == 0
    with opened(chromium, out) as seen:
        page = seen.page
        names = lambda: page.eval_on_selector_all("#tensors tbody tr", "els => els.map(e => e.dataset.name)")  # noqa: E731
        with codec.open(path) as r:
            by_size = sorted(r.tensors, key=lambda n: (r.tensors[n].nbytes, n))
            t = r.tensors[by_size[-1]]
        page.click("#tensors th[data-col=nbytes]")
        page.click("#tensors th[data-col=nbytes]")  # descending
        assert names()[0] == by_size[-1]
        page.fill("#tensors input", "bias")
        assert names() and all("bias" in n for n in names())
        page.fill("#tensors input", "")
        page.click(f'#bytemap-0 .bar [data-name="{t.name}"]')  # a click zooms into the region
        lo, hi = (int(x.replace(",", "")) for x in page.eval_on_selector_all(
            "#bytemap-0 .axis span", "els => [els[0].textContent, els[2].textContent]"))
        assert lo <= t.offset and t.offset + t.nbytes <= hi and hi - lo < t.nbytes * 1.2
        page.click("#bytemap-0 .whole")
        assert page.inner_text("#bytemap-0 .axis span:first-child") == "0"
        assert seen.console_errors == [] and seen.refused == []


def flipped(path: str, dst: str):
    """A copy of the model with one bit flipped that validate (full) finds, at an offset: the
    copy's path and that violation."""
    import shutil
    where = files_of(path)
    victim = where[-1]
    size = os.path.getsize(victim)
    for off in [size // 2, size - 3] + list(range(8, min(size, 2048), 5)):
        if os.path.isdir(path):
            shutil.copytree(path, dst, dirs_exist_ok=True)
            target, into = victim, os.path.join(dst, os.path.basename(victim))
        else:
            target, into = victim, dst
        flip_bit(target, into, off)
        rep = codec.validate(dst, full=True)
        found = [v for v in rep.errors if v.offset is not None]
        if rep.format != "?" and found:
            return dst, found[0]
    raise AssertionError(f"no flipped bit of {victim} is found")


def check_marked(page, v) -> None:
    """The report lists the rule, and the map marks the region holding the violation's offset."""
    rules = page.eval_on_selector_all("#violations tr[data-rule]", "els => els.map(e => e.dataset.rule)")
    assert v.rule in rules
    sections = page.eval_on_selector_all(".bytemap", "els => els.map(e => e.dataset.file)")
    i = 0 if len(sections) == 1 else sections.index(v.source)
    size = page.eval_on_selector(f"#bytemap-{i}", "e => Number(e.dataset.size)")
    off = min(v.offset, size - 1)
    [at] = [x for x in leaves(page, i) if x["offset"] <= off < x["offset"] + x["length"]]
    assert at["violation"] and v.rule in at["violation"].split(), (at, v)
    colour = page.eval_on_selector(f"#bytemap-{i} .bar [data-violation]", "e => getComputedStyle(e).backgroundImage")
    assert "228, 0, 58" in colour  # the violation colour


@pytest.mark.parametrize("fmt", FORMATS)
def test_flipped_bit_report_marks_the_violation(chromium, tmp_path, fmt):
    os.makedirs(tmp_path / "a")
    path = write_model(fmt, tmp_path / "a")
    bad, v = flipped(path, str(tmp_path / ("bad" + ("" if os.path.isdir(path) else os.path.splitext(path)[1]))))
    out = tmp_path / "r.html"
    assert report(bad, str(out), "--full") == 1
    with opened(chromium, out) as seen:
        check_tiles(seen.page, bad)
        check_marked(seen.page, v)
        assert seen.console_errors == [] and seen.refused == []


@pytest.mark.parametrize("fmt", FORMATS)
def test_cut_file_report_marks_the_violation(chromium, tmp_path, fmt):
    path = write_model(fmt, tmp_path)
    victim = files_of(path)[-1]
    data = open(victim, "rb").read()
    with open(victim, "wb") as f:
        f.write(data[:len(data) * 2 // 3])
    rep = codec.validate(path)
    v = next(v for v in rep.errors if v.offset is not None)
    out = tmp_path / "r.html"
    assert report(path, str(out)) == 1
    with opened(chromium, out) as seen:
        check_tiles(seen.page, path)
        check_marked(seen.page, v)
        assert seen.console_errors == [] and seen.refused == []


def test_100k_tensors_report_size_and_load(chromium, tmp_path):
    rng = np.random.default_rng(1)
    path = str(tmp_path / "many.safetensors")
    codec.write(path, {f"blk.{i}.w": rng.standard_normal(8).astype(np.float32) for i in range(100_000)})
    out = tmp_path / "r.html"
    assert report(path, str(out)) == 0
    assert out.stat().st_size <= 25 * 10**6
    with opened(chromium, out) as seen:
        page = seen.page
        drawn = leaves(page)
        assert len(drawn) < 5000  # grouped at coarse zoom
        check_tiles(page, path)
        assert page.locator("#tensors tbody tr").count() == 500  # drawn a page at a time
        page.fill("#tensors input", "blk.99999.")
        assert page.locator("#tensors tbody tr").count() == 1
        assert seen.console_errors == [] and seen.refused == []
