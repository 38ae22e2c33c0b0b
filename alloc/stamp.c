/* The thread id of the leak report's stamps (stamp.h). */
#define _GNU_SOURCE /* gettid */
#include "stamp.h"

#include <pthread.h>
#include <unistd.h>

__thread uint32_t ca_stamp_tid;   /* gettid is a system call: once per thread */

static void forget_tid(void) { ca_stamp_tid = 0; }   /* a fork child's thread is another thread */

static void arm_fork(void) { pthread_atfork(NULL, NULL, forget_tid); }

uint32_t ca_stamp_tid_slow(void) {
  static pthread_once_t once = PTHREAD_ONCE_INIT;
  pthread_once(&once, arm_fork);
  return ca_stamp_tid = (uint32_t)gettid();
}
