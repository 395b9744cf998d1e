"""``modelcodec validate`` and ``inspect`` on many files: paths, URLs and glob patterns (local,
or on object storage: ``'s3://bucket/zoo/**.bin'``), worked through by ``--jobs`` threads, one
line per file in the order given, then a summary; ``--json``: one JSON object per file per line
(JSON Lines), each naming its ``source``.

Threads, not processes, measured on 200 small AEROs (``validate --full``, 2 cores, shared):
one thread 0.37-0.67 s, 2 or 4 threads 0.37-0.73 s, 2 forked processes 0.40-0.42 s, 2 spawned
or forkserver processes 1.2-1.8 s (starting them -- importing numpy and the formats again --
costs more than the work).  Local checks are bound by the interpreter either way, and forking a
process that already runs fsspec's event-loop thread is unsafe.  On the tests' local S3 server
(no network latency, the same 2 cores) 40 files took 1.2-2.0 s with 1, 2 or 8 threads alike
(the whole command); the gain of threads is in overlapping a real network's latency, which
that run does not have (not measured here).  Each file gets its own reader: no reader is shared
between threads.  (Across processes or machines, see docs/guide/remote.md: dask.distributed.)

Exit status: 1 when any file is bad or could not be read; else 4 when a server's limitation
kept any file from being checked; else 3 when ``validate --control`` found nothing to check in
any file; else 0.
"""
from __future__ import annotations

import io
import json
import os
import sys
import threading
from concurrent.futures import ThreadPoolExecutor

from .. import errors as E
from ..ui.display import human, json_text, plural, printable, reader_options

#: per-file outcome -> its mark in the one-line summary
MARKS = {"ok": "✓", "bad": "✗", "failed": "✗", "limited": "?", "nothing": "-"}


def wanted(a) -> bool:
    """Whether the command runs in many-file mode: more than one argument, or a pattern."""
    from ..io.store import is_pattern
    return len(a.file) > 1 or any(is_pattern(f) and not os.path.exists(f) for f in a.file)


class _ThreadOut(io.TextIOBase):
    """stdout that each worker thread writes to its own buffer (the main thread: the real one)."""

    def __init__(self, real):
        self.real, self.local = real, threading.local()

    def write(self, s: str) -> int:
        buf = getattr(self.local, "buf", None)
        return (buf or self.real).write(s)

    def flush(self) -> None:
        if getattr(self.local, "buf", None) is None:
            self.real.flush()


def _captured(out: _ThreadOut, func, a) -> tuple[int, str]:
    """``func(a)`` with what it prints collected: (its status, its output)."""
    out.local.buf = io.StringIO()
    try:
        return func(a), out.local.buf.getvalue()
    finally:
        out.local.buf = None


def _failure(src: str, e: BaseException) -> dict:
    if isinstance(e, E.FormatError):
        err = dict(e.as_dict(), severity="error")
    elif isinstance(e, OSError):
        err = {"kind": "OSError", "message": f"{e.strerror or e}: {e.filename or ''}".rstrip(": ")}
    else:
        err = {"kind": type(e).__name__, "message": str(e)}
    text = str(e) if isinstance(e, E.FormatError) else err["message"]
    line = text if text.startswith(src + ":") else f"{src}: {text}"
    return {"source": src, "outcome": "failed", "line": line, "doc": {"source": src, "error": err}}


def options_for(a, source) -> dict:
    """The reader options of the common flags (:func:`codec.ui.display.reader_options`) for
    ``source``; ``--remote`` for a file whose reader takes no such option is a UsageError in the
    command line's words (a source no format reads: no options, opening it says why)."""
    opts = reader_options(a)
    if opts.get("remote"):
        from .. import api, registry
        from ..io.store import is_url
        if "remote" not in api.reader_options(source):
            if is_url(source):
                what = "a URL is read over HTTP without it"
            else:
                try:
                    what = f"{source} is {registry.resolve(source).name.upper()}, one file"
                except E.ModelcodecError:
                    return {}
            raise E.UsageError(f"--remote is for sets (a local index whose files are read from its "
                               f"base_url): {what}")
    return opts


