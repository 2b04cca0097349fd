/* SPDX-License-Identifier: Apache-2.0 */
/* gpu_support.c — see gpu_support.h. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gpu_support.h"
#include "half.h"

int kts_gpu_open(kts_gpu *g, char *why, size_t size)
{
    memset(g, 0, sizeof *g);
    kiln_error err;
    kiln_error_clear(&err);
    if (kiln_driver_load(&g->drv, &err) != KILN_OK) {
        snprintf(why, size, "%s", err.msg);
        return -1;
    }
    int count = 0;
    if (g->drv.cuDeviceGetCount(&count) != CUDA_SUCCESS || count == 0) {
        snprintf(why, size, "no CUDA device");
        return -1;
    }
    if (g->drv.cuDeviceGet(&g->dev, 0) != CUDA_SUCCESS ||
        g->drv.cuDevicePrimaryCtxRetain(&g->cu, g->dev) != CUDA_SUCCESS ||
        g->drv.cuCtxSetCurrent(g->cu) != CUDA_SUCCESS) {
        snprintf(why, size, "cannot open device 0");
        return -1;
    }
    g->drv.cuDeviceGetName(g->name, sizeof g->name, g->dev);
    return 0;
}

const char *kts_cu_error(const kiln_driver *d, CUresult r)
{
    const char *name = "?";
    if (r == CUDA_SUCCESS) return NULL;
    if (d->cuGetErrorName) d->cuGetErrorName(r, &name);
    return name;
}

void kts_problem_init(kiln_problem *p, kiln_op op, int groups, int64_t n, int64_t k,
                      int64_t capacity, CUdeviceptr sizes, CUdeviceptr a, CUdeviceptr b,
                      CUdeviceptr out)
{
    kiln_problem_init(p, op);
    p->groups = groups;
    p->n = n;
    p->k = k;
    p->capacity = capacity;
    p->d_sizes = (const int32_t *)(uintptr_t)sizes;
    p->d_a = (const void *)(uintptr_t)a;
    p->d_b = (const void *)(uintptr_t)b;
    p->d_out = (void *)(uintptr_t)out;
}

uint64_t kts_rng_next(uint64_t *s)
{
    *s ^= *s << 13;
    *s ^= *s >> 7;
    *s ^= *s << 17;
    return *s;
}

int kts_rng_int(uint64_t *s, int lo, int hi)
{
    return lo + (int)(kts_rng_next(s) % (uint64_t)(hi - lo + 1));
}

float kts_rng_exact(uint64_t *s) { return (float)kts_rng_int(s, -255, 255) / 256.0f; }

float kts_rng_normal(uint64_t *s)
{
    uint32_t a = (uint32_t)(kts_rng_next(s) >> 16), b = (uint32_t)(kts_rng_next(s) >> 16);
    float u = (float)(a & 0xffff) + (float)(a >> 16) + (float)(b & 0xffff) + (float)(b >> 16);
    return (u / 65536.0f - 2.0f) * 1.732f;
}

void kts_fill(uint64_t *s, void *dst, kiln_dtype t, size_t n, float lo, float hi)
{
    int steps = (int)((hi - lo) * 256.0f);
    for (size_t i = 0; i < n; i++) kts_store(dst, i, t, lo + (float)kts_rng_int(s, 0, steps) / 256.0f);
}

void kts_store(void *buf, size_t i, kiln_dtype t, float v)
{
    if (t == KILN_DTYPE_F32) ((float *)buf)[i] = v;
    else if (t == KILN_DTYPE_BF16) ((uint16_t *)buf)[i] = kiln_f32_to_bf16(v);
    else if (t == KILN_DTYPE_E4M3) ((uint8_t *)buf)[i] = kiln_f32_to_e4m3(v);
    else if (t == KILN_DTYPE_E5M2) ((uint8_t *)buf)[i] = kiln_f32_to_e5m2(v);
    else ((uint16_t *)buf)[i] = kiln_f32_to_f16(v);
}

float kts_load(const void *buf, size_t i, kiln_dtype t)
{
    if (t == KILN_DTYPE_F32) return ((const float *)buf)[i];
    if (t == KILN_DTYPE_BF16) return kiln_bf16_to_f32(((const uint16_t *)buf)[i]);
    if (t == KILN_DTYPE_F16) return kiln_f16_to_f32(((const uint16_t *)buf)[i]);
    if (t == KILN_DTYPE_E4M3) return kiln_e4m3_to_f32(((const uint8_t *)buf)[i]);
    if (t == KILN_DTYPE_E5M2) return kiln_e5m2_to_f32(((const uint8_t *)buf)[i]);
    return NAN;
}

float *kts_rand_matrix(uint64_t *s, int64_t rows, int64_t cols, int64_t ld, kiln_dtype t, void **enc)
{
    size_t n = (size_t)(rows * ld);
    float *v = malloc((n ? n : 1) * sizeof(float));
    *enc = malloc((n ? n : 1) * (size_t)kiln_dtype_size(t));
    if (!v || !*enc) {
        free(v);
        free(*enc);
        *enc = NULL;
        return NULL;
    }
    for (size_t i = 0; i < n; i++) {
        v[i] = (int64_t)(i % (size_t)ld) < cols ? kts_rng_exact(s) : 0.0f;
        kts_store(*enc, i, t, v[i]);
    }
    return v;
}

int64_t kts_group_rows(const int32_t *counts, int groups, int64_t capacity, int64_t *start,
                       int64_t *rows)
{
    int64_t total = 0;
    for (int g = 0; g < groups; g++) {
        start[g] = total;
        int64_t end = total + counts[g], e = end < capacity ? end : capacity;
        rows[g] = e > total ? e - total : 0;
        total = end;
    }
    return total;
}

int64_t kts_out_cols(const kts_problem *p) { return p->op == KILN_OP_FPROP ? p->n : p->k; }

/* Σ x[i*xs] * y[i*ys] over i < n, in double, in 8 running sums: one sum
 * waits on each add's latency, and the reference of a 14336-deep case took
 * most of a GPU test's time.  The order changes nothing a test can see: the
 * products of the tests' inputs (multiples of 1/256, or their few scales)
 * add up exactly or within double's rounding, far below any tolerance. */
