/* test_sim_rates.c: the simulator's compute durations, exact arithmetic: a forward/backward op
 * with work is the sum of its kernels from the kernel table (count x the row, kernel_gap_us
 * between launches, GEMMs of an op the table has no row of at the cluster's efficiency, each
 * work priced once for every rank), what the report says of their sources; backward at
 * bwd_efficiency (default: fwd_efficiency), elementwise ops at a calibrated HBM efficiency plus
 * a per-op overhead, NS at ns_time_scale x its table time, and compute slowed to (1 - f) of its rate while a collective is in flight
 * on its rank (comm_slowdown): an op of 10 us with f = 0.5 and a collective over its first half
 * takes 12.5 us; one covered entirely takes 20 us; a rank is in a collective from its arrival
 * (NCCL's kernel waits on the GPU for the other members), so its compute is slowed while it
 * waits; f = 0 changes nothing; a rank before its arrival is not slowed. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cluster.h"
#include "collcost.h"
#include "costs.h"
#include "program.h"
#include "sim.h"
#include "tap.h"

static dm_err err;

static dm_kernel kern(dm_kern_kind kind, dm_kern_op op, int64_t m, int64_t n, int64_t k, int64_t count)
{
    dm_kernel x;
    memset(&x, 0, sizeof x);
    x.kind = kind, x.op = op, x.m = m, x.n = n, x.k = k, x.batch = 1, x.count = count, x.param = -1, x.slot = -1;
    if (kind == DM_KERN_ELEM) x.bytes = dm_elem_launch_bytes(op, m, n, k, 2) * (double)count;
    else x.flops = 2.0 * (double)m * (double)n * (double)k * (double)count;
    return x;
}

static dm_cluster h200x2(void)
{
    dm_cluster c;
    if (dm_cluster_load("h200x2", &c, &err)) {
        printf("Bail out! %s\n", err.msg);
        exit(1);
    }
    return c;
}

static sim_result *run(const dm_program *p, const dm_cluster *c)
{
    sim_opts o;
    sim_opts_default(&o);
    o.record_trace = 1;
    sim_result *r;
    if (sim_run(p, c, &o, &r, &err)) {
        printf("# sim_run: %s\n", err.msg);
        return NULL;
    }
    return r;
}

/* FLOPs for a forward of `us` microseconds on cluster c. */
static double flops_for(const dm_cluster *c, double us) { return us * 1e-6 * c->fwd_efficiency * c->gpu->bf16_flops; }

