/*
 * kernel_abi.h — the arguments every generated kernel takes.
 *
 * This file is read by two compilers: the host C compiler (runtime/launch.c
 * fills the struct) and NVRTC (the templates paste this file's text into the
 * generated source, so the two layouts cannot drift).  Keep it plain C: fixed
 * width types only, no includes, no host-only constructs.
 *
 * Every generated kernel has the signature
 *   extern "C" __global__ void NAME(const __grid_constant__ kiln_kernel_args args,
 *                                   const __grid_constant__ kiln_tmap tmap_a,
 *                                   const __grid_constant__ kiln_tmap tmap_b,
 *                                   const __grid_constant__ kiln_tmap tmap_d)
 * Kernels that do not use the tensor-memory accelerator ignore the maps.
 *
 * GEMM view of each op (rows are the grouped "token" dimension):
 *   fprop  A = X  [cap,K]   B = W [G,N,K]            D = Y  [cap,N]
 *   dgrad  A = dY [cap,N]   B = W [G,N,K]            D = dX [cap,K]
 *   wgrad  A = dY [cap,N]   B = X [cap,K]            D = dW [G,N,K]
 * n and k are always the weight's N and K.
 */
#ifndef KILN_KERNEL_ABI_H
#define KILN_KERNEL_ABI_H

/* Bump when the struct below changes: it is part of every cache key. */
#define KILN_KERNEL_ABI_VERSION 3

/* Slots of work-order counters in a kernel that has them (sched_slot). */
#define KILN_SCHED_SLOTS 4096

/* The context workspace (args.workspace) of the kernels that split their
 * last wave's reductions (templates/sm90_gemm_cut.cuh, SPLIT): a lease word at
 * 0, three words per tile of the last wave from KILN_SPLIT_CTR_OFFSET (the
 * pieces arrived, the pieces' CTAs started, the parts of the tile claimed;
 * each an array of KILN_SPLIT_TILES), then a partial tile (BM x BN fp32 at
 * most) per CTA of the grid, for grids of up to num_sms (and
 * KILN_SPLIT_CTAS) CTAs.  The runtime zeroes the lease and the counters
 * once; each launch leaves them zero. */
#define KILN_SPLIT_CTAS 256
#define KILN_SPLIT_TILES (KILN_SPLIT_CTAS / 2)   /* a last round splits at most half the grid's tiles */
#define KILN_SPLIT_TILE_BYTES (128 * 1024)
/* Word 1: the least saving the cost model must promise a launch before it
 * splits, in thousandths of a CTA's walk (KILN_SPLIT_MIN, written by the
 * runtime with the workspace). */
#define KILN_SPLIT_MIN_WORD 1
#define KILN_SPLIT_CTR_OFFSET 64
#define KILN_SPLIT_PARTS_OFFSET 4096
#if KILN_SPLIT_CTR_OFFSET + 3 * 4 * KILN_SPLIT_TILES > KILN_SPLIT_PARTS_OFFSET
#error "the split counters overlap the partial tiles"
#endif

/* When a launch splits, in one place for the kernels (kiln_split_plan) and
 * the runtime's cost model (runtime/dispatch_model.c), which must agree on
 * it.  A CTA's walk of `items` tiles of `nkb` k-blocks over `ctas` CTAs ends
 * in a round of R = items % ctas tiles; cut into S pieces, each of those
 * saves nkb - ceil(nkb / S) k-blocks of that round and costs S + 1 moves of
 * a partial tile (each piece's write, the finisher's reads), `part_kb`
 * k-blocks each (KILN_SPLIT_PART_KB: the tile's fp32 bytes over a k-block's
 * loads, times 0.75, an estimate of an SM's L2 traffic against its TMA feed).
 * The saving must reach KILN_SPLIT_MIN_GAIN k-blocks and `min_share`
 * thousandths of the walk (KILN_SPLIT_MIN).  A walk shorter than
 * KILN_SPLIT_MIN_WALK k-blocks is never cut, and the runtime offers such a
 * launch no workspace (runtime/launch.c).  H200, eightieth session
 * (docs/sm90_kernel.md): on decode-sized dgrad calls of 24-64 tiles and
 * walks of 32-112 k-blocks, the 128x256 kernel given the workspace took
 * 1.04-1.49x its time without it where it cut (S 2 or 4, rated to save
 * 10-50 k-blocks) and about 1.2x where it did not; a 16-tile decode call
 * of 224 k-blocks ran 1.8x faster cut in 8, and the long layers' last
 * waves, whose walks are thousands of k-blocks, 1-4.5%.  ctas >= 1.
 * Returns S, 1 for whole tiles. */
