/* "alloc.c": the public API's stream-ordered pair (cudalloc_malloc,
 * cudalloc_free in api.c), with the allocation's and the free's front
 * inlined and the runtime's error code made only on failure, so that a
 * front-cache hit or a cached free makes no call on its way from the
 * program to the cache. */
#ifndef CUDALLOC_ENTRY_H
#define CUDALLOC_ENTRY_H

#include "core.h"

/* ca_malloc(ptr, size, stream, CA_ALLOC_ASYNC, caller), as a cudaError_t. */
cudaError_t ca_entry_malloc(void **ptr, size_t size, ca_stream_t stream, void *caller);
/* ca_free(ptr, stream), as a cudaError_t. */
cudaError_t ca_entry_free(void *ptr, ca_stream_t stream);

#endif /* CUDALLOC_ENTRY_H */
