/* sim_report.c: the simulator's reports: the human table (step and its parts, collectives of the
 * critical rank, per-rank NS load, the critical path), the speed line and the JSON object (sim.h). */
#include <math.h>
#include <stdio.h>

#include "json.h"
#include "memory.h"
#include "sim.h"

static void print_sources(FILE *f, const sim_result *r)
{
    static const dm_op_kind order[] = {DM_OP_FORWARD, DM_OP_BACKWARD, DM_OP_NS, DM_OP_MUON_UPDATE, DM_OP_ADAMW,
                                       DM_OP_BROADCAST, DM_OP_REDUCE, DM_OP_ALLREDUCE, DM_OP_ALLGATHER,
                                       DM_OP_REDUCESCATTER};
    fprintf(f, "cost sources:\n");
    for (size_t i = 0; i < sizeof order / sizeof order[0]; i++)
        if (r->cost_src[order[i]][0]) fprintf(f, "  %-14s %s\n", dm_op_kind_name(order[i]), r->cost_src[order[i]]);
    if (r->power_src[0]) fprintf(f, "  %-14s %s\n", "clock", r->power_src);
}

void sim_print_report(FILE *f, const dm_program *p, const sim_result *r)
{
    print_sources(f, r);
    double step = r->step_us;
    if (r->steps > 1)
        fprintf(f, "\nsteps              %d back to back (no barrier between them): the first ended at %.3f ms on rank %d;\n"
                   "                   the step and its phases are the last one's window there (the steady state)\n",
                r->steps, r->first_step_us / 1e3, r->crit_rank);
    fprintf(f, "\nstep time          %10.3f ms\n", step / 1e3);
    fprintf(f, "  forward          %10.3f ms  %5.1f%%   (GPU time on rank %d, the last to finish)\n", r->forward_us / 1e3,
            100 * r->forward_us / step, r->crit_rank);
    fprintf(f, "  backward         %10.3f ms  %5.1f%%\n", r->backward_us / 1e3, 100 * r->backward_us / step);
    fprintf(f, "  optimizer        %10.3f ms  %5.1f%%   (NS, Muon update and AdamW kernels)\n", r->optimizer_us / 1e3,
            100 * r->optimizer_us / step);
    fprintf(f, "  exposed comm     %10.3f ms  %5.1f%%   (GPU idle, waiting on collectives)\n", r->exposed_comm_us / 1e3,
            100 * r->exposed_comm_us / step);
    fprintf(f, "  comm in flight   %10.3f ms  %5.1f%%   (time with a collective running; overlaps compute)\n",
            r->comm_busy_us / 1e3, 100 * r->comm_busy_us / step);
    double mn = INFINITY;
    int busy = 0;
    for (int k = 0; k < r->nranks; k++) {
        if (r->ns_us[k] < mn) mn = r->ns_us[k];
        busy += r->ns_us[k] > 0;
    }
    /* Collectives on the critical rank: how much, how long in flight, how long held waiting. */
    int cnt[DM_OP__COUNT] = {0};
    double mb[DM_OP__COUNT] = {0}, busy_ms[DM_OP__COUNT] = {0}, wait_ms[DM_OP__COUNT] = {0};
    const dm_rank_prog *rp = &p->ranks[r->crit_rank];
    for (int i = 0; i < rp->n_ops; i++) {
        const dm_op *op = &rp->ops[i];
        if (!dm_op_is_collective(op->kind)) continue;
        int g = r->op_off[r->crit_rank] + i;
        cnt[op->kind]++;
        mb[op->kind] += op->bytes / 1e6;
        busy_ms[op->kind] += (r->end_us[g] - r->start_us[g]) / 1e3;
        wait_ms[op->kind] += (r->start_us[g] - r->ready_us[g]) / 1e3;
    }
    fprintf(f, "\ncollectives on rank %d  %6s %12s %12s %14s\n", r->crit_rank, "count", "MB", "in flight ms",
            "wait peers ms");
    for (int k = 0; k < DM_OP__COUNT; k++)
        if (cnt[k])
            fprintf(f, "  %-19s %6d %12.3f %12.3f %14.3f\n", dm_op_kind_name((dm_op_kind)k), cnt[k], mb[k], busy_ms[k],
                    wait_ms[k]);
    fprintf(f, "\nNS load per rank   min %.3f  mean %.3f  max %.3f ms (rank %d); %d of %d ranks run NS; imbalance %.1f%%\n",
            mn / 1e3, r->ns_mean_us / 1e3, r->ns_max_us / 1e3, r->ns_max_rank, busy, r->nranks,
            r->ns_mean_us > 0 ? 100 * (r->ns_max_us / r->ns_mean_us - 1) : 0.0);
    if (r->nranks <= 16) {
        fprintf(f, "  per rank (ms)   ");
        for (int k = 0; k < r->nranks; k++) fprintf(f, " %.3f", r->ns_us[k] / 1e3);
        fprintf(f, "\n");
    }
    fprintf(f, "\ncritical path      %10.3f ms, ending on rank %d\n", r->crit_total_us / 1e3, r->crit_rank);
    fprintf(f, "  %-16s %10s %7s %7s\n", "kind", "ms", "share", "ops");
    for (int i = 0; i < r->n_crit; i++)
        fprintf(f, "  %-16s %10.3f %6.1f%% %7d\n", dm_op_kind_name(r->crit[i].kind), r->crit[i].us / 1e3,
                100 * r->crit[i].us / step, r->crit[i].ops);
    fprintf(f, "  longest ops on it:\n");
    for (int i = 0; i < r->n_top; i++) {
        const sim_path_op *o = &r->top[i];
        const dm_op *op = &p->ranks[o->rank].ops[o->op];
        fprintf(f, "    rank %d op %d %s", o->rank, o->op, dm_op_kind_name(o->kind));
        if (o->layer >= 0) fprintf(f, " layer %d", o->layer);
        if (o->kind == DM_OP_NS) fprintf(f, " %lldx%lld x%d", (long long)op->m, (long long)op->n, op->batch);
        if (dm_op_is_collective(o->kind)) fprintf(f, " %.3f MB over %d ranks", op->bytes / 1e6, p->groups[op->group].n);
        fprintf(f, ": %.3f ms at %.3f ms\n", o->dur_us / 1e3, o->start_us / 1e3);
    }
    sim_links_print(f, &r->links, step);
}

