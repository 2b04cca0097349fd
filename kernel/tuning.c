/* SPDX-License-Identifier: Apache-2.0 */
/* tuning.c — shape classes, tuning keys, and the text tuning table. */
#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "knobs.h"
#include "tuning.h"

/* ---- shape classes ------------------------------------------------------ */

static const int64_t t_bounds[KILN_SHAPE_T_BUCKETS - 1] = {16, 64, 256, 1024};
static const int64_t g_bounds[KILN_SHAPE_G_BUCKETS - 1] = {8, 32, 128};
static const int64_t nk_bounds[KILN_SHAPE_NK_BUCKETS - 1] = {1024, 2048, 4096, 8192};

static int bucket(int64_t v, const int64_t *bounds, int n_bounds)
{
    for (int i = 0; i < n_bounds; i++)
        if (v <= bounds[i]) return i;
    return n_bounds;
}

void kiln_shape_class_of(int64_t groups, int64_t capacity, int64_t n, int64_t k,
                         kiln_shape_class *out)
{
    if (groups < 1) groups = 1;
    if (capacity < 0) capacity = 0;
    int64_t tpg = (capacity + groups - 1) / groups;
    out->t = bucket(tpg, t_bounds, KILN_SHAPE_T_BUCKETS - 1);
    out->g = bucket(groups, g_bounds, KILN_SHAPE_G_BUCKETS - 1);
    out->n = bucket(n, nk_bounds, KILN_SHAPE_NK_BUCKETS - 1);
    out->k = bucket(k, nk_bounds, KILN_SHAPE_NK_BUCKETS - 1);
}

int64_t kiln_shape_class_bound(char axis, int i)
{
    switch (axis) {
    case 't': return i >= 0 && i < KILN_SHAPE_T_BUCKETS - 1 ? t_bounds[i] : -1;
    case 'g': return i >= 0 && i < KILN_SHAPE_G_BUCKETS - 1 ? g_bounds[i] : -1;
    case 'n':
    case 'k': return i >= 0 && i < KILN_SHAPE_NK_BUCKETS - 1 ? nk_bounds[i] : -1;
    }
    return -1;
}

int64_t kiln_shape_class_rep(char axis, int i)
{
    int n = axis == 't' ? KILN_SHAPE_T_BUCKETS : axis == 'g' ? KILN_SHAPE_G_BUCKETS
                                                            : KILN_SHAPE_NK_BUCKETS;
    if (i < 0 || i >= n) return -1;
    int64_t b = kiln_shape_class_bound(axis, i);
    return b > 0 ? b : 2 * kiln_shape_class_bound(axis, n - 2);
}

/* |log2(v / rep)|, v clamped to >= 1. */
static double log2_gap(int64_t v, int64_t rep)
{
    return fabs(log2((double)(v > 0 ? v : 1) / (double)rep));
}

double kiln_shape_class_distance(const kiln_shape_class *c, int64_t groups, int64_t capacity,
                                 int64_t n, int64_t k)
{
    if (groups < 1) groups = 1;
    if (capacity < 0) capacity = 0;
    int64_t tpg = (capacity + groups - 1) / groups;
    return 1.0 * log2_gap(tpg, kiln_shape_class_rep('t', c->t)) +
           0.5 * log2_gap(n, kiln_shape_class_rep('n', c->n)) +
           0.5 * log2_gap(k, kiln_shape_class_rep('k', c->k)) +
           0.25 * log2_gap(groups, kiln_shape_class_rep('g', c->g));
}

static int put_part(char *out, size_t size, size_t used, char axis, int i, int last)
{
    int64_t b = kiln_shape_class_bound(axis, i);
    int n = b < 0 ? snprintf(out + used, size > used ? size - used : 0, "%cmax%s", axis,
                             last ? "" : ".")
                  : snprintf(out + used, size > used ? size - used : 0, "%c%lld%s", axis,
                             (long long)b, last ? "" : ".");
    return n < 0 ? 0 : n;
}

void kiln_shape_class_name(const kiln_shape_class *c, char *out, size_t size)
{
    if (!size) return;
    out[0] = '\0';
    size_t used = 0;
    used += (size_t)put_part(out, size, used, 't', c->t, 0);
    used += (size_t)put_part(out, size, used, 'g', c->g, 0);
    used += (size_t)put_part(out, size, used, 'n', c->n, 0);
    put_part(out, size, used, 'k', c->k, 1);
}

/* Reads "<axis><bound>" or "<axis>max" into a bucket index. */
static int parse_part(const char **p, char axis, int n_buckets, int *out)
{
    const char *s = *p;
    if (*s != axis) return 0;
    s++;
    const char *end = s;
    while (*end && *end != '.') end++;
    size_t len = (size_t)(end - s);
    if (len == 3 && !strncmp(s, "max", 3)) {
        *out = n_buckets - 1;
    } else {
        if (len == 0 || len > 12) return 0;
        int64_t v = 0;
        for (const char *q = s; q < end; q++) {
            if (!isdigit((unsigned char)*q)) return 0;
            v = v * 10 + (*q - '0');
        }
        int found = -1;
        for (int i = 0; i < n_buckets - 1; i++)
            if (kiln_shape_class_bound(axis, i) == v) found = i;
        if (found < 0) return 0;
        *out = found;
    }
    *p = end;
    return 1;
}

