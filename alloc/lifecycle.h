/* "lifecycle.c": what the rest of the core does not call, but the exit
 * handler's tests must: ca_exit is the atexit handler the core arms at its
 * first start (summary and reports, then no further device call). */
#ifndef CUDALLOC_LIFECYCLE_H
#define CUDALLOC_LIFECYCLE_H

void ca_exit(void);

#endif /* CUDALLOC_LIFECYCLE_H */
