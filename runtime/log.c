/* SPDX-License-Identifier: Apache-2.0 */
/* log.c — the runtime's log: a hook, or stderr under $KILN_LOG (env.h). */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "env.h"

/* The stderr sink is what KILN_LOG asks for: the user chose to see lines
 * without writing a hook. */
static void to_stderr(void *user, kiln_log_level level, const char *message)
{
    (void)user;
    static const char *const names[] = {"debug", "info", "warning", "error"};
    fprintf(stderr, "kiln %s: %s\n", (unsigned)level < 4 ? names[level] : "?", message);
}

kiln_status kiln_rt_log_init(kiln_rt_log *log, kiln_log_fn fn, void *user, kiln_log_level level,
                             kiln_error *err)
{
    log->fn = fn;
    log->user = user;
    log->level = level;
    if (fn) return KILN_OK;
    const char *v = getenv("KILN_LOG");
    if (!v || !*v) return KILN_OK;
    static const struct { const char *name; kiln_log_level level; } levels[] = {
        {"error", KILN_LOG_ERROR}, {"warning", KILN_LOG_WARNING},
        {"info", KILN_LOG_INFO},   {"debug", KILN_LOG_DEBUG},
    };
    for (size_t i = 0; i < sizeof levels / sizeof levels[0]; i++)
        if (!strcmp(v, levels[i].name)) {
            log->fn = to_stderr;
            log->level = levels[i].level;
            return KILN_OK;
        }
    return kiln_error_set(err, KILN_ERROR_INVALID_ARGUMENT,
                          "KILN_LOG=%s: expected error, warning, info or debug", v);
}

void kiln_rt_logf(const kiln_rt_log *log, kiln_log_level level, const char *fmt, ...)
{
    if (!log || !log->fn || level < log->level) return;
    char msg[KILN_ERROR_MAX];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    log->fn(log->user, level, msg);
}
