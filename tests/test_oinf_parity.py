"""OINF dataclass export: ours against openinfer-oinf 0.1.1 (its ``dataclass_to_oinf`` module,
the reference implementation of the OINF dataclass API; a test dependency, used here as an
oracle only).  Each situation builds a dataclass instance with the placeholder classes of the
library it is given (``TensorSpec``, ``UninitializedTensor``, ``ScalarValue``, ``SizeVar``,
``Bitset``), and both libraries export it to ``tmp_path``:

* where the reference writes a file, ours writes the same bytes, and the file validates;
* where the reference refuses, ours refuses with a ``UsageError`` saying why (``@refused``)
  and leaves no file;
* where ours deliberately differs (``DIFFERENT``, each with its reason, also in docs/guide/formats.md
  section "OINF dataclass export: parity with openinfer-oinf"), the difference is asserted as
  documented: the reference's file breaks the OINF spec, or holds a value that was not given,
  or the reference crashes on a valid instance -- and ours is the spec-correct side.
"""
from dataclasses import dataclass, field
from typing import Annotated, Any, Callable, Optional

import numpy as np
import pytest

import dataclass_to_oinf as ref  # openinfer-oinf, a test dependency
from oinf_common import OinfError as RefusedByReference

import codec
from codec import errors as E
from codec.formats import oinf as ours
from codec.schemas.oinf import Rule

CASES: dict = {}   # name -> make(lib) -> dataclass instance
REFUSED: dict = {}  # name -> what ours' UsageError says (both libraries refuse)


def case(f):
    CASES[f.__name__] = f
    return f


def refused(why: str):
    def register(f):
        REFUSED[f.__name__] = why
        return case(f)
    return register


# ------------------------------------------------------------------ situations of the issue
@case
def plain_int_in_any(m):
    @dataclass
    class A: x: Any = 3
    return A()
@case
def plain_int_in_float(m):
    @dataclass
    class A: x: float = 3
    return A()
@case
def int_in_int(m):
    @dataclass
    class A: n: int = 7
    return A()
@case
def bool_in_int(m):
    @dataclass
    class A: n: int = True
    return A()
@case
def np_int32_any(m):
    @dataclass
    class A: x: Any = np.int32(5)
    return A()
@case
def np_int64_any(m):
    @dataclass
    class A: x: Any = np.int64(-5)
    return A()
@case
def np_uint16_any(m):
    @dataclass
    class A: x: Any = np.uint16(300)
    return A()
@case
def np_float16_any(m):
    @dataclass
    class A: x: Any = np.float16(1.5)
    return A()
@refused('a numpy bool is not exported')
def np_bool_any(m):
    @dataclass
    class A: x: Any = np.bool_(True)
    return A()
@case
def np_int32_in_int(m):
    @dataclass
    class A: n: int = np.int32(4)
    return A()
@case
def np_int32_in_metadata_dict(m):
    @dataclass
    class A: metadata: dict = field(default_factory=lambda: {"k": np.int32(9)})
    return A()
@case
def tensors_dict(m):
    @dataclass
    class A: tensors: dict = field(default_factory=lambda: {"w": np.arange(3, dtype=np.float32)})
    return A()
@case
def field_meta_dtype_list(m):
    @dataclass
    class A: w: list = field(default_factory=lambda: [1, 2, 3], metadata={"dtype": "f16"})
    return A()
@case
def field_meta_tensor(m):
    @dataclass
    class A: w: list = field(default_factory=lambda: [1, 2, 3], metadata={"tensor": True})
    return A()
@case
def annotated_tensor(m):
    @dataclass
    class A: w: Annotated[list, "tensor"] = field(default_factory=lambda: [1.0, 2.0])
    return A()
@case
def tensorspec_pos(m):
    @dataclass
    class A: w: Any = None
    return A(m.TensorSpec(np.arange(4, dtype=np.float32)))
@case
def tensorspec_name_kw(m):
    @dataclass
    class A: w: Any = None
    return A(m.TensorSpec(np.arange(4, dtype=np.int16), name="renamed"))
@case
def tensorspec_dtype(m):
    @dataclass
    class A: w: Any = None
    return A(m.TensorSpec([1, 2, 3], dtype="f32"))
@case
def uninit(m):
    @dataclass
    class A: w: Any = None
    return A(m.UninitializedTensor("f32", (2, 3)))
