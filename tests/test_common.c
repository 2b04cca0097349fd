/* test_common.c — the shared layer: SHA-256, strings, files, kernel
 * descriptions. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "testutil.h"
#include "kernel_desc.h"

static void test_sha256_vectors(void **state)
{
    (void)state;
    char hex[65];
    kiln_sha256_hex("", 0, hex);
    assert_string_equal(hex, "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
    kiln_sha256_hex("abc", 3, hex);
    assert_string_equal(hex, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
    const char *two = "abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq";
    kiln_sha256_hex(two, strlen(two), hex);
    assert_string_equal(hex, "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
    /* Streaming in odd pieces gives the same digest as one call. */
    char big[1000];
    for (int i = 0; i < 1000; i++) big[i] = (char)(i * 7);
    char one[65], many[65];
    kiln_sha256_hex(big, sizeof big, one);
    kiln_sha256 s;
    uint8_t d[32];
    kiln_sha256_init(&s);
    for (size_t off = 0; off < sizeof big; off += 37)
        kiln_sha256_update(&s, big + off, off + 37 > sizeof big ? sizeof big - off : 37);
    kiln_sha256_final(&s, d);
    kiln_hex(d, 32, many);
    assert_string_equal(one, many);
}

static void test_strbuf(void **state)
{
    (void)state;
    kiln_strbuf sb;
    kiln_strbuf_init(&sb);
    for (int i = 0; i < 1000; i++) kiln_strbuf_printf(&sb, "%d,", i);
    assert_false(sb.oom);
    assert_int_equal(sb.len, strlen(sb.data));
    assert_memory_equal(sb.data, "0,1,2,", 6);
    char *p = kiln_strbuf_take(&sb);
    assert_null(sb.data);
    assert_true(strstr(p, "999,") != NULL);
    free(p);
}

static void test_error_prefix(void **state)
{
    (void)state;
    kiln_error e;
    kiln_error_clear(&e);
    assert_int_equal(kiln_error_set(&e, KILN_ERROR_IO, "x %d", 5), KILN_ERROR_IO);
    kiln_error_prefix(&e, "file.c");
    assert_string_equal(e.msg, "file.c: x 5");
    assert_int_equal(e.status, KILN_ERROR_IO);
    assert_string_equal(kiln_status_name(KILN_ERROR_IO), "KILN_ERROR_IO");
}

static void test_files(void **state)
{
    (void)state;
    char *dir = kiln_test_mkdtemp("common");
    char path[4096], sub[4096];
    snprintf(sub, sizeof sub, "%s/a/b/c", dir);
    assert_int_equal(kiln_mkdirs(sub, NULL), KILN_OK);
    snprintf(path, sizeof path, "%s/f.bin", sub);
    const char data[] = "hello\0world";
    assert_int_equal(kiln_file_write_atomic(path, data, sizeof data, NULL), KILN_OK);
    char *back;
    size_t n;
    assert_int_equal(kiln_file_read(path, &back, &n, NULL), KILN_OK);
    assert_int_equal(n, sizeof data);
    assert_memory_equal(back, data, sizeof data);
    free(back);
    /* A missing file is an IO error naming the path. */
    kiln_error e;
    snprintf(path, sizeof path, "%s/missing", dir);
    assert_int_equal(kiln_file_read(path, &back, &n, &e), KILN_ERROR_IO);
    assert_non_null(strstr(e.msg, "missing"));
    /* A path under a regular file cannot be created: an error, not a crash. */
    snprintf(path, sizeof path, "%s/a/b/c/f.bin/x/y", dir);
    assert_int_equal(kiln_mkdirs(path, &e), KILN_ERROR_IO);
    kiln_test_rmtree(dir);
    free(dir);
}

static void test_desc_roundtrip(void **state)
{
    (void)state;
    kiln_kernel_desc d, back;
    kiln_launch_desc l, lback;
    kiln_desc_init(&d);
    memset(&l, 0, sizeof l);
    snprintf(d.name, sizeof d.name, "k1");
    d.op = KILN_OP_WGRAD;
    d.a_type = KILN_DTYPE_F16;
    d.out_type = KILN_DTYPE_F32;
    d.tile_n = 256;
    d.warpgroups = 2;
    d.wgrad_output = KILN_WGRAD_DISCRETE;
    d.accumulate = 1;
    d.epilogue.bias = KILN_BIAS_PER_GROUP;
    d.epilogue.alpha = KILN_ALPHA_PER_GROUP;
    snprintf(l.entry, sizeof l.entry, "kiln_k1");
    l.threads = 384;
    l.smem_bytes = 200000;
    l.persistent = 1;
    l.tmap[1].used = 1;
    l.tmap[1].box_inner = 64;
    l.tmap[1].box_outer = 256;
    l.tmap[1].swizzle = 128;
    kiln_strbuf sb;
    kiln_strbuf_init(&sb);
    kiln_desc_format(&d, &l, &sb);
    kiln_error e;
    assert_true(kiln_desc_parse(sb.data, &back, &lback, &e));
    kiln_strbuf sb2;
    kiln_strbuf_init(&sb2);
    kiln_desc_format(&back, &lback, &sb2);
    assert_string_equal(sb.data, sb2.data);
    assert_int_equal(back.op, KILN_OP_WGRAD);
    assert_int_equal(back.tile_n, 256);
    assert_int_equal(lback.tmap[1].box_outer, 256);
    assert_string_equal(lback.entry, "kiln_k1");
    /* A change in any field changes the text (it goes into cache keys). */
    back.stages = 5;
    kiln_strbuf sb3;
    kiln_strbuf_init(&sb3);
    kiln_desc_format(&back, &lback, &sb3);
    assert_string_not_equal(sb.data, sb3.data);
    /* Bad text is refused with the key named. */
    assert_false(kiln_desc_parse("name=x bogus=1", &back, &lback, &e));
    assert_non_null(strstr(e.msg, "bogus"));
    assert_false(kiln_desc_parse("name=x op=fly", &back, &lback, &e));
    assert_non_null(strstr(e.msg, "op"));
    kiln_strbuf_free(&sb);
    kiln_strbuf_free(&sb2);
    kiln_strbuf_free(&sb3);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_sha256_vectors), cmocka_unit_test(test_strbuf),
        cmocka_unit_test(test_error_prefix),   cmocka_unit_test(test_files),
        cmocka_unit_test(test_desc_roundtrip),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
