"""Findings grouped across devices for the terminal and markdown report (rules/finding.py)."""

from dataclasses import replace

from conftest import SAMPLES, analysis_of

from advisor.findings import find
from advisor.rules.finding import Finding, device_list, group_across_devices

BASE = Finding(rule="exposed-comm", title="", strategy="comm_overlap", explains=(),
               severity="low", kernel=None, region="step", device=0, est_savings_ns=1,
               at_ns=None, at_rel_ns=None, summary="s", gemm_by=None, confidence="",
               confirm=None, evidence={}, rationale="", watch_for="",
               references=())  # fmt: skip


def test_one_rule_at_one_range_on_several_devices_is_one_group():
    # exposed-comm on "step": device 0 1 ms (low), device 1 5 ms (high), device 2 3 ms
    # (medium): one group of 9 ms, device 1's text, severity high; host-busy on "step",
    # device 0, 6 ms, its own group, ranked after (6 < 9); exposed-comm on another range
    # stays apart
    ms = 1_000_000
    a = replace(BASE, device=0, est_savings_ns=1 * ms)
    b = replace(BASE, device=1, est_savings_ns=5 * ms, severity="high", summary="b")
    c = replace(BASE, device=2, est_savings_ns=3 * ms, severity="medium")
    other_rule = replace(BASE, rule="host-busy", strategy="host_work", est_savings_ns=6 * ms)
    other_range = replace(BASE, region="eval", est_savings_ns=7 * ms)
    groups = group_across_devices([other_range, other_rule, b, c, a])
    assert [(g.first.rule, g.first.region, g.est_savings_ns) for g in groups] == [
        ("exposed-comm", "step", 9 * ms),
        ("exposed-comm", "eval", 7 * ms),
        ("host-busy", "step", 6 * ms),
    ]
    g = groups[0]
    assert (g.first, g.devices, g.severity) == (b, [0, 1, 2], "high")
    assert g.location() == ["range step", "devices 0-2 (3)"]
    assert g.others() == "(device 1 shown; also devices 0, 2: 1.00 ms to 3.00 ms each)"
    single = groups[2]
    assert (single.location(), single.others()) == (["range step", "device 0"], "")


def test_device_lists():
    assert device_list([0, 1, 2, 3, 5, 7, 8]) == "0-3, 5, 7, 8"
    assert device_list([4]) == "4"


def test_the_two_gpu_sample_lists_each_range_once():
    # h200x2_allreduce: exposed-comm fires on allreduce_exposed on both devices (978,204 and
    # 910,825 ns, the JSON's two findings): one row of 1,889,029 ns in the report
    f = find(analysis_of(SAMPLES / "h200x2_allreduce.sqlite"))
    exposed = [x for x in f if x.rule == "exposed-comm" and x.region == "allreduce_exposed"]
    assert sorted(x.device for x in exposed) == [0, 1]
    key = ("exposed-comm", "allreduce_exposed")
    (g,) = [g for g in group_across_devices(f) if (g.first.rule, g.first.region) == key]
    assert g.est_savings_ns == sum(x.est_savings_ns for x in exposed) == 978_204 + 910_825
