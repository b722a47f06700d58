/* collcost.c: collective costs in NCCL's form (formulas and their sources in collcost.h). */
#include "collcost.h"

#include "coll.h"

#include <math.h>
#include <stdint.h>
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

static int has_fabric(const dm_cluster *c) { return c->fabric != DM_FABRIC_NONBLOCKING && c->nodes_per_leaf > 0; }

static int n_leaves(const dm_cluster *c, int nranks)
{
    return (dm_cluster_nodes(c, nranks) + c->nodes_per_leaf - 1) / c->nodes_per_leaf;
}

int collcost_leaf_switches(const dm_cluster *c, int nranks)
{
    if (!has_fabric(c)) return 0;
    return n_leaves(c, nranks) * (c->fabric == DM_FABRIC_RAIL ? c->nics_per_node : 1);
}

int collcost_pods(const dm_cluster *c, int nranks)
{
    if (!has_fabric(c) || c->leaves_per_pod < 1) return 0;
    return (n_leaves(c, nranks) + c->leaves_per_pod - 1) / c->leaves_per_pod;
}

/* First id of each kind, and the count of each kind. */
static void link_layout(const dm_cluster *c, int nranks, int first[COLL_LINK__COUNT + 1])
{
    int nic = dm_cluster_nodes(c, nranks) * c->nics_per_node, leaf = collcost_leaf_switches(c, nranks),
        pod = collcost_pods(c, nranks);
    int count[COLL_LINK__COUNT] = {nranks, nranks, nic, nic, leaf, leaf, pod, pod};
    first[0] = 0;
    for (int k = 0; k < COLL_LINK__COUNT; k++) first[k + 1] = first[k] + count[k];
}

int collcost_n_links(const dm_cluster *c, int nranks)
{
    int first[COLL_LINK__COUNT + 1];
    link_layout(c, nranks, first);
    return first[COLL_LINK__COUNT];
}

int collcost_link_id(const dm_cluster *c, int nranks, coll_link_kind kind, int index)
{
    if ((unsigned)kind >= COLL_LINK__COUNT) return -1;
    int first[COLL_LINK__COUNT + 1];
    link_layout(c, nranks, first);
    return first[kind] + index;
}

int collcost_link_of_id(const dm_cluster *c, int nranks, int id, coll_link_kind *kind, int *index)
{
    int first[COLL_LINK__COUNT + 1];
    link_layout(c, nranks, first);
    for (int k = 0; k < COLL_LINK__COUNT; k++)
        if (id >= first[k] && id < first[k + 1]) {
            *kind = (coll_link_kind)k;
            *index = id - first[k];
            return 0;
        }
    return -1;
}

double collcost_link_Bps(const dm_cluster *c, coll_link_kind kind)
{
    if (kind == COLL_LINK_NVL_OUT || kind == COLL_LINK_NVL_IN) return c->nvlink_Bps * c->nvlink_bus_efficiency;
    if (kind == COLL_LINK_NIC_OUT || kind == COLL_LINK_NIC_IN) return c->nic_Bps;
    /* A leaf's downlinks: its nodes' NICs (rail: one NIC of each, the switch's rail). */
    double down = (double)c->nodes_per_leaf * c->nic_Bps * (c->fabric == DM_FABRIC_RAIL ? 1 : c->nics_per_node);
    double leaf_up = down / (c->oversub[0] >= 1 ? c->oversub[0] : 1);
    if (kind == COLL_LINK_LEAF_UP || kind == COLL_LINK_LEAF_DOWN) return leaf_up;
    /* A pod's downlinks: the uplinks of its leaves' switches (rail: every rail's). */
    double pod_down = (double)c->leaves_per_pod * leaf_up * (c->fabric == DM_FABRIC_RAIL ? c->nics_per_node : 1);
    return pod_down / (c->oversub[1] >= 1 ? c->oversub[1] : 1);
}

void collcost_link_caps(const dm_cluster *c, int nranks, double *cap)
{
    int first[COLL_LINK__COUNT + 1];
    link_layout(c, nranks, first);
    for (int k = 0; k < COLL_LINK__COUNT; k++) {
        double b = collcost_link_Bps(c, (coll_link_kind)k);
        for (int i = first[k]; i < first[k + 1]; i++) cap[i] = b;
    }
}

const char *collcost_link_name(const dm_cluster *c, coll_link_kind kind, int index, char *buf, size_t size)
{
    int m = c->nics_per_node > 0 ? c->nics_per_node : 1, rail = c->fabric == DM_FABRIC_RAIL;
    const char *dir = kind % 2 == 0 ? "out" : "in";
    switch (kind) {
    case COLL_LINK_NVL_OUT:
    case COLL_LINK_NVL_IN: snprintf(buf, size, "NVLink of rank %d, %s", index, dir); break;
    case COLL_LINK_NIC_OUT:
    case COLL_LINK_NIC_IN: snprintf(buf, size, "NIC %d of node %d, %s", index % m, index / m, dir); break;
    case COLL_LINK_LEAF_UP:
    case COLL_LINK_LEAF_DOWN:
        if (rail)
            snprintf(buf, size, "rail %d switch of leaf %d, %s", index % m, index / m, kind == COLL_LINK_LEAF_UP ? "up" : "down");
        else snprintf(buf, size, "leaf %d, %s", index, kind == COLL_LINK_LEAF_UP ? "up" : "down");
        break;
    case COLL_LINK_POD_UP:
    case COLL_LINK_POD_DOWN: snprintf(buf, size, "pod %d, %s", index, kind == COLL_LINK_POD_UP ? "up" : "down"); break;
    default: snprintf(buf, size, "link %d", index);
    }
    return buf;
}

