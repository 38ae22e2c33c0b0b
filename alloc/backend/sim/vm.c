/* The simulated device's virtual memory, on host mappings:
 * - a reservation is a PROT_NONE anonymous mapping (the placeholder);
 * - a physical handle is a set of page extents of the device's memfd, so
 *   capacity, not the memfd's fragmentation, decides when memory runs out;
 * - map replaces part of a placeholder with MAP_SHARED mappings of those
 *   pages, still PROT_NONE: nothing is accessible before set_access, as on
 *   a GPU; unmap puts the placeholder back, so a later touch faults;
 * - release punches the pages out of the memfd, giving the memory back.
 * Every rule of backend.h is checked before anything changes. */
#define _GNU_SOURCE
#include "sim_internal.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "log.h"

#define SIM_PROT_RW (PROT_READ | PROT_WRITE)
#define PLACEHOLDER_FLAGS (MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE)

static size_t gran(void) { return ca_sim.dev[0].gran; }

static bool aligned(uintptr_t x) { return x % gran() == 0; }

/* size is non-zero and aligned, va aligned, and the range does not wrap. */
static bool range_ok(uintptr_t va, size_t size) {
  return size && aligned(size) && aligned(va) && size <= UINTPTR_MAX - va;
}

/* Puts the PROT_NONE placeholder back over [va, va+size). */
static bool placeholder(uintptr_t va, size_t size) {
  return mmap((void *)va, size, PROT_NONE, PLACEHOLDER_FLAGS | MAP_FIXED, -1, 0) != MAP_FAILED;
}

// ----------------------------------------------------------------------------
// Devices: the memfd and its page bitmap
// ----------------------------------------------------------------------------

CUresult ca_sim_device_open_locked(sim_device_t *d, int ordinal, size_t capacity, size_t g) {
  char name[32];
  snprintf(name, sizeof name, "cudalloc-sim%d", ordinal);
  memset(d, 0, sizeof *d);
  d->memfd = memfd_create(name, MFD_CLOEXEC);
  if (d->memfd < 0) {
    ca_log("simulated device %d: no memfd (%s)", ordinal, strerror(errno));
    return CUDA_ERROR_NOT_INITIALIZED;
  }
  d->capacity = capacity;
  d->gran = g;
  d->npages = capacity / g;
  d->page_bits = calloc((d->npages + 63) / 64, sizeof *d->page_bits);
  /* sparse: ftruncate reserves nothing */
  if (!d->page_bits || ftruncate(d->memfd, (off_t)capacity) != 0) {
    ca_log("simulated device %d: cannot size its memory to %zu bytes", ordinal, capacity);
    free(d->page_bits);
    close(d->memfd);
    memset(d, 0, sizeof *d);
    d->memfd = -1;
    return CUDA_ERROR_NOT_INITIALIZED;
  }
  d->legacy.dev = ordinal;
  d->legacy.kind = SIM_STREAM_LEGACY;
  return CUDA_SUCCESS;
}

static bool page_used(const sim_device_t *d, size_t p) {
  return d->page_bits[p / 64] >> (p % 64) & 1;
}

static void pages_mark(sim_device_t *d, const sim_extent_t *e, bool used) {
  for (size_t p = e->off / d->gran; p < (e->off + e->len) / d->gran; p++) {
    if (used) d->page_bits[p / 64] |= 1ull << (p % 64);
    else d->page_bits[p / 64] &= ~(1ull << (p % 64));
  }
}

static bool extent_push(sim_handle_t *h, size_t off, size_t len) {
  if ((h->nextents & (h->nextents - 1)) == 0) { /* 0, 1, 2, 4...: grow */
    size_t cap = h->nextents ? (size_t)h->nextents * 2 : 1;
    sim_extent_t *v = realloc(h->extents, cap * sizeof *v);
    if (!v) return false;
    h->extents = v;
  }
  h->extents[h->nextents++] = (sim_extent_t){off, len};
  return true;
}

