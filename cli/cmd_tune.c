/* SPDX-License-Identifier: Apache-2.0 */
/*
 * cmd_tune.c — `kiln tune SWEEP... --shapes FILE`: expand the sweep,
 * compile every variant in parallel (through the cache), time each usable
 * variant on each shape with a timer backend (one worker per device),
 * journal every measurement, then write the tuning table, a summary (or
 * JSON, or CSV) and optionally an SVG heat map.  The tuner's pieces live in
 * tuner.c and tune_gpu.c; this file drives them and does the printing.
 */
#include <math.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "json.h"
#include "tune.h"

/* ---- timing workers ----------------------------------------------------- */

typedef struct unit {
    size_t shape;
    size_t cfg_of;               /* a variant whose config the unit times */
} unit;

typedef struct run {
    kiln_tune_entry *v;
    size_t n_v;
    const kiln_tune_shape *shapes;
    size_t n_shapes;
    unit *units;
    size_t n_units, next_unit;
    kiln_tune_journal *journal;
    const char *timer_id;
    size_t todo, done, failed;
    long stop_after;             /* $KILN_TUNE_STOP_AFTER: kill ourselves after that many */
    int reverse;                 /* $KILN_TUNE_ORDER=reverse: a shape's variants last first */
    int progress;
    int log_units;               /* not a terminal: a line per finished unit */
    int abort;
    kiln_error error;            /* the first timer failure */
    double start;
    pthread_mutex_t lock;
} run;

typedef struct worker_arg {
    run *r;
    kiln_tune_timer *timer;
} worker_arg;

static void progress_line(run *r, const char *name, const char *shape)
{
    if (!r->progress) return;
    double el = kiln_now() - r->start;
    double eta = r->done ? el / (double)r->done * (double)(r->todo - r->done) : 0;
    fprintf(stderr, "\r\033[K[timed %zu/%zu] %zu failed, %.1fs, eta %.0fs  %s on %s", r->done,
            r->todo, r->failed, el, eta, name, shape);
    fflush(stderr);
}

static void finish_cell(run *r, kiln_tune_entry *v, size_t s, const kiln_tune_measure *m,
                        int journal)
{
    kiln_tune_cell *c = &v->cells[s];
    c->state = m->ok ? KILN_TUNE_TIMED : KILN_TUNE_BAD;
    c->m = *m;
    r->done++;
    if (!m->ok) r->failed++;
    if (journal) {
        kiln_tune_record rec;
        memset(&rec, 0, sizeof rec);
        snprintf(rec.bundle_id, sizeof rec.bundle_id, "%s", v->bundle_id);
        kiln_tune_shape_id(&r->shapes[s], rec.shape_id, sizeof rec.shape_id);
        snprintf(rec.timer_id, sizeof rec.timer_id, "%s", r->timer_id);
        snprintf(rec.name, sizeof rec.name, "%s", v->name);
        rec.m = *m;
        kiln_error err;
        kiln_error_clear(&err);
        if (kiln_tune_journal_append(r->journal, &rec, &err) != KILN_OK && !r->abort) {
            r->abort = 1;
            r->error = err;
        }
        /* Test hook: die like `kill -9` once that many measurements are
         * journaled, to prove that a resumed run redoes none of them. */
        if (r->stop_after > 0 && --r->stop_after == 0) {
            fflush(stdout);
            fflush(stderr);
            kill(getpid(), SIGKILL);
        }
    }
}

static void *time_worker(void *arg)
{
    worker_arg *w = arg;
    run *r = w->r;
    kiln_tune_timer *t = w->timer;
    int32_t *sizes = NULL;
    for (;;) {
        pthread_mutex_lock(&r->lock);
        size_t ui = r->abort || r->next_unit >= r->n_units ? (size_t)-1 : r->next_unit++;
        pthread_mutex_unlock(&r->lock);
        if (ui == (size_t)-1) break;
        const unit *u = &r->units[ui];
        const kiln_tune_shape *shape = &r->shapes[u->shape];
        const kiln_tune_config *cfg = &r->v[u->cfg_of].cfg;
        free(sizes);
        sizes = malloc((size_t)shape->groups * sizeof *sizes);
        kiln_error err;
        kiln_error_clear(&err);
        kiln_status st;
        if (!sizes) {
            st = kiln_error_set(&err, KILN_ERROR_OUT_OF_MEMORY, "out of memory");
        } else {
            int64_t total = kiln_tune_shape_sizes(shape, sizes);
            st = t->ops->prepare(t, cfg, shape, sizes, total, &err);
        }
        if (st) {
            /* Not journaled: a rerun tries again (it may have been memory). */
            kiln_tune_measure m;
            memset(&m, 0, sizeof m);
            snprintf(m.note, sizeof m.note, "could not prepare %s on %s: %s", shape->name,
                     t->device, err.msg);
            pthread_mutex_lock(&r->lock);
            for (size_t i = 0; i < r->n_v; i++)
                if (r->v[i].usable && r->v[i].cells[u->shape].state == KILN_TUNE_PENDING &&
                    kiln_tune_config_equal(&r->v[i].cfg, cfg))
                    finish_cell(r, &r->v[i], u->shape, &m, 0);
            pthread_mutex_unlock(&r->lock);
            continue;
        }
        for (size_t k = 0; k < r->n_v; k++) {
            /* A shape's variants run back to back, so a late one runs on a
             * hotter card: rounds in both orders undo that (docs/tuning.md). */
            kiln_tune_entry *v = &r->v[r->reverse ? r->n_v - 1 - k : k];
            if (!v->usable || v->cells[u->shape].state != KILN_TUNE_PENDING ||
                !kiln_tune_config_equal(&v->cfg, cfg))
                continue;
            pthread_mutex_lock(&r->lock);
            int stop = r->abort;
            progress_line(r, v->name, shape->name);
            pthread_mutex_unlock(&r->lock);
            if (stop) break;
            kiln_tune_variant var = {&v->desc, &v->launch, v->arch, NULL, 0};
            var.cubin = v->cubin;
            var.cubin_size = v->cubin_size;
            kiln_tune_measure m;
            memset(&m, 0, sizeof m);
            kiln_error_clear(&err);
            st = t->ops->time(t, &var, &m, &err);
            pthread_mutex_lock(&r->lock);
            if (st) {
                if (!r->abort) {
                    r->abort = 1;
                    kiln_error_set(&r->error, st, "%s: timing %s on %s: %s", t->device, v->name,
                                   shape->name, err.msg);
                }
            } else {
                finish_cell(r, v, u->shape, &m, 1);
                if (m.fatal && !r->abort) {
                    r->abort = 1;
                    kiln_error_set(&r->error, KILN_ERROR_DRIVER,
                                   "%s: %s broke the CUDA context (%s); it is marked failed in "
                                   "the journal, run again to go on", t->device, v->name, m.note);
                }
            }
            pthread_mutex_unlock(&r->lock);
            if (st || m.fatal) break;
        }
        t->ops->cleanup(t);
        if (r->log_units) {
            /* Not a terminal (a log, a batch job): one line per finished unit. */
            pthread_mutex_lock(&r->lock);
            fprintf(stderr, "kiln tune: %s done on %s (%s %s; %zu/%zu measurements, %.1fs)\n",
                    shape->name, t->device, kiln_op_name(cfg->op), cfg->sig, r->done, r->todo,
                    kiln_now() - r->start);
            pthread_mutex_unlock(&r->lock);
        }
    }
    free(sizes);
    return NULL;
}

