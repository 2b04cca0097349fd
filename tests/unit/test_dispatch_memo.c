/* SPDX-License-Identifier: Apache-2.0 */
/* test_dispatch_memo.c — the memo of dispatch decisions
 * (runtime/dispatch_memo.c): its key keeps what kiln_dispatch reads and
 * drops what it does not, checked against the real cascade with the
 * built-in catalog and tuning table; lookup and replacement. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "testutil.h"

#include "dispatch_memo.h"
#include "kernels.h"
#include "problem.h"

#define FAKE(addr) ((void *)(uintptr_t)(addr))

static int32_t sizes_a[256], sizes_b[256];

/* A problem with every pointer set to fake addresses from base. */
static void make_problem(kiln_problem *p, kiln_op op, int groups, int tpg, int64_t n, int64_t k,
                         uintptr_t base)
{
    kiln_problem_init(p, op);
    p->groups = groups;
    p->n = n;
    p->k = k;
    p->capacity = (int64_t)groups * tpg;
    p->d_sizes = FAKE(base + 0x1000);
    p->d_a = FAKE(base + 0x2000);
    p->d_b = FAKE(base + 0x3000);
    p->d_out = FAKE(base + 0x4000);
}

/* The same problem on other buffers, with other host sizes (same total). */
static void other_buffers(const kiln_problem *p, kiln_problem *q)
{
    *q = *p;
    uintptr_t d = 0x10000000;
#define MOVE(f) if (q->f) q->f = (void *)((uintptr_t)q->f + d)
    MOVE(d_sizes);
    MOVE(d_a);
    MOVE(d_b);
    MOVE(d_b_ptrs);
    MOVE(d_out);
    MOVE(d_out_ptrs);
    MOVE(d_overflow);
    MOVE(epilogue.d_bias);
    MOVE(epilogue.d_row_scale);
    MOVE(epilogue.d_alpha);
    MOVE(epilogue.d_c);
    MOVE(fp8.d_scale_a);
    MOVE(fp8.d_scale_b);
    MOVE(fp8.d_bt);
#undef MOVE
    if (q->host_sizes) q->host_sizes = sizes_b;
}

typedef struct cascade {
    kiln_kernels ks;
    kiln_device_limits dev;
    kiln_rt_log log;
    kiln_driver drv;
    kiln_context_stats stats;
} cascade;

static cascade cas;

static int open_cascade(void **state)
{
    (void)state;
    memset(&cas, 0, sizeof cas);
    cas.dev = (kiln_device_limits){9, 0, 132, "sm_90a", {0}};
    cas.ks.env.drv = &cas.drv;
    cas.ks.env.log = &cas.log;
    cas.ks.env.dev = &cas.dev;
    cas.ks.stats = &cas.stats;
    kiln_error err;
    kiln_error_clear(&err);
    assert_int_equal(kiln_kernels_open_catalog(&cas.ks, &err), KILN_OK);
    unsetenv("KILN_TUNING");
    kiln_kernels_open_tuning(&cas.ks, NULL);
    /* 2 per group: a valid host copy for any capacity of >= 2 rows a group;
     * the other one puts every row in group 0. */
    for (int g = 0; g < 256; g++) sizes_a[g] = 2;
    sizes_b[0] = 2 * 256;
    return 0;
}

static int close_cascade(void **state)
{
    (void)state;
    kiln_kernels_close(&cas.ks, 0);
    return 0;
}

static kiln_status run(const kiln_problem *p, unsigned allowed, kiln_dispatch_choice *c,
                       kiln_error *err)
{
    kiln_dispatch_input in = {p,         "sm_90a",      cas.ks.candidates,
                              cas.ks.n_candidates,      allowed,
                              NULL,      cas.ks.tuning, cas.ks.tuned_unavailable, NULL};
    kiln_error_clear(err);
    return kiln_dispatch(&in, c, err);
}

/* p and other_buffers(p) dispatch alike (status, backend, kernel, tuned
 * entry, reason, message), and their memo keys are equal. */
static void same_decision(const kiln_problem *p, unsigned allowed, int *n_tuned)
{
    kiln_problem q;
    other_buffers(p, &q);
    kiln_dispatch_choice a, b;
    kiln_error ea, eb;
    kiln_status sa = run(p, allowed, &a, &ea), sb = run(&q, allowed, &b, &eb);
    assert_int_equal(sa, sb);
    if (sa) {
        assert_string_equal(ea.msg, eb.msg);
    } else {
        assert_int_equal(a.backend, b.backend);
        assert_int_equal(a.kernel, b.kernel);
        assert_int_equal(a.tuned, b.tuned);
        assert_string_equal(a.reason, b.reason);
        *n_tuned += a.tuned >= 0;
    }
    kiln_dispatch_memo_key ka, kb;
    kiln_dispatch_memo_key_of(p, &ka);
    kiln_dispatch_memo_key_of(&q, &kb);
    assert_true(ka.hash == kb.hash);
    assert_memory_equal(&ka.p, &kb.p, sizeof ka.p);
}

