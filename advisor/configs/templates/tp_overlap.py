# ---- strategy: tensor-parallel layers, collectives serialized vs chunked (async TP) ------
# LAYERS sequence-parallel MLP layers (Megatron-style) on the ranks: each rank holds
# TOKENS / world rows of the activations, a column shard W1 (HIDDEN x FFN / world) and a
# row shard W2 (FFN / world x HIDDEN); the same weights in every layer, each layer's rows
# RMS-normalized after it (as in a transformer block).
# serialized (what the trace shows: each collective on the compute stream, between the
#   GEMMs): all-gather the rows, relu(X @ W1) @ W2, reduce-scatter the partial sums.
# overlapped (async TP, chunked): the rows are cut in CHUNKS pieces; chunk c+1's
#   all-gather runs while chunk c's GEMMs do, and chunk c's reduce-scatter while chunk
#   c+1's GEMMs do (async_op=True: NCCL's stream beside the compute stream); each wait sits
#   where its chunk is consumed.
# fused (GPUs, PyTorch with symmetric memory): torch.ops.symm_mem.fused_all_gather_matmul
#   and fused_matmul_reduce_scatter, the ops torch.compile's async TP emits.
FAULTS = ("skip-chunk",)  # --fault skip-chunk: the last chunk's all-gather is never issued


def make_inputs(cfg: dict, ctx, rank: int | None = None, dtype=None) -> tuple:
    """(X rows, W1 column shard, W2 row shard) of `rank` (default: this rank), seeded by
    rank so that every rank can rebuild the whole layer for the float64 reference."""
    g = torch.Generator().manual_seed(2000 + (ctx.rank if rank is None else rank))
    dtype = dtype or ctx.dtype
    t, h, f = cfg["TOKENS"] // ctx.world, cfg["HIDDEN"], cfg["FFN"] // ctx.world

    def rand(rows, cols, scale):  # (scaled so the activations keep their size over layers)
        x = torch.randn(rows, cols, generator=g, dtype=torch.float64) * scale
        return x.to(ctx.device, dtype)

    return rand(t, h, 1.0), rand(h, f, h**-0.5), rand(f, h, (2 / cfg["FFN"]) ** 0.5)


def layer_serialized(x, w1, w2, ctx, chunks: int = 1, fault=None):
    full = x.new_empty(x.shape[0] * ctx.world, x.shape[1])
    ALL_GATHER(full, x)  # blocking: the GEMM waits for all of it
    part = torch.relu(full @ w1) @ w2  # this rank's partial sums of every row
    out = x.new_empty(x.shape)
    REDUCE_SCATTER(out, part)  # blocking: the next layer waits for all of it
    return out


def layer_overlapped(x, w1, w2, ctx, chunks: int, fault=None):
    pieces = x.chunk(chunks)  # rows of this rank, cut in chunks
    gathered = [x.new_zeros(p.shape[0] * ctx.world, p.shape[1]) for p in pieces]
    outs = [x.new_empty(p.shape) for p in pieces]

    def gather(c: int):
        if fault == "skip-chunk" and c == chunks - 1:
            return None
        return ALL_GATHER(gathered[c], pieces[c].contiguous(), async_op=True)

    ag, rs, parts = [gather(0)], [], []
    for c in range(chunks):
        if c + 1 < chunks:
            ag.append(gather(c + 1))  # the next chunk's all-gather starts now
        if ag[c] is not None:
            ag[c].wait()  # this chunk's rows are here
        parts.append(torch.relu(gathered[c] @ w1) @ w2)  # beside the next all-gather
        rs.append(REDUCE_SCATTER(outs[c], parts[c], async_op=True))  # beside the next GEMMs
    for work in rs:
        work.wait()  # the next layer consumes the rows
    return torch.cat(outs)


def _symm_mem_ops():
    """torch.ops.symm_mem's fused ops when this PyTorch has them (None elsewhere)."""
    ops = getattr(torch.ops, "symm_mem", None)
    try:
        return ops if ops is not None and hasattr(ops, "fused_matmul_reduce_scatter") else None
    except Exception:  # (an op namespace that fails to load)
        return None


