"""advisor gate: hand-built comparisons, the public before/after pair, a slowed candidate."""

import copy
import json
import shutil
import sqlite3
import subprocess
import sys

import pytest
from conftest import H200_SINGLE, PUBLIC_NSYS, analysis_of

from advisor import baselines
from advisor.errors import AdvisorInputError
from advisor.findings import find
from advisor.gate import compare, load_config, metric_set

CFG = load_config()


def mset(overall=None, regions=None, kernels=None, findings=(), gpus=("H200",)):
    base = {m: 1_000_000.0 for m in ("span_ns", "gpu_busy_ns", "tail_idle_ns",
                                      "underfill_idle_ns", "launch_overhead_ns",
                                      "sync_idle_ns", "exposed_comm_ns")}  # fmt: skip
    base["overlap_ratio"] = 0.5
    return {
        "trace": "t",
        "gpus": list(gpus),
        "overall": {**base, **(overall or {})},
        "regions": regions or {},
        "kernels": kernels or {},
        "findings": list(findings),
    }


def status(result, scope, key, metric):
    return next(r.status for r in result.rows if (r.scope, r.key, r.metric) == (scope, key, metric))


def test_thresholds_by_hand():
    # span: +4 % of 1 ms is under rel 5 % -> unchanged; +6 % (60 us) is under abs 100 us;
    # +200 us exceeds max(5 % = 50 us, abs 100 us, noise 2 %) -> regression
    for delta, expected in (
        (40_000, "unchanged"),
        (60_000, "unchanged"),
        (200_000, "regression"),
        (-200_000, "improvement"),
    ):
        r = compare([mset()], [mset({"span_ns": 1_000_000 + delta})], CFG)
        assert status(r, "overall", "all", "span_ns") == expected, delta
    # overlap ratio: lower is worse; abs 0.05
    r = compare([mset()], [mset({"overlap_ratio": 0.4})], CFG)
    assert status(r, "overall", "all", "overlap_ratio") == "regression"
    assert r.failed


def test_small_kernel_absolute_floor():
    k = {"tiny grid=1x1x1 block=128": {"median_ns": 2000.0, "launches": 10}}
    slower = {"tiny grid=1x1x1 block=128": {"median_ns": 3000.0, "launches": 10}}
    r = compare([mset(kernels=k)], [mset(kernels=slower)], CFG)
    assert status(r, "kernel", "tiny grid=1x1x1 block=128", "median_ns") == "unchanged"
    much = {"tiny grid=1x1x1 block=128": {"median_ns": 5000.0, "launches": 10}}
    r = compare([mset(kernels=k)], [mset(kernels=much)], CFG)
    assert status(r, "kernel", "tiny grid=1x1x1 block=128", "median_ns") == "regression"


def test_several_traces_use_a_significance_test():
    base = [mset({"span_ns": v}) for v in (1.00e6, 1.01e6, 0.99e6)]
    worse = [mset({"span_ns": v}) for v in (1.30e6, 1.31e6, 1.29e6)]
    noisy = [mset({"span_ns": v}) for v in (0.95e6, 1.40e6, 1.20e6)]  # median +20 %, overlapping
    r = compare(base, worse, CFG)
    assert status(r, "overall", "all", "span_ns") == "regression"  # p = 0.05 with 3 vs 3
    assert "Mann-Whitney" in r.method
    r = compare(base, noisy, CFG)
    assert status(r, "overall", "all", "span_ns") == "not significant"


def test_one_sided_entries_and_new_findings():
    f = {
        "rule": "wave-tail-gemm",
        "strategy": "stream_k",
        "severity": "high",
        "kernel": "g",
        "region": "r",
        "device": 0,
        "est_savings_ns": 5,
    }
    r = compare([mset(regions={"a": mset()["overall"]})],
                [mset(regions={"a": mset()["overall"], "b": mset()["overall"]},
                      findings=[f])], CFG)  # fmt: skip
    assert status(r, "range", "b", "-") == "only in candidate"
    assert any(x.status == "new finding" for x in r.rows) and r.failed


def test_incompatible_traces():
    with pytest.raises(AdvisorInputError, match="incompatible traces: baseline GPUs"):
        compare([mset()], [mset(gpus=("MI300X",))], CFG)
    with pytest.raises(AdvisorInputError, match="no NVTX range in common"):
        compare([mset(regions={"a": {}})], [mset(regions={"b": {}})], CFG)


