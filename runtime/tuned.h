/*
 * tuned.h — tuning tables in a context: the kernel `kiln tune` measured
 * fastest for a call's (arch, op, types, epilogue, shape class).
 *
 * Tables come from kiln_context_options.tuning_tables, from the bundles the
 * context opened, and from the default table built into the runtime (the
 * shipped specs/tuning/sm_90a.tuning), the first one given winning a shared
 * key.  A damaged or mismatched table is refused with a logged warning
 * naming file:line, and dispatch falls back to the default heuristic.
 *
 * A tuned kernel's cubin comes from a bundle (by id), else the cache (by
 * key, valid for the same kiln and NVRTC), else the built-in catalog (same
 * description, compiled on first use); when none has it, the entry is
 * skipped with one logged warning.  KILN_TUNING=off ignores every table
 * (to compare against the untuned heuristic).
 */
#ifndef KILN_TUNED_H
#define KILN_TUNED_H

#include "context.h"

void kiln_ctx_open_tuning(kiln_context *ctx, const char *const *paths);
void kiln_ctx_close_tuning(kiln_context *ctx);

/* The loaded tuned kernel for p, or NULL (then *why says why, for logs).
 * On success *reason names the entry and its measured time. */
kiln_rt_kernel *kiln_ctx_tuned_kernel(kiln_context *ctx, const kiln_problem *p, char *reason,
                                      size_t size);

#endif /* KILN_TUNED_H */