static void test_bwd_and_elementwise(void)
{
    dm_cluster c = h200x2();
    ok(c.bwd_efficiency == 0 && dm_cluster_bwd_efficiency(&c) == c.fwd_efficiency, "bwd_efficiency defaults to fwd");
    dm_program *p = dm_program_new(1, 2, "t", "t", "h200x2", "", 1, &err);
    dm_op f = dm_op_init(DM_OP_FORWARD, DM_STREAM_COMPUTE), b = dm_op_init(DM_OP_BACKWARD, DM_STREAM_COMPUTE);
    f.flops = b.flops = 1e12;
    dm_program_add_op(p, 0, &f, NULL, 0, NULL, 0, &err);
    dm_program_add_op(p, 0, &b, NULL, 0, NULL, 0, &err);
    dm_op a = dm_op_init(DM_OP_ADAMW, DM_STREAM_COMPUTE), u = dm_op_init(DM_OP_MUON_UPDATE, DM_STREAM_COMPUTE);
    a.bytes = 2.8e9, u.bytes = 1.2e9;
    dm_program_add_op(p, 0, &a, NULL, 0, NULL, 0, &err);
    dm_program_add_op(p, 0, &u, NULL, 0, NULL, 0, &err);
    c.fwd_efficiency = 0.5;
    c.bwd_efficiency = 0.25;
    c.elem_efficiency[1] = 0.5;   /* adamw */
    c.elem_launch_us[1] = 11;
    c.elem_efficiency[0] = 0.8;   /* muon-update, launch: the GPU's floor */
    sim_result *r = run(p, &c);
    double fw = 1e12 / (0.5 * c.gpu->bf16_flops) * 1e6, bw = 2 * fw;
    double ad = 2.8e9 / (0.5 * c.gpu->hbm_Bps) * 1e6 + 11, up = 1.2e9 / (0.8 * c.gpu->hbm_Bps) * 1e6 + c.gpu->launch_us;
    ok(r != NULL, "simulated");
    if (r) {
        ok_near(r->forward_us, fw, 1e-12, "forward at fwd_efficiency 0.5: %.3f us", r->forward_us);
        ok_near(r->backward_us, bw, 1e-12, "backward at bwd_efficiency 0.25: %.3f us (twice the forward)", r->backward_us);
        ok_near(sim_op_end(r, 0, 2) - sim_op_start(r, 0, 2), ad, 1e-12, "adamw: 2.8 GB / (0.5 x HBM) + 11 us = %.3f us", ad);
        ok_near(sim_op_end(r, 0, 3) - sim_op_start(r, 0, 3), up, 1e-12,
                "muon-update: 1.2 GB / (0.8 x HBM) + launch floor = %.3f us", up);
        ok_near(r->optimizer_us, ad + up, 1e-12, "optimizer phase = adamw + muon-update");
        ok(strstr(r->cost_src[DM_OP_ADAMW], "0.5 x") != NULL, "adamw source names the efficiency: %s",
           r->cost_src[DM_OP_ADAMW]);
    }
    sim_result_free(r);
    dm_program_free(p);
    /* ns_time_scale multiplies the NS time (roofline here: no table). */
    p = dm_program_new(1, 2, "t", "t", "h200x2", "", 1, &err);
    dm_op ns = dm_op_init(DM_OP_NS, DM_STREAM_COMPUTE);
    ns.m = 2048, ns.n = 4096, ns.batch = 1, ns.algo = DM_NS_GRAM;
    dm_program_add_op(p, 0, &ns, NULL, 0, NULL, 0, &err);
    c = h200x2();
    r = run(p, &c);
    double plain = r ? r->optimizer_us : -1;
    sim_result_free(r);
    c.ns_time_scale = 1.25;
    r = run(p, &c);
    /* the scale is the NS kernels': the op's gradient check and momentum (at the HBM roofline
     * here, no calibrated update rate) are added unscaled */
    double prep = dm_ns_prep_us(c.gpu, 1, 0, 1, 2048.0 * 4096.0);
    ok(r && plain > prep && fabs(r->optimizer_us - (1.25 * (plain - prep) + prep)) <= 1e-12 * plain,
       "ns_time_scale 1.25: %.3f us = 1.25 x %.3f + the prep %.3f", r ? r->optimizer_us : -1, plain - prep, prep);
    ok(r && strstr(r->cost_src[DM_OP_NS], "times 1.25") != NULL, "NS source names the scale: %s", r ? r->cost_src[DM_OP_NS] : "-");
    double scaled = r ? r->step_us : -1, busy = r ? r->step_us - r->exposed_comm_us : -1;
    sim_result_free(r);
    { /* the staging copies of a one-rank all-gather: the roofline, then the calibrated rate */
        dm_program *ps = dm_program_new(1, 1, "t", "t", "h200x2", "", 1, &err);
        int one = 0, grp = dm_program_group(ps, &one, 1, &err);
        dm_op ag = dm_op_init(DM_OP_ALLGATHER, DM_STREAM_COMM_HI);
        ag.coll = dm_program_new_coll(ps), ag.group = grp, ag.bytes = 4e8;
        int64_t prm[3] = {0, 1, 2};
        dm_program_add_op(ps, 0, &ag, NULL, 0, prm, 3, &err);
        dm_cluster cs = h200x2();
        sim_result *r0 = run(ps, &cs);
        double roof = dm_hbm_pass_us(cs.gpu, 3, 2 * 4e8);
        cs.staging_efficiency = 0.5, cs.staging_launch_us = 6;
        sim_result *r1 = run(ps, &cs);
        double want = 3 * 6 + 2 * 4e8 / (0.5 * cs.gpu->hbm_Bps) * 1e6;
        ok(r0 && r1 && fabs(sim_op_end(r0, 0, 0) - sim_op_start(r0, 0, 0) - roof) < 1e-6 * roof &&
               fabs(sim_op_end(r1, 0, 0) - sim_op_start(r1, 0, 0) - want) < 1e-6 * want,
           "a one-rank all-gather of 3 parameters: its staging at the HBM roofline (%.1f us), then at 0.5 of HBM + 6 us "
           "per copy (%.1f us)", roof, want);
        sim_result_free(r0);
        sim_result_free(r1);
        dm_program_free(ps);
    }
    { /* a calibrated Muon-update rate prices the NS op's prep too (the update is then the apply alone) */
        dm_cluster cc = h200x2();
        cc.elem_efficiency[0] = 0.5, cc.elem_launch_us[0] = 4;
        sim_result *rc = run(p, &cc);
        double want = plain - prep + dm_ns_prep_us(cc.gpu, 0.5, 4, 1, 2048.0 * 4096.0);
        ok(rc && fabs(rc->optimizer_us - want) <= 1e-12 * want, "calibrated update rate: NS %.3f us = kernels + prep at 0.5 x HBM, 2 x 4 us",
           rc ? rc->optimizer_us : -1);
        sim_result_free(rc);
    }
    /* step_start_us: the first op starts that late; the step grows by it, all of it idle. */
    c.step_start_us = 3000;
    r = run(p, &c);
    ok(r && fabs(r->step_us - (scaled + 3000)) <= 1e-9 * scaled && fabs(r->step_us - r->exposed_comm_us - busy) <= 1e-6,
       "step_start_us 3000: step %.3f us = %.3f + 3000, the same busy time", r ? r->step_us : -1, scaled);
    sim_result_free(r);
    dm_program_free(p);
    /* op_gap_us: three compute ops in a row on rank 0 (the second and third on the compute
     * stream after the first) are two gaps apart; the step grows by 2 gaps, all of it idle, and
     * the first op still starts at step_start_us. */
    p = dm_program_new(1, 2, "t", "t", "h200x2", "", 1, &err);
    for (int i = 0; i < 3; i++) {
        dm_op f = dm_op_init(i < 2 ? DM_OP_FORWARD : DM_OP_NS, DM_STREAM_COMPUTE);
        f.flops = 1e12;
        if (i == 2) f.flops = 0, f.m = 1024, f.n = 1024, f.batch = 1, f.algo = DM_NS_DIRECT;
        dm_program_add_op(p, 0, &f, NULL, 0, NULL, 0, &err);
    }
    c = h200x2();
    c.step_start_us = 10;
    r = run(p, &c);
    double step0 = r ? r->step_us : -1, exp0 = r ? r->exposed_comm_us : -1;
    sim_result_free(r);
    c.op_gap_us = 2.5;
    r = run(p, &c);
    ok(r && fabs(r->step_us - (step0 + 5)) <= 1e-9 * step0 && fabs(r->exposed_comm_us - (exp0 + 5)) <= 1e-9 * step0,
       "op_gap_us 2.5: step %.3f = %.3f + 2 gaps, exposed %.3f = %.3f + 5 (idle)", r ? r->step_us : -1, step0,
       r ? r->exposed_comm_us : -1, exp0);
    ok(r && sim_op_start(r, 0, 0) == 10 && fabs(sim_op_start(r, 0, 1) - (sim_op_end(r, 0, 0) + 2.5)) < 1e-9 &&
           fabs(sim_op_start(r, 0, 2) - (sim_op_end(r, 0, 1) + 2.5)) < 1e-9,
       "op_gap_us: the first op at step_start_us, each next one 2.5 us after the previous end");
    sim_result_free(r);
    dm_program_free(p);
}

