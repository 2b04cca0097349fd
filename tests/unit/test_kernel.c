/* SPDX-License-Identifier: Apache-2.0 */
/* test_kernel.c — the kernel model's knob table (kernel/knobs.c): every row
 * goes spec text -> description -> canonical text -> description and back
 * to the same text, and reaches Lua under its spec key with the spec's
 * spelling; launch fields round-trip through the text too. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "testutil.h"
#include "expand.h"
#include "knobs.h"

#define KNOB_TEMPLATES "tests/data/templates/knobs"

/* A value for row k other than kiln_desc_init's where the row has one.
 * The spec (yaml) and Lua spellings are the same text for every kind, so
 * the value is written once and copied. */
static void pick_value(const kiln_knob *k, char *yaml, size_t ysize, char *lua, size_t lsize)
{
    kiln_kernel_desc dflt;
    kiln_desc_init(&dflt);
    int n = 0;
    switch (k->kind) {
    case KILN_KNOB_INT:
        snprintf(yaml, ysize, "%d", kiln_knob_get(k, &dflt) == k->hi ? k->lo : k->hi);
        break;
    case KILN_KNOB_BOOL: snprintf(yaml, ysize, "true"); break;
    case KILN_KNOB_ENUM:
    case KILN_KNOB_STRING:
        while (k->choices[n].name) n++;
        snprintf(yaml, ysize, "%s", k->choices[n - 1].name);
        break;
    case KILN_KNOB_NAME: snprintf(yaml, ysize, "knob_name"); break;
    case KILN_KNOB_ARCHS: snprintf(yaml, ysize, "sm_80"); break;
    default: yaml[0] = '\0';
    }
    snprintf(lua, lsize, "%s", yaml);
}

/* A spec that sets row k to value and is otherwise valid in the language
 * (the blocks of its op, the keys a knob needs). */
static void spec_text(const kiln_knob *k, const char *value, char *out, size_t size)
{
    const char *key = k->key;
    int wgrad = !strncmp(key, "wgrad.", 6) || (!strcmp(key, "op") && !strcmp(value, "wgrad"));
    char types[96], epilogue[128] = "", block[128] = "", top[128] = "";
    snprintf(types, sizeof types, "{a: bf16%s}", wgrad ? ", out: f32" : "");
    if (!strcmp(key, "types.a"))
        snprintf(types, sizeof types, "{a: %s}", value);
    else if (!strncmp(key, "types.", 6))
        snprintf(types, sizeof types, "{a: bf16, %s: %s}", key + 6, value);
    if (!strcmp(key, "epilogue.scale_bias"))
        snprintf(epilogue, sizeof epilogue, "epilogue: {bias: per_group, scale: per_row, "
                                            "scale_bias: %s}\n", value);
    else if (!strncmp(key, "epilogue.", 9) || !strncmp(key, "tile.", 5) ||
             !strncmp(key, "cluster.", 8) || !strncmp(key, "fp8.", 4))
        snprintf(block, sizeof block, "%.*s: {%s: %s}\n", (int)(strchr(key, '.') - key), key,
                 strchr(key, '.') + 1, value);
    else if (!strncmp(key, "wgrad.", 6))
        snprintf(block, sizeof block, "wgrad: {%s%s: %s}\n",
                 strcmp(key, "wgrad.accumulate") ? "accumulate: true, " : "", key + 6, value);
    else if (!strchr(key, '.') && strcmp(key, "kernel") && strcmp(key, "op"))
        snprintf(top, sizeof top, "%s: %s\n", key, value);
    snprintf(out, size, "kernel: %s\nop: %s\ntypes: %s\n%s%s%s",
             !strcmp(key, "kernel") ? value : "k", !strcmp(key, "op") ? value : wgrad ? "wgrad" : "fprop",
             types, epilogue, block, top);
}

