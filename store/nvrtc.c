/* SPDX-License-Identifier: Apache-2.0 */
/*
 * nvrtc.c — compile generated CUDA source to a cubin with NVRTC.
 *
 * Resource use: with `-Xptxas -v`, NVRTC 13 puts ptxas's report into the
 * program log on success, e.g. (one block per entry function)
 *
 *   ptxas info    : Compiling entry function 'k' for 'sm_90a'
 *   ptxas info    : Function properties for k
 *   ptxas         .     0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
 *   ptxas info    : Used 8 registers, used 1 barriers, 256 bytes smem
 *
 * so the stats come from the log (kiln_nvrtc_parse_ptxas).  Should a future
 * NVRTC drop that text, registers and stack frame are read from the cubin's
 * ELF instead (the EIATTR_REGCOUNT / EIATTR_FRAME_SIZE records of .nv.info,
 * kiln_nvrtc_cubin_stats); spills and static shared memory have no exact
 * record there (.nv.shared.<fn> includes the 1 KiB the system reserves on
 * sm_90), so they stay 0 in that case.
 *
 * The same log carries ptxas's remarks where it serialized the wgmma
 * pipeline: it waits for every wgmma before the next one or injects
 * warpgroup waits and arrives (C7511 insufficient registers, C7514
 * accumulators read while a wgmma is in flight, C7517 an injected wait, ...).
 * The kernel still runs right, but about 20% slower on every k-block
 * (docs/sm90_wgrad.md, forty-first session), so the first such remark's
 * number is kept in the stats (wgmma_serialized) and `kiln tune` does not
 * time the kernel.
 *
 * `-lineinfo` is left out on purpose: it embeds the PTX text in the cubin
 * (about 3x larger), which matters for shipped bundles.
 */
#define _POSIX_C_SOURCE 200809L
#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <dlfcn.h>

/* The toolkit's header, for its types only (nothing links libnvrtc);
 * store/nvrtc.h (ours) shadows <nvrtc.h>. */
#ifdef KILN_CUDA_NVRTC_H
#include KILN_CUDA_NVRTC_H
#else
#include <crt/../nvrtc.h>
#endif

#include "nvrtc.h"

/* ---- loading ------------------------------------------------------------ */

/* NVRTC is opened with dlopen at the first compile, like libcuda and
 * cuBLASLt, so that a deployment that serves every kernel from bundles
 * needs no NVRTC at all. */
#define KILN_NVRTC_FUNCTIONS(X)                                                                    \
    X(nvrtcVersion)                                                                                \
    X(nvrtcGetErrorString)                                                                         \
    X(nvrtcCreateProgram)                                                                          \
    X(nvrtcCompileProgram)                                                                         \
    X(nvrtcDestroyProgram)                                                                         \
    X(nvrtcGetProgramLogSize)                                                                      \
    X(nvrtcGetProgramLog)                                                                          \
    X(nvrtcGetCUBINSize)                                                                           \
    X(nvrtcGetCUBIN)

static struct {
#define KILN_NVRTC_FIELD(name) __typeof__(name) *name;
    KILN_NVRTC_FUNCTIONS(KILN_NVRTC_FIELD)
#undef KILN_NVRTC_FIELD
} g_nv;                                  /* written once, under g_load_once */
static char g_load_error[512];           /* why loading failed, or "" */
static pthread_once_t g_load_once = PTHREAD_ONCE_INIT;

