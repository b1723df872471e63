"""Built-in GPU spec table: the fallback when a trace carries no device facts."""

from __future__ import annotations

import math
import re
from pathlib import Path
from typing import Annotated, Literal

import msgspec
from msgspec import Meta

from advisor.data import gpu_facts, load_yaml
from advisor.errors import AdvisorInputError
from advisor.trace.model import GpuSpec
from advisor.user_yaml import load_user_yaml
from advisor.validate import FieldError, Invalid, convert

_FIELDS = set(GpuSpec.__dataclass_fields__) - {"source"}


def builtin_gpus() -> list[GpuSpec]:
    """Every entry of the built-in table, in table order."""
    rows = load_yaml("gpus.yaml")["gpus"]
    return [GpuSpec(**{k: v for k, v in row.items() if k in _FIELDS}) for row in rows]


def match_gpu(name: str) -> GpuSpec | None:
    """The first built-in entry whose name or a match regex fits ``name`` (case-insensitive)."""
    wanted = name.strip().lower()
    for row in load_yaml("gpus.yaml")["gpus"]:
        if row["name"].lower() == wanted or any(
            re.search(p, wanted, re.IGNORECASE) for p in row["match"]
        ):
            spec = {k: v for k, v in row.items() if k in _FIELDS}
            return GpuSpec(**spec)
    return None


def fallback_facts(vendor: str) -> dict:
    """The facts of a GPU that neither its trace nor the built-in table gives (gpus.yaml's
    ``nsys_fallback``; for AMD the wavefront size, register file and workgroup limit of its
    ``cdna`` section). The readers of device records (nsys, kineto) fill gaps from here."""
    facts = dict(gpu_facts("nsys_fallback"))
    if vendor == "amd":  # (waves per CU: SIMDs x waves per SIMD; LDS: per CU and per workgroup)
        cdna = gpu_facts("cdna")
        lds = cdna["lds_kb"] * 1024
        facts |= {"warp_size": cdna["wave_front_size"], "registers_per_sm": cdna["vgprs_per_lane"],
                  "max_blocks_per_sm": cdna["max_workgroups_per_cu"],
                  "max_warps_per_sm": cdna["simds_per_cu"] * cdna["max_waves_per_simd"],
                  "shared_mem_per_sm": lds, "max_shared_mem_per_block": lds,
                  "reserved_shared_mem_per_block": 0}  # fmt: skip
    return facts


def builtin_fact(base: GpuSpec | None, name: str, vendor: str = "nvidia"):
    """A GpuSpec fact a trace does not give: the built-in entry's (``base``, the trace's GPU
    model matched in gpus.yaml), else the fallback for an unknown GPU of ``vendor``."""
    return getattr(base, name) if base is not None else fallback_facts(vendor)[name]


def _number(value) -> float | None:
    """``value`` (a number, or text holding one) as a finite float, else None."""
    if isinstance(value, bool) or value is None:
        return None
    try:
        x = float(value)
    except (TypeError, ValueError, OverflowError):  # (text, a blob, a list)
        return None
    return x if math.isfinite(x) else None


def fact(value, upper: float) -> float | None:
    """A GPU fact read from a trace (a count, a size, a rate) as a number: None where it is
    missing or cannot be one (text that is no number, not finite, 0 or less, above
    ``upper``: a damaged field, which the caller fills as if absent)."""
    x = _number(value)
    return x if x is not None and 0 < x <= upper else None


def device_index(value) -> int | None:
    """A device or agent number read from a trace: None unless a whole number 0..2^31-1."""
    x = _number(value)
    return int(x) if x is not None and 0 <= x < 2**31 and x == int(x) else None


# upper bounds of GPU facts read from traces (those of a --gpu-spec file, GpuSpecFile)
FACT_LIMITS = {"sm_count": 4096, "warps": 256, "blocks": 256, "registers": 1 << 20,
               "shared_mem": 1 << 24, "warp_size": 128, "clock_hz": 1e13,
               "bandwidth_bs": 1e15, "gfx": 999999, "lds_kb": 1 << 14}  # fmt: skip


def cdna_spec(name: str, gfx, cus, simds, waves, lds_kb, wave, source: str) -> GpuSpec | None:
    """The GpuSpec of an AMD CDNA agent record (rocprof agent_info, rocprofv3 JSON agents,
    rocpd agents): what the record leaves out (None or 0, or a value that cannot be one)
    comes from gpus.yaml's ``cdna`` section; clock, bandwidth, peak rate and the workgroup
    limit from the built-in entry of its name or gfx target, when there is one. None when the
    record gives no usable compute-unit count."""
    cdna = gpu_facts("cdna")
    cus = fact(cus, FACT_LIMITS["sm_count"])
    if cus is None:
        return None
    name = str(name)
    gfx = int(fact(gfx, FACT_LIMITS["gfx"]) or 0)
    target = f"gfx{gfx // 10000}{(gfx // 100) % 100:x}{gfx % 100:x}" if gfx else "gfx?"
    base = match_gpu(name) or match_gpu(target)
    lds = int(fact(lds_kb, FACT_LIMITS["lds_kb"]) or cdna["lds_kb"]) * 1024
    simds = int(fact(simds, FACT_LIMITS["warps"]) or cdna["simds_per_cu"])
    waves = int(fact(waves, FACT_LIMITS["warps"]) or cdna["max_waves_per_simd"])
    return GpuSpec(
        name=name,
        vendor="amd",
        sm_count=int(cus),
        compute_capability=target,
        warp_size=int(fact(wave, FACT_LIMITS["warp_size"]) or cdna["wave_front_size"]),
        max_warps_per_sm=simds * waves,
        max_blocks_per_sm=base.max_blocks_per_sm if base else cdna["max_workgroups_per_cu"],
        registers_per_sm=cdna["vgprs_per_lane"],
        shared_mem_per_sm=lds,
        max_shared_mem_per_block=lds,
        reserved_shared_mem_per_block=0,
        clock_mhz=base.clock_mhz if base else None,
        memory_bandwidth_gbs=base.memory_bandwidth_gbs if base else None,
        dense_fp16_tflops=base.dense_fp16_tflops if base else None,
        simds_per_cu=simds,
        source=source,
    )


