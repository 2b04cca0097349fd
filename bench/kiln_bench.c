/* SPDX-License-Identifier: Apache-2.0 */
/*
 * kiln_bench.c — the MoE benchmark suite (bench/cases.tsv, from BENCH.md).
 *
 * Ops: fprop, dgrad, wgrad (bf16 out), and wgrad_acc (dW += ... into an fp32
 * main-grad buffer; its cost over overwrite is printed).  Not run unless
 * named in --ops: wgrad_dbias and wgrad_acc_dbias, the same wgrad calls
 * with the fused bias gradient (f32 db) timed against the calls without it
 * (the extra percent is printed; bench_dbias); fprop_ptrs and dgrad_ptrs,
 * the fprop/dgrad calls with the weights given as G pointers (d_b_ptrs)
 * timed against the same calls with one contiguous tensor (bench_ptrs);
 * wgrad_discrete and wgrad_acc_discrete, dW into one buffer per group
 * (d_out_ptrs) timed against the dense calls (bench_discrete).
 * For each case and op, in one process: kiln's generated kernel, cuBLASLt as
 * a per-group loop (kiln's cuBLASLt backend), and one dense cuBLASLt GEMM of
 * the same FLOPs (the same backend with one group of all the tokens).  Each
 * result is checked against the cuBLASLt loop before timing (every element,
 * relative error).  bf16 random data (never zeros), 5 warm-ups, CUDA events,
 * the median of --reps timed calls.  A torch._grouped_mm peer measured by
 * bench/torch_peer.py in the same call can be merged in with --peer FILE.
 *
 * usage: kiln_bench [--cases FILE] [--ops fprop,dgrad,wgrad,wgrad_acc,wgrad_dbias,
 *                   wgrad_acc_dbias,fprop_ptrs,dgrad_ptrs,wgrad_discrete,
 *                   wgrad_acc_discrete] [--only a,b]
 *                   [--reps N] [--json FILE] [--peer FILE] [--untuned | --against ENV=VALUE]
 *        kiln_bench --sizes [--cases FILE]
 *        kiln_bench --dispatch-report TUNE.csv [--cases FILE] [--table FILE]
 *
 * The cases file is read, and each case's group sizes made, by `kiln
 * tune`'s code (cli/tune.c).  --sizes prints them, one case a line:
 *   name <TAB> K <TAB> N <TAB> m0,m1,...
 * and needs no GPU: torch_peer.py takes its sizes from there, so all three
 * time the same problems.
 *
 * Host time: for every case and op, the wall time of one kiln_gemm call on
 * the calling thread (calls enqueued back to back, the clock around the
 * calls only; the median of 9 batches' means), for the generated path with its per-call caches (as
 * shipped) and without them (KILN_HOST_CACHE=0), and for the cuBLASLt
 * backend; printed as the section "Host time of one kiln_gemm call".
 * KILN_BENCH_HOST=0 leaves it out (a few seconds less).
 *
 * --dispatch-report needs no GPU either: per case, the kernel the dispatcher
 * picks (built-in catalog and table, or --table FILE) and the model alone's,
 * priced by a `kiln tune --csv` run over the same cases against the best
 * kernel it measured (dispatch_report.c; scripts/tune_corpus.sh makes one).
 *
 * --against ENV=VALUE also times kiln with a second context made under that
 * environment setting (KILN_SPLIT=0: no split of the last wave),
 * alternating with the first call by call, so the two compare without
 * drift between runs; --untuned is --against KILN_TUNING=off.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "gpu_support.h"
#include "dispatch_report.h"
#include "half.h"
#include "tune.h"

typedef struct peer_row {
    char name[64], op[16];
    double tflops;
} peer_row;

static kts_gpu gpu;
#define drv (gpu.drv)
static int reps = 30;

#define CU(call) KTS_CU_OR_EXIT(&drv, call)

/* bf16 with a roughly normal distribution, scaled; a fixed seed, so every
 * run times the same data. */
static uint64_t rng = 0x9E3779B97F4A7C15ull;

