"""PNG charts for the markdown report (matplotlib, headless Agg backend); docs/charts.md.

Each chart answers one question, which its title asks; its value axis is time with a unit:
  gaps       Why was the GPU idle?  The steady idle time by cause (the summary's rows).
  waves      Which kernels lose the most time to wave quantization?  Idle time per kernel.
  timeline   When was the GPU busy, and in which range?  Busy share over time per device,
             the top-level ranges in colour (a legend names them), long start-up stretches
             compressed into marked bands.
  comm       How much communication is exposed?  Compute-only, overlapped and exposed time.

What a chart plots is built by a pure function of the Analysis (``idle_by_cause``,
``wave_rows``, ``timeline_data``), which the tests check against numbers worked out apart;
the drawing functions only draw it. Each drawing function writes one figure to ``path`` and
returns it, or returns None when there is nothing to draw.
"""

from __future__ import annotations

import math
import textwrap
from dataclasses import dataclass, field
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
from matplotlib.artist import Artist  # noqa: E402

from advisor import views  # noqa: E402
from advisor.analysis import Analysis, TraceAnalysis  # noqa: E402
from advisor.data import load_yaml, names_in  # noqa: E402
from advisor.metrics import intervals as iv  # noqa: E402
from advisor.render.fit import ELLIPSIS, common_prefix, shorten_middle  # noqa: E402
from advisor.render.sections import (  # noqa: E402
    IDLE_LABELS,
    dims,
    group_details,
    idle_labels,
    widen_duplicates,
    without_grid,
)
from advisor.units import fmt_ns, fmt_pct  # noqa: E402

# --------------------------------------------------------------------------------------
# chart data: pure functions of an Analysis (nothing here draws)
# --------------------------------------------------------------------------------------


@dataclass
class IdleByCause:
    """What the gaps chart plots: the summary's steady idle by cause (ns, summed over
    devices), largest first, causes without idle left out."""

    causes: pd.DataFrame  # column (summary key), label, idle_ns, share (of the steady idle)
    per_device: pd.DataFrame  # index: column; one column per device (ns); rows sum to idle_ns
    steady_idle_ns: int  # GPU idle of the steady state (= the sum of ``causes.idle_ns``)
    steady_ns: int  # the steady-state time (window - start-up idle)
    startup_ns: int  # start-up idle, left out (as the summary leaves it out of the shares)


def idle_by_cause(a: Analysis) -> IdleByCause:
    """The terminal summary's "idle by cause" rows (Analysis.summary, the same numbers as the
    JSON document's summary), split per device over the same windows."""
    s = a.summary()
    windows = (a.region_table(["device", *IDLE_LABELS]) if a.selection.get("range")
               else a.devices)  # fmt: skip
    per = (windows.groupby("device")[list(IDLE_LABELS)].sum() if len(windows)
           else pd.DataFrame(columns=list(IDLE_LABELS)))  # fmt: skip
    per = per.T.round().astype(np.int64)
    cols = [c for c in IDLE_LABELS if s[c] > 0]
    labels = idle_labels(a)
    steady_idle = int(sum(s[c] for c in IDLE_LABELS))
    causes = pd.DataFrame(
        {
            "column": cols,
            "label": [labels[c].strip() for c in cols],
            "idle_ns": [int(s[c]) for c in cols],
        }
    )
    causes["share"] = causes["idle_ns"] / steady_idle if steady_idle else np.nan
    causes = causes.sort_values("idle_ns", ascending=False, kind="stable", ignore_index=True)
    return IdleByCause(
        causes=causes,
        per_device=per.reindex(causes["column"]),
        steady_idle_ns=steady_idle,
        steady_ns=int(s["window_ns"] - s["startup_idle_ns"]),
        startup_ns=int(s["startup_idle_ns"]),
    )


WAVE_TOP = 12  # kernel rows the waves chart ranks (the dominant GEMM comes on top of them)
NEGLIGIBLE = 0.01  # rows losing less than this share of the top row's idle are left out
NAME_WIDTH = 44  # kernel names shortened in the middle to this many characters
WAVE_COLUMNS = ["label", "name", "device", "grid", "launches", "total_ns", "waves",
                "tail_fraction", "tail_idle_ns", "underfill_idle_ns", "idle_ns", "status",
                "dominant_gemm"]  # fmt: skip
# why kernel groups are left out of the waves chart, in the order the rules apply
LEFT_OUT = {
    "no_grid": "without a valid grid or block in the trace (waves unknown)",
    "no_facts": "without GPU facts (waves unknown)",
    "comm": "communication (grids sized to channels)",
    "persistent": "persistent (they loop over their tiles: no tail)",
    "short": "with launches under {floor} (launch overhead dominates)",
    "one_block": "one-block grids",
    "negligible": "losing under 1 % of the top row's idle, or nothing",
    "below_top": "beyond the top {top}",
}


