"""Where a set's files are: :class:`LocalFiles` (paths confined to the set's directory) or
:class:`RemoteFiles` (http/https: checked, parallel, retried Range requests of
:mod:`codec.io.remote`, and the disk cache of :mod:`codec.io.cache`, trusting only what the chain
of hashes from the index JSON vouches for)."""
from __future__ import annotations

import errno
import os
import shutil
import stat
import tempfile
from typing import TYPE_CHECKING
from urllib.parse import quote

from ...schemas import aeroset as S, http as H
from ...schemas.aeroset import Rule

from ... import errors as E
from ...io import links
from ...io.cache import RangeCache
from ...io.integrity import BackgroundFeed, blake3_bytes
from ...io.remote import SizeMismatchError
from ...io.sources import FileMap, Source, open_regular
from ...io.store import folder_of, presigned_failure, with_shared_query
from ...ui.progress import Progress
from .. import aero as A
from .common import FMT, _at, _err, _is_hex64, safe_join

if TYPE_CHECKING:  # (the HTTP client library loads only when a set is remote)
    from ...io.store import Store

#: tensors closer than this in one part are read with one Range request
COALESCE_GAP = 256 * 1024
#: a whole file (validate --full) is downloaded this many bytes per request
_DOWNLOAD_PIECE = 16 * 1024 * 1024


