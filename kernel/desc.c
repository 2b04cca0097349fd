/* SPDX-License-Identifier: Apache-2.0 */
/* kernel_desc.c — names of types and ops, and the canonical text form of a
 * kernel description (cache keys, catalogs, bundles, cache entries). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "knobs.h"

static const char *const dtype_names[] = {"bf16", "fp16", "f32", "e4m3", "e5m2"};
static const char *const op_names[] = {"fprop", "dgrad", "wgrad"};

const char *kiln_dtype_name(kiln_dtype t)
{
    return (unsigned)t < 5 ? dtype_names[t] : "?";
}

const char *kiln_op_name(kiln_op op) { return (unsigned)op < 3 ? op_names[op] : "?"; }

int kiln_dtype_parse(const char *s, kiln_dtype *out)
{
    for (int i = 0; i < 5; i++)
        if (strcmp(s, dtype_names[i]) == 0) {
            *out = (kiln_dtype)i;
            return 1;
        }
    return 0;
}

int kiln_op_parse(const char *s, kiln_op *out)
{
    for (int i = 0; i < 3; i++)
        if (strcmp(s, op_names[i]) == 0) {
            *out = (kiln_op)i;
            return 1;
        }
    return 0;
}

int kiln_dtype_size(kiln_dtype t)
{
    switch (t) {
    case KILN_DTYPE_BF16:
    case KILN_DTYPE_F16: return 2;
    case KILN_DTYPE_F32: return 4;
    case KILN_DTYPE_E4M3:
    case KILN_DTYPE_E5M2: return 1;
    }
    return 0;
}

void kiln_desc_init(kiln_kernel_desc *d)
{
    memset(d, 0, sizeof *d);
    d->op = KILN_OP_FPROP;
    snprintf(d->archs[0], KILN_ARCH_MAX, "sm_90a");
    d->n_archs = 1;
    d->a_type = d->b_type = d->out_type = KILN_DTYPE_BF16;
    d->accum_type = KILN_DTYPE_F32;
    d->tile_m = 128;
    d->tile_n = 128;
    d->tile_k = 64;
    d->stages = 4;
    d->cluster_m = d->cluster_n = 1;
    d->k_cluster = 1;
    d->warpgroups = 1;
    snprintf(d->family, sizeof d->family, "sm90");
    /* The default family, sm90, reads fprop/dgrad weights through one tensor
     * map (the spec parser picks `any` for family simple and for wgrad). */
    d->weights = KILN_WEIGHTS_CONTIGUOUS;
    d->wgrad_output = KILN_WGRAD_DENSE;
    d->split = 1;
    snprintf(d->raster, sizeof d->raster, "group");
    snprintf(d->schedule, sizeof d->schedule, "auto");
}

/* Launch fields (reported by the template, not written in specs), in text
 * order after the kernel's knobs. */
typedef struct launch_field {
    const char *text;
    size_t offset;
} launch_field;

#define L(member) offsetof(kiln_launch_desc, member)
static const launch_field launch_ints[] = {
    {"threads", L(threads)},         {"smem", L(smem_bytes)},
    {"persistent", L(persistent)},   {"ctas_per_sm", L(ctas_per_sm)},
};
static const launch_field launch_limits[] = {
    {"max_groups", L(max_groups)},
    {"scale_bias_switch", L(scale_bias_switch)},
    {"preference", L(preference)},
};
#undef L
#define N_OF(a) (sizeof(a) / sizeof((a)[0]))

static int *launch_int(kiln_launch_desc *l, const launch_field *f)
{
    return (int *)(void *)((char *)l + f->offset);
}

static int launch_get(const kiln_launch_desc *l, const launch_field *f)
{
    int v;
    memcpy(&v, (const char *)l + f->offset, sizeof v);
    return v;
}

void kiln_desc_format(const kiln_kernel_desc *d, const kiln_launch_desc *l, kiln_strbuf *out)
{
    const char *prev = NULL;
    for (const kiln_knob *k = kiln_knobs; k->key; k++) {
        if (!k->text) continue;
        if (k->kind == KILN_KNOB_BOOL && k->text_value && !kiln_knob_get(k, d)) continue;
        if (k->kind == KILN_KNOB_INT && k->text_value && kiln_knob_get(k, d) == 1) continue;
        char v[KILN_NAME_MAX];
        kiln_knob_value_text(k, d, v, sizeof v);
        if (prev && !strcmp(prev, k->text)) kiln_strbuf_printf(out, "x%s", v);
        else kiln_strbuf_printf(out, "%s%s=%s", prev ? " " : "", k->text, v);
        prev = k->text;
    }
    if (!l) return;
    kiln_strbuf_printf(out, " entry=%s", l->entry);
    for (size_t i = 0; i < N_OF(launch_ints); i++)
        kiln_strbuf_printf(out, " %s=%d", launch_ints[i].text, launch_get(l, &launch_ints[i]));
    kiln_strbuf_printf(out, " launch_cluster=%dx%d", l->cluster_m, l->cluster_n);
    static const char *const which[3] = {"a", "b", "d"};
    for (int i = 0; i < 3; i++) {
        kiln_strbuf_printf(out, " tmap_%s=%d:%d:%d:%d", which[i], l->tmap[i].used,
                           l->tmap[i].box_inner, l->tmap[i].box_outer, l->tmap[i].swizzle);
        /* written only when set: every other kernel's text stays as it was */
        if (l->tmap[i].chunks) kiln_strbuf_printf(out, ":%d", l->tmap[i].chunks);
    }
    for (size_t i = 0; i < N_OF(launch_limits); i++)
        kiln_strbuf_printf(out, " %s=%d", launch_limits[i].text, launch_get(l, &launch_limits[i]));
}

