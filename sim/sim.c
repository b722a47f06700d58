/* sim.c: the step-program interpreter on the event engine (model in sim.h). */
#define _POSIX_C_SOURCE 200809L
#include "sim.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "clock.h"
#include "coll.h"
#include "heap.h"
#include "net.h"
#include "phases.h"
#include "sim_links.h"

#define S DM_STREAM__COUNT

enum { EV_OP_DONE, EV_LAT_DONE, EV_FLOW, EV_GPU_FREE, EV_POWER };
/* GPU slots per rank: 0 the compute ops of compute and the comm streams, 1 those of compute-lo */
#define NSLOT 2
#define SLOT(r, k) ((r) * NSLOT + (k))
enum { ST_WAITING, ST_READY, ST_RUNNING, ST_DONE };

typedef struct grp {
    int built;
    int checked, dup; /* its links checked by the network (sim_net_links_check), dup its answer */
    sim_net_memo memo; /* the network's lone rate of its links */
    int nl;
    int *links;
    double *w;
    coll_topo topo;
} grp;

typedef struct coll {
    int n, arrived, last; /* members, arrived so far, last arriving member (gid) */
    int *mem;             /* member gids, in group (rank) order */
    double lat_us, vol;   /* latency term, bus bytes */
    int group;
} coll;

/* A memoized kernel cost: NS (algo 0, 1), an optimizer update (algo -2, -3: elements in m) or
 * a workload kernel (algo KERN_ALGO + kind x DM_KOP__COUNT + op, one launch; extra: its bytes
 * per launch, which a shape alone does not fix for embed-bwd). */
typedef struct ns_key {
    int64_t m, n, k, batch;
    int algo, used;
    double extra;
    double us;
    dm_cost_source src;
} ns_key;

#define KERN_ALGO 100
/* Sources of a forward/backward op's kernels: dm_cost_source, then the efficiency fallback. */
#define KSRC_FALLBACK 4
#define KSRC_N 5

typedef struct sim {
    const dm_program *p;
    const dm_cluster *c;
    sim_opts o;
    int R, T;
    /* A run of shared ranks (sim_shared_ranks): every rank runs rank 0's list, so only rank 0's
     * ops are simulated (Rs = 1, T its ops) and the results stand for every rank; Rs = R
     * otherwise. ev_global: the events that are the cluster's, not a rank's (latency ends, flow
     * ends), which a run of every rank counts once. */
    int Rs, shared, deadlock; /* deadlock: run() ended with ops that never ran */
    int stopped;              /* run() passed o.stop_us with ops left (sim_opts.stop_us), or the
                                 bound at setup did (stop_bound) */
    double bound_us;          /* a lower bound on the step known before any op runs (stop_bound()) */
    int dur_set;              /* dur holds the compute ops' times already (stop_bound()) */
    int64_t ev_global;
    int *off, *rank_of;
    const dm_op **op;
    /* per op, what the engine's hot paths read (kind | stream << 4, the collective id) without
     * touching the op itself (a 112-byte struct, one cache miss each) */
    unsigned char *ks;
    int *coll_of;
    int *deps_left, *cause, *pcause;
    char *state;
    double *dur, *start, *end, *ready;
    int *succ_off, *succ;
    int *sl, *sl_off, *head;
    /* A rank's GPU has two slots (SLOT(r, k)): k = 0 runs the compute ops of its compute and
     * communication streams, one at a time; k = 1 those of compute-lo, beside slot 0 (the two
     * share the GPU by the cluster's lo_main_rate and lo_rate). Per slot: */
    int *gpu_busy, *gpu_last;
    double *gpu_free; /* no compute op of the slot starts before this (its last end + op_gap_us) */
    /* Compute rates (collectives in flight with comm_slowdown f > 0, the power model's clock,
     * the other slot's op): per slot the running compute op, its remaining time at full rate,
     * when that was last brought up to date, its rate, a version that makes superseded
     * completion events stale; per rank the number of collectives in flight. */
    int *gpu_run, *coll_active;
    int has_lo; /* the program has compute-lo ops: slot 1 is used */
    double *gpu_rem, *gpu_t, *gpu_rate;
    uint64_t *gpu_ver;
    /* The power-limit model (cluster power, power.h): per rank the filter's state (the filtered
     * full-clock demand and its hold), when it was last brought up to date and the demand since
     * (the running op's, else idle). The running op's rate holds its clock; EV_POWER re-times it
     * every quarter of the shorter tau. */
    dm_power_st *pw_st; /* the filter's state per rank (power.h) */
    double *pw_t, *pw_P;
    const dm_power_st *pw_st0; /* the state each rank starts the step at (NULL: idle) */
    double nvl_cap[2]; /* NVLink capacity out and in of one GPU (coll_slowdown scales it) */
    coll *colls;
    int *coll_mem;
    grp *grps;
    sim_heap h;
    sim_net *net;
    double now;
    int64_t events, done;
    ns_key *ns_cache;
    int ns_cache_n;
    int ns_src_count[4], ns_ops, elem_src_count[2][6], elem_ops[2];
    /* forward [0] and backward [1] ops with work: each work's time, computed once (shared by
     * every rank); kernels of the works by source; the kernel ops that fell back to the
     * cluster's efficiency; works and ops priced from kernels, ops without work (FLOPs alone) */
    double *work_us[2];
    double *work_mem[2]; /* per work: the share of its time in memory-bound kernels (comm_slowdown) */
    int64_t kern_src_count[2][KSRC_N];
    int grad_check_measured;     /* 1 when the table answered a gradient check (grad-check rows) */
    unsigned char fell_back[2][DM_KERN__COUNT][DM_KOP__COUNT];
    int works_priced[2], ops_with_work[2], ops_without_work[2];
} sim;

static double cpu_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

void sim_opts_default(sim_opts *o)
{
    memset(o, 0, sizeof *o);
    o->algo = COLL_ALGO_AUTO;
}

/* ---- durations ---------------------------------------------------------------------------- */

/* Memo of kernel costs by (m, n, k, batch, algo, extra): a plan repeats a few shapes on every
 * rank, and a table lookup interpolates. Returns the slot (filled when *found), or NULL when
 * crowded. */
static ns_key *cost_slot(sim *s, int64_t m, int64_t n, int64_t kk, int64_t batch, int algo, double extra, int *found,
                         dm_err *err)
{
    *found = 0;
    if (!s->ns_cache) {
        s->ns_cache_n = 4096;
        if (!(s->ns_cache = dm_calloc((size_t)s->ns_cache_n, sizeof *s->ns_cache, err))) return NULL;
    }
    uint64_t h = (uint64_t)m * 1000003u ^ (uint64_t)n * 998244353u ^ (uint64_t)batch * 7919u ^ (uint64_t)(algo + 7) ^
                 (uint64_t)kk * 2654435761u ^ (uint64_t)llround(extra);
    for (int i = 0; i <= 64; i++) {
        ns_key *k = &s->ns_cache[(h + (uint64_t)i) % (uint64_t)s->ns_cache_n];
        if (k->used && k->m == m && k->n == n && k->k == kk && k->batch == batch && k->algo == algo && k->extra == extra) {
            *found = 1;
            return k;
        }
        if (!k->used) {
            k->used = 1;
            k->m = m, k->n = n, k->k = kk, k->batch = batch, k->algo = algo, k->extra = extra;
            return k;
        }
    }
    return NULL;
}

/* An NS op: costs.h's dm_ns_op_full_us (its kernels from the table, a call per orientation, at
 * full clock where the rows held their own back-to-back clock, times ns_time_scale, plus the
 * gradient check and momentum the executor runs in the op), memoized per shape, tall count,
 * batch, algorithm and launch mode. Under the power model it runs at its context's clock
 * (compute_share). */
static double ns_us(sim *s, const dm_op *op, dm_err *err)
{
    int found;
    if (op->parts > 1) { /* a split NS's stage (few ops; the memo's key does not tell stages apart) */
        dm_cost_source src;
        double us = dm_ns_op_full_us(s->o.costs, s->c, op, &src);
        s->ns_src_count[src]++;
        return us;
    }
    ns_key tmp, *k = cost_slot(s, op->m, op->n, op->tall, op->batch, (int)op->algo + 2 * (op->eager != 0), 0, &found, err);
    if (!k && !s->ns_cache) return -1;
    if (!k) k = &tmp;
    if (!found) k->us = dm_ns_op_full_us(s->o.costs, s->c, op, &k->src);
    s->ns_src_count[k->src]++;
    return k->us;
}

