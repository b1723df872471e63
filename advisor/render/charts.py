"""PNG charts for the markdown report (matplotlib, headless Agg backend).

Each function draws one figure from an Analysis and writes it to ``path``, or returns None
when there is nothing to draw (no chart for an empty category):
  timeline   GPU busy/idle over time per device, top-level NVTX ranges shaded
  waves      waves and the empty slots of the last wave for the hottest kernels
  gaps       histogram of idle-gap sizes, stacked by cause (log-spaced bins)
  comm       comm vs compute per device: overlapped, exposed, compute-only time
"""

from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

from advisor import views  # noqa: E402
from advisor.analysis import Analysis  # noqa: E402

CAUSE_COLORS = {
    "startup": "#bbbbbb",
    "synchronization": "#d62728",
    "host_bound": "#ff7f0e",
    "launch_latency": "#1f77b4",
    "graph_internal": "#2ca02c",
    "unattributed": "#9467bd",
}
BINS = 400  # time bins of the timeline
CUT_WIDTH = 0.015  # drawn width of a cut (views.timeline_cuts), as a share of the steady time


def _save(fig, path: Path) -> Path:
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def _axis(t0: int, t1: int, cuts: list[tuple[int, int]]):
    """(to_x, to_t, width): trace time (ns) -> drawn x (ms) with each cut shown as a fixed
    CUT_WIDTH of the steady time, its inverse, and the drawn width (ms)."""
    steady = max(t1 - t0 - sum(e - b for b, e in cuts), 1)
    gap_w = CUT_WIDTH * steady
    ts, xs = [float(t0)], [0.0]  # breakpoints of the piecewise-linear map
    for b, e in cuts:
        xs.append(xs[-1] + (b - ts[-1]))
        ts.append(float(b))
        xs.append(xs[-1] + gap_w)
        ts.append(float(e))
    xs.append(xs[-1] + (t1 - ts[-1]))
    ts.append(float(t1))
    ts_a, xs_a = np.array(ts), np.array(xs) / 1e6

    def to_x(t):
        return np.interp(t, ts_a, xs_a)

    def to_t(x):
        return np.interp(x, xs_a, ts_a)

    return to_x, to_t, float(xs_a[-1])


def timeline(a: Analysis, path: Path) -> Path | None:
    """Busy share of each time bin per device (0..1), top-level NVTX ranges shaded and
    labelled; long start-up gaps are cut out (marked, with their length) so the steady
    state fills the width."""
    if a.ops.empty:
        return None
    devices = sorted(a.ops["device"].unique())
    fig, axes = plt.subplots(len(devices), 1, figsize=(11, 1.9 * len(devices) + 1.2),
                             squeeze=False, sharex=True)  # fmt: skip
    t0, t1 = int(a.ops["start"].min()), int(a.ops["end"].max())
    cuts = views.timeline_cuts(a, t0, t1)
    to_x, to_t, width = _axis(t0, t1, cuts)
    xs = np.linspace(0.0, width, BINS + 1)
    edges = to_t(xs)
    shares = views.busy_shares(a, edges)
    for ax, device in zip(axes[:, 0], devices, strict=True):
        busy = shares[int(device)]
        ax.fill_between(xs[:-1], busy, step="post", color="#1f77b4", alpha=0.85,
                        label="GPU busy share")  # fmt: skip
        regions = a.regions[a.regions["device"] == device]
        for i, r in enumerate(regions.itertuples()):
            x0, x1 = float(to_x(r.start_ns)), float(to_x(r.end_ns))
            ax.axvspan(x0, x1, alpha=0.12, color="C1" if i % 2 else "C2")
            if x1 - x0 > width / 30:
                ax.text(x0, 1.03, str(r.name)[:28], fontsize=7, va="bottom", clip_on=True)
        for b, e in cuts:
            xb = float(to_x(b))
            ax.axvspan(xb, float(to_x(e)), fc="#eeeeee", hatch="////", ec="#888888", lw=0)
        ax.set_ylim(0, 1.2)
        ax.set_xlim(0, width)
        ax.set_ylabel(f"device {device}\nbusy share")
    total = sum(e - b for b, e in cuts)
    note = f"; {len(cuts)} idle stretch(es), {total / 1e9:.2f} s in all, cut out (hatched)"
    note = note if cuts else ""
    axes[-1, 0].set_xlabel(f"time from the first GPU op (ms{note})")
    axes[0, 0].set_title("GPU busy over time (shaded: top-level NVTX ranges)", pad=16)
    handles, labels = axes[0, 0].get_legend_handles_labels()
    fig.legend(handles[:1], labels[:1], loc="lower right", fontsize=8, frameon=False)
    return _save(fig, path)


