"""Write a reference configuration for every finding: ``advisor analyze TRACE --emit DIR``.

GEMM findings get a self-contained Triton script (knobs from ``knobs.py``, the trace's shape,
``--check``/``--bench``/``--m --n --k``; the planner, templates/planner.py, inlined whole with
the facts advisor planned with), a JSON record of the knobs and the equivalent
``cutlass_profiler`` command; launch findings a CUDA-graph / reduce-overhead script; overlap
and other findings a markdown note with the knobs, and the multi-GPU strategies
(comm_overlap, tp_overlap, pipeline_schedule) also a torch.distributed script (``dist.py``).
Files are staged in a temporary folder and moved into DIR only when all of them were
written: never half an emit. ``emit`` leaves the findings as they are and returns what it
wrote for each (``Emitted``).
"""

from __future__ import annotations

import json
import math
import pprint
import re
import shutil
import textwrap
from dataclasses import asdict, replace
from importlib import resources
from pathlib import Path
from string import Template

from advisor.configs import dist, knobs
from advisor.errors import AdvisorInputError
from advisor.rules.finding import Emitted, Finding
from advisor.rules.registry import EmitKind, strategy
from advisor.staged import place, staging
from advisor.trace.model import GpuSpec
from advisor.units import fmt_ns

TEMPLATE_PACKAGE = "advisor.configs.templates"
PLANNER = "planner.py"  # (the GEMM planner: a module advisor imports too, configs/knobs.py)
OVERLAP_NOTE = "overlap.md"  # (the note that says how much comm shares compute's stream)


def _row(f: Finding) -> dict:
    """The table row that spoke for the finding (what its emit kind reads)."""
    return f.emit.row if f.emit else {}


def _template(name: str) -> str:
    return resources.files(TEMPLATE_PACKAGE).joinpath(name).read_text()


def _slug(text: str | None) -> str:
    return re.sub(r"[^A-Za-z0-9]+", "_", text or "all")[:40].strip("_") or "all"


def _location_text(f: Finding) -> str:
    return ", ".join(f.location())


def _docstring(title: str, f: Finding, run: list[str]) -> str:
    """Module docstring of an emitted script, wrapped to 96 columns."""
    paras = [
        title,
        f"Where: {_location_text(f)}",
        f"Finding ({f.rule}): {f.summary}",
        f"Estimated savings: {fmt_ns(f.est_savings_ns)} (an estimate).",
    ]
    lines = [textwrap.fill(p, 96, subsequent_indent="    ") for p in paras]
    return '"""' + "\n\n".join(lines) + "\n\n" + "\n".join(run) + '\n"""\n\n'


def cutlass_command(cfg: dict, m: int, n: int, k: int, gpu: GpuSpec) -> str:
    """The equivalent cutlass_profiler invocation (bf16 in, fp32 accumulate)."""
    tile = f"{cfg['BLOCK_M']}x{cfg['BLOCK_N']}x{cfg['BLOCK_K']}"
    if (gpu.cc_major or 0) >= 9:
        kernels = f"cutlass3x_sm90_tensorop_*gemm_bf16_bf16_f32_bf16_bf16_{tile}_*"
        kernels += strategy(cfg["strategy"]).cutlass
    else:
        kernels = f"cutlass_tensorop_s16816gemm_bf16_{cfg['BLOCK_M']}x{cfg['BLOCK_N']}_*"
    splits = cfg.get("SPLITS", 1)
    parts = [
        "cutlass_profiler --operation=Gemm",
        f"--m={m} --n={n} --k={k}",
        "--A=bf16:row --B=bf16:row --C=bf16:row --accum=f32",
        f"--split_k_mode={'parallel' if splits > 1 else 'serial'} --split_k_slices={splits}",
        f"--raster_order=along_m --swizzle_size={cfg.get('GROUP_M', 8)}",
        f"--kernels='{kernels}'",
        "--profiling-iterations=100",
    ]
    return " ".join(parts)