@case
def uninit_name(m):
    @dataclass
    class A: w: Any = None
    return A(m.UninitializedTensor("i8", [4], name="z"))
@case
def scalar_value(m):
    @dataclass
    class A: s: Any = None
    return A(m.ScalarValue(3, "i16"))
@case
def scalar_value_nodtype(m):
    @dataclass
    class A: s: Any = None
    return A(m.ScalarValue(3.5))
@case
def sizevar_obj(m):
    @dataclass
    class A: s: Any = None
    return A(m.SizeVar(12))
@case
def bitset(m):
    @dataclass
    class A: b: Any = None
    return A(m.Bitset([1, 0, 1, 1]))
@refused('OINF has no value type for NoneType')
def optional_none_tensor(m):
    @dataclass
    class A: w: Optional[np.ndarray] = field(default=None, metadata={"dtype": "f32", "shape": (2, 2)})
    return A()
@case
def strings_floats_lists(m):
    @dataclass
    class A:
        name: str = "m"
        lr: float = 0.5
        dims: list = field(default_factory=lambda: [1, 2, 3])
        flag: bool = True
    return A()
@case
def ndarray_field(m):
    @dataclass
    class A: w: np.ndarray = field(default_factory=lambda: np.ones((2, 3), np.float64))
    return A()
@case
def sizevars_dict(m):
    @dataclass
    class A: sizevars: dict = field(default_factory=lambda: {"B": 4, "T": 9})
    return A()
@case
def float_meta_dtype(m):
    @dataclass
    class A: x: float = field(default=2.5, metadata={"dtype": "f16"})
    return A()
@case
def optional_int(m):
    @dataclass
    class A: n: Optional[int] = 5
    return A()
@case
def big_int_any(m):
    @dataclass
    class A: x: Any = 2**40
    return A()
@refused("sizevar 'n' must be an integer in 0..2^64-1")
def negative_int_in_int(m):
    @dataclass
    class A: n: int = -1
    return A()


@case
def optional_none_declared_tensor(m):
    @dataclass
    class A: w: Optional[np.ndarray] = field(default=None, metadata={"tensor": True, "dtype": "f32", "shape": (2, 2)})
    return A()
@case
def annotated_none_declared_tensor(m):
    @dataclass
    class A: w: Annotated[Optional[list], "tensor", {"dtype": "i16", "shape": [3]}] = None
    return A()
@refused('declare its dtype and shape')
def none_tensor_without_shape(m):
    @dataclass
    class A: w: Any = field(default=None, metadata={"tensor": True, "dtype": "f32"})
    return A()
@case
def tensors_dict_of_lists(m):
    @dataclass
    class A: tensors: dict = field(default_factory=lambda: {"b": [1, 2], "a": [0.5]})
    return A()
@case
def tuple_tensor_with_dtype(m):
    @dataclass
    class A: w: tuple = field(default=(1, 2, 3), metadata={"dtype": "u8"})
    return A()
@refused("sizevar 'n' cannot be None")
def sizevar_none(m):
    @dataclass
    class A: n: Optional[int] = None
    return A()
@refused('OINF has no value type for NoneType')
def metadata_none(m):
    @dataclass
    class A: x: Any = None
    return A()
@case
def float_in_int_field(m):
    @dataclass
    class A: n: int = 3.0
    return A()
@refused("field 'n': 3.5 is not a valid int")
def fractional_float_in_int_field(m):
    @dataclass
    class A: n: int = 3.5
    return A()
@case
def renamed_tensor_sorts_by_field(m):
    @dataclass
    class A:
        a: Any = None
        b: Any = None
    return A(m.TensorSpec(np.ones(2, np.float32), name="z"), m.TensorSpec(np.zeros(2, np.float32), name="y"))
@case
def mixed_model(m):
    @dataclass
    class A:
        B: int = 2
        T: m.SizeVar = None
        name: str = "tiny"
        eps: float = 1e-5
        mask: Any = None
        w: Any = None
        cache: Any = None
        metadata: dict = field(default_factory=lambda: {"ver": 3, "ratio": 0.25})
    return A(T=m.SizeVar(7), mask=m.Bitset([1, 1, 0]), w=m.TensorSpec(np.arange(6, dtype=np.float32).reshape(2, 3)),
             cache=m.UninitializedTensor("f16", (2, 8)))


# ------------------------------------------------------------------ annotations convert values
# (the reference validates the instance against its annotations before exporting it)
@case
def bool_field_int(m):
    @dataclass
    class A: b: bool = 1
    return A()
