#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""scripts/table_from_csv.py on the CPU (ctest table_from_csv):

1. a hand-made CSV whose geometric-mean winner is neither the arithmetic
   mean's nor any one shape's best, with a tie broken by name, a faster
   variant that failed on one shape, and a class every variant failed on
   one shape of (no entry with kiln tune's rule: the old one is kept; an
   entry from the other shape with --skip-untimed-shapes); the merged table
   must parse in kiln (kiln_bench loads it) and keep every other entry;
   and one for --robust: the least risk among the variants near the winner
   on every shape of the class, not one near it on average only (and a
   CSV's own band with --robust-for, bad ones refused); and two
   CSVs giving one key (refused, or the later one's entry with --supersede);
2. `kiln tune --timer fake` on two shapes of one class and one of another:
   the script's entries from its CSV are kiln tune's own table's;
3. the shipped table is what the script gives from the committed CSVs
   (with --robust ROBUST, as scripts/tune_corpus.sh builds it, the
   forty-sixth session's discrete re-time at its own band (--robust-for),
   and --supersede: later re-tunes of some classes replace their entries);
4. scripts/held_alone_csv.py: a hand-made variant_bench.py log and tune
   CSV give the rows of the sides' own kernels with their held-alone
   times (the excluded shape and the other side's kernel left out, bad
   input refused), and the committed held-alone CSV is what it gives from
   the committed log and tune CSV (a variant_bench.py log and an
   fp8_bench.py --variants one).

    table_from_csv_test.py KILN KILN_BENCH      (from the top folder)
"""
import hashlib
import os
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SCRIPT = os.path.join(ROOT, "scripts", "table_from_csv.py")
SHIPPED = os.path.join(ROOT, "specs", "tuning", "sm_90a.tuning")
# The ids and descriptions the hand-made CSVs' winners need, from entries
# that name them (the shipped table's own change as it is re-tuned).
IDS = os.path.join(ROOT, "tests", "data", "tune", "ids.tuning")
HEADER = ("variant,arch,op,epilogue,shape,groups,tokens_per_group,k,n,sizes,class,state,"
          "median_ms,tflops,rel_err,from_journal,winner,note")
KA = "fprop_sm90_bf16_plain__m64_n256_k64_s4_rgroup_pingpong"   # sorts before KB
KB = "fprop_sm90_bf16_plain__m64_n256_k64_s4_rm_pingpong"
KC = "sm90_fprop_bf16_128x128"
KD = "sm90_fprop_bf16_64x256"
X, Y = "t1024.g32.n8192.k2048", "t16.g8.nmax.k4096"
failures = []


def check(cond, what):
    print(("ok    " if cond else "FAIL  ") + what)
    if not cond:
        failures.append(what)


def script(path, *args):
    """(exit code, stdout, stderr) of a Python script run from the top folder."""
    p = subprocess.run([sys.executable, path] + list(args), cwd=ROOT, capture_output=True,
                       text=True)
    return p.returncode, p.stdout, p.stderr


def run(*args):
    rc, out, err = script(SCRIPT, *args)
    return rc, out + err


def entries(path, full=False):
    """{(op, class): fields after the key} of a table's bf16 entries ({key:
    ...} of every entry with full: the whole key, types and signature too;
    fp8 entries share classes with bf16 ones)."""
    out = {}
    for line in open(path).read().splitlines():
        if line.startswith("sm_"):
            f = line.split(None, 14)
            if full:
                out[tuple(f[:7])] = f[8:]
            elif f[2:5] == ["bf16"] * 3:
                out[(f[1], f[6])] = f[8:]
    return out


def row(variant, op, shape, cls, state, ms):
    return "%s,sm_90a,%s,%s,%s,32,1024,2048,8192,uniform,%s,%s,%s,1,0,0,0," % (
        variant, op, "plain" if op else "", shape, cls, state, ms)


def hand_csv(path):
    rows = [HEADER,
            # X: KB and KA tie (geomean 2; KB listed first, KA wins by name);
            # KC's arithmetic mean (2.1) beats theirs (2.5), its geomean does not;
            # KD is fastest on s1 but failed on s2, so it does not compete.
            row(KB, "fprop", "s1", X, "timed", "1"), row(KB, "fprop", "s2", X, "timed", "4"),
            row(KA, "fprop", "s1", X, "timed", "1"), row(KA, "fprop", "s2", X, "timed", "4"),
            row(KC, "fprop", "s1", X, "timed", "2.1"), row(KC, "fprop", "s2", X, "timed", "2.1"),
            row(KD, "fprop", "s1", X, "timed", "0.5"), row(KD, "fprop", "s2", X, "failed", "9"),
            # Y: every variant failed on s3; on s4 KD is best.
            row(KC, "fprop", "s3", Y, "failed", "0.1"), row(KC, "fprop", "s4", Y, "timed", "0.3"),
            row(KD, "fprop", "s3", Y, "failed", "0.1"), row(KD, "fprop", "s4", Y, "timed", "0.2"),
            # dgrad's key is apart from fprop's on the same shapes.
            row("sm90_dgrad_bf16_128x128", "dgrad", "s1", X, "timed", "1"),
            row("sm90_dgrad_bf16_64x256", "dgrad", "s1", X, "timed", "0.9"),
            # a variant kiln tune could not use (no op): ignored, needs no ids.
            row("never_compiled", "", "s1", X, "skipped", "")]
    with open(path, "w") as f:
        f.write("\n".join(rows) + "\n")


def test_hand(d, bench):
    csv_path, out = os.path.join(d, "hand.csv"), os.path.join(d, "hand.tuning")
    hand_csv(csv_path)
    rc, text = run("--table", IDS, "-o", out, "--timer", "gpu:TEST", csv_path)
    check(rc == 0, "exact rule: exit 0 (%s)" % text.strip())
    if rc:
        return
    new, old = entries(out), entries(IDS)
    check(new[("fprop", X)][:6][0] == KA and new[("fprop", X)][3:6] == ["2", KB, "2"],
          "geomean winner KA (tie with KB broken by name), runner-up KB: %s" % new[("fprop", X)][:6])
    check(new[("fprop", Y)] == old[("fprop", Y)], "class with a shape no variant was timed on: "
          "no entry from the CSV, the old entry kept as it was")
    check(new[("dgrad", X)][0] == "sm90_dgrad_bf16_64x256" and new[("dgrad", X)][3:6] ==
          ["0.9", "sm90_dgrad_bf16_128x128", "1"], "dgrad chosen apart from fprop")
    others = [k for k in old if k not in (("fprop", X), ("dgrad", X))]
    check(all(new[k] == old[k] for k in others) and
          len(new) == len(set(old) | {("fprop", X), ("dgrad", X)}),
          "every other entry of the old table kept (%d)" % len(others))
    check(new[("fprop", X)][-1].startswith("name=%s " % KA), "KA's description from its entry")
    shapes = os.path.join(d, "hand.tsv")
    with open(shapes, "w") as f:
        f.write("s1\t32\t1024\t2048\t8192\tuniform\ns4\t8\t16\t4096\t16384\tuniform\n")
    p = subprocess.run([bench, "--dispatch-report", csv_path, "--cases", shapes, "--table", out],
                       cwd=ROOT, capture_output=True, text=True)
    check(p.returncode == 0 and "%d entries" % len(entries(out, full=True)) in p.stdout,
          "kiln parses the merged table (integrity line, sorted keys): %s" % p.stderr.strip())
    rc, text = run("--table", out, "--timer", "gpu:TEST", "--check", csv_path)
    check(rc == 0, "--check: a merged table is what the same CSV gives again")
    rc, _ = run("--table", IDS, "--timer", "gpu:TEST", "--check", csv_path)
    check(rc == 1, "--check: exit 1 when the table differs (the shipped one, not merged)")
    rc, _ = run("--table", IDS, "-o", out, "--timer", "gpu:TEST", "--skip-untimed-shapes",
                csv_path)
    check(rc == 0 and entries(out)[("fprop", Y)][:6][0] == KD and
          entries(out)[("fprop", Y)][3:6] == ["0.2", KC, "0.3"],
          "--skip-untimed-shapes: Y's entry from s4 alone (KD, runner-up KC)")
    # A winner no table names: refused, naming it.
    bad = os.path.join(d, "unknown.csv")
    with open(bad, "w") as f:
        f.write(HEADER + "\n" + row("fprop_nowhere", "fprop", "s1", X, "timed", "0.1") + "\n")
    rc, text = run("--table", IDS, "-o", out, "--timer", "gpu:TEST", bad)
    check(rc == 2 and "fprop_nowhere (wins sm_90a fprop" in text, "unknown winner refused: " + text)
    # A damaged table: refused, naming the line.
    damaged = os.path.join(d, "damaged.tuning")
    with open(damaged, "w") as f:
        f.write(open(IDS).read().replace(" plain t16.", " plain t64.", 1))
    rc, text = run("--table", damaged, "-o", out, "--timer", "gpu:TEST", csv_path)
    check(rc == 2 and "integrity line does not match" in text, "damaged table refused: " + text)


def tune_fake(kiln, d, specs, shapes, table, csv_path):
    """`kiln tune SPECS --shapes SHAPES --timer fake -o TABLE --csv > CSV_PATH`
    (the cache in d); whether it ran."""
    with open(csv_path, "w") as out:
        p = subprocess.run([kiln, "tune"] + specs + ["--shapes", shapes, "--timer", "fake", "-o",
                                                    table, "--csv"], cwd=ROOT, stdout=out,
                           stderr=subprocess.PIPE, text=True,
                           env=dict(os.environ, KILN_CACHE_DIR=os.path.join(d, "cache")))
    check(p.returncode == 0, "kiln tune --timer fake (%s)" % p.stderr.strip()[-300:])
    return p.returncode == 0


def test_fake_tune(d, kiln):
    """The script's entries from kiln tune's CSV are kiln tune's own."""
    shapes, table, csv_path = (os.path.join(d, n) for n in ("f.tsv", "f.tuning", "f.csv"))
    with open(shapes, "w") as f:
        f.write("bal\t8\t2048\t4096\t14336\tuniform\nskew\t8\t2048\t4096\t14336\tskew\n"
                "dec\t64\t8\t4096\t2048\tuniform\n")
    # bf16 and fp8 (row-wise) kernels in one run: the keys' types come from
    # the CSV's a, b, out columns
    specs = ["specs/default/sm90_%s_%s.yaml" % (op, t) for op in ("fprop", "dgrad")
             for t in ("bf16_128x128", "bf16_64x256", "e4m3_row_64x128", "e4m3_row_64x256")]
    if not tune_fake(kiln, d, specs, shapes, table, csv_path):
        return
    merged = os.path.join(d, "f.merged")
    rc, text = run("--table", table, "-o", merged, "--timer", "fake", csv_path)
    check(rc == 0, "script on kiln tune's CSV: %s" % text.strip())
    if rc:
        return
    want, got = entries(table, True), entries(merged, True)
    check(set(want) == set(got) and len(want) == 8 and
          sum(k[2:5] == ("e4m3", "e4m3", "bf16") for k in got) == 4,
          "the same keys as kiln tune (%d), fp8 ones among them" % len(want))
    same = all(got[k][0] == want[k][0] and got[k][4] == want[k][4] and got[k][1:3] == want[k][1:3]
               and got[k][-1] == want[k][-1] for k in want)
    close = all(abs(float(got[k][3]) / float(want[k][3]) - 1) < 2e-5 and
                abs(float(got[k][5]) / float(want[k][5]) - 1) < 2e-5 for k in want)
    check(same and close, "winners, runner-ups, ids and times as kiln tune chose them")
    # Ids from another table (--descs) when the merged-into one names none.
    empty = os.path.join(d, "empty.tuning")
    with open(empty, "w") as f:
        f.write("kiln-tuning 1\nintegrity entries=0 sha256=%s\n"
                % hashlib.sha256(b"kiln-tuning 1\n").hexdigest())
    rc, text = run("--table", empty, "-o", merged, "--timer", "fake", csv_path)
    check(rc == 2 and "no bundle id" in text, "winners no table names: refused")
    rc, text = run("--table", empty, "-o", merged, "--timer", "fake", "--descs", table, csv_path)
    check(rc == 0 and entries(merged, True) == got, "--descs: the ids and descriptions from there")
    # --entries (scripts/tune_corpus.sh's merge): kiln tune's entries replace
    # the shipped table's of their keys, the rest stay, the header is kiln tune's.
    rc, text = run("--table", SHIPPED, "-o", merged, "--entries", table)
    got, old = entries(merged, True), entries(SHIPPED, True)
    head = [l for l in open(merged).read().splitlines() if l.startswith("#")]
    check(rc == 0 and all(got[k] == want[k] for k in want) and
          all(got[k] == old[k] for k in old if k not in want) and
          len(got) == len(set(old) | set(want)) and head[0].startswith("# written by kiln tune ")
          and "timer fake" in head[0] and "entries (%s)" % table in head[-1],
          "--entries: kiln tune's table merged into the shipped one (%s)" % text.strip())


