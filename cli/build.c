/* SPDX-License-Identifier: Apache-2.0 */
/*
 * build.c — building a set of jobs: expand and compile (or take from the
 * cache) every kernel, -j in parallel, with a progress line on a terminal.
 * Workers each own a Lua state; NVRTC is thread-safe per program.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"

typedef struct pool {
    const kiln_cli_options *opts;
    const kiln_spec_set *set;
    kiln_cache *cache;
    int keep;                    /* keep each entry and its bundle id */
    kiln_build_result *results;
    size_t next, finished, failed;
    int progress;                /* stderr is a terminal */
    int warned;                  /* cache warning printed once */
    double start;
    pthread_mutex_t lock;
} pool;

static void progress_line(pool *p, const kiln_job *j)
{
    if (!p->progress) return;
    double el = kiln_now() - p->start;
    double eta = p->finished ? el / (double)p->finished * (double)(p->set->n_jobs - p->finished) : 0;
    fprintf(stderr, "\r\033[K[%zu/%zu] %zu failed, %.1fs, eta %.0fs  %s (%s)", p->finished,
            p->set->n_jobs, p->failed, el, eta, j->spec->desc.name, j->arch);
    fflush(stderr);
}

static void run_job(pool *p, kiln_expander *ex, size_t i)
{
    const kiln_job *j = &p->set->jobs[i];
    kiln_build_result *r = &p->results[i];
    double t0 = kiln_now();
    kiln_error err, warn;
    kiln_error_clear(&err);
    kiln_error_clear(&warn);
    char *src = NULL;
    kiln_launch_desc launch;
    kiln_cache_entry entry;
    memset(&entry, 0, sizeof entry);
    if (!ex) {
        snprintf(r->error, sizeof r->error, "no template expander");
    } else if (kiln_expand(ex, j->spec, j->arch, &src, &launch, &err) != KILN_OK) {
        snprintf(r->error, sizeof r->error, "%s", err.msg);
    } else {
        kiln_strbuf desc;
        kiln_strbuf_init(&desc);
        kiln_desc_format(&j->spec->desc, &launch, &desc);
        if (desc.oom) {
            snprintf(r->error, sizeof r->error, "out of memory");
        } else if (kiln_jit_get(p->cache, j->spec->desc.name, j->arch, desc.data, src, &entry,
                                &r->origin, &warn, &err) != KILN_OK) {
            snprintf(r->error, sizeof r->error, "%s", err.msg);
        } else {
            r->ok = 1;
            r->stats = entry.stats;
            r->cubin_size = entry.cubin_size;
            r->smem_dynamic = launch.smem_bytes;
            if (p->keep) {
                kiln_kernel_id_of_source(j->arch, desc.data, src, r->id);
                r->entry = entry;
                memset(&entry, 0, sizeof entry);
            }
        }
        kiln_strbuf_free(&desc);
    }
    kiln_cache_entry_free(&entry);
    free(src);
    r->seconds = kiln_now() - t0;
    pthread_mutex_lock(&p->lock);
    p->finished++;
    if (!r->ok) p->failed++;
    if (warn.msg[0] && !p->warned) {
        p->warned = 1;
        /* The store's warning says what happened (not cached, or rebuilt). */
        fprintf(stderr, "%skiln: warning: %s\n", p->progress ? "\r\033[K" : "", warn.msg);
    }
    progress_line(p, j);
    pthread_mutex_unlock(&p->lock);
}

static void *worker(void *arg)
{
    pool *p = arg;
    kiln_expander *ex = NULL;
    kiln_error err;
    kiln_error_clear(&err);
    if (kiln_cli_expander(p->opts, &ex, &err) != KILN_OK) ex = NULL;
    for (;;) {
        pthread_mutex_lock(&p->lock);
        size_t i = p->next < p->set->n_jobs ? p->next++ : (size_t)-1;
        pthread_mutex_unlock(&p->lock);
        if (i == (size_t)-1) break;
        if (!ex) {
            snprintf(p->results[i].error, sizeof p->results[i].error, "%s", err.msg);
            pthread_mutex_lock(&p->lock);
            p->finished++;
            p->failed++;
            pthread_mutex_unlock(&p->lock);
            continue;
        }
        run_job(p, ex, i);
    }
    if (ex) kiln_expander_destroy(ex);
    return NULL;
}

int kiln_build_all(const kiln_cli_options *o, const kiln_spec_set *set, int keep,
                   kiln_build_result **results, size_t *failed, double *seconds)
{
    pool p;
    memset(&p, 0, sizeof p);
    p.opts = o;
    p.set = set;
    p.keep = keep;
    p.progress = isatty(2) && !o->json;
    p.start = kiln_now();
    pthread_mutex_init(&p.lock, NULL);
    p.results = calloc(set->n_jobs ? set->n_jobs : 1, sizeof *p.results);
    if (!p.results) {
        fprintf(stderr, "kiln: out of memory\n");
        pthread_mutex_destroy(&p.lock);
        return KILN_EXIT_COMPILE;
    }
    kiln_error err;
    kiln_error_clear(&err);
    if (!o->no_cache && kiln_cache_open(o->cache_dir, &p.cache, &err) != KILN_OK) {
        fprintf(stderr, "kiln: warning: %s (compiling without a cache)\n", err.msg);
        p.cache = NULL;
    }
    long cores = sysconf(_SC_NPROCESSORS_ONLN);
    int jobs = o->jobs ? o->jobs : (int)(cores > 0 ? cores : 1);
    if ((size_t)jobs > set->n_jobs) jobs = (int)set->n_jobs;
    if (jobs < 1) jobs = 1;
    pthread_t *threads = calloc((size_t)jobs, sizeof *threads);
    int started = 0;
    for (int t = 0; threads && t < jobs; t++)
        if (pthread_create(&threads[t], NULL, worker, &p) == 0) started++;
    if (started == 0) worker(&p); /* no threads: do the work here */
    for (int t = 0; t < started; t++) pthread_join(threads[t], NULL);
    free(threads);
    if (p.progress) fprintf(stderr, "\r\033[K");
    if (p.cache) kiln_cache_close(p.cache);
    pthread_mutex_destroy(&p.lock);
    *results = p.results;
    *failed = p.failed;
    *seconds = kiln_now() - p.start;
    return KILN_EXIT_OK;
}

void kiln_build_results_free(kiln_build_result *r, size_t n)
{
    if (!r) return;
    for (size_t i = 0; i < n; i++) kiln_cache_entry_free(&r[i].entry);
    free(r);
}
