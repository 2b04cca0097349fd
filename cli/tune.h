/* SPDX-License-Identifier: Apache-2.0 */
/*
 * tune.h — the tuner, the pieces of `kiln tune` (tuner.c; the GPU timer in
 * tune_gpu.c; cmd_tune.c drives them): the shapes
 * file, what each variant is timed on, the timer backends, the journal that
 * makes a killed run resumable, choosing the winners, and the SVG plot.
 *
 * Nothing here prints or exits; errors come back in a kiln_error.
 */
#ifndef KILN_TUNE_H
#define KILN_TUNE_H

#include "tuning.h"
#include "nvrtc.h"

/* ---- shapes ------------------------------------------------------------- */

/* One problem shape: a line of a shapes file (bench/cases.tsv's format):
 *   name  groups  tokens_per_group  K  N  sizes
 * sizes: uniform | skew | mod64_1 (docs/tuning.md). */
typedef struct kiln_tune_shape {
    char name[64];
    int groups;
    int64_t tokens_per_group;
    int64_t k, n;
    char sizes[16];
    int line;
} kiln_tune_shape;

kiln_status kiln_tune_shapes_parse(const char *text, size_t len, const char *path,
                                   kiln_tune_shape **out, size_t *n, kiln_error *err);
kiln_status kiln_tune_shapes_load(const char *path, kiln_tune_shape **out, size_t *n,
                                  kiln_error *err);
/* Fills sizes[G] (host counts) and returns T = Σ sizes. */
int64_t kiln_tune_shape_sizes(const kiln_tune_shape *s, int32_t *sizes);
/* T of the shape (groups × tokens per group). */
int64_t kiln_tune_shape_total(const kiln_tune_shape *s);
/* "name:G:tokens:K:N:sizes": identifies a shape in the journal. */
void kiln_tune_shape_id(const kiln_tune_shape *s, char *out, size_t size);
/* 2·T·N·K. */
double kiln_tune_shape_flops(const kiln_tune_shape *s);

/* ---- what a variant is timed on ---------------------------------------- */

/* The call a variant is timed with: its op and types, contiguous weights,
 * and every epilogue term the variant compiles in (so the time includes
 * them).  Variants with equal configs share buffers. */
typedef struct kiln_tune_config {
    kiln_op op;
    kiln_dtype a_type, b_type, out_type;
    kiln_epilogue_desc epilogue; /* fprop/dgrad: the terms used */
    kiln_wgrad_output wgrad_output;
    int accumulate;
    int dbias;                   /* wgrad: the bias gradient too (f32, dense [G, N]) */
    kiln_fp8_recipe fp8_recipe;  /* 8-bit inputs: the variant's recipe, its scales */
    int fp8_promote;             /* fp32 promotion every 128 of k (block: always) */
    char sig[KILN_TUNING_SIG_MAX]; /* kiln_tuning_sig_from_problem of that call */
} kiln_tune_config;

void kiln_tune_config_of(const kiln_kernel_desc *d, kiln_tune_config *out);
int kiln_tune_config_equal(const kiln_tune_config *a, const kiln_tune_config *b);
/* A kiln_problem (no pointers) for cfg on shape s with capacity T: the
 * fields the tuning key and the grid are computed from. */
void kiln_tune_problem_of(const kiln_tune_config *cfg, const kiln_tune_shape *s,
                          kiln_problem *p);

/* ---- the fp8 reference ------------------------------------------------- */

/* The GPU timer's inputs are a host chunk repeated over the device buffer
 * (tune_gpu.c, alloc_fill): element i of the buffer is element i % n of
 * the chunk. */
typedef struct kiln_tune_chunk {
    const void *data;            /* NULL: the term is off */
    size_t n;                    /* elements */
    kiln_dtype type;
} kiln_tune_chunk;

/* One fp8 call (kiln.h, kiln_fp8), as the GPU timer makes it: A [capacity,
 * k_red], B [G, n_out, k_red] (fprop: W; dgrad: W transposed, fp8.d_bt),
 * the recipe's scales (block: scale_a with ld capacity), the epilogue's
 * terms (bias [G, n_out], row_scale [capacity], alpha [G], c [capacity,
 * n_out]; beta when c is given; scale_bias). */
