"""Pipeline stages and bubbles (metrics/pipeline.py, the 'stages' rules) on hand-built
2-stage GPipe steps whose bubbles are worked out by hand below, and on a real 2-GPU export
whose point-to-point traffic is symmetric (not a pipeline)."""

from pathlib import Path

import pandas as pd
import pytest
from builders import two_device_steps as trace_of
from conftest import PUBLIC_NSYS, analysis_of

from advisor.analysis import analyze
from advisor.findings import find
from advisor.metrics.pipeline import point_to_point
from advisor.rules.tables import build_tables
from advisor.trace.model import Trace

US = 1000  # ns


def gpipe(f: tuple[int, int], b: tuple[int, int], t: int, m: int = 4) -> list[tuple]:
    """One GPipe step on two stages (devices 0, 1), times in us from 0: forward times f,
    backward times b per stage and micro-batch, transfer time t. Each device runs its ops
    back to back on one stream; a send or receive kernel starts when its device reaches it
    and ends when the transfer (both ends posted, then t) is done.
    Returns (device, name, start, end) rows."""
    seq = {}
    seq[0] = [x for i in range(m) for x in (("F", i), ("S", i))]
    seq[0] += [x for i in reversed(range(m)) for x in (("Rg", i), ("B", i))]
    seq[1] = [x for i in range(m) for x in (("R", i), ("F", i))]
    seq[1] += [x for i in reversed(range(m)) for x in (("B", i), ("Sg", i))]
    pairs = {("S", i): ("R", i) for i in range(m)} | {("Sg", i): ("Rg", i) for i in range(m)}
    partner = {(0, k): (1, v) for k, v in pairs.items() if k[0] == "S"}
    partner |= {(1, k): (0, v) for k, v in pairs.items() if k[0] == "Sg"}
    partner |= {v: k for k, v in partner.items()}
    clock, pos, rows, posted = {0: 0, 1: 0}, {0: 0, 1: 0}, [], {}
    while pos[0] < len(seq[0]) or pos[1] < len(seq[1]):
        progressed = False
        for d in (0, 1):
            if pos[d] == len(seq[d]):
                continue
            op = seq[d][pos[d]]
            if op[0] in ("F", "B"):
                dur = (f if op[0] == "F" else b)[d]
                rows.append((d, "fwd" if op[0] == "F" else "bwd", clock[d], clock[d] + dur))
                clock[d] += dur
                pos[d] += 1
                progressed = True
                continue
            posted[(d, op)] = clock[d]
            other = partner[(d, op)]
            if other in posted:  # both ends posted: the transfer runs now
                done = max(clock[d], posted[other]) + t
                for dd, oo in ((d, op), other):
                    rows.append((dd, "ncclDevKernel_SendRecv", posted[(dd, oo)], done))
                    clock[dd] = done
                    pos[dd] += 1
                progressed = True
        if not progressed:
            raise AssertionError("deadlock in the hand-built schedule")
    return rows


def stages_of(t: Trace):
    a = analyze(t)
    return a, build_tables(a)["stages"].set_index("device")


def test_balanced_gpipe_is_at_its_ideal():
    # F 100, B 200 us on both stages, transfers 10 us, m = 4:
    # stage 0: F0 [0,100] send [100,110] F1 [110,210] ... F3 [330,430] send [430,440];
    # stage 1: F3 [440,540], B3 [540,740], send [740,750]; stage 0: B3 [750,950] ...
    # B0 [1380,1580]. Step 1580 us; compute 4 x 300 = 1200 us per stage; bubble 380 us
    # (24.1 %) against the ideal (p-1)/(m+p-1) = 1/5
    a, s = stages_of(trace_of([gpipe((100, 100), (200, 200), 10)] * 2))
    assert s.loc[0, "stage"] == 0 and s.loc[1, "stage"] == 1
    assert (s.loc[0, "stages"], s.loc[0, "microbatches"], s.loc[0, "steps"]) == (2, 4, 2)
    assert s.loc[0, "step_ns"] == 1580 * US and s.loc[1, "compute_ns"] == 1200 * US
    assert s.loc[0, "bubble_ns"] == 380 * US and s.loc[0, "ideal_fraction"] == pytest.approx(0.2)
    assert s.loc[0, "bubble_fraction"] == pytest.approx(380 / 1580)
    assert not {"pp-bubble", "stage-imbalance"} & {f.rule for f in find(a)}


def test_slow_transfers_make_a_bubble_above_the_ideal():
    # the same with 60 us transfers: F0 [0,100], transfer [100,160], F1 [160,260], ...,
    # stage 1 F3 [640,740], B3 [740,940], transfer [940,1000], ..., stage 0 B0 [1780,1980]:
    # step 1980 us, bubble 780 us (39.4 %) on both stages; above the ideal (20 %) by
    # 780 - 0.2 x 1980 = 384 us per step, 768 us over the two steps
    a, s = stages_of(trace_of([gpipe((100, 100), (200, 200), 60)] * 2))
    assert s.loc[0, "step_ns"] == 1980 * US and s.loc[0, "bubble_ns"] == 780 * US
    assert s.loc[0, "excess_bubble_ns"] == 768 * US
    f = next(x for x in find(a) if x.rule == "pp-bubble")
    assert (f.device, f.strategy, f.est_savings_ns) == (0, "pipeline_schedule", 768 * US)
    assert "ideal bubble of 20.0 %" in f.summary
    assert "with twice the micro-batches the ideal is 11.1 %" in f.summary  # 1 / (8 + 1)
    assert f.evidence["bubble_per_step_ns"] == [780 * US, 780 * US]  # per step
    assert "stage-imbalance" not in {x.rule for x in find(a)}


