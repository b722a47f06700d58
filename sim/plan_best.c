/* plan_best.c: --balance auto: build the candidate plans, simulate them, keep the fastest
 * (plan_best.h). */
#include "plan_best.h"

#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "sim_mem.h"

void plan_progress_say(plan_progress *pp, const char *what, const char *fmt, ...)
{
    if (!pp || !pp->f) return;
    char msg[160];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    char line[256];
    snprintf(line, sizeof line, "%s %.1f s: %s%s%s", pp->name, sched_wall_s() - pp->t0, what ? what : "",
             what && *what ? ": " : "", msg);
    fprintf(pp->f, "\r%-100.100s", line);
    fflush(pp->f);
    pp->shown++;
}

void plan_progress_end(plan_progress *pp)
{
    if (!pp || !pp->f || !pp->shown) return;
    if (isatty(fileno(pp->f))) fprintf(pp->f, "\r%100s\r", "");
    else fprintf(pp->f, "\n");
    fflush(pp->f);
    pp->shown = 0;
}

/* The progress line of po's planning (its alternative named first) */
#define SAY(po, ...) plan_progress_say((po)->progress, (po)->progress_what, __VA_ARGS__)

void plan_best_opts_default(plan_best_opts *o)
{
    o->sim_budget_s = 5;
    o->max_memory = -1;
    o->winner_result = NULL;
    o->no_unsplit = 0;
    o->stop_us = 0;
    o->stop_ops = PLAN_BEST_STOP_OPS;
    o->sim_winner = 0;
    o->late_budget_s = 10;
    o->progress = NULL;
    o->progress_what = NULL;
}

/* The smaller of two bounds, each 0 when none (0: none). */
static double tighter(double a, double b) { return a > 0 && b > 0 ? (a < b ? a : b) : a > 0 ? a : b; }

/* The stop of a simulation of `ops` ops weighed against steps best_us and outer_us (each 0 when
 * none): the tighter of them; 0 (run it whole) for a program under po's stop_ops. */
static double stop_at(const plan_best_opts *po, int64_t ops, double best_us, double outer_us)
{
    return ops < po->stop_ops ? 0 : tighter(best_us, outer_us);
}


/* Candidate c's program simulated (so, without a trace) with stop_us as its stop: its step,
 * exposed communication, stop and time into c, the result into *res. */
static int sim_candidate(plan_cand *c, const dm_program *prog, const dm_cluster *cluster, const sim_opts *so,
                         double stop_us, sim_result **res, dm_err *err)
{
    sim_opts o = *so;
    o.stop_us = stop_us;
    double t0 = sched_wall_s();
    if (sim_run(prog, cluster, &o, res, err)) return -1;
    c->sim_s += sched_wall_s() - t0;
    c->simulated = 1;
    c->step_us = (*res)->step_us;
    c->exposed_comm_us = (*res)->exposed_comm_us;
    c->stopped = (*res)->stopped;
    return 0;
}

/* The alternative (alt, its report and simulation, all taken) in the winner's places. */
static void take_alt(plan_cand *c, dm_program **prog, sched_report *rep, sim_result **res, dm_program *alt,
                     sched_report *arep, sim_result *ar)
{
    dm_program_free(*prog);
    *prog = alt;
    sched_report_free(rep);
    *rep = *arep;
    sim_result_free(*res);
    *res = ar;
    c->same_as = -1;
    c->objective_only = 0;
    c->step_us = ar->step_us;
    c->exposed_comm_us = ar->exposed_comm_us;
    c->ops = dm_program_ops(alt);
}

/* An alternative plan (alt, its report and simulation, all taken) against the winner's (prog, rep,
 * res of candidate c): the faster kept in the winner's places, the other freed; 1 when alt won. A
 * simulation stopped past a bound (sim_opts.stop_us) never wins: its step is only a lower bound
 * (under an outer plan's bound, below the winner's own step, it may be smaller than that). */
static int keep_faster(plan_cand *c, dm_program **prog, sched_report *rep, sim_result **res, dm_program *alt,
                       sched_report *arep, sim_result *ar)
{
    if (ar->stopped || !(ar->step_us < c->step_us)) {
        dm_program_free(alt);
        sched_report_free(arep);
        sim_result_free(ar);
        return 0;
    }
    take_alt(c, prog, rep, res, alt, arep, ar);
    return 1;
}

/* The program of options o built on the assignment a that an earlier build of the same problem
 * made and reported in *rep (not solved again; that report's solver findings carried over): *prog
 * and *rep replaced. */
static int build_on_assignment(const dm_model *model, const dm_cluster *cluster, int nranks, const dm_costs *costs,
                               sched_opts *o, const sched_assign *a, dm_program **prog, sched_report *rep, dm_err *err)
{
    sched_report first = *rep;
    memset(rep, 0, sizeof *rep);
    o->assign_in = a;
    o->assign_in_rep = &first;
    dm_program_free(*prog);
    *prog = NULL;
    int rc = sched_build(model, cluster, nranks, costs, o, prog, rep, err);
    sched_report_free(&first);
    return rc;
}