int kiln_shape_class_parse(const char *s, kiln_shape_class *out)
{
    kiln_shape_class c;
    const char *p = s;
    if (!parse_part(&p, 't', KILN_SHAPE_T_BUCKETS, &c.t) || *p++ != '.') return 0;
    if (!parse_part(&p, 'g', KILN_SHAPE_G_BUCKETS, &c.g) || *p++ != '.') return 0;
    if (!parse_part(&p, 'n', KILN_SHAPE_NK_BUCKETS, &c.n) || *p++ != '.') return 0;
    if (!parse_part(&p, 'k', KILN_SHAPE_NK_BUCKETS, &c.k) || *p) return 0;
    *out = c;
    return 1;
}

/* ---- keys --------------------------------------------------------------- */

/* The signature's terms are the text keys of the knobs marked for it in
 * the knob table, in table order: a term is on when the call needs a value
 * other than kiln_desc_init's. */
static int sig_of_op(kiln_op op) { return op == KILN_OP_WGRAD ? KILN_KNOB_SIG_WGRAD : KILN_KNOB_SIG_FWD; }

/* What a call asks of a kernel, as a description (knobs the call does not
 * decide keep kiln_desc_init's values). */
static void needs_of(const kiln_problem *p, kiln_kernel_desc *d)
{
    kiln_desc_init(d);
    d->op = p->op;
    if (p->op == KILN_OP_WGRAD) {
        d->wgrad_output = p->wgrad_output;
        d->accumulate = p->accumulate != 0;
        /* A call with a bias gradient needs a kernel that computes it: its
         * own signature term, so a table entry for plain wgrad (whose
         * kernel may lack dbias) never stands for it, and a tuned dbias
         * twin can. */
        d->dbias = p->d_dbias != NULL || p->d_dbias_ptrs != NULL;
        return;
    }
    const kiln_epilogue *e = &p->epilogue;
    d->fp8_recipe = p->fp8.recipe;
    d->fp8_promote = p->fp8.promote != 0 || p->fp8.recipe == KILN_FP8_BLOCK;
    if (p->d_b_ptrs) d->weights = KILN_WEIGHTS_ANY;
    if (e->d_bias) d->epilogue.bias = KILN_BIAS_PER_GROUP;
    d->epilogue.row_scale = e->d_row_scale != NULL;
    d->epilogue.scale_bias = e->d_bias && e->d_row_scale && e->scale_bias;
    if (e->d_alpha) d->epilogue.alpha = KILN_ALPHA_PER_GROUP;
    d->epilogue.beta = e->beta != 0.0f;
}

/* A knob with more than one value besides kiln_desc_init's (fp8.recipe:
 * tensor, row, block) names the value in its term ("fp8_recipe=row"): the
 * recipes need different kernels and are timed apart, so one term for all
 * of them would give a row-wise and a per-tensor call one table entry. */
static int term_names_value(const kiln_knob *k)
{
    int n = 0;
    if (k->kind == KILN_KNOB_ENUM && k->choices)
        while (k->choices[n].name) n++;
    return n > 2;
}

/* The spelling of value v of an ENUM knob, or NULL. */
static const char *choice_name(const kiln_knob *k, int v)
{
    for (int i = 0; k->choices && k->choices[i].name; i++)
        if (k->choices[i].value == v) return k->choices[i].name;
    return NULL;
}

/* Joins the terms of the knobs with on[i] set (i: index into kiln_knobs;
 * on[i] - 1 is the value a term that names its value names). */
static void sig_join(const int *on, char *out, size_t size)
{
    size_t used = 0;
    out[0] = '\0';
    for (const kiln_knob *k = kiln_knobs; k->key; k++) {
        if (!on[k - kiln_knobs]) continue;
        const char *v = term_names_value(k) ? choice_name(k, on[k - kiln_knobs] - 1) : NULL;
        int w = snprintf(out + used, size > used ? size - used : 0, "%s%s%s%s", used ? "+" : "",
                         k->text, v ? "=" : "", v ? v : "");
        if (w > 0) used += (size_t)w;
    }
    if (!used) snprintf(out, size, "plain");
}

void kiln_tuning_sig_from_problem(const kiln_problem *p, char *out, size_t size)
{
    if (!size) return;
    kiln_kernel_desc need, dflt;
    needs_of(p, &need);
    kiln_desc_init(&dflt);
    int on[KILN_KNOB_COUNT_MAX] = {0};
    for (const kiln_knob *k = kiln_knobs; k->key; k++)
        if (k->sig == sig_of_op(p->op) && kiln_knob_get(k, &need) != kiln_knob_get(k, &dflt))
            on[k - kiln_knobs] = kiln_knob_get(k, &need) + 1;
    sig_join(on, out, size);
}

void kiln_tuning_key_from_problem(const kiln_problem *p, const char *arch, kiln_tuning_key *key)
{
    memset(key, 0, sizeof *key);
    snprintf(key->arch, sizeof key->arch, "%s", arch ? arch : "");
    key->op = p->op;
    key->a_type = p->a_type;
    key->b_type = p->b_type;
    key->out_type = p->out_type;
    kiln_tuning_sig_from_problem(p, key->epilogue, sizeof key->epilogue);
    kiln_shape_class_of(p->groups, p->capacity, p->n, p->k, &key->shape);
}

