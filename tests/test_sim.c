/* test_sim.c: analytic checks of the simulator and its collective cost model: a collective alone
 * takes exactly its formula; equal transfers on one link each take twice as long; max-min
 * fairness; ops on one stream never overlap and follow their dependencies; a collective's members
 * start together; the same input gives the same trace bytes; traces read back; deadlocks named;
 * a run of shared ranks (sim_shared_ranks) reports what the run of every rank does; a stop's
 * bound at setup never over the step. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cluster.h"
#include "coll.h"
#include "collcost.h"
#include "costs.h"
#include "model.h"
#include "net.h"
#include "program.h"
#include "sched.h"
#include "sim.h"
#include "tap.h"
#include "trace.h"

static dm_err err;

static dm_cluster cluster(const char *name)
{
    dm_cluster c;
    if (dm_cluster_load(name, &c, &err)) {
        printf("Bail out! %s\n", err.msg);
        exit(1);
    }
    return c;
}

static int all_ranks(dm_program *p, int n)
{
    int r[1024];
    for (int i = 0; i < n; i++) r[i] = i;
    return dm_program_group(p, r, n, &err);
}

/* Add one collective of `kind` over group g to each member, on stream st. */
static void add_coll(dm_program *p, int g, dm_op_kind kind, dm_stream st, double bytes, int root)
{
    dm_op o = dm_op_init(kind, st);
    o.coll = dm_program_new_coll(p);
    o.group = g;
    o.bytes = bytes;
    o.root = root;
    for (int i = 0; i < p->groups[g].n; i++) dm_program_add_op(p, p->groups[g].ranks[i], &o, NULL, 0, NULL, 0, &err);
}

/* What the simulator adds to a collective's formula: the executor's staging copies (coll.h;
 * add_coll's ops carry no parameters, so only the bytes). */
static double staging_us(const dm_cluster *c, dm_op_kind kind, double bytes, int n)
{
    return dm_coll_staging_bytes(kind, dm_op_staged_default(kind), bytes, n) / c->gpu->hbm_Bps * 1e6;
}

static sim_result *run(const dm_program *p, const dm_cluster *c, int trace)
{
    sim_opts o;
    sim_opts_default(&o);
    o.record_trace = trace;
    sim_result *r;
    if (sim_run(p, c, &o, &r, &err)) {
        printf("# sim_run: %s\n", err.msg);
        return NULL;
    }
    return r;
}

static void test_formula(void)
{
    dm_cluster c = cluster("a800");
    int r8[8] = {0, 1, 2, 3, 4, 5, 6, 7};
    coll_topo t;
    ok(collcost_topo(&c, r8, 8, &t, &err) == 0 && t.n_nodes == 1 && t.max_per_node == 8, "one-node topology");
    ok_near(t.bus_Bps, 200e9 * 0.75, 1e-12, "one node: bus bandwidth = NVLink x bus efficiency");
    ok_near(collcost_time_us(DM_OP_BROADCAST, COLL_ALGO_RING, 1e9, &t), 6.8 + 7 * 0.6 + 1e9 / 150e9 * 1e6, 1e-12,
            "broadcast 1 GB on 8 A800s: 6.8 + 7 x 0.6 us + 1 GB / 150 GB/s");
    ok_near(collcost_time_us(DM_OP_ALLREDUCE, COLL_ALGO_RING, 1e9, &t), 6.8 + 14 * 0.6 + 2 * 7 / 8.0 * 1e9 / 150e9 * 1e6,
            1e-12, "ring all-reduce: 2(n-1) hops and 2(n-1)/n bus factor");
    ok_near(collcost_busbw_factor(DM_OP_ALLGATHER, 8), 7 / 8.0, 1e-15, "all-gather busbw factor (n-1)/n");
    ok_near(collcost_busbw_factor(DM_OP_REDUCE, 8), 1, 1e-15, "reduce busbw factor 1");
    int r32[32];
    for (int i = 0; i < 32; i++) r32[i] = i;
    ok(collcost_topo(&c, r32, 32, &t, &err) == 0 && t.n_nodes == 4, "4-node topology");
    ok_near(t.bus_Bps, 4 * c.nic_Bps, 1e-12, "4 nodes of 8: bus bandwidth = 4 NICs per node");
    int r4[4] = {0, 8, 16, 24};
    ok(collcost_topo(&c, r4, 4, &t, &err) == 0 && t.n_nodes == 4 && t.max_per_node == 1, "one rank per node");
    ok_near(t.bus_Bps, c.nic_Bps, 1e-12, "one rank per node: one NIC");
    ok(collcost_pick(DM_OP_BROADCAST, COLL_ALGO_AUTO, 1e3, &t) == COLL_ALGO_RING, "broadcast is always ring");
    coll_topo big = t;
    big.n_ranks = 256, big.n_nodes = 32, big.max_per_node = 8;
    ok(collcost_pick(DM_OP_ALLREDUCE, COLL_ALGO_AUTO, 1024, &big) == COLL_ALGO_TREE,
       "small all-reduce on 32 nodes picks tree (latency)");
    ok(collcost_pick(DM_OP_ALLREDUCE, COLL_ALGO_AUTO, 1e10, &big) == COLL_ALGO_RING,
       "large all-reduce picks ring (bandwidth)");
    ok_near(collcost_busbw_Bps(DM_OP_ALLREDUCE, 8, 1e9, 1e4), 1e9 / 1e-2 * 2 * 7 / 8.0, 1e-12, "busbw as nccl-tests");
}

