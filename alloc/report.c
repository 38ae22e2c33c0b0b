/* Reports: the exit summary, the leak report (compute-sanitizer's shape,
 * grouped by call site, biggest first), and the files the `report` setting
 * asks for (text and JSON). The out-of-memory report is oom.c's.
 * Call sites are named by track.c; leaks.c writes the leak report. */
#include "report.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "arena.h"
#include "creep.h"
#include "device.h"
#include "leaks.h"
#include "log.h"
#include "peak.h"
#include "pinned.h"
#include "rank.h"
#include "stats.h"
#include "tcache.h"
#include "track.h"

typedef ca_site_total_t site_t;

static int by_pc(const void *a, const void *b) {
  uintptr_t x = (uintptr_t)((const site_t *)a)->pc, y = (uintptr_t)((const site_t *)b)->pc;
  return x < y ? -1 : x > y;
}

static int by_bytes(const void *a, const void *b) {
  int64_t x = ((const site_t *)a)->bytes, y = ((const site_t *)b)->bytes;
  return x > y ? -1 : x < y;
}

/* Live blocks (of a device, locked, or of the pinned cache) grouped by
 * call site, biggest first. Returns the number of sites (0 also when out of
 * host memory). */
static size_t live_sites(const ca_ptrmap_t *live, site_t **out) {
  size_t n = 0, cap = live->count;
  site_t *s = cap ? malloc(cap * sizeof *s) : NULL;
  ca_tcache_quiesce();   /* sites and sizes, which front-cache hits write */
  for (size_t i = 0; s && i < live->cap; i++) {
    ca_block_t *b = live->vals[i];
    if (b && !ca_tcache_holds(b)) s[n++] = (site_t){b->site, (int64_t)b->requested, 1, b->addr};
  }
  ca_tcache_resume();
  if (!s) return *out = NULL, 0;
  qsort(s, n, sizeof *s, by_pc);
  size_t m = 0;
  for (size_t i = 0; i < n; i++) {
    if (m && s[m - 1].pc == s[i].pc) {
      s[m - 1].bytes += s[i].bytes;
      s[m - 1].count += s[i].count;
    } else {
      s[m++] = s[i];
    }
  }
  qsort(s, m, sizeof *s, by_bytes);
  *out = s;
  return m;
}

size_t ca_report_live_sites(ca_device_t *d, ca_site_total_t **out) { return live_sites(&d->live, out); }

// ----------------------------------------------------------------------------
// Leaks (leaks.c writes them)
// ----------------------------------------------------------------------------

void ca_report_leaks(FILE *f) { ca_leaks_report(f, 0); }

void ca_report_shutdown(void) {
  size_t live = ca_leaks_live();
  if (live && !ca_config.quiet) {
    fflush(NULL);   /* after what the program wrote so far, as at exit */
    ca_log_block_t b;
    FILE *f = ca_log_block_begin(&b);
    fprintf(f, "cudalloc: cudalloc_shutdown: %zu live block%s, reported as leaks (not freed)\n", live,
            live == 1 ? "" : "s");
    ca_leaks_report(f, 0);
    ca_log_block_end(&b);
  }
  ca_report_write_files();
}

// ----------------------------------------------------------------------------
// The exit summary
// ----------------------------------------------------------------------------

static double mib(double b) { return b / (1 << 20); }

/* A leak's size: exact below 1 MiB (a 1000-byte leak is no "0.0 MiB"),
 * else in MiB with the exact count. */
static const char *leak_bytes(int64_t bytes, char *buf, size_t len) {
  if (bytes < (1 << 20)) snprintf(buf, len, "%" PRId64 " bytes", bytes);
  else snprintf(buf, len, "%.1f MiB (%" PRId64 " bytes)", mib((double)bytes), bytes);
  return buf;
}

/* The three call sites holding the most live bytes. */
static void top_sites(FILE *f, const ca_ptrmap_t *live) {
  site_t *sites;
  size_t n = live_sites(live, &sites);
  char where[512], size[48];
  for (size_t i = 0; i < n && i < 3; i++) {
    ca_track_name(sites[i].pc, where, sizeof where);
    fprintf(f, "cudalloc:       %s in %" PRId64 " blocks from %s\n", leak_bytes(sites[i].bytes, size, sizeof size),
            sites[i].count, where);
  }
  free(sites);
}

