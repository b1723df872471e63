import numpy as np
import pandas as pd

from advisor.metrics import intervals as iv


def test_union_merges_overlapping_and_touching():
    s, e = iv.union([10, 0, 5, 30, 20], [20, 4, 12, 40, 25])
    # [0,4) ; [5,12) ∪ [10,20) ∪ [20,25) -> [5,25) ; [30,40)
    assert s.tolist() == [0, 5, 30]
    assert e.tolist() == [4, 25, 40]
    assert iv.length((s, e)) == 4 + 20 + 10


def test_union_drops_empty_intervals():
    s, e = iv.union([5, 7], [5, 9])
    assert s.tolist() == [7] and e.tolist() == [9]


def test_overlap_of_two_sets():
    a = iv.union([0, 100], [50, 150])  # 50 + 50
    b = iv.union([25], [125])  # 100
    # a ∩ b = [25,50) + [100,125) = 50
    assert iv.overlap(a, b) == 50


def test_covered_in_windows_hand_cases():
    seg = iv.union([0, 100, 200], [50, 150, 300])
    got = iv.covered_in_windows(seg, [0, 25, 120, 160, 250, 400], [300, 125, 130, 199, 1000, 500])
    # whole: 50+50+100; [25,125): 25+25; [120,130): 10; [160,199): 0; [250,1000): 50; past end: 0
    assert got.tolist() == [200, 50, 10, 0, 50, 0]


def test_covered_in_windows_no_segments():
    empty = (np.array([], np.int64), np.array([], np.int64))
    assert iv.covered_in_windows(empty, [0], [10]).tolist() == [0]


def test_clip():
    s, e = iv.clip(iv.union([0, 100], [50, 150]), 25, 120)
    assert s.tolist() == [25, 100] and e.tolist() == [50, 120]


FIRST = np.iinfo(np.int64).min  # reach_before at a group's first row (no fill given)


def test_reach_before_per_group():
    # group 0: [0,10) [5,8) [12,20)  -> reach before: none, 10, 10
    # group 1: [3,4) [6,30)          -> none, 4   (group 0's ends never leak into group 1)
    end = pd.Series([10, 8, 20, 4, 30])
    keys = pd.Series([0, 0, 0, 1, 1])
    got = iv.reach_before(end, keys)
    assert got.dtype == np.int64 and got.tolist() == [FIRST, 10, 10, FIRST, 4]
    start = np.array([0, 5, 12, 3, 6])
    assert iv.reach_before(end, keys, fill=start).tolist() == [0, 10, 10, 3, 4]


def test_reach_before_with_timestamps_too_far_apart_to_offset():
    # ends near 2^62 and near 0: offsetting groups would overflow, the per-group path runs
    big = 2**62
    end = pd.Series([big, big - 5, 7, 3])
    got = iv.reach_before(end, [pd.Series([0, 0, 1, 1])]).tolist()
    assert got == [FIRST, big, FIRST, 7]


def test_run_heads():
    assert iv.run_heads(np.array([1, 1, 2, 2, 1]), np.array([0, 1, 1, 1, 1])).tolist() == [
        0,
        1,
        2,
        4,
    ]


def test_distinct_in_runs_counts_each_nan_alone():
    # runs [1, 1, 2] and [nan, nan, 5]: 2 distinct, then 3 (two NaNs and a 5)
    values = np.array([1.0, 1.0, 2.0, np.nan, np.nan, 5.0])
    assert iv.distinct_in_runs(values, np.array([0, 3])).tolist() == [2, 3]


def test_gap_coverage_hand_cases():
    # gaps [2, 5), [5, 5) (none), [8, 10) given by their ends 5, 5, 10 and lengths 3, 0, 2
    c = iv.GapCoverage(np.array([5, 5, 10]), np.array([3, 0, 2]))
    lo = np.array([0, 3, 4, 5, 6, 9, 0, 11, 7])
    hi = np.array([20, 4, 9, 8, 9, 12, 3, 15, 6])
    # [0,20): 3+2; [3,4): 1; [4,9): 1 (4..5) + 1 (8..9); [5,8): 0; [6,9): 1; [9,12): 1;
    # [0,3): 1; [11,15): 0 (past every gap); [7,6): 0 (reversed)
    assert c.within(lo, hi).tolist() == [5, 1, 2, 0, 1, 1, 1, 0, 0]
    assert iv.GapCoverage(np.zeros(0, np.int64), np.zeros(0, np.int64)).within(
        np.array([1]), np.array([2])).tolist() == [0]  # fmt: skip


def test_gap_coverage_is_coverage_of_the_same_segments():
    # random disjoint gaps (some empty, some touching the next) and windows anywhere,
    # reversed and empty ones too: the same answers as Coverage of [end - length, end)
    rng = np.random.default_rng(7)
    for _ in range(50):
        n = int(rng.integers(1, 40))
        length = rng.integers(0, 5, n) * rng.integers(0, 2, n)  # (about half empty)
        step = rng.integers(0, 6, n)  # (0: the next gap starts where this one ends)
        end = np.cumsum(length + step)
        begin = end - length
        lo = rng.integers(-5, int(end[-1]) + 5, 200)
        hi = lo + rng.integers(-3, 20, 200)
        expected = iv.Coverage((begin, end)).within(lo, hi)
        assert iv.GapCoverage(end, length).within(lo, hi).tolist() == expected.tolist()