/* A winner weighed by its objective alone, not simulated yet (try_alternative): its options and
 * assignment (simulate_winner builds its program), and where to say whether it was simulated */
typedef struct winner_late {
    const sched_opts *opts;
    sched_assign *asg;
    int *simulated;
    double *step_us; /* its simulated step (a bound when its simulation stopped: *stopped 1) */
    int *stopped;
    double ops;      /* its program's ops, estimated from its assignment */
    int *skipped;    /* 1: not built nor simulated, ops over the budget (plan_best_opts.late_budget_s) */
} winner_late;

static int simulate_winner(const dm_model *model, const dm_cluster *cluster, int nranks, const dm_costs *costs,
                           const sched_opts *opts, const sim_opts *sopt, const plan_best_opts *po, plan_cand *c,
                           sched_assign *asg, dm_program **prog, sched_report *rep, sim_result **res, dm_err *err);

/* An alternative to the winner (candidate c: its program, report and simulation in *prog, *rep,
 * *res; what names it on the progress line): the plan of options o, built by plan_best_build (its
 * own candidates), simulated, and the faster of the two kept in the winner's places. 1 when both were simulated (*alt_us: the
 * alternative's step; *won: 1 when it is the plan now; *wpb, when not NULL: its report), 0 when
 * not (not simulated, or the same ops: nothing to weigh), -1 on error. Its simulations stop past
 * the winner's step (plan_best_opts.stop_us): *alt_stopped 1 when the alternative's did (*alt_us
 * then a lower bound). With wl (a winner weighed by its objective, not simulated): the alternative
 * first, then the winner built and simulated with the alternative's step as its stop (the
 * alternative is the smaller program where the winner's was too large to weigh by simulation). */
static int try_alternative(const dm_model *model, const dm_cluster *cluster, int nranks, const dm_costs *costs,
                           const sched_opts *o, const sim_opts *sopt, const plan_best_opts *po, const char *what,
                           plan_cand *c, dm_program **prog, sched_report *rep, sim_result **res, const winner_late *wl,
                           plan_best_report *wpb, double *alt_us, int *alt_stopped, int *won, dm_err *err)
{
    plan_best_opts wpo = *po;
    wpo.progress_what = what; /* (what the progress line names) */
    wpo.stop_us = wl ? po->stop_us : tighter(c->step_us, po->stop_us);
    plan_best_report local;
    dm_program *alt = NULL;
    sched_report arep;
    sim_result *ar = NULL;
    if (!wpb) wpb = &local;
    memset(&arep, 0, sizeof arep);
    wpo.winner_result = &ar;
    wpo.sim_winner = 1; /* weighed by its step even when its candidates were weighed by the objective */
    if (plan_best_build(model, cluster, nranks, costs, o, sopt, &wpo, &alt, &arep, wpb, err)) return -1;
    int weigh = (wpb->by_sim || wpb->late_sim) && ar, rc = 0;
    if (weigh && wl && !ar->stopped && wl->ops * PLAN_BEST_SIM_S_PER_OP > po->late_budget_s) {
        /* the winner's program too large to weigh: the alternative, simulated, is the plan */
        *wl->skipped = 1;
        *alt_us = ar->step_us;
        *alt_stopped = 0;
        *won = 1;
        take_alt(c, prog, rep, res, alt, &arep, ar);
        return 1;
    }
    if (weigh && wl) { /* the winner now, stopped past the alternative's step */
        plan_best_opts spo = *po;
        spo.stop_us = tighter(ar->stopped ? 0 : ar->step_us, po->stop_us);
        int t = simulate_winner(model, cluster, nranks, costs, wl->opts, sopt, &spo, c, wl->asg, prog, rep, res, err);
        if (t > 0) *wl->simulated = 1, *wl->step_us = c->step_us, *wl->stopped = c->stopped;
        weigh = t > 0, rc = t < 0 ? -1 : 0;
    }
    if (!weigh || !*prog || dm_program_same_ops(alt, *prog)) {
        dm_program_free(alt);
        sched_report_free(&arep);
        sim_result_free(ar);
        return rc;
    }
    *alt_us = ar->step_us;
    *alt_stopped = ar->stopped;
    *won = keep_faster(c, prog, rep, res, alt, &arep, ar);
    return 1;
}

/* The program of a winner weighed by its objective alone (c->objective_only: its assignment made,
 * no program), built on that assignment (not solved again) only if it fits the memory limit (the
 * pre-check left it to here): else the message of sim_mem_check_plan from the assignment's
 * estimate, -1. */
