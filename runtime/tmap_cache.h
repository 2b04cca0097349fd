/* SPDX-License-Identifier: Apache-2.0 */
/*
 * tmap_cache.h — encoded tensor maps, remembered per context.
 *
 * A tensor map is a pure function of the arguments of
 * cuTensorMapEncodeTiled (base address, data type, dims, strides, box,
 * element strides, interleave, swizzle, L2 promotion, OOB fill): the driver
 * reads no device state to make it.  So a map encoded once can be handed to
 * every later launch that asks for the same arguments, and a call on the
 * generated path stops paying one encode per operand (the largest part of
 * its host time).  The key is every one of those arguments plus the map's
 * role (a, b, d); a hit is a copy of the bytes the encoder wrote for that
 * key, so it is what a fresh encode would give.
 *
 * Fixed size (KILN_TMAP_CACHE_SETS × KILN_TMAP_CACHE_WAYS entries, hashed
 * into sets, least recently used way replaced), allocated once: nothing is
 * allocated per call.  The encoder is passed in (the driver's
 * cuTensorMapEncodeTiled in the runtime, a fake in tests/unit), so keying,
 * lookup and replacement are tested on the CPU.
 *
 * Not thread-safe: its owner serialises the calls (the context's lock,
 * include/kiln.h "Threads").
 */
#ifndef KILN_TMAP_CACHE_H
#define KILN_TMAP_CACHE_H

#include <stdint.h>

#include <cuda.h>

#include "kernel_abi.h"

#define KILN_TMAP_CACHE_SETS 64
#define KILN_TMAP_CACHE_WAYS 4
#define KILN_TMAP_MAX_RANK 5 /* the most cuTensorMapEncodeTiled takes */

/* cuTensorMapEncodeTiled's signature. */
typedef __typeof__(cuTensorMapEncodeTiled) *kiln_tmap_encode_fn;

/* The arguments of one encode: the first rank entries of each array are
 * read (rank - 1 for strides); the rest are ignored. */
typedef struct kiln_tmap_request {
    CUtensorMapDataType dtype;
    cuuint32_t rank;
    const void *base;
    cuuint64_t dims[KILN_TMAP_MAX_RANK];
    cuuint64_t strides[KILN_TMAP_MAX_RANK - 1]; /* bytes, dims 1 .. rank-1 */
    cuuint32_t box[KILN_TMAP_MAX_RANK];
    cuuint32_t elem_strides[KILN_TMAP_MAX_RANK];
    CUtensorMapInterleave interleave;
    CUtensorMapSwizzle swizzle;
    CUtensorMapL2promotion l2_promotion;
    CUtensorMapFloatOOBfill oob_fill;
} kiln_tmap_request;

typedef struct kiln_tmap_cache kiln_tmap_cache;

/* NULL when out of memory (callers then encode every time). */
kiln_tmap_cache *kiln_tmap_cache_create(void);
void kiln_tmap_cache_destroy(kiln_tmap_cache *c);

/* The map for (role, r) in *out: the cached bytes on a hit, else encode's
 * (then remembered).  A failed encode returns its CUresult, leaves *out
 * undefined and remembers nothing.  c NULL, or a rank outside
 * 1 .. KILN_TMAP_MAX_RANK, encodes without the cache. */
CUresult kiln_tmap_cache_encode(kiln_tmap_cache *c, kiln_tmap_encode_fn encode, int role,
                                const kiln_tmap_request *r, kiln_tmap *out);

/* Hits and misses since creation (a miss is one call of the encoder). */
void kiln_tmap_cache_counts(const kiln_tmap_cache *c, uint64_t *hits, uint64_t *misses);

#endif /* KILN_TMAP_CACHE_H */
