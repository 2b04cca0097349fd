// simple_gemm.cuh — a plain, portable grouped GEMM (templates/simple.lua).
//
// Self-contained (no includes at all), compiles with NVRTC -std=c++17 for
// sm_80 and later.  256 threads, fp32 accumulation, one output tile at a time:
//   - tensor cores (KS_MMA, bf16/fp16 with A and B of one type): 16-bit
//     shared tiles, 8 warps as 2x4, mma.sync m16n8k16 (ldmatrix.trans for
//     operands stored k-major), the next k-tile's global loads kept in
//     registers while the current one is multiplied;
//   - FMA otherwise: fp32 shared tiles, a (BM/16)x(BN/16) micro-tile a thread.
// The kernel is persistent: a grid-stride loop over tiles, with every CTA
// walking the group sizes in chunks (sizes live on the device and are never
// copied to the host).  Group count: any (int); the scan costs O(G) per CTA.
//
// Operand views (rows = token dimension of the group, see kernel_abi.h):
//   fprop  D[r,n] = sum_k A[r,k] * W_g[n,k]      tiles: (group, row tile, n tile)
//   dgrad  D[r,k] = sum_n A[r,n] * W_g[n,k]      tiles: (group, row tile, k tile)
//   wgrad  D_g[n,k] = sum_{r in g} A[r,n] * B[r,k]   tiles: (group, n tile, k tile)
// Rows at or past args.capacity are neither read nor written.

// ---- element types -------------------------------------------------------