@dataclass
class WaveRows:
    """What the waves chart plots: kernel groups ranked by wave-quantization idle (tail +
    under-fill, ns, summed over launches), and how many groups each rule left out."""

    rows: pd.DataFrame  # WAVE_COLUMNS, drawn top to bottom
    left_out: dict[str, int] = field(default_factory=dict)  # LEFT_OUT key -> groups
    floor_ns: int = 0  # the launch-time floor (thresholds.yaml quantization_min_launch_ns)
    top: int = WAVE_TOP


def wave_rows(a: Analysis, top: int = WAVE_TOP) -> WaveRows:
    """Kernel groups (Analysis.kernel_table) ranked by quantization idle: tail (a partly
    filled last wave after full ones) plus under-fill (a single partly filled wave). Left
    out, by the first rule that applies: groups without GPU facts, communication and
    persistent kernels (their grids do not quantize), launches under the report's launch
    floor, one-block grids, groups losing under NEGLIGIBLE of the top row's idle, and those
    beyond ``top``. The dominant GEMM of each device (_dominant_gemms) is always shown,
    marked, whatever the rules say (``status`` says when its tail is not defined: no GPU
    facts, communication, persistent); rows without a defined tail go last."""
    floor = int(load_yaml("thresholds.yaml")["quantization_min_launch_ns"])
    k = a.kernel_table()
    if k.empty:
        return WaveRows(pd.DataFrame(columns=WAVE_COLUMNS), {}, floor, top)
    k = k.reset_index(drop=True)
    k["idle_ns"] = k["tail_idle_ns"] + k["underfill_idle_ns"]
    dominant = _dominant_gemms(k)
    reason = pd.Series("", index=k.index, dtype=object)
    no_grid = pd.Series(without_grid(k), index=k.index)
    rules = [
        ("no_grid", k["waves"].isna() & no_grid),
        ("no_facts", k["waves"].isna()),
        ("comm", k["comm"].astype(bool)),
        ("persistent", k["persistent"].astype(bool)),
        ("short", k["median_ns"] < floor),
        ("one_block", k["grid_blocks"] <= 1),
    ]
    for key, hit in rules:
        reason[(reason == "") & hit.to_numpy()] = key
    rest = reason == ""
    most = float(k.loc[rest, "idle_ns"].max()) if rest.any() else 0.0
    reason[rest & ((k["idle_ns"] <= 0) | (k["idle_ns"] < NEGLIGIBLE * most))] = "negligible"
    ranked = k[reason == ""].sort_values(["idle_ns", "total_ns"], ascending=False,
                                         kind="stable")  # fmt: skip
    reason[ranked.index[top:]] = "below_top"
    shown = (reason == "") | dominant
    left_out = {key: int(((reason == key) & ~shown).sum()) for key in LEFT_OUT}
    rows = k[shown].copy()
    rows["dominant_gemm"] = dominant[shown]
    rows["status"] = np.select(
        [rows["waves"].isna() & no_grid[shown], rows["waves"].isna(),
         rows["comm"].astype(bool), rows["persistent"].astype(bool),
         rows["underfilled"].astype(bool), rows["tail_idle_ns"] > 0],
        ["no grid in the trace: waves unknown", "no GPU facts: waves unknown",
         "communication: grid sized to channels",
         "persistent: loops over its tiles, no wave tail", "under-fill", "tail"],
        default="full waves: no tail",
    )  # fmt: skip
    defined = ~rows["status"].str.contains(":")  # (undefined tails go last)
    rows = rows.assign(_defined=defined).sort_values(
        ["_defined", "idle_ns", "total_ns"], ascending=False, kind="stable"
    )
    rows["grid"] = [dims(x, y, z) for x, y, z in
                    zip(rows["grid_x"], rows["grid_y"], rows["grid_z"], strict=True)]  # fmt: skip
    # (the selection's devices: a merged job's ops are its comm ops only, read back from disk)
    rows["label"] = row_labels(rows, several_devices=a.devices["device"].nunique() > 1)
    return WaveRows(rows[WAVE_COLUMNS].reset_index(drop=True), left_out, floor, top)


def _dominant_gemms(k: pd.DataFrame) -> pd.Series:
    """Per device: the kernel group with the most GPU time among the GEMMs, by the evidence
    the rules use (rules/tables.py ``gemm_by``, docs/metrics.md "GEMM identity"): --shape or
    --gemm; else not vetoed by a not-GEMM name or launching op, and a shape from the range or
    the op that launched it, or a GEMM name (classify.yaml; the short or demangled name)."""
    named, veto = names_in(k["name"].astype(str), "gemm_kernels", "not_gemm_kernels")
    if "demangled" in k:
        named_d, veto_d = names_in(k["demangled"].astype(str), "gemm_kernels",
                                   "not_gemm_kernels")  # fmt: skip
        named, veto = named | named_d, veto | veto_d
    source = k["shape_source"].astype(object) if "shape_source" in k else pd.Series(
        np.nan, index=k.index, dtype=object)  # fmt: skip
    user = source.isin(["--shape", "--gemm"]).to_numpy()
    if "op_not_gemm" in k:
        veto = veto | k["op_not_gemm"].to_numpy(bool)
    gemm = user | (~veto & (source.isin(["nvtx", "op"]).to_numpy() | named))
    out = pd.Series(False, index=k.index)
    if gemm.any():
        out[k[gemm].groupby("device")["total_ns"].idxmax().to_numpy()] = True
    return out


