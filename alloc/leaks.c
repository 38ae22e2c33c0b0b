/* The leak report: every block still live, grouped by call stack (and
 * device), biggest first, in exact bytes, with the thread, stream and
 * step of the allocation and every frame of its stack. Text in
 * compute-sanitizer's --leak-check shape, so that people and scripts that
 * read that one read this one; and JSON (docs/reports.md has the schema). */
#include "leaks.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "device.h"
#include "pinned.h"
#include "step.h"
#include "symbolize.h"
#include "tcache.h"
#include "track.h"

// ----------------------------------------------------------------------------
// Groups
// ----------------------------------------------------------------------------

#define SHOWN_ADDRS 4

typedef struct group_s {
  void *site;
  int device;
  int64_t bytes, count;
  uintptr_t addrs[SHOWN_ADDRS];   /* the lowest-step ones first */
  uint32_t step_lo, step_hi, tid;
  ca_stream_t stream;             /* of the earliest allocation */
  bool threads, streams;          /* more than one of them */
} group_t;

typedef struct groups_s {
  group_t *g;
  size_t n, cap;
  bool short_of_memory;
} groups_t;

/* device: its ordinal, or PINNED for pinned host memory. */
#define PINNED (-1)

static void collect_map(groups_t *gs, const ca_ptrmap_t *live, int device) {
  for (size_t i = 0; i < live->cap; i++) {
    ca_block_t *b = live->vals[i];
    if (!b || ca_tcache_holds(b)) continue;   /* freed into a thread's front cache */
    if (gs->n == gs->cap) {
      size_t cap = gs->cap ? 2 * gs->cap : 64;
      group_t *g = realloc(gs->g, cap * sizeof *g);
      if (!g) {
        gs->short_of_memory = true;
        return;
      }
      gs->g = g;
      gs->cap = cap;
    }
    gs->g[gs->n++] = (group_t){b->site, device, (int64_t)b->requested, 1, {b->addr}, b->step, b->step,
                               b->tid, b->stream, false, false};
  }
}

/* The caches held still: a hit writes a block's site, size and stamps. */
static void collect(ca_device_t *d, void *arg) {
  ca_tcache_quiesce();
  collect_map(arg, &d->live, d->ordinal);
  ca_tcache_resume();
}

static int by_site(const void *a, const void *b) {
  const group_t *x = a, *y = b;
  if (x->device != y->device) return x->device < y->device ? -1 : 1;
  if (x->site != y->site) return (uintptr_t)x->site < (uintptr_t)y->site ? -1 : 1;
  if (x->step_lo != y->step_lo) return x->step_lo < y->step_lo ? -1 : 1;
  return x->addrs[0] < y->addrs[0] ? -1 : x->addrs[0] > y->addrs[0];
}

/* Biggest first; ties by count, then in a fixed order. */
static int by_bytes(const void *a, const void *b) {
  const group_t *x = a, *y = b;
  if (x->bytes != y->bytes) return x->bytes > y->bytes ? -1 : 1;
  if (x->count != y->count) return x->count > y->count ? -1 : 1;
  return by_site(a, b);
}

static void merge(group_t *into, const group_t *g) {
  if (into->count < SHOWN_ADDRS) into->addrs[into->count] = g->addrs[0];
  into->bytes += g->bytes;
  into->count += g->count;
  into->step_hi = g->step_hi > into->step_hi ? g->step_hi : into->step_hi;
  into->threads |= g->tid != into->tid;
  into->streams |= g->stream != into->stream;
}

/* Every live block, grouped; the caller frees gs->g. */
static void live_groups(groups_t *gs) {
  *gs = (groups_t){0};
  ca_each_device(collect, gs);
  const ca_ptrmap_t *pinned = ca_pinned_lock_live();
  if (pinned) {
    collect_map(gs, pinned, PINNED);
    ca_pinned_unlock();
  }
  if (!gs->n) return;
  qsort(gs->g, gs->n, sizeof *gs->g, by_site);   /* each group's blocks by step */
  size_t m = 0;
  for (size_t i = 0; i < gs->n; i++) {
    group_t *last = m ? &gs->g[m - 1] : NULL;
    if (last && last->site == gs->g[i].site && last->device == gs->g[i].device) merge(last, &gs->g[i]);
    else gs->g[m++] = gs->g[i];
  }
  gs->n = m;
  qsort(gs->g, gs->n, sizeof *gs->g, by_bytes);
}

