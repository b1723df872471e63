"""Idle attribution on one hand-built trace with one scenario per cause (times in ns; every
expected number below is worked out by hand from the rules in metrics/attribution.py, with
the default thresholds: fewer than 20 launches into an idle device, so the launch latency
bound L is the default 20 us; host-late time nothing names is launch work up to 100 us).

Device 0, process 1, launching thread 10; ops sorted by start:

  op   GPU interval           launch call                     gap before  pieces (cause: ns)
  k1   [0, 1000)              -                               -           (first op)
  k2   [1450, 2000)           [1300, 1400]                    450         A
  k3   [200300, 201000)       [200100, 200200]                198300      B
  m1   [259000, 259500) copy  cudaMemcpy [201100, 260000]     58000       C
  k4   [260300, 261000)       [260100, 260200]                800         C'
  k5   [500200, 501000)       [500000, 500100]                239200      D
  k6   [690200, 691000)       [690000, 690100]                189200      E
  k7   [800000, 801000) s9    [691300, 691400]                109000      F
  k8   [802000, 803000)       none (corr 99)                  1000        G
  k9   [850300, 851000)       [850100, 850200]                47300       I
  k10  [851300, 852000) graph cudaGraphLaunch [851100, 851200] 300        J
  k11  [852100, 853000) graph same graph launch                100        J'

A  the host waits in cudaStreamSynchronize [500, 1200] while k1 runs (it spans g0=1000):
   [1000, 1400) host-late = 400: 200 inside the call, and the 200 after it up to the launch
   are the call's too (it waited 1000 - 500 = 500 before g0): synchronization 400;
   [1400, 1450) launch_latency 50.
B  cudaStreamSynchronize [1950, 2050] spans g0=2000, then the DataLoader range
   [2100, 200000): host-late [2000, 200200) = 198200: sync covers 50, input covers 197900;
   the rest 250 takes the sync's credit min(2000 - 1950, 250) = 50, leaving 200 of launch
   work: synchronization 100, input_pipeline 197900, host_bound 200; latency 100.
C  the op ends when its own blocking copy call lets it start: [201000, 259000) host-late,
   the call covers [201100, 259000) = 57900 (blocking_copy), 100 before it (host_bound).
C' k4's gap [259500, 260300): host-late 700, the copy call covers 500 and, spanning g0,
   is credited the remaining 200: blocking_copy 700; latency 100.
D  239100 host-late in NVTX "compute_metrics" [262000, 499000) (covers over half of it),
   which does not hold k5's launch: longer than 100 us -> host_busy 239100; latency 100.
E  189100 host-late in "aten::addmm" [501500, 700000), which holds k6's own launch call:
   launch work however long -> host_bound 189100; latency 100.
F  cudaStreamWaitEvent [691100, 691200] then k7 launched at 691400, yet it starts at
   800000: it waited 108600 > L after its launch: the whole gap is queued_wait 109000,
   held by "an event wait (cudaStreamWaitEvent)".
G  no launch call: unattributed 1000.
I  cuModuleLoadData [803100, 850000] inside host-late [803000, 850200): startup 46900,
   the 300 around it host_bound; latency 100.
J  k10: host-late [851000, 851200) host_bound 200, latency 100; k11 waits 100 <= L after
   the graph launch, behind k10 of the same launch: graph_internal 100.

Totals: synchronization 500, input_pipeline 197900, blocking_copy 58600, host_busy 239100,
host_bound 189900, queued_wait 109000, unattributed 1000, startup 46900, launch_latency
650, graph_internal 100: 843650 = the sum of the gaps.
"""

import numpy as np
import pandas as pd
import pytest
from builders import api as api_table
from builders import kernels, nvtx
from conftest import H200_SINGLE, PUBLIC
from hypothesis import given, settings
from hypothesis import strategies as st

from advisor.metrics.gaps import attribute_gaps, device_ops, gap_breakdown
from advisor.trace.load import load_trace
from advisor.trace.model import Trace

KERNELS = [
    dict(start=0, end=1000, correlation=1),
    dict(start=1450, end=2000, correlation=2),
    dict(start=200300, end=201000, correlation=3),
    dict(start=260300, end=261000, correlation=5),
    dict(start=500200, end=501000, correlation=6),
    dict(start=690200, end=691000, correlation=7),
    dict(start=800000, end=801000, correlation=8, stream=9),
    dict(start=802000, end=803000, correlation=99),
    dict(start=850300, end=851000, correlation=10),
    dict(start=851300, end=852000, correlation=11, graph_node=1),
    dict(start=852100, end=853000, correlation=11, graph_node=2),
]
API = [
    ("cudaStreamSynchronize", 500, 1200, None),
    ("cudaLaunchKernel", 1300, 1400, 2),
    ("cudaStreamSynchronize", 1950, 2050, None),
    ("cudaLaunchKernel", 200100, 200200, 3),
    ("cudaMemcpy", 201100, 260000, 4),
    ("cudaLaunchKernel", 260100, 260200, 5),
    ("cudaLaunchKernel", 500000, 500100, 6),
    ("cudaLaunchKernel", 690000, 690100, 7),
    ("cudaStreamWaitEvent", 691100, 691200, None),
    ("cudaLaunchKernel", 691300, 691400, 8),
    ("cuModuleLoadData", 803100, 850000, None),
    ("cudaLaunchKernel", 850100, 850200, 10),
    ("cudaGraphLaunch", 851100, 851200, 11),
]
RANGES = [
    ("enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__", 2100, 200000),
    ("compute_metrics", 262000, 499000),
    ("aten::addmm", 501500, 700000),
]
LOADER = RANGES[0][0]


def hand_trace() -> Trace:
    t = Trace(path="<hand-built>", format="test", producer_version="test",
              kernels=kernels(KERNELS))  # fmt: skip
    t.api = api_table(API)
    t.nvtx = nvtx(RANGES)
    t.memcpy = pd.DataFrame([{"device": 0, "stream": 7, "start": 259000, "end": 259500,
                              "bytes": 4, "kind": "DtoH", "correlation": 4, "pid": 1}])  # fmt: skip
    return t


@pytest.fixture(scope="module")
def attributed():
    t = hand_trace()
    return attribute_gaps(device_ops(t), t)


def _by_op(ops, pieces) -> dict:
    """{op start: {cause: ns}} of the pieces."""
    at = ops.loc[pieces["row"], "start"].to_numpy()
    p = pieces.assign(ns=pieces["end"] - pieces["start"], at=at)
    return {int(s): {str(c): int(n) for c, n in zip(g["cause"], g["ns"], strict=True)}
            for s, g in p.groupby("at")}  # fmt: skip


def test_each_gap_split_by_what_held_it(attributed):
    ops, pieces = attributed
    assert _by_op(ops, pieces) == {
        1450: {"synchronization": 400, "launch_latency": 50},
        200300: {"synchronization": 100, "input_pipeline": 197900, "host_bound": 200,
                 "launch_latency": 100},
        259000: {"blocking_copy": 57900, "host_bound": 100},
        260300: {"blocking_copy": 700, "launch_latency": 100},
        500200: {"host_busy": 239100, "launch_latency": 100},
        690200: {"host_bound": 189100, "launch_latency": 100},
        800000: {"queued_wait": 109000},
        802000: {"unattributed": 1000},
        850300: {"startup": 46900, "host_bound": 300, "launch_latency": 100},
        851300: {"host_bound": 200, "launch_latency": 100},
        852100: {"graph_internal": 100},
    }  # fmt: skip


