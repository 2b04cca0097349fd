/* SPDX-License-Identifier: Apache-2.0 */
/* test_tuning.c — tuning tables (kernel/tuning.c): shape classes and their
 * boundaries, epilogue signatures, keys of calls, the text round trip,
 * lookups (exact and nearest), and every way a damaged table is refused. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "testutil.h"
#include "tuning.h"

#define HEX_A "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
#define HEX_B "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"

/* A canonical description (with launch) of a kernel. */
static char *desc_text(const char *name, kiln_op op, kiln_dtype a, kiln_dtype out, int tm, int tn)
{
    kiln_kernel_desc d;
    kiln_desc_init(&d);
    snprintf(d.name, sizeof d.name, "%s", name);
    d.op = op;
    d.a_type = d.b_type = a;
    d.out_type = out;
    d.tile_m = tm;
    d.tile_n = tn;
    kiln_launch_desc l;
    memset(&l, 0, sizeof l);
    snprintf(l.entry, sizeof l.entry, "%s", name);
    l.threads = 384;
    l.smem_bytes = 200000;
    l.persistent = 1;
    l.ctas_per_sm = 1;
    l.cluster_m = l.cluster_n = 1;
    kiln_strbuf sb;
    kiln_strbuf_init(&sb);
    kiln_desc_format(&d, &l, &sb);
    return kiln_strbuf_take(&sb);
}

/* kiln_problem_init lives in the runtime, which CPU tests do not link. */
static void problem_init(kiln_problem *p, kiln_op op)
{
    memset(p, 0, sizeof *p);
    p->op = op;
    p->epilogue.alpha = 1.0f;
}

static kiln_tuning_key key(const char *arch, kiln_op op, kiln_dtype t, const char *sig,
                           int tb, int gb, int nb, int kb)
{
    kiln_tuning_key k;
    memset(&k, 0, sizeof k);
    snprintf(k.arch, sizeof k.arch, "%s", arch);
    k.op = op;
    k.a_type = k.b_type = k.out_type = t;
    snprintf(k.epilogue, sizeof k.epilogue, "%s", sig);
    k.shape = (kiln_shape_class){tb, gb, nb, kb};
    return k;
}

static void class_name_of(int64_t g, int64_t cap, int64_t n, int64_t k, char *out)
{
    kiln_shape_class c;
    kiln_shape_class_of(g, cap, n, k, &c);
    kiln_shape_class_name(&c, out, 48);
}

static void test_class_boundaries(void **state)
{
    (void)state;
    char s[48];
    /* tokens per group: <=16, <=64, <=256, <=1024, more */
    struct { int64_t tpg; const char *t; } tt[] = {
        {1, "t16"}, {16, "t16"}, {17, "t64"}, {64, "t64"}, {65, "t256"}, {256, "t256"},
        {257, "t1024"}, {1024, "t1024"}, {1025, "tmax"}, {1 << 20, "tmax"}};
    for (size_t i = 0; i < sizeof tt / sizeof tt[0]; i++) {
        class_name_of(4, 4 * tt[i].tpg, 4096, 4096, s);
        char want[48];
        snprintf(want, sizeof want, "%s.g8.n4096.k4096", tt[i].t);
        assert_string_equal(s, want);
    }
    /* One row per boundary: groups, capacity, N, K and the class name. */
    struct { int64_t g, cap, n, k; const char *want; } cases[] = {
        /* capacity / G rounds up: 33 rows over 2 groups is 17 per group. */
        {2, 33, 4096, 4096, "t64.g8.n4096.k4096"},
        {2, 32, 4096, 4096, "t16.g8.n4096.k4096"},
        /* groups: <=8, <=32, <=128, more */
        {8, 8 * 100, 1024, 1024, "t256.g8.n1024.k1024"},
        {9, 9 * 100, 1024, 1024, "t256.g32.n1024.k1024"},
        {128, 128 * 100, 1024, 1024, "t256.g128.n1024.k1024"},
        {129, 129 * 100, 1024, 1024, "t256.gmax.n1024.k1024"},
        /* N and K: <=1024, <=2048, <=4096, <=8192, more */
        {32, 32 * 1024, 1025, 8192, "t1024.g32.n2048.k8192"},
        {32, 32 * 1024, 2048, 8193, "t1024.g32.n2048.kmax"},
        {32, 32 * 1024, 14336, 7168, "t1024.g32.nmax.k8192"},
        /* Zero capacity is the smallest class, not a crash. */
        {64, 0, 8, 8, "t16.g128.n1024.k1024"}};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        class_name_of(cases[i].g, cases[i].cap, cases[i].n, cases[i].k, s);
        assert_string_equal(s, cases[i].want);
    }
    assert_int_equal(kiln_shape_class_bound('t', 0), 16);
    assert_int_equal(kiln_shape_class_bound('t', 4), -1);
    assert_int_equal(kiln_shape_class_bound('n', 3), 8192);
}

