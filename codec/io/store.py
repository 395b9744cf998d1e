"""Where a model's bytes live: one small store interface and its implementations.

Everything that reads a file that is not a local path -- a single file (``codec.remote_file``),
a multi-file model's files (its format's remote reader) -- reads through a :class:`Store`:

- :class:`HttpStore` -- http(s) URLs, over the checked Range client of :mod:`codec.io.remote`;
- :class:`codec.io.store_fsspec.FsspecStore` -- any fsspec URL (``s3://``, ``gs://``, ``az://``,
  ``memory://``, ``hf://`` ...), loaded only when such a URL is used (``pip install
  'modelcodec[s3]'``); :class:`codec.io.store_obstore.ObstoreStore` -- the same for ``s3://``,
  its reads through obstore (faster) where it is installed and takes the set-up;
- :class:`LocalStore` -- local paths (``file://`` URLs are local paths).

A store's keys are the files' full URLs; :func:`codec.io.open_store.store_for` picks the store a URL needs.  Byte requests are ``(url, start, length, size or
None)``; :meth:`Store.get_ranges` coalesces nearby ranges of one file into few large requests
(``max_gap``, ``max_coalesced``) in one place for every implementation.  Reads are never
trusted by the store: the callers verify what they read against hashes from a trusted source
before using it (see the modules above).  Writes (:meth:`Store.put`) are atomic: an object
appears complete or not at all.  Every failure is a :class:`codec.errors.RemoteError`,
:class:`~codec.errors.LimitError` or :class:`~codec.errors.UsageError`.
"""
from __future__ import annotations

import numbers
import os
import re
from collections import Counter
from typing import Callable, Iterable

from ..schemas.http import SHARED_SAS, SIGNATURE_PARAMS

from .. import errors as E

#: a URL: a scheme of two or more characters, then "://" (one letter is a Windows drive)
_URL = re.compile(r"^([A-Za-z][A-Za-z0-9+.\-]+)://")
#: nearby ranges of one file closer than this are read as one request
MAX_GAP = 1024 * 1024
#: ... unless the request would grow past this
MAX_COALESCED = 16 * 1024 * 1024
#: what to install for a filesystem fsspec reaches through another package
EXTRAS = {"s3": "s3", "s3a": "s3", "gs": "gcs", "gcs": "gcs", "az": "azure", "abfs": "azure", "abfss": "azure",
          "hf": "hf"}


def scheme_of(source) -> str | None:
    """The URL scheme of ``source`` in lower case ("s3", "https"), None for a local path."""
    m = _URL.match(source) if isinstance(source, str) else None
    return m.group(1).lower() if m else None


def is_url(source) -> bool:
    """Whether ``source`` is a URL other than file:// (those are read through a store)."""
    return scheme_of(source) not in (None, "file")


def local_path(source):
    """A file:// URL as the local path it names; anything else unchanged."""
    if scheme_of(source) == "file":
        from urllib.parse import unquote, urlsplit
        u = urlsplit(source)
        if u.netloc not in ("", "localhost"):
            raise E.UsageError(f"{source}: a file:// URL names a file on this machine (no host)")
        return unquote(u.path)
    return source


def signature_of(url: str) -> str | None:
    """The parameter that makes the http(s) URL ``url`` a presigned URL -- a signature valid for
    its own object only (``X-Amz-Signature``, ``Signature``, ``X-Goog-Signature``, an Azure
    SAS's ``sig`` for one blob: ``schemas.http.SIGNATURE_PARAMS``) -- as it is spelled there, or
    None."""
    from urllib.parse import parse_qsl, urlsplit
    if scheme_of(url) not in ("http", "https"):
        return None
    try:
        params = parse_qsl(urlsplit(url).query, keep_blank_values=True)
    except ValueError:
        return None
    given = {k.lower(): v for k, v in params}
    shared = any(k in given and v in (None, given[k]) for k, v in SHARED_SAS)  # (an Azure SAS for many blobs)
    return next((k for k, _ in params if k.lower() in SIGNATURE_PARAMS and not (shared and k.lower() == "sig")),
                None)