struct ks_bf16 {
    typedef unsigned short storage;
    static __device__ __forceinline__ float to_float(storage v)
    {
        return __uint_as_float(((unsigned int)v) << 16);
    }
    static __device__ __forceinline__ storage from_float(float f)
    {
        unsigned int u = __float_as_uint(f);
        if ((u & 0x7fffffffu) > 0x7f800000u) return (storage)((u >> 16) | 0x40u);  // quiet NaN
        u += 0x7fffu + ((u >> 16) & 1u);                                           // nearest even
        return (storage)(u >> 16);
    }
    static __device__ __forceinline__ void mma(float *d, const unsigned int *a,
                                               const unsigned int *b)
    {
        asm volatile(
            "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 "
            "{%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"
            : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
            : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
    }
};

struct ks_fp16 {
    typedef unsigned short storage;
    static __device__ __forceinline__ float to_float(storage v)
    {
        float f;
        asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(v));
        return f;
    }
    static __device__ __forceinline__ storage from_float(float f)
    {
        unsigned short h;
        asm("cvt.rn.f16.f32 %0, %1;" : "=h"(h) : "f"(f));
        return h;
    }
    static __device__ __forceinline__ void mma(float *d, const unsigned int *a,
                                               const unsigned int *b)
    {
        asm volatile(
            "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 "
            "{%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"
            : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
            : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
    }
};

struct ks_f32 {
    typedef float storage;
    static __device__ __forceinline__ float to_float(storage v) { return v; }
    static __device__ __forceinline__ storage from_float(float f) { return f; }
};

// ---- compile-time options --------------------------------------------------

enum {
    KS_OP_FPROP = 0,
    KS_OP_DGRAD = 1,
    KS_OP_WGRAD = 2,
};

enum {
    KS_BIAS = 1,             // per-group bias [G, n_out]
    KS_ROW_SCALE = 2,        // per-row scale s[r]
    KS_SCALE_BIAS = 4,       // s[r] also scales the bias (with args.scale_bias)
    KS_ALPHA_PER_GROUP = 8,  // alpha_ptr[g] when given, else args.alpha
    KS_BETA = 16,            // beta * C
    KS_B_PTRS = 32,          // weights may come as a pointer array
    KS_ACCUMULATE = 64,      // wgrad: D += sum (fp32 out) when args.accumulate
    KS_DISCRETE = 128,       // wgrad: output through args.d_ptrs
    KS_MMA = 256,            // tensor cores (16-bit A == B type, tiles >= 32)
    KS_DBIAS = 512,          // wgrad: also db[g,n] = sum of A[t,n] over g's rows
};

#define KS_THREADS 256
#define KS_CHUNK 512          // groups scanned per step
#define KS_GPT (KS_CHUNK / KS_THREADS)
#define KS_PAD 1

// ---- group sizes: a streaming prefix sum over chunks of groups ----------

struct ks_groups {
    long long start[KS_CHUNK];    // first row of the group
    int rows[KS_CHUNK];           // rows of the group below capacity
    int rt_end[KS_CHUNK];         // cumulative row tiles, inclusive, over all groups
    long long warp_sums[KS_THREADS / 32];
};

// Exclusive block scan of one value per thread; *total gets the sum.
__device__ __forceinline__ long long ks_block_scan(long long v, long long *warp_sums,
                                                   long long *total)
{
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    long long x = v;
#pragma unroll
    for (int o = 1; o < 32; o <<= 1) {
        long long y = __shfl_up_sync(0xffffffffu, x, o);
        if (lane >= o) x += y;
    }
    if (lane == 31) warp_sums[warp] = x;
    __syncthreads();
    if (warp == 0) {
        long long w = lane < KS_THREADS / 32 ? warp_sums[lane] : 0;
#pragma unroll
        for (int o = 1; o < 32; o <<= 1) {
            long long y = __shfl_up_sync(0xffffffffu, w, o);
            if (lane >= o) w += y;
        }
        if (lane < KS_THREADS / 32) warp_sums[lane] = w;
    }
    __syncthreads();
    long long base = warp > 0 ? warp_sums[warp - 1] : 0;
    *total = warp_sums[KS_THREADS / 32 - 1];
    __syncthreads();
    return base + x - v;
}

// The cursor every thread of a CTA holds identically.
struct ks_cursor {
    int base, len;                // groups [base, base + len) are in shared memory
    long long rows_before;        // sum of (unclamped) sizes before base + len
    long long rt_before;          // row tiles before base + len
};

// Loads the next chunk of groups into g and advances c.  Block-uniform.
template <int BM>
__device__ __forceinline__ void ks_load_chunk(const kiln_kernel_args &args, ks_groups &g,
                                              ks_cursor &c)
{
    __syncthreads();  // nobody still reads the previous chunk
    const int first = c.base + c.len;
    const int count = min(KS_CHUNK, args.groups - first);
    long long m[KS_GPT];
    long long local = 0;
#pragma unroll
    for (int j = 0; j < KS_GPT; j++) {
        const int i = threadIdx.x * KS_GPT + j;
        long long v = 0;
        if (i < count) {
            const int gi = first + i;
            if (args.sizes_are_offsets)
                v = (long long)args.sizes[gi] - (gi > 0 ? (long long)args.sizes[gi - 1] : 0);
            else
                v = args.sizes[gi];
            if (v < 0) v = 0;
        }
        m[j] = v;
        local += v;
    }
    long long total;
    long long start = c.rows_before + ks_block_scan(local, g.warp_sums, &total);
    const long long cap = args.capacity;
    int tiles[KS_GPT];
    long long local_tiles = 0;
#pragma unroll
    for (int j = 0; j < KS_GPT; j++) {
        long long end = start + m[j];
        if (end > cap) end = cap;
        long long rows = end - start;
        if (rows < 0) rows = 0;
        const int i = threadIdx.x * KS_GPT + j;
        g.start[i] = start;
        g.rows[i] = (int)rows;
        tiles[j] = (int)((rows + BM - 1) / BM);
        local_tiles += tiles[j];
        start += m[j];
    }
    long long total_tiles;
    long long t = c.rt_before + ks_block_scan(local_tiles, g.warp_sums, &total_tiles);
#pragma unroll
    for (int j = 0; j < KS_GPT; j++) {
        t += tiles[j];
        g.rt_end[threadIdx.x * KS_GPT + j] = (int)t;
    }
    c.base = first;
    c.len = count;
    c.rows_before += total;
    c.rt_before += total_tiles;
    __syncthreads();
}

// ---- FMA path: fp32 shared-memory tiles -----------------------------------

// Element (kk, cc) of the tile is at base[kk * stride_k + cc * stride_c] when
// kk < lim_k and cc < lim_c, else 0.  CONTIG_K: consecutive threads walk kk
// (the contiguous global dimension), else cc.
template <class T, int BK, int COLS, bool CONTIG_K>
__device__ __forceinline__ void ks_load_tile(float (*s)[COLS + KS_PAD],
                                             const typename T::storage *base,
                                             long long stride_k, long long stride_c,
                                             long long lim_k, long long lim_c)
{
#pragma unroll 4
    for (int idx = threadIdx.x; idx < BK * COLS; idx += KS_THREADS) {
        const int kk = CONTIG_K ? idx % BK : idx / COLS;
        const int cc = CONTIG_K ? idx / BK : idx % COLS;
        float v = 0.0f;
        if (kk < lim_k && cc < lim_c) v = T::to_float(base[kk * stride_k + cc * stride_c]);
        s[kk][cc] = v;
    }
}

// One output tile with FMA: each thread owns a (BM/16)x(BN/16) micro-tile.
// Operand X (A or B) tile element (kk, cc) is at x[kk * x_sk + cc * x_sc].
template <class TA, class TB, int BM, int BN, int BK, bool ACK, bool BCK, class Emit>
__device__ __forceinline__ void ks_tile_fma(const typename TA::storage *a, long long a_sk,
                                            long long a_sc, long long a_lim,
                                            const typename TB::storage *b, long long b_sk,
                                            long long b_sc, long long b_lim, long long red,
                                            Emit &emit)
{
    constexpr int TM = BM / 16, TN = BN / 16;
    __shared__ float As[BK][BM + KS_PAD];
    __shared__ float Bs[BK][BN + KS_PAD];
    const int tx = threadIdx.x & 15, ty = threadIdx.x >> 4;
    float acc[TM][TN];
#pragma unroll
    for (int i = 0; i < TM; i++)
#pragma unroll
        for (int j = 0; j < TN; j++) acc[i][j] = 0.0f;
    for (long long k0 = 0; k0 < red; k0 += BK) {
        ks_load_tile<TA, BK, BM, ACK>(As, a + k0 * a_sk, a_sk, a_sc, red - k0, a_lim);
        ks_load_tile<TB, BK, BN, BCK>(Bs, b + k0 * b_sk, b_sk, b_sc, red - k0, b_lim);
        __syncthreads();
#pragma unroll 8
        for (int kk = 0; kk < BK; kk++) {
            float av[TM], bv[TN];
#pragma unroll
            for (int i = 0; i < TM; i++) av[i] = As[kk][ty + 16 * i];
#pragma unroll
            for (int j = 0; j < TN; j++) bv[j] = Bs[kk][tx + 16 * j];
#pragma unroll
            for (int i = 0; i < TM; i++)
#pragma unroll
                for (int j = 0; j < TN; j++) acc[i][j] = fmaf(av[i], bv[j], acc[i][j]);
        }
        __syncthreads();
    }
#pragma unroll
    for (int i = 0; i < TM; i++)
#pragma unroll
        for (int j = 0; j < TN; j++) emit(ty + 16 * i, tx + 16 * j, acc[i][j]);
}

// ---- tensor-core path: mma.sync m16n8k16 on 16-bit shared-memory tiles ----

struct alignas(16) ks_v4 {
    unsigned int x, y, z, w;
};

// ldmatrix .trans: fragments of mma.sync from a tile stored with the
// fragment's contiguous dimension across rows (sm_75 and later).
__device__ __forceinline__ unsigned int ks_smem_addr(const void *p)
{
    unsigned int a;
    asm("{ .reg .u64 t; cvta.to.shared.u64 t, %1; cvt.u32.u64 %0, t; }" : "=r"(a) : "l"(p));
    return a;
}

__device__ __forceinline__ void ks_ldmatrix_x4_trans(unsigned int *r, const unsigned short *p)
{
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(ks_smem_addr(p)));
}

