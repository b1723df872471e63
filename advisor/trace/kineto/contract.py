"""The compiled scanner's contract (advisor/trace/_kscan.c), derived from the table in
schema.py: the categories it is asked for with a mode letter each (what it does with their
``args``), the event and args keys it reads (the fields of the structs msgspec decodes into),
and the columns it returns. The C side includes the same contract as
advisor/trace/_kscan_contract.h, written from this module by cheader.py::

    python -m advisor.trace.kineto.cheader      # rewrites advisor/trace/_kscan_contract.h

The header is committed (the sanitizer build compiles _kscan.c on its own); the tests check
that it is what cheader.py writes and that the built scanner was compiled from it: its
``CONTRACT`` is DIGEST (a scanner built from another contract is not used: msgspec reads)."""

from __future__ import annotations

import hashlib

import msgspec
import numpy as np

from advisor.trace.kineto.schema import (
    CATEGORIES,
    XYZ_FIELDS,
    ApiArgs,
    CopyArgs,
    Event,
    KernelArgs,
    OpArgs,
)

# the modes, per args struct: 'k', 'c', 'a' read the fields of KernelArgs, CopyArgs,
# ApiArgs into columns (the others stay NaN); 'r' returns the span of the raw args for the
# caller to decode (OpArgs, for the GEMM ops among the CPU ops); '-' args not looked at
READ_MODES: dict[str, type[msgspec.Struct]] = {"k": KernelArgs, "c": CopyArgs, "a": ApiArgs}
RAW_MODE, SKIP_MODE = "r", "-"
_LETTER: dict[type[msgspec.Struct] | None, str] = {
    **{struct: letter for letter, struct in READ_MODES.items()},
    OpArgs: RAW_MODE,
    None: SKIP_MODE,
}
# the categories the reader asks the scanner for, and their modes (also in the header: the
# module's SCAN_CATEGORIES and SCAN_MODES, for a scan started before this module loads)
SCAN_CATEGORIES = tuple(CATEGORIES)
SCAN_MODES = "".join(_LETTER[args] for _, args in CATEGORIES.values())

# the keys read: the event's (Event's fields) and its args' (the read structs' fields:
# field -> JSON key, the numbers first, then the [x, y, z] lists)
EVENT_KEYS: tuple[str, ...] = Event.__struct_encode_fields__
_ARGS: dict[str, str] = {}
for _struct in READ_MODES.values():
    _ARGS.update(zip(_struct.__struct_fields__, _struct.__struct_encode_fields__, strict=True))
ARG_FIELDS = {f: k for f, k in _ARGS.items() if f not in XYZ_FIELDS} | {
    f: _ARGS[f] for f in XYZ_FIELDS
}
NUMBER_ARGS = tuple(f for f in ARG_FIELDS if f not in XYZ_FIELDS)

# the columns returned: native arrays of ``rows`` items (start, dur: ns; args_off,
# args_len: the raw args' span in the buffer; pid, tid and the args fields as floats)
CAT_COLUMN, NAME_COLUMN = "cat", "name"
INT_COLUMNS = ("start", "dur", "args_off", "args_len")
FLOAT_COLUMNS = ("pid", "tid", *NUMBER_ARGS,
                 *(f"{f}_{axis}" for f in XYZ_FIELDS for axis in "xyz"))  # fmt: skip
COLUMN_TYPES = {CAT_COLUMN: np.int8, NAME_COLUMN: np.int32,
                **dict.fromkeys(INT_COLUMNS, np.int64),
                **dict.fromkeys(FLOAT_COLUMNS, np.float64)}  # fmt: skip


def _canonical() -> str:
    """The contract as text: what DIGEST covers."""
    modes = [(letter, [f for f in ARG_FIELDS if f in struct.__struct_fields__])
             for letter, struct in READ_MODES.items()]  # fmt: skip
    return repr((EVENT_KEYS, ARG_FIELDS, NUMBER_ARGS, modes, RAW_MODE, SKIP_MODE, CAT_COLUMN,
                 NAME_COLUMN, INT_COLUMNS, FLOAT_COLUMNS, SCAN_CATEGORIES,
                 SCAN_MODES))  # fmt: skip


# the contract's digest: the header's KSCAN_CONTRACT, the built scanner's CONTRACT
DIGEST = hashlib.sha256(_canonical().encode()).hexdigest()[:16]
