"""OINF v1 dataclass export: openinfer-oinf's ``dataclass_to_oinf`` / ``write_oinf`` mapping of
a dataclass instance onto the three tables, and the CLI's dataclass loader."""
from __future__ import annotations

import collections
import collections.abc
import dataclasses
import math
import os
import re
import types
import typing
from dataclasses import dataclass
from typing import Mapping

import numpy as np

from ... import errors as E
from .values import _LATER_TYPES, Bitset, ScalarValue, SizeVar, TensorSpec, UninitializedTensor, _type_name
from .writer import write_oinf_file


# =============================================================================== dataclasses
@dataclass
class OinfModel:
    """What a dataclass instance becomes: the three tables, in file order."""
    sizevars: dict
    metadata: dict
    tensors: dict


#: dataclass fields whose dict value contributes its items to the table of the same name
_TABLE_FIELDS = ("sizevars", "metadata", "tensors")


def _field_meta(annotation, field_metadata) -> dict:
    """What a field declares about itself: ``Annotated`` extras (a string is a flag, a mapping
    is merged) and then ``field(metadata=...)`` -- keys "sizevar", "tensor", "dtype", "shape"."""
    meta: dict = {}
    if typing.get_origin(annotation) is typing.Annotated:
        for extra in typing.get_args(annotation)[1:]:
            if isinstance(extra, str):
                meta[extra] = True
            elif isinstance(extra, Mapping):
                meta.update(extra)
    meta.update(field_metadata or {})
    return meta


def _base_type(annotation):
    """The annotation without ``Annotated[...]`` or ``Optional[...]`` around it."""
    origin = typing.get_origin(annotation)
    if origin is typing.Annotated:
        return typing.get_args(annotation)[0]
    if origin is typing.Union:
        args = [a for a in typing.get_args(annotation) if a is not type(None)]
        if len(args) == 1:
            return args[0]
    return annotation


# The reference validates the instance against its annotations before exporting it (pydantic,
# lax mode): a value is converted to its field's type -- which changes what is written -- or
# refused.  The conversions below are those, for the annotations a model dataclass uses.
_TRUE_TEXT = frozenset({"1", "on", "t", "true", "y", "yes"})
_FALSE_TEXT = frozenset({"0", "off", "f", "false", "n", "no"})
_INT_TEXT = re.compile(r"\s*[+-]?[0-9]+(?:_[0-9]+)*(?:\.0+)?\s*")
_ITERABLES = (list, tuple, set, frozenset, collections.deque, range, np.ndarray, types.GeneratorType,
              collections.abc.KeysView, collections.abc.ValuesView)
_I64 = 2**63


class _NoFit(Exception):
    """A value its field's annotation does not take."""


def _text(v):
    if isinstance(v, bytes):
        try:
            return v.decode()
        except UnicodeDecodeError:
            raise _NoFit from None
    return v


def _lax_int(v) -> int:
    if isinstance(v, (bool, np.bool_, int)):
        return int(v)
    if isinstance(v, np.integer) and -_I64 <= int(v) < _I64:
        return int(v)
    if isinstance(v, (float, np.floating)) and math.isfinite(v) and float(v).is_integer() and -_I64 <= v < _I64:
        return int(v)
    v = _text(v)
    if isinstance(v, str) and _INT_TEXT.fullmatch(v):
        return int(v.strip().split(".")[0])
    raise _NoFit


def _lax_float(v) -> float:
    v = _text(v)
    if isinstance(v, (bool, np.bool_, int, np.integer, float, np.floating, str)):
        try:
            return float(v)
        except (ValueError, OverflowError):
            pass
    raise _NoFit


def _lax_bool(v) -> bool:
    if isinstance(v, (bool, np.bool_)):
        return bool(v)
    if isinstance(v, (int, np.integer, float, np.floating)) and v in (0, 1):
        return bool(v)
    v = _text(v)
    if isinstance(v, str) and v.lower() in _TRUE_TEXT | _FALSE_TEXT:
        return v.lower() in _TRUE_TEXT
    raise _NoFit


