"""analysis.analyze leaves the Trace it is given as it was (its tables, GPU facts and
warnings), unless the caller asks it to release the API rows and the kernel columns the
analysis holds elsewhere."""

import pandas as pd
import pytest
from conftest import H200_2GPU, H200_SINGLE, PUBLIC_ROCPROF, SAMPLES

from advisor.analysis import OP_KERNEL_COLUMNS, OPS_ONLY_KERNEL_COLUMNS, analyze
from advisor.metrics.waves import LAUNCH_CONFIG_COLUMNS
from advisor.trace.load import load_trace

TABLES = ("kernels", "api", "memcpy", "memset", "graphs", "sync", "nvtx")


@pytest.mark.parametrize(
    "path",
    [H200_SINGLE, H200_2GPU, SAMPLES / "kineto" / "h200_train_steps.pt.trace.json.gz",
     PUBLIC_ROCPROF / "v3_json" / "tracelens__908_results.json.gz"],
    ids=lambda p: p.name,
)  # fmt: skip
def test_analyze_does_not_change_its_trace(path):
    trace = load_trace(path)
    before = {name: getattr(trace, name).copy(deep=True) for name in TABLES}
    gpus, warnings = dict(trace.gpus), list(trace.warnings)
    a = analyze(trace)
    a.select(None, None).kernel_table(by_region=True)
    for name, table in before.items():
        pd.testing.assert_frame_equal(getattr(trace, name), table, obj=name)
    assert trace.gpus == gpus and trace.warnings == warnings


def test_release_api_only_when_asked():
    trace = load_trace(H200_SINGLE)
    assert len(trace.api) > 0
    assert {"grid_x", "block_x", "registers", "static_smem"} <= set(trace.kernels.columns)
    rows, devices = len(trace.kernels), trace.devices
    kept = trace.kernels.copy()
    a = analyze(trace, release_api=True)
    assert trace.api.empty and list(trace.api.columns)  # emptied, its columns kept
    # the launch configuration's columns are the configurations table's alone
    assert not set(LAUNCH_CONFIG_COLUMNS) & set(trace.kernels.columns)
    # the columns the ops hold (and those only the ops are made of) are the ops' alone
    assert not set(OP_KERNEL_COLUMNS) & set(trace.kernels.columns)
    assert not set(OPS_ONLY_KERNEL_COLUMNS) & set(trace.kernels.columns)
    assert len(trace.kernels) == rows and {"name", "demangled"} <= set(trace.kernels)
    assert trace.devices == devices == [0]
    # the launch table has them back, row for row, in the trace's dtypes and column order
    columns = [c for c in kept if c in a.launches]
    assert columns == [c for c in kept if c not in LAUNCH_CONFIG_COLUMNS
                       and c not in OPS_ONLY_KERNEL_COLUMNS]  # fmt: skip
    pd.testing.assert_frame_equal(a.launches[columns], kept[columns])
    # the same table as an analysis that keeps the trace as it is
    other = analyze(load_trace(H200_SINGLE))
    pd.testing.assert_frame_equal(a.launches, other.launches)


ANALYSIS_TABLES = ("ops", "pieces", "launches", "configs", "shapes", "devices", "regions",
                   "sequences", "gaps", "streams", "collectives", "totals")  # fmt: skip


@pytest.mark.parametrize(
    "path",
    [H200_2GPU, SAMPLES.parent / "tests/data/public/kineto/hta_nccl_data.json.gz"],
    ids=lambda p: p.name,
)
def test_stages_beside_each_other_give_the_analysis_of_one_thread(path):
    # with several threads the configurations are found beside the ops' attribution, and
    # the launch sequences, stream and gap sums beside the launch table (ahead.beside),
    # from the trace's kernels before release_api drops their columns: every table equals
    # the one-thread analysis
    one = analyze(load_trace(path), release_api=True, cores=1)
    three = analyze(load_trace(path), release_api=True, cores=3)
    assert len(one.sequences) and len(one.configs) and len(one.streams)
    for name in ANALYSIS_TABLES:
        pd.testing.assert_frame_equal(getattr(three, name), getattr(one, name), obj=name)
    assert three.notes == one.notes and three.coverage == one.coverage


@pytest.mark.parametrize("path", [H200_SINGLE, H200_2GPU], ids=lambda p: p.name)
def test_window_wave_idle_is_its_launches(path):
    """The devices' and the range windows' tail and under-fill idle are their launches'
    (each kernel op's launch, summed per window), in all and per window."""
    a = analyze(load_trace(path))
    launches = a.launches
    for col in ("tail_idle_ns", "underfill_idle_ns"):
        per_device = launches.groupby("device")[col].sum()
        got = a.devices.set_index("device")[col]
        assert per_device.sum() > 0
        pd.testing.assert_series_equal(got.reindex(per_device.index), per_device,
                                       check_names=False, check_index_type=False,
                                       rtol=1e-12)  # fmt: skip
        inside = launches[launches["range_id"] >= 0]
        per_range = inside.groupby(["range_id", "device"])[col].sum()
        regions = a.regions.set_index(["range_id", "device"])[col]
        assert len(regions) and per_range.sum() > 0
        pd.testing.assert_series_equal(regions.reindex(per_range.index).fillna(0), per_range,
                                       check_names=False, check_index_type=False,
                                       rtol=1e-12)  # fmt: skip
        assert regions.drop(per_range.index).sum() == 0  # (windows without such launches)
