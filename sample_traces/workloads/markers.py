"""NVTX range helper shared by the sample workloads."""

from __future__ import annotations

import torch


def nvtx(name: str, sync: bool = True):
    """Context manager pushing/popping one NVTX range on the default domain.

    With sync, the GPU is drained before the range closes, so a top-level range holds all
    the GPU work it launched; nested step ranges do not sync (no extra gaps inside).
    """

    class _Range:
        def __enter__(self):
            torch.cuda.nvtx.range_push(name)

        def __exit__(self, *exc):
            if sync:
                torch.cuda.synchronize()
            torch.cuda.nvtx.range_pop()

    return _Range()
