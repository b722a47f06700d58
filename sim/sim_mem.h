/* sim_mem.h: the simulator's own memory, estimated before it is spent, so that `dmuon sim` and
 * `dmuon scale` refuse a plan too large for the machine with the estimate and the limit
 * instead of growing until the kernel's OOM killer acts (DeepSeek-V3 on 512 GPUs took 7.7 GB,
 * Kimi-K2 on 16384 more than 12 GB).
 *
 * The estimate counts what grows with the plan: the step program (ops, their dependency and
 * parameter lists), the scheduler's working tables while it builds one, the simulator's per-op
 * state and the trace when one is recorded; plus the process's resident size at the check.
 * Two sources for the counts:
 *  - sim_mem_plan_size: before building, from the model, the rank count and the plan options,
 *    by the shapes sched/build.c emits (collectives per layer and owner, compute ops per layer
 *    and rank, NS batches); an approximation, from above where the assignment is not known
 *    (owners per layer at most min(ranks, units)); tests/test_sim_mem checks it against built
 *    programs;
 *  - sim_mem_program_size: the exact counts of a built or loaded program. */
#ifndef SIM_SIM_MEM_H
#define SIM_SIM_MEM_H
#include <stdint.h>

#include "cluster.h"
#include "dm_error.h"
#include "model.h"
#include "program.h"
#include "sched.h"

typedef struct sim_mem_size {
    int64_t ranks, layers;
    int64_t ops;    /* over all ranks */
    int64_t deps;   /* dependency references, over all ops */
    int64_t params; /* parameter references, over all ops */
    int64_t params_held; /* parameter ids stored: each distinct list once (dm_program.plists) */
    int64_t colls;  /* collective ids */
    int64_t matrices; /* the model's matrices (the scheduler's tables) */
    int64_t sim_ranks; /* ranks whose ops the simulator holds: 1 for a shared run (sim.h,
                          sim_shared_ranks), every rank otherwise */
    int64_t lists;  /* distinct op lists held (dm_program_distinct_lists: ranks with equal lists
                       share one): 1 for adamw, muon-ddp and muon-fsdp, every rank's otherwise */
} sim_mem_size;

/* Counts of the program sched_build would make (nothing is built; o->gpus_per_node 0: the
 * cluster's). -1 only when out of memory (a per-layer table). */
int sim_mem_plan_size(const dm_model *m, const dm_cluster *c, int nranks, const sched_opts *o, sim_mem_size *out,
                      dm_err *err);
/* Exact counts of a program. */
void sim_mem_program_size(const dm_program *p, sim_mem_size *out);

/* What to count: the program and the scheduler's tables while it builds one (before
 * sched_build), the simulator's state, the trace (when one is recorded). */
enum { SIM_MEM_PROGRAM = 1, SIM_MEM_SCHED = 2, SIM_MEM_SIM = 4, SIM_MEM_TRACE = 8 };

/* Bytes the counts take in the parts named (SIM_MEM_* flags). */
double sim_mem_bytes(const sim_mem_size *s, int parts);

/* The default limit: 3/4 of physical memory, or of the cgroup's memory limit when lower. */
int64_t sim_mem_default_limit(void);

/* 0 when the process's resident size plus sim_mem_bytes(s, parts) fits under limit_bytes (0:
 * no limit);
 * else -1 with "the simulation of WHAT would need about X GB (N ops, N dependencies, N parameter
 * references; the process holds Y GB now), over the limit of Z GB (--max-memory SIZE to
 * change it)". Also -1 when the counts pass what the simulator indexes (2^31 - 1 ops or
 * dependencies: it counts them in int), whatever the limit. */
int sim_mem_check(const sim_mem_size *s, int parts, int64_t limit_bytes, const char *what, dm_err *err);

/* The two checks of `dmuon sim` and `dmuon scale` (WHAT: "MODEL STRATEGY on N GPUs";
 * limit_bytes < 0: the default limit): before sched_build, from the plan's counts (program,
 * scheduler, simulator, trace), and before sim_run, from the program's exact counts (simulator
 * and trace: the program is resident by then; c: the cluster it runs on, whether the run is
 * shared; NULL: every rank simulated). */
int sim_mem_check_plan(const dm_model *m, const dm_cluster *c, int nranks, const sched_opts *o, int record_trace,
                       int64_t limit_bytes, dm_err *err);
/* A flat or HSDP dmuon plan under --balance auto is not checked by sim_mem_check_plan (its counts
 * are a per-layer plan's; auto builds a candidate only while it fits the simulation budget):
 * plan_best builds the winner with sched_opts.max_ops from this, the ops (with a dependency
 * each) whose program and simulation fit under limit_bytes (< 0: the default limit) beside what
 * the process holds now, at most the 2^31 - 1 the simulator indexes (also with no limit, 0). */
double sim_mem_max_ops(int nranks, int64_t limit_bytes);
int sim_mem_plan_checked_later(const sched_opts *o);
int sim_mem_check_program(const dm_program *p, const dm_cluster *c, int record_trace, int64_t limit_bytes, dm_err *err);

#endif
