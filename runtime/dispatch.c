/* SPDX-License-Identifier: Apache-2.0 */
/* dispatch.c — the backend cascade: exact table ▸ nearest class ▸ twin ▸ model ▸
 * cuBLASLt (see dispatch.h). */
#include <stdio.h>
#include <string.h>

#include "clusters.h"
#include "cublaslt.h"
#include "dispatch.h"
#include "dispatch_model.h"
#include "problem.h"

/* fprop and dgrad: under 128 tokens a group, a 128-row tile pads.  wgrad:
 * the tokens are the reduction, and on short ones a tile's time goes
 * mostly to its epilogue, where the accumulating kinds' 128x128 defaults
 * win.  Dense dW: from 512 tokens a group the 128x256 default (the dynamic
 * work order) took 0.84-0.96 of the 128x128 rows default's time on every
 * held-out layer, 1.07-1.11 at 102-204 (H200, docs/dispatch.md,
 * thirty-fifth session).  Discrete dW: its accumulating 128x256 kernel
 * keeps the static order and wins only from 1024 (thirty-first).  fp8
 * row-wise with promotion: under 192 tokens a group its 64x128 pingpong
 * default pads less than the 128x128 cooperative one; on the 13 held-out
 * layers where this edge changes the model's choice, it took 0.968 of the
 * time in geometric mean, 0.940 on irregular routing and 0.996 on equal
 * counts, of which layers of exactly 128 tokens a group (no padding in a
 * 128-row tile) lost 0-16%; at 204 and from 512 up 128x128 won (H200,
 * docs/dispatch.md, fiftieth and fifty-second sessions). */
static int row_promote(const kiln_problem *p)
{
    return p->op != KILN_OP_WGRAD && p->fp8.recipe == KILN_FP8_ROW && p->fp8.promote;
}

int kiln_dispatch_shape_class(const kiln_problem *p)
{
    int64_t small = row_promote(p) ? 192 : 128;
    if (p->op == KILN_OP_WGRAD) small = p->wgrad_output == KILN_WGRAD_DISCRETE ? 1024 : 512;
    return p->capacity / (p->groups > 0 ? p->groups : 1) < small ? 0 : 1;
}

void kiln_dispatch_arch_name(int major, int minor, char *out, size_t size)
{
    /* 9.0 and 10.0 have arch-specific instructions (wgmma, tcgen05) that only
     * the "a" targets enable; the default kernels are built for those. */
    if ((major == 9 || major == 10) && minor == 0) snprintf(out, size, "sm_%d%da", major, minor);
    else snprintf(out, size, "sm_%d%d", major, minor);
}

void kiln_dispatch_describe(const kiln_problem *p, const char *arch, char *out, size_t size)
{
    char extra[192] = "";
    size_t n = 0;
#define ADD(s) n += (size_t)snprintf(extra + n, n < sizeof extra ? sizeof extra - n : 0, "%s%s", n ? ", " : "", s)
    if (p->op == KILN_OP_WGRAD) {
        ADD(p->wgrad_output == KILN_WGRAD_DISCRETE ? "discrete" : "dense");
        if (p->accumulate) ADD("accumulate");
        if (p->d_dbias || p->d_dbias_ptrs) ADD(p->d_dbias ? "dbias" : "dbias per expert");
    } else {
        static const char *const recipe[] = {"", "fp8 per tensor", "fp8 row-wise", "fp8 1x128/128x128"};
        if (p->fp8.recipe > KILN_FP8_NONE && p->fp8.recipe <= KILN_FP8_BLOCK) ADD(recipe[p->fp8.recipe]);
        if (p->fp8.promote) ADD("fp32 promotion");
        if (p->d_b_ptrs) ADD("pointer-array weights");
        const kiln_epilogue *e = &p->epilogue;
        if (e->d_bias) ADD("bias");
        if (e->d_row_scale) ADD(e->d_bias && e->scale_bias ? "row scale of acc and bias" : "row scale");
        if (e->d_alpha) ADD("per-group alpha");
        if (e->beta != 0.0f) ADD("beta*C");
    }
#undef ADD
    snprintf(out, size, "%s→%s %s%s%s%s on %s", kiln_dtype_name(p->a_type),
             kiln_dtype_name(p->out_type), kiln_op_name(p->op), n ? " (" : "", extra, n ? ")" : "",
             arch);
}

static int has_arch(const kiln_dispatch_kernel *k, const char *arch)
{
    if (k->arch) return strcmp(k->arch, arch) == 0;
    for (int i = 0; i < k->desc->n_archs; i++)
        if (!strcmp(k->desc->archs[i], arch)) return 1;
    return 0;
}

/* The most groups k takes, as its template reports it (the sm90 templates
 * keep their tile schedule in shared memory, sized for a fixed number). */
static int max_groups(const kiln_dispatch_kernel *k)
{
    return k->launch && k->launch->max_groups > 0 ? k->launch->max_groups : KILN_MAX_GROUPS;
}

#define NO(...) (snprintf(why, why_size, __VA_ARGS__), 0)

