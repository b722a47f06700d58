/* collcost.h: the cost of one collective in NCCL's form, shared by the simulator and the real
 * executor (which reports measured times next to these predictions under the same names).
 *
 *   time_us = latency_us + bus_bytes / bus_Bps
 *
 * latency_us: NCCL's tuning model (src/graph/tuning.cc, simple protocol): a base latency per
 *   algorithm plus one hop latency per step, NVLink hops inside a node and network hops between
 *   nodes. Ring: steps 2(n-1) for all-reduce (2(N-1) of them between nodes, N = nodes), n-1 for
 *   all-gather and reduce-scatter (N-1 between nodes), n-1 for broadcast and reduce (a pipelined
 *   chain; N-1 between nodes). Tree (all-reduce only): 2((n/N - 1) NVLink hops + log2(N)
 *   network hops).
 * bus_bytes: the nccl-tests "bus" volume: size x busbw factor (all-reduce 2(n-1)/n, all-gather
 *   and reduce-scatter (n-1)/n, broadcast and reduce 1); tree all-reduce moves size / (0.5 x 0.92)
 *   (NCCL's tree ratio 0.5 and its 0.92 tree bandwidth derating).
 * bus_Bps x scale: the slowest tier the group's traffic crosses, found from the links it uses
 *   (collcost_links): every member's NVLink port each way (when the group has two or more
 *   members in a node; weight (k-1)/k of the bus volume when the ring also leaves the node, k
 *   members in that node, else 1) at nvlink_Bps x nvlink_bus_efficiency; and between nodes the
 *   NICs nearest to the node's members, each way, sharing the bus volume evenly (each NIC
 *   carries 1/m of it for m distinct NICs), at nic_Bps. So a lone collective's bandwidth term is
 *   bus_bytes / min over links (capacity / weight) — exactly what the simulator reproduces when
 *   it carries the collective as one transfer on those links. scale: for a group inside one node,
 *   the cluster's measured busbw of this collective relative to all-reduce's (busbw_scale; the
 *   simulator carries bus_bytes / scale), else 1.
 * Fabrics (cluster fabric = rail | fattree; nonblocking adds nothing): the group's traffic
 *   between nodes is a ring over its nodes in ascending order (the last back to the first), each
 *   ring edge carrying the bus volume, split evenly over the sending node's NICs and over the
 *   receiving node's. Nodes sit under leaves nodes_per_leaf at a time (node / nodes_per_leaf),
 *   leaves under pods leaves_per_pod at a time when set. An edge between two leaves crosses the
 *   sending leaf's uplink and the receiving leaf's downlink (weight 1 each); between two pods also
 *   the sending pod's uplink and the receiving pod's downlink. Rail-optimized: a leaf is one rail
 *   switch per NIC index (NIC k of every node of the leaf group on switch k), so an edge between
 *   leaf groups crosses the uplink of rail switch k for each sending NIC k (weight 1/m, m NICs)
 *   and the downlink of switch k for each receiving NIC k (1/m'); inside one leaf group, traffic
 *   from NIC j to NIC j stays on its rail switch, and what cannot pair with the same rail
 *   (min(1/m, 1/m') pairs on each rail both nodes use, the rest of each side's share) goes up its
 *   rail switch and down the other's through the spine (NCCL's PXN, which would move it over
 *   NVLink first, is not modelled). Capacities, each way: a fat-tree leaf uplink nodes_per_leaf x
 *   nics_per_node x nic_Bps / oversubscription.leaf; a rail switch's nodes_per_leaf x nic_Bps /
 *   oversubscription.leaf; a pod uplink leaves_per_pod x (the uplinks of its leaf switches) /
 *   oversubscription.spine. Rings cross few uplinks, so a lone collective slows only when a leaf's
 *   uplinks are narrower than one node's NICs (nodes_per_leaf < the ratio); many collectives
 *   crossing leaves at once share the uplinks max-min fairly in the simulator. Extra switch-hop
 *   latency is not modelled.
 * A group of one rank costs nothing (no data moves). Units: bytes, microseconds, bytes/s. */
#ifndef DM_COLLCOST_H
#define DM_COLLCOST_H
#include "cluster.h"
#include "dm_error.h"
#include "program.h"

typedef enum { COLL_ALGO_AUTO, COLL_ALGO_RING, COLL_ALGO_TREE } coll_algo;

const char *coll_algo_name(coll_algo a);            /* "auto", "ring", "tree" */
int coll_algo_parse(const char *s, coll_algo *out); /* 0, or -1 for an unknown name */

/* A link resource: one direction of a GPU's NVLink port, of one NIC, of a leaf switch's uplink
 * to the spine (up: leaving the leaf, down: entering it) or of a pod's uplink to the core. */
