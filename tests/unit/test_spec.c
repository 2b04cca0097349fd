/* SPDX-License-Identifier: Apache-2.0 */
/* test_spec.c — the spec language: the bad corpus (each file names the
 * line:col and message it must produce), the good corpus (fields and
 * defaults), sweeps, positions, validation and the shipped specs. */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "testutil.h"
#include "spec.h"

/* Sorted *.yaml names of a directory (malloc'd array of malloc'd paths). */
static char **yaml_files(const char *dir, size_t *count)
{
    DIR *d = opendir(dir);
    assert_non_null(d);
    char **names = NULL;
    size_t n = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        size_t len = strlen(e->d_name);
        if (len < 6 || strcmp(e->d_name + len - 5, ".yaml")) continue;
        names = realloc(names, (n + 1) * sizeof *names);
        assert_non_null(names);
        size_t size = strlen(dir) + len + 2;
        names[n] = malloc(size);
        assert_non_null(names[n]);
        snprintf(names[n], size, "%s/%s", dir, e->d_name);
        n++;
    }
    closedir(d);
    for (size_t i = 1; i < n; i++)
        for (size_t j = i; j > 0 && strcmp(names[j], names[j - 1]) < 0; j--) {
            char *t = names[j];
            names[j] = names[j - 1];
            names[j - 1] = t;
        }
    *count = n;
    return names;
}

static void free_files(char **names, size_t n)
{
    for (size_t i = 0; i < n; i++) free(names[i]);
    free(names);
}

/* Loads a spec that must be valid (prints the error if not). */
static void load_ok(const char *path, kiln_spec_list *list)
{
    kiln_error err;
    kiln_error_clear(&err);
    kiln_status st = kiln_spec_load(path, list, &err);
    if (st != KILN_OK) print_error("%s: unexpected error: %s\n", path, err.msg);
    assert_int_equal(st, KILN_OK);
    assert_true(list->count >= 1);
}

/* The dynamic shared memory the family's template reports for d. */
static int smem_of(const kiln_kernel_desc *d, const char *arch)
{
    kiln_error err;
    kiln_error_clear(&err);
    int smem = -1;
    kiln_status st = kiln_spec_validate_with(NULL, d, arch, &smem, &err, NULL);
    if (st != KILN_OK) print_error("smem_of: %s\n", err.msg);
    assert_int_equal(st, KILN_OK);
    return smem;
}

static kiln_status parse_text(const char *text, kiln_spec_list *list, kiln_error *err)
{
    kiln_error_clear(err);
    return kiln_spec_parse(text, strlen(text), "mem.yaml", list, err);
}

/* Parses text, which must succeed, keeping `count` points and dropping
 * `dropped`: the opening checks of the sweep tests. */
static void parse_kept(const char *text, kiln_spec_list *list, int count, int dropped)
{
    kiln_error err;
    assert_int_equal(parse_text(text, list, &err), KILN_OK);
    assert_int_equal(list->count, count);
    assert_int_equal(list->dropped, dropped);
}

/* ------------------------------------------------------------------------ */

/* kiln_spec_validate refuses d on arch at `key` with a message holding `what`. */
static void expect_refused(const kiln_kernel_desc *d, const char *arch, const char *key,
                           const char *what)
{
    kiln_error err;
    const char *k = NULL;
    kiln_error_clear(&err);
    assert_int_equal(kiln_spec_validate(d, arch, &err, &k), KILN_ERROR_INVALID_SPEC);
    if (!k || strcmp(k, key) || !strstr(err.msg, what))
        fail_msg("want %s: ...%s..., got %s: %s", key, what, k ? k : "(none)", err.msg);
}

static void test_bad_corpus(void **state)
{
    (void)state;
    size_t n;
    char **files = yaml_files("tests/data/specs/bad", &n);
    assert_true(n >= 30);
    int failures = 0;
    for (size_t i = 0; i < n; i++) {
        char *text;
        size_t len;
        kiln_error err;
        assert_int_equal(kiln_file_read(files[i], &text, &len, &err), KILN_OK);
        int line = 0, col = 0, used = 0;
        char *nl = strchr(text, '\n');
        if (nl) *nl = '\0';
        if (sscanf(text, "# expect: %d:%d: %n", &line, &col, &used) < 2 || used == 0) {
            print_error("%s: first line must be '# expect: LINE:COL: text'\n", files[i]);
            failures++;
            free(text);
            continue;
        }
        char want_sub[512], want_prefix[1200];
        snprintf(want_sub, sizeof want_sub, "%s", text + used);
        snprintf(want_prefix, sizeof want_prefix, "%s:%d:%d: ", files[i], line, col);
        free(text);

        kiln_spec_list list;
        kiln_error_clear(&err);
        kiln_status st = kiln_spec_load(files[i], &list, &err);
        int ok = st == KILN_ERROR_INVALID_SPEC && err.status == st &&
                 !strncmp(err.msg, want_prefix, strlen(want_prefix)) &&
                 strstr(err.msg, want_sub) && !strchr(err.msg, '\n') && list.count == 0 &&
                 list.items == NULL && list.dropped == 0;
        if (!ok) {
            print_error("%s:\n  want %s...%s\n  got  [%s] %s\n", files[i], want_prefix, want_sub,
                        kiln_status_name(st), err.msg);
            failures++;
        }
        kiln_spec_list_free(&list);
    }
    free_files(files, n);
    assert_int_equal(failures, 0);
}

