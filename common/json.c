/* SPDX-License-Identifier: Apache-2.0 */
/*
 * json.c — the one JSON writer (json.h).
 */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "json.h"

void kiln_json_init(kiln_json *j, kiln_strbuf *out, int fold)
{
    memset(j, 0, sizeof *j);
    j->out = out;
    j->fold = fold;
}

/* Writes what goes before a value: a comma and the line break of its level. */
static void before_value(kiln_json *j)
{
    if (j->after_key) {
        j->after_key = 0;
        return;
    }
    if (j->depth == 0) {
        if (j->count[0]++) j->bad = 1; /* one document only */
        return;
    }
    int level = j->depth;
    if (j->count[level]++) kiln_strbuf_puts(j->out, ",");
    if (level <= j->fold) {
        kiln_strbuf_puts(j->out, "\n");
        for (int i = 0; i < level; i++) kiln_strbuf_puts(j->out, "  ");
    } else if (j->count[level] > 1) {
        kiln_strbuf_puts(j->out, " ");
    }
}

static void json_open(kiln_json *j, char o, char c)
{
    before_value(j);
    if (j->depth + 1 >= KILN_JSON_DEPTH) {
        j->bad = 1;
        return;
    }
    kiln_strbuf_append(j->out, &o, 1);
    j->depth++;
    j->count[j->depth] = 0;
    j->close[j->depth] = c;
}

void kiln_json_object(kiln_json *j) { json_open(j, '{', '}'); }
void kiln_json_array(kiln_json *j) { json_open(j, '[', ']'); }

void kiln_json_end(kiln_json *j)
{
    if (j->depth == 0 || j->after_key) {
        j->bad = 1;
        return;
    }
    int level = j->depth;
    if (level <= j->fold && j->count[level]) {
        kiln_strbuf_puts(j->out, "\n");
        for (int i = 1; i < level; i++) kiln_strbuf_puts(j->out, "  ");
    }
    kiln_strbuf_append(j->out, &j->close[level], 1);
    j->depth--;
    if (j->depth == 0) kiln_strbuf_puts(j->out, "\n");
}

static void quoted(kiln_strbuf *out, const char *s)
{
    kiln_strbuf_puts(out, "\"");
    for (const char *p = s ? s : ""; *p; p++) {
        unsigned char c = (unsigned char)*p;
        if (c == '"' || c == '\\') {
            char e[2] = {'\\', (char)c};
            kiln_strbuf_append(out, e, 2);
        } else if (c == '\n') {
            kiln_strbuf_puts(out, "\\n");
        } else if (c == '\t') {
            kiln_strbuf_puts(out, "\\t");
        } else if (c < 0x20 || c == 0x7f) {
            kiln_strbuf_printf(out, "\\u%04x", c);
        } else {
            kiln_strbuf_append(out, p, 1);
        }
    }
    kiln_strbuf_puts(out, "\"");
}

void kiln_json_key(kiln_json *j, const char *key)
{
    if (j->depth == 0 || j->close[j->depth] != '}' || j->after_key) {
        j->bad = 1;
        return;
    }
    before_value(j);
    quoted(j->out, key);
    kiln_strbuf_puts(j->out, ": ");
    j->after_key = 1;
}

void kiln_json_string(kiln_json *j, const char *s)
{
    before_value(j);
    quoted(j->out, s);
}

void kiln_json_number(kiln_json *j, double v)
{
    before_value(j);
    if (!isfinite(v)) kiln_strbuf_puts(j->out, "null");
    else kiln_strbuf_printf(j->out, "%.6g", v);
}

void kiln_json_int(kiln_json *j, long long v)
{
    before_value(j);
    kiln_strbuf_printf(j->out, "%lld", v);
}

void kiln_json_bool(kiln_json *j, int v)
{
    before_value(j);
    kiln_strbuf_puts(j->out, v ? "true" : "false");
}

void kiln_json_null(kiln_json *j)
{
    before_value(j);
    kiln_strbuf_puts(j->out, "null");
}

void kiln_json_kstring(kiln_json *j, const char *key, const char *s)
{
    kiln_json_key(j, key);
    kiln_json_string(j, s);
}

void kiln_json_knumber(kiln_json *j, const char *key, double v)
{
    kiln_json_key(j, key);
    kiln_json_number(j, v);
}

void kiln_json_kint(kiln_json *j, const char *key, long long v)
{
    kiln_json_key(j, key);
    kiln_json_int(j, v);
}

void kiln_json_kbool(kiln_json *j, const char *key, int v)
{
    kiln_json_key(j, key);
    kiln_json_bool(j, v);
}
