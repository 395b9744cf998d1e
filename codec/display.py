"""Small helpers for what the command line prints, shared by the CLI and the commands a
format adds to it (see ``FormatDescriptor.commands``)."""
from __future__ import annotations

import numpy as np

#: tensors listed by default (``--all`` lists every one)
MAX_ROWS = 50
#: metadata longer than this is shortened in human output (marked, never silently); --all or
#: --json show it whole
METADATA_WIDTH = 500


def fmt_shape(shape) -> str:
    return "[" + ", ".join(map(str, shape)) + "]"


def human(n: int) -> str:
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if n < 1024 or unit == "TiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return str(n)


def shortened(text: str, whole: bool) -> str:
    if whole or len(text) <= METADATA_WIDTH:
        return text
    return (f"{text[:METADATA_WIDTH]}… ({len(text) - METADATA_WIDTH:,} more characters: --all or --json show it "
            f"whole)")


def json_default(o):
    if isinstance(o, bytes):
        return o.hex()
    if isinstance(o, np.ndarray):
        return o.tolist()
    if isinstance(o, np.generic):
        return o.item()
    return str(o)


def reader_options(a) -> dict:
    """Reader options from common flags: ``--remote`` (a local index's files read from its
    base_url, for formats made of several files)."""
    return {"remote": True} if getattr(a, "remote", False) else {}
