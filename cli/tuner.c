/* SPDX-License-Identifier: Apache-2.0 */
/*
 * tuner.c — the tuner behind `kiln tune` (cmd_tune.c drives it): shapes
 * files, timing configs, the fake timer, the journal, choosing the winners
 * and the SVG plot.  (Not to be confused with kernel/tuning.c, the tables it
 * writes, or runtime/kernels.c, which serves them.)
 */
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "half.h"
#include "tune.h"

/* ------------------------------------------------------------------------ */
/* Shapes                                                                   */
/* ------------------------------------------------------------------------ */

static int parse_i64(const char *s, int64_t lo, int64_t hi, int64_t *out)
{
    if (!*s || !isdigit((unsigned char)*s)) return 0;
    char *end;
    errno = 0;
    long long v = strtoll(s, &end, 10);
    if (*end || errno || v < lo || v > hi) return 0;
    *out = v;
    return 1;
}

static int name_ok(const char *s)
{
    if (!*s) return 0;
    for (const char *p = s; *p; p++)
        if (!isalnum((unsigned char)*p) && *p != '_' && *p != '-' && *p != '.') return 0;
    return 1;
}

#define SHAPE_ERR(...)                                                                             \
    do {                                                                                           \
        char m_[512];                                                                              \
        snprintf(m_, sizeof m_, __VA_ARGS__);                                                      \
        st = kiln_error_set(err, KILN_ERROR_INVALID_ARGUMENT, "%s:%d: %s", path, lineno, m_);     \
        goto done;                                                                                 \
    } while (0)

kiln_status kiln_tune_shapes_parse(const char *text, size_t len, const char *path,
                                   kiln_tune_shape **out, size_t *n, kiln_error *err)
{
    *out = NULL;
    *n = 0;
    kiln_status st = KILN_OK;
    char *buf = malloc(len + 1);
    kiln_tune_shape *items = NULL;
    size_t count = 0, cap = 0;
    int lineno = 0;
    if (!buf) return kiln_error_set(err, KILN_ERROR_OUT_OF_MEMORY, "%s: out of memory", path);
    memcpy(buf, text, len);
    buf[len] = '\0';
    char *line = buf;
    while (line && *line) {
        char *nl = strchr(line, '\n');
        if (nl) *nl = '\0';
        char *next = nl ? nl + 1 : NULL;
        lineno++;
        char *hash = strchr(line, '#');
        if (hash) *hash = '\0';
        char *tok[7];
        int nt = 0;
        for (char *p = line; nt < 7;) {
            while (*p == ' ' || *p == '\t' || *p == '\r') p++;
            if (!*p) break;
            tok[nt++] = p;
            while (*p && *p != ' ' && *p != '\t' && *p != '\r') p++;
            if (*p) *p++ = '\0';
        }
        line = next;
        if (nt == 0) continue;
        if (nt != 6)
            SHAPE_ERR("expected 6 fields (name groups tokens_per_group K N sizes), found %s%d",
                      nt == 7 ? "more than " : "", nt == 7 ? 6 : nt);
        kiln_tune_shape s;
        memset(&s, 0, sizeof s);
        s.line = lineno;
        if (!name_ok(tok[0]) || strlen(tok[0]) >= sizeof s.name)
            SHAPE_ERR("bad shape name '%.60s' (letters, digits, _ - . ; at most %zu)", tok[0],
                      sizeof s.name - 1);
        snprintf(s.name, sizeof s.name, "%s", tok[0]);
        int64_t v;
        if (!parse_i64(tok[1], 1, KILN_MAX_GROUPS, &v))
            SHAPE_ERR("%s: groups '%.30s' must be a whole number from 1 to %d", s.name, tok[1],
                      KILN_MAX_GROUPS);
        s.groups = (int)v;
        if (!parse_i64(tok[2], 1, 1 << 24, &s.tokens_per_group))
            SHAPE_ERR("%s: tokens_per_group '%.30s' must be a whole number from 1 to %d", s.name,
                      tok[2], 1 << 24);
        if (!parse_i64(tok[3], 8, 1 << 20, &s.k) || s.k % 8)
            SHAPE_ERR("%s: K '%.30s' must be a multiple of 8 from 8 to %d", s.name, tok[3], 1 << 20);
        if (!parse_i64(tok[4], 8, 1 << 20, &s.n) || s.n % 8)
            SHAPE_ERR("%s: N '%.30s' must be a multiple of 8 from 8 to %d", s.name, tok[4], 1 << 20);
        if (strcmp(tok[5], "uniform") && strcmp(tok[5], "skew") && strcmp(tok[5], "mod64_1") &&
            strcmp(tok[5], "random") && strcmp(tok[5], "dirichlet"))
            SHAPE_ERR("%s: sizes '%.30s' must be uniform, skew, mod64_1, random or dirichlet",
                      s.name, tok[5]);
        snprintf(s.sizes, sizeof s.sizes, "%s", tok[5]);
        if (!strcmp(s.sizes, "mod64_1") && s.tokens_per_group % 64 != 1)
            SHAPE_ERR("%s: sizes mod64_1 needs tokens_per_group ≡ 1 (mod 64), not %lld", s.name,
                      (long long)s.tokens_per_group);
        if ((int64_t)s.groups * s.tokens_per_group > (int64_t)1 << 31)
            SHAPE_ERR("%s: %lld tokens in all; at most 2^31", s.name,
                      (long long)s.groups * s.tokens_per_group);
        for (size_t i = 0; i < count; i++)
            if (!strcmp(items[i].name, s.name))
                SHAPE_ERR("shape '%s' is named twice (first on line %d)", s.name, items[i].line);
        {
            kiln_tune_shape *q = kiln_grow(items, &cap, count, sizeof *q, 16);
            if (!q) {
                st = kiln_error_set(err, KILN_ERROR_OUT_OF_MEMORY, "%s: out of memory", path);
                goto done;
            }
            items = q;
        }
        items[count++] = s;
    }
    if (count == 0) {
        lineno = lineno ? lineno : 1;
        SHAPE_ERR("no shapes (lines of: name groups tokens_per_group K N sizes)");
    }
done:
    free(buf);
    if (st) {
        free(items);
        return st;
    }
    *out = items;
    *n = count;
    return KILN_OK;
}

kiln_status kiln_tune_shapes_load(const char *path, kiln_tune_shape **out, size_t *n,
                                  kiln_error *err)
{
    char *data = NULL;
    size_t len = 0;
    *out = NULL;
    *n = 0;
    kiln_status st = kiln_file_read(path, &data, &len, err);
    if (st) return st;
    st = kiln_tune_shapes_parse(data, len, path, out, n, err);
    free(data);
    return st;
}