static void test_every_knob_round_trips(void **state)
{
    (void)state;
    kiln_expander *ex = NULL;
    kiln_error err;
    kiln_error_clear(&err);
    assert_int_equal(kiln_expander_create(KNOB_TEMPLATES, &ex, &err), KILN_OK);
    int rows = 0;
    for (const kiln_knob *k = kiln_knobs; k->key; k++) {
        if (!kiln_knob_has_value(k) && k->kind != KILN_KNOB_ARCHS) continue;
        rows++;
        char yaml[64], lua[64], text[512];
        pick_value(k, yaml, sizeof yaml, lua, sizeof lua);
        spec_text(k, yaml, text, sizeof text);

        /* spec text -> description */
        kiln_spec_list list;
        kiln_error_clear(&err);
        kiln_status st = kiln_spec_parse_with(text, strlen(text), "knob.yaml", ex, &list, &err);
        if (st != KILN_OK) print_error("%s: %s\n--\n%s", k->key, err.msg, text);
        assert_int_equal(st, KILN_OK);
        const kiln_kernel_desc *d = &list.items[0].desc;
        if (k->kind == KILN_KNOB_ARCHS) {
            assert_string_equal(d->archs[0], yaml);
        } else {
            char got[64];
            if (k->kind == KILN_KNOB_INT)
                snprintf(got, sizeof got, "%d", kiln_knob_get(k, d));
            else if (k->kind == KILN_KNOB_BOOL)
                snprintf(got, sizeof got, "%s", kiln_knob_get(k, d) ? "true" : "false");
            else
                snprintf(got, sizeof got, "%s", kiln_knob_spelling(k, d));
            if (strcmp(got, lua)) print_error("%s: stored %s, want %s\n", k->key, got, lua);
            assert_string_equal(got, lua);
        }

        /* description -> text -> description -> the same text */
        if (k->text) {
            kiln_strbuf t1, t2;
            kiln_strbuf_init(&t1);
            kiln_strbuf_init(&t2);
            kiln_desc_format(d, NULL, &t1);
            kiln_kernel_desc back;
            assert_int_equal(kiln_desc_parse(t1.data, &back, NULL, &err), 1);
            kiln_desc_format(&back, NULL, &t2);
            assert_string_equal(t1.data, t2.data);
            if (kiln_knob_get(k, &back) != kiln_knob_get(k, d) ||
                strcmp(kiln_knob_spelling(k, &back), kiln_knob_spelling(k, d)))
                fail_msg("%s does not survive the text %s", k->key, t1.data);
            char item[96];
            snprintf(item, sizeof item, " %s=", k->text);
            assert_true(!strncmp(t1.data, item + 1, strlen(item) - 1) || strstr(t1.data, item));
            kiln_strbuf_free(&t1);
            kiln_strbuf_free(&t2);
        }

        /* description -> Lua, under the spec key (the name as spec.name) */
        char *src = NULL;
        kiln_launch_desc launch;
        st = kiln_expand(ex, &list.items[0], d->archs[0], &src, &launch, &err);
        if (st != KILN_OK) print_error("%s: %s\n", k->key, err.msg);
        assert_int_equal(st, KILN_OK);
        char line[160];
        snprintf(line, sizeof line, "// %s=%s\n", k->kind == KILN_KNOB_NAME ? "name" : k->key, lua);
        if (!strstr(src, line)) print_error("%s: no '%s' in:\n%s\n", k->key, line, src);
        assert_non_null(strstr(src, line));
        free(src);
        kiln_spec_list_free(&list);
    }
    assert_true(rows >= 25);
    kiln_expander_destroy(ex);
}

