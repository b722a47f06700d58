/* test_power.c: the power-limit model (core/power.h) and its use. The model's arithmetic (the
 * filter's exponential, the clock's line and floor, the time multiplier, the demand of tensor
 * and HBM activity); its fit on the two committed probe files (traces/validate/h200-15,
 * traces/device/power-2026-12-01: within the ranges a 700 W H200 gives, residuals under 5%);
 * input errors named; the simulator: a compute op whose demand is under the limit is not
 * slowed (the time is the same as without the model), one at the reference GEMM's rate runs
 * the step at the steady-state clock 1 - slope (gemm - limit); kernel tables measured back to
 * back are not slowed again (dm_costs_full_clock); calibrate's keys (calib_fit_power). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "calib.h"
#include "cluster.h"
#include "costs.h"
#include "power.h"
#include "program.h"
#include "sim.h"
#include "tap.h"

static dm_err err;

static const char *srcdir(void)
{
    const char *s = getenv("DM_SRCDIR");
    return s && *s ? s : DM_SRCDIR;
}

static dm_power model(void)
{
    dm_power p = {.limit_w = 700, .gemm_w = 1000, .copy_w = 480, .idle_w = 100, .slope = 5e-4, .tau_ms = 20,
                  .ref_flops = 780e12, .ref_Bps = 4.25e12};
    return p;
}

static void test_arithmetic(void)
{
    dm_power p = model();
    ok(dm_power_on(&p), "a described model is on");
    dm_power q = p;
    q.gemm_w = 650;
    ok(!dm_power_on(&q), "a GEMM demand under the limit: no model");
    q = p, q.limit_w = 0;
    ok(!dm_power_on(&q), "limit 0: no model");
    ok_near(dm_power_advance(&p, 100, 1000, 20e3), 1000 - 900 * exp(-1), 1e-12, "one tau: 1 - 1/e of the way");
    ok_near(dm_power_advance(&p, 300, 300, 1e6), 300, 1e-12, "at its demand it stays");
    q = p;
    q.tau_fall_ms = 5 * p.tau_ms;
    ok_near(dm_power_advance(&q, 100, 1000, 20e3), 1000 - 900 * exp(-1), 1e-12,
            "tau_fall: a rising demand still follows tau");
    ok_near(dm_power_advance(&q, 1000, 100, 20e3), 100 + 900 * exp(-0.2), 1e-12,
            "tau_fall: a falling one follows tau_fall (5 tau: exp(-1/5) of the way left after one tau)");
    ok_near(dm_power_tick_us(&q), p.tau_ms * 1e3 / 4, 1e-12, "the re-timing tick: a quarter of tau when tau_fall is longer");
    q.tau_fall_ms = p.tau_ms / 4;
    ok_near(dm_power_tick_us(&q), p.tau_ms * 1e3 / 16, 1e-12, "... a quarter of tau_fall when that is shorter");
    q.tau_fall_ms = 0;
    ok_near(dm_power_tick_us(&q), p.tau_ms * 1e3 / 4, 1e-12, "... a quarter of tau without tau_fall");
    ok_near(dm_power_advance(&q, 1000, 100, 20e3), 100 + 900 * exp(-1), 1e-12, "tau_fall 0: symmetric");
    ok(dm_power_clock(&p, 650) == 1 && dm_power_clock(&p, 700) == 1, "no slowing at or under the limit");
    ok_near(dm_power_clock(&p, 1000), 0.85, 1e-12, "300 W over at 5e-4 per W: 0.85");
    ok(dm_power_clock(&p, 1e5) == DM_POWER_MIN_S, "the clock's floor");
    ok_near(dm_power_time_factor(0.8, 0.5), 1.125, 1e-12, "half clock-bound at 0.8: 0.5 / 0.8 + 0.5");
    ok_near(dm_power_time_factor(0.8, 0), 1, 1e-12, "HBM-bound work does not slow");
    ok_near(dm_power_demand(&p, 0, 0, 0), 100, 1e-12, "idle demand");
    ok_near(dm_power_demand(&p, 780e12 * 1e-3, 0, 1e3), 1000, 1e-12, "a ms at the reference rate: the GEMM's demand");
    ok_near(dm_power_demand(&p, 0, 4.25e12 * 1e-3, 1e3), 480, 1e-12, "a ms of copies at the reference rate: theirs");
    ok_near(dm_power_demand(&p, 390e12 * 1e-3, 4.25e12 * 0.5e-3, 1e3), 100 + 450 + 190, 1e-12,
            "half of each: the activities add");
    ok_near(dm_power_demand(&p, 2 * 780e12 * 1e-3, 4.25e12 * 1e-3, 1e3), 1000, 1e-12, "at most the GEMM's demand");
    q = p, q.activity_exp = 0.5;
    ok_near(dm_power_demand(&q, 0.25 * 780e12 * 1e-3, 0, 1e3), 100 + 900 * 0.5, 1e-12, "activity_exp 0.5: u 0.25 -> 0.5");
    dm_power_st st = {1000, 0};
    double s = dm_power_mean_clock(&p, &st, 1000, 50e3);
    ok_near(s, 0.85, 1e-12, "at a constant demand over the limit the mean clock is its clock");
    st = (dm_power_st){100, 0};
    s = dm_power_mean_clock(&p, &st, 1000, 200e3);
    ok(s > 0.85 && s < 0.9 && fabs(st.D - dm_power_advance(&p, 100, 1000, 200e3)) < 1e-9,
       "from idle: the mean clock between cool and settled (%.4f), the demand advanced as the filter", s);
    /* the hold: a falling demand keeps D for hold_ms (re-armed while the demand is at or over D) */
    q = p, q.hold_ms = 10;
    st = (dm_power_st){1000, 0};
    dm_power_step(&q, &st, 100, 6e3);
    ok(st.D == 1000 && st.held_us == 6e3, "hold: 6 ms of a lower demand inside a 10 ms hold: D unchanged");
    dm_power_step(&q, &st, 100, 24e3);
    ok_near(st.D, dm_power_advance(&q, 1000, 100, 20e3), 1e-9, "... then 24 ms more: 4 held, 20 falling");
    dm_power_step(&q, &st, 1000, 1e3);
    ok(st.held_us == 0, "a demand at or over D re-arms the hold");
    q.hold_ms = 0;
    st = (dm_power_st){1000, 0};
    dm_power_step(&q, &st, 100, 20e3);
    ok_near(st.D, dm_power_advance(&q, 1000, 100, 20e3), 1e-12, "hold 0: the filter alone");
    /* dm_power_along: the same filter op by op, the idle between ops and between passes at idle */
    dm_power_op seq[2] = {{0, 30e3, 1000, 0}, {50e3, 10e3, 600, 0}};
    dm_power_st sm = {p.idle_w, 0};
    double s0 = dm_power_mean_clock(&p, &sm, 1000, 30e3);
    dm_power_step(&p, &sm, p.idle_w, 20e3);
    double s1 = dm_power_mean_clock(&p, &sm, 600, 10e3);
    dm_power_along(&p, seq, 2, 0, 1);
    ok(fabs(seq[0].s - s0) < 1e-12 && fabs(seq[1].s - s1) < 1e-12, "along, one pass: each op's mean clock as the filter gives it");
    dm_power_step(&p, &sm, p.idle_w, 5e3);
    double s0b = dm_power_mean_clock(&p, &sm, 1000, 30e3);
    dm_power_along(&p, seq, 2, 5e3, 2);
    ok(fabs(seq[0].s - s0b) < 1e-12 && seq[0].s < s0, "along, two passes: the second starts from the first's end (%.4f, %.4f from idle)",
       seq[0].s, s0);
    /* demand_held: work timed back to back at the clock it holds */
    ok_near(dm_power_demand_held(&p, 0.4 * 780e12 * 1e-3, 0, 1e3), dm_power_demand(&p, 0.4 * 780e12 * 1e-3, 0, 1e3), 1e-12,
            "held, under the limit: the same demand (the clock never moved)");
    /* a GEMM at 0.85 of the reference rate as timed: at full clock 0.85 / s of it; the fixed point s =
     * clock(demand(full)), full = us s (all of it clock-bound) */
    double fl = 0.85 * 780e12 * 1e-3, Ph = dm_power_demand_held(&p, fl, 0, 1e3);
    double sh = dm_power_clock(&p, Ph);
    ok(Ph > dm_power_demand(&p, fl, 0, 1e3) + 1, "held, over the limit: more than its timed rate says (%.1f W against %.1f)", Ph,
       dm_power_demand(&p, fl, 0, 1e3));
    ok_near(dm_power_demand(&p, fl, 0, 1e3 * sh), Ph, 1e-6, "held: the demand of its full-clock time at the clock it holds");
    ok_near(Ph, 1000, 1e-3, "held: 0.85 of the rate at the 0.85 clock is the reference GEMM's full demand");
    /* full_us_held: the time of that fixed point (an NS op's table time, run at its context's clock) */
    ok_near(dm_power_full_us_held(&p, fl, 0, 1e3), 1e3 * sh, 1e-6, "full_us_held: the held time at full clock (x %.3f)", sh);
    ok_near(dm_power_full_us_held(&p, 0.4 * 780e12 * 1e-3, 0, 1e3), 1e3, 1e-9, "full_us_held, under the limit: the time as timed");
    ok_near(dm_power_full_us_held(&p, 0, 4.25e12 * 1e-3, 1e3), 1e3, 1e-9, "full_us_held, copies (not clock-bound): as timed");
    q = p, q.limit_w = 0;
    ok_near(dm_power_full_us_held(&q, fl, 0, 1e3), 1e3, 0, "full_us_held without the model: as timed");
}

