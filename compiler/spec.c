/* SPDX-License-Identifier: Apache-2.0 */
/*
 * spec.c — YAML kernel specs: the schema, parsing with libyaml's document
 * API (every node keeps its mark), positions, and validation.  Sweeps (the
 * grid of a family and its constraints) live in sweep.c and reuse the value
 * setters here through spec_internal.h.
 *
 * Errors are one line "path:line:col: message".  Malformed values point at
 * the value; rules about a key (validation) point at the key; unknown and
 * duplicate keys point at the key.  The language is documented in
 * docs/specs.md.
 */
#include <ctype.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "expand.h"
#include "spec_internal.h"
#include "yaml_limits.h"

/* ------------------------------------------------------------------------ */
/* Schema                                                                   */
/* ------------------------------------------------------------------------ */

/* The schema is the knob table (kernel/knobs.c): its rows in order, maps
 * ("tile") before their dotted children. */

/* f's name under prefix (of length plen; "" for the top level) when f is a
 * direct child of it, else NULL. */
static const char *child_name(const kiln_knob *f, const char *prefix, size_t plen)
{
    const char *rest = f->key;
    if (plen) {
        if (strncmp(f->key, prefix, plen) || f->key[plen] != '.') return NULL;
        rest = f->key + plen + 1;
    }
    return strchr(rest, '.') ? NULL : rest;
}

/* The fields directly under prefix ("" for the top level), as "a, b, c". */
static void list_children(const char *prefix, char *buf, size_t size)
{
    size_t plen = strlen(prefix), used = 0;
    buf[0] = '\0';
    for (const kiln_knob *f = kiln_knobs; f->key; f++) {
        const char *rest = child_name(f, prefix, plen);
        if (!rest) continue;
        int n = snprintf(buf + used, size - used, "%s%s", used ? ", " : "", rest);
        if (n < 0 || (size_t)n >= size - used) break;
        used += (size_t)n;
    }
}

static void list_choices(const kiln_knob_choice *choices, char *buf, size_t size)
{
    size_t used = 0;
    buf[0] = '\0';
    for (int i = 0; choices[i].name; i++) {
        int n = snprintf(buf + used, size - used, "%s%s", i ? ", " : "", choices[i].name);
        if (n < 0 || (size_t)n >= size - used) break;
        used += (size_t)n;
    }
}

/* Edit distance, for "did you mean" on unknown keys. */
static int edit_distance(const char *a, const char *b)
{
    size_t la = strlen(a), lb = strlen(b);
    if (la > 31 || lb > 31) return 99;
    int row[32];
    for (size_t j = 0; j <= lb; j++) row[j] = (int)j;
    for (size_t i = 1; i <= la; i++) {
        int diag = row[0];
        row[0] = (int)i;
        for (size_t j = 1; j <= lb; j++) {
            int up = row[j];
            int best = diag + (a[i - 1] != b[j - 1]);
            if (up + 1 < best) best = up + 1;
            if (row[j - 1] + 1 < best) best = row[j - 1] + 1;
            row[j] = best;
            diag = up;
        }
    }
    return row[lb];
}

static const char *suggest(const char *prefix, const char *name)
{
    size_t plen = strlen(prefix);
    const char *best = NULL;
    int best_d = 3;
    for (const kiln_knob *f = kiln_knobs; f->key; f++) {
        const char *rest = child_name(f, prefix, plen);
        if (!rest) continue;
        int d = edit_distance(name, rest);
        if (d < best_d && d < (int)strlen(name)) {
            best_d = d;
            best = rest;
        }
    }
    return best;
}

/* ------------------------------------------------------------------------ */
/* Errors and nodes                                                         */
/* ------------------------------------------------------------------------ */

void kiln_spec_one_line(char *s)
{
    for (; *s; s++)
        if ((unsigned char)*s < 0x20 || *s == 0x7f) *s = '?';
}

kiln_status kiln_spec_error_at(const kiln_spec_ctx *c, int line, int col, const char *fmt, ...)
{
    char msg[KILN_ERROR_MAX];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    kiln_spec_one_line(msg); /* quoted values may hold newlines */
    return kiln_error_set(c->err, KILN_ERROR_INVALID_SPEC, "%s:%d:%d: %s", c->path, line, col,
                          msg);
}

