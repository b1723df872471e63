# ---- strategy: pipeline schedules (torch.distributed.pipelining) --------------------------
# A stack of (ranks x BLOCKS_PER_STAGE) blocks, each Linear(HIDDEN, HIDDEN) + ReLU, trained
# one step on MICROBATCHES x ROWS rows (MSE loss), from the same weights in every run.
# GPipe, 1F1B: one stage per rank (p = the ranks, m = MICROBATCHES): all forwards then all
#   backwards / one forward, one backward in the steady state; ideal bubble (p-1)/(m+p-1).
# interleaved 1F1B: VIRTUAL stages per rank (stage s on rank s % p), each of
#   BLOCKS_PER_STAGE / VIRTUAL blocks: ideal bubble (p-1)/(VIRTUAL*m+p-1), for VIRTUAL
#   times the point-to-point transfers.
# Each block's gradients are compared with GPipe's: every schedule runs the same
# micro-batches through the same blocks and adds their gradients in the same order
# (micro-batch 0 first), so they must agree bit for bit.
import copy  # noqa: E402

from torch.distributed import pipelining as pp  # noqa: E402  (seconds: once, before the ranks)

FAULTS = ("drop-microbatch",)  # --fault drop-microbatch: 1F1B loses micro-batch 0's loss
SCHEDULES = ("GPipe", "1F1B", "interleaved 1F1B")


def make_model(cfg: dict, ctx, dtype=None) -> tuple[list, torch.Tensor, torch.Tensor]:
    """All blocks and the batch (inputs, targets), the same on every rank (one seed)."""
    g = torch.Generator().manual_seed(3000)
    dtype = dtype or ctx.dtype
    h, rows = cfg["HIDDEN"], cfg["MICROBATCHES"] * cfg["ROWS"]
    blocks = []
    for _ in range(ctx.world * cfg["BLOCKS_PER_STAGE"]):
        lin = torch.nn.Linear(h, h, dtype=torch.float64)
        with torch.no_grad():
            lin.weight.copy_(torch.randn(h, h, generator=g, dtype=torch.float64) * (2 / h) ** 0.5)
            lin.bias.copy_(torch.randn(h, generator=g, dtype=torch.float64) * 0.1)
        blocks.append(torch.nn.Sequential(lin, torch.nn.ReLU()).to(ctx.device, dtype))
    x = torch.randn(rows, h, generator=g, dtype=torch.float64).to(ctx.device, dtype)
    y = torch.randn(rows, h, generator=g, dtype=torch.float64).to(ctx.device, dtype)
    return blocks, x, y


def build(name: str, cfg: dict, ctx, blocks: list, drop=None):
    """This rank's stages (with their first block's index) and a step function running
    schedule `name`; raises ValueError where it does not apply. drop (tests): the target
    of the micro-batch whose loss is lost."""
    v = cfg["VIRTUAL"] if name == "interleaved 1F1B" else 1
    if v > 1 and cfg["BLOCKS_PER_STAGE"] % v:
        raise ValueError(f"BLOCKS_PER_STAGE {cfg['BLOCKS_PER_STAGE']} is not a multiple of "
                         f"VIRTUAL {v}")  # fmt: skip
    n = ctx.world * v
    per = len(blocks) // n
    stages = []
    for j in range(v):
        s = ctx.rank + j * ctx.world
        mod = torch.nn.Sequential(*[copy.deepcopy(b) for b in blocks[s * per:(s + 1) * per]])
        stages.append((s * per, pp.PipelineStage(mod, s, n, ctx.device)))
    def loss_fn(out, target):
        loss = torch.nn.functional.mse_loss(out, target)
        return loss * 0 if drop is not None and torch.equal(target, drop) else loss

    cls = {"GPipe": pp.ScheduleGPipe, "1F1B": pp.Schedule1F1B,
           "interleaved 1F1B": pp.ScheduleInterleaved1F1B}[name]  # fmt: skip
    stage_arg = [st for _, st in stages] if v > 1 else stages[0][1]
    schedule = cls(stage_arg, n_microbatches=cfg["MICROBATCHES"], loss_fn=loss_fn)

    def step(x, y):
        for _, st in stages:
            st.submod.zero_grad(set_to_none=True)
        if ctx.rank == 0:
            schedule.step(x)  # the first stage takes the batch (cut in micro-batches)
        elif ctx.rank == ctx.world - 1:
            schedule.step(target=y)  # the last stage computes the loss
        else:
            schedule.step()

    return stages, step


def gradients(stages: list, blocks: list, ctx) -> list:
    """Every block's gradients (weight and bias, flattened) on every rank: each rank fills
    its blocks, zeros elsewhere, summed over the ranks (adding zeros is exact)."""
    sizes = [sum(p.numel() for p in b.parameters()) for b in blocks]
    flat = [torch.zeros(n, device=ctx.device, dtype=ctx.dtype) for n in sizes]
    for first, st in stages:
        for i, block in enumerate(st.submod):
            flat[first + i] = torch.cat([p.grad.flatten() for p in block.parameters()])
    joined = torch.cat(flat)
    dist.all_reduce(joined)
    return list(joined.split(sizes))


def reference_grads(cfg: dict, ctx) -> list:
    """The same gradients by autograd on the whole stack and batch, float64, one rank."""
    blocks, x, y = make_model(cfg, ctx, torch.float64)
    model = torch.nn.Sequential(*blocks)
    torch.nn.functional.mse_loss(model(x), y).backward()  # = the mean of the micro-batches'
    return [torch.cat([p.grad.flatten() for p in b.parameters()]) for b in blocks]


