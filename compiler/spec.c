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

#include "spec_internal.h"
#include "yaml_limits.h"

/* ------------------------------------------------------------------------ */
/* Schema                                                                   */
/* ------------------------------------------------------------------------ */

static const char *const op_choices[] = {"fprop", "dgrad", "wgrad", NULL};
static const char *const arch_choices[] = {"sm_90a", "sm_80", "sm_100a", NULL};
static const char *const family_choices[] = {"sm90", "simple", NULL};
static const char *const in_choices[] = {"bf16", "fp16", "e4m3", "e5m2", NULL};
static const char *const out_choices[] = {"bf16", "fp16", "f32", NULL};
static const char *const accum_choices[] = {"f32", NULL};
static const char *const weights_choices[] = {"any", "contiguous", NULL};
static const char *const raster_choices[] = {"group", "m", "n", NULL};
static const char *const schedule_choices[] = {"auto", "cooperative", "pingpong", NULL};
static const char *const bias_choices[] = {"none", "per_group", NULL};
static const char *const scale_choices[] = {"none", "per_row", NULL};
static const char *const alpha_choices[] = {"scalar", "per_group", NULL};
static const char *const output_choices[] = {"dense", "discrete", NULL};

/* Order matters twice: it is the order of "allowed:" lists in messages and
 * the order of name fragments of swept axes. */
const kiln_spec_field kiln_spec_fields[] = {
    {"kernel", KILN_VK_NAME, NULL, 0},
    {"op", KILN_VK_CHOICE, op_choices, 0},
    {"arch", KILN_VK_ARCH, arch_choices, 0},
    {"family", KILN_VK_CHOICE, family_choices, 1},
    {"types", KILN_VK_MAP, NULL, 0},
    {"types.a", KILN_VK_CHOICE, in_choices, 1},
    {"types.b", KILN_VK_CHOICE, in_choices, 1},
    {"types.out", KILN_VK_CHOICE, out_choices, 1},
    {"types.accum", KILN_VK_CHOICE, accum_choices, 0},
    {"tile", KILN_VK_MAP, NULL, 1},
    {"tile.m", KILN_VK_INT, NULL, 1},
    {"tile.n", KILN_VK_INT, NULL, 1},
    {"tile.k", KILN_VK_INT, NULL, 1},
    {"stages", KILN_VK_INT, NULL, 1},
    {"cluster", KILN_VK_MAP, NULL, 1},
    {"cluster.m", KILN_VK_INT, NULL, 1},
    {"cluster.n", KILN_VK_INT, NULL, 1},
    {"warpgroups", KILN_VK_INT, NULL, 1},
    {"weights", KILN_VK_CHOICE, weights_choices, 1},
    {"raster", KILN_VK_CHOICE, raster_choices, 1},
    {"schedule", KILN_VK_CHOICE, schedule_choices, 1},
    {"epilogue", KILN_VK_MAP, NULL, 0},
    {"epilogue.bias", KILN_VK_CHOICE, bias_choices, 1},
    {"epilogue.scale", KILN_VK_CHOICE, scale_choices, 1},
    {"epilogue.scale_bias", KILN_VK_BOOL, NULL, 1},
    {"epilogue.alpha", KILN_VK_CHOICE, alpha_choices, 1},
    {"epilogue.beta", KILN_VK_BOOL, NULL, 1},
    {"wgrad", KILN_VK_MAP, NULL, 0},
    {"wgrad.output", KILN_VK_CHOICE, output_choices, 1},
    {"wgrad.accumulate", KILN_VK_BOOL, NULL, 1},
    {"wgrad.dbias", KILN_VK_BOOL, NULL, 1},
    {"wgrad.split", KILN_VK_INT, NULL, 1},
    {"sweep", KILN_VK_SWEEP, NULL, 0},
    {"constraints", KILN_VK_CONSTRAINTS, NULL, 0},
    {NULL, 0, NULL, 0},
};

_Static_assert(sizeof kiln_spec_fields / sizeof kiln_spec_fields[0] <= KILN_SPEC_N_FIELDS,
               "raise KILN_SPEC_N_FIELDS");

const kiln_spec_field *kiln_spec_field_find(const char *key)
{
    for (const kiln_spec_field *f = kiln_spec_fields; f->key; f++)
        if (!strcmp(f->key, key)) return f;
    return NULL;
}

