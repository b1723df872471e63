"""The compiled scanner's contract with the Kineto reader is one table (kineto/schema.py,
derived in kineto/contract.py): the C header the scanner includes is generated from it and
committed, and a build of another contract is not used."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from advisor.trace.kineto import cheader, contract, schema

ROOT = Path(__file__).resolve().parents[2]


def test_the_committed_header_is_generated_from_the_table():
    # (after a change to the table: python -m advisor.trace.kineto.cheader, then rebuild)
    assert cheader.HEADER == ROOT / "advisor" / "trace" / "_kscan_contract.h"
    assert cheader.HEADER.read_text() == cheader.header(), (
        "advisor/trace/_kscan_contract.h is stale: run python -m advisor.trace.kineto.cheader"
    )
    assert f'#define KSCAN_CONTRACT "{contract.DIGEST}"' in cheader.header()


def test_the_modes_follow_the_categories_table():
    assert tuple(schema.CATEGORIES) == contract.SCAN_CATEGORIES
    for (cat, (_, args)), letter in zip(schema.CATEGORIES.items(), contract.SCAN_MODES,
                                        strict=True):  # fmt: skip
        if args is None:
            assert letter == contract.SKIP_MODE, cat
        elif args is schema.OpArgs:
            assert letter == contract.RAW_MODE and cat in schema.OP_CATEGORIES, cat
        else:
            assert contract.READ_MODES[letter] is args, cat
    # every field of the structs the scanner reads is a key it knows, and a column it returns
    for struct in contract.READ_MODES.values():
        for field, key in zip(struct.__struct_fields__, struct.__struct_encode_fields__,
                              strict=True):  # fmt: skip
            assert contract.ARG_FIELDS[field] == key
            columns = [f"{field}_{a}" for a in "xyz"] if field in schema.XYZ_FIELDS else [field]
            assert set(columns) <= set(contract.FLOAT_COLUMNS)
    assert schema.Event.__struct_encode_fields__ == contract.EVENT_KEYS


def test_the_built_scanner_is_of_this_contract():
    try:
        from advisor.trace import _kscan
    except ImportError:
        if os.environ.get("ADVISOR_REQUIRE_SCANNER") == "1":  # (.ci/run: it must be built)
            raise
        pytest.skip("the compiled scanner is not built here")
    assert _kscan.CONTRACT == contract.DIGEST, "rebuild it: pip install -e . --no-deps"
    from advisor.trace import kineto

    assert kineto._kscan is _kscan


def test_a_build_of_another_contract_is_not_used():
    code = (
        "import sys, types\n"
        "stale = types.ModuleType('advisor.trace._kscan')\n"
        "stale.CONTRACT = 'another'\n"
        "sys.modules['advisor.trace._kscan'] = stale\n"
        "from advisor.trace import kineto\n"
        "assert kineto._kscan is None and not kineto.scanner_enabled()\n"
    )
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]),
    }
    subprocess.run([sys.executable, "-c", code], check=True, env=env, timeout=120)
