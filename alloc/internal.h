/* The core's internal interface, one header per module, and the order in
 * which they may use each other. types.h holds the shared structures (and
 * the picture of devices, pools, segments and blocks); each module's header
 * declares what its .c file offers the others.
 *
 * Dependency order, lowest first. A module (alloc/X.c with alloc/X.h)
 * includes only the headers of modules on lines above its own, so calls
 * run one way and no two modules need each other. tests/include_order.sh
 * parses this list and the #include lines of alloc/ and fails on any
 * include that goes sideways or upwards (a cycle needs one).
 *
 * include-order:
 *   line
 *   env calm tsan thread_heap
 *   rank
 *   log
 *   config jemalloc_private oom_verdict
 *   debug
 *   devlock
 *   step stackwalk symbolize pystack
 *   types
 *   streamdev
 *   bins ptrmap track streams peers qtable
 *   trace_clock
 *   trace_log
 *   trace_ring trace_buf
 *   trace
 *   blocks sitelive churn stamp arena
 *   segments fence
 *   tcache_lock
 *   tcache_layout
 *   pages tcache
 *   tcache_flush
 *   pool
 *   slack
 *   settle
 *   device
 *   legacyq
 *   pinned_chunks
 *   pinned
 *   stats check leaks holdings
 *   creep
 *   peak
 *   report
 *   demand oom entry
 *   siblings
 *   alloc api lifecycle
 *   internal
 * end-include-order
 *
 *   line       variables in cache lines of their own (what every allocation reads)
 *   env        environment variables before libc   rank    which process of a job this is
 *   calm       one word: nothing unusual is going on (the hot path's one test)
 *   log        stderr lines, rank-tagged           config  CUDALLOC_CONF
 *   types      structures, constants, ca_stat_add and CA_CALL
 *   streamdev  a stream's device, remembered per thread
 *   bins       free blocks by size (TLSF)          ptrmap  live blocks by address
 *   track      call sites                          blocks  block structs, set free, coalesce
 *   streams    stream handles, the fence's streams
 *   peers      access grants for a device and its peers
 *   qtable     stream queues by stream, and the lists a seal and a poll visit
 *   segments   classic segments                    fence   streams, queues, events
 *   pages      expandable pages, trimming          pool    take and grow
 *   churn      pages that growths keep moving out and back stay
 *   slack      waiting for pending frees before growing past the slack
 *   settle     the slow path's first rungs: a stream grows before it takes other streams' frees
 *   tcache     the per-thread front cache of small stream-ordered frees
 *   tcache_lock  its lock: a plain store for the owner, membarrier for the others
 *   tcache_layout  its private layout, shared by tcache.c and tcache_flush.c only
 *   tcache_flush  what it gives back to the core: flushes, trims, folds, a thread's exit
 *   stamp      the thread and step each allocation stamps (the leak report's)
 *   device     devices, locks, ca_ready            stats   derived statistics
 *   devlock    the device lock: a futex mutex, its uncontended take and release inline
 *   legacyq    cudaFree'd blocks in the legacy stream's queue while no other stream is used
 *   pinned_chunks  the pinned arena's extent hooks and chunks
 *   pinned     pinned host memory (cudaHostAlloc): blocks, copies in flight
 *   jemalloc_private  the private jemalloc's API (ca_je_*)
 *   step       the step count                      stackwalk  the program's stack, cached
 *   symbolize  addresses as function, file:line    pystack Python frames (track:python)
 *   check      cudalloc_check                      leaks   the leak report (text, JSON)
 *   holdings   where reserved memory is (free, holes, queues), for diagnosis
 *   report     exit and OOM reports, report files
 *   demand     reports on a signal, written by the next allocator call
 *   oom        the out-of-memory report            oom_verdict  its verdict, from figures alone
 *   trace_log  the event log's file, call-site ids trace_ring  the last N events (trace_ring)
 *   trace_buf  per-thread event buffers, writer    trace   the event log's hooks, start, dump
 *   trace_clock  the event log's clock (TSC or CLOCK_MONOTONIC) and its calibration pairs
 *   sitelive   live bytes per call site
 *   arena      a device's arenas: finding one, the ordinal-wide cap
 *   siblings   what crosses arenas: routing, squeezing a sibling short of memory, the folds
 *   creep      per-step samples, creep verdict     peak    what was live at the peaks
 *   entry      the public API's stream-ordered pair, straight into alloc.c's fronts
 *   alloc, api, lifecycle: the entry points (include/core.h, include/cudalloc.h)
 *
 * This header includes them all, for the test suites; no core file
 * includes it. */
#ifndef CUDALLOC_INTERNAL_H
#define CUDALLOC_INTERNAL_H

#include "types.h"

#include "arena.h"
#include "bins.h"
#include "blocks.h"
#include "calm.h"
#include "check.h"
#include "churn.h"
#include "creep.h"
#include "demand.h"
#include "device.h"
#include "devlock.h"
#include "entry.h"
#include "env.h"
#include "fence.h"
#include "holdings.h"
#include "leaks.h"
#include "legacyq.h"
#include "lifecycle.h"
#include "oom.h"
#include "pages.h"
#include "peak.h"
#include "peers.h"
#include "pinned.h"
#include "pinned_chunks.h"
#include "pool.h"
#include "pystack.h"
#include "ptrmap.h"
#include "rank.h"
#include "qtable.h"
#include "report.h"
#include "segments.h"
#include "settle.h"
#include "siblings.h"
#include "slack.h"
#include "sitelive.h"
#include "stamp.h"
#include "stats.h"
#include "step.h"
#include "streamdev.h"
#include "streams.h"
#include "symbolize.h"
#include "tcache.h"
#include "tcache_lock.h"
#include "trace.h"
#include "trace_buf.h"
#include "trace_clock.h"
#include "trace_log.h"
#include "trace_ring.h"
#include "track.h"
#include "stackwalk.h"

#endif /* CUDALLOC_INTERNAL_H */