typedef struct kiln_tune_fp8_call {
    kiln_fp8_recipe recipe;
    int groups;
    int64_t capacity, n_out, k_red;
    const int32_t *sizes;        /* [G] host counts */
    kiln_tune_chunk a, b, scale_a, scale_b;
    kiln_tune_chunk bias, row_scale, alpha, c;
    float beta;
    int scale_bias;
} kiln_tune_fp8_call;

/* The exact result (double, from the dequantized inputs) of the call at
 * rows[i] × cols[j] into ref[i * n_cols + j], and into mag[...] the sum of
 * the magnitudes of the terms summed (scales, row scale and α applied):
 * what the accumulation's rounding is proportional to.  A row at or past
 * Σ sizes gets 0.  KILN_ERROR_OUT_OF_MEMORY, or KILN_OK. */
kiln_status kiln_tune_fp8_reference(const kiln_tune_fp8_call *call, const int64_t *rows,
                                    size_t n_rows, const int64_t *cols, size_t n_cols, double *ref,
                                    double *mag, kiln_error *err);

/* ---- timer backends ----------------------------------------------------- */

/* One compiled variant. */
typedef struct kiln_tune_variant {
    const kiln_kernel_desc *desc;
    const kiln_launch_desc *launch;
    const char *arch;
    const void *cubin;
    size_t cubin_size;
} kiln_tune_variant;

typedef struct kiln_tune_measure {
    int ok;                      /* 1: ran and matched the reference */
    double median_ms, min_ms, max_ms;
    int runs;
    double rel_err;              /* vs the reference; 0 for the fake timer */
    int fatal;                   /* the device is unusable after this (context lost) */
    char note[256];              /* why not ok */
} kiln_tune_measure;

/* A backend: prepare buffers for (config, shape), time variants on them,
 * release them.  Each instance serves one device, from one thread. */
typedef struct kiln_tune_timer kiln_tune_timer;
typedef struct kiln_tune_timer_ops {
    kiln_status (*prepare)(kiln_tune_timer *t, const kiln_tune_config *cfg,
                           const kiln_tune_shape *shape, const int32_t *sizes, int64_t total,
                           kiln_error *err);
    /* KILN_OK with m->ok = 0 and a note when the variant failed (launch error,
     * wrong result); an error status only when the timer itself broke. */
    kiln_status (*time)(kiln_tune_timer *t, const kiln_tune_variant *v, kiln_tune_measure *m,
                        kiln_error *err);
    void (*cleanup)(kiln_tune_timer *t);
    void (*destroy)(kiln_tune_timer *t);
} kiln_tune_timer_ops;

struct kiln_tune_timer {
    const kiln_tune_timer_ops *ops;
    char id[96];                 /* "fake", "gpu:NVIDIA_H200": journal lines are
                                    reused only by the same id */
    char arch[16];               /* variants of other archs are not timed; "" = any */
    char device[128];            /* for messages */
    int device_index;
    void *self;
};

/* The fake backend: deterministic pseudo-times from the tile shape and the
 * problem, no GPU.  $KILN_TUNE_FAKE_BAD=SUBSTRING makes variants whose name
 * contains SUBSTRING fail the correctness check (for tests). */
kiln_status kiln_tune_fake_create(int device_index, kiln_tune_timer **out, kiln_error *err);
/* The fake time of desc on shape (ms); exposed for tests. */
double kiln_tune_fake_ms(const kiln_kernel_desc *d, const kiln_launch_desc *l,
                         const kiln_tune_shape *s, const int32_t *sizes);

/* The GPU backend (tune_gpu.c): the runtime's driver loader and launcher,
 * CUDA events, rotating input buffers, a reference through kiln_gemm.
 * cache_dir is for the reference kernel (NULL: the default).  hold_s > 0:
 * each variant first runs back to back for that many seconds, so that it is
 * timed at the clock it settles to at the card's power limit (`--hold`); the
 * timer's id then ends "@held<S>s", so a journal of bursts is not reused. */
kiln_status kiln_tune_gpu_count(int *devices, kiln_error *err);
kiln_status kiln_tune_gpu_create(int device_index, const char *cache_dir, double hold_s,
                                 kiln_tune_timer **out, kiln_error *err);

void kiln_tune_timer_destroy(kiln_tune_timer *t);