/* A collective alone in the simulator takes exactly its formula, for every kind and placement. */
static void test_alone(void)
{
    dm_cluster c = cluster("a800");
    static const dm_op_kind kinds[] = {DM_OP_BROADCAST, DM_OP_REDUCE, DM_OP_ALLREDUCE, DM_OP_ALLGATHER,
                                       DM_OP_REDUCESCATTER};
    static const int sizes[][2] = {{8, 1}, {16, 1}, {32, 8}, {2, 1}, {24, 4}}; /* (ranks, stride) */
    for (size_t si = 0; si < sizeof sizes / sizeof sizes[0]; si++) {
        int n = sizes[si][0], stride = sizes[si][1];
        for (size_t k = 0; k < 5; k++) {
            int nranks = n * stride, ranks[256];
            for (int i = 0; i < n; i++) ranks[i] = i * stride;
            dm_program *p = dm_program_new(nranks, 8, "t", "t", "a800", "", 1, &err);
            int g = dm_program_group(p, ranks, n, &err);
            add_coll(p, g, kinds[k], DM_STREAM_COMM_HI, 3e8, kinds[k] <= DM_OP_REDUCE ? ranks[0] : -1);
            sim_result *r = run(p, &c, 0);
            coll_topo t;
            collcost_topo(&c, ranks, n, &t, &err);
            double want = collcost_time_us(kinds[k], COLL_ALGO_AUTO, 3e8, &t) + staging_us(&c, kinds[k], 3e8, n);
            ok(r && fabs(r->step_us - want) <= 1e-9 * want, "%s on %d ranks (stride %d) alone: %.6f us = formula + staging %.6f us",
               dm_op_kind_name(kinds[k]), n, stride, r ? r->step_us : -1, want);
            sim_result_free(r);
            dm_program_free(p);
        }
    }
}

/* Two equal collectives over the same links each take twice as long; unequal ones share
 * max-min fairly (the small one finishes at 2 x its alone time, the big one at the sum). */
static void test_sharing(void)
{
    dm_cluster c = cluster("a800");
    c.base_latency_us = c.nvlink_latency_us = c.net_latency_us = 0;
    double B = c.nvlink_Bps * c.nvlink_bus_efficiency, V = 1e9;
    dm_program *p = dm_program_new(2, 8, "t", "t", "a800", "", 1, &err);
    int g = all_ranks(p, 2);
    add_coll(p, g, DM_OP_BROADCAST, DM_STREAM_COMM_HI, V, 0);
    sim_result *one = run(p, &c, 0);
    add_coll(p, g, DM_OP_BROADCAST, DM_STREAM_COMM_LO, V, 1);
    /* rank order of ops: rank 0 holds [hi, lo]; the second one is on another stream. */
    sim_result *two = run(p, &c, 0);
    ok(one && fabs(one->step_us - V / B * 1e6) < 1e-6, "one transfer alone: V/B = %.3f us", one ? one->step_us : -1);
    ok(two && fabs(sim_op_end(two, 0, 0) - 2 * V / B * 1e6) < 1e-6 && fabs(sim_op_end(two, 0, 1) - 2 * V / B * 1e6) < 1e-6,
       "two equal transfers on one link: each takes twice as long (%.3f, %.3f us)", two ? sim_op_end(two, 0, 0) : -1,
       two ? sim_op_end(two, 0, 1) : -1);
    sim_result_free(one);
    sim_result_free(two);
    dm_program_free(p);

    p = dm_program_new(2, 8, "t", "t", "a800", "", 1, &err);
    g = all_ranks(p, 2);
    add_coll(p, g, DM_OP_BROADCAST, DM_STREAM_COMM_HI, V / 2, 0);
    add_coll(p, g, DM_OP_BROADCAST, DM_STREAM_COMM_LO, V, 0);
    sim_result *r = run(p, &c, 0);
    ok(r && fabs(sim_op_end(r, 1, 0) - V / B * 1e6) < 1e-6, "half-size transfer ends at 2 x its alone time");
    ok(r && fabs(sim_op_end(r, 1, 1) - 1.5 * V / B * 1e6) < 1e-6, "full-size one then runs alone: ends at 1.5 V/B");
    sim_result_free(r);
    dm_program_free(p);

    /* Max-min with different bottlenecks: A over links 0,1; B over 1,2; link 2 slow. */
    double cap[3] = {10, 10, 2};
    sim_net *n = sim_net_new(3, cap, &err);
    int la[2] = {0, 1}, lb[2] = {1, 2};
    double w[2] = {1, 1};
    sim_net_add(n, 0, 100, la, w, 2, 1, &err);
    ok_near(sim_net_rate(n, 1), 10, 1e-12, "max-min: a flow alone gets its bottleneck");
    sim_net_add(n, 0, 100, lb, w, 2, 2, &err);
    ok_near(sim_net_rate(n, 2), 2, 1e-12, "max-min: B limited by its slow link");
    ok_near(sim_net_rate(n, 1), 8, 1e-12, "max-min: A takes what B leaves on the shared link");
    int tags[2];
    ok(sim_net_pop_finished(n, sim_net_next_finish_us(n), tags, 2) == 1 && tags[0] == 1, "A finishes first");
    ok_near(sim_net_rate(n, 2), 2, 1e-12, "B keeps its bottleneck rate");
    sim_net_free(n);
}

