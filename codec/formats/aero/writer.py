"""AERO writer: streaming, deterministic, atomic.

The TIDX (with every tensor's hash_b3) precedes the weights and its zstd length decides where
they go (measured: over random hash values that length varies by ~200 bytes for 1,000 tensors,
a dozen 16-byte-aligned places for the weights -- no prediction to bet a second write on), so
each tensor's hash_b3 is taken in a first pass (BLAKE3's own threads on both cores); the bytes
then go out once, the shard's BLAKE3 and page digests taken from the same buffers on a worker
thread while they are written.  Without zstd (``compress=False``) the TIDX's length is known
before its hashes: one pass per byte, each tensor hashed on a second worker thread from the
buffers being written (the shard's hashers on the first) and the TIDX written again in place at
the end.  When the caller wants a digest of the whole file
(:func:`write_aero_file`, an AEROSET part's sha256), the shard hashes are taken in the first pass
too, so that the control region is final before the first byte and the file is written (and
hashed) front to back.  The TIDX's zstd runs on a worker thread while a small shard of small in-memory
tensors (10^5 tiny tensors) is laid out in memory and hashed, then written in one piece."""
from __future__ import annotations

import json
import os
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Iterable, Mapping

import numpy as np
from ...schemas import aero as S
from ...schemas.aero import FourCC

from ... import errors as E
from ...io.integrity import BackgroundFeed, PageHasher, blake3_bytes, blake3_hasher, new_hasher
from ...io.writer_io import Writeback, common_metadata, write_all, HashingWriter, declared_arg, new_file
from ...io.atomic import atomic_write
from ...engine.payload import gc_paused
from ...ui.progress import Progress
from .items import (_GATHER, _SMALL_PIECE, TensorSpec, _by_shard, _gather, _hash_shards, _hash_tensors,  # noqa: F401
                    _Item, _pack_arg, plan_shards, prepare)
from .layout import Layout, _pack, _zstd, build_container


@dataclass
class Written:
    """What :func:`write_aero_file` wrote: the file's ``path`` and ``size``, its TIDX ``entries``
    (one dict per tensor, as a reader decodes them) and, when asked for, the ``digest`` (hex) of
    the whole file."""
    path: str
    size: int
    rows: list = field(repr=False)
    digest: str | None = None

    @property
    def entries(self) -> list:
        """The TIDX entries, as a reader decodes them (a shape is a list)."""
        for e in self.rows:
            if type(e["shape"]) is not list:
                e["shape"] = list(e["shape"])
        return self.rows


def _first_unjsonable(obj: dict) -> str:
    """`` 'key'``: the first entry of ``obj`` JSON cannot hold (NaN, infinity, a type it lacks), or ""."""
    for k, v in obj.items():
        try:
            json.dumps({k: v}, ensure_ascii=False, allow_nan=False).encode("utf-8")
        except (TypeError, ValueError, UnicodeEncodeError):
            return f" {k!r}"
    return ""


def write_aero(path, tensors: Mapping | Iterable, *, uuid: bytes | None = None, model_name: str = "",
               architecture: str = "", metadata: dict | None = None, max_shard_bytes: int | None = None,
               compress: bool = True, control_integrity: bool = False, page_hashes: bool = False,
               page_size: int = S.DEFAULT_PAGE_SIZE, tensor_hash: bool = True,
               quant_descriptors: list | None = None, progress: bool | None = None, first_shard: int = 0) -> str:
    """Write an AERO v0.1 file, streaming, deterministically and atomically; returns its path.

    ``tensors``: mapping or iterable of (name, numpy array | TensorSpec | LazyTensor), written in
    that order (a LazyTensor is loaded when its bytes are read, and dropped after).
    ``uuid``: 16 bytes; when None it is derived from the content (still deterministic).
    ``max_shard_bytes``: split weights into several WTSH shards.  ``compress``: zstd for MMSG and
    TIDX.  ``control_integrity``: IHSH.  ``page_hashes``: a PHSH per shard of ``page_size``.
    ``tensor_hash``: hash_b3 per tensor in TIDX.  ``first_shard``: the id of the first shard (an
    AEROSET part names its shards with global ids).
    """
    with gc_paused():  # (10^5 tiny tensors: their objects are gone before the collector runs again)
        return write_aero_file(path, tensors, uuid=uuid, model_name=model_name, architecture=architecture,
                               metadata=metadata, max_shard_bytes=max_shard_bytes, compress=compress,
                               control_integrity=control_integrity, page_hashes=page_hashes, page_size=page_size,
                               tensor_hash=tensor_hash, quant_descriptors=quant_descriptors, progress=progress,
                               first_shard=first_shard, entries=False).path


