"""AEROSET: a model in several AERO files, read from a local directory.

The index JSON is declared in :mod:`schemas.aeroset` and checked by :mod:`codec.payload`; each
part and ``index.aero`` is read by :class:`codec.formats.aero.AeroReader`, opened lazily and
once.  A tensor resolves as DECISIONS.md says: global shard id (index.aero's TIDX) -> the part
listing that shard -> the tensor by name in that part's TIDX.

Remote sets (http/https, Range requests, the disk cache) are not implemented yet: opening a
URL raises :class:`codec.UsageError` saying so.
"""
from __future__ import annotations

import hashlib
import json
import os
import shutil
import tempfile
from typing import Iterable, Mapping

import numpy as np

from schemas import aeroset as S
from schemas.aeroset import Rule

from .. import errors as E
from .. import payload
from ..io import PIECE, atomic_write, fsync_dir, write_all
from ..model import LazyTensors, Reader, Report, TensorInfo
from . import aero as A

FMT = S.FORMAT


def _err(cls, path, rule, msg, source=None) -> E.FormatError:
    return cls(FMT, None, path, rule, msg, source=source)


def is_url(s: str) -> bool:
    return isinstance(s, str) and s.split("://", 1)[0].lower() in ("http", "https") and "://" in s


def find_index(path) -> str:
    """A set's directory or its index file -> the index file's path."""
    path = os.fspath(path)
    if os.path.isdir(path):
        cands = sorted(f for f in os.listdir(path) if f.endswith(S.INDEX_SUFFIX))
        if "model.aeroset.json" in cands:
            return os.path.join(path, "model.aeroset.json")
        if len(cands) != 1:
            raise E.UsageError(f"{path}: expected one *{S.INDEX_SUFFIX} index, found {cands or 'none'}")
        return os.path.join(path, cands[0])
    return path


def safe_join(base: str, rel: str, what: str, source: str) -> str:
    """``rel`` inside ``base``: relative, no escape through '..' or a symlink [AEROSET-PATH]."""
    if is_url(rel):
        raise E.UsageError(f"{source}: {what} is a URL ({rel}); remote AEROSET is not supported yet")
    if os.path.isabs(rel) or rel.startswith(("/", "\\")) or (len(rel) > 1 and rel[1] == ":"):
        raise _err(E.StructureError, what, Rule.PATH, f"absolute path {rel!r} is not allowed", source)
    root = os.path.realpath(base)
    full = os.path.realpath(os.path.join(root, rel))
    if os.path.commonpath([root, full]) != root:
        raise _err(E.StructureError, what, Rule.PATH, f"{rel!r} leaves the set's directory", source)
    return full


