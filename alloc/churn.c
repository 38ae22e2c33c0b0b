/* Pages that growths keep moving out of a place and back.
 *
 * A growth short of memory (pages.c) moves pages out of free blocks
 * instead of creating new ones, so that reserved memory stays within
 * CA_PAGE_SLACK of allocated memory. When the program's blocks do not
 * fit the free blocks' shapes (a repeated sequence of mixed sizes), the
 * block robbed is the one a later request needs: a growth moves the
 * pages back, and so on at every repetition, each move an unmap, a map
 * and a set-access (with their slow paths' event calls), and the
 * sequence never settles (docs/benchmarks.md, "A repeated sequence
 * settles"). Every page remembers how often growths mapped it back where
 * growths had taken it from; one that came back CA_CHURN_RETURNS times
 * stays where it is, and the growth creates the page it needs instead.
 * Workloads whose shape changes now and then keep their pages moving:
 * on the shared snapshots reserved memory stays within 1.02 x peak live
 * (test_replay_economy), where 2 returns let it reach 1.08. Memory stays
 * bounded: pages stay only while reserved memory is within page_churn_cap
 * (0.5 by default; 0: every page moves, as before) above peak allocated memory, and memory short for real (a create
 * refused) moves any page. Trims (garbage collection, empty cache, the
 * out-of-memory ladder's last rung) move pages regardless. The price is
 * the memory a settled layout needs: bench_alloc's GPU-like sequence
 * settles at 1.31 x its peak allocated bytes where moving pages held
 * 1.19 x (docs/benchmarks.md). */
#include "churn.h"

#define OUT 0x80u   /* moved out by a growth, not mapped since */
#define RETURNS 0x7fu

void ca_churn_moved_out(ca_segment_t *seg, size_t from, size_t to) {
  for (size_t i = from; i < to; i++) seg->churn[i] |= OUT;
}

/* Peak allocated bytes as growths saw them: a program that resets the
 * peaks every step (torch.cuda.reset_peak_memory_stats) would otherwise
 * lower the cap to what is live early in the step, and move its pages. */
static int64_t high_water(ca_device_t *d) {
  int64_t peak = d->stats.allocated_bytes.peak;
  if (peak > d->churn_high && !CA_DEBUG(churn_reset_cap)) d->churn_high = peak;
  return CA_DEBUG(churn_reset_cap) ? peak : d->churn_high;
}

void ca_churn_mapped_back(ca_segment_t *seg, size_t first, size_t n) {
  high_water(seg->pool->dev);
  for (size_t i = first; i < first + n; i++) {
    uint8_t c = seg->churn[i];
    if (!(c & OUT)) continue;
    unsigned back = (c & RETURNS) + 1u;
    seg->churn[i] = (uint8_t)(back < CA_CHURN_RETURNS ? back : CA_CHURN_RETURNS);
  }
}

/* Reserved memory with `add` more bytes is past the cap over peak allocated memory. */
static bool past_cap(ca_device_t *d, size_t add) {
  double reserved = (double)d->stats.reserved_bytes.current + (double)add;
  return !CA_DEBUG(churn_no_cap) && reserved > (1.0 + ca_config.page_churn_cap) * (double)high_water(d);
}

size_t ca_churn_movable(ca_device_t *d, const ca_segment_t *seg, size_t top, size_t want, size_t add) {
  if (CA_DEBUG(churn_moves_all) || ca_config.page_churn_cap <= 0 || past_cap(d, add)) return want;
  size_t n = 0;
  while (n < want && (seg->churn[top - 1 - n] & RETURNS) < CA_CHURN_RETURNS) n++;
  return n;
}
