"""Progress bars for long work: shown on a terminal, silent when piped (or when told)."""
from __future__ import annotations

import os
import sys


class Progress:
    """``with Progress(total, "validate x") as bar: bar.update(n)``.

    ``enabled=None`` means: only when stderr is a terminal and MODELCODEC_PROGRESS is not 0.
    """

    def __init__(self, total: int, desc: str, enabled: bool | None = None):
        if enabled is None:
            enabled = sys.stderr.isatty() and os.environ.get("MODELCODEC_PROGRESS", "1") != "0"
        self._bar = None
        if enabled and total > 0:
            from tqdm import tqdm
            self._bar = tqdm(total=total, desc=desc, unit="B", unit_scale=True, unit_divisor=1024,
                             leave=False, file=sys.stderr, mininterval=0.2)

    def update(self, n: int) -> None:
        if self._bar is not None:
            self._bar.update(n)

    def __enter__(self) -> "Progress":
        return self

    def __exit__(self, *exc) -> None:
        if self._bar is not None:
            self._bar.close()
