/* SPDX-License-Identifier: Apache-2.0 */
/*
 * context.h — the inside of a kiln_context.  context.c owns it: the public
 * API, options and the lock.  Modules never see it; they get a kiln_rt_env
 * (env.h) and, for loading, the kiln_kernels (kernels.h).
 */
#ifndef KILN_CONTEXT_H
#define KILN_CONTEXT_H

#include <pthread.h>

#include "cublaslt.h"
#include "dispatch_memo.h"
#include "env.h"
#include "kernels.h"
#include "quant.h"
#include "sched_slots.h"
#include "tmap_cache.h"

struct kiln_context {
    pthread_mutex_t lock;
    kiln_error last_error;
    kiln_call_report last_call;
    int have_last_call;
    kiln_context_stats stats;

    kiln_rt_log log;
    unsigned allowed;             /* KILN_ALLOW_* after KILN_BACKEND */
    char forced_by[64];           /* "KILN_BACKEND=cublaslt", or "" */
    char only_kernel[96];         /* $KILN_KERNEL, or "" (dispatch.h) */
    int checked;                  /* checked mode (checked.h) */

    kiln_driver drv;
    int driver_ok;
    CUdevice device;
    CUcontext cu;                 /* the CUDA context calls run in */
    int primary_retained;         /* 1: cu is the retained primary context */
    union {
        kiln_device_limits dev;
        /* The same members under the names cli/tune_gpu.c reads
         * (ctx->arch, ctx->num_sms), until it reads ctx->dev. */
        struct {
            int cc_major, cc_minor, num_sms;
            char arch[16];
        };
    };
    kiln_rt_env env;              /* &drv, &log, &dev: what modules see */

    kiln_kernels kernels;         /* catalog, tuned kernels, cache and bundles */
    kiln_cublaslt *lt;            /* loaded at first use */
    kiln_quant_rt *quant;         /* kiln_quantize's kernels, loaded at first use */

    /* Per-call work done once (docs/architecture.md "Host time"); both NULL
     * under KILN_HOST_CACHE=0 or when out of memory, then every call
     * dispatches and encodes afresh.  Used under the lock. */
    kiln_dispatch_memo *memo;     /* decisions by problem signature */
    kiln_tmap_cache *tmaps;       /* encoded tensor maps */
    int pdl;                      /* KILN_PDL=1 (launch.h kiln_launch_opts) */
    kiln_sched sched;             /* work-order counter slots, under the lock */
    int split;                    /* KILN_SPLIT (default 1): make the split workspace */
    int split_min;                /* KILN_SPLIT_MIN (thousandths, default 0), written to
                                     the workspace's word KILN_SPLIT_MIN_WORD */
    int split_tried;              /* the workspace was asked for (made or failed) */
    CUdeviceptr split_ws;         /* the split workspace (launch.h), made with the
                                     context, or by kiln_launch_prepare in a context
                                     allowed only cuBLASLt; 0: none (KILN_SPLIT=0, not
                                     yet, or its allocation failed) */
};

#endif /* KILN_CONTEXT_H */
