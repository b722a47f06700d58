/* validate.c: the executor against the simulator on the same plans, and replays of stored
 * measurements (validate.h). */
#include "validate.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "lines.h"
#include "memory.h"
#include "model.h"
#include "outfile.h"
#include "paths.h"
#include "plan_best.h"
#include "program.h"
#include "sched.h"
#include "sim.h"
#include "spawn.h"
#include "trace.h"

/* validate.csv's header: the older one (no tokens column) is read too */
#define REPLAY_HEADER_OLD "case,model,strategy,overlap,gpus,phase,measured_ms,predicted_ms"
#define REPLAY_HEADER "case,model,strategy,overlap,gpus,tokens,phase,measured_ms,predicted_ms"
#define GIB 1073741824.0

int vld_cases(char *const *models, int n_models, const long *tokens, int n_tokens, const long *gpus, int n_gpus,
              char *const *strats, int n_strats, char *const *ovls, int n_ovls, vld_case **out, int *n_out, dm_err *err)
{
    int n = n_models * n_tokens * n_strats * n_ovls * n_gpus, k = 0;
    vld_case *cs = dm_calloc((size_t)n + 1, sizeof *cs, err);
    if (!cs) return -1;
    for (int mi = 0; mi < n_models; mi++)
        for (int t = 0; t < n_tokens; t++)
            for (int g = 0; g < n_gpus; g++)
                for (int s = 0; s < n_strats; s++)
                    for (int o = 0; o < n_ovls; o++) {
                        vld_case *vc = &cs[k++];
                        vc->model = models[mi];
                        vc->strategy = strats[s];
                        vc->overlap = ovls[o];
                        vc->gpus = (int)gpus[g];
                        vc->tokens = tokens[t];
                        /* a model file by its base name without .json */
                        const char *mb = strrchr(models[mi], '/') ? strrchr(models[mi], '/') + 1 : models[mi];
                        int ml = (int)strlen(mb);
                        if (ml > 5 && !strcmp(mb + ml - 5, ".json")) ml -= 5;
                        int w = snprintf(vc->name, sizeof vc->name, "%.*s.%s.%s.%dgpu", ml, mb, strats[s], ovls[o],
                                         vc->gpus);
                        if (n_tokens > 1 && w > 0 && (size_t)w < sizeof vc->name)
                            snprintf(vc->name + w, sizeof vc->name - (size_t)w, ".%ldtok", tokens[t]);
                        for (char *q = vc->name; *q; q++)
                            if (*q == '/' || *q == ':') *q = '_';
                    }
    *out = cs;
    *n_out = n;
    return 0;
}

static int64_t case_tokens(const vld_case *vc, const vld_opts *o) { return vc->tokens > 0 ? vc->tokens : o->tokens; }

int vld_default_plot_case(const vld_case *cs, int n)
{
    int pc = 0;
    for (int i = 0; i < n; i++)
        if (!strcmp(cs[i].strategy, "dmuon") && (!pc || cs[i].gpus > cs[pc - 1].gpus)) pc = i + 1;
    return pc ? pc : 1;
}

/* ---- one case ------------------------------------------------------------------------------ */

/* The simulation of a case's program p with the options' costs, its trace recorded. */
static int sim_case(const dm_program *p, const vld_opts *o, sim_result **sr, dm_err *err)
{
    sim_opts so;
    sim_opts_default(&so);
    so.costs = o->costs;
    so.record_trace = 1;
    return sim_run(p, o->cluster, &so, sr, err);
}

/* Plan one case (*p owned by the caller; NULL on failure) and its per-rank peak memory into *mem
 * (may be NULL). best 1: as `dmuon plan`, `sim` and `run` plan (plan_best_build: --balance auto
 * simulates its candidates and keeps the faster); 0: as the calls made until 2026-12-06 were
 * planned (sched_build: auto as lpt), for a replay that plans such a call again. */
