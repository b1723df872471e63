"""AMD hardware counters decide the kernel advice as Nsight Compute's do (issue 29): the same
rules (rules/scheduling.yaml) on the values advisor/data/amd_counters.yaml derives, on a
hand-built rocpd database (tests/trace/rocpd_db.write_gemm) whose numbers are worked out here:

    MI300X (agent: 304 CUs, 4 SIMDs x 8 waves, 64 KiB LDS; built-in 5300 GB/s), the Tensile
    GEMM Cijk_... launched 3 times, 100 us each: 320 workgroups of 256 work-items, 64 KiB
    LDS each -> 1 workgroup per CU, 304 slots, 320 / 304 = 1.052632 waves, the last 16 / 304
    = 5.3 % full: tail fraction 1 - 1.052632 / 2 = 0.473684, 47,368.4 ns per launch,
    142,105 ns over the 3 -> wave-tail-gemm, Stream-K, 142,105 ns (the timeline alone)

    DRAM-bound: TCC_BUBBLE 3,000,000 (128-byte reads, all of TCC_EA0_RDREQ 3,000,000,
    TCC_EA0_RDREQ_32B 0) and TCC_EA0_WRREQ = TCC_EA0_WRREQ_64B = 1,000,000 per dispatch:
    128 * 3e6 + 64 * 1e6 = 448,000,000 B in 100,000 ns = 4480 GB/s = 84.528302 % of 5300
    -> memory-bound-kernel, no Stream-K (dram_pct >= 80)

    per-SE busy cycles (SQ_BUSY_CYCLES, 4 instances): 200000, 100000, 100000, 100000 ->
    busiest / average 200000 / 125000 = 1.6, SEs idle 1 - 125000 / 200000 = 37.5 %:
    the tail confirmed, its estimate the smaller of 142,105 and 0.375 * 300,000 = 112,500;
    200000, 195000, 190000, 195000 -> average 195000, idle 2.5 % < 10 %: the tail refuted
"""

import json
import subprocess
import sys

import pytest
from conftest import PUBLIC_ROCPROF, ROOT
from test_counter_rules import timeline_only_rules

from advisor.analysis import analyze
from advisor.findings import find, steady_spans
from advisor.rules.engine import evaluate, load_rules
from advisor.rules.tables import build_tables
from advisor.trace.load import load_trace

sys.path.insert(0, str(ROOT / "tests" / "trace"))
from rocpd_db import GEMM, RocpdWriter, open_db, write_gemm  # noqa: E402

DRAM = {"TCC_BUBBLE": 3e6, "TCC_EA0_RDREQ": 3e6, "TCC_EA0_RDREQ_32B": 0, "TCC_EA0_WRREQ": 1e6,
        "TCC_EA0_WRREQ_64B": 1e6}  # fmt: skip
UNEVEN = {"SQ_BUSY_CYCLES": [200000, 100000, 100000, 100000]}
EVEN = {"SQ_BUSY_CYCLES": [200000, 195000, 190000, 195000]}


@pytest.fixture(scope="module")
def db(tmp_path_factory):
    """make(name, counters): the hand-built database with those PMC values (made once)."""
    tmp = tmp_path_factory.mktemp("amd")
    made: dict[str, str] = {}

    def make(name: str, counters: dict | None = None) -> str:
        if name not in made:
            p = tmp / f"{name}_results.db"
            with open_db(p) as conn:
                write_gemm(RocpdWriter(conn, "77aa_0bcd"), counters)
            made[name] = str(p)
        return made[name]

    return make


def findings(path: str) -> dict[str, object]:
    return {f.rule: f for f in find(analyze(load_trace(path)))}


def test_the_timeline_alone_says_stream_k(db):
    (f,) = findings(db("plain")).values()
    assert (f.rule, f.strategy, f.est_savings_ns) == ("wave-tail-gemm", "stream_k", 142105)
    assert f.counters is None
    # in AMD's words: 320 workgroups, 1 per CU (not CTAs and SMs)
    assert "320 workgroups on 304 slots (1 workgroup/CU)" in f.summary
    assert "CTA" not in f.summary and "SM" not in f.summary


