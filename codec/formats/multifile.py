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

from .. import errors as E
from ..engine.records import raise_first
from ..io import links
from ..io.sources import confined
from ..model import LazyTensors, Reader, Report, TensorInfo

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

    def open_model(source, *, strict: bool = True, _collect: bool = False):
        return pick(source)(source, strict=strict, _collect=_collect)

    def validate_model(source, *, full: bool = False, control: bool = False, strict: bool = True,
                       progress: bool | None = None):
        return pick(source).validate_file(source, full=full, control=control, strict=strict, progress=progress)
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

    def _begin(self, source: str, doc: dict, root: str, owner, found: list, collect: bool) -> None:
        """``owner``: tensor name -> the position of the file holding it, or a callable giving
        that once the files are known (``owner(found)``, adding its findings to ``found``)."""
        if "://" in source:
            raise E.UsageError(f"{source}: a model in several files is read from local files (download the files "
                               "beside each other, then open it there)")
        self.source = source
        self._collect = collect
        self._parts: dict[int, Reader] = {}
        self._mapped: dict[int, Reader] = {}  # files opened only to map their bytes (byte_maps)
        self.dir = os.path.dirname(os.path.abspath(source))
        self.listed: list[str] = []
        self.paths: list[str | None] = []
        unusable: dict[str, list] = {}  # rule -> findings (at most MAX_LISTED listed, the rest counted)
        for where, entry in links.entries(self.FILES, doc, root):
            name = entry[self.FILES.path]
            self.listed.append(name)
            full, why = confined(self.dir, name)
            if why is not None:
                unusable.setdefault(self.PATH_RULE, []).append(E.StructureError(
                    self.FMT, None, f"{where}.{self.FILES.path}", self.PATH_RULE, why, source=source))
                self.paths.append(None)
                continue
            try:
                links.require_file(self.FILES, entry, where, os.path.isfile(full), os.path.lexists(full), self.FMT,
                                   source)
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
        self.tensors = LazyTensors(self._index, self._info, self.FMT)
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
        r = self._parts.get(k)
        if r is None:
            if self.paths[k] is None:
                raise E.StructureError(self.FMT, None, self.listed[k], self.FILES.rule_missing,
                                       f"{self.listed[k]} cannot be read (see validate)", source=self.source)
            r = self.part_reader(self.paths[k], strict=self.strict)
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
                    r = self._mapped[k] = self.part_reader(path, strict=self.strict, _collect=True)
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
        if os.path.abspath(self.source) not in (os.path.abspath(p) for p in self.paths):
            out.append({"name": os.path.basename(self.source), "source": self.source, "size": None, "sha256": None,
                        "where": "index", "rule": self.FILES.rule})
        return out

    def close(self) -> None:
        self._closed = True
        for r in [*self._parts.values(), *getattr(self, "_mapped", {}).values()]:
            r.close()

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
            with self.part_reader(path, strict=self.strict, _collect=True) as r:
                sub = r.validate(full=full, progress=progress)
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
        rep.checked.append(f"{len(self.listed)} files ({len(held)} read) and {len(self._names)} tensors: every "
                           "file's own check, and each tensor in the file the model says")
        return self._finish(rep)

    @classmethod
    def validate_file(cls, source, *, full: bool = False, control: bool = False, strict: bool = True,
                      progress: bool | None = None, **options) -> Report:
        with cls(source, strict=strict, _collect=True, **options) as r:
            return r.validate(full=full, control=control, progress=progress)
