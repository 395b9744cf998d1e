"""AEROSET: a model in several AERO files, read from a local directory or over HTTP(S).

The index JSON is declared in :mod:`schemas.aeroset` and checked by :mod:`codec.payload`; each
part and ``index.aero`` is read by :class:`codec.formats.aero.AeroReader`, opened lazily and
once.  A tensor resolves as DECISIONS.md says: global shard id (index.aero's TIDX) -> the part
listing that shard -> the tensor by name in that part's TIDX.

Where the files are is a *store*: :class:`LocalFiles` (paths confined to the set's directory,
files mapped) or :class:`RemoteFiles` (http/https; see :mod:`codec.remote` for the checked,
parallel, retried Range requests and :mod:`codec.cache` for the disk cache).  Opening a remote
set reads the index JSON (one GET), then each file's control region once, when first needed:
``index.aero`` and a part's header + TOC + string table + metadata chunks usually come in one
Range request each, so a cold tensor costs three Range requests and a warm one none.
"""
from __future__ import annotations

import json
import os
import shutil
import tempfile
from typing import Iterable, Mapping
from urllib.parse import quote

import numpy as np

from schemas import aeroset as S
from schemas import http as H
from schemas.aeroset import Rule

from .. import errors as E
from .. import links, payload
from ..cache import RangeCache
from ..integrity import blake3_bytes
from ..io import (
    atomic_write, common_metadata, confined, exchange, fsync_dir, give_default_mode, locked_dir, open_regular,
    remove_stale_temps, temp_prefix, write_all,
)
from ..model import Checksum, LazyTensors, Reader, Report, TensorInfo
from ..progress import Progress
from . import aero as A

FMT = S.FORMAT
#: tensors closer than this in one part are read with one Range request
COALESCE_GAP = 256 * 1024
#: a whole file (validate --full) is downloaded this many bytes per request
_DOWNLOAD_PIECE = 16 * 1024 * 1024


def _err(cls, path, rule, msg, source=None) -> E.FormatError:
    return cls(FMT, None, path, rule, msg, source=source)


def check_url(url: str, what: str = "URL") -> str:
    """(codec.remote, and its HTTP client library, load only when a set is remote.)"""
    from ..remote import check_url as check
    return check(url, what, FMT)


def is_url(s) -> bool:
    return isinstance(s, str) and "://" in s and s.split("://", 1)[0].lower() in ("http", "https")


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
    if not path.endswith(S.INDEX_SUFFIX) and os.path.isfile(path):
        from .. import registry
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


# =============================================================================== stores
class LocalFiles:
    """The files of a set in a local directory."""
    remote = False

    def __init__(self, index_path: str):
        self.index_path = index_path
        self.base = os.path.dirname(os.path.abspath(index_path))

    def index_bytes(self) -> bytes:
        with open_regular(self.index_path, "AEROSET index") as f:
            size = os.fstat(f.fileno()).st_size
            if size > S.MAX_INDEX_BYTES:
                raise _err(E.LimitError, "index", Rule.LIMIT, f"index is {size} bytes, over {S.MAX_INDEX_BYTES}")
            return f.read(S.MAX_INDEX_BYTES + 1)

    def locate(self, ref: dict, where: str) -> str:
        return safe_join(self.base, ref["path"], where, self.index_path)

    def open(self, ref: dict, where: str, strict: bool, *, whole: bool = False) -> A.AeroReader:
        path = self._exists(ref, where)
        return A.AeroReader(path, strict=strict)

    def _exists(self, ref: dict, where: str) -> str:
        path = self.locate(ref, _at(where))
        links.require_file(S.FILES, ref, where, os.path.isfile(path), os.path.lexists(path), FMT, self.index_path)
        return path

    def read(self, items: list, verify: bool, progress) -> dict:
        return {name: r.tensor(name, verify=verify) for name, r, _, _ in items}

    def open_many(self, jobs: list) -> None:
        for job in jobs:
            job()

    def whole(self, ref: dict, where: str, progress):
        """(path of the whole file here, cleanup, (digest, size)) for full validation."""
        path = self._exists(ref, where)
        return path, None, links.digest_file(S.FILES, path)

    def close(self) -> None:
        pass


