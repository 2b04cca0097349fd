/* SPDX-License-Identifier: Apache-2.0 */
/*
 * knobs.h — the kernel model's one table: a row per key of the spec
 * language.  Everything that names a knob is derived from it: the spec
 * schema and the storing of values (compiler/spec.c), the canonical text of
 * a description (desc.c), the description as templates see it in Lua
 * (compiler/expand.c), sweep axes and the name fragments of swept kernels
 * (compiler/sweep.c) and the terms of tuning signatures (tuning.c).
 *
 * Adding a knob: a member in kiln_kernel_desc, a row here (in the order
 * that names fragments and "allowed:" lists), the templates that read it,
 * and docs/specs.md.
 */
#ifndef KILN_KNOBS_H
#define KILN_KNOBS_H

#include <stddef.h>

#include "kernel_desc.h"

typedef enum kiln_knob_kind {
    KILN_KNOB_INT,               /* int member; spec integer; text %d */
    KILN_KNOB_BOOL,              /* int member 0/1; spec true/false; text 0/1 */
    KILN_KNOB_ENUM,              /* int-sized enum member; spec and Lua: a spelling */
    KILN_KNOB_STRING,            /* char array member; spec and Lua: one of choices */
    KILN_KNOB_NAME,              /* char array member: the kernel's name */
    KILN_KNOB_ARCHS,             /* archs[] / n_archs: not in the text (keys carry it) */
    KILN_KNOB_MAP,               /* a block of dotted children ("tile") */
    KILN_KNOB_SWEEP,             /* the spec's sweep: block (no member) */
    KILN_KNOB_CONSTRAINTS,       /* the spec's constraints: block (no member) */
} kiln_knob_kind;

typedef struct kiln_knob_choice {
    const char *name;            /* the one spelling (spec, Lua, text) */
    int value;                   /* stored value (ENUM); index (STRING) */
} kiln_knob_choice;

typedef struct kiln_knob {
    const char *key;             /* spec key, dotted ("epilogue.scale"); also its
                                    path in the Lua table templates get */
    kiln_knob_kind kind;
    size_t offset, size;         /* member of kiln_kernel_desc (value kinds) */
    const kiln_knob_choice *choices; /* ENUM, STRING, ARCHS: allowed values; NULL-name ended */
    const char *text;            /* canonical text key; NULL: not in the text.
                                    Consecutive rows with one text key share
                                    one item, values joined by 'x' ("tile=128x128x64") */
    int text_value;              /* ENUM: 1 writes the value (0/1), not the spelling.
                                    BOOL: 1 writes the item only when true, INT only
                                    when not 1 (a knob added after kernels shipped:
                                    their texts, which tables and cache keys hold,
                                    stay as they were) */
    const char *frag;            /* sweep name fragment prefix; NULL: not sweepable.
                                    MAP: "" joins the children's fragments with '_',
                                    else prefix + values joined by 'x' */
    int lo, hi;                  /* INT: the language's range */
    int sig;                     /* KILN_KNOB_SIG_*: a term of the tuning signature
                                    (its text key) when a call needs a value other
                                    than kiln_desc_init's */
} kiln_knob;

enum { KILN_KNOB_SIG_NONE = 0, KILN_KNOB_SIG_FWD = 1, KILN_KNOB_SIG_WGRAD = 2 };

/* The table in schema order, ended by a row with a NULL key. */
extern const kiln_knob kiln_knobs[];
#define KILN_KNOB_COUNT_MAX 48

const kiln_knob *kiln_knob_find(const char *key);
/* Rows that carry a value of the description (INT .. NAME). */
int kiln_knob_has_value(const kiln_knob *k);

/* The stored value of an INT, BOOL or ENUM knob (STRING: the index of its
 * choice, -1 if none), and setting it. */
int kiln_knob_get(const kiln_knob *k, const kiln_kernel_desc *d);
void kiln_knob_set(const kiln_knob *k, kiln_kernel_desc *d, int v);
/* The spelling of an ENUM or STRING knob's value ("?" if none). */
const char *kiln_knob_spelling(const kiln_knob *k, const kiln_kernel_desc *d);
/* Sets an ENUM or STRING knob from a spelling; 0 if not one of its choices. */
int kiln_knob_set_spelling(const kiln_knob *k, kiln_kernel_desc *d, const char *s);
/* The member's address, for STRING and NAME knobs. */
char *kiln_knob_str(const kiln_knob *k, kiln_kernel_desc *d);

/* The value as the text form writes it, without the key ("128", "per_group"). */
void kiln_knob_value_text(const kiln_knob *k, const kiln_kernel_desc *d, char *buf, size_t size);
/* Sets a value from kiln_knob_value_text's form; 0 if malformed. */
int kiln_knob_parse_value(const kiln_knob *k, kiln_kernel_desc *d, const char *v);

/* The sweep name fragment of a sweepable knob for d ("s4", "rgroup",
 * "m128_n128_k64"). */
void kiln_knob_fragment(const kiln_knob *k, const kiln_kernel_desc *d, char *buf, size_t size);

/* The language's kernel-name rule, [A-Za-z_][A-Za-z0-9_]*, shared by the
 * spec parser and by every reader of names from files (bundles): a name that
 * passes it is safe in a file name, a C identifier and a log line.  Length
 * is the caller's limit. */
int kiln_kernel_name_ok(const char *s);
/* Where s first breaks that rule (strlen(s) if nowhere; 0 for ""). */
size_t kiln_kernel_name_bad_at(const char *s);

#endif /* KILN_KNOBS_H */