/* ---- printing ----------------------------------------------------------- */

static const char *state_name(kiln_tune_state s)
{
    switch (s) {
    case KILN_TUNE_TIMED: return "timed";
    case KILN_TUNE_BAD: return "failed";
    case KILN_TUNE_SKIPPED: return "skipped";
    default: return "pending";
    }
}

typedef struct summary {
    size_t variants, usable, compile_failed, spilled, serialized, other_arch, dropped;
    size_t unselected;           /* sweep points left out by --kernel */
    size_t measured_now, from_journal, failed_cells;
    const char *table_path, *journal_path, *plot_path;
    const char *timer_id, *timer_device;
    int devices;
    size_t journal_skipped;
    int journal_repaired;
} summary;

/* TFLOP/s of a timed cell; NaN when not timed (JSON writes null). */
static double cell_tflops(const run *r, size_t i, size_t s)
{
    const kiln_tune_cell *c = &r->v[i].cells[s];
    if (c->state != KILN_TUNE_TIMED || !(c->m.median_ms > 0)) return NAN;
    return kiln_tune_shape_flops(&r->shapes[s]) / (c->m.median_ms * 1e9);
}

static void json_counts(kiln_json *j, const summary *sm, const kiln_tuning_table *table)
{
    kiln_json_key(j, "counts");
    kiln_json_object(j);
    kiln_json_kint(j, "variants", (long long)sm->variants);
    kiln_json_kint(j, "usable", (long long)sm->usable);
    kiln_json_kint(j, "compile_failed", (long long)sm->compile_failed);
    kiln_json_kint(j, "spilled", (long long)sm->spilled);
    kiln_json_kint(j, "wgmma_serialized", (long long)sm->serialized);
    kiln_json_kint(j, "other_arch", (long long)sm->other_arch);
    kiln_json_kint(j, "dropped", (long long)sm->dropped);
    kiln_json_kint(j, "unselected", (long long)sm->unselected);
    kiln_json_kint(j, "measured", (long long)sm->measured_now);
    kiln_json_kint(j, "from_journal", (long long)sm->from_journal);
    kiln_json_kint(j, "failed_measurements", (long long)sm->failed_cells);
    kiln_json_kint(j, "table_entries", (long long)kiln_tuning_table_count(table));
    kiln_json_end(j);
}

static void json_shapes(kiln_json *j, const run *r)
{
    kiln_json_key(j, "shapes");
    kiln_json_array(j);
    for (size_t s = 0; s < r->n_shapes; s++) {
        const kiln_tune_shape *sh = &r->shapes[s];
        kiln_shape_class c;
        char cls[48];
        kiln_shape_class_of(sh->groups, kiln_tune_shape_total(sh), sh->n, sh->k, &c);
        kiln_shape_class_name(&c, cls, sizeof cls);
        kiln_json_object(j);
        kiln_json_kstring(j, "name", sh->name);
        kiln_json_kint(j, "groups", sh->groups);
        kiln_json_kint(j, "tokens_per_group", (long long)sh->tokens_per_group);
        kiln_json_kint(j, "k", (long long)sh->k);
        kiln_json_kint(j, "n", (long long)sh->n);
        kiln_json_kstring(j, "sizes", sh->sizes);
        kiln_json_kstring(j, "class", cls);
        kiln_json_knumber(j, "flops", kiln_tune_shape_flops(sh));
        kiln_json_end(j);
    }
    kiln_json_end(j);
}

