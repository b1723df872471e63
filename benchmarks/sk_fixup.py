"""Where the Gluon Stream-K kernel's time goes (issue 29, round 8): variants of an emitted
Stream-K script's kernel, made by patching its text, timed in a CUDA graph against the
script as it is, and one instrumented variant that records each CTA's timeline.

    python benchmarks/sk_fixup.py STREAM_K_SCRIPT [--variants a,b] [--after SCRIPT2]
        [--out rows.json] [--timeline tl.json]

Variants (each a copy of the script with its ``_sk_consumer`` changed; ``nofix`` and
``nowait`` compute wrong results on purpose and are timed only, never used):

- ``base``: the script as emitted;
- ``nofix``: no fix-up at all: no partial written, no counter, no wait, no partial read
  (the Stream-K schedule's MMA time and epilogues alone);
- ``nowait``: partials written and read, but the finisher does not wait on the counter;
- ``defer``: the writer raises its partial's counter a few iterations into its next
  segment (or after its last), not after a barrier and a fence that wait for the stores;
- ``rot``: a segment inside one tile (neither its first nor last iteration) walks its
  K-iterations rotated to start where the other CTAs' tails are at that time;
- ``dpgrid``: a data-parallel-only schedule launches at most one CTA per tile;
- ``nows``: no partials' workspace allocated where no tile is shared;
- ``plainload``: the finisher reads the partials with plain loads, not ``.cg``;
- ``selfreset``: the counters kept from call to call (per device and stream), each reset
  by its tile's finisher once it has waited, so that no memset runs before the kernel;
- ``timeline``: the script with a %globaltimer read at each step of each CTA's consumer
  (start, after its data-parallel tiles, per Stream-K segment: MMA done, wait done,
  fix-up done, tile store issued; end), written past the partials' workspace.

Also the plain persistent Gluon kernel (split-K's ``gluon_ws``, one split: the data-parallel
schedule with no Stream-K code) at the same shapes and at full-wave shapes of 48 / 96 / 132
tiles, for the time per K-iteration with fewer or all SMs busy.
"""

# ruff: noqa: E501  (the patterns are lines of the emitted scripts, kept whole)
from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from replan_table import _module, print_row  # noqa: E402
from sk_fixed import _ws_dp  # noqa: E402  (the plain persistent kernel, data-parallel)

SHAPES = [(1000, 3000, 5000), (1536, 1792, 4096), (3000, 1000, 10000), (1000, 3000, 1024)]
# full waves of the 128x256 tile (12 tiles across N = 3072): 48, 96 and 132 tiles
WAVE_SHAPES = [(512, 3072, 5056), (1024, 3072, 5056), (1408, 3072, 5056)]
TILE = (128, 256, 64, 8, 3)
SLOTS = 40  # timeline entries per CTA

_CONSUMER_HEAD = "    @gluon.jit\n    def _sk_consumer("
_KERNEL_HEAD = "    @gluon.jit\n    def sk_gemm_kernel("

NOFIX = {
    "            if hi < iters_per_tile:  # a later CTA finishes this tile: hand the partial on": "            if (hi < iters_per_tile) & (iters_per_prog < 0):",
    "                if lo > 0:  # wait for and add the earlier CTAs' partials": "                if (lo > 0) & (iters_per_prog < 0):",
}
NOWAIT = {
    'while gl.atomic_add(flag_ptr + sk_tile, 0, sem="acquire") < pid - p_first:': 'while (gl.atomic_add(flag_ptr + sk_tile, 0, sem="acquire") < pid - p_first)'
    " & (iters_per_prog < 0):",
}

_WAIT = (
    '                    while gl.atomic_add(flag_ptr + sk_tile, 0, sem="acquire")'
    " < pid - p_first:\n                        pass\n"
)
SELFRESET = {
    '    return torch.zeros((p["sk_tiles"],), device=device, dtype=torch.int32)': "    key = (str(device), torch.cuda.current_stream(device).cuda_stream)\n"
    "    flags = _SK_FLAGS.get(key)\n"
    '    if flags is None or flags.numel() < p["sk_tiles"]:\n'
    '        flags = torch.zeros((p["sk_tiles"],), device=device, dtype=torch.int32)\n'
    "        if not torch.cuda.is_current_stream_capturing():\n"
    "            _SK_FLAGS[key] = flags\n"
    "    return flags\n\n\n_SK_FLAGS: dict = {}",
    _WAIT: _WAIT + '                    gl.atomic_xchg(flag_ptr + sk_tile, 0, sem="relaxed")\n',
}

