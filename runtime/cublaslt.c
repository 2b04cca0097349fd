/* SPDX-License-Identifier: Apache-2.0 */
/* cublaslt.c — the cuBLASLt backend: a per-group loop with host sizes, and
 * kiln's own epilogue kernel for the terms cuBLASLt cannot fuse per row. */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cublasLt.h>

#include "cublaslt.h"
#include "problem.h"

#define KILN_LT_WORKSPACE (32u << 20)
/* The workspace's tail holds fp8 scales, 16 bytes apart: cuBLASLt refuses
 * (NOT_SUPPORTED) a scale pointer that is not 16-byte aligned, as
 * scale_b + g is for most g (measured on an H200, cuBLASLt 13). */
#define KILN_LT_SCALES (16u * (KILN_MAX_GROUPS + 1))
#define KILN_LT_MATMUL_WORKSPACE (KILN_LT_WORKSPACE - KILN_LT_SCALES)

#define KILN_LT_FUNCTIONS(X)                                                                       \
    X(cublasLtCreate)                                                                              \
    X(cublasLtDestroy)                                                                             \
    X(cublasLtGetVersion)                                                                          \
    X(cublasLtGetStatusString)                                                                     \
    X(cublasLtMatmulDescCreate)                                                                    \
    X(cublasLtMatmulDescDestroy)                                                                   \
    X(cublasLtMatmulDescSetAttribute)                                                              \
    X(cublasLtMatrixLayoutCreate)                                                                  \
    X(cublasLtMatrixLayoutDestroy)                                                                 \
    X(cublasLtMatmul)

struct kiln_cublaslt {
    void *lib;
#define KILN_LT_FIELD(name) __typeof__(name) *name;
    KILN_LT_FUNCTIONS(KILN_LT_FIELD)
#undef KILN_LT_FIELD
    cublasLtHandle_t handle;
    CUdeviceptr workspace;
    CUmodule epi_module;
    CUfunction epi;
    void **host_ptrs; /* G pointers read back for pointer arrays */
    int host_ptrs_cap;
};

/* The epilogue: D = s·α_g·D + s_b·bias[g] + β·C over one group's rows, D
 * already holding the (scalar-α) product.  Self-contained: no headers. */
static const char epilogue_source[] =
    "// kiln: cuBLASLt-path epilogue (runtime/cublaslt.c)\n"
    "__device__ __forceinline__ float kiln_ld(const void *p, long long i, int t) {\n"
    "  if (t == 2) return ((const float *)p)[i];\n"
    "  unsigned short h = ((const unsigned short *)p)[i];\n"
    "  if (t == 0) return __uint_as_float(((unsigned)h) << 16);\n"
    "  float f; asm(\"cvt.f32.f16 %0, %1;\" : \"=f\"(f) : \"h\"(h)); return f;\n"
    "}\n"
    "__device__ __forceinline__ void kiln_st(void *p, long long i, int t, float v) {\n"
    "  if (t == 2) { ((float *)p)[i] = v; return; }\n"
    "  unsigned short h;\n"
    "  if (t == 0) asm(\"cvt.rn.bf16.f32 %0, %1;\" : \"=h\"(h) : \"f\"(v));\n"
    "  else asm(\"cvt.rn.f16.f32 %0, %1;\" : \"=h\"(h) : \"f\"(v));\n"
    "  ((unsigned short *)p)[i] = h;\n"
    "}\n"
    "extern \"C\" __global__ void kiln_lt_epilogue(void *d, long long ldd, const void *c,\n"
    "    long long ldc, float beta, const void *bias, const float *row_scale, int scale_bias,\n"
    "    const float *alpha_ptr, long long rows, long long cols, int t) {\n"
    "  float alpha = alpha_ptr ? *alpha_ptr : 1.0f;\n"
    "  long long total = rows * cols;\n"
    "  for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < total;\n"
    "       i += (long long)gridDim.x * blockDim.x) {\n"
    "    long long r = i / cols, n = i - r * cols;\n"
    "    float s = row_scale ? row_scale[r] : 1.0f;\n"
    "    float v = s * alpha * kiln_ld(d, r * ldd + n, t);\n"
    "    if (bias) v += (scale_bias ? s : 1.0f) * kiln_ld(bias, n, t);\n"
    "    if (beta != 0.0f) v += beta * kiln_ld(c, r * ldc + n, t);\n"
    "    kiln_st(d, r * ldd + n, t, v);\n"
    "  }\n"
    "}\n";