int64_t kiln_tune_shape_total(const kiln_tune_shape *s)
{
    return (int64_t)s->groups * s->tokens_per_group;
}

/* Deterministic uniforms in (0, 1) for the random size kinds (xorshift32). */
static double sizes_u(uint32_t *x)
{
    *x ^= *x << 13;
    *x ^= *x >> 17;
    *x ^= *x << 5;
    return ((*x >> 8) + 0.5) / 16777216.0;
}

/* The weight of group g under a sizes kind (shares are scaled to the total):
 * skew ~ 1/(g+1)^1.2 with groups 16 and 17 empty; random ~ a uniform
 * integer in [1, 2*tokens_per_group - 1]; dirichlet ~ Gamma(1/2) draws
 * (-ln u1 * cos^2(2 pi u2)), i.e. Dirichlet(1/2) routing. */
static double size_weight(const char *kind, int g, uint32_t *x, int64_t tokens_per_group)
{
    if (!strcmp(kind, "skew")) return (g == 16 || g == 17) ? 0.0 : pow(g + 1.0, -1.2);
    if (!strcmp(kind, "random")) return 1 + (int)(sizes_u(x) * (double)(2 * tokens_per_group - 1));
    double u1 = sizes_u(x), u2 = sizes_u(x), c = cos(2 * 3.14159265358979323846 * u2);
    return -log(u1) * c * c;
}

int64_t kiln_tune_shape_sizes(const kiln_tune_shape *s, int32_t *sizes)
{
    int64_t total = kiln_tune_shape_total(s);
    if (strcmp(s->sizes, "skew") && strcmp(s->sizes, "random") && strcmp(s->sizes, "dirichlet")) {
        for (int g = 0; g < s->groups; g++) sizes[g] = (int32_t)s->tokens_per_group;
        return total;
    }
    /* Shares of the total by weight, the rounding remainder to group 0; the
     * second pass draws the same weights again from the same seed.
     * bench/torch_peer.py takes these sizes from `kiln_bench --sizes`. */
    const uint32_t seed = 0x2545F491u;
    uint32_t x = seed;
    double sum = 0;
    for (int g = 0; g < s->groups; g++) sum += size_weight(s->sizes, g, &x, s->tokens_per_group);
    int64_t used = 0;
    x = seed;
    for (int g = 0; g < s->groups; g++) {
        double w = size_weight(s->sizes, g, &x, s->tokens_per_group);
        sizes[g] = (int32_t)((double)total * w / sum);
        used += sizes[g];
    }
    sizes[0] += (int32_t)(total - used);
    return total;
}

void kiln_tune_shape_id(const kiln_tune_shape *s, char *out, size_t size)
{
    snprintf(out, size, "%s:%d:%lld:%lld:%lld:%s", s->name, s->groups,
             (long long)s->tokens_per_group, (long long)s->k, (long long)s->n, s->sizes);
}

double kiln_tune_shape_flops(const kiln_tune_shape *s)
{
    return 2.0 * (double)kiln_tune_shape_total(s) * (double)s->n * (double)s->k;
}

/* ------------------------------------------------------------------------ */
/* Configs                                                                  */
/* ------------------------------------------------------------------------ */

void kiln_tune_problem_of(const kiln_tune_config *cfg, const kiln_tune_shape *s, kiln_problem *p)
{
    memset(p, 0, sizeof *p);
    p->op = cfg->op;
    p->a_type = cfg->a_type;
    p->b_type = cfg->b_type;
    p->out_type = cfg->out_type;
    p->epilogue.alpha = 1.0f;
    p->groups = s ? s->groups : 1;
    p->n = s ? s->n : 0;
    p->k = s ? s->k : 0;
    p->capacity = s ? kiln_tune_shape_total(s) : 0;
    p->wgrad_output = cfg->wgrad_output;
    p->accumulate = cfg->accumulate;
    p->fp8.recipe = cfg->fp8_recipe;
    p->fp8.promote = cfg->fp8_promote;
    /* Non-NULL markers: this problem only feeds the key, never a launch. */
    static const float marker[1] = {0};
    if (cfg->op == KILN_OP_WGRAD && cfg->dbias) p->d_dbias = (void *)(uintptr_t)marker;
    if (cfg->op != KILN_OP_WGRAD) {
        const kiln_epilogue_desc *e = &cfg->epilogue;
        if (e->bias == KILN_BIAS_PER_GROUP) p->epilogue.d_bias = marker;
        if (e->row_scale) p->epilogue.d_row_scale = marker;
        p->epilogue.scale_bias = e->scale_bias && e->row_scale && e->bias == KILN_BIAS_PER_GROUP;
        if (e->alpha == KILN_ALPHA_PER_GROUP) p->epilogue.d_alpha = marker;
        if (e->beta) {
            p->epilogue.beta = 0.5f;
            p->epilogue.d_c = marker;
        }
    }
}

void kiln_tune_config_of(const kiln_kernel_desc *d, kiln_tune_config *out)
{
    memset(out, 0, sizeof *out);
    out->op = d->op;
    out->a_type = d->a_type;
    out->b_type = d->b_type;
    out->out_type = d->out_type;
    if (d->op == KILN_OP_WGRAD) {
        out->wgrad_output = d->wgrad_output;
        out->accumulate = d->accumulate;
        /* A dbias kernel is timed computing db, so its key is that of the
         * calls with a bias gradient (their own signature term). */
        out->dbias = d->dbias;
    } else {
        out->epilogue = d->epilogue;
        if (!(d->epilogue.row_scale && d->epilogue.bias == KILN_BIAS_PER_GROUP))
            out->epilogue.scale_bias = 0;
        /* An fp8 kernel is timed on its own recipe: fast accumulation when
         * it was built so, promotion when built to promote (block always
         * does), so its key is that of the calls it is meant for. */
        out->fp8_recipe = d->fp8_recipe;
        out->fp8_promote = d->fp8_promote || d->fp8_recipe == KILN_FP8_BLOCK;
    }
    kiln_problem p;
    kiln_tune_problem_of(out, NULL, &p);
    kiln_tuning_sig_from_problem(&p, out->sig, sizeof out->sig);
}

int kiln_tune_config_equal(const kiln_tune_config *a, const kiln_tune_config *b)
{
    return a->op == b->op && a->a_type == b->a_type && a->b_type == b->b_type &&
           a->out_type == b->out_type && a->wgrad_output == b->wgrad_output &&
           a->accumulate == b->accumulate && a->dbias == b->dbias && a->fp8_recipe == b->fp8_recipe &&
           a->fp8_promote == b->fp8_promote && !strcmp(a->sig, b->sig);
}

