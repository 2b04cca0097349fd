#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""table_from_csv.py - tuning-table entries from `kiln tune --csv` measurements,
merged into a table (docs/tuning.md).

    scripts/table_from_csv.py --table TABLE --timer TIMER_ID [-o OUT]
                              [--descs TABLE]... [--types A/B/OUT] [--robust FRACTION]
                              [--robust-for CSV=FRACTION]... [--supersede] [--check] CSV...
    scripts/table_from_csv.py --table TABLE --entries NEW_TABLE [-o OUT] [--check]
    scripts/table_from_csv.py --table TABLE --redescribe --descs TABLE... [-o OUT] [--check]

From CSVs: one entry per key (arch, op, types, epilogue, shape class) with
kiln tune's own rule (cli/tuner.c, kiln_tune_choose): a variant competes for
a key only if it was timed (state `timed`, median_ms > 0) on every shape of
the class, its score is the geometric mean of its medians there, the least
score wins, ties go to the name that sorts first, the runner-up likewise.
The CSV prints medians to 6 significant digits, so a score can differ from
kiln tune's in the last digit; the winner only where two variants are
within that rounding.

--robust FRACTION: a class's winner is instead, of the variants within
FRACTION of kiln tune's winner on every shape of the class (and named by an
entry, for their ids), the one of least risk: the geometric mean, over
every shape of the CSV with calls of the key's kind (arch, op, types,
epilogue), of its time over that shape's fastest.  The runner-up is then
the fastest of the others (kiln tune's winner, where the two differ).  The
shipped table is built with it (docs/dispatch.md): an entry also serves
shapes and cards it was not measured on, and there a kernel near the best
everywhere does better than one that won its class by a hair.

--robust-for CSV=FRACTION: that CSV's classes are chosen with FRACTION
instead of --robust.  Where a kind's candidates differ much between shapes
of one class (discrete dW: 256x128 against 128x256 on skewed long
reductions), a wider band trades a little of the measured classes for the
shapes their entries serve unmeasured (docs/dispatch.md, forty-sixth
session).

--entries: the entries of a table kiln tune wrote (scripts/tune_corpus.sh).

Either way the new entries replace the table's entries of the same keys,
its other entries are kept, the header says what was merged from where, and
the integrity line is recomputed (SHA-256 of every line above it, each
ended by "\\n").  Entries are written sorted by key, as kiln tune does.

An entry needs its kernel's bundle id, cache key and description: they are
taken from an entry of TABLE (or of a --descs table) naming the same kernel.
A winner no such entry names is an error that lists what is missing; its ids
come from a table kiln tune writes with it as a winner (e.g. `kiln tune
SWEEP --shapes ONE_SHAPE --timer fake`), given with --descs.

The CSV does not record the timer: --timer names the timer the measurements
came from (it goes into the header, where `kiln pack` reads it).  Its a, b
and out columns give each row's types (bf16 and fp8 runs may be given
together); a CSV of an older kiln tune, without them, takes --types
(default bf16/bf16/bf16, what scripts/tune_corpus.sh tuned then).  Every
kernel description must agree.

--supersede: CSVs are taken in order, and a key that a later CSV also
gives takes the later one's entry (chosen from that CSV's rows alone: a
re-tune of some classes in a later call); without it such a key is an
error.  The header counts, per CSV, the entries it still gives.

--redescribe: no measurements; every entry of TABLE whose kernel a --descs
table names takes that table's bundle id, cache key and description; the
rest of its line, the other entries and the header stay as they are, and
the integrity line is recomputed.  For a template change that alters what
a named kernel's description says (its shared memory, say): the runtime
and the catalog find a table's kernel by its description, so the old one
names no kernel (unit_test_catalog fails).  Make the --descs tables with
`kiln tune SWEEP --kernel NAME --shapes ONE_SHAPE --timer fake -o T`, a
kernel each.

