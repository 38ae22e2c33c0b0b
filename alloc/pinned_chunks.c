/* The pinned arena's extent hooks: jemalloc asks for extents, these carve
 * them out of chunks that the backend pinned (host_alloc), at least
 * CA_PINNED_CHUNK bytes each, since pinning costs milliseconds a call.
 *
 * A chunk is carved from its start (bump) and counts the carved bytes
 * jemalloc still holds (out). jemalloc reuses what it frees itself, and
 * hands an extent back (dalloc) only when it decays; once a chunk has come
 * back whole it is idle: carved again from its start, or given back to the
 * backend while more than pinned_cache_mb of chunks are idle.
 *
 * Two chunks pinned separately are two driver allocations, so an extent
 * never spans both: split and merge refuse to cross a chunk boundary, and
 * an extent handed back across one is refused and counted (a violation).
 * No purge and no decommit: pinned pages stay pinned while held.
 */
#include "pinned_chunks.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "config.h"
#include "core.h"
#include "debug.h"
#include "log.h"

/* The private jemalloc's settings (its malloc_conf, renamed): extents come
 * from the hooks at their exact size and go back through dalloc, instead
 * of jemalloc growing and retaining address space of its own, which would
 * keep every chunk from ever coming back whole. */
const char *ca_je_malloc_conf = "retain:false";

typedef struct chunk_s {
  uintptr_t base;
  size_t size;          /* as host_alloc was asked */
  size_t bump;          /* bytes carved from the start */
  size_t out;           /* carved bytes that jemalloc holds */
} chunk_t;

static struct {
  pthread_mutex_t lock;
  chunk_t *v;           /* sorted by base */
  size_t n, cap;
  size_t idle_bytes;    /* in chunks with out == 0 */
  uint64_t violations;
  cudalloc_stat_t reserved, backend_alloc, backend_free;
} chunks = {.lock = PTHREAD_MUTEX_INITIALIZER};

static size_t host_page(void) { return (size_t)sysconf(_SC_PAGESIZE); }
static uintptr_t align_up(uintptr_t x, size_t a) { return (x + a - 1) & ~(uintptr_t)(a - 1); }

// ----------------------------------------------------------------------------
// The table of chunks
// ----------------------------------------------------------------------------

/* The chunk containing p, or NULL; the lock is held. */
static chunk_t *chunk_of_locked(uintptr_t p) {
  size_t lo = 0, hi = chunks.n;
  while (lo < hi) {
    size_t mid = (lo + hi) / 2;
    if (p < chunks.v[mid].base) hi = mid;
    else if (p >= chunks.v[mid].base + chunks.v[mid].size) lo = mid + 1;
    else return &chunks.v[mid];
  }
  return NULL;
}

/* The chunk holding all of [p, p+n), or NULL. */
static chunk_t *chunk_holding_locked(uintptr_t p, size_t n) {
  chunk_t *c = chunk_of_locked(p);
  return c && n <= c->base + c->size - p ? c : NULL;
}

static bool insert_locked(uintptr_t base, size_t size) {
  if (chunks.n == chunks.cap) {
    size_t cap = chunks.cap ? chunks.cap * 2 : 16;
    chunk_t *v = realloc(chunks.v, cap * sizeof *v);
    if (!v) return false;
    chunks.v = v;
    chunks.cap = cap;
  }
  size_t i = chunks.n;
  while (i > 0 && chunks.v[i - 1].base > base) i--;
  memmove(&chunks.v[i + 1], &chunks.v[i], (chunks.n - i) * sizeof *chunks.v);
  chunks.v[i] = (chunk_t){.base = base, .size = size};
  chunks.n++;
  return true;
}

bool ca_pinned_chunks_contain(uintptr_t p) {
  pthread_mutex_lock(&chunks.lock);
  bool in = chunk_of_locked(p) != NULL;
  pthread_mutex_unlock(&chunks.lock);
  return in;
}

bool ca_pinned_chunks_hold(uintptr_t p, size_t n) {
  pthread_mutex_lock(&chunks.lock);
  bool in = chunk_holding_locked(p, n) != NULL;
  pthread_mutex_unlock(&chunks.lock);
  return in;
}

// ----------------------------------------------------------------------------
// Pinning and giving back
// ----------------------------------------------------------------------------

