"""The compiled parts: the optional Kineto event scanner (advisor/trace/_kscan.c) and SQLite
table scanner (advisor/trace/_sqlscan.c).

Everything else is in pyproject.toml. Both extensions are optional: where they cannot be
built (no C compiler), the install still succeeds, the Kineto reader decodes with msgspec
alone and the Nsight reader reads every table through SQLite (the same tables, slower)."""

from setuptools import Extension, setup

setup(
    ext_modules=[
        Extension(
            "advisor.trace._kscan",
            ["advisor/trace/_kscan.c"],
            # (the contract with the reader, generated from advisor/trace/kineto/schema.py)
            depends=["advisor/trace/_kscan_contract.h"],
            optional=True,
            extra_compile_args=["-O3", "-Wall"],
        ),
        Extension(
            "advisor.trace._sqlscan",
            ["advisor/trace/_sqlscan.c"],
            optional=True,
            extra_compile_args=["-O3", "-Wall"],
        ),
    ]
)
