"""AMD hardware counters (issue 29): rocprofv3 counter_collection.csv, rocprof-compute
pmc_perf.csv and rocpd PMC tables read into Trace.counters, alone as a kernel-level trace and
joined to a kernel trace of the same program (--counters); bad files are one error line.

The expected numbers were computed apart from advisor, with the csv module alone:

    import csv
    rows = list(csv.DictReader(open("compute/rocprofcompute_MI300X__pmc_perf.csv")))
    for r in rows:
        f = lambda k: float(r[k])
        ns = int(r["End_Timestamp"]) - int(r["Start_Timestamp"])
        read = (128 * f("TCC_BUBBLE_sum") + 64 * (f("TCC_EA0_RDREQ_sum") - f("TCC_BUBBLE_sum")
                - f("TCC_EA0_RDREQ_32B_sum")) + 32 * f("TCC_EA0_RDREQ_32B_sum"))
        write = 64 * f("TCC_EA0_WRREQ_64B_sum") + 32 * (f("TCC_EA0_WRREQ_sum")
                - f("TCC_EA0_WRREQ_64B_sum"))
        print(ns, read + write, 100 * (read + write) / (5324.8 * ns),       # hbm_bw (sysinfo)
              f("SQ_WAIT_ANY") / f("SQ_WAVE_CYCLES"),
              100 * 4 * f("SQ_WAVE_CYCLES") / (304 * 32 * 2.1 * ns))         # CUs, waves/CU, GHz

pmc_perf.csv (vecCopy, 1,048,576 doubles, MI300X_A1: sysinfo.csv 304 CUs, 4 SIMDs/CU, 32
waves/CU, max_sclk 2100 MHz, hbm_bw 5324.8 GB/s), per dispatch 0, 1, 2:

    End - Start            16119, 13560, 13480 ns
    TCC_BUBBLE_sum         65536 each (128-byte reads);  TCC_EA0_RDREQ_sum 65786, 65778, 65763;
    TCC_EA0_RDREQ_32B_sum  0;  TCC_EA0_WRREQ_sum = TCC_EA0_WRREQ_64B_sum = 131072
    DRAM bytes             read 8,404,608 / 8,404,096 / 8,403,136 + written 8,388,608 each
                           = 16,793,216 / 16,792,704 / 16,791,744 (the 8 MiB copied each way)
    DRAM % of 5324.8 GB/s  19.565569 / 23.257212 / 23.393899
    SQ_WAIT_ANY / SQ_WAVE_CYCLES   32675368 / 36903869 = 0.885418, 0.781157, 0.715164
    occupancy %            44.828163 / 45.639195 / 52.197896
    SQ_VALU_MFMA_BUSY_CYCLES 0 (no matrix instruction): matrix pipe 0 %

counter_collection.csv (the rocprofiler-sdk documentation sample of Aug 2025): one row per
dispatch and counter, SQ_WAVES only: dispatches 1-4 addition, subtract, multiply, divide, each
Grid_Size 1,048,576 work-items in workgroups of 64 (16,384 workgroups, SQ_WAVES 16384),
End - Start 52151, 49780, 46818, 48151 ns, VGPR_Count 8, 8, 8, 12, Accum_VGPR_Count 0.
"""

import json
import shutil
import subprocess
import sys

import pytest
from conftest import PUBLIC_ROCPROF, sha256
from rocpd_db import GEMM, T0, RocpdWriter, open_db, write_gemm

from advisor.errors import AdvisorInputError
from advisor.trace.counters import join_counters
from advisor.trace.load import load_counters, load_trace

V3 = PUBLIC_ROCPROF / "v3"
COLLECTION = V3 / "sdk_aug2025__counter_collection.csv"
KERNELS = V3 / "sdk_aug2025__kernel_trace.csv"
PMC_PERF = PUBLIC_ROCPROF / "compute" / "rocprofcompute_MI300X__pmc_perf.csv"
HEADER = ('"Correlation_Id","Dispatch_Id","Agent_Id","Queue_Id","Process_Id","Thread_Id",'
          '"Grid_Size","Kernel_Id","Kernel_Name","Workgroup_Size","LDS_Block_Size",'
          '"Scratch_Size","VGPR_Count","Accum_VGPR_Count","SGPR_Count","Counter_Name",'
          '"Counter_Value","Start_Timestamp","End_Timestamp"')  # fmt: skip