static void json_variants(kiln_json *j, const run *r)
{
    kiln_json_key(j, "variants");
    kiln_json_array(j);
    for (size_t i = 0; i < r->n_v; i++) {
        const kiln_tune_entry *v = &r->v[i];
        kiln_json_object(j);
        kiln_json_kstring(j, "name", v->name);
        kiln_json_kstring(j, "arch", v->arch);
        kiln_json_kbool(j, "usable", v->usable);
        kiln_json_kstring(j, "status", v->status);
        kiln_json_kstring(j, "bundle_id", v->bundle_id ? v->bundle_id : "");
        kiln_json_key(j, "results");
        kiln_json_array(j);
        for (size_t s = 0; s < r->n_shapes; s++) {
            const kiln_tune_cell *c = &v->cells[s];
            kiln_json_object(j);
            kiln_json_kstring(j, "shape", r->shapes[s].name);
            kiln_json_kstring(j, "state", state_name(c->state));
            if (c->state == KILN_TUNE_TIMED || c->state == KILN_TUNE_BAD) {
                kiln_json_knumber(j, "median_ms", c->m.median_ms);
                kiln_json_knumber(j, "rel_err", c->m.rel_err);
                kiln_json_kbool(j, "from_journal", c->from_journal);
                if (c->state == KILN_TUNE_TIMED) kiln_json_knumber(j, "tflops", cell_tflops(r, i, s));
                if (c->m.note[0]) kiln_json_kstring(j, "note", c->m.note);
            }
            kiln_json_end(j);
        }
        kiln_json_end(j);
        kiln_json_end(j);
    }
    kiln_json_end(j);
}

static void print_json(const run *r, const kiln_tuning_table *table, const summary *sm,
                       const kiln_spec_set *set)
{
    kiln_strbuf sb;
    kiln_json j;
    kiln_cli_json_begin(&j, &sb);
    kiln_json_kstring(&j, "timer", sm->timer_id);
    kiln_json_kstring(&j, "device", sm->timer_device);
    kiln_json_kint(&j, "workers", sm->devices);
    kiln_json_kstring(&j, "table", sm->table_path);
    kiln_json_kstring(&j, "journal", sm->journal_path);
    json_counts(&j, sm, table);
    kiln_json_key(&j, "dropped");
    kiln_json_array(&j);
    for (size_t i = 0; i < set->n_lists; i++)
        for (size_t k = 0; k < set->lists[i].dropped; k++)
            kiln_json_string(&j, set->lists[i].dropped_reasons ? set->lists[i].dropped_reasons[k] : "");
    kiln_json_end(&j);
    json_shapes(&j, r);
    json_variants(&j, r);
    kiln_json_key(&j, "entries");
    kiln_json_array(&j);
    for (size_t i = 0; i < kiln_tuning_table_count(table); i++) {
        const kiln_tuning_entry *e = kiln_tuning_table_at(table, i);
        kiln_strbuf k;
        kiln_strbuf_init(&k);
        kiln_tuning_key_format(&e->key, &k);
        kiln_json_object(&j);
        kiln_json_kstring(&j, "key", k.data ? k.data : "");
        kiln_json_kstring(&j, "kernel", e->kernel);
        kiln_json_knumber(&j, "median_ms", e->median_ms);
        kiln_json_kstring(&j, "runnerup", e->runnerup);
        kiln_json_knumber(&j, "runnerup_ms", e->runnerup[0] ? e->runnerup_ms : NAN);
        kiln_json_end(&j);
        kiln_strbuf_free(&k);
    }
    kiln_json_end(&j);
    kiln_json_end(&j);
    kiln_cli_json_print(&sb);
}

/* A CSV field: quoted when it holds a comma, a quote or a line break. */
static void csv_field(const char *s, int last)
{
    if (strpbrk(s, ",\"\r\n")) {
        putchar('"');
        for (; *s; s++) {
            if (*s == '"') putchar('"');
            putchar(*s);
        }
        putchar('"');
    } else {
        fputs(s, stdout);
    }
    putchar(last ? '\n' : ',');
}

/* One line per (variant, shape): everything a spreadsheet needs, the
 * winner flag being the table's choice for that cell's tuning key. */
