"""Copy a model -- one file, or every file of a model in several (a set, a sharded checkpoint) --
from wherever it can be read (a local path, http(s), object storage) to wherever it can be
written (a local folder, object storage): :func:`mirror` (``codec.mirror``, ``modelcodec mirror``).

Format-blind: the model's reader says which files there are and the size and sha256 its index
gives each (:meth:`codec.model.Reader.files`).  Every file is transferred into a staging folder
beside the destination (``.NAME.modelcodec-mirror``), checked against the index's size and
sha256 as its bytes arrive and kept only once it checks out; once every file has, each is moved
to its final name, the index last.  So a reader of the destination never finds an index naming a
file that is missing or unverified, and a source file that does not check out leaves nothing at
the destination.  Run again after being killed, a mirror transfers only what is missing: a file
already at the destination or staged that checks out is not transferred again; one half written
to a local folder continues from where it stopped (and is restarted, alone, if the whole does
not check out); one half uploaded to object storage restarts (the store never shows it).

A mirror never replaces what it did not write unless told: before anything is transferred, every
name the model's files take at the destination is looked at.  Nothing there: the file is copied.
A file (or a symbolic link to one) holding the bytes the source's would give -- its size and
sha256 as the index gives them, or, where the index gives no hash, as the source file's own
bytes hash -- is kept as it is and counted up to date.  Anything else there (other bytes, a
dangling link) is refused, every such name in one UsageError, unless ``overwrite=True``; then
it is replaced atomically as a new file is published (a link itself, never the file it leads
to).  A folder, a FIFO, a device or a socket at a file's name, or a link on the way to it, is
refused even then.  A file an earlier mirror wrote is no different: kept while it matches the
source, refused once the source has changed (nothing at the destination records who wrote a
file; ``overwrite=True`` updates such a copy).  Without it, a file put at one of those names
after the look is not replaced either: each file takes its name only if nothing has it then
(:meth:`~codec.io.store.Store.move` with ``replace=False``), and what is there is looked at as
before -- the source's bytes kept, anything else refused naming it, the files not published yet
dropped from the staging folder and the index not published.
"""
from __future__ import annotations

import contextlib
import inspect
import os
import threading
from concurrent.futures import ThreadPoolExecutor
from urllib.parse import unquote, urlsplit

from .. import errors as E
from .. import registry
from ..engine.records import raise_first
from ..io.open_store import store_for
from ..io.integrity import sha256
from ..io.store import Store, is_url, local_path, scheme_of
from ..ui.progress import Progress
from .mirror_check import PIECE, Bytes, Hashed, checks_out, sha256_of, source_sha256, verdict, wrong

#: the staging folder's name ends with this
STAGE = ".modelcodec-mirror"
#: files transferred at once (and ranges of one file read at once) unless told
JOBS = 4


class Mirrored(str):
    """Where the model is now (its index, or the file), with ``pulled`` (the bytes read from the
    source), ``copied`` and ``skipped`` (the names of the files transferred, and of those already
    there with the same bytes, kept as they were), and ``replaced`` (the names where other bytes
    were replaced, with ``overwrite=True``)."""
    pulled: int = 0
    copied: list
    skipped: list
    replaced: list


