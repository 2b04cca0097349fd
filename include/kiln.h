/* SPDX-License-Identifier: Apache-2.0 */
/*
 * kiln.h — the one public header of kiln, a JIT compiler and runtime for
 * grouped GEMMs (the matrix products of Mixture-of-Experts layers).
 *
 * Conventions
 *   - Every fallible call returns a kiln_status; KILN_OK is 0.  The message of
 *     the last failure on a context is read with kiln_last_error(ctx).
 *   - kiln never aborts, exits or prints; diagnostics go to the log hook given
 *     in kiln_context_options, if any.  With no hook, KILN_LOG=error|warning|
 *     info|debug in the environment sends them to stderr from that level on
 *     (at info, one line per dispatch decision).
 *   - kiln_problem and kiln_context_options begin with struct_size, set by
 *     their *_init functions; every call checks it, so a caller built against
 *     another kiln.h (or a hand-made mirror in another language) gets
 *     KILN_ERROR_INVALID_ARGUMENT naming the struct instead of misread fields.
 *     Always fill them through kiln_problem_init / kiln_context_options_init.
 *   - Pointers named d_* are device pointers; everything else is host memory.
 *   - Ownership: the caller owns every buffer it passes; kiln copies what it
 *     keeps (option strings) and allocates nothing per call on the device.
 *
 * Threads
 *   A kiln_context may be used from several threads at once: calls on one
 *   context are serialised by an internal lock; the last-error text and the
 *   last-call report are per context, so read them from the thread that made
 *   the call (or use one context per thread).  Contexts are independent.
 *
 * Operations (G groups; group g owns rows [off[g], off[g] + m[g]) ):
 *   fprop  Y_g  = X_g  · W_gᵀ     X [T,K], W [G,N,K], Y [T,N]
 *   dgrad  dX_g = dY_g · W_g      dY [T,N], W [G,N,K], dX [T,K]
 *   wgrad  dW_g = dY_gᵀ · X_g     dY [T,N], X [T,K], dW [G,N,K]
 * The epilogue of fprop and dgrad computes, for output row r of group g,
 *   D[r,n] = s_acc[r]·α_g·acc[r,n] + s_bias[r]·bias[g,n] + β·C[r,n]
 * with each term optional (s_bias is s_acc when scale_bias is set, else 1).
 */
#ifndef KILN_H
#define KILN_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define KILN_VERSION_MAJOR 0
#define KILN_VERSION_MINOR 1
#define KILN_VERSION_PATCH 0
#define KILN_VERSION_STRING "0.1.0"

/* Marks the functions libkiln.so exports; everything else in it is hidden. */
#if defined(__GNUC__) || defined(__clang__)
#define KILN_API __attribute__((visibility("default")))
#else
#define KILN_API
#endif

/* The most groups one call may have. */
#define KILN_MAX_GROUPS 65536

/* Version of the library actually linked ("0.1.0"). */
KILN_API const char *kiln_version(void);

typedef enum kiln_status {
    KILN_OK = 0,
    KILN_ERROR_INVALID_ARGUMENT = 1, /* a null, misaligned or out-of-range argument */
    KILN_ERROR_INVALID_SPEC = 2,     /* a spec failed to parse or validate */
    KILN_ERROR_TEMPLATE = 3,         /* a template failed while expanding */
    KILN_ERROR_COMPILE = 4,          /* NVRTC rejected the generated source */
    KILN_ERROR_CACHE = 5,            /* the cache or a bundle could not be used */
    KILN_ERROR_DRIVER = 6,           /* libcuda missing or a driver call failed */
    KILN_ERROR_CUBLAS = 7,           /* cuBLASLt missing or a cuBLASLt call failed */
    KILN_ERROR_UNSUPPORTED = 8,      /* no backend can serve this call */
    KILN_ERROR_OUT_OF_MEMORY = 9,
    KILN_ERROR_IO = 10,              /* a file could not be read or written */
    KILN_ERROR_INTERNAL = 11
} kiln_status;

/* Static text naming a status ("KILN_ERROR_INVALID_ARGUMENT"). */
KILN_API const char *kiln_status_name(kiln_status status);

