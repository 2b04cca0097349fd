/* SPDX-License-Identifier: Apache-2.0 */
/*
 * expand.c — runs a Lua 5.4 template to turn a kernel description into CUDA
 * source and a launch description.
 *
 * Every expansion gets a fresh lua_State, so nothing a template does survives
 * it.  The sandbox opens only base, string, table, math and utf8, then
 * removes what reaches outside (dofile, loadfile, load, require,
 * collectgarbage, print, warn, string.dump) and hides the string metatable.
 * xpcall is removed too: Lua runs a message handler with hooks off when the
 * error comes from a hook, so a handler could loop unbounded.
 *
 * Resources are bounded by a count hook (instruction budget and a wall-time
 * deadline, both checked in the hook) and by an allocator with a cap.  Work
 * done inside C functions, where no instruction is counted, is charged to
 * the same budget: every byte allocated, each string.rep repetition, the
 * steps of each pattern match and each error pcall catches.  Patterns may
 * not use quantifiers or %b, so one match costs at most (subject length) x
 * (pattern length) steps and is charged up front.
 * Once the budget or the deadline is spent every further instruction
 * fails, so a template cannot pcall its way past it.
 *
 * The generated source may #include only the CUDA headers NVRTC carries
 * itself: NVRTC would read any other path from the host, and a failure log
 * would quote it.
 *
 * Everything that touches Lua runs inside one lua_pcall (expand_protected),
 * so a memory error never reaches Lua's panic handler.  The message handler
 * makes sure every error names a template file:line; kiln_expand appends
 * the spec position.
 *
 * Threads: an expander holds only its settings, so several threads may call
 * kiln_expand with one expander at once (not while kiln_expander_set_budget
 * runs).  Lua's string hash is seeded per state, so templates must not let
 * the order of pairs() reach the generated source.
 */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <lauxlib.h>
#include <lua.h>
#include <lualib.h>

#include "embedded.h"
#include "expand.h"
#include "knobs.h"

#define KILN_EXPAND_DEFAULT_BUDGET 50000000L
#define KILN_EXPAND_MEM_LIMIT ((size_t)256 << 20)
#define KILN_EXPAND_HOOK_STEP 1000
#define KILN_TEMPLATE_NAME_MAX 64
/* Wall time an expansion may take ($KILN_TEMPLATE_SECONDS).  The shipped
 * templates take milliseconds; the budget normally ends a runaway first. */
#define KILN_EXPAND_DEFAULT_SECONDS 10.0
/* Work in C charged to the instruction budget: one unit per this many bytes
 * allocated, and per this many pattern-matching steps (about what one VM
 * instruction costs). */
#define KILN_EXPAND_BYTES_PER_UNIT 16
#define KILN_EXPAND_STEPS_PER_UNIT 8
/* An error caught by pcall, charged in budget units: raising and unwinding
 * cost a microsecond or more (far more under sanitizers), hundreds of
 * instructions' worth. */
#define KILN_EXPAND_ERROR_UNITS 1000
/* A hook step that took longer than this (instructions that are slow by
 * themselves: comparing or hashing long strings) makes the hook run every
 * KILN_EXPAND_SLOW_STEP instructions, so the deadline is checked in time. */
#define KILN_EXPAND_SLOW_SECONDS 0.05
#define KILN_EXPAND_SLOW_STEP 10

struct kiln_expander {
    char *template_dir;          /* override directory, or NULL */
    long budget;
    double seconds;              /* wall-time deadline per expansion */
};

enum { STOP_NONE, STOP_BUDGET, STOP_DEADLINE };

/* State of one expansion; it is the allocator's ud, so hooks and C
 * functions reach it with lua_getallocf. */
typedef struct expansion {
    const kiln_expander *ex;
    const kiln_kernel_desc *desc;
    const kiln_spec *spec;       /* NULL when checking a bare description */
    const char *arch;
    int check;                   /* 1: mode "check" (kiln_template_check) */
    const char *refused;         /* the spec key of kiln.refuse, a kiln_knobs row */
    lua_State *L;                /* once created: the allocator may set the hook */
    size_t mem_used, mem_limit;
    long budget_left;            /* VM instructions and charged C work */
    double deadline, last_hook;  /* kiln_now() seconds */
    int hook_step;
    int stopped;                 /* STOP_*: every instruction fails from now on */
    char stop_msg[256];          /* the first stop's message, with its position */
    char family_file[KILN_TEMPLATE_NAME_MAX + 8]; /* "simple.lua" */
    char main_source[KILN_TEMPLATE_NAME_MAX + 16]; /* "@templates/simple.lua" */
    int return_line;             /* line of the main chunk's last return */
    char *pending;               /* file text being pushed; freed on any exit */
    char *source;                /* result (malloc'd) */
    kiln_launch_desc launch;
} expansion;

static void expand_hook(lua_State *L, lua_Debug *ar);

/* ---- allocator with a cap ------------------------------------------------ */

static void *expand_alloc(void *ud, void *ptr, size_t osize, size_t nsize)
{
    expansion *x = ud;
    if (!ptr) osize = 0;         /* osize is a type tag when ptr is NULL */
    if (nsize == 0) {
        free(ptr);
        x->mem_used -= osize;
        return NULL;
    }
    if (nsize > osize && x->mem_used - osize + nsize > x->mem_limit) return NULL;
    void *p = realloc(ptr, nsize);
    if (!p) return NULL;
    x->mem_used = x->mem_used - osize + nsize;
    /* Building and copying big strings is C work no instruction counts;
     * the hook sees the charge at its next step. */
    if (nsize > osize) {
        x->budget_left -= (long)((nsize - osize) / KILN_EXPAND_BYTES_PER_UNIT);
        /* Spent here: run the hook at the very next instruction rather than
         * after a step of instructions that may each build more.
         * lua_sethook may be called anywhere (lua.c calls it from a signal
         * handler). */
        if (x->budget_left <= 0 && x->L && x->hook_step != 1) {
            x->hook_step = 1;
            lua_sethook(x->L, expand_hook, LUA_MASKCOUNT | LUA_MASKRET, 1);
        }
    }
    return p;
}

static expansion *get_expansion(lua_State *L)
{
    void *ud = NULL;
    lua_getallocf(L, &ud);
    return ud;
}

/* ---- hooks: instruction budget, deadline, line of the final return ------ */

