"""The nsys reader on every public export (schemas 2.9.1 ... 3.25.0) and the H200 samples."""

import os
import re
import sqlite3
from contextlib import closing

import pytest
from conftest import H200_2GPU, H200_GRAPHLEVEL, H200_SINGLE, PUBLIC_NSYS, public_nsys, sha256

from advisor.trace.load import load_trace
from advisor.trace.nsys import read_nsys

# file -> (kernels, first kernel by start, devices with work, GPU name or None, schema)
# (counted independently with the sqlite3 command-line shell)
EXPECTED = {
    "flameox_cudagraph_rtx3060_nsys2025.5.sqlite": (
        3,
        "add_one",
        [0],
        "NVIDIA GeForce RTX 3060",
        "3.24.0",
    ),
    "nsysai_2gpu_sendrecv_after_nsys2026.2.sqlite": (
        3587,
        "elementwise_kernel",
        [0, 1],
        None,
        "3.25.0",
    ),
    "nsysai_2gpu_sendrecv_before_nsys2026.2.sqlite": (
        4010,
        "elementwise_kernel",
        [0, 1],
        None,
        "3.25.0",
    ),
    "nsysai_h100_2gpu_window_nsys2026.2.sqlite": (
        3442,
        "vectorized_gather_kernel",
        [0, 1],
        None,
        "3.25.0",
    ),
    "nsysai_mock_rtx3080_nsys2026.1.sqlite": (
        2,
        "vectorized_elementwise_kernel",
        [0],
        "NVIDIA GeForce RTX 3080",
        "3.24.14",
    ),
    "pipit_cloverleaf_a100_nsys2024.5.sqlite": (
        1312,
        "par_ranged2d_kernel",
        [0],
        "NVIDIA A100-SXM4-80GB",
        "3.13.2",
    ),
    "pipit_saxpy-mpi-cuda_a100_nsys2022.2.sqlite": (
        5,
        "saxpy",
        [0],
        "NVIDIA A100-SXM4-40GB",
        "2.9.1",
    ),
    "testcuda_4streams_rtx4060ti_nsys2026.1_a.sqlite": (
        4,
        "add_parallel",
        [0],
        "NVIDIA GeForce RTX 4060 Ti",
        "3.24.14",
    ),
    "testcuda_4streams_rtx4060ti_nsys2026.1_b.sqlite": (
        4,
        "add_parallel",
        [0],
        "NVIDIA GeForce RTX 4060 Ti",
        "3.24.14",
    ),
}


def test_every_public_file_is_listed():
    assert sorted(p.name for p in public_nsys()) == sorted(EXPECTED)


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_public_export_loads(name):
    path = PUBLIC_NSYS / name
    n, first, devices, gpu, schema = EXPECTED[name]
    t = read_nsys(path)
    assert len(t.kernels) == n
    assert t.kernels.sort_values("start")["name"].iloc[0] == first
    assert t.devices == devices
    assert f"export schema {schema}" in t.producer_version
    assert (t.kernels["end"] >= t.kernels["start"]).all()
    if gpu is None:
        assert t.gpus == {}  # no TARGET_INFO_GPU in these windows
    else:
        assert {s.name for s in t.gpus.values()} == {gpu}
        assert all(s.source == "trace (TARGET_INFO_GPU)" for s in t.gpus.values())


def test_h100_window_needs_gpu_option_and_takes_it():
    path = PUBLIC_NSYS / "nsysai_h100_2gpu_window_nsys2026.2.sqlite"
    t = load_trace(path, gpu="H100-SXM")
    assert {d: (s.name, s.sm_count, s.source) for d, s in t.gpus.items()} == {
        0: ("H100-SXM", 132, "--gpu H100-SXM"),
        1: ("H100-SXM", 132, "--gpu H100-SXM"),
    }
    assert len(t.nvtx) > 10000  # 16782 NVTX events, most of them ranges


