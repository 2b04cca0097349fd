/* SPDX-License-Identifier: Apache-2.0 */
/* test_gpu_split.c — that a call whose last wave is short splits that
 * wave's reductions along k (templates/sm90_gemm_cut.cuh, SPLIT), on a GPU: on
 * the legacy stream, again and again (the launch state and the workspace's
 * lease come back each time), and replayed from a CUDA graph.  The data make
 * the fp32 sum depend on where the reduction is cut, so the output says
 * whether the kernel cut it, and that KILN_SPLIT=0, a KILN_SPLIT_MIN above
 * the cut's saving and a walk under KILN_SPLIT_MIN_WALK keep the tiles
 * whole.  test_gpu_gemm.c checks
 * split calls on random data against the reference.  Exits 77 without a
 * GPU.
 *
 * fprop, one group of 128 tokens (capacity 160), N = 4 tiles of 256, K =
 * 8192 (128 k-blocks of 64): 4 tiles on the SMs of a Hopper GPU are the
 * whole call's last wave, which the kernel cuts into S pieces (S from its
 * cost model, 2 to 8).  X is all ones; every row of W is 2^24 on k-block 0,
 * -2^24 on the middle k-block and 1/256 elsewhere, so a k-block adds 2^30,
 * -2^30 or 0.25 to a sum (a wgmma step of 16, 1/16), and what is added to
 * 2^30 in fp32 is lost below 64 (its ulp there is 128):
 *   whole tiles:  2^30, blocks 1-63 lost, -2^30 gives 0, blocks 65-127: 15.75
 *   S pieces: each piece's sum, then the pieces added in k order, e.g.
 *   S = 8:  2^30 | 4 | 4 | 4 | -2^30 | 4 | 4 | 4  gives 12
 * probe_sum works out each S's value the same way in fp32.  The same call
 * with K = 2048 (a walk of 32 k-blocks, under KILN_SPLIT_MIN_WALK) keeps
 * its tiles whole (3.75): such cuts measured slower than whole tiles.
 *
 * The pieces share the finishing sums out (kiln_split_finish); a piece waits
 * for its tile's others only when they have all started.  The split call is
 * made again while a hog kernel on another stream holds all but a few SMs,
 * so the pieces start a few at a time: some leave their parts to the last
 * to arrive.  The call must give the same values, take at least twice its
 * time on free SMs (else its CTAs were all resident after all; H200: 0.28
 * and 2.4 ms beside the hog, 0.053 ms free), and end before
 * the hog does: on the few free SMs, so no piece waited for one that had
 * not started.
 */
#define _POSIX_C_SOURCE 200809L
#include <time.h>

#include "testutil.h"

#include "gpu_util.h"
#include "half.h"

enum { TOKENS = 128, CAP = 160, N = 1024, K = 8192, K_SHORT = 2048 };
static const char k_kernel[] = "sm90_fprop_bf16_128x256";

typedef struct probe {
    CUdeviceptr x, w, y, sizes;
    int kb;   /* k-blocks of the reduction */
    kiln_problem p;
} probe;

static void probe_init(probe *c, int64_t depth)
{
    const int64_t KB = depth / 64;
    c->kb = (int)KB;
    uint16_t *x = xmalloc((size_t)CAP * depth * 2), *w = xmalloc((size_t)N * depth * 2);
    for (size_t i = 0; i < (size_t)CAP * depth; i++) x[i] = kiln_f32_to_bf16(1.0f);
    for (int64_t n = 0; n < N; n++)
        for (int64_t k = 0; k < depth; k++) {
            const int64_t kb = k / 64;
            const float v = kb == 0 ? 16777216.0f : kb == KB / 2 ? -16777216.0f : 1.0f / 256;
            w[n * depth + k] = kiln_f32_to_bf16(v);
        }
    const int32_t count = TOKENS;
    c->x = dev_copy(x, (size_t)CAP * depth * 2);
    c->w = dev_copy(w, (size_t)N * depth * 2);
    c->sizes = dev_copy(&count, sizeof count);
    c->y = dev_alloc((size_t)CAP * N * 2);
    free(x);
    free(w);
    kts_problem_init(&c->p, KILN_OP_FPROP, 1, N, depth, CAP, c->sizes, c->x, c->w, c->y);
}

