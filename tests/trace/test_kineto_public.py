"""Public Kineto traces from Meta's Holistic Trace Analysis test data (tests/data/public/
kineto, MIT): an AMD (ROCm) trace checked by hand, and agreement with HTA's own numbers
(recorded from HTA 0.5.0 by benchmarks/hta_crosscheck.py) on the same GPU work."""

import importlib.util

import pytest
from conftest import PUBLIC, ROOT, analysis_of

from advisor.multi import load_one, merge_traces

KINETO = PUBLIC / "kineto"
spec = importlib.util.spec_from_file_location(
    "hta_crosscheck", ROOT / "benchmarks" / "hta_crosscheck.py"
)
hta_crosscheck = importlib.util.module_from_spec(spec)
spec.loader.exec_module(hta_crosscheck)

# the 14 kernel durations of the MI250 trace (us, as written in its "dur" fields)
MI250_KERNELS_US = [6.88, 17.6, 6.72, 8.32, 11.04, 3.36, 2.24, 5.28, 5.6, 12.64, 13.6, 4.96,
                    4.16, 8.481]  # fmt: skip


def test_amd_rocm_kineto_trace():
    a = analysis_of(KINETO / "hta_amd_mi250_minitoy_rocm6.2.json.gz")
    t = a.trace
    g = t.gpus[2]  # HIP device 2 of a node whose deviceProperties list every GCD
    assert (g.vendor, g.sm_count, g.warp_size, g.max_warps_per_sm) == ("amd", 104, 64, 32)
    # ROCm writes sharedMemPerBlock / maxSharedMemoryPerMultiProcessor (64 KiB of LDS)
    assert (g.shared_mem_per_sm, g.max_shared_mem_per_block) == (65536, 65536)
    assert g.reserved_shared_mem_per_block == 0
    k = t.kernels
    assert len(k) == 14 and int((k["end"] - k["start"]).sum()) == round(
        sum(MI250_KERNELS_US) * 1000
    )  # fmt: skip
    # hipLaunchKernel / hipExtModuleLaunchKernel join every kernel by correlation
    assert a.coverage["no_launch_call"] == 0 and a.coverage["kernels"] == 14
    s = a.summary()
    assert s["compute_ns"] == 110_881 and s["gpu_busy_ns"] == 110_881 + 22_441 + 15_720
    # no grid/block in ROCm Kineto kernels: said so, not called damage
    assert any("no launch configuration in the trace" in w for w in a.warnings)
    assert not any("impossible launch configurations" in w for w in a.warnings)


# HTA 0.5.0's temporal breakdown and comm/comp overlap (us, %) of the two sampled ranks
HTA = {
    "hta_sampled_rank-0.json.gz": (600_058, 321_378, 106_252, 11.81),
    "hta_sampled_rank-1.json.gz": (600_674, 328_671, 135_548, 20.05),
}


@pytest.mark.parametrize("name", sorted(HTA))
def test_agrees_with_hta_on_the_same_steps(name, tmp_path):
    # HTA leaves the last ProfilerStep out; advisor reads a copy without it. These traces
    # have whole-microsecond times, so HTA's truncation to microseconds changes nothing:
    # the window, idle, compute time and overlap are equal
    span, idle, compute, overlap = HTA[name]
    trimmed = hta_crosscheck.without_last_step(KINETO / name, tmp_path)
    s = analysis_of(trimmed).summary()
    assert (s["window_ns"], s["idle_ns"], s["compute_ns"]) == (
        span * 1000, idle * 1000, compute * 1000)  # fmt: skip
    assert round(100 * s["overlap_ratio"], 2) == overlap


def test_where_hta_differs():
    # fractional timestamps: HTA truncates each event to whole microseconds; advisor keeps
    # ns (the MI250 kernels: HTA 96 us of compute, the durations sum to 110.881 us)
    a = analysis_of(KINETO / "hta_amd_mi250_minitoy_rocm6.2.json.gz")
    assert a.summary()["compute_ns"] - 96_000 == 14_881
    # torch.compile's launcher op carries a 'stream' argument: HTA counts that 95.8 us CPU
    # op as GPU work (span 94 us); advisor counts the 1.76 us kernel
    s = analysis_of(KINETO / "hta_triton_example.json.gz").summary()
    assert s["window_ns"] == s["gpu_busy_ns"] == 1760
    # host waits Kineto draws on GPU rows (cuda_sync 'Stream Sync') extend HTA's span past
    # the last GPU op: 12,996,011 us vs the last kernel's end
    s = analysis_of(KINETO / "hta_alexnet_cuda_sync.json.gz").summary()
    assert s["window_ns"] == 12_920_244_000 and 12_996_011_000 - s["window_ns"] == 75_767_000


def test_two_ranks_as_one_job():
    loads = [load_one(str(KINETO / f"hta_sampled_rank-{r}.json.gz"), None) for r in (0, 1)]
    assert [x.trace.rank for x in loads] == [0, 1]  # distributedInfo
    trace = merge_traces(loads)
    assert sorted(trace.kernels["device"].unique()) == [0, 1]  # both device 0: renumbered
    assert len(trace.kernels) == 1154 + 1104
