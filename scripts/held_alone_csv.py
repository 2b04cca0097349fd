#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""held_alone_csv.py - python/bench/variant_bench.py's held-alone times (or
fp8_bench.py's and context_ab.py's alternating ones) as `kiln tune --csv`
rows, for scripts/table_from_csv.py --supersede.

    scripts/held_alone_csv.py --log LOG --sides NAME,... [--exclude SHAPE,...]
                              [--keys OP:CLASS,...] TUNE_CSV... > OUT.csv

On shapes at the card's power limit the reliable comparison of kernels is
each held alone for a few seconds (docs/tuning.md, "Order matters on a hot
card"); `kiln tune` times bursts.  variant_bench.py --sample prints, per
case and op, the kernel each side served ("NAME MS ms ... KERNEL") and then
"NAME alone for S s: MS ms at ..." for each side.  For each side of --sides
(a one-kernel tuning table made by `kiln tune`), every row of the tune
CSVs (those runs' --csv) whose variant is the kernel that side served on
that case and op is written again with the held-alone time in median_ms
(TFLOP/s recomputed), the shape named SHAPE@held and the note "held alone
S s"; the class, types and every other column stay the tune run's.  The
fp8 form, fp8_bench.py --variants ... --sample S (row-wise fprop or dgrad),
prints the same lines with its TFLOP/s beside each time and is read the
same way.
--exclude leaves shapes out (held-out layers must not shape the table);
--keys keeps only the rows of those tuning keys (a re-time of some classes
must give every shape of each, or table_from_csv.py --supersede would
choose its entry from part of the class).

A log of python/bench/fp8_bench.py --steady --compare (one line a case and
side: "  CASE SIDE MS ms ... KERNEL", the sides of one op timed in
alternating rounds) is read the same way: each side's time there, with the
shape named SHAPE@steady and the note "alternating at steady state".  Such
a log has no held-alone lines; its sides are its kernel names
(fprop@table for the tables' choice).
A log of python/bench/context_ab.py (one line a case and op: "  CASE OP
TF TFLOP/s  SIDE MS ms xR  ...  torch MS ms xR  KERNEL") is read the same
way (its ops wgrad_acc and wgrad_discrete are the tune rows of epilogue
accumulate and wgrad_output): the side "as is" served KERNEL, a side
KILN_KERNEL=NAME served NAME
(sides of another build, NAME#TAG, and other settings name no kernel); each
side's time there, with the shape named SHAPE@ab and the note "context_ab,
alternating at steady state".  A case and side the log times more than
once (several processes, several calls' logs joined) gives its last time,
or with --mean the mean of all of them ("mean of N").
Exit 2 on bad input, naming the file and line.
"""
import argparse
import csv
import re
import sys

# variant_bench.py's case line "CASE OP: torch ..." and side line "  NAME MS ms
# x.. torch ... KERNEL"; fp8_bench.py --variants's "CASE OP row: torch ..."
# and "  NAME MS ms TF TFLOP/s ... x.. torch ... KERNEL"
CASE = re.compile(r"^(\S+) (fprop|dgrad|wgrad)(?: row)?: torch ")
SERVED = re.compile(r"^  (\S+) +[0-9.]+ ms +(?:[0-9.]+ TFLOP/s .*)?x[0-9.]+ torch .* (\S+)$")
HELD = re.compile(r"^  (\S+) +alone for ([0-9.]+) s: +([0-9.]+) ms at ")
COMPARE = re.compile(r"^  (\S+) +(\S+) +([0-9.]+) ms +[0-9.]+ TFLOP/s .* of the first .* (\S+)$")
# context_ab.py's "  CASE OP TF TFLOP/s  SIDE MS ms xR ...  KERNEL" and its sides
AB = re.compile(r"^  (\S+) +(fprop|dgrad|wgrad(?:_acc|_discrete)?) +[0-9.]+ TFLOP/s  (.*\S) +(\S+)$")
# context_ab.py's wgrad ops other than overwriting dense dW, by the tune
# CSV's epilogue of the same calls
AB_WGRAD_OPS = {"accumulate": "wgrad_acc", "wgrad_output": "wgrad_discrete"}
AB_SIDE = re.compile(r"(as is|\S+) ([0-9.]+) ms x[0-9.]+")


class Bad(Exception):
    pass


def read_log(path, mean=False):
    """({(case, op, side): kernel}, {(case, op, side): (ms, shape suffix,
    note)}) from a variant_bench.py --sample log, an fp8_bench.py --steady
    --compare log or a context_ab.py log; a context_ab.py side timed more
    than once, its last time or (mean) the mean of its times."""
    served, held, cur = {}, {}, None
    ab_times = {}
    with open(path) as f:
        for n, line in enumerate(f, 1):
            line = line.rstrip("\n")
            m = AB.match(line)
            if m:
                case, op, sides, kernel = m.groups()
                for side, ms in AB_SIDE.findall(sides):
                    if side == "as is":
                        name = kernel
                    elif side.startswith("KILN_KERNEL=") and "#" not in side:
                        name = side[len("KILN_KERNEL="):]
                    else:
                        continue
                    if served.get((case, op, side), name) != name:
                        raise Bad("%s:%d: %s %s side %s served %s here, %s before"
                                  % (path, n, case, op, side, name, served[(case, op, side)]))
                    served[(case, op, side)] = name
                    ab_times.setdefault((case, op, side), []).append(float(ms))
                continue
            m = COMPARE.match(line)
            if m:
                case, side, ms, kernel = m.groups()
                key = (case, "dgrad" if "dgrad" in side else "fprop", side)
                served[key] = kernel
                held[key] = (float(ms), "@steady", "alternating at steady state")
                continue
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
                held[cur + (m.group(1),)] = (float(m.group(3)), "@held",
                                             "held alone %s s" % m.group(2))
            else:
                served[cur + (m.group(1),)] = m.group(2)
    note = "context_ab, alternating at steady state"
    for key, times in ab_times.items():
        if mean and len(times) > 1:
            held[key] = (sum(times) / len(times), "@ab", "%s, mean of %d" % (note, len(times)))
        else:
            held[key] = (times[-1], "@ab", note)
    if not held:
        raise Bad("%s: no held-alone lines (variant_bench.py or fp8_bench.py --variants "
                  "with --sample S) and no "
                  "fp8_bench.py --compare or context_ab.py lines" % path)
    return served, held


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--log", required=True,
                    help="variant_bench.py --sample, fp8_bench.py --variants --sample, "
                         "fp8_bench.py --steady --compare or context_ab.py output")
    ap.add_argument("--sides", required=True, help="comma-separated side names of the log")
    ap.add_argument("--exclude", default="", help="comma-separated shapes to leave out")
    ap.add_argument("--keys", default="",
                    help="comma-separated OP:CLASS: only rows of these (all, if none given)")
    ap.add_argument("--mean", action="store_true",
                    help="a context_ab.py side timed more than once: the mean of its times"
                         " (without it, its last)")
    ap.add_argument("csv", nargs="+", help="kiln tune --csv output of the sides' tables")
    a = ap.parse_args()
    try:
        served, held = read_log(a.log, a.mean)
        sides = [s for s in a.sides.split(",") if s]
        skip = set(s for s in a.exclude.split(",") if s)
        keys = set(tuple(k.split(":", 1)) for k in a.keys.split(",") if k)
        if any(len(k) != 2 for k in keys):
            raise Bad("--keys %s: each must be OP:CLASS" % a.keys)
        w, header, used = None, None, {s: 0 for s in sides}
        for path in a.csv:
            with open(path, newline="") as f:
                r = csv.DictReader(f)
                for col in ("variant", "shape", "op", "class", "state", "median_ms", "tflops",
                            "groups", "tokens_per_group", "k", "n", "note"):
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
                    if keys and (row["op"], row["class"]) not in keys:
                        continue
                    op = row["op"]
                    if op == "wgrad":
                        op = AB_WGRAD_OPS.get(row["epilogue"], op)
                    for side in sides:
                        key = (row["shape"], op, side)
                        if served.get(key) != row["variant"] or key not in held:
                            continue
                        ms, suffix, note = held[key]
                        flops = 2.0 * int(row["groups"]) * int(row["tokens_per_group"]) * \
                            int(row["n"]) * int(row["k"])
                        out = dict(row, shape=row["shape"] + suffix, median_ms="%g" % ms,
                                   tflops="%.4g" % (flops / (ms * 1e-3) / 1e12), note=note)
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
