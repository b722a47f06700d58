/* costs.h: the kernel cost model. Reads measured (or roofline-derived) cost tables and answers
 * "how long does this kernel take on this GPU", saying where each answer came from: the NS
 * iterations and optimizer updates of the step program, and every kernel of its forward and
 * backward ops (workload.h: GEMMs, batched attention and expert GEMMs, elementwise passes).
 *
 * Table format "dmuon-costs-2" (CSV; the GPU benchmarks `dmuon bench kernels` and `dmuon bench
 * work` write it, this module reads it; traces/costs/README.md has the same text):
 *   '#' comment lines first:  # dmuon-costs-2
 *                             # source: measured|roofline
 *                             # gpu: NVIDIA H200        (also: # cuda:, # cublas:, # date:, # command:,
 *                                                        # power_state: cool | as run (bench work: rows
 *                                                        at full clock or back to back; dm_costs_full_clock),
 *                                                        any other "# key: value" line is kept as a comment)
 *   then the header           gpu,op,algo,m,n,k,batch,dtype,median_us,min_us,max_us
 *   then one row per measured kernel shape (a second row with the same op, algo, m, n, k and
 *   batch is refused). Times: microseconds of ONE call, CUDA events around it after warm-up,
 *   the median (and the extremes) of the timed repetitions, each shape timed long enough to
 *   reach the clock it holds under sustained load. gpu: the CUDA device name (no commas).
 *   dtype: the element type of the operands (bf16, fp16 or fp32); the cost model does not key
 *   on it.
 *
 *   op           algo                      m, n, k, batch
 *   ns           direct | gram             the whole NS (DM_NS_ITERS_DEFAULT iterations) of `batch`
 *                                          matrices m x n, m <= n; k = 0; one CUDA graph replay
 *   ns           direct-eager | gram-eager the same with its kernels launched one by one (`bench
 *                                          kernels --no-graph`), as the PyTorch forms run it
 *                                          An ns row with m > n is of matrices stored tall (`bench
 *                                          kernels --as-stored`): the executor runs their NS on the
 *                                          transpose, its products with transposed operands, which
 *                                          is not always as fast (unaligned widths); looked up
 *                                          apart from the m <= n rows
 *   gemm         cublas                    the NS benchmark's plain product of an m x n operand
 *                                          (m <= n, k = 0), batch matrices; informational
 *   syrk         cublas | sym              the NS benchmark's symmetric product, as gemm cublas
 *   muon_update  -                         m = 1, n = elements, k = 0, batch = 1
 *   adamw        -                         m = 1, n = elements, k = 0, batch = 1
 *   gemm         fwd | dgrad | wgrad       ONE GEMM of a projection's pass, C[m x n] = A[m x k] B,
 *                                          with m, n, k exactly as workload.h defines them for that
 *                                          pass (fwd: m tokens, n out, k in; dgrad: m tokens, n in,
 *                                          k out; wgrad: m out, n in, k tokens); batch = 1
 *   bgemm        fwd | dgrad | wgrad       ONE batched GEMM call of `batch` routed experts, each
 *                                          m x n x k as the gemm pass of the same name (m = the
 *                                          tokens routed to one expert)
 *   bgemm        attn-score | attn-value | attn-dvalue | attn-dscore | attn-dquery | attn-dkey
 *                                          ONE batched GEMM call of `batch` (windows x heads)
 *                                          attention products, each m x n x k as workload.h
 *                                          defines the product
 *   elem         loss | vector | vector-bwd | embed | embed-bwd | table | table-bwd | route |
 *                route-bwd | softmax | softmax-bwd | grad-check (a gradient's non-finite check,
 *                                          m x n of it, m 1 for a 1-D one: workload.h) | act |
 *                act-bwd | glu | glu-bwd | rope | rope-bwd | resid | resid-bwd (the layer passes;
 *                                          rope's k: the rotated dims of a head)
 *                                          (dm_kern_op_name) ONE launch of the elementwise kernel
 *                                          over one matrix's m rows x n width, k as the workload
 *                                          kernel carries it (embed: the table's rows; else 0);
 *                                          batch = 1
 *   A row's (op, algo, m, n, k, batch) are the fields (dm_kern_kind_name(kind),
 *   dm_kern_op_name(op), m, n, k, batch) of the workload kernel it times; a kernel's `count`
 *   is not a column: the executor launches count GEMMs (gemm) or count elementwise kernels
 *   (elem), one per matrix, so such a kernel costs count x its row. Products: m, n, k >= 1.
 *   Files in the older format "dmuon-costs-1" (header gpu,op,algo,m,n,batch,dtype,median_us,
 *   min_us,max_us: no k) are still read, with k = 0.
 *
 * Answers, in order of preference (dm_cost_source):
 *   MEASURED      the table has the exact row
 *   INTERPOLATED  between or beyond measured shapes: the measured/roofline ratio ("efficiency")
 *                 of the nearest measured rows of the same op and algo, inverse-distance
 *                 weighted in log space, times the roofline. Kernels (dm_costs_kernel_us): the
 *                 8 nearest rows in log2(m, n, k, batch) (k, batch of 0 count as 1), weights
 *                 1 / d^2, the log-efficiencies averaged: every answer lies between the
 *                 efficiencies of its neighbours (a known answer where they agree), however far
 *                 the shape is from them, as long as the nearest is within 3 (log2 units, e.g.
 *                 8x in one dimension). NS (dm_costs_ns_us): the 6 nearest rows in
 *                 log2(m, n, batch), INTERPOLATED only when they bracket the query in every
 *                 dimension (else ROOFLINE scaled by the nearest row's efficiency)
 *   PROJECTED     a measured or interpolated answer scaled to another GPU by the ratio of the
 *                 two GPUs' roofline times (compute part by bf16 rate, memory part by HBM
 *                 bandwidth: datasheet numbers from cluster.h)
 *   ROOFLINE      nothing measured near: FLOPs over the peak rate, bytes over HBM bandwidth
 *                 (the larger), plus a launch floor per kernel launch (also every answer from a
 *                 "source: roofline" table)
 * The roofline of a kernel launch: products 2 m n k batch FLOPs over the dense bf16 rate,
 * (m k + k n + m n) batch elements of HBM traffic; elementwise kernels their bytes (workload.h's
 * passes over m x n elements) over HBM bandwidth. Times in microseconds. */
