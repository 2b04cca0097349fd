/* SPDX-License-Identifier: Apache-2.0 */
/*
 * cmd_bundle.c — `kiln bundle ls|verify BUNDLE` and `kiln bundle extract
 * BUNDLE DIR`.  Names and arches come from the file, so they are printed
 * escaped and never used as paths as they are.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "tuning.h"

/* The file name extract writes for a record's name or arch: letters, digits,
 * '_' and '-' kept, anything else '_', so that no name from the file (a
 * "../../x", a "/etc/passwd", a ".") can leave DIR or hide there. */
static void safe_part(const char *s, char *out, size_t size)
{
    size_t n = 0;
    for (; *s && n + 1 < size; s++) {
        char c = *s;
        int keep = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                   c == '_' || c == '-';
        out[n++] = keep ? c : '_';
    }
    if (n == 0) out[n++] = '_';
    out[n] = '\0';
}

/* The tuning table, if any, goes to DIR/kiln-tuning.txt (tune's default name). */
static int extract_table(kiln_bundle *b, const char *dir)
{
    size_t len = 0;
    const char *text = kiln_bundle_table(b, &len);
    if (!text || !len) return KILN_EXIT_OK;
    char path[KILN_PATH_MAX + 32];
    snprintf(path, sizeof path, "%s/kiln-tuning.txt", dir);
    kiln_error err;
    kiln_error_clear(&err);
    if (kiln_file_write_atomic(path, text, len, &err) != KILN_OK) {
        fprintf(stderr, "kiln bundle extract: %s\n", err.msg);
        return KILN_EXIT_COMPILE;
    }
    printf("tuning table written to %s\n", path);
    return KILN_EXIT_OK;
}

/* Writes each cubin of b as DIR/<name>.<arch>.cubin (for cuobjdump), the
 * name and arch made safe; a name taken twice gets the record's index. */
static int extract(kiln_bundle *b, const char *dir)
{
    kiln_error err;
    kiln_error_clear(&err);
    if (kiln_mkdirs(dir, &err) != KILN_OK) {
        fprintf(stderr, "kiln bundle extract: %s\n", err.msg);
        return KILN_EXIT_COMPILE;
    }
    size_t n = kiln_bundle_count(b);
    char (*names)[256] = calloc(n ? n : 1, sizeof *names);
    if (!names) return KILN_EXIT_COMPILE;
    int rc = KILN_EXIT_OK;
    for (size_t i = 0; i < n && rc == KILN_EXIT_OK; i++) {
        const kiln_bundle_record *r = kiln_bundle_record_at(b, i);
        char name[128], arch[32], shown[KILN_ERROR_MAX];
        safe_part(r->name, name, sizeof name);
        safe_part(r->arch, arch, sizeof arch);
        snprintf(names[i], sizeof names[i], "%s.%s.cubin", name, arch);
        for (size_t k = 0; k < i; k++)
            if (!strcmp(names[k], names[i])) {
                snprintf(names[i], sizeof names[i], "%s.%s.%zu.cubin", name, arch, i);
                break;
            }
        if (strcmp(name, r->name) || strcmp(arch, r->arch))
            fprintf(stderr, "kiln bundle extract: warning: record %zu is named '%s' for '%s'; "
                            "written as %s\n", i, kiln_printable(r->name, shown, 1024),
                    kiln_printable(r->arch, shown + 1024, 1024), names[i]);
        char path[KILN_PATH_MAX + 300];
        snprintf(path, sizeof path, "%s/%s", dir, names[i]);
        kiln_cache_entry e;
        memset(&e, 0, sizeof e);
        /* A damaged entry is bad input; a failed write is a failure. */
        if (kiln_bundle_load(b, i, &e, &err) != KILN_OK) rc = KILN_EXIT_USAGE;
        else if (kiln_file_write_atomic(path, e.cubin, e.cubin_size, &err) != KILN_OK)
            rc = KILN_EXIT_COMPILE;
        if (rc != KILN_EXIT_OK)
            fprintf(stderr, "kiln bundle extract: %s\n",
                    kiln_printable(err.msg, shown, sizeof shown));
        kiln_cache_entry_free(&e);
    }
    free(names);
    if (rc != KILN_EXIT_OK) return rc;
    printf("%zu cubins written to %s\n", n, dir);
    return extract_table(b, dir);
}

