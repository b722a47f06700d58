/* sim_mem.c: the simulator's memory estimate and the check against a limit (sim_mem.h). The
 * plan counts follow sched/build.c's emission: per layer, the fetch collectives (before the
 * forward) and gradient collectives (after the backward) of each strategy, one op per member
 * rank carrying the descriptor's parameters; a forward and a backward per layer and rank
 * carrying the layer's matrices; NS batches and their updates on their owners; AdamW per layer
 * and rank. Byte costs per count are the structures' sizes plus allocator overhead, measured
 * against peak resident size (see the comment at sim_mem_bytes). */
#include "sim_mem.h"

#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "sim.h" /* sim_shared_ranks, sim_cluster_uniform */
#include "trace.h"

/* ---- counts of a plan not yet built ------------------------------------------------------- */

typedef struct layer_stat {
    int64_t n, mu, aw;  /* matrices of the layer: all, Muon, AdamW */
    int64_t large;      /* Muon matrices at or over the batching threshold: one unit each */
    int64_t small;      /* Muon matrices under it: one unit together */
    int64_t small_batches; /* their NS batches, at most max_batch per entry */
} layer_stat;

/* Per-layer statistics through difference arrays over each entry's layer range, so the work is
 * entries plus layers (a model may have 10^6 layers and 10^5 entries). NULL when out of memory. */
static layer_stat *layer_stats(const dm_model *m, int64_t threshold, int max_batch, int64_t *L_out, dm_err *err)
{
    int64_t L = m->n_layers > 0 ? m->n_layers : 1;
    layer_stat *d = dm_calloc((size_t)L + 1, sizeof *d, err);
    if (!d) return NULL;
    for (int i = 0; i < m->n_tensors; i++) {
        const dm_tensor *t = &m->tensors[i];
        int64_t g0 = m->stacks[t->stack].first_global + t->first_layer, g1 = g0 + t->layer_span;
        if (g0 < 0 || g1 > L || g0 >= g1) continue;
        int64_t per = t->count / t->layer_span;
        layer_stat x = {per, 0, 0, 0, 0, 0};
        if (t->role == DM_ROLE_MUON) {
            x.mu = per;
            if (t->rows * t->cols >= threshold) x.large = per;
            else x.small = per, x.small_batches = (per + max_batch - 1) / max_batch;
        } else {
            x.aw = per;
        }
        d[g0].n += x.n, d[g0].mu += x.mu, d[g0].aw += x.aw, d[g0].large += x.large, d[g0].small += x.small;
        d[g0].small_batches += x.small_batches;
        d[g1].n -= x.n, d[g1].mu -= x.mu, d[g1].aw -= x.aw, d[g1].large -= x.large, d[g1].small -= x.small;
        d[g1].small_batches -= x.small_batches;
    }
    for (int64_t l = 1; l < L; l++) {
        d[l].n += d[l - 1].n, d[l].mu += d[l - 1].mu, d[l].aw += d[l - 1].aw;
        d[l].large += d[l - 1].large, d[l].small += d[l - 1].small, d[l].small_batches += d[l - 1].small_batches;
    }
    *L_out = L;
    return d;
}

static int64_t min64(int64_t a, int64_t b) { return a < b ? a : b; }

/* Muon matrices per shape (m <= n, as the scheduler keys its NS batches), from the entries
 * sorted by shape; returns the number of shapes written to count[] (at most n_tensors). */
typedef struct shape_n {
    int64_t m, n, count;
} shape_n;

static int cmp_shape(const void *a, const void *b)
{
    const shape_n *x = a, *y = b;
    if (x->m != y->m) return x->m < y->m ? -1 : 1;
    return (x->n > y->n) - (x->n < y->n);
}