--check: write nothing; exit 1 if OUT (default TABLE) is not exactly what
would be written.  Exit 2 on bad input, with the file and line.
"""
import argparse
import csv
import hashlib
import math
import os
import sys

MAGIC = "kiln-tuning 1"
COLUMNS = "# ARCH OP A B OUT EPILOGUE CLASS -> KERNEL BUNDLE_ID CACHE_KEY MS RUNNERUP RUNNERUP_MS DESC"
OPS = ["fprop", "dgrad", "wgrad"]                   # kiln_op order
DTYPES = ["bf16", "fp16", "f32", "e4m3", "e5m2"]    # kiln_dtype order (kiln_dtype_name)
BUCKETS = {"t": ["16", "64", "256", "1024", "max"], "g": ["8", "32", "128", "max"],
           "n": ["1024", "2048", "4096", "8192", "max"], "k": ["1024", "2048", "4096", "8192", "max"]}


class Bad(Exception):
    """Bad input: the message names the file (and line)."""


def class_order(cls, where):
    """The class's bucket indices in t, g, n, k order (kiln_tuning_key_compare)."""
    parts = cls.split(".")
    if len(parts) != 4:
        raise Bad("%s: bad shape class '%s' (like t1024.g32.n4096.k8192)" % (where, cls))
    idx = []
    for part, axis in zip(parts, "tgnk"):
        if part[:1] != axis or part[1:] not in BUCKETS[axis]:
            raise Bad("%s: bad shape class '%s' (like t1024.g32.n4096.k8192)" % (where, cls))
        idx.append(BUCKETS[axis].index(part[1:]))
    return tuple(idx)


def sort_key(key):
    """Entries in kiln_tuning_key_compare's order (the order kiln tune writes)."""
    arch, op, a, b, out, sig, cls = key
    rank = lambda v, names: (names.index(v) if v in names else len(names), v)
    return (arch, rank(op, OPS), rank(a, DTYPES), rank(b, DTYPES), rank(out, DTYPES), sig,
            class_order(cls, "key"))


def fmt_ms(ms):
    return "%.6g" % ms                              # kernel/tuning.c format_ms


# ---- tables ----------------------------------------------------------------

class Entry:
    def __init__(self, key, kernel, bundle_id, cache_key, ms, runnerup, runnerup_ms, desc):
        self.key, self.kernel, self.bundle_id, self.cache_key = key, kernel, bundle_id, cache_key
        self.ms, self.runnerup, self.runnerup_ms, self.desc = ms, runnerup, runnerup_ms, desc

    def line(self):
        ru = "%s %s" % (self.runnerup, self.runnerup_ms) if self.runnerup else "- -"
        return "%s -> %s %s %s %s %s %s" % (" ".join(self.key), self.kernel, self.bundle_id,
                                             self.cache_key, self.ms, ru, self.desc)


def read_table(path):
    """(header lines, entries by key) of a table; refuses a damaged one."""
    try:
        lines = open(path, encoding="utf-8").read().splitlines()
    except OSError as e:
        raise Bad("%s: %s" % (path, e.strerror))
    if not lines or lines[0].split() != MAGIC.split():
        raise Bad("%s:1: not a kiln tuning table (the first line must be '%s')" % (path, MAGIC))
    head, entries, h = [], {}, hashlib.sha256()
    for no, line in enumerate(lines, 1):
        if line.startswith("integrity "):
            want = "integrity entries=%d sha256=%s" % (len(entries), h.hexdigest())
            if line != want:
                raise Bad("%s:%d: integrity line does not match the lines above it "
                          "(the table was changed or damaged)" % (path, no))
            if no != len(lines):
                raise Bad("%s:%d: lines after the integrity line" % (path, no))
            return head, entries
        h.update((line + "\n").encode())
        f = line.split(None, 14)
        if not f or line.startswith("#"):
            head.append(line)
            continue
        if no == 1:
            head.append(line)
            continue
        if len(f) < 15 or f[7] != "->":
            raise Bad("%s:%d: not an entry (ARCH OP A B OUT EPILOGUE CLASS -> KERNEL ... DESC)"
                      % (path, no))
        key = tuple(f[:7])
        class_order(key[6], "%s:%d" % (path, no))
        if key in entries:
            raise Bad("%s:%d: duplicate key %s" % (path, no, " ".join(key)))
        ru = None if f[12] == "-" else f[12]
        entries[key] = Entry(key, f[8], f[9], f[10], f[11], ru, f[13], f[14])
    raise Bad("%s: no integrity line (a table cut short?)" % path)


def desc_field(desc, name):
    for tok in desc.split():
        if tok.startswith(name + "="):
            return tok[len(name) + 1:]
    return None


def kernel_index(tables):
    """kernel name -> (bundle id, cache key, desc), from every entry naming it."""
    known = {}
    for path, entries in tables:
        for e in entries.values():
            have = known.get(e.kernel)
            ids = (e.bundle_id, e.cache_key, e.desc)
            if have and have[0][2] != e.desc:
                raise Bad("%s: kernel %s has two descriptions (in %s and %s)"
                          % (path, e.kernel, have[1], path))
            if not have:
                known[e.kernel] = (ids, path)
    return {k: v[0] for k, v in known.items()}


# ---- choosing (kiln tune's rule) -------------------------------------------

