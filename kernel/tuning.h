/* SPDX-License-Identifier: Apache-2.0 */
/*
 * tuning.h — tuning tables: the fastest generated kernel for each
 * (arch, op, types, epilogue, shape class), as `kiln tune` measured it.
 *
 * Written by the compiler (`kiln tune`), read by the runtime's dispatcher
 * (and carried in bundles), so this module needs neither Lua nor libyaml
 * nor CUDA.  The file is plain text (docs/tuning.md):
 *
 *   kiln-tuning 1
 *   # comments and blank lines are allowed anywhere after the header
 *   ARCH OP A B OUT EPILOGUE CLASS -> KERNEL BUNDLE_ID CACHE_KEY MS RUNNERUP RUNNERUP_MS DESC...
 *
 * DESC, the rest of the line, is kiln_desc_format's text with the launch
 * description (it has spaces, so it comes last).  RUNNERUP and RUNNERUP_MS
 * are "-" when only one kernel was timed.
 *
 * Shape classes come from what the host knows at call time without reading
 * the device: G, N, K and the capacity (the upper bound of Σm), so tokens
 * per group is capacity / G rounded up.  Buckets (upper bounds, inclusive):
 *   tokens per group  t16 t64 t256 t1024 tmax
 *   groups            g8 g32 g128 gmax
 *   N, K              n1024 n2048 n4096 n8192 nmax   (k... the same)
 * written "t1024.g32.n4096.k8192".
 *
 * Threads: a loaded table is never written again; lookups may run from any
 * number of threads at once.  Ownership: the table owns its entries' text.
 */
#ifndef KILN_TUNING_H
#define KILN_TUNING_H

#include "common.h"
#include "kernel_desc.h"

#define KILN_TUNING_FORMAT 1
#define KILN_TUNING_MAGIC "kiln-tuning"
#define KILN_TUNING_SIG_MAX 96

/* ---- shape classes ------------------------------------------------------ */

enum { KILN_SHAPE_T_BUCKETS = 5, KILN_SHAPE_G_BUCKETS = 4, KILN_SHAPE_NK_BUCKETS = 5 };

typedef struct kiln_shape_class {
    int t, g, n, k;              /* bucket indices, 0 = smallest */
} kiln_shape_class;

/* Copies the text field v into dst[size] whole; 0 where it does not fit
 * (dst untouched). The table parser and the tuner's journal both read
 * fields this way. */
int kiln_tuning_copy_field(char *dst, size_t size, const char *v);

/* Class of a call with `groups` groups, `capacity` rows in all (tokens per
 * group = ceil(capacity / groups)) and weights [G,N,K]. */
void kiln_shape_class_of(int64_t groups, int64_t capacity, int64_t n, int64_t k,
                         kiln_shape_class *out);
/* "t1024.g32.n4096.k8192"; size >= 32 is always enough. */
void kiln_shape_class_name(const kiln_shape_class *c, char *out, size_t size);
/* Parses kiln_shape_class_name's text; 1 if valid. */
int kiln_shape_class_parse(const char *s, kiln_shape_class *out);
/* Inclusive upper bound of bucket i of each axis, or -1 for the last
 * (unbounded) bucket; for docs, tests and plots. */
int64_t kiln_shape_class_bound(char axis, int i);

/* The value a class stands for on an axis: its upper bound (the sizes
 * that get measured are round numbers, which sit on the inclusive upper
 * bounds: 1024 tokens, N 4096), and twice the last bound for the unbounded
 * bucket; -1 for a bad index. */
int64_t kiln_shape_class_rep(char axis, int i);

/* How far a call (groups, capacity, N, K, as kiln_shape_class_of takes
 * them) lies from what class c was measured on, in octaves: the sum over
 * the axes of |log2(value / rep)|, weighted by how much each axis moves
 * the best kernel — tokens per group 1 (the m tile and its padded rows),
 * N and K 0.5 (the n tile, the wave count, the K loop), groups 0.25 (a
 * multiplier of the tile count only).  Continuous in the call's sizes, so
 * a call one row past a bucket edge is as near its neighbour's class as
 * the call one row before it. */
double kiln_shape_class_distance(const kiln_shape_class *c, int64_t groups, int64_t capacity,
                                 int64_t n, int64_t k);

/* ---- keys --------------------------------------------------------------- */

/* The epilogue signature names what a call asks for beyond D = A·B, as
 * '+'-joined terms, or "plain" when nothing.  The terms are the text keys of
 * the knobs marked for signatures in knobs.c, in its order:
 *   fprop, dgrad: weights bias row_scale scale_bias alpha beta fp8_recipe fp8_accumulate
 *   wgrad:        wgrad_output accumulate dbias
 * (weights: weights as a device array of pointers; alpha: per-group α;
 * wgrad_output: discrete output; dbias: the bias gradient, d_dbias or
 * d_dbias_ptrs; scale_bias only with bias and row_scale), then for 8-bit
 * inputs fp8_recipe=tensor|row|block and fp8_accumulate (promotion; the
 * block recipe always promotes).  A knob with several values besides the
 * default names its value in its term ("fp8_recipe=row"), so each recipe
 * has keys of its own. */
