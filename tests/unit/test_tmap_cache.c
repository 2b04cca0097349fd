/* SPDX-License-Identifier: Apache-2.0 */
/* test_tmap_cache.c — the tensor-map cache (runtime/tmap_cache.c) on the
 * CPU, with a fake encoder standing in for cuTensorMapEncodeTiled: its
 * bytes are a function of every argument, so a map served for the wrong
 * key shows as different bytes; it counts its calls, so hits show as calls
 * not made. */
#include <string.h>

#include "testutil.h"

#include "tmap_cache.h"

static int encodes;          /* calls of fake_encode */
static CUresult fail_with;   /* CUDA_SUCCESS, or what fake_encode returns */

static uint64_t mix(uint64_t h, uint64_t v)
{
    h = (h ^ v) * 0x100000001B3ull;
    return h ^ (h >> 31);
}

/* What a driver would write: 128 bytes derived from every argument (the
 * arrays read to the rank, as the driver reads them). */
static CUresult fake_encode(CUtensorMap *map, CUtensorMapDataType dtype, cuuint32_t rank,
                            void *base, const cuuint64_t *dims, const cuuint64_t *strides,
                            const cuuint32_t *box, const cuuint32_t *estr,
                            CUtensorMapInterleave il, CUtensorMapSwizzle sw,
                            CUtensorMapL2promotion l2, CUtensorMapFloatOOBfill oob)
{
    encodes++;
    if (fail_with != CUDA_SUCCESS) {
        memset(map, 0xEE, sizeof *map); /* garbage the cache must not keep */
        return fail_with;
    }
    uint64_t h = 0xCBF29CE484222325ull;
    h = mix(h, (uint64_t)dtype);
    h = mix(h, rank);
    h = mix(h, (uint64_t)(uintptr_t)base);
    for (cuuint32_t i = 0; i < rank; i++) {
        h = mix(h, dims[i]);
        h = mix(h, box[i]);
        h = mix(h, estr[i]);
        if (i + 1 < rank) h = mix(h, strides[i]);
    }
    h = mix(h, (uint64_t)il);
    h = mix(h, (uint64_t)sw);
    h = mix(h, (uint64_t)l2);
    h = mix(h, (uint64_t)oob);
    for (int i = 0; i < 16; i++) map->opaque[i] = h = mix(h, (uint64_t)i);
    return CUDA_SUCCESS;
}

static kiln_tmap_request base_request(uint64_t base)
{
    kiln_tmap_request r = {
        .dtype = CU_TENSOR_MAP_DATA_TYPE_BFLOAT16,
        .rank = 2,
        .base = (const void *)(uintptr_t)base,
        .dims = {4096, 32768},
        .strides = {8192},
        .box = {64, 128},
        .elem_strides = {1, 1},
        .interleave = CU_TENSOR_MAP_INTERLEAVE_NONE,
        .swizzle = CU_TENSOR_MAP_SWIZZLE_128B,
        .l2_promotion = CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
        .oob_fill = CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE,
    };
    return r;
}

/* The map a fresh encode gives, bypassing any cache. */
static kiln_tmap fresh(const kiln_tmap_request *r)
{
    kiln_tmap m;
    int before = encodes;
    assert_int_equal(kiln_tmap_cache_encode(NULL, fake_encode, 0, r, &m), CUDA_SUCCESS);
    assert_int_equal(encodes, before + 1);
    return m;
}

/* Encodes through c; asserts the bytes are a fresh encode's and that the
 * encoder ran (miss) or not (hit) as expected. */
static void expect(kiln_tmap_cache *c, int role, const kiln_tmap_request *r, int hit)
{
    kiln_tmap want = fresh(r), got;
    memset(&got, 0x5A, sizeof got);
    int before = encodes;
    assert_int_equal(kiln_tmap_cache_encode(c, fake_encode, role, r, &got), CUDA_SUCCESS);
    assert_int_equal(encodes - before, hit ? 0 : 1);
    assert_memory_equal(&got, &want, sizeof got);
}

static void test_hit_is_a_fresh_encode(void **state)
{
    (void)state;
    kiln_tmap_cache *c = kiln_tmap_cache_create();
    assert_non_null(c);
    kiln_tmap_request r = base_request(0x7f0000000000);
    expect(c, 0, &r, 0);
    expect(c, 0, &r, 1);
    expect(c, 0, &r, 1);
    /* Entries past the rank are not arguments: they do not change the key. */
    r.dims[3] = 77;
    r.box[4] = 9;
    r.strides[2] = 1234;
    expect(c, 0, &r, 1);
    uint64_t hits, misses;
    kiln_tmap_cache_counts(c, &hits, &misses);
    assert_int_equal(hits, 3);
    assert_int_equal(misses, 1);
    kiln_tmap_cache_destroy(c);
}

/* Every argument, and the role, is part of the key: changing any one of
 * them encodes again (and the bytes are that request's own). */
