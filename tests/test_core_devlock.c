/* The device lock (alloc/devlock.h), alone: it excludes under contention,
 * and a release wakes the threads asleep on it. Each guard has a twin with
 * the test-only switch that breaks it: devlock_no_exclusion (a take always
 * gets in: updates are lost), devlock_no_wake (a release never wakes a
 * sleeper: the waiters are still asleep when the bound runs out, and the
 * twin wakes them itself, so that nothing hangs). And a fork child gets a
 * free device lock while another thread of the parent holds its own.
 *
 * CA_DEVLOCK_BARE: no ThreadSanitizer mutex annotations in this file, so
 * that under make test-tsan TSan checks the lock's own atomics (the plain
 * counter below is a data race unless the take acquires what the last
 * release released). */
#define CA_DEVLOCK_BARE
#include <pthread.h>
#include <sched.h>
#include <stdbool.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "core_testing.h"

TestSuite(core_devlock);

static long now_ms(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec * 1000 + t.tv_nsec / 1000000;
}

static void sleep_ms(long ms) {
  struct timespec t = {.tv_sec = ms / 1000, .tv_nsec = (ms % 1000) * 1000000};
  nanosleep(&t, NULL);
}

Test(core_devlock, a_free_lock_is_taken_and_released_without_waiting) {
  ca_devlock_t l = CA_DEVLOCK_INIT;
  ca_devlock_take(&l);
  cr_assert_eq(l.state, 1, "held, nobody waiting");
  ca_devlock_release(&l);
  cr_assert_eq(l.state, 0, "free again");
  ca_devlock_destroy(&l);
}

// ----------------------------------------------------------------------------
// Exclusion: threads bumping counters under the lock lose no update
// ----------------------------------------------------------------------------

#define THREADS 4
#define TAKES 20000

typedef struct {
  ca_devlock_t lock;
  long inside;      /* bumped by a load and a store: an update is lost when two are inside */
  long plain;       /* the same without atomics, where TSan must see every take ordered */
  bool with_plain;
} counters_t;

static void *bump(void *arg) {
  counters_t *c = arg;
  for (int i = 0; i < TAKES; i++) {
    ca_devlock_take(&c->lock);
    long v = __atomic_load_n(&c->inside, __ATOMIC_RELAXED);
    /* now and then the holder lets another thread run while inside, so
     * that the others find the lock held (and sleep on it) even on a
     * machine that gives the threads no second core */
    if (i % 64 == 0) sched_yield();
    __atomic_store_n(&c->inside, v + 1, __ATOMIC_RELAXED);
    if (c->with_plain) c->plain++;
    ca_devlock_release(&c->lock);
  }
  return NULL;
}

/* THREADS threads take the lock TAKES times each; returns the updates
 * lost. */
static long lost_updates(bool no_exclusion) {
  ca_debug.devlock_no_exclusion = no_exclusion;
  counters_t c = {.lock = CA_DEVLOCK_INIT, .with_plain = !no_exclusion};   /* broken, TSan would report the plain one */
  pthread_t t[THREADS];
  for (int i = 0; i < THREADS; i++) cr_assert_eq(pthread_create(&t[i], NULL, bump, &c), 0);
  for (int i = 0; i < THREADS; i++) pthread_join(t[i], NULL);
  ca_debug.devlock_no_exclusion = false;
  if (c.with_plain) cr_assert_eq(c.plain, c.inside, "the plain counter agrees with the atomic one");
  cr_assert_eq(c.lock.state, 0, "free at the end");
  return (long)THREADS * TAKES - c.inside;
}

Test(core_devlock, threads_that_contend_lose_no_update) {
  cr_assert_eq(lost_updates(false), 0, "%d threads x %d takes", THREADS, TAKES);
}

Test(core_devlock, a_take_that_does_not_exclude_loses_updates) {
  long lost = 0;
  for (int round = 0; round < 5 && !lost; round++) lost = lost_updates(true);
  cr_assert_gt(lost, 0, "the broken lock let two threads in at once: the test above catches it");
}

// ----------------------------------------------------------------------------
// Waking: threads asleep on a lock held long all get it once it is let go
// ----------------------------------------------------------------------------

#define WAITERS 3
#define WAIT_BOUND_MS 10000

typedef struct {
  ca_devlock_t lock;
  int started, done;
} waited_t;

static void *wait_for_it(void *arg) {
  waited_t *w = arg;
  __atomic_add_fetch(&w->started, 1, __ATOMIC_RELEASE);
  ca_devlock_take(&w->lock);
  __atomic_add_fetch(&w->done, 1, __ATOMIC_RELEASE);
  ca_devlock_release(&w->lock);
  return NULL;
}

static int done(waited_t *w) { return __atomic_load_n(&w->done, __ATOMIC_ACQUIRE); }

/* Waits up to bound_ms for every waiter to have got the lock; returns
 * how many did. */
static int done_within(waited_t *w, long bound_ms) {
  long until = now_ms() + bound_ms;
  while (done(w) < WAITERS && now_ms() < until) sleep_ms(1);
  return done(w);
}

/* Main holds the lock while WAITERS threads take it: they spin, then
 * sleep (the state says 2 once one has gone to sleep or is about to);
 * main lets them sleep a while and lets go. Returns how many got the lock
 * within bound_ms of the release. */
