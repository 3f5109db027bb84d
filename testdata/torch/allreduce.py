# Every rank joins torch.distributed (gloo) from the torchrun variables
# monarch sets, all-reduces a tensor holding its rank and prints the sum.
# FAIL_RANK=r makes rank r raise instead; SLEEP=s makes every rank sleep
# s seconds first.
import os
import time

import torch
import torch.distributed as dist

time.sleep(float(os.environ.get("SLEEP", "0")))
dist.init_process_group("gloo")
rank, world = dist.get_rank(), dist.get_world_size()
if os.environ.get("FAIL_RANK") == str(rank):
    raise RuntimeError(f"rank {rank} fails on purpose")
t = torch.tensor([float(rank)])
dist.all_reduce(t)
print(f"rank {rank} of {world} on {os.uname().nodename}: sum {int(t.item())}, expected {world * (world - 1) // 2}", flush=True)
dist.destroy_process_group()
