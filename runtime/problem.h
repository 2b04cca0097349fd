/* SPDX-License-Identifier: Apache-2.0 */
/*
 * problem.h — a kiln_problem: its defaults, its geometry, and the checks of
 * the contract in kiln.h made before any work is done.  Pure: no driver, no
 * device memory is read (only the optional host copy of the sizes), so it is
 * unit-tested on the CPU.
 */
#ifndef KILN_PROBLEM_H
#define KILN_PROBLEM_H

#include "common.h"

/* Byte alignment every row operand and weight pointer must have: kiln's
 * kernels move 16-byte vectors and describe operands to the tensor-memory
 * accelerator, which needs 16-byte aligned addresses and strides. */
#define KILN_OPERAND_ALIGN 16

/* Output columns of the op: N for fprop, K for dgrad, K for wgrad. */
int64_t kiln_problem_out_cols(const kiln_problem *p);
/* Columns of the row operand A: K for fprop, N for dgrad and wgrad. */
int64_t kiln_problem_a_cols(const kiln_problem *p);

/* KILN_OK, or KILN_ERROR_INVALID_ARGUMENT with a message naming the
 * argument ("problem->d_a is NULL", "kiln_problem.struct_size = ..."). */
kiln_status kiln_validate_problem(const kiln_problem *p, kiln_error *err);

/* KILN_OK if opts (non-NULL) was made by this kiln's
 * kiln_context_options_init; else KILN_ERROR_INVALID_ARGUMENT naming
 * kiln_context_options.struct_size. */
kiln_status kiln_validate_options(const kiln_context_options *opts, kiln_error *err);

#endif /* KILN_PROBLEM_H */
