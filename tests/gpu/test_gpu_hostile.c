/* SPDX-License-Identifier: Apache-2.0 */
/* test_gpu_hostile.c — device-side sizes a caller got wrong: negative
 * counts, decreasing offsets, offsets and counts whose sums pass 2^31 and
 * 2^32, sums past the capacity.  kiln cannot refuse them before a call (they
 * live on the device), so the kernels clamp them as kiln.h documents: a
 * negative count or a decreasing offset is an empty group, and nothing at or
 * past the capacity is read or written, with *d_overflow set.
 *
 * Each case runs every op on the sm90 kernels and on the simple family and
 * is checked against a CPU reference of that documented meaning: every
 * valid element, every other output byte untouched, the overflow flag.
 * Reads outside the operands are what compute-sanitizer memcheck sees
 * (scripts/gpu_all.sh runs this test under it); the row operands are
 * allocated at exactly `capacity` rows so that any stray row is outside.
 * Exits 77 (skipped) without a driver or GPU. */
#include <limits.h>

#include "testutil.h"

#include "gpu_util.h"

static kiln_context *g_ctx;
static int g_failures;

#define FAIL_CASE(...) GPU_CASE_FAIL(g_failures, __VA_ARGS__)

/* A hostile size array, as d_sizes holds it. */
typedef struct hsizes {
    const char *what;
    int offsets;
    int groups;
    const int32_t *v;
} hsizes;

/* One op variant: the types, and the kernel family it must reach. */
typedef struct hvariant {
    kiln_op op;
    kiln_dtype in, out;
    int accumulate;
    const char *family; /* a substring of the kernel's name */
} hvariant;

/* The documented meaning of the sizes, in 64 bits: counts clamped to
 * [0, cap + 1] (more rows than that can never be valid), as int32 counts for
 * kts_group_rows. */
static int32_t *meant_counts(const hsizes *h, int64_t cap)
{
    int32_t *m = xmalloc(sizeof(int32_t) * (size_t)h->groups);
    for (int g = 0; g < h->groups; g++) {
        int64_t c = h->offsets ? (int64_t)h->v[g] - (g ? (int64_t)h->v[g - 1] : 0) : h->v[g];
        m[g] = (int32_t)(c < 0 ? 0 : c > cap + 1 ? cap + 1 : c);
    }
    return m;
}

