"""The library's entry points that take a path, URL or buffer: :func:`open`, :func:`validate`
and :func:`write` (re-exported by :mod:`codec`, where users call them)."""
from __future__ import annotations

import contextlib
import functools
import inspect
import os

from . import errors
from .errors import UsageError
from .io.store import is_url, local_path
from .model import Reader, Report


def open(path_or_buffer, *, strict: bool = True, format: str | None = None, **options) -> Reader:
    """Open a model file (path, http(s) URL, or any bytes-like buffer) and return its reader.
    ``options`` go to the detected format's reader (its keyword arguments, e.g. a multi-file
    model's remote, base_url, cache, http, max_tensor_bytes; a single file's URL: http,
    max_tensor_bytes, see :mod:`codec.remote_file`); an option that reader does not take is a
    UsageError.  ``modelcodec formats`` lists the formats."""
    from . import registry
    path_or_buffer = local_path(path_or_buffer)
    if is_url(path_or_buffer) and registry.claiming(path_or_buffer) is None:  # one file not here
        from .remote_file import RemoteFile  # (here only: its HTTP client is no local open's import)
        r = RemoteFile(path_or_buffer, strict=strict, format=format, **_options_for(RemoteFile, "remote file", options))
    else:
        entry = registry.resolve(path_or_buffer, format)
        r = entry.reader(path_or_buffer, strict=strict, **_options_for(entry.reader, entry.name, options))
    if isinstance(path_or_buffer, (str, os.PathLike)):  # (it pickles as this: Reader.__reduce__)
        where = path_or_buffer if is_url(path_or_buffer) else os.path.abspath(path_or_buffer)
        r._opened_by = (open, where, dict(options, strict=strict, format=format))
    return r


@contextlib.contextmanager
def open_whole(path_or_buffer, progress: bool | None = None, *, strict: bool = True, format: str | None = None,
               **options):
    """A reader for work that reads every tensor (load, convert): as :func:`open`, but a file
    that is not here is first fetched whole into a temporary file -- in large parallel
    ranges, or, from a server without Range requests, with one streamed download."""
    from . import registry
    path_or_buffer = local_path(path_or_buffer)
    if is_url(path_or_buffer) and registry.claiming(path_or_buffer) is None:
        from .remote_file import RemoteFile
        with RemoteFile.opened_whole(path_or_buffer, progress=progress, strict=strict, format=format,
                                     **_options_for(RemoteFile, "remote file", options)) as r:
            yield r
        return
    try:
        opened = open(path_or_buffer, strict=strict, format=format, **options)
    except errors.RemoteError as e:
        if not _no_range(e):
            raise
        opened = None
    if opened is not None and is_url(path_or_buffer) and getattr(opened, "COPIED_WHOLE", False):
        opened.close()  # (a model in several files with no hashes: its files copied here, checked, then read)
        opened = None
    if opened is None:  # a model in several files on a server without Range requests: copied here first
        from .formats.mirror import local_copy
        with local_copy(path_or_buffer, storage_options=options.get("storage_options"), progress=progress) as (
                index, folder), open(index, strict=strict, format=format) as r:
            r.source = path_or_buffer
            try:
                yield r
            except errors.FormatError as e:  # (it names the file at its URL, not the copy's)
                raise _at_url(e, folder, path_or_buffer)
        return
    with opened, opened.whole(progress) as r:
        yield r


def _no_range(e) -> bool:
    """Whether ``e`` says the server does not answer Range requests (a limitation of the server)."""
    from .io.remote import NoRangeError
    return isinstance(e, NoRangeError)


def _at_url(e: errors.FormatError, folder: str, url: str) -> errors.FormatError:
    """A finding in a local copy (in ``folder``) of the model at ``url``, naming the files at
    their URLs (beside the index's)."""
    base = url.split("?", 1)[0].rsplit("/", 1)[0]
    for x in [e, *e.consequences]:
        x.message = x.message.replace(folder + os.sep, base + "/")
        if x.source is not None and x.source.startswith(folder + os.sep):
            x.source = base + "/" + os.path.relpath(x.source, folder).replace(os.sep, "/")
    return e


@functools.lru_cache(maxsize=None)
def _options_of(reader) -> frozenset:
    """The options a reader takes: its keyword-only parameters but ``strict`` and private ones."""
    params = inspect.signature(reader).parameters
    return frozenset(p for p, v in params.items() if v.kind == v.KEYWORD_ONLY and not p.startswith("_")) - {"strict"}


def reader_options(path_or_buffer) -> frozenset:
    """The options the reader :func:`open` gives ``path_or_buffer`` takes (none when its reader
    cannot be told: opening it says why)."""
    from . import registry
    path_or_buffer = local_path(path_or_buffer)
    if is_url(path_or_buffer) and registry.claiming(path_or_buffer) is None:
        from .remote_file import RemoteFile
        return _options_of(RemoteFile)
    try:
        return _options_of(registry.resolve(path_or_buffer).reader)
    except errors.ModelcodecError:
        return frozenset()


