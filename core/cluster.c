/* cluster.c: the GPU catalogue (datasheet numbers, sources below), GPUs described by their
 * numbers, and the cluster presets and file reader (format in cluster.h). */
#define _GNU_SOURCE
#include "cluster.h"

#include "lines.h"
#include "program.h"

#include <errno.h>
#include <math.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#define GIB 1073741824.0
#define MIB 1048576.0
/* Dense (not sparse) tensor-core rates, HBM bandwidth and capacity from NVIDIA's datasheets
 * (shared/reference/README.md holds the A800, H100 and H200 rows):
 *  - A100 SXM4 80GB (A100 datasheet): BF16 and FP16 Tensor Core 312 TFLOPS (624 with sparsity),
 *    HBM2e 80GB at 2,039 GB/s;
 *  - A800 SXM4 80GB (A800 datasheet): the A100's 312 TFLOPS and 2,039 GB/s, 80GB (NVLink 400
 *    GB/s instead of 600);
 *  - H100 SXM (H100 datasheet): BF16 and FP16 Tensor Core 1,979 TFLOPS with sparsity, 989 dense
 *    (half, rounded down as this table always had it), HBM3 80GB at 3.35 TB/s;
 *  - H200 SXM (H200 datasheet): the H100's 1,979 / 989 TFLOPS, HBM3e 141GB at 4.8 TB/s;
 *  - B200 (HGX B200 datasheet, the 1,000 W HGX part): FP16/BF16 Tensor Core 4.5 PFLOPS with
 *    sparsity, 2.25 dense; HBM3e 8 TB/s; 180GB (DGX B200: 1,440GB over 8 GPUs).
 * Capacities: the total CUDA and nvidia-smi report for the datasheet's size (A100/A800 80GB:
 * 81920 MiB, H100 80GB: 81559 MiB, H200 141GB: 143771 MiB); B200: the datasheet's 180GB taken as
 * GiB (not measured here). Launch floor: 4 us for every GPU (not a datasheet number).
 * SMs and boost clock (what the projection of measured kernel times scales their SM-bound part
 * by, dm_costs): A100/A800 108 SMs at 1410 MHz (NVIDIA A100 Tensor Core GPU Architecture
 * whitepaper; the A800 is the A100 with NVLink limited); H100 SXM5 132 SMs (NVIDIA H100 Tensor
 * Core GPU Architecture whitepaper) at 1980 MHz (the top SM clock nvidia-smi gives on the H100
 * here, traces/device/h100proj-2026-12-05); H200 the same GH100 chip, 132 SMs at 1980 MHz (the top
 * SM clock read on the H200 here, traces/device/clockprobe2-2026-12-05); B200: not known here (0:
 * its projection scales by the datasheet ratios alone). */
static const dm_gpu gpus[] = {
    /* name, short, dense bf16 FLOP/s, HBM B/s, launch floor us, dense fp16 FLOP/s, HBM bytes, SMs, boost MHz */
    {"NVIDIA A800-SXM4-80GB", "A800-SXM4-80GB", 312e12, 2.039e12, 4.0, 312e12, 81920 * MIB, 108, 1410},
    {"NVIDIA H100 80GB HBM3", "H100-SXM", 989e12, 3.35e12, 4.0, 989e12, 81559 * MIB, 132, 1980},
    {"NVIDIA H200", "H200-SXM", 989e12, 4.8e12, 4.0, 989e12, 143771 * MIB, 132, 1980},
    {"NVIDIA A100-SXM4-80GB", "A100-SXM4-80GB", 312e12, 2.039e12, 4.0, 312e12, 81920 * MIB, 108, 1410},
    {"NVIDIA B200", "B200-SXM", 2250e12, 8.0e12, 4.0, 2250e12, 180 * GIB, 0, 0},
};
#define N_GPUS (int)(sizeof gpus / sizeof gpus[0])

int dm_gpu_count(void) { return N_GPUS; }
double dm_gpu_sm_rate(const dm_gpu *g) { return g && g->sms > 0 && g->sm_mhz > 0 ? g->sms * g->sm_mhz : 0; }
const dm_gpu *dm_gpu_at(int i) { return i >= 0 && i < N_GPUS ? &gpus[i] : NULL; }
int dm_gpu_is_catalogued(const dm_gpu *g) { return g >= gpus && g < gpus + N_GPUS; }

/* GPUs described by their numbers: slots filled once, published by `ready` (release), never
 * freed; a slot is claimed by the counter, so concurrent loads never share one. */
#define N_DESCRIBED 256
typedef struct described {
    dm_gpu g;
    char name[64];
    atomic_int ready;
} described;
static described desc[N_DESCRIBED];
static atomic_int n_desc;

static const dm_gpu *find_described(const char *name, const dm_gpu *same)
{
    int n = atomic_load(&n_desc);
    for (int i = 0; i < n && i < N_DESCRIBED; i++) {
        if (!atomic_load_explicit(&desc[i].ready, memory_order_acquire)) continue;
        const dm_gpu *g = &desc[i].g;
        if (name && !strcasecmp(name, g->name)) return g;
        if (same && !strcmp(same->name, g->name) && same->bf16_flops == g->bf16_flops &&
            same->fp16_flops == g->fp16_flops && same->hbm_Bps == g->hbm_Bps && same->mem_bytes == g->mem_bytes &&
            same->launch_us == g->launch_us && same->sms == g->sms && same->sm_mhz == g->sm_mhz)
            return g;
    }
    return NULL;
}

const dm_gpu *dm_gpu_find(const char *name)
{
    for (int i = 0; i < N_GPUS; i++)
        if (!strcasecmp(name, gpus[i].name) || !strcasecmp(name, gpus[i].short_name)) return &gpus[i];
    /* Loose match: "H200" in "NVIDIA H200 NVL" etc. */
    static const char *keys[N_GPUS] = {"A800", "H100", "H200", "A100", "B200"};
    for (int i = 0; i < N_GPUS; i++)
        if (strcasestr(name, keys[i])) return &gpus[i];
    return find_described(name, NULL);
}

