"""Waves and tails on hand-built launches (H200: 132 SMs)."""

import warnings

import numpy as np
import pandas as pd
import pytest
from builders import kernels

from advisor.metrics.waves import (
    LAUNCH_CONFIG_COLUMNS,
    kernel_groups,
    launch_durations,
    launch_idle,
    launch_waves,
    order_kernel_groups,
    wave_configs,
    with_configuration,
    without_configuration,
)
from advisor.trace.gpus import match_gpu

H200 = {0: match_gpu("H200")}
TAIL_CFG = dict(block_x=256, registers=196, dynamic_smem=147456)  # 1 CTA/SM (hand-computed)


def test_133_ctas_at_one_cta_per_sm_gives_waves_1_008_tail_0_50():
    k = kernels([dict(start=0, end=1000, grid_x=7, grid_y=19, name="gemm", **TAIL_CFG)])
    w = launch_waves(k, H200).iloc[0]
    assert w.ctas_per_sm == 1 and w.slots == 132
    assert w.waves == pytest.approx(133 / 132)  # 1.0076
    assert round(w.waves, 3) == 1.008
    assert w.tail_fraction == pytest.approx(1 - (133 / 132) / 2)  # 0.4962
    assert round(w.tail_fraction, 2) == 0.50
    assert w.tail_idle_ns == pytest.approx(496.2121, abs=1e-3)
    assert w.underfill_idle_ns == 0 and not w.underfilled


def test_exactly_one_full_wave_has_no_tail():
    k = kernels([dict(start=0, end=1000, grid_x=6, grid_y=22, **TAIL_CFG)])
    w = launch_waves(k, H200).iloc[0]
    assert w.waves == 1.0 and w.tail_fraction == 0.0 and w.tail_idle_ns == 0.0


def test_underfilled_grid():
    # 4 CTAs at 2 CTAs/SM: slots 264, waves 4/264 = 0.01515, idle share 0.98485
    k = kernels([dict(start=0, end=10_000, grid_x=2, grid_y=2, registers=204, dynamic_smem=98304)])
    w = launch_waves(k, H200).iloc[0]
    assert w.slots == 264 and w.waves == pytest.approx(4 / 264)
    assert w.underfilled and w.tail_idle_ns == 0
    assert w.underfill_idle_ns == pytest.approx(10_000 * (1 - 4 / 264))


def test_persistent_kernel_is_not_judged_by_grid():
    k = kernels(
        [
            dict(
                start=0,
                end=1000,
                grid_x=130,
                name="nvjet_sm90_tst_192x192_64x3",
                block_x=384,
                registers=168,
                dynamic_smem=188604,
            )
        ]
    )
    w = launch_waves(k, H200).iloc[0]
    assert w.persistent and w.tail_fraction == 0 and not w.underfilled


def test_persistent_name_with_grid_larger_than_slots_still_quantizes():
    k = kernels([dict(start=0, end=1000, grid_x=133, name="my_persistent_gemm", **TAIL_CFG)])
    w = launch_waves(k, H200).iloc[0]
    assert not w.persistent and w.tail_fraction > 0.49


def test_comm_kernel_is_not_judged():
    k = kernels([dict(start=0, end=1000, grid_x=24, name="ncclDevKernel_AllReduce_Sum_bf16")])
    w = launch_waves(k, H200).iloc[0]
    assert w.comm and not w.underfilled and w.underfill_idle_ns == 0


def test_no_gpu_facts_leaves_waves_empty():
    k = kernels([dict(start=0, end=1000, grid_x=133, **TAIL_CFG)])
    w = launch_waves(k, {}).iloc[0]
    assert w.waves != w.waves  # NaN
    assert w.tail_idle_ns == 0


def test_groups_sum_launches():
    rows = [
        dict(start=i * 2000, end=i * 2000 + 1000, grid_x=7, grid_y=19, **TAIL_CFG) for i in range(3)
    ]
    k = kernels(rows)
    ids, configs = wave_configs(k, H200)
    g = kernel_groups(
        k.assign(config=ids, **launch_idle(launch_durations(k), ids, configs)), configs
    )
    assert len(g) == 1
    row = g.iloc[0]
    assert row.launches == 3 and row.total_ns == 3000
    assert row.tail_idle_ns == pytest.approx(3 * 496.2121, abs=1e-2)


