/* compare.h: a predicted trace (the simulator's) against a measured one (the real executor's),
 * both in the shared trace format (trace.h), op by op: `dmuon compare` and `dmuon validate`.
 *
 * Phases are computed from each trace the way the simulator reports them (sim.h), so the two
 * sides are measured with one ruler: step = the last op's end over all ranks; the critical rank
 * is the rank whose last op ends last (lowest on ties); on that rank forward, backward and
 * optimizer (ns + muon-update + adamw) are summed op durations, and exposed communication is
 * step - the time the rank's GPU ran compute ops (the union of their intervals). Per op kind the
 * sums run over every rank. Ops are matched by (rank, op id); an op's error is
 * (predicted - measured) / measured duration, over matched ops whose measured duration is at
 * least min_op_us (zero-length waits and ops too short to time carry no information).
 * Times in microseconds; errors as fractions (0.05 = 5%). */
#ifndef DM_COMPARE_H
#define DM_COMPARE_H
#include <stdio.h>

#include "dm_error.h"
#include "program.h"
#include "trace.h"

typedef enum { CMP_STEP, CMP_FORWARD, CMP_BACKWARD, CMP_OPTIMIZER, CMP_EXPOSED, CMP__PHASES } cmp_phase;

const char *cmp_phase_name(cmp_phase p); /* "step", "forward", "backward", "optimizer", "exposed-comm" */

typedef struct cmp_phases {
    double us[CMP__PHASES];
    int crit_rank;
} cmp_phases;

/* Sorts v[0..n) in place and returns its q-quantile (0 <= q <= 1), interpolated linearly
 * between neighbouring values (q = 0.5: the median); NAN when n <= 0. */
double cmp_quantile(double *v, int n, double q);

/* The phases of one trace. Fails on an empty trace. */
int cmp_trace_phases(const dm_trace *t, cmp_phases *out, dm_err *err);

typedef struct cmp_kind {
    int n_sim, n_real;       /* ops of the kind in each trace */
    double sim_us, real_us;  /* summed durations over all ranks */
    int n_err;               /* matched ops in the error distribution */
    double err_median;       /* median of (pred - meas) / meas over them */
} cmp_kind;

typedef struct cmp_opts {
    double min_op_us;        /* default 1 */
} cmp_opts;

void cmp_opts_default(cmp_opts *o);

typedef struct cmp_result {
    cmp_phases sim, real;
    cmp_kind kinds[DM_OP__COUNT];
    int n_matched;           /* (rank, op) present in both with the same kind */
    int n_kind_mismatch;     /* present in both, kinds differ (excluded) */
    int n_sim_only, n_real_only;
    int n_err;               /* matched ops in the error distribution */
    double abs_err_median, abs_err_p90; /* of |pred - meas| / meas */
    double err_median;       /* signed: the bias */
    double abs_us_median, abs_us_p90;   /* of |pred - meas| in microseconds */
    int metadata_differs;    /* model, strategy or nranks differ between the traces */
} cmp_result;

/* Compare. Neither trace is modified. */
int cmp_traces(const dm_trace *sim, const dm_trace *real, const cmp_opts *o, cmp_result *out, dm_err *err);

/* Relative error of the predicted value against the measured one ((p - m) / m; 0 when both are
 * 0, +-inf when only m is 0). */
double cmp_rel_err(double predicted, double measured);

/* The human report: metadata, the phase table, the op-kind table, the op-error distribution. */
void cmp_print(FILE *f, const dm_trace *sim, const dm_trace *real, const cmp_result *r);

/* The same tables as CSV (section,name,predicted_ms,measured_ms,error_pct,...), atomically. */
int cmp_write_csv(const char *path, const cmp_result *r, dm_err *err);

/* Plot data: DIR/timeline_predicted.dat and DIR/timeline_measured.dat (one row per op:
 * lane, start_ms, end_ms, kind index, kind, rank, stream, op), DIR/ops.dat (matched ops:
 * measured_ms predicted_ms kind), and the gnuplot script DIR/compare.gp that draws
 * DIR/timeline.png (both timelines, one lane per rank and stream) and DIR/ops.png (predicted
 * against measured op durations). Runs gnuplot when it is on PATH; *plotted (may be NULL) is set
 * to 1 when the PNGs were drawn. Creates DIR. */
int cmp_write_plots(const dm_trace *sim, const dm_trace *real, const char *dir, const char *title, int *plotted,
                    dm_err *err);

/* mkdir -p: create dir and its missing parents (0777 before umask). */
int cmp_mkdir_p(const char *dir, dm_err *err);

#endif
