/* SPDX-License-Identifier: Apache-2.0 */
/*
 * bundle.h — one file of precompiled cubins, built without a GPU, loaded
 * read-only by the runtime.
 *
 * Layout (little-endian):
 *   header   "KILNBND1", u32 format, u32 entries, u64 index offset,
 *            u64 index bytes, u64 table offset, u64 table bytes,
 *            char kiln_version[16], char nvrtc_version[16]
 *   entries  each a cache entry (cache.h's encoding, which carries its own
 *            key, description, stats, cubin and SHA-256), 16-byte aligned
 *   index    one fixed record per entry (kiln_bundle_record), sorted by id
 *   table    an optional tuning table, as text
 *   trailer  SHA-256 of every byte before it
 * The same inputs give byte-identical bundles: no time stamps, no paths,
 * entries sorted, and entries carry no compile time (it is zeroed on the way
 * in; everything else in an entry depends only on the kernel and the
 * compiler).  A kernel is found by its kernel id (store.h).  The NVRTC and
 * kiln versions are recorded but are no part of the id: a cubin does not
 * need the compiler that made it.
 */
#ifndef KILN_BUNDLE_H
#define KILN_BUNDLE_H

#include "cache.h"

/* 2: entries are cache format 2 (keys made from the kernel id). */
#define KILN_BUNDLE_FORMAT 2

typedef struct kiln_bundle_record {
    char id[65];                 /* lookup id, hex */
    char key[65];                /* the cache key it was built under */
    char name[96];
    char arch[16];
    uint64_t offset, size;       /* of the encoded entry in the file */
    char sha256[65];             /* of those bytes */
    int registers, spill_bytes, smem_static;
    uint64_t cubin_size;
} kiln_bundle_record;


/* ---- writing ------------------------------------------------------------ */

typedef struct kiln_bundle_writer kiln_bundle_writer;

kiln_status kiln_bundle_writer_create(kiln_bundle_writer **out, kiln_error *err);
/* Adds one kernel (copied, its compile time zeroed).  The same id twice is
 * kept once. */
kiln_status kiln_bundle_writer_add(kiln_bundle_writer *w, const char *id, const char *name,
                                   const kiln_cache_entry *e, kiln_error *err);
/* Attaches a tuning table's text (copied). */
kiln_status kiln_bundle_writer_set_table(kiln_bundle_writer *w, const char *text, size_t len,
                                         kiln_error *err);
/* Writes the file atomically. */
kiln_status kiln_bundle_writer_write(kiln_bundle_writer *w, const char *path, kiln_error *err);
void kiln_bundle_writer_destroy(kiln_bundle_writer *w);
size_t kiln_bundle_writer_count(const kiln_bundle_writer *w);

/* ---- reading ------------------------------------------------------------ */

typedef struct kiln_bundle kiln_bundle;

/* Maps path read-only and checks the header, the format version, the index
 * and the whole-file checksum.  A damaged, truncated or foreign file is
 * refused with a message naming the file and the reason. */
kiln_status kiln_bundle_open(const char *path, kiln_bundle **out, kiln_error *err);
void kiln_bundle_close(kiln_bundle *b);

const char *kiln_bundle_path(const kiln_bundle *b);
size_t kiln_bundle_count(const kiln_bundle *b);
const kiln_bundle_record *kiln_bundle_record_at(const kiln_bundle *b, size_t i);
/* The tuning table carried, or NULL (len 0). */
const char *kiln_bundle_table(const kiln_bundle *b, size_t *len);

/* Finds an entry by id; returns its index or -1. */
long kiln_bundle_find(const kiln_bundle *b, const char *id);
/* Decodes entry i after checking its own checksum (caller frees out). */
kiln_status kiln_bundle_load(const kiln_bundle *b, size_t i, kiln_cache_entry *out,
                             kiln_error *err);
/* Checks every entry; the first problem goes into err. */
kiln_status kiln_bundle_verify(const kiln_bundle *b, kiln_error *err);

#endif /* KILN_BUNDLE_H */
