/* SPDX-License-Identifier: Apache-2.0 */
/*
 * specs.c — loading the specs a subcommand names (files, or directories of
 * *.yaml) into jobs: one per kernel and arch.
 */
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "cli.h"

typedef struct path_list {
    char **items;
    size_t n, cap;
} path_list;

static int path_push(path_list *l, const char *p)
{
    char **q = kiln_grow(l->items, &l->cap, l->n, sizeof *q, 16);
    if (!q) return 0;
    l->items = q;
    l->items[l->n] = strdup(p);
    return l->items[l->n++] != NULL;
}

static void path_list_free(path_list *l)
{
    for (size_t i = 0; i < l->n; i++) free(l->items[i]);
    free(l->items);
    memset(l, 0, sizeof *l);
}

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

static int has_yaml_suffix(const char *name)
{
    size_t n = strlen(name);
    return (n > 5 && !strcmp(name + n - 5, ".yaml")) || (n > 4 && !strcmp(name + n - 4, ".yml"));
}

/* Collects *.yaml under dir, recursively, in sorted order so output and
 * catalogs are deterministic. */
static int collect_dir(path_list *out, const char *dir)
{
    DIR *d = opendir(dir);
    if (!d) {
        fprintf(stderr, "kiln: %s: %s\n", dir, strerror(errno));
        return 0;
    }
    path_list here = {0};
    struct dirent *e;
    int ok = 1;
    while ((e = readdir(d)) && ok) {
        if (e->d_name[0] == '.') continue;
        char p[KILN_PATH_MAX];
        size_t dl = strlen(dir);
        snprintf(p, sizeof p, "%s%s%s", dir, dl && dir[dl - 1] == '/' ? "" : "/", e->d_name);
        struct stat st;
        if (stat(p, &st) != 0) continue;
        if (S_ISDIR(st.st_mode) || (S_ISREG(st.st_mode) && has_yaml_suffix(e->d_name)))
            ok = path_push(&here, p);
    }
    closedir(d);
    if (here.n) qsort(here.items, here.n, sizeof *here.items, cmp_str);
    for (size_t i = 0; i < here.n && ok; i++) {
        struct stat st;
        if (stat(here.items[i], &st) == 0 && S_ISDIR(st.st_mode)) ok = collect_dir(out, here.items[i]);
        else ok = path_push(out, here.items[i]);
    }
    path_list_free(&here);
    return ok;
}

static int collect(path_list *files, int n, char **paths)
{
    for (int i = 0; i < n; i++) {
        struct stat st;
        if (stat(paths[i], &st) != 0) {
            fprintf(stderr, "kiln: %s: %s\n", paths[i], strerror(errno));
            return 0;
        }
        if (S_ISDIR(st.st_mode) ? !collect_dir(files, paths[i]) : !path_push(files, paths[i]))
            return 0;
    }
    if (files->n == 0) {
        fprintf(stderr, "kiln: no specs given (files or directories of *.yaml)\n");
        return 0;
    }
    return 1;
}

/* Splits "sm_90a,sm_80" into archs; returns the count or -1. */
static int split_archs(const char *list, char archs[KILN_MAX_ARCHS][KILN_ARCH_MAX])
{
    int n = 0;
    const char *p = list;
    while (*p) {
        const char *c = strchr(p, ',');
        size_t len = c ? (size_t)(c - p) : strlen(p);
        if (len == 0 || len >= KILN_ARCH_MAX || n == KILN_MAX_ARCHS) return -1;
        memcpy(archs[n], p, len);
        archs[n][len] = '\0';
        n++;
        p += len + (c ? 1 : 0);
    }
    return n;
}

/* The (spec, arch) pairs, in load order, and whether each fits. */
typedef struct fit_map {
    char archs[KILN_MAX_ARCHS][KILN_ARCH_MAX];
    int n_archs;                 /* 0: each spec's own archs */
    unsigned char *fits;         /* [spec * n_archs + arch] */
} fit_map;

/* Validates every spec for every --arch.  A misfit is bad input, or with
 * skip a line on stderr; then an arch with no kernel at all is bad input. */
static int check_fit(kiln_spec_set *set, fit_map *f, kiln_expander *ex, const char *cmd, int skip)
{
    size_t n_specs = 0, at = 0;
    for (size_t i = 0; i < set->n_lists; i++) n_specs += set->lists[i].count;
    f->fits = calloc(n_specs * (size_t)f->n_archs + 1, 1);
    if (!f->fits) return 0;
    size_t per_arch[KILN_MAX_ARCHS] = {0};
    for (size_t i = 0; i < set->n_lists; i++)
        for (size_t k = 0; k < set->lists[i].count; k++, at++)
            for (int a = 0; a < f->n_archs; a++) {
                const kiln_spec *s = &set->lists[i].items[k];
                kiln_error verr;
                const char *key = NULL;
                kiln_error_clear(&verr);
                if (kiln_spec_validate_with(ex, &s->desc, f->archs[a], NULL, &verr, &key) == KILN_OK) {
                    f->fits[at * (size_t)f->n_archs + (size_t)a] = 1;
                    per_arch[a]++;
                    continue;
                }
                int line = s->line, col = s->col;
                if (key) kiln_spec_find_pos(s, key, &line, &col);
                char msg[512];
                kiln_printable(verr.msg, msg, sizeof msg);
                if (!skip) {
                    fprintf(stderr, "%s:%d:%d: %s\n", s->path, line, col, msg);
                    return 0;
                }
                set->skipped++;
                fprintf(stderr, "kiln %s: skipping %s for %s: %s:%d:%d: %s\n", cmd, s->desc.name,
                        f->archs[a], s->path, line, col, msg);
            }
    for (int a = 0; a < f->n_archs; a++)
        if (!per_arch[a]) {
            fprintf(stderr, "kiln %s: no kernel of the specs given fits %s\n", cmd, f->archs[a]);
            return 0;
        }
    return 1;
}