/* Runs one variant on one size array and checks it. */
static void run_hostile(const hsizes *h, const hvariant *v)
{
    const int G = h->groups, isz = kiln_dtype_size(v->in), osz = kiln_dtype_size(v->out);
    const int64_t N = 64, K = 64, cap = 256;
    const int wg = v->op == KILN_OP_WGRAD;
    const int64_t acols = v->op == KILN_OP_FPROP ? K : N, ocols = v->op == KILN_OP_FPROP ? N : K;
    const int64_t orows = wg ? (int64_t)G * N : cap;
    char label[160];
    snprintf(label, sizeof label, "%s %s->%s%s: %s", kiln_op_name(v->op), kiln_dtype_name(v->in),
             kiln_dtype_name(v->out), v->accumulate ? " acc" : "", h->what);

    int32_t *m = meant_counts(h, cap);
    int64_t *start = xmalloc(sizeof(int64_t) * (size_t)G), *rows = xmalloc(sizeof(int64_t) * (size_t)G);
    const int64_t total = kts_group_rows(m, G, cap, start, rows);

    void *ea, *eb, *einit = NULL;
    float *A = rand_matrix(cap, acols, acols, v->in, &ea);
    float *B = rand_matrix(wg ? cap : (int64_t)G * N, K, K, v->in, &eb);
    float *init = NULL;
    const size_t obytes = (size_t)(orows * ocols * osz);
    unsigned char *before = xmalloc(obytes), *after = xmalloc(obytes);
    if (v->accumulate) {
        init = rand_matrix(orows, ocols, ocols, v->out, &einit);
        memcpy(before, einit, obytes);
    } else {
        memset(before, KTS_POISON, obytes);
    }
    CUdeviceptr dA = dev_alloc((size_t)(cap * acols * isz));
    CUdeviceptr dB = dev_alloc((size_t)((wg ? cap : (int64_t)G * N) * K * isz));
    CUdeviceptr dD = dev_alloc(obytes), dsz = dev_alloc(sizeof(int32_t) * (size_t)G);
    CUdeviceptr dovf = dev_alloc(sizeof(int32_t));
    upload(dA, ea, (size_t)(cap * acols * isz));
    upload(dB, eb, (size_t)((wg ? cap : (int64_t)G * N) * K * isz));
    upload(dD, before, obytes);
    upload(dsz, h->v, sizeof(int32_t) * (size_t)G);
    int32_t zero = 0;
    upload(dovf, &zero, sizeof zero);

    kiln_problem p;
    kts_problem_init(&p, v->op, G, N, K, cap, dsz, dA, dB, dD);
    p.a_type = p.b_type = v->in;
    p.out_type = v->out;
    p.sizes_kind = h->offsets ? KILN_SIZES_OFFSETS : KILN_SIZES_COUNTS;
    p.accumulate = v->accumulate;
    p.d_overflow = (int32_t *)(uintptr_t)dovf;

    kiln_call_report rep;
    if (gpu_gemm_case(g_ctx, &p, label, &g_failures, &rep)) {
        if (!strstr(rep.kernel, v->family))
            FAIL_CASE("%s: ran %s, wanted a %s kernel", label, rep.kernel, v->family);
        download(after, dD, obytes);
        int32_t ovf = -1;
        download(&ovf, dovf, sizeof ovf);
        if (ovf != (total > cap))
            FAIL_CASE("%s: overflow flag %d, wanted %d (sizes add up to %lld, capacity %lld)",
                      label, ovf, (int)(total > cap), (long long)total, (long long)cap);

        kts_problem ref = {.op = v->op, .n = N, .k = K, .lda = acols, .a = A, .b = B,
                           .start = start, .rows = rows, .alpha = 1.0f, .init = init,
                           .ldd = ocols};
        unsigned char *valid = calloc((size_t)(orows * ocols), 1);
        assert_non_null(valid);
        kts_err err = {0};
        for (int g = 0; g < G; g++) {
            const int64_t r0 = wg ? (int64_t)g * N : start[g], nr = wg ? N : rows[g];
            for (int64_t i = 0; i < nr; i++)
                for (int64_t j = 0; j < ocols; j++) {
                    const size_t e = (size_t)((r0 + i) * ocols + j);
                    valid[e] = 1;
                    kts_err_add(&err, kts_load(after, e, v->out), kts_reference(&ref, g, i, j));
                }
        }
        const size_t touched = kts_changed_outside(before, after, valid, (size_t)(orows * ocols), (size_t)osz);
        free(valid);
        const double rel = kts_err_rel(&err), tol = v->out == KILN_DTYPE_F32 ? 1e-4 : 1e-2;
        printf("  %-72s %-34s rel err %.2e\n", label, rep.kernel, rel);
        if (err.nan) FAIL_CASE("%s: %zu valid elements not written (NaN)", label, err.nan);
        if (!(rel <= tol)) FAIL_CASE("%s: relative error %.3e exceeds %.0e", label, rel, tol);
        if (touched) FAIL_CASE("%s: %zu elements outside the valid rows changed", label, touched);
    }
    DEV_FREE_ALL(dA, dB, dD, dsz, dovf);
    FREE_ALL(m, start, rows, ea, eb, einit, A, B, init, before, after);
}

/* Every op, on both kernel families: in the shipped catalog bf16 reaches
 * sm90, while fp16 -> f32 fprop/dgrad and bf16 -> f32 wgrad overwrite have
 * only simple kernels. */
