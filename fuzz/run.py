"""Run every fuzz harness for a number of executions, in parallel, and record what happened.

    python fuzz/run.py --runs 2000000 [--jobs 2] [--chunk 200000] [--only aero,mag]
                       [--summary fuzz/SUMMARY.md] [--rss-limit-mb 2048] [--state fuzz/campaign.json]
                       [--stop-file FILE]

Each harness ``fuzz/fuzz_<name>.py`` is run under atheris/libFuzzer in rounds of ``--chunk``
executions (a fresh process each round: atheris leaks a little per execution, and a crash
ends a round, not the campaign) on its own corpus directory (``fuzz/corpus_<name>/``, git-
ignored), until ``--runs`` executions are done.  ``--jobs`` harnesses run at once.

From each round's libFuzzer statistics it records executions, coverage (``cov``/``ft`` of the
last round, which loads the whole corpus), corpus size, peak RSS and findings (new files in
``fuzz/findings/<name>/``); at the end it writes a Markdown table to ``--summary`` and prints
it.  Exit status: 0 when no harness found anything, 1 when some did, 2 on a usage error.

With ``--state FILE`` the campaign is cumulative: the totals of every harness are loaded from
FILE, saved back after every round, and ``--runs`` counts executions over all runs of the
campaign (so a 2 M campaign can be run in slices, over the same corpora, and resumed after an
interruption).  The summary then gives the cumulative numbers.

The C++ reader's libFuzzer harnesses (``fuzz/cpp/fuzz_<x>.cpp``, see ``fuzz/_cpp.py``) are the
campaigns ``cpp_<x>``: built with clang into ``fuzz/build-cpp/`` when first needed, run the same
way (their corpora ``fuzz/corpus_cpp_<x>/``), recorded in the same state file and summary.  They
run by default when ``clang++`` is installed, or when named with ``--only``::

    nice -n 19 python fuzz/run.py --runs 1000000 --jobs 1 --only cpp_aero_file,cpp_aeroset_file \
        --state fuzz/campaign.json

With a state file the summary lists every campaign it holds (not only the ones just run), each
against its own target (``--runs`` of the run that last extended it).

With ``--stop-file FILE`` a campaign can be ended without losing work: once FILE exists no new
round starts, the rounds running finish and are recorded, and the summary is written.
"""
from __future__ import annotations

import argparse
import json
import threading
import os
import re
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import _cpp  # noqa: E402  (the C++ harnesses: build, seeds, command)

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
    #: finding -> verdict of the person who examined it (e.g. "harness cost, not the reader");
    #: a triaged finding is listed with its verdict and no longer makes the exit status 1
    triaged: dict = field(default_factory=dict)
    #: the executions this campaign was run to (``--runs``); 0: not recorded
    target: int = 0

    @property
    def open_findings(self) -> list:
        return [f for f in self.findings if f not in self.triaged]

    def as_dict(self) -> dict:
        return {k: getattr(self, k) for k in self.__dataclass_fields__}

    @classmethod
    def from_dict(cls, d: dict) -> "Campaign":
        return cls(**{k: d[k] for k in cls.__dataclass_fields__ if k in d})

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


class State:
    """The cumulative totals of a campaign, kept in a JSON file (``--state``); None: not kept."""

    def __init__(self, path: str | None):
        self.path = Path(path) if path else None
        self.lock = threading.Lock()
        self.data = {}
        if self.path is not None and self.path.exists():
            self.data = json.loads(self.path.read_text(encoding="utf-8"))

    def campaign(self, name: str) -> Campaign:
        d = self.data.get(name)
        return Campaign.from_dict(d) if d else Campaign(name)

    def save(self, c: Campaign) -> None:
        if self.path is None:
            return
        with self.lock:
            self.data[c.name] = c.as_dict()
            tmp = self.path.with_name(self.path.name + ".tmp")
            tmp.write_text(json.dumps(self.data, indent=1, sort_keys=True) + "\n", encoding="utf-8")
            os.replace(tmp, self.path)


