/* SPDX-License-Identifier: Apache-2.0 */
/*
 * gpu_support.h — what the GPU tests, the benchmark and `kiln tune`'s GPU
 * timer share (library kiln_testsupport): opening device 0, exact random
 * data, typed host buffers, a CPU double-precision reference of every op
 * with the full epilogue, the relative-error measure, and the poison check.
 *
 * Nothing here prints, exits or asserts: each caller reports failures its
 * own way (cmocka, a message and exit, a kiln_error).
 *
 * Exact data: kts_rng_exact gives multiples of 1/256 in (-1, 1), which
 * bf16, fp16 and f32 all hold exactly, so a reference sees what the GPU
 * sees and the only error is the GPU's own.
 */
#ifndef KILN_GPU_SUPPORT_H
#define KILN_GPU_SUPPORT_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>  /* KTS_CU_OR_EXIT */
#include <stdlib.h>

#include "driver.h"
#include "kernel_desc.h"
#include "kiln.h"

/* ---- device 0 ---------------------------------------------------------- */

typedef struct kts_gpu {
    kiln_driver drv;
    CUdevice dev;
    CUcontext cu;   /* the primary context of device 0, current on return */
    char name[128];
} kts_gpu;

/* Loads the driver and makes device 0's primary context current.  0, or
 * -1 with why (no driver, no device, cannot open it) in why[size]. */
int kts_gpu_open(kts_gpu *g, char *why, size_t size);

/* NULL when r is CUDA_SUCCESS, else the error's name ("?" if unknown). */
const char *kts_cu_error(const kiln_driver *d, CUresult r);

/* For the benchmarks (programs, not tests): a failing driver call is
 * printed with its place and ends the program. */
#define KTS_CU_OR_EXIT(d, call)                                                                     \
    do {                                                                                           \
        const char *e_ = kts_cu_error((d), (call));                                                \
        if (e_) {                                                                                  \
            fprintf(stderr, "%s:%d: %s failed: %s\n", __FILE__, __LINE__, #call, e_);              \
            exit(1);                                                                               \
        }                                                                                          \
    } while (0)

/* kiln_problem_init(p, op) and the fields every call sets: the geometry,
 * counts in device memory, contiguous a, b and output. */
void kts_problem_init(kiln_problem *p, kiln_op op, int groups, int64_t n, int64_t k,
                      int64_t capacity, CUdeviceptr sizes, CUdeviceptr a, CUdeviceptr b,
                      CUdeviceptr out);

/* The device-to-device copy bandwidth, bytes read + written per second
 * (best of 8 timed 2 GiB copies after 2 warm-ups), into *bytes_per_s:
 * the benchmarks' measured memory ceiling.  CUDA_SUCCESS, or the failing
 * call's result. */
CUresult kts_copy_bandwidth(const kiln_driver *d, double *bytes_per_s);

/* The same copy bandwidth into *copy_bps and, when write_bps is given, the
 * write-only bandwidth of a 2 GiB memset (bytes written per second, best of
 * 8): the ceiling of an op that mostly writes (wgrad with few tokens), which
 * on an H200 lies well below the copy bandwidth. */
CUresult kts_bandwidths(const kiln_driver *d, double *copy_bps, double *write_bps);

/* ---- random data (xorshift64: reproducible from a printed seed) -------- */

uint64_t kts_rng_next(uint64_t *state);
/* An integer in [lo, hi]. */
int kts_rng_int(uint64_t *state, int lo, int hi);
/* A multiple of 1/256 in [-255/256, 255/256]. */
float kts_rng_exact(uint64_t *state);
/* Roughly normal (mean 0, variance 1): a sum of four 16-bit uniforms. */
float kts_rng_normal(uint64_t *state);
/* n values of type t: multiples of 1/256 spread over [lo, hi] (a range of
 * at most 64 wide, so every value is exact in bf16). */
void kts_fill(uint64_t *state, void *dst, kiln_dtype t, size_t n, float lo, float hi);

/* ---- typed elements ---------------------------------------------------- */

void kts_store(void *buf, size_t i, kiln_dtype t, float v);
float kts_load(const void *buf, size_t i, kiln_dtype t);

/* A rows × ld host matrix of exact random values in its first cols columns
 * (zeros past them); *enc gets the same values encoded as t.  NULL when out
 * of memory. */
float *kts_rand_matrix(uint64_t *state, int64_t rows, int64_t cols, int64_t ld, kiln_dtype t,
                       void **enc);

/* ---- the reference ----------------------------------------------------- */

/* One grouped problem on the host, as floats.  Groups start at start[g]
 * and have rows[g] valid rows (wgrad: rows[g] tokens).  NULL terms are off. */
typedef struct kts_problem {
    kiln_op op;
    int64_t n, k;
    int64_t lda;                 /* of a (0: its columns) */
    const float *a, *b;          /* a: capacity × lda; b: G·N × K (wgrad: capacity × K) */
    const float *bt;             /* dgrad, optional: b transposed per group, G·K × N (kts_transpose_b) */
    const int64_t *start, *rows;
    float alpha;                 /* when alphas is NULL */
    const float *alphas;         /* [G] */
    const float *row_scale;      /* [capacity] */
    const float *bias;           /* [G × output columns] */
    int scale_bias;              /* the row scale multiplies the bias too */
    float beta;
    const float *c;              /* [capacity × output columns] */
    const float *init;           /* wgrad accumulate: the old dW, G·N × ldd */
    int64_t ldd;                 /* of init */
} kts_problem;

/* From host counts: group g's first row start[g] and its rows below the
 * capacity rows[g]; returns Σ counts (which may exceed the capacity). */
int64_t kts_group_rows(const int32_t *counts, int groups, int64_t capacity, int64_t *start,
                       int64_t *rows);
/* The output columns: N for fprop, K for dgrad and wgrad. */
int64_t kts_out_cols(const kts_problem *p);
/* The exact result at (group g, row i of the group's output, column j):
 * fprop/dgrad row start[g] + i, wgrad row g·N + i. */
double kts_reference(const kts_problem *p, int g, int64_t i, int64_t j);
/* b (G·N × K) transposed per group into a new G·K × N array, or NULL if out
 * of memory: dgrad's reference then reads its rows whole, where b's columns
 * took most of a deep case's time (30 s of the Mixtral fc2 decode shape). */
float *kts_transpose_b(const float *b, int groups, int64_t n, int64_t k);

/* ---- comparing ----------------------------------------------------------- */

/* Relative Frobenius error ‖got − ref‖ / ‖ref‖ (‖got − ref‖ when ref is 0),
 * accumulated element by element; a NaN in got makes it NaN. */
typedef struct kts_err {
    double num, den;
    size_t n, nan;
} kts_err;

void kts_err_add(kts_err *e, double got, double ref);
double kts_err_rel(const kts_err *e);

/* ---- poison -------------------------------------------------------------- */

/* Outputs are filled with KTS_POISON bytes before a call (NaN in bf16, fp16
 * and f32), so an element a kernel forgets shows as NaN. */
#define KTS_POISON 0xFF

/* How many of the n elements of esize bytes whose valid[i] is 0 differ
 * between before and after: a kernel must leave those bytes alone. */
size_t kts_changed_outside(const void *before, const void *after, const unsigned char *valid,
                           size_t n, size_t esize);
/* The index of the first byte of buf[from, bytes) that is not poison, or
 * -1 when all are. */
int64_t kts_first_unpoisoned(const void *buf, size_t from, size_t bytes);

#endif
