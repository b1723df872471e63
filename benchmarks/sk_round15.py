"""Issue 29 round 15: 2-CTA clusters with TMA multicast against cuBLAS. Round 14 found the
gap at K = 5-10K to be per-SM throughput; cuBLAS runs 1x2 / 1x4 clusters there. The cluster
kernels were no faster and are not in today's templates: they are at commit b0df4ab (check
it out and emit the script there to rerun this). The emitted script's cluster kernels
(gluon_ws.py: ``mc_gemm_kernel``, ``mc2_gemm_kernel``, selected by the config key
MULTICAST=1, with MC_SHARE "B" (two tiles one above the other, B loaded once)
or "A" (side by side, A loaded once)) are timed here against cuBLAS, the script's choice and
the same tiles without clusters, inside a CUDA graph, each checked against a float32 matmul
first (on an output the allocator hands over from a block just filled with NaN).

    python benchmarks/sk_round15.py STREAM_K_SCRIPT --smoke [--limit 30] [--out smoke.jsonl]
    python benchmarks/sk_round15.py STREAM_K_SCRIPT [--shapes MxNxK:dtype,...]
        [--configs LABEL,...] [--rounds 3] [--rep 50] [--out rows.jsonl]
    python benchmarks/sk_round15.py STREAM_K_SCRIPT --probe [--rep 30] [--out rows.jsonl]

--smoke: each cluster config once on a small and an odd shape, in a process with a time
limit (if that fails or hangs, each config in its own: a kernel that hangs is reported as
such and the others still run). --probe: one wave of 16-66 pairs of 128 x 256 tiles (does the
time step up where the clusters resident at once run out?) and the driver's
cuOccupancyMaxActiveClusters. Configs (labels): "cublas", "chosen" (the script's planner),
"128x256" and "128x192" (the script's kernels, whole tiles: policy 0), and clusters "KIND
128xBN S" (S: MC_SHARE; KIND, MC_KINDS: "mc" multicast, "mcR" multicast with the remote
arrives released at cluster scope, "mc0" no multicast, "mcI" no multicast and no remote
arrive). The default shapes are round 14's 14. Rows as JSON lines, medians in us; a table of
us and x cuBLAS at the end.
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from sk_round10 import _inputs, _timed_row, warmed_module  # noqa: E402
from sk_round13 import parse_shapes  # noqa: E402

ROUND14 = ("3008x672x5248:fp16,1184x1728x8832:bf16,1040x3984x5504:bf16,848x2736x9984:fp16,"
           "1776x1616x9088:bf16,3296x1120x16256:fp16,2240x1760x6912:bf16,"
           "2784x1600x13184:fp16,1584x2208x5120:fp16,992x4000x11136:bf16,"
           "1536x3072x6144:bf16,1536x1792x4096:bf16,3072x1152x16384:fp16,"
           "1920x1920x7168:fp16")  # fmt: skip
CONFIGS = ("cublas", "chosen", "128x256", "128x192", "mc 128x256 B", "mc 128x256 A",
           "mc 128x192 B", "mc 128x128 B", "mc 128x128 A", "mc0 128x192 B", "mcI 128x192 B",
           "mcR 128x192 B")  # fmt: skip
SMOKE = ("512x512x1024:bf16", "1000x1100x1000:fp16")
# a cluster label's first word: (MC_CAST, MC_SYNC): "mc" multicast, the remote arrives at the
# default (CTA) scope; "mcR" the same with a release at cluster scope (round 15's first
# kernels); "mc0" no multicast (each CTA loads the shared block), remote arrives; "mcI" no
# multicast and no remote arrive (independent CTAs launched in clusters)
MC_KINDS = {"mc": (1, "cta"), "mcR": (1, "cluster"), "mc0": (0, "cta"), "mcI": (0, "none")}
# --probe: one wave of pairs of 128 x 256 tiles (M = 256 x pairs, N = 256, K = 8192, bf16)
PROBE_PAIRS = (16, 32, 33, 40, 48, 56, 64, 65, 66)
PROBE_CONFIGS = ("128x256", "mcI 128x256 B", "mc0 128x256 B", "mc 128x256 B")


def config(mod, label: str) -> dict:
    """The knobs of a config label (not "cublas" / "chosen")."""
    parts = label.split()
    bm, bn = map(int, parts[-2 if parts[0].startswith("mc") else -1].split("x"))
    cfg = {**mod.CONFIG, "BLOCK_M": bm, "BLOCK_N": bn, "BLOCK_K": 64, "num_warps": 8,
           "num_stages": 5, "GROUP_M": 8, "NUM_PROGS": 132, "GLUON": 1, "SK_TILES": 0}  # fmt: skip
    if parts[0].startswith("mc"):
        cast, sync = MC_KINDS[parts[0]]
        cfg.update(MULTICAST=1, MC_SHARE=parts[-1], MC_CAST=cast, MC_SYNC=sync)
    return cfg


def tiles(m: int, n: int, label: str) -> int:
    """CTAs with a tile (clusters: both CTAs of every pair)."""
    if label in ("cublas", "chosen"):
        return 0
    parts = label.split()
    bm, bn = map(int, parts[-2 if parts[0].startswith("mc") else -1].split("x"))
    tm, tn = math.ceil(m / bm), math.ceil(n / bn)
    if parts[0].startswith("mc"):
        return 2 * (tm * math.ceil(tn / 2) if parts[-1] == "A" and bn in (128, 256)
                    else math.ceil(tm / 2) * tn)  # fmt: skip
    return tm * tn


def runs_for(mod, x, y, labels) -> dict:
    m, n, k = x.shape[0], y.shape[1], x.shape[1]
    runs = {}
    for label in labels:
        if label == "cublas":
            runs[label] = lambda x=x, y=y: x @ y
        elif label == "chosen":
            cfg = {**mod.CONFIG, **mod.replan(m, n, k)}
            runs[label] = lambda x=x, y=y, cfg=cfg: mod.gemm(x, y, cfg)
        else:
            cfg = config(mod, label)
            runs[label] = lambda x=x, y=y, cfg=cfg: mod.gemm(x, y, cfg)
    return runs


def poisoned_checks(row: dict, runs: dict, ref, tol: float, m: int, n: int, dtype) -> None:
    """Each run once on an output the caching allocator is likely to hand it from a block
    just filled with NaN (so a tile left unwritten shows), its error into ``row``; a run
    that fails is dropped from ``runs`` (``_timed_row`` checks again on unpoisoned memory)."""
    import torch

    for label in list(runs):
        if label == "cublas":
            continue
        junk = torch.full((m, n), float("nan"), device="cuda", dtype=dtype)
        del junk
        try:
            out = runs[label]()
            err = float((out.double() - ref).norm() / ref.norm())
        except Exception as exc:  # reported, not hidden
            err, row[label] = float("nan"), f"{type(exc).__name__}: {str(exc)[:200]}"
        row[f"{label} poisoned rel_error"] = err
        if not err <= tol:
            row.setdefault(label, f"wrong on poisoned output ({err:.1e})")
            del runs[label]


def smoke_one(mod, label: str, shape: str) -> dict:
    """One config once at one shape: its relative error (the output poisoned first)."""
    import torch

    ((m, n, k, dt),) = parse_shapes(shape)
    x, y, ref, tol = _inputs(m, n, k, dt)
    junk = torch.full((m, n), float("nan"), device="cuda", dtype=x.dtype)
    del junk
    out = runs_for(mod, x, y, [label])[label]()
    torch.cuda.synchronize()
    err = float((out.double() - ref).norm() / ref.norm())
    return {
        "config": label,
        "shape": shape,
        "rel_error": err,
        "ok": err <= tol,
        "nan": bool(torch.isnan(out).any()),
    }


def _smoke_run(script: str, labels, shapes, limit: int) -> list[dict]:
    """smoke_one for ``labels`` x ``shapes`` in one process with a time limit: its rows, or
    one row per pair saying why none came."""
    cmd = [sys.executable, __file__, script, "--smoke-one", ",".join(labels),
           "--shapes", ",".join(shapes)]  # fmt: skip
    try:
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=limit)
        rows = [json.loads(x) for x in done.stdout.splitlines() if x.startswith("{")]
        if len(rows) == len(labels) * len(shapes):
            return rows
        why = done.stderr[-600:]
    except subprocess.TimeoutExpired:
        rows, why = [], f"timed out ({limit} s)"
    seen = {(r["config"], r["shape"]) for r in rows}
    return rows + [{"config": c, "shape": sh, "error": why}
                   for c in labels for sh in shapes if (c, sh) not in seen]  # fmt: skip


def smoke(script: str, out: str | None, limit: int) -> None:
    """Every cluster config at the SMOKE shapes in one process; if that fails or hangs, each
    config in its own process, so that the others are still checked."""
    labels = [c for c in CONFIGS if c.startswith("mc")]
    rows = _smoke_run(script, labels, SMOKE, 3 * limit)
    if any("error" in r for r in rows):
        rows = [r for lab in labels for r in _smoke_run(script, [lab], SMOKE, limit)]
    for row in rows:
        print(json.dumps(row), flush=True)
        if out:
            with open(out, "a") as f:
                f.write(json.dumps(row) + "\n")


def max_active_clusters(mod) -> dict:
    """The driver's cuOccupancyMaxActiveClusters for the 2-CTA kernel as launched (384
    threads, its shared memory), or why not."""
    try:
        from cuda.bindings import driver as cu

        out = {}
        for name in ("mc_gemm_kernel", "mc2_gemm_kernel"):
            kernels = [k for cache in getattr(mod, name).device_caches.values()
                       for k in cache[0].values()]  # fmt: skip
            if not kernels:
                continue
            k = kernels[-1]
            k._init_handles()
            cfg = cu.CUlaunchConfig()
            cfg.gridDimX, cfg.gridDimY, cfg.gridDimZ = 132, 1, 1
            cfg.blockDimX, cfg.blockDimY, cfg.blockDimZ = 32 * k.metadata.num_warps + 128, 1, 1
            cfg.sharedMemBytes = k.metadata.shared
            attr = cu.CUlaunchAttribute()
            attr.id = cu.CUlaunchAttributeID.CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION
            attr.value.clusterDim.x, attr.value.clusterDim.y, attr.value.clusterDim.z = 2, 1, 1
            cfg.attrs, cfg.numAttrs = [attr], 1
            err, n = cu.cuOccupancyMaxActiveClusters(cu.CUfunction(k.function), cfg)
            out[name] = {"err": str(err), "clusters": n, "shared": k.metadata.shared}
        return out
    except Exception as exc:  # reported, not hidden
        return {"error": f"{type(exc).__name__}: {str(exc)[:300]}"}


def probe(mod, out: str | None, rep: int) -> None:
    """One wave of PROBE_PAIRS pairs of 128 x 256 tiles: where the cluster kernels' time
    steps up as pairs are added, the clusters resident at once end."""
    labels = ["cublas", *PROBE_CONFIGS]
    rows = []
    for pairs in PROBE_PAIRS:
        m, n, k = 256 * pairs, 256, 8192
        x, y, ref, tol = _inputs(m, n, k, "bf16")
        row = {"M": m, "N": n, "K": k, "dtype": "bf16", "pairs": pairs}
        runs = runs_for(mod, x, y, labels)
        poisoned_checks(row, runs, ref, tol, m, n, x.dtype)
        _timed_row(row, runs, ref, tol, 1, rep)
        rows.append(row)
        if out:
            with open(out, "a") as f:
                f.write(json.dumps(row) + "\n")
    print(json.dumps({"max_active_clusters": max_active_clusters(mod)}))
    summary(rows, labels)


def summary(rows: list[dict], labels) -> None:
    """A table of us and x cuBLAS per shape and config, then each config's median ratio."""
    ratios = {label: [] for label in labels if label != "cublas"}
    print("\n" + " | ".join(["shape", *labels]))
    for row in rows:
        cells = [f"{row['M']}x{row['N']}x{row['K']} {row['dtype']}"]
        for label in labels:
            v = row.get(label)
            if isinstance(v, float) and label != "cublas":
                ratios[label].append(row["cublas"] / v)
                cells.append(f"{v:.1f} ({row['cublas'] / v:.3f})")
            else:
                cells.append(f"{v:.1f}" if isinstance(v, float) else str(v)[:24])
        print(" | ".join(cells))
    for label, r in ratios.items():
        if r:
            print(
                f"{label}: median {statistics.median(r):.3f} min {min(r):.3f} "
                f">=0.9: {sum(x >= 0.9 for x in r)}/{len(r)}"
            )
    timed = [[row["cublas"] / row[lab] for lab in labels
              if lab != "cublas" and isinstance(row.get(lab), float)] for row in rows]  # fmt: skip
    best = [max(r) for r in timed if r]
    if best:
        print(f"best per shape: median {statistics.median(best):.3f} min {min(best):.3f}")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("script")
    ap.add_argument("--shapes", default=ROUND14)
    ap.add_argument("--configs", default=",".join(CONFIGS))
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--rep", type=int, default=50)
    ap.add_argument("--out")
    ap.add_argument("--smoke", action="store_true")
    ap.add_argument("--smoke-one")
    ap.add_argument("--limit", type=int, default=60)
    ap.add_argument("--probe", action="store_true")
    a = ap.parse_args()
    if a.out:
        Path(a.out).write_text("")
    if a.probe:
        probe(warmed_module(a.script), a.out, a.rep)
        return
    if a.smoke:
        smoke(a.script, a.out, a.limit)
        return
    if a.smoke_one:
        from replan_table import _module

        mod = _module(Path(a.script))
        for label in a.smoke_one.split(","):
            for shape in a.shapes.split(","):
                print(json.dumps(smoke_one(mod, label, shape)), flush=True)
        return
    labels = a.configs.split(",")
    mod = warmed_module(a.script)
    rows = []
    for m, n, k, dt in parse_shapes(a.shapes):
        x, y, ref, tol = _inputs(m, n, k, dt)
        chosen = {**mod.CONFIG, **mod.replan(m, n, k)}
        knobs = {key: chosen[key] for key in (*mod.KNOBS, "MULTICAST", "MC_SHARE") if key in chosen}
        row = {"M": m, "N": n, "K": k, "dtype": dt, "chosen_knobs": knobs,
               "ctas": {lab: tiles(m, n, lab) for lab in labels if tiles(m, n, lab)}}  # fmt: skip
        runs = runs_for(mod, x, y, labels)
        poisoned_checks(row, runs, ref, tol, m, n, x.dtype)
        _timed_row(row, runs, ref, tol, a.rounds, a.rep)
        rows.append(row)
        print(json.dumps({key: v for key, v in row.items() if "rel_error" not in key}),
              flush=True)  # fmt: skip
        if a.out:
            with open(a.out, "a") as f:
                f.write(json.dumps(row) + "\n")
    summary(rows, labels)


if __name__ == "__main__":
    main()
