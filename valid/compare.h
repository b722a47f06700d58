/* compare.h: a predicted trace (the simulator's) against a measured one (the real executor's),
 * both in the shared trace format (trace.h), op by op: `dmuon compare` and `dmuon validate`.
 *
 * Phases are cut from each trace by the one step ruler (phases.h, dm_phases_trace), the same
 * rule the simulator reports with, so the two sides are measured alike: step, forward,
 * backward, optimizer and exposed communication of the critical rank (the first
 * DM_PHASE__COMPARED phases). Per op kind the sums run over every rank. Ops are matched by
 * (rank, op id); an op's error is (predicted - measured) / measured duration, over matched ops
 * whose measured duration is at least min_op_us (zero-length waits and ops too short to time
 * carry no information). Times in microseconds; errors as fractions (0.05 = 5%). */
#ifndef DM_COMPARE_H
#define DM_COMPARE_H
#include <stdio.h>

#include "dm_error.h"
#include "phases.h"
#include "program.h"
#include "trace.h"

/* Sorts v[0..n) in place and returns its q-quantile (0 <= q <= 1), interpolated linearly
 * between neighbouring values by GSL (gsl_stats_quantile_from_sorted_data; q = 0.5: the median);
 * NAN when n <= 0. */
double cmp_quantile(double *v, int n, double q);

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
    dm_phases sim, real;     /* the ruler's phases of each trace (rank: its critical rank) */
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

/* Whether phase p is held to an error bound: the step always; another phase when it is at least
 * 1% of its trace's step on either side (a phase of ~0 has no meaningful relative error).
 * cmp_phase_misses: held, and its |error| exceeds max_pct percent. */
int cmp_phase_held(const dm_phases *pred, const dm_phases *meas, int p);
int cmp_phase_misses(const dm_phases *pred, const dm_phases *meas, int p, double max_pct);

/* The human report: metadata, the phase table, the op-kind table, the op-error distribution. */
void cmp_print(FILE *f, const dm_trace *sim, const dm_trace *real, const cmp_result *r);

/* The same numbers as one JSON object (format dmuon-compare-1): model, cluster, strategy and
 * gpus of the measured trace, each trace's file (the paths given) and metadata, the phases (with whether each is held to
 * and exceeds max_err_pct; max_err_pct < 0: no bound, "max_error_pct": null), the op kinds and
 * the op-error distribution; times in ms, errors in percent, null where not finite. */
void cmp_print_json(FILE *f, const char *sim_path, const dm_trace *sim, const char *real_path, const dm_trace *real,
                    const cmp_result *r, double max_err_pct);

/* The same tables as CSV (section,name,predicted_ms,measured_ms,error_pct,...), atomically,
 * under a "# dmuon-compare-1" line naming the predicted trace's case. */
int cmp_write_csv(const char *path, const dm_trace *sim, const cmp_result *r, dm_err *err);

/* Plot data: DIR/timeline_predicted.dat and DIR/timeline_measured.dat (one row per op:
 * lane, start_ms, end_ms, kind index, kind, rank, stream, op), DIR/ops.dat (matched ops:
 * measured_ms predicted_ms kind), and the gnuplot script DIR/compare.gp that draws
 * DIR/timeline.png (both timelines, one lane per stream of each rank that has events, so the
 * script grows with the traces, not with the rank numbers in them) and DIR/ops.png (predicted
 * against measured op durations). Runs gnuplot when it is on PATH (plot.h: quoted strings, no
 * shell, PNGs renamed into place; its output in DIR/gnuplot.log); *plotted (may be NULL) is set
 * to 1 when the PNGs were drawn. Creates DIR. */
int cmp_write_plots(const dm_trace *sim, const dm_trace *real, const char *dir, const char *title, int *plotted,
                    dm_err *err);

#endif
