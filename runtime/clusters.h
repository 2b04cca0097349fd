/* SPDX-License-Identifier: Apache-2.0 */
/*
 * clusters.h — how many clusters of 2, 4 and 8 CTAs, one CTA an SM, the
 * device runs at once.  A GPC holds whole clusters only, and how many SMs
 * each GPC has differs from chip to chip of one model (an H100 with 132
 * SMs ran 14 or 15 clusters of 8, not 16), so the count is the driver's
 * answer for this device, not SMs / size.  The k-cut kernels
 * (templates/sm90_gemm_cut.cuh, KCUT) walk one tile a cluster only where all
 * their clusters fit: the dispatcher's model prices them with it
 * (dispatch_model.h).
 */
#ifndef KILN_CLUSTERS_H
#define KILN_CLUSTERS_H

#include "driver.h"

/* out[i]: clusters of 2 << i CTAs (i = 0, 1, 2) resident at once, for a
 * kernel of one CTA an SM, on the current context's device of num_sms
 * SMs.  Loads a one-instruction PTX kernel to ask cuOccupancyMaxActiveClusters
 * and unloads it.  On failure out is all 0 (the k-cut kernels are then not
 * chosen) and err says why. */
kiln_status kiln_cluster_residency(const kiln_driver *drv, int num_sms, int out[3], kiln_error *err);

/* The entry of such a table for clusters of `size` CTAs; 0 for a size it
 * does not hold (1: no cluster to cut along k). */
int kiln_clusters_of(const int clusters[3], int size);

#endif /* KILN_CLUSTERS_H */
