/* SPDX-License-Identifier: Apache-2.0 */
/* test_gpu_quant.c — kiln_quantize, every kind and type pair, against a CPU
 * reference: exact scale bits and exact fp8 bytes (the arithmetic of
 * templates/quant.cu's header: s = amax/FMAX, inv = min(FMAX/amax,
 * FLT_MAX), q = RNE_satfinite(x * inv), s = inv = 1 for amax 0).
 *
 * The data: per scaled set (row, 1x128 piece, 128x128 block, group) one of
 *   zeros (+0), negative zeros (-0: q is 0x80), "ties" (amax = FMAX so
 *   inv = 1, the other values on exact midpoints of the fp8 grid: ties to
 *   even, subnormals included), "edge" (an amax v for which v·fl(FMAX/v)
 *   rounds above FMAX: the saturation), and random normal values times 2^e
 *   over a wide range of e.
 * Sizes: odd counts, empty groups, offsets, hostile counts (negative,
 * decreasing offsets, sums past the capacity); shapes off 128 in both
 * dimensions, padded leading dimensions, the ROWS kind's second read of
 * rows longer than its registers hold.  Every output and scale buffer is
 * poisoned (0xFF) first and compared whole: rows past Σm, padding columns
 * and padding scales must keep their poison.  A rows kind is captured in a
 * CUDA graph and replayed after its counts changed in place.
 * WEIGHTS_TENSOR_DELAYED takes given scales (kiln.h: inv = min(1/s,
 * FLT_MAX), q = RNE_satfinite(x * inv)), among them scales too small (the
 * saturation), 0 and subnormal (inv = FLT_MAX), and must leave them as
 * they were; its d_amax is compared bit for bit; it is captured and
 * replayed with new weights and scales.
 * Exits 77 (skipped) without a driver or GPU. */
#include <float.h>

#include "testutil.h"

#include "gpu_util.h"

static kiln_context *g_ctx;
static int g_failures;
#define CASE_FAIL(...) GPU_CASE_FAIL(g_failures, __VA_ARGS__)

/* ---- the reference ------------------------------------------------------ */

static float fmax_of(kiln_dtype t) { return t == KILN_DTYPE_E4M3 ? 448.0f : 57344.0f; }

/* f to e4m3 / e5m2: round to nearest even, saturate to ±FMAX (NaN: 0x7F);
 * common/half.c's conversions, which test_half checks on every pattern. */
static uint8_t to_fp8(float f, kiln_dtype t)
{
    return t == KILN_DTYPE_E4M3 ? kiln_f32_to_e4m3(f) : kiln_f32_to_e5m2(f);
}

static void ref_scales(float amax, kiln_dtype out, float *s, float *inv)
{
    if (amax == 0.0f) {
        *s = *inv = 1.0f;
        return;
    }
    *s = amax / fmax_of(out);
    *inv = fminf(fmax_of(out) / amax, FLT_MAX);
}

static float decode16(uint16_t h, kiln_dtype t)
{
    return t == KILN_DTYPE_BF16 ? kiln_bf16_to_f32(h) : kiln_f16_to_f32(h);
}

static uint16_t encode16(float f, kiln_dtype t)
{
    return t == KILN_DTYPE_BF16 ? kiln_f32_to_bf16(f) : kiln_f32_to_f16(f);
}

/* ---- the data ----------------------------------------------------------- */

enum { M_ZERO, M_NEGZERO, M_TIES, M_EDGE, M_RANDOM, M_COUNT };

/* An amax v (a 16-bit value in [1, 2)) with fl(v · fl(FMAX / v)) > FMAX, or
 * 0 when the type pair has none. */
static float edge_value(kiln_dtype in, kiln_dtype out)
{
    const float F = fmax_of(out);
    for (float v = 1.0f; v < 2.0f;) {
        float inv = F / v;
        if (v * inv > F) return v;
        v = decode16((uint16_t)(encode16(v, in) + 1), in); /* the next value up */
    }
    return 0.0f;
}

/* Exact midpoints of the fp8 grid below FMAX (normal and subnormal), held
 * exactly by bf16 and fp16. */
static float tie_value(kiln_dtype out, int i)
{
    static const float e4m3[] = {1.0625f, 1.1875f, 0.53125f, 248.0f, 0x1p-10f, 0x3p-10f};
    static const float e5m2[] = {1.125f, 1.375f, 0.5625f, 0x1p-17f, 0x3p-17f, 36864.0f};
    return out == KILN_DTYPE_E4M3 ? e4m3[i % 6] : e5m2[i % 6];
}

/* One element of a set in mode `mode`; `first`: the set's planted amax
 * position; e: the random mode's exponent. */
