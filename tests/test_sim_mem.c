/* test_sim_mem.c: the simulator's memory estimate (sim/sim_mem.c). The counts predicted before
 * building (ops, dependencies, parameter references, collectives) against the programs
 * sched_build makes, over models, strategies, options and rank counts; the bytes against the
 * heap's measured growth through building and simulating (when the allocator reports it: not
 * under the sanitizers or valgrind); the check's refusals (a limit, the simulator's int
 * indexes) and their messages. */
#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cluster.h"
#include "costs.h"
#include "model.h"
#include "sched.h"
#include "sim.h"
#include "sim_mem.h"
#include "tap.h"

static dm_cluster cl;
static dm_costs *costs;

static double heap_in_use(void)
{
    struct mallinfo2 mi = mallinfo2();
    return (double)mi.uordblks + (double)mi.hblkhd;
}

static int within(double got, double want, double lo, double hi)
{
    return want == 0 ? got == 0 : got / want >= lo && got / want <= hi;
}

/* Predicted counts against the built program; one TAP line per case. With measure, the bytes
 * too. */
static void check_case(const dm_model *m, int ranks, const char *key, const char *val, int measure)
{
    dm_err err = {{0}};
    sched_opts so;
    sched_opts_default(&so);
    if (key && sched_opts_parse(&so, key, val, &err)) {
        ok(0, "%s=%s: %s", key, val, err.msg);
        return;
    }
    sim_mem_size pl, ex;
    if (sim_mem_plan_size(m, &cl, ranks, &so, &pl, &err)) {
        ok(0, "plan size: %s", err.msg);
        return;
    }
    double h0 = heap_in_use();
    dm_program *p = NULL;
    if (sched_build(m, &cl, ranks, costs, &so, &p, NULL, &err)) {
        ok(0, "%s on %d: %s", m->name, ranks, err.msg);
        return;
    }
    sim_mem_program_size(p, &ex);
    /* ops from above where owners re-batch across layers (one rank: up to 3x, on few ops) */
    double few = ranks < 8 ? 3.0 : 1;
    int good = within((double)pl.ops, (double)ex.ops, 0.95, 1.25 * few) &&
               within((double)pl.params, (double)ex.params, 0.999, 1.001) &&
               within((double)pl.deps, (double)ex.deps, 0.4, 1.5 * few) &&
               within((double)pl.colls, (double)ex.colls, 0.95, 1.1);
    ok(good, "%s, %d ranks, %s=%s: predicted/built ops %lld/%lld, params %lld/%lld, deps %lld/%lld, colls %lld/%lld", m->name,
       ranks, key ? key : "strategy", key ? val : "dmuon", (long long)pl.ops, (long long)ex.ops, (long long)pl.params,
       (long long)ex.params, (long long)pl.deps, (long long)ex.deps, (long long)pl.colls, (long long)ex.colls);
    if (measure) {
        sim_opts o;
        sim_opts_default(&o);
        o.costs = costs;
        o.record_trace = 1;
        sim_result *r = NULL;
        int rc = sim_run(p, &cl, &o, &r, &err);
        double grown = heap_in_use() - h0;
        double est = sim_mem_bytes(&pl, SIM_MEM_PROGRAM | SIM_MEM_SIM | SIM_MEM_TRACE);
        if (h0 <= 0 || grown <= 0)
            ok(1, "# SKIP the allocator reports no heap use (sanitizer or valgrind)");
        else
            ok(rc == 0 && within(est, grown, 0.8, 2.0), "%s on %d ranks: estimated %.1f MB, the heap grew %.1f MB", m->name,
               ranks, est / 1e6, grown / 1e6);
        sim_result_free(r);
    }
    dm_program_free(p);
}