/* The fields directly under prefix ("" for the top level), as "a, b, c". */
static void list_children(const char *prefix, char *buf, size_t size)
{
    size_t plen = strlen(prefix), used = 0;
    buf[0] = '\0';
    for (const kiln_spec_field *f = kiln_spec_fields; f->key; f++) {
        const char *rest = f->key;
        if (plen) {
            if (strncmp(f->key, prefix, plen) || f->key[plen] != '.') continue;
            rest = f->key + plen + 1;
        }
        if (strchr(rest, '.')) continue;
        int n = snprintf(buf + used, size - used, "%s%s", used ? ", " : "", rest);
        if (n < 0 || (size_t)n >= size - used) break;
        used += (size_t)n;
    }
}

static void list_choices(const char *const *choices, char *buf, size_t size)
{
    size_t used = 0;
    buf[0] = '\0';
    for (int i = 0; choices[i]; i++) {
        int n = snprintf(buf + used, size - used, "%s%s", i ? ", " : "", choices[i]);
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
    for (const kiln_spec_field *f = kiln_spec_fields; f->key; f++) {
        const char *rest = f->key;
        if (plen) {
            if (strncmp(f->key, prefix, plen) || f->key[plen] != '.') continue;
            rest = f->key + plen + 1;
        }
        if (strchr(rest, '.')) continue;
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
                              const char *const *choices, const char **out)
{
    char allowed[256];
    list_choices(choices, allowed, sizeof allowed);
    char what[300];
    snprintf(what, sizeof what, "one of %s", allowed);
    kiln_status st = want_scalar(c, key, n, what);
    if (st) return st;
    for (int i = 0; choices[i]; i++)
        if (!strcmp(kiln_spec_scalar(n), choices[i])) {
            *out = choices[i];
            return KILN_OK;
        }
    return kiln_spec_error_at(c, AT(n), "%s must be one of %s (got \"%.60s\")", key, allowed,
                              kiln_spec_scalar(n));
}

static int name_ok(const char *s)
{
    if (!(isalpha((unsigned char)s[0]) || s[0] == '_')) return 0;
    for (const char *p = s; *p; p++)
        if (!(isalnum((unsigned char)*p) || *p == '_')) return 0;
    return 1;
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

/* ------------------------------------------------------------------------ */
/* Setting values                                                           */
/* ------------------------------------------------------------------------ */

static void store_int(kiln_kernel_desc *d, const char *key, int v)
{
    if (!strcmp(key, "tile.m")) d->tile_m = v;
    else if (!strcmp(key, "tile.n")) d->tile_n = v;
    else if (!strcmp(key, "tile.k")) d->tile_k = v;
    else if (!strcmp(key, "stages")) d->stages = v;
    else if (!strcmp(key, "cluster.m")) d->cluster_m = v;
    else if (!strcmp(key, "cluster.n")) d->cluster_n = v;
    else if (!strcmp(key, "warpgroups")) d->warpgroups = v;
    else if (!strcmp(key, "epilogue.scale_bias")) d->epilogue.scale_bias = v;
    else if (!strcmp(key, "epilogue.beta")) d->epilogue.beta = v;
    else if (!strcmp(key, "wgrad.accumulate")) d->accumulate = v;
    else if (!strcmp(key, "wgrad.dbias")) d->dbias = v;
    else if (!strcmp(key, "wgrad.split")) d->split = v;
}

static void store_choice(kiln_kernel_desc *d, const char *key, const char *v)
{
    if (!strcmp(key, "op")) kiln_op_parse(v, &d->op);
    else if (!strcmp(key, "family")) snprintf(d->family, sizeof d->family, "%s", v);
    else if (!strcmp(key, "types.a")) kiln_dtype_parse(v, &d->a_type);
    else if (!strcmp(key, "types.b")) kiln_dtype_parse(v, &d->b_type);
    else if (!strcmp(key, "types.out")) kiln_dtype_parse(v, &d->out_type);
    else if (!strcmp(key, "types.accum")) kiln_dtype_parse(v, &d->accum_type);
    else if (!strcmp(key, "weights"))
        d->weights = !strcmp(v, "contiguous") ? KILN_WEIGHTS_CONTIGUOUS : KILN_WEIGHTS_ANY;
    else if (!strcmp(key, "raster")) snprintf(d->raster, sizeof d->raster, "%s", v);
    else if (!strcmp(key, "schedule")) snprintf(d->schedule, sizeof d->schedule, "%s", v);
    else if (!strcmp(key, "epilogue.bias"))
        d->epilogue.bias = !strcmp(v, "per_group") ? KILN_BIAS_PER_GROUP : KILN_BIAS_NONE;
    else if (!strcmp(key, "epilogue.scale")) d->epilogue.row_scale = !strcmp(v, "per_row");
    else if (!strcmp(key, "epilogue.alpha"))
        d->epilogue.alpha = !strcmp(v, "per_group") ? KILN_ALPHA_PER_GROUP : KILN_ALPHA_SCALAR;
    else if (!strcmp(key, "wgrad.output"))
        d->wgrad_output = !strcmp(v, "discrete") ? KILN_WGRAD_DISCRETE : KILN_WGRAD_DENSE;
}

static kiln_status get_arch(kiln_spec_ctx *c, const yaml_node_t *n)
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
        kiln_status st = get_choice(c, "arch", items[i], arch_choices, &v);
        if (st) return st;
        for (int j = 0; j < d->n_archs; j++)
            if (!strcmp(d->archs[j], v))
                return kiln_spec_error_at(c, AT(items[i]), "arch lists %s twice", v);
        snprintf(d->archs[d->n_archs++], KILN_ARCH_MAX, "%s", v);
    }
    return KILN_OK;
}

static kiln_status apply_map(kiln_spec_ctx *c, const char *prefix, const yaml_node_t *n);

kiln_status kiln_spec_apply(kiln_spec_ctx *c, const kiln_spec_field *f, const yaml_node_t *n)
{
    kiln_kernel_desc *d = &c->spec->desc;
    kiln_status st;
    int iv = 0;
    const char *sv;
    switch (f->kind) {
    case KILN_VK_MAP: return apply_map(c, f->key, n);
    case KILN_VK_INT:
    case KILN_VK_BOOL:
        st = f->kind == KILN_VK_INT ? get_int(c, f->key, n, &iv) : get_bool(c, f->key, n, &iv);
        if (!st) store_int(d, f->key, iv);
        return st;
    case KILN_VK_CHOICE:
        st = get_choice(c, f->key, n, f->choices, &sv);
        if (!st) store_choice(d, f->key, sv);
        return st;
    case KILN_VK_ARCH: return get_arch(c, n);
    case KILN_VK_NAME:
        st = want_scalar(c, "kernel", n, "a name");
        if (st) return st;
        sv = kiln_spec_scalar(n);
        if (!name_ok(sv))
            return kiln_spec_error_at(c, AT(n), "kernel name \"%.60s\" must match "
                                                "[A-Za-z_][A-Za-z0-9_]*", sv);
        if (strlen(sv) > KILN_SPEC_NAME_MAX)
            return kiln_spec_error_at(c, AT(n), "kernel name is %zu characters long; at most %d",
                                      strlen(sv), KILN_SPEC_NAME_MAX);
        snprintf(d->name, sizeof d->name, "%s", sv);
        return KILN_OK;
    case KILN_VK_SWEEP: c->sweep = n; return KILN_OK;
    case KILN_VK_CONSTRAINTS: c->constraints = n; return KILN_OK;
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
        const kiln_spec_field *f = strchr(name, '.') ? NULL : kiln_spec_field_find(full);
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
        c->seen[f - kiln_spec_fields] = 1;
        kiln_status st = kiln_spec_apply(c, f, v);
        if (st) return st;
    }
    return KILN_OK;
}

/* ------------------------------------------------------------------------ */
/* Validation                                                               */
/* ------------------------------------------------------------------------ */

static int is_fp8(kiln_dtype t) { return t == KILN_DTYPE_E4M3 || t == KILN_DTYPE_E5M2; }
static int is_16(kiln_dtype t) { return t == KILN_DTYPE_BF16 || t == KILN_DTYPE_F16; }
static int in_list(int v, const int *list, int n)
{
    for (int i = 0; i < n; i++)
        if (list[i] == v) return 1;
    return 0;
}

int kiln_arch_smem_limit(const char *arch)
{
    if (!arch) return 0;
    if (!strcmp(arch, "sm_90a") || !strcmp(arch, "sm_100a")) return 232448;
    if (!strcmp(arch, "sm_80")) return 166912;
    return 0;
}

/* Mirrors the budget of templates/sm90.lua, which refuses the same limit:
 * the ring of A and B stages, per-warp fp32 epilogue staging (4 warps x 16x40
 * floats per consumer warp group), the group schedule (2*(1024+1)+64 ints),
 * two barriers per stage, and 1024 bytes to align the ring to the 128-byte
 * swizzle atom.  The simple family keeps fp32 copies of its tiles. */
int kiln_spec_smem_bytes(const kiln_kernel_desc *d)
{
    long long tm = d->tile_m, tn = d->tile_n, tk = d->tile_k, st = d->stages, bytes;
    if (!strcmp(d->family, "simple")) {
        bytes = st * (tm * tk + tn * tk) * 4 + 1024;
    } else {
        long long ring = st * (tm * tk * kiln_dtype_size(d->a_type) +
                               tn * tk * kiln_dtype_size(d->b_type));
        long long staging = (long long)d->warpgroups * 4 * 16 * 40 * 4;
        long long sched = (2 * (1024 + 1) + 64) * 4;
        bytes = 1024 + ((ring + staging + sched + 7) & ~7LL) + 2 * st * 8;
    }
    return bytes > INT_MAX || bytes < 0 ? INT_MAX : (int)bytes;
}

#define FAIL(k, ...)                                                                           \
    do {                                                                                       \
        if (key) *key = (k);                                                                   \
        return kiln_error_set(err, KILN_ERROR_INVALID_SPEC, __VA_ARGS__);                      \
    } while (0)

static kiln_status validate_types(const kiln_kernel_desc *d, const char *arch, int sm90,
                                  kiln_error *err, const char **key)
{
    const char *a = kiln_dtype_name(d->a_type), *b = kiln_dtype_name(d->b_type);
    if (d->accum_type != KILN_DTYPE_F32)
        FAIL("types.accum", "types.accum must be f32 (got %s)", kiln_dtype_name(d->accum_type));
    if (!is_16(d->a_type) && !is_fp8(d->a_type))
        FAIL("types.a", "types.a must be one of bf16, fp16, e4m3, e5m2 (got %s)", a);
    if (!is_16(d->b_type) && !is_fp8(d->b_type))
        FAIL("types.b", "types.b must be one of bf16, fp16, e4m3, e5m2 (got %s)", b);
    if (d->out_type != KILN_DTYPE_BF16 && d->out_type != KILN_DTYPE_F16 &&
        d->out_type != KILN_DTYPE_F32)
        FAIL("types.out", "types.out must be one of bf16, fp16, f32 (got %s)",
             kiln_dtype_name(d->out_type));
    if (is_fp8(d->a_type) != is_fp8(d->b_type))
        FAIL("types.b", "types.a and types.b must both be 16-bit or both be 8-bit (got %s and %s)",
             a, b);
    if (is_16(d->a_type) && d->a_type != d->b_type)
        FAIL("types.b", "types.a and types.b must be the same 16-bit type (got %s and %s)", a, b);
    if (is_fp8(d->a_type)) {
        if (!strcmp(arch, "sm_80"))
            FAIL("types.a", "fp8 needs sm_90a or newer (%s x %s on %s)", a, b, arch);
        if (d->op != KILN_OP_FPROP)
            FAIL("op", "fp8 %s needs a transposed operand, which wgmma does not support for "
                       "8-bit types (fp8 is fprop only)", kiln_op_name(d->op));
        if (!sm90) FAIL("family", "fp8 needs family sm90 (the %s family has no 8-bit path)",
                        d->family);
    }
    return KILN_OK;
}

static kiln_status validate_tile(const kiln_kernel_desc *d, int sm90, kiln_error *err,
                                 const char **key)
{
    if (sm90) {
        int esize = kiln_dtype_size(d->a_type);
        if (d->tile_m < 64 || d->tile_m > 256 || d->tile_m % 64)
            FAIL("tile.m", "tile.m must be a multiple of 64 from 64 to 256 for family sm90 "
                           "(wgmma works on 64 rows per warp group; got %d)", d->tile_m);
        /* Pingpong gives each warp group a whole tile of its own; the other
         * schedules split a tile's rows among the warp groups. */
        int pingpong = !strcmp(d->schedule, "pingpong");
        int rows_per_wg = pingpong ? d->tile_m : d->tile_m / d->warpgroups;
        if (pingpong && d->warpgroups != 2)
            FAIL("schedule", "schedule pingpong needs warpgroups: 2 (got %d)", d->warpgroups);
        if (!pingpong && (d->tile_m / 64) % d->warpgroups)
            FAIL("warpgroups", "tile.m %d cannot be split across %d warp groups (each needs a "
                               "multiple of 64 rows)", d->tile_m, d->warpgroups);
        /* wgmma takes any multiple of 8, but the sm90 templates' epilogue
         * and dgrad/wgrad loads work in 64-column (128-byte) chunks. */
        if (d->tile_n < 64 || d->tile_n > 256 || d->tile_n % 64)
            FAIL("tile.n", "tile.n must be 64, 128, 192 or 256 for family sm90 (its epilogue "
                           "and loads work in 64-column chunks; got %d)", d->tile_n);
        if (d->tile_k * esize != 128)
            FAIL("tile.k", "tile.k must be %d for %s with family sm90: one 128-byte swizzled row "
                           "(got %d)", 128 / esize, kiln_dtype_name(d->a_type), d->tile_k);
        int regs = rows_per_wg * d->tile_n / 128;
        if (regs > 128)
            FAIL("tile", "tile %dx%d with %d warp group%s needs %d fp32 accumulator registers "
                         "per thread; at most 128 (use more warp groups or a smaller tile)",
                 d->tile_m, d->tile_n, d->warpgroups, d->warpgroups > 1 ? "s" : "", regs);
    } else {
        static const int mn[] = {32, 64, 128}, ks[] = {8, 16, 32};
        if (!in_list(d->tile_m, mn, 3))
            FAIL("tile.m", "tile.m must be 32, 64 or 128 for family simple (got %d)", d->tile_m);
        if (!in_list(d->tile_n, mn, 3))
            FAIL("tile.n", "tile.n must be 32, 64 or 128 for family simple (got %d)", d->tile_n);
        if (!in_list(d->tile_k, ks, 3))
            FAIL("tile.k", "tile.k must be 8, 16 or 32 for family simple (got %d)", d->tile_k);
    }
    int lo = sm90 ? 2 : 1;
    if (d->stages < lo || d->stages > 8)
        FAIL("stages", "stages must be from %d to 8 for family %s (got %d)", lo, d->family,
             d->stages);
    return KILN_OK;
}

static kiln_status validate_op_blocks(const kiln_kernel_desc *d, kiln_error *err, const char **key)
{
    const kiln_epilogue_desc *e = &d->epilogue;
    if (e->bias != KILN_BIAS_NONE && e->bias != KILN_BIAS_PER_GROUP)
        FAIL("epilogue.bias", "epilogue.bias must be none or per_group");
    if (e->alpha != KILN_ALPHA_SCALAR && e->alpha != KILN_ALPHA_PER_GROUP)
        FAIL("epilogue.alpha", "epilogue.alpha must be scalar or per_group");
    if (d->weights != KILN_WEIGHTS_ANY && d->weights != KILN_WEIGHTS_CONTIGUOUS)
        FAIL("weights", "weights must be any or contiguous");
    if (d->wgrad_output != KILN_WGRAD_DENSE && d->wgrad_output != KILN_WGRAD_DISCRETE)
        FAIL("wgrad.output", "wgrad.output must be dense or discrete");
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
        if (d->split < 1 || d->split > 16)
            FAIL("wgrad.split", "wgrad.split must be from 1 to 16 (got %d)", d->split);
        if (d->split > 1 && d->out_type != KILN_DTYPE_F32)
            FAIL("wgrad.split", "wgrad.split > 1 adds partial sums atomically and needs "
                                "types.out: f32 (got %s)", kiln_dtype_name(d->out_type));
    } else {
        if (d->wgrad_output != KILN_WGRAD_DENSE || d->accumulate || d->dbias || d->split != 1)
            FAIL("wgrad", "wgrad options apply to op wgrad only (this kernel is %s)",
                 kiln_op_name(d->op));
        if (e->scale_bias && !e->row_scale)
            FAIL("epilogue.scale_bias", "epilogue.scale_bias needs epilogue.scale: per_row");
        if (e->scale_bias && e->bias == KILN_BIAS_NONE)
            FAIL("epilogue.scale_bias", "epilogue.scale_bias needs epilogue.bias: per_group");
        if (!strcmp(d->family, "sm90") && d->weights != KILN_WEIGHTS_CONTIGUOUS)
            FAIL("weights", "family sm90 reads the weights through one tensor map: %s needs "
                            "weights: contiguous (pointer-array weights are served by family "
                            "simple)", kiln_op_name(d->op));
    }
    return KILN_OK;
}