class RemoteFiles:
    """The files of a set behind http(s) URLs: checked Range requests and the disk cache."""
    remote = True
    #: set by AeroSet once index.aero checked out against the JSON's sha256: only then do the
    #: hash_b3 values tensors are checked against come from a trusted source
    trusted = False

    def __init__(self, index_url: str | None, base_url: str | None, http: Http, cache: RangeCache | None,
                 max_tensor_bytes: int, source: str):
        self.index_url = index_url
        self.base_url = base_url
        self.http = http
        self.cache = cache
        self.max_tensor_bytes = max_tensor_bytes
        self.source = source
        #: the cache keys each opened file's control region was read under
        self._control_keys: dict[str, list[str]] = {}

    def index_bytes(self) -> bytes:
        return self.http.get(self.index_url, S.MAX_INDEX_BYTES)

    def locate(self, ref: dict, where: str) -> str:
        """A file's URL: an http(s) URL as is, a relative path as base_url + "/" + path."""
        p = ref["path"]
        if "://" in p:
            return check_url(p, where)
        segs = p.replace("\\", "/").split("/")
        if p.startswith(("/", "\\")) or any(sg in ("..", ".") for sg in segs) or "?" in p or "#" in p:
            raise _err(E.StructureError, where, Rule.PATH, f"{p!r} is not a plain relative path", self.source)
        if self.base_url is None:
            raise E.UsageError(f"{self.source}: {where} is relative and the index has no base_url "
                               "(give base_url=...)")
        try:
            q = quote(p, safe="/-._~")
        except UnicodeEncodeError as e:  # a lone surrogate (JSON allows "\ud800")
            raise _err(E.StructureError, where, Rule.PATH, f"{p!r} is not a usable file name ({e})",
                       self.source) from None
        return self.base_url.rstrip("/") + "/" + q

    @staticmethod
    def _tag(ref: dict) -> str | None:
        """What identifies a file's content in cache keys: its sha256 and size from the index.
        None (no sha256): a re-published file could not be told from the old one, so its
        control region is never cached and its tensors only under their hash_b3."""
        sha = ref.get("sha256")
        return f"{sha.lower()}:{ref.get('size_bytes', '')}" if sha else None

    def _ranges(self, url: str, spans: list[tuple[int, int]], size: int, tag: str | None,
                fetched: list, hits: list) -> list:
        """Each span's bytes: from the cache when it has them (their keys go to ``hits``), else
        read, in parallel (``(key, bytes)`` go to ``fetched``, stored once the file checks out)."""
        out: list = [None] * len(spans)
        cached = self.cache is not None and tag is not None
        keys = [RangeCache.key(url, a, n, tag) if cached else None for a, n in spans]
        if cached:
            for i, ((_, n), k) in enumerate(zip(spans, keys)):
                if k is not None:
                    out[i] = self.cache.get(k, n)
                    if out[i] is not None:
                        hits.append(k)
        todo = [i for i, o in enumerate(out) if o is None]
        if todo:
            got = self.http.fetch([(url, *spans[i], size) for i in todo])
            for i, b in zip(todo, got):
                out[i] = b
                if keys[i] is not None:
                    fetched.append((keys[i], b))
        return out

    def _size(self, ref: dict, url: str) -> int:
        if "size_bytes" in ref:
            return ref["size_bytes"]
        return self.http.size(url)

    def open(self, ref: dict, where: str, strict: bool, *, whole: bool = False) -> A.AeroReader:
        """A file's control region.  Trust follows the chain from the index JSON: bytes are
        cached only once the file's sha256 from the index vouches for them, which needs the
        whole file -- always the case for ``whole`` (index.aero, whose TIDX holds the hash_b3
        every tensor is checked against); a part's control region read by ranges is used (its
        tensors are checked against index.aero's hash_b3) but never cached.  A failure that
        involved cached ranges is retried once with fresh reads."""
        url = self.locate(ref, _at(where))
        size, tag = self._size(ref, url), self._tag(ref)
        if whole and size > S.MAX_GLOBAL_TIDX_BYTES:
            raise _err(E.LimitError, f"{where}", Rule.LIMIT,
                       f"{url} is {size} bytes, over MAX_GLOBAL_TIDX_BYTES ({S.MAX_GLOBAL_TIDX_BYTES})", self.source)
        for attempt in (0, 1):
            fetched, hits = [], []
            try:
                sha = ref.get("sha256")
                if whole:
                    buf = self._ranges(url, [(0, size)], size, tag, fetched, hits)[0] if size else b""
                    # checked before any of it is used
                    links.check_bytes(S.FILES, ref, where, buf, url, FMT, self.source)
                    r = A.open_partial(url, size, lambda spans, buf=buf: [buf[a:a + n] for a, n in spans],
                                       strict=strict)
                    vouched = bool(sha)
                else:
                    r = A.open_partial(url, size, lambda spans: self._ranges(url, spans, size, tag, fetched, hits),
                                       strict=strict)
                    vouched = bool(sha) and r._src.has(0, size)
                    if vouched:  # a small part read whole: check it now
                        try:
                            links.check_bytes(S.FILES, ref, where, r._src.buf, url, FMT, self.source)
                        except E.FormatError:
                            r.close()
                            raise
            except E.FormatError:
                if attempt == 0 and hits:  # a cached range may be the culprit: drop them, read afresh
                    for k in hits:
                        self.cache.drop(k)
                    continue
                raise
            if vouched:
                for k, b in fetched:
                    self.cache.put(k, b)
            elif hits:  # cached by an earlier version without the file's sha256 check
                for k in hits:
                    self.cache.drop(k)
            self._control_keys[url] = hits + [k for k, _ in fetched]
            return r

    def read(self, items: list, verify: bool, progress) -> dict:
        """Tensors [(name, part reader, part ref)]: cache first, then the missing ones with one
        Range request per run of neighbouring tensors (split at 64 MiB, in parallel).  Items are
        (name, part reader, part ref, hash_b3 from the verified index.aero or None).  The cache
        is used only for tensors with such a trusted hash_b3: a cached one is returned only if
        it still hashes to it, a fetched one is cached only once it does."""
        out: dict = {}
        misses: dict[str, list] = {}
        for name, r, ref, trusted in items:
            t = r.tensors[name]
            if t.nbytes > self.max_tensor_bytes:
                raise _err(E.LimitError, f"tensor {name!r}", H.Rule.TENSOR_LIMIT,
                           f"is {t.nbytes} bytes, over max_tensor_bytes={self.max_tensor_bytes}", self.source)
            want = bytes.fromhex(trusted) if self.trusted and _is_hex64(trusted) else None
            if r._src.has(t.offset, t.nbytes):  # already read with the part's control region
                data = r._src.buf[t.offset:t.offset + t.nbytes]
                if not (verify and want is not None) or blake3_bytes(data) == want:
                    out[name] = A.tensor_view(t, data, 0)
                    continue
                # those bytes may come from a stale or poisoned cache entry: drop the part's
                # control-region entries and read the tensor by itself (checked again below)
                if self.cache is not None:
                    for k in self._control_keys.pop(r.source, ()):
                        self.cache.drop(k)
            key = None
            if self.cache is not None and want is not None:
                key = RangeCache.key(r.source, t.offset, t.nbytes, f"{self._tag(ref) or ''}|{trusted.lower()}")
            data = self.cache.get(key, t.nbytes, expect=want) if key else None
            if data is not None:
                out[name] = A.tensor_view(t, data, 0)
            else:
                misses.setdefault(r.source, []).append((t.offset, name, t, r, key))
        runs = []  # (url, start, length, size, [(name, t, r, key)])
        for url, ts in misses.items():
            ts.sort(key=lambda x: x[0])
            for off, name, t, r, key in ts:
                if runs and runs[-1][0] == url and off <= runs[-1][1] + runs[-1][2] + COALESCE_GAP:
                    u, a, n, sz, members = runs[-1]
                    runs[-1] = (u, a, max(n, off + t.nbytes - a), sz, members + [(name, t, r, key)])
                else:
                    runs.append((url, off, t.nbytes, r._src.size, [(name, t, r, key)]))
        if not runs:
            return out
        with Progress(sum(n for _, _, n, _, _ in runs), "fetch", enabled=progress) as bar:
            bufs = self.http.fetch([(u, a, n, sz) for u, a, n, sz, _ in runs], progress=bar.update)
        trusted_of = {name: trusted for name, _, _, trusted in items}
        fetched = [(name, t, r, key, buf[t.offset - a:t.offset - a + t.nbytes])
                   for (_, a, _, _, members), buf in zip(runs, bufs) for name, t, r, key in members]

        def keep(name, t, r, key, data):  # on the client's threads: BLAKE3 releases the GIL
            digest = None
            if "hash_b3" in t.extra and (verify or key is not None):
                digest = blake3_bytes(data)
                if verify:
                    r._check_hash_b3(t, raise_=True, got=digest.hex())
                if key is not None and digest != bytes.fromhex(trusted_of[name]):
                    key = None  # returned as asked (verify=False), never cached
            if key is not None:
                self.cache.put(key, data, digest)
            out[name] = A.tensor_view(t, data, 0)
        self.http.run([lambda f=f: keep(*f) for f in fetched])
        return out

    def open_many(self, jobs: list) -> None:
        """Open several files at once (their control regions are read in parallel)."""
        self.http.run(jobs)

    def whole(self, ref: dict, where: str, progress):
        """Download a whole file (bounded memory) into a temporary file, hashing it on the way;
        (path, cleanup, (digest, size))."""
        url = self.locate(ref, _at(where))
        size = self._size(ref, url)
        d = tempfile.mkdtemp(prefix="modelcodec-validate-")
        path = os.path.join(d, "file.aero")  # never a name taken from the URL
        h = links.digest_of(S.FILES)
        try:
            with open(path, "wb") as f, Progress(size, f"download {ref['path'][-40:]}", enabled=progress) as bar:
                window = _DOWNLOAD_PIECE * max(self.http.options.workers, 1)
                for w in range(0, size, window):
                    spans = [(a, min(_DOWNLOAD_PIECE, size - a)) for a in range(w, min(w + window, size), _DOWNLOAD_PIECE)]
                    for (a, _), b in zip(spans, self.http.fetch([(url, a, n, size) for a, n in spans],
                                                                progress=bar.update)):
                        f.seek(a)
                        f.write(b)
                        h.update(b)  # the spans of a window come back in file order
        except BaseException:
            shutil.rmtree(d, ignore_errors=True)
            raise
        return path, lambda: shutil.rmtree(d, ignore_errors=True), (h.hexdigest(), size)

    def close(self) -> None:
        self.http.close()


