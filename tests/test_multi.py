"""Many traces at once: the 2-GPU sample split into one export per rank (as two separately
profiled processes would write them), analysed in parallel and merged."""

import json
import subprocess
import sys

import pytest
from conftest import H200_2GPU, ROOT, analysis_of

from advisor.multi import analyze_many, merge
from advisor.options import AnalysisOptions

sys.path.insert(0, str(ROOT / "sample_traces"))
from split_ranks import split  # noqa: E402


@pytest.fixture(scope="module")
def ranks(tmp_path_factory):
    return [str(p) for p in split(str(H200_2GPU), tmp_path_factory.mktemp("ranks"))]


@pytest.fixture(scope="module")
def merged(ranks):
    return merge(analyze_many(ranks, AnalysisOptions(jobs=2)))


def test_per_rank_traces_hold_one_process_each(ranks):
    a0, a1 = analysis_of(ranks[0]), analysis_of(ranks[1])
    assert a0.trace.devices == [0] and a1.trace.devices == [1]
    whole = analysis_of(H200_2GPU)
    assert len(a0.trace.kernels) + len(a1.trace.kernels) == len(whole.trace.kernels)


def test_stragglers_name_the_rank_with_extra_work(merged):
    s = {x["name"]: x for x in merged["stragglers"]}
    straggler = s["allreduce_straggler"]
    # rank 1 runs 8 matmuls per step there, rank 0 four: about twice the compute
    assert straggler["slowest_rank"] == 1 and 1.8 < straggler["ratio"] < 2.1
    assert merged["stragglers"][0]["name"] == "allreduce_straggler"  # largest spread first
    assert s["allreduce_exposed"]["ratio"] < 1.05


def test_cross_rank_skew_equals_the_single_file_view(merged):
    whole = analysis_of(H200_2GPU).collectives
    per_name = whole.groupby("name")["skew_ns"].max().to_dict()
    got = {c["name"]: c["max_skew_ns"] for c in merged["collective_skew"]}
    assert got == {k: int(v) for k, v in per_name.items()}


def test_findings_are_combined_and_ranked(merged):
    ranks_seen = {f["rank"] for f in merged["findings"]}
    assert ranks_seen == {0, 1}
    savings = [f["est_savings_ns"] for f in merged["findings"]]
    assert savings == sorted(savings, reverse=True)


def test_serial_and_parallel_agree(ranks, merged):
    done = []
    serial = merge(
        analyze_many(ranks, AnalysisOptions(jobs=1), on_done=lambda r: done.append(r.path))
    )
    assert json.dumps(serial, default=str) == json.dumps(merged, default=str)
    assert done == ranks  # one progress step per trace


def test_parallel_reports_each_trace_once(ranks):
    done = []
    analyze_many(ranks, AnalysisOptions(jobs=2), on_done=lambda r: done.append(r.path))
    assert sorted(done) == sorted(ranks)


def test_cli_many_traces_with_a_bad_one(ranks, tmp_path):
    bad = tmp_path / "broken.sqlite"
    bad.write_bytes(b"not sqlite")
    proc = subprocess.run([sys.executable, "-m", "advisor", "analyze", *ranks, str(bad),
                           "--format", "json", "--jobs", "2"], capture_output=True, text=True,
                          timeout=300)  # fmt: skip
    assert proc.returncode == 2
    assert proc.stderr.strip() == (
        f"advisor: error: {bad}: not a supported trace: expected "
        "an Nsight Systems SQLite export or rocprof CSV/JSON"
    )
    d = json.loads(proc.stdout)
    assert [r["error"] is None for r in d["ranks"]] == [True, True, False]
    assert d["stragglers"] and d["collective_skew"] and d["findings"]


def test_ranks_carry_their_data_quality_warnings():
    from conftest import PUBLIC_NSYS

    from advisor.multi import analyze_one, merge

    path = str(PUBLIC_NSYS / "nsysai_h100_2gpu_window_nsys2026.2.sqlite")
    merged = merge([analyze_one(path, AnalysisOptions(gpu="H100-SXM"))])
    (rank,) = merged["ranks"]
    assert any(
        w.startswith("1,810 of 3,442 kernel launches have no launch call") for w in rank["warnings"]
    )