static uint16_t gen(int mode, int first, int e, kiln_dtype in, kiln_dtype out, float edge)
{
    float v;
    switch (mode) {
    case M_ZERO: v = 0.0f; break;
    case M_NEGZERO: v = -0.0f; break;
    case M_TIES:
        v = first ? fmax_of(out) : (rng_int(0, 3) ? tie_value(out, rng_int(0, 5)) : rng_val());
        if (!first && rng_int(0, 1)) v = -v;
        break;
    case M_EDGE:
        v = first ? edge : 0.25f * rng_val();
        break;
    default: v = kts_rng_normal(&g_rng) * ldexpf(1.0f, e); break;
    }
    return encode16(v, in);
}

/* The random mode's exponent range per input type: bf16 has fp32's range,
 * fp16 keeps |x| below ~2^11 (its subnormals show at the low end). */
static int exp_lo(kiln_dtype in) { return in == KILN_DTYPE_BF16 ? -40 : -14; }
static int exp_hi(kiln_dtype in) { return in == KILN_DTYPE_BF16 ? 40 : 8; }
static int rand_exp(kiln_dtype in) { return rng_int(exp_lo(in), exp_hi(in)); }

/* A set's mode: every mode turns up; edge only where the pair has one. */
static int pick_mode(int i, float edge)
{
    int m = i % (M_COUNT + 2);
    if (m >= M_COUNT) m = M_RANDOM;
    return m == M_EDGE && edge == 0.0f ? M_RANDOM : m;
}

/* ---- one case ----------------------------------------------------------- */

typedef struct qcase {
    const char *label;
    kiln_quant_kind kind;
    kiln_dtype in, out;
    int groups;            /* rows kinds: entries of sizes (0: no sizes); weights: G */
    int64_t rows, cols;    /* rows kinds: capacity; weights: N, K */
    int ld_in_pad, ld_out_pad, ld_scale_pad;
    const int32_t *sizes;  /* rows kinds: d_sizes' contents */
    int offsets;
    int transposed;        /* weights: d_out_t and d_scale_t */
} qcase;

/* Host images of every buffer the call touches: what the device must hold
 * afterwards, poison where nothing may be written. */
typedef struct qbuf {
    int64_t ld_in, ld_out, ld_scale, in_rows, tn, tk, kb;
    size_t in_n, out_n, out_t_n, scale_n, scale_t_n;
    uint16_t *in;
    uint8_t *out, *out_t;
    uint32_t *scale, *scale_t;   /* fp32 bit patterns (DELAYED: the given scales) */
    uint32_t *amax;              /* DELAYED: [G] */
    CUdeviceptr d_in, d_out, d_out_t, d_scale, d_scale_t, d_sizes, d_amax;
} qbuf;

static int is_rows(kiln_quant_kind k) { return k == KILN_QUANT_ROWS || k == KILN_QUANT_ROWS_1X128; }

/* One scale per group (the group's amax found first, or given). */
static int per_group(kiln_quant_kind k)
{
    return k == KILN_QUANT_WEIGHTS_TENSOR || k == KILN_QUANT_WEIGHTS_TENSOR_DELAYED;
}

/* Valid rows of a rows-kind case, clamped as the kernels clamp them. */
static int64_t valid_rows(const qcase *c)
{
    if (!c->sizes) return c->rows;
    int64_t total = 0;
    for (int g = 0; g < c->groups; g++) {
        int64_t v = c->offsets ? (int64_t)c->sizes[g] - (g ? (int64_t)c->sizes[g - 1] : 0)
                               : (int64_t)c->sizes[g];
        if (v > 0) total += v;
    }
    return total < c->rows ? total : c->rows;
}

static uint32_t f32_bits(float f)
{
    uint32_t u;
    memcpy(&u, &f, 4);
    return u;
}

/* amax over in[r0..r1) x [c0..c1) of one group (in rows of ld). */
static float amax_of(const qcase *c, const uint16_t *in, int64_t ld, int64_t r0, int64_t r1,
                     int64_t c0, int64_t c1)
{
    float m = 0.0f;
    for (int64_t r = r0; r < r1; r++)
        for (int64_t j = c0; j < c1; j++) m = fmaxf(m, fabsf(decode16(in[r * ld + j], c->in)));
    return m;
}

/* q of in[r0..r1) x [c0..c1) with inv into out (and out_t, [cols, N] of
 * this group, when given). */
static void quant_block(const qcase *c, const qbuf *b, int64_t g, int64_t r0, int64_t r1,
                        int64_t c0, int64_t c1, float inv)
{
    const uint16_t *in = b->in + g * b->in_rows * b->ld_in;
    for (int64_t r = r0; r < r1; r++)
        for (int64_t j = c0; j < c1; j++) {
            uint8_t q = to_fp8(decode16(in[r * b->ld_in + j], c->in) * inv, c->out);
            b->out[(g * b->in_rows + r) * b->ld_out + j] = q;
            if (b->out_t) b->out_t[(g * c->cols + j) * c->rows + r] = q;
        }
}

