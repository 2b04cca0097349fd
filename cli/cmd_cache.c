/* SPDX-License-Identifier: Apache-2.0 */
/*
 * cmd_cache.c — `kiln cache ls|verify|clear`, and moving kernels between
 * the cache and bundles: `kiln cache import BUNDLE`, `kiln cache export DIR
 * BUNDLE`.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"

static int cache_import(const kiln_cli_options *o, const char *path)
{
    kiln_bundle *b = NULL;
    kiln_cache *c = NULL;
    kiln_error err;
    kiln_error_clear(&err);
    if (kiln_bundle_open(path, &b, &err) != KILN_OK) {
        char msg[KILN_ERROR_MAX];
        fprintf(stderr, "kiln cache import: %s\n", kiln_printable(err.msg, msg, sizeof msg));
        return KILN_EXIT_USAGE;
    }
    if (kiln_cache_open(o->cache_dir, &c, &err) != KILN_OK) {
        fprintf(stderr, "kiln cache import: %s\n", err.msg);
        kiln_bundle_close(b);
        return KILN_EXIT_COMPILE;
    }
    int rc = KILN_EXIT_OK;
    size_t done = 0;
    for (size_t i = 0; i < kiln_bundle_count(b) && rc == KILN_EXIT_OK; i++) {
        kiln_cache_entry e;
        if (kiln_bundle_load(b, i, &e, &err) != KILN_OK) rc = KILN_EXIT_USAGE; /* damaged */
        else if (kiln_cache_put(c, &e, &err) != KILN_OK) rc = KILN_EXIT_COMPILE;
        else done++;
        kiln_cache_entry_free(&e);
    }
    char msg[KILN_ERROR_MAX];
    if (rc == KILN_EXIT_OK)
        printf("imported %zu kernels from %s into %s\n", done, path, kiln_cache_path(c));
    else
        fprintf(stderr, "kiln cache import: %s\n", kiln_printable(err.msg, msg, sizeof msg));
    kiln_cache_close(c);
    kiln_bundle_close(b);
    return rc;
}

typedef struct export_state {
    kiln_bundle_writer *w;
    kiln_error err;
    size_t skipped;
    int failed;
} export_state;

static void export_visit(void *user, const char *key, const kiln_cache_entry *e, int ok,
                         const char *problem)
{
    export_state *s = user;
    (void)key;
    (void)problem;
    if (s->failed) return;
    if (!ok) { /* a damaged entry is never exported */
        s->skipped++;
        return;
    }
    kiln_kernel_desc d;
    kiln_launch_desc l;
    kiln_error perr;
    const char *name = e->desc && kiln_desc_parse(e->desc, &d, &l, &perr) ? d.name : "?";
    char id[65];
    kiln_kernel_id(e->arch, e->desc ? e->desc : "", e->source_sha256, id);
    if (kiln_cli_bundle_add(s->w, id, name, e, &s->err) != KILN_OK) s->failed = 1;
}

static int cache_export(const char *dir, const char *path)
{
    kiln_cache *c = NULL;
    export_state s;
    memset(&s, 0, sizeof s);
    if (kiln_cache_open(dir, &c, &s.err) != KILN_OK ||
        kiln_bundle_writer_create(&s.w, &s.err) != KILN_OK) {
        fprintf(stderr, "kiln cache export: %s\n", s.err.msg);
        if (c) kiln_cache_close(c);
        return KILN_EXIT_COMPILE;
    }
    int rc = KILN_EXIT_OK;
    if (kiln_cache_foreach(c, export_visit, &s, &s.err) != KILN_OK || s.failed ||
        kiln_bundle_writer_write(s.w, path, &s.err) != KILN_OK) {
        fprintf(stderr, "kiln cache export: %s\n", s.err.msg);
        rc = KILN_EXIT_COMPILE;
    } else {
        printf("%s: %zu kernels from %s%s\n", path, kiln_bundle_writer_count(s.w), dir,
               s.skipped ? " (damaged entries skipped)" : "");
    }
    kiln_bundle_writer_destroy(s.w);
    kiln_cache_close(c);
    return rc;
}

typedef struct cache_walk {
    int verify;
    size_t count, bad;
    uint64_t bytes;
} cache_walk;