/* What one output element holds in fp32 when a reduction of KB k-blocks
 * is cut into S pieces (S = 1: whole) as the kernel cuts it, piece j's
 * k-blocks from j * KB / S: each k-block's four wgmma steps added to the
 * piece's sum, then the pieces' sums added in k order. */
static float probe_sum(int S, int KB)
{
    volatile float total = 0;   /* volatile: every add rounded to fp32 */
    for (int j = 0; j < S; j++) {
        volatile float part = 0;
        for (int kb = j * KB / S; kb < (j + 1) * KB / S; kb++)
            for (int step = 0; step < 4; step++)
                part += kb == 0 ? 268435456.0f : kb == KB / 2 ? -268435456.0f : 1.0f / 16;
        total = j ? total + part : part;
    }
    return total;
}

/* The output after a call: every valid element `want`, every byte of the
 * rows past the tokens still poison. */
static void probe_check(const probe *c, float want, const char *what)
{
    uint16_t *y = xmalloc((size_t)CAP * N * 2);
    download(y, c->y, (size_t)CAP * N * 2);
    size_t wrong = 0;
    float first = 0;
    for (size_t i = 0; i < (size_t)TOKENS * N; i++) {
        const float v = kiln_bf16_to_f32(y[i]);
        if (v != want && !wrong++) first = v;
    }
    const int64_t past = kts_first_unpoisoned(y, (size_t)TOKENS * N * 2, (size_t)CAP * N * 2);
    free(y);
    printf("  %-44s %zu of %d elements not %g%s\n", what, wrong, TOKENS * N, want,
           past >= 0 ? ", a row past the tokens written" : "");
    if (wrong) fail_msg("%s: %zu elements are not %g (the first: %g)", what, wrong, want, first);
    if (past >= 0) fail_msg("%s: byte %lld, past the tokens' rows, was written", what, (long long)past);
}

/* A context serving every call with k_kernel, made with KILN_SPLIT and
 * KILN_SPLIT_MIN set to split and min (NULL: unset). */
static kiln_context *probe_context(const char *split, const char *min)
{
    setenv("KILN_KERNEL", k_kernel, 1);
    if (split) setenv("KILN_SPLIT", split, 1);
    if (min) setenv("KILN_SPLIT_MIN", min, 1);
    kiln_context_options o;
    kiln_context_options_init(&o);
    o.allowed_backends = KILN_ALLOW_GENERATED;
    kiln_context *ctx = NULL;
    kiln_status st = kiln_context_create(&o, &ctx);
    unsetenv("KILN_KERNEL");
    unsetenv("KILN_SPLIT");
    unsetenv("KILN_SPLIT_MIN");
    if (st != KILN_OK) fail_msg("kiln_context_create: %s", kiln_last_error(ctx));
    return ctx;
}

static void probe_call(kiln_context *ctx, const probe *c, float want, const char *what)
{
    poison(c->y, (size_t)CAP * N * 2);
    kiln_call_report rep;
    int failures = 0;
    if (!gpu_gemm_case(ctx, &c->p, what, &failures, &rep)) fail_msg("%s: the call failed", what);
    if (strcmp(rep.kernel, k_kernel)) fail_msg("%s: ran %s, wanted %s", what, rep.kernel, k_kernel);
    probe_check(c, want, what);
}

/* The first split call on ctx: which S the kernel took, by the value of
 * the first element (whole tiles give another) */
static int probe_cut(kiln_context *ctx, const probe *c)
{
    poison(c->y, (size_t)CAP * N * 2);
    kiln_call_report rep;
    int failures = 0;
    if (!gpu_gemm_case(ctx, &c->p, "split", &failures, &rep)) fail_msg("split: the call failed");
    uint16_t first;
    download(&first, c->y, sizeof first);
    const float got = kiln_bf16_to_f32(first);
    int S = 0;
    for (int s = 2; s <= 8 && !S; s++)
        if (probe_sum(s, c->kb) == got && probe_sum(s, c->kb) != probe_sum(1, c->kb)) S = s;
    printf("  the first element %g: a cut into %d pieces (or more) gives it\n", got, S);
    if (!S) fail_msg("split: the first element is %g, which no cut into 2 to 8 pieces gives", got);
    return S;
}

