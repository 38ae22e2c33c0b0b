/* The simulated device's instruments: a counter of every call by op, fault
 * injection (the k-th call of an op, or calls drawn with a probability from
 * a seeded generator) and a busy-wait latency per op.
 *
 * All of it is lock-free (atomics), so that counting never serializes the
 * callers more than the simulated device itself does, and a test may change
 * a setting while other threads call the device. */
#define _GNU_SOURCE
#include "sim_internal.h"

#include <string.h>
#include <time.h>

/* What an injected fault returns: the driver's error for that call when the
 * device is short of memory or a launch failed. */
static const CUresult injected_error[CA_OP_COUNT] = {
    [CA_OP_init] = CUDA_ERROR_NOT_INITIALIZED,
    [CA_OP_device_count] = CUDA_ERROR_NO_DEVICE,
    [CA_OP_get_device] = CUDA_ERROR_INVALID_CONTEXT,
    [CA_OP_set_device] = CUDA_ERROR_INVALID_DEVICE,
    [CA_OP_device_props] = CUDA_ERROR_INVALID_DEVICE,
    [CA_OP_mem_info] = CUDA_ERROR_UNKNOWN,
    [CA_OP_reserve] = CUDA_ERROR_OUT_OF_MEMORY,
    [CA_OP_va_free] = CUDA_ERROR_UNKNOWN,
    [CA_OP_create] = CUDA_ERROR_OUT_OF_MEMORY,
    [CA_OP_release] = CUDA_ERROR_UNKNOWN,
    [CA_OP_map] = CUDA_ERROR_OUT_OF_MEMORY,
    [CA_OP_unmap] = CUDA_ERROR_UNKNOWN,
    [CA_OP_set_access] = CUDA_ERROR_OUT_OF_MEMORY,
    [CA_OP_event_create] = CUDA_ERROR_OUT_OF_MEMORY,
    [CA_OP_event_record] = CUDA_ERROR_LAUNCH_FAILED,
    [CA_OP_event_query] = CUDA_ERROR_LAUNCH_FAILED,
    [CA_OP_event_sync] = CUDA_ERROR_LAUNCH_FAILED,
    [CA_OP_event_destroy] = CUDA_ERROR_INVALID_HANDLE,
    [CA_OP_stream_sync] = CUDA_ERROR_LAUNCH_FAILED,
    [CA_OP_stream_query] = CUDA_ERROR_LAUNCH_FAILED,
    [CA_OP_device_sync] = CUDA_ERROR_LAUNCH_FAILED,
    [CA_OP_is_capturing] = CUDA_ERROR_INVALID_HANDLE,
    /* a transient answer, not "no such stream": the stream must not be forgotten */
    [CA_OP_stream_device] = CUDA_ERROR_INVALID_CONTEXT,
    [CA_OP_host_alloc] = CUDA_ERROR_OUT_OF_MEMORY,
    [CA_OP_host_free] = CUDA_ERROR_UNKNOWN,
};

CUresult ca_sim_injected_error(ca_backend_op_t op) {
  return (unsigned)op < CA_OP_COUNT ? injected_error[op] : CUDA_ERROR_UNKNOWN;
}

#define SIM_FAIL_SLOTS CA_BACKEND_MAX_FAULTS

static uint64_t calls[CA_OP_COUNT];
static uint64_t errors[CA_OP_COUNT];
static uint64_t violations;
/* Call numbers (1-based, counted by calls[]) that must fail; 0: unused. */
static uint64_t fail_at[CA_OP_COUNT][SIM_FAIL_SLOTS];
/* Probability of failure (a double's bits) and the generator of each op. */
static uint64_t rate_bits[CA_OP_COUNT];
static uint64_t rng_state[CA_OP_COUNT];
static unsigned latency_us[CA_OP_COUNT];

#define LOAD(p) __atomic_load_n((p), __ATOMIC_RELAXED)
#define STORE(p, v) __atomic_store_n((p), (v), __ATOMIC_RELAXED)

static bool valid_op(ca_backend_op_t op) { return (unsigned)op < CA_OP_COUNT; }

// ----------------------------------------------------------------------------
// Random draws: splitmix64 over an atomic counter, so each op's sequence of
// draws is fixed by its seed whatever the other ops do.
// ----------------------------------------------------------------------------