static void count_live(ca_device_t *d, void *arg) {
  *(size_t *)arg += d->live.count - (size_t)ca_tcache_blocks(d);   /* cached blocks are freed */
}

size_t ca_leaks_live(void) {
  size_t n = 0;
  ca_each_device(count_live, &n);
  const ca_ptrmap_t *pinned = ca_pinned_lock_live();
  if (pinned) {
    n += pinned->count;
    ca_pinned_unlock();
  }
  return n;
}

static const char *stream_name(ca_stream_t s, char *buf, size_t cap) {
  if (s == CA_STREAM_LEGACY) return "the legacy default stream";
  if (s == CA_STREAM_PER_THREAD) return "the per-thread default stream";
  snprintf(buf, cap, "stream %p", s);
  return buf;
}

static const char *track_mode(void) {
  static const char *const modes[] = {"off", "caller", "stack", "python", "backtrace"};
  return ca_config.track < sizeof modes / sizeof *modes ? modes[ca_config.track] : "?";
}

// ----------------------------------------------------------------------------
// Text
// ----------------------------------------------------------------------------

#define P "========= "

static void print_group(FILE *f, const group_t *g) {
  fprintf(f, P "Leaked %" PRId64 " bytes", g->bytes);
  if (g->count > 1) fprintf(f, " in %" PRId64 " allocations", g->count);
  fprintf(f, " at");
  for (int64_t i = 0; i < g->count && i < SHOWN_ADDRS; i++) fprintf(f, "%s 0x%" PRIxPTR, i ? "," : "", g->addrs[i]);
  if (g->count > SHOWN_ADDRS) fprintf(f, " and %" PRId64 " more", g->count - SHOWN_ADDRS);
  if (g->device == PINNED) fprintf(f, " of pinned host memory\n");
  else fprintf(f, " on device %d\n", g->device);
  char sbuf[48];
  if (g->device != PINNED) {   /* pinned blocks are not stamped (pinned.c is below this module) */
    fprintf(f, P "    made by thread %" PRIu32 "%s on %s%s, in step %" PRIu32, g->tid, g->threads ? " (and others)" : "",
            stream_name(g->stream, sbuf, sizeof sbuf), g->streams ? " (and others)" : "", g->step_lo);
    if (g->step_hi != g->step_lo) fprintf(f, " to %" PRIu32, g->step_hi);
    fprintf(f, "\n");
  }
  fprintf(f, P "    Saved host backtrace up to the allocation call\n");
  ca_track_print(f, g->site, P "    ");
  fprintf(f, "=========\n");
}

int64_t ca_leaks_report(FILE *f, size_t max_groups) {
  groups_t gs;
  live_groups(&gs);
  int64_t bytes = 0, count = 0, pbytes = 0, pcount = 0;
  for (size_t i = 0; i < gs.n; i++) {
    if (!max_groups || i < max_groups) print_group(f, &gs.g[i]);
    *(gs.g[i].device == PINNED ? &pbytes : &bytes) += gs.g[i].bytes;
    *(gs.g[i].device == PINNED ? &pcount : &count) += gs.g[i].count;
  }
  if (max_groups && gs.n > max_groups)
    fprintf(f, P "... and %zu more call stacks (the report files list them all: the `report` setting)\n",
            gs.n - max_groups);
  if (gs.short_of_memory) fprintf(f, P "(out of host memory: not every live block is counted)\n");
  if (count || !pcount) fprintf(f, P "LEAK SUMMARY: %" PRId64 " bytes leaked in %" PRId64 " allocations\n", bytes, count);
  if (pcount)
    fprintf(f, P "LEAK SUMMARY: %" PRId64 " bytes leaked in %" PRId64 " allocations (pinned host memory)\n", pbytes,
            pcount);
  free(gs.g);
  return bytes + pbytes;
}

// ----------------------------------------------------------------------------
// JSON
// ----------------------------------------------------------------------------

static void json_str(FILE *f, const char *s) {
  fputc('"', f);
  for (; *s; s++) {
    unsigned char c = (unsigned char)*s;
    if (c == '"' || c == '\\') fprintf(f, "\\%c", c);
    else if (c < 0x20) fprintf(f, "\\u%04x", c);
    else fputc(c, f);
  }
  fputc('"', f);
}

