"""A model whose tensors lie in several files of one single-file format (a sharded checkpoint and
its index, a split model): one reader over them, each file opened when first needed, once.

Format-blind: a format module says which files there are (an index it read, or the names a
convention gives), which file holds each tensor, and which reader reads one file; which entries
name files and the rule of a missing one come from its schema (``schemas.dsl.Linked``, evaluated
by :mod:`codec.io.links`).  Writers share :func:`parse_size` (the size text Hugging Face and
llama.cpp take) and :func:`plan_shards` (tensors into shards of at most that size, in order).
"""
from __future__ import annotations

import os
import re
from decimal import Decimal, InvalidOperation

import numpy as np

from ..schemas.dsl import Linked
from ..schemas.http import MAX_TENSOR_BYTES

from .. import errors as E
from ..engine.records import raise_first
from ..io import links
from ..io.remote import check_tensor_bytes
from ..io.sources import confined
from ..io.store import folder_of, is_url, presigned_failure, signature_of, with_shared_query
from ..model import Reader, Report, TensorInfo
from ..ui.display import plural

#: size units: decimal (Hugging Face's "5GB" is 5 * 10^9 bytes) and binary ("5GiB" is 5 * 2^30)
SIZE_UNITS = {"": 1, "b": 1, "kb": 10**3, "mb": 10**6, "gb": 10**9, "tb": 10**12, "kib": 2**10, "mib": 2**20,
              "gib": 2**30, "tib": 2**40}
#: findings of one rule listed (the rest counted in the last one listed), as every check does
MAX_LISTED = 50
_SIZE = re.compile(r"\s*([0-9]+(?:\.[0-9]+)?)\s*([kmgt]i?b|b)?\s*", re.I)


def parse_size(v, what: str = "max_shard_size") -> int:
    """A shard size in bytes from an int or the text Hugging Face takes ("5GB" = 5 * 10^9,
    "500MB", "2GiB" = 2 * 2^30, "1000"); UsageError naming ``what`` for anything else, or
    less than one byte."""
    n = None
    if isinstance(v, (int, np.integer)) and not isinstance(v, (bool, np.bool_)):
        n = int(v)
    elif isinstance(v, str):
        m = _SIZE.fullmatch(v)
        try:
            n = int(Decimal(m[1]) * SIZE_UNITS[(m[2] or "").lower()]) if m else None
        except InvalidOperation:
            n = None
    if n is None or n < 1:
        raise E.UsageError(f"{what} must be a number of bytes of at least 1, or a size such as \"5GB\", \"500MB\" "
                           f"or \"2GiB\" (got {v!r})")
    return n


def plan_shards(sizes: list[int], limit: int) -> list[list[int]]:
    """The tensors (their byte sizes, in order) in shards of at most ``limit`` bytes, in order:
    a shard ends when the next tensor would take it past the limit; a tensor bigger than the
    limit is a shard by itself.  At least one shard (an empty model: one empty shard)."""
    shards: list[list[int]] = [[]]
    used = 0
    for i, n in enumerate(sizes):
        if shards[-1] and used + n > limit:
            shards.append([])
            used = 0
        shards[-1].append(i)
        used += n
    return shards


def one_or_several(single, several, claims):
    """The reader and the validator of a format whose model is one file or several: ``several``
    (a :class:`MultiFileReader`) for a path ``claims`` takes, ``single`` for anything else."""
    def pick(source):
        return several if isinstance(source, (str, os.PathLike)) and claims(os.fspath(source)) else single

    def remote(source, options: dict) -> dict:
        """The options for a model at a URL (``storage_options``, ``http``): the reader of
        several files takes them; given for anything else, a UsageError names them."""
        given = {k: v for k, v in options.items() if v is not None}
        if given and not (is_url(source) and pick(source) is several):
            raise E.UsageError(f"{source}: {', '.join(sorted(given))} is for a model at a URL")
        return given

    def open_model(source, *, strict: bool = True, storage_options: dict | None = None, http=None,
                   _collect: bool = False):
        opts = remote(source, {"storage_options": storage_options, "http": http})
        return pick(source)(source, strict=strict, _collect=_collect, **opts)

    def validate_model(source, *, full: bool = False, control: bool = False, strict: bool = True,
                       progress: bool | None = None, storage_options: dict | None = None, http=None):
        opts = remote(source, {"storage_options": storage_options, "http": http})
        return pick(source).validate_file(source, full=full, control=control, strict=strict, progress=progress,
                                          **opts)
    return open_model, validate_model


