"""Fit the planner's tile table (gpus.yaml ``gemm_tiles``) to a measured tile grid.

    python benchmarks/fit_tiles.py docs/verification/h200_tile_grid.jsonl
    python benchmarks/fit_tiles.py --dp-only ROWS.jsonl [--dp-only MORE.jsonl]

Reads the rows of benchmarks/tile_grid.py (each tile x kernel x shape, GPU time inside a
CUDA graph) and fits, on the rows not marked held_out, the parameters of the cost model in
advisor/configs/knobs.py: an efficiency per (kernel, tile), a fixed time per (strategy,
kernel) and the Triton kernels' uneven-K factor, minimising the log-ratio of modelled to
measured time (soft-L1, so a few odd shapes do not pull the table). The model's other terms
(waves, split and fix-up traffic, padding copies) come from knobs.py itself with unit
efficiency. Prints the YAML to paste into gpus.yaml, the fit's error on the fitted and the
held-out shapes, and per shape the planner's pick (with the YAML in place) against the best
measured row.

--dp-only: the Gluon efficiency of the table's data-parallel-only tile (128 x 192, two
accumulators; planner.data_parallel_only), every other term as gpus.yaml has it, under
the model the planner uses for that tile (knobs.stream_k_ns with policy 0: its waves, the
partial one at sk_partial_wave_floor, plus the Stream-K Gluon fixed time), to the rows of
benchmarks/sk_tile192.py (its "gluon 128x192 4 stages" column, operands as given, not the
--aligned ones) or of benchmarks/sk_policies.py --before (the "after" rows that ran that
tile). Same loss as the table's fit (soft-L1 on the log-ratio).
"""

from __future__ import annotations

import argparse
import json
from contextlib import contextmanager
from pathlib import Path

import numpy as np
import pandas as pd
from scipy.optimize import least_squares

from advisor.configs import knobs
from advisor.trace.gpus import match_gpu

H200 = match_gpu("H200")
MODELS = {"split_k": lambda p, b, r: knobs.split_k_ns(p, b, r["knobs"]["SPLITS"]),
          "stream_k": lambda p, b, r: knobs.stream_k_tile_ns(p, b)}  # fmt: skip


@contextmanager
def _raw_model():
    """knobs' model without the fitted terms: no fixed time, no uneven-K factor."""
    saved = dict(knobs.CALIBRATION)
    knobs.CALIBRATION.update(fixed_us={}, uneven_k_factor=1.0)
    try:
        yield
    finally:
        knobs.CALIBRATION.clear()
        knobs.CALIBRATION.update(saved)


def components(r: dict) -> dict:
    """Compute time at unit efficiency (ns), the other modelled terms (ns), uneven K."""
    p = knobs.Problem(r["M"], r["N"], r["K"], H200)
    out = {}
    with _raw_model():
        for eff in (1.0, 0.5):
            b = knobs._base(p, (*r["tile"], eff, eff), r["kernel"])
            out[eff] = MODELS[r["family"]](p, b, r)["model_ns"]
    compute = out[0.5] - out[1.0]
    return {"compute": compute, "other": out[1.0] - compute, "uneven": b["uneven_k"]}


def load(path: str) -> pd.DataFrame:
    rows = [json.loads(line) for line in Path(path).read_text().splitlines()]
    rows = [r for r in rows if r["status"] == "ok" and r["kernel"] != "cublas"]
    df = pd.DataFrame([{**r, **components(r)} for r in rows])
    df["tile"] = df.tile.apply(tuple)
    df["y"] = df.graph_ms * 1e6
    df["shape"] = [f"{f} {m}x{n}x{k} {d}" for f, m, n, k, d in
                   zip(df.family, df.M, df.N, df.K, df.dtype, strict=True)]  # fmt: skip
    return df