static void test_good_corpus_loads(void **state)
{
    (void)state;
    size_t n;
    char **files = yaml_files("tests/data/specs/good", &n);
    assert_true(n >= 8);
    for (size_t i = 0; i < n; i++) {
        kiln_spec_list list;
        load_ok(files[i], &list);
        for (size_t j = 0; j < list.count; j++) {
            const kiln_spec *s = &list.items[j];
            assert_string_equal(s->path, files[i]);
            for (int a = 0; a < s->desc.n_archs; a++) {
                kiln_error err;
                assert_int_equal(kiln_spec_validate(&s->desc, s->desc.archs[a], &err, NULL),
                                 KILN_OK);
            }
        }
        kiln_spec_list_free(&list);
    }
    free_files(files, n);
}

/* The fields both good-spec tests check on a single-arch description, as
 * one row per spec: the same assertions, written once. */
typedef struct {
    const char *name, *arch, *family;
    kiln_dtype a, b, out, accum;
    int tile_m, tile_n, tile_k, stages, cluster_m, cluster_n, warpgroups;
    kiln_weights_mode weights;
    const char *raster;
} desc_want;

static void assert_desc(const kiln_kernel_desc *d, const desc_want *w)
{
    assert_string_equal(d->name, w->name);
    assert_int_equal(d->n_archs, 1);
    assert_string_equal(d->archs[0], w->arch);
    assert_string_equal(d->family, w->family);
    assert_int_equal(d->a_type, w->a);
    assert_int_equal(d->b_type, w->b);
    assert_int_equal(d->out_type, w->out);
    assert_int_equal(d->accum_type, w->accum);
    assert_int_equal(d->tile_m, w->tile_m);
    assert_int_equal(d->tile_n, w->tile_n);
    assert_int_equal(d->tile_k, w->tile_k);
    assert_int_equal(d->stages, w->stages);
    assert_int_equal(d->cluster_m, w->cluster_m);
    assert_int_equal(d->cluster_n, w->cluster_n);
    assert_int_equal(d->warpgroups, w->warpgroups);
    assert_int_equal(d->weights, w->weights);
    assert_string_equal(d->raster, w->raster);
}

static void test_good_full(void **state)
{
    (void)state;
    kiln_spec_list list;
    load_ok("tests/data/specs/good/fprop_full.yaml", &list);
    assert_int_equal(list.count, 1);
    assert_int_equal(list.dropped, 0);
    const kiln_kernel_desc *d = &list.items[0].desc;
    assert_int_equal(d->op, KILN_OP_FPROP);
    assert_desc(d, &(desc_want){"fprop_full_128x256", "sm_90a", "sm90", KILN_DTYPE_BF16,
                                KILN_DTYPE_BF16, KILN_DTYPE_F32, KILN_DTYPE_F32, 128, 256, 64, 2,
                                2, 1, 2, KILN_WEIGHTS_CONTIGUOUS, "m"});
    assert_int_equal(d->epilogue.bias, KILN_BIAS_PER_GROUP);
    assert_int_equal(d->epilogue.row_scale, 1);
    assert_int_equal(d->epilogue.scale_bias, 1);
    assert_int_equal(d->epilogue.alpha, KILN_ALPHA_PER_GROUP);
    assert_int_equal(d->epilogue.beta, 1);
    assert_int_equal(d->wgrad_output, KILN_WGRAD_DENSE);
    assert_int_equal(d->accumulate, 0);
    assert_int_equal(d->split, 1);
    /* ring 2*(128+256)*64*2, staging 2*4*16*40*4, schedule 2114*4, 1024
     * alignment, 2 barriers of 8 bytes per stage (templates/sm90_common.lua) */
    assert_int_equal(smem_of(d, "sm_90a"), 98304 + 20480 + 8456 + 1024 + 32);

    /* Positions: keys of the block mapping, 1-based. */
    const kiln_spec *s = &list.items[0];
    struct { const char *key; int line, col; } pos[] = {
        {"epilogue.alpha", 17, 3}, {"tile.n", 7, 16}, {"stages", 8, 1}};
    for (int i = 0; i < 3; i++) {
        int line, col;
        assert_int_equal(kiln_spec_find_pos(s, pos[i].key, &line, &col), 1);
        assert_int_equal(line, pos[i].line);
        assert_int_equal(col, pos[i].col);
    }
    assert_int_equal(s->line, 2);
    assert_int_equal(s->col, 1);
    kiln_spec_list_free(&list);
    assert_null(list.items);
}

static void test_good_defaults(void **state)
{
    (void)state;
    kiln_spec_list list;
    load_ok("tests/data/specs/good/minimal.yaml", &list);
    assert_int_equal(list.count, 1);
    const kiln_spec *s = &list.items[0];
    const kiln_kernel_desc *d = &s->desc;
    kiln_kernel_desc def;
    kiln_desc_init(&def);
    /* b and out (16-bit) default to a; family sm90 with 16-bit weights:
     * contiguous or pointers (fp8: contiguous, below) */
    assert_desc(d, &(desc_want){"fprop_minimal", "sm_90a", "sm90", KILN_DTYPE_F16, KILN_DTYPE_F16,
                                KILN_DTYPE_F16, KILN_DTYPE_F32, 128, 128, 64, 4, 1, 1, 1,
                                KILN_WEIGHTS_ANY, "group"});
    assert_memory_equal(&d->epilogue, &def.epilogue, sizeof def.epilogue);
    assert_int_equal(d->split, 1);
    assert_int_equal(d->dbias, 0);

    /* Missing keys: fall back to the parent key, then to the mapping. */
    int line, col;
    assert_int_equal(kiln_spec_find_pos(s, "types.out", &line, &col), 0);
    assert_int_equal(line, 4); /* types: */
    assert_int_equal(col, 1);
    assert_int_equal(kiln_spec_find_pos(s, "tile.m", &line, &col), 0);
    assert_int_equal(line, 2); /* the kernel's mapping */
    assert_int_equal(col, 1);
    kiln_spec_list_free(&list);

    /* fp8 weights on sm90: one tensor, the quantizer's layout */
    load_ok("tests/data/specs/good/fp8_minimal.yaml", &list);
    assert_int_equal(list.count, 1);
    assert_int_equal(list.items[0].desc.weights, KILN_WEIGHTS_CONTIGUOUS);
    kiln_spec_list_free(&list);
}