def read_csv(path):
    """The rows of one kiln tune --csv file, in its order."""
    try:
        f = open(path, newline="", encoding="utf-8")
    except OSError as e:
        raise Bad("%s: %s" % (path, e.strerror))
    with f:
        rows = list(csv.reader(f))
    need = ["variant", "arch", "op", "epilogue", "shape", "class", "state", "median_ms"]
    if not rows or any(c not in rows[0] for c in need):
        raise Bad("%s:1: not kiln tune --csv output (needs columns %s)" % (path, ", ".join(need)))
    # a, b, out: the call's types (kiln tune's CSVs since the fp8 sweeps;
    # older ones lack them and take --types)
    need += [c for c in ("a", "b", "out") if c in rows[0]]
    col = {name: rows[0].index(name) for name in need}
    out = []
    for no, r in enumerate(rows[1:], 2):
        if len(r) != len(rows[0]):
            raise Bad("%s:%d: %d fields, the header has %d" % (path, no, len(r), len(rows[0])))
        out.append(({n: r[i] for n, i in col.items()}, "%s:%d" % (path, no)))
    return out


def choose(rows, types, skip_untimed=False, robust=None, known=()):
    """{key: (winner, score, runner-up, score)} from the rows of one CSV.

    Mirrors kiln_tune_choose: keys and their shapes come from the variants
    kiln tune could time (a row with an op); variants are visited in the
    order the CSV lists them (kiln tune's sweep order), shapes in theirs.
    skip_untimed: a shape on which no variant of the key was timed is left
    out of its class instead of leaving the class without a winner.
    robust (a fraction): the winner is then, of the variants within that
    fraction of kiln tune's winner on every shape of the class (and named
    in `known`), the one of least risk (risks()); the runner-up is the
    fastest of the others."""
    shapes, variants, cells = {}, [], {}
    for r, where in rows:
        if not r["op"]:
            continue                                 # not usable: no op, never timed
        if r["op"] not in OPS:
            raise Bad("%s: unknown op '%s'" % (where, r["op"]))
        row_types = tuple(r.get(c, "") for c in ("a", "b", "out"))
        if all(row_types):
            if any(t not in DTYPES for t in row_types):
                raise Bad("%s: unknown types %s" % (where, "/".join(row_types)))
        else:
            row_types = types
        key = (r["arch"], r["op"]) + row_types + (r["epilogue"], r["class"])
        class_order(r["class"], where)
        shapes.setdefault(key, [])
        if r["shape"] not in shapes[key]:
            shapes[key].append(r["shape"])
        if r["variant"] not in variants:
            variants.append(r["variant"])
        ms = None
        if r["state"] == "timed":
            try:
                ms = float(r["median_ms"])
            except ValueError:
                raise Bad("%s: median_ms '%s' is not a number" % (where, r["median_ms"]))
        cells[(r["variant"], key, r["shape"])] = ms
    risk = risks(cells) if robust is not None else {}
    out = {}
    for key, shs in shapes.items():
        if skip_untimed:
            shs = [s for s in shs if any((cells.get((v, key, s)) or 0) > 0 for v in variants)]
            if not shs:
                continue                             # nothing timed in the class
        best = second = None
        scores = []
        for v in variants:
            ms = [cells.get((v, key, s)) for s in shs]
            if any(m is None or not m > 0 for m in ms):
                continue                             # not timed on every shape of the class
            score = math.exp(sum(math.log(m) for m in ms) / len(ms))
            scores.append((v, score))
            if best is None or score < best[1] or (score == best[1] and v < best[0]):
                second, best = best, (v, score)
            elif second is None or score < second[1] or (score == second[1] and v < second[0]):
                second = (v, score)
        if best and robust is not None:
            near = [(v, sc) for v, sc in scores if v in known and
                    all(cells[(v, key, s)] <= (1 + robust) * cells[(best[0], key, s)] for s in shs)]
            if near:
                pick = min(near, key=lambda c: (risk[(key[:6], c[0])], c[1], c[0]))
                if pick[0] != best[0]:
                    rest = [c for c in scores if c[0] != pick[0]]
                    best, second = pick, min(rest, key=lambda c: (c[1], c[0]))
        if best:
            out[key] = (best, second)
    return out


def risks(cells):
    """{(arch, op, a, b, out, epilogue), variant): risk}: the geometric mean,
    over every shape of the CSV with calls of that kind, of the variant's
    time over the shape's fastest (1: it was the fastest everywhere).  A
    kernel of low risk is near the best on shapes it did not win, and so,
    likely, on shapes and cards no one measured (docs/dispatch.md)."""
    by = {}
    for (v, key, shape), ms in cells.items():
        if ms and ms > 0:
            by.setdefault((key[:6], shape), {})[v] = ms
    logs = {}
    for (kind, shape), times in by.items():
        fastest = min(times.values())
        for v, ms in times.items():
            logs.setdefault((kind, v), []).append(math.log(ms / fastest))
    return {k: math.exp(sum(x) / len(x)) for k, x in logs.items()}