int kiln_should_use_kernel(const kiln_dispatch_kernel *k, const char *arch, const kiln_problem *p,
                           char *why, size_t why_size)
{
    const kiln_kernel_desc *d = k->desc;
    const char *nm = d->name;
    if (d->op != p->op) return NO("%s is %s", nm, kiln_op_name(d->op));
    if (!has_arch(k, arch)) return NO("%s is built for %s", nm, k->arch ? k->arch : d->archs[0]);
    if (d->a_type != p->a_type || d->b_type != p->b_type || d->out_type != p->out_type)
        return NO("%s takes %s→%s", nm, kiln_dtype_name(d->a_type), kiln_dtype_name(d->out_type));
    if (d->accum_type != KILN_DTYPE_F32) return NO("%s accumulates in %s", nm, kiln_dtype_name(d->accum_type));
    const kiln_launch_desc *l = k->launch;
    if (p->groups > max_groups(k)) return NO("%s handles at most %d groups", nm, max_groups(k));
    if (p->op == KILN_OP_WGRAD) {
        if (d->wgrad_output != p->wgrad_output)
            return NO("%s writes %s output", nm, d->wgrad_output == KILN_WGRAD_DISCRETE ? "discrete" : "dense");
        if (d->accumulate != (p->accumulate != 0))
            return NO("%s %s", nm, d->accumulate ? "only accumulates" : "does not accumulate");
        /* A dbias kernel also serves calls without db (its kernels skip
         * the sums when both pointers are null), so a tuned entry that
         * names one stays usable; unused_features ranks it below a plain
         * kernel for such calls. */
        if ((p->d_dbias || p->d_dbias_ptrs) && !d->dbias)
            return NO("%s does not compute the bias gradient", nm);
        /* A split reduction adds partial sums into the output, so it can
         * only serve accumulating calls (the template refuses it otherwise). */
        if (d->split != 1 && !d->accumulate)
            return NO("%s splits the reduction without accumulating", nm);
        return 1;
    }
    static const char *const recipes[] = {"none", "tensor", "row", "block"};
    if (d->fp8_recipe != p->fp8.recipe)
        return NO("%s takes fp8 recipe %s", nm, recipes[d->fp8_recipe & 3]);
    if ((p->fp8.promote || p->fp8.recipe == KILN_FP8_BLOCK) && !d->fp8_promote)
        return NO("%s accumulates fp8 fast (the call asks for promotion)", nm);
    if (p->d_b_ptrs && d->weights != KILN_WEIGHTS_ANY) return NO("%s needs contiguous weights", nm);
    const kiln_epilogue *e = &p->epilogue;
    const kiln_epilogue_desc *de = &d->epilogue;
    if (e->d_bias && de->bias != KILN_BIAS_PER_GROUP) return NO("%s has no bias", nm);
    if (e->d_row_scale && !de->row_scale) return NO("%s has no row scale", nm);
    /* scale_bias: some templates compile it as a capability switched by
     * args.scale_bias (launch.scale_bias_switch); others scale the bias
     * whenever it is compiled in, and then a call without scale_bias needs
     * an exact match. */
    if (e->d_row_scale && e->d_bias) {
        if (e->scale_bias && !de->scale_bias) return NO("%s does not scale the bias by the row scale", nm);
        if (!e->scale_bias && de->scale_bias && !(l && l->scale_bias_switch))
            return NO("%s always scales the bias by the row scale", nm);
    }
    if (e->d_alpha && de->alpha != KILN_ALPHA_PER_GROUP) return NO("%s has no per-group alpha", nm);
    if (e->beta != 0.0f && !de->beta) return NO("%s has no beta*C term", nm);
    return 1;
}

/* Features compiled in that this call does not use: fewer is better (less
 * work in the epilogue, and no reliance on run-time switches). */
static int unused_features(const kiln_kernel_desc *d, const kiln_problem *p)
{
    if (p->op == KILN_OP_WGRAD) return d->dbias && !p->d_dbias && !p->d_dbias_ptrs;
    const kiln_epilogue *e = &p->epilogue;
    int n = 0;
    n += d->epilogue.bias == KILN_BIAS_PER_GROUP && !e->d_bias;
    n += d->epilogue.row_scale && !e->d_row_scale;
    n += d->epilogue.alpha == KILN_ALPHA_PER_GROUP && !e->d_alpha;
    n += d->epilogue.beta && e->beta == 0.0f;
    n += d->fp8_promote && !p->fp8.promote && p->fp8.recipe != KILN_FP8_BLOCK;
    return n;
}

/* The tile rule, for kernels the model cannot tell apart: few tokens per
 * group take small M tiles (fewer padded rows), many take large tiles; of
 * the same tile, the deeper pipeline (more loads in flight to hide the
 * memory's latency: wgrad 128x256 and 256x128 at 3 stages run 5-25%
 * behind 4 on most corpus shapes, session4-corpus-tune-wgrad CSV).
 *
 * Of two few-token tiles of one height, 16-bit fprop takes the wider: they
 * pad the same rows, and the wider reads each group's rows once for twice
 * the columns in half the tiles.  On the committed runs this changes three
 * cells, all H100 calls after expert parallelism where 128x128 and
 * 128x256 tie: Qwen3-Coder fc1 at EP16 (10 groups of 102 rows) 1.079 ->
 * 1.000 of the best, Qwen3-235B fc1 at EP16 (8 of 96) 1.143 -> 1.020,
 * Kimi-K2 fc1 at EP64 (model alone) 1.275 -> 1.002; forced in one process
 * 128x256 ran 0.908-0.945x 128x128's time on the first two and 1.049x on
 * Qwen3-30B fc1 at EP8 (16 of 96, a 2048-deep reduction; docs/dispatch.md,
 * ninety-fifth session).  dgrad keeps the narrower: no run has priced it. */