def clean_name(name: str) -> str:
    """A C++ kernel name without its leading ``void `` and its parameter list, which say
    nothing that tells two kernels apart once the template arguments are kept."""
    text = str(name).strip()
    if text.startswith("void "):
        text = text[5:]
    if text.endswith(")"):
        depth = 0
        for i in range(len(text) - 1, -1, -1):
            depth += {")": 1, "(": -1}.get(text[i], 0)
            if depth == 0:
                if i > 0:
                    text = text[:i]
                break
    return text


def simplify_name(name: str) -> str:
    """A kernel name for a label: clean_name, with the template arguments of its first
    templated part written ``<…>`` and ``(anonymous namespace)`` as ``(anon)``."""
    text = clean_name(name).replace("(anonymous namespace)", "(anon)")
    start = text.find("<")
    if start <= 0:
        return text
    depth = 0
    for i in range(start, len(text)):
        depth += {"<": 1, ">": -1}.get(text[i], 0)
        if depth == 0:
            return text[:start] + "<" + ELLIPSIS + ">" + text[i + 1 :]
    return text


def row_labels(rows: pd.DataFrame, several_devices: bool, width: int = NAME_WIDTH) -> list[str]:
    """One label per kernel group, all different when the groups are: the name (template
    arguments left out, unless they are what tells two names apart; the demangled name
    where short names collide) shortened in the middle, its grid, its device when there are
    several; then, only where two labels would still read the same, the block, registers,
    shared memory and GEMM shape."""
    full = [clean_name(n) for n in rows["name"]]
    if "demangled" in rows:  # (Nsight's short names: "Kernel2" for many templates)
        demangled = [clean_name(d) if isinstance(d, str) and d else n
                     for n, d in zip(full, rows["demangled"], strict=True)]  # fmt: skip
        full = _unless_ambiguous(full, demangled)
    names = _unless_ambiguous([simplify_name(n) for n in full], full)
    labels = _distinct_short(names, width)
    grids = [f"{x}x{y}x{z}" for x, y, z in
             zip(rows["grid_x"], rows["grid_y"], rows["grid_z"], strict=True)]  # fmt: skip
    labels = [f"{n}  grid {g}" for n, g in zip(labels, grids, strict=True)]
    if several_devices:
        labels = [f"{n}, dev {d}" for n, d in zip(labels, rows["device"], strict=True)]
    extras = [[f"block {int(v)}" for v in rows["block_threads"]], *group_details(rows)]
    for values in extras:
        labels = widen_duplicates(labels, values)
    seen: dict[str, int] = {}
    out = []
    for label in labels:  # (groups equal in every shown column: numbered)
        seen[label] = seen.get(label, 0) + 1
        out.append(label if seen[label] == 1 else f"{label} #{seen[label]}")
    return out


def _unless_ambiguous(short: list[str], full: list[str]) -> list[str]:
    """``short``, except where two equal short texts stand for different ``full`` ones: the
    full text there."""
    seen: dict[str, set[str]] = {}
    for x, f in zip(short, full, strict=True):
        seen.setdefault(x, set()).add(f)
    return [f if len(seen[x]) > 1 else x for x, f in zip(short, full, strict=True)]


def _distinct_short(names: list[str], width: int) -> list[str]:
    """``names`` shortened in the middle to ``width``; names that would then read the same
    while being different keep the part where they differ instead (``head…differing
    part…tail``), and are widened when even that reads the same."""
    out = [shorten_middle(n, width) for n in names]
    groups: dict[str, list[int]] = {}
    for i, short in enumerate(out):
        groups.setdefault(short, []).append(i)
    for idx in groups.values():
        fulls = [names[i] for i in idx]
        if len(set(fulls)) < 2:
            continue
        head = len(common_prefix(fulls))
        tail = len(common_prefix([f[::-1] for f in fulls]))
        for i in idx:
            n = names[i]
            core = n[head : len(n) - tail] if head + tail < len(n) else ""
            pre = n[:head]
            post = n[len(n) - tail :] if tail else ""
            pre = pre if len(pre) <= 14 else pre[:11] + ELLIPSIS
            post = post if len(post) <= 12 else ELLIPSIS + post[-10:]
            room = max(width + 8 - len(pre) - len(post), min(len(core), 48))
            out[i] = pre + shorten_middle(core, room) + post
    for step in range(1, 64):  # (still the same: wider)
        seen: dict[str, set[str]] = {}
        for short, full in zip(out, names, strict=True):
            seen.setdefault(short, set()).add(full)
        bad = {x for x, fulls in seen.items() if len(fulls) > 1}
        if not bad:
            break
        out = [shorten_middle(n, width + 8 * step) if x in bad else x
               for x, n in zip(out, names, strict=True)]  # fmt: skip
    return out


