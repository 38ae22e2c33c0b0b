/* CUDALLOC_CONF: what the parser accepts, what it refuses (one warning line
 * naming the valid choices, the default kept), and report path expansion. */
#include <criterion/criterion.h>
#include <criterion/parameterized.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "config.h"
#include "stderr_capture.h"

/* Parses conf over *cfg, with the warnings in out; returns the problems. */
static int parse(ca_config_t *cfg, const char *conf, char *out, size_t cap) {
  char *buf = NULL;
  size_t len = 0;
  FILE *f = open_memstream(&buf, &len);
  cr_assert_not_null(f);
  int n = ca_config_parse(cfg, conf, f);
  fclose(f);
  snprintf(out, cap, "%s", buf ? buf : "");
  free(buf);
  return n;
}

/* Parses conf over the defaults and insists that it is accepted silently. */
static ca_config_t parse_ok(const char *conf) {
  ca_config_t cfg;
  char out[4096];
  ca_config_defaults(&cfg);
  int n = parse(&cfg, conf, out, sizeof out);
  cr_assert_eq(n, 0, "'%s' was refused: %s", conf, out);
  cr_assert_str_empty(out, "'%s' printed: %s", conf, out);
  return cfg;
}

// ----------------------------------------------------------------------------
// Valid strings
// ----------------------------------------------------------------------------

/* Every arena count from 1 to the most (the bounds included). */
Test(config, arenas_from_one_to_the_most) {
  cr_assert_eq(parse_ok("arenas:1").arenas, 1);
  cr_assert_eq(parse_ok("arenas:2").arenas, 2);
  cr_assert_eq(parse_ok("arenas:8").arenas, CA_MAX_ARENAS);
}

Test(config, defaults) {
  ca_config_t cfg;
  ca_config_defaults(&cfg);
  cr_assert_str_eq(cfg.backend, "cuda");
  cr_assert(cfg.expandable_segments);
  cr_assert_eq(cfg.max_split_size, UINT64_MAX);
  cr_assert_eq(cfg.gc_threshold, 0.0);
  cr_assert_eq(cfg.roundup_power2_divisions, 0);
  cr_assert_eq(cfg.memory_cap, 0);
  cr_assert_eq(cfg.memory_fraction, 0.0);
  cr_assert_eq(cfg.free_mode, CA_FREE_DEVICE);
  cr_assert_eq(cfg.track, CA_TRACK_STACK);
  cr_assert_eq(cfg.track_depth, 6);
  cr_assert_eq(cfg.leak_exit_code, 0);
  cr_assert_eq(cfg.thread_cache_kb, 1024);
  cr_assert_eq(cfg.arenas, 2, "two arenas: threads that contend each take one (docs/configuration.md)");
  cr_assert_eq(cfg.thread_cache_large_mb, 0, "the front cache's large blocks are off (docs/benchmarks.md)");
  cr_assert_eq(cfg.thread_cache_streams, 64, "each of up to 64 streams adds thread_cache_kb (docs/configuration.md)");
  cr_assert_not(cfg.quiet);
  cr_assert_str_empty(cfg.report);
  cr_assert_eq(cfg.sim.devices, 1);
  cr_assert_eq(cfg.sim.capacity, 1024ull << 20);
  cr_assert_eq(cfg.sim.granularity, 2ull << 20);
  cr_assert_eq(cfg.sim.events, CA_SIM_EVENTS_AUTO);
  cr_assert_eq(cfg.sim.lag_ops, 8);
  cr_assert_eq(cfg.sim.fail_count, 0);
  cr_assert_eq(cfg.sim.fail_rate, 0.0);
  cr_assert_eq(cfg.sim.seed, 1);
  for (int op = 0; op < CA_OP_COUNT; op++) cr_assert_eq(cfg.sim.latency_us[op], 0);
}

Test(config, absent_or_empty_string_keeps_every_default) {
  ca_config_t def, cfg;
  ca_config_defaults(&def);
  const char *empties[] = {NULL, "", " ", ",", ",,, ,", "\t"};
  for (size_t i = 0; i < sizeof empties / sizeof *empties; i++) {
    ca_config_defaults(&cfg);
    cr_assert_eq(ca_config_parse(&cfg, empties[i], NULL), 0);
    cr_assert_eq(memcmp(&cfg, &def, sizeof cfg), 0, "string %zu changed the configuration", i);
  }
}

Test(config, every_key_accepts_a_valid_value) {
  ca_config_t c = parse_ok(
      "backend:sim,expandable_segments:false,max_split_size_mb:128,"
      "garbage_collection_threshold:0.6,roundup_power2_divisions:4,memory_cap_mb:4096,"
      "memory_fraction:0.5,free_mode:stream,track:backtrace,track_depth:32,quiet:true,"
      "report:/tmp/cudalloc-%p-%r,sim_devices:4,sim_capacity_mb:512,"
      "sim_granularity_kb:64,sim_events:manual,sim_fail:map@3,sim_fail_rate:0.25,"
      "sim_seed:42,sim_latency:create@200,thread_cache_large_mb:32");
  cr_assert_str_eq(c.backend, "sim");
  cr_assert_not(c.expandable_segments);
  cr_assert_eq(c.max_split_size, 128ull << 20);
  cr_assert_float_eq(c.gc_threshold, 0.6, 1e-12);
  cr_assert_eq(c.roundup_power2_divisions, 4);
  cr_assert_eq(c.memory_cap, 4096ull << 20);
  cr_assert_float_eq(c.memory_fraction, 0.5, 1e-12);
  cr_assert_eq(c.free_mode, CA_FREE_STREAM);
  cr_assert_eq(c.track, CA_TRACK_BACKTRACE);
  cr_assert_eq(c.track_depth, 32);
  cr_assert(c.quiet);
  cr_assert_str_eq(c.report, "/tmp/cudalloc-%p-%r");
  cr_assert_eq(c.sim.devices, 4);
  cr_assert_eq(c.sim.capacity, 512ull << 20);
  cr_assert_eq(c.sim.granularity, 64ull << 10);
  cr_assert_eq(c.sim.events, CA_SIM_EVENTS_MANUAL);
  cr_assert_eq(c.sim.fail_count, 1);
  cr_assert_eq(c.sim.fail[0].op, CA_OP_map);
  cr_assert_eq(c.sim.fail[0].nth, 3);
  cr_assert_float_eq(c.sim.fail_rate, 0.25, 1e-12);
  cr_assert_eq(c.sim.seed, 42);
  cr_assert_eq(c.sim.latency_us[CA_OP_create], 200);
  cr_assert_eq(c.sim.latency_us[CA_OP_map], 0);
  cr_assert_eq(c.thread_cache_large_mb, 32);
}