def test_configurations_hold_the_launch_columns_once_and_the_launches_find_them():
    # two configurations over four launches: grid 7x19 (launches 0, 2, 3) and 3x1 (1)
    rows = [dict(start=i * 2000, end=i * 2000 + 1000, grid_x=g, grid_y=y, name="gemm", **TAIL_CFG)
            for i, (g, y) in enumerate([(7, 19), (3, 1), (7, 19), (7, 19)])]  # fmt: skip
    k = kernels(rows)
    ids, configs = wave_configs(k, H200)
    assert list(ids) == [0, 1, 0, 0] and len(configs) == 2
    assert list(configs["grid_x"]) == [7, 3] and list(configs["grid_y"]) == [19, 1]
    assert list(configs["registers"]) == [196, 196]
    launches = without_configuration(k).assign(config=ids)
    assert not set(LAUNCH_CONFIG_COLUMNS) & set(launches.columns)
    assert {"name", "device", "start", "end"} <= set(launches.columns)
    back = with_configuration(launches, configs)
    for col in LAUNCH_CONFIG_COLUMNS:
        if col in k:
            pd.testing.assert_series_equal(back[col], k[col])  # (values, NaN and dtype)


def test_groups_are_the_same_from_the_configurations_as_from_the_launch_columns():
    rows = [
        dict(start=i * 2000, end=i * 2000 + 1000 + 10 * i, grid_x=g, name=n, **TAIL_CFG)
        for i, (g, n) in enumerate([(133, "a"), (8, "a"), (133, "a"), (133, "b"), (8, "a")])
    ]
    k = kernels(rows)
    ids, configs = wave_configs(k, H200)
    idle = launch_idle(launch_durations(k), ids, configs)
    whole = kernel_groups(k.assign(config=ids, **idle), configs)
    lean = kernel_groups(without_configuration(k).assign(config=ids, **idle), configs)
    pd.testing.assert_frame_equal(whole, lean)
    # (hand-counted: a 133-CTA group of 2 launches, b's of 1, a's 8-CTA group of 2)
    assert sorted(zip(whole["name"], whole["grid_x"], whole["launches"], strict=True)) == [
        ("a", 8, 2), ("a", 133, 2), ("b", 133, 1)]  # fmt: skip


def test_kernel_group_order_by_idle_then_time_then_device_stable():
    # by hand: idle (tail + under-fill) 3, 3, 1, NaN; ties on idle 3 by total_ns (9 before
    # 5), the NaN idle last; equal keys keep their order (the two rows idle 1, total 4, device 0)
    g = pd.DataFrame(
        {
            "device": [1, 0, 0, 0, 2],
            "total_ns": [5, 9, 4, 4, 7],
            "tail_idle_ns": [3.0, 1.0, 1.0, 1.0, np.nan],
            "underfill_idle_ns": [0.0, 2.0, 0.0, 0.0, 0.0],
            "row": [0, 1, 2, 3, 4],
        }
    )
    assert order_kernel_groups(g)["row"].tolist() == [1, 0, 2, 3, 4]
    # the same order as pandas' stable sort of (idle desc, total desc, device asc), NaN last
    rng = np.random.default_rng(7)
    for _ in range(200):
        n = int(rng.integers(0, 30))
        t = pd.DataFrame(
            {
                "device": rng.integers(0, 3, n),
                "total_ns": rng.integers(0, 4, n),
                "tail_idle_ns": rng.choice([0.0, -0.0, 1.0, 2.5, np.nan], n),
                "underfill_idle_ns": rng.choice([0.0, 1.0, np.nan], n),
                "row": np.arange(n),
            }
        )
        want = (
            t.assign(_idle=t["tail_idle_ns"] + t["underfill_idle_ns"])
            .sort_values(
                ["_idle", "total_ns", "device"],
                ascending=[False, False, True],
                kind="stable",
                ignore_index=True,
            )
            .drop(columns="_idle")
        )
        pd.testing.assert_frame_equal(order_kernel_groups(t), want, check_exact=True)


@pytest.mark.parametrize("infer_strings", [False, True])
def test_group_text_columns_stay_objects_whatever_pandas_infers(infer_strings):
    # pandas 3 infers its str dtype for text given as arrays (a library user and a Dask
    # worker keep that default; the CLI turns it off): the groups' names, regions and
    # occupancy limiters are object columns either way, as the parts from workers and the
    # local analysis must agree (tests/test_cluster.py found them apart once)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # (pandas 3.1 marks the option deprecated)
        with pd.option_context("future.infer_string", infer_strings):
            rows = [dict(start=i * 2000, end=i * 2000 + 1000, grid_x=7, grid_y=19, name=n,
                         **TAIL_CFG) for i, n in enumerate(["gemm", "copy", "gemm"])]  # fmt: skip
            k = kernels(rows).astype({"name": "category"})  # (names as the readers give them)
            ids, configs = wave_configs(k, H200)
            k = k.assign(config=ids, region=pd.Categorical(["step", None, "step"]),
                         **launch_idle(launch_durations(k), ids, configs))  # fmt: skip
            g = kernel_groups(k, configs, by=("region",))
    assert [str(g[c].dtype) for c in ("name", "region", "limiter")] == ["object"] * 3
    assert sorted(zip(g["name"], g["region"].fillna(""), g["launches"], strict=True)) == [
        ("copy", "", 1), ("gemm", "step", 2)]  # fmt: skip