@case
def bool_field_str(m):
    @dataclass
    class A: b: bool = "yes"
    return A()
@refused("field 'b': np.int64(2) is not a valid bool")
def bool_field_np_int2(m):
    @dataclass
    class A: b: bool = np.int64(2)
    return A()
@case
def bool_field_np_bool(m):
    @dataclass
    class A: b: bool = np.bool_(False)
    return A()
@case
def float_field_bool(m):
    @dataclass
    class A: x: float = True
    return A()
@case
def float_field_str(m):
    @dataclass
    class A: x: float = "1.5"
    return A()
@refused("is not a valid float")
def float_field_big_int(m):
    @dataclass
    class A: x: float = 2**1100
    return A()
@refused("field 's': 5 is not a valid str")
def str_field_int(m):
    @dataclass
    class A: s: str = 5
    return A()
@case
def str_field_bytes(m):
    @dataclass
    class A: s: str = b"abc"
    return A()
@case
def int_field_str(m):
    @dataclass
    class A: n: int = " 1_0.00 "
    return A()
@refused("is not a valid int")
def int_field_np_uint64_big(m):
    @dataclass
    class A: n: int = np.uint64(2**64 - 1)
    return A()
@case
def list_float_field_ints(m):
    @dataclass
    class A: x: list[float] = field(default_factory=lambda: [1, 2])
    return A()
@case
def list_int_field_floats(m):
    @dataclass
    class A: x: list[int] = field(default_factory=lambda: [1.0, 2.0])
    return A()
@refused("field 'x': [1.5] is not a valid list[int]")
def list_int_field_fraction(m):
    @dataclass
    class A: x: list[int] = field(default_factory=lambda: [1.5])
    return A()
@case
def list_field_ndarray(m):
    @dataclass
    class A: x: list = field(default_factory=lambda: np.array([1, 2]))
    return A()
@case
def sizevars_typed_dict(m):
    @dataclass
    class A: sizevars: dict[str, int] = field(default_factory=lambda: {"B": True, "C": "5"})
    return A()
@refused("field 'n': 4 is not a valid SizeVar")
def sizevar_annotation_int(m):
    @dataclass
    class A: n: m.SizeVar = 4
    return A()
@refused("field 'w': [1, 2] is not a valid ndarray")
def ndarray_annotation_list(m):
    @dataclass
    class A: w: np.ndarray = field(default_factory=lambda: [1, 2])
    return A()
@refused("field 'w': None is not a valid ndarray")
def ndarray_annotation_none_declared(m):
    @dataclass
    class A: w: np.ndarray = field(default=None, metadata={"tensor": True, "dtype": "f32", "shape": (2,)})
    return A()
@case
def frozen_dataclass(m):
    @dataclass(frozen=True)
    class A:
        n: int = 3
        name: str = "x"
    return A()


# ------------------------------------------------------------------ numpy values
@refused("a numpy bool is not exported")
def np_bool_in_metadata_dict(m):
    @dataclass
    class A: metadata: dict = field(default_factory=lambda: {"k": np.bool_(False)})
    return A()
@case
def np_bool_in_int(m):
    @dataclass
    class A: n: int = np.bool_(True)
    return A()
@case
def np_uint64_any(m):
    @dataclass
    class A: x: Any = np.uint64(2**64 - 1)
    return A()
@case
def np_float64_any(m):
    @dataclass
    class A: x: Any = np.float64(0.1)
    return A()
@case
def list_of_np_float16(m):
    @dataclass
    class A: x: list = field(default_factory=lambda: [np.float16(1), np.float16(2)])
    return A()
@case
def list_of_np_uint32(m):
    @dataclass
    class A: x: list = field(default_factory=lambda: [np.uint32(1), np.uint32(2)])
    return A()
@case
def ndarray_int64_in_metadata_dict(m):
    @dataclass
    class A: metadata: dict = field(default_factory=lambda: {"k": np.arange(3, dtype=np.int64)})
    return A()
@refused("a >f4 array is not in this machine's byte order")
def big_endian_tensor(m):
    @dataclass
    class A: w: Any = None
    return A(np.arange(3, dtype=">f4"))
@refused("a >i4 array is not in this machine's byte order")
def big_endian_metadata_array(m):
    @dataclass
    class A: metadata: dict = field(default_factory=lambda: {"k": np.arange(3, dtype=">i4")})
    return A()
