"""Runnable torch.distributed references for the multi-GPU strategies (``--emit``).

A ``comm_overlap``, ``tp_overlap`` or ``pipeline_schedule`` finding gets, beside its markdown
note, a standalone script: the traced schedule and the advised one at the sizes the trace
gives (the rest labelled defaults), ``--check`` (both compared on the CPU with gloo in 2
processes it starts itself) and ``--bench`` (NCCL on >= 2 GPUs: exposed communication or the
bubble before and after). Templates: templates/comm_overlap.py, tp_overlap.py,
pipeline_schedule.py, then script_cli.py and dist_harness.py (shared); docs/configs.md.
"""

from __future__ import annotations

import math
import pprint
import textwrap
from importlib import resources
from typing import Any

from advisor.rules.finding import Finding
from advisor.trace.model import GpuSpec
from advisor.units import fmt_ns

TEMPLATE_PACKAGE = "advisor.configs.templates"
TEMPLATES = {
    "comm_overlap": "comm_overlap.py",
    "tp_overlap": "tp_overlap.py",
    "pipeline_schedule": "pipeline_schedule.py",
}
TITLES = {
    "comm_overlap": "Data-parallel gradient all-reduce, serialized vs overlapped (as DDP does)",
    "tp_overlap": "Tensor-parallel layers, collectives serialized vs chunked under the GEMMs "
    "(async TP)",
    "pipeline_schedule": "Pipeline schedules GPipe, 1F1B and interleaved 1F1B at the traced "
    "stages and micro-batches",
}
# sizes the traces do not hold: what the scripts use unless --set changes them
DEFAULTS = {
    # DDP's default bucket_cap_mb is 25 MB: 4096 x 3200 bf16 = 25 MiB
    "comm_overlap": {"ROWS": 4096, "COLS": 3200, "TOKENS": 4096},
    "tp_overlap": {"TOKENS": 8192, "HIDDEN": 4096, "FFN": 16384, "CHUNKS": 4},
    "pipeline_schedule": {"HIDDEN": 4096, "ROWS": 1024, "BLOCKS_PER_STAGE": 4, "VIRTUAL": 2},
}


def _template(name: str) -> str:
    return resources.files(TEMPLATE_PACKAGE).joinpath(name).read_text()


def _int(row: dict, key: str) -> int:
    """A count or time of the finding's row as an int (0 when missing or NaN)."""
    v = row.get(key)
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return 0
    return int(round(float(v)))


def _per_instance(row: dict[str, Any], least: int) -> tuple[int, int, dict[str, int]]:
    """(instances, collectives per instance (at least ``least``), the traced times per
    instance (ns) with the collectives) of a finding's row."""
    n = max(1, _int(row, "instances"))
    coll = max(least, round(float(row.get("collectives_per_instance") or least)))
    traced = {key: _int(row, key) // n for key in ("comm_ns", "exposed_comm_ns", "compute_ns",
                                                    "same_stream_comm_ns")}  # fmt: skip
    return n, coll, {**traced, "collectives": coll}


def _comm_overlap(f: Finding, row: dict[str, Any]) -> tuple[dict, dict, list[str]]:
    n, coll, traced = _per_instance(row, 1)
    cfg = {"strategy": f.strategy, "BUCKETS": coll, **DEFAULTS[f.strategy]}
    d = DEFAULTS[f.strategy]
    text = [
        f"Traced (per instance of the range, {n} instance(s)): {coll} collective(s) "
        f"(BUCKETS), {fmt_ns(traced['comm_ns'])} of communication, "
        f"{fmt_ns(traced['exposed_comm_ns'])} of it with no compute beside it, "
        f"{fmt_ns(traced['same_stream_comm_ns'])} on the compute's stream; "
        f"{fmt_ns(traced['compute_ns'])} of compute.",
        "Not in the trace (labelled defaults; --set KEY=INT changes them): the bytes per "
        f"collective - buckets of ROWS x COLS = {d['ROWS']} x {d['COLS']} bf16 = 25 MiB "
        "(DDP's default bucket_cap_mb); the compute beside each bucket - its weight-gradient "
        f"GEMM over TOKENS = {d['TOKENS']} rows. --bench prints the sizes whose times on "
        "your GPUs match the traced ones.",
    ]
    return cfg, traced, text


