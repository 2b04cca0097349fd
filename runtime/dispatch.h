/* SPDX-License-Identifier: Apache-2.0 */
/*
 * dispatch.h — which backend serves a call: a flat cascade of pure
 * predicates (ggml-style should_use_*), cuBLASLt last.
 *
 *   the tuning tables' entry for (arch, op, types, epilogue, shape class),
 *     unless it failed to load                              ("exact table")
 *   ▸ the entry of the nearest measured class of the same arch, op, types
 *     and epilogue, within kiln_dispatch_nearest_max octaves of the call
 *     (kiln_shape_class_distance), unless the cost model rates its kernel
 *     more than KILN_DISPATCH_NEAREST_OVERRULE behind its own first
 *                                                           ("nearest class")
 *   ▸ for fprop/dgrad with epilogue terms: the catalog's kernel with those
 *     terms of the tile and schedule the two rules above name for the same
 *     call without them                                    ("twin")
 *   ▸ the generated kernel the cost model ranks first (dispatch_model.h)
 *     among the catalog's defaults and the tables' kernels that serve the
 *     call                                                  ("model")
 *   ▸ cuBLASLt (a per-group loop; needs host sizes; not graph-safe)
 * The choice's reason names the rule.  No step depends on which bucket a
 * size falls in beyond the exact lookup, so a call one row past a class
 * edge keeps its neighbour's kernel instead of falling to a default.
 *
 * Pure: reads only the problem (no device memory), the parsed kernel
 * descriptions and the tables, so it is unit-tested on the CPU.  Loading
 * the chosen kernel is kernels.c's part.  Of the problem's pointers it reads
 * only whether each is given, never a value nor what host_sizes holds: the
 * context remembers decisions by that (dispatch_memo.h), and
 * tests/unit/test_dispatch_memo.c fails when a predicate reads more.
 */
#ifndef KILN_DISPATCH_H
#define KILN_DISPATCH_H

#include "kernel_desc.h"
#include "tuning.h"

/* One candidate generated kernel. */
typedef struct kiln_dispatch_kernel {
    const char *arch;               /* arch its cubin is built for ("sm_90a") */
    const kiln_kernel_desc *desc;
    const kiln_launch_desc *launch;
} kiln_dispatch_kernel;

typedef struct kiln_dispatch_input {
    const kiln_problem *problem;    /* already validated */
    const char *arch;               /* the device's ("sm_90a" for cc 9.0) */
    const kiln_dispatch_kernel *kernels;
    size_t n_kernels;
    unsigned allowed;               /* KILN_ALLOW_* after KILN_BACKEND */
    const char *forced_by;          /* "KILN_BACKEND=generated" or NULL: for messages */
    const kiln_tuning_table *tuning;/* merged tuning tables, or NULL */
    const unsigned char *tuned_unavailable; /* per table entry: 1 once it failed to
                                       load (then the heuristic serves its key) */
    const char *only_kernel;        /* $KILN_KERNEL: only the generated kernel of this
                                       name may serve (to compare kernels on one
                                       shape), or NULL */
} kiln_dispatch_input;

/* Bits of kiln_dispatch_options.skip.  With both set the tables only add
 * their kernels to the model's candidates. */
enum { KILN_DISPATCH_SKIP_EXACT = 1, KILN_DISPATCH_SKIP_NEAREST = 2 };

/* What kiln_dispatch_with takes beyond the input (kiln_dispatch: zeros). */
typedef struct kiln_dispatch_options {
    int sms;                        /* the device's SMs for the model; 0: 132 */
    unsigned skip;                  /* KILN_DISPATCH_SKIP_*: rules not to apply (the
                                       benchmark's model-alone report, tests) */
    int clusters[3];                /* the device's resident clusters of 2, 4, 8 CTAs
                                       (clusters.h); 0: not known, and the k-cut
                                       kernels are not priced */
} kiln_dispatch_options;