# deferred release: the writer's partial is stored, and its counter raised a few
# iterations into the CTA's next segment (the stores drain meanwhile) instead of after a
# barrier and a fence that wait for them
_CONSUME_RELEASE = """    @gluon.jit
    def _consume_release(a_ring, b_ring, ready, empty, lo, hi, it, acc, flag_ptr, pending):
        STAGES: gl.constexpr = a_ring.type.shape[0]
        at = lo + gl.minimum(hi - lo, 4) - 1
        for ki in range(lo, hi):
            s = it % STAGES
            mbarrier.wait(ready.index(s), (it // STAGES) & 1)
            acc = warpgroup_mma(a_ring.index(s), b_ring.index(s), acc, is_async=True)
            acc = warpgroup_mma_wait(num_outstanding=1, deps=(acc,))
            mbarrier.arrive(empty.index((it + STAGES - 1) % STAGES), count=1, pred=ki > lo)
            if (ki == at) & (pending >= 0):
                gl.thread_barrier()
                gl.atomic_add(flag_ptr + pending, 1, sem="release")
            it += 1
        acc = warpgroup_mma_wait(num_outstanding=0, deps=(acc,))
        mbarrier.arrive(empty.index((it + STAGES - 1) % STAGES), count=1, pred=hi > lo)
        return acc, it

"""
DEFER = {
    _CONSUMER_HEAD: _CONSUME_RELEASE + _CONSUMER_HEAD,
    "        start, end, first, last = _sk_share(iters_per_tile, iters_per_prog, extra_iters)\n"
    "        for step in range(0, last - first + 1):\n"
    "            sk_tile, lo, hi = _sk_segment(step, start, end, last, iters_per_tile)\n"
    "            pid_m, pid_n = _ws_tile(dp_tiles + sk_tile, tiles_m, tiles_n, GROUP_M)\n"
    "            acc = gl.zeros((BM, BN), dtype=gl.float32, layout=layout)\n"
    "            acc, it = _consume(a_ring, b_ring, ready, empty, lo, hi, it, acc)\n"
    "            if hi < iters_per_tile:  # a later CTA finishes this tile: hand the partial on\n"
    "                offs = _sk_offsets(BM, BN, layout)\n"
    "                gl.store(ws_ptr + pid * BM * BN + offs, acc)\n"
    "                gl.thread_barrier()  # (every warp's part is written before the release)\n"
    '                gl.atomic_add(flag_ptr + sk_tile, 1, sem="release")\n': "        start, end, first, last = _sk_share(iters_per_tile, iters_per_prog, extra_iters)\n"
    "        pending = -1\n"
    "        for step in range(0, last - first + 1):\n"
    "            sk_tile, lo, hi = _sk_segment(step, start, end, last, iters_per_tile)\n"
    "            pid_m, pid_n = _ws_tile(dp_tiles + sk_tile, tiles_m, tiles_n, GROUP_M)\n"
    "            acc = gl.zeros((BM, BN), dtype=gl.float32, layout=layout)\n"
    "            acc, it = _consume_release(a_ring, b_ring, ready, empty, lo, hi, it, acc,\n"
    "                                       flag_ptr, pending)\n"
    "            pending = -1\n"
    "            if hi < iters_per_tile:  # a later CTA finishes this tile: hand the partial on\n"
    "                offs = _sk_offsets(BM, BN, layout)\n"
    "                gl.store(ws_ptr + pid * BM * BN + offs, acc)\n"
    "                pending = sk_tile\n",
    "                _store(c_desc, c_smem, acc, pid_m * BM, pid_n * BN)\n"
    "        tma.store_wait(pendings=0)\n\n    @gluon.jit\n    def sk_gemm_kernel(": "                _store(c_desc, c_smem, acc, pid_m * BM, pid_n * BN)\n"
    "        if pending >= 0:  # (no segment after the partial's)\n"
    "            gl.thread_barrier()\n"
    '            gl.atomic_add(flag_ptr + pending, 1, sem="release")\n'
    "        tma.store_wait(pendings=0)\n\n    @gluon.jit\n    def sk_gemm_kernel(",
}
# rotated middles: a segment inside one tile (neither its first nor its last iteration)
# walks its K-iterations from where the other CTAs' tails are at the same time
_PRODUCE_ROT = """    @gluon.jit
    def _produce_rot(a_desc, b_desc, a_ring, b_ring, ready, empty, pid_m, pid_n, lo, hi, it,
                     rot):
        BM: gl.constexpr = a_desc.block_type.shape[0]
        BK: gl.constexpr = a_desc.block_type.shape[1]
        BN: gl.constexpr = b_desc.block_type.shape[1]
        STAGES: gl.constexpr = a_ring.type.shape[0]
        nbytes: gl.constexpr = a_desc.block_type.nbytes + b_desc.block_type.nbytes
        n = hi - lo
        for j in range(0, n):
            ki = lo + (j + rot) % n
            s = it % STAGES
            mbarrier.wait(empty.index(s), ((it // STAGES) & 1) ^ 1)
            mbarrier.expect(ready.index(s), nbytes)
            tma.async_copy_global_to_shared(a_desc, [pid_m * BM, ki * BK], ready.index(s),
                                            a_ring.index(s))
            tma.async_copy_global_to_shared(b_desc, [ki * BK, pid_n * BN], ready.index(s),
                                            b_ring.index(s))
            it += 1
        return it

"""
_SK_PRODUCER_LOOP = (
    "        start, end, first, last = _sk_share(iters_per_tile, iters_per_prog, extra_iters)\n"
    "        for step in range(0, last - first + 1):\n"
    "            sk_tile, lo, hi = _sk_segment(step, start, end, last, iters_per_tile)\n"
    "            pid_m, pid_n = _ws_tile(dp_tiles + sk_tile, tiles_m, tiles_n, GROUP_M)\n"
    "            it = _produce(a_desc, b_desc, a_ring, b_ring, ready, empty, pid_m, pid_n, lo, hi,\n"
    "                          it)\n"
)
ROT = {
    "    @gluon.jit\n    def _sk_producer(": _PRODUCE_ROT + "    @gluon.jit\n    def _sk_producer(",
    _SK_PRODUCER_LOOP: "        start, end, first, last = _sk_share(iters_per_tile, iters_per_prog, extra_iters)\n"
    "        it_sk = it\n"
    "        for step in range(0, last - first + 1):\n"
    "            sk_tile, lo, hi = _sk_segment(step, start, end, last, iters_per_tile)\n"
    "            pid_m, pid_n = _ws_tile(dp_tiles + sk_tile, tiles_m, tiles_n, GROUP_M)\n"
    "            n = hi - lo\n"
    "            rot = 0\n"
    "            if (lo > 0) & (hi < iters_per_tile):\n"
    "                front = iters_per_tile - iters_per_prog\n"
    "                rot = ((it - it_sk + front - lo) % n + n) % n\n"
    "            it = _produce_rot(a_desc, b_desc, a_ring, b_ring, ready, empty, pid_m, pid_n, lo,\n"
    "                              hi, it, rot)\n",
}

