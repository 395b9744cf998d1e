"""Reports of ``inspect --html`` in a real browser: Debian's Chromium driven by Playwright (the
system browser by its path: nothing downloaded), every request that is not ``file:`` refused
and counted.  The tests call these; so does the command that makes the README's screenshot::

    python -m tests.html_browser docs/html-report.png
"""
from __future__ import annotations

import contextlib
import os
import sys
from dataclasses import dataclass, field
from pathlib import Path

CHROMIUM = "/usr/bin/chromium"


@dataclass
class Loaded:
    """What a page did while it loaded: console errors, refused requests, the map's leaves."""
    console_errors: list = field(default_factory=list)
    refused: list = field(default_factory=list)
    page: object = None


@contextlib.contextmanager
def browser():
    """A headless Chromium (the system's)."""
    from playwright.sync_api import sync_playwright
    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, headless=True,
                              args=["--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage"])
        try:
            yield b
        finally:
            b.close()


@contextlib.contextmanager
def opened(b, html: str | os.PathLike, *, width: int = 1280, height: int = 900):
    """The report at ``html`` loaded in a new page (every non-file: request refused, counted)."""
    ctx = b.new_context(viewport={"width": width, "height": height}, java_script_enabled=True)
    page = ctx.new_page()
    seen = Loaded(page=page)

    def route(r):
        if r.request.url.startswith("file:"):
            r.continue_()
        else:
            seen.refused.append(r.request.url)
            r.abort()
    page.route("**/*", route)
    page.on("console", lambda m: seen.console_errors.append(m.text) if m.type == "error" else None)
    page.on("pageerror", lambda e: seen.console_errors.append(str(e)))
    page.on("requestfailed", lambda r: None if r.url.startswith("file:") or r.url in seen.refused
            else seen.refused.append(r.url))
    try:
        page.goto(Path(html).resolve().as_uri(), wait_until="load")
        yield seen
    finally:
        ctx.close()


def leaves(page, index: int = 0) -> list[dict]:
    """The innermost regions drawn in map ``index``: kind, offset, length, name, violation."""
    return page.eval_on_selector_all(
        f"#bytemap-{index} .bar .leaf",
        "els => els.map(e => ({kind: e.dataset.kind, offset: Number(e.dataset.offset), "
        "length: Number(e.dataset.length), name: e.dataset.name || null, violation: e.dataset.violation || null}))")


def not_blank(png: bytes) -> bool:
    """A screenshot with something drawn in it: its pixel rows (the PNG's inflated image data)
    hold many different byte values, where a blank page's hold a handful."""
    import struct
    import zlib
    assert png[:8] == b"\x89PNG\r\n\x1a\n"
    pos, data = 8, b""
    while pos < len(png):
        n, kind = struct.unpack(">I4s", png[pos:pos + 8])
        if kind == b"IDAT":
            data += png[pos + 8:pos + 8 + n]
        pos += 12 + n
    return len(set(zlib.decompress(data))) > 40


def screenshot(html: str | os.PathLike, *, width: int = 1280, height: int = 1180) -> bytes:
    """A PNG of the top of a report, its first tensor selected."""
    with browser() as b, opened(b, html, width=width, height=height) as seen:
        return seen.page.screenshot(full_page=False)


def demo_report(out_dir: str | os.PathLike) -> str:
    """A report of a small GGUF model (some tensors quantized) made for the README."""
    import numpy as np

    import codec
    from codec.model import Packed
    from codec.tools.html_report import write_report
    rng = np.random.default_rng(7)
    tensors = {"token_embd.weight": rng.normal(0, 0.02, (512, 64)).astype(np.float32),
               "blk.0.attn_q.weight": rng.normal(0, 0.05, (64, 64)).astype(np.float16),
               "blk.0.attn_norm.weight": (1 + rng.normal(0, 0.1, 64)).astype(np.float32),
               "blk.0.ffn_up.weight": rng.standard_t(3, (256, 64)).astype(np.float32),
               "blk.0.ffn_down.weight": rng.normal(0, 0.03, (64, 256)).astype(np.float32),
               "output_norm.weight": np.ones(64, np.float32),
               # Q8_0 (ggml type 8): 128 blocks of 32 elements, 34 bytes each
               "blk.0.attn_k.weight": Packed(rng.integers(0, 256, 128 * 34, dtype=np.uint8), (64, 64), {"ggml_type": 8})}
    model = os.path.join(out_dir, "tiny-llm.gguf")
    codec.write(model, tensors, metadata={"general.architecture": "llama", "general.name": "tiny-llm"})
    out = os.path.join(out_dir, "tiny-llm.html")
    write_report(model, out)
    return out


def main(argv: list[str]) -> int:
    import tempfile
    if len(argv) != 1:
        print("usage: python -m tests.html_browser OUT.png", file=sys.stderr)
        return 2
    with tempfile.TemporaryDirectory() as d:
        png = screenshot(demo_report(d))
    Path(argv[0]).write_bytes(png)
    print(f"wrote {argv[0]}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
