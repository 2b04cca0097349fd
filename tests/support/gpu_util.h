/*
 * gpu_util.h — helpers of the GPU tests (header-only; each test includes it
 * once): the driver through kiln's own loader, device buffers, 16-bit
 * conversions, random data, poisoning, and a CPU double-precision reference
 * of every op with the full epilogue.
 *
 * Test data are multiples of 1/256 in [-1, 1], exact in bf16, fp16 and f32,
 * so the reference sees exactly what the GPU sees and the only error is the
 * GPU's own (accumulation order, rounding of the output).
 */
#ifndef KILN_GPU_UTIL_H
#define KILN_GPU_UTIL_H

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "driver.h"
#include "kernel_desc.h"
#include "kiln.h"
#include "validate.h"

static kiln_driver g_drv;
static CUcontext g_cu;
static CUdevice g_dev;
static uint64_t g_rng;

#define CU(call)                                                                                   \
    do {                                                                                           \
        CUresult r_ = (call);                                                                      \
        if (r_ != CUDA_SUCCESS) {                                                                  \
            const char *n_ = "?";                                                                  \
            g_drv.cuGetErrorName(r_, &n_);                                                         \
            fail_msg("%s:%d: %s failed: %s", __FILE__, __LINE__, #call, n_);                       \
        }                                                                                          \
    } while (0)

/* Loads the driver and makes the primary context of device 0 current.
 * Returns 0, or prints why and returns 77 (ctest's "skipped"). */
static inline int gpu_setup(void)
{
    kiln_error err;
    kiln_error_clear(&err);
    if (kiln_driver_load(&g_drv, &err) != KILN_OK) {
        printf("SKIP: %s\n", err.msg);
        return 77;
    }
    int count = 0;
    if (g_drv.cuDeviceGetCount(&count) != CUDA_SUCCESS || count == 0) {
        printf("SKIP: no CUDA device\n");
        return 77;
    }
    if (g_drv.cuDeviceGet(&g_dev, 0) != CUDA_SUCCESS ||
        g_drv.cuDevicePrimaryCtxRetain(&g_cu, g_dev) != CUDA_SUCCESS ||
        g_drv.cuCtxSetCurrent(g_cu) != CUDA_SUCCESS) {
        printf("SKIP: cannot open device 0\n");
        return 77;
    }
    const char *seed = getenv("KILN_TEST_SEED");
    g_rng = seed ? strtoull(seed, NULL, 0) : ((uint64_t)time(NULL) * 2654435761u) ^ (uint64_t)clock();
    if (!g_rng) g_rng = 1;
    char name[128] = "";
    g_drv.cuDeviceGetName(name, sizeof name, g_dev);
    printf("device: %s; seed KILN_TEST_SEED=0x%llx\n", name, (unsigned long long)g_rng);
    return 0;
}

static inline uint64_t rng_next(void)
{
    g_rng ^= g_rng << 13;
    g_rng ^= g_rng >> 7;
    g_rng ^= g_rng << 17;
    return g_rng;
}

/* Integer in [lo, hi]. */
static inline int rng_int(int lo, int hi) { return lo + (int)(rng_next() % (uint64_t)(hi - lo + 1)); }

/* A multiple of 1/256 in [-1, 1], never all zeros over an array. */
static inline float rng_val(void) { return (float)rng_int(-255, 255) / 256.0f; }

/* ---- 16-bit types --------------------------------------------------- */

static inline uint16_t f32_to_bf16(float f)
{
    uint32_t u;
    memcpy(&u, &f, 4);
    if ((u & 0x7fffffffu) > 0x7f800000u) return 0x7fc0;
    u += 0x7fffu + ((u >> 16) & 1u);
    return (uint16_t)(u >> 16);
}

static inline float bf16_to_f32(uint16_t h)
{
    uint32_t u = (uint32_t)h << 16;
    float f;
    memcpy(&f, &u, 4);
    return f;
}

static inline uint16_t f32_to_f16(float f)
{
    uint32_t u;
    memcpy(&u, &f, 4);
    uint16_t sign = (uint16_t)((u >> 16) & 0x8000u);
    float a = fabsf(f);
    if (a != a) return 0x7e00;
    if (a >= 65520.0f) return sign | 0x7c00;
    if (a < 6.103515625e-05f) { /* subnormal: multiples of 2^-24 */
        return sign | (uint16_t)lrintf(a * 16777216.0f);
    }
    int e;
    float m = frexpf(a, &e); /* a = m * 2^e, m in [0.5, 1) */
    long mant = lrintf(m * 2048.0f); /* 11 bits, rounded to nearest even */
    if (mant == 2048) {
        mant = 1024;
        e++;
    }
    return sign | (uint16_t)(((e + 14) << 10) | (mant & 0x3ff));
}

static inline float f16_to_f32(uint16_t h)
{
    int e = (h >> 10) & 0x1f, m = h & 0x3ff;
    float v;
    if (e == 0) v = ldexpf((float)m, -24);
    else if (e == 31) v = m ? NAN : INFINITY;
    else v = ldexpf((float)(m | 0x400), e - 25);
    return (h & 0x8000) ? -v : v;
}

static inline int dsize(kiln_dtype t) { return t == KILN_DTYPE_F32 ? 4 : 2; }

static inline void store_val(void *buf, size_t i, kiln_dtype t, float v)
{
    if (t == KILN_DTYPE_F32) ((float *)buf)[i] = v;
    else if (t == KILN_DTYPE_BF16) ((uint16_t *)buf)[i] = f32_to_bf16(v);
    else ((uint16_t *)buf)[i] = f32_to_f16(v);
}

static inline float load_val(const void *buf, size_t i, kiln_dtype t)
{
    if (t == KILN_DTYPE_F32) return ((const float *)buf)[i];
    if (t == KILN_DTYPE_BF16) return bf16_to_f32(((const uint16_t *)buf)[i]);
    return f16_to_f32(((const uint16_t *)buf)[i]);
}

/* ---- device buffers ----------------------------------------------- */

static inline CUdeviceptr dev_alloc(size_t bytes)
{
    CUdeviceptr p = 0;
    CU(g_drv.cuMemAlloc(&p, bytes ? bytes : 16));
    return p;
}

static inline void dev_free(CUdeviceptr p)
{
    if (p) g_drv.cuMemFree(p);
}

static inline void upload(CUdeviceptr d, const void *h, size_t bytes)
{
    if (bytes) CU(g_drv.cuMemcpyHtoD(d, h, bytes));
}

static inline void download(void *h, CUdeviceptr d, size_t bytes)
{
    if (bytes) CU(g_drv.cuMemcpyDtoH(h, d, bytes));
}

/* 0xFF bytes: NaN in bf16, fp16 and f32. */
static inline void poison(CUdeviceptr d, size_t bytes) { CU(g_drv.cuMemsetD8(d, 0xFF, bytes)); }

static inline void *xmalloc(size_t n)
{
    void *p = malloc(n ? n : 1);
    if (!p) fail_msg("out of host memory (%zu bytes)", n);
    return p;
}

/* A host matrix of random exact values, encoded as t (rows × ld, cols used). */
static inline float *rand_matrix(int64_t rows, int64_t cols, int64_t ld, kiln_dtype t, void **enc)
{
    float *v = xmalloc((size_t)(rows * ld) * sizeof(float));
    *enc = xmalloc((size_t)(rows * ld) * (size_t)dsize(t));
    for (int64_t i = 0; i < rows * ld; i++) {
        v[i] = (i % ld) < cols ? rng_val() : 0.0f;
        store_val(*enc, (size_t)i, t, v[i]);
    }
    return v;
}

#endif /* KILN_GPU_UTIL_H */