/* What templates/simple.lua builds is what the spec language accepts for
 * it: 16-row tiles, and any stages (its shared memory is static). */
static void test_simple_family_rules(void **state)
{
    (void)state;
    kiln_spec_list list;
    load_ok("tests/data/specs/good/simple_tile_16_stages_8.yaml", &list);
    assert_int_equal(list.items[0].desc.tile_m, 16);
    assert_int_equal(list.items[0].desc.stages, 8);
    kiln_spec_list_free(&list);
}

/* wgrad.dbias: both families build it, and the description says it; sm90
 * takes exactly 1 KiB more shared memory (the ones tile its n8 wgmma sums
 * the stage rows against), simple none. */
static void test_good_wgrad_dbias(void **state)
{
    (void)state;
    const char *files[] = {"tests/data/specs/good/wgrad_dbias.yaml",
                           "tests/data/specs/good/wgrad_dbias_simple.yaml"};
    for (int i = 0; i < 2; i++) {
        kiln_spec_list list;
        load_ok(files[i], &list);
        kiln_kernel_desc d = list.items[0].desc;
        assert_int_equal(d.op, KILN_OP_WGRAD);
        assert_int_equal(d.dbias, 1);
        int with = smem_of(&d, "sm_90a");
        d.dbias = 0;
        assert_int_equal(smem_of(&d, "sm_90a") + (i == 0 ? 1024 : 0), with);
        kiln_spec_list_free(&list);
    }
    /* off unless asked for */
    kiln_spec_list list;
    kiln_error err;
    assert_int_equal(parse_text("kernel: k\nop: wgrad\ntypes: {a: bf16}\nwgrad: {dbias: false}\n", &list, &err),
                     KILN_OK);
    assert_int_equal(list.items[0].desc.dbias, 0);
    kiln_spec_list_free(&list);
}

static void test_good_wgrad_and_archs(void **state)
{
    (void)state;
    kiln_spec_list list;
    load_ok("tests/data/specs/good/wgrad_simple.yaml", &list);
    const kiln_kernel_desc *d = &list.items[0].desc;
    assert_int_equal(d->op, KILN_OP_WGRAD);
    assert_int_equal(d->n_archs, 3);
    assert_string_equal(d->archs[0], "sm_80");
    assert_string_equal(d->archs[1], "sm_90a");
    assert_string_equal(d->archs[2], "sm_100a");
    assert_string_equal(d->family, "simple");
    assert_int_equal(d->wgrad_output, KILN_WGRAD_DISCRETE);
    assert_int_equal(d->accumulate, 1);
    assert_int_equal(d->dbias, 0);
    assert_int_equal(d->split, 1);
    assert_string_equal(d->raster, "n");
    /* simple: static shared memory only, whatever the stages */
    assert_int_equal(smem_of(d, "sm_80"), 0);
    kiln_spec_list_free(&list);

    load_ok("tests/data/specs/good/arch_string.yaml", &list);
    d = &list.items[0].desc;
    assert_int_equal(d->n_archs, 1);
    assert_string_equal(d->archs[0], "sm_100a");
    assert_int_equal(d->stages, 1);
    kiln_spec_list_free(&list);

    load_ok("tests/data/specs/good/anchors.yaml", &list);
    d = &list.items[0].desc;
    assert_string_equal(d->name, "fprop_anchors");
    assert_int_equal(d->tile_m, 64);
    kiln_spec_list_free(&list);
}

static void test_booleans(void **state)
{
    (void)state;
    kiln_spec_list list;
    load_ok("tests/data/specs/good/booleans.yaml", &list);
    assert_int_equal(list.items[0].desc.epilogue.scale_bias, 1); /* Yes */
    assert_int_equal(list.items[0].desc.epilogue.beta, 0);       /* FALSE */
    kiln_spec_list_free(&list);
    load_ok("tests/data/specs/good/booleans_off.yaml", &list);
    assert_int_equal(list.items[0].desc.epilogue.scale_bias, 0); /* no */
    assert_int_equal(list.items[0].desc.epilogue.beta, 1);       /* True */
    kiln_spec_list_free(&list);

    static const char *const spellings[] = {"true", "yes", "TRUE", "Yes", "false", "no", "False",
                                            "NO"};
    for (int i = 0; i < 8; i++) {
        char text[256];
        snprintf(text, sizeof text, "kernel: k\nop: fprop\ntypes: {a: bf16}\n"
                                    "epilogue: {beta: %s}\n", spellings[i]);
        kiln_error err;
        assert_int_equal(parse_text(text, &list, &err), KILN_OK);
        assert_int_equal(list.items[0].desc.epilogue.beta, i < 4);
        kiln_spec_list_free(&list);
    }
}

