/* Start, shutdown, fork, exit, device reset, the streams the program
 * creates and destroys, and graph captures. */
#include <stdlib.h>
#include <string.h>

#include "arena.h"
#include "calm.h"
#include "core.h"
#include "demand.h"
#include "device.h"
#include "fence.h"
#include "legacyq.h"
#include "lifecycle.h"
#include "log.h"
#include "oom.h"
#include "peak.h"
#include "peers.h"
#include "pinned.h"
#include "rank.h"
#include "report.h"
#include "streamdev.h"
#include "streams.h"
#include "tcache.h"
#include "trace.h"
#include "track.h"

/* Where ca_init stands is ca_state.init (ca_ready() reads it). */
static pthread_mutex_t init_lock = PTHREAD_MUTEX_INITIALIZER;
static CUresult init_result;

static bool config_loaded;   /* guarded by init_lock */

/* CUDALLOC_CONF is read (and warned about) once per life of the allocator;
 * an explicit conf string replaces it. */
static void load_config_locked(const char *conf) {
  if (conf || !config_loaded) ca_config_load(conf);
  config_loaded = true;
}

/* Once per process, at the core's first successful start (a fork child
 * inherits both):
 * - the exit report is armed here, not by the preload shim, so that a
 *   program linked with libcudalloc.a gets it as a preloaded one does.
 *   atexit handlers run before the ELF destructors, so the driver (libcuda,
 *   whose destructor tears it down) is still there; and handlers registered
 *   earlier (a CUDA program's module registration, made by its
 *   constructors) run after ours;
 * - a PyTorch allocator setting in the environment is said not to apply. */
static pthread_once_t first_start_once = PTHREAD_ONCE_INIT;
static void first_start(void) {
  atexit(ca_exit);
  ca_log_block_t b;
  ca_config_note_pytorch_env(ca_log_block_begin(&b));
  ca_log_block_end(&b);
}

static CUresult start(const char *conf) {
  load_config_locked(conf);
  const ca_backend_t *be = ca_backend_find(ca_config.backend);
  if (!be) return CUDA_ERROR_NOT_INITIALIZED;   /* the parser admits only known names */
  CUresult rc = be->init(&ca_config.sim);
  int n = 0;
  if (!rc) rc = be->device_count(&n);
  if (!rc && n <= 0) rc = CUDA_ERROR_NO_DEVICE;
  if (rc) return rc;
  ca_state.ndevices = n > CA_MAX_DEVICES ? CA_MAX_DEVICES : n;
  ca_state.handout_watch = ca_backend_handout_watch(be);
  ca_state.be = be;
  pthread_once(&first_start_once, first_start);
  ca_report_check_job();
  ca_demand_arm(ca_config.report_signal);
  ca_trace_start();
  return CUDA_SUCCESS;
}

CUresult ca_init(const char *conf) {
  int state = __atomic_load_n(&ca_state.init, __ATOMIC_ACQUIRE);
  if (state != CA_INIT_NONE) return state == CA_INIT_OK ? CUDA_SUCCESS : init_result;
  pthread_mutex_lock(&init_lock);
  if (ca_state.init == CA_INIT_NONE) {
    init_result = start(conf);
    __atomic_store_n(&ca_state.init, init_result ? CA_INIT_FAILED : CA_INIT_OK, __ATOMIC_RELEASE);
    if (!init_result) ca_unstir(CA_STIR_START);   /* after: calm means started (calm.h) */
  }
  pthread_mutex_unlock(&init_lock);
  return init_result;
}

bool ca_backend_is_simulated(void) {
  if (ca_ready()) return ca_state.be->simulated;
  pthread_mutex_lock(&init_lock);
  load_config_locked(NULL);
  const ca_backend_t *be = ca_backend_find(ca_config.backend);
  pthread_mutex_unlock(&init_lock);
  return be && be->simulated;
}

int ca_device_current(void) {
  int dev = 0;
  if (!ca_ready() || ca_state.be->get_device(&dev) != CUDA_SUCCESS) dev = 0;
  return dev;
}

