"""The ranks of a job analysed apart and merged (parts.py) give the analysis of one Trace
holding every rank (multi.merge_traces): the same JSON document, findings included, on real
multi-rank traces with and without a selection, and on a hand-built pipeline job whose
stage numbers tests/metrics/test_pipeline.py works out by hand."""

import gc
import pickle
import sys
import weakref

import numpy as np
import pandas as pd
import pytest
from builders import two_device_steps
from conftest import H200_2GPU, PUBLIC, PUBLIC_NSYS, ROOT

from advisor import views
from advisor.analysis import DERIVED_NAMES, Analysis, MergedAnalysis, analyze
from advisor.findings import find
from advisor.multi import load_one, merge_and_find, merge_traces
from advisor.options import AnalysisOptions
from advisor.parts import merge_parts, merged_job, rank_part, selected, summarize
from advisor.pipeline import run_trace
from advisor.regionstore import RegionView
from advisor.render.json import document
from advisor.trace.model import Trace

sys.path.insert(0, str(ROOT / "sample_traces"))
sys.path.insert(0, str(ROOT / "tests" / "metrics"))
from split_ranks import split  # noqa: E402
from test_pipeline import gpipe  # noqa: E402

US = 1000


@pytest.fixture(scope="module")
def allreduce_ranks(tmp_path_factory):
    return [str(p) for p in split(str(H200_2GPU), tmp_path_factory.mktemp("ranks"))]


def whole_and_parts(paths: list[str], **selection) -> tuple[dict, dict]:
    """The document of the ranks merged into one Trace, and of their parts merged."""
    options = AnalysisOptions(**selection)
    a, f = run_trace(merge_traces([load_one(p, None) for p in paths]), options)
    b, fb = merge_and_find([rank_part(p, options) for p in paths], options)
    return document(a, f), document(b, fb)


SETS = {
    "two-rank kineto (HTA sample)": [
        str(PUBLIC / "kineto" / f"hta_sampled_rank-{r}.json.gz") for r in (0, 1)
    ],
    "two ranks of other jobs": [
        str(ROOT / "sample_traces" / "h200_train_steps.sqlite"),
        str(ROOT / "sample_traces" / "h200_scheduling.sqlite"),
    ],
    "one export of two GPUs": [str(PUBLIC_NSYS / "nsysai_2gpu_sendrecv_before_nsys2026.2.sqlite")],
    "a 2-GPU export and a 2-rank one": [
        str(PUBLIC_NSYS / "nsysai_2gpu_sendrecv_before_nsys2026.2.sqlite"),
        str(H200_2GPU),
    ],
}


@pytest.mark.parametrize("name", list(SETS))
def test_parts_give_the_whole_trace_document(name):
    whole, merged = whole_and_parts(SETS[name])
    assert merged == whole


@pytest.mark.parametrize(
    "selection",
    [
        {},
        {"range_text": "allreduce_exposed"},
        {"device": 1},
        {"range_text": "allreduce", "device": 0},
    ],  # fmt: skip
)
def test_split_ranks_with_a_selection(allreduce_ranks, selection):
    whole, merged = whole_and_parts(allreduce_ranks, **selection)
    assert merged == whole
    if not selection:  # the cross-rank waits are there (rank 0 waits for rank 1)
        region = next(r for r in merged["regions"]
                      if r["name"] == "allreduce_straggler" and r["device"] == 0)  # fmt: skip
        assert region["comm_wait_ns"] > 1_000_000
        assert merged["collectives"] and merged["findings"]


def one_process(t: Trace, pid: int) -> Trace:
    """The part of a hand-built trace that one process (one rank) recorded."""
    out = Trace(path=f"rank{pid}", format=t.format, producer_version=t.producer_version,
                kernels=t.kernels[t.kernels["pid"] == pid].reset_index(drop=True))  # fmt: skip
    out.api = t.api[t.api["pid"] == pid].reset_index(drop=True)
    out.nvtx = t.nvtx[t.nvtx["pid"] == pid].reset_index(drop=True)
    out.gpus = {d: g for d, g in t.gpus.items() if d in out.devices}
    return out


