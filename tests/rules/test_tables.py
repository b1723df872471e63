"""The documented columns of each scope are exactly what the tables provide."""

import numpy as np
import pandas as pd
import pytest

from advisor.rules.tables import SCOPES, build_tables


@pytest.mark.parametrize("fixture", ["single", "two_gpu", "graphlevel"])
def test_every_documented_column_exists(fixture, request):
    tables = build_tables(request.getfixturevalue(fixture))
    for scope, columns in SCOPES.items():
        missing = set(columns) - set(tables[scope].columns)
        assert not missing, (scope, missing)


def test_kernel_table_derived_columns(single):
    k = build_tables(single)["kernels"]
    tail = k[(k["region"] == "tail_gemm") & (k["name"] == "tiled_gemm_kernel")].iloc[0]
    assert tail.full_waves == 1 and tail.last_wave_fill == pytest.approx(1 / 132)
    assert tail.cc_major == 9 and tail.sm_count == 132 and tail.peak_tflops == 989
    assert not tail.has_shape  # the Triton GEMMs carry no NVTX shape


def test_shapes_from_nvtx_reach_the_kernel_table(single):
    k = build_tables(single)["kernels"]
    nvjet = k[(k["region"] == "cublas_gemm_shapes")].iloc[0]
    assert nvjet["name"].startswith("nvjet_sm90_tst_192x192")
    assert (nvjet.m, nvjet.n, nvjet.k, nvjet.batch) == (896, 4864, 8192, 1)
    assert (nvjet.tile_m, nvjet.tile_n, nvjet.tile_k) == (192, 192, 64)
    # ceil(896/192) * ceil(4864/192) = 5 * 26 = 130 tiles = the launch grid (2 x 65)
    assert nvjet.tiles == 130 == nvjet.grid_blocks
    assert nvjet.k_iters == 128  # 8192 / 64
    # 2*896*4864*8192 flop per launch over its measured time
    expected = 2 * 896 * 4864 * 8192 * nvjet.launches / nvjet.total_ns / 1e3
    assert nvjet.tflops == pytest.approx(expected)
    assert 300 < nvjet.tflops < 900


def test_region_table_comm_columns(two_gpu):
    r = build_tables(two_gpu)["regions"].set_index(["name", "device"])
    straggler = r.loc[("allreduce_straggler", 0)]
    assert straggler.last_device == 1
    assert straggler.hidable_comm_ns == pytest.approx(
        min(
            straggler.exposed_comm_ns - straggler.comm_wait_ns,
            straggler.compute_ns - straggler.overlap_ns,
        )
    )


def test_every_column_is_documented():
    from conftest import ROOT

    doc = (ROOT / "docs" / "rules.md").read_text()
    for scope, columns in SCOPES.items():
        assert f"### `{scope}`" in doc
        for col in columns:
            assert f"| `{col}` |" in doc, (scope, col)


def test_host_bound_steps_by_hand():
    # three steps "step_1".."step_3", 2 ms apart; each: 20 kernels of 1 us, each launched
    # 9.5 us after the previous one's start (the call ends after the previous kernel: the
    # gaps are host-bound), so a step's GPU window is 20 * 1 + 19 * 9 = 191 us, its launch
    # overhead 19 * 9 = 171 us (share 0.895; the 1.8 ms gap before steps 2 and 3, host time
    # outside any range, is the transition, not the step); one CUDA graph per step saves
    # 19 * (9000 - 256) = 166,136 ns: 498,408 ns over the three steps, 87 % of their 573 us
    from builders import trace

    from advisor.analysis import analyze
    from advisor.findings import find

    kernels, api, nvtx = [], [], []
    corr = 0
    for step in range(3):
        t0 = step * 2_000_000
        nvtx.append((f"step_{step + 1}", t0, t0 + 200_000))
        for i in range(20):
            corr += 1
            start = t0 + 10_000 + i * 10_000
            api.append(("cudaLaunchKernel", start - 500, start - 100, corr))
            kernels.append(dict(start=start, end=start + 1000, correlation=corr))
    a = analyze(trace(kernels, api, nvtx))
    steps = build_tables(a)["steps"].iloc[0]
    assert (steps["name"], steps["steps"], steps["steady_steps"]) == ("step", 3, 3)
    assert (steps["step_ns"], steps["busy_ns"], steps["overhead_ns"]) == (191_000, 20_000, 171_000)
    assert steps["graph_saving_ns"] == 3 * 19 * (9000 - 256)
    assert (steps["launches"], steps["median_gap_ns"]) == (20, 9000)
    (f,) = [f for f in find(a) if f.rule == "host-bound-steps"]
    assert (f.strategy, f.region, f.est_savings_ns) == ("cuda_graph", "step", 498_408)
    assert f.severity == "high"  # 498 us of the steps' 573 us