static uint64_t lcg_state = 12345;
static int rnd(int n)
{
    lcg_state = lcg_state * 6364136223846793005ULL + 1442695040888963407ULL;
    return (int)((lcg_state >> 33) % (uint64_t)n);
}

/* A random program: 16 ranks on 2 nodes, compute ops with random deps and streams, collectives
 * over the world, per-node and pairwise groups in one global order. */
static dm_program *random_program(void)
{
    int R = 16;
    dm_program *p = dm_program_new(R, 8, "random", "t", "a800", "", 1, &err);
    int world = all_ranks(p, R);
    int node0[8], node1[8];
    for (int i = 0; i < 8; i++) node0[i] = i, node1[i] = 8 + i;
    int gn[2] = {dm_program_group(p, node0, 8, &err), dm_program_group(p, node1, 8, &err)};
    for (int step = 0; step < 60; step++) {
        int what = rnd(4);
        if (what == 0) {
            int g = rnd(3) == 0 ? world : gn[rnd(2)];
            static const dm_op_kind ck[] = {DM_OP_BROADCAST, DM_OP_REDUCE, DM_OP_ALLREDUCE, DM_OP_ALLGATHER,
                                            DM_OP_REDUCESCATTER};
            dm_op_kind k = ck[rnd(5)];
            dm_op o = dm_op_init(k, rnd(2) ? DM_STREAM_COMM_HI : DM_STREAM_COMM_LO);
            o.coll = dm_program_new_coll(p);
            o.group = g;
            o.bytes = 1e6 * (1 + rnd(100));
            o.root = k <= DM_OP_REDUCE ? p->groups[g].ranks[0] : -1;
            for (int i = 0; i < p->groups[g].n; i++) {
                int r = p->groups[g].ranks[i], n = p->ranks[r].n_ops, dep = n ? rnd(n) : 0;
                dm_program_add_op(p, r, &o, &dep, n ? 1 : 0, NULL, 0, &err);
            }
        } else {
            for (int r = 0; r < R; r++) {
                static const dm_op_kind kk[] = {DM_OP_FORWARD, DM_OP_BACKWARD, DM_OP_NS, DM_OP_ADAMW, DM_OP_WAIT};
                dm_op o = dm_op_init(kk[rnd(5)], rnd(4) ? DM_STREAM_COMPUTE : DM_STREAM_COMM_LO);
                o.flops = 1e10 * (1 + rnd(50));
                o.m = 512 * (1 + rnd(4)), o.n = 2048, o.batch = 1 + rnd(3);
                o.bytes = 1e7 * (1 + rnd(10));
                int n = p->ranks[r].n_ops, deps[2] = {n ? rnd(n) : 0, n ? rnd(n) : 0};
                dm_program_add_op(p, r, &o, deps, n ? (deps[0] == deps[1] ? 1 : 2) : 0, NULL, 0, &err);
            }
        }
    }
    return p;
}

static int is_compute(dm_op_kind k) { return k == DM_OP_FORWARD || k == DM_OP_BACKWARD || k == DM_OP_NS || k == DM_OP_ADAMW || k == DM_OP_MUON_UPDATE; }

