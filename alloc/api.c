/* The public C API (cudalloc.h): argument checks and CUDA error codes over
 * the core. The interception shim reaches the same core through core.h. */
#include "check.h"
#include "core.h"
#include "creep.h"
#include "device.h"
#include "entry.h"
#include "fence.h"
#include "legacyq.h"
#include "log.h"
#include "oom.h"
#include "pages.h"
#include "peak.h"
#include "pinned.h"
#include "report.h"
#include "siblings.h"
#include "stats.h"
#include "step.h"
#include "tcache.h"
#include "trace.h"

cudaError_t ca_cuda_error(CUresult err) {
  switch (err) {
  case CUDA_SUCCESS: return cudaSuccess;
  case CUDA_ERROR_INVALID_VALUE:
  case CUDA_ERROR_NOT_FOUND: return cudaErrorInvalidValue;
  case CUDA_ERROR_OUT_OF_MEMORY: return cudaErrorMemoryAllocation;
  case CUDA_ERROR_NOT_INITIALIZED: return cudaErrorInitializationError;
  case CUDA_ERROR_DEINITIALIZED: return cudaErrorCudartUnloading;
  case CUDA_ERROR_NO_DEVICE: return cudaErrorNoDevice;
  case CUDA_ERROR_INVALID_DEVICE: return cudaErrorInvalidDevice;
  case CUDA_ERROR_INVALID_CONTEXT: return cudaErrorDeviceUninitialized;
  case CUDA_ERROR_INVALID_HANDLE: return cudaErrorInvalidResourceHandle;
  case CUDA_ERROR_NOT_READY: return cudaErrorNotReady;
  case CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED: return cudaErrorStreamCaptureUnsupported;
  case CUDA_ERROR_LAUNCH_FAILED: return cudaErrorLaunchFailure;
  /* Below 100 the runtime gives these the driver's number and meaning. */
  case CUDA_ERROR_PROFILER_DISABLED:
  case CUDA_ERROR_PROFILER_NOT_INITIALIZED:
  case CUDA_ERROR_PROFILER_ALREADY_STARTED:
  case CUDA_ERROR_PROFILER_ALREADY_STOPPED:
  case CUDA_ERROR_STUB_LIBRARY:
  case CUDA_ERROR_CALL_REQUIRES_NEWER_DRIVER:
  case CUDA_ERROR_DEVICE_UNAVAILABLE: return (cudaError_t)err;
  /* From 100 on, the runtime numbers its errors as the driver does. */
  default: return err >= 100 ? (cudaError_t)err : cudaErrorUnknown;
  }
}

cudaError_t cudalloc_init(const char *conf) { return ca_cuda_error(ca_init(conf)); }

int cudalloc_version(void) { return CUDALLOC_VERSION; }

/* The stream-ordered pair: one jump each into alloc.c (entry.h). */
cudaError_t cudalloc_malloc(void **ptr, size_t size, cudaStream_t stream) {
  return ca_entry_malloc(ptr, size, (ca_stream_t)stream, __builtin_return_address(0));
}

cudaError_t cudalloc_free(void *ptr, cudaStream_t stream) { return ca_entry_free(ptr, (ca_stream_t)stream); }

cudaError_t cudalloc_free_sync(void *ptr) { return ca_cuda_error(ca_free_sync(ptr)); }

cudaError_t cudalloc_stream_register(cudaStream_t stream, unsigned int flags) {
  return ca_cuda_error(ca_stream_created((ca_stream_t)stream, flags & cudaStreamNonBlocking));
}

cudaError_t cudalloc_stream_unregister(cudaStream_t stream) {
  CUresult rc = ca_init(NULL);
  if (!rc) ca_stream_destroyed((ca_stream_t)stream);
  return ca_cuda_error(rc);
}

cudaError_t cudalloc_host_alloc(void **ptr, size_t size, unsigned flags) {
  CUresult rc = ca_host_alloc(ptr, size, flags, __builtin_return_address(0));
  return rc == CUDA_ERROR_NOT_SUPPORTED ? cudaErrorNotSupported : ca_cuda_error(rc);
}

cudaError_t cudalloc_host_free(void *ptr) { return ca_cuda_error(ca_host_free(ptr)); }

int cudalloc_owns(const void *ptr) { return ca_owns(ptr); }

cudaError_t cudalloc_get_address_range(const void *ptr, void **base, size_t *size) {
  return ca_cuda_error(ca_address_range(ptr, base, size));
}