static int plan_case(const vld_case *vc, const vld_opts *o, int best, dm_program **p, dm_mem_est *mem, dm_err *err)
{
    dm_model *m = NULL;
    *p = NULL;
    sched_opts so;
    sched_opts_default(&so);
    so.causal_tile = o->causal_tile;
    so.layer_passes = !o->no_layer_passes;
    char tok[32];
    snprintf(tok, sizeof tok, "%lld", (long long)case_tokens(vc, o));
    int rc = -1;
    if (dm_model_load(vc->model, &m, err) || sched_opts_parse(&so, "strategy", vc->strategy, err) ||
        sched_opts_parse(&so, "overlap", vc->overlap, err) || sched_opts_parse(&so, "tokens", tok, err))
        goto out;
    if ((best ? plan_best_build(m, o->cluster, vc->gpus, o->costs, &so, NULL, NULL, p, NULL, NULL, err)
              : sched_build(m, o->cluster, vc->gpus, o->costs, &so, p, NULL, err)) ||
        (mem && dm_mem_peak(m, *p, NULL, mem, err)))
        goto out;
    rc = 0;
out:
    dm_model_free(m);
    if (rc) {
        dm_program_free(*p);
        *p = NULL;
    }
    return rc;
}

/* 1 when the file at path holds the text (a run's log) */
static int log_says(const char *path, const char *text)
{
    FILE *f = fopen(path, "r");
    char line[1024];
    int found = 0;
    while (f && !found && fgets(line, sizeof line, f)) found = strstr(line, text) != NULL;
    if (f) fclose(f);
    return found;
}

/* The GPU a run's log names ("# gpu: NAME (device ..."), into buf ("" when it names none: the CPU
 * backend). */
static void log_gpu(const char *path, char *buf, size_t size)
{
    FILE *f = fopen(path, "r");
    char line[1024];
    buf[0] = 0;
    while (f && !buf[0] && fgets(line, sizeof line, f)) {
        if (strncmp(line, "# gpu: ", 7)) continue;
        char *end = strstr(line, " (");
        if (!end) end = line + strcspn(line, "\n");
        snprintf(buf, size, "%.*s", (int)(end - (line + 7)), line + 7);
    }
    if (f) fclose(f);
}

/* "does not fit ..." of a case that was not run or ran out of memory, into buf */
static const char *nofit_text(const vld_case *vc, const vld_opts *o, char *buf, size_t size)
{
    if (vc->oom)
        snprintf(buf, size, "does not fit (the run stopped for want of memory, run.log; the GPU estimate: %.1f GiB of "
                 "%.1f on %s)", vc->need_bytes / GIB, o->cluster->gpu->mem_bytes / GIB, o->cluster->gpu->short_name);
    else
        snprintf(buf, size, "does not fit (needs %.1f GiB of %.1f on %s): not run", vc->need_bytes / GIB,
                 o->cluster->gpu->mem_bytes / GIB, o->cluster->gpu->short_name);
    return buf;
}

/* Plan, save, run, simulate, compare one case (*sim_out, *real_out: its traces, owned by the
 * caller). */