typedef enum kiln_dtype {
    KILN_DTYPE_BF16 = 0,
    KILN_DTYPE_F16 = 1,
    KILN_DTYPE_F32 = 2,
    KILN_DTYPE_E4M3 = 3,
    KILN_DTYPE_E5M2 = 4
} kiln_dtype;

typedef enum kiln_op {
    KILN_OP_FPROP = 0,
    KILN_OP_DGRAD = 1,
    KILN_OP_WGRAD = 2
} kiln_op;

typedef enum kiln_backend {
    KILN_BACKEND_NONE = 0,
    KILN_BACKEND_GENERATED = 1,
    KILN_BACKEND_CUBLASLT = 2
} kiln_backend;

/* Bit set of backends a context may use. */
#define KILN_ALLOW_GENERATED (1u << 0)
#define KILN_ALLOW_CUBLASLT (1u << 1)
#define KILN_ALLOW_ALL (KILN_ALLOW_GENERATED | KILN_ALLOW_CUBLASLT)

typedef enum kiln_log_level {
    KILN_LOG_DEBUG = 0,
    KILN_LOG_INFO = 1,
    KILN_LOG_WARNING = 2,
    KILN_LOG_ERROR = 3
} kiln_log_level;

typedef void (*kiln_log_fn)(void *user, kiln_log_level level, const char *message);

/* ------------------------------------------------------------------------ */
/* Context                                                                  */
/* ------------------------------------------------------------------------ */

typedef struct kiln_context kiln_context;

typedef struct kiln_context_options {
    size_t struct_size;        /* sizeof(kiln_context_options), set by _init */
    int device;                /* CUDA device ordinal (default 0) */
    const char *cache_dir;     /* NULL: $KILN_CACHE_DIR, $XDG_CACHE_HOME/kiln, ~/.cache/kiln */
    const char *const *bundle_paths; /* NULL-terminated list of bundles, or NULL;
                                  then also $KILN_BUNDLE_PATH (colon-separated), and
                                  when neither names one, the default bundle installed
                                  beside the library: <libdir>/../share/kiln/
                                  kiln-<arch>.kbundle, if present */
    const char *const *tuning_tables; /* NULL-terminated list of tuning tables, or NULL */
    unsigned allowed_backends; /* KILN_ALLOW_*; 0 means KILN_ALLOW_ALL */
    kiln_log_fn log;           /* NULL: silent, or stderr under $KILN_LOG */
    void *log_user;
    kiln_log_level log_level;  /* lowest level passed to log */
    uint64_t cache_max_bytes;  /* size cap of the cache: past it, least recently
                                  used entries are removed; 0: $KILN_CACHE_MAX_BYTES,
                                  or no cap */
    int checked;               /* 1: checked mode: before each call launches
                                  anything, every d_* pointer of its problem
                                  must be device memory (not host memory, not
                                  unknown to the driver) and, where the driver
                                  tells the allocation's range, hold all the
                                  call may read or write (capacity rows, G*N*K
                                  weights, ...); else KILN_ERROR_INVALID_ARGUMENT
                                  naming the argument.  One driver query per
                                  pointer per call: for debugging.  Default 0;
                                  $KILN_CHECK=1 or =0 overrides it. */
} kiln_context_options;

/* Fills *opts with the defaults. */
KILN_API void kiln_context_options_init(kiln_context_options *opts);

/* Creates a context on opts->device (opts may be NULL for defaults).  Loads
 * libcuda.so.1 with dlopen; on failure *out is still set (so that
 * kiln_last_error can be read) and must be destroyed.  The caller's current
 * CUDA context is used if it is on the same device; otherwise the device's
 * primary context.  On an sm_90 device, when generated kernels are
 * allowed, the context also allocates a workspace (128 KiB per SM and 4
 * KiB: 16.5 MiB on 132 SMs, freed by kiln_context_destroy), where kernels
 * whose last wave would leave most SMs idle cut that wave's reductions
 * along k (docs/sm90_kernel.md); KILN_SPLIT=0 in the environment leaves it
 * out, and the kernels then walk whole tiles.  KILN_SPLIT_MIN=N (0 to
 * 1000, default 0) splits only where the kernel's cost model promises to
 * save N thousandths of a CTA's walk (and always at least 4 k-blocks).
 * Results differ from the whole-tile walk's only in the order of fp32
 * additions, and are the same bits from call to call. */
