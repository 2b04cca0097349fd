/* SPDX-License-Identifier: Apache-2.0 */
/* fuzz_util.h — checks the fuzz targets share: what a refusal must look
 * like (one printable line naming the input), and checksum fix-ups. */
#ifndef KILN_FUZZ_UTIL_H
#define KILN_FUZZ_UTIL_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common.h"

/* Stops the run (libFuzzer saves the input) with a reason. */
#define FUZZ_FAIL(...)                                                                             \
    do {                                                                                           \
        fprintf(stderr, "fuzz invariant broken: " __VA_ARGS__);                                    \
        fputc('\n', stderr);                                                                       \
        abort();                                                                                   \
    } while (0)

/* A refusal is one line that starts with the input's name. */
static inline void fuzz_check_error(const kiln_error *err, const char *name)
{
    if (strncmp(err->msg, name, strlen(name)) != 0)
        FUZZ_FAIL("message does not start with '%s': %s", name, err->msg);
    if (strchr(err->msg, '\n') || strchr(err->msg, '\r'))
        FUZZ_FAIL("message is not one line: %s", err->msg);
}

/* A refusal that also quotes nothing but printable ASCII. */
static inline void fuzz_check_printable(const kiln_error *err)
{
    for (const unsigned char *p = (const unsigned char *)err->msg; *p; p++)
        if (*p < 0x20 || *p == 0x7f) FUZZ_FAIL("control byte 0x%02x in: %s", *p, err->msg);
}

/* Rewrites the last 32 bytes of buf as the SHA-256 of the bytes before
 * them (cache entries and bundles end so), so mutations reach the decoders
 * instead of stopping at the checksum. */
static inline void fuzz_fix_trailer(unsigned char *buf, size_t len)
{
    if (len < 32) return;
    kiln_sha256 s;
    kiln_sha256_init(&s);
    kiln_sha256_update(&s, buf, len - 32);
    kiln_sha256_final(&s, buf + len - 32);
}

#endif
