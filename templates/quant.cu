// kiln: fp8 quantizers (templates/quant.cu), a runtime companion family loaded by runtime/quant.c
/* SPDX-License-Identifier: Apache-2.0 */
/*
 * quant.cu — bf16/fp16 to e4m3/e5m2 with the scales of kiln.h's kiln_fp8
 * recipes (kiln_quantize).  A whole translation unit, compiled as is by
 * NVRTC (no headers, no template expansion): runtime/quant.c embeds it and
 * loads it through the store like any kernel (bundles, cache, NVRTC).
 *
 * The numbers, the same in every kernel and in the tests' CPU reference:
 *   amax = max |x| over the scaled set (found on the 16-bit patterns: for
 *          finite values |x| orders as (bits & 0x7fff) does)
 *   s    = amax / FMAX        (IEEE division, round to nearest)
 *   inv  = FMAX / amax        (the same, then at most FLT_MAX: an amax below
 *                              FMAX / FLT_MAX, ~1e-36, would make it inf)
 *   amax = 0: s = 1, inv = 1
 *   q    = cvt.rn.satfinite(x * inv)   (one fp32 multiply, then RNE to fp8,
 *                              saturated to ±FMAX)
 * WEIGHTS_TENSOR_DELAYED takes s (scale[g], given) instead of finding it:
 *   inv  = min(1 / s, FLT_MAX)         (__frcp_rn: IEEE, round to nearest)
 *   q    = cvt.rn.satfinite(x * inv)   and amax[g] = max |x|, recorded
 * q = x * inv rather than x / s: a multiply per element instead of a
 * division, and the form DeepGEMM's and TransformerEngine's quantizers
 * use, so their references reproduce kiln's bytes.  Inputs must be finite.
 *
 * Sizes (rows kinds) are read on the device and clamped as the GEMM
 * kernels do (sm90_common.cuh): a negative count or a decreasing offset is
 * an empty group, the sum saturates, and no row at or past the capacity is
 * read or written.  Every CTA sums them itself (a block reduction), so a
 * call is one launch and graph-safe.
 *
 * Every kernel runs KQ_THREADS threads per CTA over a grid-stride loop
 * (the host sizes the grid to the device).
 */

#define KQ_THREADS 256
#define KQ_WARPS (KQ_THREADS / 32)
#define KQ_UMAX 4            /* rows kind: 16-element units a thread keeps in registers */
#define KDEV __device__ __forceinline__

typedef unsigned int u32;
typedef unsigned long long u64;

/* The kernels' one parameter; runtime/quant.h's kiln_quant_args is the same layout. */
struct kq_args {
    const void *in;
    void *out;
    void *out_t;
    float *scale;
    float *scale_t;
    const int *sizes;
    float *amax;                /* DELAYED: [G] max |x| per group, zeroed by the host */
    long long rows, cols;       /* rows kinds: capacity; weights: one group's N, K */
    long long ld_in, ld_out;    /* elements between rows (never 0 here) */
    long long ld_scale;         /* ROWS_1X128: elements between k-blocks */
    int groups;
    int sizes_are_offsets;      /* sizes NULL: all rows are valid */
    int tpr;                    /* ROWS: threads per row, 32..256, a power of two */
    int reverse;                /* tiles: walk them last first */
};
static_assert(sizeof(kq_args) == 112, "kq_args must match runtime/quant.h");

/* ---- element types ---------------------------------------------------- */

struct kq_bf16 {
    static KDEV float to_f32(u32 h) { return __uint_as_float(h << 16); }
};
struct kq_f16 {
    static KDEV float to_f32(u32 h)
    {
        float f;
        unsigned short s = (unsigned short)h;
        asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(s));
        return f;
    }
};

/* Two fp32 to two fp8 (lo in the low byte), RNE and saturated. */
struct kq_e4m3 {
    static constexpr float FMAX = 448.0f;
    static KDEV u32 pack2(float lo, float hi)
    {
        unsigned short r;
        asm("cvt.rn.satfinite.e4m3x2.f32 %0, %1, %2;" : "=h"(r) : "f"(hi), "f"(lo));
        return r;
    }
};
struct kq_e5m2 {
    static constexpr float FMAX = 57344.0f;
    static KDEV u32 pack2(float lo, float hi)
    {
        unsigned short r;
        asm("cvt.rn.satfinite.e5m2x2.f32 %0, %1, %2;" : "=h"(r) : "f"(hi), "f"(lo));
        return r;
    }
};

