/* SPDX-License-Identifier: Apache-2.0 */
/* test_host_path.c — kiln_gemm's host path on the CPU, with a fake driver
 * table: a context with its per-call caches (dispatch memo, tensor maps)
 * must hand the driver exactly what a context without them does, call
 * after call, while the problem's buffers, capacity, shape, op and
 * epilogue change under it; and repeating a call encodes nothing.  The
 * context and the fake driver are tests/support/fake_driver.c's. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "testutil.h"

#include "fake_driver.h"
#include "launch.h"
#include "problem.h"

/* fake_driver.h's context, which must come up. */
static kiln_context *context(int caches)
{
    kiln_context *ctx = fake_context(caches);
    assert_non_null(ctx);
    return ctx;
}

static int32_t host_sizes[128];

/* A problem of op on the fake buffers: groups, capacity, N and K. */
static void fake_problem(kiln_problem *p, kiln_op op, int groups, int64_t cap, int64_t n, int64_t k)
{
    kiln_problem_init(p, op);
    p->groups = groups;
    p->capacity = cap;
    p->n = n;
    p->k = k;
    p->d_a = FAKE(0x7f0000000000);
    p->d_b = FAKE(0x7e0000000000);
    p->d_out = FAKE(0x7a0000000000);
    p->d_sizes = FAKE(0x7d0000000000);
}

/* Call i of a sequence in which each property changes at its own pace
 * (op every call, bias every 3, capacity every 6, buffers every 12, N
 * every 36, host sizes every 72), so that calls come back to a signature
 * seen before with other buffers and meet signatures that differ from a
 * remembered one in one field only. */
static void problem_of(int i, kiln_problem *p)
{
    static const kiln_op ops[] = {KILN_OP_FPROP, KILN_OP_DGRAD, KILN_OP_WGRAD};
    kiln_problem_init(p, ops[i % 3]);
    p->groups = 32;
    p->n = (i / 36) % 2 ? 2048 : 4096;
    p->k = 4096;
    p->capacity = 32768 + 8 * ((i / 6) % 2);
    uintptr_t buf = 0x7f0000000000 + (uintptr_t)((i / 12) % 3) * 0x1000000;
    p->d_a = FAKE(buf);
    p->d_b = FAKE(0x7e0000000000);
    p->d_out = FAKE(buf + 0x800000);
    p->d_sizes = FAKE(0x7d0000000000);
    p->host_sizes = (i / 72) % 2 ? host_sizes : NULL;
    if (p->op != KILN_OP_WGRAD && (i / 3) % 2) p->epilogue.d_bias = FAKE(0x7c0000000000);
    if (i % 11 == 5) p->lda = kiln_problem_a_cols(p) + 64;
}

/* Cached and uncached contexts launch the same kernel with the same
 * arguments and maps, report the same decision, over 144 calls. */
static void test_caches_change_nothing(void **state)
{
    (void)state;
    for (int g = 0; g < 128; g++) host_sizes[g] = 128;
    kiln_context *fresh = context(0), *cached = context(1);
    for (int i = 0; i < 144; i++) {
        kiln_problem p;
        problem_of(i, &p);
        assert_int_equal(kiln_gemm(fresh, &p, NULL), KILN_OK);
        fake_record want = fake_last;
        kiln_call_report rw, rc;
        assert_int_equal(kiln_last_call(fresh, &rw), KILN_OK);
        assert_int_equal(kiln_gemm(cached, &p, NULL), KILN_OK);
        assert_int_equal(kiln_last_call(cached, &rc), KILN_OK);
        assert_ptr_equal(fake_last.f, want.f);
        assert_int_equal(fake_last.grid, want.grid);
        assert_int_equal(fake_last.threads, want.threads);
        assert_int_equal(fake_last.smem, want.smem);
        assert_int_equal(fake_last.cluster, want.cluster);
        assert_memory_equal(&fake_last.args, &want.args, sizeof want.args);
        assert_memory_equal(fake_last.maps, want.maps, sizeof want.maps);
        assert_string_equal(rc.kernel, rw.kernel);
        assert_string_equal(rc.reason, rw.reason);
        assert_int_equal(rc.backend, rw.backend);
    }
    uint64_t hits, misses;
    kiln_tmap_cache_counts(cached->tmaps, &hits, &misses);
    assert_true(hits > 0 && misses > 0);
    kiln_dispatch_memo_counts(cached->memo, &hits, &misses);
    assert_true(hits > 0 && misses > 0);
    fake_context_free(fresh);
    fake_context_free(cached);
}

