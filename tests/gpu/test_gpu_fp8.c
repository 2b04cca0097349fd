/* SPDX-License-Identifier: Apache-2.0 */
/* test_gpu_fp8.c — the sm90 fp8 fprop and dgrad kernels (kiln.h, kiln_fp8)
 * against a reference computed in double from the dequantized inputs.
 *
 * Every recipe (per tensor, row-wise, 1x128/128x128 blocks), fast and
 * promoted accumulation, e4m3 and e5m2 x e4m3, every default forced (the
 * _epilogue ones with a bias, a row scale scaling it and alpha), on sizes
 * off every tile
 * (n_out 320, k_red 400: a partial 128-column tile and a partial k-block),
 * empty and one-row groups, a group holding every row, many small groups,
 * capacity past Σm; graph capture replayed after the counts changed in
 * place; the block recipe's scale_a 4-byte aligned, with an odd pitch.
 * Each case checks every output element, that the rows past Σm keep their
 * poison, and that the kernel that ran is the recipe's.
 *
 * Tolerance, per element: |got - ref| <= 2^-8 |ref| + t·S, where S is the
 * sum of |a·b| times the scales (the size of what was summed).  2^-8 is the
 * bf16 output's rounding (2^-9) with room for the fp32 epilogue.  t is the
 * accumulation's: the tensor cores add 8-bit products into an accumulator
 * that keeps fewer bits than fp32 (DeepSeek-V3 reports about 14), so fast
 * accumulation gets t = 2^-10 over sums of up to 400 terms; promoted sums
 * are fp32 every 128 of k, t = 2^-12.  A wrong scale (all are random in
 * [0.5, 2)), row, group or k-block gives errors of the order of S.
 * Exits 77 (skipped) without a driver or GPU. */
#include "testutil.h"

#include "catalog.h"
#include "gpu_util.h"

static kiln_context *g_ctx;
static int g_failures;

#define FAIL_CASE(...) GPU_CASE_FAIL(g_failures, __VA_ARGS__)

/* One kernel variant: the call's recipe and types, and the kernel it must
 * reach (a substring of its name). */
typedef struct f8variant {
    kiln_op op;
    kiln_fp8_recipe recipe;
    int promote;
    kiln_dtype a, b;
    const char *kernel;
    int epilogue; /* 1: a bias [G, n_out], a row scale and alpha 0.75 (scale_bias) */
} f8variant;

/* A random finite fp8 value of magnitude in [1/8, 4): random sign,
 * exponent and mantissa (not zeros, not one narrow pattern). */
static uint8_t rand_fp8(kiln_dtype t)
{
    const int sign = rng_int(0, 1) << 7;
    if (t == KILN_DTYPE_E4M3) return (uint8_t)(sign | rng_int(4, 8) << 3 | rng_int(0, 7));
    return (uint8_t)(sign | rng_int(12, 16) << 2 | rng_int(0, 3));
}

static float rand_scale(void) { return 0.5f + (float)rng_int(0, 1023) / 1024.0f * 1.5f; }

/* Host copies of one problem's operands and scales (B is [G, n_out, k_red]
 * row-major for both ops: W for fprop, W transposed for dgrad). */
typedef struct f8data {
    int G;
    int64_t cap, n_out, k_red, ld_sa;
    int sa_head;    /* block recipe: floats before scale_a in its allocation */
    int nbn, nkb;
    uint8_t *a, *b;
    float *sa, *sb;
    size_t sa_n, sb_n;
    float *rs;      /* epilogue: the row scale [cap], NULL without */
    uint16_t *bias; /* epilogue: bf16 [G, n_out] */
} f8data;

/* The block recipe's scale_a: its pitch (floats a k-block) is the
 * capacity plus pad (0: the call passes ld_scale_a 0), and it starts
 * sa_head floats into its allocation, which ends where it does. */
typedef struct f8layout {
    int pad, sa_head;
} f8layout;
static const f8layout padded = {8, 0};