Test(config, the_other_choices_of_each_enum) {
  cr_assert_str_eq(parse_ok("backend:cuda").backend, "cuda");
  cr_assert_eq(parse_ok("free_mode:device").free_mode, CA_FREE_DEVICE);
  cr_assert_eq(parse_ok("track:off").track, CA_TRACK_OFF);
  cr_assert_eq(parse_ok("track:caller").track, CA_TRACK_CALLER);
  cr_assert_eq(parse_ok("sim_events:auto").sim.events, CA_SIM_EVENTS_AUTO);
  cr_assert_eq(parse_ok("sim_events:lag,sim_lag_ops:3").sim.events, CA_SIM_EVENTS_LAG);
  cr_assert_eq(parse_ok("sim_events:lag,sim_lag_ops:3").sim.lag_ops, 3);
  cr_assert_eq(parse_ok("roundup_power2_divisions:0").roundup_power2_divisions, 0);
  cr_assert_eq(parse_ok("memory_cap_mb:0").memory_cap, 0);
  cr_assert_eq(parse_ok("sim_seed:18446744073709551615").sim.seed, UINT64_MAX);
  cr_assert_eq(parse_ok("sim_seed:0").sim.seed, 0);
  cr_assert_eq(parse_ok("sim_granularity_kb:4").sim.granularity, 4096);
}

/* PyTorch writes Python booleans (True/False) into PYTORCH_CUDA_ALLOC_CONF. */
Test(config, booleans_in_any_case) {
  struct { const char *word; bool value; } words[] = {
      {"True", true}, {"False", false}, {"TRUE", true}, {"false", false}, {"1", true},
      {"0", false},   {"on", true},     {"OFF", false}, {"Yes", true},    {"no", false}};
  for (size_t i = 0; i < sizeof words / sizeof *words; i++) {
    char conf[64];
    snprintf(conf, sizeof conf, "expandable_segments:%s,quiet:%s", words[i].word, words[i].word);
    ca_config_t c = parse_ok(conf);
    cr_assert_eq(c.expandable_segments, words[i].value, "%s", conf);
    cr_assert_eq(c.quiet, words[i].value, "%s", conf);
  }
}

Test(config, a_pytorch_string_as_pytorch_writes_it) {
  ca_config_t c = parse_ok("expandable_segments:True,max_split_size_mb:512,"
                           "garbage_collection_threshold:0.8,roundup_power2_divisions:16");
  cr_assert(c.expandable_segments);
  cr_assert_eq(c.max_split_size, 512ull << 20);
  cr_assert_float_eq(c.gc_threshold, 0.8, 1e-12);
  cr_assert_eq(c.roundup_power2_divisions, 16);
}

Test(config, whitespace_case_and_empty_items) {
  ca_config_t c = parse_ok("  Backend : SIM ,\tsim_devices :  3 ,, SIM_EVENTS:Manual , ");
  cr_assert_str_eq(c.backend, "sim");
  cr_assert_eq(c.sim.devices, 3);
  cr_assert_eq(c.sim.events, CA_SIM_EVENTS_MANUAL);
  c = parse_ok("backend:sim,");
  cr_assert_str_eq(c.backend, "sim");
}

Test(config, a_later_value_wins_and_lists_accumulate) {
  ca_config_t c = parse_ok("sim_devices:2,sim_devices:5,sim_fail:create@1,sim_fail:map@7,"
                           "sim_latency:map@2,sim_latency:create@150,sim_latency:map@3");
  cr_assert_eq(c.sim.devices, 5);
  cr_assert_eq(c.sim.fail_count, 2);
  cr_assert_eq(c.sim.fail[0].op, CA_OP_create);
  cr_assert_eq(c.sim.fail[0].nth, 1);
  cr_assert_eq(c.sim.fail[1].op, CA_OP_map);
  cr_assert_eq(c.sim.fail[1].nth, 7);
  cr_assert_eq(c.sim.latency_us[CA_OP_map], 3);
  cr_assert_eq(c.sim.latency_us[CA_OP_create], 150);
}

Test(config, a_path_keeps_its_colons_and_may_fill_the_buffer) {
  cr_assert_str_eq(parse_ok("report:C:/x:y/%r").report, "C:/x:y/%r");
  char conf[CA_CONFIG_PATH_MAX + 16], path[CA_CONFIG_PATH_MAX];
  memset(path, 'a', sizeof path - 1);
  path[sizeof path - 1] = 0;      /* the longest path that fits: 255 characters */
  snprintf(conf, sizeof conf, "report:%s", path);
  cr_assert_str_eq(parse_ok(conf).report, path);
}