static kiln_status lt_check(kiln_cublaslt *lt, cublasStatus_t s, const char *what, kiln_error *err)
{
    if (s == CUBLAS_STATUS_SUCCESS) return KILN_OK;
    return kiln_error_set(err, KILN_ERROR_CUBLAS, "%s: %s (%d)", what,
                          lt->cublasLtGetStatusString ? lt->cublasLtGetStatusString(s) : "?", (int)s);
}

static kiln_status lt_load(kiln_cublaslt **slot, const kiln_rt_env *env, kiln_error *err)
{
    if (*slot) return KILN_OK;
    kiln_cublaslt *lt = calloc(1, sizeof *lt);
    if (!lt) return kiln_error_set(err, KILN_ERROR_OUT_OF_MEMORY, "cuBLASLt: out of memory");
    dlerror();
    lt->lib = dlopen("libcublasLt.so.13", RTLD_NOW | RTLD_LOCAL);
    if (!lt->lib) lt->lib = dlopen("libcublasLt.so", RTLD_NOW | RTLD_LOCAL);
    if (!lt->lib) {
        const char *why = dlerror();
        free(lt);
        return kiln_error_set(err, KILN_ERROR_CUBLAS,
                              "libcublasLt.so.13 not found (is /usr/local/cuda/lib64 on "
                              "LD_LIBRARY_PATH?): %s",
                              why ? why : "unknown reason");
    }
#define KILN_LT_LOOKUP(name)                                                                       \
    {                                                                                              \
        void *fn = dlsym(lt->lib, #name);                                                          \
        if (!fn) {                                                                                 \
            dlclose(lt->lib);                                                                      \
            free(lt);                                                                              \
            return kiln_error_set(err, KILN_ERROR_CUBLAS, "libcublasLt has no %s", #name);         \
        }                                                                                          \
        memcpy(&lt->name, &fn, sizeof fn);                                                         \
    }
    KILN_LT_FUNCTIONS(KILN_LT_LOOKUP)
#undef KILN_LT_LOOKUP
    kiln_status st = lt_check(lt, lt->cublasLtCreate(&lt->handle), "cublasLtCreate", err);
    if (!st)
        st = kiln_driver_check(env->drv, env->drv->cuMemAlloc(&lt->workspace, KILN_LT_WORKSPACE),
                               "cuMemAlloc(cuBLASLt workspace, 32 MiB)", err);
    if (st) {
        if (lt->handle) lt->cublasLtDestroy(lt->handle);
        dlclose(lt->lib);
        free(lt);
        return st;
    }
    kiln_rt_logf(env->log, KILN_LOG_INFO, "cuBLASLt %zu loaded", lt->cublasLtGetVersion());
    *slot = lt;
    return KILN_OK;
}

void kiln_cublaslt_destroy(kiln_cublaslt *lt, const kiln_rt_env *env)
{
    if (!lt) return;
    if (lt->epi_module) env->drv->cuModuleUnload(lt->epi_module);
    if (lt->workspace) env->drv->cuMemFree(lt->workspace);
    if (lt->handle) lt->cublasLtDestroy(lt->handle);
    if (lt->lib) dlclose(lt->lib);
    free(lt->host_ptrs);
    free(lt);
}

static kiln_status epilogue_load(kiln_cublaslt *lt, kiln_kernels *ks, kiln_error *err)
{
    if (lt->epi) return KILN_OK;
    return kiln_kernels_load_helper(ks, "kiln_lt_epilogue", "cublaslt_epilogue", "kiln_lt_epilogue",
                                    256, epilogue_source, &lt->epi_module, &lt->epi, err);
}

static cudaDataType_t lt_type(kiln_dtype t)
{
    switch (t) {
    case KILN_DTYPE_F16: return CUDA_R_16F;
    case KILN_DTYPE_F32: return CUDA_R_32F;
    case KILN_DTYPE_E4M3: return CUDA_R_8F_E4M3;
    case KILN_DTYPE_E5M2: return CUDA_R_8F_E5M2;
    default: return CUDA_R_16BF;
    }
}

#define NO(...) (snprintf(why, why_size, __VA_ARGS__), 0)

/* cuBLASLt's fp8 matmul (cuBLAS docs, cublasLtMatmul, FP8) on sm_89 and
 * later takes one fp32 scale per operand through A/B_SCALE_POINTER: kiln's
 * per-tensor recipe, with the group's scale_b[g] set before each group's
 * product.  It multiplies e4m3 by e4m3 or e5m2 either way round, not e5m2
 * by e5m2; A transposed and B not ("TN"), which is how kiln's K-major X and
 * W (and dgrad's transposed W, fp8.d_bt) read in column-major terms; and
 * 16-byte aligned pointers, leading dimensions and matrix dimensions.
 * Validation already asks the last of every fp8 call (16-byte rows, n and k
 * multiples of 16, operands 16-byte aligned, so each group's slice is too);
 * they are checked here again, on the fields dispatch may read (never the
 * pointers' values: dispatch_memo.h), so that a call cuBLASLt cannot run is
 * never sent to it whatever validation accepts later. */
int kiln_cublaslt_fp8_serves(const kiln_problem *p, const char *arch, char *why, size_t why_size)
{
    static const char *const recipes[] = {"none", "per-tensor", "row-wise", "1x128/128x128 block"};
    if (p->fp8.recipe != KILN_FP8_TENSOR)
        return NO("kiln's cuBLASLt path serves the fp8 per-tensor recipe only (the call's is %s)",
                  (unsigned)p->fp8.recipe <= KILN_FP8_BLOCK ? recipes[p->fp8.recipe] : "unknown");
    int sm = 0;
    if (!arch || sscanf(arch, "sm_%d", &sm) != 1 || sm < 89)
        return NO("cuBLASLt runs fp8 on sm_89 and later (the device is %s)", arch ? arch : "unknown");
    if (p->a_type == KILN_DTYPE_E5M2 && p->b_type == KILN_DTYPE_E5M2)
        return NO("cuBLASLt has no e5m2 x e5m2 product (e4m3 with e4m3 or e5m2 only)");
    const struct {
        const char *name;
        int64_t bytes;
    } rows[] = {{"n", p->n * kiln_dtype_size(p->b_type)},
                {"k", p->k * kiln_dtype_size(p->b_type)},
                {"lda", p->lda * kiln_dtype_size(p->a_type)},
                {"ldb", p->ldb * kiln_dtype_size(p->b_type)},
                {"ldd", p->ldd * kiln_dtype_size(p->out_type)}};
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++)
        if (rows[i].bytes % 16)
            return NO("cuBLASLt's fp8 kernels need 16-byte aligned dimensions and rows "
                      "(problem->%s is %lld bytes)",
                      rows[i].name, (long long)rows[i].bytes);
    return 1;
}
#undef NO

/* Reads a device array of G pointers (synchronously: this path is not
 * graph-safe anyway). */
static kiln_status read_ptrs(kiln_cublaslt *lt, const kiln_driver *drv, const void *const *d_ptrs,
                             int groups, CUstream stream, kiln_error *err)
{
    if (lt->host_ptrs_cap < groups) {
        void **n = realloc(lt->host_ptrs, (size_t)groups * sizeof *n);
        if (!n) return kiln_error_set(err, KILN_ERROR_OUT_OF_MEMORY, "cuBLASLt: out of memory");
        lt->host_ptrs = n;
        lt->host_ptrs_cap = groups;
    }
    kiln_status st = kiln_driver_check(drv, drv->cuStreamSynchronize(stream),
                                       "cuStreamSynchronize (reading a pointer array)", err);
    if (st) return st;
    return kiln_driver_check(drv,
                             drv->cuMemcpyDtoH(lt->host_ptrs, (CUdeviceptr)(uintptr_t)d_ptrs,
                                                   (size_t)groups * sizeof(void *)),
                             "cuMemcpyDtoH (reading a pointer array)", err);
}

typedef struct lt_call {
    cublasLtMatmulDesc_t desc;
    cublasLtMatrixLayout_t la, lb, ld;
} lt_call;

static void lt_call_free(kiln_cublaslt *lt, lt_call *c)
{
    if (c->la) lt->cublasLtMatrixLayoutDestroy(c->la);
    if (c->lb) lt->cublasLtMatrixLayoutDestroy(c->lb);
    if (c->ld) lt->cublasLtMatrixLayoutDestroy(c->ld);
    c->la = c->lb = c->ld = NULL;
}

/* One column-major product D[m,n] = op(A)·op(B), A given as rows×cols. */
static kiln_status lt_matmul(kiln_cublaslt *lt, lt_call *c, const kiln_problem *p, int group,
                             cublasOperation_t ta, cublasOperation_t tb, uint64_t a_rows,
                             uint64_t a_cols, int64_t lda, const void *a, uint64_t b_rows,
                             uint64_t b_cols, int64_t ldb, const void *b, uint64_t d_rows,
                             uint64_t d_cols, int64_t ldd, void *d, float alpha, float beta,
                             CUstream stream, kiln_error *err)
{
    /* cuBLASLt's A is always kiln's b operand (W, or X for wgrad) and its
     * B kiln's a (X or dY): their types differ for e5m2 x e4m3. */
    cudaDataType_t ta_type = lt_type(p->b_type), tb_type = lt_type(p->a_type);
    cudaDataType_t out = lt_type(p->out_type);
    kiln_status st;
    char what[96];
    snprintf(what, sizeof what, "cublasLtMatrixLayoutCreate (group %d)", group);
    if ((st = lt_check(lt, lt->cublasLtMatrixLayoutCreate(&c->la, ta_type, a_rows, a_cols, lda), what, err)) ||
        (st = lt_check(lt, lt->cublasLtMatrixLayoutCreate(&c->lb, tb_type, b_rows, b_cols, ldb), what, err)) ||
        (st = lt_check(lt, lt->cublasLtMatrixLayoutCreate(&c->ld, out, d_rows, d_cols, ldd), what, err))) {
        lt_call_free(lt, c);
        return st;
    }
    lt->cublasLtMatmulDescSetAttribute(c->desc, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof ta);
    lt->cublasLtMatmulDescSetAttribute(c->desc, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof tb);
    snprintf(what, sizeof what, "cublasLtMatmul (group %d, %llux%llu, %s)", group,
             (unsigned long long)d_rows, (unsigned long long)d_cols, kiln_op_name(p->op));
    st = lt_check(lt,
                  lt->cublasLtMatmul(lt->handle, c->desc, &alpha, a, c->la, b, c->lb, &beta, d, c->ld,
                                     d, c->ld, NULL, (void *)(uintptr_t)lt->workspace,
                                     KILN_LT_MATMUL_WORKSPACE, stream),
                  what, err);
    lt_call_free(lt, c);
    return st;
}

/* fp8, once per call: the tensor cores' fast accumulation unless the call
 * asks for promotion (cuBLASLt then promotes to fp32 at intervals of its
 * own choosing, as kiln's promoting kernels do every 128 of k). */
static kiln_status lt_fp8_accumulation(kiln_cublaslt *lt, cublasLtMatmulDesc_t desc,
                                       const kiln_problem *p, kiln_error *err)
{
    int8_t fast = p->fp8.promote ? 0 : 1;
    return lt_check(lt,
                    lt->cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_FAST_ACCUM, &fast,
                                                       sizeof fast),
                    "cublasLtMatmulDescSetAttribute (FAST_ACCUM)", err);
}

