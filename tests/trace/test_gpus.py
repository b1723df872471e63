"""The built-in GPU table, --gpu-spec files and --gpu that contradicts a trace."""

import subprocess
import sys

import pytest
from conftest import H200_SINGLE

from advisor.data import load_yaml
from advisor.errors import AdvisorInputError
from advisor.trace.gpus import builtin_gpus, gpu_from_file, match_gpu
from advisor.trace.load import load_trace

REQUIRED = ["T4", "A10G", "A40", "L4", "L40S", "A100-PCIe-40GB", "A100-PCIe-80GB",
            "A100-SXM4-40GB", "A100-SXM4-80GB", "H100-PCIe", "H100-SXM", "H100-NVL", "H20",
            "H800", "GH200", "H200", "H200-NVL", "B200", "B300", "GB200", "RTX-3090",
            "RTX-4090", "RTX-5090", "MI100", "MI210", "MI250", "MI250X", "MI300A", "MI300X",
            "MI325X", "MI350X", "MI355X"]  # fmt: skip


def test_the_table_covers_the_common_gpus_with_sources():
    names = [g.name for g in builtin_gpus()]
    assert set(REQUIRED) <= set(names) and len(names) == len(set(names))
    for row in load_yaml("gpus.yaml")["gpus"]:
        assert row["cited"], row["name"]  # every entry says where its numbers come from
        assert row["sm_count"] > 0 and row["shared_mem_per_sm"] > 0


@pytest.mark.parametrize(
    ("vendor", "cc", "given", "reserved"),
    [("nvidia", "9.0", None, 1024), ("nvidia", "8.0", None, 1024), ("nvidia", "7.5", None, 0),
     ("amd", "gfx942", None, 0), ("nvidia", "9.0", 0, 0), ("nvidia", "7.0", 512, 512)],
)  # fmt: skip
def test_gpu_spec_reserved_shared_memory_as_the_driver_reserves_it(
    tmp_path, vendor, cc, given, reserved
):
    # docs/metrics.md: 1024 B per CTA from compute capability 8.0, 0 before and on AMD,
    # unless the file gives its own value
    text = SPEC.replace("vendor: amd", f"vendor: {vendor}").replace("gfx942", cc)
    if given is not None:
        text += f"reserved_shared_mem_per_block: {given}\n"
    f = tmp_path / "gpu.yaml"
    f.write_text(text)
    assert gpu_from_file(str(f)).reserved_shared_mem_per_block == reserved


@pytest.mark.parametrize(
    "device_name, entry",
    [("NVIDIA H200", "H200"), ("NVIDIA H200 NVL", "H200-NVL"), ("NVIDIA H100 NVL", "H100-NVL"),
     ("NVIDIA H100 80GB HBM3", "H100-SXM"), ("NVIDIA A100 80GB PCIe", "A100-PCIe-80GB"),
     ("NVIDIA A100-SXM4-40GB", "A100-SXM4-40GB"), ("Tesla T4", "T4"), ("NVIDIA A10G", "A10G"),
     ("NVIDIA GH200 480GB", "GH200"), ("AMD Instinct MI250", "MI250"), ("gfx90a", "MI250X"),
     ("gfx942", "MI300X"), ("AMD Instinct MI300A", "MI300A")],
)  # fmt: skip
def test_device_names_find_the_most_specific_entry(device_name, entry):
    assert match_gpu(device_name).name == entry


SPEC = """name: Mystery-9
vendor: amd
sm_count: 100
compute_capability: gfx942
max_warps_per_sm: 32
max_blocks_per_sm: 32
registers_per_sm: 512
shared_mem_per_sm: 65536
"""


def test_gpu_spec_file(tmp_path):
    f = tmp_path / "gpu.yaml"
    f.write_text(SPEC)
    spec = gpu_from_file(str(f))
    assert (spec.name, spec.sm_count, spec.warp_size, spec.max_shared_mem_per_block) == (
        "Mystery-9", 100, 64, 65536
    )  # fmt: skip
    t = load_trace(H200_SINGLE, gpu=spec)
    assert t.gpus[0].source == "--gpu-spec gpu.yaml"
    # it contradicts the trace's own facts (an H200, 132 SMs): said, not hidden
    assert any("overrides what the trace reports for device 0 (NVIDIA H200" in w
               for w in t.warnings)  # fmt: skip