def folder_of(url: str) -> str:
    """The folder URL of the file at ``url``: its path up to the last ``/``, without its query
    string or fragment (the files beside it are named from there)."""
    return url.split("?", 1)[0].split("#", 1)[0].rsplit("/", 1)[0]


def with_shared_query(source: str, url: str) -> str:
    """``url`` -- a file beside the http(s) URL ``source`` -- asked for with ``source``'s query
    string when it has one that is not a per-object signature (``?download=true``, a shared
    token: valid for every file there); else ``url`` as it is (a presigned URL's query is valid
    for its own file only: :func:`signature_of`)."""
    from urllib.parse import urlsplit
    if scheme_of(source) not in ("http", "https") or signature_of(source) is not None:
        return url
    try:
        query = urlsplit(source).query
    except ValueError:
        return url
    return f"{url}?{query}" if query and "?" not in url else url


def presigned_failure(e: E.FormatError, source: str) -> E.FormatError:
    """``e`` -- a failure to read a file beside ``source`` -- saying why, when ``source`` is a
    presigned URL (the file was asked for without its signature: :func:`signature_of`)."""
    sig = signature_of(source)
    if sig is None or not isinstance(e, E.RemoteError):
        return e
    return type(e)(e.format, e.offset, e.path, e.rule, f"{e.message}; the model's URL is presigned ({sig}), "
                         "and a presigned URL is valid for its own file only: the other files were asked for "
                         "without it.  Read the model from its bucket with credentials (s3://, gs://, az:// with "
                         "storage_options=, or the store's environment), or download each file with a URL "
                         "presigned for it into one folder and open that", source=e.source)


def is_pattern(source) -> bool:
    """Whether ``source`` is a glob pattern (``*``, ``?`` or ``[`` in a local path or an
    object-storage URL; an http(s) URL is never one: ``?`` starts its query)."""
    return (isinstance(source, str) and scheme_of(source) not in ("http", "https")
            and any(c in source for c in "*?["))


def glob_pattern(pattern: str) -> str:
    """``pattern`` with ``**`` inside a name (``zoo/**.bin``) as the directory wildcard of its
    own then the name (``zoo/**/*.bin``): a file so named at any depth, in either spelling."""
    head, sep, rest = pattern.partition("://")
    if not sep:
        head, rest = "", pattern
    parts = [f"**/{p.replace('**', '*')}" if "**" in p and p != "**" else p for p in rest.split("/")]
    return head + sep + "/".join(parts)


def coalesce(spans: list[tuple[int, int]], max_gap: int = MAX_GAP,
             max_coalesced: int = MAX_COALESCED) -> list[tuple[int, int, list[int]]]:
    """Group the ``(start, length)`` spans of one file into requests ``(start, length, [index
    of each span it covers])``: spans closer than ``max_gap`` are read as one unless that read
    would pass ``max_coalesced`` bytes (a single span longer than that is its own request)."""
    order = sorted(range(len(spans)), key=lambda i: spans[i][0])
    runs: list[list] = []
    for i in order:
        a, n = spans[i]
        if runs:
            s, e, members = runs[-1]
            if a <= e + max_gap and max(e, a + n) - s <= max_coalesced:
                runs[-1] = [s, max(e, a + n), members + [i]]
                continue
        runs.append([a, a + n, [i]])
    return [(s, e - s, members) for s, e, members in runs]


