/* The backend contract's virtual memory rules, each with the error it
 * returns when broken, and the simulated device's faithfulness: faults on
 * unmapped or inaccessible memory, aliasing, capacity, several devices,
 * teardown. */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include "sim_testing.h"

#ifdef __SANITIZE_ADDRESS__
#include <sanitizer/lsan_interface.h>
#endif

#define CONF "backend:sim,sim_capacity_mb:64"
#define MB (1ull << 20)

TestSuite(sim_vm, .fini = sim_fini);

/* true when no host mapping covers any of [va, va+size). */
static bool unmapped_on_host(uintptr_t va, size_t size) {
  unsigned char vec[64];
  size_t page = (size_t)sysconf(_SC_PAGESIZE);
  for (size_t off = 0; off < size; off += page)
    if (mincore((void *)(va + off), page, vec) == 0 || errno != ENOMEM) return false;
  return true;
}

static int open_fds(void) {
  int n = 0;
  DIR *d = opendir("/proc/self/fd");
  cr_assert_not_null(d);
  while (readdir(d)) n++;
  closedir(d);
  return n;
}

// ----------------------------------------------------------------------------
// Rules of the contract (on the simulated device, or a GPU)
// ----------------------------------------------------------------------------

Test(sim_vm, devices_and_properties) {
  size_t g;
  const ca_backend_t *be = sim_start(CONF, &g);
  int n = 0;
  OK(be->device_count(&n));
  cr_assert_geq(n, 1);
  ca_device_props_t p;
  OK(be->device_props(0, &p));
  cr_assert(g && (g & (g - 1)) == 0, "granularity %zu is not a power of two", g);
  size_t free_b, total_b;
  OK(be->mem_info(0, &free_b, &total_b));
  cr_assert_eq(total_b, p.total_bytes);
  cr_assert_leq(free_b, total_b);
  if (test_on_cuda()) return;
  cr_assert_eq(p.total_bytes, 64 * MB);
  cr_assert_eq(g, 2 * MB);
  cr_assert_str_eq(p.name, "cudalloc simulated device 0");
  cr_assert_eq(free_b, 64 * MB);
}

Test(sim_vm, bad_device_ordinal) {
  const ca_backend_t *be = sim_start(CONF, NULL);
  int n;
  OK(be->device_count(&n));
  ca_device_props_t p;
  BREAKS_RULE(be->set_device(n), CUDA_ERROR_INVALID_DEVICE);
  BREAKS_RULE(be->set_device(-1), CUDA_ERROR_INVALID_DEVICE);
  BREAKS_RULE(be->device_props(n, &p), CUDA_ERROR_INVALID_DEVICE);
  int cur = -1;
  OK(be->get_device(&cur));
  cr_assert_eq(cur, 0, "a refused set_device changed the current device");
  if (test_on_cuda()) return;
  size_t f, t;
  uintptr_t va;
  ca_phys_t h;
  ca_event_t e;
  BREAKS_RULE(be->mem_info(n, &f, &t), CUDA_ERROR_INVALID_DEVICE);
  BREAKS_RULE(be->reserve(n, 2 * MB, &va), CUDA_ERROR_INVALID_DEVICE);
  BREAKS_RULE(be->create(n, 2 * MB, &h), CUDA_ERROR_INVALID_DEVICE);
  BREAKS_RULE(be->event_create(n, &e), CUDA_ERROR_INVALID_DEVICE);
  BREAKS_RULE(be->device_sync(n), CUDA_ERROR_INVALID_DEVICE);
}

Test(sim_vm, reserve_sizes_are_whole_pages) {
  size_t g;
  const ca_backend_t *be = sim_start(CONF, &g);
  uintptr_t va = 0, vb = 0;
  BREAKS_RULE(be->reserve(0, 0, &va), CUDA_ERROR_INVALID_VALUE);
  BREAKS_RULE(be->reserve(0, g / 2, &va), CUDA_ERROR_INVALID_VALUE);
  BREAKS_RULE(be->reserve(0, g + 4096, &va), CUDA_ERROR_INVALID_VALUE);
  OK(be->reserve(0, 4 * g, &va));
  OK(be->reserve(0, 2 * g, &vb));
  cr_assert_eq(va % g, 0, "reservation %#lx is not aligned", (unsigned long)va);
  cr_assert_eq(vb % g, 0);
  cr_assert(vb + 2 * g <= va || va + 4 * g <= vb, "two reservations overlap");
  OK(be->va_free(va, 4 * g));
  OK(be->va_free(vb, 2 * g));
}