class MultiFileReader(Reader):
    """The common reader of a model in several files.  A subclass reads what lists the files,
    then calls :meth:`_begin` with the document whose ``FILES`` entries name them, which file
    (by position) holds each tensor, and the findings so far.  Class attributes: ``FILES`` (the
    schema's Linked declaration), ``PATH_RULE`` (a file name leaving the directory),
    ``TENSOR_RULE`` (a tensor not where it is said to be), ``part_reader`` (the reader of one
    file: ``part_reader(path, strict=, _collect=)``)."""
    FILES: Linked
    PATH_RULE: str = ""
    TENSOR_RULE: str = ""
    part_reader: type
    #: at a URL, whole-model work (validate(full=True), load, convert) copies the files here first
    #: (:func:`codec.formats.mirror.local_copy`), then reads the copy
    COPIED_WHOLE = True

    def _begin(self, source: str, doc: dict, root: str, owner, found: list, collect: bool) -> None:
        """``owner``: tensor name -> the position of the file holding it, or a callable giving
        that once the files are known (``owner(found)``, adding its findings to ``found``)."""
        self.source = source
        self._collect = collect
        self._parts: dict[int, Reader] = {}
        self._mapped: dict[int, Reader] = {}  # files opened only to map their bytes (byte_maps)
        self.remote = is_url(source)
        self.dir = folder_of(source) if self.remote else os.path.dirname(os.path.abspath(source))
        self.listed: list[str] = []
        self.paths: list[str | None] = []
        unusable: dict[str, list] = {}  # rule -> findings (at most MAX_LISTED listed, the rest counted)
        for where, entry in links.entries(self.FILES, doc, root):
            name = entry[self.FILES.path]
            self.listed.append(name)
            full, why = beside(self.dir, name) if self.remote else confined(self.dir, name)
            if self.remote and full is not None:
                full = self._url_of(full)
            if why is not None:
                unusable.setdefault(self.PATH_RULE, []).append(E.StructureError(
                    self.FMT, None, f"{where}.{self.FILES.path}", self.PATH_RULE, why, source=source))
                self.paths.append(None)
                continue
            try:
                there = self._there(full) if self.remote else None
                links.require_file(self.FILES, entry, where, there if self.remote else os.path.isfile(full),
                                   there if self.remote else os.path.lexists(full), self.FMT, source)
            except E.FormatError as e:
                unusable.setdefault(str(e.rule), []).append(e)
                full = None
            self.paths.append(full)
        for bad in unusable.values():
            found += bad[:MAX_LISTED]
            if len(bad) > MAX_LISTED:
                bad[MAX_LISTED - 1].left_out(len(bad) - MAX_LISTED)
        if callable(owner):
            try:
                owner = owner(found)
            except BaseException:
                self.close()
                raise
        self._owner = owner
        self._names = list(owner)
        self._index = {n: i for i, n in enumerate(self._names)}
        self._structure = found
        self._built_infos = None
        if not collect:
            try:
                raise_first(found, self.strict)
            except E.FormatError as e:
                self.close()
                raise e.with_source(e.source or source) from None

    def part(self, k: int) -> Reader:
        """The reader of file ``k`` (by its position in ``listed``), opened on first use, once."""
        if self._closed:
            raise E.UsageError(f"the {self.format} reader of {self.source} is closed")
        if not isinstance(k, (int, np.integer)) or not 0 <= k < len(self.listed):
            raise E.UsageError(f"{self.source}: no file {k!r} (part(k) takes 0 to {len(self.listed) - 1})")
        r = self._parts.get(k)
        if r is None:
            if self.paths[k] is None:
                raise E.StructureError(self.FMT, None, self.listed[k], self.FILES.rule_missing,
                                       f"{self.listed[k]} cannot be read (see validate)", source=self.source)
            r = self._open_part(self.paths[k], False)
            if not self._collect:  # (a file that disagrees with the model is refused when first used)
                try:
                    raise_first(self._part_findings(k, r), self.strict)
                except E.FormatError:
                    r.close()
                    raise
            self._parts[k] = r
        return r

    def _part_findings(self, k: int, r: Reader) -> list:
        """How file ``k`` (just opened: ``r``) disagrees with what lists the files (the subclass
        says; none by default)."""
        return []

    def _info(self, i: int) -> TensorInfo:
        name = self._names[i]
        k = self._owner[name]
        p = self.part(k)
        if name not in p.tensors:
            raise E.StructureError(self.FMT, None, self.listed[k], self.TENSOR_RULE,
                                   f"{self.listed[k]} has no tensor {name!r}", source=self.source)
        t = p.tensors[name]
        return TensorInfo(name, t.dtype, t.shape, t.offset, t.nbytes, {**t.extra, "file": self.listed[k]})

    def tensor(self, name: str) -> np.ndarray:
        self.tensors[name]  # (the NotFoundError, or why it is not where the model says)
        return self.part(self._owner[name]).tensor(name)

    def inspect_notes(self, t: TensorInfo) -> dict:
        return {"file": t.extra["file"]} if "file" in t.extra else {}

    def byte_maps(self) -> list:
        """Each file's byte map (a file that disagrees with the model, or is broken, as far as
        its reader could read it)."""
        out = []
        for k, path in enumerate(self.paths):
            if path is None:
                continue
            try:
                out.extend(self.part(k).byte_maps())
            except E.FormatError:
                r = self._mapped.get(k)
                if r is None:
                    r = self._mapped[k] = self._open_part(path, True)
                out.extend(r.byte_maps())
        return out

    def files(self) -> list[dict]:
        """Every file listed (no hash: what lists them has none), then what lists them."""
        out = []
        for k, (name, path) in enumerate(zip(self.listed, self.paths)):
            if path is None:
                raise E.UsageError(f"{self.source}: {name} cannot be read (see validate): the model cannot be "
                                   "copied whole")
            out.append({"name": name, "source": path, "size": None, "sha256": None, "where": name,
                        "rule": self.FILES.rule})
        here = (lambda p: p) if self.remote else os.path.realpath
        named = [f for f in out if here(f["source"]) == here(self.source)]
        if named:  # (the file the model is named by -- a first split -- goes last, as an index does)
            out = [f for f in out if f not in named] + named
        else:
            out.append({"name": self.source.split("?", 1)[0].rsplit("/", 1)[-1] if self.remote
                        else os.path.basename(self.source), "source": self.source, "size": None, "sha256": None,
                        "where": "index", "rule": self.FILES.rule})
        return out

    def close(self) -> None:
        self._closed = True
        for r in [*getattr(self, "_parts", {}).values(), *getattr(self, "_mapped", {}).values()]:
            r.close()
        if getattr(self, "_own_store", False):
            self.store.close()
            self._own_store = False

    # ------------------------------------------------------------------ remote
    def _open_store(self, url: str, storage_options: dict | None, http) -> None:
        """The store the model's files are read from (``url``: its index or first file)."""
        from ..io.open_store import store_for
        self.store = store_for(url, storage_options=storage_options, http=http)
        self._own_store = True
        try:
            self.store.check(url, "the model")
        except BaseException:
            self.close()
            raise

    def _url_of(self, url: str) -> str:
        """The URL a listed file is read at: the model's own URL, as given, for the file it is
        named by (a first split); else ``url`` with the query string the model's URL shares with
        the files beside it (``?download=true``, a token; not a presigned URL's signature)."""
        if url == self.source.split("?", 1)[0].split("#", 1)[0]:
            return self.source
        return with_shared_query(self.source, url)

    def _there(self, url: str) -> bool:
        """Whether the file at ``url`` exists: False only when the store says it is not there
        (a server without Range requests: it is, and reading it in ranges is what fails, saying
        so); any other failure is raised as it is.  A file asked for without the model's
        presigned query: any failure says why."""
        try:
            there = self.store.exists(url)
            if not there and url != self.source and signature_of(self.source):
                self.store.size(url)  # (the store's "not there", said with why below)
        except E.RemoteError as e:
            raise (e if url == self.source else presigned_failure(e, self.source)) from None
        return there

    def _open_part(self, path: str, collect: bool) -> Reader:
        """The reader of one file: here, its format's; at a URL, its format's over the ranges
        read (:class:`RemotePart`: its header first, each tensor's bytes when asked for)."""
        if not self.remote:
            return self.part_reader(path, strict=self.strict, _collect=collect)
        return RemotePart(self.store, path, self.format, strict=self.strict, collect=collect)

    def describe(self) -> dict:
        d = {"format": self.format, "tensors": len(self.tensors), "metadata": self.metadata, "checksums": [],
             "files": list(self.listed)}
        version = self.part(0).describe().get("version") if self.listed else None
        return {**d, "version": version} if version is not None else d

    # ------------------------------------------------------------------ validate
    def _cross(self, held: dict[int, dict[str, int]], rep: Report) -> None:  # pragma: no cover - overridden
        """The findings between the files: ``held`` is, for each file that could be read, its
        tensors' names and byte sizes."""
        raise NotImplementedError

    def validate(self, full: bool = False, *, control: bool = False, progress: bool | None = None) -> Report:
        """What opening found, every file's own check (``full``: with every hash it has), and
        the relations between the files."""
        rep = Report(self.format, self.source, "full" if full else "structure", strict=self.strict)
        rep.add(list(self._structure))
        held: dict[int, dict[str, int]] = {}
        for k, path in enumerate(self.paths):
            if path is None:
                continue
            try:
                r = self._open_part(path, True)
            except E.RemoteError as e:  # (a server without Range requests: what the caller is told)
                rep.add(e.with_source(e.source or path))
                continue
            with r:
                sub = r.validate(full=full and not self.remote, progress=progress)
                held[k] = {}
                for n in r.tensors:
                    try:
                        held[k][n] = r.tensors[n].nbytes
                    except E.FormatError:  # (unreadable: the file's own findings say why)
                        held[k][n] = 0
            rep.add(sub.violations)
            rep.checksums += sub.checksums
            rep.notes += [n for n in sub.notes if n not in rep.notes]
        self._cross(held, rep)
        if self.remote:
            rep.notes.append(f"remote: each file's header read in ranges; the {self.format} files of a model in "
                             "several have no hashes: tensor bytes are checked by validate(full=True), which "
                             "copies the files here first")
        rep.checked.append(f"{plural(len(self.listed), 'file')} ({len(held)} read) and {plural(len(self._names), 'tensor')}: every "
                           "file's own check, and each tensor in the file the model says")
        return self._finish(rep)

    @classmethod
    def validate_file(cls, source, *, full: bool = False, control: bool = False, strict: bool = True,
                      progress: bool | None = None, **options) -> Report:
        with cls(source, strict=strict, _collect=True, **options) as r:
            return r.validate(full=full, control=control, progress=progress)