static void summary_of(ca_device_t *d, void *arg) {
  FILE *f = arg;
  cudalloc_stats_t s;
  ca_stats_snapshot(d, &s);
  char arena[16];
  fprintf(f, "cudalloc:   device %d%s (%s): peak allocated %.1f MiB, peak reserved %.1f MiB, fragmentation %.3f\n",
          d->ordinal, ca_arena_label(d, arena), d->props.name, mib(s.allocated_bytes.peak), mib(s.reserved_bytes.peak), s.fragmentation);
  fprintf(f, "cudalloc:     allocations %" PRId64 ", frees %" PRId64 ", slow paths %" PRId64 ", waits %" PRId64
             ", out-of-memory %" PRId64 ", bad frees %" PRId64 "\n",
          s.num_allocs.total, s.num_frees.total, s.num_retries.total, s.num_waits.total, s.num_ooms.total,
          s.num_bad_frees.total);
  fprintf(f, "cudalloc:     backend calls: reserve %" PRId64 ", create %" PRId64 ", map %" PRId64 ", unmap %" PRId64
             ", release %" PRId64 ", set_access %" PRId64 ", event records %" PRId64 ", page moves %" PRId64 "\n",
          s.backend_reserve.total, s.backend_create.total, s.backend_map.total, s.backend_unmap.total,
          s.backend_release.total, s.backend_set_access.total, s.backend_event_record.total,
          s.num_page_moves.total);
  char size[48];
  fprintf(f, "cudalloc:     leaks: %" PRId64 " blocks, %s still allocated at exit\n", s.num_live_blocks.current,
          leak_bytes(s.requested_bytes.current, size, sizeof size));
  top_sites(f, &d->live);
}

/* Pinned host memory, when the program used it. */
static void summary_pinned(FILE *f) {
  cudalloc_pinned_stats_t s;
  cudalloc_get_pinned_stats(&s);
  if (!s.pinned_num_allocs.total && !s.pinned_num_bad_frees.total) return;
  fprintf(f, "cudalloc:   pinned host memory: peak allocated %.1f MiB, peak reserved %.1f MiB, peak cached %.1f MiB\n",
          mib(s.pinned_allocated_bytes.peak), mib(s.pinned_reserved_bytes.peak), mib(s.pinned_cached_bytes.peak));
  fprintf(f, "cudalloc:     allocations %" PRId64 ", frees %" PRId64 ", bad frees %" PRId64 ", out-of-memory %" PRId64
             ", chunks pinned %" PRId64 ", given back %" PRId64 ", copies tracked %" PRId64 "\n",
          s.pinned_num_allocs.total, s.pinned_num_frees.total, s.pinned_num_bad_frees.total, s.pinned_num_ooms.total,
          s.pinned_backend_alloc.total, s.pinned_backend_free.total, s.pinned_copies_tracked.total);
  char size[48];
  fprintf(f, "cudalloc:     leaks: %" PRId64 " pinned blocks, %s still allocated at exit\n",
          s.pinned_num_live_blocks.current, leak_bytes(s.pinned_requested_bytes.current, size, sizeof size));
  const ca_ptrmap_t *live = ca_pinned_lock_live();
  if (!live) return;
  top_sites(f, live);
  ca_pinned_unlock();
}

/* The library's version (which may differ from the header a program was
 * compiled with) and the report formats': a reader of a JSON report checks
 * "schema" before reading further; it changes when a field changes meaning
 * or goes away (a new field keeps it). */
#define CA_VERSION_FMT "%d.%d.%d"
#define CA_VERSION_ARGS CUDALLOC_VERSION_MAJOR, CUDALLOC_VERSION_MINOR, CUDALLOC_VERSION_PATCH
#define CA_STATS_SCHEMA "cudalloc-stats/1"

void ca_report_summary(FILE *f) {
  if (!ca_ready()) return;
  char changed[1024];
  ca_config_changed(&ca_config, changed, sizeof changed);
  fprintf(f, "cudalloc: summary (backend %s, %s segments), version " CA_VERSION_FMT ", config: %s\n",
          ca_state.be->name, ca_config.expandable_segments ? "expandable" : "classic", CA_VERSION_ARGS,
          changed[0] ? changed : "defaults");
  ca_each_device(summary_of, f);
  summary_pinned(f);
  ca_peak_report(f, 3);
  ca_creep_report(f);
}

