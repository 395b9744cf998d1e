"""benchmarks/repeat.py reads the tables the benchmark harness renders and judges each target on
the median of the runs, with the verdict of the run whose ratio is the median."""
import sys
from pathlib import Path

BENCH = Path(__file__).resolve().parent.parent / "benchmarks"
sys.path.insert(0, str(BENCH))
import _harness as H  # noqa: E402
import repeat  # noqa: E402


def _run(write: float, peak: float) -> str:
    t = H.Table("t")
    for r in (H.Row("write (after imports: 45 MB)", write, "tofile", 1.0, "<= 1.05x", 1.05),
              H.Row("peak RSS", peak, "peer", 100.0, "< 100 MB", 100.0, strict=True, absolute=True, unit="MB"),
              H.Row("extra", 2.0, "peer", 1.0)):
        t.add(r)
    return "text before\n\n" + t.markdown() + "\n\n- a note | with a bar\n"


def test_the_median_run_judges_each_target():
    runs = [repeat.rows_of(_run(w, p)) for w, p in ((1.20, 90.0), (1.00, 99.0), (1.04, 120.0))]
    assert [r["ratio"] for r in runs[0]] == [1.2, 0.9, 2.0]
    assert [r["met"] for r in runs[0]] == ["**no**", "yes", "—"]
    text = repeat.summary("x", runs, "now", 60.0)
    row = {line.split(" | ")[1]: line for line in text.splitlines() if line.startswith("| ") and line[2].isdigit()}
    assert "| 1.20x | 1.00x | 1.04x | 1.04x | <= 1.05x | yes |" in row["write (after imports: 45 MB)"]
    assert "| 0.90x | 0.99x | 1.20x | 0.99x | < 100 MB | yes |" in row["peak RSS"]
    assert row["extra"].endswith("| 2.00x | — | — |")
    slow = [repeat.rows_of(_run(w, 90.0)) for w in (1.20, 1.10, 1.00)]
    assert "| 1.10x | <= 1.05x | **no** |" in repeat.summary("x", slow, "now", 1.0)


def test_a_row_missing_from_a_run_has_no_median(tmp_path):
    full, short = repeat.rows_of(_run(1.0, 90.0)), repeat.rows_of(_run(1.0, 90.0))[:1]
    text = repeat.summary("x", [full, short, full], "now", 1.0)
    assert "| 2 | peak RSS | — | — | — | — | < 100 MB | — |" in text


def test_a_bound_on_a_value_without_a_ratio_takes_the_most_common_verdict():
    def run(mb):
        t = H.Table("t")
        t.add(H.Row("report size", mb, target="<= 25 MB", limit=25.0, absolute=True, unit="MB"))
        return repeat.rows_of(t.markdown())
    text = repeat.summary("x", [run(20.0), run(30.0), run(24.0)], "now", 1.0)
    assert "| 1 | report size | yes | **no** | yes | — | <= 25 MB | yes |" in text, text