/* Copies a value into a fixed buffer, refusing values that do not fit. */
static int copy_str(char *dst, size_t size, const char *v)
{
    size_t n = strlen(v);
    if (n >= size) return 0;
    memcpy(dst, v, n + 1);
    return 1;
}

static int parse_int(const char *v, int *out)
{
    char *end;
    long x = strtol(v, &end, 10);
    if (end == v || *end != '\0' || x < -2147483647L || x > 2147483647L) return 0;
    *out = (int)x;
    return 1;
}

/* A knob item: one knob, or a run of consecutive knobs sharing the text
 * key, their values joined by 'x' ("tile=128x128x64"). */
static int set_knobs(kiln_kernel_desc *d, const char *k, const char *v)
{
    const kiln_knob *first = kiln_knobs;
    while (first->key && !(first->text && !strcmp(first->text, k))) first++;
    if (!first->key) return -1;
    char buf[KILN_NAME_MAX];
    if (!copy_str(buf, sizeof buf, v)) return 0;
    char *part = buf;
    for (const kiln_knob *x = first; x->key && x->text && !strcmp(x->text, k); x++) {
        int last = !(x[1].key && x[1].text && !strcmp(x[1].text, k));
        char *sep = last ? NULL : strchr(part, 'x');
        if (!last && !sep) return 0;
        if (sep) *sep = '\0';
        if (!kiln_knob_parse_value(x, d, part)) return 0;
        if (sep) part = sep + 1;
    }
    return 1;
}

static int set_field(kiln_kernel_desc *d, kiln_launch_desc *l, const char *k, const char *v)
{
    int r = set_knobs(d, k, v);
    if (r != -1 || !l) return r;
    if (!strcmp(k, "entry")) return copy_str(l->entry, sizeof l->entry, v);
    for (size_t i = 0; i < N_OF(launch_ints); i++)
        if (!strcmp(k, launch_ints[i].text)) return parse_int(v, launch_int(l, &launch_ints[i]));
    for (size_t i = 0; i < N_OF(launch_limits); i++)
        if (!strcmp(k, launch_limits[i].text))
            return parse_int(v, launch_int(l, &launch_limits[i]));
    if (!strcmp(k, "launch_cluster")) return sscanf(v, "%dx%d", &l->cluster_m, &l->cluster_n) == 2;
    if (!strncmp(k, "tmap_", 5) && k[5] && !k[6]) {
        int i = k[5] == 'a' ? 0 : k[5] == 'b' ? 1 : k[5] == 'd' ? 2 : -1;
        if (i < 0) return -1;
        kiln_tmap_desc *t = &l->tmap[i];
        int n = 0, m = 0;
        t->chunks = 0;
        if (sscanf(v, "%d:%d:%d:%d%n", &t->used, &t->box_inner, &t->box_outer, &t->swizzle, &n) != 4)
            return 0;
        if (!v[n]) return 1;
        return sscanf(v + n, ":%d%n", &t->chunks, &m) == 1 && !v[n + m] && t->chunks > 0;
    }
    return -1;
}

int kiln_desc_parse(const char *text, kiln_kernel_desc *d, kiln_launch_desc *l, kiln_error *err)
{
    kiln_desc_init(d);
    if (l) memset(l, 0, sizeof *l);
    const char *p = text;
    while (*p) {
        while (*p == ' ') p++;
        if (!*p) break;
        /* By hand, not strchr: under the sanitizers' strict string checks
         * each strchr scans the rest of the line (quadratic in its items). */
        size_t n = 0;
        while (p[n] && p[n] != ' ') n++;
        char item[256];
        if (n >= sizeof item) {
            kiln_error_set(err, KILN_ERROR_INTERNAL, "kernel description: item too long");
            return 0;
        }
        memcpy(item, p, n);
        item[n] = '\0';
        p += n;
        char *eq = strchr(item, '=');
        if (!eq) {
            kiln_error_set(err, KILN_ERROR_INTERNAL, "kernel description: '%s' has no '='", item);
            return 0;
        }
        *eq = '\0';
        int r = set_field(d, l, item, eq + 1);
        if (r == -1) {
            kiln_error_set(err, KILN_ERROR_INTERNAL, "kernel description: unknown key '%s'", item);
            return 0;
        }
        if (r == 0) {
            kiln_error_set(err, KILN_ERROR_INTERNAL, "kernel description: bad value '%s' for '%s'",
                           eq + 1, item);
            return 0;
        }
    }
    return 1;
}
