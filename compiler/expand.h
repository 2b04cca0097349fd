/*
 * expand.h — Lua 5.4 templates that turn a kernel description into CUDA
 * source.  Templates are embedded in the binary at build time; an override
 * directory (for template development) is searched first when given.
 *
 * Lua runs sandboxed: no io, os, package, debug, require, load, loadfile,
 * dofile; an instruction budget stops a runaway template.  A template reaches
 * shared code with `include("name")` (embedded templates/name.lua only).
 */
#ifndef KILN_EXPAND_H
#define KILN_EXPAND_H

#include "spec.h"

typedef struct kiln_expander kiln_expander;

/* template_dir: override directory, or NULL for the embedded templates only. */
kiln_status kiln_expander_create(const char *template_dir, kiln_expander **out,
                                 kiln_error *err);
void kiln_expander_destroy(kiln_expander *ex);

/* Expands spec for one architecture.  *source (malloc'd, caller frees) starts
 * with a line naming the spec and the template.  launch gets the template's
 * launch description.  A template error names the template's file:line and
 * the spec's file:line. */
kiln_status kiln_expand(kiln_expander *ex, const kiln_spec *spec, const char *arch,
                        char **source, kiln_launch_desc *launch, kiln_error *err);

/* Instruction budget (VM instructions) per expansion; default 50 million. */
void kiln_expander_set_budget(kiln_expander *ex, long instructions);

#endif /* KILN_EXPAND_H */
