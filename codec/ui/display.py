"""Small helpers for what the command line prints, shared by the CLI and the commands a
format adds to it (see ``FormatDescriptor.commands``)."""
from __future__ import annotations

import json
import math
import re

import numpy as np

#: tensors listed by default (``--all`` lists every one)
MAX_ROWS = 50
#: metadata longer than this is shortened in human output (marked, never silently); --all or
#: --json show it whole
METADATA_WIDTH = 500


#: a character that may not reach a terminal as it is (ASCII controls but the newline, DEL, and
#: every non-ASCII character, which :func:`printable` then asks Unicode about)
_SUSPECT = re.compile(r"[^\x20-\x7e\n]")


def _escaped(m) -> str:
    c = m.group()
    if c.isprintable():
        return c
    o = ord(c)
    return f"\\x{o:02x}" if o < 0x100 else f"\\u{o:04x}" if o < 0x10000 else f"\\U{o:08x}"


def printable(text: str) -> str:
    """``text`` as human output shows it: every character that is not printable (controls such
    as ESC, BEL, CSI; DEL; bidi and other format characters; line separators; lone surrogates)
    written as a Python escape (``\\x1b``, ``\\u202e``), newlines kept -- so that no string from
    a file (a tensor name, a metadata key) can send a control sequence to the user's terminal."""
    return _SUSPECT.sub(_escaped, text)


class PrintableOut:
    """A text stream that writes everything through :func:`printable` (the command line's
    standard output in human mode: whatever a command prints, nothing from a file reaches the
    terminal raw)."""

    def __init__(self, f):
        self._f = f

    def write(self, s: str) -> int:
        return self._f.write(printable(s))

    def __getattr__(self, k):
        return getattr(self._f, k)


def plural(n: int, word: str, many: str | None = None) -> str:
    """A count and its noun: ``1 part``, ``2 parts``, ``1 Range request``."""
    return f"{n:,} {word if n == 1 else many or word + 's'}"


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


def finite(o):
    """``o`` as JSON can hold it: every NaN or infinite float as its name ("nan", "inf", "-inf":
    JSON has no number for them), in numpy values, lists and maps too."""
    if isinstance(o, float):
        return o if math.isfinite(o) else "nan" if math.isnan(o) else "inf" if o > 0 else "-inf"
    if isinstance(o, dict):
        return {k: finite(v) for k, v in o.items()}
    if isinstance(o, (list, tuple)):
        return [finite(v) for v in o]
    if isinstance(o, (np.generic, np.ndarray)):
        return finite(json_default(o))
    return o


def json_text(obj, **options) -> str:
    """``obj`` as strict JSON (RFC 8259, what ``jq`` and every parser take): numpy values plain
    (:func:`json_default`), a NaN or infinite float as its name (:func:`finite`)."""
    try:
        return json.dumps(obj, default=json_default, allow_nan=False, **options)
    except ValueError:  # (a NaN or an infinity somewhere: the slower pass only then)
        return json.dumps(finite(obj), default=json_default, allow_nan=False, **options)


def reader_options(a) -> dict:
    """Reader options from common flags: ``--remote`` (a local index's files read from its
    base_url, for formats made of several files)."""
    return {"remote": True} if getattr(a, "remote", False) else {}