def beside(folder: str, name: str) -> tuple[str | None, str | None]:
    """A file named in an index at a URL: its URL in the index's ``folder`` (URL), or (None, why
    not) -- the rule :func:`codec.io.sources.confined` keeps for local files: no absolute path
    or URL, nothing leaving the folder ('..'), no query or fragment."""
    from urllib.parse import quote
    segs = name.replace("\\", "/").split("/")
    if "://" in name or name.startswith(("/", "\\")) or (len(name) > 1 and name[1] == ":"):
        return None, f"absolute path {name!r} is not allowed"
    if any(s in ("..", ".", "") for s in segs) or "?" in name or "#" in name:
        return None, f"{name!r} leaves the directory {folder!r}"
    try:
        return folder + "/" + quote(name, safe="/-._~"), None
    except UnicodeEncodeError as e:
        return None, f"{name!r} is not a usable file name ({e})"


class RemotePart:
    """One file of a model in several, at a URL: its format's reader over the ranges read so
    far (``open_ranges``: the header when opened), each tensor's bytes fetched when first asked
    for, through the model's store."""

    def __init__(self, store, url: str, fmt: str, *, strict: bool, collect: bool):
        from .. import registry
        self.store, self.url = store, url
        self.size = store.size(url)
        self.inner = registry.get(fmt).open_ranges(url, self.size, self._read, strict=strict, _collect=collect)

    def _read(self, spans: list) -> list:
        return self.store.fetch([(self.url, a, n, self.size) for a, n in spans])

    def tensor(self, name: str, **kw) -> np.ndarray:
        t, src = self.inner.tensors[name], self.inner._src
        check_tensor_bytes(self.inner.FMT, t, self.url, MAX_TENSOR_BYTES)  # (the remote single file's bound)
        if t.offset is not None and t.nbytes and not src.has(t.offset, t.nbytes) and t.offset + t.nbytes <= self.size:
            src.add(t.offset, self._read([(t.offset, t.nbytes)])[0])
        return self.inner.tensor(name, **kw)

    def byte_maps(self) -> list:
        return [(self.url, self.size, self.inner.regions(), self.inner._src)]

    def __getattr__(self, name: str):
        if name.startswith("__") or name == "inner":
            raise AttributeError(name)
        return getattr(self.inner, name)

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def close(self) -> None:
        self.inner.close()