static void print_csv(const run *r, const kiln_tuning_table *table)
{
    /* a, b, out last: the types of the call, which the key holds and the
     * signature does not (scripts/table_from_csv.py reads them; CSVs of
     * older runs lack them); the first columns keep their places. */
    printf("variant,arch,op,epilogue,shape,groups,tokens_per_group,k,n,sizes,class,state,"
           "median_ms,tflops,rel_err,from_journal,winner,note,a,b,out\n");
    for (size_t i = 0; i < r->n_v; i++)
        for (size_t s = 0; s < r->n_shapes; s++) {
            const kiln_tune_entry *v = &r->v[i];
            const kiln_tune_shape *sh = &r->shapes[s];
            const kiln_tune_cell *c = &v->cells[s];
            char cls[48] = "", num[160];
            int winner = 0;
            kiln_shape_class sc;
            kiln_shape_class_of(sh->groups, kiln_tune_shape_total(sh), sh->n, sh->k, &sc);
            kiln_shape_class_name(&sc, cls, sizeof cls);
            if (v->usable) {
                kiln_tuning_key k;
                kiln_problem p;
                kiln_tune_problem_of(&v->cfg, sh, &p);
                kiln_tuning_key_from_problem(&p, v->arch, &k);
                const kiln_tuning_entry *e = kiln_tuning_lookup(table, &k);
                winner = e && v->bundle_id && !strcmp(e->bundle_id, v->bundle_id);
            }
            csv_field(v->name, 0);
            csv_field(v->arch, 0);
            csv_field(v->usable ? kiln_op_name(v->cfg.op) : "", 0);
            csv_field(v->usable ? v->cfg.sig : "", 0);
            csv_field(sh->name, 0);
            snprintf(num, sizeof num, "%d,%lld,%lld,%lld", sh->groups,
                     (long long)sh->tokens_per_group, (long long)sh->k, (long long)sh->n);
            fputs(num, stdout);
            putchar(',');
            csv_field(sh->sizes, 0);
            csv_field(cls, 0);
            csv_field(state_name(c->state), 0);
            int measured = c->state == KILN_TUNE_TIMED || c->state == KILN_TUNE_BAD;
            double tf = cell_tflops(r, i, s);
            char ms[32] = "", tfs[32] = "", rel[32] = "";
            if (measured) {
                snprintf(ms, sizeof ms, "%.6g", c->m.median_ms);
                snprintf(rel, sizeof rel, "%.3g", c->m.rel_err);
            }
            if (tf == tf) snprintf(tfs, sizeof tfs, "%.4g", tf); /* timed and correct only */
            printf("%s,%s,%s,%d,%d,", ms, tfs, rel, measured && c->from_journal, winner);
            csv_field(measured ? c->m.note : v->usable ? "" : v->status, 0);
            csv_field(v->usable ? kiln_dtype_name(v->cfg.a_type) : "", 0);
            csv_field(v->usable ? kiln_dtype_name(v->cfg.b_type) : "", 0);
            csv_field(v->usable ? kiln_dtype_name(v->cfg.out_type) : "", 1);
        }
}

static void print_text(const run *r, const kiln_tuning_table *table, const summary *sm,
                       const kiln_spec_set *set)
{
    printf("timer: %s on %s\n", sm->timer_id, sm->timer_device);
    if (sm->devices > 1) printf("timed on %d devices, one worker each\n", sm->devices);
    printf("%zu variants: %zu timed, %zu failed to compile, %zu spill registers, ", sm->variants,
           sm->usable, sm->compile_failed, sm->spilled);
    if (sm->serialized) printf("%zu with serialized wgmma, ", sm->serialized);
    printf("%zu for another arch; %zu sweep points dropped by validation", sm->other_arch,
           sm->dropped);
    if (sm->unselected) printf("; %zu left out by --kernel", sm->unselected);
    printf("\n");
    size_t shown = 0;
    for (size_t i = 0; i < set->n_lists; i++)
        for (size_t k = 0; k < set->lists[i].dropped && shown < 5; k++, shown++)
            printf("  dropped: %s\n", set->lists[i].dropped_reasons ? set->lists[i].dropped_reasons[k] : "?");
    if (sm->dropped > shown) printf("  ... and %zu more dropped (see --json)\n", sm->dropped - shown);
    for (size_t i = 0; i < r->n_v; i++)
        if (!r->v[i].usable) printf("  not timed: %s (%s): %s\n", r->v[i].name, r->v[i].arch, r->v[i].status);
    printf("%zu measurements: %zu now, %zu from the journal, %zu failed\n\n",
           sm->measured_now + sm->from_journal, sm->measured_now, sm->from_journal,
           sm->failed_cells);

    /* TFLOP/s matrix. */
    printf("%-48s", "TFLOP/s");
    for (size_t s = 0; s < r->n_shapes; s++) printf(" %12.12s", r->shapes[s].name);
    printf("\n");
    for (size_t i = 0; i < r->n_v; i++) {
        const kiln_tune_entry *v = &r->v[i];
        if (!v->usable) continue;
        printf("%-48.48s", v->name);
        for (size_t s = 0; s < r->n_shapes; s++) {
            const kiln_tune_cell *c = &v->cells[s];
            if (c->state == KILN_TUNE_TIMED)
                printf(" %12.1f", kiln_tune_shape_flops(&r->shapes[s]) / (c->m.median_ms * 1e9));
            else
                printf(" %12s", c->state == KILN_TUNE_BAD ? "failed" : "-");
        }
        printf("\n");
    }
    for (size_t i = 0; i < r->n_v; i++)
        for (size_t s = 0; s < r->n_shapes; s++)
            if (r->v[i].cells[s].state == KILN_TUNE_BAD)
                printf("  failed: %s on %s: %s\n", r->v[i].name, r->shapes[s].name,
                       r->v[i].cells[s].m.note);

    printf("\nbest per key (ARCH OP A B OUT EPILOGUE CLASS):\n");
    for (size_t i = 0; i < kiln_tuning_table_count(table); i++) {
        const kiln_tuning_entry *e = kiln_tuning_table_at(table, i);
        kiln_strbuf k;
        kiln_strbuf_init(&k);
        kiln_tuning_key_format(&e->key, &k);
        /* TFLOP/s of the first shape of this key, for a feel of the numbers. */
        double tf = 0;
        for (size_t s = 0; s < r->n_shapes && tf == 0; s++)
            for (size_t v = 0; v < r->n_v; v++)
                if (!strcmp(r->v[v].name, e->kernel) && r->v[v].cells[s].state == KILN_TUNE_TIMED) {
                    kiln_tuning_key vk;
                    kiln_problem p;
                    kiln_tune_problem_of(&r->v[v].cfg, &r->shapes[s], &p);
                    kiln_tuning_key_from_problem(&p, r->v[v].arch, &vk);
                    if (!kiln_tuning_key_compare(&vk, &e->key))
                        tf = kiln_tune_shape_flops(&r->shapes[s]) / (r->v[v].cells[s].m.median_ms * 1e9);
                    break;
                }
        printf("  %s\n      %s  %.4f ms  %.1f TFLOP/s", k.data ? k.data : "", e->kernel,
               e->median_ms, tf);
        if (e->runnerup[0])
            printf("   runner-up %s %.4f ms (+%.1f%%)\n", e->runnerup, e->runnerup_ms,
                   100.0 * (e->runnerup_ms / e->median_ms - 1.0));
        else
            printf("   no runner-up\n");
        kiln_strbuf_free(&k);
    }
    printf("\nwrote %s (%zu entries); journal %s", sm->table_path, kiln_tuning_table_count(table),
           sm->journal_path);
    if (sm->plot_path) printf("; plot %s", sm->plot_path);
    printf("\n");
}

