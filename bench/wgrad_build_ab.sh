#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# wgrad_build_ab.sh — the same wgrad kernels from two or more builds of kiln
# (a template change: the kernels keep their names, so one `kiln tune` cannot
# hold both), timed in one call on a GPU: `kiln tune` of each build over the
# same sweeps and shapes, the builds run forwards and then backwards (old,
# new; new, old, or with more: old, new, new2; new2, new, old), each cell
# checked against cuBLASLt first; then per kernel and shape each new build's
# time over the old one's (the mean of each build's two runs), and per shape
# the best kernel's.  Written for the dW stores in rows of a tile
# (docs/sm90_wgrad.md, eighteenth session); more than one new build since
# the forty-third (discrete dW maps).
#
#   bench/wgrad_build_ab.sh OLD_KILN NEW_KILN[,NEW_KILN2...] OUT_DIR SHAPES.tsv SWEEP.yaml...
set -u
usage="usage: bench/wgrad_build_ab.sh OLD_KILN NEW_KILN[,NEW_KILN2...] OUT_DIR SHAPES.tsv SWEEP.yaml..."
old=${1:?$usage}
news=${2:?$usage}
out=${3:?$usage}
shapes=${4:?$usage}
shift 4
[ $# -gt 0 ] || { echo "$usage" >&2; exit 2; }
mkdir -p "$out"
cache=${KILN_CACHE_DIR:-$(mktemp -d /tmp/kiln-build-ab.XXXXXX)}
IFS=, read -r -a builds <<< "$old,$news"   # build b is "old" (0) or "new<b>"
label() { [ "$1" -eq 0 ] && echo old || { [ "$1" -eq 1 ] && echo new || echo "new$1"; }; }
order=()
for ((b = 0; b < ${#builds[@]}; b++)); do order+=("$b"); done
for ((b = ${#builds[@]} - 1; b >= 0; b--)); do order+=("$b"); done
i=0
for b in "${order[@]}"; do
  i=$((i + 1))
  l=$(label "$b")
  KILN_CACHE_DIR=$cache/$l timeout 600 "${builds[$b]}" tune "$@" --shapes "$shapes" --csv \
    -o "$out/run$i.tuning" > "$out/run${i}_$l.csv" 2> "$out/run${i}_$l.log"
  echo "run $i ($l): exit $?; $(grep -c ',timed,' "$out/run${i}_$l.csv") cells timed," \
       "$(grep -vc ',timed,\|^variant' "$out/run${i}_$l.csv") not"
done
python3 - "$out" <<'PY' | tee "$out/summary.txt"
import csv, glob, re, statistics, sys
d = sys.argv[1]
t = {}   # (shape, variant, build) -> [ms per run]
for p in sorted(glob.glob(d + '/run*_*.csv')):
    b = re.search(r'_(old|new\d*)\.csv$', p).group(1)
    for row in csv.DictReader(open(p)):
        if row['state'] == 'timed':
            t.setdefault((row['shape'], row['variant'], b), []).append(float(row['median_ms']))
def ms(s, v, b):
    x = t.get((s, v, b), [])
    return statistics.mean(x) if len(x) == 2 else None
shapes = list(dict.fromkeys(s for s, v, b in t))
variants = sorted(set(v for s, v, b in t))
news = sorted(set(b for s, v, b in t) - {'old'}, key=lambda b: (len(b), b))
for nb in news:
    print(f"== {nb} over old")
    print(f"{nb + '/old time':48s} " + ' '.join(f'{s[:9]:>9s}' for s in shapes) + '  geomean')
    for v in variants:
        rs = [ms(s, v, nb) / ms(s, v, 'old') if ms(s, v, nb) and ms(s, v, 'old') else None
              for s in shapes]
        ok = [r for r in rs if r]
        if ok:
            print(f"{v.replace('wgrad_sm90_bf16_', ''):48s} " + ' '.join(f'{r:9.3f}' if r else f'{"-":>9s}' for r in rs)
                  + f"  {statistics.geometric_mean(ok):.3f}")
    print(f"best kernel per shape, {nb}/old (ms old -> {nb}):")
    for s in shapes:
        o = [m for m in (ms(s, v, 'old') for v in variants) if m]
        n = [m for m in (ms(s, v, nb) for v in variants) if m]
        if o and n:
            print(f"  {s:28s} {min(n) / min(o):6.3f}  ({min(o):.4f} -> {min(n):.4f})")
PY
