"""Why the GPU waited: one workload per idle cause (held-out captures for issue 28).

    python3 why_idle.py PART FACTS.json {nsys|kineto} [KINETO_OUT.json]

PART (each run on its own, so each trace holds one story):

  dataloader     a training loop whose DataLoader workers are slow (2 workers, 4 ms per item,
                 8 items per batch) with a loss.item() each step: the GPU waits for the
                 input pipeline; the 1-us synchronize before each wait is not its cause
  event_wait     work launched on stream B behind cudaStreamWaitEvent on an event that
                 stream A records after a 20 ms host function (cudaLaunchHostFunc: the GPU
                 runs nothing meanwhile): queued work held by an event
  pageable_copy  each step copies 32 MB from pageable host memory to the GPU and reads a
                 result back into pageable memory: the host sits in blocking copies
  copy_after_idle  each step synchronizes (the GPU runs dry), copies 32 KB from pageable host
                 memory, then works 300 us on the host before it launches the step's kernels:
                 a copy call that began with the GPU idle has that time in the gap before its
                 copy, and a credit after it must not count it again (on the H200 with torch
                 2.11 these calls return before their copies begin: no credit arises)
  short_chains   one range of 40 iterations, each 3 chains of 24 tiny launches ended by an
                 .item(): launch-bound although no chain reaches 50 launches
  dp_allreduce   10 independent GEMMs, then 10 all-reduces of 128 MiB gradients
                 (torch.distributed, NCCL, one process: the collectives run, no peer waits)
  nongemm        conv + batch-norm + layer-norm + softmax + loss + Adam (multi_tensor_apply),
                 and a skinny fp32 GEMM that cuBLAS splits along K (splitKreduce_kernel):
                 kernels that are not GEMMs
  devprops       a step loop calling cudaGetDeviceProperties (cuda-python) between launches
                 in every step: a call that start-up-by-name would have taken for start-up
  startup_host_work  one range holding 1.5 s of start-up (a host "load_checkpoint" after
                 one-off GPU setup ops), then 20 iterations of 12 launches each followed by
                 2 ms of host work ("log_metrics"): host-busy idle, a small share of the
                 range's whole window but most of its steady time
  startup_short_chains  the same 1.5 s start-up, then short_chains' 40 iterations of
                 3 launch chains ended by .item(): launch-bound after the start-up
  between_ranges 16 iterations: 3 ms of host work in a range that launches nothing
                 ("prepare_batch"), a pinned copy launched outside every range, then a
                 range of 12 launches ("compute_N"): the idle lies outside the ranges
  step_host_work 8 step ranges, each 1 ms of host work (no CUDA call) then a chain of 50
                 tiny launches; under nsys without emit_nvtx ("plain": no operator ranges)
  late_template  8 step ranges of 40 tiny launches (x * a + b); from step 3 on each step
                 also runs one pointwise op never run before (sin, cos, exp, log1p, tanh):
                 a template of the short name every step uses (vectorized_elementwise_kernel)
                 whose code lazy loading loads inside its first launch call, in the steady state

  mixed_training a small transformer (token embedding, 2 encoder layers, d=256, sequence 128,
                 batch 16) trained with AdamW (foreach off: a chain of tiny kernels per
                 parameter) on batches from 2 DataLoader workers (2 ms per item), a 16 MB
                 side tensor copied from pageable memory each step, the loss read back
                 (loss.item()) and 2 ms of host work ("log_metrics"): several causes in one
                 step, none of them planted alone (a capture unlike the parts above)

nsys: steps are NVTX ranges (markers.nvtx) under emit_nvtx(), so record_function ranges
(DataLoader __next__, optimizer step) are NVTX ranges as in Kineto's user annotations.
kineto: torch.profiler over the same loop (the same ranges as user annotations).
Facts: what the workload planted and measured on the host (seconds, per step).
"""

from __future__ import annotations

import json
import os
import sys
import time

import numpy as np
import torch
import torch.nn as nn
from markers import nvtx

STEPS = 8


