"""Whether a Kineto trace's host events are a thinned sample. PyTorch numbers the host
events it writes (``"Ev Idx"`` in the args of CPU ops, annotations and Python functions:
0, 1, 2, ... in the order written); a trace filtered after capture (HTA's trace_filter
samplers, say) keeps some of them, leaving numbers missing between most neighbours, where a
time-window excerpt keeps runs of consecutive numbers (data/thresholds.yaml
``thinned_host_events``)."""

from __future__ import annotations

import re

import numpy as np

from advisor.data import load_yaml

EV_IDX = re.compile(rb'"Ev Idx"\s*:\s*(\d{1,18})\b')


def limits() -> dict:
    """data/thresholds.yaml ``thinned_host_events``."""
    return dict(load_yaml("thresholds.yaml")["thinned_host_events"])


HostSample = tuple[int, int, float]  # (numbered events, their numbers' span, hole share)


def host_sample(first: bytes) -> HostSample | None:
    """(numbered host events found, the span of their numbers, the share of neighbours with
    numbers missing between them) in the first ``sample_bytes`` of ``first``, the document's
    first bytes, when that share makes the host events a thinned sample; None otherwise (too
    few numbered events, or runs of consecutive numbers)."""
    t = limits()
    found = EV_IDX.findall(first, 0, int(t["sample_bytes"]))
    if len(found) < t["min_events"]:
        return None
    idx = np.unique(np.array(found, dtype="S18").astype(np.int64))
    if len(idx) < t["min_events"]:
        return None
    holes = float(np.mean(np.diff(idx) > 1))
    if holes < t["min_hole_share"]:
        return None
    return len(idx), int(idx[-1] - idx[0] + 1), holes


def thinned_warning(sample: HostSample) -> str:
    """The reader's warning for a thinned trace: what was found and what it limits."""
    kept, span, holes = sample
    return (
        f"the host events are a thinned sample: {kept:,} numbered host events ('Ev Idx') "
        f"span {span:,} numbers, with numbers missing between {holes:.0%} of neighbours (a "
        "trace filtered after capture, e.g. by HTA's trace_filter): GPU idle is measured, "
        "but its causes are not attributed (the host calls and ops that would show them were "
        "removed), and idle may include GPU work the filter removed"
    )