def test_saxpy_2022_schema_nvtx_and_api():
    t = read_nsys(PUBLIC_NSYS / "pipit_saxpy-mpi-cuda_a100_nsys2022.2.sqlite")
    # only launches, blocking and start-up calls are read: 86 of the 95 runtime rows
    import sqlite3

    from advisor.data import pattern

    with sqlite3.connect(f"file:{PUBLIC_NSYS / 'pipit_saxpy-mpi-cuda_a100_nsys2022.2.sqlite'}"
                         "?mode=ro", uri=True) as db:  # fmt: skip
        raw = [re.sub(r"_v\d+$", "", n) for (n,) in db.execute(
            "SELECT s.value FROM CUPTI_ACTIVITY_KIND_RUNTIME r JOIN StringIds s "
            "ON s.id = r.nameId")]  # fmt: skip
    used = [n for n in raw if any(pattern(c).search(n)
                                  for c in ("launch_api", "sync_api", "startup_api"))]  # fmt: skip
    assert (len(raw), len(used), len(t.api)) == (95, 86, 86)
    assert sorted(t.api["name"]) == sorted(used)
    assert t.api["name"].str.endswith("_v3020").sum() == 0  # version suffix stripped
    assert len(t.nvtx) == 22  # 24 events, 22 closed ranges


def test_h200_samples():
    t = read_nsys(H200_SINGLE)
    assert t.producer_version == "Nsight Systems 2025.3.2.0 (export schema 3.20.3)"
    spec = t.gpus[0]
    assert (spec.name, spec.sm_count, spec.compute_capability) == ("NVIDIA H200", 132, "9.0")
    assert (spec.shared_mem_per_sm, spec.registers_per_sm, spec.max_warps_per_sm) == (
        233472,
        65536,
        64,
    )
    tiled = t.kernels[t.kernels["name"] == "tiled_gemm_kernel"]
    cfg = zip(tiled.grid_x, tiled.grid_y, tiled.registers, tiled.dynamic_smem, strict=True)
    assert sorted(set(cfg)) == [
        (2, 2, 204, 98304),
        (6, 22, 196, 147456),
        (7, 19, 196, 147456),
    ]
    assert (tiled["smem_executed"] == 233472).all()
    graph_kernels = t.kernels["graph_node"].notna().sum()
    assert graph_kernels >= 500  # 5 replays x 100 nodes traced per node

    g = read_nsys(H200_GRAPHLEVEL)
    assert len(g.graphs) == 5 and g.kernels["graph_node"].notna().sum() == 0
    assert any("traced as whole graphs" in w for w in g.warnings)

    two = read_nsys(H200_2GPU)
    assert two.devices == [0, 1]
    assert two.kernels["pid"].nunique() == 2  # one process per rank


@pytest.mark.parametrize(
    "path", [H200_SINGLE, PUBLIC_NSYS / "pipit_cloverleaf_a100_nsys2024.5.sqlite"]
)
def test_reading_changes_nothing_beside_the_trace(path):
    before = sha256(path)
    listing = sorted(os.listdir(path.parent))
    mtime = path.stat().st_mtime_ns
    read_nsys(path)
    assert sha256(path) == before
    assert sorted(os.listdir(path.parent)) == listing  # no -wal, -shm or journal files
    assert path.stat().st_mtime_ns == mtime


def test_expected_rows_is_the_kernel_tables_largest_rowid(tmp_path):
    # the memory policy's hint before a read: an Nsight export's kernel table's largest
    # rowid (worked out here with SQLite itself), 0 for any other file or none at all
    from advisor.trace.load import expected_rows

    with closing(sqlite3.connect(H200_SINGLE.resolve().as_uri() + "?mode=ro", uri=True)) as c:
        top, count = c.execute(
            "SELECT max(rowid), count(*) FROM CUPTI_ACTIVITY_KIND_KERNEL"
        ).fetchone()
    assert expected_rows(H200_SINGLE) == top >= count > 1000
    no_kernels = tmp_path / "other.sqlite"
    with closing(sqlite3.connect(no_kernels)) as c:
        c.execute("CREATE TABLE StringIds (id INTEGER PRIMARY KEY, value TEXT)")
        c.commit()
    text = tmp_path / "trace.json"
    text.write_text('{"traceEvents": []}')
    for path in (no_kernels, text, tmp_path / "missing.sqlite", tmp_path):
        assert expected_rows(path) == 0