static int make_timers(const char *name, const kiln_cli_options *o, kiln_tune_timer ***out,
                       int *n)
{
    kiln_error err;
    kiln_error_clear(&err);
    int count = 1;
    if (!strcmp(name, "gpu")) {
        if (kiln_tune_gpu_count(&count, &err) != KILN_OK) {
            fprintf(stderr, "kiln tune: no GPU to time on: %s\n"
                            "  (use --timer fake, or KILN_TUNE_TIMER=fake, for a dry run)\n",
                    err.msg);
            return KILN_EXIT_COMPILE;
        }
    } else {
        const char *env = getenv("KILN_TUNE_FAKE_DEVICES");
        if (env && *env) {
            count = atoi(env);
            if (count < 1 || count > 64) {
                fprintf(stderr, "kiln tune: KILN_TUNE_FAKE_DEVICES=%s: expected 1 to 64\n", env);
                return KILN_EXIT_USAGE;
            }
        }
    }
    kiln_tune_timer **t = calloc((size_t)count, sizeof *t);
    if (!t) return KILN_EXIT_COMPILE;
    for (int i = 0; i < count; i++) {
        kiln_status st = !strcmp(name, "gpu")
                             ? kiln_tune_gpu_create(i, o->cache_dir, o->hold_s, &t[i], &err)
                             : kiln_tune_fake_create(i, &t[i], &err);
        if (st) {
            fprintf(stderr, "kiln tune: device %d: %s\n", i, err.msg);
            for (int k = 0; k < i; k++) kiln_tune_timer_destroy(t[k]);
            free(t);
            return KILN_EXIT_COMPILE;
        }
    }
    *out = t;
    *n = count;
    return KILN_EXIT_OK;
}

/* ---- the command -------------------------------------------------------- */

/* Everything one `kiln tune` holds, released by tune_free. */
typedef struct tune {
    const kiln_cli_options *o;
    int n_paths;
    char **paths;
    const char *timer_name, *table_path, *journal_path;
    char journal_buf[KILN_PATH_MAX];
    kiln_tune_shape *shapes;
    size_t n_shapes;
    kiln_spec_set set;
    kiln_tune_timer **timers;
    int n_timers;
    kiln_tune_journal *journal;
    kiln_build_result *results;
    kiln_tune_entry *v;
    summary sm;
    run r;
    kiln_tuning_table *table;
} tune;

static int check_args(tune *t)
{
    const kiln_cli_options *o = t->o;
    t->timer_name = o->timer;
    if (!t->timer_name) t->timer_name = getenv("KILN_TUNE_TIMER");
    if (!t->timer_name || !*t->timer_name) t->timer_name = "gpu";
    const char *why = NULL;
    if (t->n_paths < 1) why = "name at least one sweep spec";
    else if (!o->shapes) why = "--shapes FILE is required";
    else if (o->json && o->csv) why = "--json and --csv are two ways to print; pick one";
    const char *order = getenv("KILN_TUNE_ORDER");
    if (!order || !*order) order = "forward";
    if (why) fprintf(stderr, "kiln tune: %s (see kiln tune --help)\n", why);
    else if (strcmp(t->timer_name, "gpu") && strcmp(t->timer_name, "fake"))
        fprintf(stderr, "kiln tune: --timer takes fake or gpu (got '%s')\n", t->timer_name);
    else if (o->hold_s > 0 && strcmp(t->timer_name, "gpu"))
        fprintf(stderr, "kiln tune: --hold needs the gpu timer (the %s timer has no clock to "
                        "settle)\n", t->timer_name);
    else if (strcmp(order, "forward") && strcmp(order, "reverse"))
        fprintf(stderr, "kiln tune: KILN_TUNE_ORDER=%s: expected forward or reverse\n", order);
    else {
        t->r.reverse = !strcmp(order, "reverse");
        return KILN_EXIT_OK;
    }
    return KILN_EXIT_USAGE;
}