static void test_order(void)
{
    dm_cluster c = cluster("a800");
    dm_program *p = random_program();
    ok(dm_program_validate(p, &err) == 0, "random program validates");
    sim_result *r = run(p, &c, 1);
    ok(r != NULL, "random program runs");
    if (!r) return;
    int bad_stream = 0, bad_dep = 0, bad_gpu = 0, bad_coll = 0, n_coll = 0;
    const double eps = 1e-9;
    for (int k = 0; k < p->nranks; k++) {
        const dm_rank_prog *rp = &p->ranks[k];
        double last_end[DM_STREAM__COUNT] = {0};
        for (int i = 0; i < rp->n_ops; i++) {
            const dm_op *o = &rp->ops[i];
            double st = sim_op_start(r, k, i), en = sim_op_end(r, k, i);
            double rd = r->ready_us[r->op_off[k] + i];
            if (rd < last_end[o->stream] - eps || st < rd - eps || en < st) bad_stream++;
            last_end[o->stream] = en;
            for (int d = 0; d < o->n_deps; d++)
                if (rd < sim_op_end(r, k, o->deps[d]) - eps) bad_dep++;
            if (is_compute(o->kind))
                for (int j = 0; j < i; j++)
                    if (is_compute(rp->ops[j].kind) && sim_op_start(r, k, j) < en - eps && st < sim_op_end(r, k, j) - eps &&
                        en > st && sim_op_end(r, k, j) > sim_op_start(r, k, j))
                        bad_gpu++;
        }
    }
    for (int co = 0; co < p->n_colls; co++) {
        double s0 = -1;
        for (int k = 0; k < p->nranks; k++)
            for (int i = 0; i < p->ranks[k].n_ops; i++)
                if (p->ranks[k].ops[i].coll == co) {
                    double st = sim_op_start(r, k, i);
                    if (s0 < 0) s0 = st, n_coll++;
                    else if (st != s0) bad_coll++;
                    if (st < r->ready_us[r->op_off[k] + i] - eps) bad_coll++;
                }
    }
    ok(bad_stream == 0, "ops on one stream never overlap and run in list order (%d violations)", bad_stream);
    ok(bad_dep == 0, "every op starts after its dependencies end (%d violations)", bad_dep);
    ok(bad_gpu == 0, "compute ops of one rank never overlap on its GPU (%d violations)", bad_gpu);
    ok(bad_coll == 0 && n_coll > 5, "members of each of %d collectives start together, after all arrived", n_coll);
    ok(r->crit_total_us <= r->step_us * (1 + 1e-9) && r->crit_total_us >= 0.5 * r->step_us,
       "critical path %.3f us within the step %.3f us", r->crit_total_us, r->step_us);

    /* Determinism: same bytes out twice; the trace reads back. */
    char a[64], b[64], csv[64];
    snprintf(a, sizeof a, "/tmp/test_sim_a.%d.json", (int)getpid());
    snprintf(b, sizeof b, "/tmp/test_sim_b.%d.json", (int)getpid());
    snprintf(csv, sizeof csv, "/tmp/test_sim.%d.csv", (int)getpid());
    sim_result *r2 = run(p, &c, 1);
    ok(r2 && dm_trace_write_json(r->trace, a, &err) == 0 && dm_trace_write_json(r2->trace, b, &err) == 0,
       "traces written");
    FILE *fa = fopen(a, "rb"), *fb = fopen(b, "rb");
    int same = fa && fb, ch;
    while (same && (ch = fgetc(fa)) != EOF) same = ch == fgetc(fb);
    if (same) same = fgetc(fb) == EOF;
    if (fa) fclose(fa);
    if (fb) fclose(fb);
    ok(same, "two runs give identical trace bytes");
    ok(dm_trace_write_csv(r->trace, csv, &err) == 0, "CSV trace written");
    dm_trace *tj = NULL, *tc = NULL;
    ok(dm_trace_read(a, &tj, &err) == 0, "JSON trace reads back (%s)", tj ? "" : err.msg);
    ok(dm_trace_read(csv, &tc, &err) == 0, "CSV trace reads back (%s)", tc ? "" : err.msg);
    int eq = tj && tc && tj->n == r->trace->n && tc->n == r->trace->n;
    for (int i = 0; eq && i < tj->n; i++) {
        const dm_trace_event *x = &tj->ev[i], *y = &tc->ev[i], *z = &r->trace->ev[i];
        eq = x->rank == z->rank && y->rank == z->rank && x->op == z->op && y->op == z->op && x->kind == z->kind &&
             y->kind == z->kind && x->stream == y->stream && fabs(x->ts_us - z->ts_us) < 1e-3 &&
             fabs(y->dur_us - z->dur_us) < 1e-3 && x->bytes == z->bytes && y->flops == z->flops && x->coll == y->coll;
    }
    ok(eq, "JSON and CSV traces carry the same %d rows as the simulation", r->trace->n);
    ok(tj && !strcmp(tj->source, "sim") && !strcmp(tc->model, "random") && tc->nranks == 16, "trace metadata read back");
    dm_trace_free(tj);
    dm_trace_free(tc);
    unlink(a);
    unlink(b);
    unlink(csv);
    FILE *f = fopen(csv, "w");
    fprintf(f, "# dmuon-trace-1\nrank,stream,op,kind,ts_us,dur_us,bytes,flops,layer,coll,wait_us\n0,compute,1,fwd,0,1,0,0,-1,-1,0\n");
    fclose(f);
    ok(dm_trace_read(csv, &tc, &err) == -1 && strstr(err.msg, ":3:") && strstr(err.msg, "fwd"),
       "bad CSV kind named with file:line:col (%s)", err.msg);
    unlink(csv);
    sim_result_free(r);
    sim_result_free(r2);
    dm_program_free(p);
}

static void test_deadlock_and_gpu(void)
{
    dm_cluster c = cluster("a800");
    dm_program *p = dm_program_new(2, 8, "t", "t", "a800", "", 1, &err);
    int g = all_ranks(p, 2);
    dm_op a = dm_op_init(DM_OP_BROADCAST, DM_STREAM_COMM_HI), b = a;
    a.coll = dm_program_new_coll(p), b.coll = dm_program_new_coll(p);
    a.group = b.group = g;
    a.bytes = b.bytes = 1e6;
    a.root = b.root = 0;
    dm_program_add_op(p, 0, &a, NULL, 0, NULL, 0, &err);
    dm_program_add_op(p, 0, &b, NULL, 0, NULL, 0, &err);
    dm_program_add_op(p, 1, &b, NULL, 0, NULL, 0, &err);
    dm_program_add_op(p, 1, &a, NULL, 0, NULL, 0, &err);
    sim_opts o;
    sim_opts_default(&o);
    sim_result *r;
    ok(sim_run(p, &c, &o, &r, &err) == -1 && strstr(err.msg, "deadlock"), "crossed collectives: %s", err.msg);
    dm_program_free(p);

    /* Compute on two streams shares the GPU; forward time = flops / (eff x peak). */
    p = dm_program_new(1, 8, "t", "t", "a800", "", 1, &err);
    dm_op f = dm_op_init(DM_OP_FORWARD, DM_STREAM_COMPUTE);
    f.flops = 1e12;
    dm_program_add_op(p, 0, &f, NULL, 0, NULL, 0, &err);
    f.stream = DM_STREAM_COMM_LO;
    dm_program_add_op(p, 0, &f, NULL, 0, NULL, 0, &err);
    r = run(p, &c, 0);
    double one = 1e12 / (c.fwd_efficiency * c.gpu->bf16_flops) * 1e6;
    ok(r && fabs(r->step_us - 2 * one) < 1e-6 && fabs(r->forward_us - 2 * one) < 1e-6,
       "two forwards on two streams serialize on the GPU: %.3f us", r ? r->step_us : -1);
    ok(r && r->n_crit == 1 && r->crit[0].kind == DM_OP_FORWARD && r->crit[0].ops == 2, "critical path: both forwards");
    sim_result_free(r);
    dm_program_free(p);
}