static void load_nvrtc(void)
{
    static const char *const names[] = {"libnvrtc.so.13", "libnvrtc.so"};
    void *lib = NULL;
    const char *why = NULL;
    for (size_t i = 0; i < sizeof names / sizeof names[0] && !lib; i++) {
        dlerror();
        lib = dlopen(names[i], RTLD_NOW | RTLD_LOCAL);
        if (!lib && !why) why = dlerror();
    }
    /* libkiln no longer links NVRTC, so its RUNPATH no longer names the
     * toolkit: look where the toolkit lives too. */
    const char *home = getenv("CUDA_HOME");
    char path[1024];
    for (int i = 0; i < 2 && !lib; i++) {
        const char *root = i == 0 ? home : "/usr/local/cuda";
        if (!root || !*root) continue;
        snprintf(path, sizeof path, "%s/lib64/libnvrtc.so.13", root);
        lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    }
    if (!lib) {
        snprintf(g_load_error, sizeof g_load_error,
                 "libnvrtc.so.13 not found (kernels can only come from bundles or the cache; "
                 "is the CUDA toolkit's lib64 on LD_LIBRARY_PATH?): %s",
                 why ? why : "unknown reason");
        return;
    }
#define KILN_NVRTC_LOOKUP(name)                                                                    \
    {                                                                                              \
        void *fn = dlsym(lib, #name);                                                              \
        if (!fn) {                                                                                 \
            snprintf(g_load_error, sizeof g_load_error, "libnvrtc has no %s", #name);              \
            memset(&g_nv, 0, sizeof g_nv);                                                         \
            dlclose(lib);                                                                          \
            return;                                                                                \
        }                                                                                          \
        memcpy(&g_nv.name, &fn, sizeof fn);                                                        \
    }
    KILN_NVRTC_FUNCTIONS(KILN_NVRTC_LOOKUP)
#undef KILN_NVRTC_LOOKUP
    /* Never closed: NVRTC stays loaded for the life of the process. */
}

kiln_status kiln_nvrtc_load(kiln_error *err)
{
    pthread_once(&g_load_once, load_nvrtc);
    if (g_load_error[0]) return kiln_error_set(err, KILN_ERROR_COMPILE, "%s", g_load_error);
    return KILN_OK;
}

/* Options every kernel is compiled with, besides -arch.  They are part of
 * every cache key (kiln_nvrtc_options), so changing them rebuilds. */
static const char *const k_options[] = {
    "-std=c++17",
    "-default-device",
    "--extra-device-vectorization",
    "-Xptxas",
    "-v",
};
#define N_OPTIONS (sizeof k_options / sizeof k_options[0])

/* ---- version ------------------------------------------------------------ */

static pthread_once_t g_version_once = PTHREAD_ONCE_INIT;
static char g_version[32] = "unknown";   /* written once, under g_version_once */

static void version_init(void)
{
    int major = 0, minor = 0;
    if (kiln_nvrtc_load(NULL) == KILN_OK && g_nv.nvrtcVersion(&major, &minor) == NVRTC_SUCCESS)
        snprintf(g_version, sizeof g_version, "%d.%d", major, minor);
}

const char *kiln_nvrtc_version(void)
{
    pthread_once(&g_version_once, version_init);
    return g_version;
}

static pthread_once_t g_options_once = PTHREAD_ONCE_INIT;
static char g_options[256];              /* written once, under g_options_once */

static void options_init(void)
{
    size_t n = 0;
    for (size_t i = 0; i < N_OPTIONS; i++)
        n += (size_t)snprintf(g_options + n, sizeof g_options - n, "%s%s", i ? " " : "",
                              k_options[i]);
}

const char *kiln_nvrtc_options(void)
{
    pthread_once(&g_options_once, options_init);
    return g_options;
}

int kiln_nvrtc_arch_valid(const char *arch)
{
    /* sm_<digits>[a|f]: NVRTC only emits a cubin for real architectures. */
    if (!arch || strncmp(arch, "sm_", 3) != 0) return 0;
    const char *p = arch + 3;
    if (!isdigit((unsigned char)*p)) return 0;
    while (isdigit((unsigned char)*p)) p++;
    if (*p == 'a' || *p == 'f') p++;
    return *p == '\0' && (size_t)(p - arch) < 16;
}

/* ---- ptxas report ------------------------------------------------------- */

static void take_max(int *slot, long v)
{
    if (v > INT_MAX) v = INT_MAX;
    if (v > *slot) *slot = (int)v;
}

/* Does text at p start with word w, followed by a non-identifier char? */
static int starts_word(const char *p, const char *w)
{
    size_t n = strlen(w);
    if (strncmp(p, w, n) != 0) return 0;
    return !(isalnum((unsigned char)p[n]) || p[n] == '_');
}

static void parse_line(const char *s, const char *end, kiln_compile_stats *st)
{
    const char *p = s;
    while (p < end) {
        if (!isdigit((unsigned char)*p) || (p > s && (isalnum((unsigned char)p[-1]) ||
                                                      p[-1] == '_' || p[-1] == '['))) {
            p++;
            continue;
        }
        char *q;
        errno = 0;
        long v = strtol(p, &q, 10);
        if (errno != 0 || q > end) {
            p = q > p ? q : p + 1;
            continue;
        }
        const char *w = q;
        while (w < end && *w == ' ') w++;
        if (starts_word(w, "registers")) take_max(&st->registers, v);
        else if (starts_word(w, "bytes spill stores")) take_max(&st->spill_stores, v);
        else if (starts_word(w, "bytes spill loads")) take_max(&st->spill_loads, v);
        else if (starts_word(w, "bytes smem")) take_max(&st->smem_static, v);
        else if (starts_word(w, "bytes stack frame")) take_max(&st->stack_frame, v);
        p = q;
    }
}

/* A ptxas remark "(C75nn) ..." about the wgmma pipeline: its number nn + 7500,
 * else 0. */
static int wgmma_remark(const char *line, const char *end)
{
    const size_t n = (size_t)(end - line);
    const char *c = memmem(line, n, "(C75", 4);
    if (!c || !(memmem(line, n, "wgmma", 5) || memmem(line, n, "warpgroup", 9))) return 0;
    int v = 0, digits = 0;
    for (const char *p = c + 2; p < end && isdigit((unsigned char)*p) && digits < 5; p++, digits++)
        v = v * 10 + (*p - '0');
    return digits == 4 ? v : 0;
}

/* Several functions in one log (several kernels, or callees with their own
 * frames): each field is the maximum over them, i.e. the worst kernel;
 * wgmma_serialized is the first remark's. */
void kiln_nvrtc_parse_ptxas(const char *log, kiln_compile_stats *stats)
{
    double seconds = stats->seconds;
    stats->registers = stats->spill_stores = stats->spill_loads = 0;
    stats->smem_static = stats->stack_frame = stats->wgmma_serialized = 0;
    stats->seconds = seconds;
    if (!log) return;
    const char *line = log;
    while (*line) {
        const char *end = strchr(line, '\n');
        if (!end) end = line + strlen(line);
        /* "ptxas ..." lines, and the indented continuation older ptxas
         * versions print under "Function properties for f". */
        const char *t = line;
        while (t < end && (*t == ' ' || *t == '\t')) t++;
        int ours = strncmp(line, "ptxas", 5) == 0 || (t > line && isdigit((unsigned char)*t));
        if (ours && !memmem(line, (size_t)(end - line), "gmem", 4)) parse_line(line, end, stats);
        if (ours && !stats->wgmma_serialized) stats->wgmma_serialized = wgmma_remark(line, end);
        line = *end ? end + 1 : end;
    }
}

/* ---- cubin (ELF) fallback ------------------------------------------------ */

static uint64_t rd(const unsigned char *p, int n)
{
    uint64_t v = 0;
    for (int i = n - 1; i >= 0; i--) v = (v << 8) | p[i];
    return v;
}

int kiln_nvrtc_cubin_stats(const void *cubin, size_t size, kiln_compile_stats *stats)
{
    const unsigned char *b = cubin;
    /* 64-bit little-endian ELF only (every cubin NVRTC makes). */
    if (!b || size < 64 || memcmp(b, "\x7f" "ELF", 4) != 0 || b[4] != 2 || b[5] != 1) return 0;
    uint64_t shoff = rd(b + 0x28, 8);
    uint64_t shentsize = rd(b + 0x3a, 2), shnum = rd(b + 0x3c, 2), shstrndx = rd(b + 0x3e, 2);
    if (shentsize < 64 || shnum == 0 || shstrndx >= shnum || shoff > size ||
        shnum > (size - shoff) / shentsize)
        return 0;
    const unsigned char *strsh = b + shoff + shstrndx * shentsize;
    uint64_t str_off = rd(strsh + 0x18, 8), str_size = rd(strsh + 0x20, 8);
    if (str_off > size || str_size > size - str_off) return 0;
    int found = 0;
    for (uint64_t i = 0; i < shnum; i++) {
        const unsigned char *sh = b + shoff + i * shentsize;
        uint64_t name = rd(sh, 4), off = rd(sh + 0x18, 8), len = rd(sh + 0x20, 8);
        if (name >= str_size || off > size || len > size - off) continue;
        const char *nm = (const char *)b + str_off + name;
        if (!memchr(nm, '\0', str_size - name) || strcmp(nm, ".nv.info") != 0) continue;
        /* Records: u8 format, u8 attribute, then by format: 0x04 = u16 size
         * + payload, 0x03 = u16 value, 0x01/0x02 = nothing/u8. */
        const unsigned char *p = b + off, *e = b + off + len;
        while (e - p >= 2) {
            int fmt = p[0], attr = p[1];
            if (fmt == 4) {
                if (e - p < 4) break;
                size_t n = (size_t)rd(p + 2, 2);
                if ((size_t)(e - p - 4) < n) break;
                if (n == 8 && attr == 0x2f) { /* EIATTR_REGCOUNT: symbol, value */
                    take_max(&stats->registers, (long)rd(p + 8, 4));
                    found = 1;
                } else if (n == 8 && attr == 0x11) { /* EIATTR_FRAME_SIZE */
                    take_max(&stats->stack_frame, (long)rd(p + 8, 4));
                }
                p += 4 + n;
            } else if (fmt == 3) {
                p += 4;
            } else if (fmt == 2) {
                p += 3;
            } else {
                p += 2;
            }
        }
    }
    return found;
}

/* ---- compile -------------------------------------------------------------- */

void kiln_compile_result_free(kiln_compile_result *r)
{
    if (!r) return;
    free(r->cubin);
    free(r->log);
    memset(r, 0, sizeof *r);
}

/* A file-name-safe copy of s. */
static void safe_name(const char *s, char *out, size_t size)
{
    size_t i = 0;
    for (; s && s[i] && i + 1 < size; i++) {
        unsigned char c = (unsigned char)s[i];
        out[i] = (isalnum(c) || c == '_' || c == '-' || c == '.') ? (char)c : '_';
    }
    out[i] = '\0';
    if (i == 0) snprintf(out, size, "kernel");
    else if (out[0] == '.') out[0] = '_';
}

/* The most useful line of a failed compile's log: the first "error" line,
 * else the first non-empty one.  Also counts error lines. */
static void first_error_line(const char *log, char *out, size_t size, int *n_errors)
{
    out[0] = '\0';
    *n_errors = 0;
    if (!log) return;
    const char *first_any = NULL, *first_any_end = NULL;
    const char *first_err = NULL, *first_err_end = NULL;
    const char *line = log;
    while (*line) {
        const char *end = strchr(line, '\n');
        if (!end) end = line + strlen(line);
        const char *t = line;
        while (t < end && isspace((unsigned char)*t)) t++;
        if (t < end) {
            if (!first_any) { first_any = t; first_any_end = end; }
            /* "x.cu(3): error: ..." or "error : ..." or "catastrophic error" */
            int is_err = 0;
            for (const char *q = t; q + 5 <= end; q++) {
                if (strncmp(q, "error", 5) == 0 && (q == t || !isalnum((unsigned char)q[-1])) &&
                    (q + 5 == end || q[5] == ':' || q[5] == ' ')) {
                    is_err = 1;
                    break;
                }
            }
            if (is_err) {
                (*n_errors)++;
                if (!first_err) { first_err = t; first_err_end = end; }
            }
        }
        line = *end ? end + 1 : end;
    }
    const char *s = first_err ? first_err : first_any;
    const char *e = first_err ? first_err_end : first_any_end;
    if (!s) return;
    while (e > s && isspace((unsigned char)e[-1])) e--;
    size_t n = (size_t)(e - s);
    if (n >= size) n = size - 1;
    memcpy(out, s, n);
    out[n] = '\0';
}

/* Saves source and log for a failed compile; fills path (the .cu file). */
static kiln_status save_failed(const char *save_dir, const char *base, const char *source,
                               const char *log, char *path, size_t size, kiln_error *err)
{
    char dir[4096];
    if (save_dir && *save_dir) {
        snprintf(dir, sizeof dir, "%s", save_dir);
    } else {
        const char *tmp = getenv("TMPDIR");
        snprintf(dir, sizeof dir, "%s/kiln-failed", tmp && *tmp ? tmp : "/tmp");
    }
    snprintf(path, size, "%s/%s", dir, base);
    kiln_status st = kiln_mkdirs(dir, err);
    if (st != KILN_OK) return st;
    st = kiln_file_write_atomic(path, source, strlen(source), err);
    if (st != KILN_OK) return st;
    char logpath[4200];
    snprintf(logpath, sizeof logpath, "%.*s.log", (int)(strlen(path) - 3), path);
    return kiln_file_write_atomic(logpath, log ? log : "", log ? strlen(log) : 0, err);
}

static char *program_log(nvrtcProgram prog)
{
    size_t n = 0;
    if (g_nv.nvrtcGetProgramLogSize(prog, &n) != NVRTC_SUCCESS || n == 0) return strdup("");
    char *log = malloc(n + 1);
    if (!log) return NULL;
    if (g_nv.nvrtcGetProgramLog(prog, log) != NVRTC_SUCCESS) log[0] = '\0';
    log[n] = '\0';
    return log;
}

kiln_status kiln_nvrtc_compile(const char *source, const char *name, const char *arch,
                               const char *save_dir, kiln_compile_result *out,
                               kiln_error *err)
{
    if (!out) return kiln_error_set(err, KILN_ERROR_INVALID_ARGUMENT, "nvrtc compile: out is NULL");
    memset(out, 0, sizeof *out);
    if (!name || !*name) name = "kernel";
    if (!source)
        return kiln_error_set(err, KILN_ERROR_INVALID_ARGUMENT, "kernel %s: no source", name);
    if (!kiln_nvrtc_arch_valid(arch))
        return kiln_error_set(err, KILN_ERROR_INVALID_ARGUMENT,
                              "kernel %s: bad arch '%s' (expected sm_<number>[a|f], e.g. sm_90a)",
                              name, arch ? arch : "(null)");

    kiln_status lst = kiln_nvrtc_load(err);
    if (lst != KILN_OK) {
        kiln_error_prefix(err, "kernel %s (%s)", name, arch);
        return lst;
    }
    char sname[128], base[160], archopt[32];
    safe_name(name, sname, sizeof sname);
    snprintf(base, sizeof base, "%s-%s.cu", sname, arch);
    snprintf(archopt, sizeof archopt, "-arch=%s", arch);
    const char *opts[N_OPTIONS + 1];
    opts[0] = archopt;
    for (size_t i = 0; i < N_OPTIONS; i++) opts[i + 1] = k_options[i];

    double t0 = kiln_now();
    nvrtcProgram prog;
    /* The program is named like the file a failed source is saved to, so
     * the log's "x.cu(12): error" lines point into that file. */
    nvrtcResult r = g_nv.nvrtcCreateProgram(&prog, source, base, 0, NULL, NULL);
    if (r != NVRTC_SUCCESS)
        return kiln_error_set(err, r == NVRTC_ERROR_OUT_OF_MEMORY ? KILN_ERROR_OUT_OF_MEMORY
                                                                  : KILN_ERROR_COMPILE,
                              "kernel %s (%s): nvrtcCreateProgram: %s", name, arch,
                              g_nv.nvrtcGetErrorString(r));
    nvrtcResult cr = g_nv.nvrtcCompileProgram(prog, (int)(N_OPTIONS + 1), opts);
    out->log = program_log(prog);
    if (!out->log) {
        g_nv.nvrtcDestroyProgram(&prog);
        return kiln_error_set(err, KILN_ERROR_OUT_OF_MEMORY, "kernel %s (%s): out of memory",
                              name, arch);
    }
    if (cr != NVRTC_SUCCESS) {
        g_nv.nvrtcDestroyProgram(&prog);
        out->stats.seconds = kiln_now() - t0;
        char line[1024];
        int n_errors = 0;
        first_error_line(out->log, line, sizeof line, &n_errors);
        if (!line[0]) snprintf(line, sizeof line, "%s", g_nv.nvrtcGetErrorString(cr));
        char more[64] = "";
        if (n_errors > 1) snprintf(more, sizeof more, " (and %d more errors)", n_errors - 1);
        char path[4200];
        kiln_error serr;
        kiln_error_clear(&serr);
        if (save_failed(save_dir, base, source, out->log, path, sizeof path, &serr) == KILN_OK)
            return kiln_error_set(err, KILN_ERROR_COMPILE,
                                  "kernel %s (%s): NVRTC failed: %s%s; source saved to %s", name,
                                  arch, line, more, path);
        return kiln_error_set(err, KILN_ERROR_COMPILE,
                              "kernel %s (%s): NVRTC failed: %s%s; source not saved: %s", name,
                              arch, line, more, serr.msg);
    }
    size_t size = 0;
    r = g_nv.nvrtcGetCUBINSize(prog, &size);
    if (r != NVRTC_SUCCESS || size == 0) {
        g_nv.nvrtcDestroyProgram(&prog);
        return kiln_error_set(err, KILN_ERROR_COMPILE, "kernel %s (%s): nvrtcGetCUBINSize: %s",
                              name, arch, r != NVRTC_SUCCESS ? g_nv.nvrtcGetErrorString(r) : "no cubin");
    }
    out->cubin = malloc(size);
    if (!out->cubin) {
        g_nv.nvrtcDestroyProgram(&prog);
        return kiln_error_set(err, KILN_ERROR_OUT_OF_MEMORY, "kernel %s (%s): out of memory",
                              name, arch);
    }
    r = g_nv.nvrtcGetCUBIN(prog, out->cubin);
    g_nv.nvrtcDestroyProgram(&prog);
    if (r != NVRTC_SUCCESS) {
        free(out->cubin);
        out->cubin = NULL;
        return kiln_error_set(err, KILN_ERROR_COMPILE, "kernel %s (%s): nvrtcGetCUBIN: %s", name,
                              arch, g_nv.nvrtcGetErrorString(r));
    }
    out->cubin_size = size;
    out->stats.seconds = kiln_now() - t0;
    kiln_nvrtc_parse_ptxas(out->log, &out->stats);
    if (out->stats.registers == 0) kiln_nvrtc_cubin_stats(out->cubin, size, &out->stats);
    return KILN_OK;
}
