/* SPDX-License-Identifier: Apache-2.0 */
/*
 * catalog.h — the default generated kernels built into the runtime.
 *
 * At build time `kiln catalog` expands the specs in specs/default and writes this
 * table (kiln_catalog.c in the build folder), so the runtime can compile a
 * default kernel with NVRTC on a cache miss without Lua or libyaml.  With
 * the shipped tuning table it also carries the table's winners from
 * specs/sweeps, so a tuned kernel can be compiled on first use too.
 */
#ifndef KILN_CATALOG_H
#define KILN_CATALOG_H

#include <stddef.h>

typedef struct kiln_catalog_entry {
    const char *name;            /* kernel name (spec's `kernel:`) */
    const char *arch;            /* "sm_90a" */
    const char *desc;            /* kiln_desc_format text, launch included */
    const char *source;          /* generated CUDA source */
    int tuned_only;              /* 1: a tuning table's winner from a sweep, served
                                    only through the table; 0: a default kernel the
                                    heuristic may choose.  Defaults come first. */
} kiln_catalog_entry;

extern const kiln_catalog_entry kiln_catalog[];
extern const size_t kiln_catalog_count;
/* The shipped default tuning table's text (specs/tuning/), or NULL. */
extern const char *const kiln_catalog_tuning;

#endif /* KILN_CATALOG_H */
