/* SPDX-License-Identifier: Apache-2.0 */
/* fake_driver.h — a kiln context on a fake driver table, so that kiln_gemm
 * runs its whole host path on the CPU (tests/unit/test_host_path.c,
 * tests/unit/host_path_bench.c; test_quant_host.c builds its own module
 * fakes on fake_context_bare).  The fake records each launch and makes
 * each tensor map from its arguments' bytes.  The context is put together
 * by hand (runtime/context.h) with the built-in catalog marked loaded, as
 * no module can be loaded without a GPU. */
#ifndef KILN_FAKE_DRIVER_H
#define KILN_FAKE_DRIVER_H

#include <stdint.h>

#include "context.h"

#define FAKE(addr) ((void *)(uintptr_t)(addr))

/* What a launch was given. */
typedef struct fake_record {
    CUfunction f;
    unsigned grid, threads, smem, cluster;
    int pdl;                   /* the programmatic-serialization attribute, set to 1 */
    kiln_kernel_args args;
    kiln_tmap maps[3];
} fake_record;

extern fake_record fake_last;           /* the last launch */
extern int fake_encodes, fake_launches; /* counts, since the process began */

/* The hand-made context every fake builds on: allocated, its environment
 * wired, dev's limits, the current-context fake, the driver marked loaded;
 * no catalog, caches or launch fakes.  NULL when memory runs out. */
kiln_context *fake_context_bare(kiln_device_limits dev);

/* A context as kiln_context_create leaves it, on the fake driver, with the
 * per-call caches (dispatch memo, tensor maps) or without; every generated
 * kernel counted as loaded (function: its index + 1).  NULL when the
 * built-in catalog cannot be opened or memory runs out. */
kiln_context *fake_context(int caches);
void fake_context_free(kiln_context *ctx);

#endif
