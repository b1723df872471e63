"""tp-exposed-comm on hand-built tensor-parallel steps (numbers by hand) and its absence on
real exports whose collectives have their own streams."""

from builders import two_device_steps
from conftest import PUBLIC_NSYS, SAMPLES, analysis_of

from advisor.analysis import analyze
from advisor.findings import find

ALLREDUCE = "ncclDevKernel_AllReduce_Sum_bf16_RING_LL"


def tp_step(layers: int = 8, gemm_us: int = 100, comm_us: int = 30) -> list[tuple]:
    """Both devices: per layer a GEMM, then an all-reduce of its output, one stream."""
    rows, t = [], 0
    for _ in range(layers):
        for d in (0, 1):
            rows += [(d, "nvjet_tst_128x256_64x4_1x2_h_bz_coopA_NNT", t, t + gemm_us),
                     (d, ALLREDUCE, t + gemm_us, t + gemm_us + comm_us)]  # fmt: skip
        t += gemm_us + comm_us
    return rows


def test_tensor_parallel_layers_get_async_tp_advice():
    # 2 steps x 8 layers: 8 all-reduces of 30 us per step and device on the compute stream,
    # none beside compute: comm 480 us per device, exposed 480 us, no wait (both ranks
    # arrive together), compute 1600 us: 480 us could hide behind the GEMMs
    a = analyze(two_device_steps([tp_step(), tp_step()]))
    found = find(a)
    tp = [f for f in found if f.rule == "tp-exposed-comm"]
    assert sorted(f.device for f in tp) == [0, 1]
    f = tp[0]
    assert (f.region, f.strategy, f.est_savings_ns) == ("train_step", "tp_overlap",
                                                                 480_000)  # fmt: skip
    assert f.evidence["collectives_per_instance"] == 8
    assert f.evidence["same_stream_comm_ns"] == 480_000
    # the generic exposed-comm finding of the same time is superseded
    assert not [x for x in found if x.rule == "exposed-comm"]


def test_few_collectives_stay_generic():
    # one all-reduce per step (a data-parallel gradient sync): not the TP pattern
    a = analyze(two_device_steps([tp_step(layers=1, comm_us=300)] * 2))
    rules = {f.rule for f in find(a)}
    assert "tp-exposed-comm" not in rules and "exposed-comm" in rules


def test_not_on_real_exports_with_comm_streams():
    for trace in (SAMPLES / "h200x2_allreduce.sqlite",
                  PUBLIC_NSYS / "nsysai_h100_2gpu_window_nsys2026.2.sqlite"):  # fmt: skip
        assert "tp-exposed-comm" not in {f.rule for f in find(analysis_of(trace))}