#ifndef DM_COSTS_H
#define DM_COSTS_H
#include <stdint.h>
#include <stdio.h>

#include "cluster.h"
#include "dm_error.h"
#include "program.h"
#include "workload.h"

typedef enum { DM_COST_MEASURED, DM_COST_INTERPOLATED, DM_COST_PROJECTED, DM_COST_ROOFLINE } dm_cost_source;

typedef struct dm_costs dm_costs; /* opaque */

/* Read a table: one file, or several joined by commas ("h200.csv,h200-work.csv": the NS
 * benchmark's and the workload benchmark's rows, of one GPU and one source; a row in two of them
 * is refused). Errors name "FILE:LINE:COL: expected ...". *out owned by the caller. */
int dm_costs_load(const char *csv_path, dm_costs **out, dm_err *err);

/* traces/costs/h200.csv (joined with h200-work.csv beside it, `dmuon bench work`'s rows, when
 * that file exists) if present, else traces/costs/roofline.csv; $DMUON_COSTS may name a file or a
 * comma list directly; folders searched in datadir.h's one order ($DMUON_COSTS as a folder, the
 * build tree's source traces/costs, the installed costs/, the source tree's).
 * When no file is found at all, returns a pure roofline model for an H200 (never fails for
 * that reason; dm_costs_describe says so). */
int dm_costs_load_default(dm_costs **out, dm_err *err);

/* A table-less pure roofline model (for tests and the roofline table generator). */
dm_costs *dm_costs_roofline(const dm_gpu *gpu, dm_err *err);

void dm_costs_free(dm_costs *c); /* accepts NULL */