static int tile_rule(const kiln_kernel_desc *a, const kiln_kernel_desc *b, const kiln_problem *p)
{
    long long ta = (long long)a->tile_m * a->tile_n, tb = (long long)b->tile_m * b->tile_n;
    if (kiln_dispatch_shape_class(p) == 0) {
        if (a->tile_m != b->tile_m) return a->tile_m < b->tile_m;
        const int wider = p->op == KILN_OP_FPROP && kiln_dtype_size(p->a_type) == 2;
        if (ta != tb) return wider ? ta > tb : ta < tb;
    } else {
        if (ta != tb) return ta > tb;
        if (a->tile_m != b->tile_m) return a->tile_m > b->tile_m;
    }
    return a->stages > b->stages;
}

/* One kernel the model ranks: a catalog default (kernel >= 0) or a tuning
 * table entry's (tuned >= 0). */
typedef struct candidate {
    kiln_dispatch_kernel k;
    long kernel, tuned;
    kiln_dispatch_estimate est;
} candidate;

/* Estimates within this fraction of each other are a tie: the model is not
 * that precise, and the tile rule then decides the same way every time.
 * 16-bit inputs: 5%.  Within 5% the model's first was a 128x128 tile where
 * the bigger tile the rule prefers was as fast or faster: at 1% the model
 * alone was within 8% of the best on 136 of the corpus's 146 fprop/dgrad
 * cases (H200), at 5% on 141, and on the held-out models (H100) fprop went
 * from 1.120x the best in geometric mean (worst 1.42x) to 1.009x
 * (docs/dispatch.md, seventeenth session).  8-bit inputs keep 1%: nothing
 * measured them against another window. */
#define MODEL_TIE_16 0.05
#define MODEL_TIE_8 0.01

/* The calls the seventeenth session's measurements speak for (the tie
 * above, the nearest-class radius below): bf16 and fp16 inputs. */
static int inputs_16bit(const kiln_problem *p) { return kiln_dtype_size(p->a_type) == 2; }

/* 1 if a is less than b by more than the tie window, -1 if b is less than
 * a, 0 within it. */
static int outside_tie(double a, double b, double tie)
{
    return a < b * (1 - tie) ? 1 : b < a * (1 - tie) ? -1 : 0;
}

/* The model's estimate for k on p, on the device o describes. */
static void estimate(const kiln_dispatch_options *o, const kiln_dispatch_kernel *k,
                     const kiln_problem *p, kiln_dispatch_estimate *out)
{
    kiln_dispatch_model_estimate(k->desc, k->launch, p, o->sms,
                                 kiln_clusters_of(o->clusters, k->desc->k_cluster), out);
}

/* Whether c is a tile cut in 4 across a cluster that the model prices
 * (its pieces fit one round of the device's resident clusters, with
 * KILN_KCUT_MIN_PIECE_KB k-blocks each: dispatch_model.h, so the call has
 * at most 30 tiles or so and a long reduction).  Such a kernel ranks
 * before every other: on the decode and prefill layers of
 * bench/ep_decode.tsv and bench/k_cut.tsv (H100, one process, eighty-sixth
 * session) each of the six so priced ran 0.85-0.96x the time of the
 * kernel the dispatcher had chosen, where the model's estimates, whose
 * constants for the cut's sum no run has fitted, put four of them behind.
 * Cuts in 2 (64 tiles) go by the estimate: of five so priced three ran
 * 0.95x, one 1.005x and one 1.07x (DeepSeek-V3's fc2 at EP32, dgrad,
 * whose uncut kernel already streamed at 2.9 TB/s); cuts in 8 have not
 * run in one round. */
static int kcut4_priced(const candidate *c)
{
    return c->k.desc->k_cluster == 4 && c->est.us < KILN_DISPATCH_NOT_PRICED;
}

/* Whether d is a 16-bit 64x128 fprop/dgrad tile: a default served only to
 * decode calls (decode_tile_suits, decode_rows_max) and ranked first where
 * decode_tile_first says, else by the model (ranks_before). */
static int decode_tile(const kiln_kernel_desc *d, const kiln_problem *p)
{
    return d->tile_m == 64 && d->tile_n == 128 && p->op != KILN_OP_WGRAD && inputs_16bit(p);
}

/* The experts one GPU holds after expert parallelism, at most: the calls
 * the ninety-third session's measurements of several decode groups speak
 * for (4-16 groups, bench/ep_decode64.tsv).  On 24-128 groups of 40-128
 * rows (bench/ep_many_groups.tsv) forcing 64x128 took 1.021x (fprop) and
 * 1.047x (dgrad) the time of dispatch's choice. */
#define EP_GROUPS_MAX 16

/* The most rows a group may have on average, on several groups, for the
 * 64x128 default to be ranked (decode_tile_suits): fprop 64 and dgrad 32
 * (ninety-second session), and on at most EP_GROUPS_MAX groups fprop 128
 * and dgrad 64 (ninety-third session, H100, docs/dispatch.md):
 * - dgrad at 33-64 rows, ranked by the model (ties to the other tile):
 *   the 5 calls of bench/ep_decode64.tsv this changes ran 1.12x faster in
 *   geometric mean in two calls (1.006-1.23x); the 22 together 0.974x the
 *   time;
 * - fprop at 65-128 rows, ranked by the model (ties to 64x128): the 3
 *   calls of bench/ep_decode128.tsv this changes, where the model ties,
 *   ran 1.04-1.06x faster in both calls.  Ranked first there, 64x128 won
 *   on uniform counts and lost on random ones (0.88-0.94x on Mixtral's
 *   fc2 at EP4 and Qwen3-Coder's fc1 at EP16, 0.99x in geometric mean),
 *   where a group's spread puts its tiles in a second round. */