Test(sim_vm, create_sizes_are_whole_pages) {
  size_t g;
  const ca_backend_t *be = sim_start(CONF, &g);
  ca_phys_t h;
  BREAKS_RULE(be->create(0, 0, &h), CUDA_ERROR_INVALID_VALUE);
  BREAKS_RULE(be->create(0, g / 2, &h), CUDA_ERROR_INVALID_VALUE);
  BREAKS_RULE(be->create(0, 3 * g - 4096, &h), CUDA_ERROR_INVALID_VALUE);
  OK(be->create(0, 2 * g, &h));
  OK(be->release(h));
}

Test(sim_vm, map_must_be_aligned) {
  size_t g;
  const ca_backend_t *be = sim_start(CONF, &g);
  uintptr_t va;
  ca_phys_t h;
  OK(be->reserve(0, 8 * g, &va));
  OK(be->create(0, 4 * g, &h));
  BREAKS_RULE(be->map(va, 0, h, 0), CUDA_ERROR_INVALID_VALUE);
  BREAKS_RULE(be->map(va, g / 2, h, 0), CUDA_ERROR_INVALID_VALUE);
  BREAKS_RULE(be->map(va + g / 2, g, h, 0), CUDA_ERROR_INVALID_VALUE);
  BREAKS_RULE(be->map(va, g, h, g / 2), CUDA_ERROR_INVALID_VALUE);
  if (!test_on_cuda()) cr_assert_eq(ca_sim_mapped_bytes(0), 0, "a refused map mapped");
  /* nothing changed: the same place maps fine */
  OK(be->map(va, g, h, 0));
  OK(be->unmap(va, g));
  OK(be->release(h));
  OK(be->va_free(va, 8 * g));
}

Test(sim_vm, map_must_lie_inside_one_reservation) {
  size_t g;
  const ca_backend_t *be = sim_start(CONF, &g);
  uintptr_t va;
  ca_phys_t h;
  OK(be->reserve(0, 4 * g, &va));
  OK(be->create(0, 2 * g, &h));
  BREAKS_RULE(be->map(va + 3 * g, 2 * g, h, 0), CUDA_ERROR_INVALID_VALUE); /* runs past the end */
  BREAKS_RULE(be->map(va + 4 * g, g, h, 0), CUDA_ERROR_INVALID_VALUE);     /* just after it */
  OK(be->map(va + 2 * g, 2 * g, h, 0));                                    /* its last pages */
  OK(be->unmap(va + 2 * g, 2 * g));
  OK(be->release(h));
  OK(be->va_free(va, 4 * g));
}

Test(sim_vm, map_must_not_cover_a_mapping) {
  size_t g;
  const ca_backend_t *be = sim_start(CONF, &g);
  uintptr_t va;
  ca_phys_t h1, h2;
  OK(be->reserve(0, 8 * g, &va));
  OK(be->create(0, 2 * g, &h1));
  OK(be->create(0, 2 * g, &h2));
  OK(be->map(va + 2 * g, 2 * g, h1, 0));
  BREAKS_RULE(be->map(va + 2 * g, 2 * g, h2, 0), CUDA_ERROR_INVALID_VALUE); /* same place */
  BREAKS_RULE(be->map(va + 3 * g, 2 * g, h2, 0), CUDA_ERROR_INVALID_VALUE); /* over its tail */
  BREAKS_RULE(be->map(va + g, 2 * g, h2, 0), CUDA_ERROR_INVALID_VALUE);     /* over its head */
  OK(be->map(va, 2 * g, h2, 0));                                            /* adjacent: fine */
  OK(be->unmap(va, 4 * g));
  OK(be->release(h1));
  OK(be->release(h2));
  OK(be->va_free(va, 8 * g));
}

Test(sim_vm, map_must_stay_inside_the_handle) {
  size_t g;
  const ca_backend_t *be = sim_start(CONF, &g);
  uintptr_t va;
  ca_phys_t h;
  OK(be->reserve(0, 4 * g, &va));
  OK(be->create(0, 2 * g, &h));
  BREAKS_RULE(be->map(va, 3 * g, h, 0), CUDA_ERROR_INVALID_VALUE);
  BREAKS_RULE(be->map(va, g, h, 2 * g), CUDA_ERROR_INVALID_VALUE);
  BREAKS_RULE(be->map(va, 2 * g, h, g), CUDA_ERROR_INVALID_VALUE);
  OK(be->map(va, g, h, g)); /* the handle's second page */
  OK(be->unmap(va, g));
  OK(be->release(h));
  OK(be->va_free(va, 4 * g));
}

