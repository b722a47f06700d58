/* net.h: links and the transfers on them. Each link (one direction of a GPU's NVLink port, of a
 * NIC or of a switch uplink) has a capacity in bytes/s; a transfer (flow) has a volume in bytes
 * and crosses a set of links, using weight x its rate on each. Concurrent flows share links
 * max-min fairly (progressive filling: raise every unfrozen flow's rate together until a link
 * saturates, freeze the flows through it, repeat). A flow alone gets min over its links of
 * capacity / weight. Deterministic: flows are kept in start order.
 *
 * Incremental: a start, a finish or a capacity change marks the links it touches; before the
 * rates are next needed, progressive filling runs again over the connected part of the
 * flow-link graph that holds those links (flows linked through shared links, transitively),
 * every other flow keeping its rate. Max-min rates of one connected part do not depend on the
 * others, and that part is filled in the same order and with the same arithmetic as a fill of
 * every flow (flows in start order, the bottleneck link first by share, then by first use), so
 * the rates are bit for bit those of the full recompute; tests/test_net.c checks it against the
 * full algorithm on random instances. Changes at one instant are settled together. Cost of a
 * settle: O(E log L) for the E (flow, link) pairs of the part, instead of O(F x E) for all (of a
 * wide flow, only the links another flow shares and one more: sim_net_wide_min). A wide flow
 * joins every flow it meets into one part; a change among the narrow flows around it that cannot
 * move its rate (its bottleneck elsewhere, no tie with it) refills those narrow flows alone, the
 * wide flows frozen at their rates as the full fill would: the same rates, bit for bit.
 *
 * Link usage (when asked for): every link integrates the bytes it carried and the time it was
 * saturated (its flows' rates x weights sum to its capacity), for the busiest-links report
 * (sim_links.h). */
#ifndef SIM_NET_H
#define SIM_NET_H
#include <stdint.h>

#include "dm_error.h"

typedef struct sim_net sim_net;

/* n_links links with the given capacities (copied). Owned by the caller (sim_net_free). */
sim_net *sim_net_new(int n_links, const double *cap_Bps, dm_err *err);
void sim_net_free(sim_net *n); /* accepts NULL */

/* Start a flow of `bytes` at time now_us over links[i] with weights w[i] (both copied; each
 * weight > 0, n >= 1). tag is returned by sim_net_pop_finished. now_us never goes back. */
int sim_net_add(sim_net *n, double now_us, double bytes, const int *links, const double *w, int nl, int tag,
                dm_err *err);
/* The same without the copies, for a caller that starts many flows over the same link sets
 * (the simulator: one per collective of a group): links and w are the caller's and must stay
 * unchanged while the flow is active; sim_net_links_check checked them once and gave dup.
 * memo (NULL for none; zeroed before its first use, one per link set and net, kept by the caller
 * while the net lives) keeps the link set's lone rate (min capacity / weight) for as long as no
 * capacity changes: a flow that starts alone on its links takes it without a pass over them.
 * A flow that starts with no other flow active is put on its links' lists only when another
 * flow starts or a capacity changes: a run of collectives one after the other costs nothing per
 * link. */
typedef struct sim_net_memo {
    double lone;
    uint64_t cap_version;
} sim_net_memo;
int sim_net_links_check(const sim_net *n, const int *links, const double *w, int nl, int *dup, dm_err *err);
/* The rate in B/s a flow over links (weights w, no link twice) gets alone at the links' present
 * capacities: the smallest capacity / weight (0 when none carries weight). */
double sim_net_lone_rate(const sim_net *n, const int *links, const double *w, int nl);
int sim_net_add_shared(sim_net *n, double now_us, double bytes, const int *links, const double *w, int nl, int dup,
                       sim_net_memo *memo, int tag, dm_err *err);
/* Change a link's capacity at now_us: the flows advance at their old rates up to now_us, then
 * the rates are recomputed (the version changes). */
void sim_net_set_capacity(sim_net *n, double now_us, int link, double cap_Bps);
/* When the next flow finishes at the current rates (INFINITY when none). */
double sim_net_next_finish_us(sim_net *n);
/* Changes on every start/finish/capacity change: an event scheduled for an older version is
 * stale. */
uint64_t sim_net_version(const sim_net *n);
/* Advance to now_us, remove the flows finished by then (their tags into tags[], in start order,
 * at most max), recompute the rates. Returns the count. */
int sim_net_pop_finished(sim_net *n, double now_us, int *tags, int max);
int sim_net_active(const sim_net *n);
/* Rate of the active flow with this tag (bytes/s), 0 if none: for tests. */
double sim_net_rate(sim_net *n, int tag);
/* Rate settles so far: progressive fillings over the changed part (for the speed line); a flow
 * that starts alone on its links with nothing else changed at that instant gets its rate at the
 * start, without a settle, and is not counted. */
int64_t sim_net_recomputes(const sim_net *n);
/* Flows whose rates those settles recomputed, summed (the work they did). */
int64_t sim_net_flows_refilled(const sim_net *n);
/* Of those settles, the ones that refilled only the narrow flows around a change, every wide
 * flow's rate kept (net.c, settle_local). */
int64_t sim_net_local_settles(const sim_net *n);

/* Link usage up to now_us (>= the last change): bytes carried, and microseconds during which
 * the link was saturated (its load within 1e-9 of its capacity, capacity > 0); zeros unless
 * sim_net_track_usage was called before the first flow (it costs about a third of a settle). */
void sim_net_track_usage(sim_net *n);
/* Flows of this many links or more (none crossed twice, no usage tracked) are wide: each keeps
 * which of its links another flow crosses too, and a settle walks only those and its best lone
 * link (net.c, `wide`): the same rates, bit for bit. The default; tests set it low. */
#define SIM_NET_WIDE_MIN 256
void sim_net_wide_min(sim_net *n, int links);
int sim_net_n_links(const sim_net *n);
double sim_net_capacity(const sim_net *n, int link);
void sim_net_link_usage(sim_net *n, double now_us, int link, double *bytes, double *saturated_us);

#endif
