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

#endif /* CUDALLOC_SLACK_H */