# =============================================================================== reader
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
                 cache=None, http: HttpOptions | Http | None = None,
                 max_tensor_bytes: int = H.MAX_TENSOR_BYTES, _collect: bool = False):
        if not isinstance(source, (str, os.PathLike)):
            raise E.UsageError("an AEROSET is opened from its directory, index path or URL")
        source = os.fspath(source)
        self.strict = strict
        self.index: dict = {}
        self._parts: dict[int, A.AeroReader] = {}
        self._shard_part: dict[int, int] = {}
        self._global: A.AeroReader | None = None
        self._index: dict = {}
        self._options = (remote, base_url, cache, http, max_tensor_bytes)
        if "://" in source:
            check_url(source, "the index")
            self.source = self.index_path = source
            self.store = self._remote_store(source)
        else:
            self.source = self.index_path = find_index(source)
            self.store = LocalFiles(self.index_path)
        try:
            self._structure = self._check()
        except BaseException:
            self.store.close()
            raise
        self.tensors = LazyTensors(self._index, self._info, FMT)
        if not _collect:
            first = next((v for v in self._structure if v.severity == "error"), None)
            if first is not None:
                self.close()
                raise first.with_source(self.source) if first.source is None else first

    def _remote_store(self, index_url: str | None) -> RemoteFiles:
        _, base_url, cache, http, max_tensor = self._options
        from ..remote import Http
        if not isinstance(http, Http):
            http = Http(http)
        http.fmt = FMT
        if cache is None or cache is True:
            cache = RangeCache()
        elif cache is not False and not isinstance(cache, RangeCache):
            cache = RangeCache(cache)
        base = base_url
        if base is None and index_url is not None:
            base = index_url.split("?")[0].rsplit("/", 1)[0]
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
        raw = self.store.index_bytes()
        try:
            obj = json.loads(raw.decode("utf-8"))
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
        self._global = self.store.open(obj["global_tidx"], "index.global_tidx", self.strict, whole=True)
        #: whether every tensor read is checked against a hash the index JSON vouches for: local
        #: files are the caller's own; a remote set needs index.aero's sha256 in the JSON (its
        #: TIDX carries the hash_b3 of every tensor)
        self.verified = not self.store.remote or bool(obj["global_tidx"].get("sha256"))
        self.store.trusted = self.verified
        self._index = self._global._index
        ents = self._global._entries
        if ents.ok:  # (a malformed index.aero TIDX is reported by index.aero's own checks)
            sids = ents.column("shard_id")
            unlisted = [u for u in np.unique(sids) if int(u) not in self._shard_part]
            names = ents.column("name")
            for i in np.flatnonzero(np.isin(sids, np.array(unlisted, dtype=sids.dtype)))[:50]:
                v.append(_err(E.StructureError, f"index.aero TIDX {names[i]!r}", Rule.SHARD,
                              f"tensor {names[i]!r} is in shard {int(sids[i])}, which no part lists"))

    def _settle_store(self, index: dict) -> None:
        """Remote details that need the index: base_url, the cache hints, a local index read remotely."""
        remote, base_url, cache, _, _ = self._options
        if isinstance(self.store, LocalFiles):
            if remote:  # a local index never reaches the network unless asked to
                self.store = self._remote_store(None)
            else:
                return
        st = self.store
        if base_url is None and "base_url" in index:
            st.base_url = check_url(index["base_url"], "index.base_url")
        hints = index.get("cache")
        if cache is None and isinstance(hints, dict) and hints.get("enabled") is False:
            st.cache = None

    # ------------------------------------------------------------------ reading
    @property
    def metadata(self) -> dict:
        """The index's ``model`` map in the common vocabulary: its ``name`` is ``model_name``."""
        m = dict(self.index.get("model") or {})
        if "name" in m and "model_name" not in m:
            m["model_name"] = m.pop("name")
        return m

    def part(self, i: int) -> A.AeroReader:
        """The i-th part, opened (and structure-checked) on first use."""
        r = self._parts.get(i)
        if r is None:
            if not 0 <= i < len(self.index.get("parts", ())):
                raise E.UsageError(f"{self.source}: no part {i} (the index lists {len(self.index.get('parts', ()))})")
            r = self._parts[i] = self.store.open(self.index["parts"][i], f"index.parts[{i}]", self.strict)
        return r

    def _locate(self, name: str) -> tuple[A.AeroReader, int]:
        if self._global is None or name not in self._index:
            raise E.NotFoundError(f"{self.source}: no tensor named {name!r}")
        sid = self._global._entries.value(self._index[name], "shard_id")
        i = self._shard_part.get(sid)
        if i is None:
            raise _err(E.StructureError, f"index.aero TIDX {name!r}", Rule.SHARD, f"no part lists shard {sid}",
                       self.source)
        r = self.part(i)
        if r.index_only:  # its tensors have no bytes: AeroReader.tensor would raise NotFoundError
            raise _err(E.StructureError, f"index.parts[{i}]", Rule.SHARD,
                       f"{r.source} is an index-only AERO file (no weights): it cannot hold shard {sid}", self.source)
        if name not in r.tensors:
            raise links.agree(S.TENSORS, {S.TENSORS.key: name}, None, FMT, f"index.parts[{i}]",
                              f"{r.source} (shard {sid})", self.source)
        return r, i

    def _info(self, i: int) -> TensorInfo:
        g = self._global.tensors[self._global._entries.kept[i]]
        r, _ = self._locate(g.name)
        t = r.tensors[g.name]
        bad = links.agree(S.TENSORS, _row(g), _row(t), FMT, f"index.aero TIDX {g.name!r}", r.source, self.source)
        if bad is not None:
            raise bad
        return TensorInfo(t.name, t.dtype, t.shape, t.offset, t.nbytes, dict(t.extra, part=r.source))

    def tensor(self, name: str, *, verify: bool = True) -> np.ndarray:
        """One tensor (hash_b3 checked when the index has one and ``verify``)."""
        return self.read_tensors([name], verify=verify)[name]

    def read_tensor_bytes(self, name: str) -> bytes:
        return self.tensor(name).tobytes()

    def read_tensors(self, names: Iterable[str], *, verify: bool = True,
                     progress: bool | None = None) -> dict[str, np.ndarray]:
        """Many tensors at once: each part opened once; remotely, neighbouring tensors are read
        with one Range request and the requests run in parallel."""
        names = list(dict.fromkeys(names))
        want = {self._shard_part.get(self._global._entries.value(self._index[n], "shard_id"))
                for n in names if self._global is not None and n in self._index}
        self.store.open_many([lambda i=i: self.part(i) for i in sorted(want - {None} - set(self._parts))])
        items = []
        for name in names:
            self.tensors[name]  # resolves and cross-checks against index.aero
            r, i = self._locate(name)
            trusted = self._global._entries.value(self._index[name], "hash_b3")
            items.append((name, r, self.index["parts"][i], trusted if isinstance(trusted, str) else None))
        return self.store.read(items, verify, progress)

    # ------------------------------------------------------------------ validation
    def validate(self, full: bool = False, *, control: bool = False, progress: bool | None = None) -> Report:
        """Index, paths, shard mapping and every part's structure; ``full`` adds the sha256 and
        size of every file and every part's full AERO validation (chunk hashes, hash_b3) — for a
        remote set, each file is downloaded (one at a time, to a temporary file) for it."""
        rep = Report("aeroset", self.source, "full" if full else "structure")
        rep.add(list(self._structure))
        if not self.index:
            return self._finish(rep)
        files = links.entries(S.FILES, self.index, "index")
        if full:
            for where, ref in files:
                try:
                    self._validate_whole(rep, where, ref, progress)
                except E.FormatError as e:
                    rep.add(e)
            rep.checked.append(f"sha256, size and full AERO check (every chunk hash, every hash_b3) of "
                               f"{len(files)} files")
        else:
            for i in range(len(self.index["parts"])):
                try:
                    _merge(rep, self.part(i).validate(progress=progress), self.index["parts"][i]["path"])
                except E.FormatError as e:
                    rep.add(e)
            if self._global is not None:
                _merge(rep, self._global.validate(progress=progress), self.index["global_tidx"]["path"])
        for name in self._index:
            try:
                self.tensors[name]
            except E.FormatError as e:
                rep.add(e)
        rep.checked.append(f"index, {len(self.index['parts'])} parts, {len(self._index)} tensors resolved")
        if self.remote:
            rep.notes.append(f"remote: {self.store.http.stats['range_requests']} Range requests")
        return self._finish(rep)

    def _validate_whole(self, rep: Report, where: str, ref: dict, progress) -> None:
        """One file, whole: its size and sha256 against the index, then full AERO validation."""
        path, cleanup, (digest, size) = self.store.whole(ref, where, progress)
        name = self.store.locate(ref, _at(where))
        try:
            if S.FILES.digest in ref:
                rep.checksum(S.FILES.algorithm, f"{ref[S.FILES.path]} (the whole file)", ref[S.FILES.digest].lower(),
                             digest)
            rep.add(links.whole_findings(S.FILES, ref, where, digest, size, FMT, self.source))
            sub = A.AeroReader.validate_file(path, full=True, strict=self.strict, progress=progress)
            for v in sub.violations:
                v.with_source(name)
            _merge(rep, sub, ref["path"])
        finally:
            if cleanup is not None:
                cleanup()

    def inspect_notes(self, t: TensorInfo) -> dict:
        return {"shard": t.extra["shard_id"]} if "shard_id" in t.extra else {}

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

    def close(self) -> None:
        for r in self._parts.values():
            r.close()
        self._parts.clear()
        if self._global is not None:
            self._global.close()
        self.store.close()