def _options_for(reader, name: str, options: dict) -> dict:
    """``options`` if the reader takes every one of them (by its signature), else UsageError."""
    taken = _options_of(reader)
    extra = sorted(set(options) - taken)
    if extra:
        raise UsageError(f"the {name} reader takes no option {', '.join(map(repr, extra))}"
                         + (f" (its options: {', '.join(sorted(taken))})" if taken else " (it has none)"))
    return options


def validate(path_or_buffer, *, full: bool = False, control: bool = False, strict: bool = True,
             format: str | None = None, progress: bool | None = None, **options) -> Report:
    """Check a file and return a :class:`Report` listing every violation (never raises for bad
    data, except when no format recognises the bytes, or a remote index cannot be fetched).
    ``options`` as for :func:`open`."""
    from . import registry
    path_or_buffer = local_path(path_or_buffer)
    if is_url(path_or_buffer) and registry.claiming(path_or_buffer) is None:  # one file over HTTP
        from .remote_file import RemoteFile
        return RemoteFile.validate_file(path_or_buffer, full=full, control=control, strict=strict, progress=progress,
                                        format=format, **_options_for(RemoteFile, "remote file", options))
    try:
        entry = registry.resolve(path_or_buffer, format)
    except errors.UnknownFormatError as e:  # not a model at all: a report, not an exception
        src = os.fspath(path_or_buffer) if isinstance(path_or_buffer, (str, os.PathLike)) else "<buffer>"
        return Report("?", src, "full" if full else "structure", [e.with_source(src)])
    reader = getattr(entry.validator, "__self__", None) or entry.reader
    if full and is_url(path_or_buffer) and getattr(reader, "COPIED_WHOLE", False):
        _options_for(reader, entry.name, options)
        return _validated_copy(path_or_buffer, entry, Report(entry.name, path_or_buffer, "full"), control, strict,
                               progress, options, "remote: every file was copied here (parallel ranges) and checked "
                               "against its index before it was validated here")
    rep = entry.validator(path_or_buffer, full=full, control=control, strict=strict, progress=progress,
                          **_options_for(reader, entry.name, options))
    if full and is_url(path_or_buffer) and any(_no_range(v) for v in rep.violations):
        # (every file is read whole anyway: each downloaded once in one stream)
        return _validated_copy(path_or_buffer, entry, rep, control, strict, progress, options)
    return rep


def _validated_copy(url: str, entry, first: Report, control: bool, strict: bool, progress, options: dict,
                    note: str | None = None) -> Report:
    """Full validation of a model in several files on a server without Range requests: every
    file copied here (:func:`codec.formats.mirror.local_copy`: each checked against the size
    and sha256 its index gives before it is kept), then validated there, the findings naming
    the URLs.  A file that does not check out is the finding."""
    from .formats.mirror import local_copy
    try:
        with local_copy(url, storage_options=options.get("storage_options"), progress=progress) as (index, folder):
            rep = entry.validator(index, full=True, control=control, strict=strict, progress=progress)
            for v in rep.violations:
                _at_url(v, folder, url)
            rep.source = url
    except errors.FormatError as e:
        rep = Report(first.format, url, "full", [e], strict=strict)
    rep.notes.append(note or "remote: the server does not support Range requests: every file was downloaded once, "
                     "in one stream, and checked against its index (size, and sha256 where it gives one) before it "
                     "was validated here")
    return rep


def write(path, tensors, *, format: str | None = None, storage_options: dict | None = None, **options) -> str:
    """Write ``tensors`` (mapping name -> array) to ``path``; the format comes from ``format``
    or the file name (the extensions ``modelcodec formats`` lists; a multi-file model by its
    index's suffix, written in that file's directory).  A quantized tensor is a
    :class:`Packed` (its bytes, logical shape and codec parameters).  ``options`` are the format
    writer's (see codec.formats.<fmt>): an option it does not take, or of another type than it
    declares, is a UsageError naming it.  An object-storage URL (s3://, gs://, memory://, ...;
    ``storage_options`` as for :func:`open`) is written through a local temporary file, then
    uploaded atomically (a set: its parts first, its index last); an http(s) URL is not a
    destination (UsageError)."""
    from . import registry
    from .io.writer_io import writer_options
    argument_order("write(path, tensors)", path, tensors)
    if is_url(path):
        return staged(path, format, storage_options, lambda local: write(local, tensors, format=format, **options))
    if storage_options is not None:
        raise UsageError(f"storage_options= is for URLs (s3://, gs://, ...), not the local path {path!r}")
    entry, target = registry.for_write(path, format)
    options = writer_options(entry.writer, entry.name, options)
    check_destination(entry, target)
    return entry.writer(target, tensors, **options)


