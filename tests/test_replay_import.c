/* The trace importers (bench/replay/importers.h): PyTorch snapshots read
 * without Python, RMM CSV logs, the table that picks a reader, and the
 * errors bad input gets (an offset or a line, never a crash). */
#include "replay_testing.h"

#include "pickle.h"

#define TINY "tests/replay/tiny_snapshot.pickle"
#define TINY_P2 "tests/replay/tiny_snapshot_p2.pickle"
#define SMALL_CSV "tests/replay/small_rmm.csv"

static int import_bytes(const char *path, const void *data, size_t n, ca_trace_t *t, ca_import_error_t *err) {
  ca_trace_init(t);
  memset(err, 0, sizeof *err);
  return ca_import_buffer(path, data, n, t, err);
}

// ----------------------------------------------------------------------------
// The shared snapshots
// ----------------------------------------------------------------------------

Test(import, shared_snapshots_have_their_events_per_device) {
  for (size_t i = 0; i < N_SHARED; i++) {
    const shared_snapshot_t *s = &shared_snapshots[i];
    char path[512];
    ca_trace_t t;
    shared_path(path, sizeof path, s->file);
    import_ok(path, &t);
    cr_assert_str_eq(t.format, "pytorch-snapshot");
    int with_events = 0;
    for (int d = 0; d < CA_TRACE_MAX_DEVICES; d++) with_events += ca_trace_count(&t, d) > 0;
    cr_assert_eq(with_events, s->ndevices, "%s: %d devices with events, README says %d", s->file, with_events, s->ndevices);
    for (int d = 0; d < s->ndevices; d++)
      cr_assert_eq(ca_trace_count(&t, d), s->events[d], "%s: device %d has %zu events, README says %zu", s->file, d,
                   ca_trace_count(&t, d), s->events[d]);
    cr_assert_eq(t.pre_end, s->pre, "%s: %zu blocks live before the trace, README says %zu", s->file, t.pre_end, s->pre);
    ca_trace_dispose(&t);
  }
}

/* PyTorch's own figures, recomputed from the trace and segments, are the
 * README's (peak live and reserved, in MiB, to the README's precision). */
Test(import, shared_snapshots_give_pytorchs_own_figures) {
  static const struct {
    const char *file;
    int dev;
    double live, reserved;   /* MiB */
    double tol;
  } want[] = {
      {"cs336-transformer-step.pickle", 0, 3098.6, 3606.0, 0.1},
      {"decomfl-opt125m.pickle", 0, 1701.0, 1810.0, 0.1},
      {"constructor-sun-gcn-3gpu-expandable.pickle", 0, 8064, 8146, 1},
      {"constructor-sun-gcn-3gpu-expandable.pickle", 1, 80169, 80302, 1},
      {"constructor-sun-gcn-3gpu-expandable.pickle", 2, 20565, 20870, 1},
      {"select-n-llama7b-10streams.pickle", 0, 19838, 21476, 1},
  };
  for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
    char path[512];
    ca_trace_t t;
    shared_path(path, sizeof path, want[i].file);
    import_ok(path, &t);
    const ca_trace_origin_t *o = &t.origin[want[i].dev];
    double live = (double)o->peak_live / MiB, res = (double)o->peak_reserved / MiB;
    cr_assert(o->known);
    cr_assert(live >= want[i].live - 0.05 && live < want[i].live + want[i].tol, "%s dev %d: peak live %.2f MiB, README %.1f",
              want[i].file, want[i].dev, live, want[i].live);
    cr_assert(res >= want[i].reserved - 0.05 && res < want[i].reserved + want[i].tol,
              "%s dev %d: reserved %.2f MiB, README %.1f", want[i].file, want[i].dev, res, want[i].reserved);
    ca_trace_dispose(&t);
  }
}

// ----------------------------------------------------------------------------
// A small snapshot whose every event is known (tests/replay/README.md)
// ----------------------------------------------------------------------------