// ----------------------------------------------------------------------------
// Malformed strings: one warning line each, naming the choices; default kept
// ----------------------------------------------------------------------------

typedef struct bad_case_s {
  const char *conf;
  const char *says;      /* the warning names the problem ... */
  const char *choices;   /* ... and the valid choices */
} bad_case_t;

static bad_case_t bad_cases[] = {
    {"bogus:1", "unknown key 'bogus'", "backend, expandable_segments, max_split_size_mb"},
    {"Backend=sim", "unknown key 'Backend=sim'", "sim_latency"},
    {":5", "unknown key ''", "sim_seed"},
    {"pinned_use_cuda_host_register:True", "unknown key", "garbage_collection_threshold"},
    {"sim_devices:abc", "bad value 'abc' for key 'sim_devices'", "an integer from 1 to 16"},
    {"sim_devices:4x", "bad value '4x'", "from 1 to 16"},
    {"sim_devices:1.5", "bad value '1.5'", "from 1 to 16"},
    {"sim_devices:2 3", "bad value '2 3'", "from 1 to 16"},
    {"sim_devices:", "empty value '' for key 'sim_devices'", "from 1 to 16"},
    {"sim_devices", "missing ':value'", "from 1 to 16"},
    {"sim_devices:99999999999999999999999", "bad value", "from 1 to 16"},
    {"sim_capacity_mb:9999999999999999999999999999999999999999", "bad value", "from 1 to 1048576"},
    {"sim_devices:-1", "bad value '-1'", "from 1 to 16"},
    {"sim_devices:+2", "bad value '+2'", "from 1 to 16"},
    {"sim_devices:0", "bad value '0'", "from 1 to 16"},
    {"sim_devices:17", "bad value '17'", "from 1 to 16"},
    {"arenas:0", "bad value '0' for key 'arenas'", "from 1 to 8"},
    {"arenas:9", "bad value '9'", "from 1 to 8"},
    {"arenas:two", "bad value 'two'", "from 1 to 8"},
    {"arenas:-2", "bad value '-2'", "from 1 to 8"},
    {"arenas:2.5", "bad value '2.5'", "from 1 to 8"},
    {"memory_cap_mb:-5", "bad value", "from 0 to 1073741824"},
    {"max_split_size_mb:0", "bad value", "from 1 to 1073741824"},
    {"sim_granularity_kb:3000", "bad value '3000'", "a power of two"},
    {"sim_granularity_kb:2", "bad value '2'", "from 4 to 1048576"},
    {"roundup_power2_divisions:3", "bad value '3'", "a power of two"},
    {"roundup_power2_divisions:128", "bad value", "from 0 to 64"},
    {"roundup_power2_divisions:[256:1,512:2,>:8]", "bad value '[256:1,512:2,>:8]'", "from 0 to 64"},
    {"garbage_collection_threshold:1.5", "bad value '1.5'", "a decimal number from 0 to 1"},
    {"garbage_collection_threshold:-0.1", "bad value", "from 0 to 1"},
    {"garbage_collection_threshold:nan", "bad value 'nan'", "from 0 to 1"},
    {"memory_fraction:inf", "bad value 'inf'", "from 0 to 1"},
    {"memory_fraction:1e999", "bad value", "from 0 to 1"},
    {"memory_fraction:half", "bad value", "from 0 to 1"},
    /* Regression (issue 9): strtod read these, so hexadecimal and signed
     * fractions were accepted (0x0.8 as 0.5, -0 as 0) though the
     * documentation promises plain decimals; each case parsed silently. */
    {"memory_fraction:0x0.8", "bad value '0x0.8'", "a decimal number from 0 to 1"},
    {"memory_fraction:0x1p-1", "bad value", "from 0 to 1"},
    {"garbage_collection_threshold:+0.5", "bad value '+0.5'", "from 0 to 1"},
    {"garbage_collection_threshold:-0", "bad value '-0'", "from 0 to 1"},
    {"sim_fail_rate:-0.0", "bad value", "from 0 to 1"},
    {"memory_fraction:5e-1", "bad value '5e-1'", "from 0 to 1"},
    {"memory_fraction:0.", "bad value '0.'", "from 0 to 1"},
    {"memory_fraction:.", "bad value '.'", "from 0 to 1"},
    {"memory_fraction:0.5.1", "bad value", "from 0 to 1"},
    {"sim_fail_rate:2", "bad value '2'", "from 0 to 1"},
    {"page_churn_cap:-0.5", "bad value '-0.5'", "from 0 to 16"},
    {"page_churn_cap:17", "bad value '17'", "from 0 to 16"},
    {"page_churn_cap:lots", "bad value 'lots'", "from 0 to 16"},
    {"thread_cache_streams:0", "bad value '0'", "from 1 to 128"},
    {"thread_cache_streams:129", "bad value '129'", "from 1 to 128"},
    {"thread_cache_large_mb:-1", "bad value '-1'", "from 0 to 1048576"},
    {"thread_cache_large_mb:1048577", "bad value '1048577'", "from 0 to 1048576"},
    {"thread_cache_large_mb:64MB", "bad value '64MB'", "from 0 to 1048576"},
    {"backend:gpu", "bad value 'gpu' for key 'backend'", "one of cuda|sim"},
    /* PyTorch's backend key picks its own allocator: the warning says so
     * (before, a plain "bad value" that did not explain the clash). */
    {"backend:native", "'backend:native' is PyTorch's choice of its own allocator; in cudalloc, backend is the device",
     "one of cuda|sim"},
    {"backend:cudaMallocAsync", "'backend:cudaMallocAsync' is PyTorch's choice", "one of cuda|sim"},
    {"free_mode:async", "bad value", "one of device|stream"},
    {"track:full", "bad value", "one of off|caller|stack|python|backtrace"},
    {"sim_events:sometimes", "bad value", "one of auto|manual|lag"},
    {"sim_lag_ops:0", "bad value", "from 1"},
    {"expandable_segments:maybe", "bad value 'maybe'", "true or false"},
    {"expandable_segments:", "empty value", "true or false"},
    {"quiet:2", "bad value '2'", "true or false"},
    {"track_depth:0", "bad value", "from 1 to 64"},
    {"track_depth:65", "bad value", "from 1 to 64"},
    {"sim_seed:18446744073709551616", "bad value", "from 0 to 18446744073709551615"},
    {"sim_seed:-1", "bad value", "from 0 to 18446744073709551615"},
    {"sim_fail:bogus@1", "bad value 'bogus@1'", "map|unmap|set_access"},
    {"sim_fail:map", "bad value 'map'", "<op>@<integer from 1 to"},
    {"sim_fail:map@0", "bad value 'map@0'", "init|device_count"},
    {"sim_fail:map@", "bad value", "is_capturing"},
    {"sim_fail:@3", "bad value", "is_capturing"},
    {"sim_fail:map@1x", "bad value", "is_capturing"},
    {"sim_fail:Map@1", "bad value", "map|unmap"},
    {"sim_latency:map@10000001", "bad value", "<op>@<integer from 0 to 10000000>"},
    {"sim_latency:nope@5", "bad value", "event_record"},
    {"backend:s\nim", "bad value 's?im'", "one of cuda|sim"},
    /* sim_other_process:<pid>:<name>:<bytes> */
    {"sim_other_process:42:trainer", "bad value '42:trainer'", "<pid from 1 to 4294967295>:<name of 1 to 31"},
    {"sim_other_process:x:trainer:1", "bad value", "<pid from 1 to"},
    {"sim_other_process:0:trainer:1", "bad value '0:trainer:1'", "<pid from 1 to"},
    {"sim_other_process:4294967296:t:1", "bad value", "<pid from 1 to 4294967295>"},
    {"sim_other_process:42::1", "bad value '42::1'", "<name of 1 to 31 characters"},
    {"sim_other_process:42:a:b:1", "bad value", "no ':' or ','"},
    {"sim_other_process:42:t:-1", "bad value", ":<bytes>"},
    {"sim_other_process:42:t:1x", "bad value", ":<bytes>"},
    {"sim_other_process:42:a-name-of-thirty-two-characters2:1", "bad value", "<name of 1 to 31 characters"},
    {"sim_other_process:42:a\"b:1", "bad value", "<name of 1 to 31"},
};