class AeroSet(Reader):
    """A local AEROSET (directory or index path) with the common reader shape."""
    format = "aeroset"
    FMT = FMT

    def __init__(self, source, *, strict: bool = True, _collect: bool = False):
        if not isinstance(source, (str, os.PathLike)):
            raise E.UsageError("an AEROSET is opened from its directory or index path")
        if is_url(os.fspath(source)):
            raise E.UsageError(f"{source}: remote AEROSET (http/https) is not supported yet")
        self.strict = strict
        self.index_path = find_index(source)
        self.source = self.index_path
        self.base = os.path.dirname(os.path.abspath(self.index_path))
        self.index: dict = {}
        self._parts: dict[int, A.AeroReader] = {}
        self._shard_part: dict[int, int] = {}
        self._global: A.AeroReader | None = None
        self._index: dict = {}
        self._structure = self._check()
        self.tensors = LazyTensors(self._index, self._info, FMT)
        if not _collect:
            first = next((v for v in self._structure if v.severity == "error"), None)
            if first is not None:
                self.close()
                raise first.with_source(self.source) if first.source is None else first

    # ------------------------------------------------------------------ structure
    def _check(self) -> list:
        v: list = []
        try:
            self._parse(v)
        except E.FormatError as e:
            v.append(e)
        return v

    def _parse(self, v) -> None:
        try:
            size = os.path.getsize(self.index_path)
        except OSError as e:
            raise E.UsageError(f"{self.index_path}: {e.strerror}") from None
        if size > S.MAX_INDEX_BYTES:
            raise _err(E.LimitError, "index", Rule.LIMIT, f"index is {size} bytes, over {S.MAX_INDEX_BYTES}")
        try:
            with open(self.index_path, "rb") as f:
                obj = json.loads(f.read().decode("utf-8"))
        except (UnicodeDecodeError, ValueError, RecursionError) as e:
            raise _err(E.DecodeError, "index", Rule.INDEX, f"not JSON: {e}") from None
        bad = payload.check(S.Index, obj, fmt=FMT, offset=None, path="index")
        if bad:
            v.extend(bad)
            return
        fmt = obj["format"]
        if fmt["name"] != S.FORMAT or fmt["version"] not in S.VERSIONS:
            v.append(_err(E.UnsupportedVersionError, "index.format", Rule.FORMAT,
                          f"must be AEROSET [0, 1] or [0, 2] (got {fmt['name']!r} {fmt['version']})"))
            return
        self.index = obj
        for i, part in enumerate(obj["parts"]):
            for sid in part["shards"]:
                if sid in self._shard_part:
                    v.append(_err(E.StructureError, f"index.parts[{i}].shards", Rule.SHARD,
                                  f"shard {sid} is also listed by parts[{self._shard_part[sid]}]"))
                else:
                    self._shard_part[sid] = i
            safe_join(self.base, part["path"], f"index.parts[{i}].path", self.source)
        gpath = safe_join(self.base, obj["global_tidx"]["path"], "index.global_tidx.path", self.source)
        self._global = A.AeroReader(gpath, strict=self.strict)
        self._index.update(self._global._index)
        for name, i in self._global._index.items():
            sid = self._global._entries[i].get("shard_id")
            if sid not in self._shard_part:
                v.append(_err(E.StructureError, f"index.aero TIDX {name!r}", Rule.SHARD,
                              f"tensor {name!r} is in shard {sid}, which no part lists"))

    # ------------------------------------------------------------------ reading
    @property
    def metadata(self) -> dict:
        return dict(self.index.get("model") or {})

    def part(self, i: int) -> A.AeroReader:
        """The i-th part, opened (and structure-checked) on first use."""
        r = self._parts.get(i)
        if r is None:
            path = safe_join(self.base, self.index["parts"][i]["path"], f"index.parts[{i}].path", self.source)
            r = self._parts[i] = A.AeroReader(path, strict=self.strict)
        return r

    def _locate(self, name: str) -> tuple[A.AeroReader, str]:
        if self._global is None or name not in self._index:
            raise E.NotFoundError(f"{self.source}: no tensor named {name!r}")
        sid = self._global._entries[self._index[name]]["shard_id"]
        i = self._shard_part.get(sid)
        if i is None:
            raise _err(E.StructureError, f"index.aero TIDX {name!r}", Rule.SHARD, f"no part lists shard {sid}",
                       self.source)
        r = self.part(i)
        if name not in r.tensors:
            raise _err(E.StructureError, f"index.parts[{i}]", Rule.TENSOR,
                       f"{r.source} holds shard {sid} but has no tensor {name!r}", self.source)
        return r, name

    def _info(self, i: int) -> TensorInfo:
        g = self._global.tensors[self._global._entries[i]["name"]]
        r, name = self._locate(g.name)
        t = r.tensors[name]
        if (t.dtype, t.shape, t.nbytes) != (g.dtype, g.shape, g.nbytes) or \
                t.extra.get("hash_b3", "").lower() != g.extra.get("hash_b3", t.extra.get("hash_b3", "")).lower():
            raise _err(E.StructureError, f"index.aero TIDX {name!r}", Rule.TENSOR,
                       f"{r.source} describes {name!r} differently from index.aero", self.source)
        return TensorInfo(t.name, t.dtype, t.shape, t.offset, t.nbytes, dict(t.extra, part=r.source))

    def tensor(self, name: str, *, verify: bool = True) -> np.ndarray:
        self.tensors[name]  # resolves and cross-checks against index.aero
        r, name = self._locate(name)
        return r.tensor(name, verify=verify)

    def read_tensor_bytes(self, name: str) -> bytes:
        return self.tensor(name).tobytes()

    def read_tensors(self, names: Iterable[str]) -> dict[str, np.ndarray]:
        """Many tensors at once (each part opened once)."""
        return {n: self.tensor(n) for n in names}

    # ------------------------------------------------------------------ validation
    def validate(self, full: bool = False, *, control: bool = False, progress: bool | None = None) -> Report:
        """Index, paths, shard mapping and every part's structure; ``full`` adds the sha256 and
        size of every file and every part's full AERO validation (chunk hashes, hash_b3)."""
        rep = Report("aeroset", self.source, "full" if full else "structure")
        rep.add(list(self._structure))
        if not self.index:
            return self._finish(rep)
        files = [("index.global_tidx", self.index["global_tidx"])] + \
                [(f"index.parts[{i}]", p) for i, p in enumerate(self.index["parts"])]
        for i in range(len(self.index["parts"])):
            try:
                rep.add(self.part(i).validate(full=full, progress=progress).violations)
            except E.FormatError as e:
                rep.add(e)
        if self._global is not None:
            rep.add(self._global.validate(full=full, progress=progress).violations)
        for name in self._index:
            try:
                self.tensors[name]
            except E.FormatError as e:
                rep.add(e)
        rep.checked.append(f"index, {len(self.index['parts'])} parts, {len(self._index)} tensors resolved")
        if full:
            for where, ref in files:
                try:
                    path = safe_join(self.base, ref["path"], f"{where}.path", self.source)
                    self._check_file(rep, where, ref, path)
                except E.FormatError as e:
                    rep.add(e)
            rep.checked.append(f"sha256 and size of {len(files)} files")
        return self._finish(rep)

    def _check_file(self, rep: Report, where: str, ref: dict, path: str) -> None:
        size = os.path.getsize(path)
        if "size_bytes" in ref and ref["size_bytes"] != size:
            rep.add(_err(E.IntegrityError, f"{where}.size_bytes", Rule.PART_HASH,
                         f"{ref['path']} is {size} bytes, the index says {ref['size_bytes']}", self.source))
        if "sha256" in ref:
            h = hashlib.sha256()
            with open(path, "rb") as f:
                while chunk := f.read(PIECE):
                    h.update(chunk)
            if h.hexdigest() != ref["sha256"].lower():
                rep.add(_err(E.IntegrityError, f"{where}.sha256", Rule.PART_HASH,
                             f"{ref['path']} hashes to {h.hexdigest()[:16]}..., the index says {ref['sha256'][:16]}...",
                             self.source))

    def describe(self) -> dict:
        d = super().describe()
        d.update({"version": ".".join(map(str, self.index.get("format", {}).get("version", []))),
                  "parts": [{"path": p["path"], "shards": p["shards"], "size_bytes": p.get("size_bytes")}
                            for p in self.index.get("parts", [])]})
        return d

    def close(self) -> None:
        for r in self._parts.values():
            r.close()
        self._parts.clear()
        if self._global is not None:
            self._global.close()