static void cache_visit(void *user, const char *key, const kiln_cache_entry *e, int ok,
                        const char *problem)
{
    cache_walk *w = user;
    w->count++;
    if (!ok) {
        w->bad++;
        char why[1024];
        printf("%.16s  DAMAGED  %s\n", key, kiln_printable(problem, why, sizeof why));
        return;
    }
    w->bytes += e->cubin_size;
    if (w->verify) return;
    kiln_kernel_desc d;
    kiln_launch_desc l;
    kiln_error err;
    const char *name = e->desc && kiln_desc_parse(e->desc, &d, &l, &err) ? d.name : "?";
    char arch[128], shown[512]; /* both read from the file */
    printf("%.16s  %-8s %8zu B  %3d regs  %-40s\n", key,
           kiln_printable(e->arch, arch, sizeof arch), e->cubin_size, e->stats.registers,
           kiln_printable(name, shown, sizeof shown));
}

static int run(const kiln_cli_options *o, int n, char **args)
{
    if (n == 2 && !strcmp(args[0], "import")) return cache_import(o, args[1]);
    if (n == 3 && !strcmp(args[0], "export")) return cache_export(args[1], args[2]);
    if (n != 1 || (strcmp(args[0], "ls") && strcmp(args[0], "verify") && strcmp(args[0], "clear"))) {
        fprintf(stderr, "kiln cache: takes ls, verify, clear, import FILE or export DIR FILE "
                        "(see kiln cache --help)\n");
        return KILN_EXIT_USAGE;
    }
    kiln_cache *c = NULL;
    kiln_error err;
    kiln_error_clear(&err);
    if (kiln_cache_open(o->cache_dir, &c, &err) != KILN_OK) {
        fprintf(stderr, "kiln cache: %s\n", err.msg);
        return KILN_EXIT_USAGE;
    }
    int rc = KILN_EXIT_OK;
    if (!strcmp(args[0], "clear")) {
        size_t removed = 0;
        if (kiln_cache_clear(c, &removed, &err) != KILN_OK) {
            fprintf(stderr, "kiln cache clear: %s\n", err.msg);
            rc = KILN_EXIT_COMPILE;
        } else {
            printf("removed %zu entries from %s\n", removed, kiln_cache_path(c));
        }
    } else {
        cache_walk w = {.verify = !strcmp(args[0], "verify")};
        if (kiln_cache_foreach(c, cache_visit, &w, &err) != KILN_OK) {
            fprintf(stderr, "kiln cache: %s\n", err.msg);
            rc = KILN_EXIT_COMPILE;
        } else {
            printf("%s: %zu entries, %zu damaged, %llu bytes of cubins\n", kiln_cache_path(c),
                   w.count, w.bad, (unsigned long long)w.bytes);
            if (w.bad) rc = KILN_EXIT_COMPILE;
            /* Temp files of writers still at work, or killed (stale ones are
             * swept when a cache opens, so few remain here). */
            size_t temps = 0, stale = 0;
            if (w.verify && kiln_cache_count_temps(c, &temps, &stale, &err) == KILN_OK && temps)
                printf("%zu temp files (%zu stale, from killed writers)\n", temps, stale);
        }
    }
    kiln_cache_close(c);
    return rc;
}

const kiln_cli_command kiln_cmd_cache = {
    "cache", "list, check, empty, import into or export the kernel cache",
    "usage: kiln cache ls|verify|clear [--cache-dir DIR]\n"
    "       kiln cache import BUNDLE [--cache-dir DIR]\n"
    "       kiln cache export DIR BUNDLE\n"
    "\n"
    "  ls       one line per entry: key, arch, cubin bytes, registers, kernel\n"
    "  verify   check every entry's checksum; damaged entries are listed\n"
    "  clear    remove every entry\n"
    "  import   copy a bundle's kernels into the cache\n"
    "  export   write the cache in DIR as one bundle (damaged entries skipped)\n"
    "\n"
    "  --cache-dir DIR   cache directory (default $KILN_CACHE_DIR, $XDG_CACHE_HOME/kiln,\n"
    "                    ~/.cache/kiln)\n"
    "\n"
    "Exit: 0 ok, 1 damaged entries found or a write failed, 2 bad input (bad\n"
    "arguments, a file that is not a bundle).\n",
    KILN_OPT_CACHE_DIR,
    run};
