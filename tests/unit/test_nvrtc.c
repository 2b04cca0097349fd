/* SPDX-License-Identifier: Apache-2.0 */
/* test_nvrtc.c — NVRTC compile, failure reports, ptxas report parsing. */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "testutil.h"
#include "common.h"
#include "nvrtc.h"

static const char *k_tiny =
    "extern \"C\" __global__ void tiny(float *x, int n) {\n"
    "    __shared__ float s[64];\n"
    "    int i = blockIdx.x * blockDim.x + threadIdx.x;\n"
    "    s[threadIdx.x & 63] = i < n ? x[i] : 0.f;\n"
    "    __syncthreads();\n"
    "    if (i < n) x[i] = 2.f * s[(threadIdx.x + 1) & 63];\n"
    "}\n";

static const char *k_bad =
    "extern \"C\" __global__ void bad(float *x) {\n"
    "    x[0] = 1.f\n" /* missing ';' */
    "    x[1] = undeclared_thing;\n"
    "}\n";

static int file_exists(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0 && S_ISREG(st.st_mode);
}

static void check_tiny(const char *arch)
{
    kiln_compile_result r;
    kiln_error err;
    kiln_error_clear(&err);
    kiln_status st = kiln_nvrtc_compile(k_tiny, "tiny", arch, NULL, &r, &err);
    if (st != KILN_OK) fprintf(stderr, "compile failed: %s\n", err.msg);
    assert_int_equal(st, KILN_OK);
    assert_non_null(r.cubin);
    assert_true(r.cubin_size > 64);
    assert_memory_equal(r.cubin, "\x7f" "ELF", 4);
    assert_non_null(r.log);
    assert_non_null(strstr(r.log, "ptxas"));
    assert_true(r.stats.registers > 0);
    assert_true(r.stats.registers <= 255);
    assert_int_equal(r.stats.smem_static, 64 * 4);
    assert_int_equal(r.stats.spill_stores, 0);
    assert_int_equal(r.stats.spill_loads, 0);
    assert_true(r.stats.seconds > 0.0);
    /* The ELF fallback reads the same register count as ptxas reported. */
    kiln_compile_stats e;
    memset(&e, 0, sizeof e);
    assert_int_equal(kiln_nvrtc_cubin_stats(r.cubin, r.cubin_size, &e), 1);
    assert_int_equal(e.registers, r.stats.registers);
    kiln_compile_result_free(&r);
    assert_null(r.cubin);
}

static void test_compile_sm90a(void **state) { (void)state; check_tiny("sm_90a"); }
static void test_compile_sm80(void **state) { (void)state; check_tiny("sm_80"); }

static void test_compile_error_saves_source(void **state)
{
    const char *dir = *state;
    kiln_compile_result r;
    kiln_error err;
    kiln_error_clear(&err);
    kiln_status st = kiln_nvrtc_compile(k_bad, "bad_kernel", "sm_90a", dir, &r, &err);
    assert_int_equal(st, KILN_ERROR_COMPILE);
    assert_int_equal(err.status, KILN_ERROR_COMPILE);
    assert_null(r.cubin);
    assert_non_null(r.log);
    assert_non_null(strstr(r.log, "error"));
    /* The message names the kernel and arch, carries NVRTC's own first error
     * line (which names the saved file and the line), and the saved path. */
    kiln_test_has(err.msg, "kernel bad_kernel (sm_90a): NVRTC failed: ",
                  "bad_kernel-sm_90a.cu(3): error", "expected a \";\"");
    char path[4200], logpath[4200];
    snprintf(path, sizeof path, "%s/bad_kernel-sm_90a.cu", dir);
    snprintf(logpath, sizeof logpath, "%s/bad_kernel-sm_90a.log", dir);
    char expect[4300];
    snprintf(expect, sizeof expect, "; source saved to %s", path);
    assert_non_null(strstr(err.msg, expect));
    assert_true(file_exists(path));
    assert_true(file_exists(logpath));
    char *data;
    size_t len;
    assert_int_equal(kiln_file_read(path, &data, &len, NULL), KILN_OK);
    assert_string_equal(data, k_bad);
    free(data);
    assert_int_equal(kiln_file_read(logpath, &data, &len, NULL), KILN_OK);
    assert_string_equal(data, r.log);
    free(data);
    kiln_compile_result_free(&r);
}

static void test_compile_error_default_dir(void **state)
{
    const char *dir = *state;
    kiln_compile_result r;
    kiln_error err;
    kiln_error_clear(&err);
    /* A name with a slash must not escape the folder. */
    kiln_status st = kiln_nvrtc_compile(k_bad, "x/../evil", "sm_80", NULL, &r, &err);
    assert_int_equal(st, KILN_ERROR_COMPILE);
    assert_non_null(strstr(err.msg, "kernel x/../evil (sm_80): NVRTC failed"));
    char path[4200];
    snprintf(path, sizeof path, "%s/kiln-failed/x_.._evil-sm_80.cu", dir);
    assert_non_null(strstr(err.msg, path));
    assert_true(file_exists(path));
    kiln_compile_result_free(&r);
}

