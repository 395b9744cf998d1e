"""What a mirror (:mod:`codec.formats.mirror`) checks the bytes it reads and finds against: the
size and sha256 a model's index gives each file, or, where it gives none, the sha256 of the
source file's own bytes -- hashed as they are read, in ranges or in one stream, and counted."""
from __future__ import annotations

import threading

from .. import errors as E
from ..io.integrity import sha256
from ..io.store import Store

#: the bytes of one ranged read of a file
PIECE = 8 * 1024 * 1024


class Bytes:
    """A count of bytes read, added to from several threads (``n``)."""

    def __init__(self):
        self.n = 0
        self._lock = threading.Lock()

    def add(self, n: int) -> None:
        with self._lock:
            self.n += n


class Hashed:
    """The open binary file a download writes to (:meth:`codec.io.store.HttpStore.download`),
    written through; the sha256 and length of what was written kept (begun again when the
    download starts again from its first byte), and more than ``limit`` bytes refused
    (``too_long(n)`` raised: the download stops there)."""

    def __init__(self, f, limit: int | None = None, too_long=None):
        self.f, self.limit, self.too_long = f, limit, too_long
        self.h, self.n = sha256(), 0

    def seek(self, at: int, whence: int = 0) -> int:
        if (at, whence) == (0, 0):
            self.h, self.n = sha256(), 0
        return self.f.seek(at, whence)

    def truncate(self, size: int | None = None) -> int:
        return self.f.truncate(size)

    def write(self, b) -> int:
        if self.limit is not None and self.n + len(b) > self.limit:
            raise self.too_long(self.n + len(b))
        self.h.update(b)
        self.n += len(b)
        return self.f.write(b)


def checks_out(store: Store, url: str, f: dict) -> bool:
    """Whether the object at ``url`` is the file ``f`` (its size and sha256; without a sha256
    nothing there is taken for it)."""
    if f["sha256"] is None or not store.exists(url):
        return False
    try:
        size = store.size(url)
        return size == f["size"] and sha256_of(store, url, size) == f["sha256"].lower()
    except E.ModelcodecError:
        return False


def sha256_of(store: Store, url: str, size: int, pulled: Bytes | None = None) -> str:
    """The sha256 of the ``size`` bytes of the object at ``url``, read in ranges."""
    h = sha256()
    for a in range(0, size, PIECE):
        b = store.fetch([(url, a, min(PIECE, size - a), size)])[0]
        h.update(b)
        if pulled is not None:
            pulled.add(len(b))
    return h.hexdigest()


def source_sha256(src_store: Store, f: dict, pulled: Bytes) -> str:
    """The sha256 of the source's file ``f`` (one its index gives no hash of), read whole: in
    ranges, or from a server without Range requests in one stream (kept nowhere)."""
    from ..io.remote import NoRangeError
    if f["size"] is not None:
        try:
            return sha256_of(src_store, f["source"], f["size"], pulled)
        except NoRangeError:
            pass
    w = Hashed(Sink(), f["size"], lambda n: wrong(f, "file", None, n, "nothing was copied"))
    src_store.download(f["source"], w)
    pulled.add(w.n)
    f["size"] = w.n if f["size"] is None else f["size"]
    return w.h.hexdigest()


class Sink:
    """(Where a download only hashed goes.)"""

    def seek(self, at: int, whence: int = 0) -> int:
        return 0

    def truncate(self, size: int | None = None) -> int:
        return 0

    def write(self, b) -> int:
        return len(b)


def wrong(f: dict, fmt: str, got: str | None, n: int, outcome: str) -> E.FormatError:
    """The file ``f`` as read from its source is not what its index says."""
    said = f"{n} bytes, the index says {f['size']}" if got is None else \
        f"hashes to {got[:16]}..., the index says {f['sha256'][:16]}..."
    return E.IntegrityError(fmt, None, f"{f['where']}.sha256", f["rule"] or "MIRROR",
                            f"{f['name']} at the source {said}: {outcome}",
                            source=f["source"], algorithm="sha256", expected=f["sha256"], actual=got)


def verdict(f: dict, h, n: int, fmt: str, outcome: str) -> None:
    if f["size"] is not None and n != f["size"]:
        raise wrong(f, fmt, None, n, outcome)
    if f["sha256"] is not None and h.hexdigest() != f["sha256"].lower():
        raise wrong(f, fmt, h.hexdigest(), n, outcome)
    f["got"] = h.hexdigest()  # (what a file put at its name meanwhile is compared with: the mirror's _there)
