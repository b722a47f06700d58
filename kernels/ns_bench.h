/* ns_bench.h: the NS kernel-cost benchmark behind `dmuon bench kernels` (the command line is
 * cli/cmd_bench.c's): per shape and batch the whole NS autotuned over symmetric-product block
 * counts and cuBLASLt heuristics (autotune.h; the best correct variant of each algorithm), the
 * products it is made of, and the Muon/AdamW elementwise kernels; CUDA events after warm-up on
 * graph replays, medians. Writes a table on stdout and the dmuon-costs-1 CSV the cost model
 * reads. Only with CUDA. */
#ifndef DM_NS_BENCH_H
#define DM_NS_BENCH_H
#include <stdint.h>

#include "autotune.h"
#include "clock_window.h" /* ns_bench_stats */
#include "dm_error.h"
#include "program.h"

#define NS_BENCH_MAX_BATCHES 64 /* batch sizes of one shape line (more: an error at its line) */

typedef struct ns_bench_shape {
    int64_t m, n;                         /* m <= n */
    long batches[NS_BENCH_MAX_BATCHES];   /* empty: the options' batches (when small) */
    int n_batches;
} ns_bench_shape;

typedef struct ns_bench_shapes {
    ns_bench_shape *v;
    int n, cap;
    int as_stored; /* keep each shape's orientation (rows > cols: a tall matrix, its NS on the
                      transpose as the executor runs it; written as a tall row, m > n); 0: every
                      shape as m <= n */
} ns_bench_shapes;

/* Add rows x cols (as m <= n unless l->as_stored; once unless it has its own batches) with batches b[0..nb). */
int ns_bench_shapes_add(ns_bench_shapes *l, int64_t rows, int64_t cols, const long *b, int nb, dm_err *err);
/* Lines "ROWS COLS [B1,B2,...]" ('x' or ',' also separate rows and cols); '#' comments;
 * FILE:LINE:COL errors. */
int ns_bench_shapes_read(ns_bench_shapes *l, const char *path, dm_err *err);
/* The Muon shapes of a bundled model or model file; "all": every bundled model. */
int ns_bench_shapes_model(ns_bench_shapes *l, const char *name, dm_err *err);
void ns_bench_shapes_free(ns_bench_shapes *l);
/* Calls to time together between two CUDA events, for a call of one_us: as many as last about
 * 200 us, 1 to 64. A step launches its kernels back to back with no event between them; an
 * event pair around every call added 1.3-2.2 us to each small kernel against the same kernels
 * back to back (traces/device/stepprobe-2026-12-03, rowsgroup-2026-12-03). The work rows and the
 * adamw rows are timed so; the time of one call is the interval's over the group. */
int ns_bench_group(double one_us);
/* The bundled model files (paths, sorted), for "all"; *out and its strings owned by the caller. */
int ns_bench_model_paths(char ***out, int *n, dm_err *err);

typedef struct ns_bench_opts {
    long batches[NS_BENCH_MAX_BATCHES]; /* for shapes without their own; default 1,2,4,8 */
    int n_batches;
    int64_t batch_max_elems;  /* only m*n <= this get batches > 1; default 16M */
    dm_ns_algo algos[2];      /* default direct, gram */
    int n_algos;
    at_options at;            /* the autotuner's (warm-up and reps shared with the timings) */
    int warmup, reps;         /* default 3, 20 */
    const char *out_csv;      /* the cost table (atomically); NULL: none */
    const char *cache_path;   /* the autotune cache; NULL: none */
    int retune;               /* ignore cached results */
    int retime;               /* a shape with a cached cuBLASLt entry: re-time that configuration (no
                                 search) beside our kernels, keep the faster */
    int products, elementwise;/* the single-product and elementwise rows; default 1 */
    int verbose, profile;     /* every candidate; per-step times of the winners */
    const char *cmdline;      /* for the CSV's "# command:" line (borrowed) */
} ns_bench_opts;

void ns_bench_opts_default(ns_bench_opts *o);
/* "direct", "gram" or both, comma-separated, into o->algos, or "none" (no NS rows); -1
 * ("expected direct and/or gram, or none, got 'X'") otherwise. */
int ns_bench_algos_parse(const char *list, ns_bench_opts *o, dm_err *err);
/* Run it over shapes (sorted in place; the goal shapes when empty). 0, or -1 with err. */
int ns_bench_kernels(const ns_bench_opts *o, ns_bench_shapes *shapes, dm_err *err);

#endif