#define AT(n) (int)(n)->start_mark.line + 1, (int)(n)->start_mark.column + 1

yaml_node_t *kiln_spec_node(const kiln_spec_ctx *c, int id)
{
    return yaml_document_get_node(c->doc, id);
}

static int is_quoted(const yaml_node_t *n)
{
    return n->data.scalar.style == YAML_SINGLE_QUOTED_SCALAR_STYLE ||
           n->data.scalar.style == YAML_DOUBLE_QUOTED_SCALAR_STYLE;
}

/* A plain scalar that YAML reads as null: empty, "~", "null". */
static int is_null(const yaml_node_t *n)
{
    if (n->type != YAML_SCALAR_NODE || is_quoted(n)) return 0;
    const char *s = (const char *)n->data.scalar.value;
    return !*s || !strcmp(s, "~") || !strcmp(s, "null") || !strcmp(s, "Null") ||
           !strcmp(s, "NULL");
}

const char *kiln_spec_scalar(const yaml_node_t *n)
{
    return (const char *)n->data.scalar.value;
}

/* What a node is, for "expected X, got Y" messages. */
static void describe(const yaml_node_t *n, char *buf, size_t size)
{
    if (n->type == YAML_MAPPING_NODE) snprintf(buf, size, "a mapping");
    else if (n->type == YAML_SEQUENCE_NODE) snprintf(buf, size, "a list");
    else if (is_null(n)) snprintf(buf, size, "nothing (null)");
    else if (is_quoted(n)) snprintf(buf, size, "the string \"%.60s\"", kiln_spec_scalar(n));
    else snprintf(buf, size, "\"%.60s\"", kiln_spec_scalar(n));
}

static kiln_status want_scalar(const kiln_spec_ctx *c, const char *key, const yaml_node_t *n,
                               const char *what)
{
    char got[96];
    if (n->type == YAML_SCALAR_NODE && !is_null(n) &&
        strlen(kiln_spec_scalar(n)) == n->data.scalar.length)
        return KILN_OK;
    describe(n, got, sizeof got);
    if (n->type == YAML_SCALAR_NODE && !is_null(n))
        return kiln_spec_error_at(c, AT(n), "%s must be %s (got a string with a NUL byte)", key,
                                  what);
    return kiln_spec_error_at(c, AT(n), "%s must be %s, got %s", key, what, got);
}

static kiln_status get_int(const kiln_spec_ctx *c, const char *key, const yaml_node_t *n, int *out)
{
    kiln_status st = want_scalar(c, key, n, "an integer");
    if (st) return st;
    const char *s = kiln_spec_scalar(n);
    if (is_quoted(n))
        return kiln_spec_error_at(c, AT(n), "%s must be an integer, got the string \"%.60s\" "
                                            "(drop the quotes)", key, s);
    const char *p = s;
    if (*p == '+' || *p == '-') p++;
    if (!isdigit((unsigned char)*p))
        return kiln_spec_error_at(c, AT(n), "%s must be an integer (got \"%.60s\")", key, s);
    long long v = 0;
    for (; isdigit((unsigned char)*p); p++) {
        v = v * 10 + (*p - '0');
        if (v > KILN_SPEC_INT_MAX)
            return kiln_spec_error_at(c, AT(n), "%s is out of range (got %.60s; at most %d)", key,
                                      s, KILN_SPEC_INT_MAX);
    }
    if (*p)
        return kiln_spec_error_at(c, AT(n), "%s must be an integer (got \"%.60s\")", key, s);
    *out = (int)(s[0] == '-' ? -v : v);
    return KILN_OK;
}

static kiln_status get_bool(const kiln_spec_ctx *c, const char *key, const yaml_node_t *n, int *out)
{
    kiln_status st = want_scalar(c, key, n, "true or false");
    if (st) return st;
    const char *s = kiln_spec_scalar(n);
    if (!is_quoted(n)) {
        if (!strcasecmp(s, "true") || !strcasecmp(s, "yes")) {
            *out = 1;
            return KILN_OK;
        }
        if (!strcasecmp(s, "false") || !strcasecmp(s, "no")) {
            *out = 0;
            return KILN_OK;
        }
    }
    return kiln_spec_error_at(c, AT(n), "%s must be true or false (yes/no), got %s\"%.60s\"", key,
                              is_quoted(n) ? "the string " : "", s);
}