class Store:
    """The interface: byte ranges, sizes and whole small files of the objects at URLs, and, for
    stores that can write, atomic puts, listing and deleting.  ``stats`` counts ``requests``,
    ``range_requests`` and ``bytes`` received (tests and benchmarks read it)."""
    supports_writes = False
    supports_listing = False
    #: parallel requests at most
    workers = 1
    #: whether a Range read of this store may be answered by a server that ignores Range
    #: (then whole-file commands fall back to one streamed download)
    stats: Counter
    #: whether :meth:`read_into` streams a range of any length in bounded memory (whole-file
    #: work then reads a few long ranges in parallel rather than many 16 MiB ones)
    streams = False

    # ------------------------------------------------------------------ reading
    def size(self, url: str) -> int:
        raise NotImplementedError

    def get(self, url: str, limit: int) -> bytes:
        """A whole (small) object, refused before reading when it is over ``limit`` bytes."""
        raise NotImplementedError

    def fetch(self, wanted: list[tuple[str, int, int, int | None]], *,
              progress: Callable[[int], None] | None = None) -> list:
        """The bytes of each ``(url, start, length, size or None)``, as asked (no coalescing),
        in parallel where the store can."""
        raise NotImplementedError

    def get_ranges(self, url: str, spans: list[tuple[int, int]], size: int | None = None, *,
                   max_gap: int = MAX_GAP, max_coalesced: int = MAX_COALESCED,
                   progress: Callable[[int], None] | None = None) -> list:
        """The bytes of each ``(start, length)`` of the object at ``url``, nearby spans read
        together (:func:`coalesce`): few large requests, in parallel."""
        runs = coalesce(spans, max_gap, max_coalesced)
        bufs = self.fetch([(url, a, n, size) for a, n, _ in runs], progress=progress)
        out: list = [None] * len(spans)
        for (a, _, members), buf in zip(runs, bufs):
            for i in members:
                s, n = spans[i]
                out[i] = buf[s - a:s - a + n]
        return out

    def read_into(self, url: str, start: int, length: int, size: int | None,
                  write: Callable[[int, bytes], None]) -> None:
        """The bytes ``[start, start + length)`` of ``url``, each piece given to ``write(offset,
        piece)`` as it arrives (in order; streamed where :attr:`streams`, else read whole)."""
        write(start, self.fetch([(url, start, length, size)])[0])

    def version(self, url: str) -> str | None:
        """What identifies the object's current content (an ETag, a version id), if known."""
        return None

    def run(self, jobs: list[Callable[[], None]]) -> None:
        """Run jobs (in parallel where the store can); the first failure is raised."""
        for job in jobs:
            job()

    def check(self, url: str, what: str = "URL") -> str:
        """``url`` if this store reaches it, else a RemoteError naming ``what``."""
        return url

    # ------------------------------------------------------------------ writing
    def put(self, url: str, chunks: Iterable[bytes], *, replace: bool = True) -> bool:
        """Write an object from ``chunks`` atomically: it appears complete, or not at all (and
        no partial upload is left behind).  ``replace=False``: only if nothing has the name
        when it is complete -- not even what appeared there while it was written (local files,
        S3: see each store) --; else nothing is written and False is returned."""
        raise E.UsageError(f"{url}: {type(self).__name__} cannot write")

    def put_file(self, url: str, path: str, piece: int = MAX_COALESCED, *, replace: bool = True) -> bool:
        """Upload the local file ``path`` to ``url`` atomically (:meth:`put`)."""
        def chunks():
            with open(path, "rb") as f:
                while True:
                    b = f.read(piece)
                    if not b:
                        return
                    yield b
        return self.put(url, chunks(), replace=replace)

    def list(self, prefix: str) -> list[str]:
        """The URLs of the objects under ``prefix`` (a directory URL)."""
        raise E.UsageError(f"{prefix}: {type(self).__name__} cannot list")

    def glob(self, pattern: str) -> list[str]:
        """The URLs of the objects matching ``pattern`` (``*``, ``?``, ``[...]``; ``**`` any
        depth, see :func:`glob_pattern`), sorted."""
        raise E.UsageError(f"{pattern}: {type(self).__name__} cannot list, so it takes no pattern")

    def delete(self, url: str) -> None:
        """Remove the object at ``url`` (only ever called on objects the caller wrote)."""
        raise E.UsageError(f"{url}: {type(self).__name__} cannot delete")

    def move(self, src: str, dst: str, *, replace: bool = True) -> bool:
        """Give the object at ``src`` (one the caller wrote) the name ``dst`` in the same store,
        replacing what is there: ``dst`` appears complete or not at all (object stores copy on
        the server, then delete ``src``; nothing is downloaded).  ``replace=False``: only if
        nothing has the name then, not even what appeared there a moment before (local files,
        S3: see each store); else ``src`` is left as it is and False is returned."""
        raise E.UsageError(f"{dst}: {type(self).__name__} cannot write")

    def exists(self, url: str) -> bool:
        """Whether there is an object at ``url``: False only when the store says there is none
        (:class:`codec.io.remote.NotThereError`: HTTP 404 or 410, no such key); any other failure
        (a 5xx, a refused connection or credential, a timeout) is raised as the RemoteError it
        is -- it says nothing of whether the object is there."""
        from .remote import NoRangeError, NotThereError
        try:
            self.size(url)
        except NotThereError:
            return False
        except NoRangeError:  # (the server answered with the whole file: it is there)
            return True
        return True

    def kind(self, url: str) -> str | None:
        """What is at ``url`` now, asked anew (never from a cached listing): None (nothing),
        ``"file"``, ``"link"`` (a symbolic link, itself not followed: local files), ``"folder"``
        (a directory, or objects named ``url + "/..."``), or what else it is (``"a FIFO"``...)."""
        return "file" if self.exists(url) else None

    def close(self) -> None:
        pass

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        self.close()


