/* sched.h: the scheduler. Turns (model, cluster, ranks, costs, options) into a step program
 * (program.h): owner assignment (round-robin, LPT, MILP), batching, NS algorithm per shape, and
 * per-strategy op lists. The single entry point is sched_build; `dmuon plan`, `dmuon sim` and
 * `dmuon run` share the option parsing below (sched_opts_parse / sched_getopt_*).
 *
 * The step program's shape (all strategies): one training step per rank, in list order
 *   1. parameter fetch for the step: broadcasts (dmuon) or all-gathers (adamw, muon-fsdp,
 *      muon-rr) of the weights the previous step's optimizer updated, per layer, forward order;
 *   2. forward per layer (each waits on its layer's fetch: the next step's forward prefetch);
 *   3. backward per layer, reverse order (Z3: re-fetch of the layer's weights first);
 *   4. gradient collectives per layer (interleaved into backward with overlap=interleave);
 *   5. NS batches and Muon updates on the owners, AdamW on shards.
 * So one program is one period of the training loop: its fetches carry the previous step's
 * updates, and timing the program from t = 0 gives the steady-state step time.
 *
 * Defaults: tokens per rank per step 4096 (--tokens); weights, gradients and collectives in
 * bf16 (2 bytes a parameter); optimizer states fp32 (counted in the update ops' HBM bytes). */
#ifndef DM_SCHED_H
#define DM_SCHED_H
#include <getopt.h>
#include <stdint.h>
#include <stdio.h>

#include "cluster.h"
#include "costs.h"
#include "dm_error.h"
#include "memory.h"
#include "model.h"
#include "program.h"

typedef enum {
    SCHED_ADAMW,     /* reduce-scatter grads, sharded AdamW, all-gather params */
    SCHED_MUON_DDP,  /* all-reduce grads, every rank NS on every matrix (naive_tuned: the form) */
    SCHED_MUON_FSDP, /* reduce-scatter, all-gather full grads, every rank NS on every matrix */
    SCHED_MUON_RR,   /* all-reduce grads, round-robin owners, all-gather of updated params */
    SCHED_DMUON      /* reduce to owner, NS on owner, broadcast before next forward */
} sched_strategy;

/* AUTO: the planner entry sim/plan_best.h builds the lpt and the milp plans (and the NS-only
 * lpt plan) and keeps the one that simulates fastest. sched_build alone, without a simulator,
 * plans auto as lpt on the NS load alone (comm weight 0: every library caller's plan before
 * issue 16, the one candidate of the three that never trades NS balance for a latency the step
 * may hide), and its program's options say so (balance=lpt comm-weight=0). */
typedef enum { SCHED_BAL_RR, SCHED_BAL_LPT, SCHED_BAL_MILP, SCHED_BAL_AUTO } sched_balance;

/* Cumulative levels: PREFETCH = each forward waits only on its own layer's fetch (fetch k layers
 * ahead); INTERLEAVE = PREFETCH plus each layer's gradient collective issued right after its
 * backward. NONE = all fetches before the first forward, all gradient collectives after the
 * last backward. */
typedef enum { SCHED_OVERLAP_NONE, SCHED_OVERLAP_PREFETCH, SCHED_OVERLAP_INTERLEAVE } sched_overlap;

/* HSDP: where a layer's AdamW-role parameters are sharded (sched_opts.hsdp_adamw). */
typedef enum { SCHED_HSDP_ADAMW_AUTO, SCHED_HSDP_ADAMW_REPLICAS, SCHED_HSDP_ADAMW_WORLD } sched_hsdp_adamw;
/* HSDP: how the Muon matrices' gradients and weights move (sched_opts.hsdp_muon). */
typedef enum { SCHED_HSDP_MUON_AUTO, SCHED_HSDP_MUON_REPLICAS, SCHED_HSDP_MUON_WORLD } sched_hsdp_muon;

