/* costs.h: the kernel cost model. Reads measured (or roofline-derived) cost tables and answers
 * "how long does this kernel take on this GPU", saying where each answer came from.
 *
 * Table format "dmuon-costs-1" (CSV; the GPU benchmark writes it, this module reads it):
 *   '#' comment lines first:  # dmuon-costs-1
 *                             # source: measured|roofline
 *                             # gpu: NVIDIA H200        (also: # cuda:, # cublas:, # date:, # command:)
 *   then the header           gpu,op,algo,m,n,batch,dtype,median_us,min_us,max_us
 *   then rows with op in {ns, gemm, syrk, muon_update, adamw}, algo in {direct, gram, cublas,
 *   sym, -}, m <= n, batch >= 1. ns rows: the whole 5-iteration Polar Express NS of `batch`
 *   matrices m x n. Elementwise rows (muon_update, adamw): m = 1, n = elements, batch = 1.
 *
 * Answers, in order of preference (dm_cost_source):
 *   MEASURED      the table has the exact (op, algo, m, n, batch) row (a measured table)
 *   INTERPOLATED  between measured shapes: the measured/roofline ratio ("efficiency") of the
 *                 nearest measured rows, interpolated in log space, times the roofline
 *   PROJECTED     a measured or interpolated answer scaled to another GPU by the ratio of the
 *                 two GPUs' roofline times (compute part by bf16 rate, memory part by HBM
 *                 bandwidth: datasheet numbers from cluster.h)
 *   ROOFLINE      no measured row near: FLOPs over the peak rate, bytes over HBM bandwidth, plus
 *                 a launch floor per kernel (also every answer from a "source: roofline" table;
 *                 outside the measured range the nearest row's efficiency scales the roofline)
 * Times in microseconds. */
#ifndef DM_COSTS_H
#define DM_COSTS_H
#include <stdint.h>
#include <stdio.h>

#include "cluster.h"
#include "dm_error.h"
#include "program.h"

typedef enum { DM_COST_MEASURED, DM_COST_INTERPOLATED, DM_COST_PROJECTED, DM_COST_ROOFLINE } dm_cost_source;

typedef struct dm_costs dm_costs; /* opaque */

/* Read a table. Errors name "FILE:LINE:COL: expected ...". *out owned by the caller. */
int dm_costs_load(const char *csv_path, dm_costs **out, dm_err *err);

/* traces/costs/h200.csv if present, else traces/costs/roofline.csv; directories searched in
 * order: $DMUON_COSTS (a file or a directory), DM_SRCDIR/traces/costs, DM_PKGDATADIR/costs.
 * When no file is found at all, returns a pure roofline model for an H200 (never fails for
 * that reason; dm_costs_describe says so). */
int dm_costs_load_default(dm_costs **out, dm_err *err);

/* A table-less pure roofline model (for tests and the roofline table generator). */
dm_costs *dm_costs_roofline(const dm_gpu *gpu, dm_err *err);

void dm_costs_free(dm_costs *c); /* accepts NULL */

/* Whole NS (5 iterations) of `batch` matrices m x n (any order; canonicalized to m <= n) on GPU
 * `target` (NULL: the table's GPU; projected by datasheet ratios if the table was measured on
 * another GPU). src may be NULL. */
double dm_costs_ns_us(const dm_costs *c, const dm_gpu *target, int64_t m, int64_t n, int batch,
                      dm_ns_algo algo, dm_cost_source *src);

/* The cheaper algorithm for that shape and batch; *us (may be NULL) gets its time. */
dm_ns_algo dm_costs_best_algo(const dm_costs *c, const dm_gpu *target, int64_t m, int64_t n,
                              int batch, double *us);

/* Elementwise optimizer kernels over `elems` parameters: op "muon_update" or "adamw". */
double dm_costs_elementwise_us(const dm_costs *c, const dm_gpu *target, const char *op,
                               int64_t elems, dm_cost_source *src);

/* "measured on NVIDIA H200 (traces/costs/h200.csv, 412 rows)" or "roofline for ..." */
const char *dm_costs_describe(const dm_costs *c);
const char *dm_costs_path(const dm_costs *c);   /* "" for a table-less model */
const dm_gpu *dm_costs_gpu(const dm_costs *c);  /* the GPU the table is for */
int dm_costs_is_roofline(const dm_costs *c);    /* 1 when the table's source is roofline */

const char *dm_cost_source_name(dm_cost_source s); /* "measured", "interpolated", ... */

/* ---- roofline terms (shared with the generator and tests) ---------------------------------- */

/* FLOPs of one 5-iteration NS of an m x n matrix (dm_ns_flops_ex of program.h). */
double dm_ns_flops(int64_t m, int64_t n, dm_ns_algo algo);
/* HBM bytes one NS moves (bf16 operands read and written once per matrix product). */
double dm_ns_bytes(int64_t m, int64_t n, dm_ns_algo algo);
/* HBM bytes per parameter of an elementwise update: muon_update 22, adamw 28 (bf16 grads and
 * weights, fp32 master weights and moments). 0 for an unknown op. */
double dm_elementwise_bytes_per_param(const char *op);
/* Pure roofline times on `gpu`. */
double dm_roofline_ns_us(const dm_gpu *gpu, int64_t m, int64_t n, int batch, dm_ns_algo algo);
double dm_roofline_elementwise_us(const dm_gpu *gpu, const char *op, int64_t elems);

/* Write a roofline table for `gpu` in the format above (atomically): a grid of shapes
 * (m, n in 128 .. 32768, powers of two and the extra shapes given, batch 1..32) and elementwise
 * rows from 2^10 to 2^32 elements. extra may be NULL. `command` goes into "# command:". */
int dm_costs_write_roofline(const char *path, const dm_gpu *gpu, const int64_t (*extra)[2],
                            int n_extra, const char *command, dm_err *err);

#endif