TIMELINE_CONSUMER = """    @gluon.jit
    def _tl_mark(ws_ptr, slot, x, NUM_PROGS, BM: gl.constexpr, BN: gl.constexpr):
        t = gl.inline_asm_elementwise("mov.u32 $0, %globaltimer_lo;", "=r,r", [x],
                                      dtype=gl.int32, is_pure=False, pack=1)
        base = NUM_PROGS * BM * BN + gl.program_id(0) * SLOTS_PER_CTA
        gl.store(ws_ptr + base + slot, t.to(gl.float32, bitcast=True))

    @gluon.jit
    def _sk_consumer(c_desc, ws_ptr, flag_ptr, a_ring, b_ring, ready, empty, c_smem, tiles_m,
                     tiles_n, dp_tiles, iters_per_tile, iters_per_prog, extra_iters,
                     NUM_PROGS, GROUP_M: gl.constexpr):
        BM: gl.constexpr = c_desc.block_type.shape[0]
        BN: gl.constexpr = c_desc.block_type.shape[1]
        layout: gl.constexpr = gl.NVMMADistributedLayout(
            version=[3, 0], warps_per_cta=[gl.num_warps(), 1], instr_shape=[16, BN, 16])
        pid = gl.program_id(0)
        _tl_mark(ws_ptr, 0, pid, NUM_PROGS, BM, BN)
        it = 0
        for tile in range(pid, dp_tiles, NUM_PROGS):
            pid_m, pid_n = _ws_tile(tile, tiles_m, tiles_n, GROUP_M)
            acc = gl.zeros((BM, BN), dtype=gl.float32, layout=layout)
            acc, it = _consume(a_ring, b_ring, ready, empty, 0, iters_per_tile, it, acc)
            _store(c_desc, c_smem, acc, pid_m * BM, pid_n * BN)
        _tl_mark(ws_ptr, 1, pid, NUM_PROGS, BM, BN)
        start, end, first, last = _sk_share(iters_per_tile, iters_per_prog, extra_iters)
        for step in range(0, last - first + 1):
            sk_tile, lo, hi = _sk_segment(step, start, end, last, iters_per_tile)
            pid_m, pid_n = _ws_tile(dp_tiles + sk_tile, tiles_m, tiles_n, GROUP_M)
            acc = gl.zeros((BM, BN), dtype=gl.float32, layout=layout)
            acc, it = _consume(a_ring, b_ring, ready, empty, lo, hi, it, acc)
            s = 2 + 5 * gl.minimum(step, 5)
            _tl_mark(ws_ptr, s, pid, NUM_PROGS, BM, BN)
            if hi < iters_per_tile:
                offs = _sk_offsets(BM, BN, layout)
                gl.store(ws_ptr + pid * BM * BN + offs, acc)
                gl.thread_barrier()
                gl.atomic_add(flag_ptr + sk_tile, 1, sem="release")
                _tl_mark(ws_ptr, s + 1, pid, NUM_PROGS, BM, BN)
                _tl_mark(ws_ptr, s + 2, pid, NUM_PROGS, BM, BN)
            else:
                if lo > 0:
                    it0 = sk_tile * iters_per_tile
                    big = extra_iters * (iters_per_prog + 1)
                    if it0 < big:
                        p_first = it0 // (iters_per_prog + 1)
                    else:
                        p_first = extra_iters + (it0 - big) // gl.maximum(iters_per_prog, 1)
                    while gl.atomic_add(flag_ptr + sk_tile, 0, sem="acquire") < pid - p_first:
                        pass
                    _tl_mark(ws_ptr, s + 1, pid, NUM_PROGS, BM, BN)
                    offs = _sk_offsets(BM, BN, layout)
                    for p in range(p_first, pid):
                        acc += gl.load(ws_ptr + p * BM * BN + offs, cache_modifier=".cg")
                    _tl_mark(ws_ptr, s + 2, pid, NUM_PROGS, BM, BN)
                _store(c_desc, c_smem, acc, pid_m * BM, pid_n * BN)
            _tl_mark(ws_ptr, s + 3, pid, NUM_PROGS, BM, BN)
        tma.store_wait(pendings=0)
        _tl_mark(ws_ptr, 32, pid, NUM_PROGS, BM, BN)

"""
TIMELINE_WS = {
    '    ws = torch.empty((p["progs"], cfg["BLOCK_M"], cfg["BLOCK_N"]), device=a.device,': '    ws = torch.empty((p["progs"] + 1, cfg["BLOCK_M"], cfg["BLOCK_N"]), device=a.device,',
    "    flags = sk_flags(p, a.device)\n    sk_gemm_kernel": "    global LAST_WS\n    LAST_WS = ws\n    flags = sk_flags(p, a.device)\n    sk_gemm_kernel",
}


