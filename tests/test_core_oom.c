/* The out-of-memory report (alloc/oom.c, alloc/oom_verdict.c): one scenario
 * per verdict on the simulated device, each read back from the JSON file
 * the failure wrote, with the figures that decide it; the verdict's
 * decision tree on its own; the files, stderr and the rate limit. */
#include "core_testing.h"

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>

// ----------------------------------------------------------------------------
// The report files of a test: a fresh folder, read back as text
// ----------------------------------------------------------------------------

static char dir[64];

/* Removes the folder and what the test left in it (also after a failed
 * assertion: the suite's .fini calls it). */
static void drop_dir(void) {
  if (!dir[0]) return;
  DIR *d = opendir(dir);
  char path[400];
  for (struct dirent *e; d && (e = readdir(d));) {
    if (e->d_name[0] == '.') continue;
    snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
    unlink(path);
  }
  if (d) closedir(d);
  rmdir(dir);
  dir[0] = 0;
}

/* Small capacities, other processes and injected faults: simulated only. */
static void sim_only(void) { SKIP_ON_CUDA("small capacities, pretended processes and injected faults"); }
static void fini(void) {
  drop_dir();
  core_fini();
}
TestSuite(core_oom, .init = sim_only, .fini = fini);

/* A fresh folder for the test's reports; returns "oom_report:<dir>/oom". */
static const char *report_conf(void) {
  static char conf[128];
  const char *tmp = getenv("TMPDIR");
  snprintf(dir, sizeof dir, "%s/cudalloc-oom-test-XXXXXX", tmp && tmp[0] ? tmp : "/tmp");
  cr_assert_not_null(mkdtemp(dir), "mkdtemp failed");
  snprintf(conf, sizeof conf, "oom_report:%s/oom", dir);
  return conf;
}

/* The file <dir>/<name>, whole (malloc'd), or NULL when it does not exist. */
static char *slurp(const char *name) {
  char path[128];
  snprintf(path, sizeof path, "%s/%s", dir, name);
  FILE *f = fopen(path, "r");
  if (!f) return NULL;
  static char buf[1 << 16];
  size_t n = fread(buf, 1, sizeof buf - 1, f);
  fclose(f);
  buf[n] = 0;
  return strdup(buf);
}

/* The string value of "key" in a JSON text ("" when absent). */
static const char *json_str(const char *json, const char *key) {
  static char out[512];
  char pat[64];
  snprintf(pat, sizeof pat, "\"%s\": \"", key);
  const char *p = strstr(json, pat);
  out[0] = 0;
  if (!p) return out;
  p += strlen(pat);
  size_t n = strcspn(p, "\"");
  snprintf(out, sizeof out, "%.*s", (int)n, p);
  return out;
}

/* The number value of "key" (-1 when absent or null). */
static long long json_num(const char *json, const char *key) {
  char pat[64];
  snprintf(pat, sizeof pat, "\"%s\": ", key);
  const char *p = strstr(json, pat);
  if (!p || p[strlen(pat)] == 'n') return -1;
  return strtoll(p + strlen(pat), NULL, 10);
}

/* Starts cudalloc with conf and the test's report folder. */
static void start(const char *conf) {
  char full[400];
  snprintf(full, sizeof full, "%s,%s", conf, report_conf());
  core_start(full);
}

/* malloc that must succeed. */
static void *alloc_ok(size_t size) {
  void *p;
  cr_assert_eq(cudalloc_malloc(&p, size, 0), cudaSuccess, "an allocation of %zu bytes failed", size);
  return p;
}

/* An allocation of size that must fail; returns its JSON report `name`
 * (which the test frees), and what it printed in err. */
static char *fails_as(size_t size, const char *name, char *err, size_t cap) {
  capture_t c;
  void *p;
  capture_begin(&c);
  cudaError_t rc = cudalloc_malloc(&p, size, 0);
  capture_end(&c, err, cap);
  cr_assert_eq(rc, cudaErrorMemoryAllocation, "the allocation of %zu bytes failed (rc %d)", size, rc);
  char *json = slurp(name);
  cr_assert_not_null(json, "the failure wrote %s/%s; stderr:\n%s", dir, name, err);
  return json;
}

/* The same, for the test's first failure. */
static char *fails(size_t size, char *err, size_t cap) { return fails_as(size, "oom.json", err, cap); }

/* The driver's free memory on device 0 now. */
static long long driver_free(void) {
  size_t free_b, total_b;
  cr_assert_eq(ca_state.be->mem_info(0, &free_b, &total_b), CUDA_SUCCESS);
  return (long long)free_b;
}

// ----------------------------------------------------------------------------
// One scenario per verdict
// ----------------------------------------------------------------------------