def profiled(kind: str, out: str | None):
    """The capture context: emit_nvtx for nsys, torch.profiler for kineto; nothing for
    "plain" (an nsys capture with the workload's own NVTX ranges only)."""
    if kind == "plain":
        import contextlib

        return contextlib.nullcontext()
    if kind == "kineto":
        from torch.profiler import ProfilerActivity, profile

        class _Kineto:
            def __enter__(self):
                self.p = profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA],
                                 record_shapes=True)  # fmt: skip
                self.p.__enter__()

            def __exit__(self, *exc):
                torch.cuda.synchronize()
                self.p.__exit__(*exc)
                self.p.export_chrome_trace(out)

        return _Kineto()
    return torch.autograd.profiler.emit_nvtx()


class SlowItems(torch.utils.data.Dataset):
    """Items that take ITEM_S seconds of host time each (decoding, augmentation)."""

    ITEM_S = 0.004

    def __len__(self) -> int:
        return 1 << 20

    def __getitem__(self, i):
        time.sleep(self.ITEM_S)
        return self.item(torch.Generator().manual_seed(i))

    def item(self, g: torch.Generator):
        return torch.randn(512, generator=g), torch.randint(0, 10, (), generator=g)


def dataloader(kind, out, facts):
    model = nn.Sequential(nn.Linear(512, 2048), nn.ReLU(), nn.Linear(2048, 10)).cuda()
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    loader = torch.utils.data.DataLoader(SlowItems(), batch_size=8, num_workers=2)
    it = iter(loader)
    for _ in range(3):  # warm-up: workers started, kernels loaded
        x, y = next(it)
        nn.functional.cross_entropy(model(x.cuda()), y.cuda()).backward()
    torch.cuda.synchronize()
    waits = []
    with profiled(kind, out):
        for i in range(STEPS):
            with nvtx(f"train_step_{i}", sync=False):
                t0 = time.perf_counter()
                x, y = next(it)  # enumerate(DataLoader)#_MultiProcessingDataLoaderIter.__next__
                waits.append(time.perf_counter() - t0)
                loss = nn.functional.cross_entropy(model(x.cuda()), y.cuda())
                opt.zero_grad()
                loss.backward()
                opt.step()
                loss.item()
    facts.update(item_s=SlowItems.ITEM_S, batch=8, workers=2, loader_wait_s=waits)


def event_wait(kind, out, facts):
    import ctypes
    import glob

    hold_s = 0.02
    lib = sorted(glob.glob(os.path.join(os.path.dirname(torch.__file__), "..", "nvidia", "*",
                                        "lib", "libcudart.so*")))  # fmt: skip
    cudart = ctypes.CDLL(lib[0] if lib else "libcudart.so")
    host_fn = ctypes.CFUNCTYPE(None, ctypes.c_void_p)(lambda _: time.sleep(hold_s))
    a, b = torch.cuda.Stream(), torch.cuda.Stream()
    w = torch.randn(2048, 2048, device="cuda")
    x = torch.randn(2048, 2048, device="cuda")
    ev = torch.cuda.Event()
    (x @ w).sum().item()  # warm-up: cuBLAS loaded
    print("event_wait: warm", flush=True)
    with profiled(kind, out):
        for i in range(STEPS):
            with nvtx(f"iter_{i}", sync=False):
                # a runs a host function (20 ms on a driver thread: the GPU runs nothing),
                # then records the event that b's work waits for
                rc = cudart.cudaLaunchHostFunc(ctypes.c_void_p(a.cuda_stream), host_fn, None)
                assert rc == 0, rc
                ev.record(a)
                b.wait_event(ev)  # cudaStreamWaitEvent: b's work waits for a's record
                with torch.cuda.stream(b):
                    y = x @ w
                    y = torch.relu(y)
                done = torch.cuda.Event()
                done.record(b)
                deadline = time.perf_counter() + 5
                while not done.query():  # (never hang; sleeping lets the host function run)
                    if time.perf_counter() > deadline:
                        print("event_wait: b never ran", flush=True)
                        os._exit(3)
                    time.sleep(0.001)
            print("event_wait: iteration", i, flush=True)
    facts.update(hold_s=hold_s, mechanism="cudaLaunchHostFunc on stream a, then an event")


def pageable_copy(kind, out, facts):
    host = np.random.default_rng(0).random(4 << 20)  # 32 MB of float64, pageable
    back = np.empty(4 << 20)
    copy_s = []
    torch.from_numpy(host).cuda().sum().item()  # warm-up
    with profiled(kind, out):
        for i in range(STEPS):
            with nvtx(f"step_{i}", sync=False):
                t0 = time.perf_counter()
                x = torch.from_numpy(host).to("cuda")  # cudaMemcpyAsync from pageable memory
                copy_s.append(time.perf_counter() - t0)
                for _ in range(4):
                    x = x * 1.0001 + 0.5
                back[:] = x.cpu().numpy()  # device to pageable host memory
    facts.update(bytes=host.nbytes, copy_call_s=copy_s)


