# ---- harness (shared by every emitted multi-GPU script) ---------------------------------
# The strategy part above defines check(cfg, ctx, fault) and bench(cfg, ctx, steps), each
# returning True when its comparisons held, check_sizes(cfg, world) (the small sizes --check
# runs and the sentence that says so) and FAULTS. This part starts the ranks (itself, or
# under torchrun), compares tensors and times schedules.
import datetime  # noqa: E402
import multiprocessing  # noqa: E402
import socket  # noqa: E402
import statistics  # noqa: E402
import warnings  # noqa: E402
from dataclasses import dataclass  # noqa: E402

# torch >= 2.10 names the single-tensor collectives *_single (the old names warn)
ALL_GATHER = getattr(dist, "all_gather_single", None) or dist.all_gather_into_tensor
REDUCE_SCATTER = getattr(dist, "reduce_scatter_single", None) or dist.reduce_scatter_tensor


@dataclass
class Ctx:
    """One rank: its number, the world size, its device, the dtype the schedules run in."""

    rank: int
    world: int
    device: torch.device
    dtype: torch.dtype
    backend: str

    def say(self, text: str) -> None:
        if self.rank == 0:
            print(text, flush=True)

    def sync(self) -> None:
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)


def _all_ranks(ctx: Ctx, values: list[float], op) -> list[float]:
    """values reduced over the ranks with op (MIN, MAX)."""
    t = torch.tensor(values, dtype=torch.float64, device=ctx.device)
    dist.all_reduce(t, op=op)
    return t.tolist()


def compare(ctx: Ctx, label: str, got: list, ref: list, bitwise: bool, tol: float,
            why: str) -> bool:  # fmt: skip
    """Tensors of one schedule against another's, on every rank. bitwise: every bit must
    match (the same reductions in the same order); else the norm-wise relative error
    ||got - ref|| / ||ref|| (over all tensors, in float64) must be <= tol. Prints one line
    (rank 0) for all ranks, ending in ok or FAIL; returns whether it held on every rank."""
    same = len(got) == len(ref) and all(
        a.shape == b.shape and torch.equal(a, b) for a, b in zip(got, ref))  # fmt: skip
    num = sum(float((a.double() - b.double()).norm() ** 2) for a, b in zip(got, ref))
    den = sum(float(b.double().norm() ** 2) for b in ref)
    err = (num / den) ** 0.5 if den > 0 else (0.0 if num == 0 else float("inf"))
    if len(got) != len(ref):
        err = float("inf")
    ok = same if bitwise else err <= tol  # (a NaN error fails)
    ok_all, same_all = (bool(v) for v in _all_ranks(ctx, [ok, same], dist.ReduceOp.MIN))
    (err_all,) = _all_ranks(ctx, [err if err == err else float("inf")], dist.ReduceOp.MAX)
    n = f"{len(ref)} tensor{'s' * (len(ref) != 1)} per rank"
    if bitwise:
        rule = f"bit for bit required ({why})"
        seen = "bit for bit" if same_all else f"NOT bit for bit (rel. error {err_all:.1e})"
    else:
        rule = f"tolerance {tol:.0e} ({why})"
        seen = f"rel. error {err_all:.1e}" + (", bit for bit" if same_all else "")
    ctx.say(f"check {label}: {n}, {seen}; {rule} {'ok' if ok_all else 'FAIL'}")
    return ok_all


def timed(ctx: Ctx, fn, steps: int, warmup: int = 3) -> float:
    """Seconds per call of fn(): every rank starts together (barrier), the slowest rank's
    time counts (the step ends when the last rank is done); the median over steps."""
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(steps):
        ctx.sync()
        dist.barrier()
        ctx.sync()
        t0 = time.perf_counter()
        fn()
        ctx.sync()
        times.append(time.perf_counter() - t0)
    return statistics.median(_all_ranks(ctx, times, dist.ReduceOp.MAX))


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


CTX: Ctx | None = None  # this process's rank (set by _rank)


