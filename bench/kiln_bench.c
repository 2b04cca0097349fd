/*
 * kiln_bench.c — the MoE benchmark suite (bench/cases.tsv, from BENCH.md).
 *
 * Ops: fprop, dgrad, wgrad (bf16 out), and wgrad_acc (dW += ... into an fp32
 * main-grad buffer; its cost over overwrite is printed).
 * For each case and op, in one process: kiln's generated kernel, cuBLASLt as
 * a per-group loop (kiln's cuBLASLt backend), and one dense cuBLASLt GEMM of
 * the same FLOPs (the same backend with one group of all the tokens).  Each
 * result is checked against the cuBLASLt loop before timing (every element,
 * relative error).  bf16 random data (never zeros), 5 warm-ups, CUDA events,
 * the median of --reps timed calls.  A torch._grouped_mm peer measured by
 * bench/torch_peer.py in the same call can be merged in with --peer FILE.
 *
 * usage: kiln_bench [--cases FILE] [--ops fprop,dgrad,wgrad,wgrad_acc] [--only a,b]
 *                   [--reps N] [--json FILE] [--peer FILE] [--untuned]
 *
 * --untuned also times kiln with every tuning table ignored (KILN_TUNING=off),
 * alternating with the tuned context call by call, so the two compare
 * without drift between runs.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "driver.h"
#include "kiln.h"

#define MAX_CASES 32
#define MAX_G 1024

typedef struct bench_case {
    char name[64];
    int groups, tokens_per_group;
    long k, n;
    char dist[16];
} bench_case;

typedef struct peer_row {
    char name[64], op[16];
    double tflops;
} peer_row;

static kiln_driver drv;
static int reps = 30;

#define CU(call)                                                                                   \
    do {                                                                                           \
        CUresult r_ = (call);                                                                      \
        if (r_ != CUDA_SUCCESS) {                                                                  \
            const char *s_ = "?";                                                                  \
            drv.cuGetErrorName(r_, &s_);                                                           \
            fprintf(stderr, "%s:%d: %s failed: %s\n", __FILE__, __LINE__, #call, s_);              \
            exit(1);                                                                               \
        }                                                                                          \
    } while (0)

static int load_cases(const char *path, bench_case *cases)
{
    FILE *f = fopen(path, "r");
    if (!f) {
        perror(path);
        exit(2);
    }
    char line[512];
    int n = 0;
    while (fgets(line, sizeof line, f) && n < MAX_CASES) {
        if (line[0] == '#' || line[0] == '\n') continue;
        bench_case *c = &cases[n];
        if (sscanf(line, "%63s %d %d %ld %ld %15s", c->name, &c->groups, &c->tokens_per_group,
                   &c->k, &c->n, c->dist) == 6)
            n++;
    }
    fclose(f);
    return n;
}

/* Deterministic uniforms in (0, 1) for the random size kinds (xorshift32;
 * bench/torch_peer.py draws the same ones). */
static double sizes_u(uint32_t *x)
{
    *x ^= *x << 13;
    *x ^= *x >> 17;
    *x ^= *x << 5;
    return ((*x >> 8) + 0.5) / 16777216.0;
}

/* Must match bench/torch_peer.py's group_sizes exactly.  Shares, scaled to
 * T = groups * tokens_per_group, the rounding remainder to group 0:
 * skew ~ 1/(g+1)^1.2 with groups 16 and 17 empty; random ~ a uniform
 * integer in [1, 2*tokens_per_group - 1]; dirichlet ~ Gamma(1/2) draws
 * (-ln u1 * cos^2(2 pi u2)), i.e. Dirichlet(1/2) routing. */