const dm_gpu *dm_gpu_intern(const dm_gpu *spec, dm_err *err)
{
    dm_gpu g = *spec;
    char name[64];
    snprintf(name, sizeof name, "%s", spec->name ? spec->name : spec->short_name ? spec->short_name : "custom GPU");
    g.name = g.short_name = name;
    for (int i = 0; i < N_GPUS; i++)
        if (!strcmp(gpus[i].name, name) || !strcmp(gpus[i].short_name, name)) {
            const dm_gpu *c = &gpus[i];
            if (c->bf16_flops == g.bf16_flops && c->fp16_flops == g.fp16_flops && c->hbm_Bps == g.hbm_Bps &&
                c->mem_bytes == g.mem_bytes && c->launch_us == g.launch_us && c->sms == g.sms && c->sm_mhz == g.sm_mhz)
                return c;
        }
    const dm_gpu *old = find_described(NULL, &g);
    if (old) return old;
    int i = atomic_fetch_add(&n_desc, 1);
    if (i >= N_DESCRIBED) {
        dm_err_set(err, "more than %d different GPU descriptions in one process", N_DESCRIBED);
        return NULL;
    }
    described *d = &desc[i];
    snprintf(d->name, sizeof d->name, "%s", name);
    d->g = g;
    d->g.name = d->g.short_name = d->name;
    atomic_store_explicit(&d->ready, 1, memory_order_release);
    return &d->g;
}

const char *dm_fabric_name(int fabric)
{
    return fabric == DM_FABRIC_RAIL ? "rail" : fabric == DM_FABRIC_FATTREE ? "fattree" : "nonblocking";
}

typedef struct {
    const char *name, *gpu;
    int gpn;
    double nvlink_GBps;
    int nics;
    double nic_Gbps;
    double bus_eff; /* measured NCCL intra-node all-reduce bus bandwidth / NVLink rate */
    double scale[5]; /* measured busbw per collective / all-reduce's (0: not measured) */
    const char *source;
    double fwd_eff;  /* measured forward/backward efficiency (0: the assumed default) */
} preset;

/* NIC usable rate: HDR 200 Gb/s gives about 23.5 GB/s usable (0.94 of line rate); NDR likewise. */
static const preset presets[] = {
    {"a100", "A100-SXM4-80GB", 8, 300, 8, 200, 0.75, {0},
     "DGX A100 node: NVLink 3 600 GB/s per GPU (300 GB/s each way); 8 x HDR 200 Gb/s compute NICs (A100 and DGX A100 datasheets); NVLink bus efficiency 0.75 taken from A800's measured 150 / 200 GB/s (same NVLink 3)", 0},
    {"a800", "A800-SXM4-80GB", 8, 200, 4, 200, 0.75, {0},
     "A800 node: NVLink 3 limited to 200 GB/s each way per GPU; 4 x HDR 200 Gb/s NICs (reference/README.md); NVLink bus efficiency 0.75 = measured NCCL all-reduce busbw 150 / 200 GB/s", 0},
    {"h100", "H100-SXM", 8, 450, 8, 400, 0.82, {0},
     "H100 SXM node: NVLink 4 450 GB/s each way; 8 x NDR 400 Gb/s NICs (reference/README.md); NVLink bus efficiency 0.82 = measured NCCL ring busbw 370 / 450 GB/s", 0},
    {"h200", "H200-SXM", 8, 450, 8, 400, 0.82, {0},
     "H200 SXM node: NVLink 4 450 GB/s each way; 8 x NDR 400 Gb/s NICs (reference/README.md); NVLink bus efficiency 0.82 taken from H100's measured 370 / 450 GB/s (same NVLink 4)", 0},
    /* sim/calib_h200x2.txt at 1 GiB: busbw broadcast 365, reduce 370, all-reduce 333, all-gather
     * 271, reduce-scatter 269 GB/s. */
    {"h200x2", "H200-SXM", 2, 450, 1, 400, 0.74, {365 / 333.0, 370 / 333.0, 1, 271 / 333.0, 269 / 333.0},
     "2 x H200 here (NV18, 450 GB/s each way); busbw measured here (sim/calib_h200x2.txt): all-reduce 333 GB/s = 0.74 x 450; fwd/bwd efficiency 0.41 measured by dmuon run (real/runs/h200x2-1)",
     /* forward + backward GPU time of the executor's Llama-3.2-3B proxy step (4096 tokens per
      * rank) over the model's FLOPs at the bf16 datasheet peak: dmuon 0.395, adamw 0.414,
      * muon-ddp 0.410 (real/runs/h200x2-1/README.md, measured vs simulated at 0.45). */
     0.41},
    {"b200", "B200-SXM", 8, 900, 8, 400, 0.82, {0},
     "DGX B200 node: NVLink 5 1.8 TB/s per GPU (900 GB/s each way); 8 x ConnectX-7 400 Gb/s compute NICs (DGX B200 datasheet); NVLink bus efficiency 0.82 taken from H100's measured 370 / 450 GB/s (not measured on NVLink 5)", 0},
};
#define N_PRESETS (int)(sizeof presets / sizeof presets[0])

const char *const *dm_cluster_presets(void)
{
    static const char *names[N_PRESETS + 1];
    for (int i = 0; i < N_PRESETS; i++) names[i] = presets[i].name;
    names[N_PRESETS] = NULL;
    return names;
}

/* ---- the parameter table ------------------------------------------------------------------- */

#define F DM_PARAM_FILE
#define C DM_PARAM_CALIB
#define S DM_PARAM_SHOWN
#define AT(field) ((long)offsetof(dm_cluster, field))
#define BUSBW(i, kind) \
    {"busbw_scale." kind, DM_PARAM_NUM, F | C, AT(busbw_scale[i]), 1, "", 0.01, 10, 1, \
     kind "'s bus bandwidth inside a node / all-reduce's"}