static void test_split_probe(void **state)
{
    (void)state;
    if (gpu_num_sms() < 16) skip();   /* 4 tiles in fewer than 4 pieces each */
    probe c;
    probe_init(&c, K);

    const float whole_sum = probe_sum(1, c.kb);
    assert_true(whole_sum == 15.75f);
    kiln_context *whole = probe_context("0", NULL);
    probe_call(whole, &c, whole_sum, "KILN_SPLIT=0: whole tiles");
    kiln_context_destroy(whole);
    /* a threshold of the whole walk: no cut saves that much */
    whole = probe_context(NULL, "1000");
    probe_call(whole, &c, whole_sum, "KILN_SPLIT_MIN=1000: whole tiles");
    kiln_context_destroy(whole);

    kiln_context *ctx = probe_context(NULL, NULL);
    const float split_sum = probe_sum(probe_cut(ctx, &c), c.kb);
    char what[64];
    for (int i = 1; i <= 3; i++) {
        snprintf(what, sizeof what, "split, call %d on the legacy stream", i);
        probe_call(ctx, &c, split_sum, what);
    }

    /* captured once, replayed three times: its own launch state, reset by
     * each replay's last CTA, and the lease given back each time */
    CUstream s;
    CU(g_drv.cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
    CU(g_drv.cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_GLOBAL));
    kiln_status st = kiln_gemm(ctx, &c.p, s);
    CUgraphExec exec;
    CUgraph graph = graph_end_capture(s, st, ctx, "the probe", &exec);
    for (int i = 1; i <= 3; i++) {
        poison(c.y, (size_t)CAP * N * 2);
        graph_replay(exec, s);
        snprintf(what, sizeof what, "split, graph replay %d", i);
        probe_check(&c, split_sum, what);
    }
    graph_destroy(exec, graph, s);
    /* and a plain call after the graph's */
    probe_call(ctx, &c, split_sum, "split, a call after the replays");
    kiln_context_destroy(ctx);
    /* a threshold below the cut's saving (about 94 of the walk's 128
     * k-blocks with the shipped cost model): the same cut */
    ctx = probe_context(NULL, "300");
    probe_call(ctx, &c, split_sum, "KILN_SPLIT_MIN=300: the same cut");
    kiln_context_destroy(ctx);
    DEV_FREE_ALL(c.x, c.w, c.y, c.sizes);
}

/* The hog: one warp a CTA, its launch reserving 48 KiB of shared memory
 * (so an SM holding one has no room for a CTA of the 128x256 kernel, 217
 * KiB), spinning until the global timer passes its start by `ns`. */
static const char k_hog_ptx[] = ".version 8.0\n.target sm_90\n.address_size 64\n"
                                ".visible .entry hog(.param .u64 ns)\n{\n"
                                "  .reg .u64 %t<3>;\n  .reg .pred %p;\n"
                                "  ld.param.u64 %t1, [ns];\n"
                                "  mov.u64 %t0, %globaltimer;\n"
                                "  add.u64 %t1, %t1, %t0;\n"
                                "SPIN:\n  mov.u64 %t2, %globaltimer;\n"
                                "  setp.lt.u64 %p, %t2, %t1;\n"
                                "  @%p bra SPIN;\n  ret;\n}\n";
enum { HOG_SMEM = 48 * 1024, HOG_FREE_SMS = 4 };
static const uint64_t k_hog_ns = 20000000;   /* 20 ms, against the call's ~0.1 ms */

/* kiln_gemm of c on stream s, from event `from`: the ms to its end */
static float timed_call(kiln_context *ctx, const probe *c, CUstream s, CUevent from, CUevent done,
                        const char *what)
{
    const kiln_status st = kiln_gemm(ctx, &c->p, s);
    if (st != KILN_OK) fail_msg("%s: kiln_gemm: %s", what, kiln_last_error(ctx));
    CU(g_drv.cuEventRecord(done, s));
    CU(g_drv.cuEventSynchronize(done));
    float ms;
    CU(g_drv.cuEventElapsedTime(&ms, from, done));
    return ms;
}