KILN_API kiln_status kiln_context_create(const kiln_context_options *opts, kiln_context **out);
KILN_API void kiln_context_destroy(kiln_context *ctx);

/* Text of the last failure on ctx ("" if none); valid until the next call on
 * ctx.  A NULL ctx gives "no context". */
KILN_API const char *kiln_last_error(const kiln_context *ctx);

/* ------------------------------------------------------------------------ */
/* Problems                                                                 */
/* ------------------------------------------------------------------------ */

typedef enum kiln_sizes_kind {
    KILN_SIZES_COUNTS = 0,  /* d_sizes[g] = m[g] */
    KILN_SIZES_OFFSETS = 1  /* d_sizes[g] = Σ_{h<=g} m[h] (torch._grouped_mm's offs) */
} kiln_sizes_kind;

typedef enum kiln_wgrad_output {
    KILN_WGRAD_DENSE = 0,    /* d_out is one [G,N,K] tensor */
    KILN_WGRAD_DISCRETE = 1  /* d_out_ptrs[g] is an [N,K] tensor, ldd apart rows */
} kiln_wgrad_output;

/* fp8 scaling recipes (a_type/b_type E4M3 or E5M2).  The inputs are the
 * quantized values q with dequantization scales s (x = q·s); the product is
 * that of the dequantized operands, and the epilogue (kiln_epilogue) then
 * applies to it as for 16-bit inputs.  "Rows" are the op's row operand A
 * (X for fprop, dY for dgrad), "columns" its output columns n_out (N for
 * fprop, K for dgrad), k_red its reduction (K for fprop, N for dgrad).
 * fp32 scales, all on the device. */
typedef enum kiln_fp8_recipe {
    KILN_FP8_NONE = 0,   /* 16-bit inputs: no scales */
    KILN_FP8_TENSOR = 1, /* scale_a [1]: the whole of A; scale_b [G]: one per group */
    KILN_FP8_ROW = 2,    /* scale_a [capacity]: one per row of A; scale_b [G, n_out]:
                            one per group and output column (torch._scaled_grouped_mm) */
    KILN_FP8_BLOCK = 3   /* 1x128 and 128x128 (DeepSeek-V3): scale_a [ceil(k_red/128),
                            ld_scale_a], one per row and 128 of the reduction, k-block
                            major (a k-block's rows are contiguous); scale_b
                            [G, ceil(n_out/128), ceil(k_red/128)] */
} kiln_fp8_recipe;

typedef struct kiln_fp8 {
    kiln_fp8_recipe recipe;
    const float *d_scale_a;
    const float *d_scale_b;
    int64_t ld_scale_a;  /* BLOCK: elements between k-blocks of scale_a; 0: capacity */
    /* 1: sums promoted to fp32 every 128 of the reduction (a kernel built
     * with fp8.accumulate: promote); 0: the tensor cores' fast accumulation
     * is enough (torch's use_fast_accum).  BLOCK always promotes. */
    int promote;
    /* dgrad: the weights transposed, [G, K, N] of b_type (8-bit wgmma reads
     * K-major operands only, so dgrad cannot read [G, N, K]); d_b is then
     * unused.  kiln_quantize writes it beside the [G, N, K] copy. */
    const void *d_bt;
} kiln_fp8;

typedef struct kiln_epilogue {
    const void *d_bias;      /* [G,N_out] of the output type, or NULL */
    int64_t ld_bias;         /* elements between groups; 0: N_out */
    const float *d_row_scale;/* [capacity] fp32 per-row scale s[r], or NULL */
    int scale_bias;          /* 1: the bias term is scaled by s[r] too */
    float alpha;             /* scalar α (used when d_alpha is NULL) */
    const float *d_alpha;    /* [G] per-group α on the device, or NULL */
    float beta;              /* β; C is read only when beta != 0 */
    const void *d_c;         /* [capacity,N_out] of the output type */
    int64_t ldc;             /* 0: N_out */
} kiln_epilogue;