/* Every launch field survives the text. */
static void test_launch_round_trips(void **state)
{
    (void)state;
    kiln_kernel_desc d, d2;
    kiln_launch_desc l, l2;
    kiln_desc_init(&d);
    snprintf(d.name, sizeof d.name, "k");
    memset(&l, 0, sizeof l);
    snprintf(l.entry, sizeof l.entry, "kiln_k");
    l.threads = 384;
    l.smem_bytes = 200000;
    l.persistent = 1;
    l.ctas_per_sm = 2;
    l.cluster_m = 2;
    l.cluster_n = 1;
    for (int i = 0; i < 3; i++) l.tmap[i] = (kiln_tmap_desc){1, 64 + i, 32 + i, 128, 0};
    l.tmap[2].chunks = 4;
    l.max_groups = 1024;
    l.scale_bias_switch = 1;
    l.preference = 2;
    kiln_strbuf t;
    kiln_strbuf_init(&t);
    kiln_desc_format(&d, &l, &t);
    assert_non_null(strstr(t.data, " max_groups=1024 scale_bias_switch=1 preference=2"));
    /* a map's chunks are written only when set, so every other kernel's
     * text (and the table entries naming it) stays as it was */
    assert_non_null(strstr(t.data, " tmap_a=1:64:32:128 tmap_b=1:65:33:128 tmap_d=1:66:34:128:4 "));
    kiln_error err;
    assert_int_equal(kiln_desc_parse(t.data, &d2, &l2, &err), 1);
    assert_memory_equal(&l, &l2, sizeof l);
    assert_string_equal(d2.name, "k");
    kiln_strbuf_free(&t);
    kiln_kernel_desc d3;
    kiln_launch_desc l3;
    assert_int_equal(kiln_desc_parse("tmap_d=1:64:16:128", &d3, &l3, &err), 1);
    assert_int_equal(l3.tmap[2].chunks, 0);
    assert_int_equal(kiln_desc_parse("tmap_d=1:64:16:128:0", &d3, &l3, &err), 0);
    assert_int_equal(kiln_desc_parse("tmap_d=1:64:16:128:2x", &d3, &l3, &err), 0);
    assert_int_equal(kiln_desc_parse("tmap_d=1:64:16:128:", &d3, &l3, &err), 0);
    /* Joined items take exactly their parts. */
    assert_int_equal(kiln_desc_parse("tile=1x2", &d2, NULL, &err), 0);
    assert_non_null(strstr(err.msg, "'tile'"));
    assert_int_equal(kiln_desc_parse("tile=1x2x3x4", &d2, NULL, &err), 0);
    assert_int_equal(kiln_desc_parse("row_scale=2", &d2, NULL, &err), 0);
    assert_int_equal(kiln_desc_parse("bias=sometimes", &d2, NULL, &err), 0);
    assert_int_equal(kiln_desc_parse("tile=64x32x16 row_scale=1", &d2, NULL, &err), 1);
    assert_int_equal(d2.tile_m, 64);
    assert_int_equal(d2.tile_k, 16);
    assert_int_equal(d2.epilogue.row_scale, 1);
    /* A knob written only when set (wgrad.rows): absent from the text of a
     * kernel without it, so the shipped texts need no change; "rows=1"
     * when set, and both read back. */
    for (int rows = 0; rows < 2; rows++) {
        kiln_desc_init(&d);
        d.rows = rows;
        kiln_strbuf_init(&t);
        kiln_desc_format(&d, NULL, &t);
        if (rows) assert_non_null(strstr(t.data, " split=1 rows=1 "));
        else assert_null(strstr(t.data, "rows="));
        assert_int_equal(kiln_desc_parse(t.data, &d2, NULL, &err), 1);
        assert_int_equal(d2.rows, rows);
        kiln_strbuf_free(&t);
    }
    /* An int knob written only when not 1 (k_cluster), likewise. */
    for (int kc = 1; kc <= 8; kc *= 8) {
        kiln_desc_init(&d);
        d.k_cluster = kc;
        kiln_strbuf_init(&t);
        kiln_desc_format(&d, NULL, &t);
        if (kc > 1) assert_non_null(strstr(t.data, " cluster=1x1 k_cluster=8 warpgroups="));
        else assert_null(strstr(t.data, "k_cluster="));
        assert_int_equal(kiln_desc_parse(t.data, &d2, NULL, &err), 1);
        assert_int_equal(d2.k_cluster, kc);
        kiln_strbuf_free(&t);
    }
    /* swap_ab, a bool knob written only when set, likewise: the texts of
     * the kernels shipped before it stay as they were. */
    for (int sw = 0; sw < 2; sw++) {
        kiln_desc_init(&d);
        d.swap_ab = sw;
        kiln_strbuf_init(&t);
        kiln_desc_format(&d, NULL, &t);
        if (sw) assert_non_null(strstr(t.data, " k_cluster=1 swap_ab=1 warpgroups=") ||
                                strstr(t.data, " cluster=1x1 swap_ab=1 warpgroups="));
        else assert_null(strstr(t.data, "swap_ab="));
        assert_int_equal(kiln_desc_parse(t.data, &d2, NULL, &err), 1);
        assert_int_equal(d2.swap_ab, sw);
        kiln_strbuf_free(&t);
    }
}

/* The fragments swept kernels are named by. */
static void test_fragments(void **state)
{
    (void)state;
    kiln_kernel_desc d;
    kiln_desc_init(&d);
    char buf[64];
    kiln_knob_fragment(kiln_knob_find("tile"), &d, buf, sizeof buf);
    assert_string_equal(buf, "m128_n128_k64");
    d.cluster_m = 2;
    kiln_knob_fragment(kiln_knob_find("cluster"), &d, buf, sizeof buf);
    assert_string_equal(buf, "c2x1");
    kiln_knob_fragment(kiln_knob_find("raster"), &d, buf, sizeof buf);
    assert_string_equal(buf, "rgroup");
    kiln_knob_fragment(kiln_knob_find("schedule"), &d, buf, sizeof buf);
    assert_string_equal(buf, "auto");
    d.epilogue.row_scale = 1;
    kiln_knob_fragment(kiln_knob_find("epilogue.scale"), &d, buf, sizeof buf);
    assert_string_equal(buf, "scale_per_row");
    kiln_knob_fragment(kiln_knob_find("stages"), &d, buf, sizeof buf);
    assert_string_equal(buf, "s4");
    d.rows = 1;
    kiln_knob_fragment(kiln_knob_find("wgrad.rows"), &d, buf, sizeof buf);
    assert_string_equal(buf, "rows1");
}

KILN_TEST_MAIN(
    cmocka_unit_test(test_every_knob_round_trips),
    cmocka_unit_test(test_launch_round_trips),
    cmocka_unit_test(test_fragments))
