"""Two-GPU workload (torchrun --nproc_per_node=2): exposed vs overlapped NCCL all-reduce.

Top-level NVTX ranges on every rank:
  warmup                NCCL communicator set-up, cuBLAS handles (startup)
  allreduce_exposed     4 matmuls, then a blocking all-reduce of 64 MiB that the next step
                        waits for: comm never overlaps compute
  allreduce_overlapped  the same all-reduce issued async_op=True before 4 independent matmuls,
                        waited for at the end of the step: comm runs beside compute
  allreduce_straggler   like exposed, but rank 1 does 4 extra matmuls first, so rank 0 waits
                        inside the collective (rank skew)
"""

from __future__ import annotations

import json
import os
import sys

import torch
import torch.distributed as dist
from markers import nvtx

STEPS = 4
MATMULS = 4


def main() -> None:
    dist.init_process_group("nccl")
    rank = dist.get_rank()
    torch.cuda.set_device(rank)
    dev = torch.device("cuda", rank)
    a = torch.randn(4096, 4096, device=dev, dtype=torch.bfloat16)
    b = torch.randn(4096, 4096, device=dev, dtype=torch.bfloat16)
    grad = torch.randn(32 * 1024 * 1024, device=dev, dtype=torch.bfloat16)  # 64 MiB

    def compute(n: int) -> torch.Tensor:
        y = a
        for _ in range(n):
            y = torch.matmul(y, b) * (1.0 / 64)
        return y

    with nvtx("warmup"):
        compute(2)
        dist.all_reduce(grad)
        dist.barrier()
    with nvtx("allreduce_exposed"):
        for i in range(STEPS):
            with nvtx(f"step {i}", sync=False):
                compute(MATMULS)
                dist.all_reduce(grad)
                grad.mul_(0.5)
        dist.barrier()
    with nvtx("allreduce_overlapped"):
        for i in range(STEPS):
            with nvtx(f"step {i}", sync=False):
                work = dist.all_reduce(grad, async_op=True)
                compute(MATMULS)
                work.wait()
                grad.mul_(0.5)
        dist.barrier()
    with nvtx("allreduce_straggler"):
        for i in range(STEPS):
            with nvtx(f"step {i}", sync=False):
                compute(MATMULS + (4 if rank == 1 else 0))
                dist.all_reduce(grad)
                grad.mul_(0.5)
        dist.barrier()
    torch.cuda.synchronize()
    if rank == 0 and len(sys.argv) > 1:
        facts = {
            "world_size": dist.get_world_size(),
            "device": torch.cuda.get_device_name(dev),
            "allreduce_bytes": grad.numel() * grad.element_size(),
            "steps": STEPS,
            "matmuls_per_step": MATMULS,
            "nccl_version": ".".join(map(str, torch.cuda.nccl.version())),
            "env": {k: v for k, v in os.environ.items() if k.startswith("NCCL")},
        }
        with open(sys.argv[1], "w") as fh:
            json.dump(facts, fh, indent=2)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