/* dm_run_stream (core/program.h): with one rank the collectives run in the compute stream's lane,
 * in list order with the compute ops, as the executor runs them; with two they keep their own.
 * A forward, then a reduce that depends on nothing: one rank starts the reduce when the forward
 * ends, two ranks at once. */
static double reduce_start(int nranks)
{
    dm_cluster c = cluster("a800");
    dm_program *p = dm_program_new(nranks, 8, "t", "t", "a800", "", 1, &err);
    int g = all_ranks(p, nranks);
    dm_op f = dm_op_init(DM_OP_FORWARD, DM_STREAM_COMPUTE);
    f.flops = 1e12;
    for (int r = 0; r < nranks; r++) dm_program_add_op(p, r, &f, NULL, 0, NULL, 0, &err);
    add_coll(p, g, DM_OP_REDUCE, DM_STREAM_COMM_LO, 1e6, 0);
    sim_result *r = run(p, &c, 1);
    double t = -1;
    for (int i = 0; r && i < r->trace->n; i++)
        if (r->trace->ev[i].rank == 0 && r->trace->ev[i].kind == DM_OP_REDUCE) {
            t = r->trace->ev[i].ts_us;
            ok(r->trace->ev[i].stream == DM_STREAM_COMM_LO, "%d rank(s): the trace names the reduce's program stream", nranks);
        }
    sim_result_free(r);
    dm_program_free(p);
    return t;
}

static void test_one_rank_stream(void)
{
    dm_cluster c = cluster("a800");
    double fwd = 1e12 / (c.fwd_efficiency * c.gpu->bf16_flops) * 1e6;
    ok(dm_run_stream(1, DM_STREAM_COMM_HI) == DM_STREAM_COMPUTE && dm_run_stream(1, DM_STREAM_COMM_LO) == DM_STREAM_COMPUTE &&
           dm_run_stream(1, DM_STREAM_COMPUTE_LO) == DM_STREAM_COMPUTE_LO && dm_run_stream(2, DM_STREAM_COMM_LO) == DM_STREAM_COMM_LO,
       "dm_run_stream: one rank's collective streams are the compute stream, compute-lo stays; two ranks keep theirs");
    double t1 = reduce_start(1), t2 = reduce_start(2);
    ok(t1 >= fwd - 1e-6, "one rank: the reduce waits in the compute lane for the forward (starts %.3f us, forward %.3f)", t1, fwd);
    ok(t2 >= 0 && t2 < 1e-6, "two ranks: the reduce starts at once on its own stream (%.3f us)", t2);
    /* solo_coll_us: one rank's collective holds the compute lane that long, and the next
     * forward waits op_gap_us after it as after a compute op: forward, reduce, forward */
    for (int solo = 0; solo < 2; solo++) {
        dm_cluster cs = cluster("a800");
        cs.op_gap_us = 2;
        cs.solo_coll_us = solo ? 3 : 0;
        dm_program *p = dm_program_new(1, 8, "t", "t", "a800", "", 1, &err);
        int g = all_ranks(p, 1);
        dm_op f = dm_op_init(DM_OP_FORWARD, DM_STREAM_COMPUTE);
        f.flops = 1e12;
        dm_program_add_op(p, 0, &f, NULL, 0, NULL, 0, &err);
        add_coll(p, g, DM_OP_REDUCE, DM_STREAM_COMM_LO, 1e6, 0);
        dm_program_add_op(p, 0, &f, NULL, 0, NULL, 0, &err);
        sim_result *r = run(p, &cs, 1);
        double t = -1;
        int seen = 0;
        for (int i = 0; r && i < r->trace->n; i++)
            if (r->trace->ev[i].kind == DM_OP_FORWARD && seen++ == 1) t = r->trace->ev[i].ts_us;
        double want = fwd + (solo ? 3 + 2 : 2); /* without it: the gap after the first forward alone */
        ok(fabs(t - want) < 1e-6, "one rank, solo_coll_us %d: the second forward starts at %.3f us (want %.3f)", solo ? 3 : 0,
           t, want);
        sim_result_free(r);
        dm_program_free(p);
    }
}

/* graph_gap_us: after an NS op launched as a CUDA graph (not eager) the next op waits that long,
 * after an eager one op_gap_us: NS, then a forward, one rank */
