"""Run every fuzz harness for a number of executions, in parallel, and record what happened.

    python fuzz/run.py --runs 2000000 [--jobs 2] [--chunk 200000] [--only aero,mag]
                       [--summary fuzz/SUMMARY.md] [--rss-limit-mb 2048]

Each harness ``fuzz/fuzz_<name>.py`` is run under atheris/libFuzzer in rounds of ``--chunk``
executions (a fresh process each round: atheris leaks a little per execution, and a crash
ends a round, not the campaign) on its own corpus directory (``fuzz/corpus_<name>/``, git-
ignored), until ``--runs`` executions are done.  ``--jobs`` harnesses run at once.

From each round's libFuzzer statistics it records executions, coverage (``cov``/``ft`` of the
last round, which loads the whole corpus), corpus size, peak RSS and findings (new files in
``fuzz/findings/<name>/``); at the end it writes a Markdown table to ``--summary`` and prints
it.  Exit status: 0 when no harness found anything, 1 when some did, 2 on a usage error.
"""
from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

HERE = Path(__file__).resolve().parent

#: libFuzzer's closing lines: "#123 DONE cov: 456 ft: 789 corp: 10/2Kb ..." and "stat::name: value"
_DONE = re.compile(r"^#(\d+)\s+DONE\s+cov:\s*(\d+)\s+ft:\s*(\d+)\s+corp:\s*(\d+)/", re.M)
_STAT = re.compile(r"^stat::(\w+):\s*(\d+)", re.M)
_STATUS = re.compile(r"^#(\d+)\s+\w+\s+cov:\s*(\d+)\s+ft:\s*(\d+)\s+corp:\s*(\d+)/", re.M)


@dataclass
class Campaign:
    name: str
    runs: int = 0
    rounds: int = 0
    cov: int = 0
    ft: int = 0
    corpus: int = 0
    peak_rss_mb: int = 0
    seconds: float = 0.0
    findings: list = field(default_factory=list)
    errors: list = field(default_factory=list)

    @property
    def rate(self) -> float:
        return self.runs / self.seconds if self.seconds else 0.0


def harnesses() -> list[str]:
    return sorted(p.stem[len("fuzz_"):] for p in HERE.glob("fuzz_*.py"))


def parse_round(log: str) -> dict:
    """What one libFuzzer round reported (executions, coverage, corpus, peak RSS)."""
    out = {}
    stats = dict((k, int(v)) for k, v in _STAT.findall(log))
    m = _DONE.findall(log) or _STATUS.findall(log)
    if m:
        n, cov, ft, corp = (int(x) for x in m[-1])
        out.update(runs=n, cov=cov, ft=ft, corpus=corp)
    if "number_of_executed_units" in stats:
        out["runs"] = stats["number_of_executed_units"]
    if "peak_rss_mb" in stats:
        out["peak_rss_mb"] = stats["peak_rss_mb"]
    return out


def run_one(name: str, total: int, chunk: int, rss_limit_mb: int, timeout: int, python: str) -> Campaign:
    c = Campaign(name)
    findings_dir = HERE / "findings" / name
    findings_dir.mkdir(parents=True, exist_ok=True)
    before = set(os.listdir(findings_dir))
    t0 = time.monotonic()
    stalled = 0
    while c.runs < total and stalled < 3:
        n = min(chunk, total - c.runs)
        cmd = [python, str(HERE / f"fuzz_{name}.py"), f"-runs={n}", "-print_final_stats=1",
               f"-rss_limit_mb={rss_limit_mb}", f"-timeout={timeout}"]
        if c.rounds:
            cmd.append("--no-seed")  # the corpus was seeded in round one
        p = subprocess.run(cmd, cwd=HERE.parent, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                           text=True, errors="replace")
        r = parse_round(p.stdout)
        c.rounds += 1
        done = r.get("runs", 0)
        c.runs += done
        stalled = stalled + 1 if done == 0 else 0
        for k in ("cov", "ft", "corpus"):
            if k in r:
                setattr(c, k, r[k])
        c.peak_rss_mb = max(c.peak_rss_mb, r.get("peak_rss_mb", 0))
        if p.returncode != 0:
            tail = [ln for ln in p.stdout.splitlines() if ln.strip()][-3:]
            c.errors.append(f"round {c.rounds}: exit {p.returncode}: {' | '.join(tail)[:300]}")
        print(f"fuzz {name}: round {c.rounds}: {done} runs (total {c.runs}/{total}), cov {c.cov}, "
              f"exit {p.returncode}", file=sys.stderr, flush=True)
    c.seconds = time.monotonic() - t0
    c.findings = sorted(set(os.listdir(findings_dir)) - before)
    return c


def table(campaigns: list[Campaign], total: int) -> str:
    rows = ["| harness | executions | rounds | exec/s | coverage (cov / ft) | corpus | peak RSS MB | findings |",
            "|---|---:|---:|---:|---|---:|---:|---|"]
    for c in campaigns:
        found = ", ".join(c.findings) if c.findings else "none"
        rows.append(f"| {c.name} | {c.runs:,} | {c.rounds} | {c.rate:,.0f} | {c.cov} / {c.ft} | {c.corpus} | "
                    f"{c.peak_rss_mb} | {found} |")
    notes = [f"- {c.name}: {e}" for c in campaigns for e in c.errors]
    head = (f"Target: {total:,} executions per harness; run with `python fuzz/run.py --runs {total}` on "
            f"{os.cpu_count()} cores ({time.strftime('%Y-%m-%d', time.gmtime())}).")
    return "\n".join([head, "", *rows, *(["", "Rounds that ended early:", *notes] if notes else [])]) + "\n"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int, required=True, help="executions per harness")
    ap.add_argument("--jobs", type=int, default=os.cpu_count() or 1, help="harnesses run at once")
    ap.add_argument("--chunk", type=int, default=200_000, help="executions per round (fresh process)")
    ap.add_argument("--only", default="", help="comma-separated harness names (default: all)")
    ap.add_argument("--summary", default=str(HERE / "SUMMARY.md"), help="Markdown summary written here")
    ap.add_argument("--rss-limit-mb", type=int, default=2048)
    ap.add_argument("--timeout", type=int, default=10, help="seconds one input may take")
    a = ap.parse_args(argv)
    names = harnesses()
    if a.only:
        want = [n.strip() for n in a.only.split(",") if n.strip()]
        unknown = sorted(set(want) - set(names))
        if unknown:
            print(f"fuzz/run.py: unknown harness {', '.join(unknown)} (known: {', '.join(names)})", file=sys.stderr)
            return 2
        names = want
    if a.runs <= 0 or a.chunk <= 0 or a.jobs <= 0:
        print("fuzz/run.py: --runs, --chunk and --jobs must be positive", file=sys.stderr)
        return 2
    with ThreadPoolExecutor(max_workers=a.jobs) as pool:
        campaigns = list(pool.map(lambda n: run_one(n, a.runs, a.chunk, a.rss_limit_mb, a.timeout, sys.executable),
                                  names))
    text = table(campaigns, a.runs)
    Path(a.summary).write_text(text, encoding="utf-8")
    print(text)
    return 1 if any(c.findings for c in campaigns) else 0


if __name__ == "__main__":
    sys.exit(main())
