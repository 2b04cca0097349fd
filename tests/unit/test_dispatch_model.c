/* SPDX-License-Identifier: Apache-2.0 */
/* test_dispatch_model.c — dispatch for shapes the tables do not hold
 * (runtime/dispatch.c, runtime/dispatch_model.c): the nearest measured
 * class keeps a neighbour's kernel one row past a bucket edge (no cliff),
 * how far a class stands for a call (by op and input width), the model
 * overruling a class whose kernel it rates well behind its own, the model's
 * tie window, accumulating wgrad's choice by shape class, the cost model's
 * choice on shapes whose answer is clear, the last round's cut along k that
 * it shares with the kernels, dispatch with tables off, the
 * dbias signature's own entry, kernels of other types (fp8) never chosen
 * for a bf16 call, each fp8 recipe's own entry, and calls with epilogue
 * terms served by the twin of the plain call's kernel.  Fake catalogs and
 * tables; no GPU. */
#include <stdio.h>
#include <stdlib.h>
#include <math.h>
#include <string.h>

#include "testutil.h"

#include "dispatch.h"
#include "dispatch_model.h"
#include "kernel_abi.h"
#include "tuning.h"

#define FAKE(addr) ((void *)(uintptr_t)(addr))

typedef struct catalog {
    kiln_kernel_desc d[8];
    kiln_launch_desc l[8];
    kiln_dispatch_kernel k[8];
    size_t n;
} catalog;

/* An sm90 kernel as the template reports it: preference 2, 1024 groups. */
static kiln_kernel_desc *add(catalog *c, const char *name, kiln_op op, int tm, int tn,
                             const char *schedule)
{
    size_t i = c->n++;
    kiln_kernel_desc *d = &c->d[i];
    kiln_desc_init(d);
    memset(&c->l[i], 0, sizeof c->l[i]);
    snprintf(d->name, sizeof d->name, "%s", name);
    snprintf(d->family, sizeof d->family, "sm90");
    snprintf(d->schedule, sizeof d->schedule, "%s", schedule);
    d->op = op;
    d->tile_m = tm;
    d->tile_n = tn;
    d->tile_k = 64;
    d->weights = KILN_WEIGHTS_CONTIGUOUS;
    if (op == KILN_OP_WGRAD) d->out_type = KILN_DTYPE_BF16;
    snprintf(c->l[i].entry, sizeof c->l[i].entry, "%s", name);
    c->l[i].threads = 384;
    c->l[i].cluster_m = c->l[i].cluster_n = 1;
    c->l[i].max_groups = 1024;
    c->l[i].preference = 2;
    c->l[i].persistent = 1;
    c->l[i].ctas_per_sm = 1;
    c->k[i] = (kiln_dispatch_kernel){"sm_90a", d, &c->l[i]};
    return d;
}

static void problem(kiln_problem *p, kiln_op op, int groups, int64_t tpg, int64_t n, int64_t k)
{
    kiln_problem_init(p, op);
    p->groups = groups;
    p->n = n;
    p->k = k;
    p->capacity = (int64_t)groups * tpg;
    p->d_sizes = FAKE(0x100000);
    p->d_a = FAKE(0x200000);
    p->d_b = FAKE(0x300000);
    p->d_out = FAKE(0x400000);
}

/* Adds an entry naming desc for p's key (its class), measured ms. */
static void add_entry(kiln_tuning_table *t, const kiln_problem *p, const kiln_kernel_desc *d,
                      const kiln_launch_desc *l, double ms)
{
    kiln_strbuf sb;
    kiln_strbuf_init(&sb);
    kiln_desc_format(d, l, &sb);
    kiln_tuning_entry e;
    memset(&e, 0, sizeof e);
    kiln_tuning_key_from_problem(p, "sm_90a", &e.key);
    snprintf(e.kernel, sizeof e.kernel, "%s", d->name);
    memset(e.bundle_id, 'a', 64);
    memset(e.cache_key, 'b', 64);
    e.median_ms = ms;
    e.desc = sb.data;
    kiln_error err;
    kiln_error_clear(&err);
    if (kiln_tuning_table_add(t, &e, &err) != KILN_OK) fail_msg("add: %s", err.msg);
    kiln_strbuf_free(&sb);
}

static kiln_tuning_table *empty_table(void)
{
    kiln_tuning_table *t;
    kiln_error err;
    if (kiln_tuning_table_create(&t, &err) != KILN_OK) fail_msg("create: %s", err.msg);
    return t;
}

/* A table of one entry: desc measured on p's class. */
static kiln_tuning_table *one_entry_table(const kiln_problem *p, const kiln_kernel_desc *d,
                                          const kiln_launch_desc *l)
{
    kiln_tuning_table *t = empty_table();
    add_entry(t, p, d, l, 0.5);
    return t;
}

static kiln_dispatch_choice choose(const catalog *c, const kiln_problem *p,
                                   const kiln_tuning_table *t, unsigned skip)
{
    static unsigned char unavailable[16];
    kiln_dispatch_input in = {p, "sm_90a", c->k, c->n, KILN_ALLOW_GENERATED, NULL, t,
                              unavailable, NULL};
    kiln_dispatch_options o = {0, skip, {0}};
    kiln_dispatch_choice ch;
    kiln_error err;
    kiln_error_clear(&err);
    if (kiln_dispatch_with(&in, &o, &ch, &err) != KILN_OK) fail_msg("dispatch: %s", err.msg);
    return ch;
}

/* The name of what was chosen: a catalog kernel's or a table entry's. */
static const char *chosen(const catalog *c, const kiln_tuning_table *t, const kiln_dispatch_choice *ch)
{
    if (ch->tuned >= 0) return kiln_tuning_table_at(t, (size_t)ch->tuned)->kernel;
    assert_true(ch->kernel >= 0);
    return c->d[ch->kernel].name;
}

/* Any rule, for expect_chosen. */
#define ANY_RULE (-1)

/* Dispatches p (table t, the rules in `skip` skipped): `name` must serve
 * it, chosen by `rule` unless that is ANY_RULE; a miss names both and the
 * reason.  The choice comes back for further checks. */
static kiln_dispatch_choice expect_chosen(const catalog *c, const kiln_problem *p,
                                          const kiln_tuning_table *t, unsigned skip, int rule,
                                          const char *name)
{
    kiln_dispatch_choice ch = choose(c, p, t, skip);
    const char *got = chosen(c, t, &ch);
    if (strcmp(got, name) || (rule != ANY_RULE && (int)ch.rule != rule))
        fail_msg("expected %s (rule %d), got %s (rule %d): %s", name, rule, got, (int)ch.rule,
                 ch.reason);
    return ch;
}

/* The model's estimate for c's kernel i on p, on 132 SMs (an H100's). */
static kiln_dispatch_estimate estimate(const catalog *c, size_t i, const kiln_problem *p)
{
    kiln_dispatch_estimate e;
    kiln_dispatch_model_estimate(&c->d[i], &c->l[i], p, 132, 0, &e);
    return e;
}

/* Whether the model puts c's kernel a ahead of b on p by more than the
 * 16-bit tie (5%, runtime/dispatch.c). */
static int model_ahead(const catalog *c, size_t a, size_t b, const kiln_problem *p)
{
    return estimate(c, a, p).us < estimate(c, b, p).us * 0.95;
}

/* An fp8 call of groups x tpg tokens with recipe's scales (dgrad: and the
 * transposed weights). */
static void fp8_problem(kiln_problem *p, kiln_op op, kiln_fp8_recipe recipe, int groups,
                        int64_t tpg, int64_t n, int64_t k)
{
    problem(p, op, groups, tpg, n, k);
    p->a_type = p->b_type = KILN_DTYPE_E4M3;
    p->fp8.recipe = recipe;
    p->fp8.d_scale_a = p->fp8.d_scale_b = FAKE(0x600000);
    if (op == KILN_OP_DGRAD) p->fp8.d_bt = FAKE(0x700000);
}

