/* power.h: how a GPU's compute speed follows its power limit: the one model the simulator runs
 * and the calibration fits (traces/device/power-2026-12-01: continuous GEMMs fall to ~0.85 of
 * their cool rate within ~100 ms at the 700 W limit of an H200; copies are not slowed).
 *
 * The model. Work running at full clock demands a power
 *     P = idle + (gemm - idle) min(1, u_c)^e + (copy - idle) min(1, u_m),
 * u_c = its FLOP rate over the reference GEMM's full-clock rate (ref_flops: the GEMM whose
 * demand is `gemm`), u_m = its byte rate over the reference copy's (ref_Bps): the tensor cores'
 * and HBM's activities add; at most `gemm`; an idle GPU demands `idle`. e (activity_exp, 1 by
 * default) says how a kernel below the reference rate draws: the probe's GEMMs all run near
 * it, so e comes from the step's own ops (dmuon calibrate --power with --trace: the exponent
 * whose clocks fit the traced ops best). The card's controller
 * answers the demand filtered over time,
 *     dD/dt = (P - D) / tau,
 * (tau_fall in place of tau while P < D, when given: the controller may give the clock back more
 * slowly than it takes it; `dmuon calibrate` fits it from the traces with e; and with hold_ms,
 * D stays where it is for that long once P falls below it before it falls: the clock read on the
 * GPU, traces/device/clockprobe-2026-12-05, stays at the NS phase's for 15-25 ms after it),
 * by lowering the clock to the fraction s = 1 - slope max(0, D - limit) (at least DM_POWER_MIN_S)
 * of its full value. The part of an op's full-clock time beyond what its bytes need at the
 * reference copy rate then takes 1/s as long, the rest its own (HBM does not slow): an op with
 * that share c takes c/s + (1 - c) of its time (dm_power_time_factor). Kernel tables measured at full clock (`bench
 * work --cool`) are what the model slows; measured back to back they already hold part of it.
 *
 * The parameters come from tools/power_probe.py's JSON (continuous GEMMs, copies, GEMM/copy and
 * GEMM/idle duty cycles from a cool card, every 20 ms window timed, NVML power read beside it):
 * dm_power_fit derives them (see power.c), `dmuon calibrate --power FILE` writes them as
 * calibration keys (power.*, cluster.h). A cluster without them runs at full clock. */
#ifndef DM_POWER_H
#define DM_POWER_H
#include <stddef.h>
#include <stdio.h>

#include "dm_error.h"

#define DM_POWER_MIN_S 0.3

typedef struct dm_power {
    double limit_w;   /* the enforced power limit; 0: no model */
    double gemm_w;    /* full-clock demand of the reference GEMM */
    double copy_w;    /* full-clock demand of HBM copies at the reference copy's rate */
    double idle_w;    /* an idle GPU */
    double slope;     /* clock fraction lost per W of filtered demand over the limit */
    double tau_ms;    /* the filter's time constant */
    double ref_flops; /* FLOP/s of the reference GEMM at full clock */
    double ref_Bps;   /* bytes/s of the reference copy (read + write) */
    double activity_exp; /* e of the demand (see above); 0: 1 */
    double tau_fall_ms; /* the filter's time constant while the demand falls (the clock coming back
                           after heavy work); 0: tau_ms */
    double hold_ms;     /* once the demand falls below the filtered one, the filter holds this long
                           before it falls; 0: none */
} dm_power;

/* The filter's state: the filtered demand D (W) and, while the demand is below it, how long it
 * has held there (us; the hold re-arms whenever the demand is at or over D). */
typedef struct dm_power_st {
    double D, held_us;
} dm_power_st;

/* 1 when p describes a model (a limit below the GEMM's demand, the rates and tau set). */
int dm_power_on(const dm_power *p);
/* For a cluster or calibration file that gives some power.* keys: the first key a model needs
 * that is missing (its name, "power.limit_w" style), "power.gemm_w" when the GEMM's demand is not
 * over the limit, NULL when the model is complete. activity_exp is optional. */