/* fp8 scale i's 16-byte aligned slot in the workspace's tail: group i's
 * scale_b, and slot G for scale_a. */
static CUdeviceptr lt_scale_slot(const kiln_cublaslt *lt, int i)
{
    return lt->workspace + KILN_LT_MATMUL_WORKSPACE + 16u * (unsigned)i;
}

/* One fp32 scale copied on the stream into its slot. */
static kiln_status lt_stage_scale(const kiln_cublaslt *lt, const kiln_driver *drv, int i,
                                  const float *src, CUstream stream, const char *what,
                                  kiln_error *err)
{
    return kiln_driver_check(drv,
                             drv->cuMemcpyDtoDAsync(lt_scale_slot(lt, i),
                                                    (CUdeviceptr)(uintptr_t)src, sizeof(float),
                                                    stream),
                             what, err);
}

/* fp8, before group g's product: its dequantization scales, device
 * pointers that cuBLASLt takes into the launch (so the next group may set
 * others).  cuBLASLt's A is W (scale_b[g], staged here), its B the rows
 * (scale_a, staged once per call). */
static kiln_status lt_fp8_scales(kiln_cublaslt *lt, const kiln_driver *drv,
                                 cublasLtMatmulDesc_t desc, const kiln_problem *p, int g,
                                 CUstream stream, kiln_error *err)
{
    const float *sw = (const float *)(uintptr_t)lt_scale_slot(lt, g);
    const float *sx = (const float *)(uintptr_t)lt_scale_slot(lt, p->groups);
    kiln_status st = lt_stage_scale(lt, drv, g, p->fp8.d_scale_b + g, stream,
                                    "cuMemcpyDtoDAsync (group scale_b to an aligned slot)", err);
    if (st) return st;
    st = lt_check(lt,
                  lt->cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_A_SCALE_POINTER,
                                                     &sw, sizeof sw),
                  "cublasLtMatmulDescSetAttribute (A_SCALE_POINTER)", err);
    if (st) return st;
    return lt_check(lt,
                    lt->cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_B_SCALE_POINTER,
                                                       &sx, sizeof sx),
                    "cublasLtMatmulDescSetAttribute (B_SCALE_POINTER)", err);
}

