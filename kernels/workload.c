/* The multimodal training workload: N steps on batches whose composition
 * changes every step, one line of figures per step, and the creep verdict.
 *
 * One program, three builds (kernels/kernels.mk): build/workload (the C
 * references on device memory from the CUDA runtime; run it under cudalloc's
 * simulated device), build/workload-cuda (the CUDA kernels, -DWORKLOAD_CUDA)
 * and build/workload-host (the C references on host malloc, no CUDA).
 *
 *   LD_PRELOAD=build/libcudalloc.so CUDALLOC_CONF=backend:sim build/workload --steps 50
 */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "data.h"
#include "devmem.h"
#include "memstats.h"
#include "model.h"
#include "svg.h"
#include "verdict.h"

#ifdef WORKLOAD_CUDA
#define WORKLOAD_OPS ops_cuda
#else
#define WORKLOAD_OPS ops_ref
#endif

#define MIB (1024.0 * 1024.0)
/* Reserved memory moves in pages: 2 MiB on CUDA GPUs and on the simulated
 * device by default. The verdict does not judge movements below one page. */
#define GRANULE_BYTES (2.0 * MIB)

typedef struct options_s {
  int steps, warmup, leak_every, side_stream;
  uint64_t seed;
  float lr, weight_decay;
  const char *svg;
  model_config_t model;
  data_config_t data;
} options_t;

/* Per-step figures, kept for the verdict and the picture. */
typedef struct series_s {
  double *loss, *allocated, *reserved, *peak;
} series_t;

static void usage(FILE *out) {
  fputs("usage: workload [options]\n"
        "  --steps N          training steps (50)\n"
        "  --warmup N         steps before the memory plateau is judged (10)\n"
        "  --seed N           seed of the weights and of every batch (1)\n"
        "  --leak-every N     leak one activation every N steps, on purpose (0: never)\n"
        "  --side-stream N    1: copy the batches on a non-blocking stream of their own (0)\n"
        "  --svg PATH         memory picture (workload-memory.svg)\n"
        "  --lr X             AdamW learning rate (3e-3)\n"
        "  --weight-decay X   AdamW weight decay (0.01)\n"
        "  --layers N --channels N --heads N --vocab N    model (4, 96, 6, 256)\n"
        "  --max-batch N      samples per step, drawn in 1..N (8)\n"
        "  --grid N --patch N image: N x N patches of P x P x 3 pixels per frame (4, 4)\n"
        "  --max-frames N     image frames per sample, drawn in 1..N (4)\n"
        "  --min-audio N --max-audio N   spectrogram frames per sample (8, 48)\n"
        "  --mel-bins N       values per spectrogram frame (32)\n"
        "  --min-text N --max-text N     text tokens per sample (8, 32)\n"
        "  --classes N        image and audio classes of the synthetic data (8)\n"
        "Step 0 takes the largest of every size; later steps draw them from the seed.\n",
        out);
}

static void defaults(options_t *o) {
  memset(o, 0, sizeof *o);
  o->steps = 50;
  o->warmup = 10;
  o->seed = 1;
  o->lr = 3e-3f;
  o->weight_decay = 0.01f;
  o->svg = "workload-memory.svg";
  o->model = (model_config_t){.layers = 4, .channels = 96, .heads = 6, .vocab = 256};
  o->data = (data_config_t){.max_batch = 8, .grid = 4, .patch = 4, .max_frames = 4,
                            .min_audio = 8, .max_audio = 48, .mel_bins = 32,
                            .min_text = 8, .max_text = 32, .classes = 8};
}

static int parse_int(const char *name, const char *s, int lo, int *out) {
  char *end;
  long v = strtol(s, &end, 10);
  if (*s == '\0' || *end != '\0' || v < lo || v > 1000000) {
    fprintf(stderr, "workload: --%s wants an integer >= %d, not '%s'\n", name, lo, s);
    return -1;
  }
  *out = (int)v;
  return 0;
}

static int parse_float(const char *name, const char *s, float *out) {
  char *end;
  float v = strtof(s, &end);
  if (*s == '\0' || *end != '\0' || !(v >= 0.0f)) {
    fprintf(stderr, "workload: --%s wants a number >= 0, not '%s'\n", name, s);
    return -1;
  }
  *out = v;
  return 0;
}

