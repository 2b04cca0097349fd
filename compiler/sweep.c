/* SPDX-License-Identifier: Apache-2.0 */
/*
 * sweep.c — families of kernels: a base spec plus `sweep:` axes whose grid
 * expands into concrete kernels, filtered by the validator and by optional
 * `constraints:` (a shared-memory cap and small integer expressions).
 *
 * Malformed sweeps (unknown axes, bad values, syntax errors in expressions)
 * are errors of the file; points that are well formed but invalid for the
 * hardware, or fail a constraint, are dropped with a positioned reason.
 */
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "spec_internal.h"

#define AT(n) (int)(n)->start_mark.line + 1, (int)(n)->start_mark.column + 1
#define MAX_AXES 16
#define MAX_POINTS 4096
#define MAX_REQUIRE 16
#define MAX_DEPTH 64

/* ------------------------------------------------------------------------ */
/* Expressions: integers, names of numeric fields, + - * / %, comparisons,  */
/* && || !, parentheses.  Evaluated in 64-bit; overflow is an error.        */
/* ------------------------------------------------------------------------ */

typedef struct expr {
    const char *s, *p;
    const kiln_kernel_desc *d;
    long long smem;              /* what the template reports (0 in a syntax check) */
    int check;                   /* syntax check: division by zero is not an error */
    int depth;
    const char *error;           /* first error, NULL if none */
    size_t error_at;             /* byte offset into s */
    char buf[240];
} expr;

/* Names an expression may use: the integer knobs (by spec key), then what
 * the point needs (smem, as its template reports it) and element sizes. */
static const char *const expr_derived[] = {"smem", "a_bytes", "b_bytes", "out_bytes"};

static void expr_names(char *buf, size_t size)
{
    size_t used = 0;
    buf[0] = '\0';
    for (const kiln_knob *k = kiln_knobs; k->key; k++)
        if (k->kind == KILN_KNOB_INT && used < size)
            used += (size_t)snprintf(buf + used, size - used, "%s, ", k->key);
    for (size_t i = 0; i < 4 && used < size; i++)
        used += (size_t)snprintf(buf + used, size - used, "%s%s", expr_derived[i], i < 3 ? ", " : "");
}

static int expr_var(const expr *e, const char *name, long long *v)
{
    const kiln_kernel_desc *d = e->d;
    const kiln_knob *k = kiln_knob_find(name);
    if (k && k->kind == KILN_KNOB_INT) {
        *v = kiln_knob_get(k, d);
        return 1;
    }
    const long long derived[] = {e->smem, kiln_dtype_size(d->a_type), kiln_dtype_size(d->b_type),
                                 kiln_dtype_size(d->out_type)};
    for (size_t i = 0; i < 4; i++)
        if (!strcmp(expr_derived[i], name)) {
            *v = derived[i];
            return 1;
        }
    return 0;
}

static void ex_fail(expr *e, const char *at, const char *msg)
{
    if (e->error) return;
    e->error = msg;
    e->error_at = (size_t)(at - e->s);
}

static int ex_accept(expr *e, const char *op)
{
    while (isspace((unsigned char)*e->p)) e->p++;
    size_t n = strlen(op);
    if (strncmp(e->p, op, n)) return 0;
    /* "<" must not take the first half of "<=", nor "!" of "!=". */
    if (n == 1 && strchr("<>!", op[0]) && e->p[1] == '=') return 0;
    if (n == 1 && strchr("&|", op[0])) return 0;
    e->p += n;
    return 1;
}

static long long ex_or(expr *e);

static long long ex_primary(expr *e)
{
    while (isspace((unsigned char)*e->p)) e->p++;
    const char *at = e->p;
    if (isdigit((unsigned char)*at)) {
        long long v = 0;
        while (isdigit((unsigned char)*e->p)) {
            if (__builtin_mul_overflow(v, 10, &v) ||
                __builtin_add_overflow(v, *e->p - '0', &v)) {
                ex_fail(e, at, "number too large");
                return 0;
            }
            e->p++;
        }
        return v;
    }
    if (isalpha((unsigned char)*at) || *at == '_') {
        while (isalnum((unsigned char)*e->p) || *e->p == '_' || *e->p == '.') e->p++;
        char name[64];
        size_t n = (size_t)(e->p - at);
        long long v = 0;
        snprintf(name, sizeof name, "%.*s", (int)(n < 63 ? n : 63), at);
        if (n >= 63 || !expr_var(e, name, &v)) {
            char known[160];
            expr_names(known, sizeof known);
            snprintf(e->buf, sizeof e->buf, "unknown name '%s' (known: %s)", name, known);
            ex_fail(e, at, e->buf);
        }
        return v;
    }
    if (ex_accept(e, "(")) {
        if (++e->depth > MAX_DEPTH) {
            ex_fail(e, at, "parentheses nested too deeply");
            return 0;
        }
        long long v = ex_or(e);
        e->depth--;
        if (!ex_accept(e, ")")) ex_fail(e, e->p, "expected ')'");
        return v;
    }
    ex_fail(e, at, *at ? "expected a number, a field name or '('" : "unexpected end");
    return 0;
}