static void test_fit(void)
{
    static const char *files[2] = {"traces/validate/h200-15/power.json", "traces/device/power-2026-12-01/power.json"};
    for (int i = 0; i < 2; i++) {
        char path[1024], desc[1200];
        snprintf(path, sizeof path, "%s/%s", srcdir(), files[i]);
        dm_power p;
        double res[3];
        int rc = dm_power_fit(path, &p, res, desc, sizeof desc, NULL, &err);
        ok(rc == 0, "fit %s%s%s", files[i], rc ? ": " : "", rc ? err.msg : "");
        if (rc) continue;
        ok(p.limit_w == 700 && p.idle_w > 80 && p.idle_w < 160 && p.copy_w > 400 && p.copy_w < 560 && p.gemm_w > 850 &&
               p.gemm_w < 1150,
           "%s: limit %.0f, idle %.0f, copy %.0f, GEMM %.0f W", files[i], p.limit_w, p.idle_w, p.copy_w, p.gemm_w);
        ok(p.slope > 3e-4 && p.slope < 9e-4 && p.tau_ms >= 10 && p.tau_ms <= 80 && p.ref_flops > 700e12 &&
               p.ref_Bps > 4e12,
           "%s: slope %.3g per W, tau %.0f ms, reference %.0f TFLOP/s and %.0f GB/s", files[i], p.slope, p.tau_ms,
           p.ref_flops / 1e12, p.ref_Bps / 1e9);
        ok(res[0] < 0.05 && res[1] < 0.05 && res[2] < 0.05, "%s: residuals %.3f %.3f %.3f under 5%%", files[i], res[0],
           res[1], res[2]);
        /* the settled clock of continuous reference GEMMs, as the probe saw it (0.846-0.853) */
        double s = dm_power_clock(&p, p.gemm_w);
        ok(s > 0.82 && s < 0.88, "%s: continuous GEMMs settle at %.3f of full clock", files[i], s);
    }
    char tmp[] = "/tmp/dm_power_XXXXXX";
    int fd = mkstemp(tmp);
    FILE *f = fdopen(fd, "w");
    fputs("{\"power_limit_w\": 700, \"phases\": [{\"phase\": \"copy\", \"first\": 4000, \"settled\": 4000, \"power_w\": 470,"
          " \"windows\": [{\"t_ms\": 0}, {\"t_ms\": 20}, {\"t_ms\": 40}, {\"t_ms\": 60}], \"samples\": []}]}\n", f);
    fclose(f);
    dm_power p;
    double res[3];
    ok(dm_power_fit(tmp, &p, res, NULL, 0, NULL, &err) != 0 && strstr(err.msg, tmp) && strstr(err.msg, "gemm-big"),
       "a probe without the gemm-big phase is refused by name: %s", err.msg);
    f = fopen(tmp, "w");
    fputs("{\"power_limit_w\": 700}\n", f);
    fclose(f);
    ok(dm_power_fit(tmp, &p, res, NULL, 0, NULL, &err) != 0 && strstr(err.msg, "phases"), "no phases: %s", err.msg);
    unlink(tmp);
}

