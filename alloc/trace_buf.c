/* Per-thread event buffers and the writer thread of the full event log.
 *
 * Each thread appends to its own ring of events: one producer (the thread)
 * and one consumer at a time (whoever holds drain_lock: the writer thread,
 * the thread itself when its ring is full, or a flush), so an append is the
 * record's stores into its slot and a release store, with no lock and no
 * shared cache line. The writer wakes every few milliseconds, or when a
 * ring is half full, makes the new records final in their slots (site ids,
 * the thread: trace_log.h's held events; the slots between tail and head
 * are the consumer's) and writes them from there. A thread that ends marks its ring
 * gone; the writer frees it once it is empty. Nothing is lost: a full ring
 * is drained by its own thread before it appends, and the stop drains every
 * ring after the last append (the recorder stops appends first). */
#define _GNU_SOURCE /* syscall */
#include "trace_buf.h"

#include <pthread.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "log.h"
#include "trace_clock.h"

#define RING_EVENTS 4096u   /* per thread: 192 KiB */
#define WAKE_MS 20
#define CLOCK_PAIR_NS 1000000000ull   /* a calibration pair a second */

typedef struct tbuf_s {
  ca_trace_event_t ev[RING_EVENTS];   /* held (trace_log.h), made records in place as they go out */
  uint64_t head;        /* appended: written by the owner (release) */
  uint32_t thread;      /* the owner's Linux id, written into its records as they go out */
  uint64_t tail;        /* written out: by the holder of drain_lock (release) */
  int gone;             /* the owner thread ended */
  struct tbuf_s *next;  /* every ring, under reg_lock */
} tbuf_t;

static pthread_mutex_t reg_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_mutex_t drain_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_mutex_t wake_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t wake = PTHREAD_COND_INITIALIZER;
static tbuf_t *rings;            /* under reg_lock */
static ca_trace_file_t *out;     /* under drain_lock */
static uint64_t last_pair_ns;    /* when the last calibration pair was written: under drain_lock */
static pthread_t writer;
static bool running, stopping;   /* stopping: under wake_lock */
static pthread_key_t key;
static pthread_once_t key_once = PTHREAD_ONCE_INIT;
static __thread tbuf_t *mine;

static void thread_ends(void *p) {
  tbuf_t *b = p;
  if (mine == b) mine = NULL;
  __atomic_store_n(&b->gone, 1, __ATOMIC_RELEASE);
}

static void make_key(void) { pthread_key_create(&key, thread_ends); }

static tbuf_t *attach(void) {
  pthread_once(&key_once, make_key);
  tbuf_t *b = calloc(1, sizeof *b);
  if (!b) return NULL;
  b->thread = (uint32_t)syscall(SYS_gettid);
  pthread_mutex_lock(&reg_lock);
  b->next = rings;
  rings = b;
  pthread_mutex_unlock(&reg_lock);
  pthread_setspecific(key, b);
  return mine = b;
}

/* Writes b's events to the log; drain_lock held. */
static void drain_one(tbuf_t *b) {
  uint64_t h = __atomic_load_n(&b->head, __ATOMIC_ACQUIRE), t = b->tail;
  while (t < h) {
    size_t at = (size_t)(t % RING_EVENTS), n = (size_t)(h - t);
    if (n > RING_EVENTS - at) n = RING_EVENTS - at;   /* up to the ring's end, then from its start */
    if (out) ca_trace_file_write_held(out, &b->ev[at], n, b->thread, NULL);
    t += n;
  }
  __atomic_store_n(&b->tail, t, __ATOMIC_RELEASE);
}

/* Writes every ring out and frees those of ended threads. */
static void drain_all(void) {
  pthread_mutex_lock(&drain_lock);
  pthread_mutex_lock(&reg_lock);
  for (tbuf_t **pb = &rings; *pb;) {
    tbuf_t *b = *pb;
    bool gone = __atomic_load_n(&b->gone, __ATOMIC_ACQUIRE);   /* before the drain: no append follows */
    drain_one(b);
    if (gone) {
      *pb = b->next;
      free(b);
    } else {
      pb = &b->next;
    }
  }
  pthread_mutex_unlock(&reg_lock);
  if (out) {
    uint64_t now = ca_trace_clock_mono();
    if (now - last_pair_ns >= CLOCK_PAIR_NS) {   /* the conversion follows CLOCK_MONOTONIC's own drift */
      ca_trace_file_clock(out);
      last_pair_ns = now;
    }
    ca_trace_file_flush(out);
  }
  pthread_mutex_unlock(&drain_lock);
}

static void *writer_main(void *arg) {
  (void)arg;
  pthread_mutex_lock(&wake_lock);
  while (!stopping) {
    struct timespec until;
    clock_gettime(CLOCK_REALTIME, &until);
    until.tv_nsec += WAKE_MS * 1000000L;
    if (until.tv_nsec >= 1000000000L) until.tv_sec++, until.tv_nsec -= 1000000000L;
    pthread_cond_timedwait(&wake, &wake_lock, &until);
    pthread_mutex_unlock(&wake_lock);
    drain_all();
    pthread_mutex_lock(&wake_lock);
  }
  pthread_mutex_unlock(&wake_lock);
  return NULL;
}

bool ca_trace_buf_start(ca_trace_file_t *tf) {
  pthread_mutex_lock(&drain_lock);
  out = tf;
  last_pair_ns = ca_trace_clock_mono();   /* the file's start pairs are the first */
  pthread_mutex_unlock(&drain_lock);
  stopping = false;
  if (pthread_create(&writer, NULL, writer_main, NULL)) {
    ca_log("trace: cannot start the log's writer thread; nothing is recorded");
    return false;
  }
  running = true;
  return true;
}

ca_trace_event_t *ca_trace_buf_claim(ca_trace_buf_t **buf) {
  tbuf_t *b = mine;
  if (!b && !(b = attach())) return NULL;
  uint64_t h = b->head, used = h - __atomic_load_n(&b->tail, __ATOMIC_ACQUIRE);
  if (used == RING_EVENTS) {   /* the writer fell behind: write this ring now */
    pthread_mutex_lock(&drain_lock);
    drain_one(b);
    pthread_mutex_unlock(&drain_lock);
    used = 0;
  }
  if (used == RING_EVENTS / 2) pthread_cond_signal(&wake);
  *buf = b;
  return &b->ev[h % RING_EVENTS];
}

void ca_trace_buf_commit(ca_trace_buf_t *b) { __atomic_store_n(&b->head, b->head + 1, __ATOMIC_RELEASE); }

void ca_trace_buf_flush(void) { drain_all(); }

void ca_trace_buf_stop(void) {
  if (running) {
    pthread_mutex_lock(&wake_lock);
    stopping = true;
    pthread_cond_signal(&wake);
    pthread_mutex_unlock(&wake_lock);
    pthread_join(writer, NULL);
    running = false;
  }
  drain_all();
  pthread_mutex_lock(&drain_lock);
  out = NULL;
  pthread_mutex_unlock(&drain_lock);
}

void ca_trace_buf_abandon(void) {
  pthread_mutex_t fresh = PTHREAD_MUTEX_INITIALIZER;
  reg_lock = drain_lock = wake_lock = fresh;
  pthread_cond_t cond = PTHREAD_COND_INITIALIZER;
  wake = cond;
  rings = NULL;   /* the parent's threads' rings: not ours (the child's own thread attaches anew) */
  mine = NULL;
  out = NULL;
  running = false;
}