#define ELEM_EFF(i, kind, what)                                                                        \
    {"elementwise_efficiency." kind, DM_PARAM_NUM, F | C, AT(elem_efficiency[i]), 1, "", 0.001, 1, 0,  \
     what ": fraction of HBM bandwidth reached, time = tensors x launch + bytes / (it x HBM) (default: the kernel table)"}
#define ELEM_OP(i, kind, what)                                                                         \
    {"elementwise_op_us." kind, DM_PARAM_NUM, F | C, AT(elem_op_us[i]), 1, "us", 0, 1e4, 0,             \
     what " priced from the kernel table: the executor's time per op beyond its tensors' rows (default 0)"}
#define ELEM_LAUNCH(i, kind, what)                                                                     \
    {"elementwise_launch_us." kind, DM_PARAM_NUM, F | C, AT(elem_launch_us[i]), 1, "us", 0, 1e4, 0,     \
     what ": the per-tensor launch of that time (the executor updates an op's tensors one by one; default: the GPU's launch floor)"}

/* The two compute streams' sharing of a GPU (compute-lo beside compute), measured on one H200:
 * dmuon on one GPU with the optimizer after the backward and on compute-lo beside it, five
 * models (Llama-3.2-3B, Qwen2.5-1.5B and 0.5B, Moonlight-16B-A3B cut to 6 layers, WALL-OSS),
 * each op's time alone against its time beside the other stream, pooled by least squares
 * (dmuon calibrate --lo-stream on the pairs of traces/device/lostream-2026-12-03,
 * lo_calibrate.txt): 158 backward ops 0.687, 371 optimizer ops 0.304. Per model 0.45-0.88 and
 * 0.15-0.60; the throughput the two keep together (rate x roofline share alone, summed) is
 * 0.61-0.64 of the GPU's on every model. A calibration file may refit them. */
#define LO_MAIN_RATE 0.687
#define LO_RATE 0.304

