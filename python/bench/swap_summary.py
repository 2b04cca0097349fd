#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""The table scripts/swap_trial.sh prints last: per shape and op, the time
of the kernel the shipped table names for the shape's class (kiln tune,
held alone), the best of the other unswapped kernels timed and the best
swap_ab kernel; then the A/B from graphs of python/bench/context_ab.py:
the trial build (swap_ab where its table names it) against this build
(#cur) and torch._grouped_mm, in one process.

    python/bench/swap_summary.py OUT_DIR
"""
import csv
import math
import os
import re
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
TABLE = os.path.join(HERE, "..", "..", "specs", "tuning", "sm_90a.tuning")
# one row of context_ab.py with sides "as is", "#cur" and torch
AB_ROW = re.compile(r"\s+(\S+)\s+(fprop|dgrad)\s+[\d.]+ TFLOP/s\s+as is ([\d.]+) ms x[\d.]+\s+"
                    r"#cur [\d.]+ ms x([\d.]+)\s+torch [\d.]+ ms x([\d.]+)\s+(\S+)")


def table_kernels(path):
    """{(op, class): kernel} of the shipped table's plain bf16 entries."""
    out = {}
    with open(path) as f:
        for line in f:
            p = line.split()
            if len(p) > 8 and p[7] == "->" and p[5] == "plain" and p[2] == "bf16":
                out[(p[1], p[6])] = p[8]
    return out


def geomean(xs):
    return math.exp(sum(map(math.log, xs)) / len(xs)) if xs else float("nan")


def tune_rows(out_dir, op, table):
    """Prints the tune's table for op; returns swap over the table's kernel per shape."""
    path = os.path.join(out_dir, f"tune_{op}.csv")
    if not os.path.exists(path):
        return []
    with open(path) as f:
        rows = list(csv.DictReader(f))
    for r in rows:
        if r["state"] != "timed":
            print(f"  {op} {r['shape']} {r['variant']}: {r['state']} {r.get('note', '')}")
    timed = [r for r in rows if r["state"] == "timed"]
    shapes = list(dict.fromkeys(r["shape"] for r in timed))
    print(f"tune {op}: shape | the table's kernel, ms | best other unswapped | best swap_ab | swap / table's")
    ratios = []
    for s in shapes:
        rs = [r for r in timed if r["shape"] == s]
        named = table.get((op, rs[0]["class"]), "(the model's)")
        ms = lambda r: float(r["median_ms"])  # noqa: E731
        cur = min((r for r in rs if "_swap__" not in r["variant"]), key=ms)
        swap = min((r for r in rs if "_swap__" in r["variant"]), key=ms, default=None)
        if swap is None:
            continue
        base = next((ms(r) for r in rs if r["variant"] == named), ms(cur))
        ratios.append(ms(swap) / base)
        print(f"  {s:24s} {named[-40:]:40s} {base:8.4f} | {cur['variant'][-34:]:34s} {ms(cur):8.4f} | "
              f"{swap['variant'].split('__')[-1]:18s} {ms(swap):8.4f} | x{ratios[-1]:.3f}")
    print(f"  geometric mean, swap over the table's: x{geomean(ratios):.3f}")
    return ratios


def ab_rows(out_dir):
    path = os.path.join(out_dir, "ab.log")
    if not os.path.exists(path):
        return
    print("A/B from graphs of 4: as is = the trial table (swap_ab), #cur = this build; time over as is")
    with open(path) as f:
        for line in f:
            m = AB_ROW.match(line)
            if m:
                name, op, ms, cur, torch, kernel = m.groups()
                print(f"  {name:24s} {op} {kernel[-34:]:34s} {float(ms):8.4f} ms  cur x{float(cur):.3f}"
                      f"  torch x{float(torch):.3f}  (torch over cur x{float(torch) / float(cur):.3f})")
            elif "WRONG" in line or "Traceback" in line or "Error" in line:
                print("  " + line.rstrip())


def main():
    out_dir = sys.argv[1]
    table = table_kernels(TABLE)
    for op in ("fprop", "dgrad"):
        tune_rows(out_dir, op, table)
    ab_rows(out_dir)


if __name__ == "__main__":
    main()
