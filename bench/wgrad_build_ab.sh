#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# wgrad_build_ab.sh — the same wgrad kernels from two builds of kiln (a
# template change: the kernels keep their names, so one `kiln tune` cannot
# hold both), timed in one call on a GPU: `kiln tune` of each build over the
# same sweeps and shapes, four runs in the order old, new, new, old (each
# cell checked against cuBLASLt first), then per kernel and shape the new
# build's time over the old one's (the mean of each build's two runs), and
# per shape the best kernel's.  Written for the dW stores in rows of a tile
# (docs/sm90_wgrad.md, eighteenth session).
#
#   bench/wgrad_build_ab.sh OLD_KILN NEW_KILN OUT_DIR SHAPES.tsv SWEEP.yaml...
set -u
usage="usage: bench/wgrad_build_ab.sh OLD_KILN NEW_KILN OUT_DIR SHAPES.tsv SWEEP.yaml..."
old=${1:?$usage}
new=${2:?$usage}
out=${3:?$usage}
shapes=${4:?$usage}
shift 4
[ $# -gt 0 ] || { echo "$usage" >&2; exit 2; }
mkdir -p "$out"
cache=${KILN_CACHE_DIR:-$(mktemp -d /tmp/kiln-build-ab.XXXXXX)}
i=0
for b in old new new old; do
  i=$((i + 1))
  kiln=$old; [ $b = new ] && kiln=$new
  KILN_CACHE_DIR=$cache/$b timeout 600 "$kiln" tune "$@" --shapes "$shapes" --csv \
    -o "$out/run$i.tuning" > "$out/run${i}_$b.csv" 2> "$out/run${i}_$b.log"
  echo "run $i ($b): exit $?; $(grep -c ',timed,' "$out/run${i}_$b.csv") cells timed," \
       "$(grep -vc ',timed,\|^variant' "$out/run${i}_$b.csv") not"
done
python3 - "$out" <<'PY' | tee "$out/summary.txt"
import csv, glob, statistics, sys
d = sys.argv[1]
t = {}   # (shape, variant, build) -> [ms per run]
for p in sorted(glob.glob(d + '/run*_*.csv')):
    b = 'new' if p.endswith('_new.csv') else 'old'
    for row in csv.DictReader(open(p)):
        if row['state'] == 'timed':
            t.setdefault((row['shape'], row['variant'], b), []).append(float(row['median_ms']))
def ms(s, v, b):
    x = t.get((s, v, b), [])
    return statistics.mean(x) if len(x) == 2 else None
shapes = list(dict.fromkeys(s for s, v, b in t))
variants = sorted(set(v for s, v, b in t))
print(f"{'new/old time':48s} " + ' '.join(f'{s[:9]:>9s}' for s in shapes) + '  geomean')
for v in variants:
    rs = [ms(s, v, 'new') / ms(s, v, 'old') if ms(s, v, 'new') and ms(s, v, 'old') else None
          for s in shapes]
    ok = [r for r in rs if r]
    if ok:
        print(f"{v.replace('wgrad_sm90_bf16_', ''):48s} " + ' '.join(f'{r:9.3f}' if r else f'{"-":>9s}' for r in rs)
              + f"  {statistics.geometric_mean(ok):.3f}")
best = []
for s in shapes:
    o = [m for m in (ms(s, v, 'old') for v in variants) if m]
    n = [m for m in (ms(s, v, 'new') for v in variants) if m]
    if o and n:
        best.append((s, min(n) / min(o), min(o), min(n)))
print("best kernel per shape, new/old (ms old -> new):")
for s, r, o, n in best:
    print(f"  {s:28s} {r:6.3f}  ({o:.4f} -> {n:.4f})")
PY