def _tp_overlap(f: Finding, row: dict[str, Any]) -> tuple[dict, dict, list[str]]:
    n, coll, traced = _per_instance(row, 2)
    # one layer per traced collective: a layer's all-reduce becomes its reduce-scatter and
    # the next one's all-gather (sequence parallelism; the same bytes in a ring)
    cfg = {"strategy": f.strategy, "LAYERS": coll, **DEFAULTS[f.strategy]}
    d = DEFAULTS[f.strategy]
    text = [
        f"Traced (per instance of the range, {n} instance(s)): {coll} collectives between "
        f"the layers' GEMMs (LAYERS = {coll}: one layer, all-gather + GEMMs + reduce-scatter, "
        "per traced all-reduce; --set LAYERS to half of it where the trace's collectives are "
        f"already all-gathers and reduce-scatters), {fmt_ns(traced['comm_ns'])} of "
        "communication, "
        f"{fmt_ns(traced['same_stream_comm_ns'])} of it on the compute's stream, "
        f"{fmt_ns(traced['exposed_comm_ns'])} with no compute beside it; "
        f"{fmt_ns(traced['compute_ns'])} of compute.",
        "Not in the trace (labelled defaults; --set KEY=INT changes them): TOKENS = "
        f"{d['TOKENS']}, HIDDEN = {d['HIDDEN']}, FFN = {d['FFN']} (the layer's sizes), "
        f"CHUNKS = {d['CHUNKS']} (pieces per collective), and the tensor-parallel degree "
        "(the script runs on the ranks it is given).",
    ]
    return cfg, traced, text


def _pipeline_schedule(f: Finding, row: dict[str, Any]) -> tuple[dict, dict, list[str]]:
    p, m = max(2, _int(row, "stages")), max(1, _int(row, "microbatches"))
    measured = ("step_ns", "compute_ns", "bubble_ns")
    traced: dict[str, float] = {key: _int(row, key) for key in measured}
    traced.update(stages=p, microbatches=m, stage=_int(row, "stage"),
                  bubble_fraction=float(row.get("bubble_fraction") or 0),
                  ideal_fraction=float(row.get("ideal_fraction") or 0))  # fmt: skip
    cfg = {"strategy": f.strategy, "STAGES": p, "MICROBATCHES": m, **DEFAULTS[f.strategy]}
    d = DEFAULTS[f.strategy]
    text = [
        f"Traced: {p} stages (STAGES), {m} micro-batches per step (MICROBATCHES); on stage "
        f"{traced['stage']} (the bottleneck) a step of {fmt_ns(traced['step_ns'])} computes "
        f"{fmt_ns(traced['compute_ns'])} and waits {fmt_ns(traced['bubble_ns'])}: bubble "
        f"{traced['bubble_fraction']:.1%} against the ideal (p - 1) / (m + p - 1) = "
        f"{traced['ideal_fraction']:.1%}.",
        "Not in the trace (labelled defaults; --set KEY=INT changes them): the stages' "
        f"layers - BLOCKS_PER_STAGE = {d['BLOCKS_PER_STAGE']} Linear+ReLU blocks of HIDDEN = "
        f"{d['HIDDEN']} features per stage, ROWS = {d['ROWS']} rows per micro-batch; VIRTUAL "
        f"= {d['VIRTUAL']} stages per rank for interleaved 1F1B. Run on STAGES ranks to "
        "compare with the trace.",
    ]
    return cfg, traced, text


