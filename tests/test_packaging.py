"""modelcodec as people install it: ``python -m build`` makes an sdist and a wheel that
``twine check`` accepts, and the wheel, installed in a clean venv, works outside the checkout
(``modelcodec demo``; the schemas inside the package, no top-level ``schemas``)."""
from __future__ import annotations

import os
import site
import subprocess
import sys
import zipfile

from .conftest import ROOT


def test_the_wheel_installs_and_runs_the_demo_outside_the_checkout(tmp_path):
    dist = tmp_path / "dist"
    clean = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}  # (a checkout on it is "installed" already)
    build = subprocess.run([sys.executable, "-m", "build", "--no-isolation", "--outdir", str(dist), str(ROOT)],
                           capture_output=True, text=True, timeout=600, cwd=tmp_path, env=clean)
    assert build.returncode == 0, build.stderr[-3000:]
    wheel = next(dist.glob("modelcodec-*.whl"))
    assert len(list(dist.glob("modelcodec-*.tar.gz"))) == 1
    check = subprocess.run([sys.executable, "-m", "twine", "check", "--strict", *map(str, dist.iterdir())],
                           capture_output=True, text=True, timeout=120)
    assert check.returncode == 0, check.stdout + check.stderr
    names = zipfile.ZipFile(wheel).namelist()
    assert "codec/schemas/aero.py" in names and not any(n.startswith("schemas/") for n in names)
    assert not any(n.startswith(("tests/", "benchmarks/", "fuzz/")) for n in names)

    # a clean venv: the wheel without its dependencies, which it finds in this environment's
    # site-packages (appended by a .pth, so this checkout's editable install is not seen)
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=120)
    py = venv / "bin" / "python"
    purelib = subprocess.run([str(py), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                             capture_output=True, text=True, check=True).stdout.strip()
    with open(os.path.join(purelib, "deps.pth"), "w") as f:
        f.write("\n".join(site.getsitepackages()) + "\n")
    install = subprocess.run([sys.executable, "-m", "pip", "--python", str(py), "install", "-q", "--no-deps",
                              str(wheel)], capture_output=True, text=True, timeout=300, env=clean)
    assert install.returncode == 0, install.stderr[-3000:]
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    env = {"PATH": f"{venv / 'bin'}:/usr/bin:/bin", "HOME": str(tmp_path)}
    where = subprocess.run([str(py), "-c", "import codec, codec.schemas; print(codec.__file__); print(codec.schemas.__file__)"],
                           cwd=elsewhere, env=env, capture_output=True, text=True, timeout=120)
    assert where.returncode == 0, where.stderr
    assert all(line.startswith(purelib) for line in where.stdout.split()), where.stdout
    demo = subprocess.run([str(venv / "bin" / "modelcodec"), "demo", "--dir", str(elsewhere / "demo"), "--quiet"],
                          cwd=elsewhere, env=env, capture_output=True, text=True, timeout=600)
    assert demo.returncode == 0, demo.stdout[-2000:] + demo.stderr[-2000:]
    assert any((elsewhere / "demo").glob("*.aero"))