static int build_winner(const dm_model *model, const dm_cluster *cluster, int nranks, const dm_costs *costs,
                        const sched_opts *opts, const plan_best_opts *po, plan_cand *c, sched_assign *asg,
                        dm_program **prog, sched_report *rep, dm_err *err)
{
    sched_opts o = *opts;
    o.balance = c->balance;
    o.comm_weight = c->comm_weight;
    o.max_ops = sim_mem_plan_checked_later(opts) ? sim_mem_max_ops(nranks, po->max_memory) : 0;
    double t0 = sched_wall_s();
    if (build_on_assignment(model, cluster, nranks, costs, &o, asg, prog, rep, err)) return -1;
    if (rep->cut) {
        sim_mem_size s = {0};
        char what[256];
        s.ranks = s.lists = nranks;
        s.ops = s.deps = (int64_t)rep->ops_estimate;
        snprintf(what, sizeof what, "%s dmuon on %d GPUs (%s's plan, %d pairs)", model->name, nranks, c->name,
                 rep->pairs);
        int64_t lim = po->max_memory < 0 ? sim_mem_default_limit() : po->max_memory;
        if (sim_mem_check(&s, SIM_MEM_PROGRAM | SIM_MEM_SIM, lim, what, err) == 0)
            dm_err_set(err, "the simulation of %s would hold about %.3g ops: over the memory limit", what,
                       rep->ops_estimate);
        return -1;
    }
    c->plan_s += sched_wall_s() - t0;
    c->ops = dm_program_ops(*prog);
    return 0;
}

/* A winner weighed by its objective, simulated after (plan_best_report.late_sim): built (as
 * build_winner) and, when its simulation fits the memory limit, simulated as the candidates are
 * (sopt's, no trace; with po's stop); 1 when simulated, 0 when it would not fit, -1 on error. */
static int simulate_winner(const dm_model *model, const dm_cluster *cluster, int nranks, const dm_costs *costs,
                           const sched_opts *opts, const sim_opts *sopt, const plan_best_opts *po, plan_cand *c,
                           sched_assign *asg, dm_program **prog, sched_report *rep, sim_result **res, dm_err *err)
{
    dm_err merr;
    if (c->objective_only && c->ops == 0) {
        SAY(po, "%s: building the plan its objective chose", c->name);
        if (build_winner(model, cluster, nranks, costs, opts, po, c, asg, prog, rep, err)) return -1;
    }
    if (sim_mem_check_program(*prog, cluster, 0, po->max_memory, &merr)) return 0;
    SAY(po, "%s: simulating its %.3g ops", c->name, (double)c->ops);
    sim_opts so = *sopt;
    so.record_trace = 0;
    return sim_candidate(c, *prog, cluster, &so, stop_at(po, c->ops, 0, po->stop_us), res, err) ? -1 : 1;
}

/* A candidate's built program fits the simulation's budget (its ops) and the memory limit; else
 * pb->why says why, 0. */
static int cand_fits(plan_best_report *pb, const plan_cand *c, const dm_program *prog, const dm_cluster *cluster,
                     const plan_best_opts *po)
{
    dm_err merr;
    if (c->ops * PLAN_BEST_SIM_S_PER_OP > po->sim_budget_s) {
        snprintf(pb->why, sizeof pb->why, "%s's simulation would take about %.1f s (%lld ops), over the %.1f s budget",
                 c->name, c->ops * PLAN_BEST_SIM_S_PER_OP, (long long)c->ops, po->sim_budget_s);
        return 0;
    }
    if (sim_mem_check_program(prog, cluster, 0, po->max_memory, &merr)) {
        snprintf(pb->why, sizeof pb->why, "%.150s", merr.msg);
        return 0;
    }
    return 1;
}