Made = tuple[dict[str, str], Emitted]  # (file name -> text, what it means for the finding)


def _literal_call(func: str, kwargs: dict) -> str:
    """``func(`` one ``key=value,`` a line ``)``, the values as Python literals (96 columns)."""
    lines = [f"{func}("]
    for key, value in kwargs.items():
        head = f"    {key}="
        text = pprint.pformat(value, width=96 - len(head), sort_dicts=False)
        lines.append(head + text.replace("\n", "\n" + " " * len(head)) + ",")
    return "\n".join([*lines, ")"]) + "\n"


def planner_section(gpu: GpuSpec) -> str:
    """advisor's knob planner for an emitted script: templates/planner.py whole, then the
    facts advisor plans with as literals (gpus.yaml's sections, the GPU's as GPU), so that
    --m/--n/--k re-plan the way advisor would."""
    return (
        _template(PLANNER)
        + "\n\n"
        + _literal_call("calibrate", knobs.calibration())
        + _literal_call("GPU = PlannerFacts", asdict(knobs.planner_facts(gpu)))
    )


def _gemm_files(f: Finding, gpu: GpuSpec, stem: str) -> Made:
    row = _row(f)
    s = strategy(f.strategy)
    if s.chooser is None or s.template is None:  # (rules are checked for this when loaded)
        return {}, Emitted(missing=f"no GEMM script for the strategy {f.strategy!r}")
    if s.min_cc is not None and (gpu.cc_major or 0) < s.min_cc[0]:
        return {}, Emitted(missing=f"{s.min_cc[1]} need compute capability >= {s.min_cc[0]}")
    if row.get("m") is None or (isinstance(row.get("m"), float) and math.isnan(row["m"])):
        return {}, Emitted(
            missing="GEMM shape (M, N, K) is not in the trace: pass --shape "
            f"'{f.kernel}=MxNxK' (or a range name), or profile PyTorch code under "
            "torch.autograd.profiler.emit_nvtx(record_shapes=True)"
        )
    m, n, k = int(row["m"]), int(row["n"]), int(row["k"])
    try:
        cfg = getattr(knobs, s.chooser)(knobs.Problem(m, n, k, gpu))
    except knobs.NoTileFits as exc:
        return {}, Emitted(missing=str(exc))
    cfg["strategy"] = f.strategy
    cfg.update(M=m, N=n, K=k, trace_kernel_ns=row.get("median_ns"), gpu=gpu.name)
    header = _docstring(
        f"{f.strategy} reference GEMM emitted by advisor.",
        f,
        [
            "Run (numerics vs float64 matmul; median time and TFLOP/s vs torch.matmul):",
            f"    python {stem}.py --check --bench",
            "Another size:",
            f"    python {stem}.py --m 512 --n 512 --k 4096 --check",
            "On the CPU (Triton's interpreter, numerics only):",
            f"    TRITON_INTERPRET=1 python {stem}.py --check --m 64 --n 64 --k 256",
        ],
    )
    header += (
        "import os\n\nimport torch\nimport triton\nimport triton.language as tl\n\n"
        f"CONFIG = {pprint.pformat(cfg, sort_dicts=False, width=96)}\n\n"
    )
    # the planner first: the templates read its PAD_ALIGN
    script = header + planner_section(gpu) + "\n\n" + _template("common.py") + "\n\n"
    if s.gluon:
        script += _template("gluon_ws.py") + "\n\n"
    script += _template(s.template)
    script += "\n\n" + _template("script_cli.py")
    script += "\n\n" + _template("harness.py")
    cutlass = cutlass_command(cfg, m, n, k, gpu) if gpu.vendor == "nvidia" else None
    record = {
        "finding": {k: getattr(f, k) for k in ("rule", "strategy", "kernel", "region", "device")},
        "knobs": cfg,
        "cutlass_profiler": cutlass,
        "note": "knobs chosen by advisor's cost model (docs/configs.md); the cutlass_profiler "
        "line is its equivalent, not run here: check its flags against your build's --help",
    }
    files = {f"{stem}.py": script, f"{stem}.json": json.dumps(record, indent=2) + "\n"}
    return files, Emitted(knobs=cfg, cutlass_profiler=cutlass)