/* What one built job is for the tuner: usable, or why not. */
static void classify(tune *t, kiln_tune_entry *e, const kiln_job *j, const kiln_build_result *b)
{
    const char *timer_arch = t->n_timers ? t->timers[0]->arch : "";
    summary *sm = &t->sm;
    if (!b->ok) {
        /* First line of the compiler's message. */
        char first[120];
        snprintf(first, sizeof first, "%s", b->error);
        char *nl = strchr(first, '\n');
        if (nl) *nl = '\0';
        snprintf(e->status, sizeof e->status, "failed to compile: %s", first);
        sm->compile_failed++;
    } else if (b->stats.spill_stores + b->stats.spill_loads > 0) {
        snprintf(e->status, sizeof e->status, "spills (%d B stores, %d B loads, %d registers)",
                 b->stats.spill_stores, b->stats.spill_loads, b->stats.registers);
        sm->spilled++;
    } else if (b->stats.wgmma_serialized) {
        /* correct but slow on every k-block (store/nvrtc.c) */
        snprintf(e->status, sizeof e->status, "ptxas serialized its wgmma pipeline (C%d)",
                 b->stats.wgmma_serialized);
        sm->serialized++;
    } else if (timer_arch[0] && strcmp(timer_arch, j->arch)) {
        snprintf(e->status, sizeof e->status, "built for %s; the GPU is %s", j->arch, timer_arch);
        sm->other_arch++;
    } else {
        kiln_error perr;
        kiln_error_clear(&perr);
        if (!b->entry.desc || !kiln_desc_parse(b->entry.desc, &e->desc, &e->launch, &perr)) {
            snprintf(e->status, sizeof e->status, "bad description in the cache entry: %s",
                     perr.msg);
            sm->compile_failed++;
        } else {
            e->usable = 1;
            snprintf(e->status, sizeof e->status, "ok (%d registers)", b->stats.registers);
            sm->usable++;
        }
    }
    if (b->ok) {
        e->bundle_id = b->id;
        e->cache_key = b->entry.key;
        e->desc_text = b->entry.desc;
        e->cubin = b->entry.cubin;
        e->cubin_size = b->entry.cubin_size;
    }
    if (e->usable) kiln_tune_config_of(&e->desc, &e->cfg);
}

/* Cells the journal already has are not timed again. */
static void from_journal(tune *t, kiln_tune_entry *e)
{
    for (size_t s = 0; s < t->n_shapes; s++) {
        if (!e->usable) {
            e->cells[s].state = KILN_TUNE_SKIPPED;
            continue;
        }
        char sid[160];
        kiln_tune_shape_id(&t->shapes[s], sid, sizeof sid);
        const kiln_tune_record *rec = kiln_tune_journal_find(t->journal, e->bundle_id, sid,
                                                             t->sm.timer_id);
        if (rec) {
            e->cells[s].state = rec->m.ok ? KILN_TUNE_TIMED : KILN_TUNE_BAD;
            e->cells[s].m = rec->m;
            e->cells[s].from_journal = 1;
            t->sm.from_journal++;
        }
    }
}

static int make_variants(tune *t)
{
    t->v = calloc(t->set.n_jobs ? t->set.n_jobs : 1, sizeof *t->v);
    if (!t->v) return KILN_EXIT_COMPILE;
    t->sm.timer_id = t->n_timers ? t->timers[0]->id : t->timer_name;
    t->sm.timer_device = t->n_timers ? t->timers[0]->device : "";
    t->sm.devices = t->n_timers;
    for (size_t i = 0; i < t->set.n_jobs; i++) {
        kiln_tune_entry *e = &t->v[i];
        const kiln_job *j = &t->set.jobs[i];
        e->name = j->spec->desc.name;
        e->arch = j->arch;
        e->cells = calloc(t->n_shapes, sizeof *e->cells);
        if (!e->cells) return KILN_EXIT_COMPILE;
        t->sm.variants++;
        classify(t, e, j, &t->results[i]);
        from_journal(t, e);
    }
    t->sm.dropped = t->set.dropped;
    t->sm.unselected = t->set.unselected;
    t->sm.journal_skipped = kiln_tune_journal_skipped(t->journal);
    t->sm.journal_repaired = kiln_tune_journal_repaired(t->journal);
    return KILN_EXIT_OK;
}

/* Units: (shape, config) pairs with something left to time. */
static int plan_units(tune *t)
{
    run *r = &t->r;
    r->v = t->v;
    r->n_v = t->set.n_jobs;
    r->shapes = t->shapes;
    r->n_shapes = t->n_shapes;
    r->journal = t->journal;
    r->timer_id = t->sm.timer_id;
    r->progress = isatty(2) && !t->o->json && !t->o->csv;
    r->log_units = !isatty(2) && !t->o->json && !t->o->csv;
    r->start = kiln_now();
    const char *stop = getenv("KILN_TUNE_STOP_AFTER");
    r->stop_after = stop && *stop ? atol(stop) : 0;
    r->units = calloc(t->n_shapes * (r->n_v ? r->n_v : 1), sizeof *r->units);
    if (!r->units) return KILN_EXIT_COMPILE;
    for (size_t s = 0; s < t->n_shapes; s++)
        for (size_t i = 0; i < r->n_v; i++) {
            if (!t->v[i].usable || t->v[i].cells[s].state != KILN_TUNE_PENDING) continue;
            r->todo++;
            int seen = 0;
            for (size_t u = 0; u < r->n_units && !seen; u++)
                seen = r->units[u].shape == s &&
                       kiln_tune_config_equal(&t->v[r->units[u].cfg_of].cfg, &t->v[i].cfg);
            if (!seen) r->units[r->n_units++] = (unit){s, i};
        }
    if (t->sm.from_journal && !t->o->json && !t->o->csv)
        fprintf(stderr, "kiln tune: resuming from %s: %zu measurements done, %zu to go\n",
                t->journal_path, t->sm.from_journal, r->todo);
    if (t->sm.journal_repaired)
        fprintf(stderr, "kiln tune: %s: cut off a torn last line (an interrupted write)\n",
                t->journal_path);
    if (t->sm.journal_skipped)
        fprintf(stderr, "kiln tune: %s: %zu malformed lines ignored\n", t->journal_path,
                t->sm.journal_skipped);
    return KILN_EXIT_OK;
}