def test_config_errors(tmp_path):
    p = tmp_path / "gate.yaml"
    p.write_text("metrics:\n  span_ns: {rel: -1, abs: 0}\n")
    with pytest.raises(AdvisorInputError, match="gate config field 'metrics.span_ns.rel'"):
        load_config(p)
    p.write_text("metrics:\n  bogus_ns: {rel: 0.1, abs: 0}\n")
    with pytest.raises(AdvisorInputError, match="unknown metric 'bogus_ns'"):
        load_config(p)
    p.write_text("noise_floor: [unclosed\n")
    with pytest.raises(AdvisorInputError, match="not valid YAML"):
        load_config(p)
    assert load_config(None).noise_floor == 0.02


def sample_set(path=H200_SINGLE, gpu=None):
    a = analysis_of(path, gpu)
    return metric_set(a, find(a))


def test_same_trace_passes_and_slowed_copy_fails():
    s = sample_set()
    assert not compare([s], [copy.deepcopy(s)], CFG).failed
    slowed = copy.deepcopy(s)
    slowed["regions"]["tail_gemm"]["gpu_busy_ns"] *= 1.3
    slowed["regions"]["tail_gemm"]["span_ns"] *= 1.3
    r = compare([s], [slowed], CFG)
    assert r.failed and status(r, "range", "tail_gemm", "gpu_busy_ns") == "regression"


def run(*args, env=None):
    return subprocess.run(
        [sys.executable, "-m", "advisor", *args],
        capture_output=True,
        text=True,
        timeout=300,
        env=env,
    )


def test_cli_slowed_trace_fails_and_self_passes(tmp_path):
    slow = tmp_path / "slow.sqlite"
    shutil.copyfile(H200_SINGLE, slow)
    with sqlite3.connect(slow) as db:  # every tiled GEMM launch 40 % longer
        db.execute("""UPDATE CUPTI_ACTIVITY_KIND_KERNEL SET end = start + (end - start) * 1.4
                      WHERE shortName IN (SELECT id FROM StringIds
                                          WHERE value = 'tiled_gemm_kernel')""")
    proc = run("gate", "--baseline", str(H200_SINGLE), "--candidate", str(slow), "--format", "json")
    assert proc.returncode == 1, proc.stderr
    d = json.loads(proc.stdout)
    assert d["verdict"] == "fail"
    keys = {(r["scope"], r["key"], r["metric"]) for r in d["rows"] if r["status"] == "regression"}
    assert ("kernel", "tiled_gemm_kernel grid=7x19x1 block=256", "median_ns") in keys
    assert ("range", "tail_gemm", "tail_idle_ns") in keys  # 40 % longer launches, 40 % more
    same = run("gate", "--baseline", str(H200_SINGLE), "--candidate", str(H200_SINGLE))
    assert same.returncode == 0 and "PASS" in same.stdout


def test_data_quality_warnings_of_each_side_are_shown(tmp_path):
    damaged = tmp_path / "damaged.sqlite"
    shutil.copyfile(H200_SINGLE, damaged)
    with sqlite3.connect(damaged) as db:  # launch calls of some kernels lost
        db.execute("DELETE FROM CUPTI_ACTIVITY_KIND_RUNTIME WHERE correlationId % 7 = 0")
    args = ("gate", "--baseline", str(H200_SINGLE), "--candidate", str(damaged))
    d = json.loads(run(*args, "--format", "json").stdout)
    lost = [n for n in d["notes"] if n.startswith(f"candidate {damaged}:")]
    assert any("kernel launches have no launch call" in n for n in lost), d["notes"]
    assert not any("no launch call" in n for n in d["notes"] if n.startswith("baseline"))
    for fmt in ("table", "markdown"):
        out = run(*args, "--format", fmt).stdout
        assert "have no launch call" in " ".join(out.split()), fmt
    # a metric set saved before warnings were recorded has none, and compares as before
    old = {k: v for k, v in mset().items() if k != "warnings"}
    assert compare([old], [mset()], CFG).notes == []


