"""advisor.metrics.steady on hand-built region tables (every expected number by hand)."""

import numpy as np
import pandas as pd

from advisor.metrics.steady import cold_instances, instance_periods, subtract_windows, window_at


def regions(rows):
    return pd.DataFrame(rows, columns=["name", "device", "start_ns", "end_ns", "startup_idle_ns"])


def test_periods_tile_each_device():
    r = regions([
        ("a", 0, 0, 10, 0),     # next instance on device 0 starts at 15
        ("b", 0, 15, 20, 0),    # next starts at 18, inside it: the period stops there
        ("a", 0, 18, 30, 0),    # last on device 0: its own end
        ("a", 1, 5, 9, 0),      # alone on device 1
    ])  # fmt: skip
    assert instance_periods(r).tolist() == [15, 18, 30, 9]


def test_cold_instances():
    r = regions([
        ("step", 0, 0, 100, 0),      # first, 100 > 2 x median(10, 11, 12) = 22: cold
        ("step", 0, 200, 210, 0),
        ("step", 0, 300, 311, 2),    # start-up 2 of 11 = 18 % > 10 %: cold
        ("step", 0, 400, 412, 1),    # 1 of 12 = 8 %: steady
        ("warmup", 0, 500, 600, 90),  # run once: never cold
        ("pair", 1, 0, 10, 5),       # 2 instances: the start-up share applies (50 %)
        ("pair", 1, 20, 50, 0),      # 2 instances: no first-instance test (needs 3)
    ])  # fmt: skip
    cold, reasons = cold_instances(r)
    assert cold.tolist() == [True, False, True, False, False, True, False]
    assert reasons[0] == "first instance, 9.1x the median window"
    assert reasons[2] == "start-up idle 18% of its GPU window"


def test_subtract_windows():
    outer = pd.DataFrame({"device": [0, 1], "start_ns": [0, 0], "end_ns": [100, 50]})
    holes = pd.DataFrame({"device": [0, 0], "start_ns": [50, 10], "end_ns": [60, 20]})
    got = subtract_windows(outer, holes)
    assert got.values.tolist() == [[0, 0, 10], [0, 20, 50], [0, 60, 100], [1, 0, 50]]


def test_window_at():
    w = pd.DataFrame({"device": [0, 0, 1], "start_ns": [10, 0, 0], "end_ns": [20, 5, 100]})
    got = window_at(w, np.array([0, 0, 0, 1, 2]), np.array([12, 5, 0, 99, 1]))
    # 12 in [10, 20) -> row 0; 5 is the end of [0, 5) -> none; 0 -> row 1; device 2: none
    assert got.tolist() == [0, -1, 1, 2, -1]
