/* plan_best.h: choosing between plans by simulating them. The planner entry of `dmuon plan`,
 * `dmuon sim` and `dmuon scale` (it sits above the simulator, which sched/ may not call):
 * with --balance auto (the default) and the dmuon strategy it builds the candidate programs with
 * sched_build,
 *   lpt           LPT on the communication-aware objective (sched.h),
 *   milp          the MILP balance on the same objective,
 *   lpt-ns        LPT on the NS load alone (the default plan before issue 16),
 * simulates each with sim_run when the simulations are cheap (predicted from the programs' op
 * counts, under sim_budget_s each, and within the memory limit) and returns the one whose step
 * is shortest (ties: the earlier in that list; milp's assignment is made first, and where it is
 * lpt's, lpt's program stands for it, not built or simulated twice). When a simulation would be
 * too costly it keeps the lower objective of lpt and milp instead and says so. Under --hsdp with --hsdp-adamw auto,
 * when the winner's plan shards some layers' AdamW parameters over all ranks, the same
 * assignment with every layer's in the shard groups is simulated as well and the faster kept
 * (pb->adamw_*). A candidate or alternative of PLAN_BEST_STOP_OPS ops or more is simulated with
 * the best step so far as its stop (sim_opts.stop_us): past it, it cannot win, and it stops
 * there (its step reported "over" that bound). Any other balance or strategy goes
 * straight to sched_build. Deterministic whenever the MILP is (sched.h). */
#ifndef SIM_PLAN_BEST_H
#define SIM_PLAN_BEST_H
#include <stdint.h>
#include <stdio.h>

#include "sched.h"
#include "sim.h"

#define PLAN_BEST_MAX 3
/* Wall seconds per op of a simulation, setup included: 2.67 M ops took 2.5 s on the shared
 * 2-core build machine (Moonlight-16B, 256 GPUs, dmuon with NS-only MILP owners), 107 k ops
 * 0.13 s; taken from above. A candidate's simulation is weighed against the budget by it. */
#define PLAN_BEST_SIM_S_PER_OP 1.0e-6
/* A candidate (or an alternative) of at least this many ops is simulated with the best step so
 * far as its stop (sim_opts.stop_us): once its simulation passes that time it cannot win, and it
 * stops there (reported "over" that step). Smaller ones run whole: their simulation costs little
 * and their own step is worth telling (1 M ops: about 0.5 s of simulation here). */
#define PLAN_BEST_STOP_OPS 1000000

typedef struct plan_cand {
    const char *name;       /* "lpt", "milp", "lpt-ns" (static) */
    sched_balance balance;
    double comm_weight;
    int simulated;          /* step_us and exposed_comm_us are set */
    double step_us, exposed_comm_us;
    int stopped;            /* simulated until it passed the best step so far (PLAN_BEST_STOP_OPS):
                               step_us is that lower bound, exposed_comm_us 0 */
    double objective_us;    /* its own objective (lpt-ns: the NS makespan) */
    double ns_max_us;
    int pairs;              /* (layer, owner) pairs */
    int64_t ops;            /* ops over all ranks (0: its program was not built) */
    int same_as;            /* simulated: its program is candidate same_as's (the same step, not
                               simulated again); -1: its own */
    int objective_only;     /* weighed by its objective alone (an earlier candidate was too large to
                               simulate): its assignment was made, its program built only if it won */
    double plan_s, sim_s;   /* wall seconds */
    char status[160];       /* the scheduler's solver status */
} plan_cand;

typedef struct plan_best_report {
    int n;                  /* candidates; 0: not auto, the plan came from sched_build alone */
    plan_cand cand[PLAN_BEST_MAX];
    int winner;             /* index into cand */
    int by_sim;             /* 1: chosen by the simulated step; 0: by the objective */
    char why[224];          /* when by_sim is 0: why the candidates were not simulated */
    int late_sim;           /* 1: chosen by the objective, the winner then simulated (its step in
                               cand[winner]) to weigh it against an alternative by the step
                               (plan_best_opts.sim_winner; HSDP with --hsdp-muon auto) */
    int late_stopped;       /* HSDP's: that simulation stopped past the step of the Muon pairs
                               over all ranks (simulated first): its step (muon_replicas_us) a bound */
    int late_skipped;       /* HSDP's: not simulated after, its program over the check's budget
                               (plan_best_opts.late_budget_s; late_ops its estimated ops): the Muon
                               pairs over all ranks, simulated, kept */
    double late_ops, late_budget_s;
    /* HSDP with --hsdp-adamw auto, when the winner's plan put some layers' AdamW parameters on all
     * ranks (adamw_world_layers > 0): its step, the step of the same assignment with every layer's
     * in the shard groups (simulated), and 1 when that one was faster and is the plan */
    int adamw_world_layers, adamw_replicas_won;
    double adamw_auto_us, adamw_replicas_us;
    int adamw_replicas_stopped; /* its simulation stopped past the winner's (adamw_replicas_us a bound) */
    int adamw_alt_world;    /* 1: that alternative was every layer's over all ranks (with the Muon
                               pairs over all ranks: the flat plan's), not in the shard groups */
    /* HSDP with --hsdp-muon auto: the Muon pairs over all ranks (hsdp_muon world, planned by its own
     * candidates) simulated beside the winner's HSDP stages (muon_tried 1): both steps, and 1 when
     * the world's was faster and is the plan */
    int muon_tried, muon_world_won;
    double muon_replicas_us, muon_world_us;
    int muon_world_stopped;      /* the world's simulations stopped past the winner's (a bound) */
    char muon_world_balance[16]; /* the balance that planned the world's */
    int muon_world_flat;         /* the world's kept every layer's AdamW parameters over all ranks */
    /* --ns-split: the plan without splits (planned by its own candidates) simulated beside the
     * winner's (split_tried 1): both steps, and 1 when the unsplit one was faster and is the plan */
    int split_tried, unsplit_won;
    double split_us, unsplit_us;
    int unsplit_stopped;    /* the unsplit plan's simulation stopped past the winner's (a bound) */
    /* --ns-split auto: each P tried (split_p[k], its step split_p_us[k]; 0: nothing split or not
     * simulated), the plan without splits (unsplit_us), and the P kept (0: none) */
#define PLAN_BEST_SPLIT_PS 11 /* P = 2, 4, ..., 2048 at most (a cluster file's node holds up to 1024 GPUs) */
    int n_split_p, split_p[PLAN_BEST_SPLIT_PS], split_kept;
    double split_p_us[PLAN_BEST_SPLIT_PS];
    int split_p_stopped[PLAN_BEST_SPLIT_PS]; /* P's simulation stopped past the best (a bound) */
} plan_best_report;