def write_table(path, lines):
    """A table of these lines (header first) and its integrity line."""
    h = hashlib.sha256()
    for l in lines:
        h.update((l + "\n").encode())
    n = sum(1 for l in lines if l.startswith("sm_"))
    with open(path, "w") as f:
        f.write("".join(l + "\n" for l in lines) +
                "integrity entries=%d sha256=%s\n" % (n, h.hexdigest()))


def test_redescribe(d):
    """--redescribe: the entries naming a --descs table's kernel take its ids
    and description; every other line stays; nothing else is taken."""
    lines = open(SHIPPED).read().splitlines()[:-1]
    named = [l for l in lines if l.startswith("sm_") and l.split()[8] == KA]
    check(len(named) > 1, "the shipped table names %s more than once" % KA)
    f = named[0].split(" ")
    desc = " ".join(f[14:])
    grown = desc.replace(" smem=", " smem=1", 1)   # another description of the same kernel
    check(grown != desc, "the description has a smem field")
    new_line = " ".join(f[:9] + ["a" * 64, "b" * 64] + f[11:14]) + " " + grown
    descs, out = os.path.join(d, "descs.tuning"), os.path.join(d, "redescribed.tuning")
    write_table(descs, ["kiln-tuning 1", new_line])
    rc, text = run("--table", SHIPPED, "-o", out, "--redescribe", "--descs", descs)
    got = open(out).read().splitlines() if rc == 0 else []
    want = []
    for l in lines:
        g = l.split(" ")
        if l.startswith("sm_") and g[8] == KA:
            l = " ".join(g[:9] + ["a" * 64, "b" * 64] + g[11:14]) + " " + grown
        want.append(l)
    check(rc == 0 and got[:-1] == want and got[-1].startswith("integrity entries=") and
          "%d entries re-described" % len(named) in text,
          "--redescribe: the %d entries naming %s re-described, every other line as it was (%s)"
          % (len(named), KA, text.strip()))
    rc, text = run("--table", SHIPPED, "-o", out, "--redescribe", "--descs", descs, "--check")
    check(rc == 0, "--redescribe --check: the table written is the table re-described")
    rc, text = run("--table", SHIPPED, "--redescribe", "--descs", descs, "--check")
    check(rc == 1 and "not" in text, "--redescribe --check: the shipped table is not: " + text.strip())
    rc, text = run("--table", SHIPPED, "-o", out, "--redescribe")
    check(rc == 2 and "--descs" in text, "--redescribe without --descs: refused: " + text.strip())
    rc, text = run("--table", SHIPPED, "-o", out, "--redescribe", "--descs", descs, descs)
    check(rc == 2 and "no CSV" in text, "--redescribe with a CSV: refused: " + text.strip())