static void f8data_make(f8data *d, const f8variant *v, int G, int64_t cap, int64_t n_out,
                        int64_t k_red, const f8layout *lay)
{
    d->G = G;
    d->cap = cap;
    d->n_out = n_out;
    d->k_red = k_red;
    d->nbn = (int)((n_out + 127) / 128);
    d->nkb = (int)((k_red + 127) / 128);
    d->ld_sa = cap + lay->pad;
    d->sa_head = lay->sa_head;
    d->a = xmalloc((size_t)(cap * k_red));
    d->b = xmalloc((size_t)(G * n_out * k_red));
    for (int64_t i = 0; i < cap * k_red; i++) d->a[i] = rand_fp8(v->a);
    for (int64_t i = 0; i < G * n_out * k_red; i++) d->b[i] = rand_fp8(v->b);
    switch (v->recipe) {
    case KILN_FP8_TENSOR: d->sa_n = 1; d->sb_n = (size_t)G; break;
    case KILN_FP8_ROW: d->sa_n = (size_t)cap; d->sb_n = (size_t)(G * n_out); break;
    default: d->sa_n = (size_t)(d->nkb * d->ld_sa); d->sb_n = (size_t)(G * d->nbn * d->nkb); break;
    }
    d->sa = xmalloc(d->sa_n * sizeof(float));
    d->sb = xmalloc(d->sb_n * sizeof(float));
    for (size_t i = 0; i < d->sa_n; i++) d->sa[i] = rand_scale();
    for (size_t i = 0; i < d->sb_n; i++) d->sb[i] = rand_scale();
    d->rs = NULL;
    d->bias = NULL;
    if (v->epilogue) {
        d->rs = xmalloc((size_t)cap * sizeof(float));
        d->bias = xmalloc((size_t)(G * n_out) * sizeof(uint16_t));
        for (int64_t r = 0; r < cap; r++) d->rs[r] = rand_scale();
        for (int64_t i = 0; i < G * n_out; i++)
            d->bias[i] = kiln_f32_to_bf16((float)rng_int(-64, 64) / 16.0f);
    }
}

static void f8data_free(f8data *d) { FREE_ALL(d->a, d->b, d->sa, d->sb, d->rs, d->bias); }

/* The exact product of the dequantized operands at row r (of group g),
 * column c; *mag gets the sum of the magnitudes of its terms. */
static double f8ref(const f8data *d, const f8variant *v, int g, int64_t r, int64_t c, double *mag)
{
    const uint8_t *ar = d->a + r * d->k_red, *bc = d->b + ((int64_t)g * d->n_out + c) * d->k_red;
    double sum = 0, abs_sum = 0;
    for (int kb = 0; kb < d->nkb; kb++) {
        double s = 0, sa_abs = 0;
        for (int64_t j = kb * 128; j < d->k_red && j < (kb + 1) * 128; j++) {
            double x = (double)kts_load(ar, (size_t)j, v->a) * kts_load(bc, (size_t)j, v->b);
            s += x;
            sa_abs += fabs(x);
        }
        double scale = 1.0;
        if (v->recipe == KILN_FP8_TENSOR) scale = (double)d->sa[0] * d->sb[g];
        else if (v->recipe == KILN_FP8_ROW) scale = (double)d->sa[r] * d->sb[g * d->n_out + c];
        else scale = (double)d->sa[kb * d->ld_sa + r] * d->sb[((int64_t)g * d->nbn + c / 128) * d->nkb + kb];
        sum += scale * s;
        abs_sum += scale * sa_abs;
    }
    if (d->rs) { /* the epilogue: s[r]·(0.75·P + bias[g]) */
        const double rs = d->rs[r], bias = kiln_bf16_to_f32(d->bias[g * d->n_out + c]);
        sum = rs * (0.75 * sum + bias);
        abs_sum = rs * (0.75 * abs_sum + fabs(bias));
    }
    *mag = abs_sum;
    return sum;
}

/* Device copies and the problem for d. */
typedef struct f8dev {
    CUdeviceptr a, b, sa, sb, out, sizes, rs, bias;
    CUdeviceptr sa_alloc; /* sa's allocation (sa lies sa_head floats into it) */
    size_t obytes;
} f8dev;