BINS = 400  # time bins of the timeline, over its drawn width
SPARSE = 0.1  # a compressed band may hold this share of time outside start-up idle
BRIDGE = 0.02  # ... in stretches each shorter than this share of the steady time
NEAR, LOCAL = 0.05, 0.1  # ... around which (NEAR of the steady time each side) LOCAL is active
MIN_BAND = 0.03  # start-up stretches longer than this share of the steady time are compressed
BAND_WIDTH = 0.02  # drawn width of one band, as a share of the steady time
BANDS_AT_MOST = 0.25  # all bands together take at most this share of the drawing
RANGE_COLOURS = 20  # range names with a colour of their own (the rest share one, named so)


@dataclass
class Band:
    """A stretch of start-up idle compressed on the timeline's x-axis (trace ns, drawn ms)."""

    start_ns: int
    end_ns: int
    x0: float
    x1: float
    active_ns: int  # time in it when some device was busy or idle for another cause


@dataclass
class Timeline:
    """What the timeline plots. The x-axis is drawn time (ms): the steady part at scale,
    each band compressed to a fixed width; ``ticks`` give the true times from the first op
    at round values."""

    t0: int
    t1: int
    devices: list[int]
    edges_ns: np.ndarray  # BINS + 1 bin edges (trace ns)
    xs: np.ndarray  # the same edges on the drawn axis (ms)
    busy: dict[int, np.ndarray]  # per device: busy share of each bin (0..1)
    bands: list[Band]
    ranges: pd.DataFrame  # device, name, start_ns, end_ns, x0, x1, colour (-1: "other")
    legend: list[str]  # range names with a colour, in the order of their colours
    others: int  # range names without a colour of their own
    ticks: list[tuple[float, str]]  # (drawn x, true time from t0 in unit_of_span)
    width: float  # drawn width (ms)


def startup_bands(a: Analysis, t0: int, t1: int) -> list[tuple[int, int, int]]:
    """Stretches of start-up idle to compress: (start, end, active ns). Time is *active*
    when some device is busy or idle for a cause other than start-up (within its first to
    last op). A band is a run of inactive time; it takes in an active stretch (start-up
    work between start-up gaps) when that stretch is shorter than BRIDGE of the steady time
    and the time around it (NEAR of the steady time each side) is at most LOCAL active, as
    long as the band stays at most SPARSE active. Bands longer than MIN_BAND of the steady
    time are compressed, those with little between them joined (_join); the steady time
    (what is not compressed) is settled by iteration."""
    ms, me = _active(a)
    gs, ge = np.r_[t0, me], np.r_[ms, t1]  # inactive stretch i lies before active stretch i
    cut: list[tuple[int, int, int]] = []
    for _ in range(8):
        steady = max((t1 - t0) - sum(e - b for b, e, _m in cut), 1)
        near = NEAR * steady
        local = iv.covered_in_windows((ms, me), ms - near, me + near) / (me - ms + 2 * near)
        bridgeable = ((me - ms) <= BRIDGE * steady) & (local <= LOCAL)
        bands: list[tuple[int, int, int]] = []
        for i in range(len(gs)):
            b, e = int(gs[i]), int(ge[i])
            if e <= b:
                continue
            if bands and i > 0 and bridgeable[i - 1]:  # (active stretch i - 1 between)
                b0, e0, m0 = bands[-1]
                active = m0 + int(me[i - 1] - ms[i - 1])
                if e0 == int(ms[i - 1]) and active <= SPARSE * (e - b0):
                    bands[-1] = (b0, e, active)
                    continue
            bands.append((b, e, 0))
        new = _join([x for x in bands if x[1] - x[0] > MIN_BAND * steady], (ms, me), steady)
        if new == cut:
            break
        cut = new
    return cut


def _join(bands: list, active: iv.Segments, steady: float) -> list[tuple[int, int, int]]:
    """Neighbouring bands joined when what lies between them is short (NEAR of the steady
    time) and holds under BRIDGE of the steady time of activity, as long as the joined band
    stays at most SPARSE active."""
    out: list[tuple[int, int, int]] = []
    for b, e, m in bands:
        if out:
            b0, e0, m0 = out[-1]
            between = int(iv.covered_in_windows(active, [e0], [b])[0])
            if (
                b - e0 <= NEAR * steady
                and between <= BRIDGE * steady
                and m0 + between + m <= SPARSE * (e - b0)
            ):
                out[-1] = (b0, e, m0 + between + m)
                continue
        out.append((b, e, m))
    return out