static void test_sweep_expansion(void **state)
{
    (void)state;
    kiln_spec_list list;
    load_ok("tests/data/specs/good/sweep_small.yaml", &list);
    /* 12 points: 4 dropped by max_smem (128x256 at 3 and 4 stages: its
     * cooperative epilogue's TMA-store boxes take the shared memory the
     * ring leaves, about 222500 bytes), 2 by the validator (128x256, 5
     * stages), 1 by the second require expression (128x128, 3 stages, 2x1;
     * max_smem is checked first). */
    assert_int_equal(list.count + list.dropped, 12);
    assert_int_equal(list.count, 5);
    assert_int_equal(list.dropped, 7);
    /* Names follow the schema order (tile, stages, cluster), not the file's;
     * the last axis turns fastest. */
    static const char *const want[] = {
        "sw__m128_n128_k64_s3_c1x1", "sw__m128_n128_k64_s4_c1x1", "sw__m128_n128_k64_s4_c2x1",
        "sw__m128_n128_k64_s5_c1x1", "sw__m128_n128_k64_s5_c2x1"};
    for (size_t i = 0; i < 5; i++) {
        assert_string_equal(list.items[i].desc.name, want[i]);
        assert_int_equal(list.items[i].desc.warpgroups, 2);  /* from the base */
    }
    assert_int_equal(list.items[2].desc.cluster_m, 2);
    assert_int_equal(list.items[4].desc.stages, 5);

    /* A swept key's position is the value in the sweep list. */
    int line, col;
    assert_int_equal(kiln_spec_find_pos(&list.items[2], "cluster", &line, &col), 1);
    assert_int_equal(line, 8);
    assert_int_equal(col, 27);
    assert_int_equal(kiln_spec_find_pos(&list.items[2], "cluster.m", &line, &col), 1);
    assert_int_equal(line, 8);
    assert_int_equal(col, 28);

    const char *r0 = list.dropped_reasons[0];
    assert_non_null(strstr(r0, "tests/data/specs/good/sweep_small.yaml:14:7: "
                               "sw__m128_n128_k64_s3_c2x1: constraint"));
    assert_non_null(strstr(r0, "is false"));
    int smem_cap = 0, smem_hw = 0;
    for (size_t i = 0; i < list.dropped; i++) {
        const char *r = list.dropped_reasons[i];
        if (strstr(r, "more than constraints.max_smem 200000")) {
            smem_cap++;
            assert_non_null(strstr(r, "sweep_small.yaml:11:13: sw__m128_n256_k64_s"));
        }
        if (strstr(r, "sm_90a allows 232448")) {
            smem_hw++;
            /* points at the stages value that made it too big */
            assert_non_null(strstr(r, "sweep_small.yaml:7:18: sw__m128_n256_k64_s5_"));
        }
    }
    assert_int_equal(smem_cap, 4);
    assert_int_equal(smem_hw, 2);
    assert_non_null(strstr(list.dropped_reasons[2], "sweep_small.yaml:11:13: "
                                                    "sw__m128_n256_k64_s3_c2x1: needs 222520 bytes"));
    kiln_spec_list_free(&list);
    assert_int_equal(list.dropped, 0);
    assert_null(list.dropped_reasons);
}

static void test_sweep_names_stable(void **state)
{
    (void)state;
    const char *a = "kernel: f\nop: fprop\ntypes: {a: bf16}\nsweep:\n"
                    "  warpgroups: [1, 2]\n  tile.n: [64, 128]\n  raster: [group, m]\n";
    const char *b = "kernel: f\nop: fprop\ntypes: {a: bf16}\nsweep:\n"
                    "  raster: [group, m]\n  tile.n: [64, 128]\n  warpgroups: [1, 2]\n";
    kiln_spec_list la, lb;
    kiln_error err;
    assert_int_equal(parse_text(a, &la, &err), KILN_OK);
    assert_int_equal(parse_text(b, &lb, &err), KILN_OK);
    assert_int_equal(la.count, 8);
    assert_int_equal(la.count, lb.count);
    char names_a[8][96], names_b[8][96];
    for (size_t i = 0; i < 8; i++) {
        snprintf(names_a[i], 96, "%s", la.items[i].desc.name);
        snprintf(names_b[i], 96, "%s", lb.items[i].desc.name);
    }
    /* Same set of names; each unique. */
    for (size_t i = 0; i < 8; i++) {
        int found = 0;
        for (size_t j = 0; j < 8; j++) found += !strcmp(names_a[i], names_b[j]);
        assert_int_equal(found, 1);
        for (size_t j = i + 1; j < 8; j++) assert_string_not_equal(names_a[i], names_a[j]);
    }
    assert_string_equal(la.items[0].desc.name, "f__n64_wg1_rgroup");
    assert_string_equal(la.items[7].desc.name, "f__n128_wg2_rm");
    kiln_spec_list_free(&la);
    kiln_spec_list_free(&lb);
}

static void test_sweep_expressions(void **state)
{
    (void)state;
    kiln_spec_list list;
    const char *text = "kernel: e\nop: fprop\ntypes: {a: bf16}\nwarpgroups: 2\nsweep:\n"
                       "  tile.n: [64, 128, 192, 256]\n  stages: [2, 3]\nconstraints:\n"
                       "  require: 'tile.n % 128 == 0 || (stages - 2) * 10 / 5 >= 2 - 0'\n";
    /* kept: n in {128, 256} for both stages, or stages 3 (2 >= 2) */
    parse_kept(text, &list, 6, 2);
    assert_string_equal(list.items[0].desc.name, "e__n64_s3");
    assert_non_null(strstr(list.dropped_reasons[0], "e__n64_s2: constraint"));
    kiln_spec_list_free(&list);

    /* Division by zero in one point drops it with the reason. */
    text = "kernel: e\nop: fprop\ntypes: {a: bf16}\nsweep:\n  stages: [2, 3]\n"
           "constraints: {require: \"100 / (stages - 2) > 0\"}\n";
    parse_kept(text, &list, 1, 1);
    assert_non_null(strstr(list.dropped_reasons[0], "cannot be evaluated: division by zero"));
    kiln_spec_list_free(&list);

    /* Syntax errors are errors of the file, at the offending character. */
    text = "kernel: e\nop: fprop\ntypes: {a: bf16}\nsweep:\n  stages: [2, 3]\n"
           "constraints: {require: \"stages >< 3\"}\n";
    kiln_error err; /* only the failing parse reads it */
    assert_int_equal(parse_text(text, &list, &err), KILN_ERROR_INVALID_SPEC);
    assert_non_null(strstr(err.msg, "mem.yaml:6:33: in constraint \"stages >< 3\": expected"));
    assert_int_equal(list.count, 0);
}

