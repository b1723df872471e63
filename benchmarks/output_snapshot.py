"""Every user-visible output of advisor on every sample and public trace, written to a folder,
so that two checkouts (before and after a change meant to keep behaviour) can be compared
byte for byte.

    python benchmarks/output_snapshot.py SNAPSHOT_DIR [--root CHECKOUT] [--jobs 2]
    python benchmarks/output_snapshot.py --compare BEFORE_DIR AFTER_DIR

For each trace (or group of ranks): `analyze` as a table (120 columns) and as JSON, `analyze
--emit` (the emitted scripts), `report` (markdown; the PNG charts by SHA-256), and `gate` of
the trace against itself (table, markdown, JSON); each command's exit code and stderr too.
The commands run in CHECKOUT (default: this repository) with that checkout's package first on
the path, traces named relative to it and outputs written under one fixed scratch folder then
moved, so paths printed in the outputs are the same for both checkouts.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import shutil
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

HERE = Path(__file__).resolve().parents[1]
SCRATCH = Path("/tmp/advisor_output_snapshot_work")


def _cases(root: Path) -> list[tuple[str, list[str], list[str]]]:
    """The traces of the repository: each alone, and the rank groups together."""
    patterns = [
        "sample_traces/*.sqlite",
        "sample_traces/kineto/*.pt.trace.json.gz",
        "sample_traces/why/*.sqlite",
        "sample_traces/why/*.pt.trace.json.gz",
        "sample_traces/counters/counters.sqlite",
        "sample_traces/counters/counters.pt.trace.json.gz",
        "tests/data/public/kineto/*.json.gz",
        "tests/data/public/nsys/*.sqlite",
        "tests/data/public/rocprof/v3/*kernel_trace*.csv",
        "tests/data/public/rocprof/v3_json/*.json.gz",
        "tests/data/public/rocprof/compute/*pmc_perf.csv",
        "tests/data/public/rocprof/v*/*timestamps.csv",
    ]
    cases = []
    for pattern in patterns:
        for p in sorted(root.glob(pattern)):
            rel = str(p.relative_to(root))
            cases.append((rel.replace("/", "__"), [rel], []))
    if (root / "sample_traces/rocprof/mi350x_rank0").exists():
        cases.append(("rocprof_mi350x_rank0", ["sample_traces/rocprof/mi350x_rank0"], []))
    ranks = [f"tests/data/public/kineto/hta_sampled_rank-{r}.json.gz" for r in (0, 1)]
    cases.append(("hta_sampled_ranks", ranks, []))
    raw = "sample_traces/counters/counters.ncu.raw.csv.gz"
    if (root / raw).exists():
        cases.append(("ncu_raw_alone", [raw], []))
        cases.append(("counters_joined", ["sample_traces/counters/counters.sqlite"],
                      ["--counters", raw]))  # fmt: skip
    return cases


def _run(root: Path, args: list[str], out: Path, name: str) -> None:
    env = {**os.environ, "COLUMNS": "120", "PYTHONPATH": str(root), "PYTHONHASHSEED": "0"}
    env.pop("ADVISOR_UPDATE_README", None)
    r = subprocess.run([sys.executable, "-m", "advisor", *args], cwd=root, env=env,
                       capture_output=True, timeout=900)  # fmt: skip
    (out / f"{name}.stdout").write_bytes(r.stdout)
    (out / f"{name}.stderr").write_bytes(r.stderr)
    (out / f"{name}.rc").write_text(str(r.returncode))


def _snapshot_case(root: Path, case: tuple[str, list[str], list[str]], dest: Path) -> str:
    name, traces, extra = case
    work = SCRATCH / name
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    _run(root, ["analyze", *traces, *extra], work, "analyze_table")
    _run(root, ["analyze", *traces, *extra, "--format", "json"], work, "analyze_json")
    _run(root, ["analyze", *traces, *extra, "--emit", str(work / "emit")], work, "emit")
    (work / "report").mkdir()
    _run(root, ["report", *traces, "-o", str(work / "report" / "report.md")], work, "report")
    gate = [a for t in traces for a in ("--baseline", t)]
    gate += [a for t in traces for a in ("--candidate", t)]
    for fmt in ("table", "markdown", "json"):
        _run(root, ["gate", *gate, "--format", fmt], work, f"gate_{fmt}")
    for png in work.rglob("*.png"):  # (the bytes of a PNG depend on the plotting library)
        digest = hashlib.sha256(png.read_bytes()).hexdigest()
        png.with_suffix(".png.sha256").write_text(digest + "\n")
        png.unlink()
    shutil.rmtree(dest / name, ignore_errors=True)
    shutil.move(str(work), str(dest / name))
    return name


def snapshot(dest: Path, root: Path, jobs: int) -> None:
    dest.mkdir(parents=True, exist_ok=True)
    cases = _cases(root)
    with ThreadPoolExecutor(jobs) as pool:
        for n, name in enumerate(pool.map(lambda c: _snapshot_case(root, c, dest), cases), 1):
            print(f"{n}/{len(cases)} {name}", file=sys.stderr)


def compare(before: Path, after: Path) -> int:
    """Files that differ, are missing or are new (relative paths); exit 1 if any."""
    a = {p.relative_to(before) for p in before.rglob("*") if p.is_file()}
    b = {p.relative_to(after) for p in after.rglob("*") if p.is_file()}
    bad = 0
    for rel in sorted(a | b):
        if rel not in a or rel not in b:
            print(f"{'only after' if rel not in a else 'only before'}: {rel}")
            bad += 1
        elif (before / rel).read_bytes() != (after / rel).read_bytes():
            print(f"differs: {rel}")
            bad += 1
    print(f"{len(a | b)} files, {bad} differ")
    return 1 if bad else 0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("dest", nargs="?", type=Path)
    ap.add_argument("--root", type=Path, default=HERE)
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--compare", nargs=2, type=Path, metavar=("BEFORE", "AFTER"))
    a = ap.parse_args()
    if a.compare:
        return compare(*a.compare)
    if a.dest is None:
        ap.error("a snapshot folder (or --compare BEFORE AFTER)")
    snapshot(a.dest.resolve(), a.root.resolve(), a.jobs)
    return 0


if __name__ == "__main__":
    sys.exit(main())
