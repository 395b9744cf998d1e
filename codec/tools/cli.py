"""``modelcodec`` command line: inspect, validate, verify, fetch-tensor, convert, diff, formats, schema, demo, and the
commands formats add (``FormatDescriptor.commands``).

Errors reach the user as one line (``modelcodec: <what> [RULE]``) and exit status 1; set
MODELCODEC_DEBUG=1 to see tracebacks.
"""
from __future__ import annotations

import argparse
import json
import os
import re
import sys
from typing import Sequence

import numpy as np

from .. import errors as E, registry
from ..ui.display import MAX_ROWS, PrintableOut, fmt_shape, json_text, plural, printable
from .many import options_for



def _open(path: str):
    import codec
    return codec.open(path)


def _many(a, command: str) -> int | None:
    """Several files or a pattern: the many-file run's status (codec.tools.many); one file: None,
    and ``a.file`` is that file."""
    from . import many
    if isinstance(a.file, list):
        if many.wanted(a):
            return many.run(a, command)
        a.file = a.file[0]
    return None


def cmd_inspect(a) -> int:
    if (code := _many(a, "inspect")) is not None:
        return code
    if a.html is not None:
        from .html_report import write_report
        status = write_report(a.file, a.html, full=a.full)
        print(f"wrote {a.html}" + ("" if status == 0 else f" ({a.file} has violations: see the report)"))
        return status
    if a.full:
        raise E.UsageError("--full goes with --html (plain inspect reads no tensor data)")
    from .inspect_view import inspect
    with _open(a.file) as r:
        print(inspect(r, a, _packed_notes))
    return 0


#: `validate --control` on a file or format without control-region integrity (nothing was checked)
EXIT_NOTHING_TO_CHECK = 3


#: a limitation of the server the file is on (no Range requests: NoRangeError) kept the command
#: from reading it as it needs -- any command (`validate`: the file was not checked): not a verdict
#: on the file
EXIT_SERVER_LIMITATION = 4

#: interrupted (^C, SIGINT): as a shell reports a command SIGINT ended, 128 + 2
EXIT_INTERRUPTED = 130


def cmd_validate(a) -> int:
    if (code := _many(a, "validate")) is not None:
        return code
    if a.full and a.control:
        raise E.UsageError("--full and --control are different checks; pick one")
    import codec
    from ..io.remote import NoRangeError
    rep = codec.validate(a.file, full=a.full, control=a.control, **options_for(a, a.file))
    if any(isinstance(v, NoRangeError) for v in rep.violations):  # (a set: a part the server cannot range)
        code = EXIT_SERVER_LIMITATION
    else:
        code = 0 if rep.ok else 1
    if a.control and rep.ok and not (rep.level == "control" and rep.checked):
        why = "; ".join(rep.notes) or f"{rep.format.upper()} files have no control-region digest"
        if a.json:
            print(json_text(dict(rep.as_dict(), control_integrity=False), indent=2))
        else:
            print(f"- {a.file}: no control integrity to check: {why}")  # (not bad: unchecked, as with many files)
        return EXIT_NOTHING_TO_CHECK
    if a.json:
        print(json_text(rep.as_dict(), indent=2))
        return code
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
    return code


def _type_label(t) -> str:
    """A tensor's element type as its format names it; a packed tensor by its codec (e.g. Q8_0)."""
    c = registry.packed_codec(t.quant_params) if t.common_dtype == "packed" else None
    return c.name if c is not None else t.dtype_name


def _packed_notes(t) -> dict:
    """``inspect --json``: a packed tensor's codec (``quant_type``, e.g. "Q4_0") and parameters."""
    if t.common_dtype != "packed":
        return {}
    c = registry.packed_codec(t.quant_params)
    return {**({"quant_type": c.name} if c is not None else {}), "quant_params": t.quant_params}


