"""Bytes in and bytes out: read-only mapped sources and atomic, fsynced file writes.

The code lives in three focused modules; this one keeps the names importable from
``codec.io``, where readers, writers and tests have always found them:

* :mod:`codec.sources`   -- safe opening (regular files only, confined references) and the
  read-only byte sources readers parse (:class:`Source`, :class:`PartialSource`);
* :mod:`codec.atomic`    -- writing files safely (atomic replace, temps, directory locks);
* :mod:`codec.writer_io` -- a writer's inputs checked and its bytes streamed out in pieces.
"""
from __future__ import annotations

from .atomic import (  # noqa: F401
    TEMP_MARK, _pid_alive, atomic_write, caller_umask, exchange, fsync_dir, give_default_mode, locked_dir,
    os_error, refuse_special_target, refuse_url, remove_stale_temps, temp_prefix,
)
from .sources import (  # noqa: F401
    _KINDS, _NORESERVE, _SPARSE_FROM, PartialSource, Source, _refuse_kind, confined, frozen_view,
    open_regular,
)
from .writer_io import (  # noqa: F401
    _DROP_MIN, COMMON_METADATA, PIECE, LazyTensor, Writeback, _page_dropper, array_pieces, as_array, as_le_bytes,
    common_metadata, name_bytes, write_all,
)