def _lax_str(v) -> str:
    if isinstance(v, (bytes, bytearray)):
        try:
            return bytes(v).decode()
        except UnicodeDecodeError:
            raise _NoFit from None
    if isinstance(v, str):
        return str(v)
    raise _NoFit


_LAX = {int: _lax_int, float: _lax_float, bool: _lax_bool, str: _lax_str}


def _lax(value, ann):
    """``value`` as the reference's validation makes it for the annotation ``ann``: int, float,
    bool and str convert (``True`` -> 1 for int, 1 -> 1.0 for float, "yes" -> True for bool, a
    str stays a str); list / tuple / dict convert their items; a class takes its instances;
    ``Optional`` also None; ``Any``, unions of several types and the rest take anything."""
    origin, args = typing.get_origin(ann), typing.get_args(ann)
    if origin is typing.Annotated:
        return _lax(value, args[0])
    if origin is typing.Union or origin is types.UnionType:
        if value is None and type(None) in args:
            return None
        rest = [a for a in args if a is not type(None)]
        return _lax(value, rest[0]) if len(rest) == 1 else value
    if ann is typing.Any or ann is object:
        return value
    if ann in _LAX:
        return _LAX[ann](value)
    kind = origin or ann
    if kind in (list, tuple):
        if not isinstance(value, _ITERABLES):
            raise _NoFit
        items = list(value)
        if kind is tuple and args and args[-1] is not Ellipsis:
            if len(args) != len(items):
                raise _NoFit
            items = [_lax(v, a) for v, a in zip(items, args)]
        elif args:
            items = [_lax(v, args[0]) for v in items]
        return kind(items)
    if kind is dict:
        if not isinstance(value, dict):
            raise _NoFit
        return {_lax(k, args[0]): _lax(v, args[1]) for k, v in value.items()} if len(args) == 2 else value
    if isinstance(kind, type):
        if isinstance(value, kind):
            return value
        raise _NoFit
    return value


def _declared_dtype(name: str, meta: dict):
    """A field's declared dtype (None without one); one that is no type name or tag at all is
    refused, whatever the field holds (the type is checked where it is used)."""
    if "dtype" not in meta:
        return None
    dt = meta["dtype"]
    if not (isinstance(dt, int) or (isinstance(dt, str) and dt.strip().lower() in _LATER_TYPES)):
        _type_name(dt)
    return dt


def _native(what: str, a) -> None:
    """An array not in the machine's byte order is refused, as the reference does."""
    if isinstance(a, np.ndarray) and a.dtype.byteorder not in "=|" and a.dtype != a.dtype.newbyteorder("="):
        raise E.UsageError(f"{what}: a {a.dtype.str} array is not in this machine's byte order; pass "
                           f"a.astype(a.dtype.newbyteorder('='))")


def _sizevar_value(name: str, value, from_dict: bool) -> int:
    """A size variable's value.  A bool is 1/0 in a ``sizevars`` dict and refused in a field,
    as in the reference; a fractional number is refused (the reference truncates 3.7 to 3)."""
    if isinstance(value, SizeVar):
        value = value.value
    if value is None or (isinstance(value, bool) and not from_dict):
        raise E.UsageError(f"sizevar {name!r} cannot be {value!r}")
    if isinstance(value, (float, np.floating)) and not float(value).is_integer():
        raise E.UsageError(f"sizevar {name!r} must be an integer (got {value!r}): it is not truncated")
    try:
        return int(value)
    except (TypeError, ValueError, OverflowError):
        raise E.UsageError(f"sizevar {name!r} must be an integer (got {value!r})") from None


