/* Waiting for pending frees instead of growing past the slack.
 *
 * A freed block waits in its stream's queue until the work issued before
 * its free completes: that stream may reuse it at once, but it merges with
 * no free neighbour, lends no page to a growth, and no other stream may
 * take it. With memory to spare the ladder used to grow past such blocks,
 * and pending memory piled up beside new pages (the 10-stream LLaMA
 * snapshot reserved 1.46 x its peak live bytes, single-stream ones up to
 * 1.055 x: docs/benchmarks.md, make economy). Once a growth would leave
 * reserved memory more than CA_PAGE_SLACK above allocated memory (the same
 * rule that lets pages move out of free holes, pages.c), memory counts as
 * short: the pending frees are waited for, oldest first, before anything
 * is created, while they are worth more than half the slack and a floor.
 * A wait blocks the host until the device has done the work that the
 * fence covers, as PyTorch's allocator does before it frees cached
 * memory; with the slack unspent, nothing waits. Classic segments are
 * left alone: their memory cannot move, so a wait would only delay the
 * same growth. wait_before_growing:false grows at once, as before. */
#include "slack.h"

#include "blocks.h"
#include "fence.h"
#include "pool.h"

/* Growing by `rounded` bytes of new memory would pass the slack: more than
 * CA_PAGE_SLACK above allocated memory, this request included, and by more
 * than CA_SLACK_FLOOR. */
static bool past_slack(const ca_device_t *d, size_t rounded) {
  double reserved = (double)d->stats.reserved_bytes.current + (double)rounded;
  double held = (double)d->stats.allocated_bytes.current + (double)rounded;
  return reserved > held * (1.0 + CA_PAGE_SLACK) + CA_SLACK_FLOOR;
}

/* Freed blocks that still wait for device work (active memory counts
 * them) and are worth a wait: more than half the slack and CA_SLACK_FLOOR.
 * Less cannot push reserved memory past the slack by itself, free memory
 * being what pages move out of (on the shared snapshots half the slack
 * spares up to 5 waits in 6 at the same peaks). */
bool ca_slack_worth_it(const ca_device_t *d, double pending) {
  double half_slack = 0.5 * CA_PAGE_SLACK * (double)d->stats.allocated_bytes.current;
  return pending > (half_slack > CA_SLACK_FLOOR ? half_slack : CA_SLACK_FLOOR);
}

static bool pending_worth_waiting(const ca_device_t *d) {
  return ca_slack_worth_it(d, (double)(d->stats.active_bytes.current - d->stats.allocated_bytes.current));
}

bool ca_slack_room(const ca_device_t *d, size_t rounded) { return !past_slack(d, rounded); }

/* sealed_only: fences sealed before, none of the open batches (settle.c). */
static ca_block_t *wait_before_growing(ca_device_t *d, size_t rounded, ca_stream_t stream, bool sealed_only) {
  if (!ca_config.expandable_segments || !ca_config.wait_before_growing) return NULL;
  ca_pool_t *pool = ca_pool_for(d, rounded);
  size_t released;
  while (past_slack(d, rounded) && pending_worth_waiting(d) &&
         (sealed_only ? ca_fences_wait_sealed(d, &released) : ca_fences_wait_one(d, &released))) {
    ca_block_t *b = released ? ca_pool_take(d, pool, rounded, stream) : NULL;
    if (b) return b;
  }
  return NULL;
}

ca_block_t *ca_slack_wait_before_growing(ca_device_t *d, size_t rounded, ca_stream_t stream) {
  return wait_before_growing(d, rounded, stream, false);
}

ca_block_t *ca_slack_wait_sealed(ca_device_t *d, size_t rounded, ca_stream_t stream) {
  return wait_before_growing(d, rounded, stream, true);
}