static void check_tiny(const char *path) {
  ca_trace_t t;
  import_ok(path, &t);
  cr_assert_eq(t.ndevices, 2);
  /* before the trace: the segment's untouched live block, then the block freed without an alloc */
  cr_assert_eq(t.pre_end, 2);
  cr_assert_eq(t.ev[0].kind, CA_EV_ALLOC);
  cr_assert_eq(t.ev[0].addr, 0x10000000);
  cr_assert_eq(t.ev[0].size, 5 * MiB - 100, "a pre-trace block has its requested size");
  cr_assert_eq(t.ev[1].addr, 0x20000000);
  cr_assert_eq(t.ev[1].size, 6 * MiB);
  cr_assert_eq(ca_trace_count(&t, 0), 9, "10 entries, the 'snapshot' one not replayed");
  cr_assert_eq(ca_trace_count(&t, 1), 4);
  cr_assert_eq(t.skipped, 1);
  const ca_trace_event_t *e = &t.ev[t.pre_end];
  cr_assert_eq(e[0].kind, CA_EV_ALLOC);
  cr_assert_eq(e[0].time_ns, 10000);
  cr_assert_eq(e[1].stream, 7);
  cr_assert_eq(e[2].kind, CA_EV_FREE_ASYNC);
  cr_assert_eq(e[3].kind, CA_EV_FREE_COMPLETED);
  cr_assert_eq(e[6].kind, CA_EV_EMPTY_CACHE);
  cr_assert_eq(e[9].kind, CA_EV_SEGMENT_MAP);
  cr_assert_eq(e[9].device, 1);
  cr_assert_eq(t.origin[0].peak_live, 18 * MiB - 100);
  cr_assert_eq(t.origin[0].peak_reserved, 20 * MiB);
  cr_assert_eq(t.origin[0].live_end, 5 * MiB - 100);
  cr_assert_eq(t.origin[1].peak_reserved, 2 * MiB);
  ca_trace_dispose(&t);
}

Test(import, tiny_snapshot_protocol_4) { check_tiny(TINY); }
Test(import, tiny_snapshot_protocol_2) { check_tiny(TINY_P2); }

// ----------------------------------------------------------------------------
// Malformed pickles: an error with the byte offset
// ----------------------------------------------------------------------------

/* Input tried: every prefix of the small snapshot (the file cut anywhere). */
Test(import, every_truncation_of_a_snapshot_is_an_offset_error) {
  size_t n;
  uint8_t *buf = slurp(TINY, &n);
  for (size_t len = 0; len < n; len++) {
    ca_trace_t t;
    ca_import_error_t err;
    uint8_t *cut = malloc(len ? len : 1);
    memcpy(cut, buf, len);
    cr_assert_eq(import_bytes("cut.pickle", cut, len, &t, &err), -1, "a file cut at %zu bytes was accepted", len);
    if (len >= 2) cr_assert(strstr(err.msg, "byte offset") != NULL, "cut at %zu: '%s'", len, err.msg);
    ca_trace_dispose(&t);
    free(cut);
  }
  free(buf);
}

/* Input tried: a GLOBAL opcode ('c', which would name a class to build) put
 * at byte 2 of a real snapshot, where its FRAME was. */
Test(import, an_opcode_that_is_not_plain_data_names_its_offset) {
  char path[512];
  size_t n;
  shared_path(path, sizeof path, "cs336-transformer-step.pickle");
  uint8_t *buf = slurp(path, &n);
  cr_assert_eq(buf[2], 0x95, "byte 2 is the FRAME opcode");
  buf[2] = 'c';
  ca_trace_t t;
  ca_import_error_t err;
  cr_assert_eq(import_bytes(path, buf, n, &t, &err), -1);
  cr_assert(strstr(err.msg, "byte offset 2: opcode 0x63") != NULL, "got '%s'", err.msg);
  ca_trace_dispose(&t);
  free(buf);
}

/* Inputs tried: hand-made pickles, each wrong in one way, with the offset
 * of the opcode at fault. */