static const dm_param params[] = {
    {"name", DM_PARAM_TEXT, F | S, AT(name), 1, "", 0, 0, 0, "the cluster's name in reports (default: the file's path)"},
    {"gpu", DM_PARAM_GPU, F | S, AT(gpu), 1, "", 0, 0, 0,
     "a catalogue GPU: A100-SXM4-80GB, A800-SXM4-80GB, H100-SXM, H200-SXM or B200-SXM (required unless gpu_bf16_tflops and gpu_hbm_GBps describe one)"},
    /* A GPU by its numbers (the reader combines them into one dm_gpu: dm_gpu_intern). */
    {"gpu_name", DM_PARAM_TEXT, F, -1, 1, "", 0, 0, 0, "the described GPU's name (default: the catalogue GPU's, else \"custom GPU\")"},
    {"gpu_bf16_tflops", DM_PARAM_NUM, F, -1, 1, "TFLOP/s", 0.1, 1e5, 0, "the GPU's dense bf16 tensor rate (default: the catalogue GPU's)"},
    {"gpu_fp16_tflops", DM_PARAM_NUM, F, -1, 1, "TFLOP/s", 0.1, 1e5, 0, "its dense fp16 tensor rate (default: the catalogue GPU's, else gpu_bf16_tflops)"},
    {"gpu_hbm_GBps", DM_PARAM_NUM, F, -1, 1, "GB/s", 1, 1e6, 0, "its HBM bandwidth (default: the catalogue GPU's)"},
    {"gpu_memory_GiB", DM_PARAM_NUM, F, -1, 1, "GiB", 0.1, 1e5, 0, "its HBM capacity (default: the catalogue GPU's, else not known)"},
    {"gpu_launch_us", DM_PARAM_NUM, F, -1, 1, "us", 0, 1e4, 0, "its kernel launch floor (default: the catalogue GPU's, else 4)"},
    {"gpu_sms", DM_PARAM_INT, F, -1, 1, "", 1, 1e4, 0, "its streaming multiprocessors (default: the catalogue GPU's, else not known)"},
    {"gpu_sm_MHz", DM_PARAM_NUM, F, -1, 1, "MHz", 1, 1e5, 0,
     "their maximum clock (default: the catalogue GPU's, else not known); with gpu_sms, what a measured table's SM-bound kernel time is projected by"},
    {"gpus_per_node", DM_PARAM_INT, F | S, AT(gpus_per_node), 1, "", 1, 1024, 0, "GPUs in a node (required)"},
    {"nvlink_GBps", DM_PARAM_NUM, F | S, AT(nvlink_Bps), 1e9, "GB/s", 0.1, 1e5, 0, "NVLink bandwidth per GPU, each way (required)"},
    {"nics_per_node", DM_PARAM_INT, F | S, AT(nics_per_node), 1, "", 0, 64, 0, "network interfaces in a node"},
    {"nic_Gbps", DM_PARAM_NUM, F | S, -1, 1, "Gb/s", 1, 1e5, 0, "a NIC's line rate, each way (usable: nic_efficiency x it)"},
    {"nic_efficiency", DM_PARAM_NUM, F | S, -1, 1, "", 0.01, 1, 0.94, "the usable fraction of a NIC's line rate"},
    {"nic_usable_Gbps", DM_PARAM_NUM, C | S, AT(nic_Bps), 1e9 / 8, "Gb/s", 1, 1e5, 0,
     "a NIC's usable bandwidth, each way (fitted across nodes)"},
    {"nics_per_gpu", DM_PARAM_INT, F, -1, 1, "", 1, 8, 0, "NICs per GPU, instead of nics_per_node (= it x gpus_per_node)"},
    /* The fabric between nodes (collcost.h models it). */
    {"fabric", DM_PARAM_CHOICE, F | S, AT(fabric), 1, "nonblocking|rail|fattree", 0, 0, 0,
     "between nodes: nonblocking (one non-blocking core), rail (NIC k of every node of a leaf group on rail switch k; other traffic through the spine) or fattree (a leaf's nodes on its leaf switch)"},
    {"nodes_per_leaf", DM_PARAM_INT, F | S, AT(nodes_per_leaf), 1, "", 1, 1e6, 0,
     "nodes under one leaf switch (rail: a leaf group, one rail switch per NIC index); required by rail and fattree"},
    {"leaves_per_pod", DM_PARAM_INT, F | S, AT(leaves_per_pod), 1, "", 0, 1e6, 0,
     "leaves under one spine block (pod), whose uplinks to the core are a second level (0: one spine over every leaf)"},
    {"oversubscription.leaf", DM_PARAM_NUM, F | S, AT(oversub[0]), 1, "", 1, 1024, 1,
     "a leaf switch's downlink / uplink bandwidth (2: 2:1)"},
    {"oversubscription.spine", DM_PARAM_NUM, F | S, AT(oversub[1]), 1, "", 1, 1024, 1,
     "a pod's downlink / uplink bandwidth to the core (needs leaves_per_pod)"},
    {"base_latency_us", DM_PARAM_NUM, F | C | S, AT(base_latency_us), 1, "us", 0, 1e5, 6.8,
     "NCCL's base latency of a collective (ring/simple: about 7 us)"},
    {"nvlink_latency_us", DM_PARAM_NUM, F | C | S, AT(nvlink_latency_us), 1, "us", 0, 1e4, 0.6,
     "latency per NVLink hop (NCCL's tuning: about 0.6 us)"},
    {"net_latency_us", DM_PARAM_NUM, F | C | S, AT(net_latency_us), 1, "us", 0, 1e5, 5.0, "latency per network hop"},
    {"nvlink_bus_efficiency", DM_PARAM_NUM, F | C | S, AT(nvlink_bus_efficiency), 1, "", 0.01, 1, 0.8,
     "NCCL all-reduce bus bandwidth inside a node / nvlink_GBps"},
    {"fwd_efficiency", DM_PARAM_NUM, F | C | S, AT(fwd_efficiency), 1, "", 0.01, 1, 0.45,
     "achieved fraction of the GPU's dense bf16 rate for forward GEMMs"},
    {"bwd_efficiency", DM_PARAM_NUM, F | C | S, AT(bwd_efficiency), 1, "", 0.01, 1, 0,
     "the same for backward GEMMs (default: fwd_efficiency)"},
    BUSBW(0, "broadcast"),
    BUSBW(1, "reduce"),
    BUSBW(2, "all-reduce"),
    BUSBW(3, "all-gather"),
    BUSBW(4, "reduce-scatter"),
    ELEM_EFF(0, "muon_update", "Muon updates"),
    ELEM_EFF(1, "adamw", "AdamW"),
    ELEM_LAUNCH(0, "muon_update", "Muon updates"),
    ELEM_LAUNCH(1, "adamw", "AdamW"),
    ELEM_OP(0, "muon_update", "Muon updates"),
    ELEM_OP(1, "adamw", "AdamW"),
    {"ns_time_scale", DM_PARAM_NUM, F | C, AT(ns_time_scale), 1, "", 0.1, 10, 0,
     "NS kernels take this times the kernel table's time (default 1)"},
    {"comm_slowdown", DM_PARAM_NUM, F | C, AT(comm_slowdown), 1, "", 0, 0.95, 0,
     "f: compute runs at (1 - f s) of its rate while a collective is in flight on its rank, s the op's "
     "memory-bound share of its time (1 for ops without kernels)"},
    {"coll_slowdown", DM_PARAM_NUM, F | C, AT(coll_slowdown), 1, "", 0, 0.95, 0,
     "g: a GPU's NVLink carries (1 - g) of its capacity while the GPU computes"},
    {"lo_main_rate", DM_PARAM_NUM, F | C, AT(lo_main_rate), 1, "", 0.01, 1, LO_MAIN_RATE,
     "while compute-lo (the optimizer beside the backward) runs an op too, the rate of the compute stream's op"},
    {"lo_rate", DM_PARAM_NUM, F | C, AT(lo_rate), 1, "", 0.01, 1, LO_RATE,
     "the rate of compute-lo's op while the compute stream runs one (it runs at full rate alone)"},
    {"step_start_us", DM_PARAM_NUM, F | C, AT(step_start_us), 1, "us", 0, 1e6, 0,
     "every rank's first op starts this long after the step's start (executor setup)"},
    {"op_gap_us", DM_PARAM_NUM, F | C, AT(op_gap_us), 1, "us", 0, 1e4, 0,
     "the GPU idles this long between two compute ops of a rank (launches, event records)"},
    {"graph_gap_us", DM_PARAM_NUM, F | C, AT(graph_gap_us), 1, "us", 0, 1e4, 0,
     "the GPU idles this long after an op launched as a CUDA graph (an NS op not eager) before the next one "
     "(default: op_gap_us)"},
    {"solo_coll_us", DM_PARAM_NUM, F | C, AT(solo_coll_us), 1, "us", 0, 1e4, 0,
     "a one-rank collective (on the compute stream) holds it this long, the idle before it included; "
     "the next compute op then waits op_gap_us"},
    {"staging_efficiency", DM_PARAM_NUM, F | C, AT(staging_efficiency), 1, "", 0.001, 1, 0,
     "the staging copies around reduce-scatters and all-gathers: fraction of HBM bandwidth reached (default: the HBM roofline)"},
    {"staging_launch_us", DM_PARAM_NUM, F | C, AT(staging_launch_us), 1, "us", 0, 1e4, 0,
     "the staging copies: each copy's launch with staging_efficiency (default: the GPU's launch floor)"},
    {"kernel_gap_us", DM_PARAM_NUM, F | C, AT(kernel_gap_us), 1, "us", 0, 1e3, 0,
     "the GPU idles this long between two kernels inside one forward or backward op (launches it cannot hide)"},
    /* The power-limit model (power.h), fitted by dmuon calibrate --power from tools/power_probe.py */
    {"power.limit_w", DM_PARAM_NUM, F | C, AT(power.limit_w), 1, "W", 0, 1e5, 0,
     "the GPU's enforced power limit: compute slows when its filtered full-clock demand is over it (0: full clock)"},
    {"power.gemm_w", DM_PARAM_NUM, F | C, AT(power.gemm_w), 1, "W", 0, 1e5, 0,
     "full-clock power of the reference GEMM (power.ref_tflops)"},
    {"power.copy_w", DM_PARAM_NUM, F | C, AT(power.copy_w), 1, "W", 0, 1e5, 0,
     "full-clock power of HBM copies at power.ref_GBps"},
    {"power.idle_w", DM_PARAM_NUM, F | C, AT(power.idle_w), 1, "W", 0, 1e5, 0, "power of the idle GPU"},
    {"power.slope", DM_PARAM_NUM, F | C, AT(power.slope), 1, "1/W", 0, 1, 0,
     "clock fraction lost per W of filtered demand over the limit"},
    {"power.tau_ms", DM_PARAM_NUM, F | C, AT(power.tau_ms), 1, "ms", 0, 1e5, 0,
     "time constant of the demand the power controller answers"},
    {"power.ref_tflops", DM_PARAM_NUM, F | C, AT(power.ref_flops), 1e12, "TFLOP/s", 0, 1e5, 0,
     "full-clock rate of the reference GEMM (work at this rate demands power.gemm_w)"},
    {"power.ref_GBps", DM_PARAM_NUM, F | C, AT(power.ref_Bps), 1e9, "GB/s", 0, 1e7, 0,
     "full-clock rate of the reference copy, bytes read + written (work at this rate demands power.copy_w)"},
    {"power.activity_exp", DM_PARAM_NUM, F | C, AT(power.activity_exp), 1, "", 0, 1, 0,
     "e: work at a fraction u of the reference GEMM's rate draws u^e of its power over idle (default 1)"},
    {"power.tau_fall_ms", DM_PARAM_NUM, F | C, AT(power.tau_fall_ms), 1, "ms", 0, 1e5, 0,
     "time constant of the demand while it falls, the clock coming back after heavy work (default power.tau_ms)"},
    {"power.hold_ms", DM_PARAM_NUM, F | C, AT(power.hold_ms), 1, "ms", 0, 1e4, 0,
     "how long the filtered demand holds once the demand falls below it, before it falls (default 0)"},
};
#define N_PARAMS (int)(sizeof params / sizeof params[0])

