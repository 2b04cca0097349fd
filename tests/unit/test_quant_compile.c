/* SPDX-License-Identifier: Apache-2.0 */
/* test_quant_compile.c — the quantizers' device source (templates/quant.cu,
 * as embedded in the runtime) compiles with NVRTC for sm_90a and sm_89,
 * holds every entry point runtime/quant.c launches, and spills nothing
 * (a spill would be a bandwidth loss in kernels meant to run at HBM
 * speed).  No GPU needed: CI catches a source that does not compile. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "testutil.h"
#include "common.h"
#include "nvrtc.h"
#include "quant.h"

/* Every name quant.c forms: kiln_quant_<kernel>_<in>_<out>, the amax pass
 * per input type, the finalize per output type. */
static const char *const k_entries[] = {
    "kiln_quant_rows_bf16_e4m3",        "kiln_quant_rows_bf16_e5m2",
    "kiln_quant_rows_fp16_e4m3",        "kiln_quant_rows_fp16_e5m2",
    "kiln_quant_rows_1x128_bf16_e4m3",  "kiln_quant_rows_1x128_bf16_e5m2",
    "kiln_quant_rows_1x128_fp16_e4m3",  "kiln_quant_rows_1x128_fp16_e5m2",
    "kiln_quant_tiles_bf16_e4m3",       "kiln_quant_tiles_bf16_e5m2",
    "kiln_quant_tiles_fp16_e4m3",       "kiln_quant_tiles_fp16_e5m2",
    "kiln_quant_tensor_bf16_e4m3",      "kiln_quant_tensor_bf16_e5m2",
    "kiln_quant_tensor_fp16_e4m3",      "kiln_quant_tensor_fp16_e5m2",
    "kiln_quant_delayed_bf16_e4m3",     "kiln_quant_delayed_bf16_e5m2",
    "kiln_quant_delayed_fp16_e4m3",     "kiln_quant_delayed_fp16_e5m2",
    "kiln_quant_amax_bf16",             "kiln_quant_amax_fp16",
    "kiln_quant_finalize_e4m3",         "kiln_quant_finalize_e5m2",
};

/* 1 if the NUL-terminated name occurs in the cubin's bytes (its symbol
 * table's strings). */
static int cubin_has(const void *cubin, size_t size, const char *name)
{
    size_t n = strlen(name) + 1; /* with the NUL: not a prefix of a longer name */
    const char *p = cubin;
    for (size_t i = 0; i + n <= size; i++)
        if (p[i] == name[0] && !memcmp(p + i, name, n)) return 1;
    return 0;
}

static void compile_for(const char *arch)
{
    kiln_compile_result r;
    kiln_error err;
    kiln_error_clear(&err);
    kiln_status st = kiln_nvrtc_compile(kiln_quant_source, "kiln_quant", arch, NULL, &r, &err);
    if (st != KILN_OK) fail_msg("templates/quant.cu for %s: %s\n%s", arch, err.msg, r.log ? r.log : "");
    for (size_t i = 0; i < sizeof k_entries / sizeof k_entries[0]; i++)
        if (!cubin_has(r.cubin, r.cubin_size, k_entries[i]))
            fail_msg("%s: the cubin has no entry %s", arch, k_entries[i]);
    if (r.stats.spill_stores || r.stats.spill_loads)
        fail_msg("%s: spills (%d bytes stored, %d loaded); log:\n%s", arch, r.stats.spill_stores,
                 r.stats.spill_loads, r.log);
    /* The largest kernel (the 128x128 tiles) fits 4 CTAs of 256 threads in
     * the 64K registers of an SM. */
    assert_true(r.stats.registers > 0 && r.stats.registers <= 64);
    printf("%s: %zu bytes, %d registers (max), %d bytes static shared, %.2f s\n", arch,
           r.cubin_size, r.stats.registers, r.stats.smem_static, r.stats.seconds);
    kiln_compile_result_free(&r);
}

static void test_sm90a(void **state)
{
    (void)state;
    compile_for("sm_90a");
}

static void test_sm89(void **state)
{
    (void)state;
    compile_for("sm_89");
}

/* The source is embedded whole: it starts with its provenance line and
 * ends with the last entry point. */
static void test_embedded(void **state)
{
    (void)state;
    assert_int_equal(strncmp(kiln_quant_source, "// kiln: fp8 quantizers (templates/quant.cu)", 44),
                     0);
    assert_non_null(strstr(kiln_quant_source, "kiln_quant_finalize_e5m2"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_embedded),
        cmocka_unit_test(test_sm90a),
        cmocka_unit_test(test_sm89),
    };
    kiln_test_filter();
    return cmocka_run_group_tests(tests, NULL, NULL);
}