static uint64_t splitmix64_next(uint64_t *state) {
  uint64_t z = __atomic_add_fetch(state, 0x9e3779b97f4a7c15ull, __ATOMIC_RELAXED);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

static double bits_to_double(uint64_t bits) {
  double d;
  memcpy(&d, &bits, sizeof d);
  return d;
}

static uint64_t double_to_bits(double d) {
  uint64_t bits;
  memcpy(&bits, &d, sizeof bits);
  return bits;
}

/* Each op draws from its own stream, derived from the seed and the op. */
static uint64_t op_seed(ca_backend_op_t op, uint64_t seed) {
  return seed ^ ((uint64_t)(op + 1) * 0xd1342543de82ef95ull);
}

static void set_rate(ca_backend_op_t op, double p, uint64_t seed) {
  STORE(&rng_state[op], op_seed(op, seed));
  STORE(&rate_bits[op], double_to_bits(p));
}

// ----------------------------------------------------------------------------
// The path of every call
// ----------------------------------------------------------------------------

static void busy_wait_us(unsigned us) {
  struct timespec t0, t;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  uint64_t ns = (uint64_t)us * 1000;
  do {
    clock_gettime(CLOCK_MONOTONIC, &t);
  } while ((uint64_t)(t.tv_sec - t0.tv_sec) * 1000000000ull + (uint64_t)t.tv_nsec -
               (uint64_t)t0.tv_nsec < ns);
}

/* true when call number n of op is one that must fail. */
static bool chosen_to_fail(ca_backend_op_t op, uint64_t n) {
  for (int i = 0; i < SIM_FAIL_SLOTS; i++) {
    uint64_t at = LOAD(&fail_at[op][i]);
    if (at == n && __atomic_compare_exchange_n(&fail_at[op][i], &at, 0, false,
                                               __ATOMIC_RELAXED, __ATOMIC_RELAXED))
      return true;
  }
  double p = bits_to_double(LOAD(&rate_bits[op]));
  if (p <= 0) return false;
  double u = (double)(splitmix64_next(&rng_state[op]) >> 11) * 0x1.0p-53;
  return u < p;
}

CUresult ca_sim_enter(ca_backend_op_t op) {
  uint64_t n = __atomic_add_fetch(&calls[op], 1, __ATOMIC_RELAXED);
  unsigned us = LOAD(&latency_us[op]);
  if (us) busy_wait_us(us);
  return chosen_to_fail(op, n) ? injected_error[op] : CUDA_SUCCESS;
}

CUresult ca_sim_leave(ca_backend_op_t op, CUresult rc) {
  /* "not ready" is an answer, not an error */
  if (rc != CUDA_SUCCESS && rc != CUDA_ERROR_NOT_READY)
    __atomic_add_fetch(&errors[op], 1, __ATOMIC_RELAXED);
  return rc;
}

void ca_sim_count_violation(void) { __atomic_add_fetch(&violations, 1, __ATOMIC_RELAXED); }

// ----------------------------------------------------------------------------
// Settings
// ----------------------------------------------------------------------------

/* Arms one more failing call of op, k calls from now. */
static void add_target(ca_backend_op_t op, uint64_t k) {
  uint64_t at = LOAD(&calls[op]) + k;
  for (int i = 0; i < SIM_FAIL_SLOTS; i++) {
    uint64_t zero = 0;
    if (__atomic_compare_exchange_n(&fail_at[op][i], &zero, at, false, __ATOMIC_RELAXED,
                                    __ATOMIC_RELAXED))
      return;
  }
}

void ca_sim_faults_arm(const ca_backend_options_t *o) {
  for (unsigned i = 0; i < o->fail_count && i < CA_BACKEND_MAX_FAULTS; i++)
    if (valid_op(o->fail[i].op) && o->fail[i].nth) add_target(o->fail[i].op, o->fail[i].nth);
  if (o->fail_rate > 0) ca_sim_fail_rate(CA_OP_COUNT, o->fail_rate, o->seed);
  for (int op = 0; op < CA_OP_COUNT; op++)
    if (o->latency_us[op]) STORE(&latency_us[op], o->latency_us[op]);
}

void ca_sim_faults_reset(void) {
  for (int op = 0; op < CA_OP_COUNT; op++) {
    STORE(&calls[op], 0);
    STORE(&errors[op], 0);
    STORE(&rate_bits[op], 0);
    STORE(&rng_state[op], 0);
    STORE(&latency_us[op], 0);
    for (int i = 0; i < SIM_FAIL_SLOTS; i++) STORE(&fail_at[op][i], 0);
  }
  STORE(&violations, 0);
}

uint64_t ca_sim_calls(ca_backend_op_t op) { return valid_op(op) ? LOAD(&calls[op]) : 0; }

uint64_t ca_sim_errors(ca_backend_op_t op) { return valid_op(op) ? LOAD(&errors[op]) : 0; }

uint64_t ca_sim_violations(void) { return LOAD(&violations); }

void ca_sim_fail_nth(ca_backend_op_t op, uint64_t k) {
  if (!valid_op(op)) return;
  for (int i = 0; i < SIM_FAIL_SLOTS; i++) STORE(&fail_at[op][i], 0);
  if (k) add_target(op, k);
}

/* With op = CA_OP_COUNT every op but init fails at random: a rate must not
 * keep the device from starting. */
void ca_sim_fail_rate(ca_backend_op_t op, double p, uint64_t seed) {
  if (!(p >= 0)) p = 0;
  if (p > 1) p = 1;
  if (valid_op(op)) {
    set_rate(op, p, seed);
    return;
  }
  if (op != CA_OP_COUNT) return;
  for (int o = 0; o < CA_OP_COUNT; o++)
    if (o != CA_OP_init) set_rate((ca_backend_op_t)o, p, seed);
}

void ca_sim_set_latency(ca_backend_op_t op, unsigned us) {
  if (valid_op(op)) STORE(&latency_us[op], us);
}
