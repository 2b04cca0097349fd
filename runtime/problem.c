/* SPDX-License-Identifier: Apache-2.0 */
/* problem.c — defaults, geometry and the contract checks of a kiln_problem
 * (see problem.h); pure, so CPU-testable. */
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "kernel_desc.h"
#include "problem.h"

#define BAD(...) kiln_error_set(err, KILN_ERROR_INVALID_ARGUMENT, __VA_ARGS__)

int64_t kiln_problem_out_cols(const kiln_problem *p)
{
    return p->op == KILN_OP_FPROP ? p->n : p->k;
}

int64_t kiln_problem_a_cols(const kiln_problem *p)
{
    return p->op == KILN_OP_FPROP ? p->k : p->n;
}

void kiln_problem_init(kiln_problem *p, kiln_op op)
{
    if (!p) return;
    memset(p, 0, sizeof *p);
    p->struct_size = sizeof *p;
    p->op = op;
    p->a_type = p->b_type = p->out_type = KILN_DTYPE_BF16;
    p->epilogue.alpha = 1.0f;
    p->dbias_type = KILN_DTYPE_F32;
}

void kiln_context_options_init(kiln_context_options *opts)
{
    if (!opts) return;
    memset(opts, 0, sizeof *opts);
    opts->struct_size = sizeof *opts;
    opts->allowed_backends = KILN_ALLOW_ALL;
    opts->log_level = KILN_LOG_WARNING;
}

/* A caller built against another kiln.h (or a foreign-function mirror of
 * the struct) would have its members read at the wrong offsets: refuse it
 * before reading anything else. */
#define STRUCT_SIZE_HINT "(set it with %s, or rebuild against this kiln.h)"

kiln_status kiln_validate_options(const kiln_context_options *opts, kiln_error *err)
{
    if (opts->struct_size != sizeof *opts)
        return BAD("kiln_context_options.struct_size = %zu, but this kiln's kiln_context_options "
                   "is %zu bytes " STRUCT_SIZE_HINT,
                   opts->struct_size, sizeof *opts, "kiln_context_options_init");
    return KILN_OK;
}

static int is_16bit(kiln_dtype t) { return t == KILN_DTYPE_BF16 || t == KILN_DTYPE_F16; }

static kiln_status check_ptr(const void *ptr, const char *name, unsigned align, const char *why,
                             kiln_error *err)
{
    if (!ptr) return BAD("problem->%s is NULL", name);
    if ((uintptr_t)ptr % align)
        return BAD("problem->%s (%p) is not %u-byte aligned (%s)", name, ptr, align, why);
    return KILN_OK;
}

/* A leading dimension: 0 means dense rows (ld = cols); otherwise at least
 * cols and a multiple of the elements in 16 bytes. */
static kiln_status check_ld(int64_t ld, int64_t cols, kiln_dtype t, const char *name,
                            const char *row, kiln_error *err)
{
    if (ld == 0) return KILN_OK;
    if (ld < 0) return BAD("problem->%s is negative (%lld)", name, (long long)ld);
    if (ld < cols)
        return BAD("problem->%s = %lld is smaller than the row (%s = %lld)", name, (long long)ld,
                   row, (long long)cols);
    int per16 = 16 / kiln_dtype_size(t);
    if (ld % per16)
        return BAD("problem->%s = %lld is not a multiple of %d (rows must start 16-byte aligned "
                   "for %s)",
                   name, (long long)ld, per16, kiln_dtype_name(t));
    return KILN_OK;
}

static kiln_status check_host_sizes(const kiln_problem *p, kiln_error *err)
{
    int64_t total = 0, prev = 0;
    for (int32_t g = 0; g < p->groups; g++) {
        int64_t v = p->host_sizes[g];
        if (v < 0)
            return BAD("problem->host_sizes[%d] is negative (%lld)", (int)g, (long long)v);
        if (p->sizes_kind == KILN_SIZES_OFFSETS) {
            if (v < prev)
                return BAD("problem->host_sizes[%d] = %lld is smaller than host_sizes[%d] = %lld "
                           "(offsets must be non-decreasing)",
                           (int)g, (long long)v, (int)g - 1, (long long)prev);
            prev = v;
            total = v;
        } else {
            total += v;
        }
    }
    if (total > p->capacity)
        return BAD("problem->host_sizes add up to %lld rows, more than problem->capacity = %lld",
                   (long long)total, (long long)p->capacity);
    return KILN_OK;
}