def run_round(c: Campaign, n: int, rss_limit_mb: int, timeout: int, python: str) -> int:
    """One libFuzzer round of ``n`` executions of harness ``c.name`` (a fresh process); adds
    what it reported to ``c``; returns the executions done."""
    t0 = time.monotonic()
    if c.name in _cpp.harnesses():
        cmd = _cpp.command(c.name, n, rss_limit_mb, timeout, first_round=not c.rounds)
    else:
        cmd = [python, str(HERE / f"fuzz_{c.name}.py"), f"-runs={n}", "-print_final_stats=1",
               f"-rss_limit_mb={rss_limit_mb}", f"-timeout={timeout}"]
        corpus = HERE / f"corpus_{c.name}"
        if c.rounds and corpus.is_dir() and any(corpus.iterdir()):
            cmd.append("--no-seed")  # the corpus was seeded in round one (a lost corpus is seeded again)
    p = subprocess.run(cmd, cwd=HERE.parent, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                       text=True, errors="replace")
    r = parse_round(p.stdout)
    c.rounds += 1
    done = r.get("runs", 0)
    c.runs += done
    for k in ("cov", "ft", "corpus"):
        if k in r:
            setattr(c, k, r[k])
    c.peak_rss_mb = max(c.peak_rss_mb, r.get("peak_rss_mb", 0))
    if p.returncode != 0:
        tail = [ln for ln in p.stdout.splitlines() if ln.strip()][-3:]
        c.errors.append(f"round {c.rounds}: exit {p.returncode}: {' | '.join(tail)[:300]}")
    c.seconds += time.monotonic() - t0
    print(f"fuzz {c.name}: round {c.rounds}: {done} runs (total {c.runs}), cov {c.cov}, exit {p.returncode}",
          file=sys.stderr, flush=True)
    return done