static int muon_shapes(const dm_model *m, shape_n *sh)
{
    int k = 0;
    for (int i = 0; i < m->n_tensors; i++) {
        const dm_tensor *t = &m->tensors[i];
        if (t->role != DM_ROLE_MUON) continue;
        sh[k].m = t->rows < t->cols ? t->rows : t->cols;
        sh[k].n = t->rows < t->cols ? t->cols : t->rows;
        sh[k++].count = t->count;
    }
    if (k > 1) qsort(sh, (size_t)k, sizeof *sh, cmp_shape);
    int u = 0;
    for (int i = 0; i < k; i++) {
        if (u && sh[u - 1].m == sh[i].m && sh[u - 1].n == sh[i].n) sh[u - 1].count += sh[i].count;
        else sh[u++] = sh[i];
    }
    return u;
}

/* One kind of collective descriptor: `descs` of them, each an op on `members` ranks carrying
 * `params` parameters per op in all descriptors together. */
typedef struct tally {
    int64_t ops, params, held, colls, fetch_ops, opt_ops;
} tally;

static void coll(tally *t, int fetch, int64_t descs, int64_t members, int64_t params_each_member)
{
    t->ops += descs * members;
    t->params += members * params_each_member;
    t->held += params_each_member; /* the members' ops carry one list */
    t->colls += descs;
    if (fetch) t->fetch_ops += descs * members;
}

int sim_mem_plan_size(const dm_model *m, const dm_cluster *c, int nranks, const sched_opts *o, sim_mem_size *out,
                      dm_err *err)
{
    memset(out, 0, sizeof *out);
    int64_t R = nranks > 0 ? nranks : 1, L = 1;
    sched_opts eff; /* the batch size the build uses (the PyTorch form of the naive ones: 1) */
    sched_opts_effective(o, &eff);
    int MB = eff.max_batch > 0 ? eff.max_batch : 1;
    int64_t gpn = o->gpus_per_node > 0 ? o->gpus_per_node : c->gpus_per_node;
    if (gpn > R) gpn = R;
    if (gpn < 1) gpn = 1;
    int64_t nodes = (R + gpn - 1) / gpn;
    int hier = o->strategy == SCHED_DMUON && o->hierarchical;
    int z3 = o->zero == 3 && o->strategy != SCHED_MUON_DDP && o->strategy != SCHED_MUON_RR;
    layer_stat *ls = layer_stats(m, o->batch_threshold, MB, &L, err);
    if (!ls) return -1;
    tally f = {0}, g = {0}; /* fetch and gradient collectives */
    int64_t N = 0, M = 0, AW = 0, adamw_layers = 0, batches = 0, batches_everywhere = 0;
    /* NS batches: every rank's (muon-ddp, muon-fsdp) hold max_batch matrices of one shape;
     * dmuon's are counted per unit (a large matrix, or a layer's small ones in chunks), which
     * is from above when an owner re-batches one shape across layers (few ranks) */
    shape_n *sh = dm_malloc(((size_t)m->n_tensors + 1) * sizeof *sh, err);
    if (!sh) {
        free(ls);
        return -1;
    }
    int n_sh = muon_shapes(m, sh);
    for (int i = 0; i < n_sh; i++) batches_everywhere += (sh[i].count + MB - 1) / MB;
    free(sh);
    for (int64_t l = 0; l < L; l++) {
        const layer_stat *x = &ls[l];
        N += x->n, M += x->mu, AW += x->aw;
        batches += x->large + x->small_batches;
        if (o->strategy == SCHED_ADAMW ? x->n > 0 : x->aw > 0) adamw_layers++;
        if (!x->n) continue;
        int64_t units = x->large + (x->small > 0);
        switch (o->strategy) {
        case SCHED_ADAMW:
            coll(&f, 1, 1, R, x->n);
            coll(&g, 0, 1, R, x->n);
            break;
        case SCHED_MUON_DDP: coll(&g, 0, 1, R, x->n); break;
        case SCHED_MUON_FSDP:
            coll(&f, 1, 1, R, x->n);
            coll(&g, 0, 1, R, x->n);
            /* the gradients' gathers: one per layer (tuned), one per matrix (PyTorch form) */
            if (x->mu) coll(&g, 0, sched_opts_pytorch_form(o) ? x->mu : 1, R, x->mu);
            break;
        case SCHED_MUON_RR: coll(&g, 0, 1, R, x->n); break;
        case SCHED_DMUON:
            if (!hier) { /* a broadcast and a reduce per owner of the layer's matrices */
                int64_t owners = min64(R, units);
                coll(&f, 1, owners, R, x->mu);
                coll(&g, 0, owners, R, x->mu);
            } else { /* the same in each node's group, and an all-reduce across nodes per owner */
                int64_t owners = min64(gpn, units);
                coll(&f, 1, owners * nodes, gpn, x->mu * nodes);
                coll(&g, 0, owners * nodes, gpn, x->mu * nodes);
                if (nodes > 1) coll(&g, 0, owners, nodes, x->mu);
            }
            if (x->aw) { /* AdamW parameters sharded */
                coll(&f, 1, 1, R, x->aw);
                coll(&g, 0, 1, R, x->aw);
            }
            break;
        }
    }
    free(ls);
    if (o->strategy == SCHED_MUON_RR && M > 0) coll(&f, 1, (M + R - 1) / R, R, M); /* chunk all-gathers */
    int64_t zf = z3 ? 2 : 1;
    int64_t ns_ops = 0, ns_params = 0; /* NS batches and their Muon updates */
    switch (o->strategy) {
    case SCHED_ADAMW: break;
    case SCHED_MUON_DDP:
    case SCHED_MUON_FSDP: ns_ops = 2 * batches_everywhere * R, ns_params = 2 * M * R; break;
    case SCHED_MUON_RR: ns_ops = 2 * M, ns_params = 2 * M; break;
    case SCHED_DMUON:
        ns_ops = 2 * batches * (hier ? nodes : 1), ns_params = 2 * M * (hier ? nodes : 1);
        break;
    }
    int64_t aw_ops = adamw_layers * R, aw_params = (o->strategy == SCHED_ADAMW ? N : AW) * R;
    int64_t coll_ops = f.ops * zf + g.ops;
    out->ranks = R;
    out->lists = o->strategy == SCHED_ADAMW || o->strategy == SCHED_MUON_DDP || o->strategy == SCHED_MUON_FSDP ? 1 : R;
    out->sim_ranks = out->lists == 1 && sim_cluster_uniform(c) ? 1 : R;
    out->layers = L;
    out->matrices = N;
    out->colls = f.colls * zf + g.colls;
    out->ops = coll_ops + 2 * L * R + ns_ops + aw_ops;
    out->params = f.params * zf + g.params + 2 * N * R + ns_params + aw_params;
    /* stored once per distinct list: a collective's, a layer's (its forward and backward on
     * every rank), an NS batch's (its update's too), a layer's AdamW */
    out->params_held = f.held + g.held + N + M + (o->strategy == SCHED_ADAMW ? N : AW);
    /* a collective waits on at most one op; a forward on its layer's fetch ops, a backward on
     * its re-fetch (zero 3); an NS batch on the gradients of its layer(s), an update on its NS */
    out->deps = coll_ops + f.ops * zf + ns_ops + aw_ops;
    if (o->strategy == SCHED_MUON_FSDP && sched_opts_pytorch_form(o)) /* each NS and AdamW op after the previous update */
        out->deps += batches_everywhere * R + aw_ops;
    return 0;
}