def _active(a: Analysis) -> iv.Segments:
    """When some device was busy or idle for a cause other than start-up (ns segments)."""
    ops, p = a.ops, a.pieces
    first = ops.groupby("device")["start"].min()
    last = ops.groupby("device")["end"].max()
    startup = p[p["cause"].astype(str).eq("startup").to_numpy()]
    s_all, e_all = [], []
    for d in first.index:
        rows = startup[startup["device"].to_numpy() == d]
        s, e = iv.union(rows["start"].to_numpy(), rows["end"].to_numpy())
        lo, hi = int(first[d]), int(last[d])
        cs, ce = np.r_[lo, e], np.r_[s, hi]  # the complement within [lo, hi]
        keep = ce > cs
        s_all.append(cs[keep])
        e_all.append(ce[keep])
    return iv.union(np.concatenate(s_all), np.concatenate(e_all))


def timeline_data(a: Analysis, bins: int = BINS) -> Timeline | None:
    """The timeline's axis, busy shares, compressed bands, ranges and ticks (None without
    GPU ops, and for a merged job: its ranks' busy time over time is not kept, only their
    totals)."""
    if a.ops.empty or not isinstance(a, TraceAnalysis):
        return None
    t0, t1 = int(a.ops["start"].min()), int(a.ops["end"].max())
    raw = startup_bands(a, t0, t1)
    steady = max((t1 - t0) - sum(e - b for b, e, _m in raw), 1)
    each = min(BAND_WIDTH, BANDS_AT_MOST / (1 - BANDS_AT_MOST) / max(len(raw), 1)) * steady
    ts, xs = [float(t0)], [0.0]  # breakpoints of the piecewise-linear map (ns -> drawn ns)
    for b, e, _m in raw:
        xs.append(xs[-1] + (b - ts[-1]))
        ts.append(float(b))
        xs.append(xs[-1] + each)
        ts.append(float(e))
    xs.append(xs[-1] + (t1 - ts[-1]))
    ts.append(float(t1))
    ts_a, xs_a = np.array(ts), np.array(xs) / 1e6
    width = float(xs_a[-1])

    def to_x(t):
        return np.interp(t, ts_a, xs_a)

    drawn = np.linspace(0.0, width, bins + 1)
    edges = np.round(np.interp(drawn, xs_a, ts_a)).astype(np.int64)
    edges[0], edges[-1] = t0, t1
    bands = [Band(b, e, float(to_x(b)), float(to_x(e)), m) for b, e, m in raw]
    r = a.region_table(["device", "name", "start_ns", "end_ns"])
    names = r.sort_values("start_ns", kind="stable")["name"].astype(str).drop_duplicates()
    legend = names.tolist()[:RANGE_COLOURS]
    colour = {n: i for i, n in enumerate(legend)}
    ranges = pd.DataFrame(
        {
            "device": r["device"].to_numpy(),
            "name": r["name"].astype(str).to_numpy(),
            "start_ns": r["start_ns"].to_numpy(np.int64),
            "end_ns": r["end_ns"].to_numpy(np.int64),
        }
    )
    ranges["x0"] = to_x(ranges["start_ns"].to_numpy(np.float64))
    ranges["x1"] = to_x(ranges["end_ns"].to_numpy(np.float64))
    ranges["colour"] = [colour.get(n, -1) for n in ranges["name"]]
    return Timeline(
        t0=t0, t1=t1, devices=[int(d) for d in sorted(a.ops["device"].unique())],
        edges_ns=edges, xs=drawn, busy=views.busy_shares(a, edges), bands=bands,
        ranges=ranges, legend=legend, others=len(names) - len(legend),
        ticks=_ticks(t0, ts_a, xs_a, [(b.x0, b.x1) for b in bands], width), width=width,
    )  # fmt: skip


def _nice_step(span: float, n: int) -> float:
    raw = span / max(n, 1)
    if raw <= 0:
        return 1.0
    mag = 10 ** math.floor(math.log10(raw))
    return next(m * mag for m in (1, 2, 2.5, 5, 10) if m * mag >= raw)


def unit_of_span(ns: float) -> tuple[float, str]:
    """(divisor, unit) of the timeline's tick labels: us under 1 ms, s from 10 s, else ms."""
    return (1e3, "us") if ns < 1e6 else (1e9, "s") if ns >= 1e10 else (1e6, "ms")


