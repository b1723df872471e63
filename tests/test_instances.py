"""advisor.instances on a trace without ranges: an empty, typed table the gate can mask."""

from conftest import PUBLIC_ROCPROF, analysis_of

from advisor.gating.digest import metric_set
from advisor.instances import INSTANCE_COLUMNS, range_instances


def test_no_ranges_give_an_empty_typed_table():
    # the public MI350X rocprofv3 run has no roctx ranges (a KeyError in the gate before)
    a = analysis_of(PUBLIC_ROCPROF / "v3_json" / "tracelens__908_results.json.gz")
    inst = range_instances(a)
    assert inst.empty and list(inst.columns) == INSTANCE_COLUMNS
    assert inst["cold"].dtype == bool and inst[inst["cold"]].columns.tolist() == INSTANCE_COLUMNS
    s = metric_set(a, [])
    assert s.regions == {} and s.kernels
