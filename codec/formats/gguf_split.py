"""A split GGUF model, as llama.cpp's gguf-split (and the gguf package) writes it:
``NAME-00001-of-00003.gguf`` ..., each a GGUF file holding some of the tensors and the keys
``split.no``, ``split.count`` and ``split.tensors.count``; the first holds the model's metadata
(declared in :mod:`schemas.gguf`).  Named by its first split, it reads as one model: every split
is opened (mapped: only its key/values and tensor infos are read) and checked to agree.

The reader of one split and the writer of one file are :mod:`codec.formats.gguf`'s (it gives
them to :class:`GgufSplits` and :func:`write_splits`).
"""
from __future__ import annotations

import os
import re
from typing import Callable

import numpy as np

from ..schemas import gguf as S
from ..schemas.gguf import Rule

from .. import errors as E
from ..engine import values
from ..io.atomic import refuse_url
from ..model import Report
from .multifile import MultiFileReader, plan_shards

FMT = S.FORMAT
#: each split key's value type (what gguf-split writes and llama.cpp reads)
SPLIT_TYPES = {S.SPLIT_NO_KEY: "uint16", S.SPLIT_COUNT_KEY: "uint16", S.SPLIT_TENSORS_KEY: "int32"}
_NUMPY = {"uint16": np.uint16, "int32": np.int32}


def _split_name(path: str):
    """The parts of a split's name (stem, no, count), or None (a URL: its path's)."""
    if "://" in path:
        path = path.split("?", 1)[0].split("#", 1)[0]
    return re.fullmatch(S.SPLIT_PATTERN, os.path.basename(path))


def claims(path: str) -> bool:
    """A split model is named by its first split (``NAME-00001-of-0000N.gguf``; its URL too, to
    say that it is read from local files)."""
    m = _split_name(path)
    return m is not None and int(m["no"]) == 1 and int(m["count"]) >= 1


class GgufSplits(MultiFileReader):
    """A split GGUF model (``source``: its first split).  ``metadata`` and ``value_types`` are
    the first split's but for the split keys; ``tensors`` lists every split's, split by split;
    ``tensors[name].extra["file"]`` names the split holding it."""
    format = "gguf"
    FMT = FMT
    FILES = S.SPLITS
    PATH_RULE = Rule.SPLIT_MISSING
    TENSOR_RULE = Rule.SPLIT

    def __init__(self, source, *, strict: bool = True, storage_options: dict | None = None, http=None,
                 _collect: bool = False):
        self.strict = strict
        path = os.fspath(source)
        m = _split_name(path)
        if m is None or int(m["no"]) != 1:
            raise E.UsageError(f"{path}: a split model is named by its first split (NAME-00001-of-0000N.gguf)")
        if "://" in path:  # (every split's header read in ranges, its tensors when needed)
            self._open_store(path, storage_options, http)
        count = int(m["count"])
        names = [S.SPLIT_NAME.format(stem=m["stem"], no=i + 1, count=count) for i in range(count)]
        self._split_findings: list = []
        self._begin(path, {"splits": [{"path": n} for n in names]}, "model",
                    lambda found: self._owners(found, _collect), [], _collect)

    def _owners(self, found: list, collect: bool) -> dict[str, int]:
        """name -> split, every split opened (a broken one: its own findings, in validate);
        the split keys and the names checked across the splits [SPLIT]."""
        owner: dict[str, int] = {}
        total = 0
        for k, path in enumerate(self.paths):
            if path is None:
                continue
            try:
                r = self.part(k)
            except E.FormatError:
                if collect:
                    continue
                raise
            found += self._keys(k, r, len(self.paths))
            total += len(r.tensors)
            for n in r.tensors:
                if n in owner:
                    found.append(E.StructureError(FMT, None, f"tensors[{n!r}]", Rule.SPLIT,
                                                  f"{self.listed[k]} holds {n!r}, which {self.listed[owner[n]]} "
                                                  "holds too", source=path))
                else:
                    owner[n] = k
        first = self._parts.get(0)
        want = first.metadata.get(S.SPLIT_TENSORS_KEY) if first is not None else None
        if want is not None and len(self._parts) == len(self.paths) and want != total:
            found.append(E.StructureError(FMT, None, f"kv[{S.SPLIT_TENSORS_KEY!r}]", Rule.SPLIT,
                                          f"says {want} tensors, the splits hold {total}", source=self.paths[0],
                                          expected=want, actual=total))
        self._split_findings = list(found)
        return owner

    def _keys(self, k: int, r, count: int) -> list:
        """Split ``k``'s split keys: present (in a model of more than one split), of their types,
        split.no = k, split.count = the number of splits, split.tensors.count as the first's."""
        out, md, types = [], r.metadata, r.value_types
        first = self._parts.get(0)
        want = {S.SPLIT_NO_KEY: k, S.SPLIT_COUNT_KEY: count,
                S.SPLIT_TENSORS_KEY: first.metadata.get(S.SPLIT_TENSORS_KEY) if first is not None else None}
        for key, t in SPLIT_TYPES.items():
            where = f"kv[{key!r}]"
            if key not in md:
                if count > 1:
                    out.append(E.StructureError(FMT, None, where, Rule.SPLIT, f"{self.listed[k]} has no {key}",
                                                source=self.paths[k]))
                continue
            if types.get(key) != t or (want[key] is not None and md[key] != want[key]):
                out.append(E.StructureError(FMT, None, where, Rule.SPLIT,
                                            f"{self.listed[k]} has {key} = {md[key]!r} ({types.get(key)}), not "
                                            f"{want[key]!r} ({t})", source=self.paths[k]))
        return out

    @property
    def metadata(self) -> dict:
        """The first split's metadata, but for the split keys (a copy), with their types."""
        md = self.part(0).metadata if self.listed else {}
        return values.Metadata({k: v for k, v in md.items() if k not in SPLIT_TYPES}, self.value_types)

    @property
    def value_types(self) -> dict[str, str]:
        types = self.part(0).value_types if self.listed else {}
        return {k: v for k, v in types.items() if k not in SPLIT_TYPES}

    def _cross(self, held: dict[int, dict[str, int]], rep: Report) -> None:
        """(Checked when the splits were opened: in the structure findings.)"""