static void test_sweep_types(void **state)
{
    (void)state;
    kiln_spec_list list;
    kiln_error err;
    /* types.b and types.out follow each swept types.a unless written. */
    const char *text = "kernel: t\nop: wgrad\nfamily: simple\ntile: {m: 64, n: 64, k: 16}\n"
                       "types: {a: bf16}\nsweep:\n  types.a: [bf16, fp16]\n"
                       "  wgrad.accumulate: [false, true]\n";
    parse_kept(text, &list, 2, 2); /* accumulate needs out f32: dropped */
    assert_string_equal(list.items[0].desc.name, "t__abf16_acc0");
    assert_string_equal(list.items[1].desc.name, "t__afp16_acc0");
    assert_int_equal(list.items[1].desc.b_type, KILN_DTYPE_F16);
    assert_int_equal(list.items[1].desc.out_type, KILN_DTYPE_F16);
    assert_non_null(strstr(list.dropped_reasons[0], "mem.yaml:8:29: t__abf16_acc1: "
                                                    "wgrad.accumulate needs types.out: f32"));
    kiln_spec_list_free(&list);

    text = "kernel: t\nop: wgrad\nfamily: simple\ntile: {m: 64, n: 64, k: 16}\n"
           "types: {a: bf16, out: f32}\nsweep:\n  types.a: [bf16, fp16]\n"
           "  wgrad.accumulate: [false, true]\n";
    assert_int_equal(parse_text(text, &list, &err), KILN_OK);
    assert_int_equal(list.count, 4);
    assert_int_equal(list.items[3].desc.out_type, KILN_DTYPE_F32);
    assert_int_equal(list.items[3].desc.b_type, KILN_DTYPE_F16);
    assert_int_equal(list.items[3].desc.accumulate, 1);
    kiln_spec_list_free(&list);
}

