/* SPDX-License-Identifier: Apache-2.0 */
/*
 * dispatch_model.h — an estimate of a generated kernel's time on a call,
 * from the kernel's tile shape and the call's sizes only, so the
 * dispatcher can rank kernels for shapes no tuning table holds (DeepGEMM's
 * heuristic, made one number: waves, padded rows, the tile's traffic).
 *
 * What it counts (docs/dispatch.md has the derivation):
 *   - rows per group: capacity / groups, rounded up.  The sizes live on the
 *     device and dispatch never reads them, so the model assumes balanced
 *     routing; skewed routing pads more, alike for every kernel.
 *   - tiles: groups × ⌈rows / BM⌉ × ⌈out_cols / BN⌉ (fprop: out_cols = N,
 *     reduction K; dgrad: out_cols = K, reduction N; wgrad: an N×K output
 *     per group, reduction over the rows).  The padded fraction of the last
 *     m tile is computed work thrown away.
 *   - waves: ⌈tiles / SMs⌉ of equal tiles (the persistent schedule hands
 *     out tiles round-robin); the last, partial wave costs a whole one.
 *   - a tile's time: the largest of its tensor-core time (2·BM·BN·red /
 *     FLOP per clock per SM), its shared-memory reads (every m64 slab of
 *     wgmma reads the B tile again), its L2 reads ((rows + BN)·red operand
 *     bytes at an SM's share of L2 bandwidth) and its share of HBM (the A
 *     tile once per group's n tiles, the B tile once per its m tiles: a
 *     decode tile streams its weights alone), plus the epilogue's store
 *     where the schedule does not overlap it (cooperative).
 *   - a floor: the call's compulsory HBM bytes (A, B, D once) over the
 *     device's bandwidth.
 * Constants are H100/H200's (sm_90a); the ranking, not the absolute time,
 * is what dispatch uses, and ties fall to dispatch.c's tile rule.
 *
 * Pure and cheap (a few dozen flops a kernel); reads no device memory.
 */
#ifndef KILN_DISPATCH_MODEL_H
#define KILN_DISPATCH_MODEL_H

#include "kernel_desc.h"

/* The SMs the model assumes when the caller does not know (H100/H200 SXM). */
#define KILN_DISPATCH_MODEL_SMS 132

typedef struct kiln_dispatch_estimate {
    double us;                   /* estimated time, microseconds */
    long long tiles;             /* output tiles of the call */
    double waves;                /* tiles / SMs (fractional) */
    double wave_efficiency;      /* waves / ⌈waves⌉ */
    double padding;              /* fraction of computed rows past a group's end */
    double tile_efficiency;      /* tensor time / the tile's limiting time */
} kiln_dispatch_estimate;

/* Estimates d's time on p over sms SMs (<= 0: KILN_DISPATCH_MODEL_SMS);
 * launch may be NULL.  A kernel without tile sizes gets a huge time. */
void kiln_dispatch_model_estimate(const kiln_kernel_desc *d, const kiln_launch_desc *launch,
                                  const kiln_problem *p, int sms, kiln_dispatch_estimate *out);

#endif /* KILN_DISPATCH_MODEL_H */
