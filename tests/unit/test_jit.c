/* SPDX-License-Identifier: Apache-2.0 */
/* test_jit.c — kiln_jit_get: cache hit, compile + store, repair, errors. */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "testutil.h"
#include "common.h"
#include "jit.h"

static const char *k_src =
    "extern \"C\" __global__ void jit_k(float *x, int n) {\n"
    "    int i = blockIdx.x * blockDim.x + threadIdx.x;\n"
    "    if (i < n) x[i] += 1.0f;\n"
    "}\n";

static void count(void *user, const char *key, const kiln_cache_entry *e, int ok, const char *p)
{
    (void)key, (void)e, (void)p;
    if (ok) ++*(int *)user;
}

static int count_entries(kiln_cache *c)
{
    int n = 0;
    kiln_error err;
    assert_int_equal(kiln_cache_foreach(c, count, &n, &err), KILN_OK);
    return n;
}

static void test_no_cache(void **state)
{
    (void)state;
    kiln_cache_entry e;
    kiln_jit_origin o = KILN_JIT_CACHE;
    kiln_error warn, err;
    assert_int_equal(kiln_jit_get(NULL, "jit_k", "sm_90a", "desc", k_src, &e, &o, &warn, &err),
                     KILN_OK);
    assert_int_equal(o, KILN_JIT_COMPILED);
    assert_int_equal(warn.status, KILN_OK);
    assert_memory_equal(e.cubin, "\x7f" "ELF", 4);
    assert_string_equal(e.desc, "desc");
    assert_string_equal(e.arch, "sm_90a");
    char key[65];
    kiln_cache_key("sm_90a", "desc", k_src, key);
    assert_string_equal(e.key, key);
    assert_true(e.stats.registers > 0);
    kiln_cache_entry_free(&e);
}

static void test_compile_then_hit(void **state)
{
    const char *dir = *state;
    kiln_cache *c = NULL;
    kiln_error warn, err;
    assert_int_equal(kiln_cache_open(dir, &c, &err), KILN_OK);
    kiln_cache_entry a, b;
    kiln_jit_origin o;
    assert_int_equal(kiln_jit_get(c, "jit_k", "sm_90a", "d1", k_src, &a, &o, &warn, &err), KILN_OK);
    assert_int_equal(o, KILN_JIT_COMPILED);
    assert_int_equal(warn.status, KILN_OK);
    assert_int_equal(count_entries(c), 1);
    assert_int_equal(kiln_jit_get(c, "jit_k", "sm_90a", "d1", k_src, &b, &o, &warn, &err), KILN_OK);
    assert_int_equal(o, KILN_JIT_CACHE);
    assert_int_equal(warn.status, KILN_OK);
    assert_string_equal(a.key, b.key);
    assert_string_equal(b.desc, "d1");
    assert_int_equal(a.cubin_size, b.cubin_size);
    assert_memory_equal(a.cubin, b.cubin, a.cubin_size);
    assert_int_equal(a.stats.registers, b.stats.registers);
    assert_true(a.stats.seconds == b.stats.seconds); /* the stored compile time */
    kiln_cache_entry_free(&b);
    /* Another description or arch is another entry. */
    assert_int_equal(kiln_jit_get(c, "jit_k", "sm_90a", "d2", k_src, &b, &o, &warn, &err), KILN_OK);
    assert_int_equal(o, KILN_JIT_COMPILED);
    assert_string_not_equal(a.key, b.key);
    kiln_cache_entry_free(&b);
    assert_int_equal(kiln_jit_get(c, "jit_k", "sm_80", "d1", k_src, &b, &o, &warn, &err), KILN_OK);
    assert_int_equal(o, KILN_JIT_COMPILED);
    assert_string_equal(b.arch, "sm_80");
    kiln_cache_entry_free(&b);
    assert_int_equal(count_entries(c), 3);
    kiln_cache_entry_free(&a);
    kiln_cache_close(c);
}

