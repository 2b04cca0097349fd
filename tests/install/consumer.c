/* SPDX-License-Identifier: Apache-2.0 */
/* consumer.c — the smallest program built against an installed kiln (by
 * tests/install/test_install.sh, through find_package and pkg-config): it
 * must compile with nothing but <kiln.h>, link, and run without a driver.
 * Without one, kiln_context_create fails with a message and no crash. */
#include <kiln.h>
#include <stdio.h>
#include <string.h>

int main(void)
{
    printf("kiln %s\n", kiln_version());
    if (strcmp(kiln_version(), KILN_VERSION_STRING) != 0) {
        fprintf(stderr, "consumer: header says %s, library says %s\n", KILN_VERSION_STRING,
                kiln_version());
        return 1;
    }
    kiln_context *ctx = NULL;
    kiln_status st = kiln_context_create(NULL, &ctx);
    if (st == KILN_OK) {
        printf("context created (a driver and a GPU are present)\n");
    } else {
        const char *msg = kiln_last_error(ctx);
        printf("kiln_context_create: %s: %s\n", kiln_status_name(st), msg);
        if (msg == NULL || msg[0] == '\0') {
            fprintf(stderr, "consumer: the failure came without a message\n");
            return 1;
        }
    }
    kiln_context_destroy(ctx);
    return 0;
}
