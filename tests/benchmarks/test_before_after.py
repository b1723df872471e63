"""benchmarks/before_after.py runs each version from its own checkout: a stand-in "before"
checkout whose `python -m advisor` fills 300 MB is measured as that, not as this one."""

import importlib.util
import sys

from conftest import ROOT

sys.path.insert(0, str(ROOT / "benchmarks"))
spec = importlib.util.spec_from_file_location(
    "before_after", ROOT / "benchmarks" / "before_after.py"
)
before_after = importlib.util.module_from_spec(spec)
spec.loader.exec_module(before_after)


def test_each_version_runs_from_its_own_checkout(tmp_path):
    fake = tmp_path / "before" / "advisor"
    fake.mkdir(parents=True)
    (fake / "__init__.py").write_text("")
    # the stand-in touches 300 MB and exits: its peak is >= 300 MB, advisor's on a
    # one-kernel trace far below (about 150 MB)
    (fake / "__main__.py").write_text(
        "b = bytearray(300 << 20)\nb[::4096] = b'x' * len(b[::4096])\n"
    )
    trace = ROOT / "tests" / "data" / "public" / "kineto" / "hta_triton_example.json.gz"
    got = before_after.compare(str(tmp_path / "before"), str(trace), repeat=2, settle=0)
    assert len(got["before"]["walls"]) == 2 == len(got["now"]["walls"])
    assert got["before"]["peak_mb"] >= 300
    assert got["now"]["peak_mb"] < 280
