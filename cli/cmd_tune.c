/*
 * cmd_tune.c — `kiln tune SWEEP... --shapes FILE`: expand the sweep,
 * compile every variant in parallel (through the cache), time each usable
 * variant on each shape with a timer backend (one worker per device),
 * journal every measurement, then write the tuning table, a summary (or
 * JSON) and optionally an SVG heat map.  The pieces live in tune.c and
 * tune_gpu.c; this file drives them and does the printing.
 */
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "tune.h"

typedef struct tune_args {
    const char *shapes;
    const char *journal;
    const char *timer;
    const char *plot;
} tune_args;

static void tune_usage(FILE *f)
{
    fprintf(f,
            "usage: kiln tune SWEEP... --shapes FILE [-o TABLE] [--journal FILE] [-j N]\n"
            "                 [--timer fake|gpu] [--plot FILE.svg] [--json] [--arch LIST]\n"
            "                 [--cache-dir DIR] [--template-dir DIR]\n"
            "\n"
            "Compiles every kernel of the sweep specs (-j N in parallel, through the cache),\n"
            "times each on each shape of FILE (lines: name groups tokens_per_group K N sizes),\n"
            "and writes the fastest per (arch, op, types, epilogue, shape class) to TABLE\n"
            "(default kiln-tuning.txt).  Every measurement is appended to the journal\n"
            "(default TABLE.journal) as it ends, so a killed run resumes where it stopped.\n"
            "\n"
            "  --timer gpu    CUDA events on every GPU, one worker per GPU (the default;\n"
            "                 also $KILN_TUNE_TIMER)\n"
            "  --timer fake   deterministic times from a formula, no GPU (for CI)\n"
            "  --plot F.svg   heat map of TFLOP/s per variant and shape\n"
            "See docs/tuning.md.\n");
}

/* Takes tune's own options out of argv; the rest go to kiln_cli_parse. */
static int split_args(int argc, char **argv, tune_args *t, char **rest, int *nrest)
{
    memset(t, 0, sizeof *t);
    *nrest = 0;
    for (int i = 0; i < argc; i++) {
        const char *a = argv[i];
        const char **slot = !strcmp(a, "--shapes")  ? &t->shapes
                            : !strcmp(a, "--journal") ? &t->journal
                            : !strcmp(a, "--timer")   ? &t->timer
                            : !strcmp(a, "--plot")    ? &t->plot
                                                      : NULL;
        if (!slot) {
            rest[(*nrest)++] = argv[i];
            continue;
        }
        if (i + 1 >= argc || (argv[i + 1][0] == '-' && argv[i + 1][1])) {
            fprintf(stderr, "kiln tune: %s needs a value%s%s%s\n", a,
                    i + 1 < argc ? " (got the option '" : "", i + 1 < argc ? argv[i + 1] : "",
                    i + 1 < argc ? "')" : "");
            return KILN_EXIT_USAGE;
        }
        *slot = argv[++i];
    }
    return KILN_EXIT_OK;
}

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
        for (size_t i = 0; i < r->n_v; i++) {
            kiln_tune_entry *v = &r->v[i];
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

static void json_str(FILE *f, const char *s)
{
    fputc('"', f);
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\') fprintf(f, "\\%c", c);
        else if (c < 32) fprintf(f, "\\u%04x", c);
        else fputc(c, f);
    }
    fputc('"', f);
}

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
    size_t variants, usable, compile_failed, spilled, other_arch, dropped;
    size_t measured_now, from_journal, failed_cells;
    const char *table_path, *journal_path, *plot_path;
    const char *timer_id, *timer_device;
    int devices;
    size_t journal_skipped;
    int journal_repaired;
} summary;

