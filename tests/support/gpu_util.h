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

CUdeviceptr dev_alloc(size_t bytes);
void dev_free(CUdeviceptr p);
void upload(CUdeviceptr d, const void *h, size_t bytes);
void download(void *h, CUdeviceptr d, size_t bytes);
/* Fills with KTS_POISON bytes. */
void poison(CUdeviceptr d, size_t bytes);
void *xmalloc(size_t n);
/* kts_rand_matrix on g_rng; fails the test when out of memory. */
float *rand_matrix(int64_t rows, int64_t cols, int64_t ld, kiln_dtype t, void **enc);

#endif /* KILN_GPU_UTIL_H */
