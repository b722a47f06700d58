/* cluster.c: the GPU catalogue (datasheet numbers from shared/reference/README.md) and the
 * cluster presets and file reader (format in cluster.h). */
#define _GNU_SOURCE
#include "cluster.h"

#include "program.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

static const dm_gpu gpus[] = {
    /* name, short, dense bf16 FLOP/s, HBM B/s, launch floor us */
    {"NVIDIA A800-SXM4-80GB", "A800-SXM4-80GB", 312e12, 2.039e12, 4.0},
    {"NVIDIA H100 80GB HBM3", "H100-SXM", 989e12, 3.35e12, 4.0},
    {"NVIDIA H200", "H200-SXM", 989e12, 4.8e12, 4.0},
};
#define N_GPUS (int)(sizeof gpus / sizeof gpus[0])

int dm_gpu_count(void) { return N_GPUS; }
const dm_gpu *dm_gpu_at(int i) { return i >= 0 && i < N_GPUS ? &gpus[i] : NULL; }

const dm_gpu *dm_gpu_find(const char *name)
{
    for (int i = 0; i < N_GPUS; i++)
        if (!strcasecmp(name, gpus[i].name) || !strcasecmp(name, gpus[i].short_name)) return &gpus[i];
    /* Loose match: "H200" in "NVIDIA H200 NVL" etc. */
    static const char *keys[] = {"A800", "H100", "H200"};
    for (int i = 0; i < N_GPUS; i++)
        if (strcasestr(name, keys[i])) return &gpus[i];
    return NULL;
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
};
#define N_PRESETS (int)(sizeof presets / sizeof presets[0])

const char *const *dm_cluster_presets(void)
{
    static const char *names[N_PRESETS + 1];
    for (int i = 0; i < N_PRESETS; i++) names[i] = presets[i].name;
    names[N_PRESETS] = NULL;
    return names;
}

static void defaults(dm_cluster *c)
{
    memset(c, 0, sizeof *c);
    c->nvlink_latency_us = 0.6; /* NCCL tuning.cc: per-hop NVLink latency, order of 0.6 us */
    c->net_latency_us = 5.0;    /* per network hop, order of a few us */
    c->base_latency_us = 6.8;   /* NCCL base latency of ring/simple, order of 7 us */
    c->fwd_efficiency = 0.45;   /* assumed until calibrated from the executor's GEMM times */
    c->nvlink_bus_efficiency = 0.8; /* file default: between the A800 and H100 measurements */
    for (int i = 0; i < 5; i++) c->busbw_scale[i] = 1;
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
    while (e > s && (e[-1] == ' ' || e[-1] == '\t' || e[-1] == '\n' || e[-1] == '\r')) *--e = 0;
    return s;
}

static int num(const char *path, int line, int col, const char *key, const char *v, double lo,
               double hi, double *out, dm_err *err)
{
    char *end;
    errno = 0;
    double x = strtod(v, &end);
    if (errno || end == v || *end || !isfinite(x) || x < lo || x > hi)
        return dm_err_set(err, "%s:%d:%d: expected %s to be a number in [%g, %g], found '%s'", path,
                          line, col, key, lo, hi, v);
    *out = x;
    return 0;
}

