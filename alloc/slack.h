/* "slack.c": waiting for pending frees instead of growing past the slack. */
#ifndef CUDALLOC_SLACK_H
#define CUDALLOC_SLACK_H

#include "types.h"

/* Before a pool grows for `rounded` bytes: while growing would leave
 * reserved memory more than CA_PAGE_SLACK (and 20 MiB) above allocated
 * memory, and freed blocks worth more than half of that (and 20 MiB)
 * still wait for device work, waits for them (oldest fence first) and
 * takes a block once one fits. Expandable segments only. Returns the
 * block, or NULL: grow. */
ca_block_t *ca_slack_wait_before_growing(ca_device_t *d, size_t rounded, ca_stream_t stream);
/* The same, waiting only for fences sealed before the call: the open
 * batches, other streams' latest frees, stay where they are (settle.c). */
ca_block_t *ca_slack_wait_sealed(ca_device_t *d, size_t rounded, ca_stream_t stream);

/* A wait stalls the host until the device catches up: worth it only for
 * more memory than this, PyTorch's page of expandable segments (a growth
 * of its large pool reserves up to that much beyond the request). */
#define CA_SLACK_FLOOR (20.0 * 1024 * 1024)

/* Growing by `rounded` bytes leaves reserved memory within the slack:
 * CA_PAGE_SLACK above allocated memory (this request included), and
 * CA_SLACK_FLOOR. Past it, ca_slack_wait_before_growing may wait. */
bool ca_slack_room(const ca_device_t *d, size_t rounded);

/* pending bytes are worth a wait (or a seal): more than half of
 * CA_PAGE_SLACK over allocated memory, and more than CA_SLACK_FLOOR. */
bool ca_slack_worth_it(const ca_device_t *d, double pending);

#endif /* CUDALLOC_SLACK_H */