int collcost_links_max(const dm_cluster *c, int n)
{
    /* 2 NVLink directions per member, at most 2 NIC directions per member; with a fabric at
     * most a leaf switch up and down per member's NIC and a pod up and down per member, and
     * room to merge the ring edges' entries: 4 n more. */
    return has_fabric(c) ? 8 * n : 4 * n;
}

static int cmp_link(const void *a, const void *b)
{
    const coll_link *x = a, *y = b;
    if (x->kind != y->kind) return x->kind < y->kind ? -1 : 1;
    return (x->index > y->index) - (x->index < y->index);
}

/* The fabric's links of a group spanning nodes: its ring of nodes (node[i] with the NIC set
 * mask[i] of its members, m[i] NICs), each edge's traffic over the switches it crosses (the
 * rules in collcost.h), merged. Appends to out[cnt..]; returns the new count. */
static int fabric_links(const dm_cluster *c, const int *node, const uint64_t *mask, const int *m, int N, coll_link *out,
                        int cnt)
{
    int first = cnt, nics = c->nics_per_node, rail = c->fabric == DM_FABRIC_RAIL, lpp = c->leaves_per_pod;
    for (int i = 0; i < N; i++) {
        int u = i, v = (i + 1) % N;
        int lu = node[u] / c->nodes_per_leaf, lv = node[v] / c->nodes_per_leaf;
        double su = 1.0 / m[u], sv = 1.0 / m[v], pair = su < sv ? su : sv;
        if (lu != lv && lpp > 0 && lu / lpp != lv / lpp) {
            out[cnt++] = (coll_link){COLL_LINK_POD_UP, lu / lpp, 1};
            out[cnt++] = (coll_link){COLL_LINK_POD_DOWN, lv / lpp, 1};
        }
        if (!rail) {
            if (lu != lv) {
                out[cnt++] = (coll_link){COLL_LINK_LEAF_UP, lu, 1};
                out[cnt++] = (coll_link){COLL_LINK_LEAF_DOWN, lv, 1};
            }
            continue;
        }
        /* Rail-optimized: same rail inside one leaf group stays on its switch. */
        uint64_t both = lu == lv ? mask[u] & mask[v] : 0;
        for (int k = 0; k < nics && k < 64; k++) {
            double up = (mask[u] >> k & 1) ? su - ((both >> k & 1) ? pair : 0) : 0;
            double down = (mask[v] >> k & 1) ? sv - ((both >> k & 1) ? pair : 0) : 0;
            if (up > 1e-12) out[cnt++] = (coll_link){COLL_LINK_LEAF_UP, lu * nics + k, up};
            if (down > 1e-12) out[cnt++] = (coll_link){COLL_LINK_LEAF_DOWN, lv * nics + k, down};
        }
    }
    if ((cnt - first) > 1) qsort(out + first, (size_t)(cnt - first), sizeof *out, cmp_link);
    int w = first;
    for (int r = first; r < cnt; r++) {
        if (w > first && out[w - 1].kind == out[r].kind && out[w - 1].index == out[r].index) out[w - 1].weight += out[r].weight;
        else out[w++] = out[r];
    }
    return w;
}

int collcost_links(const dm_cluster *c, const int *ranks, int n, coll_link *out, dm_err *err)
{
    if (n <= 1) return 0;
    int nodes = 0, cnt = 0, fab = has_fabric(c);
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
    if (!fab || nodes < 2) return cnt;
    /* The ring of nodes for the fabric: each node's NICs (a set: NIC indexes < 64 in a node). */
    int *node = dm_malloc((size_t)nodes * 2 * sizeof(int), err);
    uint64_t *mask = dm_malloc((size_t)nodes * sizeof *mask, err);
    if (!node || !mask) {
        free(node);
        free(mask);
        return -1;
    }
    int *m = node + nodes, N = 0;
    for (int i = 0; i < n;) {
        int nd = dm_cluster_node_of(c, ranks[i]), j = i;
        node[N] = nd;
        mask[N] = 0;
        m[N] = 0;
        for (; j < n && dm_cluster_node_of(c, ranks[j]) == nd; j++) {
            int nic = dm_cluster_nic_of(c, ranks[j]);
            if (nic < 64 && !(mask[N] >> nic & 1)) {
                mask[N] |= (uint64_t)1 << nic;
                m[N]++;
            }
        }
        N++;
        i = j;
    }
    cnt = fabric_links(c, node, mask, m, N, out, cnt);
    free(node);
    free(mask);
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
