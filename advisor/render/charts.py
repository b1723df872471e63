"""PNG charts for the markdown report (matplotlib, headless Agg backend).

Each function draws one figure from an Analysis and writes it to ``path``:
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

from advisor.analysis import Analysis  # noqa: E402
from advisor.metrics import intervals as iv  # noqa: E402
from advisor.metrics.comm import device_segments  # noqa: E402

CAUSE_COLORS = {
    "startup": "#bbbbbb",
    "synchronization": "#d62728",
    "host_bound": "#ff7f0e",
    "launch_latency": "#1f77b4",
    "graph_internal": "#2ca02c",
    "unattributed": "#9467bd",
}
BINS = 400  # time bins of the timeline


def _save(fig, path: Path) -> Path:
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def timeline(a: Analysis, path: Path) -> Path:
    """Busy share of each time bin per device (0..1), NVTX ranges as shaded spans."""
    devices = sorted(a.ops["device"].unique())
    fig, axes = plt.subplots(len(devices), 1, figsize=(11, 1.9 * len(devices) + 0.8),
                             squeeze=False, sharex=True)  # fmt: skip
    t0 = int(a.ops["start"].min())
    t1 = int(a.ops["end"].max())
    title = "GPU busy over time (shaded: top-level NVTX ranges)"
    startup = a.ops[a.ops["cause"].eq("startup")]
    if len(startup) and startup["gap_ns"].max() > 0.5 * (t1 - t0):
        # one start-up gap (compilation, module load) dominates: start after it
        t0 = int(startup.loc[startup["gap_ns"].idxmax(), "start"])
        title += f", start-up before {(t0 - int(a.ops['start'].min())) / 1e6:.0f} ms omitted"
    edges = np.linspace(t0, t1, BINS + 1)
    segments = device_segments(a.ops, a.ops["end"].to_numpy() > t0)
    none = (np.array([], np.int64), np.array([], np.int64))
    for ax, device in zip(axes[:, 0], devices, strict=True):
        seg = segments.get(int(device), none)
        busy = iv.covered_in_windows(seg, edges[:-1], edges[1:]) / np.diff(edges)
        x = (edges[:-1] - t0) / 1e6
        ax.fill_between(x, busy, step="post", color="#1f77b4", alpha=0.85, label="GPU busy")
        regions = a.regions[(a.regions["device"] == device) & (a.regions["end_ns"] > t0)]
        for i, r in enumerate(regions.itertuples()):
            lo = max(r.start_ns, t0)
            ax.axvspan((lo - t0) / 1e6, (r.end_ns - t0) / 1e6, alpha=0.12,
                       color="C1" if i % 2 else "C2")  # fmt: skip
            if (r.end_ns - lo) > (t1 - t0) / 25:
                ax.text((lo - t0) / 1e6, 1.02, str(r.name)[:24], fontsize=7, va="bottom")
        ax.set_ylim(0, 1.15)
        ax.set_ylabel(f"device {device}\nbusy share")
    axes[-1, 0].set_xlabel("time (ms)")
    axes[0, 0].set_title(title)
    axes[0, 0].legend(loc="upper right", fontsize=8)
    return _save(fig, path)


def waves(a: Analysis, path: Path, top: int = 12) -> Path:
    """Waves per launch and the empty slots of its last wave for the hottest kernels."""
    k = a.kernel_table()
    k = k[k["waves"].notna()].sort_values("total_ns", ascending=False).head(top)
    fig, ax = plt.subplots(figsize=(11, 0.45 * max(len(k), 2) + 1.6))
    labels = [f"{n[:40]} {gx}x{gy}x{gz}" for n, gx, gy, gz in
              zip(k["name"], k["grid_x"], k["grid_y"], k["grid_z"], strict=True)]  # fmt: skip
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
    ax.set_title("Wave quantization of the kernels with the most GPU time")
    ax.legend(loc="lower right", fontsize=8)
    return _save(fig, path)


def gaps(a: Analysis, path: Path) -> Path:
    """Histogram of device idle gaps (log-spaced, ns) stacked by cause."""
    g = a.ops[a.ops["gap_ns"] > 0]
    fig, ax = plt.subplots(figsize=(9, 4))
    if g.empty:
        ax.text(0.5, 0.5, "no idle gaps", ha="center", transform=ax.transAxes)
        return _save(fig, path)
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


def comm(a: Analysis, path: Path) -> Path:
    """Per device: compute-only, overlapped and exposed communication time (ms)."""
    d = a.devices
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
    ax.legend(fontsize=8)
    return _save(fig, path)


CHARTS = {"timeline": timeline, "waves": waves, "gaps": gaps, "comm": comm}
