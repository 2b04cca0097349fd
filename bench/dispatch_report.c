/* SPDX-License-Identifier: Apache-2.0 */
/*
 * dispatch_report.c — kiln_bench --dispatch-report: how good dispatch's
 * choice is, per case, against the best kernel measured (issue 15: within
 * 3% of the best with the tables, the model alone within 8%).
 *
 * Needs no GPU: the dispatcher is pure (runtime/dispatch.h), so each
 * case's choice is computed here from the built-in catalog and table (or
 * --table FILE) exactly as a context on an sm_90a device makes it; its
 * time, and every other candidate's, comes from the measurements of one
 * `kiln tune --csv` run over the same shapes (scripts/tune_corpus.sh), so
 * the chosen kernel and the best one are timed by one timer in one run.
 *
 * The calls priced are those of each kind of call the CSV times (op, input
 * and output types, epilogue signature: bf16 fprop plain, fp8 row-wise
 * dgrad, wgrad accumulating, ...) that a default of the catalog serves;
 * the call of a kind is made the way kiln tune makes it (tuner.c,
 * kiln_tune_problem_of from the default's kiln_tune_config_of).
 * Four choices per case and kind:
 *   dispatch    the whole cascade with the tables (exact ▸ nearest ▸ twin ▸ model);
 *   model       the model alone over the catalog's defaults, no tables
 *               (what KILN_TUNING=off does today);
 *   model_all   the model alone over every catalog kernel, the tables'
 *               winners included (the tables' rules skipped);
 *   unseen      the cascade with the tables less every entry of the case's
 *               own class: how dispatch does on a shape no table holds
 *               (the nearest class, else the model), as the corpus's own
 *               classes are all measured once it is tuned.
 * A choice whose kernel the run did not time prints "-" and is left out of
 * the summary.  The summary gives every kind together, then (when the CSV
 * has more than one) each kind alone: kinds differ in how many defaults
 * the model has to choose between (bf16 fprop two, plain wgrad one), so
 * their columns mean different things.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "catalog.h"
#include "dispatch.h"
#include "dispatch_report.h"
#include "tune.h"

/* "fprop e4m3 e4m3 bf16 fp8_recipe=row": what kind of call a cell timed. */
#define KIND_MAX (16 + 3 * 8 + KILN_TUNING_SIG_MAX)

/* One timed cell of the CSV: variant, kind, shape, ms (correct results only). */
typedef struct cell {
    char variant[KILN_NAME_MAX], kind[KIND_MAX], shape[64];
    double ms;
} cell;

static void kind_name(const char *op, const char *a, const char *b, const char *out,
                      const char *sig, char kind[KIND_MAX])
{
    snprintf(kind, KIND_MAX, "%s %s %s %s %s", op, a, b, out, sig);
}

/* Splits one CSV line into at most max fields in place (quotes and
 * doubled quotes handled); returns the count. */
static int csv_split(char *line, char **f, int max)
{
    int n = 0;
    char *r = line, *w = line; /* w never passes r: one char written per char read */
    while (n < max) {
        f[n++] = w;
        int quoted = *r == '"';
        if (quoted) r++;
        for (;;) {
            if (quoted && r[0] == '"' && r[1] == '"') {
                *w++ = '"';
                r += 2;
            } else if (quoted && *r == '"') {
                quoted = 0;
                r++;
            } else if (!*r || *r == '\n' || *r == '\r' || (!quoted && *r == ',')) {
                break;
            } else {
                *w++ = *r++;
            }
        }
        int more = *r == ',';
        *w++ = '\0';
        if (!more) break;
        r++;
    }
    return n;
}

/* Reads kiln tune --csv: the timed, correct cells.  CSVs from before the
 * a,b,out columns timed bf16 only. */
