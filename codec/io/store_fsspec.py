"""Object storage and every other fsspec filesystem (``s3://``, ``gs://``, ``az://``,
``memory://``, ``hf://`` ...) as a :class:`codec.io.store.Store`.

Loaded only when such a URL is used; fsspec and the filesystem's own package come with an
extra (``pip install 'modelcodec[s3]'``: fsspec + s3fs).  Credentials and endpoints come from
``storage_options=`` or the filesystem's standard environment (for S3: ``AWS_ENDPOINT_URL``,
``AWS_ACCESS_KEY_ID``, ``AWS_SECRET_ACCESS_KEY``, ``AWS_DEFAULT_REGION`` ...).

Reads are ranged (s3fs: a GET per range, all at once, or one streamed; other filesystems:
``cat_ranges``, parallel on async ones), each answer
checked to be exactly the length asked for, and the object to be of the size the caller gives
(a :class:`codec.io.remote.SizeMismatchError` as over HTTP: on S3 each answer says the object's
size; elsewhere it is looked up when an answer comes short); every failure the filesystem raises (a missing
object, a refused credential, a connection error after the filesystem's own retries) is a
:class:`codec.errors.RemoteError` naming the URL (a missing object, and only that, a
:class:`codec.io.remote.NotThereError`: what :meth:`Store.exists` says False for).  On s3fs every read of an object is pinned
to the version seen first (its VersionId on a versioned bucket, else If-Match on its ETag): an
object replaced after open is a RemoteError, never its new bytes.  Other filesystems' ranged
reads are not pinned: an object re-published while it is read is caught by the hashes that
cover what is read (a multi-file model's index, a file's own tensor hashes), not in formats
without hashes.  A write is atomic: a single PUT for a small object, else a multipart upload
completed last and aborted on any failure.
"""
from __future__ import annotations

import threading
from collections import Counter
from concurrent.futures import ThreadPoolExecutor

import numpy as np

from ..schemas.http import MAX_FILE_BYTES, MAX_RANGE_BYTES, Rule

from .. import errors as E
from .remote import CONTENT_RANGE_TOTAL, NotThereError, _fail, size_mismatch
from .store import EXTRAS, Store, glob_pattern, scheme_of

#: filesystems whose open files upload in parts that ``discard()`` aborts
_DISCARDABLE = ("s3", "s3a", "gs", "gcs")
#: a temporary object's name has this after its target's (as local writers' temporaries)
TEMP_MARK = ".modelcodec-"
#: parallel requests (object stores serve many ranges at once well)
WORKERS = 8
#: a streamed range (:meth:`FsspecStore.read_into`) is read in pieces of about this size (the
#: memory each stream holds)
STREAM_CHUNK = 4 * 1024 * 1024
#: an object written with one PUT when it is at most this big, else in parts of this size
PART = 16 * 1024 * 1024
#: a copy on the server is made in parts of at most this size (S3's largest copied part)
COPY_PART = 5 * 1024 ** 3


def _taken(e: BaseException) -> bool:
    """Whether ``e`` is an S3 write refused because the name was taken (``If-None-Match: *``
    failed; 409 ConditionalRequestConflict: a write of that name was under way then)."""
    return isinstance(e, FileExistsError) or any(
        ((getattr(x, "response", None) or {}).get("Error") or {}).get("Code") in
        ("PreconditionFailed", "ConditionalRequestConflict") for x in (e, e.__cause__))


def _filesystem(url: str, scheme: str, storage_options: dict | None):
    """The fsspec filesystem that reaches ``url`` (what the URL says of it -- an FTP host, an
    account -- taken into account, as ``fsspec.open`` does)."""
    extra = EXTRAS.get(scheme, scheme)
    try:
        import fsspec.core
    except ImportError:
        raise E.UsageError(f"{scheme}:// URLs need fsspec: pip install 'modelcodec[{extra}]'") from None
    try:
        return fsspec.core.url_to_fs(url, **(storage_options or {}))[0]
    except ImportError as e:
        raise E.UsageError(f"{scheme}:// URLs need a package that is not installed ({e.name or e}): "
                           f"pip install 'modelcodec[{extra}]'") from None
    except ValueError as e:  # fsspec: "Protocol not known"
        raise E.UsageError(f"{scheme}:// is not a filesystem fsspec knows ({e})") from None
    except TypeError as e:
        raise E.UsageError(f"storage_options= for {scheme}:// not taken: {e}") from None
    except OSError as e:  # (a filesystem that connects when made -- FTP, SFTP: its host unknown or down)
        raise _fail(url, None, Rule.REQUEST, f"{scheme}:// cannot connect: {type(e).__name__}: {e}") from None