static void test_every_argument_keys(void **state)
{
    (void)state;
    kiln_tmap_cache *c = kiln_tmap_cache_create();
    const kiln_tmap_request r0 = base_request(0x7f0000100000);
    expect(c, 0, &r0, 0);
    for (int field = 0; field < 13; field++) {
        kiln_tmap_request r = r0;
        int role = 0;
        switch (field) {
        case 0: r.base = (const void *)(uintptr_t)0x7f0000100100; break;
        case 1: r.dtype = CU_TENSOR_MAP_DATA_TYPE_FLOAT16; break;
        case 2: r.dims[0] = 4104; break;
        case 3: r.dims[1] = 32776; break; /* capacity changed */
        case 4: r.strides[0] = 8208; break;
        case 5: r.box[0] = 32; break;
        case 6: r.box[1] = 64; break;
        case 7: r.elem_strides[1] = 2; break;
        case 8: r.swizzle = CU_TENSOR_MAP_SWIZZLE_64B; break;
        case 9: r.interleave = CU_TENSOR_MAP_INTERLEAVE_16B; break;
        case 10: r.l2_promotion = CU_TENSOR_MAP_L2_PROMOTION_L2_128B; break;
        case 11: r.oob_fill = CU_TENSOR_MAP_FLOAT_OOB_FILL_NAN_REQUEST_ZERO_FMA; break;
        case 12: role = 2; break;
        }
        expect(c, role, &r, 0);
        expect(c, role, &r, 1);
    }
    /* A third dimension is a different request from the 2-D one. */
    kiln_tmap_request r3 = r0;
    r3.rank = 3;
    r3.dims[2] = 1;
    r3.strides[1] = 8192ull * 32768;
    r3.box[2] = 1;
    r3.elem_strides[2] = 1;
    expect(c, 0, &r3, 0);
    expect(c, 0, &r0, 1); /* the first one is still there */
    kiln_tmap_cache_destroy(c);
}

/* A failed encode returns the driver's error and is not remembered: the
 * next call asks the encoder again. */
static void test_failure_not_cached(void **state)
{
    (void)state;
    kiln_tmap_cache *c = kiln_tmap_cache_create();
    kiln_tmap_request r = base_request(0x7f0000200000);
    kiln_tmap m;
    fail_with = CUDA_ERROR_INVALID_VALUE;
    int before = encodes;
    assert_int_equal(kiln_tmap_cache_encode(c, fake_encode, 1, &r, &m), CUDA_ERROR_INVALID_VALUE);
    assert_int_equal(kiln_tmap_cache_encode(c, fake_encode, 1, &r, &m), CUDA_ERROR_INVALID_VALUE);
    assert_int_equal(encodes - before, 2);
    fail_with = CUDA_SUCCESS;
    expect(c, 1, &r, 0);
    expect(c, 1, &r, 1);
    kiln_tmap_cache_destroy(c);
}

/* Many more keys than entries: every answer is still its own request's
 * bytes; a map used between every two new ones is the most recent of its
 * set each time, so it is never the one replaced; old ones are replaced. */
static void test_replacement(void **state)
{
    (void)state;
    kiln_tmap_cache *c = kiln_tmap_cache_create();
    const int total = KILN_TMAP_CACHE_SETS * KILN_TMAP_CACHE_WAYS;
    kiln_tmap_request hot = base_request(0x7e0000000000);
    expect(c, 0, &hot, 0);
    for (int i = 0; i < 4 * total; i++) {
        kiln_tmap_request r = base_request(0x7f0000000000 + (uint64_t)i * 256);
        expect(c, 1, &r, 0);
        expect(c, 0, &hot, 1);
    }
    /* The last ones stored are there (the hot map's way and collisions
     * among them keep a few out). */
    int hits = 0;
    for (int i = 4 * total - 32; i < 4 * total; i++) {
        kiln_tmap_request r = base_request(0x7f0000000000 + (uint64_t)i * 256);
        int before = encodes;
        kiln_tmap got;
        assert_int_equal(kiln_tmap_cache_encode(c, fake_encode, 1, &r, &got), CUDA_SUCCESS);
        hits += encodes == before;
    }
    assert_true(hits >= 24);
    /* The first quarter were pushed out by the three after them (each
     * lookup below stores its key again, so this comes last). */
    hits = 0;
    for (int i = 0; i < total; i++) {
        kiln_tmap_request r = base_request(0x7f0000000000 + (uint64_t)i * 256);
        kiln_tmap want = fresh(&r), got;
        int before = encodes;
        assert_int_equal(kiln_tmap_cache_encode(c, fake_encode, 1, &r, &got), CUDA_SUCCESS);
        hits += encodes == before;
        assert_memory_equal(&got, &want, sizeof got);
    }
    assert_true(hits < total / 8);
    kiln_tmap_cache_destroy(c);
}

/* No cache (out of memory, or KILN_HOST_CACHE=0) and a rank the cache does
 * not key: encoded every time. */
static void test_no_cache(void **state)
{
    (void)state;
    kiln_tmap_request r = base_request(0x7f0000300000);
    expect(NULL, 0, &r, 0);
    expect(NULL, 0, &r, 0);
    kiln_tmap_cache *c = kiln_tmap_cache_create();
    r.rank = 0;
    int before = encodes;
    kiln_tmap m;
    assert_int_equal(kiln_tmap_cache_encode(c, fake_encode, 0, &r, &m), CUDA_SUCCESS);
    assert_int_equal(kiln_tmap_cache_encode(c, fake_encode, 0, &r, &m), CUDA_SUCCESS);
    assert_int_equal(encodes - before, 2);
    uint64_t hits, misses;
    kiln_tmap_cache_counts(NULL, &hits, &misses);
    assert_int_equal(hits + misses, 0);
    kiln_tmap_cache_destroy(c);
}

KILN_TEST_MAIN(cmocka_unit_test(test_hit_is_a_fresh_encode),
               cmocka_unit_test(test_every_argument_keys),
               cmocka_unit_test(test_failure_not_cached),
               cmocka_unit_test(test_replacement),
               cmocka_unit_test(test_no_cache))
