# ---- strategy: data-parallel gradient all-reduce, serialized vs overlapped (as DDP) -----
# BUCKETS gradient buckets, each the weight gradient of one layer, dW = dY^T @ X (ROWS x
# COLS, summed over TOKENS rows of this rank's micro-batch), averaged over the ranks.
# serialized (what the trace shows): the whole backward first, then one blocking
#   all-reduce per bucket; the GPU computes nothing while they run.
# overlapped (DDP's reducer): each bucket's all-reduce is issued with async_op=True as soon
#   as its gradient exists - NCCL runs it on its own stream, beside the next bucket's GEMM -
#   and waited for only where the gradients are consumed (the optimizer step).
FAULTS = ("skip-bucket",)  # --fault skip-bucket: the overlapped schedule forgets bucket 0


def make_inputs(cfg: dict, ctx, rank: int | None = None, dtype=None) -> list:
    """(dY, X) per bucket of `rank`'s micro-batch (default: this rank): seeded by rank, so
    every rank can rebuild any rank's data for the float64 reference."""
    g = torch.Generator().manual_seed(1000 + (ctx.rank if rank is None else rank))
    dtype = dtype or ctx.dtype

    def rand(*shape):
        return torch.randn(*shape, generator=g, dtype=torch.float64).to(ctx.device, dtype)

    return [(rand(cfg["TOKENS"], cfg["ROWS"]), rand(cfg["TOKENS"], cfg["COLS"]))
            for _ in range(cfg["BUCKETS"])]  # fmt: skip


def grad_of(dy: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
    return dy.t() @ x  # the layer's weight gradient: one GEMM


def serialized(data: list, ctx, fault: str | None = None) -> list:
    grads = [grad_of(dy, x) for dy, x in data]  # the whole backward first
    for g in grads:
        dist.all_reduce(g)  # then each bucket, blocking: nothing to hide behind
        g.div_(ctx.world)
    return grads


def overlapped(data: list, ctx, fault: str | None = None) -> list:
    grads, works = [], []
    for i, (dy, x) in enumerate(data):
        g = grad_of(dy, x)
        skip = fault == "skip-bucket" and i == 0
        works.append(None if skip else dist.all_reduce(g, async_op=True))  # starts now
        grads.append(g)  # ... and runs beside the next bucket's GEMM
    for g, work in zip(grads, works):  # the consumer (the optimizer step) waits here
        if work is not None:
            work.wait()
        g.div_(ctx.world)
    return grads


def reference_mean(cfg: dict, ctx) -> list:
    """The mean gradient over the ranks in float64, computed on this rank alone."""
    sums = None
    for r in range(ctx.world):
        grads = [grad_of(dy, x) for dy, x in make_inputs(cfg, ctx, r, torch.float64)]
        sums = grads if sums is None else [a + b for a, b in zip(sums, grads)]
    return [s / ctx.world for s in sums]


SAME = "the same GEMM and the same all-reduce per bucket; only when they run differs"


def check_sizes(cfg: dict, world: int) -> tuple[dict, str]:
    small = {**cfg, "ROWS": 64, "COLS": 48, "TOKENS": 32}
    return small, (
        f"{cfg['BUCKETS']} buckets as in CONFIG, each 64 x 48 summed over 32 rows instead "
        f"of {cfg['ROWS']} x {cfg['COLS']} over {cfg['TOKENS']} (the schedules do not "
        "depend on the sizes)"
    )


def check(cfg: dict, ctx, fault: str | None) -> bool:
    data = make_inputs(cfg, ctx)
    ref = serialized(data, ctx)
    ok = compare(ctx, "serialized vs the float64 mean over ranks", ref,
                 reference_mean(cfg, ctx), False, 1e-5, "float32 GEMMs")  # fmt: skip
    ok &= compare(ctx, "overlapped vs serialized", overlapped(data, ctx, fault), ref, True, 0,
                  SAME)  # fmt: skip
    return ok


def bench(cfg: dict, ctx, steps: int) -> bool:
    data = make_inputs(cfg, ctx)
    mib = cfg["ROWS"] * cfg["COLS"] * torch.finfo(ctx.dtype).bits / 8 / 2**20
    ctx.say(f"bench comm_overlap: {ctx.world} ranks ({ctx.backend}, {str(ctx.dtype)[6:]}), "
            f"{cfg['BUCKETS']} buckets of {cfg['ROWS']} x {cfg['COLS']} ({mib:.1f} MiB), "
            f"each from a GEMM over {cfg['TOKENS']} rows")  # fmt: skip
    ok = compare(ctx, "overlapped vs serialized", overlapped(data, ctx), serialized(data, ctx),
                 True, 0, SAME)  # fmt: skip
    bufs = [torch.zeros(cfg["ROWS"], cfg["COLS"], device=ctx.device, dtype=ctx.dtype)
            for _ in range(cfg["BUCKETS"])]  # fmt: skip
    t = {
        "compute alone": timed(ctx, lambda: [grad_of(dy, x) for dy, x in data], steps),
        "all-reduces alone": timed(ctx, lambda: [dist.all_reduce(b) for b in bufs], steps),
        "serialized": timed(ctx, lambda: serialized(data, ctx), steps),
        "overlapped": timed(ctx, lambda: overlapped(data, ctx), steps),
    }
    ms = {k: v * 1e3 for k, v in t.items()}
    n = cfg["BUCKETS"]
    ctx.say(f"  median of {steps} steps, the slowest rank's time (ms):")
    ctx.say(f"  {'compute alone':<18} {ms['compute alone']:9.3f}")
    ctx.say(f"  {'all-reduces alone':<18} {ms['all-reduces alone']:9.3f}"
            f"   ({ms['all-reduces alone'] / n:.3f} per bucket)")  # fmt: skip
    for name in ("serialized", "overlapped"):
        exposed = max(0.0, ms[name] - ms["compute alone"])
        ctx.say(f"  {name:<18} {ms[name]:9.3f}   exposed communication {exposed:.3f}"
                + ("   (before)" if name == "serialized" else "   (after)"))  # fmt: skip
    traced = TRACED
    per_coll = traced["comm_ns"] / 1e6 / max(1, traced["collectives"])
    per_bucket = traced["compute_ns"] / 1e6 / max(1, traced["collectives"])
    ctx.say(f"  traced, per instance of the range: compute {traced['compute_ns'] / 1e6:.3f}, "
            f"communication {traced['comm_ns'] / 1e6:.3f}, exposed "
            f"{traced['exposed_comm_ns'] / 1e6:.3f} ({per_coll:.3f} per collective)")
    # one bucket's all-reduce scales with ROWS, its GEMM with ROWS x TOKENS
    rows = max(1, round(cfg["ROWS"] * per_coll / max(ms["all-reduces alone"] / n, 1e-6)))
    tokens = max(1, round(cfg["TOKENS"] * per_bucket / max(ms["compute alone"] / n, 1e-6)
                          * cfg["ROWS"] / rows))  # fmt: skip
    ctx.say(f"  sizes whose times here would match the trace's (about linear): --set ROWS={rows}"
            f" --set TOKENS={tokens}")  # fmt: skip
    return ok