/* The second of two equal calls encodes no map. */
static void test_repeat_encodes_nothing(void **state)
{
    (void)state;
    kiln_context *ctx = context(1);
    kiln_problem p;
    problem_of(0, &p);
    int e0 = fake_encodes;
    assert_int_equal(kiln_gemm(ctx, &p, NULL), KILN_OK);
    assert_true(fake_encodes > e0);
    int e1 = fake_encodes, l1 = fake_launches;
    assert_int_equal(kiln_gemm(ctx, &p, NULL), KILN_OK);
    assert_int_equal(fake_encodes, e1);
    assert_int_equal(fake_launches, l1 + 1);
    fake_context_free(ctx);
}

/* KILN_PDL=1: the sm90 family's launches carry the programmatic stream
 * serialization attribute, the simple family's never; the rest of the
 * launch is unchanged.  Off by default. */
static void test_pdl(void **state)
{
    (void)state;
    kiln_context *off = context(1), *on = context(1);
    on->pdl = 1;
    int sm90 = 0, simple = 0;
    for (int i = 0; i < 12; i++) {
        kiln_problem p;
        problem_of(i, &p);
        if (i >= 6 && p.op != KILN_OP_WGRAD) p.out_type = KILN_DTYPE_F32; /* the simple family */
        if (i >= 9 && p.op != KILN_OP_WGRAD) { /* and with pointer-array weights */
            p.d_b = NULL;
            p.d_b_ptrs = FAKE(0x7b0000000000);
        }
        assert_int_equal(kiln_gemm(off, &p, NULL), KILN_OK);
        fake_record want = fake_last;
        assert_int_equal(want.pdl, 0);
        assert_int_equal(kiln_gemm(on, &p, NULL), KILN_OK);
        kiln_call_report rep;
        kiln_last_call(on, &rep);
        int is_sm90 = strstr(rep.kernel, "sm90") != NULL;
        sm90 += is_sm90;
        simple += !is_sm90;
        assert_int_equal(fake_last.pdl, is_sm90);
        assert_ptr_equal(fake_last.f, want.f);
        assert_int_equal(fake_last.grid, want.grid);
        assert_int_equal(fake_last.cluster, want.cluster);
        assert_memory_equal(&fake_last.args, &want.args, sizeof want.args);
        assert_memory_equal(fake_last.maps, want.maps, sizeof want.maps);
    }
    assert_true(sm90 > 0 && simple > 0);
    fake_context_free(off);
    fake_context_free(on);
}

/* Pointer-array weights (fprop, dgrad) go to the sm90 kernel the same call
 * with contiguous weights gets (the shipped kernels take both: weights:
 * any), with B's map over one group's [N, K] at a stand-in address (d_a)
 * that the kernel re-points per group; contiguous weights get the map over
 * all G*N rows at d_b. */
static void test_pointer_array_weights(void **state)
{
    (void)state;
    kiln_context *ctx = context(1);
    for (int i = 0; i < 2; i++) {
        kiln_problem p;
        problem_of(i, &p); /* fprop, then dgrad */
        assert_int_equal(kiln_gemm(ctx, &p, NULL), KILN_OK);
        kiln_call_report rep;
        kiln_last_call(ctx, &rep);
        assert_non_null(strstr(rep.kernel, "sm90_"));
        char contiguous_kernel[sizeof rep.kernel];
        snprintf(contiguous_kernel, sizeof contiguous_kernel, "%s", rep.kernel);
        assert_int_equal(fake_last.maps[1].opaque[0], (uint64_t)(uintptr_t)p.d_b);
        assert_int_equal(fake_last.maps[1].opaque[3], (uint64_t)(p.groups * p.n));
        assert_null(fake_last.args.b_ptrs);

        p.d_b = NULL;
        p.d_b_ptrs = FAKE(0x7b0000000000);
        assert_int_equal(kiln_gemm(ctx, &p, NULL), KILN_OK);
        kiln_last_call(ctx, &rep);
        assert_string_equal(rep.kernel, contiguous_kernel);
        assert_int_equal(fake_last.maps[1].opaque[0], (uint64_t)(uintptr_t)p.d_a);
        assert_int_equal(fake_last.maps[1].opaque[2], (uint64_t)p.k);
        assert_int_equal(fake_last.maps[1].opaque[3], (uint64_t)p.n);
        assert_ptr_equal(fake_last.args.b_ptrs, p.d_b_ptrs);
        /* more than half of the SM's shared memory: the per-SM map slots */
        assert_true(fake_last.smem > 233472 / 2);
    }
    fake_context_free(ctx);
}