def _spin(seconds: float) -> None:
    """Host work (no sleep: its granularity is coarser than this)."""
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        pass


def copy_after_idle(kind, out, facts):
    host = np.random.default_rng(0).random(1 << 12)  # 32 KB of float64, pageable
    w = torch.randn(128, 128, device="cuda")
    torch.from_numpy(host).cuda().sum().item()  # warm-up
    copy_s = []
    with profiled(kind, out):
        for i in range(STEPS):
            with nvtx(f"step_{i}", sync=False):
                torch.cuda.synchronize()  # the GPU runs dry
                t0 = time.perf_counter()
                x = torch.from_numpy(host).to("cuda")  # cudaMemcpyAsync from pageable memory
                copy_s.append(time.perf_counter() - t0)
                _spin(300e-6)  # host work, no launch
                y = x.view(32, 128).float() @ w
                for _ in range(4):
                    y = torch.relu(y) * 1.0001
                y.sum().item()
    facts.update(bytes=host.nbytes, copy_call_s=copy_s, host_work_s=300e-6)


def short_chains(kind, out, facts):
    x = torch.randn(4096, device="cuda")
    x.sum().item()
    with profiled(kind, out), nvtx("decode_loop"):
        for _ in range(40):
            for _ in range(3):
                for _ in range(12):
                    x = x * 0.999  # 2 tiny kernels per iteration: 24 per chain
                    x = x + 0.001
                x.sum().item()  # a sync ends the chain (sum + copy: 26 launches per chain)
    facts.update(iterations=40, chains_per_iteration=3, launches_per_chain=26)


def dp_allreduce(kind, out, facts):
    import torch.distributed as dist

    os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
    os.environ.setdefault("MASTER_PORT", "29517")
    dist.init_process_group("nccl", rank=0, world_size=1, device_id=torch.device("cuda", 0))
    grads = [torch.randn(32 << 20, device="cuda") for _ in range(10)]  # 128 MiB of fp32 each
    a = torch.randn(4096, 4096, device="cuda")
    for g in grads[:2]:
        dist.all_reduce(g)
    torch.cuda.synchronize()
    with profiled(kind, out):
        for i in range(3):
            with nvtx(f"train_step_{i}", sync=False):
                outs = [a @ a for _ in range(10)]  # independent GEMMs (the backward's)
                for g in grads:
                    dist.all_reduce(g)  # gradient buckets, after the GEMMs
                sum(o[0, 0] for o in outs).item()
    dist.destroy_process_group()
    facts.update(collective_bytes=grads[0].numel() * 4, collectives_per_step=10)


def nongemm(kind, out, facts):
    model = nn.Sequential(
        nn.Conv2d(3, 64, 3, padding=1), nn.BatchNorm2d(64), nn.ReLU(),
        nn.Conv2d(64, 64, 3, padding=1), nn.BatchNorm2d(64), nn.ReLU(),
        nn.AdaptiveAvgPool2d(4), nn.Flatten(), nn.LayerNorm(1024), nn.Linear(1024, 10),
    ).cuda()  # fmt: skip
    opt = torch.optim.Adam(model.parameters(), foreach=True)  # multi_tensor_apply_kernel
    x = torch.randn(64, 3, 64, 64, device="cuda")
    y = torch.randint(0, 10, (64,), device="cuda")
    skinny_a = torch.randn(64, 1 << 16, device="cuda")
    skinny_b = torch.randn(1 << 16, 64, device="cuda")
    for _ in range(2):
        nn.functional.cross_entropy(model(x), y).backward()
        (skinny_a @ skinny_b).sum().item()
    with profiled(kind, out):
        for i in range(STEPS):
            with nvtx(f"train_step_{i}", sync=False):
                logits = model(x)
                loss = nn.functional.cross_entropy(torch.softmax(logits, 1), y)
                opt.zero_grad()
                loss.backward()
                opt.step()
                (skinny_a @ skinny_b).sum().item()  # cuBLAS split-K + splitKreduce_kernel
    facts.update(skinny_gemm=[64, 64, 1 << 16])


