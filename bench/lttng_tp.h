/* lttng_tp.h: the LTTng-UST tracepoint the baselines use (bench/lttng_bench.c):
 * two 64-bit integers, the payload of a gentrace counter (interned name id
 * + value). LTTng-UST 2.13 macros. */
#undef LTTNG_UST_TRACEPOINT_PROVIDER
#define LTTNG_UST_TRACEPOINT_PROVIDER gtbench

#undef LTTNG_UST_TRACEPOINT_INCLUDE
#define LTTNG_UST_TRACEPOINT_INCLUDE "./lttng_tp.h"

#if !defined(GT_LTTNG_TP_H) || defined(LTTNG_UST_TRACEPOINT_HEADER_MULTI_READ)
#define GT_LTTNG_TP_H

#include <lttng/tracepoint.h>

LTTNG_UST_TRACEPOINT_EVENT(
    gtbench, ev, LTTNG_UST_TP_ARGS(uint64_t, id, int64_t, value),
    LTTNG_UST_TP_FIELDS(lttng_ust_field_integer(uint64_t, id, id)
                            lttng_ust_field_integer(int64_t, value, value)))

#endif

#include <lttng/tracepoint-event.h>