static kiln_status get_choice(const kiln_spec_ctx *c, const char *key, const yaml_node_t *n,
                              const kiln_knob_choice *choices, const char **out)
{
    char allowed[256];
    list_choices(choices, allowed, sizeof allowed);
    char what[300];
    snprintf(what, sizeof what, "one of %s", allowed);
    kiln_status st = want_scalar(c, key, n, what);
    if (st) return st;
    for (int i = 0; choices[i].name; i++)
        if (!strcmp(kiln_spec_scalar(n), choices[i].name)) {
            *out = choices[i].name;
            return KILN_OK;
        }
    return kiln_spec_error_at(c, AT(n), "%s must be one of %s (got \"%.60s\")", key, allowed,
                              kiln_spec_scalar(n));
}

/* ------------------------------------------------------------------------ */
/* Positions                                                                */
/* ------------------------------------------------------------------------ */

void kiln_spec_set_pos(kiln_spec *spec, const char *key, int line, int col)
{
    for (int i = 0; i < spec->n_pos; i++)
        if (!strcmp(spec->pos[i].key, key)) {
            spec->pos[i].line = line;
            spec->pos[i].col = col;
            return;
        }
    /* The schema has fewer keys than slots; a full table only loses
     * precision (lookups fall back to the parent key). */
    if (spec->n_pos >= KILN_SPEC_MAX_POS || strlen(key) >= sizeof spec->pos[0].key) return;
    kiln_spec_pos *p = &spec->pos[spec->n_pos++];
    snprintf(p->key, sizeof p->key, "%s", key);
    p->line = line;
    p->col = col;
}

int kiln_spec_find_pos(const kiln_spec *spec, const char *key, int *line, int *col)
{
    char k[64];
    snprintf(k, sizeof k, "%s", key ? key : "");
    for (int exact = 1;; exact = 0) {
        for (int i = 0; i < spec->n_pos; i++)
            if (!strcmp(spec->pos[i].key, k)) {
                *line = spec->pos[i].line;
                *col = spec->pos[i].col;
                return exact;
            }
        char *dot = strrchr(k, '.');
        if (!dot) break;
        *dot = '\0'; /* "tile.m" not written: point at "tile" */
    }
    *line = spec->line;
    *col = spec->col;
    return 0;
}

static kiln_status get_arch(kiln_spec_ctx *c, const kiln_knob *f, const yaml_node_t *n)
{
    kiln_kernel_desc *d = &c->spec->desc;
    const yaml_node_t *items[KILN_MAX_ARCHS];
    int count = 0;
    if (n->type == YAML_SEQUENCE_NODE) {
        int total = (int)(n->data.sequence.items.top - n->data.sequence.items.start);
        if (total == 0)
            return kiln_spec_error_at(c, AT(n), "arch is empty; name at least one of "
                                                "sm_90a, sm_80, sm_100a");
        if (total > KILN_MAX_ARCHS)
            return kiln_spec_error_at(c, AT(n), "arch lists %d architectures; at most %d", total,
                                      KILN_MAX_ARCHS);
        for (int i = 0; i < total; i++)
            items[count++] = kiln_spec_node(c, n->data.sequence.items.start[i]);
    } else {
        items[count++] = n;
    }
    d->n_archs = 0;
    for (int i = 0; i < count; i++) {
        const char *v;
        kiln_status st = get_choice(c, "arch", items[i], f->choices, &v);
        if (st) return st;
        for (int j = 0; j < d->n_archs; j++)
            if (!strcmp(d->archs[j], v))
                return kiln_spec_error_at(c, AT(items[i]), "arch lists %s twice", v);
        snprintf(d->archs[d->n_archs++], KILN_ARCH_MAX, "%s", v);
    }
    return KILN_OK;
}

static kiln_status apply_map(kiln_spec_ctx *c, const char *prefix, const yaml_node_t *n);