const char *dm_power_missing(const dm_power *p);
/* 0 when p is complete, else the error for it (the missing key, or the GEMM's demand not over
 * the limit), placed at `where` (FILE or FILE:LINE:COL). */
int dm_power_check(const dm_power *p, const char *where, dm_err *err);
/* Full-clock demand of work of `flops` and `bytes` that takes `us` at full clock (us <= 0: idle). */
double dm_power_demand(const dm_power *p, double flops, double bytes, double us);
/* The full-clock demand of work whose time `us` was measured with it running back to back, at
 * the clock its own demand holds (NS rows, measured in a row: dm_costs_full_clock): its
 * full-clock time is shorter by that clock where the clock sets it, so its activity, hence its
 * demand, is higher than `us` says. The fixed point of full = us / (c / s + 1 - c), s the clock
 * at the demand of full (c the share the clock sets); work the limit does not slow comes out as
 * dm_power_demand(flops, bytes, us). */
double dm_power_demand_held(const dm_power *p, double flops, double bytes, double us);
/* That fixed point itself: the full-clock time of work timed back to back at `us` (us when the
 * model is off). The simulator runs an NS op priced by such rows for this time at the clock of
 * its own context (the rank's filtered demand), and the calibration fits it so. */
double dm_power_full_us_held(const dm_power *p, double flops, double bytes, double us);
/* The step at which a simulator re-times work under the model: a quarter of the shorter time
 * constant (us). */
double dm_power_tick_us(const dm_power *p);
/* The filtered demand after dt_us of demand P, from D (the filter alone, no hold). */
double dm_power_advance(const dm_power *p, double D, double P, double dt_us);
/* The state after dt_us of demand P: the hold (hold_ms) first, then dm_power_advance. */
void dm_power_step(const dm_power *p, dm_power_st *st, double P, double dt_us);
/* One compute op of a rank's timeline for dm_power_along: its start and time (us) and its
 * full-clock demand P (W); s is written: the mean clock it ran at. */
typedef struct dm_power_op {
    double t0, dur, P, s;
} dm_power_op;
/* The model along one rank's compute ops in time order, from an idle demand: the filtered demand
 * state advanced through each op at its demand (dm_power_mean_clock) and through the idle between ops,
 * `passes` times round the sequence with gap_us idle between passes (the end of one the start of
 * the next: the steady state); each op's s from the last pass. `dmuon calibrate` runs it along a
 * trace's ops (two passes, no gap), tools/clock_fit.py (through tools/power_along) along the
 * clock probe's runs. */
void dm_power_along(const dm_power *p, dm_power_op *ops, int n, double gap_us, int passes);
/* The clock fraction at filtered demand D. */
double dm_power_clock(const dm_power *p, double D);
/* The share of work's full-clock time `us` that the clock sets: what is left beyond the time its
 * `bytes` need at the reference copy rate (that part waits on HBM, which does not slow). */
double dm_power_clock_share(const dm_power *p, double bytes, double us);
/* The time multiplier of work whose full-clock time is compute-bound by `share`, at clock s. */
double dm_power_time_factor(double s, double share);
/* The mean clock over dt_us of demand P from the state *st (advanced in place, dm_power_step):
 * the clock a piece of work of that length sees, integrated in steps of at most the shorter
 * tau / 8. */
double dm_power_mean_clock(const dm_power *p, dm_power_st *st, double P, double dt_us);

/* Fit the parameters from a power_probe.py JSON file. desc (may be NULL) receives one line of
 * what was derived; log (may be NULL) a line per parameter. Errors name the file and the phase. */
int dm_power_fit(const char *probe_json, dm_power *out, double residual[3], char *desc, size_t desc_size, FILE *log,
                 dm_err *err);

#endif
