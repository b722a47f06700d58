/* calib.h: calibration of the cost model from measurements (`dmuon calibrate`), and its use by
 * the simulator (`dmuon sim --calibration FILE`, `dmuon scale`).
 *
 * Inputs:
 *  - collective timings from `dmuon bench comm --csv` (format dmuon-comm-1, real/real_bench.c):
 *      # dmuon-comm-1 backend=gpu ranks=2 dtype=bf16
 *      coll,bytes,count,ranks,time_us,algbw_GBps,busbw_GBps,wrong
 *    Per collective kind, time_us = a + b x bus_bytes (bus_bytes = bytes x the nccl-tests busbw
 *    factor, collcost.h) over the sizes >= min_bytes is fitted by weighted least squares (GSL gsl_fit_wlinear, weights
 *    1/time^2, so every size counts by its relative error; rows with #wrong > 0 are refused).
 *    The bus bandwidth 1/b is turned into the cluster's parameters through collcost_topo: the
 *    group's modelled bus bandwidth is scaled to the fitted one on its bottleneck tier (inside a
 *    node: nvlink_bus_efficiency from all-reduce, busbw_scale.KIND = KIND's busbw / all-reduce's;
 *    across nodes: nic_Bps). The intercepts a are NCCL-form latencies: base + steps x hop
 *    latency, so base_latency_us and nvlink_latency_us (inside a node) or net_latency_us (across
 *    nodes) are fitted from them (a second gsl_fit_linear over the kinds' step counts).
 *  - compute op times from a measured trace (`dmuon run --trace`), one rate per kind:
 *    fwd_efficiency from the forward ops and bwd_efficiency from the backward ops (FLOPs over
 *    time, as a fraction of the GPU's dense bf16 peak, cluster.h), elementwise_efficiency.adamw
 *    and .muon_update from those ops (time = launch + bytes / (efficiency x HBM bandwidth)), and,
 *    when asked, comm_slowdown f: an op that spends fraction o of its time with a collective in
 *    flight on its rank (the union of that rank's collective intervals in the trace, each from the
 *    rank's arrival, ts - wait_us, to its end, as the simulator counts them) is modelled
 *    as taking model_time / (1 - f s o), s as the simulator takes it (the share of a
 *    forward/backward op's table time in memory-bound kernels, 1 for the other kinds). For each f on a 0.001 grid in [0, 0.95) the rate of each
 *    kind has a closed form (least squares of the relative residuals, which are linear in the
 *    inverse rate); the f with the smallest sum of squared residuals over all those ops wins.
 *    With the traced plan (dmuon plan -o) and a kernel table, NS ops join the fit as a kind whose
 *    model time is the table's for the op's shapes plus the gradient check and momentum the
 *    executor runs in the op (costs.h's dm_ns_prep_us, at the fitted Muon-update rate):
 *    ns_time_scale = (measured - that) / table.
 *    Residual of each key: the RMS relative residual of its kind's ops at that f.
 *    Also from the traces: step_start_us, the median over ranks of the first op's start, and
 *    op_gap_us, the median of the GPU's idle times between consecutive compute ops of a rank,
 *    over all ranks and traces (residual: the interquartile half-width over the median).
 *  - a kernel table from `dmuon bench kernels --out` (dmuon-costs-1): checked to load and
 *    recorded by path, so the simulator uses the same table.
 *
 * Forward/backward ops of a traced plan whose every GEMM the kernel table has rows of are the
 * table's: no efficiency is fitted for them; their measured time less the kernels' (the table's,
 * dm_costs_kernel_us) over their kernel launches less one gives kernel_gap_us, when the traces
 * show a gap. Only GEMMs the table has no rows of (or ops without a plan) fit fwd/bwd_efficiency,
 * the simulator's fallback for them. An elementwise kind (muon-update, adamw) whose table rows
 * come within 10% (median) of its traced ops is the table's too; one without rows, or whose rows
 * miss by more, gets elementwise_efficiency and elementwise_launch_us. The traces of one
 * calibration are of one model (others are refused), named in the file's "# fitted-on:" line, so
 * that validation on the other models means something; "# note:" says what priced what.
 *
 * Calibration file (format dmuon-calib-1): '#' header lines (format, date, gpu, command, and
 * optionally fitted-on and note), then
 * one "key = value" per line, each key once: the parameter table's DM_PARAM_CALIB keys
 * (cluster.h: their ranges are the table's, the same a cluster file is held to) plus
 * "costs = PATH", the kernel table, relative to the calibration file's folder (so the file works
 * from any working folder); each followed by its provenance as a comment:
 *     nvlink_bus_efficiency = 0.7398   # source: h200x2_comm.csv (all-reduce, 11 sizes);
 *                                        date: 2026-11-29T20:00:00Z; gpu: NVIDIA H200; residual: 3.1%
 * residual: the root mean square of the fit's relative residuals (time or efficiency).
 * Units as in the key names (us, Gbps, fractions). */
