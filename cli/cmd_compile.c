/*
 * cmd_compile.c — `kiln compile`: expand and compile every kernel of the
 * given specs into the cache, in parallel, then print a summary table (or
 * JSON).  Workers each own a Lua state; NVRTC is thread-safe per program.
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
                char sha[65];
                kiln_source_sha256(src, sha);
                kiln_bundle_id(j->arch, desc.data, sha, r->id);
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
        fprintf(stderr, "%skiln: warning: %s (kernels are compiled but not cached)\n",
                p->progress ? "\r\033[K" : "", warn.msg);
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

static void json_string(const char *s)
{
    putchar('"');
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\') printf("\\%c", c);
        else if (c < 32) printf("\\u%04x", c);
        else putchar(c);
    }
    putchar('"');
}

static void print_json(const kiln_spec_set *set, const kiln_build_result *results, double total)
{
    printf("{\"kiln\": \"%s\", \"nvrtc\": \"%s\", \"seconds\": %.3f, \"kernels\": [\n",
           kiln_version(), kiln_nvrtc_version(), total);
    for (size_t i = 0; i < set->n_jobs; i++) {
        const kiln_job *j = &set->jobs[i];
        const kiln_build_result *r = &results[i];
        printf("  {\"name\": ");
        json_string(j->spec->desc.name);
        printf(", \"spec\": ");
        json_string(j->spec->path);
        printf(", \"arch\": \"%s\", \"ok\": %s", j->arch, r->ok ? "true" : "false");
        if (r->ok)
            printf(", \"origin\": \"%s\", \"nvrtc_seconds\": %.3f, \"registers\": %d, "
                   "\"spill_stores\": %d, \"spill_loads\": %d, \"smem_static\": %d, "
                   "\"smem_dynamic\": %d, \"cubin_bytes\": %zu",
                   r->origin == KILN_JIT_CACHE ? "cache" : "compiled", r->stats.seconds,
                   r->stats.registers, r->stats.spill_stores, r->stats.spill_loads,
                   r->stats.smem_static, r->smem_dynamic, r->cubin_size);
        else {
            printf(", \"error\": ");
            json_string(r->error);
        }
        printf("}%s\n", i + 1 < set->n_jobs ? "," : "");
    }
    printf("]}\n");
}

static void print_table(const kiln_spec_set *set, const kiln_build_result *results,
                        size_t failed, double total)
{
    size_t hits = 0;
    printf("%-44s %-8s %-8s %8s %5s %7s %8s %9s\n", "kernel", "arch", "origin", "nvrtc_s",
           "regs", "spills", "smem", "cubin");
    for (size_t i = 0; i < set->n_jobs; i++) {
        const kiln_job *j = &set->jobs[i];
        const kiln_build_result *r = &results[i];
        if (!r->ok) {
            printf("%-44s %-8s FAILED\n", j->spec->desc.name, j->arch);
            continue;
        }
        if (r->origin == KILN_JIT_CACHE) hits++;
        int smem = r->stats.smem_static + r->smem_dynamic;
        printf("%-44s %-8s %-8s %8.3f %5d %7d %8d %9zu\n", j->spec->desc.name, j->arch,
               r->origin == KILN_JIT_CACHE ? "cache" : "compiled", r->stats.seconds,
               r->stats.registers, r->stats.spill_stores + r->stats.spill_loads, smem,
               r->cubin_size);
    }
    printf("%zu kernels: %zu compiled, %zu from cache, %zu failed", set->n_jobs,
           set->n_jobs - hits - failed, hits, failed);
    if (set->dropped) printf(", %zu sweep points dropped by validation", set->dropped);
    printf(" in %.2fs\n", total);
    for (size_t i = 0; i < set->n_jobs; i++)
        if (!results[i].ok) fprintf(stderr, "%s\n", results[i].error);
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

int kiln_cmd_compile(const kiln_cli_options *o, int n, char **args)
{
    kiln_spec_set set;
    int rc = kiln_spec_set_load(&set, n, args, o->arch_list);
    if (rc != KILN_EXIT_OK) return rc;
    kiln_build_result *results = NULL;
    size_t failed = 0;
    double total = 0;
    rc = kiln_build_all(o, &set, 0, &results, &failed, &total);
    if (rc == KILN_EXIT_OK) {
        if (o->json) print_json(&set, results, total);
        else print_table(&set, results, failed, total);
        rc = failed ? KILN_EXIT_COMPILE : KILN_EXIT_OK;
    }
    kiln_build_results_free(results, set.n_jobs);
    kiln_spec_set_free(&set);
    return rc;
}