# ============================================================================ writer
def split_names(path: str, count: int) -> list[str]:
    """The splits of a model written as ``path`` (``NAME.gguf``, or one of its splits' names)."""
    m = _split_name(path)
    base = os.path.basename(path)
    stem = m["stem"] if m else (base[:-len(".gguf")] if base.lower().endswith(".gguf") else base)
    return [os.path.join(os.path.dirname(path), S.SPLIT_NAME.format(stem=stem, no=i + 1, count=count))
            for i in range(count)]


def named_count(path: str) -> int | None:
    """How many splits a name of a first split (``NAME-00001-of-0000N.gguf``) says (None: not one)."""
    m = _split_name(path)
    return int(m["count"]) if m is not None and int(m["no"]) == 1 else None


def write_splits(path: str, items: list, limit: int | None, metadata: dict,
                 write_one: Callable[[str, list, dict], str]) -> str:
    """Write ``items`` ((name, ggml type, dims, data), checked) as splits of at most ``limit``
    bytes of tensors each (None: one), as gguf-split names them after ``path``: the metadata in
    the first, the split keys in every one (``write_one(path, items, metadata)`` writes one
    file, atomically).  ``path`` named as a first split must give the number of splits written
    (else a UsageError, nothing written).  Returns the first split's path."""
    refuse_url(path)
    groups = plan_shards([data.nbytes for *_, data in items], limit if limit is not None else float("inf"))
    named = named_count(path)
    if named is not None and named != len(groups):
        raise E.UsageError(f"{path}: the name says {named} splits, the model is {len(groups)} at max_shard_size "
                           f"{limit!r}: name it {os.path.basename(split_names(path, len(groups))[0])}, or as one "
                           "file (NAME.gguf)")
    if len(groups) > np.iinfo(np.uint16).max:
        raise E.UsageError(f"max_shard_size {limit!r}: {len(groups):,} splits, over split.count's "
                           f"{np.iinfo(np.uint16).max:,}")
    names = split_names(path, len(groups))
    for k, (group, name) in enumerate(zip(groups, names)):
        keys = {S.SPLIT_NO_KEY: k, S.SPLIT_COUNT_KEY: len(groups), S.SPLIT_TENSORS_KEY: len(items)}
        md = {**(metadata if k == 0 else {}), **{key: _NUMPY[t](keys[key]) for key, t in SPLIT_TYPES.items()}}
        write_one(name, [items[i] for i in group], md)
    return names[0]
