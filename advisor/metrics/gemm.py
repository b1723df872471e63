"""GEMM problem shapes and tile sizes for kernel launches. Never guessed.

Shape sources, best first:
  1. NVTX ranges with shapes (PyTorch ``emit_nvtx(record_shapes=True)``: ``aten::mm, ...,
     sizes = [[M, K], [K, N]]``): the innermost mm-like range open on the launching thread
     when the kernel was launched;
  2. ``--shape PATTERN=MxNxK``: PATTERN (a regex) searched in the kernel name or its region;
  3. nothing: M, N, K stay NaN and findings say what is missing.
Tile sizes come from the kernel name (``_128x256x64_``, ``tilesize256x128x8``,
``nvjet_..._192x192_64x3``) or, for a 2-D grid with a known shape, from the grid itself.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass

import numpy as np
import pandas as pd

from advisor.data import text_matches
from advisor.errors import AdvisorInputError
from advisor.metrics.regions import open_range_at

# aten ops whose sizes give (M, N, K) and where their operands sit in the sizes list
_OP_AND_SIZES = re.compile(
    r"^aten::(?P<op>mm|addmm|bmm|baddbmm|matmul|linear|_scaled_mm)\b.*?sizes = (?P<sizes>\[.*?\]\])"
)
_TILE_NAME = [
    re.compile(r"tilesize(\d+)x(\d+)x(\d+)"),
    re.compile(r"nvjet_[a-z0-9]+_[a-z]+_(\d+)x(\d+)_(\d+)x\d+"),
    re.compile(r"(?<![\dx])(\d{2,3})x(\d{2,3})x(\d{2,3})(?![\dx])"),
    re.compile(r"(?<![\dx])(\d{2,3})x(\d{2,3})(?![\dx])"),
]


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
    """mm-like NVTX ranges with parsed shapes: tid, start, end, batch, m, n, k, op."""
    cols = ["tid", "start", "end", "batch", "m", "n", "k", "op"]
    if nvtx.empty:
        return pd.DataFrame(columns=cols)
    codes, texts = pd.factorize(nvtx["text"])  # each distinct text parsed once
    parts = pd.Series(texts, dtype=object).str.extract(_OP_AND_SIZES)
    parts = parts.reindex(codes).set_axis(nvtx.index)  # (code -1: no text)
    cand = nvtx.assign(op=parts["op"], sizes=parts["sizes"]).dropna(subset=["op", "sizes"])
    rows = []
    for op, sizes in cand[["op", "sizes"]].drop_duplicates().itertuples(index=False):
        try:  # once per distinct (op, sizes): texts differ only by op ids
            mnk = mnk_from_sizes(op, ast.literal_eval(sizes))
        except (ValueError, SyntaxError):
            mnk = None
        if mnk:
            rows.append((op, sizes, *mnk))
    shapes = pd.DataFrame(rows, columns=["op", "sizes", "batch", "m", "n", "k"])
    out = cand.merge(shapes, on=["op", "sizes"])
    return out[cols].sort_values(["tid", "start"], ignore_index=True)


SHAPE_COLUMNS = ["batch", "m", "n", "k", "shape_source"]


def shapes_from_nvtx(launches: pd.DataFrame, shapes: pd.DataFrame) -> np.ndarray:
    """Per launch (api_tid, api_start columns): the row in ``shapes`` (nvtx_shapes) of the
    innermost mm-like range open at launch on the same thread (the last one to start
    before it, if it is still open), else -1."""
    if shapes.empty or "api_tid" not in launches:
        return np.full(len(launches), -1, dtype=np.int64)
    return open_range_at(launches["api_tid"].to_numpy(), launches["api_start"].to_numpy(), shapes)


def tile_from_name(names: pd.Series) -> pd.DataFrame:
    """tile_m, tile_n, tile_k parsed from kernel names (NaN where the name has none)."""
    uniq = pd.unique(names.dropna())
    found = {}
    for name in uniq:
        for rx in _TILE_NAME:
            m = rx.search(str(name))
            if m:
                g = [int(x) for x in m.groups()]
                found[name] = (g[0], g[1], g[2] if len(g) > 2 else np.nan)
                break
    out = pd.DataFrame(
        [found.get(n, (np.nan, np.nan, np.nan)) for n in names],
        index=names.index,
        columns=["tile_m", "tile_n", "tile_k"],
        dtype=float,
    )
    return out


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


def launch_shapes(
    launches: pd.DataFrame, nvtx: pd.DataFrame, options: list[ShapeOption] | tuple = ()
) -> tuple[np.ndarray, pd.DataFrame]:
    """(shape id per launch, -1 for none; one row per distinct shape: batch, m, n, k,
    shape_source 'nvtx' or '--shape'). ``launches`` has name, region, comm, api_tid and
    api_start.

    NVTX shapes win; a --shape option fills launches whose name or region its pattern
    matches. Launches of comm kernels never get a shape.
    """
    found = nvtx_shapes(nvtx)
    candidates = pd.concat(
        [found[["batch", "m", "n", "k"]].assign(shape_source="nvtx"),
         pd.DataFrame([(1, o.m, o.n, o.k, "--shape") for o in options], columns=SHAPE_COLUMNS)],
        ignore_index=True,
    )  # fmt: skip
    candidates[["batch", "m", "n", "k"]] = candidates[["batch", "m", "n", "k"]].astype(float)
    # equal shapes share one id: a kernel group is one shape, not one NVTX range instance
    key = candidates.groupby(SHAPE_COLUMNS, sort=False).ngroup().to_numpy()
    table = candidates.iloc[np.unique(key, return_index=True)[1]].reset_index(drop=True)
    ids = shapes_from_nvtx(launches, found)
    ids = np.where(ids >= 0, key[np.maximum(ids, 0)] if len(key) else -1, -1)
    comm = launches["comm"].to_numpy(bool)
    ids[comm] = -1
    for i, opt in enumerate(options):
        hit = text_matches(launches["name"], opt.pattern) | text_matches(
            launches["region"], opt.pattern
        )
        hit = hit.to_numpy() & (ids < 0) & ~comm
        ids[hit] = key[len(found) + i]
    return ids.astype(np.int32), table
