/* Devices: their set-up (one virtual reservation carved into the pools'
 * regions), their locks, finding the device that owns a pointer, and the
 * process state they belong to. */
#include "device.h"

#include <stdlib.h>
#include <string.h>

#include "arena.h"
#include "bins.h"
#include "fence.h"
#include "log.h"
#include "pages.h"
#include "ptrmap.h"
#include "segments.h"
#include "streams.h"

ca_state_t ca_state;

static pthread_mutex_t devices_lock = PTHREAD_MUTEX_INITIALIZER;

/* The cap on reserved memory: the device, memory_cap_mb, memory_fraction. */
static size_t device_limit(size_t total) {
  size_t limit = total;
  if (ca_config.memory_cap && ca_config.memory_cap < limit) limit = (size_t)ca_config.memory_cap;
  if (ca_config.memory_fraction > 0 && (size_t)(ca_config.memory_fraction * (double)total) < limit)
    limit = (size_t)(ca_config.memory_fraction * (double)total);
  return limit;
}

static size_t round_up(size_t x, size_t to) { return (x + to - 1) / to * to; }

/* One reservation for both regions. The large region gets several times
 * the device's memory so that free holes cost addresses, never memory;
 * the request shrinks if the driver refuses that much. */
static CUresult reserve_regions(ca_device_t *d) {
  size_t small = round_up(d->props.total_bytes, d->page);
  for (size_t mult = 4; mult >= 1; mult /= 2) {
    size_t large = small * mult;
    uintptr_t va;
    CUresult rc = CA_CALL(d, backend_reserve, ca_state.be->reserve(d->ordinal, small + large, &va));
    if (rc == CUDA_SUCCESS) {
      d->va_base = va;
      d->va_size = small + large;
      return CUDA_SUCCESS;
    }
    if (mult == 1) return rc;
  }
  return CUDA_ERROR_OUT_OF_MEMORY;
}

/* A device cudalloc cannot serve: from now on its allocations go to the
 * real allocator (ca_malloc returns CUDA_ERROR_NOT_SUPPORTED, which the
 * shim passes through), said once. */
static CUresult pass_through(ca_device_t *d, const char *why, CUresult rc) {
  if (d->arena) {   /* a sibling that cannot be set up: its ordinal's first arena serves instead (arena.c) */
    ca_log("device %d, arena %d: %s (error %d); its streams allocate from arena 0", d->ordinal, d->arena, why, rc);
    d->passthrough = true;
    return CUDA_ERROR_NOT_SUPPORTED;
  }
  ca_log("device %d (%s): %s (error %d); its allocations go to the CUDA allocator, uncached", d->ordinal,
         d->props.name, why, rc);
  d->passthrough = true;
  return CUDA_ERROR_NOT_SUPPORTED;
}

static CUresult setup_expandable(ca_device_t *d) {
  CUresult rc;
  size_t small = round_up(d->props.total_bytes, d->page);
  d->page_cache_cap = d->va_size / d->page;
  d->page_cache = calloc(d->page_cache_cap, sizeof *d->page_cache);
  if (!d->page_cache) return CUDA_ERROR_OUT_OF_MEMORY;
  for (int p = 0; p < CA_POOL_COUNT; p++) {
    ca_segment_t *seg = calloc(1, sizeof *seg);
    if (!seg) return CUDA_ERROR_OUT_OF_MEMORY;
    d->pools[p].segments = seg;
    bool first = p == CA_POOL_SMALL;
    uintptr_t base = first ? d->va_base : d->va_base + small;
    rc = ca_region_init(seg, &d->pools[p], base, first ? small : d->va_size - small);
    if (rc) return rc;
    ca_stat_add(&d->stats.num_segments, 1);
  }
  return CUDA_SUCCESS;
}

