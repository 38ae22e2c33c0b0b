/* The out-of-memory report: gathered under the device's lock at the moment
 * an allocation finally fails, and written at once (a program that aborts
 * after the error still leaves it behind), as text and JSON.
 *
 * At that moment nothing here may allocate device memory or re-enter the
 * allocator: the figures come from the core's own counters and from the
 * backend's mem_info and processes entries; the files are written with
 * stdio (host memory only). */
#include "oom.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "arena.h"
#include "bins.h"
#include "blocks.h"
#include "device.h"
#include "log.h"
#include "pool.h"
#include "report.h"
#include "stats.h"
#include "track.h"

#define CA_OOM_SCHEMA "cudalloc-oom/1"
#define MAX_PROCESSES 64
#define LIVE_SITES_SHOWN 10

static double mib(uint64_t b) { return (double)b / (1 << 20); }

// ----------------------------------------------------------------------------
// The step history: this step's peak of allocated memory, and earlier ones
// ----------------------------------------------------------------------------

/* Per device, under its lock; this step's peak is the device's
 * oom_step_peak (types.h), which every allocation updates. */
typedef struct steps_s {
  int64_t past[CA_OOM_STEPS];   /* ring of the last steps' peaks */
  unsigned count;               /* steps recorded, at most CA_OOM_STEPS kept */
} steps_t;

static steps_t steps[CA_MAX_SLOTS];

void ca_oom_on_alloc(ca_device_t *d) {
  if (d->stats.allocated_bytes.current > d->oom_step_peak) d->oom_step_peak = d->stats.allocated_bytes.current;
}

void ca_oom_on_step(ca_device_t *d) {
  steps_t *s = &steps[d->slot];
  s->past[s->count++ % CA_OOM_STEPS] = d->oom_step_peak;
  d->oom_step_peak = d->stats.allocated_bytes.current;
}

static int by_value(const void *a, const void *b) {
  int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
  return x < y ? -1 : x > y;
}

/* The median of the recorded steps' peaks; 0 before 3 steps. */
static uint64_t usual_peak(const steps_t *s, unsigned *n) {
  *n = s->count < CA_OOM_STEPS ? s->count : CA_OOM_STEPS;
  if (*n < 3) return 0;
  int64_t v[CA_OOM_STEPS];
  memcpy(v, s->past, *n * sizeof *v);
  qsort(v, *n, sizeof *v, by_value);
  return (uint64_t)v[*n / 2];
}

// ----------------------------------------------------------------------------
// The figures
// ----------------------------------------------------------------------------

typedef struct room_s {
  size_t page, best;
} room_t;

static bool free_mapped(const ca_block_t *b) { return b && b->state == CA_FREE && b->kind == CA_MAPPED; }

/* A hole with the free mapped blocks on either side: what one growth of
 * an expandable pool can place there. */
static bool widest_hole(ca_block_t *h, void *arg) {
  room_t *r = arg;
  size_t room = h->size + (free_mapped(h->prev) ? h->prev->size : 0) + (free_mapped(h->next) ? h->next->size : 0);
  if (room > r->best) r->best = room;
  return true;
}

/* Other processes' bytes on d, from the backend (this process excluded). */
static void other_processes(ca_device_t *d, ca_oom_figures_t *f, ca_process_t *list, unsigned *n) {
  unsigned got = 0;
  *n = 0;
  f->others_known = ca_state.be->processes &&
                    ca_state.be->processes(d->ordinal, list, MAX_PROCESSES, &got) == CUDA_SUCCESS;
  if (!f->others_known) return;
  uint32_t self = (uint32_t)getpid();
  for (unsigned i = 0; i < got && i < MAX_PROCESSES; i++) {
    if (list[i].pid == self) continue;
    if (list[i].bytes != UINT64_MAX) f->others += list[i].bytes;
    list[(*n)++] = list[i];
  }
  f->nothers = *n;
}

