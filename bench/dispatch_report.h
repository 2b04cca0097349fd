/* SPDX-License-Identifier: Apache-2.0 */
/* dispatch_report.h — kiln_bench --dispatch-report (dispatch_report.c). */
#ifndef KILN_BENCH_DISPATCH_REPORT_H
#define KILN_BENCH_DISPATCH_REPORT_H

#include <stddef.h>

#include "tune.h"

/* Prints, per case of cases and kind of call csv_path (`kiln tune --csv`)
 * times that a catalog default serves (op, types, epilogue signature: bf16
 * plain fprop, fp8 row-wise dgrad, ...), the kernel the dispatcher picks
 * (with table_path's table, or the built-in one when NULL) and the model
 * alone's, each as a ratio to the best time measured, and a summary.  0,
 * or 2 on bad input. */
int kiln_bench_dispatch_report(const char *csv_path, const kiln_tune_shape *cases, size_t n_cases,
                               const char *table_path);

#endif
