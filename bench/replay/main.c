/* cudalloc-replay: would this run fit with cudalloc, and in how much memory?
 *
 *   cudalloc-replay [options] TRACE...
 *     --mode expandable|classic|both   cudalloc's segments (default both)
 *     --honour-empty-cache             replay the program's own empty_cache calls
 *     --capacity-mb N                  the simulated device's memory (default: ample)
 *     --no-bisect                      skip the search for the smallest capacity
 *     --table                          one Markdown row per device (make whatif)
 *     --economy                        one Markdown row per device of driver calls,
 *                                      expandable segments only (make economy)
 *     --dump-peak                      where reserved memory was (free blocks, holes,
 *                                      queues) right after the event that set its peak
 *
 * TRACE: a PyTorch memory snapshot (.pickle), an RMM CSV log, or cudalloc's
 * own log (trace:PATH). docs/whatif.md explains the output. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "importers.h"
#include "replay.h"

#define MiB (1ull << 20)
#define GiB (1ull << 30)

typedef struct {
  bool modes[2];   /* [0] classic, [1] expandable */
  bool honour, bisect, table, economy, dump_peak;
  uint64_t capacity;
  const char *conf;   /* --conf: appended to the replay's configuration */
} args_t;

typedef struct {
  ca_replay_result_t r;
  uint64_t min_capacity;
  unsigned runs;
  bool have_min;
} mode_result_t;

static double mib(int64_t b) { return (double)b / (double)MiB; }

static void usage(FILE *f) {
  fputs("usage: cudalloc-replay [--mode expandable|classic|both] [--honour-empty-cache] [--capacity-mb N]\n"
        "                       [--no-bisect] [--table | --economy] [--dump-peak] [--conf ,key:value...] TRACE...\n"
        "TRACE: a PyTorch memory snapshot pickle, an RMM CSV log or a cudalloc trace (docs/whatif.md)\n", f);
}

static int parse_args(int argc, char **argv, args_t *a, int *first) {
  *a = (args_t){.modes = {true, true}, .bisect = true};
  int i = 1;
  for (; i < argc && strncmp(argv[i], "--", 2) == 0; i++) {
    const char *o = argv[i];
    if (!strcmp(o, "--honour-empty-cache")) a->honour = true;
    else if (!strcmp(o, "--no-bisect")) a->bisect = false;
    else if (!strcmp(o, "--table")) a->table = true;
    else if (!strcmp(o, "--dump-peak")) a->dump_peak = true;
    else if (!strcmp(o, "--conf") && i + 1 < argc) a->conf = argv[++i];
    else if (!strcmp(o, "--economy")) a->economy = true, a->bisect = false, a->modes[0] = false;
    else if (!strcmp(o, "--mode") && i + 1 < argc) {
      const char *m = argv[++i];
      a->modes[0] = !strcmp(m, "classic") || !strcmp(m, "both");
      a->modes[1] = !strcmp(m, "expandable") || !strcmp(m, "both");
      if (!a->modes[0] && !a->modes[1]) return fprintf(stderr, "cudalloc-replay: unknown mode '%s'\n", m), -1;
    } else if (!strcmp(o, "--capacity-mb") && i + 1 < argc) {
      char *end;
      unsigned long long mb = strtoull(argv[++i], &end, 10);
      if (*end || mb == 0 || mb > (1ull << 20)) return fprintf(stderr, "cudalloc-replay: bad --capacity-mb\n"), -1;
      a->capacity = mb * MiB;
    } else if (!strcmp(o, "--help")) {
      usage(stdout);
      exit(0);
    } else return fprintf(stderr, "cudalloc-replay: unknown option '%s'\n", o), usage(stderr), -1;
  }
  *first = i;
  return i < argc ? 0 : (usage(stderr), -1);
}

static int run_mode(const ca_trace_t *t, int dev, bool expandable, const args_t *a, mode_result_t *m) {
  char err[256];
  ca_replay_opts_t o = {.device = dev, .expandable = expandable, .honour_empty_cache = a->honour, .conf = a->conf,
                        .capacity = a->capacity ? a->capacity : ca_replay_ample_capacity(t, dev),
                        .dump_peak = a->dump_peak && !a->table && !a->economy};
  memset(m, 0, sizeof *m);
  if (ca_replay_run(t, &o, &m->r, err, sizeof err)) return fprintf(stderr, "cudalloc-replay: %s\n", err), -1;
  if (a->bisect) {
    if (ca_replay_min_capacity(t, o, &m->min_capacity, &m->runs, err, sizeof err))
      return fprintf(stderr, "cudalloc-replay: device %d: %s\n", dev, err), -1;
    m->have_min = true;
  }
  return 0;
}

