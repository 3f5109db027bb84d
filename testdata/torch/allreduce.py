# Every rank joins torch.distributed (gloo) from the torchrun variables
# monarch sets, all-reduces a tensor holding its rank and prints the sum.
# FAIL_RANK=r makes rank r raise instead (with FAIL_ONCE=file, only while
# file does not exist: it creates it, so a restart succeeds, and every
# rank says which attempt and MASTER_PORT it got); SLEEP=s makes every
# rank sleep s seconds first.
import os
import time

import torch
import torch.distributed as dist

time.sleep(float(os.environ.get("SLEEP", "0")))
dist.init_process_group("gloo")
rank, world = dist.get_rank(), dist.get_world_size()
marker = os.environ.get("FAIL_ONCE")
if marker:
    print(f"rank {rank} attempt {os.environ['TORCHELASTIC_RESTART_COUNT']} port {os.environ['MASTER_PORT']}", flush=True)
if os.environ.get("FAIL_RANK") == str(rank) and not (marker and os.path.exists(marker)):
    if marker:
        open(marker, "w").close()
    raise RuntimeError(f"rank {rank} fails on purpose")
t = torch.tensor([float(rank)])
dist.all_reduce(t)
print(f"rank {rank} of {world} on {os.uname().nodename}: sum {int(t.item())}, expected {world * (world - 1) // 2}", flush=True)
dist.destroy_process_group()
