"""Emitted configs: every GEMM script runs under TRITON_INTERPRET=1 and is numerically right;
notes and launch scripts are written; missing shapes are reported; nothing half written."""

import json
import os
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest
from conftest import H200_2GPU, H200_SINGLE, analysis_of, needs_kernels

from advisor.analysis import analyze
from advisor.configs.emit import cutlass_command, emit, emit_into
from advisor.errors import AdvisorInputError
from advisor.findings import find
from advisor.metrics.gemm import ShapeOption
from advisor.rules.finding import EmitRequest, Finding, finding_dict
from advisor.rules.registry import EmitKind
from advisor.trace.gpus import match_gpu
from advisor.trace.load import load_trace

H200 = match_gpu("H200")
SHAPES = [
    ShapeOption.parse("tail_gemm=896x4864x8192"),
    ShapeOption.parse("underfilled=256x256x65536"),
]


def run_script(path: Path, *args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "TRITON_INTERPRET": "1"}
    return subprocess.run(
        [sys.executable, str(path), *args], capture_output=True, text=True, timeout=600, env=env
    )


def synthetic(strategy: str, m=512, n=512, k=1024) -> Finding:
    return Finding(
        rule="test", title="t", strategy=strategy, explains=(), severity="low",
        kernel="gemm_kernel", region="r", device=0, est_savings_ns=1000, at_ns=None,
        at_rel_ns=None, summary="s", gemm_by="name", confidence="confirmed", confirm=None,
        evidence={}, rationale="r", watch_for="w", references=(),
        emit=EmitRequest(EmitKind.GEMM, row={"m": m, "n": n, "k": k, "median_ns": 50000.0}),
    )  # fmt: skip


@pytest.fixture(scope="module")
def sample_emit(tmp_path_factory):
    out = tmp_path_factory.mktemp("emit")
    a = analyze(load_trace(H200_SINGLE), SHAPES)
    findings = find(a)
    return out, emit_into(findings, a.trace.gpus, out)


def test_sample_findings_get_configs(sample_emit):
    out, findings = sample_emit
    by = {(f.strategy, f.region): f for f in findings}
    split = by[("split_k", "underfilled_long_k")]
    tail = by[("stream_k", "tail_gemm")]
    for f in (split, tail):
        assert [Path(p).suffix for p in f.config] == [".json", ".py"]
        assert all(Path(p).is_file() for p in f.config)
    assert split.emitted.knobs["M"] == 256 and split.emitted.knobs["SPLITS"] > 1
    knobs = tail.emitted.knobs
    assert knobs["strategy"] == "stream_k" and knobs["NUM_PROGS"] <= 132
    record = json.loads(Path(split.config[0]).read_text())
    assert record["cutlass_profiler"].startswith("cutlass_profiler --operation=Gemm --m=256")
    assert f"--split_k_slices={split.emitted.knobs['SPLITS']}" in record["cutlass_profiler"]
    assert split.emitted.cutlass_profiler == record["cutlass_profiler"]
    # the warm-up launch of the same kernel has no shape: said, not guessed
    warm = by[("split_k", "warmup")]
    assert warm.config == () and "--shape" in warm.missing
    assert finding_dict(warm)["config"] is None  # the JSON document says null
    # launch and sync findings get their own files
    assert by[("cuda_graph", "tiny_kernels_eager")].config[0].endswith(".py")
    assert by[("remove_sync", "sync_in_loop")].config[0].endswith(".md")
    assert not list(out.glob(".advisor-emit-*"))  # staging folder gone
    # a range's launch script carries the range's launch overhead and launch calls (its
    # instances summed) and a stand-in chain of its ops per instance: it printed "0 launches,
    # 0.0 us" and ran a chain of 2 before. tiny_kernels_eager: 500 kernels, one instance;
    # warmup: 246 ops over 2 instances
    graph = by[("cuda_graph", "tiny_kernels_eager")]
    config = _script_config(Path(graph.config[0]))
    assert config["TRACE_OVERHEAD_NS"] == graph.emit.row["launch_overhead_ns"] > 0
    assert (config["TRACE_LAUNCHES"], config["CHAIN_OPS"]) == (500, 500)
    assert config["TRACE_PER"] == "finding (summed)"
    warmup = _script_config(Path(by[("cuda_graph", "warmup")].config[0]))
    assert (warmup["TRACE_LAUNCHES"], warmup["CHAIN_OPS"]) == (246, 123)


