#!/usr/bin/env python3
"""Mutation check of the safety guards: each guard below is switched off in a copy of the
repository, one at a time, and the tests named for it must then fail.  A guard whose mutant
survives is a guard no test exercises.

    .venv/bin/python .ci/mutants.py            # every mutant; writes .ci/MUTANTS.md
    .venv/bin/python .ci/mutants.py ID ...     # some of them (the report is not rewritten)

A pre-release step (about two minutes on 2 cores), not part of `.ci/run`; the latest result is
committed in `.ci/MUTANTS.md`, and `tests/test_mutants.py` checks that every mutant still
applies to the code as it is (its original text is found exactly once) and that the committed
result lists it as killed.  Exit status: 0 when every mutant was killed, 1 otherwise.
"""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


@dataclass(frozen=True)
class Mutant:
    id: str
    what: str  # the guard, in a few words
    file: str
    original: str
    mutated: str
    tests: tuple[str, ...]


MUTANTS = (
    # ---------------------------------------------------------------- bounds
    Mutant("partial-unread", "a remote file's unread bytes are refused, never returned as zeros",
           "codec/io/sources.py", "        if n and not self.has(offset, n):", "        if False:",
           ("tests/test_remote_guards.py",)),
    Mutant("confined", "a file reference may not leave its directory",
           "codec/io/sources.py", "    if os.path.commonpath([root, full]) != root:", "    if False:",
           ("tests/test_aeroset_local.py", "tests/test_hostile_misc.py", "tests/test_stb_khanary.py")),
    Mutant("regular-only", "only regular files are opened (FIFOs and devices never block)",
           "codec/io/sources.py", "        _refuse_kind(shown, what, os.fstat(fd).st_mode)\n", "",
           ("tests/test_hostile_misc.py", "tests/test_contract.py")),
    Mutant("file-map-only", "pages are dropped only from a local file's own mapping",
           "codec/io/sources.py",
           "    if not isinstance(base, FileMap) or a.flags.writeable:\n        return None\n"
           "    return base, a.__array_interface__[\"data\"][0] - base.address",
           "    if not isinstance(base, (FileMap, mmap.mmap)) or a.flags.writeable:\n        return None\n"
           "    return base, a.__array_interface__[\"data\"][0] - (base.address if isinstance(base, FileMap) "
           "else np.frombuffer(base, np.uint8, 1).__array_interface__[\"data\"][0])",
           ("tests/test_seams_sources.py",)),
    # ---------------------------------------------------------------- hashes
    Mutant("hash-b3", "a tensor's bytes are checked against its hash_b3",
           "codec/formats/aero/reader.py", "        if got == want:\n            return None",
           "        if True:\n            return None", ("tests/test_aero_rules.py", "tests/test_aero_vectors.py")),
    Mutant("index-digest", "bytes read whole are checked against the index's digest before use",
           "codec/io/links.py", "    if got != want.lower():\n        raise", "    if False:\n        raise",
           ("tests/test_remote_trust.py", "tests/test_aeroset_remote.py")),
    # ---------------------------------------------------------------- remote checks
    Mutant("content-range", "a 206 answer holds exactly the range asked for",
           "codec/io/remote.py", "        elif (int(m[1]), int(m[2])) != (start, end):", "        elif False:",
           ("tests/test_aeroset_remote.py", "tests/test_remote_single.py")),
    Mutant("etag-pinned", "a file that changes while it is read is refused",
           "codec/io/remote.py", "        if first != tag:", "        if False:", ("tests/test_remote_guards.py",)),
    Mutant("object-pinned", "a read of an object on a store asks for the version seen at open",
           "codec/io/store_obstore.py", "        if pin is not None:\n            options[", "        if False:\n            options[",
           ("tests/test_store_s3.py",)),
    Mutant("object-pinned-s3fs", "a read of an object through s3fs asks for the version seen at open",
           "codec/io/store_fsspec.py", "        return {} if pin is None else {", "        return {} if True else {",
           ("tests/test_store_s3.py",)),
    Mutant("overlong-body", "a body longer than the range is refused",
           "codec/io/remote.py", "            if self._read(r, 1, t0, got):", "            if False:",
           ("tests/test_remote_guards.py",)),
    Mutant("claimed-size", "a remote file's claimed size is bounded before anything is sized from it",
           "codec/io/remote.py", "            if int(m[3]) > MAX_FILE_BYTES:", "            if False:",
           ("tests/test_remote_guards.py",)),
    Mutant("deadline", "every request ends within its deadline",
           "codec/io/remote.py", "        _UNTIL.at = time.monotonic() + self.options.deadline", "        _UNTIL.at = outer",
           ("tests/test_remote_guards.py",)),
    Mutant("hash-ahead-budget", "hashing beside a download does at most ~2x the file's size of work",
           "codec/remote_file.py", "                if budget < 0:", "                if False:",
           ("tests/test_remote_hash_ahead.py",)),
    Mutant("hash-ahead-rewrite", "a digest made during a download is dropped when a byte was written twice",
           "codec/io/arrivals.py", "                self.rewritten = True", "                pass",
           ("tests/test_remote_hash_ahead.py",)),
    # ---------------------------------------------------------------- atomic writes
    Mutant("stale-temp-liveness", "a temporary of a writer still running is never removed",
           "codec/io/atomic.py", " or _pid_alive(int(pid)):", ":", ("tests/test_remote_guards.py",)),
    Mutant("temp-removed", "a failed write leaves no temporary behind",
           "codec/io/atomic.py", "        try:\n            os.unlink(tmp)\n        except FileNotFoundError:",
           "        try:\n            pass\n        except FileNotFoundError:",
           ("tests/test_atomic_guards.py",)),
    # ---------------------------------------------------------------- casts
    Mutant("lossless-cast", "a cast that changes any element's number is refused",
           "codec/engine/casts.py", "        same = same_values(src, out[s:s + BLOCK])",
           "        same = np.ones(src.shape, bool)", ("tests/test_casts.py",)),
    Mutant("odd-bool-scan", "a bool byte other than 0 or 1 is found wherever it lies",
           "codec/io/integrity.py", "        if a.size and int(a.max()) > 1:",
           "        if a.size and int(a.max()) > 255:", ("tests/test_casts.py", "tests/test_aero_bools.py")),
    Mutant("strict-bools", "a target whose readers require bools of 0 or 1 is given no other byte",
           "codec/io/tensor_writer.py",
           "    odd = first_odd_bool(flat[s:s + PIECE] for s in range(0, flat.size, PIECE))",
           "    odd = None", ("tests/test_casts.py",)),
    Mutant("odd-bools-warned", "validate --full warns of bool bytes other than 0 or 1 where a format allows them",
           "codec/formats/tensor_rows.py",
           "            odd = first_odd_bool(flat[s:s + PIECE] for s in range(0, flat.size, PIECE))",
           "            odd = None", ("tests/test_safetensors.py", "tests/test_mag_rules.py")),
    Mutant("odd-bools-warned-aero", "AERO (and a set's parts) validate --full warns of bool bytes other than 0 or 1",
           "codec/formats/aero/validate.py",
           "            odd = first_odd_bool(range_pieces(self._src, sh.offset + off, n)())",
           "            odd = None", ("tests/test_aero_bools.py", "tests/test_aero_rules.py")),
    # ---------------------------------------------------------------- writers: what is theirs, where they write
    Mutant("set-ownership", "a set is replaced only when every file its index lists is proven a set writer's",
           "codec/formats/aeroset/writer.py",
           '            return None if digest == want.lower() else f"does not have the {S.FILES.algorithm} the index gives"',
           "            return None", ("tests/test_aeroset_local.py",)),
    Mutant("url-destination", "a URL is never taken for a local destination",
           "codec/io/atomic.py", "    if url:\n        raise UsageError", "    if False:\n        raise UsageError",
           ("tests/test_writer_args.py", "tests/test_atomic_guards.py")),
    Mutant("text-only", "a string that is not Unicode text (a lone surrogate) is refused where text is declared",
           "codec/engine/payload.py", "        if text_error(v):\n            out.append(", "        if False:\n            out.append(",
           ("tests/test_writer_args.py", "tests/test_safetensors.py")),
    # ---------------------------------------------------------------- budgets
    Mutant("decode-budget", "a msgpack document decodes to at most its budget of objects",
           "codec/engine/payload.py", "        if self.n > self.budget:\n            raise _OverBudget(self.n)",
           "        if False:\n            raise _OverBudget(self.n)", ("tests/test_hostile_decode.py",)),
    Mutant("nesting-limit", "a JSON document nests at most MAX_NESTING deep, told before it is decoded",
           "codec/engine/payload.py", "    depth, _ = json_shape(raw)\n    if depth > MAX_NESTING:",
           "    depth, _ = json_shape(raw)\n    if False:", ("tests/test_hostile_nesting.py",)),
    Mutant("writer-nesting", "a writer refuses a value its readers would refuse for its depth",
           "codec/engine/nesting.py", "    if n > most:", "    if False:", ("tests/test_hostile_nesting.py",)),
)