static void test_bad_arch(void **state)
{
    (void)state;
    const char *bad[] = {"compute_90", "sm_", "sm_90x", "90", "", "sm_90a ", NULL};
    for (int i = 0; bad[i]; i++) {
        kiln_compile_result r;
        kiln_error err;
        kiln_error_clear(&err);
        assert_int_equal(kiln_nvrtc_compile(k_tiny, "tiny", bad[i], "/nonexistent/x", &r, &err),
                         KILN_ERROR_INVALID_ARGUMENT);
        assert_non_null(strstr(err.msg, "bad arch"));
        assert_null(r.cubin);
        kiln_compile_result_free(&r);
    }
    assert_int_equal(kiln_nvrtc_arch_valid("sm_90a"), 1);
    assert_int_equal(kiln_nvrtc_arch_valid("sm_100a"), 1);
    assert_int_equal(kiln_nvrtc_arch_valid("sm_100f"), 1);
    assert_int_equal(kiln_nvrtc_arch_valid("sm_80"), 1);
}

static void test_version(void **state)
{
    (void)state;
    const char *v = kiln_nvrtc_version();
    int major = 0, minor = -1;
    char tail = 0;
    assert_int_equal(sscanf(v, "%d.%d%c", &major, &minor, &tail), 2);
    assert_true(major >= 12);
    assert_true(minor >= 0);
    assert_ptr_equal(v, kiln_nvrtc_version());
    assert_non_null(strstr(kiln_nvrtc_options(), "-Xptxas -v"));
}

/* ---- parse_ptxas on sample logs ---------------------------------------- */

static void test_parse_cuda13(void **state)
{
    (void)state;
    const char *log =
        "ptxas info    : 0 bytes gmem\n"
        "ptxas info    : Compiling entry function 'k' for 'sm_90a'\n"
        "ptxas info    : Function properties for k\n"
        "ptxas         .     16 bytes stack frame, 8 bytes spill stores, 12 bytes spill loads\n"
        "ptxas info    : Used 168 registers, used 1 barriers, 256 bytes smem, 400 bytes cmem[0]\n"
        "ptxas info    : Compile time = 82.980 ms\n";
    kiln_compile_stats s = {.seconds = 1.5, .registers = 7};
    kiln_nvrtc_parse_ptxas(log, &s);
    assert_int_equal(s.registers, 168);
    assert_int_equal(s.spill_stores, 8);
    assert_int_equal(s.spill_loads, 12);
    assert_int_equal(s.smem_static, 256);
    assert_int_equal(s.stack_frame, 16);
    assert_true(s.seconds == 1.5); /* left alone */
}

static void test_parse_old_format_and_multi(void **state)
{
    (void)state;
    /* The older one-line form, two kernels: the worst of each field. */
    const char *log =
        "ptxas info    : Compiling entry function 'a' for 'sm_80'\n"
        "ptxas info    : Function properties for a\n"
        "    1200 bytes stack frame, 1184 bytes spill stores, 1180 bytes spill loads\n"
        "ptxas info    : Used 255 registers, 384 bytes cmem[0]\n"
        "ptxas info    : Compiling entry function 'b' for 'sm_80'\n"
        "ptxas info    : Function properties for b\n"
        "ptxas         .     0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads\n"
        "ptxas info    : Used 40 registers, 49152 bytes smem, 384 bytes cmem[0]\n"
        "ptxas warning : Registers are spilled to local memory in function 'a', 1184 bytes spill stores, 1180 bytes spill loads\n";
    kiln_compile_stats s;
    memset(&s, 0, sizeof s);
    kiln_nvrtc_parse_ptxas(log, &s);
    assert_int_equal(s.registers, 255);
    assert_int_equal(s.smem_static, 49152);
    /* The old bare continuation line under "Function properties" counts. */
    assert_int_equal(s.spill_stores, 1184);
    assert_int_equal(s.spill_loads, 1180);
    assert_int_equal(s.stack_frame, 1200);
}

static void test_parse_empty_and_noise(void **state)
{
    (void)state;
    kiln_compile_stats s = {.registers = 5, .smem_static = 9};
    kiln_nvrtc_parse_ptxas(NULL, &s);
    assert_int_equal(s.registers, 0);
    assert_int_equal(s.smem_static, 0);
    kiln_nvrtc_parse_ptxas("", &s);
    assert_int_equal(s.registers, 0);
    /* Numbers in other contexts (sm_90a, cmem[0], gmem, times, non-ptxas
     * lines) are not mistaken for stats. */
    kiln_nvrtc_parse_ptxas("x.cu(3): warning: 12 registers\n"
                           "ptxas info    : 64 bytes gmem\n"
                           "ptxas info    : Compiling entry function 'k' for 'sm_90a'\n"
                           "ptxas info    : Used 32 registers, used 0 barriers, 1200 bytes cumulative stack size\n",
                           &s);
    assert_int_equal(s.registers, 32);
    assert_int_equal(s.smem_static, 0);
    assert_int_equal(s.stack_frame, 0);
    assert_int_equal(s.spill_stores, 0);
}