/* 16 elements (32 bytes) as 8 words, two 16-bit patterns each. */
struct kq_unit {
    u32 w[8];
};

KDEV void kq_load(kq_unit &u, const void *p)
{
    const uint4 *v = (const uint4 *)p;
    uint4 a = __ldg(v), b = __ldg(v + 1);
    u.w[0] = a.x; u.w[1] = a.y; u.w[2] = a.z; u.w[3] = a.w;
    u.w[4] = b.x; u.w[5] = b.y; u.w[6] = b.z; u.w[7] = b.w;
}

KDEV void kq_zero(kq_unit &u)
{
#pragma unroll
    for (int i = 0; i < 8; ++i) u.w[i] = 0u;
}

/* max of |x| as a 16-bit pattern in each half of the result. */
KDEV u32 kq_amax_bits(const kq_unit &u, u32 m)
{
#pragma unroll
    for (int i = 0; i < 8; ++i) m = __vmaxu2(m, u.w[i] & 0x7fff7fffu);
    return m;
}

/* The two halves of kq_amax_bits' word, then across the warp (lanes
 * `width` apart and closer, width a power of two). */
KDEV u32 kq_warp_amax(u32 m, int width)
{
    m = max(m & 0xffffu, m >> 16);
    for (int o = width >> 1; o > 0; o >>= 1) m = max(m, __shfl_xor_sync(0xffffffffu, m, o));
    return m;
}

template <class Out>
KDEV void kq_scales(float amax, float &s, float &inv)
{
    if (amax == 0.0f) {
        s = 1.0f;
        inv = 1.0f;
        return;
    }
    s = __fdiv_rn(amax, Out::FMAX);
    inv = fminf(__fdiv_rn(Out::FMAX, amax), __uint_as_float(0x7f7fffffu));
}

/* 16 elements times inv to 16 fp8 bytes. */
template <class In, class Out>
KDEV uint4 kq_quant16(const kq_unit &u, float inv)
{
    u32 r[4];
#pragma unroll
    for (int i = 0; i < 4; ++i) {
        u32 a = u.w[2 * i], b = u.w[2 * i + 1];
        u32 p0 = Out::pack2(In::to_f32(a & 0xffffu) * inv, In::to_f32(a >> 16) * inv);
        u32 p1 = Out::pack2(In::to_f32(b & 0xffffu) * inv, In::to_f32(b >> 16) * inv);
        r[i] = p0 | (p1 << 16);
    }
    return make_uint4(r[0], r[1], r[2], r[3]);
}

/* ---- sizes -------------------------------------------------------------- */

/* Valid rows of a rows-kind call: Σ of the clamped counts (as the GEMM
 * kernels take them), at most the capacity.  Every thread of the CTA gets
 * it; red holds KQ_WARPS ints. */
KDEV long long kq_total_rows(const kq_args &a, int *red)
{
    const long long cap = a.rows;
    if (!a.sizes) return cap;
    long long sum = 0;
    for (int g = threadIdx.x; g < a.groups; g += KQ_THREADS) {
        long long c = a.sizes_are_offsets
                          ? (long long)a.sizes[g] - (g ? (long long)a.sizes[g - 1] : 0LL)
                          : (long long)a.sizes[g];
        sum += max(0LL, min(c, cap + 1));    /* ≤ 65536 · 2^31: no wrap */
    }
    sum = min(sum, cap);
    for (int o = 16; o > 0; o >>= 1) sum = min(cap, sum + __shfl_xor_sync(0xffffffffu, sum, o));
    __syncthreads();                         /* red may be in use by the caller */
    if ((threadIdx.x & 31) == 0) red[threadIdx.x >> 5] = (int)sum;
    __syncthreads();
    long long t = 0;
#pragma unroll
    for (int w = 0; w < KQ_WARPS; ++w) t = min(cap, t + (long long)red[w]);
    __syncthreads();
    return t;
}

/* ---- KILN_QUANT_ROWS: one scale per row -------------------------------- */

