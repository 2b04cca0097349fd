/* SPDX-License-Identifier: Apache-2.0 */
/* example_basic.c — a grouped GEMM through kiln's C API: fprop, dgrad and
 * wgrad of a small MoE layer on random bf16 data, checked against a CPU
 * reference.  Prints a skip message and exits 0 where there is no GPU.
 *
 * Memory is handled with the CUDA driver API, opened with dlopen by the few
 * lines of cuda_driver.h, so this program needs only kiln.h to build and
 * links nothing but kiln. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cuda_driver.h"
#include "kiln.h"

enum { G = 4, N = 256, K = 128, CAP = 512 };

static uint16_t to_bf16(float f)
{
    uint32_t u;
    memcpy(&u, &f, 4);
    u += 0x7fffu + ((u >> 16) & 1u);
    return (uint16_t)(u >> 16);
}

static float from_bf16(uint16_t h)
{
    uint32_t u = (uint32_t)h << 16;
    float f;
    memcpy(&f, &u, 4);
    return f;
}

/* Random multiples of 1/64 in [-1, 1]: exact in bf16. */
static void fill(float *v, uint16_t *h, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        v[i] = (float)(rand() % 129 - 64) / 64.0f;
        h[i] = to_bf16(v[i]);
    }
}

static double rel_err(const uint16_t *got, const double *ref, size_t n)
{
    double num = 0, den = 0;
    for (size_t i = 0; i < n; i++) {
        double d = from_bf16(got[i]) - ref[i];
        num += d * d;
        den += ref[i] * ref[i];
    }
    return sqrt(num / den);
}

