/* SPDX-License-Identifier: Apache-2.0 */
/* strbuf.c — growable strings, and echoing text safely. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common.h"

void kiln_strbuf_init(kiln_strbuf *sb) { memset(sb, 0, sizeof *sb); }

void kiln_strbuf_free(kiln_strbuf *sb)
{
    free(sb->data);
    memset(sb, 0, sizeof *sb);
}

static int reserve(kiln_strbuf *sb, size_t extra)
{
    if (sb->oom) return 0;
    size_t need = sb->len + extra + 1;
    if (need <= sb->cap) return 1;
    size_t cap = sb->cap ? sb->cap : 256;
    while (cap < need) cap *= 2;
    char *p = realloc(sb->data, cap);
    if (!p) {
        sb->oom = 1;
        return 0;
    }
    sb->data = p;
    sb->cap = cap;
    return 1;
}

void kiln_strbuf_append(kiln_strbuf *sb, const char *s, size_t n)
{
    if (!reserve(sb, n)) return;
    memcpy(sb->data + sb->len, s, n);
    sb->len += n;
    sb->data[sb->len] = '\0';
}

void kiln_strbuf_puts(kiln_strbuf *sb, const char *s) { kiln_strbuf_append(sb, s, strlen(s)); }

void kiln_strbuf_vprintf(kiln_strbuf *sb, const char *fmt, va_list ap)
{
    va_list ap2;
    va_copy(ap2, ap);
    int n = vsnprintf(NULL, 0, fmt, ap2);
    va_end(ap2);
    if (n < 0 || !reserve(sb, (size_t)n)) return;
    vsnprintf(sb->data + sb->len, (size_t)n + 1, fmt, ap);
    sb->len += (size_t)n;
}

void kiln_strbuf_printf(kiln_strbuf *sb, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    kiln_strbuf_vprintf(sb, fmt, ap);
    va_end(ap);
}

char *kiln_strbuf_take(kiln_strbuf *sb)
{
    char *p = sb->data;
    if (!p) p = calloc(1, 1);
    memset(sb, 0, sizeof *sb);
    return p;
}

void *kiln_grow(void *items, size_t *cap, size_t n, size_t item_size, size_t first)
{
    if (n < *cap) return items;
    size_t want = *cap ? *cap * 2 : first;
    void *q = realloc(items, want * item_size);
    if (q) *cap = want;
    return q;
}

const char *kiln_printable(const char *s, char *out, size_t size)
{
    size_t n = 0;
    if (!size) return out;
    for (const unsigned char *p = (const unsigned char *)(s ? s : ""); *p; p++) {
        char e[8];
        if (*p == '\n') snprintf(e, sizeof e, "\\n");
        else if (*p == '\r') snprintf(e, sizeof e, "\\r");
        else if (*p == '\t') snprintf(e, sizeof e, "\\t");
        else if (*p == '\\') snprintf(e, sizeof e, "\\\\");
        else if (*p < 0x20 || *p >= 0x7f) snprintf(e, sizeof e, "\\x%02x", *p);
        else snprintf(e, sizeof e, "%c", *p);
        size_t l = strlen(e);
        if (n + l + 1 > size) break; /* never half an escape */
        memcpy(out + n, e, l);
        n += l;
    }
    out[n] = '\0';
    return out;
}