def _launch_files(f: Finding, stem: str) -> Made:
    row = _row(f)
    # what the traced numbers are of: a chain (sequences), a steady step's medians (steps)
    # or a range's instances together (regions: their launch overhead, launches not counted)
    per_step = "step_ns" in row
    overhead = row["overhead_ns"] if "overhead_ns" in row else row.get("launch_overhead_ns")
    launches = row.get("launches")
    # the stand-in chain: a chain's or a step's ops, a range's per instance
    chain = (row.get("ops") or 0) / max(int(row.get("instances") or 1), 1)
    cfg = {
        "CHAIN_OPS": max(2, round(chain)),
        "CHAIN_ELEMENTS": 4096,
        "TRACE_LAUNCHES": None if launches is None else int(launches),
        "TRACE_OVERHEAD_NS": None if overhead is None else int(overhead),
        "TRACE_PER": "steady step (medians)" if per_step else "finding (summed)",
        "TRACE_SAVING_NS": int(f.est_savings_ns),
    }
    head = _docstring(
        "CUDA-graph capture for a launch-bound chain, emitted by advisor.",
        f,
        [f"Run: python {stem}.py   (needs a CUDA GPU)"],
    )
    head += f"import torch\n\nCONFIG = {pprint.pformat(cfg, sort_dicts=False)}\n\n"
    return {f"{stem}.py": head + _template("launch_graph.py")}, Emitted()


def _power_of_two_at_most(x: int, top: int) -> int:
    return 1 << max(0, min(int(x), top).bit_length() - 1)