Test(sim_vm, unmap_covers_whole_adjacent_maps) {
  size_t g;
  const ca_backend_t *be = sim_start(CONF, &g);
  uintptr_t va;
  ca_phys_t h1, h2, h3;
  OK(be->reserve(0, 8 * g, &va));
  OK(be->create(0, 2 * g, &h1));
  OK(be->create(0, g, &h2));
  OK(be->create(0, g, &h3));
  OK(be->map(va, 2 * g, h1, 0));     /* [0, 2g) */
  OK(be->map(va + 2 * g, g, h2, 0)); /* [2g, 3g) */
  OK(be->map(va + 4 * g, g, h3, 0)); /* [4g, 5g), a hole before it */
  BREAKS_RULE(be->unmap(va, g), CUDA_ERROR_INVALID_VALUE);              /* part of h1 */
  BREAKS_RULE(be->unmap(va + g, 2 * g), CUDA_ERROR_INVALID_VALUE);      /* half h1 + h2 */
  BREAKS_RULE(be->unmap(va + 2 * g, 3 * g), CUDA_ERROR_INVALID_VALUE);  /* h2, hole, h3 */
  BREAKS_RULE(be->unmap(va + 3 * g, g), CUDA_ERROR_INVALID_VALUE);      /* the hole */
  BREAKS_RULE(be->unmap(va, 4 * g), CUDA_ERROR_INVALID_VALUE);          /* h1 + h2 + hole */
  BREAKS_RULE(be->unmap(va, g / 2), CUDA_ERROR_INVALID_VALUE);
  BREAKS_RULE(be->unmap(va, 0), CUDA_ERROR_INVALID_VALUE);
  if (!test_on_cuda()) cr_assert_eq(ca_sim_mapped_bytes(0), 4 * g);
  OK(be->unmap(va, 3 * g)); /* h1 and h2 together */
  OK(be->unmap(va + 4 * g, g));
  if (!test_on_cuda()) cr_assert_eq(ca_sim_mapped_bytes(0), 0);
  OK(be->release(h1));
  OK(be->release(h2));
  OK(be->release(h3));
  OK(be->va_free(va, 8 * g));
}

Test(sim_vm, set_access_needs_mapped_memory) {
  size_t g;
  const ca_backend_t *be = sim_start(CONF, &g);
  uintptr_t va;
  ca_phys_t h1, h2, h3;
  OK(be->reserve(0, 8 * g, &va));
  OK(be->create(0, g, &h1));
  OK(be->create(0, g, &h2));
  OK(be->create(0, g, &h3));
  OK(be->map(va, g, h1, 0));
  OK(be->map(va + g, g, h2, 0));
  OK(be->map(va + 3 * g, g, h3, 0));
  BREAKS_RULE(be->set_access(0, va + 2 * g, g), CUDA_ERROR_INVALID_VALUE); /* nothing mapped */
  BREAKS_RULE(be->set_access(0, va, 4 * g), CUDA_ERROR_INVALID_VALUE);     /* a hole inside */
  BREAKS_RULE(be->set_access(0, va, 0), CUDA_ERROR_INVALID_VALUE);
  BREAKS_RULE(be->set_access(0, va + g / 2, g), CUDA_ERROR_INVALID_VALUE);
  OK(be->set_access(0, va, 2 * g)); /* spans two maps */
  OK(be->set_access(0, va + 3 * g, g));
  OK(be->unmap(va, 2 * g));
  OK(be->unmap(va + 3 * g, g));
  OK(be->release(h1));
  OK(be->release(h2));
  OK(be->release(h3));
  OK(be->va_free(va, 8 * g));
}

// ----------------------------------------------------------------------------
// Rules the simulation enforces more strictly than the driver
// ----------------------------------------------------------------------------

Test(sim_vm, release_of_a_mapped_handle_is_refused) {
  SKIP_ON_CUDA("the driver defers such a release");
  size_t g;
  const ca_backend_t *be = sim_start(CONF, &g);
  ca_phys_t h;
  char *p = sim_mapped(be, 0, 4 * g, 2 * g, &h);
  p[0] = 42;
  BREAKS_RULE(be->release(h), CUDA_ERROR_ILLEGAL_STATE);
  cr_assert_eq(ca_sim_live_handles(0), 1, "the refused release released");
  cr_assert_eq(ca_sim_physical_used(0), 2 * g);
  cr_assert_eq(p[0], 42, "the refused release touched the memory");
  OK(be->unmap((uintptr_t)p, 2 * g));
  OK(be->release(h));
  cr_assert_eq(ca_sim_live_handles(0), 0);
}

