"""Nsight Compute reports (issue 29): the raw page read as a kernel-level trace with its
counters, ncu's rule results from the details page beside it, .ncu-rep exported with ncu,
and the counters joined to a timeline of the same program (Nsight Systems, Kineto).

The numbers are those of the captures in sample_traces/counters (an H200, ncu 2025.3.1),
read with the plain csv module (sample_traces/counters/verify_counters.py prints them). A
stand-in ``ncu`` plays the real one for .ncu-rep reports: on the H200, ncu 2025.3.1's
``ncu --import ws.ncu-rep --csv --page raw`` and ``--page details`` (what export_report
runs; the report is kept as ws.ncu-rep.xz: ``xz -dk`` it) write exactly ws.ncu.raw.csv.gz's
and ws.ncu.details.csv.gz's text, exit 0, nothing on stderr."""

import gzip
import os
import stat
import subprocess
import sys

import pytest
from conftest import SAMPLES, sha256

from advisor.errors import AdvisorInputError
from advisor.trace.counters import join_counters, kernel_base_name
from advisor.trace.load import load_counters, load_trace
from advisor.trace.ncu import read_ncu

COUNTERS = SAMPLES / "counters"
RAW = COUNTERS / "counters.ncu.raw.csv.gz"
DETAILS = COUNTERS / "counters.ncu.details.csv.gz"
WS_RAW = COUNTERS / "ws.ncu.raw.csv.gz"


@pytest.fixture(scope="module")
def ncu():
    return load_trace(RAW)


def test_the_raw_page_is_a_kernel_level_trace(ncu):
    k = ncu.kernels
    assert ncu.format == "ncu-csv" and not ncu.timeline
    assert len(k) == 14
    assert list(k["name"][:2]) == ["tiled_gemm_kernel"] * 2
    first = k.iloc[0]
    assert (first.grid_x, first.grid_y, first.grid_z) == (6, 22, 1)
    assert (first.block_x, first.block_y, first.block_z) == (256, 1, 1)
    # 196 registers, 0 B static and 147.456 Kbyte/block dynamic shared memory (units row)
    assert (first.registers, first.static_smem, first.dynamic_smem) == (196, 0, 147456)
    assert first.end - first.start == 101984  # gpu__time_duration.sum 101.984 us
    # ncu serializes the launches: end to end, no gap
    assert (k["start"].to_numpy()[1:] == k["end"].to_numpy()[:-1]).all()
    assert k["end"].iloc[-1] == 2452864  # the 14 durations summed (ns)
    # the elementwise kernels keep ncu's demangled name and get its function's own name
    assert k["demangled"][12].startswith("void at::vectorized_elementwise_kernel<8, at::CUDAFun")
    assert k["name"][12] == "vectorized_elementwise_kernel"
    assert (k["grid_x"][12], k["registers"][12]) == (524288, 34)  # "524,288" in the CSV
    nvjet = k.iloc[8]
    assert (nvjet.grid_x, nvjet.grid_y, nvjet.cluster_x, nvjet.dynamic_smem) == (2, 66, 2, 213188)
    gpu = ncu.gpus[0]
    assert (gpu.name, gpu.sm_count, gpu.compute_capability) == ("NVIDIA H200", 132, "9.0")
    assert (gpu.shared_mem_per_sm, gpu.max_shared_mem_per_block) == (233472, 232448)
    assert gpu.source == "trace (Nsight Compute device attributes)"
    assert any("holds no timeline" in w for w in ncu.warnings)


