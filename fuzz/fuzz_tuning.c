/* SPDX-License-Identifier: Apache-2.0 */
/* fuzz_tuning.c — the tuning-table parser.  Most inputs get their integrity
 * line rewritten to match (so mutations reach the line parser); one in
 * eight is parsed as is (so the check itself is fuzzed).  Invariants: a
 * refusal is one printable line "fuzz.tuning:LINE: ..."; an accepted table
 * formats to text that parses to a table formatting identically. */
#include <stdint.h>

#include "fuzz_util.h"
#include "tuning.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* Drops lines starting "integrity " and appends the right one. */
static char *reseal(const char *text, size_t len, size_t *out_len)
{
    kiln_strbuf sb;
    kiln_strbuf_init(&sb);
    size_t entries = 0;
    int first = 1;
    for (size_t i = 0; i < len;) {
        const char *nl = memchr(text + i, '\n', len - i);
        size_t n = nl ? (size_t)(nl - (text + i)) : len - i;
        const char *l = text + i;
        if (!(n >= 10 && !memcmp(l, "integrity ", 10))) {
            kiln_strbuf_append(&sb, l, n);
            kiln_strbuf_puts(&sb, "\n");
            size_t k = 0;
            while (k < n && (l[k] == ' ' || l[k] == '\t')) k++;
            if (!first && k < n && l[k] != '#' && !(k + 1 == n && l[k] == '\r')) entries++;
            first = 0;
        }
        i += n + 1;
    }
    /* Hashed as the parser hashes: each line without a trailing CR. */
    kiln_sha256 h;
    kiln_sha256_init(&h);
    for (size_t i = 0; i < sb.len;) {
        const char *nl = memchr(sb.data + i, '\n', sb.len - i);
        size_t n = (size_t)(nl - (sb.data + i));
        size_t m = n && sb.data[i + n - 1] == '\r' ? n - 1 : n;
        kiln_sha256_update(&h, sb.data + i, m);
        kiln_sha256_update(&h, "\n", 1);
        i += n + 1;
    }
    uint8_t d[32];
    char hex[65];
    kiln_sha256_final(&h, d);
    kiln_hex(d, 32, hex);
    kiln_strbuf_printf(&sb, "integrity entries=%zu sha256=%s\n", entries, hex);
    *out_len = sb.len;
    return kiln_strbuf_take(&sb);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    size_t len = size;
    char *text = NULL;
    if (size % 8 != 7) text = reseal((const char *)data, size, &len);
    const char *in = text ? text : (const char *)data;
    kiln_tuning_table *t = NULL;
    kiln_error err;
    kiln_error_clear(&err);
    if (kiln_tuning_table_parse(in, len, "fuzz.tuning", &t, &err) != KILN_OK) {
        fuzz_check_error(&err, "fuzz.tuning:");
        fuzz_check_printable(&err);
        if (t) FUZZ_FAIL("refused table returned");
        free(text);
        return 0;
    }
    kiln_strbuf a, b;
    kiln_strbuf_init(&a);
    kiln_strbuf_init(&b);
    kiln_tuning_table_format(t, NULL, &a);
    kiln_tuning_table *back = NULL;
    if (kiln_tuning_table_parse(a.data, a.len, "formatted", &back, &err) != KILN_OK)
        FUZZ_FAIL("formatted table does not parse: %s", err.msg);
    if (kiln_tuning_table_count(back) != kiln_tuning_table_count(t))
        FUZZ_FAIL("entry count changes on a round trip");
    kiln_tuning_table_format(back, NULL, &b);
    if (a.len != b.len || memcmp(a.data, b.data, a.len)) FUZZ_FAIL("table changes on a round trip");
    kiln_strbuf_free(&a);
    kiln_strbuf_free(&b);
    kiln_tuning_table_destroy(back);
    kiln_tuning_table_destroy(t);
    free(text);
    return 0;
}