/* ptxas's remarks where it serialized the wgmma pipeline: the first one's
 * number; other C75xx remarks and other lines leave it 0. */
static void test_parse_wgmma_serialized(void **state)
{
    (void)state;
    kiln_compile_stats s;
    memset(&s, 0, sizeof s);
    kiln_nvrtc_parse_ptxas(
        "ptxas info    : (C7511) Potential Performance Loss: wgmma.mma_async instructions are "
        "serialized due to insufficient register resources for the wgmma pipeline in the function 'k'\n"
        "ptxas info    : (C7514) Potential Performance Loss: wgmma.mma_async instructions are "
        "serialized due to non wgmma instructions reading accumulator registers of  a wgmma between "
        "start and end of the pipeline stage in the function 'k'\n"
        "ptxas info    : Compiling entry function 'k' for 'sm_90a'\n"
        "ptxas info    : Used 168 registers, used 16 barriers\n",
        &s);
    assert_int_equal(s.wgmma_serialized, 7511);
    assert_int_equal(s.registers, 168);
    kiln_nvrtc_parse_ptxas("ptxas info    : (C7517) warpgroup.wait is injected in around line 194 by "
                           "compiler to allow use of registers defined by GMMA in function 'k'\n",
                           &s);
    assert_int_equal(s.wgmma_serialized, 7517);
    /* not about wgmma; and a clean log resets it */
    kiln_nvrtc_parse_ptxas("ptxas info    : (C7508) Potential Performance Loss: 'setmaxnreg' ignored; "
                           "unable to determine register count at entry\n",
                           &s);
    assert_int_equal(s.wgmma_serialized, 0);
    s.wgmma_serialized = 7511;
    kiln_nvrtc_parse_ptxas("ptxas info    : Used 32 registers\n", &s);
    assert_int_equal(s.wgmma_serialized, 0);
}

static void test_cubin_stats_rejects_garbage(void **state)
{
    (void)state;
    kiln_compile_stats s;
    memset(&s, 0, sizeof s);
    char junk[256];
    memset(junk, 0xff, sizeof junk);
    memcpy(junk, "\x7f" "ELF\x02\x01", 6);
    assert_int_equal(kiln_nvrtc_cubin_stats(junk, sizeof junk, &s), 0);
    assert_int_equal(kiln_nvrtc_cubin_stats("abc", 3, &s), 0);
    assert_int_equal(kiln_nvrtc_cubin_stats(NULL, 0, &s), 0);
    assert_int_equal(s.registers, 0);
}

static void test_spilling_kernel(void **state)
{
    (void)state;
    /* A big indexed local array forces a stack frame. */
    const char *src =
        "extern \"C\" __global__ void frame(float *x) {\n"
        "    float a[300];\n"
        "    for (int i = 0; i < 300; i++) a[i] = x[i * threadIdx.x];\n"
        "    float s = 0;\n"
        "    for (int i = 0; i < 300; i++) s += a[(i * 7 + threadIdx.x) % 300];\n"
        "    x[0] = s;\n"
        "}\n";
    kiln_compile_result r;
    kiln_error err;
    assert_int_equal(kiln_nvrtc_compile(src, "frame", "sm_90a", NULL, &r, &err), KILN_OK);
    assert_int_equal(r.stats.stack_frame, 1200);
    kiln_compile_stats e;
    memset(&e, 0, sizeof e);
    kiln_nvrtc_cubin_stats(r.cubin, r.cubin_size, &e);
    assert_int_equal(e.stack_frame, 1200);
    kiln_compile_result_free(&r);
}

KILN_TEST_MAIN(
    cmocka_unit_test(test_compile_sm90a),
    cmocka_unit_test(test_compile_sm80),
    kiln_test_with_dir(test_compile_error_saves_source),
    kiln_test_with_tmpdir(test_compile_error_default_dir),
    cmocka_unit_test(test_bad_arch),
    cmocka_unit_test(test_version),
    cmocka_unit_test(test_parse_cuda13),
    cmocka_unit_test(test_parse_old_format_and_multi),
    cmocka_unit_test(test_parse_empty_and_noise),
    cmocka_unit_test(test_parse_wgmma_serialized),
    cmocka_unit_test(test_cubin_stats_rejects_garbage),
    cmocka_unit_test(test_spilling_kernel))