/* d as an fp8 kernel of recipe (k-blocks of 128), promoting or not. */
static void as_fp8(kiln_kernel_desc *d, kiln_fp8_recipe recipe, int promote)
{
    d->a_type = d->b_type = KILN_DTYPE_E4M3;
    d->tile_k = 128;
    d->fp8_recipe = recipe;
    d->fp8_promote = promote;
}

/* An fp8 kernel of c: add's, at `stages`, with recipe and promotion. */
static kiln_kernel_desc *add_fp8(catalog *c, const char *name, int tm, int tn, const char *schedule,
                                 int stages, kiln_fp8_recipe recipe, int promote)
{
    kiln_kernel_desc *d = add(c, name, KILN_OP_FPROP, tm, tn, schedule);
    d->stages = stages;
    as_fp8(d, recipe, promote);
    return d;
}

/* The cliff: 32 groups of 1024 tokens have a tuned kernel; 1025
 * tokens a group (class tmax, not in the table) must keep it, as the
 * nearest measured class, and say so. */
static void test_nearest_class_no_cliff(void **state)
{
    (void)state;
    catalog c = {0};
    add(&c, "default_64x128", KILN_OP_FPROP, 64, 128, "pingpong");
    catalog w = {0};
    kiln_kernel_desc *tuned = add(&w, "tuned_128x256", KILN_OP_FPROP, 128, 256, "cooperative");
    kiln_problem p;
    problem(&p, KILN_OP_FPROP, 32, 1024, 4096, 4096);
    kiln_tuning_table *t = one_entry_table(&p, tuned, &w.l[0]);

    kiln_dispatch_choice ch = choose(&c, &p, t, 0);
    assert_int_equal(ch.rule, KILN_DISPATCH_BY_EXACT);
    assert_non_null(strstr(ch.reason, "exact table"));

    p.capacity = 32 * 1025; /* one row a group past the bucket edge */
    ch = expect_chosen(&c, &p, t, 0, KILN_DISPATCH_BY_NEAREST, "tuned_128x256");
    assert_int_equal(ch.tuned, 0);
    kiln_test_has(ch.reason, "nearest class t1024.g32.n4096.k4096", "no tmax.g32.n4096.k4096");
    /* Every capacity from 1 to 3 rows a group past the edge, and an N a
     * little off the class's: the same kernel, never a default. */
    for (int extra = 1; extra <= 3 * 32; extra++) {
        p.capacity = 32 * 1024 + extra;
        p.n = 4096 + 8 * (extra % 3);
        expect_chosen(&c, &p, t, 0, ANY_RULE, "tuned_128x256");
    }
    /* A decode call lies octaves away: the model decides, and says why. */
    problem(&p, KILN_OP_FPROP, 32, 8, 4096, 4096);
    ch = choose(&c, &p, t, 0);
    assert_int_equal(ch.rule, KILN_DISPATCH_BY_MODEL);
    kiln_test_has(ch.reason, "model score", "octaves away");
    /* The rule can be skipped (the benchmark's model-alone report). */
    problem(&p, KILN_OP_FPROP, 32, 1025, 4096, 4096);
    ch = choose(&c, &p, t, KILN_DISPATCH_SKIP_EXACT | KILN_DISPATCH_SKIP_NEAREST);
    assert_int_equal(ch.rule, KILN_DISPATCH_BY_MODEL);
    kiln_tuning_table_destroy(t);
}

/* How far a measured class stands for a call depends on the call: fprop
 * and dgrad with 16-bit inputs half an octave (a few rows past the edge,
 * as above), wgrad and 8-bit inputs one and a half.  An fprop call with
 * twice the class's tokens a group (one octave) takes the model; the same
 * wgrad call takes the class's kernel. */
static void test_nearest_radius_by_call(void **state)
{
    (void)state;
    kiln_tuning_table *t = empty_table();
    catalog c = {0}, w = {0};
    add(&c, "default_fprop", KILN_OP_FPROP, 128, 128, "pingpong");
    add(&c, "default_wgrad", KILN_OP_WGRAD, 128, 256, "cooperative");
    kiln_kernel_desc *tf = add(&w, "tuned_fprop", KILN_OP_FPROP, 128, 256, "cooperative");
    kiln_kernel_desc *tw = add(&w, "tuned_wgrad", KILN_OP_WGRAD, 128, 128, "pingpong");
    kiln_problem p;
    problem(&p, KILN_OP_FPROP, 32, 1024, 4096, 4096);
    add_entry(t, &p, tf, &w.l[0], 0.5);
    problem(&p, KILN_OP_WGRAD, 32, 1024, 4096, 4096);
    add_entry(t, &p, tw, &w.l[1], 0.5);

    problem(&p, KILN_OP_FPROP, 32, 2048, 4096, 4096);
    assert_true(kiln_dispatch_nearest_max(&p) == KILN_DISPATCH_NEAREST_MAX_FWD16);
    kiln_dispatch_choice ch = choose(&c, &p, t, 0);
    assert_int_equal(ch.rule, KILN_DISPATCH_BY_MODEL);
    kiln_test_has(ch.reason, "nearest measured class 1.00 octaves away");
    p.capacity = 32 * 1024 + 32 * 300;   /* 0.4 octaves: the class still stands */
    expect_chosen(&c, &p, t, 0, KILN_DISPATCH_BY_NEAREST, "tuned_fprop");

    problem(&p, KILN_OP_WGRAD, 32, 2048, 4096, 4096);
    assert_true(kiln_dispatch_nearest_max(&p) == KILN_DISPATCH_NEAREST_MAX);
    expect_chosen(&c, &p, t, 0, KILN_DISPATCH_BY_NEAREST, "tuned_wgrad");

    problem(&p, KILN_OP_FPROP, 32, 2048, 4096, 4096);
    p.a_type = p.b_type = KILN_DTYPE_E4M3;
    assert_true(kiln_dispatch_nearest_max(&p) == KILN_DISPATCH_NEAREST_MAX);
    kiln_tuning_table_destroy(t);
}

/* The model overrules the nearest class when it rates the class's kernel
 * more than KILN_DISPATCH_NEAREST_OVERRULE behind its own first: a 64x64
 * kernel measured on one class does not stand for a call 0.23 octaves off
 * whose defaults include a 128x256 tile (64x64 asks the L2 for more
 * than it gives, the model says about 1.7x).  The same entry still
 * serves its own class exactly. */
static void test_nearest_overruled_by_model(void **state)
{
    (void)state;
    catalog c = {0}, w = {0};
    add(&c, "default_128x256", KILN_OP_FPROP, 128, 256, "cooperative");
    kiln_kernel_desc *tuned = add(&w, "tuned_64x64", KILN_OP_FPROP, 64, 64, "pingpong");
    kiln_problem p;
    problem(&p, KILN_OP_FPROP, 32, 1024, 4096, 4096);
    kiln_tuning_table *t = one_entry_table(&p, tuned, &w.l[0]);
    kiln_dispatch_choice ch = choose(&c, &p, t, 0);
    assert_int_equal(ch.rule, KILN_DISPATCH_BY_EXACT);

    p.capacity = 32 * 1200;
    ch = expect_chosen(&c, &p, t, 0, KILN_DISPATCH_BY_MODEL, "default_128x256");
    assert_int_equal(ch.tuned, -1);
    kiln_test_has(ch.reason, "overrules the nearest class, 0.23 octaves off");
    /* Both estimates, as the rule compares them. */
    kiln_dispatch_estimate mine, theirs;
    kiln_dispatch_model_estimate(&c.d[0], &c.l[0], &p, 0, 0, &mine);
    kiln_dispatch_model_estimate(tuned, &w.l[0], &p, 0, 0, &theirs);
    assert_true(theirs.us > mine.us * (1 + KILN_DISPATCH_NEAREST_OVERRULE));
    kiln_tuning_table_destroy(t);
}

/* Model estimates within 5% of each other tie for 16-bit inputs, and the
 * tile rule takes the bigger tile on large groups: GLM-4.5-Air's fc2 at
 * EP 8 (16 experts of 4096 tokens, K 1408, N 4096) rates 128x128 pingpong
 * 1-5% ahead of 128x256 cooperative, which ran 1.30x faster (H100, the
 * seventeenth session's held-out run: docs/dispatch.md). */