/* Whole NS (5 iterations) of `batch` matrices m x n on GPU `target` (NULL: the table's GPU;
 * projected if the table was measured on another GPU: see dm_costs_kernel_us). m x n as stored:
 * m > n is a tall matrix, answered from the table's tall rows when it has them (of this
 * algorithm and launch mode), else as its transpose n x m. src may be NULL. */
double dm_costs_ns_us(const dm_costs *c, const dm_gpu *target, int64_t m, int64_t n, int batch,
                      dm_ns_algo algo, dm_cost_source *src);

/* The same for an NS whose kernels are launched one by one (eager 1: program.h's dm_op.eager, no
 * CUDA graph) or as one graph replay (eager 0: dm_costs_ns_us). Eager answers come from the
 * table's direct-eager / gram-eager rows as above; a table without such rows of the algorithm
 * answers the graph's time, at least one launch floor per kernel launch. */
double dm_costs_ns_launch_us(const dm_costs *c, const dm_gpu *target, int64_t m, int64_t n, int batch,
                             dm_ns_algo algo, int eager, dm_cost_source *src);

/* The cheaper algorithm for that shape and batch; *us (may be NULL) gets its time. */
dm_ns_algo dm_costs_best_algo(const dm_costs *c, const dm_gpu *target, int64_t m, int64_t n,
                              int batch, double *us);

/* Elementwise optimizer kernels over `elems` parameters: op "muon_update" (the table's apply
 * rows, the executor's update op; a table without them: its older "-" rows, momentum and apply
 * together), "muon_prep" (the prep rows: the gradient check and momentum an NS op runs per
 * matrix) or "adamw". */
double dm_costs_elementwise_us(const dm_costs *c, const dm_gpu *target, const char *op,
                               int64_t elems, dm_cost_source *src);

/* An update op (muon-update, adamw) of program p, as the executor runs it: with a work (the
 * scheduler's: one update kernel per tensor, workload.h's DM_KOP_ADAMW / DM_KOP_MUON_UPDATE),
 * the sum over its tensors of the table's rows for one tensor of that size (each row times the
 * executor's kernels for one tensor, back to back); without one (program files from before),
 * one row at the op's elements (op->bytes over the bytes per parameter). The one rule of the
 * simulator and the calibration. src may be NULL. */
double dm_costs_update_op_us(const dm_costs *c, const dm_gpu *target, const dm_program *p, const dm_op *op,
                             dm_cost_source *src);

/* One workload kernel (workload.h) on GPU `target` (NULL: the table's GPU; projected when the
 * table was measured on another GPU: the time above the launch floor split into the part its
 * HBM bytes or tensor FLOPs need at the table's own best rate for them, scaled by that datasheet
 * ratio, and the rest, scaled by the ratio of SMs x clock (dm_gpu_sm_rate; the datasheet ratio
 * where either GPU's is not known); NS and the optimizer's updates alike): its count launches of
 * one matrix (gemm, elem) or its one batched call (bgemm), answered as above. src may be NULL. */
double dm_costs_kernel_us(const dm_costs *c, const dm_gpu *target, const dm_kernel *k, dm_cost_source *src);

/* Rows the table holds of a kernel op (kind, op): 0 when it says nothing about such kernels
 * (dm_costs_kernel_us then answers ROOFLINE; the simulator prices GEMMs of an uncovered op
 * with the cluster's fwd/bwd efficiency instead, sim.h). */
int dm_costs_kernel_rows(const dm_costs *c, dm_kern_kind kind, dm_kern_op op);
/* Rows of an op by the table's names ("adamw", "gemm", ...), of one algo ("fwd") or of any
 * (algo NULL); 0 for a name the format does not have. */
int dm_costs_op_rows(const dm_costs *c, const char *op, const char *algo);

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
/* Memory-bound passes at the HBM roofline: `bytes` moved over HBM plus `launches` launch floors
 * (the elementwise roofline, the gradients' check, the executor's staging copies). */