class HttpStore(Store):
    """http(s) URLs, read with :class:`codec.io.remote.Http` (checked 206 answers, retries,
    the file pinned by its ETag).  Read-only."""

    def __init__(self, http=None):
        from .remote import Http, HttpOptions
        if http is not None and not isinstance(http, (Http, HttpOptions)):
            raise E.UsageError(f"http= takes an HttpOptions or an Http client, not {type(http).__name__}")
        self.http = http if isinstance(http, Http) else Http(http)

    @property
    def stats(self) -> Counter:
        return self.http.stats

    @property
    def options(self):
        return self.http.options

    @property
    def workers(self) -> int:
        return max(self.http.options.workers, 1)

    def size(self, url: str) -> int:
        return self.http.size(url)

    def get(self, url: str, limit: int) -> bytes:
        return self.http.get(url, limit)

    def fetch(self, wanted, *, progress=None) -> list:
        return self.http.fetch(wanted, progress=progress)

    def version(self, url: str) -> str | None:
        return self.http._etags.get(url)

    def download(self, url: str, f, *, progress=None) -> int:
        """The whole file in one streamed GET (a server without Range requests)."""
        return self.http.download(url, f, progress=progress)

    def run(self, jobs) -> None:
        self.http.run(jobs)

    def check(self, url: str, what: str = "URL") -> str:
        from .remote import check_url
        return check_url(url, what)

    def close(self) -> None:
        self.http.close()