kiln_status kiln_spec_apply(kiln_spec_ctx *c, const kiln_knob *f, const yaml_node_t *n)
{
    kiln_kernel_desc *d = &c->spec->desc;
    kiln_status st;
    int iv = 0;
    const char *sv;
    switch (f->kind) {
    case KILN_KNOB_MAP: return apply_map(c, f->key, n);
    case KILN_KNOB_INT:
    case KILN_KNOB_BOOL:
        st = f->kind == KILN_KNOB_INT ? get_int(c, f->key, n, &iv) : get_bool(c, f->key, n, &iv);
        if (!st) kiln_knob_set(f, d, iv);
        return st;
    case KILN_KNOB_ENUM:
    case KILN_KNOB_STRING:
        st = get_choice(c, f->key, n, f->choices, &sv);
        if (!st) kiln_knob_set_spelling(f, d, sv);
        return st;
    case KILN_KNOB_ARCHS: return get_arch(c, f, n);
    case KILN_KNOB_NAME:
        st = want_scalar(c, "kernel", n, "a name");
        if (st) return st;
        sv = kiln_spec_scalar(n);
        if (!kiln_kernel_name_ok(sv))
            return kiln_spec_error_at(c, AT(n), "kernel name \"%.60s\" must match "
                                                "[A-Za-z_][A-Za-z0-9_]*", sv);
        if (strlen(sv) > KILN_SPEC_NAME_MAX)
            return kiln_spec_error_at(c, AT(n), "kernel name is %zu characters long; at most %d",
                                      strlen(sv), KILN_SPEC_NAME_MAX);
        snprintf(d->name, sizeof d->name, "%s", sv);
        return KILN_OK;
    case KILN_KNOB_SWEEP: c->sweep = n; return KILN_OK;
    case KILN_KNOB_CONSTRAINTS: c->constraints = n; return KILN_OK;
    }
    return KILN_OK;
}

static kiln_status apply_map(kiln_spec_ctx *c, const char *prefix, const yaml_node_t *n)
{
    if (n->type != YAML_MAPPING_NODE) {
        char got[96];
        describe(n, got, sizeof got);
        if (!*prefix)
            return kiln_spec_error_at(c, AT(n), "a spec must be a mapping of keys "
                                                "(kernel:, op:, ...), got %s", got);
        if (!strcmp(prefix, "tile"))
            return kiln_spec_error_at(c, AT(n), "tile must be a mapping like "
                                                "{m: 128, n: 128, k: 64}, got %s", got);
        if (!strcmp(prefix, "cluster"))
            return kiln_spec_error_at(c, AT(n), "cluster must be a mapping like {m: 1, n: 1}, "
                                                "got %s", got);
        return kiln_spec_error_at(c, AT(n), "%s must be a mapping, got %s", prefix, got);
    }
    const yaml_node_pair_t *start = n->data.mapping.pairs.start, *top = n->data.mapping.pairs.top;
    for (const yaml_node_pair_t *p = start; p < top; p++) {
        const yaml_node_t *k = kiln_spec_node(c, p->key), *v = kiln_spec_node(c, p->value);
        const char *where = *prefix ? prefix : "the top level";
        if (k->type != YAML_SCALAR_NODE || is_null(k))
            return kiln_spec_error_at(c, AT(k), "keys in %s must be plain words", where);
        const char *name = kiln_spec_scalar(k);
        for (const yaml_node_pair_t *q = start; q < p; q++) {
            const yaml_node_t *k2 = kiln_spec_node(c, q->key);
            if (k2->type == YAML_SCALAR_NODE && !strcmp(kiln_spec_scalar(k2), name))
                return kiln_spec_error_at(c, AT(k), "duplicate key '%.60s' in %s (first at "
                                                    "line %d)", name, where,
                                          (int)k2->start_mark.line + 1);
        }
        char full[128];
        snprintf(full, sizeof full, "%s%s%s", prefix, *prefix ? "." : "", name);
        const kiln_knob *f = strchr(name, '.') ? NULL : kiln_knob_find(full);
        if (!f) {
            char allowed[512];
            list_children(prefix, allowed, sizeof allowed);
            const char *s = suggest(prefix, name);
            char hint[96] = "";
            if (s) snprintf(hint, sizeof hint, " (did you mean '%s'?)", s);
            return kiln_spec_error_at(c, AT(k), "unknown key '%.60s' in %s%s; allowed: %s", name,
                                      where, hint, allowed);
        }
        kiln_spec_set_pos(c->spec, full, AT(k));
        c->seen[f - kiln_knobs] = 1;
        kiln_status st = kiln_spec_apply(c, f, v);
        if (st) return st;
    }
    return KILN_OK;
}