def _grid_stride_files(f: Finding, gpu: GpuSpec, stem: str) -> Made:
    """A persistent grid-stride script for a non-GEMM kernel's wave tail: the traced grid
    and slots, a stand-in workload (templates/grid_stride.py says how to port it)."""
    row = _row(f)
    threads = int(row.get("block_threads") or 256)
    warps = _power_of_two_at_most(max(1, threads // gpu.warp_size), 32)
    block = _power_of_two_at_most(4 * warps * gpu.warp_size, 4096)  # 4 elements per thread
    slots = int(row.get("slots") or gpu.sm_count)
    cfg = {
        "strategy": f.strategy,
        "TRACE_GRID": int(row["grid_blocks"]),
        "SLOTS": slots,
        "NUM_PROGS": slots,
        "num_warps": warps,
        "BLOCK": block,
        "PER_CTA": 16 * block,
        "WORK": 128,
        "SMS": gpu.sm_count,
        "MAX_WARPS_PER_SM": gpu.max_warps_per_sm,
        "REGISTERS_PER_SM": gpu.registers_per_sm,
        "MAX_BLOCKS_PER_SM": gpu.max_blocks_per_sm,
        "trace_kernel_ns": row.get("median_ns"),
        "trace_waves": row.get("waves"),
        "gpu": gpu.name,
    }
    head = _docstring(
        "Persistent grid-stride kernel for a non-GEMM wave tail, emitted by advisor.",
        f,
        [
            "Run (numerics of both versions vs float64; times both):",
            f"    python {stem}.py --check --bench",
            "On the CPU (Triton's interpreter, numerics only):",
            f"    TRITON_INTERPRET=1 python {stem}.py --check --n 1000 --set BLOCK=64",
        ],
    )
    head += (
        "import os\n\nimport torch\nimport triton\nimport triton.language as tl\n\n"
        f"CONFIG = {pprint.pformat(cfg, sort_dicts=False, width=96)}\n\n"
    )
    script = head + _template("script_cli.py") + "\n\n" + _template("grid_stride.py")
    return {f"{stem}.py": script}, Emitted(knobs=cfg)


def _note_files(f: Finding, stem: str) -> Made:
    row = _row(f)
    s = strategy(f.strategy)
    values: dict[str, object] = dict(
        where=_location_text(f),
        summary=f.summary,
        savings=fmt_ns(f.est_savings_ns),
        watch_for=f.watch_for,
        title=f.title,
        strategy=f.strategy,
        rationale=f.rationale,
        snippet=s.snippet,
    )
    if s.note == OVERLAP_NOTE:
        same = row.get("same_stream_comm_ns") or 0
        values["same_stream_note"] = (
            f"{fmt_ns(same)} of the communication runs on the same stream as compute: it "
            "is serialized with it and cannot overlap until it moves to its own stream "
            "(an async collective)."
            if same
            else "Communication has its own stream, but nothing independent runs beside it."
        )
        values["bucket_mb"] = 5
    text = Template(_template(s.note)).substitute(values)
    return {f"{stem}.md": text}, Emitted()


def emit(findings: list[Finding], gpus: dict[int, GpuSpec], out_dir: str | Path) -> list[Emitted]:
    """Write configs for ``findings`` into ``out_dir``; returns, per finding (same order),
    the files written for it or what its config lacks. Raises AdvisorInputError when
    ``out_dir`` cannot be written; then nothing is left in it."""
    out = Path(out_dir)
    created = not out.exists()
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise AdvisorInputError(str(out), f"cannot write the emit folder: {exc.strerror}") from None
    try:
        with staging(out, ".advisor-emit-") as stage:
            files: dict[str, str] = {}
            outcomes = []
            for rank, f in enumerate(findings, 1):
                made, outcome = _configs_of(f, rank, gpus)
                files.update(made)
                paths = tuple(sorted(str(out / name) for name in made))
                outcomes.append(replace(outcome, config=paths))
            for name, text in files.items():
                (stage / name).write_text(text)
            place(stage, [(name, out / name) for name in files])
            return outcomes
    except OSError as exc:
        if created:
            shutil.rmtree(out, ignore_errors=True)
        raise AdvisorInputError(str(out), f"cannot write configs: {exc.strerror}") from None


def emit_into(
    findings: list[Finding], gpus: dict[int, GpuSpec], out_dir: str | Path
) -> list[Finding]:
    """``emit``, then each finding with its outcome attached (``Finding.emitted``)."""
    return [f.with_emitted(e) for f, e in zip(findings, emit(findings, gpus, out_dir), strict=True)]


def _configs_of(f: Finding, rank: int, gpus: dict[int, GpuSpec]) -> Made:
    """The files of one finding (name -> text) and their outcome (without paths)."""
    stem = f"{rank:02d}_{f.strategy}_{_slug(f.kernel or f.region)}_dev{f.device}"
    kind = f.emit.kind if f.emit else None
    gpu = gpus.get(f.device)
    if kind == EmitKind.GEMM and gpu is not None:
        return _gemm_files(f, gpu, stem)
    if kind == EmitKind.GEMM:
        return {}, Emitted(missing="GPU facts (SMs, shared memory) for the device: pass --gpu NAME")
    if kind == EmitKind.LAUNCH:
        return _launch_files(f, stem)
    if kind == EmitKind.GRID_STRIDE and gpu is not None:
        return _grid_stride_files(f, gpu, stem)
    if kind == EmitKind.GRID_STRIDE:
        return {}, Emitted(missing="GPU facts (SMs, CTAs per SM) for the device: pass --gpu NAME")
    if kind in (EmitKind.OVERLAP, EmitKind.ADVICE):
        files, outcome = _note_files(f, stem)
        files.update(dist.script_files(f, gpu, stem))  # multi-GPU strategies: a runnable script
        return files, outcome
    return {}, Emitted()