static void test_validate_direct(void **state)
{
    (void)state;
    kiln_kernel_desc d;
    kiln_desc_init(&d);
    snprintf(d.name, sizeof d.name, "direct");
    kiln_error err;
    const char *key = "unset";
    assert_int_equal(kiln_spec_validate(&d, "sm_90a", &err, &key), KILN_OK);
    assert_null(key);
    /* The default family is sm90, which sm_80 cannot run. */
    assert_int_equal(kiln_spec_validate(&d, "sm_80", &err, &key), KILN_ERROR_INVALID_SPEC);
    assert_string_equal(key, "family");
    assert_non_null(strstr(err.msg, "needs sm_90a, not sm_80"));

    d.tile_m = 100;
    assert_int_equal(kiln_spec_validate(&d, "sm_90a", &err, &key), KILN_ERROR_INVALID_SPEC);
    assert_string_equal(key, "tile.m");
    kiln_test_has(err.msg, "tile.m must be a multiple of 64", "got 100");
    assert_null(strchr(err.msg, '\n'));

    kiln_desc_init(&d);
    snprintf(d.name, sizeof d.name, "direct");
    d.tile_n = 256;
    d.warpgroups = 2;
    assert_int_equal(kiln_spec_validate(&d, "sm_90a", &err, &key), KILN_OK);
    d.warpgroups = 1; /* 128x256 in one warp group: 256 accumulators */
    assert_int_equal(kiln_spec_validate(&d, "sm_90a", &err, &key), KILN_ERROR_INVALID_SPEC);
    assert_string_equal(key, "tile");
    d.warpgroups = 2;
    d.stages = 5;
    assert_int_equal(kiln_spec_validate(&d, "sm_90a", &err, &key), KILN_ERROR_INVALID_SPEC);
    assert_string_equal(key, "stages");
    /* ring 5 x 48 KiB + one 2 KiB store box per consumer warp + schedule */
    assert_non_null(strstr(err.msg, "5 stages of tile 128x256x64 need 271704 bytes of shared "
                                    "memory, sm_90a allows 232448 (templates/sm90_common.lua:"));
    d.stages = 4;
    assert_int_equal(kiln_spec_validate(&d, "sm_90a", &err, &key), KILN_OK);

    /* fp8: the sm90 template's rules, each naming its key. */
    d.a_type = d.b_type = KILN_DTYPE_E4M3;
    d.tile_k = 128;
    d.tile_n = 128;
    expect_refused(&d, "sm_90a", "fp8.recipe", "need fp8.recipe: tensor, row or block");
    d.fp8_recipe = KILN_FP8_ROW;
    assert_int_equal(kiln_spec_validate(&d, "sm_90a", &err, &key), KILN_OK);
    d.b_type = KILN_DTYPE_E5M2; /* wgmma mixes the two 8-bit types */
    assert_int_equal(kiln_spec_validate(&d, "sm_90a", &err, &key), KILN_OK);
    d.b_type = KILN_DTYPE_BF16;
    expect_refused(&d, "sm_90a", "types.b", "no product of an 8-bit and a 16-bit operand");
    d.b_type = KILN_DTYPE_E4M3;
    d.tile_k = 64;
    expect_refused(&d, "sm_90a", "tile.k", "tile.k must be 128 for e4m3");
    d.tile_k = 128;
    d.fp8_recipe = KILN_FP8_BLOCK;
    expect_refused(&d, "sm_90a", "fp8.accumulate", "so it promotes");
    d.fp8_promote = 1;
    /* pingpong 128x128: 128 sums a thread and a product set too */
    expect_refused(&d, "sm_90a", "fp8.accumulate", "the sums and two k-blocks' products");
    snprintf(d.schedule, sizeof d.schedule, "cooperative");
    assert_int_equal(kiln_spec_validate(&d, "sm_90a", &err, &key), KILN_OK);
    /* cooperative 128x256: 128 sums and a half-width product set; 256x128
     * has 128 sums too, but its product could not be split in halves of
     * whole 128-column scale blocks */
    d.tile_n = 256;
    assert_int_equal(kiln_spec_validate(&d, "sm_90a", &err, &key), KILN_OK);
    d.tile_m = 256;
    d.tile_n = 128;
    expect_refused(&d, "sm_90a", "fp8.accumulate", "a half-width product (cooperative, tile.n 256");
    d.tile_m = 128;
    d.tile_n = 64;
    d.tile_m = 128;
    expect_refused(&d, "sm_90a", "tile.n", "tile.n must be 128 or 256 (got 64)");
    d.tile_n = 128;
    d.op = KILN_OP_WGRAD;
    d.weights = KILN_WEIGHTS_ANY;
    d.out_type = KILN_DTYPE_F32;
    expect_refused(&d, "sm_90a", "types.a", "fp8 wgrad is not built");
    d.op = KILN_OP_FPROP;
    d.out_type = KILN_DTYPE_BF16;
    d.a_type = d.b_type = KILN_DTYPE_BF16;
    d.tile_k = 64;
    expect_refused(&d, "sm_90a", "fp8.recipe", "fp8.recipe block needs e4m3 or e5m2 inputs");
    d.fp8_recipe = KILN_FP8_NONE;
    expect_refused(&d, "sm_90a", "fp8.accumulate", "needs e4m3 or e5m2 inputs");
    d.a_type = d.b_type = KILN_DTYPE_E4M3;
    d.tile_k = 128;
    d.fp8_recipe = KILN_FP8_ROW;
    d.fp8_promote = 0;
    snprintf(d.family, sizeof d.family, "simple");
    d.weights = KILN_WEIGHTS_ANY;
    expect_refused(&d, "sm_80", "types.a", "fp8 is built by family sm90");

    kiln_desc_init(&d);
    snprintf(d.name, sizeof d.name, "w");
    d.op = KILN_OP_WGRAD;
    d.weights = KILN_WEIGHTS_ANY; /* what the parser gives wgrad */
    d.epilogue.beta = 1;
    assert_int_equal(kiln_spec_validate(&d, "sm_90a", &err, &key), KILN_ERROR_INVALID_SPEC);
    assert_string_equal(key, "epilogue");
    d.epilogue.beta = 0;
    d.accumulate = 1;
    assert_int_equal(kiln_spec_validate(&d, "sm_90a", &err, &key), KILN_ERROR_INVALID_SPEC);
    assert_string_equal(key, "wgrad.accumulate");
    d.out_type = KILN_DTYPE_F32;
    assert_int_equal(kiln_spec_validate(&d, "sm_90a", &err, &key), KILN_OK);
    d.op = KILN_OP_FPROP;
    assert_int_equal(kiln_spec_validate(&d, "sm_90a", &err, &key), KILN_ERROR_INVALID_SPEC);
    assert_string_equal(key, "wgrad");

    kiln_desc_init(&d);
    snprintf(d.name, sizeof d.name, "x");
    assert_int_equal(kiln_spec_validate(&d, "sm_75", &err, &key), KILN_ERROR_INVALID_SPEC);
    assert_string_equal(key, "arch");
    d.name[0] = '\0';
    assert_int_equal(kiln_spec_validate(&d, "sm_90a", &err, &key), KILN_ERROR_INVALID_SPEC);
    assert_string_equal(key, "kernel");
}

static void test_smem_and_limits(void **state)
{
    (void)state;
    kiln_kernel_desc d;
    kiln_desc_init(&d);
    snprintf(d.name, sizeof d.name, "k");
    /* What templates/sm90.lua reports: ring 4*(128+128)*64*2 + staging +
     * schedule 8456, aligned to 8, + 1024 + 4 stages x 2 barriers x 8.  One
     * consumer warp group is cooperative: its epilogue stores through TMA
     * from boxes of 16 rows x 128 bytes, per warp its whole share of the
     * 128x128 bf16 tile (4 boxes) where that fits, as here */
    const int sched = 8456 + 1024, boxes_1wg = 4 * 4 * 2048;
    const int base = 131072 + boxes_1wg + sched + 64;
    assert_int_equal(smem_of(&d, "sm_90a"), base);
    /* two: pingpong, each of the 8 warps' fp32 staging slot of 16 x 40 floats */
    d.warpgroups = 2;
    assert_int_equal(smem_of(&d, "sm_90a"), 131072 + 8 * 2560 + sched + 64);
    /* β·C is read through the fp32 staging: 4 warps' slots */
    d.warpgroups = 1;
    d.epilogue.beta = 1;
    assert_int_equal(smem_of(&d, "sm_90a"), 131072 + 4 * 2560 + sched + 64);
    d.epilogue.beta = 0;
    d.stages = 3;
    assert_int_equal(smem_of(&d, "sm_90a"), base - 32768 - 16);
    /* wgrad, dense overwrite: two more barriers, and the same TMA-store
     * boxes (templates/sm90_wgrad.lua) */
    d.op = KILN_OP_WGRAD;
    d.weights = KILN_WEIGHTS_ANY;
    assert_int_equal(smem_of(&d, "sm_90a"), base - 32768 - 16 + 16);
    /* The simple family's shared memory is static: 8 stages are not
     * refused for memory it never uses. */
    kiln_desc_init(&d);
    snprintf(d.name, sizeof d.name, "s");
    snprintf(d.family, sizeof d.family, "simple");
    d.weights = KILN_WEIGHTS_ANY;
    d.tile_k = 32;
    d.stages = 8;
    kiln_error err;
    assert_int_equal(kiln_spec_validate(&d, "sm_80", &err, NULL), KILN_OK);
    assert_int_equal(smem_of(&d, "sm_80"), 0);
}

