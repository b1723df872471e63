"""Property tests (hypothesis) of the metric functions against brute force on small
integer timelines, and of the occupancy and wave formulas."""

import numpy as np
import pandas as pd
from builders import kernels
from hypothesis import given, settings
from hypothesis import strategies as st

from advisor.metrics import intervals as iv
from advisor.metrics.occupancy import ctas_per_sm
from advisor.metrics.waves import launch_waves
from advisor.trace.gpus import match_gpu

SETTINGS = settings(max_examples=200, deadline=None)
T = 60  # timeline length of the brute-force checks (ns)

intervals = st.lists(st.tuples(st.integers(0, T), st.integers(0, T)).map(sorted), max_size=12).map(
    lambda xs: (np.array([a for a, _ in xs], np.int64), np.array([b for _, b in xs], np.int64))
)


def covered(starts, ends) -> np.ndarray:
    """Brute force: which unit steps [t, t+1) of the timeline some interval covers."""
    out = np.zeros(T, dtype=bool)
    for s, e in zip(starts, ends, strict=True):
        out[s:e] = True
    return out


@SETTINGS
@given(intervals)
def test_union_is_sorted_disjoint_and_covers_exactly_the_input(xs):
    s, e = iv.union(*xs)
    assert (e > s).all()
    assert (s[1:] > e[:-1]).all()  # disjoint and not touching (touching ones merge)
    assert np.array_equal(covered(s, e), covered(*xs))
    assert iv.length((s, e)) == covered(*xs).sum()
    again = iv.union(s, e)
    assert np.array_equal(again[0], s) and np.array_equal(again[1], e)  # idempotent


@SETTINGS
@given(intervals, intervals)
def test_intersection_is_symmetric_and_bounded(a, b):
    ua, ub = iv.union(*a), iv.union(*b)
    both = iv.overlap(ua, ub)
    assert both == iv.overlap(ub, ua)
    assert 0 <= both <= min(iv.length(ua), iv.length(ub))
    assert both == (covered(*a) & covered(*b)).sum()


@SETTINGS
@given(
    intervals,
    st.lists(st.tuples(st.integers(0, T), st.integers(0, T)).map(sorted), min_size=1, max_size=6),
)
def test_coverage_in_windows_matches_brute_force(xs, windows):
    lo = np.array([w[0] for w in windows])
    hi = np.array([w[1] for w in windows])
    got = iv.covered_in_windows(iv.union(*xs), lo, hi)
    mask = covered(*xs)
    assert got.tolist() == [int(mask[a:b].sum()) for a, b in windows]


@SETTINGS
@given(st.lists(st.tuples(st.integers(0, 3), st.integers(0, T), st.integers(0, 20)), max_size=15))
def test_reach_before_matches_a_per_group_loop(rows):
    rows = sorted(rows)  # by group, then start
    end = pd.Series([s + d for _, s, d in rows], dtype="int64")
    group = pd.Series([g for g, _, _ in rows])
    got = iv.reach_before(end, group).tolist()
    for i, (g, _, _) in enumerate(rows):
        earlier = [end[j] for j in range(i) if rows[j][0] == g]
        assert got[i] == (max(earlier) if earlier else np.iinfo(np.int64).min)


H200 = match_gpu("H200")
launch = dict(
    threads=st.integers(1, 1024),
    regs=st.integers(0, 255),
    smem=st.integers(0, 227 * 1024),
)


def occupancy(threads, regs, smem) -> int:
    ctas, _ = ctas_per_sm(
        threads,
        regs,
        smem,
        H200.shared_mem_per_sm,
        warp_size=H200.warp_size,
        max_warps_per_sm=H200.max_warps_per_sm,
        max_blocks_per_sm=H200.max_blocks_per_sm,
        registers_per_sm=H200.registers_per_sm,
        reserved_smem_per_block=H200.reserved_shared_mem_per_block,
    )
    return int(ctas)


@SETTINGS
@given(**launch, more_regs=st.integers(0, 255), more_smem=st.integers(0, 64 * 1024))
def test_occupancy_never_grows_with_registers_or_shared_memory(
    threads, regs, smem, more_regs, more_smem
):
    base = occupancy(threads, regs, smem)
    assert 0 <= base <= H200.max_blocks_per_sm
    assert occupancy(threads, min(regs + more_regs, 255), smem) <= base
    assert occupancy(threads, regs, smem + more_smem) <= base


@SETTINGS
@given(
    st.lists(
        st.tuples(
            st.integers(1, 5000), st.integers(1, 4), st.integers(1, 1024), st.integers(0, 255)
        ),
        min_size=1,
        max_size=8,
    )
)
def test_waves_times_slots_is_the_grid(configs):
    k = kernels(
        [
            dict(start=i * 10, end=i * 10 + 5, grid_x=gx, grid_y=gy, block_x=bx, registers=r)
            for i, (gx, gy, bx, r) in enumerate(configs)
        ]
    )
    w = launch_waves(k, {0: H200})
    has = w["slots"].notna()
    assert np.allclose((w["waves"] * w["slots"])[has], w["grid_blocks"][has])
    assert (w["grid_blocks"] == k["grid_x"] * k["grid_y"]).all()
    assert ((w["tail_fraction"] >= 0) & (w["tail_fraction"] < 1)).all()
    assert (w["tail_idle_ns"] + w["underfill_idle_ns"] <= w["duration"]).all()


run_values = st.lists(
    st.tuples(
        st.integers(0, 5),  # run id (sorted below: runs are contiguous and ascending)
        st.one_of(st.integers(-(2**40), 2**40).map(float), st.floats(-1e6, 1e6), st.just(np.nan)),
    ),
    min_size=1,
    max_size=40,
).map(sorted)