def test_idle_is_the_sum_of_causes(attributed):
    ops, pieces = attributed
    b = gap_breakdown(pieces).set_index("cause")["total_ns"].to_dict()
    assert b == {
        "synchronization": 500, "input_pipeline": 197900, "blocking_copy": 58600,
        "host_busy": 239100, "host_bound": 189900, "queued_wait": 109000, "unattributed": 1000,
        "startup": 46900, "launch_latency": 650, "graph_internal": 100,
    }  # fmt: skip
    assert sum(b.values()) == ops["gap_ns"].sum() == 843650
    # the pieces tile the gaps: disjoint, inside their gap
    gap_start = ops["start"] - ops["gap_ns"]
    assert (pieces["start"].to_numpy() >= gap_start[pieces["row"]].to_numpy()).all()
    assert (pieces["end"].to_numpy() <= ops.loc[pieces["row"], "start"].to_numpy()).all()
    by_time = pieces.sort_values(["device", "start"])
    assert (by_time["start"].to_numpy()[1:] >= by_time["end"].to_numpy()[:-1]).all()
    # in cause order, each cause's pieces by device and start (piece_segments: slices)
    key = list(zip(pieces["cause"].array.codes, pieces["device"], pieces["start"], strict=True))
    assert key == sorted(key) and pieces["cause"].array.codes[0] < pieces["cause"].array.codes[-1]


def test_what_held_each_gap_is_named(attributed):
    ops, _ = attributed
    got = {int(s): (str(c), str(d)) for s, c, d in
           zip(ops["start"], ops["cause"], ops["detail"], strict=True) if pd.notna(c)}  # fmt: skip
    assert got[1450] == ("synchronization", "cudaStreamSynchronize")
    assert got[200300] == ("input_pipeline", LOADER)
    assert got[259000] == ("blocking_copy", "cudaMemcpy")
    assert got[500200] == ("host_busy", "compute_metrics")
    assert got[690200] == ("host_bound", "aten::addmm")
    assert got[800000] == ("queued_wait", "an event wait (cudaStreamWaitEvent)")
    assert got[850300] == ("startup", "")
    # the op that launched each kernel
    assert ops.set_index("start").loc[690200, "launch_op"] == "aten::addmm"
    # the overhead a CUDA graph would act on: host_bound + latency + graph_internal
    assert int(ops["overhead_ns"].sum()) == 189900 + 650 + 100


def test_a_sync_that_did_not_hold_the_launch_back_owns_nothing():
    # a long synchronize that began before the device went idle while the next launch had
    # been issued before it: the gap is launch latency (the op was queued)
    from builders import trace

    t = trace(
        [dict(start=0, end=1000, correlation=1), dict(start=1200, end=2000, correlation=2)],
        [("cudaLaunchKernel", 100, 150, 2), ("cudaDeviceSynchronize", 200, 2100, None)],
    )
    ops, pieces = attribute_gaps(device_ops(t), t)
    assert pieces[["cause", "start", "end"]].astype({"cause": str}).values.tolist() == [
        ["launch_latency", 1000, 1200]
    ]


def test_a_blocking_call_is_credited_at_most_its_own_time():
    # A cudaMemcpy [1500, 4000] starts while the device idles after k1 [0, 1000); its copy
    # runs [2000, 3000); k2 is launched [5000, 5100] and starts at 5200.
    # Gap [1000, 2000): host-late (the copy was enqueued at 2000); the call covers
    #   [1500, 2000) = 500 blocking_copy, the 500 before it host_bound.
    # Gap [3000, 5200): host-late [3000, 5100) = 2100; the call covers [3000, 4000) = 1000,
    #   and spanning g0 = 3000 it is credited the time the device was busy in [1500, 3000):
    #   1500 - 500 idle (already counted in the first gap) = 1000 of the rest 1100; host_bound
    #   100, launch_latency 100.
    # blocking_copy 500 + 1000 + 1000 = 2500 = the call's own 4000 - 1500: without the call
    # the host would have been 2500 ahead, no more (crediting the whole 1500 before g0 gave
    # 2600, counting [1500, 2000) twice).
    from builders import trace

    t = trace(
        [dict(start=0, end=1000, correlation=1), dict(start=5200, end=6000, correlation=3)],
        [("cudaMemcpy", 1500, 4000, 2), ("cudaLaunchKernel", 5000, 5100, 3)],
    )
    t.memcpy = pd.DataFrame([{"device": 0, "stream": 7, "start": 2000, "end": 3000,
                              "bytes": 4, "kind": "HtoD", "correlation": 2, "pid": 1}])  # fmt: skip
    ops, pieces = attribute_gaps(device_ops(t), t)
    assert _by_op(ops, pieces) == {
        2000: {"blocking_copy": 500, "host_bound": 500},
        5200: {"blocking_copy": 2000, "host_bound": 100, "launch_latency": 100},
    }


def test_device_idle_between_by_hand():
    # device 0 idles [10, 20) and [30, 35); device 1 [0, 100)
    from advisor.metrics.attribution import _DeviceIdle

    idle = _DeviceIdle(np.array([0, 0, 0, 1]), np.array([0, 20, 35, 100]),
                       np.array([0, 10, 5, 100]))  # fmt: skip
    dev = np.array([0, 0, 0, 0, 0, 1, 2])
    lo = np.array([0, 15, 12, 20, 40, 50, 0])
    hi = np.array([40, 32, 18, 30, 50, 70, 9])
    # [0, 40): 10 + 5; [15, 32): 5 + 2; [12, 18): 6; [20, 30): 0; [40, 50): 0; device 1
    # [50, 70): 20; device 2 has no gaps: 0
    assert idle.between(dev, lo, hi).tolist() == [15, 7, 6, 0, 0, 20, 0]


def test_startup_is_a_position_not_a_name():
    # a repeated top-level range "step" whose instances run to the end of the trace: the
    # idle before its first instance is start-up; a cudaGetDeviceProperties call inside
    # the steps (as ROCm PyTorch makes thousands of) is host time of the steps
    from builders import trace

    rows, api, ranges = [], [], [("init", 0, 9000)]
    rows.append(dict(start=0, end=1000, correlation=1))
    api.append(("cudaLaunchKernel", 0, 100, 1))
    for i in range(4):  # steps at 10000, 20000, 30000, 40000: two kernels each
        base = 10000 * (i + 1)
        ranges.append((f"step_{i}", base - 500, base + 9000))
        for j, at in enumerate((base, base + 5000)):
            c = 10 + 2 * i + j
            rows.append(dict(start=at, end=at + 1000, correlation=c))
            api.append(("cudaLaunchKernel", at - 200, at - 100, c))
        api.append(("cudaGetDeviceProperties", base + 1100, base + 4700, None))
    t = trace(rows, api, ranges)
    ops, pieces = attribute_gaps(device_ops(t), t)
    p = pieces.assign(ns=pieces["end"] - pieces["start"]).astype({"cause": str})
    totals = p.groupby("cause")["ns"].sum().to_dict()
    # start-up: the gap before the first step's first kernel, [1000, 10000)
    assert totals["startup"] == 9000
    # inside each step: [base+1000, base+5000) host-late until the launch ended at
    # base+4900 (3900, launch work inside the step range), then 100 of latency; between
    # steps: [base+6000, base+10000): 3900 + 100 the same way
    assert totals["host_bound"] == 7 * 3900
    assert totals["launch_latency"] == 7 * 100
    # (ranges named as range families: step_0 .. step_3 are "step")
    details = p.loc[p["cause"] == "host_bound", "detail"].astype(str)
    assert details.value_counts().to_dict() == {"cudaGetDeviceProperties (in step)": 4, "step": 3}


