from dataclasses import dataclass
import numpy as np

from codec.formats.oinf import TensorSpec, UninitializedTensor, write_oinf

@dataclass
class ExampleModel:
    D: int
    B: int
    a: TensorSpec
    x: TensorSpec
    W_0: TensorSpec
    mode: str
    y: UninitializedTensor
    kernel: TensorSpec

def build_example() -> ExampleModel:
    rng = np.random.default_rng(0)
    D = 128
    B = 1024
    a = rng.normal(size=B).astype(np.float16)
    x = np.array(10.35, dtype=np.float32)
    w0 = rng.normal(size=D).astype(np.float32)
    kernel = rng.integers(0, 256, size=(D, D), dtype=np.uint8)
    return ExampleModel(
        D=D,
        B=B,
        a=TensorSpec(a),
        x=TensorSpec(x),
        W_0=TensorSpec(w0, name="W.0"),
        mode="clamp_up",
        y=UninitializedTensor(dtype="i16", shape=()),
        kernel=TensorSpec(kernel),
    )

write_oinf(build_example(), "simple_model.oinf")
