/* SPDX-License-Identifier: Apache-2.0 */
/*
 * cmd_pack.c — `kiln pack`: compile (or take from the cache) every kernel of
 * the specs for every arch named and write one bundle, optionally with a
 * tuning table.  Packs are reproducible: the same specs give the same bytes
 * (entries sorted, no paths, no times; compile times are zeroed).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "tuning.h"

/* Reads and checks --table: it must parse (the runtime would refuse it) and
 * must not come from the fake timer unless --allow-fake-timings. */
static int read_table(const kiln_cli_options *o, char **text, size_t *len)
{
    kiln_error err;
    kiln_error_clear(&err);
    kiln_tuning_table *t = NULL;
    if (kiln_file_read(o->table, text, len, &err) != KILN_OK ||
        kiln_tuning_table_parse(*text, *len, o->table, &t, &err) != KILN_OK) {
        char msg[KILN_ERROR_MAX];
        fprintf(stderr, "kiln pack: %s\n", kiln_printable(err.msg, msg, sizeof msg));
        return KILN_EXIT_USAGE;
    }
    kiln_tuning_table_destroy(t);
    char timer[96];
    kiln_tuning_text_timer(*text, *len, timer, sizeof timer);
    if (!strcmp(timer, "fake") && !o->allow_fake_timings) {
        fprintf(stderr, "kiln pack: %s was measured with the fake timer (a formula, not a GPU), "
                        "so its winners mean nothing; pass --allow-fake-timings to ship it "
                        "anyway\n", o->table);
        return KILN_EXIT_USAGE;
    }
    return KILN_EXIT_OK;
}

static int write_bundle(const kiln_cli_options *o, const kiln_spec_set *set,
                        const kiln_build_result *results, const char *table, size_t table_len,
                        double seconds)
{
    kiln_error err;
    kiln_error_clear(&err);
    kiln_bundle_writer *w = NULL;
    int ok = kiln_bundle_writer_create(&w, &err) == KILN_OK;
    for (size_t i = 0; ok && i < set->n_jobs; i++)
        ok = kiln_cli_bundle_add(w, results[i].id, set->jobs[i].spec->desc.name,
                                 &results[i].entry, &err) == KILN_OK;
    if (ok && table) ok = kiln_bundle_writer_set_table(w, table, table_len, &err) == KILN_OK;
    if (ok) ok = kiln_bundle_writer_write(w, o->output, &err) == KILN_OK;
    if (ok) {
        printf("%s: %zu kernels (%s), %s", o->output, kiln_bundle_writer_count(w), o->arch_list,
               table ? "with a tuning table" : "no tuning table");
        if (set->skipped) printf(", %zu spec-arch pairs skipped", set->skipped);
        printf(" in %.2fs\n", seconds);
    } else {
        fprintf(stderr, "kiln pack: %s\n", err.msg);
    }
    kiln_bundle_writer_destroy(w);
    return ok ? KILN_EXIT_OK : KILN_EXIT_COMPILE;
}

static int run(const kiln_cli_options *o, int n, char **args)
{
    if (!o->output || !o->arch_list || n < 1) {
        fprintf(stderr, "kiln pack: needs specs, --arch LIST and -o BUNDLE (see kiln pack "
                        "--help)\n");
        return KILN_EXIT_USAGE;
    }
    char *table = NULL;
    size_t table_len = 0;
    if (o->table) {
        int rc = read_table(o, &table, &table_len);
        if (rc != KILN_EXIT_OK) {
            free(table);
            return rc;
        }
    }
    kiln_spec_set set;
    int rc = kiln_spec_set_load(&set, o, n, args, 1);
    if (rc != KILN_EXIT_OK) {
        free(table);
        return rc;
    }
    kiln_build_result *results = NULL;
    size_t failed = 0;
    double seconds = 0;
    rc = kiln_build_all(o, &set, 1, &results, &failed, &seconds);
    if (rc == KILN_EXIT_OK && failed) {
        for (size_t i = 0; i < set.n_jobs; i++)
            if (!results[i].ok) fprintf(stderr, "%s\n", results[i].error);
        fprintf(stderr, "kiln pack: %zu of %zu kernels failed; no bundle written\n", failed,
                set.n_jobs);
        rc = KILN_EXIT_COMPILE;
    }
    if (rc == KILN_EXIT_OK) rc = write_bundle(o, &set, results, table, table_len, seconds);
    kiln_build_results_free(results, set.n_jobs);
    kiln_spec_set_free(&set);
    free(table);
    return rc;
}

const kiln_cli_command kiln_cmd_pack = {
    "pack", "compile every kernel for every arch into one bundle file",
    "usage: kiln pack SPEC_OR_DIR... --arch LIST -o BUNDLE [--table FILE]\n"
    "                 [--allow-fake-timings] [-j N] [--cache-dir DIR] [--template-dir DIR]\n"
    "\n"
    "Compiles (or takes from the cache) every kernel of the specs for every arch of\n"
    "LIST and writes one bundle.  A spec that does not fit an arch (an sm90 kernel\n"
    "for sm_80) is skipped for that arch with one line on stderr; only an arch that\n"
    "gets no kernel at all is an error.  The same specs give byte-identical bundles.\n"
    "\n"
    "  --arch LIST       comma-separated archs, e.g. sm_80,sm_90a\n"
    "  --table FILE      carry this tuning table (from kiln tune) in the bundle\n"
    "  --allow-fake-timings\n"
    "                    accept a table measured with `kiln tune --timer fake`\n"
    "  -j N              parallel compiles (default: the number of cores)\n"
    "\n"
    "Exit: 0 ok, 1 a kernel failed to compile (no bundle written), 2 bad input.\n",
    KILN_OPT_CACHE_DIR | KILN_OPT_TEMPLATE_DIR | KILN_OPT_ARCH | KILN_OPT_OUTPUT | KILN_OPT_TABLE |
        KILN_OPT_JOBS | KILN_OPT_NO_CACHE | KILN_OPT_ALLOW_FAKE,
    run};
