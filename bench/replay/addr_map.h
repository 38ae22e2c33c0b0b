/* A map from a 64-bit key (a device address in a trace) to a 64-bit value,
 * open addressing: the importers and the replay look up every free's block
 * by its address, tens of thousands of times per trace. */
#ifndef CUDALLOC_ADDR_MAP_H
#define CUDALLOC_ADDR_MAP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct {
  uint64_t *keys, *vals;
  uint8_t *state;   /* 0 empty, 1 used, 2 deleted */
  size_t cap, used, tombs;
} ca_addr_map_t;

void ca_addr_map_init(ca_addr_map_t *m);
void ca_addr_map_free(ca_addr_map_t *m);
/* Sets key's value; false when memory runs out. */
bool ca_addr_map_put(ca_addr_map_t *m, uint64_t key, uint64_t val);
/* key's value into *val (may be NULL); false when key is absent. */
bool ca_addr_map_get(const ca_addr_map_t *m, uint64_t key, uint64_t *val);
/* Removes key; false when it was absent. */
bool ca_addr_map_del(ca_addr_map_t *m, uint64_t key);

#endif