@case
def big_endian_tensor_with_dtype(m):
    @dataclass
    class A: w: Any = None
    return A(m.TensorSpec(np.arange(3, dtype=">i4"), dtype="i32"))
@case
def noncontiguous_tensor(m):
    @dataclass
    class A: w: Any = None
    return A(np.arange(12, dtype=np.int32).reshape(3, 4)[:, ::2])
@case
def empty_and_0d_tensors(m):
    @dataclass
    class A:
        e: Any = None
        s: Any = None
    return A(np.zeros((0, 3), np.float32), np.array(7, np.int8))
@case
def bool_tensors(m):
    @dataclass
    class A:
        a: Any = None
        b: Any = None
    return A(np.array([True, False]), m.TensorSpec([True, False, True]))
@refused("OINF tensors are numeric or bool (got complex64)")
def complex_tensor(m):
    @dataclass
    class A: w: Any = None
    return A(np.ones(2, np.complex64))


# ------------------------------------------------------------------ dtype arguments
@case
def dtype_name_case_and_spaces(m):
    @dataclass
    class A: w: Any = None
    return A(m.TensorSpec([1, 2], dtype=" F16 "))
@case
def dtype_tags(m):
    @dataclass
    class A:
        w: Any = None
        u: Any = None
        s: Any = None
    return A(m.TensorSpec([1, 2], dtype=3), m.UninitializedTensor(10, (2,)), m.ScalarValue(3, 3))
@refused("OINF has no type <class 'numpy.float16'>")
def dtype_numpy_type(m):
    @dataclass
    class A: w: Any = None
    return A(m.TensorSpec([1, 2], dtype=np.float16))
@refused("OINF has no type 'q7'")
def dtype_unknown(m):
    @dataclass
    class A: s: Any = None
    return A(m.ScalarValue(3, "q7"))
@refused("OINF has no type 'zz'")
def dtype_unknown_on_str_field(m):
    @dataclass
    class A: x: str = field(default="a", metadata={"dtype": "zz"})
    return A()
@refused("OINF has no type 13")
def dtype_tag_not_numeric(m):
    @dataclass
    class A: w: Any = None
    return A(m.UninitializedTensor(13, (2,)))
@case
def dtype_does_not_apply_to_str_bool_bitset(m):
    @dataclass
    class A:
        s: Any = None
        b: bool = field(default=True, metadata={"dtype": "i16"})
        t: str = field(default="a", metadata={"dtype": "bf16"})
        z: Any = None
    return A(m.ScalarValue("abc", "i8"), z=m.ScalarValue(m.Bitset([1]), "u8"))
@case
def dtype_truncates_floats(m):
    @dataclass
    class A:
        w: list = field(default_factory=lambda: [1.5, 2.7], metadata={"dtype": "i8"})
        s: Any = None
    return A(s=m.ScalarValue(1.5, "i32"))
@refused("300 is outside u8's range")
def scalar_out_of_range(m):
    @dataclass
    class A: s: Any = None
    return A(m.ScalarValue(300, "u8"))
@refused("NaN or infinity has no integer value")
def scalar_nan_to_int(m):
    @dataclass
    class A: s: Any = None
    return A(m.ScalarValue(float("nan"), "i32"))


# ------------------------------------------------------------------ OINF v1 has no type 16-25
@case
def tensorspec_bf16(m):
    @dataclass
    class A: w: Any = None
    return A(m.TensorSpec([1.0, 2.0], dtype="bf16"))
@case
def tensorspec_i4(m):
    @dataclass
    class A: w: Any = None
    return A(m.TensorSpec([1, 2], dtype="i4"))
@case
def list_with_dtype_u4(m):
    @dataclass
    class A: w: list = field(default_factory=lambda: [1, 2, 3], metadata={"dtype": "u4"})
    return A()
@case
def uninit_bf16(m):
    @dataclass
    class A: w: Any = None
    return A(m.UninitializedTensor("bf16", (2,)))
@case
def uninit_tag16(m):
    @dataclass
    class A: w: Any = None
    return A(m.UninitializedTensor(16, (2,)))
@case
def none_tensor_bf16(m):
    @dataclass
    class A: w: Any = field(default=None, metadata={"tensor": True, "dtype": "bf16", "shape": (2,)})
    return A()
@case
def scalar_bf16(m):
    @dataclass
    class A: s: Any = None
    return A(m.ScalarValue(1.5, "bf16"))
