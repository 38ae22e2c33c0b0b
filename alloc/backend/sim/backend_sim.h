/* Controls of the simulated device that only tests and the shim's
 * simulated runtime use. The device itself is reached through ca_backend_sim
 * (backend.h) like any other backend.
 *
 * Settings come from the configuration (config.h): sim_devices,
 * sim_capacity_mb, sim_granularity_kb, sim_events, sim_lag_ops, sim_fail,
 * sim_fail_rate, sim_seed, sim_latency, sim_pinned_mb. They are read when
 * the backend starts. docs/reliability.md says what the device enforces, and why.
 *
 * Contexts: a thread has no current context until set_device, or until
 * get_device or ca_sim_thread_init binds device 0's (the runtime's implicit
 * start of a thread). Without one, the default streams and stream creation
 * answer CUDA_ERROR_INVALID_CONTEXT.
 *
 * Streams: every device has a legacy default stream (NULL or 0x1), a
 * per-thread default stream (0x2) and the streams created here (handles
 * never reused). The simulated device runs no kernels; "work" on a stream
 * is what events mark, what ca_sim_touch says touches memory, and waits
 * for events. In sim_events:auto mode work is complete as soon as it is
 * issued. In sim_events:manual mode work issued on stream S completes only
 * when the test completes S (ca_sim_stream_complete), or when something
 * waits for it (event, stream or device synchronize: waiting is what lets
 * simulated time pass). sim_events:lag is manual mode in which every piece
 * of work also completes by itself at the end of the k-th device call after
 * the one that issued it, k drawn in [1, sim_lag_ops] from sim_seed: the
 * host runs ahead of the device, as on a GPU. Work on the legacy default
 * stream waits for the work issued before it on every blocking stream of
 * its device, as the legacy stream does on a GPU; blocking and per-thread
 * streams in turn wait for earlier legacy work. Completing a piece of work
 * completes everything it waited for. A destroyed stream's pending work
 * stays pending (and still orders the legacy stream). Switching back to
 * auto mode completes whatever is pending.
 *
 * Stricter than the driver, so that a careless core is caught: set_access
 * must cover whole mappings (several are fine, part of one is not), and a
 * mapped handle cannot be released (CUDA_ERROR_ILLEGAL_STATE). As the
 * driver: synchronizing a capturing stream (or a device with one) returns
 * CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED; an event recorded during a capture
 * returns CUDA_ERROR_CAPTURED_EVENT when queried or waited for; an event
 * query or any synchronization by a thread that a capture forbids it
 * (ca_sim_begin_capture: any thread during a global capture, the capturing
 * thread during a thread-local one) fails with
 * CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED and invalidates that capture.
 *
 * The reuse oracle (oracle.c): pending touches must not overlap a block the
 * allocator hands out (backend.h's check_handout), a host copy or fill of
 * the simulated runtime, or pages being mapped, unmapped or released.
 * Violations are printed with both call sites and counted for the process
 * (they survive ca_sim_shutdown).
 *
 * Faults: a rate for every op (op = CA_OP_COUNT) spares init, so that the
 * device always starts; each op draws from its own generator, seeded from
 * the seed and the op. ca_sim_shutdown and abandon reset every counter and
 * control; the configuration's settings apply again at the next init.
 */
#ifndef CUDALLOC_BACKEND_SIM_H
#define CUDALLOC_BACKEND_SIM_H

#include "backend.h"

/* Stream creation, as cuStreamCreate: nonblocking streams do not
 * synchronize with the legacy default stream. The stream belongs to the
 * calling thread's current device. */
CUresult ca_sim_stream_create(ca_stream_t *stream, int nonblocking);
CUresult ca_sim_stream_destroy(ca_stream_t stream);
/* 1 when stream was created non-blocking, else 0 (default streams: 0). */
int ca_sim_stream_is_nonblocking(ca_stream_t stream);

/* As cuStreamQuery: 0 when every piece of work issued on stream so far is
 * complete, else CUDA_ERROR_NOT_READY (a capture underway: refused). */
CUresult ca_sim_stream_query(ca_stream_t stream);
/* As cuStreamWaitEvent: work issued on stream from now on waits for the
 * work the event marks. */
CUresult ca_sim_stream_wait_event(ca_stream_t stream, ca_event_t event);

/* Completes every piece of work issued so far on stream (manual mode). */
void ca_sim_stream_complete(ca_stream_t stream);
/* Completes every piece of work issued so far on every stream of every device. */
void ca_sim_complete_all(void);
/* Switches when work completes (lag_ops 0 keeps the current bound). */
void ca_sim_set_events(ca_sim_events_t mode, unsigned lag_ops);
/* Switches event completion between automatic (0) and manual (1). */
void ca_sim_set_manual_events(int manual);

