/*
 * main.c — the `kiln` command: parse arguments and hand each subcommand to
 * its module.  Exit codes: 0 ok, 1 a kernel failed to compile, 2 bad input.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "tune.h"

static void usage(FILE *f)
{
    fprintf(f,
            "usage: kiln COMMAND [ARGS]\n"
            "\n"
            "Commands:\n"
            "  emit SPEC [--kernel NAME] [--arch ARCH]\n"
            "        print the generated CUDA source of a spec's kernel\n"
            "  compile SPEC_OR_DIR... [--arch LIST] [-j N] [--json] [--cache-dir DIR]\n"
            "        compile every kernel into the cache; prints a summary table\n"
            "  cache ls|verify|clear [--cache-dir DIR]\n"
            "        list, check or empty the kernel cache\n"
            "  cache import BUNDLE | cache export DIR BUNDLE\n"
            "        copy a bundle's kernels into the cache; write a cache DIR as a bundle\n"
            "  pack SPEC_OR_DIR... --arch LIST -o BUNDLE [--table FILE] [-j N]\n"
            "        compile (or take from the cache) every kernel for every arch and\n"
            "        write one bundle file; deterministic\n"
            "  bundle ls|verify BUNDLE | bundle extract BUNDLE DIR\n"
            "        list or check a bundle; write its cubins to DIR (for cuobjdump)\n"
            "  catalog -o FILE SPEC_OR_DIR...\n"
            "        write the runtime's built-in kernel table (a build step)\n"
            "  tune SWEEP... --shapes FILE [-o TABLE] [--journal FILE] [-j N]\n"
            "       [--timer fake|gpu] [--plot FILE.svg] [--json]\n"
            "        time every kernel of a sweep on every shape; write a tuning table\n"
            "        (resumable: see kiln tune --help)\n"
            "\n"
            "Options common to all commands:\n"
            "  --cache-dir DIR     cache directory (default $KILN_CACHE_DIR,\n"
            "                      $XDG_CACHE_HOME/kiln, ~/.cache/kiln)\n"
            "  --template-dir DIR  look for templates here before the built-in ones\n"
            "                      (also $KILN_TEMPLATE_DIR)\n"
            "  -h, --help          this text;  --version  kiln's version\n"
            "\n"
            "Exit codes: 0 ok, 1 a kernel failed to compile, 2 bad input.\n");
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        usage(stderr);
        return KILN_EXIT_USAGE;
    }
    const char *cmd = argv[1];
    if (!strcmp(cmd, "-h") || !strcmp(cmd, "--help") || !strcmp(cmd, "help")) {
        usage(stdout);
        return KILN_EXIT_OK;
    }
    if (!strcmp(cmd, "--version") || !strcmp(cmd, "version")) {
        printf("kiln %s (nvrtc %s)\n", kiln_version(), kiln_nvrtc_version());
        return KILN_EXIT_OK;
    }
    /* tune has options of its own; it parses the common ones itself. */
    if (!strcmp(cmd, "tune")) return kiln_cmd_tune(argc - 2, argv + 2);
    kiln_cli_options opts;
    int rest = 0;
    char **args = NULL;
    int rc = kiln_cli_parse(argc - 2, argv + 2, &opts, &args, &rest);
    if (rc != KILN_EXIT_OK) return rc;
    if (opts.help) {
        usage(stdout);
        rc = KILN_EXIT_OK;
    } else if (!strcmp(cmd, "emit")) {
        rc = kiln_cmd_emit(&opts, rest, args);
    } else if (!strcmp(cmd, "compile")) {
        rc = kiln_cmd_compile(&opts, rest, args);
    } else if (!strcmp(cmd, "cache")) {
        rc = kiln_cmd_cache(&opts, rest, args);
    } else if (!strcmp(cmd, "pack")) {
        rc = kiln_cmd_pack(&opts, rest, args);
    } else if (!strcmp(cmd, "bundle")) {
        rc = kiln_cmd_bundle(&opts, rest, args);
    } else if (!strcmp(cmd, "catalog")) {
        rc = kiln_cmd_catalog(&opts, rest, args);
    } else {
        fprintf(stderr, "kiln: unknown command '%s' (see kiln --help)\n", cmd);
        rc = KILN_EXIT_USAGE;
    }
    free(args);
    return rc;
}
