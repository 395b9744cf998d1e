"""AERO writer, its inputs: the tensors checked and described once (:func:`prepare`), placed in
shards (:func:`plan_shards`), and the hashes the control region ahead of the weights holds,
taken in the writer's first pass over the sources (:func:`_hash_tensors`, :func:`_hash_shards`)."""
from __future__ import annotations

import math
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, Callable, Iterable, Mapping

import numpy as np

from ...schemas import aero as S
from ...schemas.aero import DType

from ... import errors as E
from ...io.integrity import AUTO, SMALL, BackgroundFeed, PageHasher, blake3_hasher, new_hasher
from ...io.writer_io import LazyTensor, array_pieces, as_array, as_le_bytes, name_bytes, declared_arg, named_pairs
from ...model import Packed
from ...engine.payload import gc_paused
from ...engine.relations.plan import alignment
from .chunks import CODE_OF, NP_DTYPES, _align


#: pieces smaller than this are written together (10^5 tiny tensors: not one syscall each)
_GATHER = 1 << 20
#: a tensor of one piece smaller than this is hashed at once and its bytes fed to the shard's
#: hashers together with its neighbours' (one hand-over per _GATHER bytes, not per tensor)
_SMALL_PIECE = 64 << 10
@dataclass
class TensorSpec:
    """A tensor to write when it is not a plain numpy array.

    ``data`` is a numpy array, a bytes-like object, or a callable returning an iterable of
    bytes-like pieces (streamed; called once per pass).  ``dtype`` is a numpy dtype or "packed".
    """
    data: Any
    dtype: Any = None
    shape: tuple | None = None
    quant_id: int | None = None
    quant_params: dict | None = None


@dataclass(slots=True)
class _Item:
    name: str
    code: int
    shape: tuple
    nbytes: int
    pieces: Callable[[], Iterable] | None  # yields little-endian C-order bytes-like pieces (None: ``whole``)
    quant_id: int | None = None
    quant_params: dict | None = None
    hash_b3: str | None = None
    shard: int = 0
    data_off: int = 0
    whole: Any = None  # all the bytes in one small piece (a small in-memory array): no generator
    shared: bool = False  # ``pieces`` are an array's bytes: any thread may read them, in any order


def _callable_pieces(fn: Callable[[], Iterable]) -> Callable[[], Iterable]:
    return lambda: map(as_le_bytes, fn())


def _item(name: str, t) -> _Item:
    if type(t) is np.ndarray and type(name) is str and name and name.isascii():
        # the common case, lean (10^5 tiny tensors): a plain array under an ASCII name
        dt = t.dtype
        code = _CODE_SEEN.get(dt)
        if code is None:
            code = _code(name, dt)
        nb = t.nbytes
        if 0 < nb < _SMALL_PIECE and dt.byteorder != ">" and t.flags.c_contiguous:
            try:
                whole = memoryview(t).cast("B")
            except (TypeError, ValueError):  # a dtype the buffer protocol does not know (bfloat16)
                whole = memoryview(t.reshape(-1).view(np.uint8))
            return _Item(name, code, t.shape, nb, None, whole=whole)
        return _Item(name, code, t.shape, nb, array_pieces(t), shared=True)
    name_bytes(name)
    if isinstance(t, Packed):  # quantized bytes from another format: PACKED, its codec in quant_params
        raw = np.ascontiguousarray(t.data).reshape(-1).view(np.uint8)
        return _Item(name, DType.PACKED, tuple(int(s) for s in t.shape), raw.nbytes, array_pieces(raw), None,
                     _quant_params(name, dict(t.quant_params) if isinstance(t.quant_params, Mapping)
                                   else t.quant_params) if t.quant_params else None, shared=True)
    if isinstance(t, TensorSpec):
        if isinstance(t.dtype, str) and t.dtype == "packed":
            if callable(t.data):
                raise E.UsageError(f"{name}: a streamed packed tensor needs its byte length; pass bytes or an array")
            raw = np.frombuffer(memoryview(t.data).cast("B"), dtype=np.uint8) if not isinstance(t.data, np.ndarray) \
                else t.data.reshape(-1).view(np.uint8)
            shape = tuple(int(s) for s in (t.shape if t.shape is not None else (raw.size,)))
            return _Item(name, DType.PACKED, shape, raw.nbytes, array_pieces(raw), _quant_id(name, t.quant_id),
                         _quant_params(name, t.quant_params), shared=True)
        if callable(t.data):
            if t.dtype is None or t.shape is None:
                raise E.UsageError(f"{name}: a streamed tensor needs dtype and shape")
            code = _code(name, np.dtype(t.dtype))
            shape = tuple(int(s) for s in t.shape)
            return _Item(name, code, shape, math.prod(shape) * S.DTYPE_ITEMSIZE[code], _callable_pieces(t.data),
                         _quant_id(name, t.quant_id), _quant_params(name, t.quant_params))
        arr = as_array(name, t.data) if t.dtype is None else as_array(name, t.data).view(np.dtype(t.dtype))
        if t.shape is not None:
            arr = arr.reshape(t.shape)
        return _item(name, arr)
    if isinstance(t, LazyTensor):  # loaded each time its bytes are read (a pass), dropped after
        return _Item(name, _code(name, t.dtype), t.shape, t.nbytes, t.pieces(name))
    t = as_array(name, t)
    code = _code(name, t.dtype)
    whole = memoryview(t.reshape(-1).view(np.uint8)) \
        if 0 < t.nbytes < _SMALL_PIECE and t.flags.c_contiguous and t.dtype.byteorder != ">" else None
    return _Item(name, code, tuple(map(int, t.shape)), t.nbytes, array_pieces(t), whole=whole, shared=True)


