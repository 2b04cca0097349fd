/*
 * sm90_tma_store.cuh — the asynchronous store side of an sm_90a epilogue:
 * wgmma accumulator fragments -> a 128B-swizzled box in shared memory ->
 * one bulk tensor store (or reduce-add) issued by one thread, completing in
 * the background while the tensor cores go on with the next tile.
 *
 * Self-contained apart from sm90_ptx.cuh (KDEV, kiln_u32, kiln_smem_addr,
 * kiln_pack2, kiln_tmap); paste it after that.  Nothing here reads a
 * template's preamble: the element size is a template argument, so the
 * forward-pass templates can use it as is.
 *
 * The unit is one warp's box: 16 rows (the warp's rows of an m64 wgmma
 * fragment) x 128 bytes (64 16-bit or 32 fp32 columns), 2048 bytes,
 * 1024-byte aligned, 128-byte swizzle — the layout a tensor map with
 * box {128 / elem, 16} and CU_TENSOR_MAP_SWIZZLE_128B reads.  16-byte chunk
 * c of row r sits at r*128 + ((c ^ (r & 7)) * 16).
 *
 * Protocol per box (the caller's loop):
 *   lane 0: kiln_bulk_wait_read<BUFS - 1>() before writing a buffer again;
 *   __syncwarp(); kiln_box_from_frag<ESZ>(...); kiln_fence_async_smem();
 *   __syncwarp(); lane 0: kiln_tma_store_2d(...); kiln_bulk_commit();
 *   advance the buffer only after a commit (a box written by hand instead
 *   is free again after the __syncwarp that follows its reads);
 *   before exit lane 0: kiln_bulk_wait<0>() (shared memory must outlive
 *   the reads of the last stores).
 */

/* ------------------------------------------------------------ bulk PTX */

KDEV void kiln_tma_store_2d(kiln_u32 src, const kiln_tmap *map, int c0, int c1)
{
    asm volatile("cp.async.bulk.tensor.2d.global.shared::cta.bulk_group [%0, {%2, %3}], [%1];"
                 :: "l"((kiln_u64)map), "r"(src), "r"(c0), "r"(c1) : "memory");
}
KDEV void kiln_tma_reduce_add_2d(kiln_u32 src, const kiln_tmap *map, int c0, int c1)
{
    asm volatile("cp.reduce.async.bulk.tensor.2d.global.shared::cta.add.tile.bulk_group"
                 " [%0, {%2, %3}], [%1];"
                 :: "l"((kiln_u64)map), "r"(src), "r"(c0), "r"(c1) : "memory");
}
KDEV void kiln_bulk_commit() { asm volatile("cp.async.bulk.commit_group;" ::: "memory"); }
/* the newest N bulk groups of this thread may still be reading shared memory */
template <int N> KDEV void kiln_bulk_wait_read()
{
    asm volatile("cp.async.bulk.wait_group.read %0;" :: "n"(N) : "memory");
}
template <int N> KDEV void kiln_bulk_wait()
{
    asm volatile("cp.async.bulk.wait_group %0;" :: "n"(N) : "memory");
}
/* generic-proxy writes to shared memory, made visible to the bulk copy engine */
KDEV void kiln_fence_async_smem() { asm volatile("fence.proxy.async.shared::cta;" ::: "memory"); }

KDEV void kiln_stmatrix_x4(kiln_u32 addr, kiln_u32 r0, kiln_u32 r1, kiln_u32 r2, kiln_u32 r3)
{
    asm volatile("stmatrix.sync.aligned.m8n8.x4.shared.b16 [%0], {%1, %2, %3, %4};"
                 :: "r"(addr), "r"(r0), "r"(r1), "r"(r2), "r"(r3) : "memory");
}

/* --------------------------------------------------- fragment -> box */

/* One warp writes its 16 x (128 / ESZ) piece of a wgmma m64nN fp32
 * fragment into the swizzled box at `box` (shared memory, 1024-aligned).
 * `a` points at the fragment's accumulators for these columns: 8-column
 * block j holds a[4j], a[4j+1] (row lane/4, columns 2*(lane%4) + {0,1})
 * and a[4j+2], a[4j+3] (row lane/4 + 8).  ESZ 2: converted with kiln_pack2
 * (the template's 16-bit output type) and written with stmatrix, four
 * 16x16 pieces; ESZ 4: fp32 as is, float2 stores. */
template <int ESZ> KDEV void kiln_box_from_frag(unsigned char *box, const float *a, int lane)
{
    if (ESZ == 2) {
        /* stmatrix x4 matrices: (rows 0-7, block 2p), (rows 8-15, block 2p),
         * (rows 0-7, block 2p+1), (rows 8-15, block 2p+1); lane l gives
         * the address of row l%8 of matrix l/8 */
        const int row = (lane & 7) + ((lane >> 3) & 1) * 8;
        const kiln_u32 base = kiln_smem_addr(box) + row * 128;
#pragma unroll
        for (int p = 0; p < 4; ++p) {
            const int c16 = 2 * p + (lane >> 4);
            kiln_stmatrix_x4(base + ((c16 ^ (row & 7)) << 4),
                             kiln_pack2(a[8 * p + 0], a[8 * p + 1]),
                             kiln_pack2(a[8 * p + 2], a[8 * p + 3]),
                             kiln_pack2(a[8 * p + 4], a[8 * p + 5]),
                             kiln_pack2(a[8 * p + 6], a[8 * p + 7]));
        }
    } else {
        const int r = lane >> 2;
#pragma unroll
        for (int j = 0; j < 4; ++j) {
            const int c = 8 * j + 2 * (lane & 3);
            const int off = ((c >> 2) ^ r) * 16 + (c & 3) * 4;
            *(float2 *)(box + r * 128 + off) = make_float2(a[4 * j], a[4 * j + 1]);
            *(float2 *)(box + (r + 8) * 128 + off) = make_float2(a[4 * j + 2], a[4 * j + 3]);
        }
    }
}

/* The by-hand store of a box (a box that a tensor store must not write
 * whole: its rows would run into the next group's): rows [0, rows) and
 * bytes [0, bytes) of each (bytes a multiple of 16) to dst, row pitch
 * ld_bytes.  Lane l copies 16-byte chunk l%8 of rows l/8, l/8 + 4, ... */
KDEV void kiln_box_to_global(const unsigned char *box, char *dst, long long ld_bytes, int rows,
                             int bytes, int lane)
{
    const int c = lane & 7;
#pragma unroll
    for (int it = 0; it < 4; ++it) {
        const int r = (lane >> 3) + 4 * it;
        if (r < rows && c * 16 < bytes)
            *(uint4 *)(dst + r * ld_bytes + c * 16) =
                *(const uint4 *)(box + r * 128 + ((c ^ (r & 7)) << 4));
    }
}