static void test_graph_gap(void)
{
    for (int eager = 0; eager < 2; eager++) {
        dm_cluster c = cluster("a800");
        c.op_gap_us = 1.5;
        c.graph_gap_us = 2.5;
        dm_program *p = dm_program_new(1, 8, "t", "t", "a800", "", 1, &err);
        dm_op ns = dm_op_init(DM_OP_NS, DM_STREAM_COMPUTE);
        ns.m = ns.n = 1024, ns.batch = 1, ns.flops = dm_ns_flops(1024, 1024, DM_NS_DIRECT), ns.eager = eager;
        dm_program_add_op(p, 0, &ns, NULL, 0, NULL, 0, &err);
        dm_op f = dm_op_init(DM_OP_FORWARD, DM_STREAM_COMPUTE);
        f.flops = 1e12;
        dm_program_add_op(p, 0, &f, NULL, 0, NULL, 0, &err);
        sim_result *r = run(p, &c, 1);
        double ns_end = -1, fwd_start = -1;
        for (int i = 0; r && i < r->trace->n; i++) {
            const dm_trace_event *e = &r->trace->ev[i];
            if (e->kind == DM_OP_NS) ns_end = e->ts_us + e->dur_us;
            if (e->kind == DM_OP_FORWARD) fwd_start = e->ts_us;
        }
        double want = eager ? 1.5 : 2.5;
        ok(ns_end > 0 && fabs(fwd_start - ns_end - want) < 1e-6, "%s NS op: the next op starts %.3f us after it (want %.1f)",
           eager ? "an eager" : "a graph-launched", fwd_start - ns_end, want);
        sim_result_free(r);
        dm_program_free(p);
    }
}

/* Cluster files: the documented keys, and errors with file:line:col. */
static void test_cluster_file(void)
{
    char path[64];
    snprintf(path, sizeof path, "/tmp/test_sim_cluster.%d", (int)getpid());
    FILE *f = fopen(path, "w");
    fprintf(f, "# two nodes of 4\nname = tiny\ngpu = H100\ngpus_per_node = 4\nnvlink_GBps = 100\nnics_per_node = 2\n"
               "nic_Gbps = 100\nnic_efficiency = 0.9\nnvlink_bus_efficiency = 0.5\nbase_latency_us = 1\n");
    fclose(f);
    dm_cluster c;
    ok(dm_cluster_load(path, &c, &err) == 0, "cluster file loads (%s)", err.msg);
    ok(!strcmp(c.name, "tiny") && c.gpus_per_node == 4 && c.nics_per_node == 2 && c.nvlink_bus_efficiency == 0.5,
       "cluster file fields");
    ok_near(c.nic_Bps, 100e9 / 8 * 0.9, 1e-12, "NIC usable rate = line rate x efficiency");
    ok(dm_cluster_nic_of(&c, 5) == 0 && dm_cluster_nic_of(&c, 6) == 1 && dm_cluster_node_of(&c, 5) == 1,
       "placement: rank 5 on node 1, nearest NIC 0; rank 6 NIC 1");
    int r[2] = {1, 5};
    coll_topo t;
    ok(collcost_topo(&c, r, 2, &t, &err) == 0 && fabs(t.bus_Bps - c.nic_Bps) < 1, "cross-node pair: one NIC each side");
    f = fopen(path, "w");
    fprintf(f, "gpu = H100\ngpus_per_node = 4\nnvlink_GBps = fast\n");
    fclose(f);
    ok(dm_cluster_load(path, &c, &err) == -1 && strstr(err.msg, ":3:15:") && strstr(err.msg, "nvlink_GBps"),
       "bad number named with line:col (%s)", err.msg);
    unlink(path);
    const char *const *pre = dm_cluster_presets();
    int n = 0;
    for (; pre[n]; n++) ok(dm_cluster_load(pre[n], &c, &err) == 0 && c.gpu && c.nvlink_bus_efficiency > 0, "preset %s", pre[n]);
    ok(n == 6, "six presets");
}

/* h200x2: per-collective busbw measured on the machine (sim/calib_h200x2.txt). The simulator
 * reproduces the formula with the scales, and the formula the measured 1 GiB times within 2%. */
static void test_h200x2(void)
{
    dm_cluster c = cluster("h200x2");
    static const dm_op_kind kinds[] = {DM_OP_BROADCAST, DM_OP_REDUCE, DM_OP_ALLREDUCE, DM_OP_ALLGATHER,
                                       DM_OP_REDUCESCATTER};
    static const double measured_us[] = {2940.691, 2898.710, 3226.445, 1979.278, 1995.709};
    const double size = 1073741824.0;
    int ranks[2] = {0, 1};
    coll_topo t;
    collcost_topo(&c, ranks, 2, &t, &err);
    for (int k = 0; k < 5; k++) {
        double want = collcost_time_us(kinds[k], COLL_ALGO_AUTO, size, &t);
        ok(fabs(want - measured_us[k]) <= 0.02 * measured_us[k], "h200x2 %s 1 GiB: model %.1f us, measured %.1f us",
           dm_op_kind_name(kinds[k]), want, measured_us[k]);
        dm_program *p = dm_program_new(2, 2, "t", "t", "h200x2", "", 1, &err);
        add_coll(p, all_ranks(p, 2), kinds[k], DM_STREAM_COMM_HI, size, kinds[k] <= DM_OP_REDUCE ? 0 : -1);
        sim_result *r = run(p, &c, 0);
        want += staging_us(&c, kinds[k], size, 2);
        ok(r && fabs(r->step_us - want) <= 1e-9 * want, "h200x2 %s alone in the simulator: %.3f us = formula + staging",
           dm_op_kind_name(kinds[k]), r ? r->step_us : -1);
        sim_result_free(r);
        dm_program_free(p);
    }
    int r16[16];
    for (int i = 0; i < 16; i++) r16[i] = i;
    dm_cluster two = cluster("h200x2");
    collcost_topo(&two, r16, 16, &t, &err);
    ok(t.n_nodes == 8 && collcost_kind_scale(DM_OP_ALLGATHER, &t) == 1, "busbw scales apply inside one node only");
}

