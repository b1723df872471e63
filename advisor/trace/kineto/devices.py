"""GPU facts from the trace's ``deviceProperties``; what the document lacks (the resident-block
limit, clock, bandwidth, ...) comes from the built-in entry of the same model, else the
fallback for an unknown GPU (gpus.py, as for Nsight Systems traces)."""

from __future__ import annotations

import msgspec

from advisor.trace.gpus import builtin_fact, fallback_facts, match_gpu, reserved_shared_mem
from advisor.trace.kineto.schema import DeviceProps
from advisor.trace.model import GpuSpec, Trace


def renumbered(props: list[DeviceProps], trace: Trace) -> list[DeviceProps]:
    """``deviceProperties`` for the trace's devices: a trace of one device whose one entry
    has another id (ROCm numbers the visible device by HIP_VISIBLE_DEVICES: kernels on device
    2, the entry id 0) takes that entry for its device, and says so."""
    devices = trace.devices
    ids = {p.id for p in props}
    if len(props) == 1 and len(devices) == 1 and devices[0] not in ids:
        trace.sources.append(
            f"deviceProperties: the one entry (id {props[0].id}, {props[0].name}) describes "
            f"device {devices[0]}, the trace's only device"
        )
        return [msgspec.structs.replace(props[0], id=devices[0])]
    return props


def gpus(props: list[DeviceProps], devices: list[int]) -> dict[int, GpuSpec]:
    """GpuSpec per device described by ``deviceProperties`` (with an SM count)."""
    return {d.id: _spec(d, d.numSms) for d in props if d.id in devices and d.numSms}


def _spec(d: DeviceProps, sms: int) -> GpuSpec:
    amd = bool(d.gcnArchName) or "AMD" in d.name or "Instinct" in d.name
    vendor = "amd" if amd else "nvidia"
    known = match_gpu(d.name) or (match_gpu(d.gcnArchName) if d.gcnArchName else None)
    if amd:  # (a gfx target, never a CUDA compute capability: 9.4 is gfx94x, not Hopper)
        cc = (d.gcnArchName.split(":")[0] if d.gcnArchName
              else known.compute_capability if known and known.vendor == "amd"
              else f"gfx{d.computeMajor}{d.computeMinor}?")  # fmt: skip
    else:
        cc = f"{d.computeMajor}.{d.computeMinor}" if d.computeMajor is not None else "?"

    def builtin(name: str):
        """The built-in entry's fact, else the fallback's."""
        return builtin_fact(known, name, vendor)

    warp = d.warpSize or fallback_facts(vendor)["warp_size"]
    smem_sm = d.sharedMemPerMultiprocessor or d.maxSharedMemoryPerMultiProcessor
    threads = d.maxThreadsPerMultiprocessor
    return GpuSpec(
        name=d.name or (known.name if known else "unknown GPU"),
        vendor=vendor,
        sm_count=int(sms),
        compute_capability=cc,
        warp_size=warp,
        max_warps_per_sm=threads // warp if threads else builtin("max_warps_per_sm"),
        max_blocks_per_sm=builtin("max_blocks_per_sm"),
        # (AMD: the VGPRs per lane the occupancy model counts, not regsPerMultiprocessor)
        registers_per_sm=builtin("registers_per_sm") if amd
        else d.regsPerMultiprocessor or builtin("registers_per_sm"),
        shared_mem_per_sm=smem_sm or builtin("shared_mem_per_sm"),
        max_shared_mem_per_block=d.sharedMemPerBlockOptin
        or (d.sharedMemPerBlock if amd else None)
        or (known.max_shared_mem_per_block if known else smem_sm or 0),
        reserved_shared_mem_per_block=known.reserved_shared_mem_per_block if known
        else reserved_shared_mem(vendor, cc),
        clock_mhz=known.clock_mhz if known else None,
        memory_bandwidth_gbs=known.memory_bandwidth_gbs if known else None,
        dense_fp16_tflops=known.dense_fp16_tflops if known else None,
        source="trace (deviceProperties)",
    )  # fmt: skip