/* The fused bias gradient of wgrad (optional): dense [G, ld_dbias] or one
 * pointer per group, elements of dbias_type (f32 or the output type).  The
 * kernels write it element by element, so only element alignment is asked. */
static kiln_status check_dbias(const kiln_problem *p, kiln_error *err)
{
    if (!p->d_dbias && !p->d_dbias_ptrs) {
        if (p->ld_dbias)
            return BAD("problem->ld_dbias = %lld is set, but no bias gradient is asked for "
                       "(d_dbias and d_dbias_ptrs are NULL)",
                       (long long)p->ld_dbias);
        return KILN_OK;
    }
    const char *which = p->d_dbias ? "d_dbias" : "d_dbias_ptrs";
    if (p->op != KILN_OP_WGRAD)
        return BAD("problem->%s is set, but op is %s (the bias gradient is computed by wgrad)",
                   which, kiln_op_name(p->op));
    if (p->d_dbias && p->d_dbias_ptrs)
        return BAD("problem->d_dbias and problem->d_dbias_ptrs are both set (give one bias "
                   "gradient layout)");
    if ((unsigned)p->dbias_type > KILN_DTYPE_E5M2)
        return BAD("problem->dbias_type = %d is not a kiln_dtype", (int)p->dbias_type);
    if (p->dbias_type != KILN_DTYPE_F32 && p->dbias_type != p->out_type)
        return BAD("problem->dbias_type %s is not supported (f32 or the output type, %s)",
                   kiln_dtype_name(p->dbias_type), kiln_dtype_name(p->out_type));
    unsigned esz = (unsigned)kiln_dtype_size(p->dbias_type);
    kiln_status st;
    if (p->d_dbias_ptrs) {
        if (p->ld_dbias)
            return BAD("problem->ld_dbias = %lld is set, but the bias gradient goes through "
                       "problem->d_dbias_ptrs (one [N] vector per group)",
                       (long long)p->ld_dbias);
        return check_ptr(p->d_dbias_ptrs, "d_dbias_ptrs", 8, "device pointers", err);
    }
    if ((st = check_ptr(p->d_dbias, "d_dbias", esz, "elements of dbias_type", err))) return st;
    if (p->ld_dbias < 0) return BAD("problem->ld_dbias is negative (%lld)", (long long)p->ld_dbias);
    if (p->ld_dbias && p->ld_dbias < p->n)
        return BAD("problem->ld_dbias = %lld is smaller than the row (N = %lld)",
                   (long long)p->ld_dbias, (long long)p->n);
    return KILN_OK;
}

static int is_8bit(kiln_dtype t) { return t == KILN_DTYPE_E4M3 || t == KILN_DTYPE_E5M2; }

/* The fp8 recipe (kiln.h, kiln_fp8): required with 8-bit inputs, refused
 * without them.  Scales are fp32; the row recipe's per-column scales are
 * read as 16-byte vectors. */