#define SCHED_NS_SPLIT_AUTO (-1)
#define SCHED_PUBLISH_AUTO (-1)
typedef struct sched_opts {
    sched_strategy strategy;   /* default SCHED_DMUON */
    sched_balance balance;     /* default SCHED_BAL_AUTO (dmuon only) */
    sched_overlap overlap;     /* default SCHED_OVERLAP_INTERLEAVE */
    int prefetch_depth;        /* layers fetched ahead of the forward, >= 1; default 1 */
    int zero;                  /* 2: keep full weights after forward; 3: free and re-fetch for
                                  backward; default 2 */
    int hierarchical;          /* 1: owners inside each node, NS replicated per node, gradients
                                  all-reduced across nodes between same-local-rank owners */
    int hsdp;                  /* dmuon: 1 for DMuon's HSDP: shard groups of `shard` consecutive
                                  ranks times R replicate groups; each Muon matrix's gradient is
                                  reduce-scattered inside every shard group, each flat part reduced
                                  over its column to the owner's shard group and all-gathered there
                                  (the one global owner has it whole); NS once per matrix in the
                                  job; the updated weights (the program's dtype: the executors keep
                                  fp32 masters on owners only) go back the same way ahead of the
                                  next forward (build.c, hsdp_pair); AdamW-role parameters are
                                  reduce-scattered in the shard group, each part all-reduced
                                  over its column, all-gathered in the shard group, or sharded
                                  over all ranks, per layer as hsdp_adamw says (adamw_part) */
    int shard;                 /* HSDP's shard-group size; 0: GPUs per node */
    sched_hsdp_adamw hsdp_adamw; /* HSDP, a layer's AdamW-role parameters: SCHED_HSDP_ADAMW_AUTO
                                  (default: per layer the scheme whose gather and reduce the
                                  collective model (collcost.h) prices lower on this cluster),
                                  _REPLICAS (sharded in the shard group, all-reduced over the
                                  replicas: DMuon's scheme), _WORLD (sharded over all ranks, as
                                  the flat plan; e.g. an embedding whose all-reduce across the
                                  replicas moves twice a world reduce-scatter's bytes over the
                                  NICs) */
    sched_hsdp_muon hsdp_muon; /* HSDP, the Muon matrices' (layer, owner) pairs: _REPLICAS (DMuon's
                                  stages: shard groups, columns, one global owner; hsdp_pair),
                                  _WORLD (one reduce and one broadcast over all ranks each, as the
                                  flat plan), _AUTO (sched_build: replicas; under --balance auto
                                  the world's planned by its own candidates beside the stages'
                                  winner, both simulated, the faster kept: plan_best.c) */
    int gpus_per_node;         /* 0: the cluster's */
    int64_t batch_threshold;   /* elements: smaller Muon matrices of one layer are packed into
                                  one unit (LPT) / batched; default 5M (5 * 1024 * 1024) */
    int max_batch;             /* largest NS batch (muon-ddp/fsdp and MILP's batch menu); 32 */
    double milp_time_s;        /* the MILP balance's whole time limit (heuristics + lp_solve), in
                                  seconds of counted work (assign.c's search clock); default 1 (2
                                  before 2026-12-03) */
    double comm_weight;        /* weight of the communication terms in the assignment objective
                                  (sched_problem); 1 (default): as modelled; 0: the NS makespan
                                  alone (the objective before issue 16) */
    int64_t tokens;            /* tokens per rank per step; default 4096 */
    int64_t seq_len;           /* tokens per sample of the main stream; 0 (default): tokens */
    int layer_passes;          /* --layer-passes: 1 (default) the passes between projections in every
                                  layer (workload.h), 0 (off) none (the program's layer_passes) */
    int64_t causal_tile;       /* --attention causal: DM_ATTN_CAUSAL_TILE, causal self-attention
                                  as its lower triangle down to tiles of at least this many rows
                                  (the program's causal_tile, workload.h); 0 (default, --attention
                                  whole): every attention product whole */
    int ns_algo;               /* -1: cheaper per shape from the cost table (default);
                                  DM_NS_DIRECT or DM_NS_GRAM to force */
    dm_dtype dtype;            /* weights/grads/collectives; default bf16 */
    int verbose;               /* MILP solver chatter on stderr */
    int ns_early;              /* dmuon with overlap interleave: an owner's NS batch (and AdamW op)
                                  goes into the compute stream during the backward, ns_early layers
                                  after the last layer whose gradients it needs (its reduce has
                                  that long to arrive); 0 (default): after the whole backward */
    int ns_stream;             /* dmuon with overlap interleave (--ns-under-backward stream): every
                                  optimizer op of an owner (NS, Muon update, AdamW) on the
                                  low-priority compute stream compute-lo, in gradient-arrival
                                  order, each waiting on its gradients (their reduce, else the
                                  layer's backward): it runs beside the backward on the same GPU */
    int ns_split;              /* dmuon, flat plan (not hierarchical, not HSDP): P >= 2 splits the NS
                                  of each Muon matrix that is stored tall or square, has rows
                                  divisible by P and whose NS alone takes longer than the mean NS
                                  load of an owner (it bounds the makespan whatever the balance) over
                                  P ranks of one node: each its slice of rows (program.h: an NS op
                                  with parts > 1), the Gram all-reduced among them per iteration,
                                  the slice's gradient reduced to it and its weights broadcast
                                  from it; the split matrices go to the nodes' least loaded ranks
                                  after the balance places the others. 0 (default): none;
                                  SCHED_NS_SPLIT_AUTO: under --balance auto each P of 2, 4, ... up
                                  to a node's GPUs planned and simulated beside the plan without
                                  splits, the fastest kept (plan_best.c); else none */
    int publish;               /* the first `publish` layers' forward fetch (those fetched before
                                  any forward compute: at most prefetch_depth + 1) runs at the end
                                  of the step instead, each after the last update of its params on
                                  each rank (and that rank's backward of the layer), marked publish
                                  (program.h): it carries the new weights to the next step's
                                  forward, which no longer waits on a fetch of them; 0: none.
                                  Not with zero 3 (its weights are freed after the forward).
                                  SCHED_PUBLISH_AUTO: 1 on more than one rank with zero 2 and a
                                  prefetching overlap, else 0 (sched_build resolves it). Default 0:
                                  the GPU executor has run it on one GPU only */
    int naive_tuned;           /* muon-ddp / muon-fsdp: 0 (default) as PyTorch code runs them
                                  (DMuon's benchmarks, the usual DDP/FSDP2 Muon): one matrix per
                                  NS, direct; muon-fsdp gathers each full gradient inside the
                                  optimizer step, in series with that matrix's NS. 1: this
                                  project's tuned form (batched up to max_batch, the algorithm
                                  per shape, muon-fsdp's gathers in the backward), the strategies
                                  "muon-ddp-tuned" and "muon-fsdp-tuned" */
    int objective_only;        /* dmuon, internal (no option): stop after the owner assignment;
                                  the report is complete (objective, NS loads, solver) but the
                                  program has no ops. --balance auto weighs candidates too large
                                  to simulate by it (plan_best.c) without building each one */
    int emit_every_rank;       /* internal (tests): emit every rank's ops even where every rank
                                  runs the same list (build.c's replicated_plan: rank 0's
                                  emitted, the others sharing it, program.h) */
    double max_ops;            /* dmuon, internal: > 0: when the flat or HSDP plan's program would
                                  hold more ops than this (estimated from the assignment: each
                                  (layer, owner) pair's collectives on every rank), stop after the
                                  assignment as objective_only does; the report says so
                                  (ops_estimate, cut) */
    struct sched_assign *assign_out; /* dmuon, internal: when not NULL, the owner assignment the
                                  build made is moved here (the caller frees it) */
    const struct sched_assign *assign_in; /* dmuon, internal: build on this assignment (one an
                                  earlier build with the same options made, assign_out) instead of
                                  running the balance again; assign_in_rep: that build's report,
                                  whose solver fields (status, time, bounds) this one repeats */
    const struct sched_report *assign_in_rep;
} sched_opts;