static void test_damaged_is_rebuilt(void **state)
{
    const char *dir = *state;
    kiln_cache *c = NULL;
    kiln_error warn, err;
    assert_int_equal(kiln_cache_open(dir, &c, &err), KILN_OK);
    kiln_cache_entry a;
    kiln_jit_origin o;
    assert_int_equal(kiln_jit_get(c, "jit_k", "sm_90a", "d", k_src, &a, &o, &warn, &err), KILN_OK);
    char path[4400];
    assert_int_equal(kiln_cache_entry_path(c, a.key, path, sizeof path), 1);
    /* Flip one byte in the middle of the stored cubin. */
    char *data;
    size_t len;
    assert_int_equal(kiln_file_read(path, &data, &len, NULL), KILN_OK);
    data[len / 2] ^= 0x40;
    assert_int_equal(kiln_file_write_atomic(path, data, len, NULL), KILN_OK);
    free(data);

    kiln_cache_entry b;
    assert_int_equal(kiln_jit_get(c, "jit_k", "sm_90a", "d", k_src, &b, &o, &warn, &err), KILN_OK);
    assert_int_equal(o, KILN_JIT_COMPILED); /* never loaded the damaged one */
    assert_int_equal(warn.status, KILN_ERROR_CACHE);
    assert_non_null(strstr(warn.msg, "damaged"));
    assert_non_null(strstr(warn.msg, path));
    assert_memory_equal(a.cubin, b.cubin, a.cubin_size);
    kiln_cache_entry_free(&b);
    assert_int_equal(kiln_jit_get(c, "jit_k", "sm_90a", "d", k_src, &b, &o, &warn, &err), KILN_OK);
    assert_int_equal(o, KILN_JIT_CACHE);
    assert_int_equal(warn.status, KILN_OK);
    kiln_cache_entry_free(&b);
    kiln_cache_entry_free(&a);
    kiln_cache_close(c);
}

static void test_compile_error_stores_nothing(void **state)
{
    const char *dir = *state;
    char cache_dir[4200];
    snprintf(cache_dir, sizeof cache_dir, "%s/cache", dir);
    kiln_cache *c = NULL;
    kiln_error warn, err;
    assert_int_equal(kiln_cache_open(cache_dir, &c, &err), KILN_OK);
    kiln_cache_entry e;
    kiln_jit_origin o;
    kiln_status st = kiln_jit_get(c, "broken", "sm_90a", "d", "this is not C++ at all;", &e, &o,
                                  &warn, &err);
    assert_int_equal(st, KILN_ERROR_COMPILE);
    assert_non_null(strstr(err.msg, "kernel broken (sm_90a): NVRTC failed: "));
    char path[4400];
    snprintf(path, sizeof path, "%s/kiln-failed/broken-sm_90a.cu", dir);
    assert_non_null(strstr(err.msg, path));
    struct stat sb;
    assert_int_equal(stat(path, &sb), 0);
    assert_null(e.cubin);
    assert_null(e.desc);
    assert_int_equal(count_entries(c), 0);

    /* Bad arguments: refused before any work. */
    assert_int_equal(kiln_jit_get(c, "k", "compute_90", "d", k_src, &e, &o, &warn, &err),
                     KILN_ERROR_INVALID_ARGUMENT);
    assert_non_null(strstr(err.msg, "compute_90"));
    assert_int_equal(kiln_jit_get(c, "k", "sm_90a", "d", NULL, &e, &o, &warn, &err),
                     KILN_ERROR_INVALID_ARGUMENT);
    assert_int_equal(count_entries(c), 0);
    kiln_cache_close(c);
}

KILN_TEST_MAIN(
    cmocka_unit_test(test_no_cache),
    kiln_test_with_dir(test_compile_then_hit),
    kiln_test_with_dir(test_damaged_is_rebuilt),
    kiln_test_with_tmpdir(test_compile_error_stores_nothing))