def cmd_fetch_tensor(a) -> int:
    import codec
    from ..io.atomic import atomic_write
    from ..io.writer_io import write_all
    from ..io.store import is_url
    with codec.open(a.set, **options_for(a, a.set)) as s:
        if a.name not in s.tensors:  # (the file named, and the names nearest the one given)
            import difflib
            near = difflib.get_close_matches(a.name, list(s.tensors)[:100_000], 3)
            raise E.NotFoundError(f"{a.set}: no tensor named {a.name!r} ("
                                  + (f"the nearest: {', '.join(map(repr, near))}" if near else
                                     f"{len(s.tensors):,} tensors: `modelcodec inspect` lists them") + ")")
        t = s.tensors[a.name]
        if t.extra.get("has_data") is False:
            raise E.UsageError(f"{a.set}: tensor {a.name!r} ({_type_label(t)}{fmt_shape(t.shape)}) is declared "
                               "without data: there are no bytes to write; nothing was written")
        if a.out == "-" and sys.stdout.isatty():
            raise E.UsageError("fetch-tensor to - writes raw bytes to standard output, which is a terminal here: "
                               "pipe it (| od -An -tf4 | head) or name a file")
        data = s.tensor(a.name)
        raw = np.ascontiguousarray(data).reshape(-1).view(np.uint8)
        if a.out.lower().endswith(".npy"):  # (numpy's file: np.load reads it back, dtype and shape)
            import io
            buf = io.BytesIO()
            np.save(buf, np.ascontiguousarray(data), allow_pickle=False)
            raw = np.frombuffer(buf.getbuffer(), np.uint8)
        if a.out == "-":  # (a pipe: the bytes on stdout, the line saying what they are on stderr)
            sys.stdout.flush()
            write_all(sys.stdout.buffer, raw)
            sys.stdout.buffer.flush()
            print(f"wrote {a.name} {_type_label(t)}{fmt_shape(t.shape)} to standard output, {data.nbytes:,} bytes",
                  file=sys.stderr)
            return 0
        if is_url(a.out):  # object storage: one atomic put
            from ..io.open_store import store_for
            with store_for(a.out) as store:
                if not store.supports_writes:
                    raise E.UsageError(f"{a.out}: an http(s) URL is not a destination")
                store.check(a.out, "the destination")
                store.put(a.out, [memoryview(raw)])
        else:
            with atomic_write(a.out) as f:
                write_all(f, raw)
        print(f"wrote {a.out}: {a.name} {_type_label(t)}{fmt_shape(t.shape)}, {data.nbytes:,} bytes")
    return 0


def _metadata_entries(given: list[str] | None) -> dict:
    """``--set-metadata`` entries: KEY=TEXT (the value is text) or KEY:=JSON (a typed value: a
    number, true/false, a list...) -> {key: value}."""
    out: dict = {}
    for x in given or ():
        typed = re.match(r"([^=]+?):=(.*)\Z", x, re.S)
        key, _, text = x.partition("=")
        if typed:
            key = typed[1]
            try:
                value = json.loads(typed[2])
            except ValueError as e:
                raise E.UsageError(f"--set-metadata {x}: after := comes a JSON value ({e})") from None
        elif not _:
            raise E.UsageError(f"--set-metadata {x}: KEY=TEXT, or KEY:=JSON for a typed value (e.g. n:=4)")
        else:
            value = text
        if not key:
            raise E.UsageError(f"--set-metadata {x}: the key is empty")
        out[key] = value
    return out


def cmd_convert(a) -> int:
    import codec
    writer = {k: v for k, v in (("max_shard_bytes", a.max_shard_bytes), ("max_part_shards", a.max_part_shards),
                                ("max_shard_size", a.max_shard_size)) if v is not None}
    try:
        out = codec.convert(a.src, a.dst, format=a.to, cast=a.cast, rename=a.rename, drop_metadata=a.drop_metadata,
                            set_metadata=_metadata_entries(a.set_metadata), unset_metadata=a.unset_metadata,
                            lossy=a.lossy, overflow=a.overflow, **writer, **options_for(a, a.src))
    except E.UsageError as e:  # (said in the command line's words: --to, not format=)
        msg = re.sub(r"\bformat=(?:'([\w-]+)')?", lambda m: "--to" + (f" {m[1]}" if m[1] else ""), str(e))
        raise E.UsageError(re.sub(r"^(max_shard_bytes|max_part_shards|max_shard_size)\b",
                                  lambda m: f"--{m[1].replace('_', '-')}",
                                  msg)) from None
    if a.json:
        print(json_text({"written": out, "names": out.names, "lossy": out.lossy}, indent=2))
        return 0
    for t in out.lossy:
        over = f", {t['overflowed']:,} out of range ({a.overflow})" if t["overflowed"] else ""
        print(f"{t['name']}: {t['from']} -> {t['to']}: max abs error {t['max_abs_error']:.6g}, max rel error "
              f"{t['max_rel_error']:.6g} ({t['changed']:,} values changed{over})")
    print(f"wrote {out}" + (f" (tensor names in {out.names})" if out.names else ""))
    return 0