/*
 * One grouped GEMM.  N and K are the weight's dimensions ([G,N,K]) for every
 * op.  Row operands (X, dY, Y, dX, C) hold `capacity` rows; exactly the
 * packed valid rows [0, Σm) of the outputs are written.
 */
typedef struct kiln_problem {
    size_t struct_size;    /* sizeof(kiln_problem), set by kiln_problem_init */
    kiln_op op;
    kiln_dtype a_type;     /* type of X / dY */
    kiln_dtype b_type;     /* type of W (fprop, dgrad) or X (wgrad) */
    kiln_dtype out_type;   /* type of the output */
    int32_t groups;        /* G, 1 .. KILN_MAX_GROUPS */
    int64_t n, k;          /* weight dims; multiples of 8 for 16-bit types */
    int64_t capacity;      /* rows the row operands can hold (upper bound of Σm) */

    const int32_t *d_sizes;/* [G] on the device, as sizes_kind says */
    kiln_sizes_kind sizes_kind;
    const int32_t *host_sizes; /* optional host copy, same kind; enables cuBLASLt
                                  and the capacity check */

    /* fprop: a = X [cap,K];  dgrad: a = dY [cap,N];  wgrad: a = dY [cap,N] */
    const void *d_a;  int64_t lda;            /* 0: dense rows */
    /* fprop/dgrad: W [G,N,K] contiguous (d_b) or G pointers (d_b_ptrs);
     * wgrad: X [cap,K] in d_b. */
    const void *d_b;  int64_t ldb;            /* 0: dense rows (fp8 dgrad: rows of fp8.d_bt) */
    const void *const *d_b_ptrs;              /* device array of G pointers, each to
                                                 an [N, ldb] matrix, 16-byte aligned
                                                 as d_b (read on the device only) */
    /* fprop: Y [cap,N]; dgrad: dX [cap,K]; wgrad: dW [G,N,K] (dense) */
    void *d_out;      int64_t ldd;            /* 0: dense rows */
    void *const *d_out_ptrs;                  /* wgrad discrete: device array of G
                                                 pointers, each to an [N, ldd] matrix,
                                                 16-byte aligned (read on the device
                                                 only) */
    kiln_wgrad_output wgrad_output;
    int accumulate;        /* wgrad: dW += ... into fp32 (out_type must be F32) */

    /* wgrad only, optional: the bias gradient db[g][n] = Σ over group g's
     * rows t of dY[t][n], computed with dW.  Dense (d_dbias, [G, ld_dbias])
     * or per expert (d_dbias_ptrs[g] → [N]); at most one of the two.  An
     * empty group gets zeros; with `accumulate`, db += ... and an empty
     * group is left alone. */
    void *d_dbias;
    void *const *d_dbias_ptrs;
    int64_t ld_dbias;      /* elements between groups of d_dbias; 0: N */
    kiln_dtype dbias_type; /* F32 (kiln_problem_init's default) or out_type */

    kiln_epilogue epilogue;/* fprop/dgrad only; zero-init plus alpha = 1 */
    kiln_fp8 fp8;          /* fprop/dgrad with 8-bit inputs: the scaling recipe */

    int32_t *d_overflow;   /* optional device int: set to 1 when Σm > capacity
                              (rows past capacity are then not computed) */
} kiln_problem;

/* Sizes the kernels are given.  d_sizes is read on the device, so kiln
 * cannot refuse it before a call.  What every kernel does with any int32
 * values there (tests/gpu/test_gpu_hostile.c):
 *   - a negative count is taken as 0 (an empty group);
 *   - with KILN_SIZES_OFFSETS, an offset smaller than the one before it
 *     gives an empty group (differences are taken in 64 bits);
 *   - rows at or past capacity are neither read nor written, and
 *     *d_overflow (if given) is set to 1 when the sizes add up past
 *     capacity; the group that reaches past it is computed up to capacity,
 *     the groups after it are empty.  Sums are kept without wrapping however
 *     large the sizes are.
 * host_sizes, when given, is checked on the host instead: a negative count,
 * a decreasing offset or a sum past capacity is KILN_ERROR_INVALID_ARGUMENT.
 * The checked mode (kiln_context_options.checked) checks the pointers and
 * their allocations' sizes, not the device-side sizes. */

