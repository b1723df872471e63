"""analysis.analyze leaves the Trace it is given as it was (its tables, GPU facts and
warnings), unless the caller asks it to release the API rows and the kernel columns the
analysis holds elsewhere."""

from dataclasses import replace

import pandas as pd
import pytest
from conftest import H200_2GPU, H200_SINGLE, PUBLIC_ROCPROF, SAMPLES

from advisor.analysis import (
    LAUNCH_OP_COLUMNS,
    OP_KERNEL_COLUMNS,
    OPS_ONLY_KERNEL_COLUMNS,
    analyze,
)
from advisor.metrics.waves import LAUNCH_CONFIG_COLUMNS
from advisor.trace.load import load_trace

TABLES = ("kernels", "api", "memcpy", "memset", "graphs", "sync", "nvtx")


@pytest.mark.parametrize(
    "path",
    [H200_SINGLE, H200_2GPU, SAMPLES / "kineto" / "h200_train_steps.pt.trace.json.gz",
     PUBLIC_ROCPROF / "v3_json" / "tracelens__908_results.json.gz"],
    ids=lambda p: p.name,
)  # fmt: skip
def test_analyze_does_not_change_its_trace(path):
    trace = load_trace(path)
    before = {name: getattr(trace, name).copy(deep=True) for name in TABLES}
    gpus, warnings = dict(trace.gpus), list(trace.warnings)
    a = analyze(trace)
    a.select(None, None).kernel_table(by_region=True)
    for name, table in before.items():
        pd.testing.assert_frame_equal(getattr(trace, name), table, obj=name)
    assert trace.gpus == gpus and trace.warnings == warnings


def test_release_api_only_when_asked():
    trace = load_trace(H200_SINGLE)
    assert len(trace.api) > 0
    assert {"grid_x", "block_x", "registers", "static_smem"} <= set(trace.kernels.columns)
    rows, devices = len(trace.kernels), trace.devices
    kept = trace.kernels.copy()
    a = analyze(trace, release_api=True)
    assert trace.api.empty and list(trace.api.columns)  # emptied, its columns kept
    # the launch configuration's columns are the configurations table's alone
    assert not set(LAUNCH_CONFIG_COLUMNS) & set(trace.kernels.columns)
    # the columns the ops hold (and those only the ops are made of) are the ops' alone
    assert not set(OP_KERNEL_COLUMNS) & set(trace.kernels.columns)
    assert not set(OPS_ONLY_KERNEL_COLUMNS) & set(trace.kernels.columns)
    assert len(trace.kernels) == rows and {"name", "demangled"} <= set(trace.kernels)
    assert trace.devices == devices == [0]
    # the launch table holds its own columns only, and gives the others back through its
    # ops (launch_table), row for row, in the trace's dtypes
    assert not set(LAUNCH_OP_COLUMNS) & set(a.launches)
    assert "name" in a.launches and "op" in a.launches
    columns = [c for c in kept if c not in LAUNCH_CONFIG_COLUMNS
               and c not in OPS_ONLY_KERNEL_COLUMNS]  # fmt: skip
    assert set(OP_KERNEL_COLUMNS) <= set(columns)
    pd.testing.assert_frame_equal(a.launch_table()[columns], kept[columns])
    # the same tables as an analysis that keeps the trace as it is (the API calls keyed by
    # thread and the kernel columns taken as the ops are made change none of them)
    other = analyze(load_trace(H200_SINGLE))
    pd.testing.assert_frame_equal(a.launches, other.launches)
    pd.testing.assert_frame_equal(a.launch_table(), other.launch_table())
    for name in ANALYSIS_TABLES:
        pd.testing.assert_frame_equal(getattr(a, name), getattr(other, name), obj=name)
    assert a.notes == other.notes and a.coverage == other.coverage


@pytest.mark.parametrize("path", [H200_SINGLE, H200_2GPU], ids=lambda p: p.name)
def test_a_selections_launches_read_their_ops_columns_from_its_ops(path):
    # a selection's ops keep the whole's row labels (the second device's do not start at
    # 0): its launches' op columns and idle are those of the same launches in the whole
    a = analyze(load_trace(path))
    whole = a.launch_table()
    for device in a.trace.devices:
        one = a.select(device=device)
        assert (one.ops.index[0] > 0) == (device > 0)
        pd.testing.assert_frame_equal(one.launch_table(), whole[whole["device"] == device])
    name = a.regions["name"].iloc[0]
    ranged = a.select(range_text=name)
    ids = set(a.regions.loc[a.regions["name"].str.contains(name, regex=False), "range_id"])
    expected = whole[whole["range_id"].isin(ids)]
    assert 0 < len(expected) < len(whole)
    pd.testing.assert_frame_equal(ranged.launch_table(), expected)