/* Rank 0: a forward of fwd_us on the compute stream, ready at 0 (after a lead-in forward of
 * lead_us when lead_us > 0 on rank 1, which delays the collective's start to lead_us). Both ranks
 * hold one broadcast on comm-hi (rank 1 after its lead-in). Returns rank 0's forward's end. */
static double one_case(dm_cluster *c, double fwd_us, double lead_us, double bytes, double *coll_us, double *rank1_fwd)
{
    dm_program *p = dm_program_new(2, 2, "t", "t", "h200x2", "", 1, &err);
    int ranks[2] = {0, 1}, g = dm_program_group(p, ranks, 2, &err);
    dm_op f = dm_op_init(DM_OP_FORWARD, DM_STREAM_COMPUTE);
    f.flops = flops_for(c, fwd_us);
    dm_program_add_op(p, 0, &f, NULL, 0, NULL, 0, &err);
    dm_op bc = dm_op_init(DM_OP_BROADCAST, DM_STREAM_COMM_HI);
    bc.coll = dm_program_new_coll(p);
    bc.group = g;
    bc.bytes = bytes;
    bc.root = 0;
    dm_program_add_op(p, 0, &bc, NULL, 0, NULL, 0, &err);
    int dep = 0;
    if (lead_us > 0) {
        dm_op l = dm_op_init(DM_OP_FORWARD, DM_STREAM_COMPUTE);
        l.flops = flops_for(c, lead_us);
        dm_program_add_op(p, 1, &l, NULL, 0, NULL, 0, &err);
        dm_program_add_op(p, 1, &bc, &dep, 1, NULL, 0, &err);
    } else {
        dm_program_add_op(p, 1, &bc, NULL, 0, NULL, 0, &err);
    }
    sim_result *r = run(p, c);
    double end = -1;
    if (r) {
        end = sim_op_end(r, 0, 0);
        *coll_us = sim_op_end(r, 0, 1) - sim_op_start(r, 0, 1);
        *rank1_fwd = lead_us > 0 ? sim_op_end(r, 1, 0) - sim_op_start(r, 1, 0) : 0;
        if (r->forward_us != end - sim_op_start(r, 0, 0)) end = -2; /* the phase must be the time taken */
    }
    sim_result_free(r);
    dm_program_free(p);
    return end;
}

