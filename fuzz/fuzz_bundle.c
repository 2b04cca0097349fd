/* SPDX-License-Identifier: Apache-2.0 */
/* fuzz_bundle.c — the bundle reader.  Before reading, each index record's
 * entry gets its own checksum and the record's SHA-256 fixed up, then the
 * file trailer, so mutations reach the index, record and entry decoders.
 * Invariants: a refusal is one line naming the file; an opened bundle
 * verifies or says why in one line, and every entry it loads decodes. */
#define _GNU_SOURCE
#include <stdint.h>
#include <sys/mman.h>
#include <unistd.h>

#include "bundle.h"
#include "fuzz_util.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define HEADER_BYTES 96
#define RECORD_BYTES 480

static uint64_t get_le(const unsigned char *p, int n)
{
    uint64_t v = 0;
    for (int i = 0; i < n; i++) v |= (uint64_t)p[i] << (8 * i);
    return v;
}

static void fix_up(unsigned char *m, size_t size)
{
    if (size < HEADER_BYTES + 32) return;
    uint64_t n = get_le(m + 12, 4), index_off = get_le(m + 16, 8);
    for (uint64_t i = 0; i < n && i < 64; i++) {
        uint64_t r = index_off + i * RECORD_BYTES;
        if (index_off > size || r > size - 32 || RECORD_BYTES > size - 32 - r) break;
        unsigned char *rec = m + r;
        uint64_t off = get_le(rec + 312, 8), len = get_le(rec + 320, 8);
        if (off > size || len > size - off || len < 32) continue;
        fuzz_fix_trailer(m + off, (size_t)len);
        kiln_sha256_hex(m + off, (size_t)len, (char *)rec + 242);
    }
    fuzz_fix_trailer(m, size);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static int fd = -1;
    static char path[64];
    if (fd < 0) {
        fd = memfd_create("fuzz.kbundle", 0);
        if (fd < 0) FUZZ_FAIL("memfd_create");
        snprintf(path, sizeof path, "/proc/self/fd/%d", fd);
    }
    unsigned char *buf = malloc(size ? size : 1);
    if (!buf) return 0;
    memcpy(buf, data, size);
    fix_up(buf, size);
    if (ftruncate(fd, 0) != 0 || pwrite(fd, buf, size, 0) != (ssize_t)size) FUZZ_FAIL("pwrite");
    free(buf);
    kiln_bundle *b = NULL;
    kiln_error err;
    kiln_error_clear(&err);
    if (kiln_bundle_open(path, &b, &err) != KILN_OK) {
        if (!strstr(err.msg, path) || strchr(err.msg, '\n')) FUZZ_FAIL("bad refusal: %s", err.msg);
        return 0;
    }
    if (kiln_bundle_verify(b, &err) != KILN_OK && strchr(err.msg, '\n'))
        FUZZ_FAIL("verify message is not one line: %s", err.msg);
    for (size_t i = 0; i < kiln_bundle_count(b); i++) {
        if (!kiln_bundle_record_at(b, i)) FUZZ_FAIL("no record %zu of %zu", i, kiln_bundle_count(b));
        kiln_cache_entry e;
        if (kiln_bundle_load(b, i, &e, &err) == KILN_OK) kiln_cache_entry_free(&e);
        else if (strchr(err.msg, '\n')) FUZZ_FAIL("load message is not one line: %s", err.msg);
    }
    size_t tlen = 0;
    (void)kiln_bundle_table(b, &tlen);
    kiln_bundle_close(b);
    return 0;
}
