"""Output that fits the terminal (docs/terminal.md).

- A number and its unit are never cut nor split over two lines: number cells are atomic, and
  prose (notes, findings, wrapped cells) is wrapped with each number glued to its unit.
- Text cells are shortened in the middle (names: ``vectoriz…_kernel``) or wrapped on words
  (prose); names that would then read the same keep the part where they differ.
- When a table does not fit, columns are left out in the order each ``Col`` states
  (``drop``: highest first, equal ones together), and a note under the table names them.
  Rows that would then read the same carry, in their name cell, the left-out values that
  tell them apart (``vectorized_elementwise_kernel [dev 1, grid 80x1x1]``); a name's own
  trailing ``[...]`` (what tells two groups apart beyond the columns) is kept whole too.
- A table that does not fit even with every droppable column left out is printed as one
  block of wrapped lines per row.
"""

from __future__ import annotations

import re
import textwrap
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass

from rich.console import Console, Group, RenderableType
from rich.table import Table
from rich.text import Text

MIN_TEXT = 10  # a text column is never narrowed below this many characters
ELLIPSIS = "…"
UNITS = ("GB/s", "ns", "us", "ms", "s", "%", "KB", "MB", "GB", "B", "pts")
_NUMBER_UNIT = re.compile(
    r"(?<![\w.])([-+]?\d[\d,]*(?:\.\d+)?) (" + "|".join(map(re.escape, UNITS)) + r")(?![\w/])"
)
_GLUE = "\u00a0"  # no-break space: textwrap only breaks at ASCII whitespace
_BRACKETED = re.compile(r"(.*\S) \[([^\[\]\n]+)\]", re.S)  # a name, then what tells it apart


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


def common_prefix(texts: Sequence[str]) -> str:
    """The longest start all ``texts`` share."""
    first, last = min(texts), max(texts)
    n = 0
    while n < min(len(first), len(last)) and first[n] == last[n]:
        n += 1
    return first[:n]


def shorten_distinct(texts: Sequence[str], width: int) -> list[str]:
    """Each text shortened in the middle to ``width``; different texts that would then read
    the same show, between a short head and tail, where they start to differ
    (``void…, 512, true, 1>(float…oat)``); when even that reads the same, folded whole over
    several lines."""
    differs: list[set[int]] = [set() for _ in texts]
    out = [shorten_middle(t, width) for t in texts]
    for _ in range(8):  # each round, the texts still alike: where they differ next
        clashes = _alike(out, texts)
        if not clashes:
            return out
        for idx in clashes:
            first = len(common_prefix([texts[i] for i in idx]))
            for i in idx:
                differs[i].add(first)
        out = [_around(t, sorted(d), width) if d else x
               for x, t, d in zip(out, texts, differs, strict=True)]  # fmt: skip
    folded = {i for idx in _alike(out, texts) for i in idx}
    return [
        "\n".join(t[k : k + width] for k in range(0, len(t), width)) if i in folded else x
        for i, (x, t) in enumerate(zip(out, texts, strict=True))
    ]


def _alike(shown: Sequence[str], texts: Sequence[str]) -> list[list[int]]:
    """Groups of indices whose ``shown`` are equal while their ``texts`` differ."""
    groups: dict[str, list[int]] = defaultdict(list)
    for i, x in enumerate(shown):
        groups[x].append(i)
    return [idx for idx in groups.values() if len({texts[i] for i in idx}) > 1]