int main(void)
{
    dm_err err = {{0}};
    dm_model *small = NULL, *dense = NULL, *moe = NULL;
    if (dm_cluster_load("a800", &cl, &err) || dm_costs_load_default(&costs, &err) ||
        dm_model_load(DM_SRCDIR "/models/qwen2.5-0.5b.json", &small, &err) ||
        dm_model_load(DM_SRCDIR "/models/qwen2.5-72b.json", &dense, &err) ||
        dm_model_load(DM_SRCDIR "/models/deepseek-v3.json", &moe, &err)) {
        printf("Bail out! %s\n", err.msg);
        return 1;
    }
    static const char *strats[] = {"dmuon", "adamw", "muon-ddp", "muon-fsdp", "muon-rr"};
    const dm_model *models[] = {small, dense};
    static const int ranks[] = {1, 8, 64};
    for (int mi = 0; mi < 2; mi++)
        for (int ri = 0; ri < 3; ri++)
            for (int s = 0; s < 5; s++) check_case(models[mi], ranks[ri], "strategy", strats[s], 0);
    check_case(dense, 64, "hierarchical", "yes", 0);
    check_case(dense, 64, "zero", "3", 0);
    check_case(dense, 64, "overlap", "none", 0);
    check_case(dense, 64, "balance", "rr", 0);
    check_case(moe, 8, "strategy", "dmuon", 0);
    check_case(moe, 16, "strategy", "muon-rr", 0);
    check_case(dense, 64, "strategy", "dmuon", 1);
    check_case(moe, 16, "strategy", "dmuon", 1);

    /* the checks and their messages */
    sim_mem_size s;
    sched_opts so;
    sched_opts_default(&so);
    /* --balance auto (the default) of a flat plan is checked when its winner is built */
    ok(so.balance == SCHED_BAL_AUTO && sim_mem_plan_checked_later(&so) &&
           sim_mem_check_plan(moe, &cl, 512, &so, 0, (int64_t)1 << 20, &err) == 0,
       "balance auto: no check before the assignment");
    so.hsdp = 1;
    int hs = sim_mem_plan_checked_later(&so);
    so.hsdp = 0, so.hierarchical = 1;
    ok(hs && !sim_mem_plan_checked_later(&so), "balance auto: HSDP checked when its winner is built too (its pairs "
       "estimated from the assignment), a hierarchical plan before planning");
    so.hierarchical = 0;
    double mo = sim_mem_max_ops(512, (int64_t)4 << 30);
    ok(mo > 4e6 && mo < 30e6 && sim_mem_max_ops(512, 0) == INT32_MAX, "4 GiB hold %.3g ops and their simulation", mo); /* ~200 bytes an op */
    so.balance = SCHED_BAL_LPT; /* the per-layer plan the counts describe */
    sim_mem_plan_size(moe, &cl, 512, &so, &s, &err);
    double b = sim_mem_bytes(&s, SIM_MEM_PROGRAM | SIM_MEM_SCHED | SIM_MEM_SIM);
    ok(b > 6e9 && b < 10e9, "DeepSeek-V3 on 512 ranks: %.1f GB (7.7 GB measured when it ran to the end)", b / 1e9);
    ok(sim_mem_check(&s, SIM_MEM_PROGRAM | SIM_MEM_SIM, 0, "x", &err) == 0, "limit 0: no check");
    err.msg[0] = 0;
    /* the need includes what the process holds (more under ASan): no digits checked here */
    ok(sim_mem_check_plan(moe, &cl, 512, &so, 0, (int64_t)4 << 30, &err) == -1 &&
           strstr(err.msg, "the simulation of DeepSeek-V3 dmuon on 512 GPUs would need about ") &&
           strstr(err.msg, "over the limit of 4.3 GB (--max-memory SIZE to change it)"),
       "over a 4 GiB limit: %s", err.msg);
    dm_model *kimi = NULL;
    if (dm_model_load(DM_SRCDIR "/models/kimi-k2.json", &kimi, &err) == 0) {
        err.msg[0] = 0;
        ok(sim_mem_check_plan(kimi, &cl, 16384, &so, 0, 0, &err) == -1 &&
               strstr(err.msg, "the simulator counts at most 2147483647 of each"),
           "Kimi-K2 on 16384 ranks, even with no limit: %s", err.msg);
        dm_model_free(kimi);
    }
    int64_t lim = sim_mem_default_limit();
    ok(lim > 0 && lim < (int64_t)1 << 50, "default limit %.1f GB", lim / 1e9);
    dm_program *p = NULL;
    if (sched_build(small, &cl, 8, costs, &so, &p, NULL, &err) == 0) {
        ok(sim_mem_check_program(p, &cl, 1, -1, &err) == 0, "a small program passes the default limit");
        err.msg[0] = 0;
        ok(sim_mem_check_program(p, &cl, 1, 1 << 20, &err) == -1 && strstr(err.msg, "Qwen2.5-0.5B dmuon on 8 GPUs") &&
               strstr(err.msg, ", a trace;") && strstr(err.msg, "over the limit of 1 MB"),
           "and fails a 1 MiB one: %s", err.msg);
        dm_program_free(p);
    }
    dm_model_free(small);
    dm_model_free(dense);
    dm_model_free(moe);
    dm_costs_free(costs);
    return tap_done();
}