int dm_param_count(void) { return N_PARAMS; }
const dm_param *dm_param_at(int i) { return i >= 0 && i < N_PARAMS ? &params[i] : NULL; }

const dm_param *dm_param_find(const char *key)
{
    for (int i = 0; i < N_PARAMS; i++)
        if (!strcmp(key, params[i].key)) return &params[i];
    return NULL;
}

static int is_numeric(const dm_param *p) { return p->type == DM_PARAM_NUM || p->type == DM_PARAM_INT; }

void dm_param_set(const dm_param *p, dm_cluster *c, double v)
{
    if (p->offset < 0 || !is_numeric(p)) return;
    char *field = (char *)c + p->offset;
    if (p->type == DM_PARAM_INT) *(int *)field = (int)v;
    else *(double *)field = v * p->scale;
}

double dm_param_get(const dm_param *p, const dm_cluster *c)
{
    if (p->offset < 0 || !is_numeric(p)) return 0;
    const char *field = (const char *)c + p->offset;
    return p->type == DM_PARAM_INT ? *(const int *)field : *(const double *)field / p->scale;
}

int dm_param_parse(const dm_param *p, const char *val, double *out, const char *path, int line, int col, dm_err *err)
{
    char *end;
    errno = 0;
    double x = strtod(val, &end);
    if (errno || end == val || *end || !isfinite(x) || x < p->lo || x > p->hi)
        return dm_err_set(err, "%s:%d:%d: expected %s to be a number in [%g, %g], found '%s'", path, line, col, p->key,
                          p->lo, p->hi, val);
    if (p->type == DM_PARAM_INT && x != floor(x))
        return dm_err_set(err, "%s:%d:%d: expected %s to be an integer, found '%s'", path, line, col, p->key, val);
    *out = x;
    return 0;
}

const char *dm_param_list(int flags, char *buf, size_t size)
{
    size_t k = 0;
    buf[0] = 0;
    for (int i = 0; i < N_PARAMS; i++) {
        if ((params[i].flags & flags) != flags) continue;
        const char *dot = strchr(params[i].key, '.');
        int plen = dot ? (int)(dot - params[i].key) : -1;
        int family = dot && i > 0 && !strncmp(params[i - 1].key, params[i].key, (size_t)plen + 1) &&
                     (params[i - 1].flags & flags) == flags;
        int last = !dot || i + 1 == N_PARAMS || strncmp(params[i + 1].key, params[i].key, (size_t)plen + 1);
        if (!dot) k += (size_t)snprintf(buf + k, k < size ? size - k : 0, "%s%s", k ? ", " : "", params[i].key);
        else if (!family)
            k += (size_t)snprintf(buf + k, k < size ? size - k : 0, "%s%.*s{%s%s", k ? ", " : "", plen + 1,
                                  params[i].key, dot + 1, last ? "}" : "");
        else k += (size_t)snprintf(buf + k, k < size ? size - k : 0, "|%s%s", dot + 1, last ? "}" : "");
    }
    return buf;
}

static void defaults(dm_cluster *c)
{
    memset(c, 0, sizeof *c);
    for (int i = 0; i < N_PARAMS; i++) dm_param_set(&params[i], c, params[i].def);
}