def test_a_steps_launch_script_carries_a_steady_steps_medians(tmp_path):
    from conftest import SAMPLES

    a = analyze(load_trace(SAMPLES / "h200_train_steps.sqlite"))
    (graph,) = [f for f in emit_into(find(a), a.trace.gpus, tmp_path)
                if f.rule == "host-bound-steps"]  # fmt: skip
    config, row = _script_config(Path(graph.config[0])), graph.emit.row
    assert (config["TRACE_LAUNCHES"], config["TRACE_OVERHEAD_NS"]) == (
        row["launches"], row["overhead_ns"])  # fmt: skip
    assert config["TRACE_PER"] == "steady step (medians)" and config["TRACE_LAUNCHES"] > 0


def _script_config(script: Path) -> dict:
    """The CONFIG literal an emitted script starts with."""
    import ast

    tree = ast.parse(script.read_text())
    node = next(n for n in tree.body if isinstance(n, ast.Assign)
                and getattr(n.targets[0], "id", "") == "CONFIG")  # fmt: skip
    return ast.literal_eval(node.value)


def _lint(folder: Path) -> subprocess.CompletedProcess:
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "ruff",
            "check",
            "--select",
            "E,F,W",
            "--line-length",
            "100",
            str(folder),
        ],
        capture_output=True,
        text=True,
    )


def test_emitted_scripts_are_lint_clean(sample_emit):
    out, _ = sample_emit
    proc = _lint(out)
    assert proc.returncode == 0, proc.stdout


# strategy -> extra knob overrides that force the interesting code paths at small sizes
TILES_28_ON_3 = ["--m", "200", "--n", "100", "--k", "300", "--set", "NUM_PROGS=3",
                 "--set", "BLOCK_M=32", "--set", "BLOCK_N=32", "--set", "BLOCK_K=32"]  # fmt: skip
CASES = [
    ("split_k", ["--m", "96", "--n", "80", "--k", "320"]),
    (
        "split_k",
        [
            "--m",
            "100",
            "--n",
            "60",
            "--k",
            "600",
            "--set",
            "ATOMIC=1",
            "--set",
            "SPLITS=4",
            "--set",
            "BLOCK_M=32",
            "--set",
            "BLOCK_N=32",
        ],
    ),
    ("stream_k", ["--m", "96", "--n", "64", "--k", "192"]),
    # 28 tiles on 3 CTAs: data-parallel waves, then a stream-K remainder; and the same tiles
    # under each other Stream-K policy (28 / 27 / 0 tiles data-parallel)
    ("stream_k", TILES_28_ON_3),
    *[("stream_k", [*TILES_28_ON_3, "--set", f"SK_TILES={p}"]) for p in (0, 1, -1)],
    # 4 tiles shared by 7 CTAs: tiles finished from several partials
    (
        "stream_k",
        [
            "--m",
            "64",
            "--n",
            "64",
            "--k",
            "2048",
            "--set",
            "NUM_PROGS=7",
            "--set",
            "BLOCK_M=32",
            "--set",
            "BLOCK_N=32",
        ],
    ),
    (
        "persistent",
        [
            "--m",
            "130",
            "--n",
            "70",
            "--k",
            "200",
            "--set",
            "NUM_PROGS=2",
            "--set",
            "BLOCK_M=32",
            "--set",
            "BLOCK_N=32",
        ],
    ),
    ("tile_reshape", ["--m", "96", "--n", "64", "--k", "192"]),
    ("warp_specialization", ["--m", "96", "--n", "64", "--k", "192"]),
    (
        "warp_specialization",
        [
            "--m",
            "128",
            "--n",
            "96",
            "--k",
            "256",
            "--set",
            "NUM_PROGS=2",
            "--set",
            "BLOCK_M=32",
            "--set",
            "BLOCK_N=32",
        ],
    ),
]


@pytest.fixture(scope="module")
def synthetic_emit(tmp_path_factory):
    out = tmp_path_factory.mktemp("emit_all")
    strategies = sorted({s for s, _ in CASES})
    findings = emit_into([synthetic(s) for s in strategies], {0: H200}, out)
    return {f.strategy: Path(f.config[1]) for f in findings}


@needs_kernels
@pytest.mark.parametrize("strategy, args", CASES)
def test_emitted_gemm_scripts_are_correct_under_the_interpreter(synthetic_emit, strategy, args):
    proc = run_script(synthetic_emit[strategy], "--check", *args)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    checks = [line for line in proc.stdout.splitlines() if line.startswith("check")]
    assert len(checks) == 2 and all(line.endswith(" ok") for line in checks)


@needs_kernels
def test_script_fails_on_wrong_numbers(synthetic_emit, tmp_path):
    broken = tmp_path / "broken.py"
    text = synthetic_emit["split_k"].read_text()
    broken.write_text(text.replace("total += tl.load(", "total -= tl.load("))
    proc = run_script(broken, "--check", "--m", "64", "--n", "64", "--k", "256")
    assert proc.returncode == 1 and "FAIL" in proc.stdout


