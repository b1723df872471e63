"""One hand-built single-device trace of the common gap causes (times in ns; each gap split
by metrics/attribution.py's rules: the launch latency bound is the default 20 us).

  op  GPU interval       launch call (corr)            gap  pieces
  k1  [0, 1000)          -                             -    (first op)
  k2  [1500, 2500)       cudaLaunchKernel [200,300]    500  launch_latency 500 (queued early)
  k3  [4000, 5000)       cudaLaunchKernel [2600,3800]  1500 host_bound 1300 (the call ended at
                                                            3800), launch_latency 200
  --  cudaDeviceSynchronize [5100, 5600]
  k4  [7000, 8000)       cudaLaunchKernel [6000,6500]  2000 synchronization 500 (inside the
                                                            call; it began after the device
                                                            idled: no credit), host_bound 1000,
                                                            launch_latency 500
  --  cuModuleLoadData [8100, 9000]
  k5  [10000, 11000)     cudaLaunchKernel [9500,9600]  2000 startup 900 (in the module load),
                                                            host_bound 700, launch_latency 400
  k6  [12000, 13000)     cudaGraphLaunch [11100,11200] 1000 host_bound 200, launch_latency 800
  k7  [13100, 14000)     same graph launch             100  graph_internal 100 (node 2)
  k8  [14500, 15000)     corr 99, no API row           500  unattributed 500

Busy 7400, span 15000, idle 7600; launch overhead = host_bound 3200 + launch_latency 2400 +
graph_internal 100 = 5700.
NVTX (thread 10): "outer" [0, 6000] holding "inner" [100, 400]; "second" [9000, 20000].
"""

from builders import trace

KERNELS = [
    dict(start=0, end=1000, correlation=1),
    dict(start=1500, end=2500, correlation=2),
    dict(start=4000, end=5000, correlation=3),
    dict(start=7000, end=8000, correlation=4),
    dict(start=10000, end=11000, correlation=5),
    dict(start=12000, end=13000, correlation=6, graph_node=1),
    dict(start=13100, end=14000, correlation=6, graph_node=2),
    dict(start=14500, end=15000, correlation=99),
]
API = [
    ("cudaLaunchKernel", 200, 300, 2),
    ("cudaLaunchKernel", 2600, 3800, 3),
    ("cudaDeviceSynchronize", 5100, 5600, None),
    ("cudaLaunchKernel", 6000, 6500, 4),
    ("cuModuleLoadData", 8100, 9000, None),
    ("cudaLaunchKernel", 9500, 9600, 5),
    ("cudaGraphLaunch", 11100, 11200, 6),
]
NVTX = [("outer", 0, 6000), ("inner", 100, 400), ("second", 9000, 20000)]


def hand_trace():
    return trace(KERNELS, API, NVTX)
