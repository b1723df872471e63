"""benchmarks/trace_shapes.py builds each shape it names (counted here on small traces),
and each runs through the analysis, the rules and the JSON document."""

import importlib.util

import pytest
from conftest import ROOT

spec = importlib.util.spec_from_file_location("shapes", ROOT / "benchmarks" / "trace_shapes.py")
shapes = importlib.util.module_from_spec(spec)
spec.loader.exec_module(shapes)

N = 600


def _build(name):
    return shapes.build(N, **shapes.SHAPES[name])


def test_base_is_one_device_stream_and_thread_with_eight_names():
    t = _build("base")
    k = t.kernels
    assert len(k) == N and k["name"].nunique() == 8 and t.devices == [0]
    assert k["stream"].nunique() == 1 and t.api["tid"].nunique() == 1
    assert (t.api["name"] == "cudaLaunchKernel").sum() == N and t.nvtx.empty
    # every launch call ends before its kernel starts, and the kernels on a device never overlap
    calls = t.api.set_index("correlation")["end"]
    assert (calls.reindex(k["correlation"].astype(int)).to_numpy() < k["start"].to_numpy()).all()
    assert (k["start"].to_numpy()[1:] > k["end"].to_numpy()[:-1]).all()


def test_each_shape_changes_what_it_names():
    assert _build("names").kernels["name"].nunique() == N
    assert _build("devices64").devices == list(range(64))
    assert _build("streams2000").kernels["stream"].nunique() == N  # (fewer ops than streams)
    assert _build("threads1000").api["tid"].nunique() == N
    assert len(_build("ranges").nvtx) == N
    assert len(_build("ranges1000").nvtx) == N  # (fewer kernels than ranges: one each)
    deep = _build("deep200").nvtx
    assert len(deep) == 200 and (deep["start"].diff().dropna() > 0).all()
    assert (deep["end"].diff().dropna() < 0).all()  # (each inside the one before)
    copies = _build("copies")
    assert len(copies.memcpy) == len(copies.kernels) == N // 2
    assert (copies.memcpy["src_memory"] == "pageable").all()
    assert (copies.api["name"] == "cudaMemcpyAsync").sum() == N // 2
    graphs = _build("graphs100")
    assert graphs.kernels["correlation"].nunique() == N // 100 == len(graphs.api)
    assert (graphs.api["name"] == "cudaGraphLaunch").all()
    assert (_build("syncs").api["name"] == "cudaStreamSynchronize").sum() == N


@pytest.mark.parametrize("name", list(shapes.SHAPES))
def test_each_shape_runs_through_the_analysis(name):
    r = shapes.run_shape(name, N)
    assert r["shape"] == name and r["kernels"] == N and r["json_mb"] > 0