def cmd_mirror(a) -> int:
    import codec
    try:
        out = codec.mirror(a.src, a.dst, jobs=a.jobs, overwrite=a.overwrite)
    except E.UsageError as e:  # (said in the command line's words)
        raise E.UsageError(str(e).replace("overwrite=True", "--overwrite")) from None
    print(f"mirrored {a.src} to {out}: {len(out.copied)} file(s) copied"
          + (f", {len(out.replaced)} of them replacing other bytes" if out.replaced else "")
          + f", {len(out.skipped)} already up to date ({out.pulled:,} bytes read from the source)")
    return 0


def cmd_update_set(a) -> int:
    import codec
    tensors = codec.load(a.src)
    out = codec.update_set(a.set, tensors)
    print(f"updated {out}: {plural(len(tensors), 'tensor')} from {a.src}")
    return 0


#: `diff`: the models differ (0: every tensor equal); anything that stops the comparison exits 2
EXIT_DIFFERENT = 1


def cmd_diff(a) -> int:
    import codec
    from .diff import render
    try:
        d = codec.diff(a.a, a.b, rtol=a.rtol, atol=a.atol)
    except E.UsageError as e:  # (said in the command line's words: --rtol 1e-3, not rtol=0.001)
        raise E.UsageError(re.sub(r"^(rtol|atol)=(\S+):", r"--\1 \2:", str(e))) from None
    if a.html is not None:
        from .diff_html import write_html
        write_html(d, a.html)
    if a.json:
        print(json_text(d.as_dict(), indent=2))
    else:
        print(render(d, whole_metadata=a.all), end="")
    return 0 if d.equal else EXIT_DIFFERENT


def cmd_schema(a) -> int:
    from .. import schemas
    from .docs import render, render_audit, rule_audit
    mod = schemas.FORMATS[a.format]
    if a.rules and a.json:
        mods = [mod, *getattr(mod, "RELATED", ())]
        print(json.dumps({m.FORMAT.lower(): rule_audit(m) for m in mods}, indent=2))  # (formats in lower case, as every JSON)
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


def _convert_examples() -> str:
    """``convert --help``'s examples, named with the registered formats' suffixes."""
    from .. import registry
    fs = [f for f in registry.formats() if f.capabilities is not None]
    files = [f.extensions[0] for f in fs if not f.directory]
    sets = [f.extensions[0] for f in fs if f.directory]
    ids = [f.extensions[0] for f in fs if f.capabilities.ids]
    lines = [f"    modelcodec convert model{files[-1]} model{files[0]}"]
    if sets:
        lines.append(f"    modelcodec convert model{files[-1]} newset/bge{sets[0]} --max-shard-bytes 268435456")
    several = [e for f in fs if not f.directory for e in f.extensions[1:]]  # (a model in several files)
    if several:
        lines += [f"    modelcodec convert model{files[-1]} ckpt/model{several[0]} --max-shard-size 5GB --drop-metadata",
                  f"    modelcodec convert ckpt/model{several[0]} big{files[-1]} --max-shard-size 2GiB"]
    if ids:
        lines += [f"    modelcodec convert model{files[-1]} small{ids[0]} --cast float32=float16 --lossy "
                  "--rename index --drop-metadata",
                  f"    modelcodec convert small{ids[0]} back{files[-1]}   (the names come back from "
                  f"small{ids[0]}.names.json)"]
    return ("examples:\n\n" + "\n".join(lines) +  # (indented, blank lines around: code in the reference page)
            "\n\na refused conversion lists every problem and the options that resolve them")


_MANY_HELP = ("a file, set or URL; several, or glob patterns ('zoo/**.bin', 's3://bucket/zoo/*'): one line "
              "per file and a summary, --json one object per file per line")
