/* collcost.c: collective costs in NCCL's form (formulas and their sources in collcost.h). */
#include "collcost.h"

#include "coll.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

const char *coll_algo_name(coll_algo a)
{
    return a == COLL_ALGO_RING ? "ring" : a == COLL_ALGO_TREE ? "tree" : "auto";
}

int coll_algo_parse(const char *s, coll_algo *out)
{
    static const coll_algo all[] = {COLL_ALGO_AUTO, COLL_ALGO_RING, COLL_ALGO_TREE};
    for (int i = 0; i < 3; i++)
        if (!strcasecmp(s, coll_algo_name(all[i]))) {
            *out = all[i];
            return 0;
        }
    return -1;
}

int collcost_n_links(const dm_cluster *c, int nranks)
{
    return 2 * nranks + 2 * dm_cluster_nodes(c, nranks) * c->nics_per_node;
}

int collcost_link_id(const dm_cluster *c, int nranks, coll_link_kind kind, int index)
{
    int nic_links = dm_cluster_nodes(c, nranks) * c->nics_per_node;
    switch (kind) {
    case COLL_LINK_NVL_OUT: return index;
    case COLL_LINK_NVL_IN: return nranks + index;
    case COLL_LINK_NIC_OUT: return 2 * nranks + index;
    case COLL_LINK_NIC_IN: return 2 * nranks + nic_links + index;
    }
    return -1;
}

double collcost_link_Bps(const dm_cluster *c, coll_link_kind kind)
{
    if (kind == COLL_LINK_NVL_OUT || kind == COLL_LINK_NVL_IN) return c->nvlink_Bps * c->nvlink_bus_efficiency;
    return c->nic_Bps;
}

int collcost_links_max(const dm_cluster *c, int n)
{
    (void)c;
    return 4 * n; /* 2 NVLink directions per member, at most 2 NIC directions per member */
}

int collcost_links(const dm_cluster *c, const int *ranks, int n, coll_link *out, dm_err *err)
{
    if (n <= 1) return 0;
    int nodes = 0, cnt = 0;
    /* ranks are ascending, so a node's members are consecutive. */
    for (int i = 0; i < n;) {
        int node = dm_cluster_node_of(c, ranks[i]), j = i;
        while (j < n && dm_cluster_node_of(c, ranks[j]) == node) j++;
        nodes++;
        i = j;
    }
    for (int i = 0; i < n;) {
        int node = dm_cluster_node_of(c, ranks[i]), j = i;
        while (j < n && dm_cluster_node_of(c, ranks[j]) == node) j++;
        int k = j - i;
        if (k > 1) {
            double w = nodes > 1 ? (double)(k - 1) / k : 1.0;
            for (int r = i; r < j; r++) {
                out[cnt++] = (coll_link){COLL_LINK_NVL_OUT, ranks[r], w};
                out[cnt++] = (coll_link){COLL_LINK_NVL_IN, ranks[r], w};
            }
        }
        if (nodes > 1) {
            if (c->nics_per_node < 1)
                return dm_err_set(err, "cluster %s: a group spans nodes but nodes have no NICs", c->name);
            /* Distinct NICs of the members (nearest-NIC map is monotone in the local index). */
            int first = cnt, m = 0, last = -1;
            for (int r = i; r < j; r++) {
                int nic = dm_cluster_nic_of(c, ranks[r]);
                if (nic == last) continue;
                last = nic;
                int id = node * c->nics_per_node + nic;
                out[cnt++] = (coll_link){COLL_LINK_NIC_OUT, id, 0};
                out[cnt++] = (coll_link){COLL_LINK_NIC_IN, id, 0};
                m++;
            }
            for (int x = first; x < cnt; x++) out[x].weight = 1.0 / m;
        }
        i = j;
    }
    return cnt;
}