/* A line on what a long planning does now (`dmuon sim` and `dmuon plan`, on stderr when it is a
 * terminal, or with --progress): written over itself ("\r", padded), e.g. "sim 4.2 s: milp: simulating
 * its 1.16e+06 ops"; plan_progress_end clears it on a terminal, else ends it with a newline. */
typedef struct plan_progress {
    FILE *f;
    const char *name; /* the line's first word (the command) */
    double t0;  /* sched_wall_s() when the planning started */
    int shown;  /* lines written so far */
} plan_progress;

void plan_progress_say(plan_progress *pp, const char *what, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
void plan_progress_end(plan_progress *pp);

typedef struct plan_best_opts {
    double sim_budget_s;    /* simulate only when every candidate's predicted simulation takes
                               less (wall seconds); default 5 */
    int64_t max_memory;     /* the simulator's memory limit (sim_mem_check_program; < 0: its
                               default, 0: none) */
    int no_unsplit;         /* internal: --ns-split P's plan not weighed against the unsplit one
                               (--ns-split auto weighs every P against it itself) */
    sim_result **winner_result; /* when not NULL: the winner's simulation when the candidates
                               were simulated (sopt's, without a trace; owned by the caller), else
                               NULL: a caller that simulates the plan the same way need not again */
    double stop_us;         /* internal: > 0, the step of a plan these candidates are weighed
                               against (an alternative's): a large candidate's simulation stops past
                               it (PLAN_BEST_STOP_OPS), and the winner's may then be stopped too */
    int64_t stop_ops;       /* programs of at least this many ops are simulated with a stop (default
                               PLAN_BEST_STOP_OPS; tests set 0) */
    double late_budget_s;   /* HSDP's winner weighed by its objective is simulated after the Muon
                               pairs over all ranks (--hsdp-muon auto) only when its program's
                               simulation would take at most this long by the estimate (its pairs x
                               ranks x collectives per pair, PLAN_BEST_SIM_S_PER_OP); else the
                               simulated one is kept; default 10 (the 4096-GPU goal, issue 16) */
    plan_progress *progress; /* NULL, or where to say what the planning does (plan_progress_say) */
    const char *progress_what; /* internal: the alternative being planned, named on that line */
    int sim_winner;         /* internal: 1: a winner weighed by the objective is simulated too when
                               its simulation fits max_memory (late_sim), its result handed back as
                               a simulated winner's: an alternative's plan, weighed by its step */
} plan_best_opts;

void plan_best_opts_default(plan_best_opts *o);

/* The plan for (model, cluster, nranks, costs, opts): as sched_build, with balance auto resolved
 * as above (sopt: how to simulate; its trace setting is ignored: candidates are simulated
 * without one; sopt NULL: sim_opts_default's with `costs`, as `dmuon plan`, `run` and `validate`
 * simulate them; po NULL: defaults). *out owned by the caller (dm_program_free); rep (may be NULL)
 * is the winner's sched_report; pb (may be NULL) tells the candidates. */
int plan_best_build(const dm_model *model, const dm_cluster *cluster, int nranks, const dm_costs *costs,
                    const sched_opts *opts, const sim_opts *sopt, const plan_best_opts *po, dm_program **out,
                    sched_report *rep, plan_best_report *pb, dm_err *err);

/* One line, e.g. "auto: milp (simulated step 834.629 ms; lpt 889.114 ms, -6.13%; lpt-ns
 * 936.506 ms, -10.88%)"; "" when pb->n is 0. Returns buf. */
char *plan_best_describe(const plan_best_report *pb, char *buf, size_t size);

/* The candidates as a table ("# candidate ..." header, one row each), for `dmuon plan`. */
void plan_best_print(FILE *f, const plan_best_report *pb);

#endif