/* wgrad through a kernel that stores dW rows a tile wide (tmap_d.chunks >
 * 0, sm90_wgrad.lua): where K is a multiple of 64, tmap_d is the 3-D map
 * {64, K/64, rows} (strides 128 bytes and a row), box {64, chunks, 16};
 * otherwise the 2-D map {K, rows} with 16x64 boxes, which the kernel's
 * other path stores through (sm90_wgrad.cuh: the same rule).  Dense dW:
 * rows G*N over d_out.  Discrete dW (a buffer per group): one group's N
 * rows over a stand-in address (d_a), the kernel pointing a copy at each
 * group's buffer (forty-third session). */
static void check_dw_map(const char *name, int discrete)
{
    kiln_context *ctx = context(1);
    snprintf(ctx->only_kernel, sizeof ctx->only_kernel, "%s", name);
    for (int i = 0; i < 2; i++) {
        kiln_problem p;
        kiln_problem_init(&p, KILN_OP_WGRAD);
        p.groups = 8;
        p.n = 1024;
        p.k = i ? 1000 : 2048;
        p.capacity = 4096;
        p.d_a = FAKE(0x7f0000000000);
        p.d_b = FAKE(0x7e0000000000);
        if (discrete) {
            p.wgrad_output = KILN_WGRAD_DISCRETE;
            p.d_out_ptrs = FAKE(0x7a0000000000);
        } else {
            p.d_out = FAKE(0x7a0000000000);
        }
        p.d_sizes = FAKE(0x7d0000000000);
        kiln_status st = kiln_gemm(ctx, &p, NULL);
        if (st) print_error("%s\n", kiln_last_error(ctx));
        assert_int_equal(st, KILN_OK);
        kiln_call_report rep;
        kiln_last_call(ctx, &rep);
        assert_string_equal(rep.kernel, name);
        const unsigned long long *o = fake_last.maps[2].opaque;
        const uint64_t rows = discrete ? 1024 : 8 * 1024;
        assert_int_equal(o[0], (uint64_t)(uintptr_t)(discrete ? p.d_a : p.d_out));
        if (i == 0) {
            assert_int_equal(o[1] & 0xffffffffu, 3);
            assert_int_equal(o[2], 64);
            assert_int_equal(o[3], 2048 / 64);
            assert_int_equal(o[8], rows);
            assert_int_equal(o[4], 128);
            assert_int_equal(o[9], 2048 * 2);
            assert_int_equal(o[5], (uint64_t)64 << 32 | 4);
            assert_int_equal(o[10], 16);
        } else {
            assert_int_equal(o[1] & 0xffffffffu, 2);
            assert_int_equal(o[2], 1000);
            assert_int_equal(o[3], rows);
            assert_int_equal(o[4], 1000 * 2);
            assert_int_equal(o[5], (uint64_t)64 << 32 | 16);
        }
    }
    fake_context_free(ctx);
}

static void test_wgrad_dw_in_chunks(void **state)
{
    (void)state;
    check_dw_map("wgrad_sm90_bf16_raster__m128_n256_k64_s3_rn_cooperative", 0);
}

static void test_wgrad_discrete_dw_in_chunks(void **state)
{
    (void)state;
    check_dw_map("sm90_wgrad_bf16_bf16_discrete", 1);
}

/* The slot table alone (runtime/sched_slots.c): a slot per stream, kept;
 * a fresh slot per captured launch, never handed out again; 0 once either
 * kind runs out, never a slot in use. */
