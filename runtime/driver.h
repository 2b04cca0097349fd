/* SPDX-License-Identifier: Apache-2.0 */
/*
 * driver.h — the CUDA driver API, loaded at run time.
 *
 * libcuda.so.1 is opened with dlopen and every entry point is looked up with
 * cuGetProcAddress (the CUDA 12 form, with flags and a symbol status), so
 * kiln builds, links and runs its CPU tests on machines with no driver.
 * cuda.h is used for its types only; nothing links libcuda.
 *
 * Ownership: a kiln_driver is a plain table of pointers plus the dlopen
 * handle; kiln_driver_unload closes the handle.  The table may be shared
 * between threads once loaded (it is never written again).
 */
#ifndef KILN_DRIVER_H
#define KILN_DRIVER_H

#include <cuda.h>

#include "common.h"

/* Every driver function kiln (and its GPU tests) uses.  The versions asked
 * for are the CUDA 12.0 ones, so drivers from 12.0 on serve them; cuda.h's
 * macros (cuMemAlloc → cuMemAlloc_v2, ...) give the matching prototypes. */
#define KILN_DRIVER_FUNCTIONS(X)                                                                   \
    X(cuInit)                                                                                      \
    X(cuDriverGetVersion)                                                                          \
    X(cuGetErrorString)                                                                            \
    X(cuGetErrorName)                                                                              \
    X(cuDeviceGet)                                                                                 \
    X(cuDeviceGetCount)                                                                            \
    X(cuDeviceGetAttribute)                                                                        \
    X(cuDeviceGetName)                                                                             \
    X(cuDevicePrimaryCtxRetain)                                                                    \
    X(cuDevicePrimaryCtxRelease)                                                                   \
    X(cuCtxGetCurrent)                                                                             \
    X(cuCtxSetCurrent)                                                                             \
    X(cuCtxGetDevice)                                                                              \
    X(cuCtxPushCurrent)                                                                            \
    X(cuCtxPopCurrent)                                                                             \
    X(cuCtxSynchronize)                                                                            \
    X(cuModuleLoadData)                                                                            \
    X(cuModuleLoadDataEx)                                                                          \
    X(cuModuleUnload)                                                                              \
    X(cuModuleGetFunction)                                                                         \
    X(cuModuleGetGlobal)                                                                           \
    X(cuFuncSetAttribute)                                                                          \
    X(cuFuncGetAttribute)                                                                          \
    X(cuLaunchKernel)                                                                              \
    X(cuLaunchKernelEx)                                                                            \
    X(cuOccupancyMaxActiveClusters)                                                                \
    X(cuTensorMapEncodeTiled)                                                                      \
    X(cuMemAlloc)                                                                                  \
    X(cuMemFree)                                                                                   \
    X(cuMemcpyHtoD)                                                                                \
    X(cuMemcpyDtoH)                                                                                \
    X(cuMemcpyDtoD)                                                                                \
    X(cuMemcpyHtoDAsync)                                                                           \
    X(cuMemcpyDtoHAsync)                                                                           \
    X(cuMemcpyDtoDAsync)                                                                           \
    X(cuMemsetD8)                                                                                  \
    X(cuMemsetD8Async)                                                                             \
    X(cuMemsetD2D8Async)                                                                           \
    X(cuPointerGetAttributes)                                                                      \
    X(cuStreamCreate)                                                                              \
    X(cuStreamDestroy)                                                                             \
    X(cuStreamSynchronize)                                                                         \
    X(cuStreamIsCapturing)                                                                         \
    X(cuStreamBeginCapture)                                                                        \
    X(cuStreamEndCapture)                                                                          \
    X(cuGraphInstantiateWithFlags)                                                                 \
    X(cuGraphLaunch)                                                                               \
    X(cuGraphExecDestroy)                                                                          \
    X(cuGraphDestroy)                                                                              \
    X(cuEventCreate)                                                                               \
    X(cuEventRecord)                                                                               \
    X(cuEventSynchronize)                                                                          \
    X(cuEventElapsedTime)                                                                          \
    X(cuEventDestroy)

#define KILN_DRIVER_FIELD(name) __typeof__(name) *name;

typedef struct kiln_driver {
    void *lib;          /* dlopen handle of libcuda.so.1 */
    int version;        /* cuDriverGetVersion, e.g. 13000 */
    KILN_DRIVER_FUNCTIONS(KILN_DRIVER_FIELD)
} kiln_driver;

#undef KILN_DRIVER_FIELD

/* Opens libcuda.so.1, resolves every function and runs cuInit(0).  A missing
 * driver gives KILN_ERROR_DRIVER "libcuda.so.1 not found (no NVIDIA
 * driver?): <dlerror>"; a missing symbol names the symbol.  On failure the
 * table is left unloaded (safe to unload again). */
kiln_status kiln_driver_load(kiln_driver *d, kiln_error *err);
void kiln_driver_unload(kiln_driver *d);

/* Turns a CUresult into a status: KILN_OK for CUDA_SUCCESS, otherwise
 * KILN_ERROR_DRIVER (KILN_ERROR_OUT_OF_MEMORY for CUDA_ERROR_OUT_OF_MEMORY)
 * with "<what>: CUDA_ERROR_X (text)" in err. */
kiln_status kiln_driver_check(const kiln_driver *d, CUresult r, const char *what, kiln_error *err);

#endif /* KILN_DRIVER_H */