Test(sim_vm, va_free_takes_a_whole_unmapped_reservation) {
  SKIP_ON_CUDA("what the driver does here is not part of the contract");
  size_t g;
  const ca_backend_t *be = sim_start(CONF, &g);
  ca_phys_t h;
  uintptr_t va = (uintptr_t)sim_mapped(be, 0, 4 * g, g, &h);
  BREAKS_RULE(be->va_free(va, 4 * g), CUDA_ERROR_INVALID_VALUE); /* a mapping inside */
  OK(be->unmap(va, g));
  BREAKS_RULE(be->va_free(va, 2 * g), CUDA_ERROR_INVALID_VALUE);
  BREAKS_RULE(be->va_free(va + g, 3 * g), CUDA_ERROR_INVALID_VALUE);
  cr_assert_not(unmapped_on_host(va, 4 * g), "a refused va_free unmapped");
  OK(be->va_free(va, 4 * g));
  cr_assert(unmapped_on_host(va, 4 * g));
  BREAKS_RULE(be->va_free(va, 4 * g), CUDA_ERROR_INVALID_VALUE); /* twice */
  OK(be->release(h));
}

Test(sim_vm, set_access_covers_whole_maps) {
  SKIP_ON_CUDA("the simulation refuses part of a mapping");
  size_t g;
  const ca_backend_t *be = sim_start(CONF, &g);
  uintptr_t va;
  ca_phys_t h;
  OK(be->reserve(0, 4 * g, &va));
  OK(be->create(0, 2 * g, &h));
  OK(be->map(va, 2 * g, h, 0));
  BREAKS_RULE(be->set_access(0, va, g), CUDA_ERROR_INVALID_VALUE);
  BREAKS_RULE(be->set_access(0, va + g, g), CUDA_ERROR_INVALID_VALUE);
  OK(be->set_access(0, va, 2 * g));
}

Test(sim_vm, stale_and_forged_handles_are_refused) {
  SKIP_ON_CUDA("a stale handle is undefined behaviour on the driver");
  size_t g;
  const ca_backend_t *be = sim_start(CONF, &g);
  uintptr_t va;
  ca_phys_t h, h2;
  OK(be->reserve(0, 2 * g, &va));
  OK(be->create(0, g, &h));
  OK(be->release(h));
  OK(be->create(0, g, &h2)); /* may reuse h's slot: h must stay dead */
  BREAKS_RULE(be->release(h), CUDA_ERROR_INVALID_VALUE);
  BREAKS_RULE(be->map(va, g, h, 0), CUDA_ERROR_INVALID_VALUE);
  BREAKS_RULE(be->release(12345), CUDA_ERROR_INVALID_VALUE);
  BREAKS_RULE(be->map(va, g, 0, 0), CUDA_ERROR_INVALID_VALUE);
  cr_assert_eq(ca_sim_live_handles(0), 1);
  OK(be->release(h2));
}

Test(sim_vm, calls_before_init_fail) {
  const ca_backend_t *be = &ca_backend_sim;
  int n;
  uintptr_t va;
  BREAKS_RULE(be->device_count(&n), CUDA_ERROR_NOT_INITIALIZED);
  BREAKS_RULE(be->reserve(0, 2 * MB, &va), CUDA_ERROR_NOT_INITIALIZED);
  BREAKS_RULE(be->event_query(NULL), CUDA_ERROR_NOT_INITIALIZED);
}

Test(sim_vm, init_is_idempotent) {
  SKIP_ON_CUDA("counts live handles");
  size_t g;
  const ca_backend_t *be = sim_start(CONF, &g);
  ca_phys_t h;
  OK(be->create(0, g, &h));
  OK(be->init(&ca_config.sim));
  cr_assert_eq(ca_sim_live_handles(0), 1, "a second init started afresh");
  OK(be->release(h));
}

// ----------------------------------------------------------------------------
// Faithfulness of the memory itself
// ----------------------------------------------------------------------------

Test(sim_vm, mapped_memory_holds_data) {
  SKIP_ON_CUDA("touches device memory from the host");
  size_t g;
  const ca_backend_t *be = sim_start(CONF, &g);
  ca_phys_t h;
  unsigned char *p = sim_mapped(be, 0, 4 * g, 2 * g, &h);
  for (size_t i = 0; i < 2 * g; i += 4096) p[i] = (unsigned char)(i / 4096);
  for (size_t i = 0; i < 2 * g; i += 4096) cr_assert_eq(p[i], (unsigned char)(i / 4096));
}

