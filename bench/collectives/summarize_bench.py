#!/usr/bin/env python3
"""Prints a short table from mpi_allreduce_bench or nccl_allreduce_bench JSON (stdin or a file)."""
import json
import sys


def size(b):
    for unit, shift in (("GiB", 30), ("MiB", 20), ("KiB", 10)):
        if b >= 1 << shift:
            return f"{b / (1 << shift):g} {unit}"
    return f"{b} B"


data = json.load(open(sys.argv[1]) if len(sys.argv) > 1 else sys.stdin)
if "allreduce" not in data:
    print(data)
    sys.exit(0)
rows = data["allreduce"]
print(f"ranks={data['ranks']} {data.get('device', '')}")
if "raw_mpi_us" in rows[0]:
    print(f"{'size':>9} {'raw MPI us':>11} {'raw Iallr us':>12} {'ours us':>9} {'ours+verify us':>14} {'raw busbw':>10} {'ours busbw':>10}")
    for r in rows:
        print(f"{size(r['bytes']):>9} {r['raw_mpi_us']:11.1f} {r.get('raw_mpi_iallreduce_us', float('nan')):12.1f} {r['ours_us']:9.1f} {r['ours_verified_us']:14.1f} "
              f"{r['raw_mpi_busbw_gbps']:10.3f} {r['ours_busbw_gbps']:10.3f}")
else:
    print(f"{'size':>9} {'raw us':>9} {'ours pipe us':>12} {'ours block us':>13} {'raw algbw':>10} {'ours algbw':>10}")
    for r in rows:
        print(f"{size(r['bytes']):>9} {r['raw_nccl_us']:9.1f} {r['ours_pipelined_us']:12.1f} {r['ours_blocking_us']:13.1f} "
              f"{r['raw_algbw_gbps']:10.2f} {r['ours_pipelined_algbw_gbps']:10.2f}")
print("bucketer:", json.dumps(data.get("bucketer")))
