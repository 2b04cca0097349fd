#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""wgrad_order_sim.py - what handing out a wgrad launch's work units largest
group first would buy over the group order, by simulation (no GPU).

The cooperative 128x256 wgrad kernels take work units in a dynamic order
(templates/sm90_wgrad.cuh, DYN): the CTA that is free first takes the next
unit, the units of group 0 first, then group 1's, and so on.  Issue 11 names
"largest groups first" against a wave tail from one large group.  This
simulates that greedy list schedule over 132 CTAs with a unit's cost
`c0 + k-blocks` (c0 the epilogue in k-blocks' time, 2 by the eighth
session's account of a short tile), in group order and sorted by k-blocks
(descending, ties in group order; or by their power of two, which a kernel
could sort by with a few buckets), on random routings of the kinds issue 11
names, and prints the makespan over the average CTA's load (1.0 = no tail).

    python3 python/bench/wgrad_order_sim.py [--draws 20] [--seed 1]

Forty-second session (docs/sm90_wgrad.md): the group order's tail is
0.1-0.5% on these routings; largest first takes back 0.1-0.4% of it on the
Dirichlet ones and loses 0.2-0.3% on irregular counts, so it was not built.
"""
import argparse
import heapq
import random

CTAS = 132
C0 = 2.0   # a unit's epilogue, in k-blocks

# name, groups, tokens, units a group (128x256 tiles of dW [N, K]), routing
CASES = [
    ("dirichlet_g128", 128, 32768, (1536 // 128) * (2048 // 256), "dirichlet"),
    ("irregular_g64", 64, 9600, (2048 // 128) * (2048 // 256), "random"),
    ("qwen3_dir_g128", 128, 16384, (1536 // 128) * (2048 // 256), "dirichlet"),
    ("dsv3_dir_g256", 256, 65536, (2048 // 128) * (7168 // 256), "dirichlet"),
    ("mixtral_dir_g8", 8, 32768, (14336 // 128) * (4096 // 256), "dirichlet"),
]


def sizes(rng, groups, tokens, kind):
    if kind == "dirichlet":   # Dirichlet(1/2) shares
        w = [rng.gammavariate(0.5, 1.0) for _ in range(groups)]
    else:                     # irregular: a uniform count in [1, 300)
        w = [rng.randrange(1, 300) for _ in range(groups)]
    total = sum(w)
    m = [int(x / total * tokens) for x in w]
    m[0] += tokens - sum(m)
    return m


def makespan(costs):
    free = [0.0] * CTAS   # when each CTA is next free; the earliest takes the next unit
    for c in costs:
        heapq.heapreplace(free, free[0] + c)
    return max(free)


def tail(m, units, key):
    kb = [(x + 63) // 64 for x in m]
    order = sorted(range(len(m)), key=key(kb)) if key else range(len(m))
    costs = [C0 + kb[g] for g in order for _ in range(units)]
    return makespan(costs) / (sum(costs) / CTAS)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--draws", type=int, default=20)
    ap.add_argument("--seed", type=int, default=1)
    a = ap.parse_args()
    rng = random.Random(a.seed)
    exact = lambda kb: (lambda g: -kb[g])
    pow2 = lambda kb: (lambda g: -kb[g].bit_length())
    print(f"{'case':16s} {'group order':>12s} {'largest first':>14s} {'by power of 2':>14s}")
    for name, groups, tokens, units, kind in CASES:
        r = [0.0, 0.0, 0.0]
        for _ in range(a.draws):
            m = sizes(rng, groups, tokens, kind)
            for i, key in enumerate((None, exact, pow2)):
                r[i] += tail(m, units, key) / a.draws
        print(f"{name:16s} {r[0]:12.4f} {r[1]:14.4f} {r[2]:14.4f}")


if __name__ == "__main__":
    main()