@pytest.mark.parametrize("path", [H200_SINGLE, H200_2GPU], ids=lambda p: p.name)
def test_kernel_groups_read_device_and_start_at_their_rows_as_from_the_columns(path):
    # the kernel table's launches carry a duration, not start and end, and read the device
    # and start of each group's first and worst launch from the ops: the same groups as
    # from a launch table holding every column, whole and per device (a selection: the
    # second device's ops do not start at row 0), per region and not
    from advisor.analysis import LAUNCH_IDLE_COLUMNS, launch_op_reader
    from advisor.metrics.waves import kernel_groups

    whole = analyze(load_trace(path))
    for a in (whole, *(whole.select(device=d) for d in whole.trace.devices)):
        for by in (("shape",), ("region", "shape")):
            region = ["region"] if "region" in by else []
            full = a.launch_table(["device", "start", "end", *LAUNCH_IDLE_COLUMNS, *region])
            lean = a.launch_table(["duration", *LAUNCH_IDLE_COLUMNS, *region])
            assert "start" not in lean and "device" not in lean
            want = kernel_groups(full, a.configs, by=by, worst=True)
            got = kernel_groups(lean, a.configs, by=by, worst=True,
                                read_at=launch_op_reader(lean, a.ops))  # fmt: skip
            assert want["worst_start_ns"].notna().all() and want["device"].nunique() >= 1
            pd.testing.assert_frame_equal(got, want)


ANALYSIS_TABLES = ("ops", "pieces", "launches", "configs", "shapes", "devices", "regions",
                   "sequences", "gaps", "streams", "collectives", "totals")  # fmt: skip


@pytest.mark.parametrize(
    "path",
    [H200_2GPU, SAMPLES.parent / "tests/data/public/kineto/hta_nccl_data.json.gz"],
    ids=lambda p: p.name,
)
def test_stages_beside_each_other_give_the_analysis_of_one_thread(path):
    # with several threads the configurations are found beside the ops' attribution, and
    # the launch sequences, stream and gap sums beside the launch table (ahead.beside),
    # from the trace's kernels before release_api drops their columns: every table equals
    # the one-thread analysis
    one = analyze(load_trace(path), release_api=True, cores=1)
    three = analyze(load_trace(path), release_api=True, cores=3)
    assert len(one.sequences) and len(one.configs) and len(one.streams)
    for name in ANALYSIS_TABLES:
        pd.testing.assert_frame_equal(getattr(three, name), getattr(one, name), obj=name)
    assert three.notes == one.notes and three.coverage == one.coverage


@pytest.mark.parametrize("path", [H200_SINGLE, H200_2GPU], ids=lambda p: p.name)
def test_window_wave_idle_is_its_launches(path):
    """The devices' and the range windows' tail and under-fill idle are their launches'
    (each kernel op's launch, summed per window), in all and per window."""
    a = analyze(load_trace(path))
    launches = a.launch_table()
    for col in ("tail_idle_ns", "underfill_idle_ns"):
        per_device = launches.groupby("device")[col].sum()
        got = a.devices.set_index("device")[col]
        assert per_device.sum() > 0
        pd.testing.assert_series_equal(got.reindex(per_device.index), per_device,
                                       check_names=False, check_index_type=False,
                                       rtol=1e-12)  # fmt: skip
        inside = launches[launches["range_id"] >= 0]
        per_range = inside.groupby(["range_id", "device"])[col].sum()
        regions = a.regions.set_index(["range_id", "device"])[col]
        assert len(regions) and per_range.sum() > 0
        pd.testing.assert_series_equal(regions.reindex(per_range.index).fillna(0), per_range,
                                       check_names=False, check_index_type=False,
                                       rtol=1e-12)  # fmt: skip
        assert regions.drop(per_range.index).sum() == 0  # (windows without such launches)


