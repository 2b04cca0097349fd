/* SPDX-License-Identifier: Apache-2.0 */
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

/* A template is called as chunk(spec, arch, mode): spec is the description
 * (every knob of kernel/knobs.c under its spec key, with the spec's
 * spellings; the kernel's name as spec.name), arch the target.
 *   mode "expand": returns (source string, launch table): entry, threads,
 *                  smem, persistent, ctas_per_sm, cluster, tmap, and what the
 *                  dispatcher reads instead of family names: max_groups (0:
 *                  no limit), preference (higher wins where several kernels
 *                  serve a call), scale_bias_switch (a compiled-in scale_bias
 *                  is switched per call).
 *   mode "check":  checks the spec against the family's rules and returns
 *                  {smem = bytes} (what the kernel would need).
 * A template refuses a spec with kiln.refuse(key, message [, level]), naming
 * the spec key at fault; that is bad input (KILN_ERROR_INVALID_SPEC) shown
 * at the key's line:col.  Any other error is a template error
 * (KILN_ERROR_TEMPLATE).
 *
 * Expands spec for one architecture.  *source (malloc'd, caller frees) starts
 * with a line naming the spec and the template.  launch gets the template's
 * launch description.  A template error names the template's file:line and
 * the spec's file:line; a refusal the spec key's file:line:col. */
kiln_status kiln_expand(kiln_expander *ex, const kiln_spec *spec, const char *arch,
                        char **source, kiln_launch_desc *launch, kiln_error *err);

/* Runs the family template of d in mode "check" for arch (ex NULL: the
 * default templates, embedded or $KILN_TEMPLATE_DIR).  On a refusal returns
 * KILN_ERROR_INVALID_SPEC, err holds "message (templates/F:LINE)" and *key
 * (may be NULL) the refused spec key, a row of kiln_knobs.  *smem (may be
 * NULL) gets what the template reports. */
kiln_status kiln_template_check(kiln_expander *ex, const kiln_kernel_desc *d, const char *arch,
                                int *smem, kiln_error *err, const char **key);

/* Instruction budget (VM instructions) per expansion; default 50 million. */
void kiln_expander_set_budget(kiln_expander *ex, long instructions);

#endif /* KILN_EXPAND_H */