/* tpr threads per row (whole warps), KQ_THREADS / tpr rows per CTA step.
 * A thread keeps up to KQ_UMAX units of its row in registers between the
 * amax and the quantization; a row longer than tpr · KQ_UMAX units is read
 * a second time (from L2) for the rest. */
template <class In, class Out>
KDEV void kq_rows(const kq_args &a)
{
    __shared__ int red[KQ_WARPS];
    __shared__ u32 wmax[2][KQ_WARPS];     /* two slots: one barrier per step (see kq_tiles) */
    const long long total = kq_total_rows(a, red);
    const int tpr = a.tpr, per_cta = KQ_THREADS / tpr;
    const int sub = threadIdx.x / tpr, t = threadIdx.x % tpr;
    const int warp = threadIdx.x >> 5, wpr = tpr >> 5, w0 = sub * wpr;
    const long long units = a.cols / 16;
    const char *in = (const char *)a.in;
    unsigned char *out = (unsigned char *)a.out;
    int slot = 0;
    for (long long base = (long long)blockIdx.x * per_cta; base < total;
         base += (long long)gridDim.x * per_cta, slot ^= 1) {
        const long long r = base + sub;
        const bool row_ok = r < total;
        const char *rin = in + r * a.ld_in * 2;
        kq_unit u[KQ_UMAX];
        u32 m = 0;
#pragma unroll
        for (int i = 0; i < KQ_UMAX; ++i) {
            const long long j = t + (long long)i * tpr;
            if (row_ok && j < units) kq_load(u[i], rin + j * 32);
            else kq_zero(u[i]);
            m = kq_amax_bits(u[i], m);
        }
        for (long long j = t + (long long)KQ_UMAX * tpr; row_ok && j < units; j += tpr) {
            kq_unit x;
            kq_load(x, rin + j * 32);
            m = kq_amax_bits(x, m);
        }
        m = kq_warp_amax(m, 32);
        if ((threadIdx.x & 31) == 0) wmax[slot][warp] = m;
        __syncthreads();
        m = 0;
        for (int w = 0; w < wpr; ++w) m = max(m, wmax[slot][w0 + w]);
        if (!row_ok) continue;
        float s, inv;
        kq_scales<Out>(In::to_f32(m), s, inv);
        if (t == 0) a.scale[r] = s;
        unsigned char *rout = out + r * a.ld_out;
#pragma unroll
        for (int i = 0; i < KQ_UMAX; ++i) {
            const long long j = t + (long long)i * tpr;
            if (j < units) *(uint4 *)(rout + j * 16) = kq_quant16<In, Out>(u[i], inv);
        }
        for (long long j = t + (long long)KQ_UMAX * tpr; j < units; j += tpr) {
            kq_unit x;
            kq_load(x, rin + j * 32);
            *(uint4 *)(rout + j * 16) = kq_quant16<In, Out>(x, inv);
        }
    }
}

/* ---- KILN_QUANT_ROWS_1X128: one scale per row and 128 columns ----------- */

/* A CTA takes tiles of 32 rows x 4 k-blocks (32 units of 16 elements): warp
 * w holds rows w + 8i (i < 4) of the tile, lane l unit l of each, so that a
 * k-block is 8 lanes (3 shuffles for its amax) and a warp's load reads 1 KB
 * and its store writes 512 contiguous bytes of one row, as the ROWS kernel
 * does.  A thread's four loads are all issued before the first is used
 * (the kq_tiles pattern: predicated loads, no branch between them): 128
 * bytes in flight per thread.  The tile's 4 x 32 scales go through shared
 * memory (padded rows: no bank conflict) and out as one 128-byte run of 32
 * rows per k-block, instead of one scattered 4-byte store per (row,
 * k-block); double-buffered, so one barrier per tile.  The tiles are walked
 * k-block fastest in a grid-stride loop whose (row block, k-block group)
 * advance by a fixed step (nothing divided per step); the loop bound is
 * the same for the whole CTA (barriers inside). */