Test(sim_vm, aliases_show_the_same_bytes) {
  SKIP_ON_CUDA("touches device memory from the host");
  size_t g;
  const ca_backend_t *be = sim_start(CONF, &g);
  ca_phys_t h;
  char *a = sim_mapped(be, 0, 2 * g, 2 * g, &h); /* the whole handle */
  uintptr_t vb;
  OK(be->reserve(0, 4 * g, &vb));
  char *b = (char *)vb;
  OK(be->map(vb, 2 * g, h, 0));     /* the whole handle again */
  OK(be->map(vb + 3 * g, g, h, g)); /* and its second page alone */
  OK(be->set_access(0, vb, 2 * g));
  OK(be->set_access(0, vb + 3 * g, g));
  strcpy(a + 100, "through a");
  strcpy(a + g + 100, "second page");
  cr_assert_str_eq(b + 100, "through a");
  cr_assert_str_eq(b + g + 100, "second page");
  cr_assert_str_eq(b + 3 * g + 100, "second page");
  strcpy(b + 3 * g + 200, "back through b");
  cr_assert_str_eq(a + g + 200, "back through b");
  /* unmapping one view leaves the other intact */
  OK(be->unmap((uintptr_t)a, 2 * g));
  cr_assert_str_eq(b + 100, "through a");
}

/* Death tests run on the simulated device even when CUDALLOC_TEST_BACKEND=cuda. */
Test(sim_vm, use_after_unmap_faults, .signal = SIGSEGV) {
  plain_sigsegv();
  size_t g;
  const ca_backend_t *be = sim_only_start(CONF, &g);
  ca_phys_t h;
  volatile char *p = sim_mapped(be, 0, 2 * g, g, &h);
  p[10] = 1;
  OK(be->unmap((uintptr_t)p, g));
  p[10] = 2; /* dies here */
  cr_assert_fail("a write after unmap did not fault");
}

Test(sim_vm, touch_before_set_access_faults, .signal = SIGSEGV) {
  plain_sigsegv();
  size_t g;
  const ca_backend_t *be = sim_only_start(CONF, &g);
  uintptr_t va;
  ca_phys_t h;
  OK(be->reserve(0, 2 * g, &va));
  OK(be->create(0, g, &h));
  OK(be->map(va, g, h, 0));
  (void)*(volatile char *)va; /* dies here */
  cr_assert_fail("a read before set_access did not fault");
}

Test(sim_vm, access_is_set_again_after_each_map, .signal = SIGSEGV) {
  plain_sigsegv();
  size_t g;
  const ca_backend_t *be = sim_only_start(CONF, &g);
  ca_phys_t h;
  volatile char *p = sim_mapped(be, 0, 2 * g, g, &h);
  p[0] = 1;
  OK(be->unmap((uintptr_t)p, g));
  OK(be->map((uintptr_t)p, g, h, 0));
  p[0] = 2; /* dies here: the new mapping has no access yet */
  cr_assert_fail("a remapped page was accessible without set_access");
}

Test(sim_vm, released_pages_are_punched_out) {
  SKIP_ON_CUDA("touches device memory from the host");
  size_t g;
  const ca_backend_t *be = sim_start("backend:sim,sim_capacity_mb:8", &g);
  ca_phys_t h;
  char *p = sim_mapped(be, 0, 4 * g, 4 * g, &h); /* the whole device */
  for (size_t i = 0; i < 4 * g; i += 4096) p[i] = 7;
  OK(be->unmap((uintptr_t)p, 4 * g));
  OK(be->release(h));
  OK(be->create(0, 4 * g, &h));
  OK(be->map((uintptr_t)p, 4 * g, h, 0));
  OK(be->set_access(0, (uintptr_t)p, 4 * g));
  for (size_t i = 0; i < 4 * g; i += 4096) cr_assert_eq(p[i], 0, "old data at +%zu", i);
}

// ----------------------------------------------------------------------------
// Capacity and devices
// ----------------------------------------------------------------------------