/* Long options that take an integer, and where each goes. */
static int *int_option(options_t *o, const char *name, int *lo) {
  struct { const char *name; int *field; int lo; } t[] = {
      {"steps", &o->steps, 1}, {"warmup", &o->warmup, 0}, {"leak-every", &o->leak_every, 0},
      {"side-stream", &o->side_stream, 0},
      {"layers", &o->model.layers, 1}, {"channels", &o->model.channels, 1},
      {"heads", &o->model.heads, 1}, {"vocab", &o->model.vocab, 1},
      {"max-batch", &o->data.max_batch, 1}, {"grid", &o->data.grid, 1},
      {"patch", &o->data.patch, 1}, {"max-frames", &o->data.max_frames, 1},
      {"min-audio", &o->data.min_audio, 1}, {"max-audio", &o->data.max_audio, 1},
      {"mel-bins", &o->data.mel_bins, 1}, {"min-text", &o->data.min_text, 2},
      {"max-text", &o->data.max_text, 2}, {"classes", &o->data.classes, 1}};
  for (size_t i = 0; i < sizeof t / sizeof t[0]; i++)
    if (strcmp(t[i].name, name) == 0) {
      *lo = t[i].lo;
      return t[i].field;
    }
  return NULL;
}

static int apply_option(options_t *o, const char *name, const char *arg) {
  int lo, seed;
  int *field = int_option(o, name, &lo);
  if (field) return parse_int(name, arg, lo, field);
  if (strcmp(name, "seed") == 0) {
    if (parse_int(name, arg, 0, &seed)) return -1;
    o->seed = (uint64_t)seed;
    return 0;
  }
  if (strcmp(name, "lr") == 0) return parse_float(name, arg, &o->lr);
  if (strcmp(name, "weight-decay") == 0) return parse_float(name, arg, &o->weight_decay);
  if (strcmp(name, "svg") == 0) {
    o->svg = arg;
    return 0;
  }
  return -1;
}

static int parse_args(int argc, char **argv, options_t *o) {
  static const char *names[] = {"steps", "warmup", "seed", "leak-every", "side-stream", "svg", "lr",
                                "weight-decay", "layers", "channels", "heads", "vocab",
                                "max-batch", "grid", "patch", "max-frames", "min-audio",
                                "max-audio", "mel-bins", "min-text", "max-text", "classes"};
  enum { N = sizeof names / sizeof names[0] };
  struct option longopts[N + 2];
  for (int i = 0; i < N; i++) longopts[i] = (struct option){names[i], required_argument, NULL, i};
  longopts[N] = (struct option){"help", no_argument, NULL, 'h'};
  longopts[N + 1] = (struct option){NULL, 0, NULL, 0};
  int c;
  while ((c = getopt_long(argc, argv, "h", longopts, NULL)) != -1) {
    if (c == 'h') {
      usage(stdout);
      exit(0);
    }
    if (c < 0 || c >= N || apply_option(o, names[c], optarg)) return -1;
  }
  if (optind < argc) return -1;
  o->data.vocab = o->model.vocab;
  o->model.patch_dim = data_patch_dim(&o->data);
  o->model.mel_bins = o->data.mel_bins;
  const char *why = model_config_check(&o->model);
  if (!why) why = data_config_check(&o->data);
  if (why) fprintf(stderr, "workload: %s\n", why);
  return why ? -1 : 0;
}

static double now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

/* One training step; returns its loss and fills its memory figures. */
static double train_step(model_t *m, const options_t *o, int step, memstats_t *ms,
                         double *ms_taken, batch_shape_t *shape) {
  batch_t b;
  data_make(&o->data, o->seed, step, &b);
  *shape = b.shape;
  if (o->leak_every > 0 && (step + 1) % o->leak_every == 0) model_leak_next_backward(m);
  memstats_reset_peak();
  double t0 = now_ms();
  float loss = model_forward(m, &b);
  model_backward(m);
  model_update(m, o->lr, o->weight_decay);
  dev_sync();
  *ms_taken = now_ms() - t0;
  data_free(&b);
  memstats_read(ms);
  memstats_step();
  return loss;
}

static void print_header(const options_t *o, const model_t *m) {
  const model_config_t *c = &o->model;
  printf("workload: %d layers, %d channels, %d heads, vocabulary %d, %zu parameters\n",
         c->layers, c->channels, c->heads, c->vocab, model_num_params(m));
  printf("workload: ops: %s; device memory: %s; figures: %s\n", WORKLOAD_OPS.name,
         dev_impl_name(), memstats_init());
  printf("%4s %3s %4s %4s %4s %5s %8s %10s %9s %13s %8s\n", "step", "B", "frm", "aud", "txt",
         "T", "loss", "alloc_MiB", "peak_MiB", "reserved_MiB", "ms");
}

static void run_steps(model_t *m, const options_t *o, series_t *s, double *peak_reserved,
                      double *total_ms) {
  for (int step = 0; step < o->steps; step++) {
    memstats_t ms;
    batch_shape_t sh;
    double ms_taken;
    s->loss[step] = train_step(m, o, step, &ms, &ms_taken, &sh);
    s->allocated[step] = ms.allocated;
    s->reserved[step] = ms.reserved;
    s->peak[step] = ms.peak_allocated;
    if (ms.peak_reserved > *peak_reserved) *peak_reserved = ms.peak_reserved;
    *total_ms += ms_taken;
    printf("%4d %3d %4d %4d %4d %5d %8.4f %10.2f %9.2f %13.2f %8.1f\n", step, sh.B, sh.frames,
           sh.Ta, sh.Tt, sh.T, s->loss[step], ms.allocated / MIB, ms.peak_allocated / MIB,
           ms.reserved / MIB, ms_taken);
    fflush(stdout);
  }
}