static void figures(ca_device_t *d, size_t size, CUresult rc, ca_oom_figures_t *f, ca_process_t *procs,
                    unsigned *nprocs) {
  memset(f, 0, sizeof *f);
  f->size = size;
  f->rounded = size > d->limit || size > SIZE_MAX - CA_MIN_BLOCK ? size : ca_round_size(size);
  f->expandable = ca_config.expandable_segments;
  f->grow_bytes = ca_pool_growth_bytes(d, f->rounded);
  size_t free_b = 0, total_b = 0;
  f->driver_free_known = ca_state.be->mem_info(d->ordinal, &free_b, &total_b) == CUDA_SUCCESS;
  f->driver_free = free_b;
  f->total = d->props.total_bytes;
  f->limit = d->limit;
  f->cap_set = d->limit < d->props.total_bytes;
  /* The ordinal's, against its limit: every arena's reserved bytes, and
   * what the siblings held when the slow path last squeezed them (arena.c). */
  f->allocated = (uint64_t)(d->stats.allocated_bytes.current + d->sibling_allocated);
  f->reserved = (uint64_t)ca_arena_reserved(d);
  f->pending = (uint64_t)(d->stats.active_bytes.current - d->stats.allocated_bytes.current + d->sibling_pending);
  f->largest_free = ca_stats_largest_free(d);
  f->va_room = UINT64_MAX;
  if (f->expandable && f->rounded <= d->limit) {
    room_t r = {d->page, 0};
    ca_bins_each(&ca_pool_for(d, f->rounded)->holes, widest_hole, &r);
    f->va_room = r.best;
  }
  other_processes(d, f, procs, nprocs);
  f->capture = __atomic_load_n(&ca_state.captures, __ATOMIC_ACQUIRE) > 0;
  f->driver_error = (int)rc;
  f->usual_peak = usual_peak(&steps[d->slot], &f->usual_steps);
  /* the ordinal's, as allocated is: the siblings' too (unknown while one has too few steps) */
  f->usual_peak = d->sibling_usual < 0 || !f->usual_peak ? 0 : f->usual_peak + (uint64_t)d->sibling_usual;
}

uint64_t ca_oom_usual_peak(const ca_device_t *d, unsigned *n) { return usual_peak(&steps[d->slot], n); }

void ca_oom_figures(ca_device_t *d, size_t size, CUresult rc, ca_oom_figures_t *f) {
  ca_process_t procs[MAX_PROCESSES];
  unsigned n;
  figures(d, size, rc, f, procs, &n);
}

// ----------------------------------------------------------------------------
// Writing: text and JSON
// ----------------------------------------------------------------------------

typedef struct oom_s {
  ca_device_t *d;
  const ca_oom_figures_t *f;
  const ca_oom_diagnosis_t *dx;
  const ca_process_t *procs;
  unsigned nprocs;
  ca_site_total_t *sites;
  size_t nsites;
  unsigned number;              /* this process's n-th out-of-memory failure */
} oom_t;

/* /proc/PID/comm when the backend gave no name ("?" when unreadable: a
 * process of another PID namespace). */
static void process_name(const ca_process_t *p, char *buf, size_t cap) {
  if (p->name[0]) {
    snprintf(buf, cap, "%s", p->name);
    return;
  }
  char path[48];
  snprintf(path, sizeof path, "/proc/%u/comm", p->pid);
  FILE *f = fopen(path, "r");
  if (!f || !fgets(buf, (int)cap, f)) snprintf(buf, cap, "?");
  else buf[strcspn(buf, "\n")] = 0;
  if (f) fclose(f);
}