def devprops(kind, out, facts):
    from cuda.bindings import runtime

    x = torch.randn(1 << 16, device="cuda")
    x.sum().item()
    call_s = []
    with profiled(kind, out):
        for i in range(STEPS):
            with nvtx(f"train_step_{i}", sync=False):
                for _ in range(10):
                    x = torch.sin(x)
                    t0 = time.perf_counter()
                    runtime.cudaGetDeviceProperties(0)  # per-op device query (as ROCm PyTorch)
                    call_s.append(time.perf_counter() - t0)
                x.sum().item()
    facts.update(calls_per_step=10, call_s=call_s)


def _one_off_setup() -> torch.Tensor:
    """GPU ops run once (initialisation). The last is a scan, a kernel the loops after it
    never run: Nsight's short kernel names call every elementwise op
    'vectorized_elementwise_kernel', and a setup ending in one would start a run of names
    that recurs in the loop (steady state by position, docs/metrics.md)."""
    y = torch.zeros(1024, 1024, device="cuda") + torch.arange(1024, device="cuda") * 1e-6
    return y.cumsum(0)


def startup_host_work(kind, out, facts):
    w = torch.randn(1024, 1024, device="cuda")
    for _ in range(2):  # every kernel loaded before the capture
        (torch.relu(_one_off_setup() @ w) * 1e-3).sum().item()
    with profiled(kind, out), nvtx("job"):
        y = _one_off_setup()
        with nvtx("load_checkpoint", sync=False):
            _spin(1.5)  # start-up inside the range: seconds before the loop
        for _ in range(20):
            for _ in range(4):
                y = torch.relu(y @ w) * 1e-3
            with nvtx("log_metrics", sync=False):
                _spin(2e-3)  # host work on the launching thread, no launch
        y.sum().item()
    facts.update(startup_s=1.5, iterations=20, host_work_s=2e-3, launches_per_iteration=12)


def startup_short_chains(kind, out, facts):
    x = torch.randn(4096, device="cuda")
    for _ in range(2):
        (_one_off_setup().sum() + (x * 0.999 + 0.001).sum()).item()
    with profiled(kind, out), nvtx("job"):
        _one_off_setup()
        with nvtx("load_checkpoint", sync=False):
            _spin(1.5)
        for _ in range(40):
            for _ in range(3):
                for _ in range(12):
                    x = x * 0.999
                    x = x + 0.001
                x.sum().item()
    facts.update(startup_s=1.5, iterations=40, chains_per_iteration=3, launches_per_chain=26)


def between_ranges(kind, out, facts):
    host = torch.randn(1024, 1024).pin_memory()
    w = torch.randn(1024, 1024, device="cuda")
    for _ in range(2):
        (torch.relu(host.to("cuda", non_blocking=True) @ w) * 1e-3).sum().item()
    with profiled(kind, out):
        for i in range(STEPS * 2):
            with nvtx("prepare_batch", sync=False):
                _spin(3e-3)  # host work in a range that launches nothing
            x = host.to("cuda", non_blocking=True)  # a copy launched outside every range
            with nvtx(f"compute_{i}", sync=False):
                for _ in range(4):
                    x = torch.relu(x @ w) * 1e-3
        torch.cuda.synchronize()
    facts.update(iterations=STEPS * 2, host_work_s=3e-3, launches_per_range=12)


def step_host_work(kind, out, facts):
    """Host work inside each step (no CUDA call), then an eager chain of tiny kernels.
    Under nsys without emit_nvtx (as many users profile: their own NVTX step ranges only),
    so the nsys trace has no operator ranges; the Kineto one has its operators."""
    x = torch.randn(4096, device="cuda")
    for _ in range(2):
        (x * 0.999 + 0.001).sum().item()
    with profiled("plain" if kind == "nsys" else kind, out):
        for i in range(STEPS):
            with nvtx(f"step_{i}", sync=False):
                _spin(1e-3)  # host work in the step, no launch
                for _ in range(25):
                    x = x * 0.999
                    x = x + 0.001
        torch.cuda.synchronize()
    facts.update(steps=STEPS, host_work_s=1e-3, launches_per_step=50, emit_nvtx=False)


LATE_OPS = (torch.sin, torch.cos, torch.exp, torch.log1p, torch.tanh)  # new in steps 3-7


