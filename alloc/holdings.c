/* Where a device's reserved memory is: what a diagnosis of "why did
 * reserved memory pass live memory here" needs (cudalloc-replay
 * --dump-peak prints it at the event that set peak reserved). Walks every
 * free block and every queue: not for the allocation path. */
#include "holdings.h"

#include "arena.h"
#include "bins.h"
#include "core.h"
#include "device.h"
#include "qtable.h"

#define CLASSES 24   /* free blocks by size: [4 KiB << k, 4 KiB << (k+1)) */
#define MAX_QUEUES 32   /* queues printed one by one; the rest summed */

static double mib(double bytes) { return bytes / (1024.0 * 1024.0); }

static bool by_class(ca_block_t *b, void *arg) {
  size_t *bytes = arg;
  int k = 0;
  for (size_t s = b->size >> 12; s > 1 && k < CLASSES - 1; s >>= 1) k++;
  bytes[k] += b->size;
  return true;
}

static void print_pool(const ca_pool_t *pool, FILE *f) {
  const ca_block_t *largest = ca_bins_largest(&pool->bins);
  fprintf(f, "  %s pool: free %.1f MiB in %zu blocks (largest %.2f MiB), %zu holes\n",
          pool->id == CA_POOL_SMALL ? "small" : "large", mib((double)pool->bins.bytes), pool->bins.count,
          largest ? mib((double)largest->size) : 0.0, pool->holes.count);
  size_t bytes[CLASSES] = {0};
  ca_bins_each(&pool->bins, by_class, bytes);
  if (!pool->bins.count) return;
  fputs("    free by size:", f);
  for (int k = 0; k < CLASSES; k++)
    if (bytes[k]) fprintf(f, " >=%zu KiB: %.1f MiB;", (size_t)4 << k, mib((double)bytes[k]));
  fputc('\n', f);
}

static size_t list_bytes(const ca_block_t *b) {
  size_t n = 0;
  for (; b; b = b->fence_next) n += b->size;
  return n;
}

typedef struct {
  size_t reusable, open, sealed, fences;
} queue_sum_t;

static queue_sum_t sum_queue(const ca_queue_t *q) {
  queue_sum_t s = {0};
  for (int p = 0; p < CA_POOL_COUNT; p++) s.reusable += q->bins[p] ? q->bins[p]->bytes : 0;
  s.open = list_bytes(q->open.blocks);
  for (const ca_fence_t *fc = q->head; fc; fc = fc->next, s.fences++) s.sealed += list_bytes(fc->blocks);
  return s;
}

static void print_queue(const char *name, queue_sum_t s, FILE *f) {
  fprintf(f, "  %s: open %.1f MiB, sealed %.1f MiB in %zu fences; reusable on its stream %.1f MiB\n", name,
          mib((double)s.open), mib((double)s.sealed), s.fences, mib((double)s.reusable));
}

void ca_holdings_print(ca_device_t *d, FILE *f) {
  const cudalloc_stats_t *st = &d->stats;
  char arena[16];
  fprintf(f, "device %d%s: reserved %.1f MiB, mapped %.1f MiB, allocated %.1f MiB (requested %.1f MiB), "
          "pending %.1f MiB, page cache %.1f MiB\n", d->ordinal, ca_arena_label(d, arena), mib((double)st->reserved_bytes.current),
          mib((double)st->mapped_bytes.current), mib((double)st->allocated_bytes.current),
          mib((double)st->requested_bytes.current),
          mib((double)(st->active_bytes.current - st->allocated_bytes.current)),
          mib((double)d->page_cache_count * (double)d->page));
  for (int p = 0; p < CA_POOL_COUNT; p++) print_pool(&d->pools[p], f);
  print_queue("epoch queue (cudaFree)", sum_queue(&d->epoch), f);
  print_queue("capture queue", sum_queue(&d->held), f);
  size_t n = 0;
  queue_sum_t rest = {0};
  for (const ca_queue_t *q = ca_qlist_first(d, CA_QL_ALL); q; q = ca_qlist_next(q, CA_QL_ALL), n++) {
    queue_sum_t s = sum_queue(q);
    if (n < MAX_QUEUES) {
      char name[64];
      snprintf(name, sizeof name, "queue of stream %p", (void *)q->stream);
      print_queue(name, s, f);
      continue;
    }
    rest.reusable += s.reusable;
    rest.open += s.open;
    rest.sealed += s.sealed;
    rest.fences += s.fences;
  }
  if (n > MAX_QUEUES)
    fprintf(f, "  %zu more queues: open %.1f MiB, sealed %.1f MiB in %zu fences; reusable on their streams %.1f MiB\n",
            n - MAX_QUEUES, mib((double)rest.open), mib((double)rest.sealed), rest.fences, mib((double)rest.reusable));
}

/* Every arena of dev, each its own section (arena.h), one lock at a time. */
CUresult ca_holdings_dump(int dev, FILE *f) {
  ca_device_t *first;
  CUresult rc = ca_device_get(dev, &first);
  if (rc) return rc;
  for (int k = 0; k < (int)ca_config.arenas; k++) {
    ca_device_t *d = ca_arena_at(dev, k);
    if (!d) continue;
    ca_devlock_take(&d->lock);
    if (d->ready) ca_holdings_print(d, f);
    ca_devlock_release(&d->lock);
  }
  return CUDA_SUCCESS;
}
