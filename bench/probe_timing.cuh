// SPDX-License-Identifier: Apache-2.0
/* probe_timing.cuh — the timing loop of the standalone probes
 * (bench/store_box_probe.cu, bench/acc_drain_probe.cu): each launch
 * between two CUDA events, the first `warm` left out, the median of the
 * rest in ms.  Header-only; the includer defines CK (check a cudaError_t). */
#pragma once
#include <algorithm>
#include <vector>

template <class Launch>
static float median_launch_ms(Launch launch, int launches, int warm)
{
    cudaEvent_t e0, e1;
    CK(cudaEventCreate(&e0));
    CK(cudaEventCreate(&e1));
    std::vector<float> ms;
    for (int i = 0; i < launches; ++i) {
        CK(cudaEventRecord(e0));
        launch();
        CK(cudaEventRecord(e1));
        CK(cudaEventSynchronize(e1));
        float t;
        CK(cudaEventElapsedTime(&t, e0, e1));
        if (i >= warm) ms.push_back(t);
    }
    CK(cudaGetLastError());
    CK(cudaEventDestroy(e0));
    CK(cudaEventDestroy(e1));
    std::sort(ms.begin(), ms.end());
    return ms[ms.size() / 2];
}