#define WHY(...) (snprintf(why, why_size, __VA_ARGS__), 0)

/* The terms a signature of op may hold, for messages: "weights+bias+...",
 * a term that names its value as "fp8_recipe=tensor|row|block". */
static void known_terms(int sig, char *out, size_t size)
{
    kiln_kernel_desc dflt;
    kiln_desc_init(&dflt);
    size_t used = 0;
    out[0] = '\0';
    for (const kiln_knob *k = kiln_knobs; k->key; k++) {
        if (k->sig != sig) continue;
        int w = snprintf(out + used, size > used ? size - used : 0, "%s%s", used ? "+" : "", k->text);
        if (w > 0) used += (size_t)w;
        if (!term_names_value(k)) continue;
        for (int i = 0, n = 0; k->choices[i].name; i++) {
            if (k->choices[i].value == kiln_knob_get(k, &dflt)) continue;
            w = snprintf(out + used, size > used ? size - used : 0, "%s%s", n++ ? "|" : "=",
                         k->choices[i].name);
            if (w > 0) used += (size_t)w;
        }
    }
}

/* The knob of signature term p[0, len) for signature kind sig, and in *value
 * the value it names (+1; 1 for a term that names none); NULL when the term
 * is not one: an unknown name, a value missing, not a choice or the
 * default, or given to a term that takes none. */
static const kiln_knob *parse_term(const char *p, size_t len, int sig, int *value)
{
    const char *eq = memchr(p, '=', len);
    size_t name_len = eq ? (size_t)(eq - p) : len;
    kiln_kernel_desc dflt;
    kiln_desc_init(&dflt);
    for (const kiln_knob *k = kiln_knobs; k->key; k++) {
        if (k->sig != sig || strlen(k->text) != name_len || strncmp(p, k->text, name_len)) continue;
        if (!term_names_value(k)) {
            *value = 1;
            return eq ? NULL : k;
        }
        if (!eq) return NULL;
        size_t vlen = len - name_len - 1;
        for (int i = 0; k->choices[i].name; i++)
            if (strlen(k->choices[i].name) == vlen && !strncmp(eq + 1, k->choices[i].name, vlen) &&
                k->choices[i].value != kiln_knob_get(k, &dflt)) {
                *value = k->choices[i].value + 1;
                return k;
            }
        return NULL;
    }
    return NULL;
}

int kiln_tuning_sig_valid(const char *sig, kiln_op op, char *why, size_t why_size)
{
    if (!strcmp(sig, "plain")) return 1;
    int on[KILN_KNOB_COUNT_MAX] = {0};
    long last = -1;
    const char *p = sig;
    while (1) {
        const char *end = strchr(p, '+');
        size_t len = end ? (size_t)(end - p) : strlen(p);
        int value = 0;
        const kiln_knob *k = parse_term(p, len, sig_of_op(op), &value);
        if (!k) {
            char list[256];
            known_terms(sig_of_op(op), list, sizeof list);
            return WHY("epilogue signature '%s': unknown term '%.*s' for %s (known: plain or "
                       "%s)", sig, (int)(len > 40 ? 40 : len), p, kiln_op_name(op), list);
        }
        long found = k - kiln_knobs;
        if (found <= last)
            return WHY("epilogue signature '%s' is not canonical (terms once each, in the "
                       "order of docs/tuning.md)", sig);
        on[found] = value;
        last = found;
        if (!end) break;
        p = end + 1;
    }
    const kiln_knob *sb = kiln_knob_find("epilogue.scale_bias");
    if (op != KILN_OP_WGRAD && on[sb - kiln_knobs] &&
        !(on[kiln_knob_find("epilogue.bias") - kiln_knobs] &&
          on[kiln_knob_find("epilogue.scale") - kiln_knobs]))
        return WHY("epilogue signature '%s': scale_bias needs bias and row_scale", sig);
    return 1;
}

int kiln_tuning_key_compare(const kiln_tuning_key *a, const kiln_tuning_key *b)
{
    int c = strcmp(a->arch, b->arch);
    if (c) return c;
    if (a->op != b->op) return a->op < b->op ? -1 : 1;
    if (a->a_type != b->a_type) return a->a_type < b->a_type ? -1 : 1;
    if (a->b_type != b->b_type) return a->b_type < b->b_type ? -1 : 1;
    if (a->out_type != b->out_type) return a->out_type < b->out_type ? -1 : 1;
    if ((c = strcmp(a->epilogue, b->epilogue))) return c;
    const int x[4] = {a->shape.t, a->shape.g, a->shape.n, a->shape.k};
    const int y[4] = {b->shape.t, b->shape.g, b->shape.n, b->shape.k};
    for (int i = 0; i < 4; i++)
        if (x[i] != y[i]) return x[i] < y[i] ? -1 : 1;
    return 0;
}

