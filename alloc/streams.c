/* The program's streams as the core sees them: whether a handle names a
 * stream of a device (asked of the backend, which refuses bad handles), and
 * the registry of non-blocking streams that cudaFree's fence must cover.
 *
 * A stream is registered on its own device, not the current one. When its
 * device cannot be learned at creation (a transient driver failure), it is
 * deferred rather than forgotten: every later epoch fence tries again, and
 * until it succeeds the fence synchronizes its device, which covers the
 * stream whatever it is. */
#include "streams.h"

#include <string.h>

#include "log.h"
#include "streamdev.h"

bool ca_stream_is_default(ca_stream_t s) {
  return s == NULL || s == CA_STREAM_LEGACY || s == CA_STREAM_PER_THREAD;
}

void ca_stream_register_on(ca_device_t *d, ca_stream_t stream) {
  for (int i = 0; i < d->nnonblocking; i++)
    if (d->nonblocking[i] == stream) return;
  if (d->nnonblocking < CA_MAX_FENCE_EVENTS - 1) d->nonblocking[d->nnonblocking++] = stream;
  else if (!d->nonblocking_overflow) {
    d->nonblocking_overflow = true;
    ca_log("more than %d non-blocking streams: cudaFree's fence now synchronizes the device",
           CA_MAX_FENCE_EVENTS - 1);
  }
}

// ----------------------------------------------------------------------------
// Streams whose device is not known yet
// ----------------------------------------------------------------------------

/* More than fit: every fence synchronizes its device from then on. */
#define CA_MAX_DEFERRED 64
static struct {
  pthread_mutex_t lock;
  ca_stream_t streams[CA_MAX_DEFERRED];
  int count;
  bool overflow;
} deferred = {.lock = PTHREAD_MUTEX_INITIALIZER};

void ca_stream_defer(ca_stream_t stream) {
  pthread_mutex_lock(&deferred.lock);
  if (deferred.count < CA_MAX_DEFERRED) deferred.streams[deferred.count++] = stream;
  else deferred.overflow = true;
  pthread_mutex_unlock(&deferred.lock);
}

void ca_stream_forget_deferred(ca_stream_t stream) {
  pthread_mutex_lock(&deferred.lock);
  for (int i = 0; i < deferred.count; i++)
    if (deferred.streams[i] == stream) deferred.streams[i--] = deferred.streams[--deferred.count];
  pthread_mutex_unlock(&deferred.lock);
}

/* Called by every epoch fence: rare enough for a lock. */
bool ca_streams_place(ca_device_t *d) {
  bool unknown = false;
  pthread_mutex_lock(&deferred.lock);
  for (int i = 0; i < deferred.count; i++) {
    int dev;
    CUresult rc = ca_state.be->stream_device(deferred.streams[i], &dev);
    if (rc == CUDA_SUCCESS && dev != d->ordinal) continue;   /* its own device's fences place it */
    if (rc == CUDA_SUCCESS) ca_stream_register_on(d, deferred.streams[i]);
    else if (rc != CUDA_ERROR_INVALID_HANDLE && rc != CUDA_ERROR_NOT_SUPPORTED) {
      unknown = true;   /* still unknown: try again at the next fence */
      continue;
    }
    /* placed, or not a stream cudalloc can fence (gone, another context);
     * with arenas, placed on d alone: it stays for the siblings' fences to
     * place too (a deferred stream is rare: a transient failure) */
    if (rc == CUDA_SUCCESS && ca_config.arenas > 1) continue;
    deferred.streams[i--] = deferred.streams[--deferred.count];
  }
  unknown = unknown || deferred.overflow;
  pthread_mutex_unlock(&deferred.lock);
  return unknown;
}

// ----------------------------------------------------------------------------
// The ordinals' non-blocking streams, for arenas made later
// ----------------------------------------------------------------------------

static struct {
  pthread_mutex_t lock;
  ca_stream_t streams[CA_MAX_DEVICES][CA_MAX_FENCE_EVENTS - 1];
  int count[CA_MAX_DEVICES];
  bool overflow[CA_MAX_DEVICES];   /* more than fit were noted: an arena made later fences by a device sync */
} known = {.lock = PTHREAD_MUTEX_INITIALIZER};

void ca_streams_note_nonblocking(int ordinal, ca_stream_t stream) {
  pthread_mutex_lock(&known.lock);
  int n = known.count[ordinal], i = 0;
  while (i < n && known.streams[ordinal][i] != stream) i++;
  if (i == n && n < CA_MAX_FENCE_EVENTS - 1) known.streams[ordinal][known.count[ordinal]++] = stream;
  else if (i == n) known.overflow[ordinal] = true;   /* as sticky as an arena's own (ca_stream_register_on) */
  pthread_mutex_unlock(&known.lock);
}

void ca_streams_drop_nonblocking(int ordinal, ca_stream_t stream) {
  pthread_mutex_lock(&known.lock);
  for (int o = ordinal < 0 ? 0 : ordinal; o < (ordinal < 0 ? CA_MAX_DEVICES : ordinal + 1); o++) {
    if (!stream) known.overflow[o] = false;   /* a device reset: its streams are gone */
    for (int i = 0; i < known.count[o]; i++)
      if (!stream || known.streams[o][i] == stream) known.streams[o][i--] = known.streams[o][--known.count[o]];
  }
  pthread_mutex_unlock(&known.lock);
}

int ca_streams_copy_nonblocking(int ordinal, ca_stream_t *out, bool *overflow) {
  pthread_mutex_lock(&known.lock);
  int n = known.count[ordinal];
  *overflow = known.overflow[ordinal];
  for (int i = 0; i < n; i++) out[i] = known.streams[ordinal][i];
  pthread_mutex_unlock(&known.lock);
  return n;
}

void ca_streams_forget(bool after_fork) {
  if (after_fork) {   /* another thread may have held the lock at fork() */
    pthread_mutex_t fresh = PTHREAD_MUTEX_INITIALIZER;
    deferred.lock = fresh;
    known.lock = fresh;
  }
  pthread_mutex_lock(&known.lock);
  memset(known.count, 0, sizeof known.count);
  memset(known.overflow, 0, sizeof known.overflow);
  pthread_mutex_unlock(&known.lock);
  pthread_mutex_lock(&deferred.lock);
  deferred.count = 0;
  deferred.overflow = false;
  pthread_mutex_unlock(&deferred.lock);
}
