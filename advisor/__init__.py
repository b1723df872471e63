"""advisor: measure scheduling idle time in GPU traces and recommend strategies.

``advisor.analyze(paths, **options)`` and ``advisor.gate(...)`` are the library's entry
points (docs/api.md); they are imported on first use, so ``import advisor`` stays light.
"""

__version__ = "0.1.0"
__all__ = ["Result", "__version__", "analyze", "gate"]


def __getattr__(name: str):
    if name in ("analyze", "gate", "Result"):
        from advisor import api

        return getattr(api, name)
    raise AttributeError(f"module 'advisor' has no attribute {name!r}")
