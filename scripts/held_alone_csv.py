#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""held_alone_csv.py - python/bench/variant_bench.py's held-alone times as
`kiln tune --csv` rows, for scripts/table_from_csv.py --supersede.

    scripts/held_alone_csv.py --log VARIANT_LOG --sides NAME,... [--exclude SHAPE,...]
                              TUNE_CSV... > OUT.csv

On shapes at the card's power limit the reliable comparison of kernels is
each held alone for a few seconds (docs/tuning.md, "Order matters on a hot
card"); `kiln tune` times bursts.  variant_bench.py --sample prints, per
case and op, the kernel each side served ("NAME MS ms ... KERNEL") and then
"NAME alone for S s: MS ms at ..." for each side.  For each side of --sides
(a one-kernel tuning table made by `kiln tune`), every row of the tune
CSVs (those runs' --csv) whose variant is the kernel that side served on
that case and op is written again with the held-alone time in median_ms
(TFLOP/s recomputed), the shape named SHAPE@held and the note "held alone
S s"; the class, types and every other column stay the tune run's.
--exclude leaves shapes out (held-out layers must not shape the table).
Exit 2 on bad input, naming the file and line.
"""
import argparse
import csv
import re
import sys

CASE = re.compile(r"^(\S+) (fprop|dgrad|wgrad): torch ")
SERVED = re.compile(r"^  (\S+) +[0-9.]+ ms  x[0-9.]+ torch .* (\S+)$")
HELD = re.compile(r"^  (\S+) +alone for ([0-9.]+) s: +([0-9.]+) ms at ")


class Bad(Exception):
    pass


def read_log(path):
    """({(case, op, side): kernel}, {(case, op, side): (ms, seconds)}) from a
    variant_bench.py --sample log."""
    served, held, cur = {}, {}, None
    with open(path) as f:
        for n, line in enumerate(f, 1):
            line = line.rstrip("\n")
            m = CASE.match(line)
            if m:
                cur = (m.group(1), m.group(2))
                continue
            m = HELD.match(line) or SERVED.match(line)
            if not m:
                continue
            if cur is None:
                raise Bad("%s:%d: a side's line before any case line" % (path, n))
            if m.re is HELD:
                held[cur + (m.group(1),)] = (float(m.group(3)), m.group(2))
            else:
                served[cur + (m.group(1),)] = m.group(2)
    if not held:
        raise Bad("%s: no held-alone lines (variant_bench.py --sample S)" % path)
    return served, held


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--log", required=True, help="variant_bench.py --sample output")
    ap.add_argument("--sides", required=True, help="comma-separated side names of the log")
    ap.add_argument("--exclude", default="", help="comma-separated shapes to leave out")
    ap.add_argument("csv", nargs="+", help="kiln tune --csv output of the sides' tables")
    a = ap.parse_args()
    try:
        served, held = read_log(a.log)
        sides = [s for s in a.sides.split(",") if s]
        skip = set(s for s in a.exclude.split(",") if s)
        w, header, used = None, None, {s: 0 for s in sides}
        for path in a.csv:
            with open(path, newline="") as f:
                r = csv.DictReader(f)
                for col in ("variant", "shape", "op", "state", "median_ms", "tflops", "groups",
                            "tokens_per_group", "k", "n", "note"):
                    if col not in (r.fieldnames or []):
                        raise Bad("%s: no column %s (not kiln tune --csv output)" % (path, col))
                if header is None:
                    header = r.fieldnames
                    w = csv.DictWriter(sys.stdout, fieldnames=header, lineterminator="\n")
                    w.writeheader()
                elif r.fieldnames != header:
                    raise Bad("%s: its columns differ from %s's" % (path, a.csv[0]))
                for row in r:
                    if row["state"] != "timed" or row["shape"] in skip:
                        continue
                    for side in sides:
                        key = (row["shape"], row["op"], side)
                        if served.get(key) != row["variant"] or key not in held:
                            continue
                        ms, secs = held[key]
                        flops = 2.0 * int(row["groups"]) * int(row["tokens_per_group"]) * \
                            int(row["n"]) * int(row["k"])
                        out = dict(row, shape=row["shape"] + "@held", median_ms="%g" % ms,
                                   tflops="%.4g" % (flops / (ms * 1e-3) / 1e12),
                                   note="held alone %s s" % secs)
                        w.writerow(out)
                        used[side] += 1
        for side, n in used.items():
            if not n:
                raise Bad("side %s: no row of the tune CSVs is its kernel on a case of %s"
                          % (side, a.log))
    except (Bad, OSError, ValueError) as e:
        print("held_alone_csv.py: %s" % e, file=sys.stderr)
        sys.exit(2)


if __name__ == "__main__":
    main()
