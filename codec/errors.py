"""The one exception hierarchy of modelcodec.

Every error about bad data is a :class:`FormatError` carrying the format, the absolute byte
offset, the field path and the rule id, rendered on one line::

    FMT toc[3].chunk_offset @ 0x1f3: not a multiple of 16 (got 499) [FMT-CHUNK-ALIGN]

``validate`` collects these objects (as violations) instead of raising the first one.
"""
from __future__ import annotations

import contextlib


@contextlib.contextmanager
def about(what: str):
    """Within it, a :class:`UsageError` that does not name ``what`` (e.g. "metadata 'x'", the
    argument it is about) is raised again with its message prefixed by ``what: ``."""
    try:
        yield
    except UsageError as e:
        if what in str(e):
            raise
        raise type(e)(f"{what}: {e}") from None


def tensor_names(names, call: str) -> list:
    """``names`` (any iterable of tensor names but a str, which would be read letter by letter)
    as a list without repeats, else a :class:`UsageError` naming ``call``'s argument."""
    if isinstance(names, (str, bytes)) or not hasattr(names, "__iter__"):
        raise UsageError(f"{call}: names must be a list of tensor names, not {type(names).__name__}")
    return list(dict.fromkeys(names))


def show_int(n: int) -> str:
    """An integer for a message: digits up to 2^128, a power of two beyond (a product of hostile
    dimensions can have thousands of digits, which ``str`` refuses to print)."""
    return str(n) if abs(n).bit_length() <= 128 else f"{'-' if n < 0 else ''}~2^{abs(n).bit_length() - 1}"


class ModelcodecError(Exception):
    """Base of everything modelcodec raises on purpose."""


class UsageError(ModelcodecError, ValueError):
    """The caller asked for something impossible (bad writer input, unknown format...)."""


class NotFoundError(ModelcodecError, KeyError):
    """A tensor or chunk name that the file does not have."""

    def __str__(self) -> str:  # KeyError quotes its argument; keep the message readable
        return str(self.args[0]) if self.args else "not found"


class NotLocalError(ModelcodecError):
    """Bytes the file describes but does not hold here: a tensor of an index-only file (its
    bytes are in another file of the set), or a range of a remote file that was not read."""


class FormatError(ModelcodecError):
    """Bad data.  Whether a finding is an error or a warning is not the error's to say: the
    report decides from the rule and the reader's mode (:mod:`codec.engine.severity`).
    ``expected`` / ``actual``: the values the rule compared, as data (a checksum's two digests
    as hex, two sizes...), when the rule compares two values; ``algorithm``: the checksum's.
    ``format`` is the lower-case name of the format whose rule was broken (as the registry,
    ``--to`` and a report name it); the one-line rendering shows it in capitals."""

    def __init__(self, fmt: str, offset: int | None, path: str, rule: str, message: str,
                 *, source: str | None = None, expected=None, actual=None,
                 algorithm: str | None = None):
        self.format = fmt.lower()  # (the format's identifier, as a report and --to name it)
        self.offset = offset
        self.path = path
        self.rule = rule
        self.message = message
        self.source = source
        self.expected = expected
        self.actual = actual
        self.algorithm = algorithm
        #: findings that merely follow from this one (reported with it, not on their own)
        self.consequences: list[FormatError] = []
        super().__init__()  # (the line is rendered when it is asked for: most findings of a
        #                     hostile file are counted or dropped, never printed)

    def __str__(self) -> str:
        return self.render()

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.render()!r})"

    def render(self) -> str:
        where = f" @ 0x{self.offset:x}" if self.offset is not None else ""
        path = f" {self.path}" if self.path else ""
        src = f"{self.source}: " if self.source else ""
        return f"{src}{self.format.upper()}{path}{where}: {self.message} [{self.rule}]"

    def with_source(self, source: str) -> "FormatError":
        self.source = source
        return self

    def as_dict(self) -> dict:
        d = {"format": self.format, "offset": self.offset, "path": self.path,
             "rule": self.rule, "message": self.message,
             "kind": type(self).__name__}
        for k in ("algorithm", "expected", "actual"):
            if getattr(self, k) is not None:
                d[k] = getattr(self, k)
        if self.consequences:
            d["consequences"] = [c.as_dict() for c in self.consequences]
        return d

    #: how many more findings of the same rule a check's cap on findings left out after this
    #: one (they are counted, never listed)
    more: int = 0
    #: a cut file: (bytes the data holds, bytes its header promises), in the terms of the
    #: message (the file's size, or a data region's length)
    extent: tuple | None = None

    def left_out(self, k: int) -> "FormatError":
        """``k`` more findings like this one were not listed (a cap): the message says so."""
        self.more += k
        self._base = base = getattr(self, "_base", self.message)
        self.message = f"{base} [+{show_int(self.more)} more like it, not listed]"
        return self

    def absorb(self, others: list) -> "FormatError":
        """Take ``others`` as consequences of this error: they are listed with it, not as
        findings of their own (the rest of a truncated file is missing: one finding).  The
        message counts them exactly (those a cap left out included) and says how many bytes the
        data holds and how many its header promises, when the check knows."""
        have = set(map(id, self.consequences))
        self.consequences.extend(o for o in others if id(o) not in have and o is not self)
        n = len(self.consequences) + self.more + sum(c.more for c in self.consequences)
        ext = [e.extent for e in (self, *self.consequences) if e.extent is not None]
        said = []
        if ext:
            said.append(f"holds {show_int(ext[0][0])} bytes of the {show_int(max(p for _, p in ext))} "
                        "its header promises")
        if n:
            said.append(f"+{show_int(n)} more finding{'s' if n > 1 else ''} past the end of the data that "
                        f"follow{'' if n > 1 else 's'} from it")
        self._base = base = getattr(self, "_base", self.message)
        self.message = f"{base} [{'; '.join(said)}]" if said else base
        return self

    def __reduce__(self):
        return (_rebuild, (type(self), self.format, self.offset, self.path, self.rule,
                           self.message, self.source, self.expected, self.actual, self.algorithm),
                {k: v for k, v in self.__dict__.items() if k in ("more", "extent", "_base", "consequences")})


