/* SPDX-License-Identifier: Apache-2.0 */
/*
 * checked.h — the checked mode (KILN_CHECK=1, kiln_context_options.checked):
 * before a call launches anything, every d_* pointer of its problem is asked
 * of the driver (cuPointerGetAttributes).  A pointer the driver does not
 * know (host memory from malloc, freed memory) or knows as host memory is
 * refused, and where the driver tells the allocation's range, an allocation
 * that ends before the last byte the call reads or writes is refused.  Both
 * with KILN_ERROR_INVALID_ARGUMENT naming the argument, instead of an
 * illegal-address fault that would end the caller's CUDA context.
 *
 * The device arrays of pointers (d_b_ptrs, d_out_ptrs) are checked
 * themselves; the pointers they hold are on the device and are not read.
 * Costs one driver query per pointer per call: a debugging mode.
 */
#ifndef KILN_CHECKED_H
#define KILN_CHECKED_H

#include "driver.h"

/* The environment's word on checked mode: KILN_CHECK=1 on, =0 off, unset
 * or empty: *on unchanged; anything else KILN_ERROR_INVALID_ARGUMENT. */
kiln_status kiln_checked_from_env(int *on, kiln_error *err);

/* Checks p (already validated by kiln_validate_problem) through
 * d->cuPointerGetAttributes, the only driver function it uses. */
kiln_status kiln_check_problem_memory(const kiln_driver *d, const kiln_problem *p,
                                      kiln_error *err);

#endif /* KILN_CHECKED_H */
