/* SPDX-License-Identifier: Apache-2.0 */
/* yaml_limits.c — size, depth, anchor, alias and tag checks on a spec's
 * YAML events, before the document is built (see yaml_limits.h). */
#include <string.h>

#include <yaml.h>

#include "yaml_limits.h"

#define POS(m) (int)(m).line + 1, (int)(m).column + 1

static kiln_status refuse(kiln_error *err, const char *path, yaml_mark_t m, const char *what,
                          long limit, const char *macro)
{
    return kiln_error_set(err, KILN_ERROR_INVALID_SPEC,
                          "%s:%d:%d: %s (a spec may have at most %ld; limit %s)", path, POS(m),
                          what, limit, macro);
}

/* The tag of a node event, or NULL when it has none written. */
static const char *explicit_tag(const yaml_event_t *ev)
{
    switch (ev->type) {
    case YAML_SCALAR_EVENT:
        /* A tag is explicit unless the event says it may be left out. */
        if (ev->data.scalar.plain_implicit || ev->data.scalar.quoted_implicit) return NULL;
        return (const char *)ev->data.scalar.tag;
    case YAML_SEQUENCE_START_EVENT:
        return ev->data.sequence_start.implicit ? NULL
                                                : (const char *)ev->data.sequence_start.tag;
    case YAML_MAPPING_START_EVENT:
        return ev->data.mapping_start.implicit ? NULL
                                               : (const char *)ev->data.mapping_start.tag;
    default:
        return NULL;
    }
}

kiln_status kiln_yaml_check_limits(const char *text, size_t len, const char *path,
                                   kiln_error *err)
{
    if (len > KILN_SPEC_MAX_BYTES)
        return kiln_error_set(err, KILN_ERROR_INVALID_SPEC,
                              "%s: spec is %zu bytes; a spec may have at most %zu "
                              "(limit KILN_SPEC_MAX_BYTES)",
                              path, len, (size_t)KILN_SPEC_MAX_BYTES);
    yaml_parser_t parser;
    if (!yaml_parser_initialize(&parser))
        return kiln_error_set(err, KILN_ERROR_OUT_OF_MEMORY, "%s: out of memory", path);
    yaml_parser_set_input_string(&parser, (const unsigned char *)text, len);
    kiln_status st = KILN_OK;
    long depth = 0, anchors = 0, aliases = 0;
    for (int done = 0; !done && st == KILN_OK;) {
        yaml_event_t ev;
        if (!yaml_parser_parse(&parser, &ev)) break; /* the loader reports it */
        const char *tag = explicit_tag(&ev);
        const char *anchor = NULL;
        if (ev.type == YAML_SCALAR_EVENT) anchor = (const char *)ev.data.scalar.anchor;
        if (ev.type == YAML_SEQUENCE_START_EVENT)
            anchor = (const char *)ev.data.sequence_start.anchor;
        if (ev.type == YAML_MAPPING_START_EVENT)
            anchor = (const char *)ev.data.mapping_start.anchor;

        if (ev.type == YAML_SEQUENCE_START_EVENT || ev.type == YAML_MAPPING_START_EVENT) {
            if (++depth > KILN_SPEC_MAX_DEPTH)
                st = refuse(err, path, ev.start_mark, "nesting too deep", KILN_SPEC_MAX_DEPTH,
                            "KILN_SPEC_MAX_DEPTH");
        } else if (ev.type == YAML_SEQUENCE_END_EVENT || ev.type == YAML_MAPPING_END_EVENT) {
            depth--;
        } else if (ev.type == YAML_ALIAS_EVENT && ++aliases > KILN_SPEC_MAX_ALIASES) {
            st = refuse(err, path, ev.start_mark, "too many aliases", KILN_SPEC_MAX_ALIASES,
                        "KILN_SPEC_MAX_ALIASES");
        } else if (ev.type == YAML_STREAM_END_EVENT) {
            done = 1;
        }
        if (st == KILN_OK && anchor && ++anchors > KILN_SPEC_MAX_ANCHORS)
            st = refuse(err, path, ev.start_mark, "too many anchors", KILN_SPEC_MAX_ANCHORS,
                        "KILN_SPEC_MAX_ANCHORS");
        if (st == KILN_OK && tag) {
            /* Tags are shown shortened ("!!str") and cut: they are file text. */
            const char *shown = tag, *core = "tag:yaml.org,2002:";
            char buf[48];
            if (!strncmp(tag, core, strlen(core))) {
                snprintf(buf, sizeof buf, "!!%s", tag + strlen(core));
                shown = buf;
            }
            char safe[48];
            size_t n = 0;
            for (const char *p = shown; *p && n + 1 < sizeof safe; p++)
                safe[n++] = (*p >= 0x20 && *p < 0x7f) ? *p : '?';
            safe[n] = '\0';
            st = kiln_error_set(err, KILN_ERROR_INVALID_SPEC,
                                "%s:%d:%d: YAML tag '%s' is not allowed in a spec (write the "
                                "value without a tag)",
                                path, POS(ev.start_mark), safe);
        }
        yaml_event_delete(&ev);
    }
    yaml_parser_delete(&parser);
    return st;
}
