"""Communication kernels that are not NCCL's (issue 28, class 8): DeepEP's expert-parallel
dispatch/combine, symmetric-memory and inference servers' own all-reduce kernels, MoE
all-to-all. Names as the public traces write them: DeepEP's from deepseek-ai/profile-data's
H800 training step (checked by hand, not copied: no license), the multimem all-reduce from
TraceLens' B200 vLLM trace (tests/data/public/kineto), vLLM's custom all-reduce and
symmetric-memory one-/two-shot kernels from those projects' sources."""

import pytest
from builders import trace

from advisor.analysis import analyze
from advisor.findings import find
from advisor.metrics.comm import classify_ops

US = 1000
DISPATCH = "void dpsk::ep::internode::dispatch<false, 8, 4, 20, 32>(int4*, float*, long*)"
NOTIFY = "void dpsk::ep::internode::notify_dispatch<8>(int const*, int*, int, int*)"
COMBINE = "void dpsk::ep::internode::combine<__nv_bfloat16, 8, 4, 20>(int4*, float*, int4*)"
GEMM = "sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64_warpgroupsize1x1x1"

COMM_NAMES = [
    DISPATCH,
    NOTIFY,
    COMBINE,
    "void deep_ep::intranode::cached_notify_combine<8>(void**, int*, int, int)",
    "void vllm::cross_device_reduce_1stage<__nv_bfloat16, 8>(vllm::RankData*, ...)",
    "void c10d::symmetric_memory::multimem_all_reduce_kernel<c10::BFloat16, 4, 16>(...)",
    "void c10d::symmetric_memory::two_shot_all_reduce_kernel<float, 8, 4>(...)",
    "void moe_dispatch_kernel<__nv_bfloat16>(...)",
    "ncclDevKernel_AllGather_RING_LL(ncclDevKernelArgsStorage<4096ul>)",
]
COMPUTE_NAMES = [
    GEMM,
    "void at::native::reduce_kernel<512, 1, at::native::ReduceOp<float, ...>>(...)",
    "void at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<float>, ...>",
    "void at::native::(anonymous namespace)::indexSelectLargeIndex<float, long, unsigned int>",
]


def test_named_communication_kernels_are_comm_and_others_are_not():
    rows = [dict(start=i * 10 * US, end=i * 10 * US + US, name=n)
            for i, n in enumerate(COMM_NAMES + COMPUTE_NAMES)]  # fmt: skip
    a = analyze(trace(rows, gpu="H800"))
    got = dict(zip(a.ops["name"].astype(str), classify_ops(a.ops).astype(str), strict=True))
    assert [got[n] for n in COMM_NAMES] == ["comm"] * len(COMM_NAMES)
    assert [got[n] for n in COMPUTE_NAMES] == ["compute"] * len(COMPUTE_NAMES)


@pytest.fixture(scope="module")
def moe_step():
    # One MoE layer on an H800 (132 SMs), in us:
    #   stream 7:  GEMM [0, 300)
    #   stream 20: dispatch [200, 500) (20 CTAs: far under one wave, 300 us long),
    #              notify_dispatch [500, 520), combine [600, 900) (20 CTAs)
    # comm = 300 + 20 + 300 = 620 us; compute = 300 us; comm beside compute: [200, 300) =
    # 100 us; exposed comm = 620 - 100 = 520 us; busy [0, 520) + [600, 900) = 820 us.
    rows = [
        dict(stream=7, start=0, end=300 * US, name=GEMM, grid_x=264),
        dict(stream=20, start=200 * US, end=500 * US, name=DISPATCH, grid_x=20),
        dict(stream=20, start=500 * US, end=520 * US, name=NOTIFY, grid_x=1),
        dict(stream=20, start=600 * US, end=900 * US, name=COMBINE, grid_x=20),
    ]
    return analyze(trace(rows, gpu="H800"))


def test_deepep_time_is_communication(moe_step):
    d = moe_step.devices.set_index("device").loc[0]
    assert d["comm_ns"] == 620 * US
    assert d["compute_ns"] == 300 * US
    assert d["overlap_ns"] == 100 * US
    assert d["exposed_comm_ns"] == 520 * US


def test_no_kernel_advice_on_communication_kernels(moe_step):
    # the dispatch/combine grids (20 CTAs, 300 us each) would pass the under-filled-grid
    # tests of a compute kernel; as communication they get no Split-K / tail / occupancy
    # advice
    named = {f.kernel for f in find(moe_step) if f.kernel}
    assert not any("dpsk::" in k for k in named), named
