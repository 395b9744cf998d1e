"""The AEROSET writer: parts written as AERO files, index.aero and the index JSON, all in a
temporary directory installed atomically beside whatever set was there (only a set's own files
are ever replaced)."""
from __future__ import annotations

import json
import os
import shutil
import stat
import tempfile
from typing import Iterable, Mapping

from ...schemas import aeroset as S

from ... import errors as E
from ...engine.nesting import json_loads
from ...engine.payload import gc_paused
from ...io import links
from ...io.writer_io import common_metadata, write_all, new_file
from ...io.atomic import exchange, fsync_dir, give_default_mode, locked_dir, os_error, refuse_url, remove_stale_temps, temp_prefix
from ...io.sources import open_regular
from .. import aero as A
from .common import is_url


@gc_paused()  # (10^5 tiny tensors: their objects are gone before the collector runs again)
def write_aeroset(out_dir, tensors: Mapping | Iterable, *, model_name: str = "", architecture: str = "",
                  metadata: dict | None = None, max_shard_bytes: int | None = None, max_part_shards: int = 4,
                  base_url: str | None = None, cache: dict | None = None, tensor_hash: bool = True,
                  uuid: bytes | None = None, progress: bool | None = None) -> str:
    """Write an AEROSET directory atomically: the whole set is written into a temporary
    directory beside ``out_dir`` and renamed into place, so no half-written set is ever visible
    under the final name.  Parts are AERO files naming their WTSH chunks with global shard ids.
    The index is version [0, 1], or [0, 2] when ``base_url`` or ``cache`` hints are given.
    ``metadata`` (JSON values, or a reader's metadata of any format) is written once, in
    index.aero's MJSN; the index's ``model`` map holds the spec's ``name`` (``model_name``) and
    ``architecture``, as does every part's MJSN -- a model's large metadata (a tokenizer's
    vocabulary) is neither repeated in each part nor in the JSON index.
    ``model_name=``/``architecture=`` are shorthands for those keys (a conflict is a UsageError).  ``out_dir`` named ``*.aeroset.json``
    (and not an existing directory) is the index itself: the set is its directory and the index
    keeps that name (else ``model.aeroset.json``).  Returns the set's directory."""
    given = os.fspath(out_dir)
    refuse_url(given)
    index_name, as_index = "model.aeroset.json", given.endswith(S.INDEX_SUFFIX) and not os.path.isdir(given)
    if as_index:
        index_name, out_dir = os.path.basename(given), os.path.dirname(os.path.abspath(given))
    if max_part_shards < 1:
        raise E.UsageError("max_part_shards must be positive")
    if base_url is not None and not is_url(base_url):
        raise E.UsageError("base_url must be an http:// or https:// URL")
    meta = common_metadata(metadata, model_name=model_name, architecture=architecture)
    if "name" in meta:  # (the index's "name" is model_name: a key of that name would come back as it)
        raise E.UsageError("metadata key 'name': an AEROSET index keeps the model's name under 'name' "
                           "(give it as model_name); nothing was written")
    # (the index's model map holds those of name and architecture given, "" included, and no others)
    model = {"name": meta["model_name"]} if "model_name" in meta else {}
    model.update({k: meta[k] for k in ("architecture",) if k in meta})
    common = {k: meta[k] for k in ("model_name", "architecture") if k in meta}
    model_name, architecture = meta.get("model_name", ""), meta.get("architecture", "")
    items = A.prepare(tensors)
    sizes = A.plan_shards(items, max_shard_bytes)
    n_parts = -(-len(sizes) // max_part_shards)
    out_dir = os.path.abspath(os.fspath(out_dir))
    parent = os.path.dirname(out_dir)
    try:
        os.makedirs(parent, exist_ok=True)
        with locked_dir(parent):  # refuse before any work (the lock: no other writer is replacing it meanwhile)
            proven = _replaceable(out_dir)
        remove_stale_temps(out_dir)
        tmp = tempfile.mkdtemp(prefix=temp_prefix(out_dir), dir=parent)
    except OSError as e:
        raise os_error(out_dir, e) from None
    try:
        give_default_mode(tmp, directory=True)
        parts, entries = [], []
        part_of = [it.shard // max_part_shards for it in items]
        for k in range(n_parts):
            first = k * max_part_shards
            ids = list(range(first, min(first + max_part_shards, len(sizes))))
            mine = [it for it, pk in zip(items, part_of) if pk == k]
            name = f"part-{k:03d}.aero"
            # each part's sha256 is taken from the bytes as they are written (no read-back), and
            # its TIDX entries are what it wrote (index.aero lists them: no re-open)
            w = A.write_aero_file(os.path.join(tmp, name), mine, uuid=uuid, metadata=common or None,
                                  max_shard_bytes=max_shard_bytes,
                                  tensor_hash=tensor_hash, progress=progress, first_shard=first,
                                  file_digest=links.digest_of(S.FILES), atomic=False)
            parts.append({"path": name, S.FILES.digest: w.digest, S.FILES.size: w.size, "shards": ids})
            entries += w.entries
        blob = A.index_only(entries, model_name=model_name, architecture=architecture, uuid=uuid,
                            metadata=meta if len(meta) > len(common) else None)
        with new_file(os.path.join(tmp, "index.aero")) as f:  # (tmp is installed as a whole)
            write_all(f, blob)
        index_ref = links.digest_of(S.FILES)
        index_ref.update(blob)
        index = {"format": {"name": S.FORMAT, "version": [0, 2] if (base_url or cache) else [0, 1]},
                 "model": model}
        if base_url:
            index["base_url"] = base_url
        index["parts"] = parts
        index["global_tidx"] = {"path": "index.aero", S.FILES.digest: index_ref.hexdigest(), S.FILES.size: len(blob)}
        if cache:
            index["cache"] = cache
        with new_file(os.path.join(tmp, index_name)) as f:
            write_all(f, (json.dumps(index, indent=2) + "\n").encode("utf-8"))
        fsync_dir(tmp)
        _install(tmp, out_dir, proven)
    except BaseException as e:
        shutil.rmtree(tmp, ignore_errors=True)
        if isinstance(e, OSError):  # (no space left, permission denied...: named by the set, not a temporary)
            raise os_error(out_dir, e) from None
        raise
    return out_dir


def _replaceable(out_dir: str, proven: dict | None = None) -> dict | None:
    """What replacing ``out_dir`` would remove: None (nothing there), else {name: identity} of
    the files of the set there, each proven to be one a set writer wrote (see
    :func:`_not_written_by_us`).  Refused with a UsageError: a non-directory, a symlink, a
    non-empty directory without one readable AEROSET index, a set directory holding files its
    index does not list, and a listed file not proven a set's (a file of the user's that an
    index merely names is never deleted).  ``proven``: an earlier answer, whose files are not
    hashed again while they are unchanged."""
    if not os.path.lexists(out_dir):
        return None
    if os.path.islink(out_dir) or not os.path.isdir(out_dir):
        raise E.UsageError(f"{out_dir}: exists and is not a directory: refusing to replace it with a set")
    try:
        names = set(os.listdir(out_dir))
    except OSError as e:
        raise E.UsageError(f"{out_dir}: cannot list the directory to replace: {e.strerror or e}") from None
    if not names:
        return {}
    idx = [n for n in names if n.endswith(S.INDEX_SUFFIX)]
    refs = None
    if len(idx) == 1:
        try:
            with open_regular(os.path.join(out_dir, idx[0]), "AEROSET index", nofollow=True) as f:
                obj = json_loads(f.read(S.MAX_INDEX_BYTES + 1).decode("utf-8"))
            if isinstance(obj, dict) and (obj.get("format") or {}).get("name") == S.FORMAT:
                refs = [r for _, r in links.entries(S.FILES, obj, "index") if isinstance(r.get(S.FILES.path), str)]
        except (E.ModelcodecError, ValueError, AttributeError, TypeError, RecursionError):
            refs = None
    if refs is None:
        raise E.UsageError(f"{out_dir}: a non-empty directory that is not an AEROSET (no readable "
                           f"*{S.INDEX_SUFFIX} index): refusing to replace it")
    listed = {idx[0]} | {r[S.FILES.path] for r in refs}
    extra = sorted(names - listed)
    if extra:
        raise E.UsageError(f"{out_dir}: the set directory also holds files its index does not list "
                           f"({', '.join(extra[:5])}{' ...' if len(extra) > 5 else ''}): refusing to replace it")
    owned = {idx[0]: _identity(os.path.join(out_dir, idx[0]))}
    for ref in refs:
        name = ref[S.FILES.path]
        if name not in names or name in owned:
            continue  # (a listed file that is not there: nothing to remove)
        why = _not_written_by_us(os.path.join(out_dir, name), ref, (proven or {}).get(name))
        if why is not None:
            raise E.UsageError(f"{out_dir}: {name}, listed by its index {idx[0]}, {why}: it may be a file of "
                               "yours, refusing to replace the set (and delete it)")
        owned[name] = _identity(os.path.join(out_dir, name))
    return owned


def _identity(path: str) -> tuple | None:
    try:
        st = os.lstat(path)
    except OSError:
        return None
    return st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns


def _not_written_by_us(path: str, ref: dict, known: tuple | None) -> str | None:
    """Why the file ``ref`` lists is not provably a part a set writer wrote (None: it is): a
    regular file of the size the index gives, with the sha256 it gives -- or, for an index
    without one, an AERO file."""
    try:
        st = os.lstat(path)
    except OSError as e:
        return f"cannot be examined ({e.strerror or e})"
    if not stat.S_ISREG(st.st_mode):
        return "is not a regular file"
    want, size = ref.get(S.FILES.digest), ref.get(S.FILES.size)
    if size is not None and st.st_size != size:
        return f"is {st.st_size} bytes, the index says {size!r}"
    if known is not None and known == _identity(path):
        return None
    try:
        if isinstance(want, str):
            digest, _ = links.digest_file(S.FILES, path)
            return None if digest == want.lower() else f"does not have the {S.FILES.algorithm} the index gives"
        with open_regular(path, "listed file", nofollow=True) as f:
            return None if A.DESCRIPTOR.detect(f.read(16)) else "is not an AERO file"
    except E.ModelcodecError as e:
        return f"cannot be read ({e})"


def _install(tmp: str, out_dir: str, proven: dict | None) -> None:
    """Put the finished set ``tmp`` at ``out_dir``: renamed into place, or swapped atomically
    with the set there (readers see the old set or the new one, never a mix), under a lock on
    the parent so concurrent writers take turns; the old set's files (those proven ours, checked
    again under the lock) are then removed, and its directory if nothing else is left in it."""
    parent = os.path.dirname(out_dir)
    with locked_dir(parent):
        owned = _replaceable(out_dir, proven)
        if owned is None:
            os.rename(tmp, out_dir)
        elif exchange(tmp, out_dir):
            _remove(tmp, owned)  # the old set, now under the temp name
        else:  # no RENAME_EXCHANGE: a brief moment with no set, never a mixed one
            old = tempfile.mkdtemp(prefix=temp_prefix(out_dir), dir=parent)
            os.rename(out_dir, os.path.join(old, "set"))
            os.rename(tmp, out_dir)
            _remove(os.path.join(old, "set"), owned)
            _remove(old, {})
        fsync_dir(parent)


def _remove(d: str, owned: dict) -> None:
    """The files ``owned`` of the old set ``d``, then ``d`` if empty (whatever else is there stays)."""
    for name in owned:
        try:
            os.unlink(os.path.join(d, name))
        except FileNotFoundError:
            pass
    try:
        os.rmdir(d)
    except OSError:
        pass