def write_aero_file(path, tensors: Mapping | Iterable, *, uuid: bytes | None = None, model_name: str = "",
                    architecture: str = "", metadata: dict | None = None, max_shard_bytes: int | None = None,
                    compress: bool = True, control_integrity: bool = False, page_hashes: bool = False,
                    page_size: int = S.DEFAULT_PAGE_SIZE, tensor_hash: bool = True,
                    quant_descriptors: list | None = None, progress: bool | None = None, first_shard: int = 0,
                    file_digest=None, atomic: bool = True, entries: bool = True) -> Written:
    """:func:`write_aero` (same options, same bytes), returning what it wrote (:class:`Written`).
    ``file_digest``: a new hashlib-like object (``update``/``hexdigest``) fed every byte of the
    file in order while it is written (no read-back); its hex digest is ``Written.digest``.
    ``atomic=False``: ``path`` is a new file in a directory the caller installs as a whole
    (:func:`codec.io.writer_io.new_file`: no temp name and rename of its own).  ``entries=False``:
    ``Written.entries`` is empty (the TIDX rows are freed once packed, while its zstd runs)."""
    items = prepare(tensors)
    names = [it.name for it in items]
    if len(set(names)) != len(names):
        dup = next(n for n in names if names.count(n) > 1)
        raise E.UsageError(f"duplicate tensor name {dup!r}")
    if uuid is not None and (not isinstance(uuid, (bytes, bytearray)) or len(uuid) != 16):
        raise E.UsageError("uuid must be 16 bytes")
    # the arguments the control region records, checked against what its reader checks them against
    page_size, first_shard = (int(v) if isinstance(v, np.integer) else v for v in (page_size, first_shard))
    declared_arg(S.Phsh, page_size, "page_size", key="page_size", fmt=S.FORMAT)
    if max_shard_bytes is not None and (type(max_shard_bytes) is not int or max_shard_bytes < 1):
        raise E.UsageError(f"max_shard_bytes must be a positive integer (got {max_shard_bytes!r})")
    if quant_descriptors is not None:
        declared_arg(S.Mmsg, quant_descriptors, "quant_descriptors", key="quant_descriptors", fmt=S.FORMAT,
                     encode=_pack_arg)
    total = sum(it.nbytes for it in items)
    shard_sizes = plan_shards(items, max_shard_bytes)
    declared_arg(S.TidxEntry, first_shard, "first_shard", key="shard_id", fmt=S.FORMAT)
    declared_arg(S.TidxEntry, first_shard + len(shard_sizes) - 1, f"first_shard + {len(shard_sizes) - 1} (its last "
                 "shard's id)", key="shard_id", fmt=S.FORMAT)
    # without zstd the TIDX's length is known before its hashes (64 hex digits each): the weights'
    # place is fixed before they are hashed, so each tensor is hashed as it is written (one pass)
    one_pass = tensor_hash and not compress and file_digest is None
    first_pass = (tensor_hash and not one_pass) or file_digest is not None
    with Progress(total * (2 if first_pass else 1), f"write {os.path.basename(os.fspath(path))}",
                  enabled=progress) as bar:
        # pass 1: what the control region ahead of the weights holds -- every tensor's hash_b3
        # (TIDX); and, when the file is hashed as it goes out, every shard's BLAKE3 and page
        # digests too (the TOC holds them), so that the file can be written front to back
        if file_digest is not None:
            shard_digests = _hash_shards(items, page_size if page_hashes else None, bar, tensor_hash)
        else:
            shard_digests = {}
            if tensor_hash and not one_pass:
                _hash_tensors(items, bar, total)
        return _write(path, items, shard_sizes, bar, uuid=uuid, model_name=model_name,
                      architecture=architecture, metadata=metadata, compress=compress,
                      control_integrity=control_integrity, page_hashes=page_hashes, page_size=page_size,
                      quant_descriptors=quant_descriptors, first_shard=first_shard, shard_digests=shard_digests,
                      file_digest=file_digest, opener=atomic_write if atomic else new_file, hash_tensors=one_pass,
                      keep_rows=entries, items_owned=items is not tensors)


