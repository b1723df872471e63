"""Issue 29 round 12: two things the emitted Stream-K script could still gain, timed against
cuBLAS inside a CUDA graph, interleaved; every variant checked against a float32 matmul
first (sk_round10's helpers).

    python benchmarks/sk_round12.py STREAM_K_SCRIPT --stages [--out rows.jsonl]
    python benchmarks/sk_round12.py STREAM_K_SCRIPT --align [--shapes MxNxK,..] [--out rows.jsonl]

--stages: at the 16 Stream-K shapes, where the script's choice is a power-of-two Gluon tile
whose ring fits one more stage only with the output stored in two halves (gluon_config's
EPI_SPLIT: the 128 x 256 tile, 3 -> 4 stages), the choice as emitted against the same knobs
with EPI_SPLIT 2 asked for.

--align: at the shapes whose operand rows are not on 128-byte lines (sk_round10's
ALIGN_SHAPES but 999 x 4865 x 8191, which the script copies anyway), the script's choice
on A and/or B that already sit in storage with rows padded to 64 elements (made before the
graph: what the kernel gains from the alignment alone, no copy timed), the copy of A to
such rows alone (``torch.nn.functional.pad``, as the script's ``padded`` copies, and a
copy into a strided view, and the script's own ``to_lines`` where it has one), and the
script's choice after the ``F.pad`` copy of A (both timed).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from replan_table import HELD_OUT, SHAPES  # noqa: E402
from sk_round10 import (  # noqa: E402
    ALIGN_SHAPES,
    _graph_us,
    _inputs,
    _timed_row,
    _tma_ok,
    direct,
    view64,
    warmed_module,
)

STREAM_K_SHAPES = SHAPES["stream_k"] + HELD_OUT["stream_k"]


def _emit(row: dict, sink: str | None) -> None:
    print(json.dumps({k: v for k, v in row.items() if "rel_error" not in k}), flush=True)
    if sink:
        with open(sink, "a") as f:
            f.write(json.dumps(row) + "\n")


def _knobs(mod, cfg: dict) -> dict:
    return {key: cfg[key] for key in mod.KNOBS if key in cfg}


def stage_rows(mod, sink: str | None, rounds: int) -> list[dict]:
    rows = []
    for m, n, k, dt in STREAM_K_SHAPES:
        a, b, ref, tol = _inputs(m, n, k, dt)
        chosen = {**mod.CONFIG, **mod.replan(m, n, k)}
        split = {**chosen, "EPI_SPLIT": 2}
        run_as, split_as = mod._hopper(a, chosen), mod._hopper(a, split)
        if not split_as or split_as.get("EPI_SPLIT", 1) == 1:
            continue  # (no deeper ring with the output in halves)
        runs = {"cublas": lambda a=a, b=b: a @ b,
                "chosen": lambda a=a, b=b, cfg=chosen: mod.gemm(a, b, cfg),
                "split": lambda a=a, b=b, cfg=split: mod.gemm(a, b, cfg)}  # fmt: skip
        row = {"M": m, "N": n, "K": k, "dtype": dt, "chosen_knobs": _knobs(mod, chosen),
               "run_stages": run_as["num_stages"],
               "split_stages": split_as["num_stages"]}  # fmt: skip
        _timed_row(row, runs, ref, tol, rounds)
        for label in ("chosen", "split"):
            if isinstance(row.get(label), float):
                row[f"{label}_vs_cublas"] = round(row["cublas"] / row[label], 4)
        rows.append(row)
        _emit(row, sink)
    return rows


def align_rows(mod, sink: str | None, rounds: int, only=None) -> list[dict]:
    import torch

    rows = []
    for m, n, k, dt in ALIGN_SHAPES:
        if n % 8 or k % 8 or (only and f"{m}x{n}x{k}" not in only):
            continue  # (rows not on 16 bytes: the script copies them anyway)
        a, b, ref, tol = _inputs(m, n, k, dt)
        cfg = {**mod.CONFIG, **mod.replan(m, n, k)}
        a64, b64 = view64(a), view64(b)  # made here: not timed
        kp = -(-k // 64) * 64

        def pad_a(a=a, kp=kp, k=k):
            return torch.nn.functional.pad(a, (0, kp - k))

        runs = {"cublas": lambda a=a, b=b: a @ b,
                "script": lambda a=a, b=b, cfg=cfg: mod.gemm(a, b, cfg),
                "A64 kernel": lambda b=b, cfg=cfg, a64=a64: direct(mod, a64, _tma_ok(b), cfg),
                "B64 kernel": lambda a=a, cfg=cfg, b64=b64: direct(mod, _tma_ok(a), b64, cfg),
                "AB64 kernel": lambda cfg=cfg, a64=a64, b64=b64: direct(mod, a64, b64, cfg),
                "A copy pad": pad_a,
                "A copy view": lambda a=a: view64(a),
                "A pad + kernel": lambda b=b, cfg=cfg, k=k, pad_a=pad_a: direct(
                    mod, pad_a()[:, :k], b, cfg)}  # fmt: skip
        row = {"M": m, "N": n, "K": k, "dtype": dt, "knobs": _knobs(mod, cfg)}
        # the copies are checked as copies (their result against A), the rest as GEMMs
        if hasattr(mod, "to_lines"):  # (the script's own copy to 128-byte rows, round 12)
            runs["A copy lines"] = lambda a=a: mod.to_lines(a)
        copies = {key: runs.pop(key) for key in ("A copy pad", "A copy view", "A copy lines")
                  if key in runs}  # fmt: skip
        ok = all(torch.equal(fn()[:, :k], a) for fn in copies.values())
        row["copies_equal"] = ok
        _timed_row(row, runs, ref, tol, rounds)
        if ok:  # (timed after the GEMMs, median of the rounds)
            for label, fn in copies.items():
                row[label] = round(statistics.median(_graph_us(fn) for _ in range(rounds)), 2)
        for label in ("script", "A64 kernel", "B64 kernel", "AB64 kernel", "A pad + kernel"):
            if isinstance(row.get(label), float):
                row[f"{label} vs cublas"] = round(row["cublas"] / row[label], 4)
        rows.append(row)
        _emit(row, sink)
    return rows


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("script")
    ap.add_argument("--stages", action="store_true")
    ap.add_argument("--align", action="store_true")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--shapes", help="with --align: MxNxK,... of its shapes only")
    ap.add_argument("--out")
    a = ap.parse_args()
    mod = warmed_module(a.script)
    if a.out:
        Path(a.out).write_text("")
    if a.stages:
        stage_rows(mod, a.out, a.rounds)
    if a.align:
        align_rows(mod, a.out, a.rounds, a.shapes and a.shapes.split(","))


if __name__ == "__main__":
    main()