static void reference_rows(const qcase *c, qbuf *b)
{
    const int64_t total = valid_rows(c);
    float s, inv;
    for (int64_t r = 0; r < total; r++) {
        if (c->kind == KILN_QUANT_ROWS) {
            ref_scales(amax_of(c, b->in, b->ld_in, r, r + 1, 0, c->cols), c->out, &s, &inv);
            b->scale[r] = f32_bits(s);
            quant_block(c, b, 0, r, r + 1, 0, c->cols, inv);
            continue;
        }
        for (int64_t k = 0; k < b->kb; k++) {
            int64_t c1 = (k + 1) * 128 < c->cols ? (k + 1) * 128 : c->cols;
            ref_scales(amax_of(c, b->in, b->ld_in, r, r + 1, k * 128, c1), c->out, &s, &inv);
            b->scale[k * b->ld_scale + r] = f32_bits(s);
            quant_block(c, b, 0, r, r + 1, k * 128, c1, inv);
        }
    }
}

static float f32_of(uint32_t u)
{
    float f;
    memcpy(&f, &u, 4);
    return f;
}

/* DELAYED's given scale for group g of amax a: the TENSOR rule's, too small
 * by 4 (the largest values saturate), larger (values shrink into the
 * subnormals), a power of two, a tiny normal scale (all nonzero values
 * saturate), a subnormal one (1/s is inf: inv is FLT_MAX), one whose
 * reciprocal rounds (0.1). */
static float given_scale(int64_t g, float a, kiln_dtype out)
{
    const float t = a / fmax_of(out);
    switch (g % 7) {
    case 0: return a == 0.0f ? 1.0f : t;
    case 1: return 0.25f * t;           /* 0 for a zero group: saturates nothing there */
    case 2: return a == 0.0f ? 3.0f : 3.3f * t;
    case 3: return 0x1p-3f;
    case 4: return 1e-30f;
    case 5: return 1e-40f;
    default: return 0.1f;
    }
}

static void reference_weights(const qcase *c, qbuf *b)
{
    const int64_t N = c->rows, K = c->cols;
    float s, inv;
    for (int64_t g = 0; g < c->groups; g++) {
        const uint16_t *in = b->in + g * N * b->ld_in;
        if (c->kind == KILN_QUANT_WEIGHTS_TENSOR_DELAYED) {
            /* b->scale holds the given scales (case_setup), kept as they are */
            b->amax[g] = f32_bits(amax_of(c, in, b->ld_in, 0, N, 0, K));
            quant_block(c, b, g, 0, N, 0, K, fminf(1.0f / f32_of(b->scale[g]), FLT_MAX));
            continue;
        }
        if (c->kind == KILN_QUANT_WEIGHTS_TENSOR) {
            ref_scales(amax_of(c, in, b->ld_in, 0, N, 0, K), c->out, &s, &inv);
            b->scale[g] = f32_bits(s);
            if (b->scale_t) b->scale_t[g] = f32_bits(s);
            quant_block(c, b, g, 0, N, 0, K, inv);
            continue;
        }
        for (int64_t bn = 0; bn < b->tn; bn++)
            for (int64_t bk = 0; bk < b->tk; bk++) {
                int64_t r1 = bn * 128 + 128 < N ? bn * 128 + 128 : N;
                int64_t c1 = bk * 128 + 128 < K ? bk * 128 + 128 : K;
                ref_scales(amax_of(c, in, b->ld_in, bn * 128, r1, bk * 128, c1), c->out, &s, &inv);
                b->scale[(g * b->tn + bn) * b->tk + bk] = f32_bits(s);
                if (b->scale_t) b->scale_t[(g * b->tk + bk) * b->tn + bn] = f32_bits(s);
                quant_block(c, b, g, bn * 128, r1, bk * 128, c1, inv);
            }
    }
}

/* The input: each set (row; 128x128 block; group) in its mode. */
static void fill_input(const qcase *c, qbuf *b)
{
    const float edge = edge_value(c->in, c->out);
    const int64_t G = is_rows(c->kind) ? 1 : c->groups;
    memset(b->in, 0, b->in_n * 2);
    for (int64_t g = 0; g < G; g++)
        for (int64_t r = 0; r < b->in_rows; r++) {
            int e = rand_exp(c->in);
            for (int64_t j = 0; j < c->cols; j++) {
                int mode, first;
                if (is_rows(c->kind)) {
                    mode = pick_mode((int)r, edge);
                    first = j % 128 == 0;
                } else if (per_group(c->kind)) {
                    mode = pick_mode((int)g + 5, edge);  /* random, random, zeros, -0, ties, edge */
                    first = r == 0 && j == 0;
                } else {
                    mode = pick_mode((int)(g * b->tn * b->tk + (r / 128) * b->tk + j / 128), edge);
                    first = r % 128 == 0 && j % 128 == 0;
                    if (mode == M_RANDOM) /* one exponent per block */
                        e = exp_lo(c->in) + (int)((g * 7 + r / 128 * 3 + j / 128) %
                                                  (exp_hi(c->in) - exp_lo(c->in) + 1));
                }
                b->in[(g * b->in_rows + r) * b->ld_in + j] = gen(mode, first, e, c->in, c->out, edge);
            }
        }
}