def _copy(dst: Path) -> None:
    """The repository's tracked files (and the untracked ones not ignored) into ``dst``."""
    names = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"], cwd=ROOT,
                           check=True, capture_output=True).stdout.split(b"\0")
    for n in filter(None, names):
        src = ROOT / os.fsdecode(n)
        if src.is_file():
            (dst / os.fsdecode(n)).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, dst / os.fsdecode(n))


def check(m: Mutant, text: str) -> str | None:
    """Why ``m`` cannot be applied to ``text`` (its file's content), or None."""
    k = text.count(m.original)
    return None if k == 1 else f"its original text is found {k} times in {m.file}"


def run(m: Mutant, tree: Path) -> tuple[str, float]:
    path = tree / m.file
    text = path.read_text()
    why = check(m, text)
    if why:
        return f"stale: {why}", 0.0
    path.write_text(text.replace(m.original, m.mutated))
    t0 = time.monotonic()
    try:
        env = {**os.environ, "PYTHONPATH": str(tree), "PYTHONDONTWRITEBYTECODE": "1"}
        r = subprocess.run([sys.executable, "-m", "pytest", "-q", "-x", "-p", "no:cacheprovider", *m.tests],
                           cwd=tree, env=env, capture_output=True, text=True, timeout=900)
        verdict = "killed" if r.returncode == 1 else ("survived" if r.returncode == 0 else f"error (pytest exit {r.returncode})")
        if verdict != "killed":
            print(r.stdout[-3000:], r.stderr[-2000:], sep="\n", file=sys.stderr)
    finally:
        path.write_text(text)
    return verdict, time.monotonic() - t0


