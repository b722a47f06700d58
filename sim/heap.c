/* heap.c: binary min-heap of events keyed by (time, sequence number) (heap.h). */
#include "heap.h"

#include <stdlib.h>

void sim_heap_init(sim_heap *h)
{
    h->ev = NULL;
    h->n = h->cap = 0;
    h->next_seq = 0;
}

void sim_heap_free(sim_heap *h)
{
    free(h->ev);
    sim_heap_init(h);
}

static int before(const sim_event *x, const sim_event *y)
{
    return x->t_us < y->t_us || (x->t_us == y->t_us && x->seq < y->seq);
}

int sim_heap_push(sim_heap *h, double t_us, int type, int a, uint64_t b, dm_err *err)
{
    if (h->n == h->cap) {
        int cap = h->cap ? 2 * h->cap : 1024;
        sim_event *n = dm_realloc(h->ev, (size_t)cap * sizeof *n, err);
        if (!n) return -1;
        h->ev = n;
        h->cap = cap;
    }
    sim_event e = {t_us, h->next_seq++, type, a, b};
    int i = h->n++;
    while (i > 0) {
        int p = (i - 1) / 2;
        if (!before(&e, &h->ev[p])) break;
        h->ev[i] = h->ev[p];
        i = p;
    }
    h->ev[i] = e;
    return 0;
}

int sim_heap_pop(sim_heap *h, sim_event *out)
{
    if (h->n == 0) return 0;
    *out = h->ev[0];
    sim_event last = h->ev[--h->n];
    int i = 0, n = h->n;
    for (;;) {
        int l = 2 * i + 1, r = l + 1, m = i;
        const sim_event *best = &last;
        if (l < n && before(&h->ev[l], best)) m = l, best = &h->ev[l];
        if (r < n && before(&h->ev[r], best)) m = r;
        if (m == i) break;
        h->ev[i] = h->ev[m];
        i = m;
    }
    if (n) h->ev[i] = last;
    return 1;
}
