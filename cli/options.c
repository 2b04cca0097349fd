/* SPDX-License-Identifier: Apache-2.0 */
/*
 * options.c — option parsing for every subcommand (getopt_long against the
 * options the subcommand takes), its --help, and small helpers the
 * subcommands share.
 */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"

/* Every option of kiln; a subcommand takes those its mask names. */
typedef struct option_row {
    unsigned bit;
    const char *name;            /* long name */
    int short_name;              /* 0: none */
    int has_arg;
} option_row;

static const option_row OPTIONS[] = {
    {KILN_OPT_CACHE_DIR, "cache-dir", 0, required_argument},
    {KILN_OPT_TEMPLATE_DIR, "template-dir", 0, required_argument},
    {KILN_OPT_ARCH, "arch", 0, required_argument},
    {KILN_OPT_KERNEL, "kernel", 0, required_argument},
    {KILN_OPT_OUTPUT, "output", 'o', required_argument},
    {KILN_OPT_TABLE, "table", 0, required_argument},
    {KILN_OPT_TUNED_SPECS, "tuned-specs", 0, required_argument},
    {KILN_OPT_JOBS, "jobs", 'j', required_argument},
    {KILN_OPT_JSON, "json", 0, no_argument},
    {KILN_OPT_NO_CACHE, "no-cache", 0, no_argument},
    {KILN_OPT_SHAPES, "shapes", 0, required_argument},
    {KILN_OPT_JOURNAL, "journal", 0, required_argument},
    {KILN_OPT_TIMER, "timer", 0, required_argument},
    {KILN_OPT_PLOT, "plot", 0, required_argument},
    {KILN_OPT_CSV, "csv", 0, no_argument},
    {KILN_OPT_ALLOW_FAKE, "allow-fake-timings", 0, no_argument},
    {KILN_OPT_HOLD, "hold", 0, required_argument},
};
enum { N_OPTIONS = sizeof OPTIONS / sizeof OPTIONS[0], OPT_HELP = 'h' };

/* Stores one parsed option; 0 on a bad value (reported). */
static int store(kiln_cli_options *o, unsigned bit, const char *v)
{
    switch (bit) {
    case KILN_OPT_CACHE_DIR: o->cache_dir = v; break;
    case KILN_OPT_TEMPLATE_DIR: o->template_dir = v; break;
    case KILN_OPT_ARCH: o->arch_list = v; break;
    case KILN_OPT_KERNEL: o->kernel = v; break;
    case KILN_OPT_OUTPUT: o->output = v; break;
    case KILN_OPT_TABLE: o->table = v; break;
    case KILN_OPT_TUNED_SPECS: o->tuned_specs = v; break;
    case KILN_OPT_SHAPES: o->shapes = v; break;
    case KILN_OPT_JOURNAL: o->journal = v; break;
    case KILN_OPT_TIMER: o->timer = v; break;
    case KILN_OPT_PLOT: o->plot = v; break;
    case KILN_OPT_JSON: o->json = 1; break;
    case KILN_OPT_CSV: o->csv = 1; break;
    case KILN_OPT_NO_CACHE: o->no_cache = 1; break;
    case KILN_OPT_ALLOW_FAKE: o->allow_fake_timings = 1; break;
    case KILN_OPT_JOBS: {
        char *end;
        long j = strtol(v, &end, 10);
        if (!*v || *end || j < 1 || j > 256) {
            fprintf(stderr, "kiln %s: -j takes a number from 1 to 256 (got '%s')\n", o->command,
                    v);
            return 0;
        }
        o->jobs = (int)j;
        break;
    }
    case KILN_OPT_HOLD: {
        char *end;
        double s = strtod(v, &end);
        if (!*v || *end || !(s > 0 && s <= 60)) {
            fprintf(stderr, "kiln %s: --hold takes seconds, more than 0 and at most 60 (got '%s')\n",
                    o->command, v);
            return 0;
        }
        o->hold_s = s;
        break;
    }
    default: return 0;
    }
    return 1;
}