static int run_case(vld_case *vc, const vld_opts *o, FILE *out, dm_trace **sim_out, dm_trace **real_out, dm_err *err)
{
    char cdir[4300], prog[4400], real_csv[4400], sim_csv[4400], log[4400];
    snprintf(cdir, sizeof cdir, "%s/%s", o->dir, vc->name);
    if (dm_mkdir_p(cdir, err)) return -1;
    snprintf(prog, sizeof prog, "%s/program.json", cdir);
    snprintf(real_csv, sizeof real_csv, "%s/real.csv", cdir);
    snprintf(sim_csv, sizeof sim_csv, "%s/sim.csv", cdir);
    snprintf(log, sizeof log, "%s/run.log", cdir);
    dm_program *p = NULL;
    sim_result *sr = NULL;
    dm_trace *real = NULL;
    dm_mem_est mem;
    int rc = -1;
    /* the GPU backend's memory, from the estimate, before anything runs */
    if (plan_case(vc, o, 1, &p, &mem, err) || dm_program_save(p, prog, err)) goto out;
    if (!strcmp(o->backend, "gpu") && !dm_mem_fits(&mem, o->cluster->gpu)) {
        vc->nofit = 1;
        vc->need_bytes = mem.total;
        if (o->dry) fprintf(out, "  %s: does not fit (needs %.1f GiB of %.1f on %s): not run\n", vc->name, mem.total / GIB,
                            o->cluster->gpu->mem_bytes / GIB, o->cluster->gpu->short_name);
        rc = 0;
        goto out;
    }
    if (sim_case(p, o, &sr, err)) goto out; /* the program saved, which the run reads */
    snprintf(vc->src[0], sizeof vc->src[0], "%s", sr->cost_src[DM_OP_FORWARD]);
    snprintf(vc->src[1], sizeof vc->src[1], "%s", sr->cost_src[DM_OP_BACKWARD]);
    char np[16], st[16];
    snprintf(np, sizeof np, "%d", vc->gpus);
    snprintf(st, sizeof st, "%ld", o->steps);
    char *const tail[] = {(char *)o->self, "run", "--program", prog, "--model", (char *)vc->model, "--backend",
                          (char *)o->backend, "--steps", st, "--trace", real_csv, NULL};
    char launcher[1024], *argv[64];
    int na = 0;
    snprintf(launcher, sizeof launcher, "%s", o->mpirun);
    if (vc->gpus > 1) {
        na = dm_split_words(launcher, argv, 40);
        argv[na++] = "-np";
        argv[na++] = np;
        argv[na++] = "--oversubscribe";
    }
    for (int i = 0; tail[i]; i++) argv[na++] = tail[i];
    argv[na] = NULL;
    if (o->dry) {
        for (int i = 0; argv[i]; i++) fprintf(out, "%s%s", i ? " " : "  ", argv[i]);
        fprintf(out, "\n");
        rc = 0;
        goto out;
    }
    if (dm_spawn(argv, log, err)) {
        if (log_says(log, DM_NOFIT_WORDS)) { /* within the estimate's error of the GPU's memory, or the CPU's */
            vc->nofit = vc->oom = 1;
            vc->need_bytes = mem.total;
            rc = 0;
        }
        goto out;
    }
    log_gpu(log, vc->device, sizeof vc->device);
    const dm_gpu *g = vc->device[0] ? dm_gpu_find(vc->device) : NULL;
    if (g && strcmp(g->short_name, o->cluster->gpu->short_name)) {
        vc->other_gpu = 1;
        fprintf(stderr, "dmuon validate: %s ran on %s, not the cluster's %s: its comparison is across GPUs\n", vc->name,
                vc->device, o->cluster->gpu->short_name);
    }
    if (dm_trace_read(real_csv, &real, err)) goto out;
    if (dm_trace_write_csv(sr->trace, sim_csv, err)) goto out;
    if (cmp_traces(sr->trace, real, NULL, &vc->r, err)) goto out;
    *sim_out = sr->trace;
    sr->trace = NULL;
    *real_out = real;
    real = NULL;
    vc->ok = 1;
    rc = 0;
out:
    dm_trace_free(real);
    sim_result_free(sr);
    dm_program_free(p);
    return rc;
}

static double phase_err(const cmp_result *r, int p) { return cmp_rel_err(r->sim.us[p], r->real.us[p]); }

/* ---- the whole run ------------------------------------------------------------------------- */

/* The base name of a model argument without .json ("models/x.json" -> "x"), lower case, and
 * the same of a model's display name, to tell whether a case is of the fitted-on model. */
static void model_key(const char *s, char *buf, size_t size)
{
    const char *b = strrchr(s, '/') ? strrchr(s, '/') + 1 : s;
    snprintf(buf, size, "%s", b);
    size_t l = strlen(buf);
    if (l > 5 && !strcmp(buf + l - 5, ".json")) buf[l - 5] = 0;
    for (char *q = buf; *q; q++)
        if (*q >= 'A' && *q <= 'Z') *q = (char)(*q - 'A' + 'a');
}

static int fitted_case(const vld_case *vc, const vld_opts *o)
{
    if (!o->fitted_on || !o->fitted_on[0]) return 0;
    char a[256], b[256];
    model_key(vc->model, a, sizeof a);
    model_key(o->fitted_on, b, sizeof b);
    return !strcmp(a, b);
}

/* One error cell: the phase's error, in brackets when it is not held (under 1% of the step;
 * exposed communication: under 2%, the goal's threshold). */
static void err_cell(FILE *out, const vld_case *vc, int p, int *held, int *within)
{
    double e = phase_err(&vc->r, p), lim = p == DM_PHASE_EXPOSED_COMM ? 0.30 : 0.10;
    int h = cmp_phase_held(&vc->r.sim, &vc->r.real, p);
    if (p == DM_PHASE_EXPOSED_COMM)
        h = vc->r.real.us[p] >= 0.02 * vc->r.real.us[DM_PHASE_STEP] || vc->r.sim.us[p] >= 0.02 * vc->r.sim.us[DM_PHASE_STEP];
    char cell[32];
    if (!isfinite(e)) snprintf(cell, sizeof cell, "%s", "-");
    else snprintf(cell, sizeof cell, h ? "%+.1f%%" : "[%+.1f%%]", 100 * e);
    fprintf(out, " %9s", cell);
    *held += h;
    *within += h && isfinite(e) && fabs(e) <= lim;
}