static void test_io_errors(void **state)
{
    (void)state;
    kiln_spec_list list;
    kiln_error err;
    kiln_error_clear(&err);
    assert_int_equal(kiln_spec_load("tests/data/specs/no_such.yaml", &list, &err), KILN_ERROR_IO);
    assert_non_null(strstr(err.msg, "tests/data/specs/no_such.yaml: cannot read spec:"));
    assert_int_equal(list.count, 0);
    assert_int_equal(kiln_spec_load("tests/data/specs", &list, &err), KILN_ERROR_IO);
    assert_non_null(strstr(err.msg, "tests/data/specs"));
    assert_int_equal(kiln_spec_load(NULL, &list, &err), KILN_ERROR_INVALID_ARGUMENT);
    /* err is optional */
    assert_int_equal(kiln_spec_load("tests/data/specs/bad/stages_9.yaml", &list, NULL),
                     KILN_ERROR_INVALID_SPEC);
    assert_int_equal(kiln_spec_load("tests/data/specs/good/minimal.yaml", &list, NULL), KILN_OK);
    kiln_spec_list_free(&list);
}

static void test_parse_memory(void **state)
{
    (void)state;
    kiln_spec_list list;
    kiln_error err;
    /* Only len bytes are read: the junk after them is not seen. */
    const char *text = "kernel: mem\nop: dgrad\ntypes: {a: bf16}\n@@@ junk";
    kiln_error_clear(&err);
    assert_int_equal(kiln_spec_parse(text, strlen(text) - 9, NULL, &list, &err), KILN_OK);
    assert_string_equal(list.items[0].path, "<spec>");
    assert_int_equal(list.items[0].desc.op, KILN_OP_DGRAD);
    kiln_spec_list_free(&list);
    assert_int_equal(kiln_spec_parse(text, strlen(text), "x.yaml", &list, &err),
                     KILN_ERROR_INVALID_SPEC);
    assert_non_null(strstr(err.msg, "x.yaml:4:1: "));

    /* Comments and blank lines do not shift positions. */
    const char *t2 = "# c\n\nkernel: k   # name\nop: fprop\n\ntypes: {a: bf16}\nstages: 12\n";
    assert_int_equal(parse_text(t2, &list, &err), KILN_ERROR_INVALID_SPEC);
    assert_string_equal(err.msg, "mem.yaml:7:1: stages must be from 1 to 8 (got 12)");
    /* A NUL inside a value is refused, not truncated. */
    const char t3[] = "kernel: \"a\\0b\"\nop: fprop\ntypes: {a: bf16}\n";
    assert_int_equal(kiln_spec_parse(t3, sizeof t3 - 1, "n.yaml", &list, &err),
                     KILN_ERROR_INVALID_SPEC);
    assert_non_null(strstr(err.msg, "n.yaml:1:9: "));
}

/* The specs kiln ships must all be valid, and cover what the templates do. */
static void test_shipped_specs(void **state)
{
    (void)state;
    size_t n;
    char **files = yaml_files("specs", &n);
    assert_true(n >= 12);
    int seen[3][2] = {{0}}; /* op x family(simple, sm90) */
    int discrete = 0, accumulate = 0, out_f32 = 0, epilogue = 0;
    for (size_t i = 0; i < n; i++) {
        kiln_spec_list list;
        load_ok(files[i], &list);
        assert_int_equal(list.count, 1);
        const kiln_kernel_desc *d = &list.items[0].desc;
        seen[d->op][!strcmp(d->family, "sm90")]++;
        discrete += d->op == KILN_OP_WGRAD && d->wgrad_output == KILN_WGRAD_DISCRETE;
        accumulate += d->accumulate;
        out_f32 += d->out_type == KILN_DTYPE_F32;
        epilogue += d->epilogue.bias && d->epilogue.row_scale;
        kiln_spec_list_free(&list);
    }
    free_files(files, n);
    for (int op = 0; op < 3; op++) assert_true(seen[op][0] >= 2);
    assert_true(seen[KILN_OP_FPROP][1] >= 2);
    assert_true(seen[KILN_OP_DGRAD][1] >= 2);
    assert_true(discrete >= 1 && accumulate >= 1 && out_f32 >= 2 && epilogue >= 1);

    kiln_spec_list list;
    load_ok("specs/sweeps/fprop_sm90.yaml", &list);
    assert_true(list.count + list.dropped >= 24);
    assert_true(list.count >= 12);
    for (size_t i = 0; i < list.count; i++)
        assert_non_null(strstr(list.items[i].desc.name, "fprop_sm90_bf16__"));
    kiln_spec_list_free(&list);
}