static kiln_status run_epilogue(const kiln_cublaslt *lt, const kiln_driver *drv, const kiln_problem *p, int g, int64_t row0,
                                int64_t rows, char *d, int64_t ldd, CUstream stream, kiln_error *err)
{
    const kiln_epilogue *e = &p->epilogue;
    int64_t cols = kiln_problem_out_cols(p);
    int osz = kiln_dtype_size(p->out_type);
    int64_t ldc = e->ldc ? e->ldc : cols, ldb = e->ld_bias ? e->ld_bias : cols;
    void *dp = d;
    const void *cp = e->beta != 0.0f ? (const char *)e->d_c + row0 * ldc * osz : NULL;
    float beta = e->beta;
    const void *bp = e->d_bias ? (const char *)e->d_bias + g * ldb * osz : NULL;
    const float *sp = e->d_row_scale ? e->d_row_scale + row0 : NULL;
    int sb = e->scale_bias != 0;
    const float *ap = e->d_alpha ? e->d_alpha + g : NULL;
    long long lrows = rows, lcols = cols, lldd = ldd, lldc = ldc;
    int t = (int)p->out_type;
    void *params[] = {&dp, &lldd, &cp, &lldc, &beta, &bp, &sp, &sb, &ap, &lrows, &lcols, &t};
    int64_t blocks = (rows * cols + 255) / 256;
    if (blocks > 65536) blocks = 65536;
    CUresult r = drv->cuLaunchKernel(lt->epi, (unsigned)blocks, 1, 1, 256, 1, 1, 0, stream, params,
                                     NULL);
    return kiln_driver_check(drv, r, "launching kiln_lt_epilogue", err);
}