def test_the_counters_per_launch(ncu):
    c = ncu.counters
    assert list(c["launch"]) == list(range(14)) == list(c["profiled"])
    tail = c.iloc[4]  # the Triton GEMM at 133 tiles: one SM runs the 133rd tile alone
    assert tail.sm_active_cycles_max == 316052
    assert tail.sm_active_cycles_avg == pytest.approx(158593.136364)
    assert tail.tensor_pipe_pct == pytest.approx(83.272815)
    assert tail.tma_loads == 0 and tail.smem_limit_ctas == 1
    assert c.iloc[8].tma_loads == 84480  # cuBLAS nvjet loads through TMA
    assert c.iloc[8].tensor_pipe_pct == pytest.approx(95.096111)
    assert c.iloc[12].dram_pct == pytest.approx(91.74108)  # the 3 GiB bf16 add
    assert c.iloc[0].warp_cycles_per_issue == pytest.approx(8.473889)


def test_the_details_page_beside_it_gives_ncus_rule_results(ncu):
    r = ncu.counter_rules
    assert len(r) == 149  # rows with a Rule Name in counters.ncu.details.csv.gz
    assert f"{DETAILS.name} (ncu's rule results)" in ncu.sources
    imbalance = r[(r["profiled"] == 4) & (r["rule"] == "WorkloadImbalance")]
    assert list(imbalance["speedup"]) == [23.99, 23.71, 23.99, 5.628]
    assert "49.82% above the average" in imbalance["description"].iloc[0]
    tail = r[(r["profiled"] == 4) & (r["rule"] == "LaunchConfiguration")]
    assert 50 in list(tail["speedup"])
    assert set(r["type"]) == {"INF", "OPT", "WRN"}


def test_kernel_base_names():
    cases = {
        "void at::native::vectorized_elementwise_kernel<(int)4, at::native::CUDAFunctor_add"
        "<float>, std::array<char *, 3>>(int, T2, T3)": "vectorized_elementwise_kernel",
        "void at::vectorized_elementwise_kernel<4, at::CUDAFunctor_add<float>, std::array<char "
        "*, 3>>(int, T2, T3)": "vectorized_elementwise_kernel",
        "void at::native::(anonymous namespace)::distribution_elementwise_grid_stride_kernel"
        "<float, 4, void at::native::templates::cuda::normal_and_transform<": (
            "distribution_elementwise_grid_stride_kernel"
        ),  # (cut short inside its template arguments)
        "nvjet_sm90_tst_256x128_64x4_1x2_h_bz_coopA_NNT": (
            "nvjet_sm90_tst_256x128_64x4_1x2_h_bz_coopA_NNT"
        ),
        "vectorized_elementwise_kernel": "vectorized_elementwise_kernel",
        "void cutlass::Kernel2<cutlass_80_tensorop_s1688gemm_64x64_16x6_tn_align4>(T1::Params)": (
            "Kernel2"
        ),
    }
    for name, base in cases.items():
        assert kernel_base_name(name) == base, name


@pytest.mark.parametrize("timeline", ["counters.sqlite", "counters.pt.trace.json.gz"])
def test_counters_join_the_timeline_of_the_same_program(timeline):
    t = load_trace(COUNTERS / timeline)
    join = join_counters(t, load_counters(RAW), "R")
    assert (join.profiled, join.joined, join.unmatched, join.registers_differ) == (14, 14, {}, 0)
    rows = t.counters["launch"].to_numpy()
    k = t.kernels.iloc[rows]
    # by name, grid, block and launch order: each profiled launch lands on its twin; the two
    # elementwise kernels at one grid (the error check's subtraction and abs) stay apart
    assert list(k["grid_x"]) == [6, 6, 4224, 4224, 7, 7, 4256, 4256, 2, 2, 2, 2, 524288, 524288]
    functors = ["CUDAFunctor_add<float>", "AbsFunctor<float>"] * 2
    assert all(f in d for f, d in zip(functors, k["demangled"].iloc[[2, 3, 6, 7]], strict=True))
    # the GEMMs and the add lasted within 2.5 % of the profiled replay (the 7-13 us elementwise
    # kernels up to 30 % less: ncu flushes the caches before each replay)
    ncu_ns = load_trace(RAW).kernels.eval("end - start").to_numpy()
    ratio = (k["end"] - k["start"]).to_numpy() / ncu_ns
    assert abs(ratio[ncu_ns > 50_000] - 1).max() < 0.025 and (ratio > 0.7).all()
    assert "R (counters: 14 of 14 profiled launches joined to the timeline, 4 kernel(s))" in (
        t.sources
    )
    assert not [w for w in t.warnings if "--counters" in w]


