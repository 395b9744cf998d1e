"""fuzz/run.py: libFuzzer's statistics are read back right, and the summary table says them."""
import importlib.util
import sys

from .conftest import ROOT

_spec = importlib.util.spec_from_file_location("fuzz_run", ROOT / "fuzz" / "run.py")
run = importlib.util.module_from_spec(_spec)
sys.modules["fuzz_run"] = run  # dataclasses look their module up
_spec.loader.exec_module(run)

LOG = """INFO: Seed: 123
#2      INITED cov: 700 ft: 2000 corp: 90/40Kb exec/s: 0 rss: 300Mb
#1024   pulse  cov: 770 ft: 2400 corp: 98/41Kb lim: 4 exec/s: 512 rss: 310Mb
#1500   DONE   cov: 776 ft: 2460 corp: 99/42Kb lim: 4 exec/s: 500 rss: 336Mb
Done 1500 runs in 3 second(s)
stat::number_of_executed_units: 1500
stat::average_exec_per_sec:     500
stat::new_units_added:          9
stat::slowest_unit_time_sec:    0
stat::peak_rss_mb:              336
"""


def test_parse_round_reads_the_final_statistics():
    assert run.parse_round(LOG) == {"runs": 1500, "cov": 776, "ft": 2460, "corpus": 99, "peak_rss_mb": 336}


def test_parse_round_of_a_crashed_round_keeps_the_last_status_line():
    crashed = LOG.split("#1500")[0] + "==123== ERROR: libFuzzer: deadly signal\n"
    assert run.parse_round(crashed) == {"runs": 1024, "cov": 770, "ft": 2400, "corpus": 98}


def test_summary_table_lists_every_campaign_and_its_findings():
    a = run.Campaign("aero", runs=2_000_000, rounds=10, cov=900, ft=3000, corpus=150, peak_rss_mb=700,
                     seconds=1000.0, findings=["crash-abc"])
    b = run.Campaign("mag", runs=2_000_000, rounds=10, cov=450, ft=1700, corpus=90, peak_rss_mb=200, seconds=500.0,
                     errors=["round 3: exit 1: boom"])
    text = run.table([a, b], 2_000_000)
    rows = [ln for ln in text.splitlines() if ln.startswith("| aero") or ln.startswith("| mag")]
    assert rows[0].split("|")[1:9] == [" aero ", " 2,000,000 ", " 10 ", " 2,000 ", " 900 / 3000 ", " 150 ", " 700 ",
                                       " crash-abc "]
    assert " none " in rows[1] and "- mag: round 3: exit 1: boom" in text


def test_every_harness_is_found():
    assert run.harnesses() == sorted(p.stem[5:] for p in (ROOT / "fuzz").glob("fuzz_*.py"))


def test_a_campaign_state_is_resumed_and_reported(tmp_path):
    state = tmp_path / "campaign.json"
    st = run.State(str(state))
    c = st.campaign("mag")
    c.runs, c.rounds, c.seconds, c.findings = 300_000, 3, 600.0, []
    st.save(c)
    again = run.State(str(state)).campaign("mag")
    assert (again.runs, again.rounds, again.rate) == (300_000, 3, 500.0)
    summary = tmp_path / "SUMMARY.md"
    assert run.main(["--runs", "2000000", "--only", "mag", "--state", str(state), "--report",
                     "--summary", str(summary)]) == 0
    text = summary.read_text()
    assert "| mag | 300,000 | 3 | 500 |" in text and "cumulative" in text


def test_a_stop_file_lets_the_running_rounds_finish_and_starts_no_new_one(tmp_path, monkeypatch):
    import threading
    stop = tmp_path / "stop"
    started = []
    both_running = threading.Barrier(2, timeout=30)

    def fake_round(c, n, rss_limit_mb, timeout, python):
        started.append(c.name)
        both_running.wait()  # (both workers are inside a round: now ask the campaign to stop)
        stop.touch()
        c.rounds += 1
        c.runs += n
        return n

    monkeypatch.setattr(run, "run_round", fake_round)
    monkeypatch.setattr(run, "HERE", tmp_path)  # (findings directories go here)
    state = run.State(str(tmp_path / "campaign.json"))
    camps = run.run_all(["aero", "mag", "stb"], 100, 10, 2, 2048, 10, sys.executable, state, str(stop))
    assert len(started) == 2 and sum(c.runs for c in camps) == 20  # the two running rounds, recorded
    assert run.State(str(tmp_path / "campaign.json")).campaign(started[0]).runs == 10
    run.run_all(["aero", "mag", "stb"], 100, 10, 2, 2048, 10, sys.executable, state, str(stop))
    assert len(started) == 2  # (resumed with the file still there: nothing starts)