def test_startup_by_position_tells_kernels_apart_by_their_full_names():
    # no ranges; 48 kernels all named "k" (as Nsight's short names name every template of
    # one function), 1000 ns each, every one 1000 ns after the last ended: 8 one-off setup
    # kernels (full names init<0> .. init<7>), then 40 of a loop (mul<f>, add<f> in turn).
    # By short names every run of 8 recurs in the last quarter: no start-up. By full names
    # the first run of 8 that recurs there starts at the loop's first kernel (op 8, at
    # 16000): start-up is the 8 gaps before it, 8 x 1000 = 8000 ns
    rows, calls = [], []
    for i in range(48):
        full = f"init<{i}>" if i < 8 else ("mul<f>" if i % 2 == 0 else "add<f>")
        at = 2000 * i
        rows.append(dict(start=at, end=at + 1000, correlation=i + 1, name="k", demangled=full))
        calls.append(("cudaLaunchKernel", at - 300, at - 200, i + 1))
    t = Trace(path="<hand-built>", format="test", producer_version="test", kernels=kernels(rows))
    t.api = api_table(calls)
    ops, pieces = attribute_gaps(device_ops(t), t)
    b = gap_breakdown(pieces).set_index("cause")["total_ns"].to_dict()
    assert b["startup"] == 8000
    assert sum(b.values()) == 47 * 1000  # (every gap counted once)


P_STEP = 20_000_000  # the period of _slow_relu_steps' steps (ns)


def _slow_relu_steps(templates: list[str]) -> dict:
    """Four 20 ms steps (range "step" [iP - 1000, iP + 15 ms), P = P_STEP). In each: gemm at
    [iP, iP + 1000) launched [iP - 600, iP - 500]; relu (full name ``templates[i]``)
    launched from iP + 1100, its call lasting 9 ms in steps 0 and 1 and 100 ns after, relu
    starting 100 ns after its call returns. Steady state begins at step 0 (the first
    instance of the recurring range), so position makes nothing start-up. Returns
    _by_op of the attributed pieces."""
    ks, calls, ranges = [], [], []
    for i, full in enumerate(templates):
        slow = 9_000_000 if i < 2 else 100
        base = i * P_STEP
        ks.append(dict(start=base, end=base + 1000, correlation=10 * i + 1, name="gemm"))
        relu_start = base + 1100 + slow + 100
        ks.append(dict(start=relu_start, end=relu_start + 800, correlation=10 * i + 2,
                       name="relu", demangled=full))  # fmt: skip
        calls += [("cudaLaunchKernel", base - 600, base - 500, 10 * i + 1),
                  ("cudaLaunchKernel", base + 1100, base + 1100 + slow, 10 * i + 2)]  # fmt: skip
        ranges.append(("step", base - 1000, base + 15_000_000))
    t = Trace(path="<hand-built>", format="test", producer_version="test", kernels=kernels(ks))
    t.api = api_table(calls)
    t.nvtx = nvtx(ranges)
    ops, pieces = attribute_gaps(device_ops(t), t)
    return _by_op(ops, pieces)


def test_a_kernels_slow_first_launch_is_startup():
    # _slow_relu_steps, one relu template (lazy module loading in step 0's 9 ms call; step
    # 1's is just slow). relu_0's gap [1000, 9001200): host-late [1000, 9001100); inside its
    # first launch call [1100, 9001100) (9 ms > 100 us) 9,000,000 is start-up; the 100
    # before the call is launch work (host_bound); 100 launch latency. relu_1's identical
    # call is no first launch: 9,000,100 host_bound (the window's middle lies inside its own
    # launch call), latency 100.
    # relu_2 (a 100 ns call): host-late [2P + 1000, 2P + 1200) = 200 host_bound, latency 100.
    p = P_STEP
    got = _slow_relu_steps(["relu<float>"] * 4)
    assert got[9_001_200] == {"startup": 9_000_000, "host_bound": 100, "launch_latency": 100}
    assert got[p + 9_001_200] == {"host_bound": 9_000_100, "launch_latency": 100}
    assert got[2 * p + 1300] == {"host_bound": 200, "launch_latency": 100}


def test_a_templates_slow_first_launch_is_startup_when_short_names_repeat():
    # As above, but relu_1 is another template of one short name (Nsight's ``relu`` for
    # both relu<float> and relu<half>): lazy loading loads relu<half>'s code inside ITS
    # first launch call, so relu_1's 9 ms call is start-up too: 9,000,000 startup, the 100
    # before the call host_bound, 100 latency (by short name it was 9,000,100 host_bound).
    p = P_STEP
    got = _slow_relu_steps(["relu<float>", "relu<half>", "relu<float>", "relu<float>"])
    assert got[9_001_200] == {"startup": 9_000_000, "host_bound": 100, "launch_latency": 100}
    assert got[p + 9_001_200] == {"startup": 9_000_000, "host_bound": 100, "launch_latency": 100}
    assert got[2 * p + 1300] == {"host_bound": 200, "launch_latency": 100}


def test_host_work_in_a_step_is_told_from_launch_work_by_the_operators():
    # One user range "step" [0, 2 ms) on thread 10; kernels of 800 ns, each launched by a
    # 100 ns call that ends 100 ns before it starts (launch latency 100 <= L = 20 us).
    # U  k2 [405200, 406000), call [405000, 405100] inside operator aten::mm [400000,
    #    410000). Host-late [1000, 405100) = 404100; the range covering half of it is the
    #    user range "step"; an operator launched k2, so operators are recorded then; the
    #    longest stretch outside every operator and call: [1000, 400000) = 399000 > 100 us:
    #    host work, host_busy 404100 (before: "step" holds the launch -> host_bound).
    # G  k3 [605200, 606000), call [605000, 605100] in aten::add [600000, 610000), after
    #    aten::view at [420000, 430000), [480000, 490000), [540000, 550000). Host-late
    #    [406000, 605100) = 199100, covered half by "step"; stretches outside operators:
    #    [410000, 420000) 10000, then 50000, 50000, 50000: none over 100 us: the framework's
    #    own work between launches, host_bound 199100.
    # N  k4 [800200, 801000), call [800000, 800100] in no operator (as in a trace without
    #    operator ranges, an nsys capture without emit_nvtx): host-late [606000, 800100) =
    #    194100 in "step", which holds the launch; the longest stretch outside every
    #    operator and call, [610000, 800000) = 190000, is not over host_silent_max_ns (1 ms:
    #    a launch path's own Python runs between calls there): host_bound 194100
    # O  k5 [1005200, 1006000), call [1005000, 1005100] in aten::mul [1000000, 1010000);
    #    before it the CPU op aten::sort [810000, 1000000) covers 190000 of host-late
    #    [801000, 1005100) = 204100 and does not hold the launch: host_busy 204100.
    # P  k6 [1205200, 1206000), call [1205000, 1205100] in no operator; host-late [1006000,
    #    1205100) = 199100 in "step", which holds the launch, with cudaGetDevice calls at
    #    [1050000, 1050100], [1100000, 1100100], [1150000, 1150100]: the stretches outside
    #    operators and calls 40000 (from aten::mul's end), 49900, 49900, 54900: none over
    #    100 us: the launching code (API calls through it), host_bound 199100.
    ks = [dict(start=0, end=1000, correlation=1)]
    calls = [("cudaLaunchKernel", -500, -400, 1)]
    for corr, (start, call) in enumerate(
        [(405_200, 405_000), (605_200, 605_000), (800_200, 800_000), (1_005_200, 1_005_000),
         (1_205_200, 1_205_000)], 2
    ):  # fmt: skip
        ks.append(dict(start=start, end=start + 800, correlation=corr))
        calls.append(("cudaLaunchKernel", call, call + 100, corr))
    calls += [("cudaGetDevice", at, at + 100, 100 + i)
              for i, at in enumerate((1_050_000, 1_100_000, 1_150_000))]  # fmt: skip
    ranges = [("step", 0, 2_000_000), ("aten::mm", 400_000, 410_000),
              ("aten::view", 420_000, 430_000), ("aten::view", 480_000, 490_000),
              ("aten::view", 540_000, 550_000), ("aten::add", 600_000, 610_000),
              ("aten::sort", 810_000, 1_000_000), ("aten::mul", 1_000_000, 1_010_000)]  # fmt: skip
    t = Trace(path="<hand-built>", format="test", producer_version="test", kernels=kernels(ks))
    t.api = api_table(calls)
    t.nvtx = nvtx(ranges)
    ops, pieces = attribute_gaps(device_ops(t), t)
    got = _by_op(ops, pieces)
    assert got[405_200] == {"host_busy": 404_100, "launch_latency": 100}
    assert got[605_200] == {"host_bound": 199_100, "launch_latency": 100}
    assert got[800_200] == {"host_bound": 194_100, "launch_latency": 100}
    assert got[1_005_200] == {"host_busy": 204_100, "launch_latency": 100}
    assert got[1_205_200] == {"host_bound": 199_100, "launch_latency": 100}