static int64_t decode_rows_max(const kiln_problem *p)
{
    const int ep = p->groups <= EP_GROUPS_MAX;
    return p->op == KILN_OP_FPROP ? (ep ? 128 : 64) : (ep ? 64 : 32);
}

/* Whether a 16-bit 64x128 tile that serves p (decode_tile_suits) ranks
 * before the model's estimate (next after a priced cut in 4): on one
 * group, and for fprop on at most EP_GROUPS_MAX groups of 33-64 rows on
 * average.  The model counts a group's routing slack even where there is
 * one group, and puts its tiles in two rounds (1.2-1.3 waves on the calls
 * decode_tile_suits cites, which ran them in one at 0.82-0.97x the time of
 * its choice; a cut in 4 ran in 0.86-0.96x its time on five such calls).
 * On several groups of 33-64 rows it puts 1.25-1.5 64-row tiles on each
 * and prices their second round at up to 1.22x the best other default.  On
 * the 22 layers of bench/ep_decode64.tsv (decode after expert parallelism,
 * uniform and random counts) the 13 calls this changes ran 1.034x and
 * 1.018x faster in geometric mean in two calls on an H100 (0.960-1.099x;
 * DeepSeek-V3 fc2 at EP32 with random counts from 4% behind torch to
 * 2.6-3.5% ahead), and the dispatched kernel went from 1.040 to 1.023 of
 * the best measured (ninety-third session, docs/dispatch.md).  Groups of
 * 32 rows or fewer keep the model's estimate: there 64x128 took up to
 * 1.09x 64x256's time (GPT-OSS-20B's fc2 at EP4). */
static int decode_tile_first(const kiln_problem *p)
{
    return p->groups == 1 || (p->op == KILN_OP_FPROP && p->groups <= EP_GROUPS_MAX &&
                              p->capacity > 32 * p->groups && p->capacity <= 64 * p->groups);
}

/* 1 if a ranks before b for p: the template's own preference (its launch
 * table's), then fewer unused epilogue terms, then a tile cut in 4 across
 * a cluster that the model prices, then a 16-bit 64x128 tile where
 * decode_tile_first says, then the model's estimate, then on several
 * groups a 64x128 tile for fprop and any other for dgrad, then an uncut
 * tile, then the tile rule.  Accumulating wgrad skips the model: its defaults
 * are a 128x128 kernel for short reductions and a 128x256 one for long,
 * and the model, which counts whole waves of equal tiles and pads, put the
 * 128x128 rows kernel more than its tie ahead on five held-out layers of
 * 546-4096 tokens a group (K = 1408, which 256-wide tiles pad, and
 * K = 512), where it took 1.13-1.31x the best kernel's time; the class's
 * pick took 1.00-1.08x.  Over the held-out layers the model's choice went
 * from 1.034 to 1.018 of the best in geometric mean (1.027 to 1.007 with
 * db); on the corpus and for discrete dW no priced choice got worse (H200,
 * docs/dispatch.md, thirty-sixth session).  fp8 row-wise with promotion
 * skips it as well (kiln_dispatch_shape_class says where its defaults
 * cross): the model counts the fast tensor rate, at which a 64x128 tile
 * waits on L2, and priced that default 1.08-1.25x the 128x128 one's time
 * from 150 tokens a group up where it ran 0.77-1.15x, the promotion
 * holding both below that rate (fifty-second session).  With 8-bit inputs,
 * estimates that tie because both reach the call's floor (its compulsory
 * bytes) are told apart by the tiles' own time before the tile rule: on
 * fine-grained layers (512 groups of ~80 tokens) the tile rule's 64x128
 * ran 1.12-1.18x the 64x256 kernel's time; the held-out and corpus fp8
 * runs priced no choice worse (thirty-ninth session).  16-bit calls keep
 * the tile rule, which the bf16 runs price better. */
static int ranks_before(const candidate *a, const candidate *b, const kiln_problem *p)
{
    int fa = a->k.launch ? a->k.launch->preference : 0, fb = b->k.launch ? b->k.launch->preference : 0;
    if (fa != fb) return fa > fb;
    int ua = unused_features(a->k.desc, p), ub = unused_features(b->k.desc, p);
    if (ua != ub) return ua < ub;
    if ((p->op == KILN_OP_WGRAD && p->accumulate) || row_promote(p))
        return tile_rule(a->k.desc, b->k.desc, p);
    const int qa = kcut4_priced(a), qb = kcut4_priced(b);
    if (qa != qb) return qa;
    const int da = decode_tile(a->k.desc, p), db = decode_tile(b->k.desc, p);
    if (da != db && decode_tile_first(p)) return da;
    const int wide = inputs_16bit(p);
    const double tie = wide ? MODEL_TIE_16 : MODEL_TIE_8;
    int by = outside_tie(a->est.us, b->est.us, tie);
    if (!by && !wide) by = outside_tie(a->est.us_tiles, b->est.us_tiles, tie);
    if (by) return by > 0;
    /* in the model's tie on several groups, fprop takes 64x128 and dgrad
     * the other tile: on decode after expert parallelism fprop ran it 2-7%
     * faster than 64x256 on most calls (1% slower on DeepSeek-V3's at
     * EP32), while dgrad, which reads the weights along N, ran it
     * 1.06-1.14x 64x256's time (H100, ninety-second session) */
    if (da != db) return p->op == KILN_OP_FPROP ? da : db;
    /* in a tie, a tile not cut across a cluster (the cut's sum is a cost
     * the floor both reach hides: DeepSeek-V3's fc2 at EP32, dgrad, 1.07x
     * the time in 2 pieces, H100) */
    const int ka = a->k.desc->k_cluster > 1, kb = b->k.desc->k_cluster > 1;
    return ka != kb ? kb : tile_rule(a->k.desc, b->k.desc, p);
}

