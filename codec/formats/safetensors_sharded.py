"""A sharded safetensors model, as Hugging Face writes it: ``model.safetensors.index.json``
(``{"metadata": {"total_size": N}, "weight_map": {tensor name: shard file}}``, declared in
:mod:`schemas.safetensors`) beside ``model-00001-of-00003.safetensors`` ... (each a safetensors
file).  Read as one model: the index is read when it is opened and every shard it names checked
to exist; a shard is opened when a tensor in it is first needed; ``validate`` checks every shard
and that each tensor is in the shard the weight map names, and no other, and the total size.

The reader of one shard and the writer of one file are :mod:`codec.formats.safetensors`'s (it
gives them to :class:`ShardedSafetensors` and :func:`write_shards`).
"""
from __future__ import annotations

import json
import os
from typing import Callable

from ..schemas import safetensors as S
from ..schemas.safetensors import Rule

from .. import errors as E
from ..engine import payload
from ..io import links
from ..io.atomic import atomic_write, refuse_url
from ..io.sources import open_regular
from ..io.writer_io import write_all
from ..model import Report
from .multifile import MultiFileReader, plan_shards

FMT = S.FORMAT


def _index_in(directory: str) -> str | None:
    """The index a directory holds: ``model.safetensors.index.json``, else its one index."""
    try:
        names = sorted(f for f in os.listdir(directory) if f.endswith(S.INDEX_SUFFIX))
    except OSError:
        return None
    if S.INDEX_NAME in names:
        return os.path.join(directory, S.INDEX_NAME)
    return os.path.join(directory, names[0]) if len(names) == 1 else None


def claims(path: str) -> bool:
    """A sharded model is named by its index (``*.safetensors.index.json``) or the directory
    holding it (local only)."""
    if "://" in path:  # (its URL: claimed, to say that it is read from local files)
        from urllib.parse import urlsplit
        try:
            return urlsplit(path).path.endswith(S.INDEX_SUFFIX)
        except ValueError:
            return False
    return path.endswith(S.INDEX_SUFFIX) or (os.path.isdir(path) and _index_in(path) is not None)


class ShardedSafetensors(MultiFileReader):
    """A sharded safetensors model (``source``: its index or the directory holding it).
    ``tensors`` lists the weight map's names in its order; ``metadata`` is the first shard's
    ``__metadata__`` (Hugging Face writes the same in every shard); ``index`` the index as read;
    ``tensors[name].extra["file"]`` names the shard holding it."""
    format = "safetensors"
    FMT = FMT
    FILES = S.SHARDS
    PATH_RULE = Rule.SHARD_PATH
    TENSOR_RULE = Rule.SHARD_TENSOR

    def __init__(self, source, *, strict: bool = True, storage_options: dict | None = None, http=None,
                 _collect: bool = False):
        self.strict = strict
        path = os.fspath(source)
        if "://" in path:  # (its shards beside it, read in ranges when needed)
            self._open_store(path, storage_options, http)
        elif os.path.isdir(path):
            found = _index_in(path)
            if found is None:
                raise E.UsageError(f"{path}: expected one *{S.INDEX_SUFFIX} index in the directory")
            path = found
        v: list = []
        self.index = self._read_index(path, v)
        wm = self.index.get("weight_map", {}) if not v else {}
        listed = list(dict.fromkeys(wm.values()))
        at = {f: k for k, f in enumerate(listed)}
        self._weight_map = wm
        self._begin(path, {"shards": [{"path": f} for f in listed]}, "index", {n: at[f] for n, f in wm.items()},
                    v, _collect)

    def _read_index(self, path: str, v: list) -> dict:
        """The index, checked against its declaration (findings into ``v``; {} when unusable)."""
        if "://" in path:
            try:
                raw = self.store.get(path, S.MAX_INDEX_BYTES)
            except E.LimitError as e:  # (the local index's finding, the size as the store saw it)
                v.append(E.LimitError(FMT, 0, "index", Rule.INDEX, f"the index is over MAX_INDEX_BYTES "
                                      f"({S.MAX_INDEX_BYTES:,}): {e.message}", source=path))
                return {}
            except BaseException:
                self.close()
                raise
        else:
            with open_regular(path, "sharded model index") as f:
                size = os.fstat(f.fileno()).st_size
                if size > S.MAX_INDEX_BYTES:
                    v.append(E.LimitError(FMT, 0, "index", Rule.INDEX, f"the index is {size:,} bytes, over "
                                          f"MAX_INDEX_BYTES ({S.MAX_INDEX_BYTES:,})", source=path))
                    return {}
                raw = f.read()
        try:
            doc, dups = payload.json_object(raw, fmt=FMT, offset=0, path="index", rule=Rule.INDEX,
                                            bytes_per_container=S.HEADER_BYTES_PER_CONTAINER)
        except E.FormatError as e:
            v.append(e.with_source(path))
            return {}
        v.extend(E.StructureError(FMT, None, "index", Rule.INDEX, f"the key {k!r} appears twice", source=path)
                 for k in dups[:50])
        v.extend(e.with_source(path) for e in payload.check(S.Index, doc, fmt=FMT, offset=None, path="index"))
        return doc

    @property
    def metadata(self) -> dict:
        """The first shard's ``__metadata__`` (a copy)."""
        return self.part(0).metadata if self.listed else {}

    def _part_findings(self, k: int, r) -> list:
        """A shard, when first opened: it holds every tensor the weight map puts there, and no
        other [SHARD_TENSOR]."""
        f, out = self.listed[k], []
        mine = [n for n, i in self._owner.items() if i == k]
        for name in mine:
            if name not in r.tensors:
                out.append(links.agree(S.MAPPED, {"name": name, "shard": f}, None, FMT, f"index.weight_map[{name!r}]",
                                       f, self.source))
        mine = set(mine)
        for name in r.tensors:
            if name not in mine:
                mapped = self._weight_map.get(name)
                got = {"name": name, "shard": mapped} if mapped is not None else None
                out.append(links.agree(S.HELD, {"name": name, "shard": f}, got, FMT, f"header[{name!r}]",
                                       S.HELD.target, self.paths[k]))
        return out

    def _cross(self, held: dict[int, dict[str, int]], rep: Report) -> None:
        """Each tensor in the shard the weight map names and no other [SHARD_TENSOR]; the
        index's total_size is their bytes together [TOTAL_SIZE]."""
        holders: dict[str, list[str]] = {}
        for k, names in held.items():
            for n in names:
                holders.setdefault(n, []).append(self.listed[k])
        for name, f in self._weight_map.items():
            if self._owner[name] not in held:
                continue  # (a shard that cannot be read: its own finding)
            there = holders.get(name, [])
            got = {"name": name, "shard": f if f in there else there[0]} if there else None
            bad = links.agree(S.MAPPED, {"name": name, "shard": f}, got, FMT, f"index.weight_map[{name!r}]",
                              f if got is None else S.MAPPED.target, self.source)
            if bad is not None:
                rep.add(bad)
        for k, names in held.items():
            for name in names:
                mapped = self._weight_map.get(name)
                if mapped is not None and (mapped == self.listed[k] or mapped not in holders[name]):
                    continue  # (where the map says, or found elsewhere: the finding above)
                got = {"name": name, "shard": mapped} if mapped is not None else None
                bad = links.agree(S.HELD, {"name": name, "shard": self.listed[k]}, got, FMT, f"header[{name!r}]",
                                  S.HELD.target, self.paths[k])
                if bad is not None:
                    rep.add(bad)
        total = self.index.get("metadata", {}).get("total_size") if not self._structure else None
        if total is not None and len(held) == len(self.listed):
            have = sum(held[self._owner[n]].get(n, 0) for n in self._weight_map)
            if have != total:
                rep.add(E.StructureError(FMT, None, "index.metadata.total_size", Rule.TOTAL_SIZE,
                                         f"the index says {total:,} bytes, its tensors take {have:,}",
                                         source=self.source, expected=total, actual=have))


