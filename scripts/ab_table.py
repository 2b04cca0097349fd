# SPDX-License-Identifier: Apache-2.0
"""Medians over rounds of kiln_bench's tuned/untuned table (best of 3
alternating medians per run), old vs new, for every (case, op, kernel)."""
import glob, re, statistics, sys
out = sys.argv[1]
data = {}   # (case, op, which) -> side -> [tflops], and kernel names
names = {}
for path in sorted(glob.glob(f"{out}/bench_*_*.log")):
    side = re.search(r"bench_(old|new)_\d+\.log", path).group(1)
    text = open(path).read()
    part = text.split("As shipped vs against", 1)   # kiln_bench --untuned's table
    if len(part) < 2:
        continue
    for line in part[1].splitlines()[2:]:
        f = line.split()
        if len(f) < 8 or f[0] == "case":
            continue
        case, op, tuned, untuned, kt, ku = f[0], f[1], float(f[2]), float(f[3]), f[5], f[7]
        for which, tf, k in (("tuned", tuned, kt), ("default", untuned, ku)):
            if which == "default" and ku == kt:
                continue   # the same kernel as tuned: measured once
            data.setdefault((case, op, which), {}).setdefault(side, []).append(tf)
            names[(case, op, which)] = k
print(f"{'case':14s} {'op':9s} {'path':7s} {'old':>7s} {'new':>7s} {'new/old':>8s} {'n':>3s} {'old spread':>10s}  kernel")
worst = []
for key in sorted(data):
    d = data[key]
    if "old" not in d or "new" not in d:
        continue
    o, n = statistics.median(d["old"]), statistics.median(d["new"])
    spread = (max(d["old"]) - min(d["old"])) / o * 100
    worst.append(n / o)
    print(f"{key[0]:14s} {key[1]:9s} {key[2]:7s} {o:7.1f} {n:7.1f} {n / o:8.3f} {len(d['new']):3d} {spread:9.1f}%  {names[key]}")
if worst:
    print(f"{len(worst)} comparisons; new/old min {min(worst):.3f} max {max(worst):.3f} "
          f"geomean {statistics.geometric_mean(worst):.4f}; outside ±2%: "
          f"{sum(1 for w in worst if abs(w - 1) > 0.02)}")