static void test_model_tie_prefers_the_bigger_tile(void **state)
{
    (void)state;
    catalog c = {0};
    add(&c, "t128x128", KILN_OP_FPROP, 128, 128, "pingpong");
    add(&c, "t128x256", KILN_OP_FPROP, 128, 256, "cooperative");
    kiln_problem p;
    problem(&p, KILN_OP_FPROP, 16, 4096, 4096, 1408);
    kiln_dispatch_estimate e128 = estimate(&c, 0, &p), e256 = estimate(&c, 1, &p);
    assert_true(e128.us < e256.us * 0.99 && e128.us > e256.us * 0.95);  /* a tie only at 5% */
    expect_chosen(&c, &p, NULL, 0, ANY_RULE, "t128x256");
}

/* Under 128 tokens a group the tile rule takes the smaller tile, but of two
 * of one height 16-bit fprop takes the wider: Qwen3-Coder's fc1 at EP 16
 * (10 experts of 102 tokens, K 6144, N 5120), where the model ties the
 * two, ran 128x256 in 0.91-0.94x 128x128's time (H100,
 * docs/dispatch.md, ninety-fifth session).  dgrad keeps the narrower in
 * its tie (Kimi-K2's fc1 at EP 64: 6 experts of 96 tokens, N 4096,
 * K 7168). */
static void test_model_tie_fprop_takes_the_wider_tile(void **state)
{
    (void)state;
    catalog c = {0};
    add(&c, "t128x128", KILN_OP_FPROP, 128, 128, "pingpong");
    add(&c, "t128x256", KILN_OP_FPROP, 128, 256, "cooperative");
    kiln_problem p;
    problem(&p, KILN_OP_FPROP, 10, 102, 5120, 6144);
    assert_false(model_ahead(&c, 0, 1, &p) || model_ahead(&c, 1, 0, &p));  /* the rule decides */
    expect_chosen(&c, &p, NULL, 0, ANY_RULE, "t128x256");

    catalog g = {0};
    add(&g, "d128x128", KILN_OP_DGRAD, 128, 128, "pingpong");
    add(&g, "d128x256", KILN_OP_DGRAD, 128, 256, "cooperative");
    problem(&p, KILN_OP_DGRAD, 6, 96, 4096, 7168);
    assert_false(model_ahead(&g, 0, 1, &p) || model_ahead(&g, 1, 0, &p));  /* a tie */
    expect_chosen(&g, &p, NULL, 0, ANY_RULE, "d128x128");
}

/* Shapes where the answer is clear: a decode call (8 tokens a group) takes
 * the 64-row tile (the others compute 94% padding); on a large one
 * (Mixtral's 8 experts of 4096 tokens, N 14336) 64x256 is not capped by L2
 * (measured the fastest kernel there: docs/dispatch.md); the estimate's
 * parts add up. */
static void test_model_clear_choices(void **state)
{
    (void)state;
    catalog c = {0};
    add(&c, "t128x128", KILN_OP_FPROP, 128, 128, "pingpong");
    add(&c, "t64x256", KILN_OP_FPROP, 64, 256, "pingpong");
    add(&c, "t128x256", KILN_OP_FPROP, 128, 256, "cooperative");
    add(&c, "t256x128", KILN_OP_FPROP, 256, 128, "cooperative");
    kiln_problem p;
    problem(&p, KILN_OP_FPROP, 256, 8, 1024, 2048);
    kiln_dispatch_choice ch = expect_chosen(&c, &p, NULL, 0, KILN_DISPATCH_BY_MODEL, "t64x256");
    kiln_test_has(ch.reason, "no tuning table");
    kiln_dispatch_estimate e = estimate(&c, 1, &p);
    assert_int_equal(e.tiles, 256 * 4);
    assert_true(e.padding > 0.87 && e.padding < 0.88); /* 1 - 8/64 */
    assert_true(e.waves > 7.75 && e.waves < 7.76);

    problem(&p, KILN_OP_FPROP, 8, 4096, 14336, 4096);
    e = estimate(&c, 1, &p);
    assert_true(e.tile_efficiency > 0.85); /* 64x256: L2 keeps up */
    e = estimate(&c, 2, &p);
    /* its epilogue: 128 rows x 256 columns x 2 bytes at 128 B/clk (TMA
     * stores) and the tile overhead, 512 + 200 clocks past ~76600 of MMA:
     * 0.991 (no epilogue term 0.997; the staged epilogue's 16 B/clk 0.946) */
    assert_true(e.tile_efficiency > 0.985 && e.tile_efficiency < 0.995);
    assert_true(e.padding > 0.0 && e.padding < 0.02); /* half a tile of 32: 1.5% */

    /* Many rows but N 128: the big tiles would compute half their columns
     * (128x256) or serialise (256x128: 16 tiles on 132 SMs); the tile rule
     * alone would take them. */
    problem(&p, KILN_OP_FPROP, 4, 1024, 128, 4096);
    expect_chosen(&c, &p, NULL, 0, ANY_RULE, "t128x128");

    /* dgrad's output columns are K, its reduction N. */
    problem(&p, KILN_OP_DGRAD, 8, 128, 4096, 128);
    e = estimate(&c, 2, &p);
    assert_int_equal(e.tiles, 12); /* 8 groups x 1.5 m tiles (routing slack) x 1 n tile (K 128 < 256) */
}

/* A memory-bound call's last, partial wave costs its bytes, not a whole
 * wave: Llama-4 Scout's decode dgrad (16 experts of 8 tokens, K 5120, N
 * 16384) gives 64x256 2.42 waves and 128x128 4.85; charging 64x256 a whole
 * third wave (the old model, 20% more) chose 128x128, measured 1.21x the
 * best, where 64x256 is the best (session6 corpus CSV). */
static void test_memory_bound_tail_wave(void **state)
{
    (void)state;
    catalog c = {0};
    add(&c, "t128x128", KILN_OP_DGRAD, 128, 128, "pingpong");
    add(&c, "t64x256", KILN_OP_DGRAD, 64, 256, "pingpong");
    kiln_problem p;
    problem(&p, KILN_OP_DGRAD, 16, 8, 16384, 5120);
    kiln_dispatch_estimate e64 = estimate(&c, 1, &p), e128 = estimate(&c, 0, &p);
    assert_true(e64.waves > 2.42 && e64.waves < 2.43);
    assert_true(e64.wave_efficiency < 0.81);
    /* The weights (16 x 5120 x 16384 bf16, 2.7 GB) at the model's 4.3 TB/s:
     * 624 us; the tail adds no more than a few percent. */
    assert_true(e64.us > 600 && e64.us < 660);
    assert_true(e64.us <= e128.us);
    expect_chosen(&c, &p, NULL, 0, ANY_RULE, "t64x256");
}

/* The cut of a last round's reductions, as kernel and model share it
 * (kernel_abi.h): the 16 tiles of a 224-k-block walk in 8 pieces; a round
 * over half the grid, a full last round, a walk under KILN_SPLIT_MIN_WALK
 * (a decode call's 48 tiles of 32 k-blocks, whose cut in two measured
 * 1.49x slower than whole tiles) and a threshold of the whole walk keep
 * whole tiles. */
static void test_split_ways(void **state)
{
    (void)state;
    assert_int_equal(kiln_split_ways(16, 132, 224, 2.0f, 0), 8);
    assert_int_equal(kiln_split_ways(4096, 132, 224, 2.0f, 0), 8);   /* R = 4 of 32 rounds */
    assert_int_equal(kiln_split_ways(80, 132, 224, 2.0f, 0), 1);
    assert_int_equal(kiln_split_ways(264, 132, 224, 2.0f, 0), 1);
    assert_int_equal(kiln_split_ways(48, 132, 32, 2.0f, 0), 1);
    assert_int_equal(kiln_split_ways(48, 132, 128, 2.0f, 0), 2);
    assert_int_equal(kiln_split_ways(16, 132, 224, 2.0f, 1000), 1);
}