int plan_best_build(const dm_model *model, const dm_cluster *cluster, int nranks, const dm_costs *costs,
                    const sched_opts *opts, const sim_opts *sopt, const plan_best_opts *po, dm_program **out,
                    sched_report *rep, plan_best_report *pb, dm_err *err)
{
    plan_best_report local;
    plan_best_opts dpo;
    sim_opts dso;
    if (!pb) pb = &local;
    memset(pb, 0, sizeof *pb);
    if (!po) {
        plan_best_opts_default(&dpo);
        po = &dpo;
    }
    if (!sopt) {
        sim_opts_default(&dso);
        dso.costs = costs;
        sopt = &dso;
    }
    *out = NULL;
    if (po->winner_result) *po->winner_result = NULL;
    if (opts->balance != SCHED_BAL_AUTO || opts->strategy != SCHED_DMUON)
        return sched_build(model, cluster, nranks, costs, opts, out, rep, err);
    static const struct {
        const char *name;
        sched_balance balance;
        int ns_only;
    } kinds[PLAN_BEST_MAX] = {{"lpt", SCHED_BAL_LPT, 0}, {"milp", SCHED_BAL_MILP, 0}, {"lpt-ns", SCHED_BAL_LPT, 1}};
    dm_program *progs[PLAN_BEST_MAX] = {NULL};
    sched_assign asg[PLAN_BEST_MAX]; /* the candidates' owner assignments (built on for the winner) */
    memset(asg, 0, sizeof asg);
    sim_result *res[PLAN_BEST_MAX] = {NULL}; /* the candidates' simulations */
    sched_report reps[PLAN_BEST_MAX];
    memset(reps, 0, sizeof reps);
    int rc = -1, n = 0, n_cand = 0, sim_all = 1, slot[PLAN_BEST_MAX];
    for (int k = 0; k < PLAN_BEST_MAX; k++) /* the candidates' places in the report */
        slot[k] = kinds[k].ns_only && opts->comm_weight == 0 ? -1 : n_cand++; /* lpt-ns: the same plan as lpt */
    /* Every candidate's owners assigned first, no program built. A plan's ops are estimated from
     * its assignment (build.c: pairs x ranks x collectives per pair): when any is
     * over the simulation budget none is built and all are weighed by their objectives (the
     * winner's program built after), where building the ones that fit before finding one over
     * cost seconds at 4096 ranks (Moonlight-16B --hsdp --zero 3: lpt-ns's and lpt's programs, 4 s,
     * then milp's over). Then each program is built on its assignment (not solved again; milp's is
     * lpt's program when their assignments are the same), the largest estimate first, and
     * counted: once one is too large (an estimate leaves out most compute ops) the others are
     * weighed by their assignments. */
    double over = 0;
    for (int k = 0; k < PLAN_BEST_MAX; k++) {
        if (slot[k] < 0) continue;
        sched_opts o = *opts;
        o.balance = kinds[k].balance;
        if (kinds[k].ns_only) o.comm_weight = 0;
        n = slot[k];
        plan_cand *c = &pb->cand[n];
        c->same_as = -1;
        c->name = kinds[k].name;
        c->balance = o.balance;
        c->comm_weight = o.comm_weight;
        c->objective_only = o.objective_only = 1;
        o.assign_out = &asg[n];
        SAY(po, "%s: assigning owners", c->name);
        double t0 = sched_wall_s();
        if (sched_build(model, cluster, nranks, costs, &o, &progs[n], &reps[n], err)) goto done;
        c->plan_s = sched_wall_s() - t0;
        c->objective_us = reps[n].objective_us;
        c->ns_max_us = reps[n].max_us;
        c->pairs = reps[n].pairs;
        snprintf(c->status, sizeof c->status, "%s", reps[n].solver_status);
        double est = reps[n].ops_estimate; /* (the largest over the budget named) */
        if (est * PLAN_BEST_SIM_S_PER_OP > po->sim_budget_s && est > over) {
            over = est;
            char node[48] = "";
            if (reps[n].ops_node_compute > 0) /* hierarchical: every node's NS and updates */
                snprintf(node, sizeof node, " + %.3g in the nodes' NS", reps[n].ops_node_compute);
            snprintf(pb->why, sizeof pb->why, "%s's program would hold about %.3g ops (%d pairs x %d ranks x %g%s), "
                     "its simulation about %.1f s, over the %.1f s budget", c->name, reps[n].ops_estimate, reps[n].pairs,
                     nranks, reps[n].ops_per_pair_rank, node, reps[n].ops_estimate * PLAN_BEST_SIM_S_PER_OP,
                     po->sim_budget_s);
            sim_all = 0;
        }
    }
    int order[PLAN_BEST_MAX], no = 0; /* the largest estimate first */
    for (int k = 0; k < PLAN_BEST_MAX; k++) {
        if (slot[k] < 0) continue;
        int j = no++;
        for (; j > 0 && reps[slot[k]].ops_estimate > reps[slot[order[j - 1]]].ops_estimate; j--)
            order[j] = order[j - 1];
        order[j] = k;
    }
    for (int i = 0; i < no && sim_all; i++) { /* the programs, on the assignments */
        int k = order[i];
        n = slot[k];
        plan_cand *c = &pb->cand[n];
        double t0 = sched_wall_s();
        /* an assignment an earlier candidate's program was built on (milp that kept lpt's, lpt-ns
         * where the comm terms changed nothing): the same program (the options beside the
         * assignment, balance and comm weight, build nothing else), not built again */
        int same = -1;
        for (int j = 0; j < n && same < 0; j++)
            if (progs[j] && pb->cand[j].same_as < 0 && sched_assign_same(&asg[n], &asg[j])) same = j;
        if (same >= 0) {
            c->same_as = same;
            c->ops = pb->cand[same].ops;
        } else {
            sched_opts o = *opts;
            o.balance = c->balance;
            o.comm_weight = c->comm_weight;
            SAY(po, "%s: building its program", c->name);
            if (build_on_assignment(model, cluster, nranks, costs, &o, &asg[n], &progs[n], &reps[n], err)) goto done;
            c->ops = dm_program_ops(progs[n]);
        }
        c->plan_s += sched_wall_s() - t0;
        c->objective_only = 0;
        if (c->same_as < 0 && !cand_fits(pb, c, progs[n], cluster, po)) sim_all = 0;
    }
    n = pb->n = n_cand;
    int win = 0;
    if (sim_all) {
        sim_opts so = *sopt;
        so.record_trace = 0;
        int have = 0; /* a candidate simulated: cand[win] holds the best step so far */
        for (int k = 0; k < n; k++) {
            /* a candidate whose ops are an earlier one's (MILP that kept the heuristic's
             * assignment, a comm weight that changed nothing) simulates to the same step */
            int same = pb->cand[k].same_as; /* (milp's: set when it was made) */
            for (int j = 0; j < k && same < 0; j++)
                if (progs[j] && progs[k] && dm_program_same_ops(progs[j], progs[k])) same = j;
            if (same >= 0) {
                pb->cand[k].simulated = 1;
                pb->cand[k].same_as = same;
                pb->cand[k].step_us = pb->cand[same].step_us;
                pb->cand[k].exposed_comm_us = pb->cand[same].exposed_comm_us;
                pb->cand[k].stopped = pb->cand[same].stopped;
                continue;
            }
            SAY(po, "%s: simulating its %.3g ops", pb->cand[k].name, (double)pb->cand[k].ops);
            if (sim_candidate(&pb->cand[k], progs[k], cluster, &so,
                              stop_at(po, pb->cand[k].ops, have ? pb->cand[win].step_us : 0, po->stop_us), &res[k], err))
                goto done;
            int was = win;
            if (!have || pb->cand[k].step_us < pb->cand[win].step_us) win = k;
            have = 1;
            /* only the winner's simulation is kept (a candidate with an earlier one's ops, not
             * simulated, never wins: its step equals that one's) */
            int drop = win != k ? k : was != k ? was : -1;
            if (drop >= 0) {
                sim_result_free(res[drop]);
                res[drop] = NULL;
            }
        }
        pb->by_sim = 1;
        /* the losers' programs go now, before the alternatives below build theirs (at 4096 ranks
         * a program is hundreds of MB: the builds after take their memory back, not fresh pages) */
        for (int k = 0; k < n; k++)
            if (k != win) {
                dm_program_free(progs[k]);
                progs[k] = NULL;
            }
    } else { /* the objective decides between the communication-aware plans */
        for (int k = 0; k < n; k++)
            if (pb->cand[k].comm_weight == opts->comm_weight && pb->cand[k].objective_us < pb->cand[win].objective_us) win = k;
    }
    pb->winner = win;
    /* weighed by the objective, the winner simulated after when a step must weigh it: as an
     * alternative's plan (try_alternative); HSDP with --hsdp-muon auto below, against its Muon
     * pairs over all ranks */
    if (!pb->by_sim && po->sim_winner) {
        int t = simulate_winner(model, cluster, nranks, costs, opts, sopt, po, &pb->cand[win], &asg[win], &progs[win],
                                &reps[win], &res[win], err);
        if (t < 0) goto done;
        pb->late_sim = t;
    }
    /* HSDP with --hsdp-adamw auto: the collective model, pricing each collective alone, put some
     * layers' AdamW parameters on all ranks (adamw_world, build.c); their reduce-scatters then
     * share the NICs with the replicas' reduces. The same assignment with every layer's in the
     * shard groups is simulated too and the faster kept. With the Muon pairs over all ranks
     * (hsdp_muon world) the alternative is every layer's over all ranks: the flat plan's. */
    int mw = opts->hsdp_muon == SCHED_HSDP_MUON_WORLD;
    if (pb->by_sim && opts->hsdp && opts->hsdp_adamw == SCHED_HSDP_ADAMW_AUTO && (mw || reps[win].hsdp_adamw_world > 0)) {
        sched_opts o = *opts;
        o.balance = pb->cand[win].balance;
        o.comm_weight = pb->cand[win].comm_weight;
        o.hsdp_adamw = mw ? SCHED_HSDP_ADAMW_WORLD : SCHED_HSDP_ADAMW_REPLICAS;
        o.assign_in = &asg[win];
        o.assign_in_rep = &reps[win];
        dm_program *alt = NULL;
        sched_report arep;
        sim_result *ar = NULL;
        sim_opts so = *sopt;
        so.record_trace = 0;
        memset(&arep, 0, sizeof arep);
        double t0 = sched_wall_s();
        const char *aw = mw ? "AdamW over all ranks" : "AdamW in the shard groups";
        SAY(po, "%s: building", aw);
        if (sched_build(model, cluster, nranks, costs, &o, &alt, &arep, err)) {
            sched_report_free(&arep);
            goto done;
        }
        if (dm_program_same_ops(alt, progs[win])) { /* every layer's there already (or one replica group) */
            dm_program_free(alt);
            sched_report_free(&arep);
            goto adamw_done;
        }
        int64_t aops = dm_program_ops(alt);
        so.stop_us = stop_at(po, aops, pb->cand[win].step_us, po->stop_us);
        SAY(po, "%s: simulating %.3g ops", aw, (double)aops);
        if (sim_run(alt, cluster, &so, &ar, err)) {
            dm_program_free(alt);
            sched_report_free(&arep);
            goto done;
        }
        pb->adamw_replicas_stopped = ar->stopped;
        pb->adamw_alt_world = mw;
        pb->adamw_world_layers = reps[win].hsdp_adamw_world;
        pb->adamw_auto_us = pb->cand[win].step_us;
        pb->adamw_replicas_us = ar->step_us;
        pb->cand[win].sim_s += sched_wall_s() - t0;
        pb->adamw_replicas_won = keep_faster(&pb->cand[win], &progs[win], &reps[win], &res[win], alt, &arep, ar);
    }
adamw_done:
    /* HSDP with --hsdp-muon auto: the (layer, owner) pairs' three stages through the shard groups
     * and columns against one reduce and one broadcast over all ranks each (the flat plan's, whose
     * rings use both directions of every link at once), planned as this function plans (its own
     * candidates, on the flat plan's communication terms); both simulated, the faster kept
     * (traces/plan/hsdp-map-2026-12-04: the stages lose on models of many small matrices per
     * layer) */
    if (opts->hsdp && opts->hsdp_muon == SCHED_HSDP_MUON_AUTO) {
        /* weighed by the objective, not simulated: the world's plan first, then this winner
         * simulated with its step as the stop (at 4096 GPUs Moonlight-16B's HSDP stages' plan
         * was weighed by the objective alone, 2968 ms; the world's pairs, never tried then,
         * 1067 ms) */
        double before = pb->cand[win].step_us, t0 = sched_wall_s();
        int late = !pb->by_sim && !pb->late_sim;
        if (late) { /* its collectives as build.c estimates them from its assignment */
            pb->late_ops = reps[win].ops_estimate;
            pb->late_budget_s = po->late_budget_s;
        }
        const winner_late wl = {opts, &asg[win], &pb->late_sim, &before, &pb->late_stopped, pb->late_ops,
                                &pb->late_skipped};
        sched_opts o = *opts;
        o.hsdp_muon = SCHED_HSDP_MUON_WORLD; /* (the AdamW parameters as --hsdp-adamw says) */
        plan_best_report wpb;
        int t = try_alternative(model, cluster, nranks, costs, &o, sopt, po, "Muon pairs over all ranks",
                                &pb->cand[win], &progs[win], &reps[win], &res[win], late ? &wl : NULL, &wpb,
                                &pb->muon_world_us, &pb->muon_world_stopped,
                                &pb->muon_world_won, err);
        if (t < 0) goto done;
        if (t) {
            pb->muon_tried = 1;
            pb->muon_replicas_us = before;
            snprintf(pb->muon_world_balance, sizeof pb->muon_world_balance, "%s", wpb.cand[wpb.winner].name);
            pb->muon_world_flat = wpb.adamw_alt_world && wpb.adamw_replicas_won;
            pb->cand[win].sim_s += sched_wall_s() - t0;
        }
    }
    /* --ns-split: the plan without splits beside it (the split rule weighs NS load bounds, not
     * the step: a split's gram all-reduces can cost more than its balance saves), planned by its own
     * candidates; both simulated, the faster kept, so a split plan never simulates slower */
    if (pb->by_sim && opts->ns_split > 1 && !po->no_unsplit && !opts->hierarchical && !opts->hsdp &&
        opts->strategy == SCHED_DMUON) {
        sched_opts o = *opts;
        o.ns_split = 0;
        double before = pb->cand[win].step_us, t0 = sched_wall_s();
        int t = try_alternative(model, cluster, nranks, costs, &o, sopt, po, "the plan without --ns-split",
                                &pb->cand[win], &progs[win], &reps[win], &res[win], NULL, NULL, &pb->unsplit_us,
                                &pb->unsplit_stopped, &pb->unsplit_won, err);
        if (t < 0) goto done;
        if (t) {
            pb->split_tried = 1;
            pb->split_us = before;
            pb->cand[win].sim_s += sched_wall_s() - t0;
        }
    }
    /* --ns-split auto: the plan above has no splits (sched_build plans none for auto); each P of
     * 2, 4, ... up to a node's GPUs planned (its own candidates) and simulated beside it, the
     * fastest kept */
    if (pb->by_sim && opts->ns_split == SCHED_NS_SPLIT_AUTO && !opts->hierarchical && !opts->hsdp &&
        opts->strategy == SCHED_DMUON) {
        int gpn = opts->gpus_per_node > 0 ? opts->gpus_per_node : cluster->gpus_per_node;
        if (gpn > nranks) gpn = nranks;
        pb->unsplit_us = pb->cand[win].step_us;
        plan_best_opts apo = *po;
        apo.no_unsplit = 1;
        double t0 = sched_wall_s();
        for (int P = 2; P <= gpn && pb->n_split_p < PLAN_BEST_SPLIT_PS; P *= 2) {
            sched_opts o = *opts;
            o.ns_split = P;
            double us = 0;
            char what[40];
            snprintf(what, sizeof what, "--ns-split %d", P);
            int won = 0, stopped = 0, t = try_alternative(model, cluster, nranks, costs, &o, sopt, &apo, what,
                                                          &pb->cand[win], &progs[win], &reps[win], &res[win], NULL,
                                                          NULL, &us, &stopped, &won, err);
            if (t < 0) goto done;
            pb->split_p[pb->n_split_p] = P;
            pb->split_p_stopped[pb->n_split_p] = t && stopped;
            pb->split_p_us[pb->n_split_p++] = t ? us : 0;
            if (won) pb->split_kept = P;
        }
        pb->cand[win].sim_s += sched_wall_s() - t0;
    }
    if (pb->cand[win].objective_only && pb->cand[win].ops == 0) { /* (not built yet: simulate_winner may have) */
        SAY(po, "%s: building the plan its objective chose", pb->cand[win].name);
        if (build_winner(model, cluster, nranks, costs, opts, po, &pb->cand[win], &asg[win], &progs[win], &reps[win],
                         err))
            goto done;
    }
    if ((pb->by_sim || pb->late_sim || pb->late_skipped) && po->winner_result) { /* its simulation, or that of the candidate with its ops */
        int s = pb->cand[win].same_as >= 0 ? pb->cand[win].same_as : win;
        *po->winner_result = res[s];
        res[s] = NULL;
    }
    *out = progs[win];
    progs[win] = NULL;
    if (rep) {
        *rep = reps[win];
        memset(&reps[win], 0, sizeof reps[win]);
    }
    rc = 0;
done:
    for (int k = 0; k < PLAN_BEST_MAX; k++) {
        dm_program_free(progs[k]);
        sim_result_free(res[k]);
        sched_report_free(&reps[k]);
        sched_assign_free(&asg[k]);
    }
    if (rc) memset(pb, 0, sizeof *pb);
    if (rc && po->winner_result) {
        sim_result_free(*po->winner_result);
        *po->winner_result = NULL;
    }
    return rc;
}