def _metadata_value(name: str, value, dtype=None):
    """A field's value as the writer's metadata value, typed as the reference types it: a bool,
    str or Bitset as such (a declared dtype does not apply); an integer (numpy's too) in the
    smallest type holding it, a float f32, a list NDARRAY (see ``_ndarray_value``), an array
    NDARRAY of its own type -- or as the declared dtype; ``ScalarValue`` declares one."""
    if isinstance(value, ScalarValue):
        return _metadata_value(name, value.value, value.dtype if value.dtype is not None else dtype)
    if isinstance(value, (bool, Bitset)):
        return value
    if isinstance(value, str):
        if not value:
            raise E.UsageError(f"metadata {name!r}: an empty string is not exported (openinfer-oinf refuses it too)")
        return value
    if isinstance(value, (int, np.integer)):
        return int(value) if dtype is None else ScalarValue(int(value), dtype)
    if isinstance(value, (float, np.floating)):
        return float(value) if dtype is None else ScalarValue(float(value), dtype)
    if isinstance(value, (list, tuple, np.ndarray)):
        if dtype is None:
            _native(f"metadata {name!r}", value)
        return value if dtype is None else ScalarValue(value, dtype)
    if isinstance(value, np.bool_):
        raise E.UsageError(f"metadata {name!r}: a numpy bool is not exported as metadata (as in openinfer-oinf); "
                           "give bool(value) or annotate the field `bool`")
    raise E.UsageError(f"metadata {name!r}: OINF has no value type for {type(value).__name__}")


def _tensor_value(name: str, value, meta: dict):
    """(tensor name, writer value) of a field that is a tensor."""
    if isinstance(value, (TensorSpec, UninitializedTensor)):
        if isinstance(value, TensorSpec) and value.dtype is None:
            _native(f"tensor {name!r}", value.data)
        return value.name or name, value
    if isinstance(value, np.ndarray):
        _native(f"tensor {name!r}", value)
        return name, value
    dtype = meta.get("dtype")
    if isinstance(value, (list, tuple)):
        return name, TensorSpec(value, dtype)
    if value is None:  # a declared tensor without a value: its dtype and shape, no data
        if dtype is None or meta.get("shape") is None:
            raise E.UsageError(f"tensor {name!r} is None: declare its dtype and shape "
                               "(field(metadata={'dtype': ..., 'shape': ...})) or give it a value")
        return name, UninitializedTensor(dtype, tuple(meta["shape"]))
    raise E.UsageError(f"tensor {name!r}: OINF cannot store a {type(value).__name__} as a tensor")