def test_a_pipeline_split_per_rank():
    # test_pipeline's slow-transfer GPipe (60 us transfers): step 1980 us, bubble 780 us on
    # both stages, 384 us per step above the 20 % ideal; the stages are seen across ranks
    whole = two_device_steps([gpipe((100, 100), (200, 200), 60)] * 2)
    a = analyze(whole)
    parts = [summarize(analyze(one_process(whole, pid))) for pid in (1, 2)]
    b = merge_parts(parts)
    fa, fb = find(a), find(b)
    assert document(b, fb)["pipeline_stages"] == document(a, fa)["pipeline_stages"]
    assert [f.rule for f in fb] == [f.rule for f in fa]
    pp = next(f for f in fb if f.rule == "pp-bubble")
    assert (pp.device, pp.est_savings_ns) == (0, 768 * US)
    stage = document(b, fb)["pipeline_stages"][0]
    assert (stage["step_ns"], stage["bubble_ns"]) == (1980 * US, 780 * US)


def test_a_part_is_small():
    # what travels from a worker: per-device tables (kernel groups, range instances, views)
    # and the comm ops, not the trace: 4,062 kernels in 6 steps, 76 kernel groups
    path = str(ROOT / "sample_traces" / "h200_train_steps.sqlite")
    trace = pickle.dumps(load_one(path, None).trace, protocol=5)
    part = rank_part(path, AnalysisOptions())
    assert part.error is None and len(part.kernel_groups) == 76
    assert len(pickle.dumps(part, protocol=5)) < len(trace) / 10


def test_a_merged_job_has_nothing_that_needs_every_op(allreduce_ranks):
    b = merge_parts([rank_part(p, AnalysisOptions()) for p in allreduce_ranks])
    assert isinstance(b, MergedAnalysis) and isinstance(b, Analysis)
    for name in ("measure", "busy_segments", "select"):  # (TraceAnalysis's)
        assert not hasattr(b, name)
    assert set(b.precomputed) == set(DERIVED_NAMES)  # (what derived() reads: no compute)
    assert views.top_kernels(b).equals(b.precomputed["top_kernels"])


def _frames(part) -> dict:
    return {**{f"tables.{k}": v for k, v in part.tables.items()},
            **{f"derived.{k}": v for k, v in part.derived.items()},
            "kernel_groups": part.kernel_groups,
            "region_kernel_groups": part.region_kernel_groups, "comm": part.comm}  # fmt: skip


def _root(frame, column: str) -> np.ndarray:
    """The array that owns a column's memory (views followed to their base)."""
    arr = frame[column].to_numpy()
    while isinstance(arr.base, np.ndarray):
        arr = arr.base
    return arr


def test_released_parts_give_the_same_job_and_hold_none_of_their_rows(allreduce_ranks):
    # merged_job(release=True) empties each part's tables as it merges them (the client of
    # a many-rank job then holds the parts or the merged job, not both): the same job, the
    # parts' tables without rows but with their columns, and none of the parts' old arrays
    # alive (an empty slice of a table would still hold its rows' memory)
    parts = [rank_part(p, AnalysisOptions()) for p in allreduce_ranks]
    kept = merged_job(pickle.loads(pickle.dumps(parts)))
    before = {k: (list(v.columns), len(v)) for k, v in _frames(parts[0]).items()}
    assert before["comm"][1] == 17 and before["tables.regions"][1] == 4  # (each rank)
    old = [weakref.ref(_root(p.comm, "start")) for p in parts]
    old += [weakref.ref(_root(p.tables["regions"], "start_ns")) for p in parts]
    released = merged_job(parts, release=True)
    gc.collect()
    assert sum(r() is not None for r in old) == 0  # (none still alive)
    for p in parts:
        assert {k: (list(v.columns), len(v)) for k, v in _frames(p).items()} == {
            k: (cols, 0) for k, (cols, _) in before.items()
        }
    want = document(selected(kept), find(selected(kept)))
    assert document(selected(released), find(selected(released))) == want


