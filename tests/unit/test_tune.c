/* SPDX-License-Identifier: Apache-2.0 */
/* test_tune.c — `kiln tune` end to end with the fake timer: the whole flow
 * on a small sweep of real family "simple" kernels (dropped points counted,
 * table written and loaded back, plot, JSON), a run killed halfway and
 * resumed (only the rest is timed, the same table comes out), a torn
 * journal line, several workers, variants that fail to compile, spill or
 * give wrong results, bad input, and the timing order ($KILN_TUNE_ORDER). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "bundle.h"
#include "testutil.h"
#include "tuning.h"

#define SWEEP "tests/data/tune/sweep.yaml"
#define SHAPES "tests/data/tune/shapes.tsv"
#define FATES "tests/data/tune/fates.yaml"
#define DGRAD "tests/data/tune/dgrad.yaml"
#define FATE_TEMPLATES "tests/data/tune/templates"
#define FP8_SWEEPS                                                                                 \
    "specs/sweeps/fprop_sm90_e4m3_row.yaml specs/sweeps/dgrad_sm90_e4m3_row.yaml "                 \
    "specs/sweeps/fprop_sm90_e4m3_block.yaml specs/sweeps/dgrad_sm90_e4m3_block.yaml"
#define FP8_SHAPES "tests/data/tune/fp8_shapes.tsv"
#define DBIAS_SWEEPS "specs/sweeps/wgrad_sm90_dbias.yaml specs/sweeps/wgrad_sm90_acc_dbias.yaml"

static char *g_dir;   /* scratch for the whole file */
static char *g_cache; /* one cache, so each kernel compiles once */

static int setup(void **state)
{
    (void)state;
    g_dir = kiln_test_mkdtemp("tune");
    size_t n = strlen(g_dir) + 16;
    g_cache = malloc(n);
    snprintf(g_cache, n, "%s/cache", g_dir);
    /* The fp8 and dbias sweeps are shipped specs, which the bundle's build
     * has compiled (kiln_test_seed_cache): compiling them again took 80 of
     * this test's 85 s, and four times that under the sanitizers.  The
     * small sweeps of tests/data/tune are still compiled here. */
    return kiln_test_seed_cache(g_cache) < 0 ? -1 : 0;
}

static int teardown(void **state)
{
    (void)state;
    kiln_test_rmtree(g_dir);
    free(g_dir);
    free(g_cache);
    return 0;
}

/* The number after the first "key": in out; -1 when there is none. */
static long json_count(const char *out, const char *key)
{
    char pat[64];
    snprintf(pat, sizeof pat, "\"%s\": ", key);
    const char *p = strstr(out, pat);
    return p ? strtol(p + strlen(pat), NULL, 10) : -1;
}

/* Runs `ENV kiln tune ARGS --cache-dir CACHE`. */
static int tune(char **out, const char *env, const char *fmt, ...) KILN_PRINTF(3, 4);
static int tune(char **out, const char *env, const char *fmt, ...)
{
    char args[4096], cmd[8192];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(args, sizeof args, fmt, ap);
    va_end(ap);
    snprintf(cmd, sizeof cmd, "env -u KILN_TUNE_TIMER -u KILN_TUNE_STOP_AFTER -u KILN_TUNE_FAKE_BAD "
                              "-u KILN_TUNE_FAKE_DEVICES -u KILN_TUNE_ORDER %s %s tune %s "
                              "--cache-dir '%s'",
             env ? env : "", kiln_test_kiln_bin(), args, g_cache);
    return kiln_test_run(cmd, out);
}

static char *path_in(const char *sub, const char *name)
{
    char *p = malloc(4200);
    snprintf(p, 4200, "%s/%s", g_dir, sub);
    mkdir(p, 0755);
    snprintf(p, 4200, "%s/%s/%s", g_dir, sub, name);
    return p;
}

static char *slurp(const char *path)
{
    char *data = NULL;
    size_t len = 0;
    kiln_error err;
    if (kiln_file_read(path, &data, &len, &err) != KILN_OK) return NULL;
    return data;
}

static int exists(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0;
}

/* Journal records (lines after the header). */
static int journal_records(const char *path)
{
    char *j = slurp(path);
    if (!j) return -1;
    int n = 0;
    for (char *p = j; *p; p++) n += *p == '\n';
    assert_true(!strncmp(j, "kiln-tune-journal 1\n", 20));
    free(j);
    return n - 1;
}

/* The journal's records as "bundle id<TAB>shape id" lines, in the order
 * they were timed; returns how many (at most max). */
static int journal_order(const char *path, char lines[][160], int max)
{
    char *j = slurp(path);
    assert_non_null(j);
    int n = 0;
    for (char *p = strchr(j, '\n') + 1; *p && n < max;) {
        char *nl = strchr(p, '\n');
        *nl = '\0';
        char *t1 = strchr(p, '\t');
        char *t2 = t1 ? strchr(t1 + 1, '\t') : NULL;
        if (t2) *t2 = '\0';
        snprintf(lines[n++], 160, "%s", p);
        p = nl + 1;
    }
    free(j);
    return n;
}

/* Every (bundle id, shape) pair appears at most once in the journal. */
static void assert_no_repeats(const char *path)
{
    static char lines[256][160];
    const int n = journal_order(path, lines, 256);
    for (int a = 0; a < n; a++)
        for (int b = a + 1; b < n; b++)
            if (!strcmp(lines[a], lines[b])) fail_msg("timed twice: %s", lines[a]);
}

static kiln_tuning_table *load_table(const char *path)
{
    kiln_tuning_table *t = NULL;
    kiln_error err;
    kiln_error_clear(&err);
    if (kiln_tuning_table_load(path, &t, &err) != KILN_OK) fail_msg("table: %s", err.msg);
    return t;
}

/* The first run's table (one entry per shape class: the three shapes
 * differ) and its plot (SVG, a cell per variant and shape). */
