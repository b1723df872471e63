"""The gate on real repeated H200 captures (sample_traces/gate/, docs/gate.md): three sets
of unchanged runs (each with a cold first run) and planted regressions; no false alarm
between unchanged runs, every planted regression caught and named, with one and with three
traces per side.

Sets: ``nsys1`` (gate_runs.tar.xz: Nsight, Triton GEMM, NVTX ``step``; base x4),
``nsys2`` (gate_runs2.tar.xz: the same, interleaved and pinned; base x6) and ``kineto``
(gate_runs3.tar.xz, held out while the method was built: torch.profiler JSON, cuBLAS GEMMs,
``ProfilerStep#N``; base x6). Plants (the workloads' docstrings): ``slow_gemm`` +6.25 % /
+6.7 % GEMM work in one kernel; ``sync`` a blocking ``.item()`` per step; ``launch`` (kineto)
+8 launches per step (40 -> 48 small ops: ~ +20 % launch overhead). The host-time plants
(nsys ``launch``, kineto ``spin``: 1-2 us more host time per launch) are below this
machine's process-to-process host noise (docs/gate.md) and are not asserted.
"""

from __future__ import annotations

import itertools
import tarfile
from functools import cache
from pathlib import Path

import pytest
from conftest import SAMPLES

from advisor import pipeline
from advisor.gating import MetricSet, compare, load_config, metric_set

SETS = {"nsys1": "gate_runs.tar.xz", "nsys2": "gate_runs2.tar.xz", "kineto": "gate_runs3.tar.xz"}
CFG = load_config()


@pytest.fixture(scope="module")
def runs(tmp_path_factory) -> dict[str, dict[str, MetricSet]]:
    """Per set: run name (``base2``, ``sync1``, ...) -> metric set."""
    out = {}
    for name, tarball in SETS.items():
        folder = tmp_path_factory.mktemp(name)
        with tarfile.open(SAMPLES / "gate" / tarball) as tar:
            tar.extractall(folder, filter="data")
        traces = sorted(folder.glob("*.sqlite")) + sorted(folder.glob("*.pt.trace.json.gz"))
        out[name] = {_run_name(p): _digest(str(p)) for p in traces}
    return out


def _run_name(p: Path) -> str:
    return p.name.split(".")[0].removeprefix("gate3_").removeprefix("gate_")


@cache
def _digest(path: str) -> MetricSet:
    return metric_set(*pipeline.run(path))


def _bases(sets: dict) -> list[str]:
    return sorted(k for k in sets if k.startswith("base"))


def _failing(result) -> list:
    return [r for r in result.rows if r.status in ("regression", "new finding")]


def test_every_set_has_a_cold_first_run_that_is_left_out(runs):
    for name, sets in runs.items():
        cold = sets["base1_cold"].startup.cold_instances
        assert cold, name  # the first step of the cold process holds its start-up work
        steps = next(iter(sets["base1_cold"].regions.values()))
        assert steps.instances == 30 and steps.cold == 1, name


def test_no_false_alarm_between_unchanged_runs(runs):
    for name, sets in runs.items():
        bases = _bases(sets)
        for b, c in itertools.permutations(bases, 2):  # one trace per side, cold ones too
            result = compare([sets[b]], [sets[c]], CFG)
            assert not result.failed, (name, b, c, [(r.key, r.metric) for r in _failing(result)])
        if len(bases) >= 6:  # three traces per side, every split of the six
            for side in itertools.combinations(bases, 3):
                other = [x for x in bases if x not in side]
                result = compare([sets[x] for x in side], [sets[x] for x in other], CFG)
                assert not result.failed, (
                    name,
                    side,
                    [(r.key, r.metric) for r in _failing(result)],
                )


PLANTS = {  # variant -> the (scope, metric) rows that must fail, and the cause's words
    "slow_gemm": ({("kernel", "median_ns")}, "median GPU time per launch"),
    # the planted .item() ends host-bound steps: the GPU has run dry by then, so the read
    # waits only for the last few kernels and holds a few us of idle per step (issue 28: the
    # relaunch after it is launch work); its count is what the range rows catch
    "sync": ({("range", "sync_gaps")}, "blocking synchronizations"),
    "launch": ({("range", "launches")}, "GPU operations launched per"),
}


def _check_caught(result, variant, label):
    rows, words = PLANTS[variant]
    failing = _failing(result)
    got = {(r.scope, r.metric) for r in failing}
    assert result.failed and rows <= got, (label, got)
    assert any(words in r.cause for r in failing), (label, [r.cause for r in failing])
    if variant == "slow_gemm":  # the GEMM is named (in the nsys sets, the randn kernel
        # that fills the 6.25 % larger input may be named too: it really grew)
        keys = [r.key for r in failing if r.scope == "kernel"]
        assert any(k.startswith(("tiled_gemm_kernel", "nvjet")) for k in keys), keys
        assert all(k.startswith(("tiled_gemm_kernel", "nvjet", "distribution_elementwise"))
                   for k in keys), keys  # fmt: skip
    if variant == "sync":  # and the finding that explains it is linked
        linked = [r for r in failing if r.metric == "sync_gaps"]
        assert any("sync-stall-steps" in x for r in linked for x in r.explained_by), label


def test_every_planted_regression_is_caught_and_named(runs):
    for name, sets in runs.items():
        bases = _bases(sets)
        for variant in PLANTS:
            if variant == "launch" and name != "kineto":
                continue  # the nsys sets' launch plant is host time per launch (module doc)
            plants = sorted(k for k in sets if k.startswith(variant))
            assert len(plants) == 3, (name, variant)
            for b in bases:  # one trace per side
                for c in plants:
                    _check_caught(compare([sets[b]], [sets[c]], CFG), variant, (name, b, c))
            for side in itertools.combinations(bases, 3):  # three traces per side
                result = compare([sets[x] for x in side], [sets[x] for x in plants], CFG)
                _check_caught(result, variant, (name, side))