static int set_preset(const preset *p, dm_cluster *c)
{
    defaults(c);
    snprintf(c->name, sizeof c->name, "%s", p->name);
    c->gpu = dm_gpu_find(p->gpu);
    c->gpus_per_node = p->gpn;
    c->nvlink_Bps = p->nvlink_GBps * 1e9;
    c->nics_per_node = p->nics;
    c->nic_Bps = p->nic_Gbps / 8.0 * 1e9 * 0.94;
    c->nvlink_bus_efficiency = p->bus_eff;
    if (p->fwd_eff > 0) c->fwd_efficiency = p->fwd_eff;
    for (int i = 0; i < 5; i++)
        if (p->scale[i] > 0) c->busbw_scale[i] = p->scale[i];
    snprintf(c->source, sizeof c->source, "%s", p->source);
    return 0;
}

static char *trim(char *s)
{
    while (*s == ' ' || *s == '\t') s++;
    char *e = s + strlen(s);
    while (e > s && (e[-1] == ' ' || e[-1] == '\t' || e[-1] == '\r')) *--e = 0;
    return s;
}

/* What a cluster file says beside the fields: the NIC rate's parts, NICs per GPU and a GPU's
 * numbers (gpu_*: value in the key's unit, NAN when not given), combined after the last line. */
#define N_GPU_KEYS 7
typedef struct extra {
    double nic_Gbps, nic_eff, nics_per_gpu;
    char gpu_name[64];
    double gpu[N_GPU_KEYS]; /* bf16 TFLOP/s, fp16 TFLOP/s, HBM GB/s, memory GiB, launch us, SMs, SM MHz */
} extra;
static const char *const gpu_keys[N_GPU_KEYS] = {"gpu_bf16_tflops", "gpu_fp16_tflops", "gpu_hbm_GBps", "gpu_memory_GiB",
                                                 "gpu_launch_us", "gpu_sms", "gpu_sm_MHz"};

/* Index of v among the '|'-separated names of `choices` (case-insensitive), or -1. */
static int choice_index(const char *choices, const char *v)
{
    size_t len = strlen(v);
    for (int i = 0; *choices; i++) {
        const char *bar = strchr(choices, '|');
        size_t n = bar ? (size_t)(bar - choices) : strlen(choices);
        if (n == len && !strncasecmp(choices, v, n)) return i;
        if (!bar) break;
        choices = bar + 1;
    }
    return -1;
}

/* One "key = value" line of a cluster file into c (or into x). */
static int read_line(const char *path, int line, char *buf, dm_cluster *c, extra *x, int *seen, dm_err *err)
{
    char *hash = strchr(buf, '#');
    if (hash) *hash = 0;
    char *s = trim(buf);
    if (!*s) return 0;
    char *eq = strchr(s, '=');
    if (!eq) return dm_err_set(err, "%s:%d:%d: expected \"key = value\"", path, line, (int)(s - buf) + 1);
    *eq = 0;
    char *k = trim(s), *v = trim(eq + 1);
    int col = (int)(v - buf) + 1; /* the value's first character */
    const dm_param *p = dm_param_find(k);
    if (!p || !(p->flags & DM_PARAM_FILE)) {
        char list[1536];
        return dm_err_set(err, "%s:%d:%d: unknown key \"%s\" (expected %s)", path, line, (int)(k - buf) + 1, k,
                          dm_param_list(DM_PARAM_FILE, list, sizeof list));
    }
    int i = (int)(p - params);
    if (seen[i])
        return dm_err_set(err, "%s:%d:%d: key \"%s\" given twice (first on line %d)", path, line, (int)(k - buf) + 1, k,
                          seen[i]);
    seen[i] = line;
    double val;
    switch (p->type) {
    case DM_PARAM_TEXT:
        if (!strcmp(k, "gpu_name")) {
            if (!*v || strlen(v) >= sizeof x->gpu_name)
                return dm_err_set(err, "%s:%d:%d: expected a GPU name of 1 to %d characters", path, line, col,
                                  (int)sizeof x->gpu_name - 1);
            snprintf(x->gpu_name, sizeof x->gpu_name, "%s", v);
        } else {
            snprintf(c->name, sizeof c->name, "%s", v);
        }
        return 0;
    case DM_PARAM_GPU:
        if (!(c->gpu = dm_gpu_find(v)) || !dm_gpu_is_catalogued(c->gpu)) {
            char list[256] = "";
            for (int g = 0; g < N_GPUS; g++)
                snprintf(list + strlen(list), sizeof list - strlen(list), "%s%s", g ? ", " : "", gpus[g].short_name);
            c->gpu = NULL;
            return dm_err_set(err, "%s:%d:%d: expected a known GPU (%s; or describe it by gpu_bf16_tflops, gpu_hbm_GBps, ...), found '%s'",
                              path, line, col, list, v);
        }
        return 0;
    case DM_PARAM_CHOICE: {
        int ix = choice_index(p->unit, v);
        if (ix < 0) return dm_err_set(err, "%s:%d:%d: expected %s to be one of %s, found '%s'", path, line, col, k, p->unit, v);
        *(int *)((char *)c + p->offset) = ix;
        return 0;
    }
    default:
        if (dm_param_parse(p, v, &val, path, line, col, err)) return -1;
        if (!strcmp(k, "nic_Gbps")) x->nic_Gbps = val;
        else if (!strcmp(k, "nic_efficiency")) x->nic_eff = val;
        else if (!strcmp(k, "nics_per_gpu")) x->nics_per_gpu = val;
        else if (p->offset >= 0) dm_param_set(p, c, val);
        else
            for (int g = 0; g < N_GPU_KEYS; g++)
                if (!strcmp(k, gpu_keys[g])) x->gpu[g] = val;
        return 0;
    }
}

/* The line a key was given on (0: not given). */
static int line_of(const int *seen, const char *key)
{
    const dm_param *p = dm_param_find(key);
    return p ? seen[p - params] : 0;
}

