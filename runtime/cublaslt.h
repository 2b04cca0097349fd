/* SPDX-License-Identifier: Apache-2.0 */
/*
 * cublaslt.h — the cuBLASLt backend: a per-group loop of cublasLtMatmul
 * with the sizes read from problem->host_sizes.
 *
 * libcublasLt.so.13 (else libcublasLt.so) is opened with dlopen at the
 * first call that needs it, with a handle and a 32 MiB workspace made once
 * per context.  The epilogue terms cuBLASLt cannot express per row (row
 * scale, per-group α, bias, β·C) run in a small kernel of kiln's own,
 * compiled with NVRTC at first use, after each group's product (the product
 * is rounded to the output type first, so this path is a little less exact
 * than the fused one).
 *
 * fp8 inputs with the per-tensor recipe run as cuBLASLt's scaled fp8
 * matmul (one A/B scale pointer per group's product, fast accumulation
 * unless fp8.promote); kiln_cublaslt_fp8_serves says which fp8 calls.
 *
 * Not graph-safe: sizes come from the host.  Pointer-array weights and
 * discrete wgrad outputs are read back with a synchronous copy of the G
 * pointers (after synchronising the stream); a capturing stream is refused.
 */
#ifndef KILN_CUBLASLT_H
#define KILN_CUBLASLT_H

#include "env.h"
#include "kernels.h"

typedef struct kiln_cublaslt kiln_cublaslt;

/* Runs p; *lt (NULL at first) holds the library, handle and workspace made
 * at the first call.  The helper kernel is loaded through ks. */
kiln_status kiln_cublaslt_run(kiln_cublaslt **lt, const kiln_rt_env *env, kiln_kernels *ks,
                              const kiln_problem *p, CUstream stream, kiln_error *err);

/* 1 if cuBLASLt can run the fp8 call p (fp8.recipe set) on arch ("sm_90a");
 * else 0 with the reason in why.  Pure: reads no pointer's value (dispatch
 * calls it, dispatch_memo.h). */
int kiln_cublaslt_fp8_serves(const kiln_problem *p, const char *arch, char *why, size_t why_size);

/* Frees the handle, workspace and helper module (the context's CUDA context
 * current); lt may be NULL. */
void kiln_cublaslt_destroy(kiln_cublaslt *lt, const kiln_rt_env *env);

#endif /* KILN_CUBLASLT_H */