#define NBAD (sizeof bad_cases / sizeof *bad_cases)

/* Parameters are indices: Criterion runs each test in a new process where
 * the runner's pointers (to the strings above) mean nothing. */
ParameterizedTestParameters(config, malformed) {
  static size_t idx[NBAD];
  for (size_t i = 0; i < NBAD; i++) idx[i] = i;
  return cr_make_param_array(size_t, idx, NBAD);
}

ParameterizedTest(size_t *i, config, malformed) {
  const bad_case_t *bc = &bad_cases[*i];
  ca_config_t def, cfg;
  char out[4096];
  ca_config_defaults(&def);
  ca_config_defaults(&cfg);
  int n = parse(&cfg, bc->conf, out, sizeof out);
  cr_assert_eq(n, 1, "'%s': %d problems", bc->conf, n);
  cr_assert_eq(count_lines(out), 1, "'%s' printed %d lines: %s", bc->conf, count_lines(out), out);
  cr_assert(strncmp(out, "cudalloc: CUDALLOC_CONF: ", 25) == 0, "%s", out);
  cr_assert_not_null(strstr(out, bc->says), "'%s': '%s' not in: %s", bc->conf, bc->says, out);
  cr_assert_not_null(strstr(out, bc->choices), "'%s': '%s' not in: %s", bc->conf, bc->choices, out);
  cr_assert_eq(memcmp(&cfg, &def, sizeof cfg), 0, "'%s' changed the configuration", bc->conf);
}

Test(config, a_bad_value_keeps_the_value_before_it) {
  ca_config_t cfg;
  char out[4096];
  ca_config_defaults(&cfg);
  cr_assert_eq(parse(&cfg, "sim_devices:4,sim_devices:x,sim_fail:map@2,sim_fail:map@0", out, sizeof out), 2);
  cr_assert_eq(cfg.sim.devices, 4);
  cr_assert_eq(cfg.sim.fail_count, 1);
  cr_assert_eq(cfg.sim.fail[0].nth, 2);
  cr_assert_eq(count_lines(out), 2, "%s", out);
}

Test(config, a_bad_item_does_not_stop_the_others) {
  ca_config_t cfg;
  char out[4096];
  ca_config_defaults(&cfg);
  int n = parse(&cfg, "bogus:1,backend:sim,sim_devices:zz,sim_devices:3,,track:nope", out, sizeof out);
  cr_assert_eq(n, 3);
  cr_assert_eq(count_lines(out), 3, "%s", out);
  cr_assert_str_eq(cfg.backend, "sim");
  cr_assert_eq(cfg.sim.devices, 3);
  cr_assert_eq(cfg.track, CA_TRACK_STACK, "the bad value keeps the default");
}

/* Regression (issue 9): with a '[' that no ']' closes, every comma after it
 * counted as part of the value, so each later item was dropped without a
 * word (sim_devices stayed 1, quiet false, one warning about the list). */
