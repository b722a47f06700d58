/* validate.h: the simulator against the real executor on the same plans (`dmuon validate`).
 * Each case (model x tokens per rank x GPU count x strategy x overlap) is planned once
 * (sched_build) and saved; a plan whose per-rank peak memory (core/memory.h) does not fit on the
 * cluster's GPU is reported as "does not fit (needs N GiB)" and not run (GPU backend); the others
 * are run for real as a child process (`mpirun -np N dmuon run --program P --trace`, or `dmuon
 * run` alone for one GPU), simulated in-process on the same program, and the two traces compared
 * (compare.h): per case the step ruler's phases measured and predicted with their errors, and the
 * op-level error distribution; a table, a per-model table of the phases' errors (the model the
 * calibration was fitted on marked), where each model's forward/backward kernels were priced
 * from, DIR/validate.csv, each case's files under DIR/CASE/, and gnuplot timelines of one case
 * under DIR/plot/.
 * Replay: no executor; a stored validate.csv (the measured phases per case) is re-planned and
 * re-simulated with the current code, cluster and calibration and printed beside the stored
 * prediction's error (DIR/replay.csv), so the simulator can be improved without a GPU.
 * validate.csv: case,model,strategy,overlap,gpus,tokens,phase,measured_ms,predicted_ms,error_pct,
 * op_abs_err_median_pct,op_abs_err_p90_pct,ops_matched (tables without the tokens column, from
 * before, are read with --tokens). */
#ifndef DM_VALIDATE_H
#define DM_VALIDATE_H
#include <stdint.h>
#include <stdio.h>

#include "cluster.h"
#include "compare.h"
#include "costs.h"
#include "dm_error.h"
#include "phases.h"

typedef struct vld_case {
    char name[192];                              /* MODEL.STRATEGY.OVERLAP.NGPU[.Ttok] */
    const char *model, *strategy, *overlap;      /* borrowed (replay: into buf) */
    int gpus;
    int64_t tokens;                              /* per rank per step; 0: vld_opts.tokens */
    int ok;                                      /* ran (or was re-simulated) and compared */
    int nofit;                                   /* planned, does not fit in GPU memory: not run */
    double need_bytes;                           /* the per-rank peak it needs (core/memory.h) */
    int oom;                                     /* nofit found by the run: the estimate fit, the executor
                                                    stopped for want of memory (its log says DM_NOFIT_WORDS) */
    char src[2][640];                            /* where the forward/backward kernels came from */
    char device[96];                             /* the GPU the executor ran on (its run.log), "" unknown */
    int other_gpu;                               /* that GPU is not the cluster's: a comparison across GPUs */
    cmp_result r;
    char why[1100];                              /* the failure, when not ok */
    double stored_pred_us[DM_PHASE__COMPARED];   /* replay: the prediction the csv holds */
    int have[DM_PHASE__COMPARED];                /* replay: phases read */
    char buf[3][256];                            /* replay: model, strategy, overlap as read */
} vld_case;

typedef struct vld_opts {
    const dm_cluster *cluster;   /* the plans' and the simulator's (borrowed) */
    const dm_costs *costs;       /* borrowed */
    int64_t tokens;              /* per rank per step, of cases that do not say */
    const char *calibration;     /* the calibration applied ("" none), for the table */
    const char *fitted_on;       /* the model it was fitted on ("" none): its cases are marked */
    const char *dir;             /* output folder */
    double max_err;              /* percent; < 0: report only */
    /* the executor (not for replays) */
    const char *self, *mpirun, *backend;
    long steps;
    int dry;                     /* print the commands, plan the cases, run nothing */
    int plot_case;               /* 1-based; 0: the first dmuon case on the most GPUs */
    int as_run;                  /* replays: simulate each case's stored program (CASE/program.json
                                    beside the CSV) instead of planning it again */
    int64_t causal_tile;         /* every case's plan option --attention (sched_opts) */
    int no_layer_passes;         /* 1: every case planned --layer-passes off (replays of calls made
                                    before the passes, without their programs) */
} vld_opts;

/* The cases of every model x tokens x GPU count x strategy x overlap, in that order (strings
 * borrowed; the name carries the tokens when more than one count is given). *out owned by the
 * caller (free). */
int vld_cases(char *const *models, int n_models, const long *tokens, int n_tokens, const long *gpus, int n_gpus,
              char *const *strats, int n_strats, char *const *ovls, int n_ovls, vld_case **out, int *n_out, dm_err *err);

/* The case drawn under DIR/plot when none is asked for: the first dmuon case on the most GPUs
 * (1-based; 1 when there is none). */
int vld_default_plot_case(const vld_case *cs, int n);

/* Run, simulate and compare every case; the table, validate.csv and the summary go to out.
 * Returns the exit status: 1 when a case failed or (max_err >= 0) a held phase missed. */
int vld_run(vld_case *cs, int n, const vld_opts *o, FILE *out);

/* Read a stored validate.csv into cases (one per case name, every phase present); errors name
 * FILE:LINE:COL. *out owned by the caller (free). */
int vld_read_csv(const char *path, vld_case **out, int *n_out, dm_err *err);

/* Re-simulate the cases of a stored validate.csv and print measured, predicted now, error now and
 * the stored prediction's error (DIR/replay.csv too). Returns the exit status. */
int vld_replay(const char *csv_path, const vld_opts *o, FILE *out);

#endif