@case
def scalar_f8(m):
    @dataclass
    class A: s: Any = None
    return A(m.ScalarValue(1.5, "f8"))
@case
def float_field_dtype_bf16(m):
    @dataclass
    class A: x: float = field(default=2.5, metadata={"dtype": "bf16"})
    return A()
@case
def ndarray_metadata_bf16(m):
    @dataclass
    class A: s: Any = None
    return A(m.ScalarValue([1.0, 2.0], "bf16"))


# ------------------------------------------------------------------ names
@case
def renamed_tensor_takes_a_used_name(m):
    @dataclass
    class A:
        a: Any = None
        z: Any = None
    return A(m.TensorSpec(np.ones(2, np.float32), name="z"), np.zeros(2, np.float32))
@case
def two_tensors_renamed_alike(m):
    @dataclass
    class A:
        a: Any = None
        b: Any = None
    return A(m.TensorSpec(np.ones(2, np.float32), name="q"), m.UninitializedTensor("f32", (2,), name="q"))
@case
def field_replaces_dict_items(m):
    @dataclass
    class A:
        B: int = 3
        k: str = "x"
        w: Any = None
        sizevars: dict = field(default_factory=lambda: {"B": 4})
        metadata: dict = field(default_factory=lambda: {"k": "y", "B": "z"})
        tensors: dict = field(default_factory=lambda: {"w": np.arange(3, dtype=np.float32)})
    return A(w=np.zeros(2, np.float32))
@case
def empty_tensorspec_name(m):
    @dataclass
    class A: w: Any = None
    return A(m.TensorSpec(np.ones(2, np.float32), name=""))
@refused("tensor name 'a b' must be non-empty and of [A-Za-z0-9._-]")
def bad_tensor_name(m):
    @dataclass
    class A: w: Any = None
    return A(m.TensorSpec(np.ones(2, np.float32), name="a b"))
@refused("metadata name 'a b' must be non-empty and of [A-Za-z0-9._-]")
def bad_metadata_key(m):
    @dataclass
    class A: metadata: dict = field(default_factory=lambda: {"a b": 1})
    return A()
@refused("STRING value 'hello world' must be of [A-Za-z0-9._-]")
def string_with_space(m):
    @dataclass
    class A: s: str = "hello world"
    return A()
@refused("an empty string is not exported")
def empty_string(m):
    @dataclass
    class A: s: str = ""
    return A()


# ------------------------------------------------------------------ size variables
@case
def sizevars_dict_bool_and_text(m):
    @dataclass
    class A: sizevars: dict = field(default_factory=lambda: {"B": True, "C": "4", "D": m.SizeVar(True)})
    return A()
@case
def sizevar_max(m):
    @dataclass
    class A: n: int = 2**64 - 1
    return A()
@refused("sizevar 'n' must be an integer in 0..2^64-1")
def sizevar_too_big(m):
    @dataclass
    class A: n: int = 2**64
    return A()
@refused("sizevar 's' cannot be True")
def sizevar_obj_bool(m):
    @dataclass
    class A: s: Any = None
    return A(m.SizeVar(True))
@refused("sizevar 'n' cannot be True")
def sizevar_marker_bool(m):
    @dataclass
    class A: n: Any = field(default=True, metadata={"sizevar": True})
    return A()
@case
def sizevar_obj_float(m):
    @dataclass
    class A: s: Any = None
    return A(m.SizeVar(3.7))
@case
def sizevars_dict_float(m):
    @dataclass
    class A: sizevars: dict = field(default_factory=lambda: {"B": 4.5})
    return A()


# ------------------------------------------------------------------ integers a type cannot hold
@case
def tensorspec_out_of_range(m):
    @dataclass
    class A: w: Any = None
    return A(m.TensorSpec(np.array([300, 1]), dtype="u8"))
@case
def list_with_dtype_out_of_range(m):
    @dataclass
    class A: w: list = field(default_factory=lambda: [1, 300], metadata={"dtype": "u8"})
    return A()
@case
def ndarray_metadata_out_of_range(m):
    @dataclass
    class A: s: Any = None
    return A(m.ScalarValue([1, 300], "u8"))
@case
def nan_in_integer_tensor(m):
    @dataclass
    class A: w: list = field(default_factory=lambda: [1.0, float("nan")], metadata={"dtype": "i32"})
    return A()