/* Which rule chose (kiln_dispatch_choice.rule). */
typedef enum kiln_dispatch_rule {
    KILN_DISPATCH_BY_EXACT = 1,     /* the tables' entry for the call's key */
    KILN_DISPATCH_BY_NEAREST,       /* the entry of the nearest measured class */
    KILN_DISPATCH_BY_MODEL,         /* the cost model's first */
    KILN_DISPATCH_BY_CUBLASLT,
    KILN_DISPATCH_BY_TWIN,          /* the catalog's kernel of the tile the tables
                                       name for the call without its epilogue terms */
} kiln_dispatch_rule;

/* The farthest (kiln_shape_class_distance, octaves) a measured class may
 * lie from a call and still choose its kernel; beyond, the model chooses
 * (kiln_dispatch_nearest_max picks one for a call).  wgrad, and 8-bit
 * inputs: one and a half, a factor 2.8 in tokens per group, or 2 in N and
 * 2 in K together, still say more about the call than the model does; a
 * decode call (8 tokens a group) is 7 octaves from a class measured at
 * 1024.  fprop and dgrad with 16-bit inputs: half an octave, so a capacity
 * a few rows past a bucket edge keeps its class's kernel while shapes
 * farther off take the model, which chose better there on shapes no entry
 * was measured on: the corpus less each case's own class (H200) and the
 * held-out models of bench/holdout.tsv (H100; docs/dispatch.md,
 * seventeenth session). */
#define KILN_DISPATCH_NEAREST_MAX 1.5
#define KILN_DISPATCH_NEAREST_MAX_FWD16 0.5
/* The model overrules the nearest class when it expects that class's
 * kernel to take more than this fraction longer on the call than its own
 * first among the defaults: a class a few octaves off can name a tile the
 * call's shape does not suit (a 64x128 decode kernel for a skewed call of
 * thousands of rows a group, 1.37x the best).  On the committed H200 runs
 * this took the cascade on shapes of unmeasured classes from 1.038 to 1.030
 * of the best on the held-out fp8 shapes (worst 1.37 to 1.16) and bf16
 * dgrad's from 1.035 to 1.031, worsening no summary; 0 to 10% did about as
 * well, 15% and above less (docs/dispatch.md, thirty-first session). */
#define KILN_DISPATCH_NEAREST_OVERRULE 0.05
double kiln_dispatch_nearest_max(const kiln_problem *p);

typedef struct kiln_dispatch_choice {
    kiln_backend backend;
    long kernel;                    /* index into kernels, or -1 */
    long tuned;                     /* index of the tuning table entry, or -1 */
    kiln_dispatch_rule rule;
    char reason[256];
} kiln_dispatch_choice;

/* Shape class of a call: 0 small (tokens per group < 128, < 192 for fp8
 * row-wise with promotion; wgrad, whose reduction the tokens are, < 512
 * into dense dW and < 1024 into discrete), 1 large. */
int kiln_dispatch_shape_class(const kiln_problem *p);

/* The device arch name for a compute capability: "sm_90a" for 9.0 (the
 * wgmma/TMA variant), "sm_100a" for 10.0, else "sm_<major><minor>". */
void kiln_dispatch_arch_name(int major, int minor, char *out, size_t size);

/* 1 if the kernel serves the call; else 0 and a reason in why. */
int kiln_should_use_kernel(const kiln_dispatch_kernel *k, const char *arch, const kiln_problem *p,
                           char *why, size_t why_size);

/* Chooses a backend.  KILN_OK with *out filled, or KILN_ERROR_UNSUPPORTED
 * saying why no backend can serve the call ("no generated kernel for
 * fp16→f32 wgrad discrete on sm_90a, and no host sizes for cuBLASLt"). */
kiln_status kiln_dispatch(const kiln_dispatch_input *in, kiln_dispatch_choice *out,
                          kiln_error *err);
/* The same with options (o may be NULL: kiln_dispatch's zeros). */
kiln_status kiln_dispatch_with(const kiln_dispatch_input *in, const kiln_dispatch_options *o,
                               kiln_dispatch_choice *out, kiln_error *err);

/* "bf16→bf16 fprop (pointer-array weights, bias, row scale) on sm_90a". */
void kiln_dispatch_describe(const kiln_problem *p, const char *arch, char *out, size_t size);

#endif /* KILN_DISPATCH_H */