def test_the_longest_uncovered_stretch_by_hand():
    # segments [10, 20) [15, 30) [50, 60) [100, 120) (given out of order): running reach
    # 20, 30, 60, 120; the stretch before each start: -, 15 - 20 < 0, 50 - 30 = 20,
    # 100 - 60 = 40
    from advisor.metrics.attribution import _Uncovered

    start, end = np.array([50, 10, 100, 15]), np.array([60, 20, 120, 30])
    lo = np.array([0, 12, 25, 31, 55, 0, 130, 0])
    hi = np.array([5, 40, 140, 49, 110, 200, 150, 12])
    # [0,5): 5; [12,40): covered to 30, then 10; [25,140): 20 (30-50), 40 (60-100), 20
    # (120-140); [31,49): 18; [55,110): 40; [0,200): 10, 20, 40, 80 (120-200); [130,150): 20;
    # [0,12): 10
    got = _Uncovered(start, end).longest(lo, hi)
    assert got.tolist() == [5, 10, 40, 18, 40, 80, 20, 10]


def test_outermost_segments_keep_the_union():
    # [0, 10) holds [1, 3) and [5, 8); [6, 12) reaches past it: kept
    from advisor.metrics.attribution import _outermost

    start, end = _outermost(np.array([0, 1, 5, 6]), np.array([10, 3, 8, 12]))
    assert (start.tolist(), end.tolist()) == ([0, 6], [10, 12])
    # none inside another (a thread's API calls): the arrays themselves, no copy
    s, e = np.array([0, 4, 9]), np.array([3, 9, 11])
    start, end = _outermost(s, e)
    assert start is s and end is e


def test_outermost_in_blocks_is_the_definition():
    # a segment is kept where it ends after every earlier one (sorted by start); the latest
    # end carried from block to block (blocks of 1, 2, 3 and all): brute force on each case
    from advisor.metrics.attribution import _outermost

    rng = np.random.default_rng(3)
    for _ in range(100):
        n = int(rng.integers(2, 30))
        start = np.sort(rng.integers(0, 50, n))
        end = start + rng.integers(0, 20, n)
        want = [i for i in range(n) if i == 0 or end[i] > end[:i].max()]
        for block in (1, 2, 3, 64):
            s, e = _outermost(start, end, block)
            assert (s.tolist(), e.tolist()) == (start[want].tolist(), end[want].tolist())


def test_row_segments_are_the_gathered_segments():
    # a thread's calls held as rows of the API table's times (other threads' calls between
    # them, the table not in start order): searchsorted, span and outermost give what the
    # gathered times give (marks every 1, 2, 3 and 1024 segments); brute force per case
    from advisor.metrics.attribution import _outermost, _RowSegments

    rng = np.random.default_rng(5)
    for _ in range(150):
        n = int(rng.integers(0, 40))
        start = rng.integers(0, 60, n).astype(np.int64)
        end = start + rng.integers(1, 15, n)
        mine = np.flatnonzero(rng.random(n) < 0.8)
        rows = mine[np.argsort(start[mine], kind="stable")].astype(np.int32)
        s, e = _outermost(start[rows], end[rows])  # (the gathered times' answer)
        for every in (1, 2, 3, 1024):
            _RowSegments.MARK_EVERY = every
            try:
                held = _RowSegments.outermost(start, end, rows, block=int(rng.integers(1, 5)))
                assert (start[held.rows].tolist(), end[held.rows].tolist()) == (
                    s.tolist(),
                    e.tolist(),
                )
                for t in range(-1, 62, 3):
                    assert held.searchsorted(t) == int(np.searchsorted(s, t, side="left"))
                lo = int(rng.integers(0, 60))
                hi = lo + int(rng.integers(0, 20))
                first = max(int(np.searchsorted(s, lo, side="left")) - 1, 0)
                last = int(np.searchsorted(s, hi, side="left"))
                got = held.span(lo, hi)
                assert (got[0].tolist(), got[1].tolist()) == (
                    s[first:last].tolist(),
                    e[first:last].tolist(),
                )
            finally:
                _RowSegments.MARK_EVERY = 1024
    # none inside another: the rows themselves, no copy of them or of the times
    start, end = np.array([5, 0, 9, 4]), np.array([8, 3, 11, 5])
    rows = np.array([1, 3, 0, 2])
    held = _RowSegments.outermost(start, end, rows)
    assert held.rows is rows and held.start is start and held.end is end


def test_every_row_is_the_whole_table_in_order():
    from advisor.metrics.attribution import _every_row

    assert _every_row(np.arange(4), 4) and _every_row(np.zeros(0, np.int64), 0)
    assert not _every_row(np.array([0, 2, 1, 3]), 4)  # (all rows, not in order)
    assert not _every_row(np.array([1, 2, 3]), 4) and not _every_row(np.arange(3), 4)


@pytest.mark.parametrize("loads", [True, False], ids=["code loaded", "taken mid-run"])
def test_the_time_before_a_kernels_first_launch_is_startup_when_its_code_loads(loads):
    # Four 20 ms steps (range "step" [iP - 1000, iP + 15 ms)). In each: gemm at [iP, iP +
    # 1000) launched [iP - 600, iP - 500]; tk launched [iP + 5,001,000, iP + 5,001,100],
    # running from iP + 5,001,200: its gap [iP + 1000, iP + 5,001,200) has host-late
    # [iP + 1000, iP + 5,001,100) = 5,000,100 ns with nothing named in it, and 100 ns of
    # launch latency. In step 0 (tk's first launch) a cuModuleLoadData [4,800,000,
    # 4,950,000] (150,000 ns) loads tk's code (a JIT compile ends so): the whole 5,000,100
    # is start-up. Without the load (a trace taken mid-run, the code loaded long before)
    # it is what the later steps' is: host work (5 ms with no call on the thread, over
    # host_silent_max_ns, in a trace that records no operators: not the launching code of
    # the range holding tk's launch; before: launch work).
    p = 20_000_000
    ks, calls, ranges = [], [], []
    for i in range(4):
        base = i * p
        ks.append(dict(start=base, end=base + 1000, correlation=10 * i + 1, name="gemm"))
        ks.append(dict(start=base + 5_001_200, end=base + 5_002_000, correlation=10 * i + 2,
                       name="tk"))  # fmt: skip
        calls += [("cudaLaunchKernel", base - 600, base - 500, 10 * i + 1),
                  ("cudaLaunchKernel", base + 5_001_000, base + 5_001_100, 10 * i + 2)]  # fmt: skip
        ranges.append(("step", base - 1000, base + 15_000_000))
    if loads:
        calls.append(("cuModuleLoadData", 4_800_000, 4_950_000, 999))
    t = Trace(path="<hand-built>", format="test", producer_version="test", kernels=kernels(ks))
    t.api = api_table(calls)
    t.nvtx = nvtx(ranges)
    ops, pieces = attribute_gaps(device_ops(t), t)
    got = _by_op(ops, pieces)
    first = {"startup": 5_000_100} if loads else {"host_busy": 5_000_100}
    assert got[5_001_200] == {**first, "launch_latency": 100}
    for i in (1, 2, 3):
        assert got[i * p + 5_001_200] == {"host_busy": 5_000_100, "launch_latency": 100}


