import numpy as np
import pandas as pd
import pytest
from builders import trace

from advisor.analysis import analyze
from advisor.metrics.comm import startup_waits


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