def test_counters_of_another_program_join_nothing_and_say_so():
    t = load_trace(COUNTERS / "counters.sqlite")
    join = join_counters(t, load_counters(WS_RAW), "ws.ncu.raw.csv.gz")
    assert (join.profiled, join.joined) == (2, 0)
    (warning,) = [w for w in t.warnings if "--counters" in w]
    assert "none of its 2 profiled launches matches" in warning
    assert "ws_gemm_kernel (2)" in warning and "the timeline's alone" in warning
    assert (t.counters["launch"] == -1).all()


def test_some_launches_left_out_are_counted(ncu):
    t = load_trace(COUNTERS / "counters.sqlite")
    extra = load_counters(RAW)
    extra.counters.loc[4:5, "grid_x"] = 8  # two profiled launches at a grid the timeline lacks
    join = join_counters(t, extra, "R")
    assert (join.joined, join.unmatched, join.other_config) == (12, {"tiled_gemm_kernel": 2}, 2)
    (warning,) = [w for w in t.warnings if "--counters" in w]
    assert "2 of 14 profiled launches match no launch" in warning
    assert "tiled_gemm_kernel (2)" in warning and "at another grid or block" in warning


def _rewrite(tmp_path, name: str, edit) -> str:
    with gzip.open(RAW, "rt") as fh:
        lines = fh.read().splitlines(keepends=True)
    path = tmp_path / name
    path.write_text("".join(edit(lines)))
    return str(path)


def test_other_units_are_converted(tmp_path):
    # the same page with base units (--print-units base): nsecond, byte/block
    def base_units(lines):
        head = lines[0].rstrip("\r\n").split('","')
        units = lines[1].rstrip("\r\n").split('","')
        i = head.index("gpu__time_duration.sum")
        j = head.index("launch__shared_mem_per_block_dynamic")
        units[i], units[j] = "nsecond", "byte/block"
        rows = []
        for line in lines[2:]:
            cells = line.rstrip("\r\n").split('","')
            cells[i] = str(float(cells[i]) * 1000)
            cells[j] = str(float(cells[j]) * 1000)
            rows.append('","'.join(cells) + "\n")
        return [lines[0], '","'.join(units) + "\n", *rows]

    t = read_ncu(_rewrite(tmp_path, "base.raw.csv", base_units))
    same = load_trace(RAW)
    assert (t.kernels["end"] == same.kernels["end"]).all()
    assert (t.kernels["dynamic_smem"] == same.kernels["dynamic_smem"]).all()


def test_a_page_without_some_counters_warns(tmp_path):
    def drop_stalls(lines):
        return [line.replace("smsp__average_warp_latency_per_inst_issued.ratio", "renamed")
                for line in lines]  # fmt: skip

    t = read_ncu(_rewrite(tmp_path, "old.raw.csv", drop_stalls))
    (warning,) = [w for w in t.warnings if "lacks" in w]
    assert "1 of the 15 metrics advisor reads" in warning and "--set full" in warning
    assert t.counters["warp_cycles_per_issue"].isna().all()


@pytest.mark.parametrize(
    ("name", "edit", "says"),
    [
        ("details.csv", None, "the details page of an Nsight Compute report"),
        ("empty.raw.csv", lambda lines: lines[:2], "without kernel launches"),
        ("oldversion.raw.csv",
         lambda lines: [x.replace("gpu__time_duration.sum", "Kernel Time") for x in lines],
         "without gpu__time_duration.sum: not the raw page"),
    ],
)  # fmt: skip
def test_pages_advisor_cannot_read_are_one_error(tmp_path, name, edit, says):
    if edit is None:
        path = tmp_path / name
        with gzip.open(DETAILS) as fh:
            path.write_bytes(fh.read())
    else:
        path = _rewrite(tmp_path, name, edit)
    with pytest.raises(AdvisorInputError) as err:
        load_trace(path)
    assert says in str(err.value)


