/* SPDX-License-Identifier: Apache-2.0 */
/*
 * quant_bench.c — the bandwidth of kiln_quantize, every kind, bf16 → e4m3.
 *
 * usage: quant_bench [--rows T,K]... [--weights G,N,K]... [--reps N] [--peak GBS]
 *   --rows T,K       activations [T, K]: KILN_QUANT_ROWS and ROWS_1X128, the
 *                    T rows split into 32 groups by device counts
 *                    (default 32768,7168)
 *   --weights G,N,K  weights [G, N, K]: WEIGHTS_128X128, WEIGHTS_TENSOR and
 *                    WEIGHTS_TENSOR_DELAYED (given scales: one pass), with
 *                    and without the transposed copy
 *                    (default 32,4096,7168 and 128,1536,2048)
 *   --reps N         timed calls per row (default 30); the median is shown
 *   --peak GBS       the HBM bandwidth the fractions are of (default 4300,
 *                    an H200's 4.3 TB/s)
 *
 * GB/s counts the bytes a quantizer must move: the input read once, q (and
 * q_t) and the scales written.  WEIGHTS_TENSOR reads its input twice (the
 * group amax, then the quantization): its "moved" column counts that read
 * too.  Each row also shows the fraction of a device-to-device copy's
 * bandwidth, measured here (cuMemcpyDtoD of 2 GiB, read + write).
 * Times are CUDA-event times of one call each, the median of --reps.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gpu_support.h"
#include "half.h"

static kts_gpu gpu;
#define drv (gpu.drv)
static int reps = 30;
static double peak_gbs = 4300.0;
static double copy_gbs;

#define CU(call) KTS_CU_OR_EXIT(&drv, call)

static CUdeviceptr dalloc(size_t bytes)
{
    CUdeviceptr p;
    CU(drv.cuMemAlloc(&p, bytes ? bytes : 16));
    return p;
}

/* bytes of bf16 values of every magnitude: a 16 MiB random pattern copied
 * over the buffer. */
static CUdeviceptr random_bf16(size_t count)
{
    const size_t chunk = (size_t)8 << 20;
    uint16_t *h = malloc(chunk * 2);
    if (!h) exit(1);
    uint64_t s = 0x9E3779B97F4A7C15ull;
    for (size_t i = 0; i < chunk; i++) h[i] = kiln_f32_to_bf16(kts_rng_normal(&s) * 3.0f);
    CUdeviceptr d = dalloc(count * 2);
    for (size_t off = 0; off < count; off += chunk) {
        size_t n = count - off < chunk ? count - off : chunk;
        CU(drv.cuMemcpyHtoD(d + off * 2, h, n * 2));
    }
    free(h);
    return d;
}

static int cmp_float(const void *a, const void *b)
{
    float x = *(const float *)a, y = *(const float *)b;
    return (x > y) - (x < y);
}

/* The median of --reps timed calls, after three untimed ones. */
static double time_ms(kiln_context *ctx, const kiln_quant *q, CUstream s)
{
    for (int i = 0; i < 3; i++)
        if (kiln_quantize(ctx, q, s) != KILN_OK) {
            fprintf(stderr, "kiln_quantize: %s\n", kiln_last_error(ctx));
            exit(1);
        }
    CUevent e0, e1;
    CU(drv.cuEventCreate(&e0, CU_EVENT_DEFAULT));
    CU(drv.cuEventCreate(&e1, CU_EVENT_DEFAULT));
    float *ms = calloc((size_t)reps, sizeof *ms);
    if (!ms) exit(1);
    for (int i = 0; i < reps; i++) {
        CU(drv.cuEventRecord(e0, s));
        kiln_quantize(ctx, q, s);
        CU(drv.cuEventRecord(e1, s));
        CU(drv.cuEventSynchronize(e1));
        CU(drv.cuEventElapsedTime(&ms[i], e0, e1));
    }
    qsort(ms, (size_t)reps, sizeof *ms, cmp_float);
    double med = ms[reps / 2];
    free(ms);
    CU(drv.cuEventDestroy(e0));
    CU(drv.cuEventDestroy(e1));
    return med;
}

