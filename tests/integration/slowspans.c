/* slowspans: a traced program that makes many fast spans and a known set of
 * slow ones, for the search tests (tests/integration/test_search.sh).
 *
 *   slowspans --fast N --slow M --slow-ms D [--other-ms E] [--task-ms F]
 *
 * Over the run it makes N "checkout.cart" regions (no wait inside), M
 * "checkout.pay" regions that each sleep D ms inside (the slow ones the
 * search must find), M "other.pay" regions of E ms (default D: same length,
 * other name: prefix filters must leave them out), and one task "job" begun
 * on the main thread and ended on a second thread after F ms (default 0:
 * none). The slow regions are spread over the run so they land in several
 * generations (GENTRACE_PERIOD_MS). Prints what it made as key=value pairs;
 * exit 1 if gt_start failed.
 */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "gentrace.h"

static void sleep_ms(unsigned ms) {
  struct timespec d = {ms / 1000, (long)(ms % 1000) * 1000000L};
  while (nanosleep(&d, &d) != 0)
    ;
}

static uint64_t task_id;
static unsigned task_ms;

static void *task_ender(void *arg) {
  (void)arg;
  sleep_ms(task_ms);
  gt_task_end(task_id);
  return NULL;
}

int main(int argc, char **argv) {
  unsigned long fast = 1000, slow = 5, slow_ms = 30, other_ms = 0;
  for (int i = 1; i + 1 < argc; i += 2) {
    unsigned long v = strtoul(argv[i + 1], NULL, 10);
    if (strcmp(argv[i], "--fast") == 0)
      fast = v;
    else if (strcmp(argv[i], "--slow") == 0)
      slow = v;
    else if (strcmp(argv[i], "--slow-ms") == 0)
      slow_ms = v;
    else if (strcmp(argv[i], "--other-ms") == 0)
      other_ms = v;
    else if (strcmp(argv[i], "--task-ms") == 0)
      task_ms = (unsigned)v;
  }
  if (!other_ms)
    other_ms = slow_ms;
  if (gt_start(NULL) != 0)
    return 1;
  pthread_t th;
  if (task_ms) {
    task_id = gt_task_begin("job", 0);
    pthread_create(&th, NULL, task_ender, NULL);
  }
  unsigned long per = slow ? fast / (slow + 1) : fast;
  unsigned long made_fast = 0;
  for (unsigned long s = 0; s <= slow; s++) {
    for (unsigned long f = 0; f < per && made_fast < fast; f++, made_fast++) {
      gt_region_begin("checkout.cart");
      gt_region_end();
    }
    if (s == slow)
      break;
    gt_region_begin("checkout.pay");
    sleep_ms((unsigned)slow_ms);
    gt_region_end();
    gt_region_begin("other.pay");
    sleep_ms((unsigned)other_ms);
    gt_region_end();
    sleep_ms(150); /* spread over generations */
  }
  for (; made_fast < fast; made_fast++) {
    gt_region_begin("checkout.cart");
    gt_region_end();
  }
  if (task_ms)
    pthread_join(th, NULL);
  printf("fast=%lu slow=%lu slow_ms=%lu other_ms=%lu\n", made_fast, slow,
         slow_ms, other_ms);
  fflush(stdout);
  gt_stop();
  return 0;
}
