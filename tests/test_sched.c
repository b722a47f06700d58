/* test_sched.c: owner assignment (round-robin, LPT, MILP) and program generation: every matrix
 * owned once, batches consistent, same-layer spreading, determinism, MILP never worse than LPT,
 * LPT within Graham's bound against brute-force optima, a hand-checkable optimum, option
 * parsing, and the programs of every strategy and overlap level on a bundled model. The
 * communication-aware objective (issue 16): hand-checked values, the bound and the MILP against
 * brute-force optima, the collectives a plan creates on Moonlight-16B at 256 GPUs (the NS-only
 * MILP's 10x blow-up), and --balance auto (sim/plan_best.h) never slower than its candidates;
 * muon-ddp's optimizer loop after the last gradient all-reduce. */
#define _GNU_SOURCE
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "holds.h"
#include "plan_best.h"
#include "sched.h"
#include "sim.h"
#include "tap.h"

/* A problem with `ns` shapes whose batch of b costs launch + b * per[s]. */
typedef struct tprob {
    sched_problem p;
    double cost[16 * 32];
    int64_t elems[16];
    sched_item items[256];
} tprob;

static void tprob_init(tprob *t, int ns, const double *per, double launch, int max_batch, int nowners)
{
    memset(t, 0, sizeof *t);
    t->p.n_shapes = ns;
    t->p.max_batch = max_batch;
    t->p.cost = t->cost;
    t->p.items = t->items;
    t->p.nowners = nowners;
    t->p.shape_elems = t->elems;
    t->p.threshold_elems = 0; /* no packing unless a test sets it */
    for (int s = 0; s < ns; s++) {
        t->elems[s] = 1000000 * (s + 1);
        for (int b = 1; b <= max_batch; b++) t->cost[s * max_batch + b - 1] = launch + b * per[s];
    }
}

static void add_item(tprob *t, int shape, int layer)
{
    sched_item *it = &t->items[t->p.n_items];
    it->shape = shape;
    it->layer = layer;
    it->id = t->p.n_items++;
}

/* owner in range, one owner and shape per batch, loads = sum of batch costs */
static int consistent(const sched_problem *p, const sched_assign *a)
{
    int *bo = calloc((size_t)a->n_batches + 1, sizeof *bo), *bs = calloc((size_t)a->n_batches + 1, sizeof *bs);
    int *bn = calloc((size_t)a->n_batches + 1, sizeof *bn), good = 1;
    double *load = calloc((size_t)p->nowners, sizeof *load), mx = 0;
    for (int k = 0; k < a->n_batches; k++) bo[k] = -1;
    for (int i = 0; i < p->n_items && good; i++) {
        int b = a->batch_of[i], o = a->owner[i];
        if (o < 0 || o >= p->nowners || b < 0 || b >= a->n_batches) good = 0;
        else if (bo[b] >= 0 && (bo[b] != o || bs[b] != p->items[i].shape)) good = 0;
        else {
            bo[b] = o;
            bs[b] = p->items[i].shape;
            bn[b]++;
        }
    }
    for (int k = 0; k < a->n_batches && good; k++) {
        if (bn[k] < 1 || bn[k] > p->max_batch) good = 0;
        else load[bo[k]] += p->cost[bs[k] * p->max_batch + bn[k] - 1];
    }
    for (int o = 0; o < p->nowners && good; o++) {
        if (fabs(load[o] - a->load_us[o]) > 1e-6 * fmax(1, load[o])) good = 0;
        mx = fmax(mx, load[o]);
    }
    if (good && fabs(mx - a->makespan_us) > 1e-6 * fmax(1, mx)) good = 0;
    free(bo);
    free(bs);
    free(bn);
    free(load);
    return good;
}

static unsigned lcg_state = 12345;
static unsigned lcg(void) { return lcg_state = lcg_state * 1103515245u + 12345u, (lcg_state >> 16) & 0x7fff; }

/* The objective of an assignment of batch-1 items (max_batch 1), from the definition in sched.h. */
static double objective_of(const tprob *t, const int *asg)
{
    const sched_problem *p = &t->p;
    double chain[8] = {0}, mx = 0;
    int pairs = 0, has[8][16] = {{0}};
    for (int i = 0; i < p->n_items; i++) {
        int o = asg[i], l = p->items[i].layer;
        chain[o] += t->cost[p->items[i].shape * p->max_batch] + p->owner_elem_us * (double)t->elems[p->items[i].shape];
        if (!has[o][l]) {
            has[o][l] = 1;
            pairs++;
            chain[o] += p->owner_pair_us;
        }
    }
    for (int o = 0; o < p->nowners; o++) mx = fmax(mx, chain[o]);
    return mx + p->pair_us * pairs;
}

/* Brute-force optimum of the objective (batch-1 costs) on m owners. */
static double brute_objective(const tprob *t)
{
    int n = t->p.n_items, m = t->p.nowners, asg[16] = {0};
    double best = INFINITY;
    for (;;) {
        best = fmin(best, objective_of(t, asg));
        int i = 0;
        while (i < n && ++asg[i] == m) asg[i++] = 0;
        if (i == n) break;
    }
    return best;
}

/* Brute-force optimum of items with batch-1 costs (max_batch 1) on m owners. */
static double brute_opt(const tprob *t)
{
    int n = t->p.n_items, m = t->p.nowners;
    double best = INFINITY;
    int asg[16] = {0};
    for (;;) {
        double load[8] = {0}, mx = 0;
        for (int i = 0; i < n; i++) load[asg[i]] += t->cost[t->items[i].shape * t->p.max_batch];
        for (int o = 0; o < m; o++) mx = fmax(mx, load[o]);
        best = fmin(best, mx);
        int i = 0;
        while (i < n && ++asg[i] == m) asg[i++] = 0;
        if (i == n) break;
    }
    return best;
}

/* Replicated plans (adamw, muon-ddp, muon-fsdp and their forms, any overlap and zero) emit rank
 * 0's ops once, every other rank sharing them (build.c's replicated_plan): the same program as
 * an emission for every rank, op for op and hash for hash; dmuon and muon-rr are emitted per rank. */
/* The update ops price what the executor updates: for dmuon (flat, and HSDP's shard groups) each
 * rank's AdamW ops carry one kernel per tensor piece its reduce-scatter shard gives it, and
 * their elements equal the state rule's AdamW ranges for that rank (core/holds.h, what both
 * executors update); the pieces differ from rank to rank; over the ranks (of one replica)
 * they add up to the model's AdamW elements. */
static void test_update_pieces(const dm_cluster *cl, const dm_costs *costs)
{
    dm_err err = {{0}};
    dm_model *m = NULL;
    dm_matrix *mx = NULL;
    int64_t nmx = 0;
    if (dm_model_load("qwen2.5-0.5b", &m, &err) || dm_model_matrices(m, -1, &mx, &nmx, &err)) {
        ok(0, "update pieces: %s", err.msg);
        dm_model_free(m);
        return;
    }
    int64_t *sz = malloc((size_t)nmx * sizeof *sz);
    dm_range *st = malloc((size_t)nmx * sizeof *st);
    unsigned char *need = malloc((size_t)nmx);
    double adamw_total = 0;
    for (int64_t i = 0; i < nmx; i++) {
        sz[i] = mx[i].rows * mx[i].cols;
        if (mx[i].role == DM_ROLE_ADAMW) adamw_total += (double)sz[i];
    }
    for (int hs = 0; hs < 3; hs++) { /* flat; HSDP, AdamW in the shard groups; HSDP, AdamW over all ranks */
        sched_opts o;
        sched_opts_default(&o);
        o.balance = SCHED_BAL_LPT;
        o.gpus_per_node = 4;
        o.hsdp = hs > 0;
        o.hsdp_adamw = hs == 2 ? SCHED_HSDP_ADAMW_WORLD : SCHED_HSDP_ADAMW_REPLICAS;
        const int ranks = hs ? 16 : 12;
        dm_program *p = NULL;
        int built = sched_build(m, cl, ranks, costs, &o, &p, NULL, &err) == 0, agree = built, differ = 0;
        double sum = 0;
        for (int r = 0; built && r < ranks; r++) {
            if (dm_state_ranges(p, sz, nmx, r, st, need, &err)) {
                agree = 0;
                break;
            }
            double want = 0, got = 0;
            int want_k = 0, got_k = 0; /* launches: one per tensor piece */
            for (int64_t q = 0; q < nmx; q++)
                if ((need[q] & 2) && st[q].hi > st[q].lo) want += (double)(st[q].hi - st[q].lo), want_k++;
            for (int i = 0; i < p->ranks[r].n_ops; i++) {
                const dm_op *op = &p->ranks[r].ops[i];
                if (op->kind != DM_OP_ADAMW) continue;
                const dm_work *w = &p->works[op->work];
                for (int k = 0; k < w->n; k++) {
                    int c = w->k[k].count > 0 ? w->k[k].count : 1;
                    got += (double)w->k[k].m * c;
                    got_k += c;
                }
                if (r > 0 && i < p->ranks[0].n_ops && p->ranks[0].ops[i].kind == DM_OP_ADAMW && p->ranks[0].ops[i].work != op->work)
                    differ = 1;
            }
            agree &= want == got && want_k == got_k;
            if (hs != 1 || r < 4) sum += got; /* AdamW in the shard groups: the first one's ranks, one replica */
            if (want != got || want_k != got_k)
                tap_diag("rank %d: state rule %.0f AdamW elements in %d pieces, the update ops' works %.0f in %d kernels", r,
                         want, want_k, got, got_k);
        }
        ok(built && agree && differ && sum == adamw_total,
           "dmuon%s on %d ranks: every rank's AdamW works cover exactly its state rule's ranges, a kernel per piece, pieces differ from rank to "
           "rank, %.0f of %.0f AdamW elements over %s%s%s",
           hs == 1 ? " --hsdp (4 shard groups of 4)" : hs == 2 ? " --hsdp --hsdp-adamw world" : "", ranks, sum, adamw_total,
           hs == 1 ? "one replica's ranks" : "all ranks", built ? "" : ": ", built ? "" : err.msg);
        dm_program_free(p);
    }
    free(sz), free(st), free(need), free(mx);
    dm_model_free(m);
}

