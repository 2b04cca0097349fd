/* SPDX-License-Identifier: Apache-2.0 */
/* fuzz_expand.c — spec to template expansion with the embedded templates.
 * Invariants: template errors are one line naming a template and the spec;
 * a success gives a source that holds the launch entry, and a description
 * with launch that round-trips. */
#include <stdint.h>

#include "expand.h"
#include "fuzz_util.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static kiln_expander *ex;
    kiln_error err;
    if (!ex) {
        if (kiln_expander_create(NULL, &ex, &err) != KILN_OK) FUZZ_FAIL("%s", err.msg);
        kiln_expander_set_budget(ex, 20000000);
    }
    kiln_spec_list list;
    if (kiln_spec_parse((const char *)data, size, "fuzz.yaml", &list, &err) != KILN_OK) {
        fuzz_check_error(&err, "fuzz.yaml:");
        return 0;
    }
    /* At most a few kernels per input: sweeps can make hundreds. */
    for (size_t i = 0; i < list.count && i < 4; i++) {
        const kiln_spec *s = &list.items[i];
        const char *arch = s->desc.n_archs ? s->desc.archs[0] : "sm_90a";
        char *src = NULL;
        kiln_launch_desc launch;
        if (kiln_expand(ex, s, arch, &src, &launch, &err) != KILN_OK) {
            fuzz_check_error(&err, "templates/");
            if (!strstr(err.msg, "(expanding fuzz.yaml:"))
                FUZZ_FAIL("template error without the spec position: %s", err.msg);
            continue;
        }
        if (!src || !*src || !strstr(src, launch.entry))
            FUZZ_FAIL("source without its entry '%s'", launch.entry);
        kiln_strbuf a, b;
        kiln_strbuf_init(&a);
        kiln_strbuf_init(&b);
        kiln_desc_format(&s->desc, &launch, &a);
        kiln_kernel_desc d2;
        kiln_launch_desc l2;
        if (!kiln_desc_parse(a.data, &d2, &l2, &err))
            FUZZ_FAIL("description with launch does not parse back: %s", err.msg);
        kiln_desc_format(&d2, &l2, &b);
        if (strcmp(a.data, b.data)) FUZZ_FAIL("description changes on a round trip: %s", a.data);
        kiln_strbuf_free(&a);
        kiln_strbuf_free(&b);
        free(src);
    }
    kiln_spec_list_free(&list);
    return 0;
}