static void write_text(FILE *out, const oom_t *o) {
  const ca_oom_figures_t *f = o->f;
  fprintf(out, "cudalloc out-of-memory report (" CA_OOM_SCHEMA "), pid %ld, device %d (%s), failure %u\n",
          (long)getpid(), o->d->ordinal, o->d->props.name, o->number);
  fprintf(out, "  asked for         %" PRIu64 " bytes (%.1f MiB); block %.1f MiB, growth %.1f MiB\n", f->size,
          mib(f->size), mib(f->rounded), mib(f->grow_bytes));
  fprintf(out, "  verdict           %s\n", ca_oom_verdict_name(o->dx->verdict));
  fprintf(out, "  arithmetic        %s\n", o->dx->arithmetic);
  fprintf(out, "  hint              %s\n", o->dx->hint);
  if (f->driver_free_known)
    fprintf(out, "  device            total %.1f MiB, driver free %.1f MiB\n", mib(f->total), mib(f->driver_free));
  else fprintf(out, "  device            total %.1f MiB, driver free unknown (mem_info failed)\n", mib(f->total));
  fprintf(out, "  cudalloc          allocated %.1f MiB, cached %.1f MiB (of which pending %.1f MiB), reserved %.1f MiB\n",
          mib(f->allocated), mib(f->reserved - f->allocated), mib(f->pending), mib(f->reserved));
  fprintf(out, "  largest free      %.1f MiB%s", mib(f->largest_free), f->va_room != UINT64_MAX ? "" : "\n");
  if (f->va_room != UINT64_MAX) fprintf(out, "; address range for a growth %.1f MiB\n", mib(f->va_room));
  fprintf(out, "  cap in force      %.1f MiB (%s)\n", mib(f->limit),
          f->cap_set ? "memory_cap_mb / memory_fraction" : "none: the device");
  fprintf(out, "  segments          %s%s\n", f->expandable ? "expandable" : "classic",
          f->capture ? "; a graph capture is underway (no waiting)" : "");
  if (f->usual_peak)
    fprintf(out, "  usual step peak   %.1f MiB (median of the last %u steps)\n", mib(f->usual_peak), f->usual_steps);
  if (!f->others_known) fprintf(out, "  other processes   unknown (the backend cannot list them: no NVML)\n");
  else if (!o->nprocs) fprintf(out, "  other processes   none\n");
  for (unsigned i = 0; f->others_known && i < o->nprocs; i++) {
    char name[64];
    process_name(&o->procs[i], name, sizeof name);
    if (o->procs[i].bytes == UINT64_MAX)
      fprintf(out, "  other process     pid %u (%s): bytes not reported\n", o->procs[i].pid, name);
    else
      fprintf(out, "  other process     pid %u (%s): %.1f MiB (%" PRIu64 " bytes)\n", o->procs[i].pid, name,
              mib(o->procs[i].bytes), o->procs[i].bytes);
  }
  fprintf(out, "  live memory by call site, biggest first:%s\n", o->nsites ? "" : " none");
  char where[512];
  for (size_t i = 0; i < o->nsites && i < LIVE_SITES_SHOWN; i++) {
    ca_track_name(o->sites[i].pc, where, sizeof where);
    fprintf(out, "    %.1f MiB in %" PRId64 " block%s from %s\n", mib((uint64_t)o->sites[i].bytes), o->sites[i].count,
            o->sites[i].count == 1 ? "" : "s", where);
  }
}

/* A JSON string: quotes, backslashes and control characters escaped. */
static void json_string(FILE *out, const char *s) {
  fputc('"', out);
  for (; *s; s++) {
    unsigned char c = (unsigned char)*s;
    if (c == '"' || c == '\\') fprintf(out, "\\%c", c);
    else if (c < 0x20) fprintf(out, "\\u%04x", c);
    else fputc(c, out);
  }
  fputc('"', out);
}

static void json_field(FILE *out, const char *key, const char *value) {
  fprintf(out, "  \"%s\": ", key);
  json_string(out, value);
  fputs(",\n", out);
}

