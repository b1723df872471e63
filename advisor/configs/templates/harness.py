# ---- harness (shared by every emitted GEMM script) ---------------------------------------
# The strategy part above defines `gemm(a, b, cfg) -> c`. CONFIG holds the knobs chosen by
# advisor for the trace's shape; --m/--n/--k re-run advisor's planner (the section above)
# for another size (--keep-knobs: reuse CONFIG as it is); --tune searches around the knobs.
import json  # noqa: E402

KNOBS = ("BLOCK_M", "BLOCK_N", "BLOCK_K", "num_warps", "num_stages", "GROUP_M", "SPLITS",
         "NUM_PROGS", "GLUON", "SK_TILES")  # fmt: skip


def replan(m: int, n: int, k: int) -> dict:
    """The knobs advisor's planner chooses for this strategy at M x N x K on GPU."""
    cfg = CHOOSERS[CONFIG["strategy"]](Problem(m, n, k, GPU))
    return {key: cfg[key] for key in KNOBS if key in cfg and key in CONFIG}


def _resident(cfg: dict) -> int:
    """SMs x resident CTAs of a candidate's tile (0: does not fit)."""
    c = tile_ctas_per_sm(cfg["BLOCK_M"], cfg["BLOCK_N"], cfg["BLOCK_K"], cfg["num_warps"],
                         cfg["num_stages"], GPU)  # fmt: skip
    return c * GPU.sm_count


