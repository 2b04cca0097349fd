/* SPDX-License-Identifier: Apache-2.0 */
/* clusters.c — clusters of 2, 4 and 8 one-SM CTAs resident at once (see the header). */
#include <stdio.h>
#include <string.h>

#include "clusters.h"

/* An empty kernel; the driver compiles it for the device (a few ms). */
static const char k_probe_ptx[] = ".version 8.0\n"
                                  ".target sm_90\n"
                                  ".address_size 64\n"
                                  ".visible .entry kiln_cluster_probe() { ret; }\n";

/* More than half an SM's shared memory: one CTA an SM, as the k-cut
 * kernels' 217 KiB. */
#define PROBE_SMEM (160 * 1024)
#define PROBE_THREADS 384

int kiln_clusters_of(const int clusters[3], int size)
{
    return size == 2 ? clusters[0] : size == 4 ? clusters[1] : size == 8 ? clusters[2] : 0;
}

kiln_status kiln_cluster_residency(const kiln_driver *drv, int num_sms, int out[3], kiln_error *err)
{
    memset(out, 0, 3 * sizeof *out);
    CUmodule mod = NULL;
    CUfunction fn = NULL;
    kiln_status st = kiln_driver_check(drv, drv->cuModuleLoadData(&mod, k_probe_ptx),
                                       "loading the cluster probe", err);
    if (!st)
        st = kiln_driver_check(drv, drv->cuModuleGetFunction(&fn, mod, "kiln_cluster_probe"),
                               "cuModuleGetFunction(kiln_cluster_probe)", err);
    if (!st)
        st = kiln_driver_check(drv,
                               drv->cuFuncSetAttribute(fn, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                                                       PROBE_SMEM),
                               "cuFuncSetAttribute(kiln_cluster_probe, MAX_DYNAMIC_SHARED_SIZE_BYTES)",
                               err);
    for (int i = 0; !st && i < 3; i++) {
        const unsigned size = 2u << i;
        CUlaunchAttribute attr;
        memset(&attr, 0, sizeof attr);
        attr.id = CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION;
        attr.value.clusterDim.x = size;
        attr.value.clusterDim.y = attr.value.clusterDim.z = 1;
        CUlaunchConfig cfg;
        memset(&cfg, 0, sizeof cfg);
        cfg.gridDimX = size * (unsigned)(num_sms > 0 ? num_sms : 1);
        cfg.gridDimY = cfg.gridDimZ = 1;
        cfg.blockDimX = PROBE_THREADS;
        cfg.blockDimY = cfg.blockDimZ = 1;
        cfg.sharedMemBytes = PROBE_SMEM;
        cfg.attrs = &attr;
        cfg.numAttrs = 1;
        char what[96];
        snprintf(what, sizeof what, "cuOccupancyMaxActiveClusters(cluster of %u)", size);
        st = kiln_driver_check(drv, drv->cuOccupancyMaxActiveClusters(&out[i], fn, &cfg), what, err);
    }
    if (mod) drv->cuModuleUnload(mod);
    if (st) memset(out, 0, 3 * sizeof *out);
    return st;
}
