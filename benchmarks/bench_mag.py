"""MAG benchmark: write and read ~256 MiB in 200 tensors against raw tofile / np.memmap.

    .venv/bin/python benchmarks/bench_mag.py [--quick] [--out FILE]
"""
import sys

from _rows import main_for

if __name__ == "__main__":
    sys.exit(main_for("mag", __doc__, 200, sys.argv[1:]))
