/* SPDX-License-Identifier: Apache-2.0 */
/* driver.c — dlopen libcuda.so.1 and resolve the driver API through
 * cuGetProcAddress, never crashing when the driver is missing. */
#include <dlfcn.h>
#include <stdio.h>
#include <string.h>

#include "driver.h"

/* CUDA 12 form: (symbol, pfn, version, flags, symbol status). */
typedef CUresult (*kiln_get_proc_v2)(const char *, void **, int, cuuint64_t,
                                     CUdriverProcAddressQueryResult *);
/* CUDA 11.3 form, for drivers that lack the _v2 symbol. */
typedef CUresult (*kiln_get_proc_v1)(const char *, void **, int, cuuint64_t);

#define KILN_DRIVER_API_VERSION 12000

kiln_status kiln_driver_load(kiln_driver *d, kiln_error *err)
{
    memset(d, 0, sizeof *d);
    dlerror();
    void *lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!lib) {
        const char *why = dlerror();
        return kiln_error_set(err, KILN_ERROR_DRIVER, "libcuda.so.1 not found (no NVIDIA driver?): %s",
                              why ? why : "unknown reason");
    }
    kiln_get_proc_v2 get2 = NULL;
    kiln_get_proc_v1 get1 = NULL;
    /* dlsym returns void *; going through a union keeps -Wpedantic quiet. */
    union { void *p; kiln_get_proc_v2 f2; kiln_get_proc_v1 f1; } u;
    u.p = dlsym(lib, "cuGetProcAddress_v2");
    if (u.p) get2 = u.f2;
    else {
        u.p = dlsym(lib, "cuGetProcAddress");
        if (u.p) get1 = u.f1;
    }
    if (!get2 && !get1) {
        dlclose(lib);
        return kiln_error_set(err, KILN_ERROR_DRIVER,
                              "libcuda.so.1 has no cuGetProcAddress (driver older than CUDA 11.3?)");
    }

#define KILN_DRIVER_LOOKUP(name)                                                                   \
    {                                                                                              \
        void *fn = NULL;                                                                           \
        CUresult r;                                                                                \
        CUdriverProcAddressQueryResult found = CU_GET_PROC_ADDRESS_SUCCESS;                        \
        if (get2) r = get2(#name, &fn, KILN_DRIVER_API_VERSION, CU_GET_PROC_ADDRESS_DEFAULT, &found); \
        else r = get1(#name, &fn, KILN_DRIVER_API_VERSION, CU_GET_PROC_ADDRESS_DEFAULT);           \
        if (r != CUDA_SUCCESS || !fn || found != CU_GET_PROC_ADDRESS_SUCCESS) {                    \
            dlclose(lib);                                                                          \
            memset(d, 0, sizeof *d);                                                               \
            return kiln_error_set(err, KILN_ERROR_DRIVER,                                          \
                                  "libcuda.so.1: cuGetProcAddress(\"%s\", %d) failed (error %d, "  \
                                  "status %d): driver too old?",                                   \
                                  #name, KILN_DRIVER_API_VERSION, (int)r, (int)found);             \
        }                                                                                          \
        memcpy(&d->name, &fn, sizeof fn);                                                          \
    }
    KILN_DRIVER_FUNCTIONS(KILN_DRIVER_LOOKUP)
#undef KILN_DRIVER_LOOKUP

    d->lib = lib;
    CUresult r = d->cuInit(0);
    if (r != CUDA_SUCCESS) {
        kiln_status st = kiln_driver_check(d, r, "cuInit", err);
        kiln_driver_unload(d);
        return st;
    }
    d->cuDriverGetVersion(&d->version);
    return KILN_OK;
}

void kiln_driver_unload(kiln_driver *d)
{
    if (d->lib) dlclose(d->lib);
    memset(d, 0, sizeof *d);
}

kiln_status kiln_driver_check(const kiln_driver *d, CUresult r, const char *what, kiln_error *err)
{
    if (r == CUDA_SUCCESS) return KILN_OK;
    const char *name = NULL, *text = NULL;
    if (d && d->cuGetErrorName) d->cuGetErrorName(r, &name);
    if (d && d->cuGetErrorString) d->cuGetErrorString(r, &text);
    char num[32];
    if (!name) {
        snprintf(num, sizeof num, "CUresult %d", (int)r);
        name = num;
    }
    kiln_status st = r == CUDA_ERROR_OUT_OF_MEMORY ? KILN_ERROR_OUT_OF_MEMORY : KILN_ERROR_DRIVER;
    return kiln_error_set(err, st, "%s: %s (%s)", what, name, text ? text : "no description");
}