def test_host_busy_steps_by_hand():
    # four steps "step_1".."step_4" back to back (the next starts 500 ns after the previous
    # one's last kernel). In each, kernel a [t0 + 1000, t0 + 2000) (call [t0 + 500, t0 +
    # 600]), then W of host work in the range "log_metrics" [t0 + 3000, t0 + 3000 + W), which
    # launches nothing, then kernel b (call 100 ns after log_metrics, starting 100 ns after
    # the call). b's gap: host-late [t0 + 2000, t0 + 3200 + W) = W + 1200 ns, covered over
    # half by log_metrics, which does not hold b's launch: host_busy W + 1200 (no operator in
    # this trace). a's gap (steps 2-4): 1100 host-late, launch work. Step 1 holds W = 3 ms,
    # the others 300 us: step 1's window is over 2x the others' median, so it is cold. Per
    # steady step: 301,200 ns of host work; 903,600 over the 3 steady steps; the range's own
    # host_busy_idle_ns, 3,001,200 + 903,600, holds the cold step too
    from builders import trace

    from advisor.analysis import analyze
    from advisor.findings import find

    kernels, api, nvtx = [], [], []
    t0, corr = 0, 0
    for step, w in enumerate([3_000_000, 300_000, 300_000, 300_000], 1):
        kb = t0 + 3_300 + w
        nvtx += [(f"step_{step}", t0, kb + 1_100), ("log_metrics", t0 + 3_000, t0 + 3_000 + w)]
        api += [("cudaLaunchKernel", t0 + 500, t0 + 600, corr + 1),
                ("cudaLaunchKernel", kb - 200, kb - 100, corr + 2)]  # fmt: skip
        kernels += [dict(start=t0 + 1_000, end=t0 + 2_000, correlation=corr + 1),
                    dict(start=kb, end=kb + 1_000, correlation=corr + 2)]  # fmt: skip
        t0, corr = kb + 1_500, corr + 2
    a = analyze(trace(kernels, api, nvtx))
    tables = build_tables(a)
    steps = tables["steps"].iloc[0]
    assert (steps["name"], steps["steps"], steps["steady_steps"]) == ("step", 4, 3)
    assert (steps["host_busy_ns"], steps["host_busy_total_ns"]) == (301_200, 903_600)
    region = tables["regions"].set_index("name").loc["step"]
    assert region["host_busy_idle_ns"] == 3_001_200 + 903_600 and region["steady_steps"] == 3
    found = {f.rule: f for f in find(a)}
    assert found["host-busy-steps"].est_savings_ns == 903_600
    assert "host-busy" not in found  # (the family is judged per steady step)