void sched_opts_default(sched_opts *o);
/* 1 for muon-ddp and muon-fsdp in the form PyTorch code runs them (naive_tuned 0): one matrix
 * per NS, direct, its kernels launched one by one (dm_op.eager: PyTorch's eager mode, no CUDA
 * graph), the classic coefficients (the program's ns_coeffs: SCHED_PYTORCH_NS_COEFFS, Keller
 * Jordan's quintic that the usual Muon code runs). */
#define SCHED_PYTORCH_NS_COEFFS "jordan"
int sched_opts_pytorch_form(const sched_opts *o);
/* The options a build really uses: the PyTorch form fixes max_batch 1 and the direct algorithm. */
void sched_opts_effective(const sched_opts *o, sched_opts *out);
/* The strategy's name as reports and programs carry it: "muon-ddp-tuned" for the tuned form. */
const char *sched_opts_strategy_label(const sched_opts *o);

/* Set one option from strings: keys "strategy", "balance", "overlap" ("none", "prefetch",
 * "prefetch:K", "interleave"), "prefetch-depth", "zero" (2|3), "hierarchical" (0|1|yes|no),
 * "gpus-per-node", "batch-threshold" (elements, suffixes K/M/G: powers of 1024),
 * "max-batch", "milp-time" (seconds), "tokens", "ns-algo" (auto|direct|gram), "dtype", "seq-len",
 * "comm-weight" (>= 0), "balance" (lpt|milp|round-robin|auto), "ns-under-backward" (layers, stream or off),
 * "hsdp" (yes|no), "shard" (ranks per shard group; sets hsdp), "hsdp-adamw" (auto|replicas|world),
 * "hsdp-muon" (auto|replicas|world), "attention" (whole|causal), "layer-passes" (on|off).
 * -1 with "--KEY: expected ..." in err on a bad key or value. */