static double elementwise_us(sim *s, const dm_op *op, dm_err *err)
{
    const char *name = op->kind == DM_OP_ADAMW ? "adamw" : "muon_update";
    int which = op->kind == DM_OP_ADAMW;
    double bpp = dm_elementwise_bytes_per_param(name);
    s->elem_ops[which]++;
    if (op->bytes <= 0) return 0;
    if (s->c->elem_efficiency[which] > 0) { /* calibrated: a launch per tensor + bytes at the achieved bandwidth */
        s->elem_src_count[which][5]++;
        return dm_hbm_pass_at_us(s->c->gpu, s->c->elem_efficiency[which], s->c->elem_launch_us[which],
                                 op->n_params > 0 ? op->n_params : 1, op->bytes);
    }
    if (!s->o.costs || bpp <= 0) {
        s->elem_src_count[which][4]++;
        return dm_hbm_pass_us(s->c->gpu, op->n_params > 0 ? op->n_params : 1, op->bytes) + s->c->elem_op_us[which];
    }
    /* the table's rows, per tensor of its work (dm_costs_update_op_us), memoized per work (else
     * per size), plus the executor's per-op time beyond its tensors' (calibrated; 0 default) */
    int64_t elems = (int64_t)llround(op->bytes / bpp);
    int found, by_work = op->work >= 0 && op->work < s->p->n_works;
    ns_key tmp, *k = cost_slot(s, by_work ? op->work : elems, by_work ? -2 : -1, 0, 0, -2 - which, 0, &found, err);
    if (!k && !s->ns_cache) return -1; /* algo < 0: elementwise */
    if (!k) k = &tmp;
    if (!found) k->us = dm_costs_update_op_us(s->o.costs, s->c->gpu, s->p, op, &k->src);
    s->elem_src_count[which][k->src]++;
    return k->us + s->c->elem_op_us[which];
}

static int is_product(const dm_kernel *k) { return k->kind == DM_KERN_GEMM || k->kind == DM_KERN_BGEMM; }

/* The efficiency of the fallback: forward ops at fwd_efficiency, backward at bwd_efficiency. */
static double pass_efficiency(const sim *s, int pass) { return pass ? dm_cluster_bwd_efficiency(s->c) : s->c->fwd_efficiency; }

/* One kernel of a forward (pass 0) or backward (pass 1) op's work, all its count launches: from
 * the kernel table (memoized per launch), or, for a GEMM whose op the table has no row of, its
 * FLOPs at the cluster's efficiency. *src: dm_cost_source or KSRC_FALLBACK. */
static double kernel_us(sim *s, const dm_kernel *kn, int pass, int *src, dm_err *err)
{
    double count = (double)(kn->count > 0 ? kn->count : 1);
    if (is_product(kn) && (!s->o.costs || !dm_costs_kernel_rows(s->o.costs, kn->kind, kn->op))) {
        *src = KSRC_FALLBACK;
        if ((unsigned)kn->kind < DM_KERN__COUNT && (unsigned)kn->op < DM_KOP__COUNT) s->fell_back[pass][kn->kind][kn->op] = 1;
        return kn->flops / (pass_efficiency(s, pass) * s->c->gpu->bf16_flops) * 1e6;
    }
    dm_kernel one = *kn;
    one.count = 1;
    one.flops = kn->flops / count;
    one.bytes = kn->bytes / count;
    int found;
    ns_key tmp, *k = cost_slot(s, one.m, one.n, one.k, one.batch, KERN_ALGO + (int)one.kind * DM_KOP__COUNT + (int)one.op,
                               one.bytes, &found, err);
    if (!k && !s->ns_cache) return -1;
    if (!k) k = &tmp;
    if (!found) {
        if (s->o.costs) {
            k->us = dm_costs_kernel_us(s->o.costs, s->c->gpu, &one, &k->src);
        } else {
            k->us = dm_roofline_kernel_us(s->c->gpu, &one);
            k->src = DM_COST_ROOFLINE;
        }
    }
    *src = (int)k->src;
    return k->us * count;
}

/* A forward or backward op: the sum of its work's kernels (a backward's also the check of
 * each gradient it wrote, dm_work_grads) plus kernel_gap_us between two of its launches (each
 * work priced once); an op without work (a program file written before ops
 * carried one): its FLOPs at the cluster's efficiency. */
static double pass_us(sim *s, const dm_op *op, dm_err *err)
{
    int pass = op->kind == DM_OP_BACKWARD;
    const dm_program *p = s->p;
    if (op->work < 0 || op->work >= p->n_works) {
        s->ops_without_work[pass]++;
        return op->flops / (pass_efficiency(s, pass) * s->c->gpu->bf16_flops) * 1e6;
    }
    s->ops_with_work[pass]++;
    if (!s->work_us[pass]) {
        if (!(s->work_us[pass] = dm_malloc((size_t)p->n_works * sizeof(double), err))) return -1;
        for (int w = 0; w < p->n_works; w++) s->work_us[pass][w] = -1;
    }
    if (!s->work_mem[pass] && !(s->work_mem[pass] = dm_calloc((size_t)p->n_works, sizeof(double), err))) return -1;
    double *us = &s->work_us[pass][op->work];
    if (*us >= 0) return *us;
    const dm_work *w = &p->works[op->work];
    double t = 0, launches = 0, mem = 0;
    for (int i = 0; i < w->n; i++) {
        int src;
        double k = kernel_us(s, &w->k[i], pass, &src, err);
        if (k < 0) return -1;
        t += k;
        if (dm_kernel_memory_bound(s->c->gpu, &w->k[i])) mem += k;
        launches += (double)(w->k[i].count > 0 ? w->k[i].count : 1);
        s->kern_src_count[pass][src]++;
    }
    if (pass) { /* the executor's check of every gradient the backward wrote (HBM-bound) */
        dm_cost_source cs;
        double gl, chk = dm_work_grad_check_us(s->o.costs, s->c->gpu, w->k, w->n, &gl, &cs);
        if (cs != DM_COST_ROOFLINE) s->grad_check_measured = 1;
        t += chk, mem += chk;
        launches += gl;
    }
    if (launches > 1) t += (launches - 1) * s->c->kernel_gap_us;
    s->works_priced[pass]++;
    s->work_mem[pass][op->work] = t > 0 ? mem / t : 0;
    return *us = t;
}

static double compute_us(sim *s, const dm_op *op, dm_err *err)
{
    switch (op->kind) {
    case DM_OP_FORWARD:
    case DM_OP_BACKWARD: return pass_us(s, op, err);
    case DM_OP_NS: return ns_us(s, op, err);
    case DM_OP_MUON_UPDATE:
    case DM_OP_ADAMW: return elementwise_us(s, op, err);
    default: return 0;
    }
}

/* Where a pass's durations came from: the kernel table with its kernels' counts by source, the
 * GEMM ops that had no row and took the cluster's efficiency, and the ops without work. */
static void describe_pass(const sim *s, int pass, char *buf, size_t size)
{
    const dm_cluster *c = s->c;
    size_t n = 0;
    double eff = pass_efficiency(s, pass);
#define PUT(...) (n += (size_t)snprintf(buf + n, n < size ? size - n : 0, __VA_ARGS__))
    if (s->ops_with_work[pass]) {
        const int64_t *sc = s->kern_src_count[pass];
        int64_t total = 0;
        for (int i = 0; i < KSRC_N; i++) total += sc[i];
        PUT("%s; for %s: %d work%s, %lld kernels:",
            s->o.costs ? dm_costs_describe(s->o.costs) : "roofline (no cost table)", c->gpu->short_name,
            s->works_priced[pass], s->works_priced[pass] == 1 ? "" : "s", (long long)total);
        int first = 1;
        for (int i = 0; i < 4; i++)
            if (sc[i]) PUT("%s %lld %s", first ? "" : ",", (long long)sc[i], dm_cost_source_name((dm_cost_source)i)), first = 0;
        if (sc[KSRC_FALLBACK]) {
            PUT("%s %lld GEMMs at %.2f x %.4g TFLOP/s (%s_efficiency of cluster %s, the fallback: the table has no row of",
                first ? "" : ",", (long long)sc[KSRC_FALLBACK], eff, c->gpu->bf16_flops / 1e12, pass ? "bwd" : "fwd",
                c->name);
            int k1 = 1;
            for (int kk = 0; kk < DM_KERN__COUNT; kk++)
                for (int o = 0; o < DM_KOP__COUNT; o++)
                    if (s->fell_back[pass][kk][o])
                        PUT("%s %s %s", k1 ? "" : ",", dm_kern_kind_name((dm_kern_kind)kk), dm_kern_op_name((dm_kern_op)o)),
                            k1 = 0;
            PUT(")");
        }
        if (pass && s->grad_check_measured)
            PUT("; each gradient's non-finite check from the table's grad-check rows");
        else if (pass)
            PUT("; each gradient's non-finite check at the %s HBM roofline + launch", c->gpu->short_name);
        if (c->kernel_gap_us > 0) PUT("; %.3g us between two kernels of an op", c->kernel_gap_us);
    }
    if (s->ops_without_work[pass])
        PUT("%s%d ops without work: flops / (%.2f x %.4g TFLOP/s %s bf16 datasheet peak); efficiency from cluster %s",
            n ? "; " : "", s->ops_without_work[pass], eff, c->gpu->bf16_flops / 1e12, c->gpu->short_name, c->name);
#undef PUT
}