def _rebuild(cls, fmt, offset, path, rule, message, source, expected=None, actual=None, algorithm=None):
    return cls(fmt, offset, path, rule, message, source=source, expected=expected, actual=actual, algorithm=algorithm)


def for_format(fmt: str):
    """A format's error helper: ``err(cls, offset, path, rule, message)`` makes that error of
    ``fmt`` (each format module binds one: ``_err = errors.for_format(FMT)``)."""
    def err(cls, offset, path, rule, message, **kw) -> FormatError:
        return cls(fmt, offset, path, rule, message, **kw)
    return err


class UnknownFormatError(FormatError):
    """No registered format recognises the bytes."""


class MagicError(FormatError):
    """Wrong magic number."""


class UnsupportedVersionError(FormatError):
    """A version this library does not read."""


class BoundsError(FormatError):
    """An offset/length points outside the bytes it must stay within."""


class TruncatedError(BoundsError):
    """The data ends before a structure does."""


class OverlapError(FormatError):
    """Two regions that must be disjoint overlap."""


class ConstraintError(FormatError):
    """A declared field constraint does not hold."""


class ReservedError(ConstraintError):
    """A reserved field is not zero."""


class EnumError(ConstraintError):
    """A value outside its enumeration."""


class RangeError(ConstraintError):
    """A value outside its declared range."""


class LimitError(RangeError):
    """A value over a declared limit (protects memory and time)."""


class AlignmentError(ConstraintError):
    """An absolute offset is not on its required boundary."""


class StructureError(FormatError):
    """Relations between fields do not hold (lengths, duplicates, missing parts)."""


class DecodeError(FormatError):
    """A payload does not decode (msgpack, JSON, UTF-8, zstd...)."""


class SchemaError(DecodeError):
    """A decoded payload has the wrong shape (missing key, wrong type)."""


class CompressionError(DecodeError):
    """A compressed payload is malformed or would decompress to the wrong size."""


class IntegrityError(FormatError):
    """A hash or checksum does not match."""


class RemoteError(FormatError):
    """A remote file could not be fetched correctly: an HTTP error status, a connection that
    failed or stalled past every retry, or a wrong answer to a Range request.  ``source`` is the
    file's URL and ``offset`` the first byte asked for."""


__all__ = [
    "ModelcodecError", "UsageError", "NotFoundError", "FormatError", "UnknownFormatError",
    "MagicError", "UnsupportedVersionError", "BoundsError", "TruncatedError", "OverlapError",
    "ConstraintError", "ReservedError", "EnumError", "RangeError", "LimitError",
    "AlignmentError", "StructureError", "DecodeError", "SchemaError", "CompressionError",
    "IntegrityError", "RemoteError",
]
