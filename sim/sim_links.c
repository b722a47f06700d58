/* sim_links.c: the busiest links of a simulated step (sim_links.h). */
#include "sim_links.h"

#include <string.h>

int sim_links_wanted(const dm_cluster *c) { return c->fabric != DM_FABRIC_NONBLOCKING; }

/* Insert u into the top list t (n rows, SIM_LINKS_TOP at most) by key descending; earlier
 * (lower id) rows win ties. */
static void insert(sim_link_use *t, int *n, const sim_link_use *u, double key, int by_bytes)
{
    int i = *n < SIM_LINKS_TOP ? (*n)++ : SIM_LINKS_TOP;
    while (i > 0 && key > (by_bytes ? t[i - 1].bytes : t[i - 1].saturated_us)) {
        if (i < SIM_LINKS_TOP) t[i] = t[i - 1];
        i--;
    }
    if (i < SIM_LINKS_TOP) t[i] = *u;
}

void sim_links_collect(sim_net *net, const dm_cluster *c, int nranks, double end_us, sim_links *out)
{
    memset(out, 0, sizeof *out);
    if (!net || !sim_links_wanted(c)) return;
    out->shown = 1;
    out->n_links = sim_net_n_links(net);
    for (int id = 0; id < out->n_links; id++) {
        sim_link_use u = {0};
        if (collcost_link_of_id(c, nranks, id, &u.kind, &u.index)) continue;
        sim_net_link_usage(net, end_us, id, &u.bytes, &u.saturated_us);
        if (u.bytes <= 0) continue;
        u.cap_Bps = sim_net_capacity(net, id);
        collcost_link_name(c, u.kind, u.index, u.name, sizeof u.name);
        insert(out->by_bytes, &out->n_bytes, &u, u.bytes, 1);
        if (u.saturated_us > 0) {
            out->n_saturated++;
            insert(out->by_sat, &out->n_sat, &u, u.saturated_us, 0);
        }
    }
}

static void rows(FILE *f, const sim_link_use *t, int n, double step_us)
{
    for (int i = 0; i < n; i++) {
        double util = step_us > 0 && t[i].cap_Bps > 0 ? t[i].bytes / (t[i].cap_Bps * step_us * 1e-6) : 0;
        fprintf(f, "  %-34s %12.3f %10.2f %8.1f%% %12.3f\n", t[i].name, t[i].bytes / 1e9, t[i].cap_Bps / 1e9, 100 * util,
                t[i].saturated_us / 1e3);
    }
}

void sim_links_print(FILE *f, const sim_links *l, double step_us)
{
    if (!l->shown) return;
    fprintf(f, "\nbusiest links: %d links, %d ever saturated (at capacity)\n", l->n_links, l->n_saturated);
    fprintf(f, "  %-34s %12s %10s %9s %12s\n", "by bytes", "GB", "GB/s", "mean use", "saturated ms");
    rows(f, l->by_bytes, l->n_bytes, step_us);
    if (l->n_sat) {
        fprintf(f, "  by time saturated\n");
        rows(f, l->by_sat, l->n_sat, step_us);
    }
}
