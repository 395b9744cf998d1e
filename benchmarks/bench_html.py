"""HTML report benchmark: ``inspect --html`` of a 1 GiB AERO file against ``validate --full`` of
it, and a 100,000-tensor model's report: its size and its load time in headless Chromium.

    .venv/bin/python benchmarks/bench_html.py [--quick] [--out FILE]

Needs Chromium (/usr/bin/chromium, Debian's) and Playwright for Python, as the tests do.
"""
import os
import sys
import time

import numpy as np

import _harness as H

sys.path.insert(0, H.REPO)  # (tests.html_browser: the tests' own browser code)


def model(total: int, count: int) -> dict:
    rng = np.random.default_rng(0)
    per = total // count // 4
    return {f"blk.{i}.weight": rng.standard_normal(per, dtype=np.float32) for i in range(count)}


def main(argv) -> int:
    import codec
    from codec.tools.html_report import write_report
    from tests.html_browser import browser, opened
    args = H.parse_args(__doc__.splitlines()[0], argv)
    t0 = time.perf_counter()
    total = (64 if args.quick else 1024) * H.MiB
    many = 10_000 if args.quick else 100_000
    env, watch = H.env_info(("numpy", "blake3", "playwright", "modelcodec")), H.LoadWatch()
    watch.sample("start")
    table = H.Table("HTML report")
    params = {"mode": "quick" if args.quick else "full", "file": f"AERO, {total / H.MiB:.0f} MiB in 64 float32 tensors",
              "many": f"safetensors, {many:,} tensors of 8 float32", "timed reps": args.reps, "page cache": "warm"}
    with H.workdir(args.workdir, args.keep) as wd:
        path, out = os.path.join(wd, "big.aero"), os.path.join(wd, "big.html")
        codec.write(path, model(total, 64), progress=False)
        H.warm(path)
        t = H.compare({"report": lambda: write_report(path, out),
                       "validate": lambda: codec.validate(path, full=True, progress=False)}, reps=args.reps)
        table.add(H.Row(f"inspect --html of a {total / H.MiB:.0f} MiB file", t["report"].median,
                        "validate --full", t["validate"].median, "<= 1.5x", 1.5,
                        best=t["report"].best, peer_best=t["validate"].best))
        t = H.compare({"report": lambda: write_report(path, out, full=True),
                       "validate": lambda: codec.validate(path, full=True, progress=False)}, reps=args.reps)
        table.add(H.Row("inspect --html --full of the same file", t["report"].median, "validate --full",
                        t["validate"].median, best=t["report"].best, peer_best=t["validate"].best))
        H.rm(path)
        path, out = os.path.join(wd, "many.safetensors"), os.path.join(wd, "many.html")
        rng = np.random.default_rng(1)
        codec.write(path, {f"blk.{i}.w": rng.standard_normal(8).astype(np.float32) for i in range(many)},
                    progress=False)
        t = H.compare({"report": lambda: write_report(path, out),
                       "validate": lambda: codec.validate(path, full=True, progress=False)}, reps=args.reps)
        table.add(H.Row(f"inspect --html of {many:,} tensors", t["report"].median, "validate --full",
                        t["validate"].median, best=t["report"].best, peer_best=t["validate"].best))
        table.add(H.Row(f"its report's size ({many:,} tensors)", os.path.getsize(out) / 1e6, "", None, "<= 25 MB", 25,
                        absolute=True, unit="MB"))
        loads = []
        with browser() as b:
            for _ in range(args.reps + 1):
                s = time.perf_counter()
                with opened(b, out) as seen:
                    seen.page.wait_for_selector(".bar .leaf")
                    loads.append(time.perf_counter() - s)
                    assert not seen.console_errors and not seen.refused
        loads = loads[1:]  # (the first: warm-up)
        table.add(H.Row(f"its report loaded in headless Chromium (page load, map and table drawn)",
                        float(np.median(loads)), "", None, "< 5 s", 5.0, strict=True, absolute=True,
                        best=min(loads)))
        watch.sample("end")
    table.notes += ["Medians of interleaved repetitions (best in brackets); ratio = modelcodec / peer.",
                    "The report without --full is the structure check plus statistics of at most 2^20 sampled "
                    "elements per tensor (2^24 over the model), its tensors read without hashing them again; "
                    "validate --full hashes every chunk and tensor; the report with --full is validate --full "
                    "plus the statistics."]
    report = H.render(f"HTML report benchmark ({params['mode']})", table, env, watch, params, time.perf_counter() - t0)
    H.publish(report, args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
