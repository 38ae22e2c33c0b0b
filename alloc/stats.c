/* Statistics: kept per device under its lock, printed as one table. */
#include "stats.h"

#include <inttypes.h>
#include <string.h>

#include "arena.h"
#include "bins.h"
#include "device.h"
#include "tcache.h"

int64_t ca_stats_cached(const ca_device_t *d) {
  return d->stats.reserved_bytes.current - d->stats.allocated_bytes.current;
}

size_t ca_stats_largest_free(const ca_device_t *d) {
  size_t largest = 0;
  for (int p = 0; p < CA_POOL_COUNT; p++) {
    const ca_block_t *b = ca_bins_largest(&d->pools[p].bins);
    if (b && b->size > largest) largest = b->size;
  }
  return largest;
}

/* What the program sees: the core's counts, less what the threads' front
 * caches hold (LIVE to the core, freed to the program), plus their hits.
 * Peaks stay the core's: they count cached blocks as allocated. */
void ca_stats_snapshot(ca_device_t *d, cudalloc_stats_t *out) {
  *out = d->stats;
  ca_tcache_fold(d, out);
  /* counts that never fall: at their peak (fence.h's ca_stat_tick keeps no peak) */
  out->num_allocs.peak = out->num_allocs.current;
  out->num_frees.peak = out->num_frees.current;
  cudalloc_stat_t *cached = &d->stats.cached_bytes;
  cached->current = out->reserved_bytes.current - out->allocated_bytes.current;
  if (cached->current > cached->peak) cached->peak = cached->current;
  out->cached_bytes = *cached;
  out->largest_free_bytes = ca_stats_largest_free(d);
  int64_t peak_reserved = d->stats.reserved_bytes.peak;
  out->fragmentation = peak_reserved > 0 ? 1.0 - (double)d->stats.allocated_bytes.peak / (double)peak_reserved : 0.0;
}

/* 1536 -> "1.50 KiB". */
static const char *human(int64_t bytes, char *buf, size_t cap) {
  static const char *unit[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  double v = (double)bytes;
  int u = 0;
  while ((v >= 1024 || v <= -1024) && u < 4) v /= 1024, u++;
  if (u == 0) snprintf(buf, cap, "%" PRId64 " B", bytes);
  else snprintf(buf, cap, "%.2f %s", v, unit[u]);
  return buf;
}

static void print_bytes(FILE *f, const char *label, const cudalloc_stat_t *s) {
  char a[32], b[32], c[32];
  fprintf(f, "| %-22s | %12s | %12s | %14s |\n", label, human(s->current, a, sizeof a),
          human(s->peak, b, sizeof b), human(s->total, c, sizeof c));
}

static void print_count(FILE *f, const char *label, const cudalloc_stat_t *s) {
  fprintf(f, "| %-22s | %12" PRId64 " | %12" PRId64 " | %14" PRId64 " |\n", label, s->current, s->peak, s->total);
}

/* One pool's blocks by state, now (the counters above are per device). */
static void print_pool(FILE *f, const ca_pool_t *pool, size_t page) {
  int64_t bytes[3] = {0, 0, 0}, mapped = 0, segments = 0;   /* by ca_block_state_t */
  for (const ca_segment_t *seg = pool->segments; seg; seg = seg->next) {
    segments++;
    mapped += seg->classic ? (int64_t)seg->size : (int64_t)(seg->mapped_pages * page);
    for (const ca_block_t *b = seg->first; b; b = b->next)
      if (b->state != CA_FREE || b->kind == CA_MAPPED) bytes[b->state] += (int64_t)b->size;
  }
  char l[32], pe[32], fr[32], m[32];
  fprintf(f, "| %-6s | %8" PRId64 " | %10s | %10s | %10s | %10s |\n", pool->id == CA_POOL_SMALL ? "small" : "large",
          segments, human(bytes[CA_LIVE], l, sizeof l), human(bytes[CA_PENDING], pe, sizeof pe),
          human(bytes[CA_FREE], fr, sizeof fr), human(mapped, m, sizeof m));
}

static void print_device(FILE *f, ca_device_t *d, const cudalloc_stats_t *s) {
  const char *rule = "|========================================================================|\n";
  const char *line = "|------------------------------------------------------------------------|\n";
  char a[32], arena[16];
  fputs(rule, f);
  ca_arena_label(d, arena);   /* per arena: each is a table of its own (docs/design.md, arenas) */
  fprintf(f, "| cudalloc memory summary, device %d%s: %-*.*s|\n", d->ordinal, arena, 36 - (int)strlen(arena),
          36 - (int)strlen(arena), d->props.name);
  fprintf(f, "| %-19s | fragmentation %5.3f (1-peak alloc/peak reserved) |\n",
          ca_config.expandable_segments ? "expandable segments" : "classic segments", s->fragmentation);
  fputs(line, f);
  fprintf(f, "| %-22s | %12s | %12s | %14s |\n", "Metric", "Current", "Peak", "Total");
  fputs(line, f);
#define CA_PRINT_BYTES(name, doc) print_bytes(f, #name, &s->name);
  CUDALLOC_STAT_BYTES(CA_PRINT_BYTES)
#undef CA_PRINT_BYTES
  fputs(line, f);
#define CA_PRINT_COUNT(name, doc) print_count(f, #name, &s->name);
  CUDALLOC_STAT_COUNTS(CA_PRINT_COUNT)
#undef CA_PRINT_COUNT
  fputs(line, f);
  fprintf(f, "| %-6s | %8s | %10s | %10s | %10s | %10s |\n", "Pool", "segments", "live", "pending", "free",
          "mapped");
  fputs(line, f);
  for (int p = 0; p < CA_POOL_COUNT; p++) print_pool(f, &d->pools[p], d->page);
  fputs(line, f);
  fprintf(f, "| largest free block: %-51s|\n", human((int64_t)s->largest_free_bytes, a, sizeof a));
  fputs(rule, f);
}

static void print_one(ca_device_t *d, void *f) {
  cudalloc_stats_t s;
  ca_stats_snapshot(d, &s);
  print_device(f, d, &s);
}

/* Pinned host memory, when the program used it. */
static void print_pinned(FILE *f) {
  cudalloc_pinned_stats_t s;
  cudalloc_get_pinned_stats(&s);
  if (!s.pinned_num_allocs.total && !s.pinned_num_bad_frees.total) return;
  const char *rule = "|========================================================================|\n";
  const char *line = "|------------------------------------------------------------------------|\n";
  fputs(rule, f);
  fprintf(f, "| %-70s |\n", "cudalloc pinned host memory");
  fputs(line, f);
#define CA_PRINT_BYTES(name, doc) print_bytes(f, &#name[7], &s.name);
  CUDALLOC_STAT_PINNED_BYTES(CA_PRINT_BYTES)
#undef CA_PRINT_BYTES
  fputs(line, f);
#define CA_PRINT_COUNT(name, doc) print_count(f, &#name[7], &s.name);
  CUDALLOC_STAT_PINNED_COUNTS(CA_PRINT_COUNT)
#undef CA_PRINT_COUNT
  fputs(rule, f);
}

void ca_stats_print(FILE *f) {
  if (!ca_ready()) fprintf(f, "cudalloc: not started\n");
  ca_each_device(print_one, f);
  print_pinned(f);
}
