#!/usr/bin/env python3
"""What CUDA virtual memory costs per byte for different physical handle sizes, on the GPU it runs on.

For each handle size, maps TOTAL bytes as handles of that size (cuMemCreate + cuMemMap each, one
cuMemSetAccess per map call of MAP bytes), then unmaps it (cuMemUnmap + cuMemRelease), and prints the
milliseconds per GiB of each phase, median of --runs; then, for the device's granularity, the cost of each
driver call on its own (cuMemCreate, cuMemMap, cuMemSetAccess over the whole range, cuMemUnmap, cuMemRelease). The driver is reached through ctypes (libcuda.so.1);
torch (or any CUDA runtime) is used only to create the primary context.

Usage: vmm_handle_cost.py [--total-gib 4] [--map-mib 64] [--sizes-mib 2,4,8,20,64] [--runs 5] [--json F]
"""
import argparse
import ctypes
import json
import statistics
import sys
import time


class AllocProp(ctypes.Structure):  # CUmemAllocationProp
    _fields_ = [("type", ctypes.c_int), ("requestedHandleTypes", ctypes.c_int), ("locType", ctypes.c_int),
                ("locId", ctypes.c_int), ("win32HandleMetaData", ctypes.c_void_p),
                ("compressionType", ctypes.c_ubyte), ("gpuDirectRDMACapable", ctypes.c_ubyte),
                ("usage", ctypes.c_ushort), ("reserved", ctypes.c_ubyte * 4)]


class AccessDesc(ctypes.Structure):  # CUmemAccessDesc
    _fields_ = [("locType", ctypes.c_int), ("locId", ctypes.c_int), ("flags", ctypes.c_int)]


def check(code, what):
    if code != 0:
        raise RuntimeError(f"{what} failed with CUresult {code}")