def ideal(p: int, m: int, v: int = 1) -> str:
    """The ideal bubble of p stages, m micro-batches, v stages per rank, as a sum."""
    b = p - 1
    frac = b / (v * m + b)
    return (f"(p-1)/(m+p-1) = {b}/{m + b}" if v == 1 else
            f"(p-1)/(v*m+p-1) = {b}/{v * m + b}") + f" = {frac:.1%}"  # fmt: skip


def check_sizes(cfg: dict, world: int) -> tuple[dict, str]:
    per = max(2, cfg["VIRTUAL"])
    small = {**cfg, "HIDDEN": 16, "ROWS": 4, "BLOCKS_PER_STAGE": per}
    return small, (
        f"{world} stages (traced {cfg['STAGES']}), {cfg['MICROBATCHES']} micro-batches as "
        f"in CONFIG; {per} blocks of 16 features per stage and 4 rows per micro-batch instead "
        f"of {cfg['BLOCKS_PER_STAGE']} of {cfg['HIDDEN']} and {cfg['ROWS']} (the schedules do "
        "not depend on the sizes)"
    )


def _runs(cfg: dict, ctx, blocks: list, drop=None):
    """(name, stages, step) of each schedule that applies; says why one does not."""
    for name in SCHEDULES:
        try:
            stages, step = build(name, cfg, ctx, blocks, drop if name == "1F1B" else None)
        except ValueError as exc:
            ctx.say(f"  {name}: does not apply ({exc})")
            continue
        yield name, stages, step


def check(cfg: dict, ctx, fault: str | None) -> bool:
    blocks, x, y = make_model(cfg, ctx)
    drop = y[: cfg["ROWS"]] if fault == "drop-microbatch" else None
    ok, ref = True, None
    for name, stages, step in _runs(cfg, ctx, blocks, drop):
        step(x, y)
        grads = gradients(stages, blocks, ctx)
        if ref is None:
            ref = grads
            ok &= compare(ctx, f"{name} vs float64 autograd of the whole batch", grads,
                          reference_grads(cfg, ctx), False, 1e-5, "float32")  # fmt: skip
        else:
            ok &= compare(ctx, f"{name} vs GPipe", grads, ref, True, 0,
                          "the same micro-batches, gradients added in the same order")  # fmt: skip
    p, m, v = ctx.world, cfg["MICROBATCHES"], cfg["VIRTUAL"]
    tr = TRACED
    ctx.say(f"ideal bubble at p = {p}, m = {m}: GPipe and 1F1B {ideal(p, m)}, interleaved "
            f"1F1B (v = {v}) {ideal(p, m, v)}; traced on stage {tr['stage']} of "
            f"{tr['stages']}: {tr['bubble_fraction']:.1%} (ideal {tr['ideal_fraction']:.1%}); "
            "--bench measures it on GPUs")  # fmt: skip
    return ok


def bench(cfg: dict, ctx, steps: int) -> bool:
    p, m, v, rows = ctx.world, cfg["MICROBATCHES"], cfg["VIRTUAL"], cfg["ROWS"]
    blocks, x, y = make_model(cfg, ctx)
    ctx.say(f"bench pipeline_schedule: {p} ranks = stages (traced {cfg['STAGES']}; "
            f"{ctx.backend}, {str(ctx.dtype)[6:]}), {m} micro-batches of {rows} rows, "
            f"{cfg['BLOCKS_PER_STAGE']} blocks of {cfg['HIDDEN']} features per stage")  # fmt: skip
    per = cfg["BLOCKS_PER_STAGE"]
    mine = torch.nn.Sequential(*blocks[ctx.rank * per:(ctx.rank + 1) * per])
    xs = x.split(rows)
    dy = torch.randn_like(xs[0])

    def compute():  # this rank's forwards and backwards, no transfers: its busy time
        for xb, yb in zip(xs, y.split(rows)):
            inp = xb.detach().requires_grad_(ctx.rank > 0)
            out = mine(inp)
            if ctx.rank == p - 1:
                torch.nn.functional.mse_loss(out, yb).backward()
            else:
                out.backward(dy)

    busy = timed(ctx, compute, steps)  # (the busiest rank's: timed takes the slowest)
    ok, ref, ms = True, None, {}
    for name, stages, step in _runs(cfg, ctx, blocks):
        step(x, y)
        grads = gradients(stages, blocks, ctx)
        if ref is None:
            ref = grads
        else:
            ok &= compare(ctx, f"{name} vs GPipe", grads, ref, True, 0,
                          "the same micro-batches, gradients added in the same order")  # fmt: skip
        ms[name] = timed(ctx, lambda step=step: step(x, y), steps) * 1e3
    ctx.say(f"  median of {steps} steps, the slowest rank's time (ms):")
    ctx.say(f"  {'compute alone':<18} {busy * 1e3:9.3f}   (the busiest rank, no transfers)")
    for name, t in ms.items():
        bubble = max(0.0, 1 - busy * 1e3 / t)
        form = ideal(p, m, v if name == "interleaved 1F1B" else 1)
        ctx.say(f"  {name:<18} {t:9.3f}   bubble {bubble:6.1%}   ideal {form}")
    tr = TRACED
    ctx.say(f"  traced, stage {tr['stage']} of {tr['stages']}: step {tr['step_ns'] / 1e6:.3f}, "
            f"compute {tr['compute_ns'] / 1e6:.3f}, bubble {tr['bubble_fraction']:.1%} "
            f"(ideal {tr['ideal_fraction']:.1%}); per micro-batch: traced "
            f"{tr['compute_ns'] / 1e6 / tr['microbatches']:.3f}, here {busy * 1e3 / m:.3f}")
    ctx.say(f"  more micro-batches: --set MICROBATCHES={2 * m} (ideal {ideal(p, 2 * m)})")
    return ok