validate_file = AeroSet.validate_file


# =============================================================================== writer
def write_aeroset(out_dir, tensors: Mapping | Iterable, *, model_name: str = "", architecture: str = "",
                  metadata: dict | None = None, max_shard_bytes: int | None = None, max_part_shards: int = 4,
                  base_url: str | None = None, cache: dict | None = None, tensor_hash: bool = True,
                  uuid: bytes | None = None, progress: bool | None = None) -> str:
    """Write an AEROSET directory atomically: the whole set is written into a temporary
    directory beside ``out_dir`` and renamed into place, so no half-written set is ever visible
    under the final name.  Parts are AERO files naming their WTSH chunks with global shard ids.
    The index is version [0, 1], or [0, 2] when ``base_url`` or ``cache`` hints are given.
    ``metadata`` (JSON values) goes to every part's MJSN and to the index's ``model`` map, where
    ``model_name`` is written as the spec's ``name``; ``model_name=``/``architecture=`` are
    shorthands for those keys (a conflict is a UsageError)."""
    if max_part_shards < 1:
        raise E.UsageError("max_part_shards must be positive")
    if base_url is not None and not is_url(base_url):
        raise E.UsageError("base_url must be an http:// or https:// URL")
    meta = common_metadata(metadata, model_name=model_name, architecture=architecture)
    model_name, architecture = meta.pop("model_name", ""), meta.pop("architecture", "")
    pairs = list(tensors.items()) if isinstance(tensors, Mapping) else list(tensors)
    items = [A._item(n, t) for n, t in pairs]
    sizes = A.plan_shards(items, max_shard_bytes)
    n_parts = -(-len(sizes) // max_part_shards)
    out_dir = os.path.abspath(os.fspath(out_dir))
    parent = os.path.dirname(out_dir)
    os.makedirs(parent, exist_ok=True)
    _replaceable(out_dir)  # refuse before any work
    remove_stale_temps(out_dir)
    tmp = tempfile.mkdtemp(prefix=temp_prefix(out_dir), dir=parent)
    try:
        give_default_mode(tmp, directory=True)
        parts = []
        for k in range(n_parts):
            first = k * max_part_shards
            ids = list(range(first, min(first + max_part_shards, len(sizes))))
            mine = [(n, t) for (n, t), it in zip(pairs, items) if it.shard in ids]
            name = f"part-{k:03d}.aero"
            A.write_aero(os.path.join(tmp, name), mine, uuid=uuid, model_name=model_name, architecture=architecture,
                         metadata=meta or None, max_shard_bytes=max_shard_bytes, tensor_hash=tensor_hash,
                         progress=progress, first_shard=first)
            parts.append({"path": name, **_file_ref(os.path.join(tmp, name)), "shards": ids})
        _write_index_aero(os.path.join(tmp, "index.aero"), tmp, parts, model_name, architecture, uuid)
        index = {"format": {"name": S.FORMAT, "version": [0, 2] if (base_url or cache) else [0, 1]},
                 "model": {"name": model_name, "architecture": architecture, **dict(sorted(meta.items()))}}
        if base_url:
            index["base_url"] = base_url
        index["parts"] = parts
        index["global_tidx"] = {"path": "index.aero", **_file_ref(os.path.join(tmp, "index.aero"))}
        if cache:
            index["cache"] = cache
        with atomic_write(os.path.join(tmp, "model.aeroset.json")) as f:
            write_all(f, (json.dumps(index, indent=2) + "\n").encode("utf-8"))
        fsync_dir(tmp)
        _install(tmp, out_dir)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return out_dir


def _replaceable(out_dir: str) -> bool:
    """Whether ``out_dir`` holds a set to replace (False: nothing there).  Refused with a
    UsageError: a non-directory, a symlink, a non-empty directory without a readable AEROSET
    index, and a set directory holding files its index does not list (they are not ours)."""
    if not os.path.lexists(out_dir):
        return False
    if os.path.islink(out_dir) or not os.path.isdir(out_dir):
        raise E.UsageError(f"{out_dir}: exists and is not a directory: refusing to replace it with a set")
    names = set(os.listdir(out_dir))
    if not names:
        return True
    idx = [n for n in names if n.endswith(S.INDEX_SUFFIX)]
    listed = None
    if len(idx) == 1:
        try:
            with open_regular(os.path.join(out_dir, idx[0]), "AEROSET index") as f:
                obj = json.loads(f.read(S.MAX_INDEX_BYTES + 1).decode("utf-8"))
            if isinstance(obj, dict) and (obj.get("format") or {}).get("name") == S.FORMAT:
                refs = list(obj.get("parts") or []) + [obj.get("global_tidx") or {}]
                listed = {idx[0]} | {r["path"] for r in refs if isinstance(r, dict) and isinstance(r.get("path"), str)}
        except (E.ModelcodecError, ValueError, AttributeError, TypeError, RecursionError):
            listed = None
    if listed is None:
        raise E.UsageError(f"{out_dir}: a non-empty directory that is not an AEROSET (no readable "
                           f"*{S.INDEX_SUFFIX} index): refusing to replace it")
    extra = sorted(names - listed)
    if extra:
        raise E.UsageError(f"{out_dir}: the set directory also holds files its index does not list "
                           f"({', '.join(extra[:5])}{' ...' if len(extra) > 5 else ''}): refusing to replace it")
    return True


def _install(tmp: str, out_dir: str) -> None:
    """Put the finished set ``tmp`` at ``out_dir``: renamed into place, or swapped atomically
    with the set there (readers see the old set or the new one, never a mix), under a lock on
    the parent so concurrent writers take turns; the old set (only files its index lists) is
    then removed."""
    parent = os.path.dirname(out_dir)
    with locked_dir(parent):
        if not _replaceable(out_dir):
            os.rename(tmp, out_dir)
        elif exchange(tmp, out_dir):
            shutil.rmtree(tmp)  # the old set, now under the temp name
        else:  # no RENAME_EXCHANGE: a brief moment with no set, never a mixed one
            old = tempfile.mkdtemp(prefix=temp_prefix(out_dir), dir=parent)
            os.rename(out_dir, os.path.join(old, "set"))
            os.rename(tmp, out_dir)
            shutil.rmtree(old)
        fsync_dir(parent)


def _row(t: TensorInfo) -> dict:
    """A tensor's TIDX entry, as the fields S.TENSORS compares."""
    return {"name": t.name, "dtype": t.dtype, "shape": t.shape, "data_len": t.nbytes, "hash_b3": t.extra.get("hash_b3")}


def _merge(rep: Report, sub: Report, name: str) -> None:
    """A part's report into the set's: its violations, and its checksums named by the part."""
    rep.add(sub.violations)
    for c in sub.checksums:
        c.covers = f"{name}: {c.covers}"
        rep.checksums.append(c)


def _file_ref(path: str) -> dict:
    digest, size = links.digest_file(S.FILES, path)
    return {S.FILES.digest: digest, S.FILES.size: size}


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


# =============================================================================== registry
from ..registry import FormatDescriptor  # noqa: E402


def _claims(path: str) -> bool:
    """A set is named by its directory (one holding a *.aeroset.json), its index or the
    index's URL."""
    if "://" in path:  # an index's URL (any other URL is a single file)
        from urllib.parse import urlsplit
        try:
            return urlsplit(path).path.endswith(S.INDEX_SUFFIX)
        except ValueError:
            return False
    if path.endswith(S.INDEX_SUFFIX):
        return True
    try:
        return os.path.isdir(path) and any(f.endswith(S.INDEX_SUFFIX) for f in os.listdir(path))
    except OSError:
        return False


def _demo(out_dir: str, model: dict) -> list:
    """A set of several parts, shown from its directory, then read over HTTP Range requests
    (with a disk cache) and validated by its URL."""
    from ..demo import DemoStep, serve
    set_dir = os.path.join(out_dir, "tiny-mlp-set")
    write_aeroset(set_dir, model, model_name="tiny-mlp", architecture="mlp", max_shard_bytes=16 * 1024,
                  max_part_shards=2)

    def remote() -> tuple[bool, str]:
        with serve(out_dir) as base:
            url = f"{base}/{os.path.basename(set_dir)}/model.aeroset.json"
            with AeroSet(set_dir) as local, AeroSet(url, cache=RangeCache(set_dir + "-cache")) as far:
                got = far.read_tensors(list(local.tensors))
                same = all(got[n].tobytes() == local.tensor(n).tobytes() for n in local.tensors)
                line = (f"{url}\nread {len(got)} tensors remotely with {far.store.http.stats['range_requests']} "
                        f"Range requests: {'identical to the local copy' if same else 'DIFFERENT FROM THE LOCAL COPY'}")
            rep = AeroSet.validate_file(url, full=True)
            line += f"\nvalidate --full {url}: " + (f"AEROSET {rep.level} check passed" if rep.ok else
                                                    f"{len(rep.errors)} error(s)")
        return same and rep.ok, line

    return [DemoStep(f"$ modelcodec inspect-set {set_dir}", ["inspect-set", set_dir]),
            DemoStep(f"$ modelcodec validate --full {set_dir}", ["validate", "--full", set_dir]),
            DemoStep("# the same set served over HTTP", call=remote)]


def cmd_inspect_set(a) -> int:
    """``modelcodec inspect-set``: the index, the parts and their shards, and every tensor."""
    from ..display import MAX_ROWS, fmt_shape, json_default, reader_options, shortened
    with AeroSet(a.set, **reader_options(a)) as s:
        d = s.describe()
        if a.json:
            d["tensors"] = [{"name": n, "dtype": s.tensors[n].common_dtype, "format_dtype": s.tensors[n].dtype_name,
                             "shape": list(s.tensors[n].shape),
                             "nbytes": s.tensors[n].nbytes, "part": os.path.basename(s.tensors[n].extra["part"])}
                            for n in s.tensors]
            print(json.dumps(d, indent=2, default=json_default))
            return 0
        print(f"{s.index_path}: AEROSET {d['version']}")
        if d.get("metadata"):
            print("  model     " + shortened(json.dumps(d["metadata"], ensure_ascii=False, default=json_default), a.all))
        print(f"  parts     {len(d['parts'])}")
        for p in d["parts"]:
            print(f"    {p['path']:<24} shards {p['shards']}  {p['size_bytes'] or 0:,} B")
        print(f"  tensors   {len(s.tensors)}")
        names = list(s.tensors)
        shown = names if a.all else names[:MAX_ROWS]
        w = max([len(n) for n in shown] + [4])
        for n in shown:
            t = s.tensors[n]
            print(f"    {n:<{w}}  {t.dtype_name:<8} {fmt_shape(t.shape):<18} {t.nbytes:>12,} B  "
                  f"{os.path.basename(t.extra['part'])}")
        if len(shown) < len(names):
            print(f"    ... {len(names) - len(shown)} more (--all to list every tensor)")
    return 0


def _commands(sub) -> None:
    s = sub.add_parser("inspect-set", help="show an AEROSET: parts, shards and tensors")
    s.add_argument("set", help="the set's directory, its *.aeroset.json, or the index's http(s) URL")
    s.add_argument("--json", action="store_true")
    s.add_argument("--all", action="store_true")
    s.add_argument("--remote", action="store_true", help="read a local index's files from its base_url")
    s.set_defaults(func=cmd_inspect_set)


def _cgen() -> list:
    """The index's declarations go into the C++ reader's header beside AERO's."""
    from ..cgen import CgenSpec
    return [CgenSpec("cpp/include/aero/generated.hpp", "schema_aeroset", S, order=1)]


DESCRIPTOR = FormatDescriptor("aeroset", S, AeroSet, write_aeroset, validate=AeroSet.validate_file, claims=_claims,
                              commands=_commands, demo=_demo, directory=True, cgen=lambda: _cgen(),
                              capabilities=A.CAPABILITIES,
                              suffixes=(S.INDEX_SUFFIX,),
                              write_target=lambda p: os.path.dirname(os.path.abspath(p)),
                              summary="multi-file AERO: an index JSON, parts, local or over HTTP Range requests")