def collection_rows(dispatch: int, counters: dict) -> list[str]:
    """Rows of a rocprofv3 counter_collection.csv for one 100 us dispatch of the GEMM (320
    workgroups of 256) with ``counters`` (a list value: one row per instance, as rocprofv3
    writes a counter's dimensions)."""
    out = []
    for counter, value in counters.items():
        for v in value if isinstance(value, list) else [value]:
            out.append(f'{dispatch},{dispatch},"Agent 2",1,4242,4242,81920,7,"{GEMM}",256,'
                       f'65536,0,128,128,96,"{counter}",{v},1000,101000')  # fmt: skip
    return out


def write_collection(path, rows: list[str]):
    path.write_text("\n".join([HEADER, *rows]) + "\n")
    return path


def advisor(*args):
    return subprocess.run([sys.executable, "-m", "advisor", *map(str, args)],
                          capture_output=True, text=True, timeout=120)  # fmt: skip


# --- counter_collection.csv --------------------------------------------------------------


def test_a_counter_collection_alone_is_a_kernel_level_trace():
    before = sha256(COLLECTION)
    t = load_trace(COLLECTION)
    assert sha256(COLLECTION) == before
    assert (t.format, t.producer_version, t.timeline) == (
        "rocprof-counters", "rocprofv3 counter_collection", False)  # fmt: skip
    k = t.kernels
    assert list(k["name"].str.split("(").str[0]) == [
        "void addition_kernel<float>",
        "subtract_kernel",
        "multiply_kernel",
        "divide_kernel",
    ]
    # serialized by the profiler: end to end, each with its measured duration
    assert list(k["end"] - k["start"]) == [52151, 49780, 46818, 48151]
    assert list(k["start"]) == [0, 52151, 101931, 148749]
    assert set(k["grid_x"]) == {16384} and set(k["block_x"]) == {64}
    assert list(k["registers"]) == [8, 8, 8, 12]
    c = t.counters
    assert list(c["launch"]) == [0, 1, 2, 3] and c["grid_total"].all()
    assert list(c["duration_ns"]) == [52151, 49780, 46818, 48151]
    # SQ_WAVES only: none of advisor's values; one warning says what is missing and limits
    assert c[["dram_pct", "tensor_pipe_pct", "memory_stall_share"]].isna().all().all()
    (warning,) = [w for w in t.warnings if "values advisor reads from AMD counters" in w]
    assert warning.startswith("sdk_aug2025__counter_collection.csv: 6 of the 6 values")
    assert "the memory-bound decision (DRAM share of peak) needs TCC_BUBBLE" in warning
    assert "SQ_BUSY_CYCLES per instance" in warning and "rocprofv3 --pmc" in warning
    assert any("holds no timeline" in w for w in t.warnings)


def test_counters_of_each_instance_and_the_formula_notes(tmp_path):
    # a counter given once per shader engine (4 rows for one dispatch): the total sums
    # them, max_of / mean_of read them: SQ_BUSY_CYCLES 200000, 100000, 100000, 100000 ->
    # busiest 200000, average 125000; DRAM counters without TCC_BUBBLE: the second formula
    # (each read 64 B), said once: 64 * (1000 - 10) + 32 * 10 + 64 * 500 + 32 * (600 - 500)
    # = 63360 + 320 + 32000 + 3200 = 98880 B
    rows = collection_rows(1, {"SQ_BUSY_CYCLES": [200000, 100000, 100000, 100000],
                               "TCC_EA0_RDREQ": 1000, "TCC_EA0_RDREQ_32B": 10,
                               "TCC_EA0_WRREQ": 600, "TCC_EA0_WRREQ_64B": 500})  # fmt: skip
    t = load_trace(write_collection(tmp_path / "x_counter_collection.csv", rows), gpu="MI300X")
    (c,) = t.counters.to_dict("records")
    assert (c["sm_active_cycles_max"], c["sm_active_cycles_avg"]) == (200000, 125000)
    assert c["dram_bytes"] == 98880
    # dram_pct from the bytes, the MI300X's 5300 GB/s (--gpu) and the 100 us dispatch
    assert c["dram_pct"] == pytest.approx(100 * 98880 / (5300 * 100_000))
    notes = [w for w in t.warnings if "without TCC_BUBBLE" in w]
    assert len(notes) == 1 and "understated up to 2x" in notes[0]


