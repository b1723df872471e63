"""GEMM problem shapes, GEMM evidence and tile sizes for kernel launches. Never guessed.

Per launch, best first (``shape_source``):
  1. ``nvtx``: an NVTX/annotation range of a matrix-multiply op with shapes (PyTorch
     ``emit_nvtx(record_shapes=True)``: ``aten::mm, ..., sizes = [[M, K], [K, N]]``), the
     innermost one open on the launching thread when the kernel was launched;
  2. ``op``: such an op range without sizes (the op says GEMM, the shape is unknown);
  3. ``--shape``: ``--shape PATTERN=MxNxK``, PATTERN (a regex) searched in the kernel name or
     its region, used only where some tile reproduces the launch's grid (else a warning);
  4. ``--gemm``: ``--gemm PATTERN``: the user says these kernels are GEMMs (no shape);
  5. nothing: M, N, K stay NaN and findings say what is missing.
Tile sizes come from the kernel name (``_128x256x64_``, ``tilesize256x128x8``,
``nvjet_..._192x192_64x3``) or, for a 2-D grid with a known shape, from the grid itself.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd

from advisor.data import regex, regex_list, text_matches
from advisor.errors import AdvisorInputError

TILES = (16, 32, 64, 128, 256, 512)  # power-of-two output tiles tried against a grid
_NONE = np.array(None, dtype=object)  # (np.where's missing value: None, typed as an array)


@dataclass(frozen=True)
class ShapeOption:
    """One ``--shape PATTERN=MxNxK`` value."""

    pattern: re.Pattern[str]
    m: int
    n: int
    k: int

    @classmethod
    def parse(cls, text: str) -> ShapeOption:
        match = re.fullmatch(r"(.+)=(\d+)[xX](\d+)[xX](\d+)", text.strip())
        if not match:
            raise AdvisorInputError(
                None, f"--shape {text!r}: expected PATTERN=MxNxK, e.g. 'tiled_gemm=896x4864x8192'"
            )
        m, n, k = (int(x) for x in match.groups()[1:])
        if min(m, n, k) <= 0 or max(m, n, k) > 1 << 24:
            raise AdvisorInputError(None, f"--shape {text!r}: M, N, K must be 1 .. 16777216")
        try:
            pattern = re.compile(match.group(1))
        except re.error as exc:
            raise AdvisorInputError(None, f"--shape {text!r}: bad pattern: {exc}") from None
        return cls(pattern, m, n, k)


@dataclass(frozen=True)
class GemmOption:
    """One ``--gemm PATTERN`` value: kernels whose name or region PATTERN matches are
    GEMMs (the user's word; no shape)."""

    pattern: re.Pattern[str]

    @classmethod
    def parse(cls, text: str) -> GemmOption:
        if not text.strip():
            raise AdvisorInputError(None, "--gemm: expected a PATTERN (regex on kernel names)")
        try:
            return cls(re.compile(text))
        except re.error as exc:
            raise AdvisorInputError(None, f"--gemm {text!r}: bad pattern: {exc}") from None


def mnk_from_sizes(op: str, sizes: list) -> tuple[int, int, int, int] | None:
    """(batch, M, N, K) of one aten op from its recorded input sizes, or None."""
    try:
        if op in ("addmm", "baddbmm"):
            sizes = sizes[1:]
        a, b = sizes[0], sizes[1]
        if op == "linear":  # input [..., K], weight [N, K]
            m = int(np.prod(a[:-1])) if len(a) > 1 else 1
            return 1, m, int(b[0]), int(b[1])
        if len(a) == 2 and len(b) == 2 and a[1] == b[0]:
            return 1, int(a[0]), int(b[1]), int(a[1])
        if len(a) == 3 and len(b) == 3 and a[2] == b[1]:
            return int(a[0]), int(a[1]), int(b[2]), int(a[2])
    except (IndexError, TypeError, ValueError):
        return None
    return None


def nvtx_shapes(nvtx: pd.DataFrame) -> pd.DataFrame:
    """Matrix-multiply op ranges: tid, start, end, batch, m, n, k (NaN when the range text
    holds no usable sizes), op."""
    cols = ["tid", "start", "end", "batch", "m", "n", "k", "op"]
    if nvtx.empty:
        return pd.DataFrame(columns=cols)
    codes, texts = pd.factorize(nvtx["text"])  # each distinct text parsed once
    texts = pd.Series(texts, dtype=object)
    ops = texts.str.extract(regex("gemm_op"))["op"]
    sizes = texts.str.extract(regex("gemm_op_sizes"))["sizes"].where(ops.notna())
    parsed = {}
    for op, size in (
        pd.DataFrame({"op": ops, "s": sizes}).dropna().drop_duplicates().itertuples(index=False)
    ):
        try:  # once per distinct (op, sizes): texts differ only by op ids
            parsed[(op, size)] = mnk_from_sizes(op, ast.literal_eval(size))
        except (ValueError, SyntaxError):
            parsed[(op, size)] = None
    dims = np.full((len(texts), 4), np.nan)
    for i, (op, size) in enumerate(zip(ops, sizes, strict=True)):
        mnk = parsed.get((op, size)) if isinstance(size, str) else None
        if mnk:
            dims[i] = mnk
    keep = (codes >= 0) & ops.notna().to_numpy()[np.maximum(codes, 0)]
    rows = nvtx[keep]
    at = codes[keep]
    out = pd.DataFrame(
        {
            "tid": rows["tid"].to_numpy(),
            "start": rows["start"].to_numpy(),
            "end": rows["end"].to_numpy(),
            "batch": dims[at, 0],
            "m": dims[at, 1],
            "n": dims[at, 2],
            "k": dims[at, 3],
            "op": ops.to_numpy(object)[at],
        }
    )
    return out[cols].sort_values(["tid", "start"], ignore_index=True)


SHAPE_COLUMNS = ["batch", "m", "n", "k", "shape_source"]


def tile_from_name(names: pd.Series) -> pd.DataFrame:
    """tile_m, tile_n, tile_k parsed from kernel names (NaN where the name has none); each
    distinct name parsed once."""
    codes, uniq = pd.factorize(names)  # (-1 for a missing name: the last, all-NaN row)
    tiles = np.full((len(uniq) + 1, 3), np.nan)
    patterns = regex_list("tile_names")
    for i, name in enumerate(uniq):
        text = str(name)
        for rx in patterns:
            m = rx.search(text)
            if m:
                g = [int(x) for x in m.groups()]
                tiles[i] = (g[0], g[1], g[2] if len(g) > 2 else np.nan)
                break
    return pd.DataFrame(tiles[codes], index=names.index, columns=["tile_m", "tile_n", "tile_k"])


def tile_from_grid(m, n, grid_x, grid_y) -> tuple[np.ndarray, np.ndarray]:
    """Power-of-two tile (tile_m, tile_n) that reproduces a 2-D grid for an M x N output:
    the smallest 2^i >= 16 with ceil(M / 2^i) == grid_x (likewise N, grid_y); NaN if none."""
    m, n = np.asarray(m, float), np.asarray(n, float)
    gx, gy = np.asarray(grid_x, float), np.asarray(grid_y, float)
    outs = []
    for size, grid in ((m, gx), (n, gy)):
        tile = np.full(size.shape, np.nan)
        for p in (512, 256, 128, 64, 32, 16):  # smallest fitting wins: iterate downwards
            fits = np.ceil(size / p) == grid
            tile = np.where(fits, p, tile)
        outs.append(tile)
    return outs[0], outs[1]


def add_tile_columns(k: pd.DataFrame) -> None:
    """Add a kernel-group table's GEMM quantities (columns m, n, k, batch, grid_x/y, name,
    launches, total_ns, peak_tflops in): tile_m/tile_n/tile_k and tile_source (the tile
    read from the name, else the power-of-two tile its grid implies), tiles (output tiles
    per launch: batch * ceil(m / tile_m) * ceil(n / tile_n)), k_iters (ceil(k / tile_k)),
    tflops (2*M*N*K*batch per launch over its time, TFLOP/s) and tflops_fraction (of
    peak_tflops). NaN where a shape or tile is unknown."""
    named = tile_from_name(k["name"])
    gm, gn = tile_from_grid(k["m"], k["n"], k["grid_x"], k["grid_y"])
    k["tile_m"] = named["tile_m"].fillna(pd.Series(gm, index=k.index))
    k["tile_n"] = named["tile_n"].fillna(pd.Series(gn, index=k.index))
    k["tile_k"] = named["tile_k"]
    k["tile_source"] = np.where(
        named["tile_m"].notna(), "name", np.where(k["tile_m"].notna(), "grid", _NONE)
    )
    k["tiles"] = k["batch"] * np.ceil(k["m"] / k["tile_m"]) * np.ceil(k["n"] / k["tile_n"])
    k["k_iters"] = np.ceil(k["k"] / k["tile_k"])
    flops = 2.0 * k["batch"] * k["m"] * k["n"] * k["k"] * k["launches"]
    k["tflops"] = flops / k["total_ns"] / 1e3
    k["tflops_fraction"] = k["tflops"] / k["peak_tflops"]


def grid_fits(m: float, n: float, grid: tuple[int, int, int], tile=None) -> bool:
    """Whether an M x N output tiled by some power-of-two tile (or the named ``tile``)
    gives this grid: (ceil(M/tm), ceil(N/tn)) as x/y either way round, or their product as
    a 1-D grid (z is free: batch or split-K)."""
    gx, gy, _ = grid
    pairs = [tile] if tile is not None else [(a, b) for a in TILES for b in TILES]
    for tm, tn in pairs:
        tiles_m, tiles_n = -(-int(m) // tm), -(-int(n) // tn)
        if (gx, gy) in ((tiles_m, tiles_n), (tiles_n, tiles_m)):
            return True
        if gy == 1 and gx == tiles_m * tiles_n:
            return True
    return False


def launch_shapes(
    launches: pd.DataFrame,
    found: pd.DataFrame,
    options: Sequence[ShapeOption] = (),
    gemms: Sequence[GemmOption] = (),
) -> tuple[np.ndarray, pd.DataFrame, list[str]]:
    """(shape id per launch, -1 for none; one row per distinct shape: batch, m, n, k,
    shape_source; warnings). ``found``: the trace's nvtx_shapes; ``launches`` has name,
    region, comm, persistent, ``shape_range`` where ``found`` has rows (the row of
    ``found`` open on the launching thread at the launch call, -1 for none:
    gaps.attribute_gaps), and grid_x/y/z where ``options`` are given (only they read the
    grids). See the module doc for the order of sources.

    A --shape option is used only for launches whose grid some tile reproduces (persistent
    kernels, whose grid is the machine's, are not checked); each kernel grid it matched by
    name but does not fit gets one warning. Launches of comm kernels never get a shape.
    """
    dims = ["batch", "m", "n", "k"]
    candidates = pd.concat(
        [found[dims].assign(shape_source=np.where(found["m"].notna(), "nvtx", "op")),
         pd.DataFrame([(1, o.m, o.n, o.k, "--shape") for o in options], columns=SHAPE_COLUMNS),
         pd.DataFrame([(np.nan,) * 4 + ("--gemm",)] if gemms else [], columns=SHAPE_COLUMNS)],
        ignore_index=True,
    )  # fmt: skip
    candidates[dims] = candidates[dims].astype(float)
    # equal shapes share one id: a kernel group is one shape, not one NVTX range instance
    # (the shape ids int32 throughout: 10M launches, 76 MB less a launch-long array)
    key = candidates.groupby(SHAPE_COLUMNS, sort=False, dropna=False).ngroup().to_numpy()
    key = key.astype(np.int32)
    table = candidates.iloc[np.unique(key, return_index=True)[1]].reset_index(drop=True)
    if len(found) and len(key):
        ids = launches["shape_range"].to_numpy()
        ids = np.where(ids >= 0, key[np.maximum(ids, 0)], np.int32(-1))
    else:
        ids = np.full(len(launches), -1, dtype=np.int32)
    comm = launches["comm"].to_numpy(bool)
    ids[comm] = -1
    warnings = []
    for i, opt in enumerate(options):
        hit = _named(launches, opt.pattern) & (ids < 0) & ~comm
        fits = _fitting_grids(launches, hit, opt)
        for name, grid in sorted(fits["misfit"]):
            warnings.append(
                f"--shape {opt.pattern.pattern}={opt.m}x{opt.n}x{opt.k} not used for {name} "
                f"with grid {grid[0]}x{grid[1]}x{grid[2]}: no tile reproduces that grid for "
                f"M={opt.m} N={opt.n} (give that launch its own --shape)"
            )
        ids[hit & fits["ok"]] = key[len(found) + i]
    if gemms:
        hit = np.zeros(len(launches), dtype=bool)
        for g in gemms:
            hit |= _named(launches, g.pattern)
        ids[hit & (ids < 0) & ~comm] = key[-1]
    return ids.astype(np.int32, copy=False), table, warnings


def _named(launches: pd.DataFrame, pattern: re.Pattern[str]) -> np.ndarray:
    """Launches whose kernel name or region the pattern matches."""
    return (
        text_matches(launches["name"], pattern) | text_matches(launches["region"], pattern)
    ).to_numpy()


def _fitting_grids(launches: pd.DataFrame, hit: np.ndarray, opt: ShapeOption) -> dict:
    """For the ``hit`` launches: ``ok`` (per launch: the shape fits its grid, or the kernel
    is persistent) and ``misfit`` (the (name, grid) pairs it does not fit)."""
    ok = np.zeros(len(launches), dtype=bool)
    misfit: set[tuple[str, tuple[int, int, int]]] = set()
    if not hit.any():
        return {"ok": ok, "misfit": misfit}
    rows = np.flatnonzero(hit)
    sub = launches.iloc[rows]
    grids = sub[["grid_x", "grid_y", "grid_z"]].to_numpy(np.float64)
    persistent = sub["persistent"].to_numpy(bool)
    names = sub["name"].astype(str).to_numpy()
    named = tile_from_name(pd.Series(pd.unique(names)))
    tile_of = dict(zip(pd.unique(names), zip(named["tile_m"], named["tile_n"], strict=True),
                       strict=True))  # fmt: skip
    verdict = {}
    for j, row in enumerate(rows):
        if persistent[j] or np.isnan(grids[j]).any():
            ok[row] = True
            continue
        gx, gy, gz = (int(g) for g in grids[j])
        grid = (gx, gy, gz)
        cache_key = (names[j], grid)
        if cache_key not in verdict:
            tm, tn = tile_of[names[j]]
            tile = None if np.isnan(tm) or np.isnan(tn) else (int(tm), int(tn))
            verdict[cache_key] = grid_fits(opt.m, opt.n, grid, tile)
        ok[row] = verdict[cache_key]
        if not ok[row]:
            misfit.add(cache_key)
    return {"ok": ok, "misfit": misfit}
