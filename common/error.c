/* SPDX-License-Identifier: Apache-2.0 */
/* error.c — error records and status names. */
#include <stdio.h>
#include <string.h>

#include "common.h"

static const char *const g_kiln_version = KILN_VERSION_STRING;

const char *kiln_version(void) { return g_kiln_version; }

const char *kiln_status_name(kiln_status status)
{
    switch (status) {
    case KILN_OK: return "KILN_OK";
    case KILN_ERROR_INVALID_ARGUMENT: return "KILN_ERROR_INVALID_ARGUMENT";
    case KILN_ERROR_INVALID_SPEC: return "KILN_ERROR_INVALID_SPEC";
    case KILN_ERROR_TEMPLATE: return "KILN_ERROR_TEMPLATE";
    case KILN_ERROR_COMPILE: return "KILN_ERROR_COMPILE";
    case KILN_ERROR_CACHE: return "KILN_ERROR_CACHE";
    case KILN_ERROR_DRIVER: return "KILN_ERROR_DRIVER";
    case KILN_ERROR_CUBLAS: return "KILN_ERROR_CUBLAS";
    case KILN_ERROR_UNSUPPORTED: return "KILN_ERROR_UNSUPPORTED";
    case KILN_ERROR_OUT_OF_MEMORY: return "KILN_ERROR_OUT_OF_MEMORY";
    case KILN_ERROR_IO: return "KILN_ERROR_IO";
    case KILN_ERROR_INTERNAL: return "KILN_ERROR_INTERNAL";
    }
    return "KILN_ERROR_UNKNOWN";
}

kiln_status kiln_error_set(kiln_error *err, kiln_status status, const char *fmt, ...)
{
    if (err) {
        va_list ap;
        va_start(ap, fmt);
        err->status = status;
        vsnprintf(err->msg, sizeof err->msg, fmt, ap);
        va_end(ap);
    }
    return status;
}

void kiln_error_clear(kiln_error *err)
{
    if (err) {
        err->status = KILN_OK;
        err->msg[0] = '\0';
    }
}

void kiln_error_prefix(kiln_error *err, const char *fmt, ...)
{
    if (!err) return;
    char prefix[512];
    char old[KILN_ERROR_MAX];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(prefix, sizeof prefix, fmt, ap);
    va_end(ap);
    memcpy(old, err->msg, sizeof old);
    snprintf(err->msg, sizeof err->msg, "%s: %s", prefix, old);
}
