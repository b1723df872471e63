"""Mutations for fuzzing (tests/fuzz/fuzz_readers.py, tests/sanitize/check_scanner.py): bytes
flipped, inserted, deleted, duplicated, truncated; JSON tokens inserted and literals replaced;
decoded JSON values, CSV cells and SQLite rows changed. Every function takes a
``random.Random`` and returns the new bytes (or changes the value it is given) and a short
description of what it did."""

from __future__ import annotations

import contextlib
import csv
import io
import json
import random
import re
import sqlite3
from pathlib import Path

# values that break assumptions: zero, signs, int64/uint32 edges, non-finite, text, huge
NUMBERS = ["0", "-0", "-1", "1", "0.5", "-0.001", "1e-300", "1e308", "1e309", "-1e309",
           "2147483647", "2147483648", "4294967295", "4294967296", "65536",
           "9007199254740993", "9223372036854775807", "9223372036854775808",
           "-9223372036854775808", "18446744073709551616", "1" + "0" * 40, "123.456789e3",
           "3.4028235e38"]  # fmt: skip
STRINGS = ["", "x", "abc", "nan", "NaN", "inf", "-inf", "1e5", " 7 ", "0x10", "null", "true",
           "stream 7", "∑ναμε 名前 🚀", "\u202ertl", "\x00", "a\nb", 'q"uote', "back\\slash",
           "k" * 5000, "Memcpy HtoD (Pinned -> Device)", "Memcpy DtoH", "aten::mm",
           "ProfilerStep#1", "nccl:all_reduce", "ncclKernel_AllReduce", "cudaLaunchKernel",
           "cudaDeviceSynchronize", "cudaStreamSynchronize", "cudaMemcpyAsync",
           "void gemm_kernel<float>(float*)", " grid=5", "sm90_xmma_gemm"]  # fmt: skip
# JSON tokens and fragments inserted into JSON text (the last nests deeper than the decoders
# follow)
TOKENS = [b"{", b"}", b"[", b"]", b",", b":", b'"', b"\\", b"\\u", b"\\u0000", b"\\ud800",
          b"null", b"true", b"false", b"-", b"0", b"1e999", b"-0", b"01", b".5", b"1.", b"NaN",
          b"Infinity", b" ", b"\n", b"\t", b"\x00", b"\x1f", b"\xff", b"\xc3", b"\xed\xa0\x80",
          b'"cat"', b'"kernel"', b'"ph": "X"', b'"ts": ', b'"dur": ', b'"args": {',
          b'"grid": [', b'"block": [1, 1, 1]', b'"name": ', b'"device": ', b'"correlation": ',
          b'"traceEvents": [', b"[" * 300, b"]" * 300, b'{"a": ' * 40, b"}" * 40,
          b'"' + b"\\\\" * 20 + b'"', b"9" * 400,
          b"[" * 3000 + b"0" + b"]" * 3000]  # fmt: skip
_LITERAL = re.compile(rb'-?\d+(?:\.\d+)?(?:[eE][+-]?\d+)?|"(?:[^"\\\n]|\\.)*"')


def interesting(rng: random.Random):
    """A JSON value of a random type, mostly one that breaks assumptions."""
    pick = rng.random()
    if pick < 0.35:
        return json.loads(rng.choice(NUMBERS).replace("1e309", "1e308"))
    if pick < 0.65:
        return rng.choice(STRINGS)
    if pick < 0.72:
        return None
    if pick < 0.78:
        return rng.choice([True, False])
    if pick < 0.86:
        return [interesting_scalar(rng) for _ in range(rng.randrange(0, 5))]
    if pick < 0.93:
        return {rng.choice(["a", "grid", "device", "x"]): interesting_scalar(rng)}
    return nested(rng.choice([2, 255, 256, 257, 900]), rng)  # (deeper: as text, TOKENS)


def interesting_scalar(rng: random.Random):
    return rng.choice([json.loads(rng.choice(NUMBERS).replace("1e309", "1e308")),
                       rng.choice(STRINGS), None, True])  # fmt: skip