static void test_class_parse(void **state)
{
    (void)state;
    /* Every class names and parses back to itself. */
    int count = 0;
    for (int t = 0; t < KILN_SHAPE_T_BUCKETS; t++)
        for (int g = 0; g < KILN_SHAPE_G_BUCKETS; g++)
            for (int n = 0; n < KILN_SHAPE_NK_BUCKETS; n++)
                for (int k = 0; k < KILN_SHAPE_NK_BUCKETS; k++) {
                    kiln_shape_class c = {t, g, n, k}, back;
                    char s[48];
                    kiln_shape_class_name(&c, s, sizeof s);
                    assert_int_equal(kiln_shape_class_parse(s, &back), 1);
                    assert_memory_equal(&c, &back, sizeof c);
                    count++;
                }
    assert_int_equal(count, 5 * 4 * 5 * 5);
    const char *bad[] = {"", "t16", "t16.g8.n1024", "t16.g8.n1024.k1024.x", "T16.g8.n1024.k1024",
                         "t15.g8.n1024.k1024", "t16.g9.n1024.k1024", "t16.g8.n1000.k1024",
                         "t16.g8.n1024.kmaxx", "g8.t16.n1024.k1024", "t16.g8.n1024.k-1",
                         "t16..g8.n1024.k1024", "t16.g8.n1024.k1024 "};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        kiln_shape_class c;
        if (kiln_shape_class_parse(bad[i], &c)) fail_msg("accepted bad class '%s'", bad[i]);
    }
}

