import numpy as np
import pandas as pd
import pytest
from builders import trace

from advisor.analysis import analyze
from advisor.findings import find
from advisor.metrics.comm import overlap_ratio, startup_waits
from advisor.rules.tables import build_tables


@pytest.fixture(scope="module")
def comm_analysis():
    # device 0: all-reduce on its own stream [0,100) beside a GEMM [50,200)
    # device 1: the same all-reduce starts 30 ns later, on the GEMM's stream (serialized)
    return analyze(
        trace(
            [
                dict(device=0, stream=20, start=0, end=100, name="ncclDevKernel_AllReduce"),
                dict(device=0, stream=7, start=50, end=200, name="gemm"),
                dict(device=1, stream=7, start=30, end=130, name="ncclDevKernel_AllReduce"),
                dict(device=1, stream=7, start=130, end=200, name="gemm"),
            ]
        )
    )


def test_overlap_and_exposed_comm(comm_analysis):
    d = comm_analysis.devices.set_index("device")
    # device 0: comm 100, compute 150, overlap [50,100) = 50, exposed 50, ratio 0.5
    assert (d.loc[0, "comm_ns"], d.loc[0, "compute_ns"]) == (100, 150)
    assert (d.loc[0, "overlap_ns"], d.loc[0, "exposed_comm_ns"]) == (50, 50)
    assert d.loc[0, "overlap_ratio"] == 0.5
    # device 1: serialized on one stream: no overlap, all 100 ns exposed
    assert (d.loc[1, "overlap_ns"], d.loc[1, "exposed_comm_ns"]) == (0, 100)


def test_same_stream_comm(comm_analysis):
    d = comm_analysis.devices.set_index("device")
    assert d.loc[0, "same_stream_comm_ns"] == 0
    assert d.loc[1, "same_stream_comm_ns"] == 100


def test_collective_skew_and_wait(comm_analysis):
    c = comm_analysis.collectives.set_index("device")
    assert (c["skew_ns"] == 30).all()
    assert c.loc[0, "wait_ns"] == 30 and c.loc[1, "wait_ns"] == 0
    assert (c["last_device"] == 1).all()
    assert comm_analysis.summary()["comm_wait_ns"] == 30


def test_a_duplicated_comm_op_shares_its_match():
    # device 0's all-reduce recorded twice (a damaged trace): its 2nd copy is the 2nd launch
    # of the name there, which device 1 lacks, so only the 1st copy matches device 1's; both
    # copies wait for device 1 (start 30 - 0 = 30 ns), counted per op
    a = analyze(
        trace(
            [
                dict(device=0, stream=20, start=0, end=100, name="ncclDevKernel_AllReduce"),
                dict(device=0, stream=20, start=0, end=100, name="ncclDevKernel_AllReduce"),
                dict(device=1, stream=7, start=30, end=130, name="ncclDevKernel_AllReduce"),
            ]
        )
    )
    assert len(a.collectives) == 2  # one instance: device 0's first copy and device 1's op
    comm = a.ops[a.ops["op_class"] == "comm"].sort_values("device")
    assert comm["wait_ns"].tolist() == [30, 30, 0]
    assert comm["last_device"].tolist() == [1, 1, 1]


def test_startup_waits_are_the_waits_before_either_rank_is_steady():
    # Three comm ops' waits [start, start + wait): device 0 steady from 1000, device 1 from
    # 5000, device 2 has no start-up (absent). By hand:
    #   op a on 0 waits [800, 1800) for 1: before max(1000, 5000) = 5000: all 1000
    #   op b on 0 waits [4500, 6500) for 1: before 5000: 500 (the other 1500 steady)
    #   op c on 1 waits [7000, 7300) for 0: after max(5000, 1000): 0
    #   op d on 2 waits [100, 400) for 2's peer 0: before max(none, 1000): 300
    got = startup_waits(
        np.array([800, 4500, 7000, 100]), np.array([1000.0, 2000.0, 300.0, 300.0]),
        np.array([0, 0, 1, 2]), np.array([1.0, 1.0, 0.0, 0.0]),
        pd.Series({0: 1000, 1: 5000}),
    )  # fmt: skip
    assert got.tolist() == [1000.0, 500.0, 0.0, 300.0]