// ----------------------------------------------------------------------------
// Report files
// ----------------------------------------------------------------------------

/* A string that needs no escape inside JSON quotes: quotes and backslashes
 * become ', control characters ?. */
static void json_safe(char *s) {
  for (; *s; s++)
    if (*s == '"' || *s == '\\') *s = '\'';
    else if ((unsigned char)*s < 0x20) *s = '?';
}

typedef struct json_s {
  FILE *f;
  int devices;
} json_t;

static void json_leaks(FILE *f, const ca_ptrmap_t *live) {
  site_t *sites;
  size_t n = live_sites(live, &sites);
  char where[512];
  for (size_t i = 0; i < n; i++) {
    ca_track_name(sites[i].pc, where, sizeof where);
    json_safe(where);
    fprintf(f, "%s\n       {\"site\": \"%s\", \"bytes\": %" PRId64 ", \"count\": %" PRId64 "}", i ? "," : "", where,
            sites[i].bytes, sites[i].count);
  }
  free(sites);
}

/* One statistic of a JSON report: "name": {"current", "peak", "total"}. */
static void json_stat(FILE *f, const char **sep, const char *name, const cudalloc_stat_t *st) {
  fprintf(f, "%s\n      \"%s\": {\"current\": %" PRId64 ", \"peak\": %" PRId64 ", \"total\": %" PRId64 "}", *sep, name,
          st->current, st->peak, st->total);
  *sep = ",";
}

/* "creep": the device's verdict (creep.c), when steps were marked:
 * "none", "creep" (sites or reserved memory grow) or "not judged". */
static void json_creep(FILE *f, ca_device_t *d) {
  ca_creep_verdict_t v;
  ca_creep_judge(d, &v);
  if (!v.steps) return;
  const char *verdict = !v.judged ? "not judged" : v.nsites || v.reserved_creeps ? "creep" : "none";
  fprintf(f, ",\n     \"creep\": {\"verdict\": \"%s\", \"steps\": %zu, \"reserved_slope\": %.0f, "
             "\"reserved_creeps\": %s, \"sites\": [", verdict, v.steps, v.reserved_slope,
          v.reserved_creeps ? "true" : "false");
  char where[512];
  for (int i = 0; i < v.nsites; i++) {
    ca_track_name(v.sites[i].site, where, sizeof where);
    json_safe(where);
    fprintf(f, "%s{\"site\": \"%s\", \"slope\": %.0f}", i ? ", " : "", where, v.sites[i].slope);
  }
  fprintf(f, "]}");
}

static void json_of(ca_device_t *d, void *arg) {
  json_t *j = arg;
  FILE *f = j->f;
  cudalloc_stats_t s;
  ca_stats_snapshot(d, &s);
  fprintf(f, "%s\n    {\"device\": %d, ", j->devices++ ? "," : "", d->ordinal);
  if (ca_config.arenas > 1) fprintf(f, "\"arena\": %d, ", d->arena);
  fprintf(f, "\"fragmentation\": %.6f, \"largest_free_bytes\": %" PRIu64 ",\n     \"stats\": {",
          s.fragmentation, s.largest_free_bytes);
  const char *sep = "";
#define CA_JSON(name, doc) json_stat(f, &sep, #name, &s.name);
  CUDALLOC_STAT_BYTES(CA_JSON)
  CUDALLOC_STAT_COUNTS(CA_JSON)
  fprintf(f, "},\n     \"leaks\": [");
  json_leaks(f, &d->live);
  fprintf(f, "]");
  json_creep(f, d);
  fprintf(f, "}");
}

/* "pinned": statistics and leaks of pinned host memory, when it was used. */
static void json_pinned(FILE *f) {
  cudalloc_pinned_stats_t s;
  cudalloc_get_pinned_stats(&s);
  if (!s.pinned_num_allocs.total && !s.pinned_num_bad_frees.total) return;
  fprintf(f, ",\n  \"pinned\": {\"stats\": {");
  const char *sep = "";
  CUDALLOC_STAT_PINNED_BYTES(CA_JSON)
  CUDALLOC_STAT_PINNED_COUNTS(CA_JSON)
#undef CA_JSON
  fprintf(f, "},\n     \"leaks\": [");
  const ca_ptrmap_t *live = ca_pinned_lock_live();
  if (live) {
    json_leaks(f, live);
    ca_pinned_unlock();
  }
  fprintf(f, "]}");
}