static void print_json(const run *r, const kiln_tuning_table *table, const summary *sm,
                       const kiln_spec_set *set)
{
    FILE *f = stdout;
    fprintf(f, "{\"kiln\": \"%s\", \"timer\": ", kiln_version());
    json_str(f, sm->timer_id);
    fprintf(f, ", \"device\": ");
    json_str(f, sm->timer_device);
    fprintf(f, ", \"workers\": %d, \"table\": ", sm->devices);
    json_str(f, sm->table_path);
    fprintf(f, ", \"journal\": ");
    json_str(f, sm->journal_path);
    fprintf(f, ",\n \"counts\": {\"variants\": %zu, \"usable\": %zu, \"compile_failed\": %zu, "
               "\"spilled\": %zu, \"other_arch\": %zu, \"dropped\": %zu, \"measured\": %zu, "
               "\"from_journal\": %zu, \"failed_measurements\": %zu, \"table_entries\": %zu},\n",
            sm->variants, sm->usable, sm->compile_failed, sm->spilled, sm->other_arch, sm->dropped,
            sm->measured_now, sm->from_journal, sm->failed_cells, kiln_tuning_table_count(table));
    fprintf(f, " \"dropped\": [");
    int first = 1;
    for (size_t i = 0; i < set->n_lists; i++)
        for (size_t k = 0; k < set->lists[i].dropped; k++) {
            fprintf(f, "%s\n   ", first ? "" : ",");
            json_str(f, set->lists[i].dropped_reasons ? set->lists[i].dropped_reasons[k] : "");
            first = 0;
        }
    fprintf(f, "],\n \"shapes\": [");
    for (size_t s = 0; s < r->n_shapes; s++) {
        const kiln_tune_shape *sh = &r->shapes[s];
        kiln_shape_class c;
        char cls[48];
        kiln_shape_class_of(sh->groups, kiln_tune_shape_total(sh), sh->n, sh->k, &c);
        kiln_shape_class_name(&c, cls, sizeof cls);
        fprintf(f, "%s\n   {\"name\": ", s ? "," : "");
        json_str(f, sh->name);
        fprintf(f, ", \"groups\": %d, \"tokens_per_group\": %lld, \"k\": %lld, \"n\": %lld, "
                   "\"sizes\": \"%s\", \"class\": \"%s\", \"flops\": %.6g}",
                sh->groups, (long long)sh->tokens_per_group, (long long)sh->k, (long long)sh->n,
                sh->sizes, cls, kiln_tune_shape_flops(sh));
    }
    fprintf(f, "],\n \"variants\": [");
    for (size_t i = 0; i < r->n_v; i++) {
        const kiln_tune_entry *v = &r->v[i];
        fprintf(f, "%s\n   {\"name\": ", i ? "," : "");
        json_str(f, v->name);
        fprintf(f, ", \"arch\": \"%s\", \"usable\": %s, \"status\": ", v->arch,
                v->usable ? "true" : "false");
        json_str(f, v->status);
        fprintf(f, ", \"bundle_id\": \"%s\", \"results\": [", v->bundle_id ? v->bundle_id : "");
        for (size_t s = 0; s < r->n_shapes; s++) {
            const kiln_tune_cell *c = &v->cells[s];
            fprintf(f, "%s{\"shape\": ", s ? ", " : "");
            json_str(f, r->shapes[s].name);
            fprintf(f, ", \"state\": \"%s\"", state_name(c->state));
            if (c->state == KILN_TUNE_TIMED || c->state == KILN_TUNE_BAD) {
                fprintf(f, ", \"median_ms\": %.6g, \"rel_err\": %.3g, \"from_journal\": %s",
                        c->m.median_ms, c->m.rel_err, c->from_journal ? "true" : "false");
                if (c->state == KILN_TUNE_TIMED)
                    fprintf(f, ", \"tflops\": %.4g",
                            kiln_tune_shape_flops(&r->shapes[s]) / (c->m.median_ms * 1e9));
                if (c->m.note[0]) {
                    fprintf(f, ", \"note\": ");
                    json_str(f, c->m.note);
                }
            }
            fputc('}', f);
        }
        fprintf(f, "]}");
    }
    fprintf(f, "],\n \"entries\": [");
    for (size_t i = 0; i < kiln_tuning_table_count(table); i++) {
        const kiln_tuning_entry *e = kiln_tuning_table_at(table, i);
        kiln_strbuf k;
        kiln_strbuf_init(&k);
        kiln_tuning_key_format(&e->key, &k);
        fprintf(f, "%s\n   {\"key\": ", i ? "," : "");
        json_str(f, k.data ? k.data : "");
        fprintf(f, ", \"kernel\": ");
        json_str(f, e->kernel);
        fprintf(f, ", \"median_ms\": %.6g, \"runnerup\": ", e->median_ms);
        json_str(f, e->runnerup);
        fprintf(f, ", \"runnerup_ms\": %.6g}", e->runnerup_ms);
        kiln_strbuf_free(&k);
    }
    fprintf(f, "]}\n");
}