void kiln_tuning_key_format(const kiln_tuning_key *k, kiln_strbuf *out)
{
    char cls[48];
    kiln_shape_class_name(&k->shape, cls, sizeof cls);
    kiln_strbuf_printf(out, "%s %s %s %s %s %s %s", k->arch, kiln_op_name(k->op),
                       kiln_dtype_name(k->a_type), kiln_dtype_name(k->b_type),
                       kiln_dtype_name(k->out_type), k->epilogue, cls);
}

/* ---- tables ------------------------------------------------------------- */

struct kiln_tuning_table {
    kiln_tuning_entry *items;    /* sorted by key */
    size_t n, cap;
    char timer[64];              /* from its "# written by kiln tune" line, or "" */
};

kiln_status kiln_tuning_table_create(kiln_tuning_table **out, kiln_error *err)
{
    *out = calloc(1, sizeof **out);
    if (!*out) return kiln_error_set(err, KILN_ERROR_OUT_OF_MEMORY, "tuning table: out of memory");
    return KILN_OK;
}

void kiln_tuning_table_destroy(kiln_tuning_table *t)
{
    if (!t) return;
    for (size_t i = 0; i < t->n; i++) free(t->items[i].desc);
    free(t->items);
    free(t);
}

size_t kiln_tuning_table_count(const kiln_tuning_table *t) { return t ? t->n : 0; }

const kiln_tuning_entry *kiln_tuning_table_at(const kiln_tuning_table *t, size_t i)
{
    return t && i < t->n ? &t->items[i] : NULL;
}

/* Index of key, or -(insertion point) - 1. */
static long find(const kiln_tuning_table *t, const kiln_tuning_key *key)
{
    size_t lo = 0, hi = t->n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        int c = kiln_tuning_key_compare(&t->items[mid].key, key);
        if (c == 0) return (long)mid;
        if (c < 0) lo = mid + 1;
        else hi = mid;
    }
    return -(long)lo - 1;
}

static int arch_valid(const char *a)
{
    if (strncmp(a, "sm_", 3) || !isdigit((unsigned char)a[3])) return 0;
    const char *p = a + 3;
    while (isdigit((unsigned char)*p)) p++;
    if (*p == 'a' || *p == 'f') p++;
    return *p == '\0' && strlen(a) < KILN_ARCH_MAX;
}

static int hex64(const char *s)
{
    if (strlen(s) != 64) return 0;
    for (const char *p = s; *p; p++)
        if (!isdigit((unsigned char)*p) && !(*p >= 'a' && *p <= 'f')) return 0;
    return 1;
}

/* Checks e and fills kdesc/launch; message without a location. */
static kiln_status check_entry(const kiln_tuning_entry *e, kiln_kernel_desc *d, kiln_launch_desc *l,
                               kiln_error *err)
{
    char why[256];
    const kiln_tuning_key *k = &e->key;
    if (!arch_valid(k->arch))
        return kiln_error_set(err, KILN_ERROR_INVALID_ARGUMENT,
                              "bad arch '%s' (expected sm_<digits>, like sm_90a)", k->arch);
    if ((unsigned)k->op > KILN_OP_WGRAD)
        return kiln_error_set(err, KILN_ERROR_INVALID_ARGUMENT, "bad op %d", (int)k->op);
    if (!kiln_tuning_sig_valid(k->epilogue, k->op, why, sizeof why))
        return kiln_error_set(err, KILN_ERROR_INVALID_ARGUMENT, "%s", why);
    if (k->shape.t < 0 || k->shape.t >= KILN_SHAPE_T_BUCKETS || k->shape.g < 0 ||
        k->shape.g >= KILN_SHAPE_G_BUCKETS || k->shape.n < 0 ||
        k->shape.n >= KILN_SHAPE_NK_BUCKETS || k->shape.k < 0 || k->shape.k >= KILN_SHAPE_NK_BUCKETS)
        return kiln_error_set(err, KILN_ERROR_INVALID_ARGUMENT, "bad shape class");
    if (!e->kernel[0])
        return kiln_error_set(err, KILN_ERROR_INVALID_ARGUMENT, "empty kernel name");
    if (!hex64(e->bundle_id))
        return kiln_error_set(err, KILN_ERROR_INVALID_ARGUMENT,
                              "bundle id '%.70s' is not 64 lowercase hex digits", e->bundle_id);
    if (!hex64(e->cache_key))
        return kiln_error_set(err, KILN_ERROR_INVALID_ARGUMENT,
                              "cache key '%.70s' is not 64 lowercase hex digits", e->cache_key);
    if (!(e->median_ms > 0) || !isfinite(e->median_ms))
        return kiln_error_set(err, KILN_ERROR_INVALID_ARGUMENT, "time %g ms is not positive",
                              e->median_ms);
    if (e->runnerup[0] && (!(e->runnerup_ms > 0) || !isfinite(e->runnerup_ms)))
        return kiln_error_set(err, KILN_ERROR_INVALID_ARGUMENT,
                              "runner-up time %g ms is not positive", e->runnerup_ms);
    if (!e->desc || !e->desc[0])
        return kiln_error_set(err, KILN_ERROR_INVALID_ARGUMENT, "missing kernel description");
    kiln_error perr;
    kiln_error_clear(&perr);
    if (!kiln_desc_parse(e->desc, d, l, &perr))
        return kiln_error_set(err, KILN_ERROR_INVALID_ARGUMENT, "%s", perr.msg);
    if (strcmp(d->name, e->kernel))
        return kiln_error_set(err, KILN_ERROR_INVALID_ARGUMENT,
                              "kernel %s has the description of %s", e->kernel, d->name);
    if (d->op != k->op || d->a_type != k->a_type || d->b_type != k->b_type ||
        d->out_type != k->out_type)
        return kiln_error_set(err, KILN_ERROR_INVALID_ARGUMENT,
                              "kernel %s is %s %s/%s->%s, but the key says %s %s/%s->%s",
                              e->kernel, kiln_op_name(d->op), kiln_dtype_name(d->a_type),
                              kiln_dtype_name(d->b_type), kiln_dtype_name(d->out_type),
                              kiln_op_name(k->op), kiln_dtype_name(k->a_type),
                              kiln_dtype_name(k->b_type), kiln_dtype_name(k->out_type));
    if (!l->entry[0])
        return kiln_error_set(err, KILN_ERROR_INVALID_ARGUMENT,
                              "kernel %s: the description has no launch part (entry=...)",
                              e->kernel);
    return KILN_OK;
}