/* ------------------------------------------------------------------------ */
/* The fp8 reference                                                        */
/* ------------------------------------------------------------------------ */

static float load_elem(const void *data, size_t j, kiln_dtype t)
{
    switch (t) {
    case KILN_DTYPE_F32: return ((const float *)data)[j];
    case KILN_DTYPE_BF16: return kiln_bf16_to_f32(((const uint16_t *)data)[j]);
    case KILN_DTYPE_F16: return kiln_f16_to_f32(((const uint16_t *)data)[j]);
    case KILN_DTYPE_E4M3: return kiln_e4m3_to_f32(((const uint8_t *)data)[j]);
    default: return kiln_e5m2_to_f32(((const uint8_t *)data)[j]);
    }
}

/* Element i of the buffer c stands for. */
static double chunk_at(const kiln_tune_chunk *c, int64_t i)
{
    return load_elem(c->data, (size_t)i % c->n, c->type);
}

/* len elements of c from element at, as floats (8-bit ones through a
 * table: the reference reads every sampled row and column whole). */
static void chunk_run(const kiln_tune_chunk *c, int64_t at, int64_t len, float *out)
{
    float lut[256];
    int byte = kiln_dtype_size(c->type) == 1;
    if (byte)
        for (int v = 0; v < 256; v++)
            lut[v] = c->type == KILN_DTYPE_E4M3 ? kiln_e4m3_to_f32((uint8_t)v)
                                                : kiln_e5m2_to_f32((uint8_t)v);
    size_t j = (size_t)at % c->n;
    for (int64_t i = 0; i < len; i++, j = j + 1 == c->n ? 0 : j + 1)
        out[i] = byte ? lut[((const uint8_t *)c->data)[j]] : load_elem(c->data, j, c->type);
}

/* The dequantization scale of k-block kb at row r, column col of group g. */
static double fp8_scale(const kiln_tune_fp8_call *f, int g, int64_t r, int64_t col, int64_t kb)
{
    const int64_t nkb = (f->k_red + 127) / 128, nbn = (f->n_out + 127) / 128;
    switch (f->recipe) {
    case KILN_FP8_TENSOR: return chunk_at(&f->scale_a, 0) * chunk_at(&f->scale_b, g);
    case KILN_FP8_ROW: return chunk_at(&f->scale_a, r) * chunk_at(&f->scale_b, g * f->n_out + col);
    default:
        return chunk_at(&f->scale_a, kb * f->capacity + r) *
               chunk_at(&f->scale_b, ((int64_t)g * nbn + col / 128) * nkb + kb);
    }
}

/* One output element: the k-blocks' sums of products (in float: a sum of
 * 128 products of two 8-bit values is exact to about 2^-24 of its size),
 * scaled and added in double, then the epilogue. */
static double fp8_element(const kiln_tune_fp8_call *f, int g, int64_t r, int64_t col,
                          const float *a, const float *b, double *mag)
{
    double acc = 0, abs_acc = 0;
    for (int64_t kb = 0; kb * 128 < f->k_red; kb++) {
        int64_t end = (kb + 1) * 128 < f->k_red ? (kb + 1) * 128 : f->k_red;
        float s[4] = {0}, m[4] = {0};
        for (int64_t j = kb * 128; j < end; j++) {
            float x = a[j] * b[j];
            s[j & 3] += x;
            m[j & 3] += fabsf(x);
        }
        double sc = fp8_scale(f, g, r, col, kb);
        acc += sc * ((double)s[0] + s[1] + s[2] + s[3]);
        abs_acc += fabs(sc) * ((double)m[0] + m[1] + m[2] + m[3]);
    }
    double rs = f->row_scale.data ? chunk_at(&f->row_scale, r) : 1.0;
    double e = rs * (f->alpha.data ? chunk_at(&f->alpha, g) : 1.0);
    double y = e * acc;
    if (f->bias.data)
        y += (f->scale_bias && f->row_scale.data ? rs : 1.0) * chunk_at(&f->bias, g * f->n_out + col);
    if (f->c.data) y += (double)f->beta * chunk_at(&f->c, r * f->n_out + col);
    *mag = fabs(e) * abs_acc;
    return y;
}

kiln_status kiln_tune_fp8_reference(const kiln_tune_fp8_call *f, const int64_t *rows,
                                    size_t n_rows, const int64_t *cols, size_t n_cols, double *ref,
                                    double *mag, kiln_error *err)
{
    const int64_t K = f->k_red;
    int64_t *end = malloc((size_t)f->groups * sizeof *end); /* Σ counts up to g, inclusive */
    float *a = malloc((size_t)K * sizeof *a);
    float *b = malloc((n_cols ? n_cols : 1) * (size_t)K * sizeof *b);
    if (!end || !a || !b) {
        free(end);
        free(a);
        free(b);
        return kiln_error_set(err, KILN_ERROR_OUT_OF_MEMORY, "fp8 reference: host memory");
    }
    int64_t sum = 0;
    for (int g = 0; g < f->groups; g++) end[g] = sum += f->sizes[g] > 0 ? f->sizes[g] : 0;
    int loaded = -1, g = 0;
    for (size_t i = 0; i < n_rows; i++) {
        int64_t r = rows[i];
        if (r >= sum || r >= f->capacity) {
            for (size_t j = 0; j < n_cols; j++) ref[i * n_cols + j] = mag[i * n_cols + j] = 0;
            continue;
        }
        if (r < (g ? end[g - 1] : 0)) g = 0;
        while (end[g] <= r) g++;
        if (g != loaded) { /* B's sampled columns of group g, dequantized once */
            for (size_t j = 0; j < n_cols; j++)
                chunk_run(&f->b, ((int64_t)g * f->n_out + cols[j]) * K, K, b + j * (size_t)K);
            loaded = g;
        }
        chunk_run(&f->a, r * K, K, a);
        for (size_t j = 0; j < n_cols; j++)
            ref[i * n_cols + j] = fp8_element(f, g, r, cols[j], a, b + j * (size_t)K,
                                              &mag[i * n_cols + j]);
    }
    free(end);
    free(a);
    free(b);
    return KILN_OK;
}

/* ------------------------------------------------------------------------ */
/* The fake timer                                                           */
/* ------------------------------------------------------------------------ */

static uint64_t fnv1a(const char *s, uint64_t h)
{
    for (; *s; s++) h = (h ^ (unsigned char)*s) * 1099511628211ull;
    return h;
}

static int64_t cdiv(int64_t a, int64_t b) { return (a + b - 1) / b; }