def phase_costs(cu, va, total, prop, access, chunk, runs):
    """Microseconds per chunk of each call on its own (median of runs): cuMemCreate of every chunk, then
    cuMemMap of each, one cuMemSetAccess over the range (divided by the chunks), cuMemUnmap, cuMemRelease."""
    count = total // chunk
    samples = {"cuMemCreate": [], "cuMemMap": [], "cuMemSetAccess": [], "cuMemUnmap": [], "cuMemRelease": []}
    for _ in range(runs):
        handles = [ctypes.c_ulonglong() for _ in range(count)]
        t = time.perf_counter()
        for h in handles:
            check(cu.cuMemCreate(ctypes.byref(h), ctypes.c_size_t(chunk), ctypes.byref(prop), ctypes.c_ulonglong(0)),
                  "cuMemCreate")
        samples["cuMemCreate"].append(time.perf_counter() - t)
        t = time.perf_counter()
        for i, h in enumerate(handles):
            check(cu.cuMemMap(ctypes.c_ulonglong(va.value + i * chunk), ctypes.c_size_t(chunk), ctypes.c_size_t(0), h,
                              ctypes.c_ulonglong(0)), "cuMemMap")
        samples["cuMemMap"].append(time.perf_counter() - t)
        t = time.perf_counter()
        check(cu.cuMemSetAccess(ctypes.c_ulonglong(va.value), ctypes.c_size_t(count * chunk), ctypes.byref(access),
                                ctypes.c_size_t(1)), "cuMemSetAccess")
        samples["cuMemSetAccess"].append(time.perf_counter() - t)
        t = time.perf_counter()
        for i in range(count):
            check(cu.cuMemUnmap(ctypes.c_ulonglong(va.value + i * chunk), ctypes.c_size_t(chunk)), "cuMemUnmap")
        samples["cuMemUnmap"].append(time.perf_counter() - t)
        t = time.perf_counter()
        for h in handles:
            check(cu.cuMemRelease(h), "cuMemRelease")
        samples["cuMemRelease"].append(time.perf_counter() - t)
    return {name: statistics.median(values) * 1e6 / count for name, values in samples.items()}


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--total-gib", type=float, default=4)
    parser.add_argument("--map-mib", type=int, default=64, help="bytes per map call (one cuMemSetAccess each)")
    parser.add_argument("--sizes-mib", default="2,4,8,20,64")
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--json")
    args = parser.parse_args()
    import torch

    torch.cuda.init()
    torch.zeros(1, device="cuda")  # the primary context exists and is current
    cu = ctypes.CDLL("libcuda.so.1")
    prop = AllocProp(type=1, requestedHandleTypes=0, locType=1, locId=torch.cuda.current_device())
    access = AccessDesc(locType=1, locId=torch.cuda.current_device(), flags=3)
    gran = ctypes.c_size_t()
    check(cu.cuMemGetAllocationGranularity(ctypes.byref(gran), ctypes.byref(prop), 0), "granularity")
    total = int(args.total_gib * (1 << 30))
    va = ctypes.c_ulonglong()
    check(cu.cuMemAddressReserve(ctypes.byref(va), ctypes.c_size_t(total), ctypes.c_size_t(0),
                                 ctypes.c_ulonglong(0), ctypes.c_ulonglong(0)), "reserve")
    rows = []
    for size_mib in [int(s) for s in args.sizes_mib.split(",")]:
        size = size_mib << 20
        map_bytes = max(args.map_mib << 20, size)
        count = total // size
        maps, unmaps = [], []
        for _ in range(args.runs):
            handles, access_set = [], 0
            t0 = time.perf_counter()
            for i in range(count):
                h = ctypes.c_ulonglong()
                check(cu.cuMemCreate(ctypes.byref(h), ctypes.c_size_t(size), ctypes.byref(prop), ctypes.c_ulonglong(0)),
                      "cuMemCreate")
                check(cu.cuMemMap(ctypes.c_ulonglong(va.value + i * size), ctypes.c_size_t(size), ctypes.c_size_t(0), h,
                                  ctypes.c_ulonglong(0)), "cuMemMap")
                handles.append(h)
                end = (i + 1) * size
                if end - access_set >= map_bytes or i == count - 1:
                    check(cu.cuMemSetAccess(ctypes.c_ulonglong(va.value + access_set), ctypes.c_size_t(end - access_set),
                                            ctypes.byref(access), ctypes.c_size_t(1)), "cuMemSetAccess")
                    access_set = end
            t1 = time.perf_counter()
            for i, h in enumerate(handles):
                check(cu.cuMemUnmap(ctypes.c_ulonglong(va.value + i * size), ctypes.c_size_t(size)), "cuMemUnmap")
                check(cu.cuMemRelease(h), "cuMemRelease")
            t2 = time.perf_counter()
            gib = count * size / (1 << 30)
            maps.append((t1 - t0) * 1000 / gib)
            unmaps.append((t2 - t1) * 1000 / gib)
        row = {"handle_mib": size_mib, "handles": count, "map_ms_per_gib": statistics.median(maps),
               "unmap_ms_per_gib": statistics.median(unmaps), "map_us_per_handle": statistics.median(maps) * 1000 * size / (1 << 30)}
        rows.append(row)
        print(f"handle {size_mib:>3} MiB x {count:>5}: map {row['map_ms_per_gib']:7.2f} ms/GiB "
              f"({row['map_us_per_handle']:7.1f} us/handle), unmap {row['unmap_ms_per_gib']:7.2f} ms/GiB", flush=True)
    phases = phase_costs(cu, va, total, prop, access, gran.value, args.runs)
    print("per 2 MiB chunk, each driver call timed alone (us): " +
          ", ".join(f"{name} {value:.1f}" for name, value in phases.items()), flush=True)
    cu.cuMemAddressFree(va, ctypes.c_size_t(total))
    print(f"granularity {gran.value} bytes; {args.total_gib} GiB per run, median of {args.runs}")
    if args.json:
        json.dump({"granularity": gran.value, "rows": rows, "phases_us_per_chunk": phases}, open(args.json, "w"),
                  indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
