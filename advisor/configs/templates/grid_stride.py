# ---- persistent grid-stride loop for a non-GEMM kernel with a wave tail ------------------
# The traced kernel gives each CTA one large, fixed piece of work, so its grid of
# TRACE_GRID CTAs runs in TRACE_GRID / SLOTS waves and the last, partial wave leaves SMs
# idle. A persistent kernel launches exactly SLOTS programs (SMs x CTAs/SM: the same
# occupancy as the traced block size) and lets every program walk small blocks of BLOCK
# elements with a stride of NUM_PROGS: the work is cut finer than the grid, so the GPU
# finishes within one block's time of perfect balance.
#
# This script runs both on a stand-in workload of the traced shape: pieces of PER_CTA
# float32 elements, each element put through WORK multiply-adds (`_body`). The stand-in
# compiles to its own register count, so on the GPU --bench sizes it by its own occupancy:
# as many pieces as keep the traced number of waves (TRACE_GRID / SLOTS), and NUM_PROGS =
# SMs x its resident CTAs. To apply it, move your kernel's per-element (or per-row) work
# into `_body` and its indexing into the loop of `grid_stride`; keep the loop covering
# every block exactly once.
@triton.jit
def _body(x, WORK: tl.constexpr):
    y = x
    for _ in range(WORK):
        y = y * 0.999 + 0.001
    return y


@triton.jit
def one_cta_per_piece(x_ptr, y_ptr, n, PER_CTA: tl.constexpr, BLOCK: tl.constexpr,
                      WORK: tl.constexpr):  # fmt: skip
    """The traced layout: CTA i owns elements [i * PER_CTA, (i + 1) * PER_CTA)."""
    base = tl.program_id(0).to(tl.int64) * PER_CTA
    for start in range(0, PER_CTA, BLOCK):
        local = start + tl.arange(0, BLOCK)
        offs = base + local
        mask = (local < PER_CTA) & (offs < n)
        x = tl.load(x_ptr + offs, mask=mask)
        tl.store(y_ptr + offs, _body(x, WORK), mask=mask)


@triton.jit
def grid_stride(x_ptr, y_ptr, n, BLOCK: tl.constexpr, WORK: tl.constexpr,
                NUM_PROGS: tl.constexpr):  # fmt: skip
    """Persistent: program p handles blocks p, p + NUM_PROGS, p + 2 NUM_PROGS, ..."""
    blocks = tl.cdiv(n, BLOCK)
    for block in range(tl.program_id(0), blocks, NUM_PROGS):
        offs = block * BLOCK + tl.arange(0, BLOCK)  # (int32: run_persistent checks n)
        mask = offs < n
        x = tl.load(x_ptr + offs, mask=mask)
        tl.store(y_ptr + offs, _body(x, WORK), mask=mask)


def run_traced(x: torch.Tensor, cfg: dict, y: torch.Tensor | None = None) -> torch.Tensor:
    y = torch.empty_like(x) if y is None else y
    grid = (triton.cdiv(x.numel(), cfg["PER_CTA"]),)
    one_cta_per_piece[grid](x, y, x.numel(), PER_CTA=cfg["PER_CTA"], BLOCK=cfg["BLOCK"],
                            WORK=cfg["WORK"], num_warps=cfg["num_warps"])  # fmt: skip
    return y


def run_persistent(x: torch.Tensor, cfg: dict, y: torch.Tensor | None = None) -> torch.Tensor:
    y = torch.empty_like(x) if y is None else y
    if x.numel() >= 2**31 - cfg["BLOCK"]:
        sys.exit("grid_stride indexes with int32: split inputs of 2^31 elements or more")
    progs = min(cfg["NUM_PROGS"], triton.cdiv(x.numel(), cfg["BLOCK"]))
    grid_stride[(progs,)](x, y, x.numel(), BLOCK=cfg["BLOCK"], WORK=cfg["WORK"],
                          NUM_PROGS=progs, num_warps=cfg["num_warps"])  # fmt: skip
    return y


def reference(x: torch.Tensor, work: int) -> torch.Tensor:
    y = x.double()
    for _ in range(work):
        y = y * 0.999 + 0.001
    return y


# on the CPU (Triton's interpreter, about a million times slower than the GPU) --check runs
# at most this many programs over a few blocks each, unless --n says otherwise
INTERPRET_PROGS = 4
INTERPRET_BLOCKS = 16


def _check(n: int | None, device: str) -> bool:
    cfg = dict(CONFIG)
    if n is None:
        n = CONFIG["TRACE_GRID"] * CONFIG["PER_CTA"]
        if device == "cpu":  # the traced size under the interpreter takes many minutes
            cfg["NUM_PROGS"] = min(cfg["NUM_PROGS"], INTERPRET_PROGS)
            small = cfg["BLOCK"] * INTERPRET_BLOCKS + 3  # (+3: a partly filled last block)
            print(f"check on the CPU (Triton interpreter): {small} elements over "
                  f"{cfg['NUM_PROGS']} programs instead of the traced {n} (--n N to choose)")
            n = min(n, small)
    ok = True
    for seed in (0, 1):
        g = torch.Generator(device="cpu").manual_seed(seed)
        x = torch.randn(n, generator=g).to(device)
        want = reference(x, cfg["WORK"])
        for label, fn in (("one CTA per piece", run_traced), ("grid-stride", run_persistent)):
            got = fn(x, cfg, torch.full_like(x, float("nan"))).double()  # (unwritten: NaN)
            err = float((got - want).norm() / max(float(want.norm()), 1e-30))
            bad = not (err <= 1e-5)  # NaN fails too
            ok &= not bad
            print(f"check seed={seed} n={n} {label}: rel. error {err:.2e} "
                  f"{'FAIL' if bad else 'ok'}")  # fmt: skip
    return ok


