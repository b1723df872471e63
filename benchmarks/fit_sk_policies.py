"""Fit the Stream-K++ policy model (gpus.yaml ``gemm_tiles``: sk_partial_wave_floor,
sk_iter_factor, sk_fixup_sm_share) to benchmarks/sk_grid.py's rows, with tile and policy
chosen together (knobs.stream_k).

    python benchmarks/fit_sk_policies.py docs/verification/h200_sk_grid.jsonl

For each shape the planner's choice is taken among the measured configs (kernel, tile of
gpus.yaml's table, policy: the Gluon kernel runs a 4-stage 128x256 tile at 3 stages, so
either table row maps to its measured row); its regret is its measured time over the
fastest measured config's. A grid search over the three terms minimises the mean log
regret on the shapes not held out (ties: the mean absolute log error of the modelled
times); prints the YAML, the regret on the fitted and the held-out shapes, and per shape
the pick against the fastest config, with and without the new values.
"""

from __future__ import annotations

import argparse
import itertools
import json
import math
from pathlib import Path

from advisor.configs import knobs
from advisor.trace.gpus import match_gpu

H200 = match_gpu("H200")
TERMS = ("sk_partial_wave_floor", "sk_iter_factor", "sk_fixup_sm_share")
GRID = {
    "sk_partial_wave_floor": [0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8],
    "sk_iter_factor": [1.0, 1.05, 1.1, 1.15, 1.2, 1.25, 1.3, 1.35, 1.4, 1.5],
    "sk_fixup_sm_share": [1.0, 2.0, 3.0, 5.0, 10.0],
}


def _key(kernel: str, tile) -> tuple:
    bm, bn, bk, warps, stages = tile[:5]
    if kernel == "gluon" and (bm, bn) in ((128, 256), (256, 128)):
        stages = 3  # (the Gluon kernel fits 3 stages of these tiles with the output tile)
    return kernel, bm, bn, bk, warps, stages


def load(path: str) -> dict:
    """{shape: {"held_out", "rows": {(kernel, tile..., policy): ms}}} of the ok rows."""
    shapes: dict = {}
    for line in Path(path).read_text().splitlines():
        r = json.loads(line)
        if r.get("status") != "ok":
            continue
        s = shapes.setdefault((r["M"], r["N"], r["K"], r["dtype"]),
                              {"held_out": r["held_out"], "rows": {}})  # fmt: skip
        for policy in r["policies"]:
            s["rows"][(*_key(r["kernel"], r["tile"]), policy)] = r["ms"]
    return shapes


def pick(shape: tuple, rows: dict) -> tuple[tuple, float]:
    """(config, modelled ns) the planner chooses among the measured ``rows``: per kernel
    the cheapest modelled tile x policy, then the kernel as knobs._pick_kernel does."""
    p = knobs.Problem(shape[0], shape[1], shape[2], H200)
    best: dict = {}
    for kernel in p.kernels:
        for cand in knobs.CANDIDATES:
            b = knobs._base(p, cand, kernel)
            if b is None:
                continue
            for policy in knobs.SK_POLICIES:
                key = (*_key(kernel, cand), policy)
                if key not in rows:
                    continue
                ns = knobs.stream_k_ns(p, b, policy)["model_ns"]
                if kernel not in best or ns < best[kernel][1]:
                    best[kernel] = (key, ns)
    gluon = best.get("gluon")
    if "triton" not in best:  # (no Triton row measured at this shape)
        return gluon
    if gluon and knobs.gluon_knob(gluon[1], "stream_k") and gluon[1] <= best["triton"][1]:
        return gluon
    return best["triton"]


def evaluate(shapes: dict) -> dict:
    """Per shape: the pick, its regret and its model error."""
    out = {}
    for shape, s in shapes.items():
        key, ns = pick(shape, s["rows"])
        ms = s["rows"][key]
        out[shape] = {"pick": key, "ms": ms, "best": min(s["rows"].values()),
                      "best_key": min(s["rows"], key=s["rows"].get), "model_ms": ns / 1e6,
                      "held_out": s["held_out"]}  # fmt: skip
    return out


def score(ev: dict, held_out: bool) -> tuple[float, float, float]:
    """(mean log regret, worst regret, mean absolute log model error) of one set."""
    sel = [e for e in ev.values() if e["held_out"] == held_out]
    regrets = [math.log(e["ms"] / e["best"]) for e in sel]
    errors = [abs(math.log(e["model_ms"] / e["ms"])) for e in sel]
    return (sum(regrets) / len(sel), math.exp(max(regrets)), sum(errors) / len(sel))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("rows")
    a = ap.parse_args()
    shapes = load(a.rows)
    saved = {t: knobs.CALIBRATION[t] for t in TERMS}
    before = evaluate(shapes)
    results = []
    for values in itertools.product(*(GRID[t] for t in TERMS)):
        knobs.CALIBRATION.update(zip(TERMS, values, strict=True))
        ev = evaluate(shapes)
        fit = score(ev, False)
        results.append(((round(fit[0], 4), fit[2]), values, ev))
    results.sort(key=lambda r: r[0])
    _, values, after = results[0]
    knobs.CALIBRATION.update(saved)
    print("gemm_tiles (YAML):")
    for t, v in zip(TERMS, values, strict=True):
        print(f"  {t}: {v}")
    for name, ev in (("round-6 terms", before), ("fitted", after)):
        for held in (False, True):
            r, worst, err = score(ev, held)
            print(
                f"{name} {'held-out' if held else 'fitted'} shapes: pick / fastest mean "
                f"{math.exp(r):.3f}, worst {worst:.3f}; model error mean {math.exp(err):.3f}x"
            )
    print(
        "| M x N x K | held out | pick, round-6 terms | fitted pick | fitted / fastest | fastest |"
    )
    print("|---|---|---|---|---|---|")
    for shape in shapes:
        b, f = before[shape], after[shape]
        print(
            f"| {shape[0]}x{shape[1]}x{shape[2]} | {f['held_out']} | {_label(b['pick'])} "
            f"{b['ms'] * 1e3:.1f} us | {_label(f['pick'])} {f['ms'] * 1e3:.1f} us | "
            f"{f['ms'] / f['best']:.3f} | {_label(f['best_key'])} {f['best'] * 1e3:.1f} us |"
        )


def _label(key: tuple) -> str:
    kernel, bm, bn, bk, warps, stages, policy = key
    return f"{kernel} {bm}x{bn}x{bk} {warps}w{stages}s SK_TILES={policy}"


if __name__ == "__main__":
    main()