/* The per-model table of the phases' errors, the fitted-on model's cases marked, each model's
 * kernel sources once, and the goal's count (step, forward, backward, optimizer within 10%,
 * exposed within 30% where it is over 2% of the step). */
static void print_model_table(FILE *out, const vld_case *cs, int n, const vld_opts *o)
{
    fprintf(out, "\n# errors by model, (predicted - measured) / measured; [x]: not held (under 1%% of the step, exposed "
                 "under 2%%)\n");
    if (o->calibration && o->calibration[0])
        fprintf(out, "# calibration %s%s%s%s\n", o->calibration, o->fitted_on && o->fitted_on[0] ? ", fitted on " : "",
                o->fitted_on && o->fitted_on[0] ? o->fitted_on : "", o->fitted_on && o->fitted_on[0] ? " (*)" : "");
    else
        fprintf(out, "# no calibration\n");
    fprintf(out, "# %-26s %-15s %-10s %4s %7s %9s %9s %9s %9s %9s\n", "model", "strategy", "overlap", "gpus", "tokens",
            "step", "forward", "backward", "optimizer", "exposed");
    int good = 0, good_other = 0, n_ok = 0, n_other = 0;
    for (int i = 0; i < n; i++) {
        const vld_case *vc = &cs[i];
        char mname[64];
        snprintf(mname, sizeof mname, "%.24s%s", vc->model, fitted_case(vc, o) ? " *" : "");
        fprintf(out, "  %-26s %-15s %-10s %4d %7lld", mname, vc->strategy, vc->overlap, vc->gpus,
                (long long)case_tokens(vc, o));
        if (vc->nofit) {
            fprintf(out, "  does not fit (%s %.1f GiB)\n", vc->oom ? "stopped for want of memory; GPU estimate" : "needs",
                    vc->need_bytes / GIB);
            continue;
        }
        if (!vc->ok) {
            fprintf(out, "  FAILED\n");
            continue;
        }
        int held = 0, within = 0;
        for (int p = 0; p < DM_PHASE__COMPARED; p++) err_cell(out, vc, p, &held, &within);
        fprintf(out, "\n");
        int all = held == within;
        n_ok++, good += all;
        if (!fitted_case(vc, o)) n_other++, good_other += all;
        /* the sources of this model's kernels, after its last case */
        int last = 1;
        for (int j = i + 1; j < n && last; j++) last = strcmp(cs[j].model, vc->model) != 0;
        if (last)
            for (int j = 0; j <= i; j++)
                if (!strcmp(cs[j].model, vc->model) && cs[j].src[0][0]) {
                    fprintf(out, "    forward kernels:  %s\n    backward kernels: %s\n", cs[j].src[0], cs[j].src[1]);
                    break;
                }
    }
    fprintf(out, "# goal (step, forward, backward, optimizer within 10%%; exposed within 30%% where over 2%% of the step): "
                 "%d of %d cases; %d of %d on models the calibration was not fitted on\n", good, n_ok, good_other, n_other);
}

/* validate.csv of the cases run so far (those that ran and fit: per phase, measured and
 * predicted, the error, the op errors), written whole and atomically: after every case, so that
 * an interrupted or timed-out call keeps what it measured, and at the end. */
static int write_csv(const vld_case *cs, int n, const vld_opts *o, const char *path, dm_err *err)
{
    dm_out *csv = dm_out_open(path, err);
    if (!csv) return -1;
    FILE *f = dm_out_file(csv);
    fprintf(f, REPLAY_HEADER ",error_pct,op_abs_err_median_pct,op_abs_err_p90_pct,ops_matched\n");
    for (int i = 0; i < n; i++) {
        const vld_case *vc = &cs[i];
        if (vc->nofit || !vc->ok) continue;
        for (int p = 0; p < DM_PHASE__COMPARED; p++)
            fprintf(f, "%s,%s,%s,%s,%d,%lld,%s,%.6f,%.6f,%.4f,%.4f,%.4f,%d\n", vc->name, vc->model, vc->strategy,
                    vc->overlap, vc->gpus, (long long)case_tokens(vc, o), dm_phase_name((dm_phase)p),
                    vc->r.real.us[p] / 1e3, vc->r.sim.us[p] / 1e3, 100 * phase_err(&vc->r, p), 100 * vc->r.abs_err_median,
                    100 * vc->r.abs_err_p90, vc->r.n_matched);
    }
    return dm_out_commit(csv, err);
}