template <class In, class Out>
KDEV void kq_rows_1x128(const kq_args &a)
{
    __shared__ int red[KQ_WARPS];
    __shared__ float stage[2][4][33];
    const long long total = kq_total_rows(a, red);
    const long long kbs = (a.cols + 127) / 128, units = a.cols / 16, nq = (kbs + 3) / 4;
    const long long drb = gridDim.x / nq, dq = gridDim.x % nq;
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    long long rb = blockIdx.x / nq, qc = blockIdx.x % nq;
    const char *in = (const char *)a.in;
    unsigned char *out = (unsigned char *)a.out;
    for (int buf = 0; rb * 32 < total; buf ^= 1) {
        const long long r0 = rb * 32, j = qc * 32 + lane;
        const bool col_ok = j < units;
        kq_unit u[4];
#pragma unroll
        for (int i = 0; i < 4; ++i) {
            const long long r = r0 + warp + 8 * i;
            if (col_ok && r < total) kq_load(u[i], in + (r * a.ld_in + j * 16) * 2);
            else kq_zero(u[i]);
        }
#pragma unroll
        for (int i = 0; i < 4; ++i) {
            const long long r = r0 + warp + 8 * i;
            const u32 m = kq_warp_amax(kq_amax_bits(u[i], 0u), 8);
            float s, inv;
            kq_scales<Out>(In::to_f32(m), s, inv);
            if (col_ok && r < total)
                *(uint4 *)(out + r * a.ld_out + j * 16) = kq_quant16<In, Out>(u[i], inv);
            if ((lane & 7) == 0) stage[buf][lane >> 3][warp + 8 * i] = s;
        }
        __syncthreads();
        if (threadIdx.x < 128) {
            const int kl = threadIdx.x >> 5;
            const long long kb = qc * 4 + kl, r = r0 + lane;
            if (kb < kbs && r < total) a.scale[kb * a.ld_scale + r] = stage[buf][kl][lane];
        }
        rb += drb;
        qc += dq;
        if (qc >= nq) {
            qc -= nq;
            rb++;
        }
    }
}

/* ---- weights: 128 x 128 tiles, both layouts in one pass ---------------- */

/* What kq_tiles computes the scale from. */
#define KQ_BLOCK 0     /* each tile's amax (WEIGHTS_128X128) */
#define KQ_TENSOR 1    /* the group's amax, left in scale[g] by kq_group_amax */
#define KQ_DELAYED 2   /* the given dequantization scale scale[g] (WEIGHTS_TENSOR_DELAYED) */

/* DELAYED: inv = min(1/s, FLT_MAX), the reciprocal correctly rounded (kiln.h). */
KDEV void kq_given_scale(float s, float &inv)
{
    inv = fminf(__frcp_rn(s), __uint_as_float(0x7f7fffffu));
}

/* DELAYED: the CTA's amax bits m (per thread) of one group into *amax
 * (zeroed by the host; float bits, whose unsigned order is float order
 * for |x|): one atomic per CTA and group visited, not per tile (the
 * whole grid works on one or two groups at a time, and atomics on one
 * address serialize).  slot: KQ_WARPS words no thread reads any more;
 * the caller alternates two, so that a slot is written again only after
 * the next flush's barrier, which its reader (thread 0) passed after
 * reading.  Every thread of the CTA calls it (a barrier inside). */
template <class In>
KDEV void kq_flush_group(float *amax, u32 m, u32 *slot)
{
    m = kq_warp_amax(m, 32);
    if ((threadIdx.x & 31) == 0) slot[threadIdx.x >> 5] = m;
    __syncthreads();
    if (threadIdx.x == 0) {
        m = 0;
#pragma unroll
        for (int w = 0; w < KQ_WARPS; ++w) m = max(m, slot[w]);
        if (m) atomicMax((u32 *)amax, __float_as_uint(In::to_f32(m)));
    }
}

/* The transposed copy goes through shared memory as 128 rows of 32 words
 * (4 fp8 bytes each).  Word w of row r sits at column w ^ (4 · (r/16 mod 8)):
 * the 16-byte writes stay whole, and the transposing reads (lane l takes
 * rows 16·(l mod 8) .. +15 of word column 4·warp + l/8) hit 32 banks. */
KDEV int kq_swz(int r, int w) { return r * 32 + (w ^ (((r >> 4) & 7) << 2)); }