static CUdeviceptr dev_poisoned(size_t bytes)
{
    CUdeviceptr d = dev_alloc(bytes);
    poison(d, bytes);
    return d;
}

static void case_setup(const qcase *c, qbuf *b)
{
    memset(b, 0, sizeof *b);
    const int rows = is_rows(c->kind);
    const int64_t G = rows ? 1 : c->groups;
    b->ld_in = c->cols + c->ld_in_pad;
    b->ld_out = c->cols + c->ld_out_pad;
    b->ld_scale = c->rows + c->ld_scale_pad;
    b->in_rows = c->rows;
    b->tn = (c->rows + 127) / 128;
    b->tk = (c->cols + 127) / 128;
    b->kb = b->tk;
    b->in_n = (size_t)(G * c->rows * b->ld_in);
    b->out_n = (size_t)(G * c->rows * b->ld_out);
    b->scale_n = c->kind == KILN_QUANT_ROWS         ? (size_t)c->rows
                 : c->kind == KILN_QUANT_ROWS_1X128 ? (size_t)(b->kb * b->ld_scale)
                 : per_group(c->kind)               ? (size_t)G
                                                    : (size_t)(G * b->tn * b->tk);
    const int delayed = c->kind == KILN_QUANT_WEIGHTS_TENSOR_DELAYED;
    b->in = xmalloc(b->in_n * 2);
    b->out = xmalloc(b->out_n);
    b->scale = xmalloc(b->scale_n * 4);
    memset(b->out, 0xff, b->out_n);
    memset(b->scale, 0xff, b->scale_n * 4);
    if (c->transposed) {
        b->out_t_n = (size_t)(G * c->rows * c->cols);
        b->out_t = xmalloc(b->out_t_n);
        memset(b->out_t, 0xff, b->out_t_n);
        b->d_out_t = dev_poisoned(b->out_t_n);
    }
    if (c->transposed && !delayed) {
        b->scale_t_n = b->scale_n;
        b->scale_t = xmalloc(b->scale_t_n * 4);
        memset(b->scale_t, 0xff, b->scale_t_n * 4);
        b->d_scale_t = dev_poisoned(b->scale_t_n * 4);
    }
    fill_input(c, b);
    b->d_in = dev_alloc(b->in_n * 2);
    upload(b->d_in, b->in, b->in_n * 2);
    b->d_out = dev_poisoned(b->out_n);
    b->d_scale = dev_poisoned(b->scale_n * 4);
    if (delayed) {
        b->amax = xmalloc((size_t)G * 4);
        memset(b->amax, 0xff, (size_t)G * 4);
        b->d_amax = dev_poisoned((size_t)G * 4);
        for (int64_t g = 0; g < G; g++)
            b->scale[g] = f32_bits(given_scale(
                g, amax_of(c, b->in + g * c->rows * b->ld_in, b->ld_in, 0, c->rows, 0, c->cols),
                c->out));
        upload(b->d_scale, b->scale, b->scale_n * 4);
    }
    if (c->sizes) {
        b->d_sizes = dev_alloc((size_t)c->groups * 4);
        upload(b->d_sizes, c->sizes, (size_t)c->groups * 4);
    }
}

static void case_quant(const qcase *c, const qbuf *b, kiln_quant *q)
{
    kiln_quant_init(q, c->kind);
    q->in_type = c->in;
    q->out_type = c->out;
    q->groups = c->groups;
    q->rows = c->rows;
    q->cols = c->cols;
    q->d_sizes = (const int32_t *)(uintptr_t)b->d_sizes;
    q->sizes_kind = c->offsets ? KILN_SIZES_OFFSETS : KILN_SIZES_COUNTS;
    q->d_in = (const void *)(uintptr_t)b->d_in;
    q->ld_in = c->ld_in_pad ? b->ld_in : 0;
    q->d_out = (void *)(uintptr_t)b->d_out;
    q->ld_out = c->ld_out_pad ? b->ld_out : 0;
    q->d_scale = (float *)(uintptr_t)b->d_scale;
    q->ld_scale = c->kind == KILN_QUANT_ROWS_1X128 && c->ld_scale_pad ? b->ld_scale : 0;
    q->d_out_t = (void *)(uintptr_t)b->d_out_t;
    q->d_scale_t = (float *)(uintptr_t)b->d_scale_t;
    q->d_amax = (float *)(uintptr_t)b->d_amax;
}

/* The device buffer against its expected image, byte by byte; names the
 * first few differences. */
