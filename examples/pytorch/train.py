#!/usr/bin/env python3
"""Data-parallel training of a real transformers/torchvision model (random weights, nothing downloaded) with
memcoord as PyTorch's allocator. The three memcoord lines are marked below.

    torchrun --nproc-per-node 2 examples/pytorch/train.py --workload tiny_gpt2 --steps 50
    launch/memcoord-launch -n 2 --start-coordinator -- python3 examples/pytorch/train.py --workload gpt2_fp32

Under torchrun the ranks come from RANK/WORLD_SIZE/LOCAL_RANK; under memcoord-launch (mpirun) from Open MPI's
variables, copied to torch.distributed's here (one host: MASTER_ADDR 127.0.0.1). The process-group backend
is NCCL when every rank has its own GPU, else gloo over the CUDA tensors (NCCL refuses two ranks on one GPU).
Each step runs inside memcoord.step(): coordinator trims land at a step's end on every rank, and an abort (a
rank died) ends this process with exit code 75 naming the dead rank. Prints the loss and memory every
--log-every steps and a final line; exits 1 unless the loss fell.
"""

import argparse
import os
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.append(str(HERE.parent.parent / "python"))  # the source tree's package when none is installed

import memcoord  # memcoord line 1

memcoord.enable()  # memcoord line 2: before the first CUDA allocation

import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402

import workloads  # noqa: E402
from arguments import positive_int  # noqa: E402


def distributed_environment():
    """RANK/WORLD_SIZE/LOCAL_RANK/MASTER_* for torch.distributed, from torchrun's or Open MPI's variables."""
    if "RANK" not in os.environ and "OMPI_COMM_WORLD_RANK" in os.environ:
        os.environ["RANK"] = os.environ["OMPI_COMM_WORLD_RANK"]
        os.environ["WORLD_SIZE"] = os.environ["OMPI_COMM_WORLD_SIZE"]
        os.environ["LOCAL_RANK"] = os.environ.get("OMPI_COMM_WORLD_LOCAL_RANK", "0")
    os.environ.setdefault("RANK", "0")
    os.environ.setdefault("WORLD_SIZE", "1")
    os.environ.setdefault("LOCAL_RANK", "0")
    os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
    os.environ.setdefault("MASTER_PORT", "29512")
    return int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"]), int(os.environ["LOCAL_RANK"])




def main():
    parser = argparse.ArgumentParser(description="data-parallel training under memcoord")
    parser.add_argument("--workload", default="tiny_gpt2", choices=sorted(workloads.BUILDERS))
    parser.add_argument("--steps", type=positive_int, default=None, help="default: the workload's own")
    parser.add_argument("--backend", default="auto", choices=["auto", "nccl", "gloo"])
    parser.add_argument("--log-every", type=positive_int, default=5)
    args = parser.parse_args()

    rank, world, local_rank = distributed_environment()
    device_index = local_rank % torch.cuda.device_count()
    torch.cuda.set_device(device_index)
    backend = args.backend
    if backend == "auto":
        backend = "nccl" if world <= torch.cuda.device_count() else "gloo"
    dist.init_process_group(backend, rank=rank, world_size=world)

    workload = workloads.make(args.workload, device=f"cuda:{device_index}")
    def average(grad):  # gradients averaged over the ranks as backward produces them
        dist.all_reduce(grad)
        return grad.div_(world)

    for module in workload.modules:
        for p in module.parameters():
            p.register_hook(average)
    steps = args.steps or workloads.STEPS[args.workload]
    losses = []
    started = time.perf_counter()
    for i in range(steps):
        with memcoord.step():  # memcoord line 3: a safe point at each step's end
            losses.append(workload.step(i))
        if rank == 0 and (i % args.log_every == 0 or i == steps - 1):
            s = memcoord.stats(device_index)
            print(f"step {i:4d} | loss {losses[-1]:.4f} | allocated {s['allocated_bytes'] / 1e9:.2f} GB reserved "
                  f"{s['reserved_bytes'] / 1e9:.2f} GB | {(time.perf_counter() - started) / (i + 1) * 1000:.0f} ms/step",
                  flush=True)
    dist.barrier()
    dist.destroy_process_group()
    fell = losses[-1] < losses[0]
    if rank == 0:
        print(f"train: {args.workload} on {world} rank(s) over {backend}: loss {losses[0]:.4f} -> {losses[-1]:.4f} "
              f"({'fell' if fell else 'DID NOT FALL'}); memcoord peak reserved "
              f"{torch.cuda.max_memory_reserved() / 1e9:.2f} GB", flush=True)
    return 0 if fell else 1


if __name__ == "__main__":
    sys.exit(main())