def _ticks(t0: int, ts, xs, bands, width: float) -> list[tuple[float, str]]:
    """Ticks at round true times from the first op (unit_of_span) inside the parts drawn
    at scale: about 8 over the whole width, none inside a band, none crowding another."""
    edges = [0.0] + [x for b in bands for x in b] + [width]
    div = unit_of_span(float(ts[-1] - ts[0]))[0]
    out: list[tuple[float, str]] = []
    for lo, hi in zip(edges[::2], edges[1::2], strict=True):
        if hi - lo < 0.04 * width:
            continue
        t_lo = (np.interp(lo, xs, ts) - t0) / div
        t_hi = (np.interp(hi, xs, ts) - t0) / div
        step = _nice_step(t_hi - t_lo, max(int(8 * (hi - lo) / width), 1))
        digits = max(0, -math.floor(math.log10(step))) if step < 1 else 0
        v = math.ceil(t_lo / step - 1e-9) * step
        while v <= t_hi + 1e-9:
            x = float(np.interp(v * div + t0, ts, xs))
            if all(abs(x - p) > 0.06 * width for p, _ in out):
                out.append((x, f"{v:.{digits}f}"))
            v += step
    return out


# --------------------------------------------------------------------------------------
# drawing
# --------------------------------------------------------------------------------------

DEVICE_COLOURS = ["#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b",
                  "#e377c2", "#7f7f7f", "#bcbd22", "#17becf"]  # fmt: skip
# light colours for range shading (the busy fill is dark blue over them)
RANGE_PALETTE = [matplotlib.colormaps["tab20"](i) for i in range(1, 20, 2)] + [
    matplotlib.colormaps["Pastel2"](i) for i in range(8)
] + [matplotlib.colormaps["Pastel1"](i) for i in (0, 1)]  # fmt: skip
CAPTION_CHARS = 150  # characters per caption line (9 pt on an 11 in wide figure)


def _time_unit(ns: float) -> tuple[float, str]:
    """(divisor, unit) that writes ``ns`` with 1 to 3 digits before the point."""
    for div, unit in ((1e9, "s"), (1e6, "ms"), (1e3, "us")):
        if ns >= div:
            return div, unit
    return 1.0, "ns"


def _caption(fig, text: str, width: float) -> float:
    """Write ``text`` under the axes; returns the share of the figure height it takes."""
    lines = textwrap.wrap(text, int(CAPTION_CHARS * width / 11))
    fig.text(0.01, 0.01, "\n".join(lines), fontsize=9, va="bottom", ha="left", color="#333333")
    return (0.17 * len(lines) + 0.08) / fig.get_figheight()


def _save(fig, path: Path, bottom: float = 0.0, top: float = 1.0) -> Path:
    fig.tight_layout(rect=(0, bottom, 1, top))
    fig.savefig(path, dpi=110, bbox_inches="tight", pad_inches=0.1)  # (long tick labels)
    plt.close(fig)
    return path


def gaps(a: Analysis, path: Path) -> Path | None:
    """Steady idle time by cause, largest first (stacked by device when there are several)."""
    d = idle_by_cause(a)
    if d.causes.empty:
        return None
    c = d.causes
    div, unit = _time_unit(float(c["idle_ns"].max()))
    fig, ax = plt.subplots(figsize=(11, 0.5 * len(c) + 2.4))
    y = np.arange(len(c))
    devices = list(d.per_device.columns)
    left = np.zeros(len(c))
    for i, dev in enumerate(devices):
        v = d.per_device[dev].to_numpy(np.float64) / div
        ax.barh(y, v, left=left, color=DEVICE_COLOURS[i % len(DEVICE_COLOURS)],
                label=f"device {dev}" if len(devices) > 1 else None)  # fmt: skip
        left += v
    for yi, (ns, share) in enumerate(zip(c["idle_ns"], c["share"], strict=True)):
        ax.text(ns / div, yi, f"  {fmt_ns(ns)} ({fmt_pct(share)})", va="center", fontsize=9)
    ax.set_yticks(y, c["label"], fontsize=9)
    ax.invert_yaxis()
    ax.set_xlim(0, float(c["idle_ns"].max()) / div * 1.3)
    ax.set_xlabel(f"GPU idle time ({unit}), summed over devices")
    ax.set_title("Why was the GPU idle? Steady-state idle time by cause", fontsize=11)
    if len(devices) > 1:
        ax.legend(fontsize=9, loc="lower right")
    startup = (
        f"Start-up idle ({fmt_ns(d.startup_ns)}: module loads, compilation, allocation "
        "before the steady state) is left out, as the summary leaves it out of its "
        "shares. "
        if d.startup_ns
        else "The trace has no start-up idle. "
    )
    text = (f"Steady-state idle {fmt_ns(d.steady_idle_ns)} of {fmt_ns(d.steady_ns)} steady "
            f"time; shares are of the steady idle. The same numbers as the summary's rows. "
            f"{startup}Launch overhead = host launching + launch latency + gaps inside CUDA "
            "graphs.")  # fmt: skip
    return _save(fig, path, bottom=_caption(fig, text, 11))


