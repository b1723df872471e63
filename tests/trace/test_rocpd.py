"""The rocpd (rocprofv3 >= ROCm 7.0 SQLite) reader: a hand-built database with numbers worked
out by hand, a real MI350X run (the public rocprofv3 JSON of tests/data/public) written into a
rocpd database and read against the JSON reader, merged databases without views, bad input."""

import gzip
import json
import sqlite3
import subprocess
import sys

import pytest
from conftest import PUBLIC_ROCPROF, sha256
from rocpd_db import GEMM, POINTWISE, T0, RocpdWriter, from_rocprofv3_json, open_db, write_hand

from advisor.analysis import analyze
from advisor.errors import AdvisorInputError
from advisor.findings import find
from advisor.trace.load import load_trace


@pytest.fixture
def hand(tmp_path):
    p = tmp_path / "4242_results.db"
    with open_db(p) as conn:
        write_hand(RocpdWriter(conn, "4d1b_9a2c"))
    return p


def test_hand_built_database(hand):
    before = sha256(hand)
    t = load_trace(hand)
    assert sha256(hand) == before and [x.name for x in hand.parent.iterdir()] == [hand.name]
    assert (t.format, t.producer_version) == ("rocpd", "rocprofv3 rocpd (schema 3)")
    k = t.kernels
    assert k["name"].tolist() == [GEMM, POINTWISE, GEMM]
    assert k["start"].tolist() == [T0 + 40_000, T0 + 140_000, T0 + 210_000]
    assert k["end"].tolist() == [T0 + 140_000, T0 + 150_000, T0 + 310_000]
    assert k["grid_x"].tolist() == [320, 32, 4] and k["grid_y"].tolist() == [1, 1, 2]
    assert k["block_x"].tolist() == [256, 128, 256] and k["block_y"].tolist() == [1, 1, 2]
    assert k["registers"].tolist() == [256, 16, 256]  # arch + accum VGPRs
    assert k["static_smem"].tolist() == [65536, 0, 65536]
    assert set(k["device"]) == {2} and set(k["stream"]) == {1} and set(k["pid"]) == {4242}
    assert k["correlation"].tolist() == [2, 3, 5]
    assert t.api["name"].tolist() == ["hipMemcpyAsync", "hipLaunchKernel", "hipLaunchKernel",
                                      "hipStreamSynchronize", "hipLaunchKernel"]  # fmt: skip
    assert t.api["correlation"].tolist() == [1, 2, 3, 4, 5]
    assert t.nvtx[["text", "start", "end"]].values.tolist() == [["step", T0, T0 + 400_000]]
    c = t.memcpy.iloc[0]
    assert (c["kind"], c["device"], c["bytes"], c["start"]) == ("HtoD", 2, 8 << 20, T0)
    g = t.gpus[2]
    assert (g.name, g.sm_count, g.max_warps_per_sm, g.warp_size, g.compute_capability) == (
        "AMD Instinct MI300X", 304, 32, 64, "gfx942")  # fmt: skip
    assert g.source == "trace (rocpd agents)" and g.simds_per_cu == 4  # the agent's record
    assert not t.warnings


def test_hand_built_analysis(hand):
    a = analyze(load_trace(hand))
    s = a.summary()
    # GPU window T0 .. T0+310_000; busy: copy 20_000 + 100_000 + 10_000 + 100_000
    assert s["window_ns"] == 310_000 and s["gpu_busy_ns"] == 230_000
    # idle: [20_000, 40_000] waits for the GEMM's launch call (launch overhead); [150_000,
    # 210_000] follows hipStreamSynchronize (the host was blocked until 150_500: sync idle)
    assert s["idle_ns"] == 80_000
    assert s["launch_overhead_ns"] == 20_000 and s["sync_idle_ns"] == 60_000
    # occupancy on the MI300X: the GEMM's 64 KiB of LDS per workgroup fills a CU's 64 KiB,
    # so 1 workgroup per CU, 304 slots; 320 workgroups = 2 waves, the last holding 16:
    # tail idle = 100_000 x (1 - 16/304) / 2
    assert s["tail_idle_ns"] == pytest.approx(100_000 * (288 / 304) / 2, abs=1)  # whole ns
    # under-filled: the second GEMM (8 workgroups of 304 slots) and the pointwise kernel
    # (2 waves per workgroup, 32 waves per CU: 16 workgroups per CU, 4864 slots, 32 used)
    assert s["underfill_idle_ns"] == pytest.approx(
        100_000 * (1 - 8 / 304) + 10_000 * (1 - 32 / 4864), abs=1
    )
    # the copy was launched before 'step' opened: the range holds the three kernels only
    r = a.regions.iloc[0]
    assert (r["name"], r["ops"], r["start_ns"], r["end_ns"]) == ("step", 3, T0 + 40_000,
                                                                 T0 + 310_000)  # fmt: skip
    assert (r["gpu_busy_ns"], r["idle_ns"], r["sync_idle_ns"]) == (210_000, 60_000, 60_000)