double kiln_tune_fake_ms(const kiln_kernel_desc *d, const kiln_launch_desc *l,
                         const kiln_tune_shape *s, const int32_t *sizes)
{
    const double sms = 132.0;
    int64_t tm = d->tile_m > 0 ? d->tile_m : 64, tn = d->tile_n > 0 ? d->tile_n : 64;
    int64_t tk = d->tile_k > 0 ? d->tile_k : 32;
    int64_t total = kiln_tune_shape_total(s);
    double padded = 0; /* FLOPs including the padding of partial tiles */
    int64_t tiles = 0;
    if (d->op == KILN_OP_WGRAD) {
        int64_t per = cdiv(s->n, tm) * cdiv(s->k, tn);
        tiles = per * s->groups;
        for (int g = 0; g < s->groups; g++)
            padded += 2.0 * (double)(per * tm * tn) * (double)(cdiv(sizes[g], tk) * tk);
    } else {
        int64_t out_cols = d->op == KILN_OP_DGRAD ? s->k : s->n;
        int64_t red = d->op == KILN_OP_DGRAD ? s->n : s->k;
        int64_t rows = 0;
        for (int g = 0; g < s->groups; g++) rows += cdiv(sizes[g], tm);
        tiles = rows * cdiv(out_cols, tn);
        padded = 2.0 * (double)(rows * tm) * (double)(cdiv(out_cols, tn) * tn) *
                 (double)(cdiv(red, tk) * tk);
    }
    int sm90 = !strcmp(d->family, "sm90");
    double peak = sm90 ? 800.0 : 60.0; /* TFLOP/s */
    double inten = (double)(tm * tn) / (double)(tm + tn);
    double eff = inten / (inten + 24.0) * ((double)tk / (double)(tk + 16));
    if (sm90) eff *= (double)d->stages / (d->stages + 1.0) * (d->warpgroups > 1 ? 1.05 : 1.0);
    double slots = sms * (l && l->ctas_per_sm > 0 ? l->ctas_per_sm : 1);
    double waves = ceil((double)tiles / slots);
    double wave_eff = waves > 0 ? (double)tiles / (waves * slots) : 1.0;
    double compute_ms = padded / (peak * 1e9 * eff * wave_eff);
    double a_bytes = (double)total * (double)(d->op == KILN_OP_FPROP ? s->k : s->n) *
                     kiln_dtype_size(d->a_type);
    double b_bytes = d->op == KILN_OP_WGRAD
                         ? (double)total * (double)s->k * kiln_dtype_size(d->b_type)
                         : (double)s->groups * (double)s->n * (double)s->k * kiln_dtype_size(d->b_type);
    double o_bytes = d->op == KILN_OP_WGRAD
                         ? (double)s->groups * (double)s->n * (double)s->k * kiln_dtype_size(d->out_type)
                         : (double)total * (double)(d->op == KILN_OP_FPROP ? s->n : s->k) *
                               kiln_dtype_size(d->out_type);
    double mem_ms = (a_bytes + b_bytes + o_bytes) / 3.3e9;
    double ms = (compute_ms > mem_ms ? compute_ms : mem_ms) + 0.004;
    /* ±2 % of deterministic noise, so that equal formulas still order. */
    uint64_t h = fnv1a(s->name, fnv1a(d->name, 1469598103934665603ull));
    return ms * (0.98 + 0.04 * (double)(h % 10007) / 10007.0);
}

typedef struct fake_state {
    const kiln_tune_shape *shape;
    int32_t *sizes;
    const char *bad;
} fake_state;

static kiln_status fake_prepare(kiln_tune_timer *t, const kiln_tune_config *cfg,
                                const kiln_tune_shape *shape, const int32_t *sizes, int64_t total,
                                kiln_error *err)
{
    (void)cfg;
    (void)total;
    fake_state *f = t->self;
    free(f->sizes);
    f->sizes = malloc((size_t)shape->groups * sizeof *f->sizes);
    if (!f->sizes) return kiln_error_set(err, KILN_ERROR_OUT_OF_MEMORY, "fake timer: out of memory");
    memcpy(f->sizes, sizes, (size_t)shape->groups * sizeof *sizes);
    f->shape = shape;
    return KILN_OK;
}

static kiln_status fake_time(kiln_tune_timer *t, const kiln_tune_variant *v, kiln_tune_measure *m,
                             kiln_error *err)
{
    fake_state *f = t->self;
    memset(m, 0, sizeof *m);
    if (!f->shape) return kiln_error_set(err, KILN_ERROR_INTERNAL, "fake timer: not prepared");
    double ms = kiln_tune_fake_ms(v->desc, v->launch, f->shape, f->sizes);
    m->median_ms = ms;
    m->min_ms = ms * 0.99;
    m->max_ms = ms * 1.02;
    m->runs = 30;
    if (f->bad && *f->bad && strstr(v->desc->name, f->bad)) {
        m->ok = 0;
        m->rel_err = 1.0;
        snprintf(m->note, sizeof m->note, "wrong result: relative error 1 vs the reference "
                                          "(KILN_TUNE_FAKE_BAD=%s)", f->bad);
        return KILN_OK;
    }
    m->ok = 1;
    return KILN_OK;
}

static void fake_cleanup(kiln_tune_timer *t)
{
    fake_state *f = t->self;
    free(f->sizes);
    f->sizes = NULL;
    f->shape = NULL;
}

static void fake_destroy(kiln_tune_timer *t)
{
    fake_cleanup(t);
    free(t->self);
    free(t);
}

static const kiln_tune_timer_ops fake_ops = {fake_prepare, fake_time, fake_cleanup, fake_destroy};

kiln_status kiln_tune_fake_create(int device_index, kiln_tune_timer **out, kiln_error *err)
{
    kiln_tune_timer *t = calloc(1, sizeof *t);
    fake_state *f = calloc(1, sizeof *f);
    if (!t || !f) {
        free(t);
        free(f);
        return kiln_error_set(err, KILN_ERROR_OUT_OF_MEMORY, "fake timer: out of memory");
    }
    f->bad = getenv("KILN_TUNE_FAKE_BAD");
    t->ops = &fake_ops;
    t->self = f;
    t->device_index = device_index;
    snprintf(t->id, sizeof t->id, "fake");
    snprintf(t->device, sizeof t->device, "fake device %d (formula, no GPU)", device_index);
    *out = t;
    return KILN_OK;
}

void kiln_tune_timer_destroy(kiln_tune_timer *t)
{
    if (t) t->ops->destroy(t);
}

/* ------------------------------------------------------------------------ */
/* Journal                                                                  */
/* ------------------------------------------------------------------------ */

#define JOURNAL_MAGIC "kiln-tune-journal 1"

struct kiln_tune_journal {
    char *path;
    int fd;
    kiln_tune_record *items;
    size_t n, cap;
    size_t skipped;
    int repaired;
};