def agent_spec(record: dict, name: str, source: str) -> GpuSpec | None:
    """cdna_spec of a rocprofiler-sdk agent record (rocprofv3 JSON ``agents``, the rocpd
    agent table's ``extdata``): the same lower-case fields in both."""
    return cdna_spec(
        name=name,
        gfx=record.get("gfx_target_version"),
        cus=record.get("cu_count"),
        simds=record.get("simd_per_cu"),
        waves=record.get("max_waves_per_simd"),
        lds_kb=record.get("lds_size_in_kb"),
        wave=record.get("wave_front_size"),
        source=source,
    )


def gpu_from_option(value: str) -> GpuSpec:
    """Resolve a ``--gpu NAME`` value; unknown names are bad input listing the known ones."""
    spec = match_gpu(value)
    if spec is None:
        known = ", ".join(g.name for g in builtin_gpus())
        raise AdvisorInputError(None, f"--gpu {value!r} is not a known GPU (known: {known})")
    return GpuSpec(**{**spec.to_dict(), "source": f"--gpu {value}"})


class GpuSpecFile(msgspec.Struct, forbid_unknown_fields=True, kw_only=True):
    """A --gpu-spec file: the facts of one GPU (docs/metrics.md, "GPU facts")."""

    name: Annotated[str, Meta(min_length=1, max_length=100)]
    vendor: Literal["nvidia", "amd"]
    sm_count: Annotated[int, Meta(gt=0, le=4096)]
    # ``compute_capability: 9.0`` unquoted (YAML reads a number) means "9.0"
    compute_capability: str | float
    max_warps_per_sm: Annotated[int, Meta(gt=0, le=256)]
    max_blocks_per_sm: Annotated[int, Meta(gt=0, le=256)]
    registers_per_sm: Annotated[int, Meta(gt=0, le=1 << 20)]
    shared_mem_per_sm: Annotated[int, Meta(gt=0, le=1 << 24)]
    warp_size: Annotated[int, Meta(gt=0, le=128)] | None = None
    max_shared_mem_per_block: Annotated[int, Meta(gt=0, le=1 << 24)] | None = None
    reserved_shared_mem_per_block: Annotated[int, Meta(ge=0, le=1 << 16)] | None = None
    clock_mhz: Annotated[float, Meta(gt=0, le=10000)] | None = None
    memory_bandwidth_gbs: Annotated[float, Meta(gt=0, le=1e6)] | None = None
    dense_fp16_tflops: Annotated[float, Meta(gt=0, le=1e6)] | None = None

    def __post_init__(self) -> None:
        cc = self.compute_capability
        text = f"{cc:.1f}" if isinstance(cc, float) else cc
        if not _COMPUTE_CAPABILITY.fullmatch(text):
            raise FieldError("compute_capability", f"{cc!r} is neither like 9.0 nor like gfx942")
        self.compute_capability = text


_COMPUTE_CAPABILITY = re.compile(r"(\d{1,2}\.\d|gfx[0-9a-f]{3,4})")


def reserved_shared_mem(vendor: str, compute_capability: str) -> int:
    """Shared memory the driver reserves per CTA (B): 1 KiB on NVIDIA compute capability
    8.0 and later, 0 before and on AMD (gpus.yaml ``nsys_fallback``)."""
    facts = gpu_facts("nsys_fallback")
    major = compute_capability.split(".")[0]
    if vendor != "nvidia" or not major.isdigit():
        return 0
    return facts["reserved_shared_mem_per_block"] if int(major) >= facts[
        "reserved_from_cc_major"] else 0  # fmt: skip


def gpu_from_file(path: str) -> GpuSpec:
    """The GpuSpec of a ``--gpu-spec FILE.yaml`` (AdvisorInputError names the file and
    field: missing fields, wrong types, negative or absurd counts, YAML bombs)."""
    p = Path(path)
    try:
        text = p.read_text()
    except (OSError, UnicodeDecodeError) as exc:
        raise AdvisorInputError(str(p), f"--gpu-spec: cannot read: {exc}") from None
    doc = load_user_yaml(text, str(p), "--gpu-spec file")
    try:
        spec = convert(doc, GpuSpecFile)
    except Invalid as bad:
        raise AdvisorInputError(str(p), f"--gpu-spec field {bad.field!r}: {bad.problem}") from None
    values = msgspec.structs.asdict(spec)
    values["warp_size"] = values["warp_size"] or fallback_facts(spec.vendor)["warp_size"]
    values["max_shared_mem_per_block"] = (
        values["max_shared_mem_per_block"] or values["shared_mem_per_sm"]
    )
    if values["reserved_shared_mem_per_block"] is None:  # (as the CUDA driver reserves it)
        values["reserved_shared_mem_per_block"] = reserved_shared_mem(
            spec.vendor, values["compute_capability"]
        )
    return GpuSpec(**values, source=f"--gpu-spec {p.name}")