/* Waits for the frees still pending, as PyTorch's empty_cache does, so
 * that everything freed before the call is given back. */
static void empty_device(ca_device_t *d, void *arg) {
  (void)arg;
  ca_tcache_flush(d, NULL, false);
  if (!d->arena) ca_trace_mem(d, CA_EV_EMPTY_CACHE, 0, 0);   /* the ordinal's event, once for its arenas */
  ca_fences_wait_all(d);
  ca_fences_poll(d);
  ca_trim(d, 0);
}

cudaError_t cudalloc_empty_cache(void) {
  CUresult rc = ca_init(NULL);
  if (!rc) ca_each_device(empty_device, NULL);
  if (!rc) ca_pinned_empty_cache();
  return ca_cuda_error(rc);
}

static void check_device(ca_device_t *d, void *arg) {
  int *worst = arg;
  int rc = ca_check_device(d);
  if (rc && !*worst) *worst = rc;
}

int cudalloc_check(void) {
  int worst = 0;
  ca_each_device(check_device, &worst);
  int pinned = ca_pinned_check();
  return worst ? worst : pinned;
}

static void step_device(ca_device_t *d, void *arg) {
  if (!d->arena) ca_trace_mem(d, CA_EV_STEP, *(const uint64_t *)arg, 0);   /* once an ordinal */
  ca_fences_seal_epoch(d);
  ca_fences_poll(d);
  ca_oom_on_step(d);
}

/* A step ends: frees that completed are returned first, so that the
 * creep sample describes the step's settled state. Only cudaFree's queue
 * is sealed: a stream reuses its own queue's blocks with no event, and a
 * slow path seals the rest when it needs them. The event log numbers
 * the marks from 1: the count after this one. */
static void end_step(int source) {
  uint64_t mark = ca_step_mark();
  ca_each_device(step_device, &mark);
  ca_creep_mark(source, mark - 1);
}

void cudalloc_step(void) { end_step(CA_MARK_API); }

/* Arena k of device dev, ready and locked; NULL when cudalloc holds nothing there. */
static ca_device_t *lock_ready(int dev, int k) {
  if (dev < 0 || dev >= ca_state.ndevices) return NULL;
  ca_device_t *d = ca_arena_at(dev, k);
  if (!d) return NULL;
  ca_devlock_take(&d->lock);
  if (d->ready) return d;
  ca_devlock_release(&d->lock);
  return NULL;
}

_Static_assert(CA_SYNC_ARENAS == CA_MAX_ARENAS, "a synchronization's mark per arena");

/* Each arena marks what was freed before the synchronization, one at a
 * time (a block freed meanwhile in an arena marked already waits for the
 * next one, as a free after the call would). */
ca_sync_token_t ca_device_sync_begin(void) {
  ca_sync_token_t t = {.dev = -1};
  if (!ca_ready() || ca_state.be->get_device(&t.dev) != CUDA_SUCCESS) return (ca_sync_token_t){.dev = -1};
  bool any = false;
  for (int k = 0; k < (int)ca_config.arenas; k++) {
    ca_device_t *d = lock_ready(t.dev, k);
    if (!d) continue;
    t.seq[k] = ca_fences_sync_begin(d);
    ca_devlock_release(&d->lock);
    any = true;
  }
  return any ? t : (ca_sync_token_t){.dev = -1};
}

void ca_stream_sync_end(ca_sync_token_t t, bool ok) {
  for (int k = 0; t.dev >= 0 && k < (int)ca_config.arenas; k++) {
    ca_device_t *d = t.seq[k] ? lock_ready(t.dev, k) : NULL;
    if (!d) continue;
    ca_fences_sync_end(d, t.seq[k], ok);
    ca_devlock_release(&d->lock);
  }
}

void ca_device_sync_end(ca_sync_token_t t, bool ok) {
  ca_stream_sync_end(t, ok);
  if (ok && ca_config.step_on == CA_STEP_ON_SYNC && ca_ready()) end_step(CA_MARK_SYNC);
}

/* All the device's work is on the legacy stream (legacyq.c): waiting for
 * it is waiting for the device. */
ca_sync_token_t ca_stream_sync_begin(ca_stream_t stream) {
  if (!ca_legacyq_sync_proves(stream)) return (ca_sync_token_t){.dev = -1};
  return ca_device_sync_begin();
}

cudaError_t cudalloc_trace_dump(const char *path) {
  CUresult rc = ca_init(NULL);
  return ca_cuda_error(rc ? rc : ca_trace_dump(path));
}

