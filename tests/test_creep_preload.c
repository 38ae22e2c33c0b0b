/* Creep for any program: tests/progs/creep_leak, a training loop that calls
 * nothing of cudalloc's, run preloaded on the simulated device. Its steps
 * are marked automatically, at each cudaDeviceSynchronize (step_on:sync) or
 * every sample_ms; with the leak (one 64 KiB buffer per step from the
 * helper keep_history) the creep verdict names that helper and its slope,
 * without it no call site is flagged. The per-step CSV and SVG are written
 * at exit. */
#include <unistd.h>

#include "test_shim.h"

#define CONF "backend:sim,sim_events:lag,sim_capacity_mb:256"

static shim_run_t *creep_run(const char *marks, const char *args) {
  char conf[400];
  snprintf(conf, sizeof conf, CONF ",%s", marks);
  shim_run_t *r = shim_prog("creep_leak", args, conf);
  shim_assert_ok(r, "creep_leak");
  return r;
}

/* Step ends are the program's cudaDeviceSynchronize calls: 60 steps, the
 * helper keeps 64 KiB in each, and the slope is exactly that. */
Test(creep_preload, step_on_sync_names_the_leaking_helper) {
  shim_run_t *r = creep_run("step_on:sync", "leak 60");
  cr_log_info("%s", strstr(r->out, "cudalloc: creep on"));
  shim_assert_has(r, "creep on device 0 over steps 0-59 (60 marks by cudaDeviceSynchronize (step_on:sync), the first 12 a warm-up): 1 call site grows step after step");
  shim_assert_has(r, "creep: +65536 bytes/step from keep_history (");
  shim_assert_lacks(r, "bytes/step from activation (");   /* the variable activations are not creep */
}

Test(creep_preload, step_on_sync_flags_nothing_without_the_leak) {
  shim_run_t *r = creep_run("step_on:sync", "clean 60");
  shim_assert_has(r, "(60 marks by cudaDeviceSynchronize (step_on:sync), the first 12 a warm-up): none: no call site grows step after step");
  shim_assert_has(r, "reserved: +0 bytes/step, not growing step after step");
  shim_assert_lacks(r, "creep: +");
}

/* Time sampling: a step is 10 ms of the program's allocations and frees
 * (it sleeps 10 ms per training step): the slope is per sample, the site
 * the same. */
Test(creep_preload, sample_ms_names_the_leaking_helper, .timeout = 60) {
  shim_run_t *r = creep_run("sample_ms:10", "leak 80 10000");
  cr_log_info("%s", strstr(r->out, "cudalloc: creep on"));
  shim_assert_has(r, "marks by every sample_ms");
  shim_assert_has(r, "1 call site grows step after step");
  shim_assert_has(r, "bytes/step from keep_history (");
  cr_assert_eq(strstr(strstr(r->out, "creep: +") + 1, "creep: +"), NULL, "one site only:\n%s", r->out);
}

/* Without step marks the allocator seals cudaFree's fences only when it
 * needs memory, so that reserved memory may grow here (said on its own
 * line); no call site does. */
Test(creep_preload, sample_ms_flags_no_site_without_the_leak, .timeout = 60) {
  shim_run_t *r = creep_run("sample_ms:10", "clean 80 10000");
  shim_assert_has(r, "marks by every sample_ms");
  shim_assert_has(r, "none: no call site grows step after step");
  shim_assert_lacks(r, "creep: +");
}

/* Neither setting: the program marks no step, and nothing is judged. */
Test(creep_preload, no_marks_no_verdict) {
  shim_run_t *r = creep_run("quiet:false", "leak 20");
  shim_assert_lacks(r, "cudalloc: creep on");
}

static char *slurp(const char *path) {
  FILE *f = fopen(path, "r");
  cr_assert_not_null(f, "%s was not written", path);
  static char buf[64 * 1024];
  size_t n = fread(buf, 1, sizeof buf - 1, f);
  buf[n] = 0;
  fclose(f);
  unlink(path);
  return buf;
}