int vld_run(vld_case *cs, int n, const vld_opts *o, FILE *out)
{
    dm_err err;
    int plot_case = o->plot_case ? o->plot_case : vld_default_plot_case(cs, n);
    if (dm_mkdir_p(o->dir, &err)) {
        fprintf(stderr, "dmuon validate: %s\n", err.msg);
        return 1;
    }
    if (o->dry) fprintf(out, "commands:\n");
    fflush(out);
    int failed = 0, missed = 0, nofit = 0;
    char path[4200];
    snprintf(path, sizeof path, "%s/validate.csv", o->dir);
    for (int i = 0; i < n; i++) {
        dm_trace *st = NULL, *rt = NULL;
        if (!o->dry) fprintf(stderr, "validate: %d/%d %s\n", i + 1, n, cs[i].name);
        if (run_case(&cs[i], o, out, &st, &rt, &err)) {
            snprintf(cs[i].why, sizeof cs[i].why, "%s", err.msg);
            failed++;
        } else if (cs[i].nofit) {
            nofit++;
        } else if (!o->dry && i + 1 == plot_case) {
            char pdir[4200], title[512];
            int drawn = 0;
            snprintf(pdir, sizeof pdir, "%s/plot", o->dir);
            snprintf(title, sizeof title, "%s (predicted against measured)", cs[i].name);
            if (cmp_write_plots(st, rt, pdir, title, &drawn, &err)) fprintf(stderr, "dmuon validate: plot: %s\n", err.msg);
            else
                fprintf(out, "plot: case %d %s: %s/%s\n", i + 1, cs[i].name, pdir,
                        drawn ? "timeline.png, ops.png" : "data and compare.gp (no gnuplot)");
        }
        dm_trace_free(st);
        dm_trace_free(rt);
        if (!o->dry && cs[i].ok && !cs[i].nofit && i + 1 < n && write_csv(cs, i + 1, o, path, &err))
            fprintf(stderr, "dmuon validate: %s\n", err.msg);
    }
    if (o->dry) return failed ? 1 : 0;
    /* The table: per case, measured and predicted per phase, errors, op errors. */
    if (write_csv(cs, n, o, path, &err)) fprintf(stderr, "dmuon validate: %s\n", err.msg);
    fprintf(out, "\n# %-44s %-12s %11s %11s %8s\n", "case", "phase", "measured_ms", "predicted_ms", "error");
    int within = 0;
    for (int i = 0; i < n; i++) {
        vld_case *vc = &cs[i];
        if (vc->nofit) {
            char why[256];
            fprintf(out, "  %-44s %s\n", vc->name, nofit_text(vc, o, why, sizeof why));
            continue;
        }
        if (!vc->ok) {
            fprintf(out, "  %-44s FAILED: %s\n", vc->name, vc->why);
            continue;
        }
        int all5 = 1;
        for (int p = 0; p < DM_PHASE__COMPARED; p++) {
            double e = phase_err(&vc->r, p);
            int miss = o->max_err >= 0 && cmp_phase_misses(&vc->r.sim, &vc->r.real, p, o->max_err);
            missed += miss;
            if (cmp_phase_misses(&vc->r.sim, &vc->r.real, p, 5)) all5 = 0;
            fprintf(out, "  %-44s %-12s %11.3f %11.3f %+7.1f%%%s\n", p ? "" : vc->name, dm_phase_name((dm_phase)p),
                    vc->r.real.us[p] / 1e3, vc->r.sim.us[p] / 1e3, 100 * e, miss ? "  MISS" : "");
        }
        within += all5;
        fprintf(out, "  %-44s ops: %d matched, |error| median %.1f%%, 90th percentile %.1f%%\n", "", vc->r.n_matched,
                100 * vc->r.abs_err_median, 100 * vc->r.abs_err_p90);
    }
    print_model_table(out, cs, n, o);
    fprintf(out, "\nvalidate: %d cases, %d ran, %d failed, %d do not fit in %smemory; %d with the step and every phase "
                 "within 5%%%s\n", n, n - failed - nofit, failed, nofit, strcmp(o->backend, "gpu") ? "" : "GPU ", within,
            o->max_err >= 0 ? "" : " (report only: --max-error makes misses fail)");
    int other = 0, first = -1;
    for (int i = 0; i < n; i++)
        if (cs[i].other_gpu) other++, first = first < 0 ? i : first;
    if (other)
        fprintf(out, "note: %d case%s ran on %s%s, not on the cluster's %s: predicted for one GPU, measured on another "
                     "(--cluster with that GPU compares like with like)\n", other, other > 1 ? "s" : "", cs[first].device,
                other > 1 ? " (the first)" : "", o->cluster->gpu->short_name);
    fprintf(out, "wrote %s\n", path);
    return failed || missed ? 1 : 0;
}