typedef enum {
    COLL_LINK_NVL_OUT, COLL_LINK_NVL_IN, COLL_LINK_NIC_OUT, COLL_LINK_NIC_IN,
    COLL_LINK_LEAF_UP, COLL_LINK_LEAF_DOWN, COLL_LINK_POD_UP, COLL_LINK_POD_DOWN
} coll_link_kind;
#define COLL_LINK__COUNT 8

typedef struct coll_link {
    coll_link_kind kind;
    int index;     /* NVLink: the rank; NIC: node x nics_per_node + nic; leaf: the leaf (rail:
                      leaf x nics_per_node + rail); pod: the pod */
    double weight; /* share of the collective's bus bytes that crosses this link */
} coll_link;

/* Where a group sits on the cluster: what the cost formula needs. */
typedef struct coll_topo {
    int n_ranks;       /* group size */
    int n_nodes;       /* nodes the group spans */
    int max_per_node;  /* most members in one node */
    double bus_Bps;    /* min over the group's links of capacity / weight (0 for one rank) */
    double busbw_scale[5]; /* per collective kind (DM_OP_BROADCAST + i); 1 unless one node */
    double nvlink_latency_us, net_latency_us, base_latency_us;
} coll_topo;

/* Link resources of a cluster of nranks GPUs: NVLink out/in per GPU, NIC out/in per node, and
 * with a fabric leaf-switch up/down per leaf switch and pod up/down per pod, numbered in that
 * order (a non-blocking cluster's ids are those alone). */
int collcost_n_links(const dm_cluster *c, int nranks);
int collcost_link_id(const dm_cluster *c, int nranks, coll_link_kind kind, int index);
double collcost_link_Bps(const dm_cluster *c, coll_link_kind kind); /* capacity of one link */
/* Every link's capacity into cap[0 .. collcost_n_links). */
void collcost_link_caps(const dm_cluster *c, int nranks, double *cap);
/* The kind and index of link id (the inverse of collcost_link_id); -1 when out of range. */
int collcost_link_of_id(const dm_cluster *c, int nranks, int id, coll_link_kind *kind, int *index);
/* "NIC 3 of node 12 out", "rail 2 switch of leaf 1 uplink", ... into buf; returns buf. */
const char *collcost_link_name(const dm_cluster *c, coll_link_kind kind, int index, char *buf, size_t size);
/* Switches of the fabric for nranks GPUs: leaf switches (rail: leaves x NICs) and pods (0 when
 * leaves_per_pod is 0 or the fabric is non-blocking). Placement: node n under leaf
 * n / nodes_per_leaf, leaf l under pod l / leaves_per_pod. */
int collcost_leaf_switches(const dm_cluster *c, int nranks);
int collcost_pods(const dm_cluster *c, int nranks);

/* The links a group's collective traffic crosses, each once. ranks ascending (as dm_group holds
 * them). Fills out[0..] (caller's array of at least collcost_links_max(c, n) entries): NVLink
 * and NIC links first, as without a fabric, then the fabric's by kind and index. Returns the
 * count, or -1 on error (a multi-node group on nodes without NICs, out of memory). */
int collcost_links(const dm_cluster *c, const int *ranks, int n, coll_link *out, dm_err *err);
/* Upper bound on collcost_links' count for a group of n ranks. */
int collcost_links_max(const dm_cluster *c, int n);

/* The group's topology summary (bus_Bps from collcost_links). */
int collcost_topo(const dm_cluster *c, const int *ranks, int n, coll_topo *out, dm_err *err);

/* The algorithm NCCL would use: ring for everything but all-reduce, where AUTO picks the faster
 * of ring and tree by this model. */
coll_algo collcost_pick(dm_op_kind kind, coll_algo algo, double bytes, const coll_topo *t);
/* nccl-tests bus-bandwidth factor (busbw = algbw x factor), from the collective table (coll.h). */
double collcost_busbw_factor(dm_op_kind kind, int n_ranks);
/* The two terms of the formula; algo must not be AUTO (use collcost_pick). */
double collcost_latency_us(dm_op_kind kind, coll_algo algo, const coll_topo *t);
double collcost_bus_bytes(dm_op_kind kind, coll_algo algo, double bytes, int n_ranks);
/* The measured per-collective busbw factor for this group (1 when none applies). */
double collcost_kind_scale(dm_op_kind kind, const coll_topo *t);
/* The whole formula for a collective alone on the cluster (AUTO resolved by collcost_pick). */
double collcost_time_us(dm_op_kind kind, coll_algo algo, double bytes, const coll_topo *t);

/* nccl-tests' reporting: algbw = size / time, busbw = algbw x factor (bytes/s). */
double collcost_algbw_Bps(double bytes, double time_us);
double collcost_busbw_Bps(dm_op_kind kind, int n_ranks, double bytes, double time_us);

#endif