static void compare(const char *label, const char *what, CUdeviceptr d, const void *want,
                    size_t bytes, size_t esize, int64_t row_len)
{
    unsigned char *got = xmalloc(bytes);
    download(got, d, bytes);
    const unsigned char *w = want;
    size_t bad = 0;
    for (size_t i = 0; i < bytes; i += esize) {
        if (!memcmp(got + i, w + i, esize)) continue;
        if (bad++ < 4) {
            size_t e = i / esize;
            uint32_t gv = 0, wv = 0;
            memcpy(&gv, got + i, esize);
            memcpy(&wv, w + i, esize);
            CASE_FAIL("%s: %s[%zu] (at [%lld][%lld]): got 0x%x, want 0x%x", label, what, e,
                      (long long)(e / (size_t)row_len), (long long)(e % (size_t)row_len), gv, wv);
        }
    }
    if (bad > 4) CASE_FAIL("%s: %s: %zu elements differ in all", label, what, bad);
    free(got);
}

static void case_check(const qcase *c, const qbuf *b)
{
    compare(c->label, "out", b->d_out, b->out, b->out_n, 1, b->ld_out);
    compare(c->label, "scale", b->d_scale, b->scale, b->scale_n * 4, 4,
            c->kind == KILN_QUANT_ROWS_1X128 ? b->ld_scale : (int64_t)b->scale_n);
    if (c->transposed) compare(c->label, "out_t", b->d_out_t, b->out_t, b->out_t_n, 1, c->rows);
    if (b->scale_t)
        compare(c->label, "scale_t", b->d_scale_t, b->scale_t, b->scale_t_n * 4, 4,
                (int64_t)b->scale_t_n);
    if (b->amax)
        compare(c->label, "amax", b->d_amax, b->amax, (size_t)c->groups * 4, 4, c->groups);
}

static void case_free(qbuf *b)
{
    DEV_FREE_ALL(b->d_in, b->d_out, b->d_out_t, b->d_scale, b->d_scale_t, b->d_sizes, b->d_amax);
    FREE_ALL(b->amax, b->in, b->out, b->out_t, b->scale, b->scale_t);
}

static void run_case(const qcase *c)
{
    qbuf b;
    case_setup(c, &b);
    if (is_rows(c->kind)) reference_rows(c, &b);
    else reference_weights(c, &b);
    kiln_quant q;
    case_quant(c, &b, &q);
    kiln_status st = kiln_quantize(g_ctx, &q, NULL);
    if (st != KILN_OK) CASE_FAIL("%s: kiln_quantize: %s", c->label, kiln_last_error(g_ctx));
    CU(g_drv.cuCtxSynchronize());
    if (st == KILN_OK) case_check(c, &b);
    printf("  %-44s %s\n", c->label, st == KILN_OK ? "ran" : "failed");
    case_free(&b);
}

/* The graph tests' start: case c set up into *b, and its kiln_quantize
 * captured on a new stream into *exec (after a call outside the capture,
 * which loads the quantizers); returns the graph.  The graph holds the
 * call's launches and memsets by value, so the kiln_quant may end here. */
static CUgraph capture_case(const qcase *c, qbuf *b, CUstream *stream, CUgraphExec *exec)
{
    case_setup(c, b);
    kiln_quant q;
    case_quant(c, b, &q);
    CU(g_drv.cuStreamCreate(stream, CU_STREAM_NON_BLOCKING));
    CU(g_drv.cuCtxSynchronize());
    assert_int_equal(kiln_quantize(g_ctx, &q, *stream), KILN_OK); /* loads outside the capture */
    CU(g_drv.cuStreamSynchronize(*stream));
    CU(g_drv.cuStreamBeginCapture(*stream, CU_STREAM_CAPTURE_MODE_GLOBAL));
    kiln_status st = kiln_quantize(g_ctx, &q, *stream);
    return graph_end_capture(*stream, st, g_ctx, "kiln_quantize", exec);
}

/* ---- the cases ------------------------------------------------------------ */

static const int32_t k_counts5[] = {37, 0, 61, 1, 90};
static const int32_t k_offsets3[] = {5, 3, 40};            /* counts 5, 0, 37 */
static const int32_t k_offsets4[] = {50, 50, 83, 90};      /* counts 50, 0, 33, 7 */
static const int32_t k_counts2[] = {129, 1};
static const int32_t k_hostile[] = {10, -3, 25, INT32_MIN};
static const int32_t k_past_cap[] = {INT32_MAX, INT32_MAX, 5};
static const int32_t k_decreasing[] = {20, 10, 50};        /* counts 20, 0, 40 */
/* 9822 rows: more rows or tiles than a wave of CTAs holds, so every CTA
 * loops (the kernels' alternating shared slots, no end-of-step barrier). */
static const int32_t k_many[] = {3000, 0, 4321, 1, 2500};

#define BF KILN_DTYPE_BF16
#define HF KILN_DTYPE_F16
#define E4 KILN_DTYPE_E4M3
#define E5 KILN_DTYPE_E5M2

/* The cases of the five table tests below, one block per kind: each test
 * runs the cases of its kind, in this order (one table, one loop). */