int sched_opts_parse(sched_opts *o, const char *key, const char *val, dm_err *err);
/* --attention's value (whole, causal, causal:T) as a causal_tile; the commands that take it
 * beside the plan options (model show, bench work, validate) parse it here too. */
int sched_parse_attention(const char *val, int64_t *causal_tile, dm_err *err);
/* --layer-passes's value (on, off) as layer_passes 1 or 0; validate takes it beside the plan options. */
int sched_parse_layer_passes(const char *val, int *on, dm_err *err);

/* Human-readable summary, e.g. "strategy=dmuon balance=lpt overlap=interleave prefetch=1 zero=2"
 * (written into the program's options). Returns buf. */
char *sched_opts_describe(const sched_opts *o, char *buf, size_t size);

const char *sched_strategy_name(sched_strategy s);
const char *sched_balance_name(sched_balance b);
const char *sched_overlap_name(sched_overlap v);
const char *sched_hsdp_adamw_name(sched_hsdp_adamw m); /* "auto", "replicas", "world" */
const char *sched_hsdp_muon_name(sched_hsdp_muon m);   /* the same names */

/* The common plan options for getopt_long, shared by `dmuon plan|sim|run`:
 *   --strategy S  --balance B  --overlap V  --prefetch K  --zero Z  --hierarchical
 *   --gpus-per-node G  --batch-threshold E  --max-batch B  --milp-time S  --tokens T
 *   --ns-algo A  --dtype D  --seq-len S  --comm-weight W  --ns-under-backward D  --hsdp  --shard N
 *   --hsdp-adamw M  --hsdp-muon M  --attention A  --ns-split P  --publish N  --layer-passes on|off
 * SCHED_GETOPT_LONG expands to the struct option entries (put it inside your table); their
 * `val`s are SCHED_OPT_BASE + i, above any char. sched_getopt_handle returns 1 if `c` was one of
 * them (and parsed optarg into o), 0 if not, -1 on a bad value (message printed to stderr as
 * "dmuon CMD: --OPT: expected ..."; exit 2; cmd NULL: no message, for the ranks other than 0
 * of an MPI command, so that rank 0 alone says it). sched_getopt_help prints their --help lines. */
#define SCHED_OPT_BASE 0x1000
#define SCHED_GETOPT_LONG                                                                     \
    {"strategy", required_argument, NULL, SCHED_OPT_BASE + 0},                                \
    {"balance", required_argument, NULL, SCHED_OPT_BASE + 1},                                 \
    {"overlap", required_argument, NULL, SCHED_OPT_BASE + 2},                                 \
    {"prefetch", required_argument, NULL, SCHED_OPT_BASE + 3},                                \
    {"zero", required_argument, NULL, SCHED_OPT_BASE + 4},                                    \
    {"hierarchical", no_argument, NULL, SCHED_OPT_BASE + 5},                                  \
    {"gpus-per-node", required_argument, NULL, SCHED_OPT_BASE + 6},                           \
    {"batch-threshold", required_argument, NULL, SCHED_OPT_BASE + 7},                         \
    {"max-batch", required_argument, NULL, SCHED_OPT_BASE + 8},                               \
    {"milp-time", required_argument, NULL, SCHED_OPT_BASE + 9},                               \
    {"tokens", required_argument, NULL, SCHED_OPT_BASE + 10},                                 \
    {"ns-algo", required_argument, NULL, SCHED_OPT_BASE + 11},                                \
    {"dtype", required_argument, NULL, SCHED_OPT_BASE + 12},                                  \
    {"seq-len", required_argument, NULL, SCHED_OPT_BASE + 13},                                \
    {"comm-weight", required_argument, NULL, SCHED_OPT_BASE + 14},                            \
    {"ns-under-backward", required_argument, NULL, SCHED_OPT_BASE + 15},                      \
    {"hsdp", no_argument, NULL, SCHED_OPT_BASE + 16},                                         \
    {"shard", required_argument, NULL, SCHED_OPT_BASE + 17},                                  \
    {"hsdp-adamw", required_argument, NULL, SCHED_OPT_BASE + 18},                             \
    {"hsdp-muon", required_argument, NULL, SCHED_OPT_BASE + 19},                              \
    {"attention", required_argument, NULL, SCHED_OPT_BASE + 20},                              \
    {"ns-split", required_argument, NULL, SCHED_OPT_BASE + 21},                               \
    {"publish", required_argument, NULL, SCHED_OPT_BASE + 22},                                \
    {"layer-passes", required_argument, NULL, SCHED_OPT_BASE + 23}