static void group_sizes(const bench_case *c, int32_t *m)
{
    long total = (long)c->groups * c->tokens_per_group;
    int skew = !strcmp(c->dist, "skew"), rnd = !strcmp(c->dist, "random"),
        dir = !strcmp(c->dist, "dirichlet");
    if (!skew && !rnd && !dir) {
        for (int g = 0; g < c->groups; g++) m[g] = c->tokens_per_group;
        return;
    }
    double w[MAX_G], s = 0;
    uint32_t x = 0x2545F491u;
    for (int g = 0; g < c->groups; g++) {
        if (skew) {
            w[g] = (g == 16 || g == 17) ? 0.0 : 1.0 / pow(g + 1, 1.2);
        } else if (rnd) {
            w[g] = 1 + (int)(sizes_u(&x) * (2 * c->tokens_per_group - 1));
        } else {
            double u1 = sizes_u(&x), u2 = sizes_u(&x), cs = cos(2 * 3.14159265358979323846 * u2);
            w[g] = -log(u1) * cs * cs;
        }
        s += w[g];
    }
    long sum = 0;
    for (int g = 0; g < c->groups; g++) {
        m[g] = (int32_t)(long)(total * w[g] / s);
        sum += m[g];
    }
    m[0] += (int32_t)(total - sum);
}

/* bf16 with a roughly normal distribution (sum of four uniforms), scaled. */
static uint64_t rng = 0x9E3779B97F4A7C15ull;
static inline uint32_t next_u32(void)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return (uint32_t)(rng >> 16);
}

static uint16_t to_bf16(float f)
{
    uint32_t u;
    memcpy(&u, &f, 4);
    u += 0x7fff + ((u >> 16) & 1);
    return (uint16_t)(u >> 16);
}

static float from_bf16(uint16_t h)
{
    uint32_t u = (uint32_t)h << 16;
    float f;
    memcpy(&f, &u, 4);
    return f;
}

static CUdeviceptr random_bf16(size_t count, float scale)
{
    uint16_t *h = malloc(count * 2);
    if (!h) {
        fprintf(stderr, "out of host memory\n");
        exit(1);
    }
    for (size_t i = 0; i < count; i++) {
        uint32_t a = next_u32(), b = next_u32();
        float u = (float)(a & 0xffff) + (float)(a >> 16) + (float)(b & 0xffff) + (float)(b >> 16);
        float z = (u / 65536.0f - 2.0f) * 1.732f; /* mean 0, variance 1 */
        h[i] = to_bf16(z * scale);
    }
    CUdeviceptr d;
    CU(drv.cuMemAlloc(&d, count * 2));
    CU(drv.cuMemcpyHtoD(d, h, count * 2));
    free(h);
    return d;
}

static int cmp_float(const void *a, const void *b)
{
    float x = *(const float *)a, y = *(const float *)b;
    return (x > y) - (x < y);
}

/* 1 if the comma-separated list holds exactly this name. */
static int has_op(const char *list, const char *name)
{
    size_t n = strlen(name);
    for (const char *p = list; (p = strstr(p, name)); p += n)
        if ((p == list || p[-1] == ',') && (p[n] == ',' || p[n] == '\0')) return 1;
    return 0;
}

/* Fills an fp32 buffer with count bf16 values widened (through the host;
 * setup only). */
static void upload_f32_from_bf16(CUdeviceptr dst, CUdeviceptr src_bf16, size_t count)
{
    uint16_t *h = malloc(count * 2);
    float *f = malloc(count * 4);
    CU(drv.cuMemcpyDtoH(h, src_bf16, count * 2));
    for (size_t i = 0; i < count; i++) f[i] = from_bf16(h[i]);
    CU(drv.cuMemcpyHtoD(dst, f, count * 4));
    free(h);
    free(f);
}

typedef struct runner {
    kiln_context *ctx;
    kiln_problem p;
} runner;

static void call(runner *r, CUstream s)
{
    if (kiln_gemm(r->ctx, &r->p, s) != KILN_OK) {
        fprintf(stderr, "kiln_gemm: %s\n", kiln_last_error(r->ctx));
        exit(1);
    }
}

/* Median milliseconds of one call. */
static double time_call(runner *r, CUstream s)
{
    CUevent a, b;
    CU(drv.cuEventCreate(&a, CU_EVENT_DEFAULT));
    CU(drv.cuEventCreate(&b, CU_EVENT_DEFAULT));
    for (int i = 0; i < 5; i++) call(r, s);
    CU(drv.cuStreamSynchronize(s));
    float *t = calloc((size_t)reps, sizeof *t);
    for (int i = 0; i < reps; i++) {
        CU(drv.cuEventRecord(a, s));
        call(r, s);
        CU(drv.cuEventRecord(b, s));
        CU(drv.cuEventSynchronize(b));
        CU(drv.cuEventElapsedTime(&t[i], a, b));
    }
    qsort(t, (size_t)reps, sizeof *t, cmp_float);
    double med = reps % 2 ? t[reps / 2] : 0.5 * (t[reps / 2 - 1] + t[reps / 2]);
    free(t);
    CU(drv.cuEventDestroy(a));
    CU(drv.cuEventDestroy(b));
    return med;
}