def test_cli_public_before_after_and_annotations():
    before = PUBLIC_NSYS / "nsysai_2gpu_sendrecv_before_nsys2026.2.sqlite"
    after = PUBLIC_NSYS / "nsysai_2gpu_sendrecv_after_nsys2026.2.sqlite"
    env = {**__import__("os").environ, "GITHUB_ACTIONS": "true"}
    proc = run(
        "gate",
        "--baseline",
        str(before),
        "--candidate",
        str(after),
        "--gpu",
        "H100-SXM",
        "--format",
        "markdown",
        env=env,
    )
    assert proc.returncode == 1
    assert proc.stdout.startswith("### advisor gate: FAIL")
    assert "| regression | range | AllToAll4D | exposed_comm_ns |" in proc.stdout
    # the workflow commands go to stderr: the markdown (a PR comment) holds none
    assert "::error::" not in proc.stdout and "::warning::" not in proc.stdout
    assert "::error::advisor gate regression: range AllToAll4D exposed_comm_ns" in proc.stderr
    # a row present on one side only says so, instead of "- -> -"
    only = [line for line in proc.stderr.splitlines() if "only in" in line]
    assert only and all(" is only in " in line and "->" not in line for line in only)
    same = run(
        "gate", "--baseline", str(before), "--candidate", str(before), "--gpu", "H100-SXM", env=env
    )
    assert same.returncode == 0 and "::error::" not in same.stdout + same.stderr
    # PASS: the verdict line, no empty table
    assert same.stdout.startswith("PASS: no regression (")
    assert "Changes" not in same.stdout and "┏" not in same.stdout


def test_rows_ordered_by_impact():
    # three kernel regressions of +60 us, +3 ms and +2 ms (each past its 5 % / 2 us limit)
    kern = {"nccl": 1_000_000.0, "gemm_a": 10_000_000.0, "gemm_b": 20_000_000.0}
    worse = {"nccl": 1_060_000.0, "gemm_a": 13_000_000.0, "gemm_b": 22_000_000.0}
    base = mset(kernels={k: {"median_ns": v} for k, v in kern.items()})
    cand = mset(kernels={k: {"median_ns": v} for k, v in worse.items()})
    from advisor.render.gate import shown

    order = [r.key for r in shown(compare([base], [cand], CFG))]
    assert order == ["gemm_a", "gemm_b", "nccl"]


def test_several_values_after_one_flag():
    spread = run("gate", "--baseline", str(H200_SINGLE), str(H200_SINGLE),
                 "--candidate", str(H200_SINGLE), str(H200_SINGLE), "--format", "json")  # fmt: skip
    assert spread.returncode == 0, spread.stderr
    assert json.loads(spread.stdout)["method"].startswith("medians of 2 vs 2 traces")


def test_threshold_with_one_bound(tmp_path):
    cfg = tmp_path / "gate.yaml"
    cfg.write_text("metrics:\n  span_ns: {rel: 0.5}\n  sync_idle_ns: {abs: 10}\n")
    loaded = load_config(cfg)
    assert (loaded.metrics["span_ns"].rel, loaded.metrics["span_ns"].abs) == (0.5, 0.0)
    assert (loaded.metrics["sync_idle_ns"].rel, loaded.metrics["sync_idle_ns"].abs) == (0.0, 10)
    cfg.write_text("metrics:\n  span_ns: {}\n")
    with pytest.raises(AdvisorInputError, match="give rel, abs or both"):
        load_config(cfg)


def test_named_baselines(tmp_path):
    store = tmp_path / "b.db"
    proc = run("baseline", "save", "main", str(H200_SINGLE), "--store", str(store))
    assert proc.returncode == 0 and "saved baseline 'main': 1 trace(s)" in proc.stdout
    listing = run("baseline", "list", "--store", str(store)).stdout
    assert "main" in listing and " 1 " in listing
    assert (
        run(
            "gate",
            "--baseline-name",
            "main",
            "--store",
            str(store),
            "--candidate",
            str(H200_SINGLE),
        ).returncode
        == 0
    )
    err = run(
        "gate", "--baseline-name", "nope", "--store", str(store), "--candidate", str(H200_SINGLE)
    )
    assert err.returncode == 2 and "no baseline named 'nope' (known: main)" in err.stderr
    assert baselines.load("main", store)[0]["overall"]["gpu_busy_ns"] > 0


def test_cli_usage_errors(tmp_path):
    proc = run("gate", "--candidate", str(H200_SINGLE))
    assert proc.returncode == 2 and "--baseline TRACE... or --baseline-name" in proc.stderr
    bad = tmp_path / "g.yaml"
    bad.write_text("alpha: 2\n")
    proc = run(
        "gate",
        "--baseline",
        str(H200_SINGLE),
        "--candidate",
        str(H200_SINGLE),
        "--config",
        str(bad),
    )
    assert proc.returncode == 2 and "gate config field 'alpha'" in proc.stderr
