"""torch.distributed for sweeps: who this process is, its device, and the two collectives a sweep needs.

A launcher (`torchrun`, `accelerate launch`, a cluster script) sets RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR and
MASTER_PORT; without them a process is rank 0 of 1 and nothing here touches torch.distributed. The process group
(gloo on CPU, nccl on CUDA) carries only the start (rank 0 broadcasts the plan) and the end (a barrier that rank 0
polls, so its progress bar keeps moving while the others finish). No collective runs per item: ranks never wait
on each other mid-sweep, and a rank that dies makes the launcher stop the others.
"""
from __future__ import annotations

import os
import time
from dataclasses import dataclass
from datetime import timedelta
from typing import Any, Callable, Mapping, Optional

# Ranks wait for the slowest model load at the start and for the slowest share at the end; the default 30 minutes
# is short for an 8B checkpoint on a network filesystem or a long sweep on uneven GPUs. Under torchrun a dead rank
# stops the job at once; a hand-launched job waits this long for a rank that never comes.
TIMEOUT = timedelta(hours=6)


@dataclass(frozen=True)
class DistEnv:
    rank: int = 0
    world_size: int = 1
    local_rank: int = 0

    @property
    def is_main(self) -> bool:
        return self.rank == 0

    @property
    def distributed(self) -> bool:
        return self.world_size > 1


def dist_env(environ: Mapping[str, str] = os.environ) -> DistEnv:
    """This process's place in the job, from the launcher's environment variables (rank 0 of 1 without them)."""
    def read(name: str, default: int) -> int:
        raw = environ.get(name)
        if raw is None or raw == "":
            return default
        try:
            return int(raw)
        except ValueError:
            raise ValueError(f"{name}: expected an integer, got {raw!r}") from None

    world = read("WORLD_SIZE", 1)
    rank, local = read("RANK", 0), read("LOCAL_RANK", 0)
    if world < 1 or not 0 <= rank < world or local < 0:
        raise ValueError(f"RANK={rank}, WORLD_SIZE={world}, LOCAL_RANK={local}: need 0 <= RANK < WORLD_SIZE")
    if world > 1:
        missing = [k for k in ("MASTER_ADDR", "MASTER_PORT") if not environ.get(k)]
        if missing:
            raise ValueError(f"WORLD_SIZE={world} but {' and '.join(missing)} unset: launch with torchrun "
                             f"(or accelerate launch), which set them")
    return DistEnv(rank, world, local)


def rank_device(requested: Optional[str], env: DistEnv, cuda_available: Optional[bool] = None) -> Optional[str]:
    """One model replica per rank: with CUDA (by default or `--device cuda`) rank r uses GPU LOCAL_RANK; an explicit
    device (`cpu`, `cuda:1`) is kept; None leaves the choice to the loader (CPU without CUDA)."""
    if cuda_available is None:
        import torch

        cuda_available = torch.cuda.is_available()
    if requested in (None, "cuda") and cuda_available:
        return f"cuda:{env.local_rank}"
    return requested


def start(env: DistEnv, device: Any) -> None:
    """Join the process group (a no-op for a single process)."""
    if not env.distributed:
        return
    import torch
    import torch.distributed as dist

    cuda = device is not None and torch.device(device).type == "cuda"
    if cuda:
        torch.cuda.set_device(torch.device(device))
    dist.init_process_group("nccl" if cuda else "gloo", timeout=TIMEOUT)


def broadcast(obj: Any, env: DistEnv) -> Any:
    """Rank 0's `obj` on every rank."""
    if not env.distributed:
        return obj
    import torch.distributed as dist

    box = [obj if env.is_main else None]
    dist.broadcast_object_list(box, src=0)
    return box[0]


def wait_for_all(env: DistEnv, poll: Callable[[], None] = lambda: None, every_s: float = 0.5) -> None:
    """Barrier; rank 0 calls `poll` while it waits (its progress bar), the others just block."""
    if not env.distributed:
        return
    import torch.distributed as dist

    work = dist.barrier(async_op=True)
    if env.is_main:
        while not work.is_completed():
            poll()
            time.sleep(every_s)
    work.wait()


def stop(env: DistEnv) -> None:
    if not env.distributed:
        return
    import torch.distributed as dist

    if dist.is_initialized():
        dist.destroy_process_group()
