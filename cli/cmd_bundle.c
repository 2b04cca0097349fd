/*
 * cmd_bundle.c — `kiln pack`, `kiln bundle ls|verify`, and moving kernels
 * between caches and bundles (`kiln cache import|export`).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "tuning.h"

int kiln_cmd_pack(const kiln_cli_options *o, int n, char **args)
{
    if (!o->output || !o->arch_list || n < 1) {
        fprintf(stderr, "kiln pack: usage: kiln pack SPEC_OR_DIR... --arch LIST -o BUNDLE "
                        "[--table FILE]\n");
        return KILN_EXIT_USAGE;
    }
    char *table = NULL;
    size_t table_len = 0;
    kiln_error err;
    kiln_error_clear(&err);
    if (o->table) {
        /* A table travels only if it parses: the runtime would refuse it. */
        kiln_tuning_table *t = NULL;
        if (kiln_file_read(o->table, &table, &table_len, &err) != KILN_OK ||
            kiln_tuning_table_parse(table, table_len, o->table, &t, &err) != KILN_OK) {
            fprintf(stderr, "kiln pack: %s\n", err.msg);
            free(table);
            return KILN_EXIT_USAGE;
        }
        kiln_tuning_table_destroy(t);
    }
    kiln_spec_set set;
    int rc = kiln_spec_set_load(&set, n, args, o->arch_list);
    if (rc != KILN_EXIT_OK) {
        free(table);
        return rc;
    }
    kiln_build_result *results = NULL;
    size_t failed = 0;
    double seconds = 0;
    rc = kiln_build_all(o, &set, 1, &results, &failed, &seconds);
    kiln_bundle_writer *w = NULL;
    if (rc == KILN_EXIT_OK && failed) {
        for (size_t i = 0; i < set.n_jobs; i++)
            if (!results[i].ok) fprintf(stderr, "%s\n", results[i].error);
        fprintf(stderr, "kiln pack: %zu of %zu kernels failed; no bundle written\n", failed,
                set.n_jobs);
        rc = KILN_EXIT_COMPILE;
    }
    if (rc == KILN_EXIT_OK && kiln_bundle_writer_create(&w, &err) != KILN_OK) rc = KILN_EXIT_COMPILE;
    for (size_t i = 0; rc == KILN_EXIT_OK && i < set.n_jobs; i++)
        if (kiln_bundle_writer_add(w, results[i].id, set.jobs[i].spec->desc.name,
                                   &results[i].entry, &err) != KILN_OK)
            rc = KILN_EXIT_COMPILE;
    if (rc == KILN_EXIT_OK && table &&
        kiln_bundle_writer_set_table(w, table, table_len, &err) != KILN_OK)
        rc = KILN_EXIT_COMPILE;
    if (rc == KILN_EXIT_OK && kiln_bundle_writer_write(w, o->output, &err) != KILN_OK)
        rc = KILN_EXIT_COMPILE;
    if (rc == KILN_EXIT_OK)
        printf("%s: %zu kernels (%s), %s in %.2fs\n", o->output, kiln_bundle_writer_count(w),
               o->arch_list, table ? "with a tuning table" : "no tuning table", seconds);
    else if (err.msg[0])
        fprintf(stderr, "kiln pack: %s\n", err.msg);
    kiln_bundle_writer_destroy(w);
    kiln_build_results_free(results, set.n_jobs);
    kiln_spec_set_free(&set);
    free(table);
    return rc;
}

/* Writes each cubin of b as DIR/<name>.<arch>.cubin (for cuobjdump). */
static int extract(kiln_bundle *b, const char *dir)
{
    kiln_error err;
    kiln_error_clear(&err);
    if (kiln_mkdirs(dir, &err) != KILN_OK) {
        fprintf(stderr, "kiln bundle extract: %s\n", err.msg);
        return KILN_EXIT_COMPILE;
    }
    for (size_t i = 0; i < kiln_bundle_count(b); i++) {
        const kiln_bundle_record *r = kiln_bundle_record_at(b, i);
        kiln_cache_entry e;
        char path[KILN_PATH_MAX + 128];
        snprintf(path, sizeof path, "%s/%s.%s.cubin", dir, r->name, r->arch);
        if (kiln_bundle_load(b, i, &e, &err) != KILN_OK ||
            kiln_file_write_atomic(path, e.cubin, e.cubin_size, &err) != KILN_OK) {
            fprintf(stderr, "kiln bundle extract: %s\n", err.msg);
            kiln_cache_entry_free(&e);
            return KILN_EXIT_COMPILE;
        }
        kiln_cache_entry_free(&e);
    }
    printf("%zu cubins written to %s\n", kiln_bundle_count(b), dir);
    return KILN_EXIT_OK;
}

