"""Small shared harness for modelcodec's format benchmarks (``bench_<format>.py``).

What it gives a benchmark script:

* :func:`parse_args` – the common flags (``--quick``, ``--out``, ``--reps``, ``--keep``, ``--workdir``,
  ``--codec-root`` to A/B a patched copy of codec/ without touching this checkout).
* :func:`workdir` – a scratch directory under ``benchmarks/_work/`` (git-ignored), removed afterwards;
  :func:`fresh` deletes a write's outputs and syncs (TRIM kept out of the next timing), :func:`warm`.
* :func:`compare` – times a modelcodec contender and its peer *interleaved* (A B A B …, so a
  background process slows both alike), after untimed warm-up runs (warm page cache), and returns
  the medians and bests.
* :class:`Row` / :class:`Table` – one result row (what, modelcodec value, peer, peer value, ratio,
  target, met) and the markdown rendering with an environment header.
* :func:`child_peak_rss` – run a snippet in a fresh Python and return its peak RSS;
  :func:`child_compare` – :func:`compare` for snippets, each run in a fresh interpreter (time
  taken inside the child after its imports, peak RSS, whole-process wall time).
* :func:`env_info` / :func:`git_state` / :class:`LoadWatch` – versions, CPU count, the commit under
  test (and uncommitted edits), and whether the machine was busy.

Nothing here knows about a particular format.
"""
from __future__ import annotations

import argparse
import gc
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time
from contextlib import contextmanager
from dataclasses import dataclass, field
from importlib import metadata as _md
from typing import Callable, Iterator

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
WORK_ROOT = os.path.join(HERE, "_work")

MiB = 1 << 20
GiB = 1 << 30


# ----------------------------------------------------------------------------- arguments
def import_codec(root: str | None):
    """The ``codec`` package to measure: this checkout's, or the one under ``root`` (``--codec-root``;
    any ``codec``/``schemas`` modules already imported are dropped first)."""
    if root:
        for m in [m for m in sys.modules if m.split(".")[0] in ("codec", "schemas")]:
            del sys.modules[m]
        sys.path.insert(0, os.path.abspath(root))
    import codec
    return codec


def parse_args(description: str, argv=None, extra: Callable[[argparse.ArgumentParser], None] | None = None):
    p = argparse.ArgumentParser(description=description)
    p.add_argument("--quick", action="store_true", help="small sizes, few repetitions (smoke test in seconds)")
    p.add_argument("--out", metavar="FILE", help="also write the markdown report to FILE")
    p.add_argument("--reps", type=int, default=None, help="timed repetitions per contender (default 5, quick 3)")
    p.add_argument("--keep", action="store_true", help="keep the work directory (prints its path)")
    p.add_argument("--codec-root", metavar="DIR", default=None,
                   help="import codec/ and schemas/ from DIR instead of this checkout (A/B a patched tree)")
    p.add_argument("--workdir", metavar="DIR", default=None,
                   help=f"parent of the scratch directory (default {os.path.relpath(WORK_ROOT, REPO)})")
    if extra:
        extra(p)
    a = p.parse_args(argv)
    if a.reps is None:
        a.reps = 3 if a.quick else 5
    return a


@contextmanager
def workdir(parent: str | None = None, keep: bool = False) -> Iterator[str]:
    parent = parent or WORK_ROOT
    os.makedirs(parent, exist_ok=True)
    d = tempfile.mkdtemp(prefix="bench-", dir=parent)
    try:
        yield d
    finally:
        if keep:
            print(f"# work files kept in {d}", file=sys.stderr)
        else:
            shutil.rmtree(d, ignore_errors=True)
            try:
                os.rmdir(parent)  # only when empty (nobody else's work inside)
            except OSError:
                pass


def rm(path: str) -> None:
    try:
        os.unlink(path)
    except FileNotFoundError:
        pass


def fresh(*paths: str) -> None:
    """Delete outputs before a timed write, then ``sync``: this filesystem is mounted with
    ``discard``, so freeing a deleted file's blocks (TRIM) would otherwise land in the next
    journal commit -- inside the *next* contender's fsync."""
    for p in paths:
        rm(p)
    if hasattr(os, "sync"):
        os.sync()


