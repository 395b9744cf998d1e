from dataclasses import dataclass
import numpy as np

from codec.formats.oinf import TensorSpec, write_oinf

@dataclass
class MinimalModel:
    B: int
    a: TensorSpec

def build_minimal() -> MinimalModel:
    rng = np.random.default_rng(1)
    B = 1024
    a = rng.uniform(-1.0, 1.0, size=B).astype(np.float32)
    return MinimalModel(B=B, a=TensorSpec(a))

write_oinf(build_minimal(), "minimal_model.oinf")