/* ---- replay -------------------------------------------------------------------------------- */

/* One row of a validate.csv into its case (cs grows; the pointers into buf are set by the
 * caller once it stops moving). with_tokens: the table has the tokens column (else the case's
 * tokens are 0: the caller's). */
static int csv_row(const char *path, int ln, char *line, int with_tokens, vld_case **cs, int *n, int *cap, dm_err *err)
{
    char *raw[9], *fld[8];
    int rcol[9], col[8], nf = 0, want = with_tokens ? 9 : 8;
    for (char *q = line; nf < want;) {
        raw[nf] = q;
        rcol[nf++] = (int)(q - line) + 1;
        char *c = strchr(q, ',');
        if (!c) break;
        *c = 0;
        q = c + 1;
    }
    if (nf < want)
        return dm_err_set(err, "%s:%d:%d: expected %d or more comma-separated fields (%s), found %d", path, ln,
                          (int)strlen(line) + 1, want, with_tokens ? REPLAY_HEADER : REPLAY_HEADER_OLD, nf);
    int64_t tokens = 0;
    for (int i = 0, j = 0; i < nf; i++) { /* the fields of the older layout; tokens aside */
        if (with_tokens && i == 5) {
            char *e;
            long long v = strtoll(raw[i], &e, 10);
            if (*e || e == raw[i] || v < 1 || v > (1LL << 30))
                return dm_err_set(err, "%s:%d:%d: expected tokens per rank in [1, 2^30], found '%s'", path, ln, rcol[i],
                                  raw[i]);
            tokens = v;
            continue;
        }
        fld[j] = raw[i], col[j++] = rcol[i];
    }
    for (int i = 0; i < 4; i++)
        if (!fld[i][0] || strlen(fld[i]) >= 192)
            return dm_err_set(err, "%s:%d:%d: expected a name of 1 to 191 characters", path, ln, col[i]);
    char *end;
    long gpus = strtol(fld[4], &end, 10);
    if (*end || end == fld[4] || gpus < 1 || gpus > 1024)
        return dm_err_set(err, "%s:%d:%d: expected a GPU count in [1, 1024], found '%s'", path, ln, col[4], fld[4]);
    int ph = dm_phase_from_name(fld[5]);
    if (ph < 0 || ph >= DM_PHASE__COMPARED)
        return dm_err_set(err, "%s:%d:%d: expected a phase (step, forward, backward, optimizer, exposed-comm), found '%s'",
                          path, ln, col[5], fld[5]);
    double v[2];
    for (int i = 0; i < 2; i++) {
        v[i] = strtod(fld[6 + i], &end);
        if (*end || end == fld[6 + i] || !isfinite(v[i]) || v[i] < 0)
            return dm_err_set(err, "%s:%d:%d: expected %s as a non-negative number, found '%s'", path, ln, col[6 + i],
                              i ? "predicted_ms" : "measured_ms", fld[6 + i]);
    }
    vld_case *vc = NULL;
    for (int i = 0; i < *n && !vc; i++)
        if (!strcmp((*cs)[i].name, fld[0])) vc = &(*cs)[i];
    if (vc && (strcmp(vc->buf[0], fld[1]) || strcmp(vc->buf[1], fld[2]) || strcmp(vc->buf[2], fld[3]) || vc->gpus != gpus ||
               vc->tokens != tokens))
        return dm_err_set(err, "%s:%d:1: case %s: model, strategy, overlap, GPUs or tokens differ from its earlier rows", path,
                          ln, fld[0]);
    if (!vc) {
        if (*n == *cap) {
            int nc = *cap ? 2 * *cap : 16;
            vld_case *grown = dm_realloc(*cs, (size_t)nc * sizeof *grown, err);
            if (!grown) return -1;
            *cs = grown;
            *cap = nc;
        }
        vc = &(*cs)[(*n)++];
        memset(vc, 0, sizeof *vc);
        snprintf(vc->name, sizeof vc->name, "%s", fld[0]);
        for (int i = 0; i < 3; i++) snprintf(vc->buf[i], sizeof vc->buf[i], "%s", fld[1 + i]);
        vc->gpus = (int)gpus;
        vc->tokens = tokens;
    }
    if (vc->have[ph]) return dm_err_set(err, "%s:%d:%d: case %s: phase %s given twice", path, ln, col[5], fld[0], fld[5]);
    vc->have[ph] = 1;
    vc->r.real.us[ph] = v[0] * 1e3;
    vc->stored_pred_us[ph] = v[1] * 1e3;
    return 0;
}