@pytest.mark.parametrize(
    "text, says",
    [(SPEC.replace("sm_count: 100", "sm_count: -4"), "'sm_count'"),
     ("\n".join(SPEC.splitlines()[:-1]), "'shared_mem_per_sm': missing (required)"),
     (SPEC + "colour: red\n", "'colour'"),
     ("a: &a [1, 1]\nb: &b [*a, *a, *a, *a, *a, *a, *a, *a, *a]\n"
      "c: &c [*b, *b, *b, *b, *b, *b, *b, *b, *b]\nd: &d [*c, *c, *c, *c, *c, *c, *c, *c]\n"
      "e: &e [*d, *d, *d, *d, *d, *d, *d, *d, *d, *d, *d, *d, *d, *d, *d, *d]\n"
      "f: [*e, *e, *e, *e, *e, *e, *e, *e, *e, *e]\n", "alias bomb"),
     ("[not, a, mapping]\n", "--gpu-spec")],
)  # fmt: skip
def test_bad_gpu_spec_files(tmp_path, text, says):
    f = tmp_path / "bad.yaml"
    f.write_text(text)
    with pytest.raises(AdvisorInputError) as err:
        gpu_from_file(str(f))
    assert says in str(err.value) and str(f) in str(err.value)
    proc = subprocess.run([sys.executable, "-m", "advisor", "analyze", str(H200_SINGLE),
                           "--gpu-spec", str(f)], capture_output=True, text=True)  # fmt: skip
    assert proc.returncode == 2 and proc.stdout == ""
    assert len(proc.stderr.strip().splitlines()) == 1


def test_gpu_and_gpu_spec_together_are_refused(tmp_path):
    f = tmp_path / "gpu.yaml"
    f.write_text(SPEC)
    proc = subprocess.run([sys.executable, "-m", "advisor", "analyze", str(H200_SINGLE),
                           "--gpu-spec", str(f), "--gpu", "H200"], capture_output=True,
                          text=True)  # fmt: skip
    assert proc.returncode == 2 and "give --gpu NAME or --gpu-spec FILE, not both" in proc.stderr


def test_a_gpu_option_that_contradicts_the_trace_warns():
    t = load_trace(H200_SINGLE, gpu="H100-PCIe")
    (w,) = [w for w in t.warnings if "overrides" in w]
    assert "H100-PCIe, 114 SMs" in w and "NVIDIA H200, 132 SMs" in w
    same = load_trace(H200_SINGLE, gpu="H200")  # agrees with the trace: no warning
    assert not [w for w in same.warnings if "overrides" in w]


def test_fallback_facts_of_an_unknown_amd_gpu_are_cdna_and_leave_nvidia_alone():
    from advisor.trace.gpus import fallback_facts

    amd = fallback_facts("amd")
    # gpus.yaml's cdna section: 4 SIMDs x 8 waves = 32 waves per CU, wave64, 64 KiB LDS
    assert amd["max_warps_per_sm"] == 32 and amd["warp_size"] == 64
    assert amd["shared_mem_per_sm"] == 65536 == amd["max_shared_mem_per_block"]
    assert amd["reserved_shared_mem_per_block"] == 0
    # asking for AMD's facts must not change NVIDIA's (the sections are cached)
    nvidia = fallback_facts("nvidia")
    assert nvidia["warp_size"] == 32 and nvidia["max_warps_per_sm"] == 64
    assert nvidia["shared_mem_per_sm"] == 0 and nvidia["max_shared_mem_per_block"] == 49152


def test_a_kineto_amd_device_without_thread_limits_gets_cdna_waves():
    from advisor.trace.kineto.devices import _spec
    from advisor.trace.kineto.schema import DeviceProps

    # an AMD GPU the table does not know, with no maxThreadsPerMultiprocessor: 32 waves/CU
    props = DeviceProps(id=0, name="AMD Instinct MI999", numSms=80, warpSize=64,
                        gcnArchName="gfx9ff:sramecc+:xnack-")  # fmt: skip
    spec = _spec(props, 80)
    assert spec.vendor == "amd" and spec.max_warps_per_sm == 32
    assert spec.shared_mem_per_sm == 65536
