# ---- harness (shared by every emitted GEMM script) ---------------------------------------
# The strategy part above defines `gemm(a, b, cfg) -> c`. CONFIG holds the knobs chosen by
# advisor for the trace's shape; --m/--n/--k run the same strategy at another size.
import argparse  # noqa: E402
import sys  # noqa: E402


def _device() -> str:
    if torch.cuda.is_available():
        return "cuda"
    if os.environ.get("TRITON_INTERPRET") == "1":
        return "cpu"  # Triton's interpreter: numerics only, no timing
    sys.exit("needs a CUDA GPU (or TRITON_INTERPRET=1 to check numerics on the CPU)")


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
    trace_ns = CONFIG.get("trace_kernel_ns")
    if trace_ns and (m, n, k) == (CONFIG["M"], CONFIG["N"], CONFIG["K"]):
        ms = trace_ns / 1e6
        print(f"  {'kernel in the trace':<20} {ms:8.4f} ms  {flop / ms / 1e9:8.1f} TFLOP/s"
              f"  -> speed-up {ms / mine:.2f}x")


def main() -> None:
    p = argparse.ArgumentParser(description=f"{CONFIG['strategy']} GEMM emitted by advisor")
    p.add_argument("--m", type=int, default=CONFIG["M"])
    p.add_argument("--n", type=int, default=CONFIG["N"])
    p.add_argument("--k", type=int, default=CONFIG["K"])
    p.add_argument("--dtype", choices=["bf16", "fp16", "fp32"], default=None,
                   help="default bf16 on a GPU, fp32 under TRITON_INTERPRET=1")
    p.add_argument("--check", action="store_true", help="compare with float64 matmul")
    p.add_argument("--bench", action="store_true", help="time with triton.testing.do_bench")
    p.add_argument("--set", action="append", default=[], metavar="KNOB=INT",
                   help="override a knob of CONFIG, e.g. --set BLOCK_M=64 (repeatable)")
    args = p.parse_args()
    for item in args.set:
        key, _, value = item.partition("=")
        if key not in CONFIG or not value.lstrip("-").isdigit():
            sys.exit(f"--set {item!r}: expected KNOB=INT with KNOB one of {sorted(CONFIG)}")
        CONFIG[key] = int(value)
    device = _device()
    name = args.dtype or ("bf16" if device == "cuda" else "fp32")
    if device == "cpu" and name != "fp32":
        sys.exit("on the CPU interpreter only --dtype fp32 is exact; 16-bit runs need a GPU")
    dtype = {"bf16": torch.bfloat16, "fp16": torch.float16, "fp32": torch.float32}[name]
    tol = {"bf16": 1e-2, "fp16": 5e-3, "fp32": 2e-3}[name]
    if not (args.check or args.bench):
        args.check = True
    if args.check and not _check(args.m, args.n, args.k, dtype, device, tol):
        sys.exit(1)
    if args.bench:
        if device != "cuda":
            sys.exit("--bench needs a CUDA GPU")
        _bench(args.m, args.n, args.k, dtype)


if __name__ == "__main__":
    main()