def _init_and_steps(step_kernels):
    """One device, times in us: range "init" [0, 900) with an all-reduce [100, 300) alone and
    a gemm [400, 700), then four "step" ranges [t0, t0 + 900), t0 = 1000 * (i + 1), holding
    ``step_kernels(t0)``'s (start, end, name) kernels; each kernel launched 50-40 us before
    it starts."""
    u = 1000
    kernels, api, nvtx = [], [], [("init", 0, 900 * u)]
    rows = [(100, 300, "ncclDevKernel_AllReduce"), (400, 700, "gemm")]
    for i in range(4):
        t0 = 1000 * (i + 1)
        nvtx.append(("step", t0 * u, (t0 + 900) * u))
        rows += step_kernels(t0)
    for corr, (start, end, name) in enumerate(rows, 1):
        kernels.append(dict(start=start * u, end=end * u, name=name, correlation=corr))
        api.append(("cudaLaunchKernel", (start - 50) * u, (start - 40) * u, corr))
    return trace(kernels, api, nvtx)


def test_compute_already_alongside_comm_hides_no_more_of_it():
    # One device, times in us (U = 1000 ns). Range "init" [0, 900): an all-reduce [100, 300)
    # alone (start-up), a gemm [400, 700). Then four "step" ranges [t0, t0 + 900), t0 =
    # 1000 * (i + 1): an all-reduce [t0 + 100, t0 + 700) and a gemm [t0 + 500, t0 + 800)
    # beside it. Per step by hand: comm 600, compute 300, overlap 200 ([t0 + 500, t0 +
    # 700)), exposed 400, busy 700 = comm + compute - overlap. Moving all the compute beside
    # the comm leaves busy max(600, 300) = 600: 100 us saved per step, the compute not
    # already alongside comm (300 - 200), not the whole compute (300: the 200 us that already
    # overlap would be counted twice). Four steps: hidable 400 us, not min(1600, 1200).
    u = 1000

    def step(t0):
        return [(t0 + 100, t0 + 700, "ncclDevKernel_AllReduce"), (t0 + 500, t0 + 800, "gemm")]

    a = analyze(_init_and_steps(step))
    r = build_tables(a)["regions"].set_index("name").loc["step"]
    assert (r["comm_ns"], r["compute_ns"], r["overlap_ns"], r["exposed_comm_ns"]) == (
        2400 * u, 1200 * u, 800 * u, 1600 * u)  # fmt: skip
    assert r["startup_exposed_comm_ns"] == 0 and r["hidable_comm_ns"] == 400 * u
    exposed = {f.region: f.est_savings_ns for f in find(a) if f.rule == "exposed-comm"}
    assert exposed == {"step": 400 * u}


def test_exposed_comm_before_the_steady_state_is_start_up():
    # One device, times in us (U = 1000 ns). Range "init" [0, 900): an all-reduce [100, 300)
    # with nothing alongside (NCCL's first collective), then a gemm [400, 700). Then four
    # "step" ranges [t0, t0 +
    # 900), t0 = 1000 * (i + 1): gemm [t0 + 100, t0 + 300), all-reduce [t0 + 300, t0 + 400).
    # Every kernel is launched 50-40 us before it starts. The steady state begins at the
    # first step's gemm (1100 us, the first op of the range family that recurs), so by hand:
    # exposed comm 200 + 4 * 100 = 600 us, 200 of it start-up (init's); init hides nothing
    # (hidable 0: no finding; before, min(200, its compute 300) = 200 us of exposed-comm
    # advice), the steps' 400 us are
    # all steady (hidable min(400, compute 800) = 400 us: exposed-comm advice).
    u = 1000

    def step(t0):
        return [(t0 + 100, t0 + 300, "gemm"), (t0 + 300, t0 + 400, "ncclDevKernel_AllReduce")]

    a = analyze(_init_and_steps(step))
    d = a.devices.iloc[0]
    assert (d["steady_start_ns"], d["exposed_comm_ns"], d["startup_exposed_comm_ns"]) == (
        1100 * u,
        600 * u,
        200 * u,
    )
    r = build_tables(a)["regions"].set_index("name")
    assert (r.loc["init", "startup_exposed_comm_ns"], r.loc["init", "hidable_comm_ns"]) == (
        200 * u,
        0,
    )
    assert (r.loc["step", "startup_exposed_comm_ns"], r.loc["step", "hidable_comm_ns"]) == (
        0,
        400 * u,
    )
    exposed = {f.region: f.est_savings_ns for f in find(a) if f.rule == "exposed-comm"}
    assert exposed == {"step": 400 * u}


