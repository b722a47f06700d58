/* power.c: the power-limit model (power.h) and its fit from tools/power_probe.py's JSON.
 *
 * The fit, from the probe's phases (each from a cool card: 3 s idle, then 4 s of work):
 *   idle     the median NVML power over the last second of the idle pauses before the phases;
 *   ref      the reference GEMM (phase gemm-big) and copy (phase copy) rates in their first
 *            window (full clock);
 *   shares   per phase over its last half: g = GEMM time, c = copy time, the rest idle, per window
 *            length; u = the phase's GEMM rate in its first window over the reference's;
 *   copy     from the copy phase's power: idle + (P - idle) / c;
 *   gemm     least squares over the phases the limit did not slow (settled / first >= 0.99) of
 *            P = idle + (gemm - idle) g u + (copy - idle) c;
 *   slope    least squares over the phases it slowed of 1 - settled / first = slope (D - limit),
 *            D = that same demand;
 *   tau      the windows of the first 0.6 s of every slowed phase against the model run from the
 *            idle demand at each window's shares (a grid of 1 ms over 1..500 ms, relative
 *            residuals of the rate against the phase's first window). */
#include "power.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "json.h"

int dm_power_on(const dm_power *p)
{
    return p && p->limit_w > 0 && p->gemm_w > p->limit_w && p->slope > 0 && p->tau_ms > 0 && p->ref_flops > 0 &&
           p->ref_Bps > 0;
}

const char *dm_power_missing(const dm_power *p)
{
    if (!(p->limit_w > 0)) return "power.limit_w";
    if (!(p->gemm_w > 0)) return "power.gemm_w";
    if (!(p->copy_w > 0)) return "power.copy_w";
    if (!(p->idle_w > 0)) return "power.idle_w";
    if (!(p->slope > 0)) return "power.slope";
    if (!(p->tau_ms > 0)) return "power.tau_ms";
    if (!(p->ref_flops > 0)) return "power.ref_tflops";
    if (!(p->ref_Bps > 0)) return "power.ref_GBps";
    if (!(p->gemm_w > p->limit_w)) return "power.gemm_w";
    return NULL;
}

int dm_power_check(const dm_power *p, const char *where, dm_err *err)
{
    const char *miss = dm_power_missing(p);
    if (!miss) return 0;
    if (!strcmp(miss, "power.gemm_w") && p->gemm_w > 0)
        return dm_err_set(err, "%s: power.gemm_w (%g W) must be over power.limit_w (%g W): a GPU whose GEMMs stay under "
                          "its limit needs no power model", where, p->gemm_w, p->limit_w);
    return dm_err_set(err, "%s: the power model needs every power.* key (dmuon calibrate --power writes them): %s is "
                      "missing", where, miss);
}

double dm_power_demand(const dm_power *p, double flops, double bytes, double us)
{
    if (!(us > 0)) return p->idle_w;
    double uc = flops / (us * 1e-6 * p->ref_flops), um = bytes / (us * 1e-6 * p->ref_Bps);
    uc = uc > 1 ? 1 : uc > 0 ? uc : 0;
    um = um > 1 ? 1 : um > 0 ? um : 0;
    if (p->activity_exp > 0 && p->activity_exp != 1 && uc > 0) uc = pow(uc, p->activity_exp);
    double P = p->idle_w + (p->gemm_w - p->idle_w) * uc + (p->copy_w - p->idle_w) * um;
    double top = p->gemm_w > p->copy_w ? p->gemm_w : p->copy_w;
    return P > top ? top : P;
}

double dm_power_full_us_held(const dm_power *p, double flops, double bytes, double us)
{
    if (!(us > 0) || !dm_power_on(p)) return us;
    double full = us; /* falls monotonically to the fixed point (the demand is capped) */
    for (int i = 0; i < 50; i++) {
        double s = dm_power_clock(p, dm_power_demand(p, flops, bytes, full));
        double c = dm_power_clock_share(p, bytes, full);
        double nf = us / (c / s + 1 - c);
        int done = fabs(nf - full) <= 1e-9 * us;
        full = nf;
        if (done) break;
    }
    return full;
}

double dm_power_demand_held(const dm_power *p, double flops, double bytes, double us)
{
    if (!(us > 0) || !dm_power_on(p)) return dm_power_demand(p, flops, bytes, us);
    return dm_power_demand(p, flops, bytes, dm_power_full_us_held(p, flops, bytes, us));
}

double dm_power_tick_us(const dm_power *p)
{
    double tau = p->tau_fall_ms > 0 && p->tau_fall_ms < p->tau_ms ? p->tau_fall_ms : p->tau_ms;
    return tau * 1e3 / 4;
}