/* The GPU: the catalogue's (`gpu`), changed or described by the gpu_* keys. */
static int resolve_gpu(const char *path, dm_cluster *c, const extra *x, const int *seen, dm_err *err)
{
    int any = x->gpu_name[0] != 0;
    for (int g = 0; g < N_GPU_KEYS; g++) any |= !isnan(x->gpu[g]);
    if (!any) return c->gpu ? 0 : dm_err_set(err, "%s: expected a \"gpu = ...\" line (or gpu_bf16_tflops and gpu_hbm_GBps)", path);
    const dm_gpu *base = c->gpu;
    if (!base && (isnan(x->gpu[0]) || isnan(x->gpu[2])))
        return dm_err_set(err, "%s: expected gpu_bf16_tflops and gpu_hbm_GBps to describe a GPU not in the catalogue "
                          "(or a \"gpu = ...\" line)", path);
    dm_gpu g = {0};
    char name[64];
    if (base) {
        g = *base;
        snprintf(name, sizeof name, "%.40s (custom numbers)", base->short_name);
    } else {
        g.launch_us = 4.0;
        snprintf(name, sizeof name, "custom GPU");
    }
    if (x->gpu_name[0]) snprintf(name, sizeof name, "%s", x->gpu_name);
    if (!isnan(x->gpu[0])) g.bf16_flops = x->gpu[0] * 1e12;
    if (!isnan(x->gpu[1])) g.fp16_flops = x->gpu[1] * 1e12;
    else if (!base) g.fp16_flops = g.bf16_flops;
    if (!isnan(x->gpu[2])) g.hbm_Bps = x->gpu[2] * 1e9;
    if (!isnan(x->gpu[3])) g.mem_bytes = x->gpu[3] * GIB;
    if (!isnan(x->gpu[4])) g.launch_us = x->gpu[4];
    if (!isnan(x->gpu[5])) g.sms = x->gpu[5];
    if (!isnan(x->gpu[6])) g.sm_mhz = x->gpu[6];
    g.name = g.short_name = name;
    const dm_gpu *same = dm_gpu_intern(&g, err);
    if (!same) { /* the process's table of described GPUs is full: say which file asked */
        char why[sizeof err->msg];
        snprintf(why, sizeof why, "%s", err->msg);
        return dm_err_set(err, "%s: %s", path, why);
    }
    if (!dm_gpu_is_catalogued(same) && x->gpu_name[0]) { /* a name that would find a catalogue GPU */
        const dm_gpu *named = dm_gpu_find(name);
        if (named && dm_gpu_is_catalogued(named))
            return dm_err_set(err, "%s:%d:1: gpu_name \"%s\" names the catalogue's %s, whose numbers differ: give the "
                              "described GPU another name", path, line_of(seen, "gpu_name"), name, named->short_name);
    }
    c->gpu = same;
    return 0;
}

/* The fabric keys agree with each other and with the NICs. */
static int check_fabric(const char *path, const dm_cluster *c, const int *seen, dm_err *err)
{
    static const char *const needs[] = {"nodes_per_leaf", "leaves_per_pod", "oversubscription.leaf",
                                        "oversubscription.spine"};
    if (c->fabric == DM_FABRIC_NONBLOCKING) {
        for (int i = 0; i < 4; i++)
            if (line_of(seen, needs[i]))
                return dm_err_set(err, "%s:%d:1: %s describes switches: it needs \"fabric = rail\" or \"fabric = fattree\"",
                                  path, line_of(seen, needs[i]), needs[i]);
        return 0;
    }
    if (c->nodes_per_leaf < 1)
        return dm_err_set(err, "%s:%d:1: fabric %s needs nodes_per_leaf (nodes under one leaf switch)", path,
                          line_of(seen, "fabric"), dm_fabric_name(c->fabric));
    if (c->nics_per_node < 1)
        return dm_err_set(err, "%s:%d:1: fabric %s needs NICs (nics_per_node or nics_per_gpu)", path, line_of(seen, "fabric"),
                          dm_fabric_name(c->fabric));
    if (line_of(seen, "oversubscription.spine") && c->leaves_per_pod < 1)
        return dm_err_set(err, "%s:%d:1: oversubscription.spine needs leaves_per_pod (leaves under one spine block)", path,
                          line_of(seen, "oversubscription.spine"));
    return 0;
}

/* The power.* keys describe a whole model or none (power.h): a part of one would be ignored. */
static int check_power(const char *path, const dm_cluster *c, const int *seen, dm_err *err)
{
    int first = 0;
    for (int i = 0; i < N_PARAMS; i++)
        if (!strncmp(params[i].key, "power.", 6) && seen[i] && (!first || seen[i] < first)) first = seen[i];
    const char *miss = first ? dm_power_missing(&c->power) : NULL;
    if (!miss) return 0;
    char where[1100]; /* the line of the key at fault: gemm_w when it is there but too low, else the first power key */
    snprintf(where, sizeof where, "%s:%d:1", path,
             !strcmp(miss, "power.gemm_w") && c->power.gemm_w > 0 ? line_of(seen, "power.gemm_w") : first);
    return dm_power_check(&c->power, where, err);
}