static kiln_status check_fp8(const kiln_problem *p, kiln_error *err)
{
    const kiln_fp8 *f = &p->fp8;
    if ((unsigned)f->recipe > KILN_FP8_BLOCK)
        return BAD("problem->fp8.recipe = %d is not a kiln_fp8_recipe", (int)f->recipe);
    if (!is_8bit(p->a_type)) {
        if (f->recipe != KILN_FP8_NONE)
            return BAD("problem->fp8.recipe is set, but the inputs are %s (fp8 recipes are for "
                       "e4m3/e5m2 inputs)", kiln_dtype_name(p->a_type));
        if (f->d_scale_a || f->d_scale_b || f->d_bt || f->ld_scale_a || f->promote)
            return BAD("problem->fp8 has %s set, but the inputs are %s (fp8 fields are for "
                       "e4m3/e5m2 inputs)",
                       f->d_scale_a ? "d_scale_a" : f->d_scale_b ? "d_scale_b" : f->d_bt ? "d_bt"
                       : f->ld_scale_a ? "ld_scale_a" : "promote",
                       kiln_dtype_name(p->a_type));
        return KILN_OK;
    }
    if (p->op == KILN_OP_WGRAD)
        return BAD("problem->a_type is %s, but fp8 wgrad is not built (fp8 serves fprop and "
                   "dgrad; take wgrad in bf16)", kiln_dtype_name(p->a_type));
    if (f->recipe == KILN_FP8_NONE)
        return BAD("problem->fp8.recipe is KILN_FP8_NONE, but the inputs are %s (give the "
                   "scaling recipe and its scales)", kiln_dtype_name(p->a_type));
    if (p->d_b_ptrs)
        return BAD("problem->d_b_ptrs is set, but fp8 weights must be one contiguous tensor");
    kiln_status st;
    if ((st = check_ptr(f->d_scale_a, "fp8.d_scale_a", 4, "fp32 scales", err))) return st;
    if ((st = check_ptr(f->d_scale_b, "fp8.d_scale_b", f->recipe == KILN_FP8_ROW ? 16 : 4,
                        f->recipe == KILN_FP8_ROW ? "per-column scales are read as 16-byte vectors"
                                                  : "fp32 scales", err)))
        return st;
    if (f->ld_scale_a && f->recipe != KILN_FP8_BLOCK)
        return BAD("problem->fp8.ld_scale_a = %lld is set, but only the block recipe reads it",
                   (long long)f->ld_scale_a);
    if (f->ld_scale_a < 0 || (f->ld_scale_a && f->ld_scale_a < p->capacity))
        return BAD("problem->fp8.ld_scale_a = %lld is smaller than problem->capacity = %lld "
                   "(scale_a holds capacity rows per k-block)",
                   (long long)f->ld_scale_a, (long long)p->capacity);
    if (p->op == KILN_OP_DGRAD) {
        if ((st = check_ptr(f->d_bt, "fp8.d_bt", KILN_OPERAND_ALIGN,
                            "fp8 dgrad reads the transposed weights [G,K,N] with TMA", err)))
            return st;
    } else if (f->d_bt) {
        return BAD("problem->fp8.d_bt is set, but op is fprop (the transposed weights are "
                   "dgrad's)");
    }
    return KILN_OK;
}

static kiln_status check_epilogue(const kiln_problem *p, kiln_error *err)
{
    const kiln_epilogue *e = &p->epilogue;
    if (p->op == KILN_OP_WGRAD) {
        if (e->d_bias) return BAD("problem->epilogue.d_bias is set, but wgrad has no epilogue");
        if (e->d_row_scale)
            return BAD("problem->epilogue.d_row_scale is set, but wgrad has no epilogue");
        if (e->d_alpha) return BAD("problem->epilogue.d_alpha is set, but wgrad has no epilogue");
        if (e->alpha != 1.0f)
            return BAD("problem->epilogue.alpha is %g, but wgrad has no epilogue (use 1)",
                       (double)e->alpha);
        if (e->beta != 0.0f)
            return BAD("problem->epilogue.beta is %g, but wgrad has no epilogue (use accumulate "
                       "for dW += ...)",
                       (double)e->beta);
        if (e->d_c) return BAD("problem->epilogue.d_c is set, but wgrad has no epilogue");
        return KILN_OK;
    }
    int64_t cols = kiln_problem_out_cols(p);
    kiln_status st;
    if (e->d_bias) {
        if ((st = check_ptr(e->d_bias, "epilogue.d_bias", KILN_OPERAND_ALIGN,
                            "bias rows are read as 16-byte vectors", err)))
            return st;
        if ((st = check_ld(e->ld_bias, cols, p->out_type, "epilogue.ld_bias", "N_out", err)))
            return st;
    }
    if (e->d_row_scale &&
        (st = check_ptr(e->d_row_scale, "epilogue.d_row_scale", 4, "fp32 elements", err)))
        return st;
    if (e->d_alpha && (st = check_ptr(e->d_alpha, "epilogue.d_alpha", 4, "fp32 elements", err)))
        return st;
    if (e->alpha != e->alpha) return BAD("problem->epilogue.alpha is NaN");
    if (e->beta != e->beta) return BAD("problem->epilogue.beta is NaN");
    if (e->beta != 0.0f) {
        if (!e->d_c)
            return BAD("problem->epilogue.d_c is NULL but epilogue.beta is %g (C is read when "
                       "beta != 0)",
                       (double)e->beta);
        if ((st = check_ptr(e->d_c, "epilogue.d_c", KILN_OPERAND_ALIGN,
                            "rows are read as 16-byte vectors", err)))
            return st;
        if ((st = check_ld(e->ldc, cols, p->out_type, "epilogue.ldc", "N_out", err))) return st;
    }
    return KILN_OK;
}