/* Epilogue variants of fprop/dgrad, output variants of wgrad. */
static void variant(kiln_problem *p, int v)
{
    kiln_epilogue *e = &p->epilogue;
    if (p->op == KILN_OP_WGRAD) {
        if (v == 1) {
            p->wgrad_output = KILN_WGRAD_DISCRETE;
            p->d_out_ptrs = FAKE(0x7000);
            p->d_out = NULL;
        }
        if (v == 2) {
            p->out_type = KILN_DTYPE_F32;
            p->accumulate = 1;
        }
        return;
    }
    switch (v) {
    case 1: e->d_bias = FAKE(0x5000); break;
    case 2:
        e->d_bias = FAKE(0x5000);
        e->d_row_scale = FAKE(0x6000);
        e->scale_bias = 1;
        break;
    case 3: e->d_alpha = FAKE(0x6100); break;
    case 4:
        e->beta = 1.0f;
        e->d_c = FAKE(0x6200);
        break;
    case 5:
        p->d_b = NULL;
        p->d_b_ptrs = FAKE(0x6300);
        break;
    }
}

/* The property the memo rests on (dispatch_memo.h): over ops, types,
 * epilogues, shape classes the table holds and others, host sizes given or
 * not, and each backend setting, a problem's buffers and host sizes'
 * contents never change the decision. */
static void test_decision_ignores_buffers(void **state)
{
    (void)state;
    static const int shapes[][4] = {{128, 16, 2048, 4096}, {32, 1024, 4096, 4096},
                                    {32, 1025, 4096, 4096}, {8, 4096, 14336, 4096},
                                    {256, 8, 1024, 2048},   {64, 150, 2048, 2048}};
    static const kiln_dtype types[][2] = {{KILN_DTYPE_BF16, KILN_DTYPE_BF16},
                                          {KILN_DTYPE_BF16, KILN_DTYPE_F32},
                                          {KILN_DTYPE_F16, KILN_DTYPE_F16},
                                          {KILN_DTYPE_E4M3, KILN_DTYPE_BF16}};
    static const unsigned allowed[] = {KILN_ALLOW_ALL, KILN_ALLOW_GENERATED, KILN_ALLOW_CUBLASLT};
    int n = 0, n_tuned = 0;
    for (int op = 0; op < 3; op++)
        for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++)
            for (size_t t = 0; t < sizeof types / sizeof types[0]; t++)
                for (int v = 0; v < 6; v++)
                    for (int hs = 0; hs < 2; hs++)
                        for (size_t a = 0; a < sizeof allowed / sizeof allowed[0]; a++) {
                            const int fp8 = types[t][0] == KILN_DTYPE_E4M3;
                            if (op == KILN_OP_WGRAD && (v > 2 || fp8)) continue;
                            if (fp8 && v == 5) continue; /* fp8 weights are one tensor */
                            kiln_problem p;
                            make_problem(&p, (kiln_op)op, shapes[s][0], shapes[s][1],
                                         shapes[s][2], shapes[s][3], 0x100000);
                            p.a_type = p.b_type = types[t][0];
                            p.out_type = types[t][1];
                            variant(&p, v);
                            if (fp8) {
                                /* row, row promoted, block: by variant */
                                p.fp8.recipe = v % 3 == 2 ? KILN_FP8_BLOCK : KILN_FP8_ROW;
                                p.fp8.promote = v % 3 == 1;
                                p.fp8.d_scale_a = FAKE(0x8000);
                                p.fp8.d_scale_b = FAKE(0x8100);
                                if (op == KILN_OP_DGRAD) p.fp8.d_bt = FAKE(0x8200);
                            }
                            if (hs) p.host_sizes = sizes_a;
                            same_decision(&p, allowed[a], &n_tuned);
                            n++;
                        }
    /* The table's entries were among those compared. */
    assert_true(n_tuned > 0);
    printf("%d problems, %d tuned decisions\n", n, n_tuned);
}

