"""Internal errors the reader fuzz found beyond the readers, each reduced to a hand-made
trace (a new one is marked xfail (strict) until the module's owner fixes it)."""

import json

from advisor import api


def test_a_blocking_call_of_no_duration_beside_a_module_load(tmp_path):
    launch = {"device": 0, "stream": 7, "grid": [1, 1, 1], "block": [64, 1, 1]}
    kernel = {"ph": "X", "cat": "kernel", "name": "k", "pid": 0, "tid": 7, "dur": 10,
              "args": launch}  # fmt: skip
    host = {"ph": "X", "cat": "cuda_runtime", "pid": 1, "tid": 1}
    events = [
        {**kernel, "ts": 100, "args": {**kernel["args"], "correlation": 1}},
        {**kernel, "ts": 300, "args": {**kernel["args"], "correlation": 3}},
        {**host, "name": "cudaLaunchKernel", "ts": 90, "dur": 5, "args": {"correlation": 1}},
        {**host, "name": "cudaMemcpy", "ts": 150, "dur": 0, "args": {"correlation": 2}},
        {**host, "name": "cuModuleLoadData", "ts": 160, "dur": 100, "args": {"correlation": 4}},
        {**host, "name": "cudaLaunchKernel", "ts": 290, "dur": 5, "args": {"correlation": 3}},
    ]
    path = tmp_path / "t.json"
    path.write_text(json.dumps({"traceEvents": events}))
    api.analyze(str(path), gpu="H100")