static CUresult device_setup(ca_device_t *d) {
  CUresult rc = ca_state.be->device_props(d->ordinal, &d->props);
  if (rc) return rc;
  d->page = d->props.granularity;
  d->limit = device_limit(d->props.total_bytes);
  d->peers |= __atomic_load_n(&ca_state.peers[d->ordinal], __ATOMIC_ACQUIRE);
  for (int p = 0; p < CA_POOL_COUNT; p++) {
    d->pools[p].dev = d;
    d->pools[p].id = (ca_pool_id_t)p;
    ca_bins_init(&d->pools[p].bins);
    ca_bins_init(&d->pools[p].holes);
  }
  /* Both modes map through the VMM API; the address space may be capped
   * (ulimit -v) below what expandable segments reserve. */
  if (!d->props.vmm)
    return pass_through(d, "no virtual memory management (CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED)",
                        CUDA_ERROR_NOT_SUPPORTED);
  if (ca_config.expandable_segments && (rc = reserve_regions(d)))
    return pass_through(d, "cannot reserve virtual addresses for its memory (is `ulimit -v` set?)", rc);
  rc = ca_config.expandable_segments ? setup_expandable(d) : CUDA_SUCCESS;
  if (rc) {
    ca_device_teardown(d, true);
    return rc;
  }
  __atomic_store_n(&d->ready, true, __ATOMIC_RELEASE);
  return CUDA_SUCCESS;
}

/* A device not made or not set up yet: out of line, so that the lookup of
 * a ready one (every allocation's) saves no registers. slot: which arena
 * of which ordinal (types.h). */
static __attribute__((noinline)) CUresult device_get_slow(int slot, ca_device_t **out) {
  ca_device_t *d = __atomic_load_n(&ca_state.devices[slot], __ATOMIC_ACQUIRE);
  if (!d) {
    pthread_mutex_lock(&devices_lock);
    d = ca_state.devices[slot];
    if (!d && (d = calloc(1, sizeof *d))) {
      ca_devlock_init(&d->lock);
      d->ordinal = slot % CA_MAX_DEVICES;
      d->arena = slot / CA_MAX_DEVICES;
      d->slot = slot;
      __atomic_store_n(&ca_state.devices[slot], d, __ATOMIC_RELEASE);
    }
    pthread_mutex_unlock(&devices_lock);
    if (!d) return CUDA_ERROR_OUT_OF_MEMORY;
  }
  CUresult rc = CUDA_SUCCESS;
  if (!__atomic_load_n(&d->ready, __ATOMIC_ACQUIRE)) {
    ca_devlock_take(&d->lock);
    /* Before it can allocate (arena.h); d's lock is let go meanwhile. */
    if (!d->passthrough && !d->ready && d->arena) ca_arena_keep_live(d);
    if (d->passthrough) rc = CUDA_ERROR_NOT_SUPPORTED;
    else if (!d->ready && !(rc = device_setup(d)) && d->arena) {
      /* Ready first: a stream destroyed from now on visits this arena too. */
      ca_stream_t nonblocking[CA_MAX_FENCE_EVENTS - 1];
      bool overflow;
      int n = ca_streams_copy_nonblocking(d->ordinal, nonblocking, &overflow);
      for (int i = 0; i < n; i++) ca_stream_register_on(d, nonblocking[i]);
      if (overflow) d->nonblocking_overflow = true;   /* streams it was not told of: fence by a device sync */
    }
    ca_devlock_release(&d->lock);
  }
  *out = d;
  return rc;
}

CUresult ca_device_get(int ordinal, ca_device_t **out) {
  if (ordinal < 0 || ordinal >= ca_state.ndevices) return CUDA_ERROR_INVALID_DEVICE;
  ca_device_t *d = __atomic_load_n(&ca_state.devices[ordinal], __ATOMIC_ACQUIRE);
  if (!d || !__atomic_load_n(&d->ready, __ATOMIC_ACQUIRE)) return device_get_slow(ordinal, out);
  *out = d;
  return CUDA_SUCCESS;
}

CUresult ca_device_get_arena(const ca_device_t *first, int arena, ca_device_t **out) {
  int slot = arena * CA_MAX_DEVICES + first->ordinal;
  ca_device_t *d = __atomic_load_n(&ca_state.devices[slot], __ATOMIC_ACQUIRE);
  if (!d || !__atomic_load_n(&d->ready, __ATOMIC_ACQUIRE)) return device_get_slow(slot, out);
  *out = d;
  return CUDA_SUCCESS;
}

CUresult ca_current_device(ca_device_t **out) {
  int ordinal;
  CUresult rc = ca_state.be->get_device(&ordinal);
  return rc ? rc : ca_device_get(ordinal, out);
}

static bool holds(ca_device_t *d, uintptr_t p) {
  if (!d->ready) return false;
  if (ca_config.expandable_segments) return p - d->va_base < d->va_size;
  return ca_segment_of(d, p) != NULL;
}

/* d, locked, if it holds p; else NULL, unlocked. The reservation never
 * moves while the device is ready, so the expandable range can be tested
 * before taking the lock (one compare: below the base wraps around past
 * the size). Inlined: every free's lookup (10 instructions a GPU-like pair). */