def test_robust(d):
    """--robust: of the variants within the fraction of the winner on every
    shape of the class, the one of least risk; kiln tune's rule without."""
    x, z = "t256.g32.n8192.k2048", "t64.g32.n8192.k2048"
    c = (("s5", x, 1.0, 1.01, 1.01), ("s6", x, 1.0, 1.015, 1.05),   # KA wins x; KD near it
         ("s7", z, 2.0, 1.0, 1.0), ("s8", z, 2.0, 1.0, 1.0))        # on both, KB on s5 only
    rows = [HEADER] + [row(v, "fprop", sh, cls, "timed", "%g" % ms) for sh, cls, a, dd, b in c
                       for v, ms in ((KA, a), (KD, dd), (KB, b))]
    path, out = os.path.join(d, "robust.csv"), os.path.join(d, "robust.tuning")
    with open(path, "w") as f:
        f.write("\n".join(rows) + "\n")
    rc, text = run("--table", IDS, "-o", out, "--timer", "gpu:TEST", path)
    check(rc == 0 and entries(out)[("fprop", x)][0] == KA, "without --robust: kiln tune's winner "
          "KA (%s)" % text.strip())
    rc, text = run("--table", IDS, "-o", out, "--timer", "gpu:TEST", "--robust", "0.02", path)
    got = entries(out)[("fprop", x)] if rc == 0 else None
    # risks over s5-s8: KA (1, 1, 2, 2) 1.41; KD (1.01, 1.015, 1, 1) 1.006; KB 1.015
    check(got and got[0] == KD and got[4] == KA, "--robust 0.02: KD, near KA on both shapes and of "
          "less risk, wins; KA is the runner-up; KB (5%% off on s6) does not compete (%s)"
          % (got[:6] if got else text.strip()))
    check(got and "the least risk within 0.02" in open(out).read().splitlines()[1],
          "--robust: the header names the rule")
    rc, text = run("--table", IDS, "-o", out, "--timer", "gpu:TEST", "--robust", "1.5", path)
    check(rc == 2 and "--robust" in text, "--robust 1.5 refused: " + text.strip())
    # --robust-for: the CSV's own band in place of --robust (with a band of 0
    # only KA is within it of KA: kiln tune's winner again)
    rc, text = run("--table", IDS, "-o", out, "--timer", "gpu:TEST", "--robust", "0.02",
                   "--robust-for", path + "=0", path)
    got = entries(out)[("fprop", x)] if rc == 0 else None
    check(got and got[0] == KA and "(0 for robust.csv)" in open(out).read().splitlines()[1],
          "--robust-for CSV=0 overrides --robust 0.02 for that CSV: KA, and the header says so "
          "(%s)" % (got[:6] if got else text.strip()))
    for bad in (path + "=1.5", "other.csv=0.04", "0.04"):
        rc, text = run("--table", IDS, "-o", out, "--timer", "gpu:TEST", "--robust-for", bad, path)
        check(rc == 2 and "--robust-for" in text, "--robust-for %s refused: %s" % (bad, text.strip()))


def test_supersede(d):
    """Two CSVs giving one key: refused, unless --supersede, where the later
    CSV's entry (from its own rows alone) replaces the earlier one's."""
    x, y = "t256.g32.n8192.k2048", "t64.g32.n8192.k2048"
    first, later = os.path.join(d, "first.csv"), os.path.join(d, "later.csv")
    with open(first, "w") as f:     # KA wins x and y
        f.write("\n".join([HEADER] + [row(v, "fprop", sh, c, "timed", ms)
                                     for sh, c in (("s1", x), ("s2", y))
                                     for v, ms in ((KA, "1.0"), (KD, "2.0"))]) + "\n")
    with open(later, "w") as f:     # a re-tune of x alone: KD wins it
        f.write("\n".join([HEADER, row(KA, "fprop", "s1", x, "timed", "3.0"),
                            row(KD, "fprop", "s1", x, "timed", "2.5")]) + "\n")
    out = os.path.join(d, "supersede.tuning")
    rc, text = run("--table", IDS, "-o", out, "--timer", "gpu:TEST", first, later)
    check(rc == 2 and "also comes from an earlier CSV" in text,
          "a key from two CSVs refused without --supersede: " + text.strip())
    rc, text = run("--table", IDS, "-o", out, "--timer", "gpu:TEST", "--supersede", first, later)
    got = entries(out) if rc == 0 else {}
    check(rc == 0 and got[("fprop", x)][0] == KD and got[("fprop", x)][3] == "2.5"
          and got[("fprop", y)][0] == KA,
          "--supersede: the later CSV's winner for its key, the earlier one's elsewhere (%s)"
          % (text.strip()))
    check(rc == 0 and "1 from %s; 1 from %s" % (first, later) in open(out).read(),
          "--supersede: the header counts what each CSV still gives")


# The fraction scripts/tune_corpus.sh builds the shipped table with.
ROBUST = "0.02"
# The forty-sixth session's re-time of the discrete overwrite classes, and
# its band: discrete candidates differ more between the shapes of one class
# (docs/dispatch.md, forty-sixth session).
DISCRETE_RETUNE = "docs/results/session46-wgrad-discrete-retune-h200-2026-12-01.csv"
ROBUST_DISCRETE = "0.04"


# The sixty-sixth session's held sweep (raw CSV), the rows of the one class
# the table takes from it, and that class (docs/dispatch.md).
QWEN3_HELD = ("docs/results/session66-fp8-short-dgrad-classes-held-sweep-h200-2026-12-02.csv",
              "docs/results/session66-fp8-qwen3-dgrad-class-held-sweep-h200-2026-12-02.csv",
              "t1024.g128.n2048.k2048")


# The ninety-fifth session's re-time of one dgrad class from its
# context_ab.py log: the sides with a kernel the session14 tune CSV has rows
# of (64x128 has none there).
S95_DGRAD = "docs/results/session95-dgrad-t256-gmax-class-ab-h100-2026-12-06.csv"
S95_SIDES = "as is,KILN_KERNEL=sm90_dgrad_bf16_64x256,KILN_KERNEL=sm90_dgrad_bf16_128x128," \
    "KILN_KERNEL=sm90_dgrad_bf16_128x256"

# The ninety-eighth session's re-time of one fprop class from its
# context_ab.py log (the held-out Kimi-K2 fc2 EP64 layer left out), with the
# rows of that call's kiln tune run.
S98_FPROP = "docs/results/session98-fprop-t256-g8-n8192-k2048-ab-h100-2026-12-06.csv"
S98_SIDES = "as is,KILN_KERNEL=sm90_fprop_bf16_64x128,KILN_KERNEL=sm90_fprop_bf16_64x256," \
    "KILN_KERNEL=fprop_sm90_bf16_plain__m128_n192_k64_s4_rgroup_pingpong"

def forced(*kernels):
    """context_ab.py's sides that force each of these kernels."""
    return ",".join("KILN_KERNEL=" + k for k in kernels)


# The ninety-ninth session's re-time of three plain wgrad classes from the
# context_ab.py logs of two calls on two H100s (every overwrite kernel an
# entry names, forced; the entries' own kernels among them), each side's mean
# over the processes that timed it, with the rows of the second call's kiln
# tune run.
S99_WGRAD = "docs/results/session99-wgrad-overwrite-classes-ab-h100-2026-12-06.csv"
S99_SIDES = forced(
    "wgrad_sm90_bf16_plain__m128_n192_k64_s4_pingpong",
    "wgrad_sm90_bf16_plain__m128_n192_k64_s4_cooperative",
    "wgrad_sm90_bf16_raster__m128_n192_k64_s4_rm_pingpong",
    "wgrad_sm90_bf16_raster__m128_n192_k64_s4_rn_pingpong",
    "wgrad_sm90_bf16_raster__m128_n256_k64_s3_rn_cooperative",
    "wgrad_sm90_bf16_raster__m128_n256_k64_s3_rm_cooperative",
    "sm90_wgrad_bf16_bf16_dense_s3")
