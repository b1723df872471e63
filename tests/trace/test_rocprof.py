"""rocprof readers on every public fixture (v1, v2, v3 CSV and JSON) and the MI350X sample.

Expected counts, first kernels and workgroup counts were read independently with Python's
csv module: workgroups = prod ceil(grid_d / wg_d), grid in work-items.
"""

import shutil
from pathlib import Path

import pytest
from conftest import ROOT, sha256

from advisor.analysis import analyze
from advisor.errors import AdvisorInputError
from advisor.trace.load import load_trace
from advisor.trace.rocprof import dispatches_to_kernels, read_table

ROCPROF = ROOT / "tests" / "data" / "public" / "rocprof"
MI350X = ROOT / "sample_traces" / "rocprof" / "mi350x_rank0"
JSON = ROCPROF / "v3_json" / "tracelens__908_results.json.gz"

VEC = "vecCopy(double*, double*, double*, int, int)"
ADD = "void addition_kernel<float>(float*, float const*, float const*, int, int)"
OMP = "__omp_offloading_32_2f3c6__QMnorm_modPnorm_l26"
# file -> (layout, rows, first kernel name, workgroups of the first dispatch)
DISPATCH_FILES = {
    "compute/rocprofcompute_MI300X__pmc_perf.csv": (
        "rocprof-compute pmc_perf", 3, VEC + " (.kd)", 4096),
    "v1/rocprofcompute_MI200_v1renamed__SQ_LEVEL_WAVES.csv": (
        "rocprof v1 results (renamed by Omniperf)", 3, VEC + " [clone .kd]", 4096),
    "v1/rocprofcompute_MI200_v1renamed__timestamps.csv": (
        "rocprof v1 results (renamed by Omniperf)", 3, VEC + " [clone .kd]", 4096),
    "v2/rocprofcompute_MI300X_v2__SQ_LEVEL_WAVES.csv": (
        "rocprofv2 results", 3, VEC + " (.kd)", 4096),
    "v2/rocprofcompute_MI300X_v2__timestamps.csv": (
        "rocprofv2 results", 3, VEC + " (.kd)", 4096),
    "v3/hpctraining_MI300A_rocm6.2.1__kernel_trace_16col.excerpt.csv": (
        "rocprofv3 kernel_trace (16 columns)", 9, OMP, 912),
    "v3/hpctraining_jacobi_hip__kernel_trace_18col.excerpt.csv": (
        "rocprofv3 kernel_trace (18 columns)", 4, "__amd_rocclr_fillBufferAligned", 32),
    "v3/sdk_aug2025__counter_collection.csv": (
        "rocprofv3 counter_collection", 4, ADD, 16384),
    "v3/sdk_aug2025__kernel_trace.csv": (
        "rocprofv3 kernel_trace (22 columns)", 9, ADD, 16384),
    "v3/sdk_aug2025__kernel_trace_truncated.csv": (
        "rocprofv3 kernel_trace (22 columns)", 4, "addition_kernel", 16384),
    "v3/sdk_oct2024__counter_collection.csv": (
        "rocprofv3 counter_collection (no timestamps)", 7, ADD, 16384),
    "v3/sdk_oct2024__kernel_trace.csv": (
        "rocprofv3 kernel_trace (18 columns)", 7, ADD, 16384),
}  # fmt: skip
# file -> (layout, rows)
OTHER_FILES = {
    "compute/rocprofcompute_MI300X__sysinfo.csv": ("rocprof-compute sysinfo", 1),
    "v3/hpctraining_MI300A_rocm6.2.1__agent_info.excerpt.csv": ("rocprofv3 agent_info", 8),
    "v3/hpctraining_jacobi_hip__hip_api_stats.excerpt.csv": ("rocprofv3 summary statistics", 23),
    "v3/hpctraining_jacobi_hip__kernel_stats.excerpt.csv": ("rocprofv3 summary statistics", 8),
    "v3/sdk_aug2025__hip_api_stats.csv": ("rocprofv3 summary statistics", 17),
    "v3/sdk_aug2025__hip_domain_stats.csv": ("rocprofv3 summary statistics", 1),
    "v3/sdk_aug2025__hip_runtime_trace.csv": ("rocprofv3 API trace", 8),
    "v3/sdk_aug2025__hip_trace.csv": ("rocprofv3 API trace", 17),
    "v3/sdk_aug2025__memory_allocation_trace.csv": ("rocprofv3 memory_allocation_trace", 4),
    "v3/sdk_aug2025__memory_copy_trace.csv": ("rocprofv3 memory_copy_trace", 4),
    "v3/sdk_aug2025__rccl_trace.csv": ("rocprofv3 API trace", 21),
    "v3/sdk_aug2025__rocpd-to-csv.csv": ("rocprofv3 API trace", 13),
    "v3/sdk_aug2025__scratch_memory_trace.csv": ("rocprofv3 scratch_memory_trace", 2),
    "v3/sdk_oct2024__memory_copy_trace.csv": ("rocprofv3 memory_copy_trace", 2),
}


