/*
 * common.h — the small layer both the compiler and the runtime use: error
 * records, growable strings, SHA-256, and careful file I/O.  No libyaml, no
 * Lua, no CUDA here.
 */
#ifndef KILN_COMMON_H
#define KILN_COMMON_H

#include <stddef.h>
#include <stdint.h>
#include <stdarg.h>

#include "kiln.h"

#if defined(__GNUC__)
#define KILN_PRINTF(f, a) __attribute__((format(printf, f, a)))
#else
#define KILN_PRINTF(f, a)
#endif

#define KILN_ERROR_MAX 2048

/* An error record: a status and one line of text.  Functions that can fail
 * take a kiln_error * and fill it; the context copies it for kiln_last_error. */
typedef struct kiln_error {
    kiln_status status;
    char msg[KILN_ERROR_MAX];
} kiln_error;

/* Sets err (if non-NULL) and returns status, so callers can write
 *   return kiln_error_set(err, KILN_ERROR_IO, "%s: %s", path, strerror(errno)); */
kiln_status kiln_error_set(kiln_error *err, kiln_status status, const char *fmt, ...)
    KILN_PRINTF(3, 4);
void kiln_error_clear(kiln_error *err);
/* Prepends "prefix: " to the message already in err. */
void kiln_error_prefix(kiln_error *err, const char *fmt, ...) KILN_PRINTF(2, 3);

/* Growable NUL-terminated string.  On allocation failure it sets oom and
 * keeps what it had; check oom once at the end instead of after each append. */
typedef struct kiln_strbuf {
    char *data;
    size_t len, cap;
    int oom;
} kiln_strbuf;

void kiln_strbuf_init(kiln_strbuf *sb);
void kiln_strbuf_free(kiln_strbuf *sb);
void kiln_strbuf_append(kiln_strbuf *sb, const char *s, size_t n);
void kiln_strbuf_puts(kiln_strbuf *sb, const char *s);
void kiln_strbuf_printf(kiln_strbuf *sb, const char *fmt, ...) KILN_PRINTF(2, 3);
void kiln_strbuf_vprintf(kiln_strbuf *sb, const char *fmt, va_list ap);
/* Hands the buffer to the caller (free() it); leaves sb empty. */
char *kiln_strbuf_take(kiln_strbuf *sb);

/* SHA-256. */
typedef struct kiln_sha256 {
    uint32_t h[8];
    uint64_t len;
    uint8_t buf[64];
    size_t fill;
} kiln_sha256;

void kiln_sha256_init(kiln_sha256 *s);
void kiln_sha256_update(kiln_sha256 *s, const void *data, size_t n);
void kiln_sha256_final(kiln_sha256 *s, uint8_t out[32]);
/* out must hold 65 bytes: 64 hex digits and a NUL. */
void kiln_sha256_hex(const void *data, size_t n, char out[65]);
void kiln_hex(const uint8_t *bytes, size_t n, char *out);

/* Reads a whole file (adds a NUL after the data, not counted in *len). */
kiln_status kiln_file_read(const char *path, char **data, size_t *len, kiln_error *err);
/* Writes atomically: a temp file beside path, fsync, rename, fsync of the
 * directory.  Concurrent writers of the same path each leave a whole file. */
kiln_status kiln_file_write_atomic(const char *path, const void *data, size_t len,
                                   kiln_error *err);
/* mkdir -p. */
kiln_status kiln_mkdirs(const char *path, kiln_error *err);

/* Monotonic seconds. */
double kiln_now(void);

#endif /* KILN_COMMON_H */