void sim_mem_program_size(const dm_program *p, sim_mem_size *out)
{
    memset(out, 0, sizeof *out);
    out->ranks = p->nranks;
    out->lists = dm_program_distinct_lists(p);
    out->sim_ranks = p->nranks;
    out->params_held = dm_program_params_held(p);
    out->colls = p->n_colls;
    int64_t deps = 0, params = 0; /* of the rank before, counted again for a rank on its list */
    for (int r = 0; r < p->nranks; r++) {
        const dm_rank_prog *rp = &p->ranks[r];
        out->ops += rp->n_ops;
        if (!dm_rank_same_list_as_prev(p, r)) {
            deps = params = 0;
            for (int i = 0; i < rp->n_ops; i++) {
                deps += rp->ops[i].n_deps;
                params += rp->ops[i].n_params;
                if (rp->ops[i].layer + 1 > out->layers) out->layers = rp->ops[i].layer + 1;
            }
        }
        out->deps += deps;
        out->params += params;
    }
}

/* ---- bytes -------------------------------------------------------------------------------- */

/* Per count (bytes): the structures' sizes plus what glibc's allocator adds per block (a
 * 16-byte header, 32-byte minimum blocks): an op is a dm_op in its rank's array and its deps in
 * the rank's arena (each rounded up to 8 bytes), once per distinct list (ranks with equal lists
 * share one, core/program.h), its params once per distinct params list; the simulator keeps,
 * for the ranks it holds (rank 0's alone in a shared run), 77 bytes of per-op state (indexes,
 * four times, the state byte, kind and collective id, successor and stream lists) and 4 per
 * dependency (its successor entry); the scheduler ~40 per matrix (its sorted copy, assignment
 * items) and 8 int tables per (rank, layer). A trace event is a dm_trace_event. Checked against
 * peak resident size in tests/test_sim_mem (the estimate is within [0.8, 2] of the measured
 * growth there). */
