"""``s3://`` reads through obstore (Rust's ``object_store``), where it is installed (``pip
install 'modelcodec[s3]'`` brings it): a :class:`codec.io.store_fsspec.FsspecStore` whose reads
-- sizes, ranges -- go through obstore, and whose writes, listing, moves and deletes stay with
s3fs.  Measured beside s3fs on the same server (``benchmarks/bench_store.py``), obstore reads
ranges several times faster for the same bytes (s3fs spends the time in Python on the client);
fsspec keeps every scheme obstore does not reach, and every S3 set-up it does not take the same
way (:func:`obstore_config`).

Every read of an object is pinned to the version seen first (its ``size``, or its first range):
later ranges ask for that version (``VersionId``, on a versioned bucket) or send ``If-Match``
with its ETag, so an object replaced between opening and a later read is a
:class:`codec.errors.RemoteError` ("changed"), never bytes of the new object -- also in formats
that carry no hashes.  (An object the store itself writes, moves or deletes is read anew after.)
"""
from __future__ import annotations

import asyncio
import os
import re
import threading

from .. import errors as E
from .store import scheme_of
from .store_fsspec import STREAM_CHUNK, WORKERS, FsspecStore

#: storage_options (s3fs's names) obstore takes too, as obstore names them
_OPTIONS = {"key": "access_key_id", "secret": "secret_access_key", "token": "session_token",
            "endpoint_url": "endpoint"}
_CLIENT_KWARGS = {"endpoint_url": "endpoint", "region_name": "region"}


def obstore_config(url: str, storage_options: dict | None) -> dict | None:
    """obstore's S3 configuration for ``url`` and s3fs-style ``storage_options``, or None where
    s3fs reads it: obstore not installed, not an s3:// URL, an option obstore does not take, or
    credentials or region that only botocore would find (a profile, ~/.aws files, a bucket's
    region looked up).  Otherwise the standard environment (``AWS_ACCESS_KEY_ID``,
    ``AWS_ENDPOINT_URL``, ``AWS_DEFAULT_REGION`` ...) is read by obstore as by s3fs."""
    if scheme_of(url) not in ("s3", "s3a") or (storage_options is not None and not isinstance(storage_options, dict)):
        return None
    try:
        import obstore.store  # noqa: F401
    except ImportError:
        return None
    so = {k: v for k, v in (storage_options or {}).items() if k != "skip_instance_cache"}
    client = so.pop("client_kwargs", None) or {}
    if not isinstance(client, dict) or set(client) - set(_CLIENT_KWARGS):
        return None
    cfg = {_CLIENT_KWARGS[k]: v for k, v in client.items()}
    if so.pop("anon", False):
        cfg["skip_signature"] = True
    cfg.update({_OPTIONS[k]: so.pop(k) for k in list(so) if k in _OPTIONS})
    if so or not all(isinstance(v, (str, bool)) for v in cfg.values()):
        return None
    env = os.environ
    if not (cfg.get("skip_signature") or "access_key_id" in cfg or env.get("AWS_ACCESS_KEY_ID")):
        return None
    endpoint = cfg.get("endpoint") or env.get("AWS_ENDPOINT_URL") or env.get("AWS_ENDPOINT")
    if not (endpoint or cfg.get("region") or env.get("AWS_REGION") or env.get("AWS_DEFAULT_REGION")):
        return None
    if endpoint and not re.match(r"https?://[^/?#\s]+(/\S*)?$", endpoint, re.I):
        return None  # (s3fs says what is wrong with it)
    if endpoint and endpoint.lower().startswith("http://"):
        cfg["allow_http"] = True  # (the endpoint given is plain HTTP: s3fs takes it so too)
    return cfg