static void test_slowdown(void)
{
    dm_cluster c = h200x2();
    double bytes = 1e8, tc, r1, tc0;
    /* The collective's time alone (it does not depend on f: links only). */
    double base = one_case(&c, 1, 0, bytes, &tc0, &r1);
    ok(base > 0 && tc0 > 1, "a 100 MB broadcast alone takes %.3f us", tc0);
    /* f = 0: unchanged (a forward of 2 tc ends at 2 tc). */
    ok_near(one_case(&c, 2 * tc0, 0, bytes, &tc, &r1), 2 * tc0, 1e-12, "f = 0: a forward of 2 x collective ends at %.3f us",
            2 * tc0);
    c.comm_slowdown = 0.5;
    /* Collective over the first half of the op: 10 -> 12.5 (scaled: 2 tc -> 2.5 tc). */
    double e = one_case(&c, 2 * tc0, 0, bytes, &tc, &r1);
    ok_near(e, 2.5 * tc0, 1e-12, "f = 0.5, collective over the first half: %.6f us = 1.25 x the op (%.6f)", e, 2.5 * tc0);
    ok_near(tc, tc0, 1e-12, "the collective itself is not slowed (%.3f us)", tc);
    /* Collective covering all of the op: d / (1 - f). */
    e = one_case(&c, 0.5 * tc0, 0, bytes, &tc, &r1);
    ok_near(e, tc0, 1e-12, "f = 0.5, collective covering the op: %.6f us = 2 x %.6f", e, 0.5 * tc0);
    /* Rank 1 arrives after a lead-in of d/2: the collective starts then, but rank 0 is in it
     * from time 0 (its NCCL kernel waits on the GPU), so its forward is slowed from 0 and, the
     * collective outlasting it, takes 2 d; rank 1's lead-in, before its arrival, is not slowed. */
    double d = 0.5 * tc0; /* wait d/2 + tc > 2 d */
    e = one_case(&c, d, d / 2, bytes, &tc, &r1);
    ok_near(e, 2 * d, 1e-12, "f = 0.5, rank 0 waiting in the collective from 0: %.6f us = 2 x %.6f", e, d);
    ok_near(r1, d / 2, 1e-12, "rank 1's lead-in forward, before its arrival, is not slowed");
    /* A forward longer than wait + collective: slowed over [0, d/2 + tc], then full rate. */
    e = one_case(&c, 3 * tc0, d / 2, bytes, &tc, &r1);
    double slow = d / 2 + tc0; /* wall time under the collective */
    ok_near(e, slow + (3 * tc0 - 0.5 * slow), 1e-12, "f = 0.5, a forward of 3 x collective under wait + collective: %.6f us",
            e);
    /* f = 0.2, collective over the first half: d/2 x 0.8 done, the rest at full rate. */
    c.comm_slowdown = 0.2;
    e = one_case(&c, 2 * tc0, 0, bytes, &tc, &r1);
    ok_near(e, tc0 + (2 * tc0 - 0.8 * tc0), 1e-12, "f = 0.2, collective over the first half: %.6f us", e);

    /* coll_slowdown g: while rank 0 computes, its NVLink ports carry (1 - g): a broadcast of
     * latency L + transfer T alone takes L + T / (1 - g) under a forward that outlasts it. */
    c = h200x2();
    c.coll_slowdown = 0.5;
    double ta, tb;
    e = one_case(&c, 10 * tc0, 0, bytes, &ta, &r1);
    ok_near(e, 10 * tc0, 1e-12, "g = 0.5: the forward itself is not slowed (%.3f us)", e);
    c.coll_slowdown = 0.75;
    one_case(&c, 10 * tc0, 0, bytes, &tb, &r1);
    double T = ta - tc0; /* L + 2T - (L + T) */
    ok(T > 0 && fabs((tb - tc0) - 3 * T) <= 1e-9 * tb, "g = 0.5 and 0.75: the transfer takes 2 T and 4 T (T %.3f us; %.3f, %.3f)",
       T, ta, tb);
    /* A forward that ends at tc0 = L + T: half of T done by then at half rate, the rest at full. */
    c.coll_slowdown = 0.5;
    one_case(&c, tc0, 0, bytes, &tc, &r1);
    ok_near(tc, tc0 + T / 2, 1e-9, "g = 0.5, the forward ends at L + T: the broadcast takes %.3f us = tc0 + T/2", tc);
}