#: a TIDX hash_b3 not known yet (its length: the hash's)
_PLACEHOLDER = "0" * 64
#: where Writeback has only fdatasync: writeback of what has been written starts every 1/8 of the
#: file, at least every 128 MiB and at most every 16 MiB (the disk works while the rest is copied
#: and hashed; a 90 MB file too).  With sync_file_range it starts every 4 MiB (Writeback.RANGE_STEP)
_WRITEBACK = (16 << 20, 128 << 20)


def index_only(entries: list, *, model_name: str = "", architecture: str = "", uuid: bytes | None = None,
               metadata: dict | None = None) -> bytes:
    """The bytes of an index-only AERO (MMSG + a TIDX of ``entries``, no weights; and an MJSN of
    ``metadata`` when given), e.g. an AEROSET's index.aero listing its parts' tensors with their
    global shard ids and holding the model's metadata; ``uuid`` None: derived from the content."""
    with gc_paused():
        tidx = _pack({"tensors": entries})
    F = S.WRITER_FLAGS
    chunks, first = [], []
    if metadata:
        mjsn = _json_bytes(common_metadata(metadata))
        first.append((FourCC.MJSN.value, S.ChunkName.MJSN, int(F[FourCC.MJSN]), mjsn, len(mjsn), blake3_bytes(mjsn)))
        chunks.append({"role": "json", "fourcc": "MJSN", "toc_index": 0})
    chunks += [{"role": "manifest", "fourcc": "MMSG", "toc_index": len(chunks)},
               {"role": "tensors", "fourcc": "TIDX", "toc_index": len(chunks) + 1}]
    mmsg = _pack({"format": {"name": "AERO", "version": list(S.VERSION)},
                  "model": {"name": model_name, "architecture": architecture}, "chunks": chunks, "shards": []})
    return build_container(first + [(FourCC.MMSG.value, S.ChunkName.MMSG, int(F[FourCC.MMSG]), _zstd(mmsg), len(mmsg),
                                     blake3_bytes(mmsg)),
                                    (FourCC.TIDX.value, S.ChunkName.TIDX, int(F[FourCC.TIDX]), _zstd(tidx), len(tidx),
                                     blake3_bytes(tidx))],
                           uuid if uuid is not None else blake3_bytes(tidx + mmsg + b"".join(c[3] for c in first))[:16])


def _json_bytes(obj: dict) -> bytes:
    """An MJSN payload: the metadata as JSON (UsageError naming what JSON cannot hold)."""
    try:
        return json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=False,
                          allow_nan=False).encode("utf-8")
    except (TypeError, ValueError, UnicodeEncodeError) as e:
        raise E.UsageError(f"metadata{_first_unjsonable(obj)} must be JSON-serialisable: {e}") from None