#define CHECK(call)                                                                                \
    do {                                                                                           \
        if ((call) != CUDA_SUCCESS) {                                                              \
            fprintf(stderr, "%s failed\n", #call);                                                 \
            return 1;                                                                              \
        }                                                                                          \
    } while (0)

int main(void)
{
    kiln_context *ctx = NULL;
    if (kiln_context_create(NULL, &ctx) != KILN_OK) {
        printf("skipping: %s\n", kiln_last_error(ctx));
        kiln_context_destroy(ctx);
        return 0;
    }
    /* Our own handle on the driver, for memory, in the context kiln uses
     * (device 0's primary context). */
    cuda_driver cu;
    char why[128];
    if (cuda_driver_open(&cu, why, sizeof why)) {
        fprintf(stderr, "%s\n", why);
        return 1;
    }

    int32_t sizes[G] = {100, 0, 250, 77}; /* tokens routed to each expert */
    int rows = 0;
    for (int g = 0; g < G; g++) rows += sizes[g];
    float *x = malloc(sizeof(float) * CAP * K), *w = malloc(sizeof(float) * G * N * K);
    float *dy = malloc(sizeof(float) * CAP * N);
    uint16_t *hx = malloc(2 * CAP * K), *hw = malloc(2 * G * N * K), *hdy = malloc(2 * CAP * N);
    fill(x, hx, (size_t)CAP * K);
    fill(w, hw, (size_t)G * N * K);
    fill(dy, hdy, (size_t)CAP * N);

    CUdeviceptr d_x, d_w, d_dy, d_y, d_dx, d_dw, d_sizes;
    CHECK(cu.cuMemAlloc(&d_x, 2 * CAP * K));
    CHECK(cu.cuMemAlloc(&d_w, 2 * G * N * K));
    CHECK(cu.cuMemAlloc(&d_dy, 2 * CAP * N));
    CHECK(cu.cuMemAlloc(&d_y, 2 * CAP * N));
    CHECK(cu.cuMemAlloc(&d_dx, 2 * CAP * K));
    CHECK(cu.cuMemAlloc(&d_dw, 2 * G * N * K));
    CHECK(cu.cuMemAlloc(&d_sizes, sizeof sizes));
    CHECK(cu.cuMemcpyHtoD(d_x, hx, 2 * CAP * K));
    CHECK(cu.cuMemcpyHtoD(d_w, hw, 2 * G * N * K));
    CHECK(cu.cuMemcpyHtoD(d_dy, hdy, 2 * CAP * N));
    CHECK(cu.cuMemcpyHtoD(d_sizes, sizes, sizeof sizes));

    /* The three GEMMs of an MoE expert layer. */
    kiln_problem p;
    kiln_problem_init(&p, KILN_OP_FPROP); /* Y = X · Wᵀ per expert */
    p.groups = G;
    p.n = N;
    p.k = K;
    p.capacity = CAP;
    p.d_sizes = (const int32_t *)(uintptr_t)d_sizes;
    p.d_a = (const void *)(uintptr_t)d_x;
    p.d_b = (const void *)(uintptr_t)d_w;
    p.d_out = (void *)(uintptr_t)d_y;
    kiln_status st = kiln_gemm(ctx, &p, NULL);

    kiln_problem q = p; /* dX = dY · W */
    q.op = KILN_OP_DGRAD;
    q.d_a = (const void *)(uintptr_t)d_dy;
    q.d_out = (void *)(uintptr_t)d_dx;
    if (st == KILN_OK) st = kiln_gemm(ctx, &q, NULL);

    kiln_problem r = p; /* dW = dYᵀ · X */
    r.op = KILN_OP_WGRAD;
    r.d_a = (const void *)(uintptr_t)d_dy;
    r.d_b = (const void *)(uintptr_t)d_x;
    r.d_out = (void *)(uintptr_t)d_dw;
    if (st == KILN_OK) st = kiln_gemm(ctx, &r, NULL);
    if (st != KILN_OK) {
        fprintf(stderr, "kiln: %s\n", kiln_last_error(ctx));
        return 1;
    }
    kiln_call_report rep;
    kiln_last_call(ctx, &rep);
    printf("wgrad ran on %s (%s)\n", rep.kernel, rep.reason);

    uint16_t *y = malloc(2 * CAP * N), *dx = malloc(2 * CAP * K), *dw = malloc(2 * G * N * K);
    CHECK(cu.cuCtxSynchronize());
    CHECK(cu.cuMemcpyDtoH(y, d_y, 2 * CAP * N));
    CHECK(cu.cuMemcpyDtoH(dx, d_dx, 2 * CAP * K));
    CHECK(cu.cuMemcpyDtoH(dw, d_dw, 2 * G * N * K));

    double *ry = calloc((size_t)rows * N, sizeof(double)), *rdx = calloc((size_t)rows * K, sizeof(double));
    double *rdw = calloc((size_t)G * N * K, sizeof(double));
    for (int g = 0, r0 = 0; g < G; r0 += sizes[g++])
        for (int i = r0; i < r0 + sizes[g]; i++)
            for (int n = 0; n < N; n++)
                for (int k = 0; k < K; k++) {
                    double wv = w[((size_t)g * N + n) * K + k];
                    ry[(size_t)i * N + n] += x[(size_t)i * K + k] * wv;
                    rdx[(size_t)i * K + k] += dy[(size_t)i * N + n] * wv;
                    rdw[((size_t)g * N + n) * K + k] += dy[(size_t)i * N + n] * x[(size_t)i * K + k];
                }
    double ey = rel_err(y, ry, (size_t)rows * N), edx = rel_err(dx, rdx, (size_t)rows * K);
    double edw = rel_err(dw, rdw, (size_t)G * N * K);
    printf("fprop rel err %.2e, dgrad %.2e, wgrad %.2e (bf16 tolerance 1e-2)\n", ey, edx, edw);
    int ok = ey < 1e-2 && edx < 1e-2 && edw < 1e-2;
    printf("%s\n", ok ? "OK" : "MISMATCH");
    kiln_context_destroy(ctx);
    return ok ? 0 : 1;
}