double dm_hbm_pass_us(const dm_gpu *gpu, double launches, double bytes);
/* The same at a measured rate: `bytes` at the fraction `efficiency` of HBM bandwidth (<= 0: 1)
 * plus `launches` x launch_us (<= 0: the GPU's launch floor). The one form of every calibrated
 * memory-bound cost: the elementwise updates, the NS op's own passes, the staging copies. */
double dm_hbm_pass_at_us(const dm_gpu *gpu, double efficiency, double launch_us, double launches, double bytes);
/* The executor's NS op does more than the iterations: per matrix, before them, the reduced
 * gradient's non-finite check as it is converted to fp32 (bf16 read 2, fp32 write 4 bytes per
 * element) and the momentum update that writes the NS input (gradient 4 read, momentum 4 read
 * and 4 written, NS input 2 written): DM_NS_PREP_LAUNCHES launches and DM_NS_PREP_BYTES bytes
 * per element (real_gpu.c's ns_op; the CPU backend does the same passes). Their time at the
 * fraction `efficiency` of HBM bandwidth (<= 0: 1) with launch_us per launch (<= 0: the GPU's
 * launch floor), for `tensors` matrices of `elems` elements in all. */
#define DM_NS_PREP_LAUNCHES 2
#define DM_NS_PREP_BYTES 20
double dm_ns_prep_us(const dm_gpu *gpu, double efficiency, double launch_us, double tensors, double elems);
/* Those passes of `tensors` matrices of `elems` elements as an NS op on cluster cl is priced
 * with them (the one rule of the simulator, the scheduler's owner loads and the calibration,
 * which subtracts them before it fits ns_time_scale so that the scale holds the NS kernels
 * only): at cl's calibrated Muon-update rate when it has one (the update op is then priced as
 * the apply alone), else from c's muon_update prep rows per matrix (what the executor runs;
 * the update op then priced by its apply rows), none when c is a measured table with only the
 * older muon_update "-" rows (they time the momentum with the apply, so the update op carries
 * it), else at the HBM roofline. */
double dm_ns_op_prep_us(const dm_costs *c, const dm_cluster *cl, double tensors, double elems);

/* The NS kernels of one NS op of the step program (program.h: m x n, batch, algo, eager, tall)
 * on `gpu`, as the executor runs them: one call for its wide matrices (batch - tall) and one for
 * its tall ones (dm_costs_ns_launch_us of n x m: a table's tall rows where it has them), the
 * roofline when c is NULL. *src: the less direct of the two answers. */
double dm_costs_ns_op_kernels_us(const dm_costs *c, const dm_gpu *gpu, const dm_op *op, dm_cost_source *src);
/* The same at full clock, for a step under the power model pw (the one rule the simulator and
 * the calibration use): from the rows each brought to full clock by the clock it was timed at
 * where every NS row of the table has one (column mhz); else, rows timed back to back, by the
 * clock the model says their demand holds (dm_power_full_us_held); rows at full clock (`--cool`)
 * as they are; the rows' time when pw is NULL or off. */
double dm_costs_ns_op_kernels_full_us(const dm_costs *c, const dm_gpu *gpu, const dm_op *op, const dm_power *pw,
                                      dm_cost_source *src);

/* The time of one NS op on cluster cl (the one rule the scheduler's owner loads and the
 * simulator use): its kernels (dm_costs_ns_op_kernels_us on cl's GPU) times cl's
 * ns_time_scale when set, plus its gradient check and momentum (dm_ns_op_prep_us). *src: the
 * kernels' source. */
double dm_ns_op_us(const dm_costs *c, const dm_cluster *cl, const dm_op *op, dm_cost_source *src);
/* The same at full clock: where the power model is on, the kernels' time at full clock
 * (dm_costs_ns_op_kernels_full_us) before the scale; the simulator then runs the op at its context's
 * clock (the scheduler's loads keep dm_ns_op_us, the rows' own time). */
