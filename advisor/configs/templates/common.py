# ---- shared Triton helpers --------------------------------------------------------------


@triton.jit
def _tile_coords(tile, tiles_m, tiles_n, GROUP_M: tl.constexpr):
    """Grouped tile order: GROUP_M row-tiles walk the columns together (L2 reuse of B)."""
    per_group = GROUP_M * tiles_n
    first_m = (tile // per_group) * GROUP_M
    rows = tl.minimum(tiles_m - first_m, GROUP_M)
    pid_m = first_m + (tile % per_group) % rows
    pid_n = (tile % per_group) // rows
    return pid_m, pid_n


@triton.jit
def _mac(a_ptr, b_ptr, M, N, K, stride_am, stride_ak, stride_bk, stride_bn, pid_m, pid_n,
         it_lo, it_hi, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr,
         EVEN_K: tl.constexpr):
    """fp32 accumulator of tile (pid_m, pid_n) over K-iterations [it_lo, it_hi). Rows and
    columns past M/N are wrapped once per tile (the store masks them); K is masked only in
    the last iteration when BK does not divide it."""
    rm = (pid_m * BM + tl.arange(0, BM)) % M  # wrap rows/cols: loads stay in bounds,
    rn = (pid_n * BN + tl.arange(0, BN)) % N  # the store masks them out
    rm = tl.max_contiguous(tl.multiple_of(rm, BM), BM)
    rn = tl.max_contiguous(tl.multiple_of(rn, BN), BN)
    rk = tl.arange(0, BK)
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    # whole K-iterations load unmasked; only the last, partial one (K % BK != 0) is masked
    full_hi = it_hi if EVEN_K else tl.minimum(it_hi, K // BK)
    for it in range(it_lo, full_hi):
        kk = it * BK + rk
        a = tl.load(a_ptr + rm[:, None] * stride_am + kk[None, :] * stride_ak)
        b = tl.load(b_ptr + kk[:, None] * stride_bk + rn[None, :] * stride_bn)
        acc = tl.dot(a, b, acc)
    if not EVEN_K:
        for it in range(tl.maximum(it_lo, full_hi), it_hi):
            kk = it * BK + rk
            a_ptrs = a_ptr + rm[:, None] * stride_am + kk[None, :] * stride_ak
            b_ptrs = b_ptr + kk[:, None] * stride_bk + rn[None, :] * stride_bn
            a = tl.load(a_ptrs, mask=kk[None, :] < K, other=0.0)
            b = tl.load(b_ptrs, mask=kk[:, None] < K, other=0.0)
            acc = tl.dot(a, b, acc)
    return acc


@triton.jit
def _store_tile(c_ptr, acc, M, N, stride_cm, stride_cn, pid_m, pid_n, BM: tl.constexpr,
                BN: tl.constexpr, ATOMIC: tl.constexpr):
    """Write (or atomically add, fp32) one tile, masked at the matrix edges."""
    rm = pid_m * BM + tl.arange(0, BM)
    rn = pid_n * BN + tl.arange(0, BN)
    ptrs = c_ptr + rm[:, None] * stride_cm + rn[None, :] * stride_cn
    mask = (rm[:, None] < M) & (rn[None, :] < N)
    if ATOMIC:
        tl.atomic_add(ptrs, acc, mask=mask)
    else:
        tl.store(ptrs, acc.to(c_ptr.dtype.element_ty), mask=mask)


# row-stride alignments in elements, the planner's PAD_ALIGN (whose model charges the copies):
# Triton vectorizes loads only along rows whose stride it knows (divisible by 16); TMA
# descriptors need 16-byte row strides (8 fp16/bf16 elements)
ROW_ALIGN, TMA_ALIGN = PAD_ALIGN["triton"], PAD_ALIGN["gluon"]


# where ``padded`` copies an operand for the Gluon (TMA) kernels anyway, its rows are padded to
# whole 128-byte lines (64 bf16/fp16 elements): a TMA box row of 64 elements then sits on one
# line, not two, for the same bytes copied (999 x 4865 x 8191 on an H200, Stream-K: 250 us
# with A, B and C on 128-byte rows against 310 us padded to 16 bytes; docs/verification
# round 10)
LINE_ALIGN = 64


@triton.jit
def _rows_copy_kernel(src, dst, rows, vecs, src_vecs, dst_vecs, BR: tl.constexpr,
                      BC: tl.constexpr, VEC: tl.constexpr):
    """dst[r, c] = src[r, c] over a rows x (vecs * VEC) block; the row strides are
    src_vecs and dst_vecs times VEC elements (16-byte vectors: the sizes come in VEC units
    so that Triton knows they divide by VEC and loads and stores 16 bytes at a time)."""
    r = (tl.program_id(0) * BR + tl.arange(0, BR)).to(tl.int64)
    c = tl.program_id(1) * BC + tl.arange(0, BC)
    mask = (r[:, None] < rows) & (c[None, :] < vecs * VEC)
    x = tl.load(src + r[:, None] * (src_vecs * VEC) + c[None, :], mask=mask)
    tl.store(dst + r[:, None] * (dst_vecs * VEC) + c[None, :], x, mask=mask)


def to_lines(t: torch.Tensor) -> torch.Tensor:
    """``t`` (rows on 16 bytes) copied into storage whose rows are whole 128-byte lines
    (LINE_ALIGN elements), as a view of ``t``'s shape: only the row stride differs. One
    Triton kernel of 16-byte loads and stores (torch's copy into such a view ran 9.3 us
    for 1000 x 5000 bf16 on an H200, F.pad 13.3: round 12)."""
    rows, cols = t.shape
    store = torch.empty((rows, cdiv(cols, LINE_ALIGN) * LINE_ALIGN), device=t.device,
                        dtype=t.dtype)
    vec = 16 // t.element_size()
    br, bc = 8, 512
    _rows_copy_kernel[(cdiv(rows, br), cdiv(cols, bc))](
        t, store, rows, cols // vec, t.stride(0) // vec, store.stride(0) // vec, BR=br, BC=bc,
        VEC=vec, num_warps=4)
    return store[:, :cols]


def padded(gemm_fn, align: int = ROW_ALIGN, to: int | None = None):
    """Run ``gemm_fn`` on operands whose row strides (K for A, N for B) are multiples of
    ``align`` elements: otherwise zero-pad K and/or N (a copy of the operand that needs it;
    zeros add nothing to the dot products) to a multiple of ``to`` elements (default
    ``align``) and return the M x N view. Triton specializes integer arguments on
    divisibility by 16 only, and without it every tile's loads are scalar: measured on an
    H200, K = 9000 ran at 0.28x cuBLAS against 0.94x at K = 9024."""
    to = to or align

    def run(a: torch.Tensor, b: torch.Tensor, cfg: dict) -> torch.Tensor:
        k, n = a.shape[1], b.shape[1]
        kp = k if k % align == 0 else -(-k // to) * to
        np_ = n if n % align == 0 else -(-n // to) * to
        if kp != k:
            a = torch.nn.functional.pad(a, (0, kp - k))
        if (kp, np_) != (k, n):
            b = torch.nn.functional.pad(b, (0, np_ - n, 0, kp - k))
        c = gemm_fn(a, b, cfg)
        return c if np_ == n else c[:, :n]

    return run


def sk_workspace(p: dict, cfg: dict, device) -> torch.Tensor:
    """Stream-K's fp32 partial tiles, one slot per CTA (a schedule ``p`` of its ``plan``);
    with no Stream-K tile no partial is written: one element, not a slot per CTA."""
    shape = (p["progs"], cfg["BLOCK_M"], cfg["BLOCK_N"]) if p["sk_tiles"] else (1,)
    return torch.empty(shape, device=device, dtype=torch.float32)


def sk_flags(p: dict, device) -> torch.Tensor:
    """Stream-K's per-tile counters (a schedule ``p`` of its ``plan``), zeroed; with no
    Stream-K tile (data-parallel only) the kernels never touch them: an unwritten one, so
    no memset runs."""
    if not p["sk_tiles"]:
        return torch.empty((1,), device=device, dtype=torch.int32)
    return torch.zeros((p["sk_tiles"],), device=device, dtype=torch.int32)


def cdiv(a: int, b: int) -> int:
    """ceil(a / b) of two ints, on the host: triton.cdiv is a Triton function object whose
    call costs ~7 us of Python per call (profiled on an H200 host, round 9), several per
    GEMM call."""
    return -(-a // b)


def _tiles(m: int, n: int, cfg: dict) -> tuple[int, int]:
    return cdiv(m, cfg["BLOCK_M"]), cdiv(n, cfg["BLOCK_N"])
