"""Host events thinned after capture (advisor/trace/kineto/sampled.py): PyTorch numbers the
host events it writes ("Ev Idx"); a trace filtered afterwards keeps some, with numbers
missing between most neighbours. Hand-built numberings with the expected (kept, span, share)
worked out by hand (thresholds.yaml: at least 100 numbered events, holes between at least
20 % of neighbours), then the public traces: HTA's two sampled ranks are thinned, an HTA
trace kept whole and two TraceLens time-window excerpts are not."""

import pytest
from conftest import PUBLIC

from advisor.analysis import analyze
from advisor.findings import find
from advisor.metrics.gaps import gap_breakdown
from advisor.render.sections import summary
from advisor.trace.kineto.sampled import host_sample
from advisor.trace.load import load_trace

KINETO = PUBLIC / "kineto"


def _doc(numbers, spacing=" ") -> bytes:
    events = ",\n  ".join(
        f'{{"ph": "X", "cat": "cpu_op", "name": "aten::add", "ts": {i}, "dur": 1, '
        f'"args": {{"Ev Idx":{spacing}{n}}}}}'
        for i, n in enumerate(numbers)
    )
    return ('{"schemaVersion": 1, "traceEvents": [\n  ' + events + "\n]}").encode()


@pytest.mark.parametrize(
    "numbers, expected",
    [
        (range(200), None),  # every number: kept whole
        (range(0, 600, 3), (200, 598, 1.0)),  # every third: 0..597, a hole after each
        ([*range(100), *range(1000, 1100)], None),  # two runs: 1 hole in 199 neighbours
        (range(0, 495, 5), None),  # 99 numbered events: too few to judge
        # 0..149, then 151, 153, ..., 249: 50 holes among 199 neighbours (25.1 %)
        ([*range(150), *range(151, 250, 2)], (200, 250, 50 / 199)),
    ],
)
def test_thinned_numberings(numbers, expected):
    found = host_sample(_doc(numbers))
    if expected is None:
        assert found is None
    else:
        assert found == (expected[0], expected[1], pytest.approx(expected[2]))


def test_the_number_is_found_however_the_json_is_spaced():
    assert host_sample(_doc(range(0, 600, 3), spacing="")) == (200, 598, 1.0)
    assert host_sample(_doc(range(0, 600, 3), spacing="  ")) == (200, 598, 1.0)


# (kept, span) counted independently with the json module: the "Ev Idx" of every event
@pytest.mark.parametrize(
    "name, kept, span",
    [("hta_sampled_rank-0", 2402, 238287), ("hta_sampled_rank-1", 2367, 253973)],
)
def test_hta_sampled_traces_are_thinned_and_their_idle_has_no_cause(name, kept, span):
    trace = load_trace(KINETO / f"{name}.json.gz")
    assert trace.host_sample is not None and trace.host_sample[:2] == (kept, span)
    assert any(w.startswith("the host events are a thinned sample: " + f"{kept:,}")
               for w in trace.warnings)  # fmt: skip
    a = analyze(trace)
    causes = gap_breakdown(a.pieces).set_index("cause")["total_ns"]
    assert list(causes.index) == ["unattributed"]  # every gap: no cause named
    assert causes.sum() == a.ops["gap_ns"].sum() > 0
    rules = {f.rule for f in find(a)}
    # (before: stream_dependency "a dependency not in the trace" 423.30 / 393.18 ms, named on
    # host calls the filter had removed)
    assert not rules & {"queued-wait", "host-busy", "launch-bound-range", "host-bound-steps",
                        "launch-bound-sequence"}  # fmt: skip
    # the summary says why the idle has no cause: the launch calls are there, the host's
    # activity around them is not
    labels = [row[0].strip() for row in summary(a).rows]
    assert "not attributed (host events thinned)" in labels
    assert "no launch call in the trace" not in labels


@pytest.mark.parametrize(
    "name",
    ["hta_nccl_data", "tracelens_vllm_eager_b200", "tracelens_sglang_decode_mi300x"],
)
def test_whole_traces_and_time_window_excerpts_are_not_thinned(name):
    # hta_nccl_data numbers 0..14387, all there; the TraceLens excerpts keep runs (3 and 5
    # holes among 20,042 and 884 numbered events)
    assert load_trace(KINETO / f"{name}.json.gz").host_sample is None