def nested(depth: int, rng: random.Random):
    """A value nesting ``depth`` lists or objects."""
    value: object = 1
    as_list = rng.random() < 0.5
    for _ in range(depth):
        value = [value] if as_list else {"a": value}
    return value


# --- bytes --------------------------------------------------------------------------------


def bytes_op(data: bytes, rng: random.Random, lo: int = 0) -> tuple[bytes, str]:
    """One byte-level change at or after ``lo``: flips, a random byte, an insertion, a
    deletion, a duplicated range, a truncation, a zeroed range."""
    b = bytearray(data)
    if len(b) <= lo + 1:
        return bytes(b) + bytes([rng.randrange(256)]), "append"
    at = rng.randrange(lo, len(b))
    op = rng.choice(["flip", "flip", "byte", "insert", "delete", "dup", "truncate", "zero"])
    if op == "flip":
        for _ in range(rng.randrange(1, 9)):
            i = rng.randrange(lo, len(b))
            b[i] ^= 1 << rng.randrange(8)
    elif op == "byte":
        b[at] = rng.choice([0, 0xFF, 0x7F, 0x80, ord('"'), ord("\\"), ord(","), rng.randrange(256)])
    elif op == "insert":
        b[at:at] = rng.randbytes(rng.randrange(1, 9))
    elif op == "delete":
        del b[at : at + rng.randrange(1, 64)]
    elif op == "dup":
        n = rng.randrange(1, 200)
        b[at:at] = b[at : at + n]
    elif op == "truncate":
        del b[at:]
    else:
        b[at : at + rng.randrange(1, 512)] = bytes(min(len(b) - at, 511))
    return bytes(b), f"bytes:{op}@{at}"


def json_token_op(data: bytes, rng: random.Random) -> tuple[bytes, str]:
    """One change to JSON text: a token inserted, or a number or string literal replaced by
    another literal (or a token)."""
    if rng.random() < 0.4 or not data:
        at = rng.randrange(len(data) + 1)
        token = rng.choice(TOKENS)
        return data[:at] + token + data[at:], f"token:insert {token[:12]!r}@{at}"
    # a literal found near a random point
    at = rng.randrange(len(data))
    m = _LITERAL.search(data, at) or _LITERAL.search(data)
    if not m:
        return bytes_op(data, rng)
    token = rng.random() < 0.2
    new = rng.choice(TOKENS) if token else json.dumps(interesting_scalar(rng)).encode()
    return data[: m.start()] + new + data[m.end() :], f"token:replace {m.group()[:12]!r}"


def json_literal_swap(data: bytes, rng: random.Random) -> tuple[bytes, str]:
    """A number literal replaced by another number, or a string by another string: the
    text stays valid JSON of the same shape."""
    at = rng.randrange(max(len(data), 1))
    m = _LITERAL.search(data, at) or _LITERAL.search(data)
    if not m:
        return bytes_op(data, rng)
    if m.group().startswith(b'"'):
        new = json.dumps(rng.choice(STRINGS)).encode()
    else:
        new = rng.choice(NUMBERS).encode()
    return data[: m.start()] + new + data[m.end() :], f"token:swap {m.group()[:12]!r}"


# --- decoded JSON ---------------------------------------------------------------------------


def _containers(value, out: list, depth: int = 0) -> list:
    """Every dict and list inside ``value`` (up to a depth)."""
    if depth > 12:
        return out
    if isinstance(value, dict):
        out.append(value)
        for v in value.values():
            _containers(v, out, depth + 1)
    elif isinstance(value, list):
        out.append(value)
        for v in value[:200]:
            _containers(v, out, depth + 1)
    return out