class LocalFiles:
    """The files of a set in a local directory, held: the directory is opened once, the index
    and every file it lists are opened relative to it (paths confined as :func:`safe_join`
    says, no symlink followed on the way) and mapped, all at once when the index is read
    (:meth:`pin`).  A writer replacing the set swaps in a new directory and removes the old
    one's files: an open set keeps reading the files it holds, all of one version.  A mapping
    holds no descriptor (:class:`FileMap`): a set of any number of files opens with the
    directory's one descriptor held, whatever ``ulimit -n`` is."""
    remote = False

    def __init__(self, index_path: str):
        self.index_path = index_path
        self.base = os.path.dirname(os.path.abspath(index_path))
        try:
            self._dir = os.open(self.base, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0) | getattr(os, "O_CLOEXEC", 0))
        except OSError as e:
            raise E.UsageError(f"{index_path}: cannot open the set's directory: {e.strerror or e}") from None
        self._root = os.path.realpath(self.base)
        #: full path -> the file's mapping, or (exists, why) when it could not be opened
        self._held: dict[str, object] = {}

    def index_bytes(self) -> bytes:
        with open_regular(os.path.basename(self.index_path), "AEROSET index", dir_fd=self._dir,
                          shown=self.index_path) as f:
            size = os.fstat(f.fileno()).st_size
            if size > S.MAX_INDEX_BYTES:
                raise _err(E.LimitError, "index", Rule.LIMIT, f"index is {size} bytes, over {S.MAX_INDEX_BYTES}")
            return f.read(S.MAX_INDEX_BYTES + 1)

    def locate(self, ref: dict, where: str) -> str:
        return safe_join(self.base, ref["path"], where, self.index_path)

    def pin(self, index: dict) -> None:
        """Map every file the index lists (those whose path is refused are left to
        :meth:`locate`'s error where they are used)."""
        for where, ref in links.entries(S.FILES, index, "index"):
            try:
                path = self.locate(ref, _at(where))
            except E.ModelcodecError:
                continue
            if path not in self._held:
                self._held[path] = self._map_beneath(path)

    def _map_beneath(self, path: str):
        """``path`` (inside the set, symlinks resolved) opened relative to the set's directory,
        one component at a time, never through a symlink, and mapped: the mapping, (exists, why
        not) for a file that is not there or not a regular file, or the UsageError that
        refused it."""
        names = os.path.relpath(path, self._root).split(os.sep)
        at, opened = self._dir, []
        nofollow = getattr(os, "O_NOFOLLOW", 0)
        try:
            for n in names[:-1]:
                at = os.open(n, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0) | nofollow | getattr(os, "O_CLOEXEC", 0),
                             dir_fd=at)
                opened.append(at)
            if not stat.S_ISREG(os.stat(names[-1], dir_fd=at, follow_symlinks=False).st_mode):
                return True, "not a regular file"
            with open_regular(names[-1], "AEROSET file", dir_fd=at, shown=path, nofollow=True) as f:
                try:
                    return FileMap(f.fileno(), os.fstat(f.fileno()).st_size)
                except (OSError, ValueError) as e:  # (ENOMEM: no address space, or vm.max_map_count mappings)
                    if getattr(e, "errno", None) in (errno.EMFILE, errno.ENFILE):  # (where Python's mmap maps it)
                        raise self._too_many(path, e) from None
                    why = getattr(e, "strerror", None) or e
                    raise _err(E.LimitError, "index", Rule.LIMIT, f"{path}: cannot map it ({why})",
                               self.index_path) from None
        except (FileNotFoundError, NotADirectoryError):
            return False, "no such file"
        except OSError as e:
            if e.errno in (errno.EMFILE, errno.ENFILE):
                raise self._too_many(path, e) from None
            return E.UsageError(f"{path}: cannot open AEROSET file: {e.strerror or e}")
        except E.UsageError as e:  # (refused by open_regular: said as it says it)
            return e
        finally:
            for fd in opened:
                os.close(fd)

    @property
    def missing(self) -> bool:
        """Whether a file the index lists could not be opened."""
        return any(isinstance(v, (tuple, E.UsageError)) for v in self._held.values())

    def replaced(self) -> bool:
        """Whether the set's directory is no longer the one this store holds (a writer swapped
        in a new version, or is doing so)."""
        if self._dir is None:
            return False
        try:
            now, mine = os.stat(self.base), os.fstat(self._dir)
        except OSError:
            return True
        return (now.st_dev, now.st_ino) != (mine.st_dev, mine.st_ino)

    def _file(self, ref: dict, where: str) -> tuple[str, FileMap]:
        """(path, the mapping of the file held for ``ref``)."""
        path = self.locate(ref, _at(where))
        if self._dir is None:
            raise E.UsageError(f"{self.index_path}: the set is closed")
        held = self._held.get(path)
        if held is None:  # (not listed when the index was read)
            held = self._held[path] = self._map_beneath(path)
        if isinstance(held, tuple):
            links.require_file(S.FILES, ref, where, False, held[0], FMT, self.index_path)
        if isinstance(held, E.UsageError):
            raise E.UsageError(str(held))
        return path, held

    def _too_many(self, path: str, e: OSError) -> E.FormatError:
        return _err(E.LimitError, "index", Rule.LIMIT, f"{path}: cannot open it ({e.strerror or e}): opening a "
                    "file of the set takes a descriptor for a moment and the process has none left (raise the "
                    "limit: `ulimit -n`)", self.index_path)

    def _source(self, ref: dict, where: str) -> Source:
        path, mapped = self._file(ref, where)
        return Source(path, mapped=mapped)

    def open(self, ref: dict, where: str, strict: bool, *, whole: bool = False, collect: bool = False) -> A.AeroReader:
        """A part's reader (``collect``: one that keeps its violations instead of raising them)."""
        return A.AeroReader(self._source(ref, where), strict=strict, _collect=collect)

    def read(self, items: list, verify: bool, progress) -> dict:
        return {name: r.tensor(name, verify=verify) for name, r, _, _ in items}

    def open_many(self, jobs: list) -> None:
        for job in jobs:
            job()

    def whole(self, ref: dict, where: str, progress):
        """(the whole file here, cleanup, a call giving (digest, size)) for full validation: the
        digest is taken on a thread of its own, while the caller validates the same file (SHA-256
        and the AERO check's BLAKE3 passes share the two cores)."""
        from concurrent.futures import ThreadPoolExecutor
        path, mapped = self._file(ref, where)
        own = Source(path, mapped=mapped)  # (the digest's own: the caller's is closed by its check)

        def digest():
            try:
                return links.digest_source(S.FILES, own)
            finally:
                own.close()
        ex = ThreadPoolExecutor(1, thread_name_prefix="modelcodec-sha256")
        done = ex.submit(digest)
        ex.shutdown(wait=False)  # (the thread ends with its one job)
        return Source(path, mapped=mapped), None, done.result

    def close(self) -> None:
        self._held.clear()  # (a mapping is unmapped with the last array viewing it)
        if self._dir is not None:
            os.close(self._dir)
            self._dir = None