int sched_getopt_handle(sched_opts *o, const char *cmd, int c, const char *optarg_);
void sched_getopt_help(FILE *f);

/* What the assignment did. Per-rank arrays have `nowners` entries (nranks, or gpus_per_node
 * when hierarchical) and are owned by the report (sched_report_free). */
typedef struct sched_report {
    int nowners;
    double *ns_load_us;     /* modelled NS time per owner */
    int *ns_ops;            /* NS batch ops per owner */
    double max_us, mean_us;
    double imbalance;       /* max/mean - 1 */
    double lower_bound_us;  /* max(total / owners, largest unit) */
    double gap;             /* max/lower_bound - 1 */
    double shape_bound_us;  /* sched_two_shape_bound: a tighter bound (0: not computed) */
    double lpt_max_us;      /* LPT's makespan (the MILP's fallback), 0 when not computed */
    char solver_status[160];/* e.g. "lpt", "round-robin", "count search; milp timeout (576 vars,
                               2.00 s)", "lpt, optimal: at a lower bound" */
    double solver_s;        /* wall time of the assignment */
    double plan_s;          /* wall time of the whole sched_build */
    int n_units;            /* assignment units (matrices or packed groups) */
    int64_t n_muon;         /* Muon matrices */
    char costs[256];        /* dm_costs_describe of the table used */
    int cost_src_counts[4]; /* NS cost answers by dm_cost_source */
    /* The assignment objective (sched_problem; dmuon only, else 0). */
    char method[32];        /* the stage that produced the plan: "lpt", "round-robin", "split
                               search", "count search", "milp" */
    double objective_us;    /* the plan's objective */
    double objective_bound_us; /* a proven lower bound on any plan's objective (0: none) */
    double lpt_objective_us;/* LPT's objective (0 when not computed) */
    double comm_us;         /* its global communication term: pair_us x pairs */
    int pairs;              /* (layer, owner) pairs: each one broadcast and one reduce (HSDP's
                               stages: a broadcast, a reduce-scatter and an all-gather per shard
                               group and a broadcast and a reduce per column, build.c hsdp_pair) */
    double ops_estimate;    /* dmuon's plans: the program's ops estimated from the assignment,
                               pairs x ranks x ops_per_pair_rank + ops_node_compute (plan_best
                               weighs it against its budget; max_ops and the check after, flat
                               and HSDP plans only) */
    double ops_per_pair_rank; /* 2 (a broadcast and a reduce), HSDP's stages 4 (--zero 3: 5),
                                 hierarchical 2 + 1 / GPUs per node (the nodes' all-reduce) */
    double ops_node_compute;  /* hierarchical: the NS and Muon-update ops of every batch in every
                                 node, in ops_estimate beside the collectives (0 otherwise) */
    int cut;                /* 1: over max_ops, not built (the program has no ops) */
    int colls_per_pair;     /* collectives per pair (2; hierarchical: 2 x nodes + 1 when nodes > 1) */
    double comm_weight;     /* the weight the objective used */
    int hsdp_adamw_world;   /* HSDP: layers whose AdamW-role parameters are sharded over all ranks
                               (sched_opts.hsdp_adamw); the others' in the shard groups */
    int mem_valid;          /* 1: mem is dm_mem_peak(model, the program returned with this report,
                               NULL), which sched_build computed for its NS batches' check: a caller
                               that needs the estimate of that program takes it from here
                               (sched_report_mem; one walk of a 4096-rank program costs up to a
                               second) */
    dm_mem_est mem;
} sched_report;

