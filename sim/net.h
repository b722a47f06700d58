/* net.h: links and the transfers on them. Each link (one direction of a GPU's NVLink port or of
 * a NIC) has a capacity in bytes/s; a transfer (flow) has a volume in bytes and crosses a set of
 * links, using weight x its rate on each. Concurrent flows share links max-min fairly
 * (progressive filling: raise every unfrozen flow's rate together until a link saturates, freeze
 * the flows through it, repeat), recomputed whenever a flow starts or ends. A flow alone gets
 * min over its links of capacity / weight. Deterministic: flows are kept in start order. */
#ifndef SIM_NET_H
#define SIM_NET_H
#include <stdint.h>

#include "dm_error.h"

typedef struct sim_net sim_net;

/* n_links links with the given capacities (copied). Owned by the caller (sim_net_free). */
sim_net *sim_net_new(int n_links, const double *cap_Bps, dm_err *err);
void sim_net_free(sim_net *n); /* accepts NULL */

/* Start a flow of `bytes` at time now_us over links[i] with weights w[i] (both copied; each
 * weight > 0, n >= 1). tag is returned by sim_net_pop_finished. */
int sim_net_add(sim_net *n, double now_us, double bytes, const int *links, const double *w, int nl, int tag,
                dm_err *err);
/* Change a link's capacity at now_us: the flows advance at their old rates up to now_us, then
 * the rates are recomputed (the version changes). */
void sim_net_set_capacity(sim_net *n, double now_us, int link, double cap_Bps);
/* When the next flow finishes at the current rates (INFINITY when none). */
double sim_net_next_finish_us(const sim_net *n);
/* Changes on every start/finish: an event scheduled for an older version is stale. */
uint64_t sim_net_version(const sim_net *n);
/* Advance to now_us, remove the flows finished by then (their tags into tags[], in start order,
 * at most max), recompute the rates. Returns the count. */
int sim_net_pop_finished(sim_net *n, double now_us, int *tags, int max);
int sim_net_active(const sim_net *n);
/* Rate of the active flow with this tag (bytes/s), 0 if none: for tests. */
double sim_net_rate(const sim_net *n, int tag);
/* Rate recomputations so far (for the events/s statistics). */
int64_t sim_net_recomputes(const sim_net *n);

#endif
