/* sim_links.h: the busiest links of a simulated step, for the report: the top links by bytes
 * carried and by time saturated (their flows' rates x weights at the link's capacity: a
 * bottleneck), with their capacity and mean utilization over the step. Shown when the cluster
 * has a fabric (rail or fattree), where uplinks can bottleneck; on a non-blocking cluster
 * nothing is tracked (the net skips the bookkeeping) and the report is unchanged. */
#ifndef SIM_LINKS_H
#define SIM_LINKS_H
#include <stdio.h>

#include "cluster.h"
#include "collcost.h"
#include "net.h"

#define SIM_LINKS_TOP 5

typedef struct sim_link_use {
    coll_link_kind kind;
    int index;
    char name[64];          /* collcost_link_name */
    double cap_Bps;         /* at the end of the step */
    double bytes;           /* carried over the step */
    double saturated_us;    /* time at capacity */
} sim_link_use;

typedef struct sim_links {
    int shown;              /* 1: tracked and reported (the cluster has a fabric) */
    int n_links, n_saturated; /* links in the network; links ever saturated */
    int n_bytes, n_sat;     /* rows filled below */
    sim_link_use by_bytes[SIM_LINKS_TOP]; /* most bytes first (ties: lower link id) */
    sim_link_use by_sat[SIM_LINKS_TOP];   /* longest saturated first, only links ever saturated */
} sim_links;

/* Whether a run on c tracks and reports link usage (call sim_net_track_usage when it does). */
int sim_links_wanted(const dm_cluster *c);
/* The tables from the net at the step's end (end_us); *out zeroed when not wanted. */
void sim_links_collect(sim_net *net, const dm_cluster *c, int nranks, double end_us, sim_links *out);
/* "busiest links" lines for the report (nothing when not shown); step_us: for utilization. */
void sim_links_print(FILE *f, const sim_links *l, double step_us);

#endif
