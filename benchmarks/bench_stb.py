"""STB benchmark: write and read ~256 MiB in 200 tensors against raw tofile / np.memmap.

    .venv/bin/python benchmarks/bench_stb.py [--quick] [--out FILE]
"""
import sys

from _rows import main_for


def as_list(tensors: dict) -> dict:
    return {i: a for i, a in enumerate(tensors.values())}  # STB keys tensors by id


if __name__ == "__main__":
    sys.exit(main_for("stb", __doc__, 200, sys.argv[1:], transform=as_list))
