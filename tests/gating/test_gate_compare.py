"""advisor.gating.compare and config on hand-built metric sets (expected numbers by hand)."""

import re

import numpy as np
import pytest
from gate_sets import as_version, finding, kkey, mset

from advisor.errors import AdvisorInputError
from advisor.gating import GateStatus, compare, load_config
from advisor.gating.metricset import KernelKey, MetricSet, load
from advisor.render.gate import as_json, shown

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
    tiny, key = np.full(30, 2000.0), "tiny grid=1x1x1 block=256"
    base = mset(kernels={"tiny": tiny})
    # +400 ns (+20 %) is under the 500 ns floor; +1 us is past it
    assert row(compare([base], [mset(kernels={"tiny": tiny + 400})], CFG), "kernel", key,
               "median_ns").status == "unchanged"  # fmt: skip
    assert row(compare([base], [mset(kernels={"tiny": tiny + 1000})], CFG), "kernel", key,
               "median_ns").status == GateStatus.REGRESSION  # fmt: skip


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
    # what moved most is named with its unit: launch overhead 300 -> 800 us (+500 us), the
    # busy time 100 -> 90 us (-10 us)
    parts = {"span_ns": np.full(20, 500e3), "gpu_busy_ns": np.full(20, 100e3),
             "launch_overhead_ns": np.full(20, 300e3)}  # fmt: skip
    later = {"span_ns": np.full(20, 990e3), "gpu_busy_ns": np.full(20, 90e3),
             "launch_overhead_ns": np.full(20, 800e3)}  # fmt: skip
    r = row(compare([mset(regions={"step": parts})], [mset(regions={"step": later})], CFG),
            "range", "step", "span_ns")  # fmt: skip
    assert r.cause.endswith(
        "(+98.0%); mostly launch overhead (GPU idle between host launches) (+500.00 us)"
    ), r.cause


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
    newer = {**mset(), "version": 99}
    with pytest.raises(AdvisorInputError, match=r"by a newer advisor \(version 99, this one"):
        compare([newer], [mset()], CFG)


def test_rows_ordered_by_impact():
    base = mset(kernels={"nccl": np.full(9, 1e6), "gemm_a": np.full(9, 10e6),
                         "gemm_b": np.full(9, 20e6)})  # fmt: skip
    cand = mset(kernels={"nccl": np.full(9, 1.06e6), "gemm_a": np.full(9, 13e6),
                         "gemm_b": np.full(9, 22e6)})  # fmt: skip
    # +60 us, +3 ms, +2 ms, each past its 3 % tolerance
    rows = shown(compare([base], [cand], CFG))
    assert [r.kernel.name for r in rows] == ["gemm_a", "gemm_b", "nccl"]
    assert [r.key for r in rows] == [kkey(n).text for n in ("gemm_a", "gemm_b", "nccl")]


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


GRID_NAME = "fused grid=stride kernel"  # a kernel whose own name holds " grid="
GRID_KEY = f"{GRID_NAME} grid=8x1x1 block=256"


def _grid_name_sets():
    fast, slow = np.full(40, 100_000.0), np.full(40, 150_000.0)
    f = finding("wave-tail-kernel", region=None, kernel=GRID_NAME, explains=("median_ns",))
    base = mset(kernels={GRID_KEY: fast, "gemm grid=4x4x1 block=128": fast},
                names={GRID_KEY: GRID_NAME}, findings=[finding()])  # fmt: skip
    cand = mset(kernels={GRID_KEY: slow, "gemm grid=4x4x1 block=128": fast},
                names={GRID_KEY: GRID_NAME}, findings=[finding(), f])  # fmt: skip
    return base, cand


def test_sets_stored_by_versions_2_and_3_are_read_as_they_were_written():
    # the same sets as advisor stored them before kernel keys were data: the same rows, the
    # same JSON, and the key taken apart after the name (version 3 names the kernel; version
    # 2 did not: its grid and block follow the text's last " grid=")
    base, cand = _grid_name_sets()
    now = as_json(compare([base], [cand], CFG))
    for version in (2, 3):
        old = [as_version(base, version)], [as_version(cand, version)]
        assert as_json(compare(*old, CFG)) == now, version
        (loaded,) = [load(s) for s in old[0]]
        assert loaded.version == 4 and loaded == load(base)
        key = next(k.key for k in loaded.kernels if k.key.name == GRID_NAME)
        assert key == KernelKey(GRID_NAME, (8, 1, 1), 256) and key.text == GRID_KEY
    r = row(compare([as_version(base, 2)], [as_version(cand, 3)], CFG), "kernel", GRID_KEY,
            "median_ns")  # fmt: skip
    assert r.kernel.name == GRID_NAME and r.explained_by == ["wave-tail-kernel: wave tail kernel"]


def test_kernel_dimensions_keep_how_the_trace_wrote_them():
    # a JSON trace's float dimensions (256.0) and a missing one (NaN) read back as written
    key = KernelKey("k", (8.0, 1.0, float("nan")), 256.0)
    assert key.text == "k grid=8.0x1.0xnan block=256.0"
    entry = {"key": {"name": key.name, "grid": list(key.grid), "block": key.block},
             "launches": 1, "median_ns": 1.0, "samples": [1.0]}  # fmt: skip
    (read,) = load(as_version({**mset(), "kernels": [entry]}, 3)).kernels
    assert read.key.text == key.text and isinstance(read.key.grid[0], float)


@pytest.mark.parametrize(
    ("damage", "says"),
    [
        (lambda d: d["kernels"][0].update(launches="many"),
         "damaged baseline metric set: kernels[0].launches is text where a number belongs"),
        (lambda d: d["kernels"][0].pop("samples"), "damaged baseline metric set:"),
        (lambda d: d["findings"].append({**finding(), "severity": "dire"}),
         "damaged baseline metric set: "),
        (lambda d: d.update(regions=[]), "damaged baseline metric set: regions is a list"),
    ],
)  # fmt: skip
def test_a_damaged_stored_set_is_refused_naming_its_trace(damage, says):
    doc = mset(kernels={"k": [1.0]}, trace="runs/base.sqlite")
    damage(doc)
    with pytest.raises(AdvisorInputError, match=re.escape(says)) as exc:
        compare([doc], [mset(kernels={"k": [1.0]})], CFG)
    assert exc.value.path == "runs/base.sqlite"


@pytest.mark.parametrize("version", [2, 3])
def test_an_old_key_that_is_not_a_kernel_key_is_refused(version):
    doc = as_version(mset(kernels={"k": [1.0]}), version)
    doc["kernels"] = {"k grid=1x1 block=2": next(iter(doc["kernels"].values()))}
    with pytest.raises(AdvisorInputError, match="is not 'NAME grid=XxYxZ block=N'"):
        compare([doc], [mset(kernels={"k": [1.0]})], CFG)


def test_a_set_as_made_and_as_stored_compare_alike():
    base, cand = _grid_name_sets()
    typed = [load(base)], [load(cand)]
    assert isinstance(typed[0][0], MetricSet) and typed[0][0].to_dict() == base
    assert as_json(compare(*typed, CFG)) == as_json(compare([base], [cand], CFG))