/* ------------------------------------------------------------------------ */
/* Validation                                                               */
/* ------------------------------------------------------------------------ */

static int is_16(kiln_dtype t) { return t == KILN_DTYPE_BF16 || t == KILN_DTYPE_F16; }

#define FAIL(k, ...)                                                                           \
    do {                                                                                       \
        if (key) *key = (k);                                                                   \
        return kiln_error_set(err, KILN_ERROR_INVALID_SPEC, __VA_ARGS__);                      \
    } while (0)

/* Which blocks and combinations an op takes: rules of the API, whatever
 * the family. */
static kiln_status validate_op_blocks(const kiln_kernel_desc *d, kiln_error *err, const char **key)
{
    const kiln_epilogue_desc *e = &d->epilogue;
    if (d->op == KILN_OP_WGRAD) {
        if (e->bias || e->row_scale || e->scale_bias || e->alpha || e->beta)
            FAIL("epilogue", "epilogue applies to fprop and dgrad only; wgrad has the wgrad: "
                             "block");
        if (d->weights != KILN_WEIGHTS_ANY)
            FAIL("weights", "weights applies to fprop and dgrad only; wgrad chooses its output "
                            "with wgrad.output");
        if (d->accumulate && d->out_type != KILN_DTYPE_F32)
            FAIL("wgrad.accumulate", "wgrad.accumulate needs types.out: f32 (got %s)",
                 kiln_dtype_name(d->out_type));
        if (d->split > 1 && d->out_type != KILN_DTYPE_F32)
            FAIL("wgrad.split", "wgrad.split > 1 adds partial sums atomically and needs "
                                "types.out: f32 (got %s)", kiln_dtype_name(d->out_type));
        if (d->rows && !d->accumulate)
            FAIL("wgrad.rows", "wgrad.rows applies to wgrad.accumulate: true (overwrite kernels "
                               "store rows a tile wide wherever their staging fits)");
    } else {
        if (d->wgrad_output != KILN_WGRAD_DENSE || d->accumulate || d->dbias || d->split != 1 ||
            d->rows)
            FAIL("wgrad", "wgrad options apply to op wgrad only (this kernel is %s)",
                 kiln_op_name(d->op));
        if (e->scale_bias && !e->row_scale)
            FAIL("epilogue.scale_bias", "epilogue.scale_bias needs epilogue.scale: per_row");
        if (e->scale_bias && e->bias == KILN_BIAS_NONE)
            FAIL("epilogue.scale_bias", "epilogue.scale_bias needs epilogue.bias: per_group");
    }
    return KILN_OK;
}

/* The language's rules: a known arch, every knob in its range or among its
 * spellings, and the blocks of the op.  What a family can build is its
 * template's to say (kiln_template_check). */
static kiln_status validate_language(const kiln_kernel_desc *d, const char *arch, kiln_error *err,
                                     const char **key)
{
    char allowed[256];
    if (!d->name[0]) FAIL("kernel", "kernel name is empty");
    if (!kiln_kernel_name_ok(d->name))
        FAIL("kernel", "kernel name \"%s\" must match [A-Za-z_][A-Za-z0-9_]*", d->name);
    const kiln_knob *ak = kiln_knob_find("arch");
    int known = 0;
    for (int i = 0; arch && ak->choices[i].name; i++) known |= !strcmp(arch, ak->choices[i].name);
    list_choices(ak->choices, allowed, sizeof allowed);
    if (!known) FAIL("arch", "arch must be one of %s (got %s)", allowed, arch ? arch : "none");
    for (const kiln_knob *k = kiln_knobs; k->key; k++) {
        if (k->kind == KILN_KNOB_INT || k->kind == KILN_KNOB_BOOL) {
            int v = kiln_knob_get(k, d);
            if (v < k->lo || v > k->hi)
                FAIL(k->key, "%s must be from %d to %d (got %d)", k->key, k->lo, k->hi, v);
        } else if (k->kind == KILN_KNOB_ENUM || k->kind == KILN_KNOB_STRING) {
            if (!strcmp(kiln_knob_spelling(k, d), "?") ||
                (k->kind == KILN_KNOB_STRING && kiln_knob_get(k, d) < 0)) {
                list_choices(k->choices, allowed, sizeof allowed);
                FAIL(k->key, "%s must be one of %s (got %s)", k->key, allowed,
                     kiln_knob_spelling(k, d));
            }
        }
    }
    return validate_op_blocks(d, err, key);
}

