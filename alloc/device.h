/* "device.c": the process's devices, their locks, and whether the core
 * has started. */
#ifndef CUDALLOC_DEVICE_H
#define CUDALLOC_DEVICE_H

#include "types.h"

/* true once ca_init has succeeded (and until shutdown). */
static inline bool ca_ready(void) { return __atomic_load_n(&ca_state.init, __ATOMIC_ACQUIRE) == CA_INIT_OK; }
/* The device structure of ordinal, set up on first use; NULL on error.
 * CUDA_ERROR_NOT_SUPPORTED: cudalloc does not serve this device (it lacks
 * virtual memory management, or its address reservation failed), for the
 * rest of the process; *out is still set. */
CUresult ca_device_get(int ordinal, ca_device_t **out);
/* Arena `arena` of first's ordinal (first: its arena 0), set up on first
 * use; the errors of ca_device_get. */
CUresult ca_device_get_arena(const ca_device_t *first, int arena, ca_device_t **out);
/* The device whose memory contains ptr, locked; NULL when none. */
ca_device_t *ca_device_lock_owner(uintptr_t ptr);
void ca_device_teardown(ca_device_t *d, bool call_backend);
CUresult ca_current_device(ca_device_t **out);
/* Calls fn on every device (every arena of each) that has been set up, with its lock held. */
void ca_each_device(void (*fn)(ca_device_t *, void *), void *arg);

#endif /* CUDALLOC_DEVICE_H */