#define OP_BLOCKS 8.0
#define SIM_PER_OP 77.0
#define SIM_PER_DEP 4.0
#define SCHED_PER_MATRIX 96.0
#define SCHED_PER_RANK_LAYER 32.0

double sim_mem_bytes(const sim_mem_size *s, int parts)
{
    double ops = (double)s->ops, deps = (double)s->deps;
    double held = s->ranks > 0 && s->lists > 0 && s->lists < s->ranks ? (double)s->lists / (double)s->ranks : 1;
    double program = (ops * ((double)sizeof(dm_op) + OP_BLOCKS) + deps * 4) * held + (double)s->params_held * 8 +
                     (double)s->ranks * sizeof(dm_rank_prog);
    double sched = (double)s->matrices * SCHED_PER_MATRIX + (double)s->ranks * (double)s->layers * SCHED_PER_RANK_LAYER;
    double simulated = s->ranks > 0 && s->sim_ranks > 0 && s->sim_ranks < s->ranks ? (double)s->sim_ranks / (double)s->ranks : 1;
    double sim = (ops * SIM_PER_OP + deps * SIM_PER_DEP) * simulated + (double)s->colls * 32 + (double)s->ranks * 256;
    double trace = ops * sizeof(dm_trace_event);
    return (parts & SIM_MEM_PROGRAM ? program : 0) + (parts & SIM_MEM_SCHED ? sched : 0) +
           (parts & SIM_MEM_SIM ? sim : 0) + (parts & SIM_MEM_TRACE ? trace : 0);
}

/* ---- the limit ---------------------------------------------------------------------------- */

static int64_t read_int64_file(const char *path)
{
    FILE *f = fopen(path, "r");
    long long v = -1;
    if (!f) return -1;
    if (fscanf(f, "%lld", &v) != 1) v = -1; /* "max" (no limit) reads as -1 */
    fclose(f);
    return v;
}

int64_t sim_mem_default_limit(void)
{
    long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGE_SIZE);
    int64_t phys = pages > 0 && page > 0 ? (int64_t)pages * page : (int64_t)8 << 30;
    int64_t cg = read_int64_file("/sys/fs/cgroup/memory.max"); /* cgroup v2 */
    if (cg <= 0) cg = read_int64_file("/sys/fs/cgroup/memory/memory.limit_in_bytes"); /* v1 */
    if (cg > 0 && cg < phys) phys = cg;
    return phys / 4 * 3;
}

/* Resident size now (Linux /proc/self/statm) less the heap's free blocks (freed by an earlier
 * point of a study, still resident, and reused before the heap grows); 0 when unknown. */
static double resident_bytes(void)
{
    FILE *f = fopen("/proc/self/statm", "r");
    long long size, res = 0;
    if (!f) return 0;
    if (fscanf(f, "%lld %lld", &size, &res) != 2) res = 0;
    fclose(f);
    double b = (double)res * (double)sysconf(_SC_PAGE_SIZE);
#ifdef __GLIBC__
    struct mallinfo2 mi = mallinfo2();
    b -= (double)mi.fordblks;
#endif
    return b > 0 ? b : 0;
}