void sched_report_free(sched_report *r); /* frees the arrays; accepts NULL */

/* The executor's per-rank peak memory of program p of model m (core/memory.h dm_mem_peak): the
 * estimate sched_build made of it when rep (may be NULL) is p's report and holds one, else
 * walked now. 0, or -1 (err set). */
int sched_report_mem(const sched_report *rep, const dm_model *m, const dm_program *p, dm_mem_est *e, dm_err *err);

/* One line about the objective for people, e.g. "objective 41.218 ms = owner chain 17.020 +
 * comm 24.198 (81 pairs, 162 collectives); proven bound 30.117 ms (gap 36.9%); method split
 * search". Returns buf. */
char *sched_report_objective(const sched_report *r, char *buf, size_t size);

/* Build the step program. rep may be NULL. *out owned by the caller (dm_program_free). The
 * program validates (dm_program_validate) by construction. When the cluster's GPU has a known
 * memory and the program's NS batches make it need more (core/memory.h dm_mem_peak), it is built
 * again with max_batch halved until it fits (its options line says the max-batch used); when
 * nothing fits, the program as asked. */
int sched_build(const dm_model *model, const dm_cluster *cluster, int nranks, const dm_costs *costs,
                const sched_opts *opts, dm_program **out, sched_report *rep, dm_err *err);

/* ---- owner assignment (exposed for tests and benchmarks) ----------------------------------- */

/* An assignment problem: items with a shape; the cost of a batch of b items of shape s is
 * cost[s][b-1] (b = 1 .. max_batch). Items carry a layer for same-layer spreading. */
typedef struct sched_item {
    int shape;      /* index into the shape table */
    int layer;      /* global layer */
    int64_t id;     /* matrix id */
} sched_item;

/* The objective (microseconds), for an assignment A:
 *
 *   J(A) = max over owners o of [ NS(o) + owner_pair_us x P(o) + owner_elem_us x E(o) ]
 *          + pair_us x sum over owners of P(o)
 *
 * NS(o): the owner's NS batches (cost table); P(o): the layers of which o owns at least one
 * matrix (each such (layer, owner) pair is one broadcast of the new weights before the layer's
 * forward and one reduce of its gradients after the backward: a layer spread over k owners
 * costs k of each); E(o): the elements o owns. pair_us: the latency terms (collcost's NCCL form)
 * of one pair's collectives, which every rank runs in series on its communication streams (the
 * number of collectives enters through it); owner_pair_us and owner_elem_us: the part on the
 * owner's own links, latency per pair and bytes per element (hierarchical: the cross-node
 * all-reduce among the owner's same-local-rank GPUs, over the NIC nearest to them; flat: 0, the
 * world-group ring carries every byte over every rank's links alike, the same for any owner).
 * With the three at 0 the objective is the NS makespan (and every method behaves as before
 * issue 16). sched_build derives them from the cluster (times sched_opts.comm_weight). */
typedef struct sched_problem {
    int n_shapes;
    int max_batch;
    double *cost;   /* n_shapes x max_batch, cost[s * max_batch + (b-1)], microseconds */
    int n_items;
    sched_item *items;
    int nowners;
    int64_t threshold_elems; /* LPT packs same-layer items of shapes smaller than this */
    int64_t *shape_elems;    /* n_shapes: elements of one matrix of the shape */
    double pair_us;          /* communication (see the objective above); 0: none */
    double owner_pair_us;
    double owner_elem_us;
} sched_problem;

/* The result: item i goes to owner[i] in NS batch batch_of[i] (batches are numbered per
 * problem; items of one batch share owner and shape). */
typedef struct sched_assign {
    int *owner;      /* n_items */
    int *batch_of;   /* n_items */
    int n_batches;
    int n_units;     /* LPT/round-robin: units placed (matrices or packed layer groups) */
    double *load_us; /* nowners: NS load */
    double makespan_us; /* the largest NS load */
    double objective_us;/* J (sched_assign_score) */
    int pairs;          /* (layer, owner) pairs */
    const char *method; /* static: the stage that produced it ("lpt", "milp", ...) */
    int n_items;        /* the problem's items (the arrays' length); 0 in an assignment not made here */
} sched_assign;

