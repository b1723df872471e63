"""Writes the compiled scanner's contract (contract.py) as the C header it includes::

    python -m advisor.trace.kineto.cheader      # rewrites advisor/trace/_kscan_contract.h

tests/trace/test_kscan_contract.py checks that the committed header is what this writes."""

from __future__ import annotations

import sys
from pathlib import Path

from advisor.trace.kineto.contract import (
    ARG_FIELDS,
    CAT_COLUMN,
    DIGEST,
    EVENT_KEYS,
    FLOAT_COLUMNS,
    INT_COLUMNS,
    NAME_COLUMN,
    NUMBER_ARGS,
    RAW_MODE,
    READ_MODES,
    SCAN_CATEGORIES,
    SCAN_MODES,
    SKIP_MODE,
)
from advisor.trace.kineto.schema import OpArgs

HEADER = Path(__file__).resolve().parents[1] / "_kscan_contract.h"


def _wrap(head: str, items: list[str], tail: str, indent: str, sep: str = ",") -> str:
    """``head``, the items joined by ``sep`` and a space, ``tail``: in lines of at most 92
    characters (the next ones starting with ``indent``)."""
    lines, line = [], head
    for i, item in enumerate(items):
        last = i == len(items) - 1
        text = item + ("" if last else sep)
        fresh = line in (head, indent)
        wider = (line + text if fresh else f"{line} {text}") + (tail if last else "")
        if len(wider) > 92 and not fresh:
            lines.append(line)
            line = indent + text
        else:
            line = line + text if fresh else f"{line} {text}"
    return "\n".join([*lines, line + tail])


def _enum(prefix: str, names, count: str) -> str:
    return _wrap("enum { ", [f"{prefix}{n.upper()}" for n in names] + [count], " };", " " * 7)


def _strings(name: str, count: str, values) -> str:
    head = f"static const char *{name}[{count}] = {{"
    return _wrap(head, [f'"{v}"' for v in values], "};", " " * 4)


def _body() -> str:
    """The header's declarations."""
    for name in (*EVENT_KEYS, *ARG_FIELDS, *INT_COLUMNS, *FLOAT_COLUMNS, *SCAN_CATEGORIES):
        if not name.isidentifier():
            raise ValueError(f"{name!r}: not a C identifier")
    if len(ARG_FIELDS) > 32:
        raise ValueError("at most 32 args fields (a bit each in an unsigned)")
    modes = []
    for letter, struct in READ_MODES.items():
        bits = [f"BIT(A_{f.upper()})" for f in ARG_FIELDS if f in struct.__struct_fields__]
        modes.append(_wrap(f"    {{'{letter}', ", bits, f", 0}}, /* {struct.__name__} */",
                           " " * 10, " |"))  # fmt: skip
    modes.append(f"    {{'{RAW_MODE}', 0, 1}}, /* {OpArgs.__name__}: the raw args */")
    modes.append(f"    {{'{SKIP_MODE}', 0, 0}}, /* args not looked at */")
    letters = [*READ_MODES, RAW_MODE, SKIP_MODE]
    return "\n".join([
        "/* the event's keys read (the fields of kineto's Event) */",
        _enum("K_", EVENT_KEYS, "N_KEYS"),
        _strings("KEYS", "N_KEYS", EVENT_KEYS),
        "",
        "/* the args keys read (the fields of "
        + ", ".join(s.__name__ for s in READ_MODES.values())
        + "):",
        " * the numbers (the first N_NUM_ARGS), then the [x, y, z] lists */",
        _enum("A_", ARG_FIELDS, "N_ARGS"),
        f"#define N_NUM_ARGS {len(NUMBER_ARGS)}",
        _strings("ARG_KEYS", "N_ARGS", ARG_FIELDS.values()),
        "",
        "/* the modes, a letter per category: read the args fields of a struct (a bit per A_",
        " * field), return the span of the raw args (raw), or leave the args alone */",
        "#define BIT(f) (1u << (f))",
        "typedef struct {",
        "    char letter;",
        "    unsigned args;",
        "    int raw;",
        "} Mode;",
        f"#define N_MODES {len(letters)}",
        f'#define MODE_LETTERS "{"".join(letters)}"',
        '#define MODES_PROBLEM "modes: one of ' + ", ".join(f"'{x}'" for x in letters)
        + ' per category"',
        "static const Mode MODES[N_MODES] = {",
        *modes,
        "};",
        "",
        "/* the columns returned: cat (int8), name (int32), the int64 ones, the float64 ones */",
        f'#define CAT_COLUMN "{CAT_COLUMN}"',
        f'#define NAME_COLUMN "{NAME_COLUMN}"',
        _enum("C_", INT_COLUMNS, "N_INT_COLS"),
        _strings("INT_COLS", "N_INT_COLS", INT_COLUMNS),
        _enum("F_", FLOAT_COLUMNS, "N_F_COLS"),
        f"#define F_FIRST_ARG F_{NUMBER_ARGS[0].upper()} /* the numbers' columns, in A_ order */",
        _strings("F_COLS", "N_F_COLS", FLOAT_COLUMNS),
        "",
        "/* the categories the reader asks for and their modes (the module's SCAN_CATEGORIES",
        " * and SCAN_MODES: a scan started before the reader's modules load uses them) */",
        f"#define N_SCAN_CATEGORIES {len(SCAN_CATEGORIES)}",
        _strings("SCAN_CATEGORIES", "N_SCAN_CATEGORIES", SCAN_CATEGORIES),
        f'#define SCAN_MODES "{SCAN_MODES}"',
    ])  # fmt: skip


def header() -> str:
    """The text of advisor/trace/_kscan_contract.h."""
    return "\n".join([
        "/* The compiled scanner's contract with the Kineto reader. GENERATED from the table in",
        " * advisor/trace/kineto/schema.py by `python -m advisor.trace.kineto.cheader`: do not",
        " * edit (tests/trace/test_kscan_contract.py checks that it is up to date). */",
        "#ifndef KSCAN_CONTRACT_H",
        "#define KSCAN_CONTRACT_H",
        "",
        "/* the contract's digest: the module's CONTRACT (kineto uses no other build) */",
        f'#define KSCAN_CONTRACT "{DIGEST}"',
        "",
        _body(),
        "",
        "#endif",
        "",
    ])  # fmt: skip


def main() -> int:
    HEADER.write_text(header())
    print(f"wrote {HEADER} (contract {DIGEST})", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