static CUdeviceptr random_bf16(size_t count, float scale)
{
    uint16_t *h = malloc(count * 2);
    if (!h) {
        fprintf(stderr, "out of host memory\n");
        exit(1);
    }
    for (size_t i = 0; i < count; i++) h[i] = kiln_f32_to_bf16(kts_rng_normal(&rng) * scale);
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

/* Waits for every setup copy and memset, which run on the legacy stream:
 * the timed calls run on a non-blocking stream (bench.s), which does not
 * wait for it, and memsets and device-to-device copies return before they
 * are done.  Without it a check's first call could race the poisoning of
 * its own output (as cli/tune_gpu.c found for its fills). */
static void settle(void) { CU(drv.cuCtxSynchronize()); }

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
    for (size_t i = 0; i < count; i++) f[i] = kiln_bf16_to_f32(h[i]);
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

/* One call, waited for, and what kiln says served it. */
static void call_checked(runner *r, CUstream s, kiln_call_report *rep)
{
    call(r, s);
    CU(drv.cuStreamSynchronize(s));
    kiln_last_call(r->ctx, rep);
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

/* Two calls timed against each other, in one process: both warmed in turn
 * first, then four rounds of medians in the order x y, y x, y x, x y, and
 * each side's mean over the rounds, so that a drift across the rounds (the
 * card heating towards its power limit) costs both sides the same.  The
 * best of each side, with x first in round one, gave x the coolest slot:
 * on the power-bound shapes (dsv3_fc2_ep8, mod64_1, skew64_longk) the
 * side timed first from the cooler card came out 6-15% faster with the
 * same kernel (H200, docs/results/session23-bench-pairs-*.log). */
static void time_pair(runner *x, runner *y, CUstream s, double *mx, double *my)
{
    (void)time_call(x, s);
    (void)time_call(y, s);
    *mx = *my = 0;
    for (int round = 0; round < 4; round++) {
        if (round == 0 || round == 3) {
            *mx += time_call(x, s);
            *my += time_call(y, s);
        } else {
            *my += time_call(y, s);
            *mx += time_call(x, s);
        }
    }
    *mx /= 4;
    *my /= 4;
}

/* ---- host time: what one kiln_gemm costs the calling thread ------------- */

/* The section printed after the tables, one row per case and op. */
static char host_table[16384];
static size_t host_len;
static double host_sum, host_max;
static int host_rows;

static double now_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec * 1e-3;
}

/* Wall µs of one call: n calls enqueued back to back, the clock read
 * around the calls only (synchronisation before and after, outside); the
 * median over HOST_BATCHES such batches of the batch's mean, so that one
 * preemption of the benchmark's thread does not stand for the library's
 * cost (single batches of 32 varied 3.2-5.8 µs on the same code path).  n
 * is kept small enough that the launch queue never fills (a full queue
 * would make a launch wait for the GPU).  *gpu_ms, when given, gets the GPU
 * time per call of the batches (events around each): back to back, where
 * programmatic dependent launch (KILN_PDL=1) would show. */
#define HOST_BATCHES 9
static double host_us(runner *r, CUstream s, int n, double *gpu_ms)
{
    for (int i = 0; i < 3; i++) call(r, s);
    CUevent e0, e1;
    CU(drv.cuEventCreate(&e0, CU_EVENT_DEFAULT));
    CU(drv.cuEventCreate(&e1, CU_EVENT_DEFAULT));
    float us[HOST_BATCHES], dev_ms[HOST_BATCHES];
    for (int b = 0; b < HOST_BATCHES; b++) {
        CU(drv.cuStreamSynchronize(s));
        CU(drv.cuEventRecord(e0, s));
        double t0 = now_us();
        for (int i = 0; i < n; i++) call(r, s);
        double t1 = now_us();
        CU(drv.cuEventRecord(e1, s));
        CU(drv.cuEventSynchronize(e1));
        float ms;
        CU(drv.cuEventElapsedTime(&ms, e0, e1));
        us[b] = (float)((t1 - t0) / n);
        dev_ms[b] = ms / n;
    }
    qsort(us, HOST_BATCHES, sizeof *us, cmp_float);
    qsort(dev_ms, HOST_BATCHES, sizeof *dev_ms, cmp_float);
    if (gpu_ms) *gpu_ms = dev_ms[HOST_BATCHES / 2];
    CU(drv.cuEventDestroy(e0));
    CU(drv.cuEventDestroy(e1));
    return us[HOST_BATCHES / 2];
}

/* One row: kiln's generated path (per-call caches on, as shipped, and off:
 * KILN_HOST_CACHE=0) and kiln's cuBLASLt backend (a per-group loop, so G
 * launches a call); and the generated path's GPU ms per call back to back
 * next to its single-call median. */
static void host_time_row(kiln_context *nocache, const char *name, const char *op,
                          const runner *rg, const runner *rl, CUstream s, double single_ms)
{
    runner g = *rg, off = *rg, lt = *rl;
    off.ctx = nocache;
    double b2b_ms;
    double us = host_us(&g, s, 32, &b2b_ms), us_off = host_us(&off, s, 32, NULL);
    int n_lt = 128 / (rl->p.groups > 0 ? rl->p.groups : 1);
    double us_lt = host_us(&lt, s, n_lt < 2 ? 2 : n_lt, NULL);
    host_sum += us;
    if (us > host_max) host_max = us;
    host_rows++;
    host_len += (size_t)snprintf(host_table + host_len, sizeof host_table - host_len,
                                 "%-15s %-9s %9.2f %9.2f %9.1f %9.4f %9.4f\n", name, op, us, us_off,
                                 us_lt, single_ms, b2b_ms);
}

static void host_time_print(void)
{
    if (!host_rows) return;
    printf("\nHost time of one kiln_gemm call, us (median of 9 batches' means of back-to-back "
           "calls, no sync inside; "
           "goal <= 5 on the generated path); kiln's GPU ms per call, alone (median) and back to "
           "back\n%-15s %-9s %9s %9s %9s %9s %9s\n%s"
           "host us/call, kiln generated: mean %.2f, max %.2f over %d rows\n",
           "case", "op", "kiln", "no_cache", "lt_loop", "ms_alone", "ms_b2b", host_table,
           host_sum / host_rows, host_max, host_rows);
}

/* Relative error ||x - y|| / ||y|| over count bf16 (or f32) values on the
 * device; NaN (an unwritten or poisoned element) makes it infinite. */
static double rel_err(CUdeviceptr x, CUdeviceptr y, size_t count, int f32)
{
    size_t es = f32 ? 4 : 2;
    uint8_t *hx = malloc(count * es), *hy = malloc(count * es);
    CU(drv.cuMemcpyDtoH(hx, x, count * es));
    CU(drv.cuMemcpyDtoH(hy, y, count * es));
    kiln_dtype t = f32 ? KILN_DTYPE_F32 : KILN_DTYPE_BF16;
    kts_err e = {0};
    for (size_t i = 0; i < count; i++) {
        double b = kts_load(hy, i, t);
        kts_err_add(&e, kts_load(hx, i, t), b);
        if (isnan(b)) e.nan++;
    }
    free(hx);
    free(hy);
    return e.nan ? INFINITY : kts_err_rel(&e);
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

/* What one run of the benchmark holds: contexts, stream, options, and the
 * tables it prints at the end. */
typedef struct bench {
    kiln_context *gen, *lt, *plain; /* generated; cuBLASLt; generated under --against */
    kiln_context *nocache;          /* generated with KILN_HOST_CACHE=0 (host time) */
    CUstream s;
    const char *ops;
    double bw;                      /* copy bandwidth, bytes/s */
    double write_bw;                /* write-only (memset) bandwidth, bytes/s */
    peer_row *peer;
    int n_peer;
    FILE *json;
    int first_row;
    char table[32768], cmp[16384];
    size_t tl, cl;
} bench;

/* The device buffers of one case.  Two calls compared write out_a and
 * out_b, so that their outputs can be checked against each other; then
 * both are timed into out_a, so that the buffer is not one more difference
 * between them.  (A 7% gap on the two largest dW, once put down to out_b,
 * came from the order the pairs were timed in: time_pair.) */
typedef struct case_bufs {
    const int32_t *m;               /* host sizes */
    long t;                         /* tokens */
    CUdeviceptr x, w, dy, out_a, out_b, sizes, dense_sizes;
} case_bufs;

/* One op of one case: check against the cuBLASLt loop, then time kiln, the
 * loop and the dense peer; adds the rows to the tables.  Returns kiln's
 * median ms (0 when it failed the check). */
static double bench_op(bench *b, const kiln_tune_shape *c, const case_bufs *cb, int op,
                       double wgrad_ms)
{
    static const char *names[4] = {"fprop", "dgrad", "wgrad", "wgrad_acc"};
    const int acc = op == 3, G = c->groups;
    const long t = cb->t;
    kiln_problem p;
    kts_problem_init(&p, acc ? KILN_OP_WGRAD : (kiln_op)op, G, c->n, c->k, t, cb->sizes,
                     op == KILN_OP_FPROP ? cb->x : cb->dy, op == KILN_OP_WGRAD ? cb->x : cb->w, 0);
    p.a_type = p.b_type = p.out_type = KILN_DTYPE_BF16;
    if (acc) {
        p.out_type = KILN_DTYPE_F32;
        p.accumulate = 1;
    }
    p.host_sizes = cb->m;
    size_t n_out = op == KILN_OP_FPROP ? (size_t)t * c->n
                 : op == KILN_OP_DGRAD ? (size_t)t * c->k : (size_t)G * c->n * c->k;
    size_t es = acc ? 4 : 2;
    runner rg = {b->gen, p}, rl = {b->lt, p}, rd = {b->lt, p};
    rg.p.d_out = (void *)(uintptr_t)cb->out_a;
    rl.p.d_out = (void *)(uintptr_t)cb->out_b;
    rd.p.d_out = (void *)(uintptr_t)cb->out_b;
    /* The dense peer: one group of all the tokens, same FLOPs. */
    int32_t one = (int32_t)t;
    rd.p.groups = 1;
    rd.p.d_sizes = (const int32_t *)(uintptr_t)cb->dense_sizes;
    rd.p.host_sizes = &one;
    /* Correctness first: generated vs the cuBLASLt loop, every element.
     * Outputs start poisoned (NaN), or, when accumulating, as the same
     * random main-grad values. */
    if (acc) {
        CUdeviceptr init = random_bf16(n_out, 1.0f);
        upload_f32_from_bf16(cb->out_a, init, n_out);
        CU(drv.cuMemcpyDtoD(cb->out_b, cb->out_a, n_out * 4));
        CU(drv.cuMemFree(init));
    } else {
        CU(drv.cuMemsetD8(cb->out_a, KTS_POISON, n_out * es));
        CU(drv.cuMemsetD8(cb->out_b, KTS_POISON, n_out * es));
    }
    settle();
    call(&rg, b->s);
    call(&rl, b->s);
    CU(drv.cuStreamSynchronize(b->s));
    double e = rel_err(cb->out_a, cb->out_b, n_out, acc);
    kiln_call_report rep;
    kiln_last_call(b->gen, &rep);
    if (!(e < 2e-2)) {
        printf("%-15s %-6s FAILED: relative error %.3g against the cuBLASLt loop (%s)\n", c->name,
               names[op], e, rep.kernel);
        return 0;
    }
    rl.p.d_out = rd.p.d_out = rg.p.d_out; /* timed into one buffer (case_bufs) */
    double flops = kiln_tune_shape_flops(c);
    double ms_g = time_call(&rg, b->s), ms_l = time_call(&rl, b->s), ms_d = time_call(&rd, b->s);
    if (b->nocache) host_time_row(b->nocache, c->name, names[op], &rg, &rl, b->s, ms_g);
    if (b->plain) {
        /* The two contexts timed against each other (time_pair).  (The
         * first side once also counted ms_g, timed before the cuBLASLt
         * runs: at the power limit that first, cooler median made one
         * kernel look up to 13% faster tuned than untuned.) */
        runner ru = rg;
        ru.ctx = b->plain;
        double ms_t, ms_u;
        time_pair(&rg, &ru, b->s, &ms_t, &ms_u);
        kiln_call_report ur;
        kiln_last_call(b->plain, &ur);
        b->cl += (size_t)snprintf(b->cmp + b->cl, sizeof b->cmp - b->cl,
                                  "%-15s %-9s %9.1f %9.1f %7.3f  %s / %s\n", c->name, names[op],
                                  flops / ms_t / 1e9, flops / ms_u / 1e9, ms_u / ms_t,
                                  rep.kernel, ur.kernel);
    }
    double tf_g = flops / ms_g / 1e9, tf_l = flops / ms_l / 1e9, tf_d = flops / ms_d / 1e9;
    double tf_t = peer_tflops(b->peer, b->n_peer, c->name, names[op]);
    b->tl += (size_t)snprintf(b->table + b->tl, sizeof b->table - b->tl,
                              "%-15s %-9s %9.1f %9.1f %9.1f %9.1f %7.2f %7.2f %7.2f  %s\n",
                              c->name, names[op], tf_g, tf_l, tf_d, tf_t, tf_g / tf_l, tf_g / tf_d,
                              tf_t > 0 ? tf_g / tf_t : 0.0, rep.kernel);
    if (acc && wgrad_ms > 0)
        b->tl += (size_t)snprintf(b->table + b->tl, sizeof b->table - b->tl,
                                  "%-15s %-6s accumulating into fp32 costs %.1f%% over "
                                  "overwriting bf16 (%.3f vs %.3f ms)\n",
                                  c->name, "wgrad", (ms_g / wgrad_ms - 1) * 100, ms_g, wgrad_ms);
    if (!strcmp(c->name, "small_decode") && !acc) {
        double floor_ms = (double)G * c->n * c->k * 2 / b->bw * 1e3;
        b->tl += (size_t)snprintf(b->table + b->tl, sizeof b->table - b->tl,
                                  "%-15s %-6s %.3f ms; reading the weights once at the copy "
                                  "bandwidth: %.3f ms (ratio %.2f)\n",
                                  c->name, names[op], ms_g, floor_ms, ms_g / floor_ms);
    }
    if (op == KILN_OP_WGRAD && !acc && t < 32L * G) { /* decode-sized: writing dW bounds it */
        double write_ms = (double)G * c->n * c->k * 2 / b->write_bw * 1e3;
        b->tl += (size_t)snprintf(b->table + b->tl, sizeof b->table - b->tl,
                                  "%-15s %-6s %.3f ms; writing dW once at the memset bandwidth: "
                                  "%.3f ms (%.0f%% of that write floor)\n",
                                  c->name, names[op], ms_g, write_ms, 100 * write_ms / ms_g);
    }
    if (b->json) {
        fprintf(b->json, "%s  {\"case\": \"%s\", \"op\": \"%s\", \"tokens\": %ld, "
                         "\"kiln_ms\": %.4f, \"kiln_tflops\": %.2f, \"lt_loop_tflops\": %.2f, "
                         "\"lt_dense_tflops\": %.2f, \"torch_tflops\": %.2f, "
                         "\"rel_err\": %.3g, \"kernel\": \"%s\"}",
                b->first_row ? "" : ",\n", c->name, names[op], t, ms_g, tf_g, tf_l, tf_d, tf_t,
                e, rep.kernel);
        b->first_row = 0;
    }
    return ms_g;
}

static kiln_context *make_context(unsigned allowed, const char *env);

/* The largest relative error of db (f32, dense [G, N]) against a host sum
 * of dY over each group's tokens (in double; group by group, so the host
 * holds one group of dY at a time). */
static double dbias_err(CUdeviceptr db, const kiln_tune_shape *c, const case_bufs *cb)
{
    const int G = c->groups;
    const size_t N = (size_t)c->n;
    float *got = malloc((size_t)G * N * 4);
    double *ref = malloc(N * sizeof *ref);
    int32_t mmax = 0;
    for (int g = 0; g < G; g++) mmax = cb->m[g] > mmax ? cb->m[g] : mmax;
    uint16_t *rows = malloc((size_t)(mmax ? mmax : 1) * N * 2);
    if (!got || !ref || !rows) {
        fprintf(stderr, "out of host memory\n");
        exit(1);
    }
    CU(drv.cuMemcpyDtoH(got, db, (size_t)G * N * 4));
    kts_err e = {0};
    size_t row0 = 0;
    for (int g = 0; g < G; g++) {
        size_t m = (size_t)cb->m[g];
        if (m) CU(drv.cuMemcpyDtoH(rows, cb->dy + row0 * N * 2, m * N * 2));
        for (size_t n = 0; n < N; n++) ref[n] = 0;
        for (size_t r = 0; r < m; r++)
            for (size_t n = 0; n < N; n++) ref[n] += kiln_bf16_to_f32(rows[r * N + n]);
        for (size_t n = 0; n < N; n++) {
            kts_err_add(&e, got[(size_t)g * N + n], ref[n]);
            if (isnan(got[(size_t)g * N + n])) e.nan++;
        }
        row0 += m;
    }
    free(got);
    free(ref);
    free(rows);
    return e.nan ? INFINITY : kts_err_rel(&e);
}

/* Case c's wgrad call as a caller makes it: bf16 dW, or dW += ... into
 * fp32 (acc), sizes on the host too; the outputs are the caller's to set. */
static kiln_problem wgrad_problem(const kiln_tune_shape *c, const case_bufs *cb, int acc)
{
    kiln_problem p;
    kts_problem_init(&p, KILN_OP_WGRAD, c->groups, c->n, c->k, cb->t, cb->sizes, cb->dy, cb->x, 0);
    p.a_type = p.b_type = p.out_type = KILN_DTYPE_BF16;
    if (acc) {
        p.out_type = KILN_DTYPE_F32;
        p.accumulate = 1;
    }
    p.host_sizes = cb->m;
    return p;
}

/* --ops wgrad_dbias / wgrad_acc_dbias: wgrad (bf16 dW, or dW += ... into
 * fp32) with the fused bias gradient (f32 db, dense) against the same call
 * without it, in this process: dW of the two compared and db checked
 * against a host sum first, then timed against each other (time_pair).
 * Prints the extra time of dbias.  Both calls are dispatched as a caller's
 * would be (tables on): the call with db by its own `dbias` entries
 * (specs/sweeps/wgrad_sm90_dbias.yaml), the plain one by the plain
 * entries, so the figure is what a caller pays for db, tile choice
 * included. */
static void bench_dbias(bench *b, const kiln_tune_shape *c, const case_bufs *cb, int acc)
{
    const char *name = acc ? "wgrad_acc_dbias" : "wgrad_dbias";
    const int G = c->groups;
    const size_t n_out = (size_t)G * c->n * c->k, es = acc ? 4 : 2;
    const kiln_problem p = wgrad_problem(c, cb, acc);
    CUdeviceptr db;
    CU(drv.cuMemAlloc(&db, (size_t)G * c->n * 4));
    kiln_context *ctx = make_context(KILN_ALLOW_GENERATED, 0);
    runner plain = {ctx, p}, fused = {ctx, p};
    plain.p.d_out = (void *)(uintptr_t)cb->out_b;
    fused.p.d_out = (void *)(uintptr_t)cb->out_a;
    fused.p.d_dbias = (void *)(uintptr_t)db;
    if (acc) {
        CUdeviceptr init = random_bf16(n_out, 1.0f);
        upload_f32_from_bf16(cb->out_a, init, n_out);
        CU(drv.cuMemcpyDtoD(cb->out_b, cb->out_a, n_out * 4));
        CU(drv.cuMemFree(init));
        CU(drv.cuMemsetD8(db, 0, (size_t)G * c->n * 4)); /* db += sum: the sum */
    } else {
        CU(drv.cuMemsetD8(cb->out_a, KTS_POISON, n_out * es));
        CU(drv.cuMemsetD8(cb->out_b, KTS_POISON, n_out * es));
        CU(drv.cuMemsetD8(db, KTS_POISON, (size_t)G * c->n * 4));
    }
    settle();
    call(&fused, b->s);
    call(&plain, b->s);
    CU(drv.cuStreamSynchronize(b->s));
    kiln_call_report rf, rp;
    kiln_last_call(ctx, &rp);
    double e_dw = rel_err(cb->out_a, cb->out_b, n_out, acc), e_db = dbias_err(db, c, cb);
    call(&fused, b->s);
    CU(drv.cuStreamSynchronize(b->s));
    kiln_last_call(ctx, &rf);
    if (!(e_dw < 1e-3) || !(e_db < 1e-4)) {
        printf("%-15s %-15s FAILED: dW differs from plain wgrad by %.3g, db from the host sum by "
               "%.3g (%s)\n", c->name, name, e_dw, e_db, rf.kernel);
        CU(drv.cuMemFree(db));
        kiln_context_destroy(ctx);
        return;
    }
    plain.p.d_out = fused.p.d_out; /* timed into one buffer (case_bufs): only db differs */
    double ms_f, ms_p;
    time_pair(&fused, &plain, b->s, &ms_f, &ms_p);
    b->tl += (size_t)snprintf(b->table + b->tl, sizeof b->table - b->tl,
                              "%-15s %-15s fused dbias costs %+.1f%% (%.3f vs %.3f ms; db rel err "
                              "%.1e)  %s / %s\n",
                              c->name, name, (ms_f / ms_p - 1) * 100, ms_f, ms_p, e_db,
                              rf.kernel, rp.kernel);
    if (b->json) {
        fprintf(b->json, "%s  {\"case\": \"%s\", \"op\": \"%s\", \"kiln_ms\": %.4f, "
                         "\"plain_ms\": %.4f, \"dbias_extra_pct\": %.2f, \"dbias_rel_err\": %.3g, "
                         "\"kernel\": \"%s\"}",
                b->first_row ? "" : ",\n", c->name, name, ms_f, ms_p,
                (ms_f / ms_p - 1) * 100, e_db, rf.kernel);
        b->first_row = 0;
    }
    CU(drv.cuMemFree(db));
    kiln_context_destroy(ctx);
}

/* --ops fprop_ptrs / dgrad_ptrs: the call with the weights as G pointers
 * (into the same [G,N,K] tensor, group by group) against the same call with
 * the contiguous tensor, both as dispatched by the shipped context (tables
 * on): what a caller with per-expert weights gets against one with a
 * stacked tensor.  Outputs compared first (they must agree exactly: the same
 * products in the same order, or within bf16 rounding if the kernels
 * differ), then timed against each other (time_pair). */
static void bench_ptrs(bench *b, const kiln_tune_shape *c, const case_bufs *cb, int op)
{
    const char *name = op == KILN_OP_DGRAD ? "dgrad_ptrs" : "fprop_ptrs";
    const int G = c->groups;
    const size_t n_out = (size_t)cb->t * (op == KILN_OP_FPROP ? c->n : c->k);
    kiln_problem p;
    kts_problem_init(&p, (kiln_op)op, G, c->n, c->k, cb->t, cb->sizes,
                     op == KILN_OP_FPROP ? cb->x : cb->dy, cb->w, 0);
    p.a_type = p.b_type = p.out_type = KILN_DTYPE_BF16;
    p.host_sizes = cb->m;
    CUdeviceptr *host_ptrs = malloc((size_t)G * sizeof *host_ptrs), dptrs;
    for (int g = 0; g < G; g++) host_ptrs[g] = cb->w + (CUdeviceptr)g * c->n * c->k * 2;
    CU(drv.cuMemAlloc(&dptrs, (size_t)G * sizeof *host_ptrs));
    CU(drv.cuMemcpyHtoD(dptrs, host_ptrs, (size_t)G * sizeof *host_ptrs));
    free(host_ptrs);
    runner cont = {b->gen, p}, ptrs = {b->gen, p};
    cont.p.d_out = (void *)(uintptr_t)cb->out_b;
    ptrs.p.d_out = (void *)(uintptr_t)cb->out_a;
    ptrs.p.d_b = NULL;
    ptrs.p.d_b_ptrs = (const void *const *)(uintptr_t)dptrs;
    CU(drv.cuMemsetD8(cb->out_a, KTS_POISON, n_out * 2));
    CU(drv.cuMemsetD8(cb->out_b, KTS_POISON, n_out * 2));
    settle();
    kiln_call_report rp, rc;
    call_checked(&ptrs, b->s, &rp);
    call_checked(&cont, b->s, &rc);
    double e = rel_err(cb->out_a, cb->out_b, n_out, 0);
    if (!(e < 1e-2)) {
        printf("%-15s %-15s FAILED: differs from the contiguous call by %.3g (%s vs %s)\n",
               c->name, name, e, rp.kernel, rc.kernel);
        CU(drv.cuMemFree(dptrs));
        return;
    }
    cont.p.d_out = ptrs.p.d_out; /* timed into one buffer (case_bufs): only the weights differ */
    double ms_p, ms_c;
    time_pair(&ptrs, &cont, b->s, &ms_p, &ms_c);
    b->tl += (size_t)snprintf(b->table + b->tl, sizeof b->table - b->tl,
                              "%-15s %-15s pointer weights %.3f vs contiguous %.3f ms: %.3fx "
                              "(rel diff %.1e)  %s / %s\n",
                              c->name, name, ms_p, ms_c, ms_c / ms_p, e, rp.kernel,
                              rc.kernel);
    if (b->json) {
        fprintf(b->json, "%s  {\"case\": \"%s\", \"op\": \"%s\", \"kiln_ms\": %.4f, "
                         "\"contiguous_ms\": %.4f, \"kernel\": \"%s\", \"contiguous_kernel\": "
                         "\"%s\"}",
                b->first_row ? "" : ",\n", c->name, name, ms_p, ms_c, rp.kernel, rc.kernel);
        b->first_row = 0;
    }
    CU(drv.cuMemFree(dptrs));
}

/* --ops wgrad_discrete / wgrad_acc_discrete: wgrad into one buffer per
 * group (d_out_ptrs; bf16 dW, or dW += ... into fp32), as TransformerEngine
 * and Megatron keep per-expert weights, against the same call into the
 * dense [G,N,K] buffer, both as dispatched by the shipped context (tables
 * on).  Each group's buffer is its own allocation; the discrete dW,
 * gathered back, must match the dense one, then
 * the two are timed against each other (time_pair, each into its own
 * buffers).  What a caller with per-expert dW pays against a stacked one,
 * whose call the main table times against torch. */
static void bench_discrete(bench *b, const kiln_tune_shape *c, const case_bufs *cb, int acc)
{
    const char *name = acc ? "wgrad_acc_discrete" : "wgrad_discrete";
    const int G = c->groups;
    const size_t es = acc ? 4 : 2, slice = (size_t)c->n * c->k, n_out = (size_t)G * slice;
    const kiln_problem p = wgrad_problem(c, cb, acc);
    CUdeviceptr *bufs = malloc((size_t)G * sizeof *bufs), dptrs;
    if (!bufs) {
        fprintf(stderr, "out of host memory\n");
        exit(1);
    }
    const size_t gbytes = slice * es;
    for (int g = 0; g < G; g++) CU(drv.cuMemAlloc(&bufs[g], gbytes));
    CU(drv.cuMemAlloc(&dptrs, (size_t)G * sizeof *bufs));
    CU(drv.cuMemcpyHtoD(dptrs, bufs, (size_t)G * sizeof *bufs));
    runner dense = {b->gen, p}, disc = {b->gen, p};
    dense.p.d_out = (void *)(uintptr_t)cb->out_b;
    disc.p.d_out = NULL;
    disc.p.wgrad_output = KILN_WGRAD_DISCRETE;
    disc.p.d_out_ptrs = (void *const *)(uintptr_t)dptrs;
    /* accumulating, both start from the same random dW (copied into each
     * group's rows); overwriting, from poison */
    CUdeviceptr init = 0;
    if (acc) {
        init = random_bf16(n_out, 1.0f);
        upload_f32_from_bf16(cb->out_b, init, n_out);
    } else {
        CU(drv.cuMemsetD8(cb->out_b, KTS_POISON, n_out * es));
    }
    for (int g = 0; g < G; g++) {
        if (acc) CU(drv.cuMemcpyDtoD(bufs[g], cb->out_b + g * gbytes, gbytes));
        else CU(drv.cuMemsetD8(bufs[g], KTS_POISON, gbytes));
    }
    if (init) CU(drv.cuMemFree(init));
    settle();
    kiln_call_report rd, rn;
    call_checked(&disc, b->s, &rd);
    call_checked(&dense, b->s, &rn);
    /* gather the groups' [N, K] into out_a, dense, and compare */
    for (int g = 0; g < G; g++) CU(drv.cuMemcpyDtoD(cb->out_a + g * gbytes, bufs[g], gbytes));
    settle();
    double e = rel_err(cb->out_a, cb->out_b, n_out, acc);
    if (!(e < 1e-2)) {
        printf("%-15s %-15s FAILED: differs from the dense call by %.3g (%s vs %s)\n", c->name,
               name, e, rd.kernel, rn.kernel);
    } else {
        /* the table comes at the end; a run cut short still shows what passed */
        printf("%-15s %-15s checked: rel diff %.1e from the dense call (%s)\n", c->name, name, e,
               rd.kernel);
        double ms_d, ms_n;
        time_pair(&disc, &dense, b->s, &ms_d, &ms_n);
        b->tl += (size_t)snprintf(b->table + b->tl, sizeof b->table - b->tl,
                                  "%-15s %-15s discrete dW %.3f vs dense %.3f ms: %.3fx "
                                  "(rel diff %.1e)  %s / %s\n",
                                  c->name, name, ms_d, ms_n, ms_n / ms_d, e, rd.kernel, rn.kernel);
        if (b->json) {
            fprintf(b->json, "%s  {\"case\": \"%s\", \"op\": \"%s\", \"kiln_ms\": %.4f, "
                             "\"dense_ms\": %.4f, \"kernel\": \"%s\", \"dense_kernel\": \"%s\"}",
                    b->first_row ? "" : ",\n", c->name, name, ms_d, ms_n, rd.kernel, rn.kernel);
            b->first_row = 0;
        }
    }
    for (int g = 0; g < G; g++) CU(drv.cuMemFree(bufs[g]));
    CU(drv.cuMemFree(dptrs));
    free(bufs);
}

/* Every op of one case, on random data (never zeros). */
static void bench_case(bench *b, const kiln_tune_shape *c)
{
    static const char *names[4] = {"fprop", "dgrad", "wgrad", "wgrad_acc"};
    const int G = c->groups;
    int32_t *m = malloc((size_t)G * sizeof *m);
    if (!m) {
        fprintf(stderr, "out of host memory\n");
        exit(1);
    }
    case_bufs cb = {.m = m, .t = (long)kiln_tune_shape_sizes(c, m)};
    const long t = cb.t;
    cb.x = random_bf16((size_t)t * c->k, 1.0f);
    cb.w = random_bf16((size_t)G * c->n * c->k, 0.05f);
    cb.dy = random_bf16((size_t)t * c->n, 1.0f);
    size_t out_elems = (size_t)t * (size_t)(c->n > c->k ? c->n : c->k);
    size_t wout_elems = (size_t)G * c->n * c->k;
    size_t big = out_elems > wout_elems ? out_elems : wout_elems;
    CU(drv.cuMemAlloc(&cb.out_a, big * 4)); /* room for wgrad_acc's fp32 dW */
    CU(drv.cuMemAlloc(&cb.out_b, big * 4));
    CU(drv.cuMemAlloc(&cb.sizes, (size_t)G * 4));
    CU(drv.cuMemAlloc(&cb.dense_sizes, 4));
    CU(drv.cuMemcpyHtoD(cb.sizes, m, (size_t)G * 4));
    int32_t tt = (int32_t)t;
    CU(drv.cuMemcpyHtoD(cb.dense_sizes, &tt, 4));
    double wgrad_ms = 0;
    for (int op = 0; op < 4; op++) {
        if (!has_op(b->ops, names[op])) continue;
        double ms = bench_op(b, c, &cb, op, wgrad_ms);
        if (op == 2) wgrad_ms = ms;
    }
    for (int acc = 0; acc < 2; acc++)
        if (has_op(b->ops, acc ? "wgrad_acc_dbias" : "wgrad_dbias")) bench_dbias(b, c, &cb, acc);
    for (int op = 0; op < 2; op++)
        if (has_op(b->ops, op ? "dgrad_ptrs" : "fprop_ptrs")) bench_ptrs(b, c, &cb, op);
    for (int acc = 0; acc < 2; acc++)
        if (has_op(b->ops, acc ? "wgrad_acc_discrete" : "wgrad_discrete"))
            bench_discrete(b, c, &cb, acc);
    CUdeviceptr all[] = {cb.x, cb.w, cb.dy, cb.out_a, cb.out_b, cb.sizes, cb.dense_sizes};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) CU(drv.cuMemFree(all[i]));
    free(m);
}

/* --sizes: each case's group sizes, for torch_peer.py. */
static int print_sizes(const kiln_tune_shape *cases, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        const kiln_tune_shape *c = &cases[i];
        int32_t *m = malloc((size_t)c->groups * sizeof *m);
        if (!m) return 1;
        kiln_tune_shape_sizes(c, m);
        printf("%s\t%lld\t%lld\t", c->name, (long long)c->k, (long long)c->n);
        for (int g = 0; g < c->groups; g++) printf("%s%d", g ? "," : "", m[g]);
        printf("\n");
        free(m);
    }
    return 0;
}