/* Every shipped wgrad spec has a _dbias twin that differs only in
 * wgrad.dbias (and its name), so every combination the API allows with a
 * bias gradient has a kernel of the same tile and schedule.  The stage
 * count may be lower in the twin: db's sums take registers, and the
 * discrete accumulate default spilled at 4 stages with them (3 in its
 * twin; docs/sm90_wgrad.md). */
static void test_shipped_dbias_twins(void **state)
{
    (void)state;
    size_t n;
    char **files = yaml_files("specs/default", &n);
    int twins = 0;
    for (size_t i = 0; i < n; i++) {
        size_t len = strlen(files[i]);
        if (!strstr(files[i], "_wgrad_") || (len > 11 && !strcmp(files[i] + len - 11, "_dbias.yaml")))
            continue;
        char twin[512];
        snprintf(twin, sizeof twin, "%.*s_dbias.yaml", (int)(len - 5), files[i]);
        kiln_spec_list a, b;
        load_ok(files[i], &a);
        load_ok(twin, &b);
        kiln_kernel_desc want = a.items[0].desc;
        assert_int_equal(want.dbias, 0);
        want.dbias = 1;
        snprintf(want.name, sizeof want.name, "%s", b.items[0].desc.name);
        assert_true(b.items[0].desc.stages <= want.stages);
        want.stages = b.items[0].desc.stages;
        kiln_strbuf ta, tb;
        kiln_strbuf_init(&ta);
        kiln_strbuf_init(&tb);
        kiln_desc_format(&want, NULL, &ta);
        kiln_desc_format(&b.items[0].desc, NULL, &tb);
        if (strcmp(ta.data, tb.data)) print_error("%s:\n  want %s\n  got  %s\n", twin, ta.data, tb.data);
        assert_string_equal(ta.data, tb.data);
        kiln_strbuf_free(&ta);
        kiln_strbuf_free(&tb);
        kiln_spec_list_free(&a);
        kiln_spec_list_free(&b);
        twins++;
    }
    free_files(files, n);
    assert_int_equal(twins, 22); /* 12 simple, 10 sm90 */
}

/* Issue 13 (finding 4): hostile YAML is refused by the event pass before
 * libyaml builds a document: a 160 KB nesting bomb in well under a second
 * (it took 15 s), a text over the size cap at once; `kiln emit` exits 2. */
static void test_yaml_limits(void **state)
{
    (void)state;
    size_t half = 80 * 1024;
    char *bomb = malloc(2 * half + 64);
    assert_non_null(bomb);
    size_t n = (size_t)sprintf(bomb, "kernel: k\nop: fprop\ntypes: {a: bf16}\nx: ");
    memset(bomb + n, '[', half);
    memset(bomb + n + half, ']', half);
    n += 2 * half;
    bomb[n++] = '\n';
    kiln_spec_list list;
    kiln_error err;
    double t0 = kiln_now();
    assert_int_equal(kiln_spec_parse(bomb, n, "bomb.yaml", &list, &err), KILN_ERROR_INVALID_SPEC);
    assert_true(kiln_now() - t0 < 1.0);
    assert_non_null(strstr(err.msg, "bomb.yaml:4:35: nesting too deep"));

    char *dir = kiln_test_mkdtemp("bomb");
    char path[4096];
    snprintf(path, sizeof path, "%s/bomb.yaml", dir);
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    assert_int_equal(fwrite(bomb, 1, n, f), n);
    fclose(f);
    char *out = NULL;
    t0 = kiln_now();
    assert_int_equal(kiln_test_kiln(&out, "emit %s", path), 2);
    assert_true(kiln_now() - t0 < 1.0);
    assert_non_null(strstr(out, "nesting too deep"));
    free(out);

    /* Over 1 MiB: refused by size, before any parsing. */
    char *big = malloc(((size_t)1 << 20) + 2);
    assert_non_null(big);
    memset(big, '#', ((size_t)1 << 20) + 1);
    assert_int_equal(kiln_spec_parse(big, ((size_t)1 << 20) + 1, "big.yaml", &list, &err),
                     KILN_ERROR_INVALID_SPEC);
    assert_non_null(strstr(err.msg, "big.yaml: spec is 1048577 bytes; a spec may have at most "
                                    "1048576"));
    free(big);
    free(bomb);
    kiln_test_rmtree(dir);
    free(dir);
}

KILN_TEST_MAIN(
    cmocka_unit_test(test_bad_corpus),
    cmocka_unit_test(test_good_corpus_loads),
    cmocka_unit_test(test_good_full),
    cmocka_unit_test(test_good_defaults),
    cmocka_unit_test(test_good_wgrad_and_archs),
    cmocka_unit_test(test_good_wgrad_dbias),
    cmocka_unit_test(test_booleans),
    cmocka_unit_test(test_simple_family_rules),
    cmocka_unit_test(test_sweep_expansion),
    cmocka_unit_test(test_sweep_names_stable),
    cmocka_unit_test(test_sweep_expressions),
    cmocka_unit_test(test_sweep_types),
    cmocka_unit_test(test_validate_direct),
    cmocka_unit_test(test_smem_and_limits),
    cmocka_unit_test(test_io_errors),
    cmocka_unit_test(test_parse_memory),
    cmocka_unit_test(test_shipped_specs),
    cmocka_unit_test(test_shipped_dbias_twins),
    cmocka_unit_test(test_yaml_limits))