def _pack_arg(value) -> bytes:
    import msgpack
    return msgpack.packb(value, use_bin_type=True)


def _quant_id(name: str, q):
    """A TensorSpec's quant_id as the TIDX stores it: an integer msgpack holds (numpy integers
    taken), else a UsageError naming the tensor."""
    if q is None:
        return None
    if isinstance(q, np.integer):
        q = int(q)
    return declared_arg(S.TidxEntry, q, f"tensor {name!r}: quant_id", key="quant_id", fmt=S.FORMAT,
                        encode=_pack_arg)


def _quant_params(name: str, q):
    """A packed tensor's quant_params as the TIDX stores them: what TidxEntry declares (a map),
    that msgpack holds."""
    if q is None:
        return None
    return declared_arg(S.TidxEntry, q, f"tensor {name!r}: quant_params", key="quant_params",
                        fmt=S.FORMAT, encode=_pack_arg)


_CODE_SEEN: dict = {}
#: the dtypes seen whose bytes are little-endian as they lie (the byte order "<", "=" on this
#: little-endian machine, or none) -> their AERO code: :func:`prepare`'s one lookup per tensor
_LE_CODE: dict = {}


def _code(name: str, dt: np.dtype) -> int:
    c = _CODE_SEEN.get(dt)  # (10^5 tiny tensors: one dtype lookup each, not a new dtype each)
    if c is None:
        c = CODE_OF.get(dt.newbyteorder("<") if dt.byteorder in "<>=|" else dt)
        if c is not None:
            _CODE_SEEN[dt] = c
            if dt.byteorder != ">" and np.little_endian:
                _LE_CODE[dt] = c
    if c is None:
        raise E.UsageError(f"{name}: AERO has no dtype for {dt} (supported: "
                           f"{', '.join(S.DTYPE_NAMES[k] for k in NP_DTYPES if k != DType.PACKED)}, packed)")
    return c