static void check_first_table(const char *table_a, const char *plot)
{
    /* The table loads; one entry per shape class (the three shapes differ). */
    kiln_tuning_table *t = load_table(table_a);
    assert_int_equal(kiln_tuning_table_count(t), 3);
    for (size_t i = 0; i < 3; i++) {
        const kiln_tuning_entry *e = kiln_tuning_table_at(t, i);
        assert_true(!strncmp(e->kernel, "tswp_", 5));
        assert_string_equal(e->key.arch, "sm_90a");
        assert_string_equal(e->key.epilogue, "bias");
        assert_true(e->runnerup[0] != '\0');
        assert_true(e->runnerup_ms >= e->median_ms);
        assert_string_equal(e->launch.entry, e->kernel);
    }
    /* The decode shape (64 groups of 16) is in class t16.g128.n1024.k2048. */
    kiln_tuning_key k;
    memset(&k, 0, sizeof k);
    snprintf(k.arch, sizeof k.arch, "sm_90a");
    k.op = KILN_OP_FPROP;
    snprintf(k.epilogue, sizeof k.epilogue, "bias");
    assert_int_equal(kiln_shape_class_parse("t16.g128.n1024.k2048", &k.shape), 1);
    assert_non_null(kiln_tuning_lookup(t, &k));
    kiln_tuning_table_destroy(t);

    /* The plot is SVG with a cell per variant and shape. */
    char *svg = slurp(plot);
    assert_non_null(svg);
    assert_true(!strncmp(svg, "<?xml", 5));
    kiln_test_has(svg, "<svg xmlns=\"http://www.w3.org/2000/svg\"", "</svg>\n", ">skewed<",
                  ">tswp__m128_k16<");
    int rects = 0;
    for (char *p = svg; (p = strstr(p, "<rect x=")); p++) rects++;
    assert_true(rects >= 4 * 3 + 3); /* cells plus a winner outline per shape */
    free(svg);

}

/* Shipping: `kiln pack --table` carries the table, and every winner is
 * found in that bundle by the bundle id the table names. */
static void check_shipping(const char *table_a, const char *ta)
{
    char *out = NULL;
    int rc;
    kiln_tuning_table *t;
    char *bundle = path_in("a", "sweep.kbundle");
    char cmd[8192];
    /* A fake-timer table's winners mean nothing: refused unless asked for. */
    snprintf(cmd, sizeof cmd, "%s pack " SWEEP " --arch sm_90a -o '%s' --table '%s' --cache-dir '%s'",
             kiln_test_kiln_bin(), bundle, table_a, g_cache);
    rc = kiln_test_run(cmd, &out);
    if (rc != 2 || !strstr(out, "fake timer") || !strstr(out, "--allow-fake-timings"))
        fail_msg("kiln pack of a fake-timer table: exit %d:\n%s", rc, out);
    free(out);
    assert_false(exists(bundle));
    snprintf(cmd, sizeof cmd, "%s pack " SWEEP " --arch sm_90a -o '%s' --table '%s' --cache-dir '%s' "
             "--allow-fake-timings", kiln_test_kiln_bin(), bundle, table_a, g_cache);
    rc = kiln_test_run(cmd, &out);
    if (rc != 0) fail_msg("kiln pack failed (%d):\n%s", rc, out);
    free(out);
    /* bundle ls shows the table; bundle extract writes it, byte for byte. */
    snprintf(cmd, sizeof cmd, "%s bundle ls '%s'", kiln_test_kiln_bin(), bundle);
    assert_int_equal(kiln_test_run(cmd, &out), 0);
    if (!strstr(out, "tuning table (") || !strstr(out, "timer fake") || !strstr(out, "  kiln-tuning 1\n"))
        fail_msg("bundle ls does not show the table:\n%s", out);
    free(out);
    char *xdir = path_in("a", "extracted");
    snprintf(cmd, sizeof cmd, "%s bundle extract '%s' '%s'", kiln_test_kiln_bin(), bundle, xdir);
    assert_int_equal(kiln_test_run(cmd, &out), 0);
    free(out);
    char xtable[4200];
    snprintf(xtable, sizeof xtable, "%s/kiln-tuning.txt", xdir);
    char *xt = slurp(xtable);
    if (!xt) fail_msg("bundle extract wrote no %s", xtable);
    assert_string_equal(xt, ta);
    free(xt);
    free(xdir);
    kiln_bundle *b = NULL;
    kiln_error err;
    kiln_error_clear(&err);
    if (kiln_bundle_open(bundle, &b, &err) != KILN_OK) fail_msg("bundle: %s", err.msg);
    size_t len = 0;
    const char *text = kiln_bundle_table(b, &len);
    assert_non_null(text);
    t = NULL;
    if (kiln_tuning_table_parse(text, len, "bundle table", &t, &err) != KILN_OK)
        fail_msg("bundle table: %s", err.msg);
    assert_int_equal(kiln_tuning_table_count(t), 3);
    for (size_t i = 0; i < kiln_tuning_table_count(t); i++) {
        const kiln_tuning_entry *e = kiln_tuning_table_at(t, i);
        long at = kiln_bundle_find(b, e->bundle_id);
        if (at < 0) fail_msg("%s (%s) is not in the bundle", e->kernel, e->bundle_id);
        assert_string_equal(kiln_bundle_record_at(b, (size_t)at)->name, e->kernel);
        assert_string_equal(kiln_bundle_record_at(b, (size_t)at)->key, e->cache_key);
    }
    kiln_tuning_table_destroy(t);
    kiln_bundle_close(b);
    free(bundle);

}