/* 1 if table entry i may stand for a call: loaded (or not tried) and
 * serving it as its own description says. */
static int entry_serves(const kiln_dispatch_input *in, size_t i, kiln_dispatch_kernel *k)
{
    const kiln_tuning_entry *e = kiln_tuning_table_at(in->tuning, i);
    if (in->tuned_unavailable && in->tuned_unavailable[i]) return 0;
    *k = (kiln_dispatch_kernel){e->key.arch, &e->kdesc, &e->launch};
    char why[200];
    return kiln_should_use_kernel(k, in->arch, in->problem, why, sizeof why);
}

static int tables_usable(const kiln_dispatch_input *in)
{
    return in->tuning && kiln_tuning_table_count(in->tuning) &&
           (in->allowed & KILN_ALLOW_GENERATED);
}

/* The tables' entry for the call's key, if it serves the call (checked
 * against the entry's own description like any kernel) and has not failed
 * to load. */
static int should_use_tuned(const kiln_dispatch_input *in, const kiln_dispatch_options *o,
                            const kiln_tuning_key *key, kiln_dispatch_choice *out)
{
    if (!tables_usable(in) || (o->skip & KILN_DISPATCH_SKIP_EXACT) || in->only_kernel) return 0;
    const kiln_tuning_entry *e = kiln_tuning_lookup(in->tuning, key);
    if (!e) return 0;
    long i = (long)(e - kiln_tuning_table_at(in->tuning, 0));
    kiln_dispatch_kernel k;
    if (!entry_serves(in, (size_t)i, &k)) return 0;
    char cls[32];
    kiln_shape_class_name(&key->shape, cls, sizeof cls);
    out->backend = KILN_BACKEND_GENERATED;
    out->tuned = i;
    out->rule = KILN_DISPATCH_BY_EXACT;
    snprintf(out->reason, sizeof out->reason,
             "exact table: tuned kernel %s for %s (measured %.3f ms; runner-up %s)", e->kernel,
             cls, e->median_ms, e->runnerup[0] ? e->runnerup : "none");
    return 1;
}

static int same_call_kind(const kiln_tuning_key *a, const kiln_tuning_key *b)
{
    return !strcmp(a->arch, b->arch) && a->op == b->op && a->a_type == b->a_type &&
           a->b_type == b->b_type && a->out_type == b->out_type && !strcmp(a->epilogue, b->epilogue);
}

double kiln_dispatch_nearest_max(const kiln_problem *p)
{
    return p->op != KILN_OP_WGRAD && inputs_16bit(p) ? KILN_DISPATCH_NEAREST_MAX_FWD16
                                                     : KILN_DISPATCH_NEAREST_MAX;
}

/* The entry of the nearest measured class (same arch, op, types and
 * epilogue signature) that serves the call, if it lies within
 * kiln_dispatch_nearest_max.  *nearest gets the distance of the nearest
 * class (served or not; -1 when there is none) for the model's reason. */
static int should_use_nearest(const kiln_dispatch_input *in, const kiln_dispatch_options *o,
                              const kiln_tuning_key *key, kiln_dispatch_choice *out,
                              double *nearest)
{
    *nearest = -1;
    if (!tables_usable(in) || in->only_kernel) return 0;
    const kiln_problem *p = in->problem;
    long best = -1;
    double best_d = 0;
    for (size_t i = 0; i < kiln_tuning_table_count(in->tuning); i++) {
        const kiln_tuning_entry *e = kiln_tuning_table_at(in->tuning, i);
        if (!same_call_kind(&e->key, key)) continue;
        kiln_dispatch_kernel k;
        if (!entry_serves(in, i, &k)) continue;
        double d = kiln_shape_class_distance(&e->key.shape, p->groups, p->capacity, p->n, p->k);
        if (best < 0 || d < best_d) {
            best = (long)i;
            best_d = d;
        }
    }
    *nearest = best < 0 ? -1 : best_d;
    if (best < 0 || best_d > kiln_dispatch_nearest_max(p) || (o->skip & KILN_DISPATCH_SKIP_NEAREST))
        return 0;
    const kiln_tuning_entry *e = kiln_tuning_table_at(in->tuning, (size_t)best);
    char cls[32], own[32];
    kiln_shape_class_name(&e->key.shape, cls, sizeof cls);
    kiln_shape_class_name(&key->shape, own, sizeof own);
    out->backend = KILN_BACKEND_GENERATED;
    out->tuned = best;
    out->rule = KILN_DISPATCH_BY_NEAREST;
    snprintf(out->reason, sizeof out->reason,
             "nearest class %s (%.2f octaves from the call; the table has no %s): kernel %s "
             "(measured %.3f ms there)", cls, best_d, own, e->kernel, e->median_ms);
    return 1;
}

