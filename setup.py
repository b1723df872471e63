"""The one compiled part: the optional Kineto event scanner (advisor/trace/_kscan.c).

Everything else is in pyproject.toml. The extension is optional: where it cannot be built
(no C compiler), the install still succeeds and the Kineto reader decodes with msgspec alone
(the same tables, slower)."""

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
        )
    ]
)