def json_value_op(doc, rng: random.Random, pool: list | None = None) -> str:
    """Change the decoded document ``doc`` in place (a dict or list from ``pool``, or any in
    ``doc``): a value replaced, a key removed or renamed, an item duplicated, removed or moved.
    Returns the description."""
    found = pool if pool else _containers(doc, [])
    found = [c for c in found if c]
    if not found:
        return "json:none"
    c = rng.choice(found)
    op = rng.choice(["set", "set", "set", "delete", "dup", "rename", "swap"])
    if isinstance(c, dict):
        key = rng.choice(list(c))
        if op == "set":
            c[key] = interesting(rng)
        elif op == "delete":
            del c[key]
        elif op == "rename":
            c[rng.choice(["ts", "dur", "cat", "ph", "name", "args", "pid", "tid", "x", key + "_"])
              ] = c.pop(key)  # fmt: skip
        elif op == "dup":
            c[key] = [c[key], c[key]] if rng.random() < 0.5 else c[key]
        else:
            other = rng.choice(found)
            if isinstance(other, dict) and other:
                k2 = rng.choice(list(other))
                c[key], other[k2] = other[k2], c[key]
        return f"json:{op} {key[:20]!r}"
    i = rng.randrange(len(c))
    if op == "set":
        c[i] = interesting(rng)
    elif op == "delete":
        del c[i : i + rng.randrange(1, 20)]
    elif op == "dup":
        c[i:i] = [json.loads(json.dumps(c[i]))] * rng.randrange(1, 4)
    else:
        j = rng.randrange(len(c))
        c[i], c[j] = c[j], c[i]
    return f"json:{op} [{i}]"


# --- CSV ------------------------------------------------------------------------------------


def csv_op(text: str, rng: random.Random) -> tuple[str, str]:
    """One change to CSV text: a cell set to an odd value, a header renamed or dropped, a
    column or row removed, duplicated or reordered, a row cut short, quoting changed."""
    rows = list(csv.reader(io.StringIO(text, newline="")))  # (a bare \r in a cell: a line break)
    if not rows:
        return text + rng.choice(STRINGS), "csv:append"
    op = rng.choice(["cell", "cell", "cell", "header", "drop_col", "dup_row", "drop_rows",
                     "short_row", "swap_cols", "extra_col", "shuffle"])  # fmt: skip
    width = max(len(r) for r in rows)
    col = rng.randrange(max(width, 1))
    body = rows[1:]
    if op == "cell" and body:
        r = rng.choice(body)
        if r:
            r[rng.randrange(len(r))] = rng.choice([*NUMBERS, *STRINGS, ""])
    elif op == "header" and rows[0]:
        i = rng.randrange(len(rows[0]))
        if rng.random() < 0.5:
            rows[0][i] = rng.choice(["Kernel_Name", "Start_Timestamp", "x", "", rows[0][0]])
        else:
            del rows[0][i]
    elif op == "drop_col":
        for r in rows:
            if col < len(r):
                del r[col]
    elif op == "dup_row" and body:
        rows.insert(rng.randrange(1, len(rows) + 1), list(rng.choice(body)))
    elif op == "drop_rows" and body:
        at = rng.randrange(1, len(rows))
        del rows[at : at + rng.randrange(1, 5)]
    elif op == "short_row" and body:
        r = rng.choice(body)
        del r[rng.randrange(len(r) + 1) :]
    elif op == "swap_cols":
        other = rng.randrange(max(width, 1))
        for r in rows:
            if col < len(r) and other < len(r):
                r[col], r[other] = r[other], r[col]
    elif op == "extra_col":
        for r in rows:
            r.insert(min(col, len(r)), rng.choice(["Extra", "1", ""]))
    else:
        rng.shuffle(body)
        rows = rows[:1] + body
    out = io.StringIO()
    quoting = rng.choice([csv.QUOTE_MINIMAL, csv.QUOTE_ALL, csv.QUOTE_NONNUMERIC])
    writer = csv.writer(out, quoting=quoting, lineterminator=rng.choice(["\n", "\n", "\r\n"]))
    for r in rows:
        with contextlib.suppress(ValueError):  # (QUOTE_NONNUMERIC on text)
            writer.writerow(r)
    return out.getvalue(), f"csv:{op}"


