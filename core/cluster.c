/* cluster.c: the GPU catalogue (datasheet numbers from shared/reference/README.md) and the
 * cluster presets and file reader (format in cluster.h). */
#define _GNU_SOURCE
#include "cluster.h"

#include "lines.h"
#include "program.h"

#include <errno.h>
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#define MIB 1048576.0
static const dm_gpu gpus[] = {
    /* name, short, dense bf16 FLOP/s, HBM B/s, launch floor us, memory (the total CUDA and
     * nvidia-smi report for the datasheet's 80 GB, 80 GB and 141 GB: 81920, 81559 and 143771 MiB) */
    {"NVIDIA A800-SXM4-80GB", "A800-SXM4-80GB", 312e12, 2.039e12, 4.0, 81920 * MIB},
    {"NVIDIA H100 80GB HBM3", "H100-SXM", 989e12, 3.35e12, 4.0, 81559 * MIB},
    {"NVIDIA H200", "H200-SXM", 989e12, 4.8e12, 4.0, 143771 * MIB},
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
     what ": fraction of HBM bandwidth reached, time = launch + bytes / (it x HBM) (default: the kernel table)"}
#define ELEM_LAUNCH(i, kind, what)                                                                     \
    {"elementwise_launch_us." kind, DM_PARAM_NUM, F | C, AT(elem_launch_us[i]), 1, "us", 0, 1e4, 0,     \
     what ": the per-op launch of that time (default: the GPU's launch floor)"}