def test_a_thinned_host_side_attributes_nothing():
    # the same trace, its host events marked as a sample thinned after capture (the reader's
    # finding, trace.host_sample): every gap is unattributed (843650 ns, as above), and the
    # launch calls still place the ops
    t = hand_trace()
    t.host_sample = (2402, 238287, 0.62)
    ops, pieces = attribute_gaps(device_ops(t), t)
    b = gap_breakdown(pieces).set_index("cause")["total_ns"].to_dict()
    assert b == {"unattributed": 843650}
    assert ops["api_tid"].notna().sum() == 10  # (every op with a launch call: all but k8)
    assert (ops["overhead_ns"] == 0).all() and (ops["launch_op"].astype(str) == "").all()


@pytest.mark.parametrize(("spill", "threads"), [(False, 1), (True, 1), (True, 2)],
                         ids=["held", "spilled", "spilled-beside"])  # fmt: skip
@pytest.mark.parametrize("block", [1, 2, 3, 5])
def test_gaps_worked_in_blocks_give_the_same_attribution(block, spill, threads, attributed,
                                                         monkeypatch):  # fmt: skip
    # the gaps are attributed a block at a time (attribution.BLOCK_GAPS, 262144 gaps): any
    # block size, even one gap, must give the pieces and per-op columns of the whole (the
    # hand-worked totals above: 843650 ns; k7's event wait names its stream predecessor's
    # launch, in another block when block < 7), whether each block's pieces are held or
    # written to files (on another thread while the next block is made, with 2 threads)
    # and read back at the end (spill_gaps: from 4M gaps on)
    import functools

    from advisor.metrics import attribution, gaps

    spill_gaps = 0 if spill else attribution.SPILL_GAPS
    blocks = functools.partial(attribution.attribute, block=block * threads,
                               spill_gaps=spill_gaps)  # fmt: skip
    monkeypatch.setattr(gaps, "attribute", blocks)
    t = hand_trace()
    ops, pieces = attribute_gaps(device_ops(t), t, threads=threads)
    whole_ops, whole_pieces = attributed
    pd.testing.assert_frame_equal(pieces, whole_pieces)
    for col in ("cause", "detail", "overhead_ns", "sync_call", "launch_op", "sync_held"):
        pd.testing.assert_series_equal(ops[col], whole_ops[col])
    assert gap_breakdown(pieces)["total_ns"].sum() == 843650


@pytest.mark.parametrize(
    "path", [H200_SINGLE, PUBLIC / "kineto" / "hta_nccl_data.json.gz"], ids=lambda p: p.name
)
def test_spilled_pieces_come_back_as_held_ones(path, monkeypatch):
    # a large trace's pieces go to temporary files block by block (on another thread with
    # two) and come back when the attribution is done: the same pieces and per-op columns
    # as held ones, on real traces
    import functools

    from advisor.metrics import attribution, gaps

    trace = load_trace(path)
    held_ops, held = attribute_gaps(device_ops(trace), trace)
    spilled = functools.partial(attribution.attribute, block=97, spill_gaps=0)
    monkeypatch.setattr(gaps, "attribute", spilled)
    for threads in (1, 2):
        ops, pieces = attribute_gaps(device_ops(trace), trace, threads=threads)
        assert len(pieces) > 500
        pd.testing.assert_frame_equal(pieces, held)
        pd.testing.assert_frame_equal(ops, held_ops)


@pytest.mark.parametrize(
    "path", [H200_SINGLE, PUBLIC / "kineto" / "hta_nccl_data.json.gz"], ids=lambda p: p.name
)
def test_the_range_index_answers_the_same_pruned_or_whole(path, monkeypatch):
    # the innermost-range index holds only the ranges open at a time it is asked for where
    # the ranges outnumber those times (a Kineto trace's CPU ops), all of them elsewhere:
    # the attribution is the same either way, on real traces with ranges of both kinds
    from advisor.metrics import attribution

    trace = load_trace(path)
    results = []
    for over in (0, 10**9):  # (always pruned; never)
        monkeypatch.setattr(attribution, "PRUNE_RANGES_OVER", over)
        ops, pieces = attribute_gaps(device_ops(trace), trace, threads=2)
        assert (ops["detail"].astype(str) != "").sum() > 50  # (range names were asked for)
        results.append((ops, pieces))
    (ops, pieces), (whole_ops, whole_pieces) = results
    pd.testing.assert_frame_equal(pieces, whole_pieces)
    pd.testing.assert_frame_equal(ops, whole_ops)


def test_the_range_index_is_pruned_only_where_ranges_outnumber_the_times_asked():
    # 4,000 ranges against 1,000 late windows + 1,500 launch calls: pruned; 2,500 ranges
    # against the same 2,500 times: held whole (PRUNE_RANGES_OVER = 1)
    from advisor.metrics.attribution import PRUNE_RANGES_OVER, _prunes

    assert PRUNE_RANGES_OVER == 1
    assert _prunes(4_000, 1_000 + 1_500)
    assert not _prunes(2_500, 2_500)
    assert not _prunes(0, 0)


def test_pieces_are_held_where_no_temporary_file_can_be_made(attributed, monkeypatch):
    # a temporary folder that takes no file (read-only, full): the pieces are held as for
    # a small trace, the attribution the same
    import functools
    import tempfile

    from advisor.metrics import attribution, gaps

    made = []

    def refuse():
        made.append(1)
        if len(made) == 3:  # (the third of the columns' files)
            raise OSError(30, "Read-only file system")
        return tempfile.SpooledTemporaryFile()

    monkeypatch.setattr(attribution.tempfile, "TemporaryFile", refuse)
    spilled = functools.partial(attribution.attribute, block=2, spill_gaps=0)
    monkeypatch.setattr(gaps, "attribute", spilled)
    t = hand_trace()
    ops, pieces = attribute_gaps(device_ops(t), t)
    assert len(made) == 3
    pd.testing.assert_frame_equal(pieces, attributed[1])


def test_a_range_holds_a_query_time_by_hand():
    from advisor.metrics.attribution import _holds_one

    times = np.array([10, 20, 30])  # sorted
    start = np.array([0, 10, 11, 21, 31, 25])
    end = np.array([10, 11, 20, 30, 40, 31])
    # [0,10) ends at 10 (open end); [10,11) holds 10; [11,20) ends at 20; [21,30) holds
    # neither 20 nor 30; [31,40) starts after 30; [25,31) holds 30
    assert _holds_one(start, end, times).tolist() == [False, True, False, False, False, True]


def test_the_host_range_index_holds_only_ranges_open_at_a_declared_time():
    # thread A (pid 1, tid 10): step [0,100) > aten::mm [10,20) > op [12,15), and
    # aten::empty [30,40) inside step; thread B (pid 1, tid 11): bwd [0,100) > aten::add
    # [50,60), and aten::copy_ [10,14). Declared times: A at 13 and 95, B at 55.
    # Indexed: A: step (13, 95), aten::mm (13), op (13), not aten::empty (neither);
    # B: bwd, aten::add (55), not aten::copy_ (13 is A's time, not B's). The innermost
    # range at each declared time is the one of the whole table: op, step; aten::add.
    from advisor.metrics.attribution import _HostActivity, _thread_keys

    rows = [("step", 0, 100, 10), ("aten::mm", 10, 20, 10), ("op", 12, 15, 10),
            ("aten::empty", 30, 40, 10), ("bwd", 0, 100, 11), ("aten::add", 50, 60, 11),
            ("aten::copy_", 10, 14, 11)]  # fmt: skip
    ranges = pd.DataFrame([{"text": t, "start": s, "end": e, "pid": 1, "tid": tid}
                           for t, s, e, tid in rows])  # fmt: skip
    ranges["text"] = ranges["text"].astype("category")
    t = hand_trace()
    ops = device_ops(t)
    no_api = np.full(len(ops), -1)
    a, b = _thread_keys(np.array([1, 1]), np.array([10, 11]))

    def host():
        return _HostActivity(t.api.iloc[:0], ranges, ops, no_api, np.zeros(len(ops), bool))

    whole, declared = host(), host()
    declared.expect(np.array([a, a, b]), np.array([13, 95, 55]))
    indexed = {k: sorted(ranges["text"].astype(str)[v]) for k, v in declared._index_rows().items()}
    assert indexed == {a: ["aten::mm", "op", "step"], b: ["aten::add", "bwd"]}
    for key, times, expect in ((a, [13, 95], ["op", "step"]), (b, [55], ["aten::add"])):
        for h in (whole, declared):
            codes = h.range_at(key, np.array(times))
            assert np.array(h.labels.words, dtype=object)[codes].tolist() == expect