static void test_sched_slot_table(void **state)
{
    (void)state;
    kiln_sched s;
    memset(&s, 0, sizeof s);
    assert_int_equal(kiln_sched_slot(&s, 0xA, 0), 1);
    assert_int_equal(kiln_sched_slot(&s, 0xB, 0), 2);
    assert_int_equal(kiln_sched_slot(&s, 0xA, 0), 1);
    assert_int_equal(kiln_sched_slot(&s, 0xA, 1), KILN_SCHED_STREAMS + 1);
    assert_int_equal(kiln_sched_slot(&s, 0xA, 1), KILN_SCHED_STREAMS + 2);
    assert_int_equal(kiln_sched_slot(&s, 0xB, 0), 2);
    for (uintptr_t st = 0xC; st < 0xA + KILN_SCHED_STREAMS; st++)
        assert_int_equal(kiln_sched_slot(&s, st, 0), (int)(st - 0xA + 1));
    assert_int_equal(kiln_sched_slot(&s, 0x1000, 0), 0); /* a 65th stream */
    assert_int_equal(kiln_sched_slot(&s, 0xA + KILN_SCHED_STREAMS - 1, 0), KILN_SCHED_STREAMS);
    int last = KILN_SCHED_STREAMS + 2;
    for (int got; (got = kiln_sched_slot(&s, 0xA, 1)) != 0; last = got) assert_int_equal(got, last + 1);
    assert_int_equal(last, KILN_SCHED_SLOTS);
    assert_int_equal(kiln_sched_slot(&s, 0xA, 1), 0);
    assert_int_equal(kiln_sched_slot(&s, 0xA, 0), 1);
}

static CUstreamCaptureStatus capturing; /* what fake_is_capturing answers */

static CUresult fake_is_capturing(CUstream stream, CUstreamCaptureStatus *status)
{
    (void)stream;
    *status = capturing;
    return CUDA_SUCCESS;
}

static int global_calls;
static size_t global_bytes;

static CUresult fake_get_global(CUdeviceptr *ptr, size_t *bytes, CUmodule m, const char *name)
{
    (void)m;
    global_calls++;
    if (strcmp(name, "kiln_sched_ctr")) return CUDA_ERROR_NOT_FOUND;
    *ptr = (CUdeviceptr)0x7c0000000000;
    *bytes = global_bytes;
    return CUDA_SUCCESS;
}

/* A module's counters are found at load (kiln_launch_set_limits): the
 * driver is asked only when the image names them, and only the full
 * KILN_SCHED_SLOTS pairs count (the template's placeholder is one). */
static void test_sched_counters_at_load(void **state)
{
    (void)state;
    kiln_context *ctx = context(1);
    ctx->drv.cuModuleGetGlobal = fake_get_global;
    static const char named[] = "\x7f" "ELF\0.nv.global\0kiln_sched_ctr\0kiln_wgrad\0";
    static const char longer[] = "\x7f" "ELF\0kiln_sched_ctr_x\0";
    static const char none[] = "\x7f" "ELF\0.nv.global\0kiln_fprop\0";
    static const struct { const char *image; size_t size; size_t bytes; int calls, sched; } cases[] = {
        {named, sizeof named, (size_t)KILN_SCHED_SLOTS * 2 * sizeof(unsigned), 1, 1},
        {named, sizeof named, 2 * sizeof(unsigned), 1, 0}, /* the placeholder */
        {longer, sizeof longer, (size_t)KILN_SCHED_SLOTS * 2 * sizeof(unsigned), 0, 0},
        {none, sizeof none, (size_t)KILN_SCHED_SLOTS * 2 * sizeof(unsigned), 0, 0},
        {NULL, 0, (size_t)KILN_SCHED_SLOTS * 2 * sizeof(unsigned), 0, 0}};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        kiln_rt_kernel k;
        memset(&k, 0, sizeof k);
        k.module = (CUmodule)(uintptr_t)0x1;
        k.sched = -1;
        global_calls = 0;
        global_bytes = cases[i].bytes;
        kiln_error err;
        kiln_error_clear(&err);
        assert_int_equal(kiln_launch_set_limits(&ctx->env, &k, cases[i].image, cases[i].size, &err),
                         KILN_OK);
        assert_int_equal(global_calls, cases[i].calls);
        assert_int_equal(k.sched, cases[i].sched);
    }
    fake_context_free(ctx);
}

