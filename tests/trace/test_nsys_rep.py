"""Nsight Systems reports (.nsys-rep): exported by the nsys on PATH into the cache, never
beside the input; without nsys one line says how to export. A stand-in ``nsys`` script
plays the real one (checked on an H200 with nsys 2025.3.1 on the report kept in
sample_traces/nsys_rep/: sample_traces/capture.log)."""

import os
import stat
import subprocess
import sys

import pytest
from conftest import H200_SINGLE, SAMPLES, sha256

STAND_IN = """#!/bin/sh
# stand-in for `nsys export --type sqlite --force-overwrite true --output OUT REPORT`
echo "$@" >> "$(dirname "$0")/calls.log"
[ "$MODE" = fail ] && { echo "Importer error: corrupt report" >&2; exit 1; }
out=""
while [ $# -gt 0 ]; do
  [ "$1" = "--output" ] && out="$2"
  shift
done
cp "{sample}" "$out"
"""


@pytest.fixture
def setup(tmp_path):
    bindir = tmp_path / "bin"
    bindir.mkdir()
    nsys = bindir / "nsys"
    nsys.write_text(STAND_IN.replace("{sample}", str(H200_SINGLE)))
    nsys.chmod(nsys.stat().st_mode | stat.S_IXUSR)
    inputs = tmp_path / "in"
    inputs.mkdir()
    report = inputs / "run.nsys-rep"
    report.write_bytes(b"pretend nsys-rep bytes")
    env = {**os.environ, "PATH": f"{bindir}:{os.environ['PATH']}",
           "ADVISOR_CACHE": str(tmp_path / "cache")}  # fmt: skip
    env.pop("NSYS", None)
    return report, env, bindir, tmp_path / "cache"


def run(args, env):
    return subprocess.run([sys.executable, "-m", "advisor", *args], capture_output=True,
                          text=True, env=env, timeout=120)  # fmt: skip


def test_report_is_exported_into_the_cache_once(setup):
    report, env, bindir, cache = setup
    before = sha256(report)
    proc = run(["analyze", str(report), "--format", "json"], env)
    assert proc.returncode == 0, proc.stderr
    assert '"format": "nsys-sqlite"' in proc.stdout and str(report) in proc.stdout
    exports = list((cache / "nsys-rep").glob("*.sqlite"))
    assert len(exports) == 1 and exports[0].stem == sha256(report)
    assert sorted(p.name for p in report.parent.iterdir()) == ["run.nsys-rep"]  # nothing beside
    assert sha256(report) == before
    assert run(["analyze", str(report)], env).returncode == 0
    calls = (bindir / "calls.log").read_text().splitlines()
    assert len(calls) == 1 and calls[0].startswith("export --type sqlite")  # cached after


def test_failed_export_leaves_nothing(setup):
    report, env, _, cache = setup
    proc = run(["analyze", str(report)], {**env, "MODE": "fail"})
    assert proc.returncode == 2 and proc.stdout == ""
    assert len(proc.stderr.strip().splitlines()) == 1
    assert "nsys export failed (exit 1): Importer error: corrupt report" in proc.stderr
    assert not list((cache / "nsys-rep").glob("*"))


def test_without_nsys_one_line_says_how_to_export(setup):
    report, env, _, _ = setup
    env = {**env, "PATH": "/usr/bin:/bin"}
    proc = run(["analyze", str(report)], env)
    assert proc.returncode == 2 and proc.stdout == ""
    assert "nsys export --type sqlite -o run.sqlite run.nsys-rep" in proc.stderr


def test_the_real_report_is_keyed_as_on_the_h200(setup):
    # the report captured on the H200: the real nsys exported it to
    # nsys-rep/dd28dcff...1ded75.sqlite there; the same content gives the same cache key here
    real = SAMPLES / "nsys_rep" / "nsys_rep_check.nsys-rep"
    report, env, _, cache = setup
    report.write_bytes(real.read_bytes())
    proc = run(["analyze", str(report), "--format", "json"], env)
    assert proc.returncode == 0, proc.stderr
    (export,) = (cache / "nsys-rep").glob("*.sqlite")
    assert export.stem == "dd28dcff8a4971f98cfe8446f890ccce2eaeba6ce3e6e4d58351ee51b21ded75"
