#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# wgrad_ab.sh — one wgrad sweep against the shipped ones, in one process
# call on a GPU: `kiln tune` times every kernel of the candidate sweep(s)
# and of the baseline sweeps on the short-reduction shapes (each cell
# checked against cuBLASLt first), ROUNDS times with the order of the two
# sets flipped each round, and prints per shape the best baseline kernel,
# the best candidate and their ratio (mean of the rounds' medians).  Before
# that, the candidates alone on small edge shapes (partial tiles, rows
# straddling N, empty groups, a group of every token, 1024 groups), where
# only the check matters.  Written for the reuse schedule (issue 11,
# docs/sm90_wgrad.md, seventeenth session; its sweep is in the history),
# usable for any wgrad sweep:
#
#   bench/wgrad_ab.sh BUILD_DIR OUT_DIR CANDIDATE.yaml...
#   (baseline: the plain and pair sweeps; $KILN_AB_ROUNDS rounds, default 2;
#   the summary names candidates by their sweeps' kernel prefixes, so a
#   candidate spec's `kernel:` must be its file name with wgrad_sm90_ made
#   wgrad_sm90_bf16_, as the shipped sweeps' are)
set -u
here=$(cd "$(dirname "$0")/.." && pwd)
usage="usage: bench/wgrad_ab.sh BUILD_DIR OUT_DIR CANDIDATE.yaml..."
build=${1:?$usage}
out=${2:?$usage}
shift 2
cand=("$@")
[ ${#cand[@]} -gt 0 ] || { echo "$usage" >&2; exit 2; }
# $KILN_AB_BASE: the baseline sweeps instead (space-separated paths)
if [ -n "${KILN_AB_BASE:-}" ]; then read -r -a base <<< "$KILN_AB_BASE"
else base=("$here/specs/sweeps/wgrad_sm90_plain.yaml" "$here/specs/sweeps/wgrad_sm90_pair.yaml"); fi
rounds=${KILN_AB_ROUNDS:-2}
kiln=$build/kiln
mkdir -p "$out"
export KILN_CACHE_DIR=${KILN_CACHE_DIR:-$(mktemp -d /tmp/kiln-ab.XXXXXX)}

# The benchmark's short reductions and the corpus's decode shapes that sat
# below 0.8 of the floor, two long reductions as controls ($KILN_AB_SHAPES:
# a shapes file instead).
if [ -n "${KILN_AB_SHAPES:-}" ]; then cp "$KILN_AB_SHAPES" "$out/ab_shapes.tsv"; else
{ grep -E '^(irregular_g64|dirichlet_g128|qwen3_30b_fc1|skew64_longk|decode_g256_t8|decode_g128_t4|small_decode|balanced32)[[:space:]]' "$here/bench/cases.tsv"
  grep -E '^(dsv2_fc1_ep32_dec|dsv3_fc1_ep32_dec|qwen3_235b_fc1_ep8_dec|dsv2_fc1_ep8_dec|qwen3_30b_fc1_skew)[[:space:]]' "$here/bench/corpus.tsv"
} > "$out/ab_shapes.tsv"
fi
# Edge shapes: name groups tokens_per_group K N sizes (docs/tuning.md).
printf '%s\n' \
  $'e_decode\t64\t16\t512\t384\tuniform' \
  $'e_skew\t32\t321\t384\t328\tskew' \
  $'e_mod\t8\t129\t256\t512\tmod64_1' \
  $'e_g1024\t1024\t20\t200\t264\trandom' \
  $'e_big\t4\t1000\t512\t1040\tskew' > "$out/edge_shapes.tsv"

echo "== edge shapes (check only)"
timeout 300 "$kiln" tune "${cand[@]}" --shapes "$out/edge_shapes.tsv" --csv \
  -o "$out/edge.tuning" > "$out/edge.csv" 2> "$out/edge.log"
echo "kiln tune exit $?; cells: $(grep -c ',timed,' "$out/edge.csv") timed, $(grep -vc ',timed,\|^variant' "$out/edge.csv") not"
grep -v ',timed,\|^variant' "$out/edge.csv" | head -5

for r in $(seq 1 "$rounds"); do
  if [ $((r % 2)) = 1 ]; then set=("${base[@]}" "${cand[@]}"); else set=("${cand[@]}" "${base[@]}"); fi
  echo "== round $r"
  timeout 600 "$kiln" tune "${set[@]}" --shapes "$out/ab_shapes.tsv" --csv \
    -o "$out/ab_r$r.tuning" > "$out/ab_r$r.csv" 2> "$out/ab_r$r.log"
  echo "kiln tune exit $?; cells: $(grep -c ',timed,' "$out/ab_r$r.csv") timed, $(grep -vc ',timed,\|^variant' "$out/ab_r$r.csv") not"
done

python3 - "$out" "$rounds" "${cand[@]}" <<'EOF' | tee "$out/summary.txt"
import csv, glob, os, re, statistics, sys
out, rounds = sys.argv[1], int(sys.argv[2])
cand_names = [os.path.basename(p).replace('.yaml', '').replace('wgrad_sm90_', 'wgrad_sm90_bf16_')
              for p in sys.argv[3:]]
def is_cand(v): return any(v.startswith(c + '__') or v == c for c in cand_names)
t = {}   # (shape, variant) -> [ms per round]
for r in range(1, rounds + 1):
    for row in csv.DictReader(open(f'{out}/ab_r{r}.csv')):
        if row['state'] == 'timed':
            t.setdefault((row['shape'], row['variant']), []).append(float(row['median_ms']))
shapes = []
for row in csv.DictReader(open(f'{out}/ab_r1.csv')):
    if row['shape'] not in shapes: shapes.append(row['shape'])
def is_acc(v): return 'acc' in v.partition('__')[0]
print(f"{'shape':24s} {'best baseline':52s} {'ms':>8s} {'best candidate':40s} {'ms':>8s} {'cand/base':>9s}")
ratios = []
for s in shapes:
    for acc in (False, True):   # overwrite and accumulating kernels apart
        m = {v: statistics.mean(x) for (sh, v), x in t.items()
             if sh == s and len(x) == rounds and is_acc(v) == acc}
        b = min(((ms, v) for v, ms in m.items() if not is_cand(v)), default=None)
        c = min(((ms, v) for v, ms in m.items() if is_cand(v)), default=None)
        if not b or not c: continue
        ratios.append(c[0] / b[0])
        print(f"{s:24s} {b[1]:52s} {b[0]:8.4f} {c[1]:40s} {c[0]:8.4f} {c[0] / b[0]:9.3f}")
if ratios:
    print(f"best candidate / best baseline: geomean {statistics.geometric_mean(ratios):.3f}, "
          f"range {min(ratios):.3f}-{max(ratios):.3f} over {len(ratios)} shape-kinds ({rounds} rounds)")
# Twins: a candidate against the baseline kernel of the same variant suffix
# (after "__") and the same kind (accumulating or not, by "acc" in the prefix).
# $KILN_AB_TWIN: a regular expression removed from both names instead, the
# rest to be equal (e.g. the words naming the two sweeps and a swept knob's
# fragment).
twin_re = os.environ.get('KILN_AB_TWIN')
def twin_key(v):
    return re.sub(twin_re, '', v) if twin_re else (is_acc(v), v.partition('__')[2])
base_by = {}
for (sh, v), x in t.items():
    if not is_cand(v) and len(x) == rounds: base_by[(sh, twin_key(v))] = statistics.mean(x)
pairs = {}
for (sh, v), x in t.items():
    if is_cand(v) and len(x) == rounds and (sh, twin_key(v)) in base_by:
        pairs.setdefault(v, []).append((sh, statistics.mean(x) / base_by[(sh, twin_key(v))]))
if pairs:
    print(f"\n{'candidate / its twin':52s} " + ' '.join(f'{s[:10]:>10s}' for s in shapes) + '    geomean')
    for v in sorted(pairs):
        r = dict(pairs[v])
        print(f"{v:52s} " + ' '.join(f'{r[s]:10.3f}' if s in r else f'{"-":>10s}' for s in shapes) +
              f" {statistics.geometric_mean(r.values()):10.3f}")
EOF