@pytest.mark.parametrize("region_dtype", ["category", object])
def test_groups_split_by_columns_with_missing_values(region_dtype):
    # six launches of one configuration; (region, shape) per launch: (fwd, 1) (-, 1)
    # (fwd, 2) (bwd, 1) (-, 1) (fwd, 1), '-' missing. By hand: (fwd, 1) rows 0 and 5,
    # 2 launches; (-, 1) rows 1 and 4, 2; (fwd, 2) row 2, 1; (bwd, 1) row 3, 1
    rows = [dict(start=i * 2000, end=i * 2000 + 1000, grid_x=133, name="a", **TAIL_CFG)
            for i in range(6)]  # fmt: skip
    k = kernels(rows)
    ids, configs = wave_configs(k, H200)
    region = pd.Series(["fwd", None, "fwd", "bwd", None, "fwd"], dtype=region_dtype)
    shape = np.array([1, 1, 2, 1, 1, 1], dtype=np.int32)
    launches = k.assign(
        config=ids, **launch_idle(launch_durations(k), ids, configs), region=region, shape=shape
    )
    g = kernel_groups(launches, configs, by=("region", "shape"))
    named = [r if isinstance(r, str) else "-" for r in g["region"]]
    got = sorted(zip(named, g["shape"].astype(int), g["launches"].astype(int), strict=True))
    assert got == [("-", 1, 2), ("bwd", 1, 1), ("fwd", 1, 2), ("fwd", 2, 1)]
    # each group's worst launch is one of its own (its first row found per group)
    assert set(g["worst_start_ns"]) <= set(launches["start"])


def test_a_groups_worst_start_is_its_worst_launchs_whichever_way_read():
    # one configuration with a tail (TAIL_CFG), three launches of 1000, 3000 and 2000 ns at
    # 0, 2000 and 6000: tail idle is a share of the duration, so the second launch idles
    # most and the group's worst_start_ns is 2000, whether the table holds start and end
    # or a duration with the device and start read at the rows asked (read_at)
    rows = [dict(start=s, end=s + d, grid_x=7, grid_y=19, name="gemm", **TAIL_CFG)
            for s, d in ((0, 1000), (2000, 3000), (6000, 2000))]  # fmt: skip
    k = kernels(rows)
    ids, configs = wave_configs(k, H200)
    full = k.assign(config=ids, **launch_idle(launch_durations(k), ids, configs))
    assert full["tail_idle_ns"].idxmax() == 1
    assert kernel_groups(full, configs)["worst_start_ns"].tolist() == [2000]
    asked = []

    def read_at(col, at):
        asked.append((col, at.tolist()))
        return full[col].array.take(at)

    lean = full.drop(columns=["start", "end", "device"]).assign(duration=[1000, 3000, 2000])
    got = kernel_groups(lean, configs, read_at=read_at)
    assert got["worst_start_ns"].tolist() == [2000] and got["total_ns"].tolist() == [6000]
    assert ("start", [1]) in asked and all(len(at) == 1 for _, at in asked)
    pd.testing.assert_frame_equal(got, kernel_groups(full, configs))


def test_launch_idle_by_hand_leaves_its_inputs():
    # configurations: tail share 0.25 (full waves), 0.5 under-filled, NaN (unknown); four
    # launches of 100, 200, 40 and 8 ns on configurations 0, 1, 2, 0: tail idle 25, 0,
    # NaN, 2; under-fill idle 0, 100, 0, 0 (ns). Neither the durations nor the
    # configurations change (the products are made in place in arrays of its own)
    configs = pd.DataFrame({"tail_fraction": [0.25, 0.5, np.nan],
                            "underfilled": [False, True, False]})  # fmt: skip
    duration = np.array([100, 200, 40, 8], dtype=np.int64)
    got = launch_idle(duration, np.array([0, 1, 2, 0]), configs)
    np.testing.assert_array_equal(got["tail_idle_ns"], [25.0, 0.0, np.nan, 2.0])
    np.testing.assert_array_equal(got["underfill_idle_ns"], [0.0, 100.0, 0.0, 0.0])
    assert duration.tolist() == [100, 200, 40, 8]
    assert configs["tail_fraction"].tolist()[:2] == [0.25, 0.5]