/* Builds getopt_long's tables for the options in mask. */
static void tables(unsigned mask, struct option *longs, char *shorts)
{
    size_t nl = 0, ns = 0;
    shorts[ns++] = ':'; /* report a missing value as ':' */
    for (size_t i = 0; i < N_OPTIONS; i++) {
        if (!(mask & OPTIONS[i].bit)) continue;
        longs[nl++] = (struct option){OPTIONS[i].name, OPTIONS[i].has_arg, NULL, (int)(256 + i)};
        if (OPTIONS[i].short_name) {
            shorts[ns++] = (char)OPTIONS[i].short_name;
            if (OPTIONS[i].has_arg) shorts[ns++] = ':';
        }
    }
    longs[nl++] = (struct option){"help", no_argument, NULL, OPT_HELP};
    longs[nl] = (struct option){NULL, 0, NULL, 0};
    shorts[ns++] = 'h';
    shorts[ns] = '\0';
}

/* The row of a getopt_long result, or NULL. */
static const option_row *row_of(int c)
{
    if (c >= 256 && c < 256 + (int)N_OPTIONS) return &OPTIONS[c - 256];
    for (size_t i = 0; i < N_OPTIONS; i++)
        if (OPTIONS[i].short_name && OPTIONS[i].short_name == c) return &OPTIONS[i];
    return NULL;
}

/* Parses argv; 0 ok, 1 --help asked, 2 bad (reported).  Positional
 * arguments are moved to argv[optind..] by getopt_long's permutation. */
static int parse(const kiln_cli_command *cmd, int argc, char **argv, kiln_cli_options *o)
{
    struct option longs[N_OPTIONS + 2];
    char shorts[2 * N_OPTIONS + 4];
    tables(cmd->options, longs, shorts);
    opterr = 0;
    optind = 1;
    int help = 0, c;
    while ((c = getopt_long(argc, argv, shorts, longs, NULL)) != -1) {
        const char *seen = argv[optind - 1];
        if (c == OPT_HELP) {
            help = 1;
        } else if (c == '?') {
            if (optopt && optopt < 256) fprintf(stderr, "kiln %s: unknown option '-%c'", cmd->name, optopt);
            else fprintf(stderr, "kiln %s: unknown option '%s'", cmd->name, seen);
            fprintf(stderr, " (see kiln %s --help)\n", cmd->name);
            return 2;
        } else if (c == ':') {
            fprintf(stderr, "kiln %s: %s needs a value\n", cmd->name, seen);
            return 2;
        } else {
            const option_row *r = row_of(c);
            /* `--shapes --json` is a forgotten value, not a file named --json. */
            if (r && r->has_arg && optarg[0] == '-' && optarg[1]) {
                fprintf(stderr, "kiln %s: --%s needs a value (got the option '%s')\n", cmd->name,
                        r->name, optarg);
                return 2;
            }
            if (!r || !store(o, r->bit, optarg)) return 2;
        }
    }
    return help;
}

int kiln_cli_run(const kiln_cli_command *cmd, int argc, char **argv)
{
    kiln_cli_options o;
    memset(&o, 0, sizeof o);
    o.command = cmd->name;
    int p = parse(cmd, argc, argv, &o);
    if (p == 1) {
        fputs(cmd->usage, stdout);
        return KILN_EXIT_OK;
    }
    if (p) return KILN_EXIT_USAGE;
    if (!o.template_dir && (cmd->options & KILN_OPT_TEMPLATE_DIR)) {
        const char *t = getenv("KILN_TEMPLATE_DIR");
        if (t && *t) o.template_dir = t;
    }
    return cmd->run(&o, argc - optind, argv + optind);
}

kiln_status kiln_cli_expander(const kiln_cli_options *o, kiln_expander **ex, kiln_error *err)
{
    return kiln_expander_create(o->template_dir, ex, err);
}

kiln_status kiln_cli_bundle_add(kiln_bundle_writer *w, const char *id, const char *name,
                                const kiln_cache_entry *e, kiln_error *err)
{
    kiln_cache_entry copy = *e; /* shallow: the writer copies what it keeps */
    copy.stats.seconds = 0;
    return kiln_bundle_writer_add(w, id, name, &copy, err);
}

void kiln_cli_json_begin(kiln_json *j, kiln_strbuf *sb)
{
    kiln_strbuf_init(sb);
    kiln_json_init(j, sb, 2);
    kiln_json_object(j);
    kiln_json_kstring(j, "kiln", kiln_version());
}

void kiln_cli_json_print(kiln_strbuf *sb)
{
    if (!sb->oom) fputs(sb->data, stdout);
    kiln_strbuf_free(sb);
}