Test(core_oom, exhausted_live_memory_fills_the_device) {
  start("sim_capacity_mb:64");
  alloc_ok(40 * MiB);
  alloc_ok(20 * MiB);
  char err[4096];
  char *json = fails(16 * MiB, err, sizeof err);
  cr_assert_str_eq(json_str(json, "verdict"), "exhausted", "%s", json);
  cr_assert_eq(json_num(json, "allocated_bytes"), 60 * MiB);
  cr_assert_eq(json_num(json, "size"), 16 * MiB);
  cr_assert_eq(json_num(json, "limit_bytes"), 64 * MiB);
  cr_assert_not_null(strstr(json, "\"cap_set\": false"), "%s", json);
  cr_assert_not_null(strstr(json_str(json, "arithmetic"),
                            "allocated 60.0 MiB + request 16.0 MiB = 76.0 MiB > 64.0 MiB this process may hold"),
                     "%s", json);
  cr_assert_not_null(strstr(json_str(json, "hint"), "live memory itself does not fit"), "%s", json);
  cr_assert_not_null(strstr(err, "cudalloc: out of memory on device 0: asked for 16777216 bytes (16.0 MiB): exhausted"),
                     "%s", err);
  free(json);
}

/* The step history: steps of 8 MiB, then one that needs 70 MiB. */
Test(core_oom, exhausted_names_an_abnormal_step) {
  start("sim_capacity_mb:64");
  for (int step = 0; step < 5; step++) {
    void *p = alloc_ok(8 * MiB);
    cudalloc_free_sync(p);
    cudalloc_step();
  }
  alloc_ok(50 * MiB);
  char err[4096];
  char *json = fails(20 * MiB, err, sizeof err);
  cr_assert_str_eq(json_str(json, "verdict"), "exhausted", "%s", json);
  cr_assert_eq(json_num(json, "usual_step_peak_bytes"), 8 * MiB, "%s", json);
  cr_assert_not_null(strstr(json_str(json, "hint"),
                            "this step's live memory (70.0 MiB with the request) is 8.8x the usual peak (8.0 MiB, "
                            "median of the last 5 steps): one abnormal batch"),
                     "%s", json);
  free(json);
}

/* Regression (issue 10): "exhaustion: live memory fills the limit" with
 * 80 MiB free on the device for a 72 MiB request. The cap, not the device,
 * was the limit. Run against the old decision (report.c's ca_report_oom,
 * ported into ca_oom_decide), this test failed with verdict "exhausted"
 * where "capped" is expected. */
Test(core_oom, regression_80_mib_free_for_72_is_capped_not_exhausted) {
  start("sim_capacity_mb:256,memory_cap_mb:200");
  alloc_ok(88 * MiB);
  alloc_ok(88 * MiB);
  cr_assert_eq(driver_free(), 80 * MiB, "80 MiB are free on the device");
  char err[4096];
  char *json = fails(72 * MiB, err, sizeof err);
  /* the failing growth mapped pages up to the cap and keeps them cached */
  cr_assert_eq(json_num(json, "driver_free_bytes") + json_num(json, "cached_bytes"), 80 * MiB, "%s", json);
  cr_assert_eq(json_num(json, "size"), 72 * MiB);
  cr_assert_str_eq(json_str(json, "verdict"), "capped", "%s", json);
  cr_assert_eq(json_num(json, "limit_bytes"), 200 * MiB);
  cr_assert_not_null(strstr(json, "\"cap_set\": true"), "%s", json);
  cr_assert_not_null(strstr(json_str(json, "arithmetic"),
                            "allocated 176.0 MiB + request 72.0 MiB = 248.0 MiB > cap 200.0 MiB, while the device has "
                            "room for it: total 256.0 MiB - other processes 0.0 MiB = 256.0 MiB"),
                     "%s", json);
  cr_assert_not_null(strstr(json_str(json, "hint"), "raise memory_cap_mb to at least 248"), "%s", json);
  free(json);
}

/* Classic segments: half the memory free, in 1.5 MiB holes between live
 * blocks; a 4 MiB block needs a new 20 MiB segment, past the device. */
Test(core_oom, fragmented_classic_segments) {
  start("sim_capacity_mb:32,expandable_segments:false");
  void *p[32];
  int n = 0;
  capture_t c;
  char err[4096];
  capture_begin(&c);   /* the fill ends in its own failure */
  while (n < 32 && cudalloc_malloc(&p[n], 1536 * 1024, 0) == cudaSuccess) n++;
  capture_end(&c, err, sizeof err);
  for (int i = 0; i < n; i += 2) cudalloc_free_sync(p[i]);
  char *json = fails_as(4 * MiB, "oom-2.json", err, sizeof err);
  cr_assert_str_eq(json_str(json, "verdict"), "fragmented", "%s", json);
  long long idle = json_num(json, "cached_bytes") - json_num(json, "pending_bytes");
  long long headroom = json_num(json, "limit_bytes") - json_num(json, "reserved_bytes");
  cr_assert_geq(idle + headroom, 4 * MiB, "enough is free: %s", json);
  cr_assert_lt(json_num(json, "largest_free_bytes"), 4 * MiB, "but not in one block: %s", json);
  cr_assert_gt(json_num(json, "grow_bytes"), headroom, "and a new segment does not fit: %s", json);
  cr_assert_not_null(strstr(json_str(json, "hint"), "expandable_segments:true"), "%s", json);
  free(json);
}

