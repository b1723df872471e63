"""Tables that fit the terminal: numbers are never cut, long names are shortened in the
middle, and when even that does not fit the least important columns are left out (and the
caption says which)."""

from __future__ import annotations

import textwrap
from collections.abc import Sequence
from dataclasses import dataclass

from rich.table import Table

MIN_TEXT = 10  # a text column is never narrowed below this many characters
ELLIPSIS = "…"


def shorten_middle(text: str, width: int) -> str:
    """``text`` cut to ``width`` characters by removing its middle (``vectoriz…_kernel``):
    both the family prefix and the distinguishing suffix of a kernel name stay readable."""
    if len(text) <= width:
        return text
    if width <= 1:
        return text[:width]
    head = width // 2
    tail = width - 1 - head
    return text[:head] + ELLIPSIS + (text[-tail:] if tail else "")


@dataclass(frozen=True)
class Col:
    """A column: ``text`` columns are left-justified and may be shortened (``wrap``: wrapped
    on words instead, for prose); numbers are right-justified and never cut. ``drop``: the
    order in which columns are left out when the terminal is too narrow (higher first;
    0: always shown)."""

    header: str
    text: bool = False
    wrap: bool = False
    drop: int = 0
    min: int = MIN_TEXT  # (text columns) the narrowest it may become


def _overhead(n: int) -> int:
    """Characters a rich table with n columns spends on borders and padding."""
    return 3 * n + 1


def _natural(col: Col, cells: list[str]) -> int:
    words = max((len(w) for w in col.header.split()), default=0)
    longest = max((len(line) for c in cells for line in c.split("\n")), default=0)
    if col.text:
        return max(longest, words, 1)
    return max(longest, words)


def fitted_table(
    title: str, cols: Sequence[Col], rows: Sequence[Sequence[str]], width: int
) -> Table:
    """A rich Table of ``rows`` (strings) that fits ``width`` characters (see module doc)."""
    cells = [[row[i] for row in rows] for i in range(len(cols))]
    natural = [_natural(c, cells[i]) for i, c in enumerate(cols)]
    keep = list(range(len(cols)))

    def needed(idx: list[int]) -> int:
        fixed = sum(natural[i] for i in idx if not cols[i].text)
        text = sum(min(natural[i], cols[i].min) for i in idx if cols[i].text)
        return fixed + text + _overhead(len(idx))

    dropped = []
    while needed(keep) > width:
        candidates = [i for i in keep if cols[i].drop > 0]
        if not candidates:
            break
        worst = max(candidates, key=lambda i: (cols[i].drop, i))
        keep.remove(worst)
        dropped.append(cols[worst].header)
    widths = {i: natural[i] for i in keep}
    room = width - _overhead(len(keep)) - sum(natural[i] for i in keep if not cols[i].text)
    text_cols = [i for i in keep if cols[i].text]
    want = sum(natural[i] for i in text_cols)
    if text_cols and want > room:  # share the room among text columns, widest give most
        share = max(room, sum(min(natural[i], cols[i].min) for i in text_cols))
        for i in sorted(text_cols, key=lambda i: natural[i]):
            fair = max(min(natural[i], cols[i].min), share // len(text_cols))
            widths[i] = min(natural[i], fair)
            share -= widths[i]
            text_cols = [j for j in text_cols if j != i]
    tab = Table(title=title, title_justify="left")
    for i in keep:
        col = cols[i]
        header = "\n".join(textwrap.wrap(col.header, widths[i])) or col.header
        if col.text:
            tab.add_column(header, justify="left", width=widths[i],
                           no_wrap=not col.wrap, overflow="fold")  # fmt: skip
        else:
            tab.add_column(header, justify="right", min_width=widths[i], no_wrap=True)
    for row in rows:
        out = []
        for i in keep:
            cell = row[i]
            if cols[i].text and not cols[i].wrap:
                cell = "\n".join(shorten_middle(line, widths[i]) for line in cell.split("\n"))
            out.append(cell)
        tab.add_row(*out)
    if dropped:
        tab.caption = f"(narrow terminal: left out {', '.join(reversed(dropped))})"
    return tab