# (a slot per combination, pieces in one block or two at a time; group_sums)
@pytest.mark.parametrize(("dense_bins", "block"), [(1 << 22, 1 << 20), (1 << 22, 2), (1, 1)])
def test_held_by_by_hand(dense_bins, block, monkeypatch):
    # ops 0 and 2 in range fwd, op 1 in bwd. Pieces (ns): host_bound before op 0 on device
    # 0: aten::mm 10, aten::add 4; before op 2: aten::add 6, nothing named 3; a
    # synchronization before op 1: cudaDeviceSynchronize 5; host_bound on device 1 (op 0):
    # aten::mm 7; host_bound before op 1 (bwd) on device 0: aten::mm 7. host_bound/fwd/
    # device 0 is 23 ns: aten::mm and aten::add tie at 10 (the alphabetically first wins:
    # 10/23); the others are whole. Most time first, then by text, then by device and the
    # start of the group's first piece (the two aten::mm of 7 ns: device 0's, at 50, comes
    # before device 1's at 0: the devices' timelines in device order, whatever the rows' order).
    from types import SimpleNamespace

    from advisor.metrics.attribution import CAUSES
    from advisor.rules import tables

    monkeypatch.setattr(tables, "DENSE_BINS", dense_bins)
    monkeypatch.setattr(tables, "BLOCK_ROWS", block)
    ops = pd.DataFrame({"region": pd.Categorical(["fwd", "bwd", "fwd"])})
    cause = ["host_bound", "host_bound", "host_bound", "synchronization", "host_bound",
             "host_bound", "host_bound"]  # fmt: skip
    pieces = pd.DataFrame({
        "device": np.array([0, 0, 0, 0, 1, 0, 0], dtype=np.int32),
        "start": [0, 10, 20, 30, 0, 40, 50], "end": [10, 14, 26, 35, 7, 43, 57],
        "cause": pd.Categorical(cause, categories=CAUSES),
        "row": np.array([0, 0, 2, 1, 0, 2, 1], dtype=np.int32),
        "detail": pd.Categorical(["aten::mm", "aten::add", "aten::add",
                                  "cudaDeviceSynchronize", "aten::mm", "", "aten::mm"]),
    })  # fmt: skip
    a = SimpleNamespace(pieces=pieces, ops=ops, regions=pd.DataFrame({"name": ["fwd"]}))
    got = tables._held_by(a)
    # (the last column: where the group's longest piece starts; fwd on device 0: the 10 ns
    # aten::mm piece at 0)
    assert got.values.tolist() == [
        ["host_bound", "fwd", 0, "aten::add", 10 / 23, 0],
        ["host_bound", "bwd", 0, "aten::mm", 1.0, 50],
        ["host_bound", "fwd", 1, "aten::mm", 1.0, 0],
        ["synchronization", "bwd", 0, "cudaDeviceSynchronize", 1.0, 30],
    ]
    # without ranges every piece is the whole device's (''): host_bound on device 0 is
    # 30 ns, aten::mm 17 of it
    a.regions = pd.DataFrame()
    assert tables._held_by(a).values.tolist() == [
        ["host_bound", "", 0, "aten::mm", 17 / 30, 0],
        ["host_bound", "", 1, "aten::mm", 1.0, 0],
        ["synchronization", "", 0, "cudaDeviceSynchronize", 1.0, 30],
    ]


@pytest.mark.parametrize(("dense_bins", "block"), [(1 << 22, 1 << 20), (1 << 22, 2), (1, 1)])
def test_held_by_ties_come_in_time_order_whatever_the_pieces_order(dense_bins, block,
                                                                     monkeypatch):  # fmt: skip
    # device 0, no ranges, every group 4 ns of detail "x": host_busy at 10 (code 6),
    # synchronization at 30 (code 3), startup at 50 (code 0); the pieces in cause order
    # (as the attribution gives them). Equal time and text: by device, then the group's
    # first piece's start: host_busy, synchronization, startup (not the causes' order)
    from types import SimpleNamespace

    from advisor.metrics.attribution import CAUSES
    from advisor.rules import tables

    monkeypatch.setattr(tables, "DENSE_BINS", dense_bins)
    monkeypatch.setattr(tables, "BLOCK_ROWS", block)
    cause = ["startup", "synchronization", "host_busy"]
    pieces = pd.DataFrame({
        "device": np.zeros(3, dtype=np.int32), "start": [50, 30, 10], "end": [54, 34, 14],
        "cause": pd.Categorical(cause, categories=CAUSES),
        "row": np.array([2, 1, 0], dtype=np.int32), "detail": pd.Categorical(["x"] * 3),
    })  # fmt: skip
    ops = pd.DataFrame({"region": pd.Categorical([None] * 3, categories=["r"])})
    a = SimpleNamespace(pieces=pieces, ops=ops, regions=pd.DataFrame())
    got = tables._held_by(a)
    assert got["cause"].tolist() == ["host_busy", "synchronization", "startup"]
    assert got["worst_start_ns"].tolist() == [10, 30, 50]