/* One worker per timer (device), each taking units until none are left. */
static int time_all(tune *t)
{
    run *r = &t->r;
    if (r->n_units) {
        int workers = t->n_timers;
        if ((size_t)workers > r->n_units) workers = (int)r->n_units;
        if (workers > 1 && !t->o->json && !t->o->csv)
            fprintf(stderr, "kiln tune: timing on %d devices, one worker each\n", workers);
        pthread_t *th = calloc((size_t)workers, sizeof *th);
        worker_arg *wa = calloc((size_t)workers, sizeof *wa);
        int started = 0;
        for (int w = 0; th && wa && w < workers; w++) {
            wa[w] = (worker_arg){r, t->timers[w]};
            if (pthread_create(&th[w], NULL, time_worker, &wa[w]) == 0) started++;
        }
        if (started == 0 && wa) {
            wa[0] = (worker_arg){r, t->timers[0]};
            time_worker(&wa[0]);
        }
        for (int w = 0; w < started; w++) pthread_join(th[w], NULL);
        free(th);
        free(wa);
        if (r->progress) fprintf(stderr, "\r\033[K");
    }
    t->sm.measured_now = r->done;
    if (r->abort) {
        fprintf(stderr, "kiln tune: %s\nkiln tune: no table written; %zu measurements are "
                        "in %s, run again to resume\n",
                r->error.msg, kiln_tune_journal_count(t->journal), t->journal_path);
        return KILN_EXIT_COMPILE;
    }
    for (size_t i = 0; i < r->n_v; i++)
        for (size_t s = 0; s < t->n_shapes; s++)
            t->sm.failed_cells += t->v[i].cells[s].state == KILN_TUNE_BAD;
    return KILN_EXIT_OK;
}

/* "sweep: A B C": every sweep named, for the table and the plot. */
static void sweeps_line(const tune *t, char *out, size_t size)
{
    size_t used = (size_t)snprintf(out, size, "sweep:");
    for (int i = 0; i < t->n_paths && used < size; i++)
        used += (size_t)snprintf(out + used, size - used, " %s", t->paths[i]);
}

static int choose_and_save(tune *t)
{
    kiln_error err;
    kiln_error_clear(&err);
    if (kiln_tuning_table_create(&t->table, &err) != KILN_OK ||
        kiln_tune_choose(t->v, t->set.n_jobs, t->shapes, t->n_shapes, t->table, &err) != KILN_OK) {
        fprintf(stderr, "kiln tune: %s\n", err.msg);
        return KILN_EXIT_COMPILE;
    }
    if (kiln_tuning_table_count(t->table) == 0) {
        fprintf(stderr, "kiln tune: no variant was timed correctly on any shape; no table "
                        "written\n");
        return KILN_EXIT_COMPILE;
    }
    char c0[256], c1[4096], c2[KILN_PATH_MAX + 16];
    /* pack --table reads the timer from this line: keep its form. */
    snprintf(c0, sizeof c0, "written by kiln tune %s; timer %s", kiln_version(), t->sm.timer_id);
    sweeps_line(t, c1, sizeof c1);
    snprintf(c2, sizeof c2, "shapes: %s", t->o->shapes);
    const char *comments[] = {
        c0, c1, c2,
        "ARCH OP A B OUT EPILOGUE CLASS -> KERNEL BUNDLE_ID CACHE_KEY MS RUNNERUP RUNNERUP_MS DESC",
        NULL};
    if (kiln_tuning_table_save(t->table, comments, t->table_path, &err) != KILN_OK) {
        fprintf(stderr, "kiln tune: %s\n", err.msg);
        return KILN_EXIT_COMPILE;
    }
    return KILN_EXIT_OK;
}

static int write_plot(tune *t)
{
    kiln_strbuf svg, title;
    kiln_strbuf_init(&svg);
    kiln_strbuf_init(&title);
    char sweeps[4096];
    sweeps_line(t, sweeps, sizeof sweeps);
    kiln_strbuf_printf(&title, "kiln tune on %s (timer %s)\n%s\nshapes: %s", t->sm.timer_device,
                       t->sm.timer_id, sweeps, t->o->shapes);
    kiln_tune_plot_svg(t->v, t->set.n_jobs, t->shapes, t->n_shapes, t->table,
                       title.data ? title.data : "", &svg);
    kiln_error err;
    kiln_error_clear(&err);
    int rc = KILN_EXIT_OK;
    if (svg.oom || title.oom ||
        kiln_file_write_atomic(t->o->plot, svg.data, svg.len, &err) != KILN_OK) {
        fprintf(stderr, "kiln tune: %s\n", svg.oom || title.oom ? "out of memory" : err.msg);
        rc = KILN_EXIT_COMPILE;
    }
    kiln_strbuf_free(&svg);
    kiln_strbuf_free(&title);
    t->sm.plot_path = t->o->plot;
    return rc;
}

/* Shapes, specs, timers and the journal: all the inputs, checked before
 * anything is compiled. */
