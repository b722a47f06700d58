/* compare.c: predicted versus measured traces (compare.h). */
#include "compare.h"

#include <gsl/gsl_statistics_double.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "csvjson.h"
#include "json.h"
#include "outfile.h"
#include "paths.h"
#include "plot.h"

void cmp_opts_default(cmp_opts *o) { o->min_op_us = 1.0; }

double cmp_rel_err(double predicted, double measured)
{
    if (measured == 0) return predicted == 0 ? 0 : predicted > 0 ? INFINITY : -INFINITY;
    return (predicted - measured) / measured;
}

int cmp_phase_held(const dm_phases *pred, const dm_phases *meas, int p)
{
    return p == DM_PHASE_STEP || meas->us[p] >= 0.01 * meas->us[DM_PHASE_STEP] ||
           pred->us[p] >= 0.01 * pred->us[DM_PHASE_STEP];
}

int cmp_phase_misses(const dm_phases *pred, const dm_phases *meas, int p, double max_pct)
{
    return cmp_phase_held(pred, meas, p) && !(fabs(cmp_rel_err(pred->us[p], meas->us[p])) * 100 <= max_pct);
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Quantile q of v[0..n-1] (sorted in place), linear between order statistics. */
double cmp_quantile(double *v, int n, double q)
{
    if (n <= 0) return NAN;
    if (n > 1) qsort(v, (size_t)n, sizeof *v, cmp_double);
    return gsl_stats_quantile_from_sorted_data(v, 1, (size_t)n, q); /* linear between neighbours */
}

int cmp_traces(const dm_trace *sim, const dm_trace *real, const cmp_opts *o, cmp_result *out, dm_err *err)
{
    cmp_opts def;
    if (!o) {
        cmp_opts_default(&def);
        o = &def;
    }
    memset(out, 0, sizeof *out);
    if (dm_phases_trace(sim, &out->sim, err) || dm_phases_trace(real, &out->real, err)) return -1;
    out->metadata_differs = strcmp(sim->model, real->model) || strcmp(sim->strategy, real->strategy) ||
                            sim->nranks != real->nranks;
    dm_trace_index ri;
    if (dm_trace_index_build(real, &ri, err)) return -1;
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
        int j = dm_trace_index_find(&ri, s->rank, s->op);
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
            int j = dm_trace_index_find(&ri, s->rank, s->op);
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
    dm_trace_index_free(&ri);
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
    fprintf(f, "  predicted   %s: %s %s on %s, %d rank%s, %d ops\n", sim->source, sim->model, sim->strategy,
            sim->cluster, sim->nranks, sim->nranks == 1 ? "" : "s", sim->n);
    fprintf(f, "  measured    %s: %s %s on %s, %d rank%s, %d ops\n", real->source, real->model, real->strategy,
            real->cluster, real->nranks, real->nranks == 1 ? "" : "s", real->n);
    if (r->metadata_differs) fprintf(f, "  warning     the traces are of different programs (model, strategy or ranks)\n");
    if (!strcmp(real->source, "real-cpu"))
        fprintf(f, "  warning     the measured trace is the executor's CPU backend's: its times are a CPU's, not the\n"
                   "              GPUs of cluster %s the prediction is for\n", sim->cluster);
    fprintf(f, "  critical    rank %d predicted, rank %d measured\n\n", r->sim.rank, r->real.rank);
    fprintf(f, "# %-14s %14s %14s %9s\n", "phase", "predicted_ms", "measured_ms", "error");
    for (int p = 0; p < DM_PHASE__COMPARED; p++) {
        char e[32];
        pct(e, sizeof e, cmp_rel_err(r->sim.us[p], r->real.us[p]));
        fprintf(f, "  %-14s %14.3f %14.3f %9s\n", dm_phase_name((dm_phase)p), r->sim.us[p] / 1e3, r->real.us[p] / 1e3, e);
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

static void json_side(FILE *f, const char *key, const char *path, const dm_trace *t, int crit_rank)
{
    fprintf(f, "  \"%s\": {\"file\": ", key);
    json_write_string(f, path);
    fputs(", \"source\": ", f);
    json_write_string(f, t->source);
    fputs(", \"model\": ", f);
    json_write_string(f, t->model);
    fputs(", \"strategy\": ", f);
    json_write_string(f, t->strategy);
    fputs(", \"cluster\": ", f);
    json_write_string(f, t->cluster);
    fprintf(f, ", \"gpus\": %d, \"ops\": %d, \"critical_rank\": %d},\n", t->nranks, t->n, crit_rank);
}

void cmp_print_json(FILE *f, const char *sim_path, const dm_trace *sim, const char *real_path, const dm_trace *real,
                    const cmp_result *r, double max_err_pct)
{
    fputs("{\"format\": \"dmuon-compare-1\", \"model\": ", f);
    json_write_string(f, real->model);
    fputs(", \"cluster\": ", f);
    json_write_string(f, real->cluster);
    fputs(", \"strategy\": ", f);
    json_write_string(f, real->strategy);
    fprintf(f, ", \"gpus\": %d, \"metadata_differs\": %s,\n", real->nranks, r->metadata_differs ? "true" : "false");
    json_side(f, "predicted", sim_path, sim, r->sim.rank);
    json_side(f, "measured", real_path, real, r->real.rank);
    fputs("  \"phases\": [", f);
    for (int p = 0; p < DM_PHASE__COMPARED; p++) {
        fprintf(f, "%s\n    {\"phase\": \"%s\", ", p ? "," : "", dm_phase_name((dm_phase)p));
        json_write_member(f, "predicted_ms", r->sim.us[p] / 1e3, 6, ", ");
        json_write_member(f, "measured_ms", r->real.us[p] / 1e3, 6, ", ");
        json_write_member(f, "error_pct", 100 * cmp_rel_err(r->sim.us[p], r->real.us[p]), 6, ", ");
        fprintf(f, "\"held\": %s, \"exceeds_max_error\": %s}", cmp_phase_held(&r->sim, &r->real, p) ? "true" : "false",
                max_err_pct >= 0 && cmp_phase_misses(&r->sim, &r->real, p, max_err_pct) ? "true" : "false");
    }
    fputs("],\n  \"kinds\": [", f);
    int first = 1;
    for (int k = 0; k < DM_OP__COUNT; k++) {
        const cmp_kind *c = &r->kinds[k];
        if (!c->n_sim && !c->n_real) continue;
        fprintf(f, "%s\n    {\"kind\": \"%s\", \"ops_predicted\": %d, \"ops_measured\": %d, ", first ? "" : ",",
                dm_op_kind_name((dm_op_kind)k), c->n_sim, c->n_real);
        json_write_member(f, "predicted_ms", c->sim_us / 1e3, 6, ", ");
        json_write_member(f, "measured_ms", c->real_us / 1e3, 6, ", ");
        json_write_member(f, "error_pct", 100 * cmp_rel_err(c->sim_us, c->real_us), 6, ", ");
        fprintf(f, "\"n_err\": %d, ", c->n_err);
        json_write_member(f, "op_err_median_pct", 100 * c->err_median, 6, "}");
        first = 0;
    }
    fprintf(f, "],\n  \"ops\": {\"matched\": %d, \"only_predicted\": %d, \"only_measured\": %d, \"kind_mismatch\": %d, "
               "\"n_err\": %d, ", r->n_matched, r->n_sim_only, r->n_real_only, r->n_kind_mismatch, r->n_err);
    json_write_member(f, "abs_err_median_pct", 100 * r->abs_err_median, 6, ", ");
    json_write_member(f, "abs_err_p90_pct", 100 * r->abs_err_p90, 6, ", ");
    json_write_member(f, "err_median_pct", 100 * r->err_median, 6, ", ");
    json_write_member(f, "abs_us_median", r->abs_us_median, 6, ", ");
    json_write_member(f, "abs_us_p90", r->abs_us_p90, 6, "},\n  ");
    json_write_member(f, "max_error_pct", max_err_pct >= 0 ? max_err_pct : NAN, 6, "\n}\n");
}

int cmp_write_csv(const char *path, const dm_trace *sim, const cmp_result *r, dm_err *err)
{
    dm_out *o = dm_out_open(path, err);
    if (!o) return -1;
    FILE *f = dm_out_file(o);
    dm_csv_case(f, "dmuon-compare-1", sim->model, sim->cluster, sim->strategy, sim->nranks); /* the predicted case */
    fputs("\nsection,name,predicted_ms,measured_ms,error_pct,ops_predicted,ops_measured,op_err_median_pct\n", f);
    for (int p = 0; p < DM_PHASE__COMPARED; p++)
        fprintf(f, "phase,%s,%.6f,%.6f,%.4f,,,\n", dm_phase_name((dm_phase)p), r->sim.us[p] / 1e3, r->real.us[p] / 1e3,
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

/* ---- plots -------------------------------------------------------------------------------- */

/* The ranks that have events in either trace, sorted: one block of lanes each. */
typedef struct lanes {
    int *rank;
    int n;
} lanes;

static int cmp_int(const void *a, const void *b)
{
    int x = *(const int *)a, y = *(const int *)b;
    return (x > y) - (x < y);
}

static int lanes_build(const dm_trace *a, const dm_trace *b, lanes *l, dm_err *err)
{
    l->n = 0;
    if (!(l->rank = dm_malloc(((size_t)a->n + (size_t)b->n + 1) * sizeof *l->rank, err))) return -1;
    for (int i = 0; i < a->n; i++) l->rank[l->n++] = a->ev[i].rank;
    for (int i = 0; i < b->n; i++) l->rank[l->n++] = b->ev[i].rank;
    if (l->n > 1) qsort(l->rank, (size_t)l->n, sizeof *l->rank, cmp_int);
    int k = 0;
    for (int i = 0; i < l->n; i++)
        if (!k || l->rank[i] != l->rank[k - 1]) l->rank[k++] = l->rank[i];
    l->n = k;
    return 0;
}

/* One lane per (rank, stream), the lowest rank on top. */
static int lane_of(const lanes *l, int rank, int stream)
{
    const int *at = bsearch(&rank, l->rank, (size_t)l->n, sizeof *l->rank, cmp_int);
    int i = at ? (int)(at - l->rank) : 0;
    return (l->n - 1 - i) * DM_STREAM__COUNT + (DM_STREAM__COUNT - 1 - stream);
}

static int write_timeline(const dm_trace *t, const lanes *l, const char *path, dm_err *err)
{
    dm_out *o = dm_out_open(path, err);
    if (!o) return -1;
    FILE *f = dm_out_file(o);
    char q[3][400];
    fprintf(f, "# %s trace: %s %s, one row per op\n# lane start_ms end_ms kind_index kind rank stream op\n",
            plot_quote(t->source, q[0], sizeof q[0]), plot_quote(t->model, q[1], sizeof q[1]),
            plot_quote(t->strategy, q[2], sizeof q[2]));
    for (int i = 0; i < t->n; i++) {
        const dm_trace_event *e = &t->ev[i];
        if (e->kind == DM_OP_WAIT) continue;
        fprintf(f, "%d %.6f %.6f %d %s %d %s %d\n", lane_of(l, e->rank, e->stream), e->ts_us / 1e3,
                (e->ts_us + e->dur_us) / 1e3, (int)e->kind, dm_op_kind_name(e->kind), e->rank,
                dm_stream_name((dm_stream)e->stream), e->op);
    }
    return dm_out_commit(o, err);
}

/* DIR/ops.dat: measured against predicted duration of the matched ops; *n_ops gets their count. */
static int write_ops(const dm_trace *sim, const dm_trace *real, const char *path, int *n_ops, dm_err *err)
{
    dm_trace_index ri;
    if (dm_trace_index_build(real, &ri, err)) return -1;
    dm_out *o = dm_out_open(path, err);
    if (!o) {
        dm_trace_index_free(&ri);
        return -1;
    }
    fprintf(dm_out_file(o), "# matched ops (rank, op id)\n# measured_ms predicted_ms kind_index kind rank op\n");
    *n_ops = 0;
    for (int i = 0; i < sim->n; i++) {
        const dm_trace_event *s = &sim->ev[i];
        int j = dm_trace_index_find(&ri, s->rank, s->op);
        if (j < 0 || real->ev[j].kind != s->kind || s->kind == DM_OP_WAIT || real->ev[j].dur_us <= 0 || s->dur_us <= 0)
            continue;
        fprintf(dm_out_file(o), "%.6f %.6f %d %s %d %d\n", real->ev[j].dur_us / 1e3, s->dur_us / 1e3, (int)s->kind,
                dm_op_kind_name(s->kind), s->rank, s->op);
        (*n_ops)++;
    }
    dm_trace_index_free(&ri);
    return dm_out_commit(o, err);
}

/* The script DIR/compare.gp: reads the data files from `dir` (default: its own folder, as
 * written), draws into `outdir` (default: dir). Every string from the traces or the command
 * line is in a single-quoted literal (plot_quote). */
static int write_script(const dm_trace *sim, const dm_trace *real, const lanes *l, const char *dir, const char *title,
                        int n_ops, const char *path, dm_err *err)
{
    dm_out *o = dm_out_open(path, err);
    if (!o) return -1;
    FILE *f = dm_out_file(o);
    char qs[400], qr[400], qd[8400], qt[1100];
    plot_quote(sim->source, qs, sizeof qs);
    plot_quote(real->source, qr, sizeof qr);
    plot_quote(dir, qd, sizeof qd);
    plot_quote(title, qt, sizeof qt);
    double tmax = 0;
    for (int i = 0; i < sim->n; i++) tmax = fmax(tmax, sim->ev[i].ts_us + sim->ev[i].dur_us);
    for (int i = 0; i < real->n; i++) tmax = fmax(tmax, real->ev[i].ts_us + real->ev[i].dur_us);
    int n_lanes = l->n * DM_STREAM__COUNT;
    fprintf(f, "# compare.gp: predicted (%s) against measured (%s) timelines; written by dmuon compare.\n"
               "# Run from anywhere: gnuplot -e \"dir='DIR'\" compare.gp (dir defaults to '%s').\n",
            qs, qr, qd);
    fprintf(f, "if (!exists(\"dir\")) dir = '%s'\nif (!exists(\"outdir\")) outdir = dir\ntitle_text = '%s'\n", qd, qt);
    fprintf(f, "set terminal pngcairo size 1400,%d font ',10'\n", 300 + 2 * 18 * n_lanes + 100);
    fprintf(f, "set output outdir.'/timeline.png'\nset multiplot layout 2,1 title title_text.\"\\ncolours: forward blue, "
               "backward orange, broadcast green, reduce red, all-reduce purple, all-gather brown, reduce-scatter pink, "
               "ns grey, muon-update olive, adamw cyan\"\n");
    fprintf(f, "set xrange [0:%.6f]\nset yrange [-0.5:%d-0.5]\nset xlabel 'time from step start (ms)'\n", tmax / 1e3 * 1.02,
            n_lanes);
    fprintf(f, "set ytics (");
    for (int r = 0; r < l->n; r++)
        for (int s = 0; s < DM_STREAM__COUNT; s++)
            fprintf(f, "%s'r%d %s' %d", r || s ? ", " : "", l->rank[r], dm_stream_name((dm_stream)s),
                    lane_of(l, l->rank[r], s));
    fprintf(f, ")\nset grid x\nunset key\n");
    fprintf(f, "set palette defined (0 '#1f77b4', 1 '#ff7f0e', 2 '#2ca02c', 3 '#d62728', 4 '#9467bd', 5 '#8c564b', "
               "6 '#e377c2', 7 '#7f7f7f', 8 '#bcbd22', 9 '#17becf', 10 '#000000')\nset cbrange [0:10]\nunset colorbox\n");
    fprintf(f, "set title 'predicted (%s)'\n", qs);
    fprintf(f, "plot dir.'/timeline_predicted.dat' using 2:1:($3-$2):(0):4 with vectors nohead lw 8 lc palette\n");
    fprintf(f, "set title 'measured (%s)'\n", qr);
    fprintf(f, "plot dir.'/timeline_measured.dat' using 2:1:($3-$2):(0):4 with vectors nohead lw 8 lc palette\n");
    fprintf(f, "unset multiplot\n");
    if (n_ops) /* gnuplot refuses a plot with no points */
        fprintf(f, "set terminal pngcairo size 800,700 font ',10'\nset output outdir.'/ops.png'\n"
                   "set title 'op durations: predicted against measured ('.title_text.')'\nset logscale xy\nset autoscale\n"
                   "unset yrange\nset ytics auto\nset key top left\nset xlabel 'measured (ms)'\nset ylabel 'predicted (ms)'\n"
                   "plot dir.'/ops.dat' using 1:2:3 with points pt 7 ps 0.6 lc palette title 'ops', x with lines lc 'black' "
                   "title 'predicted = measured'\n");
    return dm_out_commit(o, err);
}

int cmp_write_plots(const dm_trace *sim, const dm_trace *real, const char *dir, const char *title, int *plotted,
                    dm_err *err)
{
    if (plotted) *plotted = 0;
    if (dm_mkdir_p(dir, err)) return -1;
    lanes l;
    if (lanes_build(sim, real, &l, err)) return -1;
    char path[4200], log[4200];
    int n_ops = 0, rc = -1;
    snprintf(path, sizeof path, "%s/timeline_predicted.dat", dir);
    if (write_timeline(sim, &l, path, err)) goto out;
    snprintf(path, sizeof path, "%s/timeline_measured.dat", dir);
    if (write_timeline(real, &l, path, err)) goto out;
    snprintf(path, sizeof path, "%s/ops.dat", dir);
    if (write_ops(sim, real, path, &n_ops, err)) goto out;
    snprintf(path, sizeof path, "%s/compare.gp", dir);
    if (write_script(sim, real, &l, dir, title, n_ops, path, err)) goto out;
    rc = 0;
    if (!plot_available()) goto out;
    static const char *const pngs[] = {"timeline.png", "ops.png"};
    snprintf(log, sizeof log, "%s/gnuplot.log", dir);
    if (plot_run(path, NULL, dir, pngs, 2, log, err)) rc = dm_err_set(err, "gnuplot failed (see %s/gnuplot.log)", dir);
    else if (plotted) *plotted = 1;
out:
    free(l.rank);
    return rc;
}
