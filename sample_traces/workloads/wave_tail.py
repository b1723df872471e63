"""Single-GPU workload: a non-GEMM Triton kernel whose grid ends in a partial wave
(held-out capture for issue 15's persistent grid-stride advice), profiled with
torch.profiler (Kineto JSON).

    python3 wave_tail.py FACTS.json TRACE_OUT.json

``rowwise_poly_norm`` normalizes rows of a (ROWS x 4096) fp32 tensor after a polynomial
(a stand-in for a fused activation + norm): one CTA per block of ROWS_PER_CTA rows, each
row read once, 96 multiply-adds per element (compute-bound). The grid is sized from the
compiled kernel's occupancy (advisor's own CTAs/SM formula on its registers and warps) to
1.25 waves, so 3/8 of the second wave's slots idle. 40 launches inside ``tail_step``
ranges (record_function), after a warm-up outside the profiler.

FACTS.json: the grid, CTAs/SM, waves, registers and the median kernel time (CUDA events);
``study``: the kernel at 1, 1.25 and 2 waves and as a persistent row loop (do_bench, ms).
"""

from __future__ import annotations

import json
import sys

import torch
import triton
import triton.language as tl

COLS = 4096
ROWS_PER_CTA = 8
WAVES = 1.25
LAUNCHES = 40


@triton.jit
def _poly_norm_row(x_ptr, y_ptr, row, COLS: tl.constexpr):
    """One row: 96 multiply-adds per element, then scaled to unit RMS."""
    cols = tl.arange(0, COLS)
    x = tl.load(x_ptr + row * COLS + cols)
    y = x
    for _ in range(96):
        y = y * 0.999 + x * 0.001
    inv = 1.0 / tl.sqrt(tl.sum(y * y, axis=0) / COLS + 1e-6)
    tl.store(y_ptr + row * COLS + cols, y * inv)


@triton.jit
def rowwise_poly_norm(x_ptr, y_ptr, rows, COLS: tl.constexpr, ROWS_PER_CTA: tl.constexpr):
    for r in range(ROWS_PER_CTA):
        row = tl.program_id(0) * ROWS_PER_CTA + r
        if row < rows:
            _poly_norm_row(x_ptr, y_ptr, row, COLS)


@triton.jit
def rowwise_poly_norm_persistent(x_ptr, y_ptr, rows, COLS: tl.constexpr,
                                 NUM_PROGS: tl.constexpr):  # fmt: skip
    """The same rows, as the advice has it: NUM_PROGS programs walk the rows by a stride."""
    for row in range(tl.program_id(0), rows, NUM_PROGS):
        _poly_norm_row(x_ptr, y_ptr, row, COLS)


def study(x, grid: int, slots: int) -> dict:
    """The traced kernel at 1, 1.25 and 2 waves and as a persistent row loop over the same
    rows (do_bench medians, ms): what the tail really costs this kernel."""
    import triton.testing

    def traced(g: int):
        rows = g * ROWS_PER_CTA
        y = torch.empty_like(x[:rows])
        return lambda: rowwise_poly_norm[(g,)](x[:rows], y, rows, COLS=COLS,
                                               ROWS_PER_CTA=ROWS_PER_CTA, num_warps=8)  # fmt: skip

    def persistent(progs: int):
        rows = grid * ROWS_PER_CTA
        y = torch.empty_like(x[:rows])
        kernel = rowwise_poly_norm_persistent[(progs,)]
        return lambda: kernel(x[:rows], y, rows, COLS=COLS, NUM_PROGS=progs, num_warps=8)

    def ms(fn) -> float:
        return triton.testing.do_bench(fn, warmup=50, rep=300, return_mode="median")

    out = {f"traced_{g}_ctas_ms": ms(traced(g)) for g in (slots, grid, 2 * slots)}
    for progs in (slots, 2 * slots, grid * ROWS_PER_CTA // 4):
        out[f"persistent_{progs}_programs_ms"] = ms(persistent(progs))
    return out


def main() -> None:
    facts_path, trace_path = sys.argv[1], sys.argv[2]
    sys.path.insert(0, ".")  # (run from the repository root: advisor's occupancy formula)
    from advisor.metrics.occupancy import ctas_per_sm
    from advisor.trace.gpus import match_gpu

    props = torch.cuda.get_device_properties(0)
    probe_x = torch.randn(ROWS_PER_CTA, COLS, device="cuda")
    kernel = rowwise_poly_norm[(1,)](probe_x, torch.empty_like(probe_x), ROWS_PER_CTA,
                                     COLS=COLS, ROWS_PER_CTA=ROWS_PER_CTA, num_warps=8)  # fmt: skip
    regs, smem = kernel.n_regs, kernel.metadata.shared
    spec = match_gpu(props.name) or match_gpu("H200")
    ctas, limiter = ctas_per_sm(
        256, regs, smem, spec.shared_mem_per_sm, warp_size=32,
        max_warps_per_sm=spec.max_warps_per_sm, max_blocks_per_sm=spec.max_blocks_per_sm,
        registers_per_sm=spec.registers_per_sm,
        reserved_smem_per_block=spec.reserved_shared_mem_per_block,
    )  # fmt: skip
    slots = int(ctas) * props.multi_processor_count
    grid = int(WAVES * slots)
    rows = grid * ROWS_PER_CTA
    x = torch.randn(rows, COLS, device="cuda")
    y = torch.empty_like(x)

    def launch() -> None:
        rowwise_poly_norm[(grid,)](x, y, rows, COLS=COLS, ROWS_PER_CTA=ROWS_PER_CTA,
                                   num_warps=8)  # fmt: skip

    for _ in range(5):
        launch()
    torch.cuda.synchronize()
    times = []
    for _ in range(20):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        launch()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end) * 1e6)
    from torch.profiler import ProfilerActivity, profile, record_function

    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        for _ in range(LAUNCHES // 4):
            with record_function("tail_step"):
                for _ in range(4):
                    launch()
            torch.cuda.synchronize()
    prof.export_chrome_trace(trace_path)
    times.sort()
    big = torch.randn(2 * slots * ROWS_PER_CTA, COLS, device="cuda")
    facts = {"gpu": props.name, "sms": props.multi_processor_count, "registers": regs,
             "shared_mem": smem, "ctas_per_sm": int(ctas), "limiter": str(limiter),
             "slots": slots, "grid": grid, "waves": grid / slots, "rows": rows,
             "median_kernel_ns": times[len(times) // 2],
             "study": study(big, grid, slots)}  # fmt: skip
    with open(facts_path, "w") as fh:
        json.dump(facts, fh, indent=2)
    print(json.dumps(facts))


if __name__ == "__main__":
    main()