kiln_status kiln_validate_problem(const kiln_problem *p, kiln_error *err)
{
    if (!p) return BAD("problem is NULL");
    if (p->struct_size != sizeof *p)
        return BAD("kiln_problem.struct_size = %zu, but this kiln's kiln_problem is %zu bytes "
                   STRUCT_SIZE_HINT, p->struct_size, sizeof *p, "kiln_problem_init");
    if ((unsigned)p->op > KILN_OP_WGRAD) return BAD("problem->op = %d is not a kiln_op", (int)p->op);
    const char *opn = kiln_op_name(p->op);

    /* Types. */
    if ((unsigned)p->a_type > KILN_DTYPE_E5M2)
        return BAD("problem->a_type = %d is not a kiln_dtype", (int)p->a_type);
    if ((unsigned)p->b_type > KILN_DTYPE_E5M2)
        return BAD("problem->b_type = %d is not a kiln_dtype", (int)p->b_type);
    if ((unsigned)p->out_type > KILN_DTYPE_E5M2)
        return BAD("problem->out_type = %d is not a kiln_dtype", (int)p->out_type);
    if (!is_16bit(p->a_type) && !is_8bit(p->a_type))
        return BAD("problem->a_type %s is not supported (bf16, fp16, e4m3 or e5m2 inputs)",
                   kiln_dtype_name(p->a_type));
    if (!is_16bit(p->b_type) && !is_8bit(p->b_type))
        return BAD("problem->b_type %s is not supported (bf16, fp16, e4m3 or e5m2 inputs)",
                   kiln_dtype_name(p->b_type));
    /* 8-bit inputs may mix e4m3 and e5m2 (wgmma takes either for each). */
    if (is_16bit(p->a_type) ? p->a_type != p->b_type : !is_8bit(p->b_type))
        return BAD("problem->a_type %s and problem->b_type %s differ (mixed inputs are not "
                   "supported, but for e4m3 with e5m2)",
                   kiln_dtype_name(p->a_type), kiln_dtype_name(p->b_type));
    if (!is_16bit(p->out_type) && p->out_type != KILN_DTYPE_F32)
        return BAD("problem->out_type %s is not supported (bf16, fp16 or f32)",
                   kiln_dtype_name(p->out_type));

    /* Shapes. */
    if (p->groups <= 0 || p->groups > KILN_MAX_GROUPS)
        return BAD("problem->groups = %d is out of range (1 .. %d)", (int)p->groups,
                   KILN_MAX_GROUPS);
    if (p->n <= 0) return BAD("problem->n = %lld must be positive", (long long)p->n);
    if (p->k <= 0) return BAD("problem->k = %lld must be positive", (long long)p->k);
    const int per16 = 16 / kiln_dtype_size(p->a_type);
    if (p->n % per16)
        return BAD("problem->n = %lld is not a multiple of %d (16-byte rows for %s)",
                   (long long)p->n, per16, kiln_dtype_name(p->a_type));
    if (p->k % per16)
        return BAD("problem->k = %lld is not a multiple of %d (16-byte rows for %s)",
                   (long long)p->k, per16, kiln_dtype_name(p->a_type));
    if (p->n > INT32_MAX || p->k > INT32_MAX)
        return BAD("problem->n or problem->k exceeds 2^31-1");
    if (p->capacity < 0) return BAD("problem->capacity = %lld is negative", (long long)p->capacity);
    if (p->capacity > INT32_MAX)
        return BAD("problem->capacity = %lld exceeds 2^31-1 (sizes are int32)",
                   (long long)p->capacity);

    /* Sizes. */
    kiln_status st;
    if ((st = check_ptr(p->d_sizes, "d_sizes", 4, "int32 elements", err))) return st;
    if ((unsigned)p->sizes_kind > KILN_SIZES_OFFSETS)
        return BAD("problem->sizes_kind = %d is not a kiln_sizes_kind", (int)p->sizes_kind);
    if (p->host_sizes && (st = check_host_sizes(p, err))) return st;
    if (p->d_overflow && (st = check_ptr(p->d_overflow, "d_overflow", 4, "an int32", err)))
        return st;

    if ((st = check_fp8(p, err))) return st;

    /* Operands. */
    const char *vec = "kiln's kernels read 16-byte vectors and use TMA";
    if ((st = check_ptr(p->d_a, "d_a", KILN_OPERAND_ALIGN, vec, err))) return st;
    if ((st = check_ld(p->lda, kiln_problem_a_cols(p), p->a_type, "lda",
                       p->op == KILN_OP_FPROP ? "K" : "N", err)))
        return st;
    if (p->op == KILN_OP_WGRAD) {
        if (p->d_b_ptrs)
            return BAD("problem->d_b_ptrs is set, but wgrad takes X in problem->d_b (pointer "
                       "arrays are for fprop/dgrad weights)");
        if ((st = check_ptr(p->d_b, "d_b", KILN_OPERAND_ALIGN, vec, err))) return st;
    } else {
        if (p->d_b && p->d_b_ptrs)
            return BAD("problem->d_b and problem->d_b_ptrs are both set (give one weight layout)");
        if (is_8bit(p->b_type) && p->op == KILN_OP_DGRAD) {
            /* fp8 dgrad reads fp8.d_bt (checked above) */
        } else if (p->d_b_ptrs) {
            if ((st = check_ptr(p->d_b_ptrs, "d_b_ptrs", 8, "device pointers", err))) return st;
        } else if ((st = check_ptr(p->d_b, "d_b", KILN_OPERAND_ALIGN, vec, err))) {
            return st;
        }
    }
    if (is_8bit(p->b_type) && p->op == KILN_OP_DGRAD) {
        if ((st = check_ld(p->ldb, p->n, p->b_type, "ldb", "N, the rows of fp8.d_bt", err)))
            return st;
    } else if ((st = check_ld(p->ldb, p->k, p->b_type, "ldb", "K", err))) {
        return st;
    }

    /* Output. */
    if ((unsigned)p->wgrad_output > KILN_WGRAD_DISCRETE)
        return BAD("problem->wgrad_output = %d is not a kiln_wgrad_output", (int)p->wgrad_output);
    if (p->op == KILN_OP_WGRAD && p->wgrad_output == KILN_WGRAD_DISCRETE) {
        if (!p->d_out_ptrs)
            return BAD("problem->d_out_ptrs is NULL (wgrad_output is KILN_WGRAD_DISCRETE)");
        if ((st = check_ptr(p->d_out_ptrs, "d_out_ptrs", 8, "device pointers", err))) return st;
        if (p->d_out)
            return BAD("problem->d_out is set, but wgrad_output is KILN_WGRAD_DISCRETE (outputs "
                       "go through problem->d_out_ptrs)");
    } else {
        if (p->op != KILN_OP_WGRAD && p->wgrad_output != KILN_WGRAD_DENSE)
            return BAD("problem->wgrad_output is KILN_WGRAD_DISCRETE, but op is %s (wgrad only)",
                       opn);
        if (p->d_out_ptrs)
            return BAD("problem->d_out_ptrs is set, but only wgrad with KILN_WGRAD_DISCRETE "
                       "writes through pointers");
        if ((st = check_ptr(p->d_out, "d_out", KILN_OPERAND_ALIGN, vec, err))) return st;
    }
    if ((st = check_ld(p->ldd, kiln_problem_out_cols(p), p->out_type, "ldd",
                       p->op == KILN_OP_FPROP ? "N" : "K", err)))
        return st;
    if (p->accumulate) {
        if (p->op != KILN_OP_WGRAD)
            return BAD("problem->accumulate is set, but op is %s (accumulate is for wgrad)", opn);
        if (p->out_type != KILN_DTYPE_F32)
            return BAD("problem->accumulate is set, but problem->out_type is %s (accumulate "
                       "needs f32)",
                       kiln_dtype_name(p->out_type));
    }
    if ((st = check_dbias(p, err))) return st;
    return check_epilogue(p, err);
}