static void row(const char *kind, const char *shape, double ms, double useful, double moved)
{
    double gbs = useful / (ms * 1e-3) / 1e9;
    printf("%-26s %-16s %9.3f %9.0f %6.1f%% %6.1f%%", kind, shape, ms, gbs, 100.0 * gbs / peak_gbs,
           100.0 * gbs / copy_gbs);
    if (moved > useful) printf("   moved %5.0f GB/s (%.1f%%)", moved / (ms * 1e-3) / 1e9,
                               100.0 * moved / (ms * 1e-3) / 1e9 / peak_gbs);
    printf("\n");
}

static void bench_rows(kiln_context *ctx, CUstream s, long T, long K)
{
    const int G = 32;
    CUdeviceptr x = random_bf16((size_t)T * K), q = dalloc((size_t)T * K);
    const long kb = (K + 127) / 128;
    CUdeviceptr sc = dalloc((size_t)T * kb * 4), sizes = dalloc(G * 4);
    int32_t m[32];
    for (int g = 0; g < G; g++) m[g] = (int32_t)(T / G + (g < T % G));
    CU(drv.cuMemcpyHtoD(sizes, m, sizeof m));
    char shape[64];
    snprintf(shape, sizeof shape, "%ldx%ld", T, K);
    for (int kind = KILN_QUANT_ROWS; kind <= KILN_QUANT_ROWS_1X128; kind++) {
        kiln_quant qq;
        kiln_quant_init(&qq, (kiln_quant_kind)kind);
        qq.groups = G;
        qq.rows = T;
        qq.cols = K;
        qq.d_sizes = (const int32_t *)(uintptr_t)sizes;
        qq.d_in = (const void *)(uintptr_t)x;
        qq.d_out = (void *)(uintptr_t)q;
        qq.d_scale = (float *)(uintptr_t)sc;
        double bytes = 3.0 * T * K + 4.0 * T * (kind == KILN_QUANT_ROWS ? 1 : kb);
        row(kind == KILN_QUANT_ROWS ? "ROWS" : "ROWS_1X128", shape, time_ms(ctx, &qq, s), bytes,
            bytes);
    }
    CU(drv.cuMemFree(x));
    CU(drv.cuMemFree(q));
    CU(drv.cuMemFree(sc));
    CU(drv.cuMemFree(sizes));
}

static void bench_weights(kiln_context *ctx, CUstream s, long G, long N, long K)
{
    const size_t n = (size_t)G * N * K;
    const long tn = (N + 127) / 128, tk = (K + 127) / 128;
    CUdeviceptr w = random_bf16(n), q = dalloc(n), qt = dalloc(n);
    CUdeviceptr sc = dalloc((size_t)G * tn * tk * 4), sct = dalloc((size_t)G * tn * tk * 4);
    CUdeviceptr amax = dalloc((size_t)G * 4);
    /* DELAYED's given scales: about what the random weights' amax (~5.5 σ
     * of N(0, 3²)) would give */
    float *given = malloc((size_t)G * 4);
    if (!given) exit(1);
    for (long g = 0; g < G; g++) given[g] = 16.0f / 448.0f;
    char shape[64];
    snprintf(shape, sizeof shape, "%ldx%ldx%ld", G, N, K);
    for (int kind = KILN_QUANT_WEIGHTS_128X128; kind <= KILN_QUANT_WEIGHTS_TENSOR_DELAYED; kind++)
        for (int t = 1; t >= 0; t--) {
            static const char *const names[] = {"WEIGHTS_128X128", "WEIGHTS_TENSOR",
                                                "WEIGHTS_TENSOR_DELAYED"};
            const int tensor = kind == KILN_QUANT_WEIGHTS_TENSOR;
            const int delayed = kind == KILN_QUANT_WEIGHTS_TENSOR_DELAYED;
            kiln_quant qq;
            kiln_quant_init(&qq, (kiln_quant_kind)kind);
            qq.groups = (int32_t)G;
            qq.rows = N;
            qq.cols = K;
            qq.d_in = (const void *)(uintptr_t)w;
            qq.d_out = (void *)(uintptr_t)q;
            qq.d_scale = (float *)(uintptr_t)sc;
            if (t) qq.d_out_t = (void *)(uintptr_t)qt;
            if (t && !delayed) qq.d_scale_t = (float *)(uintptr_t)sct;
            if (delayed) {
                qq.d_amax = (float *)(uintptr_t)amax;
                CU(drv.cuMemcpyHtoD(sc, given, (size_t)G * 4));
            }
            /* DELAYED: the given scales read, the amax written */
            double scales = delayed  ? 8.0 * G
                            : tensor ? 4.0 * G * (1 + t)
                                     : 4.0 * G * tn * tk * (1 + t);
            double useful = 2.0 * n + (double)n * (1 + t) + scales;
            char name[40];
            snprintf(name, sizeof name, "%s%s", names[kind - KILN_QUANT_WEIGHTS_128X128],
                     t ? " +T" : "");
            row(name, shape, time_ms(ctx, &qq, s), useful, useful + (tensor ? 2.0 * n : 0.0));
        }
    CU(drv.cuMemFree(w));
    CU(drv.cuMemFree(q));
    CU(drv.cuMemFree(qt));
    CU(drv.cuMemFree(sc));
    CU(drv.cuMemFree(sct));
    CU(drv.cuMemFree(amax));
    free(given);
}