def _around(text: str, positions: Sequence[int], width: int) -> str:
    """``text`` in ``width`` characters: a short head, a window from just before each of
    ``positions`` (where it differs from texts that would read the same), a short tail."""
    if len(text) <= width:
        return text
    keep = max(width // 6, 1)
    starts = sorted({max(p - 2, keep) for p in positions})
    room = width - 2 * keep - 1 - len(starts)  # head, "…" + tail, "…" before each window
    if room < len(starts):
        return shorten_middle(text, width)
    out, end = text[:keep], keep
    for n, start in enumerate(starts):
        size = room // len(starts) + (n < room % len(starts))
        if start > end:
            out += ELLIPSIS
        else:  # (joins the piece before: no ellipsis, one more character)
            start, size = end, size + 1
        out += text[start : start + size]
        end = start + size
    if end < len(text) - keep:
        return out + ELLIPSIS + text[len(text) - keep :]
    return out + text[end:]


def wrap(text: str, width: int, indent: str = "", hanging: str = "",
         shorten_words: bool = False) -> list[str]:  # fmt: skip
    """``text`` wrapped to ``width`` on spaces, never between a number and its unit (nor
    inside a group joined by no-break spaces, unless it is longer than a line); its own line
    breaks are kept. ``indent`` starts the first line, ``hanging`` the others. A word longer
    than a line is broken over lines, or with ``shorten_words`` shortened in the middle."""
    glued = re.sub(rf"\S*{_GLUE}\S*", lambda m: _unglued_if_longer(m.group(0), width),
                   _NUMBER_UNIT.sub(rf"\1{_GLUE}\2", text))  # fmt: skip
    if shorten_words:
        room = width - len(hanging)
        glued = re.sub(rf"\S{{{room + 1},}}", lambda m: shorten_middle(m.group(0), room), glued)
    lines: list[str] = []
    for para in glued.split("\n"):
        first = indent if not lines else hanging
        lines += textwrap.wrap(para, width, initial_indent=first, subsequent_indent=hanging,
                               break_on_hyphens=False) or [""]  # fmt: skip
    return [line.replace(_GLUE, " ") for line in lines]


def _unglued_if_longer(piece: str, width: int) -> str:
    return piece.replace(_GLUE, " ") if len(piece) > width else piece


def _longest_piece(cells: Sequence[str], numbers_only: bool) -> int:
    """The longest piece ``wrap`` never breaks apart in ``cells``: a number with its unit
    (``numbers_only``), else any word."""
    glued = [_NUMBER_UNIT.sub(rf"\1{_GLUE}\2", c) for c in cells]
    pieces = (p for c in glued for p in c.split() if not numbers_only or _GLUE in p)
    return max(map(len, pieces), default=0)


def print_wrapped(
    console: Console, text: str, style: str = "", indent: str = "", hanging: str = ""
) -> None:
    """``text`` on ``console``, wrapped to its width by ``wrap``."""
    console.print(Text("\n".join(wrap(text, console.width, indent, hanging)), style=style))


@dataclass(frozen=True)
class Col:
    """A column. ``text`` columns are left-justified and shortened in the middle (``wrap``:
    wrapped on words instead, for prose); the others hold numbers, right-justified and never
    cut (``wrap``: words after the number may wrap, the number and its unit stay whole).
    ``drop``: the order in which columns are left out when the terminal is too narrow
    (highest first, equal ones together; 0: always shown). ``identifies``: the column says
    what the row is about (kernel, device, grid...); when left out, its value joins the
    row's name cell where rows would otherwise read the same, or always with ``fold``."""

    header: str
    text: bool = False
    wrap: bool = False
    drop: int = 0
    min: int = MIN_TEXT  # (text columns) the narrowest it may become
    identifies: bool = False
    fold: bool = False
    # (wrapped columns) the cells' first line is a name (a kernel's) given at most this many
    # lines: wrapped on its words where that fits, else shortened in the middle (names that
    # would then read the same kept apart: shorten_distinct) and folded (0: prose throughout)
    name_lines: int = 0
    # (wrapped columns) a word longer than a line is broken over lines, never shortened (a
    # config's path, a flag to pass); by default only where the column identifies the row
    break_words: bool = False


@dataclass(frozen=True)
class Fitted:
    """A table laid out for a width: the columns kept, their widths, the cells as shown
    (lines joined by newlines) and the headers of the columns left out."""

    cols: list[Col]
    widths: list[int]
    rows: list[list[str]]
    left_out: list[str]


def _overhead(n: int) -> int:
    """Characters a rich table with n columns spends on borders and padding."""
    return 3 * n + 1


def _natural(col: Col, cells: Sequence[str]) -> int:
    words = max((len(w) for w in col.header.split()), default=0)
    longest = max((len(line) for c in cells for line in c.split("\n")), default=0)
    return max(longest, words, 1)


def _narrowest(col: Col, cells: Sequence[str]) -> int:
    """The least width of a column: a number column's longest number (with its unit) or,
    for a wrapped one, its longest unbreakable piece; a text column's ``min``."""
    words = max((len(w) for w in col.header.split()), default=0)
    if not col.text:
        return max(_longest_piece(cells, False) if col.wrap else _natural(col, cells), words)
    numbers = _longest_piece(cells, True) if col.wrap else 0
    return max(min(_natural(col, cells), col.min), numbers, words)


def _kept(cols: Sequence[Col], least: list[int], width: int) -> list[int] | None:
    """The columns kept at ``width`` (indices): the others left out by ``drop``, highest
    first, equal ones together; None when even the columns always shown do not fit."""
    keep = list(range(len(cols)))
    while sum(least[i] for i in keep) + _overhead(len(keep)) > width:
        droppable = [cols[i].drop for i in keep if cols[i].drop > 0]
        if not droppable:
            return None
        keep = [i for i in keep if cols[i].drop != max(droppable)]
    return keep


def _room(cols: Sequence[Col], natural: list[int], least: list[int], width: int) -> list[int]:
    """Widths: fixed columns at their natural width, the rest from their least width up,
    the room left shared so that columns needing less are served first."""
    flexible = [i for i, c in enumerate(cols) if c.text or c.wrap]
    widths = [least[i] if i in flexible else natural[i] for i in range(len(cols))]
    extra = width - _overhead(len(cols)) - sum(widths)
    wanting = sorted(flexible, key=lambda i: natural[i] - least[i])
    for n, i in enumerate(wanting):
        give = max(min(natural[i] - least[i], extra // (len(wanting) - n)), 0)
        widths[i] += give
        extra -= give
    return widths


def _told_apart(cols: Sequence[Col], rows: Sequence[Sequence[str]], keep: list[int]
                ) -> list[list[str]]:  # fmt: skip
    """Per row, the left-out identifying values (``header value``) its name cell must carry:
    those that tell apart rows whose kept identifying cells are equal, and folded ones."""
    keys = [tuple(r[i] for i in keep if cols[i].identifies) for r in rows]
    told: list[list[str]] = [[] for _ in rows]
    for j in (i for i, c in enumerate(cols) if c.identifies and i not in keep):
        values: dict[tuple, set[str]] = defaultdict(set)
        for key, r in zip(keys, rows, strict=True):
            values[key].add(r[j])
        for n, (key, r) in enumerate(zip(keys, rows, strict=True)):
            if cols[j].fold or len(values[key]) > 1:
                told[n].append(f"{cols[j].header}{_GLUE}{r[j]}")
        keys = [(*key, r[j]) for key, r in zip(keys, rows, strict=True)]
    return told


def _bracketed(told: list[str]) -> str:
    return f"[{', '.join(told)}]" if told else ""


def _name_column(cols: Sequence[Col], keep: list[int]) -> int | None:
    """The kept column that names the row (where values that tell rows apart go)."""
    named = [i for i in keep if cols[i].identifies and cols[i].text]
    return named[0] if named else next((i for i in keep if cols[i].text), None)


def _shown(col: Col, cells: list[str], told: list[list[str]] | None, width: int) -> list[str]:
    """A column's cells as shown in ``width`` characters; ``told``: the name column's
    values that tell its rows apart."""
    if col.wrap and col.name_lines:
        return _named_lines(cells, told or [[] for _ in cells], width, col.name_lines)
    if col.wrap:  # (a long word: broken over lines where it says what the row is about)
        told = told or [[] for _ in cells]
        return ["\n".join(wrap(f"{c} {_bracketed(t)}".rstrip(), width,
                                shorten_words=not (col.identifies or col.break_words)))
                for c, t in zip(cells, told, strict=True)]  # fmt: skip
    if not col.text:
        return list(cells)
    if col.identifies:
        shown = shorten_distinct(cells, width)
    else:
        shown = ["\n".join(shorten_middle(x, width) for x in c.split("\n")) for c in cells]
    if told is None:
        return shown
    return [_with_told(c, t, width) for c, t in zip(shown, told, strict=True)]


def _named_lines(cells: list[str], told: list[list[str]], width: int, lines: int) -> list[str]:
    """Wrapped cells whose first line is a name (name_lines), the rest wrapped as prose."""
    heads = name_lines([c.split("\n", 1)[0] for c in cells], width, lines)
    out = []
    for shown, cell, t in zip(heads, cells, told, strict=True):
        rest = f"{cell.partition(chr(10))[2]} {_bracketed(t)}".strip()
        if rest:
            shown = [*shown, *wrap(rest, width, shorten_words=True)]
        out.append("\n".join(shown))
    return out


def name_lines(names: Sequence[str], width: int, lines: int) -> list[list[str]]:
    """Each name in at most ``lines`` lines of ``width``: wrapped on its spaces where that
    fits without breaking a word, else shortened in the middle (names that would then read
    the same kept apart: shorten_distinct) and folded (fold_name)."""
    short = shorten_distinct(names, (width - 1) * lines)  # (a character a line to fold)
    out = []
    for name, cut in zip(names, short, strict=True):
        shown = textwrap.wrap(name, width, break_long_words=False, break_on_hyphens=False)
        if len(shown) > lines or any(len(line) > width for line in shown):
            shown = [line for part in cut.split("\n") for line in fold_name(part, width)]
        out.append(shown)
    return out


def fold_name(text: str, width: int) -> list[str]:
    """``text`` over lines of ``width``: broken at a space in the line's second half where
    there is one, else at the width; never where a line would end or start with the
    ellipsis (a line ending ``f3…`` reads as a number cut short)."""
    lines = []
    while len(text) > width:
        spaces = [
            i
            for i in range(width, width // 2, -1)
            if text[i] == " " and ELLIPSIS not in (text[i - 1], text[i + 1 : i + 2])
        ]
        if spaces:
            lines.append(text[: spaces[0]])
            text = text[spaces[0] + 1 :]
            continue
        cut = width
        while cut > 1 and ELLIPSIS in (text[cut - 1], text[cut]):
            cut -= 1
        lines.append(text[:cut])
        text = text[cut:]
    return [*lines, text]


def _with_told(cell: str, told: list[str], width: int) -> str:
    """A name cell with the values that tell its row apart: on its line when they fit,
    else on the lines below."""
    text = _bracketed(told)
    if not text:
        return cell
    if len(cell.split("\n")[-1]) + 1 + len(text) <= width:
        return cell + " " + text.replace(_GLUE, " ")
    return cell + "\n" + "\n".join(wrap(text, width))


def fit(cols: Sequence[Col], rows: Sequence[Sequence[str]], width: int) -> Fitted | None:
    """``rows`` laid out in ``width`` characters (see the module doc); None when even the
    columns that are always shown do not fit."""
    cells = [[row[i] for row in rows] for i in range(len(cols))]
    natural = [_natural(c, cells[i]) for i, c in enumerate(cols)]
    least = [_narrowest(c, cells[i]) for i, c in enumerate(cols)]
    keep = _kept(cols, least, width)
    if keep is None:
        return None
    told = _told_apart(cols, rows, keep)
    name = _name_column(cols, keep)
    if name is not None:
        if not cols[name].wrap:  # a name's own trailing "[...]": kept whole with the rest
            for n, m in enumerate(map(_BRACKETED.fullmatch, cells[name])):
                if m:
                    cells[name][n] = m.group(1)
                    told[n].insert(0, m.group(2))
        whole = [f"{c} {_bracketed(t)}" for c, t in zip(cells[name], told, strict=True) if t]
        natural[name] = max(natural[name], *map(len, whole), 0)
    kept = [cols[i] for i in keep]
    widths = _room(kept, [natural[i] for i in keep], [least[i] for i in keep], width)
    columns = [_shown(cols[i], cells[i], told if i == name else None, w)
               for i, w in zip(keep, widths, strict=True)]  # fmt: skip
    shown = [list(row) for row in zip(*columns, strict=True)] if rows else []
    return Fitted(kept, widths, shown, [c.header for i, c in enumerate(cols) if i not in keep])


def fitted_table(title: str, cols: Sequence[Col], rows: Sequence[Sequence[str]], width: int,
                 caption: str = "") -> RenderableType:  # fmt: skip
    """A rich Table of ``rows`` (strings) that fits ``width`` characters (see the module
    doc), ``caption`` under it; one block of lines per row where no table fits."""
    laid = fit(cols, rows, width)
    if laid is None:
        return _blocks(title, cols, rows, width, caption)
    notes = [f"(left out at this width: {', '.join(laid.left_out)})"] if laid.left_out else []
    tab = Table(title=title, title_justify="left", caption=" ".join([*notes, caption]).strip()
                or None)  # fmt: skip
    for col, w in zip(laid.cols, laid.widths, strict=True):
        header = Text("\n".join(textwrap.wrap(col.header, w)) or col.header)
        tab.add_column(header, justify="left" if col.text else "right", width=w, no_wrap=True)
    for row in laid.rows:  # (Text: a name's "[...]" is not rich markup)
        tab.add_row(*map(Text, row))
    return tab


def _blocks(title: str, cols: Sequence[Col], rows: Sequence[Sequence[str]], width: int,
            caption: str) -> Group:  # fmt: skip
    """Rows as blocks of wrapped lines (``- name: header value; ...``): nothing cut."""
    lines = [Text("\n".join(wrap(title, width)), style="italic")]
    for row in rows:
        cells = [c.replace("\n", " ") for c in row]
        text = f"{cells[0]}: " + "; ".join(
            f"{c.header} {v}" for c, v in zip(cols[1:], cells[1:], strict=True) if v
        )
        lines.append(Text("\n".join(wrap(text, width, "- ", "  "))))
    if caption:
        lines.append(Text("\n".join(wrap(caption, width)), style="dim"))
    return Group(*lines)