static void test_replicated(const dm_cluster *cl, const dm_costs *costs)
{
    static const char *models[] = {"qwen2.5-0.5b", "moonlight-16b-a3b-6l", "wall-oss-flow"};
    static const char *strats[] = {"adamw", "muon-ddp", "muon-fsdp", "muon-ddp-tuned", "muon-fsdp-tuned", "muon-rr", "dmuon"};
    static const char *extra[][2] = {{NULL, NULL}, {"zero", "3"}, {"overlap", "none"}, {"overlap", "prefetch"},
                                     {"hierarchical", "yes"}};
    dm_err err = {{0}};
    for (int mi = 0; mi < 3; mi++) {
        dm_model *m = NULL;
        if (dm_model_load(models[mi], &m, &err)) {
            ok(0, "load %s: %s", models[mi], err.msg);
            continue;
        }
        int n = 0, same = 0, shared = 0;
        for (int si = 0; si < 7; si++)
            for (int ei = 0; ei < 5; ei++)
                for (int ri = 0; ri < 3; ri++) {
                    int ranks = ri == 0 ? 2 : ri == 1 ? 8 : 24;
                    sched_opts o;
                    sched_opts_default(&o);
                    o.balance = SCHED_BAL_LPT;
                    if (sched_opts_parse(&o, "strategy", strats[si], &err) ||
                        (extra[ei][0] && sched_opts_parse(&o, extra[ei][0], extra[ei][1], &err)))
                        continue;
                    dm_program *a = NULL, *b = NULL;
                    int rc = sched_build(m, cl, ranks, costs, &o, &a, NULL, &err);
                    o.emit_every_rank = 1;
                    rc |= sched_build(m, cl, ranks, costs, &o, &b, NULL, &err);
                    n++;
                    if (rc == 0 && dm_program_same_ops(a, b) && dm_program_hash(a) == dm_program_hash(b) &&
                        dm_program_validate(a, &err) == 0)
                        same++;
                    else
                        tap_diag("%s %s %s=%s on %d ranks: differs (%s)", models[mi], strats[si],
                                 extra[ei][0] ? extra[ei][0] : "-", extra[ei][1] ? extra[ei][1] : "-", ranks, err.msg);
                    if (rc == 0 && si < 5 && dm_program_distinct_lists(a) == 1) shared++;
                    dm_program_free(a);
                    dm_program_free(b);
                }
        ok(n > 0 && same == n && shared == 5 * 5 * 3,
           "%s: %d of %d plans as an emission for every rank; %d replicated plans of one list", models[mi], same, n, shared);
        dm_model_free(m);
    }
}

/* muon-ddp as PyTorch runs it: on every rank the optimizer's first op waits on the rank's last
 * gradient all-reduce (DDP's backward returns when every bucket is reduced); the tuned form's
 * first NS waits on its own layer's only. */
static void test_ddp_loop(const dm_cluster *cl, const dm_costs *costs)
{
    dm_err err = {{0}};
    dm_model *m = NULL;
    if (dm_model_load("qwen2.5-0.5b", &m, &err)) {
        ok(0, "load qwen2.5-0.5b: %s", err.msg);
        return;
    }
    for (int tuned = 0; tuned < 2; tuned++) {
        sched_opts o;
        sched_opts_default(&o);
        o.balance = SCHED_BAL_LPT;
        dm_program *p = NULL;
        int rc = sched_opts_parse(&o, "strategy", tuned ? "muon-ddp-tuned" : "muon-ddp", &err) ||
                 sched_build(m, cl, 4, costs, &o, &p, NULL, &err);
        int waits = 0, ranks = 0, last_ar = -1, first_opt = -1;
        for (int r = 0; rc == 0 && r < p->nranks; r++) {
            const dm_rank_prog *rp = &p->ranks[r];
            last_ar = first_opt = -1;
            for (int i = 0; i < rp->n_ops; i++) {
                int k = rp->ops[i].kind;
                if (k == DM_OP_ALLREDUCE) last_ar = i;
                if (first_opt < 0 && (k == DM_OP_NS || k == DM_OP_ADAMW)) first_opt = i;
            }
            ranks++;
            if (first_opt < 0 || last_ar < 0) continue;
            const dm_op *op = &rp->ops[first_opt];
            for (int d = 0; d < op->n_deps; d++) waits += op->deps[d] == rp->ops[last_ar].id;
        }
        if (tuned)
            ok(rc == 0 && waits == 0, "muon-ddp-tuned on 4 ranks: the first NS waits on its own gradients only "
               "(%d of %d ranks wait on the last all-reduce)", waits, ranks);
        else
            ok(rc == 0 && waits == ranks && ranks == 4, "muon-ddp on 4 ranks: every rank's optimizer loop waits on its "
               "last gradient all-reduce (%d of %d)%s%s", waits, ranks, rc ? ": " : "", rc ? err.msg : "");
        dm_program_free(p);
    }
    dm_model_free(m);
}

/* dmuon's forward fetch (sched/build.c emit_fetch): in a flat plan (and HSDP's with its Muon
 * pairs over all ranks) its weight all-gathers ride comm-lo beside the broadcasts, each waiting on
 * the last comm-hi fetch op of an earlier layer; adamw's (no broadcast) and those of HSDP's Muon
 * stages stay as they were (comm-hi; the stages' cross-node parts alone on comm-lo). */
static void test_fetch_streams(const dm_cluster *cl, const dm_costs *costs)
{
    dm_err err = {{0}};
    dm_model *m = NULL;
    if (dm_model_load("qwen2.5-0.5b", &m, &err)) {
        ok(0, "load qwen2.5-0.5b: %s", err.msg);
        return;
    }
    for (int c = 0; c < 4; c++) { /* dmuon flat, adamw, dmuon --hsdp (stages), --hsdp-muon world */
        sched_opts o;
        sched_opts_default(&o);
        o.balance = SCHED_BAL_LPT;
        o.gpus_per_node = 4;
        if (c >= 2) o.hsdp = 1;
        if (c == 3) o.hsdp_muon = SCHED_HSDP_MUON_WORLD;
        dm_program *p = NULL;
        int rc = sched_opts_parse(&o, "strategy", c == 1 ? "adamw" : "dmuon", &err) ||
                 sched_build(m, cl, 8, costs, &o, &p, NULL, &err);
        int gathers = 0, on_lo = 0, lo_whole = 0, after_hi = 0, waits_ok = 1;
        for (int r = 0; rc == 0 && r < p->nranks; r++) {
            const dm_rank_prog *rp = &p->ranks[r];
            for (int i = 0; i < rp->n_ops && rp->ops[i].kind != DM_OP_BACKWARD; i++) {
                const dm_op *op = &rp->ops[i];
                if (op->kind != DM_OP_ALLGATHER || op->payload != DM_PAYLOAD_WEIGHTS) continue;
                gathers++;
                if (op->stream != DM_STREAM_COMM_LO) continue;
                on_lo++;
                lo_whole += op->parts <= 1;
                int hi = -1; /* the last comm-hi fetch op of an earlier layer before it */
                for (int j = 0; j < i; j++)
                    if (rp->ops[j].stream == DM_STREAM_COMM_HI && dm_op_is_collective(rp->ops[j].kind) &&
                        rp->ops[j].layer < op->layer)
                        hi = j;
                if (hi < 0) continue;
                int w = 0;
                for (int d = 0; d < op->n_deps; d++) w |= op->deps[d] == rp->ops[hi].id;
                after_hi += w;
                waits_ok &= w;
            }
        }
        if (c == 0 || c == 3)
            ok(rc == 0 && gathers > 0 && on_lo == gathers && after_hi > 0 && waits_ok,
               "dmuon%s, 8 ranks: its %d forward weight all-gathers ride comm-lo (%d), each after the earlier "
               "layers' comm-hi fetch (%d wait on it)", c ? " --hsdp-muon world" : "", gathers, on_lo, after_hi);
        else if (c == 1)
            ok(rc == 0 && gathers > 0 && on_lo == 0, "adamw, 8 ranks: its %d forward all-gathers stay on comm-hi", gathers);
        else
            ok(rc == 0 && dm_program_validate(p, &err) == 0 && gathers > 0 && lo_whole == 0,
               "dmuon --hsdp, 8 ranks: a valid program whose whole-buffer weight all-gathers stay on comm-hi (%d weight "
               "all-gathers, %d on comm-lo, cross-node parts)", gathers, on_lo);
        if (rc) tap_diag("%s", err.msg);
        dm_program_free(p);
    }
    dm_model_free(m);
}