/* A decode-sized call of few output tiles and a long reduction (Mixtral's
 * fc2 under 8-way expert parallelism: one expert of 64 tokens, N 4096, K
 * 14336): 64x256 pingpong runs 16 tiles on 16 SMs, each at what one SM's
 * loads bring in (83 us on an H200, 0.73x torch), where the cooperative
 * 128x256 kernel cuts its 16 tiles' reductions in 8, a piece an SM (60
 * us).  The same kernel in a 2x1 cluster does not cut, and a short
 * reduction of as few tiles (qwen3-30b's fc2 dgrad after 8-way expert
 * parallelism: 16 experts of 32 tokens, 768 wide, 2048 deep) is not cut. */
static void test_few_tiles_cut_along_k(void **state)
{
    (void)state;
    catalog c = {0};
    add(&c, "t64x256", KILN_OP_FPROP, 64, 256, "pingpong");
    add(&c, "t128x256", KILN_OP_FPROP, 128, 256, "cooperative");
    kiln_problem p;
    problem(&p, KILN_OP_FPROP, 1, 64, 4096, 14336);
    kiln_dispatch_estimate e64 = estimate(&c, 0, &p), e128 = estimate(&c, 1, &p);
    assert_int_equal(e64.split_ways, 0);
    assert_int_equal(e128.split_ways, 8);
    /* 224 k-blocks of 40 KiB at 62 B a clock, 1.75 GHz: 85 us */
    assert_true(e64.us > 75 && e64.us < 95);
    assert_true(e128.us < 0.8 * e64.us);
    kiln_dispatch_choice ch = expect_chosen(&c, &p, NULL, 0, ANY_RULE, "t128x256");
    assert_non_null(strstr(ch.reason, "last round cut in 8"));
    c.l[1].cluster_m = 2;
    assert_int_equal(estimate(&c, 1, &p).split_ways, 0);

    catalog g = {0};
    add(&g, "d128x256", KILN_OP_DGRAD, 128, 256, "cooperative");
    problem(&p, KILN_OP_DGRAD, 16, 32, 2048, 768);
    assert_int_equal(estimate(&g, 0, &p).split_ways, 0);
}

/* Dispatches p over c with the device's resident clusters of 2, 4, 8. */
static const char *chosen_with_clusters(const catalog *c, const kiln_problem *p, int c2, int c4, int c8)
{
    kiln_dispatch_input in = {p, "sm_90a", c->k, c->n, KILN_ALLOW_GENERATED, NULL, NULL, NULL, NULL};
    kiln_dispatch_options o = {0, 0, {c2, c4, c8}};
    kiln_dispatch_choice ch;
    kiln_error err;
    kiln_error_clear(&err);
    if (kiln_dispatch_with(&in, &o, &ch, &err) != KILN_OK) fail_msg("dispatch: %s", err.msg);
    return chosen(c, NULL, &ch);
}

/* Tiles cut along k across a cluster (k_cluster; sm90_gemm_cut.cuh, KCUT): the
 * model prices such a kernel only where the device's resident clusters of
 * its size are known, its pieces fit one round of them and each keeps
 * KILN_KCUT_MIN_PIECE_KB k-blocks.  Mixtral's fc2 at EP8 (64 tokens, 16
 * tiles 224 k-blocks deep) in 4: 64 pieces, chosen over the workspace
 * cut where 30 clusters of 4 fit (an H100's), not where 15 do, and first
 * where the model prices it at all.  A cut in 2 goes by the estimate; a tie
 * (both at the call's floor: one expert of 64 tokens, 64 tiles 128 deep)
 * goes to the tile that is not cut, where the tile rule would take the
 * cut kernel's deeper pipeline. */
static void test_k_cut_clusters(void **state)
{
    (void)state;
    catalog c = {0};
    add(&c, "t128x256", KILN_OP_FPROP, 128, 256, "cooperative");
    add(&c, "t128x256_kc4", KILN_OP_FPROP, 128, 256, "cooperative")->k_cluster = 4;
    kiln_problem p;
    problem(&p, KILN_OP_FPROP, 1, 64, 4096, 14336);
    kiln_dispatch_estimate e;
    kiln_dispatch_model_estimate(&c.d[1], &c.l[1], &p, 132, 0, &e);
    assert_true(e.us >= KILN_DISPATCH_NOT_PRICED);
    kiln_dispatch_model_estimate(&c.d[1], &c.l[1], &p, 132, 15, &e);
    assert_true(e.us >= KILN_DISPATCH_NOT_PRICED);
    kiln_dispatch_model_estimate(&c.d[1], &c.l[1], &p, 132, 30, &e);
    assert_true(e.us < KILN_DISPATCH_NOT_PRICED);
    assert_int_equal(e.tiles, 64);
    assert_string_equal(chosen_with_clusters(&c, &p, 66, 30, 14), "t128x256_kc4");
    assert_string_equal(chosen_with_clusters(&c, &p, 66, 15, 7), "t128x256");
    assert_string_equal(chosen_with_clusters(&c, &p, 0, 0, 0), "t128x256");
    /* 2048 deep: 8 k-blocks a piece */
    problem(&p, KILN_OP_FPROP, 1, 64, 4096, 2048);
    kiln_dispatch_model_estimate(&c.d[1], &c.l[1], &p, 132, 30, &e);
    assert_true(e.us >= KILN_DISPATCH_NOT_PRICED);
    /* a cut in 4 the model prices goes first, whatever its estimate
     * (Mixtral fc2 at EP8 in prefill, 128 tokens: measured 0.89x the
     * time of the 128x256 kernel's workspace cut, estimated behind it) */
    problem(&p, KILN_OP_FPROP, 1, 128, 4096, 14336);
    kiln_dispatch_estimate whole;
    kiln_dispatch_model_estimate(&c.d[1], &c.l[1], &p, 132, 30, &e);
    kiln_dispatch_model_estimate(&c.d[0], &c.l[0], &p, 132, 0, &whole);
    if (!(whole.us < e.us && e.us < KILN_DISPATCH_NOT_PRICED))
        fail_msg("estimates %g (uncut), %g (cut)", whole.us, e.us);
    assert_string_equal(chosen_with_clusters(&c, &p, 66, 30, 15), "t128x256_kc4");
    assert_string_equal(chosen_with_clusters(&c, &p, 66, 15, 7), "t128x256");

    catalog g = {0};
    add(&g, "t128x256_kc2", KILN_OP_FPROP, 128, 256, "cooperative")->k_cluster = 2;
    add(&g, "t128x256_s3", KILN_OP_FPROP, 128, 256, "cooperative")->stages = 3;
    problem(&p, KILN_OP_FPROP, 1, 64, 16384, 8192);
    kiln_dispatch_estimate a, b;
    kiln_dispatch_model_estimate(&g.d[0], &g.l[0], &p, 132, 66, &a);
    kiln_dispatch_model_estimate(&g.d[1], &g.l[1], &p, 132, 0, &b);
    if (!(a.us < KILN_DISPATCH_NOT_PRICED && fabs(a.us - b.us) < 0.05 * b.us))
        fail_msg("no tie: %g us, %g us", a.us, b.us);
    assert_string_equal(chosen_with_clusters(&g, &p, 66, 30, 14), "t128x256_s3");
}

/* Routed group sizes are never all equal, so the model counts half an m
 * tile a group of padding at least: on 32 groups of 1024 tokens a 256-row
 * tile pads 11% (4.5 tiles of 256 for 1024 rows), a 128-row one 6%, and the
 * model takes 128x128 (256x128 measured 1.04-1.08x the best on balanced32
 * dgrad and 1.08-1.16x on its skewed twin skew32, 128x128 pingpong 1.00). */
