/* SPDX-License-Identifier: Apache-2.0 */
/* dispatch_memo.c — remembered dispatch decisions (dispatch_memo.h). */
#include <stdlib.h>
#include <string.h>

#include "dispatch_memo.h"
#include "hash64.h"

typedef struct memo_entry {
    uint64_t last_use;                /* the memo's clock at the last hit; 0: empty */
    kiln_dispatch_memo_key key;
    kiln_dispatch_choice choice;
    struct kiln_rt_kernel *kernel;
} memo_entry;

struct kiln_dispatch_memo {
    uint64_t clock;
    uint64_t hits, misses;
    memo_entry e[KILN_DISPATCH_MEMO_SIZE];
};

/* Given or not: what dispatch reads of a pointer. */
#define GIVEN(ptr) ((ptr) = (ptr) ? (void *)1 : NULL)

void kiln_dispatch_memo_key_of(const kiln_problem *p, kiln_dispatch_memo_key *key)
{
    /* A byte copy, padding included: a caller whose padding changes between
     * calls only misses, it never hits wrongly.  A pointer member added to
     * kiln_problem and not listed here keeps its value in the key: again
     * only misses. */
    memcpy(&key->p, p, sizeof *p);
    kiln_problem *q = &key->p;
    GIVEN(q->d_sizes);
    GIVEN(q->host_sizes);
    GIVEN(q->d_a);
    GIVEN(q->d_b);
    GIVEN(q->d_b_ptrs);
    GIVEN(q->d_out);
    GIVEN(q->d_out_ptrs);
    GIVEN(q->d_dbias);
    GIVEN(q->d_dbias_ptrs);
    GIVEN(q->d_overflow);
    GIVEN(q->epilogue.d_bias);
    GIVEN(q->epilogue.d_row_scale);
    GIVEN(q->epilogue.d_alpha);
    GIVEN(q->epilogue.d_c);
    GIVEN(q->fp8.d_scale_a);
    GIVEN(q->fp8.d_scale_b);
    GIVEN(q->fp8.d_bt);
    uint64_t h = kiln_hash64(q, sizeof *q);
    key->hash = h;
}

kiln_dispatch_memo *kiln_dispatch_memo_create(void) { return calloc(1, sizeof(kiln_dispatch_memo)); }

void kiln_dispatch_memo_destroy(kiln_dispatch_memo *m) { free(m); }

static memo_entry *find(kiln_dispatch_memo *m, const kiln_dispatch_memo_key *key)
{
    for (int i = 0; i < KILN_DISPATCH_MEMO_SIZE; i++) {
        memo_entry *e = &m->e[i];
        if (e->last_use && e->key.hash == key->hash && !memcmp(&e->key.p, &key->p, sizeof key->p))
            return e;
    }
    return NULL;
}

int kiln_dispatch_memo_get(kiln_dispatch_memo *m, const kiln_dispatch_memo_key *key,
                           kiln_dispatch_choice *c, struct kiln_rt_kernel **kernel)
{
    if (!m) return 0;
    memo_entry *e = find(m, key);
    if (!e) {
        m->misses++;
        return 0;
    }
    e->last_use = ++m->clock;
    m->hits++;
    *c = e->choice;
    *kernel = e->kernel;
    return 1;
}

void kiln_dispatch_memo_put(kiln_dispatch_memo *m, const kiln_dispatch_memo_key *key,
                            const kiln_dispatch_choice *c, struct kiln_rt_kernel *kernel)
{
    if (!m) return;
    memo_entry *e = find(m, key);
    if (!e) {
        e = &m->e[0];
        for (int i = 1; i < KILN_DISPATCH_MEMO_SIZE; i++)
            if (m->e[i].last_use < e->last_use) e = &m->e[i]; /* empty ones (0) first */
    }
    e->last_use = ++m->clock;
    e->key = *key;
    e->choice = *c;
    e->kernel = kernel;
}

void kiln_dispatch_memo_counts(const kiln_dispatch_memo *m, uint64_t *hits, uint64_t *misses)
{
    *hits = m ? m->hits : 0;
    *misses = m ? m->misses : 0;
}
