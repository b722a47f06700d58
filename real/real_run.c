/* real_run.c: a run of steps on a created executor (real.h's real_exec_run, `dmuon run`'s loop):
 * resume, steps with the per-step rows gathered to rank 0, checkpoints at their cadence, the
 * means, then the weights files and the trace. Printing is the caller's (a row callback). */
#include "config.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "csvjson.h"
#include "real.h"
#include "real_priv.h"
#include "gpu_api.h"
#include "ns_cuda.h"

/* The GPU backend when every rank has the plug-in with its backend and a usable device. */
real_backend real_backend_auto(MPI_Comm comm)
{
    int mine = 0, all = 0;
    dm_err e;
    const dm_gpu_api *api = dm_gpu_side(&e);
    if (api && api->backend) {
        ns_device_info info;
        mine = api->device_query(&info, &e) == 0;
    }
    MPI_Allreduce(&mine, &all, 1, MPI_INT, MPI_MIN, comm);
    return all ? REAL_BACKEND_GPU : REAL_BACKEND_CPU;
}

int real_main_stack(const dm_model *m)
{
    int best = -1;
    for (int i = 0; i < m->n_stacks; i++) {
        const char *nm = m->stacks[i].name;
        size_t L = strlen(nm);
        if (!strcmp(nm, "layers") || (L > 7 && !strcmp(nm + L - 7, ".layers"))) return i;
        if (m->stacks[i].stream == 0 && (best < 0 || m->stacks[i].layers > m->stacks[best].layers)) best = i;
    }
    return best;
}

int real_exec_layer_means(const real_exec *ex, int stack, double *fwd_us, double *bwd_us, int *n_layers, dm_err *err)
{
    *fwd_us = *bwd_us = 0;
    *n_layers = 0;
    if (stack < 0 || stack >= ex->model->n_stacks) return dm_err_set(err, "no stack %d", stack);
    const dm_stack *st = &ex->model->stacks[stack];
    const dm_rank_prog *rp = &ex->prog->ranks[ex->rank];
    double f = 0, b = 0;
    int nf = 0, nb = 0;
    for (int i = 0; i < rp->n_ops; i++) {
        const dm_op *op = &rp->ops[i];
        if (op->layer < st->first_global || op->layer >= st->first_global + st->layers) continue;
        if (op->kind == DM_OP_FORWARD) f += ex->op_dur[i], nf++;
        if (op->kind == DM_OP_BACKWARD) b += ex->op_dur[i], nb++;
    }
    if (!nf || !nb) return dm_err_set(err, "stack %s has no forward and backward ops on rank %d", st->name, ex->rank);
    *fwd_us = f / nf;
    *bwd_us = b / nb;
    *n_layers = nf < nb ? nf : nb;
    return 0;
}

void real_row_csv_header(FILE *f, const dm_program *p, const char *backend, int64_t tokens)
{
    dm_csv_case(f, "dmuon-run-1", p->model, p->cluster, p->strategy, p->nranks); /* csvjson.h */
    dm_csv_meta(f, "backend", backend);
    dm_csv_meta_int(f, "tokens", (long long)tokens);
    fputs("\nstep,loss,step_ms,forward_ms,backward_ms,optimizer_ms,opt_window_ms,exposed_comm_ms,ns_min_ms,ns_max_ms,"
          "skipped\n", f);
}

void real_row_csv(FILE *f, long step, const real_step_row *w)
{
    fprintf(f, "%ld,%.9g,%.3f,%.3f,%.3f,%.3f,%.3f,%.3f,%.3f,%.3f,%d\n", step, w->loss, w->step_us / 1e3,
            w->forward_us / 1e3, w->backward_us / 1e3, w->optimizer_us / 1e3, w->opt_window_us / 1e3,
            w->exposed_comm_us / 1e3, w->ns_min_us / 1e3, w->ns_max_us / 1e3, w->skipped);
}

/* The weights after the run: saved and/or compared on rank 0. Collective; -1 on every rank. */
static int weights_files(real_exec *ex, const real_run_spec *sp, real_run_result *res, dm_err *err)
{
    float **w = NULL;
    int bad = real_exec_weights(ex, &w, err) < 0;
    if (!bad && ex->rank == 0)
        bad = (sp->save_weights && real_weights_write(sp->save_weights, ex, w, err) < 0) ||
              (sp->check_weights &&
               real_weights_compare(sp->check_weights, ex, w, &res->check_rel, &res->check_worst, err) < 0);
    real_weights_free(w, ex->n_mx);
    return real_agree(ex->comm, bad ? -1 : 0, err);
}

int real_exec_run(real_exec *ex, const real_run_spec *sp, real_run_row_fn row, void *ctx, real_run_result *res,
                  dm_err *err)
{
    memset(res, 0, sizeof *res);
    res->check_worst = -1;
    res->first_step = ex->step;
    double sum[9] = {0};
    /* Diagnostics: DMUON_STEP_GAP_MS=X idles every rank X ms between two steps (after the last
     * one's rows are gathered), so that a probe can see how a step's forward runs when the GPU
     * has cooled from the optimizer phase before it for that long (tools/device-stages.sh gapprobe) */
    const char *gap_env = getenv("DMUON_STEP_GAP_MS");
    double gap_ms = gap_env ? atof(gap_env) : 0;
    for (long s = res->first_step; s < sp->steps; s++) {
        real_step_stats st;
        real_step_row w;
        if (gap_ms > 0 && s > res->first_step) usleep((useconds_t)(gap_ms * 1e3));
        if (real_exec_step(ex, &st, err) < 0 || real_exec_step_row(ex, &st, &w, err) < 0) return -2;
        res->kept += !st.skipped;
        if (sp->ckpt_dir && ((s + 1) % sp->every == 0 || s == sp->steps - 1) && real_exec_save(ex, sp->ckpt_dir, err) < 0)
            return -1;
        if (ex->rank != 0) continue;
        if (row) row(ctx, s, &st, &w);
        if (s > 0 || sp->steps == 1) {
            double v[9] = {w.loss, w.step_us, w.forward_us, w.backward_us, w.optimizer_us, w.opt_window_us,
                           w.exposed_comm_us, w.ns_min_us, w.ns_max_us};
            for (int k = 0; k < 9; k++) sum[k] += v[k];
            res->counted++;
        }
    }
    if (res->counted) {
        double c = res->counted;
        res->mean = (real_step_row){sum[0] / c, sum[1] / c, sum[2] / c, sum[3] / c, sum[4] / c, sum[5] / c, sum[6] / c,
                                    sum[7] / c, sum[8] / c, 0};
    }
    if ((sp->save_weights || sp->check_weights) && weights_files(ex, sp, res, err) < 0) return -1;
    if (sp->trace_path && sp->steps > 0 && real_exec_write_trace(ex, sp->trace_path, err) < 0) return -1;
    return 0;
}