Test(import, malformed_pickles) {
  static const struct {
    const char *bytes;
    size_t n;
    const char *want;
  } cases[] = {
      {"\x80\x04h\x05.", 5, "byte offset 2: memo index 5 was never stored"},
      {"\x80\x09}.", 4, "byte offset 0: protocol 9"},
      {"\x80\x04}X\xff\xff\xff\x7f", 8, "byte offset 3: a string of 2147483647 bytes runs past"},
      {"\x80\x04}K\x01u.", 7, "byte offset 5: no MARK"},
      {"\x80\x04]K\x01s.", 7, "byte offset 5: too few values"},
      {"\x80\x04}K\x01K\x02K\x03s.", 11, "byte offset 9: SETITEM into something that is not a dict"},
      {"\x80\x04}}.", 5, "byte offset 4: STOP with 2 values"},
      {"\x80\x04}.junk", 8, "byte offset 3: 4 bytes after STOP"},
      {"\x80\x04\x8a\x09\x01\x02\x03\x04\x05\x06\x07\x08\x09.", 14, "byte offset 2: an integer of 9 bytes"},
      {"\x80\x04]K\x01.", 6, "STOP with 2 values"},
      {"\x80\x04].", 4, "the pickle is not a dict"},
      {"\x80\x04}.", 4, "'segments' and 'device_traces' must be lists"},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    ca_trace_t t;
    ca_import_error_t err;
    cr_assert_eq(import_bytes("x.pickle", cases[i].bytes, cases[i].n, &t, &err), -1, "case %zu accepted", i);
    cr_assert(strstr(err.msg, cases[i].want) != NULL, "case %zu: got '%s', wanted '%s'", i, err.msg, cases[i].want);
    ca_trace_dispose(&t);
  }
}

/* Input tried: a snapshot whose first trace entry has no 'addr'. */
Test(import, a_snapshot_entry_without_its_address_is_named) {
  static const char *py = "python3 -c \"import pickle,sys; sys.stdout.buffer.write(pickle.dumps({'segments': [], "
                          "'device_traces': [[{'action': 'alloc', 'size': 4, 'stream': 0}]]}, protocol=4))\"";
  FILE *p = popen(py, "r");
  cr_assert_not_null(p);
  uint8_t buf[512];
  size_t n = fread(buf, 1, sizeof buf, p);
  cr_assert_eq(pclose(p), 0, "python3 is needed by this test (tests/deps.sh)");
  ca_trace_t t;
  ca_import_error_t err;
  cr_assert_eq(import_bytes("x.pickle", buf, n, &t, &err), -1);
  cr_assert(strstr(err.msg, "device_traces[0][0]: 'addr' is missing") != NULL, "got '%s'", err.msg);
  ca_trace_dispose(&t);
}

// ----------------------------------------------------------------------------
// RMM CSV logs
// ----------------------------------------------------------------------------

Test(import, rmm_csv_log) {
  ca_trace_t t;
  import_ok(SMALL_CSV, &t);
  cr_assert_str_eq(t.format, "rmm-csv");
  cr_assert_eq(t.n, 7, "3 allocations (one failed), 2 frees as requested and completed");
  cr_assert_eq(t.ev[0].kind, CA_EV_ALLOC);
  cr_assert_eq(t.ev[0].addr, 0x7f8a40000000);
  cr_assert_eq(t.ev[0].stream, 0x7f8a38001020);
  cr_assert_eq(t.ev[0].time_ns, 0, "times start at the first event");
  cr_assert_eq(t.ev[1].time_ns, 111111000);
  cr_assert_eq(t.ev[2].kind, CA_EV_FREE_ASYNC);
  cr_assert_eq(t.ev[3].kind, CA_EV_FREE_COMPLETED);
  cr_assert_eq(t.ev[4].kind, CA_EV_FREE_ASYNC, "deallocate, newer RMM's name for free");
  cr_assert_eq(t.ev[6].kind, CA_EV_OOM);
  cr_assert_eq(t.ev[6].size, 99999999999ull);
  ca_trace_dispose(&t);
}

