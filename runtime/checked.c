/* SPDX-License-Identifier: Apache-2.0 */
/* checked.c — device pointers of a problem checked with the driver (see
 * checked.h). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "checked.h"
#include "kernel_desc.h"
#include "problem.h"

#define BAD(...) kiln_error_set(err, KILN_ERROR_INVALID_ARGUMENT, __VA_ARGS__)

kiln_status kiln_checked_from_env(int *on, kiln_error *err)
{
    const char *v = getenv("KILN_CHECK");
    if (!v || !*v) return KILN_OK;
    if (!strcmp(v, "1")) *on = 1;
    else if (!strcmp(v, "0")) *on = 0;
    else return BAD("KILN_CHECK=%.40s: expected 1 (check device pointers) or 0", v);
    return KILN_OK;
}

/* One pointer and the bytes from it that the call may touch. */
typedef struct span {
    const char *name;            /* "d_a", "epilogue.d_c" */
    const void *ptr;
    unsigned long long bytes;
    char shape[96];              /* how bytes was reached, for the message */
} span;

/* rows × cols elements of size esz, rows ld elements apart: the last
 * row's end. */
static unsigned long long matrix_bytes(int64_t rows, int64_t cols, int64_t ld, int esz)
{
    if (rows <= 0 || cols <= 0) return 0;
    if (ld == 0) ld = cols;
    return ((unsigned long long)(rows - 1) * (unsigned long long)ld + (unsigned long long)cols) *
           (unsigned long long)esz;
}

static void add_matrix(span *s, int *n, const char *name, const void *ptr, int64_t rows,
                       const char *rows_what, int64_t cols, int64_t ld, kiln_dtype t)
{
    if (!ptr) return;
    span *x = &s[(*n)++];
    x->name = name;
    x->ptr = ptr;
    x->bytes = matrix_bytes(rows, cols, ld, kiln_dtype_size(t));
    snprintf(x->shape, sizeof x->shape, "%s %lld rows of %lld %s, %lld apart", rows_what,
             (long long)rows, (long long)cols, kiln_dtype_name(t), (long long)(ld ? ld : cols));
}

static void add_array(span *s, int *n, const char *name, const void *ptr, int64_t count,
                      const char *of, int esz)
{
    if (!ptr) return;
    span *x = &s[(*n)++];
    x->name = name;
    x->ptr = ptr;
    x->bytes = count > 0 ? (unsigned long long)count * (unsigned long long)esz : 0;
    snprintf(x->shape, sizeof x->shape, "%lld %s", (long long)count, of);
}

/* The fp8 recipe's scales and dgrad's transposed weights (kiln.h, kiln_fp8). */
static void fp8_spans(const kiln_problem *p, span *s, int *n)
{
    const kiln_fp8 *f = &p->fp8;
    int64_t out_cols = kiln_problem_out_cols(p), k_red = kiln_problem_a_cols(p);
    int64_t kb = (k_red + 127) / 128, nb = (out_cols + 127) / 128;
    int64_t ld = f->ld_scale_a ? f->ld_scale_a : p->capacity;
    switch (f->recipe) {
    case KILN_FP8_TENSOR:
        add_array(s, n, "fp8.d_scale_a", f->d_scale_a, 1, "fp32 scale", 4);
        add_array(s, n, "fp8.d_scale_b", f->d_scale_b, p->groups, "fp32 scales (groups)", 4);
        break;
    case KILN_FP8_ROW:
        add_array(s, n, "fp8.d_scale_a", f->d_scale_a, p->capacity, "fp32 scales (capacity)", 4);
        add_matrix(s, n, "fp8.d_scale_b", f->d_scale_b, p->groups, "groups", out_cols, 0,
                   KILN_DTYPE_F32);
        break;
    case KILN_FP8_BLOCK:
        add_matrix(s, n, "fp8.d_scale_a", f->d_scale_a, kb, "k-blocks", p->capacity, ld,
                   KILN_DTYPE_F32);
        add_array(s, n, "fp8.d_scale_b", f->d_scale_b, (int64_t)p->groups * nb * kb,
                  "fp32 scales (groups x n-blocks x k-blocks)", 4);
        break;
    default: break;
    }
    if (p->op == KILN_OP_DGRAD)
        add_matrix(s, n, "fp8.d_bt", f->d_bt, (int64_t)p->groups * p->k, "groups*k", p->n, p->ldb,
                   p->b_type);
}

/* Every device pointer of p, with what the call may read or write through
 * it; kiln.h's shapes, the leading dimensions as launch.c applies them. */