Test(sim_vm, capacity_runs_out_and_release_makes_room) {
  SKIP_ON_CUDA("exhausts the device");
  size_t g, f, t;
  const ca_backend_t *be = sim_start("backend:sim,sim_capacity_mb:8", &g);
  ca_phys_t h[4], extra;
  for (int i = 0; i < 4; i++) OK(be->create(0, g, &h[i]));
  uint64_t v0 = ca_sim_violations();
  cr_assert_eq(be->create(0, g, &extra), CUDA_ERROR_OUT_OF_MEMORY);
  cr_assert_eq(ca_sim_violations(), v0, "running out is not a broken rule");
  OK(be->mem_info(0, &f, &t));
  cr_assert_eq(f, 0);
  cr_assert_eq(ca_sim_physical_used(0), 8 * MB);
  OK(be->release(h[2]));
  OK(be->mem_info(0, &f, &t));
  cr_assert_eq(f, g);
  OK(be->create(0, g, &h[2]));
  cr_assert_eq(be->create(0, 5 * g, &extra), CUDA_ERROR_OUT_OF_MEMORY);
  cr_assert_eq(ca_sim_errors(CA_OP_create), 2);
  for (int i = 0; i < 4; i++) OK(be->release(h[i]));
  OK(be->create(0, 4 * g, &extra));
  OK(be->release(extra));
}

Test(sim_vm, capacity_not_fragmentation_decides) {
  SKIP_ON_CUDA("exhausts the device");
  size_t g;
  const ca_backend_t *be = sim_start("backend:sim,sim_capacity_mb:8", &g);
  ca_phys_t h[4], big;
  for (int i = 0; i < 4; i++) OK(be->create(0, g, &h[i]));
  OK(be->release(h[0]));
  OK(be->release(h[2]));
  OK(be->create(0, 2 * g, &big)); /* from two separate holes of the memfd */
  uintptr_t va;
  OK(be->reserve(0, 4 * g, &va));
  char *p = (char *)va;
  OK(be->map(va, 2 * g, big, 0));
  OK(be->map(va + 2 * g, g, h[1], 0));
  OK(be->map(va + 3 * g, g, h[3], 0));
  OK(be->set_access(0, va, 4 * g));
  for (int i = 0; i < 4; i++) memset(p + (size_t)i * g, 'a' + i, g);
  for (int i = 0; i < 4; i++)
    for (size_t off = 0; off < g; off += 4096)
      cr_assert_eq(p[(size_t)i * g + off], 'a' + i, "pages of two handles overlap");
}

Test(sim_vm, devices_are_independent) {
  SKIP_ON_CUDA("exhausts the device");
  size_t g, f, t;
  const ca_backend_t *be = sim_start("backend:sim,sim_devices:2,sim_capacity_mb:8", &g);
  int n;
  OK(be->device_count(&n));
  cr_assert_eq(n, 2);
  ca_phys_t h0, h1;
  OK(be->create(0, 4 * g, &h0));
  cr_assert_eq(be->create(0, g, &h1), CUDA_ERROR_OUT_OF_MEMORY);
  OK(be->mem_info(1, &f, &t));
  cr_assert_eq(f, 8 * MB, "device 1 lost memory to device 0");
  OK(be->create(1, 2 * g, &h1));
  cr_assert_eq(ca_sim_physical_used(0), 8 * MB);
  cr_assert_eq(ca_sim_physical_used(1), 4 * MB);
  uintptr_t v1;
  OK(be->reserve(1, 2 * g, &v1));
  OK(be->map(v1, 2 * g, h1, 0));
  cr_assert_eq(ca_sim_mapped_bytes(0), 0);
  cr_assert_eq(ca_sim_mapped_bytes(1), 2 * g);
  OK(be->set_access(1, v1, 2 * g));
  ((char *)v1)[0] = 1;
  OK(be->unmap(v1, 2 * g));
  OK(be->release(h1));
  OK(be->release(h0));
  cr_assert_eq(ca_sim_live_handles(0) + ca_sim_live_handles(1), 0);
}

static void *other_thread_device(void *arg) {
  const ca_backend_t *be = arg;
  int dev = -1;
  if (be->get_device(&dev) != CUDA_SUCCESS || dev != 0) return (void *)1;
  if (be->set_device(1) != CUDA_SUCCESS || be->get_device(&dev) || dev != 1) return (void *)2;
  return NULL;
}

Test(sim_vm, current_device_is_per_thread) {
  const ca_backend_t *be = sim_start("backend:sim,sim_devices:2", NULL);
  int n;
  OK(be->device_count(&n));
  if (n < 2) cr_skip_test("needs two devices");
  int dev = -1;
  OK(be->get_device(&dev));
  cr_assert_eq(dev, 0);
  pthread_t t;
  void *res;
  cr_assert_eq(pthread_create(&t, NULL, other_thread_device, (void *)be), 0);
  pthread_join(t, &res);
  cr_assert_null(res, "the other thread saw step %p go wrong", res);
  OK(be->get_device(&dev));
  cr_assert_eq(dev, 0, "another thread's set_device moved this one");
}