static cell *load_cells(const char *path, size_t *n_out)
{
    FILE *f = fopen(path, "r");
    if (!f) {
        fprintf(stderr, "kiln_bench: cannot open %s\n", path);
        return NULL;
    }
    size_t n = 0, cap = 256;
    cell *c = malloc(cap * sizeof *c);
    char line[4096];
    int lineno = 0;
    while (c && fgets(line, sizeof line, f)) {
        char *fl[24];
        lineno++;
        int nf = csv_split(line, fl, 24);
        if (lineno == 1) {
            if (nf < 14 || strcmp(fl[0], "variant") || strcmp(fl[12], "median_ms")) {
                fprintf(stderr, "kiln_bench: %s:1: not kiln tune --csv output\n", path);
                free(c);
                c = NULL;
            }
            continue;
        }
        /* variant,arch,op,epilogue,shape,G,tpg,k,n,sizes,class,state,median_ms,tflops,...,a,b,out */
        if (nf < 14 || strcmp(fl[11], "timed") || !fl[13][0]) continue;
        if (n == cap) {
            cell *q = realloc(c, (cap *= 2) * sizeof *c);
            if (!q) break;
            c = q;
        }
        snprintf(c[n].variant, sizeof c[n].variant, "%s", fl[0]);
        int typed = nf >= 21;
        kind_name(fl[2], typed ? fl[18] : "bf16", typed ? fl[19] : "bf16", typed ? fl[20] : "bf16",
                  fl[3], c[n].kind);
        snprintf(c[n].shape, sizeof c[n].shape, "%s", fl[4]);
        c[n].ms = atof(fl[12]);
        if (c[n].ms > 0) n++;
    }
    fclose(f);
    *n_out = n;
    return c;
}

static double ms_of(const cell *c, size_t n, const char *shape, const char *kind, const char *kernel)
{
    for (size_t i = 0; i < n; i++)
        if (!strcmp(c[i].shape, shape) && !strcmp(c[i].kind, kind) && !strcmp(c[i].variant, kernel))
            return c[i].ms;
    return 0;
}

static const cell *best_of(const cell *c, size_t n, const char *shape, const char *kind)
{
    const cell *b = NULL;
    for (size_t i = 0; i < n; i++)
        if (!strcmp(c[i].shape, shape) && !strcmp(c[i].kind, kind) && (!b || c[i].ms < b->ms))
            b = &c[i];
    return b;
}

/* The catalog as dispatch candidates; n_defaults: how many lead it.  The
 * kinds of call its defaults serve, each with the config kiln tune times
 * it in. */
typedef struct report_catalog {
    kiln_kernel_desc *d;
    kiln_launch_desc *l;
    kiln_dispatch_kernel *k;
    size_t n, n_defaults;
    kiln_tune_config *cfg;
    char (*kind)[KIND_MAX];
    size_t n_kinds;
} report_catalog;

static void add_kind(report_catalog *rc, const kiln_kernel_desc *d)
{
    kiln_tune_config cfg;
    kiln_tune_config_of(d, &cfg);
    char kind[KIND_MAX];
    kind_name(kiln_op_name(cfg.op), kiln_dtype_name(cfg.a_type), kiln_dtype_name(cfg.b_type),
              kiln_dtype_name(cfg.out_type), cfg.sig, kind);
    for (size_t i = 0; i < rc->n_kinds; i++)
        if (!strcmp(rc->kind[i], kind)) return;
    rc->cfg[rc->n_kinds] = cfg;
    memcpy(rc->kind[rc->n_kinds++], kind, KIND_MAX);
}

static int open_catalog(report_catalog *rc)
{
    memset(rc, 0, sizeof *rc);
    size_t n = kiln_catalog_count;
    rc->d = calloc(n + 1, sizeof *rc->d);
    rc->l = calloc(n + 1, sizeof *rc->l);
    rc->k = calloc(n + 1, sizeof *rc->k);
    rc->cfg = calloc(n + 1, sizeof *rc->cfg);
    rc->kind = calloc(n + 1, sizeof *rc->kind);
    if (!rc->d || !rc->l || !rc->k || !rc->cfg || !rc->kind) return 0;
    for (size_t i = 0; i < n; i++) {
        kiln_error err;
        kiln_error_clear(&err);
        if (!kiln_desc_parse(kiln_catalog[i].desc, &rc->d[rc->n], &rc->l[rc->n], &err)) continue;
        rc->k[rc->n] = (kiln_dispatch_kernel){kiln_catalog[i].arch, &rc->d[rc->n], &rc->l[rc->n]};
        if (!kiln_catalog[i].tuned_only) {
            rc->n_defaults = rc->n + 1;
            add_kind(rc, &rc->d[rc->n]);
        }
        rc->n++;
    }
    return 1;
}