S99_KEYS = "wgrad:t1024.g32.nmax.k8192,wgrad:t256.g128.n8192.k4096,wgrad:t1024.g32.n8192.k2048"
# ... and of discrete and accumulating wgrad of two of those classes (one
# process of a fifth call, context_ab.py's wgrad_discrete and wgrad_acc;
# every kernel the entries of those kinds name and their 128x256 defaults).
S99_KINDS = "docs/results/session99-wgrad-discrete-acc-classes-ab-h100-2026-12-06.csv"
S99_KINDS_SIDES = forced(
    "wgrad_sm90_bf16_discrete__m128_n192_k64_s4_cooperative",
    "wgrad_sm90_bf16_discrete__m128_n192_k64_s4_pingpong",
    "wgrad_sm90_bf16_discrete_raster__m128_n256_k64_s3_rn_cooperative",
    "sm90_wgrad_bf16_bf16_discrete",
    "wgrad_sm90_bf16_acc_raster__m128_n256_k64_s4_rn_cooperative",
    "wgrad_sm90_bf16_acc__m128_n192_k64_s4_pingpong",
    "sm90_wgrad_bf16_f32_dense_acc")
S99_KINDS_KEYS = "wgrad:t256.g128.n8192.k4096,wgrad:t1024.g32.n8192.k2048"

# The hundredth session's re-time of fprop, dgrad and wgrad of the classes of
# Llama 4 Scout, DBRX and Phi-3.5-MoE fc1 (the corpus layers nearest torch):
# every kernel an entry of the op names or a default forced, from graphs,
# each side's mean over two processes, with the rows of the same call's kiln
# tune run.
S100_FC1 = "docs/results/session100-fc1-classes-ab-h100-2026-12-06.csv"
S100_SIDES = "as is," + forced(
    "sm90_fprop_bf16_128x256", "sm90_fprop_bf16_128x192", "sm90_fprop_bf16_64x256",
    "sm90_fprop_bf16_128x128", "fprop_sm90_bf16_plain__m64_n256_k64_s4_rgroup_pingpong",
    "dgrad_sm90_bf16_plain__m128_n256_k64_s4_rgroup_cooperative", "sm90_dgrad_bf16_128x256",
    "sm90_dgrad_bf16_128x192", "dgrad_sm90_bf16_plain__m64_n256_k64_s4_rgroup_pingpong",
    "dgrad_sm90_bf16_plain__m128_n192_k64_s4_rm_cooperative", "sm90_dgrad_bf16_128x128",
    "wgrad_sm90_bf16_raster__m128_n192_k64_s4_rn_pingpong",
    "wgrad_sm90_bf16_raster__m128_n192_k64_s4_rm_pingpong",
    "wgrad_sm90_bf16_raster__m128_n256_k64_s3_rn_cooperative",
    "wgrad_sm90_bf16_raster__m128_n256_k64_s3_rm_cooperative",
    "sm90_wgrad_bf16_bf16_dense_s3")
S100_KEYS = ",".join(op + ":t1024.g32.nmax." + k for op, k in [
    ("fprop", "k8192"), ("fprop", "k4096"), ("dgrad", "k8192"), ("dgrad", "k4096"),
    ("wgrad", "k4096")])

# ... and of dgrad of every other class whose entry named 128x192 pingpong,
# against the two 128x256 cooperative kernels (a second call).  The table
# takes two of its thirteen classes: DeepSeek-V3 fc1 EP8 and Mixtral 8x7B
# fc2, where the 128x256 default ran 0.94-0.95 of the entry's time.  The
# rule would also have moved balanced32/skew32's class and Qwen3-235B fc1
# EP8's (0.995 and 0.998: inside the A/B's spread), which the committed
# H200 held-out runs price at a loss (MiniMax-M2 fc1 EP8 1.004 -> 1.062 of
# the best); their rows stay in the log (docs/dispatch.md, hundredth session).
S100_DGRAD = "docs/results/session100-dgrad-128x192-classes-ab-h100-2026-12-06.csv"
S100_DGRAD_SIDES = "as is," + forced(
    "dgrad_sm90_bf16_plain__m128_n256_k64_s4_rgroup_cooperative", "sm90_dgrad_bf16_128x256")
S100_DGRAD_KEYS = "dgrad:t1024.g32.n4096.k8192,dgrad:tmax.g8.n4096.kmax"

# The committed context_ab.py re-times the table takes: (CSV, its sides, its
# OP:CLASS keys, the tune CSV with those kernels' rows, the held-out layer
# left out or "", the CSV's rows, held_alone_csv.py's other options); each
# CSV is what held_alone_csv.py gives from the log beside it.
COMMITTED_AB = [
    (S95_DGRAD, S95_SIDES, "dgrad:t256.gmax.n4096.k8192",
     "session14-corpus-tune-h200-2026-11-24.csv", "", 16, []),
    (S98_FPROP, S98_SIDES, "fprop:t256.g8.n8192.k2048",
     "session98-t256-g8-n8192-k2048-tune-h100-2026-12-06.csv", "kimik2_fc2_ep64_dec", 16, []),
    (S99_WGRAD, S99_SIDES, S99_KEYS,
     "session99-wgrad-overwrite-classes-tune-h100-2026-12-06.csv", "", 54, ["--mean"]),
    (S99_KINDS, S99_KINDS_SIDES, S99_KINDS_KEYS,
     "session99-wgrad-discrete-acc-classes-tune-h100-2026-12-06.csv", "", 35, []),
    (S100_FC1, S100_SIDES, S100_KEYS,
     "session100-fc1-classes-tune-h100-2026-12-06.csv", "", 90, ["--mean"]),
    (S100_DGRAD, S100_DGRAD_SIDES, S100_DGRAD_KEYS,
     "session100-dgrad-128x192-classes-tune-h100-2026-12-06.csv", "", 15, ["--mean"]),
]


