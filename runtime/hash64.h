/* SPDX-License-Identifier: Apache-2.0 */
/* hash64.h — a fast 64-bit hash of a key made of 64-bit words, for the
 * runtime's per-call caches (tmap_cache.c, dispatch_memo.c): not
 * cryptographic, every bit of every word reaches the low bits. */
#ifndef KILN_HASH64_H
#define KILN_HASH64_H

#include <stdint.h>
#include <string.h>

static inline uint64_t kiln_hash64(const void *key, size_t bytes)
{
    const unsigned char *b = (const unsigned char *)key;
    uint64_t h = 0x9E3779B97F4A7C15ull;
    for (size_t i = 0; i + 8 <= bytes; i += 8) {
        uint64_t w;
        memcpy(&w, b + i, 8);
        h = (h ^ w) * 0xFF51AFD7ED558CCDull;
        h ^= h >> 32;
    }
    for (size_t i = bytes & ~(size_t)7; i < bytes; i++) h = (h ^ b[i]) * 0x100000001B3ull;
    h *= 0xC4CEB9FE1A85EC53ull;
    return h ^ (h >> 29);
}

#endif /* KILN_HASH64_H */
