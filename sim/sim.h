/* sim.h: the discrete-event simulator: runs one step program (program.h) on a modeled cluster
 * (cluster.h) and predicts every op's start and end.
 *
 * Model (units: microseconds, bytes, bytes/s):
 *  - Streams: each rank's program streams run their ops one at a time in list order; an op is
 *    ready when it heads its stream and its dependencies are done.
 *  - GPU: compute-kind ops (forward, backward, ns, muon-update, adamw) of one rank share its GPU,
 *    one at a time; when several are ready, stream priority decides (comm-hi, then compute,
 *    then comm-lo; then op id). The ops of the second compute stream compute-lo (program.h) run
 *    beside those, one at a time: while both run, the other streams' op at the cluster's
 *    lo_main_rate and compute-lo's at lo_rate, each at full rate alone (re-timed whenever the
 *    other starts or ends, as under comm_slowdown below). Durations: a forward or backward op with work (program.h) is
 *    the sum of its kernels (workload.h), each from the kernel table (dm_costs_kernel_us:
 *    measured, interpolated, projected or roofline; per launch, memoized, times its count),
 *    plus the cluster's kernel_gap_us between two of its launches; a GEMM (gemm, bgemm) whose op
 *    the table has no row of at all (e.g. a table of NS kernels only) takes its FLOPs at
 *    fwd_efficiency (forward) or bwd_efficiency (backward, dm_cluster_bwd_efficiency) of the bf16
 *    peak instead, and the report says which ops did; each work is priced once (every rank
 *    shares it). An op without work (a program file from before ops carried it): its FLOPs at
 *    those efficiencies. ns from the cost model
 *    (dm_costs_ns_us; roofline when no table) times ns_time_scale when set, plus the gradient
 *    check and momentum the executor runs in the op (dm_ns_op_prep_us: at the calibrated Muon-update
 *    rate, none when a measured table prices the update with its momentum, else the HBM
 *    roofline); muon-update/adamw at
 *    the cluster's elementwise_efficiency when set (launch + bytes / (efficiency x HBM)), else
 *    tensor by tensor from the table (dm_costs_update_op_us over the op's work: one row per
 *    tensor as the executor updates it; an op without a work, one row at bytes / (HBM bytes per
 *    parameter) elements) plus the cluster's elementwise_op_us (bytes over HBM bandwidth and a
 *    launch per tensor when no table). wait ops take no time and no GPU. With the cluster's op_gap_us
 *    the GPU stays idle that long after each compute op (the executor's launches and event
 *    records between kernels); the first op of a rank waits for step_start_us instead.
 *  - Compute under collectives (cluster comm_slowdown f > 0): while at least one collective is
 *    in flight on a rank (from the rank's arrival at it, when NCCL's kernel would take SMs and
 *    wait for the other members, to its end), that rank's running compute
 *    op advances at (1 - f s) of its rate, s the share of a forward/backward op's time in its
 *    memory-bound kernels (dm_kernel_memory_bound), 1 for the other compute ops: its remaining
 *    work is brought up to date and its end re-scheduled whenever the rank's count of
 *    collectives in flight goes between 0 and 1 (an NS op of 10 us under a collective for its
 *    first 5 us ends at 12.5 us with f = 0.5). The
 *    phases and traces report the time the op took. f = 0 leaves every time as without it.
 *  - Collectives: a member's op holds its stream from the moment it is ready; the collective
 *    starts when every member has arrived (all members start together), waits its latency term,
 *    then carries its bus bytes as one flow over the links collcost_links names (net.h:
 *    max-min fair sharing with every other flow), and ends on all members at once. Alone it
 *    takes exactly collcost_time_us.
 * Deterministic: events ordered by (time, sequence number); the same input gives the same output.
 */
#ifndef SIM_SIM_H
#define SIM_SIM_H
#include <stdint.h>
#include <stdio.h>

#include "cluster.h"
#include "collcost.h"
#include "costs.h"
#include "dm_error.h"
#include "memory.h"
#include "program.h"
#include "sim_links.h"
#include "trace.h"

typedef struct sim_opts {
    coll_algo algo;        /* collective algorithm; AUTO: NCCL's choice by the cost model */
    int record_trace;      /* fill result->trace */
    const dm_costs *costs; /* kernel cost tables (borrowed); NULL: roofline terms */
    int full_ranks;        /* 1: simulate every rank even where sim_shared_ranks holds (tests) */
    int steps;             /* K > 1: K steps back to back (dm_program_unroll: what carries over
                              orders them, no barrier between them), the result's step and
                              phases the last step's window on the critical rank (from its
                              step K-1's last end to its step K's), its other fields over the K
                              steps; 0 or 1: one step (the executor's: its steps end in a barrier) */
    double stop_us;        /* > 0: stop once the step is known to end after this time (an event
                              past it with ops left, or before any op runs: one stream's ops at
                              their fastest, summed, past it): the result says only that
                              (stopped 1, step_us the time reached or that sum, a lower bound;
                              events 0 when stopped before running). A planner weighing
                              candidates against the best so far (sim/plan_best.h). Ignored under
                              the power model (its steady state is run several times) and with
                              K steps */
} sim_opts;