void sched_assign_free(sched_assign *a); /* frees the arrays; accepts NULL */
/* 1 when a and b give the same items the same owners and batches (both made by the functions
 * below for one problem), else 0 (also when either does not say its items). */
int sched_assign_same(const sched_assign *a, const sched_assign *b);
/* *a: a deep copy of src, an assignment of problem p's items and owners. */
int sched_assign_copy(const sched_problem *p, const sched_assign *src, sched_assign *a, dm_err *err);
int sched_assign_rr(const sched_problem *p, sched_assign *a, dm_err *err);
/* LPT: units (a matrix, or the matrices under threshold_elems of one layer) longest first, each
 * on the owner that raises the objective least (ties: the least loaded; with no communication
 * terms: the least loaded, spreading a layer over owners while that does not raise the
 * makespan), then each owner's same-shape matrices re-batched when cheaper. Deterministic. */
int sched_assign_lpt(const sched_problem *p, sched_assign *a, dm_err *err);
/* MILP balance, minimizing the objective within time_limit_s seconds of counted work (the whole
 * call: heuristics and lp_solve; operations charged at rates measured on the build machine, the
 * wall clock only a ceiling at 2 x time_limit_s + 0.5 s), in stages: (1) LPT; (2) with
 * communication terms, a split search: per class of identical layers, how many parts to cut each
 * layer into (each part one LPT unit; coordinate descent over the part counts); (3) a
 * batch-aware count search on how many matrices of each shape each owner holds (owners batch
 * each shape optimally by dynamic programming; moves, swaps, iterated local search with a fixed
 * seed, exact pair re-splits), turned into matrices layer by layer so that few (layer, owner)
 * pairs arise; (4) lp_solve on the aggregate model:
 * integer counts x[shape, batch size, owner] of NS batches and, with communication terms,
 * y[layer class, owner] of layers touched (an owner's matrices of a shape need enough touched
 * layers of the classes holding that shape; every layer touched once), load(o) <= L, loads
 * non-increasing by owner (the owners are identical: symmetry breaking), objective L + pair_us
 * x sum y (+ a small total-work term), cut off at the best plan so far (so any solution is
 * better; "infeasible" proves that plan optimal), warm-started from it (its solution is the
 * starting basis), an abort callback that charges lp_solve's pivots and bound swaps. The best by
 * the objective is kept: never worse than LPT. status gets the method that produced the plan
 * and how lp_solve ended; bound_us (may be NULL) the best proven lower bound on the objective
 * (sched_comm_bound, the two-shape bound, lp_solve's proof), 0 when there is none. a->method
 * names the stage. Deterministic, a search cut by the limit included (unless the wall-clock
 * ceiling cuts it: the status then says so). */
int sched_assign_milp(const sched_problem *p, double time_limit_s, int verbose, sched_assign *a,
                      char *status, size_t status_size, double *bound_us, dm_err *err);
/* A stronger lower bound on any plan's makespan: the exact optimum (by dynamic programming
 * over owners, bisection on the makespan) for the two shapes with the largest total cost alone,
 * every other matrix left out. 0 when too large to compute quickly. */
double sched_two_shape_bound(const sched_problem *p);
/* A lower bound on the objective: for any plan of makespan M, a layer of NS work W (at the
 * cheapest per-matrix batch cost) spread over k owners leaves one of them W/k, so k >= W/M and
 * J >= min over M >= ns_bound of [M + pair_us x sum over layers of ceil(W_l / M)] (ns_bound:
 * the larger of sched_lower_bound and the two-shape bound when given, else sched_lower_bound).
 * Without communication terms: ns_bound. */
double sched_comm_bound(const sched_problem *p, double ns_bound);

/* Fill a->objective_us and a->pairs from owner/load_us (the assignment's own NS loads). */
int sched_assign_score(const sched_problem *p, sched_assign *a, dm_err *err);

/* Monotonic wall clock in seconds (planning and solver times). */
double sched_wall_s(void);

/* max(sum over shapes of count * min_b cost[s][b]/b / owners, max_s cost[s][1]) */
double sched_lower_bound(const sched_problem *p);

#endif