/* A graph capture forbids waiting: the freed block waits for its work. */
Test(core_oom, pending_during_a_capture) {
  start("sim_events:manual,sim_capacity_mb:16");
  void *p = alloc_ok(6 * MiB);
  alloc_ok(6 * MiB);
  ca_capture_begin();
  cudalloc_free_sync(p);
  char err[4096];
  char *json = fails(6 * MiB, err, sizeof err);
  ca_capture_end();
  cr_assert_str_eq(json_str(json, "verdict"), "pending", "%s", json);
  cr_assert_eq(json_num(json, "pending_bytes"), 6 * MiB, "%s", json);
  cr_assert_not_null(strstr(json, "\"capture\": true"), "%s", json);
  cr_assert_not_null(strstr(json_str(json, "arithmetic"), "+ pending 6.0 MiB"), "%s", json);
  cr_assert_not_null(strstr(json_str(json, "hint"), "a graph capture forbids waiting"), "%s", json);
  free(json);
}

/* Another process holds 192 MiB of the 256: the driver refuses what
 * cudalloc's limit (the device) allows. */
Test(core_oom, refused_another_process_holds_the_memory) {
  start("sim_capacity_mb:256,sim_other_process:4242:trainer:201326592");
  alloc_ok(40 * MiB);
  cr_assert_eq(driver_free(), 24 * MiB, "256 - 192 - 40");
  char err[4096];
  char *json = fails(32 * MiB, err, sizeof err);
  cr_assert_str_eq(json_str(json, "verdict"), "refused", "%s", json);
  /* the failing growth took what was left, and keeps it cached */
  cr_assert_eq(json_num(json, "driver_free_bytes") + json_num(json, "cached_bytes"), 24 * MiB, "%s", json);
  cr_assert_eq(json_num(json, "other_processes_bytes"), 192 * MiB, "%s", json);
  cr_assert_not_null(strstr(json, "{\"pid\": 4242, \"name\": \"trainer\", \"bytes\": 201326592}"), "%s", json);
  cr_assert_not_null(strstr(json_str(json, "arithmetic"),
                            "= 72.0 MiB fits the limit 256.0 MiB, but 1 other process holds 192.0 MiB: total 256.0 MiB - "
                            "192.0 MiB = 64.0 MiB < 72.0 MiB"),
                     "%s", json);
  char *txt = slurp("oom.txt");
  cr_assert_not_null(strstr(txt, "other process     pid 4242 (trainer): 192.0 MiB (201326592 bytes)"), "%s", txt);
  free(txt);
  free(json);
}

/* Regression (issue 10): after injected map failures the report said
 * "fragmentation". The driver failed with memory to spare: refused. Run
 * against the old decision (ported into ca_oom_decide), this test failed
 * with verdict "fragmented" where "refused" is expected. */
Test(core_oom, regression_injected_map_failures_are_refused_not_fragmented) {
  start("sim_capacity_mb:64");
  void *a = alloc_ok(2 * MiB), *b = alloc_ok(2 * MiB);
  cudalloc_free_sync(a);
  cudalloc_free_sync(b);
  ca_sim_fail_rate(CA_OP_map, 1.0, 1);   /* from now on every map fails */
  char err[4096];
  char *json = fails(8 * MiB, err, sizeof err);
  cr_assert_str_eq(json_str(json, "verdict"), "refused", "%s", json);
  cr_assert_geq(json_num(json, "driver_free_bytes"), 8 * MiB, "the device had room: %s", json);
  cr_assert_eq(json_num(json, "driver_error"), CUDA_ERROR_OUT_OF_MEMORY, "%s", json);
  cr_assert_not_null(strstr(json_str(json, "arithmetic"), "yet the driver failed with error 2"), "%s", json);
  cr_assert_not_null(strstr(json_str(json, "hint"), "the driver failed with memory to spare"), "%s", json);
  free(json);
}

// ----------------------------------------------------------------------------
// Files, stderr, the rate limit
// ----------------------------------------------------------------------------