static void test_split_not_resident(void **state)
{
    (void)state;
    if (gpu_num_sms() < 16) skip();
    probe c;
    probe_init(&c, K);
    kiln_context *ctx = probe_context(NULL, NULL);
    const float want = probe_sum(probe_cut(ctx, &c), c.kb);   /* the cut's, with the SMs free */

    CUmodule mod;
    CUfunction hog;
    CU(g_drv.cuModuleLoadData(&mod, k_hog_ptx));
    CU(g_drv.cuModuleGetFunction(&hog, mod, "hog"));
    CUstream sh, sk;
    CU(g_drv.cuStreamCreate(&sh, CU_STREAM_NON_BLOCKING));
    CU(g_drv.cuStreamCreate(&sk, CU_STREAM_NON_BLOCKING));
    CUevent start, call_start, hog_done, call_done;
    CU(g_drv.cuEventCreate(&start, CU_EVENT_DEFAULT));
    CU(g_drv.cuEventCreate(&call_start, CU_EVENT_DEFAULT));
    CU(g_drv.cuEventCreate(&hog_done, CU_EVENT_DEFAULT));
    CU(g_drv.cuEventCreate(&call_done, CU_EVENT_DEFAULT));
    CU(g_drv.cuEventRecord(start, sk));
    const float alone_ms = timed_call(ctx, &c, sk, start, call_done, "split on free SMs");

    poison(c.y, (size_t)CAP * N * 2);
    uint64_t ns = k_hog_ns;
    void *params[] = {&ns};
    CU(g_drv.cuEventRecord(start, sh));
    CU(g_drv.cuLaunchKernel(hog, (unsigned)(gpu_num_sms() - HOG_FREE_SMS), 1, 1, 32, 1, 1, HOG_SMEM, sh,
                            params, NULL));
    CU(g_drv.cuEventRecord(hog_done, sh));
    /* the hog's CTAs are on their SMs before the call's come */
    nanosleep(&(struct timespec){.tv_sec = 0, .tv_nsec = 2000000}, NULL);
    CU(g_drv.cuEventRecord(call_start, sk));
    const float beside_ms = timed_call(ctx, &c, sk, call_start, call_done, "split beside the hog");
    CU(g_drv.cuEventSynchronize(hog_done));
    float hog_ms, call_end_ms;
    CU(g_drv.cuEventElapsedTime(&hog_ms, start, hog_done));
    CU(g_drv.cuEventElapsedTime(&call_end_ms, start, call_done));
    printf("  the call took %.3f ms on free SMs, %.3f ms beside the hog; it ended at %.3f ms, the hog at "
           "%.3f ms\n",
           alone_ms, beside_ms, call_end_ms, hog_ms);
    probe_check(&c, want, "split beside the hog");
    if (beside_ms < 2 * alone_ms)
        fail_msg("beside the hog the call took %.3f ms, %.3f on free SMs: its CTAs found room", beside_ms,
                 alone_ms);
    if (call_end_ms > hog_ms)
        fail_msg("the call ended after the hog (%.3f > %.3f ms): its pieces waited for SMs the hog held",
                 call_end_ms, hog_ms);
    CU(g_drv.cuEventDestroy(start));
    CU(g_drv.cuEventDestroy(call_start));
    CU(g_drv.cuEventDestroy(hog_done));
    CU(g_drv.cuEventDestroy(call_done));
    CU(g_drv.cuStreamDestroy(sh));
    CU(g_drv.cuStreamDestroy(sk));
    CU(g_drv.cuModuleUnload(mod));
    /* and a call with the SMs free again: the lease and the words are back */
    probe_call(ctx, &c, want, "split, a call after the hog's");
    kiln_context_destroy(ctx);
    DEV_FREE_ALL(c.x, c.w, c.y, c.sizes);
}

/* The same 4 tiles with a reduction of 32 k-blocks: a walk under
 * KILN_SPLIT_MIN_WALK, kept whole by the default context (the rule before
 * the eightieth session cut it in 4, which gives 2). */
static void test_short_walk_whole(void **state)
{
    (void)state;
    if (gpu_num_sms() < 16) skip();
    probe c;
    probe_init(&c, K_SHORT);
    const float whole_sum = probe_sum(1, c.kb);
    assert_true(whole_sum == 3.75f && probe_sum(4, c.kb) == 2.0f);
    kiln_context *ctx = probe_context(NULL, NULL);
    probe_call(ctx, &c, whole_sum, "a 32-k-block walk: whole tiles");
    kiln_context_destroy(ctx);
    DEV_FREE_ALL(c.x, c.w, c.y, c.sizes);
}

int main(void)
{
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_split_probe),
                                       cmocka_unit_test(test_split_not_resident),
                                       cmocka_unit_test(test_short_walk_whole)};
    return gpu_run_group_tests(tests);
}