#undef FAIL

kiln_status kiln_spec_validate_with(kiln_expander *ex, const kiln_kernel_desc *d,
                                    const char *arch, int *smem, kiln_error *err,
                                    const char **key)
{
    const char *k = NULL;
    if (smem) *smem = 0;
    kiln_status st = validate_language(d, arch, err, &k);
    if (st == KILN_OK) st = kiln_template_check(ex, d, arch, smem, err, &k);
    if (key) *key = k;
    return st;
}

kiln_status kiln_spec_validate(const kiln_kernel_desc *d, const char *arch, kiln_error *err,
                               const char **key)
{
    return kiln_spec_validate_with(NULL, d, arch, NULL, err, key);
}

/* Validates for every arch of the spec; on failure err holds the positioned
 * message.  prefix (may be NULL) goes before the message (a sweep point's
 * name).  *smem (may be NULL) gets what the template reports for the first
 * arch. */
kiln_status kiln_spec_check(const kiln_spec *spec, kiln_expander *ex, const char *prefix,
                            int *smem, kiln_error *err)
{
    for (int i = 0; i < spec->desc.n_archs; i++) {
        const char *key = NULL;
        kiln_status st = kiln_spec_validate_with(ex, &spec->desc, spec->desc.archs[i],
                                                 i == 0 ? smem : NULL, err, &key);
        if (st == KILN_OK) continue;
        int line, col;
        /* A family left at its default is best shown at the arch it fails. */
        if (!kiln_spec_find_pos(spec, key, &line, &col) && key && !strcmp(key, "family"))
            kiln_spec_find_pos(spec, "arch", &line, &col);
        char msg[KILN_ERROR_MAX];
        memcpy(msg, err->msg, sizeof msg);
        kiln_error_set(err, st, "%s:%d:%d: %s%s%s", spec->path, line, col, prefix ? prefix : "",
                       prefix ? ": " : "", msg);
        return st;
    }
    return KILN_OK;
}

/* ------------------------------------------------------------------------ */
/* Lists                                                                    */
/* ------------------------------------------------------------------------ */

kiln_status kiln_spec_list_push(kiln_spec_list *list, const kiln_spec *spec, kiln_error *err)
{
    if ((list->count & (list->count - 1)) == 0) { /* grow at powers of two */
        size_t cap = list->count ? list->count * 2 : 1;
        kiln_spec *p = realloc(list->items, cap * sizeof *p);
        if (!p) return kiln_error_set(err, KILN_ERROR_OUT_OF_MEMORY, "out of memory");
        list->items = p;
    }
    list->items[list->count++] = *spec;
    return KILN_OK;
}

kiln_status kiln_spec_list_drop(kiln_spec_list *list, const char *reason, kiln_error *err)
{
    char *copy = strdup(reason);
    char **p = copy ? realloc(list->dropped_reasons, (list->dropped + 1) * sizeof *p) : NULL;
    if (!p) {
        free(copy);
        return kiln_error_set(err, KILN_ERROR_OUT_OF_MEMORY, "out of memory");
    }
    p[list->dropped++] = copy;
    list->dropped_reasons = p;
    return KILN_OK;
}

void kiln_spec_list_free(kiln_spec_list *list)
{
    if (!list) return;
    for (size_t i = 0; i < list->dropped; i++) free(list->dropped_reasons[i]);
    free(list->dropped_reasons);
    free(list->items);
    memset(list, 0, sizeof *list);
}

/* ------------------------------------------------------------------------ */
/* Loading                                                                  */
/* ------------------------------------------------------------------------ */

