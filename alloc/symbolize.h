/* "symbolize.c": a program address as function, file:line and the chain of
 * functions inlined there, from the program's debug information. */
#ifndef CUDALLOC_SYMBOLIZE_H
#define CUDALLOC_SYMBOLIZE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* One function at an address: the innermost inlined one first, then each
 * function it was inlined into, the real (outermost) function last. */
typedef struct ca_sym_s {
  char func[128];          /* "" when no symbol covers the address */
  uintptr_t func_off;      /* the address's offset in func (from the symbol table) */
  char file[192];          /* "" without debug information */
  int line;
  bool inlined;            /* inlined into the next entry */
} ca_sym_t;

/* Where an address is: the module (file name without directories), the
 * address's offset in it, and whether its functions and lines come from
 * DWARF (libdw) or only from the symbol table. */
typedef struct ca_sym_where_s {
  char module[96];
  uintptr_t offset;
  bool debug_info;
  bool libdw;              /* libdw.so.1 could be loaded */
} ca_sym_where_t;

/* Names pc. `ret` says pc is a return address (the call is just before it:
 * its line is the call's). Fills up to max entries, returns their count
 * (at least 1 when max > 0). Thread-safe; slow (reads debug information
 * the first time): for reports only. */
int ca_symbolize(void *pc, bool ret, ca_sym_t *out, int max, ca_sym_where_t *where);

/* Drops the loaded debug information (at shutdown). */
void ca_symbolize_forget(void);

#endif /* CUDALLOC_SYMBOLIZE_H */
