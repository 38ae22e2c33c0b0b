/* Controls of the simulated device that only tests and the shim's
 * simulated runtime use. The device itself is reached through ca_backend_sim
 * (backend.h) like any other backend.
 *
 * Settings come from the configuration (config.h): sim_devices,
 * sim_capacity_mb, sim_granularity_kb, sim_events, sim_fail, sim_fail_rate,
 * sim_seed, sim_latency. They are read when the backend starts.
 *
 * Streams: every device has a legacy default stream (NULL or 0x1), a
 * per-thread default stream (0x2) and the streams created here. The
 * simulated device runs no kernels; "work" on a stream is what events mark.
 * In sim_events:auto mode an event is complete as soon as it is recorded.
 * In sim_events:manual mode an event recorded on stream S completes only
 * when the test completes S (ca_sim_stream_complete), or when something
 * waits for it (event, stream or device synchronize: waiting is what lets
 * simulated time pass). An event recorded on the legacy default stream also
 * waits for the work recorded before it on every blocking stream of its
 * device, as the legacy stream does on a GPU; blocking and per-thread
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
 * (ca_sim_begin_capture) fails and invalidates that capture.
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

/* Completes every event recorded so far on stream (manual mode). */
void ca_sim_stream_complete(ca_stream_t stream);
/* Completes every event recorded so far on every stream of every device. */
void ca_sim_complete_all(void);
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

/* Tears the simulated devices down (every reservation, handle, stream and
 * event) so that the next init starts afresh from the configuration. */
void ca_sim_shutdown(void);

#endif /* CUDALLOC_BACKEND_SIM_H */