__device__ __forceinline__ void ks_ldmatrix_x2_trans(unsigned int *r, const unsigned short *p)
{
    asm volatile("ldmatrix.sync.aligned.m8n8.x2.trans.shared.b16 {%0,%1}, [%2];"
                 : "=r"(r[0]), "=r"(r[1])
                 : "r"(ks_smem_addr(p)));
}

// One operand tile in flight: fetch() loads it from global memory into
// registers (so the next tile's loads overlap the current tile's math),
// store() writes it to shared memory (16-bit raw bits, 0 outside kk < lim_k,
// cc < lim_c) in the global layout: CONTIG_K: the element (kk, cc) is at
// base[cc * ld + kk], else at base[kk * ld + cc].  Each chunk is 8 elements
// along the contiguous dimension: one 16-byte load where aligned, one 16-byte
// shared store always.
template <int ROWS, int BK, bool CONTIG_K>
struct ks_stage16 {
    static constexpr int CHUNKS = ROWS * BK / 8;
    static constexpr int ITER = (CHUNKS + KS_THREADS - 1) / KS_THREADS;
    ks_v4 v[ITER];

    static __device__ __forceinline__ void coords(int idx, int &kk, int &cc)
    {
        if (CONTIG_K) {
            kk = (idx % (BK / 8)) * 8;
            cc = idx / (BK / 8);
        } else {
            cc = (idx % (ROWS / 8)) * 8;
            kk = idx / (ROWS / 8);
        }
    }