# --- SQLite ---------------------------------------------------------------------------------


def _tables(db: sqlite3.Connection) -> list[str]:
    return [r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type = 'table' "
                                     "AND name NOT LIKE 'sqlite_%'")]  # fmt: skip


def _columns(db: sqlite3.Connection, table: str) -> list[str]:
    return [r[1] for r in db.execute(f'PRAGMA table_info("{table}")')]


def _loosen(db: sqlite3.Connection, table: str) -> None:
    """The table again without its constraints (NOT NULL, keys): any value fits."""
    db.execute(f'CREATE TABLE "_loose" AS SELECT * FROM "{table}"')
    db.execute(f'DROP TABLE "{table}"')
    db.execute(f'ALTER TABLE "_loose" RENAME TO "{table}"')


def sql_value(rng: random.Random) -> object:
    """A value for an SQLite cell: NULL, a number at an edge, text, a blob."""
    pick = rng.random()
    if pick < 0.2:
        return None
    if pick < 0.6:
        v = json.loads(rng.choice(NUMBERS).replace("1e309", "1e308"))
        return v if not isinstance(v, int) or -(2**63) <= v < 2**63 else str(v)
    if pick < 0.9:
        return rng.choice(STRINGS)
    return rng.randbytes(rng.randrange(0, 12))


def sqlite_op(path: Path, rng: random.Random, prefer: tuple[str, ...] = ()) -> str:
    """One change to the SQLite database at ``path``: cells set (NULL, edges, text, blobs),
    rows deleted or duplicated, a column or table dropped or renamed, two columns swapped.
    ``prefer``: table name prefixes picked more often. Returns the description."""
    with contextlib.closing(sqlite3.connect(path, isolation_level=None)) as db:
        tables = _tables(db)
        if not tables:
            return "sql:no tables"
        liked = [t for t in tables if t.startswith(prefer)] if prefer else []
        table = rng.choice(liked if liked and rng.random() < 0.85 else tables)
        cols = _columns(db, table)
        col = rng.choice(cols) if cols else "rowid"
        op = rng.choice(["set", "set", "set", "set", "delete", "dup", "drop_col", "drop_table",
                         "rename_col", "swap", "negate"])  # fmt: skip
        n = db.execute(f'SELECT count(*) FROM "{table}"').fetchone()[0]
        where = rng.choice([
            "1", f"rowid % {rng.randrange(2, 6)} = 0", f"rowid = {rng.randrange(1, n + 2)}",
            f"rowid > {rng.randrange(0, n + 1)}"])  # fmt: skip
        q = f'"{table}"'
        statements = {
            "set": (f'UPDATE {q} SET "{col}" = ? WHERE {where}', [sql_value(rng)]),
            "delete": (f"DELETE FROM {q} WHERE {where}", []),
            "dup": (f"INSERT INTO {q} SELECT * FROM {q} WHERE {where}", []),
            "drop_col": (f'ALTER TABLE {q} DROP COLUMN "{col}"', []),
            "drop_table": (f"DROP TABLE {q}", []),
            "rename_col": (f'ALTER TABLE {q} RENAME COLUMN "{col}" TO "{col}_x"', []),
            "swap": (f'UPDATE {q} SET "{col}" = "{rng.choice(cols)}" WHERE {where}', []),
            "negate": (f'UPDATE {q} SET "{col}" = -"{col}" WHERE {where}', []),
        }
        sql, params = statements[op]
        try:
            db.execute(sql, params)
        except sqlite3.IntegrityError:  # (NOT NULL, a key: drop the constraints, again)
            try:
                _loosen(db, table)
                db.execute(sql, params)
            except sqlite3.Error as exc:
                return f"sql:{op} {table}.{col} failed ({exc})"
        except sqlite3.Error as exc:
            return f"sql:{op} {table}.{col} failed ({exc})"
    return f"sql:{op} {table}.{col} where {where}"