double dm_power_advance(const dm_power *p, double D, double P, double dt_us)
{
    if (!(dt_us > 0)) return D;
    double tau = P < D && p->tau_fall_ms > 0 ? p->tau_fall_ms : p->tau_ms;
    return P + (D - P) * exp(-dt_us / (tau * 1e3));
}

void dm_power_step(const dm_power *p, dm_power_st *st, double P, double dt_us)
{
    if (!(dt_us > 0)) return;
    if (P >= st->D) {
        st->held_us = 0;
    } else if (p->hold_ms > 0) {
        double h = p->hold_ms * 1e3 - st->held_us;
        if (h > dt_us) h = dt_us;
        if (h > 0) st->held_us += h, dt_us -= h;
    }
    st->D = dm_power_advance(p, st->D, P, dt_us);
}

double dm_power_clock(const dm_power *p, double D)
{
    double s = 1 - p->slope * (D > p->limit_w ? D - p->limit_w : 0);
    return s < DM_POWER_MIN_S ? DM_POWER_MIN_S : s;
}

double dm_power_clock_share(const dm_power *p, double bytes, double us)
{
    if (!(us > 0) || !(p->ref_Bps > 0)) return 1;
    double m = bytes / (us * 1e-6 * p->ref_Bps);
    return m >= 1 ? 0 : m > 0 ? 1 - m : 1;
}

double dm_power_time_factor(double s, double share)
{
    if (share < 0) share = 0;
    if (share > 1) share = 1;
    return share / s + (1 - share);
}

double dm_power_mean_clock(const dm_power *p, dm_power_st *st, double P, double dt_us)
{
    if (!(dt_us > 0)) return dm_power_clock(p, st->D);
    int n = (int)ceil(dt_us / (dm_power_tick_us(p) / 2));
    if (n < 1) n = 1;
    if (n > 64) n = 64;
    double h = dt_us / n, s = 0;
    for (int i = 0; i < n; i++) {
        double a = dm_power_clock(p, st->D);
        dm_power_step(p, st, P, h);
        s += 0.5 * (a + dm_power_clock(p, st->D));
    }
    return s / n;
}

void dm_power_along(const dm_power *p, dm_power_op *ops, int n, double gap_us, int passes)
{
    if (n < 1) return;
    dm_power_st st = {p->idle_w, 0};
    for (int pass = 0; pass < passes; pass++) {
        if (pass) dm_power_step(p, &st, p->idle_w, gap_us);
        double end = ops[0].t0;
        for (int j = 0; j < n; j++) {
            dm_power_op *o = &ops[j];
            if (o->t0 > end) dm_power_step(p, &st, p->idle_w, o->t0 - end);
            o->s = dm_power_mean_clock(p, &st, o->P, o->dur);
            if (o->t0 + o->dur > end) end = o->t0 + o->dur;
        }
    }
}

/* ---- the fit ------------------------------------------------------------------------------ */

typedef struct phase {
    const char *name;
    double first, settled, power, g, c, u;
    const jv *windows;
    double win_ms;
} phase;

/* The full-clock demand of a probe phase's mix: GEMMs (at u of the reference rate) g of the
 * time, copies c of it, idle the rest. */
static double mix_demand(const dm_power *p, double g, double u, double c)
{
    return p->idle_w + (p->gemm_w - p->idle_w) * g * u + (p->copy_w - p->idle_w) * c;
}

/* A probe phase with GEMMs for the fit: 1 when the limit slowed it (its settled rate under 0.99 of
 * its first window's), 0 when it ran at full clock, -1 without GEMMs to fit on. */
