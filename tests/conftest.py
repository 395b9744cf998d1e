import json
import os
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings

ROOT = Path(__file__).resolve().parents[1]
VECTORS = ROOT.parent / "shared" / "vectors"

# remote AEROSET reads use the disk cache by default: never the developer's ~/.cache in tests;
# each process's cache is removed when its session ends (pytest_sessionfinish below)
_INHERITED = os.environ.get("MODELCODEC_CACHE_DIR", "")
if os.path.basename(_INHERITED).startswith("modelcodec-test-cache-") and os.path.isdir(_INHERITED):
    _CACHE_DIR = None  # a process a test started (multiprocessing): its parent's cache, its parent's to remove
else:
    _CACHE_DIR = os.environ["MODELCODEC_CACHE_DIR"] = tempfile.mkdtemp(prefix=f"modelcodec-test-cache-{os.getpid()}-")


def _ours(tmp: str) -> set:
    """What in the temp directory looks like modelcodec's (the suite must leave none behind),
    except the caches of other test runs still going (their processes remove them)."""
    return {n for n in os.listdir(tmp) if (n.startswith("modelcodec") or ".modelcodec-" in n) and not _live_cache(n)}


def _live_cache(name: str) -> bool:
    pid = name.removeprefix("modelcodec-test-cache-").split("-")[0]
    if name == pid or not pid.isdigit() or int(pid) == os.getpid():
        return False
    try:
        os.kill(int(pid), 0)
    except OSError:
        return False
    return True


# --------------------------------------------------------------------------- rule coverage
# Every rule id of every schema must be triggered by some test: each FormatError made while the
# suite runs records its rule; a complete, passing run (no selection) fails when a rule never was.
from codec import errors as _errors  # noqa: E402

_TRIGGERED: set = set()
_init = _errors.FormatError.__init__


def _recording_init(self, fmt, offset, path, rule, *args, **kw):
    _TRIGGERED.add(str(rule))
    _init(self, fmt, offset, path, rule, *args, **kw)


_errors.FormatError.__init__ = _recording_init


def _all_rules() -> set:
    from codec import schemas
    mods = list(schemas.FORMATS.values())
    mods += [r for m in mods for r in getattr(m, "RELATED", ())]
    return {str(r) for m in mods for r in getattr(m, "Rule", ())}


def pytest_testnodedown(node, error):
    _TRIGGERED.update(getattr(node, "workeroutput", {}).get("rules_triggered", ()))


def _complete(session) -> bool:
    """The whole suite ran (no -k/-m/--lf/--deselect, no path narrower than tests/) and passed."""
    o = session.config.option
    if (getattr(o, "keyword", "") or getattr(o, "markexpr", "") or getattr(o, "lf", False)
            or getattr(o, "deselect", None) or session.testsfailed):
        return False
    tests = Path(__file__).resolve().parent
    return all(Path(a.split("::")[0]).resolve() in (tests, ROOT) and "::" not in a for a in session.config.args)


def pytest_sessionstart(session):
    session.config._modelcodec_tmp_before = _ours(tempfile.gettempdir()) | {os.path.basename(_CACHE_DIR or "")}


@pytest.hookimpl(tryfirst=True)  # before xdist tells the controller this worker is done
def pytest_sessionfinish(session, exitstatus):
    import shutil
    if _CACHE_DIR:
        shutil.rmtree(_CACHE_DIR, ignore_errors=True)
    if hasattr(session.config, "workerinput"):  # an xdist worker: the controller checks
        session.config.workeroutput["rules_triggered"] = sorted(_TRIGGERED)
        return
    if _complete(session) and session.exitstatus == 0:
        never = sorted(_all_rules() - _TRIGGERED)
        if never:
            print(f"\nRULES NO TEST TRIGGERS ({len(never)}): {', '.join(never)}")
            session.exitstatus = 1
    left = sorted(_ours(tempfile.gettempdir()) - session.config._modelcodec_tmp_before)
    if left:
        print(f"\nTEST SUITE LEFT FILES IN {tempfile.gettempdir()}: {left}")
        session.exitstatus = 1


class _PytestTmpRoot:
    """pytest keeps its per-user ``/tmp/pytest-of-<user>`` directory after it removed a passing
    run's tmp_path tree (``tmp_path_retention_policy = "failed"``): remove it when it is empty,
    after pytest's own clean-up (trylast), so that a passing run leaves nothing in /tmp."""

    @pytest.hookimpl(trylast=True)
    def pytest_sessionfinish(self, session):
        import contextlib
        import getpass
        if hasattr(session.config, "workerinput"):
            return
        with contextlib.suppress(Exception):  # not empty (a failed or concurrent run), or no user name
            os.rmdir(os.path.join(tempfile.gettempdir(), f"pytest-of-{getpass.getuser()}"))


def pytest_configure(config):
    config.pluginmanager.register(_PytestTmpRoot(), "modelcodec-pytest-tmp-root")


settings.register_profile("ci", max_examples=60, deadline=None,
                          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
settings.register_profile("dev", max_examples=25, deadline=None,
                          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
settings.register_profile("deep", max_examples=1000, deadline=None,
                          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))


def vectors_dir(fmt: str) -> Path:
    d = VECTORS / fmt
    if not (d / "manifest.json").is_file():
        pytest.skip(f"CONFORMANCE VECTORS MISSING: {d} not found — the shared/ folder must sit beside "
                    f"the project checkout for the conformance suite to run", allow_module_level=True)
    return d


def manifest(fmt: str) -> dict:
    return json.loads((vectors_dir(fmt) / "manifest.json").read_text())


@pytest.fixture(scope="module")
def s3():
    """A private S3 API server (moto's standalone server on 127.0.0.1), one per test module."""
    from .servers import S3Server
    with S3Server() as server:
        yield server


@pytest.fixture
def bucket(s3):
    """A new empty bucket on :func:`s3`: its name."""
    import uuid
    name = f"b{uuid.uuid4().hex[:12]}"
    s3.fs().mkdir(name)
    return name