def test_shipped():
    csvs = ["docs/results/session14-corpus-tune-h200-2026-11-24.csv",
            "docs/results/session14-corpus-tune-wgrad-h200-2026-11-24.csv",
            "docs/results/session9-corpus-tune-wgrad-acc-h200-2026-11-23.csv",
            "docs/results/session15-fp8-tune-h200-2026-11-24.csv",
            "docs/results/session15-corpus-tune-wgrad-dbias-h200-2026-11-24.csv",
            "docs/results/session16-corpus-tune-wgrad-discrete-h200-2026-11-24.csv",
            # the decode-sized classes re-tuned after the eighteenth session's
            # row stores (wgrad with db, then plain): they supersede the above
            "docs/results/session19-decode-tune-wgrad-dbias-h200-2026-11-28.csv",
            "docs/results/session19-decode-tune-wgrad-h200-2026-11-28.csv",
            # the short-reduction classes' accumulate entries (with and
            # without db) re-tuned with the kernels that add rows (wgrad.rows)
            "docs/results/session20-acc-rows-tune-h200-2026-11-28.csv",
            # plain wgrad over the classes longer than decode-sized, re-tuned
            # after the eighteenth session's row stores, with the raster sweep
            "docs/results/session21-wgrad-long-tune-h200-2026-11-28.csv",
            # accumulate over the classes the twentieth session left (longer
            # than 256 tokens a group), qwen3_30b's and irregular/Dirichlet's,
            # with the raster sweep
            "docs/results/session21-wgrad-acc-long-tune-h200-2026-11-28.csv",
            # wgrad with db over the same long classes, with the dbias
            # sweep's raster twin (the plain rows of that call are
            # docs/results/session22-wgrad-long-retime-*.csv, not merged)
            "docs/results/session22-wgrad-dbias-long-tune-h200-2026-11-28.csv",
            # accumulate with db over the accumulate long classes (its
            # accumulate rows: session22-wgrad-acc-long-retime-*.csv, not
            # merged)
            "docs/results/session22-wgrad-acc-dbias-long-tune-h200-2026-11-28.csv",
            # the fp8 block sweeps over the corpus and the cases, after the
            # half-width promotion stopped waiting on its factors before each
            # issue (the 128x256 kernels changed; 2x1 clusters added)
            "docs/results/session23-fp8-block-tune-h200-2026-11-28.csv",
            # the row-wise fp8 fprop class of Mixtral's fc1 (tmax.g8.nmax.k4096)
            # re-timed in four burst rounds, two of them with the candidates'
            # order reversed (each round's rows named SHAPE@ROUND)
            "docs/results/session27-fp8-mixtral-class-tune-h200-2026-11-29.csv",
            # bf16 fprop and dgrad of Mixtral's fc1 classes (tmax.g8.nmax.k4096,
            # t1024.g8.nmax.k8192), raster m against raster group, each kernel
            # held alone for 3 s at the power limit (scripts/held_alone_csv.py
            # from python/bench/variant_bench.py --sample; the held-out layer
            # of that call left out)
            "docs/results/session32-mixtral-fc1-held-alone-h200-2026-11-29.csv",
            # dense accumulate (with and without db) over the corpus and the
            # cases, after the thirty-fourth session gave cooperative 128x256
            # kernels the dynamic work order; the candidates: every kernel an
            # entry named and the 128x256 ones at 3 and 4 stages
            "docs/results/session35-wgrad-acc-retune-h200-2026-11-29.csv",
            # dense overwriting wgrad (plain and with db) over the corpus and
            # the cases, after the dynamic work order: every kernel an entry
            # named, their 4-stage and 128x192 3-stage twins, the defaults
            "docs/results/session36-wgrad-overwrite-retune-h200-2026-11-30.csv",
            # the same candidates re-timed after the fortieth session rotated
            # the static work order of the overwriting kernels
            "docs/results/session41-wgrad-overwrite-retune-h200-2026-11-30.csv",
            # discrete wgrad (overwrite and accumulate) re-timed after the
            # forty-second session wrote small groups' tiles from registers:
            # the sixteenth session's candidates
            "docs/results/session42-wgrad-discrete-retune-h200-2026-11-30.csv",
            # the same candidates re-timed after the forty-third session
            # re-pointed the overwriting kernels' maps with the warp and
            # stored their dW in rows of a tile
            "docs/results/session44-wgrad-discrete-retune-h200-2026-11-30.csv",
            # the small-group discrete classes whose every shape the same
            # session timed again after the 3-stage 128x256/256x128 kernels
            # kept the bulk stores there: each kernel's cells from the build
            # whose code ships for it (docs/dispatch.md)
            "docs/results/session44-wgrad-discrete-small-groups-kept-rule-h200-2026-11-30.csv",
            # the decode-sized discrete classes whose every shape the
            # forty-fifth session timed after the kernels that stage a
            # warp's share whole walked decode-sized groups' items in runs:
            # the shipped build's cells, the mean of its two runs of that
            # A/B call (docs/dispatch.md)
            "docs/results/session45-wgrad-discrete-runs-small-groups-h200-2026-11-30.csv",
            # the same classes re-timed later in that session with the
            # discrete raster sweep (128x256 and 256x128 in rasters m and n)
            # among the candidates, two rounds of one call, their mean
            "docs/results/session45-wgrad-discrete-raster-small-groups-h200-2026-11-30.csv",
            # every discrete overwrite class re-timed with every candidate
            # (the raster sweep among them), the mean of two rounds of one
            # call, chosen within a band of ROBUST_DISCRETE (docs/dispatch.md)
            DISCRETE_RETUNE,
            # the row-wise fp8 classes whose entry was 128x256 cooperative,
            # re-timed at steady state against the pingpong kernels other
            # entries name, every shape of each class, the sides of an op
            # alternating in one process (scripts/held_alone_csv.py --keys
            # from python/bench/fp8_bench.py --steady --compare;
            # docs/dispatch.md, fiftieth session)
            "docs/results/session50-fp8-row-classes-steady-h200-2026-12-01.csv",
            # the block-scaled fp8 classes whose entry was cooperative,
            # re-timed the same way against the 128x256 default at 3 stages
            # (docs/dispatch.md, fifty-first session)
            "docs/results/session51-fp8-block-classes-steady-h200-2026-12-01.csv",
            # row-wise fp8 dgrad of Mixtral's fc1 class (tmax.g8.nmax.k4096),
            # every shape of it, the table's 128x128 pingpong against 128x256
            # cooperative (1x1 and 2x1 clusters), each held alone 1.5 s at the
            # power limit (scripts/held_alone_csv.py from fp8_bench.py
            # --variants --sample; docs/dispatch.md, sixty-fourth session)
            "docs/results/session64-fp8-mixtral-dgrad-held-alone-h200-2026-12-02.csv",
            # row-wise fp8 dgrad of the other classes whose entry was 128x128
            # pingpong (Mixtral 8x22B, DBRX, Llama 4 Scout and Qwen2-57B fc1),
            # every shape, held alone the same way (docs/dispatch.md,
            # sixty-fifth session)
            "docs/results/session65-fp8-dgrad-held-alone-h200-2026-12-02.csv",
            # row-wise fp8 fprop of Mixtral 8x7B's fc2 class (reduction
            # 14336), held alone the same way (sixty-fifth session)
            "docs/results/session65-fp8-mixtral-fc2-fprop-held-alone-h200-2026-12-02.csv",
            # row-wise fp8 dgrad of Qwen3-30B fc1's class, the whole dgrad
            # sweep on every shape of it, kiln tune --hold 1.0 (sixty-sixth
            # session; QWEN3_HELD below)
            QWEN3_HELD[1],
            # the long classes (tokens per group from 1024 up) of row-wise
            # fp8 and plain bf16 fprop and dgrad, every in-sample shape of
            # each, the class's entry against the new 128x192 pingpong
            # kernel (and its raster m twin where the entry walks m), kiln
            # tune --hold 0.5 (docs/dispatch.md, sixty-ninth and seventieth
            # sessions)
            "docs/results/session69-128x192-pingpong-classes-held-h200-2026-12-03.csv",
            # plain overwriting wgrad, every class and every in-sample shape
            # of it, the class's entry against the 128x192 pingpong kernels
            # the seventy-first session added (raster group, n and m), kiln
            # tune --hold 0.5 (docs/dispatch.md, seventy-first session)
            "docs/results/session71-wgrad-128x192-pingpong-classes-held-h200-2026-12-03.csv",
            # dense accumulating wgrad, every class from 256 tokens a group up
            # and every in-sample shape of it, the class's entry against the
            # 128x192 pingpong accumulate kernels the seventy-second session
            # added (raster group, n and m), kiln tune --hold 0.5
            # (docs/dispatch.md, seventy-second session)
            "docs/results/session72-wgrad-acc-128x192-pingpong-classes-held-h200-2026-12-03.csv",
            # accumulating wgrad with db, and discrete accumulating wgrad,
            # the same way: every class from 256 tokens a group up, its entry
            # against the 128x192 pingpong kernel of its sweep (seventy-second
            # session's runs, shipped by the seventy-fourth)
            "docs/results/session72-wgrad-acc-dbias-128x192-pingpong-classes-held-h200-2026-12-03.csv",
            "docs/results/session72-wgrad-discrete-acc-128x192-pingpong-classes-held-h200-2026-12-03.csv",
            # overwriting wgrad with db, and discrete overwriting wgrad,
            # every class from 1024 tokens a group up and every in-sample
            # shape of it, the class's entry against the 128x192 pingpong
            # kernel the seventy-fourth session's templates let compile
            # (docs/dispatch.md, seventy-fourth session)
            "docs/results/session74-wgrad-dbias-128x192-pingpong-classes-held-h200-2026-12-04.csv",
            "docs/results/session74-wgrad-discrete-128x192-pingpong-classes-held-h200-2026-12-04.csv",
            # bf16 dgrad of the class t256.gmax.n4096.k8192 (DeepSeek-V2/V3
            # fc1 without expert parallelism), every in-sample shape, the
            # class's entry against the 16-bit defaults, on an H100
            # (python/bench/context_ab.py through scripts/held_alone_csv.py;
            # docs/dispatch.md, ninety-fifth session)
            S95_DGRAD,
            # every kind of bf16 wgrad (overwrite, db, discrete, accumulate,
            # accumulate+db, discrete accumulate) of the class
            # t256.g8.n4096.k8192 (DeepSeek-V3 fc1 after EP32, Kimi-K2 fc1
            # after EP64), every shape of it from 80 to 256 tokens a group,
            # every kernel an entry of the kind names and its defaults (plain:
            # the whole sweep), kiln tune --hold 0.5 on an H100
            # (docs/dispatch.md, ninety-seventh session)
            "docs/results/session97-wgrad-ep-fc1-class-tune-h100-2026-12-06.csv",
            # bf16 fprop of the class t256.g8.n8192.k2048 (DeepSeek-V3 fc2
            # after EP32, 128-200 tokens a group), which no entry held:
            # every in-sample shape, the model's choice against the 16-bit
            # 64-row defaults and 128x192 pingpong forced, from graphs
            # (context_ab.py through scripts/held_alone_csv.py;
            # docs/dispatch.md, ninety-eighth session)
            S98_FPROP,
            # plain overwriting wgrad of three classes whose entry ran below
            # torch or far behind the 128x256 default on an H100 (DBRX and
            # Llama 4 Scout fc1, GPT-OSS-120B fc1, DeepSeek-V3 fc2 after
            # EP8): every in-sample shape, every overwrite kernel an entry
            # names forced, from graphs (context_ab.py through
            # scripts/held_alone_csv.py; docs/dispatch.md, ninety-ninth session)
            S99_WGRAD,
            # discrete and accumulating wgrad of two of those classes
            # (GPT-OSS-120B fc1, DeepSeek-V3 fc2 EP8), the same way
            S99_KINDS,
            # fprop, dgrad and wgrad of the classes of Llama 4 Scout, DBRX
            # and Phi-3.5-MoE fc1, every kernel an entry of the op names or
            # a default forced, the same way (docs/dispatch.md, hundredth
            # session)
            S100_FC1,
            # dgrad of two other classes whose entry named 128x192
            # pingpong (DeepSeek-V3 fc1 EP8, Mixtral 8x7B fc2) against the
            # two 128x256 cooperative kernels, the same way
            S100_DGRAD]
    rc, text = run("--table", SHIPPED, "--timer", "gpu:NVIDIA_H200", "--skip-untimed-shapes",
                   "--robust", ROBUST, "--robust-for", DISCRETE_RETUNE + "=" + ROBUST_DISCRETE,
                   "--supersede", "--check", *csvs)
    # After a new tuning run, commit its CSV and name it here (docs/dispatch.md).
    check(rc == 0, "the shipped table is what the committed CSVs give: " + text.strip())
    # That held sweep also timed dirichlet_g128's class, without its other
    # shape (irregular_g64), and skew64_longk's, whose entry it found
    # fastest; the table takes the Qwen3 class's rows alone, and the
    # committed class CSV is exactly those rows.
    raw, cls, key = QWEN3_HELD
    with open(os.path.join(ROOT, raw)) as f:
        lines = f.read().splitlines()
    col = lines[0].split(",").index("class")
    want = [lines[0]] + [row for row in lines[1:] if row.split(",")[col] == key]
    with open(os.path.join(ROOT, cls)) as f:
        got = f.read().splitlines()
    check(got == want and len(got) == 61, "%s is the rows of class %s of %s" % (cls, key, raw))


