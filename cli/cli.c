/*
 * cli.c — option parsing, loading sets of specs, and the small subcommands
 * of `kiln` (emit, cache).  `compile` lives in cmd_compile.c.
 */
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "cli.h"
#include "tuning.h"

static int need_value(int argc, char **argv, int i)
{
    if (i + 1 >= argc) {
        fprintf(stderr, "kiln: %s needs a value\n", argv[i]);
        return 0;
    }
    return 1;
}

int kiln_cli_parse(int argc, char **argv, kiln_cli_options *o, char ***rest, int *nrest)
{
    memset(o, 0, sizeof *o);
    *rest = calloc((size_t)argc + 1, sizeof **rest);
    *nrest = 0;
    if (!*rest) return KILN_EXIT_USAGE;
    for (int i = 0; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--cache-dir") || !strcmp(a, "--template-dir") || !strcmp(a, "--arch") ||
            !strcmp(a, "--kernel") || !strcmp(a, "-o") || !strcmp(a, "-j") ||
            !strcmp(a, "--table") || !strcmp(a, "--tuned-specs")) {
            if (!need_value(argc, argv, i)) goto bad;
            const char *v = argv[++i];
            if (!strcmp(a, "--cache-dir")) o->cache_dir = v;
            else if (!strcmp(a, "--template-dir")) o->template_dir = v;
            else if (!strcmp(a, "--arch")) o->arch_list = v;
            else if (!strcmp(a, "--kernel")) o->kernel = v;
            else if (!strcmp(a, "-o")) o->output = v;
            else if (!strcmp(a, "--table")) o->table = v;
            else if (!strcmp(a, "--tuned-specs")) o->tuned_specs = v;
            else {
                char *end;
                long j = strtol(v, &end, 10);
                if (*end || j < 1 || j > 256) {
                    fprintf(stderr, "kiln: -j takes a number from 1 to 256 (got '%s')\n", v);
                    goto bad;
                }
                o->jobs = (int)j;
            }
        } else if (!strncmp(a, "-j", 2) && a[2]) {
            char *end;
            long j = strtol(a + 2, &end, 10);
            if (*end || j < 1 || j > 256) {
                fprintf(stderr, "kiln: -j takes a number from 1 to 256 (got '%s')\n", a + 2);
                goto bad;
            }
            o->jobs = (int)j;
        } else if (!strcmp(a, "--json")) {
            o->json = 1;
        } else if (!strcmp(a, "--no-cache")) {
            o->no_cache = 1;
        } else if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            o->help = 1;
        } else if (a[0] == '-' && a[1]) {
            fprintf(stderr, "kiln: unknown option '%s' (see kiln --help)\n", a);
            goto bad;
        } else {
            (*rest)[(*nrest)++] = argv[i];
        }
    }
    if (!o->template_dir) {
        const char *t = getenv("KILN_TEMPLATE_DIR");
        if (t && *t) o->template_dir = t;
    }
    return KILN_EXIT_OK;
bad:
    free(*rest);
    *rest = NULL;
    return KILN_EXIT_USAGE;
}

kiln_status kiln_cli_expander(const kiln_cli_options *o, kiln_expander **ex, kiln_error *err)
{
    return kiln_expander_create(o->template_dir, ex, err);
}

/* ---- sets of specs ------------------------------------------------------ */

typedef struct path_list {
    char **items;
    size_t n, cap;
} path_list;