/* Forgets every device; with call_backend, gives their memory back. */
/* Teardown unmaps and releases pages that device work may still touch (a
 * kernel the program left running): wait for the device first, as the
 * driver's own reset and context destruction do, trying again when the
 * wait fails (the teardown's own calls are tried as often). Never during a
 * capture. */
static void settle_then_teardown(ca_device_t *d) {
  if (d->ready) ca_tcache_flush(d, NULL, true);   /* the threads forget d's blocks first */
  if (d->ready && __atomic_load_n(&ca_state.captures, __ATOMIC_ACQUIRE) == 0 &&
      CA_CALL_TRYING(d, backend_sync, ca_state.be->device_sync(d->ordinal)))
    ca_log("device %d: the device could not be synchronized before its memory is given back", d->ordinal);
  ca_peak_device_reset(d);
  ca_device_teardown(d, true);
}

static void drop_devices(bool call_backend) {
  for (int i = 0; i < CA_MAX_SLOTS; i++) {
    ca_device_t *d = ca_state.devices[i];
    if (!d) continue;
    if (call_backend) {
      settle_then_teardown(d);
      ca_devlock_destroy(&d->lock);
      free(d);
    }
    ca_state.devices[i] = NULL;
  }
}

static void no_op(ca_device_t *d, void *arg) { (void)d, (void)arg; }

/* Every hook runs under its device's lock: once each lock has gone round,
 * no hook is still appending, and the log can be closed whole. */
static void close_trace(void) {
  ca_trace_pause();
  ca_each_device(no_op, NULL);
  ca_trace_stop();
}

static void flush_caches(ca_device_t *d, void *arg) {
  (void)arg;
  ca_tcache_flush(d, NULL, false);
}

void cudalloc_shutdown(void) {
  pthread_mutex_lock(&init_lock);
  ca_stir(CA_STIR_START);   /* before: the hot path looks at ca_ready() from now on */
  if (ca_state.init == CA_INIT_OK) {
    close_trace();
    ca_each_device(flush_caches, NULL);   /* what the front caches hold was freed: no leak */
    ca_report_shutdown();   /* live blocks are leaks: reported, not freed */
    ca_pinned_shutdown();
    drop_devices(true);
    ca_state.be->shutdown();
  }
  ca_demand_arm(0);
  ca_peak_forget(false);
  ca_track_forget();
  ca_oom_forget(false);
  ca_streams_forget(false);
  ca_streamdev_forget();
  ca_legacyq_reset();
  config_loaded = false;
  memset(&ca_state, 0, sizeof ca_state);
#ifdef CA_TESTING
  memset(&ca_debug, 0, sizeof ca_debug);
#endif
  __atomic_store_n(&ca_state.init, CA_INIT_NONE, __ATOMIC_RELEASE);
  ca_unstir(CA_STIR_EXIT | CA_STIR_CAPTURE);   /* the memset cleared exited and the captures */
  pthread_mutex_unlock(&init_lock);
}

/* In a fork child, the parent's devices: kept reachable, never touched. */
static ca_device_t *volatile abandoned[CA_MAX_SLOTS];

void ca_fork_child(void) {
  /* Another thread may have held a lock at fork(): touch none of them.
   * The parent's device state is not ours to use: keep it reachable (so
   * that it is not reported as a leak) but never touch it again. */
  ca_stir(CA_STIR_START);
  for (int i = 0; i < CA_MAX_SLOTS; i++) abandoned[i] = ca_state.devices[i];
  if (ca_state.be) ca_state.be->abandon();
  ca_pinned_fork_child();
  ca_trace_fork_child();
  drop_devices(false);
  ca_oom_forget(true);
  ca_peak_forget(true);
  ca_tcache_forget_after_fork();
  ca_streams_forget(true);
  ca_streamdev_forget();
  ca_legacyq_reset();
  memset(&ca_state, 0, sizeof ca_state);
  pthread_mutex_t fresh = PTHREAD_MUTEX_INITIALIZER;
  init_lock = fresh;
  __atomic_store_n(&ca_state.init, CA_INIT_NONE, __ATOMIC_RELEASE);
  ca_unstir(CA_STIR_EXIT | CA_STIR_CAPTURE);   /* the memset cleared exited and the captures */
}