def test_counters_must_be_an_ncu_report():
    with pytest.raises(AdvisorInputError) as err:
        load_counters(COUNTERS / "counters.sqlite")
    assert "--counters: not an Nsight Compute report" in str(err.value)


def test_details_of_another_report_are_left_out(tmp_path):
    raw = tmp_path / "ws.raw.csv.gz"
    raw.write_bytes(WS_RAW.read_bytes())
    (tmp_path / "ws.details.csv.gz").write_bytes(DETAILS.read_bytes())
    t = read_ncu(raw)
    assert t.counter_rules.empty
    assert any("describes other launches" in w for w in t.warnings)


STAND_IN = """#!/bin/sh
# stand-in for `ncu --import REPORT --csv --page raw|details`
echo "$@" >> "$(dirname "$0")/calls.log"
[ "$MODE" = fail ] && { echo "==ERROR== Failed to open the report" >&2; exit 1; }
page=""
while [ $# -gt 0 ]; do
  [ "$1" = "--page" ] && page="$2"
  shift
done
gzip -dc "{dir}/counters.ncu.$page.csv.gz"
"""


def _run(args, env):
    return subprocess.run([sys.executable, "-m", "advisor", *args], capture_output=True,
                          text=True, env=env, timeout=120)  # fmt: skip


@pytest.fixture
def report(tmp_path):
    bindir = tmp_path / "bin"
    bindir.mkdir()
    ncu = bindir / "ncu"
    ncu.write_text(STAND_IN.replace("{dir}", str(COUNTERS)))
    ncu.chmod(ncu.stat().st_mode | stat.S_IXUSR)
    inputs = tmp_path / "in"
    inputs.mkdir()
    rep = inputs / "run.ncu-rep"
    rep.write_bytes(b"pretend ncu-rep bytes")
    env = {**os.environ, "PATH": f"{bindir}:{os.environ['PATH']}",
           "ADVISOR_CACHE": str(tmp_path / "cache")}  # fmt: skip
    env.pop("NCU", None)
    return rep, env, bindir, tmp_path / "cache"


def test_an_ncu_rep_is_exported_into_the_cache_once(report):
    rep, env, bindir, cache = report
    before = sha256(rep)
    proc = _run(["analyze", str(rep), "--format", "json"], env)
    assert proc.returncode == 0, proc.stderr
    assert '"format": "ncu-csv"' in proc.stdout and str(rep) in proc.stdout
    digest = sha256(rep)
    assert sorted(p.name for p in (cache / "ncu-rep").iterdir()) == [
        f"{digest}.details.csv", f"{digest}.raw.csv"]  # fmt: skip
    assert sorted(p.name for p in rep.parent.iterdir()) == ["run.ncu-rep"]  # nothing beside
    assert sha256(rep) == before
    proc = _run(["analyze", str(COUNTERS / "counters.sqlite"), "--counters", str(rep)], env)
    assert proc.returncode == 0, proc.stderr
    calls = (bindir / "calls.log").read_text().splitlines()
    assert calls == [f"--import {rep} --csv --page raw", f"--import {rep} --csv --page details"]


def test_an_ncu_rep_without_ncu_says_how_to_export(report):
    rep, env, bindir, cache = report
    env["PATH"] = "/usr/bin:/bin"
    proc = _run(["analyze", str(rep)], env)
    assert proc.returncode == 2 and not proc.stdout
    (line,) = proc.stderr.splitlines()
    assert line.startswith(f"advisor: error: {rep}: an Nsight Compute report: ncu is not on PATH")
    assert "ncu --import R.ncu-rep --csv --page raw > R.ncu.raw.csv" in line