static const qcase k_cases[] = {
    {"rows bf16>e4m3 counts, padded", KILN_QUANT_ROWS, BF, E4, 5, 300, 400, 8, 16, 0, k_counts5, 0, 0},
    {"rows fp16>e5m2 all rows", KILN_QUANT_ROWS, HF, E5, 0, 77, 4096, 0, 0, 0, NULL, 0, 0},
    {"rows bf16>e5m2 16400 cols (second read)", KILN_QUANT_ROWS, BF, E5, 0, 6, 16400, 0, 0, 0, NULL, 0, 0},
    {"rows fp16>e4m3 16 cols, offsets", KILN_QUANT_ROWS, HF, E4, 3, 50, 16, 0, 16, 0, k_offsets3, 1, 0},
    {"rows bf16>e4m3 sizes past capacity", KILN_QUANT_ROWS, BF, E4, 3, 40, 7168, 0, 0, 0, k_past_cap, 0, 0},
    {"rows bf16>e4m3 decreasing offsets", KILN_QUANT_ROWS, BF, E4, 3, 100, 2048, 0, 0, 0, k_decreasing, 1, 0},
    {"rows bf16>e4m3 9822 of 12000x512 (CTAs loop)", KILN_QUANT_ROWS, BF, E4, 5, 12000, 512, 0, 0, 0, k_many, 0, 0},

    {"1x128 bf16>e4m3 offsets, padded", KILN_QUANT_ROWS_1X128, BF, E4, 4, 128, 400, 8, 16, 5, k_offsets4, 1, 0},
    {"1x128 fp16>e5m2 counts", KILN_QUANT_ROWS_1X128, HF, E5, 2, 200, 2048, 0, 0, 0, k_counts2, 0, 0},
    {"1x128 bf16>e4m3 negative counts", KILN_QUANT_ROWS_1X128, BF, E4, 4, 64, 272, 0, 0, 3, k_hostile, 0, 0},
    {"1x128 bf16>e5m2 all rows, 16 cols", KILN_QUANT_ROWS_1X128, BF, E5, 0, 33, 16, 0, 0, 0, NULL, 0, 0},
    {"1x128 fp16>e4m3 sizes past capacity", KILN_QUANT_ROWS_1X128, HF, E4, 3, 40, 7168, 0, 0, 0, k_past_cap, 0, 0},
    {"1x128 bf16>e4m3 9822 of 12000x1040, padded (CTAs loop)", KILN_QUANT_ROWS_1X128, BF, E4, 5, 12000, 1040, 8, 16, 7, k_many, 0, 0},

    {"128x128 bf16>e4m3 both layouts, 208x272", KILN_QUANT_WEIGHTS_128X128, BF, E4, 3, 208, 272, 8, 16, 0, NULL, 0, 1},
    {"128x128 fp16>e5m2 no transpose, 200x400", KILN_QUANT_WEIGHTS_128X128, HF, E5, 2, 200, 400, 0, 0, 0, NULL, 0, 0},
    {"128x128 bf16>e5m2 both layouts, 256x256", KILN_QUANT_WEIGHTS_128X128, BF, E5, 2, 256, 256, 0, 0, 0, NULL, 0, 1},
    {"128x128 fp16>e4m3 both layouts, 16x16", KILN_QUANT_WEIGHTS_128X128, HF, E4, 9, 16, 16, 0, 0, 0, NULL, 0, 1},
    {"128x128 bf16>e4m3 both layouts, 640x1040", KILN_QUANT_WEIGHTS_128X128, BF, E4, 4, 640, 1040, 0, 0, 0, NULL, 0, 1},
    /* more tiles than a wave of CTAs: every CTA loops */
    {"128x128 bf16>e4m3 both layouts, 16x1024x1040", KILN_QUANT_WEIGHTS_128X128, BF, E4, 16, 1024, 1040, 0, 0, 0, NULL, 0, 1},
    {"128x128 fp16>e4m3 no transpose, 6x1000x2000", KILN_QUANT_WEIGHTS_128X128, HF, E4, 6, 1000, 2000, 0, 0, 0, NULL, 0, 0},

    {"tensor bf16>e4m3 both layouts, 208x272", KILN_QUANT_WEIGHTS_TENSOR, BF, E4, 5, 208, 272, 8, 16, 0, NULL, 0, 1},
    {"tensor fp16>e5m2 no transpose, 100x160", KILN_QUANT_WEIGHTS_TENSOR, HF, E5, 4, 100, 160, 0, 0, 0, NULL, 0, 0},
    {"tensor bf16>e4m3 both layouts, 512x1024", KILN_QUANT_WEIGHTS_TENSOR, BF, E4, 6, 512, 1024, 0, 0, 0, NULL, 0, 1},
    /* more tiles than a wave of CTAs: every CTA loops */
    {"tensor fp16>e4m3 both layouts, 12x1024x1040", KILN_QUANT_WEIGHTS_TENSOR, HF, E4, 12, 1024, 1040, 0, 0, 0, NULL, 0, 1},
    {"tensor bf16>e5m2 no transpose, 8x1024x1040", KILN_QUANT_WEIGHTS_TENSOR, BF, E5, 8, 1024, 1040, 0, 0, 0, NULL, 0, 0},

    {"delayed bf16>e4m3 both layouts, 7x208x272", KILN_QUANT_WEIGHTS_TENSOR_DELAYED, BF, E4, 7, 208, 272, 8, 16, 0, NULL, 0, 1},
    {"delayed fp16>e5m2 no transpose, 7x100x160", KILN_QUANT_WEIGHTS_TENSOR_DELAYED, HF, E5, 7, 100, 160, 0, 0, 0, NULL, 0, 0},
    {"delayed bf16>e5m2 both layouts, 9x512x1024", KILN_QUANT_WEIGHTS_TENSOR_DELAYED, BF, E5, 9, 512, 1024, 0, 0, 0, NULL, 0, 1},
    /* more tiles than a wave of CTAs: every CTA loops, over many groups */
    {"delayed fp16>e4m3 both layouts, 14x1024x1040", KILN_QUANT_WEIGHTS_TENSOR_DELAYED, HF, E4, 14, 1024, 1040, 0, 0, 0, NULL, 0, 1},
    {"delayed bf16>e4m3 no transpose, 8x1024x1040", KILN_QUANT_WEIGHTS_TENSOR_DELAYED, BF, E4, 8, 1024, 1040, 0, 0, 0, NULL, 0, 0},
    /* a group of more tiles than a wave: a CTA takes several tiles of
     * one group (its amax kept across them, recorded once) */
    {"delayed bf16>e4m3 both layouts, 3x3072x3072", KILN_QUANT_WEIGHTS_TENSOR_DELAYED, BF, E4, 3, 3072, 3072, 0, 0, 0, NULL, 0, 1},
};

