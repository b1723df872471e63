"""Rich table construction shared by the terminal renderers."""

from __future__ import annotations

from collections.abc import Iterable

from rich.table import Table


def titled_table(title: str, columns: Iterable[str], text: Iterable[str] = ()) -> Table:
    """A table titled ``title`` (left-aligned) whose ``text`` columns are left-justified
    and all others (numbers) right-justified."""
    text = set(text)
    tab = Table(title=title, title_justify="left")
    for col in columns:
        tab.add_column(col, justify="left" if col in text else "right")
    return tab
