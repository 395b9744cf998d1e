"""Memory budgets asserted in a child process (never in the test's own): how much a call grows
the peak resident memory of a fresh interpreter."""
import json
import subprocess
import sys

#: the child's peak resident memory so far, in MB (Linux: VmHWM)
_HWM = "hwm = lambda: int(next(l for l in open('/proc/self/status') if l.startswith('VmHWM')).split()[1]) >> 10"


def peak_growth_mb(call: str, *, prelude: tuple = (), timeout: int = 240) -> int:
    """How many MB the statement ``call`` adds to a fresh process' peak RSS (``prelude``:
    lines run first, after ``import json, time, codec``)."""
    code = "\n".join(["import json, time, codec", *prelude, _HWM, "before = hwm()",
                      call, "print(json.dumps({'before': before, 'after': hwm()}))"])
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=timeout)
    assert r.returncode == 0, r.stderr[-2000:]
    got = json.loads(r.stdout)
    return got["after"] - got["before"]


def convert_peak_growth_mb(src: str, dst: str, *, prelude: tuple = (), timeout: int = 240) -> int:
    """How many MB ``codec.convert(src, dst)`` adds to a fresh process' peak RSS."""
    return peak_growth_mb(f"codec.convert({src!r}, {dst!r})", prelude=prelude, timeout=timeout)