def _patched(text: str, name: str) -> str:
    """The script's text for variant ``name`` (every pattern must be found once)."""

    def sub(src: str, table: dict) -> str:
        for old, new in table.items():
            if src.count(old) != 1:
                raise SystemExit(f"variant {name}: pattern not found once: {old[:60]!r}")
            src = src.replace(old, new)
        return src

    if name == "base":
        return text
    if name == "nofix":
        return sub(text, NOFIX)
    if name == "nowait":
        return sub(text, NOWAIT)
    if name == "defer":
        return sub(text, DEFER)
    if name == "rot":
        return sub(text, ROT)
    if name == "defer+rot":
        return sub(sub(text, DEFER), ROT)
    if name == "dpgrid":  # a data-parallel-only schedule launches one CTA per tile at most
        return sub(
            text,
            {
                "    sk_iters = (tiles - dp_tiles) * iters_per_tile\n": "    if dp_tiles == tiles:\n        progs = min(progs, tiles)\n    sk_iters = (tiles - dp_tiles) * iters_per_tile\n"
            },
        )
    if name == "nows":  # no partials' workspace where no tile is shared
        return sub(
            text,
            {
                '    ws = torch.empty((p["progs"], cfg["BLOCK_M"]': '    ws = torch.empty((p["progs"] if p["sk_tiles"] else 1, cfg["BLOCK_M"]'
            },
        )
    if name == "plainload":
        return sub(
            text,
            {
                'offs, cache_modifier=".cg")\n                _store(': "offs)\n                _store("
            },
        )
    if name == "selfreset":
        return sub(text, SELFRESET)
    if name == "timeline":
        head, rest = text.split(_CONSUMER_HEAD, 1)
        _, tail = rest.split(_KERNEL_HEAD, 1)
        text = head + TIMELINE_CONSUMER.replace("SLOTS_PER_CTA", str(SLOTS)) + _KERNEL_HEAD + tail
        return sub(text, TIMELINE_WS)
    raise SystemExit(f"unknown variant {name}")


