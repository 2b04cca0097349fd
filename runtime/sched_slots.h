/* SPDX-License-Identifier: Apache-2.0 */
/*
 * sched_slots.h — which slot of work-order counters a launch uses.
 *
 * Some sm90 wgrad kernels hand out their work items from a pair of device
 * counters (templates/sm90_wgrad.cuh, DYN): an array of KILN_SCHED_SLOTS
 * pairs in the kernel's module, zero at load, which each launch's last CTA
 * sets back to zero.  Two launches of one kernel that run at once must not
 * share a pair.  Launches on one stream never run at once (a kernel reads
 * the counters only after griddepcontrol.wait), so each stream keeps one
 * slot; a launch captured in a CUDA graph may later run beside anything, so
 * it gets a slot of its own, never handed out again.  The per-thread
 * default stream is a stream per thread: context.c keys it by thread.
 * When the slots run out a launch gets 0: the kernel then takes its static
 * order, which is always correct.  Nothing here touches the device: the
 * context asks the driver whether the stream is capturing and keeps the
 * table under its lock.
 */
#ifndef KILN_SCHED_SLOTS_H
#define KILN_SCHED_SLOTS_H

#include <stdint.h>

#include "kernel_abi.h"

/* Slots 1..KILN_SCHED_STREAMS go to streams, the rest to captured launches. */
#define KILN_SCHED_STREAMS 64

typedef struct kiln_sched {
    uintptr_t stream[KILN_SCHED_STREAMS];  /* the stream of slot i + 1 */
    int n_streams;
    int next_captured;                     /* the next captured slot (0: none yet) */
} kiln_sched;

/* The slot (1..KILN_SCHED_SLOTS) of a launch on `stream`, capturing or not;
 * 0 when none is left.  s zero-initialised is an empty table. */
int kiln_sched_slot(kiln_sched *s, uintptr_t stream, int capturing);

#endif /* KILN_SCHED_SLOTS_H */
