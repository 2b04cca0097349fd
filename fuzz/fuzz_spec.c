/* SPDX-License-Identifier: Apache-2.0 */
/* fuzz_spec.c — spec parsing and validation.  Invariants beyond crashes:
 * a refusal is one line naming the file; every accepted kernel validates
 * again for each of its archs, and its description round-trips through
 * kiln_desc_format / kiln_desc_parse. */
#include <stdint.h>

#include "fuzz_util.h"
#include "spec.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    kiln_spec_list list;
    kiln_error err;
    kiln_error_clear(&err);
    if (kiln_spec_parse((const char *)data, size, "fuzz.yaml", &list, &err) != KILN_OK) {
        fuzz_check_error(&err, "fuzz.yaml:");
        if (list.count) FUZZ_FAIL("a refused spec left %zu kernels", list.count);
        return 0;
    }
    if (list.count == 0 && list.dropped == 0) FUZZ_FAIL("accepted spec with no kernels");
    for (size_t i = 0; i < list.count; i++) {
        const kiln_kernel_desc *d = &list.items[i].desc;
        for (int a = 0; a < d->n_archs; a++) {
            kiln_error e2;
            if (kiln_spec_validate(d, d->archs[a], &e2, NULL) != KILN_OK)
                FUZZ_FAIL("accepted kernel %s does not validate for %s: %s", d->name,
                          d->archs[a], e2.msg);
        }
        kiln_strbuf a, b;
        kiln_strbuf_init(&a);
        kiln_strbuf_init(&b);
        kiln_desc_format(d, NULL, &a);
        kiln_kernel_desc back;
        kiln_error e3;
        if (!kiln_desc_parse(a.data, &back, NULL, &e3))
            FUZZ_FAIL("description does not parse back: %s (%s)", e3.msg, a.data);
        kiln_desc_format(&back, NULL, &b);
        if (strcmp(a.data, b.data)) FUZZ_FAIL("description changes on a round trip: %s", a.data);
        kiln_strbuf_free(&a);
        kiln_strbuf_free(&b);
    }
    kiln_spec_list_free(&list);
    return 0;
}