def test_thread_keys_pack_small_ids_and_mix_large_ones():
    from advisor.metrics.attribution import _thread_keys

    keys = _thread_keys(np.array([1.0, np.nan, 2.0**40, 1.0, 1.0]),
                        np.array([2.0, 3.0, 5.0, 2.0**30, 2.0]))  # fmt: skip
    assert keys[0] == 2**26 + 2 == keys[4]  # (pid 1, tid 2) packed exactly, equal pairs equal
    assert keys[1] == -1  # an unknown id
    assert 2**52 <= keys[2] < 2**53 and 2**52 <= keys[3] < 2**53  # mixed, apart from packed
    assert keys[2] != keys[3]
    # the same pair as integers gives the same key
    assert _thread_keys(np.array([1]), np.array([2]))[0] == keys[0]


def test_piece_columns_grow_past_their_estimate_and_keep_every_block():
    # block 1: 2 gaps, 2 pieces (1 per gap: capacity int(1.5 * 1 * 4) + 1 = 7 of the 4
    # gaps' estimate); block 2: 2 gaps, 6 pieces: 8 > 7, so the columns grow and keep
    # block 1's rows. The table is the two blocks' pieces in cause order (causes 0, 1, 2:
    # rows 0 3 6, 1 4 7, 2 5: each cause's in the order written), in the given dtypes.
    from advisor.metrics.attribution import _PieceColumns

    def write(columns, first, k, gaps):
        v = np.arange(first, first + k)
        rows = columns.claim(k, gaps)
        assert all(len(r) == k for r in rows.values())
        rows["device"][:], rows["start"][:], rows["end"][:] = v, v * 10, v * 10 + 5
        rows["cause"][:], rows["row"][:], rows["text"][:] = v % 3, v, v % 2

    dtypes = {"device": np.int16, "start": np.int64, "end": np.int64, "cause": np.int8,
              "row": np.int32, "text": np.int32}  # fmt: skip
    columns = _PieceColumns(4, dtypes)
    write(columns, 0, 2, 2)
    assert len(columns._columns["start"]) == 7
    write(columns, 2, 6, 2)
    assert len(columns._columns["start"]) > 8
    table = columns.table({"": 0, "x": 1})
    assert list(table.columns) == ["device", "start", "end", "cause", "row", "detail"]
    order = [0, 3, 6, 1, 4, 7, 2, 5]
    assert table["start"].tolist() == [10 * i for i in order]
    assert table["end"].tolist() == [10 * i + 5 for i in order]
    assert table["device"].dtype == np.int16 and table["device"].tolist() == order
    assert table["row"].dtype == np.int32 and table["row"].tolist() == order
    assert table["detail"].astype(str).tolist() == ["", "x"] * 4
    assert table["cause"].dtype == np.int8
    assert table["cause"].tolist() == [0, 0, 0, 1, 1, 1, 2, 2]


@pytest.mark.parametrize("threads", [1, 2])
def test_spilled_blocks_in_any_order_come_back_as_held_ones(threads):
    # blocks of 2, 6 and 3 rows whose causes are not in order within a block (i % 3): the
    # spilled table (each block put in cause order as it is written, read back per (block,
    # cause) run) equals the held one: causes 0, 1, 2, each's rows in block order
    from advisor.metrics.attribution import _PieceColumns

    dtypes = {"device": np.int16, "start": np.int64, "end": np.int64, "cause": np.int8,
              "row": np.int32, "text": np.int32}  # fmt: skip
    tables = []
    for spill in (False, True):
        columns, first = _PieceColumns(11, dtypes, spill=spill, threads=threads), 0
        for k in (2, 6, 3):
            v = np.arange(first, first + k)
            rows = columns.claim(k, k)
            rows["device"][:], rows["start"][:], rows["end"][:] = v, v * 10, v * 10 + 5
            rows["cause"][:], rows["row"][:], rows["text"][:] = v % 3, v, v % 2
            first += k
        tables.append(columns.table({"": 0, "x": 1}))
    held, spilled = tables
    assert held["row"].tolist() == [0, 3, 6, 9, 1, 4, 7, 10, 2, 5, 8]
    pd.testing.assert_frame_equal(spilled, held)


@settings(max_examples=200, deadline=None)
@given(
    st.lists(st.tuples(st.integers(0, 300), st.integers(1, 40)), max_size=30),
    st.lists(st.tuples(st.integers(0, 300), st.integers(1, 40)), max_size=30),
    st.lists(st.tuples(st.integers(0, 320), st.integers(1, 80)), min_size=1, max_size=12),
)
def test_longest_uncovered_around_a_stretch_equals_every_segment(ranges, calls, windows):
    # the host-late windows of a block are answered from the segments of their own stretch
    # of time (_Uncovered.around: each set from its last segment starting before the first
    # window on); brute force: the longest run of uncovered nanoseconds in each window
    from advisor.metrics.attribution import _outermost, _Uncovered

    def outer(pairs):
        pairs = sorted(pairs)
        return _outermost(np.array([s for s, _ in pairs], dtype=np.int64),
                          np.array([s + d for s, d in pairs], dtype=np.int64))  # fmt: skip

    sets = (outer(ranges), outer(calls))
    lo = np.sort(np.array([s for s, _ in windows], dtype=np.int64))  # (a run of rising starts)
    hi = lo + np.array([d for _, d in windows], dtype=np.int64)
    got = _Uncovered.around(sets, int(lo[0]), int(hi.max())).longest(lo, hi)
    covered = np.zeros(400, dtype=bool)
    for s, d in [*ranges, *calls]:
        covered[s : s + d] = True
    for i, (a, b) in enumerate(zip(lo, hi, strict=True)):
        best = run = 0
        for t in range(a, b):
            run = 0 if covered[t] else run + 1
            best = max(best, run)
        assert got[i] == best


@pytest.mark.parametrize(
    "path",
    [
        "sample_traces/h200_train_steps.sqlite",  # (NVTX steps, syncs, copies)
        "sample_traces/why/why_dataloader.sqlite",  # (input-pipeline ranges)
        "tests/data/public/kineto/hta_alexnet_cuda_sync.json.gz",  # (CPU ops, syncs)
        "tests/data/public/kineto/kineto_resnet50_dataloader_pytorch1.8.json.gz",
    ],
)
def test_blocks_found_on_threads_give_the_attribution_of_one(path, monkeypatch):
    # the host's activity in the next blocks is found on other threads (metrics/ahead.py)
    # while the last block is folded in: blocks of 13 gaps on 3 threads must give the
    # pieces and per-op columns of the whole trace worked on the caller's thread alone
    import functools
    from pathlib import Path

    from advisor.metrics import attribution, gaps
    from advisor.trace.load import load_trace

    trace = load_trace(Path(__file__).resolve().parents[2] / path)
    ops, pieces = attribute_gaps(device_ops(trace), trace, threads=1)
    assert len(pieces) > 3 * 13  # (several blocks of pieces, every block on some thread)
    threaded = functools.partial(attribution.attribute, block=13)
    monkeypatch.setattr(gaps, "attribute", threaded)
    ops3, pieces3 = attribute_gaps(device_ops(trace), trace, threads=3)
    pd.testing.assert_frame_equal(pieces3, pieces)
    for col in ("cause", "detail", "overhead_ns", "sync_call", "launch_op", "sync_held"):
        pd.testing.assert_series_equal(ops3[col], ops[col])