/* kiln_gemm from another thread on the per-thread default stream: that
 * thread's own stream, so a slot of its own. */
typedef struct per_thread_call {
    kiln_context *ctx;
    kiln_problem *p;
    kiln_status st;
    int slot;
} per_thread_call;

static void *call_per_thread(void *arg)
{
    per_thread_call *c = arg;
    c->st = kiln_gemm(c->ctx, c->p, (void *)CU_STREAM_PER_THREAD);
    c->slot = fake_last.args.sched_slot;
    return NULL;
}

/* kiln_gemm hands a kernel with work-order counters its stream's slot, or
 * a captured launch's own (asking the driver), and other kernels none. */
static void test_sched_slot_launch(void **state)
{
    (void)state;
    static const char name[] = "wgrad_sm90_bf16_raster__m128_n256_k64_s3_rn_cooperative";
    kiln_context *ctx = context(1);
    ctx->drv.cuStreamIsCapturing = fake_is_capturing;
    snprintf(ctx->only_kernel, sizeof ctx->only_kernel, "%s", name);
    kiln_problem p;
    fake_problem(&p, KILN_OP_WGRAD, 8, 4096, 1024, 2048);
    assert_int_equal(kiln_gemm(ctx, &p, FAKE(0x51)), KILN_OK);
    assert_int_equal(fake_last.args.sched_slot, 0); /* its module has no counters */
    ctx->kernels.kernels[(uintptr_t)fake_last.f - 1].sched = 1;
    static const struct { uintptr_t stream; CUstreamCaptureStatus cap; int slot; } calls[] = {
        {0x51, CU_STREAM_CAPTURE_STATUS_NONE, 1},
        {0x52, CU_STREAM_CAPTURE_STATUS_NONE, 2},
        {0x51, CU_STREAM_CAPTURE_STATUS_NONE, 1},
        {0x51, CU_STREAM_CAPTURE_STATUS_ACTIVE, KILN_SCHED_STREAMS + 1},
        {0x51, CU_STREAM_CAPTURE_STATUS_INVALIDATED, KILN_SCHED_STREAMS + 2},
        {0x52, CU_STREAM_CAPTURE_STATUS_NONE, 2}};
    for (size_t i = 0; i < sizeof calls / sizeof calls[0]; i++) {
        capturing = calls[i].cap;
        assert_int_equal(kiln_gemm(ctx, &p, FAKE(calls[i].stream)), KILN_OK);
        assert_int_equal(fake_last.args.sched_slot, calls[i].slot);
    }
    capturing = CU_STREAM_CAPTURE_STATUS_NONE;
    /* The per-thread default stream: this thread's keeps one slot, another
     * thread's gets another. */
    assert_int_equal(kiln_gemm(ctx, &p, (void *)CU_STREAM_PER_THREAD), KILN_OK);
    assert_int_equal(fake_last.args.sched_slot, 3);
    assert_int_equal(kiln_gemm(ctx, &p, (void *)CU_STREAM_PER_THREAD), KILN_OK);
    assert_int_equal(fake_last.args.sched_slot, 3);
    per_thread_call other = {ctx, &p, KILN_ERROR_INTERNAL, -1};
    pthread_t th;
    assert_int_equal(pthread_create(&th, NULL, call_per_thread, &other), 0);
    assert_int_equal(pthread_join(th, NULL), 0);
    assert_int_equal(other.st, KILN_OK);
    assert_int_equal(other.slot, 4);
    fake_context_free(ctx);
}

/* A kernel that cuts its last round along k (k->split) gets the split
 * workspace and a grid of every SM only where its walk may reach
 * KILN_SPLIT_MIN_WALK k-blocks: not a decode-sized dgrad call of 16
 * experts of 32 tokens through a 2048-deep reduction (60 tiles at most, one
 * round of 32 k-blocks), but one expert of 64 tokens through 14336 (224);
 * and never without the context's workspace. */