def dataclass_to_oinf(instance) -> OinfModel:
    """Map a dataclass instance onto OINF tables with openinfer-oinf's rules (differential
    tests in ``tests/test_oinf_parity.py``; the deliberate differences are in docs/guide/formats.md):

    * each field's value is first converted to its annotation as the reference's validation
      does (``_lax``: an ``int`` field takes True as 1, a ``float`` field 3 as 3.0, a ``bool``
      field 1 or "yes" as True, a ``str`` field only text; a class annotation its instances)
      -- a value that does not convert is refused;
    * a field annotated ``int`` (``Optional[int]``, ``SizeVar``, or declaring "sizevar"), or
      holding a ``SizeVar``, is a size variable;
    * a field holding a ``TensorSpec``, ``UninitializedTensor`` or numpy array, declaring
      "tensor" (``Annotated[list, "tensor"]``, ``field(metadata={"tensor": True})``), or a
      list/tuple with a declared dtype is a tensor (``TensorSpec``/``UninitializedTensor``
      ``name`` renames it; None with a declared dtype and shape is a tensor without data);
      two tensors of one name are refused;
    * anything else is metadata (see ``_metadata_value``);
    * fields named ``sizevars``, ``metadata`` and ``tensors`` holding a dict contribute its
      items (a field of the same name replaces an item).

    Each table is written sorted by field name (a renamed tensor stays at its field's place)."""
    if not dataclasses.is_dataclass(instance) or isinstance(instance, type):
        raise E.UsageError(f"expected a dataclass instance, got {type(instance).__name__}")
    try:
        hints = typing.get_type_hints(type(instance), include_extras=True)
    except Exception:
        hints = {}
    fields = dataclasses.fields(instance)
    values = {}
    for f in fields:
        ann = hints.get(f.name, f.type)
        value = getattr(instance, f.name)
        try:
            values[f.name] = _lax(value, ann)
        except _NoFit:
            shown = repr(value) if len(repr(value)) <= 60 else f"a {type(value).__name__} value"
            typ = ann.__name__ if typing.get_origin(ann) is None and hasattr(ann, "__name__") else str(ann)
            raise E.UsageError(f"field {f.name!r}: {shown} is not a valid {typ}") from None
    sv: dict = {}
    md: dict = {}
    ts: dict = {}
    for table, into in zip(_TABLE_FIELDS, (sv, md, ts)):
        items = values[table] if table in values else getattr(instance, table, None)
        if isinstance(items, dict):
            into.update((k, (v, {})) for k, v in items.items())
    for f in fields:
        if f.name in _TABLE_FIELDS:
            continue
        ann = hints.get(f.name, f.type)
        meta, base, value = _field_meta(ann, f.metadata), _base_type(ann), values[f.name]
        if isinstance(value, SizeVar) or meta.get("sizevar") or base in (int, SizeVar):
            sv[f.name] = (value, None)
            continue
        if isinstance(value, ScalarValue):
            md[f.name] = (value, meta)
            continue
        declared = _declared_dtype(f.name, meta) is not None
        if meta.get("tensor") or isinstance(value, (TensorSpec, UninitializedTensor, np.ndarray)) or \
                (isinstance(value, (list, tuple)) and declared):
            ts[f.name] = (value, meta)
        else:
            md[f.name] = (value, meta)
    tensors: dict = {}
    for k, (v, m) in sorted(ts.items()):
        name, t = _tensor_value(k, v, m)
        if name in tensors:
            raise E.UsageError(f"two tensors named {name!r}: names are unique in OINF's tensor table")
        tensors[name] = t
    return OinfModel({k: _sizevar_value(k, v, m is not None) for k, (v, m) in sorted(sv.items())},
                     {k: _metadata_value(k, v, m.get("dtype")) for k, (v, m) in sorted(md.items())},
                     tensors)


def write_oinf(instance, path, *, progress: bool | None = None) -> str:
    """Write a dataclass instance as OINF (the seed's API; byte-identical to the reference)."""
    m = dataclass_to_oinf(instance)
    return write_oinf_file(path, sizevars=m.sizevars, metadata=m.metadata, tensors=m.tensors, sort=False,
                           progress=progress)


def load_dataclass(spec: str, json_path: str | None = None):
    """``MODULE:CLASS`` (+ optional JSON of field values) -> a dataclass instance, as the
    reference CLI does: with JSON, ``CLASS(**data)``; without, ``CLASS()`` or else the module's
    one ``build*()`` function that returns a CLASS."""
    import importlib
    import json
    import sys
    mod_name, _, cls_name = spec.partition(":")
    if not mod_name or not cls_name:
        raise E.UsageError(f"--input must be MODULE:CLASS (got {spec!r})")
    if os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())
    try:
        mod = importlib.import_module(mod_name)
    except ImportError as e:
        raise E.UsageError(f"cannot import {mod_name!r}: {e}") from None
    cls = getattr(mod, cls_name, None)
    if cls is None or not dataclasses.is_dataclass(cls):
        raise E.UsageError(f"{spec!r} is not a dataclass")
    if json_path is not None:
        try:
            with open(json_path, encoding="utf-8") as f:
                data = json.load(f)
        except ValueError as e:
            raise E.UsageError(f"{json_path}: not JSON: {e}") from None
        if not isinstance(data, dict):
            raise E.UsageError(f"{json_path}: expected a JSON object of field values")
        try:
            return cls(**data)
        except TypeError as e:
            raise E.UsageError(f"{json_path}: {e}") from None
    try:
        return cls()
    except TypeError:
        builders = [f for n, f in vars(mod).items() if n.startswith("build") and callable(f)]
        for b in builders:
            try:
                inst = b()
            except TypeError:
                continue
            if isinstance(inst, cls):
                return inst
    raise E.UsageError(f"{cls_name} needs field values: pass --json DATA.json (or give the module a build*() function)")