Test(sim_vm, accounting_follows_every_call) {
  SKIP_ON_CUDA("reads the simulation's figures");
  size_t g, f, t;
  const ca_backend_t *be = sim_start(CONF, &g);
  ca_phys_t h;
  uintptr_t va = (uintptr_t)sim_mapped(be, 0, 4 * g, 3 * g, &h);
  cr_assert_eq(ca_sim_live_handles(0), 1);
  cr_assert_eq(ca_sim_physical_used(0), 3 * g);
  cr_assert_eq(ca_sim_mapped_bytes(0), 3 * g);
  OK(be->mem_info(0, &f, &t));
  cr_assert_eq(f, t - 3 * g);
  OK(be->unmap(va, 3 * g));
  cr_assert_eq(ca_sim_mapped_bytes(0), 0);
  OK(be->release(h));
  cr_assert_eq(ca_sim_physical_used(0), 0);
  cr_assert_eq(ca_sim_live_handles(0), 0);
  cr_assert_eq(ca_sim_live_handles(7), 0, "a device that does not exist");
}

Test(sim_vm, granularity_is_a_setting) {
  SKIP_ON_CUDA("sets the simulated granularity");
  size_t g;
  const ca_backend_t *be = sim_start("backend:sim,sim_granularity_kb:64", &g);
  cr_assert_eq(g, 64 * 1024);
  ca_phys_t h;
  BREAKS_RULE(be->create(0, 32 * 1024, &h), CUDA_ERROR_INVALID_VALUE);
  uintptr_t va = (uintptr_t)sim_mapped(be, 0, 4 * g, g, &h);
  cr_assert_eq(va % g, 0);
  ((char *)va)[g - 1] = 1;
}

// ----------------------------------------------------------------------------
// Teardown, abandon, threads
// ----------------------------------------------------------------------------

Test(sim_vm, shutdown_leaves_nothing_behind) {
  SKIP_ON_CUDA("tears the simulation down");
  int fds = open_fds();
  size_t g;
  const ca_backend_t *be = sim_start("backend:sim,sim_devices:3,sim_events:manual", &g);
  ca_phys_t h;
  uintptr_t va = (uintptr_t)sim_mapped(be, 0, 8 * g, 2 * g, &h);
  ca_phys_t loose;
  OK(be->create(2, g, &loose));
  ca_stream_t s, dead;
  ca_event_t e, e2;
  OK(ca_sim_stream_create(&s, 0));
  OK(ca_sim_stream_create(&dead, 1));
  OK(be->event_create(0, &e));
  OK(be->event_create(0, &e2));
  OK(be->event_record(e, s));
  OK(be->event_record(e, NULL));
  OK(be->event_record(e2, CA_STREAM_PER_THREAD));
  OK(be->event_record(e2, dead));
  OK(ca_sim_stream_destroy(dead)); /* with work still pending */
  cr_assert_gt(open_fds(), fds);
  ca_sim_shutdown();
  cr_assert_eq(open_fds(), fds, "a memfd is still open");
#ifdef __SANITIZE_ADDRESS__
  /* Criterion's workers end with _Exit, so the check at exit never runs */
  cr_assert_eq(__lsan_do_recoverable_leak_check(), 0, "ca_sim_shutdown leaked");
#endif
  cr_assert(unmapped_on_host(va, 8 * g), "a reservation is still mapped");
  cr_assert_eq(ca_sim_live_handles(0), 0);
  cr_assert_eq(ca_sim_calls(CA_OP_create), 0, "counters survived");
  /* the next start is afresh, from the configuration */
  cr_assert_eq(ca_config_load("backend:sim"), 0);
  OK(be->init(&ca_config.sim));
  int n;
  OK(be->device_count(&n));
  cr_assert_eq(n, 1);
  cr_assert_eq(ca_sim_physical_used(0), 0);
  BREAKS_RULE(be->release(h), CUDA_ERROR_INVALID_VALUE);
  BREAKS_RULE(be->event_query(e), CUDA_ERROR_INVALID_HANDLE);
}