static void test_routing_slack(void **state)
{
    (void)state;
    catalog c = {0};
    add(&c, "t256x128", KILN_OP_DGRAD, 256, 128, "cooperative");
    add(&c, "t128x128", KILN_OP_DGRAD, 128, 128, "pingpong");
    kiln_problem p;
    problem(&p, KILN_OP_DGRAD, 32, 1024, 4096, 4096);
    kiln_dispatch_estimate e = estimate(&c, 0, &p);
    assert_true(e.padding > 0.110 && e.padding < 0.112); /* 1 - 1024/1152 */
    e = estimate(&c, 1, &p);
    assert_true(e.padding > 0.058 && e.padding < 0.060); /* 1 - 1024/1088 */
    expect_chosen(&c, &p, NULL, 0, ANY_RULE, "t128x128");
    /* Exactly a tile's worth past a bucket (1025 tokens): the balanced
     * count, 9 tiles of 128, is the larger. */
    problem(&p, KILN_OP_DGRAD, 32, 1025, 4096, 4096);
    e = estimate(&c, 1, &p);
    assert_int_equal(e.tiles, 32 * 9 * 32);
}

/* Of two kernels of the same tile, the deeper pipeline: wgrad 128x256 at 3
 * stages ran 5-20% behind 4 on most corpus shapes (session4 wgrad CSV),
 * whichever comes first in the catalog. */
static void test_deeper_pipeline_breaks_ties(void **state)
{
    (void)state;
    for (int order = 0; order < 2; order++) {
        catalog c = {0};
        kiln_kernel_desc *s3 = add(&c, order ? "s4" : "s3", KILN_OP_WGRAD, 128, 256, "cooperative");
        kiln_kernel_desc *s4 = add(&c, order ? "s3" : "s4", KILN_OP_WGRAD, 128, 256, "cooperative");
        s3->stages = order ? 4 : 3;
        s4->stages = order ? 3 : 4;
        kiln_problem p;
        problem(&p, KILN_OP_WGRAD, 8, 4096, 14336, 4096);
        p.out_type = KILN_DTYPE_BF16;
        expect_chosen(&c, &p, NULL, 0, ANY_RULE, "s4");
    }
}

/* Accumulating wgrad: the shape class picks between the 128x128 default
 * (short reductions) and the 128x256 one (long), whatever the model says.
 * On a layer of 40 experts of 1638 tokens, K 512 (granite_fc2_rand, held
 * out), the model rates 128x128 more than its tie ahead; measured, it took
 * 1.31x the 128x256 kernel's time (docs/dispatch.md, thirty-sixth
 * session).  Decode-sized groups still take 128x128. */
static void test_accumulate_wgrad_by_class(void **state)
{
    (void)state;
    catalog c = {0};
    kiln_kernel_desc *small = add(&c, "acc128x128", KILN_OP_WGRAD, 128, 128, "cooperative");
    kiln_kernel_desc *big = add(&c, "acc128x256", KILN_OP_WGRAD, 128, 256, "cooperative");
    small->accumulate = big->accumulate = 1;
    small->out_type = big->out_type = KILN_DTYPE_F32;
    kiln_problem p;
    problem(&p, KILN_OP_WGRAD, 40, 1638, 1536, 512);
    p.out_type = KILN_DTYPE_F32;
    p.accumulate = 1;
    kiln_dispatch_estimate e128 = estimate(&c, 0, &p), e256 = estimate(&c, 1, &p);
    assert_true(e128.us < e256.us * 0.95);   /* past the model's tie */
    expect_chosen(&c, &p, NULL, 0, KILN_DISPATCH_BY_MODEL, "acc128x256");
    problem(&p, KILN_OP_WGRAD, 64, 16, 2048, 4096);
    p.out_type = KILN_DTYPE_F32;
    p.accumulate = 1;
    expect_chosen(&c, &p, NULL, 0, ANY_RULE, "acc128x128");
}

/* fp8 row-wise with promotion: the shape class picks between the 64x128
 * pingpong default (under 192 tokens a group) and the 128x128 cooperative
 * one, whatever the model says; on irregular_g64 (about 150 tokens a
 * group) the model rates 64x128 behind, measured it took 0.91 of 128x128's
 * time (docs/dispatch.md, fifty-second session).  The block recipe,
 * whose 64x128 kernel lost there, keeps the model. */
static void test_row_promote_by_class(void **state)
{
    (void)state;
    catalog c = {0};
    kiln_kernel_desc *small = add_fp8(&c, "promote_64x128", 64, 128, "pingpong", 8, KILN_FP8_ROW, 1);
    kiln_kernel_desc *big = add_fp8(&c, "promote_128x128", 128, 128, "cooperative", 6, KILN_FP8_ROW, 1);
    kiln_problem p;
    fp8_problem(&p, KILN_OP_FPROP, KILN_FP8_ROW, 64, 150, 2048, 2048);
    p.fp8.promote = 1;
    kiln_dispatch_estimate e64 = estimate(&c, 0, &p), e128 = estimate(&c, 1, &p);
    assert_true(e128.us < e64.us * 0.99);   /* the model alone would take 128x128 */
    expect_chosen(&c, &p, NULL, 0, KILN_DISPATCH_BY_MODEL, "promote_64x128");
    p.capacity = 64 * 191;
    expect_chosen(&c, &p, NULL, 0, ANY_RULE, "promote_64x128");
    p.capacity = 64 * 192;
    expect_chosen(&c, &p, NULL, 0, ANY_RULE, "promote_128x128");
    p.capacity = 64 * 16;
    expect_chosen(&c, &p, NULL, 0, ANY_RULE, "promote_64x128");
    /* dgrad alike */
    small->op = big->op = KILN_OP_DGRAD;
    fp8_problem(&p, KILN_OP_DGRAD, KILN_FP8_ROW, 6, 170, 4096, 7168);
    p.fp8.promote = 1;
    expect_chosen(&c, &p, NULL, 0, ANY_RULE, "promote_64x128");
    p.capacity = 6 * 1024;
    expect_chosen(&c, &p, NULL, 0, ANY_RULE, "promote_128x128");
    /* The block recipe at 150 tokens a group: the model, as before. */
    small->op = big->op = KILN_OP_FPROP;
    small->fp8_recipe = big->fp8_recipe = KILN_FP8_BLOCK;
    fp8_problem(&p, KILN_OP_FPROP, KILN_FP8_BLOCK, 64, 150, 2048, 2048);
    expect_chosen(&c, &p, NULL, 0, KILN_DISPATCH_BY_MODEL, "promote_128x128");
}

/* A 192-wide default is ranked only where 192 divides the output's width
 * and 256 does not.  On GPT-OSS's 2880 (gptoss120b_fc2_bal dgrad, 128
 * experts of 128 tokens) 128x256 pads its last column of tiles and took
 * 1.155x the 192-wide kernel's time; on jetmoe_fc1_rand's dgrad (8 experts
 * of 1024 tokens, 2048 wide) the model's estimates tie and its tile rule
 * took 128x192, which ran 1.12x the best (H200, docs/dispatch.md,
 * thirty-seventh session). */
static void test_192_wide_where_256_pads(void **state)
{
    (void)state;
    catalog c = {0};
    add(&c, "d128x128", KILN_OP_DGRAD, 128, 128, "pingpong");
    add(&c, "d128x256", KILN_OP_DGRAD, 128, 256, "cooperative");
    add(&c, "d128x192", KILN_OP_DGRAD, 128, 192, "cooperative");
    add(&c, "d64x256", KILN_OP_DGRAD, 64, 256, "pingpong");
    kiln_problem p;
    problem(&p, KILN_OP_DGRAD, 128, 128, 2880, 2880);
    expect_chosen(&c, &p, NULL, 0, KILN_DISPATCH_BY_MODEL, "d128x192");
    /* 128x192 within the model's tie of the best: the tile rule, which
     * prefers the larger tile, would take it; the model does not.  Then
     * the same width in fprop, where it is N. */
    problem(&p, KILN_OP_DGRAD, 8, 1024, 5632, 2048);
    for (int fprop = 0; fprop < 2; fprop++) {
        if (fprop) {
            problem(&p, KILN_OP_FPROP, 8, 1024, 2048, 5632);
            for (size_t i = 0; i < c.n; i++) c.d[i].op = KILN_OP_FPROP;
        }
        for (size_t i = 0; i < 4; i++)
            if (!(estimate(&c, 2, &p).us * 0.95 < estimate(&c, i, &p).us))
                fail_msg("%s: d128x192 is not within the tie of %s", fprop ? "fprop" : "dgrad",
                         c.d[i].name);
        kiln_dispatch_choice ch = choose(&c, &p, NULL, 0);
        assert_string_not_equal(c.d[ch.kernel].name, "d128x192");
    }
}