HELD = os.path.join(ROOT, "scripts", "held_alone_csv.py")
HELD_LOG = """device: NVIDIA H200; op fprop; 4 rounds of 20 calls a side after 0.5 s of warm-up
big fprop: torch 6.0 ms, floor 4.8 ms
  a              5.7 ms  x1.053 torch  1.0000 of a  0.84 of floor  %s
  b              5.8 ms  x1.034 torch  1.0175 of a  0.83 of floor  %s
  a            alone for 3 s:   5.9000 ms at 1425 MHz, 692 W: 4000 mJ a call
  b            alone for 3 s:   5.5000 ms at 1440 MHz, 690 W: 3800 mJ a call
  torch        alone for 3 s:   6.1 ms at 1425 MHz, 692 W: 4200 mJ a call
held fprop: torch 6.0 ms, floor 4.8 ms
  a              5.7 ms  x1.053 torch  1.0000 of a  0.84 of floor  %s
  a            alone for 3 s:   5.0000 ms at 1425 MHz, 692 W: 4000 mJ a call
""" % (KA, KB, KA)


def held(*args):
    return script(HELD, *args)


def test_held_alone(d):
    log, tune = os.path.join(d, "v.log"), os.path.join(d, "tune.csv")
    open(log, "w").write(HELD_LOG)
    open(tune, "w").write("\n".join([HEADER + ",a,b,out"] + [
        row(v, "fprop", sh, X, "timed", ms) + ",bf16,bf16,bf16"
        for v, sh, ms in [(KA, "big", 4.0), (KB, "big", 4.1), (KC, "big", 3.0),
                          (KA, "held", 4.2)]]) + "\n")
    rc, out, err = held("--log", log, "--sides", "a,b", "--exclude", "held", tune)
    got = [r.split(",") for r in out.splitlines()[1:]]
    flops = 2.0 * 32 * 1024 * 8192 * 2048
    ok = (rc == 0 and [(r[0], r[4], r[12], r[17]) for r in got] ==
          [(KA, "big@held", "5.9", "held alone 3 s"), (KB, "big@held", "5.5", "held alone 3 s")]
          and all(r[10] == X and r[18:] == ["bf16"] * 3 for r in got)
          and abs(float(got[1][13]) - flops / 5.5e-3 / 1e12) < 0.5)
    check(ok, "held_alone_csv.py: each side's own kernel with its held-alone time, the excluded "
          "shape and the other kernel left out" + ("" if ok else " (%s%s)" % (out, err.strip())))
    rc, _, err = held("--log", log, "--sides", "a,c", tune)
    check(rc == 2 and "side c:" in err, "held_alone_csv.py: a side with no row refused: " + err)
    open(log, "w").write("no such log\n")
    rc, _, err = held("--log", log, "--sides", "a", tune)
    check(rc == 2 and "no held-alone lines" in err, "held_alone_csv.py: a log without held-alone "
          "lines refused: " + err)
    res = os.path.join(ROOT, "docs", "results")
    rc, out, err = held("--log", os.path.join(res, "session32-mixtral-fc1-steady-h200-2026-11-29.log"),
                        "--sides", "rm,rgroup", "--exclude", "mixtral8x7b_fc1_ep2_skew",
                        os.path.join(res, "session32-mixtral-fc1-onekernel-tune-h200-2026-11-29.csv"))
    want = open(os.path.join(res, "session32-mixtral-fc1-held-alone-h200-2026-11-29.csv")).read()
    check(rc == 0 and out == want, "the committed held-alone CSV is what the script gives from "
          "its committed log and tune CSV " + err.strip())
    # fp8_bench.py --variants --sample logs: their lines carry TFLOP/s beside
    # each time and their case lines say "OP row"; --keys keeps the classes
    # re-timed (the session 65 fc2 log also holds a dgrad class left alone).
    # Each: log, sides, keys, tune CSV, the committed CSV, its lines.
    fp8_runs = [("session64-fp8-mixtral-class-held-alone-h200-2026-12-02.log", "p128,c2regs,c1rm",
                 "dgrad:tmax.g8.nmax.k4096", "session64-fp8-mixtral-dgrad-onekernel-tune-h200-2026-12-02.csv",
                 "session64-fp8-mixtral-dgrad-held-alone-h200-2026-12-02.csv", 10),
                ("session65-fp8-long-reduction-classes-held-alone-h200-2026-12-02.log", "e64,c1rm,c2rm",
                 "fprop:tmax.g8.n4096.kmax", "session65-fp8-mixtral-fc2-onekernel-tune-h200-2026-12-02.csv",
                 "session65-fp8-mixtral-fc2-fprop-held-alone-h200-2026-12-02.csv", 7),
                ("session65-fp8-dgrad-classes-held-alone-h200-2026-12-02.log", "p4,p6,c1rm,c2rm",
                 "dgrad:t1024.g8.nmax.k8192,dgrad:t1024.g32.nmax.k8192,dgrad:t1024.g128.n8192.k4096",
                 "session65-fp8-dgrad-onekernel-tune-h200-2026-12-02.csv",
                 "session65-fp8-dgrad-held-alone-h200-2026-12-02.csv", 33)]
    for log, sides, keys, tune_csv, csv_name, lines in fp8_runs:
        rc, out, err = held("--log", os.path.join(res, log), "--sides", sides, "--keys", keys,
                            os.path.join(res, tune_csv))
        want = open(os.path.join(res, csv_name)).read()
        ok = rc == 0 and out == want and len(want.splitlines()) == lines
        check(ok, "%s (%d lines) is what the script gives from its committed fp8_bench.py log and "
              "tune CSV %s" % (csv_name, lines, err.strip()))

