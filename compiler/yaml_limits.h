/* SPDX-License-Identifier: Apache-2.0 */
/*
 * yaml_limits.h — limits a spec's YAML text must keep before libyaml builds
 * a document from it.
 *
 * libyaml's loader holds the whole document in memory (about 25 times the
 * text), takes time quadratic in the nesting depth and in the number of
 * anchors, and accepts any tag.  kiln_yaml_check_limits streams the text
 * through libyaml's event parser first, in constant memory, and stops at
 * the first event that breaks a limit, so a hostile spec costs at most one
 * pass over its first few bytes past the limit.
 *
 * The limits are compile-time constants (kiln specs are a few hundred
 * bytes deep and wide); build with -DKILN_SPEC_MAX_BYTES=... and so on to
 * change them.
 */
#ifndef KILN_YAML_LIMITS_H
#define KILN_YAML_LIMITS_H

#include <stddef.h>

#include "common.h"

#ifndef KILN_SPEC_MAX_BYTES
#define KILN_SPEC_MAX_BYTES ((size_t)1 << 20) /* 1 MiB of spec text */
#endif
#ifndef KILN_SPEC_MAX_DEPTH
#define KILN_SPEC_MAX_DEPTH 32        /* nested mappings and lists */
#endif
#ifndef KILN_SPEC_MAX_ANCHORS
#define KILN_SPEC_MAX_ANCHORS 256     /* &name definitions */
#endif
#ifndef KILN_SPEC_MAX_ALIASES
#define KILN_SPEC_MAX_ALIASES 1024    /* *name uses */
#endif

/* Checks text (len bytes, named path in messages) against the limits above
 * and refuses explicit YAML tags ("!!str 2" would otherwise read as the
 * integer 2: the loader gives plain and tagged scalars the same tag).
 * Returns KILN_OK, or KILN_ERROR_INVALID_SPEC with "path:line:col: what"
 * in err.  YAML syntax errors are left to the loader, which words them. */
kiln_status kiln_yaml_check_limits(const char *text, size_t len, const char *path,
                                   kiln_error *err);

#endif /* KILN_YAML_LIMITS_H */
