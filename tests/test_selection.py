"""--device N and --range TEXT give the selected part the numbers the whole run gives it
(issue 31): the same findings with the same savings and text, and the same per-device
rows, on every multi-device sample (one file with two GPUs, its ranks as two files, and a
public two-rank Kineto job)."""

import sys
from pathlib import Path

import pytest

import advisor

ROOT = Path(__file__).resolve().parents[1]
TWO_GPUS = ROOT / "sample_traces" / "h200x2_allreduce.sqlite"
KINETO_JOB = [ROOT / f"tests/data/public/kineto/hta_sampled_rank-{r}.json.gz" for r in (0, 1)]
# tables of the JSON document whose rows carry a device
PER_DEVICE = ("kernels", "region_kernels", "regions", "launch_gaps", "streams", "sequences",
              "top_kernels", "copies", "sync_stalls", "pipeline_stages", "steps")  # fmt: skip

# tables the document cuts to their top rows (views.SEQUENCES_SHOWN, json.TOP_KERNELS)
SHOWN_TOP = ("sequences", "top_kernels")


def _ranks(tmp_path_factory) -> list[str]:
    sys.path.insert(0, str(ROOT / "sample_traces"))
    from split_ranks import split

    return [str(p) for p in split(str(TWO_GPUS), tmp_path_factory.mktemp("ranks"))]


@pytest.fixture(scope="module", params=["one file", "ranks", "kineto job"])
def job(request, tmp_path_factory):
    if request.param == "one file":
        paths = [str(TWO_GPUS)]
    elif request.param == "ranks":
        paths = _ranks(tmp_path_factory)
    else:
        paths = [str(p) for p in KINETO_JOB]
    return paths, advisor.analyze(paths, jobs=1).document


def _findings(doc: dict, keep=lambda f: True) -> list[tuple]:
    return [(f["rule"], f["device"], f["region"], f["kernel"], f["est_savings_ns"], f["summary"])
            for f in doc["findings"] if keep(f)]  # fmt: skip


def test_a_device_gets_the_numbers_the_whole_run_gives_it(job):
    paths, whole = job
    devices = whole["trace"]["devices"]
    assert len(devices) == 2
    for device in devices:
        part = advisor.analyze(paths, jobs=1, device=device).document
        assert _findings(part) == _findings(whole, lambda f, d=device: f["device"] == d)
        for key in PER_DEVICE:
            mine = [r for r in whole[key] if r["device"] == device]
            if key in SHOWN_TOP:  # (the whole shows the top rows of all devices)
                assert part[key][: len(mine)] == mine, key
            else:
                assert part[key] == mine, key
        assert part["collectives"] == whole["collectives"]  # (cross-device: the job's)
        assert "unknown" not in " ".join(f["summary"] for f in part["findings"])


def test_a_range_gets_the_numbers_the_whole_run_gives_it(job):
    paths, whole = job
    names = sorted({r["name"] for r in whole["regions"]})
    if len(paths) > 1 and paths[0].endswith(".json.gz"):
        pytest.skip("a merged job's ranges are selected on its ranks (tested on one file)")
    assert names
    for name in names:
        part = advisor.analyze(paths, jobs=1, range_text=name).document
        assert part["regions"] == [r for r in whole["regions"] if name in r["name"]], name
        inside = _findings(whole, lambda f, n=name: f["region"] is not None and n in f["region"])
        assert _findings(part) == inside, name