static int path_push(path_list *l, const char *p)
{
    if (l->n == l->cap) {
        size_t cap = l->cap ? l->cap * 2 : 16;
        char **q = realloc(l->items, cap * sizeof *q);
        if (!q) return 0;
        l->items = q;
        l->cap = cap;
    }
    l->items[l->n] = strdup(p);
    return l->items[l->n++] != NULL;
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
    for (size_t i = 0; i < here.n; i++) {
        struct stat st;
        if (ok && stat(here.items[i], &st) == 0 && S_ISDIR(st.st_mode))
            ok = collect_dir(out, here.items[i]);
        else if (ok)
            ok = path_push(out, here.items[i]);
        free(here.items[i]);
    }
    free(here.items);
    return ok;
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

int kiln_spec_set_load(kiln_spec_set *set, int n, char **paths, const char *arch_list)
{
    memset(set, 0, sizeof *set);
    char archs[KILN_MAX_ARCHS][KILN_ARCH_MAX];
    int n_archs = 0;
    if (arch_list) {
        n_archs = split_archs(arch_list, archs);
        if (n_archs <= 0) {
            fprintf(stderr, "kiln: --arch takes a comma-separated list of up to %d architectures "
                            "(got '%s')\n", KILN_MAX_ARCHS, arch_list);
            return KILN_EXIT_USAGE;
        }
    }
    path_list files = {0};
    int rc = KILN_EXIT_OK;
    for (int i = 0; i < n && rc == KILN_EXIT_OK; i++) {
        struct stat st;
        if (stat(paths[i], &st) != 0) {
            fprintf(stderr, "kiln: %s: %s\n", paths[i], strerror(errno));
            rc = KILN_EXIT_USAGE;
        } else if (S_ISDIR(st.st_mode)) {
            if (!collect_dir(&files, paths[i])) rc = KILN_EXIT_USAGE;
        } else if (!path_push(&files, paths[i])) {
            rc = KILN_EXIT_USAGE;
        }
    }
    if (rc == KILN_EXIT_OK && files.n == 0) {
        fprintf(stderr, "kiln: no specs given (files or directories of *.yaml)\n");
        rc = KILN_EXIT_USAGE;
    }
    if (rc == KILN_EXIT_OK) {
        set->lists = calloc(files.n, sizeof *set->lists);
        if (!set->lists) rc = KILN_EXIT_USAGE;
    }
    size_t total = 0;
    for (size_t i = 0; i < files.n && rc == KILN_EXIT_OK; i++) {
        kiln_error err;
        kiln_error_clear(&err);
        if (kiln_spec_load(files.items[i], &set->lists[i], &err) != KILN_OK) {
            fprintf(stderr, "%s\n", err.msg);
            rc = KILN_EXIT_USAGE;
            break;
        }
        set->n_lists++;
        set->dropped += set->lists[i].dropped;
        for (size_t k = 0; k < set->lists[i].count; k++) {
            const kiln_spec *s = &set->lists[i].items[k];
            /* With --arch, every architecture must pass the spec's own
             * validation before anything is built. */
            for (int a = 0; a < n_archs; a++) {
                kiln_error verr;
                const char *key = NULL;
                kiln_error_clear(&verr);
                if (kiln_spec_validate(&s->desc, archs[a], &verr, &key) != KILN_OK) {
                    int line = s->line, col = s->col;
                    if (key) kiln_spec_find_pos(s, key, &line, &col);
                    fprintf(stderr, "%s:%d:%d: %s\n", s->path, line, col, verr.msg);
                    rc = KILN_EXIT_USAGE;
                    break;
                }
            }
            if (rc != KILN_EXIT_OK) break;
            total += n_archs ? (size_t)n_archs : (size_t)s->desc.n_archs;
        }
    }
    for (size_t i = 0; i < files.n; i++) free(files.items[i]);
    free(files.items);
    if (rc != KILN_EXIT_OK) {
        kiln_spec_set_free(set);
        return rc;
    }
    set->jobs = calloc(total ? total : 1, sizeof *set->jobs);
    if (!set->jobs) {
        kiln_spec_set_free(set);
        return KILN_EXIT_USAGE;
    }
    for (size_t i = 0; i < set->n_lists; i++)
        for (size_t k = 0; k < set->lists[i].count; k++) {
            const kiln_spec *s = &set->lists[i].items[k];
            int na = n_archs ? n_archs : s->desc.n_archs;
            for (int a = 0; a < na; a++) {
                kiln_job *j = &set->jobs[set->n_jobs++];
                j->spec = s;
                snprintf(j->arch, sizeof j->arch, "%s", n_archs ? archs[a] : s->desc.archs[a]);
            }
        }
    return KILN_EXIT_OK;
}

void kiln_spec_set_free(kiln_spec_set *set)
{
    for (size_t i = 0; i < set->n_lists; i++) kiln_spec_list_free(&set->lists[i]);
    free(set->lists);
    free(set->jobs);
    memset(set, 0, sizeof *set);
}

/* ---- emit --------------------------------------------------------------- */

int kiln_cmd_emit(const kiln_cli_options *o, int n, char **args)
{
    if (n != 1) {
        fprintf(stderr, "kiln emit: takes one spec file (see kiln --help)\n");
        return KILN_EXIT_USAGE;
    }
    kiln_spec_set set;
    int rc = kiln_spec_set_load(&set, 1, args, o->arch_list);
    if (rc != KILN_EXIT_OK) return rc;
    const kiln_job *job = NULL;
    for (size_t i = 0; i < set.n_jobs && !job; i++)
        if (!o->kernel || !strcmp(set.jobs[i].spec->desc.name, o->kernel)) job = &set.jobs[i];
    if (!job) {
        fprintf(stderr, "kiln emit: %s has no kernel named '%s'\n", args[0],
                o->kernel ? o->kernel : "(any)");
        kiln_spec_set_free(&set);
        return KILN_EXIT_USAGE;
    }
    kiln_expander *ex = NULL;
    kiln_error err;
    kiln_error_clear(&err);
    char *src = NULL;
    kiln_launch_desc launch;
    if (kiln_cli_expander(o, &ex, &err) != KILN_OK ||
        kiln_expand(ex, job->spec, job->arch, &src, &launch, &err) != KILN_OK) {
        fprintf(stderr, "%s\n", err.msg);
        rc = KILN_EXIT_USAGE;
    } else {
        fputs(src, stdout);
    }
    free(src);
    if (ex) kiln_expander_destroy(ex);
    kiln_spec_set_free(&set);
    return rc;
}

/* ---- cache -------------------------------------------------------------- */

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
        printf("%.16s  DAMAGED  %s\n", key, problem ? problem : "");
        return;
    }
    w->bytes += e->cubin_size;
    if (w->verify) return;
    kiln_kernel_desc d;
    kiln_launch_desc l;
    kiln_error err;
    const char *name = e->desc && kiln_desc_parse(e->desc, &d, &l, &err) ? d.name : "?";
    printf("%.16s  %-8s %8zu B  %3d regs  %-40s\n", key, e->arch, e->cubin_size,
           e->stats.registers, name);
}

int kiln_cmd_cache(const kiln_cli_options *o, int n, char **args)
{
    if (n == 2 && !strcmp(args[0], "import")) return kiln_cmd_cache_import(o, args[1]);
    if (n == 3 && !strcmp(args[0], "export")) return kiln_cmd_cache_export(o, args[1], args[2]);
    if (n != 1 || (strcmp(args[0], "ls") && strcmp(args[0], "verify") && strcmp(args[0], "clear"))) {
        fprintf(stderr, "kiln cache: takes ls, verify, clear, import FILE or export DIR FILE "
                        "(see kiln --help)\n");
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
        }
    }
    kiln_cache_close(c);
    return rc;
}
