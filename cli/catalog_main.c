/* SPDX-License-Identifier: Apache-2.0 */
/*
 * catalog_main.c — kiln_catalog_gen, the build step that writes the
 * runtime's kernel catalog.  It is `kiln catalog` without the rest of the
 * command, so it links the compiler but not the runtime it feeds.
 */
#include "cli.h"

int main(int argc, char **argv)
{
    return kiln_cli_run(&kiln_cmd_catalog, argc, argv);
}
