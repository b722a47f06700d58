/* cluster.h: GPU catalogue and cluster descriptions (presets and a small key = value file).
 *
 * Cluster file format ('#' comments, one "key = value" per line; units in the key names):
 *   name = my-a800
 *   gpu = A800-SXM4-80GB            (a catalogue name, see dm_gpu_find)
 *   gpus_per_node = 8
 *   nvlink_GBps = 200               (per GPU, each way)
 *   nics_per_node = 4
 *   nic_Gbps = 200                  (per NIC, each way, line rate; usable = nic_efficiency x it)
 *   nic_efficiency = 0.94
 *   nvlink_latency_us = 0.6, net_latency_us = 5.0, base_latency_us = 6.8 (NCCL-like terms)
 *   fwd_efficiency = 0.45           (fraction of the GPU's dense bf16 rate for forward/backward)
 *   nvlink_bus_efficiency = 0.75    (NCCL all-reduce bus bandwidth reached inside a node / nvlink_GBps)
 *   busbw_scale.KIND = 0.81         (KIND: broadcast, reduce, all-reduce, all-gather, reduce-scatter:
 *                                    that collective's measured busbw inside a node / all-reduce's; 1)
 *   bwd_efficiency = 0.39           (the same for backward GEMMs; default: fwd_efficiency)
 *   elementwise_efficiency.KIND = 0.4  (KIND adamw or muon_update: achieved fraction of HBM
 *                                    bandwidth, time = launch + bytes / (it x HBM); default: the
 *                                    kernel table's elementwise rows)
 *   elementwise_launch_us.KIND = 11 (the per-op overhead of that time; default: the GPU's launch floor)
 *   ns_time_scale = 1.2             (NS kernels take this times the kernel table's time; default 1)
 *   comm_slowdown = 0.1             (f: while a collective is in flight on a rank, its compute ops
 *                                    run at (1 - f) of their rate; default 0)
 *   coll_slowdown = 0.5             (g: while a compute op runs on a GPU, its NVLink ports carry
 *                                    (1 - g) of their capacity: GEMMs hold the SMs and HBM NCCL's
 *                                    kernels need; default 0)
 *   step_start_us = 3000            (the executor's per-step setup before its first op, e.g. the
 *                                    snapshot of the weights a skipped step rolls back to; default 0)
 *   op_gap_us = 2.9                 (the GPU idles this long between two compute ops of a rank:
 *                                    the executor's event records and launch latency; default 0)
 * Presets: a800, h100, h200, h200x2 (see cluster.c for the numbers and their sources). */
#ifndef DM_CLUSTER_H
#define DM_CLUSTER_H
#include <stdio.h>

#include "dm_error.h"

typedef struct dm_gpu {
    const char *name;      /* "NVIDIA H200" style, as CUDA reports it */
    const char *short_name;/* "H200-SXM" */
    double bf16_flops;     /* dense bf16/fp16 tensor-core FLOP/s (datasheet) */
    double hbm_Bps;        /* HBM bandwidth, bytes/s (datasheet) */
    double launch_us;      /* kernel launch floor */
} dm_gpu;

/* Catalogue lookup by short or CUDA name (case-insensitive, "A800", "H100", "H200" accepted). */
const dm_gpu *dm_gpu_find(const char *name);
int dm_gpu_count(void);
const dm_gpu *dm_gpu_at(int i);

typedef struct dm_cluster {
    char name[64];
    const dm_gpu *gpu;
    int gpus_per_node;
    double nvlink_Bps;      /* per GPU each way, bytes/s */
    int nics_per_node;
    double nic_Bps;         /* per NIC each way, usable bytes/s */
    double nvlink_latency_us, net_latency_us, base_latency_us;
    double fwd_efficiency;  /* achieved fraction of bf16 peak for forward/backward GEMMs */
    double nvlink_bus_efficiency; /* NCCL all-reduce bus bandwidth inside a node / nvlink_Bps */
    double busbw_scale[5];  /* per collective (broadcast, reduce, all-reduce, all-gather,
                               reduce-scatter: DM_OP_BROADCAST + i): measured busbw inside a node
                               relative to all-reduce's; 1 where not measured */
    double bwd_efficiency;  /* the same for backward; 0: fwd_efficiency (dm_cluster_bwd_efficiency) */
    double elem_efficiency[2]; /* [0] muon-update, [1] adamw: achieved fraction of HBM bandwidth;
                                  0: the kernel table (or the roofline) decides */
    double elem_launch_us[2]; /* per-op overhead with elem_efficiency; 0: gpu->launch_us */
    double ns_time_scale;   /* measured NS time / the kernel table's (or roofline's); 0: 1 */
    double comm_slowdown;   /* f in [0, 0.95): compute rate factor (1 - f) while a collective is
                               in flight on the rank (NCCL kernels take SMs and HBM); 0: none */
    double coll_slowdown;   /* g in [0, 0.95): NVLink capacity factor (1 - g) of a GPU while a
                               compute op runs on it; 0: none */
    double step_start_us;   /* every rank's first op starts this long after the step's start */
    double op_gap_us;       /* a rank's compute op starts at least this long after its previous one ends */
    char source[256];       /* where the numbers came from */
} dm_cluster;

/* The backward GEMM efficiency: bwd_efficiency when set, else fwd_efficiency. */
static inline double dm_cluster_bwd_efficiency(const dm_cluster *c)
{
    return c->bwd_efficiency > 0 ? c->bwd_efficiency : c->fwd_efficiency;
}

/* Elementwise kinds with an efficiency key: "muon_update" -> 0, "adamw" -> 1, else -1. */
int dm_cluster_elem_index(const char *name);

/* A preset name or a file path. */
int dm_cluster_load(const char *name_or_path, dm_cluster *out, dm_err *err);
/* Preset names, NULL-terminated. */
const char *const *dm_cluster_presets(void);

/* Placement: rank r lives on node r / gpus_per_node; its nearest NIC is the local index spread
 * evenly over the node's NICs (A800: GPUs 0,1 -> NIC 0, ...). -1 when the node has no NIC. */
int dm_cluster_node_of(const dm_cluster *c, int rank);
int dm_cluster_nic_of(const dm_cluster *c, int rank);
/* Nodes needed for n ranks. */
int dm_cluster_nodes(const dm_cluster *c, int nranks);
/* One line per field, "  key = value  (unit)", for a resolved-configuration printout. */
void dm_cluster_describe(const dm_cluster *c, FILE *f);

#endif
