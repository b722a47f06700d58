/* compare.c: predicted versus measured traces (compare.h). */
#define _POSIX_C_SOURCE 200809L
#include "compare.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "outfile.h"
#include "spawn.h"

static const char *const phase_names[CMP__PHASES] = {"step", "forward", "backward", "optimizer", "exposed-comm"};

const char *cmp_phase_name(cmp_phase p) { return p >= 0 && p < CMP__PHASES ? phase_names[p] : "?"; }

void cmp_opts_default(cmp_opts *o) { o->min_op_us = 1.0; }

double cmp_rel_err(double predicted, double measured)
{
    if (measured == 0) return predicted == 0 ? 0 : predicted > 0 ? INFINITY : -INFINITY;
    return (predicted - measured) / measured;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static int cmp_iv(const void *a, const void *b) { return cmp_double(a, b); } /* on the start */

/* Quantile q of v[0..n-1] (sorted in place), linear between order statistics. */
double cmp_quantile(double *v, int n, double q)
{
    if (n <= 0) return NAN;
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    double x = q * (n - 1);
    int i = (int)floor(x);
    if (i >= n - 1) return v[n - 1];
    return v[i] + (x - i) * (v[i + 1] - v[i]);
}

int cmp_trace_phases(const dm_trace *t, cmp_phases *out, dm_err *err)
{
    memset(out, 0, sizeof *out);
    if (t->n == 0) return dm_err_set(err, "trace has no events");
    int nr = 0;
    for (int i = 0; i < t->n; i++)
        if (t->ev[i].rank + 1 > nr) nr = t->ev[i].rank + 1;
    double *last = dm_calloc((size_t)nr, sizeof *last, err);
    if (!last) return -1;
    for (int i = 0; i < t->n; i++) {
        const dm_trace_event *e = &t->ev[i];
        if (e->rank < 0) {
            free(last);
            return dm_err_set(err, "trace event with rank %d", e->rank);
        }
        double end = e->ts_us + e->dur_us;
        if (end > last[e->rank]) last[e->rank] = end;
    }
    int cr = 0;
    for (int r = 0; r < nr; r++)
        if (last[r] > last[cr]) cr = r;
    out->crit_rank = cr;
    out->us[CMP_STEP] = last[cr];
    free(last);
    int n_iv = 0;
    double *iv = dm_malloc(((size_t)t->n + 1) * 2 * sizeof *iv, err);
    if (!iv) return -1;
    for (int i = 0; i < t->n; i++) {
        const dm_trace_event *e = &t->ev[i];
        if (e->rank != cr) continue;
        if (e->kind == DM_OP_FORWARD) out->us[CMP_FORWARD] += e->dur_us;
        if (e->kind == DM_OP_BACKWARD) out->us[CMP_BACKWARD] += e->dur_us;
        if (e->kind == DM_OP_NS || e->kind == DM_OP_MUON_UPDATE || e->kind == DM_OP_ADAMW)
            out->us[CMP_OPTIMIZER] += e->dur_us;
        if (dm_op_is_compute(e->kind) && e->dur_us > 0) {
            iv[2 * n_iv] = e->ts_us;
            iv[2 * n_iv + 1] = e->ts_us + e->dur_us;
            n_iv++;
        }
    }
    /* The GPU's busy time: the union of the compute intervals (the simulator runs them one at a
     * time, where the union is the sum; a real GPU may overlap kernels of two streams). */
    qsort(iv, (size_t)n_iv, 2 * sizeof *iv, cmp_iv);
    double busy = 0, a = 0, b = -1;
    for (int i = 0; i < n_iv; i++) {
        if (iv[2 * i] > b) {
            if (b > a) busy += b - a;
            a = iv[2 * i];
            b = iv[2 * i + 1];
        } else if (iv[2 * i + 1] > b) {
            b = iv[2 * i + 1];
        }
    }
    if (b > a) busy += b - a;
    free(iv);
    out->us[CMP_EXPOSED] = out->us[CMP_STEP] - busy > 0 ? out->us[CMP_STEP] - busy : 0;
    return 0;
}

/* Index of events by (rank, op): idx[off[rank] + op], -1 when absent. */
typedef struct op_index {
    int nr;
    int *off, *idx;
} op_index;

static void index_free(op_index *x)
{
    free(x->off);
    free(x->idx);
}

static int index_build(const dm_trace *t, op_index *x, dm_err *err)
{
    memset(x, 0, sizeof *x);
    int nr = 0;
    for (int i = 0; i < t->n; i++)
        if (t->ev[i].rank + 1 > nr) nr = t->ev[i].rank + 1;
    int *maxop = dm_calloc((size_t)nr + 1, sizeof *maxop, err);
    if (!maxop) return -1;
    for (int i = 0; i < t->n; i++) {
        if (t->ev[i].op < 0) {
            free(maxop);
            return dm_err_set(err, "trace event with op id %d", t->ev[i].op);
        }
        if (t->ev[i].op + 1 > maxop[t->ev[i].rank]) maxop[t->ev[i].rank] = t->ev[i].op + 1;
    }
    x->nr = nr;
    if (!(x->off = dm_calloc((size_t)nr + 1, sizeof *x->off, err))) goto fail;
    for (int r = 0; r < nr; r++) x->off[r + 1] = x->off[r] + maxop[r];
    if (!(x->idx = dm_malloc(((size_t)x->off[nr] + 1) * sizeof *x->idx, err))) goto fail;
    for (int i = 0; i < x->off[nr]; i++) x->idx[i] = -1;
    for (int i = 0; i < t->n; i++) x->idx[x->off[t->ev[i].rank] + t->ev[i].op] = i;
    free(maxop);
    return 0;
fail:
    free(maxop);
    index_free(x);
    return -1;
}

static int index_get(const op_index *x, int rank, int op)
{
    if (rank < 0 || rank >= x->nr || op < 0 || op >= x->off[rank + 1] - x->off[rank]) return -1;
    return x->idx[x->off[rank] + op];
}

int cmp_traces(const dm_trace *sim, const dm_trace *real, const cmp_opts *o, cmp_result *out, dm_err *err)
{
    cmp_opts def;
    if (!o) {
        cmp_opts_default(&def);
        o = &def;
    }
    memset(out, 0, sizeof *out);
    if (cmp_trace_phases(sim, &out->sim, err) || cmp_trace_phases(real, &out->real, err)) return -1;
    out->metadata_differs = strcmp(sim->model, real->model) || strcmp(sim->strategy, real->strategy) ||
                            sim->nranks != real->nranks;
    op_index ri;
    if (index_build(real, &ri, err)) return -1;
    double *rel = dm_malloc(((size_t)sim->n + 1) * sizeof *rel, err);
    double *absr = dm_malloc(((size_t)sim->n + 1) * sizeof *absr, err);
    double *absu = dm_malloc(((size_t)sim->n + 1) * sizeof *absu, err);
    double *kerr = dm_malloc(((size_t)sim->n + 1) * sizeof *kerr, err);
    char *seen = dm_calloc((size_t)real->n + 1, 1, err);
    int rc = -1;
    if (!rel || !absr || !absu || !kerr || !seen) goto out;
    for (int i = 0; i < sim->n; i++) out->kinds[sim->ev[i].kind].n_sim++, out->kinds[sim->ev[i].kind].sim_us += sim->ev[i].dur_us;
    for (int i = 0; i < real->n; i++)
        out->kinds[real->ev[i].kind].n_real++, out->kinds[real->ev[i].kind].real_us += real->ev[i].dur_us;
    for (int i = 0; i < sim->n; i++) {
        const dm_trace_event *s = &sim->ev[i];
        int j = index_get(&ri, s->rank, s->op);
        if (j < 0) {
            out->n_sim_only++;
            continue;
        }
        seen[j] = 1;
        const dm_trace_event *m = &real->ev[j];
        if (m->kind != s->kind) {
            out->n_kind_mismatch++;
            continue;
        }
        out->n_matched++;
        if (m->dur_us < o->min_op_us) continue;
        double e = cmp_rel_err(s->dur_us, m->dur_us);
        rel[out->n_err] = e;
        absr[out->n_err] = fabs(e);
        absu[out->n_err] = fabs(s->dur_us - m->dur_us);
        out->n_err++;
        out->kinds[s->kind].n_err++;
    }
    for (int j = 0; j < real->n; j++) out->n_real_only += !seen[j];
    out->abs_err_median = cmp_quantile(absr, out->n_err, 0.5);
    out->abs_err_p90 = cmp_quantile(absr, out->n_err, 0.9);
    out->abs_us_median = cmp_quantile(absu, out->n_err, 0.5);
    out->abs_us_p90 = cmp_quantile(absu, out->n_err, 0.9);
    out->err_median = cmp_quantile(rel, out->n_err, 0.5);
    /* Per kind: the median signed error of its matched ops. */
    for (int k = 0; k < DM_OP__COUNT; k++) {
        int n = 0;
        for (int i = 0; i < sim->n; i++) {
            const dm_trace_event *s = &sim->ev[i];
            if ((int)s->kind != k) continue;
            int j = index_get(&ri, s->rank, s->op);
            if (j < 0 || real->ev[j].kind != s->kind || real->ev[j].dur_us < o->min_op_us) continue;
            kerr[n++] = cmp_rel_err(s->dur_us, real->ev[j].dur_us);
        }
        out->kinds[k].err_median = cmp_quantile(kerr, n, 0.5);
    }
    rc = 0;
out:
    free(rel);
    free(absr);
    free(absu);
    free(kerr);
    free(seen);
    index_free(&ri);
    return rc;
}

static void pct(char *buf, size_t size, double e)
{
    if (isnan(e)) snprintf(buf, size, "-");
    else if (isinf(e)) snprintf(buf, size, "inf");
    else snprintf(buf, size, "%+.1f%%", 100 * e);
}

void cmp_print(FILE *f, const dm_trace *sim, const dm_trace *real, const cmp_result *r)
{
    fprintf(f, "# dmuon compare\n");
    fprintf(f, "  predicted   %s: %s %s on %s, %d ranks, %d ops\n", sim->source, sim->model, sim->strategy, sim->cluster,
            sim->nranks, sim->n);
    fprintf(f, "  measured    %s: %s %s on %s, %d ranks, %d ops\n", real->source, real->model, real->strategy,
            real->cluster, real->nranks, real->n);
    if (r->metadata_differs) fprintf(f, "  warning     the traces are of different programs (model, strategy or ranks)\n");
    fprintf(f, "  critical    rank %d predicted, rank %d measured\n\n", r->sim.crit_rank, r->real.crit_rank);
    fprintf(f, "# %-14s %14s %14s %9s\n", "phase", "predicted_ms", "measured_ms", "error");
    for (int p = 0; p < CMP__PHASES; p++) {
        char e[32];
        pct(e, sizeof e, cmp_rel_err(r->sim.us[p], r->real.us[p]));
        fprintf(f, "  %-14s %14.3f %14.3f %9s\n", phase_names[p], r->sim.us[p] / 1e3, r->real.us[p] / 1e3, e);
    }
    fprintf(f, "\n# %-14s %7s %7s %14s %14s %9s %11s\n", "op kind", "ops_p", "ops_m", "predicted_ms", "measured_ms",
            "error", "op_err_med");
    for (int k = 0; k < DM_OP__COUNT; k++) {
        const cmp_kind *c = &r->kinds[k];
        if (!c->n_sim && !c->n_real) continue;
        char e[32], m[32];
        pct(e, sizeof e, cmp_rel_err(c->sim_us, c->real_us));
        pct(m, sizeof m, c->err_median);
        fprintf(f, "  %-14s %7d %7d %14.3f %14.3f %9s %11s\n", dm_op_kind_name((dm_op_kind)k), c->n_sim, c->n_real,
                c->sim_us / 1e3, c->real_us / 1e3, e, m);
    }
    fprintf(f, "  (sums over all ranks; op_err_med: median of (predicted - measured) / measured per op)\n");
    char a[32], b[32], c[32];
    pct(a, sizeof a, r->abs_err_median);
    pct(b, sizeof b, r->abs_err_p90);
    pct(c, sizeof c, r->err_median);
    fprintf(f, "\nops: %d matched by (rank, op id), %d only predicted, %d only measured, %d with different kinds\n",
            r->n_matched, r->n_sim_only, r->n_real_only, r->n_kind_mismatch);
    fprintf(f, "op error over %d ops of >= the minimum duration: |error| median %s, 90th percentile %s; signed median %s;\n"
               "  |predicted - measured| median %.3f us, 90th percentile %.3f us\n",
            r->n_err, a + (a[0] == '+'), b + (b[0] == '+'), c, isnan(r->abs_us_median) ? 0 : r->abs_us_median,
            isnan(r->abs_us_p90) ? 0 : r->abs_us_p90);
}

int cmp_write_csv(const char *path, const cmp_result *r, dm_err *err)
{
    dm_out *o = dm_out_open(path, err);
    if (!o) return -1;
    FILE *f = dm_out_file(o);
    fprintf(f, "section,name,predicted_ms,measured_ms,error_pct,ops_predicted,ops_measured,op_err_median_pct\n");
    for (int p = 0; p < CMP__PHASES; p++)
        fprintf(f, "phase,%s,%.6f,%.6f,%.4f,,,\n", phase_names[p], r->sim.us[p] / 1e3, r->real.us[p] / 1e3,
                100 * cmp_rel_err(r->sim.us[p], r->real.us[p]));
    for (int k = 0; k < DM_OP__COUNT; k++) {
        const cmp_kind *c = &r->kinds[k];
        if (!c->n_sim && !c->n_real) continue;
        fprintf(f, "kind,%s,%.6f,%.6f,%.4f,%d,%d,%.4f\n", dm_op_kind_name((dm_op_kind)k), c->sim_us / 1e3,
                c->real_us / 1e3, 100 * cmp_rel_err(c->sim_us, c->real_us), c->n_sim, c->n_real, 100 * c->err_median);
    }
    fprintf(f, "ops,abs_err_median,,,%.4f,%d,,\nops,abs_err_p90,,,%.4f,%d,,\nops,err_median,,,%.4f,%d,,\n",
            100 * r->abs_err_median, r->n_err, 100 * r->abs_err_p90, r->n_err, 100 * r->err_median, r->n_err);
    return dm_out_commit(o, err);
}

/* ---- plots -------------------------------------------------------------------------------- */

int cmp_mkdir_p(const char *dir, dm_err *err)
{
    char buf[4096];
    snprintf(buf, sizeof buf, "%s", dir);
    for (char *s = buf + 1; *s; s++)
        if (*s == '/') {
            *s = 0;
            if (mkdir(buf, 0777) && errno != EEXIST) return dm_err_set(err, "%s: cannot create: %s", buf, strerror(errno));
            *s = '/';
        }
    if (mkdir(buf, 0777) && errno != EEXIST) return dm_err_set(err, "%s: cannot create: %s", buf, strerror(errno));
    return 0;
}

/* One lane per (rank, stream), rank 0 on top. */
static int lane_of(const dm_trace_event *e, int nr) { return (nr - 1 - e->rank) * DM_STREAM__COUNT + (DM_STREAM__COUNT - 1 - e->stream); }

static int write_timeline(const dm_trace *t, int nr, const char *path, dm_err *err)
{
    dm_out *o = dm_out_open(path, err);
    if (!o) return -1;
    FILE *f = dm_out_file(o);
    fprintf(f, "# %s trace: %s %s, one row per op\n# lane start_ms end_ms kind_index kind rank stream op\n", t->source,
            t->model, t->strategy);
    for (int i = 0; i < t->n; i++) {
        const dm_trace_event *e = &t->ev[i];
        if (e->kind == DM_OP_WAIT) continue;
        fprintf(f, "%d %.6f %.6f %d %s %d %s %d\n", lane_of(e, nr), e->ts_us / 1e3, (e->ts_us + e->dur_us) / 1e3, (int)e->kind,
                dm_op_kind_name(e->kind), e->rank, dm_stream_name((dm_stream)e->stream), e->op);
    }
    return dm_out_commit(o, err);
}

int cmp_write_plots(const dm_trace *sim, const dm_trace *real, const char *dir, const char *title, int *plotted,
                    dm_err *err)
{
    if (plotted) *plotted = 0;
    if (cmp_mkdir_p(dir, err)) return -1;
    int nr = sim->nranks > real->nranks ? sim->nranks : real->nranks;
    for (int i = 0; i < sim->n; i++)
        if (sim->ev[i].rank + 1 > nr) nr = sim->ev[i].rank + 1;
    for (int i = 0; i < real->n; i++)
        if (real->ev[i].rank + 1 > nr) nr = real->ev[i].rank + 1;
    char path[4200];
    snprintf(path, sizeof path, "%s/timeline_predicted.dat", dir);
    if (write_timeline(sim, nr, path, err)) return -1;
    snprintf(path, sizeof path, "%s/timeline_measured.dat", dir);
    if (write_timeline(real, nr, path, err)) return -1;
    /* Matched ops: measured against predicted duration. */
    op_index ri;
    if (index_build(real, &ri, err)) return -1;
    snprintf(path, sizeof path, "%s/ops.dat", dir);
    dm_out *o = dm_out_open(path, err);
    if (!o) {
        index_free(&ri);
        return -1;
    }
    fprintf(dm_out_file(o), "# matched ops (rank, op id)\n# measured_ms predicted_ms kind_index kind rank op\n");
    int n_ops = 0;
    for (int i = 0; i < sim->n; i++) {
        const dm_trace_event *s = &sim->ev[i];
        int j = index_get(&ri, s->rank, s->op);
        if (j < 0 || real->ev[j].kind != s->kind || s->kind == DM_OP_WAIT || real->ev[j].dur_us <= 0 || s->dur_us <= 0)
            continue;
        fprintf(dm_out_file(o), "%.6f %.6f %d %s %d %d\n", real->ev[j].dur_us / 1e3, s->dur_us / 1e3, (int)s->kind,
                dm_op_kind_name(s->kind), s->rank, s->op);
        n_ops++;
    }
    index_free(&ri);
    if (dm_out_commit(o, err)) return -1;
    /* The script: reads the data files from its own folder. */
    double tmax = 0;
    for (int i = 0; i < sim->n; i++) tmax = fmax(tmax, sim->ev[i].ts_us + sim->ev[i].dur_us);
    for (int i = 0; i < real->n; i++) tmax = fmax(tmax, real->ev[i].ts_us + real->ev[i].dur_us);
    snprintf(path, sizeof path, "%s/compare.gp", dir);
    if (!(o = dm_out_open(path, err))) return -1;
    FILE *f = dm_out_file(o);
    int lanes = nr * DM_STREAM__COUNT;
    fprintf(f, "# compare.gp: predicted (%s) against measured (%s) timelines; written by dmuon compare.\n"
               "# Run from anywhere: gnuplot -e \"dir='%s'\" compare.gp (dir defaults to the script's folder).\n",
            sim->source, real->source, dir);
    fprintf(f, "if (!exists(\"dir\")) dir = '%s'\n", dir);
    fprintf(f, "set terminal pngcairo size 1400,%d font ',10'\n", 300 + 2 * 18 * lanes + 100);
    fprintf(f, "set output dir.'/timeline.png'\nset multiplot layout 2,1 title \"%s\\ncolours: forward blue, backward "
               "orange, broadcast green, reduce red, all-reduce purple, all-gather brown, reduce-scatter pink, ns grey, "
               "muon-update olive, adamw cyan\"\n",
            title);
    fprintf(f, "set xrange [0:%.6f]\nset yrange [-0.5:%d-0.5]\nset xlabel 'time from step start (ms)'\n", tmax / 1e3 * 1.02,
            lanes);
    fprintf(f, "set ytics (");
    for (int r = 0; r < nr; r++)
        for (int s = 0; s < DM_STREAM__COUNT; s++) {
            dm_trace_event e = {0};
            e.rank = r;
            e.stream = s;
            fprintf(f, "%s\"r%d %s\" %d", r || s ? ", " : "", r, dm_stream_name((dm_stream)s), lane_of(&e, nr));
        }
    fprintf(f, ")\nset grid x\nunset key\n");
    fprintf(f, "set palette defined (0 '#1f77b4', 1 '#ff7f0e', 2 '#2ca02c', 3 '#d62728', 4 '#9467bd', 5 '#8c564b', "
               "6 '#e377c2', 7 '#7f7f7f', 8 '#bcbd22', 9 '#17becf', 10 '#000000')\nset cbrange [0:10]\nunset colorbox\n");
    fprintf(f, "set title 'predicted (%s)'\n", sim->source);
    fprintf(f, "plot dir.'/timeline_predicted.dat' using 2:1:($3-$2):(0):4 with vectors nohead lw 8 lc palette\n");
    fprintf(f, "set title 'measured (%s)'\n", real->source);
    fprintf(f, "plot dir.'/timeline_measured.dat' using 2:1:($3-$2):(0):4 with vectors nohead lw 8 lc palette\n");
    fprintf(f, "unset multiplot\n");
    if (n_ops) /* gnuplot refuses a plot with no points */
        fprintf(f, "set terminal pngcairo size 800,700 font ',10'\nset output dir.'/ops.png'\n"
               "set title 'op durations: predicted against measured (%s)'\nset logscale xy\nset autoscale\n"
               "unset yrange\nset ytics auto\nset key top left\nset xlabel 'measured (ms)'\nset ylabel 'predicted (ms)'\n"
               "plot dir.'/ops.dat' using 1:2:3 with points pt 7 ps 0.6 lc palette title 'ops', x with lines lc 'black' "
               "title 'predicted = measured'\n",
            title);
    if (dm_out_commit(o, err)) return -1;
    if (!dm_on_path("gnuplot")) return 0;
    char cmd[8800];
    snprintf(cmd, sizeof cmd, "gnuplot '%s/compare.gp' 2>'%s/gnuplot.log'", dir, dir);
    if (system(cmd) != 0) return dm_err_set(err, "gnuplot failed (see %s/gnuplot.log)", dir);
    if (plotted) *plotted = 1;
    return 0;
}
