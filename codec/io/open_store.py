"""Which :class:`codec.io.store.Store` reaches a URL (the one place a scheme picks a store)."""
from __future__ import annotations

import os

from .. import errors as E
from .store import HttpStore, LocalStore, Store, is_pattern, scheme_of
from .store_fsspec import FsspecStore
from .store_obstore import ObstoreStore, obstore_config


def store_for(url: str, *, storage_options: dict | None = None, http=None) -> Store:
    """The store that reaches ``url``: HTTP for http(s) (``http``: an HttpOptions or Http),
    fsspec for any other URL (``storage_options`` go to its filesystem; default: the
    filesystem's own environment, e.g. AWS_ENDPOINT_URL and AWS_ACCESS_KEY_ID for s3://; s3:// is
    read through obstore where it is installed and takes the same set-up, see
    :func:`codec.io.store_obstore.obstore_config`), local
    files for a path or a file:// URL.  A URL whose filesystem is not installed is a one-line
    UsageError naming the extra to install."""
    scheme = scheme_of(url)
    if scheme in ("http", "https"):
        if storage_options:
            raise E.UsageError("storage_options= is for fsspec URLs (s3://, gs://, ...); an http(s) URL takes http=")
        return HttpStore(http)
    if http is not None:
        raise E.UsageError(f"http= is for http(s) URLs, not {scheme or 'local'}:// (give storage_options=)")
    if scheme is None or scheme == "file":
        return LocalStore()
    config = obstore_config(url, storage_options)
    if config is not None:
        return ObstoreStore(url, storage_options, config)
    return FsspecStore(url, storage_options)


def expand(sources, *, storage_options: dict | None = None) -> list[tuple[str, str | None]]:
    """Each of ``sources`` (paths and URLs) as ``(path or URL, None)``, and each glob pattern
    among them (:func:`codec.io.store.is_pattern`: local, or on a store that lists) as the
    files it matches, in order; a pattern that matches nothing is ``(pattern, why)``."""
    out: list[tuple[str, str | None]] = []
    for s in sources:
        if not is_pattern(s) or (scheme_of(s) is None and os.path.exists(s)):
            out.append((s, None))
            continue
        with store_for(s, storage_options=storage_options if scheme_of(s) not in (None, "file") else None) as store:
            found = store.glob(s)
        out.extend((f, None) for f in found) if found else out.append((s, "no file matches the pattern"))
    return out