static double kts_dot(const float *x, int64_t xs, const float *y, int64_t ys, int64_t n)
{
    double s[8] = {0};
    int64_t i = 0;
    for (; i + 8 <= n; i += 8)
        for (int u = 0; u < 8; u++) s[u] += (double)x[(i + u) * xs] * y[(i + u) * ys];
    for (; i < n; i++) s[0] += (double)x[i * xs] * y[i * ys];
    return ((s[0] + s[1]) + (s[2] + s[3])) + ((s[4] + s[5]) + (s[6] + s[7]));
}

float *kts_transpose_b(const float *b, int groups, int64_t n, int64_t k)
{
    const size_t count = (size_t)(groups * n * k);
    float *t = malloc((count ? count : 1) * sizeof(float));
    if (!t) return NULL;
    for (int g = 0; g < groups; g++)
        for (int64_t r = 0; r < n; r++)
            for (int64_t c = 0; c < k; c++) t[((int64_t)g * k + c) * n + r] = b[((int64_t)g * n + r) * k + c];
    return t;
}

double kts_reference(const kts_problem *p, int g, int64_t i, int64_t j)
{
    const int64_t N = p->n, K = p->k, lda = p->lda ? p->lda : (p->op == KILN_OP_FPROP ? K : N);
    if (p->op == KILN_OP_WGRAD) {
        const int64_t t0 = p->start[g];
        const double acc = kts_dot(p->a + t0 * lda + i, lda, p->b + t0 * K + j, K, p->rows[g]);
        return acc + (p->init ? p->init[((int64_t)g * N + i) * p->ldd + j] : 0.0);
    }
    const int64_t row = p->start[g] + i, ocols = kts_out_cols(p);
    const double acc = p->op == KILN_OP_FPROP
                           ? kts_dot(p->a + row * lda, 1, p->b + ((int64_t)g * N + j) * K, 1, K)
                           : p->bt ? kts_dot(p->a + row * lda, 1, p->bt + ((int64_t)g * K + j) * N, 1, N)
                                   : kts_dot(p->a + row * lda, 1, p->b + (int64_t)g * N * K + j, K, N);
    double s = p->row_scale ? p->row_scale[row] : 1.0;
    double a = p->alphas ? p->alphas[g] : p->alpha;
    double ref = s * a * acc;
    if (p->bias) ref += (p->scale_bias && p->row_scale ? s : 1.0) * p->bias[g * ocols + j];
    if (p->c) ref += (double)p->beta * p->c[row * ocols + j];
    return ref;
}