static void f8dev_make(f8dev *x, const f8data *d, const int32_t *counts, kiln_problem *p,
                       const f8variant *v)
{
    x->a = dev_alloc((size_t)(d->cap * d->k_red));
    x->b = dev_alloc((size_t)(d->G * d->n_out * d->k_red));
    x->sa_alloc = dev_alloc((d->sa_n + (size_t)d->sa_head) * sizeof(float));
    x->sa = x->sa_alloc + (CUdeviceptr)d->sa_head * 4;
    x->sb = dev_alloc(d->sb_n * sizeof(float));
    x->obytes = (size_t)(d->cap * d->n_out * 2);
    x->out = dev_alloc(x->obytes);
    x->sizes = dev_alloc(sizeof(int32_t) * (size_t)d->G);
    upload(x->a, d->a, (size_t)(d->cap * d->k_red));
    upload(x->b, d->b, (size_t)(d->G * d->n_out * d->k_red));
    upload(x->sa, d->sa, d->sa_n * sizeof(float));
    upload(x->sb, d->sb, d->sb_n * sizeof(float));
    upload(x->sizes, counts, sizeof(int32_t) * (size_t)d->G);
    poison(x->out, x->obytes);
    x->rs = x->bias = 0;
    if (d->rs) {
        x->rs = dev_alloc((size_t)d->cap * sizeof(float));
        x->bias = dev_alloc((size_t)(d->G * d->n_out) * sizeof(uint16_t));
        upload(x->rs, d->rs, (size_t)d->cap * sizeof(float));
        upload(x->bias, d->bias, (size_t)(d->G * d->n_out) * sizeof(uint16_t));
    }
    const int dgrad = v->op == KILN_OP_DGRAD;
    /* fprop: n = n_out, k = k_red; dgrad: n = k_red (dY's columns), k = n_out */
    kts_problem_init(p, v->op, d->G, dgrad ? d->k_red : d->n_out, dgrad ? d->n_out : d->k_red,
                     d->cap, x->sizes, x->a, dgrad ? 0 : x->b, x->out);
    p->a_type = v->a;
    p->b_type = v->b;
    p->out_type = KILN_DTYPE_BF16;
    p->fp8.recipe = v->recipe;
    p->fp8.promote = v->promote;
    p->fp8.d_scale_a = (const float *)(uintptr_t)x->sa;
    p->fp8.d_scale_b = (const float *)(uintptr_t)x->sb;
    if (v->recipe == KILN_FP8_BLOCK) p->fp8.ld_scale_a = d->ld_sa == d->cap ? 0 : d->ld_sa;
    if (dgrad) p->fp8.d_bt = (const void *)(uintptr_t)x->b;
    if (d->rs) {
        p->epilogue.d_row_scale = (const float *)(uintptr_t)x->rs;
        p->epilogue.d_bias = (const void *)(uintptr_t)x->bias;
        p->epilogue.scale_bias = 1;
        p->epilogue.alpha = 0.75f;
    }
}

static void f8dev_free(f8dev *x) { DEV_FREE_ALL(x->a, x->b, x->sa_alloc, x->sb, x->out, x->sizes, x->rs, x->bias); }

/* Checks the output in x against d for counts: every valid element within
 * the tolerance, every row past Σm still poison. */
static void f8check(const f8data *d, const f8dev *x, const f8variant *v, const int32_t *counts,
                    const char *label)
{
    uint16_t *out = xmalloc(x->obytes);
    download(out, x->out, x->obytes);
    const double t = v->promote || v->recipe == KILN_FP8_BLOCK ? 0x1p-12 : 0x1p-10;
    int64_t r0 = 0;
    size_t bad = 0;
    double worst = 0;
    for (int g = 0; g < d->G; g++) {
        for (int64_t i = 0; i < counts[g] && r0 + i < d->cap; i++) {
            const int64_t r = r0 + i;
            for (int64_t c = 0; c < d->n_out; c++) {
                double mag, ref = f8ref(d, v, g, r, c, &mag);
                double got = kiln_bf16_to_f32(out[r * d->n_out + c]);
                double err = fabs(got - ref), tol = 0x1p-8 * fabs(ref) + t * mag;
                if (!(err <= tol)) {
                    if (bad++ < 3)
                        FAIL_CASE("%s: group %d row %lld col %lld: got %.6g, want %.6g (tol %.3g)",
                                  label, g, (long long)r, (long long)c, got, ref, tol);
                }
                if (mag > 0 && err / mag > worst) worst = err / mag;
            }
        }
        r0 += counts[g];
    }
    if (bad > 3) FAIL_CASE("%s: %zu elements out of tolerance in all", label, bad);
    if (r0 > d->cap) r0 = d->cap;
    int64_t first = kts_first_unpoisoned(out, (size_t)(r0 * d->n_out * 2), x->obytes);
    if (first >= 0)
        FAIL_CASE("%s: byte %lld past the %lld valid rows was written", label, (long long)first,
                  (long long)r0);
    printf("  %-58s ok=%d  worst |err|/S %.2e\n", label, bad == 0 && first < 0, worst);
    free(out);
}

