# ---- shared by every emitted script: where it runs, and --set KNOB=INT -----------------
import argparse  # noqa: E402
import sys  # noqa: E402


def _device() -> str:
    if torch.cuda.is_available():
        return "cuda"
    if os.environ.get("TRITON_INTERPRET") == "1":
        return "cpu"  # Triton's interpreter: numerics only, no timing
    sys.exit("needs a CUDA GPU (or TRITON_INTERPRET=1 to check numerics on the CPU)")


def _apply_sets(items: list[str]) -> None:
    """--set KNOB=INT overrides of CONFIG (exit with the known knobs on a bad one)."""
    for item in items:
        key, _, value = item.partition("=")
        if key not in CONFIG or not value.lstrip("-").isdigit():
            sys.exit(f"--set {item!r}: expected KNOB=INT with KNOB one of {sorted(CONFIG)}")
        CONFIG[key] = int(value)
