/*
 * catalog_main.c — kiln_catalog_gen, the build step that writes the
 * runtime's kernel catalog.  It is `kiln catalog` without the rest of the
 * command, so it links the compiler but not the runtime it feeds.
 */
#include <stdlib.h>

#include "cli.h"

int main(int argc, char **argv)
{
    kiln_cli_options opts;
    char **args = NULL;
    int n = 0;
    int rc = kiln_cli_parse(argc - 1, argv + 1, &opts, &args, &n);
    if (rc == KILN_EXIT_OK) rc = kiln_cmd_catalog(&opts, n, args);
    free(args);
    return rc;
}