def mirror(src, dst, *, jobs: int | None = None, storage_options: dict | None = None,
           dst_storage_options: dict | None = None, overwrite: bool = False, progress: bool | None = None,
           _outcome: str | None = None) -> Mirrored:
    """Copy the model at ``src`` (a file, or a set: its folder, index or URL) to ``dst`` (a set:
    the folder it goes to; a file: its new name, or a folder -- an existing directory, or a
    name ending with "/").  ``jobs``: files transferred at once (default 4; a file alone is read
    in that many ranges at once).  ``storage_options`` reach an object-storage URL on either
    side; ``dst_storage_options``, when given, the destination's.  Every file is checked against
    the size and sha256 its index gives before it is published under its final name, the index
    last; a file that does not check out is an :class:`~codec.errors.IntegrityError` naming it,
    and nothing is published.  Run again, a mirror that was interrupted transfers only what is
    missing.  A file already at the destination with the same bytes is kept (``skipped``); one
    with other bytes is a UsageError naming it before anything is transferred (or, put there
    while the mirror runs, when its file is published: never replaced), unless
    ``overwrite=True`` (then it is replaced atomically, and named in ``replaced``); a folder,
    FIFO, device or socket there, or a symbolic link on the way, is always refused (see the
    module's docstring)."""
    if not isinstance(overwrite, bool):
        raise E.UsageError(f"overwrite must be True or False (got {overwrite!r})")
    if jobs is not None and (isinstance(jobs, bool) or not isinstance(jobs, int) or jobs < 1):
        raise E.UsageError(f"jobs must be a positive number of transfers at once (got {jobs!r})")
    jobs = jobs or JOBS
    src, dst = (_given(v, what) for v, what in ((src, "src"), (dst, "dst")))
    dst_so = storage_options if dst_storage_options is None else dst_storage_options
    for given, where in ((storage_options, (src, dst)), (dst_storage_options, (dst,))):
        if given is not None and not any(_fsspec_only(u, given) is given for u in where):
            raise E.UsageError(f"storage_options= is for object-storage URLs (s3://, gs://, ...), and "
                               f"{' and '.join(where)} is none")
    files, fmt = _plan(src, _fsspec_only(src, storage_options))
    single = files is None
    if single:
        files = [{"name": _last(src), "source": src, "size": None, "sha256": None, "where": "file", "rule": None}]
    files = list({f["name"]: f for f in files}.values())  # (a file the index names twice is copied once)
    folder, stage, name = _places(dst, files[-1]["name"], single)
    if single:
        files[0]["name"] = name
    src_store = store_for(src, storage_options=_fsspec_only(src, storage_options))
    dst_store = store_for(dst, storage_options=_fsspec_only(dst, dst_so))
    try:
        if not dst_store.supports_writes:
            raise E.UsageError(f"{dst}: an http(s) URL is not a destination (mirror to a local folder or object "
                               "storage)")
        dst_store.check(dst, "the destination")
        return _run(src_store, dst_store, files, fmt, folder, stage, jobs, progress,
                    _outcome or f"nothing was published at {folder}", overwrite)
    finally:
        src_store.close()
        dst_store.close()


@contextlib.contextmanager
def local_copy(src: str, *, storage_options: dict | None = None, progress: bool | None = None):
    """For work on a whole model in several files that cannot be read where it is in ranges (a
    server without Range requests): the model at ``src`` copied into a temporary folder by
    :func:`mirror` -- every file checked against the size and sha256 its index gives before it
    is kept (a file that does not check out is an IntegrityError naming it) -- as (the copy's
    index, the folder); the folder is removed after."""
    import shutil
    import tempfile
    d = tempfile.mkdtemp(prefix="modelcodec-remote-")
    try:
        folder = os.path.join(d, "model")
        out = mirror(src, folder, storage_options=storage_options, progress=progress,
                     _outcome="nothing of it was used")
        yield str(out), folder
    finally:
        shutil.rmtree(d, ignore_errors=True)


def _given(v, what: str) -> str:
    if not isinstance(v, (str, os.PathLike)):
        raise E.UsageError(f"{what} must be a path or URL, not {type(v).__name__}")
    return local_path(os.fspath(v))


def _fsspec_only(url: str, options: dict | None) -> dict | None:
    """``storage_options`` for the side they are for (an fsspec URL), None for the other."""
    return options if is_url(url) and scheme_of(url) not in ("http", "https") else None


def _last(url: str) -> str:
    """A file's own name, from its path or URL."""
    name = unquote(urlsplit(url).path).rsplit("/", 1)[-1] if is_url(url) else os.path.basename(url)
    if not name or name in (".", ".."):
        raise E.UsageError(f"{url}: names no file to copy")
    return name