@needs_kernels
def test_script_rejects_bad_knobs_and_cpu_bench(synthetic_emit):
    proc = run_script(synthetic_emit["split_k"], "--set", "NOPE=1")
    assert proc.returncode != 0 and "expected KNOB=INT" in proc.stderr
    proc = run_script(synthetic_emit["split_k"], "--bench", "--m", "64", "--n", "64", "--k", "128")
    assert proc.returncode != 0 and "--bench needs a CUDA GPU" in proc.stderr


def test_overlap_note_from_the_two_gpu_sample(tmp_path):
    a = analysis_of(H200_2GPU)
    found = [f for f in find(a) if f.strategy == "comm_overlap"]
    findings = emit_into(found, a.trace.gpus, tmp_path)
    assert found[0].emitted is None  # emit leaves the findings as they were
    text = Path(findings[0].config[0]).read_text()
    assert "async_op=True" in text and "bucket_cap_mb" in text
    assert "same stream as compute" in text


@pytest.mark.parametrize("gpu", ["A100-SXM4-80GB", "T4", "L4", "MI300X"])
def test_warp_specialization_needs_hopper(gpu, tmp_path):
    # (on T4, L4, MI300X the planner's tile does not fit either: checked first, no TypeError)
    (e,) = emit([synthetic("warp_specialization")], {0: match_gpu(gpu)}, tmp_path)
    assert e.config == () and "compute capability >= 9" in e.missing


def test_a_gpu_no_tile_fits_gets_no_script_and_says_why(tmp_path):
    (e,) = emit([synthetic("warp_specialization")], {0: match_gpu("RTX-5090")}, tmp_path)
    assert e.config == () and e.missing.startswith(
        "the warp-specialized 128x256x64 tile (3 stages) does not fit RTX-5090"
    )
    small = replace(H200, name="small", shared_mem_per_sm=16384, max_shared_mem_per_block=16384)
    for strategy in ("split_k", "stream_k", "persistent"):
        (e,) = emit([synthetic(strategy)], {0: small}, tmp_path)
        assert e.config == () and e.missing.startswith("no GEMM tile of the planner fits small")


def test_the_gemm_strategies_rules_may_emit_are_the_planners():
    # the registry names each GEMM strategy's search in knobs.py: the same function as the
    # planner's own table (CHOOSERS, which the emitted scripts carry) under its name
    from importlib import resources

    from advisor.configs import knobs
    from advisor.configs.emit import TEMPLATE_PACKAGE
    from advisor.rules.registry import GEMM_STRATEGIES, STRATEGIES

    assert set(GEMM_STRATEGIES) == set(knobs.CHOOSERS)
    templates = resources.files(TEMPLATE_PACKAGE)
    for name in GEMM_STRATEGIES:
        s = STRATEGIES[name]
        assert getattr(knobs, s.chooser) is knobs.CHOOSERS[name], name
        assert templates.joinpath(s.template).is_file(), name
    for s in STRATEGIES.values():  # every advice note's template is shipped
        assert templates.joinpath(s.note).is_file(), s.name


def test_a_strategy_the_registry_does_not_know_gets_a_plain_note_and_no_gemm_script(tmp_path):
    # (a user rule may name its own strategy; only with emit kind advice, checked at load)
    f = synthetic("my_own_strategy")
    (e,) = emit([f], {0: H200}, tmp_path / "gemm")
    assert e.config == () and e.missing == "no GEMM script for the strategy 'my_own_strategy'"
    (e,) = emit([replace(f, emit=EmitRequest(EmitKind.ADVICE))], {0: H200}, tmp_path / "note")
    (note,) = e.config
    assert "Strategy: `my_own_strategy`." in Path(note).read_text()


def test_cutlass_command_for_stream_k_on_hopper():
    cmd = cutlass_command(
        {"strategy": "stream_k", "BLOCK_M": 128, "BLOCK_N": 256, "BLOCK_K": 64, "GROUP_M": 8},
        896,
        4864,
        8192,
        H200,
    )
    assert "--m=896 --n=4864 --k=8192" in cmd and "stream_k" in cmd
    assert "--raster_order=along_m --swizzle_size=8" in cmd


