/* SPDX-License-Identifier: Apache-2.0 */
/*
 * cmd_compile.c — `kiln compile`: expand and compile every kernel of the
 * given specs into the cache (build.c), then print a summary table, or JSON
 * with every kernel and every sweep point that validation dropped.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "json.h"

static void print_json(const kiln_spec_set *set, const kiln_build_result *results, double total)
{
    kiln_strbuf sb;
    kiln_json j;
    kiln_cli_json_begin(&j, &sb);
    kiln_json_kstring(&j, "nvrtc", kiln_nvrtc_version());
    kiln_json_knumber(&j, "seconds", total);
    kiln_json_key(&j, "kernels");
    kiln_json_array(&j);
    for (size_t i = 0; i < set->n_jobs; i++) {
        const kiln_job *jb = &set->jobs[i];
        const kiln_build_result *r = &results[i];
        kiln_json_object(&j);
        kiln_json_kstring(&j, "name", jb->spec->desc.name);
        kiln_json_kstring(&j, "spec", jb->spec->path);
        kiln_json_kstring(&j, "arch", jb->arch);
        kiln_json_kbool(&j, "ok", r->ok);
        if (r->ok) {
            kiln_json_kstring(&j, "origin", r->origin == KILN_JIT_CACHE ? "cache" : "compiled");
            kiln_json_knumber(&j, "nvrtc_seconds", r->stats.seconds);
            kiln_json_kint(&j, "registers", r->stats.registers);
            kiln_json_kint(&j, "spill_stores", r->stats.spill_stores);
            kiln_json_kint(&j, "spill_loads", r->stats.spill_loads);
            kiln_json_kint(&j, "wgmma_serialized", r->stats.wgmma_serialized);
            kiln_json_kint(&j, "smem_static", r->stats.smem_static);
            kiln_json_kint(&j, "smem_dynamic", r->smem_dynamic);
            kiln_json_kint(&j, "cubin_bytes", (long long)r->cubin_size);
        } else {
            kiln_json_kstring(&j, "error", r->error);
        }
        kiln_json_end(&j);
    }
    kiln_json_end(&j);
    /* Sweep points validation refused: the spec file and why. */
    kiln_json_key(&j, "dropped");
    kiln_json_array(&j);
    for (size_t i = 0; i < set->n_lists; i++)
        for (size_t k = 0; k < set->lists[i].dropped; k++) {
            kiln_json_object(&j);
            kiln_json_kstring(&j, "spec", set->lists[i].count ? set->lists[i].items[0].path : "");
            kiln_json_kstring(&j, "reason", set->lists[i].dropped_reasons
                                                ? set->lists[i].dropped_reasons[k] : "");
            kiln_json_end(&j);
        }
    kiln_json_end(&j);
    kiln_json_end(&j);
    kiln_cli_json_print(&sb);
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
        if (results[i].ok && results[i].stats.wgmma_serialized)
            printf("%s (%s): ptxas serialized its wgmma pipeline (C%d)\n",
                   set->jobs[i].spec->desc.name, set->jobs[i].arch,
                   results[i].stats.wgmma_serialized);
    for (size_t i = 0; i < set->n_jobs; i++)
        if (!results[i].ok) fprintf(stderr, "%s\n", results[i].error);
}

static int run(const kiln_cli_options *o, int n, char **args)
{
    if (n < 1) {
        fprintf(stderr, "kiln compile: name at least one spec or directory (see kiln compile --help)\n");
        return KILN_EXIT_USAGE;
    }
    kiln_spec_set set;
    int rc = kiln_spec_set_load(&set, o, n, args, 0);
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

const kiln_cli_command kiln_cmd_compile = {
    "compile", "compile every kernel of specs into the cache; a summary table",
    "usage: kiln compile SPEC_OR_DIR... [--arch LIST] [-j N] [--json] [--no-cache]\n"
    "                    [--cache-dir DIR] [--template-dir DIR]\n"
    "\n"
    "Expands every kernel of the specs (files, or directories searched for *.yaml)\n"
    "and compiles it with NVRTC into the cache, or takes it from there.  Prints a\n"
    "table (kernel, arch, origin, NVRTC seconds, registers, spills, shared memory,\n"
    "cubin bytes) and a line for each kernel whose wgmma pipeline ptxas serialized\n"
    "(its C75xx remark), or with --json the same per kernel plus every sweep point\n"
    "that validation dropped and why.\n"
    "\n"
    "  --arch LIST       comma-separated archs instead of each spec's own\n"
    "  -j N              parallel compiles (default: the number of cores)\n"
    "  --no-cache        compile everything, store nothing\n"
    "  --cache-dir DIR   cache directory (default $KILN_CACHE_DIR, $XDG_CACHE_HOME/kiln,\n"
    "                    ~/.cache/kiln)\n"
    "  --template-dir D  look for templates here first (also $KILN_TEMPLATE_DIR)\n"
    "\n"
    "Exit: 0 ok, 1 a kernel failed to compile, 2 bad input (a bad spec: nothing built).\n",
    KILN_OPT_CACHE_DIR | KILN_OPT_TEMPLATE_DIR | KILN_OPT_ARCH | KILN_OPT_JOBS | KILN_OPT_JSON |
        KILN_OPT_NO_CACHE,
    run};