/* Marks stream as being captured into a graph (1, in global mode, by the
 * calling thread) or not (0). */
void ca_sim_set_capturing(ca_stream_t stream, int capturing);
/* Begins a capture of stream by the calling thread in mode, which decides
 * who may not wait or query meanwhile (as the driver: any thread during a
 * global capture, the capturing thread during a thread-local one, nobody
 * during a relaxed one; such a call fails with
 * CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED and invalidates the capture). */
void ca_sim_begin_capture(ca_stream_t stream, CUstreamCaptureMode mode);
/* Ends the capture of stream: CUDA_ERROR_STREAM_CAPTURE_INVALIDATED when a
 * forbidden wait or query broke it, else 0. */
CUresult ca_sim_end_capture(ca_stream_t stream);
/* Gives the calling thread device 0's primary context when it has no
 * context: what the runtime does on a thread's first call. */
void ca_sim_thread_init(void);

/* 1 when stream captures and a prohibited call has invalidated the capture
 * (cuStreamEndCapture then answers CUDA_ERROR_STREAM_CAPTURE_INVALIDATED). */
int ca_sim_capture_invalidated(ca_stream_t stream);

// ----------------------------------------------------------------------------
// Device work that touches memory, and the reuse oracle
// ----------------------------------------------------------------------------

/* "Work on stream reads (write 0) or writes [ptr, ptr+n) now": a kernel, a
 * copy or a fill. Pending until the stream completes up to it (at once in
 * auto mode, and on a capturing stream, which runs nothing). A range
 * outside every reservation is host memory and is not recorded; one that
 * is not all mapped returns CUDA_ERROR_ILLEGAL_ADDRESS. The site is the
 * caller (ca_sim_touch) or given (ca_sim_touch_at, for a runtime call that
 * names its own caller). */
CUresult ca_sim_touch(ca_stream_t stream, const void *ptr, size_t n, int write);
CUresult ca_sim_touch_at(ca_stream_t stream, const void *ptr, size_t n, int write, void *site);
/* Touches that are still pending. */
unsigned ca_sim_pending_touches(void);

/* The host reads (write 0) or writes [ptr, ptr+n) at site now: a violation
 * when pending work writes any of it (or, for a host write, touches it). */
void ca_sim_host_access(const void *ptr, size_t n, int write, void *site);

/* Violations the oracle found in this process, the i-th of the first few
 * (NULL past them), and forgetting them. */
uint64_t ca_sim_oracle_violations(void);
const char *ca_sim_oracle_report(unsigned i);
void ca_sim_oracle_reset(void);

/* Number of calls of an operation since the backend started, and how many
 * of them returned an error (injected, or a broken contract rule). */
uint64_t ca_sim_calls(ca_backend_op_t op);
uint64_t ca_sim_errors(ca_backend_op_t op);
/* Calls that broke a rule of the contract (misaligned, overlapping, ...). */
uint64_t ca_sim_violations(void);

/* The error an injected fault of op returns: the driver's answer to that
 * call when the device is short of memory or a launch failed. */
CUresult ca_sim_injected_error(ca_backend_op_t op);
/* Makes the k-th call of op from now fail (k >= 1) with the op's injected
 * error; k = 0 cancels. */
void ca_sim_fail_nth(ca_backend_op_t op, uint64_t k);
/* Makes every call of op (or of every op, with op = CA_OP_COUNT) fail with
 * probability p, drawn from a generator seeded with seed; p = 0 stops. */
void ca_sim_fail_rate(ca_backend_op_t op, double p, uint64_t seed);
/* Adds a busy-wait of us microseconds to every call of op. */
void ca_sim_set_latency(ca_backend_op_t op, unsigned us);

/* 1 when device dev may access the mapped byte at va (set_access named dev
 * for its mapping since it was mapped), else 0. */
int ca_sim_access(int dev, uintptr_t va);

/* Physical bytes in live handles, and how many handles are live. */
size_t ca_sim_physical_used(int dev);
int ca_sim_live_handles(int dev);
/* Bytes mapped at the moment, all reservations of dev together. */
size_t ca_sim_mapped_bytes(int dev);
/* Bytes of address space in dev's live reservations. */
size_t ca_sim_reserved_va(int dev);

/* Pinned host bytes held (host_alloc, not yet host_free), and in how many
 * allocations. */
size_t ca_sim_pinned_used(void);
size_t ca_sim_pinned_allocations(void);

/* Tears the simulated devices down (every reservation, handle, stream and
 * event) so that the next init starts afresh from the configuration. */
void ca_sim_shutdown(void);

#endif /* CUDALLOC_BACKEND_SIM_H */