static int problem_spans(const kiln_problem *p, span s[16])
{
    int n = 0;
    int64_t gn = (int64_t)p->groups * p->n, out_cols = kiln_problem_out_cols(p);
    int wgrad = p->op == KILN_OP_WGRAD;
    add_array(s, &n, "d_sizes", p->d_sizes, p->groups, "int32 sizes (groups)", 4);
    add_array(s, &n, "d_overflow", p->d_overflow, 1, "int32", 4);
    add_matrix(s, &n, "d_a", p->d_a, p->capacity, "capacity", kiln_problem_a_cols(p), p->lda,
               p->a_type);
    if (wgrad) add_matrix(s, &n, "d_b", p->d_b, p->capacity, "capacity", p->k, p->ldb, p->b_type);
    else add_matrix(s, &n, "d_b", p->d_b, gn, "groups*n", p->k, p->ldb, p->b_type);
    add_array(s, &n, "d_b_ptrs", p->d_b_ptrs, p->groups, "pointers (groups)", 8);
    if (wgrad) add_matrix(s, &n, "d_out", p->d_out, gn, "groups*n", p->k, p->ldd, p->out_type);
    else add_matrix(s, &n, "d_out", p->d_out, p->capacity, "capacity", out_cols, p->ldd,
                    p->out_type);
    if (wgrad && p->wgrad_output == KILN_WGRAD_DISCRETE)
        add_array(s, &n, "d_out_ptrs", p->d_out_ptrs, p->groups, "pointers (groups)", 8);
    if (wgrad) {
        add_matrix(s, &n, "d_dbias", p->d_dbias, p->groups, "groups", p->n, p->ld_dbias,
                   p->dbias_type);
        add_array(s, &n, "d_dbias_ptrs", p->d_dbias_ptrs, p->groups, "pointers (groups)", 8);
    }
    if (!wgrad) {
        const kiln_epilogue *e = &p->epilogue;
        add_matrix(s, &n, "epilogue.d_bias", e->d_bias, p->groups, "groups", out_cols,
                   e->ld_bias, p->out_type);
        add_array(s, &n, "epilogue.d_row_scale", e->d_row_scale, p->capacity,
                  "fp32 scales (capacity)", 4);
        add_array(s, &n, "epilogue.d_alpha", e->d_alpha, p->groups, "fp32 alphas (groups)", 4);
        /* C is read only when beta != 0 (launch.c passes no C otherwise). */
        if (e->beta != 0.0f)
            add_matrix(s, &n, "epilogue.d_c", e->d_c, p->capacity, "capacity", out_cols, e->ldc,
                       p->out_type);
        fp8_spans(p, s, &n);
    }
    return n;
}

static kiln_status check_span(const kiln_driver *d, const span *s, kiln_error *err)
{
    unsigned int type = 0;
    /* The driver writes a boolean here; a zeroed wide buffer reads right
     * whatever its width. */
    unsigned long long managed = 0;
    CUdeviceptr start = 0;
    size_t size = 0;
    CUpointer_attribute attrs[] = {CU_POINTER_ATTRIBUTE_MEMORY_TYPE, CU_POINTER_ATTRIBUTE_IS_MANAGED,
                                   CU_POINTER_ATTRIBUTE_RANGE_START_ADDR,
                                   CU_POINTER_ATTRIBUTE_RANGE_SIZE};
    void *data[] = {&type, &managed, &start, &size};
    CUdeviceptr ptr = (CUdeviceptr)(uintptr_t)s->ptr;
    char what[96];
    snprintf(what, sizeof what, "checked mode: cuPointerGetAttributes(problem->%s)", s->name);
    kiln_status st = kiln_driver_check(d, d->cuPointerGetAttributes(4, attrs, data, ptr), what, err);
    if (st) return st;
    /* A pointer the driver does not know gets type 0 (no error). */
    if (type == 0)
        return BAD("problem->%s (%p) is not device memory: the driver does not know it (host "
                   "memory from malloc, or memory already freed?)", s->name, s->ptr);
    if (type == CU_MEMORYTYPE_HOST && !managed)
        return BAD("problem->%s (%p) is host memory (pinned with cuMemAllocHost or registered), "
                   "not device memory", s->name, s->ptr);
    if (type != CU_MEMORYTYPE_DEVICE && type != CU_MEMORYTYPE_UNIFIED && !managed)
        return BAD("problem->%s (%p) is not device memory (memory type %u)", s->name, s->ptr,
                   type);
    /* The range is not always told (0): then only the type was checked. */
    if (size == 0 || ptr < start) return KILN_OK;
    unsigned long long left = (unsigned long long)(start + size - ptr);
    if (s->bytes > left)
        return BAD("problem->%s (%p): its allocation holds %llu bytes from there, but the call "
                   "may touch %llu bytes (%s)", s->name, s->ptr, left, s->bytes, s->shape);
    return KILN_OK;
}

kiln_status kiln_check_problem_memory(const kiln_driver *d, const kiln_problem *p,
                                      kiln_error *err)
{
    if (!d->cuPointerGetAttributes)
        return kiln_error_set(err, KILN_ERROR_DRIVER, "checked mode: the driver table has no "
                                                      "cuPointerGetAttributes");
    span s[16];
    int n = problem_spans(p, s);
    for (int i = 0; i < n; i++) {
        kiln_status st = check_span(d, &s[i], err);
        if (st) return st;
    }
    return KILN_OK;
}