_JOBS_HELP = "with several files: how many to work on at once (default: the number of cores)"


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="modelcodec",
                                description="Read, write, validate and inspect model-weight containers.",
                                formatter_class=_OneLineCommands)
    p.add_argument("--version", action="version", version=f"modelcodec {__import__('codec').__version__}")
    sub = p.add_subparsers(dest="cmd", required=True, metavar="COMMAND", title="commands")
    s = sub.add_parser("inspect", help="show a file's header, metadata, chunks and tensors",
                       description="show a file's header, metadata, chunks and tensors (of many files: one line each)")
    s.add_argument("file", nargs="+", help=_MANY_HELP)
    s.add_argument("--jobs", type=int, metavar="N", help=_JOBS_HELP)
    s.add_argument("--json", action="store_true", help="machine-readable output")
    s.add_argument("--all", action="store_true",
                   help=f"list every tensor (default: first {MAX_ROWS}) and every metadata value whole")
    s.add_argument("--metadata", action="store_true", help="show only the metadata, one key per line")
    s.add_argument("--tensors", metavar="PATTERN",
                   help="list only the tensors whose names match a glob pattern, e.g. 'blk.0.*'")
    s.add_argument("--html", metavar="OUT.html", help="write one self-contained HTML report (summary, violations, "
                   "byte map, tensors with statistics and histograms); exit status as validate's")
    s.add_argument("--full", action="store_true", help="with --html: check every hash and read whole tensors "
                   "(a URL: fetch the whole file) instead of the structure check and samples")
    s.set_defaults(func=cmd_inspect)
    s = sub.add_parser("validate", help="check a file; exit 1 if anything is wrong",
                       description="check a file; exit 1 if anything is wrong, 3 when --control has nothing "
                       "to check, 4 when the server cannot be read as needed (no Range requests); several files: "
                       "1 if any is bad, else 4 if any, else 3 if any, else 0")
    s.add_argument("file", nargs="+", help=_MANY_HELP)
    s.add_argument("--jobs", type=int, metavar="N", help=_JOBS_HELP)
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
                               "ending with .npy; - writes the raw bytes to standard output (a pipe)")
    s.add_argument("--remote", action="store_true", help="a set: read a local index's files from its base_url")
    s.set_defaults(func=cmd_fetch_tensor)
    s = sub.add_parser("convert", help="convert a model to another format",
                       description="convert a model to another format, every tensor bit-identical or nothing "
                                   "written", formatter_class=argparse.RawDescriptionHelpFormatter,
                       epilog=_convert_examples())
    s.add_argument("src", help="a model file or a set (its directory, index or URL)")
    s.add_argument("dst", help="the output, named with a format's suffix (modelcodec formats), a directory (a "
                                "set: an existing one, or a path ending with /), or any name with --to")
    s.add_argument("--to", metavar="FORMAT", type=str.lower,
                   choices=sorted(__import__("codec.schemas", fromlist=["FORMATS"]).FORMATS),
                   help="the target format (default: from DST's name; a DST named for another format is refused)")
    s.add_argument("--cast", action="append", metavar="FROM=TO",
                   help="a dtype cast, e.g. int64=int32: lossless (refused if any value would change) unless --lossy; "
                        "packed=float32 (or float16, bfloat16) dequantizes quantized ggml tensors")
    s.add_argument("--lossy", action="store_true",
                   help="let --cast round values (to nearest, ties to even) and report each tensor's max error, "
                        "e.g. --cast float32=float16 --lossy")
    s.add_argument("--overflow", choices=["saturate", "inf"],
                   help="with --lossy: a value beyond the target type's range becomes its largest finite value "
                        "(saturate) or an infinity (inf); default: refused")
    s.add_argument("--rename", choices=["index", "keep"],
                   help="index: name the tensors 0, 1, ... in order (for formats keyed by id), the names kept in "
                        "DST.names.json; keep: do not apply the names map a source has")
    s.add_argument("--drop-metadata", action="store_true", help="write without the metadata the target cannot hold")
    s.add_argument("--set-metadata", action="append", metavar="KEY=TEXT",
                   help="add or replace a metadata entry (repeatable): KEY=TEXT, or KEY:=JSON for a typed value, "
                        "e.g. format=pt (Hugging Face transformers asks it of a checkpoint's metadata) or n:=4")
    s.add_argument("--unset-metadata", action="append", metavar="KEY",
                   help="leave out a metadata entry of the source (repeatable)")
    s.add_argument("--max-shard-bytes", type=int, metavar="N",
                   help="target writer option: the largest shard, in bytes (formats with shards)")
    s.add_argument("--max-part-shards", type=int, metavar="N", help="target writer option: shards per part (sets)")
    s.add_argument("--max-shard-size", metavar="SIZE",
                   help="target writer option: write the model as files of at most SIZE each (bytes, or 5GB, 500MB, "
                        "2GiB), for a format that shards models into files: an index and its shards, or split files "
                        "named NAME-00001-of-0000N (`modelcodec formats` says which)")
    s.add_argument("--json", action="store_true", help="print {written, names, lossy: per-tensor errors} as JSON")
    s.add_argument("--remote", action="store_true", help="a set: read a local index's files from its base_url")
    s.set_defaults(func=cmd_convert)
    s = sub.add_parser("mirror", help="copy a model file or a whole set between places, verified and resumable",
                       description="copy a model file or a whole set between local folders, http(s) (source only) "
                                   "and object storage: every file checked against its index before it is "
                                   "published, the index last; run again to resume or update (a file already "
                                   "at DST with the same bytes is kept, one with other bytes refused unless "
                                   "--overwrite)")
    s.add_argument("src", help="a model file, or a set (its directory, index or URL)")
    s.add_argument("dst", help="a set: the folder it goes to; a file: its new name or a folder (ending with /)")
    s.add_argument("--jobs", type=int, metavar="N", help="files transferred at once (default 4)")
    s.add_argument("--overwrite", action="store_true",
                   help="replace files at DST that hold other bytes than the source's, atomically (without it, "
                        "such a file stops the mirror before anything is copied, exit 1; a file with the same bytes "
                        "is kept either way; a folder in the way, or a symbolic link on the way, is never replaced)")
    s.set_defaults(func=cmd_mirror)
    s = sub.add_parser("update-set", help="replace tensors of a set, rewriting only the parts that hold them",
                       description="replace tensors of a set with those of any readable file, rewriting only the "
                                   "parts that hold them (the others keep their bytes)")
    s.add_argument("set", help="the set's directory, its index, or the index's URL on object storage")
    s.add_argument("src", help="a model file whose tensors replace the set's of the same names")
    s.set_defaults(func=cmd_update_set)
    s = sub.add_parser("diff", help="compare two models tensor by tensor",
                       description="compare two models tensor by tensor (any formats); exit 0 when every tensor "
                                   "is equal, 1 when not, 2 when they cannot be compared")
    s.add_argument("a", metavar="A", help="a model file, a set or a URL")
    s.add_argument("b", metavar="B", help="the model to compare it with (the reference for --rtol)")
    s.add_argument("--rtol", type=float, default=0.0, help="relative tolerance: |a-b| <= atol + rtol*|b| passes")
    s.add_argument("--atol", type=float, default=0.0, help="absolute tolerance")
    s.add_argument("--json", action="store_true", help="machine-readable report")
    s.add_argument("--all", action="store_true", help="show long metadata values whole")
    s.add_argument("--html", metavar="OUT.html", help="also write the report as one self-contained HTML page (a "
                   "histogram of the differences of each changed tensor)")
    s.set_defaults(func=cmd_diff, error_exit=2)
    s = sub.add_parser("formats", help="what every format can hold",
                       description="what every format can hold (element types, ranks, names, metadata)")
    s.set_defaults(func=cmd_formats)
    s = sub.add_parser("schema", help="print a format's field tables",
                       description="print a format's field tables, rendered from its schema")
    s.add_argument("format", type=str.lower, choices=sorted(__import__("codec.schemas", fromlist=["FORMATS"]).FORMATS))
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
    _group_and_exemplify(p, sub)
    return p