static void close_catalog(report_catalog *rc)
{
    free(rc->cfg);
    free(rc->kind);
    free(rc->d);
    free(rc->l);
    free(rc->k);
}

/* The name of the kernel dispatch chooses for p ("" when none). */
static const char *choose(const report_catalog *rc, size_t n_kernels, const kiln_tuning_table *t,
                          unsigned skip, const kiln_problem *p, kiln_dispatch_choice *ch)
{
    kiln_dispatch_input in = {p, "sm_90a", rc->k, n_kernels, KILN_ALLOW_GENERATED, NULL, t, NULL, NULL};
    kiln_dispatch_options o = {0, skip, {0}};
    kiln_error err;
    kiln_error_clear(&err);
    if (kiln_dispatch_with(&in, &o, ch, &err) != KILN_OK || ch->backend != KILN_BACKEND_GENERATED)
        return "";
    if (ch->tuned >= 0) return kiln_tuning_table_at(t, (size_t)ch->tuned)->kernel;
    return rc->d[ch->kernel].name;
}

/* t less the entries of key's class (same arch, op, types, signature,
 * shape class); NULL when out of memory. */
static kiln_tuning_table *without_class(const kiln_tuning_table *t, const kiln_tuning_key *key)
{
    kiln_tuning_table *out = NULL;
    kiln_error err;
    kiln_error_clear(&err);
    if (kiln_tuning_table_create(&out, &err) != KILN_OK) return NULL;
    for (size_t i = 0; i < kiln_tuning_table_count(t); i++) {
        const kiln_tuning_entry *e = kiln_tuning_table_at(t, i);
        if (!kiln_tuning_key_compare(&e->key, key)) continue;
        if (kiln_tuning_table_add(out, e, &err) != KILN_OK) {
            kiln_tuning_table_destroy(out);
            return NULL;
        }
    }
    return out;
}

/* Ratio statistics of one column. */
typedef struct column {
    double log_sum, worst;
    int n, within;
} column;

static void add_ratio(column *c, double r, double limit)
{
    c->log_sum += log(r);
    if (r > c->worst) c->worst = r;
    c->within += r <= limit;
    c->n++;
}

/* Prints ms / best and adds it to c[0] (every op) and c[slot] (its op). */
static void put_ratio(double ms, double best, column *c, int slot, double limit)
{
    if (ms > 0) {
        printf(" %7.3f", ms / best);
        add_ratio(&c[0], ms / best, limit);
        add_ratio(&c[slot], ms / best, limit);
    } else {
        printf(" %7s", "-");
    }
}

static const char *const rule_names[] = {"", "exact", "nearest", "model", "cublaslt", "twin"};

/* Prices each case's four choices for one kind of call (rc->kind[ki]),
 * adding the ratios to the columns' slot 0 (every kind) and 1 + ki. */
static void report_kind(const report_catalog *rc, size_t ki, const kiln_tuning_table *t,
                        const cell *cells, size_t n_cells, const kiln_tune_shape *cases,
                        size_t n_cases, column *cols[4])
{
    const char *kind = rc->kind[ki];
    int header = 0;
    for (size_t ci = 0; ci < n_cases; ci++) {
        const kiln_tune_shape *c = &cases[ci];
        const cell *best = best_of(cells, n_cells, c->name, kind);
        if (!best) continue;
        if (!header++) printf("# %s\n", kind);
        kiln_problem p;
        kiln_tune_problem_of(&rc->cfg[ki], c, &p);
        /* Non-NULL markers: dispatch reads only whether a pointer is given. */
        p.d_sizes = p.d_a = p.d_b = p.d_out = (void *)(uintptr_t)0x1000;
        kiln_dispatch_choice chd, chm, cha, chu;
        kiln_tuning_key key;
        kiln_tuning_key_from_problem(&p, "sm_90a", &key);
        kiln_tuning_table *rest = without_class(t, &key);
        const char *kd = choose(rc, rc->n_defaults, t, 0, &p, &chd);
        const char *km = choose(rc, rc->n_defaults, NULL, 0, &p, &chm);
        const char *ka = choose(rc, rc->n, NULL, 0, &p, &cha);
        const char *ku = rest ? choose(rc, rc->n_defaults, rest, 0, &p, &chu) : "";
        const char *chosen[4] = {kd, km, ka, ku};
        printf("%-26s %-5s %8.4f", c->name, kiln_op_name(p.op), best->ms);
        for (int i = 0; i < 4; i++)
            put_ratio(ms_of(cells, n_cells, c->name, kind, chosen[i]), best->ms, cols[i],
                      1 + (int)ki, i ? 1.08 : 1.03);
        printf("  %-8s %-8s %s / %s / %s / %s\n", rule_names[chd.rule],
               rest ? rule_names[chu.rule] : "-", best->variant, kd, km, ku);
        /* The choices name kernels of rest's entries: print first. */
        kiln_tuning_table_destroy(rest);
    }
}