# fp8_bench.py --steady --compare lines: case, side, the alternating median,
# ..., the kernel that served the side
COMPARE_LOG = """fp8 ceiling: torch._scaled_mm 8192^3, fast accumulation: 1450.0 TFLOP/s
  big              fprop@table       5.0000 ms  1000.0 TFLOP/s  0.690 of ceiling  x1.000 of the first  err 2.0e-03  %s
  big              %s  4.5000 ms  1100.0 TFLOP/s  0.760 of ceiling  x0.900 of the first  err 2.0e-03  %s
  held             fprop@table       3.0000 ms  1000.0 TFLOP/s  0.690 of ceiling  x1.000 of the first  err 2.0e-03  %s
""" % (KA, KB, KB, KA)
# the committed re-time of the fiftieth session (docs/dispatch.md)
S50_SIDES = ",".join(["fprop@table", "fprop_sm90_e4m3_row__m64_n256_k128_s4_c1x1_rgroup_pingpong",
                      "sm90_fprop_e4m3_row_128x128",
                      "fprop_sm90_e4m3_row__m128_n128_k128_s4_c1x1_rgroup_pingpong",
                      "dgrad@table", "dgrad_sm90_e4m3_row__m64_n256_k128_s4_c1x1_rgroup_pingpong",
                      "dgrad_sm90_e4m3_row__m128_n128_k128_s6_c1x1_rgroup_pingpong",
                      "dgrad_sm90_e4m3_row__m128_n128_k128_s4_c1x1_rgroup_pingpong"])
S50_KEYS = ",".join("fprop:" + c for c in [
    "t256.g8.n4096.k8192", "t256.g32.n4096.k8192", "t256.g32.nmax.k8192", "t1024.g32.n8192.k4096",
    "t1024.g128.n2048.k1024", "t1024.g128.n2048.k2048", "t1024.g128.n4096.k2048",
    "t1024.g128.n8192.k4096", "tmax.g8.n4096.kmax"]) + "," + ",".join("dgrad:" + c for c in [
    "t1024.g32.nmax.k4096", "t1024.g32.nmax.k8192", "t1024.g128.n2048.k1024",
    "t1024.g128.n2048.k2048"])


def test_compare_log(d):
    """held_alone_csv.py over an fp8_bench.py --compare log: each side's
    alternating time on the rows of the kernel it served, --keys keeping
    only some classes; the committed CSV is what it gives."""
    log, tune = os.path.join(d, "c.log"), os.path.join(d, "tune_c.csv")
    open(log, "w").write(COMPARE_LOG)
    open(tune, "w").write("\n".join([HEADER + ",a,b,out"] + [
        row(v, "fprop", sh, cls, "timed", ms) + ",e4m3,e4m3,bf16"
        for v, sh, cls, ms in [(KA, "big", X, 4.0), (KB, "big", X, 4.1), (KC, "big", X, 3.0),
                               (KA, "held", "t1.g1.n1.k1", 2.0)]]) + "\n")
    rc, out, err = held("--log", log, "--sides", "fprop@table," + KB, tune)
    got = [(r.split(",")[0], r.split(",")[4], r.split(",")[12], r.split(",")[17])
           for r in out.splitlines()[1:]]
    want = [(KA, "big@steady", "5", "alternating at steady state"),
            (KB, "big@steady", "4.5", "alternating at steady state"),
            (KA, "held@steady", "3", "alternating at steady state")]
    check(rc == 0 and got == want, "held_alone_csv.py: a compare log's sides with their "
          "alternating times (%s%s)" % (got, err.strip()))
    rc, out, err = held("--log", log, "--sides", "fprop@table," + KB, "--keys", "fprop:" + X, tune)
    check(rc == 0 and "held@steady" not in out and out.count("big@steady") == 2,
          "held_alone_csv.py --keys: only the rows of those keys " + err.strip())
    rc, _, err = held("--log", log, "--sides", "fprop@table", "--keys", "fprop", tune)
    check(rc == 2 and "--keys" in err, "held_alone_csv.py: a key without its class refused: " + err)
    res = os.path.join(ROOT, "docs", "results")
    rc, out, err = held("--log", os.path.join(res, "session50-fp8-row-classes-steady-h200-2026-12-01.log"),
                        "--sides", S50_SIDES, "--keys", S50_KEYS,
                        os.path.join(res, "session15-fp8-tune-h200-2026-11-24.csv"))
    want = open(os.path.join(res, "session50-fp8-row-classes-steady-h200-2026-12-01.csv")).read()
    check(rc == 0 and out == want, "the committed steady-state CSV is what the script gives from "
          "its committed log and the tune CSV " + err.strip())


# context_ab.py lines: case, op, TFLOP/s, each side's median and ratio, torch,
# and the kernel that served the first side ("as is")
AB_LOG = """sides: as is, KILN_KERNEL=%s, KILN_SPLIT=0, KILN_KERNEL=%s#old, torch; time over the first's
  big              fprop   100.0 TFLOP/s  as is 5.0000 ms x1.000  KILN_KERNEL=%s 4.5000 ms x0.900  KILN_SPLIT=0 4.0000 ms x0.800  KILN_KERNEL=%s#old 3.0000 ms x0.600  torch 6.0000 ms x1.200  %s
""" % (KB, KB, KB, KB, KA)