/* An update op with a work (the scheduler's: one update kernel per tensor) is the sum of the
 * table's rows for one tensor of each size, plus elementwise_op_us; the same op without one is
 * one row at its elements. Rows: adamw 1048576 elements 20 us, 4194304 50 us. */
static void test_update_work(void)
{
    char path[64];
    snprintf(path, sizeof path, "/tmp/test_sim_rates_uw.%d.csv", (int)getpid());
    FILE *f = fopen(path, "w");
    fprintf(f, "# dmuon-costs-2\n# source: measured\n# gpu: NVIDIA H200\ngpu,op,algo,m,n,k,batch,dtype,median_us,min_us,"
               "max_us\nNVIDIA H200,adamw,-,1,1048576,0,1,fp32,20,19,21\nNVIDIA H200,adamw,-,1,4194304,0,1,fp32,50,49,51\n");
    fclose(f);
    dm_costs *t = NULL;
    if (dm_costs_load(path, &t, &err)) {
        ok(0, "update-work table loads (%s)", err.msg);
        unlink(path);
        return;
    }
    dm_program *p = dm_program_new(1, 1, "t", "t", "h200x2", "", 1, &err);
    dm_kernel k[2];
    memset(k, 0, sizeof k);
    k[0] = (dm_kernel){DM_KERN_ELEM, DM_KOP_ADAMW, 1048576, 1, 0, 1, 2, -1, -1, 0, 28.0 * 2 * 1048576, 2.0 * 1048576};
    k[1] = (dm_kernel){DM_KERN_ELEM, DM_KOP_ADAMW, 4194304, 1, 0, 1, 1, -1, -1, 0, 28.0 * 4194304, 4194304};
    dm_op a = dm_op_init(DM_OP_ADAMW, DM_STREAM_COMPUTE);
    a.bytes = 28.0 * (2 * 1048576 + 4194304);
    a.work = dm_program_add_work(p, k, 2, &err);
    dm_program_add_op(p, 0, &a, NULL, 0, NULL, 0, &err);
    a.work = -1;
    dm_program_add_op(p, 0, &a, NULL, 0, NULL, 0, &err);
    dm_cluster c = h200x2();
    sim_opts o;
    sim_opts_default(&o);
    o.record_trace = 1;
    o.costs = t;
    for (int with = 0; with < 2; with++) {
        c.elem_op_us[1] = with ? 3 : 0;
        sim_result *r = NULL;
        if (sim_run(p, &c, &o, &r, &err)) {
            ok(0, "update work: sim runs (%s)", err.msg);
            continue;
        }
        ok_near(sim_op_end(r, 0, 0) - sim_op_start(r, 0, 0), 2 * 20 + 50 + c.elem_op_us[1], 1e-9,
                "adamw with a work of 3 tensors: 2 x 20 + 50 us%s = %.3f", with ? " + elementwise_op_us 3" : "",
                sim_op_end(r, 0, 0) - sim_op_start(r, 0, 0));
        double d1 = sim_op_end(r, 0, 1) - sim_op_start(r, 0, 1);
        ok(d1 > 50 && d1 < 2 * 20 + 50 + c.elem_op_us[1],
           "the same op without a work: one row at its 6.3 M elements (%.3f us, past the table's last row), cheaper "
           "than three tensors", d1);
        sim_result_free(r);
    }
    dm_program_free(p);
    dm_costs_free(t);
    unlink(path);
}

/* Two compute streams on one GPU: a forward A of 100 us on compute and a forward B of 30 us on
 * compute-lo, both ready at 0. While both run, A at lo_main_rate 0.8 and B at lo_rate 0.4: B
 * ends at 75 us (30 / 0.4), A has done 60 of its 100 by then and ends at 115; alone each takes
 * its own time; B waiting on A starts at A's end and runs at full rate; with op_gap_us a
 * compute-lo op runs in compute's gap. */