static long long ex_unary(expr *e)
{
    const char *at = e->p;
    if (ex_accept(e, "-") || ex_accept(e, "!")) {
        char op = e->p[-1];
        if (++e->depth > MAX_DEPTH) {
            ex_fail(e, at, "expression nested too deeply");
            return 0;
        }
        long long v = ex_unary(e);
        e->depth--;
        return op == '!' ? !v : -v;
    }
    return ex_primary(e);
}

static long long ex_mul(expr *e)
{
    long long v = ex_unary(e);
    for (;;) {
        const char *at = e->p;
        char op = ex_accept(e, "*") ? '*' : ex_accept(e, "/") ? '/' : ex_accept(e, "%") ? '%' : 0;
        if (!op) return v;
        long long r = ex_unary(e);
        if (op == '*') {
            if (__builtin_mul_overflow(v, r, &v)) ex_fail(e, at, "overflow");
        } else if (r == 0) {
            if (!e->check) ex_fail(e, at, "division by zero");
            v = 0;
        } else {
            v = op == '/' ? v / r : v % r;
        }
    }
}

static long long ex_add(expr *e)
{
    long long v = ex_mul(e);
    for (;;) {
        const char *at = e->p;
        int plus = ex_accept(e, "+");
        if (!plus && !ex_accept(e, "-")) return v;
        long long r = ex_mul(e);
        if (plus ? __builtin_add_overflow(v, r, &v) : __builtin_sub_overflow(v, r, &v))
            ex_fail(e, at, "overflow");
    }
}

static long long ex_cmp(expr *e)
{
    long long v = ex_add(e);
    static const char *const ops[] = {"<=", ">=", "==", "!=", "<", ">"};
    for (int i = 0; i < 6; i++)
        if (ex_accept(e, ops[i])) {
            long long r = ex_add(e);
            switch (i) {
            case 0: return v <= r;
            case 1: return v >= r;
            case 2: return v == r;
            case 3: return v != r;
            case 4: return v < r;
            default: return v > r;
            }
        }
    return v;
}

static long long ex_and(expr *e)
{
    long long v = ex_cmp(e);
    while (ex_accept(e, "&&")) {
        long long r = ex_cmp(e);
        v = v && r;
    }
    return v;
}

static long long ex_or(expr *e)
{
    long long v = ex_and(e);
    while (ex_accept(e, "||")) {
        long long r = ex_and(e);
        v = v || r;
    }
    return v;
}

/* Returns 1 (true), 0 (false) or -1 (error in e->error). */
static int expr_eval(const char *s, const kiln_kernel_desc *d, long long smem, int check, expr *e)
{
    memset(e, 0, sizeof *e);
    e->s = e->p = s;
    e->d = d;
    e->smem = smem;
    e->check = check;
    long long v = ex_or(e);
    while (isspace((unsigned char)*e->p)) e->p++;
    if (*e->p) ex_fail(e, e->p, "unexpected text");
    return e->error ? -1 : v != 0;
}

/* ------------------------------------------------------------------------ */
/* Axes                                                                     */
/* ------------------------------------------------------------------------ */

typedef struct axis {
    const kiln_knob *f;
    const yaml_node_t *list;     /* a sequence */
    int n;
} axis;

typedef struct sweep {
    axis axes[MAX_AXES];
    int n_axes;
    int max_smem;                /* -1: none */
    const yaml_node_t *max_smem_node;
    const yaml_node_t *require[MAX_REQUIRE];
    int n_require;
} sweep;

static void list_axes(char *buf, size_t size)
{
    size_t used = 0;
    buf[0] = '\0';
    for (const kiln_knob *f = kiln_knobs; f->key; f++) {
        if (!f->frag) continue;
        int n = snprintf(buf + used, size - used, "%s%s", used ? ", " : "", f->key);
        if (n < 0 || (size_t)n >= size - used) break;
        used += (size_t)n;
    }
}