static chunk_t *pin_locked(size_t size) {
  void *p = NULL;
  ca_stat_add(&chunks.backend_alloc, 1);
  if (ca_state.be->host_alloc(ca_device_current(), size, &p) != CUDA_SUCCESS) return NULL;
  if (!insert_locked((uintptr_t)p, size)) {
    ca_stat_add(&chunks.backend_free, 1);
    ca_state.be->host_free(p, size);
    return NULL;
  }
  ca_stat_add(&chunks.reserved, (int64_t)size);
  return chunk_of_locked((uintptr_t)p);
}

/* Gives chunk i back; false when the backend refused (it stays, counted). */
static bool unpin_locked(size_t i) {
  chunk_t c = chunks.v[i];
  ca_stat_add(&chunks.backend_free, 1);
  CUresult rc = ca_state.be->host_free((void *)c.base, c.size);
  if (rc != CUDA_SUCCESS) {
    ca_log_once("giving back %zu bytes of pinned memory failed (error %d); they stay pinned", c.size, (int)rc);
    return false;
  }
  memmove(&chunks.v[i], &chunks.v[i + 1], (chunks.n - i - 1) * sizeof *chunks.v);
  chunks.n--;
  ca_stat_add(&chunks.reserved, -(int64_t)c.size);
  return true;
}

/* Largest idle chunks first, until at most keep bytes are idle. After exit
 * the driver may be gone: nothing is given back then. */
static void trim_locked(size_t keep) {
  if (__atomic_load_n(&ca_state.exited, __ATOMIC_ACQUIRE)) return;
  while (chunks.idle_bytes > keep) {
    size_t best = SIZE_MAX;
    for (size_t i = 0; i < chunks.n; i++)
      if (!chunks.v[i].out && (best == SIZE_MAX || chunks.v[i].size > chunks.v[best].size)) best = i;
    if (best == SIZE_MAX) return;
    size_t size = chunks.v[best].size;
    if (!unpin_locked(best)) return;
    chunks.idle_bytes -= size;
  }
}

void ca_pinned_chunks_trim(size_t keep) {
  pthread_mutex_lock(&chunks.lock);
  trim_locked(keep);
  pthread_mutex_unlock(&chunks.lock);
}

void ca_pinned_chunks_drop(bool call_backend) {
  if (!call_backend) {   /* fork child: the lock may have had an owner that is gone */
    pthread_mutex_t fresh = PTHREAD_MUTEX_INITIALIZER;
    chunks.lock = fresh;
  }
  pthread_mutex_lock(&chunks.lock);
  while (call_backend && chunks.n && unpin_locked(chunks.n - 1)) {}
  if (call_backend) free(chunks.v);   /* else the fork child leaves the parent's table alone */
  chunks.v = NULL;
  chunks.n = chunks.cap = chunks.idle_bytes = 0;
  chunks.violations = 0;
  pthread_mutex_unlock(&chunks.lock);
}

void ca_pinned_chunks_stats(cudalloc_pinned_stats_t *out) {
  pthread_mutex_lock(&chunks.lock);
  out->pinned_reserved_bytes = chunks.reserved;
  out->pinned_backend_alloc = chunks.backend_alloc;
  out->pinned_backend_free = chunks.backend_free;
  pthread_mutex_unlock(&chunks.lock);
}

uint64_t ca_pinned_chunks_violations(void) {
  pthread_mutex_lock(&chunks.lock);
  uint64_t v = chunks.violations;
  pthread_mutex_unlock(&chunks.lock);
  return v;
}

// ----------------------------------------------------------------------------
// Carving
// ----------------------------------------------------------------------------

/* Carves [at, at+size) from c when it fits. */
static void *carve_locked(chunk_t *c, uintptr_t at, size_t size) {
  if (at < c->base + c->bump || size > c->base + c->size - at) return NULL;
  if (!c->out) chunks.idle_bytes -= c->size;
  c->bump = at + size - c->base;
  c->out += size;
  return (void *)at;
}

/* From the room left in some chunk, or a new chunk. new_addr (jemalloc
 * growing an extent in place) can only be served where a chunk's room
 * begins there. */
