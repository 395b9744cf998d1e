"""The one public shape every format's reader has.

``codec.open(...)`` returns a :class:`Reader`: a context manager owning its mapping, with
``.format``, ``.metadata``, ``.tensors`` (name -> :class:`TensorInfo`), ``.tensor(name)`` and
``.validate(full=False)`` -> :class:`Report`.
"""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Callable, Iterator

import numpy as np

from . import errors as E


@dataclass(frozen=True, slots=True)
class TensorInfo:
    name: str
    dtype: np.dtype          # numpy dtype of the array tensor() returns (uint8 for opaque data)
    shape: tuple             # logical shape as stored in the file
    offset: int | None       # absolute byte offset of the data in its file (None: not in this file)
    nbytes: int              # stored byte length
    extra: dict = field(default_factory=dict, compare=False)  # format specifics

    @property
    def dtype_name(self) -> str:
        return self.extra.get("dtype_name", str(self.dtype))


class LazyTensors(Mapping):
    """name -> TensorInfo, built on access so listing 10^5 tensors costs only the keys."""

    def __init__(self, index: dict[str, int], make: Callable[[int], TensorInfo], fmt: str):
        self._index = index
        self._make = make
        self._fmt = fmt
        self._cache: dict[str, TensorInfo] = {}

    def __getitem__(self, name: str) -> TensorInfo:
        t = self._cache.get(name)
        if t is None:
            i = self._index.get(name)
            if i is None:
                raise E.NotFoundError(f"{self._fmt}: no tensor named {name!r}")
            t = self._cache[name] = self._make(i)
        return t

    def __iter__(self) -> Iterator[str]:
        return iter(self._index)

    def __len__(self) -> int:
        return len(self._index)

    def __contains__(self, name) -> bool:
        return name in self._index


@dataclass
class Report:
    """What ``validate`` found.  ``ok`` is True when there is no error (warnings allowed)."""
    format: str
    source: str
    level: str                                   # "structure", "full" or "control"
    violations: list = field(default_factory=list)
    checked: list = field(default_factory=list)  # human lines: what was verified
    notes: list = field(default_factory=list)    # human lines: what could not be / was absent

    @property
    def errors(self) -> list:
        return [v for v in self.violations if v.severity == "error"]

    @property
    def warnings(self) -> list:
        return [v for v in self.violations if v.severity != "error"]

    @property
    def ok(self) -> bool:
        return not self.errors

    def add(self, v: E.FormatError | list) -> None:
        if isinstance(v, list):
            self.violations.extend(v)
        else:
            self.violations.append(v)

    def as_dict(self) -> dict:
        return {"format": self.format, "source": self.source, "level": self.level, "ok": self.ok,
                "violations": [v.as_dict() for v in self.violations],
                "checked": list(self.checked), "notes": list(self.notes)}


class Reader:
    """Base class: context manager plus the dict-like conveniences."""
    format: str = "?"

    tensors: Mapping

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def close(self) -> None:  # pragma: no cover - overridden
        pass

    @property
    def metadata(self) -> dict:
        return {}

    def tensor(self, name: str) -> np.ndarray:  # pragma: no cover - overridden
        raise NotImplementedError

    def validate(self, full: bool = False) -> Report:  # pragma: no cover - overridden
        raise NotImplementedError

    def keys(self):
        return self.tensors.keys()

    def __contains__(self, name) -> bool:
        return name in self.tensors

    def __len__(self) -> int:
        return len(self.tensors)

    def __getitem__(self, name: str) -> np.ndarray:
        return self.tensor(name)

    def describe(self) -> dict[str, Any]:
        """Summary used by ``inspect`` (format-specific readers add to it)."""
        return {"format": self.format, "tensors": len(self.tensors), "metadata": self.metadata}