def test_overlap_ratio_of_arrays_as_of_series():
    # by hand: 5 of 10 ns overlapped = 0.5; no communication (0 ns): NaN, whatever overlaps
    overlap, comm = np.array([5, 0, 3], dtype=np.int64), np.array([10, 0, 0], dtype=np.int64)
    got = overlap_ratio(overlap, comm)
    assert got[0] == 0.5 and np.isnan(got[1:]).all()
    want = overlap_ratio(pd.Series(overlap), pd.Series(comm)).to_numpy()
    np.testing.assert_array_equal(got, want)
    assert overlap_ratio(5, 10) == 0.5 and overlap_ratio(3, 0) is None  # (one total)


@pytest.mark.parametrize("send_us, reduce_us, rule", [(400, 100, "exposed-p2p"),
                                                       (100, 400, "exposed-comm")])  # fmt: skip
def test_exposed_send_receive_and_exposed_collectives_get_their_own_rule(send_us, reduce_us, rule):
    # One device, times in us (U = 1000 ns); the init range as above, then four "step"
    # ranges [t0, t0 + 900): a SendRecv kernel [t0 + 100, t0 + 100 + s), an all-reduce after
    # it for r us, a gemm [t0 + 600, t0 + 800). Per step by hand: comm s + r = 500 with
    # nothing alongside, compute 200: hidable min(500, 200) = 200 us, 800 us over the four.
    # p2p_comm_share = s / 500: 0.8 (send/receive: exposed-p2p) or 0.2 (collectives:
    # exposed-comm); never both
    u = 1000

    def step(t0):
        return [(t0 + 100, t0 + 100 + send_us, "ncclDevKernel_SendRecv"),
                (t0 + 100 + send_us, t0 + 600, "ncclDevKernel_AllReduce"),
                (t0 + 600, t0 + 800, "gemm")]  # fmt: skip

    a = analyze(_init_and_steps(step))
    r = build_tables(a)["regions"].set_index("name").loc["step"]
    assert r["p2p_comm_share"] == pytest.approx(send_us / 500)
    assert r["hidable_comm_ns"] == 800 * u
    fired = {(f.rule, f.region, f.est_savings_ns) for f in find(a)
             if f.rule in ("exposed-comm", "exposed-p2p")}  # fmt: skip
    assert fired == {(rule, "step", 800 * u)}


def test_tensor_parallel_collectives_beside_send_receive_are_claimed_once():
    # One device and stream, times in us; the init range as above, then four "step" ranges:
    # 8 all-reduces of 10 us each followed by a 20 us gemm ([t0 + 60 + 40 i, t0 + 90 + 40
    # i): launched 50 us before, inside the range), then a SendRecv [t0 + 400, t0 + 800).
    # Per step by hand: comm 80 + 400 = 480, all
    # exposed, p2p share 400 / 480 = 0.83, 8 collectives each between gemms (interleaved 1),
    # compute 160: hidable 4 x min(480, 160) = 640 us. tp-exposed-comm and exposed-p2p
    # both hold; the tensor-parallel one supersedes (the same hidable_comm_ns, once)
    u = 1000

    def step(t0):
        layers = [k for i in range(8) for k in (
            (t0 + 60 + 40 * i, t0 + 70 + 40 * i, "ncclDevKernel_AllReduce"),
            (t0 + 70 + 40 * i, t0 + 90 + 40 * i, "gemm"))]  # fmt: skip
        return [*layers, (t0 + 400, t0 + 800, "ncclDevKernel_SendRecv")]

    a = analyze(_init_and_steps(step))
    r = build_tables(a)["regions"].set_index("name").loc["step"]
    assert r["p2p_comm_share"] == pytest.approx(400 / 480) and r["hidable_comm_ns"] == 640 * u
    assert r["collectives_per_instance"] == 8 and r["interleaved_share"] == 1
    fired = [(f.rule, f.est_savings_ns) for f in find(a) if f.region == "step"
             and f.rule in ("exposed-comm", "exposed-p2p", "tp-exposed-comm")]  # fmt: skip
    assert fired == [("tp-exposed-comm", 640 * u)]