static void test_lo_stream(void)
{
    for (int mode = 0; mode < 3; mode++) {
        dm_cluster c = h200x2();
        c.lo_main_rate = 0.8, c.lo_rate = 0.4;
        dm_program *p = dm_program_new(1, 1, "t", "t", "h200x2", "", 1, &err);
        dm_op a = dm_op_init(DM_OP_FORWARD, DM_STREAM_COMPUTE), b = dm_op_init(DM_OP_FORWARD, DM_STREAM_COMPUTE_LO);
        a.flops = flops_for(&c, 100), b.flops = flops_for(&c, 30);
        int dep = 0;
        dm_program_add_op(p, 0, &a, NULL, 0, NULL, 0, &err);
        dm_program_add_op(p, 0, &b, mode ? &dep : NULL, mode ? 1 : 0, NULL, 0, &err);
        if (mode == 2) dm_program_add_op(p, 0, &a, &dep, 1, NULL, 0, &err), c.op_gap_us = 50;
        sim_result *r = run(p, &c);
        if (!r) {
            ok(0, "lo stream mode %d: sim runs", mode);
        } else if (mode == 0) {
            ok_near(sim_op_end(r, 0, 1), 75, 1e-9, "compute-lo beside compute: B (30 us at rate 0.4) ends at %.6f = 75",
                    sim_op_end(r, 0, 1));
            ok_near(sim_op_end(r, 0, 0), 115, 1e-9, "... A (100 us, 60 done at 0.8 by 75) ends at %.6f = 115",
                    sim_op_end(r, 0, 0));
            ok_near(r->step_us, 115, 1e-9, "... the step is 115 us, exposed comm %.3f (no idle)", r->exposed_comm_us);
        } else if (mode == 1) {
            ok(sim_op_start(r, 0, 1) == sim_op_end(r, 0, 0) && fabs(sim_op_end(r, 0, 0) - 100) < 1e-9 &&
                   fabs(sim_op_end(r, 0, 1) - 130) < 1e-9,
               "compute-lo op waiting on compute's: alone, full rate (A 0..%.3f, B ..%.3f)", sim_op_end(r, 0, 0),
               sim_op_end(r, 0, 1));
        } else {
            /* A alone 0..100; B ready at 100 runs alone in compute's 50 us gap: 100..130; the second
             * A starts at 150 */
            ok(fabs(sim_op_end(r, 0, 1) - 130) < 1e-9 && fabs(sim_op_start(r, 0, 2) - 150) < 1e-9,
               "op_gap_us 50: compute-lo's op runs in compute's gap (B ends %.3f, next A starts %.3f)",
               sim_op_end(r, 0, 1), sim_op_start(r, 0, 2));
        }
        sim_result_free(r);
        dm_program_free(p);
    }
}

/* K steps back to back (sim_opts.steps): a forward A of 10 us on compute and, after it, an update
 * U of 20 us on compute-lo (the two streams share nothing here: rates 1). When U updates the
 * parameter A reads, step k+1's A waits on step k's U: every step 30 us. When U updates another
 * one, A runs beside the last step's U: the steady step is U's 20 us. */
static void test_steps(void)
{
    for (int same = 0; same < 2; same++) {
        dm_cluster c = h200x2();
        c.lo_main_rate = c.lo_rate = 1;
        dm_program *p = dm_program_new(1, 1, "t", "t", "h200x2", "", 1, &err);
        dm_op a = dm_op_init(DM_OP_FORWARD, DM_STREAM_COMPUTE), u = dm_op_init(DM_OP_MUON_UPDATE, DM_STREAM_COMPUTE_LO);
        a.flops = flops_for(&c, 10);
        c.elem_efficiency[0] = 1, c.elem_launch_us[0] = 20; /* U: 20 us (no bytes) */
        u.bytes = 1e-9;
        int64_t pa = 0, pu = same ? 0 : 1;
        int dep = 0;
        dm_program_add_op(p, 0, &a, NULL, 0, &pa, 1, &err);
        dm_program_add_op(p, 0, &u, &dep, 1, &pu, 1, &err);
        sim_opts o;
        sim_opts_default(&o);
        o.steps = 3;
        sim_result *r = NULL;
        if (sim_run(p, &c, &o, &r, &err)) {
            ok(0, "steps: sim runs (%s)", err.msg);
        } else {
            double want = same ? 30 : 20;
            ok(r->steps == 3 && fabs(r->first_step_us - 30) < 1e-6 && fabs(r->step_us - want) < 1e-6,
               "3 steps, the update %s the forward's parameter: first step %.3f us, steady step %.3f us (%.0f)",
               same ? "of" : "not of", r->first_step_us, r->step_us, want);
        }
        sim_result_free(r);
        dm_program_free(p);
    }
}