int main(void)
{
    dm_err err = {{0}};
    tprob t;
    sched_assign a, b;
    char status[160];

    /* ---- invariants on a mixed problem with packing and batching */
    double per[6] = {900, 400, 120, 60, 30, 10};
    tprob_init(&t, 6, per, 25, 8, 5);
    t.p.threshold_elems = 3500000; /* shapes 0..2 small (1M..3M elements): packed per layer */
    for (int l = 0; l < 12; l++)
        for (int s = 0; s < 6; s++)
            if ((l + s) % 3) add_item(&t, s, l);
    ok(sched_assign_rr(&t.p, &a, &err) == 0 && consistent(&t.p, &a), "round-robin: every item owned once, batches consistent");
    sched_assign_free(&a);
    ok(sched_assign_lpt(&t.p, &a, &err) == 0 && consistent(&t.p, &a), "lpt: every item owned once, batches consistent");
    ok(a.n_units < t.p.n_items, "lpt packed small same-layer matrices (%d units for %d items)", a.n_units, t.p.n_items);
    ok(sched_assign_lpt(&t.p, &b, &err) == 0 && !memcmp(a.owner, b.owner, sizeof(int) * t.p.n_items) &&
           !memcmp(a.batch_of, b.batch_of, sizeof(int) * t.p.n_items),
       "lpt is deterministic");
    double lb = sched_lower_bound(&t.p);
    ok(lb > 0 && lb <= a.makespan_us + 1e-9, "lower bound %.1f <= lpt %.1f", lb, a.makespan_us);
    double lpt_ms = a.makespan_us;
    sched_assign_free(&a);
    sched_assign_free(&b);
    ok(sched_assign_milp(&t.p, 2.0, 0, &a, status, sizeof status, NULL, &err) == 0 && consistent(&t.p, &a),
       "milp: every item owned once, batches consistent (%s)", status);
    ok(a.makespan_us <= lpt_ms + 1e-9, "milp %.1f never worse than lpt %.1f", a.makespan_us, lpt_ms);
    ok(a.makespan_us >= lb - 1e-9, "milp above the lower bound");
    sched_assign_free(&a);

    /* ---- same-layer spreading */
    double eq[1] = {100};
    tprob_init(&t, 1, eq, 0, 1, 4);
    for (int i = 0; i < 4; i++) add_item(&t, 0, 0);
    sched_assign_lpt(&t.p, &a, &err);
    int distinct = 1;
    for (int i = 0; i < 4; i++)
        for (int j = 0; j < i; j++) distinct &= a.owner[i] != a.owner[j];
    ok(distinct, "four matrices of one layer on four owners");
    sched_assign_free(&a);
    tprob_init(&t, 1, eq, 0, 1, 3);
    for (int l = 0; l < 3; l++)
        for (int i = 0; i < 3; i++) add_item(&t, 0, l);
    sched_assign_lpt(&t.p, &a, &err);
    int spread = 1;
    for (int l = 0; l < 3; l++)
        for (int i = 0; i < 3; i++)
            for (int j = 0; j < i; j++) spread &= a.owner[3 * l + i] != a.owner[3 * l + j];
    ok(spread && a.makespan_us == 300, "3 layers x 3 matrices on 3 owners: each layer spread, balanced");
    sched_assign_free(&a);

    /* ---- a hand-checkable optimum: {3,3,2,2,2} on 2 owners; LPT gives 7, the optimum is 6 */
    double hand[2] = {3, 2};
    tprob_init(&t, 2, hand, 0, 1, 2);
    add_item(&t, 0, 0);
    add_item(&t, 0, 1);
    add_item(&t, 1, 2);
    add_item(&t, 1, 3);
    add_item(&t, 1, 4);
    sched_assign_lpt(&t.p, &a, &err);
    ok(a.makespan_us == 7, "lpt on {3,3,2,2,2} / 2 owners: 7 (got %g)", a.makespan_us);
    sched_assign_free(&a);
    int hrc = sched_assign_milp(&t.p, 2.0, 0, &a, status, sizeof status, NULL, &err);
    ok(hrc == 0 && a.makespan_us == 6 && consistent(&t.p, &a),
       "milp finds the optimum 6 (got %g, %s)", a.makespan_us, status);
    sched_assign_free(&a);
    ok(sched_lower_bound(&t.p) == 6, "lower bound max(12/2, 3) = 6");
    ok(fabs(sched_two_shape_bound(&t.p) - 6) < 1e-5, "two-shape bound is the exact optimum 6 (got %g)",
       sched_two_shape_bound(&t.p));
    /* 3 x 5 and 4 x 4 on 3 owners: simple bound 31/3, optimum 12 ({4,4,4}, {5,5}, {5,4}) */
    double pr[2] = {5, 4};
    tprob_init(&t, 2, pr, 0, 1, 3);
    for (int i = 0; i < 3; i++) add_item(&t, 0, i);
    for (int i = 0; i < 4; i++) add_item(&t, 1, 3 + i);
    double tsb = sched_two_shape_bound(&t.p);
    ok(fabs(tsb - 12) < 1e-5 && sched_lower_bound(&t.p) < 11, "two-shape bound 12 above the simple bound %.2f (got %g)",
       sched_lower_bound(&t.p), tsb);

    /* ---- Graham's bound against brute-force optima; MILP never worse than LPT */
    int graham_ok = 1, milp_ok = 1, milp_opt = 0, proved = 0;
    double worst = 0;
    for (int trial = 0; trial < 25; trial++) {
        double c[7];
        int m = 2 + trial % 3;
        for (int s = 0; s < 7; s++) c[s] = 1 + lcg() % 40;
        tprob_init(&t, 7, c, 0, 1, m);
        for (int i = 0; i < 7; i++) add_item(&t, i, i);
        double opt = brute_opt(&t);
        sched_assign_lpt(&t.p, &a, &err);
        double bound = (4.0 / 3 - 1.0 / (3 * m)) * opt;
        if (a.makespan_us > bound + 1e-9) graham_ok = 0;
        worst = fmax(worst, a.makespan_us / opt);
        double l = a.makespan_us;
        sched_assign_free(&a);
        double proof = 0;
        sched_assign_milp(&t.p, 2.0, 0, &a, status, sizeof status, &proof, &err);
        if (a.makespan_us > l + 1e-9 || !consistent(&t.p, &a)) milp_ok = 0;
        /* a proven bound (lp_solve found nothing better, or the plan sits on the lower bound) */
        if (proof > 0 && fabs(proof - a.makespan_us) < 1e-6 * opt && fabs(a.makespan_us - opt) < 1e-9) proved++;
        if (sched_two_shape_bound(&t.p) > opt + 1e-9) milp_ok = 0; /* a bound never exceeds the optimum */
        milp_opt += fabs(a.makespan_us - opt) < 1e-9;
        sched_assign_free(&a);
    }
    ok(graham_ok, "lpt within (4/3 - 1/3m) x optimum on 25 random instances (worst ratio %.3f)", worst);
    ok(milp_ok, "milp never worse than lpt on 25 random instances");
    ok(milp_opt == 25, "milp reaches the brute-force optimum on %d of 25", milp_opt);
    ok(proved == 25, "and proves it optimal (lp_solve infeasible below it, or at the lower bound) on %d of 25", proved);

    /* ---- the communication-aware objective, by hand: one layer of 4 matrices of 100 us on 4
     * owners, 150 us of collectives' latency per (layer, owner) pair. Spread (the NS-only plan)
     * 100 + 4 x 150 = 700; all on one owner 400 + 150 = 550 (the greedy LPT's); two and two
     * 200 + 2 x 150 = 500, the optimum (and the bound: min over M of M + 150 ceil(400 / M)). */
    double hund[1] = {100};
    tprob_init(&t, 1, hund, 0, 1, 4);
    for (int i = 0; i < 4; i++) add_item(&t, 0, 0);
    sched_assign_lpt(&t.p, &a, &err);
    ok(a.objective_us == 100 && a.pairs == 4, "no communication terms: lpt spreads the layer, objective = makespan 100 (got %g, %d pairs)",
       a.objective_us, a.pairs);
    sched_assign_free(&a);
    t.p.pair_us = 150;
    sched_assign_lpt(&t.p, &a, &err);
    ok(consistent(&t.p, &a) && a.objective_us == 550 && a.pairs == 1,
       "with 150 us per pair: lpt keeps the layer on one owner, objective 400 + 150 = 550 (got %g, %d pairs)", a.objective_us,
       a.pairs);
    sched_assign_free(&a);
    ok(fabs(sched_comm_bound(&t.p, sched_lower_bound(&t.p)) - 500) < 1e-9, "objective bound 500 (got %g)",
       sched_comm_bound(&t.p, sched_lower_bound(&t.p)));
    double proof = 0;
    int mrc = sched_assign_milp(&t.p, 2.0, 0, &a, status, sizeof status, &proof, &err);
    ok(mrc == 0 && consistent(&t.p, &a) && a.objective_us == 500 && a.pairs == 2 && fabs(proof - 500) < 1e-6,
       "milp: two owners of two, objective 500, proven (got %g, %d pairs, bound %g: %s)", a.objective_us, a.pairs, proof,
       status);
    sched_assign_free(&a);
    /* the owner-side terms: 10 us per pair and 1e-5 us per element on the owner's own links */
    t.p.owner_pair_us = 10;
    t.p.owner_elem_us = 1e-5; /* shape 0: 1M elements, 10 us each */
    sched_assign_milp(&t.p, 2.0, 0, &a, status, sizeof status, NULL, &err);
    int asg[16];
    for (int i = 0; i < 4; i++) asg[i] = a.owner[i];
    ok(fabs(a.objective_us - objective_of(&t, asg)) < 1e-9 && fabs(a.objective_us - (220 + 10 + 300)) < 1e-9,
       "owner-side terms: objective %g = chain 200 + 2 x 10 + 10 + 2 pairs x 150", a.objective_us);
    sched_assign_free(&a);

    /* ---- the objective against brute force: random layers and communication terms */
    int cb_ok = 1, cm_ok = 1, cm_opt = 0, cm_proved = 0, cm_never_worse = 1;
    for (int trial = 0; trial < 25; trial++) {
        double c[7];
        int m = 2 + trial % 2;
        for (int s = 0; s < 7; s++) c[s] = 1 + lcg() % 40;
        tprob_init(&t, 7, c, 0, 1, m);
        for (int i = 0; i < 7; i++) add_item(&t, i, lcg() % 3);
        t.p.pair_us = (double)(lcg() % 30);
        t.p.owner_pair_us = (double)(lcg() % 5);
        double opt = brute_objective(&t);
        if (sched_comm_bound(&t.p, fmax(sched_lower_bound(&t.p), sched_two_shape_bound(&t.p))) > opt + 1e-9) cb_ok = 0;
        sched_assign_lpt(&t.p, &a, &err);
        double l = a.objective_us;
        for (int i = 0; i < 7; i++) asg[i] = a.owner[i];
        if (fabs(l - objective_of(&t, asg)) > 1e-9) cm_ok = 0;
        sched_assign_free(&a);
        proof = 0;
        sched_assign_milp(&t.p, 2.0, 0, &a, status, sizeof status, &proof, &err);
        for (int i = 0; i < 7; i++) asg[i] = a.owner[i];
        if (!consistent(&t.p, &a) || fabs(a.objective_us - objective_of(&t, asg)) > 1e-9 || proof > opt + 1e-9) cm_ok = 0;
        if (a.objective_us > l + 1e-9) cm_never_worse = 0;
        cm_opt += fabs(a.objective_us - opt) < 1e-9;
        cm_proved += proof > 0 && fabs(proof - opt) < 1e-6 * opt;
        sched_assign_free(&a);
    }
    ok(cb_ok, "the objective bound never exceeds the brute-force optimum on 25 random instances");
    ok(cm_ok, "lpt and milp objectives are the definition's; bounds valid; plans consistent");
    ok(cm_never_worse, "milp's objective never worse than lpt's on 25 random instances");
    ok(cm_opt == 25, "milp reaches the brute-force optimum of the objective on %d of 25", cm_opt);
    ok(cm_proved == 25, "and proves it (bound = optimum) on %d of 25", cm_proved);

    /* ---- option parsing */
    sched_opts o;
    sched_opts_default(&o);
    ok(o.strategy == SCHED_DMUON && o.balance == SCHED_BAL_AUTO && o.tokens == 4096 && o.batch_threshold == 5 * 1024 * 1024 &&
           o.comm_weight == 1,
       "defaults: dmuon, auto, 4096 tokens, 5M threshold, comm weight 1");
    ok(sched_opts_parse(&o, "balance", "auto", &err) == 0 && o.balance == SCHED_BAL_AUTO, "balance auto");
    ok(sched_opts_parse(&o, "comm-weight", "0.5", &err) == 0 && o.comm_weight == 0.5, "comm weight 0.5");
    ok(sched_opts_parse(&o, "comm-weight", "-1", &err) == -1 && strstr(err.msg, "--comm-weight: expected"), "bad comm weight");
    char desc[512];
    ok(strstr(sched_opts_describe(&o, desc, sizeof desc), " comm-weight=0.5"), "a changed comm weight is in the options");
    sched_opts_default(&o);
    ok(!strstr(sched_opts_describe(&o, desc, sizeof desc), "comm-weight"), "the default comm weight is not (programs as before)");
    ok(sched_opts_parse(&o, "overlap", "prefetch:3", &err) == 0 && o.overlap == SCHED_OVERLAP_PREFETCH && o.prefetch_depth == 3,
       "overlap prefetch:3");
    ok(sched_opts_parse(&o, "batch-threshold", "2M", &err) == 0 && o.batch_threshold == 2 * 1024 * 1024, "threshold 2M");
    ok(sched_opts_parse(&o, "balance", "milp", &err) == 0 && o.balance == SCHED_BAL_MILP, "balance milp");
    ok(sched_opts_parse(&o, "strategy", "muon-fsdp", &err) == 0 && o.strategy == SCHED_MUON_FSDP, "strategy muon-fsdp");
    ok(sched_opts_parse(&o, "zero", "4", &err) == -1 && strstr(err.msg, "--zero: expected 2 or 3"), "bad zero: %s", err.msg);
    ok(sched_opts_parse(&o, "strategy", "zero-bubble", &err) == -1 && strstr(err.msg, "--strategy: expected"), "bad strategy");
    ok(sched_opts_parse(&o, "milp-time", "-1", &err) == -1, "bad milp time");

    /* ---- programs on a bundled model */
    dm_model *m = NULL;
    dm_cluster cl;
    dm_costs *costs = dm_costs_roofline(dm_gpu_find("H200"), &err);
    if (dm_model_load("qwen2.5-0.5b", &m, &err) || dm_cluster_load("h200", &cl, &err)) {
        tap_diag("bundled model not found: %s", err.msg);
        return tap_done();
    }
    int64_t n_muon = dm_model_count_role(m, DM_ROLE_MUON);
    struct {
        sched_strategy s;
        sched_overlap v;
        int zero, hier, ranks;
        sched_balance bal;
        int ns_copies; /* how many NS ops cover each Muon matrix in total */
    } cases[] = {
        {SCHED_DMUON, SCHED_OVERLAP_INTERLEAVE, 2, 0, 8, SCHED_BAL_LPT, 1},
        {SCHED_DMUON, SCHED_OVERLAP_NONE, 2, 0, 8, SCHED_BAL_RR, 1},
        {SCHED_DMUON, SCHED_OVERLAP_PREFETCH, 3, 0, 8, SCHED_BAL_MILP, 1},
        {SCHED_DMUON, SCHED_OVERLAP_INTERLEAVE, 3, 1, 16, SCHED_BAL_LPT, 2},
        {SCHED_MUON_DDP, SCHED_OVERLAP_INTERLEAVE, 2, 0, 4, SCHED_BAL_LPT, 4},
        {SCHED_MUON_FSDP, SCHED_OVERLAP_PREFETCH, 3, 0, 4, SCHED_BAL_LPT, 4},
        {SCHED_MUON_RR, SCHED_OVERLAP_NONE, 2, 0, 8, SCHED_BAL_LPT, 1},
        {SCHED_ADAMW, SCHED_OVERLAP_INTERLEAVE, 3, 0, 8, SCHED_BAL_LPT, 0},
    };
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        sched_opts_default(&o);
        o.strategy = cases[k].s;
        o.overlap = cases[k].v;
        o.zero = cases[k].zero;
        o.hierarchical = cases[k].hier;
        o.balance = cases[k].bal;
        o.milp_time_s = 0.5;
        dm_program *p = NULL;
        sched_report rep;
        char name[160];
        snprintf(name, sizeof name, "%s overlap=%s zero=%d%s %d ranks", sched_strategy_name(o.strategy),
                 sched_overlap_name(o.overlap), o.zero, o.hierarchical ? " hierarchical" : "", cases[k].ranks);
        if (sched_build(m, &cl, cases[k].ranks, costs, &o, &p, &rep, &err) || dm_program_validate(p, &err)) {
            ok(0, "%s: builds and validates (%s)", name, err.msg);
            dm_program_free(p);
            continue;
        }
        int fwd_ok = 1, fetch_deps = 1;
        int64_t ns_cover = 0;
        for (int r = 0; r < p->nranks; r++) {
            int nf = 0;
            for (int i = 0; i < p->ranks[r].n_ops; i++) {
                const dm_op *op = &p->ranks[r].ops[i];
                if (op->kind == DM_OP_FORWARD) {
                    nf++;
                    /* with prefetch, each forward (that has a fetch) waits on its own layer's fetch */
                    if (o.overlap != SCHED_OVERLAP_NONE && o.strategy != SCHED_MUON_DDP && o.strategy != SCHED_MUON_RR)
                        for (int d = 0; d < op->n_deps; d++) {
                            const dm_op *dep = &p->ranks[r].ops[op->deps[d]];
                            if (!dm_op_is_collective(dep->kind) || dep->layer != op->layer) fetch_deps = 0;
                        }
                }
                if (op->kind == DM_OP_NS) ns_cover += op->batch;
            }
            if (nf != m->n_layers) fwd_ok = 0;
        }
        ok(fwd_ok && fetch_deps && ns_cover == n_muon * cases[k].ns_copies,
           "%s: validates, %d forwards per rank, forwards wait on their layer's fetch, NS covers each matrix %d time(s) "
           "(%lld / %lld)", name, m->n_layers, cases[k].ns_copies, (long long)ns_cover,
           (long long)(n_muon * cases[k].ns_copies));
        if (o.strategy == SCHED_DMUON) {
            double sum = 0, mx = 0;
            for (int w = 0; w < rep.nowners; w++) {
                sum += rep.ns_load_us[w];
                mx = fmax(mx, rep.ns_load_us[w]);
            }
            ok(rep.nowners == (o.hierarchical ? 8 : cases[k].ranks) && fabs(rep.max_us - mx) < 1e-6 &&
                   fabs(rep.imbalance - (mx / (sum / rep.nowners) - 1)) < 1e-9 && rep.lower_bound_us <= mx + 1e-9,
               "%s: report (owners %d, max %.1f us, imbalance %.3f, bound %.1f, %s)", name, rep.nowners, rep.max_us,
               rep.imbalance, rep.lower_bound_us, rep.solver_status);
        }
        sched_report_free(&rep);
        dm_program_free(p);
    }
    /* same inputs, same program */
    sched_opts_default(&o);
    dm_program *p1 = NULL, *p2 = NULL;
    sched_build(m, &cl, 8, costs, &o, &p1, NULL, &err);
    sched_build(m, &cl, 8, costs, &o, &p2, NULL, &err);
    ok(p1 && p2 && dm_program_hash(p1) == dm_program_hash(p2), "same inputs give the same program hash");
    if (p1 && p2) { /* dm_program_same_ops: equal programs, then one op's bytes or a dependency changed */
        int eq = dm_program_same_ops(p1, p2);
        free(p2->options);
        p2->options = strdup("another options string");
        int eq_opts = dm_program_same_ops(p1, p2);
        dm_program_own_rank(p2, p2->nranks - 1, NULL); /* the last rank's list alone */
        dm_op *x = &p2->ranks[p2->nranks - 1].ops[p2->ranks[p2->nranks - 1].n_ops - 1];
        x->bytes += 1;
        int ne_bytes = !dm_program_same_ops(p1, p2);
        x->bytes -= 1;
        int ne_dep = 1;
        for (int i = 0; i < p2->ranks[0].n_ops; i++)
            if (p2->ranks[0].ops[i].n_deps) {
                p2->ranks[0].ops[i].deps[0]--;
                ne_dep = !dm_program_same_ops(p1, p2);
                p2->ranks[0].ops[i].deps[0]++;
                break;
            }
        ok(eq && eq_opts && ne_bytes && ne_dep && dm_program_same_ops(p1, p2),
           "dm_program_same_ops: equal builds agree (whatever the options string), a changed byte count or dependency "
           "does not");
    }
    { /* each NS op counts its tall matrices (rows > cols): those of the model, every one once */
        dm_matrix *mx = NULL;
        int64_t nmx = 0, tall_model = 0, tall_prog = 0, bad = 0;
        dm_model_matrices(m, -1, &mx, &nmx, &err);
        for (int64_t i = 0; i < nmx; i++) tall_model += mx[i].role == DM_ROLE_MUON && mx[i].rows > mx[i].cols;
        for (int r = 0; p1 && r < p1->nranks; r++)
            for (int i = 0; i < p1->ranks[r].n_ops; i++) {
                const dm_op *op = &p1->ranks[r].ops[i];
                if (op->kind != DM_OP_NS) continue;
                int t = 0;
                for (int j = 0; j < op->n_params; j++)
                    for (int64_t q = 0; q < nmx; q++)
                        if (mx[q].id == op->params[j]) t += mx[q].rows > mx[q].cols;
                bad += t != op->tall;
                tall_prog += op->tall;
            }
        ok(tall_model > 0 && tall_prog == tall_model && !bad, "NS ops' tall counts: %lld in the program, %lld in the model, "
           "%lld ops wrong", (long long)tall_prog, (long long)tall_model, (long long)bad);
        free(mx);
    }
    dm_program_free(p1);
    dm_program_free(p2);
    o.hierarchical = 1;
    ok(sched_build(m, &cl, 12, costs, &o, &p1, NULL, &err) == -1 && strstr(err.msg, "whole nodes"),
       "hierarchical needs whole nodes: %s", err.msg);
    { /* dmuon's scheme: the other strategies ignore it, as they ignore --hsdp */
        sched_opts o2 = o;
        dm_program *p3 = NULL;
        o2.strategy = SCHED_MUON_DDP;
        ok(sched_build(m, &cl, 12, costs, &o2, &p3, NULL, &err) == 0, "muon-ddp ignores --hierarchical at 12 ranks");
        dm_program_free(p3);
    }
    /* the objective's terms from the cluster: flat, 2 collectives per pair; hierarchical on two
     * nodes, a broadcast and a reduce per node plus the cross-node all-reduce on the owner's chain */
    {
        sched_report r1, r2;
        sched_opts_default(&o);
        o.balance = SCHED_BAL_LPT;
        int b1 = sched_build(m, &cl, 16, costs, &o, &p1, &r1, &err);
        dm_program_free(p1);
        o.hierarchical = 1;
        int b2 = sched_build(m, &cl, 16, costs, &o, &p1, &r2, &err);
        dm_program_free(p1);
        ok(b1 == 0 && b2 == 0 && r1.colls_per_pair == 2 && r2.colls_per_pair == 5 && r1.comm_us > 0 && r2.comm_us > 0 &&
               fabs(r1.objective_us - r1.comm_us - r1.max_us) < 1e-6 && r2.objective_us > r2.max_us + r2.comm_us,
           "objective terms: flat %d collectives per pair, objective = NS max + comm; hierarchical %d, plus the "
           "owner's all-reduce (%.1f > %.1f + %.1f us)",
           r1.colls_per_pair, r2.colls_per_pair, r2.objective_us, r2.max_us, r2.comm_us);
        sched_report_free(&r1);
        sched_report_free(&r2);
        o.hierarchical = 0;
        o.comm_weight = 0;
        b1 = sched_build(m, &cl, 16, costs, &o, &p1, &r1, &err);
        dm_program_free(p1);
        ok(b1 == 0 && r1.comm_us == 0 && r1.objective_us == r1.max_us, "comm weight 0: the objective is the NS makespan");
        sched_report_free(&r1);
    }

    /* ---- HSDP (--hsdp): 4 shard groups of 4 ranks. Every Muon matrix is NS'd once in the job;
     * its gradient goes through a reduce-scatter in every shard group, a reduce of each of the 4
     * parts over its column, an all-gather in the owner's shard group; its weights through a
     * broadcast in the owner's shard group, one per part over the columns, an all-gather in each
     * other shard group; the program is valid, survives a JSON round trip, and moves no more
     * bytes across node boundaries than the flat plan */
    {
        sched_opts_default(&o);
        o.balance = SCHED_BAL_LPT;
        o.gpus_per_node = 4;
        dm_program *pf = NULL, *ph = NULL;
        int bf = sched_build(m, &cl, 16, costs, &o, &pf, NULL, &err);
        if (bf) tap_diag("%s", err.msg);
        o.hsdp = 1;
        int bh = sched_build(m, &cl, 16, costs, &o, &ph, NULL, &err);
        if (bh) tap_diag("%s", err.msg);
        ok(bf == 0 && bh == 0 && dm_program_validate(ph, &err) == 0, "hsdp: 16 ranks in 4 shard groups of 4: a valid program");
        int64_t n_mu = 0, ns_sets = 0, once = 1;
        dm_matrix *mx = NULL;
        int64_t nmx = 0;
        if (bh == 0 && dm_model_matrices(m, -1, &mx, &nmx, &err) == 0) {
            int *ns = calloc((size_t)nmx, sizeof *ns), *red = calloc((size_t)nmx, sizeof *red),
                *bc = calloc((size_t)nmx, sizeof *bc), *rs = calloc((size_t)nmx, sizeof *rs),
                *ag = calloc((size_t)nmx, sizeof *ag);
            unsigned char *seen = calloc((size_t)ph->n_colls + 1, 1);
            for (int r = 0; r < ph->nranks; r++)
                for (int i = 0; i < ph->ranks[r].n_ops; i++) {
                    const dm_op *op = &ph->ranks[r].ops[i];
                    if (op->kind == DM_OP_NS) {
                        ns_sets++;
                        for (int a = 0; a < op->n_params; a++) ns[op->params[a]]++;
                    }
                    if (op->coll >= 0 && !seen[op->coll]) {
                        seen[op->coll] = 1;
                        int *cnt = op->kind == DM_OP_REDUCE ? red : op->kind == DM_OP_BROADCAST ? bc
                                   : op->kind == DM_OP_REDUCESCATTER ? rs : ag;
                        for (int a = 0; a < op->n_params; a++) cnt[op->params[a]]++;
                    }
                }
            for (int64_t i = 0; i < nmx; i++)
                if (mx[i].role == DM_ROLE_MUON) {
                    n_mu++;
                    if (ns[i] != 1 || rs[i] != 4 || red[i] != 4 || ag[i] != 1 + 3 || bc[i] != 1 + 4) once = 0;
                }
            free(ns), free(red), free(bc), free(rs), free(ag), free(seen), free(mx);
        }
        ok(bh == 0 && once && n_mu > 0,
           "hsdp: each of %lld Muon matrices NS'd once in the job; gradients: 4 reduce-scatters, 4 part reduces "
           "over the columns, 1 all-gather; weights: 1 + 4 part broadcasts, 3 all-gathers (%lld NS ops)",
           (long long)n_mu, (long long)ns_sets);
        {
            char path[] = "/tmp/dmuon-test-hsdp-XXXXXX";
            int fd = mkstemp(path);
            dm_program *back = NULL;
            int okrt = fd >= 0 && bh == 0 && dm_program_save(ph, path, &err) == 0 &&
                       dm_program_load(path, &back, &err) == 0 && dm_program_hash(back) == dm_program_hash(ph);
            ok(okrt, "hsdp: the program's parts survive a JSON round trip (same hash)");
            dm_program_free(back);
            if (fd >= 0) close(fd), unlink(path);
        }
        double nf = bf ? 0 : dm_program_internode_bytes(pf, NULL), nh = bh ? 0 : dm_program_internode_bytes(ph, NULL);
        ok(bf == 0 && bh == 0 && nh > 0 && nh <= nf * 1.0001, "hsdp: bytes across nodes %.3f GB <= flat %.3f GB", nh / 1e9,
           nf / 1e9);
        dm_program_free(pf);
        dm_program_free(ph);
        o.strategy = SCHED_MUON_DDP;
        dm_program *pd = NULL;
        int bd = sched_build(m, &cl, 16, costs, &o, &ph, NULL, &err);
        o.hsdp = 0;
        int bd2 = sched_build(m, &cl, 16, costs, &o, &pd, NULL, &err);
        ok(bd == 0 && bd2 == 0 && dm_program_hash(ph) == dm_program_hash(pd),
           "hsdp is dmuon's: muon-ddp ignores it (the same program)");
        dm_program_free(ph);
        dm_program_free(pd);
        o.hsdp = 1;
        o.strategy = SCHED_DMUON;
        o.hierarchical = 1;
        ok(sched_build(m, &cl, 16, costs, &o, &ph, NULL, &err) == -1 && strstr(err.msg, "choose one"),
           "hsdp and hierarchical refused together: %s", err.msg);
        o.hierarchical = 0;
        o.shard = 3;
        ok(sched_build(m, &cl, 16, costs, &o, &ph, NULL, &err) == -1 && strstr(err.msg, "whole shard groups"),
           "hsdp needs whole shard groups: %s", err.msg);
        sched_opts_default(&o);
        dm_err e2;
        ok(sched_opts_parse(&o, "shard", "4", &e2) == 0 && o.hsdp == 1 && o.shard == 4, "--shard 4 sets hsdp");
    }

    /* ---- HSDP's AdamW parameters (--hsdp-adamw): replicas (a reduce-scatter in each of the 4
     * shard groups, each part all-reduced over its column), world (one reduce-scatter over all 16
     * ranks, as the flat plan), auto (per layer, the cheaper by the collective model: the tied
     * embedding's bytes over all ranks, a norm's latency in the shard groups) */
    {
        dm_matrix *mx = NULL;
        int64_t nmx = 0;
        int mrc = dm_model_matrices(m, -1, &mx, &nmx, &err);
        int64_t big = -1, small = -1; /* the largest and the smallest AdamW-role tensor */
        for (int64_t i = 0; mrc == 0 && i < nmx; i++)
            if (mx[i].role == DM_ROLE_ADAMW) {
                int64_t e = mx[i].rows * mx[i].cols;
                if (big < 0 || e > mx[big].rows * mx[big].cols) big = i;
                if (small < 0 || e < mx[small].rows * mx[small].cols) small = i;
            }
        static const char *mode_name[] = {"auto", "replicas", "world"};
        for (int mode = SCHED_HSDP_ADAMW_AUTO; mode <= SCHED_HSDP_ADAMW_WORLD; mode++) {
            sched_opts_default(&o);
            o.balance = SCHED_BAL_LPT;
            o.gpus_per_node = 4;
            o.hsdp = 1;
            o.hsdp_adamw = (sched_hsdp_adamw)mode;
            dm_program *ph = NULL;
            sched_report rep;
            memset(&rep, 0, sizeof rep);
            int bh = sched_build(m, &cl, 16, costs, &o, &ph, &rep, &err);
            if (bh) tap_diag("%s", err.msg);
            /* per AdamW-role tensor: world reduce-scatters, shard-group ones, all-reduces */
            int *wrs = calloc((size_t)nmx + 1, sizeof *wrs), *srs = calloc((size_t)nmx + 1, sizeof *srs),
                *ar = calloc((size_t)nmx + 1, sizeof *ar), *ns = calloc((size_t)nmx + 1, sizeof *ns);
            unsigned char *seen = bh ? NULL : calloc((size_t)ph->n_colls + 1, 1), *lw = calloc(256, 1);
            for (int r = 0; seen && r < ph->nranks; r++)
                for (int i = 0; i < ph->ranks[r].n_ops; i++) {
                    const dm_op *op = &ph->ranks[r].ops[i];
                    if (op->kind == DM_OP_NS)
                        for (int a = 0; a < op->n_params; a++) ns[op->params[a]]++;
                    if (op->coll < 0 || seen[op->coll]) continue;
                    seen[op->coll] = 1;
                    int gn = ph->groups[op->group].n;
                    for (int a = 0; a < op->n_params; a++) {
                        int64_t q = op->params[a];
                        if (op->kind == DM_OP_REDUCESCATTER && gn == 16) wrs[q]++;
                        else if (op->kind == DM_OP_REDUCESCATTER && gn == 4) srs[q]++;
                        else if (op->kind == DM_OP_ALLREDUCE) ar[q]++;
                    }
                }
            int one_scheme = 1, n_world_layers = 0, muon_once = 1;
            for (int64_t i = 0; seen && i < nmx; i++) {
                if (mx[i].role == DM_ROLE_MUON && ns[i] != 1) muon_once = 0;
                if (mx[i].role != DM_ROLE_ADAMW) continue;
                int w = wrs[i] == 1 && srs[i] == 0 && ar[i] == 0, rp = wrs[i] == 0 && srs[i] == 4 && ar[i] >= 1;
                if (w == rp) one_scheme = 0;
                if (w && mx[i].layer >= 0 && mx[i].layer < 256 && !lw[mx[i].layer]) lw[mx[i].layer] = 1, n_world_layers++;
                if (mode == SCHED_HSDP_ADAMW_WORLD && !w) one_scheme = 0;
                if (mode == SCHED_HSDP_ADAMW_REPLICAS && !rp) one_scheme = 0;
            }
            ok(bh == 0 && mrc == 0 && dm_program_validate(ph, &err) == 0 && one_scheme && muon_once &&
                   n_world_layers == rep.hsdp_adamw_world,
               "hsdp-adamw %s: a valid program; each AdamW tensor in one scheme (world: 1 reduce-scatter over 16; "
               "replicas: 4 in the shard groups, parts all-reduced), %d layers over all ranks as reported; Muon "
               "NS'd once", mode_name[mode], n_world_layers);
            if (mode == SCHED_HSDP_ADAMW_AUTO)
                ok(bh == 0 && big >= 0 && wrs[big] == 1 && srs[small] == 4,
                   "hsdp-adamw auto: the largest AdamW tensor (%s, %lld elements) over all ranks, the smallest (%s) in "
                   "the shard groups", big >= 0 ? m->tensors[mx[big].tensor].name : "?", big >= 0 ? (long long)(mx[big].rows * mx[big].cols) : 0,
                   small >= 0 ? m->tensors[mx[small].tensor].name : "?");
            free(wrs), free(srs), free(ar), free(ns), free(seen), free(lw);
            sched_report_free(&rep);
            dm_program_free(ph);
        }
        free(mx);
        dm_err e3;
        sched_opts_default(&o);
        ok(sched_opts_parse(&o, "hsdp-adamw", "world", &e3) == 0 && o.hsdp_adamw == SCHED_HSDP_ADAMW_WORLD &&
               sched_opts_parse(&o, "hsdp-adamw", "both", &e3) == -1 && strstr(e3.msg, "auto, replicas or world"),
           "--hsdp-adamw parses world, refuses 'both': %s", e3.msg);
    }

    /* ---- --balance auto (sim/plan_best.h): the candidates simulated, the fastest kept */
    {
        dm_cluster a800;
        sim_opts so;
        sim_opts_default(&so);
        so.costs = costs;
        plan_best_report pb;
        sched_report r;
        sched_opts_default(&o);
        int lrc = dm_cluster_load("a800", &a800, &err);
        int brc = lrc ? -1 : plan_best_build(m, &a800, 16, costs, &o, &so, NULL, &p1, &r, &pb, &err);
        int fastest = brc == 0 && pb.n == 3 && pb.by_sim;
        for (int k = 0; fastest && k < pb.n; k++) fastest = pb.cand[k].simulated && pb.cand[pb.winner].step_us <= pb.cand[k].step_us;
        sim_result *sr = NULL;
        int same = fastest && sim_run(p1, &a800, &so, &sr, &err) == 0 && sr->step_us == pb.cand[pb.winner].step_us &&
                   strstr(p1->options, sched_balance_name(pb.cand[pb.winner].balance));
        ok(fastest && same, "auto on Qwen2.5-0.5B, 16 GPUs: %d candidates simulated, the returned plan (%s, %.3f ms) is the "
           "fastest and simulates to its step", pb.n, brc == 0 ? pb.cand[pb.winner].name : err.msg,
           brc == 0 ? pb.cand[pb.winner].step_us / 1e3 : 0);
        { /* the winner's simulation handed back: what simulating the returned plan gives */
            plan_best_opts kp;
            plan_best_opts_default(&kp);
            sim_result *kr = NULL;
            kp.winner_result = &kr;
            dm_program *p2 = NULL;
            int krc = lrc ? -1 : plan_best_build(m, &a800, 16, costs, &o, &so, &kp, &p2, NULL, &pb, &err);
            ok(krc == 0 && kr && sr && dm_program_same_ops(p1, p2) && kr->step_us == sr->step_us &&
                   kr->events == sr->events && kr->crit_total_us == sr->crit_total_us &&
                   !memcmp(kr->ns_us, sr->ns_us, (size_t)sr->nranks * sizeof *sr->ns_us) &&
                   !memcmp(kr->end_us, sr->end_us, (size_t)sr->ops * sizeof *sr->end_us),
               "auto hands back its winner's simulation: the run of the returned plan, op for op");
            sim_result_free(kr);
            dm_program_free(p2);
        }
        sim_result_free(sr);
        sched_report_free(&r);
        dm_program_free(p1);
        { /* a large candidate's simulation stops once it passes the best step so far (stop_ops 0:
           * every candidate and alternative counts as large): the same plan, winner and step as
           * with every simulation whole; a candidate stopped says so, its step a bound over the
           * winner's and under its own whole step; the balance line says "over" */
            static const struct {
                int gpus;
                const char *key, *val;
                int wall; /* WALL-OSS, whose --ns-split auto at 64 GPUs keeps P = 2 over 4 and 8 */
            } cs[] = {{16, NULL, NULL, 0}, {64, "hsdp", "yes", 0}, {32, "ns-split", "auto", 0}, {64, "comm-weight", "0.5", 0},
                      {64, "ns-split", "auto", 1}};
            dm_model *wall = NULL;
            if (dm_model_load("wall-oss-flow", &wall, &err)) tap_diag("WALL-OSS not loaded: %s", err.msg);
            for (size_t i = 0; i < sizeof cs / sizeof *cs; i++) {
                const dm_model *mm = cs[i].wall ? wall : m;
                if (!mm) continue;
                sched_opts q;
                sched_opts_default(&q);
                if (cs[i].key) sched_opts_parse(&q, cs[i].key, cs[i].val, &err);
                plan_best_opts whole, stop;
                plan_best_opts_default(&whole);
                plan_best_opts_default(&stop);
                whole.stop_ops = INT64_MAX;
                stop.stop_ops = 0;
                plan_best_report pa, pz;
                dm_program *qa = NULL, *qz = NULL;
                int ra = lrc ? -1 : plan_best_build(mm, &a800, cs[i].gpus, costs, &q, &so, &whole, &qa, NULL, &pa, &err);
                int rz = ra ? -1 : plan_best_build(mm, &a800, cs[i].gpus, costs, &q, &so, &stop, &qz, NULL, &pz, &err);
                int same = rz == 0 && pa.by_sim && pz.by_sim && dm_program_same_ops(qa, qz) && pa.winner == pz.winner &&
                           pa.cand[pa.winner].step_us == pz.cand[pz.winner].step_us && !pz.cand[pz.winner].stopped;
                int stopped = 0, bounds = 1;
                for (int k = 0; same && k < pz.n; k++) {
                    if (!pz.cand[k].stopped) continue;
                    stopped++;
                    bounds &= pz.cand[k].step_us > pz.cand[pz.winner].step_us && pz.cand[k].step_us <= pa.cand[k].step_us;
                }
                for (int k = 0; same && k < pz.n_split_p; k++) { /* --ns-split auto's P, weighed after */
                    if (!pz.split_p_stopped[k]) continue;
                    stopped++;
                    bounds &= pz.split_p_us[k] > pz.cand[pz.winner].step_us && pz.split_p_us[k] <= pa.split_p_us[k];
                }
                char d[1024];
                plan_best_describe(&pz, d, sizeof d);
                int says = 0; /* "over " and a number: a stopped simulation's bound */
                for (const char *x = d; (x = strstr(x, "over ")) && !says; x += 5) says = x[5] >= '0' && x[5] <= '9';
                ok(same && bounds && (stopped > 0) <= says,
                   "auto with stops, %d GPUs %s %s: the same plan as with whole simulations, %d candidate%s stopped over "
                   "the winner's step (%s)", cs[i].gpus, cs[i].key ? cs[i].key : "", cs[i].val ? cs[i].val : "", stopped,
                   stopped == 1 ? "" : "s", rz == 0 ? d : err.msg);
                dm_program_free(qa);
                dm_program_free(qz);
            }
            dm_model_free(wall);
        }
        { /* 8 GPUs: milp proves nothing better than lpt's assignment, so lpt's program stands for
           * it (made without a program of its own, not simulated again) */
            int src = lrc ? -1 : plan_best_build(m, &a800, 8, costs, &o, &so, NULL, &p1, NULL, &pb, &err);
            int mi = -1, li = -1;
            for (int k = 0; src == 0 && k < pb.n; k++) {
                if (pb.cand[k].balance == SCHED_BAL_MILP) mi = k;
                if (pb.cand[k].balance == SCHED_BAL_LPT && pb.cand[k].comm_weight == o.comm_weight) li = k;
            }
            ok(src == 0 && mi >= 0 && li >= 0 && pb.cand[mi].same_as == li && pb.cand[mi].ops == pb.cand[li].ops &&
                   pb.cand[mi].step_us == pb.cand[li].step_us && pb.winner != mi,
               "auto on 8 GPUs: milp kept lpt's assignment (%s), lpt's program stands for it",
               src == 0 && mi >= 0 ? pb.cand[mi].status : err.msg);
            dm_program_free(p1);
            sched_assign x = {0}, y = {0};
            int ox[3] = {0, 1, 2}, oy[3] = {0, 1, 2}, bx[3] = {0, 0, 1}, by[3] = {0, 0, 1};
            x.owner = ox, x.batch_of = bx, y.owner = oy, y.batch_of = by, x.n_items = y.n_items = 3;
            int eq = sched_assign_same(&x, &y);
            oy[2] = 0;
            int ne = !sched_assign_same(&x, &y);
            oy[2] = 2, by[1] = 1;
            ne &= !sched_assign_same(&x, &y);
            by[1] = 0, y.n_items = 0;
            ok(eq && ne && !sched_assign_same(&x, &y), "sched_assign_same: owners and batches compared, an assignment that "
               "does not say its items never the same");
        }
        { /* a candidate whose assignment an earlier one's program was built on (milp keeping lpt's,
           * lpt-ns where the comm terms changed nothing) stands on that program: built once, its
           * step that one's, never the winner */
            static const int gs[] = {8, 16, 32, 64};
            int cases = 0, sames = 0, ns_sames = 0, bad = 0;
            for (int hs = 0; hs < 2 && !lrc; hs++)
                for (int gi = 0; gi < 4; gi++) {
                    sched_opts q = o;
                    q.hsdp = hs;
                    dm_program *pq = NULL;
                    plan_best_report pr;
                    if (plan_best_build(m, &a800, gs[gi], costs, &q, &so, NULL, &pq, NULL, &pr, &err)) {
                        bad++;
                        tap_diag("%d GPUs%s: %s", gs[gi], hs ? " --hsdp" : "", err.msg);
                        continue;
                    }
                    cases++;
                    for (int k = 0; k < pr.n; k++) {
                        int j = pr.cand[k].same_as;
                        if (j < 0) continue;
                        sames++;
                        ns_sames += pr.cand[k].comm_weight == 0 && pr.cand[k].balance == SCHED_BAL_LPT;
                        /* (a winner that an alternative replaced holds the alternative's ops and step) */
                        int alt = j == pr.winner && (pr.muon_world_won || pr.adamw_replicas_won || pr.unsplit_won);
                        int wrong = !(j < k && pr.cand[j].same_as < 0 && pr.winner != k &&
                                      (alt || (pr.cand[k].ops == pr.cand[j].ops &&
                                               (!pr.by_sim || pr.cand[k].step_us == pr.cand[j].step_us))));
                        if (wrong)
                            tap_diag("%d GPUs%s: %s on %s's program: ops %lld / %lld, steps %.3f / %.3f, winner %d",
                                     gs[gi], hs ? " --hsdp" : "", pr.cand[k].name, pr.cand[j].name,
                                     (long long)pr.cand[k].ops, (long long)pr.cand[j].ops, pr.cand[k].step_us,
                                     pr.cand[j].step_us, pr.winner);
                        bad += wrong;
                    }
                    dm_program_free(pq);
                }
            ok(cases == 8 && !bad && ns_sames > 0,
               "auto at 8-64 GPUs, flat and --hsdp: %d candidates on an earlier one's program (%d of them lpt-ns), each "
               "with its ops and step, none the winner (%d wrong)", sames, ns_sames, bad);
        }
        o.balance = SCHED_BAL_LPT;
        brc = lrc ? -1 : plan_best_build(m, &a800, 16, costs, &o, &so, NULL, &p1, NULL, &pb, &err);
        ok(brc == 0 && pb.n == 0 && strstr(p1->options, "balance=lpt"), "a named balance goes straight to sched_build");
        dm_program_free(p1);
        plan_best_opts po;
        plan_best_opts_default(&po);
        po.sim_budget_s = 1e-9;
        o.balance = SCHED_BAL_AUTO;
        brc = lrc ? -1 : plan_best_build(m, &a800, 16, costs, &o, &so, &po, &p1, NULL, &pb, &err);
        ok(brc == 0 && pb.n == 3 && !pb.by_sim && strstr(pb.why, "budget") && pb.cand[pb.winner].comm_weight == 1 &&
               pb.cand[pb.winner].objective_us <= pb.cand[1].objective_us,
           "simulations over the budget: the lower objective decides (%s)", pb.why);
        { /* every candidate's program estimated over the budget from its assignment (pairs x ranks)
           * before it is built: all weighed by their assignment alone, and the plan returned is
           * the winner's, built in full */
            int only = brc == 0 && strstr(pb.why, "would hold about");
            for (int k = 0; only && k < pb.n; k++) only = pb.cand[k].objective_only;
            sched_opts w = o;
            w.balance = brc == 0 ? pb.cand[pb.winner].balance : SCHED_BAL_LPT;
            w.comm_weight = brc == 0 ? pb.cand[pb.winner].comm_weight : 1;
            dm_program *direct = NULL;
            int built = brc == 0 && sched_build(m, &a800, 16, costs, &w, &direct, NULL, &err) == 0;
            ok(only && built && pb.cand[pb.winner].ops > 0 && dm_program_hash(direct) == dm_program_hash(p1),
               "over the budget by the estimate: every candidate weighed by its objective alone, none built; the winner "
               "(%s) built in full, the program sched_build gives for its balance", brc == 0 ? pb.cand[pb.winner].name :
               err.msg);
            dm_program_free(direct);
        }
        dm_program_free(p1);
        { /* a budget just above the largest estimate (its collectives alone) but under that
           * candidate's program (the compute ops too): it is built first (plan_best.c: the largest
           * estimate first), counted, found too large; the others weighed by their assignment
           * alone, none built */
            int f = 0;
            for (int k = 1; brc == 0 && k < pb.n; k++)
                if (pb.cand[k].pairs > pb.cand[f].pairs) f = k;
            double est = brc == 0 ? 2.0 * pb.cand[f].pairs * 16 : 0;
            po.sim_budget_s = (est + 1) * PLAN_BEST_SIM_S_PER_OP;
            p1 = NULL;
            brc = lrc ? -1 : plan_best_build(m, &a800, 16, costs, &o, &so, &po, &p1, NULL, &pb, &err);
            int only = brc == 0 && pb.n == 3 && !pb.cand[f].objective_only && pb.cand[f].ops > est &&
                       strstr(pb.why, "would take about");
            for (int k = 0; only && k < pb.n; k++) only = k == f || (pb.cand[k].objective_only && pb.cand[k].ops == 0);
            ok(only && p1 && p1->ranks[0].n_ops > 0, "over the budget once built: the candidate of the largest estimate "
               "built first, %s (%lld ops over its estimate of %.0f), the others weighed by their objective alone (%s)",
               brc == 0 ? pb.cand[f].name : "?", brc == 0 ? (long long)pb.cand[f].ops : -1LL, est, pb.why);
            dm_program_free(p1);
        }

        { /* hierarchical (two nodes of 8): the estimate counts, beside each pair's broadcast and
           * reduce in every node and its all-reduce over the nodes, every batch's NS and Muon update
           * once per node (the NS replicated per node); no candidate built, the winner built in full,
           * the estimate never above its ops */
            sched_opts hi = o;
            hi.hierarchical = 1;
            plan_best_opts hpo;
            plan_best_opts_default(&hpo);
            hpo.sim_budget_s = 1e-9;
            dm_program *hp = NULL, *direct = NULL;
            sched_report hr;
            memset(&hr, 0, sizeof hr);
            int hrc = lrc ? -1 : plan_best_build(m, &a800, 16, costs, &hi, &so, &hpo, &hp, &hr, &pb, &err);
            int only = hrc == 0 && strstr(pb.why, "would hold about") && strstr(pb.why, "x 16 ranks x 2.125 + ") &&
                       strstr(pb.why, "in the nodes' NS");
            for (int k = 0; only && k < pb.n; k++) only = pb.cand[k].objective_only;
            hi.balance = hrc == 0 ? pb.cand[pb.winner].balance : SCHED_BAL_LPT;
            hi.comm_weight = hrc == 0 ? pb.cand[pb.winner].comm_weight : 1;
            int built = hrc == 0 && sched_build(m, &a800, 16, costs, &hi, &direct, NULL, &err) == 0;
            double ops = hrc == 0 ? (double)dm_program_ops(hp) : 0;
            ok(only && built && hr.ops_node_compute > 0 && hr.ops_estimate <= ops &&
                   dm_program_hash(direct) == dm_program_hash(hp),
               "hierarchical over the budget by the estimate: every candidate weighed by its objective alone; the "
               "winner (%s) built in full, %.0f ops (estimated %.0f, %.0f of them the nodes' NS and updates), "
               "sched_build's program (%s)", hrc == 0 ? pb.cand[pb.winner].name : err.msg, ops, hr.ops_estimate,
               hr.ops_node_compute, hrc == 0 ? pb.why : "");
            sched_report_free(&hr);
            dm_program_free(direct);
            dm_program_free(hp);
        }

        { /* HSDP (two shard groups of 8): the same estimate from the assignment, each pair's stages
           * four collectives on every rank (build.c, max_ops), so no candidate is built; the winner
           * built in full, the program sched_build gives for its balance, holding at least the
           * estimated collectives */
            sched_opts h = o;
            h.hsdp = 1;
            h.hsdp_muon = SCHED_HSDP_MUON_REPLICAS; /* (auto: below) */
            plan_best_opts hpo;
            plan_best_opts_default(&hpo);
            hpo.sim_budget_s = 1e-9;
            dm_program *hp = NULL, *direct = NULL;
            int hrc = lrc ? -1 : plan_best_build(m, &a800, 16, costs, &h, &so, &hpo, &hp, NULL, &pb, &err);
            int only = hrc == 0 && strstr(pb.why, "would hold about") && strstr(pb.why, "x 16 ranks x 4)");
            for (int k = 0; only && k < pb.n; k++) only = pb.cand[k].objective_only;
            int64_t colls = 0;
            for (int r = 0; hrc == 0 && r < hp->nranks; r++)
                for (int i = 0; i < hp->ranks[r].n_ops; i++) colls += hp->ranks[r].ops[i].coll >= 0;
            double est = hrc == 0 ? 4.0 * pb.cand[pb.winner].pairs * 16 : 0;
            h.balance = hrc == 0 ? pb.cand[pb.winner].balance : SCHED_BAL_LPT;
            h.comm_weight = hrc == 0 ? pb.cand[pb.winner].comm_weight : 1;
            int built = hrc == 0 && sched_build(m, &a800, 16, costs, &h, &direct, NULL, &err) == 0;
            ok(only && built && est > 0 && colls >= est && dm_program_hash(direct) == dm_program_hash(hp),
               "HSDP over the budget by the estimate: every candidate weighed by its objective alone; the winner (%s) "
               "built in full, %lld collective ops (estimated %.0f), sched_build's program (%s)",
               hrc == 0 ? pb.cand[pb.winner].name : err.msg, (long long)colls, est, hrc == 0 ? pb.why : "");
            dm_program_free(direct);
            dm_program_free(hp);
            /* --hsdp-muon auto (the default): the winner weighed by its objective is simulated after,
             * with the Muon pairs over all ranks (simulated first) as its stop, and the faster kept */
            h.balance = SCHED_BAL_AUTO;
            h.comm_weight = o.comm_weight;
            h.hsdp_muon = SCHED_HSDP_MUON_AUTO;
            hp = NULL;
            sim_result *hr = NULL;
            hpo.winner_result = &hr;
            hrc = lrc ? -1 : plan_best_build(m, &a800, 16, costs, &h, &so, &hpo, &hp, NULL, &pb, &err);
            sim_result *again = NULL;
            int ran = hrc == 0 && sim_run(hp, &a800, &so, &again, &err) == 0;
            const plan_cand *w = hrc == 0 ? &pb.cand[pb.winner] : NULL;
            double mine = hrc == 0 ? pb.muon_replicas_us : 0, world = hrc == 0 ? pb.muon_world_us : 0;
            char d[1024];
            plan_best_describe(&pb, d, sizeof d);
            ok(ran && !pb.by_sim && pb.late_sim && pb.muon_tried && hr && again->step_us == hr->step_us &&
                   w->step_us == hr->step_us && (pb.muon_world_won ? world < mine || pb.late_stopped : world >= mine) &&
                   strstr(d, "simulated after: ") && strstr(d, pb.muon_world_won ? ", kept" : ", not kept"),
               "HSDP by the objective, --hsdp-muon auto: the winner simulated after (%s%.3f ms), the pairs over all "
               "ranks %.3f ms, the faster kept and its simulation handed back (%.3f ms) (%s)",
               hrc == 0 && pb.late_stopped ? "over " : "", mine / 1e3, world / 1e3, hr ? hr->step_us / 1e3 : 0,
               hrc == 0 ? d : err.msg);
            sim_result_free(hr);
            sim_result_free(again);
            dm_program_free(hp);
            /* the check after over its budget: the winner's program neither built nor simulated;
             * the Muon pairs over all ranks, simulated, are the plan, and their simulation handed
             * back */
            hpo.late_budget_s = 1e-9;
            hp = NULL;
            hr = NULL;
            hrc = lrc ? -1 : plan_best_build(m, &a800, 16, costs, &h, &so, &hpo, &hp, NULL, &pb, &err);
            again = NULL;
            ran = hrc == 0 && sim_run(hp, &a800, &so, &again, &err) == 0;
            if (hrc == 0) plan_best_describe(&pb, d, sizeof d);
            double lops = hrc == 0 ? 4.0 * pb.cand[pb.winner].pairs * 16 : 0;
            ok(ran && !pb.by_sim && !pb.late_sim && pb.late_skipped && pb.late_ops == lops && pb.muon_world_won &&
                   hr && again->step_us == hr->step_us && hr->step_us == pb.muon_world_us &&
                   strstr(d, "not simulated after: ") && strstr(d, "budget of that check") && strstr(d, ", kept"),
               "HSDP by the objective, the check after over its budget: the winner not simulated (%.0f ops), the pairs "
               "over all ranks kept with their simulation (%.3f ms) (%s)",
               hrc == 0 ? pb.late_ops : 0, hr ? hr->step_us / 1e3 : 0, hrc == 0 ? d : err.msg);
            sim_result_free(hr);
            sim_result_free(again);
            dm_program_free(hp);
        }

        /* The NS-only MILP spread Moonlight-16B's small experts over every owner at 256 GPUs
         * (5134 broadcasts per rank instead of LPT's 135: a step 4x LPT's). The objective keeps
         * the collectives in check, and auto simulates at least as fast as the NS-only LPT. */
        dm_model *ml = NULL;
        dm_costs *h200 = NULL;
        if (lrc == 0 && dm_model_load("moonlight-16b-a3b", &ml, &err) == 0 &&
            dm_costs_load(DM_SRCDIR "/traces/costs/h200.csv", &h200, &err) == 0) {
            so.costs = h200;
            o.milp_time_s = 0.5;
            brc = plan_best_build(ml, &a800, 256, h200, &o, &so, NULL, &p1, &r, &pb, &err);
            const plan_cand *mi = brc == 0 ? &pb.cand[1] : NULL, *ns = brc == 0 ? &pb.cand[2] : NULL;
            ok(brc == 0 && pb.by_sim && !strcmp(mi->name, "milp") && !strcmp(ns->name, "lpt-ns") && mi->pairs <= ns->pairs &&
                   pb.cand[pb.winner].step_us <= ns->step_us && pb.cand[pb.winner].step_us <= pb.cand[0].step_us,
               "Moonlight-16B, 256 GPUs: milp makes %d (layer, owner) pairs (NS-only LPT %d); auto's %s simulates %.1f ms, "
               "lpt %.1f, lpt-ns %.1f", mi ? mi->pairs : 0, ns ? ns->pairs : 0, brc == 0 ? pb.cand[pb.winner].name : err.msg,
               brc == 0 ? pb.cand[pb.winner].step_us / 1e3 : 0, brc == 0 ? pb.cand[0].step_us / 1e3 : 0,
               ns ? ns->step_us / 1e3 : 0);
            sched_report_free(&r);
            dm_program_free(p1);
            sched_opts_default(&o);
            o.balance = SCHED_BAL_MILP;
            o.milp_time_s = 0.5;
            {
                double t0 = sched_wall_s();
                brc = sched_build(ml, &a800, 256, h200, &o, &p1, &r, &err);
                double dt = sched_wall_s() - t0;
                /* the limit is counted in work (about seconds on the build machine); the wall clock
                 * only caps it, at twice the limit plus 0.5 s: reported, asserted loosely (a loaded
                 * or sanitized host) */
                ok(brc == 0 && r.solver_s < 2 * o.milp_time_s + 0.5 + 1.0,
                   "milp time limit 0.5 s honoured: assignment %.3f s, build %.3f s (%s)", r.solver_s, dt, r.solver_status);
                sched_report_free(&r);
                dm_program_free(p1);
            }
            /* a search cut by the limit gives the same plan on every run: the limit is counted in
             * work, not read off the wall clock (which gave DeepSeek-V4-Pro four different steps in
             * eight runs). Limits that cut the split search (0.02 s), the count search (0.05 s:
             * 0.03 s charged, past its 0.0275) and lp_solve (1 s: "milp timeout"). */
            static const double cut_at[] = {0.02, 0.05, 1.0};
            for (size_t k = 0; k < sizeof cut_at / sizeof cut_at[0]; k++) {
                uint64_t h[2] = {0, 0};
                char st[2][160] = {"", ""};
                int rcs = 0;
                o.milp_time_s = cut_at[k];
                for (int run = 0; run < 2; run++) {
                    dm_program *pr = NULL;
                    sched_report rr;
                    memset(&rr, 0, sizeof rr);
                    rcs |= sched_build(ml, &a800, 256, h200, &o, &pr, &rr, &err);
                    if (pr) h[run] = dm_program_hash(pr);
                    snprintf(st[run], sizeof st[run], "%s", rr.solver_status);
                    sched_report_free(&rr);
                    dm_program_free(pr);
                }
                /* the wall-clock ceiling (2 x limit + 0.5 s) is the one cut that depends on the
                 * host: a sanitized build on a loaded host can reach it, and then says so */
                int walled = strstr(st[0], "wall-clock ceiling") || strstr(st[1], "wall-clock ceiling");
                if (walled) tap_diag("milp limit %.2f s: the wall-clock ceiling cut a run on this host: %s | %s", cut_at[k], st[0], st[1]);
                ok(rcs == 0 && h[0] && h[1] && (walled || (h[0] == h[1] && !strcmp(st[0], st[1]))),
                   "milp limit %.2f s on Moonlight-16B, 256 GPUs: two runs, one program (%016llx %016llx) and one status (%s)%s",
                   cut_at[k], (unsigned long long)h[0], (unsigned long long)h[1], st[0],
                   walled ? "; not compared: the wall-clock ceiling cut a run" : "");
            }
        } else {
            tap_diag("Moonlight-16B or the H200 cost table not found: %s", err.msg);
        }
        dm_model_free(ml);
        dm_costs_free(h200);
    }
    dm_model_free(m);

    /* planning speed on the big case */
    if (dm_model_load("qwen2.5-72b", &m, &err) == 0) {
        sched_opts_default(&o);
        sched_report rep;
        double t0 = sched_wall_s();
        int rc = sched_build(m, &cl, 256, costs, &o, &p1, &rep, &err);
        double dt = sched_wall_s() - t0;
        /* Timing is reported, not asserted (the goal is measured by `dmuon regress` and `dmuon
         * plan`): a loaded or sanitized CI host must not fail a correctness suite. */
        ok(rc == 0 && p1 && p1->ranks[0].n_ops > 0, "Qwen2.5-72B on 256 ranks, LPT: planned (%d ops on rank 0)",
           p1 ? p1->ranks[0].n_ops : 0);
        tap_diag("Qwen2.5-72B on 256 ranks, LPT: planned in %.3f s wall", dt);
        sched_report_free(&rep);
        dm_program_free(p1);
        dm_model_free(m);
    }
    test_replicated(&cl, costs);
    test_update_pieces(&cl, costs);
    test_ddp_loop(&cl, costs);
    test_fetch_streams(&cl, costs);
    dm_costs_free(costs);
    return tap_done();
}