/* 8-bit inputs: where both fp8 row-wise defaults reach the call's floor
 * (its compulsory bytes), the model's estimates tie and the tiles' own time
 * decides before the tile rule.  Qwen3-Next's fc2 (512 groups of ~80
 * tokens, K 512, N 2048): the tile rule took 64x128, which ran 1.18x the
 * 64x256 kernel's time (H200, docs/dispatch.md, thirty-ninth session).
 * Where the tiles' times tie as well (8 groups of 16 tokens, 32768 wide)
 * the tile rule still decides, and 16-bit inputs keep the tile rule. */
static void test_fp8_floor_tie_by_tiles(void **state)
{
    (void)state;
    catalog c = {0};
    add_fp8(&c, "r64x128", 64, 128, "pingpong", 8, KILN_FP8_ROW, 0);
    add_fp8(&c, "r64x256", 64, 256, "pingpong", 4, KILN_FP8_ROW, 0);
    kiln_problem p;
    fp8_problem(&p, KILN_OP_FPROP, KILN_FP8_ROW, 512, 80, 2048, 512);
    kiln_dispatch_estimate e[2] = {estimate(&c, 0, &p), estimate(&c, 1, &p)};
    assert_true(e[0].us == e[1].us);                   /* both at the floor */
    assert_true(e[1].us_tiles < e[0].us_tiles * 0.95); /* 64x256's tiles take less */
    expect_chosen(&c, &p, NULL, 0, KILN_DISPATCH_BY_MODEL, "r64x256");

    fp8_problem(&p, KILN_OP_FPROP, KILN_FP8_ROW, 8, 16, 32768, 6144);
    e[0] = estimate(&c, 0, &p);
    e[1] = estimate(&c, 1, &p);
    assert_true(e[0].us == e[1].us && e[0].us_tiles == e[1].us_tiles);
    expect_chosen(&c, &p, NULL, 0, ANY_RULE, "r64x128");

    for (size_t i = 0; i < c.n; i++) {   /* the same kernels with 16-bit inputs */
        c.d[i].a_type = c.d[i].b_type = KILN_DTYPE_BF16;
        c.d[i].tile_k = 64;
        c.d[i].fp8_recipe = KILN_FP8_NONE;
    }
    problem(&p, KILN_OP_FPROP, 512, 80, 2048, 512);
    e[0] = estimate(&c, 0, &p);
    e[1] = estimate(&c, 1, &p);
    assert_true(e[0].us == e[1].us && e[1].us_tiles < e[0].us_tiles * 0.95);
    /* ... but a 16-bit 64x128 kernel is ranked only for decode calls
     * (runtime/dispatch.c, decode_tile_suits and test_decode_tile_groups
     * below): one group of at most 64 rows, before the model's own first
     * (decode_tile) */
    expect_chosen(&c, &p, NULL, 0, ANY_RULE, "r64x256");
    problem(&p, KILN_OP_FPROP, 1, 64, 14336, 4096);
    expect_chosen(&c, &p, NULL, 0, ANY_RULE, "r64x128");
    problem(&p, KILN_OP_FPROP, 1, 65, 14336, 4096);
    expect_chosen(&c, &p, NULL, 0, ANY_RULE, "r64x256");
    problem(&p, KILN_OP_FPROP, 1, 64, 17000, 4096);   /* 133 tiles of 128 columns */
    expect_chosen(&c, &p, NULL, 0, ANY_RULE, "r64x256");
}

/* The model's choice over c for a call of groups x tpg rows must be the
 * kernel `want`; p gets the call, for the estimates' checks after. */
static void model_choice(const catalog *c, kiln_problem *p, kiln_op op, int groups, int64_t tpg,
                         int64_t n, int64_t k, const char *want)
{
    problem(p, op, groups, tpg, n, k);
    expect_chosen(c, p, NULL, 0, KILN_DISPATCH_BY_MODEL, want);
}

/* A 16-bit 64x128 kernel on decode calls of several groups (at most 128
 * rows a group on average for fprop and 64 for dgrad on up to 16 groups,
 * 64 and 32 on more): fprop on up to 16 groups takes it first at 33-64
 * rows, and otherwise where the model ties it with another tile; dgrad
 * only where the model puts it ahead by more than the tie
 * (runtime/dispatch.c, decode_rows_max, decode_tile_first and
 * ranks_before); past those bounds it is left out. */
static void test_decode_tile_groups(void **state)
{
    (void)state;
    catalog c = {0};
    add(&c, "f64x128", KILN_OP_FPROP, 64, 128, "pingpong")->stages = 8;
    add(&c, "f64x256", KILN_OP_FPROP, 64, 256, "pingpong")->stages = 4;
    add(&c, "d64x128", KILN_OP_DGRAD, 64, 128, "pingpong")->stages = 8;
    add(&c, "d64x256", KILN_OP_DGRAD, 64, 256, "pingpong")->stages = 4;
    kiln_problem p;
    /* Qwen3-235B fc2 at EP16 */
    model_choice(&c, &p, KILN_OP_FPROP, 8, 32, 4096, 1536, "f64x128");
    assert_true(!model_ahead(&c, 0, 1, &p) && !model_ahead(&c, 1, 0, &p));   /* a tie */
    model_choice(&c, &p, KILN_OP_FPROP, 8, 64, 4096, 1536, "f64x128");
    /* fprop of 33-64 rows a group on up to 16 groups takes it first, even
     * where the model puts the other tile ahead by more than the tie
     * (decode_tile_first) */
    model_choice(&c, &p, KILN_OP_FPROP, 8, 48, 2048, 768, "f64x128");   /* Qwen3-30B fc2 at EP16 */
    assert_true(model_ahead(&c, 1, 0, &p));
    /* 32 rows or fewer go by the model (GPT-OSS-20B fc2 at EP4, where it
     * puts 128x192 ahead by more than the tie) */
    catalog gptoss = {0};
    add(&gptoss, "f64x128", KILN_OP_FPROP, 64, 128, "pingpong")->stages = 8;
    add(&gptoss, "f128x192", KILN_OP_FPROP, 128, 192, "cooperative")->stages = 4;
    model_choice(&gptoss, &p, KILN_OP_FPROP, 8, 16, 2880, 2880, "f128x192");
    assert_true(model_ahead(&gptoss, 1, 0, &p));
    model_choice(&gptoss, &p, KILN_OP_FPROP, 8, 48, 2880, 2880, "f64x128");
    /* 65-128 rows on up to 16 groups: ranked by the model, 64x128 in its
     * tie; past 128 rows not ranked */
    model_choice(&c, &p, KILN_OP_FPROP, 8, 96, 4096, 1536, "f64x256");
    assert_true(model_ahead(&c, 1, 0, &p));
    model_choice(&c, &p, KILN_OP_FPROP, 8, 128, 4096, 1536, "f64x128");
    assert_true(!model_ahead(&c, 0, 1, &p) && !model_ahead(&c, 1, 0, &p));
    model_choice(&c, &p, KILN_OP_FPROP, 8, 129, 4096, 1536, "f64x256");
    /* 16 groups of 64 rows take it first; 17, whose estimates differ the
     * same way, go by the model; past 64 rows it is not ranked */
    model_choice(&c, &p, KILN_OP_FPROP, 16, 64, 2048, 768, "f64x128");
    model_choice(&c, &p, KILN_OP_FPROP, 17, 64, 2048, 768, "f64x256");
    assert_true(model_ahead(&c, 1, 0, &p));
    model_choice(&c, &p, KILN_OP_FPROP, 32, 64, 4096, 1536, "f64x128");
    model_choice(&c, &p, KILN_OP_FPROP, 32, 65, 4096, 1536, "f64x256");
    /* pre-EP decode: 128 groups of 8 */
    model_choice(&c, &p, KILN_OP_FPROP, 128, 8, 7168, 4864, "f64x128");

    /* the same tie: dgrad keeps 256 columns */
    model_choice(&c, &p, KILN_OP_DGRAD, 8, 32, 4096, 1536, "d64x256");
    assert_true(!model_ahead(&c, 2, 3, &p) && !model_ahead(&c, 3, 2, &p));
    /* Qwen3-30B fc2 at EP16: 48 tiles of 128 */
    model_choice(&c, &p, KILN_OP_DGRAD, 8, 32, 2048, 768, "d64x128");
    assert_true(model_ahead(&c, 2, 3, &p));
    /* ranked by the model up to 64 rows */
    model_choice(&c, &p, KILN_OP_DGRAD, 8, 64, 2048, 768, "d64x128");
    assert_true(model_ahead(&c, 2, 3, &p));
    model_choice(&c, &p, KILN_OP_DGRAD, 8, 65, 2048, 768, "d64x256");
    /* more than 16 groups: up to 32 rows */
    model_choice(&c, &p, KILN_OP_DGRAD, 24, 32, 4096, 1536, "d64x128");
    assert_true(model_ahead(&c, 2, 3, &p));
    model_choice(&c, &p, KILN_OP_DGRAD, 24, 33, 4096, 1536, "d64x256");
}

