/* wk_bench.h: `dmuon bench work` (the command line is cli/cmd_bench.c's): times on the GPU every
 * kernel of the bundled models' steps (core/workload.h: the GEMMs of every projection and
 * pass, the attention products at their sequence lengths, the MoE expert GEMMs over their routed
 * rows, the elementwise passes and reductions) at the given tokens per rank, plus a grid of
 * GEMM shapes for interpolation, each through the same launcher the executor runs it with
 * (wk_cuda.h's wk_run, bound by wk_plan.h as the executor binds it), with the NS table's
 * conventions: a sustained load first (the clock the GPU holds under it), then per distinct
 * kernel a warm-up of at least warmup_ms, then at least min_ms and reps intervals timed with
 * CUDA events, each a group of back-to-back calls lasting about 200 us (as the step launches
 * its kernels, with no event between them), medians of the per-call times; a progress line on stderr (a terminal only); a cache keyed by GPU, CUDA
 * runtime and cuBLAS versions; an estimate of the time before starting.
 *
 * Rows it writes (dmuon-costs-2, core/costs.h: gpu,op,algo,m,n,k,batch,dtype,median_us,min_us,
 * max_us), one per distinct kernel, its fields as dm_kernel has them:
 *   gemm   algo fwd|dgrad|wgrad; m, n, k of ONE product, batch 1: a workload kernel of count c
 *          is c launches of it (the executor runs them one after the other)
 *   bgemm  algo fwd|dgrad|wgrad (experts), attn-score|attn-value|attn-dvalue|attn-dscore|
 *          attn-dquery|attn-dkey; m, n, k of one product, batch products in one call
 *   elem   algo = dm_kern_op_name (loss, vector, vector-bwd, embed, embed-bwd, table,
 *          table-bwd, route, route-bwd); ONE launch over one matrix's m rows x n width (a
 *          kernel of count c is c launches: c x the row), k = the kernel's k (embed: table
 *          rows; else 0), batch 1
 * dtype bf16 throughout. Rows of the grid are gemm rows like the models'. Only with CUDA. */
#ifndef DM_WK_BENCH_H
#define DM_WK_BENCH_H
#include <stdint.h>

#include "dm_error.h"

#define WK_BENCH_MAX_LIST 64

typedef struct wk_bench_opts {
    const char *models[WK_BENCH_MAX_LIST]; /* bundled names, model files, "all" or "validation" */
    int n_models;                          /* default: "validation" */
    int64_t tokens[16];                    /* tokens per rank; default 1024, 2048, 4096, 8192, 16384 */
    int n_tokens;
    int64_t seq_len;                       /* 0 (default): each token count one sequence */
    int64_t causal_tile;                   /* the plans' (workload.h); 0 (default): whole */
    int grid;                              /* the GEMM grid; default 1 */
    int64_t grid_m[16], grid_nk[16];       /* default m 256..16384, n and k 256..32768 (x2) */
    int n_grid_m, n_grid_nk;
    double warmup_ms, min_ms;              /* per kernel; default 10, 10 */
    int reps;                              /* at least; default 10 */
    double sustain_s;                      /* the sustained load first; default 3 */
    uint64_t ops;                          /* bit (1 << dm_kern_op) per op kind timed (the
                                              grid's GEMMs count as fwd, dgrad, wgrad);
                                              0 (default): every kind */
    int cool;                              /* after each kernel, the GPU idles as long as that
                                              kernel's timing ran (so the bench's own load never
                                              throttles it: rows at full clock); default 0 */
    double max_s;                          /* stop timing after this long (what was timed is
                                              written); 0 (default): no limit */
    const char *out_csv;                   /* atomically; NULL: none */
    const char *cache_path;                /* NULL: none */
    int dry_run;                           /* list and estimate only (no GPU) */
    int list;                              /* print every kernel (dry run: with its estimate) */
    const char *cmdline;                   /* "# command:" (borrowed) */
} wk_bench_opts;

void wk_bench_opts_default(wk_bench_opts *o);
/* The bundled models `dmuon validate` runs (the "validation" list). */
extern const char *const wk_bench_validation_models[];

/* Run it. 0, or -1 with err. */
int wk_bench_work(const wk_bench_opts *o, dm_err *err);

#endif
