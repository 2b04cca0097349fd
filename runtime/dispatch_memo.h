/* SPDX-License-Identifier: Apache-2.0 */
/*
 * dispatch_memo.h — the last dispatch decisions of a context, remembered.
 *
 * kiln_dispatch reads the problem's fields but never the values of its
 * pointers: only whether each device pointer and host_sizes is given (and,
 * for those, nothing behind them).  So a decision is a function of the
 * problem with every pointer replaced by "given or not", plus what is fixed
 * for a context (arch, catalog, tables, allowed backends) and the tuned
 * entries that failed to load (which only ever grow, and a decision is
 * remembered only once its kernel has loaded).  The memo keys on exactly
 * that normalised problem; a call that repeats a signature with other
 * buffers (every step of a training loop) skips the cascade and the kernel
 * lookup.  tests/unit/test_dispatch_memo.c checks, against the built-in
 * catalog and table, that changing a pointer's value or the host sizes'
 * contents never changes kiln_dispatch's answer: a predicate that starts
 * reading one of them must make the key carry it.
 *
 * Fixed size (KILN_DISPATCH_MEMO_SIZE entries, least recently used one
 * replaced), allocated once.  Not thread-safe: the context's lock
 * serialises its calls.
 */
#ifndef KILN_DISPATCH_MEMO_H
#define KILN_DISPATCH_MEMO_H

#include <stdint.h>

#include "dispatch.h"

#define KILN_DISPATCH_MEMO_SIZE 16

struct kiln_rt_kernel;

/* A problem as dispatch sees it: a copy with every pointer 0 or 1. */
typedef struct kiln_dispatch_memo_key {
    kiln_problem p;
    uint64_t hash;
} kiln_dispatch_memo_key;

void kiln_dispatch_memo_key_of(const kiln_problem *p, kiln_dispatch_memo_key *key);

typedef struct kiln_dispatch_memo kiln_dispatch_memo;

/* NULL when out of memory (callers then dispatch every time). */
kiln_dispatch_memo *kiln_dispatch_memo_create(void);
void kiln_dispatch_memo_destroy(kiln_dispatch_memo *m);

/* 1 with the decision and kernel put for key (the kernel NULL for
 * cuBLASLt); 0 when there is none (m NULL included). */
int kiln_dispatch_memo_get(kiln_dispatch_memo *m, const kiln_dispatch_memo_key *key,
                           kiln_dispatch_choice *c, struct kiln_rt_kernel **kernel);
/* Remembers a decision whose kernel has loaded (nothing when m is NULL). */
void kiln_dispatch_memo_put(kiln_dispatch_memo *m, const kiln_dispatch_memo_key *key,
                            const kiln_dispatch_choice *c, struct kiln_rt_kernel *kernel);

/* Hits and misses since creation. */
void kiln_dispatch_memo_counts(const kiln_dispatch_memo *m, uint64_t *hits, uint64_t *misses);

#endif /* KILN_DISPATCH_MEMO_H */
