# Times torch.distributed's all-reduce (gloo, float32, SUM) at each size
# given, the floor of collective's BenchmarkAllReduceVsGloo. Every rank runs
# this with RANK, WORLD_SIZE, MASTER_ADDR and MASTER_PORT set.
#
#   gloo_bench.py BYTES:WARMUP:REPS [BYTES:WARMUP:REPS ...]
#
# For each size: WARMUP untimed all-reduces, then REPS timed ones, each
# after a barrier; a repetition's time is the slowest rank's. Rank 0 prints
# one line per size:
#
#   GLOO bytes=1024 world=4 reps=200 median_s=0.000123 min_s=0.000101 sum_ok=1 all_s=0.000130,...
#
# all_s is every repetition's time, in order; sum_ok says the last all-reduce gave every element the sum of the ranks'
# values, on every rank. One thread per rank (OMP_NUM_THREADS=1 too), so
# that several ranks on a few cores do not oversubscribe them.
import datetime
import os
import sys
import time

import torch
import torch.distributed as dist

torch.set_num_threads(1)
dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=float(os.environ.get("GLOO_BENCH_TIMEOUT", "120"))))
rank, world = dist.get_rank(), dist.get_world_size()
want = float(world * (world + 1) // 2)  # rank r holds r+1

for spec in sys.argv[1:]:
    size, warmup, reps = (int(x) for x in spec.split(":"))
    if size < 4 or warmup < 0 or reps < 1:
        sys.exit(f"gloo_bench.py: {spec}: want BYTES >= 4, WARMUP >= 0, REPS >= 1")
    n = size // 4
    t = torch.empty(n, dtype=torch.float32)
    for _ in range(warmup):
        t.fill_(rank + 1)
        dist.all_reduce(t)
    times = torch.zeros(reps, dtype=torch.float64)
    for i in range(reps):
        t.fill_(rank + 1)
        dist.barrier()
        t0 = time.perf_counter()
        dist.all_reduce(t)
        times[i] = time.perf_counter() - t0
    ok = torch.tensor([1 if bool((t == want).all()) else 0], dtype=torch.int32)
    dist.all_reduce(ok, op=dist.ReduceOp.MIN)
    dist.all_reduce(times, op=dist.ReduceOp.MAX)
    if rank == 0:
        med = times.sort().values[reps // 2].item()  # as the Go side's median
        print(f"GLOO bytes={size} world={world} reps={reps} median_s={med:.9f} min_s={times.min().item():.9f} sum_ok={int(ok.item())} all_s={','.join(f'{x:.9f}' for x in times.tolist())}", flush=True)

dist.destroy_process_group()
