"""advisor.gating.compare and config on hand-built metric sets (expected numbers by hand)."""

import numpy as np
import pytest
from gate_sets import finding, mset

from advisor.errors import AdvisorInputError
from advisor.gating import compare, load_config
from advisor.render.gate import shown

CFG = load_config()
STEP = np.arange(100_000.0, 129_000.0, 1000.0)  # 29 steps: 100..128 us, median 114 us


def row(result, scope, key, metric):
    return next(r for r in result.rows if (r.scope, r.key, r.metric) == (scope, key, metric))


def test_kernel_regression_is_named_and_tested_per_launch():
    gemm = 54_500 + 10.0 * np.arange(29)  # 29 launches, 54.50-54.78 us: median 54.64 us
    base = mset(kernels={"gemm grid=16x16x1 block=256": gemm})
    cand = mset(kernels={"gemm grid=16x16x1 block=256": gemm * 1.066})  # +6.6 %
    r = row(compare([base], [cand], CFG), "kernel", "gemm grid=16x16x1 block=256", "median_ns")
    # tolerance max(3 % of 54.64 us, 500 ns) = 1639.2 ns; the change 3.61 us
    assert r.status == "regression" and r.tolerance == pytest.approx(1639.2)
    assert r.test_kind == "instances" and r.samples == (29, 29) and r.ci[0] > 1.03
    assert r.cause == "median GPU time per launch: 54.64 us -> 58.25 us (+6.6%)"
    # the same shift on a spread of +-12 % is not significant
    wide = mset(kernels={"gemm grid=16x16x1 block=256": STEP * 1.066})
    r = row(compare([mset(kernels={"gemm grid=16x16x1 block=256": STEP})], [wide], CFG),
            "kernel", "gemm grid=16x16x1 block=256", "median_ns")  # fmt: skip
    assert r.status == "not significant"


def test_small_kernel_absolute_floor():
    tiny = np.full(30, 2000.0)
    base = mset(kernels={"tiny": tiny})
    # +400 ns (+20 %) is under the 500 ns floor; +1 us is past it
    assert row(compare([base], [mset(kernels={"tiny": tiny + 400})], CFG), "kernel", "tiny",
               "median_ns").status == "unchanged"  # fmt: skip
    assert row(compare([base], [mset(kernels={"tiny": tiny + 1000})], CFG), "kernel", "tiny",
               "median_ns").status == "regression"  # fmt: skip


def test_span_tolerance_from_its_parts():
    # a step of 500 us: 100 us busy (rel 3 %) and 400 us host-side idle (rel 1.2):
    # tolerance 0.03 * 100 + 1.2 * 400 = 483 us
    base = mset(
        regions={"step": {"span_ns": np.full(20, 500e3), "gpu_busy_ns": np.full(20, 100e3)}}
    )
    cand = mset(
        regions={"step": {"span_ns": np.full(20, 950e3), "gpu_busy_ns": np.full(20, 100e3)}}
    )
    r = row(compare([base], [cand], CFG), "range", "step", "span_ns")
    assert r.tolerance == pytest.approx(483e3) and r.status == "unchanged"
    worse = mset(
        regions={"step": {"span_ns": np.full(20, 1000e3), "gpu_busy_ns": np.full(20, 100e3)}}
    )
    assert row(compare([base], [worse], CFG), "range", "step", "span_ns").status == "regression"


def test_added_sync_is_named_by_count_and_linked_to_its_finding():
    steady = {"sync_gaps": np.zeros(29), "sync_idle_ns": np.zeros(29), "launches": np.full(29, 42)}
    stalled = {"sync_gaps": np.ones(29), "sync_idle_ns": np.full(29, 76e3),
               "launches": np.full(29, 43)}  # fmt: skip
    r = compare([mset(regions={"step": steady})],
                [mset(regions={"step": stalled}, findings=[finding()])], CFG)  # fmt: skip
    gaps = row(r, "range", "step", "sync_gaps")
    assert gaps.status == "regression" and gaps.test_kind == "count"
    assert gaps.cause == "blocking synchronizations per step instance: 0 -> 1 (+1)"
    assert gaps.explained_by == ["sync-stall-steps: sync stall steps"]
    idle = row(r, "range", "step", "sync_idle_ns")
    assert idle.status == "regression" and idle.ci_kind == "difference"
    launches = row(r, "range", "step", "launches")  # not in the finding's explains list
    assert launches.status == "regression" and launches.explained_by == []
    assert r.failed


