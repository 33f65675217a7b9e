#!/usr/bin/env python3
"""Run-to-run variation of repeated nccl-tests runs of one configuration.

Usage: repeat_spread.py RAW_LOG RAW_LOG [RAW_LOG...]
       repeat_spread.py --oop-ip CSV [CSV...]

Reads the nccl-tests tables (any layout: the time columns are the 5th and 9th fields from the end-relative
layout `... time algbw busbw error|#wrong time algbw busbw error|#wrong`), takes per size the smaller of the
out-of-place and in-place time (as `fabricsim validate` does, validate/nccl_log.cpp row_time_s), and prints
per size every run's time in microseconds, the spread max/min - 1 and each run's deviation from the first.
Used in docs/validation.md ("How reproducible are the logs") on tests/data/external/abci/repeats/.

--oop-ip: the spread inside one run, for logs without a repeated run: nccl-tests times every size twice, out
of place and in place, one after the other on the same nodes; per log (the tests/data CSV layout,
size_bytes,...,oop_time_us,...,ip_time_us,...) it prints the median and largest |oop / ip - 1| for sizes
>= 1 MiB and below. Used in docs/validation.md ("Multi-node logs") on tests/data/nccl-tests-multinode.
"""
import csv
import os
import sys


def times_us(path):
    out = {}
    with open(path) as f:
        for line in f:
            t = line.split()
            if len(t) < 11 or not t[0].isdigit() or line.lstrip().startswith("#"):
                continue
            # the last 8 fields are: time algbw busbw error|#wrong (out-of-place), the same in place
            oop, ip = t[-8], t[-4]
            vals = [float(v) for v in (oop, ip) if v != "N/A"]
            if vals and int(t[0]) > 0:
                out[int(t[0])] = min(vals)
    return out


def median(v):
    v = sorted(v)
    return v[(len(v) + 1) // 2 - 1] if v else None


def oop_ip(paths):
    print("# log  >=1MiB: sizes median_pct max_pct  <1MiB: sizes median_pct max_pct")
    for p in paths:
        big, small = [], []
        with open(p) as f:
            for row in csv.DictReader(f):
                size, oop, ip = int(row["size_bytes"]), row["oop_time_us"], row["ip_time_us"]
                if size <= 0 or not oop or not ip or float(oop) <= 0 or float(ip) <= 0:
                    continue
                (big if size >= 1 << 20 else small).append(abs(float(oop) / float(ip) - 1) * 100)
        cols = []
        for v in (big, small):
            cols.append(f"{len(v):3d} {median(v):6.1f} {max(v):6.1f}" if v else "  0      -      -")
        print(f"{os.path.basename(p)}  " + "  ".join(cols))


def main(paths):
    if paths and paths[0] == "--oop-ip":
        if len(paths) < 2:
            sys.exit("usage: repeat_spread.py --oop-ip CSV [CSV...]")
        return oop_ip(paths[1:])
    if len(paths) < 2:
        sys.exit("usage: repeat_spread.py RAW_LOG RAW_LOG [RAW_LOG...] (at least two runs)")
    runs = [times_us(p) for p in paths]
    sizes = sorted(set.intersection(*(set(r) for r in runs)))
    if not sizes:
        sys.exit("the logs share no message size")
    for i, p in enumerate(paths):
        print(f"# run {i}: {p}")
    print("# size_bytes  time_us per run  spread_pct  deviation_from_run0_pct")
    for s in sizes:
        ts = [r[s] for r in runs]
        spread = (max(ts) / min(ts) - 1) * 100
        dev = " ".join(f"{(t / ts[0] - 1) * 100:+6.1f}" for t in ts[1:])
        print(f"{s:12d}  " + " ".join(f"{t:9.2f}" for t in ts) + f"  {spread:6.1f}  {dev}")
    big = [max(r[s] for r in runs) / min(r[s] for r in runs) - 1 for s in sizes if s >= 1 << 20]
    small = [max(r[s] for r in runs) / min(r[s] for r in runs) - 1 for s in sizes if s < 1 << 20]
    for name, v in ((">= 1 MiB", big), ("< 1 MiB", small)):
        if v:
            v.sort()
            print(f"# {name}: {len(v)} sizes, spread median {v[(len(v) + 1) // 2 - 1] * 100:.1f} %, max {v[-1] * 100:.1f} %")


if __name__ == "__main__":
    main(sys.argv[1:])