static void run_case_in(const f8variant *v, const int32_t *counts, int G, int64_t cap,
                        int64_t n_out, int64_t k_red, const f8layout *lay, const char *what)
{
    char label[160];
    snprintf(label, sizeof label, "%s %s%s%s %s x %s: %s", kiln_op_name(v->op),
             v->recipe == KILN_FP8_TENSOR ? "tensor" : v->recipe == KILN_FP8_ROW ? "row" : "block",
             v->promote ? " promote" : "", v->epilogue ? " + bias, row scale, alpha" : "",
             kiln_dtype_name(v->a), kiln_dtype_name(v->b), what);
    f8data d;
    f8data_make(&d, v, G, cap, n_out, k_red, lay);
    f8dev x;
    kiln_problem p;
    f8dev_make(&x, &d, counts, &p, v);
    kiln_call_report rep;
    if (gpu_gemm_case(g_ctx, &p, label, &g_failures, &rep)) {
        if (!strstr(rep.kernel, v->kernel))
            FAIL_CASE("%s: ran %s, wanted a %s kernel", label, rep.kernel, v->kernel);
        f8check(&d, &x, v, counts, label);
    }
    f8dev_free(&x);
    f8data_free(&d);
}

static void run_case(const f8variant *v, const int32_t *counts, int G, int64_t cap,
                     int64_t n_out, int64_t k_red, const char *what)
{
    run_case_in(v, counts, G, cap, n_out, k_red, &padded, what);
}

/* The block recipe's scale_a as a caller may hand it (the call's checks ask 4-byte
 * alignment and a pitch of at least the capacity): 4-byte aligned only,
 * its pitch the capacity (601, odd) or a little more, its allocation
 * ending where it does, and the groups' rows up to the capacity's last.
 * A kernel that reads the scales in wider pieces than a row's float (a
 * vector, a bulk copy) must still place every row and read nothing past
 * the allocation (memcheck). */
static void run_block_layout(const f8variant *v, const f8layout *lay, const char *prefix)
{
    const int32_t to_cap[4] = {1, 300, 0, 300};
    char what[96];
    snprintf(what, sizeof what, "%sscale_a at +%d floats, pitch %d, rows to capacity 601", prefix,
             lay->sa_head, 601 + lay->pad);
    run_case_in(v, to_cap, 4, 601, 256, 400, lay, what);
}

static const f8variant variants[] = {
    {KILN_OP_FPROP, KILN_FP8_TENSOR, 0, KILN_DTYPE_E4M3, KILN_DTYPE_E4M3, "e4m3_tensor", 0},
    {KILN_OP_FPROP, KILN_FP8_ROW, 0, KILN_DTYPE_E4M3, KILN_DTYPE_E4M3, "e4m3_row", 0},
    {KILN_OP_FPROP, KILN_FP8_ROW, 1, KILN_DTYPE_E4M3, KILN_DTYPE_E4M3, "e4m3_row_promote", 0},
    {KILN_OP_FPROP, KILN_FP8_BLOCK, 0, KILN_DTYPE_E4M3, KILN_DTYPE_E4M3, "e4m3_block", 0},
    {KILN_OP_DGRAD, KILN_FP8_TENSOR, 0, KILN_DTYPE_E4M3, KILN_DTYPE_E4M3, "e4m3_tensor", 0},
    {KILN_OP_DGRAD, KILN_FP8_ROW, 0, KILN_DTYPE_E4M3, KILN_DTYPE_E4M3, "e4m3_row", 0},
    {KILN_OP_DGRAD, KILN_FP8_ROW, 1, KILN_DTYPE_E4M3, KILN_DTYPE_E4M3, "e4m3_row_promote", 0},
    {KILN_OP_DGRAD, KILN_FP8_BLOCK, 0, KILN_DTYPE_E4M3, KILN_DTYPE_E4M3, "e4m3_block", 0},
    {KILN_OP_DGRAD, KILN_FP8_ROW, 0, KILN_DTYPE_E5M2, KILN_DTYPE_E4M3, "e5m2_e4m3_row", 0},
};
#define NVAR (sizeof variants / sizeof variants[0])