def test_a_counter_collection_without_timestamps_only_joins(tmp_path):
    oct2024 = V3 / "sdk_oct2024__counter_collection.csv"
    with pytest.raises(AdvisorInputError, match="dispatches without timestamps cannot be "
                       "analyzed in time; its counters join a kernel trace"):  # fmt: skip
        load_trace(oct2024)
    counters = load_counters(oct2024)
    assert len(counters.counters) == 7 and counters.counters["duration_ns"].isna().all()


# --- pmc_perf.csv ------------------------------------------------------------------------


def test_a_pmc_perf_alone_with_its_sysinfo():
    t = load_trace(PMC_PERF)
    assert (t.format, t.producer_version, t.timeline) == (
        "rocprof-counters", "rocprof-compute pmc_perf", False)  # fmt: skip
    assert list(t.kernels["end"] - t.kernels["start"]) == [16119, 13560, 13480]
    assert set(t.kernels["grid_x"]) == {4096} and set(t.kernels["registers"]) == {8}  # 4 + 4
    (gpu,) = t.gpus.values()
    assert (gpu.name, gpu.sm_count, gpu.clock_mhz, gpu.memory_bandwidth_gbs) == (
        "MI300X_A1", 304, 2100, 5324.8)  # fmt: skip
    assert (gpu.compute_capability, gpu.max_warps_per_sm, gpu.simds_per_cu) == ("gfx942", 32, 4)
    assert t.sources == ["rocprofcompute_MI300X__sysinfo.csv"]
    c = t.counters
    assert list(c["dram_bytes"]) == [16793216, 16792704, 16791744]
    assert list(c["dram_pct"]) == pytest.approx([19.565569, 23.257212, 23.393899], abs=1e-6)
    assert list(c["memory_stall_share"]) == pytest.approx([0.885418, 0.781157, 0.715164],
                                                          abs=1e-6)  # fmt: skip
    assert list(c["achieved_occupancy_pct"]) == pytest.approx([44.828163, 45.639195, 52.197896],
                                                              abs=1e-6)  # fmt: skip
    assert list(c["tensor_pipe_pct"]) == [0, 0, 0]
    # no per-SE values in rocprof-compute's files: the imbalance is not measured, said once
    (warning,) = [w for w in t.warnings if "values advisor reads" in w]
    assert "2 of the 6" in warning and "SQ_BUSY_CYCLES per instance" in warning
    assert c["sm_active_cycles_max"].isna().all()


def test_pmc_perf_instance_columns(tmp_path):
    # X[i] columns are instances (rocprof-compute writes TCC_*[0..15]), X_sum their total
    head = "Dispatch_ID,GPU_ID,Grid_Size,Workgroup_Size,Arch_VGPR,Kernel_Name,"
    cells = ["SQ_BUSY_CYCLES[0]", "SQ_BUSY_CYCLES[1]", "SQ_WAIT_ANY", "SQ_WAVE_CYCLES_sum"]
    path = tmp_path / "pmc_perf.csv"
    path.write_text(head + ",".join(cells) + ",Start_Timestamp,End_Timestamp\n"
                    + '0,1,1024,256,8,"k(int) (.kd)",300,100,25,100,10,5010\n')  # fmt: skip
    (c,) = load_trace(path, gpu="MI300X").counters.to_dict("records")
    assert (c["sm_active_cycles_max"], c["sm_active_cycles_avg"]) == (300, 200)
    assert c["memory_stall_share"] == 0.25  # SQ_WAIT_ANY / SQ_WAVE_CYCLES_sum
    assert c["wave_cycles"] == 400 and c["duration_ns"] == 5000


# --- the join to a kernel trace ----------------------------------------------------------