static void test_split_only_where_it_may_cut(void **state)
{
    (void)state;
    static const char name[] = "sm90_dgrad_bf16_128x256";
    kiln_context *ctx = context(1);
    ctx->drv.cuStreamIsCapturing = fake_is_capturing;
    snprintf(ctx->only_kernel, sizeof ctx->only_kernel, "%s", name);
    ctx->split_ws = (CUdeviceptr)0x7c0000000000;
    kiln_problem p;
    fake_problem(&p, KILN_OP_DGRAD, 1, 64, 0, 0);
    static const struct { int groups; int64_t cap, n, k; int cut; unsigned grid; } calls[] = {
        {16, 512, 2048, 768, 0, 60},   /* (4 + 16) row tiles x 3 column tiles */
        {1, 64, 14336, 4096, 1, 132},
        {16, 512, 2048, 768, 0, 60}};
    for (size_t i = 0; i < sizeof calls / sizeof calls[0]; i++) {
        p.groups = calls[i].groups;
        p.capacity = calls[i].cap;
        p.n = calls[i].n;
        p.k = calls[i].k;
        assert_int_equal(kiln_gemm(ctx, &p, FAKE(0x51)), KILN_OK);
        if (i == 0) {
            kiln_rt_kernel *k = &ctx->kernels.kernels[(uintptr_t)fake_last.f - 1];
            assert_string_equal(k->desc.name, name);
            assert_int_equal(fake_last.args.workspace, 0); /* k->split not yet set */
            k->split = 1;
            assert_int_equal(kiln_gemm(ctx, &p, FAKE(0x51)), KILN_OK);
        }
        assert_true(fake_last.args.sched_slot > 0);
        assert_int_equal(fake_last.args.workspace != NULL, calls[i].cut);
        assert_int_equal(fake_last.grid, calls[i].grid);
    }
    ctx->split_ws = 0;
    assert_int_equal(kiln_gemm(ctx, &p, FAKE(0x51)), KILN_OK);
    assert_null(fake_last.args.workspace);
    fake_context_free(ctx);
}

/* The split workspace's driver calls, counted; fake_alloc_fails makes the
 * allocation fail. */
static int ws_allocs, fake_alloc_fails;

static CUresult fake_split_global(CUdeviceptr *ptr, size_t *bytes, CUmodule m, const char *name)
{
    (void)m;
    if (strcmp(name, "kiln_split_launch") && strcmp(name, "kiln_sched_ctr")) return CUDA_ERROR_NOT_FOUND;
    *ptr = (CUdeviceptr)0x7b0000000000;
    *bytes = (size_t)KILN_SCHED_SLOTS * 2 * sizeof(unsigned);
    return CUDA_SUCCESS;
}
static CUresult fake_mem_alloc(CUdeviceptr *p, size_t bytes)
{
    (void)bytes;
    ws_allocs++;
    if (fake_alloc_fails) return CUDA_ERROR_OUT_OF_MEMORY;
    *p = (CUdeviceptr)0x7c0000000000;
    return CUDA_SUCCESS;
}
static CUresult fake_mem_free(CUdeviceptr p)
{
    (void)p;
    return CUDA_SUCCESS;
}
static CUresult fake_memset8(CUdeviceptr p, unsigned char v, size_t n, CUstream s)
{
    (void)p, (void)v, (void)n, (void)s;
    return CUDA_SUCCESS;
}
static CUresult fake_htod(CUdeviceptr p, const void *src, size_t n)
{
    (void)p, (void)src, (void)n;
    return CUDA_SUCCESS;
}
static CUresult fake_sync(CUstream s)
{
    (void)s;
    return CUDA_SUCCESS;
}
static CUresult fake_set_attr(CUfunction f, CUfunction_attribute a, int v)
{
    (void)f, (void)a, (void)v;
    return CUDA_SUCCESS;
}

/* A k-cut kernel (k_cluster 4) launches clusters of 4 CTAs, as many as
 * the call's tiles may need (its bound: 2 row tiles x 16 column tiles for
 * one group of 64 tokens) but no more than the device runs at once
 * (clusters.h), or SMs / 4 where that is not known. */