static int journal_push(kiln_tune_journal *j, const kiln_tune_record *r)
{
    kiln_tune_record *q = kiln_grow(j->items, &j->cap, j->n, sizeof *q, 64);
    if (!q) return 0;
    j->items = q;
    j->items[j->n++] = *r;
    return 1;
}

/* Parses one line (tabs between fields, modified in place). */
static int journal_parse_line(char *line, kiln_tune_record *r)
{
    char *f[9] = {0};
    int n = 0;
    char *p = line;
    while (n < 9) {
        f[n++] = p;
        char *tab = strchr(p, '\t');
        if (!tab) break;
        *tab = '\0';
        p = tab + 1;
    }
    if (n < 8) return 0;
    memset(r, 0, sizeof *r);
    char *end;
    if (strlen(f[0]) != 64 || !kiln_tuning_copy_field(r->bundle_id, sizeof r->bundle_id, f[0]))
        return 0;
    if (!kiln_tuning_copy_field(r->shape_id, sizeof r->shape_id, f[1]) || !f[1][0]) return 0;
    if (!kiln_tuning_copy_field(r->timer_id, sizeof r->timer_id, f[2]) || !f[2][0]) return 0;
    if (strcmp(f[3], "ok") && strcmp(f[3], "bad")) return 0;
    r->m.ok = !strcmp(f[3], "ok");
    r->m.median_ms = strtod(f[4], &end);
    if (*end || !isfinite(r->m.median_ms) || r->m.median_ms < 0) return 0;
    if (r->m.ok && !(r->m.median_ms > 0)) return 0;
    r->m.rel_err = strtod(f[5], &end);
    if (*end) return 0;
    r->m.runs = (int)strtol(f[6], &end, 10);
    if (*end) return 0;
    if (!kiln_tuning_copy_field(r->name, sizeof r->name, f[7])) return 0;
    if (n == 9) snprintf(r->m.note, sizeof r->m.note, "%s", f[8]);
    r->m.min_ms = r->m.max_ms = r->m.median_ms;
    return 1;
}

kiln_status kiln_tune_journal_open(const char *path, kiln_tune_journal **out, kiln_error *err)
{
    *out = NULL;
    kiln_tune_journal *j = calloc(1, sizeof *j);
    if (!j || !(j->path = strdup(path))) {
        free(j);
        return kiln_error_set(err, KILN_ERROR_OUT_OF_MEMORY, "journal: out of memory");
    }
    j->fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (j->fd < 0) {
        kiln_status st = kiln_error_set(err, KILN_ERROR_IO, "%s: %s", path, strerror(errno));
        kiln_tune_journal_close(j);
        return st;
    }
    char *data = NULL;
    size_t len = 0;
    kiln_status st = kiln_file_read(path, &data, &len, err);
    if (st) {
        kiln_tune_journal_close(j);
        return st;
    }
    if (len == 0) {
        const char *h = JOURNAL_MAGIC "\n";
        if (write(j->fd, h, strlen(h)) != (ssize_t)strlen(h) || fsync(j->fd) != 0) {
            st = kiln_error_set(err, KILN_ERROR_IO, "%s: %s", path, strerror(errno));
            free(data);
            kiln_tune_journal_close(j);
            return st;
        }
        free(data);
        *out = j;
        return KILN_OK;
    }
    size_t hl = strlen(JOURNAL_MAGIC);
    if (len < hl + 1 || memcmp(data, JOURNAL_MAGIC, hl) || data[hl] != '\n') {
        st = kiln_error_set(err, KILN_ERROR_INVALID_ARGUMENT,
                            "%s:1: not a kiln tune journal (expected '%s'); remove it or name "
                            "another with --journal", path, JOURNAL_MAGIC);
        free(data);
        kiln_tune_journal_close(j);
        return st;
    }
    /* A kill in mid-write leaves a line without its newline: cut it off so
     * that the next record starts on a line of its own. */
    size_t keep = len;
    while (keep > 0 && data[keep - 1] != '\n') keep--;
    if (keep < len) {
        if (ftruncate(j->fd, (off_t)keep) != 0) {
            st = kiln_error_set(err, KILN_ERROR_IO, "%s: %s", path, strerror(errno));
            free(data);
            kiln_tune_journal_close(j);
            return st;
        }
        j->repaired = 1;
    }
    char *line = data + hl + 1;
    data[keep] = '\0';
    while (*line) {
        char *nl = strchr(line, '\n');
        *nl = '\0';
        kiln_tune_record r;
        if (*line && journal_parse_line(line, &r)) {
            if (!journal_push(j, &r)) {
                free(data);
                kiln_tune_journal_close(j);
                return kiln_error_set(err, KILN_ERROR_OUT_OF_MEMORY, "journal: out of memory");
            }
        } else if (*line) {
            j->skipped++;
        }
        line = nl + 1;
    }
    free(data);
    if (lseek(j->fd, 0, SEEK_END) < 0) {
        st = kiln_error_set(err, KILN_ERROR_IO, "%s: %s", path, strerror(errno));
        kiln_tune_journal_close(j);
        return st;
    }
    *out = j;
    return KILN_OK;
}

void kiln_tune_journal_close(kiln_tune_journal *j)
{
    if (!j) return;
    if (j->fd >= 0) close(j->fd);
    free(j->items);
    free(j->path);
    free(j);
}

size_t kiln_tune_journal_count(const kiln_tune_journal *j) { return j->n; }
const kiln_tune_record *kiln_tune_journal_at(const kiln_tune_journal *j, size_t i)
{
    return i < j->n ? &j->items[i] : NULL;
}
size_t kiln_tune_journal_skipped(const kiln_tune_journal *j) { return j->skipped; }
int kiln_tune_journal_repaired(const kiln_tune_journal *j) { return j->repaired; }

const kiln_tune_record *kiln_tune_journal_find(const kiln_tune_journal *j, const char *bundle_id,
                                               const char *shape_id, const char *timer_id)
{
    /* The latest record wins (a later run may have re-timed). */
    for (size_t i = j->n; i-- > 0;) {
        const kiln_tune_record *r = &j->items[i];
        if (!strcmp(r->bundle_id, bundle_id) && !strcmp(r->shape_id, shape_id) &&
            !strcmp(r->timer_id, timer_id))
            return r;
    }
    return NULL;
}

/* Fields never hold a tab or a newline. */
static void clean_field(char *dst, size_t size, const char *s)
{
    snprintf(dst, size, "%s", s);
    for (char *p = dst; *p; p++)
        if (*p == '\t' || *p == '\n' || *p == '\r') *p = ' ';
}