# ------------------------------------------------------------------ metadata values
@case
def metadata_lists(m):
    @dataclass
    class A:
        neg: list = field(default_factory=lambda: [-1, 200])
        bools: list = field(default_factory=lambda: [True, False])
        nested: list = field(default_factory=lambda: [[1.5, 2], [3, 4]])
        empty: list = field(default_factory=list)
        big: list = field(default_factory=lambda: [2**64 - 1])
    return A()
@refused("NDARRAY metadata: cannot make an array of list")
def ragged_metadata_list(m):
    @dataclass
    class A: x: list = field(default_factory=lambda: [[1], [2, 3]])
    return A()
@refused("NDARRAY metadata cannot hold <U1")
def string_metadata_list(m):
    @dataclass
    class A: x: list = field(default_factory=lambda: ["a", "b"])
    return A()
@refused("OINF has no value type for dict")
def nested_dict_metadata(m):
    @dataclass
    class A: metadata: dict = field(default_factory=lambda: {"k": {"a": 1}})
    return A()
@refused("does not fit 64 bits")
def int_too_big_any(m):
    @dataclass
    class A: x: Any = 2**64
    return A()
@refused("expected a dataclass instance")
def not_a_dataclass(m):
    class A: x = 1
    return A()
@case
def property_named_metadata(m):
    @dataclass
    class A:
        x: int = 1
        @property
        def metadata(self): return {"p": 2}
    return A()


# ------------------------------------------------------------------ the deliberate differences
def _rules(path) -> set:
    return {v.rule for v in ours.validate_file(str(path)).errors}


def _breaks_spec(rule):
    """The reference writes a file the OINF spec forbids (ours' reader names the rule)."""
    def check(ref_file, ours_file):
        assert rule in _rules(ref_file)
    return check


def _holds(what, value):
    """The reference writes a valid file holding ``value`` where another was given."""
    def check(ref_file, ours_file):
        assert _rules(ref_file) == set()
        with codec.open(str(ref_file)) as r:
            got = what(r)
        assert np.array_equal(got, value), got
    return check


def _ours_writes(what, value):
    """The reference fails on a valid instance; ours writes it."""
    def check(ref_file, ours_file):
        with codec.open(str(ours_file)) as r:
            assert r.validate(full=True).ok
            assert what(r) == value
    return check


@dataclass(frozen=True)
class Differs:
    reason: str
    ours_refuses: bool  # else the reference fails and ours writes
    check: Callable


_LATER = ("OINF v1 has type tags 1-15 (tensors 1-12); the reference writes its later types "
          "(bf16 16, f8 17, i4 18 ... t1 25), a file OINF v1 readers refuse")
_WRAPS = "an integer outside the declared type's range (or NaN) becomes another number without an error"
DIFFERENT = {
    "tensorspec_bf16": Differs(_LATER, True, _breaks_spec(Rule.TENSOR_DTYPE)),
    "tensorspec_i4": Differs(_LATER, True, _breaks_spec(Rule.TENSOR_DTYPE)),
    "list_with_dtype_u4": Differs(_LATER, True, _breaks_spec(Rule.TENSOR_DTYPE)),
    "uninit_bf16": Differs(_LATER, True, _breaks_spec(Rule.TENSOR_DTYPE)),
    "uninit_tag16": Differs(_LATER, True, _breaks_spec(Rule.TENSOR_DTYPE)),
    "none_tensor_bf16": Differs(_LATER, True, _breaks_spec(Rule.TENSOR_DTYPE)),
    "scalar_bf16": Differs(_LATER, True, _breaks_spec(Rule.VALUE_TYPE)),
    "scalar_f8": Differs(_LATER, True, _breaks_spec(Rule.VALUE_TYPE)),
    "float_field_dtype_bf16": Differs(_LATER, True, _breaks_spec(Rule.VALUE_TYPE)),
    "ndarray_metadata_bf16": Differs(_LATER, True, _breaks_spec(Rule.NDARRAY)),
    "renamed_tensor_takes_a_used_name": Differs(
        "names are unique within a table (spec; DECISIONS.md): the reference writes two tensors named 'z'",
        True, _breaks_spec(Rule.DUPLICATE)),
    "two_tensors_renamed_alike": Differs(
        "names are unique within a table: the reference writes two tensors named 'q'", True, _breaks_spec(Rule.DUPLICATE)),
    "tensorspec_out_of_range": Differs(_WRAPS + ": the reference stores 300 as 44 in u8", True,
                                       _holds(lambda r: r.tensor("w"), [44, 1])),
    "list_with_dtype_out_of_range": Differs(_WRAPS + ": the reference stores 300 as 44 in u8", True,
                                            _holds(lambda r: r.tensor("w"), [1, 44])),
    "ndarray_metadata_out_of_range": Differs(_WRAPS + ": the reference stores 300 as 44 in u8", True,
                                             _holds(lambda r: r.metadata["s"], [1, 44])),
    "nan_in_integer_tensor": Differs(_WRAPS + ": the reference stores NaN as -2^31", True,
                                     _holds(lambda r: r.tensor("w"), [1, -2**31])),
    "sizevar_obj_float": Differs("a size variable is an integer: the reference truncates 3.7 to 3 "
                                 "(it refuses 3.5 in an int field)", True, _holds(lambda r: r.sizevars["s"], 3)),
    "sizevars_dict_float": Differs("a size variable is an integer: the reference truncates 4.5 to 4", True,
                                   _holds(lambda r: r.sizevars["B"], 4)),
    "frozen_dataclass": Differs("the reference fails on any frozen dataclass (TypeError from its validation "
                                "step); nothing in OINF or its API excludes them", False,
                                _ours_writes(lambda r: (r.sizevars, r.metadata), ({"n": 3}, {"name": "x"}))),
}