def plan_shards(items: list[_Item], max_shard_bytes: int | None) -> list[int]:
    """Assign shard ids and in-shard offsets; returns each shard's byte size.  A tensor larger
    than the cap gets a shard of its own; an empty tensor never starts a shard (where alignment
    would push it past the cap, it sits unaligned at the end of the current one).  Tensors are
    aligned to the writer's TENSOR_ALIGN (readers accept any) and to whatever the schema
    declares for their offsets."""
    align = math.lcm(alignment(S.RELATIONS, "TidxEntry.data_off"), S.TENSOR_ALIGN)
    if max_shard_bytes is None:  # one shard: each tensor at the aligned end of the one before
        n = np.fromiter((it.nbytes for it in items), np.int64, len(items))
        ends = np.cumsum(-(-n // align) * align)
        offs = (ends - -(-n // align) * align).tolist()
        for it, o in zip(items, offs):
            it.shard, it.data_off = 0, o
        return [offs[-1] + items[-1].nbytes if items else 0]
    sizes = [0]
    for it in items:
        start = _align(sizes[-1], align)
        if max_shard_bytes is not None and sizes[-1] > 0 and start + it.nbytes > max_shard_bytes:
            if not it.nbytes:
                it.shard, it.data_off = len(sizes) - 1, sizes[-1]
                continue
            sizes.append(0)
            start = 0
        it.shard = len(sizes) - 1
        it.data_off = start
        sizes[-1] = start + it.nbytes
    return sizes


def prepare(tensors: Mapping | Iterable) -> list[_Item]:
    """The tensors to write (a mapping or iterable of (name, array | TensorSpec | Packed |
    :class:`codec.io.writer_io.LazyTensor`: loaded in each pass over the bytes, dropped after)),
    checked and described once, in order: what :func:`plan_shards` assigns to shards and what
    :func:`write_aero` / :func:`write_aero_file` also take in place of the mapping (a multi-file
    writer prepares once and hands each file its share).  UsageError for what AERO cannot store."""
    if isinstance(tensors, list) and all(type(t) is _Item for t in tensors):
        return tensors
    pairs = list(named_pairs(tensors))
    out: list[_Item] = []
    add = out.append
    with gc_paused():
        for n, t in pairs:
            # the common case, inline (10^5 tiny tensors: no call, one dtype lookup each): a small
            # C-contiguous array of a little-endian dtype AERO stores, under an ASCII name; its
            # bytes are one piece
            if type(t) is np.ndarray and type(n) is str:
                code = _LE_CODE.get(t.dtype)
                nb = t.nbytes
                if code is not None and 0 < nb < _SMALL_PIECE and n and n.isascii() and t.flags.c_contiguous:
                    try:
                        whole = memoryview(t).cast("B")
                    except (TypeError, ValueError):  # a dtype the buffer protocol does not know (bfloat16)
                        whole = memoryview(t.reshape(-1).view(np.uint8))
                    add(_Item(n, code, t.shape, nb, None, None, None, None, 0, 0, whole))
                    continue
            add(_item(n, t))
    return out


def _shard_pieces(its: list[_Item]):
    """(item or None for padding, piece) of one shard's bytes, in order; raises UsageError when
    a source gives another number of bytes than it said."""
    filled = 0
    for it in its:
        if it.data_off > filled:
            yield None, bytes(it.data_off - filled)
        if it.whole is not None:
            yield it, it.whole
            filled = it.data_off + it.nbytes
            continue
        got = 0
        for p in it.pieces():
            got += len(p)
            yield it, p
        if got != it.nbytes:
            raise E.UsageError(f"{it.name}: source gave {got} bytes, expected {it.nbytes}")
        filled = it.data_off + it.nbytes


#: a shard of small in-memory tensors up to this size is laid out in memory before it is written
#: (while the TIDX's zstd runs on the other core), then written and hashed in one piece
_GATHER_SHARD = 64 << 20


def _gather(its: list[_Item], size: int) -> bytearray | None:
    """The shard's bytes laid out in memory (zero padding between tensors) when every tensor of
    it is one small in-memory piece and the shard is at most _GATHER_SHARD bytes; else None."""
    if size > _GATHER_SHARD or any(it.whole is None and it.nbytes for it in its):
        return None  # (before the buffer is made: zeroing 64 MiB costs ~15 ms)
    buf = bytearray(size)
    mv = memoryview(buf)
    for it in its:
        w = it.whole
        if w is None:
            if it.nbytes or any(len(p) for p in it.pieces()):  # (a source giving bytes it did
                return None  # not announce: the streamed write refuses it)
            continue
        mv[it.data_off:it.data_off + it.nbytes] = w
    return buf


def _by_shard(items: list[_Item]) -> dict[int, list[_Item]]:
    if items and items[0].shard == items[-1].shard:  # one shard (ids never decrease along items)
        return {items[0].shard: items}
    out: dict[int, list[_Item]] = {}
    for it in items:
        out.setdefault(it.shard, []).append(it)
    return out


def _hash_tensors(items: list[_Item], bar, total: int | None = None) -> None:
    """Every tensor's hash_b3 (set on the item), in one read of the sources.  This thread reads
    them front to back; the array-backed tensors at the end, about half the bytes, are hashed
    on a second thread meanwhile (two tensors at a time, each on one core; a big one with
    BLAKE3's own threads).  A streamed source is only ever read here, in order.  ``total``:
    the tensors' byte count, when the caller has it.  (Measured here: 1,000 tensors of 1 GiB in
    all, ~100 ms that way against ~150 ms one after the other on BLAKE3's threads, which split
    an input of a few MiB or less poorly.)"""
    if total is None:
        total = sum(it.nbytes for it in items)
    cut, theirs = len(items), 0  # items[cut:]: the second thread's
    if total >= 2 * SMALL:
        while cut > 0 and theirs < total // 2:
            it = items[cut - 1]
            if it.whole is None and not it.shared:  # (streamed: read here, in order)
                break
            cut -= 1
            theirs += it.nbytes
    if theirs < SMALL:
        cut, theirs = len(items), 0
    stop = []  # (this thread failed: the other stops at its next tensor)

    def back() -> None:
        for it in items[cut:]:
            if stop:
                return
            _hash_one(it, it.whole is None and it.nbytes >= SMALL)

    ex = fut = None
    if cut < len(items):
        ex = ThreadPoolExecutor(1, thread_name_prefix="modelcodec-hash")
        fut = ex.submit(back)
    try:
        done = 0
        for it in items if fut is None else items[:cut]:
            if it.whole is not None:
                it.hash_b3 = blake3_hasher(it.whole).hexdigest()
                done += it.nbytes
                if done >= _GATHER:
                    bar.update(done)
                    done = 0
                continue
            threaded = it.nbytes >= (SMALL if fut is not None and it.shared else _SMALL_PIECE)
            _hash_one(it, threaded, bar)
        bar.update(done)
    except BaseException:
        stop.append(True)
        raise
    finally:
        if fut is not None:
            ex.shutdown(wait=True)
    if fut is not None:
        fut.result()  # (its error, if any)
        bar.update(theirs)


def _hash_one(it: _Item, threaded: bool, bar=None) -> None:
    """``it``'s hash_b3, read from its source (``threaded``: with BLAKE3's own threads)."""
    if it.whole is not None:
        it.hash_b3 = blake3_hasher(it.whole).hexdigest()
        return
    h = new_hasher(AUTO) if threaded else blake3_hasher()
    got = 0
    for p in it.pieces():
        got += len(p)
        h.update(p)
        if bar is not None:
            bar.update(len(p))
    if got != it.nbytes:
        raise E.UsageError(f"{it.name}: source gave {got} bytes, expected {it.nbytes}")
    it.hash_b3 = h.hexdigest()


def _hash_shards(items: list[_Item], page_size: int | None, bar,
                 tensors: bool = True) -> dict[int, tuple[bytes, list | None]]:
    """Every shard's (BLAKE3, page digests) and, when ``tensors``, every tensor's hash_b3 (set
    on the item), in one read of the sources: the shard's hashers run on a worker thread while
    this one hashes the same piece for its tensor (one thread each: measured, that splits the
    two cores best)."""
    out = {}
    for sid, its in _by_shard(items).items():
        whole, ph = new_hasher(max_threads=1), (PageHasher(page_size) if page_size else None)
        h, cur = None, None
        small = bytearray()  # whole small tensors and padding, copied, fed to the shard's hashers together
        with BackgroundFeed(whole, ph) as feed:
            for it, p in _shard_pieces(its):
                if it is None or (len(p) == it.nbytes and len(p) < _SMALL_PIECE):
                    if it is not None:  # a whole tensor in one small piece: hashed here at once
                        if cur is not None:
                            cur.hash_b3, cur = h.hexdigest(), None
                        if tensors:
                            it.hash_b3 = blake3_hasher(p).hexdigest()
                        bar.update(len(p))
                    small += p
                    if len(small) >= _GATHER:
                        feed.update(small)
                        feed.drain()
                        small = bytearray()
                    continue
                if small:
                    feed.update(small)
                    feed.drain()
                    small = bytearray()
                feed.update(p)
                if it is not None:
                    if tensors and it is not cur:
                        if cur is not None:
                            cur.hash_b3 = h.hexdigest()
                        cur, h = it, blake3_hasher()
                    if tensors:
                        h.update(p)
                    bar.update(len(p))
                # both hashers are done with p before the source moves on: a streamed source may
                # refill p's buffer next, a mapped one drops p's pages (were the worker still
                # reading them, it would fault them back in: resident memory would grow)
                feed.drain()
            if small:
                feed.update(small)
            if cur is not None:
                cur.hash_b3 = h.hexdigest()
        if tensors:
            for it in its:  # (an empty tensor yields no piece)
                if it.hash_b3 is None:
                    it.hash_b3 = blake3_hasher().hexdigest()
        out[sid] = (whole.digest(), ph.finish() if ph else None)
    return out
