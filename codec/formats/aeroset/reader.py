"""The AEROSET reader: the index JSON checked against its declaration, index.aero (the global
TIDX) and the parts parsed on first use, each tensor resolved by its global shard id and cross-checked
with the part holding it."""
from __future__ import annotations

import contextlib
import os
import time
from typing import TYPE_CHECKING, Iterable

import numpy as np

from ...schemas import aeroset as S, http as H
from ...schemas.aeroset import Rule

from ... import errors as E
from ...io import links
from ...engine import payload
from ...engine.nesting import MAX_NESTING, json_loads, json_shape
from ...engine.records import first_error
from ...io.cache import RangeCache
from ...model import Checksum, Reader, Report, TensorInfo, closed_error
from ...ui.display import plural
from .. import aero as A
from ...io.store import folder_of, local_path, tensor_limit
from .common import FMT, OPEN_ATTEMPTS, _at, _err, find_index
from .stores import LocalFiles, RemoteFiles

if TYPE_CHECKING:  # (the HTTP client library loads only when a set is remote)
    from ...io.remote import Http, HttpOptions


class AeroSet(Reader):
    """An AEROSET — a directory, its index path, or an http(s) URL of its index — with the
    common reader shape (``tensors``, ``tensor()``, ``validate()``, ``describe()``).

    Remote options: ``remote=True`` reads a local index's files from its ``base_url``;
    ``base_url=`` overrides the index's (a mirror); ``cache`` is a :class:`RangeCache`, a
    directory, or False (default: the shared disk cache, unless the index's cache hints say
    ``enabled: false``); ``http`` is an :class:`HttpOptions` or :class:`Http`;
    ``max_tensor_bytes`` caps a tensor read remotely.
    """
    format = "aeroset"
    FMT = FMT

    def __init__(self, source, *, strict: bool = True, remote: bool | None = None, base_url: str | None = None,
                 cache=None, http: HttpOptions | Http | None = None, storage_options: dict | None = None,
                 max_tensor_bytes: int = H.MAX_TENSOR_BYTES, _collect: bool = False):
        if not isinstance(source, (str, os.PathLike)):
            raise E.UsageError("an AEROSET is opened from its directory, index path or URL")
        source = local_path(os.fspath(source))
        self.strict = strict
        self._options = (remote, base_url, cache, http, tensor_limit(max_tensor_bytes), storage_options)
        if "://" in source:
            self._reset()
            self.source = self.index_path = source
            self.store = self._remote_store(source)
            try:
                self.store.http.check(source, "the index")
                if source.endswith("/"):  # a folder on object storage: its index
                    self.source = self.index_path = self.store.index_url = self._find_index(source)
                    if base_url is None:
                        self.store.base_url = self.index_path.rsplit("/", 1)[0]
                self._structure = self._check()
            except BaseException:
                self.store.close()
                raise
        else:
            self._open_local(source)
        self._built_infos = None
        if not _collect:
            first = first_error(self._structure, self.strict)
            if first is not None:
                self.close()
                raise first.with_source(self.source) if first.source is None else first

    def _reset(self) -> None:
        self.index: dict = {}
        self._parts: dict[int, A.AeroReader] = {}
        self._broken: dict[int, A.AeroReader] = {}  # parts opened only to map their bytes (byte_maps)
        self._shard_part: dict[int, int] = {}
        #: name -> the local part holding it, once a read resolved it and cross-checked it with
        #: index.aero: its next reads go straight to the part's prepared columns
        self._ready: dict[str, A.AeroReader] = {}
        self._global: A.AeroReader | None = None
        self._index: dict = {}
        self.store = None
        self._closed = False

    def _find_index(self, folder: str) -> str:
        """The index in a folder on object storage (the rule of a local directory's)."""
        fold = folder.split("://", 1)[1].strip("/") + "/"
        rel = [u.split("://", 1)[1].lstrip("/") for u in self.store.http.list(folder)]
        names = sorted(r[len(fold):] for r in rel if r.startswith(fold) and "/" not in r[len(fold):]
                       and r.endswith(S.INDEX_SUFFIX))
        if "model.aeroset.json" in names or len(names) == 1:
            return folder.rstrip("/") + "/" + ("model.aeroset.json" if "model.aeroset.json" in names else names[0])
        raise E.UsageError(f"{folder}: expected one *{S.INDEX_SUFFIX} index, found {names or 'none'}")

    def _open_local(self, source: str) -> None:
        """A local set, every file it lists held (mapped: :class:`LocalFiles`).  When opening
        fails because a writer replaced the set meanwhile (the directory held is no longer the
        set's, and the index or a file it lists is gone), the set is opened again from its new
        index, at most OPEN_ATTEMPTS times: what is read is always one version, whole."""
        changed = False
        for attempt in range(OPEN_ATTEMPTS):
            last = attempt == OPEN_ATTEMPTS - 1
            self._reset()
            try:
                self.source = self.index_path = find_index(source)
                self.store = LocalFiles(self.index_path)
                self._structure = self._check()
            except E.ModelcodecError:
                held = self.store is not None
                gone = held and self.store.replaced()
                self.close()
                if last or not (gone or (changed and not held)):
                    raise
                if not held:  # no set there for a moment (a writer renaming without RENAME_EXCHANGE)
                    time.sleep(0.002 * (attempt + 1))
                changed = True
                continue
            except BaseException:
                self.close()
                raise
            if not (self._structure or self.store.missing) or not self.store.replaced():
                return
            self.close()
            changed = True
        raise _err(E.StructureError, "index", Rule.MISSING, f"the set was replaced {OPEN_ATTEMPTS} times while "
                   "it was being opened (its files were gone before they could be opened): try again", self.source)

    def _remote_store(self, index_url: str | None, index_base: str | None = None) -> RemoteFiles:
        """The files of a set at ``index_url`` (or, for a local index read remotely, at its
        base_url: the option's, else ``index_base``), read through the store that reaches them."""
        _, base_url, cache, http, max_tensor, storage_options = self._options
        from ...io.open_store import store_for
        where = index_url or base_url or index_base or "https://"  # (none: said when a file is located)
        http = store_for(where, storage_options=storage_options, http=http)
        if cache is None or cache is True:
            cache = RangeCache()
        elif cache is not False and not isinstance(cache, RangeCache):
            cache = RangeCache(cache)
        base = base_url
        if base is None and index_url is not None:
            base = folder_of(index_url)
        return RemoteFiles(index_url, base, http, cache or None, max_tensor, self.source)

    @property
    def remote(self) -> bool:
        return self.store.remote

    # ------------------------------------------------------------------ structure
    def _check(self) -> list:
        v: list = []
        try:
            self._parse(v)
        except E.FormatError as e:
            v.append(e)
        return v

    def _parse(self, v) -> None:
        raw = self._raw = self.store.index_bytes()
        depth, _ = json_shape(raw)
        if depth > MAX_NESTING:  # (before decoding: the verdict the same at any depth of the caller's stack)
            raise payload.too_deep(FMT, None, "index", Rule.LIMIT, "JSON document", depth).with_source(self.source)
        try:
            obj = json_loads(raw.decode("utf-8"))
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
        self._settle_store(obj)
        for i, part in enumerate(obj["parts"]):
            for sid in part["shards"]:
                if sid in self._shard_part:
                    v.append(_err(E.StructureError, f"index.parts[{i}].shards", Rule.SHARD,
                                  f"shard {sid} is also listed by parts[{self._shard_part[sid]}]"))
                else:
                    self._shard_part[sid] = i
            self.store.locate(part, f"index.parts[{i}].path")
        self.store.pin(obj)  # (a local set: every file of this version held from now on)
        self._global = self.store.open(obj["global_tidx"], "index.global_tidx", self.strict, whole=True)
        #: whether every tensor read is checked against a hash the index JSON vouches for: local
        #: files are the caller's own; a remote set needs index.aero's sha256 in the JSON (its
        #: TIDX carries the hash_b3 of every tensor)
        self.verified = not self.store.remote or bool(obj["global_tidx"].get("sha256"))
        self.store.trusted = self.verified
        self._index = self._global.rows
        ents = self._global.entries
        if ents.ok:  # (a malformed index.aero TIDX is reported by index.aero's own checks)
            sids = ents.column("shard_id")
            unlisted = [u for u in np.unique(sids) if int(u) not in self._shard_part]
            names = ents.column("name")
            for i in np.flatnonzero(np.isin(sids, np.array(unlisted, dtype=sids.dtype)))[:50]:
                v.append(_err(E.StructureError, f"index.aero TIDX {names[i]!r}", Rule.SHARD,
                              f"tensor {names[i]!r} is in shard {int(sids[i])}, which no part lists"))

    def _settle_store(self, index: dict) -> None:
        """Remote details that need the index: base_url, the cache hints, a local index read remotely."""
        remote, base_url, cache, _, _, _ = self._options
        if isinstance(self.store, LocalFiles):
            if remote:  # a local index never reaches the network unless asked to
                self.store.close()
                self.store = None
                self.store = self._remote_store(None, index.get("base_url") if base_url is None else None)
            else:
                return
        st = self.store
        if base_url is None and "base_url" in index:
            st.base_url = st.http.check(index["base_url"], "index.base_url")
        hints = index.get("cache")
        if cache is None and isinstance(hints, dict) and hints.get("enabled") is False:
            st.cache = None

    # ------------------------------------------------------------------ reading
    @property
    def raw_metadata(self) -> dict:
        """The index's ``model`` map in the common vocabulary (its ``name`` is ``model_name``),
        and the model's metadata index.aero holds (the writer puts it there, once)."""
        m = dict(self.index.get("model") or {})
        if "name" in m and "model_name" not in m:
            m["model_name"] = m.pop("name")
        try:
            g = self._global.raw_metadata if self._global is not None and self._global.chunk(A.FourCC.MJSN) else {}
        except E.UsageError:  # (index.aero's, read when first asked for: the set is closed)
            if not self._closed:
                raise
            raise closed_error(self, "metadata", call=False) from None
        return {**g, **m} if g else m

    def part(self, i: int) -> A.AeroReader:
        """The i-th part, opened (and structure-checked) on first use."""
        if not isinstance(i, (int, np.integer)):
            raise E.UsageError(f"part(i): i must be an integer, not {type(i).__name__}")
        r = self._parts.get(i)
        if r is None:
            if not 0 <= i < len(self.index.get("parts", ())):
                raise E.UsageError(f"{self.source}: no part {i} (the index lists {len(self.index.get('parts', ()))})")
            r = self._parts[i] = self.store.open(self.index["parts"][i], f"index.parts[{i}]", self.strict)
        return r

    def _locate(self, name: str) -> tuple[A.AeroReader, int]:
        if self._global is None or name not in self._index:
            raise E.NotFoundError(f"{self.source}: no tensor named {name!r}")
        sid = self._global.entries.value(self._index[name], "shard_id")
        i = self._shard_part.get(sid)
        if i is None:
            raise _err(E.StructureError, f"index.aero TIDX {name!r}", Rule.SHARD, f"no part lists shard {sid}",
                       self.source)
        r = self.part(i)
        if r.index_only:  # its tensors have no bytes: AeroReader.tensor would raise NotLocalError
            raise _err(E.StructureError, f"index.parts[{i}]", Rule.SHARD,
                       f"{r.source} is an index-only AERO file (no weights): it cannot hold shard {sid}", self.source)
        if name not in r.tensors:
            raise links.agree(S.TENSORS, {S.TENSORS.key: name}, None, FMT, f"index.parts[{i}]",
                              f"{r.source} (shard {sid})", self.source)
        return r, i

    def _info(self, i: int) -> TensorInfo:
        g = self._global.tensors[self._global.entries.kept[i]]
        r, _ = self._locate(g.name)
        t = r.tensors[g.name]
        bad = links.agree(S.TENSORS, _row(g), _row(t), FMT, f"index.aero TIDX {g.name!r}", r.source, self.source)
        if bad is not None:
            raise bad
        return TensorInfo(t.name, t.dtype, t.shape, t.offset, t.nbytes, dict(t.extra, part=r.source))

    def tensor(self, name: str, *, verify: bool = True) -> np.ndarray:
        """One tensor (hash_b3 checked when the index has one and ``verify``).  A local set
        resolves a name to its part (and checks the two agree) once; later reads are the part's."""
        r = self._ready.get(name) if isinstance(name, str) else None
        if r is not None:
            return r.tensor(name, verify=verify)
        if self.store.remote:  # (a remote part's bytes are read, and checked, by the store)
            return self.read_tensors([name], verify=verify)[name]
        r = self._agreeing_part(name)
        if r is None:
            a = self.read_tensors([name], verify=verify)[name]
            r = self._locate(name)[0]
        else:
            a = r.tensor(name, verify=verify)
        self._ready[name] = r
        return a

    def _agreeing_part(self, name) -> A.AeroReader | None:
        """The local part holding ``name`` when its TIDX row and index.aero's hold the same values
        of every field S.TENSORS compares (so they agree) and both files' entries are in order:
        found without the TensorInfos the full path builds.  None otherwise: the full path
        decides, and raises what it finds."""
        gi = self._index.get(name) if isinstance(name, str) and self._global is not None else None
        if gi is None or not self._global.entries_checked:
            return None
        sid, *want = self._global.entries.values(gi, ("shard_id", *S.TENSORS.fields))
        k = self._shard_part.get(sid)
        try:
            r = None if k is None else self.part(k)
        except E.FormatError:
            return None
        ri = None if r is None or r.index_only else r.rows.get(name)
        if ri is None or not r.entries.ok or r.entries.values(ri, S.TENSORS.fields) != want:
            return None
        return r

    def read_tensor_bytes(self, name: str) -> bytes:
        return self.tensor(name).tobytes()

    def read_tensors(self, names: Iterable[str], *, verify: bool = True,
                     progress: bool | None = None) -> dict[str, np.ndarray]:
        """Many tensors at once: each part opened once; remotely, neighbouring tensors are read
        with one Range request and the requests run in parallel."""
        names = E.tensor_names(names, "read_tensors(names)")
        want = {self._shard_part.get(self._global.entries.value(self._index[n], "shard_id"))
                for n in names if self._global is not None and n in self._index}
        self.store.open_many([lambda i=i: self.part(i) for i in sorted(want - {None} - set(self._parts))])
        items = []
        for name in names:
            self.tensors[name]  # resolves and cross-checks against index.aero
            r, i = self._locate(name)
            trusted = self._global.entries.value(self._index[name], "hash_b3")
            items.append((name, r, self.index["parts"][i], trusted if isinstance(trusted, str) else None))
        return self.store.read(items, verify, progress)

    # ------------------------------------------------------------------ validation
    def validate(self, full: bool = False, *, control: bool = False, progress: bool | None = None) -> Report:
        """Index, paths, shard mapping and every part's structure; ``full`` adds the sha256 and
        size of every file and every part's full AERO validation (chunk hashes, hash_b3) — for a
        remote set, each file is downloaded (one at a time, to a temporary file) for it.  A part
        that fails its check, or to open, is one finding (or its own check's), not one per tensor
        it holds; a file of another size than its entry's, that finding alone."""
        rep = Report("aeroset", self.source, "full" if full else "structure")
        rep.add(list(self._structure))
        if not self.index:
            return self._finish(rep)
        files = links.entries(S.FILES, self.index, "index")
        #: part index -> how the part fails to open (None: it opens), once tried; ``said``: the
        #: parts whose failure the report holds already (their own check found it)
        failed: dict[int, tuple | None] = {}
        said: set[int] = set()
        if full:
            for where, ref in files:
                before = len(rep.violations)
                try:
                    self._validate_whole(rep, where, ref, progress)
                except E.FormatError as e:
                    rep.add(e)
                if len(rep.violations) > before and where.startswith("index.parts["):
                    said.add(int(where[len("index.parts["):-1]))
            rep.checked.append(f"sha256, size and full AERO check (every chunk hash, every hash_b3) of "
                               f"{plural(len(files), 'file')}")
        else:
            for i in range(len(self.index["parts"])):
                failed[i] = None
                try:
                    _merge(rep, self.part(i).validate(progress=progress), self.index["parts"][i]["path"])
                except E.FormatError as e:
                    rep.add(e)
                    failed[i] = _finding(e)
            if self._global is not None:
                _merge(rep, self._global.validate(progress=progress), self.index["global_tidx"]["path"])
        for name in self._index:
            i = self._part_of(name)
            if i is not None and i not in failed:  # (a full validation: the part tried here, first)
                failed[i] = None
                try:
                    self.part(i)
                except E.FormatError as e:
                    failed[i] = _finding(e)
                    if i not in said:
                        rep.add(e)
            try:
                self.tensors[name]
            except E.FormatError as e:
                if i is None or failed[i] is None or _finding(e) != failed[i]:
                    rep.add(e)  # (a part that does not open is one finding, not one per tensor it holds)
        rep.checked.append(f"index, {plural(len(self.index['parts']), 'part')}, "
                           f"{plural(len(self._index), 'tensor')} resolved")
        if self.remote:
            rep.notes.append(f"remote: {plural(self.store.http.stats['range_requests'], 'Range request')}")
        return self._finish(rep)

    def _part_of(self, name: str) -> int | None:
        """The index of the part listing the shard of index.aero's tensor ``name`` (None: none, or
        index.aero's entry cannot say)."""
        try:
            return self._shard_part.get(self._global.entries.value(self._index[name], "shard_id"))
        except E.FormatError:
            return None

    def _validate_whole(self, rep: Report, where: str, ref: dict, progress) -> None:
        """One file, whole: its size and sha256 against the index, then full AERO validation."""
        path, cleanup, digested = self.store.whole(ref, where, progress)
        name = self.store.locate(ref, _at(where))
        try:
            try:
                sub = A.AeroReader.validate_file(path, full=True, strict=self.strict, progress=progress)
            except BaseException:
                with contextlib.suppress(Exception):
                    digested()  # (taken meanwhile: never left running)
                raise
            digest, size = digested()
            if S.FILES.digest in ref:
                rep.checksum(S.FILES.algorithm, f"{ref[S.FILES.path]} (the whole file)", ref[S.FILES.digest].lower(),
                             digest)
            rep.add(links.whole_findings(S.FILES, ref, where, digest, size, FMT, self.source))
            for v in sub.violations:
                v.with_source(name)
            _merge(rep, sub, ref["path"])
        finally:
            if cleanup is not None:
                cleanup()

    def inspect_notes(self, t: TensorInfo) -> dict:
        return {"shard": t.extra["shard_id"]} if "shard_id" in t.extra else {}

    def byte_maps(self) -> list:
        """Each AERO file of the set that could be opened: index.aero, then the parts (a
        local part too broken to open: as far as it can be read)."""
        out = [] if self._global is None else self._global.byte_maps()
        for i in range(len(self.index.get("parts", ()))):
            try:
                out.extend(self.part(i).byte_maps())
            except E.FormatError:
                if self.remote:
                    continue
                try:
                    r = self._broken[i] = self.store.open(self.index["parts"][i], f"index.parts[{i}]", self.strict,
                                                          collect=True)
                except E.ModelcodecError:
                    continue
                out.extend(r.byte_maps())
        return out

    def describe(self) -> dict:
        d = super().describe()
        d.update({"version": ".".join(map(str, self.index.get("format", {}).get("version", []))),
                  "remote": self.remote, "verified": getattr(self, "verified", False),
                  "parts": [{"path": p["path"], "shards": p["shards"], "size_bytes": p.get("size_bytes")}
                            for p in self.index.get("parts", [])],
                  # what the index declares; `validate --full` computes them
                  "checksums": [Checksum("sha256", f"{ref['path']} (the whole file)", str(ref["sha256"]).lower()
                                         ).as_dict()
                                for ref in [self.index.get("global_tidx", {})] + list(self.index.get("parts", []))
                                if isinstance(ref, dict) and ref.get("sha256")]})
        if self.remote:
            d["base_url"] = self.store.base_url
        return d

    def files(self) -> list[dict]:
        """Every file the index lists (parts and index.aero, with their sha256 and size), then
        the index JSON itself (its bytes as read: their sha256)."""
        import hashlib
        out = []
        for where, ref in links.entries(S.FILES, self.index, "index"):
            name = ref[S.FILES.path]
            if "://" in name:
                raise E.UsageError(f"{self.source}: {where}.{S.FILES.path} is a URL ({name}): only a set whose files "
                                   "lie beside its index can be copied whole")
            out.append({"name": name, "source": self.store.locate(ref, _at(where)), "size": ref.get(S.FILES.size),
                        "sha256": ref.get(S.FILES.digest), "where": where, "rule": S.FILES.rule})
        raw = getattr(self, "_raw", b"")
        name = self.index_path.split("?")[0].replace("\\", "/").rsplit("/", 1)[-1]
        out.append({"name": name, "source": self.index_path, "size": len(raw), "sha256": hashlib.sha256(raw).hexdigest(),
                    "where": "index", "rule": S.FILES.rule})
        return out

    def close(self) -> None:
        for r in [*self._parts.values(), *self._broken.values()]:
            r.close()
        self._parts.clear()
        self._broken.clear()
        self._ready.clear()
        if self._global is not None:
            self._global.close()
        if self.store is not None:
            self.store.close()


validate_file = AeroSet.validate_file


def _row(t: TensorInfo) -> dict:
    """A tensor's TIDX entry, as the fields S.TENSORS compares."""
    return {"name": t.name, "dtype": t.dtype, "shape": t.shape, "data_len": t.nbytes, "hash_b3": t.extra.get("hash_b3")}


def _finding(e: E.FormatError) -> tuple:
    """What a finding says (two raised alike are the same finding)."""
    return type(e), e.format, e.rule, e.path, e.offset, e.source, e.message


def _merge(rep: Report, sub: Report, name: str) -> None:
    """A part's report into the set's: its violations, and its checksums named by the part."""
    rep.add(sub.violations)
    for c in sub.checksums:
        c.covers = f"{name}: {c.covers}"
        rep.checksums.append(c)
