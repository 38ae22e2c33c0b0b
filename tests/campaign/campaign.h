/* The fault campaign: one run is a seeded alloc/free workload on a small
 * simulated device, in which the k-th call of one backend operation fails.
 * Each run happens in a forked child, so that a crash is an outcome, not
 * the end of the campaign. After the workload the child frees everything,
 * lets the device finish, empties the cache and resets the device, and
 * reports what it saw:
 *
 *   absorbed   the fault happened and no more calls failed than in the same
 *              workload without it (a fallback or a retry took it)
 *   surfaced   more calls failed than without the fault, each with the error
 *              a CUDA user expects for it
 *   unreached  the workload made fewer than k calls of the operation
 *   wrong      a call failed with another error, or a free failed
 *   check      cudalloc_check() found a broken invariant
 *   leak       handles, mappings or reservations were left behind
 *   oracle     the simulated device saw a block handed out while device
 *              work could still touch it (every block is written by a
 *              "kernel" on its stream, pending until the lagging device
 *              gets there)
 *   crash      the child died (signal, abort, sanitizer)
 *
 * Used by tests/campaign/campaign_main.c (make campaign: the whole table)
 * and tests/test_campaign.c (a short slice in make test). */
#ifndef CUDALLOC_CAMPAIGN_H
#define CUDALLOC_CAMPAIGN_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include "backend_sim.h"
#include "core.h"
#include "cudalloc.h"

typedef enum {
  OUT_ABSORBED, OUT_SURFACED, OUT_UNREACHED, OUT_WRONG, OUT_CHECK, OUT_LEAK, OUT_ORACLE, OUT_CRASH,
  OUT_COUNT
} campaign_outcome_t;

static const char *const campaign_outcome_names[OUT_COUNT] = {
    "absorbed", "surfaced", "unreached", "wrong", "check", "leak", "oracle", "crash"};

/* Outcomes that are defects. */
static inline bool campaign_outcome_bad(campaign_outcome_t o) { return o >= OUT_WRONG; }

typedef struct campaign_run_s {
  ca_backend_op_t op;
  unsigned k;           /* the k-th call of op fails; 0: none (the baseline) */
  bool classic;         /* expandable_segments:false */
  bool reset;           /* the workload resets the device halfway */
  uint64_t seed;
  const char *extra;    /* more CUDALLOC_CONF items, or NULL */
  /* tests of the campaign itself: break a guard before the workload, or
   * the state after it */
  void (*prepare)(void);
  void (*sabotage)(void);
} campaign_run_t;

#define CAMPAIGN_SLOTS 32
#define CAMPAIGN_OPS 600

typedef struct campaign_state_s {
  void *p[CAMPAIGN_SLOTS];
  size_t size[CAMPAIGN_SLOTS];
  int stream[CAMPAIGN_SLOTS];
  cudaStream_t streams[3];
  uint64_t rng;
  cudaError_t expected;   /* the runtime's name of the injected error */
  int failed_calls, wrong;
  bool capturing;         /* streams[1] is being captured into a graph */
  char why[160];
} campaign_state_t;