def test_coded_coverage_hand_cases():
    # code 1: [2, 5) and [12, 14); code 3: [5, 9) (touching code 1's first); code 2: none
    c = iv.CodedCoverage({1: (np.array([2, 12]), np.array([5, 14])),
                          3: (np.array([5]), np.array([9]))})  # fmt: skip
    lo = np.array([0, 4, 6, 9, 13, 20, 7, 3])
    hi = np.array([20, 6, 8, 12, 15, 30, 7, 2])
    # [0,20): 1: 3+2, 3: 4; [4,6): 1: 1, 3: 1; [6,8): 3: 2; [9,12): neither (between);
    # [13,15): 1: 1; [20,30): past every segment; [7,7): empty; [3,2): reversed
    got = c.within(lo, hi)
    assert c.codes == [1, 3] and list(got) == [1, 3]
    assert got[1].tolist() == [5, 1, 0, 0, 1, 0, 0, 0]
    assert got[3].tolist() == [4, 1, 2, 0, 0, 0, 0, 0]


def test_coded_coverage_is_coverage_of_each_code():
    # random disjoint segments (touching ones too) dealt out to three codes, windows
    # anywhere, reversed and empty ones too: per code the answers of Coverage of its own
    rng = np.random.default_rng(11)
    for _ in range(50):
        n = int(rng.integers(1, 40))
        length = rng.integers(1, 6, n)
        step = rng.integers(0, 6, n)  # (0: the next segment starts where this one ends)
        end = np.cumsum(length + step)
        begin = end - length
        code = rng.choice([1, 2, 4], n)
        segments = {int(c): (begin[code == c], end[code == c]) for c in np.unique(code)}
        lo = rng.integers(-5, int(end[-1]) + 5, 200)
        hi = lo + rng.integers(-3, 25, 200)
        got = iv.CodedCoverage(segments).within(lo, hi)
        assert sorted(got) == sorted(segments)
        for c, seg in segments.items():
            assert got[c].tolist() == iv.Coverage(seg).within(lo, hi).tolist()


def test_union_of_sorted_carries_the_reach_across_blocks():
    # by start: [0,10) holds [2,4); [10,12) touches it: [0,12); [12,12) is empty; [20,30)
    # then [25,40) (masked out) and [31,35): with the mask [20,30) [31,35); unmasked [20,40)
    starts = np.array([0, 2, 10, 12, 20, 25, 31])
    ends = np.array([10, 4, 12, 12, 30, 40, 35])
    mask = np.array([True, True, True, True, True, False, True])
    for block in (1, 2, 3, 7, None):
        s, e = iv.union_of_sorted(starts, ends, block=block)
        assert (s.tolist(), e.tolist()) == ([0, 20], [12, 40])
        s, e = iv.union_of_sorted(starts, ends, mask, block=block)
        assert (s.tolist(), e.tolist()) == ([0, 20, 31], [12, 30, 35])
    assert iv.union_of_sorted(np.array([5, 1]), np.array([6, 2])) is None  # (not by start)
    s, e = iv.union_of_sorted(np.array([3, 4]), np.array([3, 4]))  # (only empty ones)
    assert s.tolist() == [] and e.tolist() == [] and s.dtype == e.dtype == np.int64


def test_union_of_sorted_is_the_union_on_random_intervals():
    rng = np.random.default_rng(7)
    for _ in range(200):
        n = int(rng.integers(1, 40))
        starts = np.sort(rng.integers(0, 100, n))
        ends = starts + rng.integers(0, 20, n)  # (some empty)
        mask = rng.random(n) < 0.7
        want = iv.union(starts[mask], ends[mask])
        for block in (1, 2, 5, 64):
            got = iv.union_of_sorted(starts, ends, mask, block=block)
            assert got[0].tolist() == want[0].tolist() and got[1].tolist() == want[1].tolist()


def test_difference_hand_cases():
    a = (np.array([0, 20, 50]), np.array([10, 40, 60]))
    # b: [2, 4) and [6, 12) inside / across a's first; [25, 30) inside the second; none
    # meets the third. Left: [0, 2), [4, 6); [20, 25), [30, 40); [50, 60)
    b = (np.array([2, 6, 25]), np.array([4, 12, 30]))
    s, e = iv.difference(a, b)
    assert (s.tolist(), e.tolist()) == ([0, 4, 20, 30, 50], [2, 6, 25, 40, 60])
    # b covering a whole segment and touching its ends: nothing of it left
    s, e = iv.difference((np.array([5]), np.array([9])), (np.array([0, 9]), np.array([5, 20])))
    assert (s.tolist(), e.tolist()) == ([5], [9])  # ([0, 5) and [9, 20) only touch it)
    s, e = iv.difference((np.array([5]), np.array([9])), (np.array([3]), np.array([9])))
    assert (s.tolist(), e.tolist()) == ([], [])
    empty = (np.zeros(0, np.int64), np.zeros(0, np.int64))
    assert iv.difference(empty, b)[0].tolist() == []
    assert iv.difference(a, empty)[1].tolist() == [10, 40, 60]


def test_difference_is_the_uncovered_time_on_random_segments():
    # against the definition on an integer grid: the ns of a's union outside b's union
    rng = np.random.default_rng(11)
    for _ in range(300):
        sets = []
        for _side in range(2):
            n = int(rng.integers(0, 12))
            starts = rng.integers(0, 80, n)
            sets.append(iv.union(starts, starts + rng.integers(0, 15, n)))
        a, b = sets
        s, e = iv.difference(a, b)
        grid = np.zeros((2, 100), dtype=bool)
        for row, (ss, ee) in enumerate((a, b)):
            for x, y in zip(ss, ee, strict=True):
                grid[row, x:y] = True
        got = np.zeros(100, dtype=bool)
        for x, y in zip(s, e, strict=True):
            assert y > x and not got[x:y].any()  # (nonempty, disjoint)
            got[x:y] = True
        assert (got == (grid[0] & ~grid[1])).all()
        assert (np.diff(s) > 0).all()  # (sorted)