def fit(df: pd.DataFrame):
    tiles = sorted(set(zip(df.kernel, df.tile, strict=True)))
    fixed = sorted(set(zip(df.family, df.kernel, strict=True)))
    ti = np.array([tiles.index(k) for k in zip(df.kernel, df.tile, strict=True)])
    fi = np.array([fixed.index(k) for k in zip(df.family, df.kernel, strict=True)])
    n_t, n_f = len(tiles), len(fixed)

    def predict(x, mask=slice(None)):
        eff, f_us, uneven = x[:n_t][ti[mask]], x[n_t : n_t + n_f][fi[mask]], x[-1]
        d = df[mask]
        factor = np.where(d.uneven.values, uneven, 1.0)
        return f_us * 1e3 + d.compute.values / eff * factor + d.other.values

    train = ~df.held_out.values
    x0 = np.r_[np.full(n_t, 0.5), np.full(n_f, 5.0), 1.2]
    lo = np.r_[np.full(n_t, 0.05), np.zeros(n_f), 1.0]
    hi = np.r_[np.full(n_t, 1.5), np.full(n_f, 100.0), 3.0]
    x = least_squares(lambda x: np.log(predict(x, train) / df.y.values[train]), x0,
                      bounds=(lo, hi), loss="soft_l1", f_scale=0.1).x  # fmt: skip
    return x, tiles, fixed, predict(x)


# benchmark columns of data-parallel-only tiles: sk_tile192.py's prototype (128 x 192) and
# --script-tiles (the emitted kernels)
DP_ONLY_LABELS = {"gluon 128x192 4 stages": (128, 192), "script 128x192": (128, 192),
                  "script 192x128": (192, 128)}  # fmt: skip


def _dp_only_rows() -> dict[tuple[int, int], tuple]:
    return {c[:2]: c for c in knobs.CANDIDATES if knobs.planner.data_parallel_only(*c[:2])}


def dp_only_points(paths: list[str]) -> list[tuple[tuple[int, int], int, int, int, float]]:
    """(tile, M, N, K, measured ns) of the data-parallel-only tiles in benchmark rows (jsonl
    or a JSON list): sk_tile192.py's columns on operands as given, sk_policies.py's "after"
    rows whose knobs are such a tile (Gluon)."""
    points = []
    for path in paths:
        text = Path(path).read_text()
        rows = json.loads(text) if text.lstrip().startswith("[") else \
            [json.loads(line) for line in text.splitlines() if line.strip()]  # fmt: skip
        for r in rows:
            for label, tile in DP_ONLY_LABELS.items():
                if isinstance(r.get(label), float) and not r.get("aligned_rows"):
                    points.append((tile, r["M"], r["N"], r["K"], r[label] * 1e3))
            knob = r.get("after_knobs", {})
            tile = (knob.get("BLOCK_M"), knob.get("BLOCK_N"))
            if knob.get("GLUON") and tile in _dp_only_rows() and "after_ms" in r:
                points.append((tile, r["M"], r["N"], r["K"], r["after_ms"] * 1e6))
    return points


def fit_dp_only(points) -> tuple[dict, float, np.ndarray]:
    """The data-parallel-only tiles' Gluon efficiencies (one per tile) and their shared fixed
    time (us) fitted to ``points`` under planner.stream_k_whole_tiles_ns, and the model over
    measured ratio at each point with them."""
    cands = _dp_only_rows()
    tiles = sorted({pt[0] for pt in points})
    parts = []
    with _raw_model():
        for tile, m, n, k, _ in points:
            p = knobs.Problem(m, n, k, H200)
            t = [knobs.planner.stream_k_whole_tiles_ns(
                    p, knobs._base(p, (*cands[tile][:5], None, eff), "gluon"))["model_ns"]
                 for eff in (1.0, 0.5)]  # fmt: skip
            parts.append((2 * t[0] - t[1], t[1] - t[0]))  # (other terms, compute at eff 1)
    other, compute = np.array(parts).T
    idx = np.array([tiles.index(pt[0]) for pt in points])
    y = np.array([pt[4] for pt in points])

    def ratio(x):
        return (x[-1] * 1e3 + other + compute / x[idx]) / y

    n = len(tiles)
    x = least_squares(lambda x: np.log(ratio(x)), [0.6] * n + [5.0],
                      bounds=([0.05] * n + [0.0], [1.5] * n + [100.0]),
                      loss="soft_l1", f_scale=0.1).x  # fmt: skip
    return dict(zip(tiles, map(float, x[:n]), strict=True)), float(x[-1]), ratio(x)