static int phase_slowed(const phase *x)
{
    if (x->g < 0.05 || x->first <= 0) return -1;
    return x->settled / x->first < 0.99;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double num_of(const jv *o, const char *k)
{
    const jv *v = jv_get(o, k);
    return v && v->type == JV_NUMBER ? v->num : NAN;
}

/* The model's windows of the slowed phases for tau (the other parameters fixed): each phase
 * from the idle demand, each window at its own GEMM and copy shares, its GEMM rate relative to
 * the phase's first window against the model's mean clock relative to the first window's; the
 * sum of squared relative residuals over the first 0.6 s. */
static double tau_ss(dm_power *p, const phase *ph, int np, double tau_ms, int *n_out)
{
    p->tau_ms = tau_ms;
    double ss = 0;
    int n = 0;
    for (int i = 0; i < np; i++) {
        const phase *x = &ph[i];
        if (phase_slowed(x) != 1) continue;
        dm_power_st st = {p->idle_w, 0};
        double s0 = 0, m0 = 0;
        for (int k = 0; k < x->windows->n; k++) {
            const jv *w = x->windows->items[k];
            double t = num_of(w, "t_ms"), meas = num_of(w, "tflops"), gm = num_of(w, "gemm_ms"), cm = num_of(w, "copy_ms");
            if (!(t < 600)) break;
            double g = gm > 0 ? gm / x->win_ms : 0, c = cm > 0 ? cm / x->win_ms : 0;
            if (g + c > 1) g /= g + c, c = 1 - g;
            double P = mix_demand(p, g, x->u, c);
            double sm = dm_power_mean_clock(p, &st, P, x->win_ms * 1e3);
            if (!(meas > 0)) continue;
            if (!k) {
                s0 = sm, m0 = meas;
                continue;
            }
            if (!(s0 > 0) || !(m0 > 0)) continue;
            double r = (sm / s0) / (meas / m0) - 1;
            ss += r * r;
            n++;
        }
    }
    *n_out = n;
    return ss;
}

int dm_power_fit(const char *path, dm_power *out, double residual[3], char *desc, size_t desc_size, FILE *log,
                 dm_err *err)
{
    memset(out, 0, sizeof *out);
    for (int i = 0; i < 3; i++) residual[i] = 0;
    jv *root = jv_parse_file(path, err);
    if (!root) return -1;
    int rc = -1, np = 0, ns = 0;
    phase *ph = NULL;
    double *idle = NULL;
    const jv *arr = NULL;
    if (jv_req_num(root, "power_limit_w", 1, 1e5, path, &out->limit_w, err) ||
        jv_req(root, "phases", JV_ARRAY, path, &arr, err))
        goto out;
    if (!(ph = dm_calloc((size_t)arr->n + 1, sizeof *ph, err))) goto out;
    int cap = 0;
    for (int i = 0; i < arr->n; i++) {
        const jv *s = jv_get(arr->items[i], "samples");
        cap += s && s->type == JV_ARRAY ? s->n : 0;
    }
    if (!(idle = dm_malloc(((size_t)cap + 1) * sizeof *idle, err))) goto out;
    const phase *big = NULL, *copy = NULL;
    for (int i = 0; i < arr->n; i++) {
        const jv *o = arr->items[i];
        phase *x = &ph[np];
        const jv *s = NULL;
        if (o->type != JV_OBJECT) {
            dm_err_set(err, "%s:%d:%d: expected a phase object", path, o->line, o->col);
            goto out;
        }
        if (jv_req_str(o, "phase", path, &x->name, err) || jv_req_num(o, "first", 0, 1e9, path, &x->first, err) ||
            jv_req_num(o, "settled", 0, 1e9, path, &x->settled, err) ||
            jv_req_num(o, "power_w", 0, 1e5, path, &x->power, err) ||
            jv_req(o, "windows", JV_ARRAY, path, &x->windows, err) || jv_req(o, "samples", JV_ARRAY, path, &s, err))
            goto out;
        /* idle: the last second of the pause before the phase */
        for (int k = 0; k < s->n; k++) {
            const jv *e = s->items[k];
            if (e->type == JV_ARRAY && e->n >= 2 && e->items[0]->type == JV_NUMBER && e->items[1]->type == JV_NUMBER &&
                e->items[0]->num >= -1.0 && e->items[0]->num < 0)
                idle[ns++] = e->items[1]->num;
        }
        int nw = x->windows->n;
        if (nw < 4) {
            dm_err_set(err, "%s:%d:%d: phase %s: expected at least 4 windows, found %d", path, o->line, o->col, x->name, nw);
            goto out;
        }
        x->win_ms = num_of(x->windows->items[1], "t_ms") - num_of(x->windows->items[0], "t_ms");
        if (!(x->win_ms > 0)) {
            dm_err_set(err, "%s: phase %s: windows without increasing t_ms", path, x->name);
            goto out;
        }
        double gs = 0, cs = 0;
        for (int k = nw / 2; k < nw; k++) {
            double gm = num_of(x->windows->items[k], "gemm_ms"), cm = num_of(x->windows->items[k], "copy_ms");
            gs += gm > 0 ? gm : 0, cs += cm > 0 ? cm : 0;
        }
        double tot = (nw - nw / 2) * x->win_ms;
        x->g = gs / tot, x->c = cs / tot;
        if (x->g + x->c > 1) { /* windows are timed by events: a little over the wall */
            double k = 1 / (x->g + x->c);
            x->g *= k, x->c *= k;
        }
        if (!strcmp(x->name, "gemm-big")) big = x;
        if (!strcmp(x->name, "copy")) copy = x;
        np++;
    }
    if (!big || !copy || ns < 1) {
        dm_err_set(err, "%s: expected the probe's phases gemm-big and copy and idle samples before them (power_probe.py "
                   "--json)", path);
        goto out;
    }
    qsort(idle, (size_t)ns, sizeof *idle, cmp_double);
    out->idle_w = idle[ns / 2];
    out->ref_flops = big->first * 1e12;
    out->ref_Bps = copy->first * 1e9;
    if (!(copy->c > 0.5) || !(out->ref_flops > 0) || !(out->ref_Bps > 0)) {
        dm_err_set(err, "%s: the copy phase ran copies %.0f%% of its time, the reference rates %g TFLOP/s and %g GB/s",
                   path, 100 * copy->c, big->first, copy->first);
        goto out;
    }
    out->copy_w = out->idle_w + (copy->power - out->idle_w) / copy->c;
    for (int i = 0; i < np; i++) ph[i].u = ph[i].g > 0 ? ph[i].first / big->first : 0;
    /* gemm from the phases at full clock */
    double sxy = 0, sxx = 0;
    int nfree = 0, nthr = 0;
    for (int i = 0; i < np; i++) {
        const phase *x = &ph[i];
        if (phase_slowed(x) != 0) continue;
        double xx = x->g * x->u, yy = x->power - out->idle_w - (out->copy_w - out->idle_w) * x->c;
        sxy += xx * yy, sxx += xx * xx;
        nfree++;
    }
    if (!nfree || !(sxx > 0)) {
        dm_err_set(err, "%s: no phase with GEMMs ran at full clock (settled / first >= 0.99): the GEMM's demand is not "
                   "separable", path);
        goto out;
    }
    out->gemm_w = out->idle_w + sxy / sxx;
    double r0 = 0;
    for (int i = 0; i < np; i++) {
        const phase *x = &ph[i];
        if (phase_slowed(x) != 0) continue;
        double P = mix_demand(out, x->g, x->u, x->c);
        r0 += (P / x->power - 1) * (P / x->power - 1);
    }
    residual[0] = sqrt(r0 / nfree);
    /* slope from the phases the limit slowed */
    double sdd = 0, sdl = 0;
    for (int i = 0; i < np; i++) {
        const phase *x = &ph[i];
        if (phase_slowed(x) != 1) continue;
        double D = mix_demand(out, x->g, x->u, x->c);
        if (D <= out->limit_w) continue;
        sdd += (D - out->limit_w) * (D - out->limit_w), sdl += (1 - x->settled / x->first) * (D - out->limit_w);
        nthr++;
    }
    if (!nthr || !(sdl > 0)) {
        dm_err_set(err, "%s: no phase was slowed by the %.0f W limit with a demand over it (gemm %.0f W): no slope to fit",
                   path, out->limit_w, out->gemm_w);
        goto out;
    }
    out->slope = sdl / sdd;
    double r1 = 0;
    for (int i = 0; i < np; i++) {
        const phase *x = &ph[i];
        if (phase_slowed(x) != 1) continue;
        double D = mix_demand(out, x->g, x->u, x->c);
        double r = dm_power_clock(out, D) / (x->settled / x->first) - 1;
        r1 += r * r;
    }
    residual[1] = sqrt(r1 / nthr);
    /* tau from the gemm-big windows */
    double best = INFINITY, bt = 0;
    int nt = 0;
    for (int t = 1; t <= 500; t++) {
        int n;
        double v = tau_ss(out, ph, np, t, &n);
        if (n && v < best) best = v, bt = t, nt = n;
    }
    out->tau_ms = bt;
    residual[2] = nt ? sqrt(best / nt) : 0;
    if (log)
        fprintf(log,
                "  power: limit %.0f W; idle %.0f W (%d samples); reference GEMM %.1f TFLOP/s, copy %.0f GB/s; copy "
                "%.0f W; GEMM %.0f W (%d phases at full clock, residual %.1f%%); slope %.3g per W over the limit (%d "
                "slowed phases, residual %.1f%%); tau %.0f ms (%d windows, residual %.1f%%)\n",
                out->limit_w, out->idle_w, ns, out->ref_flops / 1e12, out->ref_Bps / 1e9, out->copy_w, out->gemm_w, nfree,
                100 * residual[0], out->slope, nthr, 100 * residual[1], out->tau_ms, nt, 100 * residual[2]);
    if (desc)
        snprintf(desc, desc_size, "%s (power_probe.py): %d phases; GEMM demand from %d at full clock, slope from %d slowed, "
                 "tau from the slowed phases' first 0.6 s", path, np, nfree, nthr);
    if (!dm_power_on(out)) {
        dm_err_set(err, "%s: the fitted model does not slow anything (GEMM %.0f W under the %.0f W limit)", path,
                   out->gemm_w, out->limit_w);
        goto out;
    }
    rc = 0;
out:
    free(ph);
    free(idle);
    jv_free(root);
    return rc;
}