def test_busy_time_from_the_idle_equals_the_union_of_the_ops():
    # device 0: A [100, 200), Z [300, 300) (no time), B [400, 500), C [450, 700) (overlaps
    # B), D [800, 900), G [850, 860) (inside D: the last to start is not the last to end);
    # device 1: E [1000, 1100), F [1100, 1200) (touching). By hand: the
    # ops' union is [100, 200), [400, 700), [800, 900) and [1000, 1200); the idle gaps are
    # [200, 300) before Z, [300, 400) before B, [700, 800) before D; the spans [100, 900)
    # and [1000, 1200). An unselected analysis holds no busy segments: busy time is the
    # window's part of the span less its idle, and busy_segments are made from the gaps.
    from builders import trace

    from advisor.analysis import _segments
    from advisor.metrics.comm import device_segments

    rows = [(0, 100, 200), (0, 300, 300), (0, 400, 500), (0, 450, 700), (0, 800, 900),
            (0, 850, 860), (1, 1000, 1100), (1, 1100, 1200)]  # fmt: skip
    a = analyze(trace([{"device": d, "start": s, "end": e} for d, s, e in rows]))
    segments, _ = a._busy_and_gaps()
    assert "busy" not in segments and segments["span"] == {0: (100, 900), 1: (1000, 1200)}
    busy = a.busy_segments()
    assert busy[0][0].tolist() == [100, 400, 800] and busy[0][1].tolist() == [200, 700, 900]
    assert busy[1][0].tolist() == [1000] and busy[1][1].tolist() == [1200]
    union = device_segments(a.ops, [True] * len(a.ops))
    assert all((busy[d][0] == union[d][0]).all() and (busy[d][1] == union[d][1]).all()
               for d in (0, 1))  # fmt: skip
    # windows: across two ops and the gaps between, the whole device, after its span,
    # reversed, across a touching pair, inside the gaps only
    w = pd.DataFrame({"device": [0, 0, 0, 0, 1, 0], "start_ns": [150, 0, 950, 500, 1050, 250],
                      "end_ns": [450, 1000, 960, 400, 1150, 350]})  # fmt: skip
    m = a.measure(w)
    assert m["gpu_busy_ns"].tolist() == [100, 500, 0, 0, 100, 0]
    assert m["idle_ns"].tolist() == [200, 500, 10, -100, 0, 100]  # (window_ns - busy)
    # an op ending before its start (no reader keeps one): the union, as before
    bad = a.ops.copy()
    bad.loc[bad.index[0], "end"] = 50
    assert "busy" in _segments(bad, bad["op_class"], every_op=True)
    assert "busy" in _segments(a.ops, a.ops["op_class"], every_op=False)


def test_region_accessors_on_a_trace_with_and_without_ranges():
    # the 2-GPU sample has top-level ranges: region_chunks/table/count/span give the regions
    # table (some columns, some names); a table without any (no columns at all, as a
    # library caller may build one) gives the columns asked for, empty
    a = analyze(load_trace(str(H200_2GPU)))
    r = a.regions
    assert a.region_count() == len(r) > 0
    assert a.region_span() == (r["start_ns"].min(), r["end_ns"].max())
    name = str(r["name"].iloc[0])
    got = a.region_table(["device", "start_ns"], names=[name, "no such range"])
    pd.testing.assert_frame_equal(got, r.loc[r["name"] == name, ["device", "start_ns"]])
    assert a.region_table(names=["no such range"]).columns.tolist() == r.columns.tolist()
    bare = a.select()  # (a copy)
    bare.regions = pd.DataFrame()
    assert bare.region_count() == 0 and not list(bare.region_chunks())
    assert bare.region_table(["name", "end_ns"]).columns.tolist() == ["name", "end_ns"]


def test_range_totals_count_ops_and_launches_by_hand():
    # range "step" twice: instance 1 launches kernels 1 and 2 (one call each); instance 2
    # kernel 3 and a CUDA-graph launch (correlation 4) that runs two kernels; outside every
    # range, kernels 5 and 6 (a call each). Totals: step 5 ops from 4 launch calls over 2
    # instances; outside 2 ops, 2 calls
    from builders import trace as hand_trace

    from advisor.analysis import analyze

    launch = "cudaLaunchKernel"
    api = [(launch, 100, 150, 1), (launch, 200, 250, 2), (launch, 20_100, 20_150, 3),
           ("cudaGraphLaunch", 20_200, 20_250, 4), (launch, 40_000, 40_050, 5),
           (launch, 40_100, 40_150, 6)]  # fmt: skip
    spans = [(1_000, 2_000, 1, None), (2_500, 3_000, 2, None), (21_000, 22_000, 3, None),
             (23_000, 24_000, 4, 1), (24_500, 25_000, 4, 2), (41_000, 42_000, 5, None),
             (43_000, 44_000, 6, None)]  # fmt: skip
    kernels = [dict(start=s, end=e, correlation=c, **({} if n is None else {"graph_node": n}))
               for s, e, c, n in spans]  # fmt: skip
    nvtx = [("step", 0, 10_000), ("step", 20_000, 30_000)]
    totals = analyze(hand_trace(kernels, api, nvtx)).region_totals().set_index("name")
    assert totals.loc["step", ["instances", "ops", "launches"]].tolist() == [2, 5, 4]
    assert totals.loc["(outside ranges)", ["ops", "launches"]].tolist() == [2, 2]


