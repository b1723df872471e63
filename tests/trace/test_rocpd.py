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
    # idle: [20_000, 40_000] waits for the GEMM's launch call, which ended at 35_000
    # (host-bound 15_000, then launch latency 5_000); [150_000, 210_000]: the host sat in
    # hipStreamSynchronize [39_000, 150_500] as the device ran dry, then launched at
    # 202_000: 500 in the call and the 51_500 after it (the call had waited 111_000 before
    # the device idled) are synchronization, 8_000 launch latency
    assert s["idle_ns"] == 80_000
    assert s["launch_overhead_ns"] == 28_000 and s["sync_idle_ns"] == 52_000
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
    # measured from the gap its first kernel held (lead 20_000): both gaps are the step's
    assert r["lead_ns"] == 20_000
    assert (r["gpu_busy_ns"], r["idle_ns"], r["sync_idle_ns"]) == (210_000, 80_000, 52_000)


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


class _Driver:
    """A stand-in ADBC driver whose connections raise ``error``."""

    class Error(Exception):
        pass

    def __init__(self, error: Exception) -> None:
        self.error = error

    def connect(self, uri: str):
        raise self.error


def test_the_driver_failing_is_read_with_sqlite3_and_a_bug_is_raised(hand, monkeypatch):
    from advisor.trace import rocpd

    expected = load_trace(hand).kernels
    driver = _Driver(_Driver.Error("cannot type a column"))
    monkeypatch.setattr(rocpd, "adbc_sqlite", lambda: (driver, (_Driver.Error, OSError)))
    assert load_trace(hand).kernels.equals(expected)
    driver.error = RuntimeError("a bug")  # (before: also read again, silently)
    with pytest.raises(RuntimeError, match="a bug"):
        load_trace(hand)


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