kiln_status kiln_tuning_table_add(kiln_tuning_table *t, const kiln_tuning_entry *e,
                                  kiln_error *err)
{
    kiln_tuning_entry copy = *e;
    kiln_status st = check_entry(e, &copy.kdesc, &copy.launch, err);
    if (st) return st;
    long at = find(t, &e->key);
    if (at >= 0) {
        kiln_strbuf k;
        kiln_strbuf_init(&k);
        kiln_tuning_key_format(&e->key, &k);
        if (t->items[at].line)
            st = kiln_error_set(err, KILN_ERROR_INVALID_ARGUMENT,
                                "duplicate key '%s' (first on line %d)", k.data ? k.data : "",
                                t->items[at].line);
        else
            st = kiln_error_set(err, KILN_ERROR_INVALID_ARGUMENT, "duplicate key '%s'",
                                k.data ? k.data : "");
        kiln_strbuf_free(&k);
        return st;
    }
    size_t pos = (size_t)(-at - 1);
    kiln_tuning_entry *q = kiln_grow(t->items, &t->cap, t->n, sizeof *q, 16);
    if (!q) return kiln_error_set(err, KILN_ERROR_OUT_OF_MEMORY, "tuning table: out of memory");
    t->items = q;
    copy.desc = strdup(e->desc);
    if (!copy.desc) return kiln_error_set(err, KILN_ERROR_OUT_OF_MEMORY, "tuning table: out of memory");
    memmove(&t->items[pos + 1], &t->items[pos], (t->n - pos) * sizeof *t->items);
    t->items[pos] = copy;
    t->n++;
    return KILN_OK;
}

kiln_status kiln_tuning_table_merge(kiln_tuning_table *dst, const kiln_tuning_table *src,
                                    size_t *added, kiln_error *err)
{
    if (added) *added = 0;
    for (size_t i = 0; src && i < src->n; i++) {
        if (find(dst, &src->items[i].key) >= 0) continue;
        kiln_status st = kiln_tuning_table_add(dst, &src->items[i], err);
        if (st) return st;
        if (added) (*added)++;
    }
    return KILN_OK;
}

/* Splits the next whitespace-separated token off *p (modifies the line). */
static char *next_token(char **p)
{
    char *s = *p;
    while (*s == ' ' || *s == '\t') s++;
    if (!*s) {
        *p = s;
        return NULL;
    }
    char *e = s;
    while (*e && *e != ' ' && *e != '\t') e++;
    if (*e) *e++ = '\0';
    *p = e;
    return s;
}

static int parse_ms(const char *s, double *out)
{
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (end == s || *end || errno || !isfinite(v) || !(v > 0)) return 0;
    *out = v;
    return 1;
}

int kiln_tuning_copy_field(char *dst, size_t size, const char *v)
{
    size_t n = strlen(v);
    if (n >= size) return 0;
    memcpy(dst, v, n + 1);
    return 1;
}

/* Messages quote the file's text, and a table is data from anywhere: they
 * go out through kiln_printable. */
#define LINE_ERR(...)                                                                              \
    do {                                                                                           \
        char m_[KILN_ERROR_MAX], p_[KILN_ERROR_MAX];                                               \
        snprintf(m_, sizeof m_, __VA_ARGS__);                                                      \
        kiln_printable(m_, p_, sizeof p_);                                                              \
        st = kiln_error_set(err, KILN_ERROR_INVALID_ARGUMENT, "%s:%d: %s", path, lineno, p_);     \
        goto done;                                                                                 \
    } while (0)

/* The integrity line, last in a table: "integrity entries=N sha256=HEX",
 * HEX the SHA-256 of every line before it (header and comments too), each
 * without a trailing CR and ended by "\n".  A table cut at a line, missing
 * a line or with a changed byte is refused instead of loading different
 * entries. */
#define INTEGRITY_WORD "integrity"

static void hash_line(kiln_sha256 *h, const char *line, size_t n)
{
    if (n && line[n - 1] == '\r') n--;
    kiln_sha256_update(h, line, n);
    kiln_sha256_update(h, "\n", 1);
}

