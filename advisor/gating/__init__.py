"""CI gate: compare the steady state of baseline and candidate traces, decide pass or fail.

``metric_set`` (digest.py) digests one analysed trace into a typed ``MetricSet``
(metricset.py, which also reads stored ones); ``compare`` (compare.py) judges each
metric with the tests of stats.py under the thresholds of config.py; ``calibrate``
(calibrate.py) measures a user's own run-to-run noise; run.py goes from trace paths to a
gate result or a comparison report. Exit codes: 0 pass, 1 regression,
2 bad input (docs/gate.md).
"""

from advisor.gating.compare import GateResult, Row, compare
from advisor.gating.config import GateConfig, load_config
from advisor.gating.digest import metric_set
from advisor.gating.metricset import KernelKey, MetricSet
from advisor.gating.stats import GateStatus

__all__ = ["GateConfig", "GateResult", "GateStatus", "KernelKey", "MetricSet", "Row", "compare",
           "load_config", "metric_set"]  # fmt: skip