def test_a_bad_rank_is_its_error_line(tmp_path):
    bad = tmp_path / "broken.sqlite"
    bad.write_bytes(b"not sqlite")
    part = rank_part(str(bad), AnalysisOptions())
    assert part.error.startswith(f"{bad}: not a supported trace")
    good = rank_part(str(H200_2GPU), AnalysisOptions())
    assert merge_parts([part, good]).trace.path == str(H200_2GPU)


def test_a_job_of_a_whole_rank_and_a_thinned_one():
    # ranks are attributed apart: a rank whose host events were thinned after capture
    # (Trace.host_sample, the Kineto reader's finding) leaves only its own idle without a
    # cause, while the whole rank keeps every cause it has alone (merge_traces, which makes
    # one Trace of the job, leaves all of it unattributed instead: its docstring)
    path = ROOT / "sample_traces" / "kineto" / "h200_train_steps.pt.trace.json.gz"
    alone = analyze(load_one(str(path), None).trace)
    thinned = load_one(str(path), None).trace
    thinned.host_sample = (2402, 238287, 0.62)  # (as test_attribution's thinned case)
    job = merge_parts([summarize(alone), summarize(analyze(thinned))])
    d = job.devices.set_index("device")
    whole = alone.devices.set_index("device").loc[0]
    assert d.loc[0].equals(whole)  # (both ranks' GPU is device 0: renumbered 0 and 1)
    causes = ["launch_overhead_ns", "sync_idle_ns", "copy_idle_ns", "input_idle_ns",
              "host_busy_idle_ns", "queued_idle_ns", "startup_idle_ns"]  # fmt: skip
    assert whole[causes].sum() + whole["unattributed_idle_ns"] == whole["idle_ns"] > 0
    assert whole["launch_overhead_ns"] > 0.9 * whole["idle_ns"]  # (this trace's idle)
    assert (d.loc[1, causes] == 0).all()
    assert d.loc[1, "unattributed_idle_ns"] == d.loc[1, "idle_ns"] == whole["idle_ns"]
    for col in ("gpu_busy_ns", "tail_idle_ns", "underfill_idle_ns"):  # (GPU-side: measured)
        assert d.loc[1, col] == whole[col]
    # the advice follows: a cause found on the whole rank only, kernel advice on both
    found = find(job)
    by_device = {dev: {f.strategy for f in found if f.device == dev} for dev in (0, 1)}
    assert "cuda_graph" in by_device[0] and "cuda_graph" not in by_device[1]
    kernel_advice = by_device[0] & {"split_k", "stream_k", "persistent", "tile_reshape"}
    assert kernel_advice and kernel_advice <= by_device[1]


@pytest.mark.parametrize("jobs", [1, 2])
def test_comm_ops_held_apart_as_the_parts_arrive(allreduce_ranks, jobs):
    # analyze_ranks moves each part's comm ops and range instances into the job's comm
    # store as the part arrives (the client holds none of them while the others come): each
    # part arrives with 17 comm ops and 4 range instances and is left without them, and the
    # job is the same as merging the parts as they were sent
    from advisor.cluster import LocalRunner
    from advisor.multi import analyze_ranks

    options = AnalysisOptions()
    sent = [rank_part(p, options) for p in allreduce_ranks]
    assert [(len(p.comm), len(p.tables["regions"])) for p in sent] == [(17, 4), (17, 4)]
    want, found = merge_and_find(sent, options)
    arrived, earlier = [], []

    def on_read(part):  # (called with each part as sent; the earlier ones are held by then)
        arrived.append((len(part.comm), len(part.tables["regions"])))
        earlier.extend((len(p.comm), {k: len(v) for k, v in p.tables.items()}, p.derived,
                        len(p.kernel_groups), sorted(p.held)) for p in seen)  # fmt: skip
        seen.append(part)

    seen: list = []
    job = analyze_ranks(allreduce_ranks, options, runner=LocalRunner(jobs), on_read=on_read)
    assert arrived == [(17, 4), (17, 4)]
    assert earlier == [(0, {"regions": 0}, {}, 0, ["comm", "regions", "small"])]
    assert document(job.analysis, []) == document(want, [])
    assert [(f.rule, f.device, f.est_savings_ns) for f in job.findings] == [
        (f.rule, f.device, f.est_savings_ns) for f in found
    ]
    pd.testing.assert_frame_equal(job.analysis.ops, want.ops)
    pd.testing.assert_frame_equal(job.analysis.collectives, want.collectives)