def fsync_path(path: str) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def warm(path: str, piece: int = 64 * MiB) -> None:
    """Read a file once so it sits in the page cache (benchmarks here are warm-cache)."""
    with open(path, "rb", buffering=0) as f:
        buf = bytearray(piece)
        while f.readinto(buf):
            pass


# ----------------------------------------------------------------------------- timing
@dataclass
class Timing:
    name: str
    times: list[float] = field(default_factory=list)
    #: filled by :func:`child_compare`: each run's peak RSS (MB), whole-process wall time (start-up
    #: and imports included, measured by the parent) and the JSON the child reported
    rss: list[float] = field(default_factory=list)
    wall: list[float] = field(default_factory=list)
    reports: list[dict] = field(default_factory=list)

    @property
    def rss_median(self) -> float:
        return statistics.median(self.rss)

    @property
    def wall_median(self) -> float:
        return statistics.median(self.wall)

    @property
    def median(self) -> float:
        return statistics.median(self.times)

    @property
    def best(self) -> float:
        return min(self.times)


def _timed(fn: Callable[[], object], setup: Callable[[], object] | None) -> float:
    if setup is not None:
        setup()
    gc.collect()
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


def compare(contenders: dict[str, Callable[[], object]], *, reps: int, warmup: int = 1,
            setup: Callable[[], object] | None = None) -> dict[str, Timing]:
    """Time every contender ``reps`` times, interleaved round-robin, after ``warmup`` untimed
    rounds.  ``setup`` runs before every call, outside the timed region (e.g. delete the output
    file so each write creates a new file)."""
    out = {k: Timing(k) for k in contenders}
    for _ in range(warmup):
        for fn in contenders.values():
            _timed(fn, setup)
    for r in range(reps):
        order = list(contenders.items())
        if r % 2:  # alternate the order too, so neither side always runs first
            order.reverse()
        for k, fn in order:
            out[k].times.append(_timed(fn, setup))
    return out


# ----------------------------------------------------------------------------- results
@dataclass
class Row:
    """One line of the report.  ``value``/``peer_value`` are seconds unless ``unit`` says otherwise.

    ``limit`` is the target as a ratio bound (``ratio <= limit``; ``< 1`` for "faster than") or,
    with ``absolute=True``, a bound on ``value`` itself (e.g. peak RSS < 100 MB).  ``limit=None``
    marks an informational row (no target)."""
    what: str
    value: float
    peer: str = ""
    peer_value: float | None = None
    target: str = ""
    limit: float | None = None
    strict: bool = False        # True: ratio < limit (faster than); False: ratio <= limit
    absolute: bool = False
    unit: str = "s"
    best: float | None = None   # best-of-reps, shown next to the median
    peer_best: float | None = None
    note: str = ""

    @property
    def ratio(self) -> float | None:
        if not self.peer_value:
            return None
        return self.value / self.peer_value

    @property
    def best_ratio(self) -> float | None:
        if self.best is None or not self.peer_best:
            return None
        return self.best / self.peer_best

    @property
    def met(self) -> bool | None:
        if self.limit is None:
            return None
        x = self.value if self.absolute else self.ratio
        if x is None:
            return None
        return x < self.limit if self.strict else x <= self.limit


def fmt_value(v: float | None, unit: str) -> str:
    if v is None:
        return "—"
    if unit == "s":
        if v < 1e-3:
            return f"{v * 1e6:.0f} µs"
        if v < 1:
            return f"{v * 1e3:.1f} ms"
        return f"{v:.3f} s"
    if unit == "MB":
        return f"{v:.1f} MB"
    return f"{v:g} {unit}"


def _cell(median: float | None, best: float | None, unit: str) -> str:
    s = fmt_value(median, unit)
    if best is not None and median is not None and unit == "s":
        s += f" (best {fmt_value(best, unit)})"
    return s


