/* The event log's file and its call-site table (docs/trace.md).
 *
 * Records hold a site's id, not its pointer: the table at the end of the
 * file names each id once, symbolized by track.c as every report is. A
 * thread keeps a small cache of the ids it used, so that the hot path
 * takes no lock for a site seen before. */
#include "trace_log.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "log.h"
#include "thread_heap.h"
#include "trace_clock.h"
#include "track.h"

// ----------------------------------------------------------------------------
// Call-site ids
// ----------------------------------------------------------------------------

#define SITE_CACHE 64   /* per thread, direct-mapped */

static pthread_mutex_t sites_lock = PTHREAD_MUTEX_INITIALIZER;
static const void **sites;         /* id - 1 -> site */
static size_t nsites, sites_cap;
static uint32_t *index_slots;      /* open addressing: id, 0 empty */
static size_t index_cap;
static uint64_t sites_gen = 1;     /* bumped by forget: thread caches go stale */

static size_t slot_of(const void *site, size_t cap) {
  uint64_t h = (uint64_t)(uintptr_t)site * 0x9e3779b97f4a7c15ull;
  return (size_t)(h >> 20) & (cap - 1);
}

static bool grow_index(void) {
  size_t cap = index_cap ? index_cap * 2 : 1024;
  uint32_t *slots = calloc(cap, sizeof *slots);
  if (!slots) return false;
  for (size_t i = 0; i < nsites; i++) {
    size_t s = slot_of(sites[i], cap);
    while (slots[s]) s = (s + 1) & (cap - 1);
    slots[s] = (uint32_t)(i + 1);
  }
  free(index_slots);
  index_slots = slots;
  index_cap = cap;
  return true;
}

static uint32_t intern_locked(const void *site) {
  if (index_cap) {
    for (size_t s = slot_of(site, index_cap); index_slots[s]; s = (s + 1) & (index_cap - 1))
      if (sites[index_slots[s] - 1] == site) return index_slots[s];
  }
  if (nsites == sites_cap) {
    size_t cap = sites_cap ? sites_cap * 2 : 256;
    const void **grown = realloc(sites, cap * sizeof *grown);
    if (!grown) return 0;
    sites = grown;
    sites_cap = cap;
  }
  if ((nsites + 1) * 2 > index_cap && !grow_index()) return 0;
  sites[nsites++] = site;
  size_t s = slot_of(site, index_cap);
  while (index_slots[s]) s = (s + 1) & (index_cap - 1);
  return index_slots[s] = (uint32_t)nsites;
}

/* A thread's last ids, on the heap (thread_heap.h says why). */
typedef struct {
  uint64_t gen;
  struct { const void *site; uint32_t id; } slot[SITE_CACHE];
} site_cache_t;
static __thread site_cache_t *cache;
CA_THREAD_HEAP(site_cache_t, cache, my_cache)

uint32_t ca_trace_log_site_id(const void *site) {
  if (!site) return 0;
  site_cache_t *t = my_cache();
  uint64_t gen = __atomic_load_n(&sites_gen, __ATOMIC_ACQUIRE);
  if (t && t->gen != gen) {
    memset(t->slot, 0, sizeof t->slot);
    t->gen = gen;
  }
  size_t c = slot_of(site, SITE_CACHE);
  if (t && t->slot[c].site == site) return t->slot[c].id;
  pthread_mutex_lock(&sites_lock);
  uint32_t id = intern_locked(site);
  pthread_mutex_unlock(&sites_lock);
  if (id && t) {
    t->slot[c].site = site;
    t->slot[c].id = id;
  }
  return id;
}

void ca_trace_log_forget_sites(void) {
  pthread_mutex_lock(&sites_lock);
  free(sites);
  free(index_slots);
  sites = NULL;
  index_slots = NULL;
  nsites = sites_cap = index_cap = 0;
  __atomic_add_fetch(&sites_gen, 1, __ATOMIC_RELEASE);
  pthread_mutex_unlock(&sites_lock);
}

// ----------------------------------------------------------------------------
// The file
// ----------------------------------------------------------------------------

static void failed(ca_trace_file_t *tf) {
  if (!tf->failed) ca_log("trace: a write to the event log failed; the log is incomplete");
  tf->failed = true;
}

static void write_all(ca_trace_file_t *tf, const unsigned char *p, size_t size) {
  for (size_t done = 0; !tf->failed && done < size;) {
    ssize_t n = write(tf->fd, p + done, size - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) failed(tf);
    else done += (size_t)n;
  }
}

void ca_trace_file_flush(ca_trace_file_t *tf) {
  write_all(tf, tf->buf, tf->used);
  tf->used = 0;
}