@pytest.mark.parametrize("name", list(SETS))
def test_the_jobs_comm_ops_and_collectives_read_back_as_the_whole_trace_has_them(name):
    # the merged job's comm ops and matched collectives are read back from its comm store:
    # the whole trace's comm ops and collectives (their rows renumbered: the merged job's
    # ops are its comm ops only; range ids are numbered per rank, the names the same)
    options = AnalysisOptions()
    a, _ = run_trace(merge_traces([load_one(p, None) for p in SETS[name]]), options)
    b, _ = merge_and_find([rank_part(p, options) for p in SETS[name]], options)
    comm = a.ops[a.ops["op_class"].eq("comm").to_numpy()]
    cols = ["device", "start", "end", "name", "kind", "region", "wait_ns", "last_device"]
    # (a trace without comm ops carries no wait columns: its comm ops are none either way)
    comm = comm.reindex(columns=cols) if comm.empty else comm
    got, want = b.ops[cols].reset_index(drop=True), comm[cols].reset_index(drop=True)
    key = ["device", "start", "end"]
    got = got.sort_values(key, kind="stable", ignore_index=True)
    want = want.sort_values(key, kind="stable", ignore_index=True)
    for c in cols:
        assert (
            got[c].astype(object).fillna(-1).tolist() == want[c].astype(object).fillna(-1).tolist()
        ), c
    skew = ["device", "start", "instance", "skew_ns", "wait_ns", "last_device"]
    assert len(b.collectives) == len(a.collectives)
    assert (
        b.collectives[skew]
        .reset_index(drop=True)
        .equals(a.collectives[skew].reset_index(drop=True))
    )
    assert b.collectives["name"].astype(str).tolist() == a.collectives["name"].astype(str).tolist()


def _concatenated_then_sorted(parts):
    """The range instances as merged_job made them before: concatenated, then sorted."""
    from advisor.frames import concatenated, expand
    from advisor.parts import _ORDERS, _job_ids, _range_count, device_maps

    maps = device_maps([p.devices for p in parts])
    offsets = np.cumsum([0] + [_range_count(p) for p in parts])
    frames = [expand(_job_ids(p.tables["regions"], m, o))
              for p, m, o in zip(parts, maps, offsets[:-1], strict=True)]  # fmt: skip
    out = concatenated(frames)
    return (_ORDERS["regions"](out) if len(out) else out), maps, offsets


@pytest.mark.parametrize("name", list(SETS))
def test_range_instances_written_into_their_places_as_if_concatenated_and_sorted(name):
    from advisor.commstore import CommStore
    from advisor.parts import _merged_regions

    parts = [rank_part(p, AnalysisOptions()) for p in SETS[name]]
    want, maps, offsets = _concatenated_then_sorted(parts)
    got = _merged_regions(parts, maps, offsets, CommStore(), release=False)
    pd.testing.assert_frame_equal(_read_back(got), want)
    if len(want) > 2:  # (read back a few rows at a time, on one device, of one name)
        view = RegionView(got)
        chunks = list(view.chunks(rows=3))
        assert max(len(c) for c in chunks) <= 3 and len(chunks) >= len(want) // 3
        pd.testing.assert_frame_equal(pd.concat(chunks, ignore_index=True), want)
        device = int(want["device"].iloc[-1])
        one = want[want["device"] == device].reset_index(drop=True)
        pd.testing.assert_frame_equal(view.narrowed(device).frame(), one)
        assert len(view.narrowed(device)) == len(one) and len(view) == len(want)
        assert view.narrowed(device).span() == (one["start_ns"].min(), one["end_ns"].max())
        name = str(want["name"].iloc[0])
        cols = ["device", "start_ns", "name"]
        pd.testing.assert_frame_equal(
            view.frame(cols, names=[name, "no such range"]),
            want.loc[want["name"] == name, cols].reset_index(drop=True))  # fmt: skip