typedef struct kiln_tuning_key {
    char arch[KILN_ARCH_MAX];    /* "sm_90a" */
    kiln_op op;
    kiln_dtype a_type, b_type, out_type;
    char epilogue[KILN_TUNING_SIG_MAX];
    kiln_shape_class shape;
} kiln_tuning_key;

/* The signature of a call (from which pointers are set, as kiln.h says). */
void kiln_tuning_sig_from_problem(const kiln_problem *p, char *out, size_t size);
/* The whole key of a call on a device of arch.  This is what the runtime's
 * dispatcher computes before kiln_tuning_lookup. */
void kiln_tuning_key_from_problem(const kiln_problem *p, const char *arch, kiln_tuning_key *key);
/* 1 if sig is a canonical signature valid for op; else 0 and a reason. */
int kiln_tuning_sig_valid(const char *sig, kiln_op op, char *why, size_t why_size);

int kiln_tuning_key_compare(const kiln_tuning_key *a, const kiln_tuning_key *b);
/* "sm_90a fprop bf16 bf16 bf16 plain t1024.g32.n4096.k8192" (the key part
 * of a table line). */
void kiln_tuning_key_format(const kiln_tuning_key *k, kiln_strbuf *out);

/* ---- tables ------------------------------------------------------------- */

typedef struct kiln_tuning_entry {
    kiln_tuning_key key;
    char kernel[KILN_NAME_MAX];  /* the winner's name */
    char bundle_id[65];          /* kiln_kernel_id of the winner (bundle lookup) */
    char cache_key[65];          /* its cache key (cache lookup, same kiln/NVRTC) */
    double median_ms;            /* the winner's time */
    char runnerup[KILN_NAME_MAX];/* "" when none */
    double runnerup_ms;          /* 0 when none */
    char *desc;                  /* canonical description with launch */
    kiln_kernel_desc kdesc;      /* desc, parsed */
    kiln_launch_desc launch;
    int line;                    /* in the file it came from; 0 if built */
} kiln_tuning_entry;

typedef struct kiln_tuning_table kiln_tuning_table;

kiln_status kiln_tuning_table_create(kiln_tuning_table **out, kiln_error *err);
void kiln_tuning_table_destroy(kiln_tuning_table *t);

/* Adds a copy of e (e->desc is copied and parsed; kdesc/launch/line are
 * ignored).  Refuses a key already present, a bad signature for the op, a
 * desc that does not parse or does not match the key's op and types. */
kiln_status kiln_tuning_table_add(kiln_tuning_table *t, const kiln_tuning_entry *e,
                                  kiln_error *err);

/* Parses a table.  path only names the text in messages, which read
 * "path:LINE: message".  Rejects a missing or foreign header, another
 * format version, malformed lines, unknown ops or types, bad classes or
 * signatures, and duplicate keys.  On error *out is NULL. */
kiln_status kiln_tuning_table_parse(const char *text, size_t len, const char *path,
                                    kiln_tuning_table **out, kiln_error *err);
kiln_status kiln_tuning_table_load(const char *path, kiln_tuning_table **out, kiln_error *err);

/* The text form: header, the comment lines given (each without '#', may be
 * NULL), then the entries sorted by key.  Deterministic. */
void kiln_tuning_table_format(const kiln_tuning_table *t, const char *const *comments,
                              kiln_strbuf *out);
/* Writes the text form atomically. */
kiln_status kiln_tuning_table_save(const kiln_tuning_table *t, const char *const *comments,
                                   const char *path, kiln_error *err);

/* Adds copies of src's entries whose keys dst lacks (dst's entries win), so
 * a runtime given several tables (options, bundles) can hold one; *added
 * (may be NULL) counts them. */
kiln_status kiln_tuning_table_merge(kiln_tuning_table *dst, const kiln_tuning_table *src,
                                    size_t *added, kiln_error *err);

size_t kiln_tuning_table_count(const kiln_tuning_table *t);

/* The timer a table was measured with, from its "# written by kiln tune
 * ...; timer X" comment: "gpu:NVIDIA_H200", "fake" (a formula, not a GPU:
 * its winners mean nothing), or "" when the comment is missing. */
const char *kiln_tuning_table_timer(const kiln_tuning_table *t);
/* The same, read from a table's text (before or without parsing it). */
void kiln_tuning_text_timer(const char *text, size_t len, char *out, size_t size);
/* Entries in key order. */
const kiln_tuning_entry *kiln_tuning_table_at(const kiln_tuning_table *t, size_t i);

/* The entry for exactly this key, or NULL.  O(log n). */
const kiln_tuning_entry *kiln_tuning_lookup(const kiln_tuning_table *t, const kiln_tuning_key *key);

/* The entry with the same arch, op, types and signature whose shape class
 * is closest (kiln_shape_class_distance from the key's class's
 * representative sizes); NULL if none.  *distance (may be NULL) is that in
 * hundredths of an octave, 0 for an exact hit.  The dispatcher does the
 * same from the call's own sizes, among the entries that serve it. */
const kiln_tuning_entry *kiln_tuning_lookup_nearest(const kiln_tuning_table *t,
                                                    const kiln_tuning_key *key, int *distance);

#endif /* KILN_TUNING_H */