/* A context for the allowed backends, made under env ("NAME=VALUE", or
 * NULL: as the environment is). */
static kiln_context *make_context(unsigned allowed, const char *env)
{
    kiln_context_options o;
    kiln_context_options_init(&o);
    o.allowed_backends = allowed;
    char name[64] = "";
    const char *eq = env ? strchr(env, '=') : NULL;
    if (eq && (size_t)(eq - env) >= sizeof name) {
        fprintf(stderr, "--against %s: the name is longer than %zu characters\n", env,
                sizeof name - 1);
        exit(2);
    }
    if (eq) {
        memcpy(name, env, (size_t)(eq - env));
        name[eq - env] = '\0';
        setenv(name, eq + 1, 1);
    }
    kiln_context *ctx = NULL;
    kiln_status st = kiln_context_create(&o, &ctx);
    if (*name) unsetenv(name);
    if (st != KILN_OK) {
        fprintf(stderr, "kiln_context_create: %s\n", kiln_last_error(ctx));
        exit(1);
    }
    return ctx;
}

int main(int argc, char **argv)
{
    const char *cases_path = "bench/cases.tsv", *only = NULL;
    const char *json_path = NULL, *peer_path = NULL, *report_csv = NULL, *table_path = NULL;
    const char *against = NULL;
    int sizes_only = 0;
    static bench b = {.ops = "fprop,dgrad,wgrad,wgrad_acc", .first_row = 1};
    /* line by line, so that a run cut short (a device call's time limit)
     * keeps what it printed, FAILED lines included */
    setvbuf(stdout, NULL, _IOLBF, 0);
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--cases") && i + 1 < argc) cases_path = argv[++i];
        else if (!strcmp(argv[i], "--ops") && i + 1 < argc) b.ops = argv[++i];
        else if (!strcmp(argv[i], "--only") && i + 1 < argc) only = argv[++i];
        else if (!strcmp(argv[i], "--reps") && i + 1 < argc) reps = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--json") && i + 1 < argc) json_path = argv[++i];
        else if (!strcmp(argv[i], "--peer") && i + 1 < argc) peer_path = argv[++i];
        else if (!strcmp(argv[i], "--untuned")) against = "KILN_TUNING=off";
        else if (!strcmp(argv[i], "--against") && i + 1 < argc && strchr(argv[i + 1], '='))
            against = argv[++i];
        else if (!strcmp(argv[i], "--sizes")) sizes_only = 1;
        else if (!strcmp(argv[i], "--dispatch-report") && i + 1 < argc) report_csv = argv[++i];
        else if (!strcmp(argv[i], "--table") && i + 1 < argc) table_path = argv[++i];
        else {
            fprintf(stderr, "usage: %s [--cases FILE] [--ops LIST] [--only LIST] [--reps N] "
                            "[--json FILE] [--peer FILE] [--untuned | --against ENV=VALUE] | "
                            "--sizes [--cases FILE] | "
                            "--dispatch-report TUNE.csv [--cases FILE] [--table FILE]\n",
                    argv[0]);
            return 2;
        }
    }
    if (reps < 3) reps = 3;
    kiln_tune_shape *cases = NULL;
    size_t n_cases = 0;
    kiln_error err;
    kiln_error_clear(&err);
    if (kiln_tune_shapes_load(cases_path, &cases, &n_cases, &err) != KILN_OK) {
        fprintf(stderr, "kiln_bench: %s\n", err.msg);
        return 2;
    }
    if (report_csv) {
        int rc = kiln_bench_dispatch_report(report_csv, cases, n_cases, table_path);
        free(cases);
        return rc;
    }
    if (sizes_only) {
        int rc = print_sizes(cases, n_cases);
        free(cases);
        return rc;
    }
    char why[512];
    if (kts_gpu_open(&gpu, why, sizeof why) != 0) {
        printf("kiln_bench: skipped: %s\n", why);
        free(cases);
        return 0;
    }
    CU(drv.cuStreamCreate(&b.s, CU_STREAM_NON_BLOCKING));
    b.gen = make_context(KILN_ALLOW_GENERATED, 0);
    if (against) b.plain = make_context(KILN_ALLOW_GENERATED, against);
    b.lt = make_context(KILN_ALLOW_CUBLASLT, 0);
    const char *host = getenv("KILN_BENCH_HOST");
    if (!host || strcmp(host, "0")) {
        setenv("KILN_HOST_CACHE", "0", 1);
        b.nocache = make_context(KILN_ALLOW_GENERATED, 0);
        unsetenv("KILN_HOST_CACHE");
    }

    b.peer = calloc(4 * n_cases + 1, sizeof *b.peer);
    b.n_peer = peer_path && b.peer ? load_peer(peer_path, b.peer, 4 * (int)n_cases) : 0;
    CU(kts_bandwidths(&drv, &b.bw, &b.write_bw));

    b.json = json_path ? fopen(json_path, "w") : NULL;
    if (b.json)
        fprintf(b.json, "{\"device\": \"%s\", \"copy_bandwidth_GBps\": %.1f, "
                        "\"write_bandwidth_GBps\": %.1f, \"rows\": [\n",
                gpu.name, b.bw / 1e9, b.write_bw / 1e9);
    printf("device: %s, copy bandwidth %.0f GB/s, write-only (memset) %.0f GB/s, median of %d\n",
           gpu.name, b.bw / 1e9, b.write_bw / 1e9, reps);
    if (against)
        b.cl += (size_t)snprintf(b.cmp + b.cl, sizeof b.cmp - b.cl, "%-15s %-9s %9s %9s %7s  %s\n",
                                 "case", "op", "shipped", "against", "ratio",
                                 "shipped kernel / against kernel");
    b.tl += (size_t)snprintf(b.table + b.tl, sizeof b.table - b.tl,
                             "%-15s %-9s %9s %9s %9s %9s %7s %7s %7s  %s\n", "case", "op", "kiln",
                             "lt_loop", "lt_dense", "torch", "vs_loop", "vs_dns", "vs_trch", "kernel");
    for (size_t ci = 0; ci < n_cases; ci++)
        if (!only || strstr(only, cases[ci].name)) bench_case(&b, &cases[ci]);
    if (b.json) {
        fprintf(b.json, "\n]}\n");
        fclose(b.json);
    }
    printf("\nTFLOP/s (2·T·N·K per call); vs_* = kiln / peer\n%s", b.table);
    host_time_print();
    if (against)
        printf("\nAs shipped vs against %s, TFLOP/s, means of 4 medians after a warm-up, in the "
               "order ABBA (time_pair); ratio > 1: as shipped faster\n%s",
               against, b.cmp);
    kiln_context_destroy(b.gen);
    kiln_context_destroy(b.plain);
    kiln_context_destroy(b.lt);
    kiln_context_destroy(b.nocache);
    CU(drv.cuStreamDestroy(b.s));
    drv.cuDevicePrimaryCtxRelease(gpu.dev);
    free(b.peer);
    free(cases);
    return 0;
}