class Table:
    def __init__(self, title: str):
        self.title = title
        self.rows: list[Row] = []
        self.notes: list[str] = []

    def add(self, row: Row) -> Row:
        self.rows.append(row)
        m = row.met
        flag = "" if m is None else ("  [met]" if m else "  [NOT met]")
        r = f"{row.ratio:.3f}x" if row.ratio is not None else "—"
        print(f"  {row.what}: {fmt_value(row.value, row.unit)} vs {row.peer or '—'} "
              f"{fmt_value(row.peer_value, row.unit)} -> {r}{flag}", flush=True)
        return row

    def markdown(self) -> str:
        head = ["#", "what", "modelcodec (median)", "peer", "peer (median)", "ratio (median; best)",
                "target", "met"]
        lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
        for i, r in enumerate(self.rows, 1):
            if r.ratio is None:
                ratio = "—"
            else:
                ratio = f"{r.ratio:.2f}x"
                if r.best_ratio is not None:
                    ratio += f"; {r.best_ratio:.2f}x"
            met = "—" if r.met is None else ("yes" if r.met else "**no**")
            what = r.what + (f" ({r.note})" if r.note else "")
            lines.append("| " + " | ".join([str(i), what, _cell(r.value, r.best, r.unit), r.peer or "—",
                                            _cell(r.peer_value, r.peer_best, r.unit), ratio,
                                            r.target or "—", met]) + " |")
        return "\n".join(lines)


# ----------------------------------------------------------------------------- environment
def _ver(dist: str) -> str:
    try:
        return _md.version(dist)
    except _md.PackageNotFoundError:
        return "not installed"


def git_state(root: str = REPO, paths=("codec", "schemas")) -> str:
    """Commit of the code under test, and whether ``paths`` have uncommitted edits (the numbers
    belong to the working tree as it was when the benchmark ran)."""
    try:
        head = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=root, capture_output=True,
                              text=True, timeout=10).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain", "--", *paths], cwd=root, capture_output=True,
                               text=True, timeout=10).stdout.split("\n")
    except (OSError, subprocess.SubprocessError):
        return "unknown"
    dirty = [ln[3:] for ln in dirty if ln.strip()]
    return head + (f" + uncommitted edits in {', '.join(dirty)}" if dirty else " (clean)")


def env_info(packages=("numpy", "blake3", "safetensors", "gguf", "msgpack", "zstandard", "modelcodec")) -> dict:
    info = {
        "python": platform.python_version(),
        "platform": platform.platform(),
        "cpu_count": os.cpu_count(),
        "usable_cpus": len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count(),
    }
    try:
        import psutil
        info["ram_gib"] = round(psutil.virtual_memory().total / GiB, 1)
    except ImportError:
        pass
    for p in packages:
        info[p] = _ver(p)
    return info


class LoadWatch:
    """Samples the load average and the busiest *other* processes at start and end, so the report
    can say honestly whether something else (a fuzzer, a test run) competed for the 2 cores."""

    def __init__(self):
        self.samples: list[str] = []
        self.busy = False

    def sample(self, label: str) -> None:
        load = os.getloadavg()
        others = []
        try:
            import psutil
            me = os.getpid()
            procs = [p for p in psutil.process_iter(["pid", "name", "cmdline"]) if p.info["pid"] != me]
            for p in procs:
                try:
                    p.cpu_percent(None)
                except psutil.Error:
                    pass
            time.sleep(0.5)
            for p in procs:
                try:
                    c = p.cpu_percent(None)
                except psutil.Error:
                    continue
                if c >= 20:
                    cmd = " ".join(p.info["cmdline"] or [p.info["name"] or "?"])[:60]
                    others.append(f"{cmd} ({c:.0f}% CPU)")
        except ImportError:
            pass
        if others or load[0] > 0.75:
            self.busy = True
        self.samples.append(f"{label}: load average {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}; "
                            f"other busy processes: {', '.join(others) if others else 'none'}")

    def verdict(self) -> str:
        return ("machine was BUSY during at least one sample (numbers are pessimistic)" if self.busy
                else "machine looked idle at the samples")


