/*
 * cli.h — the `kiln` command's subcommands and their shared options.
 */
#ifndef KILN_CLI_H
#define KILN_CLI_H

#include "expand.h"
#include "bundle.h"
#include "jit.h"

enum { KILN_EXIT_OK = 0, KILN_EXIT_COMPILE = 1, KILN_EXIT_USAGE = 2 };

typedef struct kiln_cli_options {
    const char *cache_dir;
    const char *template_dir;
    const char *arch_list;       /* "sm_90a,sm_80"; NULL: each spec's own */
    const char *kernel;          /* emit: which kernel of a family */
    const char *output;          /* -o */
    const char *table;           /* pack, catalog: --table FILE (a tuning table) */
    const char *tuned_specs;     /* catalog: --tuned-specs DIR (the table's sweeps) */
    int jobs;                    /* -j; 0: number of cores */
    int json;
    int help;
    int no_cache;
} kiln_cli_options;

/* Parses options anywhere among args; the rest (positional) go to *rest. */
int kiln_cli_parse(int argc, char **argv, kiln_cli_options *o, char ***rest, int *nrest);

/* One kernel to build: a spec (one point of a family) and one arch. */
typedef struct kiln_job {
    const kiln_spec *spec;
    char arch[KILN_ARCH_MAX];
} kiln_job;

/* Loads every spec named (files, or directories searched recursively for
 * *.yaml) and lists a job per kernel and arch.  On the first bad spec prints
 * its one-line error and returns KILN_EXIT_USAGE: nothing is built. */
typedef struct kiln_spec_set {
    kiln_spec_list *lists;
    size_t n_lists;
    kiln_job *jobs;
    size_t n_jobs;
    size_t dropped;
} kiln_spec_set;

int kiln_spec_set_load(kiln_spec_set *set, int n, char **paths, const char *arch_list);
void kiln_spec_set_free(kiln_spec_set *set);

/* What building one job gave. */
typedef struct kiln_build_result {
    int ok;
    kiln_jit_origin origin;
    kiln_compile_stats stats;
    size_t cubin_size;
    int smem_dynamic;            /* the launch's dynamic shared memory */
    double seconds;              /* wall time of this job, expansion included */
    char id[65];                 /* bundle id (when entries are kept) */
    kiln_cache_entry entry;      /* the cubin (when entries are kept) */
    char error[KILN_ERROR_MAX];
} kiln_build_result;

/* Expands and compiles (or takes from the cache) every job of set, -j in
 * parallel, with a progress line on a terminal.  *results has set->n_jobs
 * items; free with kiln_build_results_free. */
int kiln_build_all(const kiln_cli_options *o, const kiln_spec_set *set, int keep,
                   kiln_build_result **results, size_t *failed, double *seconds);
void kiln_build_results_free(kiln_build_result *r, size_t n);

int kiln_cmd_emit(const kiln_cli_options *o, int n, char **args);
int kiln_cmd_compile(const kiln_cli_options *o, int n, char **args);
int kiln_cmd_cache(const kiln_cli_options *o, int n, char **args);
int kiln_cmd_catalog(const kiln_cli_options *o, int n, char **args);
int kiln_cmd_pack(const kiln_cli_options *o, int n, char **args);
int kiln_cmd_bundle(const kiln_cli_options *o, int n, char **args);
/* `kiln cache import FILE` and `kiln cache export DIR FILE`. */
int kiln_cmd_cache_import(const kiln_cli_options *o, const char *bundle);
int kiln_cmd_cache_export(const kiln_cli_options *o, const char *dir, const char *bundle);

/* Opens the expander with --template-dir or $KILN_TEMPLATE_DIR. */
kiln_status kiln_cli_expander(const kiln_cli_options *o, kiln_expander **ex, kiln_error *err);

#endif /* KILN_CLI_H */
