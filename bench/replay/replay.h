/* Replays an event list (trace_events.h) through cudalloc's core on the
 * simulated device, which never touches the memory it hands out: a trace
 * that peaked at 80 GiB replays in seconds on a laptop. One run replays
 * one device of the trace on a fresh simulated device of its own (the
 * devices of a program are independent allocators).
 *
 * Streams are replayed as streams: every stream of the trace is a
 * non-blocking simulated stream, an allocation is stream-ordered on its
 * stream, a stream-ordered free (PyTorch's free_requested) is reusable at
 * once on its stream and elsewhere only when the trace says its work
 * completed (free_completed), which completes the stream's work so far. */
#ifndef CUDALLOC_REPLAY_H
#define CUDALLOC_REPLAY_H

#include <stdbool.h>
#include <stdint.h>

#include "cudalloc.h"
#include "trace_events.h"

typedef struct {
  int device;                /* the trace's device to replay */
  bool expandable;           /* expandable segments, else classic */
  bool honour_empty_cache;   /* replay the program's own empty_cache calls */
  uint64_t capacity;         /* bytes of the simulated device (whole MiB) */
  bool dump_peak;            /* keep where reserved memory was at the event that set its peak */
  const char *conf;          /* appended to the replay's configuration (",key:value..."); NULL: none */
} ca_replay_opts_t;

typedef struct {
  uint64_t events;           /* events of the device walked */
  uint64_t allocs, frees, ooms;
  uint64_t unknown_frees;    /* frees of blocks the replay does not hold (their allocation failed) */
  cudalloc_stats_t stats;    /* cudalloc's statistics at the end: peaks, backend calls */
  double seconds;            /* the replay loop alone */
  char *peak_dump;           /* dump_peak: the event and ca_holdings_dump's text (free() it), or NULL */
} ca_replay_result_t;

/* One replay; 0, or -1 with err set when cudalloc could not start. */
int ca_replay_run(const ca_trace_t *t, const ca_replay_opts_t *o, ca_replay_result_t *r, char *err, size_t cap);

/* The smallest capacity (a multiple of the device's 2 MiB page) at which the
 * device's events replay without an out-of-memory, by bisection between the
 * peak live bytes and the peak reserved of an ample run (more memory never
 * makes an allocator fail, so the answer is a threshold). *runs: replays made. */
int ca_replay_min_capacity(const ca_trace_t *t, ca_replay_opts_t o, uint64_t *capacity, unsigned *runs, char *err,
                           size_t cap);

/* A capacity no replay of device dev can exhaust: twice the largest of the
 * trace's live bytes and its allocator's reserved bytes, at least 1 GiB. */
uint64_t ca_replay_ample_capacity(const ca_trace_t *t, int dev);

#endif