kiln_status kiln_tune_journal_append(kiln_tune_journal *j, const kiln_tune_record *r,
                                     kiln_error *err)
{
    char shape[160], timer[96], name[KILN_NAME_MAX], note[256];
    clean_field(shape, sizeof shape, r->shape_id);
    clean_field(timer, sizeof timer, r->timer_id);
    clean_field(name, sizeof name, r->name);
    clean_field(note, sizeof note, r->m.note);
    char line[1024];
    int n = snprintf(line, sizeof line, "%s\t%s\t%s\t%s\t%.9g\t%.3g\t%d\t%s\t%s\n", r->bundle_id,
                     shape, timer, r->m.ok ? "ok" : "bad", r->m.median_ms, r->m.rel_err, r->m.runs,
                     name, note);
    if (n < 0 || (size_t)n >= sizeof line)
        return kiln_error_set(err, KILN_ERROR_INTERNAL, "%s: journal line too long", j->path);
    /* One write of one line: O_APPEND is not needed with a single writer,
     * and a kill leaves at worst a torn last line, which open cuts off. */
    ssize_t w = write(j->fd, line, (size_t)n);
    if (w != n || fsync(j->fd) != 0)
        return kiln_error_set(err, KILN_ERROR_IO, "%s: %s", j->path,
                              w != n ? "short write" : strerror(errno));
    if (!journal_push(j, r)) return kiln_error_set(err, KILN_ERROR_OUT_OF_MEMORY, "journal: out of memory");
    return KILN_OK;
}

/* ------------------------------------------------------------------------ */
/* Choosing                                                                 */
/* ------------------------------------------------------------------------ */

typedef struct key_slot {
    kiln_tuning_key key;
    unsigned char *shapes;       /* [n_shapes]: shape belongs to this key */
} key_slot;

static void key_of(const kiln_tune_entry *v, const kiln_tune_shape *s, kiln_tuning_key *k)
{
    kiln_problem p;
    kiln_tune_problem_of(&v->cfg, s, &p);
    kiln_tuning_key_from_problem(&p, v->arch, k);
}

kiln_status kiln_tune_choose(const kiln_tune_entry *v, size_t n_variants,
                             const kiln_tune_shape *shapes, size_t n_shapes,
                             kiln_tuning_table *table, kiln_error *err)
{
    key_slot *slots = NULL;
    size_t n_slots = 0, cap = 0;
    kiln_status st = KILN_OK;
    /* Every key some usable variant could serve, with its shapes. */
    for (size_t i = 0; i < n_variants && !st; i++) {
        if (!v[i].usable) continue;
        for (size_t s = 0; s < n_shapes; s++) {
            kiln_tuning_key k;
            key_of(&v[i], &shapes[s], &k);
            size_t at = 0;
            while (at < n_slots && kiln_tuning_key_compare(&slots[at].key, &k)) at++;
            if (at == n_slots) {
                key_slot *q = kiln_grow(slots, &cap, n_slots, sizeof *q, 16);
                if (!q) {
                    st = kiln_error_set(err, KILN_ERROR_OUT_OF_MEMORY, "out of memory");
                    break;
                }
                slots = q;
                slots[n_slots].key = k;
                slots[n_slots].shapes = calloc(n_shapes, 1);
                if (!slots[n_slots].shapes) {
                    st = kiln_error_set(err, KILN_ERROR_OUT_OF_MEMORY, "out of memory");
                    break;
                }
                n_slots++;
            }
            slots[at].shapes[s] = 1;
        }
    }
    for (size_t k = 0; k < n_slots && !st; k++) {
        long best = -1, second = -1;
        double best_score = 0, second_score = 0;
        for (size_t i = 0; i < n_variants; i++) {
            if (!v[i].usable) continue;
            double logsum = 0;
            int count = 0, qualifies = 1;
            for (size_t s = 0; s < n_shapes && qualifies; s++) {
                if (!slots[k].shapes[s]) continue;
                kiln_tuning_key vk;
                key_of(&v[i], &shapes[s], &vk);
                if (kiln_tuning_key_compare(&vk, &slots[k].key)) {
                    qualifies = 0;
                    break;
                }
                const kiln_tune_cell *c = &v[i].cells[s];
                if (c->state != KILN_TUNE_TIMED || !(c->m.median_ms > 0)) {
                    qualifies = 0;
                    break;
                }
                logsum += log(c->m.median_ms);
                count++;
            }
            if (!qualifies || !count) continue;
            double score = exp(logsum / count);
            /* Ties go to the name that sorts first, so reruns agree. */
            if (best < 0 || score < best_score ||
                (score == best_score && strcmp(v[i].name, v[best].name) < 0)) {
                second = best;
                second_score = best_score;
                best = (long)i;
                best_score = score;
            } else if (second < 0 || score < second_score ||
                       (score == second_score && strcmp(v[i].name, v[second].name) < 0)) {
                second = (long)i;
                second_score = score;
            }
        }
        if (best < 0) continue; /* no variant timed on every shape of the class */
        kiln_tuning_entry e;
        memset(&e, 0, sizeof e);
        e.key = slots[k].key;
        snprintf(e.kernel, sizeof e.kernel, "%s", v[best].name);
        snprintf(e.bundle_id, sizeof e.bundle_id, "%s", v[best].bundle_id);
        snprintf(e.cache_key, sizeof e.cache_key, "%s", v[best].cache_key);
        e.median_ms = best_score;
        if (second >= 0) {
            snprintf(e.runnerup, sizeof e.runnerup, "%s", v[second].name);
            e.runnerup_ms = second_score;
        }
        e.desc = (char *)v[best].desc_text;
        st = kiln_tuning_table_add(table, &e, err);
    }
    for (size_t k = 0; k < n_slots; k++) free(slots[k].shapes);
    free(slots);
    return st;
}

/* ------------------------------------------------------------------------ */
/* Plot                                                                     */
/* ------------------------------------------------------------------------ */

static void xml_text(kiln_strbuf *out, const char *s)
{
    for (; *s; s++) {
        switch (*s) {
        case '&': kiln_strbuf_puts(out, "&amp;"); break;
        case '<': kiln_strbuf_puts(out, "&lt;"); break;
        case '>': kiln_strbuf_puts(out, "&gt;"); break;
        case '"': kiln_strbuf_puts(out, "&quot;"); break;
        default:
            if ((unsigned char)*s >= 0x20) kiln_strbuf_append(out, s, 1);
        }
    }
}

/* Text widths: the plot is monospace, and a glyph is about 0.62 em wide.
 * Every box is sized from its text, so that no label runs into another. */
#define GLYPH_W(px) ((px) * 0.62)
static int text_w(const char *s, double px)
{
    size_t n = 0;
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) n += (*p & 0xc0) != 0x80;
    return (int)(GLYPH_W(px) * (double)n + 0.999);
}