/* Rows 16 apart of 4 columns (w[i]: 4 bytes of row i) to 4 columns of 16
 * rows (c[j]: rows 0..15 of column j, as 4 words). */
KDEV void kq_transpose16x4(const u32 *w, uint4 *c)
{
    u32 o[4][4];
#pragma unroll
    for (int k = 0; k < 4; ++k) {
        const u32 w0 = w[4 * k], w1 = w[4 * k + 1], w2 = w[4 * k + 2], w3 = w[4 * k + 3];
        const u32 t0 = __byte_perm(w0, w1, 0x5140), t1 = __byte_perm(w2, w3, 0x5140);
        const u32 t2 = __byte_perm(w0, w1, 0x7362), t3 = __byte_perm(w2, w3, 0x7362);
        o[0][k] = __byte_perm(t0, t1, 0x5410);
        o[1][k] = __byte_perm(t0, t1, 0x7632);
        o[2][k] = __byte_perm(t2, t3, 0x5410);
        o[3][k] = __byte_perm(t2, t3, 0x7632);
    }
#pragma unroll
    for (int j = 0; j < 4; ++j) c[j] = make_uint4(o[j][0], o[j][1], o[j][2], o[j][3]);
}

/* One CTA per tile at a time: thread t loads rows t/8 + 32·i (i < 4) of the
 * tile, units t mod 8; the block's amax (KQ_TENSOR: the group's amax that
 * kq_group_amax left in scale[g]; KQ_DELAYED: the given scale[g], the
 * tile's amax only recorded) gives the scale; q is written from
 * registers, q_t from the shared copy.
 * Barriers: one for the block amax, one before the transposing reads, none
 * at the end of a tile, so that a warp done with its tile issues the next
 * tile's loads while the others still transpose.  That is safe because
 * wmax alternates between two slots (a slot is written again two tiles
 * later, after a barrier that every reader of it passed first) and the
 * tile's shared copy is written only after the next amax barrier, which
 * every transposing read precedes.  TENSOR and DELAYED have no amax
 * barrier: with q_t they keep one at the end of the tile.  DELAYED keeps
 * each thread's amax over the tiles of a group in a register and records
 * it when the CTA's walk leaves the group (kq_flush_group).
 * The grid-stride walk keeps the tile index as digits (g, bn, bk), bk
 * fastest, advanced by gridDim.x with carries: no division per tile (two
 * of them stood between a tile and its loads).  reverse walks tile
 * tiles-1-it, whose digits are the complements of it's (tiles-1 is all
 * maximal digits: no borrow). */