char *plan_best_describe(const plan_best_report *pb, char *buf, size_t size)
{
    if (size) buf[0] = 0;
    if (!pb || pb->n == 0 || !size) return buf;
    const plan_cand *w = &pb->cand[pb->winner];
    size_t len = 0;
#define ADD(...)                                                                                   \
    do {                                                                                           \
        if (len < size) {                                                                          \
            int k_ = snprintf(buf + len, size - len, __VA_ARGS__);                                 \
            len += k_ > 0 ? (size_t)k_ : 0;                                                        \
        }                                                                                          \
    } while (0)
    if (pb->by_sim && pb->muon_world_won) { /* the plan is the world's: HSDP's stages' candidates after it */
        ADD("auto: %s with HSDP's Muon matrices over all ranks, as the flat plan%s (simulated step %.3f ms); with "
            "their stages through the shard groups and columns:", pb->muon_world_balance,
            pb->muon_world_flat ? ", and every layer's AdamW parameters too" : "", pb->muon_world_us / 1e3);
        for (int k = 0; k < pb->n; k++)
            ADD("%s %s %s%.3f ms", k ? "," : "", pb->cand[k].name, k != pb->winner && pb->cand[k].stopped ? "over " : "",
                (k == pb->winner ? pb->muon_replicas_us : pb->cand[k].step_us) / 1e3);
    } else if (pb->by_sim) {
        ADD("auto: %s (simulated step %.3f ms", w->name, w->step_us / 1e3);
        for (int k = 0; k < pb->n; k++)
            if (k != pb->winner && pb->cand[k].stopped) /* its simulation stopped past the winner's */
                ADD("; %s over %.3f ms", pb->cand[k].name, pb->cand[k].step_us / 1e3);
            else if (k != pb->winner)
                ADD("; %s %.3f ms, %+.2f%%", pb->cand[k].name, pb->cand[k].step_us / 1e3,
                    100 * (w->step_us / pb->cand[k].step_us - 1));
        ADD(")");
        if (pb->adamw_world_layers || pb->adamw_alt_world) /* the alternative simulated */
            ADD("; HSDP's AdamW parameters %s (%d layer%s over all ranks by the collective model: %.3f ms; every "
                "layer's %s: %s%.3f ms)",
                pb->adamw_replicas_won ? (pb->adamw_alt_world ? "over all ranks" : "in the shard groups") : "per layer",
                pb->adamw_world_layers, pb->adamw_world_layers == 1 ? "" : "s", pb->adamw_auto_us / 1e3,
                pb->adamw_alt_world ? "over all ranks" : "in the shard groups", pb->adamw_replicas_stopped ? "over " : "",
                pb->adamw_replicas_us / 1e3);
        if (pb->muon_tried)
            ADD("; HSDP's Muon matrices in its stages (over all ranks, as the flat plan (%s): %s%.3f ms)",
                pb->muon_world_balance, pb->muon_world_stopped ? "over " : "", pb->muon_world_us / 1e3);
        if (pb->n_split_p) {
            ADD("; --ns-split auto: ");
            if (pb->split_kept) ADD("%d kept (none %.3f ms", pb->split_kept, pb->unsplit_us / 1e3);
            else ADD("none kept (");
            for (int k = 0, first = !pb->split_kept; k < pb->n_split_p; k++, first = 0)
                if (pb->split_p_us[k] > 0)
                    ADD("%s%d %s%.3f ms", first ? "" : ", ", pb->split_p[k], pb->split_p_stopped[k] ? "over " : "",
                        pb->split_p_us[k] / 1e3);
                else ADD("%s%d nothing split", first ? "" : ", ", pb->split_p[k]);
            ADD(")");
        }
        if (pb->split_tried)
            ADD("; --ns-split's %s (%s: %s%.3f ms)", pb->unsplit_won ? "split matrices not kept" : "split matrices kept",
                pb->unsplit_won ? "with them" : "without them", !pb->unsplit_won && pb->unsplit_stopped ? "over " : "",
                (pb->unsplit_won ? pb->split_us : pb->unsplit_us) / 1e3);
    } else {
        ADD("auto: %s by the objective, %.3f ms (not simulated: %s)", w->name, w->objective_us / 1e3, pb->why);
        if (pb->late_sim) /* the winner simulated after, weighed against the Muon pairs over all ranks */
            ADD("; simulated after: %s%.3f ms", pb->late_stopped ? "over " : "",
                (pb->muon_world_won ? pb->muon_replicas_us : w->step_us) / 1e3);
        if (pb->late_skipped)
            ADD("; not simulated after: its program about %.3g ops, its simulation about %.1f s, over the %.1f s "
                "budget of that check; HSDP's Muon matrices over all ranks, as the flat plan (%s): %.3f ms, kept",
                pb->late_ops, pb->late_ops * PLAN_BEST_SIM_S_PER_OP, pb->late_budget_s, pb->muon_world_balance,
                pb->muon_world_us / 1e3);
        if (pb->late_sim && pb->muon_tried)
            ADD("; HSDP's Muon matrices over all ranks, as the flat plan (%s): %s%.3f ms, %s", pb->muon_world_balance,
                pb->muon_world_stopped ? "over " : "", pb->muon_world_us / 1e3,
                pb->muon_world_won ? pb->muon_world_flat ? "kept, and every layer's AdamW parameters too" : "kept"
                                   : "not kept");
    }
#undef ADD
    return buf;
}