def _graph_ms(fn, rounds: int = 3) -> float:
    import triton.testing

    return statistics.median(
        triton.testing.do_bench_cudagraph(fn, rep=60, return_mode="median") for _ in range(rounds)
    )


def _cfg(mod, policy: int, sms: int) -> dict:
    bm, bn, bk, warps, stages = TILE
    return {**mod.CONFIG, "BLOCK_M": bm, "BLOCK_N": bn, "BLOCK_K": bk, "num_warps": warps,
            "num_stages": stages, "GROUP_M": 8, "NUM_PROGS": sms, "SK_TILES": policy,
            "GLUON": 1}  # fmt: skip


def timeline(mod, x, y, cfg) -> dict:
    """One launch of the instrumented kernel: per CTA its marks (us from the first start)."""
    import torch

    mod.gemm(x, y, cfg)  # compiled and warm
    torch.cuda.synchronize()
    mod.gemm(x, y, cfg)
    torch.cuda.synchronize()
    ws = mod.LAST_WS
    progs = ws.shape[0] - 1
    raw = ws[progs].reshape(-1)[: progs * SLOTS].view(torch.int32).reshape(progs, SLOTS)
    raw = raw.to(torch.int64).cpu()
    t0 = int(raw[:, 0].min())
    rel = ((raw - t0) % (1 << 32)).double() / 1e3
    p = mod.plan(x.shape[0], y.shape[1], x.shape[1], cfg)
    ipt, per, extra = p["iters_per_tile"], p["iters_per_prog"], p["extra_iters"]
    ctas = []
    for pid in range(progs):
        start = pid * per + min(pid, extra)
        end = start + per + (pid < extra)
        first, last = start // ipt, -(-end // ipt) - 1
        segs = []
        prev = float(rel[pid, 1])
        for step in range(max(0, last - first + 1)):
            tile = last - step
            lo, hi = max(start - tile * ipt, 0), min(end - tile * ipt, ipt)
            s = 2 + 5 * min(step, 5)
            mma, waited, fixed, stored = (float(rel[pid, s + i]) for i in range(4))
            role = "writer" if hi < ipt else ("finisher" if lo > 0 else "whole")
            segs.append({"tile": tile, "iters": hi - lo, "role": role,
                         "mma_us": mma - prev,
                         "wait_us": waited - mma if role == "finisher" else 0.0,
                         "fix_us": fixed - (waited if role == "finisher" else mma),
                         "store_us": stored - fixed, "end": stored})  # fmt: skip
            prev = stored
        ctas.append({"pid": pid, "start": float(rel[pid, 0]), "dp_end": float(rel[pid, 1]),
                     "end": float(rel[pid, 32]), "segments": segs})  # fmt: skip
    return {"ipt": ipt, "dp_tiles": p["dp_tiles"], "sk_tiles": p["sk_tiles"],
            "iters_per_prog": per, "ctas": ctas}  # fmt: skip


