/* SPDX-License-Identifier: Apache-2.0 */
/* tmap_cache.c — encoded tensor maps by their encode arguments (tmap_cache.h). */
#include <stdlib.h>
#include <string.h>

#include "hash64.h"
#include "tmap_cache.h"

/* A request in canonical form: fixed-width members, entries past the rank
 * zero, no padding, so two requests that encode alike compare equal byte
 * for byte and hash alike. */
typedef struct tmap_key {
    uint64_t base;
    uint64_t dims[KILN_TMAP_MAX_RANK];
    uint64_t strides[KILN_TMAP_MAX_RANK - 1];
    uint32_t box[KILN_TMAP_MAX_RANK];
    uint32_t elem_strides[KILN_TMAP_MAX_RANK];
    int32_t dtype, rank, interleave, swizzle, l2_promotion, oob_fill, role, zero;
} tmap_key;

_Static_assert(sizeof(tmap_key) == 8 + 8 * KILN_TMAP_MAX_RANK + 8 * (KILN_TMAP_MAX_RANK - 1) +
                                       8 * KILN_TMAP_MAX_RANK + 32,
               "tmap_key has no padding (it is compared and hashed as bytes)");
_Static_assert((KILN_TMAP_CACHE_SETS & (KILN_TMAP_CACHE_SETS - 1)) == 0,
               "KILN_TMAP_CACHE_SETS is a power of two (the set is a mask of the hash)");

typedef struct tmap_entry {
    uint64_t hash;
    uint64_t last_use;                  /* the cache's clock at the last hit; 0: empty */
    tmap_key key;
    uint64_t map[16];                   /* the encoded bytes (a kiln_tmap, copied) */
} tmap_entry;

_Static_assert(sizeof(((tmap_entry *)0)->map) == sizeof(kiln_tmap), "a map is 128 bytes");

struct kiln_tmap_cache {
    uint64_t clock;
    uint64_t hits, misses;
    tmap_entry sets[KILN_TMAP_CACHE_SETS][KILN_TMAP_CACHE_WAYS];
};

kiln_tmap_cache *kiln_tmap_cache_create(void) { return calloc(1, sizeof(kiln_tmap_cache)); }

void kiln_tmap_cache_destroy(kiln_tmap_cache *c) { free(c); }

static void make_key(int role, const kiln_tmap_request *r, tmap_key *k)
{
    memset(k, 0, sizeof *k);
    k->base = (uint64_t)(uintptr_t)r->base;
    for (cuuint32_t i = 0; i < r->rank; i++) {
        k->dims[i] = r->dims[i];
        k->box[i] = r->box[i];
        k->elem_strides[i] = r->elem_strides[i];
        if (i + 1 < r->rank) k->strides[i] = r->strides[i];
    }
    k->dtype = (int32_t)r->dtype;
    k->rank = (int32_t)r->rank;
    k->interleave = (int32_t)r->interleave;
    k->swizzle = (int32_t)r->swizzle;
    k->l2_promotion = (int32_t)r->l2_promotion;
    k->oob_fill = (int32_t)r->oob_fill;
    k->role = role;
}

static CUresult encode_fresh(kiln_tmap_encode_fn encode, const kiln_tmap_request *r, kiln_tmap *out)
{
    CUtensorMap map; /* the driver's type, with the alignment it asks for */
    CUresult res = encode(&map, r->dtype, r->rank, (void *)r->base, r->dims, r->strides, r->box,
                          r->elem_strides, r->interleave, r->swizzle, r->l2_promotion, r->oob_fill);
    if (res == CUDA_SUCCESS) memcpy(out, &map, sizeof *out);
    return res;
}

CUresult kiln_tmap_cache_encode(kiln_tmap_cache *c, kiln_tmap_encode_fn encode, int role,
                                const kiln_tmap_request *r, kiln_tmap *out)
{
    if (!c || r->rank < 1 || r->rank > KILN_TMAP_MAX_RANK) return encode_fresh(encode, r, out);
    tmap_key key;
    make_key(role, r, &key);
    uint64_t h = kiln_hash64(&key, sizeof key);
    tmap_entry *set = c->sets[h & (KILN_TMAP_CACHE_SETS - 1)], *victim = &set[0];
    c->clock++;
    for (int w = 0; w < KILN_TMAP_CACHE_WAYS; w++) {
        tmap_entry *e = &set[w];
        if (e->last_use && e->hash == h && !memcmp(&e->key, &key, sizeof key)) {
            e->last_use = c->clock;
            c->hits++;
            memcpy(out, e->map, sizeof *out);
            return CUDA_SUCCESS;
        }
        if (e->last_use < victim->last_use) victim = e; /* empty ways (0) first */
    }
    c->misses++;
    CUresult res = encode_fresh(encode, r, out);
    if (res != CUDA_SUCCESS) return res;
    victim->hash = h;
    victim->last_use = c->clock;
    victim->key = key;
    memcpy(victim->map, out, sizeof victim->map);
    return CUDA_SUCCESS;
}

void kiln_tmap_cache_counts(const kiln_tmap_cache *c, uint64_t *hits, uint64_t *misses)
{
    *hits = c ? c->hits : 0;
    *misses = c ? c->misses : 0;
}