/* Stops the expansion for good (budget or deadline) and raises the stop's
 * message.  ar is the frame to name (the hook's, or a C function's caller).
 * From now on the hook runs at every instruction and raises again, so a
 * pcall in the template cannot swallow the stop and carry on. */
static int stop_expansion(lua_State *L, lua_Debug *ar, int why)
{
    expansion *x = get_expansion(L);
    if (!x->stopped) {
        x->stopped = why;
        x->hook_step = 1;
        lua_sethook(L, expand_hook, LUA_MASKCOUNT | LUA_MASKRET, 1);
        char where[128] = "";
        if (ar && lua_getinfo(L, "Sl", ar) && ar->currentline > 0)
            snprintf(where, sizeof where, "%s:%d: ", ar->short_src, ar->currentline);
        else
            snprintf(where, sizeof where, "templates/%s: ", x->family_file);
        if (why == STOP_DEADLINE)
            snprintf(x->stop_msg, sizeof x->stop_msg,
                     "%stemplate deadline passed (%.3g s of wall time; "
                     "$KILN_TEMPLATE_SECONDS)", where, x->ex->seconds);
        else
            snprintf(x->stop_msg, sizeof x->stop_msg,
                     "%sinstruction budget exhausted (%ld VM instructions; allocation, "
                     "string work and errors count too)", where, x->ex->budget);
    }
    lua_pushstring(L, x->stop_msg);
    return lua_error(L);
}

/* Charges C work to the budget from inside a C function called by the
 * template; raises when it is spent. */
static void charge(lua_State *L, double units)
{
    expansion *x = get_expansion(L);
    x->budget_left -= units > (double)LONG_MAX / 2 ? LONG_MAX / 2 : (long)units;
    if (x->budget_left <= 0 || x->stopped) {
        lua_Debug ar;
        int have = lua_getstack(L, 1, &ar);
        stop_expansion(L, have ? &ar : NULL, x->stopped ? x->stopped : STOP_BUDGET);
    }
}

static void expand_hook(lua_State *L, lua_Debug *ar)
{
    expansion *x = get_expansion(L);
    if (ar->event == LUA_HOOKRET) {
        if (lua_getinfo(L, "Sl", ar) && ar->what && strcmp(ar->what, "main") == 0 &&
            ar->source && strcmp(ar->source, x->main_source) == 0 && ar->currentline > 0)
            x->return_line = ar->currentline;
        return;
    }
    if (ar->event != LUA_HOOKCOUNT) return;
    x->budget_left -= x->hook_step;
    if (x->stopped) stop_expansion(L, ar, x->stopped);
    double now = kiln_now();
    if (now > x->deadline) stop_expansion(L, ar, STOP_DEADLINE);
    if (x->budget_left <= 0) stop_expansion(L, ar, STOP_BUDGET);
    int step = x->hook_step;
    if (now - x->last_hook > KILN_EXPAND_SLOW_SECONDS && step > KILN_EXPAND_SLOW_STEP)
        step = KILN_EXPAND_SLOW_STEP;
    if (x->budget_left < step) step = (int)x->budget_left;
    x->last_hook = now;
    if (step != x->hook_step) {
        x->hook_step = step;
        lua_sethook(L, expand_hook, LUA_MASKCOUNT | LUA_MASKRET, step);
    }
}

/* ---- error messages ----------------------------------------------------- */

/* 1 if msg starts with "templates/NAME:DIGITS:". */
static int has_template_position(const char *msg)
{
    if (strncmp(msg, "templates/", 10) != 0) return 0;
    const char *p = msg + 10;
    while (*p && *p != ':' && *p != ' ' && *p != '\n') p++;
    if (*p != ':') return 0;
    p++;
    if (*p < '0' || *p > '9') return 0;
    while (*p >= '0' && *p <= '9') p++;
    return *p == ':';
}

/* Message handler: turns any error value into a string that starts with the
 * template position of the innermost template frame. */
static int expand_msgh(lua_State *L)
{
    const char *msg = lua_type(L, 1) == LUA_TSTRING || lua_type(L, 1) == LUA_TNUMBER
                          ? lua_tostring(L, 1)
                          : NULL;
    if (!msg) msg = lua_pushfstring(L, "(error object is a %s value)", luaL_typename(L, 1));
    if (has_template_position(msg)) {
        lua_pushstring(L, msg);
        return 1;
    }
    lua_Debug ar;
    for (int level = 0; lua_getstack(L, level, &ar); level++) {
        if (!lua_getinfo(L, "Sl", &ar)) continue;
        if (ar.currentline > 0 && ar.source && strncmp(ar.source, "@templates/", 11) == 0) {
            lua_pushfstring(L, "%s:%d: %s", ar.short_src, ar.currentline, msg);
            return 1;
        }
    }
    expansion *x = get_expansion(L);
    lua_pushfstring(L, "templates/%s: %s", x->family_file, msg);
    return 1;
}

/* ---- template files ----------------------------------------------------- */

/* Names a template may ask for: one path component of [A-Za-z0-9_.-], not
 * starting with a dot (so no "..", no hidden files, no directories). */
static int valid_file_name(const char *name)
{
    size_t n = strlen(name);
    if (n == 0 || n >= KILN_TEMPLATE_NAME_MAX || name[0] == '.') return 0;
    for (size_t i = 0; i < n; i++) {
        char c = name[i];
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              c == '_' || c == '-' || c == '.'))
            return 0;
    }
    return 1;
}

/* Pushes the text of templates/<name> (override directory first, then the
 * embedded files) and returns 1, or pushes nothing and returns 0 when there
 * is no such file.  Raises a Lua error when the override file exists but
 * cannot be read. */
static int push_template_file(lua_State *L, const char *name)
{
    expansion *x = get_expansion(L);
    if (x->ex->template_dir) {
        char path[KILN_PATH_MAX + KILN_TEMPLATE_NAME_MAX + 2];
        snprintf(path, sizeof path, "%s/%s", x->ex->template_dir, name);
        struct stat st;
        if (stat(path, &st) == 0) {
            size_t len = 0;
            kiln_error e;
            free(x->pending);
            x->pending = NULL;
            if (!S_ISREG(st.st_mode) || kiln_file_read(path, &x->pending, &len, &e) != KILN_OK)
                return luaL_error(L, "cannot read template file '%s'", path);
            lua_pushlstring(L, x->pending, len);
            free(x->pending);
            x->pending = NULL;
            return 1;
        }
    }
    const kiln_embedded_file *f = kiln_embedded_find(name);
    if (!f) return 0;
    lua_pushlstring(L, f->data, f->size);
    return 1;
}