/* A default 192 columns wide is ranked only on output widths that 192
 * divides and 256 does not (GPT-OSS's 2880 and 5760), where the 256-wide
 * tile pads its last column of tiles.  Elsewhere the model's whole-wave
 * count put 128x192 first on randomly routed calls where it ran 5-9%
 * behind (jetmoe_fc1_rand dgrad 1.06 -> 1.12 of the best; docs/dispatch.md,
 * thirty-first and thirty-seventh sessions).  The output's columns are N
 * for fprop and K for dgrad; wgrad has no such default. */
static int width_suits(const kiln_kernel_desc *d, const kiln_problem *p)
{
    if (d->tile_n != 192 || p->op == KILN_OP_WGRAD) return 1;
    int64_t cols = p->op == KILN_OP_FPROP ? p->n : p->k;
    return cols % 192 == 0 && cols % 256 != 0;
}

/* A 16-bit default of 64x128 tiles is ranked only for decode calls:
 * - one group of at most 64 rows whose 128-wide tiles fit one round of the
 *   SMs (decode after expert parallelism with one expert a GPU): twice the
 *   tiles of 64x256 put twice the SMs on the weights.  On the seven such
 *   calls it serves in bench/k_cut.tsv, bench/ep_decode.tsv and Llama 4's
 *   fc2 at EP16 it ran 0.82-0.97x the time of the kernel dispatch took
 *   before it (Mixtral, Mixtral 8x22B, DBRX, Llama 4 decode, fprop and
 *   dgrad; H100, ninetieth session, docs/benchmarks.md);
 * - several groups of at most decode_rows_max rows on average (ranked as
 *   decode_tile_first and ranks_before say). */
static int decode_tile_suits(const kiln_kernel_desc *d, const kiln_problem *p, int sms)
{
    if (!decode_tile(d, p)) return 1;
    const int64_t cols = p->op == KILN_OP_FPROP ? p->n : p->k;
    if (p->groups > 1) return p->capacity <= decode_rows_max(p) * p->groups;
    return p->capacity <= 64 && (cols + 127) / 128 <= (sms > 0 ? sms : KILN_DISPATCH_MODEL_SMS);
}

/* 1 if a and b have one tile and schedule (what the twin rule matches). */
static int same_tile(const kiln_kernel_desc *a, const kiln_kernel_desc *b)
{
    return a->tile_m == b->tile_m && a->tile_n == b->tile_n && a->tile_k == b->tile_k &&
           !strcmp(a->schedule, b->schedule);
}

/* The model's first among the catalog's defaults that serve the call (the
 * tables' kernels when none does), of tile's tile and schedule where tile
 * is given; -1 if none (why says so). */
static int should_use_generated(const kiln_dispatch_input *in, const kiln_dispatch_options *o,
                                const kiln_kernel_desc *tile, candidate *best, int *n_served,
                                char *why, size_t why_size)
{
    const kiln_problem *p = in->problem;
    *n_served = 0;
    if (!(in->allowed & KILN_ALLOW_GENERATED)) {
        snprintf(why, why_size, "generated kernels are not allowed%s%s", in->forced_by ? " by " : "",
                 in->forced_by ? in->forced_by : "");
        return 0;
    }
    char first_why[200] = "";
    int same_op = 0;
    for (size_t i = 0; i < in->n_kernels; i++) {
        char w[200];
        if (in->only_kernel && strcmp(in->kernels[i].desc->name, in->only_kernel)) continue;
        if (!kiln_should_use_kernel(&in->kernels[i], in->arch, p, w, sizeof w)) {
            /* Keep the reason of the closest candidate: same op first. */
            int op_match = in->kernels[i].desc->op == p->op;
            if (!first_why[0] || (op_match && !same_op)) {
                snprintf(first_why, sizeof first_why, "%s", w);
                same_op = op_match;
            }
            continue;
        }
        if (!in->only_kernel && (!width_suits(in->kernels[i].desc, p) ||
                                 !decode_tile_suits(in->kernels[i].desc, p, o->sms)))
            continue;
        if (tile && !same_tile(in->kernels[i].desc, tile)) continue;
        candidate c = {.k = in->kernels[i], .kernel = (long)i, .tuned = -1};
        estimate(o, &c.k, p, &c.est);
        if (!(*n_served)++ || ranks_before(&c, best, p)) *best = c;
    }
    /* The tables' kernels only when no default serves the call: on shapes
     * whose class the table lacks (the report's "unseen" column, session6
     * and session4 CSVs) ranking them too gains 2 of 146 fprop/dgrad cases
     * within 8% and loses 5 of 73 wgrad ones (the model cannot tell wgrad's
     * tiles apart; docs/dispatch.md). */
    const int defaults_serve = *n_served > 0;
    for (size_t i = 0; !defaults_serve && tables_usable(in) && i < kiln_tuning_table_count(in->tuning);
         i++) {
        candidate c = {.kernel = -1, .tuned = (long)i};
        if (in->only_kernel && strcmp(kiln_tuning_table_at(in->tuning, i)->kernel, in->only_kernel))
            continue;
        if (!entry_serves(in, i, &c.k) || (tile && !same_tile(c.k.desc, tile))) continue;
        estimate(o, &c.k, p, &c.est);
        if (!(*n_served)++ || ranks_before(&c, best, p)) *best = c;
    }
    if (!*n_served) {
        char call[256];
        kiln_dispatch_describe(p, in->arch, call, sizeof call);
        if (first_why[0])
            snprintf(why, why_size, "no generated kernel for %s (closest: %s)", call, first_why);
        else if (in->only_kernel)
            snprintf(why, why_size, "no generated kernel for %s (none is named KILN_KERNEL=%s)",
                     call, in->only_kernel);
        else
            snprintf(why, why_size, "no generated kernel for %s (the catalog is empty)", call);
    }
    return *n_served > 0;
}