# ----------------------------------------------------------------------------- subprocesses
def child_peak_rss(code: str, *args: str, timeout: float = 600, pythonpath: str | None = None) -> dict:
    """Run ``code`` in a fresh interpreter (cwd = ``pythonpath`` or the repository root, so that
    tree's codec is imported; ``sys.argv[1:] = args``; paths in ``args`` should be absolute).

    The snippet may print one JSON object as its last stdout line; it is returned, completed with
    ``peak_rss_mb`` (the child's VmHWM: peak resident set, mapped file pages included) and
    ``base_rss_mb`` (VmHWM when the snippet called ``mark()``, e.g. right after its imports).
    """
    prelude = textwrap.dedent("""
        import json as _json, sys as _sys
        def _hwm():
            # VmHWM: peak RSS of this address space.  Not ru_maxrss: Linux carries the parent's
            # RSS at fork into the child's ru_maxrss across exec, which would report the parent.
            with open("/proc/self/status") as f:
                for line in f:
                    if line.startswith("VmHWM:"):
                        return int(line.split()[1]) / 1024
        _base = [None]
        def mark():
            _base[0] = _hwm()
        def report(**kw):
            kw["peak_rss_mb"] = _hwm()
            kw["base_rss_mb"] = _base[0]
            print(_json.dumps(kw))
    """)
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (pythonpath, REPO, env.get("PYTHONPATH")) if p)
    # `python -c` puts the cwd first on sys.path: run in the tree under test
    proc = subprocess.run([sys.executable, "-c", prelude + textwrap.dedent(code), *args], cwd=pythonpath or REPO,
                          capture_output=True, text=True, timeout=timeout, env=env)
    if proc.returncode != 0:
        raise RuntimeError(f"child failed ({proc.returncode}):\n{proc.stderr[-3000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def child_compare(contenders: dict[str, tuple], *, reps: int, warmup: int = 1, setup: Callable[[], object] | None = None,
                  pythonpath: str | None = None, timeout: float = 600) -> dict[str, Timing]:
    """Like :func:`compare`, but each contender is ``(code, *args)`` run by :func:`child_peak_rss`
    in a fresh interpreter, interleaved (A B C, then C B A, ...) after ``warmup`` untimed rounds.
    The snippet must ``report(seconds=...)``: the time it measured itself after its imports (and
    ``mark()``); the parent adds the child's peak RSS and its whole-process wall time."""
    out = {k: Timing(k) for k in contenders}

    def once(spec: tuple) -> tuple[dict, float]:
        if setup is not None:
            setup()
        t0 = time.perf_counter()
        r = child_peak_rss(spec[0], *spec[1:], timeout=timeout, pythonpath=pythonpath)
        return r, time.perf_counter() - t0

    for _ in range(warmup):
        for spec in contenders.values():
            once(spec)
    for i in range(reps):
        order = list(contenders.items())
        if i % 2:
            order.reverse()
        for k, spec in order:
            r, wall = once(spec)
            out[k].times.append(r["seconds"])
            out[k].rss.append(r["peak_rss_mb"])
            out[k].wall.append(wall)
            out[k].reports.append(r)
    return out


# ----------------------------------------------------------------------------- report
def render(title: str, table: Table, env: dict, watch: LoadWatch, params: dict, elapsed: float) -> str:
    out = [f"## {title}", ""]
    out.append("Environment: " + ", ".join(f"{k} {v}" for k, v in env.items()))
    out.append("")
    out.append("Parameters: " + ", ".join(f"{k} = {v}" for k, v in params.items()))
    out.append("")
    out.append(table.markdown())
    out.append("")
    for n in table.notes:
        out.append(f"- {n}")
    out.append(f"- Machine load: {watch.verdict()}.")
    for s in watch.samples:
        out.append(f"  - {s}")
    out.append(f"- Total benchmark time: {elapsed:.0f} s.")
    return "\n".join(out) + "\n"


def publish(report: str, out: str | None) -> None:
    """Print the report, and write it to ``out`` (the --out file) when given."""
    print("\n" + report)
    if out:
        with open(out, "w", encoding="utf-8") as f:
            f.write(report)
        print(f"# wrote {out}")
