/* "holdings.c": where a device's reserved memory is, for diagnosis. */
#ifndef CUDALLOC_HOLDINGS_H
#define CUDALLOC_HOLDINGS_H

#include <stdio.h>

#include "types.h"

/* Writes to f, d locked: reserved, mapped, allocated and pending bytes,
 * the page cache, each pool's free blocks by size class and its holes,
 * and what waits in each queue (reusable at once on its stream, open,
 * sealed). */
void ca_holdings_print(ca_device_t *d, FILE *f);

#endif /* CUDALLOC_HOLDINGS_H */