/* Checks the integrity line (its tokens after the word) against what the
 * lines above gave; NULL if it holds, else why not (in why). */
static const char *integrity_problem(char *rest, size_t entries, kiln_sha256 *h, char *why,
                                     size_t size)
{
    char *cnt = next_token(&rest), *sum = next_token(&rest), *extra = next_token(&rest);
    char *end = NULL;
    unsigned long long n = 0;
    if (cnt && !strncmp(cnt, "entries=", 8)) {
        errno = 0;
        n = strtoull(cnt + 8, &end, 10);
        if (errno || end == cnt + 8 || *end) end = NULL;
    }
    if (!end || !sum || strncmp(sum, "sha256=", 7) || !hex64(sum + 7) || extra) {
        snprintf(why, size, "bad integrity line (expected '%s entries=N sha256=<64 hex "
                            "digits>')", INTEGRITY_WORD);
        return why;
    }
    if (n != entries) {
        snprintf(why, size, "the integrity line says %llu entries, the table has %zu (lines "
                            "were lost or added)", n, entries);
        return why;
    }
    uint8_t d[32];
    char hex[65];
    kiln_sha256_final(h, d);
    kiln_hex(d, 32, hex);
    if (strcmp(hex, sum + 7)) {
        snprintf(why, size, "integrity check failed: the lines above hash to %.16s..., the "
                            "integrity line says %.16s... (the table was changed or damaged "
                            "after kiln tune wrote it)", hex, sum + 7);
        return why;
    }
    return NULL;
}

static const char *const field_names[] = {"arch", "op", "a type", "b type", "out type",
                                          "epilogue signature", "shape class", "'->'",
                                          "kernel name", "bundle id", "cache key", "time (ms)",
                                          "runner-up name", "runner-up time (ms)",
                                          "kernel description"};