@pytest.mark.parametrize(("dense_bins", "block"), [(1 << 22, 1 << 20), (1 << 22, 2), (1, 1)])
def test_the_longest_piece_by_hand(dense_bins, block, monkeypatch):
    # host_busy on device 0 in range r (ops 0, 1): pieces of 5, 9, 9 and 2 ns starting at
    # 100, 300, 200, 400 (not in time order: the earliest of the two 9 ns, 200, wins);
    # synchronization on device 0 in r: 4 ns at 50; host_busy on device 2 outside ranges
    # (op 2): 1 ns at 7. Device ids from 0 to 2 (a radix of 3, device 1 absent).
    from types import SimpleNamespace

    from advisor.metrics.attribution import CAUSES
    from advisor.rules import tables

    monkeypatch.setattr(tables, "DENSE_BINS", dense_bins)
    monkeypatch.setattr(tables, "BLOCK_ROWS", block)
    ops = pd.DataFrame({"region": pd.Categorical(["r", "r", None])})
    cause = ["host_busy"] * 4 + ["synchronization", "host_busy"]
    pieces = pd.DataFrame({
        "device": np.array([0, 0, 0, 0, 0, 2], dtype=np.int32),
        "start": [100, 300, 200, 400, 50, 7], "end": [105, 309, 209, 402, 54, 8],
        "cause": pd.Categorical(cause, categories=CAUSES),
        "row": np.array([0, 1, 0, 1, 0, 2], dtype=np.int32),
        "detail": pd.Categorical(["a", "b", "c", "a", "s", ""]),
    })  # fmt: skip
    a = SimpleNamespace(pieces=pieces, ops=ops, regions=pd.DataFrame({"name": ["r"]}))
    got = tables._held_by(a).set_index(["cause", "name", "device"])["worst_start_ns"]
    assert got.to_dict() == {("host_busy", "r", 0): 200, ("synchronization", "r", 0): 50,
                             ("host_busy", "", 2): 7}  # fmt: skip


def test_step_gaps_in_blocks_of_any_size(monkeypatch):
    # the steps' launch-overhead gaps read a block of ops at a time: blocks of 3 ops give
    # the table of one block (the H200 training sample: its steps hold overhead gaps)
    from conftest import SAMPLES, analysis_of

    from advisor.rules import tables

    whole = tables._step_table(analysis_of(SAMPLES / "h200_train_steps.sqlite"))
    assert len(whole) and (whole["graph_saving_ns"] > 0).any()
    monkeypatch.setattr(tables, "BLOCK_ROWS", 3)
    pd.testing.assert_frame_equal(
        tables._step_table(analysis_of(SAMPLES / "h200_train_steps.sqlite")), whole
    )


