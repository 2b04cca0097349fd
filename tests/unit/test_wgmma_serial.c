/* SPDX-License-Identifier: Apache-2.0 */
/* test_wgmma_serial.c — no shipped sm90 kernel makes ptxas serialise its
 * wgmma.  ptxas reports it with a C75xx advisory (C7519: a warpgroup.arrive
 * injected, C7520: wgmma serialised, ...): the code still runs, only
 * slower, so nothing else would catch it.  One such case cost every wgrad
 * kernel 4-9% (the commit placed after the branches of a k-block's
 * sequences; docs/sm90_wgrad.md).  Every sm_90a kernel of specs/default is
 * expanded and its ptxas output checked, none may have a C75xx remark: the
 * remark kept in the build's pack cache where it holds the kernel, else
 * the log of compiling it here with NVRTC.  And every kernel the bundle's
 * build compiled (every shipped spec, sweeps included, so every kernel the
 * tuning table names) is checked in that build's kernel cache, whose
 * entries keep ptxas's wgmma-serialization remark (store/nvrtc.c): none may
 * carry one.  No GPU needed. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "testutil.h"
#include "shipped_specs.h"
#include "cache.h"
#include "nvrtc.h"

/* The C75xx remark of kernel j: from the build's pack cache where it holds
 * the kernel (the bundle's build compiled it with these templates; the
 * entry keeps the remark, store/nvrtc.c), else from compiling it here.
 * Compiling all of them again took this test 3 of CI's minutes, 5 under
 * the sanitizers.  0: none; *from_cache counts the lookups that hit. */
static int serialised_remark(kiln_expander *ex, const kiln_job *j, kiln_cache *pack,
                             int *from_cache, char *line, size_t size)
{
    kiln_error err;
    kiln_error_clear(&err);
    char *src = NULL;
    kiln_launch_desc launch;
    if (kiln_expand(ex, j->spec, j->arch, &src, &launch, &err) != KILN_OK) fail_msg("%s", err.msg);
    int remark = 0;
    kiln_cache_entry e;
    int damaged = 0;
    char key[65];
    kiln_strbuf desc;
    kiln_strbuf_init(&desc);
    kiln_desc_format(&j->spec->desc, &launch, &desc);
    assert_false(desc.oom);
    kiln_cache_key(j->arch, desc.data, src, key);
    kiln_strbuf_free(&desc);
    if (pack && kiln_cache_get(pack, key, &e, &damaged)) {
        remark = e.stats.wgmma_serialized;
        if (remark) snprintf(line, size, "C%d (from the pack cache)", remark);
        kiln_cache_entry_free(&e);
        (*from_cache)++;
    } else {
        kiln_compile_result r;
        if (kiln_nvrtc_compile(src, j->spec->desc.name, j->arch, NULL, &r, &err) != KILN_OK)
            fail_msg("%s: %s", j->spec->desc.name, err.msg);
        const char *adv = r.log ? strstr(r.log, "(C75") : NULL;
        if (adv) {
            const char *eol = strchr(adv, '\n');
            remark = 1;
            snprintf(line, size, "%.*s", (int)(eol ? eol - adv : (long)strlen(adv)), adv);
        }
        kiln_compile_result_free(&r);
    }
    free(src);
    return remark;
}

static void test_no_serialised_wgmma(void **state)
{
    (void)state;
    kiln_spec_set set;
    kiln_expander *ex = kts_load_shipped("specs/default", &set);
    kiln_error err;
    kiln_error_clear(&err);
    char dir[4200];
    kiln_cache *pack = NULL;
    if (kiln_test_pack_cache(dir, sizeof dir) && kiln_cache_open(dir, &pack, &err) != KILN_OK)
        fail_msg("%s: %s", dir, err.msg);
    int checked = 0, from_cache = 0;
    for (size_t i = 0; i < set.n_jobs; i++) {
        const kiln_job *j = &set.jobs[i];
        if (strcmp(j->spec->desc.family, "sm90") != 0) continue;
        char line[512];
        if (serialised_remark(ex, j, pack, &from_cache, line, sizeof line))
            fail_msg("%s: ptxas serialises its wgmma: %s", j->spec->desc.name, line);
        checked++;
    }
    printf("%d sm90 kernels (%d from the pack cache), no C75xx advisory\n", checked, from_cache);
    assert_true(checked >= 20);
    if (pack) kiln_cache_close(pack);
    kiln_expander_destroy(ex);
    kiln_spec_set_free(&set);
}

typedef struct pack_scan {
    int entries, damaged;
    char bad[512];
} pack_scan;

static void pack_visit(void *user, const char *key, const kiln_cache_entry *e, int ok,
                       const char *problem)
{
    (void)key;
    (void)problem;
    pack_scan *p = user;
    if (!ok) {
        p->damaged++;
        return;
    }
    p->entries++;
    if (e->stats.wgmma_serialized && !p->bad[0]) {
        const char *name = e->desc ? strstr(e->desc, "name=") : NULL;
        snprintf(p->bad, sizeof p->bad, "%.*s (%s): C%d", name ? (int)strcspn(name + 5, " ") : 1,
                 name ? name + 5 : "?", e->arch, e->stats.wgmma_serialized);
    }
}

/* The build's pack cache (KILN_TEST_PACK_CACHE: the sanitizers' run, whose
 * own build packs nothing).  Entries written before the remark was kept
 * read 0; a kernel whose source changes since is compiled again, and so
 * checked; CI builds from a clean clone, where every entry is new. */
static void test_pack_cache_not_serialised(void **state)
{
    (void)state;
    char dir[4200];
    if (!kiln_test_pack_cache(dir, sizeof dir)) {
        printf("no pack cache: the bundle was not built here\n");
        skip();
    }
    kiln_cache *c = NULL;
    kiln_error err;
    kiln_error_clear(&err);
    if (kiln_cache_open(dir, &c, &err) != KILN_OK) fail_msg("%s: %s", dir, err.msg);
    pack_scan p = {0};
    if (kiln_cache_foreach(c, pack_visit, &p, &err) != KILN_OK) fail_msg("%s: %s", dir, err.msg);
    kiln_cache_close(c);
    if (p.bad[0]) fail_msg("ptxas serialized the wgmma of a shipped kernel: %s", p.bad);
    printf("%d kernels in %s, none with a wgmma-serialization remark\n", p.entries, dir);
    assert_true(p.entries >= 100);
}

int main(void)
{
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_no_serialised_wgmma),
                                       cmocka_unit_test(test_pack_cache_not_serialised)};
    kiln_test_filter();
    return cmocka_run_group_tests(tests, NULL, NULL);
}
