"""One options object for every analysis path (one trace, many traces, report, gate): what
the user asked for, as plain values (picklable for worker processes), with parsing and
validation in one place. The CLI only fills it in."""

from __future__ import annotations

from dataclasses import dataclass, replace
from functools import cached_property

from advisor.metrics.gemm import GemmOption, ShapeOption


@dataclass(frozen=True)
class AnalysisOptions:
    """``gpu``: --gpu NAME; ``gpu_spec``: --gpu-spec FILE; ``rule_paths``: --rules;
    ``shapes``: --shape PATTERN=MxNxK texts; ``gemms``: --gemm PATTERN texts;
    ``range_text``/``device``: the selection; ``emit_dir``: --emit; ``jobs``: worker
    processes for several traces; ``dask``: the Dask scheduler that runs them instead;
    ``counters``: --counters FILE, hardware counters joined to the trace's kernels."""

    gpu: str | None = None
    gpu_spec: str | None = None  # --gpu-spec FILE.yaml
    rule_paths: tuple[str, ...] = ()
    shapes: tuple[str, ...] = ()
    gemms: tuple[str, ...] = ()
    range_text: str | None = None
    device: int | None = None
    emit_dir: str | None = None
    jobs: int | None = None
    dask: str | None = None  # --dask ADDRESS (tcp:// or tls://host:port, or "local")
    counters: str | None = None  # --counters FILE (ncu report or raw page, AMD counters)

    @cached_property
    def shape_options(self) -> list[ShapeOption]:
        """The parsed --shape values (AdvisorInputError names the bad one)."""
        return [ShapeOption.parse(s) for s in self.shapes]

    @cached_property
    def gemm_options(self) -> list[GemmOption]:
        """The parsed --gemm values (AdvisorInputError names the bad one)."""
        return [GemmOption.parse(g) for g in self.gemms]

    @cached_property
    def gpu_override(self):
        """What overrides the traces' GPU facts: a --gpu name, the GpuSpec of --gpu-spec, or
        None (AdvisorInputError for both at once or a bad file)."""
        from advisor.errors import AdvisorInputError
        from advisor.trace.gpus import gpu_from_file

        if self.gpu and self.gpu_spec:
            raise AdvisorInputError(None, "give --gpu NAME or --gpu-spec FILE, not both")
        return gpu_from_file(self.gpu_spec) if self.gpu_spec else self.gpu

    @cached_property
    def _rule_set(self):
        from advisor.rules.engine import load_rules

        return load_rules(list(self.rule_paths))

    def rules(self):
        """The rules in force: built-in plus --rules (AdvisorInputError on a bad file), read
        and compiled once per options object."""
        return self._rule_set

    def check(self) -> AnalysisOptions:
        """Parse everything that can be wrong before any trace is read; returns self."""
        from pathlib import Path

        from advisor.trace.load import check_readable_file

        _ = self.shape_options, self.gemm_options, self.gpu_override
        self.rules()
        if self.counters:
            check_readable_file(Path(self.counters))
        return self

    def with_selection(self, range_text: str | None, device: int | None) -> AnalysisOptions:
        return replace(self, range_text=range_text, device=device)
