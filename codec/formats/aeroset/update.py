"""Partial updates of an AEROSET (``codec.update_set``, ``modelcodec update-set``): the values of
some tensors replaced -- a new dtype or shape allowed -- by rewriting only the parts that hold
them, index.aero and the index JSON; every other part keeps its bytes (and, locally, its inode).

Locally the new set is a temporary directory beside the set, holding hard links to the parts
that do not change, installed as :func:`write_aeroset` installs a set (an atomic swap: readers
see the old set or the new one, never a mix).  On object storage the rewritten parts and
index.aero are uploaded under new names, the index JSON (one atomic PUT) last; the objects only
the old index named are then deleted.
"""
from __future__ import annotations

import json
import os
import re
import shutil
import tempfile
from typing import Mapping

from ...schemas import aeroset as S

from ... import errors as E
from ...io import links
from ...io.atomic import fsync_dir, give_default_mode, locked_dir, os_error, temp_prefix
from ...io.writer_io import new_file, write_all
from ...model import Packed
from .. import aero as A
from .reader import AeroSet
from .writer import _install, _replaceable

#: a part or index.aero renamed by an update on object storage: the tag of its content before ".aero"
_TAG = re.compile(r"\.u[0-9a-f]{8}(?=\.aero$)")


def update_set(source, tensors: Mapping, *, storage_options: dict | None = None, progress: bool | None = None) -> str:
    """Replace the values of the tensors ``tensors`` names (name -> array; a new dtype or shape
    is allowed) in the set at ``source`` (its folder, index, or URL on object storage),
    rewriting only the parts that hold them.  Returns the index's path or URL."""
    if not isinstance(tensors, Mapping) or not tensors:
        raise E.UsageError("update_set takes a non-empty mapping of tensor names to arrays")
    source = os.fspath(source)
    remote = "://" in source
    if remote and source.split("://", 1)[0].lower() in ("http", "https"):
        raise E.UsageError(f"{source}: an http(s) URL cannot be written (update a local set or one on object storage)")
    if not remote and storage_options is not None:
        raise E.UsageError(f"storage_options= is for URLs (s3://, gs://, ...), not the local path {source!r}")
    opts = {"storage_options": storage_options, "cache": False} if remote else {}
    with AeroSet(source, **opts) as s:
        unknown = sorted(n for n in tensors if n not in s.tensors)
        if unknown:
            raise E.UsageError(f"{s.source}: no tensor {unknown[0]!r} in the set (update_set replaces tensors it "
                               "has); nothing was written")
        index_path = s.index_path
        if remote and "base_url" in s.index:
            raise E.UsageError(f"{s.source}: the index reads its parts from its base_url: update the set where its "
                               "parts are")
        if remote:
            _update_store(s, tensors, progress)
        else:
            _update_local(s, tensors, progress)
    return index_path


def _rebuild(s: AeroSet, tensors: Mapping, out: str, rename: bool, progress) -> tuple[dict, list[str], list[str]]:
    """The rewritten parts and index.aero written into the folder ``out``; returns the new
    index JSON, the names of the files written and of the files they replace (``rename``:
    written under new names, else under the old ones)."""
    g = s._global.entries
    rows = s._global.rows
    part_of = {n: s._shard_part[int(g.value(rows[n], "shard_id"))] for n in s.tensors}
    touched = sorted({part_of[n] for n in tensors})
    index = json.loads(json.dumps(s.index))  # (a copy, keys in their order)
    written, replaced, entries = [], [], {}
    for i in touched:
        ref = index["parts"][i]
        part = s.part(i)
        names = list(part.tensors)
        kept = s.read_tensors([n for n in names if n not in tensors])  # (verified against index.aero)
        first = min(ref["shards"])
        items = A.prepare([(n, tensors[n] if n in tensors else _as_given(s.tensors[n], kept[n])) for n in names])
        tmp_name = f".new-{i}.aero"
        w = A.write_aero_file(os.path.join(out, tmp_name), items, metadata=dict(part.metadata) or None,
                              first_shard=first, progress=progress, file_digest=links.digest_of(S.FILES), atomic=False)
        name = _named(ref["path"], w.digest) if rename else ref["path"]
        os.rename(os.path.join(out, tmp_name), os.path.join(out, name))
        replaced.append(ref["path"])
        written.append(name)
        ref.update({"path": name, S.FILES.digest: w.digest, S.FILES.size: w.size, "shards": [first]})
        entries.update((e["name"], e) for e in w.entries)
    fields = [k.name for k in g.decl.keys]  # (every field a TIDX entry may have: those it has are kept)
    rows_out = []
    for n in s.tensors:  # (index.aero lists the tensors in the order it did)
        if n in entries:
            rows_out.append(entries[n])
        else:
            r = rows[n]
            rows_out.append({k: g.value(r, k) for k in fields if bool(g.present(k)[r])})
    meta = s._global.metadata
    blob = A.index_only(rows_out, model_name=meta.get("model_name", ""), architecture=meta.get("architecture", ""))
    h = links.digest_of(S.FILES)
    h.update(blob)
    gref = index["global_tidx"]
    name = _named(gref["path"], h.hexdigest()) if rename else gref["path"]
    with new_file(os.path.join(out, name)) as f:
        write_all(f, blob)
    replaced.append(gref["path"])
    written.append(name)
    gref.update({"path": name, S.FILES.digest: h.hexdigest(), S.FILES.size: len(blob)})
    return index, written, replaced