class ObstoreStore(FsspecStore):
    """s3:// objects: read through obstore, written and listed through s3fs."""
    streams = True

    def __init__(self, url: str, storage_options: dict | None, config: dict):
        super().__init__(url, storage_options)
        self._config = config
        self._buckets: dict = {}
        self._loop: asyncio.AbstractEventLoop | None = None
        self._loop_pid = os.getpid()

    def _object(self, url: str):
        """(the obstore store of the object's bucket, its key)."""
        from obstore.store import S3Store
        bucket, _, key = self._path(url).partition("/")
        with self._lock:
            st = self._buckets.get(bucket)
            if st is None:
                cfg = dict(self._config)
                http = {"allow_http": True} if cfg.pop("allow_http", False) else None
                try:
                    st = S3Store(bucket, config=cfg, client_options=http)
                except Exception as e:  # noqa: BLE001 - a value obstore refuses (s3fs would too)
                    raise E.UsageError(f"storage_options= for s3:// not taken: {str(e).strip().splitlines()[0]}") \
                        from None
                self._buckets[bucket] = st
        return st, key

    def _error(self, url: str, at: int | None, e: BaseException):
        from obstore import exceptions as X
        if isinstance(e, X.PreconditionError):
            return self._changed(url, at)
        if isinstance(e, X.NotFoundError):
            e = FileNotFoundError()
        elif isinstance(e, (X.PermissionDeniedError, X.UnauthenticatedError)):
            e = PermissionError()
        elif isinstance(e, X.BaseError):  # (its message runs over many lines: the first says it)
            e = OSError(str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__)
        return super()._error(url, at, e)

    def _pin_meta(self, url: str, meta) -> None:
        self._pin(url, meta.get("version"), meta.get("e_tag"))

    def _pinned(self, url: str, options: dict) -> bool:
        """``options`` of a GET of ``url`` asking for its pinned version; whether it has one."""
        pin = self._pins.get(url)
        if pin is not None:
            options[{"version": "version", "etag": "if_match"}[pin[0]]] = pin[1]
        return pin is not None

    def _run(self, coro):
        """Run ``coro`` on this store's own event loop (a thread of its own: callers may be
        in any thread, one with a running loop too)."""
        with self._lock:
            if self._loop is None or self._loop_pid != os.getpid():  # (none yet, or a forked child's)
                loop = self._loop = asyncio.new_event_loop()
                self._loop_pid = os.getpid()

                def serve():
                    loop.run_forever()
                    loop.close()
                threading.Thread(target=serve, name="modelcodec-obstore", daemon=True).start()
        return asyncio.run_coroutine_threadsafe(coro, self._loop).result()

    def size(self, url: str) -> int:
        import obstore
        st, key = self._object(url)
        self._count("requests")
        async def head():  # (obstore's coroutines are made on the loop that runs them)
            return await obstore.head_async(st, key)
        try:
            meta = self._run(head())
        except Exception as e:  # noqa: BLE001 - obstore's errors, said as one RemoteError
            raise self._error(url, None, e) from None
        self._pin_meta(url, meta)
        return self._checked_size(url, meta.get("size"))

    def version(self, url: str) -> str | None:
        if url not in self._pins:
            try:
                self.size(url)
            except Exception:  # noqa: BLE001 - no version to tell
                return None
        pin = self._pins.get(url)
        return pin[1] if pin else None

    def _read_pieces(self, pieces: list[tuple[str, int, int, int | None]]) -> list:
        import obstore
        gate = None

        async def one(url: str, a: int, n: int, size: int | None):
            st, key = self._object(url)
            options = {"range": (a, a + n)}
            pinned = self._pinned(url, options)
            async with gate:
                got = await obstore.get_async(st, key, options=options)
                if not pinned:
                    self._pin_meta(url, got.meta)
                self._total(url, a, size, got.meta.get("size"))
                return await got.bytes_async()

        async def every():
            nonlocal gate
            gate = asyncio.Semaphore(WORKERS)
            return await asyncio.gather(*(one(*p) for p in pieces), return_exceptions=True)
        return self._run(every())

    def _stream(self, url: str, start: int, length: int, size: int | None, take) -> None:
        """(One GET of the range, pinned, its object's size checked, streamed in pieces of
        STREAM_CHUNK bytes.)"""
        import obstore
        st, key = self._object(url)

        async def stream():
            options = {"range": (start, start + length)}
            pinned = self._pinned(url, options)
            got = await obstore.get_async(st, key, options=options)
            if not pinned:
                self._pin_meta(url, got.meta)
            self._total(url, start, size, got.meta.get("size"))
            async for piece in got.stream(min_chunk_size=STREAM_CHUNK):
                if not take(memoryview(piece)):
                    return
        self._run(stream())

    def close(self) -> None:
        super().close()
        loop, self._loop = self._loop, None
        if loop is not None:
            loop.call_soon_threadsafe(loop.stop)