def resident_slots(kernel, cfg: dict) -> int:
    """SMs x resident CTAs of a compiled kernel: the CUDA occupancy limits of warps,
    registers (allocated per warp in units of 256) and blocks (GPU facts in CONFIG)."""
    warps = cfg["num_warps"]
    per_warp = -(-max(kernel.n_regs, 1) * 32 // 256) * 256
    by_regs = (cfg["REGISTERS_PER_SM"] // per_warp) // warps
    resident = min(cfg["MAX_WARPS_PER_SM"] // warps, by_regs, cfg["MAX_BLOCKS_PER_SM"])
    return max(resident, 1) * cfg["SMS"]


def _stand_in_sizes(cfg: dict) -> tuple[int, int]:
    """(elements, programs) of the stand-in on this GPU: pieces that keep the traced waves
    over its own slots, and its own slots for the persistent loop."""
    x = torch.zeros(cfg["BLOCK"], device="cuda")
    traced = one_cta_per_piece[(1,)](x, x, x.numel(), PER_CTA=cfg["BLOCK"], BLOCK=cfg["BLOCK"],
                                     WORK=cfg["WORK"], num_warps=cfg["num_warps"])  # fmt: skip
    persistent = grid_stride[(1,)](x, x, x.numel(), BLOCK=cfg["BLOCK"], WORK=cfg["WORK"],
                                   NUM_PROGS=1, num_warps=cfg["num_warps"])  # fmt: skip
    waves = cfg["TRACE_GRID"] / cfg["SLOTS"]
    pieces = max(1, round(waves * resident_slots(traced, cfg)))
    return pieces * cfg["PER_CTA"], resident_slots(persistent, cfg)


def _bench(n: int | None, rounds: int = 3) -> None:
    import statistics

    import triton.testing

    sized, progs = _stand_in_sizes(CONFIG)
    n = n or sized
    cfg = {**CONFIG, "NUM_PROGS": progs}
    x = torch.randn(n, device="cuda")
    runs = {"traced": [], "persistent": []}
    for _ in range(rounds):
        runs["traced"].append(triton.testing.do_bench(
            lambda: run_traced(x, cfg), warmup=50, rep=300, return_mode="median"))
        runs["persistent"].append(triton.testing.do_bench(
            lambda: run_persistent(x, cfg), warmup=50, rep=300, return_mode="median"))
    traced, persistent = (statistics.median(runs[k]) for k in ("traced", "persistent"))
    pieces = triton.cdiv(n, cfg["PER_CTA"])
    print(f"bench n={n} WORK={cfg['WORK']} (median of {rounds} do_bench medians, ms); the "
          f"traced kernel: {cfg['TRACE_GRID']} CTAs over {cfg['SLOTS']} slots = "
          f"{cfg['TRACE_GRID'] / cfg['SLOTS']:.3f} waves")
    print(f"  one CTA per piece  {traced:8.4f} ms  ({pieces} CTAs of the stand-in)")
    print(f"  grid-stride        {persistent:8.4f} ms  ({min(progs, pieces)} programs = its "
          f"resident CTAs, blocks of {cfg['BLOCK']})  -> speed-up {traced / persistent:.2f}x")
    spread = {k: max(v) - min(v) for k, v in runs.items()}
    print(f"  spread: {spread['traced']:.4f} / {spread['persistent']:.4f} ms")


def main() -> None:
    p = argparse.ArgumentParser(description="grid-stride (persistent) kernel emitted by advisor")
    p.add_argument("--n", type=int, default=None,
                   help="elements (default: --check the traced grid x PER_CTA, on the CPU "
                   f"{INTERPRET_BLOCKS} blocks; --bench as "
                   "many pieces as keep the traced waves on the stand-in's occupancy)")
    p.add_argument("--check", action="store_true", help="compare both with float64 torch")
    p.add_argument("--bench", action="store_true", help="time both with do_bench")
    p.add_argument("--set", action="append", default=[], metavar="KNOB=INT",
                   help="override a knob of CONFIG, e.g. --set WORK=64 (repeatable)")
    args = p.parse_args()
    _apply_sets(args.set)
    device = _device()
    if not (args.check or args.bench):
        args.check = True
    if args.check and not _check(args.n, device):
        sys.exit(1)
    if args.bench:
        if device != "cuda":
            sys.exit("--bench needs a CUDA GPU")
        _bench(args.n)


if __name__ == "__main__":
    main()
