"""AEROSET: a model in several AERO files, read from a local directory or over HTTP(S).

The index JSON is declared in :mod:`schemas.aeroset` and checked by :mod:`codec.engine.payload`; each
part and ``index.aero`` is read by :class:`codec.formats.aero.AeroReader`, parsed on first use
and once.  A tensor resolves as DECISIONS.md says: global shard id (index.aero's TIDX) -> the part
listing that shard -> the tensor by name in that part's TIDX.

Where the files are is a *store*: :class:`LocalFiles` (paths confined to the set's directory,
every file of one version held open from the set's open, files mapped) or
:class:`RemoteFiles` (http/https; see :mod:`codec.io.remote` for the checked, parallel, retried
Range requests and :mod:`codec.io.cache` for the disk cache).  Opening a remote
set reads the index JSON (one GET), then each file's control region once, when first needed:
``index.aero`` and a part's header + TOC + string table + metadata chunks usually come in one
Range request each, so a cold tensor costs three Range requests and a warm one none.
"""
from __future__ import annotations

import json
import os

from ...schemas import aeroset as S

from ...io.cache import RangeCache
from ...registry import FormatDescriptor
from .. import aero as A
from .common import FMT, check_url, find_index, is_url, listing, safe_join
from .reader import AeroSet, validate_file
from .stores import COALESCE_GAP, LocalFiles, RemoteFiles
from .update import update_set
from .writer import write_aeroset

__all__ = ["AeroSet", "COALESCE_GAP", "DESCRIPTOR", "FMT", "LocalFiles", "RemoteFiles", "check_url", "find_index",
           "is_url", "safe_join", "update_set", "validate_file", "write_aeroset"]



def _claims(path: str) -> bool:
    """A set is named by its directory (one holding a *.aeroset.json), its index or the
    index's URL, or on object storage the URL of its folder (ending with "/")."""
    if "://" in path:  # an index's URL (any other URL is a single file)
        from urllib.parse import urlsplit
        try:
            u = urlsplit(path)
        except ValueError:
            return False
        return u.path.endswith(S.INDEX_SUFFIX) or (path.endswith("/") and not is_url(path))
    if path.endswith(S.INDEX_SUFFIX):
        return True
    try:
        return os.path.isdir(path) and any(f.endswith(S.INDEX_SUFFIX) for f in listing(path))
    except OSError:
        return False


def _demo(out_dir: str, model: dict) -> list:
    """A set of several parts, shown from its directory, then read over HTTP Range requests
    (with a disk cache) and validated by its URL."""
    from ..hooks import DemoStep, serve
    set_dir = os.path.join(out_dir, "tiny-mlp-set")
    write_aeroset(set_dir, model, model_name="tiny-mlp", architecture="mlp", max_shard_bytes=16 * 1024,
                  max_part_shards=2)

    def remote() -> tuple[bool, str]:
        with serve(out_dir) as base:
            url = f"{base}/{os.path.basename(set_dir)}/model.aeroset.json"
            with AeroSet(set_dir) as local, AeroSet(url, cache=RangeCache(set_dir + "-cache")) as far:
                got = far.read_tensors(list(local.tensors))
                same = all(got[n].tobytes() == local.tensor(n).tobytes() for n in local.tensors)
                line = (f"{url}\nread {len(got)} tensors remotely with {far.store.http.stats['range_requests']} "
                        f"Range requests: {'identical to the local copy' if same else 'DIFFERENT FROM THE LOCAL COPY'}")
            rep = AeroSet.validate_file(url, full=True)
            line += f"\nvalidate --full {url}: " + (f"AEROSET {rep.level} check passed" if rep.ok else
                                                    f"{len(rep.errors)} error(s)")
        return same and rep.ok, line

    return [DemoStep(f"$ modelcodec inspect-set {set_dir}", ["inspect-set", set_dir]),
            DemoStep(f"$ modelcodec validate --full {set_dir}", ["validate", "--full", set_dir]),
            DemoStep("# the same set served over HTTP", call=remote)]


def cmd_inspect_set(a) -> int:
    """``modelcodec inspect-set``: the index, the parts and their shards, and every tensor."""
    from ...ui.display import MAX_ROWS, fmt_shape, json_default, json_text, reader_options, shortened
    with AeroSet(a.set, **reader_options(a)) as s:
        d = s.describe()
        if a.json:
            d["tensors"] = [{"name": n, "dtype": s.tensors[n].common_dtype, "format_dtype": s.tensors[n].dtype_name,
                             "shape": list(s.tensors[n].shape),
                             "nbytes": s.tensors[n].nbytes, "part": os.path.basename(s.tensors[n].extra["part"])}
                            for n in s.tensors]
            print(json_text(d, indent=2))
            return 0
        print(f"{s.index_path}: AEROSET {d['version']}")
        if d.get("metadata"):
            print("  model     " + shortened(json.dumps(d["metadata"], ensure_ascii=False, default=json_default), a.all))
        print(f"  parts     {len(d['parts'])}")
        for p in d["parts"]:
            print(f"    {p['path']:<24} shards {p['shards']}  {p['size_bytes'] or 0:,} B")
        print(f"  tensors   {len(s.tensors)}")
        names = list(s.tensors)
        shown = names if a.all else names[:MAX_ROWS]
        w = max([len(n) for n in shown] + [4])
        for n in shown:
            t = s.tensors[n]
            print(f"    {n:<{w}}  {t.dtype_name:<8} {fmt_shape(t.shape):<18} {t.nbytes:>12,} B  "
                  f"{os.path.basename(t.extra['part'])}")
        if len(shown) < len(names):
            print(f"    ... {len(names) - len(shown)} more (--all to list every tensor)")
    return 0


def _commands(sub) -> None:
    s = sub.add_parser("inspect-set", help="show an AEROSET: parts, shards and tensors")
    s.add_argument("set", help="the set's directory, its *.aeroset.json, or the index's http(s) URL")
    s.add_argument("--json", action="store_true")
    s.add_argument("--all", action="store_true")
    s.add_argument("--remote", action="store_true", help="read a local index's files from its base_url")
    s.set_defaults(func=cmd_inspect_set)


def _cgen() -> list:
    """The index's declarations go into the C++ reader's header beside AERO's."""
    from ..hooks import CgenSpec
    return [CgenSpec("cpp/include/aero/generated.hpp", "schema_aeroset", S, order=1)]


DESCRIPTOR = FormatDescriptor("aeroset", S, AeroSet, write_aeroset, validate=AeroSet.validate_file, claims=_claims,
                              commands=_commands, demo=_demo, update=update_set, directory=True, cgen=lambda: _cgen(),
                              capabilities=A.CAPABILITIES,
                              suffixes=(S.INDEX_SUFFIX,),
                              summary="multi-file AERO: an index JSON, parts, local or over HTTP Range requests")