/* The CSV: a header with the sites by name, one row per step; the SVG:
 * allocated, reserved, pending, the device size, and the verdict. */
Test(creep_preload, csv_and_svg_are_written_at_exit) {
  char csv[64], svg[64], marks[200];
  snprintf(csv, sizeof csv, "/tmp/cudalloc-creep-%d.csv", (int)getpid());
  snprintf(svg, sizeof svg, "/tmp/cudalloc-creep-%d.svg", (int)getpid());
  snprintf(marks, sizeof marks, "step_on:sync,creep_csv:%s,creep_svg:%s", csv, svg);
  creep_run(marks, "leak 20");
  const char *c = slurp(csv);
  cr_log_info("%.600s", c);
  cr_assert_eq(strncmp(c, "step,allocated_bytes,reserved_bytes,pending_bytes,\"", 51), 0, "%s", c);
  const char *header_end = strchr(c, '\n');
  const char *kept = strstr(c, "keep_history (");
  cr_assert(kept && kept < header_end, "the leaking site has its column:\n%s", c);
  int rows = 0;
  for (const char *p = header_end; (p = strchr(p, '\n')) && p[1]; p++) rows++;
  cr_expect_eq(rows, 20, "one row per step:\n%s", c);
  cr_expect(strstr(c, "\n0,4259840,"), "step 0: 4 MiB of weights and the first kept 64 KiB:\n%s", c);
  cr_expect(strstr(c, "\n19,5505024,"), "step 19: 20 kept:\n%s", c);
  const char *s = slurp(svg);
  cr_expect(strstr(s, "<svg"), "not an SVG");
  cr_expect(strstr(s, "creep FOUND"), "the title gives the verdict");
  for (const char *label = "allocated\0reserved\0pending\0device memory\0"; *label; label += strlen(label) + 1)
    cr_expect(strstr(s, label), "no %s line", label);
}

/* A bad value of either setting is named with what it accepts, and the
 * default is kept (inputs tried: step_on:often, sample_ms:-3). */
Test(creep_preload, bad_values_are_refused_by_name) {
  shim_run_t *r = creep_run("step_on:often,sample_ms:-3", "clean 3");
  shim_assert_has(r, "bad value 'often' for key 'step_on' (expected one of api|sync); keeping the default");
  shim_assert_has(r, "bad value '-3' for key 'sample_ms' (expected an integer from 0 to 3600000)");
  shim_assert_lacks(r, "cudalloc: creep on");
}

/* With a report prefix: the verdict in the JSON report (what
 * bench/ranks/ranks_table.py reads per rank), and both reports in full in
 * <prefix>-peak.txt. */
Test(creep_preload, the_json_report_and_the_peak_file_carry_the_verdict) {
  char prefix[64], marks[128], path[96];
  snprintf(prefix, sizeof prefix, "/tmp/cudalloc-creep-report-%d", (int)getpid());
  snprintf(marks, sizeof marks, "step_on:sync,report:%s", prefix);
  creep_run(marks, "leak 30");
  snprintf(path, sizeof path, "%s-stats.json", prefix);
  const char *j = slurp(path);
  const char *c = strstr(j, "\"creep\": {\"verdict\": \"creep\", \"steps\": 30, ");
  cr_assert(c, "%s", j);
  cr_expect(strstr(c, "\"sites\": [{\"site\": \"keep_history ("), "%s", c);
  cr_expect(strstr(c, "\"slope\": 65536}]}"), "%s", c);
  snprintf(path, sizeof path, "%s-peak.txt", prefix);
  const char *p = slurp(path);
  cr_expect(strstr(p, "cudalloc: peak allocated on device 0: "), "%s", p);
  cr_expect(strstr(p, "cudalloc:   creep: +65536 bytes/step from keep_history ("), "%s", p);
  snprintf(path, sizeof path, "%s-leaks.txt", prefix);
  unlink(path);
  snprintf(path, sizeof path, "%s-leaks.json", prefix);
  unlink(path);
}