static void print_mode(const char *name, const mode_result_t *m) {
  const cudalloc_stats_t *s = &m->r.stats;
  double live = mib(s->requested_bytes.peak);
  printf("  %-10s peak live %.1f MiB, peak allocated %.1f MiB, peak reserved %.1f MiB: reserved/live %.3f\n", name,
         live, mib(s->allocated_bytes.peak), mib(s->reserved_bytes.peak),
         live > 0 ? mib(s->reserved_bytes.peak) / live : 0.0);
  printf("  %-10s %llu allocations, %llu frees, %llu out of memory, %llu frees of blocks not held\n", "",
         (unsigned long long)m->r.allocs, (unsigned long long)m->r.frees, (unsigned long long)m->r.ooms,
         (unsigned long long)m->r.unknown_frees);
  printf("  %-10s backend calls: reserve %lld, create %lld, map %lld, set_access %lld, unmap %lld, release %lld, "
         "va_free %lld, event_record %lld, event_query %lld, sync %lld\n", "",
         (long long)s->backend_reserve.total, (long long)s->backend_create.total, (long long)s->backend_map.total,
         (long long)s->backend_set_access.total, (long long)s->backend_unmap.total,
         (long long)s->backend_release.total, (long long)s->backend_va_free.total,
         (long long)s->backend_event_record.total, (long long)s->backend_event_query.total,
         (long long)s->backend_sync.total);
  printf("  %-10s replay speed %.2f M events/s (%llu events in %.3f s)\n", "",
         m->r.seconds > 0 ? (double)m->r.events / m->r.seconds / 1e6 : 0.0, (unsigned long long)m->r.events,
         m->r.seconds);
  if (m->have_min)
    printf("  %-10s smallest capacity without an out-of-memory: %.0f MiB (%u replays)\n", "", mib((int64_t)m->min_capacity),
           m->runs);
  if (m->r.peak_dump) printf("  %-10s %s", "", m->r.peak_dump);
}

static void print_verdict(const ca_trace_origin_t *o, const mode_result_t *best, const char *mode) {
  if (!o->known) return;
  printf("  PyTorch    peak live %.1f MiB, reserved %.1f MiB: reserved/live %.3f\n", mib((int64_t)o->peak_live),
         mib((int64_t)o->peak_reserved), o->peak_live ? (double)o->peak_reserved / (double)o->peak_live : 0.0);
  if (best && best->have_min)
    printf("  this run needed %.2f GiB under PyTorch's allocator; with cudalloc (%s) it fits in %.2f GiB\n",
           (double)o->peak_reserved / (double)GiB, mode, (double)best->min_capacity / (double)GiB);
}

/* | trace | device | events | peak live | PyTorch reserved | smallest capacity, expandable | classic |
 * peak reserved with ample memory, expandable / classic | */
static void print_row(const char *path, int dev, const ca_trace_t *t, const mode_result_t m[2], const args_t *a) {
  const char *base = strrchr(path, '/') ? strrchr(path, '/') + 1 : path;
  const ca_trace_origin_t *o = &t->origin[dev];
  double live = o->known ? (double)o->peak_live : (double)m[a->modes[1]].r.stats.requested_bytes.peak;
  printf("| `%s` | %d | %zu | %.0f MiB |", base, dev, ca_trace_count(t, dev), live / (double)MiB);
  if (o->known) printf(" %.0f MiB (%.2f×) |", mib((int64_t)o->peak_reserved), (double)o->peak_reserved / live);
  else printf(" – |");
  for (int k = 1; k >= 0; k--) {
    if (a->modes[k] && m[k].have_min)
      printf(" %.0f MiB (%.3f×) |", mib((int64_t)m[k].min_capacity), (double)m[k].min_capacity / live);
    else printf(" – |");
  }
  for (int k = 1; k >= 0; k--) {
    if (a->modes[k]) printf(" %.0f MiB", mib(m[k].r.stats.reserved_bytes.peak));
    else printf(" –");
    printf(k ? " /" : " |\n");
  }
}

