"""AEROSET: what the set's reader, stores and writer share -- naming the set's files, confining
local paths, the format's errors."""
from __future__ import annotations

import os

from ...schemas import aeroset as S
from ...schemas.aeroset import OPEN_ATTEMPTS, Rule

from ... import errors as E
from ...io.sources import confined

FMT = S.FORMAT


def _err(cls, path, rule, msg, source=None) -> E.FormatError:
    """(The index's errors have no byte offset.)"""
    return _make(cls, None, path, rule, msg, source=source)


_make = E.for_format(FMT)


def check_url(url: str, what: str = "URL") -> str:
    """(codec.io.remote, and its HTTP client library, load only when a set is remote.)"""
    from ...io.remote import check_url as check
    return check(url, what, FMT)


def is_url(s) -> bool:
    return isinstance(s, str) and "://" in s and s.split("://", 1)[0].lower() in ("http", "https")


def listing(path: str) -> list[str]:
    """The names in the directory ``path``, listed again when a writer swapped in a new set
    while it was listed (the old set's files are removed after the swap: a listing of it may
    lack them); OSError as os.listdir."""
    flags = os.O_RDONLY | getattr(os, "O_DIRECTORY", 0) | getattr(os, "O_CLOEXEC", 0)
    for _ in range(OPEN_ATTEMPTS):
        fd = os.open(path, flags)
        try:
            names, was = os.listdir(fd), os.fstat(fd)
        finally:
            os.close(fd)
        try:
            now = os.stat(path)
        except OSError:
            continue
        if (now.st_dev, now.st_ino) == (was.st_dev, was.st_ino):
            break
    return names


def find_index(path) -> str:
    """A set's directory or its index file -> the index file's path."""
    path = os.fspath(path)
    if os.path.isdir(path):
        try:
            names = listing(path)
        except OSError as e:
            raise E.UsageError(f"{path}: cannot list the set's directory: {e.strerror or e}") from None
        cands = sorted(f for f in names if f.endswith(S.INDEX_SUFFIX))
        if "model.aeroset.json" in cands:
            return os.path.join(path, "model.aeroset.json")
        if len(cands) != 1:
            raise E.UsageError(f"{path}: expected one *{S.INDEX_SUFFIX} index, found {cands or 'none'}")
        return os.path.join(path, cands[0])
    if not path.endswith(S.INDEX_SUFFIX) and os.path.isfile(path):
        from ... import registry
        try:
            fmt = registry.detect(registry.head_of(path), path).name
        except E.FormatError:
            fmt = None
        if fmt is not None:  # a single model file, not a set's index
            raise E.UsageError(f"{path} is a single {fmt.upper()} file, not an AEROSET (a directory, "
                               f"*{S.INDEX_SUFFIX} or its URL): use `modelcodec inspect` / codec.open")
    return path


def safe_join(base: str, rel: str, what: str, source: str) -> str:
    """``rel`` inside ``base``: relative, no escape through '..' or a symlink [AEROSET-PATH]."""
    if "://" in rel:
        raise E.UsageError(f"{source}: {what} is a URL ({rel}): open the set with remote=True (CLI: --remote)")
    full, why = confined(base, rel)
    if why is not None:
        raise _err(E.StructureError, what, Rule.PATH, why, source)
    return full


def _is_hex64(v) -> bool:
    return isinstance(v, str) and len(v) == 64 and all(c in "0123456789abcdefABCDEF" for c in v)


def _at(where: str) -> str:
    """Where an index entry names its file (``index.parts[3].path``)."""
    return f"{where}.{S.FILES.path}"
