/* SPDX-License-Identifier: Apache-2.0 */
/* fuzz_cache_entry.c — the cache-entry decoder, with the trailing checksum
 * fixed up so mutations reach the fields.  Invariants: a refusal is one
 * line; an accepted entry re-encodes to bytes that decode to the same
 * entry and re-encode identically. */
#include <stdint.h>

#include "cache.h"
#include "fuzz_util.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void same_entry(const kiln_cache_entry *a, const kiln_cache_entry *b)
{
    if (strcmp(a->key, b->key) || strcmp(a->arch, b->arch) ||
        strcmp(a->source_sha256, b->source_sha256) || a->cubin_size != b->cubin_size ||
        (a->cubin_size && memcmp(a->cubin, b->cubin, a->cubin_size)) ||
        strcmp(a->desc ? a->desc : "", b->desc ? b->desc : ""))
        FUZZ_FAIL("entry changes on a round trip (key %s)", a->key);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    unsigned char *buf = malloc(size ? size : 1);
    if (!buf) return 0;
    memcpy(buf, data, size);
    fuzz_fix_trailer(buf, size);
    kiln_cache_entry e;
    kiln_error err;
    kiln_error_clear(&err);
    if (kiln_cache_entry_decode(buf, size, &e, &err) != KILN_OK) {
        if (!err.msg[0] || strchr(err.msg, '\n')) FUZZ_FAIL("bad refusal: '%s'", err.msg);
        kiln_cache_entry_free(&e);
        free(buf);
        return 0;
    }
    kiln_strbuf a, b;
    kiln_strbuf_init(&a);
    kiln_strbuf_init(&b);
    if (kiln_cache_entry_encode(&e, &a) != KILN_OK) FUZZ_FAIL("accepted entry does not encode");
    kiln_cache_entry e2;
    if (kiln_cache_entry_decode(a.data, a.len, &e2, &err) != KILN_OK)
        FUZZ_FAIL("re-encoded entry refused: %s", err.msg);
    same_entry(&e, &e2);
    if (kiln_cache_entry_encode(&e2, &b) != KILN_OK || a.len != b.len ||
        memcmp(a.data, b.data, a.len))
        FUZZ_FAIL("encoding is not stable");
    kiln_cache_entry_free(&e2);
    kiln_cache_entry_free(&e);
    kiln_strbuf_free(&a);
    kiln_strbuf_free(&b);
    free(buf);
    return 0;
}