def main_dp_only(paths: list[str]) -> None:
    points = dp_only_points(paths)
    effs, fixed, ratio = fit_dp_only(points)
    for (tile, m, n, k, y), r in zip(points, ratio, strict=True):
        print(f"# {tile[0]}x{tile[1]} at {m}x{n}x{k}: {y / 1e3:.1f} us, model/measured {r:.2f}")
    print(f"# {len(points)} rows, median |log| {np.median(np.abs(np.log(ratio))):.3f}")
    for tile, eff in effs.items():
        print(f"eff_gluon {tile[0]}x{tile[1]}: {eff:.3f}")
    print(f"fixed_us.data_parallel_only.gluon: {fixed:.1f}")


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("grid", nargs="?")
    p.add_argument("--dp-only", action="append", help="fit the data-parallel-only tile")
    args = p.parse_args()
    if args.dp_only:
        main_dp_only(args.dp_only)
        return
    df = load(args.grid)
    x, tiles, fixed, pred = fit(df)
    err = np.log(pred / df.y.values)
    for name, mask in (("fitted", ~df.held_out), ("held-out", df.held_out)):
        e = np.abs(err[mask.values])
        print(f"# {name} rows: {mask.sum()}, model/measured: median |log| "
              f"{np.median(e):.3f}, within 10%: {np.mean(e <= np.log(1.1)):.0%}")  # fmt: skip
    eff = dict(zip(tiles, x[: len(tiles)], strict=True))
    print("gemm_tiles:")
    print(f"  uneven_k_factor: {x[-1]:.3f}")
    print("  fixed_us:")
    for family in sorted({f for f, _ in fixed}):
        vals = {
            k: round(float(v), 1)
            for (f, k), v in zip(fixed, x[len(tiles) : -1], strict=True)
            if f == family
        }
        print(f"    {family}: " + json.dumps(vals))
    print("  tiles:")
    for tile in sorted({t for _, t in tiles}, key=lambda t: -eff.get(("triton", t), 0)):
        e = [eff.get((k, tile)) for k in knobs.KERNELS]
        print(
            f"  - [{', '.join(map(str, tile))}, "
            + ", ".join("null" if v is None else f"{v:.3f}" for v in e)
            + "]"
        )
    print("\n# the planner's pick (knobs.py with gpus.yaml as it is now) against the grid's best")
    print("| shape | held out | pick | measured ms | best ms (kernel, tile) | pick / best |")
    print("|---|---|---|---|---|---|")
    for shape, g in df.groupby("shape", sort=False):
        r = g.iloc[0]
        cfg = knobs.CHOOSERS[r.family](knobs.Problem(r.M, r.N, r.K, H200))
        kernel = "gluon" if cfg["GLUON"] else "triton"
        tile = tuple(cfg[k] for k in ("BLOCK_M", "BLOCK_N", "BLOCK_K", "num_warps", "num_stages"))
        hit = g[(g.kernel == kernel) & (g.tile == tile)]
        if not len(hit) and kernel == "gluon":  # ran with stages lowered to fit: that row
            hit = g[(g.kernel == kernel) & (g.tile.str[:4] == tile[:4])
                    & (g.gluon_stages < tile[4])]  # fmt: skip
        best = g.loc[g.y.idxmin()]
        got = f"{hit.y.iloc[0] / 1e6:.4f}" if len(hit) else "not in grid"
        ratio = f"{hit.y.iloc[0] / best.y:.2f}" if len(hit) else ""
        print(
            f"| {shape} | {'yes' if r.held_out else ''} | {kernel} {tile} | {got} | "
            f"{best.y / 1e6:.4f} ({best.kernel}, {best.tile}) | {ratio} |"
        )


if __name__ == "__main__":
    main()