static void *extent_locked(void *new_addr, size_t size, size_t align) {
  if (new_addr) {
    chunk_t *c = chunk_of_locked((uintptr_t)new_addr);
    return c && c->base + c->bump == (uintptr_t)new_addr ? carve_locked(c, (uintptr_t)new_addr, size) : NULL;
  }
  for (size_t i = 0; i < chunks.n; i++) {
    chunk_t *c = &chunks.v[i];
    void *p = carve_locked(c, align_up(c->base + c->bump, align), size);
    if (p) return p;
  }
  size_t page = host_page(), need = size + (align > page ? align : 0);
  need = align_up(need < CA_PINNED_CHUNK ? CA_PINNED_CHUNK : need, page);
  if (need < size) return NULL;   /* wrapped around */
  /* Chunks grow with what is pinned already (half of it, up to
   * CA_PINNED_CHUNK_MAX): fewer pin calls, and fewer chunk boundaries that
   * jemalloc's extents can never merge across, so a warm arena finds room
   * in what it holds. Short of pinned memory, the least that serves. */
  size_t grown = align_up((size_t)chunks.reserved.current / 2, CA_PINNED_CHUNK);
  if (grown > CA_PINNED_CHUNK_MAX) grown = CA_PINNED_CHUNK_MAX;
  chunk_t *c = grown > need ? pin_locked(grown) : NULL;
  if (!c) c = pin_locked(need);
  if (!c) return NULL;
  chunks.idle_bytes += c->size;   /* counted idle until carved */
  return carve_locked(c, align_up(c->base, align), size);
}

// ----------------------------------------------------------------------------
// The hooks
// ----------------------------------------------------------------------------

static void *hook_alloc(extent_hooks_t *h, void *new_addr, size_t size, size_t align, bool *zero, bool *commit,
                        unsigned arena) {
  (void)h, (void)arena;
  if (!size || !align || (align & (align - 1))) return NULL;
  pthread_mutex_lock(&chunks.lock);
  void *p = extent_locked(new_addr, size, align);
  pthread_mutex_unlock(&chunks.lock);
  if (p && *zero) memset(p, 0, size);   /* a reused chunk holds old data */
  *commit = true;
  return p;
}

/* jemalloc hands [addr, addr+size) back for good. */
static bool hook_dalloc(extent_hooks_t *h, void *addr, size_t size, bool committed, unsigned arena) {
  (void)h, (void)committed, (void)arena;
  pthread_mutex_lock(&chunks.lock);
  chunk_t *c = chunk_holding_locked((uintptr_t)addr, size);
  bool refused = !c || size > c->out;
  if (refused) chunks.violations++;
  else if (!(c->out -= size)) {
    c->bump = 0;
    chunks.idle_bytes += c->size;
    trim_locked(ca_config.pinned_cache);
  }
  pthread_mutex_unlock(&chunks.lock);
  return refused;   /* true: jemalloc keeps it (it is not ours to take) */
}

static void hook_destroy(extent_hooks_t *h, void *addr, size_t size, bool committed, unsigned arena) {
  hook_dalloc(h, addr, size, committed, arena);
}

/* Chunks are pinned committed and stay so. */
static bool hook_commit(extent_hooks_t *h, void *addr, size_t size, size_t offset, size_t length, unsigned arena) {
  (void)h, (void)addr, (void)size, (void)offset, (void)length, (void)arena;
  return false;
}

static bool hook_split(extent_hooks_t *h, void *addr, size_t size, size_t size_a, size_t size_b, bool committed,
                       unsigned arena) {
  (void)h, (void)size_a, (void)size_b, (void)committed, (void)arena;
  return !ca_pinned_chunks_hold((uintptr_t)addr, size);
}

static bool hook_merge(extent_hooks_t *h, void *addr_a, size_t size_a, void *addr_b, size_t size_b, bool committed,
                       unsigned arena) {
  (void)h, (void)committed, (void)arena;
  if (CA_DEBUG(pinned_merge_across)) return false;
  pthread_mutex_lock(&chunks.lock);
  chunk_t *a = chunk_holding_locked((uintptr_t)addr_a, size_a);
  bool apart = !a || a != chunk_holding_locked((uintptr_t)addr_b, size_b);
  pthread_mutex_unlock(&chunks.lock);
  return apart;
}

extent_hooks_t ca_pinned_hooks = {
    .alloc = hook_alloc,
    .dalloc = hook_dalloc,
    .destroy = hook_destroy,
    .commit = hook_commit,
    .decommit = NULL,          /* pinned pages are not decommitted... */
    .purge_lazy = NULL,        /* ...nor purged: they stay pinned while held */
    .purge_forced = NULL,
    .split = hook_split,
    .merge = hook_merge,
};