void sim_opts_default(sim_opts *o);

/* Time on the critical path by op kind. */
typedef struct sim_contrib {
    dm_op_kind kind;
    double us;
    int ops;
} sim_contrib;

/* One op on the critical path (the longest ones are kept). */
typedef struct sim_path_op {
    int rank, op, layer;
    dm_op_kind kind;
    double start_us, dur_us;
} sim_path_op;

#define SIM_PATH_TOP 5

/* Most runs of a step under the power model before its steady state is taken (sim.c). */
#define SIM_POWER_PASSES 4

typedef struct sim_result {
    /* The phases, cut by the one step ruler (phases.h) from the simulated ops, as compare cuts
     * the simulator's trace. */
    int nranks;
    double step_us;         /* last op's end over all ranks */
    int crit_rank;          /* the rank whose last op ends last (lowest on ties) */
    /* On crit_rank: GPU time per part, and the part of the step the GPU sat idle waiting for
     * communication (step - the union of its compute intervals). */
    double forward_us, backward_us, optimizer_us, exposed_comm_us;
    double comm_busy_us;    /* time with at least one collective in flight on crit_rank */
    double *ns_us;          /* per rank: NS time (nranks entries) */
    double ns_max_us, ns_mean_us;
    int ns_max_rank;
    sim_contrib crit[DM_OP__COUNT]; /* by time on the critical path, descending */
    int n_crit;
    double crit_total_us;   /* sum over the path (equals step_us when the path has no gaps) */
    sim_path_op top[SIM_PATH_TOP];
    int n_top;
    int64_t events;         /* events processed (heap pops and inline op completions) */
    int64_t ops;            /* ops executed over all ranks */
    int64_t rate_updates;   /* max-min recomputations */
    double wall_s;          /* simulation wall time (excluding setup) */
    double setup_s;         /* building the indexes and durations */
    double cpu_s, setup_cpu_s; /* the same as process CPU time (robust on a loaded machine) */
    char cost_src[DM_OP__COUNT][640]; /* where each kind's durations came from ("" if unused);
                                         forward/backward: the kernels' counts by source */
    char power_src[320];    /* the power-limit model's line ("" when the cluster has none) */
    int stopped;            /* 1: the run passed sim_opts.stop_us and stopped there: step_us is
                               the time reached, or the bound that passed it before any op ran
                               (the step ends later), no other field is set */
    int power_passes;       /* runs of the step to its steady state under the power model (1 without) */
    int steps;              /* steps simulated back to back (sim_opts.steps; 1 for one) */
    double first_step_us;   /* steps > 1: the critical rank's end of its first step */
    int *op_off;            /* rank r's ops are at op_off[r] .. op_off[r] + its n_ops - 1 of the arrays
                               below (sim_shared_ranks: 0 for every rank, their arrays one) */
    double *start_us, *end_us, *ready_us; /* per op (collectives: start is the collective's start;
                                             ready is the member's arrival) */
    dm_trace *trace;        /* when opts.record_trace */
    sim_links links;        /* the busiest links (filled when the cluster has a fabric) */
} sim_result;

/* 1 when every rank of p runs one shared list (program.h: rank 0's array, all of it) whose
 * collectives all span every rank, on a cluster without per-rank rates (no comm_slowdown,
 * coll_slowdown or power model): then every rank's ops start and end when rank 0's do, and
 * sim_run simulates rank 0's ops alone and reports them for every rank (the same report, trace
 * and counts as a run of every rank; in the result every op_off[r] is 0). adamw, muon-ddp and
 * muon-fsdp programs are such. */
int sim_shared_ranks(const dm_program *p, const dm_cluster *c, const sim_opts *o);
/* The cluster's part of it: no rate that differs between ranks. */
int sim_cluster_uniform(const dm_cluster *c);

/* Simulate one step. p must be valid (dm_program_validate); a deadlock (ops that never become
 * ready) is reported as an error naming a stuck op. *out owned by the caller (sim_result_free). */
int sim_run(const dm_program *p, const dm_cluster *c, const sim_opts *o, sim_result **out, dm_err *err);
void sim_result_free(sim_result *r); /* accepts NULL */

/* Reports. sim_print_report: where each kind's durations came from, the step and its parts,
 * the critical rank's collectives, per-rank NS load and the critical path (p: the simulated
 * program). sim_print_speed: the "speed:" line (plan_s: the planning's wall time). sim_print_json:
 * the results as one JSON object (format dmuon-sim-1, times in microseconds; with mem, the
 * executor's per-rank peak memory, memory.h, and whether it fits: omitted when NULL). */
void sim_print_report(FILE *f, const dm_program *p, const sim_result *r);
void sim_print_speed(FILE *f, const sim_result *r, double plan_s);
void sim_print_json(FILE *f, const dm_program *p, const dm_cluster *c, const dm_costs *costs, const dm_mem_est *mem,
                    const sim_result *r);

static inline double sim_op_start(const sim_result *r, int rank, int op) { return r->start_us[r->op_off[rank] + op]; }
static inline double sim_op_end(const sim_result *r, int rank, int op) { return r->end_us[r->op_off[rank] + op]; }

#endif