Test(config, an_unbalanced_bracket_warns_and_the_later_items_still_apply) {
  ca_config_t cfg;
  char out[4096];
  ca_config_defaults(&cfg);
  int n = parse(&cfg, "roundup_power2_divisions:[256:1,sim_devices:3,quiet:true", out, sizeof out);
  cr_assert_eq(n, 1, "%d problems: %s", n, out);
  cr_assert_eq(count_lines(out), 1, "%s", out);
  cr_assert_not_null(strstr(out, "unbalanced '['"), "%s", out);
  cr_assert_not_null(strstr(out, "'roundup_power2_divisions:[256:1'"), "%s", out);
  cr_assert_eq(cfg.roundup_power2_divisions, 0);
  cr_assert_eq(cfg.sim.devices, 3);
  cr_assert(cfg.quiet);
}

/* A ']' without a '[' is an ordinary character of a (refused) value. */
Test(config, a_closing_bracket_alone_ends_nothing) {
  ca_config_t cfg;
  char out[4096];
  ca_config_defaults(&cfg);
  cr_assert_eq(parse(&cfg, "sim_devices:2],quiet:true", out, sizeof out), 1);
  cr_assert_eq(cfg.sim.devices, 1);
  cr_assert(cfg.quiet);
}

/* The plain decimals that stay accepted. */
Test(config, decimal_fractions) {
  cr_assert_float_eq(parse_ok("memory_fraction:.25").memory_fraction, 0.25, 1e-12);
  cr_assert_float_eq(parse_ok("memory_fraction:1").memory_fraction, 1.0, 1e-12);
  cr_assert_float_eq(parse_ok("memory_fraction:0.125").memory_fraction, 0.125, 1e-12);
  cr_assert_float_eq(parse_ok("garbage_collection_threshold:00.50").gc_threshold, 0.5, 1e-12);
  cr_assert_float_eq(parse_ok("page_churn_cap:0").page_churn_cap, 0, 1e-12);
  cr_assert_float_eq(parse_ok("page_churn_cap:0.25").page_churn_cap, 0.25, 1e-12);
}

static const char *changed(const ca_config_t *c);

Test(config, other_processes_accumulate_up_to_four) {
  ca_config_t c = parse_ok("sim_other_process:4242:trainer:268435456,oom_report:/tmp/o-%p,"
                           "sim_other_process:7:x:0");
  cr_assert_eq(c.sim.others_count, 2);
  cr_assert_eq(c.sim.others[0].pid, 4242);
  cr_assert_str_eq(c.sim.others[0].name, "trainer");
  cr_assert_eq(c.sim.others[0].bytes, 268435456);
  cr_assert_str_eq(c.sim.others[1].name, "x");
  cr_assert_str_eq(c.oom_report, "/tmp/o-%p");
  cr_assert_str_eq(changed(&c), "oom_report:/tmp/o-%p,sim_other_process:4242:trainer:268435456,"
                                "sim_other_process:7:x:0");
  /* a fifth is refused and keeps the four */
  ca_config_t cfg;
  char out[4096];
  ca_config_defaults(&cfg);
  cr_assert_eq(parse(&cfg, "sim_other_process:1:a:1,sim_other_process:2:b:2,sim_other_process:3:c:3,"
                           "sim_other_process:4:d:4,sim_other_process:5:e:5", out, sizeof out), 1, "%s", out);
  cr_assert_eq(cfg.sim.others_count, 4);
  cr_assert_not_null(strstr(out, "bad value '5:e:5' for key 'sim_other_process'"), "%s", out);
  cr_assert_not_null(strstr(out, "(at most 4 entries)"), "%s", out);
}

Test(config, too_many_sim_fail_entries) {
  ca_config_t cfg;
  char conf[512] = "", out[4096];
  for (int i = 1; i <= CA_BACKEND_MAX_FAULTS + 1; i++) {
    char item[32];
    snprintf(item, sizeof item, "%ssim_fail:create@%d", i > 1 ? "," : "", i);
    strcat(conf, item);
  }
  ca_config_defaults(&cfg);
  cr_assert_eq(parse(&cfg, conf, out, sizeof out), 1);
  cr_assert_eq(count_lines(out), 1, "%s", out);
  cr_assert_not_null(strstr(out, "at most 8 entries"), "%s", out);
  cr_assert_not_null(strstr(out, "'create@9'"), "%s", out);
  cr_assert_eq(cfg.sim.fail_count, CA_BACKEND_MAX_FAULTS);
  for (unsigned i = 0; i < cfg.sim.fail_count; i++) cr_assert_eq(cfg.sim.fail[i].nth, i + 1);
}

Test(config, an_over_long_path_or_key_is_refused_in_one_short_line) {
  ca_config_t cfg;
  char conf[1200], out[4096];
  strcpy(conf, "report:/");
  memset(conf + 8, 'p', 1000);
  conf[1008] = 0;
  ca_config_defaults(&cfg);
  cr_assert_eq(parse(&cfg, conf, out, sizeof out), 1);
  cr_assert_eq(count_lines(out), 1);
  cr_assert_not_null(strstr(out, "fewer than 256 characters"), "%s", out);
  cr_assert_lt(strlen(out), 400, "the warning repeats the whole value: %zu bytes", strlen(out));
  cr_assert_str_empty(cfg.report);

  memset(conf, 'k', 1000);       /* an unknown key of 1000 characters */
  strcpy(conf + 1000, ":1");
  cr_assert_eq(parse(&cfg, conf, out, sizeof out), 1);
  cr_assert_eq(count_lines(out), 1);
  /* the key is cut; most of the line is the list of valid keys, which
   * grows with every key (713 bytes with legacy_queue) */
  cr_assert_not_null(strstr(out, "kkk...'"), "the key is not cut: %s", out);
  cr_assert_lt(strlen(out), 1000, "longer than the key itself: %zu bytes", strlen(out));
}

