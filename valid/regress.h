/* regress.h: the regression benchmark suite behind `dmuon regress`. Runs a fixed set of
 * measurements and compares them with the baselines stored under
 * traces/baselines/<machine-kind>/<suite>.tsv:
 *
 *   plan.*   the scheduler (sched_build) on fixed inputs: NS makespan and gap (quality; must not
 *            get worse) and the median planning time (timing);
 *   simspeed.*  the simulator on the Qwen2.5-72B / 256-GPU dmuon step: events per second and
 *            wall time (timing);
 *   pred.*   simulator predictions (step, forward, backward, optimizer, exposed communication)
 *            for fixed model x strategy x GPU-count cases on a pinned cost table: these must not
 *            change unless a model change is intended (then `--update --reason TEXT`);
 *   gpu.*    with a usable GPU: NS kernel medians (`dmuon bench kernels`) and executor step
 *            times (`dmuon run --backend gpu`), run as child processes of this binary.
 *
 * Timings: one untimed warm-up, then --reps repetitions; the metric is the median. CPU-side
 * timings are the calling thread's CPU time (the planner and the simulator are single-threaded;
 * CPU time is much steadier than wall time on a shared machine), with the call repeated inside a
 * sample until the sample lasts 0.1 s (quick) or 0.25 s (full), per call. Its noise is
 * the relative standard error of that median estimated from the repetitions
 * (1.253 x 1.4826 x MAD / median / sqrt(reps)), stored with the baseline. Two medians differ
 * when their ratio leaves 1 +- max(--threshold, 2.5 x sqrt(noise_base^2 + noise_now^2)).
 *
 * Test hook (documented slowdown injection): DM_TEST_SLOWDOWN=F (F > 1, e.g. 1.10) makes the
 * timing harness busy-wait (F - 1) x the measured CPU time right after each timed sample's calls,
 * inside the timed region: the measured code path really takes F times as long, which is what a
 * regression of F - 1 looks like to the suite. tests/regress.sh uses it to check that a 10%
 * slowdown is flagged.
 *
 * Exit status: 0 when nothing changed (timing changes are printed as warnings); 1 when a
 * prediction changed or planner quality got worse, or when a timing got slower and --strict was
 * given outside CI (the environment variable CI set to true/1: timings never fail there, CI
 * machines being noisy); 2 on usage errors. */
#ifndef DM_REGRESS_H
#define DM_REGRESS_H
#include <stdio.h>

#include "costs.h"

typedef struct reg_opts {
    int quick;             /* the small suite (seconds) */
    int reps;              /* timed repetitions per timing metric (0: 5, quick 7) */
    double threshold;      /* smallest timing change flagged, as a fraction */
    int gpu;               /* run the GPU part when a GPU is present */
    int exec_gpus;         /* ranks of the executor benchmark (more than 1 through $MPIRUN) */
    int update;            /* measure and rewrite the baseline instead of comparing */
    int strict;            /* slower timings fail, unless in_ci */
    int in_ci;             /* CI: timings only warn */
    double slowdown;       /* the test hook's F (DM_TEST_SLOWDOWN; 1: none) */
    const char *base_dir;  /* baseline folder */
    const char *machine;   /* machine kind; NULL: the GPU's, else cpu-<N>core */
    const char *reason;    /* stored with --update (may be NULL) */
    const char *csv_path;  /* the comparison table as CSV too (may be NULL) */
    const dm_costs *costs; /* the table plans and predictions use (borrowed) */
    FILE *json;            /* the result as one JSON object here (dmuon-regress-result-1), NULL: none */
} reg_opts;

/* The pinned table the suite uses by default: roofline.csv in $DMUON_COSTS (a folder), the
 * source tree's traces/costs or the installed costs folder; NULL when there is none. */
const char *reg_default_costs(void);

/* Measure the suite and compare it with DIR/MACHINE/SUITE.tsv (or rewrite it, o->update); the
 * configuration, the table and the verdict go to out. With o->json, once the suite was measured,
 * one JSON object goes there (format dmuon-regress-result-1; the baseline file's own format is
 * dmuon-regress-1): machine, suite, baseline, costs, reps, threshold, ci, update, per metric its
 * name, type, unit, baseline and now (null when absent), ratio, threshold_pct (null when none)
 * and verdict, the verdict counts, and "result" (PASS, FAIL or updated). Returns the exit
 * status (0 or 1). */
int reg_run(const reg_opts *o, FILE *out);

#endif
