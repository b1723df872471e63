"""Single-GPU training loop of a small GPT-style model (held-out capture for issues 12 and 14).

    python3 train_steps.py FACTS.json {nsys|kineto} [KINETO_OUT.json]

A 4-layer decoder (d=512, 8 heads, seq 256, batch 8, vocab 8192) trained with AdamW. The
backward pass is launched by PyTorch's autograd engine from its own thread, outside the main
thread's step range; the optimizer launches many small kernels (foreach off), so the steps
are host-bound on purpose. Each step is a range ``train_step_N``.

nsys: the whole run under emit_nvtx(record_shapes=True) (every op a range holding its
shapes), steps 0..STEPS-1 (step 0 is cold: allocations, cuBLAS handles).
kineto: torch.profiler with schedule(wait=1, warmup=1, active=4): ProfilerStep#2..5.
"""

from __future__ import annotations

import json
import sys
import time

import torch
import torch.nn as nn
from markers import nvtx

STEPS = 6
VOCAB, D, HEADS, LAYERS, SEQ, BATCH = 8192, 512, 8, 4, 256, 8


class TinyGPT(nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = nn.Embedding(VOCAB, D)
        self.pos = nn.Parameter(torch.zeros(SEQ, D))
        layer = nn.TransformerEncoderLayer(D, HEADS, 4 * D, dropout=0.0, batch_first=True)
        self.blocks = nn.TransformerEncoder(layer, LAYERS, enable_nested_tensor=False)
        self.head = nn.Linear(D, VOCAB, bias=False)

    def forward(self, tokens):
        x = self.embed(tokens) + self.pos
        mask = nn.Transformer.generate_square_subsequent_mask(SEQ, device=tokens.device)
        return self.head(self.blocks(x, mask=mask, is_causal=True))


def main() -> None:
    facts_path, kind = sys.argv[1], sys.argv[2]
    torch.manual_seed(0)
    model = TinyGPT().cuda()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4, foreach=False)
    data = torch.randint(0, VOCAB, (STEPS, BATCH, SEQ + 1))  # pageable host memory
    losses, step_s = [], []

    def step(i):
        t0 = time.time()
        with nvtx(f"train_step_{i}", sync=False):
            batch = data[i].cuda()  # host-to-device copy from pageable memory
            logits = model(batch[:, :-1])
            loss = nn.functional.cross_entropy(logits.reshape(-1, VOCAB), batch[:, 1:].reshape(-1))
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            losses.append(loss.item())  # a blocking read each step, as training loops do
        step_s.append(time.time() - t0)

    if kind == "kineto":
        from torch.profiler import ProfilerActivity, profile, schedule

        with profile(
            activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA],
            schedule=schedule(wait=1, warmup=1, active=4),
            record_shapes=True,
        ) as prof:
            for i in range(STEPS):
                step(i)
                prof.step()
        prof.export_chrome_trace(sys.argv[3])
    else:
        with torch.autograd.profiler.emit_nvtx(record_shapes=True):
            for i in range(STEPS):
                step(i)
    facts = {
        "device": torch.cuda.get_device_name(0), "mode": kind, "steps": STEPS,
        "model": {"vocab": VOCAB, "d": D, "heads": HEADS, "layers": LAYERS, "seq": SEQ,
                  "batch": BATCH},
        "params": sum(p.numel() for p in model.parameters()),
        "losses": losses, "step_wall_s": step_s,
    }  # fmt: skip
    with open(facts_path, "w") as fh:
        json.dump(facts, fh, indent=2)
    print(json.dumps(facts, indent=2))


if __name__ == "__main__":
    main()