int collcost_topo(const dm_cluster *c, const int *ranks, int n, coll_topo *t, dm_err *err)
{
    memset(t, 0, sizeof *t);
    t->n_ranks = n;
    t->nvlink_latency_us = c->nvlink_latency_us;
    t->net_latency_us = c->net_latency_us;
    t->base_latency_us = c->base_latency_us;
    for (int i = 0; i < 5; i++) t->busbw_scale[i] = 1;
    for (int i = 0; i < n;) {
        int node = dm_cluster_node_of(c, ranks[i]), j = i;
        while (j < n && dm_cluster_node_of(c, ranks[j]) == node) j++;
        t->n_nodes++;
        if (j - i > t->max_per_node) t->max_per_node = j - i;
        i = j;
    }
    if (t->n_nodes == 1)
        for (int i = 0; i < 5; i++) t->busbw_scale[i] = c->busbw_scale[i] > 0 ? c->busbw_scale[i] : 1;
    if (n <= 1) return 0;
    coll_link buf[256], *l = buf;
    int cap = collcost_links_max(c, n);
    if (cap > 256 && !(l = dm_malloc((size_t)cap * sizeof *l, err))) return -1;
    int cnt = collcost_links(c, ranks, n, l, err);
    if (cnt < 0) {
        if (l != buf) free(l);
        return -1;
    }
    double bw = INFINITY;
    for (int i = 0; i < cnt; i++) {
        double x = collcost_link_Bps(c, l[i].kind) / l[i].weight;
        if (x < bw) bw = x;
    }
    t->bus_Bps = bw;
    if (l != buf) free(l);
    return 0;
}

double collcost_busbw_factor(dm_op_kind kind, int n)
{
    const dm_coll *c = dm_coll_of(kind);
    return c ? dm_coll_busbw_factor(c, n) : 0;
}

static int log2i(int x)
{
    int l = 0;
    while (x > 1) {
        x >>= 1;
        l++;
    }
    return l;
}

double collcost_latency_us(dm_op_kind kind, coll_algo algo, const coll_topo *t)
{
    int n = t->n_ranks, N = t->n_nodes;
    if (n <= 1) return 0;
    if (algo == COLL_ALGO_TREE && kind == DM_OP_ALLREDUCE)
        return t->base_latency_us +
               2.0 * ((double)(n / N - 1) * t->nvlink_latency_us + log2i(N) * t->net_latency_us);
    int steps, inter;
    if (kind == DM_OP_ALLREDUCE) {
        steps = 2 * (n - 1);
        inter = 2 * (N - 1);
    } else {
        steps = n - 1;
        inter = N - 1;
    }
    return t->base_latency_us + (steps - inter) * t->nvlink_latency_us + inter * t->net_latency_us;
}

double collcost_bus_bytes(dm_op_kind kind, coll_algo algo, double bytes, int n)
{
    if (n <= 1) return 0;
    if (algo == COLL_ALGO_TREE && kind == DM_OP_ALLREDUCE) return bytes / (0.5 * 0.92);
    return bytes * collcost_busbw_factor(kind, n);
}

double collcost_kind_scale(dm_op_kind kind, const coll_topo *t)
{
    int i = (int)kind - (int)DM_OP_BROADCAST;
    return i >= 0 && i < 5 && t->busbw_scale[i] > 0 ? t->busbw_scale[i] : 1;
}

static double formula(dm_op_kind kind, coll_algo algo, double bytes, const coll_topo *t)
{
    if (t->n_ranks <= 1) return 0;
    return collcost_latency_us(kind, algo, t) +
           collcost_bus_bytes(kind, algo, bytes, t->n_ranks) / (t->bus_Bps * collcost_kind_scale(kind, t)) * 1e6;
}

coll_algo collcost_pick(dm_op_kind kind, coll_algo algo, double bytes, const coll_topo *t)
{
    if (kind != DM_OP_ALLREDUCE) return COLL_ALGO_RING;
    if (algo != COLL_ALGO_AUTO) return algo;
    return formula(kind, COLL_ALGO_TREE, bytes, t) < formula(kind, COLL_ALGO_RING, bytes, t) ? COLL_ALGO_TREE
                                                                                               : COLL_ALGO_RING;
}

double collcost_time_us(dm_op_kind kind, coll_algo algo, double bytes, const coll_topo *t)
{
    return formula(kind, collcost_pick(kind, algo, bytes, t), bytes, t);
}

double collcost_algbw_Bps(double bytes, double time_us) { return time_us > 0 ? bytes / (time_us * 1e-6) : 0; }

double collcost_busbw_Bps(dm_op_kind kind, int n, double bytes, double time_us)
{
    return collcost_algbw_Bps(bytes, time_us) * collcost_busbw_factor(kind, n);
}