/* The differences between a shared run (a) and the run of every rank (b) of p: the results,
 * every op's times on every rank, the trace. 0 when none. */
static int shared_vs_full(const dm_program *p, const sim_result *a, const sim_result *b)
{
    int bad = a->nranks != b->nranks || a->step_us != b->step_us || a->crit_rank != b->crit_rank ||
              a->forward_us != b->forward_us || a->backward_us != b->backward_us || a->optimizer_us != b->optimizer_us ||
              a->exposed_comm_us != b->exposed_comm_us || a->comm_busy_us != b->comm_busy_us ||
              a->ns_max_us != b->ns_max_us || a->ns_mean_us != b->ns_mean_us || a->ns_max_rank != b->ns_max_rank ||
              a->n_crit != b->n_crit || a->crit_total_us != b->crit_total_us || a->n_top != b->n_top ||
              a->events != b->events || a->ops != b->ops || a->rate_updates != b->rate_updates ||
              memcmp(a->crit, b->crit, sizeof a->crit) || memcmp(a->top, b->top, sizeof a->top) ||
              memcmp(a->cost_src, b->cost_src, sizeof a->cost_src);
    for (int k = 0; k < p->nranks && !bad; k++) {
        bad |= a->ns_us[k] != b->ns_us[k];
        for (int i = 0; i < p->ranks[k].n_ops; i++)
            bad |= sim_op_start(a, k, i) != sim_op_start(b, k, i) || sim_op_end(a, k, i) != sim_op_end(b, k, i) ||
                   a->ready_us[a->op_off[k] + i] != b->ready_us[b->op_off[k] + i];
    }
    if (!a->trace || !b->trace) return bad + (a->trace != b->trace);
    bad |= a->trace->n != b->trace->n;
    for (int i = 0; i < a->trace->n && !bad; i++) bad |= memcmp(&a->trace->ev[i], &b->trace->ev[i], sizeof a->trace->ev[i]);
    return bad;
}

/* A bundled model (models/NAME.json); NULL, said as a failed test, when it does not load. */
static dm_model *bundled(const char *name)
{
    char path[512];
    dm_model *m = NULL;
    snprintf(path, sizeof path, DM_SRCDIR "/models/%s.json", name);
    if (dm_model_load(path, &m, &err)) {
        ok(0, "load %s: %s", path, err.msg);
        return NULL;
    }
    return m;
}

/* Programs whose ranks share one list (adamw, muon-ddp, muon-fsdp) run shared and report what
 * the run of every rank reports; dmuon's do not run shared, nor any under per-rank rates. */
static void test_shared_ranks(void)
{
    dm_cluster c = cluster("a800"), cal = cluster("a800");
    cal.coll_slowdown = 0.5;
    dm_costs *costs = NULL;
    static const char *models[] = {"qwen2.5-0.5b", "moonlight-16b-a3b-6l"};
    static const sched_strategy strats[] = {SCHED_ADAMW, SCHED_MUON_DDP, SCHED_MUON_FSDP, SCHED_DMUON};
    if (dm_costs_load_default(&costs, &err)) costs = NULL;
    for (int mi = 0; mi < 2; mi++) {
        dm_model *m = bundled(models[mi]);
        if (!m) continue;
        for (int si = 0; si < 4; si++)
            for (int ranks = 8; ranks <= 24; ranks += 16) {
                sched_opts so;
                sched_opts_default(&so);
                so.strategy = strats[si];
                so.zero = ranks == 24 ? 3 : 2;
                dm_program *p = NULL;
                if (sched_build(m, &c, ranks, costs, &so, &p, NULL, &err)) {
                    ok(0, "build %s: %s", models[mi], err.msg);
                    continue;
                }
                sim_opts o;
                sim_opts_default(&o);
                o.costs = costs;
                o.record_trace = 1;
                int shared = sim_shared_ranks(p, &c, &o);
                sim_result *a = NULL, *b = NULL;
                int rc = sim_run(p, &c, &o, &a, &err);
                o.full_ranks = 1;
                rc |= sim_run(p, &c, &o, &b, &err);
                ok(rc == 0 && shared == (so.strategy != SCHED_DMUON) && !sim_shared_ranks(p, &c, &o) &&
                       !sim_shared_ranks(p, &cal, NULL) && (!shared || a->op_off[ranks - 1] == 0) &&
                       !shared_vs_full(p, a, b),
                   "%s %s on %d ranks, zero %d: %s run, the same results, times and trace as every rank's",
                   models[mi], sched_strategy_name(so.strategy), ranks, so.zero, shared ? "a shared" : "no shared");
                sim_result_free(a);
                sim_result_free(b);
                dm_program_free(p);
            }
        dm_model_free(m);
    }
    dm_costs_free(costs);
}