def test_a_finding_both_sides_have_explains_nothing_unless_it_grew():
    steady = {"launches": np.full(29, 42)}
    more = {"launches": np.full(29, 50)}
    fb = finding("host-bound-steps", savings=1_000_000, explains=("launches",))
    same = compare([mset(regions={"step": steady}, findings=[fb])],
                   [mset(regions={"step": more}, findings=[fb])], CFG)  # fmt: skip
    assert row(same, "range", "step", "launches").explained_by == []
    grown = finding("host-bound-steps", savings=1_200_000, explains=("launches",))  # +20 %
    r = compare([mset(regions={"step": steady}, findings=[fb])],
                [mset(regions={"step": more}, findings=[grown])], CFG)  # fmt: skip
    assert row(r, "range", "step", "launches").explained_by == [
        "host-bound-steps: host bound steps"
    ]


def test_one_sided_entries_and_new_findings():
    steps = {"span_ns": STEP}
    r = compare([mset(regions={"a": steps})],
                [mset(regions={"a": steps, "b": steps}, findings=[finding()])], CFG)  # fmt: skip
    assert row(r, "range", "b", "-").status == "only in candidate"
    assert any(x.status == "new finding" for x in r.rows) and r.failed


def test_incompatible_and_old_sets():
    with pytest.raises(AdvisorInputError, match="incompatible traces: baseline GPUs"):
        compare([mset()], [mset(gpus=("MI300X",))], CFG)
    with pytest.raises(AdvisorInputError, match="no NVTX range in common"):
        compare([mset(regions={"a": {"span_ns": [1]}})], [mset(regions={"b": {"span_ns": [1]}})],
                CFG)  # fmt: skip
    old = {k: v for k, v in mset().items() if k != "version"}  # saved by advisor < 0.3
    with pytest.raises(AdvisorInputError, match="save the baseline again"):
        compare([old], [mset()], CFG)


def test_rows_ordered_by_impact():
    base = mset(kernels={"nccl": np.full(9, 1e6), "gemm_a": np.full(9, 10e6),
                         "gemm_b": np.full(9, 20e6)})  # fmt: skip
    cand = mset(kernels={"nccl": np.full(9, 1.06e6), "gemm_a": np.full(9, 13e6),
                         "gemm_b": np.full(9, 22e6)})  # fmt: skip
    # +60 us, +3 ms, +2 ms, each past its 3 % tolerance
    assert [r.key for r in shown(compare([base], [cand], CFG))] == ["gemm_a", "gemm_b", "nccl"]


def test_config_errors(tmp_path):
    p = tmp_path / "gate.yaml"
    for text, says in (
        ("metrics:\n  span_ns: {rel: -1, abs: 0}\n", "gate config field 'metrics.span_ns"),
        ("metrics:\n  bogus_ns: {rel: 0.1, abs: 0}\n", "unknown metric 'bogus_ns'"),
        ("metrics:\n  median_ns: {rel: parts}\n", "rel 'parts' is for span_ns only"),
        ("metrics:\n  span_ns: {}\n", "give rel, abs or both"),
        ("noise_floor: [unclosed\n", "not valid YAML"),
    ):
        p.write_text(text)
        with pytest.raises(AdvisorInputError, match=says):
            load_config(p)
    p.write_text("metrics:\n  span_ns: {rel: 0.5}\n  sync_idle_ns: {abs: 10}\n")
    cfg = load_config(p)
    assert (cfg.metrics["span_ns"].rel, cfg.metrics["span_ns"].abs) == (0.5, 0.0)
    assert (cfg.metrics["sync_idle_ns"].rel, cfg.metrics["sync_idle_ns"].abs) == (0.0, 10)
    assert cfg.metrics["median_ns"].rel == 0.03  # the rest stays default


def test_a_kernels_findings_are_found_by_its_name_not_by_parsing_its_key():
    # a kernel whose own name holds " grid=": its regression is explained by its finding
    name = "fused grid=stride kernel"
    key = f"{name} grid=8x1x1 block=256"
    fast, slow = np.full(40, 100_000.0), np.full(40, 150_000.0)
    f = finding("wave-tail-kernel", region=None, kernel=name, explains=("median_ns",))
    r = compare([mset(kernels={key: fast}, names={key: name})],
                [mset(kernels={key: slow}, names={key: name}, findings=[f])], CFG)  # fmt: skip
    assert row(r, "kernel", key, "median_ns").explained_by == ["wave-tail-kernel: wave tail kernel"]