TAIL, UNDERFILL = "#d62728", "#ff9f40"


def waves(a: Analysis, path: Path, top: int = WAVE_TOP) -> Path | None:
    """Kernels ranked by wave-quantization idle (tail and under-fill stacked)."""
    w = wave_rows(a, top)
    k = w.rows
    if k.empty:
        return None
    most = float(k["idle_ns"].max())
    div, unit = _time_unit(most if most > 0 else 1.0)
    fig, ax = plt.subplots(figsize=(11, 0.4 * max(len(k), 2) + 2.4))
    y = np.arange(len(k))
    tail, under = k["tail_idle_ns"] / div, k["underfill_idle_ns"] / div
    ax.barh(y, tail, color=TAIL, label="tail: empty slots of a partly filled last wave"
            if (tail > 0).any() else None)  # fmt: skip
    ax.barh(y, under, left=tail, color=UNDERFILL, label="under-fill: empty slots of a "
            "single partly filled wave" if (under > 0).any() else None)  # fmt: skip
    span = most / div if most > 0 else 1.0
    for yi, r in enumerate(k.itertuples()):
        mark = "dominant GEMM; " if r.dominant_gemm else ""
        if ":" in r.status:  # (no tail defined, or none)
            text = f"{mark}{r.status} ({fmt_ns(r.total_ns)} GPU time)"
        else:
            text = (
                f"{mark}{fmt_ns(r.idle_ns)}: {r.waves:.3f} waves, "
                f"{fmt_pct(r.tail_fraction)} of the SMs idle, {int(r.launches)} launch(es)"
            )
        inside = r.idle_ns / div > 0.62 * span  # (long bars: the text inside, in white)
        ax.text(r.idle_ns / div + (-0.01 if inside else 0.01) * span, yi, text, va="center",
                ha="right" if inside else "left", fontsize=8,
                color="white" if inside else "black")  # fmt: skip
    ax.set_yticks(y, k["label"], fontsize=8)
    ax.invert_yaxis()
    ax.set_xlim(0, span * 1.05)
    ax.set_xlabel(f"GPU idle inside the kernel's launches ({unit}), summed over launches")
    ax.set_title("Which kernels lose the most GPU time to wave quantization?", fontsize=11)
    left = [LEFT_OUT[key].format(floor=fmt_ns(w.floor_ns), top=w.top) + f": {n}"
            for key, n in w.left_out.items() if n]  # fmt: skip
    text = (
        "Idle SM slots while the launch runs (the share of the SMs without a CTA in the "
        "last wave, times the launch time), summed over launches; a row is a kernel "
        "group (name, grid, block, device). "
        + ("The dominant GEMM of each device (the GEMM with the most GPU time) is shown "
           "whatever its loss. " if k["dominant_gemm"].any() else
           "No kernel is a GEMM (by name, launching op, --shape or --gemm). ")
        + "Left out: " + ("; ".join(left) if left else "nothing") + "."
    )  # fmt: skip
    cap = _caption(fig, text, 11)
    if (k["idle_ns"] > 0).any():
        fig.legend(loc="lower center", ncol=2, fontsize=9, frameon=False,
                   bbox_to_anchor=(0.5, cap))  # fmt: skip
        cap += 0.3 / fig.get_figheight()
    return _save(fig, path, bottom=cap)


LANE = (103, 117)  # the range lane above the busy share (y, in % of the busy axis)