def layer_fused(x, w1, w2, ctx, chunks: int = 1, fault=None):
    ops, name = _symm_mem_ops(), dist.group.WORLD.group_name
    _, (h,) = ops.fused_all_gather_matmul(x, [w1], 0, name)
    return ops.fused_matmul_reduce_scatter(torch.relu(h), w2, "sum", 0, name)


def rms_norm(x):  # per row, as in a transformer block: keeps the activations' size
    acc = x.float() if x.dtype in (torch.bfloat16, torch.float16) else x
    return x * torch.rsqrt(acc.pow(2).mean(-1, keepdim=True) + 1e-6).to(x.dtype)


def run(layer, cfg: dict, data: tuple, ctx) -> torch.Tensor:
    """LAYERS layers, each one's rows normalized before the next (what --bench times)."""
    x, w1, w2 = data
    for _ in range(cfg["LAYERS"]):
        x = rms_norm(layer(x, w1, w2, ctx, cfg["CHUNKS"]))
    return x


def reference(cfg: dict, ctx) -> tuple[list, list]:
    """Every layer's input and output rows of this rank, in float64 on this rank alone (the
    whole X, W1 and W2 rebuilt from every rank's seed)."""
    shards = [make_inputs(cfg, ctx, r, torch.float64) for r in range(ctx.world)]
    x = torch.cat([s[0] for s in shards])
    w1, w2 = torch.cat([s[1] for s in shards], 1), torch.cat([s[2] for s in shards])
    ins, outs = [], []
    for _ in range(cfg["LAYERS"]):
        y = torch.relu(x @ w1) @ w2
        ins.append(x.chunk(ctx.world)[ctx.rank])
        outs.append(y.chunk(ctx.world)[ctx.rank])
        x = rms_norm(y)
    return ins, outs


ROWS = ("the chunked GEMMs are row blocks of the serialized one: a GEMM library may sum K "
        "in another order for fewer rows")  # fmt: skip


def _tolerance(ctx) -> float:
    return 1e-5 if ctx.dtype == torch.float32 else 2e-2


def check_sizes(cfg: dict, world: int) -> tuple[dict, str]:
    chunks = cfg["CHUNKS"]
    small = {**cfg, "TOKENS": 4 * world * chunks, "HIDDEN": 32, "FFN": 16 * world}
    return small, (
        f"{cfg['LAYERS']} layer(s) and {chunks} chunk(s) as in CONFIG; TOKENS {small['TOKENS']}, "
        f"HIDDEN 32, FFN {small['FFN']} instead of {cfg['TOKENS']}, {cfg['HIDDEN']}, "
        f"{cfg['FFN']} (the schedules do not depend on the sizes)"
    )


def check(cfg: dict, ctx, fault: str | None) -> bool:
    """Every layer run on the same input rows (the float64 run's, rounded) and compared
    layer by layer: the rounding of one layer does not build up over the next ones."""
    _, w1, w2 = make_inputs(cfg, ctx)
    ins, outs = reference(cfg, ctx)
    ins = [x.to(ctx.dtype) for x in ins]
    ref = [layer_serialized(x, w1, w2, ctx) for x in ins]
    ok = compare(ctx, f"serialized vs float64, {len(ins)} layers", ref, outs, False, 1e-5,
                 "float32 GEMMs")  # fmt: skip
    got = [layer_overlapped(x, w1, w2, ctx, cfg["CHUNKS"], fault) for x in ins]
    ok &= compare(ctx, f"overlapped ({cfg['CHUNKS']} chunk(s)) vs serialized", got, ref, False,
                  _tolerance(ctx), ROWS)  # fmt: skip
    return ok