def _plan(src: str, storage_options: dict | None) -> tuple[list | None, str]:
    """The files of the model at ``src`` (None: one file) and its format's name, from its
    reader (which checks the index on the way)."""
    entry = registry.claiming(src)
    if entry is None:
        if not is_url(src) and os.path.isdir(src):
            raise E.UsageError(f"{src}: a directory that holds no model in several files")
        return None, "file"
    takes = inspect.signature(entry.reader).parameters
    opts = {"cache": False} if "cache" in takes else {}
    if storage_options and "storage_options" in takes:
        opts["storage_options"] = storage_options
    from ..io.remote import NoRangeError
    try:
        with entry.reader(src, **opts) as r:
            return r.files(), getattr(r, "FMT", entry.name)
    except NoRangeError:
        pass
    # a server without Range requests: the files as the index lists them (what needed ranges
    # is checked in the copy: every file against the index's size and sha256)
    with entry.reader(src, _collect=True, **opts) as r:
        raise_first([v for v in getattr(r, "_structure", []) if not isinstance(v, NoRangeError)])
        return r.files(), getattr(r, "FMT", entry.name)


def _join(folder: str, name: str) -> str:
    return folder.rstrip("/") + "/" + name if is_url(folder) else os.path.join(folder, name)


def _places(dst: str, name: str, single: bool) -> tuple[str, str, str]:
    """(the folder the files go to, the staging folder beside it, the file's name -- a set's
    index keeps its own)."""
    url = is_url(dst)
    into = dst.endswith("/") or (not url and os.path.isdir(dst)) or (url and "/" not in dst.split("://", 1)[1])
    if not url:
        dst = os.path.abspath(dst)
        if not single and os.path.lexists(dst) and not os.path.isdir(dst):
            raise E.UsageError(f"{dst}: exists and is not a directory (a set is mirrored into a folder)")
    dst = dst.rstrip("/") or dst
    if single and not into:
        folder, name = dst.rsplit("/", 1) if url else os.path.split(dst)
        return folder, _join(folder, f".{name}{STAGE}"), name
    if single:
        return dst, _join(dst, f".{name}{STAGE}"), name
    head, base = dst.rsplit("/", 1) if url else os.path.split(dst)
    if url and "/" not in dst.split("://", 1)[1].strip("/"):
        raise E.UsageError(f"{dst}: a set is mirrored into a folder inside the bucket, not the bucket itself")
    return dst, _join(head, f".{base}{STAGE}"), name