#: how ``modelcodec --help`` groups the commands (a format's own commands come last)
GROUPS = (("look at models", ("inspect", "validate", "verify", "diff", "fetch-tensor")),
          ("make and move models", ("convert", "mirror", "update-set")),
          ("the formats", ("formats", "schema")),
          ("try it", ("demo",)))

#: one example per command, ``{f}``/``{g}``: two file formats' suffixes, ``{s}``: a set's
EXAMPLES = {
    "inspect": "modelcodec inspect model{f}\n    modelcodec inspect model{f} --html report.html",
    "validate": "modelcodec validate --full model{f}\n    modelcodec validate 'zoo/**{g}' --jobs 4",
    "verify": "modelcodec verify model{f}",
    "diff": "modelcodec diff model{f} model{g} --rtol 1e-3 --html diff.html",
    "fetch-tensor": "modelcodec fetch-tensor model{f} embed.weight embed.npy",
    "mirror": "modelcodec mirror https://host/models/bge{s} s3://bucket/models/bge/ --jobs 8",
    "update-set": "modelcodec update-set models/bge{s} finetuned{g}",
    "formats": "modelcodec formats",
    "schema": "modelcodec schema {n} --rules",
    "demo": "modelcodec demo --dir /tmp/modelcodec-demo",
    "inspect-set": "modelcodec inspect-set models/bge{s}",
}