/* Sizes off every tile: n_out 320 (2.5 tiles of 128), k_red 400 (3 k-blocks
 * and 16 of a fourth); groups empty, of one row, odd, over a tile. */
static void test_recipes(void **state)
{
    (void)state;
    const int before = g_failures;
    const int32_t counts[5] = {0, 1, 77, 300, 133};
    for (size_t i = 0; i < NVAR; i++) run_case(&variants[i], counts, 5, 600, 320, 400, "5 groups");
    assert_int_equal(g_failures, before);
}

/* Many small groups (the small-tile kernel for row-wise), and one group
 * with every row. */
static void test_group_shapes(void **state)
{
    (void)state;
    const int before = g_failures;
    enum { G = 96 };
    int32_t small[G];
    for (int g = 0; g < G; g++) small[g] = g % 7 == 0 ? 0 : rng_int(1, 20);
    run_case(&variants[1], small, G, 2000, 256, 512, "96 groups of 0-20 rows");
    run_case(&variants[5], small, G, 2000, 256, 512, "96 groups of 0-20 rows");
    run_case(&variants[3], small, G, 2000, 256, 512, "96 groups of 0-20 rows");
    const int32_t all[3] = {0, 700, 0};
    run_case(&variants[1], all, 3, 700, 384, 256, "one group with every row");
    run_case(&variants[7], all, 3, 700, 384, 256, "one group with every row");
    assert_int_equal(g_failures, before);
}

/* The promoting kernels over every shape of their k-loop: 1, 3 and 6
 * k-blocks (the two-set loop's odd and even tails; the block recipe's
 * 4-k-block window of A scales turns over at the fourth) and 34 (its
 * 32-k-block window of B scales turns over). */
static void test_kblock_counts(void **state)
{
    (void)state;
    const int before = g_failures;
    const int32_t counts[4] = {0, 1, 77, 60};
    const size_t promoting[] = {2, 3, 6, 7};
    const int64_t k_reds[] = {112, 304, 656, 4240};
    for (size_t i = 0; i < sizeof promoting / sizeof promoting[0]; i++)
        for (size_t j = 0; j < sizeof k_reds / sizeof k_reds[0]; j++) {
            char what[64];
            snprintf(what, sizeof what, "k_red %lld", (long long)k_reds[j]);
            run_case(&variants[promoting[i]], counts, 4, 200, 256, k_reds[j], what);
        }
    assert_int_equal(g_failures, before);
}

/* The variant a catalog kernel serves, from its description; it must run
 * that very kernel. */
static f8variant variant_of(const kiln_catalog_entry *ce)
{
    const char *d = ce->desc;
    return (f8variant){strstr(d, " op=dgrad") ? KILN_OP_DGRAD : KILN_OP_FPROP,
                       strstr(d, " fp8_recipe=block")  ? KILN_FP8_BLOCK
                       : strstr(d, " fp8_recipe=row") ? KILN_FP8_ROW
                                                       : KILN_FP8_TENSOR,
                       strstr(d, " fp8_accumulate=promote") != NULL,
                       strstr(d, " a=e5m2") ? KILN_DTYPE_E5M2 : KILN_DTYPE_E4M3, KILN_DTYPE_E4M3,
                       ce->name, strstr(d, " row_scale=1") != NULL};
}

/* Runs the three forced cases on catalog kernel ce (KILN_KERNEL, a context
 * of its own): 5 groups with n_out 320 (a partial column tile; for
 * 128x256 tiles the second's upper half wholly past N, its weight rows
 * zero-filled, its column block's scale past the last), k_red 4240 (34
 * k-blocks: the block scales' windows turn over) and 40 small groups.
 * With `many`, a fourth: 288 or more tiles of two k-blocks, so that each
 * CTA runs three tiles or more one after another, each tile's main loop
 * shorter than the ring (the cooperative row recipe's column scales are
 * staged in shared memory by the tile's parity).  A cooperative kernel
 * also runs two row tiles of 128 k-blocks (groups of 40 and 9 rows, n_out
 * 256), which it cuts along k (the last round's split, templates/
 * sm90_gemm_cut.cuh), their pieces summed by the finisher. */
