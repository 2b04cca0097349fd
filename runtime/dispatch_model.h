/* SPDX-License-Identifier: Apache-2.0 */
/*
 * dispatch_model.h — an estimate of a generated kernel's time on a call,
 * from the kernel's tile shape and the call's sizes only, so the
 * dispatcher can rank kernels for shapes no tuning table holds (DeepGEMM's
 * heuristic, made one number: waves, padded rows, the tile's traffic).
 *
 * What it counts (docs/dispatch.md has the derivation and the measurements):
 *   - rows per group: capacity / groups.  The sizes live on the device and
 *     dispatch never reads them, so the model assumes routing near
 *     balanced: a group computes at least rows/BM + 1/2 m tiles (the last
 *     one half full on average), never fewer than balanced routing needs.
 *   - tiles: groups × m tiles × ⌈out_cols / BN⌉ (fprop: out_cols = N,
 *     reduction K; dgrad: out_cols = K, reduction N; wgrad: an N×K output
 *     per group, reduction over the rows).
 *   - a tile's demands: on its SM, the larger of its tensor-core time and
 *     its shared-memory reads (every m64 slab of wgmma reads the B tile
 *     again), plus the epilogue's store where the schedule does not overlap
 *     it (cooperative) and a fixed overhead; through L2, A's whole TMA box
 *     (BM rows: rows past a group's end are the next group's), the B tile
 *     and the fill of every byte HBM brings; from HBM, each byte once (the
 *     A tile shared by the group's n tiles, the B tile by its m tiles).
 *   - waves: the persistent schedule runs SMs tiles at once; a wave takes
 *     the longest of a tile's SM time and its tiles' L2 and HBM bytes over
 *     the chip's bandwidth, so the last, partial wave of a compute-bound
 *     call costs a whole one and that of a memory-bound call its bytes.
 *   - a floor: the call's compulsory HBM bytes (A, B, D once).
 * Constants are H200's (sm_90a), taken from the corpus measurements; the
 * ranking, not the absolute time, is what dispatch uses, and ties fall to
 * dispatch.c's tile rule.
 *
 * Pure and cheap (a few dozen flops a kernel); reads no device memory.
 */
#ifndef KILN_DISPATCH_MODEL_H
#define KILN_DISPATCH_MODEL_H

#include "kernel_desc.h"

/* The SMs the model assumes when the caller does not know (H100/H200 SXM). */
#define KILN_DISPATCH_MODEL_SMS 132
/* The fewest k-blocks a k-cut kernel's piece keeps where the model prices
 * it: with 8-16 (Qwen3-30B's fc2 at EP16, dgrad, 2048 deep in 4 pieces)
 * it took 1.16x the cooperative 128x256 kernel's time, with 32 (Qwen3-235B
 * fc2 at EP32, dgrad, 4096 deep in 2) 1.10x the time of the kernel chosen
 * before; from 42 to 56 it ran 0.85-0.95x (H100, docs/sm90_kernel.md,
 * eighty-sixth session). */
#define KILN_KCUT_MIN_PIECE_KB 40
/* The estimate of a kernel the model does not price (see below). */
#define KILN_DISPATCH_NOT_PRICED 1e30

typedef struct kiln_dispatch_estimate {
    double us;                   /* estimated time, microseconds */
    double us_tiles;             /* the tiles' own time, before the floor */
    long long tiles;             /* output tiles of the call */
    double waves;                /* tiles / SMs (fractional) */
    double wave_efficiency;      /* waves / ⌈waves⌉ */
    double padding;              /* fraction of computed rows past a group's end
                                    (routing slack included) */
    double tile_efficiency;      /* tensor time / a full wave's limiting time */
    int split_ways;              /* pieces the last round's tiles are cut into
                                    along k (0: not cut) */
} kiln_dispatch_estimate;

/* Estimates d's time on p over sms SMs (<= 0: KILN_DISPATCH_MODEL_SMS);
 * launch may be NULL.  A kernel without tile sizes gets a huge time, as
 * does a k-cut kernel (d->k_cluster > 1) but where its pieces fit the
 * clusters the device runs at once (clusters: of its size, clusters.h; 0:
 * not known) and each keeps KILN_KCUT_MIN_PIECE_KB k-blocks. */
void kiln_dispatch_model_estimate(const kiln_kernel_desc *d, const kiln_launch_desc *launch,
                                  const kiln_problem *p, int sms, int clusters,
                                  kiln_dispatch_estimate *out);

#endif /* KILN_DISPATCH_MODEL_H */
