/* SPDX-License-Identifier: Apache-2.0 */
/* sched_slots.c — slots of work-order counters, per stream and per captured launch. */
#include "sched_slots.h"

int kiln_sched_slot(kiln_sched *s, uintptr_t stream, int capturing)
{
    if (capturing) {
        if (s->next_captured == 0) s->next_captured = KILN_SCHED_STREAMS + 1;
        return s->next_captured <= KILN_SCHED_SLOTS ? s->next_captured++ : 0;
    }
    for (int i = 0; i < s->n_streams; ++i)
        if (s->stream[i] == stream) return i + 1;
    if (s->n_streams == KILN_SCHED_STREAMS) return 0;
    s->stream[s->n_streams] = stream;
    return ++s->n_streams;
}
