"""Run one benchmark several times and report each row's ratio in every run and its median.

    .venv/bin/python benchmarks/repeat.py aero                 # 5 runs of bench_aero.py (full)
    .venv/bin/python benchmarks/repeat.py aero --runs 3 -- --quick

A target is judged on the median of the runs' ratios (the runs are sequential, so a busy
moment weighs on one run, not on the verdict).  With an odd number of runs the median is one
run's ratio, and the verdict is the one that run's table gave it: the targets are the
benchmark's own, never written here.  Writes ``results/<name>.md`` (the last run's full report)
and ``results/<name>_runs.md`` (this summary); ``--out-dir`` puts them elsewhere.
"""
from __future__ import annotations

import argparse
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
_RATIO = re.compile(r"^\s*([0-9.]+)x")


def rows_of(report: str) -> list[dict]:
    """The rows of the harness' markdown table in ``report`` (``_harness.Table.markdown``)."""
    rows, head = [], None
    for line in report.splitlines():
        if not line.startswith("|"):
            continue
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if cells and cells[0] == "#":
            head = cells
        elif head and cells and cells[0].isdigit() and len(cells) == len(head):
            d = dict(zip(head, cells))
            m = _RATIO.match(d.get("ratio (median; best)", ""))
            rows.append({"what": d["what"], "ratio": float(m[1]) if m else None,
                         "target": d.get("target", "—"), "met": d.get("met", "—")})
    return rows


def summary(name: str, runs: list[list[dict]], started: str, seconds: float) -> str:
    """The markdown summary of ``runs`` (each a list of rows, the same rows in the same order)."""
    n = len(runs)
    lines = [f"## {name}: {n} runs, each row's ratio in every run and their median", "",
             f"Runs of `benchmarks/bench_{name}.py` one after the other, started {started} "
             f"({seconds / 60:.0f} min in all); each run's own table judges its rows, and a target is "
             f"judged here on the median ratio (with an odd number of runs, the verdict of the run "
             f"whose ratio is the median).  The last run's full report is above.", "",
             "| # | what | " + " | ".join(f"run {i + 1}" for i in range(n)) + " | median | target | met |",
             "|" + "---|" * (n + 5)]
    for k, row in enumerate(runs[-1]):
        same = [r[k] for r in runs if k < len(r) and r[k]["what"].split(" (")[0] == row["what"].split(" (")[0]]
        ratios = [r["ratio"] for r in same if r["ratio"] is not None]
        if len(same) != n:
            cells, med, met = ["—"] * n, "—", "—"
        elif len(ratios) != n:  # (a bound on a value, no peer: each run's verdict, the most common)
            cells, med = [r["met"] for r in same], "—"
            met = max(cells, key=cells.count) if len(set(cells)) < n or n == 1 else "—"
        else:
            cells = [f"{x:.2f}x" for x in ratios]
            m = statistics.median(ratios)
            med = f"{m:.2f}x"
            at = [r for r in same if r["ratio"] == m]
            met = at[0]["met"] if at else "—"  # (an even number of runs: no run holds the median)
        lines.append(f"| {k + 1} | {row['what']} | " + " | ".join(cells) + f" | {med} | {row['target']} | {met} |")
    return "\n".join(lines) + "\n"


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("name", help="the benchmark: NAME runs benchmarks/bench_NAME.py")
    p.add_argument("--runs", type=int, default=5, help="how many runs (default 5; odd: the median is a run's)")
    p.add_argument("--out-dir", default=os.path.join(HERE, "results"), help="where the reports go")
    p.epilog = "arguments after -- go to the benchmark"
    argv = sys.argv[1:] if argv is None else list(argv)
    cut = argv.index("--") if "--" in argv else len(argv)
    a, extra = p.parse_args(argv[:cut]), argv[cut + 1:]
    script = os.path.join(HERE, f"bench_{a.name}.py")
    if not os.path.isfile(script) or a.runs < 1:
        p.error(f"no benchmark {script}" if a.runs >= 1 else "--runs must be at least 1")
    started, t0, runs, report = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), time.monotonic(), [], ""
    with tempfile.TemporaryDirectory() as tmp:
        for i in range(a.runs):
            out = os.path.join(tmp, f"run{i}.md")
            print(f"# run {i + 1} of {a.runs}: bench_{a.name}.py {' '.join(extra)}", flush=True)
            if subprocess.run([sys.executable, script, "--out", out, *extra]).returncode != 0:
                print(f"repeat: run {i + 1} of bench_{a.name}.py failed; nothing written", file=sys.stderr)
                return 1
            with open(out, encoding="utf-8") as f:
                report = f.read()
            runs.append(rows_of(report))
    os.makedirs(a.out_dir, exist_ok=True)
    with open(os.path.join(a.out_dir, f"{a.name}.md"), "w", encoding="utf-8") as f:
        f.write(report)
    text = summary(a.name, runs, started, time.monotonic() - t0)
    with open(os.path.join(a.out_dir, f"{a.name}_runs.md"), "w", encoding="utf-8") as f:
        f.write(text)
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
