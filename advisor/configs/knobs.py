"""The GEMM knob planner on advisor's side: templates/planner.py (the search and its cost
model, documented there and in docs/configs.md), calibrated with gpus.yaml's sections and
given the facts of advisor's GpuSpec.

The planner imports nothing of advisor: every emitted GEMM script inlines it whole, followed
by the facts advisor planned with (configs/emit.py). The facts are built here only:
``planner_facts`` (a GPU's) and the planner's ``calibration()`` (gpus.yaml's sections, set
below). The planner's names are this module's (``knobs.split_k(knobs.Problem(m, n, k,
gpu))``); ``Problem`` and ``tile_ctas_per_sm`` take a GpuSpec here.
"""

from __future__ import annotations

from dataclasses import fields

from advisor.configs.templates import planner
from advisor.configs.templates.planner import (  # noqa: F401  (the planner's names are knobs')
    CALIBRATION,
    CANDIDATES,
    CHOOSERS,
    KERNELS,
    MAX_SPLITS,
    MIN_ITERS_PER_SPLIT,
    PAD_ALIGN,
    SK_POLICIES,
    NoTileFits,
    PlannerFacts,
    _base,
    _pad_ns,
    _sk_partials,
    calibration,
    data_parallel,
    gluon_knob,
    persistent,
    sk_data_parallel_tiles,
    split_k,
    split_k_ns,
    stream_k,
    stream_k_ns,
    stream_k_tile_ns,
    tma_warp_specialized,
)
from advisor.data import gpu_facts
from advisor.trace.model import GpuSpec

planner.calibrate(
    gemm_tiles=gpu_facts("gemm_tiles"),
    cost_model_fallback=gpu_facts("cost_model_fallback"),
    gluon_launch=gpu_facts("gluon_launch"),
)


def planner_facts(gpu: GpuSpec) -> PlannerFacts:
    """The facts of ``gpu`` the planner reads: GpuSpec's fields of PlannerFacts' names."""
    return PlannerFacts(**{f.name: getattr(gpu, f.name) for f in fields(PlannerFacts)})


def Problem(m: int, n: int, k: int, gpu: GpuSpec) -> planner.Problem:
    """The planner's GEMM to tune (its Problem), on ``gpu``'s facts (planner_facts)."""
    return planner.Problem(m, n, k, planner_facts(gpu))


def tile_ctas_per_sm(bm: int, bn: int, bk: int, warps: int, stages: int, gpu: GpuSpec) -> int:
    """Resident CTAs of a candidate on ``gpu`` (planner.tile_ctas_per_sm on its facts)."""
    return planner.tile_ctas_per_sm(bm, bn, bk, warps, stages, planner_facts(gpu))