def test_a_failing_ncu_is_one_error_line_and_leaves_no_export(report):
    rep, env, bindir, cache = report
    proc = _run(["analyze", str(rep)], {**env, "MODE": "fail"})
    assert proc.returncode == 2
    (line,) = proc.stderr.splitlines()
    assert "ncu --import failed (exit 1): ==ERROR== Failed to open the report" in line
    assert list((cache / "ncu-rep").iterdir()) == []


def test_analyze_an_ncu_report_alone():
    import json

    proc = _run(["analyze", str(RAW), "--format", "json"], dict(os.environ))
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(proc.stdout)
    assert doc["trace"]["format"] == "ncu-csv"
    assert any("holds no timeline" in w for w in doc["trace"]["warnings"])
    s = doc["summary"]
    assert (s["idle_ns"], s["gpu_busy_ns"], s["window_ns"]) == (0, 2452864, 2452864)  # no gaps
    # advisor's waves per kernel agree with ncu's launch__waves_per_multiprocessor (two
    # decimals in the CSV): 1, 1.01, 2, 2.02, 1, 0.98, 330.99
    ncu_waves = {(6, 22): 1.0, (7, 19): 1.01, (4224, 1): 2.0, (4256, 1): 2.02, (2, 66): 1.0,
                 (2, 65): 0.98, (524288, 1): 330.99}  # fmt: skip
    kernels = doc["kernels"]
    assert len(kernels) == 7
    for k in kernels:
        assert k["waves"] == pytest.approx(ncu_waves[tuple(k["grid"][:2])], abs=0.006)
        assert k["counters"]["counter_launches"] == 2
    tail = next(k for k in kernels if k["grid"] == [7, 19, 1])
    assert (tail["registers_per_thread"], tail["shared_mem_per_block"]) == (196, 147456)
    assert tail["median_ns"] == (186976 + 186112) // 2
    assert tail["counters"]["sm_imbalance"] == pytest.approx(1.985872, abs=1e-6)
    rules = {f["rule"] for f in doc["findings"]}
    assert rules == {"wave-tail-gemm", "warp-specialization-by-counters", "memory-bound-kernel"}
    assert all(f["counters"]["says"] for f in doc["findings"])


def test_counters_with_several_traces_or_separate_are_refused():
    sqlite = str(COUNTERS / "counters.sqlite")
    for extra in (["--separate"], [sqlite]):
        proc = _run(["analyze", sqlite, *extra, "--counters", str(RAW)], dict(os.environ))
        assert proc.returncode == 2 and "--counters" in proc.stderr, proc.stderr
        assert len(proc.stderr.splitlines()) == 1


def test_the_api_takes_counters():
    import advisor

    result = advisor.analyze(COUNTERS / "counters.sqlite", counters=RAW)
    found = result.document["findings"]
    assert {f["rule"] for f in found if "counters" in f} == {
        "wave-tail-gemm", "warp-specialization-by-counters", "memory-bound-kernel"}  # fmt: skip


def test_the_help_names_the_ncu_inputs():
    text = " ".join(_run(["analyze", "--help"], dict(os.environ)).stdout.split())
    assert "Nsight Compute report (.ncu-rep" in text and "--counters" in text


def test_every_format_shows_what_the_counters_say(tmp_path):
    import advisor

    said = "counters (2 launch(es)): SMs active max/avg 1.99 (49.6 % idle)"
    proc = _run(["analyze", str(RAW)], {**os.environ, "COLUMNS": "400"})
    assert said in proc.stdout  # the terminal's findings table
    result = advisor.analyze(RAW)
    result.write_report(tmp_path / "r.md")
    assert said in (tmp_path / "r.md").read_text()  # the markdown report
    (tail,) = [f for f in result.document["findings"] if f["rule"] == "wave-tail-gemm"]
    assert tail["counters"]["says"].startswith("SMs active max/avg 1.99 (49.6 % idle)")