static void test_flow_and_resume(void **state)
{
    (void)state;
    char *out = NULL;
    /* A whole run, the timer chosen by the environment. */
    char *table_a = path_in("a", "table.txt"), *plot = path_in("a", "plot.svg");
    int rc = tune(&out, "KILN_TUNE_TIMER=fake", SWEEP " --shapes " SHAPES " -o '%s' --plot '%s' -j 2",
                  table_a, plot);
    if (rc != 0) fail_msg("kiln tune failed (%d):\n%s", rc, out);
    kiln_test_has(out, "timer: fake", "4 variants: 4 timed, 0 failed to compile, 0 spill registers",
                  "2 sweep points dropped by validation", "tile.m must be 16, 32, 64 or 128",
                  "12 measurements: 12 now, 0 from the journal, 0 failed");
    free(out);
    char journal_a[4200];
    snprintf(journal_a, sizeof journal_a, "%s.journal", table_a);
    assert_int_equal(journal_records(journal_a), 12);

    check_first_table(table_a, plot);

    /* Killed after 5 measurements (SIGKILL, as a real kill): no table. */
    char *table_b = path_in("b", "table.txt"), *journal_b = path_in("b", "journal");
    rc = tune(&out, "KILN_TUNE_STOP_AFTER=5", SWEEP " --shapes " SHAPES " -o '%s' --journal '%s' "
                                              "--timer fake", table_b, journal_b);
    assert_int_not_equal(rc, 0);
    free(out);
    assert_int_equal(journal_records(journal_b), 5);
    assert_false(exists(table_b));

    /* Resumed: times only the other 7, and gives the same table. */
    rc = tune(&out, NULL, SWEEP " --shapes " SHAPES " -o '%s' --journal '%s' --timer fake", table_b,
              journal_b);
    if (rc != 0) fail_msg("resume failed (%d):\n%s", rc, out);
    kiln_test_has(out, "resuming from", "5 measurements done, 7 to go",
                  "12 measurements: 7 now, 5 from the journal");
    free(out);
    assert_int_equal(journal_records(journal_b), 12);
    assert_no_repeats(journal_b);
    char *ta = slurp(table_a), *tb = slurp(table_b);
    assert_non_null(tb);
    assert_string_equal(ta, tb);
    free(tb);

    /* Again: nothing left to time. */
    rc = tune(&out, NULL, SWEEP " --shapes " SHAPES " -o '%s' --journal '%s' --timer fake --json",
              table_b, journal_b);
    if (rc != 0) fail_msg("third run failed (%d):\n%s", rc, out);
    assert_int_equal(json_count(out, "measured"), 0);
    assert_int_equal(json_count(out, "from_journal"), 12);
    assert_int_equal(json_count(out, "table_entries"), 3);
    assert_int_equal(json_count(out, "dropped"), 2);
    /* Valid JSON: no NaN or Inf (no runner-up is null, not 0). */
    assert_null(strstr(out, "nan"));
    assert_null(strstr(out, "inf"));
    free(out);

    /* A torn last line (a kill in mid-write) is cut off, not misread. */
    FILE *f = fopen(journal_b, "a");
    assert_non_null(f);
    fputs("0123456789abcdef\tdecode:64:16", f);
    fclose(f);
    rc = tune(&out, NULL, SWEEP " --shapes " SHAPES " -o '%s' --journal '%s' --timer fake", table_b,
              journal_b);
    if (rc != 0) fail_msg("torn journal run failed (%d):\n%s", rc, out);
    kiln_test_has(out, "torn last line", "0 now, 12 from the journal");
    free(out);
    assert_int_equal(journal_records(journal_b), 12);
    tb = slurp(table_b);
    assert_string_equal(ta, tb);
    free(tb);

    /* Several workers (fake devices): the same table. */
    char *table_c = path_in("c", "table.txt");
    rc = tune(&out, "KILN_TUNE_FAKE_DEVICES=3", SWEEP " --shapes " SHAPES " -o '%s' --timer fake",
              table_c);
    if (rc != 0) fail_msg("3 workers failed (%d):\n%s", rc, out);
    assert_non_null(strstr(out, "timing on 3 devices, one worker each"));
    free(out);
    char *tc = slurp(table_c);
    assert_non_null(tc);
    assert_string_equal(ta, tc);
    free(tc);

    check_shipping(table_a, ta);

    free(ta);
    free(table_a);
    free(plot);
    free(table_b);
    free(journal_b);
    free(table_c);
}

static void test_fates(void **state)
{
    (void)state;
    char *out = NULL;
    char *table = path_in("fates", "table.txt");
    int rc = tune(&out, NULL, FATES " --shapes " SHAPES " -o '%s' --timer fake --template-dir "
                              FATE_TEMPLATES, table);
    if (rc != 0) fail_msg("kiln tune failed (%d):\n%s", rc, out);
    kiln_test_has(out, "6 variants: 2 timed, 1 failed to compile, 1 spill registers, "
                  "2 with serialized wgmma, 0 for another arch",
                  "3 sweep points dropped", "not timed: fate__m32_n32 (sm_90a): failed to compile",
                  "not timed: fate__m128_n32 (sm_90a): spills (",
                  "not timed: fate__m32_n16 (sm_90a): ptxas serialized its wgmma pipeline (C75");
    free(out);
    kiln_tuning_table *t = load_table(table);
    assert_int_equal(kiln_tuning_table_count(t), 3);
    for (size_t i = 0; i < kiln_tuning_table_count(t); i++) {
        const kiln_tuning_entry *e = kiln_tuning_table_at(t, i);
        if (strcmp(e->kernel, "fate__m32_n64") && strcmp(e->kernel, "fate__m128_n64"))
            fail_msg("a variant that was not timed won: %s", e->kernel);
    }
    kiln_tuning_table_destroy(t);

    /* A variant giving wrong results is marked, journaled, never chosen. */
    char *table2 = path_in("fates2", "table.txt");
    rc = tune(&out, "KILN_TUNE_FAKE_BAD=m128_n64", FATES " --shapes " SHAPES " -o '%s' --timer fake "
              "--template-dir " FATE_TEMPLATES, table2);
    if (rc != 0) fail_msg("kiln tune failed (%d):\n%s", rc, out);
    kiln_test_has(out, "failed: fate__m128_n64 on decode: wrong result",
                  "6 measurements: 6 now, 0 from the journal, 3 failed");
    free(out);
    t = load_table(table2);
    assert_int_equal(kiln_tuning_table_count(t), 3);
    for (size_t i = 0; i < 3; i++) {
        const kiln_tuning_entry *e = kiln_tuning_table_at(t, i);
        assert_string_equal(e->kernel, "fate__m32_n64");
        assert_string_equal(e->runnerup, ""); /* the only correct one */
    }
    kiln_tuning_table_destroy(t);
    /* Resumed, the failure is remembered rather than re-timed. */
    rc = tune(&out, NULL, FATES " --shapes " SHAPES " -o '%s' --timer fake --template-dir "
              FATE_TEMPLATES, table2);
    assert_int_equal(rc, 0);
    assert_non_null(strstr(out, "0 now, 6 from the journal, 3 failed"));
    free(out);
    free(table);
    free(table2);
}