int kiln_bench_dispatch_report(const char *csv_path, const kiln_tune_shape *cases, size_t n_cases,
                               const char *table_path)
{
    size_t n_cells = 0;
    cell *cells = load_cells(csv_path, &n_cells);
    if (!cells) return 2;
    kiln_error err;
    kiln_error_clear(&err);
    kiln_tuning_table *t = NULL;
    kiln_status st = table_path ? kiln_tuning_table_load(table_path, &t, &err)
                   : kiln_catalog_tuning ? kiln_tuning_table_parse(kiln_catalog_tuning,
                                                                   strlen(kiln_catalog_tuning),
                                                                   "built-in table", &t, &err)
                                         : kiln_tuning_table_create(&t, &err);
    report_catalog rc;
    column *cols[4] = {NULL};
    int ok = st == KILN_OK && open_catalog(&rc);
    for (int i = 0; ok && i < 4; i++) ok = (cols[i] = calloc(rc.n_kinds + 1, sizeof *cols[i])) != NULL;
    if (!ok) {
        fprintf(stderr, "kiln_bench: %s\n", st ? err.msg : "out of memory");
        for (int i = 0; i < 4; i++) free(cols[i]);
        if (st == KILN_OK) close_catalog(&rc);
        free(cells);
        kiln_tuning_table_destroy(t);
        return 2;
    }
    printf("dispatch vs the best kernel measured (%s, %zu timed cells; table %s, %zu entries; "
           "catalog %zu kernels, %zu defaults)\nratio = chosen / best ms; dispatch <= 1.03 and "
           "model <= 1.08 are the goals\n",
           csv_path, n_cells, table_path ? table_path : "built-in", kiln_tuning_table_count(t),
           rc.n, rc.n_defaults);
    printf("%-26s %-5s %8s %7s %7s %7s %7s  %-8s %-8s %s\n", "case", "op", "best_ms", "disp",
           "model", "mod_all", "unseen", "rule", "unseen", "best / dispatched / model / unseen");
    for (size_t ki = 0; ki < rc.n_kinds; ki++)
        report_kind(&rc, ki, t, cells, n_cells, cases, n_cases, cols);
    const char *names[4] = {"dispatch (tables)", "model alone (defaults)", "model alone (catalog)",
                            "unseen class"};
    /* Every kind together, then each kind alone when the CSV has more than one. */
    size_t kinds = 0;
    for (size_t ki = 0; ki < rc.n_kinds; ki++) kinds += cols[0][1 + ki].n > 0;
    for (size_t slot = 0; slot <= rc.n_kinds; slot++) {
        if (slot && (kinds < 2 || !cols[0][slot].n)) continue;
        for (int i = 0; i < 4; i++) {
            const column *c = &cols[i][slot];
            if (!c->n) continue;
            printf("%-24s %-6s geomean %.3f, worst %.3f, %d of %d within %s\n", names[i],
                   slot ? rc.kind[slot - 1] : "", exp(c->log_sum / c->n), c->worst, c->within,
                   c->n, i ? "8%" : "3%");
        }
    }
    for (int i = 0; i < 4; i++) free(cols[i]);
    close_catalog(&rc);
    kiln_tuning_table_destroy(t);
    free(cells);
    return 0;
}
