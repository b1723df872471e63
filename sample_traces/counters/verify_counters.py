"""The truth of the issue-29 counter captures, read with the csv module alone (no advisor):
per profiled launch the numbers advisor's counter decisions use, then per kernel (name,
grid, block) their medians. tests/trace/test_ncu.py and tests/rules/test_counter_rules.py
hold these numbers.

    python3 sample_traces/counters/verify_counters.py [RAW.csv.gz ...]
"""

from __future__ import annotations

import csv
import gzip
import statistics
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
METRICS = {
    "duration_us": "gpu__time_duration.sum",
    "sm_max": "sm__cycles_active.max",
    "sm_avg": "sm__cycles_active.avg",
    "tensor_pct": "sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active",
    "dram_pct": "gpu__dram_throughput.avg.pct_of_peak_sustained_elapsed",
    "tma_loads": "smsp__inst_executed_op_tma_ld.sum",
    "cpi": "smsp__average_warp_latency_per_inst_issued.ratio",
    "long_sb": "smsp__average_warps_issue_stalled_long_scoreboard_per_issue_active.ratio",
    "barrier": "smsp__average_warps_issue_stalled_barrier_per_issue_active.ratio",
    "mio": "smsp__average_warps_issue_stalled_mio_throttle_per_issue_active.ratio",
    "short_sb": "smsp__average_warps_issue_stalled_short_scoreboard_per_issue_active.ratio",
    "smem_limit": "launch__occupancy_limit_shared_mem",
}


def number(text: str) -> float:
    return float(text.replace(",", ""))


def launches(path: Path) -> list[dict]:
    with gzip.open(path, "rt", newline="") as fh:
        rows = list(csv.reader(fh))
    head, units, data = rows[0], rows[1], rows[2:]
    assert units[head.index(METRICS["duration_us"])] == "us"
    out = []
    for row in data:
        cell = dict(zip(head, row, strict=True))
        v = {k: number(cell[m]) for k, m in METRICS.items()}
        v["imbalance"] = v["sm_max"] / v["sm_avg"]
        v["idle"] = 1 - v["sm_avg"] / v["sm_max"]
        v["memory_stalls"] = (v["long_sb"] + v["barrier"] + v["mio"] + v["short_sb"]) / v["cpi"]
        v["kernel"] = cell["Kernel Name"]
        v["config"] = (cell["Kernel Name"][:40], cell["Grid Size"], cell["Block Size"])
        v["id"] = cell["ID"]
        out.append(v)
    return out


def main(paths: list[Path]) -> None:
    shown = ["duration_us", "imbalance", "idle", "tensor_pct", "dram_pct", "tma_loads",
             "memory_stalls", "smem_limit"]  # fmt: skip
    for path in paths:
        rows = launches(path)
        print(f"{path.name}: {len(rows)} launches")
        for v in rows:
            print(f"  {v['id']:>2} {v['kernel'][:44]:44s} " + " ".join(
                f"{k}={v[k]:.6g}" for k in shown))  # fmt: skip
        groups: dict[tuple, list[dict]] = {}
        for v in rows:
            groups.setdefault(v["config"], []).append(v)
        print("  per kernel (name, grid, block): medians")
        for key, vs in groups.items():
            med = {k: statistics.median(v[k] for v in vs) for k in shown}
            total = sum(v["duration_us"] for v in vs)
            print(f"    {key[0][:40]:40s} {key[1]:14s} n={len(vs)} total_us={total:.3f} "
                  + " ".join(f"{k}={med[k]:.6g}" for k in shown[1:]))  # fmt: skip


if __name__ == "__main__":
    given = [Path(p) for p in sys.argv[1:]]
    main(given or [HERE / "counters.ncu.raw.csv.gz", HERE / "ws.ncu.raw.csv.gz"])