/* The driver economy of expandable segments (issue: creates no more than
 * PyTorch's expandable segments would make for the same peak, one per
 * 20 MiB page of its large pool; one set-access per newly mapped run):
 * | trace | device | peak reserved / peak live | creates | PyTorch at 20 MiB pages | maps | set-access | unmaps |
 * events recorded / queried / waited for | PyTorch's segment maps in the trace | */
static void print_economy(const char *path, int dev, const ca_trace_t *t, const mode_result_t *m) {
  const char *base = strrchr(path, '/') ? strrchr(path, '/') + 1 : path;
  const ca_trace_origin_t *o = &t->origin[dev];
  const cudalloc_stats_t *s = &m->r.stats;
  double live = o->known ? (double)o->peak_live : (double)s->requested_bytes.peak;
  long long pt_creates = (long long)((s->reserved_bytes.peak + (int64_t)(20 * MiB) - 1) / (int64_t)(20 * MiB));
  printf("| `%s` | %d | %.3f | %lld | %lld | %lld | %lld | %lld | %lld / %lld / %lld |", base, dev,
         live > 0 ? (double)s->reserved_bytes.peak / live : 0.0, (long long)s->backend_create.total, pt_creates,
         (long long)s->backend_map.total, (long long)s->backend_set_access.total, (long long)s->backend_unmap.total,
         (long long)s->backend_event_record.total, (long long)s->backend_event_query.total,
         (long long)s->backend_sync.total);
  if (o->known) printf(" %llu |\n", (unsigned long long)o->segment_maps);
  else printf(" – |\n");
}

static int replay_file(const char *path, const args_t *a) {
  ca_trace_t t;
  ca_import_error_t err = {{0}};
  ca_trace_init(&t);
  if (ca_import_file(path, &t, &err)) {
    fprintf(stderr, "cudalloc-replay: %s\n", err.msg);
    ca_trace_dispose(&t);
    return -1;
  }
  if (!a->table && !a->economy)
    printf("%s (%s): %d device(s), %zu events, %zu blocks live before the trace began, %zu entries not replayed\n",
           path, t.format, t.ndevices, t.n - t.pre_end, t.pre_end, t.skipped);
  int rc = 0;
  for (int dev = 0; dev < t.ndevices && !rc; dev++) {
    if (!ca_trace_count(&t, dev)) continue;
    mode_result_t m[2];
    for (int k = 0; k < 2 && !rc; k++)
      if (a->modes[k]) rc = run_mode(&t, dev, k == 1, a, &m[k]);
    if (rc) break;
    if (a->table) {
      print_row(path, dev, &t, m, a);
      continue;
    }
    if (a->economy) {
      print_economy(path, dev, &t, &m[1]);
      continue;
    }
    printf("device %d: %zu events\n", dev, ca_trace_count(&t, dev));
    if (a->modes[1]) print_mode("expandable", &m[1]);
    if (a->modes[0]) print_mode("classic", &m[0]);
    int best = a->modes[1] && (!a->modes[0] || m[1].min_capacity <= m[0].min_capacity) ? 1 : 0;
    print_verdict(&t.origin[dev], &m[best], best ? "expandable segments" : "classic segments");
    for (int k = 0; k < 2; k++)
      if (a->modes[k]) free(m[k].r.peak_dump);
  }
  ca_trace_dispose(&t);
  return rc;
}

int main(int argc, char **argv) {
  args_t a;
  int first, rc = 0;
  if (parse_args(argc, argv, &a, &first)) return 2;
  if (a.table)
    printf("| trace | device | events | peak live | PyTorch reserved | cudalloc expandable: smallest capacity | "
           "cudalloc classic: smallest capacity | cudalloc peak reserved with ample memory (expandable / classic) |\n"
           "| --- | --- | --- | --- | --- | --- | --- | --- |\n");
  if (a.economy)
    printf("| trace | device | peak reserved / peak live | cuMemCreate | PyTorch's, 20 MiB pages | maps | set-access | "
           "unmaps | events recorded / queried / waits | PyTorch's segment maps in the trace |\n"
           "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |\n");
  for (int i = first; i < argc; i++) rc |= replay_file(argv[i], &a) != 0;
  return rc;
}