def _read_back(merged):
    """_merged_regions' table: as it is, or read back from its files."""
    from advisor.regionstore import RegionFiles

    return RegionView(merged).frame() if isinstance(merged, RegionFiles) else merged


def test_range_instances_by_hand_ties_dtypes_and_held():
    # three ranks: starts tied across ranks (5 on devices 0 and 1: device order; 5 twice on
    # device 0: rank order), a column whole on one rank and with a gap on another (int64
    # and float64: float64, as a concatenation gives), a rank without instances, a rank held
    # on disk (read twice, removed with release): the same table as concatenated + sorted
    from advisor.commstore import CommStore
    from advisor.frames import compact
    from advisor.parts import RankPart, _merged_regions

    def part(device, start, lead, name):
        t = pd.DataFrame({"range_id": np.arange(len(start)), "device": device,
                          "start_ns": np.asarray(start, np.int64),
                          "end_ns": np.asarray(start, np.int64) + 1, "lead_ns": lead,
                          "name": pd.Series(name, dtype=object)})  # fmt: skip
        return RankPart(path=f"r{device}", devices=[device], tables={"regions": compact(t)})

    parts = [part(0, [5, 1, 5], np.array([1, 2, 3], np.int64), ["a", "b", "a"]),
             part(1, [5, 0], np.array([np.nan, 4.0]), ["a", "c"]),
             part(2, [], np.array([], np.int64), [])]  # fmt: skip
    want, maps, offsets = _concatenated_then_sorted(parts)
    assert want["start_ns"].tolist() == [0, 1, 5, 5, 5] and want["lead_ns"].dtype == np.float64
    assert want["device"].tolist() == [1, 0, 0, 0, 1]
    assert want["name"].tolist() == ["c", "b", "a", "a", "a"]
    store = CommStore()
    path = store.hold(parts[1].tables["regions"])
    parts[1].held["regions"] = str(path)
    parts[1].tables["regions"] = parts[1].tables["regions"].iloc[:0]
    got = _merged_regions(parts, maps, offsets, store, release=True)
    # (files have a comm_wait_ns, filled by the merge: 0 until then)
    pd.testing.assert_frame_equal(_read_back(got), want.assign(comm_wait_ns=0.0))
    assert not path.exists() and "regions" not in parts[1].held


def test_small_tables_folded_every_k_parts_as_all_at_once(monkeypatch):
    # five ranks (the four traces of two sets, one twice: device ids renumbered), their
    # small tables concatenated every 1, 2 or 3 parts as merged, or all at once: the same
    # job (document and every table merged), held as they arrived or not
    import advisor.parts as parts_module
    from advisor.commstore import CommStore
    from advisor.parts import hold_tables

    paths = [*SETS["two ranks of other jobs"], *SETS["a 2-GPU export and a 2-rank one"]]
    sent = [rank_part(p, AnalysisOptions()) for p in [*paths, paths[0]]]
    blobs = [pickle.dumps(p) for p in sent]
    want = document(merged_job([pickle.loads(b) for b in blobs]), [])
    for k in (1, 2, 3):
        monkeypatch.setattr(parts_module, "FOLD_PARTS", k)
        store = CommStore()
        parts = [pickle.loads(b) for b in blobs]
        for p in parts[::2]:  # (some held as they arrived, the others not)
            hold_tables(p, store)
        assert document(merged_job(parts, release=True, store=store), []) == want, k
        assert not [p for p in parts if p.held or len(p.kernel_groups)]