kiln_status kiln_tuning_table_parse(const char *text, size_t len, const char *path,
                                    kiln_tuning_table **out, kiln_error *err)
{
    *out = NULL;
    if (!path) path = "<tuning table>";
    kiln_tuning_table *t = NULL;
    kiln_status st = kiln_tuning_table_create(&t, err);
    if (st) return st;
    char *buf = malloc(len + 1);
    if (!buf) {
        kiln_tuning_table_destroy(t);
        return kiln_error_set(err, KILN_ERROR_OUT_OF_MEMORY, "%s: out of memory", path);
    }
    memcpy(buf, text, len);
    buf[len] = '\0';
    int lineno = 0;
    int header = 0, sealed = 0;
    size_t entries = 0;
    kiln_sha256 h;
    kiln_sha256_init(&h);
    char *line = buf;
    if (memchr(text, '\0', len)) {
        lineno = 1;
        for (const char *q = text; *q; q++) lineno += *q == '\n';
        LINE_ERR("NUL byte in the table (damaged or binary file)");
    }
    /* memchr, not strchr: under ASan's strict string checks each strchr
     * scans the rest of the table (quadratic; minutes in the CPU suite). */
    const char *end_of_buf = buf + len;
    while (line && *line) {
        char *nl = memchr(line, '\n', (size_t)(end_of_buf - line));
        if (nl) *nl = '\0';
        lineno++;
        size_t ll = strlen(line);
        char *next = nl ? nl + 1 : NULL;
        if (sealed) LINE_ERR("text after the integrity line");
        if (!strncmp(line, INTEGRITY_WORD " ", strlen(INTEGRITY_WORD) + 1)) {
            char why[256];
            char *rest = line + strlen(INTEGRITY_WORD);
            if (ll && line[ll - 1] == '\r') line[--ll] = '\0';
            if (!header) LINE_ERR("integrity line before the header");
            if (integrity_problem(rest, entries, &h, why, sizeof why)) LINE_ERR("%s", why);
            sealed = 1;
            line = next;
            continue;
        }
        hash_line(&h, line, ll);
        if (ll && line[ll - 1] == '\r') line[--ll] = '\0';
        if (!header) {
            char *p = line;
            char *magic = next_token(&p), *ver = next_token(&p), *extra = next_token(&p);
            if (!magic || strcmp(magic, KILN_TUNING_MAGIC))
                LINE_ERR("not a kiln tuning table (the first line must be '%s %d', got '%.60s')",
                         KILN_TUNING_MAGIC, KILN_TUNING_FORMAT, line);
            char *end;
            long v = ver ? strtol(ver, &end, 10) : 0;
            if (!ver || *end || v < 1 || extra)
                LINE_ERR("bad header '%.60s' (expected '%s %d')", line, KILN_TUNING_MAGIC,
                         KILN_TUNING_FORMAT);
            if (v != KILN_TUNING_FORMAT)
                LINE_ERR("tuning table format %ld; this kiln (%s) reads format %d only — "
                         "re-run kiln tune", v, kiln_version(), KILN_TUNING_FORMAT);
            header = 1;
            line = next;
            continue;
        }
        char *p = line;
        while (*p == ' ' || *p == '\t') p++;
        if (!*p || *p == '#') {
            line = next;
            continue;
        }
        char *tok[14];
        for (int i = 0; i < 14; i++) {
            tok[i] = next_token(&p);
            if (!tok[i])
                LINE_ERR("missing %s (field %d); a line reads ARCH OP A B OUT EPILOGUE CLASS -> "
                         "KERNEL BUNDLE_ID CACHE_KEY MS RUNNERUP RUNNERUP_MS DESC",
                         field_names[i], i + 1);
        }
        while (*p == ' ' || *p == '\t') p++;
        if (!*p) LINE_ERR("missing %s (field 15, the rest of the line)", field_names[14]);
        kiln_tuning_entry e;
        memset(&e, 0, sizeof e);
        e.line = lineno;
        if (!kiln_tuning_copy_field(e.key.arch, sizeof e.key.arch, tok[0]) ||
            !arch_valid(tok[0]))
            LINE_ERR("bad arch '%.40s' (expected sm_<digits>, like sm_90a)", tok[0]);
        if (!kiln_op_parse(tok[1], &e.key.op))
            LINE_ERR("unknown op '%.40s' (fprop, dgrad or wgrad)", tok[1]);
        kiln_dtype *types[3] = {&e.key.a_type, &e.key.b_type, &e.key.out_type};
        for (int i = 0; i < 3; i++)
            if (!kiln_dtype_parse(tok[2 + i], types[i]))
                LINE_ERR("unknown %s '%.40s' (bf16, fp16, f32, e4m3 or e5m2)", field_names[2 + i],
                         tok[2 + i]);
        char why[256];
        if (!kiln_tuning_copy_field(e.key.epilogue, sizeof e.key.epilogue, tok[5]))
            LINE_ERR("epilogue signature too long");
        if (!kiln_tuning_sig_valid(tok[5], e.key.op, why, sizeof why)) LINE_ERR("%s", why);
        if (!kiln_shape_class_parse(tok[6], &e.key.shape))
            LINE_ERR("bad shape class '%.60s' (like t1024.g32.n4096.k8192; see docs/tuning.md)",
                     tok[6]);
        if (strcmp(tok[7], "->")) LINE_ERR("expected '->' after the key, got '%.40s'", tok[7]);
        if (!kiln_tuning_copy_field(e.kernel, sizeof e.kernel, tok[8]))
            LINE_ERR("kernel name too long (at most %d characters)", KILN_NAME_MAX - 1);
        if (!hex64(tok[9])) LINE_ERR("bundle id '%.70s' is not 64 lowercase hex digits", tok[9]);
        memcpy(e.bundle_id, tok[9], 65);
        if (!hex64(tok[10])) LINE_ERR("cache key '%.70s' is not 64 lowercase hex digits", tok[10]);
        memcpy(e.cache_key, tok[10], 65);
        if (!parse_ms(tok[11], &e.median_ms))
            LINE_ERR("time '%.40s' is not a positive number of milliseconds", tok[11]);
        if (!strcmp(tok[12], "-") != !strcmp(tok[13], "-"))
            LINE_ERR("runner-up name and time must both be '-' or both be given");
        if (strcmp(tok[12], "-")) {
            if (!kiln_tuning_copy_field(e.runnerup, sizeof e.runnerup, tok[12]))
                LINE_ERR("runner-up name too long");
            if (!parse_ms(tok[13], &e.runnerup_ms))
                LINE_ERR("runner-up time '%.40s' is not a positive number of milliseconds",
                         tok[13]);
        }
        e.desc = p;
        kiln_error aerr;
        kiln_error_clear(&aerr);
        if (kiln_tuning_table_add(t, &e, &aerr) != KILN_OK) {
            if (aerr.status == KILN_ERROR_OUT_OF_MEMORY) {
                st = kiln_error_set(err, aerr.status, "%s: %s", path, aerr.msg);
                goto done;
            }
            LINE_ERR("%s", aerr.msg);
        }
        entries++;
        line = next;
    }
    if (!header) {
        lineno = 1;
        LINE_ERR("empty file: not a kiln tuning table (expected '%s %d')", KILN_TUNING_MAGIC,
                 KILN_TUNING_FORMAT);
    }
    if (!sealed)
        LINE_ERR("no integrity line at the end ('%s entries=N sha256=...'): the table is "
                 "truncated, or was not written by kiln tune", INTEGRITY_WORD);
    st = KILN_OK;
done:
    free(buf);
    if (st) {
        kiln_tuning_table_destroy(t);
        return st;
    }
    kiln_tuning_text_timer(text, len, t->timer, sizeof t->timer);
    *out = t;
    return KILN_OK;
}

void kiln_tuning_text_timer(const char *text, size_t len, char *out, size_t size)
{
    static const char mark[] = "# written by kiln tune ";
    snprintf(out, size, "%s", "");
    for (size_t at = 0; at < len;) {
        const char *line = text + at;
        const char *nl = memchr(line, '\n', len - at);
        size_t ll = nl ? (size_t)(nl - line) : len - at;
        at += ll + 1;
        if (ll <= sizeof mark - 1 || memcmp(line, mark, sizeof mark - 1)) continue;
        for (size_t i = sizeof mark - 1; i + 8 <= ll; i++)
            if (!memcmp(line + i, "; timer ", 8)) {
                size_t b = i + 8, e = b;
                while (e < ll && line[e] != ' ' && line[e] != ';' && line[e] != '\r') e++;
                snprintf(out, size, "%.*s", (int)(e - b), line + b);
                return;
            }
    }
}