static void run_forced(const kiln_catalog_entry *ce, int many)
{
    kiln_context *shared = g_ctx;
    const f8variant v = variant_of(ce);
    kiln_context_options o;
    kiln_context_options_init(&o);
    o.allowed_backends = KILN_ALLOW_GENERATED;
    setenv("KILN_KERNEL", ce->name, 1);
    kiln_status st = kiln_context_create(&o, &g_ctx);
    unsetenv("KILN_KERNEL");
    if (st != KILN_OK) {
        FAIL_CASE("kiln_context_create(KILN_KERNEL=%s): %s", ce->name, kiln_last_error(g_ctx));
    } else {
        const int32_t five[5] = {0, 1, 77, 300, 133}, four[4] = {0, 1, 77, 60};
        int32_t small[40];
        for (int g = 0; g < 40; g++) small[g] = g % 7 == 0 ? 0 : rng_int(1, 20);
        run_case(&v, five, 5, 600, 320, 400, "forced: 5 groups, n_out 320");
        run_case(&v, four, 4, 200, 256, 4240, "forced: k_red 4240");
        run_case(&v, small, 40, 600, 512, 256, "forced: 40 groups of 0-20 rows");
        if (many) {
            const int32_t six[6] = {700, 700, 700, 700, 700, 700};
            run_case(&v, six, 6, 4300, 2048, 256, "forced: 6 groups of 700 rows, n_out 2048, k_red 256");
        }
        if (strstr(ce->desc, " schedule=cooperative")) {
            const int32_t two[2] = {40, 9};
            run_case(&v, two, 2, 64, 256, 16384, "forced: 2 row tiles of 128 k-blocks, cut along k");
        }
        if (v.recipe == KILN_FP8_BLOCK) {
            const f8layout odd = {0, 3};
            run_block_layout(&v, &odd, "forced: ");
        }
    }
    kiln_context_destroy(g_ctx);
    g_ctx = shared;
}

/* Forces each catalog kernel that pick accepts (run_forced); how many. */
static int run_forced_where(int (*pick)(const kiln_catalog_entry *ce), int many)
{
    int found = 0;
    for (size_t e = 0; e < kiln_catalog_count; e++)
        if (pick(&kiln_catalog[e])) {
            found++;
            run_forced(&kiln_catalog[e], many);
        }
    return found;
}

/* Forces each catalog kernel that pick accepts, as run_forced_where; a
 * catalog with none (`what`: the kind the shipped table names) fails. */
static void run_forced_table_kind(int (*pick)(const kiln_catalog_entry *ce), int many,
                                  const char *what)
{
    const int before = g_failures;
    if (!run_forced_where(pick, many))
        FAIL_CASE("the catalog carries no %s (the table's winners)", what);
    assert_int_equal(g_failures, before);
}

static int promoting_128x256(const kiln_catalog_entry *ce)
{
    return strstr(ce->desc, " fp8_accumulate=promote") && strstr(ce->desc, " tile=128x256x128");
}

static int fp8_default(const kiln_catalog_entry *ce)
{
    return !ce->tuned_only && strstr(ce->desc, " fp8_recipe=") && !strstr(ce->desc, " fp8_recipe=none");
}

/* The table's promoting kernels of 128x256 tiles (the half-width product
 * set of sm90_gemm_roles.cuh's kiln_mainloop_promote), each forced.  The shipped
 * table names such kernels, so finding none fails. */
static void test_half_width_promotion(void **state)
{
    (void)state;
    run_forced_table_kind(promoting_128x256, 0, "128x256 promoting kernel");
}

/* Every fp8 default of the catalog (what dispatch's model serves on shapes
 * no table entry is near), each forced: a default the model picks only for
 * shapes the other cases do not have must still be right.  Each recipe of
 * test_recipes has one at least. */
static void test_every_default(void **state)
{
    (void)state;
    const int before = g_failures;
    const int found = run_forced_where(fp8_default, 0);
    if (found < (int)NVAR)
        FAIL_CASE("%d fp8 defaults in the catalog, fewer than the %d recipes", found, (int)NVAR);
    assert_int_equal(g_failures, before);
}

static int row_cooperative(const kiln_catalog_entry *ce)
{
    return strstr(ce->desc, " fp8_recipe=row") && strstr(ce->desc, " schedule=cooperative") &&
           strstr(ce->desc, " fp8_accumulate=fast");
}