#define MAX_SHAPES 16

int main(int argc, char **argv)
{
    long rows[MAX_SHAPES][2], weights[MAX_SHAPES][3];
    int nr = 0, nw = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--rows") && i + 1 < argc && nr < MAX_SHAPES &&
            sscanf(argv[++i], "%ld,%ld", &rows[nr][0], &rows[nr][1]) == 2)
            nr++;
        else if (!strcmp(argv[i], "--weights") && i + 1 < argc && nw < MAX_SHAPES &&
                 sscanf(argv[++i], "%ld,%ld,%ld", &weights[nw][0], &weights[nw][1],
                        &weights[nw][2]) == 3)
            nw++;
        else if (!strcmp(argv[i], "--reps") && i + 1 < argc && (reps = atoi(argv[++i])) > 0)
            continue;
        else if (!strcmp(argv[i], "--peak") && i + 1 < argc && (peak_gbs = atof(argv[++i])) > 0)
            continue;
        else {
            fprintf(stderr, "usage: %s [--rows T,K]... [--weights G,N,K]... [--reps N] "
                            "[--peak GBS]\n", argv[0]);
            return 2;
        }
    }
    if (!nr && !nw) {
        rows[nr][0] = 32768, rows[nr++][1] = 7168;
        weights[nw][0] = 32, weights[nw][1] = 4096, weights[nw++][2] = 7168;
        weights[nw][0] = 128, weights[nw][1] = 1536, weights[nw++][2] = 2048;
    }
    char why[512];
    if (kts_gpu_open(&gpu, why, sizeof why) != 0) {
        printf("SKIP: %s\n", why);
        return 77;
    }
    kiln_context *ctx = NULL;
    if (kiln_context_create(NULL, &ctx) != KILN_OK) {
        fprintf(stderr, "kiln_context_create: %s\n", kiln_last_error(ctx));
        return 1;
    }
    CUstream s;
    CU(drv.cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
    CU(kts_copy_bandwidth(&drv, &copy_gbs));
    copy_gbs /= 1e9;
    printf("%s; device-to-device copy %.0f GB/s; peak taken as %.0f GB/s; median of %d calls\n",
           gpu.name, copy_gbs, peak_gbs, reps);
    printf("%-26s %-16s %9s %9s %7s %7s\n", "kind (bf16 > e4m3)", "shape", "ms", "GB/s", "peak",
           "copy");
    for (int i = 0; i < nr; i++) bench_rows(ctx, s, rows[i][0], rows[i][1]);
    for (int i = 0; i < nw; i++) bench_weights(ctx, s, weights[i][0], weights[i][1], weights[i][2]);
    CU(drv.cuStreamDestroy(s));
    kiln_context_destroy(ctx);
    return 0;
}