def summarize(tl: dict) -> str:
    ctas = tl["ctas"]
    ends = sorted(c["end"] for c in ctas)
    starts = [c["start"] for c in ctas]
    segs = [s for c in ctas for s in c["segments"]]
    fin = [s for s in segs if s["role"] == "finisher"]
    wri = [s for s in segs if s["role"] == "writer"]
    iters = sum(s["iters"] for s in segs)
    mma = sum(s["mma_us"] for s in segs)
    dp = [c["dp_end"] - c["start"] for c in ctas if c["dp_end"] - c["start"] > 0.5]

    def st(v):
        return f"mean {statistics.mean(v):.2f} max {max(v):.2f}" if v else "-"

    last = max(ctas, key=lambda c: c["end"])
    out = [
        f"  start spread {max(starts) - min(starts):.2f} us; end: median {ends[len(ends) // 2]:.2f}"
        f" max {ends[-1]:.2f} us (CTA {last['pid']}: "
        + ", ".join(
            f"{s['role']} t{s['tile']} {s['iters']}it mma {s['mma_us']:.1f} wait "
            f"{s['wait_us']:.1f} fix {s['fix_us']:.1f} store {s['store_us']:.1f}"
            for s in last["segments"]
        )
        + ")",
        f"  data-parallel tile per CTA: {st(dp)} us"
        + (f" ({statistics.mean(dp) / tl['ipt']:.3f} us/iter)" if dp else ""),
        f"  Stream-K MMA: {mma / max(iters, 1):.3f} us/iter over {iters} iters; writers' store "
        f"{st([s['fix_us'] for s in wri])} us; finishers' wait {st([s['wait_us'] for s in fin])}"
        f" us, partial reads {st([s['fix_us'] for s in fin])} us; tile store "
        f"{st([s['store_us'] for s in segs])} us",
    ]
    return "\n".join(out)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("script")
    ap.add_argument("--out")
    ap.add_argument("--timeline")
    ap.add_argument("--after", help="another emitted Stream-K script, timed as variant 'after'")
    ap.add_argument("--variants", default="base,nofix,nowait,selfreset,timeline")
    a = ap.parse_args()
    import torch

    text = Path(a.script).read_text()
    tmp = Path(tempfile.mkdtemp(prefix="sk_fixup_"))
    mods = {}
    for name in a.variants.split(","):
        path = tmp / f"sk_{name}.py"
        path.write_text(_patched(text, name))
        mods[name] = _module(path)
    if a.after:
        mods["after"] = _module(Path(a.after))
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    warm = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16)
    _graph_ms(lambda: warm @ warm)
    rows, timelines = [], []
    for m, n, k in SHAPES + WAVE_SHAPES:
        g = torch.Generator(device="cpu").manual_seed(0)
        x = torch.randn(m, k, generator=g).to("cuda", torch.bfloat16)
        y = torch.randn(k, n, generator=g).to("cuda", torch.bfloat16)
        ref = (x.float() @ y.float()).double()
        row: dict = {"M": m, "N": n, "K": k}
        runs = {"cublas": (lambda x, y, cfg: torch.matmul(x, y), None)}
        runs["plain persistent"] = (_ws_dp(mods["base"], sms), _cfg(mods["base"], 0, sms))
        if (m, n, k) in SHAPES:
            for name, mod in mods.items():
                if name == "timeline":
                    continue
                for policy in (
                    (0, -1)
                    if name in ("base", "selfreset", "plainload", "after")
                    else (0,)
                    if name in ("dpgrid", "nows")
                    else (-1,)
                ):
                    runs[f"{name} SK_TILES={policy}"] = (mod.gemm, _cfg(mod, policy, sms))
        timed = {}
        for label, (fn, cfg) in runs.items():
            try:
                err = float((fn(x, y, cfg).double() - ref).norm() / ref.norm())
                row[f"{label} rel_error"] = err
                if not err <= 1e-2 and not label.startswith(("nofix", "nowait")):
                    row[label] = f"wrong ({err:.1e})"
                    continue
                timed[label] = []
            except Exception as exc:  # reported, not hidden
                row[label] = f"{type(exc).__name__}: {str(exc)[:200]}"
        for _ in range(3):  # interleaved rounds: a drift of the clocks hits every config
            for label in timed:
                fn, cfg = runs[label]
                timed[label].append(
                    _graph_ms(lambda fn=fn, cfg=cfg, x=x, y=y: fn(x, y, cfg), rounds=1) * 1e3
                )
        for label, t in timed.items():
            row[label] = statistics.median(t)
        row["cublas_us"] = row.pop("cublas", None)
        if (m, n, k) in SHAPES and "timeline" in mods:
            for policy in (0, -1):
                try:
                    tl = timeline(mods["timeline"], x, y, _cfg(mods["timeline"], policy, sms))
                    tl.update(M=m, N=n, K=k, policy=policy)
                    timelines.append(tl)
                    print(f"timeline {m}x{n}x{k} SK_TILES={policy}:\n{summarize(tl)}", flush=True)
                except Exception as exc:
                    print(f"timeline {m}x{n}x{k} SK_TILES={policy}: {type(exc).__name__}: "
                          f"{str(exc)[:300]}", flush=True)  # fmt: skip
        rows.append(row)
        print_row(row)
    if a.out:
        Path(a.out).write_text(json.dumps(rows, indent=1))
    if a.timeline:
        Path(a.timeline).write_text(json.dumps(timelines))


if __name__ == "__main__":
    main()
