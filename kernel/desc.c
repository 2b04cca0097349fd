/* kernel_desc.c — names of types and ops, and the canonical text form of a
 * kernel description (cache keys, catalogs, bundles, cache entries). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernel_desc.h"

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

static const char *weights_name(kiln_weights_mode w)
{
    return w == KILN_WEIGHTS_CONTIGUOUS ? "contiguous" : "any";
}

void kiln_desc_format(const kiln_kernel_desc *d, const kiln_launch_desc *l, kiln_strbuf *out)
{
    kiln_strbuf_printf(out,
                       "name=%s op=%s a=%s b=%s out=%s accum=%s tile=%dx%dx%d stages=%d "
                       "cluster=%dx%d warpgroups=%d family=%s weights=%s",
                       d->name, kiln_op_name(d->op), kiln_dtype_name(d->a_type),
                       kiln_dtype_name(d->b_type), kiln_dtype_name(d->out_type),
                       kiln_dtype_name(d->accum_type), d->tile_m, d->tile_n, d->tile_k, d->stages,
                       d->cluster_m, d->cluster_n, d->warpgroups, d->family,
                       weights_name(d->weights));
    kiln_strbuf_printf(out, " bias=%s row_scale=%d scale_bias=%d alpha=%s beta=%d",
                       d->epilogue.bias == KILN_BIAS_PER_GROUP ? "per_group" : "none",
                       d->epilogue.row_scale, d->epilogue.scale_bias,
                       d->epilogue.alpha == KILN_ALPHA_PER_GROUP ? "per_group" : "scalar",
                       d->epilogue.beta);
    kiln_strbuf_printf(out, " wgrad_output=%s accumulate=%d dbias=%d split=%d raster=%s schedule=%s",
                       d->wgrad_output == KILN_WGRAD_DISCRETE ? "discrete" : "dense",
                       d->accumulate, d->dbias, d->split, d->raster, d->schedule);
    if (l) {
        kiln_strbuf_printf(out, " entry=%s threads=%d smem=%d persistent=%d ctas_per_sm=%d "
                                "launch_cluster=%dx%d",
                           l->entry, l->threads, l->smem_bytes, l->persistent, l->ctas_per_sm,
                           l->cluster_m, l->cluster_n);
        static const char *const which[3] = {"a", "b", "d"};
        for (int i = 0; i < 3; i++)
            kiln_strbuf_printf(out, " tmap_%s=%d:%d:%d:%d", which[i], l->tmap[i].used,
                               l->tmap[i].box_inner, l->tmap[i].box_outer, l->tmap[i].swizzle);
    }
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

static int set_field(kiln_kernel_desc *d, kiln_launch_desc *l, const char *k, const char *v)
{
    if (!strcmp(k, "name")) return copy_str(d->name, sizeof d->name, v);
    if (!strcmp(k, "op")) return kiln_op_parse(v, &d->op);
    if (!strcmp(k, "a")) return kiln_dtype_parse(v, &d->a_type);
    if (!strcmp(k, "b")) return kiln_dtype_parse(v, &d->b_type);
    if (!strcmp(k, "out")) return kiln_dtype_parse(v, &d->out_type);
    if (!strcmp(k, "accum")) return kiln_dtype_parse(v, &d->accum_type);
    if (!strcmp(k, "tile"))
        return sscanf(v, "%dx%dx%d", &d->tile_m, &d->tile_n, &d->tile_k) == 3;
    if (!strcmp(k, "stages")) return parse_int(v, &d->stages);
    if (!strcmp(k, "cluster")) return sscanf(v, "%dx%d", &d->cluster_m, &d->cluster_n) == 2;
    if (!strcmp(k, "warpgroups")) return parse_int(v, &d->warpgroups);
    if (!strcmp(k, "family")) return copy_str(d->family, sizeof d->family, v);
    if (!strcmp(k, "weights")) {
        if (!strcmp(v, "any")) d->weights = KILN_WEIGHTS_ANY;
        else if (!strcmp(v, "contiguous")) d->weights = KILN_WEIGHTS_CONTIGUOUS;
        else return 0;
        return 1;
    }
    if (!strcmp(k, "bias")) {
        if (!strcmp(v, "none")) d->epilogue.bias = KILN_BIAS_NONE;
        else if (!strcmp(v, "per_group")) d->epilogue.bias = KILN_BIAS_PER_GROUP;
        else return 0;
        return 1;
    }
    if (!strcmp(k, "row_scale")) return parse_int(v, &d->epilogue.row_scale);
    if (!strcmp(k, "scale_bias")) return parse_int(v, &d->epilogue.scale_bias);
    if (!strcmp(k, "alpha")) {
        if (!strcmp(v, "scalar")) d->epilogue.alpha = KILN_ALPHA_SCALAR;
        else if (!strcmp(v, "per_group")) d->epilogue.alpha = KILN_ALPHA_PER_GROUP;
        else return 0;
        return 1;
    }
    if (!strcmp(k, "beta")) return parse_int(v, &d->epilogue.beta);
    if (!strcmp(k, "wgrad_output")) {
        if (!strcmp(v, "dense")) d->wgrad_output = KILN_WGRAD_DENSE;
        else if (!strcmp(v, "discrete")) d->wgrad_output = KILN_WGRAD_DISCRETE;
        else return 0;
        return 1;
    }
    if (!strcmp(k, "accumulate")) return parse_int(v, &d->accumulate);
    if (!strcmp(k, "dbias")) return parse_int(v, &d->dbias);
    if (!strcmp(k, "split")) return parse_int(v, &d->split);
    if (!strcmp(k, "raster")) return copy_str(d->raster, sizeof d->raster, v);
    if (!strcmp(k, "schedule")) return copy_str(d->schedule, sizeof d->schedule, v);
    if (!l) return -1;
    if (!strcmp(k, "entry")) return copy_str(l->entry, sizeof l->entry, v);
    if (!strcmp(k, "threads")) return parse_int(v, &l->threads);
    if (!strcmp(k, "smem")) return parse_int(v, &l->smem_bytes);
    if (!strcmp(k, "persistent")) return parse_int(v, &l->persistent);
    if (!strcmp(k, "ctas_per_sm")) return parse_int(v, &l->ctas_per_sm);
    if (!strcmp(k, "launch_cluster")) return sscanf(v, "%dx%d", &l->cluster_m, &l->cluster_n) == 2;
    if (!strncmp(k, "tmap_", 5) && k[5] && !k[6]) {
        int i = k[5] == 'a' ? 0 : k[5] == 'b' ? 1 : k[5] == 'd' ? 2 : -1;
        if (i < 0) return -1;
        kiln_tmap_desc *t = &l->tmap[i];
        return sscanf(v, "%d:%d:%d:%d", &t->used, &t->box_inner, &t->box_outer, &t->swizzle) == 4;
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
        const char *end = strchr(p, ' ');
        size_t n = end ? (size_t)(end - p) : strlen(p);
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