def _export(lib, make, path):
    """The file's bytes, or the exception the export raised."""
    try:
        lib.write_oinf(make(lib), str(path))
    except Exception as e:  # noqa: BLE001 -- the refusal is what is compared
        return e
    return path.read_bytes()


@pytest.mark.filterwarnings("ignore:invalid value encountered in cast:RuntimeWarning")  # the reference's NaN cast
@pytest.mark.parametrize("name", sorted(CASES))
def test_ours_writes_what_openinfer_oinf_writes(tmp_path, name):
    make = CASES[name]
    ref_file, ours_file = tmp_path / "ref.oinf", tmp_path / "ours.oinf"
    want = _export(ref, make, ref_file)
    got = _export(ours, make, ours_file)
    diff = DIFFERENT.get(name)
    if diff is not None:
        if diff.ours_refuses:  # the reference writes a file; ours refuses it, writing nothing
            assert isinstance(want, bytes), want
            assert isinstance(got, E.UsageError), got
            assert not ours_file.exists()
        else:  # the reference fails; ours writes
            assert isinstance(want, Exception) and not isinstance(want, RefusedByReference), want
            assert isinstance(got, bytes), got
        diff.check(ref_file, ours_file)
        return
    if name in REFUSED:
        assert isinstance(want, Exception), "openinfer-oinf writes this file"
        assert isinstance(got, E.UsageError), got
        assert REFUSED[name] in str(got)
        assert not ours_file.exists()
        return
    assert isinstance(want, bytes), f"openinfer-oinf refuses: {want!r}"
    if isinstance(got, Exception):
        raise got
    assert got == want
    with codec.open(str(ours_file)) as r:  # and it reads back and validates
        assert r.validate(full=True).ok


def test_every_listed_situation_is_compared():
    assert set(DIFFERENT) <= set(CASES) and set(REFUSED) <= set(CASES)
    assert not set(DIFFERENT) & set(REFUSED)
    assert len(CASES) >= 100


def test_a_declared_tensor_without_a_value_is_written_without_data(tmp_path):
    # the old bug: a 0-d tensor holding NaN
    p = tmp_path / "u.oinf"
    ours.write_oinf(CASES["optional_none_declared_tensor"](ours), str(p))
    with codec.open(str(p)) as r:
        t = r.tensor("w")
        assert r.tensors["w"].extra["has_data"] is False
    assert t == ours.UninitializedTensor("f32", (2, 2))


def test_the_placeholders_take_the_reference_arguments():
    assert ours.TensorSpec([1, 2], "i8", "n").dtype == "i8"
    assert ours.TensorSpec(data=[1], dtype=10, name="x").dtype == "f32"
    assert ours.TensorSpec(array=[1]).data == [1]
    assert ours.UninitializedTensor("F32 ", (1,), name="k") == ours.UninitializedTensor("f32", (1,), "k")
    assert ours.ScalarValue(3).dtype is None and ours.ScalarValue(3, "i16").dtype == "i16"
    with pytest.raises(E.UsageError, match="tag 16 is not one of the spec's tags 1-15"):
        ours.TensorSpec([1.0], "bf16")