    __device__ __forceinline__ void fetch(const unsigned short *base, long long ld,
                                          long long lim_k, long long lim_c)
    {
        const bool vec = (ld & 7) == 0 && (((unsigned long long)base) & 15) == 0;
#pragma unroll
        for (int it = 0; it < ITER; it++) {
            const int idx = threadIdx.x + it * KS_THREADS;
            ks_v4 x = {0u, 0u, 0u, 0u};
            int kk, cc;
            coords(idx, kk, cc);
            const bool inside = idx < CHUNKS && (CONTIG_K ? cc < lim_c : kk < lim_k);
            if (inside) {
                const unsigned short *p = CONTIG_K ? base + cc * ld + kk : base + kk * ld + cc;
                const long long run = CONTIG_K ? lim_k - kk : lim_c - cc;
                if (vec && run >= 8) {
                    x = *(const ks_v4 *)p;
                } else {
                    unsigned int w[4] = {0u, 0u, 0u, 0u};
#pragma unroll
                    for (int e = 0; e < 8; e++)
                        if (e < run) w[e >> 1] |= ((unsigned int)p[e]) << (16 * (e & 1));
                    x.x = w[0];
                    x.y = w[1];
                    x.z = w[2];
                    x.w = w[3];
                }
            }
            v[it] = x;
        }
    }

    // Shared layout: CONTIG_K ? [ROWS][BK + 8] (k contiguous)
    //                          : [BK][ROWS + 8] (as in global memory).
    static constexpr int LD = CONTIG_K ? BK + 8 : ROWS + 8;
    static constexpr int SROWS = CONTIG_K ? ROWS : BK;

    __device__ __forceinline__ void store(unsigned short *s) const
    {
#pragma unroll
        for (int it = 0; it < ITER; it++) {
            const int idx = threadIdx.x + it * KS_THREADS;
            if (idx >= CHUNKS) continue;
            int kk, cc;
            coords(idx, kk, cc);
            *(ks_v4 *)&s[CONTIG_K ? cc * LD + kk : kk * LD + cc] = v[it];
        }
    }
};