/* "tile" and "tile.m" both swept would fight over one value. */
static int overlaps(const char *a, const char *b)
{
    size_t la = strlen(a), lb = strlen(b);
    if (la > lb) return !strncmp(a, b, lb) && a[lb] == '.';
    if (lb > la) return !strncmp(b, a, la) && b[la] == '.';
    return 0;
}

/* Reads one axis and checks each of its values on a scratch copy of the
 * base, so that expansion itself cannot fail on a value. */
static kiln_status read_axis(kiln_spec_ctx *c, sweep *sw, const yaml_node_t *k,
                             const yaml_node_t *v)
{
    const char *name = kiln_spec_scalar(k);
    const kiln_knob *f = kiln_knob_find(name);
    if (!f || !f->frag) {
        char allowed[512];
        list_axes(allowed, sizeof allowed);
        return kiln_spec_error_at(c, AT(k), "unknown sweep axis '%.60s'; allowed: %s", name,
                                  allowed);
    }
    for (int i = 0; i < sw->n_axes; i++)
        if (overlaps(sw->axes[i].f->key, f->key))
            return kiln_spec_error_at(c, AT(k), "sweep axes '%s' and '%s' overlap; sweep one "
                                                "of them", sw->axes[i].f->key, f->key);
    if (v->type != YAML_SEQUENCE_NODE)
        return kiln_spec_error_at(c, AT(v), "sweep.%s must be a list of values, like "
                                            "[3, 4, 5]", f->key);
    int n = (int)(v->data.sequence.items.top - v->data.sequence.items.start);
    if (n == 0) return kiln_spec_error_at(c, AT(v), "sweep.%s is an empty list", f->key);
    if (sw->n_axes >= MAX_AXES)
        return kiln_spec_error_at(c, AT(k), "a sweep has at most %d axes", MAX_AXES);

    kiln_spec *scratch = malloc(sizeof *scratch);
    char(*frags)[96] = malloc((size_t)n * sizeof *frags);
    kiln_status st = KILN_OK;
    if (!scratch || !frags) {
        st = kiln_error_set(c->err, KILN_ERROR_OUT_OF_MEMORY, "out of memory");
        goto done;
    }
    kiln_spec *saved = c->spec;
    for (int i = 0; i < n && !st; i++) {
        const yaml_node_t *item = kiln_spec_node(c, v->data.sequence.items.start[i]);
        *scratch = *saved;
        c->spec = scratch;
        st = kiln_spec_apply(c, f, item);
        c->spec = saved;
        if (st) break;
        kiln_knob_fragment(f, &scratch->desc, frags[i], sizeof frags[i]);
        for (int j = 0; j < i; j++)
            if (!strcmp(frags[i], frags[j])) {
                st = kiln_spec_error_at(c, AT(item), "sweep.%s lists the same value twice "
                                                     "(%s)", f->key, frags[i]);
                break;
            }
    }
    if (!st) sw->axes[sw->n_axes++] = (axis){f, v, n};
    /* A swept types.b or types.out no longer follows types.a. */
    if (!st && (!strcmp(f->key, "types.b") || !strcmp(f->key, "types.out")))
        c->seen[f - kiln_knobs] = 1;
done:
    free(scratch);
    free(frags);
    return st;
}

