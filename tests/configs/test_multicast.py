"""The Stream-K script's 2-CTA cluster kernels (gluon_ws.py, issue 29 round 15): the PTX
rewrite that adds what Gluon (Triton 3.6) cannot say (multicast loads, arrives on the other
CTA's barriers, cluster barriers) checked on a hand-made PTX of the same shape as Triton's,
and the MULTICAST knob's dispatch on the CPU (the GPU numbers: docs/verification/README.md,
round 15)."""

import importlib.util
from pathlib import Path

import pytest
from conftest import needs_kernels

from advisor.configs.emit import emit_into
from advisor.rules.finding import EmitRequest, Finding
from advisor.rules.registry import EmitKind
from advisor.trace.gpus import match_gpu

# the shape of Triton 3.6's PTX for mc_gemm_kernel (num_ctas=2, 8 default warps): the
# cluster directives, the barriers' initialisation and the markers, a TMA load of A, two of
# the shared B after the marker, a consumer's arrive on a stage's `empty` barrier, the exit
PTX = """\
.visible .entry mc_gemm_kernel(
\t.param .u32 mc_gemm_kernel_param_0
)
.reqntid 384
.maxnreg 168
.explicitcluster
.reqnctapercluster 2
{
\t.reg .pred \t%p<23>;
\t.reg .b32 \t%r<381>;
\tmov.u32 \t%r1, %tid.x;
\t@%p10 mbarrier.init.shared::cta.b64 [%r81], 1;
\t@%p10 mbarrier.init.shared::cta.b64 [%r82], 2;
\t// begin inline asm
\t// @MC_INIT
\tmov.u32 %r89, 0;
\t// end inline asm
$L__BB0_9:
\t@%p5 mbarrier.arrive.expect_tx.shared.b64 _, [%r52], 49152;
\t@%p6 cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes [%r53], \
[%rd3, {%r241, %r54}], [%r52];
\t// begin inline asm
\t// @MC_SHARED
\tmov.u32 %r56, 0;
\t// end inline asm
$L__tmp15:
\t@%p7 cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes [%r58], \
[%rd2, {%r59, %r241}], [%r52];
\tadd.s32 \t%r59, %r57, 8192;
\t@%p7 cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes [%r60], \
[%rd2, {%r61, %r241}], [%r52];
\t@%p8 bra \t$L__BB0_9;
\t// @MC_REMOTE
\tmov.u32 %r90, 0;
\tbar.sync \t0, 256;
\t@%p18 mbarrier.arrive.shared::cta.b64 _, [%r152];
\t@%p9 cp.async.bulk.tensor.2d.global.shared::cta.bulk_group [%rd1, {%r153, %r154}], [%r155];
$L__BB0_22:
\tret;
}
"""


def _finding() -> Finding:
    return Finding(
        rule="test", title="t", strategy="stream_k", explains=(), severity="low",
        kernel="gemm_kernel", region="r", device=0, est_savings_ns=1000, at_ns=None,
        at_rel_ns=None, summary="s", gemm_by="name", confidence="confirmed", confirm=None,
        evidence={}, rationale="r", watch_for="w", references=(),
        emit=EmitRequest(EmitKind.GEMM, row={"m": 512, "n": 512, "k": 1024, "median_ns": 5e4}),
    )  # fmt: skip


