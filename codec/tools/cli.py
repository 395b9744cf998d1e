"""``modelcodec`` command line: inspect, validate, verify, fetch-tensor, convert, formats, schema, demo, and the
commands formats add (``FormatDescriptor.commands``).

Errors reach the user as one line (``modelcodec: <what> [RULE]``) and exit status 1; set
MODELCODEC_DEBUG=1 to see tracebacks.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
from typing import Sequence

import numpy as np

from .. import errors as E
from ..ui.display import MAX_ROWS, PrintableOut, fmt_shape, json_default, printable, reader_options



def _open(path: str):
    import codec
    return codec.open(path)


def cmd_inspect(a) -> int:
    from .inspect_view import inspect
    with _open(a.file) as r:
        print(inspect(r, a))
    return 0


#: `validate --control` on a file or format without control-region integrity (nothing was checked)
EXIT_NOTHING_TO_CHECK = 3


def cmd_validate(a) -> int:
    if a.full and a.control:
        raise E.UsageError("--full and --control are different checks; pick one")
    import codec
    rep = codec.validate(a.file, full=a.full, control=a.control, **reader_options(a))
    if a.control and rep.ok and not (rep.level == "control" and rep.checked):
        why = "; ".join(rep.notes) or f"{rep.format.upper()} files have no control-region digest"
        if a.json:
            print(json.dumps(dict(rep.as_dict(), control_integrity=False), indent=2))
        else:
            print(f"✗ {a.file}: no control integrity to check: {why}")
        return EXIT_NOTHING_TO_CHECK
    if a.json:
        print(json.dumps(rep.as_dict(), indent=2))
        return 0 if rep.ok else 1
    name = a.file
    for v in rep.violations:
        mark = "✗" if rep.severity(v) == "error" else "!"
        print(f"{mark} {v.render()}")
    level = rep.level
    if rep.ok:
        what = "; ".join(rep.checked) if rep.checked else "nothing to check"
        warn = f" ({len(rep.warnings)} warnings)" if rep.warnings else ""
        print(f"✓ {name}: {rep.format.upper()} {level} check passed{warn}: {what}")
    else:
        print(f"✗ {name}: {len(rep.errors)} error(s) in the {level} check")
    for n in rep.notes:
        print(f"  note: {n}")
    return 0 if rep.ok else 1


def cmd_fetch_tensor(a) -> int:
    import codec
    from ..io.atomic import atomic_write
    from ..io.writer_io import write_all
    with codec.open(a.set, **reader_options(a)) as s:
        data = s.tensor(a.name)
        with atomic_write(a.out) as f:
            if a.out.lower().endswith(".npy"):  # (numpy's file: np.load reads it back, dtype and shape)
                np.save(f, np.ascontiguousarray(data), allow_pickle=False)
            else:
                write_all(f, np.ascontiguousarray(data).reshape(-1).view(np.uint8))
        print(f"wrote {a.out}: {a.name} {s.tensors[a.name].dtype_name}{fmt_shape(data.shape)}, {data.nbytes:,} bytes")
    return 0


def cmd_convert(a) -> int:
    import codec
    out = codec.convert(a.src, a.dst, format=a.to, cast=a.cast, rename=a.rename, drop_metadata=a.drop_metadata,
                        **reader_options(a))
    print(f"wrote {out}")
    return 0


def cmd_schema(a) -> int:
    from .. import schemas
    from .docs import render, render_audit, rule_audit
    mod = schemas.FORMATS[a.format]
    if a.rules and a.json:
        mods = [mod, *getattr(mod, "RELATED", ())]
        print(json.dumps({m.FORMAT: rule_audit(m) for m in mods}, indent=2))
    elif a.rules:
        print(render_audit(mod), end="")
    elif a.json:
        raise E.UsageError("--json goes with --rules (the field reference is Markdown)")
    else:
        print(render(mod), end="")
    return 0


def cmd_formats(a) -> int:
    from .docs import capabilities_table
    print(capabilities_table(), end="")
    return 0


def cmd_demo(a) -> int:
    """Write every format's sample files, then run the steps each format's demo gives."""
    import contextlib
    import io
    from . import demo
    ok = True
    for step in demo.plan(a.dir):
        if not a.quiet:
            print(f"\n{step.title}")
        if step.call is not None:
            good, line = step.call()
            if line and not a.quiet:
                print(line)
        else:
            with contextlib.redirect_stdout(io.StringIO()) if a.quiet else contextlib.nullcontext():
                good = main(step.argv) == step.expect
        ok &= good
    if not a.quiet:
        print(f"\ndemo files are in {os.path.abspath(a.dir)}" + ("" if ok else "\nDEMO FAILED"))
    return 0 if ok else 1


def cmd_verify(a) -> int:
    from .verify import render
    with _open(a.file) as r:
        print(render(r), end="")
    return 0


class _OneLineCommands(argparse.HelpFormatter):
    """``--help`` lists each command with its help on its name's line (argparse measures the
    names two columns less indented than it prints them, which pushed the longest down)."""

    def add_argument(self, action) -> None:
        super().add_argument(action)
        if isinstance(action, argparse._SubParsersAction):
            longest = max((len(a.dest) for a in action._get_subactions()), default=0)
            self._action_max_length = max(self._action_max_length, longest + self._current_indent + 4)


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="modelcodec",
                                description="Read, write, validate and inspect model-weight containers.",
                                formatter_class=_OneLineCommands)
    p.add_argument("--version", action="version", version=f"modelcodec {__import__('codec').__version__}")
    sub = p.add_subparsers(dest="cmd", required=True, metavar="COMMAND", title="commands")
    s = sub.add_parser("inspect", help="show a file's header, metadata, chunks and tensors")
    s.add_argument("file")
    s.add_argument("--json", action="store_true", help="machine-readable output")
    s.add_argument("--all", action="store_true",
                   help=f"list every tensor (default: first {MAX_ROWS}) and every metadata value whole")
    s.add_argument("--metadata", action="store_true", help="show only the metadata, one key per line")
    s.add_argument("--tensors", metavar="PATTERN",
                   help="list only the tensors whose names match a glob pattern, e.g. 'blk.0.*'")
    s.set_defaults(func=cmd_inspect)
    s = sub.add_parser("validate", help="check a file; exit 1 if anything is wrong")
    s.add_argument("file")
    s.add_argument("--full", action="store_true", help="also verify every hash over the payloads (streamed)")
    s.add_argument("--control", action="store_true", help="check only the control-region digest (formats that have one)")
    s.add_argument("--json", action="store_true", help="machine-readable report")
    s.add_argument("--remote", action="store_true",
                   help="a set: read a local index's files from its base_url (a URL is always remote)")
    s.set_defaults(func=cmd_validate)
    s = sub.add_parser("verify", help="print metadata, tensor previews and statistics",
                       description="print sizevars, metadata, tensor previews, statistics and histograms")
    s.add_argument("file")
    s.set_defaults(func=cmd_verify)
    s = sub.add_parser("fetch-tensor", help="write one tensor to a file (raw bytes or .npy)",
                       description="write one tensor's raw bytes, or a .npy file (from a file or a set)")
    s.add_argument("set", metavar="SET_FILE_OR_URL")
    s.add_argument("name")
    s.add_argument("out", help="where to write: its raw bytes, or a .npy file (np.load reads it) for a name "
                               "ending with .npy")
    s.add_argument("--remote", action="store_true", help="a set: read a local index's files from its base_url")
    s.set_defaults(func=cmd_fetch_tensor)
    s = sub.add_parser("convert", help="convert a model to another format",
                       description="convert a model to another format, every tensor bit-identical or nothing "
                                   "written")
    s.add_argument("src", help="a model file or a set (its directory, index or URL)")
    s.add_argument("dst", help="the output, named with a format's suffix (modelcodec formats), a directory (a "
                                "set), or any name with --to")
    s.add_argument("--to", metavar="FORMAT", choices=sorted(__import__("codec.schemas", fromlist=["FORMATS"]).FORMATS),
                   help="the target format (default: from DST's name)")
    s.add_argument("--cast", action="append", metavar="FROM=TO",
                   help="a lossless dtype cast, e.g. int64=int32 (refused if any value would change)")
    s.add_argument("--rename", choices=["index"], help="name the tensors 0, 1, ... in order (for formats keyed by id)")
    s.add_argument("--drop-metadata", action="store_true", help="write without the metadata the target cannot hold")
    s.add_argument("--remote", action="store_true", help="a set: read a local index's files from its base_url")
    s.set_defaults(func=cmd_convert)
    s = sub.add_parser("formats", help="what every format can hold",
                       description="what every format can hold (element types, ranks, names, metadata)")
    s.set_defaults(func=cmd_formats)
    s = sub.add_parser("schema", help="print a format's field tables",
                       description="print a format's field tables, rendered from its schema")
    s.add_argument("format", choices=sorted(__import__("codec.schemas", fromlist=["FORMATS"]).FORMATS))
    s.add_argument("--rules", action="store_true",
                   help="audit: every rule id, where the schema declares it and where code names it")
    s.add_argument("--json", action="store_true", help="with --rules: machine-readable")
    s.set_defaults(func=cmd_schema)
    s = sub.add_parser("demo", help="write sample models, then inspect and validate them")
    s.add_argument("--dir", default="modelcodec-demo", help="output folder (default: ./modelcodec-demo)")
    s.add_argument("--quiet", action="store_true")
    s.set_defaults(func=cmd_demo)
    from .. import registry
    for d in registry.formats():  # commands of one format (e.g. a set's own listing)
        if d.commands is not None:
            d.commands(sub)
    return p


def _quiet_stdout() -> None:
    """Point stdout at /dev/null so that Python's final flush of a closed pipe says nothing."""
    try:
        fd = os.open(os.devnull, os.O_WRONLY)
        os.dup2(fd, sys.stdout.fileno())
        os.close(fd)
    except (OSError, ValueError):
        pass


