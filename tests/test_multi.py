"""Many traces of one job: the 2-GPU sample split into one export per rank (as two
separately profiled processes would write them) gives the same analysis as the whole
export; colliding device ids are renumbered; a bad trace is reported, the rest analysed."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import H200_2GPU, H200_SINGLE, ROOT, analysis_of

from advisor.cluster import LocalRunner
from advisor.findings import find
from advisor.multi import load_one, merge_traces
from advisor.options import AnalysisOptions
from advisor.parts import merge_parts, rank_rows
from advisor.pipeline import run_trace
from advisor.render.json import document

sys.path.insert(0, str(ROOT / "sample_traces"))
from split_ranks import split  # noqa: E402


@pytest.fixture(scope="module")
def ranks(tmp_path_factory):
    return [str(p) for p in split(str(H200_2GPU), tmp_path_factory.mktemp("ranks"))]


def cli_json(*args):
    proc = subprocess.run([sys.executable, "-m", "advisor", "analyze", *args, "--format",
                           "json"], capture_output=True, text=True, timeout=300)  # fmt: skip
    return proc, (json.loads(proc.stdout) if proc.stdout else None)


def test_per_rank_traces_hold_one_process_each(ranks):
    a0, a1 = analysis_of(ranks[0]), analysis_of(ranks[1])
    assert a0.trace.devices == [0] and a1.trace.devices == [1]
    whole = analysis_of(H200_2GPU)
    assert len(a0.trace.kernels) + len(a1.trace.kernels) == len(whole.trace.kernels)


def test_split_ranks_give_the_same_answer_as_the_whole_export(ranks):
    _, whole = cli_json(str(H200_2GPU))
    proc, split_doc = cli_json(*ranks, "--jobs", "2")
    assert proc.returncode == 0, proc.stderr
    for key in whole:
        if key not in ("trace", "findings"):
            assert split_doc[key] == whole[key], key
    # the same findings, each naming the rank whose trace holds its device
    ranked = split_doc["findings"]
    assert [f.pop("rank") for f in ranked] == [f["device"] for f in ranked]  # rank r: device r
    assert ranked == whole["findings"] and whole["findings"]
    # the cross-rank waits are seen: the straggler range's all-reduces wait for device 1
    region = next(r for r in split_doc["regions"]
                  if r["name"] == "allreduce_straggler" and r["device"] == 0)  # fmt: skip
    assert region["comm_wait_ns"] > 1_000_000
    assert [r["devices"] for r in split_doc["ranks"]] == [[0], [1]]


def test_serial_and_parallel_runs_agree(ranks):
    done = []
    opts = AnalysisOptions()
    serial = LocalRunner(1).map(ranks, opts, on_done=lambda p: done.append(p.path))
    assert done == ranks  # one progress step per trace
    parallel = LocalRunner(2).map(ranks, opts)
    a, b = merge_parts(serial), merge_parts(parallel)
    assert document(a, find(a)) == document(b, find(b))


def test_colliding_device_ids_are_renumbered():
    # the same single-GPU trace twice: both say device 0 and share process ids
    loads = [load_one(str(H200_SINGLE), None) for _ in range(2)]
    t = merge_traces(loads)
    assert t.devices == [0, 1] and [x.devices for x in loads] == [{0: 0}, {0: 1}]
    assert t.kernels["pid"].nunique() == 2
    parts = LocalRunner(1).map([str(H200_SINGLE)] * 2, AnalysisOptions())
    rows = rank_rows(parts)
    assert [(r["rank"], r["devices"], r["trace_devices"]) for r in rows] == [
        (0, [0], [0]), (1, [1], [0])
    ]  # fmt: skip
    for a in (run_trace(t)[0], merge_parts(parts)):  # the whole Trace, and the parts
        one = analysis_of(H200_SINGLE)
        per_device = a.devices.set_index("device")["gpu_busy_ns"]
        assert per_device.tolist() == [one.devices["gpu_busy_ns"].iloc[0]] * 2


def test_options_work_with_several_traces(ranks, tmp_path):
    proc, doc = cli_json(*ranks, "--device", "1", "--range", "allreduce_straggler",
                         "--emit", str(tmp_path / "out"))  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert {r["device"] for r in doc["regions"]} == {1}
    assert {r["name"] for r in doc["regions"]} == {"allreduce_straggler"}
    assert all(f["config"] for f in doc["findings"]) and (tmp_path / "out").is_dir()


def test_cli_many_traces_with_a_bad_one(ranks, tmp_path):
    bad = tmp_path / "broken.sqlite"
    bad.write_bytes(b"not sqlite")
    proc, doc = cli_json(*ranks, str(bad), "--jobs", "2")
    assert proc.returncode == 2
    assert proc.stderr.strip() == (
        f"advisor: error: {bad}: not a supported trace: expected "
        "an Nsight Systems SQLite export or .nsys-rep, a PyTorch profiler (Kineto) JSON, a "
        "rocprofv3 rocpd database or rocprof CSV/JSON, or an Nsight Compute report (.ncu-rep or "
        "its raw page CSV)"
    )
    assert [r["error"] is None for r in doc["ranks"]] == [True, True, False]
    assert doc["collectives"] and doc["findings"]


def test_ranks_carry_their_data_quality_warnings(ranks):
    from conftest import PUBLIC_NSYS

    path = str(PUBLIC_NSYS / "nsysai_h100_2gpu_window_nsys2026.2.sqlite")
    t = merge_traces([load_one(path, None), load_one(ranks[0], None)])
    # the reader's warnings say which rank they are about; the analysis' notes cover all
    assert any(w.startswith(f"rank 0 ({path}): no GPU facts for device(s)") for w in t.warnings)
    a, _ = run_trace(t)
    assert any("kernel launches have no launch call" in n for n in a.notes)


def test_a_single_rank_says_the_wait_is_unknown(ranks):
    # rank 0 alone: its all-reduces wait for rank 1, which this trace cannot see
    from advisor.findings import find

    f = find(analysis_of(ranks[0]))
    exposed = next(x for x in f if x.rule == "exposed-comm"
                   and x.region == "allreduce_straggler")  # fmt: skip
    assert exposed.evidence["comm_wait_ns"] is None
    assert "its wait for other ranks is not measured (the trace holds one rank)" in exposed.summary
    assert not [x for x in f if x.rule == "rank-skew"]


@pytest.mark.parametrize(
    "name",
    ["nsysai_2gpu_sendrecv_before_nsys2026.2.sqlite", "nsysai_h100_2gpu_window_nsys2026.2.sqlite"],
)
def test_public_two_gpu_exports_split_per_rank_agree(name, tmp_path):
    # the public 2-GPU training windows (no GPU facts; NCCL SendRecv / all-to-all), split
    # into one export per process: the same document as the whole export
    from conftest import PUBLIC_NSYS

    whole_path = PUBLIC_NSYS / name
    parts = [str(p) for p in split(str(whole_path), tmp_path)]
    assert len(parts) == 2
    _, whole = cli_json(str(whole_path))
    _, per_rank = cli_json(*parts)
    held = {d: r["rank"] for r in per_rank["ranks"] for d in r["devices"]}
    for f in per_rank["findings"]:  # each finding names the rank holding its device
        assert f.pop("rank") == held[f["device"]]
    assert {k: v for k, v in whole.items() if k != "trace"} == {
        k: v for k, v in per_rank.items() if k not in ("trace", "ranks")
    }


def test_a_jobs_reports_name_its_traces_once(ranks, tmp_path):
    # the terminal's title: the count and the shared folder (the Ranks table lists each)
    proc = subprocess.run([sys.executable, "-m", "advisor", "analyze", *ranks],
                          capture_output=True, text=True, timeout=300,
                          env={**os.environ, "COLUMNS": "120"})  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    folder, names = Path(ranks[0]).parent, [Path(r).name for r in ranks]
    assert proc.stdout.splitlines()[0] == (
        f"advisor analyze 2 traces in {folder} ({names[0]}, {names[1]})"
    )
    assert all(proc.stdout.count(r) == 1 for r in ranks)  # (the Ranks table's rows)
    assert proc.stdout.splitlines()[2].startswith("GPU 0, 1: NVIDIA H200")
    # the markdown report of the folder: titled by it, every trace listed in rank order
    out = tmp_path / "job.md"
    proc = subprocess.run([sys.executable, "-m", "advisor", "report", str(folder), "-o",
                           str(out)],
                          capture_output=True, text=True, timeout=300)  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    lines = out.read_text().splitlines()
    assert lines[0] == f"# advisor tuning report: {folder.name}, 2 traces"
    assert lines[4].startswith(f"Traces (2, one per rank, in rank order): `{ranks[0]}`, "
                               f"`{ranks[1]}` (nsys-sqlite, ")  # fmt: skip
