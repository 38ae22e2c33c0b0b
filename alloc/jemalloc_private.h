/* The private copy of jemalloc linked into cudalloc (alloc/jemalloc.mk):
 * the same API under the prefix ca_je_, so that it never stands in for the
 * program's malloc. Only the pinned cache (pinned*.c) calls it. The types
 * and MALLOCX_* flags come from jemalloc's own header. */
#ifndef CUDALLOC_JEMALLOC_PRIVATE_H
#define CUDALLOC_JEMALLOC_PRIVATE_H

#include <jemalloc/jemalloc.h>

void *ca_je_mallocx(size_t size, int flags);
void ca_je_dallocx(void *ptr, int flags);
size_t ca_je_sallocx(const void *ptr, int flags);
int ca_je_mallctl(const char *name, void *oldp, size_t *oldlenp, void *newp, size_t newlen);

#endif /* CUDALLOC_JEMALLOC_PRIVATE_H */