/* Relative error ||x - y|| / ||y|| over count bf16 (or f32) values on the
 * device; NaN (an unwritten or poisoned element) makes it infinite. */
static double rel_err(CUdeviceptr x, CUdeviceptr y, size_t count, int f32)
{
    size_t es = f32 ? 4 : 2;
    uint8_t *hx = malloc(count * es), *hy = malloc(count * es);
    CU(drv.cuMemcpyDtoH(hx, x, count * es));
    CU(drv.cuMemcpyDtoH(hy, y, count * es));
    double num = 0, den = 0;
    for (size_t i = 0; i < count; i++) {
        double a = f32 ? ((float *)hx)[i] : from_bf16(((uint16_t *)hx)[i]);
        double b = f32 ? ((float *)hy)[i] : from_bf16(((uint16_t *)hy)[i]);
        if (isnan(a) || isnan(b)) {
            num = INFINITY;
            break;
        }
        num += (a - b) * (a - b);
        den += b * b;
    }
    free(hx);
    free(hy);
    return den > 0 ? sqrt(num / den) : num;
}

static double peer_tflops(const peer_row *rows, int n, const char *name, const char *op)
{
    for (int i = 0; i < n; i++)
        if (!strcmp(rows[i].name, name) && !strcmp(rows[i].op, op)) return rows[i].tflops;
    return 0;
}

/* Reads torch_peer.py's JSON lines (a tiny scanner: the format is fixed). */
static int load_peer(const char *path, peer_row *rows, int max)
{
    FILE *f = fopen(path, "r");
    if (!f) return 0;
    char line[1024];
    int n = 0;
    while (n < max && fgets(line, sizeof line, f)) {
        char *c = strstr(line, "\"case\": \""), *o = strstr(line, "\"op\": \""),
             *t = strstr(line, "\"tflops\": ");
        if (!c || !o || !t) continue;
        sscanf(c + 9, "%63[^\"]", rows[n].name);
        sscanf(o + 7, "%15[^\"]", rows[n].op);
        rows[n].tflops = atof(t + 10);
        n++;
    }
    fclose(f);
    return n;
}

/* Device-to-device copy bandwidth, bytes read + written per second. */
static double copy_bandwidth(CUstream s)
{
    size_t bytes = (size_t)2 << 30;
    CUdeviceptr a, b;
    CU(drv.cuMemAlloc(&a, bytes));
    CU(drv.cuMemAlloc(&b, bytes));
    CU(drv.cuMemsetD8(a, 1, bytes));
    CUevent e0, e1;
    CU(drv.cuEventCreate(&e0, CU_EVENT_DEFAULT));
    CU(drv.cuEventCreate(&e1, CU_EVENT_DEFAULT));
    float best = 1e9f;
    (void)s; /* cuMemcpyDtoD runs on the legacy stream: time it there */
    for (int i = 0; i < 10; i++) {
        CU(drv.cuEventRecord(e0, NULL));
        CU(drv.cuMemcpyDtoD(b, a, bytes));
        CU(drv.cuEventRecord(e1, NULL));
        CU(drv.cuEventSynchronize(e1));
        float ms;
        CU(drv.cuEventElapsedTime(&ms, e0, e1));
        if (i >= 2 && ms < best) best = ms;
    }
    CU(drv.cuMemFree(a));
    CU(drv.cuMemFree(b));
    return 2.0 * (double)bytes / (best * 1e-3);
}

