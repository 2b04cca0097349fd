/* SPDX-License-Identifier: Apache-2.0 */
/* knobs.c — the table of spec knobs and the accessors every derivation
 * (schema, text, Lua, sweeps, signatures) goes through. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "knobs.h"

static const kiln_knob_choice op_choices[] = {
    {"fprop", KILN_OP_FPROP}, {"dgrad", KILN_OP_DGRAD}, {"wgrad", KILN_OP_WGRAD}, {NULL, 0}};
static const kiln_knob_choice arch_choices[] = {{"sm_90a", 0}, {"sm_80", 1}, {"sm_100a", 2}, {NULL, 0}};
static const kiln_knob_choice in_choices[] = {{"bf16", KILN_DTYPE_BF16},
                                              {"fp16", KILN_DTYPE_F16},
                                              {"e4m3", KILN_DTYPE_E4M3},
                                              {"e5m2", KILN_DTYPE_E5M2},
                                              {NULL, 0}};
static const kiln_knob_choice out_choices[] = {
    {"bf16", KILN_DTYPE_BF16}, {"fp16", KILN_DTYPE_F16}, {"f32", KILN_DTYPE_F32}, {NULL, 0}};
static const kiln_knob_choice accum_choices[] = {{"f32", KILN_DTYPE_F32}, {NULL, 0}};
static const kiln_knob_choice family_choices[] = {{"sm90", 0}, {"simple", 1}, {NULL, 0}};
static const kiln_knob_choice weights_choices[] = {
    {"any", KILN_WEIGHTS_ANY}, {"contiguous", KILN_WEIGHTS_CONTIGUOUS}, {NULL, 0}};
static const kiln_knob_choice bias_choices[] = {
    {"none", KILN_BIAS_NONE}, {"per_group", KILN_BIAS_PER_GROUP}, {NULL, 0}};
static const kiln_knob_choice scale_choices[] = {{"none", 0}, {"per_row", 1}, {NULL, 0}};
static const kiln_knob_choice alpha_choices[] = {
    {"scalar", KILN_ALPHA_SCALAR}, {"per_group", KILN_ALPHA_PER_GROUP}, {NULL, 0}};
static const kiln_knob_choice output_choices[] = {
    {"dense", KILN_WGRAD_DENSE}, {"discrete", KILN_WGRAD_DISCRETE}, {NULL, 0}};
static const kiln_knob_choice recipe_choices[] = {{"none", KILN_FP8_NONE},
                                                  {"tensor", KILN_FP8_TENSOR},
                                                  {"row", KILN_FP8_ROW},
                                                  {"block", KILN_FP8_BLOCK},
                                                  {NULL, 0}};
static const kiln_knob_choice fp8_accum_choices[] = {{"fast", 0}, {"promote", 1}, {NULL, 0}};
static const kiln_knob_choice raster_choices[] = {{"group", 0}, {"m", 1}, {"n", 2}, {NULL, 0}};
static const kiln_knob_choice schedule_choices[] = {
    {"auto", 0}, {"cooperative", 1}, {"pingpong", 2}, {NULL, 0}};

#define M(member) offsetof(kiln_kernel_desc, member), sizeof(((kiln_kernel_desc *)0)->member)
#define NONE 0, 0

/* Order matters: it is the order of the text form (which the shipped tuning
 * table and cache keys hold), of name fragments of swept axes, of "allowed:"
 * lists in messages and of signature terms. */