@pytest.fixture(scope="module")
def emitted(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("emit_mc")
    (found,) = emit_into([_finding()], {0: match_gpu("H200")}, out)
    return Path(found.config[1])


@pytest.fixture
def script(emitted, monkeypatch):
    """The emitted Stream-K script as a module, loaded under Triton's interpreter."""
    monkeypatch.setenv("TRITON_INTERPRET", "1")
    spec = importlib.util.spec_from_file_location(emitted.stem, emitted)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _lines(text: str) -> list[str]:
    return [line.strip() for line in text.splitlines()]


@needs_kernels
def test_the_rewrite_multicasts_the_shared_loads_and_releases_both_ctas(script):
    out = script.mc_patch_ptx(PTX, 8)
    lines = _lines(out)
    assert out.count("{") == out.count("}")
    # the worker warps (thread ids from 8 * 32) arrive at the cluster barrier at the entry
    body = lines.index("{")
    assert lines[body + 3 : body + 5] == [
        "setp.ge.u32 %mc_p, %mc_t, 256;", "@%mc_p barrier.cluster.arrive.relaxed;"]  # fmt: skip
    # the default warps: the barriers' init fenced, then the cluster barrier
    init = lines.index("// @MC_INIT")
    assert lines[init + 1 : init + 4] == [
        "fence.mbarrier_init.release.cluster;", "barrier.cluster.arrive.release;",
        "barrier.cluster.wait.acquire;"]  # fmt: skip
    # A's load stays; B's two: from CTA 0 alone, to both CTAs (mask 0b11)
    assert any(line.startswith("@%p6 cp.async") and "[%rd3" in line for line in lines)
    casts = [line for line in lines if "multicast::cluster" in line]
    assert len(casts) == 2 and all(
        line.startswith("@%mc_q cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::"
                        "complete_tx::bytes.multicast::cluster [%r") and "[%rd2, {" in line
        and line.endswith("[%r52], %mc_m;") for line in casts)  # fmt: skip
    assert lines.count("setp.eq.and.u32 %mc_q, %mc_r, 0, %p7;") == 2
    assert lines.count("mov.b16 %mc_m, 3;") == 2
    # the TMA store is not a load of the shared block: left alone
    assert "@%p9 cp.async.bulk.tensor.2d.global.shared::cta.bulk_group" in out
    # the release: this CTA's barrier, then the other CTA's at the same offset
    local = lines.index("@%p18 mbarrier.arrive.shared::cta.b64 _, [%r152];")
    assert lines[local + 3 : local + 6] == [
        "xor.b32 %mc_r, %mc_r, 1;", "mapa.shared::cluster.u32 %mc_a, %r152, %mc_r;",
        "@%p18 mbarrier.arrive.shared::cluster.b64 _, [%mc_a];"]  # fmt: skip
    # the exit: the workers wait out the entry's barrier, then every thread meets again
    ret = lines.index("ret;")
    assert lines[ret - 4 : ret] == [
        "@%mc_p barrier.cluster.wait.acquire;", "}", "barrier.cluster.arrive.release;",
        "barrier.cluster.wait.acquire;"]  # fmt: skip


@needs_kernels
def test_the_rewrites_variants_and_refusals(script):
    # a release at cluster scope (the round's first, slow kernels)
    assert "@%p18 mbarrier.arrive.release.cluster.shared::cluster.b64 _, [%mc_a];" in (
        script.mc_patch_ptx(PTX, 8, remote="cluster")
    )
    # no multicast: every load stays, the other CTA is still released
    plain = script.mc_patch_ptx(PTX, 8, multicast=False)
    assert "multicast" not in plain and "mapa.shared::cluster" in plain
    # independent CTAs: no remote arrive, the `empty` barriers back to one arrival
    alone = script.mc_patch_ptx(PTX, 8, multicast=False, remote="none")
    assert "mapa" not in alone and "], 2;" not in alone
    assert alone.count("mbarrier.init.shared::cta.b64") == 2
    assert "barrier.cluster.wait.acquire;" in alone
    # 4 default warps: the workers from thread 128
    assert "setp.ge.u32 %mc_p, %mc_t, 128;" in script.mc_patch_ptx(PTX, 4)
    with pytest.raises(ValueError, match="needs the remote arrives"):
        script.mc_patch_ptx(PTX, 8, remote="none")
    for marker in ("// @MC_INIT", "// @MC_SHARED", "// @MC_REMOTE"):
        with pytest.raises(ValueError, match="markers"):
            script.mc_patch_ptx(PTX.replace(marker, "// gone"), 8)
    with pytest.raises(ValueError, match="markers"):  # (not a cluster kernel)
        script.mc_patch_ptx(PTX.replace(".reqnctapercluster 2\n", ""), 8)


@needs_kernels
def test_multicast_runs_the_cluster_kernel_on_hopper_else_the_triton_kernel(script, monkeypatch):
    # MULTICAST=1: with Gluon (faked: its launches recorded) whole tiles in clusters of two,
    # pairs one above the other (B shared) or side by side (A shared; 128 x 192 always one
    # above the other); at 300 x 300, 128 x 256 makes 3 x 2 tiles: 2 x 2 pairs along M,
    # 3 x 1 along N; 128 x 192, 3 x 2 tiles: 2 x 2 pairs; at most NUM_PROGS // 2 clusters.
    # Without Gluon (the interpreter) the Triton kernel, and the result is right
    import torch

    g = torch.Generator().manual_seed(0)
    a, b = torch.randn(300, 96, generator=g), torch.randn(96, 300, generator=g)
    base = {**script.CONFIG, "BLOCK_M": 128, "BLOCK_N": 256, "BLOCK_K": 32, "num_warps": 8,
            "num_stages": 3, "GROUP_M": 8, "NUM_PROGS": 132, "GLUON": 1, "SK_TILES": 0,
            "MULTICAST": 1}  # fmt: skip
    c = script.gemm(a, b, base)
    assert torch.allclose(c, a @ b, atol=1e-3, rtol=1e-3)
    assert script.mc_grid(300, 300, base) == (2, 2)
    assert script.mc_grid(300, 300, {**base, "MC_SHARE": "A"}) == (3, 1)
    assert script.mc_grid(300, 300, {**base, "BLOCK_N": 192, "MC_SHARE": "A"}) == (2, 2)
    calls = []
    monkeypatch.setattr(script, "gluon_config", lambda a, cfg, out_bytes, *split: dict(cfg))
    monkeypatch.setattr(script, "sm_count", lambda t: 132)
    monkeypatch.setattr(script, "gluon_mc", lambda a, b, c, cfg, clusters: calls.append(
        ((cfg["BLOCK_M"], cfg["BLOCK_N"]), cfg.get("MC_SHARE"), clusters)))  # fmt: skip
    monkeypatch.setattr(script, "gluon_dp2", lambda *args: calls.append("dp2"))
    monkeypatch.setattr(script, "gluon_stream_k", lambda *args: calls.append("stream_k"))
    script.gemm(a, b, base)
    script.gemm(a, b, {**base, "MC_SHARE": "A"})
    script.gemm(a, b, {**base, "BLOCK_N": 192})
    script.gemm(a, b, {**base, "NUM_PROGS": 4})
    assert calls == [((128, 256), None, 4), ((128, 256), "A", 3), ((128, 192), None, 4),
                     ((128, 256), None, 2)]  # fmt: skip
    # MULTICAST=0 (and a BLOCK_M of 256): the kernels as before
    calls.clear()
    script.gemm(a, b, {**base, "MULTICAST": 0})
    script.gemm(a, b, {**base, "BLOCK_N": 192, "MULTICAST": 0})
    script.gemm(a, b, {**base, "BLOCK_M": 256, "BLOCK_N": 128})
    assert calls == ["stream_k", "dp2", "stream_k"]