def test_every_public_csv_is_listed():
    on_disk = {str(p.relative_to(ROCPROF)) for p in ROCPROF.glob("*/*.csv")}
    assert on_disk == set(DISPATCH_FILES) | set(OTHER_FILES)


@pytest.mark.parametrize("name", sorted(DISPATCH_FILES))
def test_dispatch_tables(name):
    layout, rows, first, workgroups = DISPATCH_FILES[name]
    lay, table = read_table(ROCPROF / name)
    assert lay.name == layout and len(table) == rows
    assert table["name"].iloc[0] == first
    k = dispatches_to_kernels(table.assign(start=0, end=0), pid=0) if not lay.timed else None
    if k is None:
        k = dispatches_to_kernels(table, pid=0)
    first_wg = (k["grid_x"] * k["grid_y"] * k["grid_z"]).iloc[0]
    assert first_wg == workgroups


@pytest.mark.parametrize("name", sorted(OTHER_FILES))
def test_other_tables(name):
    layout, rows = OTHER_FILES[name]
    lay, table = read_table(ROCPROF / name)
    assert (lay.name, len(table)) == (layout, rows)


@pytest.mark.parametrize(
    "name", sorted(n for n, v in DISPATCH_FILES.items() if "no timestamps" not in v[0])
)
def test_timed_dispatch_files_analyze(name, tmp_path):
    alone = tmp_path / "x_" / Path(name).name  # without the doc samples' sibling files
    alone.parent.mkdir()
    shutil.copyfile(ROCPROF / name, alone)
    t = load_trace(alone, gpu="MI300X")
    a = analyze(t)
    assert len(t.kernels) == DISPATCH_FILES[name][1]
    assert a.summary()["gpu_busy_ns"] > 0


@pytest.mark.parametrize(
    "name, words",
    [
        ("v3/sdk_oct2024__counter_collection.csv", "dispatches without timestamps"),
        ("v3/sdk_aug2025__hip_api_stats.csv", "summary statistics, not a trace"),
        ("v3/hpctraining_MI300A_rocm6.2.1__agent_info.excerpt.csv", "agent facts only"),
        ("v3/sdk_aug2025__rccl_trace.csv", "a host API trace only"),
        ("v3/sdk_aug2025__memory_copy_trace.csv", "copies only"),
    ],
)
def test_non_trace_files_say_why(name, words):
    with pytest.raises(AdvisorInputError, match=words):
        load_trace(ROCPROF / name, gpu="MI300X")


def test_doc_sample_siblings_from_other_runs_are_ignored_with_a_warning():
    # the SDK documentation's files share a prefix but come from different runs (days apart):
    # each sibling is left out with a warning, the kernel trace is still analysed
    p = ROCPROF / "v3/sdk_aug2025__kernel_trace.csv"
    before = sha256(p)
    t = load_trace(p, gpu="MI300X")
    ignored = [w for w in t.warnings if " ignored: no event within 10 min" in w]
    assert {w.split()[0] for w in ignored} == {
        "sdk_aug2025__hip_trace.csv", "sdk_aug2025__rccl_trace.csv",
        "sdk_aug2025__memory_copy_trace.csv",
    }  # fmt: skip
    assert t.api.empty and t.memcpy.empty and len(t.kernels)
    assert not any("hip_trace" in s for s in t.sources)
    assert sha256(p) == before