/* What the key keeps: whether each pointer is given, and every other field. */
static void test_key(void **state)
{
    (void)state;
    kiln_problem p, q;
    make_problem(&p, KILN_OP_FPROP, 32, 1024, 4096, 4096, 0x100000);
    kiln_dispatch_memo_key kp, kq;
    kiln_dispatch_memo_key_of(&p, &kp);
    for (int field = 0; field < 12; field++) {
        q = p;
        switch (field) {
        case 0: q.host_sizes = sizes_a; break;
        case 1: q.epilogue.d_bias = FAKE(0x5000); break;
        case 2: q.d_b = NULL; q.d_b_ptrs = FAKE(0x6300); break;
        case 3: q.d_overflow = FAKE(0x6400); break;
        case 4: q.capacity += 8; break;
        case 5: q.n += 8; break;
        case 6: q.k += 8; break;
        case 7: q.groups = 31; break;
        case 8: q.epilogue.alpha = 2.0f; break;
        case 9: q.out_type = KILN_DTYPE_F32; break;
        case 10: q.sizes_kind = KILN_SIZES_OFFSETS; break;
        case 11: q.lda = 4104; break;
        }
        kiln_dispatch_memo_key_of(&q, &kq);
        assert_memory_not_equal(&kp.p, &kq.p, sizeof kp.p);
        assert_true(kp.hash != kq.hash);
    }
}

static void test_get_put_replace(void **state)
{
    (void)state;
    kiln_dispatch_memo *m = kiln_dispatch_memo_create();
    assert_non_null(m);
    kiln_problem p;
    kiln_dispatch_memo_key k[KILN_DISPATCH_MEMO_SIZE + 1];
    kiln_dispatch_choice c, got;
    struct kiln_rt_kernel *kernel = NULL;
    for (int i = 0; i <= KILN_DISPATCH_MEMO_SIZE; i++) {
        make_problem(&p, KILN_OP_DGRAD, 8, 64, 256 + 8 * i, 512, 0x200000);
        kiln_dispatch_memo_key_of(&p, &k[i]);
        assert_false(kiln_dispatch_memo_get(m, &k[i], &got, &kernel));
        memset(&c, 0, sizeof c);
        c.backend = KILN_BACKEND_GENERATED;
        c.kernel = i;
        c.tuned = -1;
        snprintf(c.reason, sizeof c.reason, "decision %d", i);
        /* Entry 0 is used again before each new one: never the oldest. */
        if (i > 0) assert_true(kiln_dispatch_memo_get(m, &k[0], &got, &kernel));
        if (i < KILN_DISPATCH_MEMO_SIZE)
            kiln_dispatch_memo_put(m, &k[i], &c, (struct kiln_rt_kernel *)FAKE(0x1000 + i));
        else
            kiln_dispatch_memo_put(m, &k[i], &c, NULL);
    }
    /* The last put replaced the least recently used: entry 1. */
    assert_false(kiln_dispatch_memo_get(m, &k[1], &got, &kernel));
    for (int i = 0; i <= KILN_DISPATCH_MEMO_SIZE; i++) {
        if (i == 1) continue;
        assert_true(kiln_dispatch_memo_get(m, &k[i], &got, &kernel));
        assert_int_equal(got.kernel, i);
        char want[32];
        snprintf(want, sizeof want, "decision %d", i);
        assert_string_equal(got.reason, want);
        assert_ptr_equal(kernel, i < KILN_DISPATCH_MEMO_SIZE ? FAKE(0x1000 + i) : NULL);
    }
    /* A put for a key already held replaces its decision in place. */
    c.kernel = 99;
    kiln_dispatch_memo_put(m, &k[0], &c, NULL);
    assert_true(kiln_dispatch_memo_get(m, &k[0], &got, &kernel));
    assert_int_equal(got.kernel, 99);
    assert_true(kiln_dispatch_memo_get(m, &k[2], &got, &kernel));
    uint64_t hits, misses;
    kiln_dispatch_memo_counts(m, &hits, &misses);
    assert_true(hits > 0 && misses == KILN_DISPATCH_MEMO_SIZE + 2);
    kiln_dispatch_memo_destroy(m);
    /* No memo: nothing remembered, nothing crashes. */
    kiln_dispatch_memo_put(NULL, &k[0], &c, NULL);
    assert_false(kiln_dispatch_memo_get(NULL, &k[0], &got, &kernel));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_decision_ignores_buffers),
        cmocka_unit_test(test_key),
        cmocka_unit_test(test_get_put_replace),
    };
    kiln_test_filter();
    return cmocka_run_group_tests(tests, open_cascade, close_cascade);
}