template <class In, class Out, int MODE>
KDEV void kq_tiles(const kq_args &a)
{
    constexpr bool TENSOR = MODE != KQ_BLOCK;  /* one scale per group, no amax barrier */
    __shared__ __align__(16) u32 tile[128 * 32];
    __shared__ u32 wmax[2][KQ_WARPS];
    const long long N = a.rows, K = a.cols;
    /* digits in 32 bits: tn, tk < 2^24 (N, K < 2^31), G <= 65536 */
    const int tn = (int)((N + 127) / 128), tk = (int)((K + 127) / 128), G = a.groups;
    const int dbk = gridDim.x % tk, dbn = gridDim.x / tk % tn, dg = gridDim.x / tk / tn;
    int bki = blockIdx.x % tk, bni = blockIdx.x / tk % tn, gi = blockIdx.x / tk / tn;
    const int tid = threadIdx.x, lr = tid >> 3, lu = tid & 7, warp = tid >> 5;
    const char *in = (const char *)a.in;
    unsigned char *out = (unsigned char *)a.out;
    unsigned char *out_t = (unsigned char *)a.out_t;
    u32 gm = 0;                  /* DELAYED: this thread's amax bits in the current group */
    int fslot = 0;               /* DELAYED: kq_flush_group's slot of wmax */
    for (int slot = 0; gi < G; slot ^= 1) {
        const long long g = a.reverse ? G - 1 - gi : gi;
        const long long bn = a.reverse ? tn - 1 - bni : bni, bk = a.reverse ? tk - 1 - bki : bki;
        const long long r0 = bn * 128, c0 = bk * 128 + lu * 16;
        const bool col_ok = c0 < K;
        const char *gin = in + (g * N * a.ld_in) * 2;
        kq_unit u[4];
        u32 m = MODE == KQ_DELAYED ? gm : 0u;
#pragma unroll
        for (int i = 0; i < 4; ++i) {
            const long long r = r0 + lr + 32 * i;
            if (col_ok && r < N) kq_load(u[i], gin + (r * a.ld_in + c0) * 2);
            else kq_zero(u[i]);
            m = kq_amax_bits(u[i], m);
        }
        float s, inv;
        if (MODE == KQ_DELAYED) {
            gm = m;
            kq_given_scale(a.scale[g], inv);
        } else if (MODE == KQ_TENSOR) {
            kq_scales<Out>(a.scale[g], s, inv);   /* the group's amax, not yet a scale */
        } else {
            m = kq_warp_amax(m, 32);
            if ((tid & 31) == 0) wmax[slot][warp] = m;
            __syncthreads();
            m = 0;
#pragma unroll
            for (int w = 0; w < KQ_WARPS; ++w) m = max(m, wmax[slot][w]);
            kq_scales<Out>(In::to_f32(m), s, inv);
        }
        if (!TENSOR && tid == 0) {
            a.scale[(g * tn + bn) * tk + bk] = s;
            if (a.scale_t) a.scale_t[(g * tk + bk) * tn + bn] = s;
        }
        unsigned char *gout = out + g * N * a.ld_out;
#pragma unroll
        for (int i = 0; i < 4; ++i) {
            const int rl = lr + 32 * i;
            const uint4 q = kq_quant16<In, Out>(u[i], inv);
            if (col_ok && r0 + rl < N) *(uint4 *)(gout + (r0 + rl) * a.ld_out + c0) = q;
            if (out_t) *(uint4 *)&tile[kq_swz(rl, lu * 4)] = q;
        }
        if (out_t) {
            __syncthreads();
            const int a16 = tid & 7, cg = (warp << 2) | ((tid >> 3) & 3);
            u32 w[16];
#pragma unroll
            for (int i = 0; i < 16; ++i) w[i] = tile[kq_swz(a16 * 16 + i, cg)];
            uint4 c[4];
            kq_transpose16x4(w, c);
            const long long rr = r0 + a16 * 16;          /* N % 16 == 0 with out_t */
            unsigned char *gt = out_t + g * K * N;
#pragma unroll
            for (int jj = 0; jj < 4; ++jj) {
                const long long col = bk * 128 + cg * 4 + jj;
                if (rr < N && col < K) *(uint4 *)(gt + col * N + rr) = c[jj];
            }
        }
        if (TENSOR && out_t) __syncthreads();   /* tile is written again next */
        const int gprev = gi;
        bki += dbk;
        bni += dbn;
        gi += dg;
        if (bki >= tk) {
            bki -= tk;
            bni++;
        }
        if (bni >= tn) {
            bni -= tn;
            gi++;
        }
        if (MODE == KQ_DELAYED && gi != gprev) {   /* the CTA leaves group g: record its amax */
            kq_flush_group<In>(a.amax + g, gm, wmax[fslot]);
            gm = 0;
            fslot ^= 1;
        }
    }
}

/* ---- KILN_QUANT_WEIGHTS_TENSOR: the group's amax first ----------------- */

/* amax bits m of the warp into scale[g] (zeroed by the host; it holds the
 * amax as float bits until kq_finalize: for non-negative floats unsigned
 * order is float order). */
template <class In>
KDEV void kq_flush_amax(const kq_args &a, u32 m, long long g)
{
    m = kq_warp_amax(m, 32);
    if ((threadIdx.x & 31) == 0 && g >= 0 && m)
        atomicMax((u32 *)&a.scale[g], __float_as_uint(In::to_f32(m)));
}

/* The grid sweeps the G·N rows front to back, KQ_WARPS · 8 rows per CTA
 * step (8 consecutive rows a warp), so that the last rows it reads are the
 * tensor's last: the quantizing pass walks the tiles last first
 * (args.reverse) and finds those still in L2.  A warp keeps a running amax
 * and flushes it when its group changes: about one atomic per warp step. */