kiln_status kiln_spec_validate(const kiln_kernel_desc *d, const char *arch, kiln_error *err,
                               const char **key)
{
    if (key) *key = NULL;
    if (!d->name[0]) FAIL("kernel", "kernel name is empty");
    if (!name_ok(d->name))
        FAIL("kernel", "kernel name \"%s\" must match [A-Za-z_][A-Za-z0-9_]*", d->name);
    if ((unsigned)d->op > KILN_OP_WGRAD) FAIL("op", "op must be one of fprop, dgrad, wgrad");
    if (!arch || !kiln_arch_smem_limit(arch))
        FAIL("arch", "arch must be one of sm_90a, sm_80, sm_100a (got %s)", arch ? arch : "none");
    int sm90 = !strcmp(d->family, "sm90");
    if (!sm90 && strcmp(d->family, "simple"))
        FAIL("family", "family must be one of sm90, simple (got %s)", d->family);
    kiln_status st = validate_types(d, arch, sm90, err, key);
    if (st) return st;
    if (sm90 && strcmp(arch, "sm_90a"))
        FAIL("family", "family sm90 (TMA + wgmma) needs sm_90a, not %s; use family: simple",
             arch);
    if (d->warpgroups != 1 && d->warpgroups != 2)
        FAIL("warpgroups", "warpgroups must be 1 or 2 (got %d)", d->warpgroups);
    if ((st = validate_tile(d, sm90, err, key))) return st;
    if (d->cluster_m < 1 || d->cluster_m > 2)
        FAIL("cluster.m", "cluster.m must be 1 or 2 (got %d)", d->cluster_m);
    if (d->cluster_n < 1 || d->cluster_n > 2)
        FAIL("cluster.n", "cluster.n must be 1 or 2 (got %d)", d->cluster_n);
    if (d->cluster_m * d->cluster_n > 2)
        FAIL("cluster", "cluster %dx%d has %d CTAs; at most 2 for now", d->cluster_m,
             d->cluster_n, d->cluster_m * d->cluster_n);
    if (!sm90 && d->cluster_m * d->cluster_n != 1)
        FAIL("cluster", "cluster %dx%d needs family sm90 (the simple family has no clusters)",
             d->cluster_m, d->cluster_n);
    if (strcmp(d->raster, "group") && strcmp(d->raster, "m") && strcmp(d->raster, "n"))
        FAIL("raster", "raster must be one of group, m, n (got %s)", d->raster);
    if ((st = validate_op_blocks(d, err, key))) return st;
    int need = kiln_spec_smem_bytes(d), limit = kiln_arch_smem_limit(arch);
    if (need > limit)
        FAIL("stages", "%d stages of tile %dx%dx%d need %d bytes of shared memory, %s allows %d",
             d->stages, d->tile_m, d->tile_n, d->tile_k, need, arch, limit);
    return KILN_OK;
}