static void describe_sources(sim *s, sim_result *r)
{
    const dm_cluster *c = s->c;
    int used[DM_OP__COUNT] = {0};
    for (int g = 0; g < s->T; g++) used[s->op[g]->kind] = 1;
    for (int k = DM_OP_FORWARD; k <= DM_OP_BACKWARD; k++)
        if (used[k]) describe_pass(s, k - DM_OP_FORWARD, r->cost_src[k], sizeof r->cost_src[k]);
    if (used[DM_OP_NS]) {
        char counts[128] = "";
        for (int i = 0; i < 4; i++)
            if (s->ns_src_count[i])
                snprintf(counts + strlen(counts), sizeof counts - strlen(counts), "%s%d %s", counts[0] ? ", " : "",
                         s->ns_src_count[i], dm_cost_source_name((dm_cost_source)i));
        char scale[128] = "";
        if (c->ns_time_scale > 0 && c->ns_time_scale != 1)
            snprintf(scale, sizeof scale, "; times %.3g (calibrated)", c->ns_time_scale);
        if (dm_power_on(&c->power) && s->o.costs && !dm_costs_is_roofline(s->o.costs)) /* how its rows reach full clock */
            snprintf(scale + strlen(scale), sizeof scale - strlen(scale), "; rows %s",
                     dm_costs_ns_clocked(s->o.costs)          ? "at full clock by the clock each was timed at"
                     : dm_costs_full_clock(s->o.costs, 1) ? "timed at full clock"
                                                            : "at full clock by the power model's held clock");
        snprintf(r->cost_src[DM_OP_NS], sizeof r->cost_src[DM_OP_NS], "%s; for %s: %s%s",
                 s->o.costs ? dm_costs_describe(s->o.costs) : "roofline (no cost table)", c->gpu->short_name, counts, scale);
    }
    static const dm_op_kind ek[2] = {DM_OP_MUON_UPDATE, DM_OP_ADAMW};
    for (int w = 0; w < 2; w++) {
        if (!used[ek[w]]) continue;
        char counts[128] = "";
        for (int i = 0; i < 6; i++)
            if (s->elem_src_count[w][i])
                snprintf(counts + strlen(counts), sizeof counts - strlen(counts), "%s%d %s", counts[0] ? ", " : "",
                         s->elem_src_count[w][i],
                         i < 4 ? dm_cost_source_name((dm_cost_source)i) : i == 4 ? "bytes/HBM" : "calibrated");
        if (c->elem_efficiency[w] > 0)
            snprintf(r->cost_src[ek[w]], sizeof r->cost_src[ek[w]],
                     "HBM bytes / (%.3g x %.3g TB/s %s datasheet) + %.3g us per tensor; efficiency from cluster %s",
                     c->elem_efficiency[w], c->gpu->hbm_Bps / 1e12, c->gpu->short_name,
                     c->elem_launch_us[w] > 0 ? c->elem_launch_us[w] : c->gpu->launch_us, c->name);
        else if (s->o.costs)
            snprintf(r->cost_src[ek[w]], sizeof r->cost_src[ek[w]], "%s; for %s: %s", dm_costs_describe(s->o.costs),
                     c->gpu->short_name, counts);
        else
            snprintf(r->cost_src[ek[w]], sizeof r->cost_src[ek[w]], "HBM bytes / %.3g TB/s %s datasheet + %.3g us launch",
                     c->gpu->hbm_Bps / 1e12, c->gpu->short_name, c->gpu->launch_us);
    }
    for (int k = DM_OP_BROADCAST; k <= DM_OP_REDUCESCATTER; k++)
        if (used[k])
            snprintf(r->cost_src[k], sizeof r->cost_src[k],
                     "NCCL-form model (collcost.h), %s algorithm, cluster %s link rates and latencies",
                     coll_algo_name(s->o.algo), c->name);
}

/* ---- setup -------------------------------------------------------------------------------- */

static int build_group(sim *s, int g, dm_err *err)
{
    grp *G = &s->grps[g];
    if (G->built) return 0;
    const dm_group *pg = &s->p->groups[g];
    coll_link *l = dm_malloc((size_t)collcost_links_max(s->c, pg->n) * sizeof *l + 1, err);
    if (!l) return -1;
    int nl = collcost_links(s->c, pg->ranks, pg->n, l, err);
    if (nl < 0 || collcost_topo(s->c, pg->ranks, pg->n, &G->topo, err)) {
        free(l);
        return -1;
    }
    G->links = dm_malloc((size_t)(nl + 1) * sizeof *G->links, err);
    G->w = dm_malloc((size_t)(nl + 1) * sizeof *G->w, err);
    if (!G->links || !G->w) {
        free(l);
        return -1;
    }
    for (int i = 0; i < nl; i++) {
        G->links[i] = collcost_link_id(s->c, s->R, l[i].kind, l[i].index);
        G->w[i] = l[i].weight;
    }
    G->nl = nl;
    G->built = 1;
    free(l);
    return 0;
}

/* op g's kind and the stream it runs on, packed in ks at setup */
static inline int kind_of(const sim *s, int g) { return s->ks[g] & 15; }
static inline int stream_of(const sim *s, int g) { return s->ks[g] >> 4; }

/* The network (s->net), its links at their capacities: made once, by stop_bound or setup. */
static int make_net(sim *s, dm_err *err)
{
    if (s->net) return 0;
    int L = collcost_n_links(s->c, s->R);
    double *cap = dm_malloc((size_t)(L + 1) * sizeof *cap, err);
    if (!cap) return -1;
    collcost_link_caps(s->c, s->R, cap);
    s->nvl_cap[0] = collcost_link_Bps(s->c, COLL_LINK_NVL_OUT);
    s->nvl_cap[1] = collcost_link_Bps(s->c, COLL_LINK_NVL_IN);
    s->net = sim_net_new(L, cap, err);
    free(cap);
    if (s->net && sim_links_wanted(s->c)) sim_net_track_usage(s->net);
    return s->net ? 0 : -1;
}

/* Collective op's latency term and bus bytes over its group (built), as setup gives them to
 * every collective (the lone flow's time is vol / sim_net_lone_rate). */
static void coll_terms(sim *s, const dm_op *op, double *lat_us, double *vol)
{
    const coll_topo *t = &s->grps[op->group].topo;
    coll_algo a = collcost_pick(op->kind, s->o.algo, op->bytes, t);
    *lat_us = collcost_latency_us(op->kind, a, t) + /* the executor's staging copies (coll.h) */
              dm_coll_staging_us(s->c, op->kind, op->staged, op->bytes, op->n_params, t->n_ranks);
    if (t->n_ranks == 1) *lat_us += s->c->solo_coll_us; /* NCCL's launch and kernel, nothing moved */
    *vol = collcost_bus_bytes(op->kind, a, op->bytes, t->n_ranks) / collcost_kind_scale(op->kind, t);
}

/* The stop's bound (sim_opts.stop_us), before the engine's arrays are made: each stream of a
 * rank runs its ops one at a time, so the step ends no earlier than the step's start plus, on
 * any one stream, its ops' times at their fastest: a compute op's at full rate (collectives in
 * flight, the other slot and the clock only slow it; the gaps after ops only add), a
 * collective's latency term plus its bus bytes at its links' lone rate (sharing them, or NVLink
 * slowed by compute, only slows it). s->bound_us gets the largest such sum; the compute ops'
 * times are kept in s->dur for setup. A program that setup would refuse gets no bound (0: setup
 * says why). 0, or -1 with err. */
static int stop_bound(sim *s, dm_err *err)
{
    const dm_program *p = s->p;
    int Rs = s->Rs, rc = -1;
    double *coll_t = dm_malloc(((size_t)p->n_colls + 1) * sizeof *coll_t, err);
    double *sum = dm_calloc((size_t)S, sizeof *sum, err);
    if (!coll_t || !sum || !(s->grps = dm_calloc((size_t)p->n_groups + 1, sizeof *s->grps, err)) ||
        !(s->dur = dm_calloc((size_t)s->T + 1, sizeof(double), err)) || make_net(s, err))
        goto out;
    for (int c = 0; c < p->n_colls; c++) coll_t[c] = -1;
    double most = 0;
    for (int r = 0, g = 0; r < Rs; r++) {
        memset(sum, 0, (size_t)S * sizeof *sum);
        for (int i = 0; i < p->ranks[r].n_ops; i++, g++) {
            const dm_op *op = &p->ranks[r].ops[i];
            if ((unsigned)op->stream >= S || (unsigned)op->kind >= DM_OP__COUNT) goto none;
            double t = 0;
            if (dm_op_is_compute(op->kind)) {
                if ((t = s->dur[g] = compute_us(s, op, err)) < 0) goto out;
            } else if (dm_op_is_collective(op->kind)) {
                if (op->coll < 0 || op->coll >= p->n_colls || op->group < 0 || op->group >= p->n_groups) goto none;
                if (coll_t[op->coll] < 0) {
                    if (build_group(s, op->group, err)) goto out;
                    const grp *G = &s->grps[op->group];
                    double lat, vol, lone = sim_net_lone_rate(s->net, G->links, G->w, G->nl);
                    coll_terms(s, op, &lat, &vol);
                    coll_t[op->coll] = lat + (vol > 0 && lone > 0 ? vol / lone * 1e6 : 0);
                }
                t = coll_t[op->coll];
            }
            sum[dm_run_stream(p->nranks, op->stream)] += t;
        }
        for (int k = 0; k < S; k++)
            if (sum[k] > most) most = sum[k];
    }
    s->bound_us = s->c->step_start_us + most;
    s->dur_set = 1;
    rc = 0;
    goto out;
none: /* setup refuses the program and says why */
    s->bound_us = 0;
    rc = 0;
out:
    free(coll_t);
    free(sum);
    return rc;
}