/* One plot's layout and the facts each cell needs. */
typedef struct plot {
    const kiln_tune_entry *v;
    size_t n_v;
    const kiln_tune_shape *shapes;
    size_t n_shapes;
    size_t *rows;                /* variant index per row, grouped by config */
    int cell_w, cell_h, left, top, width, height, n_title;
} plot;

/* Rows: usable variants grouped by what they are timed as (op, types,
 * epilogue), the rest last; within a group, sweep order. */
static int row_before(const kiln_tune_entry *a, size_t ia, const kiln_tune_entry *b, size_t ib)
{
    if (a->usable != b->usable) return a->usable;
    if (a->usable) {
        if (a->cfg.op != b->cfg.op) return a->cfg.op < b->cfg.op;
        if (a->cfg.a_type != b->cfg.a_type) return a->cfg.a_type < b->cfg.a_type;
        if (a->cfg.b_type != b->cfg.b_type) return a->cfg.b_type < b->cfg.b_type;
        if (a->cfg.out_type != b->cfg.out_type) return a->cfg.out_type < b->cfg.out_type;
        int c = strcmp(a->cfg.sig, b->cfg.sig);
        if (c) return c < 0;
    }
    return ia < ib;
}

static int same_group(const kiln_tune_entry *a, const kiln_tune_entry *b)
{
    if (a->usable != b->usable) return 0;
    return !a->usable || kiln_tune_config_equal(&a->cfg, &b->cfg);
}

static double cell_tflops(const plot *p, size_t i, size_t s)
{
    const kiln_tune_cell *c = &p->v[i].cells[s];
    if (c->state != KILN_TUNE_TIMED || !(c->m.median_ms > 0)) return -1;
    return kiln_tune_shape_flops(&p->shapes[s]) / (c->m.median_ms * 1e9);
}

/* The best TFLOP/s on shape s among variants of i's tuning key. */
static double best_of_key(const plot *p, size_t i, size_t s)
{
    kiln_tuning_key ki, kj;
    key_of(&p->v[i], &p->shapes[s], &ki);
    double best = -1;
    for (size_t j = 0; j < p->n_v; j++) {
        if (!p->v[j].usable) continue;
        key_of(&p->v[j], &p->shapes[s], &kj);
        double tf = cell_tflops(p, j, s);
        if (!kiln_tuning_key_compare(&ki, &kj) && tf > best) best = tf;
    }
    return best;
}

/* 1 when table names variant i the winner of its key on shape s. */
static int is_winner(const plot *p, const kiln_tuning_table *table, size_t i, size_t s,
                     kiln_strbuf *key_text)
{
    if (!table || !p->v[i].usable || !p->v[i].bundle_id) return 0;
    kiln_tuning_key k;
    key_of(&p->v[i], &p->shapes[s], &k);
    const kiln_tuning_entry *e = kiln_tuning_lookup(table, &k);
    if (!e || strcmp(e->bundle_id, p->v[i].bundle_id)) return 0;
    kiln_tuning_key_format(&k, key_text);
    return 1;
}

/* White to deep blue by r in [0, 1]. */
static void blue(double r, char out[16])
{
    if (r < 0) r = 0;
    if (r > 1) r = 1;
    int R = (int)(247 - r * (247 - 8)), G = (int)(251 - r * (251 - 48)),
        B = (int)(255 - r * (255 - 107));
    snprintf(out, 16, "#%02x%02x%02x", R, G, B);
}

static const char SUBTITLE[] = "TFLOP/s (2·T·N·K per call) per variant and shape; outlined: "
                               "the tuning table's winner of its key";
static const char LEGEND[] = "grey: not timed (failed to compile, spills, or another arch); "
                             "orange: failed at run time or wrong result";

static void layout(plot *p, const char *title)
{
    p->cell_h = 22;
    p->cell_w = 72;
    for (size_t s = 0; s < p->n_shapes; s++) {
        char detail[96];
        snprintf(detail, sizeof detail, "G%d T/G%lld K%lld N%lld", p->shapes[s].groups,
                 (long long)p->shapes[s].tokens_per_group, (long long)p->shapes[s].k,
                 (long long)p->shapes[s].n);
        int w = text_w(p->shapes[s].name, 11) + 12;
        if (text_w(detail, 9) + 12 > w) w = text_w(detail, 9) + 12;
        if (w > p->cell_w) p->cell_w = w;
    }
    int longest = text_w("not timed", 11);
    for (size_t i = 0; i < p->n_v; i++)
        if (text_w(p->v[i].name, 11) > longest) longest = text_w(p->v[i].name, 11);
    p->left = longest + 24;
    p->n_title = 1;
    int title_w = 0, line = 0;
    for (const char *c = title; *c; c++) {
        if (*c == '\n') {
            p->n_title++;
            line = 0;
            continue;
        }
        line++;
        if ((int)(GLYPH_W(14) * line) > title_w) title_w = (int)(GLYPH_W(14) * line);
    }
    p->top = 20 + p->n_title * 18 + 60;
    p->width = p->left + (int)p->n_shapes * p->cell_w + 20;
    if (title_w + 30 > p->width) p->width = title_w + 30;
    if (text_w(LEGEND, 11) + 30 > p->width) p->width = text_w(LEGEND, 11) + 30;
    if (text_w(SUBTITLE, 11) + 30 > p->width) p->width = text_w(SUBTITLE, 11) + 30;
    size_t groups = 0;
    for (size_t r = 0; r < p->n_v; r++) groups += !r || !same_group(&p->v[p->rows[r]], &p->v[p->rows[r - 1]]);
    p->height = p->top + (int)(p->n_v + groups) * p->cell_h + 110;
}

static void header(const plot *p, const char *title, kiln_strbuf *out)
{
    kiln_strbuf_printf(out,
                       "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
                       "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" height=\"%d\" "
                       "viewBox=\"0 0 %d %d\" font-family=\"monospace\" font-size=\"11\">\n"
                       "<rect width=\"100%%\" height=\"100%%\" fill=\"white\"/>\n",
                       p->width, p->height, p->width, p->height);
    int y = 20;
    for (const char *c = title;; y += 18) {
        const char *nl = strchr(c, '\n');
        size_t len = nl ? (size_t)(nl - c) : strlen(c);
        char *line = strndup(c, len);
        kiln_strbuf_printf(out, "<text x=\"10\" y=\"%d\" font-size=\"14\" font-weight=\"bold\">", y);
        xml_text(out, line ? line : "");
        kiln_strbuf_puts(out, "</text>\n");
        free(line);
        if (!nl) break;
        c = nl + 1;
    }
    kiln_strbuf_printf(out, "<text x=\"10\" y=\"%d\">%s</text>\n", y + 18, SUBTITLE);
    for (size_t s = 0; s < p->n_shapes; s++) {
        int x = p->left + (int)s * p->cell_w + p->cell_w / 2;
        kiln_strbuf_printf(out, "<text x=\"%d\" y=\"%d\" text-anchor=\"middle\" "
                                "font-weight=\"bold\">", x, p->top - 26);
        xml_text(out, p->shapes[s].name);
        kiln_strbuf_printf(out, "</text>\n<text x=\"%d\" y=\"%d\" text-anchor=\"middle\" "
                                "font-size=\"9\">G%d T/G%lld K%lld N%lld</text>\n", x, p->top - 12,
                           p->shapes[s].groups, (long long)p->shapes[s].tokens_per_group,
                           (long long)p->shapes[s].k, (long long)p->shapes[s].n);
    }
}