static void write_json(FILE *out, const oom_t *o) {
  const ca_oom_figures_t *f = o->f;
  fprintf(out, "{\n  \"schema\": \"" CA_OOM_SCHEMA "\",\n  \"version\": \"%d.%d.%d\",\n", CUDALLOC_VERSION_MAJOR,
          CUDALLOC_VERSION_MINOR, CUDALLOC_VERSION_PATCH);
  fprintf(out, "  \"pid\": %ld,\n  \"device\": %d,\n  \"failure\": %u,\n", (long)getpid(), o->d->ordinal, o->number);
  json_field(out, "verdict", ca_oom_verdict_name(o->dx->verdict));
  json_field(out, "arithmetic", o->dx->arithmetic);
  json_field(out, "hint", o->dx->hint);
  fprintf(out, "  \"size\": %" PRIu64 ",\n  \"rounded\": %" PRIu64 ",\n  \"grow_bytes\": %" PRIu64 ",\n", f->size,
          f->rounded, f->grow_bytes);
  fprintf(out, "  \"total_bytes\": %" PRIu64 ",\n", f->total);
  if (f->driver_free_known) fprintf(out, "  \"driver_free_bytes\": %" PRIu64 ",\n", f->driver_free);
  else fputs("  \"driver_free_bytes\": null,\n", out);
  fprintf(out, "  \"allocated_bytes\": %" PRIu64 ",\n  \"cached_bytes\": %" PRIu64 ",\n  \"pending_bytes\": %" PRIu64
               ",\n  \"reserved_bytes\": %" PRIu64 ",\n  \"largest_free_bytes\": %" PRIu64 ",\n",
          f->allocated, f->reserved - f->allocated, f->pending, f->reserved, f->largest_free);
  if (f->va_room != UINT64_MAX) fprintf(out, "  \"va_room_bytes\": %" PRIu64 ",\n", f->va_room);
  else fputs("  \"va_room_bytes\": null,\n", out);
  fprintf(out, "  \"limit_bytes\": %" PRIu64 ",\n  \"cap_set\": %s,\n  \"expandable_segments\": %s,\n  \"capture\": %s,\n",
          f->limit, f->cap_set ? "true" : "false", f->expandable ? "true" : "false", f->capture ? "true" : "false");
  fprintf(out, "  \"driver_error\": %d,\n", f->driver_error);
  if (f->usual_peak) fprintf(out, "  \"usual_step_peak_bytes\": %" PRIu64 ",\n", f->usual_peak);
  else fputs("  \"usual_step_peak_bytes\": null,\n", out);
  fprintf(out, "  \"other_processes_bytes\": %" PRIu64 ",\n", f->others);
  if (!f->others_known) fputs("  \"other_processes\": null,\n", out);
  else {
    fputs("  \"other_processes\": [", out);
    for (unsigned i = 0; i < o->nprocs; i++) {
      char name[64];
      process_name(&o->procs[i], name, sizeof name);
      fprintf(out, "%s\n    {\"pid\": %u, \"name\": ", i ? "," : "", o->procs[i].pid);
      json_string(out, name);
      if (o->procs[i].bytes == UINT64_MAX) fputs(", \"bytes\": null}", out);
      else fprintf(out, ", \"bytes\": %" PRIu64 "}", o->procs[i].bytes);
    }
    fputs(o->nprocs ? "\n  ],\n" : "],\n", out);
  }
  fputs("  \"live\": [", out);
  char where[512];
  for (size_t i = 0; i < o->nsites && i < LIVE_SITES_SHOWN; i++) {
    ca_track_name(o->sites[i].pc, where, sizeof where);
    fprintf(out, "%s\n    {\"site\": ", i ? "," : "");
    json_string(out, where);
    fprintf(out, ", \"bytes\": %" PRId64 ", \"count\": %" PRId64 "}", o->sites[i].bytes, o->sites[i].count);
  }
  fputs(o->nsites ? "\n  ]\n}\n" : "]\n}\n", out);
}

// ----------------------------------------------------------------------------
// Where the files go, and how often
// ----------------------------------------------------------------------------

/* The path prefix: oom_report, else <report>-oom, else $TMPDIR (or /tmp)
 * /cudalloc-oom-%p; NULL with oom_report:off. */
static const char *prefix(char *buf, size_t cap) {
  if (strcmp(ca_config.oom_report, "off") == 0) return NULL;
  if (ca_config.oom_report[0]) return ca_config.oom_report;
  if (ca_config.report[0]) snprintf(buf, cap, "%s-oom", ca_config.report);
  else {
    const char *tmp = ca_getenv("TMPDIR");
    snprintf(buf, cap, "%s/cudalloc-oom-%%p", tmp && tmp[0] ? tmp : "/tmp");
  }
  return buf;
}

/* Opens <prefix>[-n]<ext>; the path in path. NULL (and said why) on failure. */
static FILE *open_file(const char *pre, unsigned n, const char *ext, char *path, size_t cap) {
  char suffix[32];
  if (n > 1) snprintf(suffix, sizeof suffix, "-%u%s", n, ext);
  else snprintf(suffix, sizeof suffix, "%s", ext);
  if (!ca_config_expand_path(pre, suffix, path, cap)) {
    ca_log("out-of-memory report path '%s%s' is too long", pre, suffix);
    return NULL;
  }
  FILE *f = fopen(path, "w");
  if (!f) ca_log("cannot write the out-of-memory report %s (%s)", path, strerror(errno));
  return f;
}