/* fprop and dgrad with epilogue terms (bias, row scale, per-group alpha,
 * beta*C) whose own signature the tables lack: the same call without the
 * terms (and with contiguous weights, as the tuner times it) is dispatched,
 * and where the tables serve it (its exact entry, or its nearest class
 * when the model does not overrule that), the kernel with the call's
 * terms of that entry's tile and schedule serves, the model ranking
 * several.  The tuner times plain calls; the terms cost every tile about
 * the same, so the plain call's best tile stays the best.  The model alone
 * had put 128x128 epilogue kernels on shapes whose plain entry is 64x256
 * pingpong, 1.10-1.17x the plain call's time (fp8 row-wise with a row
 * scale on mod64_1, dirichlet_g128); following a nearest class the model
 * overrules took 64x256 at 1.04-1.06x where the model's 128x128 ran
 * 0.90-0.98x (bf16, two held-out layers; H200, docs/dispatch.md,
 * forty-ninth session).  No twin (the terms' kernels come in fewer tiles):
 * 0, and the model chooses. */
static int should_use_twin(const kiln_dispatch_input *in, const kiln_dispatch_options *o,
                           kiln_dispatch_choice *out)
{
    const kiln_problem *p = in->problem;
    const kiln_epilogue *ep = &p->epilogue;
    if (p->op == KILN_OP_WGRAD || in->only_kernel) return 0;
    if (!ep->d_bias && !ep->d_row_scale && !ep->d_alpha && ep->beta == 0.0f) return 0;
    kiln_problem q = *p;
    q.epilogue.d_bias = q.epilogue.d_row_scale = q.epilogue.d_alpha = NULL;
    q.epilogue.beta = 0.0f;
    q.epilogue.scale_bias = 0;
    q.d_b_ptrs = NULL;
    kiln_dispatch_input plain_in = *in;
    plain_in.problem = &q;
    kiln_dispatch_choice plain;
    kiln_error err;
    if (kiln_dispatch_with(&plain_in, o, &plain, &err) != KILN_OK ||
        (plain.rule != KILN_DISPATCH_BY_EXACT && plain.rule != KILN_DISPATCH_BY_NEAREST))
        return 0;
    const kiln_tuning_entry *e = kiln_tuning_table_at(in->tuning, (size_t)plain.tuned);
    candidate best;
    int n;
    char why[512];
    if (!should_use_generated(in, o, &e->kdesc, &best, &n, why, sizeof why)) return 0;
    char cls[32];
    kiln_shape_class_name(&e->key.shape, cls, sizeof cls);
    const kiln_kernel_desc *t = best.k.desc;
    out->backend = KILN_BACKEND_GENERATED;
    out->kernel = best.kernel;
    out->tuned = best.tuned;
    out->rule = KILN_DISPATCH_BY_TWIN;
    snprintf(out->reason, sizeof out->reason,
             "twin of the plain call's kernel: %s (%dx%d %s, as %s, %s for %s without the "
             "epilogue terms)", t->name, t->tile_m, t->tile_n, t->schedule, e->kernel,
             plain.rule == KILN_DISPATCH_BY_EXACT ? "tuned" : "nearest class", cls);
    return 1;
}

static int should_use_cublaslt(const kiln_dispatch_input *in, char *why, size_t why_size)
{
    if (!(in->allowed & KILN_ALLOW_CUBLASLT))
        return NO("cuBLASLt is not allowed%s%s", in->forced_by ? " by " : "",
                  in->forced_by ? in->forced_by : "");
    const kiln_problem *p = in->problem;
    if (!p->host_sizes) return NO("no host sizes for cuBLASLt");
    if (p->d_dbias || p->d_dbias_ptrs) return NO("cuBLASLt cannot compute the bias gradient");
    /* fp8: the per-tensor recipe, as cuBLASLt's scaled fp8 matmul takes it
     * (its own rules, beside its backend in cublaslt.c). */
    if (p->fp8.recipe != KILN_FP8_NONE) return kiln_cublaslt_fp8_serves(p, in->arch, why, why_size);
    /* cuBLASLt computes 16-bit inputs into the same type or into f32 only. */
    if (p->out_type != p->a_type && p->out_type != KILN_DTYPE_F32)
        return NO("cuBLASLt has no %s→%s product", kiln_dtype_name(p->a_type),
                  kiln_dtype_name(p->out_type));
    return 1;
}