static kiln_status read_constraints(kiln_spec_ctx *c, sweep *sw, const yaml_node_t *n)
{
    sw->max_smem = -1;
    if (!n) return KILN_OK;
    if (n->type != YAML_MAPPING_NODE)
        return kiln_spec_error_at(c, AT(n), "constraints must be a mapping like "
                                            "{max_smem: 200000, require: [\"...\"]}");
    for (const yaml_node_pair_t *p = n->data.mapping.pairs.start; p < n->data.mapping.pairs.top;
         p++) {
        const yaml_node_t *k = kiln_spec_node(c, p->key), *v = kiln_spec_node(c, p->value);
        const char *name = k->type == YAML_SCALAR_NODE ? kiln_spec_scalar(k) : "";
        for (const yaml_node_pair_t *q = n->data.mapping.pairs.start; q < p; q++) {
            const yaml_node_t *k2 = kiln_spec_node(c, q->key);
            if (k2->type == YAML_SCALAR_NODE && !strcmp(kiln_spec_scalar(k2), name))
                return kiln_spec_error_at(c, AT(k), "duplicate key '%.60s' in constraints", name);
        }
        if (!strcmp(name, "max_smem")) {
            const char *s = v->type == YAML_SCALAR_NODE ? kiln_spec_scalar(v) : "";
            char *end;
            long x = strtol(s, &end, 10);
            if (v->type != YAML_SCALAR_NODE || !*s || *end || x < 1 || x > KILN_SPEC_INT_MAX ||
                v->data.scalar.style != YAML_PLAIN_SCALAR_STYLE || !isdigit((unsigned char)*s))
                return kiln_spec_error_at(c, AT(v), "constraints.max_smem must be a positive "
                                                    "number of bytes");
            sw->max_smem = (int)x;
            sw->max_smem_node = v;
        } else if (!strcmp(name, "require")) {
            const yaml_node_t *items[MAX_REQUIRE];
            int count = 0;
            if (v->type == YAML_SEQUENCE_NODE) {
                int total = (int)(v->data.sequence.items.top - v->data.sequence.items.start);
                if (total > MAX_REQUIRE)
                    return kiln_spec_error_at(c, AT(v), "constraints.require has %d "
                                                        "expressions; at most %d", total,
                                              MAX_REQUIRE);
                for (int i = 0; i < total; i++)
                    items[count++] = kiln_spec_node(c, v->data.sequence.items.start[i]);
            } else {
                items[count++] = v;
            }
            for (int i = 0; i < count; i++) {
                const yaml_node_t *x = items[i];
                if (x->type != YAML_SCALAR_NODE || !*kiln_spec_scalar(x))
                    return kiln_spec_error_at(c, AT(x), "constraints.require must be an "
                                                        "expression string or a list of them");
                expr e;
                if (expr_eval(kiln_spec_scalar(x), &c->spec->desc, 0, 1, &e) < 0) {
                    int quoted = x->data.scalar.style == YAML_SINGLE_QUOTED_SCALAR_STYLE ||
                                 x->data.scalar.style == YAML_DOUBLE_QUOTED_SCALAR_STYLE;
                    return kiln_spec_error_at(c, AT(x) + quoted + (int)e.error_at,
                                              "in constraint \"%.80s\": %s", kiln_spec_scalar(x),
                                              e.error);
                }
                sw->require[sw->n_require++] = x;
            }
        } else {
            return kiln_spec_error_at(c, AT(k), "unknown key '%.60s' in constraints; allowed: "
                                                "max_smem, require", name);
        }
    }
    return KILN_OK;
}

/* ------------------------------------------------------------------------ */
/* Expansion                                                                */
/* ------------------------------------------------------------------------ */

/* Checks one point against the constraints; on failure writes the reason. */
static int point_passes(const kiln_spec_ctx *c, const sweep *sw, const kiln_spec *s, int smem,
                        char *reason, size_t size)
{
    const kiln_kernel_desc *d = &s->desc;
    if (sw->max_smem >= 0 && smem > sw->max_smem) {
        snprintf(reason, size, "%s:%d:%d: %s: needs %d bytes of shared memory, more than "
                 "constraints.max_smem %d", c->path, AT(sw->max_smem_node), d->name, smem,
                 sw->max_smem);
        return 0;
    }
    for (int i = 0; i < sw->n_require; i++) {
        expr e;
        const char *text = kiln_spec_scalar(sw->require[i]);
        int r = expr_eval(text, d, smem, 0, &e);
        if (r == 1) continue;
        if (r < 0)
            snprintf(reason, size, "%s:%d:%d: %s: constraint \"%.80s\" cannot be evaluated: %s",
                     c->path, AT(sw->require[i]), d->name, text, e.error);
        else
            snprintf(reason, size, "%s:%d:%d: %s: constraint \"%.80s\" is false", c->path,
                     AT(sw->require[i]), d->name, text);
        return 0;
    }
    return 1;
}