static sim_result *run(const dm_program *p, const dm_cluster *c)
{
    sim_opts o;
    sim_opts_default(&o);
    sim_result *r;
    if (sim_run(p, c, &o, &r, &err)) {
        printf("# sim_run: %s\n", err.msg);
        return NULL;
    }
    return r;
}

static void test_sim(void)
{
    dm_cluster c;
    if (dm_cluster_load("h200x2", &c, &err)) {
        printf("Bail out! %s\n", err.msg);
        exit(1);
    }
    dm_program *p = dm_program_new(1, 2, "t", "t", "h200x2", "", 1, &err);
    dm_op f = dm_op_init(DM_OP_FORWARD, DM_STREAM_COMPUTE);
    f.flops = 4e14; /* about 1 s at the efficiency below */
    dm_program_add_op(p, 0, &f, NULL, 0, NULL, 0, &err);
    c.fwd_efficiency = 0.4; /* 396 TFLOP/s: u 0.51, demand 556 W, under the limit */
    sim_result *r0 = run(p, &c);
    c.power = model();
    sim_result *r1 = run(p, &c);
    ok(r0 && r1 && r0->step_us == r1->step_us && r1->power_src[0] && r1->power_passes >= 1,
       "a demand under the limit: the step unchanged (%.1f us), the clock line '%s'", r1 ? r1->step_us : -1,
       r1 ? r1->power_src : "");
    sim_result_free(r0);
    sim_result_free(r1);
    c.power.limit_w = 0;
    c.fwd_efficiency = 0.8; /* 791 TFLOP/s: over the reference rate, the GEMM's demand */
    r0 = run(p, &c);
    c.power = model();
    r1 = run(p, &c);
    double want = r0 ? r0->step_us / 0.85 : 0;
    ok(r0 && r1 && fabs(r1->forward_us - want) < 0.01 * want && r1->power_passes >= 2,
       "the reference GEMM's demand for a second: the steady state's clock 0.85 (%.0f us against %.0f at full clock, "
       "%d runs)", r1 ? r1->forward_us : -1, r0 ? r0->forward_us : -1, r1 ? r1->power_passes : 0);
    ok(r0 && !r0->power_src[0] && r0->power_passes == 1, "without the model: no clock line, one run");
    { /* a stop (sim_opts.stop_us) is not taken under the model: its steady state is several runs */
        sim_opts so;
        sim_opts_default(&so);
        so.stop_us = r1 ? r1->step_us / 2 : 1;
        sim_result *r2 = NULL;
        int rc = sim_run(p, &c, &so, &r2, &err);
        ok(rc == 0 && r1 && !r2->stopped && r2->step_us == r1->step_us, "under the power model a stop is not taken: "
           "the step as without one (%.0f us)", rc == 0 ? r2->step_us : -1);
        sim_result_free(r2);
    }
    sim_result_free(r0);
    sim_result_free(r1);
    dm_program_free(p);
}

