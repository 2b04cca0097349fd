/* SPDX-License-Identifier: Apache-2.0 */
/*
 * nvrtc.h — compile generated CUDA source to a cubin with NVRTC, capturing
 * the log on every path and the resource use ptxas reports.
 *
 * libnvrtc.so.13 (else libnvrtc.so) is opened with dlopen at the first
 * compile or version query; nothing links it, so a user served by bundles
 * alone needs no NVRTC.
 */
#ifndef KILN_NVRTC_H
#define KILN_NVRTC_H

#include "common.h"

typedef struct kiln_compile_stats {
    double seconds;              /* NVRTC wall time */
    int registers;               /* per thread */
    int spill_stores, spill_loads;  /* bytes */
    int smem_static;             /* bytes of static shared memory */
    int stack_frame;             /* bytes */
    int wgmma_serialized;        /* ptxas's remark number (7517 for C7517) where it
                                    serialized the kernel's wgmma pipeline; 0: none */
} kiln_compile_stats;

typedef struct kiln_compile_result {
    void *cubin;
    size_t cubin_size;
    kiln_compile_stats stats;
    char *log;                   /* NVRTC's log, possibly empty */
} kiln_compile_result;

/* Compiles for arch ("sm_90a", "sm_80", ...).  On failure err names the
 * kernel, NVRTC's message and the path where the source was saved
 * (save_dir, or $TMPDIR/kiln-failed if NULL), and out->log holds the log. */
kiln_status kiln_nvrtc_compile(const char *source, const char *name, const char *arch,
                               const char *save_dir, kiln_compile_result *out,
                               kiln_error *err);
void kiln_compile_result_free(kiln_compile_result *r);

/* Loads NVRTC (once per process).  KILN_ERROR_COMPILE naming the library
 * and dlerror's reason when it cannot be loaded; err may be NULL. */
kiln_status kiln_nvrtc_load(kiln_error *err);

/* NVRTC's version as "13.0" ("unknown" when NVRTC cannot be loaded); static
 * storage. */
const char *kiln_nvrtc_version(void);

/* Parses ptxas -v text ("Used 168 registers, 0 bytes spill stores, ...")
 * into stats; exposed for tests. */
void kiln_nvrtc_parse_ptxas(const char *log, kiln_compile_stats *stats);

/* The options every compile uses besides -arch, as one string; part of every
 * cache key.  Static storage. */
const char *kiln_nvrtc_options(void);

/* 1 if arch names a real architecture NVRTC can make a cubin for:
 * "sm_<digits>" with an optional "a" or "f" suffix, shorter than 16 chars. */
int kiln_nvrtc_arch_valid(const char *arch);

/* Registers and stack frame read from a cubin's ELF (.nv.info records),
 * merged into stats as maxima; the fallback when the log lacks ptxas's
 * report.  Returns 1 if a register count was found. */
int kiln_nvrtc_cubin_stats(const void *cubin, size_t size, kiln_compile_stats *stats);

#endif /* KILN_NVRTC_H */