static void test_k_cut_launch(void **state)
{
    (void)state;
    kiln_context *ctx = context(0);
    snprintf(ctx->only_kernel, sizeof ctx->only_kernel, "sm90_fprop_bf16_128x256_kc4");
    kiln_problem p;
    fake_problem(&p, KILN_OP_FPROP, 1, 64, 4096, 14336);
    static const struct { int clusters; unsigned grid; } cases[] = {{30, 120}, {15, 60}, {0, 128}};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        ctx->dev.clusters[1] = cases[i].clusters;
        assert_int_equal(kiln_gemm(ctx, &p, FAKE(0x51)), KILN_OK);
        assert_string_equal(ctx->kernels.kernels[(uintptr_t)fake_last.f - 1].desc.name,
                            "sm90_fprop_bf16_128x256_kc4");
        assert_int_equal(fake_last.cluster, 4);
        assert_int_equal(fake_last.grid, cases[i].grid);
        assert_null(fake_last.args.workspace);
    }
    fake_context_free(ctx);
}

/* kiln tune's context, allowed only cuBLASLt (its reference), is made
 * without the split workspace; preparing a kernel that splits makes it,
 * once, so that the tuner's launches cut as kiln_gemm's do.  A kernel
 * that does not split, KILN_SPLIT=0 or a failed allocation (tried once)
 * leaves the context without one. */
static void test_prepare_makes_split_workspace(void **state)
{
    (void)state;
    static const char splits[] = "\x7f" "ELF\0kiln_sched_ctr\0kiln_split_launch\0";
    static const char whole[] = "\x7f" "ELF\0kiln_sched_ctr\0";
    static const struct { int split, fails; const char *image; size_t size; int allocs, ws; } cases[] = {
        {1, 0, whole, sizeof whole, 0, 0},
        {1, 0, splits, sizeof splits, 1, 1},
        {0, 0, splits, sizeof splits, 0, 0},
        {1, 1, splits, sizeof splits, 1, 0}};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        kiln_context *ctx = context(1);
        ctx->allowed = KILN_ALLOW_CUBLASLT;
        ctx->split = cases[i].split;
        ctx->drv.cuStreamIsCapturing = fake_is_capturing;
        ctx->drv.cuModuleGetGlobal = fake_split_global;
        ctx->drv.cuMemAlloc = fake_mem_alloc;
        ctx->drv.cuMemFree = fake_mem_free;
        ctx->drv.cuMemsetD8Async = fake_memset8;
        ctx->drv.cuMemcpyHtoD = fake_htod;
        ctx->drv.cuStreamSynchronize = fake_sync;
        ctx->drv.cuFuncSetAttribute = fake_set_attr;
        ws_allocs = 0;
        fake_alloc_fails = cases[i].fails;
        kiln_rt_kernel *k = NULL;
        for (size_t j = 0; j < ctx->kernels.n_kernels; j++)
            if (!strcmp(ctx->kernels.kernels[j].desc.name, "sm90_fprop_bf16_128x256")) k = &ctx->kernels.kernels[j];
        assert_non_null(k);
        kiln_error err;
        kiln_error_clear(&err);
        for (int twice = 0; twice < 2; twice++)
            assert_int_equal(kiln_launch_prepare(ctx, k, cases[i].image, cases[i].size, &err), KILN_OK);
        assert_int_equal(ws_allocs, cases[i].allocs);
        assert_int_equal(ctx->split_ws != 0, cases[i].ws);
        /* one group of 64 tokens, 16 tiles of a 224-k-block walk: cut where
         * the workspace is there */
        kiln_problem p;
        fake_problem(&p, KILN_OP_FPROP, 1, 64, 4096, 14336);
        assert_int_equal(kiln_launch_generated(ctx, k, &p, FAKE(0x51), &err), KILN_OK);
        assert_int_equal(fake_last.args.workspace != NULL, cases[i].ws);
        assert_int_equal(fake_last.grid, cases[i].ws ? 132u : 32u); /* (1 + 1) row tiles x 16 */
        if (ctx->split_ws) ctx->drv.cuMemFree(ctx->split_ws);
        fake_context_free(ctx);
    }
    fake_alloc_fails = 0;
}

/* name=value in the environment: kiln_context_create refuses it with the
 * message "name=value: expected ..." (read before the driver is loaded). */