def run_all(names: list[str], total: int, chunk: int, jobs: int, rss_limit_mb: int, timeout: int, python: str,
            state: State | None = None, stop_file: str | None = None) -> list[Campaign]:
    """Run rounds until every harness has ``total`` executions (or stalled: three empty rounds
    in a row), or until ``stop_file`` exists (the rounds running then finish); ``jobs`` rounds
    at once, always of the harness furthest behind, so that an interrupted campaign has made
    even progress on every harness."""
    state = state or State(None)
    camps = {n: state.campaign(n) for n in names}
    for c in camps.values():
        c.target = total
    stalled = dict.fromkeys(names, 0)
    before = {}
    for n in names:
        d = HERE / "findings" / n
        d.mkdir(parents=True, exist_ok=True)
        before[n] = set(os.listdir(d))
    busy: set[str] = set()
    lock = threading.Lock()

    def take_next() -> Campaign | None:
        with lock:
            if stop_file is not None and os.path.exists(stop_file):
                return None
            todo = [c for c in camps.values() if c.name not in busy and c.runs < total and stalled[c.name] < 3]
            if not todo:
                return None
            c = min(todo, key=lambda c: c.runs)
            busy.add(c.name)
            return c

    def worker() -> None:
        while (c := take_next()) is not None:
            done = 0
            try:
                done = run_round(c, min(chunk, total - c.runs), rss_limit_mb, timeout, python)
                found = set(os.listdir(HERE / "findings" / c.name)) - before[c.name]
                c.findings = sorted(set(c.findings) | found)
                state.save(c)
            finally:
                with lock:
                    stalled[c.name] = stalled[c.name] + 1 if not done else 0
                    busy.discard(c.name)

    threads = [threading.Thread(target=worker) for _ in range(jobs)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return [camps[n] for n in names]


def table(campaigns: list[Campaign], total: int, state: str | None = None) -> str:
    rows = ["| harness | executions | rounds | exec/s (all rounds, wall clock) | coverage, last round (cov / ft) | corpus | "
            "peak RSS MB | findings |",
            "|---|---:|---:|---:|---|---:|---:|---|"]
    for c in campaigns:
        found = ", ".join(c.open_findings) or "none"
        if c.triaged:
            found += f" ({len(c.triaged)} examined, see below)"
        rows.append(f"| {c.name} | {c.runs:,} | {c.rounds} | {c.rate:,.0f} | {c.cov} / {c.ft} | {c.corpus} | "
                    f"{c.peak_rss_mb} | {found} |")
    notes = [f"- {c.name}: {e}" for c in campaigns for e in c.errors]
    verdicts = [f"- {c.name}: `{f}`: {v}" for c in campaigns for f, v in sorted(c.triaged.items())]
    groups: dict[int, list[str]] = {}
    for c in campaigns:
        groups.setdefault(c.target or total, []).append(c.name)
    if len(groups) <= 1:
        how = f"`python fuzz/run.py --runs {total}" + (f" --state {state}`" if state else "`")
        head = f"Target: {total:,} executions per harness; run with {how}"
    else:  # (campaigns run to different targets: each group with its command)
        head = "Targets: " + "; ".join(
            f"{t:,} executions per harness for {', '.join(ns)} (`python fuzz/run.py --runs {t} --only {','.join(ns)}"
            + (f" --state {state}`)" if state else "`)") for t, ns in sorted(groups.items(), reverse=True))
    head += (f" on {os.cpu_count()} cores ({time.strftime('%Y-%m-%d', time.gmtime())})"
             + (": cumulative over every slice of the campaign, resumed from the state file." if state else "."))
    return "\n".join([head, "", *rows, *(["", "Rounds that ended early:", *notes] if notes else []),
                      *(["", "Findings examined:", *verdicts] if verdicts else [])]) + "\n"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int, required=True, help="executions per harness")
    ap.add_argument("--jobs", type=int, default=os.cpu_count() or 1, help="harnesses run at once")
    ap.add_argument("--chunk", type=int, default=200_000, help="executions per round (fresh process)")
    ap.add_argument("--only", default="", help="comma-separated harness names (default: all)")
    ap.add_argument("--summary", default=str(HERE / "SUMMARY.md"), help="Markdown summary written here")
    ap.add_argument("--rss-limit-mb", type=int, default=2048)
    ap.add_argument("--timeout", type=int, default=10, help="seconds one input may take")
    ap.add_argument("--state", default=None, help="JSON file of cumulative totals: resume the campaign")
    ap.add_argument("--stop-file", default=None,
                    help="when this file exists, no new round starts (the running ones finish)")
    ap.add_argument("--report", action="store_true", help="with --state: only write the summary of the totals so far")
    a = ap.parse_args(argv)
    names = harnesses()
    if a.only:
        want = [n.strip() for n in a.only.split(",") if n.strip()]
        unknown = sorted(set(want) - set(names) - set(_cpp.harnesses()))
        if unknown:
            print(f"fuzz/run.py: unknown harness {', '.join(unknown)} (known: {', '.join(names)})", file=sys.stderr)
            return 2
        names = want
    elif shutil.which("clang++"):
        names += _cpp.harnesses()
    if a.runs <= 0 or a.chunk <= 0 or a.jobs <= 0:
        print("fuzz/run.py: --runs, --chunk and --jobs must be positive", file=sys.stderr)
        return 2
    if a.report:
        if not a.state:
            print("fuzz/run.py: --report needs --state", file=sys.stderr)
            return 2
        state = State(a.state)
        campaigns = [state.campaign(n) for n in names]
    else:
        campaigns = run_all(names, a.runs, a.chunk, a.jobs, a.rss_limit_mb, a.timeout, sys.executable,
                            State(a.state), a.stop_file)
    if a.state:  # the summary lists every campaign of the state, not only those run now
        ran = {c.name for c in campaigns}
        known = [n for n in harnesses() + _cpp.harnesses() if n not in ran and n in State(a.state).data]
        campaigns = sorted(campaigns + [State(a.state).campaign(n) for n in known],
                           key=lambda c: (c.name.startswith("cpp_"), c.name))
    text = table(campaigns, a.runs, a.state)
    Path(a.summary).write_text(text, encoding="utf-8")
    print(text)
    return 1 if any(c.open_findings for c in campaigns) else 0


if __name__ == "__main__":
    sys.exit(main())
