/* SPDX-License-Identifier: Apache-2.0 */
/*
 * spec_internal.h — what spec.c (schema, values, validation) and sweep.c
 * (families of kernels) share.  Not for other modules: use spec.h.
 */
#ifndef KILN_SPEC_INTERNAL_H
#define KILN_SPEC_INTERNAL_H

#include <yaml.h>

#include "knobs.h"
#include "spec.h"

#define KILN_SPEC_NAME_MAX 63      /* the `kernel:` name as written */
#define KILN_SPEC_INT_MAX 1000000000 /* integers beyond this are refused */

/* State of one parse. */
typedef struct kiln_spec_ctx {
    const char *path;
    yaml_document_t *doc;
    kiln_error *err;
    kiln_spec *spec;             /* what values are written into */
    unsigned char seen[KILN_KNOB_COUNT_MAX]; /* by index into kiln_knobs */
    const yaml_node_t *sweep, *constraints; /* the blocks, if present */
    kiln_expander *ex;           /* templates checking family rules; NULL: default */
} kiln_spec_ctx;

/* Sets err to "path:line:col: message" (KILN_ERROR_INVALID_SPEC). */
kiln_status kiln_spec_error_at(const kiln_spec_ctx *c, int line, int col, const char *fmt, ...)
    KILN_PRINTF(4, 5);
/* Replaces control characters (newlines in quoted values) so that messages
 * stay one line. */
void kiln_spec_one_line(char *s);
yaml_node_t *kiln_spec_node(const kiln_spec_ctx *c, int id);
const char *kiln_spec_scalar(const yaml_node_t *n);

/* Parses node as the value of field f into c->spec (positions of nested keys
 * included).  The caller records the position of f itself. */
kiln_status kiln_spec_apply(kiln_spec_ctx *c, const kiln_knob *f, const yaml_node_t *n);
void kiln_spec_set_pos(kiln_spec *spec, const char *key, int line, int col);

/* types.b defaults to types.a, types.out to types.a (16-bit) or bf16,
 * unless written (c->seen). */
void kiln_spec_type_defaults(const kiln_spec_ctx *c, kiln_kernel_desc *d);

/* Validates spec for each of its archs (the language, then the family's
 * template with ex, NULL for the default templates); err gets
 * "path:line:col: [prefix: ]msg"; *smem (may be NULL) what the template
 * reports for the first arch. */
kiln_status kiln_spec_check(const kiln_spec *spec, kiln_expander *ex, const char *prefix,
                            int *smem, kiln_error *err);

kiln_status kiln_spec_list_push(kiln_spec_list *list, const kiln_spec *spec, kiln_error *err);
kiln_status kiln_spec_list_drop(kiln_spec_list *list, const char *reason, kiln_error *err);

/* sweep.c: expands c->sweep (and c->constraints) over c->spec into out. */
kiln_status kiln_sweep_expand(kiln_spec_ctx *c, kiln_spec_list *out);

#endif /* KILN_SPEC_INTERNAL_H */