static void expect_refused(const char *name, const char *value, const char *expected)
{
    setenv(name, value, 1);
    kiln_context *ctx = NULL;
    assert_int_equal(kiln_context_create(NULL, &ctx), KILN_ERROR_INVALID_ARGUMENT);
    char want[128];
    snprintf(want, sizeof want, "%s=%s: expected %s", name, value, expected);
    assert_string_equal(kiln_last_error(ctx), want);
    kiln_context_destroy(ctx);
    unsetenv(name);
}

/* KILN_HOST_CACHE: 0 off, 1 or unset on; KILN_PDL: 1 on, 0 or unset off;
 * anything else refused (read before the driver is loaded, so this runs
 * without one). */
static void test_env(void **state)
{
    (void)state;
    static const struct { const char *v; int on; } cases[] = {
        {NULL, 1}, {"1", 1}, {"", 1}, {"0", 0}};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        if (cases[i].v) {
            setenv("KILN_HOST_CACHE", cases[i].v, 1);
            setenv("KILN_PDL", cases[i].v, 1);
        } else {
            unsetenv("KILN_HOST_CACHE");
            unsetenv("KILN_PDL");
        }
        kiln_context *ctx = NULL;
        kiln_context_create(NULL, &ctx); /* fails here at the driver; the caches are made before */
        assert_non_null(ctx);
        assert_int_equal(ctx->memo != NULL, cases[i].on);
        assert_int_equal(ctx->tmaps != NULL, cases[i].on);
        assert_int_equal(ctx->pdl, cases[i].v && !strcmp(cases[i].v, "1"));
        kiln_context_destroy(ctx);
    }
    unsetenv("KILN_PDL");
    static const char *const names[] = {"KILN_HOST_CACHE", "KILN_PDL", "KILN_SPLIT"};
    for (int i = 0; i < 3; i++) expect_refused(names[i], "yes", "0 or 1");
}

/* KILN_SPLIT: the workspace unless 0; KILN_SPLIT_MIN: the split's
 * threshold in thousandths, 0 to 1000, anything else refused by name. */
static void test_split_env(void **state)
{
    (void)state;
    static const struct { const char *split, *min; int on, thousandths; } ok[] = {
        {NULL, NULL, 1, 0}, {"0", "25", 0, 25}, {"1", "1000", 1, 1000}, {"", "0", 1, 0}};
    for (size_t i = 0; i < sizeof ok / sizeof ok[0]; i++) {
        if (ok[i].split) setenv("KILN_SPLIT", ok[i].split, 1);
        else unsetenv("KILN_SPLIT");
        if (ok[i].min) setenv("KILN_SPLIT_MIN", ok[i].min, 1);
        else unsetenv("KILN_SPLIT_MIN");
        kiln_context *ctx = NULL;
        kiln_context_create(NULL, &ctx); /* fails here at the driver, after the environment */
        assert_non_null(ctx);
        assert_int_equal(ctx->split, ok[i].on);
        assert_int_equal(ctx->split_min, ok[i].thousandths);
        kiln_context_destroy(ctx);
    }
    unsetenv("KILN_SPLIT");
    static const char *const bad[] = {"1001", "-1", "x", "12x", "99999999999999999999"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        expect_refused("KILN_SPLIT_MIN", bad[i], "thousandths from 0 to 1000");
}

KILN_TEST_MAIN(cmocka_unit_test(test_caches_change_nothing),
               cmocka_unit_test(test_repeat_encodes_nothing),
               cmocka_unit_test(test_pdl),
               cmocka_unit_test(test_split_only_where_it_may_cut),
               cmocka_unit_test(test_k_cut_launch),
               cmocka_unit_test(test_prepare_makes_split_workspace),
               cmocka_unit_test(test_pointer_array_weights),
               cmocka_unit_test(test_wgrad_dw_in_chunks),
               cmocka_unit_test(test_wgrad_discrete_dw_in_chunks),
               cmocka_unit_test(test_sched_slot_table),
               cmocka_unit_test(test_sched_slot_launch),
               cmocka_unit_test(test_sched_counters_at_load),
               cmocka_unit_test(test_env),
               cmocka_unit_test(test_split_env))