// One output tile with mma.sync: 8 warps as 2 (M) x 4 (N), each warp a
// (BM/2)x(BN/4) tile of m16n8 fragments.  ACK/BCK as CONTIG_K of ks_stage16; lda/ldb
// are the operands' global row strides.
template <class T, int BM, int BN, int BK, bool ACK, bool BCK, class Emit>
__device__ __forceinline__ void ks_tile_mma(const unsigned short *a, long long lda, long long a_lim,
                                            const unsigned short *b, long long ldb, long long b_lim,
                                            long long red, Emit &emit)
{
    constexpr int WM = BM / 2, WN = BN / 4, MT = WM / 16, NT = WN / 8;
    typedef ks_stage16<BM, BK, ACK> stage_a;
    typedef ks_stage16<BN, BK, BCK> stage_b;
    __shared__ alignas(16) unsigned short As[stage_a::SROWS * stage_a::LD];
    __shared__ alignas(16) unsigned short Bs[stage_b::SROWS * stage_b::LD];
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    const int wm = warp >> 2, wn = warp & 3, gq = lane >> 2, tg = lane & 3;
    float acc[MT][NT][4];
#pragma unroll
    for (int i = 0; i < MT; i++)
#pragma unroll
        for (int j = 0; j < NT; j++)
#pragma unroll
            for (int e = 0; e < 4; e++) acc[i][j][e] = 0.0f;
    stage_a sa;
    stage_b sb;
    if (red > 0) {
        sa.fetch(a, lda, red, a_lim);
        sb.fetch(b, ldb, red, b_lim);
    }
    for (long long k0 = 0; k0 < red; k0 += BK) {
        sa.store(As);
        sb.store(Bs);
        __syncthreads();
        const long long k1 = k0 + BK;
        if (k1 < red) {  // next tile's loads in flight during this tile's math
            sa.fetch(a + (ACK ? k1 : k1 * lda), lda, red - k1, a_lim);
            sb.fetch(b + (BCK ? k1 : k1 * ldb), ldb, red - k1, b_lim);
        }
#pragma unroll
        for (int ks = 0; ks < BK; ks += 16) {
            unsigned int af[MT][4], bf[NT][2];
#pragma unroll
            for (int i = 0; i < MT; i++) {
                const int m0 = wm * WM + i * 16;
                if (ACK) {  // As[m][k]: pairs along k are 32-bit words
                    constexpr int L = stage_a::LD;
                    const int r = m0 + gq;
                    af[i][0] = *(const unsigned int *)&As[r * L + ks + tg * 2];
                    af[i][1] = *(const unsigned int *)&As[(r + 8) * L + ks + tg * 2];
                    af[i][2] = *(const unsigned int *)&As[r * L + ks + tg * 2 + 8];
                    af[i][3] = *(const unsigned int *)&As[(r + 8) * L + ks + tg * 2 + 8];
                } else {    // As[k][m]: transposing loads
                    constexpr int L = stage_a::LD;
                    const int row = ks + (lane & 7) + ((lane >> 4) << 3);
                    const int col = m0 + ((lane >> 3) & 1) * 8;
                    ks_ldmatrix_x4_trans(af[i], &As[row * L + col]);
                }
            }
#pragma unroll
            for (int j = 0; j < NT; j++) {
                const int n0 = wn * WN + j * 8;
                if (BCK) {  // Bs[n][k]
                    constexpr int L = stage_b::LD;
                    const int c = n0 + gq;
                    bf[j][0] = *(const unsigned int *)&Bs[c * L + ks + tg * 2];
                    bf[j][1] = *(const unsigned int *)&Bs[c * L + ks + tg * 2 + 8];
                } else {    // Bs[k][n]
                    constexpr int L = stage_b::LD;
                    ks_ldmatrix_x2_trans(bf[j], &Bs[(ks + (lane & 15)) * L + n0]);
                }
            }
#pragma unroll
            for (int i = 0; i < MT; i++)
#pragma unroll
                for (int j = 0; j < NT; j++) T::mma(acc[i][j], af[i], bf[j]);
        }
        __syncthreads();
    }
#pragma unroll
    for (int i = 0; i < MT; i++)
#pragma unroll
        for (int j = 0; j < NT; j++)
#pragma unroll
            for (int e = 0; e < 4; e++)
                emit(wm * WM + i * 16 + gq + (e >> 1) * 8, wn * WN + j * 8 + tg * 2 + (e & 1),
                     acc[i][j][e]);
}

// ---- the bias gradient (wgrad, KS_DBIAS) -----------------------------------

// db[g, row0 .. row0+BM) = sum over the group's rows t of A[t, n], by the CTA
// of the group's first column tile: thread (c, p) adds rows p, p + P, ... of
// column row0 + c (a warp reads consecutive n: coalesced), then the P
// partials of a column are added in a fixed order (deterministic).  f32 or
// the output type (args.dbias_f32); accumulate adds to f32 db.  An empty
// group writes zeros (its accumulate case never gets here).
template <class TA, class TO, int BM>
__device__ __forceinline__ void ks_dbias(const kiln_kernel_args &args,
                                         const typename TA::storage *A, long long lda,
                                         long long g, long long gstart, int grows,
                                         long long row0, long long N, bool accumulate)
{
    __shared__ float part[KS_THREADS];
    constexpr int P = KS_THREADS / BM;
    const int c = threadIdx.x % BM, p = threadIdx.x / BM;
    const long long n = row0 + c;
    float s = 0.0f;
    if (n < N)
        for (long long t = p; t < grows; t += P) s += TA::to_float(A[(gstart + t) * lda + n]);
    part[threadIdx.x] = s;
    __syncthreads();
    if (p == 0 && n < N) {
        float v = 0.0f;
        for (int q = 0; q < P; q++) v += part[q * BM + c];
        const bool f32 = args.dbias_f32 || sizeof(typename TO::storage) == 4;
        char *db = args.dbias_ptrs ? (char *)args.dbias_ptrs[g]
                                   : (char *)args.dbias + g * args.ld_dbias * (f32 ? 4 : 2);
        if (f32) {
            float *q = (float *)db + n;
            *q = accumulate ? *q + v : v;
        } else {
            ((typename TO::storage *)db)[n] = TO::from_float(v);
        }
    }
    __syncthreads();   // part is reused by the next tile
}

// ---- the kernel body -------------------------------------------------------