def _write(path, items, shard_sizes, bar, *, uuid, model_name, architecture, metadata, compress,
           control_integrity, page_hashes, page_size, quant_descriptors, first_shard=0,
           shard_digests: dict | None = None, file_digest=None, opener=atomic_write,
           hash_tensors: bool = False, keep_rows: bool = True, items_owned: bool = False) -> Written:
    """The file, its chunks in plan order.  ``hash_tensors``: every hash_b3 is taken while the
    weights are written (the TIDX, uncompressed, is written with placeholders of the same length
    and rewritten once they are known; a content-derived uuid with it).  ``keep_rows=False``: the
    TIDX rows are not returned; ``items_owned``: ``items`` is this write's own list, emptied once
    nothing reads it again."""
    # ---------------------------------------------------------------- payloads
    with gc_paused():  # (10^5 entries: no collector passes over them while they are made)
        # (a shape stays the tuple it is -- msgpack packs it as the list it becomes in
        # Written.entries -- and a tensor with its hash and no quantization, the common case, is
        # one dict display: 10^5 rows at ~0.35 us each)
        rows = [{"name": it.name, "dtype": it.code, "shape": it.shape, "shard_id": first_shard + it.shard,
                 "data_off": it.data_off, "data_len": it.nbytes, "flags": 0, "hash_b3": it.hash_b3}
                if it.hash_b3 is not None and it.quant_id is None and it.quant_params is None
                else _row(it, first_shard, hash_tensors) for it in items]
        tidx = {"tensors": rows}
        tidx_raw = _pack(tidx)
    # the TIDX's zstd (most of its time outside the GIL) on a worker while the rest is prepared
    zstd_tidx = None
    if compress and S.WRITER_FLAGS[FourCC.TIDX] & S.ChunkFlags.COMPRESSED_ZSTD:
        ex = ThreadPoolExecutor(1, thread_name_prefix="modelcodec-zstd")
        zstd_tidx = ex.submit(_zstd, tidx_raw)
        ex.shutdown(wait=False)  # (the thread ends with its one task)
        if not keep_rows:  # (10^5 rows freed meanwhile, not after the write)
            rows = tidx = None
    # (MJSN holds the metadata given, "" values included, and no key it was not given)
    mjsn_obj = common_metadata(metadata, model_name=model_name, architecture=architecture)
    mjsn_raw = _json_bytes(mjsn_obj)

    # chunk list: [fourcc, name, raw payload (None: streamed or filled in later), local shard index]
    # (shards are named and numbered first_shard + local index: an AEROSET part uses global ids)
    n_shards = len(shard_sizes)
    plan: list[list] = []
    if control_integrity:
        plan.append([FourCC.IHSH, S.ChunkName.IHSH, None, None])
    plan.append([FourCC.MJSN, S.ChunkName.MJSN, mjsn_raw, None])
    plan.append([FourCC.MMSG, S.ChunkName.MMSG, None, None])
    plan.append([FourCC.TIDX, S.ChunkName.TIDX, tidx_raw, None])
    for s in range(n_shards):
        plan.append([FourCC.WTSH, S.ChunkName.shard(first_shard + s), None, s])
        if page_hashes:
            plan.append([FourCC.PHSH, S.ChunkName.phsh(first_shard + s), None, s])
    roles = {FourCC.IHSH: "control_integrity", FourCC.MJSN: "json", FourCC.MMSG: "manifest",
             FourCC.TIDX: "tensors", FourCC.WTSH: "weights", FourCC.PHSH: "page_hashes"}
    chunks_desc, shards_desc = [], []
    counts = [0] * n_shards
    for it in items:
        counts[it.shard] += 1
    for i, (fc, name, _, s) in enumerate(plan):
        d = {"role": roles[fc], "fourcc": fc.value.decode(), "toc_index": i}
        if s is not None:
            d["shard_id"] = first_shard + s
            if fc == FourCC.WTSH:
                shards_desc.append({"shard_id": first_shard + s, "toc_index": i, "size_bytes": shard_sizes[s],
                                    "tensor_count": counts[s], "mmap_critical": True})
        chunks_desc.append(d)
    mmsg = {"format": {"name": "AERO", "version": list(S.VERSION)},
            "model": {"name": mjsn_obj.get("model_name", ""), "architecture": mjsn_obj.get("architecture", "")},
            "chunks": chunks_desc, "shards": shards_desc}
    if quant_descriptors:
        mmsg["quant_descriptors"] = quant_descriptors
    mmsg_raw = _pack(mmsg)
    for p in plan:
        if p[0] == FourCC.MMSG:
            p[2] = mmsg_raw
    derive_uuid = uuid is None
    if derive_uuid:
        uuid = blake3_bytes(tidx_raw + mmsg_raw + mjsn_raw)[:16]  # (hash_tensors: again at the end)

    # while the TIDX's zstd runs: small shards of small in-memory tensors laid out in memory
    # and hashed (BLAKE3 outside the GIL too), to be written in one piece
    gathered: dict[int, tuple[bytearray, bytes]] = {}
    if zstd_tidx is not None and not page_hashes and not shard_digests and file_digest is None:
        for sid, its in _by_shard(items).items():
            buf = _gather(its, shard_sizes[sid])
            if buf is not None:
                gathered[sid] = (buf, blake3_bytes(buf))
        if not keep_rows and len(gathered) == n_shards and items_owned:  # (nothing reads them again:
            items.clear()  # 10^5 items freed meanwhile too)

    # ---------------------------------------------------------------- layout
    specs = []  # (fourcc, name, flags, stored length, ulen, blake3 of the raw payload)
    stored: list[bytes | None] = []
    for fc, name, raw, sid in plan:
        flags = int(S.WRITER_FLAGS[fc])
        if fc == FourCC.IHSH:
            ulen, data = S.IHSH_PAYLOAD_SIZE, None
        elif fc == FourCC.WTSH:
            ulen, data = shard_sizes[sid], None
        elif fc == FourCC.PHSH:
            n_pages = -(-shard_sizes[sid] // page_size)
            ulen = len(_pack({"shard_name": S.ChunkName.shard(first_shard + sid), "page_size": page_size,
                              "digests": [bytes(32)] * n_pages}))
            data = None
        else:
            ulen = len(raw)
            if compress and flags & S.ChunkFlags.COMPRESSED_ZSTD:
                data = zstd_tidx.result() if fc == FourCC.TIDX else _zstd(raw)
            else:
                flags &= ~int(S.ChunkFlags.COMPRESSED_ZSTD)
                data = raw
        specs.append((fc.value, name, flags, ulen if data is None else len(data), ulen,
                      blake3_bytes(raw) if raw is not None else bytes(32)))
        stored.append(data)
    lay = Layout.plan(specs, uuid)
    entries = lay.entries
    file_end = lay.file_end
    control_region = lay.control

    # ---------------------------------------------------------------- stream
    shard_items = _by_shard(items)
    known = dict(shard_digests or {})
    ordered = file_digest is not None  # every digest known: the control region first, front to back
    phsh_raw: dict[int, bytes] = {}
    ihsh = next((k for k, p in enumerate(plan) if p[0] == FourCC.IHSH), None)

    def phsh_payload(sid: int, pages: list) -> bytes:
        raw = _pack({"shard_name": S.ChunkName.shard(first_shard + sid), "page_size": page_size, "digests": pages})
        assert len(raw) == entries[sid_toc[sid, FourCC.PHSH]]["chunk_ulen"]
        return raw

    def ihsh_payload() -> bytes:
        start = lay.payloads_start
        region = control_region(with_hashes=False)
        digest = blake3_bytes(region + bytes(start - len(region)))
        raw = _pack({"algo": "blake3-256", "covered_ranges": [[0, start]], "digest": digest})
        return raw + bytes(S.IHSH_PAYLOAD_SIZE - len(raw))

    sid_toc = {(p[3], p[0]): i for i, p in enumerate(plan) if p[3] is not None}
    if ordered:
        for sid in range(n_shards):
            if sid not in known:  # a shard without tensors (a file of none)
                known[sid] = (blake3_bytes(b""), [] if page_hashes else None)
            entries[sid_toc[sid, FourCC.WTSH]]["blake3_256"] = known[sid][0]
            if page_hashes:
                phsh_raw[sid] = phsh_payload(sid, known[sid][1])
                entries[sid_toc[sid, FourCC.PHSH]]["blake3_256"] = blake3_bytes(phsh_raw[sid])
        if ihsh is not None:
            ihsh_raw = ihsh_payload()
            entries[ihsh]["blake3_256"] = blake3_bytes(ihsh_raw)

    with opener(path) as f, Writeback(f, step=min(max(file_end // 8, _WRITEBACK[0]), _WRITEBACK[1])) as wb, HashingWriter(f, wb, file_digest) as out:
        if ordered:
            head = control_region(with_hashes=True)
            out.write(head)
            at = len(head)
        else:
            f.seek(lay.payloads_start)
            at = lay.payloads_start
        for i, e in enumerate(entries):
            fc = plan[i][0]
            if e["chunk_offset"] > at:
                out.write(bytes(e["chunk_offset"] - at))
            if fc == FourCC.IHSH:
                out.write(ihsh_raw if ordered else bytes(S.IHSH_PAYLOAD_SIZE))  # else patched at the end
            elif fc == FourCC.WTSH:
                sid = plan[i][3]
                if sid in gathered:  # laid out and hashed above: one write
                    buf, e["blake3_256"] = gathered.pop(sid)
                    out.write(buf)
                    bar.update(len(buf))
                elif sid in known:  # hashed in pass 1 (ordered: its TOC and PHSH entries are set): only write
                    _write_shard(out, shard_items.get(sid, []), bar)
                else:  # the shard (and page) hashes on a worker thread while the same pieces are written
                    # (on that one core: BLAKE3's own threads would take the writing thread's too)
                    h = new_hasher(1)
                    ph = PageHasher(page_size) if page_hashes else None
                    _write_shard(out, shard_items.get(sid, []), bar, BackgroundFeed(h, ph), hash_tensors)
                    e["blake3_256"] = h.digest()
                    if ph:
                        phsh_raw[sid] = phsh_payload(sid, ph.finish())
            elif fc == FourCC.PHSH:
                raw = phsh_raw[plan[i][3]]
                e["blake3_256"] = blake3_bytes(raw)
                out.write(raw)
            else:
                out.write(stored[i])
            at = e["chunk_offset"] + e["chunk_length"]
        assert at == file_end
        if hash_tensors:  # the TIDX with the hashes taken while writing: same length, same place
            for e, it in zip(rows, items):
                e["hash_b3"] = it.hash_b3
            k = next(k for k, p in enumerate(plan) if p[0] == FourCC.TIDX)
            raw = _pack(tidx)
            assert len(raw) == len(tidx_raw) == entries[k]["chunk_length"] and not compress
            entries[k]["blake3_256"] = blake3_bytes(raw)
            f.seek(entries[k]["chunk_offset"])
            write_all(f, raw)
            if derive_uuid:
                lay.header["uuid"] = blake3_bytes(raw + mmsg_raw + mjsn_raw)[:16]
        if not ordered:
            if ihsh is not None:
                raw = ihsh_payload()
                entries[ihsh]["blake3_256"] = blake3_bytes(raw)
                f.seek(entries[ihsh]["chunk_offset"])
                write_all(f, raw)
            f.seek(0)
            write_all(f, control_region(with_hashes=True))
        digest = out.hexdigest()
    return Written(os.fspath(path), file_end, rows if rows is not None else [], digest)


def _row(it: _Item, first_shard: int, placeholder: bool) -> dict:
    """A TIDX entry, in the one key order (see the common case in :func:`_write`): the
    quantization a tensor has, its hash_b3 (``placeholder``: the placeholder of one not known yet)."""
    e = {"name": it.name, "dtype": int(it.code), "shape": it.shape, "shard_id": first_shard + it.shard,
         "data_off": it.data_off, "data_len": it.nbytes, "flags": 0}
    if it.hash_b3 is not None:
        e["hash_b3"] = it.hash_b3
    elif placeholder:
        e["hash_b3"] = _PLACEHOLDER
    if it.quant_id is not None:
        e["quant_id"] = int(it.quant_id)
    if it.quant_params is not None:
        e["quant_params"] = it.quant_params
    return e



def _write_shard(out, its: list[_Item], bar, feed: BackgroundFeed | None = None, hash_tensors: bool = False) -> None:
    """One shard's bytes (tensors and the zero padding between them) through ``out``; pieces
    smaller than _GATHER are copied together into writes of about _GATHER bytes (10^5 tiny
    tensors: one copy each, not one write each).  ``feed``: the shard's hashers, fed the same
    buffers on a worker thread while they are written; ``hash_tensors``: each tensor's hash_b3
    taken from the same buffers on a second worker while they are written (a small whole
    tensor's at once, here).  UsageError when a source gives another number of bytes than it
    said."""
    buf, filled, done = bytearray(), 0, 0
    segs: list = []  # (tensor hasher, start, end) of buf's bytes, hashed when buf goes out
    hashed: list = []  # (item, hasher): its hash_b3 once every piece is hashed
    with feed if feed is not None else _nothing(), \
            BackgroundFeed(_TensorSegments()) if hash_tensors else _nothing() as tfeed:
        for it in its:
            if it.data_off > filled:
                buf += bytes(it.data_off - filled)
            if it.whole is not None:
                if hash_tensors:
                    it.hash_b3 = blake3_hasher(it.whole).hexdigest()
                buf += it.whole
            else:
                got = 0
                h = blake3_hasher() if hash_tensors else None
                if h is not None:
                    hashed.append((it, h))
                for p in it.pieces():
                    got += len(p)
                    if len(p) < _GATHER:
                        if h is not None:
                            segs.append((h, len(buf), len(buf) + len(p)))
                        buf += p
                    else:
                        if buf:
                            _emit(out, buf, feed, tfeed, segs)
                            buf, segs = bytearray(), []
                        _emit(out, p, feed, tfeed, [(h, 0, len(p))] if h is not None else segs)
                        bar.update(len(p))
                        done -= len(p)
                    if len(buf) >= _GATHER:
                        _emit(out, buf, feed, tfeed, segs)
                        buf, segs = bytearray(), []
                if got != it.nbytes:
                    raise E.UsageError(f"{it.name}: source gave {got} bytes, expected {it.nbytes}")
            filled = it.data_off + it.nbytes
            done += it.nbytes
            if len(buf) >= _GATHER:
                _emit(out, buf, feed, tfeed, segs)
                buf, segs = bytearray(), []
                bar.update(done)
                done = 0
        if buf:
            _emit(out, buf, feed, tfeed, segs)
        bar.update(done)
    for it, h in hashed:  # (every piece hashed: the feeds were drained on leaving)
        it.hash_b3 = h.hexdigest()


class _Segments:
    """A buffer going out and where each tensor's bytes lie in it: ``(hasher, start, end)``."""
    __slots__ = ("buf", "segs")

    def __init__(self, buf, segs: list):
        self.buf, self.segs = buf, segs

    def __len__(self) -> int:
        return len(self.buf)


class _TensorSegments:
    """A hasher-like object for :class:`BackgroundFeed`: fed :class:`_Segments`, it updates
    each tensor's hasher with its bytes of the buffer (on the feed's worker thread)."""

    @staticmethod
    def update(s: _Segments) -> None:
        mv = memoryview(s.buf).cast("B")
        for h, a, b in s.segs:
            h.update(mv[a:b])


def _emit(out, p, feed, tfeed=None, segs=None) -> None:
    if feed is not None:
        feed.update(p)
    if tfeed is not None and segs:
        tfeed.update(_Segments(p, segs))
    out.write(p)
    if feed is not None:
        feed.drain()  # before the source refills p's buffer or drops its pages
    if tfeed is not None:
        tfeed.drain()
    out.drain()


@contextmanager
def _nothing():
    yield
