/* cluster.h: GPU catalogue, cluster descriptions (presets and a small key = value file) and the
 * one table of their parameters.
 *
 * Cluster file format ('#' comments, one "key = value" per line, each key once; units in the
 * key names), e.g.
 *   name = my-a800
 *   gpu = A800-SXM4-80GB
 *   gpus_per_node = 8
 *   nvlink_GBps = 200
 *   nics_per_node = 4
 *   nic_Gbps = 200
 * A GPU outside the catalogue is described by its numbers instead of `gpu` (gpu_name,
 * gpu_bf16_tflops, gpu_fp16_tflops, gpu_hbm_GBps, gpu_memory_GiB, gpu_launch_us, gpu_sms,
 * gpu_sm_MHz; beside `gpu` they change that catalogue GPU's numbers). The network between nodes
 * is `fabric = nonblocking` (the default: a non-blocking core), `rail` or `fattree` with
 * nodes_per_leaf, leaves_per_pod and oversubscription.{leaf|spine} (the link model is in
 * collcost.h); nics_per_gpu may stand for nics_per_node (nics_per_gpu x gpus_per_node).
 * Every key, with its unit, accepted range, default and meaning, is a row of the parameter
 * table in cluster.c (dm_param_*): the file reader, its unknown-key message, the description
 * printed by every command (dm_cluster_describe) and the calibration file (valid/calib.h, whose
 * keys are the rows marked DM_PARAM_CALIB) all read that table, so a new key is one row there
 * plus its use. Presets: a100, a800, h100, h200, h200x2, b200 (see cluster.c for the numbers and
 * their sources); DM_CLUSTER_DEFAULT is the one every command uses when none is given. */
#ifndef DM_CLUSTER_H
#define DM_CLUSTER_H
#include <stdio.h>

#include "dm_error.h"
#include "power.h"

typedef struct dm_gpu {
    const char *name;      /* "NVIDIA H200" style, as CUDA reports it */
    const char *short_name;/* "H200-SXM" */
    double bf16_flops;     /* dense bf16/fp16 tensor-core FLOP/s (datasheet) */
    double hbm_Bps;        /* HBM bandwidth, bytes/s (datasheet) */
    double launch_us;      /* kernel launch floor */
    double fp16_flops;     /* dense fp16 tensor-core FLOP/s (datasheet) */
    double mem_bytes;      /* device memory, bytes, as CUDA reports the total (cluster.c); 0: not known */
    double sms;            /* streaming multiprocessors (datasheet); 0: not known */
    double sm_mhz;         /* their maximum (boost) clock, MHz (datasheet); 0: not known */
} dm_gpu;

/* SMs x clock (SM-cycles per microsecond): what kernels limited neither by the tensor cores nor by
 * HBM scale with between GPUs (dm_costs' projection); 0 when either number is not known. */
double dm_gpu_sm_rate(const dm_gpu *g);

/* Catalogue lookup by short or CUDA name (case-insensitive, "A100", "A800", "H100", "H200",
 * "B200" accepted), then among the GPUs described by numbers so far (dm_gpu_intern). */
const dm_gpu *dm_gpu_find(const char *name);
int dm_gpu_count(void); /* the catalogue */
const dm_gpu *dm_gpu_at(int i);
/* A GPU described by its numbers (names copied; NULL names: "custom GPU"): the catalogue entry
 * when every field equals one, else a copy that lives as long as the process (clusters copied
 * by value keep pointing at it; the same description twice gives the same copy). Thread-safe.
 * NULL with err set when 256 different descriptions were already made. */
const dm_gpu *dm_gpu_intern(const dm_gpu *spec, dm_err *err);
/* 1 when g is a catalogue entry (not a described GPU). */
int dm_gpu_is_catalogued(const dm_gpu *g);

/* The network between nodes (collcost.h models its links). */
typedef enum {
    DM_FABRIC_NONBLOCKING, /* every NIC on one non-blocking core: only NICs limit */
    DM_FABRIC_RAIL,        /* rail-optimized: NIC k of every node of a leaf group on rail switch k */
    DM_FABRIC_FATTREE      /* every NIC of a leaf's nodes on the leaf switch */
} dm_fabric;
const char *dm_fabric_name(int fabric); /* "nonblocking", "rail", "fattree" */

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
    double elem_op_us[2];   /* [0] muon-update, [1] adamw priced from the kernel table (no
                               elem_efficiency): the executor's time per op beyond its tensors'
                               rows (calibrated; default 0) */
    double ns_time_scale;   /* measured NS time / the kernel table's (or roofline's); 0: 1 */
    double comm_slowdown;   /* f in [0, 0.95): while a collective is in flight on the rank (NCCL
                               kernels take SMs and HBM) a compute op runs at (1 - f s) of its
                               rate, s its memory-bound kernels' share of its time (forward and
                               backward ops with work, dm_kernel_memory_bound; else 1); 0: none */
    double coll_slowdown;   /* g in [0, 0.95): NVLink capacity factor (1 - g) of a GPU while a
                               compute op runs on it; 0: none */
    double lo_main_rate;    /* while a rank's two compute streams both run an op (compute-lo,
                               program.h), the rate of the op of compute (and the comm streams) */
    double lo_rate;         /* ... and the rate of compute-lo's op (it takes what is left) */
    double step_start_us;   /* every rank's first op starts this long after the step's start */
    double op_gap_us;       /* a rank's compute op starts at least this long after its previous one ends */
    double graph_gap_us;    /* the GPU idles this long after an op the executor launches as a CUDA
                               graph (an NS op not eager) before the next op (0: op_gap_us) */
    double solo_coll_us;    /* a one-rank collective (run on the compute stream, program.h's
                               dm_run_stream: NCCL's launch and kernel, no data moved) holds the
                               stream this long, the idle before it included; the next compute op
                               starts op_gap_us after it ends, as after a compute op (0: free) */
    double staging_efficiency; /* the executor's staging copies around a reduce-scatter or all-gather
                                  (coll.h): achieved fraction of HBM bandwidth; 0: the HBM roofline */
    double staging_launch_us;  /* the time of each staging copy's launch (a cudaMemcpyAsync) with
                                  staging_efficiency; 0: gpu->launch_us */
    /* The fabric between nodes (collcost.h): nodes sit under leaf switches nodes_per_leaf at a
     * time (rail: one rail switch per NIC index per leaf group), leaves under spine blocks (pods)
     * leaves_per_pod at a time (0: one spine over every leaf); oversub[0]: a leaf's downlink /
     * uplink bandwidth, oversub[1]: a pod's (1: non-blocking). */
    int fabric;             /* dm_fabric */
    int nodes_per_leaf, leaves_per_pod;
    double oversub[2];
    double kernel_gap_us;   /* the GPU idles this long between two kernel launches inside one
                               forward or backward op (sim.h); 0: none */
    dm_power power;         /* the power-limit model (power.h; keys power.*); limit 0: full clock */
    char source[256];       /* where the numbers came from */
} dm_cluster;

