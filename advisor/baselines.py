"""Named baselines for the CI gate: metric sets stored in a small SQLite database.

Default location: $ADVISOR_BASELINES, else ~/.cache/advisor/baselines.db; ``--store PATH``
overrides both. One row per (name, trace); saving a name again replaces its rows.
"""

from __future__ import annotations

import json
import os
import sqlite3
from contextlib import closing
from datetime import datetime, timezone
from pathlib import Path

import sqlite_utils

from advisor.errors import AdvisorInputError

TABLE = "baselines"


def default_store() -> Path:
    env = os.environ.get("ADVISOR_BASELINES")
    return Path(env) if env else Path.home() / ".cache" / "advisor" / "baselines.db"


def _db(path: Path, create: bool) -> sqlite_utils.Database:
    """The store at ``path``: opened read-only unless ``create`` (then made if missing).
    An existing file must be a baseline store: a trace or any other database is refused, so
    saving a baseline can never write into a trace."""
    if path.is_dir():
        raise AdvisorInputError(str(path), "is a directory, expected a baseline store file")
    if path.exists():
        try:
            with closing(sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True)) as c:
                tables = {
                    r[0] for r in c.execute("SELECT name FROM sqlite_master WHERE type='table'")
                }
        except sqlite3.Error as exc:
            raise AdvisorInputError(str(path), f"not a baseline store: {exc}") from None
        if tables - {TABLE}:
            why = "refusing to write into it" if create else "it holds no baselines"
            raise AdvisorInputError(
                str(path), f"not a baseline store (it holds other tables, e.g. a trace's): {why}"
            )
    elif not create:
        raise AdvisorInputError(str(path), "no baseline store here (save one first)")
    try:
        if create:
            path.parent.mkdir(parents=True, exist_ok=True)
            return sqlite_utils.Database(sqlite3.connect(path))
        return sqlite_utils.Database(
            sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True)
        )
    except (OSError, sqlite3.Error) as exc:
        raise AdvisorInputError(str(path), f"cannot open the baseline store: {exc}") from None


def save(name: str, sets: list[dict], store: Path | None = None) -> Path:
    """Store the metric sets of ``name`` (replacing earlier ones) in one transaction."""
    path = store or default_store()
    db = _db(path, create=True)
    now = datetime.now(timezone.utc).isoformat(timespec="seconds")
    rows = [
        {"name": name, "seq": i, "trace": s["trace"], "saved": now,
         "metrics": json.dumps(s)}
        for i, s in enumerate(sets)
    ]  # fmt: skip
    try:
        with db.conn:
            if TABLE in db.table_names():
                db.table(TABLE).delete_where("name = ?", [name])
            db.table(TABLE).insert_all(rows, pk=("name", "seq"))
    except sqlite3.Error as exc:
        raise AdvisorInputError(str(path), f"cannot write the baseline store: {exc}") from None
    return path


def load(name: str, store: Path | None = None) -> list[dict]:
    """The metric sets saved under ``name``."""
    path = store or default_store()
    db = _db(path, create=False)
    try:
        if TABLE not in db.table_names():
            raise AdvisorInputError(str(path), "baseline store holds no baselines")
        rows = list(db[TABLE].rows_where("name = ?", [name], order_by="seq"))
        if not rows:
            known = ", ".join(sorted({r["name"] for r in db[TABLE].rows}))
            raise AdvisorInputError(str(path), f"no baseline named {name!r} (known: {known})")
        return [json.loads(r["metrics"]) for r in rows]
    except (sqlite3.Error, ValueError, KeyError) as exc:
        raise AdvisorInputError(str(path), f"damaged baseline store: {exc}") from None


def listing(store: Path | None = None) -> list[dict]:
    """One entry per baseline: name, traces, saved (UTC)."""
    path = store or default_store()
    if not path.is_file():
        return []
    db = _db(path, create=False)
    try:
        if TABLE not in db.table_names():
            return []
        sql = f"SELECT name, COUNT(*) AS traces, MAX(saved) AS saved FROM {TABLE} GROUP BY name"
        return [dict(zip(("name", "traces", "saved"), r, strict=True)) for r in db.execute(sql)]
    except sqlite3.Error as exc:
        raise AdvisorInputError(str(path), f"damaged baseline store: {exc}") from None