static int open_inputs(tune *t)
{
    kiln_error err;
    kiln_error_clear(&err);
    t->table_path = t->o->output ? t->o->output : "kiln-tuning.txt";
    snprintf(t->journal_buf, sizeof t->journal_buf, "%s.journal", t->table_path);
    t->journal_path = t->o->journal ? t->o->journal : t->journal_buf;
    if (kiln_tune_shapes_load(t->o->shapes, &t->shapes, &t->n_shapes, &err) != KILN_OK) {
        fprintf(stderr, "kiln tune: %s\n", err.msg);
        return KILN_EXIT_USAGE;
    }
    int rc = kiln_spec_set_load(&t->set, t->o, t->n_paths, t->paths, 0);
    if (rc == KILN_EXIT_OK && t->o->kernel) rc = kiln_spec_set_keep(&t->set, t->o->kernel, "tune");
    if (rc != KILN_EXIT_OK) return rc;
    /* The devices first: no point compiling for an hour to find no GPU. */
    rc = make_timers(t->timer_name, t->o, &t->timers, &t->n_timers);
    if (rc != KILN_EXIT_OK) return rc;
    if (kiln_tune_journal_open(t->journal_path, &t->journal, &err) != KILN_OK) {
        fprintf(stderr, "kiln tune: %s\n", err.msg);
        return KILN_EXIT_USAGE;
    }
    return KILN_EXIT_OK;
}

static void tune_free(tune *t)
{
    kiln_tuning_table_destroy(t->table);
    free(t->r.units);
    pthread_mutex_destroy(&t->r.lock);
    if (t->v)
        for (size_t i = 0; i < t->set.n_jobs; i++) free(t->v[i].cells);
    free(t->v);
    kiln_build_results_free(t->results, t->set.n_jobs);
    kiln_tune_journal_close(t->journal);
    for (int i = 0; i < t->n_timers; i++) kiln_tune_timer_destroy(t->timers[i]);
    free(t->timers);
    kiln_spec_set_free(&t->set);
    free(t->shapes);
}

static int run_tune(const kiln_cli_options *o, int n, char **args)
{
    tune t;
    memset(&t, 0, sizeof t);
    t.o = o;
    t.n_paths = n;
    t.paths = args;
    pthread_mutex_init(&t.r.lock, NULL);
    int rc = check_args(&t);
    if (rc == KILN_EXIT_OK) rc = open_inputs(&t);
    size_t failed = 0;
    double seconds = 0;
    if (rc == KILN_EXIT_OK) rc = kiln_build_all(o, &t.set, 1, &t.results, &failed, &seconds);
    if (rc == KILN_EXIT_OK) rc = make_variants(&t);
    if (rc == KILN_EXIT_OK) rc = plan_units(&t);
    if (rc == KILN_EXIT_OK) rc = time_all(&t);
    if (rc == KILN_EXIT_OK) rc = choose_and_save(&t);
    if (rc == KILN_EXIT_OK && o->plot) rc = write_plot(&t);
    if (rc == KILN_EXIT_OK) {
        t.sm.table_path = t.table_path;
        t.sm.journal_path = t.journal_path;
        if (o->json) print_json(&t.r, t.table, &t.sm, &t.set);
        else if (o->csv) print_csv(&t.r, t.table);
        else print_text(&t.r, t.table, &t.sm, &t.set);
    }
    tune_free(&t);
    return rc;
}

const kiln_cli_command kiln_cmd_tune = {
    "tune", "time every kernel of a sweep on every shape; write a tuning table",
    "usage: kiln tune SWEEP... --shapes FILE [-o TABLE] [--journal FILE] [-j N]\n"
    "                 [--kernel NAME,...] [--timer fake|gpu] [--hold SECONDS]\n"
    "                 [--plot FILE.svg] [--json | --csv]\n"
    "                 [--arch LIST] [--cache-dir DIR] [--template-dir DIR]\n"
    "\n"
    "Compiles every kernel of the sweep specs (-j N in parallel, through the cache),\n"
    "times each on each shape of FILE (lines: name groups tokens_per_group K N sizes),\n"
    "and writes the fastest per (arch, op, types, epilogue, shape class) to TABLE\n"
    "(default kiln-tuning.txt).  Every measurement is appended to the journal\n"
    "(default TABLE.journal) as it ends, so a killed run resumes where it stopped.\n"
    "\n"
    "  --kernel L     only the kernels of the sweeps named in L (comma-separated, as\n"
    "                 tables and --csv name them): a few candidates of a sweep\n"
    "  --timer gpu    CUDA events on every GPU, one worker per GPU (the default;\n"
    "                 also $KILN_TUNE_TIMER)\n"
    "  --timer fake   deterministic times from a formula, no GPU (for CI; `kiln pack`\n"
    "                 refuses such a table without --allow-fake-timings)\n"
    "  --hold S       gpu timer: run each variant back to back for S seconds (0 < S <= 60)\n"
    "                 before timing it, so it is timed at the clock it settles to at the\n"
    "                 power limit, as a training step's long layers run; the timer's id,\n"
    "                 in the table and the journal, ends @held<S>s\n"
    "  --plot F.svg   heat map of TFLOP/s per variant and shape, winners per key outlined\n"
    "  --json         the whole result as JSON on stdout (no NaN: null)\n"
    "  --csv          one CSV line per variant and shape on stdout\n"
    "See docs/tuning.md.\n"
    "\n"
    "Exit: 0 ok, 1 no table (a timer failure, nothing timed), 2 bad input.\n",
    KILN_OPT_CACHE_DIR | KILN_OPT_TEMPLATE_DIR | KILN_OPT_ARCH | KILN_OPT_OUTPUT | KILN_OPT_JOBS |
        KILN_OPT_JSON | KILN_OPT_CSV | KILN_OPT_NO_CACHE | KILN_OPT_SHAPES | KILN_OPT_JOURNAL |
        KILN_OPT_TIMER | KILN_OPT_PLOT | KILN_OPT_HOLD | KILN_OPT_KERNEL,
    run_tune};
