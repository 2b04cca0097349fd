/* SPDX-License-Identifier: Apache-2.0 */
/*
 * cmd_emit.c — `kiln emit SPEC`: print the CUDA source the templates make
 * for one kernel of a spec (for reading, diffing and template work).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"

static int run(const kiln_cli_options *o, int n, char **args)
{
    if (n != 1) {
        fprintf(stderr, "kiln emit: takes one spec file (see kiln emit --help)\n");
        return KILN_EXIT_USAGE;
    }
    kiln_spec_set set;
    int rc = kiln_spec_set_load(&set, o, 1, args, 0);
    if (rc != KILN_EXIT_OK) return rc;
    const kiln_job *job = NULL;
    for (size_t i = 0; i < set.n_jobs && !job; i++)
        if (!o->kernel || !strcmp(set.jobs[i].spec->desc.name, o->kernel)) job = &set.jobs[i];
    if (!job) {
        char name[256];
        fprintf(stderr, "kiln emit: %s has no kernel named '%s'\n", args[0],
                kiln_printable(o->kernel ? o->kernel : "(any)", name, sizeof name));
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

const kiln_cli_command kiln_cmd_emit = {
    "emit", "print the generated CUDA source of a spec's kernel",
    "usage: kiln emit SPEC [--kernel NAME] [--arch ARCH] [--template-dir DIR]\n"
    "\n"
    "Prints the CUDA source the templates generate for one kernel of SPEC: the\n"
    "first, or the sweep point named NAME, for the spec's first arch or ARCH.\n"
    "\n"
    "  --template-dir D  look for templates here first (also $KILN_TEMPLATE_DIR)\n"
    "\n"
    "Exit: 0 ok, 2 bad input (a bad spec, no such kernel, a template error).\n",
    KILN_OPT_TEMPLATE_DIR | KILN_OPT_ARCH | KILN_OPT_KERNEL,
    run};