/* "model score: NAME (tile ...) est ...; first of N kernels (...)". */
static void model_reason(const kiln_dispatch_input *in, const kiln_dispatch_options *o,
                         const candidate *c, int n, double nearest, double overruled, char *out,
                         size_t size)
{
    const kiln_kernel_desc *d = c->k.desc;
    char tail[96];
    if (overruled > 0)
        snprintf(tail, sizeof tail, "overrules the nearest class, %.2f octaves off: its kernel est %.2fx",
                 nearest, overruled);
    else if (!in->tuning || !kiln_tuning_table_count(in->tuning)) snprintf(tail, sizeof tail, "no tuning table");
    else if (nearest < 0) snprintf(tail, sizeof tail, "no measured class of this kind");
    else if (o->skip & KILN_DISPATCH_SKIP_NEAREST) snprintf(tail, sizeof tail, "tables skipped");
    else snprintf(tail, sizeof tail, "nearest measured class %.2f octaves away", nearest);
    char cut[32] = "";
    if (c->est.split_ways > 1)
        snprintf(cut, sizeof cut, ", last round cut in %d", c->est.split_ways);
    snprintf(out, size,
             "model score: %s (%s %dx%dx%d) est %.1f us, %.2f waves at %.0f%%%s, %.0f%% padded rows, "
             "tile at %.0f%% of tensor peak; first of %d kernels (%s)",
             d->name, d->family, d->tile_m, d->tile_n, d->tile_k, c->est.us, c->est.waves,
             100 * c->est.wave_efficiency, cut, 100 * c->est.padding, 100 * c->est.tile_efficiency, n,
             tail);
}

/* The model's estimate for the nearest class's kernel (chosen) over its
 * own first among the defaults (best), when that exceeds
 * 1 + KILN_DISPATCH_NEAREST_OVERRULE; else 0 and the class's kernel
 * stands. */
static double model_overrules(const kiln_dispatch_input *in, const kiln_dispatch_options *o,
                              const kiln_dispatch_choice *chosen, const candidate *best)
{
    kiln_dispatch_kernel k;
    if (best->kernel < 0 || chosen->tuned < 0 || !entry_serves(in, (size_t)chosen->tuned, &k))
        return 0;
    kiln_dispatch_estimate est;
    estimate(o, &k, in->problem, &est);
    double ratio = best->est.us > 0 ? est.us / best->est.us : 0;
    return ratio > 1 + KILN_DISPATCH_NEAREST_OVERRULE ? ratio : 0;
}

kiln_status kiln_dispatch(const kiln_dispatch_input *in, kiln_dispatch_choice *out,
                          kiln_error *err)
{
    return kiln_dispatch_with(in, NULL, out, err);
}

kiln_status kiln_dispatch_with(const kiln_dispatch_input *in, const kiln_dispatch_options *o,
                               kiln_dispatch_choice *out, kiln_error *err)
{
    static const kiln_dispatch_options none = {0, 0, {0}};
    if (!o) o = &none;
    memset(out, 0, sizeof *out);
    out->kernel = -1;
    out->tuned = -1;
    kiln_tuning_key key;
    double nearest = -1;
    int nearest_chosen = 0;
    if (tables_usable(in)) {
        kiln_tuning_key_from_problem(in->problem, in->arch, &key);
        if (should_use_tuned(in, o, &key, out)) return KILN_OK;
        /* Pointer-array weights with no entry of their own: the entries of
         * the same call with contiguous weights (the tuner times those),
         * when their kernel takes pointers too: it loads the same tiles,
         * only through a map it points at each group (measured within 3% of
         * the contiguous call on most benchmark shapes, 4-11% slower on a
         * few: docs/sm90_kernel.md).  entry_serves still checks the kernel
         * against the call as it is. */
        if (in->problem->d_b_ptrs) {
            kiln_problem q = *in->problem;
            q.d_b_ptrs = NULL;
            kiln_tuning_key_from_problem(&q, in->arch, &key);
            if (should_use_tuned(in, o, &key, out)) return KILN_OK;
        }
        nearest_chosen = should_use_nearest(in, o, &key, out, &nearest);
        if (!nearest_chosen && should_use_twin(in, o, out)) return KILN_OK;
    }
    char why_gen[512], why_lt[200];
    candidate best = {.kernel = -1, .tuned = -1};
    int n = 0;
    const int generated = should_use_generated(in, o, NULL, &best, &n, why_gen, sizeof why_gen);
    const double overruled = nearest_chosen && generated ? model_overrules(in, o, out, &best) : 0;
    if (nearest_chosen && overruled == 0) return KILN_OK;
    if (generated) {
        memset(out, 0, sizeof *out); /* the nearest class's choice, where overruled */
        out->backend = KILN_BACKEND_GENERATED;
        out->kernel = best.kernel;
        out->tuned = best.tuned;
        out->rule = KILN_DISPATCH_BY_MODEL;
        model_reason(in, o, &best, n, nearest, overruled, out->reason, sizeof out->reason);
        return KILN_OK;
    }
    if (should_use_cublaslt(in, why_lt, sizeof why_lt)) {
        out->backend = KILN_BACKEND_CUBLASLT;
        out->rule = KILN_DISPATCH_BY_CUBLASLT;
        snprintf(out->reason, sizeof out->reason, "cuBLASLt with host sizes: %s", why_gen);
        return KILN_OK;
    }
    return kiln_error_set(err, KILN_ERROR_UNSUPPORTED, "%s, and %s", why_gen, why_lt);
}