void plan_best_print(FILE *f, const plan_best_report *pb)
{
    if (!pb || pb->n == 0) return;
    fprintf(f, "# %-9s %12s %13s %14s %12s %7s %8s %8s  %s\n", "candidate", "step_ms", "exposed_ms", "objective_ms",
            "ns_max_ms", "pairs", "plan_s", "sim_s", "solver");
    for (int k = 0; k < pb->n; k++) {
        const plan_cand *c = &pb->cand[k];
        char over[32];
        snprintf(over, sizeof over, ">%.3f", c->step_us / 1e3); /* stopped past the best step: a lower bound */
        if (c->simulated && c->stopped)
            fprintf(f, "  %-9s %12s %13s", c->name, over, "-");
        else if (c->simulated)
            fprintf(f, "  %-9s %12.3f %13.3f", c->name, c->step_us / 1e3, c->exposed_comm_us / 1e3);
        else
            fprintf(f, "  %-9s %12s %13s", c->name, "-", "-");
        fprintf(f, " %14.3f %12.3f %7d %8.3f %8.3f  %s%s%s%s\n", c->objective_us / 1e3, c->ns_max_us / 1e3, c->pairs,
                c->plan_s, c->sim_s, c->status, c->same_as >= 0 ? "; the program of " : "",
                c->same_as >= 0 ? pb->cand[c->same_as].name : "", k == pb->winner ? "  <- chosen" : "");
    }
}