def _json_failure(args, error: dict) -> None:
    """With --json, a command that cannot run still prints one JSON object: {"error": {...}}."""
    if getattr(args, "json", None) is True:
        try:
            print(json.dumps({"error": error}, indent=2, default=json_default))
            sys.stdout.flush()
        except BrokenPipeError:
            _quiet_stdout()


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    out = sys.stdout
    sys.stdout = PrintableOut(out)  # (no string from a file reaches the terminal raw: see display.printable)
    try:
        return _run(args)
    finally:
        if isinstance(sys.stdout, PrintableOut):
            sys.stdout = out


def _run(args) -> int:
    try:
        code = args.func(args)
        sys.stdout.flush()  # a closed pipe shows here, not at interpreter exit
        return code
    except BrokenPipeError:  # `modelcodec inspect big.model | head -1`: the reader had enough
        _quiet_stdout()
        return 0
    except E.ModelcodecError as e:
        print(printable(f"modelcodec: {e}"), file=sys.stderr)
        # (a finding that stopped the command is an error, whatever a report would call it)
        _json_failure(args, dict(e.as_dict(), severity="error") if isinstance(e, E.FormatError) else
                      {"kind": type(e).__name__, "message": str(e)})
        return 1
    except OSError as e:
        line = f"{e.strerror or e}: {e.filename or ''}".rstrip(": ")
        print(printable(f"modelcodec: {line}"), file=sys.stderr)
        _json_failure(args, {"kind": "OSError", "message": line})
        return 1
    except Exception as e:  # a bug: still one line, unless debugging
        if os.environ.get("MODELCODEC_DEBUG"):
            raise
        print(printable(f"modelcodec: internal error: {type(e).__name__}: {e} (MODELCODEC_DEBUG=1 for a traceback)"),
              file=sys.stderr)
        return 2


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
