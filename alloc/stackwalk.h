/* "stackwalk.c": the program's stack above an allocating call, fast enough to
 * take on every allocation. */
#ifndef CUDALLOC_STACKWALK_H
#define CUDALLOC_STACKWALK_H

#include <stdbool.h>

/* Turns frames[0..n) into the stored call site (track.c interns them). */
typedef void *(*ca_stackwalk_intern_fn)(void *const *frames, int n);

/* The call site of the allocation whose return address into the program
 * is `caller`, `depth` frames deep (caller first), as intern() stored it.
 * A stack seen before costs one table probe and one load and compare per
 * frame (each frame's return address is checked in the stack slot it was
 * found in); a new one is unwound from the DWARF call frame information
 * once. `cached` false unwinds every time (the reference, track:backtrace). */
void *ca_stackwalk_site(void *caller, int depth, bool cached, ca_stackwalk_intern_fn intern);

/* Drops the table of stacks seen (the stored sites it names are freed by
 * their owner). */
void ca_stackwalk_forget(void);

#endif /* CUDALLOC_STACKWALK_H */