def _group_and_exemplify(p: argparse.ArgumentParser, sub) -> None:
    """``modelcodec --help`` lists the commands in groups, one line each; each command's
    ``--help`` ends with an example (named with the registered formats' suffixes)."""
    from .. import registry
    fs = [f for f in registry.formats() if f.capabilities is not None]
    files = [f for f in fs if not f.directory]
    sets = [f.extensions[0] for f in fs if f.directory] or [""]
    names = {"f": files[0].extensions[0], "g": files[-1].extensions[0], "s": sets[0], "n": files[0].name}
    helps = {c.dest: c.help or "" for c in sub._choices_actions}
    width = max(map(len, sub.choices)) + 2
    grouped = [n for _, members in GROUPS for n in members]
    rest = [n for n in sub.choices if n not in grouped]
    lines = ["commands (modelcodec COMMAND --help: its options and an example):"]
    for title, members in GROUPS + ((("a format's own tools", tuple(rest)),) if rest else ()):
        lines += ["", f"  {title}:"] + [f"    {n:<{width}}{helps.get(n, '')}" for n in members if n in sub.choices]
    p.epilog = "\n".join(lines)
    p.usage = "%(prog)s [-h] [--version] COMMAND ..."
    p.formatter_class = argparse.RawDescriptionHelpFormatter
    sub.help = argparse.SUPPRESS
    for name, parser in sub.choices.items():
        if name in EXAMPLES and not parser.epilog:
            parser.epilog = "example:\n\n    " + EXAMPLES[name].format(**names)
            parser.formatter_class = argparse.RawDescriptionHelpFormatter


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
            print(json_text({"error": error}, indent=2))
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
    except KeyboardInterrupt:  # ^C: one line, not a traceback (writers leave nothing half-written)
        if os.environ.get("MODELCODEC_DEBUG"):
            raise
        print("modelcodec: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
    except E.ModelcodecError as e:
        from ..io.remote import NoRangeError
        print(printable(f"modelcodec: {e}"), file=sys.stderr)
        # (a finding that stopped the command is an error, whatever a report would call it)
        _json_failure(args, dict(e.as_dict(), severity="error") if isinstance(e, E.FormatError) else
                      {"kind": type(e).__name__, "message": str(e)})
        return getattr(args, "error_exit", EXIT_SERVER_LIMITATION if isinstance(e, NoRangeError) else 1)
    except OSError as e:
        line = f"{e.filename}: {e.strerror or e}" if e.filename else f"{e.strerror or e}"  # (path first, as everywhere)
        print(printable(f"modelcodec: {line}"), file=sys.stderr)
        _json_failure(args, {"kind": "OSError", "message": line})
        return getattr(args, "error_exit", 1)
    except Exception as e:  # a bug: still one line, unless debugging
        if os.environ.get("MODELCODEC_DEBUG"):
            raise
        print(printable(f"modelcodec: internal error: {type(e).__name__}: {e} (MODELCODEC_DEBUG=1 for a traceback)"),
              file=sys.stderr)
        return 2


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
