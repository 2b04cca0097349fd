/*
 * cli.h — the `kiln` command's subcommands and their shared options.
 */
#ifndef KILN_CLI_H
#define KILN_CLI_H

#include "expand.h"
#include "jit.h"

enum { KILN_EXIT_OK = 0, KILN_EXIT_COMPILE = 1, KILN_EXIT_USAGE = 2 };

typedef struct kiln_cli_options {
    const char *cache_dir;
    const char *template_dir;
    const char *arch_list;       /* "sm_90a,sm_80"; NULL: each spec's own */
    const char *kernel;          /* emit: which kernel of a family */
    const char *output;          /* -o */
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

int kiln_cmd_emit(const kiln_cli_options *o, int n, char **args);
int kiln_cmd_compile(const kiln_cli_options *o, int n, char **args);
int kiln_cmd_cache(const kiln_cli_options *o, int n, char **args);
int kiln_cmd_catalog(const kiln_cli_options *o, int n, char **args);

/* Opens the expander with --template-dir or $KILN_TEMPLATE_DIR. */
kiln_status kiln_cli_expander(const kiln_cli_options *o, kiln_expander **ex, kiln_error *err);

#endif /* KILN_CLI_H */