static inline __attribute__((always_inline)) ca_device_t *lock_if_holds(ca_device_t *d, uintptr_t p) {
  if (!d || !__atomic_load_n(&d->ready, __ATOMIC_ACQUIRE)) return NULL;
  if (ca_config.expandable_segments && p - d->va_base >= d->va_size) return NULL;
  ca_devlock_take(&d->lock);
  if (holds(d, p)) return d;
  ca_devlock_release(&d->lock);
  return NULL;
}

ca_device_t *ca_device_lock_owner(uintptr_t p) {
  int n = ca_state.ndevices;
  if (n == 1) {   /* one device: its first arena, which holds every block of a one-thread program, first */
    ca_device_t *d = lock_if_holds(__atomic_load_n(&ca_state.devices[0], __ATOMIC_ACQUIRE), p);
    for (int k = 1; !d && k < (int)ca_config.arenas; k++)
      d = lock_if_holds(ca_arena_at(0, k), p);
    return d;
  }
  for (int k = 0; k < (int)ca_config.arenas; k++)
    for (int i = 0; i < n; i++) {
      ca_device_t *d = lock_if_holds(__atomic_load_n(&ca_state.devices[k * CA_MAX_DEVICES + i], __ATOMIC_ACQUIRE), p);
      if (d) return d;
    }
  return NULL;
}

/* Ordinal by ordinal, each one's arenas in order: a caller that prints
 * per device prints an ordinal's arenas together. */
void ca_each_device(void (*fn)(ca_device_t *, void *), void *arg) {
  if (!ca_ready()) return;
  for (int i = 0; i < ca_state.ndevices; i++)
    for (int k = 0; k < (int)ca_config.arenas; k++) {
      ca_device_t *d = __atomic_load_n(&ca_state.devices[k * CA_MAX_DEVICES + i], __ATOMIC_ACQUIRE);
      if (!d) continue;
      ca_devlock_take(&d->lock);
      if (d->ready) fn(d, arg);
      ca_devlock_release(&d->lock);
    }
}

/* Forgets every block and segment of d; with call_backend, gives the
 * device memory back first. Statistics of live memory restart from zero. */
void ca_device_teardown(ca_device_t *d, bool call_backend) {
  __atomic_store_n(&d->ready, false, __ATOMIC_RELEASE);
  ca_fences_teardown(d, call_backend);
  for (int p = 0; p < CA_POOL_COUNT; p++) {
    ca_pool_t *pool = &d->pools[p];
    ca_segment_t *next;
    for (ca_segment_t *seg = pool->segments; seg; seg = next) {
      next = seg->next;
      if (seg->pages) ca_region_teardown(d, seg, call_backend);
      ca_segment_teardown(d, seg, call_backend);
    }
    pool->segments = NULL;
    ca_bins_init(&pool->bins);
    ca_bins_init(&pool->holes);
  }
  ca_classic_teardown_leftovers(d, call_backend);
  ca_pages_teardown(d, call_backend);
  if (call_backend && d->va_size &&
      CA_CALL_TRYING(d, backend_va_free, ca_state.be->va_free(d->va_base, d->va_size)))
    ca_log("device %d: the driver kept refusing to free the address reservation", d->ordinal);
  d->va_base = 0;
  d->va_size = 0;
  ca_ptrmap_free(&d->live);
  while (d->spare_blocks) {
    ca_block_t *b = d->spare_blocks;
    d->spare_blocks = b->next;
    free(b);
  }
  memset(&d->epoch, 0, sizeof d->epoch);
  memset(&d->held, 0, sizeof d->held);
  d->nnonblocking = 0;
  d->nonblocking_overflow = false;
  ca_arena_refund(d, (size_t)d->stats.reserved_bytes.current);   /* what the driver kept is written off here too */
  ca_arena_live(d, -d->stats.allocated_bytes.current, -d->stats.requested_bytes.current);
  cudalloc_stat_t *zero[] = {&d->stats.allocated_bytes, &d->stats.requested_bytes, &d->stats.reserved_bytes,
                             &d->stats.mapped_bytes, &d->stats.active_bytes, &d->stats.cached_bytes,
                             &d->stats.num_live_blocks, &d->stats.num_segments};
  for (size_t i = 0; i < sizeof zero / sizeof zero[0]; i++) zero[i]->current = 0;
}