def tune_candidates(cfg: dict) -> list[dict]:
    """The chosen knobs first, then neighbours: the planner's tiles x stages 3/4 x warps
    4/8, stages and warps alone, SPLITS halved and doubled, the other kernel (GLUON), the
    other Stream-K policies (SK_TILES);
    NUM_PROGS (persistent and Stream-K) is each candidate's resident CTAs, and candidates
    that do not fit are dropped (Stream-K waits on CTAs that must all be resident)."""
    out: list[dict] = [dict(cfg)]

    def add(**change) -> None:
        c = {**cfg, **change}
        slots = _resident(c)
        if slots == 0:
            return
        if "NUM_PROGS" in cfg and "NUM_PROGS" not in change:
            c["NUM_PROGS"] = min(slots, cfg["NUM_PROGS"]) if c == cfg else slots
        if c not in out:
            out.append(c)

    for bm, bn, bk, warps, stages, *_ in CANDIDATES:
        if data_parallel_only(bm, bn):  # (Gluon only, its table row: elsewhere 128 x 256)
            if cfg.get("GLUON"):
                add(BLOCK_M=bm, BLOCK_N=bn, BLOCK_K=bk, num_stages=stages, num_warps=warps)
            continue
        for stages in (3, 4):
            for warps in (4, 8):
                add(BLOCK_M=bm, BLOCK_N=bn, BLOCK_K=bk, num_stages=stages, num_warps=warps)
    for stages in (cfg["num_stages"] - 1, cfg["num_stages"] + 1):
        if 2 <= stages <= 6:
            add(num_stages=stages)
    if "SPLITS" in cfg:
        for splits in (cfg["SPLITS"] // 2, cfg["SPLITS"] * 2):
            if splits >= 1:
                add(SPLITS=splits)
    if "GLUON" in cfg:  # the other kernel (Gluon on Hopper / Triton) with the same knobs
        add(GLUON=1 - cfg["GLUON"])
    if "SK_TILES" in cfg:  # the other Stream-K policies (SK_POLICIES) with the same knobs
        for policy in SK_POLICIES:
            add(SK_TILES=policy)
    return out


def _inputs(m: int, n: int, k: int, dtype: torch.dtype, device: str, seed: int):
    g = torch.Generator(device="cpu").manual_seed(seed)
    a = torch.randn(m, k, generator=g).to(device=device, dtype=dtype)
    b = torch.randn(k, n, generator=g).to(device=device, dtype=dtype)
    return a, b


def _check(m, n, k, dtype, device, tol) -> bool:
    ok = True
    for seed in (0, 1):  # fresh random inputs each time
        a, b = _inputs(m, n, k, dtype, device, seed)
        c = gemm(a, b, CONFIG)
        ref = a.double() @ b.double()
        err = float((c.double() - ref).norm() / ref.norm())
        bad = not (err <= tol)  # NaN fails too
        ok &= not bad
        print(f"check seed={seed} M={m} N={n} K={k} {str(dtype)[6:]}: rel. error {err:.2e} "
              f"(tolerance {tol:.0e}) {'FAIL' if bad else 'ok'}")
    return ok


def _bench(m, n, k, dtype, rounds: int = 3) -> None:
    """Median time per call (do_bench), config and torch.matmul interleaved over rounds;
    the median of the rounds is reported with the spread (max - min) as the noise."""
    import statistics

    import triton.testing

    a, b = _inputs(m, n, k, dtype, "cuda", 0)
    flop = 2.0 * m * n * k
    runs = {"mine": [], "torch": []}
    for _ in range(rounds):
        runs["mine"].append(triton.testing.do_bench(
            lambda: gemm(a, b, CONFIG), warmup=100, rep=400, return_mode="median"))
        runs["torch"].append(triton.testing.do_bench(
            lambda: torch.matmul(a, b), warmup=100, rep=400, return_mode="median"))
    mine, base = statistics.median(runs["mine"]), statistics.median(runs["torch"])
    spread = {key: max(v) - min(v) for key, v in runs.items()}
    print(f"bench M={m} N={n} K={k} {str(dtype)[6:]} (median of {rounds} do_bench medians, ms):")
    print(f"  {CONFIG['strategy']:<20} {mine:8.4f} ms  {flop / mine / 1e9:8.1f} TFLOP/s"
          f"  (spread {spread['mine']:.4f} ms)")
    print(f"  {'torch.matmul':<20} {base:8.4f} ms  {flop / base / 1e9:8.1f} TFLOP/s"
          f"  (spread {spread['torch']:.4f} ms)")
    # per call above includes the Python launch (most for short GEMMs: the Gluon kernels'
    # descriptors and arguments cost ~40 us more than a Triton launch); inside a CUDA graph
    # the launch is gone and the GPU time is left
    try:
        graph = {key: statistics.median(triton.testing.do_bench_cudagraph(
            fn, rep=100, return_mode="median") for _ in range(rounds)) for key, fn in
            (("mine", lambda: gemm(a, b, CONFIG)), ("torch", lambda: torch.matmul(a, b)))}
        print(f"  in a CUDA graph (GPU time): {CONFIG['strategy']} {graph['mine']:.4f} ms, "
              f"torch.matmul {graph['torch']:.4f} ms ({graph['torch'] / graph['mine']:.2f}x)")
    except Exception as exc:  # (a capture this GPU, driver or Triton build cannot do)
        print(f"  in a CUDA graph: not measured ({type(exc).__name__}: {str(exc)[:80]})")
    trace_ns = CONFIG.get("trace_kernel_ns")
    if trace_ns and (m, n, k) == (CONFIG["M"], CONFIG["N"], CONFIG["K"]):
        ms = trace_ns / 1e6
        print(f"  {'kernel in the trace':<20} {ms:8.4f} ms  {flop / ms / 1e9:8.1f} TFLOP/s"
              f"  -> speed-up {ms / mine:.2f}x")


def _tune(m, n, k, dtype, tol) -> None:
    """Time every candidate that computes the right result; print the winner as --set flags
    and as JSON (CONFIG stays the default)."""
    import triton.testing

    a, b = _inputs(m, n, k, dtype, "cuda", 0)
    ref = (a.float() @ b.float()).double()
    flop = 2.0 * m * n * k
    results = []
    candidates = tune_candidates(CONFIG)
    print(f"tune M={m} N={n} K={k} {str(dtype)[6:]}: {len(candidates)} candidates "
          "(the chosen config first; do_bench medians)")
    # a warm GPU first: the first timings of a cold one run at lower clocks
    triton.testing.do_bench(lambda: gemm(a, b, CONFIG), warmup=200, rep=500)
    for i, cfg in enumerate(candidates):
        label = " ".join(f"{key}={cfg[key]}" for key in KNOBS if key in cfg)
        try:
            err = float((gemm(a, b, cfg).double() - ref).norm() / ref.norm())
            if not err <= tol:
                print(f"  {label}: wrong result (rel. error {err:.1e}), skipped")
                continue
            ms = triton.testing.do_bench(lambda cfg=cfg: gemm(a, b, cfg), warmup=25, rep=100,
                                         return_mode="median")  # fmt: skip
        except Exception as exc:  # e.g. out of shared memory for this tile
            print(f"  {label}: {type(exc).__name__}, skipped")
            continue
        results.append((ms, i, cfg))
        print(f"  {ms:8.4f} ms {flop / ms / 1e9:7.1f} TFLOP/s  {label}"
              + ("  (chosen)" if i == 0 else ""))
    if not results:
        sys.exit("--tune: no candidate ran")
    ms, i, best = min(results, key=lambda r: r[0])
    chosen = next((r[0] for r in results if r[1] == 0), None)
    if i != 0 and chosen is not None:  # the two again, interleaved: the gain is not noise
        rounds = {"best": [], "chosen": []}
        for _ in range(3):
            for key, cfg in (("best", best), ("chosen", CONFIG)):
                rounds[key].append(triton.testing.do_bench(
                    lambda cfg=cfg: gemm(a, b, cfg), warmup=50, rep=200, return_mode="median"))
        ms, chosen = (sorted(rounds[key])[1] for key in ("best", "chosen"))
        print(f"re-timed, interleaved (median of 3): fastest {ms:.4f} ms, chosen {chosen:.4f} ms")
        if ms >= chosen:  # its lead was noise: the chosen config stays
            ms, i, best = chosen, 0, CONFIG
    flags = " ".join(f"--set {key}={best[key]}" for key in KNOBS
                     if key in best and best[key] != CONFIG.get(key))  # fmt: skip
    if i == 0 or not flags:
        print("winner: the chosen config")
    else:
        gain = f" ({chosen / ms:.2f}x the chosen config)" if chosen else ""
        print(f"winner: {flags}{gain}")
    print(json.dumps({"M": m, "N": n, "K": k, "winner": {key: best[key] for key in KNOBS
                      if key in best}, "ms": round(ms, 5),
                      "chosen_ms": None if chosen is None else round(chosen, 5)}))  # fmt: skip


def main() -> None:
    p = argparse.ArgumentParser(description=f"{CONFIG['strategy']} GEMM emitted by advisor")
    p.add_argument("--m", type=int, default=CONFIG["M"])
    p.add_argument("--n", type=int, default=CONFIG["N"])
    p.add_argument("--k", type=int, default=CONFIG["K"])
    p.add_argument("--dtype", choices=["bf16", "fp16", "fp32"], default=None,
                   help="default bf16 on a GPU, fp32 under TRITON_INTERPRET=1")
    p.add_argument("--check", action="store_true", help="compare with float64 matmul")
    p.add_argument("--bench", action="store_true", help="time with triton.testing.do_bench")
    p.add_argument("--tune", action="store_true",
                   help="time the knobs' neighbours on this GPU, print the fastest")
    p.add_argument("--keep-knobs", action="store_true",
                   help="with --m/--n/--k: keep CONFIG's knobs instead of re-planning")
    p.add_argument("--set", action="append", default=[], metavar="KNOB=INT",
                   help="override a knob of CONFIG, e.g. --set BLOCK_M=64 (repeatable)")
    args = p.parse_args()
    if (args.m, args.n, args.k) != (CONFIG["M"], CONFIG["N"], CONFIG["K"]) and not args.keep_knobs:
        new = replan(args.m, args.n, args.k)
        changed = {key: v for key, v in new.items() if CONFIG[key] != v}
        CONFIG.update(new)
        print(f"re-planned for M={args.m} N={args.n} K={args.k}: "
              + (" ".join(f"{key}={v}" for key, v in changed.items()) or "same knobs"))
    _apply_sets(args.set)
    device = _device()
    name = args.dtype or ("bf16" if device == "cuda" else "fp32")
    if device == "cpu" and name != "fp32":
        sys.exit("on the CPU interpreter only --dtype fp32 is exact; 16-bit runs need a GPU")
    dtype = {"bf16": torch.bfloat16, "fp16": torch.float16, "fp32": torch.float32}[name]
    tol = {"bf16": 1e-2, "fp16": 5e-3, "fp32": 2e-3}[name]
    if not (args.check or args.bench or args.tune):
        args.check = True
    if args.check and not _check(args.m, args.n, args.k, dtype, device, tol):
        sys.exit(1)
    if (args.bench or args.tune) and device != "cuda":
        sys.exit(f"--{'bench' if args.bench else 'tune'} needs a CUDA GPU")
    if args.tune:
        _tune(args.m, args.n, args.k, dtype, tol)
    if args.bench:
        _bench(args.m, args.n, args.k, dtype)


if __name__ == "__main__":
    main()