def _validate_one(a, src: str) -> dict:
    import codec
    from ..io.remote import NoRangeError
    rep = codec.validate(src, full=a.full, control=a.control, progress=False,  # (one line per file, no bars)
                         **options_for(a, src))
    if any(isinstance(v, NoRangeError) for v in rep.violations):
        return {"source": src, "outcome": "limited", "doc": rep.as_dict(),
                "line": f"{src}: not checked, a limitation of the server (a part without Range requests)"}
    doc, level = rep.as_dict(), rep.level
    if not rep.ok:
        first = rep.errors[0].render() if rep.errors else ""
        return {"source": src, "outcome": "bad", "doc": doc,
                "line": f"{src}: {plural(len(rep.errors), 'error')} in the {level} check: {first}"}
    if a.control and not (rep.level == "control" and rep.checked):
        return {"source": src, "outcome": "nothing", "doc": dict(doc, control_integrity=False),
                "line": f"{src}: no control integrity to check"}
    warn = f" ({plural(len(rep.warnings), 'warning')})" if rep.warnings else ""
    return {"source": src, "outcome": "ok", "doc": doc,
            "line": f"{src}: {rep.format.upper()} {level} check passed{warn}"}


def _inspect_one(a, src: str, out: _ThreadOut) -> dict:
    if a.json:  # (the single-file command's own JSON, so that both say the same)
        import argparse
        code, text = _captured(out, a.func, argparse.Namespace(**dict(vars(a), file=src)))
        doc = dict(json.loads(text), source=src)
        return {"source": src, "outcome": "ok" if code == 0 else "failed", "doc": doc, "line": ""}
    import codec
    with codec.open(src) as r:
        d = r.describe()
        total = sum(r.tensors[n].nbytes for n in r.tensors)
        version = f" {d['version']}" if d.get("version") else ""
        line = f"{src}: {d['format'].upper()}{version}, {plural(len(r.tensors), 'tensor')} ({human(total)})"
    return {"source": src, "outcome": "ok", "doc": None, "line": line}


def _one(a, src: str, why: str | None, out: _ThreadOut) -> dict:
    if why is not None:
        return _failure(src, E.NotFoundError(why))
    from ..io.remote import NoRangeError
    try:
        return _validate_one(a, src) if a.many == "validate" else _inspect_one(a, src, out)
    except NoRangeError as e:  # (any command: the server's limitation, not a verdict on the file)
        done = "checked" if a.many == "validate" else "read"
        return dict(_failure(src, e), outcome="limited", line=f"{src}: not {done}, a limitation of the server: {e}")
    except (E.ModelcodecError, OSError) as e:
        return _failure(src, e)


def exit_status(outcomes: list[str]) -> int:
    """The status of a many-file run (the rule in the module's docstring)."""
    if any(o in ("bad", "failed") for o in outcomes):
        return 1
    return 4 if "limited" in outcomes else 3 if "nothing" in outcomes else 0


def run(a, command: str) -> int:
    """Run ``command`` (validate or inspect) on every file ``a.file`` names."""
    a.many = command
    from ..io.open_store import expand
    if a.many == "inspect" and (a.html is not None or a.full):
        raise E.UsageError("--html and --full inspect one file (give one path)")
    shaping = [] if a.many != "inspect" else [
        f for f, on in (("--all", a.all), ("--metadata", a.metadata), ("--tensors", a.tensors is not None)) if on]
    if shaping and not a.json:  # (one line per file here: they would be ignored)
        raise E.UsageError(f"{', '.join(shaping)} shape{'s' if len(shaping) == 1 else ''} one file's listing: "
                           "give one path, or --json (one whole object per file)")
    if a.jobs is not None and a.jobs < 1:
        raise E.UsageError(f"--jobs takes a number of workers >= 1, not {a.jobs}")
    jobs = a.jobs or os.cpu_count() or 1
    sources = expand(a.file)
    real = sys.stdout
    out = _ThreadOut(real)
    sys.stdout = out
    outcomes = []
    pool = ThreadPoolExecutor(max_workers=min(jobs, max(1, len(sources))))
    try:
        for r in pool.map(lambda s: _one(a, s[0], s[1], out), sources):
            outcomes.append(r["outcome"])
            if a.json:
                real.write(json_text(r["doc"]) + "\n")
            else:
                real.write(printable(f"{MARKS[r['outcome']]} {r['line']}") + "\n")
            real.flush()
    finally:  # (a closed pipe, ^C: the files not started yet are not checked)
        pool.shutdown(wait=True, cancel_futures=True)
        sys.stdout = real
    counts = {o: outcomes.count(o) for o in MARKS if o in outcomes}
    done = "checked" if a.many == "validate" else "read"
    words = {"ok": "ok", "bad": "bad", "failed": "unreadable", "limited": f"not {done} (server limitation)",
             "nothing": "with nothing to check"}
    summary = f"{plural(len(outcomes), 'file')}: " + ", ".join(f"{n} {words[o]}" for o, n in counts.items())
    print(summary, file=sys.stderr if a.json else sys.stdout)
    return exit_status(outcomes)