API_HEADER = (
    '"Domain","Function","Process_Id","Thread_Id","Correlation_Id","Start_Timestamp",'
    '"End_Timestamp"'
)
COPY_HEADER = (
    '"Kind","Direction","Stream_Id","Source_Agent_Id","Destination_Agent_Id",'
    '"Correlation_Id","Start_Timestamp","End_Timestamp"'
)


def test_siblings_of_one_run_attribute_gaps(tmp_path):
    """Hand-built run (times in ns): an HtoD copy [500,900) corr 5; k1 [1000,2000) corr 1
    launched at [100,200], long before the copy ended (launch latency, 100 ns); k2
    [2500,3000) corr 2 launched at [2100,2400], after the GPU went idle at 2000 (host-bound,
    500 ns); k3 [6000,7000) corr 4 launched at [5200,5300] after hipDeviceSynchronize
    [3100,5000] held the host (synchronization, 3000 ns)."""
    rows = [
        ROW.format(start=1000, end=2000, grid=1024).replace(",1,1000,", ",1,1000,"),
        ROW.format(start=2500, end=3000, grid=1024).replace('"k",1,', '"k",2,'),
        ROW.format(start=6000, end=7000, grid=1024).replace('"k",1,', '"k",4,'),
    ]
    (tmp_path / "77_kernel_trace.csv").write_text(KERNEL_HEADER + "\n" + "\n".join(rows) + "\n")
    api = [
        f'"HIP_RUNTIME_API","{n}",77,78,{c},{s},{e}'
        for n, c, s, e in [
            ("hipLaunchKernel", 1, 100, 200),
            ("hipLaunchKernel", 2, 2100, 2400),
            ("hipDeviceSynchronize", 3, 3100, 5000),
            ("hipLaunchKernel", 4, 5200, 5300),
            ("hipMemcpyAsync", 5, 400, 450),
        ]
    ]
    (tmp_path / "77_hip_api_trace.csv").write_text(API_HEADER + "\n" + "\n".join(api) + "\n")
    (tmp_path / "77_memory_copy_trace.csv").write_text(
        COPY_HEADER
        + '\n"MEMORY_COPY","MEMORY_COPY_HOST_TO_DEVICE",0,"Agent 0","Agent 4",5,500,900\n'
    )
    t = load_trace(tmp_path / "77_kernel_trace.csv", gpu="MI300X")
    assert t.sources == ["77_hip_api_trace.csv", "77_memory_copy_trace.csv"]
    assert set(t.kernels["pid"]) == {77} and t.memcpy["kind"].tolist() == ["HtoD"]
    g = analyze(t).ops
    causes = g["cause"].astype(object).where(g["cause"].notna(), None)  # NaN: no gap
    assert list(zip(g["name"], g["gap_ns"], causes, strict=True)) == [
        ("memcpy HtoD", 0, None),
        ("k", 100, "launch_latency"),
        ("k", 500, "host_bound"),
        ("k", 3000, "synchronization"),
    ]


def test_18_column_layout_says_occupancy_is_unknown():
    t = load_trace(
        ROCPROF / "v3/hpctraining_jacobi_hip__kernel_trace_18col.excerpt.csv", gpu="MI300X"
    )
    assert any("no register counts" in w for w in t.warnings)
    k = analyze(t).kernel_table()
    assert k["waves"].isna().all()


def test_mi350x_sample_csv_matches_the_json_it_came_from():
    csv_trace = load_trace(MI350X / "908_kernel_trace.csv.gz")
    json_trace = load_trace(JSON)
    assert len(csv_trace.kernels) == len(json_trace.kernels) == 43915
    cols = [
        "device",
        "stream",
        "start",
        "end",
        "name",
        "grid_x",
        "grid_y",
        "block_x",
        "registers",
        "static_smem",
        "correlation",
    ]
    assert csv_trace.kernels[cols].equals(json_trace.kernels[cols])
    spec = csv_trace.gpus[2]
    assert (spec.name, spec.sm_count, spec.compute_capability) == (
        "AMD Instinct MI350X",
        256,
        "gfx950",
    )
    assert spec.shared_mem_per_sm == 160 * 1024 and spec.max_warps_per_sm == 32
    assert analyze(csv_trace).summary() == analyze(json_trace).summary()