def test_device_segments_a_device_at_a_time_or_the_whole_way(monkeypatch):
    # by device then start (device_ops), the masked union per device a block at a time; the
    # same rows out of device order take the whole way: the same segments
    from advisor.metrics import intervals as iv
    from advisor.metrics.comm import device_segments

    ops = pd.DataFrame({"device": [0, 0, 0, 1, 1, 2], "start": [0, 5, 20, 0, 3, 7],
                        "end": [10, 8, 30, 2, 9, 7]})  # fmt: skip
    mask = np.array([True, True, True, False, True, True])
    want = {0: ([0, 20], [10, 30]), 1: ([3], [9]), 2: ([], [])}
    shuffled = ops.iloc[[3, 0, 5, 1, 4, 2]].reset_index(drop=True)
    for table, m in ((ops, mask), (shuffled, mask[[3, 0, 5, 1, 4, 2]])):
        for block in (1, 2, 1 << 20):
            monkeypatch.setattr(iv, "UNION_BLOCK", block)
            got = device_segments(table, m)
            assert {d: (s.tolist(), e.tolist()) for d, (s, e) in got.items()} == want


def test_window_comm_is_the_definition_on_random_ops():
    # comm, compute, overlap = |comm ∩ compute| and exposed comm = |comm| - overlap of each
    # window, against the definition on an integer grid: window_comm gives compute time as
    # busy time less the busy time no compute op covers (class_segments' not_compute)
    from advisor.analysis import clipped_metrics
    from advisor.metrics.comm import OP_CLASSES, class_segments

    rng = np.random.default_rng(5)
    for _ in range(150):
        n = int(rng.integers(1, 14))
        device = np.sort(rng.integers(0, 2, n))
        start = rng.integers(0, 60, n)
        order = np.lexsort((start, device))
        device, start = device[order], start[order]
        ops = pd.DataFrame({"device": device, "start": start,
                            "end": start + rng.integers(0, 12, n)})  # fmt: skip
        op_class = pd.Series(pd.Categorical(rng.choice(OP_CLASSES, n), OP_CLASSES))
        w = int(rng.integers(1, 5))
        lo = rng.integers(0, 70, w)
        windows = pd.DataFrame({"device": rng.integers(0, 2, w), "start_ns": lo,
                                "end_ns": lo + rng.integers(0, 30, w)})  # fmt: skip
        got = clipped_metrics(windows, class_segments(ops, op_class), {})
        for i, win in windows.iterrows():
            cover = {c: np.zeros(100, dtype=bool) for c in OP_CLASSES}
            for op, cls in zip(ops.itertuples(), op_class, strict=True):
                if op.device == win.device:
                    cover[cls][op.start : op.end] = True
            inside = np.zeros(100, dtype=bool)
            inside[win.start_ns : win.end_ns] = True
            comm, compute = cover["comm"] & inside, cover["compute"] & inside
            busy = (cover["comm"] | cover["compute"] | cover["memory"]) & inside
            want = {"gpu_busy_ns": busy.sum(), "comm_ns": comm.sum(), "compute_ns": compute.sum(),
                    "overlap_ns": (comm & compute).sum(),
                    "exposed_comm_ns": (comm & ~compute).sum()}  # fmt: skip
            assert {c: int(got.at[i, c]) for c in want} == want