/* sim_opts.stop_us: a run stops once an event passes it with ops left, saying only that; a stop
 * past the step's end changes nothing */
static void test_stop(void)
{
    dm_cluster c = cluster("a800");
    dm_program *p = random_program();
    sim_opts o;
    sim_opts_default(&o);
    sim_result *w = NULL, *h = NULL, *l = NULL;
    int ok_w = sim_run(p, &c, &o, &w, &err) == 0;
    o.stop_us = ok_w ? w->step_us / 2 : 1;
    int ok_h = ok_w && sim_run(p, &c, &o, &h, &err) == 0;
    ok(ok_h && h->stopped && h->step_us > o.stop_us && h->step_us <= w->step_us && !h->ns_us && !h->end_us,
       "a stop at half the step (%.1f us): stopped at %.1f us, a bound under the whole step's %.1f, nothing else set",
       o.stop_us, ok_h ? h->step_us : -1, ok_w ? w->step_us : -1);
    o.stop_us = ok_w ? w->step_us * 2 : 1;
    int ok_l = ok_w && sim_run(p, &c, &o, &l, &err) == 0;
    ok(ok_l && !l->stopped && l->step_us == w->step_us && l->events == w->events,
       "a stop past the step's end: the run whole, the same step and events");
    sim_result_free(w);
    sim_result_free(h);
    sim_result_free(l);
    dm_program_free(p);
}

/* The stop's bound at setup (sim.c stop_bound): a stop under it ends the run before any op runs
 * (no events), at the bound, which never exceeds the whole step; a stop over it runs as before.
 * Real plans (flat and HSDP dmuon, NS under backward on its own stream, data-parallel ones), on
 * one and on several nodes, with and without the slowdowns that change rates while ops run. */
static void test_stop_bound(void)
{
    dm_cluster plain = cluster("a800"), slow = cluster("a800");
    slow.comm_slowdown = 0.3;
    slow.coll_slowdown = 0.5;
    dm_costs *costs = NULL;
    if (dm_costs_load_default(&costs, &err)) costs = NULL;
    static const char *models[] = {"qwen2.5-0.5b", "moonlight-16b-a3b-6l"};
    int bad = 0, cases = 0, cut = 0, ran = 0;
    double worst = 0;
    for (int mi = 0; mi < 2; mi++) {
        dm_model *m = bundled(models[mi]);
        if (!m) continue;
        for (int v = 0; v < 5; v++)
            for (int ranks = 8; ranks <= 16; ranks += 8)
                for (int ci = 0; ci < 2; ci++) {
                    const dm_cluster *c = ci ? &slow : &plain;
                    sched_opts so;
                    sched_opts_default(&so);
                    so.strategy = v == 3 ? SCHED_ADAMW : v == 4 ? SCHED_MUON_DDP : SCHED_DMUON;
                    so.hsdp = v == 1 && ranks == 16;
                    so.ns_stream = v == 2;
                    dm_program *p = NULL;
                    if (sched_build(m, c, ranks, costs, &so, &p, NULL, &err)) {
                        ok(0, "build %s: %s", models[mi], err.msg);
                        continue;
                    }
                    sim_opts o;
                    sim_opts_default(&o);
                    o.costs = costs;
                    sim_result *w = NULL, *b = NULL, *a = NULL;
                    int rc = sim_run(p, c, &o, &w, &err);
                    o.stop_us = 1e-3; /* under any bound: the bound itself comes back */
                    rc |= sim_run(p, c, &o, &b, &err);
                    if (!rc && b->stopped && b->events == 0) { /* a stop a little over the bound runs */
                        o.stop_us = b->step_us * 1.001;
                        rc |= sim_run(p, c, &o, &a, &err);
                    }
                    cases++;
                    if (rc) {
                        bad++;
                        printf("# %s %d ranks v%d: %s\n", models[mi], ranks, v, err.msg);
                    } else {
                        cut += b->stopped && b->events == 0;
                        ran += a && a->events > 0;
                        bad += !(b->stopped && b->events == 0 && b->step_us > 0 && b->step_us <= w->step_us) ||
                               !(a && a->events > 0 && (a->stopped ? a->step_us > o.stop_us : a->step_us == w->step_us));
                        if (b->step_us / w->step_us > worst) worst = b->step_us / w->step_us;
                    }
                    sim_result_free(w);
                    sim_result_free(b);
                    sim_result_free(a);
                    dm_program_free(p);
                }
        dm_model_free(m);
    }
    ok(cases == 40 && !bad && cut == cases && ran == cases,
       "the stop's bound: %d plans, every one stopped at setup under it (%d) and run over it (%d), the bound at most "
       "%.3f of the step, %d wrong",
       cases, cut, ran, worst, bad);
    dm_costs_free(costs);
}

int main(void)
{
    test_shared_ranks();
    test_h200x2();
    test_cluster_file();
    test_formula();
    test_alone();
    test_sharing();
    test_order();
    test_deadlock_and_gpu();
    test_one_rank_stream();
    test_graph_gap();
    test_stop();
    test_stop_bound();
    return tap_done();
}