/* Loads templates/<file> as a text chunk named "@templates/<file>" and
 * leaves the function on the stack; errors (missing file, syntax) raise. */
static void load_template_chunk(lua_State *L, const char *file)
{
    if (!push_template_file(L, file)) luaL_error(L, "no template 'templates/%s'", file);
    size_t len;
    const char *text = lua_tolstring(L, -1, &len);
    char chunkname[KILN_TEMPLATE_NAME_MAX + 16];
    snprintf(chunkname, sizeof chunkname, "@templates/%s", file);
    if (luaL_loadbufferx(L, text, len, chunkname, "t") != LUA_OK) lua_error(L);
    lua_remove(L, -2);           /* the text */
}

/* kiln.text(name): text of templates/<name>. */
static int l_kiln_text(lua_State *L)
{
    const char *name = luaL_checkstring(L, 1);
    if (!valid_file_name(name))
        return luaL_error(L, "kiln.text: bad file name '%s' (one file name under templates/)",
                          name);
    if (!push_template_file(L, name))
        return luaL_error(L, "kiln.text: no file 'templates/%s'", name);
    return 1;
}

/* kiln.refuse(key, message [, level]): the template cannot build this spec
 * because of the spec key `key` (a dotted spec key).  The error names the
 * template line at `level` (as error() counts: 1, the caller of refuse;
 * 2, its caller, for helpers) and C reports it at the key's line:col. */
static int l_kiln_refuse(lua_State *L)
{
    const char *key = luaL_checkstring(L, 1);
    const char *msg = luaL_checkstring(L, 2);
    int level = (int)luaL_optinteger(L, 3, 1);
    const kiln_knob *k = kiln_knob_find(key);
    if (!k) return luaL_error(L, "kiln.refuse: '%s' is not a spec key", key);
    get_expansion(L)->refused = k->key;
    luaL_where(L, level);
    lua_pushstring(L, msg);
    lua_concat(L, 2);
    return lua_error(L);
}

/* include(name): runs templates/<name>.lua once per expansion and returns
 * its value (true when it returns nothing). */
static int l_include(lua_State *L)
{
    const char *arg = luaL_checkstring(L, 1);
    char base[KILN_TEMPLATE_NAME_MAX];
    size_t n = strlen(arg);
    if (n > 4 && strcmp(arg + n - 4, ".lua") == 0) n -= 4;
    if (n == 0 || n >= sizeof base - 4) return luaL_error(L, "include: bad name '%s'", arg);
    memcpy(base, arg, n);
    base[n] = '\0';
    char file[KILN_TEMPLATE_NAME_MAX + 8];
    snprintf(file, sizeof file, "%s.lua", base);
    if (!valid_file_name(file) || strchr(base, '.'))
        return luaL_error(L, "include: bad name '%s' (a template name such as \"common\")", arg);

    lua_getfield(L, LUA_REGISTRYINDEX, "kiln.includes");
    int cache = lua_gettop(L);
    lua_getfield(L, cache, base);
    if (lua_islightuserdata(L, -1))
        return luaL_error(L, "include: 'templates/%s' includes itself (include loop)", file);
    if (!lua_isnil(L, -1)) return 1;
    lua_pop(L, 1);
    lua_pushlightuserdata(L, (void *)&l_include); /* "loading" marker */
    lua_setfield(L, cache, base);

    if (!push_template_file(L, file)) {
        lua_pushnil(L);
        lua_setfield(L, cache, base);
        return luaL_error(L, "include: no template 'templates/%s'", file);
    }
    lua_pop(L, 1);
    load_template_chunk(L, file);
    lua_call(L, 0, 1);
    if (lua_isnil(L, -1)) {
        lua_pop(L, 1);
        lua_pushboolean(L, 1);
    }
    lua_pushvalue(L, -1);
    lua_setfield(L, cache, base);
    return 1;
}

/* setmetatable without finalizers: a __gc metamethod would run code while
 * the state closes, outside the expansion's error handling. */
static int l_setmetatable(lua_State *L)
{
    int t = lua_type(L, 2);
    luaL_checktype(L, 1, LUA_TTABLE);
    luaL_argexpected(L, t == LUA_TNIL || t == LUA_TTABLE, 2, "nil or table");
    if (t == LUA_TTABLE) {
        if (lua_getfield(L, 2, "__gc") != LUA_TNIL)
            return luaL_error(L, "setmetatable: __gc metamethods are not allowed in templates");
        lua_pop(L, 1);
    }
    if (luaL_getmetafield(L, 1, "__metatable") != LUA_TNIL)
        return luaL_error(L, "cannot change a protected metatable");
    lua_settop(L, 2);
    lua_setmetatable(L, 1);
    return 1;
}

/* ---- bounded pattern matching, string.rep ------------------------------- */

/* NULL when pattern p (m bytes) has no quantifier (* + - ?) and no %b, so
 * that one match attempt takes at most m steps; else what is wrong.  The
 * walk follows lstrlib's reading of items and sets. */
static const char *pattern_problem(const char *p, size_t m)
{
    size_t i = 0;
    if (i < m && p[i] == '^') i++;
    while (i < m) {
        char c = p[i];
        if (c == '%') {
            if (i + 1 >= m) return "ends with '%'";
            if (p[i + 1] == 'b') return "uses %b";
            if (p[i + 1] != 'f') {
                i += 2;
                continue;
            }
            i += 2;
            if (i >= m || p[i] != '[') return "has %f without a set";
            c = '[';
        }
        if (c == '[') {
            i++;
            if (i < m && p[i] == '^') i++;
            do {
                if (i >= m) return "has '[' without ']'";
                if (p[i++] == '%' && i < m) i++;
            } while (i >= m || p[i] != ']');
            i++;
            continue;
        }
        if (c == '*' || c == '+' || c == '-' || c == '?') return "uses a quantifier (* + - ?)";
        i++;
    }
    return NULL;
}

/* string.find/match/gmatch/gsub with a checked pattern, and string.rep;
 * the work charged to the budget before it runs.  Upvalues: the library
 * function, its name. */