static void test_tables(void)
{
    char a[1024], b[1024], both[2100];
    snprintf(a, sizeof a, "%s/traces/costs/h200-work.csv", srcdir());
    snprintf(b, sizeof b, "%s/traces/costs/h200-work-cool.csv", srcdir());
    dm_costs *ta = NULL, *tb = NULL, *tab = NULL;
    snprintf(both, sizeof both, "%s/traces/costs/h200.csv,%s", srcdir(), b);
    ok(!dm_costs_load(a, &ta, &err) && !dm_costs_load(b, &tb, &err) && !dm_costs_load(both, &tab, &err), "tables load");
    ok(!dm_costs_full_clock(ta, 0) && dm_costs_full_clock(tb, 0) && dm_costs_full_clock(tab, 0) &&
           !dm_costs_full_clock(tab, 1) && dm_costs_full_clock(NULL, 1),
       "work rows as run are not full clock, --cool rows are; beside the NS table (as run) its NS rows are not; no "
       "table (the roofline) is");
    dm_costs_free(ta);
    dm_costs_free(tb);
    dm_costs_free(tab);
    static calib k;
    memset(&k, 0, sizeof k);
    char path[1024];
    snprintf(path, sizeof path, "%s/traces/validate/h200-15/power.json", srcdir());
    ok(calib_fit_power(&k, path, NULL, &err) == 0 && calib_get(&k, "power.limit_w") && calib_get(&k, "power.tau_ms") &&
           calib_get(&k, "power.ref_GBps"),
       "calibrate --power writes the power.* keys");
    dm_cluster c;
    memset(&c, 0, sizeof c);
    calib_apply_entries(&k, &c);
    ok(dm_power_on(&c.power) && c.power.ref_flops > 7e14, "the keys apply to a cluster (reference %.0f TFLOP/s)",
       c.power.ref_flops / 1e12);
}