def test_mi350x_comm_and_memory_kernels():
    a = analyze(load_trace(MI350X))
    ops = a.ops
    rccl = ops[ops["name"] == "ncclDevKernel_Generic_1"]
    assert len(rccl) == 1310 and set(rccl["op_class"]) == {"comm"}
    blits = ops[ops["name"].str.startswith("__amd_rocclr_")]
    assert len(blits) == 3213 + 3153 and set(blits["op_class"]) == {"memory"}
    s = a.summary()
    assert s["comm_ns"] == pytest.approx(rccl.eval("end - start").sum(), rel=0.01)
    assert 0 < s["overlap_ratio"] < 0.1  # RCCL mostly runs alone on this rank
    k = a.kernel_table()
    assert not k.loc[k["name"].str.startswith("__amd_rocclr_"), "underfilled"].any()


def test_folder_input_and_mismatched_sibling(tmp_path):
    run = tmp_path / "run"
    shutil.copytree(MI350X, run)
    assert len(load_trace(run).kernels) == 43915
    agents = (run / "908_agent_info.csv").read_text().splitlines()
    (run / "908_agent_info.csv").write_text("\n".join(agents[:3]) + "\n")  # CPUs only
    before = sha256(run / "908_kernel_trace.csv.gz")
    # an agent_info of another run is ignored (warning); without facts the analysis goes on
    t = load_trace(run)
    assert t.gpus == {}
    assert any(
        w.startswith("908_agent_info.csv ignored: it has no GPU agent 2") for w in t.warnings
    )
    assert any("--gpu MI300X" in w for w in t.warnings)  # in AMD's terms
    assert sha256(run / "908_kernel_trace.csv.gz") == before


KERNEL_HEADER = (
    '"Kind","Agent_Id","Queue_Id","Kernel_Id","Kernel_Name","Correlation_Id",'
    '"Start_Timestamp","End_Timestamp","Private_Segment_Size","Group_Segment_Size",'
    '"Workgroup_Size_X","Workgroup_Size_Y","Workgroup_Size_Z","Grid_Size_X",'
    '"Grid_Size_Y","Grid_Size_Z"'
)
ROW = '"KERNEL_DISPATCH",4,1,2,"k",1,{start},{end},0,0,256,1,1,{grid},1,1'


@pytest.mark.parametrize(
    "body, words",
    [
        ("Foo,Bar\n1,2\n", "not a rocprof CSV: its header (Foo, Bar) is no layout"),
        (  # the only dispatch ends before it starts: dropped, nothing left
            KERNEL_HEADER + "\n" + ROW.format(start=10, end=5, grid=1024) + "\n",
            "no kernel with valid timestamps: no GPU work to analyze",
        ),
        (
            KERNEL_HEADER + "\n" + ROW.format(start=-10, end=5, grid=1024) + "\n",
            "no kernel with valid timestamps",
        ),
        (
            KERNEL_HEADER + "\n" + ROW.format(start=1, end=5, grid="lots") + "\n",
            "column 'Grid_Size_X', data row 1: 'lots' is not a number",
        ),
        (
            KERNEL_HEADER.replace(',"End_Timestamp"', "")
            + "\n"
            + ROW.format(start=1, end=5, grid=1).replace(",5,", ",")
            + "\n",
            "missing end timestamps",
        ),
        (KERNEL_HEADER + "\n", "no kernel dispatches"),
        ("\ufeff" + KERNEL_HEADER + "\r\n" + ROW.format(start=1, end=5, grid=1024) + "\r\n", None),
    ],
)
def test_bad_csv_input(tmp_path, body, words):
    p = tmp_path / "x_kernel_trace.csv"
    p.write_text(body, newline="")
    if words is None:  # BOM + CRLF is fine
        assert len(load_trace(p, gpu="MI300X").kernels) == 1
        return
    with pytest.raises(AdvisorInputError) as err:
        load_trace(p, gpu="MI300X")
    assert str(p) in str(err.value) and words in str(err.value)