static int l_string_guard(lua_State *L)
{
    const char *name = lua_tostring(L, lua_upvalueindex(2));
    size_t n, m;
    luaL_checklstring(L, 1, &n);
    if (strcmp(name, "rep") == 0) {
        /* One copy per repetition: rep("x", 1 << 26) is 64 Mi copies. */
        lua_Integer reps = luaL_checkinteger(L, 2);
        size_t sep = 0;
        luaL_optlstring(L, 3, "", &sep);
        if (reps > 0)
            charge(L, (double)reps * (1.0 + (double)(n + sep) / KILN_EXPAND_BYTES_PER_UNIT));
        goto call;
    }
    const char *p = luaL_checklstring(L, 2, &m);
    int plain = strcmp(name, "find") == 0 && lua_toboolean(L, 4);
    const char *why = plain ? NULL : pattern_problem(p, m);
    if (why) {
        char shown[48];
        size_t k = 0;
        for (size_t i = 0; i < m && k + 1 < sizeof shown; i++)
            shown[k++] = p[i] >= 0x20 && p[i] < 0x7f ? p[i] : '?';
        shown[k] = '\0';
        return luaL_error(L, "string.%s: pattern '%s' %s; template patterns may not use "
                             "quantifiers or %%b, so that matching time is bounded",
                          name, shown, why);
    }
    charge(L, ((double)n + 1) * ((double)m + 1) / KILN_EXPAND_STEPS_PER_UNIT);
call:
    lua_pushvalue(L, lua_upvalueindex(1));
    lua_insert(L, 1);
    lua_call(L, lua_gettop(L) - 1, LUA_MULTRET);
    return lua_gettop(L);
}

/* pcall that charges each error it catches: raising and unwinding cost
 * microseconds and no instruction, so a template recursing through pcall
 * to the stack limit and back would otherwise run for minutes in budget. */
static int l_pcall(lua_State *L)
{
    luaL_checkany(L, 1);
    int status = lua_pcall(L, lua_gettop(L) - 1, LUA_MULTRET, 0);
    if (status != LUA_OK) charge(L, KILN_EXPAND_ERROR_UNITS);
    lua_pushboolean(L, status == LUA_OK);
    lua_insert(L, 1);
    return lua_gettop(L);
}

static void guard_strings(lua_State *L)
{
    static const char *const fns[] = {"find", "match", "gmatch", "gsub", "rep", NULL};
    lua_getglobal(L, LUA_STRLIBNAME); /* also the strings' __index */
    for (const char *const *f = fns; *f; f++) {
        lua_getfield(L, -1, *f);
        lua_pushstring(L, *f);
        lua_pushcclosure(L, l_string_guard, 2);
        lua_setfield(L, -2, *f);
    }
    lua_pop(L, 1);
}

/* ---- #include in the generated source ------------------------------------ */

/* The character at *i after line splices (backslash-newline), advancing
 * past it; -1 at the end. */
static int src_next(const char *s, size_t n, size_t *i)
{
    while (*i < n && s[*i] == '\\') {
        size_t j = *i + 1;
        if (j < n && s[j] == '\r') j++;
        if (j >= n || s[j] != '\n') break;
        *i = j + 1;
    }
    return *i < n ? (unsigned char)s[(*i)++] : -1;
}

static int src_peek(const char *s, size_t n, size_t i)
{
    return src_next(s, n, &i);
}

/* Skips blanks and block comments within a line (a comment may span lines:
 * the preprocessor sees it as one space). */
static void src_skip_blanks(const char *s, size_t n, size_t *i)
{
    for (;;) {
        size_t j = *i;
        int c = src_next(s, n, &j);
        if (c == ' ' || c == '\t' || c == '\v' || c == '\f' || c == '\r') {
            *i = j;
        } else if (c == '/' && src_peek(s, n, j) == '*') {
            src_next(s, n, &j);
            int prev = 0;
            while ((c = src_next(s, n, &j)) >= 0 && !(prev == '*' && c == '/')) prev = c;
            *i = j;
        } else {
            return;
        }
    }
}