/* run_case on each case of k_cases of kind k; asserts that none failed. */
static void run_kind(kiln_quant_kind k)
{
    for (size_t i = 0; i < sizeof k_cases / sizeof k_cases[0]; i++)
        if (k_cases[i].kind == k) run_case(&k_cases[i]);
    assert_int_equal(g_failures, 0);
}

static void test_rows(void **state) { (void)state; run_kind(KILN_QUANT_ROWS); }
static void test_rows_1x128(void **state) { (void)state; run_kind(KILN_QUANT_ROWS_1X128); }
static void test_weights_128x128(void **state) { (void)state; run_kind(KILN_QUANT_WEIGHTS_128X128); }
static void test_weights_tensor(void **state) { (void)state; run_kind(KILN_QUANT_WEIGHTS_TENSOR); }
static void test_weights_delayed(void **state) { (void)state; run_kind(KILN_QUANT_WEIGHTS_TENSOR_DELAYED); }

/* WEIGHTS_TENSOR_DELAYED captured once (the memset of d_amax and the
 * pass), replayed after new weights and new given scales were written in
 * place: the new bytes, the new amax (d_amax poisoned before each replay:
 * the captured memset must zero it). */
static void test_delayed_graph(void **state)
{
    (void)state;
    qcase c = {"delayed graph", KILN_QUANT_WEIGHTS_TENSOR_DELAYED, BF, E4, 7, 256, 400, 0, 0, 0, NULL, 0, 1};
    qbuf b;
    CUstream stream;
    CUgraphExec exec;
    CUgraph graph = capture_case(&c, &b, &stream, &exec);
    for (int round = 0; round < 2; round++) {
        c.label = round ? "delayed graph replay 2, new weights and scales"
                        : "delayed graph replay 1, new weights and scales";
        fill_input(&c, &b);
        upload(b.d_in, b.in, b.in_n * 2);
        for (int64_t g = 0; g < c.groups; g++) /* other scales than case_setup's */
            b.scale[g] = f32_bits(given_scale(g + 1 + round, 0.5f + (float)g, c.out));
        upload(b.d_scale, b.scale, b.scale_n * 4);
        poison(b.d_out, b.out_n);
        poison(b.d_out_t, b.out_t_n);
        poison(b.d_amax, (size_t)c.groups * 4);
        reference_weights(&c, &b);
        CU(g_drv.cuCtxSynchronize());
        graph_replay(exec, stream);
        case_check(&c, &b);
        printf("  %-44s ran\n", c.label);
    }
    graph_destroy(exec, graph, stream);
    case_free(&b);
    assert_int_equal(g_failures, 0);
}

/* ROWS_1X128 and ROWS captured once each, replayed after the counts changed
 * in place: the new rows, and nothing past them. */