/* The keys in a cluster file, and errors naming file:line:col. */
static void test_cluster_keys(void)
{
    char path[64];
    snprintf(path, sizeof path, "/tmp/test_sim_rates.%d", (int)getpid());
    FILE *f = fopen(path, "w");
    fprintf(f, "gpu = H200\ngpus_per_node = 2\nnvlink_GBps = 450\nfwd_efficiency = 0.5\nbwd_efficiency = 0.4\n"
               "elementwise_efficiency.adamw = 0.5\nelementwise_launch_us.adamw = 11\n"
               "elementwise_efficiency.muon_update = 0.8\nns_time_scale = 1.2\ncomm_slowdown = 0.25\nstep_start_us = 3050\ncoll_slowdown = 0.5\n"
               "op_gap_us = 2.9\n");
    fclose(f);
    dm_cluster c;
    ok(dm_cluster_load(path, &c, &err) == 0, "cluster file with the calibrated keys loads (%s)", err.msg);
    ok(c.fwd_efficiency == 0.5 && c.bwd_efficiency == 0.4 && c.elem_efficiency[1] == 0.5 && c.elem_launch_us[1] == 11 &&
           c.elem_efficiency[0] == 0.8 && c.ns_time_scale == 1.2 && c.comm_slowdown == 0.25 && c.step_start_us == 3050 && c.coll_slowdown == 0.5 &&
           c.op_gap_us == 2.9,
       "fields set");
    f = fopen(path, "w");
    fprintf(f, "gpu = H200\ngpus_per_node = 2\nnvlink_GBps = 450\ncomm_slowdown = 0.99\n");
    fclose(f);
    ok(dm_cluster_load(path, &c, &err) == -1 && strstr(err.msg, ":4:17:") && strstr(err.msg, "[0, 0.95]"),
       "comm_slowdown out of range named with line:col (%s)", err.msg);
    f = fopen(path, "w");
    fprintf(f, "gpu = H200\ngpus_per_node = 2\nelementwise_efficiency.sgd = 0.5\n");
    fclose(f);
    ok(dm_cluster_load(path, &c, &err) == -1 && strstr(err.msg, ":3:1: unknown key") &&
           strstr(err.msg, "elementwise_efficiency.{muon_update|adamw}"),
       "unknown elementwise kind named (%s)", err.msg);
    unlink(path);
}