static int make_jobs(kiln_spec_set *set, const fit_map *f)
{
    size_t total = 0;
    for (size_t i = 0; i < set->n_lists; i++)
        for (size_t k = 0; k < set->lists[i].count; k++)
            total += f->n_archs ? (size_t)f->n_archs : (size_t)set->lists[i].items[k].desc.n_archs;
    set->jobs = calloc(total ? total : 1, sizeof *set->jobs);
    if (!set->jobs) return 0;
    size_t at = 0;
    for (size_t i = 0; i < set->n_lists; i++)
        for (size_t k = 0; k < set->lists[i].count; k++, at++) {
            const kiln_spec *s = &set->lists[i].items[k];
            int na = f->n_archs ? f->n_archs : s->desc.n_archs;
            for (int a = 0; a < na; a++) {
                if (f->n_archs && !f->fits[at * (size_t)f->n_archs + (size_t)a]) continue;
                kiln_job *j = &set->jobs[set->n_jobs++];
                j->spec = s;
                snprintf(j->arch, sizeof j->arch, "%s", f->n_archs ? f->archs[a] : s->desc.archs[a]);
            }
        }
    return 1;
}

int kiln_spec_set_load(kiln_spec_set *set, const kiln_cli_options *o, int n, char **paths,
                       int skip_unfit)
{
    memset(set, 0, sizeof *set);
    fit_map f;
    memset(&f, 0, sizeof f);
    if (o->arch_list) {
        f.n_archs = split_archs(o->arch_list, f.archs);
        if (f.n_archs <= 0) {
            fprintf(stderr, "kiln %s: --arch takes a comma-separated list of up to %d "
                            "architectures (got '%s')\n", o->command, KILN_MAX_ARCHS, o->arch_list);
            return KILN_EXIT_USAGE;
        }
    }
    /* The family rules that drop sweep points and refuse specs are the
     * templates', so --template-dir's when one is given. */
    kiln_expander *ex = NULL;
    kiln_error xerr;
    kiln_error_clear(&xerr);
    if (o->template_dir && kiln_cli_expander(o, &ex, &xerr) != KILN_OK) {
        fprintf(stderr, "kiln %s: %s\n", o->command, xerr.msg);
        return KILN_EXIT_USAGE;
    }
    path_list files = {0};
    int ok = collect(&files, n, paths);
    if (ok) {
        set->lists = calloc(files.n, sizeof *set->lists);
        ok = set->lists != NULL;
    }
    for (size_t i = 0; ok && i < files.n; i++) {
        kiln_error err;
        kiln_error_clear(&err);
        if (kiln_spec_load_with(files.items[i], ex, &set->lists[i], &err) != KILN_OK) {
            fprintf(stderr, "%s\n", err.msg);
            ok = 0;
            break;
        }
        set->n_lists++;
        set->dropped += set->lists[i].dropped;
    }
    path_list_free(&files);
    /* With --arch, every architecture passes the spec's own validation
     * before anything is built. */
    if (ok && f.n_archs) ok = check_fit(set, &f, ex, o->command, skip_unfit);
    if (ok) ok = make_jobs(set, &f);
    free(f.fits);
    kiln_expander_destroy(ex);
    if (!ok) {
        kiln_spec_set_free(set);
        return KILN_EXIT_USAGE;
    }
    return KILN_EXIT_OK;
}

int kiln_spec_set_keep(kiln_spec_set *set, const char *names, const char *command)
{
    char *list = strdup(names);
    unsigned char *keep = calloc(set->n_jobs ? set->n_jobs : 1, 1);
    int rc = list && keep ? KILN_EXIT_OK : KILN_EXIT_COMPILE;
    if (rc != KILN_EXIT_OK) fprintf(stderr, "kiln %s: out of memory\n", command);
    /* strsep, not strtok: ",," must show as an empty name, not vanish. */
    for (char *rest = list, *name; rc == KILN_EXIT_OK && (name = strsep(&rest, ","));) {
        size_t found = 0;
        for (size_t i = 0; i < set->n_jobs; i++) {
            if (strcmp(set->jobs[i].spec->desc.name, name)) continue;
            keep[i] = 1;
            found++;
        }
        if (found) continue;
        char shown[256], first[256];
        kiln_printable(name, shown, sizeof shown);
        if (!*name)
            fprintf(stderr, "kiln %s: --kernel '%s': an empty name in the list\n", command,
                    kiln_printable(names, first, sizeof first));
        else if (set->n_jobs)
            fprintf(stderr, "kiln %s: --kernel: no kernel of the specs is named '%s' (they give "
                            "%zu, the first %s)\n", command, shown, set->n_jobs,
                    kiln_printable(set->jobs[0].spec->desc.name, first, sizeof first));
        else
            fprintf(stderr, "kiln %s: --kernel: no kernel of the specs is named '%s' (they give "
                            "none)\n", command, shown);
        rc = KILN_EXIT_USAGE;
    }
    if (rc == KILN_EXIT_OK) {
        size_t n = 0;
        for (size_t i = 0; i < set->n_jobs; i++)
            if (keep[i]) set->jobs[n++] = set->jobs[i];
        set->unselected += set->n_jobs - n;
        set->n_jobs = n;
    }
    free(keep);
    free(list);
    return rc;
}

void kiln_spec_set_free(kiln_spec_set *set)
{
    for (size_t i = 0; i < set->n_lists; i++) kiln_spec_list_free(&set->lists[i]);
    free(set->lists);
    free(set->jobs);
    memset(set, 0, sizeof *set);
}