static void test_graph_replay(void **state)
{
    (void)state;
    int32_t s1[4] = {10, 50, 0, 61}, s2[4] = {70, 0, 3, 30};
    for (int kind = KILN_QUANT_ROWS; kind <= KILN_QUANT_ROWS_1X128; kind++) {
        qcase c = {"graph", (kiln_quant_kind)kind, BF, E4, 4, 256, 400, 0, 0, 2, s1, 0, 0};
        qbuf b;
        CUstream stream;
        CUgraphExec exec;
        CUgraph graph = capture_case(&c, &b, &stream, &exec);
        for (int round = 0; round < 2; round++) {
            c.sizes = round ? s2 : s1;
            c.label = round ? "graph replay, counts changed to 70,0,3,30" : "graph replay, 10,50,0,61";
            upload(b.d_sizes, c.sizes, sizeof s1); /* in place */
            poison(b.d_out, b.out_n);
            poison(b.d_scale, b.scale_n * 4);
            memset(b.out, 0xff, b.out_n);
            memset(b.scale, 0xff, b.scale_n * 4);
            reference_rows(&c, &b);
            CU(g_drv.cuCtxSynchronize());
            graph_replay(exec, stream);
            case_check(&c, &b);
        }
        graph_destroy(exec, graph, stream);
        case_free(&b);
    }
    assert_int_equal(g_failures, 0);
}

/* The quantizers are one module, compiled or loaded once per context. */
static void test_loaded_once(void **state)
{
    (void)state;
    kiln_context_stats s;
    assert_int_equal(kiln_context_stats_get(g_ctx, &s), KILN_OK);
    printf("  nvrtc %llu, cache %llu, bundle %llu, launches %llu\n",
           (unsigned long long)s.nvrtc_compiles, (unsigned long long)s.cache_hits,
           (unsigned long long)s.bundle_hits, (unsigned long long)s.launches);
    assert_int_equal(s.nvrtc_compiles + s.cache_hits + s.bundle_hits, 1);
}

/* The host reference's fp8 rounding on known values (so that a wrong
 * reference cannot agree with a wrong kernel by accident). */
static void test_reference_fp8(void **state)
{
    (void)state;
    assert_int_equal(to_fp8(448.0f, E4), 0x7e);
    assert_int_equal(to_fp8(1e9f, E4), 0x7e);
    assert_int_equal(to_fp8(-500.0f, E4), 0xfe);
    assert_int_equal(to_fp8(1.0f, E4), 0x38);
    assert_int_equal(to_fp8(1.0625f, E4), 0x38);   /* tie to even: 1.0 */
    assert_int_equal(to_fp8(1.1875f, E4), 0x3a);   /* tie to even: 1.25 */
    assert_int_equal(to_fp8(0x1p-9f, E4), 0x01);   /* smallest subnormal */
    assert_int_equal(to_fp8(0x1p-10f, E4), 0x00);  /* tie to even: 0 */
    assert_int_equal(to_fp8(0x3p-10f, E4), 0x02);  /* tie to even: 2 · 2^-9 */
    assert_int_equal(to_fp8(0x1p-6f, E4), 0x08);   /* smallest normal */
    assert_int_equal(to_fp8(-0.0f, E4), 0x80);
    assert_int_equal(to_fp8(57344.0f, E5), 0x7b);
    assert_int_equal(to_fp8(1e9f, E5), 0x7b);
    assert_int_equal(to_fp8(1.0f, E5), 0x3c);
    assert_int_equal(to_fp8(1.125f, E5), 0x3c);
    assert_int_equal(to_fp8(1.375f, E5), 0x3e);
    assert_int_equal(to_fp8(0x1p-16f, E5), 0x01);
    assert_int_equal(to_fp8(0x3p-17f, E5), 0x02);
}

/* sm_89 or later (the fp8 conversions), else 77 with the reason. */
static int fp8_device(void)
{
    int major = 0, minor = 0;
    CUdevice dev;
    if (g_drv.cuCtxGetDevice(&dev) != CUDA_SUCCESS ||
        g_drv.cuDeviceGetAttribute(&major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, dev) ||
        g_drv.cuDeviceGetAttribute(&minor, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, dev))
        return 0;
    if (major * 10 + minor >= 89) return 1;
    printf("SKIP: kiln_quantize needs sm_89 or later; the device is sm_%d%d\n", major, minor);
    return 0;
}

int main(void)
{
    /* The reference's own check needs no GPU: it runs everywhere. */
    const struct CMUnitTest host[] = {cmocka_unit_test(test_reference_fp8)};
    if (cmocka_run_group_tests(host, NULL, NULL)) return 1;
    int rc = gpu_setup_context(0, &g_ctx);
    if (rc) return rc;
    if (!fp8_device()) {
        kiln_context_destroy(g_ctx);
        return 77;
    }
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_rows),
        cmocka_unit_test(test_rows_1x128),
        cmocka_unit_test(test_weights_128x128),
        cmocka_unit_test(test_weights_tensor),
        cmocka_unit_test(test_weights_delayed),
        cmocka_unit_test(test_graph_replay),
        cmocka_unit_test(test_delayed_graph),
        cmocka_unit_test(test_loaded_once),
    };
    return gpu_run_tests_then_destroy(tests, &g_ctx);
}