# ============================================================================ writer
def index_target(path: str) -> str | None:
    """The index to write for ``path`` when it names a sharded model (an index, or a directory:
    its ``model.safetensors.index.json``); None for a single file's name."""
    if path.endswith(S.INDEX_SUFFIX):
        return path
    if path.endswith(("/", os.sep)) or os.path.isdir(path):
        return os.path.join(path.rstrip("/" + os.sep) or path, S.INDEX_NAME)
    return None


def index_for(path: str) -> str:
    """Where the index of a model named as one file (``x.safetensors``) goes: ``x.safetensors.index.json``."""
    return path[:-len(".safetensors")] + S.INDEX_SUFFIX if path.endswith(".safetensors") else path + S.INDEX_SUFFIX


def write_shards(index: str, arrays: list, limit: int | None, metadata: dict | None,
                 write_one: Callable[..., str], progress: bool | None = None) -> str:
    """Write ``arrays`` ((name, code, array) as admitted) in shards of at most ``limit`` bytes
    (None: one shard; no tensors: none, and then no metadata), named as Hugging Face names
    them after the index (``model-00001-of-00002.safetensors`` for
    ``model.safetensors.index.json``), each with
    ``metadata`` and each atomically (``write_one(path, arrays, metadata, progress)``), then
    the index (``metadata.total_size``, ``weight_map`` in the tensors' order).  Returns the
    index's path."""
    refuse_url(index)
    if not arrays and metadata:
        raise E.UsageError(f"{index}: a sharded model without tensors has no shard to hold its metadata (the index "
                           "keeps none): write it as one file (x.safetensors), or drop the metadata")
    folder = os.path.dirname(index) or "."
    if index.endswith(S.INDEX_SUFFIX) and not os.path.isdir(folder) and os.path.isdir(os.path.dirname(folder) or "."):
        try:  # (a directory named as the model: made, as a set's is)
            os.mkdir(folder)
        except OSError as e:
            raise E.UsageError(f"{folder}: cannot make the model's directory: {e.strerror or e}") from None
    stem = os.path.basename(index)[:-len(S.INDEX_SUFFIX)] or "model"
    groups = plan_shards([a.nbytes for *_, a in arrays], limit if limit is not None else float("inf")) \
        if arrays else []  # (no tensors: an index of no shards)
    names = [S.SHARD_NAME.format(stem=stem, no=i + 1, count=len(groups)) for i in range(len(groups))]
    for group, name in zip(groups, names):
        write_one(os.path.join(folder, name), [arrays[i] for i in group], metadata, progress)
    doc = {"metadata": {"total_size": sum(int(a.nbytes) for *_, a in arrays)},
           "weight_map": {arrays[i][0]: name for group, name in zip(groups, names) for i in group}}
    with atomic_write(index) as f:
        write_all(f, (json.dumps(doc, indent=2) + "\n").encode("utf-8"))
    return index