def test_a_device_of_an_analysis_without_launches_selects():
    # a library caller's analysis whose launch table is empty (no kernel ran): narrowing it
    # to a device keeps the empty table (it has no op to read a device through)
    a = replace(analyze(load_trace(H200_SINGLE)), launches=pd.DataFrame())
    one = a.select(device=0)
    assert one.launches.empty and len(one.ops) == len(a.ops)
    assert one.launch_table(["device"]).empty


def test_an_ops_window_found_by_table_or_by_search_by_hand(monkeypatch):
    # windows (range_id, device): (7, 0) row 0, (3, 1) row 1, (7, 1) row 2; ops on (7, 1),
    # (3, 0) (no window), (3, 1), (7, 0), (9, 1) (no window): rows 2, -1, 1, 0, -1, whether
    # the packed keys are looked up in a table (they span (9 - 3 + 1) x 2 = 14 values) or
    # searched (a table of at most 0 values)
    import numpy as np

    from advisor import analysis

    windows = pd.DataFrame({"range_id": [7, 3, 7], "device": [0, 1, 1]})
    ops = pd.DataFrame({"range_id": [7, 3, 3, 7, 9], "device": [1, 0, 1, 0, 1]})
    keys = ["range_id", "device"]
    assert analysis._window_of(ops, windows, keys).tolist() == [2, -1, 1, 0, -1]
    monkeypatch.setattr(analysis, "WINDOW_TABLE_MAX", 0)
    assert analysis._window_of(ops, windows, keys).tolist() == [2, -1, 1, 0, -1]
    # two windows with the same keys: the first one, either way
    monkeypatch.setattr(analysis, "WINDOW_TABLE_MAX", 1 << 22)
    twice = pd.DataFrame({"range_id": [3, 7, 3], "device": [1, 0, 1]})
    assert analysis._window_of(ops, twice, keys).tolist() == [-1, -1, 0, 1, -1]
    # two ops at a time ((7, 1), (3, 0) | (3, 1), (7, 0) | (9, 1): each block packed on its
    # own keys' ranges): the same rows, by table and by search
    for table_max in (1 << 22, 0):
        monkeypatch.setattr(analysis, "WINDOW_TABLE_MAX", table_max)
        assert analysis._window_of(ops, windows, keys, block=2).tolist() == [2, -1, 1, 0, -1]
        assert analysis._window_of(ops, twice, keys, block=2).tolist() == [-1, -1, 0, 1, -1]
    monkeypatch.setattr(analysis, "WINDOW_TABLE_MAX", 1 << 22)
    # random ops and windows: the same rows by table and by search
    rng = np.random.default_rng(3)
    for _ in range(20):
        windows = pd.DataFrame(
            {"range_id": rng.permutation(60)[:25], "device": rng.integers(0, 3, 25)}
        )
        ops = pd.DataFrame(
            {"range_id": rng.integers(-1, 70, 500), "device": rng.integers(0, 3, 500)}
        )
        monkeypatch.setattr(analysis, "WINDOW_TABLE_MAX", 1 << 22)
        by_table = analysis._window_of(ops, windows, keys)
        monkeypatch.setattr(analysis, "WINDOW_TABLE_MAX", 0)
        assert by_table.tolist() == analysis._window_of(ops, windows, keys).tolist()
        assert by_table.tolist() == analysis._window_of(ops, windows, keys, block=7).tolist()


def test_ops_carry_comm_waits_only_where_the_trace_has_comm_ops():
    # the single-GPU H200 sample has no comm ops: no wait columns, every window's
    # comm_wait_ns 0; the two-GPU one has NCCL kernels: the columns, 0 / NaN off comm ops
    import numpy as np

    single = analyze(load_trace(H200_SINGLE))
    assert not single.ops["op_class"].eq("comm").any()
    assert "wait_ns" not in single.ops and "last_device" not in single.ops
    assert (single.devices["comm_wait_ns"] == 0).all() and (
        single.regions["comm_wait_ns"] == 0
    ).all()
    both = analyze(load_trace(H200_2GPU))
    comm = both.ops["op_class"].eq("comm").to_numpy()
    assert comm.any() and {"wait_ns", "last_device"} <= set(both.ops.columns)
    assert (both.ops["wait_ns"].to_numpy()[~comm] == 0).all()
    assert np.isnan(both.ops["last_device"].to_numpy()[~comm]).all()