def entries_from_csvs(csvs, types, known, skip_untimed, robust=None, supersede=False,
                      robust_for=None):
    chosen_by, sources, missing = {}, [], []
    for path in csvs:
        band = (robust_for or {}).get(path, robust)
        for key, pick in choose(read_csv(path), types, skip_untimed, band, known).items():
            # Keys are chosen within one CSV (one call's timings): a re-tune
            # of some classes replaces their entries whole, never mixes rows.
            if key in chosen_by and not supersede:
                raise Bad("%s: key %s also comes from an earlier CSV" % (path, " ".join(key)))
            chosen_by[key] = (path, pick)
    new = {}
    for path in csvs:
        keys = sorted(k for k, (src, _) in chosen_by.items() if src == path)
        sources.append("%d from %s" % (len(keys), path))
        for key in keys:
            best, second = chosen_by[key][1]
            if best[0] not in known:
                missing.append("%s (wins %s)" % (best[0], " ".join(key)))
                continue
            bundle_id, cache_key, desc = known[best[0]]
            for field, want in zip(("op", "a", "b", "out"), key[1:5]):
                if desc_field(desc, field) != want:
                    raise Bad("%s: kernel %s is %s=%s, the key %s says %s"
                              % (path, best[0], field, desc_field(desc, field), " ".join(key), want))
            new[key] = Entry(key, best[0], bundle_id, cache_key, fmt_ms(best[1]),
                             second[0] if second else None, fmt_ms(second[1]) if second else "-",
                             desc)
    if missing:
        raise Bad("no bundle id, cache key and description for these winners (no entry of the "
                  "table or of a --descs table names them; see --help):\n  " + "\n  ".join(missing))
    return new, sources


# ---- merging ---------------------------------------------------------------

def merged_text(head, new, old, note):
    """The table text: head, then every entry by key, then the integrity line."""
    kept = {k: e for k, e in old.items() if k not in new}
    lines = list(head) + [note % (len(new), len(kept))]
    allk = dict(kept)
    allk.update(new)
    lines += [allk[k].line() for k in sorted(allk, key=sort_key)]
    return table_text(lines, len(allk)), len(new), len(kept)


def table_text(lines, n):
    """The lines (header and n entries) and their integrity line, as text."""
    h = hashlib.sha256()
    for l in lines:
        h.update((l + "\n").encode())
    lines = lines + ["integrity entries=%d sha256=%s" % (n, h.hexdigest())]
    return "".join(l + "\n" for l in lines)


def redescribed_text(path, known):
    """The text of table `path` with the ids and description of every entry
    whose kernel `known` names taken from there; how many lines changed."""
    head, entries = read_table(path)
    lines, n = list(head), 0
    for k in sorted(entries, key=sort_key):
        e = entries[k]
        if e.kernel in known:
            before = e.line()
            e.bundle_id, e.cache_key, e.desc = known[e.kernel]
            n += e.line() != before
        lines.append(e.line())
    return table_text(lines, len(entries)), n


def is_fraction(f):
    """A band for --robust and --robust-for: in [0, 1)."""
    return 0 <= f < 1


