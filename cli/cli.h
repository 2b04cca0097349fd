/* SPDX-License-Identifier: Apache-2.0 */
/*
 * cli.h — the `kiln` command: its subcommands (one file each, cmd_*.c),
 * their shared option parsing (options.c), loading sets of specs (specs.c)
 * and building them in parallel (build.c).
 *
 * Exit codes, the same for every subcommand:
 *   0  ok
 *   1  a kernel failed to compile, or the work itself failed (a file could
 *      not be written, `cache verify` found damage, a timer broke)
 *   2  bad input: bad arguments, a bad spec, a file that is not a bundle,
 *      a cache or a tuning table
 */
#ifndef KILN_CLI_H
#define KILN_CLI_H

#include "expand.h"
#include "json.h"
#include "bundle.h"
#include "jit.h"

enum { KILN_EXIT_OK = 0, KILN_EXIT_COMPILE = 1, KILN_EXIT_USAGE = 2 };

/* The options a subcommand accepts (kiln_cli_command.options). */
enum {
    KILN_OPT_CACHE_DIR = 1u << 0,    /* --cache-dir DIR */
    KILN_OPT_TEMPLATE_DIR = 1u << 1, /* --template-dir DIR (also $KILN_TEMPLATE_DIR) */
    KILN_OPT_ARCH = 1u << 2,         /* --arch LIST */
    KILN_OPT_KERNEL = 1u << 3,       /* --kernel NAME */
    KILN_OPT_OUTPUT = 1u << 4,       /* -o FILE */
    KILN_OPT_TABLE = 1u << 5,        /* --table FILE */
    KILN_OPT_TUNED_SPECS = 1u << 6,  /* --tuned-specs DIR */
    KILN_OPT_JOBS = 1u << 7,         /* -j N */
    KILN_OPT_JSON = 1u << 8,         /* --json */
    KILN_OPT_NO_CACHE = 1u << 9,     /* --no-cache */
    KILN_OPT_SHAPES = 1u << 10,      /* tune: --shapes FILE */
    KILN_OPT_JOURNAL = 1u << 11,     /* tune: --journal FILE */
    KILN_OPT_TIMER = 1u << 12,       /* tune: --timer fake|gpu */
    KILN_OPT_PLOT = 1u << 13,        /* tune: --plot FILE.svg */
    KILN_OPT_CSV = 1u << 14,         /* tune: --csv */
    KILN_OPT_ALLOW_FAKE = 1u << 15,  /* pack: --allow-fake-timings */
    KILN_OPT_HOLD = 1u << 16,        /* tune: --hold SECONDS */
};

typedef struct kiln_cli_options {
    const char *command;         /* "pack": messages start "kiln pack: " */
    const char *cache_dir;
    const char *template_dir;
    const char *arch_list;       /* "sm_90a,sm_80"; NULL: each spec's own */
    const char *kernel;          /* emit: which kernel of a family */
    const char *output;          /* -o */
    const char *table;           /* pack, catalog: --table FILE (a tuning table) */
    const char *tuned_specs;     /* catalog: --tuned-specs DIR (the table's sweeps) */
    const char *shapes, *journal, *timer, *plot; /* tune */
    int jobs;                    /* -j; 0: number of cores */
    int json;
    int csv;
    int no_cache;
    int allow_fake_timings;
    double hold_s;               /* tune: --hold; 0: none */
} kiln_cli_options;

/* One subcommand: its name, a line for `kiln --help`, its own --help text,
 * the options it takes, and what runs it with the positional arguments. */
typedef struct kiln_cli_command {
    const char *name;
    const char *summary;
    const char *usage;
    unsigned options;
    int (*run)(const kiln_cli_options *o, int n, char **args);
} kiln_cli_command;

extern const kiln_cli_command kiln_cmd_emit, kiln_cmd_compile, kiln_cmd_cache, kiln_cmd_pack,
    kiln_cmd_bundle, kiln_cmd_catalog, kiln_cmd_tune;

/* Parses argv (argv[0] is the subcommand's name) with getopt_long against
 * the options cmd takes, then runs it; `--help` prints cmd->usage and
 * returns 0.  Returns the exit code. */
int kiln_cli_run(const kiln_cli_command *cmd, int argc, char **argv);


/* ---- sets of specs ------------------------------------------------------ */

/* One kernel to build: a spec (one point of a family) and one arch. */
typedef struct kiln_job {
    const kiln_spec *spec;
    char arch[KILN_ARCH_MAX];
} kiln_job;

typedef struct kiln_spec_set {
    kiln_spec_list *lists;
    size_t n_lists;
    kiln_job *jobs;
    size_t n_jobs;
    size_t dropped;
    size_t skipped;              /* (spec, arch) pairs left out by skip_unfit */
    size_t unselected;           /* jobs left out by kiln_spec_set_keep */
} kiln_spec_set;

/* Loads every spec named (files, or directories searched recursively for
 * *.yaml, in sorted order) and lists a job per kernel and arch.  A bad spec
 * prints its one-line error and returns KILN_EXIT_USAGE: nothing is built.
 * With --arch, each spec is validated for each arch: a spec that does not
 * fit one is bad input, unless skip_unfit, where it is left out for that
 * arch with one line on stderr, and only an arch that gets no kernel at all
 * is bad input. */
int kiln_spec_set_load(kiln_spec_set *set, const kiln_cli_options *o, int n, char **paths,
                       int skip_unfit);
void kiln_spec_set_free(kiln_spec_set *set);

/* Keeps only the jobs whose kernel is named in `names`: comma-separated
 * exact names, as tables, `kiln tune --csv` and `kiln compile` print them
 * (a family's points are NAME__m64_n256_...).  A name no job has, or an
 * empty one, is bad input (one line on stderr, KILN_EXIT_USAGE; the set is
 * left as it was). */
int kiln_spec_set_keep(kiln_spec_set *set, const char *names, const char *command);

/* ---- building ----------------------------------------------------------- */

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

/* Opens the expander with --template-dir or $KILN_TEMPLATE_DIR. */
kiln_status kiln_cli_expander(const kiln_cli_options *o, kiln_expander **ex, kiln_error *err);

/* Adds e to w as bundles carry it: with its compile time zeroed, so that
 * the same kernels give the same bytes however long NVRTC took. */
kiln_status kiln_cli_bundle_add(kiln_bundle_writer *w, const char *id, const char *name,
                                const kiln_cache_entry *e, kiln_error *err);


/* --json output: an object opened in *j over *sb, its first member
 * "kiln": the version; kiln_cli_json_print writes it to stdout (unless out
 * of memory) and frees sb. */
void kiln_cli_json_begin(kiln_json *j, kiln_strbuf *sb);
void kiln_cli_json_print(kiln_strbuf *sb);

#endif /* KILN_CLI_H */
