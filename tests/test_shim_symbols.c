/* libcudalloc.so exports the intercepted entry points (shim/symbols.h),
 * dlsym in glibc's two versions, and the public cudalloc_* API: nothing
 * else, so that loading it changes nothing but what it means to. */
#include "test_shim.h"
#include "symbols.h"

static const char *const intended[] = {
#define NAME(name) #name,
#define NAME_DRV(name, req, ver, kind) #name,
    CA_SYMS_RUNTIME(NAME) CA_SYMS_SIM_RUNTIME(NAME) CA_SYMS_DRIVER(NAME_DRV) CA_SYMS_SIM_DRIVER(NAME_DRV)
#undef NAME
#undef NAME_DRV
    "dlsym@@GLIBC_2.34", "dlsym@GLIBC_2.2.5", "GLIBC_2.2.5", "GLIBC_2.34",
};
#define NINTENDED (sizeof intended / sizeof intended[0])

/* What a sanitizer build adds on its own (instrumentation bookkeeping). */
static int sanitizer_symbol(const char *name) {
  return shim_sanitizer() &&
         (strncmp(name, "__asan", 6) == 0 || strncmp(name, "__odr_asan", 10) == 0 ||
          strncmp(name, "__ubsan", 7) == 0 || strncmp(name, "__tsan", 6) == 0 ||
          strncmp(name, "__sanitizer", 11) == 0);
}

static int allowed(const char *name) {
  if (strncmp(name, "cudalloc_", 9) == 0 || sanitizer_symbol(name)) return 1;
  for (size_t i = 0; i < NINTENDED; i++)
    if (strcmp(name, intended[i]) == 0) return 1;
  return 0;
}

/* The first defined symbol of `nm -D --defined-only` output that is not
 * allowed (copied to bad), or 0 when there is none. Marks seen[] for the
 * intended names found. */
static int first_unexpected(const char *nm, char *bad, size_t cap, int *seen) {
  char addr[64], type[8], name[256];
  int n;
  for (const char *p = nm; sscanf(p, "%63s %7s %255s%n", addr, type, name, &n) == 3; p += n) {
    for (size_t i = 0; i < NINTENDED; i++)
      if (seen && strcmp(name, intended[i]) == 0) seen[i] = 1;
    if (!allowed(name)) {
      snprintf(bad, cap, "%s", name);
      return 1;
    }
  }
  return 0;
}

Test(symbols, only_the_intended_set_is_exported) {
  char cmd[512], bad[256] = "";
  snprintf(cmd, sizeof cmd, "nm -D --defined-only %s/libcudalloc.so", shim_build());
  shim_run_t *r = shim_sh(NULL, cmd);
  if (r->status == 127) cr_skip_test("nm is not installed");
  cr_assert_eq(r->status, 0, "%s failed:\n%s", cmd, r->out);
  int seen[NINTENDED] = {0};
  cr_assert_eq(first_unexpected(r->out, bad, sizeof bad, seen), 0, "libcudalloc.so exports %s", bad);
  for (size_t i = 0; i < NINTENDED; i++)
    cr_expect(seen[i], "libcudalloc.so does not export %s", intended[i]);
  cr_assert_not_null(strstr(r->out, "cudalloc_torch_malloc"));
  cr_assert_not_null(strstr(r->out, "cudalloc_malloc"));
}

/* The check itself: an internal name, or a libc function that a careless
 * build would export, is reported. */
Test(symbols, the_check_reports_a_stray_symbol) {
  char bad[256] = "";
  const char *leaky = "0000000000001000 T cudaMalloc\n0000000000002000 T ca_malloc\n";
  cr_assert_eq(first_unexpected(leaky, bad, sizeof bad, NULL), 1);
  cr_assert_str_eq(bad, "ca_malloc");
  const char *interposes_malloc = "0000000000001000 T cudalloc_step\n0000000000002000 W malloc\n";
  cr_assert_eq(first_unexpected(interposes_malloc, bad, sizeof bad, NULL), 1);
  cr_assert_str_eq(bad, "malloc");
  cr_assert_eq(first_unexpected("0000000000001000 T cudaFree\n", bad, sizeof bad, NULL), 0);
}

/* The entry points are unversioned (so that references to
 * cudaMalloc@libcudart.so.13 bind to them); dlsym carries both versions. */
Test(symbols, versions) {
  char cmd[512];
  snprintf(cmd, sizeof cmd, "objdump -T %s/libcudalloc.so", shim_build());
  shim_run_t *r = shim_sh(NULL, cmd);
  if (r->status == 127) cr_skip_test("objdump is not installed");
  cr_assert_eq(r->status, 0, "%s failed:\n%s", cmd, r->out);
  cr_assert_not_null(strstr(r->out, "GLIBC_2.34  dlsym"), "%s", r->out);
  cr_assert_not_null(strstr(r->out, "(GLIBC_2.2.5) dlsym"), "%s", r->out);
  cr_assert_not_null(strstr(r->out, "Base        cudaMalloc\n"), "%s", r->out);
  cr_assert_not_null(strstr(r->out, "Base        cuMemAlloc_v2\n"), "%s", r->out);
}
