/* SPDX-License-Identifier: Apache-2.0 */
/*
 * kernel_desc.h — the canonical description of one generated kernel.
 *
 * The compiler fills it from a spec (compiler/spec.c) and from what the
 * template reports about launching (compiler/expand.c); the runtime reads it
 * back from the kernel catalog, the cache or a bundle to decide whether a
 * kernel serves a call and how to launch it.  Its text form (kiln_desc_format)
 * is canonical: equal descriptions give equal text, which goes into cache
 * keys, so fields are always written in one order with one spelling.
 */
#ifndef KILN_KERNEL_DESC_H
#define KILN_KERNEL_DESC_H

#include "kiln.h"
#include "common.h"

#define KILN_NAME_MAX 96
/* Longest kernel name: templates name the entry point after it with a short
 * prefix ("kiln_"), and the entry must fit KILN_NAME_MAX too. */
#define KILN_KERNEL_NAME_MAX 88
#define KILN_MAX_ARCHS 4
#define KILN_ARCH_MAX 16

typedef enum kiln_bias_mode { KILN_BIAS_NONE = 0, KILN_BIAS_PER_GROUP = 1 } kiln_bias_mode;
typedef enum kiln_alpha_mode { KILN_ALPHA_SCALAR = 0, KILN_ALPHA_PER_GROUP = 1 } kiln_alpha_mode;
typedef enum kiln_weights_mode {
    KILN_WEIGHTS_ANY = 0,        /* contiguous [G,N,K] or a pointer array */
    KILN_WEIGHTS_CONTIGUOUS = 1, /* contiguous only (TMA over one tensor) */
} kiln_weights_mode;

typedef struct kiln_epilogue_desc {
    kiln_bias_mode bias;
    int row_scale;               /* 1: per-row fp32 scale of the accumulator */
    int scale_bias;              /* 1: the row scale applies to the bias too */
    kiln_alpha_mode alpha;
    int beta;                    /* 1: β·C term compiled in */
} kiln_epilogue_desc;

typedef struct kiln_tmap_desc {
    int used;                    /* 0: the kernel ignores this map */
    int box_inner, box_outer;    /* box in elements: contiguous dim, rows */
    int swizzle;                 /* bytes: 0, 32, 64 or 128 */
    int chunks;                  /* > 0: where the contiguous dim is a multiple of
                                    box_inner, a 3-D map {box_inner, its chunks,
                                    rows}, box {box_inner, chunks, box_outer}: a
                                    box's rows are chunks x box_inner wide, laid out
                                    [row][chunk] in shared memory (wgrad's dW
                                    stores, sm90_wgrad.cuh); 0: the 2-D map only */
} kiln_tmap_desc;

/* How to launch; reported by the template. */
typedef struct kiln_launch_desc {
    char entry[KILN_NAME_MAX];   /* extern "C" kernel name in the cubin */
    int threads;                 /* per CTA */
    int smem_bytes;              /* dynamic shared memory per CTA */
    int persistent;              /* 1: grid = ctas_per_sm × SMs (clamped by
                                    max_ctas); 0: grid = max_ctas */
    int ctas_per_sm;
    int cluster_m, cluster_n;    /* cluster shape (1,1 when none) */
    kiln_tmap_desc tmap[3];      /* a, b, d */
    /* What the template says the kernel serves, so that the dispatcher need
     * not know families: */
    int max_groups;              /* most groups per call; 0: no limit */
    int scale_bias_switch;       /* 1: a compiled-in epilogue.scale_bias is switched
                                    per call (args.scale_bias); 0: always applied */
    int preference;              /* among kernels that serve a call, higher first */
} kiln_launch_desc;

typedef struct kiln_kernel_desc {
    char name[KILN_NAME_MAX];
    kiln_op op;
    char archs[KILN_MAX_ARCHS][KILN_ARCH_MAX];
    int n_archs;
    kiln_dtype a_type, b_type, out_type, accum_type;
    int tile_m, tile_n, tile_k;
    int stages;
    int cluster_m, cluster_n;
    int k_cluster;               /* fprop/dgrad: CTAs of a cluster that cut each tile's
                                    reduction along k, summed in shared memory (1: off) */
    int swap_ab;                 /* fprop/dgrad (sm90): the weights are wgmma's A and the
                                    tokens its B, so a tile's token count is any multiple
                                    of 8 (1: on) */
    int warpgroups;              /* consumer warp groups: 1 or 2 */
    char family[32];             /* template family: "simple", "sm90" */
    kiln_weights_mode weights;
    kiln_epilogue_desc epilogue; /* fprop/dgrad */
    kiln_wgrad_output wgrad_output; /* wgrad */
    int accumulate;              /* wgrad: fp32 accumulate mode */
    int dbias;                   /* wgrad: fused bias gradient */
    int split;                   /* wgrad: split the reduction across CTAs (1: off) */
    int rows;                    /* wgrad accumulate: a warp's rows of a tile added in
                                    one reduce-add (sm90; the tuner's choice) */
    kiln_fp8_recipe fp8_recipe;  /* fprop/dgrad with 8-bit inputs: how they are scaled */
    int fp8_promote;             /* 1: fp32 promotion every 128 of the reduction */
    char raster[16];             /* tile order: "group" (default), "m", "n" */
    char schedule[16];           /* sm90 consumer schedule: "auto" (the template
                                    chooses), "cooperative" (warp groups split a
                                    tile's rows), "pingpong" (each its own tile) */
} kiln_kernel_desc;

/* Static spellings: "bf16", "fp16", "f32", "e4m3", "e5m2"; "fprop", ... */
const char *kiln_dtype_name(kiln_dtype t);
const char *kiln_op_name(kiln_op op);
int kiln_dtype_parse(const char *s, kiln_dtype *out);  /* 1 if known */
int kiln_op_parse(const char *s, kiln_op *out);
int kiln_dtype_size(kiln_dtype t);

/* Sets the defaults the spec language documents. */
void kiln_desc_init(kiln_kernel_desc *d);

/* Canonical one-line text "key=value key=value ..." (no arch: the arch is a
 * separate part of every cache key).  Launch may be NULL. */
void kiln_desc_format(const kiln_kernel_desc *d, const kiln_launch_desc *launch,
                      kiln_strbuf *out);

/* Parses kiln_desc_format's text.  On error returns 0 and writes a message
 * naming the bad key into err. */
int kiln_desc_parse(const char *text, kiln_kernel_desc *d, kiln_launch_desc *launch,
                    kiln_error *err);

#endif /* KILN_KERNEL_DESC_H */