def test_the_launching_threads_indexes_are_built_before_the_blocks_ask():
    # attribute builds the host's activity beside the latency bounds, then its launching
    # threads' indexes beside the late windows (_HostActivity.index_threads): each thread
    # that launched an op gets its painted spans and its calls by kind, every device its
    # idle gaps, and the ranges by thread; a trace without blocking calls gets no idle
    # gaps (split asks for them only around a blocking call)
    from pathlib import Path

    from advisor.metrics import attribution
    from advisor.metrics.gaps import host_ranges, idle_gaps, launch_rows, pageable_copies
    from advisor.trace.load import load_trace

    trace = load_trace(
        Path(__file__).resolve().parents[2] / "sample_traces/h200_train_steps.sqlite"
    )
    ops = device_ops(trace)
    ops["gap_ns"] = idle_gaps(ops)
    rows = launch_rows(ops, trace.api)

    def host():
        return attribution._HostActivity(trace.api, host_ranges(trace), ops, rows,
                                         pageable_copies(ops, trace))  # fmt: skip

    built = host()
    launching = {int(k) for k in built.api_keys[rows[rows >= 0]]}
    assert len(launching) == 2 and not built._thread_painted and not built._built
    built.index_threads(rows)
    assert set(built._thread_painted) == launching
    assert {key for key, _ in built._thread_call_starts} == launching
    assert {code for _, code in built._thread_call_starts} == {
        attribution._SYNC, attribution._COPY, 0}  # fmt: skip
    assert set(built._built) == {"every_range", "device_idle"}
    assert set(built.device_idle._gaps) == set(ops["device"].unique())
    quiet = host()
    quiet.api_cat[:] = 0  # (as if no call blocked)
    quiet.index_threads(rows)
    assert set(quiet._thread_painted) == launching and set(quiet._built) == {"every_range"}


def test_a_value_per_device_by_hand():
    # devices 3 and 0 have values (given out of order), 1 and 5 none: the default; a
    # device past the last one known and an empty table too
    from advisor.metrics.attribution import _PerDevice

    per = _PerDevice({3: 100, 0: 7}, -1)
    assert per(np.array([0, 1, 3, 5, 0])).tolist() == [7, -1, 100, -1, 7]
    assert per(np.array([3], dtype=np.int32)).dtype == np.int64
    never = np.iinfo(np.int64).min
    assert _PerDevice({}, never)(np.array([2, 4])).tolist() == [never, never]


def test_labels_made_from_codes_are_the_texts_with_their_context():
    # a call and the range around it, as codes (-1: none), give the texts _with_context
    # gives: 'call (in range)', the call alone, the range alone, ''; a name that is itself
    # empty counts as none
    from advisor.metrics.attribution import _coded_context, _Texts, _with_context

    calls = _Texts(pd.Series(["cudaMalloc", "", "cudaFree"]), as_range_names=False)
    ranges = _Texts(pd.Series(["aten::empty", "step_3", ""]))
    rng = np.random.default_rng(5)
    call = rng.integers(-1, 3, 300)
    where = rng.integers(-1, 3, 300)
    got = _coded_context(calls.names, call, ranges.names, where, keep_context=True)
    expected = _with_context(calls.names[call], ranges.names[where], keep_context=True)
    assert got.tolist() == expected.tolist()
    assert set(got) == {"cudaMalloc (in aten::empty)", "cudaMalloc (in step)", "cudaMalloc",
                        "cudaFree (in aten::empty)", "cudaFree (in step)", "cudaFree",
                        "aten::empty", "step", ""}  # fmt: skip


def test_painting_apart_categories_keeps_each_as_it_is():
    # sync [0,10) and [20,30), load [10,15) (touching sync's first) and [40,50): apart, each
    # kept; with load [5,25) too they overlap: sync wins its own time, load keeps the rest
    # ([10,20) and [40,50)); random intervals either way: the same as painting every piece
    from advisor.metrics.attribution import _apart, _paint, _painted_over
    from advisor.metrics.intervals import union

    def arr(*v):
        return np.array(v, dtype=np.int64)

    apart = [(1, arr(0, 20), arr(10, 30)), (3, arr(10, 40), arr(15, 50))]
    got = _paint(apart)
    assert {c: (s.tolist(), e.tolist()) for c, (s, e) in got.items()} == {
        1: ([0, 20], [10, 30]), 3: ([10, 40], [15, 50])}  # fmt: skip
    over = [(1, arr(0, 20), arr(10, 30)), (3, arr(10, 40, 5), arr(15, 50, 25))]
    got = _paint(over)
    assert {c: (s.tolist(), e.tolist()) for c, (s, e) in got.items()} == {
        1: ([0, 20], [10, 30]), 3: ([10, 40], [20, 50])}  # fmt: skip
    rng = np.random.default_rng(9)
    seen = set()
    for _ in range(200):
        parts = []
        for code in (1, 2, 3, 4):
            n = int(rng.integers(0, 6))
            s = rng.integers(0, 200, n)
            parts.append((code, s, s + rng.integers(0, 30, n)))
        unions = {c: union(s, e) for c, s, e in parts if len(s)}
        unions = {c: u for c, u in unions.items() if len(u[0])}
        if not unions:
            continue
        seen.add(_apart(unions))
        got, expected = _paint(parts), _painted_over(unions)
        assert {c: (s.tolist(), e.tolist()) for c, (s, e) in got.items()} == {
            c: (s.tolist(), e.tolist()) for c, (s, e) in expected.items()}  # fmt: skip
    assert seen == {True, False}  # (both kinds of cases were drawn)


def test_rows_by_thread_one_thread_or_several():
    # one thread: its rows by start, ties in row order (rows 1 and 3 both start at 1); two
    # threads and an unknown one (-1, left out): each thread's rows the same way
    from advisor.metrics.attribution import _by_thread

    start = np.array([3, 1, 2, 1])
    one = _by_thread(np.array([5, 5, 5, 5]), start)
    assert list(one) == [5] and one[5].tolist() == [1, 3, 2, 0]
    assert one[5].dtype == np.int32  # (held through the attribution: half the int64 bytes)
    several = _by_thread(np.array([5, 7, 5, -1]), start)
    assert {k: v.tolist() for k, v in several.items()} == {5: [2, 0], 7: [1]}
    assert _by_thread(np.array([-1, -1]), np.array([1, 2])) == {}


@pytest.mark.parametrize("block", [1, 2, 1 << 20])
def test_steady_start_is_the_first_op_of_a_family_that_recurs_in_the_tail(block):
    from advisor.metrics.attribution import steady_starts

    # ranges: 0 "init" (once), 1-3 "step" (recurring), 4 "load" (once) on one process
    ranges = pd.DataFrame({"range_id": [0, 1, 2, 3, 4], "pid": 1,
                           "text": ["init", "step", "step", "step", "load"]})  # fmt: skip
    # device 0: 12 ops 10 ns apart; the last quarter (ops 9-11) lies in range 3 ("step"),
    # so the first op of a "step" range starts the steady state: op 3, at 30 ns.
    # device 1: 8 ops in "load" (a range that does not recur) and too few ops (< 4 x 8)
    # for the k-gram fallback: no start-up (absent)
    dev0 = pd.DataFrame({"device": 0, "start": np.arange(12) * 10,
                         "range_id": [0, 0, 0, 1, 1, 2, 2, 3, 3, 3, 3, 3]})  # fmt: skip
    dev1 = pd.DataFrame({"device": 1, "start": np.arange(8) * 10 + 5, "range_id": 4})
    ops = pd.concat([dev0, dev1], ignore_index=True)
    ops["name"] = "k"
    assert steady_starts(ops, ranges, block=block) == {0: 30}
    # the devices' ops interleaved (not one run each), each device's in start order: the same
    mixed = ops.sort_values("start", kind="stable", ignore_index=True)
    assert steady_starts(mixed, ranges, block=block) == {0: 30}
    # the tail in "load"-like ranges only (no recurring family there): no start from ranges;
    # too few ops for k-grams
    ops.loc[9:11, "range_id"] = 4
    assert steady_starts(ops, ranges, block=block) == {}


