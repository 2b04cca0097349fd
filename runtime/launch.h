/* SPDX-License-Identifier: Apache-2.0 */
/*
 * launch.h — launching one generated kernel for one call: kernel arguments
 * from the problem, grid, dynamic shared memory, cluster and tensor maps.
 * Reads no sizes on the host, never synchronises, allocates nothing: a
 * launch may be captured in a CUDA graph.
 */
#ifndef KILN_LAUNCH_H
#define KILN_LAUNCH_H

#include "env.h"
#include "kernel_abi.h"
#include "kernels.h"
#include "tmap_cache.h"

/* Fills the kernel arguments (leading dims defaulted, sizes kind, SMs). */
void kiln_launch_fill_args(const kiln_problem *p, int num_sms, kiln_kernel_args *args);

/* Upper bound of the output tiles of a call (see the grid rule in launch.c). */
int64_t kiln_launch_tiles(const kiln_problem *p, const kiln_kernel_desc *d);

/* Whether a launch of d for p may cut its last round along k, given a
 * kernel that can (k->split): only then does it get the split workspace
 * and a grid of every SM. */
int kiln_launch_may_split(const kiln_problem *p, const kiln_kernel_desc *d, int num_sms);

/* CTAs to launch: min(ctas_per_sm × SMs, tiles) for persistent kernels,
 * tiles otherwise; rounded up to a multiple of the cluster size.  A
 * k-cut kernel (d->k_cluster > 1): min(clusters, tiles) clusters of
 * k_cluster CTAs, clusters being how many fit at once (clusters.h; 0: SMs
 * / k_cluster). */
int64_t kiln_launch_grid(const kiln_problem *p, const kiln_kernel_desc *d,
                         const kiln_launch_desc *l, int num_sms, int clusters);

/* Sets a loaded function's dynamic shared memory limit, k->sched, whether
 * its module holds the work-order counters sched_slots.h hands out
 * (`kiln_sched_ctr`, KILN_SCHED_SLOTS pairs), and k->split, whether it
 * splits its last wave (`kiln_split_launch`, as many), once, at load.  image and
 * image_size: the cubin the module was loaded from; the driver is asked
 * for the counters only when the image names them. */
kiln_status kiln_launch_set_limits(const kiln_rt_env *env, kiln_rt_kernel *k, const void *image,
                                   size_t image_size, kiln_error *err);

/* What a context adds to a launch. */
typedef struct kiln_launch_opts {
    kiln_tmap_cache *tmaps;  /* the context's tensor-map cache (the caller holds
                                its lock); NULL: every map encoded afresh */
    int pdl;                 /* KILN_PDL=1: programmatic dependent launch
                                (CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION)
                                for the sm90 family's kernels, so a kernel's
                                prologue overlaps the tail of the one before it.
                                Correct only with kernels that execute
                                griddepcontrol.wait before reading sizes, A, B,
                                C, bias or the output: off by default. */
    int sched_slot;          /* the launch's work-order counters (sched_slots.h;
                                context.c gives one only to a kernel with
                                k->sched or k->split); 0: none */
    CUdeviceptr workspace;   /* the context's split workspace (kernel_abi.h,
                                KILN_SPLIT_*), or 0: a k->split kernel then
                                walks whole tiles */
} kiln_launch_opts;

/* Launches k for p on stream (opts NULL: no cache, no PDL). */
kiln_status kiln_launch_run(const kiln_rt_env *env, const kiln_launch_opts *opts,
                            const kiln_rt_kernel *k, const kiln_problem *p, CUstream stream,
                            kiln_error *err);

/* The same two in the context form cli/tune_gpu.c calls (context.c). */
typedef struct kiln_context kiln_context;
kiln_status kiln_launch_prepare(kiln_context *ctx, kiln_rt_kernel *k, const void *image,
                                size_t image_size, kiln_error *err);
kiln_status kiln_launch_generated(kiln_context *ctx, const kiln_rt_kernel *k, const kiln_problem *p,
                                  CUstream stream, kiln_error *err);

#endif /* KILN_LAUNCH_H */