static const dm_param params[] = {
    {"name", DM_PARAM_TEXT, F | S, AT(name), 1, "", 0, 0, 0, "the cluster's name in reports (default: the file's path)"},
    {"gpu", DM_PARAM_GPU, F | S, AT(gpu), 1, "", 0, 0, 0, "a catalogue GPU: A800-SXM4-80GB, H100-SXM or H200-SXM (required)"},
    {"gpus_per_node", DM_PARAM_INT, F | S, AT(gpus_per_node), 1, "", 1, 1024, 0, "GPUs in a node (required)"},
    {"nvlink_GBps", DM_PARAM_NUM, F | S, AT(nvlink_Bps), 1e9, "GB/s", 0.1, 1e5, 0, "NVLink bandwidth per GPU, each way (required)"},
    {"nics_per_node", DM_PARAM_INT, F | S, AT(nics_per_node), 1, "", 0, 64, 0, "network interfaces in a node"},
    {"nic_Gbps", DM_PARAM_NUM, F | S, -1, 1, "Gb/s", 1, 1e5, 0, "a NIC's line rate, each way (usable: nic_efficiency x it)"},
    {"nic_efficiency", DM_PARAM_NUM, F | S, -1, 1, "", 0.01, 1, 0.94, "the usable fraction of a NIC's line rate"},
    {"nic_usable_Gbps", DM_PARAM_NUM, C | S, AT(nic_Bps), 1e9 / 8, "Gb/s", 1, 1e5, 0,
     "a NIC's usable bandwidth, each way (fitted across nodes)"},
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
    {"ns_time_scale", DM_PARAM_NUM, F | C, AT(ns_time_scale), 1, "", 0.1, 10, 0,
     "NS kernels take this times the kernel table's time (default 1)"},
    {"comm_slowdown", DM_PARAM_NUM, F | C, AT(comm_slowdown), 1, "", 0, 0.95, 0,
     "f: compute runs at (1 - f) of its rate while a collective is in flight on its rank"},
    {"coll_slowdown", DM_PARAM_NUM, F | C, AT(coll_slowdown), 1, "", 0, 0.95, 0,
     "g: a GPU's NVLink carries (1 - g) of its capacity while the GPU computes"},
    {"step_start_us", DM_PARAM_NUM, F | C, AT(step_start_us), 1, "us", 0, 1e6, 0,
     "every rank's first op starts this long after the step's start (executor setup)"},
    {"op_gap_us", DM_PARAM_NUM, F | C, AT(op_gap_us), 1, "us", 0, 1e4, 0,
     "the GPU idles this long between two compute ops of a rank (launches, event records)"},
    {"kernel_gap_us", DM_PARAM_NUM, F | C, AT(kernel_gap_us), 1, "us", 0, 1e3, 0,
     "the GPU idles this long between two kernels inside one forward or backward op (launches it cannot hide)"},
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

/* One "key = value" line of a cluster file into c (nic_Gbps and nic_efficiency into nic[2]). */
static int read_line(const char *path, int line, char *buf, dm_cluster *c, double nic[2], int *seen, dm_err *err)
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
        char list[1024];
        return dm_err_set(err, "%s:%d:%d: unknown key \"%s\" (expected %s)", path, line, (int)(k - buf) + 1, k,
                          dm_param_list(DM_PARAM_FILE, list, sizeof list));
    }
    int i = (int)(p - params);
    if (seen[i])
        return dm_err_set(err, "%s:%d:%d: key \"%s\" given twice (first on line %d)", path, line, (int)(k - buf) + 1, k,
                          seen[i]);
    seen[i] = line;
    double x;
    switch (p->type) {
    case DM_PARAM_TEXT: snprintf(c->name, sizeof c->name, "%s", v); return 0;
    case DM_PARAM_GPU:
        if (!(c->gpu = dm_gpu_find(v)))
            return dm_err_set(err, "%s:%d:%d: expected a known GPU (A800-SXM4-80GB, H100-SXM, H200-SXM), found '%s'", path,
                              line, col, v);
        return 0;
    default:
        if (dm_param_parse(p, v, &x, path, line, col, err)) return -1;
        if (!strcmp(k, "nic_Gbps")) nic[0] = x;
        else if (!strcmp(k, "nic_efficiency")) nic[1] = x;
        else dm_param_set(p, c, x);
        return 0;
    }
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
    double nic[2] = {0, dm_param_find("nic_efficiency")->def};
    char *buf;
    while (!rc && (k = dm_lines_next(in, &buf, NULL, err)) != 0)
        rc = k < 0 ? -1 : read_line(name, dm_lines_number(in), buf, c, nic, seen, err);
    dm_lines_close(in);
    if (rc) return rc;
    if (!c->gpu) return dm_err_set(err, "%s: expected a \"gpu = ...\" line", name);
    if (!c->gpus_per_node) return dm_err_set(err, "%s: expected a \"gpus_per_node = ...\" line", name);
    if (c->nvlink_Bps <= 0) return dm_err_set(err, "%s: expected a \"nvlink_GBps = ...\" line", name);
    c->nic_Bps = nic[0] / 8.0 * 1e9 * nic[1];
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
            c->gpu->mem_bytes / 1073741824.0);
    fprintf(f, "  links       NVLink %.4g GB/s each way per GPU (NCCL bus x %.2f), %d NIC%s x %.4g GB/s usable per node\n",
            c->nvlink_Bps / 1e9, c->nvlink_bus_efficiency, c->nics_per_node, c->nics_per_node == 1 ? "" : "s",
            c->nic_Bps / 1e9);
    fprintf(f, "  latency     base %.3g us, NVLink hop %.3g us, network hop %.3g us\n", c->base_latency_us,
            c->nvlink_latency_us, c->net_latency_us);
    if (c->bwd_efficiency > 0 && c->bwd_efficiency != c->fwd_efficiency)
        fprintf(f, "  fwd/bwd     %.2f / %.2f x peak (efficiency)\n", c->fwd_efficiency, c->bwd_efficiency);
    else
        fprintf(f, "  fwd/bwd     %.2f x peak (efficiency)\n", c->fwd_efficiency);
    for (int i = 0; i < N_PARAMS; i++) { /* the rest of the table: what differs from its default */
        const dm_param *p = &params[i];
        if ((p->flags & DM_PARAM_SHOWN) || p->offset < 0 || !is_numeric(p)) continue;
        double v = dm_param_get(p, c);
        if (v != p->def)
            fprintf(f, "  param       %s = %.6g%s%s: %s\n", p->key, v, p->unit[0] ? " " : "", p->unit, p->doc);
    }
    fprintf(f, "  source      %s\n", c->source);
}