@settings(max_examples=300, deadline=None)
@given(
    st.lists(st.tuples(st.integers(0, 60), st.integers(0, 30)), max_size=40),
    st.lists(st.integers(-5, 100), min_size=1, max_size=40),
)
def test_innermost_range_is_the_definition_for_any_ranges(pairs, times):
    # _Innermost.find climbs parents from the last range to start; the definition it must
    # give, by brute force over ranges nested or not (equal starts, ranges that overlap
    # without nesting, empty ones dropped): at time t, d(t) = #starts <= t - #ends <= t
    # ranges are open; the answer is the last range (by start, the longer first on equal
    # starts) whose depth (the ranges before it still open when it starts) is d(t) - 1 and
    # that starts at or before t, where it is still open at t; else none
    from advisor.metrics.attribution import _Innermost, _Texts

    ranges = pd.DataFrame({"start": [s for s, _ in pairs], "end": [s + n for s, n in pairs]},
                          dtype=np.int64)  # fmt: skip
    index = _Innermost(ranges, np.arange(len(ranges)), _Texts(pd.Series(["r"] * len(ranges))))
    order = sorted((s, -(s + n), row) for row, (s, n) in enumerate(pairs) if n > 0)
    kept = [(s, -neg_end, row) for s, neg_end, row in order]
    depth = [sum(e > s for _, e, _ in kept[:k]) for k, (s, _, _) in enumerate(kept)]
    expected = []
    for t in times:
        level = sum(s <= t for s, _, _ in kept) - sum(e <= t for _, e, _ in kept) - 1
        at = [k for k, (s, _, _) in enumerate(kept) if depth[k] == level and s <= t]
        hit = at and kept[at[-1]][1] > t
        expected.append(kept[at[-1]][2] if hit else -1)
    pos = index.find(np.array(times, dtype=np.int64))
    got = np.full(len(times), -1, dtype=np.int64)
    got[pos >= 0] = index.rows(pos[pos >= 0])
    assert got.tolist() == expected


def test_label_codes_code_each_text_once_and_give_it_back():
    # '' is code 0; new texts take the next codes in the order first seen; names looked up
    # by position (-1: the names' last, '') code as their texts; words inverts; threads
    # coding at once leave one code per text (vocab and words each other's inverse)
    import threading

    from advisor.metrics.attribution import _LabelCodes

    labels = _LabelCodes()
    codes = labels.of_texts(np.array(["sync", "", "copy", "sync"], dtype=object))
    assert codes.tolist() == [1, 0, 2, 1] and codes.dtype == np.int32
    names = np.array(["copy", "load", ""], dtype=object)
    assert labels.of_names(names, np.array([1, -1, 0, 1])).tolist() == [3, 0, 2, 3]
    assert [labels.words[c] for c in (3, 0, 2, 1)] == ["load", "", "copy", "sync"]

    shared = _LabelCodes()
    texts = np.array([f"t{i}" for i in range(300)], dtype=object)

    wrong = []

    def code(seed: int) -> None:
        rng = np.random.default_rng(seed)
        for _ in range(50):
            picked = texts[rng.integers(0, 300, 40)]
            if [shared.words[c] for c in shared.of_texts(picked)] != picked.tolist():
                wrong.append(seed)

    workers = [threading.Thread(target=code, args=(s,)) for s in range(6)]
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    assert not wrong
    assert sorted(shared.vocab.values()) == list(range(len(shared.words)))
    assert all(shared.words[c] == t for t, c in shared.vocab.items())


def test_latency_bounds_by_hand():
    # device 0: ops launched into idle (the call ended after the gap began) wait 100, 300,
    # 500 ns after their call: the median 300; an op whose call ended before its gap began
    # (queued) and one without a call or a gap count for nothing; device 1 has one sample
    # (fewer than the 3 asked: no bound)
    from advisor.metrics.attribution import _latency_bounds

    ops = pd.DataFrame({"device": [0, 0, 0, 0, 0, 1], "start": [1000, 2000, 3000, 4000, 5000, 900],
                        "gap_ns": [400, 400, 900, 100, 0, 50]})  # fmt: skip
    api_row = np.array([0, 1, 2, 3, 4, 5])
    api_end = np.array([900, 1700, 2500, 3800, 4990, 880])  # (op 3: 3800 < 4000 - 100)
    t = {"latency_min_samples": 3, "latency_quantile": 0.5, "latency_min_ns": 0,
         "latency_max_ns": 10**9}  # fmt: skip
    assert _latency_bounds(ops, api_row, api_end, t) == {0: 300}
    assert _latency_bounds(ops, api_row, api_end, {**t, "latency_max_ns": 200}) == {0: 200}


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 2), st.integers(0, 50), st.integers(-1, 30),
                          st.integers(0, 60)), min_size=1, max_size=40),
       st.sampled_from([1, 3, 1 << 20]))  # fmt: skip
def test_latency_bounds_in_blocks_as_over_every_op(rows, block):
    from unittest import mock

    from advisor.metrics import attribution

    device = np.array(sorted(r[0] for r in rows))
    start = np.arange(len(rows)) * 100 + 1000
    gap = np.array([r[1] for r in rows])
    api_row = np.minimum([r[2] for r in rows], len(rows) - 1)  # (a call row, or -1: none)
    api_end = start.astype(np.int64) - np.array([r[3] for r in rows])
    ops = pd.DataFrame({"device": device, "start": start, "gap_ns": gap})
    t = {"latency_min_samples": 2, "latency_quantile": 0.9, "latency_min_ns": 5,
         "latency_max_ns": 45}  # fmt: skip
    want = {}  # (the definition, over every op at once)
    known = np.maximum(api_row, 0)
    ok = (api_row >= 0) & (gap > 0) & (api_end[known] > start - gap)
    wait = np.maximum(start - api_end[known], 0)
    for d in np.unique(device[ok]):
        w = wait[ok & (device == d)]
        if len(w) >= 2:
            want[int(d)] = int(np.clip(float(np.quantile(w, 0.9)), 5, 45))
    with mock.patch.object(attribution, "BLOCK_ROWS", block):
        assert attribution._latency_bounds(ops, api_row, api_end, t) == want


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 2), st.sampled_from(["kernel", "graph", "memcpy"]),
                          st.integers(0, 4)), min_size=1, max_size=40),
       st.sampled_from([1, 3, 1 << 20]), st.booleans())  # fmt: skip
def test_first_launches_in_blocks_are_each_keys_first_row(rows, block, by_identity):
    # each (device, name or identity) first launched at its first kernel or graph row: the
    # definition (pandas' duplicated over the launches in row order), any block size
    from unittest import mock

    from advisor.metrics import attribution

    rows = sorted(rows)  # (ops sorted by device)
    ops = pd.DataFrame({"device": np.array([r[0] for r in rows], dtype=np.int32),
                        "kind": pd.Categorical([r[1] for r in rows]),
                        "name": pd.Categorical([f"k{r[2]}" for r in rows])})  # fmt: skip
    identity = np.array([r[2] % 3 for r in rows], dtype=np.int32) if by_identity else None
    launched = ops["kind"].isin(["kernel", "graph"]).to_numpy()
    code = identity if by_identity else ops["name"].astype(str).to_numpy()
    seen, want = set(), []
    for i in np.flatnonzero(launched):
        if (ops["device"].iat[i], code[i]) not in seen:
            seen.add((ops["device"].iat[i], code[i]))
            want.append(int(i))
    with mock.patch.object(attribution, "BLOCK_ROWS", block):
        got = attribution.first_launches(ops, identity)
    assert got.tolist() == want
