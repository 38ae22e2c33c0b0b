/* "calm.c": one word that is zero while nothing unusual is going on, so
 * that an allocation or a free served by the thread's front cache tests
 * one load where it tested four (the start, the exit, legacyq's mode and a
 * report asked by signal). Each bit is set before its state becomes
 * unusual (or with it) and cleared only once it is usual again: calm
 * means all four are usual; stirred means look at each. */
#ifndef CUDALLOC_CALM_H
#define CUDALLOC_CALM_H

#include <stdbool.h>
#include <stdint.h>

enum {
  CA_STIR_START = 1u << 0,     /* not started, or shutting down: ca_ready() may be false */
  CA_STIR_EXIT = 1u << 1,      /* the process is exiting: ca_state.exited may be true */
  CA_STIR_LEGACYQ = 1u << 2,   /* legacyq's mode is not over (legacyq.c: this bit is its state) */
  CA_STIR_DEMAND = 1u << 3,    /* a signal asked for the reports (demand.c: this bit is the request) */
};

extern uint32_t ca_stirred;   /* atomic */

static inline uint32_t ca_stirs(void) { return __atomic_load_n(&ca_stirred, __ATOMIC_ACQUIRE); }
static inline bool ca_calm(void) { return !ca_stirs(); }
static inline bool ca_stirred_by(uint32_t why) { return ca_stirs() & why; }
/* A lock-free read-modify-write each: async-signal-safe (the report signal's handler sets its bit). */
static inline uint32_t ca_stir(uint32_t why) { return __atomic_fetch_or(&ca_stirred, why, __ATOMIC_ACQ_REL); }
static inline uint32_t ca_unstir(uint32_t why) { return __atomic_fetch_and(&ca_stirred, ~why, __ATOMIC_ACQ_REL); }

#endif /* CUDALLOC_CALM_H */