def test_a_dram_bound_dispatch_gets_no_compute_side_strategy(db):
    found = findings(db("dram", DRAM))
    assert list(found) == ["memory-bound-kernel"]
    f = found["memory-bound-kernel"]
    assert (f.strategy, f.est_savings_ns) == ("memory_bound", 0)
    assert f.counters["dram_pct"] == pytest.approx(84.5283, abs=1e-4)  # (4 decimals)
    assert f.counters["counter_launches"] == 3
    assert "DRAM at 84.5 % of its peak" in f.summary and "DRAM 84.5 % of peak" in f.summary


def test_per_se_imbalance_confirms_the_tail(db):
    (f,) = findings(db("uneven", UNEVEN)).values()
    assert (f.rule, f.strategy, f.est_savings_ns) == ("wave-tail-gemm", "stream_k", 112500)
    assert f.counters["sm_imbalance"] == 1.6 and f.counters["sm_idle_fraction"] == 0.375
    assert "shader engines active max/avg 1.60 (37.5 % idle)" in f.summary  # (per SE on AMD)


def test_per_se_balance_refutes_the_tail(db):
    assert findings(db("even", EVEN)) == {}


def test_a_counter_collection_joined_with_the_cli_flips_the_advice(db, tmp_path):
    # the same DRAM counters as rocprofv3's CSV of another run of the program (3 dispatches,
    # 100 us each), joined to the timeline by name, 320 x 256 work-items of 256 and order
    head = ('"Correlation_Id","Dispatch_Id","Agent_Id","Queue_Id","Process_Id","Thread_Id",'
            '"Grid_Size","Kernel_Id","Kernel_Name","Workgroup_Size","LDS_Block_Size",'
            '"Scratch_Size","VGPR_Count","Accum_VGPR_Count","SGPR_Count","Counter_Name",'
            '"Counter_Value","Start_Timestamp","End_Timestamp"')  # fmt: skip
    rows = [f'{d},{d},"Agent 2",1,99,99,81920,7,"{GEMM}",256,65536,0,128,128,96,"{name}",'
            f"{value},{d * 1_000_000},{d * 1_000_000 + 100_000}"
            for d in (1, 2, 3) for name, value in DRAM.items()]  # fmt: skip
    csv = tmp_path / "run2_counter_collection.csv"
    csv.write_text("\n".join([head, *rows]) + "\n")
    proc = subprocess.run([sys.executable, "-m", "advisor", "analyze", db("plain"), "--counters",
                           str(csv), "--format", "json"], capture_output=True, text=True,
                          timeout=120)  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(proc.stdout)
    assert [f["rule"] for f in doc["findings"]] == ["memory-bound-kernel"]
    (kernel,) = doc["kernels"]
    assert kernel["counters"]["counter_launches"] == 3
    assert kernel["counters"]["dram_pct"] == pytest.approx(84.528302, abs=1e-6)
    # all 3 joined; said: the counters this file lacks (it has DRAM's: 5 of the 6 values)
    (warning,) = [w for w in doc["trace"]["warnings"] if "--counters" in w]
    assert "5 of the 6 values advisor reads from AMD counters are missing" in warning


@pytest.mark.parametrize(
    "path", sorted((PUBLIC_ROCPROF / "v3").glob("*kernel_trace*.csv")), ids=lambda p: p.name
)
def test_without_counters_the_advice_on_amd_traces_is_the_timelines(path):
    a = analyze(load_trace(path, gpu="MI300X"))
    tables = build_tables(a)
    shipped = evaluate(load_rules(), tables, steady_spans(a))
    before = evaluate(timeline_only_rules(), tables, steady_spans(a))
    assert [f.__dict__ for f in shipped] == [f.__dict__ for f in before]
