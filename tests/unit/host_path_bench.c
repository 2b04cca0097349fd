/* SPDX-License-Identifier: Apache-2.0 */
/* host_path_bench.c — what kiln_gemm's own host path costs per call, on
 * the CPU: the fake driver of tests/support/fake_driver.c returns from
 * every launch at once, so the time is kiln's (validation, the dispatch
 * memo or cascade, the tensor-map cache or encoding, the argument block)
 * and none of the driver's.  kiln_bench's host-time column is this plus
 * cuLaunchKernel(Ex).  Prints, per problem, the best of 7 loops' mean
 * µs per call, with the per-call caches and without.
 *   build/tests/unit/host_path_bench [calls per loop, default 20000] */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "fake_driver.h"
#include "problem.h"

static double now_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec * 1e-3;
}

typedef struct row {
    const char *name;
    kiln_op op;
    int groups, accumulate;
    int64_t n, k;
} row;

/* µs per call (best of 7 loops of `calls`), or -1 when the call fails. */
static double time_calls(kiln_context *ctx, const kiln_problem *p, int calls)
{
    if (kiln_gemm(ctx, p, NULL) != KILN_OK) return -1;
    double best = 1e30;
    for (int r = 0; r < 7; r++) {
        double t0 = now_us();
        for (int i = 0; i < calls; i++) kiln_gemm(ctx, p, NULL);
        double t = (now_us() - t0) / calls;
        if (t < best) best = t;
    }
    return best;
}

int main(int argc, char **argv)
{
    int calls = argc > 1 ? atoi(argv[1]) : 20000;
    if (calls < 1) {
        fprintf(stderr, "usage: host_path_bench [calls per loop >= 1]\n");
        return 2;
    }
    kiln_context *cached = fake_context(1), *fresh = fake_context(0);
    if (!cached || !fresh) {
        fprintf(stderr, "host_path_bench: no context (the built-in catalog did not open)\n");
        return 1;
    }
    static const row rows[] = {
        {"fprop g32", KILN_OP_FPROP, 32, 0, 4096, 4096},
        {"fprop g256", KILN_OP_FPROP, 256, 0, 1024, 2048},
        {"dgrad g32", KILN_OP_DGRAD, 32, 0, 4096, 4096},
        {"wgrad g32", KILN_OP_WGRAD, 32, 0, 4096, 4096},
        {"wgrad g256", KILN_OP_WGRAD, 256, 0, 1024, 2048},
        {"wgrad_acc g32", KILN_OP_WGRAD, 32, 1, 4096, 4096},
        {"wgrad_acc g256", KILN_OP_WGRAD, 256, 1, 1024, 2048},
    };
    printf("%-16s %10s %10s  kernel\n", "problem", "us cached", "us uncached");
    int failed = 0;
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
        const row *r = &rows[i];
        kiln_problem p;
        kiln_problem_init(&p, r->op);
        p.groups = r->groups;
        p.n = r->n;
        p.k = r->k;
        p.capacity = 32768;
        p.d_a = FAKE(0x7f0000000000);
        p.d_b = FAKE(0x7e0000000000);
        p.d_out = FAKE(0x7d0000000000);
        p.d_sizes = FAKE(0x7c0000000000);
        if (r->accumulate) {
            p.accumulate = 1;
            p.out_type = KILN_DTYPE_F32;
        }
        double c = time_calls(cached, &p, calls), u = time_calls(fresh, &p, calls);
        if (c < 0 || u < 0) {
            fprintf(stderr, "%s: %s\n", r->name, kiln_last_error(c < 0 ? cached : fresh));
            failed = 1;
            continue;
        }
        kiln_call_report rep;
        kiln_last_call(cached, &rep);
        printf("%-16s %10.3f %10.3f  %s\n", r->name, c, u, rep.kernel);
    }
    fake_context_free(cached);
    fake_context_free(fresh);
    return failed;
}