def late_template(kind, out, facts):
    """Steps of one template family, then, in the steady state, a first launch of another
    template of the same short name per step (its code loaded in that launch call)."""
    x = torch.rand(1 << 16, device="cuda")
    for _ in range(2):  # (the steps' own templates loaded before the capture's loop)
        (x * 0.999 + 0.001).sum().item()
    with profiled(kind, out):
        for i in range(STEPS):
            with nvtx(f"step_{i}", sync=False):
                for _ in range(20):
                    x = x * 0.999
                    x = x + 0.001
                if i >= 3:
                    y = LATE_OPS[i - 3](x)  # first launch of this template
                    x = x + 0.0 * y
        torch.cuda.synchronize()
    facts.update(steps=STEPS, late_ops=[f.__name__ for f in LATE_OPS], first_late_step=3,
                 emit_nvtx=kind == "nsys")  # fmt: skip


class SlowTokens(SlowItems):
    """Token sequences that take ITEM_S seconds of host time each (tokenizing, packing)."""

    ITEM_S = 0.002

    def item(self, g: torch.Generator):
        return torch.randint(0, 1024, (129,), generator=g)


def mixed_training(kind, out, facts):
    layer = nn.TransformerEncoderLayer(256, 4, 1024, dropout=0.0, batch_first=True)
    body = nn.TransformerEncoder(layer, 2, enable_nested_tensor=False)
    model = nn.ModuleDict({"embed": nn.Embedding(1024, 256), "body": body,
                           "head": nn.Linear(256, 1024)}).cuda()  # fmt: skip
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4, foreach=False, fused=False)
    loader = torch.utils.data.DataLoader(SlowTokens(), batch_size=16, num_workers=2)
    side = np.random.default_rng(0).random(2 << 20)  # 16 MB of float64, pageable

    def step() -> tuple[float, float, float]:
        t0 = time.perf_counter()
        seq = next(it)  # enumerate(DataLoader)#_MultiProcessingDataLoaderIter.__next__
        t1 = time.perf_counter()
        extra = torch.from_numpy(side).to("cuda")  # a blocking copy from pageable memory
        t2 = time.perf_counter()
        seq = seq.cuda()
        x = model["body"](model["embed"](seq[:, :-1]))
        logits = model["head"](x).float()
        loss = nn.functional.cross_entropy(logits.flatten(0, 1), seq[:, 1:].flatten())
        loss = loss + 0.0 * extra.mean()
        opt.zero_grad()
        loss.backward()
        nn.utils.clip_grad_norm_(model.parameters(), 1.0, foreach=False)
        opt.step()
        t3 = time.perf_counter()
        loss.item()
        t4 = time.perf_counter()
        with nvtx("log_metrics", sync=False):
            _spin(0.002)
        return t1 - t0, t2 - t1, t4 - t3

    it = iter(loader)
    for _ in range(3):  # warm-up: workers started, kernels loaded
        step()
    torch.cuda.synchronize()
    waits, copies, reads = [], [], []
    with profiled(kind, out):
        for i in range(STEPS):
            with nvtx(f"train_step_{i}", sync=False):
                w, c, r = step()
            waits.append(w)
            copies.append(c)
            reads.append(r)
    facts.update(item_s=SlowTokens.ITEM_S, batch=16, workers=2, side_bytes=side.nbytes,
                 log_metrics_s=0.002, loader_wait_s=waits, copy_call_s=copies,
                 loss_item_s=reads)  # fmt: skip


PARTS = {f.__name__: f for f in (dataloader, event_wait, pageable_copy, copy_after_idle,
                                  short_chains, dp_allreduce, nongemm, devprops,
                                  startup_host_work, startup_short_chains,
                                  between_ranges, step_host_work, late_template,
                                  mixed_training)}  # fmt: skip


def main() -> None:
    part, facts_path, kind = sys.argv[1], sys.argv[2], sys.argv[3]
    out = sys.argv[4] if len(sys.argv) > 4 else None
    torch.manual_seed(0)
    facts: dict = {"part": part, "kind": kind, "device": torch.cuda.get_device_name(0),
                   "torch": torch.__version__}  # fmt: skip
    t0 = time.time()
    PARTS[part](kind, out, facts)
    facts["wall_s"] = time.time() - t0
    with open(facts_path, "w") as fh:
        json.dump(facts, fh, indent=1)


if __name__ == "__main__":
    main()