/* The row recipe's cooperative kernels of fast accumulation (the TMA
 * epilogue, its column scales staged in shared memory, loaded under the
 * tile's last k-block; none is a default, the shipped table names them),
 * each forced, with the case of many tiles a CTA.  The table names such
 * kernels, so finding none fails. */
static void test_row_cooperative(void **state)
{
    (void)state;
    run_forced_table_kind(row_cooperative, 1, "cooperative row-recipe kernel");
}

static int row_pingpong_wide(const kiln_catalog_entry *ce)
{
    return strstr(ce->desc, " fp8_recipe=row") && strstr(ce->desc, " schedule=pingpong") &&
           strstr(ce->desc, " tile=128x192x128 ");
}

/* The row recipe's 128x192 pingpong kernels (192 accumulators a thread,
 * each piece's column scales loaded beside it in the staged epilogue:
 * sm90_gemm_roles.cuh, CSC_BESIDE), each forced, with the case of many tiles a
 * CTA: n_out 320 and 2048 leave a partial 192-wide column tile, the
 * groups partial 128-row ones.  The table names such kernels, so finding
 * none fails. */
static void test_row_pingpong_wide(void **state)
{
    (void)state;
    run_forced_table_kind(row_pingpong_wide, 1, "128x192 pingpong row-recipe kernel");
}

/* Captured once, replayed after the counts changed in place. */
static void test_graph_replay(void **state)
{
    (void)state;
    const int before = g_failures;
    const f8variant *v = &variants[3]; /* block: the scales move with the rows */
    int32_t c1[4] = {10, 50, 0, 100}, c2[4] = {70, 0, 120, 30};
    f8data d;
    f8data_make(&d, v, 4, 256, 256, 384, &padded);
    f8dev x;
    kiln_problem p;
    f8dev_make(&x, &d, c1, &p, v);
    CUstream stream;
    CU(g_drv.cuStreamCreate(&stream, CU_STREAM_NON_BLOCKING));
    CU(g_drv.cuCtxSynchronize());
    assert_int_equal(kiln_prepare(g_ctx, &p), KILN_OK);
    CU(g_drv.cuStreamBeginCapture(stream, CU_STREAM_CAPTURE_MODE_GLOBAL));
    kiln_status st = kiln_gemm(g_ctx, &p, stream);
    CUgraphExec exec;
    CUgraph graph = graph_end_capture(stream, st, g_ctx, "kiln_gemm", &exec);
    graph_replay(exec, stream);
    f8check(&d, &x, v, c1, "fprop block: graph replay, counts 10,50,0,100");
    upload(x.sizes, c2, sizeof c2);
    poison(x.out, x.obytes);
    CU(g_drv.cuCtxSynchronize());
    graph_replay(exec, stream);
    f8check(&d, &x, v, c2, "fprop block: graph replay, counts changed to 70,0,120,30");
    graph_destroy(exec, graph, stream);
    f8dev_free(&x);
    f8data_free(&d);
    assert_int_equal(g_failures, before);
}

/* run_block_layout on the block recipe's dispatch, fprop and dgrad: scale_a
 * 1-3 floats past a 16-byte boundary, its pitch 601, 603 and 606 */
static void test_block_scale_layouts(void **state)
{
    (void)state;
    const int before = g_failures;
    const f8layout lays[] = {{0, 1}, {0, 2}, {0, 3}, {2, 3}, {5, 0}};
    for (size_t i = 0; i < sizeof lays / sizeof lays[0]; i++) {
        run_block_layout(&variants[3], &lays[i], "");
        run_block_layout(&variants[7], &lays[i], "");
    }
    assert_int_equal(g_failures, before);
}

GPU_CONTEXT_MAIN(KILN_ALLOW_GENERATED, &g_ctx, cmocka_unit_test(test_recipes),
                 cmocka_unit_test(test_group_shapes), cmocka_unit_test(test_kblock_counts),
                 cmocka_unit_test(test_half_width_promotion), cmocka_unit_test(test_row_cooperative),
                 cmocka_unit_test(test_row_pingpong_wide),
                 cmocka_unit_test(test_every_default),
                 cmocka_unit_test(test_graph_replay), cmocka_unit_test(test_block_scale_layouts))
