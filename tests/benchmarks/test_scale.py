"""benchmarks/scale.py builds inputs whose copies are distinct (shifted in time, unique
correlation ids), so a large input is the sample's activity repeated, not duplicated."""

import importlib.util
import sqlite3
from contextlib import closing

from conftest import H200_SINGLE, ROOT

spec = importlib.util.spec_from_file_location("scale", ROOT / "benchmarks" / "scale.py")
scale = importlib.util.module_from_spec(spec)
spec.loader.exec_module(scale)


def test_five_copies_are_distinct_in_time_and_correlation(tmp_path):
    out = tmp_path / "x5.sqlite"
    with closing(sqlite3.connect(f"file:{H200_SINGLE}?mode=ro&immutable=1", uri=True)) as db:
        base = db.execute("SELECT COUNT(*) FROM CUPTI_ACTIVITY_KIND_KERNEL").fetchone()[0]
        # graph replays share one correlation id among their kernels
        ids = db.execute(
            "SELECT COUNT(DISTINCT correlationId) FROM CUPTI_ACTIVITY_KIND_KERNEL"
        ).fetchone()[0]
    n = scale.build(H200_SINGLE, 4 * base + 1, out)  # 5 copies: doubling, then a top-up
    assert n == 5 * base
    with closing(sqlite3.connect(out)) as db:
        k = "CUPTI_ACTIVITY_KIND_KERNEL"
        distinct = db.execute(
            f"SELECT COUNT(*) FROM (SELECT DISTINCT deviceId, streamId, start, end FROM {k})"
        ).fetchone()[0]
        corr = db.execute(f"SELECT COUNT(DISTINCT correlationId) FROM {k}").fetchone()[0]
    assert distinct == 5 * base and corr == 5 * ids


def test_measure_gives_the_median_wall_time_and_the_childs_peak_memory():
    import sys

    import pytest

    big = [sys.executable, "-c", "b = bytearray(200 << 20); b[::4096] = b'x' * len(b[::4096])"]
    median, peak, walls = scale.measure(big, repeat=3, settle=0)
    assert len(walls) == 3 and median == sorted(walls)[1]
    assert 200 < peak < 400  # the child's own peak (200 MB touched), in MB
    with pytest.raises(scale.subprocess.CalledProcessError):
        scale.measure([sys.executable, "-c", "raise SystemExit(3)"], 1, 0)


def test_the_read_floor_reads_every_kernel():
    # the floor's script (the kernel table alone, as an analysis reads it) runs on a sample
    import subprocess
    import sys

    with closing(sqlite3.connect(f"file:{H200_SINGLE}?mode=ro&immutable=1", uri=True)) as db:
        (n,) = db.execute("SELECT COUNT(*) FROM CUPTI_ACTIVITY_KIND_KERNEL").fetchone()
    out = subprocess.run([sys.executable, "-c", scale.FLOOR, str(H200_SINGLE)], cwd=ROOT,
                         capture_output=True, text=True, check=True)  # fmt: skip
    assert int(out.stdout) == n