static kiln_status syntax_error(const char *path, const yaml_parser_t *p, kiln_error *err)
{
    const char *problem = p->problem ? p->problem : "malformed YAML";
    if (p->error == YAML_MEMORY_ERROR)
        return kiln_error_set(err, KILN_ERROR_OUT_OF_MEMORY, "%s: out of memory", path);
    if (p->error == YAML_READER_ERROR) /* marks are not set for encoding errors */
        return kiln_error_set(err, KILN_ERROR_INVALID_SPEC, "%s:1:1: %s (at byte %zu)", path,
                              problem, p->problem_offset);
    if (p->context)
        return kiln_error_set(err, KILN_ERROR_INVALID_SPEC, "%s:%d:%d: %s %s (line %d)", path,
                              (int)p->problem_mark.line + 1, (int)p->problem_mark.column + 1,
                              problem, p->context, (int)p->context_mark.line + 1);
    return kiln_error_set(err, KILN_ERROR_INVALID_SPEC, "%s:%d:%d: %s", path,
                          (int)p->problem_mark.line + 1, (int)p->problem_mark.column + 1,
                          problem);
}

void kiln_spec_type_defaults(const kiln_spec_ctx *c, kiln_kernel_desc *d)
{
    if (!c->seen[kiln_knob_find("types.b") - kiln_knobs]) d->b_type = d->a_type;
    if (!c->seen[kiln_knob_find("types.out") - kiln_knobs])
        d->out_type = is_16(d->a_type) ? d->a_type : KILN_DTYPE_BF16;
    /* Family sm90 takes fp8 weights as one tensor only (the quantizer writes
     * them so), and clusters read one tensor only (templates/sm90.lua says
     * why); every other kernel takes them either way by default. */
    if (!c->seen[kiln_knob_find("weights") - kiln_knobs])
        d->weights = !strcmp(d->family, "sm90") && d->op != KILN_OP_WGRAD &&
                             (!is_16(d->a_type) || d->cluster_m * d->cluster_n > 1)
                         ? KILN_WEIGHTS_CONTIGUOUS
                         : KILN_WEIGHTS_ANY;
}

/* Defaults that depend on other keys, and blocks that do not fit the op. */
static kiln_status finish_base(kiln_spec_ctx *c, const yaml_node_t *root)
{
    kiln_kernel_desc *d = &c->spec->desc;
    static const char *const required[] = {"kernel", "op", "types", "types.a"};
    static const char *const hint[] = {"a name like fprop_bf16_128x128",
                                       "fprop, dgrad or wgrad", "{a: bf16, ...}",
                                       "bf16, fp16, e4m3 or e5m2"};
    for (int i = 0; i < 4; i++) {
        const kiln_knob *f = kiln_knob_find(required[i]);
        if (c->seen[f - kiln_knobs]) continue;
        int line = (int)root->start_mark.line + 1, col = (int)root->start_mark.column + 1;
        if (i == 3) kiln_spec_find_pos(c->spec, "types", &line, &col);
        return kiln_spec_error_at(c, line, col, "missing required key '%s' (%s)", required[i],
                                  hint[i]);
    }
    kiln_spec_type_defaults(c, d);
    static const char *const blocks[] = {"epilogue", "weights", "wgrad"};
    for (int i = 0; i < 3; i++) {
        if (!c->seen[kiln_knob_find(blocks[i]) - kiln_knobs]) continue;
        int wgrad_block = i == 2, is_wgrad = d->op == KILN_OP_WGRAD;
        if (wgrad_block == is_wgrad) continue;
        int line, col;
        kiln_spec_find_pos(c->spec, blocks[i], &line, &col);
        if (wgrad_block)
            return kiln_spec_error_at(c, line, col, "wgrad: applies to op wgrad only (this "
                                                    "kernel is %s)", kiln_op_name(d->op));
        return kiln_spec_error_at(c, line, col, "%s: applies to fprop and dgrad only (this "
                                                "kernel is wgrad; use the wgrad: block)",
                                  blocks[i]);
    }
    return KILN_OK;
}

kiln_status kiln_spec_parse(const char *text, size_t len, const char *path, kiln_spec_list *out,
                            kiln_error *err)
{
    return kiln_spec_parse_with(text, len, path, NULL, out, err);
}