static int header_allowed(const char *h)
{
    static const char *const exact[] = {
        "cuda_fp16.h",  "cuda_fp16.hpp", "cuda_bf16.h", "cuda_bf16.hpp", "cuda_fp8.h",
        "cuda_fp8.hpp", "cuda_fp6.h",    "cuda_fp6.hpp", "cuda_fp4.h",   "cuda_fp4.hpp",
        "cooperative_groups.h", NULL};
    static const char *const under[] = {"cuda/", "cooperative_groups/", "nv/", NULL};
    if (strstr(h, "..")) return 0;
    for (const char *p = h; *p; p++)
        if (!((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9') ||
              *p == '_' || *p == '.' || *p == '/' || *p == '-'))
            return 0;
    for (const char *const *e = exact; *e; e++)
        if (!strcmp(h, *e)) return 1;
    for (const char *const *u = under; *u; u++)
        if (!strncmp(h, *u, strlen(*u)) && h[strlen(*u)]) return 1;
    return 0;
}

/* 1 if the directive whose name starts at *i (after '#') may stay: any
 * directive but include, include_next, import and embed, or an include of
 * an allowed <header>. */
static int directive_allowed(const char *s, size_t n, size_t i)
{
    src_skip_blanks(s, n, &i);
    char name[16];
    size_t k = 0;
    int c;
    while ((c = src_peek(s, n, i)) >= 0 &&
           ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_')) {
        src_next(s, n, &i);
        if (k + 1 < sizeof name) name[k++] = (char)c;
        else k = sizeof name; /* too long to be one of ours; still read past it */
    }
    if (c == '\\') return 0;  /* a universal character name in a directive name */
    if (k >= sizeof name) return 1;
    name[k] = '\0';
    if (strcmp(name, "include") && strcmp(name, "include_next") && strcmp(name, "import") &&
        strcmp(name, "embed"))
        return 1;
    if (strcmp(name, "include")) return 0;
    src_skip_blanks(s, n, &i);
    if (src_next(s, n, &i) != '<') return 0;  /* "file" or a macro */
    char header[128];
    k = 0;
    while ((c = src_next(s, n, &i)) >= 0 && c != '>' && c != '\n')
        if (k + 1 < sizeof header) header[k++] = (char)c;
        else return 0;
    header[k] = '\0';
    return c == '>' && header_allowed(header);
}

/* Checks every directive introducer (#, %: or ??=) wherever it stands, in
 * comments and strings too: a rule that needs no C++ lexer cannot be
 * fooled by one.  On a refused directive, writes its line (1-based) and
 * text into line and what and returns 0. */
static int source_includes_ok(const char *s, size_t n, int *line, char *what, size_t size)
{
    int ln = 1;
    for (size_t i = 0; i < n; i++) {
        if (s[i] == '\n') ln++;
        size_t j = i;
        int c = src_next(s, n, &j);
        if (c == '%' && src_peek(s, n, j) == ':') src_next(s, n, &j);
        else if (c == '?' && src_next(s, n, &j) == '?' && src_peek(s, n, j) == '=') src_next(s, n, &j);
        else if (c != '#') continue;
        if (directive_allowed(s, n, j)) continue;
        *line = ln;
        size_t k = 0;
        for (size_t p = i; p < n && s[p] != '\n' && k + 1 < size && k < 60; p++)
            what[k++] = s[p] >= 0x20 && s[p] < 0x7f ? s[p] : '?';
        what[k] = '\0';
        return 0;
    }
    return 1;
}

/* ---- the sandbox -------------------------------------------------------- */

static void open_sandbox(lua_State *L)
{
    static const luaL_Reg libs[] = {
        {LUA_GNAME, luaopen_base},       {LUA_STRLIBNAME, luaopen_string},
        {LUA_TABLIBNAME, luaopen_table}, {LUA_MATHLIBNAME, luaopen_math},
        {LUA_UTF8LIBNAME, luaopen_utf8}, {NULL, NULL}};
    for (const luaL_Reg *lib = libs; lib->func; lib++) {
        luaL_requiref(L, lib->name, lib->func, 1);
        lua_pop(L, 1);
    }
    static const char *const removed[] = {"dofile",         "loadfile", "load", "require",
                                          "collectgarbage", "print",    "warn", "xpcall",
                                          NULL};
    for (const char *const *name = removed; *name; name++) {
        lua_pushnil(L);
        lua_setglobal(L, *name);
    }
    lua_pushcfunction(L, l_setmetatable);
    lua_setglobal(L, "setmetatable");
    lua_pushcfunction(L, l_pcall);
    lua_setglobal(L, "pcall");

    lua_getglobal(L, LUA_STRLIBNAME);
    lua_pushnil(L);
    lua_setfield(L, -2, "dump");
    lua_pop(L, 1);
    guard_strings(L);
    /* getmetatable("") gives false: the string library table stays out of
     * reach through string values' metatable. */
    lua_pushliteral(L, "");
    if (lua_getmetatable(L, -1)) {
        lua_pushboolean(L, 0);
        lua_setfield(L, -2, "__metatable");
        lua_pop(L, 1);
    }
    lua_pop(L, 1);

    /* Deterministic output: the same spec must give the same source. */
    lua_getglobal(L, LUA_MATHLIBNAME);
    lua_getfield(L, -1, "randomseed");
    lua_pushinteger(L, 0);
    lua_call(L, 1, 0);
    lua_pop(L, 1);

    lua_newtable(L);
    lua_setfield(L, LUA_REGISTRYINDEX, "kiln.includes");

    lua_newtable(L);             /* kiln */
    const kiln_embedded_file *abi = kiln_embedded_find("kernel_abi.h");
    if (!abi) luaL_error(L, "kernel_abi.h is not embedded (build error)");
    lua_pushlstring(L, abi->data, abi->size);
    lua_setfield(L, -2, "abi");
    lua_pushliteral(L, KILN_VERSION_STRING);
    lua_setfield(L, -2, "version");
    lua_pushcfunction(L, l_kiln_text);
    lua_setfield(L, -2, "text");
    lua_pushcfunction(L, l_kiln_refuse);
    lua_setfield(L, -2, "refuse");
    lua_setglobal(L, "kiln");
    lua_pushcfunction(L, l_include);
    lua_setglobal(L, "include");
}

/* ---- the spec table ------------------------------------------------------ */

/* Pushes a knob's value: a string (ENUM, STRING, NAME: the spelling of
 * the spec language), an integer or a boolean. */
static void push_knob(lua_State *L, const kiln_knob *k, const kiln_kernel_desc *d)
{
    switch (k->kind) {
    case KILN_KNOB_INT: lua_pushinteger(L, kiln_knob_get(k, d)); break;
    case KILN_KNOB_BOOL: lua_pushboolean(L, kiln_knob_get(k, d)); break;
    case KILN_KNOB_ARCHS:
        lua_newtable(L);
        for (int i = 0; i < d->n_archs && i < KILN_MAX_ARCHS; i++) {
            lua_pushstring(L, d->archs[i]);
            lua_rawseti(L, -2, i + 1);
        }
        break;
    default: lua_pushstring(L, kiln_knob_spelling(k, d)); break;
    }
}

/* The description as templates read it: every knob of kiln_knobs under its
 * spec key (spec.tile.m, spec.epilogue.scale), with the spec's spellings;
 * the kernel's name as spec.name.  spec (may be NULL) adds where the spec
 * came from: spec_path, spec_line, spec_col. */
static void push_spec(lua_State *L, const kiln_kernel_desc *d, const kiln_spec *spec)
{
    lua_newtable(L);
    for (const kiln_knob *k = kiln_knobs; k->key; k++) {
        const char *dot = strchr(k->key, '.');
        if (k->kind == KILN_KNOB_MAP) {
            lua_newtable(L);
            lua_setfield(L, -2, k->key);
            continue;
        }
        if (!kiln_knob_has_value(k) && k->kind != KILN_KNOB_ARCHS) continue;
        if (dot) {
            lua_pushlstring(L, k->key, (size_t)(dot - k->key));
            lua_rawget(L, -2);
        }
        push_knob(L, k, d);
        lua_setfield(L, -2, k->kind == KILN_KNOB_NAME ? k->text : dot ? dot + 1 : k->key);
        if (dot) lua_pop(L, 1);
    }
    if (!spec) return;
    lua_pushstring(L, spec->path);
    lua_setfield(L, -2, "spec_path");
    lua_pushinteger(L, spec->line);
    lua_setfield(L, -2, "spec_line");
    lua_pushinteger(L, spec->col);
    lua_setfield(L, -2, "spec_col");
}

/* ---- the launch table ---------------------------------------------------- */

/* Raises "templates/F.lua:LINE: <template returned ...>" at the template's
 * return statement. */
static int return_error(lua_State *L, const char *fmt, ...)
{
    expansion *x = get_expansion(L);
    char what[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    if (x->return_line > 0)
        lua_pushfstring(L, "templates/%s:%d: %s", x->family_file, x->return_line, what);
    else
        lua_pushfstring(L, "templates/%s: %s", x->family_file, what);
    return lua_error(L);
}

/* Integer field of the table at idx, in [lo, hi]; raises on a bad value. */
static int get_int_field(lua_State *L, int idx, const char *table, const char *key, int required,
                         int dflt, int lo, int hi)
{
    int t = lua_getfield(L, idx, key);
    if (t == LUA_TNIL) {
        lua_pop(L, 1);
        if (required) return_error(L, "launch table: %s%s is missing", table, key);
        return dflt;
    }
    int isnum = 0;
    lua_Integer v = t == LUA_TNUMBER ? lua_tointegerx(L, -1, &isnum) : 0;
    if (!isnum) return_error(L, "launch table: %s%s must be an integer, not %s", table, key,
                             t == LUA_TNUMBER ? "a fraction" : lua_typename(L, t));
    if (v < lo || v > hi)
        return_error(L, "launch table: %s%s = %d is out of range [%d, %d]", table, key,
                     (int)(v < INT_MIN ? INT_MIN : v > INT_MAX ? INT_MAX : v), lo, hi);
    lua_pop(L, 1);
    return (int)v;
}

/* Refuses keys other than the allowed ones, so that typos do not pass. */
static void check_keys(lua_State *L, int idx, const char *table, const char *const *allowed)
{
    lua_pushnil(L);
    while (lua_next(L, idx)) {
        lua_pop(L, 1);
        if (lua_type(L, -1) != LUA_TSTRING)
            return_error(L, "launch table: %s has a non-string key", table[0] ? table : "launch");
        const char *k = lua_tostring(L, -1);
        int ok = 0;
        for (const char *const *a = allowed; *a; a++)
            if (strcmp(*a, k) == 0) ok = 1;
        if (!ok) return_error(L, "launch table: unknown key '%s%s'", table, k);
    }
}

static int valid_identifier(const char *s)
{
    if (!((*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') || *s == '_')) return 0;
    for (s++; *s; s++)
        if (!((*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') || (*s >= '0' && *s <= '9') ||
              *s == '_'))
            return 0;
    return 1;
}

static void read_launch(lua_State *L, int idx, kiln_launch_desc *l)
{
    static const char *const top_keys[] = {"entry",      "threads",     "smem",
                                           "persistent", "ctas_per_sm", "cluster",
                                           "tmap",       "max_groups",  "scale_bias_switch",
                                           "preference", NULL};
    static const char *const mn_keys[] = {"m", "n", NULL};
    static const char *const tmap_keys[] = {"a", "b", "d", NULL};
    static const char *const box_keys[] = {"box_inner", "box_outer", "swizzle", "chunks", NULL};
    memset(l, 0, sizeof *l);
    check_keys(L, idx, "", top_keys);

    int t = lua_getfield(L, idx, "entry");
    if (t != LUA_TSTRING)
        return_error(L, "launch table: entry must be a string, not %s", lua_typename(L, t));
    const char *entry = lua_tostring(L, -1);
    if (!valid_identifier(entry) || strlen(entry) >= sizeof l->entry)
        return_error(L, "launch table: entry '%s' is not a C identifier of at most %d characters",
                     entry, (int)sizeof l->entry - 1);
    snprintf(l->entry, sizeof l->entry, "%s", entry);
    lua_pop(L, 1);

    l->threads = get_int_field(L, idx, "", "threads", 1, 0, 1, 1024);
    /* The arch's limit is the template's to check; this only keeps the
     * number sane. */
    l->smem_bytes = get_int_field(L, idx, "", "smem", 1, 0, 0, 1 << 24);
    t = lua_getfield(L, idx, "persistent");
    if (t != LUA_TBOOLEAN)
        return_error(L, "launch table: persistent must be a boolean, not %s",
                     lua_typename(L, t));
    l->persistent = lua_toboolean(L, -1);
    lua_pop(L, 1);
    l->ctas_per_sm = get_int_field(L, idx, "", "ctas_per_sm", 1, 0, 1, 64);
    l->max_groups = get_int_field(L, idx, "", "max_groups", 0, 0, 0, INT_MAX);
    t = lua_getfield(L, idx, "scale_bias_switch");
    if (t != LUA_TNIL && t != LUA_TBOOLEAN)
        return_error(L, "launch table: scale_bias_switch must be a boolean, not %s",
                     lua_typename(L, t));
    l->scale_bias_switch = lua_toboolean(L, -1);
    lua_pop(L, 1);
    l->preference = get_int_field(L, idx, "", "preference", 0, 0, -100, 100);

    l->cluster_m = l->cluster_n = 1;
    t = lua_getfield(L, idx, "cluster");
    if (t == LUA_TTABLE) {
        int c = lua_gettop(L);
        check_keys(L, c, "cluster.", mn_keys);
        l->cluster_m = get_int_field(L, c, "cluster.", "m", 1, 1, 1, 16);
        l->cluster_n = get_int_field(L, c, "cluster.", "n", 1, 1, 1, 16);
        if (l->cluster_m * l->cluster_n > 16)
            return_error(L, "launch table: cluster %dx%d has more than 16 CTAs", l->cluster_m,
                         l->cluster_n);
    } else if (t != LUA_TNIL) {
        return_error(L, "launch table: cluster must be a table {m=, n=}, not %s",
                     lua_typename(L, t));
    }
    lua_pop(L, 1);

    t = lua_getfield(L, idx, "tmap");
    if (t == LUA_TTABLE) {
        int m = lua_gettop(L);
        check_keys(L, m, "tmap.", tmap_keys);
        for (int i = 0; i < 3; i++) {
            char prefix[16];
            snprintf(prefix, sizeof prefix, "tmap.%s.", tmap_keys[i]);
            int bt = lua_getfield(L, m, tmap_keys[i]);
            if (bt == LUA_TTABLE) {
                int b = lua_gettop(L);
                check_keys(L, b, prefix, box_keys);
                kiln_tmap_desc *d = &l->tmap[i];
                d->used = 1;
                d->box_inner = get_int_field(L, b, prefix, "box_inner", 1, 0, 1, 256);
                d->box_outer = get_int_field(L, b, prefix, "box_outer", 1, 0, 1, 256);
                d->swizzle = get_int_field(L, b, prefix, "swizzle", 1, 0, 0, 128);
                d->chunks = get_int_field(L, b, prefix, "chunks", 0, 0, 0, 256);
                if (d->swizzle != 0 && d->swizzle != 32 && d->swizzle != 64 && d->swizzle != 128)
                    return_error(L, "launch table: %sswizzle = %d must be 0, 32, 64 or 128",
                                 prefix, d->swizzle);
            } else if (bt != LUA_TNIL) {
                return_error(L, "launch table: tmap.%s must be a table, not %s", tmap_keys[i],
                             lua_typename(L, bt));
            }
            lua_pop(L, 1);
        }
    } else if (t != LUA_TNIL) {
        return_error(L, "launch table: tmap must be a table, not %s", lua_typename(L, t));
    }
    lua_pop(L, 1);
}

/* ---- the protected body -------------------------------------------------- */

static int expand_protected(lua_State *L)
{
    expansion *x = lua_touserdata(L, 1);
    lua_settop(L, 0);
    open_sandbox(L);

    load_template_chunk(L, x->family_file);
    push_spec(L, x->desc, x->spec);
    lua_pushstring(L, x->arch);
    lua_pushstring(L, x->check ? "check" : "expand");
    lua_call(L, 3, 2);
    if (x->check) {
        /* What the check reports ({smem = ...}); a template without a check
         * mode returns its launch table second. */
        for (int i = 1; i <= 2; i++) {
            if (lua_type(L, i) != LUA_TTABLE) continue;
            x->launch.smem_bytes = get_int_field(L, i, "", "smem", 0, 0, 0, 1 << 24);
            break;
        }
        return 0;
    }

    if (lua_type(L, 1) != LUA_TSTRING)
        return return_error(L, "template must return (source string, launch table); "
                               "the source is %s",
                            lua_typename(L, lua_type(L, 1)));
    if (lua_type(L, 2) != LUA_TTABLE)
        return return_error(L, "template must return (source string, launch table); "
                               "the launch is %s",
                            lua_typename(L, lua_type(L, 2)));
    size_t len;
    const char *src = lua_tolstring(L, 1, &len);
    if (memchr(src, '\0', len)) return return_error(L, "template returned a source with a NUL byte");
    if (len == 0) return return_error(L, "template returned an empty source");
    read_launch(L, 2, &x->launch);
    int inc_line;
    char inc[64];
    if (!source_includes_ok(src, len, &inc_line, inc, sizeof inc))
        return return_error(L, "generated source line %d: '%s' is not allowed (generated "
                               "source may #include only the CUDA headers NVRTC provides: "
                               "<cuda_fp16.h>, <cuda_bf16.h>, <cuda_fp8.h>, <cuda/...>, "
                               "<cooperative_groups.h>)",
                            inc_line + 1, inc);
    if (!strstr(src, x->launch.entry))
        return return_error(L, "launch entry '%s' does not occur in the returned source",
                            x->launch.entry);
    if (x->stopped) return stop_expansion(L, NULL, x->stopped);

    /* The header line, then the template's text. */
    const kiln_spec *spec = x->spec;
    int hn = snprintf(NULL, 0, "// generated by kiln from %s:%d with templates/%s\n", spec->path,
                      spec->line, x->family_file);
    char *out = malloc((size_t)hn + len + 2);
    if (!out) return luaL_error(L, "not enough memory");
    snprintf(out, (size_t)hn + 1, "// generated by kiln from %s:%d with templates/%s\n",
             spec->path, spec->line, x->family_file);
    memcpy(out + hn, src, len);
    size_t total = (size_t)hn + len;
    if (out[total - 1] != '\n') out[total++] = '\n';
    out[total] = '\0';
    x->source = out;
    return 0;
}

/* ---- public API ---------------------------------------------------------- */

kiln_status kiln_expander_create(const char *template_dir, kiln_expander **out, kiln_error *err)
{
    if (!out) return kiln_error_set(err, KILN_ERROR_INVALID_ARGUMENT, "kiln_expander_create: out is NULL");
    *out = NULL;
    kiln_expander *ex = calloc(1, sizeof *ex);
    if (!ex) return kiln_error_set(err, KILN_ERROR_OUT_OF_MEMORY, "kiln_expander_create: out of memory");
    ex->budget = KILN_EXPAND_DEFAULT_BUDGET;
    ex->seconds = KILN_EXPAND_DEFAULT_SECONDS;
    const char *secs = getenv("KILN_TEMPLATE_SECONDS");
    if (secs && *secs) {
        char *end;
        errno = 0;
        double v = strtod(secs, &end);
        if (errno || *end || !(v > 0 && v <= 86400)) {
            free(ex);
            return kiln_error_set(err, KILN_ERROR_INVALID_ARGUMENT,
                                  "KILN_TEMPLATE_SECONDS='%.40s' is not a number of seconds "
                                  "in (0, 86400]", secs);
        }
        ex->seconds = v;
    }
    if (!template_dir || !*template_dir) {
        /* The CLI passes $KILN_TEMPLATE_DIR; honour it for other callers too. */
        const char *env = getenv("KILN_TEMPLATE_DIR");
        if (env && *env) template_dir = env;
    }
    if (template_dir && *template_dir) {
        struct stat st;
        const char *why = NULL;
        if (stat(template_dir, &st) != 0) why = strerror(errno);
        else if (!S_ISDIR(st.st_mode)) why = "not a directory";
        if (why) {
            free(ex);
            return kiln_error_set(err, KILN_ERROR_IO, "template directory '%s': %s",
                                  template_dir, why);
        }
        if (strlen(template_dir) >= KILN_PATH_MAX) {
            free(ex);
            return kiln_error_set(err, KILN_ERROR_INVALID_ARGUMENT,
                                  "template directory path is too long");
        }
        ex->template_dir = strdup(template_dir);
        if (!ex->template_dir) {
            free(ex);
            return kiln_error_set(err, KILN_ERROR_OUT_OF_MEMORY, "kiln_expander_create: out of memory");
        }
    }
    *out = ex;
    return KILN_OK;
}

void kiln_expander_destroy(kiln_expander *ex)
{
    if (!ex) return;
    free(ex->template_dir);
    free(ex);
}

void kiln_expander_set_budget(kiln_expander *ex, long instructions)
{
    if (ex) ex->budget = instructions > 0 ? instructions : KILN_EXPAND_DEFAULT_BUDGET;
}

/* Copies msg into buf as one line. */
static void one_line(char *buf, size_t size, const char *msg)
{
    size_t n = 0;
    for (const char *p = msg; *p && n + 1 < size; p++)
        buf[n++] = (*p == '\n' || *p == '\r' || *p == '\t') ? ' ' : *p;
    buf[n] = '\0';
}

/* A refusal: "templates/F:N: message" becomes "message (templates/F:N)",
 * positioned at the refused key when spec is given. */
static kiln_status refusal_error(kiln_error *err, const char *msg, const char *key,
                                 const kiln_spec *spec)
{
    char line[KILN_ERROR_MAX - 400], where[160] = "";
    one_line(line, sizeof line, msg);
    char *text = line;
    if (has_template_position(line)) {
        char *colon = strchr(line, ':');
        colon = strchr(colon + 1, ':');
        snprintf(where, sizeof where, " (%.*s)", (int)(colon - line), line);
        text = colon + 1;
        while (*text == ' ') text++;
    }
    if (!spec) return kiln_error_set(err, KILN_ERROR_INVALID_SPEC, "%s%s", text, where);
    int l, c;
    kiln_spec_find_pos(spec, key, &l, &c);
    return kiln_error_set(err, KILN_ERROR_INVALID_SPEC, "%s:%d:%d: %s%s", spec->path, l, c, text,
                          where);
}

/* Copies msg into err as one line, followed by the spec position. */
static kiln_status template_error(kiln_error *err, const char *msg, const kiln_spec *spec)
{
    char line[KILN_ERROR_MAX - 400];
    one_line(line, sizeof line, msg);
    if (!spec) return kiln_error_set(err, KILN_ERROR_TEMPLATE, "%s", line);
    return kiln_error_set(err, KILN_ERROR_TEMPLATE, "%s (expanding %s:%d:%d)", line, spec->path,
                          spec->line, spec->col);
}

/* Runs x's family template in a fresh state; on failure err says why. */
static kiln_status run_template(expansion *x, kiln_error *err)
{
    const kiln_expander *ex = x->ex;
    x->mem_limit = KILN_EXPAND_MEM_LIMIT;
    x->budget_left = ex->budget;
    x->hook_step = ex->budget < KILN_EXPAND_HOOK_STEP ? (int)ex->budget : KILN_EXPAND_HOOK_STEP;

    x->last_hook = kiln_now();
    x->deadline = x->last_hook + ex->seconds;

    const char *family = x->desc->family;
    char file[KILN_TEMPLATE_NAME_MAX + 8];
    snprintf(file, sizeof file, "%s.lua", family);
    if (!*family || strchr(family, '.') || !valid_file_name(file)) {
        char msg[256];
        snprintf(msg, sizeof msg, "templates/%s: bad template family name '%s'", file, family);
        return template_error(err, msg, x->spec);
    }
    snprintf(x->family_file, sizeof x->family_file, "%s", file);
    snprintf(x->main_source, sizeof x->main_source, "@templates/%s", file);

    lua_State *L = lua_newstate(expand_alloc, x);
    if (!L) return kiln_error_set(err, KILN_ERROR_OUT_OF_MEMORY, "kiln_expand: cannot create a Lua state");
    x->L = L;
    lua_sethook(L, expand_hook, LUA_MASKCOUNT | LUA_MASKRET, x->hook_step);

    lua_pushcfunction(L, expand_msgh);
    lua_pushcfunction(L, expand_protected);
    lua_pushlightuserdata(L, x);
    int rc = lua_pcall(L, 1, 0, 1);
    kiln_status status = KILN_OK;
    if (rc != LUA_OK) {
        const char *msg = lua_tostring(L, -1);
        char buf[512];
        if (x->stopped) {
            /* What the template saw last may be a later error (memory, or
             * its own handling of the stop); the stop is the cause. */
            msg = x->stop_msg;
        } else if (rc == LUA_ERRMEM || !msg) {
            snprintf(buf, sizeof buf,
                     "templates/%s: out of memory (a template may use at most %zu MiB)",
                     x->family_file, x->mem_limit >> 20);
            msg = buf;
        } else if (strstr(msg, "not enough memory") && !has_template_position(msg)) {
            snprintf(buf, sizeof buf, "templates/%s: %s (a template may use at most %zu MiB)",
                     x->family_file, msg, x->mem_limit >> 20);
            msg = buf;
        }
        if (x->refused && rc == LUA_ERRRUN && !x->stopped)
            status = refusal_error(err, msg, x->refused, x->spec);
        else
            status = template_error(err, msg, x->spec);
        free(x->source);
        x->source = NULL;
    }
    lua_close(L);
    free(x->pending);
    x->pending = NULL;
    return status;
}

kiln_status kiln_expand(kiln_expander *ex, const kiln_spec *spec, const char *arch, char **source,
                        kiln_launch_desc *launch, kiln_error *err)
{
    if (!ex || !spec || !arch || !source || !launch)
        return kiln_error_set(err, KILN_ERROR_INVALID_ARGUMENT, "kiln_expand: NULL argument");
    *source = NULL;
    expansion x;
    memset(&x, 0, sizeof x);
    x.ex = ex;
    x.desc = &spec->desc;
    x.spec = spec;
    x.arch = arch;
    kiln_status st = run_template(&x, err);
    if (st != KILN_OK) return st;
    *source = x.source;
    *launch = x.launch;
    return KILN_OK;
}

kiln_status kiln_template_check(kiln_expander *ex, const kiln_kernel_desc *d, const char *arch,
                                int *smem, kiln_error *err, const char **key)
{
    if (key) *key = NULL;
    if (smem) *smem = 0;
    if (!d || !arch)
        return kiln_error_set(err, KILN_ERROR_INVALID_ARGUMENT, "kiln_template_check: NULL argument");
    kiln_expander *own = NULL;
    if (!ex) {
        kiln_status st = kiln_expander_create(NULL, &own, err);
        if (st != KILN_OK) return st;
        ex = own;
    }
    expansion x;
    memset(&x, 0, sizeof x);
    x.ex = ex;
    x.desc = d;
    x.arch = arch;
    x.check = 1;
    kiln_status st = run_template(&x, err);
    kiln_expander_destroy(own);
    if (st == KILN_ERROR_INVALID_SPEC && key) *key = x.refused;
    if (st == KILN_OK && smem) *smem = x.launch.smem_bytes;
    return st;
}
