/* SPDX-License-Identifier: Apache-2.0 */
/* make_seeds.c — writes small binary seeds for the cache-entry and bundle
 * fuzzers into DIR/cache_entry and DIR/bundle (kiln's own writers, fake
 * cubin bytes, the shipped tuning table), so no binary file lives in the
 * tree and the seeds follow the formats as they change. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bundle.h"
#include "store.h"

static void entry(kiln_cache_entry *e, const char *desc, const char *cubin, const char *arch)
{
    memset(e, 0, sizeof *e);
    snprintf(e->arch, sizeof e->arch, "%s", arch);
    kiln_sha256_hex(cubin, strlen(cubin), e->source_sha256);
    kiln_cache_key(arch, desc, cubin, e->key);
    e->desc = (char *)desc;
    e->cubin = (void *)cubin;
    e->cubin_size = strlen(cubin);
    e->stats.registers = 128;
    e->stats.smem_static = 1024;
}

int main(int argc, char **argv)
{
    if (argc != 3) {
        fprintf(stderr, "usage: make_seeds DIR TABLE\n");
        return 2;
    }
    char path[4096];
    kiln_error err;
    kiln_error_clear(&err);
    const char *descs[] = {
        "name=k1 op=fprop a=bf16 b=bf16 out=bf16 accum=f32 tile=128x128x64 stages=4 "
        "entry=kiln_k1 threads=384 smem=1000 persistent=1 ctas_per_sm=1",
        "name=k2 op=wgrad a=fp16 b=fp16 out=f32 accum=f32 tile=64x64x32 stages=2",
    };
    const char *cubins[] = {"\x7f" "ELF fake cubin one", "\x7f" "ELF fake cubin two"};
    kiln_bundle_writer *w = NULL;
    if (kiln_bundle_writer_create(&w, &err) != KILN_OK) goto fail;
    for (int i = 0; i < 2; i++) {
        kiln_cache_entry e;
        entry(&e, descs[i], cubins[i], i ? "sm_80" : "sm_90a");
        kiln_strbuf sb;
        kiln_strbuf_init(&sb);
        if (kiln_cache_entry_encode(&e, &sb) != KILN_OK) goto fail;
        snprintf(path, sizeof path, "%s/cache_entry/seed%d.kbin", argv[1], i);
        if (kiln_file_write_atomic(path, sb.data, sb.len, &err) != KILN_OK) goto fail;
        kiln_strbuf_free(&sb);
        char id[65];
        kiln_kernel_id(e.arch, e.desc, e.source_sha256, id);
        if (kiln_bundle_writer_add(w, id, i ? "k2" : "k1", &e, &err) != KILN_OK) goto fail;
    }
    char *table = NULL;
    size_t len = 0;
    if (kiln_file_read(argv[2], &table, &len, &err) != KILN_OK) goto fail;
    if (kiln_bundle_writer_set_table(w, table, len, &err) != KILN_OK) goto fail;
    free(table);
    snprintf(path, sizeof path, "%s/bundle/seed.kbundle", argv[1]);
    if (kiln_bundle_writer_write(w, path, &err) != KILN_OK) goto fail;
    kiln_bundle_writer_destroy(w);
    return 0;
fail:
    fprintf(stderr, "make_seeds: %s\n", err.msg);
    return 1;
}