void sim_print_speed(FILE *f, const sim_result *r, double plan_s)
{
    fprintf(f, "\nspeed: simulated %lld ops, %lld events, %lld rate updates in %.3f s wall, %.3f s CPU (%.3g events/s "
               "of CPU); setup %.3f s wall, %.3f s CPU; plan %.3f s wall\n",
            (long long)r->ops, (long long)r->events, (long long)r->rate_updates, r->wall_s, r->cpu_s,
            r->cpu_s > 0 ? r->events / r->cpu_s : 0.0, r->setup_s, r->setup_cpu_s, plan_s);
}

static void json_kv(FILE *f, const char *key, const char *v, int last)
{
    fprintf(f, "  \"%s\": ", key);
    json_write_string(f, v);
    fprintf(f, last ? "\n" : ",\n");
}

void sim_print_json(FILE *f, const dm_program *p, const dm_cluster *c, const dm_costs *costs, const dm_mem_est *mem,
                    const sim_result *r)
{
    fprintf(f, "{\n");
    json_kv(f, "format", "dmuon-sim-1", 0);
    json_kv(f, "model", p->model, 0);
    json_kv(f, "strategy", p->strategy, 0);
    json_kv(f, "options", p->options, 0);
    json_kv(f, "cluster", c->name, 0);
    json_kv(f, "costs", dm_costs_describe(costs), 0);
    fprintf(f, "  \"nranks\": %d,\n  \"tokens\": %lld,\n", p->nranks, (long long)p->tokens);
    if (mem)
        fprintf(f, "  \"memory_peak_bytes\": %.0f,\n  \"memory_rank\": %d,\n  \"gpu_memory_bytes\": %.0f,\n"
                   "  \"memory_fits\": %s,\n",
                mem->total, mem->rank, c->gpu->mem_bytes, dm_mem_fits(mem, c->gpu) ? "true" : "false");
    fprintf(f, "  \"step_us\": %.3f,\n  \"forward_us\": %.3f,\n  \"backward_us\": %.3f,\n  \"optimizer_us\": %.3f,\n"
               "  \"exposed_comm_us\": %.3f,\n  \"comm_busy_us\": %.3f,\n  \"crit_rank\": %d,\n",
            r->step_us, r->forward_us, r->backward_us, r->optimizer_us, r->exposed_comm_us, r->comm_busy_us, r->crit_rank);
    fprintf(f, "  \"ns_us\": [");
    for (int k = 0; k < r->nranks; k++) fprintf(f, "%s%.3f", k ? ", " : "", r->ns_us[k]);
    fprintf(f, "],\n  \"critical_path\": [");
    for (int i = 0; i < r->n_crit; i++)
        fprintf(f, "%s{\"kind\": \"%s\", \"us\": %.3f, \"ops\": %d}", i ? ", " : "", dm_op_kind_name(r->crit[i].kind),
                r->crit[i].us, r->crit[i].ops);
    fprintf(f, "],\n  \"cost_sources\": {");
    int first = 1;
    for (int k = 0; k < DM_OP__COUNT; k++) {
        if (!r->cost_src[k][0]) continue;
        fprintf(f, "%s\"%s\": ", first ? "" : ", ", dm_op_kind_name((dm_op_kind)k));
        json_write_string(f, r->cost_src[k]);
        first = 0;
    }
    if (r->power_src[0]) {
        fprintf(f, "%s\"clock\": ", first ? "" : ", ");
        json_write_string(f, r->power_src);
    }
    fprintf(f, "},\n  \"ops\": %lld,\n  \"events\": %lld,\n  \"sim_wall_s\": %.6f\n}\n", (long long)r->ops,
            (long long)r->events, r->wall_s);
}