/* Tables off (KILN_TUNING=off gives dispatch no table): the model alone
 * chooses among the catalog's kernels; with the tables given but their
 * rules skipped, the defaults still win when one serves, and the tables'
 * kernels are the model's candidates when none does. */
static void test_tables_off(void **state)
{
    (void)state;
    catalog c = {0};
    add(&c, "d64x256", KILN_OP_FPROP, 64, 256, "pingpong");
    catalog w = {0};
    kiln_kernel_desc *tuned = add(&w, "w128x256", KILN_OP_FPROP, 128, 256, "cooperative");
    kiln_tuning_table *t = empty_table();
    kiln_problem p;
    problem(&p, KILN_OP_FPROP, 8, 16, 2048, 2048);
    add_entry(t, &p, tuned, &w.l[0], 0.01); /* measured on a small shape */

    problem(&p, KILN_OP_FPROP, 8, 4096, 14336, 4096);
    const unsigned skip = KILN_DISPATCH_SKIP_EXACT | KILN_DISPATCH_SKIP_NEAREST;
    expect_chosen(&c, &p, NULL, 0, KILN_DISPATCH_BY_MODEL, "d64x256");
    kiln_dispatch_choice ch = expect_chosen(&c, &p, t, skip, KILN_DISPATCH_BY_MODEL, "d64x256");
    assert_int_equal(ch.tuned, -1);
    catalog none = {0};
    add(&none, "wgrad_only", KILN_OP_WGRAD, 128, 128, "cooperative");
    ch = expect_chosen(&none, &p, t, skip, KILN_DISPATCH_BY_MODEL, "w128x256");
    assert_int_equal(ch.kernel, -1);
    kiln_test_has(ch.reason, "tables skipped");
    kiln_tuning_table_destroy(t);
}

/* Issue 11: plain wgrad's entry names a kernel without dbias; a call with
 * d_dbias has its own key, so the entry is not its exact or nearest one,
 * and a dbias kernel serves it; a tuned dbias twin is its exact entry. */
static void test_dbias_gets_its_own_entry(void **state)
{
    (void)state;
    catalog c = {0};
    add(&c, "wgrad_plain", KILN_OP_WGRAD, 128, 256, "cooperative");
    kiln_kernel_desc *db = add(&c, "wgrad_dbias", KILN_OP_WGRAD, 128, 128, "cooperative");
    db->dbias = 1;
    catalog w = {0};
    kiln_kernel_desc *plain_t = add(&w, "tuned_plain", KILN_OP_WGRAD, 128, 256, "cooperative");
    kiln_kernel_desc *dbias_t = add(&w, "tuned_dbias", KILN_OP_WGRAD, 128, 256, "cooperative");
    dbias_t->dbias = 1;
    kiln_tuning_table *t = empty_table();
    kiln_problem p;
    problem(&p, KILN_OP_WGRAD, 32, 1024, 4096, 4096);
    p.out_type = KILN_DTYPE_BF16;
    add_entry(t, &p, plain_t, &w.l[0], 0.5);

    p.d_dbias = FAKE(0x500000);
    kiln_dispatch_choice ch = expect_chosen(&c, &p, t, 0, KILN_DISPATCH_BY_MODEL, "wgrad_dbias");
    kiln_test_has(ch.reason, "no measured class of this kind");

    add_entry(t, &p, dbias_t, &w.l[1], 0.55);
    expect_chosen(&c, &p, t, 0, KILN_DISPATCH_BY_EXACT, "tuned_dbias");
    /* The plain call keeps its own entry. */
    p.d_dbias = NULL;
    expect_chosen(&c, &p, t, 0, ANY_RULE, "tuned_plain");
    kiln_tuning_table_destroy(t);
}

/* A kernel of other types (an fp8 one the model would rank first, and a
 * table entry for an e4m3 key) is never chosen for a bf16 call. */
static void test_types_must_match(void **state)
{
    (void)state;
    catalog c = {0};
    add(&c, "bf16_64x256", KILN_OP_FPROP, 64, 256, "pingpong");
    kiln_kernel_desc *f8 = add(&c, "e4m3_128x256", KILN_OP_FPROP, 128, 256, "cooperative");
    f8->a_type = f8->b_type = KILN_DTYPE_E4M3;
    kiln_tuning_table *t = empty_table();
    kiln_problem p;
    problem(&p, KILN_OP_FPROP, 8, 4096, 14336, 4096);
    p.a_type = p.b_type = KILN_DTYPE_E4M3;
    add_entry(t, &p, f8, &c.l[1], 0.2);
    p.a_type = p.b_type = KILN_DTYPE_BF16;
    expect_chosen(&c, &p, t, 0, ANY_RULE, "bf16_64x256");
    /* And the fp8 call gets the fp8 kernel. */
    p.a_type = p.b_type = KILN_DTYPE_E4M3;
    expect_chosen(&c, &p, t, 0, ANY_RULE, "e4m3_128x256");
    kiln_tuning_table_destroy(t);
}

/* fp8 recipes (issue 16): kiln tune writes one entry per recipe for a class
 * (the key names the recipe), and each call takes its own recipe's entry
 * exactly; a promoted row-wise call, which has no entry, is not given the
 * fast one's kernel but a kernel that promotes. */
static void test_fp8_recipes_own_entries(void **state)
{
    (void)state;
    catalog c = {0};
    kiln_kernel_desc *d = add(&c, "row_default", KILN_OP_FPROP, 128, 128, "pingpong");
    kiln_kernel_desc *dp = add(&c, "row_promote_default", KILN_OP_FPROP, 128, 128, "cooperative");
    catalog w = {0};
    kiln_kernel_desc *row = add(&w, "tuned_row", KILN_OP_FPROP, 128, 256, "cooperative");
    kiln_kernel_desc *ten = add(&w, "tuned_tensor", KILN_OP_FPROP, 64, 256, "pingpong");
    kiln_kernel_desc *blk = add(&w, "tuned_block", KILN_OP_FPROP, 128, 128, "cooperative");
    kiln_kernel_desc *all[] = {d, dp, row, ten, blk};
    kiln_fp8_recipe recipes[] = {KILN_FP8_ROW, KILN_FP8_ROW, KILN_FP8_ROW, KILN_FP8_TENSOR,
                                 KILN_FP8_BLOCK};
    for (int i = 0; i < 5; i++) as_fp8(all[i], recipes[i], i == 1 || i == 4);
    kiln_tuning_table *t = empty_table();
    kiln_problem p;
    problem(&p, KILN_OP_FPROP, 32, 1024, 4096, 7168);
    p.a_type = p.b_type = KILN_DTYPE_E4M3;
    p.fp8.d_scale_a = p.fp8.d_scale_b = FAKE(0x600000);
    for (int i = 2; i < 5; i++) {
        p.fp8.recipe = recipes[i];
        add_entry(t, &p, all[i], &w.l[i - 2], 0.5 + i);
    }
    assert_int_equal(kiln_tuning_table_count(t), 3);
    for (int i = 2; i < 5; i++) {
        p.fp8.recipe = recipes[i];
        expect_chosen(&c, &p, t, 0, KILN_DISPATCH_BY_EXACT, all[i]->name);
    }
    p.fp8.recipe = KILN_FP8_ROW;
    p.fp8.promote = 1;
    expect_chosen(&c, &p, t, 0, KILN_DISPATCH_BY_MODEL, "row_promote_default");
    kiln_tuning_table_destroy(t);
}

