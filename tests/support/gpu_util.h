/* SPDX-License-Identifier: Apache-2.0 */
/*
 * gpu_util.h — the GPU tests' side of kiln_testsupport (library
 * kiln_testgpu): device 0 opened once with skip-with-reason, device buffers,
 * and random data from one printed seed; every failure is a cmocka failure
 * naming the call.  The shared pieces (data, reference, compare, poison)
 * are in gpu_support.h.
 */
#ifndef KILN_GPU_UTIL_H
#define KILN_GPU_UTIL_H

#include <math.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <setjmp.h>
#include <cmocka.h>

#include "gpu_support.h"
#include "half.h"

extern kts_gpu g_gpu;
#define g_drv (g_gpu.drv)
/* The random state: from $KILN_TEST_SEED, else the clock; printed. */
extern uint64_t g_rng;

#define CU(call)                                                                                   \
    do {                                                                                           \
        const char *e_ = kts_cu_error(&g_drv, (call));                                             \
        if (e_) fail_msg("%s:%d: %s failed: %s", __FILE__, __LINE__, #call, e_);                   \
    } while (0)

/* One failing case of a test that runs many: printed and counted in
 * `count`, so that the test goes on and asserts at its end that it added
 * none. */
#define GPU_CASE_FAIL(count, ...)                                                                  \
    do {                                                                                           \
        printf("  FAIL: ");                                                                        \
        printf(__VA_ARGS__);                                                                       \
        printf("\n");                                                                              \
        (count)++;                                                                                 \
    } while (0)

/* Opens device 0 and seeds g_rng.  Returns 0, or prints why and returns 77
 * (ctest's "skipped"). */
int gpu_setup(void);
/* gpu_setup, then a kiln context on it that may use the `allowed`
 * backends (KILN_ALLOW_*; 0: all) into *ctx.  0, 77 (skipped: no GPU), or
 * 1 when the context cannot be made (printed, *ctx destroyed). */
int gpu_setup_context(unsigned allowed, kiln_context **ctx);
/* main's whole job in most GPU tests: gpu_setup, then the tests. */
#define gpu_run_group_tests(tests) \
    (gpu_setup() ? 77 : (kiln_test_filter(), cmocka_run_group_tests(tests, NULL, NULL)))

static inline int rng_int(int lo, int hi) { return kts_rng_int(&g_rng, lo, hi); }
static inline float rng_val(void) { return kts_rng_exact(&g_rng); }

/* The SMs of device 0. */
int gpu_num_sms(void);

CUdeviceptr dev_alloc(size_t bytes);
void dev_free(CUdeviceptr p);
void upload(CUdeviceptr d, const void *h, size_t bytes);
void download(void *h, CUdeviceptr d, size_t bytes);
/* Fills with KTS_POISON bytes. */
void poison(CUdeviceptr d, size_t bytes);
void *xmalloc(size_t n);
/* kts_rand_matrix on g_rng; fails the test when out of memory. */
float *rand_matrix(int64_t rows, int64_t cols, int64_t ld, kiln_dtype t, void **enc);

/* ---- pieces several GPU tests repeated: a device copy of host bytes,
 * freeing lists of buffers, one case's call, ending a CUDA-graph capture,
 * and the main of a test that runs on one shared context. */

/* A device buffer of `bytes` bytes holding a copy of host's. */
CUdeviceptr dev_copy(const void *host, size_t bytes);

/* dev_free of each of the n device buffers; free of each of the n host
 * pointers (NULL and 0 are skipped as dev_free and free skip them). */
void dev_free_n(const CUdeviceptr *bufs, size_t n);
void free_n(void *const *ptrs, size_t n);
/* DEV_FREE_ALL(a, b, ...) and FREE_ALL(p, q, ...): the same for a list,
 * freed in the order given. */
#define DEV_FREE_ALL(...)                                                                          \
    dev_free_n((const CUdeviceptr[]){__VA_ARGS__},                                                 \
               sizeof((const CUdeviceptr[]){__VA_ARGS__}) / sizeof(CUdeviceptr))
#define FREE_ALL(...)                                                                              \
    free_n((void *const[]){__VA_ARGS__}, sizeof((void *const[]){__VA_ARGS__}) / sizeof(void *))

/* One case's call: kiln_gemm(ctx, p, NULL) on the legacy stream; when it
 * returns KILN_OK, a synchronize and the call's report into *rep, and 1.
 * Otherwise 0, the failure counted in *failures (GPU_CASE_FAIL: "<label>:
 * kiln_gemm: <status>: <ctx's error>").  A failing synchronize or report
 * fails the test, naming label. */
int gpu_gemm_case(kiln_context *ctx, const kiln_problem *p, const char *label, int *failures,
                  kiln_call_report *rep);

/* Ends the capture on stream, whose captured call returned st: fails the
 * test ("<what> under capture: <ctx's error>") unless st is KILN_OK, then
 * instantiates the graph into *exec.  Returns the graph. */
CUgraph graph_end_capture(CUstream stream, kiln_status st, kiln_context *ctx, const char *what,
                          CUgraphExec *exec);
/* Launches exec on stream and waits for the stream. */
void graph_replay(CUgraphExec exec, CUstream stream);
/* Destroys exec, graph and stream (their results not checked). */
void graph_destroy(CUgraphExec exec, CUgraph graph, CUstream stream);

/* Runs the tests (KILN_TEST_FILTER applies), then destroys *ctx (the
 * context it holds after them); returns cmocka's result. */
#define gpu_run_tests_then_destroy(tests, ctx)                                                     \
    (kiln_test_filter(), gpu_destroy_after(cmocka_run_group_tests(tests, NULL, NULL), (ctx)))
int gpu_destroy_after(int rc, kiln_context **ctx);

/* The main of a GPU test whose tests share one context *ctx that may use
 * the `allowed` backends (gpu_setup_context; 77 without a GPU):
 * GPU_CONTEXT_MAIN(KILN_ALLOW_GENERATED, &g_ctx, cmocka_unit_test(a), ...). */
#define GPU_CONTEXT_MAIN(allowed, ctx, ...)                                                        \
    int main(void)                                                                                 \
    {                                                                                              \
        int rc = gpu_setup_context((allowed), (ctx));                                              \
        if (rc) return rc;                                                                         \
        const struct CMUnitTest tests[] = {__VA_ARGS__};                                           \
        return gpu_run_tests_then_destroy(tests, (ctx));                                          \
    }

#endif /* KILN_GPU_UTIL_H */
