/* SPDX-License-Identifier: Apache-2.0 */
/* fileio.c — whole-file reads and atomic writes (temp + fsync + rename). */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "common.h"

kiln_status kiln_file_read(const char *path, char **data, size_t *len, kiln_error *err)
{
    *data = NULL;
    if (len) *len = 0;
    /* O_NONBLOCK: opening a FIFO for reading would otherwise wait for a
     * writer forever.  Only regular files are read, so the flag changes
     * nothing for what gets past the check below. */
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    if (fd < 0) return kiln_error_set(err, KILN_ERROR_IO, "%s: %s", path, strerror(errno));
    struct stat st;
    if (fstat(fd, &st) != 0) {
        int e = errno;
        close(fd);
        return kiln_error_set(err, KILN_ERROR_IO, "%s: %s", path, strerror(e));
    }
    if (!S_ISREG(st.st_mode)) {
        close(fd);
        return kiln_error_set(err, KILN_ERROR_IO, "%s: %s", path,
                              S_ISDIR(st.st_mode) ? "is a directory" : "not a regular file");
    }
    size_t cap = (size_t)st.st_size + 1, n = 0;
    char *buf = malloc(cap);
    if (!buf) {
        close(fd);
        return kiln_error_set(err, KILN_ERROR_OUT_OF_MEMORY, "%s: out of memory", path);
    }
    for (;;) {
        if (n + 1 >= cap) { /* the file grew while we read it */
            char *p = realloc(buf, cap * 2);
            if (!p) {
                free(buf);
                close(fd);
                return kiln_error_set(err, KILN_ERROR_OUT_OF_MEMORY, "%s: out of memory", path);
            }
            buf = p;
            cap *= 2;
        }
        ssize_t r = read(fd, buf + n, cap - 1 - n);
        if (r < 0) {
            if (errno == EINTR) continue;
            int e = errno;
            free(buf);
            close(fd);
            return kiln_error_set(err, KILN_ERROR_IO, "%s: %s", path, strerror(e));
        }
        if (r == 0) break;
        n += (size_t)r;
    }
    close(fd);
    buf[n] = '\0';
    *data = buf;
    if (len) *len = n;
    return KILN_OK;
}

static int write_all(int fd, const void *data, size_t len)
{
    const char *p = data;
    while (len > 0) {
        ssize_t w = write(fd, p, len);
        if (w < 0) {
            if (errno == EINTR) continue;
            return -1;
        }
        p += w;
        len -= (size_t)w;
    }
    return 0;
}

kiln_status kiln_file_write_atomic(const char *path, const void *data, size_t len,
                                   kiln_error *err)
{
    /* The temp name carries pid and a clock reading so that concurrent
     * writers (other processes, other threads) never share a temp file. */
    char tmp[4096];
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    int n = snprintf(tmp, sizeof tmp, "%s.tmp.%ld.%ld.%p", path, (long)getpid(), (long)ts.tv_nsec,
                     (const void *)&ts);
    if (n < 0 || (size_t)n >= sizeof tmp)
        return kiln_error_set(err, KILN_ERROR_IO, "%s: path too long", path);
    int fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    if (fd < 0) return kiln_error_set(err, KILN_ERROR_IO, "%s: %s", tmp, strerror(errno));
    if (write_all(fd, data, len) != 0 || fsync(fd) != 0) {
        int e = errno;
        close(fd);
        unlink(tmp);
        return kiln_error_set(err, KILN_ERROR_IO, "%s: %s", tmp, strerror(e));
    }
    if (close(fd) != 0) {
        int e = errno;
        unlink(tmp);
        return kiln_error_set(err, KILN_ERROR_IO, "%s: %s", tmp, strerror(e));
    }
    if (rename(tmp, path) != 0) {
        int e = errno;
        unlink(tmp);
        return kiln_error_set(err, KILN_ERROR_IO, "%s: %s", path, strerror(e));
    }
    /* Make the rename itself durable. */
    char dir[4096];
    snprintf(dir, sizeof dir, "%s", path);
    char *slash = strrchr(dir, '/');
    if (slash) {
        if (slash == dir) slash[1] = '\0';
        else *slash = '\0';
    } else {
        strcpy(dir, ".");
    }
    int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dfd >= 0) {
        (void)fsync(dfd);
        close(dfd);
    }
    return KILN_OK;
}

kiln_status kiln_mkdirs(const char *path, kiln_error *err)
{
    char buf[4096];
    size_t n = strlen(path);
    if (n == 0 || n >= sizeof buf)
        return kiln_error_set(err, KILN_ERROR_IO, "bad directory path '%s'", path);
    memcpy(buf, path, n + 1);
    for (size_t i = 1; i <= n; i++) {
        if (buf[i] == '/' || buf[i] == '\0') {
            char c = buf[i];
            buf[i] = '\0';
            if (mkdir(buf, 0755) != 0 && errno != EEXIST)
                return kiln_error_set(err, KILN_ERROR_IO, "%s: %s", buf, strerror(errno));
            buf[i] = c;
        }
    }
    struct stat st;
    if (stat(path, &st) != 0 || !S_ISDIR(st.st_mode))
        return kiln_error_set(err, KILN_ERROR_IO, "%s: not a directory", path);
    return KILN_OK;
}

double kiln_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}
