/* "calm.c": one word that is zero while nothing unusual is going on, so
 * that an allocation or a free served by the thread's front cache tests
 * one load where it tested six (the start, the exit, legacyq's mode, a
 * report asked by signal, a capture underway and the event log recording:
 * the front cache's inline tries rely on calm for the last two). Each bit
 * is set before its state becomes unusual (or with it) and cleared only
 * once it is usual again: calm means all six are usual; stirred means look
 * at each. */
#ifndef CUDALLOC_CALM_H
#define CUDALLOC_CALM_H

#include <stdbool.h>
#include <stdint.h>

#include "line.h"

enum {
  CA_STIR_START = 1u << 0,     /* not started, or shutting down: ca_ready() may be false */
  CA_STIR_EXIT = 1u << 1,      /* the process is exiting: ca_state.exited may be true */
  CA_STIR_LEGACYQ = 1u << 2,   /* legacyq's mode is not over (legacyq.c: this bit is its state) */
  CA_STIR_DEMAND = 1u << 3,    /* a signal asked for the reports (demand.c: this bit is the request) */
  CA_STIR_CAPTURE = 1u << 4,   /* a graph capture may be underway (lifecycle.c: ca_state.captures) */
  CA_STIR_TRACE = 1u << 5,     /* the event log may be recording (trace.c: ca_trace_recording) */
};

extern ca_alone_u32_t ca_stirred;   /* .v atomic */

static inline uint32_t ca_stirs(void) { return __atomic_load_n(&ca_stirred.v, __ATOMIC_ACQUIRE); }
static inline bool ca_calm(void) { return !ca_stirs(); }
static inline bool ca_stirred_by(uint32_t why) { return ca_stirs() & why; }
/* A lock-free read-modify-write each: async-signal-safe (the report signal's handler sets its bit). */
static inline uint32_t ca_stir(uint32_t why) { return __atomic_fetch_or(&ca_stirred.v, why, __ATOMIC_ACQ_REL); }
static inline uint32_t ca_unstir(uint32_t why) { return __atomic_fetch_and(&ca_stirred.v, ~why, __ATOMIC_ACQ_REL); }
/* The leave of a state that several threads may enter and leave at once (a
 * count, a flag), whose entries stir its bit after the state changed: the
 * bit cleared, then set again if the state is unusual again (the clear is
 * a read-modify-write before the read: an entry whose stir it undid has
 * changed the state where the read sees it). */
static inline void ca_unstir_unless(uint32_t why, bool still_unusual(void)) {
  ca_unstir(why);
  if (still_unusual()) ca_stir(why);
}

#endif /* CUDALLOC_CALM_H */
