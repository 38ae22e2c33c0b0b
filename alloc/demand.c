/* Reports on demand: the signal handler and the deferred writer. */
#include "demand.h"

#include <errno.h>
#include <string.h>

#include "device.h"
#include "log.h"
#include "rank.h"
#include "report.h"
#include "stats.h"

static int armed;                 /* the signal our handler is installed for; 0: none */
static struct sigaction previous; /* what it replaced */

/* Async-signal-safe: a lock-free atomic or, and the program's own handler if it had one. */
static void on_signal(int sig, siginfo_t *info, void *ctx) {
  ca_stir(CA_STIR_DEMAND);
  if (CA_DEBUG(report_in_handler)) ca_demand_write();   /* the fault its test must catch */
  if (previous.sa_flags & SA_SIGINFO) {
    if (previous.sa_sigaction) previous.sa_sigaction(sig, info, ctx);
  } else if (previous.sa_handler != SIG_DFL && previous.sa_handler != SIG_IGN) {
    previous.sa_handler(sig);
  }
}

void ca_demand_arm(int sig) {
  if (sig == armed) return;
  if (armed) sigaction(armed, &previous, NULL);
  armed = 0;
  if (!sig) return;
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_sigaction = on_signal;
  sa.sa_flags = SA_SIGINFO | SA_RESTART;   /* the program's interrupted calls go on */
  sigemptyset(&sa.sa_mask);
  if (sigaction(sig, &sa, &previous) != 0) {
    ca_log("report_signal: cannot install a handler for signal %d (%s); no reports on demand", sig, strerror(errno));
    return;
  }
  armed = sig;
}

void ca_demand_write(void) {
  /* one thread writes, however many saw the flag */
  if (!(ca_unstir(CA_STIR_DEMAND) & CA_STIR_DEMAND) || !ca_ready()) return;
  if (ca_config.summary == CA_SUMMARY_ALL || ca_rank_is_first()) {
    ca_log_block_t b;
    FILE *f = ca_log_block_begin(&b);
    fprintf(f, "cudalloc: report on demand (signal %d)\n", armed);
    ca_stats_print(f);
    ca_log_block_end(&b);
  }
  ca_report_write_files();
}
