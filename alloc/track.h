/* "track.c": call sites of live blocks. */
#ifndef CUDALLOC_TRACK_H
#define CUDALLOC_TRACK_H

#include <stddef.h>

typedef struct ca_stack_s ca_stack_t;
/* What a block stores as its call site, as deep as the `track` setting
 * asks (NULL with track:off). caller is the allocating call's return
 * address; with track:backtrace the program's frames start there, and
 * identical stacks are stored once (the same pointer). */
void *ca_track_site(void *caller);
/* The frames of a stored call site, innermost first; returns their count. */
int ca_track_frames(const void *site, void *const **frames);
/* One line naming a program frame: function, module, address. */
void ca_track_symbolize(void *pc, char *buf, size_t cap);
/* One line naming a call site by its innermost frame, the allocating line
 * of the program: what every report prints for a site. */
void ca_track_name(const void *site, char *buf, size_t cap);
/* Frees every stored backtrace (at shutdown). */
void ca_track_forget(void);

#endif /* CUDALLOC_TRACK_H */