/* The table, line by line, escaped: what the runtime would read from it. */
static void list_table(const kiln_bundle *b)
{
    size_t len = 0;
    const char *text = kiln_bundle_table(b, &len);
    if (!text || !len) {
        printf("no tuning table\n");
        return;
    }
    char timer[96];
    kiln_tuning_text_timer(text, len, timer, sizeof timer);
    printf("tuning table (%zu bytes%s%s):\n", len, timer[0] ? ", timer " : "", timer);
    for (size_t at = 0; at < len;) {
        const char *nl = memchr(text + at, '\n', len - at);
        size_t ll = nl ? (size_t)(nl - (text + at)) : len - at;
        char *line = strndup(text + at, ll);
        char shown[4096];
        if (line) printf("  %s\n", kiln_printable(line, shown, sizeof shown));
        free(line);
        at += ll + 1;
    }
}

static void list(const kiln_bundle *b)
{
    printf("%-16s %-8s %5s %6s %9s  %s\n", "id", "arch", "regs", "spills", "cubin", "kernel");
    for (size_t i = 0; i < kiln_bundle_count(b); i++) {
        const kiln_bundle_record *r = kiln_bundle_record_at(b, i);
        char id[200], name[512], arch[128];
        kiln_printable(r->id, id, sizeof id);
        printf("%.16s %-8s %5d %6d %9llu  %s\n", id, kiln_printable(r->arch, arch, sizeof arch),
               r->registers, r->spill_bytes, (unsigned long long)r->cubin_size,
               kiln_printable(r->name, name, sizeof name));
    }
    size_t table_len = 0;
    kiln_bundle_table(b, &table_len);
    printf("%zu kernels%s\n", kiln_bundle_count(b), table_len ? ", with a tuning table" : "");
    list_table(b);
}

static int run(const kiln_cli_options *o, int n, char **args)
{
    (void)o;
    int is_extract = n == 3 && !strcmp(args[0], "extract");
    if (!is_extract && (n != 2 || (strcmp(args[0], "ls") && strcmp(args[0], "verify")))) {
        fprintf(stderr, "kiln bundle: takes ls BUNDLE, verify BUNDLE or extract BUNDLE DIR "
                        "(see kiln bundle --help)\n");
        return KILN_EXIT_USAGE;
    }
    kiln_bundle *b = NULL;
    kiln_error err;
    kiln_error_clear(&err);
    if (kiln_bundle_open(args[1], &b, &err) != KILN_OK) {
        char msg[KILN_ERROR_MAX];
        fprintf(stderr, "kiln bundle: %s\n", kiln_printable(err.msg, msg, sizeof msg));
        return KILN_EXIT_USAGE;
    }
    int rc = KILN_EXIT_OK;
    if (is_extract) {
        rc = extract(b, args[2]);
    } else if (!strcmp(args[0], "ls")) {
        list(b);
    } else if (kiln_bundle_verify(b, &err) != KILN_OK) {
        char msg[KILN_ERROR_MAX];
        fprintf(stderr, "kiln bundle verify: %s\n", kiln_printable(err.msg, msg, sizeof msg));
        rc = KILN_EXIT_USAGE;
    } else {
        printf("%s: %zu kernels, all checksums good\n", args[1], kiln_bundle_count(b));
    }
    kiln_bundle_close(b);
    return rc;
}

const kiln_cli_command kiln_cmd_bundle = {
    "bundle", "list or check a bundle; extract its cubins and tuning table",
    "usage: kiln bundle ls BUNDLE\n"
    "       kiln bundle verify BUNDLE\n"
    "       kiln bundle extract BUNDLE DIR\n"
    "\n"
    "  ls       one line per kernel (id, arch, registers, spills, cubin bytes, name),\n"
    "           then the tuning table it carries, if any\n"
    "  verify   check the file's and every entry's checksum\n"
    "  extract  write each cubin as DIR/NAME.ARCH.cubin (for cuobjdump) and the\n"
    "           tuning table as DIR/kiln-tuning.txt; a name from the file that is not\n"
    "           plain letters, digits, '_' and '-' is written with '_' instead\n"
    "\n"
    "Exit: 0 ok, 1 a write failed, 2 bad input (a file that is not a bundle, or a\n"
    "damaged one: extract stops at the first damaged entry).\n",
    0,
    run};
