/* store_pin.h: low-water marks that keep retention away from generations a
 * download still has to send.
 *
 * A download lists its generations (short read transaction), pins the lowest
 * seq it will still read, moves the pin up as it goes, and unpins at the end.
 * Retention deletes only generations with seq < store_pins_min(). A mutex
 * guards the set; pins are few (one per running download).
 *
 * Thread: any.
 */
#ifndef STORE_PIN_H
#define STORE_PIN_H

#include <stdint.h>

typedef struct store_pins store_pins;

store_pins *store_pins_new(void);
void store_pins_free(store_pins *p);
/* Returns a handle >= 0, or -ENOMEM / GTP_E_LIMIT (too many pins). */
int store_pins_add(store_pins *p, int64_t min_seq);
void store_pins_move(store_pins *p, int handle, int64_t min_seq);
void store_pins_remove(store_pins *p, int handle);
/* Lowest pinned seq, INT64_MAX if nothing is pinned. */
int64_t store_pins_min(store_pins *p);
/* 0, or minus the first of store_pin.c's invariants that does not hold.
 * Debug builds also check at every add and remove. */
int store_pins_check_invariants(store_pins *p);

#endif