def main(argv):
    p = argparse.ArgumentParser(prog="table_from_csv.py", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("csv", nargs="*", help="kiln tune --csv output")
    p.add_argument("--table", required=True, help="the table to merge into")
    p.add_argument("-o", "--output", help="where to write (default: --table, in place)")
    p.add_argument("--entries", help="take the new entries from this table (kiln tune's) instead")
    p.add_argument("--descs", action="append", default=[], help="more tables to take ids from")
    p.add_argument("--timer", help="the timer the CSVs were measured with (e.g. gpu:NVIDIA_H200)")
    p.add_argument("--types", default="bf16/bf16/bf16", help="A/B/OUT of the CSVs' calls")
    p.add_argument("--skip-untimed-shapes", action="store_true",
                   help="leave out of a class the shapes no variant was timed on")
    p.add_argument("--robust", type=float, metavar="FRACTION",
                   help="of the variants within FRACTION of the winner on every shape of a "
                        "class, take the one of least risk (see --help)")
    p.add_argument("--robust-for", action="append", default=[], metavar="CSV=FRACTION",
                   help="choose that CSV's classes with FRACTION instead of --robust")
    p.add_argument("--supersede", action="store_true",
                   help="a later CSV's entry replaces an earlier CSV's of the same key (a "
                        "re-tune of some classes) instead of being refused")
    p.add_argument("--redescribe", action="store_true",
                   help="no measurements: the entries naming a --descs table's kernels take "
                        "its ids and description (see --help)")
    p.add_argument("--check", action="store_true", help="write nothing; exit 1 if OUT differs")
    a = p.parse_args(argv)
    out = a.output or a.table
    if a.redescribe:
        return redescribe(a, out)
    try:
        _, old = read_table(a.table)
        if a.entries:
            if a.csv or a.timer:
                raise Bad("--entries takes no CSV and no --timer (the table has its own header)")
            head, new = read_table(a.entries)
            src = a.entries
        else:
            if not a.csv or not a.timer:
                raise Bad("name at least one CSV and --timer (the CSV does not record it)")
            types = tuple(a.types.split("/"))
            if len(types) != 3 or any(t not in DTYPES for t in types):
                raise Bad("--types '%s': want A/B/OUT of %s" % (a.types, ", ".join(DTYPES)))
            known = kernel_index([(a.table, old)] + [(d, read_table(d)[1]) for d in a.descs])
            if a.robust is not None and not is_fraction(a.robust):
                raise Bad("--robust %g: want a fraction in [0, 1)" % a.robust)
            robust_for = {}
            for spec in a.robust_for:
                path, _, frac = spec.rpartition("=")
                try:
                    f = float(frac)
                except ValueError:
                    f = -1
                if not path or not is_fraction(f):
                    raise Bad("--robust-for '%s': want CSV=FRACTION, a fraction in [0, 1)" % spec)
                if path not in a.csv:
                    raise Bad("--robust-for '%s': %s is not one of the CSVs" % (spec, path))
                robust_for[path] = f
            new, parts = entries_from_csvs(a.csv, types, known, a.skip_untimed_shapes, a.robust,
                                            a.supersede, robust_for)
            rule = ("kiln tune's rule, less the shapes no variant was timed on"
                    if a.skip_untimed_shapes else "kiln tune's rule")
            if a.robust is not None:
                rule += ", the least risk within %g of its winner on every shape" % a.robust
            for path, f in sorted(robust_for.items()):
                rule += " (%g for %s)" % (f, os.path.basename(path))
            # "# written by kiln tune ...; timer T" is where kiln reads the timer
            # (kiln_tuning_text_timer; kiln pack refuses fake timings).
            head = [MAGIC, "# written by kiln tune (its --csv measurements; entries by "
                    "scripts/table_from_csv.py, %s); timer %s" % (rule, a.timer), COLUMNS]
            src = "; ".join(parts)
        note = ("# merged by scripts/table_from_csv.py: %%d entries (%s), %%d kept from the "
                "previous table" % src)
        text, n_new, n_kept = merged_text(head, new, old, note)
    except Bad as e:
        print("table_from_csv.py: %s" % e, file=sys.stderr)
        return 2
    return emit(out, text, a.check,
                "%s is not what the measurements give (run without --check to rewrite it)" % out,
                "%s: as the measurements give (%d entries from them, %d kept)" % (out, n_new, n_kept),
                "wrote %s: %d new entries, %d kept" % (out, n_new, n_kept))


def emit(out, text, check, unlike, same, wrote):
    """--check: 0 if OUT holds text (saying `same`), else 1 (saying `unlike`);
    otherwise text written to OUT (saying `wrote`)."""
    if check:
        cur = open(out, encoding="utf-8").read() if os.path.exists(out) else None
        if cur != text:
            print("table_from_csv.py: " + unlike, file=sys.stderr)
            return 1
        print(same)
        return 0
    with open(out + ".tmp", "w", encoding="utf-8") as f:
        f.write(text)
    os.replace(out + ".tmp", out)
    print(wrote)
    return 0


def redescribe(a, out):
    """--redescribe: TABLE's entries re-described from the --descs tables."""
    try:
        if a.csv or a.timer or a.entries:
            raise Bad("--redescribe takes no CSV, --timer or --entries: only --descs tables")
        if not a.descs:
            raise Bad("--redescribe: name the tables to take descriptions from with --descs")
        known = kernel_index([(d, read_table(d)[1]) for d in a.descs])
        text, n = redescribed_text(a.table, known)
    except Bad as e:
        print("table_from_csv.py: %s" % e, file=sys.stderr)
        return 2
    return emit(out, text, a.check, "%s is not %s re-described" % (out, a.table),
                "%s: as re-described (%d entries would change)" % (out, n),
                "wrote %s: %d entries re-described" % (out, n))


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
