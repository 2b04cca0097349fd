/* SPDX-License-Identifier: Apache-2.0 */
/*
 * spec.h — YAML kernel specs: parse with libyaml, validate, and produce
 * canonical kernel descriptions.  Every node keeps its line and column so
 * that any later error (validation, template) can name `file:line:col`.
 *
 * A spec file holds one kernel, or a family: a base kernel plus `sweep:` axes
 * whose grid expands into concrete kernels (invalid points are dropped with
 * the validator's reason, not fatal).
 */
#ifndef KILN_SPEC_H
#define KILN_SPEC_H

#include "kernel_desc.h"

#define KILN_SPEC_MAX_POS 64

/* Templates (expand.h); declared here so that validation can name them. */
typedef struct kiln_expander kiln_expander;
#define KILN_PATH_MAX 1024

/* Where a key of the spec stood, by dotted path ("tile.m", "epilogue.bias"). */
typedef struct kiln_spec_pos {
    char key[64];
    int line, col;               /* 1-based */
} kiln_spec_pos;

typedef struct kiln_spec {
    kiln_kernel_desc desc;
    char path[KILN_PATH_MAX];    /* the spec file as the user named it */
    int line, col;               /* of the kernel's mapping */
    kiln_spec_pos pos[KILN_SPEC_MAX_POS];
    int n_pos;
} kiln_spec;

typedef struct kiln_spec_list {
    kiln_spec *items;
    size_t count;
    size_t dropped;              /* sweep points refused by validation */
    char **dropped_reasons;      /* `dropped` one-line messages */
} kiln_spec_list;

/* Parses and validates one file.  On failure err holds one line
 * "path:line:col: message" and *out is left empty. */
kiln_status kiln_spec_load(const char *path, kiln_spec_list *out, kiln_error *err);
/* The same from memory; path only names the text in messages. */
kiln_status kiln_spec_parse(const char *text, size_t len, const char *path,
                            kiln_spec_list *out, kiln_error *err);
/* Both with the templates of ex checking family rules (NULL: the default;
 * the `kiln` command passes its --template-dir expander). */
kiln_status kiln_spec_load_with(const char *path, kiln_expander *ex, kiln_spec_list *out,
                                kiln_error *err);
kiln_status kiln_spec_parse_with(const char *text, size_t len, const char *path,
                                 kiln_expander *ex, kiln_spec_list *out, kiln_error *err);
void kiln_spec_list_free(kiln_spec_list *list);

/* Validates a description for arch (used by the parser and by sweeps): the
 * language's rules (keys, types, ranges, the blocks of the op), then the
 * family template's check (kiln_template_check).  Returns KILN_OK or
 * KILN_ERROR_INVALID_SPEC with a message naming the key; *key (if non-NULL)
 * gets the dotted key the message is about, for positions.  Uses the
 * default templates (embedded, or $KILN_TEMPLATE_DIR). */
kiln_status kiln_spec_validate(const kiln_kernel_desc *d, const char *arch,
                               kiln_error *err, const char **key);
/* The same with the templates of ex (NULL: the default); *smem (may be
 * NULL) gets the dynamic shared memory the template reports. */
kiln_status kiln_spec_validate_with(kiln_expander *ex, const kiln_kernel_desc *d,
                                    const char *arch, int *smem, kiln_error *err,
                                    const char **key);

/* Position of a dotted key in the spec; falls back to the kernel's own
 * position.  Returns 1 if the key itself was found. */
int kiln_spec_find_pos(const kiln_spec *spec, const char *key, int *line, int *col);

#endif /* KILN_SPEC_H */