int dm_cluster_load(const char *name, dm_cluster *c, dm_err *err)
{
    for (int i = 0; i < N_PRESETS; i++)
        if (!strcasecmp(name, presets[i].name)) return set_preset(&presets[i], c);
    if (access(name, F_OK) != 0) {
        char list[256] = "";
        for (int i = 0; i < N_PRESETS; i++)
            snprintf(list + strlen(list), sizeof list - strlen(list), "%s%s", i ? ", " : "", presets[i].name);
        return dm_err_set(err, "unknown cluster \"%s\" (presets: %s; or a file path)", name, list);
    }
    dm_lines *in = dm_lines_open(name, 4096, 1 << 20, err);
    if (!in) return -1;
    defaults(c);
    snprintf(c->name, sizeof c->name, "%s", name);
    snprintf(c->source, sizeof c->source, "file %s", name);
    int seen[N_PARAMS] = {0}, rc = 0, k;
    extra x = {0, dm_param_find("nic_efficiency")->def, 0, "", {NAN, NAN, NAN, NAN, NAN, NAN, NAN}};
    char *buf;
    while (!rc && (k = dm_lines_next(in, &buf, NULL, err)) != 0)
        rc = k < 0 ? -1 : read_line(name, dm_lines_number(in), buf, c, &x, seen, err);
    dm_lines_close(in);
    if (rc) return rc;
    if (resolve_gpu(name, c, &x, seen, err)) return -1;
    if (!c->gpus_per_node) return dm_err_set(err, "%s: expected a \"gpus_per_node = ...\" line", name);
    if (c->nvlink_Bps <= 0) return dm_err_set(err, "%s: expected a \"nvlink_GBps = ...\" line", name);
    if (x.nics_per_gpu > 0) {
        if (line_of(seen, "nics_per_node"))
            return dm_err_set(err, "%s:%d:1: nics_per_gpu and nics_per_node both given (line %d): give one", name,
                              line_of(seen, "nics_per_gpu"), line_of(seen, "nics_per_node"));
        if (x.nics_per_gpu * c->gpus_per_node > dm_param_find("nics_per_node")->hi)
            return dm_err_set(err, "%s:%d:1: nics_per_gpu x gpus_per_node = %g NICs in a node, more than %g", name,
                              line_of(seen, "nics_per_gpu"), x.nics_per_gpu * c->gpus_per_node,
                              dm_param_find("nics_per_node")->hi);
        c->nics_per_node = (int)x.nics_per_gpu * c->gpus_per_node;
    }
    if (check_fabric(name, c, seen, err)) return -1;
    if (check_power(name, c, seen, err)) return -1;
    c->nic_Bps = x.nic_Gbps / 8.0 * 1e9 * x.nic_eff;
    return 0;
}

int dm_cluster_elem_index(const char *name)
{
    if (!strcmp(name, "muon_update")) return 0;
    if (!strcmp(name, "adamw")) return 1;
    return -1;
}

int dm_cluster_node_of(const dm_cluster *c, int rank) { return rank / c->gpus_per_node; }

int dm_cluster_nic_of(const dm_cluster *c, int rank)
{
    if (c->nics_per_node < 1) return -1;
    return (int)((long)(rank % c->gpus_per_node) * c->nics_per_node / c->gpus_per_node);
}

int dm_cluster_nodes(const dm_cluster *c, int nranks)
{
    return (nranks + c->gpus_per_node - 1) / c->gpus_per_node;
}

void dm_cluster_describe(const dm_cluster *c, FILE *f)
{
    fprintf(f, "  cluster     %s: %s, %d GPUs/node, %.3g TFLOP/s bf16, %.3g TB/s HBM, %.1f GiB\n", c->name,
            c->gpu->short_name, c->gpus_per_node, c->gpu->bf16_flops / 1e12, c->gpu->hbm_Bps / 1e12,
            c->gpu->mem_bytes / GIB);
    if (!dm_gpu_is_catalogued(c->gpu)) {
        fprintf(f, "  gpu         %s, described by the cluster: bf16 %.4g, fp16 %.4g TFLOP/s dense, HBM %.4g GB/s", c->gpu->name,
                c->gpu->bf16_flops / 1e12, c->gpu->fp16_flops / 1e12, c->gpu->hbm_Bps / 1e9);
        if (c->gpu->mem_bytes > 0) fprintf(f, ", %.4g GiB", c->gpu->mem_bytes / GIB);
        fprintf(f, ", launch floor %.3g us", c->gpu->launch_us);
        if (dm_gpu_sm_rate(c->gpu) > 0) fprintf(f, ", %.0f SMs at %.0f MHz", c->gpu->sms, c->gpu->sm_mhz);
        fprintf(f, "\n");
    }
    fprintf(f, "  links       NVLink %.4g GB/s each way per GPU (NCCL bus x %.2f), %d NIC%s x %.4g GB/s usable per node\n",
            c->nvlink_Bps / 1e9, c->nvlink_bus_efficiency, c->nics_per_node, c->nics_per_node == 1 ? "" : "s",
            c->nic_Bps / 1e9);
    if (c->fabric != DM_FABRIC_NONBLOCKING) {
        fprintf(f, "  fabric      %s: %d node%s per leaf%s, leaf uplinks %g:1", c->fabric == DM_FABRIC_RAIL ? "rail-optimized" : "fat tree",
                c->nodes_per_leaf, c->nodes_per_leaf == 1 ? "" : "s",
                c->fabric == DM_FABRIC_RAIL ? " (NIC k of each on rail switch k; other traffic through the spine)" : "",
                c->oversub[0]);
        if (c->leaves_per_pod > 0) fprintf(f, "; %d leaves per pod, pod uplinks %g:1", c->leaves_per_pod, c->oversub[1]);
        fprintf(f, "\n");
    }
    fprintf(f, "  latency     base %.3g us, NVLink hop %.3g us, network hop %.3g us\n", c->base_latency_us,
            c->nvlink_latency_us, c->net_latency_us);
    if (c->bwd_efficiency > 0 && c->bwd_efficiency != c->fwd_efficiency)
        fprintf(f, "  fwd/bwd     %.2f / %.2f x peak (efficiency) where no kernel table prices an op\n", c->fwd_efficiency,
                c->bwd_efficiency);
    else
        fprintf(f, "  fwd/bwd     %.2f x peak (efficiency) where no kernel table prices an op\n", c->fwd_efficiency);
    for (int i = 0; i < N_PARAMS; i++) { /* the rest of the table: what differs from its default */
        const dm_param *p = &params[i];
        if ((p->flags & DM_PARAM_SHOWN) || p->offset < 0 || !is_numeric(p)) continue;
        double v = dm_param_get(p, c);
        if (v != p->def)
            fprintf(f, "  param       %s = %.6g%s%s: %s\n", p->key, v, p->unit[0] ? " " : "", p->unit, p->doc);
    }
    fprintf(f, "  source      %s\n", c->source);
}
