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
void kiln_spec_list_free(kiln_spec_list *list);

/* Validates a description (used by the parser and by sweeps).  Returns
 * KILN_OK or KILN_ERROR_INVALID_SPEC with a message naming the key; *key
 * (if non-NULL) gets the dotted key the message is about, for positions. */
kiln_status kiln_spec_validate(const kiln_kernel_desc *d, const char *arch,
                               kiln_error *err, const char **key);

/* Position of a dotted key in the spec; falls back to the kernel's own
 * position.  Returns 1 if the key itself was found. */
int kiln_spec_find_pos(const kiln_spec *spec, const char *key, int *line, int *col);

/* Shared memory a pipeline of this description needs on sm_90a, in bytes
 * (the budget templates/sm90.lua uses; family simple: stages x fp32 tiles
 * + 1024), and the per-block limit of arch (0 for an unknown arch). */
int kiln_spec_smem_bytes(const kiln_kernel_desc *d);
int kiln_arch_smem_limit(const char *arch);

#endif /* KILN_SPEC_H */
