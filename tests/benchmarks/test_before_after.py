"""benchmarks/before_after.py runs each version from its own checkout: a stand-in "before"
checkout whose `python -m advisor` only records that it ran is the one run as "before"."""

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
    ran = tmp_path / "ran.txt"  # one line per run of the stand-in: the trace it was given
    (fake / "__main__.py").write_text(
        f"import sys\nopen({str(ran)!r}, 'a').write(sys.argv[2] + '\\n')\n"
    )
    trace = ROOT / "tests" / "data" / "public" / "kineto" / "hta_triton_example.json.gz"
    got = before_after.compare(str(tmp_path / "before"), str(trace), repeat=2, settle=0)
    assert len(got["before"]["walls"]) == 2 == len(got["now"]["walls"])
    assert len(got["before"]["peaks"]) == 2 == len(got["now"]["peaks"])  # (every run's)
    assert all(p > 0 for p in got["now"]["peaks"])
    # the stand-in ran exactly the two "before" runs (this checkout's advisor the others)
    assert ran.read_text().splitlines() == [str(trace)] * 2