int vld_read_csv(const char *path, vld_case **out, int *n_out, dm_err *err)
{
    *out = NULL;
    *n_out = 0;
    dm_lines *in = dm_lines_open(path, 2046, 64 << 20, err);
    if (!in) return -1;
    vld_case *cs = NULL;
    int n = 0, cap = 0, rc = 0, k, with_tokens = 0;
    char *line;
    while (!rc && (k = dm_lines_next(in, &line, NULL, err)) != 0) {
        int ln = dm_lines_number(in);
        if (k < 0) rc = -1;
        else if (ln == 1 && !strncmp(line, REPLAY_HEADER, strlen(REPLAY_HEADER)))
            with_tokens = 1;
        else if (ln == 1 && strncmp(line, REPLAY_HEADER_OLD, strlen(REPLAY_HEADER_OLD)))
            rc = dm_err_set(err, "%s:1:1: expected the header '" REPLAY_HEADER ",...' (dmuon validate's validate.csv; "
                            "or the older one without tokens)", path);
        else if (ln > 1 && line[0] && line[0] != '#')
            rc = csv_row(path, ln, line, with_tokens, &cs, &n, &cap, err);
    }
    dm_lines_close(in);
    for (int i = 0; i < n; i++) cs[i].model = cs[i].buf[0], cs[i].strategy = cs[i].buf[1], cs[i].overlap = cs[i].buf[2];
    if (!rc && !n) rc = dm_err_set(err, "%s: no cases", path);
    for (int i = 0; i < n && !rc; i++)
        for (int p = 0; p < DM_PHASE__COMPARED && !rc; p++)
            if (!cs[i].have[p]) rc = dm_err_set(err, "%s: case %s has no %s row", path, cs[i].name, dm_phase_name((dm_phase)p));
    if (rc) {
        free(cs);
        return -1;
    }
    *out = cs;
    *n_out = n;
    return 0;
}