def _as_given(t, a):
    """A tensor kept as a writer takes it: packed (quantized) bytes as a :class:`Packed`."""
    return Packed(a, tuple(t.shape), t.quant_params or {}) if t.common_dtype == "packed" else a


def _named(path: str, digest: str) -> str:
    """A new name for a rewritten file: its old one tagged with its content's digest."""
    head, _, tail = path.rpartition("/")
    stem = _TAG.sub("", tail)
    stem = stem[:-5] if stem.endswith(".aero") else stem
    return (head + "/" if head else "") + f"{stem}.u{digest[:8]}.aero"


def _index_bytes(index: dict) -> bytes:
    return (json.dumps(index, indent=2) + "\n").encode("utf-8")


def _update_local(s: AeroSet, tensors: Mapping, progress) -> None:
    """A new set beside the set (hard links to the parts that stay), swapped in atomically."""
    out_dir = os.path.dirname(os.path.abspath(s.index_path))
    parent = os.path.dirname(out_dir)
    try:
        with locked_dir(parent):
            proven = _replaceable(out_dir)
        tmp = tempfile.mkdtemp(prefix=temp_prefix(out_dir), dir=parent)
    except OSError as e:
        raise os_error(out_dir, e) from None
    try:
        give_default_mode(tmp, directory=True)
        index, written, replaced = _rebuild(s, tensors, tmp, False, progress)
        for _, ref in links.entries(S.FILES, index, "index"):
            name = ref[S.FILES.path]
            if name in written:
                continue
            dst = os.path.join(tmp, name)
            os.makedirs(os.path.dirname(dst), exist_ok=True)
            src = os.path.join(out_dir, name)
            try:
                os.link(src, dst, follow_symlinks=False)  # the same file: its bytes and inode
            except OSError:
                shutil.copy2(src, dst)  # (a filesystem without hard links)
        with new_file(os.path.join(tmp, os.path.basename(s.index_path))) as f:
            write_all(f, _index_bytes(index))
        fsync_dir(tmp)
        _install(tmp, out_dir, proven)
    except BaseException as e:
        shutil.rmtree(tmp, ignore_errors=True)
        if isinstance(e, OSError):
            raise os_error(out_dir, e) from None
        raise


def _update_store(s: AeroSet, tensors: Mapping, progress) -> None:
    """New parts and index.aero uploaded under new names, then the index JSON; then the objects
    only the old index named deleted."""
    store = s.store.http
    base = s.index_path.rsplit("/", 1)[0]
    tmp = tempfile.mkdtemp(prefix="modelcodec-update-")
    try:
        index, written, replaced = _rebuild(s, tensors, tmp, True, progress)
        store.run([lambda n=n: store.put_file(f"{base}/{n}", os.path.join(tmp, n)) for n in written])
        store.put(s.index_path, [_index_bytes(index)])
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    still = {ref[S.FILES.path] for _, ref in links.entries(S.FILES, index, "index")}
    for n in replaced:
        if n not in still:
            store.delete(f"{base}/{n}")