/* The backward GEMM efficiency: bwd_efficiency when set, else fwd_efficiency. */
static inline double dm_cluster_bwd_efficiency(const dm_cluster *c)
{
    return c->bwd_efficiency > 0 ? c->bwd_efficiency : c->fwd_efficiency;
}

/* Elementwise kinds with an efficiency key: "muon_update" -> 0, "adamw" -> 1, else -1. */
int dm_cluster_elem_index(const char *name);

/* The cluster every command uses when none is given: the mission's target, A800 nodes. */
#define DM_CLUSTER_DEFAULT "a800"

/* A preset name or a file path. A file is read with the line reader's caps (lines.h); a key
 * given twice is refused with its line. */
int dm_cluster_load(const char *name_or_path, dm_cluster *out, dm_err *err);
/* Preset names, NULL-terminated. */
const char *const *dm_cluster_presets(void);

/* Placement: rank r lives on node r / gpus_per_node; its nearest NIC is the local index spread
 * evenly over the node's NICs (A800: GPUs 0,1 -> NIC 0, ...). -1 when the node has no NIC. */
int dm_cluster_node_of(const dm_cluster *c, int rank);
int dm_cluster_nic_of(const dm_cluster *c, int rank);
/* Nodes needed for n ranks. */
int dm_cluster_nodes(const dm_cluster *c, int nranks);
/* The resolved-configuration printout: the GPU, links and latencies, the GEMM efficiencies, then
 * one line "  param       KEY = VALUE UNIT: DOC" for every other table key whose value differs
 * from its default, and the source. */
void dm_cluster_describe(const dm_cluster *c, FILE *f);

/* ---- the parameter table ------------------------------------------------------------------- */

/* DM_PARAM_CHOICE: one of the names listed in `unit`, '|'-separated; the field is an int, the
 * name's index. */
typedef enum { DM_PARAM_NUM, DM_PARAM_INT, DM_PARAM_TEXT, DM_PARAM_GPU, DM_PARAM_CHOICE } dm_param_type;

enum {
    DM_PARAM_FILE = 1,  /* a cluster file may set it */
    DM_PARAM_CALIB = 2, /* a calibration file may set it (dmuon calibrate fits it) */
    DM_PARAM_SHOWN = 4  /* dm_cluster_describe shows it in its summary lines */
};

typedef struct dm_param {
    const char *key;    /* as written in the files: "fwd_efficiency", "busbw_scale.reduce" */
    dm_param_type type;
    int flags;          /* DM_PARAM_* */
    long offset;        /* of its dm_cluster field (a double, an int, the name or the gpu
                           pointer); -1: no field of its own (the reader combines it) */
    double scale;       /* field = value x scale (e.g. GB/s -> bytes/s: 1e9) */
    const char *unit;   /* "us", "GB/s", "" for a fraction or a count */
    double lo, hi;      /* accepted range of a number, in the key's unit */
    double def;         /* the value when not given (a value outside [lo, hi]: "not set") */
    const char *doc;    /* one line */
} dm_param;

int dm_param_count(void);
const dm_param *dm_param_at(int i);        /* NULL outside [0, count) */
const dm_param *dm_param_find(const char *key); /* NULL when unknown */

/* Parse a number for p (in range; an integer for DM_PARAM_INT). On error: "FILE:LINE:COL:
 * expected KEY to be a number in [lo, hi], found 'VAL'" (path, line, col as given). */
int dm_param_parse(const dm_param *p, const char *val, double *out, const char *path, int line, int col,
                   dm_err *err);
/* Numeric keys: set p's field of c from a value in the key's unit, and read it back. */
void dm_param_set(const dm_param *p, dm_cluster *c, double v);
double dm_param_get(const dm_param *p, const dm_cluster *c);

/* The keys whose flags include `flags`, for an unknown-key message: "name, gpu, ...,
 * busbw_scale.{broadcast|reduce|...}, ..." (a family of dotted keys written once). Returns buf. */
const char *dm_param_list(int flags, char *buf, size_t size);

#endif