int vld_replay(const char *csv_path, const vld_opts *o, FILE *out)
{
    dm_err err;
    vld_case *cs = NULL;
    int n = 0;
    if (vld_read_csv(csv_path, &cs, &n, &err)) {
        fprintf(stderr, "dmuon validate: %s\n", err.msg);
        return 1;
    }
    int have_tok = 1;
    for (int i = 0; i < n; i++) have_tok &= cs[i].tokens > 0;
    if (have_tok) fprintf(out, "  measured    %s: %d cases (no executor run; tokens per rank as stored)\n", csv_path, n);
    else
        fprintf(out, "  measured    %s: %d cases (no executor run; %lld tokens per rank assumed)\n", csv_path, n,
                (long long)o->tokens);
    int failed = 0, missed = 0, within5 = 0, within10 = 0, within5_before = 0;
    /* --as-run: the program each case ran, from its folder beside the CSV (the plan the rows of
     * the run's day gave; re-planned with other rows it may batch and order differently) */
    char base[4096];
    snprintf(base, sizeof base, "%s", csv_path);
    char *slash = strrchr(base, '/');
    if (slash) *slash = 0;
    else snprintf(base, sizeof base, ".");
    if (o->as_run) fprintf(out, "  programs    as run: %s/CASE/program.json\n", base);
    for (int i = 0; i < n; i++) {
        dm_program *p = NULL;
        sim_result *sr = NULL;
        int bad;
        if (o->as_run) {
            char pp[4400];
            snprintf(pp, sizeof pp, "%s/%s/program.json", base, cs[i].name);
            bad = dm_program_load(pp, &p, &err) || sim_case(p, o, &sr, &err);
        } else {
            bad = plan_case(&cs[i], o, 0, &p, NULL, &err) || sim_case(p, o, &sr, &err);
        }
        if (bad || dm_phases_trace(sr->trace, &cs[i].r.sim, &err)) {
            snprintf(cs[i].why, sizeof cs[i].why, "%s", err.msg);
            failed++;
        } else {
            cs[i].ok = 1;
            snprintf(cs[i].src[0], sizeof cs[i].src[0], "%s", sr->cost_src[DM_OP_FORWARD]);
            snprintf(cs[i].src[1], sizeof cs[i].src[1], "%s", sr->cost_src[DM_OP_BACKWARD]);
        }
        sim_result_free(sr);
        dm_program_free(p);
    }
    char path[4200];
    snprintf(path, sizeof path, "%s/replay.csv", o->dir);
    dm_out *csv = NULL;
    if (dm_mkdir_p(o->dir, &err) || !(csv = dm_out_open(path, &err))) fprintf(stderr, "dmuon validate: %s\n", err.msg);
    else
        fprintf(dm_out_file(csv), REPLAY_HEADER ",error_pct,stored_predicted_ms,stored_error_pct\n");
    fprintf(out, "\n# %-44s %-12s %11s %11s %8s %13s\n", "case", "phase", "measured_ms", "predicted_ms", "error",
            "stored_error");
    for (int i = 0; i < n; i++) {
        vld_case *vc = &cs[i];
        if (!vc->ok) {
            fprintf(out, "  %-44s FAILED: %s\n", vc->name, vc->why);
            continue;
        }
        dm_phases stored = vc->r.real; /* the stored prediction, for the ruler's held rule */
        memcpy(stored.us, vc->stored_pred_us, sizeof vc->stored_pred_us);
        int all5 = 1, all10 = 1, all5b = 1;
        for (int p = 0; p < DM_PHASE__COMPARED; p++) {
            double e = phase_err(&vc->r, p), eb = cmp_rel_err(vc->stored_pred_us[p], vc->r.real.us[p]);
            int miss = o->max_err >= 0 && cmp_phase_misses(&vc->r.sim, &vc->r.real, p, o->max_err);
            missed += miss;
            if (cmp_phase_misses(&vc->r.sim, &vc->r.real, p, 5)) all5 = 0;
            if (cmp_phase_misses(&vc->r.sim, &vc->r.real, p, 10)) all10 = 0;
            if (cmp_phase_misses(&stored, &vc->r.real, p, 5)) all5b = 0;
            fprintf(out, "  %-44s %-12s %11.3f %11.3f %+7.1f%% %+12.1f%%%s\n", p ? "" : vc->name,
                    dm_phase_name((dm_phase)p), vc->r.real.us[p] / 1e3, vc->r.sim.us[p] / 1e3, 100 * e, 100 * eb,
                    miss ? "  MISS" : "");
            if (csv)
                fprintf(dm_out_file(csv), "%s,%s,%s,%s,%d,%lld,%s,%.6f,%.6f,%.4f,%.6f,%.4f\n", vc->name, vc->model,
                        vc->strategy, vc->overlap, vc->gpus, (long long)case_tokens(vc, o), dm_phase_name((dm_phase)p),
                        vc->r.real.us[p] / 1e3, vc->r.sim.us[p] / 1e3, 100 * e, vc->stored_pred_us[p] / 1e3, 100 * eb);
        }
        within5 += all5, within10 += all10, within5_before += all5b;
    }
    if (csv && dm_out_commit(csv, &err)) fprintf(stderr, "dmuon validate: %s\n", err.msg);
    print_model_table(out, cs, n, o);
    fprintf(out,
            "\nvalidate --replay: %d cases, %d simulated, %d failed; the step and every phase (those over 1%% of the step) "
            "within 5%%: %d (stored predictions: %d), within 10%%: %d%s\n",
            n, n - failed, failed, within5, within5_before, within10,
            o->max_err >= 0 ? "" : " (report only: --max-error makes misses fail)");
    if (csv) fprintf(out, "wrote %s\n", path);
    free(cs);
    return failed || missed ? 1 : 0;
}