def test_tensile_stream_k_kernels_count_as_persistent():
    from builders import kernels

    from advisor.metrics.waves import launch_waves
    from advisor.trace.gpus import match_gpu

    names = ["Cijk_Ailk_Bljk_BBS_MT64x32x256_SK3_WG32", "Cijk_Ailk_Bljk_BBS_MT64x32x256_SK0_WG32"]
    k = kernels(
        [
            dict(start=0, end=100, grid_x=192, block_x=256, registers=64, name=n, sgpr=32.0)
            for n in names
        ]
    )
    w = launch_waves(k, {0: match_gpu("MI350X")})
    assert w["persistent"].tolist() == [True, False]


def test_cli_exit_2_on_bad_rocprof(tmp_path):
    import subprocess
    import sys

    p = tmp_path / "r_kernel_trace.csv"
    p.write_text(KERNEL_HEADER + "\n" + ROW.format(start=10, end=5, grid=1024) + "\n")
    proc = subprocess.run(
        [sys.executable, "-m", "advisor", "analyze", str(p), "--gpu", "MI300X"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert proc.stderr.strip() == (
        f"advisor: error: {p}: no kernel with valid timestamps: no GPU work to analyze"
    )


def test_one_damaged_dispatch_is_dropped_with_a_warning(tmp_path):
    p = tmp_path / "x_kernel_trace.csv"
    rows = [ROW.format(start=10, end=5, grid=1024), ROW.format(start=20, end=30, grid=1024)]
    p.write_text(KERNEL_HEADER + "\n" + "\n".join(rows) + "\n")
    t = load_trace(p, gpu="MI300X")
    assert t.kernels["start"].tolist() == [20]
    assert t.warnings[-1].startswith("1 of 2 kernel launches dropped")


V1_NEW = (
    "Index,KernelName,gpu-id,queue-id,queue-index,pid,tid,grd,wgr,lds,scr,arch_vgpr,"
    "accum_vgpr,sgpr,wave_size,sig,obj,DispatchNs,BeginNs,EndNs,CompleteNs"
)
V1_OLD = (
    "Index,KernelName,gpu-id,queue-id,queue-index,pid,tid,grd,wgr,lds,scr,vgpr,sgpr,fbar,"
    "sig,obj,DispatchNs,BeginNs,EndNs,CompleteNs"
)


@pytest.mark.parametrize(
    "header, row, layout, vgprs",
    [
        (
            V1_NEW,
            '0,"gemm(float*) [clone .kd]",2,0,0,41,41,1048576,256,8192,0,128,64,32,64,0x0,'
            "0x7f,100,200,900,950",
            "rocprof v1 results",
            192,
        ),
        (
            V1_OLD,
            '0,"gemm(float*) [clone .kd]",2,0,0,41,41,1048576,256,8192,0,96,32,0,0x0,0x7f,'
            "100,200,900,950",
            "rocprof v1 results (ROCm <= 5.2: vgpr, sgpr, fbar)",
            96,
        ),
        # rocprof --stats: every header quoted, DurationNs appended
        (
            '"' + V1_NEW.replace(",", '","') + '","DurationNs"',
            '0,"gemm(float*) [clone .kd]",2,0,0,41,41,1048576,256,8192,0,128,64,32,64,0x0,0x7f,'
            "100,200,900,950,700",
            "rocprof v1 results",
            192,
        ),
    ],
)
def test_rocprof_v1_headers(tmp_path, header, row, layout, vgprs):
    p = tmp_path / "results.csv"
    p.write_text(header + "\n" + row + "\n")
    lay, table = read_table(p)
    assert lay.name == layout
    t = load_trace(p, gpu="MI250X")
    k = t.kernels.iloc[0]
    # grd counts work-items: 1048576 / 256 = 4096 workgroups; name without the clone suffix
    assert (k.grid_x, k.block_x, k["name"], k.registers) == (4096, 256, "gemm(float*)", vgprs)
    assert (k.start, k.end, k.device, k.static_smem) == (200, 900, 2, 8192)