def test_durations_at_rows_in_blocks_by_hand():
    # ops of 10, 5, 0 and 7 ns; rows 3, 0, 0, 2 in blocks of 1, 3 and more than all
    from advisor.analysis import _durations_at

    ops = pd.DataFrame({"start": [0, 20, 30, 40], "end": [10, 25, 30, 47]})
    at = np.array([3, 0, 0, 2])
    for block in (1, 3, 1 << 20):
        assert _durations_at(ops, at, block).tolist() == [7, 10, 10, 0]


def test_worst_launch_by_hand():
    # configurations: 0 no tail, 1 a tail share of 0.1, 2 of 0.4, 3 under-filled, 0.3.
    # group 0: durations 100, 50, 300, only the second idles (on 1: 5 ns): it is the worst;
    # group 1: none idles, durations 10, 40, 40: the longest, the first of the tie (row 4);
    # group 2: both idle (on 2, 5 ns: 2 ns of tail; on 3, 10 ns: 3 ns of under-fill): the
    # most idle (row 7)
    from advisor.metrics.waves import _worst_launch

    configs = pd.DataFrame({"tail_fraction": [0.0, 0.1, 0.4, 0.3],
                            "underfilled": [False, False, False, True]})  # fmt: skip
    config = np.array([0, 1, 0, 0, 0, 0, 2, 3])
    group = np.array([0, 0, 0, 1, 1, 1, 2, 2])
    duration = np.array([100, 50, 300, 10, 40, 40, 5, 10], dtype=np.int64)
    assert _worst_launch(config, configs, group, duration).tolist() == [1, 4, 7]


def test_group_idle_sums_by_hand_and_against_every_launchs_idle():
    # configurations: 0 a tail share of 0.25, 1 under-filled 0.5, 2 unknown (NaN), 3 0.1.
    # group 0: launches on 0 (100, 300 ns) and 3 (50 ns): tail 0.25 x 400 + 0.1 x 50 = 105;
    # group 1: on 1 (200 ns) and 2 (80 ns): under-fill 0.5 x 200 = 100, the NaN adding none;
    # group 2: on 2 only: 0 and 0
    from advisor.metrics.waves import group_idle_sums, launch_idle

    configs = pd.DataFrame({"tail_fraction": [0.25, 0.5, np.nan, 0.1],
                            "underfilled": [False, True, False, False]})  # fmt: skip
    group = np.array([0, 1, 0, 0, 1, 2])
    config = np.array([0, 1, 3, 0, 2, 2])
    duration = np.array([100, 200, 50, 300, 80, 70], dtype=np.int64)
    first = np.array([0, 1, 5])
    total = np.bincount(group, duration).astype(np.int64)
    for block in (1, 2, 1 << 20):
        got = group_idle_sums(group, first, config, duration, total, configs, block=block)
        assert got["tail_idle_ns"].tolist() == [105.0, 0.0, 0.0]
        assert got["underfill_idle_ns"].tolist() == [0.0, 100.0, 0.0]
    # random launches: the sums of every launch's launch_idle (NaN skipped), to 1e-12
    rng = np.random.default_rng(13)
    share = rng.random(30)
    share[rng.random(30) < 0.1] = np.nan
    configs = pd.DataFrame({"tail_fraction": share, "underfilled": rng.random(30) < 0.3})
    for _ in range(50):
        n = int(rng.integers(1, 400))
        group = rng.integers(0, 12, n)
        group = pd.factorize(group)[0]  # (ids in order of first appearance, each present)
        first = pd.Series(np.arange(n)).groupby(group).first().to_numpy()
        main = rng.integers(0, 30, group.max() + 1)
        config = np.where(rng.random(n) < 0.8, main[group], rng.integers(0, 30, n))
        duration = rng.integers(0, 10**7, n)
        total = np.bincount(group, duration).astype(np.int64)
        want = pd.DataFrame(launch_idle(duration, config, configs)).groupby(group).sum()
        got = group_idle_sums(group, first, config, duration, total, configs, block=7)
        for col in want:
            np.testing.assert_allclose(got[col], want[col].to_numpy(), rtol=1e-12, atol=1e-6)