def test_unwritable_emit_dir_leaves_nothing(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("x")
    with pytest.raises(AdvisorInputError, match="cannot write the emit folder"):
        emit([synthetic("split_k")], {0: H200}, blocker / "sub")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["file"]


def _grid_stride_emit(tmp_path):
    # wave-tail-kernel: 160 CTAs of 256 threads over 132 slots (1.21 waves)
    f = replace(
        synthetic("persistent"),
        rule="wave-tail-kernel",
        emit=EmitRequest(
            EmitKind.GRID_STRIDE,
            row={
                "grid_blocks": 160,
                "slots": 132,
                "block_threads": 256,
                "median_ns": 50000.0,
                "waves": 1.2121,
            },
        ),  # fmt: skip
    )
    (done,) = emit([f], {0: H200}, tmp_path)
    return Path(done.config[0]), done.knobs


def test_grid_stride_knobs_from_the_traced_launch(tmp_path):
    # the traced grid and slots; 256 threads -> 8 warps, blocks of 4 elements per thread
    _, knobs = _grid_stride_emit(tmp_path)
    assert (knobs["TRACE_GRID"], knobs["SLOTS"], knobs["NUM_PROGS"]) == (160, 132, 132)
    proc = _lint(tmp_path)
    assert proc.returncode == 0, proc.stdout
    assert (knobs["num_warps"], knobs["BLOCK"], knobs["PER_CTA"]) == (8, 1024, 16384)


@needs_kernels
def test_grid_stride_script_is_correct_under_the_interpreter(tmp_path):
    # both versions against float64 torch at odd sizes: 7 pieces of 160 elements over
    # n = 1000, blocks of 64, 3 programs; a loop that skips blocks fails the check
    script, _ = _grid_stride_emit(tmp_path)
    args = ["--check", "--n", "1000", "--set", "PER_CTA=160", "--set", "BLOCK=64",
            "--set", "NUM_PROGS=3", "--set", "WORK=3"]  # fmt: skip
    proc = run_script(script, *args)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    checks = [line for line in proc.stdout.splitlines() if line.startswith("check")]
    assert len(checks) == 4 and all(line.endswith(" ok") for line in checks), proc.stdout
    broken = tmp_path / "broken.py"
    loop = "range(tl.program_id(0), blocks, NUM_PROGS)"
    broken.write_text(script.read_text().replace(loop, loop.replace("PROGS)", "PROGS + 1)")))
    assert run_script(broken, *args).returncode == 1


ODD_SIZES = [("7", "5", "3"), ("33", "257", "1000")]


@needs_kernels
@pytest.mark.parametrize("strategy", ["split_k", "stream_k", "persistent", "warp_specialization"])
@pytest.mark.parametrize("size", ODD_SIZES, ids=lambda s: "x".join(s))
def test_scripts_replan_at_odd_sizes_under_the_interpreter(synthetic_emit, strategy, size):
    # no --set: the script re-plans its knobs for the size with advisor's planner and
    # stays right where M, N and K are not multiples of its tiles
    m, n, k = size
    proc = run_script(synthetic_emit[strategy], "--check", "--m", m, "--n", n, "--k", k)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert f"re-planned for M={m} N={n} K={k}" in proc.stdout
    checks = [line for line in proc.stdout.splitlines() if line.startswith("check")]
    assert len(checks) == 2 and all(line.endswith(" ok") for line in checks), proc.stdout


def _script_module(path: Path):
    import importlib.util

    spec = importlib.util.spec_from_file_location(path.stem, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_scripts_hold_the_planner_whole_with_advisors_facts(synthetic_emit):
    # issue 32: the planner section is templates/planner.py as it is, then the facts
    # (tests/configs/test_planner.py checks them)
    from importlib import resources

    from advisor.configs.emit import PLANNER, TEMPLATE_PACKAGE, planner_section

    template = resources.files(TEMPLATE_PACKAGE).joinpath(PLANNER).read_text()
    section = planner_section(H200)
    assert section.startswith(template)
    for script in synthetic_emit.values():
        assert script.read_text().count(section) == 1, script


@needs_kernels
def test_script_planner_is_advisors(synthetic_emit, monkeypatch):
    # the script's re-plan gives the knobs advisor's own planner chooses, at other sizes
    from advisor.configs import knobs

    monkeypatch.setenv("TRITON_INTERPRET", "1")
    for strategy in ("split_k", "stream_k"):
        script = _script_module(synthetic_emit[strategy])
        for m, n, k in [(256, 256, 262144), (896, 4864, 8192), (1000, 600, 50000)]:
            want = knobs.CHOOSERS[strategy](knobs.Problem(m, n, k, H200))
            got = script.replan(m, n, k)
            assert got and all(got[key] == want[key] for key in got), (strategy, got, want)


@needs_kernels
def test_tune_candidates_fit_and_start_with_the_chosen(synthetic_emit, monkeypatch):
    # Stream-K waits on its CTAs: every candidate's NUM_PROGS must be resident at once
    monkeypatch.setenv("TRITON_INTERPRET", "1")
    for strategy in ("split_k", "stream_k"):
        script = _script_module(synthetic_emit[strategy])
        cands = script.tune_candidates(script.CONFIG)
        assert cands[0] == script.CONFIG and len(cands) > 10
        for c in cands:
            resident = script._resident(c)
            assert resident > 0
            if "NUM_PROGS" in c:
                assert c["NUM_PROGS"] <= resident
        if strategy == "split_k":  # SPLITS halved and doubled are tried
            assert {c["SPLITS"] for c in cands} >= {script.CONFIG["SPLITS"] * 2}


@needs_kernels
def test_stream_k_data_parallel_touches_no_partials(synthetic_emit, monkeypatch):
    # with no Stream-K tiles (SK_TILES=0) every CTA's Stream-K share is empty and it walks
    # no segment: before, (end - 1) // iters_per_tile truncated to 0 and each CTA stored a
    # BM x BN partial of zeros and raised a flag (on the H200 the data-parallel schedule ran
    # 5-12 us slower per call than the plain persistent kernel, benchmarks/sk_fixed.py)
    import torch

    monkeypatch.setenv("TRITON_INTERPRET", "1")
    script = _script_module(synthetic_emit["stream_k"])
    m, n, k = 64, 96, 96
    cfg = {**script.CONFIG, "BLOCK_M": 32, "BLOCK_N": 32, "BLOCK_K": 32, "num_warps": 4,
           "num_stages": 2, "GROUP_M": 8, "NUM_PROGS": 4, "SK_TILES": 0, "GLUON": 0}  # fmt: skip
    p = script.plan(m, n, k, cfg)
    assert p["sk_tiles"] == 0 and p["dp_tiles"] == 6
    a, b = torch.randn(m, k), torch.randn(k, n)
    c = torch.empty(m, n)
    ws = torch.full((p["progs"], 32, 32), float("nan"))
    flags = torch.zeros(1, dtype=torch.int32)
    script.stream_k_kernel[(p["progs"],)](
        a, b, c, ws, flags, m, n, k, a.stride(0), a.stride(1), b.stride(0), b.stride(1),
        c.stride(0), c.stride(1), p["tiles_m"], p["tiles_n"], p["dp_tiles"],
        p["iters_per_tile"], p["iters_per_prog"], p["extra_iters"], p["progs"],
        BM=32, BN=32, BK=32, GROUP_M=8, EVEN_K=True, num_warps=4, num_stages=2)  # fmt: skip
    assert torch.isnan(ws).all() and int(flags[0]) == 0
    assert torch.allclose(c, a @ b, atol=1e-4, rtol=1e-4)


@needs_kernels
def test_stream_k_data_parallel_launches_one_cta_per_tile(synthetic_emit, monkeypatch):
    # a data-parallel-only schedule with fewer tiles than CTAs launches one CTA per tile and
    # no partials' workspace (round 8: the Gluon kernel's data-parallel schedule ran up to
    # 12% slower than the plain persistent kernel with 132 CTAs for 96 tiles); a schedule
    # with Stream-K tiles keeps every CTA and a partial slot for each
    import torch

    monkeypatch.setenv("TRITON_INTERPRET", "1")
    script = _script_module(synthetic_emit["stream_k"])
    m, n, k = 64, 64, 256  # 4 tiles of 32 x 32, 8 K-iterations each, on 7 CTAs
    base = {**script.CONFIG, "BLOCK_M": 32, "BLOCK_N": 32, "BLOCK_K": 32, "num_warps": 4,
            "num_stages": 2, "GROUP_M": 8, "NUM_PROGS": 7, "GLUON": 0}  # fmt: skip
    launches = []
    kernel = script.stream_k_kernel

    class Recording:
        def __getitem__(self, grid):
            def launch(*args, **kwargs):
                launches.append((grid, args[3].shape))  # args[3]: the partials' workspace
                return kernel[grid](*args, **kwargs)

            return launch

    monkeypatch.setattr(script, "stream_k_kernel", Recording())
    g = torch.Generator().manual_seed(0)
    a, b = torch.randn(m, k, generator=g), torch.randn(k, n, generator=g)
    for policy, grid, ws_shape in [(0, (4,), (1,)), (-1, (7,), (7, 32, 32))]:
        cfg = {**base, "SK_TILES": policy}
        p = script.plan(m, n, k, cfg)
        assert p["progs"] == grid[0] and p["sk_tiles"] == (0 if policy == 0 else 4)
        launches.clear()
        c = script.gemm(a, b, cfg)
        assert launches == [(grid, ws_shape)]
        assert torch.allclose(c, a @ b, atol=1e-3, rtol=1e-3)


@needs_kernels
def test_padding_copies_only_the_operand_that_needs_it(synthetic_emit, monkeypatch):
    # Triton's pointer kernels pad row strides to 16 elements, TMA (the Gluon path) to 8
    # (16 bytes of bf16); an operand already aligned is passed through, not copied
    import torch

    monkeypatch.setenv("TRITON_INTERPRET", "1")
    script = _script_module(synthetic_emit["split_k"])
    seen = {}

    def record(a, b, cfg):
        seen.update(a=a, b=b)
        return torch.zeros(a.shape[0], b.shape[1])

    for align, (k, n), (want_k, want_n) in [
        (8, (48, 600), (48, 600)),  # 600 = 75 x 8: nothing to pad for TMA
        (16, (48, 600), (48, 608)),  # ... but Triton's loads want 608 columns
        (8, (44, 601), (48, 608)),
        (16, (44, 640), (48, 640)),  # K only: B gets 4 zero rows, N stays
    ]:
        a, b = torch.randn(5, k), torch.randn(k, n)
        c = script.padded(record, align)(a, b, {})
        assert seen["a"].shape == (5, want_k) and seen["b"].shape == (want_k, want_n)
        assert (seen["a"] is a) == (want_k == k)  # no copy of A when K is aligned
        assert (seen["b"] is b) == ((want_k, want_n) == (k, n))
        assert c.shape == (5, n)
    # Stream-K's Gluon path: what it copies anyway gets 128-byte rows (64 elements); what
    # TMA takes as it is stays uncopied
    for (k, n), (want_k, want_n) in [
        ((48, 600), (48, 600)),  # aligned for TMA: no copy, 600 columns stay
        ((44, 601), (64, 640)),  # both copied: K and N to 64
        ((48, 601), (48, 640)),  # B only: its rows to 64, K stays
        ((44, 640), (64, 640)),  # K only: A's rows to 64, B gets the zero rows, N stays
    ]:
        a, b = torch.randn(5, k), torch.randn(k, n)
        c = script.padded(record, 8, script.LINE_ALIGN)(a, b, {})
        assert seen["a"].shape == (5, want_k) and seen["b"].shape == (want_k, want_n)
        assert (seen["a"] is a) == (want_k == k)
        assert (seen["b"] is b) == ((want_k, want_n) == (k, n))
        assert c.shape == (5, n)


class _FakeHopperTensor:
    """What gluon_config reads of an operand: a bf16 CUDA tensor on device 0."""

    is_cuda = True
    dtype = None
    device = None

    def element_size(self) -> int:
        return 2


def _on_a_hopper(path, monkeypatch):
    """(the emitted script at ``path`` loaded as if on an H200 (sm_90, 132 SMs), a fake bf16
    CUDA tensor); skips where this Triton has no Gluon."""
    import torch

    monkeypatch.setenv("TRITON_INTERPRET", "1")
    script = _script_module(path)
    if not script.HAVE_GLUON:
        pytest.skip("this Triton has no Gluon")
    monkeypatch.setattr(script, "_device_facts", lambda index: ((9, 0), 132))
    a = _FakeHopperTensor()
    a.dtype, a.device = torch.bfloat16, torch.device("cuda", 0)
    return script, a


@needs_kernels
def test_gluon_ring_fits_hopper_shared_memory(synthetic_emit, monkeypatch):
    # stages that fit 227 KiB less 1 KiB of barriers, by hand: a stage of a 256x128x64 bf16
    # tile is (256*64 + 64*128) * 2 = 49,152 B; split-K partials leave shared memory to the
    # ring (out_bytes 0): (232,448 - 1,024) // 49,152 = 4 >= the chosen 3; a bf16 output
    # tile (65,536 B) leaves (232,448 - 1,024 - 65,536) // 49,152 = 3; an fp32 one through
    # shared memory (131,072 B) only 2; 256x256x64 with an fp32 tile (262,144 B) not at all
    import torch

    script, a = _on_a_hopper(synthetic_emit["split_k"], monkeypatch)
    cfg = dict(BLOCK_M=256, BLOCK_N=128, BLOCK_K=64, num_warps=8, num_stages=3)
    assert script.gluon_config(a, cfg, 0)["num_stages"] == 3
    assert script.gluon_config(a, {**cfg, "num_stages": 6}, 0)["num_stages"] == 4
    assert script.gluon_config(a, {**cfg, "BLOCK_M": 128, "BLOCK_N": 256}, 2)["num_stages"] == 3
    # the Stream-K kernel can store that output tile in two halves through a 32,768 B
    # buffer (EPI_SPLIT 2): (232,448 - 1,024 - 32,768) // 49,152 = 4 stages where 4 are
    # asked for; where the whole tile fits the stages asked for, no split (128 x 128 x 64,
    # 5 stages of 32,768 B and a 32,768 B tile)
    wide = {**cfg, "BLOCK_M": 128, "BLOCK_N": 256, "num_stages": 4}
    assert script.gluon_config(a, wide, 2, True) == {**wide, "num_stages": 4, "EPI_SPLIT": 2}
    assert script.gluon_config(a, wide, 2)["num_stages"] == 3
    assert script.gluon_config(a, {**wide, "num_stages": 3}, 2, True) == {**wide, "num_stages": 3}
    square = {**cfg, "BLOCK_M": 128, "BLOCK_N": 128, "num_stages": 5}
    assert script.gluon_config(a, square, 2, True) == square
    assert script.gluon_config(a, cfg, 4)["num_stages"] == 2
    assert script.gluon_config(a, {**cfg, "BLOCK_N": 256}, 4) is None
    # not Hopper, not 16-bit, or BLOCK_M not a multiple of 16 rows per consumer warp: None
    monkeypatch.setattr(script, "_device_facts", lambda index: ((10, 0), 148))
    assert script.gluon_config(a, cfg, 0) is None
    monkeypatch.setattr(script, "_device_facts", lambda index: ((9, 0), 132))
    assert script.gluon_config(a, {**cfg, "BLOCK_M": 64}, 0) is None
    a.dtype = torch.float32
    assert script.gluon_config(a, cfg, 0) is None


@needs_kernels
def test_data_parallel_only_tiles_fit_the_gluon_kernel(synthetic_emit, monkeypatch):
    # 128 x 192 (two accumulators along N) and 192 x 128 (along M: 128 rows over the 8
    # consumer warps, 64 over one warpgroup of 4 along M, two side by side along N): a
    # stage is (128*64 + 64*192) * 2 = 40,960 B, the bf16 output 49,152 B, so
    # (232,448 - 1,024 - 49,152) // 40,960 = 4 stages
    script, a = _on_a_hopper(synthetic_emit["stream_k"], monkeypatch)
    for bm, bn in ((128, 192), (192, 128)):
        cfg = dict(BLOCK_M=bm, BLOCK_N=bn, BLOCK_K=64, num_warps=8, num_stages=4)
        assert script.gluon_config(a, cfg, 2)["num_stages"] == 4
    assert script.two_parts(192) == (128, 64)
    # 192 rows over 4 warps: the 128-row accumulator fits, the 64-row one needs a whole
    # warpgroup along M (4 warps): fits; 160 rows (128 + 32) does not
    assert script.gluon_config(a, dict(cfg, num_warps=4), 2) is not None
    assert script.gluon_config(a, dict(cfg, BLOCK_M=160), 2) is None


@needs_kernels
def test_a_data_parallel_only_tile_runs_whole_tiles_in_gluon_else_as_a_power_of_two(
        synthetic_emit, monkeypatch):  # fmt: skip
    # the Stream-K script's dispatch on the CPU: with the Gluon kernel available (faked:
    # its launches recorded), 128 x 192 and 192 x 128 run the two-accumulator kernel when
    # the schedule has no Stream-K share (one CTA per tile: 3 x 2 = 6 tiles of 128 x 192
    # at 300 x 300), and as 128 x 256 / 256 x 128 in the Stream-K kernel when it has one;
    # without Gluon (GLUON=0, or no Hopper: the interpreter) the Triton kernel runs the
    # rounded tile, and the result is right; the split-K script never runs them split
    import torch

    monkeypatch.setenv("TRITON_INTERPRET", "1")
    script = _script_module(synthetic_emit["stream_k"])
    g = torch.Generator().manual_seed(0)
    a, b = torch.randn(300, 96, generator=g), torch.randn(96, 300, generator=g)
    base = {**script.CONFIG, "BLOCK_K": 32, "num_warps": 8, "num_stages": 4, "GROUP_M": 8,
            "NUM_PROGS": 132}  # fmt: skip
    # no Gluon here: the Triton kernel, the tile rounded up
    seen = []
    kernel = script.stream_k_kernel

    class Recording:
        def __getitem__(self, grid):
            def launch(*args, **kwargs):
                seen.append((kwargs["BM"], kwargs["BN"]))
                return kernel[grid](*args, **kwargs)

            return launch

    monkeypatch.setattr(script, "stream_k_kernel", Recording())
    for (bm, bn), want in (((128, 192), (128, 256)), ((192, 128), (256, 128))):
        for gluon, policy in ((1, 0), (0, 0), (0, -1)):
            seen.clear()
            cfg = {**base, "BLOCK_M": bm, "BLOCK_N": bn, "GLUON": gluon, "SK_TILES": policy}
            c = script.gemm(a, b, cfg)
            assert seen == [want] and torch.allclose(c, a @ b, atol=1e-3, rtol=1e-3)
    # with Gluon: which Gluon kernel gets which tile
    calls = []
    monkeypatch.setattr(script, "gluon_config", lambda a, cfg, out_bytes, *split: dict(cfg))
    monkeypatch.setattr(script, "sm_count", lambda t: 132)
    monkeypatch.setattr(script, "gluon_dp2", lambda a, b, c, cfg, progs: calls.append(
        ("dp2", _tile(cfg), progs)))  # fmt: skip
    monkeypatch.setattr(script, "gluon_stream_k", lambda a, b, c, cfg, p: calls.append(
        ("stream_k", _tile(cfg), p["sk_tiles"])))  # fmt: skip
    # (all Stream-K: the 3 x 2 = 6 tiles of 128 x 256 all shared out)
    for policy, want in ((0, ("dp2", (128, 192), 6)), (-1, ("stream_k", (128, 256), 6))):
        calls.clear()
        script.gemm(a, b, {**base, "BLOCK_M": 128, "BLOCK_N": 192, "GLUON": 1,
                           "SK_TILES": policy})  # fmt: skip
        assert calls == [want]
    calls.clear()
    script.gemm(a, b, {**base, "BLOCK_M": 192, "BLOCK_N": 128, "GLUON": 1, "SK_TILES": 0})
    assert calls == [("dp2", (192, 128), 6)]  # 2 x 3 tiles
    # split-K: the Triton kernel with the rounded tile
    split = _script_module(synthetic_emit["split_k"])
    seen.clear()
    sk_kernel = split.split_k_kernel

    class SplitRecording:
        def __getitem__(self, grid):
            def launch(*args, **kwargs):
                seen.append((kwargs["BM"], kwargs["BN"]))
                return sk_kernel[grid](*args, **kwargs)

            return launch

    monkeypatch.setattr(split, "split_k_kernel", SplitRecording())
    cfg = {**split.CONFIG, "BLOCK_M": 128, "BLOCK_N": 192, "BLOCK_K": 32, "num_warps": 8,
           "num_stages": 4, "GROUP_M": 8, "SPLITS": 2, "GLUON": 1, "ATOMIC": 0}  # fmt: skip
    c = split.gemm(a, b, cfg)
    assert seen == [(128, 256)] and torch.allclose(c, a @ b, atol=1e-3, rtol=1e-3)


def _tile(cfg: dict) -> tuple[int, int]:
    return cfg["BLOCK_M"], cfg["BLOCK_N"]


@needs_kernels
def test_grid_stride_check_on_the_cpu_defaults_to_a_small_size_and_says_so(tmp_path):
    # the traced size (160 pieces of 16384 elements) takes minutes under the interpreter:
    # without --n the check runs 16 blocks + 3 elements over at most 4 programs, and says so
    script, _ = _grid_stride_emit(tmp_path)
    proc = run_script(script, "--check")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    first = proc.stdout.splitlines()[0]
    assert first == ("check on the CPU (Triton interpreter): 16387 elements over 4 programs "
                     "instead of the traced 2621440 (--n N to choose)")  # fmt: skip
    checks = [line for line in proc.stdout.splitlines() if line.startswith("check seed")]
    assert len(checks) == 4 and all(" n=16387 " in c and c.endswith(" ok") for c in checks)


@needs_kernels
def test_to_lines_copies_rows_onto_128_byte_lines(synthetic_emit, monkeypatch):
    # the Stream-K script's copy of A for rows off 32-byte sectors (planner.line_copy_a):
    # the same values as a view of the same shape, each row on a whole number of 128-byte
    # lines (64 16-bit elements), in the interpreter
    import torch

    monkeypatch.setenv("TRITON_INTERPRET", "1")
    script = _script_module(synthetic_emit["stream_k"])
    g = torch.Generator().manual_seed(0)
    for rows, cols, dtype in ((21, 1000, torch.bfloat16), (9, 5000, torch.float16),
                              (3, 64, torch.bfloat16)):  # fmt: skip
        t = torch.randn(rows, cols, generator=g).to(dtype)
        v = script.to_lines(t)
        assert v.shape == t.shape and v.stride() == (-(-cols // 64) * 64, 1)
        assert torch.equal(v, t)