def check_destination(entry, target: str) -> None:
    """Refuse, before a tensor is read, a destination the writer would refuse only when it
    installs the file -- after reading every tensor (a hash pass; a remote source downloaded):
    a format whose models are one file (it claims no index or directory name, and no directory
    is one of its models) writes exactly ``target``, whose directory must exist and which must
    not be a directory, a FIFO, a device or a socket (:func:`codec.io.atomic.check_target`).
    A model in several files makes its directories: nothing to check here."""
    from .io.atomic import check_target
    if not (entry.directory or entry.claims is not None):
        check_target(target)


def update_set(path, tensors, *, storage_options: dict | None = None, progress: bool | None = None) -> str:
    """Replace the values of the tensors ``tensors`` names (name -> array; a new dtype or shape
    is allowed) in the model in several files at ``path`` (a set: its folder, index, or URL on
    object storage), rewriting only the files that hold them and the index; every other file
    keeps its bytes.  Readers see the old model or the new one, never a mix.  Returns the index."""
    from . import registry
    argument_order("update_set(path, tensors)", path, tensors)
    path = local_path(os.fspath(path))
    entry = registry.claiming(path) if is_url(path) else registry.resolve(path)
    if entry is None or entry.update is None:
        raise UsageError(f"{path}: not a model whose tensors can be replaced in place (update_set takes a set: "
                         f"{', '.join(f.name for f in registry.formats() if f.update is not None)})")
    return entry.update(path, tensors, storage_options=storage_options, progress=progress)


def argument_order(call: str, path, tensors) -> None:
    """UsageError when a write's path and tensors come in each other's place (``codec.save``
    takes the tensors first, ``codec.write`` the path first): named so, not a TypeError."""
    from collections.abc import Mapping
    if not isinstance(path, (str, os.PathLike)) and isinstance(tensors, (str, os.PathLike)) \
            and isinstance(path, (Mapping, list, tuple)):
        raise UsageError(f"{call}: the arguments are swapped -- the path {os.fspath(tensors)!r} came where the "
                         f"tensors go and the tensors ({type(path).__name__}) where the path goes")
    if not isinstance(path, (str, os.PathLike)):
        raise UsageError(f"{call}: the path must be text or a path, not {type(path).__name__}")


def staging_name(url: str, root: str) -> str:
    """The local path under ``root`` a URL destination is written to first: its folder's name,
    then its own (a URL ending with "/" names a directory, and so does the local path) -- so
    that a file a writer puts beside its output lands beside it on the store too."""
    head, _, name = url.rstrip("/").rpartition("/")
    folder = head.split("://", 1)[-1].rstrip("/").rpartition("/")[2]
    if not name or name in (".", "..") or "://" not in head or folder in ("", ".", ".."):
        raise UsageError(f"{url}: not a destination (a file or folder name inside a bucket or folder)")
    return os.path.join(root, folder, name) + ("/" if url.endswith("/") else "")


def staged(url: str, format: str | None, storage_options: dict | None, write_local, mapped: list | None = None) -> str:
    """Write to the object-storage URL ``url``: ``write_local(local path)`` writes the model
    into a temporary directory, which is then uploaded (:func:`codec.io.store.publish`: each
    object atomically, a set's index last); a write refused or failed leaves no object.
    ``mapped``: gets the function giving the URL of a local path written."""
    import shutil
    import tempfile
    from . import registry
    from .io.open_store import store_for
    from .io.store import publish
    store = store_for(url, storage_options=storage_options)
    try:
        if not store.supports_writes:
            raise UsageError(f"{url}: an http(s) URL is not a destination (write to object storage or a local path)")
        store.check(url, "the destination")
        root = tempfile.mkdtemp(prefix="modelcodec-upload-")
        try:
            local = staging_name(url, root)
            folder = os.path.dirname(local.rstrip("/"))
            head = url.rstrip("/").rpartition("/")[0]
            inside = head.split("://", 1)[1].strip("/")
            up = head.rpartition("/")[0] if "/" in inside else None  # (files written beside the folder go here)
            os.makedirs(folder)
            entry, _ = registry.for_write(local, format)
            write_local(local)
            beside = [os.path.join(root, n) for n in sorted(os.listdir(root)) if os.path.join(root, n) != folder]
            if beside and up is None:
                raise UsageError(f"{url}: {os.path.basename(beside[0])} would go beside {head}, outside any bucket; "
                                 "nothing was written")
            publish(store, folder, head, tuple(entry.extensions) if entry.directory else ())
            for f in beside:
                store.put_file(up + "/" + os.path.basename(f), f)

            def to_url(p: str) -> str:
                p = os.path.abspath(p)
                if p == folder or p.startswith(folder + os.sep):
                    rel = os.path.relpath(p, folder)
                    return head if rel == "." else head + "/" + rel.replace(os.sep, "/")
                return f"{up}/{os.path.relpath(p, root).replace(os.sep, '/')}"
            if mapped is not None:
                mapped.append(to_url)
        finally:
            shutil.rmtree(root, ignore_errors=True)
    finally:
        store.close()
    return url