int dm_cluster_load(const char *name, dm_cluster *c, dm_err *err)
{
    for (int i = 0; i < N_PRESETS; i++)
        if (!strcasecmp(name, presets[i].name)) return set_preset(&presets[i], c);
    FILE *f = fopen(name, "r");
    if (!f) {
        char list[256] = "";
        for (int i = 0; i < N_PRESETS; i++)
            snprintf(list + strlen(list), sizeof list - strlen(list), "%s%s", i ? ", " : "", presets[i].name);
        return dm_err_set(err, "unknown cluster \"%s\" (presets: %s; or a file path)", name, list);
    }
    defaults(c);
    snprintf(c->name, sizeof c->name, "%s", name);
    snprintf(c->source, sizeof c->source, "file %s", name);
    char buf[1024];
    int line = 0, rc = 0, have_gpu = 0, have_gpn = 0;
    double nic_eff = 0.94, nic_Gbps = 0;
    while (fgets(buf, sizeof buf, f)) {
        line++;
        char *hash = strchr(buf, '#');
        if (hash) *hash = 0;
        char *s = trim(buf);
        if (!*s) continue;
        char *eq = strchr(s, '=');
        if (!eq) {
            rc = dm_err_set(err, "%s:%d:1: expected \"key = value\"", name, line);
            break;
        }
        *eq = 0;
        char *k = trim(s), *v = trim(eq + 1);
        int col = (int)(v - buf) + 1; /* the value's first character */
        double x = 0;
        if (!strcmp(k, "name")) snprintf(c->name, sizeof c->name, "%s", v);
        else if (!strcmp(k, "gpu")) {
            if (!(c->gpu = dm_gpu_find(v))) { rc = dm_err_set(err, "%s:%d:%d: expected a known GPU (A800-SXM4-80GB, H100-SXM, H200-SXM), found '%s'", name, line, col, v); break; }
            have_gpu = 1;
        } else if (!strcmp(k, "gpus_per_node")) {
            if ((rc = num(name, line, col, k, v, 1, 1024, &x, err))) break;
            if (x != floor(x)) { rc = dm_err_set(err, "%s:%d:%d: expected an integer", name, line, col); break; }
            c->gpus_per_node = (int)x;
            have_gpn = 1;
        } else if (!strcmp(k, "nvlink_GBps")) { if ((rc = num(name, line, col, k, v, 0.1, 1e5, &x, err))) break; c->nvlink_Bps = x * 1e9; }
        else if (!strcmp(k, "nics_per_node")) {
            if ((rc = num(name, line, col, k, v, 0, 64, &x, err))) break;
            if (x != floor(x)) { rc = dm_err_set(err, "%s:%d:%d: expected an integer", name, line, col); break; }
            c->nics_per_node = (int)x;
        }
        else if (!strcmp(k, "nic_Gbps")) { if ((rc = num(name, line, col, k, v, 1, 1e5, &nic_Gbps, err))) break; }
        else if (!strcmp(k, "nic_efficiency")) { if ((rc = num(name, line, col, k, v, 0.01, 1, &nic_eff, err))) break; }
        else if (!strcmp(k, "nvlink_latency_us")) { if ((rc = num(name, line, col, k, v, 0, 1e4, &c->nvlink_latency_us, err))) break; }
        else if (!strcmp(k, "net_latency_us")) { if ((rc = num(name, line, col, k, v, 0, 1e5, &c->net_latency_us, err))) break; }
        else if (!strcmp(k, "base_latency_us")) { if ((rc = num(name, line, col, k, v, 0, 1e5, &c->base_latency_us, err))) break; }
        else if (!strncmp(k, "busbw_scale.", 12)) {
            int kind = -1;
            for (int i = 0; i < 5; i++)
                if (!strcmp(k + 12, dm_op_kind_name((dm_op_kind)(DM_OP_BROADCAST + i)))) kind = i;
            if (kind < 0) { rc = dm_err_set(err, "%s:%d:13: expected busbw_scale.KIND with KIND broadcast, reduce, all-reduce, all-gather or reduce-scatter, found \"%s\"", name, line, k); break; }
            if ((rc = num(name, line, col, k, v, 0.01, 100, &c->busbw_scale[kind], err))) break;
        }
        else if (!strcmp(k, "nvlink_bus_efficiency")) { if ((rc = num(name, line, col, k, v, 0.01, 1, &c->nvlink_bus_efficiency, err))) break; }
        else if (!strcmp(k, "fwd_efficiency")) { if ((rc = num(name, line, col, k, v, 0.01, 1, &c->fwd_efficiency, err))) break; }
        else if (!strcmp(k, "bwd_efficiency")) { if ((rc = num(name, line, col, k, v, 0.01, 1, &c->bwd_efficiency, err))) break; }
        else if (!strcmp(k, "ns_time_scale")) { if ((rc = num(name, line, col, k, v, 0.1, 10, &c->ns_time_scale, err))) break; }
        else if (!strcmp(k, "comm_slowdown")) { if ((rc = num(name, line, col, k, v, 0, 0.95, &c->comm_slowdown, err))) break; }
        else if (!strcmp(k, "coll_slowdown")) { if ((rc = num(name, line, col, k, v, 0, 0.95, &c->coll_slowdown, err))) break; }
        else if (!strcmp(k, "step_start_us")) { if ((rc = num(name, line, col, k, v, 0, 1e6, &c->step_start_us, err))) break; }
        else if (!strcmp(k, "op_gap_us")) { if ((rc = num(name, line, col, k, v, 0, 1e4, &c->op_gap_us, err))) break; }
        else if (!strncmp(k, "elementwise_efficiency.", 23)) {
            int e = dm_cluster_elem_index(k + 23);
            if (e < 0) { rc = dm_err_set(err, "%s:%d:24: expected elementwise_efficiency.KIND with KIND adamw or muon_update, found \"%s\"", name, line, k); break; }
            if ((rc = num(name, line, col, k, v, 0.001, 1, &c->elem_efficiency[e], err))) break;
        }
        else if (!strncmp(k, "elementwise_launch_us.", 22)) {
            int e = dm_cluster_elem_index(k + 22);
            if (e < 0) { rc = dm_err_set(err, "%s:%d:23: expected elementwise_launch_us.KIND with KIND adamw or muon_update, found \"%s\"", name, line, k); break; }
            if ((rc = num(name, line, col, k, v, 0, 1e4, &c->elem_launch_us[e], err))) break;
        }
        else { rc = dm_err_set(err, "%s:%d:1: unknown key \"%s\" (expected name, gpu, gpus_per_node, nvlink_GBps, nics_per_node, nic_Gbps, nic_efficiency, *_latency_us, fwd_efficiency, bwd_efficiency, nvlink_bus_efficiency, busbw_scale.KIND, elementwise_efficiency.KIND, elementwise_launch_us.KIND, ns_time_scale, comm_slowdown, coll_slowdown, step_start_us, op_gap_us)", name, line, k); break; }
    }
    fclose(f);
    if (rc) return rc;
    if (!have_gpu) return dm_err_set(err, "%s: expected a \"gpu = ...\" line", name);
    if (!have_gpn) return dm_err_set(err, "%s: expected a \"gpus_per_node = ...\" line", name);
    if (c->nvlink_Bps <= 0) return dm_err_set(err, "%s: expected a \"nvlink_GBps = ...\" line", name);
    c->nic_Bps = nic_Gbps / 8.0 * 1e9 * nic_eff;
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
    fprintf(f, "  cluster     %s: %s, %d GPUs/node, %.3g TFLOP/s bf16, %.3g TB/s HBM\n", c->name,
            c->gpu->short_name, c->gpus_per_node, c->gpu->bf16_flops / 1e12, c->gpu->hbm_Bps / 1e12);
    fprintf(f, "  links       NVLink %.4g GB/s each way per GPU (NCCL bus x %.2f), %d NIC%s x %.4g GB/s usable per node\n",
            c->nvlink_Bps / 1e9, c->nvlink_bus_efficiency, c->nics_per_node, c->nics_per_node == 1 ? "" : "s",
            c->nic_Bps / 1e9);
    fprintf(f, "  latency     base %.3g us, NVLink hop %.3g us, network hop %.3g us\n", c->base_latency_us,
            c->nvlink_latency_us, c->net_latency_us);
    int scaled = 0;
    for (int i = 0; i < 5; i++) scaled |= c->busbw_scale[i] != 1;
    if (scaled) {
        fprintf(f, "  busbw       inside a node, relative to all-reduce:");
        for (int i = 0; i < 5; i++)
            fprintf(f, " %s %.3g", dm_op_kind_name((dm_op_kind)(DM_OP_BROADCAST + i)), c->busbw_scale[i]);
        fprintf(f, "\n");
    }
    if (c->bwd_efficiency > 0 && c->bwd_efficiency != c->fwd_efficiency)
        fprintf(f, "  fwd/bwd     %.2f / %.2f x peak (efficiency)\n", c->fwd_efficiency, c->bwd_efficiency);
    else
        fprintf(f, "  fwd/bwd     %.2f x peak (efficiency)\n", c->fwd_efficiency);
    if (c->elem_efficiency[0] > 0 || c->elem_efficiency[1] > 0)
        fprintf(f, "  elementwise muon-update %.3g, adamw %.3g x HBM bandwidth (0: kernel table)\n", c->elem_efficiency[0],
                c->elem_efficiency[1]);
    if (c->ns_time_scale > 0 && c->ns_time_scale != 1)
        fprintf(f, "  ns          %.3g x the kernel table's time\n", c->ns_time_scale);
    if (c->comm_slowdown > 0)
        fprintf(f, "  overlap     compute at %.3g x its rate while a collective is in flight on the rank\n",
                1 - c->comm_slowdown);
    if (c->coll_slowdown > 0)
        fprintf(f, "  overlap     collectives at %.3g x the NVLink bandwidth of a GPU while it computes\n",
                1 - c->coll_slowdown);
    if (c->step_start_us > 0) fprintf(f, "  step start  first ops %.4g us after the step's start (executor setup)\n", c->step_start_us);
    if (c->op_gap_us > 0) fprintf(f, "  op gap      %.4g us idle between two compute ops of a rank (launches, events)\n", c->op_gap_us);
    fprintf(f, "  source      %s\n", c->source);
}