int kiln_cmd_bundle(const kiln_cli_options *o, int n, char **args)
{
    int is_extract = n == 3 && !strcmp(args[0], "extract");
    if (!is_extract && (n != 2 || (strcmp(args[0], "ls") && strcmp(args[0], "verify")))) {
        fprintf(stderr, "kiln bundle: usage: kiln bundle ls|verify BUNDLE, or kiln bundle "
                        "extract BUNDLE DIR\n");
        return KILN_EXIT_USAGE;
    }
    kiln_bundle *b = NULL;
    kiln_error err;
    kiln_error_clear(&err);
    if (kiln_bundle_open(args[1], &b, &err) != KILN_OK) {
        fprintf(stderr, "kiln bundle: %s\n", err.msg);
        return KILN_EXIT_COMPILE;
    }
    int rc = KILN_EXIT_OK;
    size_t table_len = 0;
    kiln_bundle_table(b, &table_len);
    if (is_extract) {
        rc = extract(b, args[2]);
    } else if (!strcmp(args[0], "ls")) {
        printf("%-16s %-8s %5s %6s %9s  %s\n", "id", "arch", "regs", "spills", "cubin", "kernel");
        for (size_t i = 0; i < kiln_bundle_count(b); i++) {
            const kiln_bundle_record *r = kiln_bundle_record_at(b, i);
            printf("%.16s %-8s %5d %6d %9llu  %s\n", r->id, r->arch, r->registers, r->spill_bytes,
                   (unsigned long long)r->cubin_size, r->name);
        }
        printf("%zu kernels%s\n", kiln_bundle_count(b),
               table_len ? ", with a tuning table" : "");
    } else if (kiln_bundle_verify(b, &err) != KILN_OK) {
        fprintf(stderr, "kiln bundle verify: %s\n", err.msg);
        rc = KILN_EXIT_COMPILE;
    } else {
        printf("%s: %zu kernels, all checksums good\n", args[1], kiln_bundle_count(b));
    }
    kiln_bundle_close(b);
    return rc;
}

int kiln_cmd_cache_import(const kiln_cli_options *o, const char *path)
{
    kiln_bundle *b = NULL;
    kiln_cache *c = NULL;
    kiln_error err;
    kiln_error_clear(&err);
    if (kiln_bundle_open(path, &b, &err) != KILN_OK ||
        kiln_cache_open(o->cache_dir, &c, &err) != KILN_OK) {
        fprintf(stderr, "kiln cache import: %s\n", err.msg);
        kiln_bundle_close(b);
        return KILN_EXIT_COMPILE;
    }
    int rc = KILN_EXIT_OK;
    size_t done = 0;
    for (size_t i = 0; i < kiln_bundle_count(b) && rc == KILN_EXIT_OK; i++) {
        kiln_cache_entry e;
        if (kiln_bundle_load(b, i, &e, &err) != KILN_OK || kiln_cache_put(c, &e, &err) != KILN_OK)
            rc = KILN_EXIT_COMPILE;
        else
            done++;
        kiln_cache_entry_free(&e);
    }
    if (rc == KILN_EXIT_OK)
        printf("imported %zu kernels from %s into %s\n", done, path, kiln_cache_path(c));
    else
        fprintf(stderr, "kiln cache import: %s\n", err.msg);
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
    kiln_bundle_id(e->arch, e->desc ? e->desc : "", e->source_sha256, id);
    if (kiln_bundle_writer_add(s->w, id, name, e, &s->err) != KILN_OK) s->failed = 1;
}

int kiln_cmd_cache_export(const kiln_cli_options *o, const char *dir, const char *path)
{
    (void)o;
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