def _run(src_store: Store, dst_store: Store, files: list, fmt: str, folder: str, stage: str, jobs: int,
         progress, outcome: str, overwrite: bool = False) -> Mirrored:
    """``outcome``: what a file that does not check out leaves (said in its error)."""
    from ..io.remote import NoRangeError
    pulled = Bytes()
    local = not is_url(folder)
    skipped, todo, replaced, refused = [], [], [], []
    bare = [f["name"] for f in files if f["sha256"] is None]
    no_range = threading.Event()  # (the source's server answered a Range request with the whole file)
    stream_one = False
    for f in files:
        if f["size"] is None and not no_range.is_set():
            try:
                f["size"] = src_store.size(f["source"])
            except NoRangeError:
                if not hasattr(src_store, "download"):
                    raise
                if len(files) == 1:
                    stream_one = True
                else:
                    no_range.set()  # (an index that gives no sizes: each file streamed, as long as it is)
                    _note(f"{files[-1]['source']}: the server does not support Range requests: downloading each "
                          "file once, in one stream")
        final, staged = _join(folder, f["name"]), _join(stage, f["name"])
        there = _there(src_store, dst_store, f, folder, final, pulled)
        if there == "same":
            skipped.append(f["name"])
            f["at"] = None  # (already in place)
            continue
        if there is not None:
            (replaced if overwrite and there[1] else refused).append((f["name"], there))
        f["at"], f["final"] = staged, final
        if checks_out(dst_store, staged, f):
            skipped.append(f["name"])
        else:
            todo.append(f)
    if refused:
        _refuse(folder, refused)
    if stream_one and todo:
        return _streamed(src_store, dst_store, files[0], folder, stage, progress, [n for n, _ in replaced], overwrite)
    if bare and not (len(files) == 1 and files[0]["rule"] is None):
        import sys
        print(f"modelcodec: note: the index gives no sha256 for {len(bare)} file(s) ({bare[0]}"
              f"{', ...' if len(bare) > 1 else ''}): copied without a hash to check them against", file=sys.stderr)
    window = PIECE * max(1, jobs // max(1, min(jobs, len(todo))))
    said = threading.Lock()
    with Progress(sum(f["size"] or 0 for f in todo), f"mirror {_last(files[-1]['source'])[-40:]}", enabled=progress) as bar:
        def transfer(f: dict) -> None:
            if not no_range.is_set():
                try:
                    return ranged(f)
                except NoRangeError:
                    if not hasattr(src_store, "download"):
                        raise
                    with said:
                        if not no_range.is_set():
                            _note(f"{files[-1]['source']}: the server does not support Range requests: downloading "
                                  "each file once, in one stream")
                            no_range.set()
            _stream_file(src_store, dst_store, f, local, fmt, outcome, bar.update, pulled)

        def ranged(f: dict) -> None:
            def pull(start: int):
                size = f["size"]
                for w in range(start, size, window):
                    spans = [(a, min(PIECE, size - a)) for a in range(w, min(w + window, size), PIECE)]
                    for b in src_store.fetch([(f["source"], a, n, size) for a, n in spans], progress=bar.update):
                        pulled.add(len(b))
                        yield b
            (_to_folder if local else _to_store)(dst_store, f, pull, fmt, outcome)
        failures = []
        with ThreadPoolExecutor(max(1, min(jobs, len(todo)))) as pool:
            for fut in [pool.submit(transfer, f) for f in todo]:
                try:
                    fut.result()
                except BaseException as e:  # noqa: BLE001 - the first is raised once all have ended
                    failures.append(e)
        if failures:
            raise failures[0]
    kept = _publish(src_store, dst_store, files, folder, stage, overwrite, pulled)
    if local:
        _tidy(stage)
    out = Mirrored(_join(folder, files[-1]["name"]))
    out.pulled, out.copied = pulled.n, [f["name"] for f in todo if f["name"] not in kept]
    out.skipped = skipped + [n for n in kept if n not in skipped]
    out.replaced = [n for n, _ in replaced]
    return out


#: how many names a refusal lists (then how many more there are)
SHOWN = 5


def _there(src_store: Store, dst_store: Store, f: dict, folder: str, final: str, pulled: Bytes):
    """What is at ``final``, the name the file ``f`` takes at the destination: None (nothing),
    "same" (the bytes the source's would give: kept), or (why it is not, whether
    ``overwrite=True`` may replace it)."""
    rel = f["name"].split("/")
    for i in range(1, len(rel)):  # (a folder of the model's on the way: never a link, a file...)
        kind = dst_store.kind(_join(folder, "/".join(rel[:i])))
        if kind not in (None, "folder"):
            return f"{'/'.join(rel[:i])} on the way is {_a(kind)}", False
    kind = dst_store.kind(final)
    if kind not in ("file", "link"):
        return kind and (_a(kind), False)

    def read(what):  # (a link is read through -- never written through: one to no regular file is not the file)
        try:
            return what()
        except E.ModelcodecError:
            if kind == "file":
                raise
            return None
    size, got = read(lambda: dst_store.size(final)), ""
    if size is not None and f["size"] in (None, size):
        want = (f["sha256"] or f.get("got") or "").lower() or source_sha256(src_store, f, pulled)  # (sets the size)
        got = read(lambda: sha256_of(dst_store, final, size)) if f["size"] in (None, size) else ""
        if got == want:
            return "same"
    if size is None or got is None:
        return _a(kind, "to no regular file"), True
    return _a(kind, ("to a file " if kind == "link" else "") + ("with other bytes" if f["size"] in (None, size) else
                                                                 f"of {size:,} bytes, not {f['size']:,}")), True


def _publish(src_store: Store, dst_store: Store, files: list, folder: str, stage: str, overwrite: bool,
             pulled: Bytes) -> list:
    """Every file that checked out moved from where it is staged to its final name, the index
    last: without ``overwrite`` never replacing what has the name then (:meth:`Store.move`
    with ``replace=False``), what appeared there since the check looked at again
    (:func:`_appeared`).  The names kept: files with the source's bytes put there meanwhile."""
    kept, done = [], []
    for i, f in enumerate(files):
        if f["at"] is None:
            continue
        if dst_store.move(f["at"], _join(folder, f["name"]), replace=overwrite):
            done.append(f["name"])
            continue
        _appeared(src_store, dst_store, f, folder, pulled, done, [g["at"] for g in files[i:] if g["at"]], stage)
        kept.append(f["name"])
    return kept


def _appeared(src_store: Store, dst_store: Store, f: dict, folder: str, pulled: Bytes, done: list, ours: list,
              stage: str | None) -> None:
    """The file ``f`` was not published: its name was taken after the check.  The source's
    bytes there: kept (``ours``, its staged copy first, dropped).  Else a UsageError naming it
    as the check would have (what is there is left as it is; ``ours`` -- the staged copies of
    what is not published yet -- removed; ``done`` were published before it)."""
    there = _there(src_store, dst_store, f, folder, _join(folder, f["name"]), pulled)
    for at in ours[:1] if there == "same" else ours:
        with contextlib.suppress(E.ModelcodecError, OSError):
            dst_store.delete(at)
    if there == "same":
        return
    if stage is not None and not is_url(folder):
        _tidy(stage)
    what = (f"; {len(done)} other file(s) of the model were published before it, not the rest (the index last)"
            if done else "; nothing was published")
    if there is None:
        raise E.UsageError(f"{folder}: {f['name']} was taken while the mirror ran and is free again: not published"
                           f"{what} (run the mirror again)")
    why, ok = there
    how = "(overwrite=True replaces it)" if ok else "even with overwrite=True"
    raise E.UsageError(f"{folder}: {f['name']} ({why}) was put there while the mirror ran, after the check: not "
                       f"replaced {how}{what}")


def _a(kind: str, what: str = "") -> str:
    said = {"file": "a file", "link": "a symbolic link", "folder": "a folder"}.get(kind, kind)
    return f"{said} {what}" if what else said


def _refuse(folder: str, refused: list) -> None:
    """One UsageError naming what is in the way: what is never replaced, else what
    overwrite=True would replace (refused only without it)."""
    never = [(n, why) for n, (why, ok) in refused if not ok]
    other = [(n, why) for n, (why, ok) in refused if ok]
    shown = never or other
    names = ", ".join(f"{n} ({why})" for n, why in shown[:SHOWN]) + (f", and {len(shown) - SHOWN} more"
                                                                      if len(shown) > SHOWN else "")
    if never:
        more = f"; {len(other)} more with other bytes (overwrite=True replaces those)" if other else ""
        raise E.UsageError(f"{folder}: in the way of the model's files, not replaced even with overwrite=True: "
                           f"{names}{more}; nothing was copied")
    raise E.UsageError(f"{folder}: already there with other bytes than the source's: {names}; nothing was copied "
                       "(overwrite=True replaces them)")


def _note(line: str) -> None:
    import sys
    print(f"modelcodec: note: {line}", file=sys.stderr)


def _streamed(src_store: Store, dst_store: Store, f: dict, folder: str, stage: str, progress,
              replaced: list, overwrite: bool) -> Mirrored:
    """A single file from a server without Range requests: one streamed download (said once),
    put in place atomically (a rerun downloads it again) -- in a local folder, from the staging
    folder (no other name beside it is touched)."""
    _note(f"{f['source']}: the server does not support Range requests: downloading the file whole in one stream")
    local = not is_url(folder)
    final = _join(folder, f["name"])
    f["at"], f["final"] = (_join(stage, f["name"]) if local else final), final
    pulled = Bytes()
    try:
        with Progress(0, f"mirror {f['name'][-40:]}", enabled=progress) as bar:
            put = _stream_file(src_store, dst_store, f, local, "file", f"nothing was published at {folder}",
                               bar.update, pulled, overwrite)
        if local:
            kept = _publish(src_store, dst_store, [f], folder, stage, overwrite, pulled)
        elif not put:
            _appeared(src_store, dst_store, f, folder, pulled, [], [], None)
        copied = [] if (local and kept) or not put else [f["name"]]
    finally:
        if local:
            _tidy(stage)  # (a stream is not resumed: nothing of it is kept)
    out = Mirrored(final)
    out.pulled, out.copied, out.skipped, out.replaced = pulled.n, copied, [f["name"]][len(copied):], replaced
    return out


def _stream_file(src_store: Store, dst_store: Store, f: dict, local: bool, fmt: str, outcome: str, progress,
                 pulled: Bytes, overwrite: bool = True) -> bool:
    """The file ``f`` on a server without Range requests: one streamed download (no more than
    the size its index gives), checked against that size and its sha256 (when it has them),
    then put where ``f["at"]`` says as a ranged transfer is -- renamed there from
    ``NAME.partial`` in a local folder, else uploaded from a temporary file (removed after).
    A file that does not check out is dropped; one cut off is downloaded again whole by a rerun
    (a stream cannot be resumed).  False: uploaded without ``overwrite``, and the name was
    taken (nothing uploaded)."""
    import shutil
    import tempfile
    d = None
    if local:
        path = f["at"] + ".partial"
    else:
        d = tempfile.mkdtemp(prefix="modelcodec-mirror-")
        path = os.path.join(d, "file")
    try:
        try:
            os.makedirs(os.path.dirname(path), exist_ok=True)
            with open(path, "wb") as out:
                w = Hashed(out, f["size"], lambda n: wrong(f, fmt, None, n, outcome))
                src_store.download(f["source"], w, progress=progress)
                out.flush()
                os.fsync(out.fileno())
            pulled.add(w.n)
            verdict(f, w.h, w.n, fmt, outcome)
            if local:
                os.replace(path, f["at"])
            else:
                return dst_store.put_file(f["at"], path, replace=overwrite)
        except OSError as e:
            raise _unwritable(f, path, e) from None
    except BaseException:
        if local:
            _drop(path)
        raise
    finally:
        if d is not None:
            shutil.rmtree(d, ignore_errors=True)
    return True


def _to_store(store: Store, f: dict, pull, fmt: str, outcome: str) -> None:
    """Uploaded under its staging name, the upload completed only once every byte checked out."""
    def chunks():
        h, n = sha256(), 0
        for b in pull(0):
            h.update(b)
            n += len(b)
            yield b
        verdict(f, h, n, fmt, outcome)  # (raised inside the upload: it is abandoned)
    store.put(f["at"], chunks())


def _to_folder(store: Store, f: dict, pull, fmt: str, outcome: str) -> None:
    """Written to ``NAME.partial`` in the staging folder, continuing a partial file left there
    when the index gives the file's sha256 (its bytes hashed first); renamed to its staging name once the whole checks out.  A resumed
    file that does not check out is transferred again from its first byte, once."""
    partial = f["at"] + ".partial"
    try:
        os.makedirs(os.path.dirname(partial), exist_ok=True)
        have = os.path.getsize(partial) if os.path.isfile(partial) else 0
    except OSError as e:
        raise _unwritable(f, partial, e) from None
    if have > f["size"] or f["sha256"] is None:
        have = 0  # (a file without a sha256 could not be checked whole: its half is not continued)
    for start in ((have, 0) if have else (0,)):
        h, n = sha256(), 0
        try:
            with open(partial, "r+b" if start else "wb") as out:
                while n < start:
                    b = out.read(min(PIECE, start - n))
                    h.update(b)
                    n += len(b)
                out.truncate(start)
                for b in pull(start):
                    out.write(b)
                    h.update(b)
                    n += len(b)
                out.flush()
                os.fsync(out.fileno())
        except OSError as e:
            raise _unwritable(f, partial, e) from None
        try:
            verdict(f, h, n, fmt, outcome)
        except E.IntegrityError:
            _drop(partial)
            if start:
                continue  # (the part left by an earlier run was not a prefix of it: from the start)
            raise
        try:
            os.replace(partial, f["at"])
        except OSError as e:
            raise _unwritable(f, f["at"], e) from None
        return


def _unwritable(f: dict, path: str, e: OSError) -> E.UsageError:
    """The destination the user named cannot be written (``path``: where it failed, the
    staging file beside it)."""
    final = f.get("final") or path
    where = "" if path == final else f" (writing {path})"
    return E.UsageError(f"{final}: cannot write: {e.strerror or e}{where}")


def _drop(path: str) -> None:
    try:
        os.remove(path)
    except OSError:
        pass


def _tidy(stage: str) -> None:
    """Remove the (now empty) staging folders of a local destination."""
    for d, _, _ in sorted(os.walk(stage), key=lambda x: -len(x[0])):
        try:
            os.rmdir(d)
        except OSError:
            pass