/* bytes for a message: "8.3 GB", "640 MB" */
static const char *human(double b, char *buf, size_t n)
{
    if (b >= 1e9) snprintf(buf, n, "%.1f GB", b / 1e9);
    else snprintf(buf, n, "%.0f MB", b / 1e6);
    return buf;
}

int sim_mem_check(const sim_mem_size *s, int parts, int64_t limit_bytes, const char *what, dm_err *err)
{
    if (s->ops > INT32_MAX || s->deps > INT32_MAX)
        return dm_err_set(err, "the simulation of %s would hold %.3g ops and %.3g dependencies: the simulator counts "
                          "at most %d of each", what, (double)s->ops, (double)s->deps, INT32_MAX);
    if (limit_bytes <= 0) return 0;
    double need = sim_mem_bytes(s, parts), now = resident_bytes();
    if (need + now <= (double)limit_bytes) return 0;
    char b1[32], b2[32], b3[32], b4[48] = "";
    if (s->params > 0) snprintf(b4, sizeof b4, ", %.3g parameter references", (double)s->params);
    return dm_err_set(err,
                      "the simulation of %s would need about %s (%.3g ops, %.3g dependencies%s%s; the process holds "
                      "%s now), over the limit of %s (--max-memory SIZE to change it)",
                      what, human(need + now, b1, sizeof b1), (double)s->ops, (double)s->deps, b4,
                      parts & SIM_MEM_TRACE ? ", a trace" : "", human(now, b2, sizeof b2),
                      human((double)limit_bytes, b3, sizeof b3));
}

/* ---- the checks `dmuon sim` and `dmuon scale` make ---------------------------------------- */

int sim_mem_plan_checked_later(const sched_opts *o)
{
    return o->strategy == SCHED_DMUON && o->balance == SCHED_BAL_AUTO && !o->hierarchical;
}

double sim_mem_max_ops(int nranks, int64_t limit_bytes)
{
    if (limit_bytes < 0) limit_bytes = sim_mem_default_limit();
    if (limit_bytes == 0) return INT32_MAX; /* what the simulator indexes, whatever the limit */
    sim_mem_size s0 = {0}, s1;
    s0.ranks = s0.lists = nranks;
    s1 = s0;
    s1.ops = s1.deps = 1000000;
    int parts = SIM_MEM_PROGRAM | SIM_MEM_SIM;
    double base = sim_mem_bytes(&s0, parts), per_op = (sim_mem_bytes(&s1, parts) - base) / 1e6;
    double left = (double)limit_bytes - resident_bytes() - base;
    return left > (double)INT32_MAX * per_op ? INT32_MAX : left > per_op ? left / per_op : 1;
}

int sim_mem_check_plan(const dm_model *m, const dm_cluster *c, int nranks, const sched_opts *o, int record_trace,
                       int64_t limit_bytes, dm_err *err)
{
    sim_mem_size s;
    char what[256];
    if (sim_mem_plan_checked_later(o)) return 0;
    if (sim_mem_plan_size(m, c, nranks, o, &s, err)) return -1;
    snprintf(what, sizeof what, "%s %s on %d GPUs", m->name, sched_strategy_name(o->strategy), nranks);
    int parts = SIM_MEM_PROGRAM | SIM_MEM_SCHED | SIM_MEM_SIM | (record_trace ? SIM_MEM_TRACE : 0);
    return sim_mem_check(&s, parts, limit_bytes < 0 ? sim_mem_default_limit() : limit_bytes, what, err);
}

int sim_mem_check_program(const dm_program *p, const dm_cluster *c, int record_trace, int64_t limit_bytes, dm_err *err)
{
    sim_mem_size s;
    char what[256];
    sim_mem_program_size(p, &s);
    if (c && sim_shared_ranks(p, c, NULL)) s.sim_ranks = 1;
    snprintf(what, sizeof what, "%s %s on %d GPUs", p->model, p->strategy, p->nranks);
    int parts = SIM_MEM_SIM | (record_trace ? SIM_MEM_TRACE : 0);
    return sim_mem_check(&s, parts, limit_bytes < 0 ? sim_mem_default_limit() : limit_bytes, what, err);
}