/* ---- the plot and the CSV ---------------------------------------------- */

/* The value of attribute name in the element at el (up to its '>'), or "". */
static void attr(const char *el, const char *name, char *out, size_t size)
{
    char pat[64];
    snprintf(pat, sizeof pat, " %s=\"", name);
    const char *end = strchr(el, '>');
    const char *p = strstr(el, pat);
    out[0] = '\0';
    if (!p || (end && p > end)) return;
    p += strlen(pat);
    const char *q = strchr(p, '"');
    snprintf(out, size, "%.*s", (int)(q ? q - p : 0), p);
}

typedef struct box {
    double x0, y0, x1, y1;
    char text[128];
} box;

/* The boxes of every <text> of svg, sized as the plot sizes them (monospace,
 * a glyph 0.62 em wide; ascent 0.8 em, descent 0.2 em). */
static size_t text_boxes(const char *svg, box *boxes, size_t max)
{
    size_t n = 0;
    for (const char *p = strstr(svg, "<text"); p && n < max; p = strstr(p + 1, "<text")) {
        char v[64];
        double px = 11;
        attr(p, "font-size", v, sizeof v);
        if (v[0]) px = atof(v);
        attr(p, "x", v, sizeof v);
        double x = atof(v);
        attr(p, "y", v, sizeof v);
        double y = atof(v);
        attr(p, "text-anchor", v, sizeof v);
        const char *t = strchr(p, '>') + 1, *e = strstr(t, "</text>");
        size_t glyphs = 0;
        for (const char *c = t; c < e; c++) {
            if (*c == '&') c = strchr(c, ';'); /* an entity is one glyph */
            else if ((*c & 0xc0) == 0x80) continue;
            glyphs++;
        }
        double w = 0.62 * px * (double)glyphs;
        box *b = &boxes[n++];
        b->x0 = !strcmp(v, "middle") ? x - w / 2 : !strcmp(v, "end") ? x - w : x;
        b->x1 = b->x0 + w;
        b->y0 = y - 0.8 * px;
        b->y1 = y + 0.2 * px;
        snprintf(b->text, sizeof b->text, "%.*s", (int)(e - t), t);
    }
    return n;
}

static void assert_no_overlap(const char *svg)
{
    static box boxes[4096];
    size_t n = text_boxes(svg, boxes, 4096);
    char w[32];
    attr(strstr(svg, "<svg"), "width", w, sizeof w);
    double width = atof(w);
    assert_true(n > 10);
    for (size_t i = 0; i < n; i++) {
        if (boxes[i].x0 < 0 || boxes[i].x1 > width)
            fail_msg("'%s' runs past the plot (%.0f..%.0f of %.0f)", boxes[i].text, boxes[i].x0,
                     boxes[i].x1, width);
        for (size_t k = i + 1; k < n; k++)
            if (boxes[i].x0 < boxes[k].x1 && boxes[k].x0 < boxes[i].x1 &&
                boxes[i].y0 < boxes[k].y1 && boxes[k].y0 < boxes[i].y1)
                fail_msg("labels overlap: '%s' and '%s'", boxes[i].text, boxes[k].text);
    }
}

/* fprop and dgrad sweeps on the same shapes: each column has two tuning
 * keys, and the plot marks the table's winner of each, never one winner
 * per column across ops. */
static void test_plot_and_csv(void **state)
{
    (void)state;
    char *table = path_in("plot", "table.txt"), *plot = path_in("plot", "plot.svg"), *out;
    int rc = tune(&out, NULL, SWEEP " " DGRAD " --shapes " SHAPES " -o '%s' --plot '%s' --timer fake",
                  table, plot);
    if (rc != 0) fail_msg("kiln tune failed (%d):\n%s", rc, out);
    free(out);
    char *svg = slurp(plot);
    assert_non_null(svg);
    kiln_tuning_table *t = load_table(table);
    assert_int_equal(kiln_tuning_table_count(t), 6);
    size_t marks = 0;
    for (const char *p = strstr(svg, "class=\"winner\""); p; p = strstr(p + 1, "class=\"winner\"")) {
        char kernel[128], key[256], shape[64];
        attr(p - 6, "data-kernel", kernel, sizeof kernel);
        attr(p - 6, "data-key", key, sizeof key);
        attr(p - 6, "data-shape", shape, sizeof shape);
        const kiln_tuning_entry *e = NULL;
        for (size_t i = 0; i < kiln_tuning_table_count(t) && !e; i++) {
            kiln_strbuf k;
            kiln_strbuf_init(&k);
            kiln_tuning_key_format(&kiln_tuning_table_at(t, i)->key, &k);
            if (!strcmp(k.data, key)) e = kiln_tuning_table_at(t, i);
            kiln_strbuf_free(&k);
        }
        if (!e) fail_msg("winner %s on %s: key '%s' is not in the table", kernel, shape, key);
        if (strcmp(e->kernel, kernel))
            fail_msg("%s marked the winner of '%s' on %s; the table says %s", kernel, key, shape,
                     e->kernel);
        /* The ops agree: a dgrad kernel never wins an fprop key. */
        assert_int_equal(!strncmp(kernel, "tdg", 3), strstr(key, " dgrad ") != NULL);
        marks++;
    }
    assert_int_equal(marks, 6); /* 3 shapes x 2 keys, one shape per class */
    /* Every sweep named; a colour scale; labels apart. */
    kiln_test_has(svg, "sweep.yaml", "dgrad.yaml", "colour: TFLOP/s as a fraction", ">100%</text>");
    assert_no_overlap(svg);
    free(svg);
    kiln_tuning_table_destroy(t);

    /* --csv: a header and one line per variant and shape (4 + 4 variants, 3
     * shapes), the winners flagged as in the plot. */
    rc = tune(&out, NULL, SWEEP " " DGRAD " --shapes " SHAPES " -o '%s' --timer fake --csv", table);
    if (rc != 0) fail_msg("kiln tune --csv failed (%d):\n%s", rc, out);
    assert_true(!strncmp(out, "variant,arch,op,epilogue,shape,", 31));
    size_t lines = 0, winners = 0;
    for (char *line = out; *line;) {
        char *nl = strchr(line, '\n');
        assert_non_null(nl);
        *nl = '\0';
        if (lines++) {
            int field = 0;
            char *f = line;
            for (; field < 16 && f; field++) f = strchr(f, ',') ? strchr(f, ',') + 1 : NULL;
            assert_non_null(f);
            winners += f[0] == '1';
        }
        line = nl + 1;
    }
    assert_int_equal(lines, 1 + 8 * 3);
    assert_int_equal(winners, 6);
    free(out);
    assert_int_equal(tune(&out, NULL, SWEEP " --shapes " SHAPES " --timer fake --csv --json"), 2);
    free(out);
    free(table);
    free(plot);
}

