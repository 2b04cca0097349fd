/* SPDX-License-Identifier: Apache-2.0 */
/*
 * cuda_driver.h — the few CUDA driver calls the examples make for their own
 * buffers (a context, device memory, copies), opened with dlopen from
 * libcuda.so.1 as kiln itself does.  So the examples need only kiln.h and
 * this file: no CUDA headers or toolkit to build them, nothing but kiln to
 * link, and they start (and skip) on machines with no driver.
 * Header-only: copy it along with the examples.
 */
#ifndef KILN_EXAMPLE_CUDA_DRIVER_H
#define KILN_EXAMPLE_CUDA_DRIVER_H

#include <dlfcn.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

/* The driver API's types, as cuda.h declares them (64-bit builds). */
typedef int CUresult;                 /* CUDA_SUCCESS is 0 */
typedef int CUdevice;
typedef struct CUctx_st *CUcontext;
typedef unsigned long long CUdeviceptr;
#define CUDA_SUCCESS 0

typedef struct cuda_driver {
    void *lib;
    CUresult (*cuInit)(unsigned flags);
    CUresult (*cuDeviceGetCount)(int *count);
    CUresult (*cuDeviceGet)(CUdevice *dev, int ordinal);
    CUresult (*cuDevicePrimaryCtxRetain)(CUcontext *ctx, CUdevice dev);
    CUresult (*cuCtxSetCurrent)(CUcontext ctx);
    CUresult (*cuCtxSynchronize)(void);
    CUresult (*cuMemAlloc)(CUdeviceptr *ptr, size_t bytes);
    CUresult (*cuMemFree)(CUdeviceptr ptr);
    CUresult (*cuMemcpyHtoD)(CUdeviceptr dst, const void *src, size_t bytes);
    CUresult (*cuMemcpyDtoH)(void *dst, CUdeviceptr src, size_t bytes);
} cuda_driver;

/* Opens libcuda.so.1, resolves the calls above and makes device 0's primary
 * context current.  Returns NULL on success, else why not (no driver, no
 * device), in `why`. */
static inline const char *cuda_driver_open(cuda_driver *cu, char *why, size_t why_size)
{
    memset(cu, 0, sizeof *cu);
    cu->lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!cu->lib) {
        snprintf(why, why_size, "libcuda.so.1 not found (no NVIDIA driver?)");
        return why;
    }
    /* The memory calls' 64-bit entry points carry a _v2 suffix (cuda.h maps
     * cuMemAlloc to cuMemAlloc_v2 the same way). */
    static const struct { const char *symbol; size_t offset; } calls[] = {
        {"cuInit", offsetof(cuda_driver, cuInit)},
        {"cuDeviceGetCount", offsetof(cuda_driver, cuDeviceGetCount)},
        {"cuDeviceGet", offsetof(cuda_driver, cuDeviceGet)},
        {"cuDevicePrimaryCtxRetain", offsetof(cuda_driver, cuDevicePrimaryCtxRetain)},
        {"cuCtxSetCurrent", offsetof(cuda_driver, cuCtxSetCurrent)},
        {"cuCtxSynchronize", offsetof(cuda_driver, cuCtxSynchronize)},
        {"cuMemAlloc_v2", offsetof(cuda_driver, cuMemAlloc)},
        {"cuMemFree_v2", offsetof(cuda_driver, cuMemFree)},
        {"cuMemcpyHtoD_v2", offsetof(cuda_driver, cuMemcpyHtoD)},
        {"cuMemcpyDtoH_v2", offsetof(cuda_driver, cuMemcpyDtoH)},
    };
    for (size_t i = 0; i < sizeof calls / sizeof calls[0]; i++) {
        void *fn = dlsym(cu->lib, calls[i].symbol);
        if (!fn) {
            snprintf(why, why_size, "libcuda.so.1 has no %s", calls[i].symbol);
            return why;
        }
        /* A data pointer to a function pointer, without ISO C's complaint. */
        memcpy((char *)cu + calls[i].offset, &fn, sizeof fn);
    }
    int count = 0;
    CUdevice dev;
    CUcontext ctx;
    if (cu->cuInit(0) != CUDA_SUCCESS || cu->cuDeviceGetCount(&count) != CUDA_SUCCESS ||
        count == 0) {
        snprintf(why, why_size, "no CUDA device");
        return why;
    }
    if (cu->cuDeviceGet(&dev, 0) != CUDA_SUCCESS ||
        cu->cuDevicePrimaryCtxRetain(&ctx, dev) != CUDA_SUCCESS ||
        cu->cuCtxSetCurrent(ctx) != CUDA_SUCCESS) {
        snprintf(why, why_size, "cannot make device 0's primary context current");
        return why;
    }
    return NULL;
}

#endif /* KILN_EXAMPLE_CUDA_DRIVER_H */