@SETTINGS
@given(run_values)
def test_median_per_run_matches_numpy_per_run(rows):
    from advisor.metrics.gaps import _median_per_run

    run = np.array([r for r, _ in rows], dtype=np.int32)
    values = np.array([v for _, v in rows], dtype=np.float64)
    rng = np.random.default_rng(len(rows))
    for block in np.split(np.arange(len(rows)), np.flatnonzero(np.diff(run)) + 1):
        values[block] = rng.permutation(values[block])  # unsorted within each run
    first = iv.run_heads(run)
    got = _median_per_run(run, values, first)
    for i, at in enumerate(first):
        part = values[run == run[at]]
        part = part[~np.isnan(part)]
        want = np.median(part) if len(part) else np.nan
        assert np.isclose(got[i], want, equal_nan=True, rtol=0, atol=0), (i, got[i], want)


@SETTINGS
@given(
    st.lists(st.tuples(st.integers(-3, 3), st.integers(0, 2**40), st.integers(0, 4)), max_size=30)
)
def test_grouped_order_is_a_stable_lexsort(rows):
    a = np.array([r[0] for r in rows], dtype=np.int64)
    b = np.array([r[1] for r in rows], dtype=np.int64)
    c = np.array([r[2] for r in rows], dtype=np.int32)
    for keys in ((a,), (c, a), (b, c), (a, b, c)):
        assert np.array_equal(iv.grouped_order(*keys), np.lexsort(keys))


@SETTINGS
@given(st.lists(st.tuples(st.integers(0, 1), st.integers(0, 2), st.integers(0, T - 10),
                          st.integers(1, 9)), min_size=1, max_size=25))  # fmt: skip
def test_stream_summary_does_not_depend_on_row_order(rows):
    from advisor.metrics.gaps import stream_summary

    ops = pd.DataFrame(rows, columns=["device", "stream", "start", "took"])
    ops["end"] = ops["start"] + ops.pop("took")
    ordered = ops.sort_values(["device", "start", "end"], kind="stable", ignore_index=True)
    shuffled = ops.sample(frac=1, random_state=len(rows)).reset_index(drop=True)
    key = ["device", "stream"]
    want = stream_summary(ordered).sort_values(key, ignore_index=True)
    pd.testing.assert_frame_equal(stream_summary(shuffled).sort_values(key, ignore_index=True),
                                  want)  # fmt: skip
    for block in (1, 2, 5):  # each stream's latest end carried from block to block
        pd.testing.assert_frame_equal(stream_summary(ordered, block_rows=block),
                                      stream_summary(ordered))  # fmt: skip
    for (d, s), own in ordered.groupby(key):  # brute force: the stream's own idle time
        idle = covered(own["start"], own["end"])[own["start"].min() : own["end"].max()]
        row = want[(want["device"] == d) & (want["stream"] == s)].iloc[0]
        assert row["gap_ns"] == (~idle).sum() and row["ops"] == len(own)


@SETTINGS
@given(
    st.lists(
        st.tuples(st.integers(0, 4), st.sampled_from([7, 2**20]), st.integers(-1, 6)),
        min_size=1,
        max_size=40,
    ),
    st.booleans(),
)
def test_distinct_launches_per_run_match_brute_force(rows, packed):
    from advisor.metrics import gaps
    from advisor.metrics import keys as keys_module

    rows = sorted(rows, key=lambda r: r[0])  # runs contiguous and ascending
    run = np.unique([r[0] for r in rows], return_inverse=True)[1].astype(np.int32)  # 0, 1, ..
    corr = np.array([r[2] for r in rows], dtype=np.float64)
    corr[corr < 0] = np.nan  # no launch id: counts alone
    keys = gaps._key(np.array([r[1] for r in rows]), corr)
    first = iv.run_heads(run)
    limit = keys_module.PACK_LIMIT
    keys_module.PACK_LIMIT = 2**62 if packed else 0  # 0: nothing packs, the lexsort path
    try:
        got = gaps._distinct_per_run(run, keys, first)
    finally:
        keys_module.PACK_LIMIT = limit
    for i, at in enumerate(first):
        mine = [(p, c) for (_, p, c), r in zip(rows, run, strict=True) if r == run[at]]
        want = len({(p, c) for p, c in mine if c >= 0}) + sum(c < 0 for _, c in mine)
        assert got[i] == want


@SETTINGS
@given(
    st.lists(
        st.tuples(
            st.sampled_from([0, 1, 2, 2**31 + 5]),
            st.sampled_from([-1, 0, 5, 2**32, 2**32 + 5, 2**40]),
        ),  # fmt: skip
        min_size=1,
        max_size=30,
    ),
    st.integers(1, 29),
)
def test_launch_keys_equal_exactly_when_pairs_are(rows, cut):
    # (process, correlation) keys, packed or numbered: equal across both arrays iff the
    # pairs are equal; -1 for a missing correlation (64-bit ids and large pids included)
    from advisor.metrics import gaps

    cut = min(cut, len(rows))
    pid = np.array([r[0] for r in rows], dtype=np.int64)
    corr = np.array([r[1] for r in rows], dtype=np.float64)
    corr[corr < 0] = np.nan
    a, b = gaps._keys((pid[:cut], corr[:cut]), (pid[cut:], corr[cut:]))
    keys = np.concatenate([a, b])
    for i in range(len(rows)):
        assert (keys[i] == -1) == np.isnan(corr[i])
        for j in range(len(rows)):
            if not (np.isnan(corr[i]) or np.isnan(corr[j])):
                same = (pid[i], corr[i]) == (pid[j], corr[j])
                assert (keys[i] == keys[j]) == same
