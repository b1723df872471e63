"""A small cuBLAS workload for checking .nsys-rep input with the real nsys (issue 14):
20 NVTX 'iter_N' ranges, each a bf16 4096^3 GEMM, a ReLU, a sum and a blocking .item().

    nsys profile -t cuda,nvtx,osrt --sample=none -o run python3 nsys_rep_check.py
    advisor analyze run.nsys-rep
"""

import torch
import torch.cuda.nvtx as nvtx

x = torch.randn(4096, 4096, device="cuda", dtype=torch.bfloat16)
w = torch.randn(4096, 4096, device="cuda", dtype=torch.bfloat16)
for step in range(20):
    nvtx.range_push(f"iter_{step}")
    y = torch.relu(x @ w)
    total = y.float().sum().item()  # a blocking read in every range
    nvtx.range_pop()
torch.cuda.synchronize()