/* Inputs tried: the small log with one line broken in each way; the error
 * names that line. */
Test(import, rmm_csv_rejects_a_malformed_line_with_its_number) {
  static const struct {
    const char *line3, *want;
  } cases[] = {
      {"1,2.5,allocate,0x10,64", "line 3: expected 6 comma-separated fields"},
      {"1,2.5,allocate,0x10,64,0,extra", "line 3: expected 6 comma-separated fields"},
      {"1,2.5,allocate,0xZZ,64,0", "line 3: the pointer is not an integer: '0xZZ'"},
      {"1,2.5,allocate,0x10,-64,0", "line 3: the size is not an integer: '-64'"},
      {"1,yesterday,allocate,0x10,64,0", "line 3: the time is neither"},
      {"1,2.5,borrow,0x10,64,0", "line 3: unknown action"},
      {"x,2.5,allocate,0x10,64,0", "line 3: the thread is not an integer"},
      {"1,2.5,allocate,0x10,99999999999999999999999,0", "line 3: the size is not an integer"},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    char csv[512];
    snprintf(csv, sizeof csv, "Thread,Time,Action,Pointer,Size,Stream\r\n1,1.0,allocate,0x0,8,0\r\n%s\r\n1,3.0,free,0x0,8,0\n",
             cases[i].line3);
    ca_trace_t t;
    ca_import_error_t err;
    cr_assert_eq(import_bytes("log.csv", csv, strlen(csv), &t, &err), -1, "case %zu accepted", i);
    cr_assert(strstr(err.msg, cases[i].want) != NULL, "case %zu: got '%s'", i, err.msg);
    ca_trace_dispose(&t);
  }
}

Test(import, rmm_csv_needs_its_header) {
  static const char csv[] = "Thread,Time,Action,Pointer\n1,1.0,allocate,0x0\n";
  ca_trace_t t;
  ca_import_error_t err;
  cr_assert_eq(import_bytes("log.csv", csv, sizeof csv - 1, &t, &err), -1);
  cr_assert(strstr(err.msg, "rmm csv: line 1: expected the header") != NULL, "got '%s'", err.msg);
  ca_trace_dispose(&t);
}

// ----------------------------------------------------------------------------
// The table of importers
// ----------------------------------------------------------------------------

Test(import, readers_are_picked_by_magic_then_extension) {
  static const uint8_t pickle[] = {0x80, 0x04, '}', '.'}, trc[] = "CUDALLOCTRC\0\1";
  cr_assert_str_eq(ca_importer_find("a.bin", pickle, sizeof pickle)->name, "pytorch-snapshot");
  cr_assert_str_eq(ca_importer_find("a.pickle", (const uint8_t *)"x", 1)->name, "pytorch-snapshot");
  cr_assert_str_eq(ca_importer_find("dir.csv/a", (const uint8_t *)"Thread,Time,Action,Pointer,Size,Stream", 38)->name,
                   "rmm-csv");
  cr_assert_str_eq(ca_importer_find("log", trc, sizeof trc)->name, "cudalloc-trace");
  cr_assert_null(ca_importer_find("dir.csv/a", (const uint8_t *)"x", 1), "an extension of a folder is not the file's");
}

Test(import, an_unknown_format_is_refused_by_name) {
  ca_trace_t t;
  ca_import_error_t err;
  cr_assert_eq(import_bytes("notes.txt", "hello", 5, &t, &err), -1);
  cr_assert(strstr(err.msg, "notes.txt: not a format cudalloc reads") != NULL, "got '%s'", err.msg);
  cr_assert_eq(ca_import_file("/nonexistent/x.pickle", &t, &err), -1);
  cr_assert(strstr(err.msg, "No such file") != NULL, "got '%s'", err.msg);
  ca_trace_dispose(&t);
}