void kts_err_add(kts_err *e, double got, double ref)
{
    e->n++;
    if (got != got) {
        e->nan++;
        return;
    }
    e->num += (got - ref) * (got - ref);
    e->den += ref * ref;
}

double kts_err_rel(const kts_err *e)
{
    if (e->nan) return NAN;
    return e->den > 0 ? sqrt(e->num / e->den) : sqrt(e->num);
}

size_t kts_changed_outside(const void *before, const void *after, const unsigned char *valid,
                           size_t n, size_t esize)
{
    const unsigned char *x = before, *y = after;
    size_t changed = 0;
    for (size_t i = 0; i < n; i++)
        if (!valid[i] && memcmp(x + i * esize, y + i * esize, esize)) changed++;
    return changed;
}

int64_t kts_first_unpoisoned(const void *buf, size_t from, size_t bytes)
{
    const unsigned char *p = buf;
    for (size_t i = from; i < bytes; i++)
        if (p[i] != KTS_POISON) return (int64_t)i;
    return -1;
}

CUresult kts_copy_bandwidth(const kiln_driver *d, double *bytes_per_s)
{
    return kts_bandwidths(d, bytes_per_s, NULL);
}

CUresult kts_bandwidths(const kiln_driver *d, double *copy_bps, double *write_bps)
{
    const size_t bytes = (size_t)2 << 30;
    CUdeviceptr a = 0, b = 0;
    CUevent e0 = NULL, e1 = NULL;
    float best = 1e9f, best_w = 1e9f;
    CUresult r = d->cuMemAlloc(&a, bytes);
    if (!r) r = d->cuMemAlloc(&b, bytes);
    if (!r) r = d->cuMemsetD8(a, 1, bytes);
    if (!r) r = d->cuEventCreate(&e0, CU_EVENT_DEFAULT);
    if (!r) r = d->cuEventCreate(&e1, CU_EVENT_DEFAULT);
    /* cuMemcpyDtoD and cuMemsetD8 run on the legacy stream: time them
     * there; the best of 8 after 2 warm-ups */
    for (int i = 0; i < 10 && !r; i++) {
        float ms = 0;
        r = d->cuEventRecord(e0, NULL);
        if (!r) r = d->cuMemcpyDtoD(b, a, bytes);
        if (!r) r = d->cuEventRecord(e1, NULL);
        if (!r) r = d->cuEventSynchronize(e1);
        if (!r) r = d->cuEventElapsedTime(&ms, e0, e1);
        if (!r && i >= 2 && ms < best) best = ms;
        if (!write_bps) continue;
        if (!r) r = d->cuEventRecord(e0, NULL);
        if (!r) r = d->cuMemsetD8(b, 0x3f, bytes);
        if (!r) r = d->cuEventRecord(e1, NULL);
        if (!r) r = d->cuEventSynchronize(e1);
        if (!r) r = d->cuEventElapsedTime(&ms, e0, e1);
        if (!r && i >= 2 && ms < best_w) best_w = ms;
    }
    if (e0) d->cuEventDestroy(e0);
    if (e1) d->cuEventDestroy(e1);
    if (a) d->cuMemFree(a);
    if (b) d->cuMemFree(b);
    *copy_bps = r ? 0 : 2.0 * (double)bytes / (best * 1e-3);
    if (write_bps) *write_bps = r ? 0 : (double)bytes / (best_w * 1e-3);
    return r;
}