/* What is still allocated once the program has freed everything. */
static void exit_leak(double *bytes, long *blocks) {
  dev_counters_t c;
  dev_counters(&c);
  *bytes = (double)c.live_bytes;
  *blocks = (long)c.live_blocks;
  if (memstats_from_cudalloc()) {
    memstats_t ms;
    memstats_read(&ms);
    if (ms.allocated > *bytes) *bytes = ms.allocated;
  }
}

static void report(const options_t *o, const series_t *s, const verdict_t *v,
                   double peak_reserved, double total_ms) {
  double peak_alloc = 0.0;
  for (int i = 0; i < o->steps; i++) peak_alloc = s->peak[i] > peak_alloc ? s->peak[i] : peak_alloc;
  printf("summary: peak allocated %.2f MiB, peak reserved %.2f MiB", peak_alloc / MIB,
         peak_reserved / MIB);
  if (memstats_from_cudalloc())
    printf(", reserved/allocated at peak %.3f (cudalloc)\n",
           peak_alloc > 0 ? peak_reserved / peak_alloc : 0.0);
  else
    printf(" (no cudalloc: reserved is the driver's used memory at step ends)\n");
  printf("summary: warm-up plateau %.2f MiB, last step %.2f MiB, reserved slope %+.1f KiB/step "
         "(limit %.1f), end-of-step allocated growth %.2f MiB\n", v->plateau / MIB,
         v->final_reserved / MIB, v->reserved_slope / 1024.0, v->slope_limit / 1024.0,
         v->alloc_growth / MIB);
  printf("summary: loss %.4f -> %.4f; %d steps in %.1f s (%.1f ms/step)\n", v->loss_first,
         v->loss_last, o->steps, total_ms / 1e3, total_ms / o->steps);
}

static void draw(const options_t *o, const series_t *s, const verdict_t *v) {
  char title[200];
  snprintf(title, sizeof title, "workload memory, %d steps: %s%s%s", o->steps,
           v->pass ? "PASS" : "FAIL (", v->pass ? "" : v->failed, v->pass ? "" : ")");
  svg_series_t lines[] = {{"peak allocated in step", "#1f77b4", s->peak, 0},
                          {"allocated at step end", "#2ca02c", s->allocated, 0},
                          {"reserved at step end", "#d62728", s->reserved, 1}};
  if (svg_write(o->svg, title, v->reason, o->steps, o->warmup, lines, 3) == 0)
    printf("svg: %s\n", o->svg);
  else
    printf("svg: could not write %s\n", o->svg);
}

int main(int argc, char **argv) {
  options_t o;
  defaults(&o);
  if (parse_args(argc, argv, &o)) {
    usage(stderr);
    return 2;
  }
#ifndef WORKLOAD_CUDA
  if (!dev_host_addressable()) {
    fprintf(stderr, "workload: this build runs the C references, which need host-addressable "
                    "device memory, and this device's memory is not.\n"
                    "HINT: on a GPU run build/workload-cuda; build/workload is for cudalloc's "
                    "simulated device (LD_PRELOAD=build/libcudalloc.so CUDALLOC_CONF=backend:sim)\n");
    return 1;
  }
#endif
  series_t s;
  double *buf = calloc(4 * (size_t)o.steps, sizeof(double));
  if (!buf) return 2;
  s = (series_t){buf, buf + o.steps, buf + 2 * o.steps, buf + 3 * o.steps};
  model_t *m = model_create(&o.model, &WORKLOAD_OPS, o.seed);
  if (o.side_stream) dev_use_side_stream();   /* the weights went up before: the batches from here */
  print_header(&o, m);
  double peak_reserved = 0.0, total_ms = 0.0;
  run_steps(m, &o, &s, &peak_reserved, &total_ms);
  model_destroy(m);
  verdict_input_t in = {o.steps, o.warmup, s.loss, s.allocated, s.reserved, GRANULE_BYTES, 0, 0};
  exit_leak(&in.exit_bytes, &in.exit_blocks);
  verdict_t v;
  verdict_eval(&in, &v);
  report(&o, &s, &v, peak_reserved, total_ms);
  draw(&o, &s, &v);
  dev_track_reset();
  free(buf);
  if (v.pass)
    printf("verdict: PASS\n");
  else
    printf("verdict: FAIL (%s)\n", v.reason);
  return v.pass ? 0 : 1;
}