static void put(ca_trace_file_t *tf, const void *p, size_t n) {
  const unsigned char *c = p;
  while (n) {
    if (tf->used == sizeof tf->buf) ca_trace_file_flush(tf);
    size_t k = sizeof tf->buf - tf->used;
    if (k > n) k = n;
    memcpy(tf->buf + tf->used, c, k);
    tf->used += k;
    c += k;
    n -= k;
  }
}

bool ca_trace_file_open(ca_trace_file_t *tf, const char *path, uint32_t flags) {
  tf->events = 0;
  tf->failed = false;
  tf->used = 0;
  if ((tf->fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644)) < 0) {
    ca_log("trace: cannot create the event log %s (%s); nothing is recorded", path, strerror(errno));
    return false;
  }
  ca_trace_header_t h = {.version = CA_TRACE_VERSION, .header_size = sizeof h,
                         .record_size = sizeof(ca_trace_event_t), .flags = flags, .pid = (uint32_t)getpid(),
                         .start_unix_ns = ca_trace_clock_start_unix_ns(), .clock = ca_trace_clock_kind()};
  memcpy(h.magic, CA_TRACE_MAGIC, sizeof CA_TRACE_MAGIC);
  gethostname(h.host, sizeof h.host - 1);
  put(tf, &h, sizeof h);
  uint64_t raw[2], ns[2];
  ca_trace_clock_start_pairs(raw, ns);
  for (int i = 0; i < 2; i++) {
    ca_trace_event_t pair = {.time_ns = raw[i], .addr = ns[i], .kind = CA_EV_CLOCK, .device = -1};
    ca_trace_file_write(tf, &pair, 1);
  }
  return true;
}

void ca_trace_file_write(ca_trace_file_t *tf, const ca_trace_event_t *ev, size_t n) {
  put(tf, ev, n * sizeof *ev);
  tf->events += n;
}

void ca_trace_file_write_held(ca_trace_file_t *tf, ca_trace_event_t *ev, size_t n, uint32_t thread,
                              const uint32_t *threads) {
  const void *site = NULL;   /* the last site's id: runs of one site are the rule */
  uint32_t id = 0;
  for (size_t i = 0; i < n; i++) {
    uint64_t w;
    memcpy(&w, &ev[i].site, sizeof w);
    if ((const void *)(uintptr_t)w != site) id = ca_trace_log_site_id(site = (const void *)(uintptr_t)w);
    ev[i].site = id;
    ev[i].thread = threads ? threads[i] : thread;
  }
  if (n * sizeof *ev >= sizeof tf->buf) {
    ca_trace_file_flush(tf);
    write_all(tf, (const unsigned char *)ev, n * sizeof *ev);
    tf->events += n;
  } else {
    ca_trace_file_write(tf, ev, n);
  }
}

void ca_trace_file_clock(ca_trace_file_t *tf) {
  ca_trace_event_t pair = {.kind = CA_EV_CLOCK, .device = -1};
  ca_trace_clock_pair(&pair.time_ns, &pair.addr);
  ca_trace_file_write(tf, &pair, 1);
}

static void put_frame(ca_trace_file_t *tf, void *pc) {
  char text[512];
  ca_track_symbolize(pc, text, sizeof text);
  uint64_t at = (uint64_t)(uintptr_t)pc;
  uint32_t len = (uint32_t)strlen(text);
  put(tf, &at, sizeof at);
  put(tf, &len, sizeof len);
  put(tf, text, len);
}

static void put_sites_locked(ca_trace_file_t *tf) {
  for (size_t i = 0; i < nsites; i++) {
    void *const *frames;
    uint32_t id = (uint32_t)(i + 1), n = (uint32_t)ca_track_frames(sites[i], &frames);
    put(tf, &id, sizeof id);
    put(tf, &n, sizeof n);
    for (uint32_t k = 0; k < n; k++) put_frame(tf, frames[k]);
  }
}

bool ca_trace_file_close(ca_trace_file_t *tf, uint64_t lost) {
  ca_trace_file_clock(tf);   /* the events' last times convert by interpolation, not extrapolation */
  pthread_mutex_lock(&sites_lock);   /* the table holds as many sites as the end record says */
  ca_trace_event_t end = {.time_ns = ca_trace_clock_raw(), .addr = nsites, .size = tf->events, .stream = lost,
                          .kind = CA_EV_LOG_END, .device = -1};
  put(tf, &end, sizeof end);
  put_sites_locked(tf);
  pthread_mutex_unlock(&sites_lock);
  ca_trace_file_flush(tf);
  if (close(tf->fd)) failed(tf);
  tf->fd = -1;
  return !tf->failed;
}