def _lower_scheme(url: str) -> str:
    """``S3://b/k`` as ``s3://b/k`` (a scheme is case-insensitive; fsspec's names are lower case)."""
    scheme = scheme_of(url)
    return scheme + url[len(scheme):] if scheme else url


class FsspecStore(Store):
    """The objects of the fsspec filesystem that reaches a URL, keyed by their full URLs."""
    supports_writes = supports_listing = True
    workers = WORKERS

    def __init__(self, url: str, storage_options: dict | None = None):
        if storage_options is not None and not isinstance(storage_options, dict):
            raise E.UsageError(f"storage_options= takes a dict, not {type(storage_options).__name__}")
        self.scheme = scheme_of(url)
        self.fs = _filesystem(_lower_scheme(url), self.scheme, storage_options)
        self.stats = Counter()
        self._lock = threading.Lock()
        self._executor: ThreadPoolExecutor | None = None
        self._local = threading.local()
        #: url -> ("version", its VersionId) or ("etag", its ETag): the version of it seen
        #: first, which every later read of it asks for (:meth:`_pin`; s3fs and obstore)
        self._pins: dict[str, tuple[str, str]] = {}

    # ------------------------------------------------------------------ plumbing
    def check(self, url: str, what: str = "URL") -> str:
        if scheme_of(url) != self.scheme:
            raise _fail(url, None, Rule.URL, f"{what} is not a {self.scheme}:// URL (a set's files are read "
                        "from where its index is)")
        return url

    def _path(self, url: str) -> str:
        self.check(url)
        return self.fs._strip_protocol(_lower_scheme(url))

    def _error(self, url: str, at: int | None, e: BaseException) -> E.FormatError:
        if isinstance(e, E.ModelcodecError):
            return e
        if any(((getattr(x, "response", None) or {}).get("Error") or {}).get("Code") == "PreconditionFailed"
               for x in (e, e.__cause__)):
            return self._changed(url, at)
        if isinstance(e, FileNotFoundError):
            return _fail(url, at, Rule.REQUEST, f"{self.scheme}:// not found", NotThereError)
        if isinstance(e, PermissionError):
            what = "access refused"
        else:
            what = f"{type(e).__name__}: {e}"
        return _fail(url, at, Rule.REQUEST, f"{self.scheme}:// {what}")

    def _changed(self, url: str, at: int | None) -> E.FormatError:
        """A read asking for the version of ``url`` seen first was refused: it changed since."""
        return _fail(url, at, Rule.RANGE, "the object changed on the store since it was opened (If-Match on "
                     f"its ETag {self._pins.get(url, ('', '?'))[1]} failed)")

    def _count(self, what: str, n: int = 1) -> None:
        with self._lock:
            self.stats[what] += n

    # ------------------------------------------------------------------ reading
    def size(self, url: str) -> int:
        self._count("requests")
        try:
            info = self.fs.info(self._path(url))
        except Exception as e:  # noqa: BLE001 - the filesystem's own errors, said as one RemoteError
            raise self._error(url, None, e) from None
        if info.get("type") == "directory":
            raise _fail(url, None, Rule.REQUEST, f"{self.scheme}:// names a directory, not an object", NotThereError)
        self._pin_s3(url, info)
        return self._checked_size(url, info.get("size"))

    def _pin(self, url: str, version: str | None, etag: str | None) -> None:
        """Remember the version of ``url`` seen first -- its VersionId on a versioned bucket,
        else its ETag (If-Match) -- which every later read of it asks for."""
        pin = ("version", version) if version else (("etag", etag) if etag else None)
        if pin:
            with self._lock:
                self._pins.setdefault(url, pin)

    def _unpin(self, *urls: str) -> None:
        """(This store wrote, moved or removed the objects at ``urls``: later reads take what is there.)"""
        with self._lock:
            for url in urls:
                self._pins.pop(url, None)

    def _pin_s3(self, url: str, meta: dict) -> None:
        if self._s3:
            self._pin(url, meta.get("VersionId"), meta.get("ETag"))

    def _s3_pinned(self, url: str) -> dict:
        """The arguments of a GET of ``url`` on s3fs that ask for its pinned version."""
        pin = self._pins.get(url)
        return {} if pin is None else {{"version": "VersionId", "etag": "IfMatch"}[pin[0]]: pin[1]}

    def _checked_size(self, url: str, n) -> int:
        if not isinstance(n, int) or n < 0 or n > MAX_FILE_BYTES:
            raise _fail(url, None, Rule.LIMIT, f"the store says the object is {n!r} bytes")
        return n

    def version(self, url: str) -> str | None:
        try:
            info = self.fs.info(self._path(url))
        except Exception:  # noqa: BLE001 - no version to tell
            return None
        tag = info.get("ETag") or info.get("etag") or info.get("VersionId")
        return str(tag) if tag else None

    def kind(self, url: str) -> str | None:
        """(A folder first: a move to a name that is also a folder would land inside it; then
        :meth:`exists`, which says no only when the store does.)"""
        path = self._path(url)
        try:
            self.fs.invalidate_cache(path)  # (a listing cached earlier may be stale)
            folder = self.fs.isdir(path)
            self.fs.invalidate_cache(path)
        except Exception as e:  # noqa: BLE001 - the filesystem's own errors, said as one RemoteError
            raise self._error(url, None, e) from None
        return "folder" if folder else "file" if self.exists(url) else None

    def get(self, url: str, limit: int) -> bytes:
        n = self.size(url)
        if n > limit:
            raise _fail(url, None, Rule.LIMIT, f"the store says it is {n} bytes, over {limit}")
        return bytes(self.fetch([(url, 0, n, n)])[0]) if n else b""

    def fetch(self, wanted, *, progress=None) -> list:
        """Each ``(url, start, length, size)`` read with ranged GETs of at most MAX_RANGE_BYTES,
        all at once (``cat_ranges``); an answer of another length than asked is an error, and
        an object of another size than ``size`` (when given) a
        :class:`codec.io.remote.SizeMismatchError`, as over HTTP (S3: the size each answer
        gives; other filesystems: looked up when an answer comes short)."""
        # (a request read in one piece is used as the filesystem returned it: no copy)
        bufs: list = [np.empty(n, np.uint8) if n > MAX_RANGE_BYTES else None for _, _, n, _ in wanted]
        pieces = []  # (buf index, offset in it, url, start, length, the object's size or None)
        for i, (url, a, n, size) in enumerate(wanted):
            if a < 0 or n < 0 or (size is not None and a + n > size):
                raise _fail(url, a, Rule.RANGE, f"range [{a}, +{n}) is outside the object ({size} bytes)")
            for k in range(0, n, MAX_RANGE_BYTES):
                pieces.append((i, k, url, a + k, min(MAX_RANGE_BYTES, n - k), size))
        if pieces:
            self._count("requests", len(pieces))
            self._count("range_requests", len(pieces))
            got = self._read_pieces([(url, a, n, size) for _, _, url, a, n, size in pieces])
            for (i, k, url, a, n, size), data in zip(pieces, got):
                if isinstance(data, BaseException):
                    raise self._failed(url, a, size, data) from None
                if len(data) != n:
                    self._check_size(url, a, size)
                    raise _fail(url, a, Rule.RANGE, f"asked for {n} bytes at {a}, the store sent {len(data)}")
                self._count("bytes", n)
                if bufs[i] is None:
                    bufs[i] = data
                else:
                    bufs[i][k:k + n] = np.frombuffer(data, np.uint8)
                if progress is not None:
                    progress(n)
        return [memoryview(b if b is not None else b"") for b in bufs]

    def _read_pieces(self, pieces: list[tuple[str, int, int, int | None]]) -> list:
        """The bytes of each ``(url, start, length, the object's size or None)`` (one request
        each, all at once), or the exception that request ended with (a SizeMismatchError where
        the answer says the object is of another size)."""
        if self._s3:
            return self._read_s3(pieces)
        paths = [self._path(u) for u, _, _, _ in pieces]
        try:
            return self.fs.cat_ranges(paths, [a for _, a, _, _ in pieces], [a + n for _, a, n, _ in pieces],
                                      on_error="return")
        except Exception as e:  # noqa: BLE001
            raise self._error(pieces[0][0], pieces[0][1], e) from None

    def _failed(self, url: str, at: int, size: int | None, e: BaseException) -> E.FormatError:
        """A ranged read of ``url`` ended with ``e``: its RemoteError, or, when the request was
        refused (a range past the end of an object shorter than ``size``: S3's 416), a
        SizeMismatchError if the object is not of that size."""
        err = self._error(url, at, e)
        if err.rule == Rule.REQUEST and not isinstance(err, NotThereError):
            self._check_size(url, at, size)
        return err

    def _check_size(self, url: str, at: int, size: int | None) -> None:
        """(An answer came short, or none came: the object's size asked for, a SizeMismatchError
        when it is not ``size``.)"""
        if size is None:
            return
        try:
            actual = self.size(url)
        except E.ModelcodecError:
            return  # (the short answer is the error said)
        if actual != size:
            raise size_mismatch(url, at, size, actual)

    @staticmethod
    def _total(url: str, at: int, size: int | None, total) -> None:
        """A SizeMismatchError when a ranged answer says the object is ``total`` bytes (an int,
        or S3's ``Content-Range`` text, ``bytes a-b/total``) and ``size`` was said."""
        if size is None or total is None:
            return
        if isinstance(total, str):
            m = CONTENT_RANGE_TOTAL.match(total.strip())
            total = int(m[1]) if m else None
        if total != size:
            raise size_mismatch(url, at, size, total)

    @property
    def _s3(self) -> bool:
        """Whether the filesystem is s3fs (its own requests: pinned versions, streamed GETs,
        conditional writes)."""
        return hasattr(self.fs, "_call_s3")

    @property
    def streams(self) -> bool:
        return self._s3

    def read_into(self, url: str, start: int, length: int, size: int | None, write) -> None:
        """(Where the store :attr:`streams`: one GET of the range, streamed; each piece checked
        to lie within the range asked for, the whole of it to have come.)"""
        if not self.streams:
            return super().read_into(url, start, length, size, write)
        if start < 0 or length < 0 or (size is not None and start + length > size):
            raise _fail(url, start, Rule.RANGE, f"range [{start}, +{length}) is outside the object ({size} bytes)")
        if not length:
            return
        at = start

        def take(piece) -> bool:
            nonlocal at
            n = min(len(piece), start + length - at)
            write(at, piece[:n])
            at += n
            self._count("bytes", n)
            return at < start + length
        self._count("requests")
        self._count("range_requests")
        try:
            self._stream(url, start, length, size, take)
        except Exception as e:  # noqa: BLE001
            raise self._failed(url, at, size, e) from None
        if at != start + length:
            raise _fail(url, start, Rule.RANGE, f"asked for {length} bytes at {start}, the store sent {at - start}")

    def _stream(self, url: str, start: int, length: int, size: int | None, take) -> None:
        """Give ``take`` the pieces of one GET of ``[start, start + length)`` as they arrive,
        until it returns False (s3fs: pinned as :meth:`_pin_s3` says; an object of another size
        than ``size``: a SizeMismatchError, before any piece)."""
        import fsspec.asyn
        fs = self.fs

        async def stream():
            bucket, key, _ = fs.split_path(self._path(url))
            pin = self._s3_pinned(url)
            resp = await fs._call_s3("get_object", Bucket=bucket, Key=key, Range=f"bytes={start}-{start + length - 1}",
                                     **pin)
            body = resp["Body"]
            try:
                if not pin:
                    self._pin_s3(url, resp)
                self._total(url, start, size, resp.get("ContentRange"))
                while piece := await body.read(STREAM_CHUNK):
                    if not take(memoryview(piece)):
                        return
            finally:
                body.close()
        fsspec.asyn.sync(fs.loop, stream)

    def _read_s3(self, pieces: list[tuple[str, int, int, int | None]]) -> list:
        """(s3fs: each range a GET of its own, pinned as :meth:`_pin_s3` says, all at once.)"""
        import asyncio

        import fsspec.asyn
        fs = self.fs

        async def one(url: str, a: int, n: int, size: int | None):
            bucket, key, _ = fs.split_path(self._path(url))
            pin = self._s3_pinned(url)
            resp = await fs._call_s3("get_object", Bucket=bucket, Key=key, Range=f"bytes={a}-{a + n - 1}", **pin)
            try:
                if not pin:
                    self._pin_s3(url, resp)
                self._total(url, a, size, resp.get("ContentRange"))
                return await resp["Body"].read()
            finally:
                resp["Body"].close()

        async def every():
            gate = asyncio.Semaphore(WORKERS)

            async def gated(piece):
                async with gate:
                    return await one(*piece)
            return await asyncio.gather(*(gated(p) for p in pieces), return_exceptions=True)
        return fsspec.asyn.sync(fs.loop, every)

    def run(self, jobs) -> None:
        if len(jobs) <= 1 or getattr(self._local, "worker", False):
            for job in jobs:
                job()
            return
        with self._lock:
            if self._executor is None:
                self._executor = ThreadPoolExecutor(self.workers, thread_name_prefix="modelcodec-store",
                                                    initializer=lambda: setattr(self._local, "worker", True))
        futures = [self._executor.submit(job) for job in jobs]
        first = None
        for f in futures:
            try:
                f.result()
            except BaseException as e:  # noqa: BLE001 - re-raised after the others end
                first = first or e
        if first is not None:
            raise first

    # ------------------------------------------------------------------ writing
    def put(self, url: str, chunks, *, replace: bool = True) -> bool:
        """Object stores whose uploads can be discarded (S3, GCS): one PUT when the object fits
        in one part, else a multipart upload completed only after its last part, aborted on
        any failure (nothing appears, nothing stays pending).  Other filesystems: written under
        a temporary name beside it, moved into place once complete, removed on failure.
        ``replace=False`` on S3: the PUT, or the completion of the multipart upload, sent with
        ``If-None-Match: *`` (refused -- the upload dropped -- when the name is taken then);
        on other filesystems the name is looked at first (what appears there between the look
        and the write is replaced)."""
        import uuid
        path = self._path(url)
        direct = self.scheme in _DISCARDABLE
        s3 = self._s3
        if not replace and not s3 and self.kind(url) is not None:
            return False
        target = path if direct else f"{path}{TEMP_MARK}{uuid.uuid4().hex[:12]}"
        try:
            f = self.fs.open(target, "xb" if s3 and not replace else "wb", block_size=PART)
        except Exception as e:  # noqa: BLE001
            raise self._error(url, None, e) from None
        try:
            for b in chunks:
                f.write(b)
                self._count("bytes_written", len(b))
        except BaseException as e:
            self._abandon(f, target, direct)
            if isinstance(e, Exception) and not isinstance(e, E.ModelcodecError):
                raise self._error(url, None, e) from None
            raise
        try:
            if s3 and not replace and f.tell() == 0:  # (s3fs would put an empty object unconditionally)
                self._abandon(f, target, direct)
                self._s3_new(path, [("put_object", {"Body": b""})])
            else:
                f.close()  # the single PUT, or completing the multipart upload
            if not direct:
                self.fs.mv(target, path)
        except Exception as e:  # noqa: BLE001
            self._abandon(f, target, direct)
            if not replace and _taken(e):
                return False
            raise self._error(url, None, e) from None
        finally:
            if not replace:
                self.fs.invalidate_cache(path)
        self._unpin(url)
        self._count("puts")
        return True

    def _abandon(self, f, target: str, direct: bool) -> None:
        """Drop a write that failed: abort its multipart upload, or remove its temporary."""
        try:
            if direct:
                f.discard()  # aborts the multipart upload (nothing was committed)
                f.closed = True  # (else closing it later would try to commit what is left)
            else:
                f.close()
                self.fs.rm_file(target)
        except Exception:  # noqa: BLE001 - the first failure is the one reported
            pass

    def move(self, src: str, dst: str, *, replace: bool = True) -> bool:
        """(A copy on the server -- atomic for the new object -- then the old one removed.
        ``replace=False`` on S3: a multipart copy, its completion sent with ``If-None-Match: *``
        (:meth:`_s3_copy_new`); on other filesystems the name is looked at first.)"""
        if not replace and self._s3:
            if not self._s3_copy_new(src, dst):
                return False
            self.delete(src)
            self._unpin(dst)
            self._count("moves")
            return True
        if not replace and self.kind(dst) is not None:
            return False
        try:
            self.fs.mv(self._path(src), self._path(dst))
        except Exception as e:  # noqa: BLE001
            raise self._error(dst, None, e) from None
        self._unpin(src, dst)
        self._count("moves")
        return True

    def _s3_copy_new(self, src: str, dst: str) -> bool:
        """Copy ``src`` to ``dst`` on the server (S3) only if nothing has the name ``dst`` when
        the copy completes: False, and nothing left, if something does.  A multipart upload of
        copied parts (at most COPY_PART bytes each) completed with ``If-None-Match: *`` -- a
        CopyObject request takes that condition on AWS too, but not on every S3 server (moto
        ignores it); an empty object, one PutObject with it."""
        size = self.size(src)
        if not size:
            steps = [("put_object", {"Body": b""})]
        else:
            bucket, key, _ = self.fs.split_path(self._path(src))
            step = -(-size // -(-size // COPY_PART))
            steps = [("upload_part_copy", {"PartNumber": i + 1, "CopySource": {"Bucket": bucket, "Key": key},
                                           "CopySourceRange": f"bytes={a}-{min(a + step, size) - 1}"})
                     for i, a in enumerate(range(0, size, step))]
        try:
            self._s3_new(self._path(dst), steps)
        except Exception as e:  # noqa: BLE001
            if _taken(e):
                return False
            raise self._error(dst, None, e) from None
        finally:
            self.fs.invalidate_cache(self._path(dst))
        return True

    def _s3_new(self, path: str, steps: list) -> None:
        """Write the object ``path`` on S3 only if nothing has its name then: ``steps`` is one
        ``("put_object", its arguments)``, sent with ``If-None-Match: *``, or the requests of a
        multipart upload's parts (``(name, arguments)``, each given the upload), completed with
        it (aborted on any failure)."""
        import fsspec.asyn
        fs = self.fs
        bucket, key, _ = fs.split_path(path)

        async def write():
            if steps[0][0] == "put_object":
                return await fs._call_s3("put_object", Bucket=bucket, Key=key, IfNoneMatch="*", **steps[0][1])
            upload = (await fs._call_s3("create_multipart_upload", Bucket=bucket, Key=key))["UploadId"]
            try:
                parts = []
                for name, kw in steps:
                    out = await fs._call_s3(name, Bucket=bucket, Key=key, UploadId=upload, **kw)
                    parts.append({"PartNumber": kw["PartNumber"], "ETag": (out.get("CopyPartResult") or out)["ETag"]})
                await fs._call_s3("complete_multipart_upload", Bucket=bucket, Key=key, UploadId=upload,
                                  MultipartUpload={"Parts": parts}, IfNoneMatch="*")
            except BaseException:
                try:
                    await fs._call_s3("abort_multipart_upload", Bucket=bucket, Key=key, UploadId=upload)
                except Exception:  # noqa: BLE001 - the first failure is the one reported
                    pass
                raise
        fsspec.asyn.sync(fs.loop, write)

    def list(self, prefix: str) -> list[str]:
        try:
            paths = self.fs.find(self._path(prefix))
        except Exception as e:  # noqa: BLE001
            raise self._error(prefix, None, e) from None
        return sorted(self.fs.unstrip_protocol(p) for p in paths)

    def glob(self, pattern: str) -> list[str]:
        try:
            found = self.fs.glob(self._path(glob_pattern(pattern)), detail=True)
        except Exception as e:  # noqa: BLE001
            raise self._error(pattern, None, e) from None
        return sorted(self.fs.unstrip_protocol(p) for p, info in found.items() if info.get("type") != "directory")

    def delete(self, url: str) -> None:
        self._unpin(url)
        try:
            self.fs.rm_file(self._path(url))
        except FileNotFoundError:
            pass
        except Exception as e:  # noqa: BLE001
            raise self._error(url, None, e) from None

    def close(self) -> None:
        if self._executor is not None:
            self._executor.shutdown(wait=True, cancel_futures=True)
            self._executor = None