Test(core_oom, stderr_is_short_and_names_the_file) {
  start("sim_capacity_mb:16");
  char err[4096];
  char *json = fails(32 * MiB, err, sizeof err);
  char want[160];
  snprintf(want, sizeof want, "cudalloc:   report: %s/oom.txt (and .json)\n", dir);
  cr_assert_not_null(strstr(err, want), "%s", err);
  cr_assert_eq(count_lines(err), 3, "verdict, hint, file:\n%s", err);
  cr_assert_str_eq(json_str(json, "schema"), "cudalloc-oom/1");
  cr_assert_not_null(strstr(json_str(json, "hint"), "the request alone (32.0 MiB)"), "%s", json);
  free(json);
}

/* Eleven failures: three full reports, then silence within the second,
 * then one line that counts what it left out. */
Test(core_oom, repeated_failures_are_rate_limited) {
  start("sim_capacity_mb:16");
  capture_t c;
  void *p;
  capture_begin(&c);
  for (int i = 0; i < 10; i++) cr_assert_eq(cudalloc_malloc(&p, 32 * MiB, 0), cudaErrorMemoryAllocation);
  usleep(1100 * 1000);
  cr_assert_eq(cudalloc_malloc(&p, 32 * MiB, 0), cudaErrorMemoryAllocation);
  char *err = capture_end_all(&c);
  cr_assert_eq(count_of(err, "cudalloc:   report: "), CA_OOM_FULL_REPORTS, "%s", err);
  cr_assert_eq(count_of(err, " again: "), 1, "%s", err);
  cr_assert_not_null(strstr(err, "out of memory on device 0 again: asked for 32.0 MiB, exhausted; 8 failures since the "
                                 "last line (11 in all; the first 3 are reported in full)"),
                     "%s", err);
  cr_assert_eq(count_lines(err), 3 * CA_OOM_FULL_REPORTS + 1, "%s", err);
  char *second = slurp("oom-2.json"), *third = slurp("oom-3.json");
  cr_assert(second && third, "each full report has its files");
  cr_assert_eq(json_num(third, "failure"), 3);
  char path[128];
  snprintf(path, sizeof path, "%s/oom-4.json", dir);
  cr_assert_neq(access(path, F_OK), 0, "no fourth file");
  cr_assert_eq(stats0().num_ooms.total, 11, "every failure is counted");
  free(second);
  free(third);
  free(err);
}

/* Bad input: a folder that does not exist. The report is not lost: it
 * goes to stderr after the reason. */
Test(core_oom, an_unwritable_path_puts_the_report_on_stderr) {
  core_start("sim_capacity_mb:16,oom_report:/nonexistent-cudalloc-dir/oom");
  capture_t c;
  void *p;
  char err[8192];
  capture_begin(&c);
  cr_assert_eq(cudalloc_malloc(&p, 32 * MiB, 0), cudaErrorMemoryAllocation);
  capture_end(&c, err, sizeof err);
  cr_assert_not_null(strstr(err, "cannot write the out-of-memory report /nonexistent-cudalloc-dir/oom.txt"), "%s", err);
  cr_assert_not_null(strstr(err, "  verdict           exhausted\n"), "%s", err);
}

Test(core_oom, off_writes_no_file_and_prints_the_report) {
  core_start("sim_capacity_mb:16,oom_report:off");
  capture_t c;
  void *p;
  char err[8192];
  capture_begin(&c);
  cr_assert_eq(cudalloc_malloc(&p, 32 * MiB, 0), cudaErrorMemoryAllocation);
  capture_end(&c, err, sizeof err);
  cr_assert_null(strstr(err, "report: "), "%s", err);
  cr_assert_not_null(strstr(err, "cudalloc out-of-memory report (cudalloc-oom/1)"), "%s", err);
}

/* The file exists before the program can abort: a child that aborts right
 * after the failure leaves it behind. */
Test(core_oom, the_report_survives_an_abort) {
  const char *conf = report_conf();
  pid_t pid = fork();
  cr_assert_geq(pid, 0);
  if (pid == 0) {
    char full[200];
    snprintf(full, sizeof full, "backend:sim,sim_capacity_mb:16,%s", conf);
    int fd = open("/dev/null", O_WRONLY);
    dup2(fd, 2);
    void *p;
    if (cudalloc_init(full) != cudaSuccess || cudalloc_malloc(&p, 32 * MiB, 0) != cudaErrorMemoryAllocation) _exit(3);
    abort();
  }
  int status;
  cr_assert_eq(waitpid(pid, &status, 0), pid);
  cr_assert(WIFSIGNALED(status) && WTERMSIG(status) == SIGABRT, "the child aborted (status %d)", status);
  char *json = slurp("oom.json");
  cr_assert_not_null(json, "the aborted child left its report");
  cr_assert_str_eq(json_str(json, "verdict"), "exhausted");
  cr_assert_eq(json_num(json, "pid"), pid);
  free(json);
}