static int setup(sim *s, dm_err *err)
{
    const dm_program *p = s->p;
    int R = s->R = p->nranks;
    /* Ranks sit on nodes by the cluster's GPUs per node; the program's must agree, except that a
     * program smaller than a node may say it has fewer (the same single-node placement). */
    if (s->c->gpus_per_node != p->gpus_per_node && !(p->gpus_per_node >= R && s->c->gpus_per_node >= R))
        return dm_err_set(err, "sim: program has %d GPUs per node, cluster %s has %d", p->gpus_per_node, s->c->name,
                          s->c->gpus_per_node);
    int Rs = s->Rs = s->shared ? 1 : R;
    if (!(s->off = dm_malloc((size_t)(Rs + 1) * sizeof *s->off, err))) return -1;
    s->off[0] = 0;
    for (int r = 0; r < Rs; r++) s->off[r + 1] = s->off[r] + p->ranks[r].n_ops;
    int T = s->T = s->off[Rs];
    size_t t1 = (size_t)T + 1;
    /* a stop that the streams' sums pass already: nothing more to make or run */
    double stop = s->o.stop_us > 0 && !dm_power_on(&s->c->power) && s->o.steps <= 1 ? s->o.stop_us : 0;
    if (stop > 0 && stop_bound(s, err)) return -1;
    if (stop > 0 && s->bound_us > stop) {
        s->stopped = 1;
        s->now = s->bound_us;
        return 0;
    }
    if (!(s->rank_of = dm_malloc(t1 * sizeof(int), err)) || !(s->op = dm_malloc(t1 * sizeof *s->op, err)) ||
        !(s->deps_left = dm_calloc(t1, sizeof(int), err)) || !(s->cause = dm_malloc(t1 * sizeof(int), err)) ||
        !(s->pcause = dm_malloc(t1 * sizeof(int), err)) || !(s->state = dm_calloc(t1, 1, err)) ||
        (!s->dur && !(s->dur = dm_calloc(t1, sizeof(double), err))) || !(s->start = dm_calloc(t1, sizeof(double), err)) ||
        !(s->end = dm_calloc(t1, sizeof(double), err)) || !(s->ready = dm_calloc(t1, sizeof(double), err)) ||
        !(s->succ_off = dm_calloc(t1 + 1, sizeof(int), err)) || !(s->sl = dm_malloc(t1 * sizeof(int), err)) ||
        !(s->sl_off = dm_calloc((size_t)R * S + 1, sizeof(int), err)) ||
        !(s->head = dm_malloc(((size_t)R * S + 1) * sizeof(int), err)) ||
        !(s->gpu_busy = dm_calloc((size_t)R * NSLOT, sizeof(int), err)) ||
        !(s->gpu_last = dm_malloc((size_t)R * NSLOT * sizeof(int), err)) ||
        !(s->gpu_free = dm_calloc((size_t)R * NSLOT, sizeof(double), err)) ||
        !(s->gpu_run = dm_calloc((size_t)R * NSLOT, sizeof(int), err)) ||
        !(s->coll_active = dm_calloc((size_t)R, sizeof(int), err)) ||
        !(s->gpu_rem = dm_calloc((size_t)R * NSLOT, sizeof(double), err)) ||
        !(s->gpu_t = dm_calloc((size_t)R * NSLOT, sizeof(double), err)) ||
        !(s->gpu_rate = dm_calloc((size_t)R * NSLOT, sizeof(double), err)) ||
        !(s->gpu_ver = dm_calloc((size_t)R * NSLOT, sizeof(uint64_t), err)) ||
        !(s->pw_st = dm_calloc((size_t)R, sizeof *s->pw_st, err)) || !(s->pw_t = dm_calloc((size_t)R, sizeof(double), err)) ||
        !(s->pw_P = dm_calloc((size_t)R, sizeof(double), err)) ||
        !(s->colls = dm_calloc((size_t)p->n_colls + 1, sizeof *s->colls, err)) ||
        !(s->coll_mem = dm_malloc(t1 * sizeof(int), err)) || !(s->ks = dm_malloc(t1, err)) ||
        !(s->coll_of = dm_malloc(t1 * sizeof(int), err)) ||
        (!s->grps && !(s->grps = dm_calloc((size_t)p->n_groups + 1, sizeof *s->grps, err))))
        return -1;
    for (int k = 0; k < R * NSLOT; k++) s->gpu_last[k] = -1, s->gpu_rate[k] = 1;
    for (int r = 0; r < R; r++) /* from the step's start at t = 0 (the setup before the first op idles) */
        s->pw_st[r] = s->pw_st0 ? s->pw_st0[r] : (dm_power_st){s->c->power.idle_w, 0}, s->pw_P[r] = s->c->power.idle_w,
        s->pw_t[r] = 0;
    /* Per-op indexes, dependency counts, successor counts, stream list sizes. */
    int n_coll_ops = 0;
    for (int r = 0; r < Rs; r++)
        for (int i = 0; i < p->ranks[r].n_ops; i++) {
            int g = s->off[r] + i;
            const dm_op *op = &p->ranks[r].ops[i];
            s->op[g] = op;
            s->rank_of[g] = r;
            /* the stream it runs on (core/program.h: one rank runs its collectives on compute) */
            s->ks[g] = (unsigned char)((unsigned)op->kind | (unsigned)dm_run_stream(p->nranks, op->stream) << 4);
            s->coll_of[g] = op->coll;
            s->cause[g] = s->pcause[g] = -1;
            if ((unsigned)op->stream >= S || (unsigned)op->kind >= DM_OP__COUNT)
                return dm_err_set(err, "sim: rank %d op %d: bad stream or kind", r, i);
            if (op->stream == DM_STREAM_COMPUTE_LO) s->has_lo = 1; /* compute ops only (dm_program_validate) */
            s->sl_off[r * S + stream_of(s, g) + 1]++;
            s->deps_left[g] = op->n_deps;
            for (int d = 0; d < op->n_deps; d++) {
                if (op->deps[d] < 0 || op->deps[d] >= i)
                    return dm_err_set(err, "sim: rank %d op %d depends on op %d (not an earlier op)", r, i, op->deps[d]);
                s->succ_off[s->off[r] + op->deps[d] + 1]++;
            }
            if (dm_op_is_collective(op->kind)) {
                if (op->coll < 0 || op->coll >= p->n_colls || op->group < 0 || op->group >= p->n_groups)
                    return dm_err_set(err, "sim: rank %d op %d: collective without a valid id or group", r, i);
                s->colls[op->coll].n++;
                n_coll_ops++;
            }
        }
    for (int i = 0; i < R * S; i++) s->sl_off[i + 1] += s->sl_off[i];
    for (int g = 0; g < T; g++) s->succ_off[g + 1] += s->succ_off[g];
    if (!(s->succ = dm_malloc(((size_t)s->succ_off[T] + 1) * sizeof(int), err))) return -1;
    int *fill = dm_malloc(((size_t)R * S + t1) * sizeof(int), err);
    if (!fill) return -1;
    memcpy(fill, s->sl_off, (size_t)R * S * sizeof(int));
    memcpy(s->head, s->sl_off, (size_t)R * S * sizeof(int));
    int *sfill = fill + R * S;
    memcpy(sfill, s->succ_off, (size_t)T * sizeof(int));
    int pos = 0;
    for (int c = 0; c < p->n_colls; c++) {
        s->colls[c].mem = s->coll_mem + pos;
        pos += s->colls[c].n;
        s->colls[c].n = 0;
        s->colls[c].group = -1;
    }
    for (int g = 0; g < T; g++) {
        const dm_op *op = s->op[g];
        int r = s->rank_of[g];
        s->sl[fill[r * S + stream_of(s, g)]++] = g;
        for (int d = 0; d < op->n_deps; d++) s->succ[sfill[s->off[r] + op->deps[d]]++] = g;
        if (dm_op_is_collective(op->kind)) {
            coll *c = &s->colls[op->coll];
            if (c->group >= 0 && c->group != op->group) {
                free(fill);
                return dm_err_set(err, "sim: collective %d: rank %d op %d names group %d, another member group %d", op->coll,
                                  r, op->id, op->group, c->group);
            }
            c->group = op->group;
            c->mem[c->n++] = g;
        }
    }
    free(fill);
    /* Collectives: every member present; cost terms. Durations of compute ops. */
    for (int ci = 0; ci < p->n_colls; ci++) {
        coll *c = &s->colls[ci];
        if (c->n == 0) continue; /* an unused id */
        const dm_group *pg = &p->groups[c->group];
        if (s->shared ? pg->n != R : c->n != pg->n) /* shared: rank 0 stands for every member */
            return dm_err_set(err, "sim: collective %d has %d member ops, its group %d has %d ranks", ci, c->n, c->group,
                              pg->n);
        for (int k = 0; k < c->n && !s->shared; k++)
            if (s->rank_of[c->mem[k]] != pg->ranks[k])
                return dm_err_set(err, "sim: collective %d: rank %d holds an op but is not in group %d", ci,
                                  s->rank_of[c->mem[k]], c->group);
        if (build_group(s, c->group, err)) return -1;
        coll_terms(s, s->op[c->mem[0]], &c->lat_us, &c->vol);
        c->last = -1;
    }
    for (int g = 0; g < T && !s->dur_set; g++)
        if (dm_op_is_compute(s->op[g]->kind) && (s->dur[g] = compute_us(s, s->op[g], err)) < 0) return -1;
    /* Links: NVLink each way per GPU, NICs each way per node, the fabric's switch uplinks. */
    return make_net(s, err);
}

