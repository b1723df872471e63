"""Issue 29 round 13: every Gluon tile x Stream-K policy the planner could choose, with its
modelled time, at given shapes, against cuBLAS inside a CUDA graph (interleaved rounds;
every config checked against a float32 matmul first: sk_round10's helpers).

    python benchmarks/sk_round13.py STREAM_K_SCRIPT --shapes MxNxK:dtype,... [--rep MS]
        [--rounds R] [--deadline S] [--out rows.jsonl]
    python benchmarks/sk_round13.py --fit [--rows SWEEP.jsonl ...] [--dp-rows TILES.json ...]
    python benchmarks/sk_round13.py --loso [--rows ...] [--dp-rows ...]
    python benchmarks/sk_round13.py --check SWEEP.jsonl ...

Per shape: cuBLAS, the script's choice, and each tile of TILES under each policy of the
planner's SK_POLICIES (a data-parallel-only tile under policy 0 alone; policies that give
the same schedule, the script's ``plan``, timed once), each with the knobs the script's
planner would emit for it (``stream_k_extra``: stages and GROUP_M per tile) and its
``model_us`` (``stream_k_ns``, or ``stream_k_whole_tiles_ns`` for a data-parallel-only
tile), so that the planner's model can be compared with the measured times config by
config. Rows as JSON lines (one per shape) to --out as they are measured; --deadline
stops before a shape that would start after that many seconds.

--fit (CPU, advisor's planner with gpus.yaml): the Stream-K model's Gluon terms fitted to
such rows (default: rounds 10 and 13, FIT_ROWS, and round 9's data-parallel rows of three
tiles, FIT_DP_ROWS): the partial wave's floor, sk_iter_factor, sk_fixed_us.gluon, the
Stream-K efficiencies of the 128 x 256, 256 x 128 and 128 x 128 tiles and the long-share
factor (sk_long_share's second number; its first held at gpus.yaml's), least squares on
log(measured / modelled) (Nelder-Mead), the data-parallel-only tiles' efficiencies held.
Prints the fitted values, the error before and after, and per shape the config the
planner's joint choice would take among the measured ones against the fastest measured.
--loso: the same fit once per swept shape without that shape's points, and the held-out
shape's error and joint choice under it. --check: gpus.yaml's terms on other sweeps.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from sk_round10 import _inputs, _timed_row, warmed_module  # noqa: E402

# Gluon tiles of gemm_tiles (BLOCK_M, BLOCK_N, BLOCK_K, num_warps): the stages come from
# the table's row and the planner's sk_gluon_stages, as the script runs them
TILES = [(128, 256, 64, 8), (256, 128, 64, 8), (128, 128, 64, 4),
         (128, 192, 64, 8), (192, 128, 64, 8)]  # fmt: skip


def parse_shapes(text: str) -> list[tuple]:
    """``MxNxK:dtype,...`` as (m, n, k, dtype) tuples."""
    return [(*map(int, mnk.split("x")), dt) for mnk, dt in
            (item.split(":") for item in text.split(","))]  # fmt: skip


def configs(mod, m: int, n: int, k: int) -> dict[str, tuple[dict, dict]]:
    """label -> (the script's cfg, facts: modelled us, tiles, Stream-K tiles, CTAs) for
    each tile of TILES and policy, one label per distinct schedule."""
    p = mod.Problem(m, n, k, mod.GPU)
    out: dict[str, tuple[dict, dict]] = {}
    for tile in TILES:
        cand = next((c for c in mod.CANDIDATES if tuple(c[:4]) == tile and c[6]), None)
        base = cand and mod._base(p, cand, "gluon")
        if not base:
            continue
        base = mod._off_sectors(p, base)
        dp_only = mod.data_parallel_only(tile[0], tile[1])
        seen = set()
        for policy in (0,) if dp_only else tuple(mod.SK_POLICIES):
            if dp_only:
                best = mod.stream_k_whole_tiles_ns(p, base, policy)
            else:
                best = mod.stream_k_ns(p, base, policy)
            cfg = {**mod.CONFIG, **mod._finish(best, "stream_k", **mod.stream_k_extra(best))}
            sched = mod.plan(m, n, k, cfg)
            key = (sched["dp_tiles"], sched["progs"])
            if key in seen:
                continue
            seen.add(key)
            label = "{}x{}x{} {}w{}s g{} p{}".format(*tile, cfg["num_stages"], cfg["GROUP_M"],
                                                     policy)  # fmt: skip
            facts = {"model_us": round(best["model_ns"] / 1e3, 2), "tiles": sched["tiles_m"]
                     * sched["tiles_n"], "sk_tiles": sched["sk_tiles"], "progs": sched["progs"],
                     "iters_per_tile": sched["iters_per_tile"]}  # fmt: skip
            out[label] = (cfg, facts)
    return out


def sweep(mod, shapes, rounds: int, rep: int, deadline: float, sink: str | None) -> list:
    t0 = time.time()
    rows = []
    for m, n, k, dt in shapes:
        if time.time() - t0 > deadline:
            print(f"deadline: {m}x{n}x{k} and later shapes not run", flush=True)
            break
        a, b, ref, tol = _inputs(m, n, k, dt)
        chosen = {**mod.CONFIG, **mod.replan(m, n, k)}
        runs = {"cublas": lambda a=a, b=b: a @ b,
                "chosen": lambda a=a, b=b, cfg=chosen: mod.gemm(a, b, cfg)}  # fmt: skip
        facts = {}
        for label, (cfg, fact) in configs(mod, m, n, k).items():
            runs[label] = lambda a=a, b=b, cfg=cfg: mod.gemm(a, b, cfg)
            facts[label] = fact
        knobs = {key: chosen[key] for key in mod.KNOBS if key in chosen}
        row = {"M": m, "N": n, "K": k, "dtype": dt, "chosen_knobs": knobs, "facts": facts}
        _timed_row(row, runs, ref, tol, rounds, rep)
        timed = {lab: row[lab] for lab in facts if isinstance(row.get(lab), float)}
        if timed:
            best = min(timed, key=timed.__getitem__)
            row["best"] = best
            row["best_vs_cublas"] = round(row["cublas"] / timed[best], 3)
        if isinstance(row.get("chosen"), float):
            row["chosen_vs_cublas"] = round(row["cublas"] / row["chosen"], 3)
        rows.append(row)
        print(json.dumps({key: v for key, v in row.items() if "rel_error" not in key
                          and key != "facts"}), flush=True)  # fmt: skip
        if sink:
            with open(sink, "a") as f:
                f.write(json.dumps(row) + "\n")
    return rows


FIT_ROWS = [
    "docs/verification/h200_sk_round13_sweep.jsonl",
    "docs/verification/h200_sk_round10_call1.jsonl",
]  # (a shape in both: the first)
FIT_DP_ROWS = ["docs/verification/h200_sk_round9_tiles.json"]
# left out of the fit: padding copies the model does not charge in full (1100 x 2900 x
# 6000, 999 x 4865 x 8191) and rows measured before A's copy to 128-byte lines (1000 x 3000
# x 5000)
FIT_EXCLUDE = {(1100, 2900, 6000), (999, 4865, 8191), (1000, 3000, 5000)}
TERMS = ("sk_partial_wave_floor", "sk_iter_factor", "fixed", "eff 128x256", "eff 256x128",
         "eff 128x128", "long share")  # fmt: skip
LABEL = r"(\d+)x(\d+)x(\d+) (\d+)w(\d+)s(?: g\d+)? p(-?\d+)$"


def fit_points(rows: list[str], dp_rows: list[str]) -> list[tuple]:
    """(shape, tile (BM, BN, BK, warps), policy, measured us, source) of every Gluon
    config timed in ``rows`` (this script's or sk_round10 --sweep's) and ``dp_rows``
    (sk_tile192.py --script-tiles: each tile whole, policy 0)."""
    import re

    points, seen = [], set()
    for path in rows:
        shapes = set()
        for line in Path(path).read_text().splitlines():
            r = json.loads(line)
            shape = (r["M"], r["N"], r["K"])
            if "chosen_knobs" not in r or shape in seen:
                continue
            shapes.add(shape)
            for key, v in r.items():
                hit = re.match(LABEL, key)
                if hit and isinstance(v, float):
                    bm, bn, bk, w, _, policy = map(int, hit.groups())
                    if (bm, bn, w) != (128, 128, 8):  # (not a planner choice since round 11)
                        points.append((shape, (bm, bn, bk, w), policy, v, path))
        seen |= shapes
    for path in dp_rows:
        for r in json.loads(Path(path).read_text()):
            for tile in ((128, 256), (128, 192), (192, 128)):
                points.append(((r["M"], r["N"], r["K"]), (*tile, 64, 8), 0,
                               r[f"script {tile[0]}x{tile[1]}"], path))  # fmt: skip
    return [pt for pt in points if pt[0] not in FIT_EXCLUDE]


def modelled_us(knobs, gpu, shape, tile, policy) -> float:
    """The planner's Stream-K model of a Gluon config, as its joint choice sees it."""
    p = knobs.Problem(*shape, gpu)
    cand = next(c for c in knobs.CANDIDATES if tuple(c[:4]) == tile and c[6])
    b = knobs.planner._sk_tile(p, knobs._base(p, cand, "gluon"))
    if knobs.planner.data_parallel_only(*tile[:2]):
        return knobs.planner.stream_k_whole_tiles_ns(p, b, 0)["model_ns"] / 1e3
    return knobs.stream_k_ns(p, b, policy)["model_ns"] / 1e3


def _set_terms(cal: dict, x) -> None:
    floor, iterf, fixed, e256, e256m, e128, long_share = map(float, x)
    cal.update(sk_partial_wave_floor=floor, sk_iter_factor=iterf, sk_fixed_us={"gluon": fixed},
               sk_gluon_eff=[[128, 256, 64, 8, e256], [256, 128, 64, 8, e256m],
                             [128, 128, 64, 4, e128]],
               sk_long_share=[cal["sk_long_share"][0], long_share])  # fmt: skip


def _model():
    """advisor's planner module, the H200's specs and the calibration dict the fit edits."""
    from advisor.configs import knobs
    from advisor.trace.gpus import match_gpu

    return knobs, match_gpu("H200"), knobs.CALIBRATION


def _errors(points) -> list[float]:
    """log(measured / modelled) of each point under the calibration as it stands."""
    import math

    knobs, h200, _ = _model()
    return [math.log(v / modelled_us(knobs, h200, s, t, pol)) for s, t, pol, v, _ in points]


def _picks(points) -> list[tuple]:
    """Per shape of ``points``: (shape, the joint choice's tile, policy and measured us, the
    fastest measured us) among that shape's measured configs."""
    knobs, h200, _ = _model()
    out = []
    for shape in sorted({pt[0] for pt in points}):
        cs = [(modelled_us(knobs, h200, s, t, pol), v, t, pol) for s, t, pol, v, _ in points
              if s == shape]  # fmt: skip
        pick, best = min(cs), min(c[1] for c in cs)
        out.append((shape, pick[2][:2], pick[3], pick[1], best))
    return out


def _fitted(points) -> list[float]:
    """The terms (TERMS) fitted to ``points``: least squares on log(measured / modelled),
    Nelder-Mead from the terms before round 13 (floor 0.4, the tile model's 13.3 us, the
    rows' efficiencies, no long-share term). Leaves the calibration at the fitted terms."""
    import numpy as np
    from scipy.optimize import minimize

    _, _, cal = _model()
    x0 = [0.4, 1.05, cal["fixed_us"]["stream_k"]["gluon"], 0.688, 0.648, 0.665, 0.0]

    def loss(x) -> float:
        _set_terms(cal, x)
        return float((np.array(_errors(points)) ** 2).sum())

    x = minimize(loss, x0, method="Nelder-Mead",
                 options={"maxiter": 4000, "xatol": 1e-4, "fatol": 1e-6}).x  # fmt: skip
    _set_terms(cal, x)
    return [float(v) for v in x]


def _rms(errors: list[float]) -> float:
    return (sum(e * e for e in errors) / len(errors)) ** 0.5


def _print_picks(picks: list[tuple]) -> None:
    import statistics

    ratios = [got / best for *_, got, best in picks]
    for shape, tile, policy, got, best in picks:
        print(f"  {shape}: joint pick {tile} p{policy} {got:.1f} us, fastest {best:.1f} us")
    print(f"pick / fastest: mean {statistics.mean(ratios):.3f}, worst {max(ratios):.3f}")


def fit(points) -> None:
    """Print the terms fitted to ``points``, the error before and after, and the joint
    choice per swept shape (calibration restored after)."""
    _, _, cal = _model()
    saved = json.loads(json.dumps(cal))
    before = _rms(_errors(points))
    x = _fitted(points)
    print(dict(zip(TERMS, (round(v, 3) for v in x), strict=True)))
    print(f"{len(points)} points: rms log error {before:.3f} (gpus.yaml) -> "
          f"{_rms(_errors(points)):.3f} (fitted)")  # fmt: skip
    _print_picks(_picks([pt for pt in points if pt[4] in FIT_ROWS]))
    cal.clear()
    cal.update(saved)


DP_TILES = ((128, 192), (192, 128))


def _set_dp_terms(knobs, cal: dict, x) -> None:
    """The data-parallel-only tiles' Gluon efficiencies (x[0]: 128 x 192, x[1]: 192 x 128)
    and their fixed time (x[2], us) into the planner's candidates and calibration."""
    effs = dict(zip(DP_TILES, map(float, x[:2]), strict=True))
    knobs.CANDIDATES[:] = [(*c[:6], effs[c[:2]]) if c[:2] in effs else c
                           for c in knobs.CANDIDATES]  # fmt: skip
    cal["fixed_us"]["data_parallel_only"]["gluon"] = float(x[2])


def fitted_dp(points) -> list[float]:
    """The data-parallel-only tiles' terms (128 x 192 and 192 x 128 efficiencies, their
    fixed time in us) fitted to ``points``' data-parallel-only configs: least squares on
    log(measured / modelled), Nelder-Mead from gpus.yaml's values, the other terms as
    gpus.yaml has them. The planner's candidates and calibration are left as they were."""
    import numpy as np
    from scipy.optimize import minimize

    knobs, _, cal = _model()
    saved, rows = json.loads(json.dumps(cal)), list(knobs.CANDIDATES)
    mine = [pt for pt in points if pt[1][:2] in DP_TILES]
    x0 = [next(c[6] for c in rows if c[:2] == t) for t in DP_TILES]
    x0.append(cal["fixed_us"]["data_parallel_only"]["gluon"])

    def loss(x) -> float:
        _set_dp_terms(knobs, cal, x)
        return float((np.array(_errors(mine)) ** 2).sum())

    try:
        x = minimize(loss, x0, method="Nelder-Mead", options={"xatol": 1e-4, "fatol": 1e-6}).x
    finally:
        knobs.CANDIDATES[:] = rows
        cal.clear()
        cal.update(saved)
    return [float(v) for v in x]


def fit_dp(points, check_rows: list[str]) -> None:
    """The data-parallel-only tiles' terms refitted to ``points``' data-parallel-only
    configs (``fitted_dp``); then, under them, the joint choice per shape in ``check_rows``
    (sweeps not fitted) against the fastest measured config, before and after."""
    knobs, _, cal = _model()
    saved, rows = json.loads(json.dumps(cal)), list(knobs.CANDIDATES)
    mine = [pt for pt in points if pt[1][:2] in DP_TILES]
    x0 = [next(c[6] for c in rows if c[:2] == t) for t in DP_TILES]
    x0.append(cal["fixed_us"]["data_parallel_only"]["gluon"])
    checked = fit_points(check_rows, []) if check_rows else []
    print(f"{len(mine)} data-parallel-only points: rms log error {_rms(_errors(mine)):.3f} "
          f"(gpus.yaml {[round(v, 3) for v in x0]})")  # fmt: skip
    if checked:
        _print_picks(_picks(checked))
    x = fitted_dp(points)
    _set_dp_terms(knobs, cal, x)
    print(f"fitted {[round(float(v), 3) for v in x]}: rms log error {_rms(_errors(mine)):.3f}")
    _print_picks(_picks([pt for pt in points if pt[4] in FIT_ROWS]))
    if checked:
        print(f"on {check_rows} (not fitted):")
        _print_picks(_picks(checked))
    knobs.CANDIDATES[:] = rows
    cal.clear()
    cal.update(saved)


def leave_one_shape_out(points) -> None:
    """For each swept shape: the terms fitted to every other shape's points, then that
    shape's rms log error and joint choice under them (what the fit predicts where it has
    not seen the shape); the calibration restored after."""
    _, _, cal = _model()
    saved = json.loads(json.dumps(cal))
    picks, held_errors = [], []
    for shape in sorted({pt[0] for pt in points if pt[4] in FIT_ROWS}):
        x = _fitted([pt for pt in points if pt[0] != shape])
        mine = [pt for pt in points if pt[0] == shape]
        errors = _errors(mine)
        held_errors += errors
        picks += _picks([pt for pt in mine if pt[4] in FIT_ROWS])
        print(f"{shape}: rms log error {_rms(errors):.3f} over {len(mine)} points held out; "
              f"terms {[round(v, 3) for v in x]}", flush=True)  # fmt: skip
        cal.clear()
        cal.update(json.loads(json.dumps(saved)))
    print(f"held out: rms log error {_rms(held_errors):.3f} over {len(held_errors)} points")
    _print_picks(picks)


def check(rows: list[str]) -> None:
    """gpus.yaml's terms against sweeps they were not fitted to: rms log error and the
    joint choice per shape among the measured configs."""
    points = fit_points(rows, [])
    print(f"{len(points)} points: rms log error {_rms(_errors(points)):.3f} (gpus.yaml)")
    _print_picks(_picks(points))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("script", nargs="?")
    ap.add_argument("--fit", action="store_true")
    ap.add_argument("--loso", action="store_true", help="leave one shape out of the fit")
    ap.add_argument("--check", action="append", help="sweep rows to check gpus.yaml on")
    ap.add_argument("--fit-dp", action="store_true", help="refit the data-parallel-only tiles")
    ap.add_argument("--rows", action="append", help="with --fit (default FIT_ROWS)")
    ap.add_argument("--dp-rows", action="append", help="with --fit (default FIT_DP_ROWS)")
    ap.add_argument("--shapes", help="MxNxK:dtype,... (bf16 or fp16)")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--rep", type=int, default=50, help="ms per do_bench_cudagraph")
    ap.add_argument("--deadline", type=float, default=1e9, help="seconds")
    ap.add_argument("--out")
    a = ap.parse_args()
    if a.fit or a.loso or a.fit_dp:
        points = fit_points(a.rows or FIT_ROWS, a.dp_rows or FIT_DP_ROWS)
        if a.fit_dp:
            return fit_dp(points, a.check or [])
        return leave_one_shape_out(points) if a.loso else fit(points)
    if a.check:
        return check(a.check)
    mod = warmed_module(a.script)
    if a.out:
        Path(a.out).write_text("")
    sweep(mod, parse_shapes(a.shapes), a.rounds, a.rep, a.deadline, a.out)


if __name__ == "__main__":
    main()