def bench(cfg: dict, ctx, steps: int) -> bool:
    w, t, h, f = ctx.world, cfg["TOKENS"], cfg["HIDDEN"], cfg["FFN"]
    data = make_inputs(cfg, ctx)
    ctx.say(f"bench tp_overlap: {w} ranks ({ctx.backend}, {str(ctx.dtype)[6:]}), "
            f"{cfg['LAYERS']} layers, each all-gather of {t // w} x {h} rows per rank, GEMMs "
            f"{t} x {h} x {f // w} and {t} x {f // w} x {h}, reduce-scatter; {cfg['CHUNKS']} "
            "chunks")  # fmt: skip
    x, w1, w2 = data
    ref = [layer_serialized(x, w1, w2, ctx)]  # (one layer: the others run the same code)
    got = [layer_overlapped(x, w1, w2, ctx, cfg["CHUNKS"])]
    ok = compare(ctx, "overlapped vs serialized, one layer", got, ref, False, _tolerance(ctx),
                 ROWS)  # fmt: skip
    layers = {"serialized": layer_serialized, f"overlapped ({cfg['CHUNKS']} chunks)":
              layer_overlapped}  # fmt: skip
    if _symm_mem_ops() is not None and ctx.device.type == "cuda":
        try:
            from torch.distributed import _symmetric_memory

            if hasattr(_symmetric_memory, "enable_symm_mem_for_group"):  # (PyTorch < 2.10)
                _symmetric_memory.enable_symm_mem_for_group(dist.group.WORLD.group_name)
            ok &= compare(ctx, "fused (symm_mem) vs serialized, one layer",
                          [layer_fused(x, w1, w2, ctx)], ref, False, _tolerance(ctx), ROWS)
            layers["fused (symm_mem)"] = layer_fused
        except Exception as exc:  # (no symmetric memory on this machine or build)
            ctx.say(f"  fused (symm_mem): not run ({type(exc).__name__}: {str(exc)[:80]})")
    else:
        ctx.say("  fused (symm_mem): not run (needs CUDA and a PyTorch with torch.ops.symm_mem)")
    full = x.new_zeros(t, h)

    def compute():  # (what run() computes, without the collectives)
        for _ in range(cfg["LAYERS"]):
            rms_norm((torch.relu(full @ w1) @ w2)[: t // w])

    def comm():
        for _ in range(cfg["LAYERS"]):
            ALL_GATHER(full, x)
            REDUCE_SCATTER(x.new_empty(x.shape), full)

    ms = {"compute alone": timed(ctx, compute, steps) * 1e3,
          "collectives alone": timed(ctx, comm, steps) * 1e3}  # fmt: skip
    for name, layer in layers.items():
        ms[name] = timed(ctx, lambda layer=layer: run(layer, cfg, data, ctx), steps) * 1e3
    ctx.say(f"  median of {steps} steps, the slowest rank's time (ms):")
    for name, v in ms.items():
        exposed = max(0.0, v - ms["compute alone"])
        tail = "" if "alone" in name else f"   exposed communication {exposed:.3f}" + (
            "   (before)" if name == "serialized" else "   (after)")  # fmt: skip
        ctx.say(f"  {name:<22} {v:9.3f}{tail}")
    tr = TRACED
    ctx.say(f"  traced, per instance of the range: compute {tr['compute_ns'] / 1e6:.3f}, "
            f"communication {tr['comm_ns'] / 1e6:.3f}, exposed {tr['exposed_comm_ns'] / 1e6:.3f}"
            f" over {tr['collectives']} collectives")  # fmt: skip
    # the collectives move TOKENS x HIDDEN, the GEMMs compute TOKENS x HIDDEN x FFN
    scale = cfg["LAYERS"] / max(1, tr["collectives"])  # (a layer per traced all-reduce)
    comm_ratio = tr["comm_ns"] / 1e6 * scale / max(ms["collectives alone"], 1e-6)
    compute_ratio = tr["compute_ns"] / 1e6 * scale / max(ms["compute alone"], 1e-6)
    step = w * cfg["CHUNKS"]
    tokens = max(step, round(t * comm_ratio / step) * step)
    ffn = max(w, round(f * compute_ratio * t / tokens / w) * w)
    ctx.say(f"  sizes whose times here would match the trace's (about linear): --set "
            f"TOKENS={tokens} --set FFN={ffn}")  # fmt: skip
    return ok