/* ---- the engine --------------------------------------------------------------------------- */

static int make_ready(sim *s, int g, int cause, dm_err *err);

/* dm_op_is_compute and dm_op_is_collective, inlined for the engine */
static inline int kind_compute(int k)
{
    return k == DM_OP_FORWARD || k == DM_OP_BACKWARD || k == DM_OP_NS || k == DM_OP_MUON_UPDATE || k == DM_OP_ADAMW;
}
static inline int kind_collective(int k) { return k >= DM_OP_BROADCAST && k <= DM_OP_REDUCESCATTER; }

/* the GPU slot (SLOT) that runs compute op g */
static inline int slot_of(const sim *s, int g) { return SLOT(s->rank_of[g], stream_of(s, g) == DM_STREAM_COMPUTE_LO); }

static int is_head(const sim *s, int g)
{
    int rs = s->rank_of[g] * S + stream_of(s, g);
    return s->head[rs] < s->sl_off[rs + 1] && s->sl[s->head[rs]] == g;
}

static int schedule_net(sim *s, dm_err *err);

/* Rank r's compute stream starts (busy) or stops running an op: with coll_slowdown g > 0 its
 * NVLink ports carry (1 - g) of their capacity while it computes, and the flows on them are
 * re-timed. */
static int compute_links(sim *s, int r, int busy, dm_err *err)
{
    double g = s->c->coll_slowdown, k = busy ? 1 - g : 1;
    if (!(g > 0)) return 0;
    sim_net_set_capacity(s->net, s->now, collcost_link_id(s->c, s->R, COLL_LINK_NVL_OUT, r), s->nvl_cap[0] * k);
    sim_net_set_capacity(s->net, s->now, collcost_link_id(s->c, s->R, COLL_LINK_NVL_IN, r), s->nvl_cap[1] * k);
    return schedule_net(s, err);
}

/* The rate of compute op g while a collective is in flight on its rank: 1 - f x the share of
 * its time in memory-bound kernels for a forward/backward op with work (dm_kernel_memory_bound:
 * those share HBM with the collective's copies), 1 - f for the other compute ops. */
static double slowed_rate(const sim *s, int g)
{
    const dm_op *op = s->op[g];
    double f = s->c->comm_slowdown, share = 1;
    int pass = op->kind == DM_OP_BACKWARD;
    if ((op->kind == DM_OP_FORWARD || op->kind == DM_OP_BACKWARD) && op->work >= 0 && s->work_mem[pass] &&
        op->work < s->p->n_works)
        share = s->work_mem[pass][op->work];
    return 1 - f * share;
}

static int power_on(const sim *s) { return dm_power_on(&s->c->power); }
/* Compute ops progress by rates (remaining full-rate work, re-timed on changes) when a rate can
 * change while one runs: comm_slowdown, or the power model's clock. */
static int use_rates(const sim *s) { return s->c->comm_slowdown > 0 || power_on(s) || s->has_lo; }

/* Bring rank r's filtered demand up to now at the demand it ran at since. */
static void power_touch(sim *s, int r)
{
    if (!power_on(s)) return;
    dm_power_step(&s->c->power, &s->pw_st[r], s->pw_P[r], s->now - s->pw_t[r]);
    s->pw_t[r] = s->now;
}

/* The part of compute op g's time the clock slows (bound_share); forward and backward: none
 * where the table's rows were measured back to back (dm_costs_full_clock: they hold that clock
 * already); NS: all of it from full-clock rows, else its bound share of its full-clock time
 * (dm_ns_op_full_us brought rows timed back to back to full clock: an NS op runs at the clock of
 * its context, not the one its rows held). */
static double bound_share(const sim *s, int g);
static double compute_share(const sim *s, int g)
{
    const dm_op *op = s->op[g];
    if (op->kind == DM_OP_NS) return dm_costs_full_clock(s->o.costs, 1) ? 1 : bound_share(s, g);
    if (op->kind == DM_OP_FORWARD || op->kind == DM_OP_BACKWARD)
        return dm_costs_full_clock(s->o.costs, 0) ? bound_share(s, g) : 0;
    return bound_share(s, g);
}

/* The share of compute op g's full-clock time that the clock sets: what is left of it beyond
 * the time its bytes need at the reference copy rate (that part waits on HBM, which does not
 * slow); none of an elementwise update's (HBM-bound by construction). */
static double bound_share(const sim *s, int g)
{
    const dm_op *op = s->op[g];
    if (op->kind == DM_OP_MUON_UPDATE || op->kind == DM_OP_ADAMW || !(s->dur[g] > 0)) return 0;
    return dm_power_clock_share(&s->c->power, op->bytes, s->dur[g]);
}

/* The rate of the op g running in slot k of rank r now: slowed while a collective is in flight
 * (comm_slowdown), by the clock of the rank's filtered demand (power), and while the rank's other
 * slot runs an op too (lo_main_rate for slot 0's, lo_rate for compute-lo's). */
static double run_rate(const sim *s, int r, int k, int g)
{
    double rate = s->c->comm_slowdown > 0 && s->coll_active[r] > 0 ? slowed_rate(s, g) : 1;
    if (s->gpu_busy[SLOT(r, !k)]) rate *= k ? s->c->lo_rate : s->c->lo_main_rate;
    if (power_on(s))
        rate /= dm_power_time_factor(dm_power_clock(&s->c->power, s->pw_st[r].D), compute_share(s, g));
    return rate;
}

/* The running op of slot k (SLOT): its remaining full-rate work brought up to date at its old
 * rate, then timed at the present one (when that changed, or `force`); the earlier completion
 * event becomes stale by its version. Under the power model also the next EV_POWER, a quarter
 * of the shorter tau on (dm_power_tick_us), which re-times it again as its demand moves the clock. */
static int retime(sim *s, int k, int force, dm_err *err)
{
    if (!s->gpu_busy[k]) return 0;
    int g = s->gpu_run[k], r = k / NSLOT;
    s->gpu_rem[k] -= (s->now - s->gpu_t[k]) * s->gpu_rate[k];
    if (s->gpu_rem[k] < 0) s->gpu_rem[k] = 0;
    s->gpu_t[k] = s->now;
    power_touch(s, r);
    double rate = run_rate(s, r, k % NSLOT, g);
    if (rate == s->gpu_rate[k] && !force) return 0;
    s->gpu_rate[k] = rate;
    uint64_t v = ++s->gpu_ver[k];
    double left = s->gpu_rem[k] / rate, tick = dm_power_tick_us(&s->c->power);
    if (sim_heap_push(&s->h, s->now + left, EV_OP_DONE, g, v, err)) return -1;
    return power_on(s) && left > tick ? sim_heap_push(&s->h, s->now + tick, EV_POWER, k, v, err) : 0;
}

/* Compute op g's full-clock power demand (power.h; an NS op's time is at full clock already:
 * dm_ns_op_full_us). */
static double op_demand(const sim *s, int g)
{
    const dm_op *op = s->op[g];
    return dm_power_demand(&s->c->power, op->flops, op->bytes, s->dur[g]);
}

/* Start the ready op heading one of slot k's streams, if the slot is free (slot 0: stream
 * priority decides, comm-hi, compute, comm-lo). */
static int try_slot(sim *s, int r, int k, dm_err *err)
{
    static const int prio[3] = {DM_STREAM_COMM_HI, DM_STREAM_COMPUTE, DM_STREAM_COMM_LO};
    static const int lo[1] = {DM_STREAM_COMPUTE_LO};
    int q = SLOT(r, k), other = SLOT(r, !k);
    if (s->gpu_busy[q] || s->now < s->gpu_free[q]) return 0; /* busy, or in the gap after its last op (EV_GPU_FREE) */
    const int *order = k ? lo : prio;
    for (int i = 0; i < (k ? 1 : 3); i++) {
        int rs = r * S + order[i];
        if (s->head[rs] >= s->sl_off[rs + 1]) continue;
        int g = s->sl[s->head[rs]];
        if (s->state[g] != ST_READY) continue;
        s->state[g] = ST_RUNNING;
        s->start[g] = s->now;
        s->pcause[g] = s->ready[g] < s->now ? s->gpu_last[q] : s->cause[g];
        s->gpu_busy[q] = 1;
        if (!s->gpu_busy[other] && compute_links(s, r, 1, err)) return -1;
        if (!use_rates(s)) return sim_heap_push(&s->h, s->now + s->dur[g], EV_OP_DONE, g, 0, err);
        s->gpu_run[q] = g;
        s->gpu_rem[q] = s->dur[g];
        s->gpu_t[q] = s->now;
        s->gpu_rate[q] = 0; /* re-timed below */
        if (power_on(s)) {
            power_touch(s, r);
            s->pw_P[r] = op_demand(s, g);
        }
        if (retime(s, q, 1, err)) return -1;
        return retime(s, other, 0, err); /* the other slot's op now shares the GPU */
    }
    return 0;
}

