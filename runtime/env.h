/* SPDX-License-Identifier: Apache-2.0 */
/*
 * env.h — what a runtime module may see: the driver table, the log and the
 * device's limits.  Modules (kernels.c, launch.c, the backends) get this
 * narrow environment, never the whole context, and never call back into
 * context.c.
 */
#ifndef KILN_ENV_H
#define KILN_ENV_H

#include "driver.h"

/* Where messages go: the caller's hook, or stderr under $KILN_LOG. */
typedef struct kiln_rt_log {
    kiln_log_fn fn;                /* NULL: silent */
    void *user;
    kiln_log_level level;          /* lowest level passed on */
} kiln_rt_log;

/* The log of a context: opts' hook when one is given; else, when $KILN_LOG
 * is error|warning|info|debug, stderr from that level on; else silent.
 * KILN_ERROR_INVALID_ARGUMENT naming KILN_LOG when it holds anything else
 * (the log is then silent). */
kiln_status kiln_rt_log_init(kiln_rt_log *log, kiln_log_fn fn, void *user, kiln_log_level level,
                             kiln_error *err);
void kiln_rt_logf(const kiln_rt_log *log, kiln_log_level level, const char *fmt, ...)
    KILN_PRINTF(3, 4);

/* The device a context runs on. */
typedef struct kiln_device_limits {
    int cc_major, cc_minor;
    int num_sms;
    char arch[16];                 /* "sm_90a" (kiln_dispatch_arch_name) */
    int clusters[3];               /* clusters of 2, 4 and 8 one-SM CTAs resident at
                                      once (clusters.h); 0: not known */
} kiln_device_limits;

typedef struct kiln_rt_env {
    const kiln_driver *drv;
    const kiln_rt_log *log;
    const kiln_device_limits *dev;
} kiln_rt_env;

#endif /* KILN_ENV_H */