# what to change in the user's code, in the script's header
CHANGE = {
    "comm_overlap": "In your code: let DistributedDataParallel overlap the all-reduces (it "
    "issues each gradient bucket's all-reduce asynchronously from the autograd hooks and "
    "waits before the optimizer step; bucket_cap_mb sets the bucket size: smaller buckets "
    "start communicating earlier). In a hand-written loop: dist.all_reduce(grad, "
    "async_op=True) as soon as a gradient is ready, work.wait() just before the optimizer "
    "reads it - not a blocking all-reduce after backward (a blocking collective runs on "
    "the compute's stream), and no read of the gradient before its wait.",
    "tp_overlap": "In your code: turn each tensor-parallel all-reduce into a reduce-scatter "
    "and an all-gather (sequence parallelism: SequenceParallel with ColwiseParallel / "
    "RowwiseParallel in torch.distributed.tensor.parallel; Megatron-LM --sequence-parallel), "
    "then overlap them with the GEMMs: torch.compile with "
    "torch._inductor.config._micro_pipeline_tp = True (async TP on symmetric memory), "
    "TransformerEngine / Megatron-LM --tp-comm-overlap, or the chunked loop of "
    "layer_overlapped below.",
    "pipeline_schedule": "In your code: more micro-batches per step (the ideal bubble is "
    "(p-1)/(m+p-1)), Schedule1F1B rather than ScheduleGPipe (activations of p micro-batches "
    "in flight instead of m), or ScheduleInterleaved1F1B with v stages per rank (a list of "
    "PipelineStage objects per rank; ideal (p-1)/(v*m+p-1); Megatron-LM "
    "--num-layers-per-virtual-pipeline-stage). A measured bubble above the ideal is the "
    "transfers between stages or unequal stages: see the trace's send/receive kernels.",
}

CONFIGS = {"comm_overlap": _comm_overlap, "tp_overlap": _tp_overlap,
           "pipeline_schedule": _pipeline_schedule}  # fmt: skip


def _docstring(f: Finding, gpu: GpuSpec | None, text: list[str], stem: str) -> str:
    where = ", ".join(f.location()) + (f" ({gpu.name})" if gpu else "")
    paras = [
        f"{TITLES[f.strategy]}: a {f.strategy} reference emitted by advisor.",
        f"Where: {where}",
        f"Finding ({f.rule}): {f.summary}",
        f"Estimated savings: {fmt_ns(f.est_savings_ns)} (an estimate).",
        *text,
        CHANGE[f.strategy],
    ]
    lines = [textwrap.fill(p, 92, subsequent_indent="    ", break_on_hyphens=False) for p in paras]
    run = [
        "Run (from any folder):",
        f"    python {stem}.py --check",
        "        on the CPU: gloo, 2 processes started by the script, small sizes; the schedules'",
        "        tensors compared (bit for bit, or within the tolerance it prints and why)",
        f"    python {stem}.py --bench",
        "        NCCL on the visible GPUs (>= 2) at CONFIG's sizes: the schedules compared and",
        "        timed, exposed communication (or the bubble) before and after; under torchrun:",
        "        torchrun --nproc_per_node 2 THIS_FILE --bench",
    ]
    return '"""' + "\n\n".join(lines) + "\n\n" + "\n".join(run) + '\n"""\n\n'


def script_files(f: Finding, gpu: GpuSpec | None, stem: str) -> dict[str, str]:
    """The script of a comm_overlap / tp_overlap / pipeline_schedule finding (name -> text);
    empty for other strategies."""
    if f.strategy not in TEMPLATES or f.emit is None:
        return {}
    cfg, traced, text = CONFIGS[f.strategy](f, f.emit.row)
    head = _docstring(f, gpu, text, stem)
    head += (
        "import os\nimport time\n\nimport torch\nimport torch.distributed as dist\n\n"
        "# sizes (--set KEY=INT) and what the trace says (ns, per range instance or step)\n"
        f"CONFIG = {pprint.pformat(cfg, sort_dicts=False, width=88)}\n"
        f"TRACED = {pprint.pformat(traced, sort_dicts=False, width=88)}\n\n"
    )
    # the strategy first, then --set (script_cli.py's, shared with the GEMM scripts, without
    # its Triton device choice) and the shared harness
    sets = "def _apply_sets" + _template("script_cli.py").split("def _apply_sets", 1)[1]
    sets = (
        "# ---- --set KEY=INT (as in every emitted script) "
        + "-" * 40
        + "\nimport argparse  # noqa: E402\nimport sys  # noqa: E402\n\n\n"
        + sets
    )
    parts = [_template(TEMPLATES[f.strategy]), sets, _template("dist_harness.py")]
    return {f"{stem}.py": head + "\n\n\n".join(parts)}
