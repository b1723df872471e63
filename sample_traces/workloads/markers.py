"""Range helper shared by the sample workloads.

Each range is pushed both as an NVTX range (what Nsight Systems records) and as a
``torch.profiler.record_function`` (what torch.profiler records as ``user_annotation``), so
one workload gives comparable traces in both formats.
"""

from __future__ import annotations

import time

import torch


def spin(ns: int) -> None:
    """Busy-wait ``ns`` nanoseconds on the host (planted host time in the gate workloads)."""
    end = time.perf_counter_ns() + ns
    while time.perf_counter_ns() < end:
        pass


def nvtx(name: str, sync: bool = True):
    """Context manager pushing/popping one range (NVTX + record_function).

    With sync, the GPU is drained before the range closes, so a top-level range holds all
    the GPU work it launched; nested step ranges do not sync (no extra gaps inside).
    """

    class _Range:
        def __enter__(self):
            torch.cuda.nvtx.range_push(name)
            self.annotation = torch.profiler.record_function(name)
            self.annotation.__enter__()

        def __exit__(self, *exc):
            if sync:
                torch.cuda.synchronize()
            self.annotation.__exit__(*exc)
            torch.cuda.nvtx.range_pop()

    return _Range()


def profiler_window(kind: str):
    """The capture window of a workload: ``nsys`` starts/stops the CUDA profiler API (run
    nsys with --capture-range=cudaProfilerApi), ``kineto`` runs torch.profiler and returns
    it (export after the window), ``none`` does nothing."""
    if kind == "kineto":
        from torch.profiler import ProfilerActivity, profile

        return profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA], record_shapes=True)

    class _Api:
        def __enter__(self):
            if kind == "nsys":
                torch.cuda.synchronize()
                torch.cuda.profiler.start()
            return self

        def __exit__(self, *exc):
            if kind == "nsys":
                torch.cuda.synchronize()
                torch.cuda.profiler.stop()

    return _Api()
