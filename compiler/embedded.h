/* SPDX-License-Identifier: Apache-2.0 */
/* embedded.h — files built into the binary (templates, the kernel ABI). */
#ifndef KILN_EMBEDDED_H
#define KILN_EMBEDDED_H

#include <stddef.h>

typedef struct kiln_embedded_file {
    const char *name;            /* base name: "sm90.lua", "kernel_abi.h" */
    const char *data;            /* NUL-terminated */
    size_t size;
} kiln_embedded_file;

/* Terminated by an entry with name NULL. */
extern const kiln_embedded_file kiln_embedded_files[];

/* The embedded file of that base name, or NULL. */
const kiln_embedded_file *kiln_embedded_find(const char *name);

#endif /* KILN_EMBEDDED_H */