class RemoteFiles:
    """The files of a set that are not here -- behind http(s) URLs or on object storage (any
    :class:`codec.io.store.Store`, ``http``): checked Range requests and the disk cache."""
    remote = True
    #: set by AeroSet once index.aero checked out against the JSON's sha256: only then do the
    #: hash_b3 values tensors are checked against come from a trusted source
    trusted = False

    def __init__(self, index_url: str | None, base_url: str | None, http: Store, cache: RangeCache | None,
                 max_tensor_bytes: int, source: str):
        self.index_url = index_url
        self.base_url = base_url
        self.http = http
        self.cache = cache
        self.max_tensor_bytes = max_tensor_bytes
        self.source = source
        #: the cache keys each opened file's control region was read under
        self._control_keys: dict[str, list[str]] = {}
        #: each file's URL -> (where the index names it, its entry) (:meth:`_failure`)
        self._entry_of: dict[str, tuple[str, dict]] = {}

    def index_bytes(self) -> bytes:
        return self.http.get(self.index_url, S.MAX_INDEX_BYTES)

    #: (a remote file is opened when first needed; a file re-published since the index was read
    #: is caught by the hashes the index vouches for, or by its ETag)
    missing = False

    def pin(self, index: dict) -> None:
        pass

    def replaced(self) -> bool:
        return False

    def locate(self, ref: dict, where: str) -> str:
        """A file's URL: an http(s) URL as is, a relative path as base_url + "/" + path."""
        p = ref["path"]
        if "://" in p:
            url = self.http.check(p, where)
            self._entry_of[url] = (where, ref)
            return url
        segs = p.replace("\\", "/").split("/")
        if p.startswith(("/", "\\")) or any(sg in ("..", ".") for sg in segs) or "?" in p or "#" in p:
            raise _err(E.StructureError, where, Rule.PATH, f"{p!r} is not a plain relative path", self.source)
        if self.base_url is None:
            raise E.UsageError(f"{self.source}: {where} is relative and the index has no base_url to read it from "
                               "remotely (give base_url=...; without remote=True, CLI --remote, its files are read "
                               "beside the index)")
        try:
            q = quote(p, safe="/-._~")
        except UnicodeEncodeError as e:  # a lone surrogate (JSON allows "\ud800")
            raise _err(E.StructureError, where, Rule.PATH, f"{p!r} is not a usable file name ({e})",
                       self.source) from None
        url = self._beside(self.base_url.rstrip("/") + "/" + q)
        self._entry_of[url] = (where, ref)
        return url

    def _beside(self, url: str) -> str:
        """``url`` -- a file in the set's folder -- with the query string the index's http(s) URL
        shares with the files beside it (``?token=...``; not a presigned URL's signature:
        :func:`codec.io.store.with_shared_query`); a file elsewhere (another base_url) without."""
        if self.index_url is None or self.base_url.rstrip("/") != folder_of(self.index_url):
            return url
        return with_shared_query(self.index_url, url)

    def _failure(self, e: E.FormatError) -> E.FormatError:
        """``e`` -- a failure to read a file of the set -- saying why when it is beside the
        index and the index's URL is presigned (the file was asked for without its signature);
        a file of another size than its entry gives is the set's finding [FILES.rule]."""
        if isinstance(e, SizeMismatchError) and e.source in self._entry_of:
            where, ref = self._entry_of[e.source]
            where = where[:-len(S.FILES.path) - 1] if where.endswith("." + S.FILES.path) else where
            return E.IntegrityError(FMT, None, f"{where}.{S.FILES.size}", S.FILES.rule,
                                    f"{ref[S.FILES.path]} is {e.actual} bytes at {e.source}, the index says "
                                    f"{e.expected}", source=self.source, expected=e.expected, actual=e.actual)
        if self.index_url is None or folder_of(e.source or "") != folder_of(self.index_url):
            return e
        return presigned_failure(e, self.index_url)

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
        keys = [RangeCache.key(_unqueried(url), a, n, tag) if cached else None for a, n in spans]
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
        """A file's control region (:meth:`_open`)."""
        url = self.locate(ref, _at(where))
        try:
            return self._open(url, ref, where, strict, whole)
        except E.RemoteError as e:
            raise self._failure(e) from None

    def _open(self, url: str, ref: dict, where: str, strict: bool, whole: bool) -> A.AeroReader:
        """A file's control region.  Trust follows the chain from the index JSON: bytes are
        cached only once the file's sha256 from the index vouches for them, which needs the
        whole file -- always the case for ``whole`` (index.aero, whose TIDX holds the hash_b3
        every tensor is checked against); a part's control region read by ranges is used (its
        tensors are checked against index.aero's hash_b3) but never cached.  A failure that
        involved cached ranges is retried once with fresh reads."""
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
                    whole_part = r.held(0, size) if sha else None
                    vouched = whole_part is not None
                    if vouched:  # a small part read whole: check it now
                        try:
                            links.check_bytes(S.FILES, ref, where, whole_part, url, FMT, self.source)
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
            data = r.held(t.offset, t.nbytes)
            if data is not None:  # already read with the part's control region
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
                key = RangeCache.key(_unqueried(r.source), t.offset, t.nbytes,
                                     f"{self._tag(ref) or ''}|{trusted.lower()}")
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
                    runs.append((url, off, t.nbytes, r.size, [(name, t, r, key)]))
        if not runs:
            return out
        with Progress(sum(n for _, _, n, _, _ in runs), "fetch", enabled=progress) as bar:
            try:
                bufs = self.http.fetch([(u, a, n, sz) for u, a, n, sz, _ in runs], progress=bar.update)
            except E.RemoteError as e:
                raise self._failure(e) from None
        trusted_of = {name: trusted for name, _, _, trusted in items}
        fetched = [(name, t, r, key, buf[t.offset - a:t.offset - a + t.nbytes])
                   for (_, a, _, _, members), buf in zip(runs, bufs) for name, t, r, key in members]

        def keep(name, t, r, key, data):  # on the client's threads: BLAKE3 releases the GIL
            digest = None
            if "hash_b3" in t.extra and (verify or key is not None):
                digest = blake3_bytes(data)
                if verify:
                    r.check_hash_b3(name, digest.hex())
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
        try:
            size = self._size(ref, url)
        except E.RemoteError as e:
            raise self._failure(e) from None
        d = tempfile.mkdtemp(prefix="modelcodec-validate-")
        path = os.path.join(d, "file.aero")  # never a name taken from the URL
        h = links.digest_of(S.FILES)
        try:
            # (hashed on a worker while the next window downloads: each piece is a new buffer)
            with open(path, "wb") as f, Progress(size, f"download {ref['path'][-40:]}", enabled=progress) as bar, \
                    BackgroundFeed(h) as feed:
                window = _DOWNLOAD_PIECE * self.http.workers
                for w in range(0, size, window):
                    spans = [(a, min(_DOWNLOAD_PIECE, size - a)) for a in range(w, min(w + window, size), _DOWNLOAD_PIECE)]
                    for (a, _), b in zip(spans, self.http.fetch([(url, a, n, size) for a, n in spans],
                                                                progress=bar.update)):
                        f.seek(a)
                        f.write(b)
                        feed.update(b)  # the spans of a window come back in file order
        except E.RemoteError as e:
            shutil.rmtree(d, ignore_errors=True)
            raise self._failure(e) from None
        except BaseException:
            shutil.rmtree(d, ignore_errors=True)
            raise
        return path, lambda: shutil.rmtree(d, ignore_errors=True), lambda: (h.hexdigest(), size)

    def close(self) -> None:
        self.http.close()


def _unqueried(url: str) -> str:
    """A file's URL as its cache entries are keyed: without its query string (a token, a
    presigned URL's signature: a new one tomorrow is the same file).  Safe, as every entry is
    keyed by the content the index vouches for too (sha256 and size, a tensor's trusted hash_b3)
    and checked against it when read."""
    return url.split("?", 1)[0]
