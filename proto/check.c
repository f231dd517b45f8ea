/* check.c: the counter and hook behind GTP_ASSERT (see check.h). */
#include "config.h"

#include "check.h"

#include <stdatomic.h>

/* Written once before threads start (gtp_check_set_hook), read after. */
static gtp_check_hook_fn check_hook;
/* Relaxed: a count for tests and metrics, ordering nothing else. */
static atomic_ulong check_failures;

void gtp_check_failed(const char *file, int line, const char *expr) {
  atomic_fetch_add_explicit(&check_failures, 1, memory_order_relaxed);
  if (check_hook)
    check_hook(file, line, expr);
}

void gtp_check_set_hook(gtp_check_hook_fn hook) {
  check_hook = hook;
}

unsigned long gtp_check_failures(void) {
  return atomic_load_explicit(&check_failures, memory_order_relaxed);
}