Test(sim_vm, abandon_forgets_but_keeps_host_mappings) {
  SKIP_ON_CUDA("abandons the simulation");
  size_t g;
  const ca_backend_t *be = sim_start(CONF, &g);
  ca_phys_t h;
  char *p = sim_mapped(be, 0, 2 * g, g, &h);
  strcpy(p, "still here");
  be->abandon();
  cr_assert_str_eq(p, "still here", "abandon touched a host mapping");
  int n;
  BREAKS_RULE(be->device_count(&n), CUDA_ERROR_NOT_INITIALIZED);
  OK(be->init(&ca_config.sim));
  cr_assert_eq(ca_sim_live_handles(0), 0);
  cr_assert_eq(ca_sim_physical_used(0), 0);
  BREAKS_RULE(be->release(h), CUDA_ERROR_INVALID_VALUE);
}

Test(sim_vm, fork_child_starts_clean) {
  SKIP_ON_CUDA("forks the simulation");
  size_t g;
  const ca_backend_t *be = sim_start(CONF, &g);
  ca_phys_t h;
  sim_mapped(be, 0, 2 * g, g, &h);
  pid_t pid = fork();
  cr_assert_geq(pid, 0);
  if (pid == 0) {
    be->abandon();
    ca_phys_t h2;
    int ok = be->init(&ca_config.sim) == CUDA_SUCCESS && ca_sim_live_handles(0) == 0 &&
             be->create(0, g, &h2) == CUDA_SUCCESS && ca_sim_physical_used(0) == g;
    ca_sim_shutdown();
    _exit(ok ? 0 : 1);
  }
  int status;
  cr_assert_eq(waitpid(pid, &status, 0), pid);
  cr_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0, "the child did not start clean");
  cr_assert_eq(ca_sim_live_handles(0), 1, "the child changed the parent");
}

#define THREADS 4
#define ROUNDS 40

static void *map_loop(void *arg) {
  const ca_backend_t *be = &ca_backend_sim;
  size_t g = *(size_t *)arg;
  for (int i = 0; i < ROUNDS; i++) {
    uintptr_t va;
    ca_phys_t h;
    if (be->reserve(0, 2 * g, &va) || be->create(0, g, &h) || be->map(va + g, g, h, 0) ||
        be->set_access(0, va + g, g))
      return (void *)1;
    volatile char *p = (char *)va + g;
    p[i] = (char)i;
    if (p[i] != (char)i) return (void *)2;
    if (be->unmap(va + g, g) || be->release(h) || be->va_free(va, 2 * g)) return (void *)3;
  }
  return NULL;
}

Test(sim_vm, threads_map_at_once) {
  SKIP_ON_CUDA("touches device memory from the host");
  size_t g;
  sim_start("backend:sim,sim_granularity_kb:64", &g);
  pthread_t t[THREADS];
  for (int i = 0; i < THREADS; i++) cr_assert_eq(pthread_create(&t[i], NULL, map_loop, &g), 0);
  for (int i = 0; i < THREADS; i++) {
    void *res;
    pthread_join(t[i], &res);
    cr_assert_null(res, "thread %d failed at step %p", i, res);
  }
  cr_assert_eq(ca_sim_calls(CA_OP_map), THREADS * ROUNDS);
  cr_assert_eq(ca_sim_errors(CA_OP_map), 0);
  cr_assert_eq(ca_sim_physical_used(0), 0);
  cr_assert_eq(ca_sim_mapped_bytes(0), 0);
}

/* sim_other_process: the pretended process's bytes are not free, no
 * handle can get them, and processes lists it beside this one. */
Test(sim_vm, another_process_holds_memory) {
  SKIP_ON_CUDA("a pretended process");
  size_t g;
  const ca_backend_t *be = sim_start("backend:sim,sim_capacity_mb:64,sim_other_process:4242:trainer:16777216", &g);
  size_t free_b, total_b;
  OK(be->mem_info(0, &free_b, &total_b));
  cr_assert_eq(total_b, 64ull << 20);
  cr_assert_eq(free_b, 48ull << 20, "64 MiB less the other process's 16");
  ca_phys_t h;
  cr_assert_eq(be->create(0, 64ull << 20, &h), CUDA_ERROR_OUT_OF_MEMORY, "the other process's memory is not there");
  OK(be->create(0, 48ull << 20, &h));
  ca_process_t p[8];
  unsigned n;
  OK(be->processes(0, p, 8, &n));
  cr_assert_eq(n, 2);
  cr_assert_eq(p[0].pid, (uint32_t)getpid());
  cr_assert_eq(p[0].bytes, 48ull << 20, "this process: its handles");
  cr_assert_eq(p[1].pid, 4242);
  cr_assert_str_eq(p[1].name, "trainer");
  cr_assert_eq(p[1].bytes, 16ull << 20);
  OK(be->processes(0, p, 1, &n));
  cr_assert_eq(n, 1, "at most cap");
  OK(be->release(h));
}