/* Fills *p with defaults: struct_size, alpha 1, bf16 types, everything else
 * 0/NULL. */
KILN_API void kiln_problem_init(kiln_problem *p, kiln_op op);

/* Runs the grouped GEMM on `stream` (a CUstream; NULL is the legacy default
 * stream).  Asynchronous: returns once launched.  On the generated path it
 * reads no sizes on the host, never synchronises and allocates nothing, so it
 * may be captured in a CUDA graph. */
KILN_API kiln_status kiln_gemm(kiln_context *ctx, const kiln_problem *problem, void *stream);

/* Shorthands checking that problem->op matches. */
KILN_API kiln_status kiln_fprop(kiln_context *ctx, const kiln_problem *problem, void *stream);
KILN_API kiln_status kiln_dgrad(kiln_context *ctx, const kiln_problem *problem, void *stream);
KILN_API kiln_status kiln_wgrad(kiln_context *ctx, const kiln_problem *problem, void *stream);

/* Resolves and loads the kernel kiln_gemm(ctx, problem, ...) would use (from
 * a bundle, the cache, or compiled with NVRTC), and launches nothing.  Call
 * it before capturing a CUDA graph: the captured calls then compile and load
 * nothing.  Only the problem's shape, types, layouts and which pointers are
 * set matter; device pointers are checked for alignment but never read.
 * KILN_OK also when the call would go to cuBLASLt (nothing is loaded then,
 * and cuBLASLt cannot be captured). */
KILN_API kiln_status kiln_prepare(kiln_context *ctx, const kiln_problem *problem);

/* ------------------------------------------------------------------------ */
/* fp8 quantizers                                                           */
/* ------------------------------------------------------------------------ */

/* What kiln_quantize produces: the e4m3 / e5m2 operands and the scales of
 * the kiln_fp8 recipes.  For each scaled set of values x (a row, a 1x128
 * piece, a 128x128 block, a group) with amax = max |x|:
 *   s = amax / FMAX   (FMAX 448 for e4m3, 57344 for e5m2; s = 1 when amax is 0)
 *   q = x / s rounded to nearest even, saturated to ±FMAX
 * so that x ≈ q·s, the dequantization the recipes take.  Exactly, in fp32
 * (what a reference must do to get the same bits):
 *   s   = amax / FMAX                      (IEEE division, round to nearest)
 *   inv = min(FMAX / amax, FLT_MAX)        (the same; 1 when amax is 0)
 *   q   = fp8_rn_satfinite(x * inv)        (one fp32 multiply, then RNE)
 * the multiply by inv, not a division by s, as DeepGEMM's and
 * TransformerEngine's quantizers do.  A -0 or a negative value that rounds
 * to zero gives -0 (0x80).  Inputs must be finite.
 *
 * Needs sm_89 or later (KILN_ERROR_UNSUPPORTED before).  The first call on
 * a context compiles (or loads) the quantizers' module: make it once before
 * capturing a CUDA graph.  Weights are [G, rows, ld_in] with groups
 * rows · ld_in elements apart (and q [G, rows, ld_out]); q_t is dense.
 * WEIGHTS_TENSOR runs a memset and three kernels (the group amax is found
 * first, in d_scale itself); WEIGHTS_TENSOR_DELAYED a memset (of d_amax)
 * and one kernel; the other kinds one kernel. */