static int try_gpu(sim *s, int r, dm_err *err)
{
    if (try_slot(s, r, 0, err)) return -1;
    return s->has_lo ? try_slot(s, r, 1, err) : 0;
}

/* Rank r's count of collectives in flight changed by delta: when that changes its compute rate
 * (f > 0 only), bring the running ops' remaining work up to date at the old rate and schedule
 * their ends at the new one (the earlier completion events become stale by their versions). */
static int coll_active_add(sim *s, int r, int delta, dm_err *err)
{
    s->coll_active[r] += delta;
    if (!(s->c->comm_slowdown > 0)) return 0; /* the rate does not depend on collectives */
    for (int k = 0; k < NSLOT; k++) /* an op starting later takes its rate then */
        if (retime(s, SLOT(r, k), 0, err)) return -1;
    return 0;
}

/* GPU slot q of rank r runs no compute op before t (the gap after an op): an event then retries
 * the rank's streams. */
static int gpu_idle(sim *s, int q, int r, double t, dm_err *err)
{
    if (t <= s->gpu_free[q]) return 0;
    s->gpu_free[q] = t;
    return sim_heap_push(&s->h, t, EV_GPU_FREE, r, 0, err);
}

static int op_done(sim *s, int g, dm_err *err)
{
    int r = s->rank_of[g], rs = r * S + stream_of(s, g);
    s->state[g] = ST_DONE;
    s->end[g] = s->now;
    s->done++;
    s->events++;
    s->head[rs]++;
    if (kind_compute(kind_of(s, g))) {
        int q = slot_of(s, g), other = q ^ 1;
        s->gpu_busy[q] = 0;
        s->gpu_last[q] = g;
        if (!s->gpu_busy[other] && compute_links(s, r, 0, err)) return -1;
        if (use_rates(s)) s->dur[g] = s->end[g] - s->start[g]; /* the time it took at its rates */
        if (power_on(s)) { /* idle from here until its next op, or the other slot's demand */
            power_touch(s, r);
            s->pw_P[r] = s->gpu_busy[other] ? op_demand(s, s->gpu_run[other]) : s->c->power.idle_w;
        }
        if (s->gpu_busy[other] && retime(s, other, 0, err)) return -1; /* it has the GPU alone now */
        /* after an NS op launched as a CUDA graph, its own gap (graph_gap_us) */
        double gap = s->c->graph_gap_us > 0 && kind_of(s, g) == DM_OP_NS && !s->op[g]->eager ? s->c->graph_gap_us
                                                                                              : s->c->op_gap_us;
        if (gap > 0 && gpu_idle(s, q, r, s->now + gap, err)) return -1;
    } else if (s->c->solo_coll_us > 0 && s->c->op_gap_us > 0 && stream_of(s, g) == DM_STREAM_COMPUTE) {
        /* a one-rank collective on the compute stream (solo_coll_us): a launch in that stream,
         * the next compute op waits the gap after it as after a compute op */
        if (gpu_idle(s, slot_of(s, g), r, s->now + s->c->op_gap_us, err)) return -1;
    }
    if (s->head[rs] < s->sl_off[rs + 1]) {
        int h = s->sl[s->head[rs]];
        if (s->deps_left[h] == 0 && make_ready(s, h, g, err)) return -1;
    }
    for (int i = s->succ_off[g]; i < s->succ_off[g + 1]; i++) {
        int x = s->succ[i];
        if (--s->deps_left[x] == 0 && is_head(s, x) && make_ready(s, x, g, err)) return -1;
    }
    return try_gpu(s, r, err);
}

static int coll_done(sim *s, int ci, dm_err *err)
{
    coll *c = &s->colls[ci];
    for (int k = 0; k < c->n; k++)
        if (coll_active_add(s, s->rank_of[c->mem[k]], -1, err)) return -1;
    for (int k = 0; k < c->n; k++)
        if (op_done(s, c->mem[k], err)) return -1;
    return 0;
}

static int schedule_net(sim *s, dm_err *err)
{
    double t = sim_net_next_finish_us(s->net);
    if (isinf(t)) return 0;
    return sim_heap_push(&s->h, t < s->now ? s->now : t, EV_FLOW, 0, sim_net_version(s->net), err);
}

static int make_ready(sim *s, int g, int cause, dm_err *err)
{
    int kind = kind_of(s, g);
    s->ready[g] = s->now;
    s->cause[g] = cause;
    if (kind == DM_OP_WAIT) {
        s->state[g] = ST_RUNNING;
        s->start[g] = s->now;
        s->pcause[g] = cause;
        return sim_heap_push(&s->h, s->now, EV_OP_DONE, g, 0, err);
    }
    if (kind_collective(kind)) {
        s->state[g] = ST_RUNNING; /* holds its stream while it waits for the other members */
        /* In flight on this rank from its arrival: NCCL's kernel holds SMs while it waits. */
        if (coll_active_add(s, s->rank_of[g], +1, err)) return -1;
        int ci = s->coll_of[g];
        coll *c = &s->colls[ci];
        c->arrived++;
        c->last = g;
        if (c->arrived < c->n) return 0;
        for (int k = 0; k < c->n; k++) {
            s->start[c->mem[k]] = s->now;
            s->pcause[c->mem[k]] = s->cause[g];
        }
        return sim_heap_push(&s->h, s->now + c->lat_us, EV_LAT_DONE, ci, 0, err);
    }
    s->state[g] = ST_READY; /* the caller runs try_gpu for this rank */
    return 0;
}

static int run(sim *s, dm_err *err)
{
    s->now = s->c->step_start_us; /* the executor's per-step setup: nothing runs before it */
    for (int r = 0; r < s->Rs; r++) {
        for (int st = 0; st < S; st++) {
            int rs = r * S + st;
            if (s->head[rs] < s->sl_off[rs + 1]) {
                int g = s->sl[s->head[rs]];
                if (s->deps_left[g] == 0 && make_ready(s, g, -1, err)) return -1;
            }
        }
        if (try_gpu(s, r, err)) return -1;
    }
    sim_event e;
    int *tags = NULL, ntags = 0;
    int rc = 0;
    double stop = s->o.stop_us > 0 && !power_on(s) && s->o.steps <= 1 ? s->o.stop_us : 0;
    while (sim_heap_pop(&s->h, &e)) {
        if (stop > 0 && e.t_us > stop && s->done < s->T) { /* an op ends at or after this event */
            s->stopped = 1;
            s->now = e.t_us;
            break;
        }
        s->now = e.t_us;
        s->events++;
        if (e.type == EV_OP_DONE) {
            if (e.b && e.b != s->gpu_ver[slot_of(s, e.a)]) continue; /* re-timed since (rates) */
            s->events--; /* counted by op_done */
            if ((rc = op_done(s, e.a, err))) break;
        } else if (e.type == EV_LAT_DONE) {
            s->ev_global++;
            coll *c = &s->colls[e.a];
            if (c->vol > 0) {
                grp *G = &s->grps[c->group];
                if (!G->checked && (rc = sim_net_links_check(s->net, G->links, G->w, G->nl, &G->dup, err))) break;
                G->checked = 1;
                if ((rc = sim_net_add_shared(s->net, s->now, c->vol, G->links, G->w, G->nl, G->dup, &G->memo, e.a, err)) ||
                    (rc = schedule_net(s, err)))
                    break;
            } else if ((rc = coll_done(s, e.a, err))) {
                break;
            }
        } else if (e.type == EV_GPU_FREE) {
            if ((rc = try_gpu(s, e.a, err))) break;
        } else if (e.type == EV_POWER) {
            if (e.b != s->gpu_ver[e.a]) continue; /* re-timed since */
            if ((rc = retime(s, e.a, 1, err))) break;
        } else if (e.type == EV_FLOW) {
            s->ev_global++;
            if (e.b != sim_net_version(s->net)) continue; /* rates changed since */
            int act = sim_net_active(s->net);
            if (act > ntags) {
                int *nt = dm_realloc(tags, (size_t)act * sizeof *nt, err);
                if (!nt) {
                    rc = -1;
                    break;
                }
                tags = nt;
                ntags = act;
            }
            int k = sim_net_pop_finished(s->net, s->now, tags, act);
            for (int i = 0; i < k && !rc; i++) rc = coll_done(s, tags[i], err);
            if (rc || (rc = schedule_net(s, err))) break;
        }
    }
    free(tags);
    if (rc) return -1;
    if (s->done < s->T && !s->stopped) {
        s->deadlock = 1;
        for (int g = 0; g < s->T; g++) {
            if (s->state[g] == ST_DONE) continue;
            const dm_op *op = s->op[g];
            int r = s->rank_of[g];
            if (dm_op_is_collective(op->kind) && s->state[g] == ST_RUNNING) {
                const coll *c = &s->colls[op->coll];
                int missing = -1;
                for (int k = 0; k < c->n && missing < 0; k++)
                    if (s->state[c->mem[k]] != ST_RUNNING) missing = s->rank_of[c->mem[k]];
                return dm_err_set(err, "sim: deadlock: rank %d op %d (%s, collective %d) waits for %d of %d members "
                                  "(rank %d never reaches it)", r, op->id, dm_op_kind_name(op->kind), op->coll,
                                  c->n - c->arrived, c->n, missing);
            }
            return dm_err_set(err, "sim: deadlock: rank %d op %d (%s) never started (%d dependencies left, %s its stream)",
                              r, op->id, dm_op_kind_name(op->kind), s->deps_left[g],
                              is_head(s, g) ? "heads" : "not at the head of");
        }
    }
    return 0;
}