cudaError_t cudalloc_get_stats(int device, cudalloc_stats_t *out) {
  if (!out) return cudaErrorInvalidValue;
  CUresult rc = ca_init(NULL);
  if (rc) return ca_cuda_error(rc);
  if (device < -1) return cudaErrorInvalidDevice;   /* only -1 names the current device */
  if (device == -1 && (rc = ca_state.be->get_device(&device))) return ca_cuda_error(rc);
  ca_device_t *d;
  /* a device cudalloc does not serve has stats all the same: zeros */
  if ((rc = ca_device_get(device, &d)) && rc != CUDA_ERROR_NOT_SUPPORTED) return ca_cuda_error(rc);
  ca_devlock_take(&d->lock);
  ca_siblings_stats(d, out);   /* every arena's, summed */
  ca_devlock_release(&d->lock);
  return cudaSuccess;
}

static void reset_peaks(ca_device_t *d, void *arg) {
  (void)arg;
#define CA_RESET_PEAK(name, doc) d->stats.name.peak = d->stats.name.current;
  CUDALLOC_STAT_BYTES(CA_RESET_PEAK)
  CUDALLOC_STAT_COUNTS(CA_RESET_PEAK)
#undef CA_RESET_PEAK
  if (!d->arena) ca_arena_reset_peak(d);
  ca_peak_reset(d);
}

void cudalloc_reset_peaks(void) {
  ca_each_device(reset_peaks, NULL);
  ca_pinned_reset_peaks();
}

/* stderr gets the lines in one write, rank-tagged (log.h): other ranks'
 * lines do not land inside the table. */
void cudalloc_print_stats(FILE *f) {
  if (f && f != stderr) {
    ca_stats_print(f);
    return;
  }
  ca_log_block_t b;
  ca_stats_print(ca_log_block_begin(&b));
  ca_log_block_end(&b);
}

void cudalloc_report(FILE *f) {
  if (!ca_ready()) return;
  if (!f) {
    ca_report_write_files();
    return;
  }
  ca_log_block_t b;
  FILE *out = f == stderr ? ca_log_block_begin(&b) : f;
  ca_report_summary(out);
  ca_report_leaks(out);
  if (f == stderr) ca_log_block_end(&b);
}

// ----------------------------------------------------------------------------
// What the program should see as free memory
// ----------------------------------------------------------------------------

/* Bytes d could give back: cached pages and whole free pages, once the
 * frees still waiting for device work are settled (a program that freed
 * with cudaFree expects to see the memory free, as the real cudaFree,
 * which waits for the device, shows it). */
static size_t reclaimable(ca_device_t *d) {
  ca_tcache_flush(d, NULL, false);
  ca_fences_wait_all(d);
  size_t bytes = d->page_cache_count * d->page;
  for (int p = 0; p < CA_POOL_COUNT; p++) {
    for (ca_segment_t *seg = d->pools[p].segments; seg; seg = seg->next) {
      for (ca_block_t *b = seg->first; b; b = b->next) {
        if (b->state != CA_FREE || b->kind != CA_MAPPED) continue;
        if (seg->classic) {
          if (!b->prev && !b->next) bytes += b->size;
          continue;
        }
        uintptr_t lo, hi;
        ca_whole_pages(b, d->page, &lo, &hi);
        if (hi > lo) bytes += hi - lo;
      }
    }
  }
  return bytes;
}

CUresult ca_mem_get_info(int dev, size_t *free_bytes, size_t *total_bytes) {
  CUresult rc = ca_init(NULL);
  if (rc) return rc;
  if (dev < 0 && (rc = ca_state.be->get_device(&dev))) return rc;
  size_t free_now = 0, total = 0, extra = 0;
  if ((rc = ca_state.be->mem_info(dev, &free_now, &total))) return rc;
  ca_device_t *d = dev >= 0 && dev < ca_state.ndevices ? __atomic_load_n(&ca_state.devices[dev], __ATOMIC_ACQUIRE) : NULL;
  if (d) {
    ca_devlock_take(&d->lock);
    extra = ca_siblings_sum(d, reclaimable);   /* every arena's */
    ca_devlock_release(&d->lock);
  }
  free_now = free_now + extra > total ? total : free_now + extra;
  if (free_bytes) *free_bytes = free_now;
  if (total_bytes) *total_bytes = total;
  return CUDA_SUCCESS;
}