/* ---- journal ------------------------------------------------------------ */

/* One finished (variant, shape) measurement; a line of the journal:
 *   bundle_id \t shape_id \t timer_id \t ok \t median_ms \t rel_err \t runs \t name \t note
 * Appended and fsync'd as each measurement ends, so a killed run resumes
 * with what it had. */
typedef struct kiln_tune_record {
    char bundle_id[65];
    char shape_id[160];
    char timer_id[96];
    kiln_tune_measure m;
    char name[KILN_NAME_MAX];
} kiln_tune_record;

typedef struct kiln_tune_journal kiln_tune_journal;

/* Opens (creating) path; reads the records there.  A torn last line (a kill
 * in mid-write) is cut off; other bad lines are skipped and counted. */
kiln_status kiln_tune_journal_open(const char *path, kiln_tune_journal **out, kiln_error *err);
void kiln_tune_journal_close(kiln_tune_journal *j);
size_t kiln_tune_journal_count(const kiln_tune_journal *j);
const kiln_tune_record *kiln_tune_journal_at(const kiln_tune_journal *j, size_t i);
size_t kiln_tune_journal_skipped(const kiln_tune_journal *j); /* bad lines ignored */
int kiln_tune_journal_repaired(const kiln_tune_journal *j);   /* 1: a torn line was cut */
/* The record for (bundle id, shape id, timer id), or NULL. */
const kiln_tune_record *kiln_tune_journal_find(const kiln_tune_journal *j, const char *bundle_id,
                                               const char *shape_id, const char *timer_id);
/* Appends r (one write, then fsync) and keeps it.  Not thread-safe: callers
 * serialise. */
kiln_status kiln_tune_journal_append(kiln_tune_journal *j, const kiln_tune_record *r,
                                     kiln_error *err);

/* ---- choosing ----------------------------------------------------------- */

typedef enum kiln_tune_state {
    KILN_TUNE_PENDING = 0,
    KILN_TUNE_TIMED = 1,         /* measured and correct */
    KILN_TUNE_BAD = 2,           /* ran but failed (launch, correctness) */
    KILN_TUNE_SKIPPED = 3,       /* not timed: variant did not compile / spills / arch */
} kiln_tune_state;

typedef struct kiln_tune_cell {
    kiln_tune_state state;
    kiln_tune_measure m;
    int from_journal;
} kiln_tune_cell;

/* What `kiln tune` knows about one variant. */
typedef struct kiln_tune_entry {
    const char *name;
    const char *arch;
    const char *bundle_id, *cache_key;
    const char *desc_text;       /* canonical, with launch */
    kiln_kernel_desc desc;
    kiln_launch_desc launch;
    kiln_tune_config cfg;
    const void *cubin;           /* borrowed from the build results */
    size_t cubin_size;
    int usable;                  /* compiled, no spills, timed on this arch */
    char status[160];            /* "ok", "failed: ...", "spills 24 B" */
    kiln_tune_cell *cells;       /* [n_shapes] */
} kiln_tune_entry;

/* Picks the fastest variant per tuning key.  Shapes of one class are scored
 * together: a variant qualifies for a key when it is timed and correct on
 * every shape of the class; its score is the geometric mean of its times
 * there, which is also the time written.  Adds one entry per key to table. */
kiln_status kiln_tune_choose(const kiln_tune_entry *v, size_t n_variants,
                             const kiln_tune_shape *shapes, size_t n_shapes,
                             kiln_tuning_table *table, kiln_error *err);

/* ---- plot --------------------------------------------------------------- */

/* A heat map as hand-written SVG: one row per variant (grouped by what they
 * are timed as: op, types, epilogue), one column per shape, the colour the
 * TFLOP/s relative to the best variant of the same tuning key on that shape
 * (with a colour scale), the value in each cell, and table's winner of each
 * key outlined (class="winner", with data-kernel, data-shape, data-key).
 * Boxes are sized from their text so that labels do not overlap; title may
 * hold several lines ('\n'). */
void kiln_tune_plot_svg(const kiln_tune_entry *v, size_t n_variants,
                        const kiln_tune_shape *shapes, size_t n_shapes,
                        const kiln_tuning_table *table, const char *title, kiln_strbuf *out);

#endif /* KILN_TUNE_H */
