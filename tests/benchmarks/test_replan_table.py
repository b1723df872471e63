"""benchmarks/replan_table.checked_time: a config is timed only when its result is right.
(Tensors stand in as small numpy wrappers: importing torch here would grow this test
process, whose size Linux counts as a floor of its children's peaks in test_scale.py.)"""

import importlib.util
import sys

import numpy as np
from conftest import ROOT

sys.path.insert(0, str(ROOT / "benchmarks"))
spec = importlib.util.spec_from_file_location(
    "replan_table", ROOT / "benchmarks" / "replan_table.py"
)
replan_table = importlib.util.module_from_spec(spec)
spec.loader.exec_module(replan_table)


class Tensor:
    """What checked_time uses of a torch tensor: double(), subtraction, norm()."""

    def __init__(self, values) -> None:
        self.values = np.asarray(values, dtype=np.float64)

    def double(self) -> "Tensor":
        return self

    def __sub__(self, other: "Tensor") -> "Tensor":
        return Tensor(self.values - other.values)

    def norm(self) -> float:
        return float(np.linalg.norm(self.values))


def test_a_config_is_timed_only_when_right():
    ref = Tensor([[3.0, 4.0]])  # norm 5
    timed = []

    def timer(fn):
        timed.append(fn)
        return 1.5

    right = replan_table.checked_time(lambda: Tensor([[3.0, 4.0]]), ref, 1e-2, timer)
    assert right == {"rel_error": 0.0, "status": "ok", "ms": 1.5} and len(timed) == 1
    # off by 0.5 in one element: error 0.5 / 5 = 0.1 > 1e-2: not timed
    wrong = replan_table.checked_time(lambda: Tensor([[3.5, 4.0]]), ref, 1e-2, timer)
    assert wrong["status"] == "wrong" and abs(wrong["rel_error"] - 0.1) < 1e-12
    assert "ms" not in wrong and len(timed) == 1

    def fails():
        raise RuntimeError("out of resource: shared memory " + "x" * 200)

    failed = replan_table.checked_time(fails, ref, 1e-2, timer, width=20)
    # the message cut at 20 characters: "out of resource: sha"
    assert failed == {"status": "RuntimeError: out of resource: sha"} and len(timed) == 1