class LocalStore(Store):
    """Local files (a key is a path, or a file:// URL): read with pread, written atomically
    (temp file beside the target, fsync, rename)."""
    supports_writes = supports_listing = True

    def __init__(self):
        self.stats = Counter()

    def size(self, url: str) -> int:
        try:
            return os.stat(local_path(url)).st_size
        except OSError as e:
            raise E.UsageError(f"{url}: {e.strerror or e}") from None

    def get(self, url: str, limit: int) -> bytes:
        from .sources import open_regular
        with open_regular(local_path(url)) as f:
            if os.fstat(f.fileno()).st_size > limit:
                from .remote import _fail
                from ..schemas.http import Rule
                raise _fail(url, None, Rule.LIMIT, f"over {limit} bytes")
            return f.read()

    def fetch(self, wanted, *, progress=None) -> list:
        from .sources import open_regular
        out = []
        for url, a, n, _ in wanted:
            with open_regular(local_path(url)) as f:
                try:
                    b = os.pread(f.fileno(), n, a)
                except OSError as e:
                    raise E.UsageError(f"{url}: cannot read: {e.strerror or e}") from None
            if len(b) != n:
                raise E.UsageError(f"{url}: bytes [{a}, +{n}) are past the end of the file")
            self.stats["requests"] += 1
            self.stats["bytes"] += len(b)
            out.append(memoryview(b))
            if progress is not None:
                progress(len(b))
        return out

    def exists(self, url: str) -> bool:
        return os.path.isfile(local_path(url))

    def kind(self, url: str) -> str | None:
        import stat
        from .sources import _KINDS
        try:
            mode = os.lstat(local_path(url)).st_mode
        except FileNotFoundError:
            return None
        except OSError as e:
            raise E.UsageError(f"{url}: {e.strerror or e}") from None
        if stat.S_ISREG(mode) or stat.S_ISLNK(mode):
            return "file" if stat.S_ISREG(mode) else "link"
        return "folder" if stat.S_ISDIR(mode) else next((k for test, k in _KINDS if test(mode)), "not a regular file")

    def put(self, url: str, chunks, *, replace: bool = True) -> bool:
        """(Keys name objects, as on object storage: missing folders are made.  ``replace=False``:
        :func:`codec.io.atomic.atomic_write`'s.)"""
        from .atomic import atomic_write, os_error
        path = local_path(url)
        try:
            os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
        except OSError as e:
            raise os_error(path, e) from None
        try:
            with atomic_write(path, replace=replace) as f:
                for b in chunks:
                    f.write(b)
        except FileExistsError:
            return False
        return True

    def move(self, src: str, dst: str, *, replace: bool = True) -> bool:
        """(``replace=False``: :func:`codec.io.atomic.rename_new`.)"""
        from .atomic import os_error, rename_new
        path = local_path(dst)
        try:
            os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
            if not replace:
                return rename_new(local_path(src), path)
            os.replace(local_path(src), path)
        except OSError as e:
            raise os_error(path, e) from None
        return True

    def list(self, prefix: str) -> list[str]:
        root = local_path(prefix)
        return sorted(os.path.join(d, n) for d, _, names in os.walk(root) for n in names)

    def glob(self, pattern: str) -> list[str]:
        import glob
        return sorted(p for p in glob.glob(glob_pattern(local_path(pattern)), recursive=True) if os.path.isfile(p))

    def delete(self, url: str) -> None:
        os.remove(local_path(url))


def publish(store: Store, root: str, url_root: str, last: tuple = ()) -> list[str]:
    """Upload every file under the local directory ``root`` to ``url_root`` + its relative
    path, each atomically (:meth:`Store.put_file`); the files whose names end with one of
    ``last`` (a set's index) only once every other one is up -- a reader never finds an index
    naming a file not there yet.  Returns the URLs written."""
    files = sorted(os.path.join(d, n) for d, _, names in os.walk(root) for n in names)
    first = [f for f in files if not f.endswith(last)] if last else files
    final = [f for f in files if f not in first]
    done: list[str] = []

    def up(f: str) -> None:
        url = url_root.rstrip("/") + "/" + os.path.relpath(f, root).replace(os.sep, "/")
        store.put_file(url, f)
        done.append(url)
    store.run([lambda f=f: up(f) for f in first])
    for f in final:
        up(f)
    return done


def tensor_limit(limit) -> int:
    """``max_tensor_bytes=`` as a reader takes it: a positive integer, else a UsageError naming it."""
    if isinstance(limit, bool) or not isinstance(limit, numbers.Integral) or limit < 1:
        raise E.UsageError(f"max_tensor_bytes must be a positive integer (got {limit!r})")
    return int(limit)
