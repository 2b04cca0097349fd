#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""wgrad_tile_model.py - what a wgrad call would take if each 128x256 dW
tile cost its main loop plus its store (serial) or the larger of the two
(overlap), over the group sizes the benchmark runs (no GPU, no torch).

A tile of a group of t tokens issues ceil(t/16) k16 steps (a group's last
k-block issues only the steps that hold tokens, docs/sm90_wgrad.md,
seventh session), priced at --kblock-us per 64 tokens; its store at
--store-us.  Tiles are spread evenly over --sms SMs (no wave tail: the
forty-second session's simulation put it at 0.1-0.5%).  The defaults are an
H200's: a 128x256x64 k-block at the floor's FLOP rate (torch_peer's
FLOP_CEIL) over 132 SMs, and 64 KiB at its copy rate (BYTES_CEIL) shared
by 132 SMs.  For each pair of cases named X_bal and X_skew it also
prints the skewed time over the balanced one under each model, to set
beside measured ratios (hundred-and-third session).

    python3 python/bench/wgrad_tile_model.py --cases bench/corpus.tsv --only gptoss120b_fc1
"""
import argparse
import math
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "bench"))
from torch_peer import BYTES_CEIL, FLOP_CEIL, case_args, load_cases  # noqa: E402

SMS = 132   # an H200's


def tile_model(K, N, sizes, kblock_us, store_us, sms):
    """(serial, overlap) milliseconds of one wgrad call of dW [N, K] a group."""
    tiles = math.ceil(N / 128) * math.ceil(K / 256)
    serial = overlap = 0.0
    for t in sizes:
        main = math.ceil(t / 16) / 4 * kblock_us
        serial += tiles * (main + store_us)
        overlap += tiles * max(main, store_us)
    return serial / sms / 1000, overlap / sms / 1000


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    case_args(ap)
    ap.add_argument("--only", default="", help="comma-separated name prefixes")
    ap.add_argument("--kblock-us", type=float, default=2 * 128 * 256 * 64 / (FLOP_CEIL / SMS) * 1e6)
    ap.add_argument("--store-us", type=float, default=128 * 256 * 2 / (BYTES_CEIL / SMS) * 1e6)
    ap.add_argument("--sms", type=int, default=SMS)
    a = ap.parse_args()
    prefixes = [p for p in a.only.split(",") if p]
    models = {}
    for name, K, N, sizes in load_cases(a.bench, a.cases):
        if prefixes and not any(name.startswith(p) for p in prefixes):
            continue
        models[name] = tile_model(K, N, sizes, a.kblock_us, a.store_us, a.sms)
        print(f"{name:24s} serial {models[name][0]:8.3f} ms   overlap {models[name][1]:8.3f} ms")
    for name, (ser, ovl) in models.items():
        if name.endswith("_skew") and name[:-5] + "_bal" in models:
            bser, bovl = models[name[:-5] + "_bal"]
            print(f"{name[:-5]:24s} skew / bal: serial {ser / bser:.3f}   overlap {ovl / bovl:.3f}")


if __name__ == "__main__":
    main()