kiln_status kiln_spec_parse_with(const char *text, size_t len, const char *path,
                                 kiln_expander *ex, kiln_spec_list *out, kiln_error *err)
{
    kiln_error local;
    if (!err) err = &local; /* the caller may not want the message */
    memset(out, 0, sizeof *out);
    kiln_error_clear(err);
    if (!path) path = "<spec>";
    if (!text) return kiln_error_set(err, KILN_ERROR_INVALID_ARGUMENT, "%s: no text", path);

    /* Size, depth, anchors, aliases and tags first, while libyaml only
     * streams events: its loader is slow and large on hostile text. */
    kiln_status lim = kiln_yaml_check_limits(text, len, path, err);
    if (lim) return lim;

    yaml_parser_t parser;
    yaml_document_t doc;
    if (!yaml_parser_initialize(&parser))
        return kiln_error_set(err, KILN_ERROR_OUT_OF_MEMORY, "%s: out of memory", path);
    yaml_parser_set_input_string(&parser, (const unsigned char *)text, len);
    if (!yaml_parser_load(&parser, &doc)) {
        kiln_status st = syntax_error(path, &parser, err);
        yaml_parser_delete(&parser);
        return st;
    }

    kiln_spec *base = calloc(1, sizeof *base);
    kiln_spec_ctx c;
    memset(&c, 0, sizeof c);
    c.path = path;
    c.doc = &doc;
    c.err = err;
    c.spec = base;
    c.ex = ex;
    kiln_status st = KILN_OK;
    yaml_node_t *root = yaml_document_get_root_node(&doc);
    if (!base) {
        st = kiln_error_set(err, KILN_ERROR_OUT_OF_MEMORY, "%s: out of memory", path);
        goto done;
    }
    if (!root) {
        st = kiln_spec_error_at(&c, 1, 1, "empty spec; expected a mapping with at least "
                                          "kernel:, op: and types:");
        goto done;
    }
    kiln_desc_init(&base->desc);
    snprintf(base->path, sizeof base->path, "%s", path);
    base->line = (int)root->start_mark.line + 1;
    base->col = (int)root->start_mark.column + 1;
    if ((st = apply_map(&c, "", root))) goto done;
    if ((st = finish_base(&c, root))) goto done;

    /* One document per file: a second one is most likely a pasting mistake. */
    yaml_document_t next;
    if (!yaml_parser_load(&parser, &next)) {
        st = syntax_error(path, &parser, err);
        goto done;
    }
    yaml_node_t *next_root = yaml_document_get_root_node(&next);
    if (next_root)
        st = kiln_spec_error_at(&c, AT(next_root), "a spec file holds one YAML document; "
                                                   "this is a second one");
    yaml_document_delete(&next);
    if (st) goto done;

    if (c.constraints && !c.sweep) {
        int line, col;
        kiln_spec_find_pos(base, "constraints", &line, &col);
        st = kiln_spec_error_at(&c, line, col, "constraints: applies to sweeps only (add a "
                                               "sweep: block)");
        goto done;
    }
    if (c.sweep) {
        st = kiln_sweep_expand(&c, out);
    } else if ((st = kiln_spec_check(base, c.ex, NULL, NULL, err)) == KILN_OK) {
        st = kiln_spec_list_push(out, base, err);
    }
done:
    if (st) kiln_spec_list_free(out);
    free(base);
    yaml_document_delete(&doc);
    yaml_parser_delete(&parser);
    return st;
}

kiln_status kiln_spec_load(const char *path, kiln_spec_list *out, kiln_error *err)
{
    return kiln_spec_load_with(path, NULL, out, err);
}

kiln_status kiln_spec_load_with(const char *path, kiln_expander *ex, kiln_spec_list *out,
                                kiln_error *err)
{
    kiln_error local;
    if (!err) err = &local;
    memset(out, 0, sizeof *out);
    if (!path) return kiln_error_set(err, KILN_ERROR_INVALID_ARGUMENT, "kiln_spec_load: no path");
    char *text;
    size_t len;
    kiln_status st = kiln_file_read(path, &text, &len, err);
    if (st) {
        /* "path: reason" -> "path: cannot read spec: reason" */
        size_t n = strlen(path);
        if (st == KILN_ERROR_IO && err && !strncmp(err->msg, path, n) && err->msg[n] == ':') {
            char reason[KILN_ERROR_MAX];
            snprintf(reason, sizeof reason, "%s", err->msg + n + 1);
            kiln_error_set(err, st, "%s: cannot read spec:%s", path, reason);
        }
        return st;
    }
    st = kiln_spec_parse_with(text, len, path, ex, out, err);
    free(text);
    return st;
}