def test_counters_join_a_kernel_trace_of_the_same_program():
    # the SDK's documentation samples of Aug 2025: the same program in two runs (the
    # counters from process 15606 on agent 1, the kernel trace from thread 834304 on agent
    # 4, days apart on the clock), so the join is by kernel name, launch size and order:
    # dispatches 1-4 land on the kernel trace's dispatches 1-4 (its first launch of each
    # kernel; 16 x 1024 workgroups of 64 = 16,384 as the counters' 1,048,576 / 64);
    # divide_kernel has 12 + 4 accum VGPRs in the trace, 12 + 0 in the counters' run
    t = load_trace(KERNELS, gpu="MI300X")
    join = join_counters(t, load_counters(COLLECTION), COLLECTION.name)
    assert (join.profiled, join.joined, join.kernels, join.unmatched) == (4, 4, 4, {})
    assert join.registers_differ == 1
    starts = t.kernels["start"].to_numpy()[t.counters["launch"].to_numpy()]
    assert list(starts - 1550151853000000) == [29637, 42437, 52877, 64037]  # dispatches 1-4
    registers, lacks = [w for w in t.warnings if w.startswith("--counters")]
    assert "1 joined launches use other registers per thread" in registers
    # what the counters file lacks is said where its counters are used
    assert lacks.startswith(f"--counters {COLLECTION.name}: {COLLECTION.name}: 6 of the 6 values")
    assert f"{COLLECTION.name} (counters: 4 of 4 profiled launches joined" in t.sources[-1]


def test_counters_without_timestamps_join_dispatch_by_dispatch():
    # Oct 2024 sample: counters of dispatches 1, 2, 5, 9, 13, 3, 6 (in that file order;
    # read in Dispatch_Id order) onto the kernel trace's 7 dispatches, ordered by start:
    # 1 add, 5 add, 2 sub, 9 add, 13 add, 6 sub, 3 mul -> rows 0, 2, 6, 1, 5, 3, 4; its
    # 18-column layout has no register counts (-1): none differ
    t = load_trace(V3 / "sdk_oct2024__kernel_trace.csv", gpu="MI300X")
    join = join_counters(t, load_counters(V3 / "sdk_oct2024__counter_collection.csv"), "cc")
    assert (join.profiled, join.joined, join.registers_differ) == (7, 7, 0)
    assert list(t.counters["launch"]) == [0, 2, 6, 1, 5, 3, 4]
    (warning,) = [w for w in t.warnings if w.startswith("--counters")]
    assert "6 of the 6 values advisor reads from AMD counters are missing" in warning


def test_counters_from_another_run_join_nothing_and_warn_once():
    # vecCopy's counters onto the addition/subtract/... kernel trace: nothing matches
    proc = advisor("analyze", KERNELS, "--counters", PMC_PERF, "--format", "json")
    assert proc.returncode == 0, proc.stderr
    warnings = json.loads(proc.stdout)["trace"]["warnings"]
    (warning,) = [w for w in warnings if "--counters" in w]
    assert "none of its 3 profiled launches matches" in warning and "vecCopy (3)" in warning


def test_a_folder_does_not_read_counters_as_kernels(tmp_path):
    for f in (KERNELS, COLLECTION):
        shutil.copyfile(f, tmp_path / f.name)
    t = load_trace(tmp_path, gpu="MI300X")
    assert len(t.kernels) == 9  # the kernel trace's dispatches only
    assert any("hardware counters, not read as kernels" in w and "--counters" in w
               for w in t.warnings)  # fmt: skip


# --- rocpd PMC tables --------------------------------------------------------------------


def test_rocpd_pmc_tables(tmp_path):
    # three GEMM dispatches of 100 us with DRAM counters (rocpd_db.write_gemm): 3,000,000
    # 128-byte reads, 1,000,000 64-byte writes = 448,000,000 B each; the agent is an
    # MI300X (built-in 5300 GB/s): 100 * 448e6 / (5300 * 100_000) = 84.528302 %
    p = tmp_path / "4242_results.db"
    with open_db(p) as conn:
        write_gemm(RocpdWriter(conn, "77aa_0bcd"), {
            "TCC_BUBBLE": 3e6, "TCC_EA0_RDREQ": 3e6, "TCC_EA0_RDREQ_32B": 0,
            "TCC_EA0_WRREQ": 1e6, "TCC_EA0_WRREQ_64B": 1e6})  # fmt: skip
    t = load_trace(p)
    assert t.timeline and t.format == "rocpd"
    c = t.counters
    assert list(c["launch"]) == [0, 1, 2] and not c["grid_total"].any()
    assert list(c["dram_bytes"]) == [448e6] * 3 and list(c["duration_ns"]) == [100_000] * 3
    assert list(c["dram_pct"]) == pytest.approx([100 * 448e6 / (5300 * 100_000)] * 3)
    assert any("rocprofv3 serializes the dispatches" in w for w in t.warnings)
    # the same database as --counters of itself joins each dispatch to its own launch
    again = load_trace(p)
    join = join_counters(again, load_counters(p), p.name)
    assert (join.joined, list(again.counters["launch"])) == (3, [0, 1, 2])