#define KILN_SPLIT_MAX_WAYS 8
#define KILN_SPLIT_MIN_GAIN 4
#define KILN_SPLIT_MIN_WALK 128
#define KILN_SPLIT_PART_KB(bm, bn, bk, esz) (0.75f * (bm) * (bn) * 4 / (((bm) + (bn)) * (bk) * (esz)))
#ifdef __CUDACC__
#define KILN_ABI_FN static __host__ __device__ __forceinline__
#else
#define KILN_ABI_FN static inline
#endif
KILN_ABI_FN int kiln_split_ways(int items, int ctas, int nkb, float part_kb, unsigned min_share)
{
    const int rounds = (items + ctas - 1) / ctas, R = items % ctas;
    const float walk = (float)rounds * (float)nkb;
    if (R == 0 || 2 * R > ctas || walk < KILN_SPLIT_MIN_WALK) return 1;
    float best = 1e-3f * (float)min_share * walk;
    if (best < KILN_SPLIT_MIN_GAIN) best = KILN_SPLIT_MIN_GAIN;
    int ways = 1;
    const int most = ctas / R < KILN_SPLIT_MAX_WAYS ? ctas / R : KILN_SPLIT_MAX_WAYS;
    for (int s = 2; s <= most; ++s) {
        const float gain = (float)(nkb - (nkb + s - 1) / s) - part_kb * (float)(s + 1);
        if (gain > best) {
            best = gain;
            ways = s;
        }
    }
    return ways;
}

typedef struct kiln_kernel_args {
    const void *a;                 /* row operand A */
    const void *b;                 /* weights [G,N,K] (or X for wgrad) */
    const void *const *b_ptrs;     /* per-group weight pointers, or 0 */
    void *d;                       /* output */
    void *const *d_ptrs;           /* wgrad discrete outputs, or 0 */
    const int *sizes;              /* [G] counts or cumulative end offsets */
    const void *bias;              /* [G, n_out] of the output type, or 0 */
    const float *row_scale;        /* [cap] per-row scale, or 0 */
    const float *alpha_ptr;        /* [G] per-group alpha, or 0 */
    const void *c;                 /* [cap, n_out] of the output type, or 0 */
    int *overflow;                 /* set to 1 when sum(m) > capacity, or 0 */
    void *workspace;               /* the context's split workspace (above), or 0 */
    long long capacity;            /* rows of the row operands */
    long long lda, ldb, ldd, ldc;  /* elements between rows */
    long long ld_bias;             /* elements between groups of bias */
    long long n, k;                /* weight dims */
    int groups;
    int sizes_are_offsets;         /* 1: sizes holds cumulative end offsets */
    int scale_bias;                /* 1: bias term scaled by row_scale too */
    int accumulate;                /* wgrad: D += result (fp32 D) */
    float alpha, beta;
    int num_sms;                   /* SMs of the device, for persistent grids */
    int sched_slot;                /* 1..KILN_SCHED_SLOTS: the counters of a
                                      dynamic work order this launch may use
                                      (runtime/sched_slots.h); 0: none */
    /* wgrad's fused bias gradient db[g][n] = sum over g's tokens of A[t][n]
     * (kernels built with wgrad.dbias; both 0: not asked for) */
    void *dbias;                   /* dense [G, ld_dbias], or 0 */
    void *const *dbias_ptrs;       /* per group [N], or 0 */
    long long ld_dbias;            /* elements between groups of dbias */
    int dbias_f32;                 /* 1: db is f32; 0: the output type */
    int pad1;
    /* fp8 dequantization scales (kernels built with an fp8 recipe; kiln.h's
     * kiln_fp8 says what each recipe reads) */
    const float *scale_a;
    const float *scale_b;
    long long ld_scale_a;          /* block recipe: elements between k-blocks */
} kiln_kernel_args;

/* A CUtensorMap: 128 opaque bytes, 64-byte aligned. */
typedef struct __attribute__((aligned(64))) kiln_tmap {
    unsigned long long opaque[16];
} kiln_tmap;

#endif /* KILN_KERNEL_ABI_H */