def main(argv: list[str]) -> int:
    chosen = [m for m in MUTANTS if not argv or m.id in argv]
    unknown = set(argv) - {m.id for m in MUTANTS}
    if unknown:
        print(f"unknown mutant(s): {', '.join(sorted(unknown))}", file=sys.stderr)
        return 2
    rows = []
    # beside the checkout, so that the tests find ../shared as they do from it
    with tempfile.TemporaryDirectory(prefix=".modelcodec-mutants-", dir=ROOT.parent) as d:
        tree = Path(d)
        _copy(tree)
        for m in chosen:
            verdict, took = run(m, tree)
            rows.append((m, verdict, took))
            print(f"{m.id:22} {verdict:10} {took:6.1f} s  {m.what}", flush=True)
    if not argv:
        lines = ["# Mutation check of the safety guards", "",
                 "Written by `.ci/mutants.py` (each guard switched off in a copy of the repository; the tests",
                 "named for it must fail). Re-run it before a release and commit the result.", "",
                 "| mutant | guard | file | tests | verdict | seconds |", "|---|---|---|---|---|---:|"]
        lines += [f"| `{m.id}` | {m.what} | `{m.file}` | {', '.join(f'`{t}`' for t in m.tests)} | {v} | {t:.1f} |"
                  for m, v, t in rows]
        (ROOT / ".ci" / "MUTANTS.md").write_text("\n".join(lines) + "\n")
    return 0 if all(v == "killed" for _, v, _ in rows) else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
