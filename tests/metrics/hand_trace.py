"""One hand-built single-device trace exercising every gap cause (times in ns).

  op  GPU interval       launch call (corr)            gap before   cause
  k1  [0, 1000)          -                             -            (first op)
  k2  [1500, 2500)       cudaLaunchKernel [200,300]    500          launch_latency
  k3  [4000, 5000)       cudaLaunchKernel [2600,3800]  1500         host_bound
  --  cudaDeviceSynchronize [5100, 5600]
  k4  [7000, 8000)       cudaLaunchKernel [6000,6500]  2000         synchronization
  --  cuModuleLoadData [8100, 9000]
  k5  [10000, 11000)     cudaLaunchKernel [9500,9600]  2000         startup
  k6  [12000, 13000)     cudaGraphLaunch [11100,11200] 1000         host_bound (graph node 1)
  k7  [13100, 14000)     same graph launch             100          graph_internal (node 2)
  k8  [14500, 15000)     corr 99, no API row           500          unattributed

Busy 7400, span 15000, idle 7600; launch overhead 500 + 1500 + 1000 + 100 = 3100.
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
