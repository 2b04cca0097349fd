/* SPDX-License-Identifier: Apache-2.0 */
/*
 * main.c — the `kiln` command: find the subcommand and hand it its
 * arguments (each subcommand is a file cmd_*.c with its own options and
 * --help).  Exit codes (cli.h): 0 ok, 1 a kernel failed to compile, 2 bad
 * input.
 */
#include <stdio.h>
#include <string.h>

#include "cli.h"

static const kiln_cli_command *const COMMANDS[] = {
    &kiln_cmd_emit, &kiln_cmd_compile, &kiln_cmd_cache, &kiln_cmd_pack,
    &kiln_cmd_bundle, &kiln_cmd_catalog, &kiln_cmd_tune,
};
enum { N_COMMANDS = sizeof COMMANDS / sizeof COMMANDS[0] };

static void usage(FILE *f)
{
    fprintf(f, "usage: kiln COMMAND [ARGS]     (kiln COMMAND --help: that command's usage)\n"
               "\n"
               "Commands:\n");
    for (size_t i = 0; i < N_COMMANDS; i++)
        fprintf(f, "  %-9s %s\n", COMMANDS[i]->name, COMMANDS[i]->summary);
    fprintf(f, "\n"
               "Most commands take --cache-dir DIR (default $KILN_CACHE_DIR,\n"
               "$XDG_CACHE_HOME/kiln, ~/.cache/kiln) and --template-dir DIR (templates\n"
               "looked for there before the built-in ones; also $KILN_TEMPLATE_DIR).\n"
               "  kiln --version     kiln's and NVRTC's versions\n"
               "\n"
               "Exit codes: 0 ok, 1 a kernel failed to compile, 2 bad input.\n");
}

static const kiln_cli_command *find(const char *name)
{
    for (size_t i = 0; i < N_COMMANDS; i++)
        if (!strcmp(COMMANDS[i]->name, name)) return COMMANDS[i];
    return NULL;
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        usage(stderr);
        return KILN_EXIT_USAGE;
    }
    const char *cmd = argv[1];
    if (!strcmp(cmd, "-h") || !strcmp(cmd, "--help")) {
        usage(stdout);
        return KILN_EXIT_OK;
    }
    if (!strcmp(cmd, "help")) {
        const kiln_cli_command *c = argc > 2 ? find(argv[2]) : NULL;
        if (c) fputs(c->usage, stdout);
        else usage(argc > 2 ? stderr : stdout);
        return c || argc == 2 ? KILN_EXIT_OK : KILN_EXIT_USAGE;
    }
    if (!strcmp(cmd, "--version") || !strcmp(cmd, "version")) {
        printf("kiln %s (nvrtc %s)\n", kiln_version(), kiln_nvrtc_version());
        return KILN_EXIT_OK;
    }
    const kiln_cli_command *c = find(cmd);
    if (!c) {
        char shown[256];
        fprintf(stderr, "kiln: unknown command '%s' (see kiln --help)\n",
                kiln_printable(cmd, shown, sizeof shown));
        return KILN_EXIT_USAGE;
    }
    return kiln_cli_run(c, argc - 1, argv + 1);
}