template <class In>
KDEV void kq_group_amax(const kq_args &a)
{
    const long long rows = (long long)a.groups * a.rows, units = a.cols / 16;
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    const char *in = (const char *)a.in;
    u32 m = 0;
    long long g = -1;
    for (long long c = blockIdx.x; c * (KQ_WARPS * 8) < rows; c += gridDim.x) {
        const long long r0 = c * (KQ_WARPS * 8) + warp * 8;
        for (long long r = r0; r < r0 + 8 && r < rows; ++r) {
            const long long rg = r / a.rows;
            if (rg != g) {
                kq_flush_amax<In>(a, m, g);
                m = 0;
                g = rg;
            }
            const char *rin = in + r * a.ld_in * 2;
            long long j = lane;
            for (; j + 96 < units; j += 128) {   /* four loads in flight */
                kq_unit x0, x1, x2, x3;
                kq_load(x0, rin + j * 32);
                kq_load(x1, rin + (j + 32) * 32);
                kq_load(x2, rin + (j + 64) * 32);
                kq_load(x3, rin + (j + 96) * 32);
                m = kq_amax_bits(x3, kq_amax_bits(x2, kq_amax_bits(x1, kq_amax_bits(x0, m))));
            }
            for (; j < units; j += 32) {
                kq_unit x;
                kq_load(x, rin + j * 32);
                m = kq_amax_bits(x, m);
            }
        }
    }
    kq_flush_amax<In>(a, m, g);
}

/* amax to scale, in scale and (if given) scale_t. */
template <class Out>
KDEV void kq_finalize(const kq_args &a)
{
    for (int g = blockIdx.x * KQ_THREADS + threadIdx.x; g < a.groups; g += gridDim.x * KQ_THREADS) {
        float s, inv;
        kq_scales<Out>(a.scale[g], s, inv);
        a.scale[g] = s;
        if (a.scale_t) a.scale_t[g] = s;
    }
}

/* ---- entry points: kiln_quant_<kernel>_<in>_<out> ---------------------- */

/* bounds: __launch_bounds__'s arguments.  The tensor kernel is held to 4
 * CTAs per SM, what its loads in flight were sized for: left free, ptxas
 * gives it 79 registers (3 CTAs).  The others keep (KQ_THREADS) alone:
 * an explicit minimum of 1 changes ptxas' choice (79 to 96 registers). */
#define KQ_ENTRY_B(name, bounds, body)                                                             \
    extern "C" __global__ void __launch_bounds__ bounds name(const kq_args a) { body; }
#define KQ_ENTRY(name, body) KQ_ENTRY_B(name, (KQ_THREADS), body)

#define KQ_TYPED(in_n, In, out_n, Out)                                                             \
    KQ_ENTRY(kiln_quant_rows_##in_n##_##out_n, (kq_rows<In, Out>(a)))                              \
    KQ_ENTRY(kiln_quant_rows_1x128_##in_n##_##out_n, (kq_rows_1x128<In, Out>(a)))                  \
    KQ_ENTRY(kiln_quant_tiles_##in_n##_##out_n, (kq_tiles<In, Out, KQ_BLOCK>(a)))                  \
    KQ_ENTRY_B(kiln_quant_tensor_##in_n##_##out_n, (KQ_THREADS, 4),                                \
               (kq_tiles<In, Out, KQ_TENSOR>(a)))                                                  \
    KQ_ENTRY_B(kiln_quant_delayed_##in_n##_##out_n, (KQ_THREADS, 4),                               \
               (kq_tiles<In, Out, KQ_DELAYED>(a)))

KQ_TYPED(bf16, kq_bf16, e4m3, kq_e4m3)
KQ_TYPED(bf16, kq_bf16, e5m2, kq_e5m2)
KQ_TYPED(fp16, kq_f16, e4m3, kq_e4m3)
KQ_TYPED(fp16, kq_f16, e5m2, kq_e5m2)
KQ_ENTRY(kiln_quant_amax_bf16, (kq_group_amax<kq_bf16>(a)))
KQ_ENTRY(kiln_quant_amax_fp16, (kq_group_amax<kq_f16>(a)))
KQ_ENTRY(kiln_quant_finalize_e4m3, (kq_finalize<kq_e4m3>(a)))
KQ_ENTRY(kiln_quant_finalize_e5m2, (kq_finalize<kq_e5m2>(a)))
