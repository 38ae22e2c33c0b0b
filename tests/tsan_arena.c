/* Linked into the test binaries of the ThreadSanitizer build only.
 *
 * Criterion's sandbox (BoxFort) maps its shared arena at an address drawn
 * with rand_r() from a range that ThreadSanitizer reserves for its shadow
 * memory, so every Criterion binary aborts at start-up under TSan
 * (Snaipe/Criterion#274). Drawing from application memory instead, where
 * TSan allows fixed mappings, lets the same suite run under TSan. BoxFort
 * adds 0x200000000000 to the draw times 16 MiB: 0x360000 lands at
 * 0x560000000000, above where PIE binaries load. Nothing else in the test
 * binaries calls rand_r. */
#include <stdlib.h>

__attribute__((visibility("default"))) int rand_r(unsigned int *seed) {
  static unsigned int next;
  (void)seed;
  return (int)(0x360000u + __atomic_fetch_add(&next, 1u, __ATOMIC_RELAXED) % 0x10000u);
}