/* Forward/backward ops with work priced kernel by kernel from a table of known rows. */
static void test_work_kernels(void)
{
    char path[] = "/tmp/test_sim_rates-XXXXXX";
    int fd = mkstemp(path);
    FILE *f = fd >= 0 ? fdopen(fd, "w") : NULL;
    if (!f) {
        ok(0, "temp table");
        return;
    }
    fprintf(f, "# dmuon-costs-2\n# source: measured\n# gpu: NVIDIA H200\ngpu,op,algo,m,n,k,batch,dtype,median_us,min_us,max_us\n"
               "NVIDIA H200,gemm,fwd,4096,1024,1024,1,bf16,50,49,51\n"
               "NVIDIA H200,elem,loss,4096,1024,0,1,bf16,10,9,11\n"
               "NVIDIA H200,gemm,wgrad,1024,1024,4096,1,bf16,40,39,41\n");
    fclose(f);
    dm_costs *costs = NULL;
    if (!ok(dm_costs_load(path, &costs, &err) == 0, "table loads (%s)", costs ? "ok" : err.msg)) return;
    remove(path);
    dm_program *p = dm_program_new(2, 2, "t", "t", "h200x2", "", 4096, &err);
    dm_kernel fw[2] = {kern(DM_KERN_GEMM, DM_KOP_FWD, 4096, 1024, 1024, 2), kern(DM_KERN_ELEM, DM_KOP_LOSS, 4096, 1024, 0, 2)};
    dm_kernel bw[2] = {kern(DM_KERN_GEMM, DM_KOP_DGRAD, 4096, 1024, 1024, 1),
                       kern(DM_KERN_GEMM, DM_KOP_WGRAD, 1024, 1024, 4096, 1)};
    int wf = dm_program_add_work(p, fw, 2, &err), wb = dm_program_add_work(p, bw, 2, &err);
    for (int r = 0; r < 2; r++) { /* both ranks run the same two works */
        dm_op o = dm_op_init(DM_OP_FORWARD, DM_STREAM_COMPUTE);
        o.work = wf, o.flops = fw[0].flops;
        dm_program_add_op(p, r, &o, NULL, 0, NULL, 0, &err);
        o = dm_op_init(DM_OP_BACKWARD, DM_STREAM_COMPUTE);
        o.work = wb, o.flops = bw[0].flops + bw[1].flops;
        dm_program_add_op(p, r, &o, NULL, 0, NULL, 0, &err);
    }
    dm_cluster c = h200x2();
    c.bwd_efficiency = 0.5;
    c.kernel_gap_us = 1.5;
    sim_opts o;
    sim_opts_default(&o);
    o.costs = costs;
    sim_result *r = NULL;
    ok(sim_run(p, &c, &o, &r, &err) == 0, "simulated (%s)", r ? "ok" : err.msg);
    if (r) {
        double dgrad = bw[0].flops / (0.5 * c.gpu->bf16_flops) * 1e6;
        ok_near(r->forward_us, 2 * 50 + 2 * 10 + 3 * 1.5, 1e-12,
                "forward: 2 GEMMs of the 50 us row + 2 loss launches of 10 us + 3 kernel gaps of 1.5 us = %.3f us",
                r->forward_us);
        double check = dm_grad_check_us(c.gpu, 1, (double)bw[1].m * (double)bw[1].n); /* the wgrad's gradient */
        ok_near(r->backward_us, dgrad + 40 + check + 2 * 1.5, 1e-9,
                "backward: dgrad (no row) at bwd_efficiency 0.5, the 40 us wgrad row, its gradient's check, two gaps = %.3f us",
                r->backward_us);
        const char *fs = r->cost_src[DM_OP_FORWARD], *bs = r->cost_src[DM_OP_BACKWARD];
        ok(strstr(fs, "1 work, 2 kernels: 2 measured") != NULL, "forward source: one work for both ranks, its kernels "
           "measured: %s", fs);
        ok(strstr(bs, "1 measured, 1 GEMMs at 0.50 x 989 TFLOP/s (bwd_efficiency of cluster h200x2, the fallback: the "
                      "table has no row of gemm dgrad)") != NULL, "backward source names the fallback and its op: %s", bs);
        ok(strstr(fs, "1.5 us between two kernels") != NULL, "the kernel gap is named");
    }
    sim_result_free(r);
    /* on an A800 the same table's rows are projected (dm_costs_kernel_us: test_costs checks the rule) */
    dm_cluster a = c;
    a.gpu = dm_gpu_find("A800");
    r = NULL;
    ok(sim_run(p, &a, &o, &r, &err) == 0, "simulated on an A800 (%s)", r ? "ok" : err.msg);
    if (r) {
        dm_kernel g1 = fw[0], l1 = fw[1];
        g1.count = l1.count = 1, g1.flops /= 2, l1.bytes /= 2;
        double want = 2 * dm_costs_kernel_us(costs, a.gpu, &g1, NULL) + 2 * dm_costs_kernel_us(costs, a.gpu, &l1, NULL) + 3 * 1.5;
        ok_near(r->forward_us, want, 1e-12, "A800 forward: the rows as the table projects them, the gaps as measured (%.3f us)", want);
        ok(want > 2 * 50 + 2 * 10 + 3 * 1.5, "  ... slower than on the H200");
        ok(strstr(r->cost_src[DM_OP_FORWARD], "2 projected") != NULL, "  ... and said to be projected: %s",
           r->cost_src[DM_OP_FORWARD]);
    }
    sim_result_free(r);
    /* no table: the loss at the roofline, the GEMMs at the efficiencies */
    o.costs = NULL;
    c.kernel_gap_us = 0;
    r = NULL;
    ok(sim_run(p, &c, &o, &r, &err) == 0, "simulated without a table");
    if (r) {
        dm_kernel l1 = fw[1];
        l1.count = 1, l1.bytes /= 2;
        ok_near(r->forward_us, fw[0].flops / (c.fwd_efficiency * c.gpu->bf16_flops) * 1e6 + 2 * dm_roofline_kernel_us(c.gpu, &l1),
                1e-12, "no table: GEMMs at fwd_efficiency, the loss launches at the roofline");
    }
    sim_result_free(r);
    dm_program_free(p);
    /* an op without work keeps its FLOPs at the efficiency, and the report says so */
    p = dm_program_new(1, 2, "t", "t", "h200x2", "", 1, &err);
    dm_op x = dm_op_init(DM_OP_FORWARD, DM_STREAM_COMPUTE);
    x.flops = 1e12;
    dm_program_add_op(p, 0, &x, NULL, 0, NULL, 0, &err);
    o.costs = costs;
    r = NULL;
    ok(sim_run(p, &c, &o, &r, &err) == 0 && r && fabs(r->forward_us - 1e12 / (c.fwd_efficiency * c.gpu->bf16_flops) * 1e6) < 1e-9 &&
           strstr(r->cost_src[DM_OP_FORWARD], "1 ops without work: flops / (0.41 x 989") != NULL,
       "an op without work: FLOPs at fwd_efficiency, said so (%s)", r ? r->cost_src[DM_OP_FORWARD] : err.msg);
    sim_result_free(r);
    dm_program_free(p);
    dm_costs_free(costs);
}

int main(void)
{
    test_cluster_keys();
    test_bwd_and_elementwise();
    test_slowdown();
    test_work_kernels();
    test_lo_stream();
    test_update_work();
    test_steps();
    return tap_done();
}