/* ---- results ------------------------------------------------------------------------------ */

static int cmp_contrib(const void *a, const void *b)
{
    const sim_contrib *x = a, *y = b;
    if (x->us != y->us) return x->us > y->us ? -1 : 1;
    return (x->kind > y->kind) - (x->kind < y->kind);
}

/* The critical path: back from the critical rank's last op along the causes. */
static int critical_path(sim *s, sim_result *r)
{
    int cr = r->crit_rank;
    for (int k = 0; k < DM_OP__COUNT; k++) r->crit[k].kind = (dm_op_kind)k;
    int g = -1;
    for (int x = s->off[cr]; x < s->off[cr + 1]; x++)
        if (g < 0 || s->end[x] >= s->end[g]) g = x;
    /* a shared run's path: a collective's cause is its last member's (the highest rank: a run of
     * every rank brings the members of one instant in rank order), where the path goes on */
    int shown = cr;
    for (int guard = 0; g >= 0 && guard <= s->T; guard++) {
        const dm_op *op = s->op[g];
        double d = s->end[g] - s->start[g];
        r->crit[op->kind].us += d;
        r->crit[op->kind].ops++;
        r->crit_total_us += d;
        sim_path_op po = {s->shared ? shown : s->rank_of[g], op->id, op->layer, op->kind, s->start[g], d};
        if (s->shared && dm_op_is_collective(op->kind)) {
            const dm_group *pg = &s->p->groups[op->group];
            shown = pg->ranks[pg->n - 1];
        }
        int i = r->n_top < SIM_PATH_TOP ? r->n_top++ : SIM_PATH_TOP;
        if (i == SIM_PATH_TOP && d <= r->top[SIM_PATH_TOP - 1].dur_us) {
            g = s->pcause[g];
            continue;
        }
        if (i == SIM_PATH_TOP) i = SIM_PATH_TOP - 1;
        while (i > 0 && r->top[i - 1].dur_us < d) {
            r->top[i] = r->top[i - 1];
            i--;
        }
        r->top[i] = po;
        g = s->pcause[g];
    }
    qsort(r->crit, DM_OP__COUNT, sizeof r->crit[0], cmp_contrib);
    r->n_crit = 0;
    while (r->n_crit < DM_OP__COUNT && r->crit[r->n_crit].ops > 0) r->n_crit++;
    return 0;
}

/* The events of rank k's executed ops (waits, which take no time and no GPU, left out, as in the
 * trace) into ev; returns their count. */
static int rank_events(const sim *s, int k, dm_trace_event *ev)
{
    int n = 0;
    for (int g = s->off[k]; g < s->off[k + 1]; g++) {
        const dm_op *op = s->op[g];
        if (op->kind == DM_OP_WAIT) continue;
        ev[n++] = (dm_trace_event){k, op->stream, op->id, op->kind, s->start[g], s->end[g] - s->start[g],
                                   op->bytes, op->flops, op->layer, op->coll, 0, op->payload};
    }
    return n;
}

/* K steps back to back (sim_opts.steps): the phases of rank k (its index in s) over the last
 * step's window, from the end of its step K-1's last op to its last end, every op clipped to it
 * (a step's tail that runs into the next counts in the next): the steady-state step. *first:
 * the end of its first step. ev: room for the rank's ops. */
static int steady_window(const sim *s, int k, int K, dm_trace_event *ev, dm_phases *out, double *first, dm_err *err)
{
    int per = (s->off[k + 1] - s->off[k]) / K, n = 0;
    double w0 = 0;
    *first = 0;
    for (int i = 0; i < per * K; i++) {
        int g = s->off[k] + i;
        if (i < per && s->end[g] > *first) *first = s->end[g];
        if (i >= (K - 2) * per && i < (K - 1) * per && s->end[g] > w0) w0 = s->end[g];
    }
    for (int g = s->off[k]; g < s->off[k + 1]; g++) {
        const dm_op *op = s->op[g];
        if (op->kind == DM_OP_WAIT || !(s->end[g] > w0)) continue;
        double a = s->start[g] > w0 ? s->start[g] : w0;
        ev[n++] = (dm_trace_event){k, op->stream, op->id, op->kind, a - w0, s->end[g] - a, op->bytes, op->flops, op->layer,
                                   op->coll, 0, op->payload};
    }
    int rank = out->rank;
    if (dm_phases_rank(ev, n, k, 0, out, err)) return -1;
    out->rank = rank;
    return 0;
}

/* The phases by the one step ruler (phases.h), as compare measures the simulator's trace: per
 * rank its NS load, the critical rank's step, forward, backward, optimizer, exposed communication
 * and collectives in flight. */
static int results(sim *s, sim_result *r, dm_err *err)
{
    r->nranks = s->R;
    int max_ops = 0, rc = -1;
    for (int k = 0; k < s->Rs; k++)
        if (s->off[k + 1] - s->off[k] > max_ops) max_ops = s->off[k + 1] - s->off[k];
    dm_trace_event *ev = dm_malloc(((size_t)max_ops + 1) * sizeof *ev, err);
    dm_phases ph; /* the critical rank's */
    double *last = dm_malloc((size_t)s->R * sizeof *last, err);
    if (!ev || !last) goto out;
    /* Per rank its step (last end) and NS time by the phase ruler's own rule (dm_phases_add_op,
     * over the ops rank_events gives it: the same doubles); the ruler itself runs on the critical
     * rank alone (at 4096 ranks its per-rank interval unions cost more than the rest) */
    for (int k = 0; k < s->R; k++) {
        if (s->shared && k > 0) { /* rank 0's are every rank's */
            last[k] = last[0];
            r->ns_us[k] = r->ns_us[0];
        } else {
            last[k] = r->ns_us[k] = 0;
            for (int g = s->off[k]; g < s->off[k + 1]; g++)
                if (kind_of(s, g) != DM_OP_WAIT)
                    dm_phases_add_op(kind_of(s, g), s->start[g], s->end[g] - s->start[g], &last[k], &r->ns_us[k]);
        }
        if (r->ns_us[k] > r->ns_max_us) r->ns_max_us = r->ns_us[k], r->ns_max_rank = k;
        r->ns_mean_us += r->ns_us[k] / s->R;
    }
    int cr = r->crit_rank = dm_phases_critical_rank(last, s->R);
    if (dm_phases_rank(ev, rank_events(s, s->shared ? 0 : cr, ev), s->shared ? 0 : cr, 0, &ph, err)) goto out;
    ph.rank = cr;
    int K = s->o.steps > 1 ? s->o.steps : 1;
    r->steps = K;
    if (K > 1 && steady_window(s, s->shared ? 0 : cr, K, ev, &ph, &r->first_step_us, err)) goto out;
    if (K > 1)
        for (int k = 0; k < s->R; k++) r->ns_us[k] /= K;
    r->ns_max_us /= K, r->ns_mean_us /= K;
    r->step_us = ph.us[DM_PHASE_STEP];
    r->forward_us = ph.us[DM_PHASE_FORWARD];
    r->backward_us = ph.us[DM_PHASE_BACKWARD];
    r->optimizer_us = ph.us[DM_PHASE_OPTIMIZER];
    r->exposed_comm_us = ph.us[DM_PHASE_EXPOSED_COMM];
    r->comm_busy_us = ph.us[DM_PHASE_COMM_BUSY];
    rc = 0;
out:
    free(ev);
    free(last);
    return rc ? -1 : critical_path(s, r);
}

static int make_trace(sim *s, sim_result *r, dm_err *err)
{
    if (!(r->trace = dm_trace_new("sim", s->p, err))) return -1;
    for (int k = 0; k < (s->shared ? s->R : 1); k++) /* a shared run: rank 0's ops for every rank */
        for (int g = 0; g < s->T; g++) {
            const dm_op *op = s->op[g];
            if (op->kind == DM_OP_WAIT) continue;
            dm_trace_event e = {s->shared ? k : s->rank_of[g], op->stream, op->id, op->kind, s->start[g],
                                s->end[g] - s->start[g], op->bytes, op->flops, op->layer, op->coll,
                                dm_op_is_collective(op->kind) ? s->start[g] - s->ready[g] : 0, op->payload};
            if (dm_trace_add(r->trace, &e, err)) return -1;
        }
    dm_trace_sort(r->trace);
    return 0;
}