static void print_text(const run *r, const kiln_tuning_table *table, const summary *sm,
                       const kiln_spec_set *set)
{
    printf("timer: %s on %s\n", sm->timer_id, sm->timer_device);
    if (sm->devices > 1) printf("timed on %d devices, one worker each\n", sm->devices);
    printf("%zu variants: %zu timed, %zu failed to compile, %zu spill registers, %zu for "
           "another arch; %zu sweep points dropped by validation\n",
           sm->variants, sm->usable, sm->compile_failed, sm->spilled, sm->other_arch,
           sm->dropped);
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

/* ---- the command -------------------------------------------------------- */

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
        kiln_status st = !strcmp(name, "gpu") ? kiln_tune_gpu_create(i, o->cache_dir, &t[i], &err)
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

int kiln_cmd_tune(int argc, char **argv)
{
    tune_args ta;
    char **pass = calloc((size_t)argc + 1, sizeof *pass);
    int npass = 0;
    if (!pass) return KILN_EXIT_USAGE;
    int rc = split_args(argc, argv, &ta, pass, &npass);
    kiln_cli_options o;
    char **paths = NULL;
    int n_paths = 0;
    if (rc == KILN_EXIT_OK) rc = kiln_cli_parse(npass, pass, &o, &paths, &n_paths);
    free(pass);
    if (rc != KILN_EXIT_OK) return rc;
    if (o.help) {
        tune_usage(stdout);
        free(paths);
        return KILN_EXIT_OK;
    }
    const char *timer_name = ta.timer;
    if (!timer_name) timer_name = getenv("KILN_TUNE_TIMER");
    if (!timer_name || !*timer_name) timer_name = "gpu";
    if (n_paths < 1 || !ta.shapes || (strcmp(timer_name, "gpu") && strcmp(timer_name, "fake"))) {
        if (n_paths < 1) fprintf(stderr, "kiln tune: name at least one sweep spec\n");
        else if (!ta.shapes) fprintf(stderr, "kiln tune: --shapes FILE is required\n");
        else fprintf(stderr, "kiln tune: --timer takes fake or gpu (got '%s')\n", timer_name);
        tune_usage(stderr);
        free(paths);
        return KILN_EXIT_USAGE;
    }
    const char *table_path = o.output ? o.output : "kiln-tuning.txt";
    char journal_buf[KILN_PATH_MAX];
    snprintf(journal_buf, sizeof journal_buf, "%s.journal", table_path);
    const char *journal_path = ta.journal ? ta.journal : journal_buf;

    kiln_error err;
    kiln_error_clear(&err);
    kiln_tune_shape *shapes = NULL;
    size_t n_shapes = 0;
    if (kiln_tune_shapes_load(ta.shapes, &shapes, &n_shapes, &err) != KILN_OK) {
        fprintf(stderr, "kiln tune: %s\n", err.msg);
        free(paths);
        return KILN_EXIT_USAGE;
    }
    kiln_spec_set set;
    rc = kiln_spec_set_load(&set, n_paths, paths, o.arch_list);
    if (rc != KILN_EXIT_OK) {
        free(shapes);
        free(paths);
        return rc;
    }
    /* The devices first: no point compiling for an hour to find no GPU. */
    kiln_tune_timer **timers = NULL;
    int n_timers = 0;
    rc = make_timers(timer_name, &o, &timers, &n_timers);
    kiln_tune_journal *journal = NULL;
    if (rc == KILN_EXIT_OK && kiln_tune_journal_open(journal_path, &journal, &err) != KILN_OK) {
        fprintf(stderr, "kiln tune: %s\n", err.msg);
        rc = KILN_EXIT_USAGE;
    }
    kiln_build_result *results = NULL;
    size_t failed = 0;
    double seconds = 0;
    if (rc == KILN_EXIT_OK) rc = kiln_build_all(&o, &set, 1, &results, &failed, &seconds);

    kiln_tune_entry *v = NULL;
    summary sm;
    memset(&sm, 0, sizeof sm);
    run r;
    memset(&r, 0, sizeof r);
    pthread_mutex_init(&r.lock, NULL);
    kiln_tuning_table *table = NULL;
    if (rc == KILN_EXIT_OK) {
        v = calloc(set.n_jobs ? set.n_jobs : 1, sizeof *v);
        if (!v) rc = KILN_EXIT_COMPILE;
    }
    const char *timer_arch = n_timers ? timers[0]->arch : "";
    sm.timer_id = n_timers ? timers[0]->id : timer_name;
    sm.timer_device = n_timers ? timers[0]->device : "";
    sm.devices = n_timers;
    for (size_t i = 0; rc == KILN_EXIT_OK && i < set.n_jobs; i++) {
        kiln_tune_entry *e = &v[i];
        const kiln_job *j = &set.jobs[i];
        kiln_build_result *b = &results[i];
        e->name = j->spec->desc.name;
        e->arch = j->arch;
        e->cells = calloc(n_shapes, sizeof *e->cells);
        if (!e->cells) {
            rc = KILN_EXIT_COMPILE;
            break;
        }
        sm.variants++;
        if (!b->ok) {
            /* First line of the compiler's message. */
            char first[120];
            snprintf(first, sizeof first, "%s", b->error);
            char *nl = strchr(first, '\n');
            if (nl) *nl = '\0';
            snprintf(e->status, sizeof e->status, "failed to compile: %s", first);
            sm.compile_failed++;
        } else if (b->stats.spill_stores + b->stats.spill_loads > 0) {
            snprintf(e->status, sizeof e->status, "spills (%d B stores, %d B loads, %d registers)",
                     b->stats.spill_stores, b->stats.spill_loads, b->stats.registers);
            sm.spilled++;
        } else if (timer_arch[0] && strcmp(timer_arch, j->arch)) {
            snprintf(e->status, sizeof e->status, "built for %s; the GPU is %s", j->arch,
                     timer_arch);
            sm.other_arch++;
        } else {
            kiln_error perr;
            kiln_error_clear(&perr);
            if (!b->entry.desc || !kiln_desc_parse(b->entry.desc, &e->desc, &e->launch, &perr)) {
                snprintf(e->status, sizeof e->status, "bad description in the cache entry: %s",
                         perr.msg);
                sm.compile_failed++;
            } else {
                e->usable = 1;
                snprintf(e->status, sizeof e->status, "ok (%d registers)", b->stats.registers);
                sm.usable++;
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
        for (size_t s = 0; s < n_shapes; s++) {
            if (!e->usable) {
                e->cells[s].state = KILN_TUNE_SKIPPED;
                continue;
            }
            char sid[160];
            kiln_tune_shape_id(&shapes[s], sid, sizeof sid);
            const kiln_tune_record *rec = kiln_tune_journal_find(journal, e->bundle_id, sid,
                                                                 sm.timer_id);
            if (rec) {
                e->cells[s].state = rec->m.ok ? KILN_TUNE_TIMED : KILN_TUNE_BAD;
                e->cells[s].m = rec->m;
                e->cells[s].from_journal = 1;
                sm.from_journal++;
            }
        }
    }
    sm.dropped = set.dropped;
    sm.journal_skipped = journal ? kiln_tune_journal_skipped(journal) : 0;
    sm.journal_repaired = journal ? kiln_tune_journal_repaired(journal) : 0;

    if (rc == KILN_EXIT_OK) {
        /* Units: (shape, config) pairs with something left to time. */
        r.v = v;
        r.n_v = set.n_jobs;
        r.shapes = shapes;
        r.n_shapes = n_shapes;
        r.journal = journal;
        r.timer_id = sm.timer_id;
        r.progress = isatty(2) && !o.json;
        r.log_units = !isatty(2) && !o.json;
        r.start = kiln_now();
        const char *stop = getenv("KILN_TUNE_STOP_AFTER");
        r.stop_after = stop && *stop ? atol(stop) : 0;
        r.units = calloc(n_shapes * (set.n_jobs ? set.n_jobs : 1), sizeof *r.units);
        if (!r.units) rc = KILN_EXIT_COMPILE;
        for (size_t s = 0; rc == KILN_EXIT_OK && s < n_shapes; s++)
            for (size_t i = 0; i < set.n_jobs; i++) {
                if (!v[i].usable || v[i].cells[s].state != KILN_TUNE_PENDING) continue;
                r.todo++;
                int seen = 0;
                for (size_t u = 0; u < r.n_units && !seen; u++)
                    seen = r.units[u].shape == s && kiln_tune_config_equal(&v[r.units[u].cfg_of].cfg,
                                                                          &v[i].cfg);
                if (!seen) r.units[r.n_units++] = (unit){s, i};
            }
        if (sm.from_journal && !o.json)
            fprintf(stderr, "kiln tune: resuming from %s: %zu measurements done, %zu to go\n",
                    journal_path, sm.from_journal, r.todo);
        if (sm.journal_repaired)
            fprintf(stderr, "kiln tune: %s: cut off a torn last line (an interrupted write)\n",
                    journal_path);
        if (sm.journal_skipped)
            fprintf(stderr, "kiln tune: %s: %zu malformed lines ignored\n", journal_path,
                    sm.journal_skipped);
        if (rc == KILN_EXIT_OK && r.n_units) {
            int workers = n_timers;
            if ((size_t)workers > r.n_units) workers = (int)r.n_units;
            if (workers > 1 && !o.json)
                fprintf(stderr, "kiln tune: timing on %d devices, one worker each\n", workers);
            pthread_t *th = calloc((size_t)workers, sizeof *th);
            worker_arg *wa = calloc((size_t)workers, sizeof *wa);
            int started = 0;
            for (int w = 0; th && wa && w < workers; w++) {
                wa[w] = (worker_arg){&r, timers[w]};
                if (pthread_create(&th[w], NULL, time_worker, &wa[w]) == 0) started++;
            }
            if (started == 0 && wa) {
                wa[0] = (worker_arg){&r, timers[0]};
                time_worker(&wa[0]);
            }
            for (int w = 0; w < started; w++) pthread_join(th[w], NULL);
            free(th);
            free(wa);
            if (r.progress) fprintf(stderr, "\r\033[K");
        }
        sm.measured_now = r.done;
        if (r.abort) {
            fprintf(stderr, "kiln tune: %s\nkiln tune: no table written; %zu measurements are "
                            "in %s, run again to resume\n",
                    r.error.msg, kiln_tune_journal_count(journal), journal_path);
            rc = KILN_EXIT_COMPILE;
        }
    }
    for (size_t i = 0; rc == KILN_EXIT_OK && i < set.n_jobs; i++)
        for (size_t s = 0; s < n_shapes; s++) sm.failed_cells += v[i].cells[s].state == KILN_TUNE_BAD;

    if (rc == KILN_EXIT_OK) {
        if (kiln_tuning_table_create(&table, &err) != KILN_OK ||
            kiln_tune_choose(v, set.n_jobs, shapes, n_shapes, table, &err) != KILN_OK) {
            fprintf(stderr, "kiln tune: %s\n", err.msg);
            rc = KILN_EXIT_COMPILE;
        } else if (kiln_tuning_table_count(table) == 0) {
            fprintf(stderr, "kiln tune: no variant was timed correctly on any shape; no table "
                            "written\n");
            rc = KILN_EXIT_COMPILE;
        }
    }
    if (rc == KILN_EXIT_OK) {
        char c0[256], c1[512], c2[KILN_PATH_MAX + 16];
        snprintf(c0, sizeof c0, "written by kiln tune %s; timer %s", kiln_version(), sm.timer_id);
        size_t used = (size_t)snprintf(c1, sizeof c1, "sweep:");
        for (int i = 0; i < n_paths && used < sizeof c1; i++)
            used += (size_t)snprintf(c1 + used, sizeof c1 - used, " %s", paths[i]);
        snprintf(c2, sizeof c2, "shapes: %s", ta.shapes);
        const char *comments[] = {
            c0, c1, c2,
            "ARCH OP A B OUT EPILOGUE CLASS -> KERNEL BUNDLE_ID CACHE_KEY MS RUNNERUP RUNNERUP_MS DESC",
            NULL};
        if (kiln_tuning_table_save(table, comments, table_path, &err) != KILN_OK) {
            fprintf(stderr, "kiln tune: %s\n", err.msg);
            rc = KILN_EXIT_COMPILE;
        }
    }
    if (rc == KILN_EXIT_OK && ta.plot) {
        kiln_strbuf svg;
        kiln_strbuf_init(&svg);
        char title[256];
        snprintf(title, sizeof title, "kiln tune: %s on %s (%s)", paths[0], sm.timer_device,
                 sm.timer_id);
        kiln_tune_plot_svg(v, set.n_jobs, shapes, n_shapes, title, &svg);
        if (svg.oom || kiln_file_write_atomic(ta.plot, svg.data, svg.len, &err) != KILN_OK) {
            fprintf(stderr, "kiln tune: %s\n", svg.oom ? "out of memory" : err.msg);
            rc = KILN_EXIT_COMPILE;
        }
        kiln_strbuf_free(&svg);
        sm.plot_path = ta.plot;
    }
    if (rc == KILN_EXIT_OK) {
        sm.table_path = table_path;
        sm.journal_path = journal_path;
        if (o.json) print_json(&r, table, &sm, &set);
        else print_text(&r, table, &sm, &set);
    }

    kiln_tuning_table_destroy(table);
    free(r.units);
    pthread_mutex_destroy(&r.lock);
    if (v)
        for (size_t i = 0; i < set.n_jobs; i++) free(v[i].cells);
    free(v);
    kiln_build_results_free(results, set.n_jobs);
    kiln_tune_journal_close(journal);
    for (int i = 0; i < n_timers; i++) kiln_tune_timer_destroy(timers[i]);
    free(timers);
    kiln_spec_set_free(&set);
    free(shapes);
    free(paths);
    return rc;
}
