"""Relations between the files of a multi-file model, evaluated from their declarations
(``schemas.dsl``: :class:`~schemas.dsl.Linked`, :class:`~schemas.dsl.Agrees`).

Format-blind: a reader hands over the document it parsed (an index) and the files it opened;
which entries name files, under which keys their size and digest are, which digest algorithm,
which fields of a record listed twice must agree, and every rule id come from the schema.
"""
from __future__ import annotations

import hashlib
import os

from ..schemas.dsl import Agrees, Linked

from .. import errors as E
from .integrity import WARM_PIECE, WarmDigest, range_pieces
from .sources import open_regular


def entries(decl: Linked, doc: dict, root: str) -> list[tuple[str, dict]]:
    """(where, entry) of every entry of ``doc`` naming a file, in declaration order;
    ``where`` is its path (``index.parts[3]``)."""
    out: list[tuple[str, dict]] = []
    for at in decl.at:
        found = [(root, doc)]
        for step in at.split("."):
            many = step.endswith("[]")
            key = step[:-2] if many else step
            nxt = []
            for where, node in found:
                if not isinstance(node, dict) or key not in node:
                    continue
                if many:
                    items = node[key] if isinstance(node[key], list) else []
                    nxt += [(f"{where}.{key}[{i}]", v) for i, v in enumerate(items)]
                else:
                    nxt.append((f"{where}.{key}", node[key]))
            found = nxt
        out += [(w, e) for w, e in found if isinstance(e, dict)]
    return out


def digest_of(decl: Linked):
    """A new hash object of the declared algorithm (fed as :class:`codec.io.integrity.WarmDigest`
    feeds it)."""
    return WarmDigest(hashlib.new(decl.algorithm))


def require_file(decl: Linked, entry: dict, where: str, is_file: bool, exists: bool, fmt: str,
                 source: str | None) -> None:
    """The file an entry names exists and is a regular file [``decl.rule_missing``]."""
    if not is_file:
        what = "not a regular file" if exists else "no such file"
        raise E.StructureError(fmt, None, f"{where}.{decl.path}", decl.rule_missing,
                               f"{entry[decl.path]}: {what}", source=source)


def digest_file(decl: Linked, path: str, file=None) -> tuple[str, int]:
    """(hex digest, size) of a local file, read once in pieces (``file``: that file, already
    open -- read from its start whatever its position, and closed)."""
    h, n = digest_of(decl), 0
    buf = bytearray(WARM_PIECE)  # (read into one buffer the cache holds: hashed where it lands)
    view = memoryview(buf)
    with open_regular(path, "listed file") if file is None else file as f:
        os.lseek(f.fileno(), 0, os.SEEK_SET)
        while k := os.readv(f.fileno(), [buf]):
            h.update(view[:k])
            n += k
    return h.hexdigest(), n


def digest_source(decl: Linked, src) -> tuple[str, int]:
    """(hex digest, size) of the bytes of a :class:`codec.io.sources.Source` (a file's mapping),
    hashed a piece at a time (each piece's pages released once hashed)."""
    h = digest_of(decl)
    for piece in range_pieces(src, 0, src.size)():
        h.update(piece)
    return h.hexdigest(), src.size


def whole_findings(decl: Linked, entry: dict, where: str, digest: str | None, size: int, fmt: str,
                   source: str | None) -> list[E.FormatError]:
    """A whole file's size and digest against its entry [``decl.rule``]: one finding at most --
    a file of another size is that finding (its digest, of other bytes, is not compared)."""
    name = entry[decl.path]
    if decl.size is not None and decl.size in entry and entry[decl.size] != size:
        return [E.IntegrityError(fmt, None, f"{where}.{decl.size}", decl.rule,
                                 f"{name} is {size} bytes, the index says {entry[decl.size]}", source=source,
                                 expected=entry[decl.size], actual=size)]
    out: list[E.FormatError] = []
    if digest is not None and decl.digest is not None and decl.digest in entry:
        want = entry[decl.digest].lower()
        if digest != want:
            out.append(E.IntegrityError(fmt, None, f"{where}.{decl.digest}", decl.rule,
                                        f"{name} hashes to {digest[:16]}..., the index says {want[:16]}...",
                                        source=source, algorithm=decl.algorithm, expected=want, actual=digest))
    return out


def check_bytes(decl: Linked, entry: dict, where: str, data, name: str, fmt: str, source: str | None) -> None:
    """Bytes read whole (``name``: where from) against the entry's digest, before any of them is
    used [``decl.rule``]."""
    want = entry.get(decl.digest) if decl.digest is not None else None
    if want is None:
        return
    h = digest_of(decl)
    h.update(data)
    got = h.hexdigest()
    if got != want.lower():
        raise E.IntegrityError(fmt, None, f"{where}.{decl.digest}", decl.rule,
                               f"{name} hashes to {got[:16]}..., the index says {want[:16]}...", source=source,
                               algorithm=decl.algorithm, expected=want.lower(), actual=got)


def agree(decl: Agrees, source_row: dict, target_row: dict | None, fmt: str, path: str, where: str,
          source: str | None) -> E.FormatError | None:
    """The finding when a record listed in ``decl.source`` and ``decl.target`` (``where``: the
    target's file) differs, or the target lacks it; None when they agree [``decl.rule``]."""
    key = source_row[decl.key]
    if target_row is None:
        return E.StructureError(fmt, None, path, decl.rule, f"{where} has no record with {decl.key} {key!r}", source=source)
    for f in decl.fields:
        a = source_row.get(f)
        if a is None:
            continue
        b = target_row.get(f)
        if isinstance(a, str) and isinstance(b, str):
            a, b = a.lower(), b.lower()
        if a != b:
            return E.StructureError(fmt, None, path, decl.rule,
                                    f"{where} describes {key!r} differently from {decl.source} ({f}: {b!r}, "
                                    f"not {a!r})", source=source, expected=a, actual=b)
    return None
