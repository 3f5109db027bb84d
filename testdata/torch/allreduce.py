# Every rank joins torch.distributed (gloo) from the torchrun variables
# monarch sets, all-reduces a tensor holding its rank and prints the sum.
# FAIL_RANK=r makes rank r raise instead (with FAIL_ONCE=file, only while
# file does not exist: it creates it, so a restart succeeds, and every
# rank says which attempt and MASTER_PORT it got); SLEEP=s makes every
# rank sleep s seconds first. HOLD=s keeps the first attempt's ranks
# (TORCHELASTIC_RESTART_COUNT 0) after their all-reduce: each says where
# it is (rank, world, group, attempt, port, host: the line of systest's
# elastic tests), then all-reduces again every 0.1 s for s seconds, so a
# rank whose peer is lost fails in its collective.
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
hold = float(os.environ.get("HOLD", "0"))
if hold and os.environ["TORCHELASTIC_RESTART_COUNT"] == "0":
    host = os.environ.get("MONARCH_HOST_NAME") or os.uname().nodename
    print(f"rank {rank} of {world} group {os.environ['GROUP_RANK']} of {os.environ['GROUP_WORLD_SIZE']} attempt 0 port {os.environ['MASTER_PORT']} on {host}", flush=True)
    end = time.monotonic() + hold
    while time.monotonic() < end:
        dist.all_reduce(t)
        time.sleep(0.1)
dist.destroy_process_group()