static int woken_within(waited_t *w, pthread_t *t, long bound_ms) {
  ca_devlock_take(&w->lock);
  for (int i = 0; i < WAITERS; i++) cr_assert_eq(pthread_create(&t[i], NULL, wait_for_it, w), 0);
  long until = now_ms() + WAIT_BOUND_MS;
  while ((__atomic_load_n(&w->started, __ATOMIC_ACQUIRE) < WAITERS ||
          __atomic_load_n(&w->lock.state, __ATOMIC_RELAXED) != 2) && now_ms() < until)
    sleep_ms(1);
  cr_assert_eq(__atomic_load_n(&w->lock.state, __ATOMIC_RELAXED), 2, "a waiter went to sleep on the lock");
  sleep_ms(50);   /* long past the spin: every waiter is asleep in the kernel */
  cr_assert_eq(done(w), 0, "nobody got in while main held it");
  ca_devlock_release(&w->lock);
  return done_within(w, bound_ms);
}

Test(core_devlock, threads_asleep_on_a_held_lock_all_get_it) {
  waited_t w = {.lock = CA_DEVLOCK_INIT};
  pthread_t t[WAITERS];
  cr_assert_eq(woken_within(&w, t, WAIT_BOUND_MS), WAITERS, "every waiter within %d ms", WAIT_BOUND_MS);
  for (int i = 0; i < WAITERS; i++) pthread_join(t[i], NULL);
  cr_assert_eq(w.lock.state, 0);
}

Test(core_devlock, a_release_that_does_not_wake_leaves_the_waiters_asleep) {
  waited_t w = {.lock = CA_DEVLOCK_INIT};
  pthread_t t[WAITERS];
  ca_debug.devlock_no_wake = true;
  int got = woken_within(&w, t, 500);
  ca_debug.devlock_no_wake = false;
  cr_assert_lt(got, WAITERS, "the broken release stranded the waiters: the test above catches it");
  /* Not left hanging: one wake hands the lock on, and each release (no
   * longer broken) wakes the next sleeper. A take and a release first, so
   * that whoever takes the lock next sees the switch off (TSan would call
   * its read a race otherwise: a futex wake is no order it knows). */
  ca_devlock_take(&w.lock);
  ca_devlock_release(&w.lock);
  long until = now_ms() + WAIT_BOUND_MS;
  while (done(&w) < WAITERS && now_ms() < until) {
    ca_devlock_wake(&w.lock);
    sleep_ms(10);
  }
  cr_assert_eq(done(&w), WAITERS, "woken by hand within %d ms", WAIT_BOUND_MS);
  for (int i = 0; i < WAITERS; i++) pthread_join(t[i], NULL);
}

// ----------------------------------------------------------------------------
// Fork: a child gets devices whose locks are free, whoever held the parent's
// ----------------------------------------------------------------------------

typedef struct {
  ca_device_t *d;
  int held, let_go;
} holder_t;

static void *hold_device(void *arg) {
  holder_t *h = arg;
  ca_devlock_take(&h->d->lock);
  __atomic_store_n(&h->held, 1, __ATOMIC_RELEASE);
  while (!__atomic_load_n(&h->let_go, __ATOMIC_ACQUIRE)) sleep_ms(1);
  ca_devlock_release(&h->d->lock);
  return NULL;
}

/* Forks while another thread holds device 0's lock; the child runs the
 * core's fork handler (as the shim's pthread_atfork does) when
 * run_handler, then allocates and frees on the device, under an alarm of
 * alarm_s seconds from its allocation's start that ends it if it hangs
 * (5 s for what comes before). Returns the child's status; *reached: the
 * child got as far as its allocation (it says so through a pipe), so that
 * an alarm means a hang there, not a slow start. */
static int child_status_with_the_lock_held(bool run_handler, unsigned alarm_s, bool *reached) {
  SKIP_ON_CUDA("a CUDA context does not survive fork()");
  core_start(NULL);
  ca_device_t *d;
  cr_assert_eq(ca_device_get(0, &d), CUDA_SUCCESS);
  holder_t h = {.d = d};
  pthread_t t;
  cr_assert_eq(pthread_create(&t, NULL, hold_device, &h), 0);
  while (!__atomic_load_n(&h.held, __ATOMIC_ACQUIRE)) sleep_ms(1);
  int fds[2];
  cr_assert_eq(pipe(fds), 0);
  pid_t pid = fork();
  cr_assert_geq(pid, 0);
  if (pid == 0) {
    close(fds[0]);
    alarm(5);
    if (run_handler) {
      ca_fork_child();
      if (cudalloc_init("backend:sim") != cudaSuccess) _exit(3);
    }
    if (write(fds[1], "a", 1) != 1) _exit(5);
    alarm(alarm_s);
    void *p;
    if (cudalloc_malloc(&p, 1 << 20, 0) != cudaSuccess || cudalloc_free(p, 0) != cudaSuccess) _exit(4);
    _exit(0);
  }
  close(fds[1]);
  char c;
  *reached = read(fds[0], &c, 1) == 1;
  close(fds[0]);
  int status;
  cr_assert_eq(waitpid(pid, &status, 0), pid);
  __atomic_store_n(&h.let_go, 1, __ATOMIC_RELEASE);
  pthread_join(t, NULL);
  core_fini();
  return status;
}

Test(core_devlock, a_fork_child_allocates_while_the_parent_held_the_lock) {
  bool reached;
  int status = child_status_with_the_lock_held(true, 5, &reached);
  cr_assert(reached, "the child got to its allocation");
  cr_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0, "the child allocated and freed (status %d)", status);
}

/* The bound above works: a child that keeps the parent's device (no fork
 * handler) waits on the lock the parent's other thread held, and the alarm
 * ends it: a shorter one, started when the child has got to its allocation
 * (which takes the lock at once), since only its hang is waited for. */
Test(core_devlock, a_child_that_keeps_the_parents_device_hangs_on_its_lock) {
  bool reached;
  int status = child_status_with_the_lock_held(false, 1, &reached);
  cr_assert(reached, "the child got to its allocation");
  cr_assert(WIFSIGNALED(status) && WTERMSIG(status) == SIGALRM, "the child hung until its alarm (status %d)", status);
}