def test_a_slow_stage_is_imbalance_not_a_schedule_problem():
    # stage 1 forward 150 us, backward 300 us (stage 0: 100, 200), transfers 10 us:
    # stage 0 F0 [0,100], F1 [110,210], its sends wait for stage 1 (S1 [210,270]), F2
    # [270,370], F3 [430,530]; stage 1 F3 [590,740], B3 [740,1040] ... B0 [1670,1970],
    # stage 0 B0 [1980,2180]: step 2180 us. Compute 1200 and 1800 us: stage 1 is the
    # bottleneck at 1800 / 1500 = 1.2x the median; its bubble 380 us (17.4 %) is under the
    # ideal, so no pp-bubble; imbalance (1800 - 1500) x 2 steps = 600 us
    a, s = stages_of(trace_of([gpipe((100, 150), (200, 300), 10)] * 2))
    assert s.loc[0, "step_ns"] == 2180 * US
    assert (s.loc[0, "compute_ns"], s.loc[1, "compute_ns"]) == (1200 * US, 1800 * US)
    assert bool(s.loc[1, "bottleneck"]) and s.loc[1, "compute_vs_median"] == pytest.approx(1.2)
    assert s.loc[1, "bubble_ns"] == 380 * US and s.loc[1, "imbalance_ns"] == 600 * US
    rules = {x.rule: x for x in find(a)}
    assert "pp-bubble" not in rules
    f = rules["stage-imbalance"]
    assert (f.device, f.strategy, f.est_savings_ns) == (1, "load_balance", 600 * US)


def test_symmetric_exchange_is_not_a_pipeline():
    # a real 2-GPU FSDP export with SendRecv kernels: both ranks compute from the start of
    # the window (no stage waits for its first activation)
    a = analysis_of(PUBLIC_NSYS / "nsysai_2gpu_sendrecv_before_nsys2026.2.sqlite")
    assert build_tables(a)["stages"].empty


def test_pp_bubble_emits_a_schedule_recipe(tmp_path):
    from advisor.configs.emit import emit

    a = analyze(trace_of([gpipe((100, 100), (200, 200), 60)] * 2))
    (done,) = emit([f for f in find(a) if f.rule == "pp-bubble"], a.trace.gpus, tmp_path / "e")
    path = Path(done.config[0])
    text = path.read_text()
    assert path.name == "01_pipeline_schedule_train_step_dev0.md"
    assert "ScheduleInterleaved1F1B" in text and "768.00 us" in text


def test_markdown_report_lists_the_per_step_evidence():
    from advisor.render.markdown import report

    a = analyze(trace_of([gpipe((100, 100), (200, 200), 60)] * 2))
    text = report(a, find(a), {})
    assert "bubble_per_step_ns=[780.00 us, 780.00 us]" in text


def test_stages_in_every_format():
    from rich.console import Console

    from advisor.render.json import document
    from advisor.render.markdown import report
    from advisor.render.terminal import render

    a = analyze(trace_of([gpipe((100, 150), (200, 300), 10)] * 2))
    rows = document(a, find(a))["pipeline_stages"]
    got = [(r["device"], r["stage"], r["bubble_ns"]) for r in rows]
    assert got == [(0, 0, 980 * US), (1, 1, 380 * US)]
    assert "| 1 of 2 | 1 | 2.18 ms | 1.80 ms | 380.00 us | 17.4 % | 20.0 % | 4 |" in report(
        a, find(a), {}
    )
    console = Console(width=120, record=True)
    render(a, find(a), console)
    assert "Pipeline stages" in console.export_text()


def test_point_to_point_kernels_by_name_in_every_nccl_spelling():
    # NCCL >= 2.19 (ncclDevKernel_SendRecv), older NCCL with the algorithm and type after an
    # underscore (HTA's public pipeline traces: ncclKernel_SendRecv_RING_SIMPLE_Sum_int8_t,
    # which the earlier pattern's word boundary missed), the directions, RCCL; collectives
    # and other kernels are not point-to-point
    ops = pd.DataFrame({
        "name": ["ncclDevKernel_SendRecv", "ncclKernel_SendRecv_RING_SIMPLE_Sum_int8_t(x)",
                 "ncclKernel_Send_RING_LL_Sum_int8_t", "ncclDevKernel_Recv(ncclDevComm*)",
                 "rcclKernel_SendRecv", "ncclKernel_AllReduce_RING_LL_Sum_float",
                 "ncclDevKernel_AllGather_RING_LL", "ncclKernel_SendRecvFoo", "gemm"],
        "op_class": ["comm"] * 8 + ["compute"], "kind": "kernel",
    })  # fmt: skip
    assert point_to_point(ops).tolist() == [True] * 5 + [False] * 4