def _rank(job: str, cfg: dict, args: dict, rank: int, world: int, port: int | None) -> None:
    """One rank: join the group (gloo on the CPU for --check, NCCL on a GPU for --bench),
    run the job, leave; exit 1 when a comparison failed."""
    global CTX
    warnings.filterwarnings("ignore", category=FutureWarning)  # (renamed collectives)
    if port is not None:
        os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    if job == "check" or args["cpu"]:
        backend, device, dtype = "gloo", torch.device("cpu"), torch.float32
        torch.set_num_threads(1)  # (the ranks share the CPU)
    else:
        local = int(os.environ.get("LOCAL_RANK", rank))
        backend, device, dtype = "nccl", torch.device("cuda", local), torch.bfloat16
        torch.cuda.set_device(device)
    more = {"device_id": device} if backend == "nccl" else {}
    timeout = datetime.timedelta(seconds=args["timeout"])
    dist.init_process_group(backend, rank=rank, world_size=world, timeout=timeout, **more)
    CTX = Ctx(rank, world, device, dtype, backend)
    try:
        if job == "check":
            ok = check(cfg, CTX, args["fault"])
        else:
            ok = bench(cfg, CTX, args["steps"])
    finally:
        dist.destroy_process_group()
    if not ok:
        sys.exit(1)


def launch(job: str, cfg: dict, args: dict, world: int) -> bool:
    """Run job on `world` ranks: in this process under torchrun (RANK, WORLD_SIZE set),
    else in `world` processes started here on a free loopback port (forked for the CPU
    check on Linux, spawned for GPUs). True when every rank exited 0; when one fails, the
    others are stopped (they would wait for it in a collective)."""
    if "RANK" in os.environ and "WORLD_SIZE" in os.environ:
        try:
            _rank(job, cfg, args, int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"]), None)
        except SystemExit as exc:
            return not exc.code
        return True
    cpu = job == "check" or args["cpu"]
    method = "fork" if cpu and sys.platform == "linux" else "spawn"  # (no CUDA in a fork)
    mp = multiprocessing.get_context(method)
    port = _free_port()
    procs = [mp.Process(target=_rank, args=(job, cfg, args, r, world, port))
             for r in range(world)]  # fmt: skip
    for p in procs:
        p.start()
    while any(p.is_alive() for p in procs):
        if any(p.exitcode not in (None, 0) for p in procs):
            for p in procs:
                p.terminate()
            break
        time.sleep(0.05)
    for p in procs:
        p.join()
    return all(p.exitcode == 0 for p in procs)


def main() -> None:
    p = argparse.ArgumentParser(description=f"{CONFIG['strategy']} reference emitted by advisor")
    p.add_argument("--check", action="store_true",
                   help="compare the schedules' tensors on the CPU (gloo, small sizes)")
    p.add_argument("--bench", action="store_true",
                   help="time the schedules with NCCL on the visible GPUs (>= 2)")
    p.add_argument("--nproc", type=int, default=None,
                   help="ranks (default: 2 for --check, the visible GPUs for --bench)")
    p.add_argument("--steps", type=int, default=20, help="--bench: timed steps per schedule")
    p.add_argument("--set", action="append", default=[], metavar="KEY=INT",
                   help="override a size of CONFIG, e.g. --set BUCKETS=8 (repeatable)")
    p.add_argument("--timeout", type=int, default=120, help=argparse.SUPPRESS)
    p.add_argument("--fault", choices=FAULTS, default=None, help=argparse.SUPPRESS)  # (tests)
    # (tests: --bench's code on the CPU with gloo at --check's sizes; its times mean nothing)
    p.add_argument("--cpu-bench", action="store_true", help=argparse.SUPPRESS)
    args = p.parse_args()
    _apply_sets(args.set)
    if not (args.check or args.bench or args.cpu_bench):
        args.check = True
    opts = {"fault": args.fault, "steps": args.steps, "timeout": args.timeout, "cpu": False}
    if args.check:
        world = args.nproc or int(os.environ.get("WORLD_SIZE", 2))
        cfg, note = check_sizes(dict(CONFIG), world)
        print(f"check {CONFIG['strategy']} on {world} ranks (gloo, CPU, float32): {note}",
              flush=True)  # fmt: skip
        if not launch("check", cfg, opts, world):
            print("check: FAIL", flush=True)
            sys.exit(1)
    if args.cpu_bench:
        world = args.nproc or 2
        if not launch("bench", check_sizes(dict(CONFIG), world)[0], {**opts, "cpu": True}, world):
            sys.exit(1)
    if args.bench:
        if not torch.cuda.is_available():
            sys.exit("--bench needs CUDA GPUs (NCCL); --check runs on the CPU")
        world = args.nproc or int(os.environ.get("WORLD_SIZE", torch.cuda.device_count()))
        if world < 2:
            sys.exit(f"--bench needs >= 2 GPUs (NCCL), {world} visible")
        if not launch("bench", dict(CONFIG), opts, world):
            sys.exit(1)


if __name__ == "__main__":
    main()