static void json_frames(FILE *f, const void *site) {
  const ca_pyframe_t *const *py;
  void *const *frames;
  int npy = ca_track_py_frames(site, &py), n = ca_track_frames(site, &frames);
  fprintf(f, ",\n     \"python\": [");
  for (int i = 0; i < npy; i++) {
    fprintf(f, "%s{\"function\": ", i ? ", " : "");
    json_str(f, py[i]->func);
    fprintf(f, ", \"file\": ");
    json_str(f, py[i]->file);
    fprintf(f, ", \"line\": %d}", py[i]->line);
  }
  fprintf(f, "],\n     \"frames\": [");
  for (int i = 0; i < n; i++) {
    ca_sym_t s[8];
    ca_sym_where_t w;
    int k = ca_symbolize(frames[i], true, s, 8, &w);
    fprintf(f, "%s\n       {\"pc\": \"%p\", \"module\": ", i ? "," : "", frames[i]);
    json_str(f, w.module);
    fprintf(f, ", \"offset\": \"0x%" PRIxPTR "\", \"debug_info\": %s, \"functions\": [", w.offset,
            w.debug_info ? "true" : "false");
    for (int j = 0; j < k; j++) {
      fprintf(f, "%s{\"function\": ", j ? ", " : "");
      json_str(f, s[j].func);
      fprintf(f, ", \"file\": ");
      json_str(f, s[j].file);
      fprintf(f, ", \"line\": %d, \"inlined\": %s}", s[j].line, s[j].inlined ? "true" : "false");
    }
    fprintf(f, "]}");
  }
  fprintf(f, "]");
}

void ca_leaks_json(FILE *f) {
  groups_t gs;
  live_groups(&gs);
  int64_t bytes = 0, count = 0, pbytes = 0, pcount = 0;
  for (size_t i = 0; i < gs.n; i++) {
    *(gs.g[i].device == PINNED ? &pbytes : &bytes) += gs.g[i].bytes;
    *(gs.g[i].device == PINNED ? &pcount : &count) += gs.g[i].count;
  }
  fprintf(f, "{\n  \"schema\": \"" CA_LEAKS_SCHEMA "\",\n  \"version\": \"%d.%d.%d\",\n  \"pid\": %d,\n",
          CUDALLOC_VERSION_MAJOR, CUDALLOC_VERSION_MINOR, CUDALLOC_VERSION_PATCH, (int)getpid());
  fprintf(f, "  \"track\": \"%s\",\n  \"track_depth\": %u,\n  \"complete\": %s,\n", track_mode(),
          ca_config.track_depth, gs.short_of_memory ? "false" : "true");
  fprintf(f, "  \"leaked_bytes\": %" PRId64 ",\n  \"leaked_allocations\": %" PRId64 ",\n", bytes, count);
  fprintf(f, "  \"pinned_leaked_bytes\": %" PRId64 ",\n  \"pinned_leaked_allocations\": %" PRId64 ",\n  \"leaks\": [",
          pbytes, pcount);
  for (size_t i = 0; i < gs.n; i++) {
    const group_t *g = &gs.g[i];
    char name[1024], sbuf[48];
    ca_track_name(g->site, name, sizeof name);
    fprintf(f, "%s\n    {\"bytes\": %" PRId64 ", \"allocations\": %" PRId64 ", \"memory\": \"%s\", \"device\": %d,\n"
               "     \"addresses\": [",
            i ? "," : "", g->bytes, g->count, g->device == PINNED ? "pinned host" : "device", g->device);
    for (int64_t k = 0; k < g->count && k < SHOWN_ADDRS; k++) fprintf(f, "%s\"0x%" PRIxPTR "\"", k ? ", " : "", g->addrs[k]);
    fprintf(f, "],\n     \"thread\": %" PRIu32 ", \"other_threads\": %s, \"stream\": ", g->tid,
            g->threads ? "true" : "false");
    json_str(f, stream_name(g->stream, sbuf, sizeof sbuf));
    fprintf(f, ", \"other_streams\": %s, \"first_step\": %" PRIu32 ", \"last_step\": %" PRIu32 ",\n     \"site\": ",
            g->streams ? "true" : "false", g->step_lo, g->step_hi);
    json_str(f, name);
    json_frames(f, g->site);
    fprintf(f, "}");
  }
  fprintf(f, "\n  ]\n}\n");
  free(gs.g);
}