/* Which process of which job wrote the report, for a tool that reads the
 * reports of every rank (bench/ranks/): "rank" and "world_size" are null
 * when no launcher variable says. */
static void json_job(FILE *f) {
  ca_rank_t r;
  ca_rank_get(&r);
  char host[256];
  if (!ca_config_expand_path("%h", "", host, sizeof host)) host[0] = 0;
  json_safe(host);
  fprintf(f, "  \"job\": {\"rank\": ");
  if (r.text) fprintf(f, "%ld", r.rank);
  else fprintf(f, "null");
  fprintf(f, ", \"rank_variable\": ");
  if (r.var) fprintf(f, "\"%s\"", r.var);
  else fprintf(f, "null");
  fprintf(f, ", \"world_size\": ");
  if (r.world) fprintf(f, "%ld", r.world);
  else fprintf(f, "null");
  fprintf(f, ", \"pid\": %ld, \"host\": \"%s\"},\n", (long)getpid(), host);
}

static FILE *open_report(const char *suffix, char *path, size_t cap) {
  if (!ca_config_expand_path(ca_config.report, suffix, path, cap)) {
    ca_log("report path '%s%s' is too long; report not written", ca_config.report, suffix);
    return NULL;
  }
  FILE *f = fopen(path, "w");
  if (!f) ca_log("cannot write report %s", path);
  return f;
}

void ca_report_write_files(void) {
  if (!ca_ready()) return;
  ca_creep_write_files();
  ca_peak_write_files();
  if (!ca_config.report[0]) return;
  char path[CA_CONFIG_PATH_MAX + 32];
  FILE *f = open_report("-leaks.txt", path, sizeof path);
  if (f) {
    ca_report_summary(f);
    ca_report_leaks(f);
    fclose(f);
  }
  if ((f = open_report("-leaks.json", path, sizeof path))) {
    ca_leaks_json(f);
    fclose(f);
  }
  if ((f = open_report("-stats.json", path, sizeof path))) {
    json_t j = {f, 0};
    char changed[1024];
    ca_config_changed(&ca_config, changed, sizeof changed);
    json_safe(changed);
    fprintf(f, "{\n  \"schema\": \"" CA_STATS_SCHEMA "\",\n  \"version\": \"" CA_VERSION_FMT "\",\n"
               "  \"backend\": \"%s\",\n  \"config\": \"%s\",\n",
            CA_VERSION_ARGS, ca_state.be->name, changed);
    json_job(f);
    fprintf(f, "  \"devices\": [");
    ca_each_device(json_of, &j);
    fprintf(f, "\n  ]");
    json_pinned(f);
    fprintf(f, "\n}\n");
    fclose(f);
  }
}

// ----------------------------------------------------------------------------
// Many processes, one job
// ----------------------------------------------------------------------------

void ca_report_check_job(void) {
  ca_rank_t r;
  ca_rank_get(&r);
  if (r.bad) ca_log("%s='%s' is not a number: this process's rank is not read from it", r.bad, ca_getenv(r.bad));
  const char *t = ca_config.report;
  if (!r.several || !t[0] || strstr(t, "%r") || strstr(t, "%p")) return;
  if (r.world > 1)
    ca_log("report path '%s' names the same files in each of the %ld processes of this job (%s): they would "
           "overwrite each other; add %%r (rank) or %%p (pid) to it",
           t, r.world, r.var ? r.var : "no rank variable");
  else
    ca_log("report path '%s' names the same files in every process of this job (%s is set): they would "
           "overwrite each other; add %%r (rank) or %%p (pid) to it",
           t, r.var);
}

// ----------------------------------------------------------------------------
// Leaks at exit
// ----------------------------------------------------------------------------

/* On stderr, at most this many stacks: the report files have them all. */
#define EXIT_LEAK_GROUPS 20

void ca_report_exit_leaks(void) {
  if (!ca_leaks_live()) return;
  if (!ca_config.quiet) {
    ca_log_block_t b;   /* one write: ranks sharing a terminal do not interleave */
    ca_leaks_report(ca_log_block_begin(&b), EXIT_LEAK_GROUPS);
    ca_log_block_end(&b);
  }
  if (ca_config.leak_exit_code) {   /* as compute-sanitizer's --error-exitcode, for CI */
    fflush(NULL);
    _exit((int)ca_config.leak_exit_code);
  }
}