def test_region_graph_savings_by_hand():
    # per (region, device): what one CUDA graph saves of each eager gap's launch overhead,
    # max(0, overhead - 256 ns), and the share of the ops that ran inside a graph; a range
    # named '' and no range at all are one row
    from types import SimpleNamespace

    from advisor.rules.tables import _region_graph_savings

    ops = pd.DataFrame({
        "region": pd.Categorical(["step", "step", "step", "step", None, ""]),
        "device": np.array([0, 0, 0, 1, 0, 0], dtype=np.int32),
        "overhead_ns": [10_000, 100, 5_000, 2_256, 1_256, 756],
        "cause": pd.Categorical(["host_bound", "host_bound", "graph_internal",
                                 "launch_latency", "host_bound", "host_bound"]),
        "graph": [False, False, True, True, False, False],
    })  # fmt: skip
    got = _region_graph_savings(SimpleNamespace(ops=ops))
    # step/0: 9,744 + 0 + 0 (inside a graph: not eager); step/1: 2,000; ''/0: 1,000 + 500
    assert got.to_dict("list") == {
        "region": ["", "step", "step"], "device": [0, 0, 1],
        "graph_saving_ns": [1_500, 9_744, 2_000], "graph_op_share": [0.0, 1 / 3, 1.0]}  # fmt: skip
    assert got["graph_saving_ns"].dtype == np.int64 and got["device"].dtype == np.int64
    assert ops["overhead_ns"].tolist()[2] == 5_000  # (the ops' column is left as it was)


def test_the_kernel_table_made_beside_the_range_table_is_the_same(monkeypatch, kernel_group_calls):
    # build_tables makes the kernel groups on another thread while the range table is made:
    # every table the same as on one thread, the per-region kernel groups made once
    from pathlib import Path

    import advisor
    from advisor.metrics import ahead

    sample = Path(__file__).resolve().parents[2] / "sample_traces" / "h200_train_steps.sqlite"
    calls = kernel_group_calls
    tables = {}
    for threads in (1, 2):
        monkeypatch.setattr(ahead, "ANALYSIS_THREADS", threads)
        a = advisor.analyze(sample).analysis
        a._kernel_groups.clear()  # (made by the analyze call's rules: made again here)
        calls.clear()
        tables[threads] = build_tables(a)
        assert calls == [("region", "shape")]
    assert tables[1].keys() == tables[2].keys() and len(tables[2]) == 6
    for scope, table in tables[1].items():
        pd.testing.assert_frame_equal(tables[2][scope], table)


# findings about one cause of idle point at its longest piece in their range and device
_AT_RULES = {"sync-stall": "synchronization", "sync-copy": "blocking_copy",
             "input-stall": "input_pipeline", "host-busy": "host_busy",
             "queued-wait": "queued_wait"}  # fmt: skip


@pytest.mark.parametrize("name", [
    "nsys/pipit_cloverleaf_a100_nsys2024.5.sqlite",
    "kineto/kineto_resnet50_dataloader_pytorch1.8.json.gz",
    "kineto/hta_alexnet_cuda_sync.json.gz",
    "kineto/tracelens_owlv2_mi300x.json.gz",
    "kineto/hta_negative_queue_rank0.json.gz",
    "nsys/nsysai_2gpu_sendrecv_before_nsys2026.2.sqlite",
])  # fmt: skip
def test_cause_findings_point_at_their_longest_piece(name):
    # worked out here from the pieces with pandas (a sort, not the rules' two passes)
    from conftest import PUBLIC, analysis_of

    from advisor.findings import find

    a = analysis_of(PUBLIC / name)
    found = [f for f in find(a) if f.rule in _AT_RULES]
    assert found, name  # (each trace has at least one such finding)
    p = a.pieces.assign(region=a.ops["region"].astype(object).fillna("").to_numpy()[
        a.pieces["row"].to_numpy()], length=a.pieces["end"] - a.pieces["start"])  # fmt: skip
    for f in found:
        mine = p[(p["cause"] == _AT_RULES[f.rule]).to_numpy()
                 & (p["device"] == f.device).to_numpy()
                 & (p["region"] == (f.region or "")).to_numpy()]  # fmt: skip
        worst = mine.sort_values(["length", "start"], ascending=[False, True]).iloc[0]
        assert (f.at_ns, f.at_rel_ns) == (worst["start"], worst["start"] - a.origin_ns), f.rule