const kiln_knob kiln_knobs[] = {
    /* key               kind               member          choices           text          tv frag     lo hi sig */
    {"kernel",           KILN_KNOB_NAME,    M(name),        NULL,             "name",       0, NULL,    0, 0, 0},
    {"op",               KILN_KNOB_ENUM,    M(op),          op_choices,       "op",         0, NULL,    0, 0, 0},
    {"arch",             KILN_KNOB_ARCHS,   NONE,           arch_choices,            NULL,         0, NULL,    0, 0, 0},
    {"types",            KILN_KNOB_MAP,     NONE,           NULL,             NULL,         0, NULL,    0, 0, 0},
    {"types.a",          KILN_KNOB_ENUM,    M(a_type),      in_choices,       "a",          0, "a",     0, 0, 0},
    {"types.b",          KILN_KNOB_ENUM,    M(b_type),      in_choices,       "b",          0, "b",     0, 0, 0},
    {"types.out",        KILN_KNOB_ENUM,    M(out_type),    out_choices,      "out",        0, "o",     0, 0, 0},
    {"types.accum",      KILN_KNOB_ENUM,    M(accum_type),  accum_choices,    "accum",      0, NULL,    0, 0, 0},
    {"tile",             KILN_KNOB_MAP,     NONE,           NULL,             NULL,         0, "",      0, 0, 0},
    {"tile.m",           KILN_KNOB_INT,     M(tile_m),      NULL,             "tile",       0, "m",     1, 1024, 0},
    {"tile.n",           KILN_KNOB_INT,     M(tile_n),      NULL,             "tile",       0, "n",     1, 1024, 0},
    {"tile.k",           KILN_KNOB_INT,     M(tile_k),      NULL,             "tile",       0, "k",     1, 1024, 0},
    {"stages",           KILN_KNOB_INT,     M(stages),      NULL,             "stages",     0, "s",     1, 8, 0},
    {"cluster",          KILN_KNOB_MAP,     NONE,           NULL,             NULL,         0, "c",     0, 0, 0},
    {"cluster.m",        KILN_KNOB_INT,     M(cluster_m),   NULL,             "cluster",    0, "cm",    1, 2, 0},
    {"cluster.n",        KILN_KNOB_INT,     M(cluster_n),   NULL,             "cluster",    0, "cn",    1, 2, 0},
    {"k_cluster",        KILN_KNOB_INT,     M(k_cluster),   NULL,             "k_cluster",  1, "kc",    1, 8, 0},
    {"swap_ab",          KILN_KNOB_BOOL,    M(swap_ab),     NULL,             "swap_ab",    1, "sw",    0, 1, 0},
    {"warpgroups",       KILN_KNOB_INT,     M(warpgroups),  NULL,             "warpgroups", 0, "wg",    1, 2, 0},
    {"family",           KILN_KNOB_STRING,  M(family),      family_choices,   "family",     0, "",      0, 0, 0},
    {"weights",          KILN_KNOB_ENUM,    M(weights),     weights_choices,  "weights",    0, "w",     0, 0, KILN_KNOB_SIG_FWD},
    {"epilogue",         KILN_KNOB_MAP,     NONE,           NULL,             NULL,         0, NULL,    0, 0, 0},
    {"epilogue.bias",    KILN_KNOB_ENUM,    M(epilogue.bias), bias_choices,   "bias",       0, "bias_", 0, 0, KILN_KNOB_SIG_FWD},
    {"epilogue.scale",   KILN_KNOB_ENUM,    M(epilogue.row_scale), scale_choices, "row_scale", 1, "scale_", 0, 0, KILN_KNOB_SIG_FWD},
    {"epilogue.scale_bias", KILN_KNOB_BOOL, M(epilogue.scale_bias), NULL,     "scale_bias", 0, "sb",    0, 1, KILN_KNOB_SIG_FWD},
    {"epilogue.alpha",   KILN_KNOB_ENUM,    M(epilogue.alpha), alpha_choices, "alpha",      0, "alpha_", 0, 0, KILN_KNOB_SIG_FWD},
    {"epilogue.beta",    KILN_KNOB_BOOL,    M(epilogue.beta), NULL,           "beta",       0, "beta",  0, 1, KILN_KNOB_SIG_FWD},
    {"wgrad",            KILN_KNOB_MAP,     NONE,           NULL,             NULL,         0, NULL,    0, 0, 0},
    {"wgrad.output",     KILN_KNOB_ENUM,    M(wgrad_output), output_choices,  "wgrad_output", 0, "",    0, 0, KILN_KNOB_SIG_WGRAD},
    {"wgrad.accumulate", KILN_KNOB_BOOL,    M(accumulate),  NULL,             "accumulate", 0, "acc",   0, 1, KILN_KNOB_SIG_WGRAD},
    {"wgrad.dbias",      KILN_KNOB_BOOL,    M(dbias),       NULL,             "dbias",      0, "dbias", 0, 1, KILN_KNOB_SIG_WGRAD},
    {"wgrad.split",      KILN_KNOB_INT,     M(split),       NULL,             "split",      0, "sp",    1, 16, 0},
    {"wgrad.rows",       KILN_KNOB_BOOL,    M(rows),        NULL,             "rows",       1, "rows",  0, 1, 0},
    {"fp8",              KILN_KNOB_MAP,     NONE,           NULL,             NULL,         0, NULL,    0, 0, 0},
    {"fp8.recipe",       KILN_KNOB_ENUM,    M(fp8_recipe),  recipe_choices,   "fp8_recipe", 0, "f8",    0, 0, KILN_KNOB_SIG_FWD},
    {"fp8.accumulate",   KILN_KNOB_ENUM,    M(fp8_promote), fp8_accum_choices, "fp8_accumulate", 0, "",  0, 0, KILN_KNOB_SIG_FWD},
    {"raster",           KILN_KNOB_STRING,  M(raster),      raster_choices,   "raster",     0, "r",     0, 0, 0},
    {"schedule",         KILN_KNOB_STRING,  M(schedule),    schedule_choices, "schedule",   0, "",      0, 0, 0},
    {"sweep",            KILN_KNOB_SWEEP,   NONE,           NULL,             NULL,         0, NULL,    0, 0, 0},
    {"constraints",      KILN_KNOB_CONSTRAINTS, NONE,       NULL,             NULL,         0, NULL,    0, 0, 0},
    {NULL,               0,                 NONE,           NULL,             NULL,         0, NULL,    0, 0, 0},
};