def timeline(a: Analysis, path: Path) -> Path | None:
    """Busy share per time bin per device under a lane of top-level ranges (colours in the
    legend, names inside the spans that have room), long start-up stretches compressed into
    marked bands."""
    t = timeline_data(a)
    if t is None:
        return None
    n = len(t.devices)
    fig, axes = plt.subplots(n, 1, figsize=(11, 1.9 * n + 2.4), squeeze=False, sharex=True)
    handles: dict[str, Artist] = {}
    for ax, device in zip(axes[:, 0], t.devices, strict=True):
        for r in t.ranges[t.ranges["device"] == device].itertuples():
            colour = RANGE_PALETTE[r.colour] if r.colour >= 0 else "#dddddd"
            ax.axvspan(r.x0, r.x1, ymax=100 / LANE[1], color=colour, alpha=0.3, lw=0)
            h = ax.fill_between([r.x0, r.x1], LANE[0], LANE[1], color=colour, lw=0)
            handles.setdefault(r.name if r.colour >= 0 else "", h)
            _range_label(ax, r, t.width)
        for b in t.bands:
            h = ax.axvspan(b.x0, b.x1, fc="#f4f4f4", hatch="////", ec="#999999", lw=0)
            handles.setdefault("\0band", h)
            ax.text((b.x0 + b.x1) / 2, 0.45, f"{fmt_ns(b.end_ns - b.start_ns)} start-up",
                    rotation=90, ha="center", va="center", fontsize=8,
                    transform=ax.get_xaxis_transform(),
                    bbox=dict(fc="white", ec="none", pad=1, alpha=0.85))  # fmt: skip
        h = ax.fill_between(t.xs[:-1], t.busy[device] * 100, step="post", color="#08306b",
                            alpha=0.9, lw=0)  # fmt: skip
        handles.setdefault("\0busy", h)
        ax.set_ylim(0, LANE[1])
        ax.set_yticks([0, 50, 100])
        ax.set_xlim(0, t.width)
        ax.set_ylabel(f"device {device}\nbusy (%)", fontsize=9)
    last = axes[-1, 0]
    last.set_xticks([x for x, _ in t.ticks], [s for _, s in t.ticks])
    for b in t.bands:  # broken-axis marks where time jumps
        last.text((b.x0 + b.x1) / 2, 0, "//", transform=last.get_xaxis_transform(),
                  ha="center", va="center", fontsize=9, color="#333333",
                  bbox=dict(fc="white", ec="none", pad=0))  # fmt: skip
    last.set_xlabel(f"time from the first GPU op ({unit_of_span(t.t1 - t.t0)[1]})")
    lane = "top lane: top-level ranges" if len(t.ranges) else "the trace has no ranges"
    axes[0, 0].set_title(f"When was the GPU busy, and in which range? (busy share of each "
                         f"time bin; {lane})", fontsize=11)  # fmt: skip
    names = {"\0busy": "GPU busy (share of the bin)",
             "\0band": "start-up idle, compressed (length written in it)"}  # fmt: skip
    keys = ["\0busy", *(["\0band"] if "\0band" in handles else []),
            *[k for k in handles if not k.startswith("\0")]]  # fmt: skip
    other = f"other ranges ({t.others} names)"
    labels = [names.get(k) or (shorten_middle(k, 40) if k else other) for k in keys]
    total = sum(b.end_ns - b.start_ns for b in t.bands)
    most = max((b.active_ns / (b.end_ns - b.start_ns) for b in t.bands), default=0.0)
    text = (f"{len(t.bands)} start-up stretch(es), {fmt_ns(total)} in all, compressed "
            "(hatched bands, '//' on the axis; their busy share still drawn): in them, a "
            f"device ran or idled for another cause {fmt_pct(most)} of the time at most; the "
            "rest is drawn to scale. " if t.bands else "Drawn to scale. ")  # fmt: skip
    text += f"Span {fmt_ns(t.t1 - t.t0)} from the first to the last GPU op."
    cap = _caption(fig, text, 11)
    ncol = min(len(keys), 4)
    fig.legend([handles[k] for k in keys], labels, loc="lower center", ncol=ncol, fontsize=8,
               frameon=False, bbox_to_anchor=(0.5, cap))  # fmt: skip
    rows = math.ceil(len(keys) / ncol)
    return _save(fig, path, bottom=cap + (0.17 * rows + 0.1) / fig.get_figheight())


def _range_label(ax, r, width: float) -> None:
    """The range's name in the lane when it fits there (the legend names every range)."""
    room = (r.x1 - r.x0) / width * 900  # (about the drawn width in pixels)
    chars = int(room / 6.3) - 1
    if chars < 6:
        return
    ax.text(
        (r.x0 + r.x1) / 2,
        (LANE[0] + LANE[1]) / 2,
        shorten_middle(str(r.name), chars),
        fontsize=8,
        ha="center",
        va="center",
        clip_on=True,
    )


def comm(a: Analysis, path: Path) -> Path | None:
    """Per device: compute-only, overlapped and exposed communication time; nothing for a
    trace without communication."""
    d = a.devices
    if not (d["comm_ns"] > 0).any():
        return None
    fig, ax = plt.subplots(figsize=(8, 0.6 * max(len(d), 2) + 1.5))
    y = np.arange(len(d))
    div, unit = _time_unit(float((d["compute_ns"] + d["exposed_comm_ns"]).max()))
    compute_only = (d["compute_ns"] - d["overlap_ns"]) / div
    overlap = d["overlap_ns"] / div
    exposed = d["exposed_comm_ns"] / div
    ax.barh(y, compute_only, color="#1f77b4", label="compute only")
    ax.barh(y, overlap, left=compute_only, color="#2ca02c", label="comm overlapped")
    ax.barh(y, exposed, left=compute_only + overlap, color="#d62728", label="comm exposed")
    ax.set_yticks(y, [f"device {x}" for x in d["device"]])
    ax.set_xlabel(f"time ({unit})")
    ax.set_title("How much communication is exposed? Compute and communication per device",
                 fontsize=10)  # fmt: skip
    ax.legend(fontsize=9, loc="center left", bbox_to_anchor=(1.01, 0.5), frameon=False)
    return _save(fig, path)


CHARTS = {"timeline": timeline, "waves": waves, "gaps": gaps, "comm": comm}
