/* tests/include_order.sh keeps the core's modules in the one-way order
 * that alloc/internal.h writes down. It passes on the tree, and fails on a
 * copy of alloc/ where an include was planted that closes a cycle, goes up
 * the order, or brings the umbrella header into a core file, or where a
 * module is missing from the order. Run from the repository root, as
 * `make test` does. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static char output[8192];

/* Runs the script on a copy of alloc/ changed by the shell command edit
 * (run inside the copy); returns its exit status, output in `output`. */
static int check_copy(const char *edit) {
  cr_assert_eq(access("tests/include_order.sh", X_OK), 0, "run from the repository root");
  char dir[] = "/tmp/include_order.XXXXXX", cmd[1024];
  cr_assert_not_null(mkdtemp(dir));
  snprintf(cmd, sizeof cmd, "cp alloc/*.c alloc/*.h %s && cd %s && %s", dir, dir, edit);
  cr_assert_eq(system(cmd), 0, "preparing the copy: %s", cmd);
  snprintf(cmd, sizeof cmd, "tests/include_order.sh %s 2>&1", dir);
  FILE *p = popen(cmd, "r");
  size_t n = fread(output, 1, sizeof output - 1, p);
  output[n] = 0;
  int status = pclose(p);
  snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
  cr_assert_eq(system(cmd), 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

Test(include_order, the_tree_keeps_the_documented_order) {
  cr_assert_eq(system("tests/include_order.sh alloc >/dev/null 2>&1"), 0, "see: tests/include_order.sh alloc");
  cr_assert_eq(check_copy("true"), 0, "an unchanged copy passes:\n%s", output);
}

Test(include_order, a_planted_cycle_fails) {
  /* fence.c releases blocks through blocks.c; calling back into pool.c,
   * which includes fence.h, closes the cycle the layout removed. */
  cr_assert_eq(check_copy("echo '#include \"pool.h\"' >> fence.c"), 1, "%s", output);
  cr_assert(strstr(output, "fence.c includes \"pool.h\""), "names the include:\n%s", output);
  cr_assert(strstr(output, "cycle"), "names the cycle:\n%s", output);
}

/* fence.c does not use ptrmap.c, so this closes no cycle, but a later
 * include of ptrmap.h by fence.c would. */
Test(include_order, an_include_up_the_order_fails_without_a_cycle) {
  cr_assert_eq(check_copy("echo '#include \"fence.h\"' >> ptrmap.c"), 1, "%s", output);
  cr_assert(strstr(output, "'fence' is not below 'ptrmap'"), "%s", output);
  cr_assert_null(strstr(output, "cycle"), "no cycle, only a wrong direction:\n%s", output);
}

Test(include_order, the_umbrella_header_in_a_core_file_fails) {
  cr_assert_eq(check_copy("echo '#include \"internal.h\"' >> pool.c"), 1, "%s", output);
  cr_assert(strstr(output, "pool.c includes \"internal.h\""), "%s", output);
}

Test(include_order, a_module_missing_from_the_order_fails) {
  cr_assert_eq(check_copy("printf '#include \"types.h\"\\n' > newmodule.c"), 1, "%s", output);
  cr_assert(strstr(output, "module 'newmodule' is not in the order"), "%s", output);
}