static void cell(const plot *p, const kiln_tuning_table *table, size_t i, size_t s, int y,
                 kiln_strbuf *out)
{
    int x = p->left + (int)s * p->cell_w;
    const kiln_tune_cell *c = &p->v[i].cells[s];
    char label[64], colour[16];
    const char *fill = "#e0e0e0", *ink = "black";
    double tf = cell_tflops(p, i, s), best = tf > 0 ? best_of_key(p, i, s) : -1;
    if (tf > 0 && best > 0) {
        blue(tf / best, colour);
        fill = colour;
        if (tf / best > 0.55) ink = "white";
        snprintf(label, sizeof label, "%.1f", tf);
    } else if (c->state == KILN_TUNE_BAD) {
        fill = "#f4a582";
        snprintf(label, sizeof label, "failed");
    } else {
        snprintf(label, sizeof label, "%s", p->v[i].usable ? "—" : "n/a");
    }
    kiln_strbuf_printf(out, "<rect x=\"%d\" y=\"%d\" width=\"%d\" height=\"%d\" fill=\"%s\" "
                            "stroke=\"white\"/>\n", x, y, p->cell_w, p->cell_h, fill);
    kiln_strbuf key;
    kiln_strbuf_init(&key);
    if (is_winner(p, table, i, s, &key)) {
        kiln_strbuf_printf(out, "<rect class=\"winner\" x=\"%d\" y=\"%d\" width=\"%d\" "
                                "height=\"%d\" fill=\"none\" stroke=\"#d62728\" "
                                "stroke-width=\"2\" data-shape=\"", x + 1, y + 1, p->cell_w - 2,
                           p->cell_h - 2);
        xml_text(out, p->shapes[s].name);
        kiln_strbuf_puts(out, "\" data-kernel=\"");
        xml_text(out, p->v[i].name);
        kiln_strbuf_puts(out, "\" data-key=\"");
        xml_text(out, key.data ? key.data : "");
        kiln_strbuf_puts(out, "\"/>\n");
    }
    kiln_strbuf_free(&key);
    kiln_strbuf_printf(out, "<text x=\"%d\" y=\"%d\" text-anchor=\"middle\" fill=\"%s\">%s</text>\n",
                       x + p->cell_w / 2, y + p->cell_h / 2 + 4, ink, label);
}

/* The colour scale: ten steps from 0 to 100 % of the best of the key. */
static void scale(const plot *p, int y, kiln_strbuf *out)
{
    kiln_strbuf_printf(out, "<text x=\"10\" y=\"%d\">colour: TFLOP/s as a fraction of the best "
                            "variant of the same tuning key on that shape</text>\n", y);
    y += 8;
    for (int k = 0; k <= 10; k++) {
        char colour[16];
        blue(k / 10.0, colour);
        kiln_strbuf_printf(out, "<rect x=\"%d\" y=\"%d\" width=\"30\" height=\"14\" fill=\"%s\" "
                                "stroke=\"#999\"/>\n", 10 + k * 30, y, colour);
        if (k % 5 == 0)
            kiln_strbuf_printf(out, "<text x=\"%d\" y=\"%d\" text-anchor=\"middle\">%d%%</text>\n",
                               25 + k * 30, y + 28, k * 10);
    }
    kiln_strbuf_printf(out, "<text x=\"10\" y=\"%d\">%s</text>\n", y + 50, LEGEND);
    (void)p;
}

void kiln_tune_plot_svg(const kiln_tune_entry *v, size_t n_variants,
                        const kiln_tune_shape *shapes, size_t n_shapes,
                        const kiln_tuning_table *table, const char *title, kiln_strbuf *out)
{
    plot p = {v, n_variants, shapes, n_shapes, NULL, 0, 0, 0, 0, 0, 0, 0};
    p.rows = calloc(n_variants ? n_variants : 1, sizeof *p.rows);
    if (!p.rows) {
        out->oom = 1;
        return;
    }
    for (size_t i = 0; i < n_variants; i++) { /* insertion sort: stable, n is small */
        size_t at = i;
        while (at > 0 && row_before(&v[i], i, &v[p.rows[at - 1]], p.rows[at - 1])) {
            p.rows[at] = p.rows[at - 1];
            at--;
        }
        p.rows[at] = i;
    }
    if (!title) title = "kiln tune";
    layout(&p, title);
    header(&p, title, out);
    int y = p.top;
    for (size_t r = 0; r < n_variants; r++) {
        size_t i = p.rows[r];
        if (!r || !same_group(&v[i], &v[p.rows[r - 1]])) {
            /* A group's band: what its rows are timed as. */
            kiln_strbuf_printf(out, "<text x=\"10\" y=\"%d\" font-style=\"italic\">", y + 15);
            if (v[i].usable)
                kiln_strbuf_printf(out, "%s %s %s %s %s", kiln_op_name(v[i].cfg.op),
                                   kiln_dtype_name(v[i].cfg.a_type),
                                   kiln_dtype_name(v[i].cfg.b_type),
                                   kiln_dtype_name(v[i].cfg.out_type), v[i].cfg.sig);
            else
                kiln_strbuf_puts(out, "not timed");
            kiln_strbuf_puts(out, "</text>\n");
            y += p.cell_h;
        }
        kiln_strbuf_printf(out, "<text x=\"%d\" y=\"%d\" text-anchor=\"end\">", p.left - 8,
                           y + p.cell_h / 2 + 4);
        xml_text(out, v[i].name);
        kiln_strbuf_puts(out, "</text>\n");
        for (size_t s = 0; s < n_shapes; s++) cell(&p, table, i, s, y, out);
        y += p.cell_h;
    }
    scale(&p, y + 24, out);
    kiln_strbuf_puts(out, "</svg>\n");
    free(p.rows);
}