int main(int argc, char **argv)
{
    const char *cases_path = "bench/cases.tsv", *ops = "fprop,dgrad,wgrad,wgrad_acc", *only = NULL;
    const char *json_path = NULL, *peer_path = NULL;
    int untuned = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--cases") && i + 1 < argc) cases_path = argv[++i];
        else if (!strcmp(argv[i], "--ops") && i + 1 < argc) ops = argv[++i];
        else if (!strcmp(argv[i], "--only") && i + 1 < argc) only = argv[++i];
        else if (!strcmp(argv[i], "--reps") && i + 1 < argc) reps = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--json") && i + 1 < argc) json_path = argv[++i];
        else if (!strcmp(argv[i], "--peer") && i + 1 < argc) peer_path = argv[++i];
        else if (!strcmp(argv[i], "--untuned")) untuned = 1;
        else {
            fprintf(stderr, "usage: %s [--cases FILE] [--ops LIST] [--only LIST] [--reps N] "
                            "[--json FILE] [--peer FILE]\n", argv[0]);
            return 2;
        }
    }
    if (reps < 3) reps = 3;
    kiln_error err;
    if (kiln_driver_load(&drv, &err) != KILN_OK) {
        printf("kiln_bench: skipped: %s\n", err.msg);
        return 0;
    }
    int count = 0;
    if (drv.cuDeviceGetCount(&count) != CUDA_SUCCESS || count == 0) {
        printf("kiln_bench: skipped: no CUDA device\n");
        return 0;
    }
    CUdevice dev;
    CUcontext cu;
    CU(drv.cuDeviceGet(&dev, 0));
    CU(drv.cuDevicePrimaryCtxRetain(&cu, dev));
    CU(drv.cuCtxSetCurrent(cu));
    char devname[128];
    CU(drv.cuDeviceGetName(devname, sizeof devname, dev));
    CUstream s;
    CU(drv.cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));

    kiln_context_options o;
    kiln_context_options_init(&o);
    o.allowed_backends = KILN_ALLOW_GENERATED;
    kiln_context *gen = NULL, *lt = NULL;
    if (kiln_context_create(&o, &gen) != KILN_OK) {
        fprintf(stderr, "kiln_context_create: %s\n", kiln_last_error(gen));
        return 1;
    }
    kiln_context *plain = NULL; /* generated, tuning tables ignored */
    if (untuned) {
        setenv("KILN_TUNING", "off", 1);
        kiln_status st = kiln_context_create(&o, &plain);
        unsetenv("KILN_TUNING");
        if (st != KILN_OK) {
            fprintf(stderr, "kiln_context_create: %s\n", kiln_last_error(plain));
            return 1;
        }
    }
    o.allowed_backends = KILN_ALLOW_CUBLASLT;
    if (kiln_context_create(&o, &lt) != KILN_OK) {
        fprintf(stderr, "kiln_context_create: %s\n", kiln_last_error(lt));
        return 1;
    }

    bench_case cases[MAX_CASES];
    int n_cases = load_cases(cases_path, cases);
    peer_row peer[3 * MAX_CASES];
    int n_peer = peer_path ? load_peer(peer_path, peer, 3 * MAX_CASES) : 0;
    double bw = copy_bandwidth(s);

    FILE *json = json_path ? fopen(json_path, "w") : NULL;
    if (json) fprintf(json, "{\"device\": \"%s\", \"copy_bandwidth_GBps\": %.1f, \"rows\": [\n",
                      devname, bw / 1e9);
    int first_row = 1;
    printf("device: %s, copy bandwidth %.0f GB/s, median of %d\n", devname, bw / 1e9, reps);
    char table[32768], cmp[16384];
    size_t cl = 0;
    cmp[0] = '\0';
    if (untuned)
        cl += (size_t)snprintf(cmp + cl, sizeof cmp - cl, "%-15s %-9s %9s %9s %7s  %s\n", "case",
                               "op", "tuned", "untuned", "ratio", "tuned kernel / untuned kernel");
    size_t tl = 0;
    tl += (size_t)snprintf(table + tl, sizeof table - tl,
                           "%-15s %-9s %9s %9s %9s %9s %7s %7s %7s  %s\n", "case", "op", "kiln",
                           "lt_loop", "lt_dense", "torch", "vs_loop", "vs_dns", "vs_trch", "kernel");
    for (int ci = 0; ci < n_cases; ci++) {
        const bench_case *c = &cases[ci];
        if (only && !strstr(only, c->name)) continue;
        int32_t m[MAX_G];
        group_sizes(c, m);
        long t = 0;
        for (int g = 0; g < c->groups; g++) t += m[g];
        int G = c->groups;
        CUdeviceptr x = random_bf16((size_t)t * c->k, 1.0f);
        CUdeviceptr w = random_bf16((size_t)G * c->n * c->k, 0.05f);
        CUdeviceptr dy = random_bf16((size_t)t * c->n, 1.0f);
        size_t out_elems = (size_t)t * (size_t)(c->n > c->k ? c->n : c->k);
        size_t wout_elems = (size_t)G * c->n * c->k;
        size_t big = out_elems > wout_elems ? out_elems : wout_elems;
        CUdeviceptr out_a, out_b, sizes, dense_sizes;
        CU(drv.cuMemAlloc(&out_a, big * 4)); /* room for wgrad_acc's fp32 dW */
        CU(drv.cuMemAlloc(&out_b, big * 4));
        CU(drv.cuMemAlloc(&sizes, (size_t)G * 4));
        CU(drv.cuMemAlloc(&dense_sizes, 4));
        CU(drv.cuMemcpyHtoD(sizes, m, (size_t)G * 4));
        int32_t tt = (int32_t)t;
        CU(drv.cuMemcpyHtoD(dense_sizes, &tt, 4));
        double flops = 2.0 * (double)t * (double)c->n * (double)c->k;
        double wgrad_ms = 0;
        for (int op = 0; op < 4; op++) {
            static const char *names[4] = {"fprop", "dgrad", "wgrad", "wgrad_acc"};
            int acc = op == 3;
            if (!has_op(ops, names[op])) continue;
            kiln_problem p;
            kiln_problem_init(&p, acc ? KILN_OP_WGRAD : (kiln_op)op);
            p.a_type = p.b_type = p.out_type = KILN_DTYPE_BF16;
            if (acc) {
                p.out_type = KILN_DTYPE_F32;
                p.accumulate = 1;
            }
            p.groups = G;
            p.n = c->n;
            p.k = c->k;
            p.capacity = t;
            p.d_sizes = (const int32_t *)(uintptr_t)sizes;
            p.host_sizes = m;
            p.d_a = (const void *)(uintptr_t)(op == KILN_OP_FPROP ? x : dy);
            p.d_b = (const void *)(uintptr_t)(op == KILN_OP_WGRAD ? x : w);
            size_t n_out = op == KILN_OP_FPROP ? (size_t)t * c->n
                         : op == KILN_OP_DGRAD ? (size_t)t * c->k : wout_elems;
            size_t es = acc ? 4 : 2;
            runner rg = {gen, p}, rl = {lt, p}, rd = {lt, p};
            rg.p.d_out = (void *)(uintptr_t)out_a;
            rl.p.d_out = (void *)(uintptr_t)out_b;
            rd.p.d_out = (void *)(uintptr_t)out_b;
            /* The dense peer: one group of all the tokens, same FLOPs. */
            int32_t one = (int32_t)t;
            rd.p.groups = 1;
            rd.p.d_sizes = (const int32_t *)(uintptr_t)dense_sizes;
            rd.p.host_sizes = &one;
            /* Correctness first: generated vs the cuBLASLt loop, every element.
             * Outputs start poisoned (NaN), or, when accumulating, as the same
             * random main-grad values. */
            if (acc) {
                CUdeviceptr init = random_bf16(n_out, 1.0f);
                upload_f32_from_bf16(out_a, init, n_out);
                CU(drv.cuMemcpyDtoD(out_b, out_a, n_out * 4));
                CU(drv.cuMemFree(init));
            } else {
                CU(drv.cuMemsetD8(out_a, 0xff, n_out * es));
                CU(drv.cuMemsetD8(out_b, 0xff, n_out * es));
            }
            call(&rg, s);
            call(&rl, s);
            CU(drv.cuStreamSynchronize(s));
            double e = rel_err(out_a, out_b, n_out, acc);
            kiln_call_report rep;
            kiln_last_call(gen, &rep);
            if (!(e < 2e-2)) {
                printf("%-15s %-6s FAILED: relative error %.3g against the cuBLASLt loop (%s)\n",
                       c->name, names[op], e, rep.kernel);
                continue;
            }
            double ms_g = time_call(&rg, s), ms_l = time_call(&rl, s), ms_d = time_call(&rd, s);
            if (untuned) {
                /* Tuned and untuned alternate, three rounds each, best median
                 * of each: the same drift hits both. */
                runner ru = rg;
                ru.ctx = plain;
                double best_t = ms_g, best_u = 1e30;
                for (int round = 0; round < 3; round++) {
                    double u = time_call(&ru, s), tg = round ? time_call(&rg, s) : ms_g;
                    if (u < best_u) best_u = u;
                    if (tg < best_t) best_t = tg;
                }
                kiln_call_report ur;
                kiln_last_call(plain, &ur);
                cl += (size_t)snprintf(cmp + cl, sizeof cmp - cl,
                                       "%-15s %-9s %9.1f %9.1f %7.3f  %s / %s\n", c->name, names[op],
                                       flops / best_t / 1e9, flops / best_u / 1e9, best_u / best_t,
                                       rep.kernel, ur.kernel);
            }
            double tf_g = flops / ms_g / 1e9, tf_l = flops / ms_l / 1e9, tf_d = flops / ms_d / 1e9;
            double tf_t = peer_tflops(peer, n_peer, c->name, names[op]);
            tl += (size_t)snprintf(table + tl, sizeof table - tl,
                                   "%-15s %-9s %9.1f %9.1f %9.1f %9.1f %7.2f %7.2f %7.2f  %s\n",
                                   c->name, names[op], tf_g, tf_l, tf_d, tf_t, tf_g / tf_l,
                                   tf_g / tf_d, tf_t > 0 ? tf_g / tf_t : 0.0, rep.kernel);
            if (op == 2) wgrad_ms = ms_g;
            if (acc && wgrad_ms > 0)
                tl += (size_t)snprintf(table + tl, sizeof table - tl,
                                       "%-15s %-6s accumulating into fp32 costs %.1f%% over "
                                       "overwriting bf16 (%.3f vs %.3f ms)\n",
                                       c->name, "wgrad", (ms_g / wgrad_ms - 1) * 100, ms_g,
                                       wgrad_ms);
            if (!strcmp(c->name, "small_decode") && !acc) {
                double floor_ms = (double)G * c->n * c->k * 2 / bw * 1e3;
                tl += (size_t)snprintf(table + tl, sizeof table - tl,
                                       "%-15s %-6s %.3f ms; reading the weights once at the copy "
                                       "bandwidth: %.3f ms (ratio %.2f)\n",
                                       c->name, names[op], ms_g, floor_ms, ms_g / floor_ms);
            }
            if (json) {
                fprintf(json, "%s  {\"case\": \"%s\", \"op\": \"%s\", \"tokens\": %ld, "
                              "\"kiln_ms\": %.4f, \"kiln_tflops\": %.2f, \"lt_loop_tflops\": %.2f, "
                              "\"lt_dense_tflops\": %.2f, \"torch_tflops\": %.2f, "
                              "\"rel_err\": %.3g, \"kernel\": \"%s\"}",
                        first_row ? "" : ",\n", c->name, names[op], t, ms_g, tf_g, tf_l, tf_d,
                        tf_t, e, rep.kernel);
                first_row = 0;
            }
        }
        CU(drv.cuMemFree(x));
        CU(drv.cuMemFree(w));
        CU(drv.cuMemFree(dy));
        CU(drv.cuMemFree(out_a));
        CU(drv.cuMemFree(out_b));
        CU(drv.cuMemFree(sizes));
        CU(drv.cuMemFree(dense_sizes));
    }
    if (json) {
        fprintf(json, "\n]}\n");
        fclose(json);
    }
    printf("\nTFLOP/s (2·T·N·K per call); vs_* = kiln / peer\n%s", table);
    if (untuned)
        printf("\nWith the shipped tuning table vs without (KILN_TUNING=off), TFLOP/s, best of 3 "
               "alternating medians; ratio > 1: tuned faster\n%s", cmp);
    kiln_context_destroy(gen);
    kiln_context_destroy(plain);
    kiln_context_destroy(lt);
    CU(drv.cuStreamDestroy(s));
    drv.cuDevicePrimaryCtxRelease(dev);
    return 0;
}