/* A part of a power model in a cluster file or a calibration is refused, with the missing key. */
static void test_partial(void)
{
    char tmp[] = "/tmp/dm_power_cl_XXXXXX";
    int fd = mkstemp(tmp);
    FILE *f = fdopen(fd, "w");
    fputs("gpu = H200-SXM\ngpus_per_node = 8\nnvlink_GBps = 450\npower.limit_w = 700\npower.gemm_w = 950\n", f);
    fclose(f);
    dm_cluster c;
    ok(dm_cluster_load(tmp, &c, &err) != 0 && strstr(err.msg, ":4:1:") && strstr(err.msg, "power.copy_w is missing"),
       "a cluster file with two power keys is refused at the first: %s", err.msg);
    f = fopen(tmp, "w");
    fputs("gpu = H200-SXM\ngpus_per_node = 8\nnvlink_GBps = 450\npower.limit_w = 700\npower.gemm_w = 650\n"
          "power.copy_w = 480\npower.idle_w = 100\npower.slope = 0.0005\npower.tau_ms = 20\npower.ref_tflops = 780\n"
          "power.ref_GBps = 4250\n", f);
    fclose(f);
    ok(dm_cluster_load(tmp, &c, &err) != 0 && strstr(err.msg, ":5:1:") && strstr(err.msg, "must be over power.limit_w"),
       "a GEMM demand under the limit is refused: %s", err.msg);
    f = fopen(tmp, "w");
    fputs("gpu = H200-SXM\ngpus_per_node = 8\nnvlink_GBps = 450\npower.limit_w = 700\npower.gemm_w = 950\n"
          "power.copy_w = 480\npower.idle_w = 100\npower.slope = 0.0005\npower.tau_ms = 20\npower.ref_tflops = 780\n"
          "power.ref_GBps = 4250\n", f);
    fclose(f);
    ok(dm_cluster_load(tmp, &c, &err) == 0 && dm_power_on(&c.power), "every key: the model is on");
    f = fopen(tmp, "w");
    fputs("# dmuon-calib-1\n# gpu: NVIDIA H200\npower.limit_w = 700   # source: test\n", f);
    fclose(f);
    dm_cluster h;
    if (dm_cluster_load("h200", &h, &err)) {
        printf("Bail out! %s\n", err.msg);
        exit(1);
    }
    ok(calib_apply(tmp, &h, NULL, &err) != 0 && strstr(err.msg, tmp) && strstr(err.msg, "power.gemm_w is missing"),
       "a calibration with one power key is refused: %s", err.msg);
    unlink(tmp);
}

int main(void)
{
    test_partial();
    test_arithmetic();
    test_fit();
    test_sim();
    test_tables();
    return tap_done();
}
