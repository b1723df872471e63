# ---- launch-bound chain: eager vs CUDA graph vs torch.compile(mode="reduce-overhead") ----
# A runnable stand-in for the measured chain: CHAIN_OPS tiny elementwise kernels on a tensor
# of CHAIN_ELEMENTS floats. It times the three ways of launching the same chain, so the
# saving can be seen on this GPU before changing the real code. To apply it to the real
# code, wrap the region that launches the chain (`step` below) the same way:
#
#     g = torch.cuda.CUDAGraph()
#     static_out = step(static_in)              # warm up on a side stream first
#     with torch.cuda.graph(g):
#         static_out = step(static_in)
#     ...; static_in.copy_(new_input); g.replay()  # each iteration: one launch
#
#     step = torch.compile(step, mode="reduce-overhead")  # same, captured by Inductor
import argparse  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402


def step(x: torch.Tensor) -> torch.Tensor:
    for _ in range(CONFIG["CHAIN_OPS"] // 2):
        x = x * 1.0001
        x = x + 0.001
    return x


def _time(fn, reps: int) -> float:
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(reps):
        fn()
    torch.cuda.synchronize()
    return (time.perf_counter() - t0) / reps * 1e6


def main() -> None:
    p = argparse.ArgumentParser(description="CUDA graph / reduce-overhead demo for a chain")
    p.add_argument("--reps", type=int, default=50)
    p.add_argument("--no-compile", action="store_true", help="skip torch.compile")
    args = p.parse_args()
    if not torch.cuda.is_available():
        sys.exit("needs a CUDA GPU: CUDA graphs capture GPU launches")
    x = torch.randn(CONFIG["CHAIN_ELEMENTS"], device="cuda")
    eager_us = _time(lambda: step(x), args.reps)
    static_in = x.clone()
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        step(static_in)
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        static_out = step(static_in)
    graph_us = _time(graph.replay, args.reps)
    torch.testing.assert_close(static_out, step(static_in))
    print(f"chain of {CONFIG['CHAIN_OPS']} kernels: eager {eager_us:.1f} us, "
          f"CUDA graph {graph_us:.1f} us per chain")
    if not args.no_compile:
        compiled = torch.compile(step, mode="reduce-overhead")
        for _ in range(3):
            compiled(x)
        comp_us = _time(lambda: compiled(x), args.reps)
        print(f"torch.compile(mode='reduce-overhead'): {comp_us:.1f} us per chain")
    launches, gaps = CONFIG["TRACE_LAUNCHES"], CONFIG["TRACE_OVERHEAD_NS"]
    traced = [f"{launches} launches" if launches is not None else "",
              f"{gaps / 1e3:.1f} us of launch gaps" if gaps is not None else ""]
    print(f"trace, per {CONFIG['TRACE_PER']}: {', '.join(t for t in traced if t) or '-'}; "
          f"est. saving {CONFIG['TRACE_SAVING_NS'] / 1e3:.1f} us")


if __name__ == "__main__":
    main()