def _inline_db(path):
    """A database in newer rocprofv3 layout (times, thread and agent inline on each row; no
    rocpd_timestamp or rocpd_track) whose correlation ids are all 0. Thread 11 of process
    77 on an MI300X (agent row 5, node / absolute index 2); times in ns from T0:

        hipLaunchKernel [0, 5_000]        GEMM       [10_000, 110_000]
        hipLaunchKernel [6_000, 8_000]    pointwise  [110_000, 120_000]
        hipStreamSynchronize [9_000, 120_500]
        hipLaunchKernel [150_000, 152_000] GEMM      [160_000, 260_000]
    """
    import json
    import sqlite3

    from rocpd_db import GEMM, MI300X, POINTWISE, T0

    u, g = "ab12", "ab-12"
    ddl = {
        "rocpd_metadata": "tag TEXT, value TEXT",
        "rocpd_string": "string TEXT",
        "rocpd_info_agent": "type TEXT, absolute_index INT, logical_index INT, "
        "type_index INT, name TEXT, product_name TEXT, extdata TEXT",
        "rocpd_info_kernel_symbol": "kernel_name TEXT, display_name TEXT, arch_vgpr_count "
        "INT, accum_vgpr_count INT, sgpr_count INT",
        "rocpd_event": "category_id INT, correlation_id INT",
        "rocpd_region": 'nid INT, pid INT, tid INT, start INT, "end" INT, name_id INT, '
        "event_id INT",
        "rocpd_kernel_dispatch": "nid INT, pid INT, tid INT, agent_id INT, kernel_id INT, "
        'dispatch_id INT, queue_id INT, stream_id INT, start INT, "end" INT, '
        "workgroup_size_x INT, workgroup_size_y INT, workgroup_size_z INT, grid_size_x INT, "
        "grid_size_y INT, grid_size_z INT, group_segment_size INT, event_id INT",
    }
    conn = sqlite3.connect(path)
    for t, cols in ddl.items():
        conn.execute(f'CREATE TABLE "{t}_{u}" (id INTEGER PRIMARY KEY, guid TEXT, {cols})')
        conn.execute(f'CREATE VIEW "{t}" AS SELECT * FROM "{t}_{u}"')

    def ins(t, **v):
        cols = ["guid", *v]
        cur = conn.execute(f'INSERT INTO "{t}_{u}" ({", ".join(map(repr, cols))}) VALUES '
                           f"({', '.join('?' * len(cols))})", [g, *v.values()])  # fmt: skip
        return cur.lastrowid

    ins("rocpd_metadata", tag="schema_version", value="4")
    s = {x: ins("rocpd_string", string=x) for x in ("HIP_RUNTIME_API", "KERNEL_DISPATCH",
         "hipLaunchKernel", "hipStreamSynchronize")}  # fmt: skip
    conn.execute(f'INSERT INTO "rocpd_info_agent_{u}" VALUES (5, ?, "GPU", 2, 0, 0, "gfx942", '
                 '"AMD Instinct MI300X", ?)', [g, json.dumps(MI300X)])  # fmt: skip
    gemm = ins("rocpd_info_kernel_symbol", kernel_name=GEMM + ".kd", display_name=GEMM,
               arch_vgpr_count=128, accum_vgpr_count=128, sgpr_count=96)  # fmt: skip
    pw = ins("rocpd_info_kernel_symbol", kernel_name=POINTWISE + ".kd", display_name=POINTWISE,
             arch_vgpr_count=16, accum_vgpr_count=0, sgpr_count=16)  # fmt: skip
    for name, a, b in (("hipLaunchKernel", 0, 5_000), ("hipLaunchKernel", 6_000, 8_000),
                       ("hipStreamSynchronize", 9_000, 120_500),
                       ("hipLaunchKernel", 150_000, 152_000)):  # fmt: skip
        e = ins("rocpd_event", category_id=s["HIP_RUNTIME_API"], correlation_id=0)
        ins("rocpd_region", nid=1, pid=77, tid=11, start=T0 + a, end=T0 + b,
            name_id=s[name], event_id=e)  # fmt: skip
    for i, (sym, a, b, grid) in enumerate(((gemm, 10_000, 110_000, 320 * 256),
                                           (pw, 110_000, 120_000, 4096),
                                           (gemm, 160_000, 260_000, 320 * 256))):  # fmt: skip
        e = ins("rocpd_event", category_id=s["KERNEL_DISPATCH"], correlation_id=0)
        ins("rocpd_kernel_dispatch", nid=1, pid=77, tid=11, agent_id=2, kernel_id=sym,
            dispatch_id=i + 1, queue_id=1, stream_id=None, start=T0 + a, end=T0 + b,
            workgroup_size_x=256, workgroup_size_y=1, workgroup_size_z=1, grid_size_x=grid,
            grid_size_y=1, grid_size_z=1, group_segment_size=65536 if sym == gemm else 0,
            event_id=e)  # fmt: skip
    conn.commit()
    conn.close()


def test_inline_times_and_zero_correlations_are_read(tmp_path):
    # issue 28: the newer layout is read, not refused; kernels find their launch calls by
    # order on their thread, and the trace says so
    from rocpd_db import T0

    p = tmp_path / "77_results.db"
    _inline_db(p)
    t = load_trace(p)
    assert t.format == "rocpd" and "inline times" in t.producer_version
    assert t.kernels["start"].tolist() == [T0 + 10_000, T0 + 110_000, T0 + 160_000]
    assert t.kernels["grid_x"].tolist() == [320, 16, 320]  # work-items -> workgroups
    # the dispatch names its agent by node id 2; devices count by logical index (0), as the
    # reader numbers them for every rocprof format
    assert set(t.kernels["device"]) == {0} and t.gpus[0].sm_count == 304
    assert t.kernels["correlation"].tolist() == [1.0, 2.0, 3.0]
    launches = t.api[t.api["name"] == "hipLaunchKernel"]
    assert launches["correlation"].tolist() == [1.0, 2.0, 3.0]
    assert any("paired with their launch calls by order" in w for w in t.warnings)
    s = analyze(t).summary()
    # [120_000, 160_000]: the host sat in hipStreamSynchronize until 120_500 (it waited
    # 111_000 before the device ran dry), then launched at 152_000: synchronization 32_000,
    # launch latency 8_000
    assert (s["idle_ns"], s["sync_idle_ns"], s["launch_overhead_ns"]) == (40_000, 32_000, 8_000)


def test_no_row_hint_for_a_rocpd_database(hand):
    # (the memory policy's hint before a read is the Nsight kernel table's; none here)
    from advisor.trace.load import expected_rows

    assert expected_rows(hand) == 0