kiln_status kiln_sweep_expand(kiln_spec_ctx *c, kiln_spec_list *out)
{
    const yaml_node_t *n = c->sweep;
    sweep sw;
    memset(&sw, 0, sizeof sw);
    if (n->type != YAML_MAPPING_NODE)
        return kiln_spec_error_at(c, AT(n), "sweep must be a mapping of axes to lists, like "
                                            "{stages: [3, 4], warpgroups: [1, 2]}");
    long points = 1;
    for (const yaml_node_pair_t *p = n->data.mapping.pairs.start; p < n->data.mapping.pairs.top;
         p++) {
        const yaml_node_t *k = kiln_spec_node(c, p->key), *v = kiln_spec_node(c, p->value);
        if (k->type != YAML_SCALAR_NODE)
            return kiln_spec_error_at(c, AT(k), "sweep axes must be plain keys like tile.n");
        for (const yaml_node_pair_t *q = n->data.mapping.pairs.start; q < p; q++) {
            const yaml_node_t *k2 = kiln_spec_node(c, q->key);
            if (k2->type == YAML_SCALAR_NODE && !strcmp(kiln_spec_scalar(k2), kiln_spec_scalar(k)))
                return kiln_spec_error_at(c, AT(k), "duplicate key '%.60s' in sweep",
                                          kiln_spec_scalar(k));
        }
        kiln_status st = read_axis(c, &sw, k, v);
        if (st) return st;
        points *= sw.axes[sw.n_axes - 1].n;
        if (points > MAX_POINTS)
            return kiln_spec_error_at(c, AT(k), "the sweep has more than %d points", MAX_POINTS);
    }
    if (sw.n_axes == 0) return kiln_spec_error_at(c, AT(n), "sweep has no axes");
    kiln_status st = read_constraints(c, &sw, c->constraints);
    if (st) return st;

    /* Axes in schema order, so names do not depend on the order in the file. */
    for (int i = 1; i < sw.n_axes; i++)
        for (int j = i; j > 0 && sw.axes[j].f < sw.axes[j - 1].f; j--) {
            axis t = sw.axes[j];
            sw.axes[j] = sw.axes[j - 1];
            sw.axes[j - 1] = t;
        }

    kiln_spec *base = c->spec, *s = malloc(sizeof *s);
    if (!s) return kiln_error_set(c->err, KILN_ERROR_OUT_OF_MEMORY, "out of memory");
    int idx[MAX_AXES] = {0};
    char first_reason[KILN_ERROR_MAX] = "";
    for (long pt = 0; pt < points && !st; pt++) {
        *s = *base;
        c->spec = s;
        char name[256];
        size_t used = (size_t)snprintf(name, sizeof name, "%s_", base->desc.name);
        for (int a = 0; a < sw.n_axes && !st; a++) {
            const axis *ax = &sw.axes[a];
            const yaml_node_t *item =
                kiln_spec_node(c, ax->list->data.sequence.items.start[idx[a]]);
            kiln_spec_set_pos(s, ax->f->key, AT(item));
            st = kiln_spec_apply(c, ax->f, item);
            char frag[96];
            kiln_knob_fragment(ax->f, &s->desc, frag, sizeof frag);
            if (used < sizeof name) /* else too long: reported below */
                used += (size_t)snprintf(name + used, sizeof name - used, "_%s", frag);
        }
        c->spec = base;
        if (st) break;
        kiln_spec_type_defaults(c, &s->desc);
        if (used > KILN_KERNEL_NAME_MAX) {
            int line, col;
            kiln_spec_find_pos(base, "kernel", &line, &col);
            st = kiln_spec_error_at(c, line, col, "kernel name %s is %zu characters long; at "
                                                  "most %d (templates name the entry point after "
                                                  "it)", name, used, KILN_KERNEL_NAME_MAX);
            break;
        }
        snprintf(s->desc.name, sizeof s->desc.name, "%s", name);

        kiln_error why;
        kiln_error_clear(&why);
        char reason[KILN_ERROR_MAX];
        int smem = 0;
        if (kiln_spec_check(s, c->ex, s->desc.name, &smem, &why) == KILN_OK &&
            point_passes(c, &sw, s, smem, reason, sizeof reason)) {
            st = kiln_spec_list_push(out, s, c->err);
        } else {
            char *r = why.status ? why.msg : reason;
            kiln_spec_one_line(r);
            if (!first_reason[0]) snprintf(first_reason, sizeof first_reason, "%s", r);
            st = kiln_spec_list_drop(out, r, c->err);
        }
        kiln_error_clear(&why);
        for (int a = sw.n_axes - 1; a >= 0; a--) { /* the last axis turns fastest */
            if (++idx[a] < sw.axes[a].n) break;
            idx[a] = 0;
        }
    }
    free(s);
    if (!st && out->count == 0) {
        int line, col;
        kiln_spec_find_pos(base, "sweep", &line, &col);
        st = kiln_spec_error_at(c, line, col, "all %ld points of the sweep were dropped; the "
                                              "first: %s", points, first_reason);
    }
    return st;
}
