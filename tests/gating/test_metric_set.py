"""The typed metric set of a hand-built trace: kernel keys as data (a name holding " grid="
among them), stored and read back as this version and as versions 2 and 3 stored them."""

import json

import numpy as np
from builders import trace
from gate_sets import as_version

from advisor.analysis import analyze
from advisor.gating import KernelKey, compare, load_config, metric_set
from advisor.gating.metricset import load

NAME = "fused grid=stride kernel"  # its own name holds " grid="


def _set(slow: float = 1.0, **dims):
    """Ten launches of NAME (8x1x1 CTAs of 256 threads, 10 us each, ``slow`` times that)
    and ten of ``gemm`` (4x4x1, 128 threads), 50 us apart."""
    rows = []
    for i in range(10):
        t = i * 50_000
        rows.append(dict(name=NAME, start=t, end=t + int(10_000 * slow), grid_x=8,
                         block_x=256, **dims))  # fmt: skip
        rows.append(dict(name="gemm", start=t + 20_000, end=t + 30_000, grid_x=4, grid_y=4,
                         block_x=128))  # fmt: skip
    return metric_set(analyze(trace(rows)), [])


def test_a_kernel_whose_name_holds_grid_keeps_its_name():
    s = _set()
    keys = [k.key for k in s.kernels]
    assert keys == [KernelKey(NAME, (8, 1, 1), 256), KernelKey("gemm", (4, 4, 1), 128)]
    assert [k.text for k in keys] == [f"{NAME} grid=8x1x1 block=256", "gemm grid=4x4x1 block=128"]
    assert [k.launches for k in s.kernels] == [10, 10]
    # stored as JSON (what a baseline store holds), read back: the same set, the same key
    stored = json.loads(json.dumps(s.to_dict()))
    assert stored["kernels"][0]["key"] == {"name": NAME, "grid": [8, 1, 1], "block": 256}
    assert load(stored) == s
    for version in (2, 3):  # as advisor stored it before kernel keys were data
        assert load(as_version(stored, version)) == s, version


def test_a_slower_kernel_is_named_by_its_own_name():
    r = compare([_set()], [_set(slow=1.5)], load_config())
    (row,) = [r for r in r.rows if r.scope == "kernel" and r.status == "regression"]
    assert row.key == f"{NAME} grid=8x1x1 block=256" and row.kernel.name == NAME


def test_a_launch_without_its_grid_is_not_compared_per_kernel():
    # (a ROCm Kineto trace records no launch configuration: NaN grid and block)
    s = _set(grid_y=np.nan)
    assert [k.key.name for k in s.kernels] == ["gemm"]
    # a float column (as JSON traces give them) keeps its float text
    (k,) = _set(grid_y=2.0).kernels[:1]
    assert k.key.text == f"{NAME} grid=8x2.0x1 block=256"


def test_the_overall_wave_idle_is_the_launches_by_hand():
    # both kernels fill under one wave on an H200 (132 SMs): NAME 8 CTAs of 256 threads, 8 a
    # SM (2048 threads, 65536 registers / (32 x 256)): 1056 slots; gemm 16 CTAs of 128, 16 a
    # SM: 2112 slots. Idle share 1 - 8/1056 = 1 - 16/2112 = 1048/1056 of each 10 us launch,
    # 10 launches each, no range (nothing cold): under-fill idle 2 x 10 x 10,000 x 1048/1056
    overall = _set().overall
    assert overall["tail_idle_ns"] == 0.0
    assert np.isclose(overall["underfill_idle_ns"], 2 * 10 * 10_000 * 1048 / 1056, rtol=1e-12)