double dm_ns_op_full_us(const dm_costs *c, const dm_cluster *cl, const dm_op *op, dm_cost_source *src);
/* Both answer a split NS op (parts > 1, program.h) by its stage: the GEMMs of
 * dm_ns_split_stage_kernels priced from c's GEMM rows like the workload's (no NS row, no
 * ns_time_scale: that factor is the NS rows'), its elementwise passes at the HBM roofline, and
 * on stage 0 the slice's check and momentum. The kernels of one stage (k: room for 2, *n of
 * them, flops and bytes filled; *elem_bytes: HBM bytes of its elementwise passes): an even
 * stage H_j = S_j^T S_j (a weight-gradient GEMM r x r x s), an odd one S_j H and (S_j H) H (s x
 * r x r each), r the short side, s = ceil(long side / parts) the slice's rows. */
void dm_ns_split_stage_kernels(const dm_op *op, dm_kernel *k, int *n, double *elem_bytes);
/* The executor's non-finite check of `tensors` gradients of `elems` bf16 elements in all: one
 * launch each and one read at the HBM roofline (what a table without grad-check rows answers). */
double dm_grad_check_us(const dm_gpu *gpu, double tensors, double elems);
/* The check of the gradients backward kernels k[0..n) write: each as its grad-check kernel
 * (dm_grad_check_kernel, workload.h) priced from table c like any kernel (its rows from `bench
 * work`; without them the HBM roofline and launch floor of dm_grad_check_us), on gpu (NULL:
 * the table's). c NULL: the roofline. *launches: the check's launches (one per tensor); *src
 * (either may be NULL): a table answer's source if any check had one, else roofline. The one
 * rule the simulator and the calibration price. */
double dm_work_grad_check_us(const dm_costs *c, const dm_gpu *gpu, const dm_kernel *k, int n, double *launches,
                             dm_cost_source *src);
/* One launch of workload kernel k (its count not applied): FLOPs and bytes per launch (the
 * kernel's own when it carries them, else from its shape), launch floor included. */
double dm_roofline_kernel_us(const dm_gpu *gpu, const dm_kernel *k);
/* 1 when kernel k moves its HBM bytes in more time than its FLOPs take at the peak (gpu's
 * roofline: every elementwise kernel, the thin products); 0 for the others. The one rule of
 * which part of a forward/backward op shares HBM with a collective's copies beside it: the
 * simulator slows those kernels' share of the op under comm_slowdown and the calibration fits
 * comm_slowdown with the same shares. */
int dm_kernel_memory_bound(const dm_gpu *gpu, const dm_kernel *k);
/* HBM bytes of one launch of an elementwise kernel op over m rows x n width (k: the kernel's k)
 * at elt bytes per element: dm_elem_passes (workload.h) of m x n elements, and embed-bwd's zeroing
 * of its table (k rows x n); 0 for a product op. */
double dm_elem_launch_bytes(dm_kern_op op, int64_t m, int64_t n, int64_t k, double elt);

/* Write a roofline table for `gpu` in the format above (atomically): a grid of shapes
 * (m, n in 128 .. 32768, powers of two and the extra shapes given, batch 1..32) and elementwise
 * rows from 2^10 to 2^32 elements. extra may be NULL. `command` goes into "# command:". */
int dm_costs_write_roofline(const char *path, const dm_gpu *gpu, const int64_t (*extra)[2],
                            int n_extra, const char *command, dm_err *err);

/* 1 when every row of the kind (ns: the NS rows; else the workload's kernel rows) was measured
 * at full clock ("# power_state: cool", bench work --cool) or, NS rows, has a full-clock time
 * from the clock each was timed at (column mhz, when every NS row has one; under the power model
 * dm_costs_ns_op_kernels_full_us prices from those): the power model (power.h) slows those;
 * rows measured back to back already hold the clock the load left them at, and are not slowed
 * again. No table (or a roofline one): 1, the datasheet's rates are full clock. */
int dm_costs_full_clock(const dm_costs *c, int ns);
/* 1 when every NS row of the table carries the clock it was timed at (column mhz): under the
 * power model its NS ops are priced from the rows brought to full clock by those clocks
 * (dm_costs_ns_op_kernels_full_us). */
int dm_costs_ns_clocked(const dm_costs *c);

#endif
