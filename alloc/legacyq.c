/* The legacy queue: zero driver calls for cudaFree'd memory in a
 * single-stream program.
 *
 * cudaFree promises that a freed block is reused only once all device work
 * issued before the free has completed, and cudalloc keeps that promise
 * with an event on the legacy stream (and one on each non-blocking stream)
 * that must be recorded and queried before the block goes back to the pool.
 * While the program has used no stream but the legacy one, every piece of
 * work on the device is in one FIFO: whatever uses a block next is issued
 * on the legacy stream after the free, so it cannot start before the work
 * that used the block last. So, in that mode, a cudaFree'd block waits in
 * the legacy stream's queue, and an allocation that is not stream-ordered
 * (cudaMalloc) takes blocks from that queue too, as an allocation ordered
 * on the legacy stream: no event at all.
 *
 * The mode holds only while nothing else can run work on the device:
 *   - a stream is created (the shim reports every creation, runtime and
 *     driver), or a handle other than the legacy one reaches cudalloc in an
 *     allocation, a free, an async copy, a synchronization or a runtime
 *     launch (a stream made before the preload or through a path not
 *     intercepted, cudaStreamPerThread, the per-thread copies and launches
 *     cudaMemcpy_ptds and cudaLaunchKernel_ptsz);
 *   - a second host thread allocates, frees, copies or synchronizes: with
 *     --default-stream per-thread each thread's stream 0 is a stream of its
 *     own, which the calls cudaMalloc and cudaFree do not name;
 *   - another device may touch the memory (peer access), or a capture
 *     begins (only a stream other than the legacy one can capture).
 * Then the mode ends for good: the legacy queue's open blocks go under
 * cudaFree's fence (the epoch), and each device is synchronized once,
 * which proves complete the earlier work on the blocks that cudaMalloc took
 * from that queue: the program may now use them on the new stream.
 *
 * While it holds, a synchronization of the legacy stream (or a copy to the
 * host, which waits for it) proves complete all earlier work, as one of the
 * device does (ca_legacyq_sync_proves).
 *
 * What this cannot see: work issued where the shim is not (driver-API
 * launches, a statically linked runtime) on a stream whose handle never
 * reached cudalloc, before the mode ends. legacy_queue:off keeps cudaFree's
 * events for such programs (docs/configuration.md). */
#include "legacyq.h"

#include "core.h"

#include "device.h"
#include "fence.h"

static bool vouched;          /* atomic: the shim sees every stream the program creates */
uint64_t ca_legacyq_owner;    /* atomic: the tag of the one thread seen, 0 none yet */
__thread uint64_t ca_legacyq_my_tag;
static uint64_t next_tag;     /* atomic */

static uint64_t my_tag(void) {
  if (!ca_legacyq_my_tag) ca_legacyq_my_tag = __atomic_add_fetch(&next_tag, 1, __ATOMIC_RELAXED);
  return ca_legacyq_my_tag;
}

/* auto needs the shim's word: linked as a library (libcudalloc.a, or the
 * shared one dlopen'ed with local scope, as PyTorch's pluggable allocator
 * is) cudalloc hears of no stream the program creates with the runtime. */
static bool available(void) {
  return ca_config.legacy_queue == CA_LEGACYQ_ON ||
         (ca_config.legacy_queue == CA_LEGACYQ_AUTO && __atomic_load_n(&vouched, __ATOMIC_ACQUIRE));
}

void ca_streams_all_seen(void) { __atomic_store_n(&vouched, true, __ATOMIC_RELEASE); }

static bool active(void) { return available() && !ca_legacyq_is_over(); }

static bool is_legacy(ca_stream_t s) { return s == NULL || s == CA_STREAM_LEGACY; }

/* The mode's common case (its one thread on the legacy stream) was
 * answered inline (ca_legacyq_saw's ca_legacyq_owners_own). */
void ca_legacyq_saw_slow(ca_stream_t stream) {
  if (!available()) {   /* off: the hot path's test says so from now on */
    if (ca_ready()) ca_unstir(CA_STIR_LEGACYQ);
    return;
  }
  if (!active()) return;
  if (!is_legacy(stream)) {
    ca_legacyq_end();
    return;
  }
  uint64_t me = my_tag(), seen = __atomic_load_n(&ca_legacyq_owner, __ATOMIC_ACQUIRE);
  if (seen == me) return;
  if (!seen &&
      __atomic_compare_exchange_n(&ca_legacyq_owner, &seen, me, false, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE))
    return;
  if (seen != me) ca_legacyq_end();
}

ca_stream_t ca_legacyq_alloc_stream_other(bool ordered, ca_stream_t stream) {
  ca_legacyq_saw(ordered ? stream : CA_STREAM_LEGACY);
  if (ordered) return ca_stream_normal(stream);
  return active() ? CA_STREAM_LEGACY : NULL;
}

/* Read under d's lock, as ca_legacyq_end moves the queue's blocks under
 * it: a block filed here is either moved by the end or filed after it. */
ca_queue_t *ca_legacyq_free_queue(ca_device_t *d) {
  return active() ? ca_queue_find(d, CA_STREAM_LEGACY, true) : NULL;
}

/* The legacy queue's open blocks wait like cudaFree's; then every open
 * batch waits for the synchronization below (none during a capture). */
static uint64_t end_begin(ca_device_t *d) {
  ca_queue_t *q = ca_queue_find(d, CA_STREAM_LEGACY, false);
  if (q) ca_queue_open_to_epoch(d, q);
  return ca_fences_sync_begin(d);
}

void ca_legacyq_end(void) {
  /* the planted fault: the mode outlives what breaks its FIFO */
  if (CA_DEBUG(legacyq_outlive_streams)) return;
  if (!available() || !(ca_unstir(CA_STIR_LEGACYQ) & CA_STIR_LEGACYQ))   /* over already */
    return;
  if (!ca_ready()) return;
  for (int i = 0; i < CA_MAX_SLOTS; i++) {   /* every arena of each device */
    ca_device_t *d = __atomic_load_n(&ca_state.devices[i], __ATOMIC_ACQUIRE);
    if (!d) continue;
    ca_devlock_take(&d->lock);
    bool ready = d->ready;
    uint64_t token = ready ? end_begin(d) : 0;   /* 0: nothing open to file */
    ca_devlock_release(&d->lock);
    /* even with no queue to file: the live blocks cudaMalloc took from the
     * legacy queue need it. Never during a capture, which it would break. */
    if (!ready || __atomic_load_n(&ca_state.captures, __ATOMIC_ACQUIRE) > 0) continue;
    bool ok = CA_CALL(d, backend_sync, ca_state.be->device_sync(d->ordinal)) == CUDA_SUCCESS;
    if (!token) continue;
    ca_devlock_take(&d->lock);
    if (d->ready) ca_fences_sync_end(d, token, ok);
    ca_devlock_release(&d->lock);
  }
}

bool ca_legacyq_sync_proves(ca_stream_t stream) {
  ca_legacyq_saw(stream);   /* another thread's stream 0 may be its own */
  return is_legacy(stream) && active();
}

void ca_legacyq_reset(void) {
  ca_stir(CA_STIR_LEGACYQ);
  __atomic_store_n(&ca_legacyq_owner, 0, __ATOMIC_RELEASE);
}