kiln_status kiln_cublaslt_run(kiln_cublaslt **slot, const kiln_rt_env *env, kiln_kernels *ks,
                              const kiln_problem *p, CUstream stream, kiln_error *err)
{
    const kiln_driver *drv = env->drv;
    /* dispatch never sends a bias gradient here; a direct call must not
     * return with db unwritten */
    if (p->d_dbias || p->d_dbias_ptrs)
        return kiln_error_set(err, KILN_ERROR_UNSUPPORTED,
                              "cuBLASLt cannot compute the bias gradient (problem->d_dbias)");
    const int fp8 = p->fp8.recipe != KILN_FP8_NONE;
    char why[200];
    if (fp8 && !kiln_cublaslt_fp8_serves(p, env->dev ? env->dev->arch : NULL, why, sizeof why))
        return kiln_error_set(err, KILN_ERROR_UNSUPPORTED, "%s", why);
    CUstreamCaptureStatus cap = CU_STREAM_CAPTURE_STATUS_NONE;
    kiln_status st = kiln_driver_check(drv, drv->cuStreamIsCapturing(stream, &cap),
                                       "cuStreamIsCapturing", err);
    if (st) return st;
    if (cap != CU_STREAM_CAPTURE_STATUS_NONE)
        return kiln_error_set(err, KILN_ERROR_UNSUPPORTED,
                              "the stream is capturing a CUDA graph, but the call went to cuBLASLt, "
                              "which takes its sizes from the host (not graph-safe)");
    if ((st = lt_load(slot, env, err))) return st;
    kiln_cublaslt *lt = *slot;
    const kiln_epilogue *e = &p->epilogue;
    int fix = p->op != KILN_OP_WGRAD &&
              (e->d_row_scale || e->d_alpha || e->d_bias || e->beta != 0.0f);
    if (fix && (st = epilogue_load(lt, ks, err))) return st;

    int esz = kiln_dtype_size(p->a_type), bsz = kiln_dtype_size(p->b_type);
    int osz = kiln_dtype_size(p->out_type);
    /* fp8 dgrad reads W transposed, [G, K, N] (fp8.d_bt): K rows of N per
     * group, ldb their pitch. */
    const int fp8_dgrad = fp8 && p->op == KILN_OP_DGRAD;
    int64_t lda = p->lda ? p->lda : kiln_problem_a_cols(p);
    int64_t ldb = p->ldb ? p->ldb : fp8_dgrad ? p->n : p->k;
    int64_t w_rows = fp8_dgrad ? p->k : p->n;
    int64_t ldd = p->ldd ? p->ldd : kiln_problem_out_cols(p);
    int wptrs = p->op != KILN_OP_WGRAD && p->d_b_ptrs;
    int optrs = p->op == KILN_OP_WGRAD && p->wgrad_output == KILN_WGRAD_DISCRETE;
    if (wptrs && (st = read_ptrs(lt, drv, p->d_b_ptrs, p->groups, stream, err))) return st;
    if (optrs && (st = read_ptrs(lt, drv, (const void *const *)p->d_out_ptrs, p->groups, stream, err)))
        return st;

    lt_call c;
    memset(&c, 0, sizeof c);
    if ((st = lt_check(lt, lt->cublasLtMatmulDescCreate(&c.desc, CUBLAS_COMPUTE_32F, CUDA_R_32F),
                       "cublasLtMatmulDescCreate", err)))
        return st;
    if (fp8 && (st = lt_fp8_accumulation(lt, c.desc, p, err))) {
        lt->cublasLtMatmulDescDestroy(c.desc);
        return st;
    }
    if (fp8 && !st)
        st = lt_stage_scale(lt, drv, p->groups, p->fp8.d_scale_a, stream,
                            "cuMemcpyDtoDAsync (scale_a to an aligned slot)", err);
    float alpha = p->op == KILN_OP_WGRAD || e->d_alpha ? 1.0f : e->alpha;
    const char *A = p->d_a, *B = fp8_dgrad ? p->fp8.d_bt : p->d_b;
    char *D = p->d_out;
    int64_t off = 0;
    for (int g = 0; g < p->groups && !st; g++) {
        int64_t m;
        if (p->sizes_kind == KILN_SIZES_OFFSETS) {
            int64_t end = p->host_sizes[g];
            m = end - off;
        } else {
            m = p->host_sizes[g];
        }
        if (p->op == KILN_OP_WGRAD) {
            char *dg = optrs ? (char *)lt->host_ptrs[g] : D + (int64_t)g * p->n * ldd * osz;
            if (m == 0) {
                /* An empty group's dW is zero (or left alone when accumulating). */
                if (!p->accumulate)
                    st = kiln_driver_check(drv,
                                           drv->cuMemsetD2D8Async((CUdeviceptr)(uintptr_t)dg,
                                                                      (size_t)(ldd * osz), 0,
                                                                      (size_t)(p->k * osz),
                                                                      (size_t)p->n, stream),
                                           "cuMemsetD2D8Async (empty group's dW)", err);
            } else {
                /* dW_g^T[K,N] = X_g^T[K,m] · dY_g[m,N] (column-major view). */
                st = lt_matmul(lt, &c, p, g, CUBLAS_OP_N, CUBLAS_OP_T, (uint64_t)p->k, (uint64_t)m,
                               ldb, B + off * ldb * esz, (uint64_t)p->n, (uint64_t)m, lda,
                               A + off * lda * esz, (uint64_t)p->k, (uint64_t)p->n, ldd, dg, 1.0f,
                               p->accumulate ? 1.0f : 0.0f, stream, err);
            }
        } else if (m > 0) {
            const char *w = wptrs ? (const char *)lt->host_ptrs[g]
                                  : B + (int64_t)g * w_rows * ldb * bsz;
            char *dg = D + off * ldd * osz;
            const uint64_t kred = (uint64_t)kiln_problem_a_cols(p);
            const uint64_t nout = (uint64_t)kiln_problem_out_cols(p);
            if (fp8) st = lt_fp8_scales(lt, drv, c.desc, p, g, stream, err);
            /* fprop: Y^T[N,m] = (W^T[K,N])^T · X^T[K,m].  fp8 dgrad in the
             * same "TN" form (cuBLASLt's only one for fp8 on sm_90):
             * dX^T[K,m] = (W[N,K])^T · dY^T[N,m], d_bt's K rows of N being
             * W as a column-major N x K matrix. */
            if (!st && (p->op == KILN_OP_FPROP || fp8))
                st = lt_matmul(lt, &c, p, g, CUBLAS_OP_T, CUBLAS_OP_N, kred, nout, ldb, w, kred,
                               (uint64_t)m, lda, A + off * lda * esz, nout, (uint64_t)m, ldd, dg,
                               alpha, 0.0f, stream, err);
            else if (!st) /* dX^T[K,m] = W^T[K,N] · dY^T[N,m] */
                st = lt_matmul(lt, &c, p, g, CUBLAS_OP_N, CUBLAS_OP_N, (uint64_t)p->k,
                               (uint64_t)p->n, ldb, w, (uint64_t)p->n, (uint64_t)m, lda,
                               A + off * lda * esz, (uint64_t)p->k, (uint64_t)m, ldd, dg, alpha,
                               0.0f, stream, err);
            if (!st && fix) st = run_epilogue(lt, drv, p, g, off, m, dg, ldd, stream, err);
        }
        off += m;
    }
    lt->cublasLtMatmulDescDestroy(c.desc);
    return st;
}