validate_file = AeroSet.validate_file


# =============================================================================== writer
def write_aeroset(out_dir, tensors: Mapping | Iterable, *, model_name: str = "", architecture: str = "",
                  max_shard_bytes: int | None = None, max_part_shards: int = 4, base_url: str | None = None,
                  cache: dict | None = None, tensor_hash: bool = True, uuid: bytes | None = None,
                  progress: bool | None = None) -> str:
    """Write an AEROSET directory atomically: the whole set is written into a temporary
    directory beside ``out_dir`` and renamed into place, so no half-written set is ever visible
    under the final name.  Parts are AERO files naming their WTSH chunks with global shard ids.
    The index is version [0, 1], or [0, 2] when ``base_url`` or ``cache`` hints are given."""
    if max_part_shards < 1:
        raise E.UsageError("max_part_shards must be positive")
    if base_url is not None and not is_url(base_url):
        raise E.UsageError("base_url must be an http:// or https:// URL")
    pairs = list(tensors.items()) if isinstance(tensors, Mapping) else list(tensors)
    items = [A._item(n, t) for n, t in pairs]
    sizes = A.plan_shards(items, max_shard_bytes)
    n_parts = -(-len(sizes) // max_part_shards)
    out_dir = os.path.abspath(os.fspath(out_dir))
    parent = os.path.dirname(out_dir)
    os.makedirs(parent, exist_ok=True)
    tmp = tempfile.mkdtemp(prefix="." + os.path.basename(out_dir) + ".", dir=parent)
    try:
        parts = []
        for k in range(n_parts):
            first = k * max_part_shards
            ids = list(range(first, min(first + max_part_shards, len(sizes))))
            mine = [(n, t) for (n, t), it in zip(pairs, items) if it.shard in ids]
            name = f"part-{k:03d}.aero"
            A.write_aero(os.path.join(tmp, name), mine, uuid=uuid, model_name=model_name, architecture=architecture,
                         max_shard_bytes=max_shard_bytes, tensor_hash=tensor_hash, progress=progress,
                         first_shard=first)
            parts.append({"path": name, **_file_ref(os.path.join(tmp, name)), "shards": ids})
        _write_index_aero(os.path.join(tmp, "index.aero"), tmp, parts, model_name, architecture, uuid)
        index = {"format": {"name": S.FORMAT, "version": [0, 2] if (base_url or cache) else [0, 1]},
                 "model": {"name": model_name, "architecture": architecture}}
        if base_url:
            index["base_url"] = base_url
        index["parts"] = parts
        index["global_tidx"] = {"path": "index.aero", **_file_ref(os.path.join(tmp, "index.aero"))}
        if cache:
            index["cache"] = cache
        with open(os.path.join(tmp, "model.aeroset.json"), "w", encoding="utf-8") as f:
            json.dump(index, f, indent=2)
            f.write("\n")
            f.flush()
            os.fsync(f.fileno())
        fsync_dir(tmp)
        old = None
        if os.path.exists(out_dir):
            old = tempfile.mkdtemp(prefix="." + os.path.basename(out_dir) + ".old.", dir=parent)
            os.rename(out_dir, os.path.join(old, "set"))
        os.rename(tmp, out_dir)
        fsync_dir(parent)
        if old:
            shutil.rmtree(old, ignore_errors=True)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return out_dir


def _file_ref(path: str) -> dict:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while chunk := f.read(PIECE):
            h.update(chunk)
    return {"sha256": h.hexdigest(), "size_bytes": os.path.getsize(path)}


def _write_index_aero(path: str, tmp: str, parts: list, model_name: str, architecture: str, uuid) -> None:
    """index.aero: MMSG + the union of the parts' TIDX entries (global shard ids), no weights."""
    entries = []
    for p in parts:
        with A.AeroReader(os.path.join(tmp, p["path"])) as r:
            entries.extend(dict(e) for e in r._entries)
    tidx = A._pack({"tensors": entries})
    mmsg = A._pack({"format": {"name": "AERO", "version": list(A.S.VERSION)},
                    "model": {"name": model_name, "architecture": architecture},
                    "chunks": [{"role": "manifest", "fourcc": "MMSG", "toc_index": 0},
                               {"role": "tensors", "fourcc": "TIDX", "toc_index": 1}],
                    "shards": []})
    FC, F = A.FourCC, A.S.WRITER_FLAGS
    blob = A.build_container([(FC.MMSG.value, A.S.ChunkName.MMSG, int(F[FC.MMSG]), A._zstd(mmsg), len(mmsg),
                               A.blake3_bytes(mmsg)),
                              (FC.TIDX.value, A.S.ChunkName.TIDX, int(F[FC.TIDX]), A._zstd(tidx), len(tidx),
                               A.blake3_bytes(tidx))],
                             uuid if uuid is not None else A.blake3_bytes(tidx + mmsg)[:16])
    with atomic_write(path) as f:
        write_all(f, blob)
