"""OINF dataclass export: ours against openinfer-oinf 0.1.1 (its ``dataclass_to_oinf`` module,
the reference implementation of the OINF dataclass API, a test dependency).  The same dataclass
definitions are exported by both -- each with its own placeholder classes (``TensorSpec``,
``UninitializedTensor``, ``ScalarValue``, ``SizeVar``, ``Bitset``), built with the same
arguments -- and the files are compared byte for byte; where the reference refuses, ours must
refuse too.  The deliberate differences are listed in DIFFERENT, each with its reason (also in
the README), and asserted as such."""
import dataclasses
from dataclasses import dataclass, field
from typing import Annotated, Any, Optional

import numpy as np
import pytest

import dataclass_to_oinf as ref  # openinfer-oinf, a test dependency

import codec
from codec import errors as E
from codec.formats import oinf as ours

CASES: dict = {}
def case(f): CASES[f.__name__] = f; return f

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
@case
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
@case
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
@case
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
@case
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
@case
def sizevar_none(m):
    @dataclass
    class A: n: Optional[int] = None
    return A()
@case
def metadata_none(m):
    @dataclass
    class A: x: Any = None
    return A()
@case
def float_in_int_field(m):
    @dataclass
    class A: n: int = 3.0
    return A()
@case
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


#: situations where ours deliberately differs, and why
DIFFERENT = {
    # BOOL is the OINF type of a numpy bool as much as of a Python bool; the reference checks
    # isinstance(value, bool) only and refuses numpy's
    "np_bool_any": "ours writes BOOL; openinfer-oinf refuses numpy bools",
}


def _export(lib, make, path):
    inst = make(lib)
    lib.write_oinf(inst, str(path))
    return path.read_bytes()


@pytest.mark.parametrize("name", sorted(CASES))
def test_ours_writes_what_openinfer_oinf_writes(tmp_path, name):
    make = CASES[name]
    try:
        want = _export(ref, make, tmp_path / "ref.oinf")
    except Exception as e:  # the reference refuses: ours must refuse with a UsageError
        if name in DIFFERENT:
            _export(ours, make, tmp_path / "ours.oinf")
            with codec.open(str(tmp_path / "ours.oinf")) as r:
                assert r.validate().ok
            return
        with pytest.raises(E.UsageError):
            _export(ours, make, tmp_path / "ours.oinf")
        return
    got = _export(ours, make, tmp_path / "ours.oinf")
    assert got == want
    with codec.open(str(tmp_path / "ours.oinf")) as r:  # and it reads back and validates
        assert r.validate(full=True).ok


def test_enough_situations_are_compared():
    assert len(CASES) >= 40


def test_a_declared_tensor_without_a_value_is_written_without_data(tmp_path):
    # the old bug: a 0-d tensor holding NaN
    p = tmp_path / "u.oinf"
    ours.write_oinf(CASES["optional_none_declared_tensor"](ours), str(p))
    with codec.open(str(p)) as r:
        t = r.tensor("w")
    assert t == ours.UninitializedTensor("f32", (2, 2))


def test_the_placeholders_take_the_reference_arguments():
    assert ours.TensorSpec([1, 2], "i8", "n").dtype == "i8"
    assert ours.TensorSpec(data=[1], dtype=np.float32, name="x").name == "x"
    assert ours.TensorSpec(array=[1]).data == [1]
    assert ours.UninitializedTensor("f32", (1,), name="k").name == "k"
    assert ours.ScalarValue(3).dtype is None and ours.ScalarValue(3, "i16").dtype == "i16"