static void test_bad_input(void **state)
{
    (void)state;
    char *out = NULL;
    char *table = path_in("bad", "table.txt");
    char *shapes = path_in("bad", "shapes.tsv");

    assert_int_equal(tune(&out, NULL, SWEEP " -o '%s' --timer fake", table), 2);
    assert_non_null(strstr(out, "--shapes FILE is required"));
    free(out);
    assert_int_equal(tune(&out, NULL, "--shapes " SHAPES " -o '%s' --timer fake", table), 2);
    assert_non_null(strstr(out, "name at least one sweep spec"));
    free(out);
    assert_int_equal(tune(&out, NULL, SWEEP " --shapes " SHAPES " -o '%s' --timer slow", table), 2);
    assert_non_null(strstr(out, "--timer takes fake or gpu (got 'slow')"));
    free(out);
    assert_int_equal(tune(&out, NULL, SWEEP " --shapes " SHAPES " --plot"), 2);
    assert_non_null(strstr(out, "--plot needs a value (got the option '--cache-dir')"));
    free(out);
    char cmd[4096];
    snprintf(cmd, sizeof cmd, "%s tune " SWEEP " --timer fake --shapes", kiln_test_kiln_bin());
    assert_int_equal(kiln_test_run(cmd, &out), 2);
    assert_non_null(strstr(out, "--shapes needs a value\n"));
    free(out);
    assert_int_equal(tune(&out, NULL, "--help"), 0);
    assert_non_null(strstr(out, "usage: kiln tune"));
    free(out);

    struct { const char *text; const char *what; } bad[] = {
        {"# nothing\n\n", "shapes.tsv:2: no shapes"},
        {"a 8 16 4096 4096\n", "shapes.tsv:1: expected 6 fields"},
        {"a 8 16 4096 4096 uniform extra\n", "shapes.tsv:1: expected 6 fields"},
        {"ok 8 16 4096 4096 uniform\nb 0 16 4096 4096 uniform\n", "shapes.tsv:2: b: groups '0'"},
        {"b 8 16 4100 4096 uniform\n", "shapes.tsv:1: b: K '4100' must be a multiple of 8"},
        {"b 8 16 4096 -8 uniform\n", "shapes.tsv:1: b: N '-8'"},
        {"b 8 x 4096 4096 uniform\n", "shapes.tsv:1: b: tokens_per_group 'x'"},
        {"b 8 16 4096 4096 zipf\n", "shapes.tsv:1: b: sizes 'zipf' must be uniform, skew, mod64_1, random or dirichlet"},
        {"b 8 1024 4096 4096 mod64_1\n", "shapes.tsv:1: b: sizes mod64_1 needs"},
        {"b 8 16 4096 4096 uniform\n# c\nb 8 16 4096 4096 skew\n", "shapes.tsv:3: shape 'b' is named twice (first on line 1)"},
        {"b/c 8 16 4096 4096 uniform\n", "shapes.tsv:1: bad shape name 'b/c'"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        kiln_test_write_file(shapes, bad[i].text);
        int rc = tune(&out, NULL, SWEEP " --shapes '%s' -o '%s' --timer fake", shapes, table);
        if (rc != 2 || !strstr(out, bad[i].what))
            fail_msg("shapes %zu: rc %d, want 2 and '%s':\n%s", i, rc, bad[i].what, out);
        free(out);
        assert_false(exists(table));
    }

    /* A file that is not a journal is not overwritten. */
    char *journal = path_in("bad", "journal");
    kiln_test_write_file(journal, "precious data\n");
    assert_int_equal(tune(&out, NULL, SWEEP " --shapes " SHAPES " -o '%s' --journal '%s' --timer fake",
                          table, journal), 2);
    assert_non_null(strstr(out, "not a kiln tune journal"));
    free(out);
    char *j = slurp(journal);
    assert_string_equal(j, "precious data\n");
    free(j);
    assert_false(exists(table));

    /* A bad sweep spec: its one-line error, nothing written. */
    char *spec = path_in("bad", "bad.yaml");
    kiln_test_write_file(spec, "kernel: k\nop: fprop\ntypes: {a: bf16}\nsweep:\n  stages: []\n");
    assert_int_equal(tune(&out, NULL, "'%s' --shapes " SHAPES " -o '%s' --timer fake", spec, table), 2);
    assert_non_null(strstr(out, "bad.yaml:5:"));
    free(out);
    assert_false(exists(table));

    /* The GPU timer where there is no GPU (this machine), or a real run. */
    char *gpu_journal = path_in("bad", "gpu.journal");
    int rc = tune(&out, "KILN_TUNE_RUNS=3", SWEEP " --shapes " SHAPES " -o '%s' --journal '%s'",
                  table, gpu_journal);
    if (rc != 0 || !strstr(out, "timer: gpu:")) {
        if (rc != 1 || !strstr(out, "no GPU to time on") || !strstr(out, "--timer fake"))
            fail_msg("gpu timer: rc %d:\n%s", rc, out);
        assert_false(exists(table));
    } else {
        /* A GPU: the real timer ran, checked every variant against cuBLASLt
         * and wrote a table for the three shape classes. */
        kiln_test_has(out, "4 variants: 4 timed",
                      "12 measurements: 12 now, 0 from the journal, 0 failed");
        kiln_tuning_table *t = load_table(table);
        assert_int_equal(kiln_tuning_table_count(t), 3);
        kiln_tuning_table_destroy(t);
    }
    free(out);
    free(gpu_journal);
    free(spec);
    free(journal);
    free(table);
    free(shapes);
}

/* --hold: refused with a clear message where it cannot apply or its value is
 * bad (nothing written); on the GPU timer the timer's id carries it, into
 * the table's header, so that a journal of bursts is not reused by a held
 * run; where there is no GPU (this machine) the timer says so. */
static void test_hold(void **state)
{
    (void)state;
    char *table = path_in("hold", "t.txt"), *journal = path_in("hold", "t.journal"), *out = NULL;
    struct { const char *args, *want; } bad[] = {
        {"--timer fake --hold 1", "--hold needs the gpu timer (the fake timer"},
        {"--timer gpu --hold 0", "--hold takes seconds, more than 0 and at most 60 (got '0')"},
        {"--timer gpu --hold -1", "--hold needs a value (got the option '-1')"},
        {"--timer gpu --hold 61", "(got '61')"},
        {"--timer gpu --hold 1s", "(got '1s')"},
        {"--timer gpu --hold nan", "(got 'nan')"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        int rc = tune(&out, NULL, SWEEP " --shapes " SHAPES " -o '%s' --journal '%s' %s", table,
                      journal, bad[i].args);
        if (rc != 2 || !strstr(out, bad[i].want))
            fail_msg("%s: rc %d, want 2 and '%s':\n%s", bad[i].args, rc, bad[i].want, out);
        free(out);
        assert_false(exists(table));
        assert_false(exists(journal));
    }
    int rc = tune(&out, "KILN_TUNE_RUNS=3 KILN_TUNE_WARMUP=1",
                  SWEEP " --shapes " SHAPES " -o '%s' --journal '%s' --timer gpu --hold 0.05",
                  table, journal);
    if (rc != 0 || !strstr(out, "timer: gpu:")) {
        if (rc != 1 || !strstr(out, "no GPU to time on")) fail_msg("gpu timer: rc %d:\n%s", rc, out);
        assert_false(exists(table));
    } else {
        assert_non_null(strstr(out, "@held0.05s on GPU"));
        char *t = slurp(table);
        assert_non_null(strstr(t, "; timer gpu:"));
        assert_non_null(strstr(t, "@held0.05s\n"));
        free(t);
    }
    free(out);
    free(journal);
    free(table);
}

/* --kernel: only the named points of a sweep are built, timed and tabled,
 * and the summary counts the rest; a name the sweeps do not give (a point
 * validation dropped, a typo) or an empty one is bad input, nothing
 * written. */
static void test_kernel_select(void **state)
{
    (void)state;
    char *table = path_in("select", "t.txt"), *journal = path_in("select", "t.journal");
    char *out = NULL;
    struct { const char *list, *want; } bad[] = {
        {"tswp__m32_k16,nope", "--kernel: no kernel of the specs is named 'nope' (they give 4,"},
        {"tswp__m256_k8", "no kernel of the specs is named 'tswp__m256_k8'"},
        {"tswp__m32_k16,,tswp__m128_k16", "an empty name in the list"},
        {"tswp__m32_k16,", "an empty name in the list"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        int rc = tune(&out, NULL, SWEEP " --shapes " SHAPES " -o '%s' --journal '%s' --timer fake "
                      "--kernel '%s'", table, journal, bad[i].list);
        if (rc != 2 || !strstr(out, bad[i].want))
            fail_msg("--kernel %s: rc %d, want 2 and '%s':\n%s", bad[i].list, rc, bad[i].want, out);
        free(out);
        assert_false(exists(table));
        assert_false(exists(journal));
    }
    int rc = tune(&out, NULL, SWEEP " --shapes " SHAPES " -o '%s' --journal '%s' --timer fake "
                  "--kernel tswp__m128_k8,tswp__m32_k16", table, journal);
    if (rc != 0) fail_msg("--kernel: rc %d:\n%s", rc, out);
    assert_non_null(strstr(out, "2 variants: 2 timed"));
    assert_non_null(strstr(out, "2 sweep points dropped by validation; 2 left out by --kernel\n"));
    assert_null(strstr(out, "tswp__m128_k16"));
    assert_null(strstr(out, "tswp__m32_k8 "));
    free(out);
    assert_int_equal(journal_records(journal), 6); /* 2 kernels x 3 shapes */
    kiln_tuning_table *t = load_table(table);
    assert_int_equal(kiln_tuning_table_count(t), 3);
    for (size_t i = 0; i < kiln_tuning_table_count(t); i++) {
        const kiln_tuning_entry *e = kiln_tuning_table_at(t, i);
        if (strcmp(e->kernel, "tswp__m128_k8") && strcmp(e->kernel, "tswp__m32_k16"))
            fail_msg("entry %zu names %s, which --kernel left out", i, e->kernel);
    }
    kiln_tuning_table_destroy(t);
    rc = tune(&out, NULL, SWEEP " --shapes " SHAPES " -o '%s' --journal '%s' --timer fake "
              "--kernel tswp__m32_k16 --json", table, journal);
    if (rc != 0) fail_msg("--kernel --json: rc %d:\n%s", rc, out);
    assert_int_equal(json_count(out, "variants"), 1);
    assert_int_equal(json_count(out, "unselected"), 3);
    free(out);
    free(journal);
    free(table);
}

/* The sweeps over FP8_SHAPES on the GPU timer: where there is no GPU (this
 * machine) it must say so; on a GPU every kernel is checked against the
 * timer's reference and none may be wrong (`variants` and `measurements`:
 * the summary lines it must print), and the table holds `entries` keys. */
static void gpu_timer_run(const char *sweeps, const char *dir, const char *variants,
                          const char *measurements, size_t entries)
{
    char *gpu_table = path_in(dir, "gpu.txt"), *out = NULL;
    int rc = tune(&out, "KILN_TUNE_RUNS=3 KILN_TUNE_WARMUP=1",
                  "%s --shapes " FP8_SHAPES " -o '%s' --timer gpu", sweeps, gpu_table);
    if (rc != 0 || !strstr(out, "timer: gpu:")) {
        if (rc != 1 || !strstr(out, "no GPU to time on"))
            fail_msg("%s on the gpu timer: rc %d:\n%s", dir, rc, out);
    } else {
        kiln_test_has(out, variants, measurements);
        kiln_tuning_table *t = load_table(gpu_table);
        assert_int_equal(kiln_tuning_table_count(t), entries);
        kiln_tuning_table_destroy(t);
    }
    free(out);
    free(gpu_table);
}

/* FP8_SHAPES's two classes as calls make them. */
static const struct {
    int groups;
    int64_t tokens, k, n;
} k_sweep_shapes[] = {{8, 200, 400, 320}, {32, 64, 1024, 512}};

/* `kiln tune SWEEPS --shapes FP8_SHAPES -o TABLE --timer fake`: the output
 * holds each string after `table`; returns the table, loaded back. */
#define fake_sweep(sweeps, table, ...)                                                             \
    fake_sweep_has((sweeps), (table), (const char *const[]){__VA_ARGS__, NULL})
static kiln_tuning_table *fake_sweep_has(const char *sweeps, const char *table,
                                         const char *const *needles)
{
    char *out = NULL;
    int rc = tune(&out, NULL, "%s --shapes " FP8_SHAPES " -o '%s' --timer fake", sweeps, table);
    if (rc != 0) fail_msg("kiln tune %s failed (%d):\n%s", sweeps, rc, out);
    kiln_test_has_all(__FILE__, __LINE__, out, needles);
    free(out);
    return load_table(table);
}

/* The entry of t that serves the call p (NULL: none); its key in *k. */
static const kiln_tuning_entry *lookup_call(const kiln_tuning_table *t, const kiln_problem *p,
                                            kiln_tuning_key *k)
{
    kiln_tuning_key_from_problem(p, "sm_90a", k);
    return kiln_tuning_lookup(t, k);
}

/* An fp8 call as a user makes it (kiln.h, kiln_fp8; tests/gpu/test_gpu_fp8.c):
 * e4m3 inputs, the recipe and its scales, dgrad's transposed weights. */
static void fp8_call(kiln_problem *p, kiln_op op, kiln_fp8_recipe r, int promote, int groups,
                     int64_t tokens, int64_t n, int64_t k)
{
    static float dummy[16];
    memset(p, 0, sizeof *p);
    p->op = op;
    p->a_type = p->b_type = KILN_DTYPE_E4M3;
    p->out_type = KILN_DTYPE_BF16;
    p->epilogue.alpha = 1.0f;
    p->groups = groups;
    p->capacity = groups * tokens;
    p->n = n;
    p->k = k;
    p->d_a = p->d_out = dummy;
    p->fp8.recipe = r;
    p->fp8.promote = promote;
    p->fp8.d_scale_a = p->fp8.d_scale_b = dummy;
    if (op == KILN_OP_DGRAD) p->fp8.d_bt = dummy;
    else p->d_b = dummy;
}

/* The fp8 sweeps (specs/sweeps, {fprop,dgrad}_sm90_e4m3_{row,block}): every point compiles and is
 * timed on its own recipe, and the table's keys are exactly those of the
 * fp8 calls users make, one per (op, recipe, class): a row-wise call finds
 * a row-wise kernel, a block-scaled call a block one; a per-tensor or a
 * promoted row-wise call (not tuned here) finds none.  With a GPU, the real
 * timer checks every sweep kernel against the host fp8 reference on sizes
 * off every tile. */
static void test_fp8_sweeps(void **state)
{
    (void)state;
    char *table = path_in("fp8", "table.txt"), *out = NULL;
    /* 22 row-wise and 20 block-scaled kernels a op (specs/sweeps), 2 shapes */
    kiln_tuning_table *t = fake_sweep(
        FP8_SWEEPS, table, "84 variants: 84 timed, 0 failed to compile, 0 spill registers",
        "168 measurements: 168 now, 0 from the journal, 0 failed",
        "sm_90a fprop e4m3 e4m3 bf16 fp8_recipe=row t256.g8.n1024.k1024",
        "sm_90a dgrad e4m3 e4m3 bf16 fp8_recipe=block+fp8_accumulate t64.g32.n1024.k1024");
    assert_int_equal(kiln_tuning_table_count(t), 8); /* 2 ops x 2 recipes x 2 classes */
    for (int op = KILN_OP_FPROP; op <= KILN_OP_DGRAD; op++)
        for (int s = 0; s < 2; s++)
            for (int r = KILN_FP8_TENSOR; r <= KILN_FP8_BLOCK; r++)
                for (int promote = 0; promote < 2; promote++) {
                    kiln_problem p;
                    fp8_call(&p, (kiln_op)op, (kiln_fp8_recipe)r, promote,
                             k_sweep_shapes[s].groups, k_sweep_shapes[s].tokens,
                             k_sweep_shapes[s].n, k_sweep_shapes[s].k);
                    kiln_tuning_key k;
                    const kiln_tuning_entry *e = lookup_call(t, &p, &k);
                    int tuned = r == KILN_FP8_BLOCK || (r == KILN_FP8_ROW && !promote);
                    if (!tuned) {
                        if (e) fail_msg("recipe %d promote %d: entry %s", r, promote, e->kernel);
                        continue;
                    }
                    if (!e) fail_msg("%s recipe %d shape %d: no entry for '%s'",
                                     kiln_op_name((kiln_op)op), r, s, k.epilogue);
                    char prefix[64];
                    snprintf(prefix, sizeof prefix, "%s_sm90_e4m3_%s__", kiln_op_name((kiln_op)op),
                             r == KILN_FP8_ROW ? "row" : "block");
                    if (strncmp(e->kernel, prefix, strlen(prefix))) fail_msg("%s", e->kernel);
                    assert_int_equal(e->kdesc.op, op);
                    assert_int_equal(e->kdesc.fp8_recipe, r);
                    assert_int_equal(e->kdesc.a_type, KILN_DTYPE_E4M3);
                }
    kiln_tuning_table_destroy(t);

    /* The CSV names the recipe in each variant's signature, the types last. */
    int rc = tune(&out, NULL, FP8_SWEEPS " --shapes " FP8_SHAPES " -o '%s' --timer fake --csv", table);
    if (rc != 0) fail_msg("kiln tune --csv failed (%d):\n%s", rc, out);
    kiln_test_has(out, ",sm_90a,dgrad,fp8_recipe=row,odd,8,200,400,320,random,t256.g8.n1024.k1024,timed,",
                  ",sm_90a,fprop,fp8_recipe=block+fp8_accumulate,skewed,",
                  "from_journal,winner,note,a,b,out\n", ",0,,e4m3,e4m3,bf16\n");
    free(out);

    /* every kernel checked against the fp8 reference */
    gpu_timer_run(FP8_SWEEPS, "fp8", "84 variants: 84 timed",
                  "168 measurements: 168 now, 0 from the journal, 0 failed", 8);
    free(table);
}

/* A wgrad call as a user makes it: dense bf16 dW, or dW += ... into fp32,
 * with or without a bias gradient (db). */
static void wgrad_call(kiln_problem *p, int accumulate, int dbias, int groups, int64_t tokens,
                       int64_t n, int64_t k)
{
    static float dummy[16];
    memset(p, 0, sizeof *p);
    p->op = KILN_OP_WGRAD;
    p->a_type = p->b_type = KILN_DTYPE_BF16;
    p->out_type = accumulate ? KILN_DTYPE_F32 : KILN_DTYPE_BF16;
    p->accumulate = accumulate;
    p->groups = groups;
    p->capacity = groups * tokens;
    p->n = n;
    p->k = k;
    p->d_a = p->d_b = p->d_out = dummy;
    if (dbias) p->d_dbias = dummy;
}

/* The dbias sweeps (specs/sweeps/wgrad_sm90_{dbias,acc_dbias}.yaml) are
 * timed computing db: the table's keys are those of wgrad calls with a db
 * (`dbias`, `accumulate+dbias`), each naming a dbias kernel of its mode,
 * and the same calls without db find none of them.  With a GPU, the real
 * timer checks every point's dW against cuBLASLt (db is the GPU tests'). */
static void test_dbias_sweeps(void **state)
{
    (void)state;
    char *table = path_in("dbias", "table.txt");
    /* 14 overwrite and 8 accumulate points (specs/sweeps), 2 shapes */
    kiln_tuning_table *t = fake_sweep(
        DBIAS_SWEEPS, table, "22 variants: 22 timed, 0 failed to compile, 0 spill registers",
        "44 measurements: 44 now, 0 from the journal, 0 failed",
        "sm_90a wgrad bf16 bf16 bf16 dbias t256.g8.n1024.k1024",
        "sm_90a wgrad bf16 bf16 f32 accumulate+dbias t64.g32.n1024.k1024");
    assert_int_equal(kiln_tuning_table_count(t), 4); /* 2 modes x 2 classes */
    for (int s = 0; s < 2; s++)
        for (int acc = 0; acc < 2; acc++)
            for (int dbias = 0; dbias < 2; dbias++) {
                kiln_problem p;
                wgrad_call(&p, acc, dbias, k_sweep_shapes[s].groups, k_sweep_shapes[s].tokens,
                           k_sweep_shapes[s].n, k_sweep_shapes[s].k);
                kiln_tuning_key k;
                const kiln_tuning_entry *e = lookup_call(t, &p, &k);
                if (!dbias) {
                    if (e) fail_msg("acc %d without db: entry %s", acc, e->kernel);
                    continue;
                }
                if (!e) fail_msg("acc %d shape %d: no entry for '%s'", acc, s, k.epilogue);
                assert_int_equal(e->kdesc.op, KILN_OP_WGRAD);
                assert_int_equal(e->kdesc.dbias, 1);
                assert_int_equal(e->kdesc.accumulate, acc);
            }
    kiln_tuning_table_destroy(t);

    /* every kernel's dW checked against cuBLASLt */
    gpu_timer_run(DBIAS_SWEEPS, "dbias", "22 variants: 22 timed",
                  "44 measurements: 44 now, 0 from the journal, 0 failed", 4);
    free(table);
}

/* KILN_TUNE_ORDER=reverse times each shape's variants last first, and
 * changes nothing else; any value but forward or reverse is refused. */
static void test_order(void **state)
{
    (void)state;
    char *out = NULL;
    char *fwd = path_in("order", "forward.txt"), *rev = path_in("order", "reverse.txt");
    int rc = tune(&out, "KILN_TUNE_TIMER=fake", SWEEP " --shapes " SHAPES " -o '%s'", fwd);
    if (rc != 0) fail_msg("kiln tune failed (%d):\n%s", rc, out);
    free(out);
    rc = tune(&out, "KILN_TUNE_TIMER=fake KILN_TUNE_ORDER=reverse", SWEEP " --shapes " SHAPES
              " -o '%s'", rev);
    if (rc != 0) fail_msg("kiln tune (reverse) failed (%d):\n%s", rc, out);
    free(out);
    char jf[4200], jr[4200], a[16][160], b[16][160];
    snprintf(jf, sizeof jf, "%s.journal", fwd);
    snprintf(jr, sizeof jr, "%s.journal", rev);
    const int n = journal_order(jf, a, 16);
    assert_int_equal(n, 12); /* 4 variants on each of 3 shapes, one unit a shape */
    assert_int_equal(journal_order(jr, b, 16), n);
    for (int u = 0; u < n; u += 4)
        for (int i = 0; i < 4; i++)
            if (strcmp(a[u + i], b[u + 3 - i]))
                fail_msg("record %d: forward %s, reverse %s", u + i, a[u + i], b[u + 3 - i]);
    char *ta = slurp(fwd), *tb = slurp(rev);
    assert_non_null(ta);
    assert_non_null(tb);
    assert_string_equal(ta, tb);
    free(ta);
    free(tb);
    rc = tune(&out, "KILN_TUNE_TIMER=fake KILN_TUNE_ORDER=sideways", SWEEP " --shapes " SHAPES
              " -o '%s'", fwd);
    assert_int_equal(rc, 2);
    kiln_test_has(out, "KILN_TUNE_ORDER=sideways: expected forward or reverse");
    free(out);
    free(fwd);
    free(rev);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_flow_and_resume),
        cmocka_unit_test(test_fates),
        cmocka_unit_test(test_plot_and_csv),
        cmocka_unit_test(test_bad_input),
        cmocka_unit_test(test_hold),
        cmocka_unit_test(test_kernel_select),
        cmocka_unit_test(test_fp8_sweeps),
        cmocka_unit_test(test_dbias_sweeps),
        cmocka_unit_test(test_order),
    };
    kiln_test_filter();
    return cmocka_run_group_tests(tests, setup, teardown);
}