def test_values_at_launches_from_a_dense_or_a_sparse_column():
    import numpy as np

    from advisor.analysis import _at_launches
    from advisor.metrics.gaps import _mostly

    # five ops: kernels at rows 0, 2, 3 (launch rows 2, 0, 1 of the trace's kernels), a copy
    # at row 1 and a kernel-less memset at row 4; values per op, -1 for none. The copy's 9
    # is no launch's; launch 0 (op 2) holds 5, launch 2 (op 0) 7, launch 1 (op 3) none
    ops = pd.DataFrame({"kind": pd.Categorical(["kernel", "memcpy", "kernel", "kernel",
                                                "memset"]),
                        "src": [2, 0, 0, 1, 0]})  # fmt: skip
    values = np.array([7, 9, 5, -1, -1], dtype=np.int32)
    assert _at_launches(ops, values, -1, 3).tolist() == [5, -1, 7]
    sparse = pd.arrays.SparseArray(values, fill_value=-1)
    assert _at_launches(ops, sparse, -1, 3).tolist() == [5, -1, 7]
    # _mostly: sparse only where that is smaller (a value and an index per held value)
    assert isinstance(_mostly(np.full(20, -1, np.int32), -1), pd.arrays.SparseArray)
    few = np.full(20, -1, np.int32)
    few[3] = 4
    assert _mostly(few, -1).tolist() == few.tolist()
    assert isinstance(_mostly(values, -1), np.ndarray)  # (3 of 5 held: dense is smaller)


def test_kernel_op_idle_sums_a_block_at_a_time_as_one_bincount():
    # four kernel ops (durations 100, 200, 300, 400 ns) of two configurations: tail share
    # 0.5 (full waves) and 0.25 (under-filled); bins 1, 0, 1, -1 (the last in no window).
    # By hand: tail per bin [0 + 0, 0.5 x 100 + 0.5 x 300] = [0, 200]; under-fill [0.25 x
    # 200, 0] = [50, 0]. Then 3,000 random ops against one np.bincount of every op's idle,
    # to the last bit, in blocks of 1, 7 and all
    import numpy as np

    from advisor.analysis import KernelOpIdle
    from advisor.metrics.waves import launch_idle

    configs = pd.DataFrame({"tail_fraction": [0.5, 0.25], "underfilled": [False, True]})
    ops = pd.DataFrame({"start": [0, 1000, 2000, 3000], "end": [100, 1200, 2300, 3400]})
    idle = KernelOpIdle(np.arange(4), np.array([0, 1, 0, 1]), ops, configs)
    got = idle.sums(np.array([1, 0, 1, -1]), 2, block=3)
    assert got["tail_idle_ns"].tolist() == [0.0, 200.0]
    assert got["underfill_idle_ns"].tolist() == [50.0, 0.0]

    rng = np.random.default_rng(11)
    configs = pd.DataFrame({"tail_fraction": rng.random(40), "underfilled": rng.random(40) < 0.3})
    start = np.sort(rng.integers(0, 10**9, 5000))
    ops = pd.DataFrame({"start": start, "end": start + rng.integers(1, 10**6, 5000)})
    rows = np.sort(rng.choice(5000, 3000, replace=False))
    config = rng.integers(0, 40, 3000)
    bins = rng.integers(-1, 60, 3000)
    values = launch_idle((ops["end"] - ops["start"]).to_numpy()[rows], config, configs)
    inside = bins >= 0
    for block in (1, 7, 3000):
        got = KernelOpIdle(rows, config, ops, configs).sums(bins, 60, block=block)
        for col, v in values.items():
            want = np.bincount(bins[inside], v[inside], 60)
            assert got[col].tobytes() == want.tobytes()


def test_a_lean_read_gives_the_same_analysis():
    # the cluster dims, which no metric reads, left out of an analysis's read (load_trace's
    # lean): every table of the analysis is the same, on a trace whose launches have them
    # (nsys-ai's two-GPU send/receive export: clusters of 2 and 4 blocks)
    from conftest import PUBLIC_NSYS

    from advisor.pipeline import run_trace

    path = PUBLIC_NSYS / "nsysai_2gpu_sendrecv_after_nsys2026.2.sqlite"
    full, lean = load_trace(path), load_trace(path, lean=True)
    assert (full.kernels["cluster_x"] > 1).sum() == 334 and "cluster_x" not in lean.kernels
    (a, found), (b, found_lean) = run_trace(full), run_trace(lean)
    for name in ("ops", "pieces", "devices", "regions", "launches"):
        pd.testing.assert_frame_equal(getattr(a, name), getattr(b, name))
    pd.testing.assert_frame_equal(a.kernel_table(), b.kernel_table())
    assert found and list(map(repr, found)) == list(map(repr, found_lean))