/* Epilogue terms with no entry of their own (forty-ninth session): the
 * plain call's entry (exact, else its nearest class) names a tile and
 * schedule, and the catalog's kernel with the terms of that tile serves
 * the call, where the model alone takes another; a tile with no such
 * twin leaves the call to the model; an entry of the call's own
 * signature, and the tables skipped, come first as before. */
static void test_epilogue_twin(void **state)
{
    (void)state;
    catalog c = {0};
    add(&c, "plain_128x128", KILN_OP_FPROP, 128, 128, "pingpong");
    add(&c, "plain_64x256", KILN_OP_FPROP, 64, 256, "pingpong");
    kiln_kernel_desc *e128 = add(&c, "epi_128x128", KILN_OP_FPROP, 128, 128, "pingpong");
    add(&c, "epi_64x256", KILN_OP_FPROP, 64, 256, "pingpong");
    kiln_kernel_desc *e64c = add(&c, "epi_64x256_coop", KILN_OP_FPROP, 64, 256, "cooperative");
    for (kiln_kernel_desc *d = e128; d <= e64c; d++) { /* the three with terms */
        d->epilogue.row_scale = 1;
        d->epilogue.bias = KILN_BIAS_PER_GROUP;
    }
    catalog w = {0};
    kiln_kernel_desc *t64 = add(&w, "tuned_64x256", KILN_OP_FPROP, 64, 256, "pingpong");
    t64->stages = 5;
    kiln_kernel_desc *t256 = add(&w, "tuned_128x256", KILN_OP_FPROP, 128, 256, "cooperative");
    kiln_kernel_desc *t_epi = add(&w, "tuned_epi", KILN_OP_FPROP, 128, 128, "pingpong");
    t_epi->epilogue.row_scale = 1;
    kiln_tuning_table *t = empty_table();
    kiln_problem p;
    problem(&p, KILN_OP_FPROP, 32, 1024, 4096, 4096);
    add_entry(t, &p, t64, &w.l[0], 0.5);

    p.epilogue.d_row_scale = FAKE(0x500000);
    /* The model alone takes the 128-row tile here. */
    expect_chosen(&c, &p, t, KILN_DISPATCH_SKIP_EXACT | KILN_DISPATCH_SKIP_NEAREST,
                  KILN_DISPATCH_BY_MODEL, "epi_128x128");
    kiln_dispatch_choice ch = expect_chosen(&c, &p, t, 0, KILN_DISPATCH_BY_TWIN, "epi_64x256");
    kiln_test_has(ch.reason, "twin of the plain call's kernel: epi_64x256 (64x256 pingpong",
                  "as tuned_64x256, tuned for t1024.g32.n4096.k4096");
    /* Per-expert weight pointers (GroupedLinear's fc2 with routing
     * weights): the contiguous plain call's tile, a twin that takes them. */
    e128->weights = e64c->weights = c.d[3].weights = KILN_WEIGHTS_ANY;
    p.d_b_ptrs = FAKE(0x700000);
    expect_chosen(&c, &p, t, 0, KILN_DISPATCH_BY_TWIN, "epi_64x256");
    p.d_b_ptrs = NULL;
    /* With the bias too; and a plain call keeps the plain entry. */
    p.epilogue.d_bias = FAKE(0x600000);
    expect_chosen(&c, &p, t, 0, KILN_DISPATCH_BY_TWIN, "epi_64x256");
    p.epilogue.d_bias = p.epilogue.d_row_scale = NULL;
    expect_chosen(&c, &p, t, 0, KILN_DISPATCH_BY_EXACT, "tuned_64x256");
    /* Past a class edge: the plain call's nearest class names the tile. */
    p.epilogue.d_row_scale = FAKE(0x500000);
    p.capacity = 32 * 1025;
    ch = expect_chosen(&c, &p, t, 0, KILN_DISPATCH_BY_TWIN, "epi_64x256");
    kiln_test_has(ch.reason, "nearest class for t1024.g32.n4096.k4096", "as tuned_64x256");
    /* A tile no kernel with the terms has: the model. */
    kiln_tuning_table_destroy(t);
    p.capacity = 32 * 1024;
    p.epilogue.d_row_scale = NULL;
    t = one_entry_table(&p, t256, &w.l[1]);
    p.epilogue.d_row_scale = FAKE(0x500000);
    expect_chosen(&c, &p, t, 0, KILN_DISPATCH_BY_MODEL, "epi_128x128");
    /* The call's own signature measured: its entry. */
    add_entry(t, &p, t_epi, &w.l[2], 0.6);
    expect_chosen(&c, &p, t, 0, KILN_DISPATCH_BY_EXACT, "tuned_epi");
    kiln_tuning_table_destroy(t);
    /* The twin follows the plain call as dispatch serves it: where the
     * model overrules the plain call's nearest class, no twin. */
    kiln_kernel_desc *e64x64 = add(&c, "epi_64x64", KILN_OP_FPROP, 64, 64, "pingpong");
    e64x64->epilogue.row_scale = 1;
    e64x64->epilogue.bias = KILN_BIAS_PER_GROUP;
    kiln_kernel_desc *t64x64 = add(&w, "tuned_64x64", KILN_OP_FPROP, 64, 64, "pingpong");
    p.epilogue.d_row_scale = NULL;
    t = one_entry_table(&p, t64x64, &w.l[3]);
    p.epilogue.d_row_scale = FAKE(0x500000);
    expect_chosen(&c, &p, t, 0, KILN_DISPATCH_BY_TWIN, "epi_64x64");
    p.capacity = 32 * 1200;
    p.epilogue.d_row_scale = NULL;
    ch = expect_chosen(&c, &p, t, 0, KILN_DISPATCH_BY_MODEL, "plain_128x128");
    kiln_test_has(ch.reason, "overrules the nearest class");
    p.epilogue.d_row_scale = FAKE(0x500000);
    expect_chosen(&c, &p, t, 0, KILN_DISPATCH_BY_MODEL, "epi_128x128");
    kiln_tuning_table_destroy(t);
}

KILN_TEST_MAIN(
    cmocka_unit_test(test_nearest_class_no_cliff),
    cmocka_unit_test(test_nearest_radius_by_call),
    cmocka_unit_test(test_nearest_overruled_by_model),
    cmocka_unit_test(test_model_tie_prefers_the_bigger_tile),
    cmocka_unit_test(test_model_tie_fprop_takes_the_wider_tile),
    cmocka_unit_test(test_model_clear_choices),
    cmocka_unit_test(test_memory_bound_tail_wave),
    cmocka_unit_test(test_split_ways),
    cmocka_unit_test(test_few_tiles_cut_along_k),
    cmocka_unit_test(test_k_cut_clusters),
    cmocka_unit_test(test_routing_slack),
    cmocka_unit_test(test_deeper_pipeline_breaks_ties),
    cmocka_unit_test(test_accumulate_wgrad_by_class),
    cmocka_unit_test(test_row_promote_by_class),
    cmocka_unit_test(test_192_wide_where_256_pads),
    cmocka_unit_test(test_fp8_floor_tie_by_tiles),
    cmocka_unit_test(test_decode_tile_groups),
    cmocka_unit_test(test_tables_off),
    cmocka_unit_test(test_dbias_gets_its_own_entry),
    cmocka_unit_test(test_types_must_match),
    cmocka_unit_test(test_fp8_recipes_own_entries),
    cmocka_unit_test(test_epilogue_twin))