static void test_signatures(void **state)
{
    (void)state;
    char sig[KILN_TUNING_SIG_MAX], why[256];
    kiln_problem p;
    problem_init(&p, KILN_OP_FPROP);
    kiln_tuning_sig_from_problem(&p, sig, sizeof sig);
    assert_string_equal(sig, "plain");
    static float dummy[4];
    p.epilogue.d_bias = dummy;
    p.epilogue.d_row_scale = dummy;
    p.epilogue.scale_bias = 1;
    p.epilogue.d_alpha = dummy;
    p.epilogue.beta = 0.5f;
    p.d_b_ptrs = (const void *const *)dummy;
    kiln_tuning_sig_from_problem(&p, sig, sizeof sig);
    assert_string_equal(sig, "weights+bias+row_scale+scale_bias+alpha+beta");
    assert_int_equal(kiln_tuning_sig_valid(sig, KILN_OP_FPROP, why, sizeof why), 1);
    /* scale_bias means nothing without a bias. */
    p.epilogue.d_bias = NULL;
    p.d_b_ptrs = NULL;
    p.epilogue.beta = 0;
    kiln_tuning_sig_from_problem(&p, sig, sizeof sig);
    assert_string_equal(sig, "row_scale+alpha");

    problem_init(&p, KILN_OP_WGRAD);
    p.wgrad_output = KILN_WGRAD_DISCRETE;
    p.accumulate = 1;
    p.epilogue.d_bias = dummy; /* ignored for wgrad */
    kiln_tuning_sig_from_problem(&p, sig, sizeof sig);
    assert_string_equal(sig, "wgrad_output+accumulate");
    assert_int_equal(kiln_tuning_sig_valid(sig, KILN_OP_WGRAD, why, sizeof why), 1);

    struct { const char *sig; kiln_op op; const char *why; } bad[] = {
        {"bias+bias", KILN_OP_FPROP, "not canonical"},
        {"row_scale+bias", KILN_OP_FPROP, "not canonical"},
        {"rowscale", KILN_OP_FPROP, "unknown term 'rowscale'"},
        {"bias+", KILN_OP_FPROP, "unknown term ''"},
        {"biases", KILN_OP_FPROP, "unknown term 'biases'"},
        {"wgrad_output", KILN_OP_FPROP, "unknown term 'wgrad_output'"},
        {"bias", KILN_OP_WGRAD, "unknown term 'bias'"},
        {"scale_bias", KILN_OP_DGRAD, "scale_bias needs bias and row_scale"},
        {"bias+scale_bias", KILN_OP_DGRAD, "scale_bias needs bias and row_scale"},
        {"", KILN_OP_FPROP, "unknown term"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        why[0] = '\0';
        if (kiln_tuning_sig_valid(bad[i].sig, bad[i].op, why, sizeof why))
            fail_msg("accepted bad signature '%s'", bad[i].sig);
        if (!strstr(why, bad[i].why))
            fail_msg("signature '%s': message '%s' lacks '%s'", bad[i].sig, why, bad[i].why);
    }
}

static void test_key_from_problem(void **state)
{
    (void)state;
    static float dummy[4];
    kiln_problem p;
    problem_init(&p, KILN_OP_FPROP);
    p.groups = 32;
    p.capacity = 32 * 1024;
    p.n = 4096;
    p.k = 7168;
    p.epilogue.d_bias = dummy;
    p.epilogue.d_row_scale = dummy;
    kiln_tuning_key k;
    kiln_tuning_key_from_problem(&p, "sm_90a", &k);
    kiln_strbuf sb;
    kiln_strbuf_init(&sb);
    kiln_tuning_key_format(&k, &sb);
    assert_string_equal(sb.data, "sm_90a fprop bf16 bf16 bf16 bias+row_scale t1024.g32.n4096.k8192");
    kiln_strbuf_free(&sb);
}

/* Builds a table of three entries. */
static kiln_tuning_table *three(char **descs)
{
    kiln_tuning_table *t = NULL;
    kiln_error err;
    kiln_error_clear(&err);
    assert_int_equal(kiln_tuning_table_create(&t, &err), KILN_OK);
    descs[0] = desc_text("k_big", KILN_OP_FPROP, KILN_DTYPE_BF16, KILN_DTYPE_BF16, 128, 256);
    descs[1] = desc_text("k_small", KILN_OP_FPROP, KILN_DTYPE_BF16, KILN_DTYPE_BF16, 64, 128);
    descs[2] = desc_text("k_wgrad", KILN_OP_WGRAD, KILN_DTYPE_F16, KILN_DTYPE_F16, 128, 128);
    /* The three entries as rows; each row fills the same fields. */
    struct {
        kiln_op op;
        kiln_dtype t;
        const char *sig;
        int tb, gb, nb, kb;
        const char *kernel, *runnerup;
        double median_ms, runnerup_ms;
    } rows[] = {
        {KILN_OP_FPROP, KILN_DTYPE_BF16, "bias", 3, 1, 2, 3, "k_big", "k_small", 0.123456, 0.2},
        {KILN_OP_FPROP, KILN_DTYPE_BF16, "bias", 0, 1, 2, 3, "k_small", "", 0.05, 0},
        {KILN_OP_WGRAD, KILN_DTYPE_F16, "wgrad_output", 2, 2, 2, 2, "k_wgrad", "k_other", 1.5,
         1.75}};
    kiln_tuning_entry e;
    memset(&e, 0, sizeof e);
    memcpy(e.bundle_id, HEX_A, 65);
    memcpy(e.cache_key, HEX_B, 65);
    for (int i = 0; i < 3; i++) {
        e.key = key("sm_90a", rows[i].op, rows[i].t, rows[i].sig, rows[i].tb, rows[i].gb,
                    rows[i].nb, rows[i].kb);
        snprintf(e.kernel, sizeof e.kernel, "%s", rows[i].kernel);
        e.median_ms = rows[i].median_ms;
        snprintf(e.runnerup, sizeof e.runnerup, "%s", rows[i].runnerup);
        e.runnerup_ms = rows[i].runnerup_ms;
        e.desc = descs[i];
        assert_int_equal(kiln_tuning_table_add(t, &e, &err), KILN_OK);
    }
    return t;
}

static void free_descs(char **d)
{
    for (int i = 0; i < 3; i++) free(d[i]);
}

static void test_round_trip(void **state)
{
    (void)state;
    char *descs[3];
    kiln_tuning_table *t = three(descs);
    assert_int_equal(kiln_tuning_table_count(t), 3);
    kiln_strbuf a;
    kiln_strbuf_init(&a);
    const char *comments[] = {"made by test_tuning", "two\nlines", NULL};
    kiln_tuning_table_format(t, comments, &a);
    assert_true(!strncmp(a.data, "kiln-tuning 1\n# made by test_tuning\n# two\n# lines\n", 47));
    kiln_tuning_table *back = NULL;
    kiln_error err;
    kiln_error_clear(&err);
    if (kiln_tuning_table_parse(a.data, a.len, "rt.txt", &back, &err) != KILN_OK)
        fail_msg("round trip refused: %s", err.msg);
    assert_int_equal(kiln_tuning_table_count(back), 3);
    kiln_strbuf b;
    kiln_strbuf_init(&b);
    kiln_tuning_table_format(back, comments, &b);
    assert_string_equal(a.data, b.data);
    /* Fields survive, and entries come out in key order. */
    const kiln_tuning_entry *e0 = kiln_tuning_table_at(back, 0);
    assert_string_equal(e0->kernel, "k_small");
    assert_int_equal(e0->line, 5); /* header, three comment lines */
    assert_int_equal(e0->runnerup[0], '\0');
    const kiln_tuning_entry *e1 = kiln_tuning_table_at(back, 1);
    assert_string_equal(e1->kernel, "k_big");
    assert_string_equal(e1->bundle_id, HEX_A);
    assert_string_equal(e1->cache_key, HEX_B);
    assert_true(e1->median_ms > 0.1234 && e1->median_ms < 0.1235);
    assert_string_equal(e1->runnerup, "k_small");
    assert_int_equal(e1->kdesc.tile_n, 256);
    assert_int_equal(e1->launch.smem_bytes, 200000);
    assert_string_equal(e1->launch.entry, "k_big");
    assert_string_equal(e1->desc, descs[0]);
    assert_string_equal(kiln_tuning_table_at(back, 2)->kernel, "k_wgrad");

    /* Through a file. */
    const char *dir = *state;
    char path[4200];
    snprintf(path, sizeof path, "%s/table.txt", dir);
    assert_int_equal(kiln_tuning_table_save(back, NULL, path, &err), KILN_OK);
    kiln_tuning_table *loaded = NULL;
    assert_int_equal(kiln_tuning_table_load(path, &loaded, &err), KILN_OK);
    assert_int_equal(kiln_tuning_table_count(loaded), 3);
    kiln_tuning_table_destroy(loaded);
    snprintf(path, sizeof path, "%s/missing.txt", dir);
    assert_int_equal(kiln_tuning_table_load(path, &loaded, &err), KILN_ERROR_IO);
    assert_null(loaded);
    assert_non_null(strstr(err.msg, "missing.txt"));

    kiln_strbuf_free(&a);
    kiln_strbuf_free(&b);
    kiln_tuning_table_destroy(back);
    kiln_tuning_table_destroy(t);
    free_descs(descs);
}

static void test_lookup(void **state)
{
    (void)state;
    char *descs[3];
    kiln_tuning_table *t = three(descs);
    kiln_tuning_key k = key("sm_90a", KILN_OP_FPROP, KILN_DTYPE_BF16, "bias", 3, 1, 2, 3);
    const kiln_tuning_entry *e = kiln_tuning_lookup(t, &k);
    assert_non_null(e);
    assert_string_equal(e->kernel, "k_big");
    k.shape.t = 0;
    e = kiln_tuning_lookup(t, &k);
    assert_non_null(e);
    assert_string_equal(e->kernel, "k_small");
    /* Misses: each part of the key matters. */
    kiln_tuning_key miss[6];
    for (int i = 0; i < 6; i++) miss[i] = key("sm_90a", KILN_OP_FPROP, KILN_DTYPE_BF16, "bias", 3, 1, 2, 3);
    snprintf(miss[0].arch, sizeof miss[0].arch, "sm_100a");
    miss[1].op = KILN_OP_DGRAD;
    miss[2].out_type = KILN_DTYPE_F32;
    snprintf(miss[3].epilogue, sizeof miss[3].epilogue, "plain");
    miss[4].shape.t = 4;
    miss[5].shape.g = 0;
    for (int i = 0; i < 6; i++)
        if (kiln_tuning_lookup(t, &miss[i])) fail_msg("key %d should miss", i);
    assert_null(kiln_tuning_lookup(NULL, &k));

    /* Nearest: same arch/op/types/signature, closest class. */
    int dist = -5;
    kiln_tuning_key near = key("sm_90a", KILN_OP_FPROP, KILN_DTYPE_BF16, "bias", 4, 1, 2, 3);
    e = kiln_tuning_lookup_nearest(t, &near, &dist);
    assert_non_null(e);
    assert_string_equal(e->kernel, "k_big"); /* t: 4 is closer to 3 than to 0 */
    assert_int_equal(dist, 100);              /* tmax (2048) is an octave from t1024 */
    near.shape.t = 1;
    e = kiln_tuning_lookup_nearest(t, &near, &dist);
    assert_string_equal(e->kernel, "k_small");
    near.shape.t = 3;
    e = kiln_tuning_lookup_nearest(t, &near, &dist);
    assert_int_equal(dist, 0);
    assert_string_equal(e->kernel, "k_big");
    snprintf(near.epilogue, sizeof near.epilogue, "plain");
    assert_null(kiln_tuning_lookup_nearest(t, &near, &dist));
    assert_int_equal(dist, -1);

    /* A duplicate key is refused by add. */
    kiln_tuning_entry dup = *kiln_tuning_table_at(t, 0);
    kiln_error err;
    kiln_error_clear(&err);
    assert_int_equal(kiln_tuning_table_add(t, &dup, &err), KILN_ERROR_INVALID_ARGUMENT);
    assert_non_null(strstr(err.msg, "duplicate key"));
    assert_int_equal(kiln_tuning_table_count(t), 3);
    /* Merging: the first table's entries win, new keys are added. */
    kiln_tuning_table *u = NULL;
    assert_int_equal(kiln_tuning_table_create(&u, &err), KILN_OK);
    kiln_tuning_entry other = *kiln_tuning_table_at(t, 1); /* k_big's key */
    snprintf(other.kernel, sizeof other.kernel, "k_small");
    other.desc = descs[1];
    assert_int_equal(kiln_tuning_table_add(u, &other, &err), KILN_OK);
    other.key.shape.g = 3; /* a key t lacks */
    assert_int_equal(kiln_tuning_table_add(u, &other, &err), KILN_OK);
    size_t added = 99;
    assert_int_equal(kiln_tuning_table_merge(t, u, &added, &err), KILN_OK);
    assert_int_equal(added, 1);
    assert_int_equal(kiln_tuning_table_count(t), 4);
    k = key("sm_90a", KILN_OP_FPROP, KILN_DTYPE_BF16, "bias", 3, 1, 2, 3);
    assert_string_equal(kiln_tuning_lookup(t, &k)->kernel, "k_big");
    k.shape.g = 3;
    assert_string_equal(kiln_tuning_lookup(t, &k)->kernel, "k_small");
    kiln_tuning_table_destroy(u);
    kiln_tuning_table_destroy(t);
    free_descs(descs);
}

/* One valid line for the rejection tests. */
static char *good_line(void)
{
    char *d = desc_text("k_big", KILN_OP_FPROP, KILN_DTYPE_BF16, KILN_DTYPE_BF16, 128, 256);
    kiln_strbuf sb;
    kiln_strbuf_init(&sb);
    kiln_strbuf_printf(&sb, "sm_90a fprop bf16 bf16 bf16 bias t1024.g32.n4096.k8192 -> k_big "
                            HEX_A " " HEX_B " 0.5 k_small 0.75 %s", d);
    free(d);
    return kiln_strbuf_take(&sb);
}

/* Replaces the nth (0-based) space-separated field of line. */
static char *with_field(const char *line, int n, const char *value)
{
    kiln_strbuf sb;
    kiln_strbuf_init(&sb);
    const char *p = line;
    for (int i = 0; i < n; i++) p = strchr(p, ' ') + 1;
    const char *end = strchr(p, ' ');
    kiln_strbuf_append(&sb, line, (size_t)(p - line));
    kiln_strbuf_puts(&sb, value);
    kiln_strbuf_puts(&sb, end ? end : "");
    return kiln_strbuf_take(&sb);
}

static void expect_reject(const char *text, const char *where, const char *what)
{
    kiln_tuning_table *t = (kiln_tuning_table *)1;
    kiln_error err;
    kiln_error_clear(&err);
    kiln_status st = kiln_tuning_table_parse(text, strlen(text), "table.txt", &t, &err);
    if (st == KILN_OK) fail_msg("accepted a bad table (want '%s'):\n%s", what, text);
    assert_null(t);
    if (strncmp(err.msg, where, strlen(where)) || !strstr(err.msg, what))
        fail_msg("message '%s' should start with '%s' and contain '%s'", err.msg, where, what);
}

/* Appends the integrity line kiln tune writes (issue 13): the entry count
 * and the SHA-256 of every line before it, each ended by "\n". */
static void seal(char *text, size_t size)
{
    size_t entries = 0;
    int first = 1;
    for (const char *p = text; *p;) {
        const char *nl = strchr(p, '\n');
        size_t n = nl ? (size_t)(nl - p) : strlen(p);
        const char *q = p;
        while (q < p + n && (*q == ' ' || *q == '\t')) q++;
        if (!first && q < p + n && *q != '#') entries++;
        first = 0;
        p += n + (nl ? 1 : 0);
    }
    char hex[65];
    kiln_sha256_hex(text, strlen(text), hex);
    size_t len = strlen(text);
    snprintf(text + len, size - len, "integrity entries=%zu sha256=%s\n", entries, hex);
}

static void test_rejections(void **state)
{
    (void)state;
    char *line = good_line();
    char text[8192];
    /* The good line itself passes, after comments and blank lines. */
    snprintf(text, sizeof text, "kiln-tuning 1\n# c\n\n   \n%s\n", line);
    seal(text, sizeof text);
    kiln_tuning_table *t = NULL;
    kiln_error err;
    kiln_error_clear(&err);
    if (kiln_tuning_table_parse(text, strlen(text), "table.txt", &t, &err) != KILN_OK)
        fail_msg("good table refused: %s", err.msg);
    assert_int_equal(kiln_tuning_table_count(t), 1);
    assert_int_equal(kiln_tuning_table_at(t, 0)->line, 5);
    kiln_tuning_table_destroy(t);

    /* Headers. */
    expect_reject("", "table.txt:1:", "empty file");
    expect_reject("# just a comment\n", "table.txt:1:", "not a kiln tuning table");
    expect_reject("kiln-tuneing 1\n", "table.txt:1:", "not a kiln tuning table");
    expect_reject("kiln-tuning 2\n", "table.txt:1:", "format 2");
    expect_reject("kiln-tuning x\n", "table.txt:1:", "bad header");
    expect_reject("kiln-tuning 1 extra\n", "table.txt:1:", "bad header");
    expect_reject("kiln-tuning\n", "table.txt:1:", "bad header");

    /* Bad fields, each on line 7 behind comments and blank lines. */
    struct { int field; const char *value; const char *what; } bad[] = {
        {0, "sm90", "bad arch 'sm90'"},
        {0, "sm_90x", "bad arch"},
        {1, "fpropx", "unknown op 'fpropx'"},
        {2, "bf17", "unknown a type 'bf17'"},
        {3, "int8", "unknown b type 'int8'"},
        {4, "f64", "unknown out type 'f64'"},
        {5, "bias+bias", "not canonical"},
        {5, "accumulate", "unknown term 'accumulate'"},
        {6, "t1000.g32.n4096.k8192", "bad shape class 't1000.g32.n4096.k8192'"},
        {7, "=>", "expected '->'"},
        {9, "abc", "bundle id 'abc' is not 64 lowercase hex digits"},
        {10, "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA", "cache key"},
        {11, "0", "time '0' is not a positive number"},
        {11, "-1", "time '-1'"},
        {11, "fast", "time 'fast'"},
        {11, "nan", "time 'nan'"},
        {11, "1e999", "time '1e999'"},
        {12, "-", "both be '-'"},
        {13, "soon", "runner-up time 'soon'"},
        {8, "k_other", "kernel k_other has the description of k_big"},
        {1, "dgrad", "kernel k_big is fprop bf16/bf16->bf16, but the key says dgrad"},
        {2, "fp16", "but the key says fprop fp16"},
        {14, "name=k_big bogus=1", "unknown key 'bogus'"},
        {14, "name=k_big op=sideways", "bad value 'sideways' for 'op'"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        char *l = with_field(line, bad[i].field, bad[i].value);
        snprintf(text, sizeof text, "kiln-tuning 1\n# one\n\n# two\n\n\n%s\n", l);
        expect_reject(text, "table.txt:7:", bad[i].what);
        free(l);
    }
    /* Runner-up both '-' is fine. */
    char *l1 = with_field(line, 12, "-");
    char *l2 = with_field(l1, 13, "-");
    snprintf(text, sizeof text, "kiln-tuning 1\n%s\n", l2);
    seal(text, sizeof text);
    assert_int_equal(kiln_tuning_table_parse(text, strlen(text), "table.txt", &t, &err), KILN_OK);
    assert_string_equal(kiln_tuning_table_at(t, 0)->runnerup, "");
    kiln_tuning_table_destroy(t);
    free(l1);
    free(l2);

    /* Truncated lines. */
    snprintf(text, sizeof text, "kiln-tuning 1\nsm_90a fprop bf16\n");
    expect_reject(text, "table.txt:2:", "missing b type (field 4)");
    char cut[4096];
    snprintf(cut, sizeof cut, "%.*s", (int)(strstr(line, " name=") - line), line);
    snprintf(text, sizeof text, "kiln-tuning 1\n%s\n", cut);
    expect_reject(text, "table.txt:2:", "missing kernel description");
    /* A description without its launch part cannot be launched. */
    char *nolaunch = desc_text("k_big", KILN_OP_FPROP, KILN_DTYPE_BF16, KILN_DTYPE_BF16, 128, 256);
    *strstr(nolaunch, " entry=") = '\0';
    char *l3 = with_field(line, 14, "X");
    *strstr(l3, " X") = '\0';
    snprintf(text, sizeof text, "kiln-tuning 1\n%s %s\n", l3, nolaunch);
    expect_reject(text, "table.txt:2:", "no launch part");
    free(nolaunch);
    free(l3);
    /* Duplicate keys name the first line. */
    snprintf(text, sizeof text, "kiln-tuning 1\n%s\n# again\n%s\n", line, line);
    expect_reject(text, "table.txt:4:", "duplicate key 'sm_90a fprop bf16 bf16 bf16 bias "
                                        "t1024.g32.n4096.k8192' (first on line 2)");
    /* Binary damage. */
    char bin[64] = "kiln-tuning 1\nsm_90a\0garbage\n";
    kiln_error_clear(&err);
    t = NULL;
    assert_int_equal(kiln_tuning_table_parse(bin, 30, "table.txt", &t, &err),
                     KILN_ERROR_INVALID_ARGUMENT);
    assert_null(t);
    assert_non_null(strstr(err.msg, "NUL byte"));
    free(line);
}

/* ---- issue 13: damaged tables, echoed bytes ------------------------------ */

/* Parses text expecting a refusal "sm_90a.tuning:LINE: ..." on one line. */
static void expect_damaged_refused(const char *text, size_t len, const char *damage)
{
    kiln_tuning_table *t = NULL;
    kiln_error err;
    kiln_error_clear(&err);
    kiln_status st = kiln_tuning_table_parse(text, len, "sm_90a.tuning", &t, &err);
    if (st == KILN_OK) fail_msg("damaged table accepted (%s)", damage);
    assert_null(t);
    int line = 0, used = 0;
    if (sscanf(err.msg, "sm_90a.tuning:%d: %n", &line, &used) < 1 || used == 0 || line < 1)
        fail_msg("no file:line in '%s' (%s)", err.msg, damage);
    assert_null(strchr(err.msg, '\n'));
}

/* Every copy of the shipped table cut at a line, missing a line, or with one
 * digit changed is refused with file:line; the undamaged table loads.  (Of
 * 595 random damages, 262 used to load with different entries.) */
static void test_damaged_tables(void **state)
{
    (void)state;
    const char *path = "specs/tuning/sm_90a.tuning";
    kiln_tuning_table *t = NULL;
    kiln_error err;
    if (kiln_tuning_table_load(path, &t, &err) != KILN_OK) fail_msg("%s", err.msg);
    char *text;
    size_t len;
    assert_int_equal(kiln_file_read(path, &text, &len, &err), KILN_OK);
    /* Every entry line (they start with the arch) is loaded. */
    size_t entry_lines = !strncmp(text, "sm_", 3);
    for (const char *q = text; (q = strstr(q, "\nsm_")); q++) entry_lines++;
    assert_true(entry_lines >= 20);
    assert_int_equal(kiln_tuning_table_count(t), entry_lines);
    kiln_tuning_table_destroy(t);

    size_t starts[256];
    size_t n_lines = 0;
    for (size_t i = 0; i < len && n_lines < 256; i++)
        if (i == 0 || text[i - 1] == '\n') starts[n_lines++] = i;
    assert_true(n_lines > 20);
    char *copy = malloc(len + 1);
    assert_non_null(copy);
    char what[64];
    /* Cut after each line but the last. */
    for (size_t k = 1; k < n_lines; k++) {
        snprintf(what, sizeof what, "cut after line %zu", k);
        expect_damaged_refused(text, starts[k], what);
    }
    /* Each line dropped. */
    for (size_t k = 0; k < n_lines; k++) {
        size_t end = k + 1 < n_lines ? starts[k + 1] : len;
        memcpy(copy, text, starts[k]);
        memcpy(copy + starts[k], text + end, len - end);
        snprintf(what, sizeof what, "line %zu dropped", k + 1);
        expect_damaged_refused(copy, len - (end - starts[k]), what);
    }
    /* Each digit changed, comments and the integrity line included; in the
     * entries the digits at every 97th byte (some in every entry's line,
     * each 780 bytes or more; ~2000 in all): one parse of the whole table
     * per digit made this test the CPU suite's slowest as the table grew
     * (every fifth byte, 22000 parses of 468 entries: 100 s, and 15 min
     * under the sanitizers; every 23rd, 5700 parses of 469: 50 s, 5 min). */
    size_t digits = 0;
    int in_entry = 0;
    for (size_t i = 0; i < len; i++) {
        if (i == 0 || text[i - 1] == '\n') in_entry = !strncmp(text + i, "sm_", 3);
        if (text[i] < '0' || text[i] > '9' || (in_entry && i % 97)) continue;
        memcpy(copy, text, len);
        copy[i] = (char)('0' + (text[i] - '0' + 1) % 10);
        snprintf(what, sizeof what, "digit at byte %zu changed", i);
        expect_damaged_refused(copy, len, what);
        digits++;
    }
    assert_true(digits > 1000);
    free(copy);
    free(text);
}

/* Table errors quote the file's text with CR, ESC and other control bytes
 * escaped: a message cannot rewrite a terminal line or forge a log line. */
static void test_table_messages_printable(void **state)
{
    (void)state;
    char *line = good_line();
    char *l0 = with_field(line, 0, "sm_90a\r\x1b[2Jfake:");
    char *l1 = with_field(line, 1, "fpr\x1b]0;title\x07op");
    char t0[8192], t1[8192];
    snprintf(t0, sizeof t0, "kiln-tuning 1\n%s\n", l0);
    snprintf(t1, sizeof t1, "kiln-tuning 1\n%s\n", l1);
    const char *const texts[] = {
        t0, t1, "kiln\x1b[1A-tuning 1\n", "kiln-tuning 1\nintegrity entries=0 sha256=\r\x1b[K\n",
    };
    for (size_t i = 0; i < sizeof texts / sizeof texts[0]; i++) {
        kiln_tuning_table *t = NULL;
        kiln_error err;
        kiln_error_clear(&err);
        assert_int_not_equal(kiln_tuning_table_parse(texts[i], strlen(texts[i]), "t.txt", &t, &err),
                             KILN_OK);
        print_message("  -> %s\n", err.msg);
        for (const unsigned char *p = (const unsigned char *)err.msg; *p; p++)
            if (*p < 0x20 || *p >= 0x7f) fail_msg("byte 0x%02x in message '%s'", *p, err.msg);
        if (i < 3) assert_non_null(strstr(err.msg, "\\x1b"));
    }
    free(l0);
    free(l1);
    free(line);
}

/* The timer a table was measured with: what kiln pack refuses and the
 * runtime warns about when it is the fake one. */
static void test_table_timer(void **state)
{
    (void)state;
    kiln_tuning_table *t = NULL;
    kiln_error err;
    if (kiln_tuning_table_load("specs/tuning/sm_90a.tuning", &t, &err) != KILN_OK)
        fail_msg("%s", err.msg);
    assert_string_equal(kiln_tuning_table_timer(t), "gpu:NVIDIA_H200");
    kiln_tuning_table_destroy(t);
    char out[64];
    const char *fake = "kiln-tuning 1\n# written by kiln tune 0.1.0; timer fake\n";
    kiln_tuning_text_timer(fake, strlen(fake), out, sizeof out);
    assert_string_equal(out, "fake");
    const char *none = "kiln-tuning 1\n# a comment\n";
    kiln_tuning_text_timer(none, strlen(none), out, sizeof out);
    assert_string_equal(out, "");
}

/* Issue 11: a wgrad call with a bias gradient has its own signature term,
 * so an entry for plain wgrad (whose kernel may lack dbias) never stands
 * for it and a tuned dbias twin can; dense and per-expert db alike. */
static void test_dbias_signature(void **state)
{
    (void)state;
    char sig[KILN_TUNING_SIG_MAX], why[256];
    static float dummy[4];
    kiln_problem p;
    problem_init(&p, KILN_OP_WGRAD);
    kiln_tuning_sig_from_problem(&p, sig, sizeof sig);
    assert_string_equal(sig, "plain");
    p.d_dbias = dummy;
    kiln_tuning_sig_from_problem(&p, sig, sizeof sig);
    assert_string_equal(sig, "dbias");
    assert_int_equal(kiln_tuning_sig_valid(sig, KILN_OP_WGRAD, why, sizeof why), 1);
    p.d_dbias = NULL;
    p.d_dbias_ptrs = (void *const *)dummy;
    p.accumulate = 1;
    kiln_tuning_sig_from_problem(&p, sig, sizeof sig);
    assert_string_equal(sig, "accumulate+dbias");
    /* Not a term of fprop/dgrad keys. */
    assert_int_equal(kiln_tuning_sig_valid("dbias", KILN_OP_FPROP, why, sizeof why), 0);
    kiln_tuning_key a, b;
    kiln_tuning_key_from_problem(&p, "sm_90a", &a);
    p.d_dbias_ptrs = NULL;
    kiln_tuning_key_from_problem(&p, "sm_90a", &b);
    assert_int_not_equal(kiln_tuning_key_compare(&a, &b), 0);
}

/* fp8 calls: the recipe is named in the signature, so row-wise, per-tensor
 * and block-scaled calls of one class have keys of their own (with one
 * term for all, a table could hold only one of them), promotion adds its
 * term (the block recipe always promotes), and the parser takes exactly
 * those spellings. */
static void test_fp8_signature(void **state)
{
    (void)state;
    char sig[KILN_TUNING_SIG_MAX], why[256];
    static float dummy[4];
    kiln_problem p;
    problem_init(&p, KILN_OP_DGRAD);
    p.a_type = p.b_type = KILN_DTYPE_E4M3;
    p.out_type = KILN_DTYPE_BF16;
    p.groups = 32;
    p.capacity = 32 * 1024;
    p.n = 4096;
    p.k = 7168;
    p.fp8.d_scale_a = p.fp8.d_scale_b = dummy;
    p.fp8.d_bt = dummy;
    static const struct { kiln_fp8_recipe r; int promote; const char *sig; } want[] = {
        {KILN_FP8_TENSOR, 0, "fp8_recipe=tensor"},
        {KILN_FP8_ROW, 0, "fp8_recipe=row"},
        {KILN_FP8_ROW, 1, "fp8_recipe=row+fp8_accumulate"},
        {KILN_FP8_BLOCK, 0, "fp8_recipe=block+fp8_accumulate"},
        {KILN_FP8_BLOCK, 1, "fp8_recipe=block+fp8_accumulate"},
    };
    kiln_tuning_key keys[5];
    for (int i = 0; i < 5; i++) {
        p.fp8.recipe = want[i].r;
        p.fp8.promote = want[i].promote;
        kiln_tuning_sig_from_problem(&p, sig, sizeof sig);
        assert_string_equal(sig, want[i].sig);
        if (!kiln_tuning_sig_valid(sig, KILN_OP_DGRAD, why, sizeof why)) fail_msg("%s: %s", sig, why);
        kiln_tuning_key_from_problem(&p, "sm_90a", &keys[i]);
    }
    for (int i = 0; i < 4; i++)
        for (int j = i + 1; j < 4; j++)
            assert_int_not_equal(kiln_tuning_key_compare(&keys[i], &keys[j]), 0);
    kiln_strbuf sb;
    kiln_strbuf_init(&sb);
    kiln_tuning_key_format(&keys[1], &sb);
    assert_string_equal(sb.data, "sm_90a dgrad e4m3 e4m3 bf16 fp8_recipe=row t1024.g32.n4096.k8192");
    kiln_strbuf_free(&sb);
    /* With an epilogue term: the knob table's order. */
    p.fp8.recipe = KILN_FP8_ROW;
    p.fp8.promote = 0;
    p.epilogue.d_bias = dummy;
    kiln_tuning_sig_from_problem(&p, sig, sizeof sig);
    assert_string_equal(sig, "bias+fp8_recipe=row");

    struct { const char *sig; const char *why; } bad[] = {
        {"fp8_recipe", "unknown term 'fp8_recipe'"},
        {"fp8_recipe=", "unknown term 'fp8_recipe='"},
        {"fp8_recipe=none", "unknown term 'fp8_recipe=none'"},
        {"fp8_recipe=rows", "unknown term 'fp8_recipe=rows'"},
        {"fp8_accumulate=promote", "unknown term 'fp8_accumulate=promote'"},
        {"bias=per_group", "unknown term 'bias=per_group'"},
        {"fp8_accumulate+fp8_recipe=row", "not canonical"},
        {"fp8_recipe=row+fp8_recipe=block", "not canonical"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        why[0] = '\0';
        if (kiln_tuning_sig_valid(bad[i].sig, KILN_OP_FPROP, why, sizeof why))
            fail_msg("accepted bad signature '%s'", bad[i].sig);
        if (!strstr(why, bad[i].why))
            fail_msg("signature '%s': message '%s' lacks '%s'", bad[i].sig, why, bad[i].why);
    }
    /* The message lists the recipes a term may name. */
    kiln_tuning_sig_valid("fp8_recipe", KILN_OP_FPROP, why, sizeof why);
    if (!strstr(why, "fp8_recipe=tensor|row|block+fp8_accumulate")) fail_msg("message: %s", why);
    assert_int_equal(kiln_tuning_sig_valid("fp8_recipe=row", KILN_OP_WGRAD, why, sizeof why), 0);
}

/* The distance the dispatcher's nearest-class rule uses: zero on a class's
 * representative sizes, continuous across a bucket edge (a call one row a
 * group past t1024 is as near t1024 as the call at 1024), and ordered by
 * how far each axis moves. */
static void test_class_distance(void **state)
{
    (void)state;
    assert_int_equal(kiln_shape_class_rep('t', 3), 1024);
    assert_int_equal(kiln_shape_class_rep('t', 4), 2048);
    assert_int_equal(kiln_shape_class_rep('n', 4), 16384);
    assert_int_equal(kiln_shape_class_rep('g', 9), -1);
    kiln_shape_class c;
    kiln_shape_class_of(32, 32 * 1024, 4096, 4096, &c); /* t1024.g32.n4096.k4096 */
    assert_true(kiln_shape_class_distance(&c, 32, 32 * 1024, 4096, 4096) == 0.0);
    double edge = kiln_shape_class_distance(&c, 32, 32 * 1025, 4096, 4096);
    assert_true(edge > 0 && edge < 0.01);
    kiln_shape_class past;
    kiln_shape_class_of(32, 32 * 1025, 4096, 4096, &past); /* its own class is tmax */
    assert_int_equal(past.t, 4);
    assert_true(kiln_shape_class_distance(&past, 32, 32 * 1025, 4096, 4096) > 0.9);
    /* A factor 2 in tokens per group weighs twice a factor 2 in N. */
    double dt = kiln_shape_class_distance(&c, 32, 32 * 512, 4096, 4096);
    double dn = kiln_shape_class_distance(&c, 32, 32 * 1024, 2048, 4096);
    assert_true(fabs(dt - 1.0) < 1e-9 && fabs(dn - 0.5) < 1e-9);
}

KILN_TEST_MAIN(
    cmocka_unit_test(test_class_boundaries),
    cmocka_unit_test(test_class_parse),
    cmocka_unit_test(test_signatures),
    cmocka_unit_test(test_key_from_problem),
    kiln_test_with_dir(test_round_trip),
    cmocka_unit_test(test_lookup),
    cmocka_unit_test(test_rejections),
    cmocka_unit_test(test_damaged_tables),
    cmocka_unit_test(test_table_messages_printable),
    cmocka_unit_test(test_table_timer),
    cmocka_unit_test(test_dbias_signature),
    cmocka_unit_test(test_fp8_signature),
    cmocka_unit_test(test_class_distance))