def test_views_absent_and_two_processes_merged(tmp_path):
    # a merged database: two processes' tables (two uuids), no views; both are read
    p = tmp_path / "merged.db"
    with open_db(p) as conn:
        write_hand(RocpdWriter(conn, "aaaa_0001", views=False), pid=100)
        write_hand(RocpdWriter(conn, "bbbb_0002", views=False), pid=200, t0=T0 + 10**6)
    t = load_trace(p)
    assert len(t.kernels) == 6 and sorted(set(t.kernels["pid"])) == [100, 200]
    assert len(t.api) == 10 and len(t.nvtx) == 2 and len(t.memcpy) == 2
    # rows of one process never join the other's (ids repeat, guids differ)
    assert t.kernels.groupby("pid")["correlation"].apply(list).tolist() == [[2, 3, 5]] * 2


@pytest.fixture(scope="module")
def mi350x(tmp_path_factory):
    src = PUBLIC_ROCPROF / "v3_json" / "tracelens__908_results.json.gz"
    doc = json.loads(gzip.decompress(src.read_bytes()))
    db = from_rocprofv3_json(doc, tmp_path_factory.mktemp("rocpd") / "908_results.db")
    return src, db


def test_real_run_in_rocpd_reads_like_its_json(mi350x):
    # the same real MI350X run (43,915 dispatches incl. RCCL kernels) in both containers
    src, db = mi350x
    a, b = load_trace(src), load_trace(db)
    cols = ["device", "stream", "start", "end", "name", "grid_x", "grid_y", "grid_z", "block_x",
            "block_y", "block_z", "registers", "static_smem", "correlation", "pid"]  # fmt: skip
    assert len(b.kernels) == 43_915
    # (names: categorical from rocpd, text from the JSON reader; the same values)
    assert a.kernels[cols].astype({"name": str}).equals(b.kernels[cols].astype({"name": str}))
    assert a.gpus == {d: s.__class__(**{**s.to_dict(), "source": "trace (rocprofv3 agents)"})
                      for d, s in b.gpus.items()}  # fmt: skip
    fa = [(f.rule, f.kernel, f.est_savings_ns) for f in find(analyze(a))]
    fb = [(f.rule, f.kernel, f.est_savings_ns) for f in find(analyze(b))]
    assert fa == fb and fa


def test_cli_analyze_and_gate_on_rocpd(mi350x, tmp_path):
    src, db = mi350x
    proc = subprocess.run([sys.executable, "-m", "advisor", "analyze", str(db), "--format",
                           "json"], capture_output=True, text=True, timeout=300)  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["trace"]["format"] == "rocpd"
    proc = subprocess.run([sys.executable, "-m", "advisor", "gate", "--baseline", str(src),
                           "--candidate", str(db), "--format", "json"], capture_output=True,
                          text=True, timeout=300)  # fmt: skip
    assert proc.returncode == 0, proc.stderr  # the same run: nothing moved
    assert json.loads(proc.stdout)["verdict"] == "pass"


def _db(tmp_path, sql: str):
    p = tmp_path / "bad.db"
    with sqlite3.connect(p) as conn:
        conn.executescript(sql)
    return p


@pytest.mark.parametrize(
    "sql, says",
    [
        ("CREATE TABLE rocpd_metadata_ab12 (id INTEGER, guid TEXT, tag TEXT, value TEXT);",
         "rocpd database without rocpd_kernel_dispatch"),
        ("CREATE TABLE users (id INTEGER, name TEXT);", "not an Nsight Systems export"),
    ],
)  # fmt: skip
def test_bad_rocpd_input(tmp_path, sql, says):
    p = _db(tmp_path, sql)
    with pytest.raises(AdvisorInputError) as err:
        load_trace(p)
    assert says in str(err.value) and str(p) in str(err.value)


def test_rocpd_without_dispatches(tmp_path):
    p = tmp_path / "empty.db"
    with open_db(p) as conn:
        w = RocpdWriter(conn, "cc_01")
        w.region(w.track(1, 1), "HIP_RUNTIME_API_EXT", "hipMalloc", 10, 20, 1)
    with pytest.raises(AdvisorInputError, match="no kernel dispatches"):
        load_trace(p)


def test_epoch_timestamps_stay_exact(tmp_path):
    # times since the epoch (~1.7e18 ns) pass 2^53: every ns must survive the id lookups
    t0 = 1_733_000_000_123_456_789
    p = tmp_path / "epoch.db"
    with open_db(p) as conn:
        write_hand(RocpdWriter(conn, "ee_01"), t0=t0)
    t = load_trace(p)
    assert t.kernels["start"].tolist() == [t0 + 40_000, t0 + 140_000, t0 + 210_000]
    assert t.api["start"].iloc[0] == t0 - 5_000 and t.nvtx["end"].iloc[0] == t0 + 400_000