typedef enum kiln_quant_kind {
    /* activations in [capacity, cols] → q [capacity, cols], one scale per row:
     * scale [capacity] (KILN_FP8_ROW's scale_a) */
    KILN_QUANT_ROWS = 0,
    /* activations, one scale per row and 128 columns: scale
     * [ceil(cols/128), ld_scale], k-block major (KILN_FP8_BLOCK's scale_a) */
    KILN_QUANT_ROWS_1X128 = 1,
    /* weights in [G, rows, cols] → q [G, rows, cols] and its transpose
     * q_t [G, cols, rows] in one pass, one scale per 128x128 block: scale
     * [G, ceil(rows/128), ceil(cols/128)] and scale_t [G, ceil(cols/128),
     * ceil(rows/128)] (KILN_FP8_BLOCK's scale_b for fprop and for dgrad).
     * With q_t, rows must be a multiple of 16 (its rows are 16-byte rows) */
    KILN_QUANT_WEIGHTS_128X128 = 2,
    /* weights, one scale per group: scale [G] (and scale_t, the same values) */
    KILN_QUANT_WEIGHTS_TENSOR = 3,
    /* weights, one given scale per group ("delayed scaling", the classical
     * fp8 recipe: the scale comes from the caller's amax history): reads
     * d_scale [G], the dequantization scale s the GEMM reads (KILN_FP8_TENSOR's
     * scale_b, for q and q_t alike), writes q (and q_t) in one pass and
     * d_amax [G], this call's max |x| per group (fp32, for the history).
     * Exactly, in fp32:
     *   inv = min(1 / s, FLT_MAX)          (IEEE reciprocal, round to nearest)
     *   q   = fp8_rn_satfinite(x * inv)    (a scale too small saturates to ±FMAX)
     * s must be positive and finite (read on the device, not checked; s = 0
     * saturates every nonzero x).  No d_scale_t: q_t's scale is d_scale.
     * Runs a memset of d_amax and one kernel. */
    KILN_QUANT_WEIGHTS_TENSOR_DELAYED = 4
} kiln_quant_kind;

typedef struct kiln_quant {
    size_t struct_size;     /* sizeof(kiln_quant), set by kiln_quant_init */
    kiln_quant_kind kind;
    kiln_dtype in_type;     /* BF16 or F16 */
    kiln_dtype out_type;    /* E4M3 or E5M2 */
    int32_t groups;         /* weights: G.  Rows kinds: entries of d_sizes (0 without) */
    int64_t rows, cols;     /* rows kinds: capacity and columns; weights: one group's
                               [rows, cols] (N, K); cols a multiple of 16 */
    /* Rows kinds: only the valid rows [0, Σm) are read and written (the
     * sizes as in kiln_problem, read on the device: graph-safe); NULL: all
     * `rows` rows. */
    const int32_t *d_sizes;
    kiln_sizes_kind sizes_kind;
    const void *d_in;  int64_t ld_in;    /* 0: dense rows */
    void *d_out;       int64_t ld_out;   /* 0: dense rows */
    float *d_scale;    int64_t ld_scale; /* ROWS_1X128: elements between k-blocks; 0: rows.
                                            WEIGHTS_TENSOR_DELAYED: read, not written */
    void *d_out_t;                       /* weights, optional: the transposed copy */
    float *d_scale_t;                    /* with d_out_t: its scales (not for DELAYED) */
    float *d_amax;                       /* WEIGHTS_TENSOR_DELAYED only: [G], written */
} kiln_quant;

/* Fills *q with defaults: struct_size, kind, BF16 in, E4M3 out, 0/NULL. */
KILN_API void kiln_quant_init(kiln_quant *q, kiln_quant_kind kind);

/* Quantizes on `stream`; asynchronous, allocates nothing, reads no sizes on
 * the host (may be captured in a CUDA graph). */
KILN_API kiln_status kiln_quantize(kiln_context *ctx, const kiln_quant *q, void *stream);

/* What served the last successful kiln_gemm on ctx. */
typedef struct kiln_call_report {
    kiln_backend backend;
    char kernel[128];      /* generated kernel name, or "cublasLt" */
    char reason[256];      /* why the dispatcher chose it */
} kiln_call_report;

KILN_API kiln_status kiln_last_call(const kiln_context *ctx, kiln_call_report *out);

/* Counters for proofs in tests: kernels compiled by NVRTC, loaded from the
 * cache, from bundles, since the context was created. */
typedef struct kiln_context_stats {
    uint64_t nvrtc_compiles;
    uint64_t cache_hits;
    uint64_t bundle_hits;
    uint64_t launches;
} kiln_context_stats;

KILN_API kiln_status kiln_context_stats_get(const kiln_context *ctx, kiln_context_stats *out);

#ifdef __cplusplus
}
#endif

#endif /* KILN_H */
