/* Peer access: after cudaDeviceEnablePeerAccess (or cuCtxEnablePeerAccess),
 * kernels of one device may touch another device's memory. Memory mapped
 * with the virtual memory API is different: a device reaches a mapping only
 * where cuMemSetAccess named it. So each device remembers the devices that
 * enabled access to it (d->peers, set by ca_peer_access_enabled in
 * lifecycle.c); every access grant of its pages names them too, and
 * enabling a peer grants it every range mapped so far. PyTorch's expandable
 * segments do the same. */
#include "peers.h"

CUresult ca_grant_access(ca_device_t *d, uintptr_t va, size_t size) {
  const ca_backend_t *be = ca_state.be;
  CUresult rc = CA_CALL(d, backend_set_access, be->set_access(d->ordinal, va, size));
  for (int p = 0; !rc && p < ca_state.ndevices; p++)
    if (p != d->ordinal && (d->peers >> p & 1))
      rc = CA_CALL(d, backend_set_access, be->set_access(p, va, size));
  return rc;
}

static CUresult grant_one(ca_device_t *d, int peer, uintptr_t va, size_t size) {
  return CA_CALL(d, backend_set_access, ca_state.be->set_access(peer, va, size));
}

static bool page_mapped(const ca_segment_t *seg, size_t i) { return seg->mapped[i / 64] >> (i % 64) & 1; }

/* Grants peer each run of mapped pages of an expandable segment (a run is
 * whole mappings: pages are mapped one by one). */
static CUresult grant_mapped_runs(ca_device_t *d, ca_segment_t *seg, int peer) {
  CUresult rc = CUDA_SUCCESS;
  for (size_t i = 0; !rc && i < seg->npages;) {
    if (!page_mapped(seg, i)) {
      i++;
      continue;
    }
    size_t j = i;
    while (j < seg->npages && page_mapped(seg, j)) j++;
    rc = grant_one(d, peer, seg->base + i * d->page, (j - i) * d->page);
    i = j;
  }
  return rc;
}

CUresult ca_grant_peer(ca_device_t *d, int peer) {
  CUresult rc = CUDA_SUCCESS;
  for (int p = 0; p < CA_POOL_COUNT; p++)
    for (ca_segment_t *seg = d->pools[p].segments; !rc && seg; seg = seg->next)
      rc = seg->classic ? grant_one(d, peer, seg->base, seg->size) : grant_mapped_runs(d, seg, peer);
  return rc;
}
