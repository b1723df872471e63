"""Bad input: one line on stderr naming the file and the problem, exit 2, input unchanged."""

from __future__ import annotations

import json
import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import H200_SINGLE, PUBLIC_NSYS, sha256


def run_cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "advisor", *args], capture_output=True, text=True, timeout=120
    )


def assert_clean_failure(proc, path: Path | str, *words: str) -> None:
    assert proc.returncode == 2, proc.stderr
    assert proc.stdout == ""
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, proc.stderr
    assert "Traceback" not in proc.stderr
    assert str(path) in lines[0]
    for w in words:
        assert w in lines[0], lines[0]


def copy_sample(tmp_path: Path, src: Path = H200_SINGLE) -> Path:
    dst = tmp_path / "trace.sqlite"
    shutil.copyfile(src, dst)
    return dst


def test_missing_file(tmp_path):
    p = tmp_path / "nope.sqlite"
    assert_clean_failure(run_cli("analyze", str(p)), p, "no such file")


def test_directory(tmp_path):
    # a folder is read as a rocprof run; an empty one says what it lacks
    assert_clean_failure(
        run_cli("analyze", str(tmp_path)), tmp_path, "folder holds no trace: no Nsight"
    )


def test_empty_file(tmp_path):
    p = tmp_path / "empty.sqlite"
    p.write_bytes(b"")
    assert_clean_failure(run_cli("analyze", str(p)), p, "empty file")


def test_not_sqlite(tmp_path):
    p = tmp_path / "notes.sqlite"
    p.write_text("this is not a database\n")
    before = sha256(p)
    assert_clean_failure(run_cli("analyze", str(p)), p, "not a supported trace")
    assert sha256(p) == before


def test_sqlite_from_another_program(tmp_path):
    p = tmp_path / "app.sqlite"
    with sqlite3.connect(p) as db:
        db.execute("CREATE TABLE users (id INTEGER, name TEXT)")
        db.execute("INSERT INTO users VALUES (1, 'ada')")
    before = sha256(p)
    assert_clean_failure(run_cli("analyze", str(p)), p, "not an Nsight Systems export")
    assert sha256(p) == before


def test_truncated_database(tmp_path):
    p = copy_sample(tmp_path)
    data = p.read_bytes()
    p.write_bytes(data[: len(data) // 3])
    before = sha256(p)
    assert_clean_failure(run_cli("analyze", str(p)), p)
    assert sha256(p) == before


def scribble(p: Path, offset: int) -> None:
    data = bytearray(p.read_bytes())
    data[offset : offset + 4096] = bytes((i * 37 + 11) % 256 for i in range(4096))
    p.write_bytes(bytes(data))


def test_corrupt_schema_page(tmp_path):
    p = copy_sample(tmp_path)
    scribble(p, 100)  # inside page 1: the schema
    before = sha256(p)
    assert_clean_failure(run_cli("analyze", str(p)), p, "malformed")
    assert sha256(p) == before


@pytest.mark.parametrize("offset", [4096 * 3, 1024 * 1024])
def test_corrupt_data_page(tmp_path, offset):
    p = copy_sample(tmp_path)
    scribble(p, offset)
    before = sha256(p)
    proc = run_cli("analyze", str(p), "--format", "json")
    # a scribbled page that no query reads may still analyze; anything else is a clean 2
    if proc.returncode != 0:
        assert_clean_failure(proc, p)
    assert sha256(p) == before


def test_export_without_kernel_table(tmp_path):
    p = copy_sample(tmp_path, PUBLIC_NSYS / "nsysai_mock_rtx3080_nsys2026.1.sqlite")
    with sqlite3.connect(p) as db:
        db.execute("DROP TABLE CUPTI_ACTIVITY_KIND_KERNEL")
    assert_clean_failure(run_cli("analyze", str(p)), p, "no CUPTI_ACTIVITY_KIND_KERNEL table")


def test_export_with_zero_kernels(tmp_path):
    p = copy_sample(tmp_path, PUBLIC_NSYS / "nsysai_mock_rtx3080_nsys2026.1.sqlite")
    with sqlite3.connect(p) as db:
        db.execute("DELETE FROM CUPTI_ACTIVITY_KIND_KERNEL")
    assert_clean_failure(run_cli("analyze", str(p)), p, "no kernels")


def test_no_gpu_facts_is_a_warning_not_a_refusal():
    p = PUBLIC_NSYS / "nsysai_2gpu_sendrecv_before_nsys2026.2.sqlite"
    before = sha256(p)
    proc = run_cli("analyze", str(p), "--format", "json")
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(proc.stdout)
    warning = next(w for w in doc["trace"]["warnings"] if w.startswith("no GPU facts"))
    assert "device(s) 0, 1" in warning and "--gpu H100-SXM" in warning
    assert doc["summary"]["comm_ns"] > 0 and doc["launch_gaps"]  # the rest is measured
    assert all(k["waves"] is None for k in doc["kernels"])
    assert sha256(p) == before


def test_unknown_gpu_name():
    proc = run_cli("analyze", str(H200_SINGLE), "--gpu", "Voodoo5")
    assert proc.returncode == 2 and "Voodoo5" in proc.stderr and "Traceback" not in proc.stderr


def test_range_and_device_that_match_nothing():
    assert_clean_failure(
        run_cli("analyze", str(H200_SINGLE), "--range", "no-such"),
        H200_SINGLE,
        "no top-level NVTX range",
    )
    assert_clean_failure(
        run_cli("analyze", str(H200_SINGLE), "--device", "7"), H200_SINGLE, "--device 7"
    )
