/* SPDX-License-Identifier: Apache-2.0 */
/* embedded.c — lookup of files built into the binary. */
#include <string.h>

#include "embedded.h"

const kiln_embedded_file *kiln_embedded_find(const char *name)
{
    for (const kiln_embedded_file *f = kiln_embedded_files; f->name; f++)
        if (strcmp(f->name, name) == 0) return f;
    return NULL;
}