static const hvariant variants[] = {
    {KILN_OP_FPROP, KILN_DTYPE_BF16, KILN_DTYPE_BF16, 0, "sm90"},
    {KILN_OP_DGRAD, KILN_DTYPE_BF16, KILN_DTYPE_BF16, 0, "sm90"},
    {KILN_OP_WGRAD, KILN_DTYPE_BF16, KILN_DTYPE_BF16, 0, "sm90"},
    {KILN_OP_WGRAD, KILN_DTYPE_BF16, KILN_DTYPE_F32, 1, "sm90"},
    {KILN_OP_FPROP, KILN_DTYPE_F16, KILN_DTYPE_F32, 0, "simple"},
    {KILN_OP_DGRAD, KILN_DTYPE_F16, KILN_DTYPE_F32, 0, "simple"},
    {KILN_OP_WGRAD, KILN_DTYPE_BF16, KILN_DTYPE_F32, 0, "simple"},
};

static void run_all(const hsizes *h)
{
    for (size_t i = 0; i < sizeof variants / sizeof variants[0]; i++) run_hostile(h, &variants[i]);
}

/* run_all on each of the n size arrays; asserts that none failed. */
static void run_cases(const hsizes *cases, size_t n)
{
    const int before = g_failures;
    for (size_t i = 0; i < n; i++) run_all(&cases[i]);
    assert_int_equal(g_failures, before);
}

static void test_counts(void **state)
{
    (void)state;
    /* negative counts between valid ones, one past the capacity */
    static const int32_t neg[] = {-5, 40, -INT_MAX, 100, INT_MIN, 90, 7, -1};
    /* running sums pass 2^31 and 2^32: a 32-bit sum wraps negative */
    static const int32_t wrap[] = {100, INT_MAX - 100, INT_MAX, INT_MAX, 50, 3};
    /* every count INT_MAX */
    static const int32_t huge[] = {INT_MAX, INT_MAX, INT_MAX, INT_MAX};
    const hsizes cases[] = {
        {"negative counts, sum past capacity", 0, 8, neg},
        {"counts whose sums pass 2^31 and 2^32", 0, 6, wrap},
        {"every count INT_MAX", 0, 4, huge},
    };
    run_cases(cases, sizeof cases / sizeof cases[0]);
}

static void test_offsets(void **state)
{
    (void)state;
    /* decreasing, negative and extreme offsets: differences overflow int32 */
    static const int32_t wild[] = {10, 5, 200, -7, INT_MAX, INT_MIN, 100, 90};
    /* a valid start, then every offset INT_MAX */
    static const int32_t tail[] = {50, 120, INT_MAX, INT_MAX, INT_MAX};
    /* offsets that decrease from the start */
    static const int32_t down[] = {300, 200, 100, 0, -100};
    const hsizes cases[] = {
        {"wild offsets (differences past int32)", 1, 8, wild},
        {"offsets jumping to INT_MAX", 1, 5, tail},
        {"decreasing offsets from past the capacity", 1, 5, down},
    };
    run_cases(cases, sizeof cases / sizeof cases[0]);
}

/* Many groups: the schedule's scan across threads and warps saturates. */
static void test_many_groups(void **state)
{
    (void)state;
    const int before = g_failures;
    enum { G = 1024 };
    int32_t *v = xmalloc(sizeof(int32_t) * G);
    for (int g = 0; g < G; g++) v[g] = g % 3 == 0 ? INT_MAX / 3 : g % 3 == 1 ? -rng_int(0, 1000) : rng_int(0, 3);
    const hsizes h = {"1024 groups, counts near INT_MAX/3", 0, G, v};
    run_all(&h);
    for (int g = 0; g < G; g++) v[g] = g < 5 ? g * 20 : INT_MAX - (G - g);
    const hsizes o = {"1024 groups, offsets near INT_MAX", 1, G, v};
    run_all(&o);
    free(v);
    assert_int_equal(g_failures, before);
}

GPU_CONTEXT_MAIN(KILN_ALLOW_GENERATED, &g_ctx, cmocka_unit_test(test_counts),
                 cmocka_unit_test(test_offsets), cmocka_unit_test(test_many_groups))