static inline uint64_t campaign_rng(uint64_t *s) {
  uint64_t z = (*s += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

static inline size_t campaign_size(campaign_state_t *st) {
  uint64_t r = campaign_rng(&st->rng);
  switch (r % 4) {
  case 0: return 1 + (r >> 8) % 4096;
  case 1: return 1 + (r >> 8) % (512u << 10);
  case 2: return (1u << 20) + (r >> 8) % (3u << 20);
  default: return (4u << 20) + (r >> 8) % (4u << 20);
  }
}

/* A failed allocation is right when it says out of memory or names the
 * injected error; a free never fails for a fault. */
static inline void campaign_note(campaign_state_t *st, cudaError_t err, bool is_free, const char *what) {
  if (err == cudaSuccess) return;
  st->failed_calls++;
  if (!is_free && (err == cudaErrorMemoryAllocation || err == st->expected)) return;
  if (!st->wrong) snprintf(st->why, sizeof st->why, "%s failed with %d", what, (int)err);
  st->wrong++;
}

static inline void campaign_free(campaign_state_t *st, int k, bool sync) {
  if (!st->p[k]) return;
  cudaError_t err = sync ? cudalloc_free_sync(st->p[k]) : cudalloc_free(st->p[k], st->streams[st->stream[k]]);
  campaign_note(st, err, true, sync ? "free_sync" : "free");
  st->p[k] = NULL;
}

/* The program's two streams (a blocking and a non-blocking one), made as
 * the shim sees them made; again after a device reset, which destroys
 * them. false when the device refused. */
static inline bool campaign_new_streams(campaign_state_t *st, bool again) {
  for (int i = 1; again && i < 3; i++) {
    ca_stream_destroyed((ca_stream_t)st->streams[i]);
    ca_sim_stream_destroy((ca_stream_t)st->streams[i]);
  }
  st->streams[0] = 0;
  if (ca_sim_stream_create((ca_stream_t *)&st->streams[1], 0) || ca_sim_stream_create((ca_stream_t *)&st->streams[2], 1))
    return false;
  ca_stream_created((ca_stream_t)st->streams[2], true);
  return true;
}

/* A graph capture on streams[1] begins or ends, as the shim reports it. */
static inline void campaign_capture(campaign_state_t *st, bool on) {
  if (on == st->capturing) return;
  ca_sim_set_capturing(st->streams[1], on);
  if (on) ca_capture_begin();
  else ca_capture_end();
  st->capturing = on;
}

static inline void campaign_workload(campaign_state_t *st, const campaign_run_t *run) {
  for (int i = 0; i < CAMPAIGN_OPS; i++) {
    uint64_t r = campaign_rng(&st->rng);
    int k = (int)(r % CAMPAIGN_SLOTS);
    if (run->reset && i == CAMPAIGN_OPS / 2) {
      /* cudaDeviceReset: every block is forgotten by the program too (and
       * no capture may be underway: a reset would end it) */
      campaign_capture(st, false);
      campaign_note(st, ca_cuda_error(ca_device_reset(0)), false, "device reset");
      memset(st->p, 0, sizeof st->p);
      campaign_new_streams(st, true);   /* a reset destroys the program's streams too */
    }
    switch ((r >> 8) % 9) {
    case 0: case 1: case 2:
      if (!st->p[k]) {
        st->size[k] = campaign_size(st);
        st->stream[k] = (int)((r >> 16) % 3);
        bool sync = (r >> 24) % 4 == 0;   /* cudaMalloc: usable by any stream */
        CUresult rc = ca_malloc(&st->p[k], st->size[k], (ca_stream_t)st->streams[st->stream[k]],
                                sync ? CA_ALLOC_SYNC : CA_ALLOC_ASYNC, NULL);
        if (rc != CUDA_SUCCESS) {
          campaign_note(st, ca_cuda_error(rc), false, "malloc");
          st->p[k] = NULL;
        } else {
          /* a kernel on the block's stream writes it: pending device work
           * that the reuse oracle watches until the stream gets there */
          ca_sim_touch((ca_stream_t)st->streams[st->stream[k]], st->p[k], st->size[k], 1);
        }
      }
      break;
    case 3: case 4: campaign_free(st, k, false); break;
    case 5: campaign_free(st, k, true); break;
    case 6: ca_sim_stream_complete(st->streams[(r >> 16) % 3]); break;
    case 7: cudalloc_step(); break;
    default: campaign_capture(st, !st->capturing); break;
    }
  }
}

/* Where the child says why a run went wrong: the campaign's stderr. The
 * allocator's own diagnostics (out-of-memory reports, refused frees) are
 * expected here and go to /dev/null. */
static FILE *campaign_err;
/* Failed calls of the child's workload, shared with the parent. */
static int *campaign_failed;

/* The child: returns the outcome as its exit status. */
static inline int campaign_child(const campaign_run_t *run) {
  int keep = dup(2), null = open("/dev/null", O_WRONLY);
  if (keep >= 0 && null >= 0) {
    dup2(null, 2);
    campaign_err = fdopen(keep, "w");
  }
  if (!campaign_err) campaign_err = stderr;
  char conf[512];
  snprintf(conf, sizeof conf,
           "backend:sim,sim_capacity_mb:32,sim_granularity_kb:256,sim_events:lag,sim_lag_ops:400,quiet:true,track:off,"
           "oom_report:off,expandable_segments:%s%s%s",   /* out-of-memory is an expected outcome: no report files */
           run->classic ? "false" : "true", run->extra ? "," : "", run->extra ? run->extra : "");
  if (cudalloc_init(conf) != cudaSuccess) return OUT_WRONG;
  campaign_state_t st = {.rng = run->seed};
  st.expected = ca_cuda_error(ca_sim_injected_error(run->op));
  ca_sim_thread_init();   /* the runtime's implicit start: a current context */
  if (!campaign_new_streams(&st, false)) return OUT_WRONG;
  if (run->prepare) run->prepare();
  uint64_t before = ca_sim_calls(run->op);
  ca_sim_fail_nth(run->op, run->k);   /* k = 0: the baseline, no fault */
  campaign_workload(&st, run);
  bool reached = ca_sim_calls(run->op) >= before + run->k;
  if (campaign_failed) *campaign_failed = st.failed_calls;
  ca_sim_fail_nth(run->op, 0);
  if (run->sabotage) run->sabotage();
  campaign_capture(&st, false);
  for (int k = 0; k < CAMPAIGN_SLOTS; k++) campaign_free(&st, k, true);
  cudalloc_step();
  ca_sim_complete_all();
  cudalloc_empty_cache();
  if (ca_sim_oracle_violations() != 0) {
    fprintf(campaign_err, "campaign: %s@%u %s%s: the reuse oracle: %s\n", ca_backend_op_name(run->op), run->k,
            run->classic ? "classic" : "expandable", run->reset ? " reset" : "", ca_sim_oracle_report(0));
    return OUT_ORACLE;
  }
  if (cudalloc_check() != 0) {
    fprintf(campaign_err, "campaign: %s@%u %s%s: cudalloc_check failed\n", ca_backend_op_name(run->op), run->k,
            run->classic ? "classic" : "expandable", run->reset ? " reset" : "");
    return OUT_CHECK;
  }
  bool leak = ca_sim_live_handles(0) != 0 || ca_sim_mapped_bytes(0) != 0;
  if (ca_device_reset(0) != CUDA_SUCCESS || ca_sim_reserved_va(0) != 0 || ca_sim_live_handles(0) != 0) leak = true;
  if (st.wrong) {
    fprintf(campaign_err, "campaign: %s@%u %s%s: %s\n", ca_backend_op_name(run->op), run->k,
            run->classic ? "classic" : "expandable", run->reset ? " reset" : "", st.why);
    return OUT_WRONG;
  }
  if (leak) {
    fprintf(campaign_err, "campaign: %s@%u %s%s: left %d handles, %zu mapped, %zu reserved\n",
            ca_backend_op_name(run->op), run->k, run->classic ? "classic" : "expandable",
            run->reset ? " reset" : "", ca_sim_live_handles(0), ca_sim_mapped_bytes(0), ca_sim_reserved_va(0));
    return OUT_LEAK;
  }
  if (!reached) return OUT_UNREACHED;
  return OUT_SURFACED;   /* campaign_run compares with the baseline */
}

/* Runs one case in a child process and returns its outcome; *failed: how
 * many of its calls failed (or -1 when it crashed). */
static inline campaign_outcome_t campaign_fork(const campaign_run_t *run, int *failed) {
  if (!campaign_failed) {
    void *m = mmap(NULL, sizeof *campaign_failed, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    campaign_failed = m == MAP_FAILED ? NULL : m;
  }
  if (campaign_failed) *campaign_failed = -1;
  fflush(NULL);
  pid_t pid = fork();
  if (pid < 0) return OUT_CRASH;
  if (pid == 0) {
    int rc = campaign_child(run);
    if (campaign_err) fflush(campaign_err);
    _exit(rc);
  }
  int status = 0;
  *failed = -1;
  if (waitpid(pid, &status, 0) != pid) return OUT_CRASH;
  if (!WIFEXITED(status) || WEXITSTATUS(status) >= OUT_COUNT) return OUT_CRASH;
  if (campaign_failed) *failed = *campaign_failed;
  return (campaign_outcome_t)WEXITSTATUS(status);
}

/* One case, judged against the same workload without the fault. */
static inline campaign_outcome_t campaign_run(const campaign_run_t *run) {
  int failed, baseline;
  campaign_outcome_t o = campaign_fork(run, &failed);
  if (o != OUT_SURFACED) return o;
  campaign_run_t clean = *run;
  clean.k = 0;
  if (campaign_fork(&clean, &baseline) != OUT_SURFACED && baseline < 0) return OUT_CRASH;
  return failed > baseline ? OUT_SURFACED : OUT_ABSORBED;
}

#endif /* CUDALLOC_CAMPAIGN_H */