def waves(a: Analysis, path: Path, top: int = 12) -> Path | None:
    """Waves per launch and the empty slots of its last wave for the kernels with the most
    GPU time that quantize by grid (communication and persistent kernels loop over their
    work themselves: a partial last wave of their grid is not idle, so they are left out)."""
    k = views.wave_kernels(a, top)
    if k.empty:
        return None
    fig, ax = plt.subplots(figsize=(11, 0.45 * max(len(k), 2) + 1.6))
    several = a.ops["device"].nunique() > 1
    labels = [f"{n[:40]} {gx}x{gy}x{gz}" + (f" (device {d})" if several else "")
              for n, gx, gy, gz, d in zip(k["name"], k["grid_x"], k["grid_y"], k["grid_z"],
                                          k["device"], strict=True)]  # fmt: skip
    y = np.arange(len(k))
    empty = np.ceil(k["waves"]) - k["waves"]  # unused slots of the last wave, in waves
    ax.barh(y, k["waves"], color="#1f77b4", label="waves (grid / resident slots)")
    ax.barh(y, empty, left=k["waves"], color="#d62728", alpha=0.6,
            label="empty slots of the last wave")  # fmt: skip
    for yi, (w, t) in enumerate(zip(k["waves"], k["tail_fraction"], strict=True)):
        inside = w > 3.5  # long bars: label inside, in white
        ax.text(1.5 if inside else np.ceil(w) + 0.03, yi,
                f"{w:.3f} waves, {t:.0%} of the launch idle", va="center", fontsize=7,
                color="white" if inside else "black")  # fmt: skip
    ax.set_yticks(y, labels, fontsize=7)
    ax.invert_yaxis()
    ax.set_xlim(0, min(float(np.ceil(k["waves"]).max()) + 1.5, 5.0))
    ax.set_xlabel("waves per launch (axis cut at 5; labels give the value)")
    ax.set_title("Wave quantization of the kernels with the most GPU time "
                 "(communication and persistent kernels left out)", fontsize=10)  # fmt: skip
    fig.legend(loc="lower right", fontsize=8, frameon=False)
    return _save(fig, path)


def gaps(a: Analysis, path: Path) -> Path | None:
    """Histogram of device idle gaps (log-spaced, ns) stacked by cause."""
    g = a.ops[a.ops["gap_ns"] > 0]
    if g.empty:
        return None
    fig, ax = plt.subplots(figsize=(9, 4))
    bins = np.logspace(np.log10(max(g["gap_ns"].min(), 1)), np.log10(g["gap_ns"].max()) + 0.01,
                       40)  # fmt: skip
    causes = [c for c in CAUSE_COLORS if c in set(g["cause"])]
    data = [g.loc[g["cause"] == c, "gap_ns"].to_numpy() for c in causes]
    ax.hist(data, bins=bins, stacked=True, color=[CAUSE_COLORS[c] for c in causes],
            label=causes)  # fmt: skip
    ax.set_xscale("log")
    ax.set_xlabel("idle gap before a GPU operation (ns, log scale)")
    ax.set_ylabel("gaps")
    ax.set_title("Device idle gaps by cause")
    ax.legend(fontsize=8)
    return _save(fig, path)


def comm(a: Analysis, path: Path) -> Path | None:
    """Per device: compute-only, overlapped and exposed communication time (ms); nothing
    for a trace without communication."""
    d = a.devices
    if not (d["comm_ns"] > 0).any():
        return None
    fig, ax = plt.subplots(figsize=(8, 0.6 * max(len(d), 2) + 1.5))
    y = np.arange(len(d))
    compute_only = (d["compute_ns"] - d["overlap_ns"]) / 1e6
    overlap = d["overlap_ns"] / 1e6
    exposed = d["exposed_comm_ns"] / 1e6
    ax.barh(y, compute_only, color="#1f77b4", label="compute only")
    ax.barh(y, overlap, left=compute_only, color="#2ca02c", label="comm overlapped")
    ax.barh(y, exposed, left=compute_only + overlap, color="#d62728", label="comm exposed")
    ax.set_yticks(y, [f"device {x}" for x in d["device"]])
    ax.set_xlabel("time (ms)")
    ax.set_title("Communication vs compute per device")
    ax.legend(fontsize=8, loc="center left", bbox_to_anchor=(1.01, 0.5), frameon=False)
    return _save(fig, path)


CHARTS = {"timeline": timeline, "waves": waves, "gaps": gaps, "comm": comm}
