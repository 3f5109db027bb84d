# A training loop that checkpoints when its job is about to end, the
# torchrun way: SIGUSR1 (monarch's notice, as Slurm's --signal and
# submitit send it) saves a checkpoint and goes on; SIGTERM (a stop)
# saves one and exits 0. Each rank joins torch.distributed (gloo) from the
# variables monarch sets, all-reduces a step counter, and writes its
# checkpoints to $CKPT_DIR/rank<r>.pt. With EXIT_ON_NOTICE=1 a rank
# leaves (status 0) once it has checkpointed on SIGUSR1.
import os
import signal
import sys
import time

import torch
import torch.distributed as dist

dist.init_process_group("gloo")
rank = dist.get_rank()
ckpt_dir = os.environ["CKPT_DIR"]
step = 0


def save(why):
    path = os.path.join(ckpt_dir, f"rank{rank}.pt")
    torch.save({"step": step, "why": why}, path + ".tmp")
    os.replace(path + ".tmp", path)
    print(f"rank {rank} checkpointed at step {step} ({why})", flush=True)


def on_notice(signum, frame):
    save(signal.Signals(signum).name)
    if os.environ.get("EXIT_ON_NOTICE") == "1":
        sys.exit(0)


def on_term(signum, frame):
    save("SIGTERM")
    print(f"rank {rank} stopping", flush=True)
    sys.exit(0)


signal.signal(signal.SIGUSR1, on_notice)
signal.signal(signal.SIGTERM, on_term)
t = torch.zeros(1)
dist.all_reduce(t)
print(f"rank {rank} ready", flush=True)
while True:
    step += 1
    time.sleep(0.05)
