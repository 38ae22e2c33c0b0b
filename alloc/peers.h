/* "peers.c": access grants for a device and the peers that enabled access
 * to its memory. */
#ifndef CUDALLOC_PEERS_H
#define CUDALLOC_PEERS_H

#include "types.h"

/* set_access of [va, va+size) of d's memory for d and each of d->peers. */
CUresult ca_grant_access(ca_device_t *d, uintptr_t va, size_t size);
/* Grants peer every range of d mapped so far (d locked). */
CUresult ca_grant_peer(ca_device_t *d, int peer);

#endif /* CUDALLOC_PEERS_H */