/* Writes both files; false when either could not be written (the caller
 * then puts the text on stderr, so that nothing is lost). */
static bool write_files(const oom_t *o, const char *pre, char *txt, size_t cap) {
  char json_path[CA_CONFIG_PATH_MAX + 48];
  FILE *t = open_file(pre, o->number, ".txt", txt, cap);
  FILE *j = t ? open_file(pre, o->number, ".json", json_path, sizeof json_path) : NULL;
  if (t) write_text(t, o);
  if (j) write_json(j, o);
  bool ok = t && j;
  if (t && fclose(t)) ok = false;
  if (j && fclose(j)) ok = false;
  return ok;
}

/* The rate limit, for the whole process. */
static pthread_mutex_t limit_lock = PTHREAD_MUTEX_INITIALIZER;
static unsigned failures;       /* out-of-memory failures so far */
static unsigned quiet_since;    /* failures not on stderr since the last line */
static struct timespec last_line;

static double seconds_since(const struct timespec *t) {
  struct timespec now;
  clock_gettime(CLOCK_MONOTONIC, &now);
  return (double)(now.tv_sec - t->tv_sec) + (double)(now.tv_nsec - t->tv_nsec) / 1e9;
}

/* This failure's number, and whether it gets a full report (1) or a
 * count line (2) or nothing (0). */
static int admit(unsigned *number) {
  pthread_mutex_lock(&limit_lock);
  *number = ++failures;
  int what = 0;
  if (*number <= CA_OOM_FULL_REPORTS) what = 1;
  else if (seconds_since(&last_line) >= 1.0) what = 2;
  else quiet_since++;
  if (what) clock_gettime(CLOCK_MONOTONIC, &last_line);
  pthread_mutex_unlock(&limit_lock);
  return what;
}

static unsigned take_quiet(void) {
  pthread_mutex_lock(&limit_lock);
  unsigned n = quiet_since;
  quiet_since = 0;
  pthread_mutex_unlock(&limit_lock);
  return n;
}

void ca_oom_report(ca_device_t *d, size_t size, CUresult rc) {
  unsigned number;
  int what = admit(&number);
  if (!what) return;
  ca_process_t procs[MAX_PROCESSES];
  ca_oom_figures_t f;
  ca_oom_diagnosis_t dx;
  unsigned nprocs;
  figures(d, size, rc, &f, procs, &nprocs);
  ca_oom_decide(&f, &dx);
  const char *verdict = ca_oom_verdict_name(dx.verdict);
  if (what == 2) {
    unsigned since = take_quiet() + 1;
    ca_log("out of memory on device %d again: asked for %.1f MiB, %s; %u failure%s since the last line (%u in all; "
           "the first %d are reported in full)",
           d->ordinal, mib(size), verdict, since, since == 1 ? "" : "s", number, CA_OOM_FULL_REPORTS);
    return;
  }
  oom_t o = {d, &f, &dx, procs, nprocs, NULL, 0, number};
  o.nsites = ca_report_live_sites(d, &o.sites);
  char pre_buf[CA_CONFIG_PATH_MAX + 32], txt[CA_CONFIG_PATH_MAX + 48];
  const char *pre = prefix(pre_buf, sizeof pre_buf);
  bool written = pre && write_files(&o, pre, txt, sizeof txt);
  ca_log("out of memory on device %d: asked for %" PRIu64 " bytes (%.1f MiB): %s", d->ordinal, f.size, mib(f.size),
         verdict);
  ca_log("  hint: %s", dx.hint);
  if (written) ca_log("  report: %s (and .json)", txt);
  else {
    fflush(NULL);
    write_text(stderr, &o);
    fflush(stderr);
  }
  free(o.sites);
}

void ca_oom_forget(bool after_fork) {
  if (after_fork) limit_lock = (pthread_mutex_t)PTHREAD_MUTEX_INITIALIZER;
  pthread_mutex_lock(&limit_lock);
  failures = quiet_since = 0;
  memset(&last_line, 0, sizeof last_line);
  pthread_mutex_unlock(&limit_lock);
  memset(steps, 0, sizeof steps);   /* oom_step_peak goes with its device: dropped before, made anew (calloc) */
}
