/* Configuration: CUDALLOC_CONF=key:value,key:value, parsed in one place.
 *
 * Key names follow PYTORCH_CUDA_ALLOC_CONF where the meaning is the same.
 * Parsing never allocates and never aborts: an unknown key or a bad value
 * prints one warning naming the valid choices and keeps the default.
 * docs/configuration.md describes every key; ca_config_print() lists them.
 */
#ifndef CUDALLOC_CONFIG_H
#define CUDALLOC_CONFIG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include "backend.h"
#include "env.h"   /* ca_getenv, for the callers of ca_config_load */
#include "line.h"

#define CA_MAX_ARENAS 8   /* the most arenas a device may have (arena.c) */

/* What a synchronous free (cudaFree) promises; see docs/design.md. */
typedef enum { CA_FREE_DEVICE, CA_FREE_STREAM } ca_free_mode_t;
/* The order of the `track` key's choices. */
typedef enum { CA_TRACK_OFF, CA_TRACK_CALLER, CA_TRACK_STACK, CA_TRACK_PYTHON, CA_TRACK_BACKTRACE } ca_track_t;
/* Which processes of a job print the summary on stderr. */
typedef enum { CA_SUMMARY_ALL, CA_SUMMARY_RANK0 } ca_summary_t;
/* What ends a step besides cudalloc_step(): nothing, or each cudaDeviceSynchronize. */
typedef enum { CA_STEP_ON_API, CA_STEP_ON_SYNC } ca_step_on_t;
/* Where cudaFree'd blocks wait while only the legacy stream is used (legacyq.c). */
typedef enum { CA_LEGACYQ_AUTO, CA_LEGACYQ_OFF, CA_LEGACYQ_ON } ca_legacyq_t;
/* How a thread's streams spread over a device's arenas (siblings.c). */
typedef enum { CA_SPREAD_CONTENDED, CA_SPREAD_FIRST } ca_arena_spread_t;

#define CA_CONFIG_PATH_MAX 256
#define CA_CONFIG_NAME_MAX 16

typedef struct ca_config_s {
  char backend[CA_CONFIG_NAME_MAX]; /* a name ca_backend_find() knows */
  bool expandable_segments;
  uint64_t max_split_size;      /* bytes; UINT64_MAX: no limit */
  double gc_threshold;          /* fraction of the allowed memory; 0: off */
  unsigned roundup_power2_divisions; /* 0: plain 512-byte rounding */
  uint64_t memory_cap;          /* bytes; 0: no cap */
  double memory_fraction;       /* of device memory; 0: no cap */
  bool wait_before_growing;     /* wait for pending frees before growing past the slack (slack.c) */
  double page_churn_cap;        /* pages that keep moving stay while reserved is within this above peak allocated (churn.c); 0: they move */
  ca_free_mode_t free_mode;
  ca_free_mode_t torch_free;    /* PyTorch's pluggable free: device (default) or stream */
  ca_legacyq_t legacy_queue;    /* cudaFree'd blocks in the legacy stream's queue while no other stream is seen */
  ca_track_t track;
  unsigned track_depth;         /* frames kept with track:stack, python, backtrace */
  unsigned leak_exit_code;      /* exit status when blocks are live at exit; 0: the program's */
  unsigned thread_cache_kb;     /* per-thread front cache of small stream-ordered frees; 0: off */
  unsigned thread_cache_large_mb; /* the same cache's blocks above 64 KiB (to 8 MiB); 0: off */
  unsigned thread_cache_streams; /* a thread's streams with cached blocks that each add thread_cache_kb */
  unsigned arenas;              /* arenas per device (arena.c); 1: the device is one */
  ca_arena_spread_t arena_spread; /* which arena a thread's stream allocates from (siblings.c) */
  bool quiet;
  ca_summary_t summary;         /* all, or rank 0 only */
  char report[CA_CONFIG_PATH_MAX]; /* report path prefix, %p pid, %r rank, %h host; "" off */
  int report_signal;            /* signal that asks for the reports; 0: none */
  uint64_t pinned_cache;        /* bytes of free pinned chunks kept */
  char oom_report[CA_CONFIG_PATH_MAX]; /* out-of-memory report prefix; "" default, "off" none */
  char trace[CA_CONFIG_PATH_MAX];  /* event log path, %p pid, %r rank, %h host; "" off */
  uint64_t trace_ring;          /* keep only the last N events, dumped at exit and on OOM; 0 all */
  ca_step_on_t step_on;         /* step marks also at each cudaDeviceSynchronize */
  unsigned sample_ms;           /* a step mark every N ms of allocator activity; 0: off */
  char creep_csv[CA_CONFIG_PATH_MAX]; /* per-step figures, %p %r; "" off */
  char creep_svg[CA_CONFIG_PATH_MAX]; /* the per-step curve, %p %r; "" off */
  ca_backend_options_t sim;     /* the sim_* keys, handed to the backend's init */
} ca_config_t;

/* The process-wide configuration, loaded once by ca_config_load(). Read by
 * every allocation (in its first two lines: track, the front cache's
 * switches, the rounding): line-aligned, so that no variable written often
 * shares those lines (line.h). */
extern ca_config_t ca_config __attribute__((aligned(CA_LINE)));

void ca_config_defaults(ca_config_t *cfg);

/* Applies conf (CUDALLOC_CONF's syntax) over cfg. Each problem prints one
 * warning line on out (NULL: silent). Returns the number of problems. */
int ca_config_parse(ca_config_t *cfg, const char *conf, FILE *out);

/* Sets ca_config to the defaults overlaid with conf, or with the
 * CUDALLOC_CONF environment variable when conf is NULL. Warnings go to
 * stderr. Returns the number of problems. */
int ca_config_load(const char *conf);

/* Every key with its current value and description (CUDALLOC_CONF=help
 * prints it with the defaults). */
void ca_config_print(const ca_config_t *cfg, FILE *out);

/* The keys of cfg that differ from the defaults, in CUDALLOC_CONF's syntax
 * ("backend:sim,sim_fail:map@2,sim_fail:unmap@1"; "" when none), cut to fit
 * cap. Returns the length written. */
size_t ca_config_changed(const ca_config_t *cfg, char *buf, size_t cap);

/* One line on out for each of PyTorch's allocator variables that is set
 * (PYTORCH_CUDA_ALLOC_CONF, PYTORCH_ALLOC_CONF): PyTorch's own setting no
 * longer applies, and which of its keys cudalloc would honour under
 * CUDALLOC_CONF. */
void ca_config_note_pytorch_env(FILE *out);

/* Expands %p (pid), %r (rank, rank.h's variables; "0" without one) and %h
 * (host name) in a report path template. Returns false when the result
 * does not fit. */
bool ca_config_expand_path(const char *tmpl, const char *suffix, char *out, size_t cap);

#endif /* CUDALLOC_CONFIG_H */