/* Gives h npages free pages of d, first fit, in as few extents as that takes. */
static bool pages_take(sim_device_t *d, sim_handle_t *h, size_t npages) {
  size_t p = 0, need = npages;
  while (need) {
    while (p < d->npages && page_used(d, p))
      p += (p % 64 == 0 && d->page_bits[p / 64] == ~0ull) ? 64 : 1;
    size_t start = p;
    while (p < d->npages && !page_used(d, p) && p - start < need) p++;
    if (p == start || !extent_push(h, start * d->gran, (p - start) * d->gran)) return false;
    need -= p - start;
  }
  for (unsigned i = 0; i < h->nextents; i++) pages_mark(d, &h->extents[i], true);
  return true;
}

// ----------------------------------------------------------------------------
// Reservations (an array sorted by address)
// ----------------------------------------------------------------------------

/* Index of the first reservation that starts at or above va. */
static size_t resv_lower(uintptr_t va) {
  size_t lo = 0, hi = ca_sim.nresv;
  while (lo < hi) {
    size_t mid = (lo + hi) / 2;
    if (ca_sim.resv[mid].va < va) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}

/* The reservation that holds all of [va, va+size), or NULL. */
static sim_resv_t *resv_holding(uintptr_t va, size_t size) {
  size_t i = resv_lower(va + 1);
  if (i == 0) return NULL;
  sim_resv_t *r = &ca_sim.resv[i - 1];
  return va >= r->va && va - r->va + size <= r->size ? r : NULL;
}

static bool resv_insert(uintptr_t va, size_t size, int dev) {
  if (ca_sim.nresv == ca_sim.resv_cap) {
    size_t cap = ca_sim.resv_cap ? ca_sim.resv_cap * 2 : 8;
    sim_resv_t *v = realloc(ca_sim.resv, cap * sizeof *v);
    if (!v) return false;
    ca_sim.resv = v;
    ca_sim.resv_cap = cap;
  }
  size_t i = resv_lower(va);
  memmove(&ca_sim.resv[i + 1], &ca_sim.resv[i], (ca_sim.nresv - i) * sizeof *ca_sim.resv);
  ca_sim.resv[i] = (sim_resv_t){.va = va, .size = size, .dev = dev};
  ca_sim.nresv++;
  return true;
}

CUresult ca_sim_reserve_locked(int dev, size_t size, uintptr_t *va) {
  if (!ca_sim_valid_device(dev)) return ca_sim_violation(CUDA_ERROR_INVALID_DEVICE);
  size_t g = gran();
  if (!size || !aligned(size)) return ca_sim_violation(CUDA_ERROR_INVALID_VALUE);
  if (size > SIZE_MAX - g) return CUDA_ERROR_OUT_OF_MEMORY;
  /* over-reserve by one page, then trim to an aligned range */
  char *p = mmap(NULL, size + g, PROT_NONE, PLACEHOLDER_FLAGS, -1, 0);
  if (p == MAP_FAILED) return CUDA_ERROR_OUT_OF_MEMORY;
  uintptr_t a = ((uintptr_t)p + g - 1) / g * g;
  if (a > (uintptr_t)p) munmap(p, a - (uintptr_t)p);
  if ((uintptr_t)p + g > a) munmap((void *)(a + size), (uintptr_t)p + g - a);
  if (!resv_insert(a, size, dev)) {
    munmap((void *)a, size);
    return CUDA_ERROR_OUT_OF_MEMORY;
  }
  *va = a;
  return CUDA_SUCCESS;
}

CUresult ca_sim_va_free_locked(uintptr_t va, size_t size) {
  size_t i = resv_lower(va);
  if (i == ca_sim.nresv || ca_sim.resv[i].va != va || ca_sim.resv[i].size != size ||
      ca_sim.resv[i].nmaps)
    return ca_sim_violation(CUDA_ERROR_INVALID_VALUE);
  munmap((void *)va, size);
  free(ca_sim.resv[i].maps);
  memmove(&ca_sim.resv[i], &ca_sim.resv[i + 1], (ca_sim.nresv - i - 1) * sizeof *ca_sim.resv);
  ca_sim.nresv--;
  return CUDA_SUCCESS;
}

// ----------------------------------------------------------------------------
// Physical handles
// ----------------------------------------------------------------------------

static void handle_free(void *obj) {
  sim_handle_t *h = obj;
  free(h->extents);
  free(h);
}

CUresult ca_sim_create_locked(int dev, size_t size, ca_phys_t *handle) {
  if (!ca_sim_valid_device(dev)) return ca_sim_violation(CUDA_ERROR_INVALID_DEVICE);
  sim_device_t *d = &ca_sim.dev[dev];
  if (!size || !aligned(size)) return ca_sim_violation(CUDA_ERROR_INVALID_VALUE);
  if (size > d->capacity - d->held_by_others - d->used) return CUDA_ERROR_OUT_OF_MEMORY;
  sim_handle_t *h = calloc(1, sizeof *h);
  if (!h) return CUDA_ERROR_OUT_OF_MEMORY;
  h->dev = dev;
  h->size = size;
  bool took = pages_take(d, h, size / d->gran);
  uint64_t id = took ? ca_sim_slot_put(&ca_sim.handles, h) : 0;
  if (!id) {
    for (unsigned i = 0; took && i < h->nextents; i++) pages_mark(d, &h->extents[i], false);
    handle_free(h);
    return CUDA_ERROR_OUT_OF_MEMORY;
  }
  d->used += size;
  d->live_handles++;
  h->id = id;
  *handle = id;
  return CUDA_SUCCESS;
}

CUresult ca_sim_release_locked(ca_phys_t handle) {
  sim_handle_t *h = ca_sim_slot_get(&ca_sim.handles, handle);
  if (!h) return ca_sim_violation(CUDA_ERROR_INVALID_VALUE);
  if (h->maps) return ca_sim_violation(CUDA_ERROR_ILLEGAL_STATE);
  ca_sim_oracle_release_locked(handle);
  sim_device_t *d = &ca_sim.dev[h->dev];
  for (unsigned i = 0; i < h->nextents; i++) {
    const sim_extent_t *e = &h->extents[i];
    if (fallocate(d->memfd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, (off_t)e->off,
                  (off_t)e->len) != 0)
      ca_log_once("simulated device: cannot punch released pages out (%s)", strerror(errno));
    pages_mark(d, e, false);
  }
  d->used -= h->size;
  d->live_handles--;
  ca_sim_slot_drop(&ca_sim.handles, handle);
  handle_free(h);
  return CUDA_SUCCESS;
}

// ----------------------------------------------------------------------------
// Mappings (per reservation, an array sorted by address)
// ----------------------------------------------------------------------------

/* Index of the first mapping of r that starts at or above va. */
static size_t maps_lower(const sim_resv_t *r, uintptr_t va) {
  size_t lo = 0, hi = r->nmaps;
  while (lo < hi) {
    size_t mid = (lo + hi) / 2;
    if (r->maps[mid].va < va) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}

/* true when [va, va+size) is exactly mappings [*first, *end) of r, adjacent
 * with no gap (whole mappings only). */
static bool whole_maps(const sim_resv_t *r, uintptr_t va, size_t size, size_t *first,
                       size_t *end) {
  size_t i = maps_lower(r, va), j = i;
  uintptr_t cursor = va;
  while (j < r->nmaps && r->maps[j].va == cursor && cursor - va < size)
    cursor += r->maps[j++].size;
  *first = i;
  *end = j;
  return j > i && cursor - va == size;
}

/* The mappings of handle h cover [offset, offset+size) of it in extent order. */
static bool map_extents(uintptr_t va, size_t size, const sim_handle_t *h, size_t offset) {
  int fd = ca_sim.dev[h->dev].memfd;
  size_t hpos = 0, done = 0;
  for (unsigned i = 0; i < h->nextents && done < size; hpos += h->extents[i++].len) {
    const sim_extent_t *e = &h->extents[i];
    if (hpos + e->len <= offset) continue;
    size_t skip = offset + done - hpos;
    size_t len = e->len - skip < size - done ? e->len - skip : size - done;
    if (mmap((void *)(va + done), len, PROT_NONE, MAP_SHARED | MAP_FIXED, fd,
             (off_t)(e->off + skip)) == MAP_FAILED)
      return false;
    done += len;
  }
  return done == size;
}

static bool maps_reserve_one(sim_resv_t *r) {
  if (r->nmaps < r->cap) return true;
  size_t cap = r->cap ? r->cap * 2 : 8;
  sim_mapping_t *v = realloc(r->maps, cap * sizeof *v);
  if (!v) return false;
  r->maps = v;
  r->cap = cap;
  return true;
}

CUresult ca_sim_map_locked(uintptr_t va, size_t size, ca_phys_t handle, size_t offset) {
  sim_handle_t *h = ca_sim_slot_get(&ca_sim.handles, handle);
  if (!h || !range_ok(va, size) || !aligned(offset) || offset > h->size ||
      size > h->size - offset)
    return ca_sim_violation(CUDA_ERROR_INVALID_VALUE);
  sim_resv_t *r = resv_holding(va, size);
  if (!r) return ca_sim_violation(CUDA_ERROR_INVALID_VALUE);
  size_t i = maps_lower(r, va);
  if ((i > 0 && r->maps[i - 1].va + r->maps[i - 1].size > va) ||
      (i < r->nmaps && r->maps[i].va - va < size))
    return ca_sim_violation(CUDA_ERROR_INVALID_VALUE);
  if (!maps_reserve_one(r)) return CUDA_ERROR_OUT_OF_MEMORY;
  ca_sim_oracle_pages_locked("map", va, size);
  if (!map_extents(va, size, h, offset)) {
    placeholder(va, size);
    return CUDA_ERROR_OUT_OF_MEMORY;
  }
  memmove(&r->maps[i + 1], &r->maps[i], (r->nmaps - i) * sizeof *r->maps);
  r->maps[i] = (sim_mapping_t){va, size, h, offset, 0};
  r->nmaps++;
  h->maps++;
  ca_sim.dev[r->dev].mapped += size;
  return CUDA_SUCCESS;
}

CUresult ca_sim_unmap_locked(uintptr_t va, size_t size) {
  sim_resv_t *r = range_ok(va, size) ? resv_holding(va, size) : NULL;
  size_t i, j;
  if (!r || !whole_maps(r, va, size, &i, &j)) return ca_sim_violation(CUDA_ERROR_INVALID_VALUE);
  ca_sim_oracle_pages_locked("unmap", va, size);
  if (!placeholder(va, size)) return CUDA_ERROR_UNKNOWN;
  for (size_t k = i; k < j; k++) r->maps[k].handle->maps--;
  memmove(&r->maps[i], &r->maps[j], (r->nmaps - j) * sizeof *r->maps);
  r->nmaps -= j - i;
  ca_sim.dev[r->dev].mapped -= size;
  return CUDA_SUCCESS;
}

/* The range must be whole mappings: the driver asks for "a fully mapped
 * range containing all allocations", and a core that trims a mapping's
 * access is caught here rather than on a GPU. */
CUresult ca_sim_set_access_locked(int dev, uintptr_t va, size_t size) {
  if (!ca_sim_valid_device(dev)) return ca_sim_violation(CUDA_ERROR_INVALID_DEVICE);
  sim_resv_t *r = range_ok(va, size) ? resv_holding(va, size) : NULL;
  size_t i, j;
  if (!r || !whole_maps(r, va, size, &i, &j)) return ca_sim_violation(CUDA_ERROR_INVALID_VALUE);
  if (mprotect((void *)va, size, SIM_PROT_RW) != 0) return CUDA_ERROR_OUT_OF_MEMORY;
  for (size_t k = i; k < j; k++) r->maps[k].access |= 1u << dev;
  return CUDA_SUCCESS;
}

/* Access is kept per device, as the driver keeps it: a peer reaches a
 * mapping only where set_access named it. */
int ca_sim_access(int dev, uintptr_t va) {
  int granted = 0;
  pthread_mutex_lock(&ca_sim.lock);
  sim_resv_t *r = ca_sim.started && ca_sim_valid_device(dev) ? resv_holding(va, 1) : NULL;
  size_t i = r ? maps_lower(r, va + 1) : 0;
  if (i > 0 && va - r->maps[i - 1].va < r->maps[i - 1].size) granted = r->maps[i - 1].access >> dev & 1;
  pthread_mutex_unlock(&ca_sim.lock);
  return granted;
}

// ----------------------------------------------------------------------------
// What device work can reach (oracle.c)
// ----------------------------------------------------------------------------

/* The mapping of r that holds va, or NULL. */
static const sim_mapping_t *mapping_at(const sim_resv_t *r, uintptr_t va) {
  size_t i = maps_lower(r, va + 1);
  const sim_mapping_t *m = i ? &r->maps[i - 1] : NULL;
  return m && va - m->va < m->size ? m : NULL;
}

bool ca_sim_device_range_locked(uintptr_t va, size_t size, bool *mapped) {
  size_t i = resv_lower(va + 1);
  const sim_resv_t *r = i ? &ca_sim.resv[i - 1] : NULL;
  bool holds_va = r && va - r->va < r->size;
  *mapped = false;
  if (!holds_va) return i < ca_sim.nresv && ca_sim.resv[i].va - va < size; /* starts inside */
  uintptr_t cursor = va, end = va + size;
  const sim_mapping_t *m;
  while (cursor < end && (m = mapping_at(r, cursor))) cursor = m->va + m->size;
  *mapped = cursor >= end;
  return true;
}

unsigned ca_sim_handles_under_locked(uintptr_t va, size_t size, uint64_t *out, unsigned cap) {
  const sim_resv_t *r = resv_holding(va, 1);
  if (!r) return 0;
  size_t i = maps_lower(r, va + 1);
  if (i > 0 && r->maps[i - 1].va + r->maps[i - 1].size > va) i--;
  unsigned n = 0;
  for (; i < r->nmaps && r->maps[i].va < va + size && n < cap; i++) out[n++] = r->maps[i].handle->id;
  return n;
}

// ----------------------------------------------------------------------------
// Teardown and inspection
// ----------------------------------------------------------------------------

void ca_sim_vm_teardown_locked(bool unmap) {
  for (size_t i = 0; i < ca_sim.nresv; i++) {
    if (unmap) munmap((void *)ca_sim.resv[i].va, ca_sim.resv[i].size);
    free(ca_sim.resv[i].maps);
  }
  free(ca_sim.resv);
  ca_sim.resv = NULL;
  ca_sim.nresv = ca_sim.resv_cap = 0;
  ca_sim_slot_clear(&ca_sim.handles, handle_free);
  for (int i = 0; i < __atomic_load_n(&ca_sim.ndev, __ATOMIC_RELAXED); i++) {
    sim_device_t *d = &ca_sim.dev[i];
    if (d->memfd >= 0) close(d->memfd);
    free(d->page_bits);
    d->page_bits = NULL;
    d->memfd = -1;
  }
}

/* A device's figure, read under the lock; 0 when it does not exist. */
static size_t device_figure(int dev, size_t (*fig)(const sim_device_t *)) {
  size_t v = 0;
  pthread_mutex_lock(&ca_sim.lock);
  if (ca_sim.started && ca_sim_valid_device(dev)) v = fig(&ca_sim.dev[dev]);
  pthread_mutex_unlock(&ca_sim.lock);
  return v;
}

static size_t fig_used(const sim_device_t *d) { return d->used; }
static size_t fig_handles(const sim_device_t *d) { return (size_t)d->live_handles; }
static size_t fig_mapped(const sim_device_t *d) { return d->mapped; }

size_t ca_sim_physical_used(int dev) { return device_figure(dev, fig_used); }
int ca_sim_live_handles(int dev) { return (int)device_figure(dev, fig_handles); }
size_t ca_sim_mapped_bytes(int dev) { return device_figure(dev, fig_mapped); }

/* Bytes of address space dev holds in reservations (the campaign's "no
 * reservation left behind"). */
size_t ca_sim_reserved_va(int dev) {
  size_t v = 0;
  pthread_mutex_lock(&ca_sim.lock);
  for (size_t i = 0; ca_sim.started && i < ca_sim.nresv; i++)
    if (ca_sim.resv[i].dev == dev) v += ca_sim.resv[i].size;
  pthread_mutex_unlock(&ca_sim.lock);
  return v;
}