def test_rocpd_counters_follow_their_launch_when_damaged_rows_drop(tmp_path):
    # the first GEMM dispatch ends before it starts (a damaged row): trace.quality drops it,
    # and the counters of launches 1 and 2 move to rows 0 and 1 (the first one's: -1)
    p = tmp_path / "4242_results.db"
    with open_db(p) as conn:
        w = RocpdWriter(conn, "77aa_0bcd")
        write_gemm(w, {"SQ_WAIT_ANY": 30, "SQ_WAVE_CYCLES": 100})
        conn.execute(
            f'UPDATE "rocpd_timestamp_{w.uuid}" SET value = {T0 - 1} WHERE id = '
            f'(SELECT end_id FROM "rocpd_kernel_dispatch_{w.uuid}" WHERE id = 1)'
        )
    t = load_trace(p)
    assert len(t.kernels) == 2 and list(t.counters["launch"]) == [-1, 0, 1]
    assert list(t.kernels["start"]) == [T0 + 200_000, T0 + 400_000]


def test_a_rocpd_database_without_counters_is_no_counters_file(tmp_path):
    p = tmp_path / "4242_results.db"
    with open_db(p) as conn:
        write_gemm(RocpdWriter(conn, "77aa_0bcd"))
    assert load_trace(p).counters.empty
    with pytest.raises(AdvisorInputError, match="a rocpd database without hardware counters"):
        load_counters(p)


# --- bad input: one error line, exit 2 ---------------------------------------------------


@pytest.mark.parametrize(
    ("name", "edit", "says"),
    [
        ("text_value_counter_collection.csv",
         lambda text: text.replace("16384.000000", "n/a", 1),
         "column 'Counter_Value', data row 1: 'n/a' is not a number"),
        ("header_only_counter_collection.csv", lambda text: text.splitlines()[0] + "\n",
         "rocprofv3 counter_collection: no kernel dispatches"),
        ("blank_dispatch_counter_collection.csv",
         lambda text: text.replace('\n3,3,"Agent 1"', '\n3,,"Agent 1"'),
         "rocprofv3 counter_collection: data row 3 has no Dispatch_Id"),
    ],
)  # fmt: skip
def test_broken_counter_files_are_one_error_line(tmp_path, name, edit, says):
    path = tmp_path / name
    path.write_text(edit(COLLECTION.read_text()))
    for args in (["analyze", path], ["analyze", KERNELS, "--counters", path]):
        proc = advisor(*args)
        assert proc.returncode == 2 and not proc.stdout, proc.stderr
        (line,) = proc.stderr.splitlines()
        assert line.startswith(f"advisor: error: {path}") and says in line, line
        assert "Traceback" not in proc.stderr


def test_counters_must_be_a_counters_file():
    proc = advisor("analyze", KERNELS, "--counters", KERNELS)
    assert proc.returncode == 2
    (line,) = proc.stderr.splitlines()
    assert "--counters: not an Nsight Compute report or AMD counters file" in line
    assert "counter_collection.csv" in line and "pmc_perf.csv" in line


def test_the_mapping_is_data_each_formula_checked():
    # every value of amd_counters.yaml is a trace.counters column (counters.yaml), says what
    # its absence limits, and each formula parses into names, numbers, + - * / and
    # max_of / mean_of only; the counters they read are AMD's (rocprofiler-sdk's names)
    from advisor.trace.amd_counters import needs, spec, value_columns, wanted_counters

    s = spec()
    assert set(s["values"]) <= set(value_columns()) and set(s["limits"]) == set(s["values"])
    for formulas in s["values"].values():
        for f in formulas:
            assert needs(f["formula"])
    assert wanted_counters() == {
        "TCC_BUBBLE", "TCC_EA0_RDREQ", "TCC_EA0_RDREQ_32B", "TCC_EA0_WRREQ",
        "TCC_EA0_WRREQ_64B", "TCC_EA_RDREQ", "TCC_EA_RDREQ_32B", "TCC_EA_WRREQ",
        "TCC_EA_WRREQ_64B", "SQ_VALU_MFMA_BUSY_CYCLES", "SQ_WAVE_CYCLES", "SQ_WAIT_ANY",
        "SQ_BUSY_CYCLES"}  # fmt: skip