#ifndef DM_CALIB_H
#define DM_CALIB_H
#include <stdio.h>

#include "cluster.h"
#include "costs.h"
#include "dm_error.h"
#include "trace.h"

#define CALIB_MAX_ENTRIES 32

typedef struct calib_entry {
    char key[48];        /* a cluster-file key or "costs" */
    char value[512];     /* as written (numbers %.6g; costs: a path) */
    char source[1024];   /* where it came from: file and what of it */
    char date[32];       /* UTC, ISO 8601 */
    char gpu[128];
    double residual;     /* relative RMS; negative when not applicable */
    int points;          /* measurements behind the value */
} calib_entry;

typedef struct calib {
    char gpu[128];
    char date[32];
    char command[1024];
    char fitted_on[128];  /* the model whose traces the compute fits came from ("" if none) */
    char notes[1024];     /* what priced what (e.g. forward/backward by the kernel table) */
    int n;
    calib_entry e[CALIB_MAX_ENTRIES];
} calib;

/* A linear fit y = a + b x with its relative residual. */
typedef struct calib_fit {
    double a, b;         /* intercept, slope */
    double rel_rms;      /* RMS of (fit - y) / y */
    int n;
} calib_fit;

/* Weighted (1/y^2) least squares through GSL. Fails with fewer than 2 points or a singular fit. */
int calib_fit_linear(const double *x, const double *y, int n, calib_fit *out, dm_err *err);

/* Set (add or replace) an entry; value formatted by the caller. */
int calib_set(calib *c, const char *key, const char *value, const char *source, double residual, int points,
              dm_err *err);
const calib_entry *calib_get(const calib *c, const char *key);

/* Fit the collectives of a dmuon-comm-1 CSV into entries of c, against the cluster `base` (the
 * machine measured: its link capacities and gpus_per_node place the ranks). Only sizes of at
 * least min_bytes are fitted (CALIB_MIN_BYTES: below about a MiB NCCL changes protocol and the
 * time is not linear in size; the step's collectives are larger). Prints one line per kind to
 * log (may be NULL). */
#define CALIB_MIN_BYTES (1024.0 * 1024.0)
int calib_fit_comm(calib *c, const char *csv_path, const dm_cluster *base, double min_bytes, FILE *log, dm_err *err);

/* fwd_efficiency, bwd_efficiency, elementwise_efficiency.KIND and elementwise_launch_us.KIND
 * (kinds present in the trace), with program_path (the traced plan, dmuon plan -o) and costs:
 * ns_time_scale (NS ops against the table's time for their shapes), and, with the flags below,
 * comm_slowdown and kernel_gap_us, from a measured trace on `gpu` (see above). Fails when the
 * trace has no forward or backward op with FLOPs. */
/* What else calib_fit_trace(s) fits (flags, or-ed): comm_slowdown, and kernel_gap_us (the
 * idle between two kernels of an op: from the ops' time beyond their kernels' table times,
 * which also holds every difference between the table's rates and the step's, fitted on one
 * model; the executor's measured in-op gaps are under 1 us in the forward,
 * traces/validate/h200-5/ktimes: not fitted unless asked). */
/* CALIB_FIT_TAU_FALL: with a power model, power.tau_fall_ms beside power.activity_exp (the pair
 * whose clocks fit the traced forward/backward ops best); without it the filter is symmetric.
 * CALIB_FIT_HOLD: power.hold_ms the same way (with both, the three together); without it the
 * calibration's own hold (none by default). */
enum { CALIB_FIT_COMM_SLOWDOWN = 1, CALIB_FIT_KERNEL_GAP = 2, CALIB_FIT_TAU_FALL = 4, CALIB_FIT_HOLD = 8 };
int calib_fit_trace(calib *c, const char *trace_path, const dm_gpu *gpu, const char *program_path, const dm_costs *costs,
                    int flags, FILE *log, dm_err *err);
/* The same over the union of the compute ops of n_traces traces (program_paths may be NULL, or
 * hold NULL for a trace without its plan): e.g. a one-GPU run, whose compute never overlaps a
 * collective, beside a two-GPU run, so that the rates and comm_slowdown are separable. */