#undef M
#undef NONE

_Static_assert(sizeof kiln_knobs / sizeof kiln_knobs[0] <= KILN_KNOB_COUNT_MAX,
               "raise KILN_KNOB_COUNT_MAX");
/* ENUM members are read and written as int. */
_Static_assert(sizeof(kiln_op) == sizeof(int) && sizeof(kiln_dtype) == sizeof(int) &&
                   sizeof(kiln_bias_mode) == sizeof(int) && sizeof(kiln_alpha_mode) == sizeof(int) &&
                   sizeof(kiln_weights_mode) == sizeof(int) &&
                   sizeof(kiln_wgrad_output) == sizeof(int),
               "enum members must be int-sized");

size_t kiln_kernel_name_bad_at(const char *s)
{
    /* Spelled out rather than with <ctype.h>: the locale must not widen it. */
    size_t i = 0;
    for (; s[i]; i++) {
        char c = s[i];
        int alpha = (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || c == '_';
        if (!alpha && !(i > 0 && c >= '0' && c <= '9')) break;
    }
    return i;
}

int kiln_kernel_name_ok(const char *s) { return s[0] && !s[kiln_kernel_name_bad_at(s)]; }

const kiln_knob *kiln_knob_find(const char *key)
{
    for (const kiln_knob *k = kiln_knobs; k->key; k++)
        if (!strcmp(k->key, key)) return k;
    return NULL;
}

int kiln_knob_has_value(const kiln_knob *k)
{
    return k->kind == KILN_KNOB_INT || k->kind == KILN_KNOB_BOOL || k->kind == KILN_KNOB_ENUM ||
           k->kind == KILN_KNOB_STRING || k->kind == KILN_KNOB_NAME;
}

char *kiln_knob_str(const kiln_knob *k, kiln_kernel_desc *d) { return (char *)d + k->offset; }

int kiln_knob_get(const kiln_knob *k, const kiln_kernel_desc *d)
{
    const char *p = (const char *)d + k->offset;
    if (k->kind == KILN_KNOB_STRING) {
        for (int i = 0; k->choices[i].name; i++)
            if (!strcmp(p, k->choices[i].name)) return i;
        return -1;
    }
    int v;
    memcpy(&v, p, sizeof v);
    return v;
}

void kiln_knob_set(const kiln_knob *k, kiln_kernel_desc *d, int v)
{
    char *p = (char *)d + k->offset;
    if (k->kind == KILN_KNOB_STRING) {
        for (int i = 0; k->choices[i].name; i++)
            if (i == v) snprintf(p, k->size, "%s", k->choices[i].name);
        return;
    }
    memcpy(p, &v, sizeof v);
}

const char *kiln_knob_spelling(const kiln_knob *k, const kiln_kernel_desc *d)
{
    if (k->kind == KILN_KNOB_STRING || k->kind == KILN_KNOB_NAME)
        return (const char *)d + k->offset;
    int v = kiln_knob_get(k, d);
    for (int i = 0; k->choices && k->choices[i].name; i++)
        if (k->choices[i].value == v) return k->choices[i].name;
    return "?";
}

int kiln_knob_set_spelling(const kiln_knob *k, kiln_kernel_desc *d, const char *s)
{
    for (int i = 0; k->choices && k->choices[i].name; i++)
        if (!strcmp(s, k->choices[i].name)) {
            kiln_knob_set(k, d, k->kind == KILN_KNOB_STRING ? i : k->choices[i].value);
            return 1;
        }
    return 0;
}

void kiln_knob_value_text(const kiln_knob *k, const kiln_kernel_desc *d, char *buf, size_t size)
{
    if (k->kind == KILN_KNOB_INT || k->kind == KILN_KNOB_BOOL ||
        (k->kind == KILN_KNOB_ENUM && k->text_value))
        snprintf(buf, size, "%d", kiln_knob_get(k, d));
    else
        snprintf(buf, size, "%s", kiln_knob_spelling(k, d));
}

static int parse_int(const char *v, int *out)
{
    char *end;
    long x = strtol(v, &end, 10);
    if (end == v || *end != '\0' || x < -2147483647L || x > 2147483647L) return 0;
    *out = (int)x;
    return 1;
}

int kiln_knob_parse_value(const kiln_knob *k, kiln_kernel_desc *d, const char *v)
{
    int x;
    switch (k->kind) {
    case KILN_KNOB_INT:
    case KILN_KNOB_BOOL:
        if (!parse_int(v, &x)) return 0;
        kiln_knob_set(k, d, x);
        return 1;
    case KILN_KNOB_ENUM:
        if (!k->text_value) return kiln_knob_set_spelling(k, d, v);
        for (int i = 0; k->choices[i].name; i++)
            if (parse_int(v, &x) && x == k->choices[i].value) {
                kiln_knob_set(k, d, x);
                return 1;
            }
        return 0;
    case KILN_KNOB_STRING:
    case KILN_KNOB_NAME: {
        /* Any text: descriptions made outside the spec language (the
         * runtime's cuBLASLt entries) name families of their own. */
        size_t n = strlen(v);
        if (n >= k->size) return 0;
        memcpy(kiln_knob_str(k, d), v, n + 1);
        return 1;
    }
    default: return 0;
    }
}

void kiln_knob_fragment(const kiln_knob *k, const kiln_kernel_desc *d, char *buf, size_t size)
{
    char v[64];
    buf[0] = '\0';
    if (k->kind != KILN_KNOB_MAP) {
        if (k->kind == KILN_KNOB_INT || k->kind == KILN_KNOB_BOOL)
            snprintf(v, sizeof v, "%d", kiln_knob_get(k, d));
        else
            snprintf(v, sizeof v, "%s", kiln_knob_spelling(k, d));
        snprintf(buf, size, "%s%s", k->frag ? k->frag : "", v);
        return;
    }
    /* A map: its children's fragments ("m128_n128_k64"), or the prefix and
     * the children's values ("c1x2"). */
    size_t plen = strlen(k->key), used = 0;
    int first = 1;
    if (*k->frag) used = (size_t)snprintf(buf, size, "%s", k->frag);
    for (const kiln_knob *c = k + 1; c->key && !strncmp(c->key, k->key, plen) &&
                                     c->key[plen] == '.';
         c++) {
        if (*k->frag) kiln_knob_value_text(c, d, v, sizeof v);
        else kiln_knob_fragment(c, d, v, sizeof v);
        const char *sep = first ? "" : *k->frag ? "x" : "_";
        if (used < size) used += (size_t)snprintf(buf + used, size - used, "%s%s", sep, v);
        first = 0;
    }
}
