/* heap.h: the simulator's event queue: a binary min-heap ordered by (time, sequence number),
 * so events at the same time pop in the order they were pushed and every run is identical. */
#ifndef SIM_HEAP_H
#define SIM_HEAP_H
#include <stdint.h>

#include "dm_error.h"

typedef struct sim_event {
    double t_us;  /* when */
    uint64_t seq; /* push order (set by sim_heap_push) */
    int type;     /* caller's event type */
    int a;        /* caller's payload */
    uint64_t b;   /* caller's payload */
} sim_event;

typedef struct sim_heap {
    sim_event *ev;
    int n, cap;
    uint64_t next_seq;
} sim_heap;

void sim_heap_init(sim_heap *h);
void sim_heap_free(sim_heap *h); /* frees the storage; the struct may be reused after init */
int sim_heap_push(sim_heap *h, double t_us, int type, int a, uint64_t b, dm_err *err);
/* Remove the earliest event into *out; 0 when the heap is empty. */
int sim_heap_pop(sim_heap *h, sim_event *out);

#endif