int calib_fit_traces(calib *c, int n_traces, const char *const *trace_paths, const char *const *program_paths,
                     const dm_gpu *gpu, const dm_costs *costs, int flags, FILE *log, dm_err *err);

/* The power-limit model's keys (power.*, core/power.h) fitted from a tools/power_probe.py JSON
 * file. Fitted before the traces, it makes calib_fit_traces take each compute op's clock from
 * the model run along the measured trace (each rank's ops in time order, its full-clock demand
 * from the op's table time, twice round the trace for the steady state): the rates fitted are
 * then those at full clock, as the simulator slows them. */
int calib_fit_power(calib *c, const char *probe_json, FILE *log, dm_err *err);

/* coll_slowdown g from measured traces: every collective of at least min_bytes, its duration
 * against the collective model of `cl` (the cluster with the comm fits applied: latency L and
 * transfer T alone) with the transfer slowed to (1 - g) while a member rank computes:
 * d = L + T / (1 - g o), o the fraction of the collective with compute running on a member.
 * Fails when no such collective overlaps compute. */
int calib_fit_coll_slowdown(calib *c, int n_traces, const char *const *trace_paths, const dm_cluster *cl,
                            double min_bytes, FILE *log, dm_err *err);

/* lo_main_rate and lo_rate (cluster.h: how the two compute streams share a GPU) from pairs of
 * traces of the same plan's step on one rank: one[i] with the optimizer on the compute stream
 * (each op alone on the GPU), stream[i] with it on compute-lo beside the backward
 * (--ns-under-backward stream). Compute ops are matched across a pair by (kind, layer, bytes,
 * FLOPs, occurrence); an op that took d in stream[i], a share o of it beside an op of the other
 * stream, and a alone in one[i] gives a = d (1 - o) + d o x: least squares over the ops of each
 * stream that overlapped (o > 1%) gives x, lo_main_rate from compute's ops, lo_rate from
 * compute-lo's. Fails when a pair has no compute-lo op or no op overlapped. */
int calib_fit_lo_stream(calib *c, int n_pairs, const char *const *one, const char *const *stream, FILE *log, dm_err *err);

/* The fraction of [a, b) covered by n_iv disjoint intervals iv[2i] .. iv[2i+1] (0 when b <= a). */
double calib_overlap_fraction(const double *iv, int n_iv, double a, double b);

/* Record a kernel table (must load as dmuon-costs-1) for a calibration to be written to out_path
 * ("-": stdout): its path relative to out_path's folder (absolute for stdout), as the file holds
 * it. */
int calib_add_costs(calib *c, const char *costs_path, const char *out_path, FILE *log, dm_err *err);

/* Write (atomically) and read the calibration file, values as they are (costs: relative to the
 * file's folder). Read errors name FILE:LINE:COL; a key given twice is refused. */
int calib_write(const calib *c, const char *path, dm_err *err);
int calib_read(const char *path, calib *out, dm_err *err);
/* The same values as one JSON object (format dmuon-calibrate-1, `dmuon calibrate --json`): the
 * machine (cluster, gpu, gpus_per_node), date, command, fitted_on and note (null when none), the
 * calibration file written (path; null for none or "-") and per value its key, value (a number,
 * or the string as written: costs), source, date, gpu, residual_pct (null: no fit) and points. */
void calib_print_json(FILE *f, const calib *c, const dm_cluster *cl, const char *path);

/* What calib_apply did, for the "calibration" line a command prints. */
typedef struct calib_info {
    char costs[1024];    /* the kernel table the calibration names, resolved against the
                            calibration file's folder ("" if none) */
    char describe[1200]; /* "FILE (date, GPU): keys ..." */
    char fitted_on[128]; /* the model whose traces it was fitted on: its "# fitted-on:" line, else
                            the model its sources' traces name ("" when none) */
    int n_applied;
} calib_info;

/* Read FILE and apply its values to *c (cluster-file keys; the cluster's name is kept and
 * c->source says "calibrated by FILE"). info may be NULL. The caller loads info->costs when it
 * is set and no table was given explicitly. */
int calib_apply(const char *file, dm_cluster *c, calib_info *info, dm_err *err);
/* The same from values in memory (every key but costs), e.g. the comm fits of a calibration
 * being made, to predict collectives with them. */
void calib_apply_entries(const calib *k, dm_cluster *c);

#endif