/* Process exit: the summary and reports, written while the driver is still
 * there; then no further device call. */
void ca_exit(void) {
  if (!ca_ready() || __atomic_load_n(&ca_state.exited, __ATOMIC_ACQUIRE)) return;
  /* The program's own output first: stdout into a pipe is fully buffered,
   * and exit() would flush it only after this handler has run. */
  fflush(NULL);
  ca_each_device(flush_caches, NULL);   /* cached blocks are no leaks */
  if (!ca_config.quiet && (ca_config.summary == CA_SUMMARY_ALL || ca_rank_is_first())) {
    ca_log_block_t b;   /* one write: the summaries of a job's ranks do not interleave */
    ca_report_summary(ca_log_block_begin(&b));
    ca_log_block_end(&b);
  }
  ca_report_write_files();
  close_trace();           /* before the leak report, which may end the process */
  ca_report_exit_leaks();   /* may end the process with leak_exit_code */
  /* From here on the driver may be gone: no further device call. */
  ca_stir(CA_STIR_EXIT);
  __atomic_store_n(&ca_state.exited, true, __ATOMIC_RELEASE);
}

CUresult ca_device_reset(int dev) {
  if (!ca_ready()) return CUDA_SUCCESS;
  if (dev < 0 || dev >= ca_state.ndevices) return CUDA_ERROR_INVALID_DEVICE;
  ca_streamdev_forget();   /* the device's streams are gone with it */
  ca_streams_drop_nonblocking(dev, NULL);
  for (int k = 0; k < (int)ca_config.arenas; k++) {   /* every arena, one at a time */
    ca_device_t *d = ca_arena_at(dev, k);
    if (!d) continue;
    ca_devlock_take(&d->lock);
    if (d->ready) settle_then_teardown(d);
    ca_devlock_release(&d->lock);
  }
  return CUDA_SUCCESS;
}

// ----------------------------------------------------------------------------
// Streams (what the core knows of them is streams.c's)
// ----------------------------------------------------------------------------

CUresult ca_stream_created(ca_stream_t stream, bool nonblocking) {
  CUresult rc = ca_init(NULL);
  if (rc || ca_stream_is_default(stream)) return rc;
  ca_legacyq_end();   /* work on it is not ordered by the legacy stream */
  int dev;
  ca_device_t *d;
  ca_streamdev_forget();   /* a new stream may reuse the value of one destroyed unseen */
  rc = ca_state.be->stream_device(stream, &dev);
  if (rc == CUDA_ERROR_INVALID_HANDLE || rc == CUDA_ERROR_NOT_SUPPORTED) return rc;
  if (!nonblocking) return CUDA_SUCCESS;   /* the legacy stream's event covers it */
  if (rc == CUDA_SUCCESS && ca_device_get(dev, &d) == CUDA_SUCCESS) {
    ca_streams_note_nonblocking(dev, stream);   /* first: an arena made from now on copies it */
    for (int k = 0; k < (int)ca_config.arenas; k++) {   /* every arena's epoch fences it (a later one copies it) */
      ca_device_t *a = ca_arena_at(dev, k);
      if (!a) continue;
      ca_devlock_take(&a->lock);
      /* Only a ready one: an arena made but not set up yet copies the
       * registry once ready, and a destruction skips it till then (it
       * visits ready devices), so that a stream registered here would
       * outlive its destruction there and fail every epoch fence. */
      if (a->ready) ca_stream_register_on(a, stream);
      ca_devlock_release(&a->lock);
    }
  } else {
    ca_stream_defer(stream);   /* a transient failure: learned at a later fence */
  }
  return CUDA_SUCCESS;
}