const char *kiln_tuning_table_timer(const kiln_tuning_table *t) { return t->timer; }

kiln_status kiln_tuning_table_load(const char *path, kiln_tuning_table **out, kiln_error *err)
{
    *out = NULL;
    char *data = NULL;
    size_t len = 0;
    kiln_status st = kiln_file_read(path, &data, &len, err);
    if (st) return st;
    st = kiln_tuning_table_parse(data, len, path, out, err);
    free(data);
    return st;
}

static void format_ms(kiln_strbuf *out, double ms) { kiln_strbuf_printf(out, "%.6g", ms); }

void kiln_tuning_table_format(const kiln_tuning_table *t, const char *const *comments,
                              kiln_strbuf *out)
{
    size_t start = out->len;
    kiln_strbuf_printf(out, "%s %d\n", KILN_TUNING_MAGIC, KILN_TUNING_FORMAT);
    for (size_t i = 0; comments && comments[i]; i++) {
        /* One comment line per line of text, so a comment cannot end a line early. */
        const char *c = comments[i];
        while (1) {
            const char *nl = strchr(c, '\n');
            size_t n = nl ? (size_t)(nl - c) : strlen(c);
            kiln_strbuf_puts(out, "# ");
            kiln_strbuf_append(out, c, n);
            kiln_strbuf_puts(out, "\n");
            if (!nl) break;
            c = nl + 1;
        }
    }
    for (size_t i = 0; i < t->n; i++) {
        const kiln_tuning_entry *e = &t->items[i];
        kiln_tuning_key_format(&e->key, out);
        kiln_strbuf_printf(out, " -> %s %s %s ", e->kernel, e->bundle_id, e->cache_key);
        format_ms(out, e->median_ms);
        if (e->runnerup[0]) {
            kiln_strbuf_printf(out, " %s ", e->runnerup);
            format_ms(out, e->runnerup_ms);
        } else {
            kiln_strbuf_puts(out, " - -");
        }
        kiln_strbuf_printf(out, " %s\n", e->desc);
    }
    if (out->oom) return;
    /* Hashed as the parser hashes: line by line. */
    kiln_sha256 h;
    kiln_sha256_init(&h);
    for (const char *p = out->data + start, *end = out->data + out->len; p < end;) {
        const char *nl = memchr(p, '\n', (size_t)(end - p));
        size_t n = nl ? (size_t)(nl - p) : (size_t)(end - p);
        hash_line(&h, p, n);
        p += n + 1;
    }
    uint8_t d[32];
    char hex[65];
    kiln_sha256_final(&h, d);
    kiln_hex(d, 32, hex);
    kiln_strbuf_printf(out, "%s entries=%zu sha256=%s\n", INTEGRITY_WORD, t->n, hex);
}

kiln_status kiln_tuning_table_save(const kiln_tuning_table *t, const char *const *comments,
                                   const char *path, kiln_error *err)
{
    kiln_strbuf sb;
    kiln_strbuf_init(&sb);
    kiln_tuning_table_format(t, comments, &sb);
    kiln_status st;
    if (sb.oom) st = kiln_error_set(err, KILN_ERROR_OUT_OF_MEMORY, "%s: out of memory", path);
    else st = kiln_file_write_atomic(path, sb.data, sb.len, err);
    kiln_strbuf_free(&sb);
    return st;
}

const kiln_tuning_entry *kiln_tuning_lookup(const kiln_tuning_table *t, const kiln_tuning_key *key)
{
    if (!t || !key) return NULL;
    long i = find(t, key);
    return i >= 0 ? &t->items[i] : NULL;
}

const kiln_tuning_entry *kiln_tuning_lookup_nearest(const kiln_tuning_table *t,
                                                    const kiln_tuning_key *key, int *distance)
{
    if (distance) *distance = -1;
    if (!t || !key) return NULL;
    const kiln_tuning_entry *hit = kiln_tuning_lookup(t, key);
    if (hit) {
        if (distance) *distance = 0;
        return hit;
    }
    const kiln_tuning_entry *best = NULL;
    int best_d = 0;
    for (size_t i = 0; i < t->n; i++) {
        const kiln_tuning_key *k = &t->items[i].key;
        if (strcmp(k->arch, key->arch) || k->op != key->op || k->a_type != key->a_type ||
            k->b_type != key->b_type || k->out_type != key->out_type ||
            strcmp(k->epilogue, key->epilogue))
            continue;
        /* The call a key stands for is its class's representative sizes;
         * nearness is kiln_shape_class_distance's, in hundredths of an octave. */
        int64_t g = kiln_shape_class_rep('g', key->shape.g);
        double dd = kiln_shape_class_distance(&k->shape, g, g * kiln_shape_class_rep('t', key->shape.t),
                                              kiln_shape_class_rep('n', key->shape.n),
                                              kiln_shape_class_rep('k', key->shape.k));
        int d = (int)lround(100 * dd);
        if (!best || d < best_d) {
            best = &t->items[i];
            best_d = d;
        }
    }
    if (best && distance) *distance = best_d;
    return best;
}