static void sim_free(sim *s)
{
    free(s->start); /* (NULL once handed to the result) */
    free(s->end);
    free(s->ready);
    free(s->off);
    free(s->rank_of);
    free(s->op);
    free(s->deps_left);
    free(s->cause);
    free(s->pcause);
    free(s->state);
    free(s->dur);
    free(s->succ_off);
    free(s->succ);
    free(s->sl);
    free(s->sl_off);
    free(s->head);
    free(s->gpu_busy);
    free(s->gpu_last);
    free(s->gpu_free);
    free(s->gpu_run);
    free(s->coll_active);
    free(s->gpu_rem);
    free(s->gpu_t);
    free(s->gpu_rate);
    free(s->gpu_ver);
    free(s->pw_st);
    free(s->pw_t);
    free(s->pw_P);
    free(s->colls);
    free(s->coll_mem);
    free(s->ks);
    free(s->coll_of);
    if (s->grps)
        for (int g = 0; g < s->p->n_groups; g++) {
            free(s->grps[g].links);
            free(s->grps[g].w);
        }
    free(s->grps);
    free(s->ns_cache);
    free(s->work_us[0]);
    free(s->work_us[1]);
    free(s->work_mem[0]);
    free(s->work_mem[1]);
    sim_heap_free(&s->h);
    sim_net_free(s->net);
}

void sim_result_free(sim_result *r)
{
    if (!r) return;
    free(r->ns_us);
    free(r->op_off);
    free(r->start_us);
    free(r->end_us);
    free(r->ready_us);
    dm_trace_free(r->trace);
    free(r);
}

static void sim_init(sim *s, const dm_program *p, const dm_cluster *c, const sim_opts *o)
{
    memset(s, 0, sizeof *s);
    s->p = p;
    s->c = c;
    if (o) s->o = *o;
    else sim_opts_default(&s->o);
    sim_heap_init(&s->h);
}

int sim_cluster_uniform(const dm_cluster *c)
{
    return !(c->comm_slowdown > 0) && !(c->coll_slowdown > 0) && !dm_power_on(&c->power);
}

int sim_shared_ranks(const dm_program *p, const dm_cluster *c, const sim_opts *o)
{
    if ((o && o->full_ranks) || p->nranks < 2 || !sim_cluster_uniform(c)) return 0;
    const dm_rank_prog *r0 = &p->ranks[0];
    for (int r = 1; r < p->nranks; r++)
        if (p->ranks[r].ops != r0->ops || p->ranks[r].n_ops != r0->n_ops) return 0;
    for (int i = 0; i < r0->n_ops; i++) {
        const dm_op *op = &r0->ops[i];
        if (dm_op_is_collective(op->kind) &&
            (op->group < 0 || op->group >= p->n_groups || p->groups[op->group].n != p->nranks))
            return 0;
    }
    return 1;
}

/* The per-op counts of the cost sources, of rank 0's ops in a shared run: every rank's. */
static void count_every_rank(sim *s)
{
    int R = s->R;
    for (int i = 0; i < 4; i++) s->ns_src_count[i] *= R;
    for (int w = 0; w < 2; w++) {
        for (int i = 0; i < 6; i++) s->elem_src_count[w][i] *= R;
        s->elem_ops[w] *= R;
        s->ops_with_work[w] *= R;
        s->ops_without_work[w] *= R;
    }
}

/* 0, or -1 on an error, -2 on a deadlock. */
static int run_once(const dm_program *p, const dm_cluster *c, const sim_opts *o, int shared, sim_result **out,
                    dm_err *err);

int sim_run(const dm_program *p, const dm_cluster *c, const sim_opts *o, sim_result **out, dm_err *err)
{
    /* K steps: the steps back to back in one program, the last one's window taken by results */
    dm_program *q = NULL;
    if (o && o->steps > 1 && dm_program_unroll(p, o->steps, &q, err)) return -1;
    const dm_program *pr = q ? q : p;
    int shared = sim_shared_ranks(pr, c, o), rc = run_once(pr, c, o, shared, out, err);
    /* a shared run that deadlocks: the run of every rank names the stuck op and rank as it is */
    rc = rc == -2 && shared ? run_once(pr, c, o, 0, out, err) : rc ? -1 : 0;
    dm_program_free(q);
    return rc;
}

static int run_once(const dm_program *p, const dm_cluster *c, const sim_opts *o, int shared, sim_result **out,
                    dm_err *err)
{
    *out = NULL;
    sim s;
    sim_init(&s, p, c, o);
    s.shared = shared;
    sim_result *r = dm_calloc(1, sizeof *r, err);
    if (!r) return -1;
    double t0 = dm_clock_us() * 1e-6, c0 = cpu_s(), t1 = t0, c1 = c0;
    dm_power_st *D0 = NULL;
    /* Under the power model a step starts at the demand the previous one ended at: the step is
     * run again from its own end state until that settles (the steady state; at most
     * SIM_POWER_PASSES runs, each rank's end demand within 1 W of the one it started at). */
    for (int pass = 0;; pass++) {
        s.pw_st0 = D0;
        if (setup(&s, err)) goto fail;
        if (!pass) t1 = dm_clock_us() * 1e-6, c1 = cpu_s();
        if (!s.stopped && run(&s, err)) goto fail; /* (stopped: by the bound, at setup) */
        if (s.stopped || !power_on(&s) || pass + 1 == SIM_POWER_PASSES) { /* (stopped: no power model) */
            r->power_passes = pass + 1;
            break;
        }
        if (!D0 && !(D0 = dm_malloc((size_t)s.R * sizeof *D0, err))) goto fail;
        double moved = 0;
        for (int k = 0; k < s.R; k++) { /* idle from its last op to the step's end, then the next step */
            double was = pass ? D0[k].D : c->power.idle_w;
            power_touch(&s, k);
            if (fabs(s.pw_st[k].D - was) > moved) moved = fabs(s.pw_st[k].D - was);
            D0[k] = s.pw_st[k];
        }
        r->power_passes = pass + 1;
        if (moved < 1) break; /* this pass started where it ends */
        sim_free(&s);
        sim_init(&s, p, c, o);
        s.shared = shared;
    }
    if (power_on(&s)) {
        double lo = 1, hi = 0;
        for (int k = 0; k < s.R; k++) {
            double x = dm_power_clock(&c->power, s.pw_st0 ? s.pw_st0[k].D : c->power.idle_w);
            if (x < lo) lo = x;
            if (x > hi) hi = x;
        }
        char fall[96] = "";
        int nf = 0;
        if (c->power.tau_fall_ms > 0 && c->power.tau_fall_ms != c->power.tau_ms)
            nf = snprintf(fall, sizeof fall, ", %.0f ms falling", c->power.tau_fall_ms);
        if (c->power.hold_ms > 0)
            snprintf(fall + nf, sizeof fall - (size_t)nf, ", held %.0f ms first", c->power.hold_ms);
        snprintf(r->power_src, sizeof r->power_src, "power limit %.0f W (tau %.0f ms%s; GEMM %.0f W, copies %.0f W at full "
                 "clock): compute-bound kernels slowed by each rank's clock; the step from the steady state (%d run%s), "
                 "its start at %.3f-%.3f of full clock",
                 c->power.limit_w, c->power.tau_ms, fall, c->power.gemm_w, c->power.copy_w, r->power_passes,
                 r->power_passes == 1 ? "" : "s", lo, hi);
    }
    free(D0);
    D0 = NULL;
    r->wall_s = dm_clock_us() * 1e-6 - t1;
    r->cpu_s = cpu_s() - c1;
    r->setup_s = t1 - t0;
    r->setup_cpu_s = c1 - c0;
    /* a shared run's rank events stand for every rank's, the cluster's happen once */
    r->events = s.shared ? (s.events - s.ev_global) * s.R + s.ev_global : s.events;
    r->ops = (int64_t)s.T * (s.shared ? s.R : 1);
    if (s.stopped) { /* past sim_opts.stop_us: only that is said */
        r->stopped = 1;
        r->nranks = s.R;
        r->step_us = s.now;
        r->steps = 1;
        sim_free(&s);
        *out = r;
        return 0;
    }
    if (!(r->ns_us = dm_calloc((size_t)s.R, sizeof(double), err)) || results(&s, r, err))
        goto fail;
    if (s.shared) count_every_rank(&s);
    describe_sources(&s, r);
    r->rate_updates = sim_net_recomputes(s.net);
    sim_links_collect(s.net, c, s.R, s.now, &r->links);
    if (s.o.record_trace && make_trace(&s, r, err)) goto fail;
    /* Hand the per-op arrays to the result (a shared run: every rank's entries are rank 0's). */
    if (s.shared) {
        if (!(r->op_off = dm_calloc((size_t)s.R + 1, sizeof *r->op_off, err))) goto fail;
        r->op_off[s.R] = s.T;
    } else {
        r->op_off = s.off, s.off = NULL;
    }
    r->start_us = s.start, s.start = NULL;
    r->end_us = s.end, s.end = NULL;
    r->ready_us = s.ready, s.ready = NULL;
    sim_free(&s);
    *out = r;
    return 0;
fail:
    free(D0);
    sim_free(&s);
    sim_result_free(r);
    return s.deadlock ? -2 : -1;
}