def test_context_ab_log(d):
    """held_alone_csv.py over a context_ab.py log: "as is" takes the kernel
    the line ends with, KILN_KERNEL=NAME takes NAME; a setting that names no
    kernel, or another build's side, gives no row; the committed CSV of the
    ninety-fifth session is what it gives."""
    log, tune = os.path.join(d, "ab.log"), os.path.join(d, "tune_ab.csv")
    open(log, "w").write(AB_LOG)
    open(tune, "w").write("\n".join([HEADER + ",a,b,out"] + [
        row(v, "fprop", "big", X, "timed", ms) + ",bf16,bf16,bf16"
        for v, ms in [(KA, 4.0), (KB, 4.1), (KC, 3.0)]]) + "\n")
    rc, out, err = held("--log", log, "--sides", "as is,KILN_KERNEL=" + KB, tune)
    got = [(r.split(",")[0], r.split(",")[4], r.split(",")[12]) for r in out.splitlines()[1:]]
    want = [(KA, "big@ab", "5"), (KB, "big@ab", "4.5")]
    check(rc == 0 and got == want, "held_alone_csv.py: a context_ab log's sides with their "
          "times (%s%s)" % (got, err.strip()))
    # the same case timed again (another process): its last time, or with
    # --mean the mean and a note saying of how many
    again = AB_LOG.replace("as is 5.0000 ms", "as is 6.0000 ms").replace(
        "KILN_KERNEL=%s 4.5000 ms" % KB, "KILN_KERNEL=%s 4.7000 ms" % KB)
    open(log, "w").write(AB_LOG + again)
    for extra, want in (((), [(KA, "6", ""), (KB, "4.7", "")]),
                        (("--mean",), [(KA, "5.5", "mean of 2"), (KB, "4.6", "mean of 2")])):
        rc, out, err = held("--log", log, "--sides", "as is,KILN_KERNEL=" + KB, *extra, tune)
        got = [(r.split(",")[0], r.split(",")[12], "mean of 2" if "mean of 2" in r else "")
               for r in out.splitlines()[1:]]
        check(rc == 0 and got == want, "held_alone_csv.py %s: a side timed twice (%s%s)"
              % (" ".join(extra), got, err.strip()))
    open(log, "w").write(AB_LOG + AB_LOG.replace("  %s\n" % KA, "  %s\n" % KC))
    rc, _, err = held("--log", log, "--sides", "as is", tune)
    check(rc == 2 and "served %s here, %s before" % (KC, KA) in err,
          "held_alone_csv.py: a side that served another kernel the second time: " + err.strip())
    # wgrad_acc and wgrad_discrete lines take the rows of those epilogues;
    # a plain wgrad row of the same kernel and shape is not theirs
    tune_w = os.path.join(d, "tune_ab_wgrad.csv")
    open(tune_w, "w").write("\n".join([HEADER + ",a,b,out"] + [
        row(v, "wgrad", "big", X, "timed", "4.0").replace(",plain,", "," + ep + ",") + ",bf16,bf16,f32"
        for v, ep in [(KA, "accumulate"), (KB, "wgrad_output"), (KC, "plain")]]) + "\n")
    lines = [AB_LOG.splitlines()[1].replace(" fprop ", " %s " % op).replace(
        "KILN_KERNEL=%s 4.5000" % KB, "KILN_KERNEL=%s %s" % (k, ms))
        for op, k, ms in [("wgrad_acc", KA, "4.2000"), ("wgrad_discrete", KB, "4.3000"),
                          ("wgrad", KA, "9.0000")]]
    open(log, "w").write(AB_LOG.splitlines()[0] + "\n" + "\n".join(lines) + "\n")
    rc, out, err = held("--log", log, "--sides", "KILN_KERNEL=%s,KILN_KERNEL=%s" % (KA, KB),
                        tune_w)
    got = [(r.split(",")[0], r.split(",")[3], r.split(",")[12]) for r in out.splitlines()[1:]]
    check(rc == 0 and got == [(KA, "accumulate", "4.2"), (KB, "wgrad_output", "4.3")],
          "held_alone_csv.py: context_ab's wgrad_acc and wgrad_discrete lines take the rows of "
          "their epilogues (%s%s)" % (got, err.strip()))
    open(log, "w").write(AB_LOG)
    for side in ("KILN_SPLIT=0", "KILN_KERNEL=%s#old" % KB):
        rc, _, err = held("--log", log, "--sides", side, tune)
        check(rc == 2 and "side %s:" % side in err, "held_alone_csv.py: context_ab side %s "
              "names no kernel of this build: %s" % (side, err.strip()))
    res = os.path.join(ROOT, "docs", "results")
    for csv_path, sides, key, tune_csv, held_out, nrows, opts in COMMITTED_AB:
        rc, out, err = held("--log", os.path.join(ROOT, csv_path[:-len(".csv")] + ".log"),
                            "--sides", sides, "--keys", key,
                            *(["--exclude", held_out] if held_out else []), *opts,
                            os.path.join(res, tune_csv))
        want = open(os.path.join(ROOT, csv_path)).read()
        check(rc == 0 and out == want and len(want.splitlines()) == nrows + 1
              and not (held_out and held_out in want),
              "%s is what the script gives from its committed log%s %s" % (
                  csv_path, ", without " + held_out if held_out else "", err.strip()))


# the committed re-time of the fifty-first session: the block recipe's
# cooperative classes, their entry against the 3-stage 128x256 default
S51_SIDES = "fprop@table_block,sm90_fprop_e4m3_block_128x256,dgrad@table_block," \
    "sm90_dgrad_e4m3_block_128x256"
S51_KEYS = ",".join("fprop:" + c for c in [
    "t1024.g128.n2048.k1024", "t1024.g128.n2048.k2048", "t1024.g128.n2048.k8192",
    "t1024.g128.n4096.k2048", "t1024.g128.n8192.k4096", "t1024.g32.n4096.k4096",
    "t1024.g32.n4096.k8192", "t1024.g32.n8192.k2048", "t1024.g32.n8192.k4096",
    "t1024.g32.nmax.k4096", "t1024.g32.nmax.k8192", "t1024.g8.n4096.k8192",
    "t1024.g8.nmax.k8192", "t256.g128.n2048.k2048", "t256.g128.n8192.k4096",
    "t256.g32.n4096.k4096", "t256.g32.n4096.k8192", "t256.g32.nmax.k8192",
    "t256.g8.n4096.k8192", "t256.gmax.n4096.k8192", "tmax.g32.n4096.k4096",
    "tmax.g32.n4096.k8192", "tmax.g8.n4096.k8192", "tmax.g8.n4096.kmax",
    "tmax.g8.nmax.k4096"]) + "," + ",".join("dgrad:" + c for c in [
    "t1024.g128.n2048.k1024", "t1024.g128.n2048.k2048", "t1024.g128.n2048.k8192",
    "t1024.g128.n4096.k2048", "t1024.g128.n8192.k4096", "t1024.g32.n4096.k4096",
    "t1024.g32.n4096.k8192", "t1024.g32.n8192.k2048", "t1024.g32.n8192.k4096",
    "t1024.g32.nmax.k4096", "t1024.g32.nmax.k8192", "t1024.g8.nmax.k8192",
    "t256.g128.n2048.k2048", "t256.g128.n8192.k4096", "t256.g32.n4096.k4096",
    "t256.g32.nmax.k8192", "t256.g8.n4096.k8192", "t256.gmax.n4096.k8192",
    "tmax.g32.n4096.k4096", "tmax.g32.n4096.k8192", "tmax.g8.n4096.k8192",
    "tmax.g8.n4096.kmax", "tmax.g8.nmax.k4096"])


def test_s51_csv(d, kiln):
    """The fifty-first session's CSV from its committed log: the entries' rows
    from the block tune run, the 3-stage defaults' rows (the columns of a
    kiln tune run over them; held_alone_csv.py writes the times) from a
    fake-timer run here."""
    res = os.path.join(ROOT, "docs", "results")
    specs = ["specs/default/sm90_%s_e4m3_block_128x256.yaml" % op for op in ("fprop", "dgrad")]
    tunes = [os.path.join(d, "s51_%s.csv" % b) for b in ("cases", "corpus")]
    for b, path in zip(("cases", "corpus"), tunes):
        if not tune_fake(kiln, d, specs, "bench/%s.tsv" % b, path + ".tuning", path):
            return
    rc, out, err = held("--log", os.path.join(res, "session51-fp8-block-classes-steady-h200-2026-12-01.log"),
                        "--sides", S51_SIDES, "--keys", S51_KEYS,
                        os.path.join(res, "session23-fp8-block-tune-h200-2026-11-28.csv"), *tunes)
    want = open(os.path.join(res, "session51-fp8-block-classes-steady-h200-2026-12-01.csv")).read()
    check(rc == 0 and out == want, "the committed block steady-state CSV is what the script gives "
          "from its committed log " + err.strip())


def main():
    kiln, bench = sys.argv[1], sys.argv[2]
    with tempfile.TemporaryDirectory() as d:
        test_hand(d, bench)
        test_robust(d)
        test_supersede(d)
        test_fake_tune(d, kiln)
        test_redescribe(d)
        test_held_alone(d)
        test_compare_log(d)
        test_context_ab_log(d)
        test_s51_csv(d, kiln)
    test_shipped()
    print("%d failed" % len(failures) if failures else "all passed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