Test(config, silent_without_an_output_stream) {
  ca_config_t cfg;
  ca_config_defaults(&cfg);
  cr_assert_eq(ca_config_parse(&cfg, "bogus:1,sim_devices:x,backend:sim", NULL), 2);
  cr_assert_str_eq(cfg.backend, "sim");
}

/* splitmix64: the seeded generator of the fuzz test. */
static uint64_t next_rand(uint64_t *s) {
  uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

/* A random string made of key names, values and punctuation. */
static void random_conf(uint64_t *seed, char *buf, size_t cap) {
  static const char *tokens[] = {
      "backend", "sim_fail", "sim_devices", "report", "garbage_collection_threshold",
      "roundup_power2_divisions", "sim_latency", "sim_granularity_kb", "expandable_segments",
      ":", ":", ",", ",", "@", "map", "-", ".", "[", "]", " ", "True", "sim", "1", "64",
      "99999999999999999999999", "0.5", "nan", "%p", "\n", "\xff", "sim_other_process", "oom_report",
      "7:trainer:"};
  size_t n = 0, ntok = next_rand(seed) % 24;
  for (size_t i = 0; i < ntok; i++) {
    const char *t = tokens[next_rand(seed) % (sizeof tokens / sizeof *tokens)];
    char byte[2] = {(char)(1 + next_rand(seed) % 255), 0};
    if (next_rand(seed) % 8 == 0) t = byte;
    size_t len = strlen(t);
    if (n + len + 1 > cap) break;
    memcpy(buf + n, t, len);
    n += len;
  }
  buf[n] = 0;
}

static void assert_sane(const ca_config_t *c, const char *conf) {
  cr_assert(ca_backend_find(c->backend) != NULL, "%s", conf);
  cr_assert(c->sim.devices >= 1 && c->sim.devices <= 16, "%s", conf);
  cr_assert(c->gc_threshold >= 0 && c->gc_threshold <= 1, "%s", conf);
  cr_assert(c->memory_fraction >= 0 && c->memory_fraction <= 1, "%s", conf);
  cr_assert(c->track_depth >= 1 && c->track_depth <= 64, "%s", conf);
  cr_assert_leq(c->sim.fail_count, CA_BACKEND_MAX_FAULTS, "%s", conf);
  cr_assert_eq(c->roundup_power2_divisions & (c->roundup_power2_divisions - 1), 0, "%s", conf);
  cr_assert_eq(c->sim.granularity & (c->sim.granularity - 1), 0, "%s", conf);
  cr_assert_lt(strnlen(c->report, CA_CONFIG_PATH_MAX), CA_CONFIG_PATH_MAX, "%s", conf);
}

Test(config, random_strings_never_crash_and_warn_once_per_problem) {
  uint64_t seed = 12345;
  char conf[256], out[16384];
  for (int i = 0; i < 4000; i++) {
    ca_config_t cfg;
    ca_config_defaults(&cfg);
    random_conf(&seed, conf, sizeof conf);
    int n = parse(&cfg, conf, out, sizeof out);
    cr_assert_geq(n, 0);
    cr_assert_eq(count_lines(out), n, "'%s': %d problems, %d lines", conf, n, count_lines(out));
    assert_sane(&cfg, conf);
  }
}

// ----------------------------------------------------------------------------
// Loading from the environment, printing
// ----------------------------------------------------------------------------

Test(config, load_reads_the_environment_and_warns_on_stderr) {
  setenv("CUDALLOC_CONF", "backend:sim,bogus:2,sim_devices:2", 1);
  capture_t cap;
  char err[4096];
  capture_begin(&cap);
  int n = ca_config_load(NULL);
  capture_end(&cap, err, sizeof err);
  cr_assert_eq(n, 1);
  cr_assert_eq(count_lines(err), 1, "%s", err);
  cr_assert_not_null(strstr(err, "cudalloc: CUDALLOC_CONF: unknown key 'bogus'"), "%s", err);
  cr_assert_str_eq(ca_config.backend, "sim");
  cr_assert_eq(ca_config.sim.devices, 2);
}

Test(config, load_starts_from_the_defaults_and_prefers_its_argument) {
  setenv("CUDALLOC_CONF", "sim_devices:7", 1);
  ca_config.sim.devices = 5;
  ca_config.quiet = true;
  cr_assert_eq(ca_config_load("backend:sim"), 0);
  cr_assert_eq(ca_config.sim.devices, 1);
  cr_assert_not(ca_config.quiet);
  cr_assert_str_eq(ca_config.backend, "sim");
  cr_assert_eq(ca_config_load(NULL), 0);
  cr_assert_eq(ca_config.sim.devices, 7);
}

Test(config, getenv_matches_whole_names_only) {
  unsetenv("CUDALLOC_CONF");
  setenv("CUDALLOC_CONFX", "backend:sim", 1);
  setenv("XCUDALLOC_CONF", "backend:sim", 1);
  cr_assert_null(ca_getenv("CUDALLOC_CONF"));
  setenv("CUDALLOC_CONF", "", 1);
  cr_assert_str_eq(ca_getenv("CUDALLOC_CONF"), "");
}

Test(config, print_lists_every_key_with_its_value) {
  ca_config_t c = parse_ok("backend:sim,sim_events:manual,sim_fail:unmap@4,sim_latency:map@9,"
                           "max_split_size_mb:64");
  char *buf = NULL;
  size_t len = 0;
  FILE *f = open_memstream(&buf, &len);
  ca_config_print(&c, f);
  fclose(f);
  const char *keys[] = {"backend", "expandable_segments", "max_split_size_mb",
                        "garbage_collection_threshold", "roundup_power2_divisions", "memory_cap_mb",
                        "memory_fraction", "free_mode", "track", "track_depth", "quiet", "report",
                        "sim_devices", "sim_capacity_mb", "sim_granularity_kb",
                        "sim_events", "sim_lag_ops", "sim_fail", "sim_fail_rate", "sim_seed", "sim_latency",
                                 "sim_other_process"};
  for (size_t i = 0; i < sizeof keys / sizeof *keys; i++)
    cr_assert_not_null(strstr(buf, keys[i]), "%s missing from:\n%s", keys[i], buf);
  cr_assert_not_null(strstr(buf, "manual"), "%s", buf);
  cr_assert_not_null(strstr(buf, "unmap@4"), "%s", buf);
  cr_assert_not_null(strstr(buf, "map@9"), "%s", buf);
  cr_assert_not_null(strstr(buf, " 64\n"), "%s", buf);
  free(buf);
}

// ----------------------------------------------------------------------------
// help, the changed keys, PyTorch's variables
// ----------------------------------------------------------------------------

static const char *all_keys[] = {"backend", "expandable_segments", "max_split_size_mb",
                                 "garbage_collection_threshold", "roundup_power2_divisions", "memory_cap_mb",
                                 "memory_fraction", "wait_before_growing", "page_churn_cap", "free_mode", "torch_free", "legacy_queue", "track", "track_depth", "leak_exit_code", "thread_cache_kb", "thread_cache_streams", "thread_cache_large_mb",
                                 "arenas", "arena_spread", "quiet", "summary", "report", "report_signal", "oom_report", "trace", "trace_ring",
                                 "step_on", "sample_ms", "creep_csv", "creep_svg",
                                 "sim_devices", "sim_capacity_mb", "sim_granularity_kb",
                                 "sim_events", "sim_lag_ops", "sim_no_vmm", "sim_fail", "sim_fail_rate", "sim_seed",
                                 "sim_latency", "pinned_cache_mb", "pinned_via", "sim_pinned_mb", "sim_other_process"};

/* help lists every key with its default and meaning, is no problem, and
 * leaves the configuration to the other items. */
Test(config, help_lists_every_key_with_its_default_and_meaning) {
  ca_config_t def, cfg;
  char out[32768];
  ca_config_defaults(&def);
  ca_config_defaults(&cfg);
  cr_assert_eq(parse(&cfg, "help", out, sizeof out), 0, "%s", out);
  cr_assert_eq(memcmp(&cfg, &def, sizeof cfg), 0, "help changed the configuration");
  cr_assert(strncmp(out, "cudalloc: CUDALLOC_CONF=key:value,key:value; every key, its default and its meaning:\n", 84) == 0,
            "%s", out);
  for (size_t i = 0; i < sizeof all_keys / sizeof *all_keys; i++)
    cr_assert_not_null(strstr(out, all_keys[i]), "%s missing from:\n%s", all_keys[i], out);
  cr_assert_eq(count_lines(out), 1 + 2 * (int)(sizeof all_keys / sizeof *all_keys), "%s", out);
  /* Defaults, not the current values; and each key's meaning. */
  cr_assert_not_null(strstr(out, "  backend                        cuda\n"), "%s", out);
  cr_assert_not_null(strstr(out, "  max_split_size_mb              unlimited\n"), "%s", out);
  cr_assert_not_null(strstr(out, "  sim_capacity_mb                1024\n"), "%s", out);
  cr_assert_not_null(strstr(out, "device backend: the CUDA driver, or the simulated device"), "%s", out);

  ca_config_defaults(&cfg);
  cr_assert_eq(parse(&cfg, "backend:sim, HELP ,sim_devices:3", out, sizeof out), 0, "%s", out);
  cr_assert_str_eq(cfg.backend, "sim", "the other items still apply");
  cr_assert_eq(cfg.sim.devices, 3);
  cr_assert_not_null(strstr(out, "  backend                        cuda\n"), "help shows the defaults:\n%s", out);
  cr_assert_eq(ca_config_parse(&cfg, "help", NULL), 0, "silent without an output stream");
}

Test(config, help_from_the_environment_goes_to_stderr) {
  setenv("CUDALLOC_CONF", "help", 1);
  capture_t cap;
  char err[16384];
  capture_begin(&cap);
  int n = ca_config_load(NULL);
  capture_end(&cap, err, sizeof err);
  cr_assert_eq(n, 0);
  cr_assert_not_null(strstr(err, "every key, its default and its meaning"), "%s", err);
  cr_assert_not_null(strstr(err, "sim_latency"), "%s", err);
  cr_assert_str_eq(ca_config.backend, "cuda", "the defaults");
}

static const char *changed(const ca_config_t *c) {
  static char buf[2048];
  ca_config_changed(c, buf, sizeof buf);
  return buf;
}

Test(config, changed_names_only_what_differs_from_the_defaults) {
  ca_config_t c;
  ca_config_defaults(&c);
  cr_assert_str_empty(changed(&c));
  c = parse_ok("sim_devices:1,backend:cuda,track:stack");   /* the defaults, said again */
  cr_assert_str_empty(changed(&c), "%s", changed(&c));
  c = parse_ok("report:/tmp/r-%p,sim_latency:map@9,sim_fail:unmap@1,sim_fail:map@2,backend:sim,"
               "garbage_collection_threshold:0.125,expandable_segments:false,max_split_size_mb:64,track:off");
  cr_assert_str_eq(changed(&c), "backend:sim,expandable_segments:false,max_split_size_mb:64,"
                                "garbage_collection_threshold:0.125,track:off,report:/tmp/r-%p,"
                                "sim_fail:unmap@1,sim_fail:map@2,sim_latency:map@9");
  char small[12];
  cr_assert_eq(ca_config_changed(&c, small, sizeof small), sizeof small - 1, "cut to fit");
  cr_assert_str_eq(small, "backend:sim");
}

/* What changed() writes reads back as the same configuration, whatever the
 * string it came from. */
Test(config, changed_reads_back_as_the_same_configuration) {
  uint64_t seed = 777;
  char conf[256], once[2048];
  for (int i = 0; i < 2000; i++) {
    ca_config_t cfg, again;
    ca_config_defaults(&cfg);
    random_conf(&seed, conf, sizeof conf);
    ca_config_parse(&cfg, conf, NULL);
    snprintf(once, sizeof once, "%s", changed(&cfg));
    ca_config_defaults(&again);
    cr_assert_eq(ca_config_parse(&again, once, NULL), 0, "'%s' -> '%s' is refused", conf, once);
    cr_assert_str_eq(changed(&again), once, "'%s' -> '%s'", conf, once);
  }
}

/* Runs ca_config_note_pytorch_env with the two variables set as given
 * (NULL: unset) and returns what it printed. */
static const char *pytorch_note(const char *cuda_conf, const char *alloc_conf) {
  static char out[4096];
  if (cuda_conf) setenv("PYTORCH_CUDA_ALLOC_CONF", cuda_conf, 1);
  else unsetenv("PYTORCH_CUDA_ALLOC_CONF");
  if (alloc_conf) setenv("PYTORCH_ALLOC_CONF", alloc_conf, 1);
  else unsetenv("PYTORCH_ALLOC_CONF");
  char *buf = NULL;
  size_t len = 0;
  FILE *f = open_memstream(&buf, &len);
  ca_config_note_pytorch_env(f);
  fclose(f);
  snprintf(out, sizeof out, "%s", buf);
  free(buf);
  return out;
}

Test(config, pytorch_variables_are_said_not_to_apply) {
  cr_assert_str_empty(pytorch_note(NULL, NULL));
  const char *out = pytorch_note("expandable_segments:True,max_split_size_mb:128,pinned_use_cuda_host_register:True,"
                                 "roundup_power2_divisions:[256:1,512:2],garbage_collection_threshold:0.7",
                                 NULL);
  cr_assert_eq(count_lines(out), 1, "%s", out);
  cr_assert_str_eq(out, "cudalloc: PYTORCH_CUDA_ALLOC_CONF is set, but cudalloc serves this process's device memory: "
                        "PyTorch's own setting no longer applies; cudalloc would honour its keys expandable_segments, "
                        "max_split_size_mb, garbage_collection_threshold under CUDALLOC_CONF (same names); not with the "
                        "values given there: roundup_power2_divisions\n");
  out = pytorch_note(NULL, "backend:cudaMallocAsync");
  cr_assert_str_eq(out, "cudalloc: PYTORCH_ALLOC_CONF is set, but cudalloc serves this process's device memory: "
                        "PyTorch's own setting no longer applies; none of its keys is one cudalloc would honour under "
                        "CUDALLOC_CONF\n");
  out = pytorch_note("expandable_segments:True", "");
  cr_assert_eq(count_lines(out), 2, "one line per variable set:\n%s", out);
  unsetenv("PYTORCH_CUDA_ALLOC_CONF");
  unsetenv("PYTORCH_ALLOC_CONF");
}

// ----------------------------------------------------------------------------
// Report paths
// ----------------------------------------------------------------------------

Test(config, expand_pid_rank_and_suffix) {
  char out[256], want[256];
  unsetenv("RANK");
  unsetenv("OMPI_COMM_WORLD_RANK");
  cr_assert(ca_config_expand_path("/tmp/run-%p-%r", ".json", out, sizeof out));
  snprintf(want, sizeof want, "/tmp/run-%ld-0.json", (long)getpid());
  cr_assert_str_eq(out, want);

  setenv("OMPI_COMM_WORLD_RANK", "5", 1);
  cr_assert(ca_config_expand_path("r%r", "", out, sizeof out));
  cr_assert_str_eq(out, "r5");
  setenv("RANK", "3", 1);          /* RANK wins over Open MPI's variable */
  cr_assert(ca_config_expand_path("r%r/%r", "-leaks.txt", out, sizeof out));
  cr_assert_str_eq(out, "r3/3-leaks.txt");
}

Test(config, expand_keeps_other_percent_signs) {
  char out[64];
  cr_assert(ca_config_expand_path("a%x%%b%", ".txt", out, sizeof out));
  cr_assert_str_eq(out, "a%x%%b%.txt");
  cr_assert(ca_config_expand_path("", "", out, sizeof out));
  cr_assert_str_empty(out);
}

Test(config, expand_refuses_what_does_not_fit) {
  char out[16];
  setenv("RANK", "123456789012345678901234567890", 1);
  memset(out, 'x', sizeof out);
  cr_assert_not(ca_config_expand_path("r%r", "", out, sizeof out));   /* the rank */
  cr_assert_str_empty(out, "a refused expansion left '%s'", out);
  cr_assert_not(ca_config_expand_path("0123456789abcdef", "", out, sizeof out));  /* the text */
  cr_assert_str_empty(out);
  cr_assert_not(ca_config_expand_path("0123456789", ".json.gz", out, sizeof out)); /* the suffix */
  cr_assert_str_empty(out);
  cr_assert(ca_config_expand_path("0123456789", ".json", out, sizeof out));  /* 15 + NUL fits */
  cr_assert_str_eq(out, "0123456789.json");
  cr_assert_not(ca_config_expand_path("x", "", out, 0));
  char pid_only[2];
  cr_assert_not(ca_config_expand_path("%p%p", "", pid_only, sizeof pid_only));
}
