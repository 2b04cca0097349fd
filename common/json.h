/* SPDX-License-Identifier: Apache-2.0 */
/*
 * json.h — the one JSON writer (`kiln compile --json`, `kiln tune --json`).
 *
 * It appends to a kiln_strbuf, so the library may use it too (the library
 * never prints).  Commas, quoting and indentation are its business: callers
 * say what comes next and the writer keeps the document valid.  Numbers that
 * JSON cannot hold (NaN, ±Inf) are written as null.
 *
 *   kiln_json j;
 *   kiln_json_init(&j, &sb);
 *   kiln_json_object(&j);
 *   kiln_json_key(&j, "seconds"); kiln_json_number(&j, 1.5);
 *   kiln_json_key(&j, "kernels"); kiln_json_array(&j); ... kiln_json_end(&j);
 *   kiln_json_end(&j);   // sb: {"seconds": 1.5, "kernels": [...]}
 */
#ifndef KILN_JSON_H
#define KILN_JSON_H

#include "common.h"

#define KILN_JSON_DEPTH 32

typedef struct kiln_json {
    kiln_strbuf *out;
    int depth;
    int count[KILN_JSON_DEPTH];  /* values written so far at each level */
    char close[KILN_JSON_DEPTH]; /* '}' or ']' */
    int after_key;               /* the next value follows "key": */
    int fold;                    /* levels deeper than this are written on one line */
    int bad;                     /* misuse (too deep, unbalanced): out is not valid JSON */
} kiln_json;

/* fold: containers nested deeper than fold levels are written on one line
 * (2 keeps a list of records readable); 0 writes everything on one line. */
void kiln_json_init(kiln_json *j, kiln_strbuf *out, int fold);
void kiln_json_object(kiln_json *j);
void kiln_json_array(kiln_json *j);
/* Closes the innermost object or array; after the last one, a newline. */
void kiln_json_end(kiln_json *j);
void kiln_json_key(kiln_json *j, const char *key);
/* Escapes '"', '\\' and control bytes; other bytes pass (UTF-8 stays). */
void kiln_json_string(kiln_json *j, const char *s);
/* %.6g; NaN and ±Inf become null. */
void kiln_json_number(kiln_json *j, double v);
void kiln_json_int(kiln_json *j, long long v);
void kiln_json_bool(kiln_json *j, int v);
void kiln_json_null(kiln_json *j);

/* key + value in one call, for the common flat fields. */
void kiln_json_kstring(kiln_json *j, const char *key, const char *s);
void kiln_json_knumber(kiln_json *j, const char *key, double v);
void kiln_json_kint(kiln_json *j, const char *key, long long v);
void kiln_json_kbool(kiln_json *j, const char *key, int v);

#endif /* KILN_JSON_H */