template <int OP, class TA, class TB, class TO, int BM, int BN, int BK, int FLAGS>
__device__ __forceinline__ void ks_gemm(const kiln_kernel_args &args)
{
    __shared__ ks_groups groups;

    const long long N = args.n, K = args.k;
    const long long n_out = OP == KS_OP_FPROP ? N : K;     // columns of D
    const long long red_fd = OP == KS_OP_FPROP ? K : N;    // fprop/dgrad reduction
    const long long lda = args.lda > 0 ? args.lda : (OP == KS_OP_FPROP ? K : N);
    const long long ldb = args.ldb > 0 ? args.ldb : K;
    const long long ldd = args.ldd > 0 ? args.ldd : (OP == KS_OP_WGRAD ? K : n_out);
    const long long ldc = args.ldc > 0 ? args.ldc : n_out;
    const long long ld_bias = args.ld_bias > 0 ? args.ld_bias : n_out;

    const typename TA::storage *A = (const typename TA::storage *)args.a;

    ks_cursor cur;
    cur.base = 0;
    cur.len = 0;
    cur.rows_before = 0;
    cur.rt_before = 0;
    if (args.groups > 0) ks_load_chunk<BM>(args, groups, cur);

    // Tiles of D: wgrad has a fixed count; fprop/dgrad depend on the sizes.
    const long long tiles_m = OP == KS_OP_WGRAD ? (N + BM - 1) / BM : 0;
    const long long tiles_n = ((OP == KS_OP_WGRAD ? K : n_out) + BN - 1) / BN;

    for (long long t = blockIdx.x; args.groups > 0 && tiles_n > 0; t += gridDim.x) {
        int gi;                   // index into the chunk in shared memory
        long long row0, row_end;  // D rows of the tile (fprop/dgrad) or n rows (wgrad)
        long long col0;
        if (OP == KS_OP_WGRAD) {
            const long long per_group = tiles_m * tiles_n;
            if (per_group == 0) break;
            const long long g = t / per_group;
            if (g >= args.groups) break;
            while (g >= cur.base + cur.len) ks_load_chunk<BM>(args, groups, cur);
            gi = (int)(g - cur.base);
            const long long rest = t % per_group;
            row0 = (rest / tiles_n) * BM;
            row_end = N;
            col0 = (rest % tiles_n) * BN;
        } else {
            const long long rt = t / tiles_n;
            while (rt >= cur.rt_before && cur.base + cur.len < args.groups)
                ks_load_chunk<BM>(args, groups, cur);
            if (rt >= cur.rt_before) break;  // past the last tile
            // First group of the chunk whose cumulative row tiles exceed rt.
            int lo = 0, hi = cur.len - 1;
            while (lo < hi) {
                const int mid = (lo + hi) >> 1;
                if (groups.rt_end[mid] > rt) hi = mid;
                else lo = mid + 1;
            }
            gi = lo;
            const int rows = groups.rows[gi];
            const long long first_rt = groups.rt_end[gi] - (rows + BM - 1) / BM;
            row0 = groups.start[gi] + (rt - first_rt) * BM;
            row_end = groups.start[gi] + rows;
            col0 = (t % tiles_n) * BN;
        }
        const long long g = cur.base + gi;
        const long long gstart = groups.start[gi];
        const int grows = groups.rows[gi];

        // wgrad accumulate into an empty group: leave D exactly as it was.
        if (OP == KS_OP_WGRAD && (FLAGS & KS_ACCUMULATE) && args.accumulate && grows == 0)
            continue;

        const typename TB::storage *Bg;
        if (OP == KS_OP_WGRAD) {
            Bg = (const typename TB::storage *)args.b;
        } else if ((FLAGS & KS_B_PTRS) && args.b_ptrs) {
            Bg = (const typename TB::storage *)args.b_ptrs[g];
        } else {
            Bg = (const typename TB::storage *)args.b + g * N * ldb;
        }

        // Output of one element at (lr, lc) inside the tile.
        typename TO::storage *Dg = (typename TO::storage *)args.d;
        if (OP == KS_OP_WGRAD) {
            if ((FLAGS & KS_DISCRETE) && args.d_ptrs) Dg = (typename TO::storage *)args.d_ptrs[g];
            else Dg = (typename TO::storage *)args.d + g * N * ldd;
        }
        const bool accumulate = OP == KS_OP_WGRAD && (FLAGS & KS_ACCUMULATE) && args.accumulate;
        float alpha = args.alpha;
        if ((FLAGS & KS_ALPHA_PER_GROUP) && args.alpha_ptr) alpha = args.alpha_ptr[g];
        const typename TO::storage *bias = 0;
        if ((FLAGS & KS_BIAS) && args.bias)
            bias = (const typename TO::storage *)args.bias + g * ld_bias;
        const float *row_scale = (FLAGS & KS_ROW_SCALE) ? args.row_scale : 0;
        const bool scale_bias = (FLAGS & KS_SCALE_BIAS) && args.scale_bias;
        const float beta = args.beta;
        const typename TO::storage *C = 0;
        if ((FLAGS & KS_BETA) && args.c && beta != 0.0f) C = (const typename TO::storage *)args.c;
        const long long cols = OP == KS_OP_WGRAD ? K : n_out;
        if constexpr (OP == KS_OP_WGRAD && (FLAGS & KS_DBIAS) != 0) {
            // not instantiated without KS_DBIAS: other kernels stay as they were
            if (col0 == 0 && (args.dbias || args.dbias_ptrs))
                ks_dbias<TA, TO, BM>(args, A, lda, g, gstart, grows, row0, N, accumulate);
        }

        auto emit = [&](int lr, int lc, float v) {
            const long long r = row0 + lr, c = col0 + lc;
            if (r >= row_end || c >= cols) return;
            typename TO::storage *p = Dg + r * ldd + c;
            if (OP == KS_OP_WGRAD) {
                if (accumulate) v += TO::to_float(*p);
            } else {
                // D = s*alpha*acc + s_bias*bias[g] + beta*C
                const float s = row_scale ? row_scale[r] : 1.0f;
                v *= s * alpha;
                if (bias) v = fmaf(scale_bias ? s : 1.0f, TO::to_float(bias[c]), v);
                if (C) v = fmaf(beta, TO::to_float(C[r * ldc + c]), v);
            }
            *p = TO::from_float(v);
        };

        // Operand tiles: element (kk, cc) of A is at a[kk * a_sk + cc * a_sc],
        // of B at b[kk * b_sk + cc * b_sc]; kk runs over the reduction.
        const typename TA::storage *a;
        const typename TB::storage *b;
        long long a_sk, a_sc, b_sk, b_sc, a_lim, b_lim, red;
        if (OP == KS_OP_FPROP) {         // A[r, k], W[n, k]
            a = A + row0 * lda; a_sk = 1; a_sc = lda; a_lim = row_end - row0;
            b = Bg + col0 * ldb; b_sk = 1; b_sc = ldb; b_lim = N - col0;
            red = red_fd;
        } else if (OP == KS_OP_DGRAD) {  // A[r, n], W[n, k]
            a = A + row0 * lda; a_sk = 1; a_sc = lda; a_lim = row_end - row0;
            b = Bg + col0; b_sk = ldb; b_sc = 1; b_lim = K - col0;
            red = red_fd;
        } else {                         // dY[r, n] as [n, r], X[r, k]
            a = A + gstart * lda + row0; a_sk = lda; a_sc = 1; a_lim = N - row0;
            b = Bg + gstart * ldb + col0; b_sk = ldb; b_sc = 1; b_lim = K - col0;
            red = grows;
        }
        constexpr bool ACK = OP != KS_OP_WGRAD;   // A contiguous along the reduction
        constexpr bool BCK = OP == KS_OP_FPROP;   // B contiguous along the reduction
        if constexpr ((FLAGS & KS_MMA) != 0) {
            ks_tile_mma<TA, BM, BN, BK, ACK, BCK>(
                (const unsigned short *)a, ACK ? a_sc : a_sk, a_lim,
                (const unsigned short *)b, BCK ? b_sc : b_sk, b_lim, red, emit);
        } else {
            ks_tile_fma<TA, TB, BM, BN, BK, ACK, BCK>(a, a_sk, a_sc, a_lim, b, b_sk, b_sc, b_lim,
                                                      red, emit);
        }
    }

    // Overflow: CTA 0 finishes the scan of all sizes and compares with capacity.
    if (blockIdx.x == 0 && args.overflow && args.groups > 0) {
        while (cur.base + cur.len < args.groups) ks_load_chunk<BM>(args, groups, cur);
        if (threadIdx.x == 0 && cur.rows_before > args.capacity) *args.overflow = 1;
    }
}