#undef FAIL

/* Validates for every arch of the spec; on failure err holds the positioned
 * message.  prefix (may be NULL) goes before the message (a sweep point's
 * name). */
kiln_status kiln_spec_check(const kiln_spec *spec, const char *prefix, kiln_error *err)
{
    for (int i = 0; i < spec->desc.n_archs; i++) {
        const char *key = NULL;
        kiln_status st = kiln_spec_validate(&spec->desc, spec->desc.archs[i], err, &key);
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
    if (!c->seen[kiln_spec_field_find("types.b") - kiln_spec_fields]) d->b_type = d->a_type;
    if (!c->seen[kiln_spec_field_find("types.out") - kiln_spec_fields])
        d->out_type = is_16(d->a_type) ? d->a_type : KILN_DTYPE_BF16;
    /* Family sm90 reads fprop/dgrad weights through one tensor map, so its
     * default is contiguous weights; `weights: any` there is an error. */
    if (!c->seen[kiln_spec_field_find("weights") - kiln_spec_fields])
        d->weights = !strcmp(d->family, "sm90") && d->op != KILN_OP_WGRAD ? KILN_WEIGHTS_CONTIGUOUS
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
        const kiln_spec_field *f = kiln_spec_field_find(required[i]);
        if (c->seen[f - kiln_spec_fields]) continue;
        int line = (int)root->start_mark.line + 1, col = (int)root->start_mark.column + 1;
        if (i == 3) kiln_spec_find_pos(c->spec, "types", &line, &col);
        return kiln_spec_error_at(c, line, col, "missing required key '%s' (%s)", required[i],
                                  hint[i]);
    }
    kiln_spec_type_defaults(c, d);
    static const char *const blocks[] = {"epilogue", "weights", "wgrad"};
    for (int i = 0; i < 3; i++) {
        if (!c->seen[kiln_spec_field_find(blocks[i]) - kiln_spec_fields]) continue;
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
    } else if ((st = kiln_spec_check(base, NULL, err)) == KILN_OK) {
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
    st = kiln_spec_parse(text, len, path, out, err);
    free(text);
    return st;
}