/* The front caches' blocks freed on it go to its queue first, to wait for
 * its last work with the rest. */
static void stream_gone(ca_device_t *d, void *stream) {
  ca_tcache_flush(d, stream, false);
  ca_queue_stream_gone(d, stream);
}

void ca_stream_used(ca_stream_t stream) { ca_legacyq_saw(stream); }

void ca_stream_destroyed(ca_stream_t stream) {
  if (ca_stream_is_default(stream)) return;
  ca_stream_forget_deferred(stream);
  ca_streams_drop_nonblocking(-1, stream);   /* first: an arena made from now on does not copy it */
  ca_each_device(stream_gone, stream);
  ca_streamdev_forget();   /* last: the flushes above ask about the stream */
}

// ----------------------------------------------------------------------------
// Captures
// ----------------------------------------------------------------------------

/* Frees held during the capture now wait like cudaFree's. */
static void release_held(ca_device_t *d, void *arg) {
  (void)arg;
  ca_queue_open_to_epoch(d, &d->held);
}

/* Only a stream other than the legacy one captures: the legacy queue's
 * mode ends, without a synchronization now that a capture is underway. */
static bool capturing(void) { return __atomic_load_n(&ca_state.captures, __ATOMIC_ACQUIRE) > 0; }

void ca_capture_begin(void) {
  __atomic_add_fetch(&ca_state.captures, 1, __ATOMIC_ACQ_REL);
  if (!CA_DEBUG(capture_leaves_calm)) ca_stir(CA_STIR_CAPTURE);   /* the front cache's inline tries stop */
  ca_legacyq_end();
}

void ca_capture_end(void) {
  int n = __atomic_load_n(&ca_state.captures, __ATOMIC_ACQUIRE);
  do {   /* an end without a begin we saw leaves the count at zero */
    if (n <= 0) return;
  } while (!__atomic_compare_exchange_n(&ca_state.captures, &n, n - 1, false, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE));
  if (n == 1) {
    ca_unstir_unless(CA_STIR_CAPTURE, capturing);
    ca_each_device(release_held, NULL);
  }
}

int *const ca_capture_count = &ca_state.captures;

/* ca_stream_capturing's call once a capture is underway. */
bool ca_stream_capturing_asked(ca_stream_t stream) {
  if (!ca_ready()) return false;
  int c = 0;
  /* An error (the legacy stream while a blocking stream captures) means
   * the driver must decide: treat it as capturing. */
  return ca_state.be->is_capturing(stream, &c) != CUDA_SUCCESS || c;
}

// ----------------------------------------------------------------------------
// Peer access (peers.c grants it)
// ----------------------------------------------------------------------------

/* Every arena of peer: each maps its own pages. */
CUresult ca_peer_access_enabled(int dev, int peer) {
  CUresult rc = ca_init(NULL);
  ca_device_t *first;
  if (rc) return rc;
  if (dev < 0 || dev >= ca_state.ndevices || dev == peer) return CUDA_ERROR_INVALID_DEVICE;
  if ((rc = ca_device_get(peer, &first))) return rc;
  ca_legacyq_end();   /* dev's kernels on peer's memory are not in peer's legacy FIFO */
  __atomic_or_fetch(&ca_state.peers[peer], 1ull << dev, __ATOMIC_ACQ_REL);   /* for arenas made later */
  for (int k = 0; k < (int)ca_config.arenas; k++) {
    ca_device_t *d = ca_arena_at(peer, k);
    if (!d) continue;
    CUresult one = CUDA_SUCCESS;
    ca_devlock_take(&d->lock);
    bool known = d->peers >> dev & 1;
    d->peers |= 1ull << dev;   /* later maps grant it, even if a grant below fails */
    if (!known && d->ready) one = ca_grant_peer(d, dev);
    ca_devlock_release(&d->lock);
    if (one) ca_log("device %d: cannot grant device %d access to the memory mapped so far (error %d)", peer, dev, (int)one);
    if (!rc) rc = one;
  }
  return rc;
}
