/* calib.c: fitting the cost model's inputs from measurements, the calibration file, and applying
 * it to a cluster (calib.h). */
#define _POSIX_C_SOURCE 200809L
#include "calib.h"
#include "coll.h" /* dm_coll_staging_bytes, _copies */

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <gsl/gsl_errno.h>
#include <gsl/gsl_fit.h>

#include "collcost.h"
#include "compare.h"
#include "costs.h"
#include "json.h"
#include "lines.h"
#include "outfile.h"
#include "paths.h"
#include "phases.h"
#include "program.h"

#define FORMAT "dmuon-calib-1"

/* The name of collective i of the five (DM_OP_BROADCAST + i). */
#define COLL_NAME(i) dm_op_kind_name((dm_op_kind)(DM_OP_BROADCAST + (i)))

/* Keys a calibration may hold: the parameter table's DM_PARAM_CALIB rows (cluster.h), plus
 * costs, the kernel table. */
static const dm_param *calib_param(const char *k)
{
    const dm_param *p = dm_param_find(k);
    return p && (p->flags & DM_PARAM_CALIB) ? p : NULL;
}

static void utc_now(char *buf, size_t size)
{
    time_t t = time(NULL);
    struct tm tm;
    gmtime_r(&t, &tm);
    strftime(buf, size, "%Y-%m-%dT%H:%M:%SZ", &tm);
}

/* Provenance strings go into "; "-separated comments: no ';', '#' or newline in them. */
static void clean_copy(char *dst, size_t size, const char *src)
{
    snprintf(dst, size, "%s", src ? src : "");
    for (char *s = dst; *s; s++)
        if (*s == ';' || *s == '#' || *s == '\n' || *s == '\r') *s = ',';
}

int calib_fit_linear(const double *x, const double *y, int n, calib_fit *out, dm_err *err)
{
    memset(out, 0, sizeof *out);
    if (n < 2) return dm_err_set(err, "a linear fit needs at least 2 points, found %d", n);
    double *w = dm_malloc((size_t)n * sizeof *w, err);
    if (!w) return -1;
    for (int i = 0; i < n; i++) {
        if (!(y[i] > 0)) {
            free(w);
            return dm_err_set(err, "a time to fit is not positive (%g)", y[i]);
        }
        w[i] = 1.0 / (y[i] * y[i]);
    }
    double c00, c01, c11, chisq;
    gsl_error_handler_t *old = gsl_set_error_handler_off();
    int rc = gsl_fit_wlinear(x, 1, w, 1, y, 1, (size_t)n, &out->a, &out->b, &c00, &c01, &c11, &chisq);
    gsl_set_error_handler(old);
    free(w);
    if (rc || !isfinite(out->a) || !isfinite(out->b)) return dm_err_set(err, "the linear fit failed (%s)", gsl_strerror(rc));
    double s = 0;
    for (int i = 0; i < n; i++) {
        double r = (out->a + out->b * x[i] - y[i]) / y[i];
        s += r * r;
    }
    out->rel_rms = sqrt(s / n);
    out->n = n;
    return 0;
}

int calib_set(calib *c, const char *key, const char *value, const char *source, double residual, int points,
              dm_err *err)
{
    calib_entry *e = NULL;
    for (int i = 0; i < c->n; i++)
        if (!strcmp(c->e[i].key, key)) e = &c->e[i];
    if (!e) {
        if (c->n == CALIB_MAX_ENTRIES) return dm_err_set(err, "calibration: more than %d values", CALIB_MAX_ENTRIES);
        e = &c->e[c->n++];
    }
    memset(e, 0, sizeof *e);
    snprintf(e->key, sizeof e->key, "%s", key);
    snprintf(e->value, sizeof e->value, "%s", value);
    clean_copy(e->source, sizeof e->source, source);
    if (c->date[0]) snprintf(e->date, sizeof e->date, "%s", c->date);
    else utc_now(e->date, sizeof e->date);
    clean_copy(e->gpu, sizeof e->gpu, c->gpu[0] ? c->gpu : "-");
    e->residual = residual;
    e->points = points;
    return 0;
}

const calib_entry *calib_get(const calib *c, const char *key)
{
    for (int i = 0; i < c->n; i++)
        if (!strcmp(c->e[i].key, key)) return &c->e[i];
    return NULL;
}

static int set_num(calib *c, const char *key, double v, const char *source, double residual, int points, dm_err *err)
{
    char buf[64];
    snprintf(buf, sizeof buf, "%.6g", v);
    return calib_set(c, key, buf, source, residual, points, err);
}

static const char *base_name(const char *p)
{
    const char *s = strrchr(p, '/');
    return s ? s + 1 : p;
}

/* ---- collectives -------------------------------------------------------------------------- */

typedef struct comm_rows {
    int n[5], ranks[5];
    double x[5][128], y[5][128];
} comm_rows;

static int read_comm_csv(const char *path, double min_bytes, comm_rows *r, dm_err *err)
{
    memset(r, 0, sizeof *r);
    dm_lines *in = dm_lines_open(path, 1024, 64 << 20, err);
    if (!in) return -1;
    char *line;
    int ln = 0, header = 0, rc = 0, k;
    while ((k = dm_lines_next(in, &line, NULL, err)) != 0) {
        if (k < 0) {
            rc = -1;
            break;
        }
        ln = dm_lines_number(in);
        if (ln == 1 && strncmp(line, "# dmuon-comm-1", 14)) {
            rc = dm_err_set(err, "%s:1:1: expected '# dmuon-comm-1' (a dmuon bench comm --csv file)", path);
            break;
        }
        if (line[0] == '#' || !line[0]) continue;
        if (!header) {
            if (strncmp(line, "coll,bytes,count,ranks,time_us", 30)) {
                rc = dm_err_set(err, "%s:%d:1: expected the header 'coll,bytes,count,ranks,time_us,...'", path, ln);
                break;
            }
            header = 1;
            continue;
        }
        char name[32];
        double bytes, t, algbw, busbw;
        long long count;
        int ranks, col = 0;
        long wrong;
        if (sscanf(line, "%31[^,],%lf,%lld,%d,%lf,%lf,%lf,%ld%n", name, &bytes, &count, &ranks, &t, &algbw, &busbw, &wrong,
                   &col) != 8) {
            rc = dm_err_set(err, "%s:%d:1: expected 'coll,bytes,count,ranks,time_us,algbw_GBps,busbw_GBps,wrong'", path, ln);
            break;
        }
        int kind = dm_trace_kind_from_name(name), i = kind - DM_OP_BROADCAST;
        if (kind < 0 || i < 0 || i >= 5) {
            rc = dm_err_set(err, "%s:%d:1: expected a collective (broadcast, reduce, all-reduce, all-gather, "
                                 "reduce-scatter), found '%s'", path, ln, name);
            break;
        }
        if (wrong) {
            rc = dm_err_set(err, "%s:%d:%zu: %ld wrong elements: a failed measurement is not fitted", path, ln,
                            strlen(line) - strlen(strrchr(line, ',')) + 2, wrong);
            break;
        }
        if (!(t > 0) || !(bytes > 0) || ranks < 2) {
            rc = dm_err_set(err, "%s:%d:1: expected positive bytes and time and at least 2 ranks", path, ln);
            break;
        }
        if (r->n[i] && r->ranks[i] != ranks) {
            rc = dm_err_set(err, "%s:%d:1: %s measured on %d and %d ranks: one group size per file", path, ln, name,
                            r->ranks[i], ranks);
            break;
        }
        if (r->n[i] == 128 || bytes < min_bytes) continue;
        r->ranks[i] = ranks;
        r->x[i][r->n[i]] = bytes * collcost_busbw_factor((dm_op_kind)kind, ranks);
        r->y[i][r->n[i]++] = t;
    }
    dm_lines_close(in);
    if (!rc && !header) rc = dm_err_set(err, "%s: no rows", path);
    return rc;
}

int calib_fit_comm(calib *c, const char *csv_path, const dm_cluster *base, double min_bytes, FILE *log, dm_err *err)
{
    comm_rows r;
    if (read_comm_csv(csv_path, min_bytes, &r, err)) return -1;
    calib_fit fit[5];
    int have[5] = {0}, n_ranks = 0;
    double busbw[5] = {0};
    for (int i = 0; i < 5; i++) {
        if (r.n[i] < 2) continue;
        if (calib_fit_linear(r.x[i], r.y[i], r.n[i], &fit[i], err)) return -1;
        if (!(fit[i].b > 0)) return dm_err_set(err, "%s: %s: the fitted time does not grow with size", csv_path, COLL_NAME(i));
        have[i] = 1;
        busbw[i] = 1e6 / fit[i].b;
        n_ranks = r.ranks[i];
        if (log)
            fprintf(log, "  %-14s %2d ranks %3d sizes: latency %8.3f us, bus bandwidth %8.2f GB/s, residual %.1f%%\n",
                    COLL_NAME(i), r.ranks[i], r.n[i], fit[i].a, busbw[i] / 1e9, 100 * fit[i].rel_rms);
    }
    if (!n_ranks) return dm_err_set(err, "%s: no collective with 2 or more sizes to fit", csv_path);
    for (int i = 0; i < 5; i++)
        if (have[i] && r.ranks[i] != n_ranks)
            return dm_err_set(err, "%s: collectives measured on different rank counts", csv_path);
    int *ranks = dm_malloc((size_t)n_ranks * sizeof *ranks, err);
    if (!ranks) return -1;
    for (int i = 0; i < n_ranks; i++) ranks[i] = i;
    coll_topo t;
    int rc = collcost_topo(base, ranks, n_ranks, &t, err);
    free(ranks);
    if (rc) return -1;
    char src[512];
    const char *file = csv_path;
    int ar = DM_OP_ALLREDUCE - DM_OP_BROADCAST, ref = have[ar] ? ar : -1;
    if (ref < 0)
        for (int i = 0; i < 5 && ref < 0; i++)
            if (have[i]) ref = i;
    if (t.n_nodes == 1) {
        /* Inside a node: the all-reduce bus bandwidth against NVLink, the others relative to it. */
        if (have[ar]) {
            snprintf(src, sizeof src, "%s (all-reduce, %d sizes, %d ranks, bus bandwidth %.2f GB/s)", file, fit[ar].n,
                     n_ranks, busbw[ar] / 1e9);
            if (set_num(c, "nvlink_bus_efficiency", base->nvlink_bus_efficiency * busbw[ar] / t.bus_Bps, src,
                        fit[ar].rel_rms, fit[ar].n, err))
                return -1;
            for (int i = 0; i < 5; i++) {
                if (!have[i]) continue;
                char key[48];
                snprintf(key, sizeof key, "busbw_scale.%s", COLL_NAME(i));
                snprintf(src, sizeof src, "%s (%s / all-reduce bus bandwidth, %d sizes)", file, COLL_NAME(i), fit[i].n);
                if (set_num(c, key, busbw[i] / busbw[ar], src, fit[i].rel_rms, fit[i].n, err)) return -1;
            }
        } else if (log) {
            fprintf(log, "  (no all-reduce rows: nvlink_bus_efficiency and busbw_scale not fitted)\n");
        }
    } else {
        /* Across nodes: the NICs are taken as the bottleneck (the usual case). */
        snprintf(src, sizeof src, "%s (%s over %d nodes, %d sizes; NIC taken as the bottleneck)", file, COLL_NAME(ref),
                 t.n_nodes, fit[ref].n);
        double scale = (ref == ar ? 1 : base->busbw_scale[ref]);
        if (set_num(c, "nic_usable_Gbps", base->nic_Bps * busbw[ref] / (t.bus_Bps * scale) * 8 / 1e9, src,
                    fit[ref].rel_rms, fit[ref].n, err))
            return -1;
    }
    /* Latencies: the intercepts are base + (intra-node steps) x nvlink hop + (inter-node steps) x
     * network hop, ring steps by kind (collcost.h). */
    double xs[5], ys[5];
    int m = 0;
    for (int i = 0; i < 5; i++) {
        if (!have[i]) continue;
        dm_op_kind k = (dm_op_kind)(DM_OP_BROADCAST + i);
        int steps = k == DM_OP_ALLREDUCE ? 2 * (n_ranks - 1) : n_ranks - 1;
        int inter = k == DM_OP_ALLREDUCE ? 2 * (t.n_nodes - 1) : t.n_nodes - 1;
        xs[m] = t.n_nodes == 1 ? steps : inter;
        ys[m] = fit[i].a - (t.n_nodes == 1 ? 0 : base->base_latency_us + (steps - inter) * base->nvlink_latency_us);
        m++;
    }
    double lat_base = 0, lat_hop = 0, sq = 0;
    int distinct = 0;
    for (int i = 1; i < m; i++) distinct |= xs[i] != xs[0];
    if (t.n_nodes == 1 && distinct) {
        double c00, c01, c11, ss;
        gsl_error_handler_t *old = gsl_set_error_handler_off();
        gsl_fit_linear(xs, 1, ys, 1, (size_t)m, &lat_base, &lat_hop, &c00, &c01, &c11, &ss);
        gsl_set_error_handler(old);
    }
    if (t.n_nodes == 1 && (!distinct || lat_hop < 0 || lat_base < 0)) {
        /* Not separable (one step count, or a negative term): all of it in the base latency, or
         * all of it per hop when the base came out negative. */
        double mean = 0, per = 0;
        for (int i = 0; i < m; i++) mean += ys[i] / m, per += ys[i] / xs[i] / m;
        if (distinct && lat_base < 0) lat_base = 0, lat_hop = per;
        else lat_base = mean, lat_hop = 0;
    }
    if (t.n_nodes > 1) {
        for (int i = 0; i < m; i++) lat_hop += ys[i] / xs[i] / m;
        if (lat_hop < 0) lat_hop = 0;
    }
    for (int i = 0; i < m; i++) {
        double pred = (t.n_nodes == 1 ? lat_base : 0) + xs[i] * lat_hop;
        sq += ys[i] != 0 ? pow((pred - ys[i]) / ys[i], 2) : 0;
    }
    double res = m ? sqrt(sq / m) : -1;
    snprintf(src, sizeof src, "%s (intercepts of %d collective fits against ring step counts)", file, m);
    if (t.n_nodes == 1) {
        if (set_num(c, "base_latency_us", lat_base, src, res, m, err) ||
            set_num(c, "nvlink_latency_us", lat_hop, src, res, m, err))
            return -1;
    } else if (set_num(c, "net_latency_us", lat_hop, src, res, m, err)) {
        return -1;
    }
    if (log) {
        if (t.n_nodes == 1)
            fprintf(log, "  latency: base %.3f us + %.3f us per NVLink hop (residual %.1f%%)\n", lat_base, lat_hop, 100 * res);
        else
            fprintf(log, "  latency: %.3f us per network hop (residual %.1f%%)\n", lat_hop, 100 * res);
    }
    return 0;
}

/* ---- compute rates from a measured trace --------------------------------------------------- */

/* One compute op of the trace: measured duration, the model's time (fixed + work x: GEMMs of
 * ops the table does not price work = flops / peak and x the inverse efficiency; elementwise
 * work = bytes / HBM; NS work the table's time and x its scale; fixed: an elementwise kind's
 * launch, or a forward/backward op's kernels the table prices), the launch gaps inside it
 * (kernel_gap_us applies to them), and the fraction of it with a collective in flight on its
 * rank. FK_KERN: an op the table prices whole (a forward/backward op whose GEMMs all have rows,
 * an elementwise op the table's rows describe): x is not fitted, only the gap. */
typedef struct fit_op {
    int kind;          /* FK_* */
    double d_us, work_us, launch_us, overlap;
    double gaps;       /* kernel launches inside the op less one (forward/backward with work) */
    double table_us;   /* elementwise: the kernel table's time for it (0: no rows) */
    double tensors;    /* elementwise: tensors the op updates, each its own launches (1 without a plan);
                          NS: the matrices of its batch */
    double elems;      /* NS: elements of its matrices (the gradient check and momentum it runs) */
    double share;      /* the part comm_slowdown slows: forward/backward with work, its memory-bound
                          kernels' share of the table's time (dm_kernel_memory_bound); else 1 */
    /* the power-limit model (calib_fit_power): the op's rank and start, its work and full-clock
     * time (its demand), the compute-bound share of that time the clock slows, and the time
     * multiplier thr the model gives it where it ran (1 without the model) */
    int trace, rank;
    double t0, pw_flops, pw_bytes, pw_us, cshare, thr;
} fit_op;

enum { FK_FWD, FK_BWD, FK_UPD, FK_ADAMW, FK_NS, FK_KERN, FK__N };

/* Op i's measured time at its full rate: the time it would have taken with no collective beside
 * it under comm_slowdown f (the simulator's 1 - f share while one is in flight) and at full
 * clock (over thr, the power model's slowing where it ran). */
static double full_rate_us(const fit_op *o, double f) { return o->d_us * (1 - f * o->share * o->overlap) / o->thr; }

static int cmp_int(const void *a, const void *b)
{
    int x = *(const int *)a, y = *(const int *)b;
    return (x > y) - (x < y);
}

/* qsort: by the first double of each element (a double, or an [a, b) pair) */
static int cmp_first_double(const void *a, const void *b)
{
    const double *x = a, *y = b;
    return (x[0] > y[0]) - (x[0] < y[0]);
}

/* Per rank r < R of trace t, the union of its collectives' intervals (colls: from the rank's
 * arrival, ts - wait_us, to the end) or of its compute ops' (else), as disjoint intervals in
 * iv[2 * iv_off[r]] .. iv[2 * iv_off[r + 1]] (iv: room for t->n pairs; iv_off: R + 1). */
static void rank_intervals(const dm_trace *t, int R, int colls, double *iv, int *iv_off)
{
    int n_iv = 0;
    for (int r = 0; r < R; r++) {
        iv_off[r] = n_iv;
        int first = n_iv;
        for (int i = 0; i < t->n; i++) {
            const dm_trace_event *e = &t->ev[i];
            if (e->rank != r || !(e->dur_us > 0)) continue;
            if (colls ? !dm_op_is_collective(e->kind) : !dm_op_is_compute(e->kind)) continue;
            iv[2 * n_iv] = e->ts_us - (colls && e->wait_us > 0 ? e->wait_us : 0);
            iv[2 * n_iv + 1] = e->ts_us + e->dur_us;
            n_iv++;
        }
        n_iv = first + dm_iv_merge(iv + 2 * first, n_iv - first);
    }
    iv_off[R] = n_iv;
}

double calib_overlap_fraction(const double *iv, int n_iv, double a, double b)
{
    if (!(b > a)) return 0;
    double o = 0;
    for (int i = 0; i < n_iv; i++) {
        double lo = iv[2 * i] > a ? iv[2 * i] : a, hi = iv[2 * i + 1] < b ? iv[2 * i + 1] : b;
        if (hi > lo) o += hi - lo;
    }
    return o / (b - a);
}

/* For a given f: the kernel gap g (x[FK_KERN]) from the ops the table prices whole, then per
 * kind the rate parameter x (and, for elementwise kinds, the per-op overhead a) minimising the
 * relative residuals of pred = (fixed + g gaps + work x) / (1 - f o): the residual is linear in
 * (g) and in (a, x), so the normal equations give them. GEMM kinds keep their fixed part; an
 * elementwise kind whose overhead comes out negative or is not separable (one size) keeps the
 * GPU's launch floor; g < 0 is 0. Returns the sum of squared residuals over all ops; per kind
 * ss[], cnt[], x[] and a[]. */
static double fit_rates(const fit_op *ops, int n, double f, int fit_gap, double x[FK__N], double a[FK__N], double ss[FK__N],
                        int cnt[FK__N])
{
    double s11[FK__N] = {0}, s1c[FK__N] = {0}, scc[FK__N] = {0}, s1[FK__N] = {0}, sc[FK__N] = {0}, sl[FK__N] = {0},
           slc[FK__N] = {0}, tot = 0, gg = 0, g1 = 0;
    for (int k = 0; k < FK__N; k++) x[k] = 0, a[k] = 0, ss[k] = 0, cnt[k] = 0;
    for (int i = 0; i < n; i++) /* the gap: minimise sum ((fixed + g G) / q - 1)^2 over g */
        if (ops[i].kind == FK_KERN) {
            double q = full_rate_us(&ops[i], f), G = ops[i].gaps / q;
            gg += G * G, g1 += G * (1 - ops[i].launch_us / q);
            cnt[FK_KERN]++;
        }
    double g = fit_gap && gg > 0 && g1 > 0 ? g1 / gg : 0;
    x[FK_KERN] = g;
    for (int i = 0; i < n; i++) {
        int k = ops[i].kind;
        if (k == FK_KERN) continue;
        double q = full_rate_us(&ops[i], f), c = ops[i].work_us / q, fix = ops[i].launch_us + g * ops[i].gaps;
        double T = k == FK_UPD || k == FK_ADAMW ? ops[i].tensors : 1; /* the overhead a is per tensor */
        s11[k] += T * T / (q * q), s1c[k] += T * c / q, scc[k] += c * c, s1[k] += T / q, sc[k] += c;
        sl[k] += fix / q * c, slc[k] += c;
        a[k] = ops[i].launch_us / T;
        cnt[k]++;
    }
    for (int k = 0; k < FK__N; k++) {
        if (k == FK_KERN || !(scc[k] > 0)) continue;
        double det = s11[k] * scc[k] - s1c[k] * s1c[k];
        if ((k == FK_UPD || k == FK_ADAMW) && det > 1e-12 * s11[k] * scc[k]) {
            double ak = (s1[k] * scc[k] - s1c[k] * sc[k]) / det, xk = (s11[k] * sc[k] - s1c[k] * s1[k]) / det;
            if (ak >= 0 && xk > 0) {
                a[k] = ak, x[k] = xk;
                continue;
            }
        }
        x[k] = (slc[k] - sl[k]) / scc[k]; /* fixed parts as they are: minimise sum (fix/q + c x - 1)^2 over x */
    }
    for (int i = 0; i < n; i++) {
        int k = ops[i].kind;
        double q = full_rate_us(&ops[i], f);
        double fix = (k == FK_UPD || k == FK_ADAMW ? a[k] * ops[i].tensors : ops[i].launch_us) + g * ops[i].gaps;
        double r = (fix + ops[i].work_us * (k == FK_KERN ? 0 : x[k])) / q - 1;
        ss[k] += r * r;
        tot += r * r;
    }
    return tot;
}

/* comm_slowdown f on a 0.001 grid in [0, 0.95) (one parameter, a smooth objective): the f whose
 * rates fit the ops best, from f = 0 whose objective is `at0`; *f gets it (0 without a fit). */
static double best_slowdown(const fit_op *ops, int n, int fit_gap, int fit, double at0, double *f)
{
    double best = at0;
    *f = 0;
    if (fit)
        for (int i = 1; i < 950; i++) {
            double xi[FK__N], ai[FK__N], si[FK__N];
            int ci[FK__N];
            double v = fit_rates(ops, n, i / 1000.0, fit_gap, xi, ai, si, ci);
            if (v < best) best = v, *f = i / 1000.0;
        }
    return best;
}

/* The share of the compute ops' (slowable) time that collectives must overlap for comm_slowdown
 * to be fitted. */
#define CALIB_MIN_OVERLAP 0.02

/* A staging point: a one-rank reduce-scatter or all-gather that ran with no compute beside it
 * (under STAGE_ALONE of its time): its copies, its staging bytes (coll.h) and its duration. */
#define STAGE_ALONE 0.2
typedef struct stage_pt {
    double copies, bytes, d_us;
} stage_pt;

static const fit_op *g_sort_ops; /* qsort's context (the ops being ordered) */
static int cmp_op_start(const void *a, const void *b)
{
    const fit_op *x = &g_sort_ops[*(const int *)a], *y = &g_sort_ops[*(const int *)b];
    if (x->trace != y->trace) return x->trace - y->trace;
    if (x->rank != y->rank) return x->rank - y->rank;
    return (x->t0 > y->t0) - (x->t0 < y->t0);
}

/* The power model along the traces' compute ops: per trace and rank in time order,
 * dm_power_along (twice round the step: its end the start of the next, the steady state) at each
 * op's full-clock demand; each op's thr = the time multiplier at the mean clock it ran at.
 * ix: n ints and po: n ops of scratch. */
static void power_clock_ops(const dm_power *pw, fit_op *ops, int n, int *ix, dm_power_op *po)
{
    for (int i = 0; i < n; i++) ix[i] = i;
    g_sort_ops = ops;
    qsort(ix, (size_t)n, sizeof *ix, cmp_op_start);
    for (int lo = 0, hi; lo < n; lo = hi) {
        for (hi = lo + 1; hi < n && ops[ix[hi]].trace == ops[ix[lo]].trace && ops[ix[hi]].rank == ops[ix[lo]].rank;) hi++;
        for (int j = lo; j < hi; j++) {
            const fit_op *o = &ops[ix[j]];
            double us = o->pw_us > 0 ? o->pw_us : o->d_us;
            po[j - lo] = (dm_power_op){o->t0, o->d_us, dm_power_demand(pw, o->pw_flops, o->pw_bytes, us), 1};
        }
        dm_power_along(pw, po, hi - lo, 0, 2);
        for (int j = lo; j < hi; j++) ops[ix[j]].thr = dm_power_time_factor(po[j - lo].s, ops[ix[j]].cshare);
    }
}

/* Appends the compute ops of one trace (with its plan for NS ops) to *ops (capacity grows), and
 * its staging points to *stg. */
static int collect_ops(const char *trace_path, const char *program_path, const dm_gpu *gpu, const dm_costs *costs,
                       const dm_power *pw, fit_op **ops, int *n, int *n_ov, double **first, int *n_first, double **gaps, int *n_gaps,
                       double **solo, int *n_solo, double **ggaps, int *n_ggaps,
                       int *n_covered, int *n_uncovered, int first_trace, int trace_no, char *model, size_t model_size, char *desc,
                       size_t desc_size, stage_pt **stg, int *n_stg, dm_err *err)
{
    dm_trace *t = NULL;
    dm_program *p = NULL;
    double *seq = NULL;
    if (dm_trace_read(trace_path, &t, err)) return -1;
    if (!first_trace && strcmp(model, t->model)) { /* so that validation on the other models means something */
        dm_err_set(err, "%s is a trace of %s, an earlier one of %s: a calibration is fitted on one model's traces", trace_path,
                   t->model[0] ? t->model : "(no model)", model[0] ? model : "(no model)");
        dm_trace_free(t);
        return -1;
    }
    if (first_trace) snprintf(model, model_size, "%s", t->model);
    int rc = -1, R = t->nranks > 0 ? t->nranks : 1;
    if (program_path && (!costs || dm_program_load(program_path, &p, err))) {
        if (!costs) dm_err_set(err, "%s: NS ops are fitted against a kernel table: none given", program_path);
        dm_trace_free(t);
        return -1;
    }
    fit_op *grown = dm_realloc(*ops, ((size_t)*n + (size_t)t->n + 1) * sizeof *grown, err);
    double *iv = dm_malloc(((size_t)t->n + 1) * 2 * sizeof *iv, err);
    int *iv_off = dm_calloc((size_t)R + 2, sizeof *iv_off, err);
    if (grown) *ops = grown;
    if (!grown || !iv || !iv_off) goto out;
    if (p && p->nranks != R) {
        dm_err_set(err, "%s has %d ranks, the trace %s %d", program_path, p->nranks, trace_path, R);
        goto out;
    }
    /* per rank, when its first op started after the step's start (the executor's setup) */
    double *fg = dm_realloc(*first, ((size_t)*n_first + (size_t)R) * sizeof *fg, err);
    if (!fg) goto out;
    *first = fg;
    for (int r = 0; r < R; r++) {
        double m = -1;
        for (int i = 0; i < t->n; i++)
            if (t->ev[i].rank == r && (m < 0 || t->ev[i].ts_us < m)) m = t->ev[i].ts_us;
        if (m >= 0) fg[(*n_first)++] = m;
    }
    /* per rank, the GPU's idle time between consecutive compute ops (start of one less the end
     * of the one before it, by start time; negative differences, from overlapping ops, are 0).
     * One rank runs its collectives on the compute stream (program.h, dm_run_stream): there
     * they are ops of the sequence too, each a sample of solo_coll_us (its time and the idle
     * before it); the idle after it is a gap like any other. The idle after an NS op the
     * executor launched as a CUDA graph (the program's op not eager) is a sample of
     * graph_gap_us instead. seq: start, end, class (0 compute, 1 graph NS, 2 collective). */
    double *gg = dm_realloc(*gaps, ((size_t)*n_gaps + (size_t)t->n + 1) * sizeof *gg, err);
    if (!gg) goto out;
    *gaps = gg;
    double *so = dm_realloc(*solo, ((size_t)*n_solo + (size_t)t->n + 1) * sizeof *so, err);
    if (!so) goto out;
    *solo = so;
    double *gr = dm_realloc(*ggaps, ((size_t)*n_ggaps + (size_t)t->n + 1) * sizeof *gr, err);
    if (!gr) goto out;
    *ggaps = gr;
    seq = dm_malloc(((size_t)t->n + 1) * 3 * sizeof *seq, err);
    if (!seq) goto out;
    for (int r = 0; r < R; r++) {
        int k = 0;
        for (int i = 0; i < t->n; i++) {
            const dm_trace_event *e = &t->ev[i];
            if (e->rank != r || !(dm_op_is_compute(e->kind) || (R == 1 && dm_op_is_collective(e->kind)))) continue;
            const dm_op *pop = p && e->op >= 0 && e->op < p->ranks[r].n_ops ? &p->ranks[r].ops[e->op] : NULL;
            seq[3 * k] = e->ts_us;
            seq[3 * k + 1] = e->ts_us + e->dur_us;
            seq[3 * k + 2] = dm_op_is_collective(e->kind) ? 2 : e->kind == DM_OP_NS && pop && pop->kind == DM_OP_NS && !pop->eager;
            k++;
        }
        if (k > 1) qsort(seq, (size_t)k, 3 * sizeof *seq, cmp_first_double);
        for (int i = 1; i < k; i++) {
            double gap = seq[3 * i] > seq[3 * i - 2] ? seq[3 * i] - seq[3 * i - 2] : 0;
            if (seq[3 * i + 2] == 2) so[(*n_solo)++] = gap + (seq[3 * i + 1] - seq[3 * i]);
            else if (seq[3 * i - 1] == 1) gr[(*n_ggaps)++] = gap;
            else gg[(*n_gaps)++] = gap;
        }
    }
    size_t used = strlen(desc);
    snprintf(desc + used, desc_size - used, "%s%s (%s trace of %s %s, %d rank%s)", used ? "; " : "", trace_path, t->source,
             t->model, t->strategy, R, R == 1 ? "" : "s");
    /* Per rank, the union of its collectives' intervals, each from the rank's arrival (the traced
     * start less wait_us: NCCL's kernel is resident while it waits for the peers) to the end. */
    rank_intervals(t, R, 1, iv, iv_off);
    for (int i = 0; i < t->n; i++) {
        const dm_trace_event *e = &t->ev[i];
        fit_op o;
        memset(&o, 0, sizeof o);
        o.kind = -1, o.d_us = e->dur_us, o.tensors = 1, o.share = 1;
        o.trace = trace_no, o.rank = e->rank, o.t0 = e->ts_us, o.pw_flops = e->flops, o.pw_bytes = e->bytes, o.cshare = 1, o.thr = 1;
        const dm_op *pop = p && e->rank >= 0 && e->rank < R && e->op >= 0 && e->op < p->ranks[e->rank].n_ops
                               ? &p->ranks[e->rank].ops[e->op] : NULL;
        if ((e->kind == DM_OP_FORWARD || e->kind == DM_OP_BACKWARD) && pop && pop->kind == e->kind && pop->work >= 0 &&
            pop->work < p->n_works && costs) {
            /* its kernels: those the table prices are fixed, the GEMMs of ops without rows are
             * the efficiency's work; none of those: the table prices it whole */
            const dm_work *w = &p->works[pop->work];
            double launches = 0, mem = 0;
            for (int q = 0; q < w->n; q++) {
                const dm_kernel *kn = &w->k[q];
                launches += (double)(kn->count > 0 ? kn->count : 1);
                if ((kn->kind == DM_KERN_GEMM || kn->kind == DM_KERN_BGEMM) && !dm_costs_kernel_rows(costs, kn->kind, kn->op)) {
                    o.work_us += kn->flops / gpu->bf16_flops * 1e6;
                } else {
                    double us = dm_costs_kernel_us(costs, gpu, kn, NULL);
                    o.launch_us += us;
                    if (dm_kernel_memory_bound(gpu, kn)) mem += us;
                }
            }
            if (e->kind == DM_OP_BACKWARD) { /* the gradients' check, priced as the simulator does */
                double gl, chk = dm_work_grad_check_us(costs, gpu, w->k, w->n, &gl, NULL);
                o.launch_us += chk, mem += chk;
                launches += gl;
            }
            o.share = o.launch_us + o.work_us > 0 ? mem / (o.launch_us + o.work_us) : 0;
            o.gaps = launches > 1 ? launches - 1 : 0;
            o.kind = o.work_us > 0 ? (e->kind == DM_OP_FORWARD ? FK_FWD : FK_BWD) : FK_KERN;
            if (o.work_us > 0) (*n_uncovered)++;
            else (*n_covered)++;
        } else if ((e->kind == DM_OP_FORWARD || e->kind == DM_OP_BACKWARD) && e->flops > 0) {
            o.kind = e->kind == DM_OP_FORWARD ? FK_FWD : FK_BWD;
            o.work_us = e->flops / gpu->bf16_flops * 1e6;
            (*n_uncovered)++;
        } else if ((e->kind == DM_OP_MUON_UPDATE || e->kind == DM_OP_ADAMW) && e->bytes > 0) {
            const char *name = e->kind == DM_OP_ADAMW ? "adamw" : "muon_update";
            o.kind = e->kind == DM_OP_MUON_UPDATE ? FK_UPD : FK_ADAMW;
            o.work_us = e->bytes / gpu->hbm_Bps * 1e6;
            if (pop && pop->kind == e->kind && pop->n_params > 0) o.tensors = pop->n_params;
            o.launch_us = gpu->launch_us * o.tensors;
            if (costs && dm_costs_op_rows(costs, name, NULL)) { /* the table's time, as the simulator takes it */
                dm_op one = dm_op_init(e->kind, DM_STREAM_COMPUTE);
                one.bytes = e->bytes; /* without the program: one row at the op's elements */
                const dm_op *q = pop && pop->kind == e->kind ? pop : &one;
                o.table_us = dm_costs_update_op_us(costs, gpu, q == pop ? p : NULL, q, NULL);
            }
        } else if (e->kind == DM_OP_NS && p) {
            const dm_op *op = pop;
            if (!op || op->kind != DM_OP_NS) {
                dm_err_set(err, "%s: rank %d op %d is an NS op in the trace, not in the program %s (not the traced plan)",
                           trace_path, e->rank, e->op, program_path);
                goto out;
            }
            dm_cost_source src;
            o.kind = FK_NS;
            /* at full clock under the power model, as the simulator's dm_ns_op_full_us */
            o.work_us = dm_costs_ns_op_kernels_full_us(costs, gpu, op, pw, &src);
            o.tensors = op->batch > 0 ? op->batch : 1;
            o.elems = (double)op->m * (double)op->n * o.tensors;
        }
        if (o.kind < 0 || !(e->dur_us > 0) || e->rank < 0 || e->rank >= R) continue;
        /* its full-clock time and the part the clock slows, as the simulator takes them */
        if (o.kind == FK_UPD || o.kind == FK_ADAMW) {
            o.pw_us = o.table_us > 0 ? o.table_us : o.launch_us + o.work_us;
            o.cshare = 0;
        } else { /* the share the clock sets, as the simulator's bound_share */
            o.pw_us = o.kind == FK_NS ? o.work_us : o.launch_us + o.work_us;
            double b = pw && o.pw_us > 0 ? dm_power_clock_share(pw, o.pw_bytes, o.pw_us) : 1;
            /* (an NS op from full-clock rows: all of it, as sim.c compute_share takes it) */
            o.cshare = o.kind == FK_NS ? (dm_costs_full_clock(costs, 1) ? 1 : b) : dm_costs_full_clock(costs, 0) ? b : 0;
        }
        o.overlap = calib_overlap_fraction(iv + 2 * iv_off[e->rank], iv_off[e->rank + 1] - iv_off[e->rank], e->ts_us,
                                           e->ts_us + e->dur_us);
        *n_ov += o.overlap > 0;
        (*ops)[(*n)++] = o;
    }
    if (p) { /* staging points: one-rank collectives with copies, against the rank's compute intervals */
        stage_pt *sg = dm_realloc(*stg, ((size_t)*n_stg + (size_t)t->n + 1) * sizeof *sg, err);
        if (!sg) goto out;
        *stg = sg;
        rank_intervals(t, R, 0, iv, iv_off);
        for (int i = 0; i < t->n; i++) {
            const dm_trace_event *e = &t->ev[i];
            if ((e->kind != DM_OP_ALLGATHER && e->kind != DM_OP_REDUCESCATTER) || !(e->dur_us > 0) || e->rank < 0 ||
                e->rank >= R || e->op < 0 || e->op >= p->ranks[e->rank].n_ops)
                continue;
            const dm_op *op = &p->ranks[e->rank].ops[e->op];
            if (op->kind != e->kind || op->group < 0 || op->group >= p->n_groups || p->groups[op->group].n != 1) continue;
            double ov = calib_overlap_fraction(iv + 2 * iv_off[e->rank], iv_off[e->rank + 1] - iv_off[e->rank], e->ts_us,
                                               e->ts_us + e->dur_us);
            double copies = dm_coll_staging_copies(op->kind, op->staged, op->n_params, 1),
                   b = dm_coll_staging_bytes(op->kind, op->staged, op->bytes, 1);
            if (ov < STAGE_ALONE && copies > 0) sg[(*n_stg)++] = (stage_pt){copies, b, e->dur_us};
        }
    }
    rc = 0;
out:
    free(iv);
    free(iv_off);
    free(seq);
    dm_trace_free(t);
    dm_program_free(p);
    return rc;
}

/* The staging copies' rate from the points: least squares of the relative residuals of
 * d = copies a + bytes x (a per copy, x per byte), the 2 x 2 normal equations; staging_launch_us
 * = a and staging_efficiency = 1 / (x HBM) when there are at least 5 points and both come out
 * positive. */
static int fit_staging(calib *c, const stage_pt *pt, int n, const dm_gpu *gpu, const char *desc, FILE *log, dm_err *err)
{
    double scc = 0, scb = 0, sbb = 0, rc = 0, rb = 0;
    for (int i = 0; i < n; i++) {
        double cc = pt[i].copies / pt[i].d_us, bb = pt[i].bytes / pt[i].d_us;
        scc += cc * cc, scb += cc * bb, sbb += bb * bb, rc += cc, rb += bb;
    }
    double det = scc * sbb - scb * scb;
    if (n < 5 || !(det > 1e-12 * scc * sbb)) {
        if (log) fprintf(log, "  %-34s not fitted: %d one-rank reduce-scatters and all-gathers ran with no compute beside "
                              "them (5 needed)\n", "staging_efficiency", n);
        return 0;
    }
    double a = (rc * sbb - rb * scb) / det, x = (scc * rb - scb * rc) / det, ss = 0;
    for (int i = 0; i < n; i++) {
        double r = (a * pt[i].copies + x * pt[i].bytes) / pt[i].d_us - 1;
        ss += r * r;
    }
    double eff = x > 0 ? 1 / (x * gpu->hbm_Bps / 1e6) : 0, res = sqrt(ss / n);
    if (!(a >= 0) || !(eff >= 0.001 && eff <= 1)) {
        if (log) fprintf(log, "  %-34s not fitted: %d points give %.3g us per copy and %.3g of HBM\n", "staging_efficiency",
                         n, a, eff);
        return 0;
    }
    char src[1400];
    snprintf(src, sizeof src, "%s: %d one-rank reduce-scatters and all-gathers with no compute beside them (under %.0f%% "
             "of their time), their staging copies (core/coll.h) at %.4g GB/s over the %s HBM %.4g GB/s + %.3g us per "
             "copy: least squares of relative residuals", desc, n, 100 * STAGE_ALONE, eff * gpu->hbm_Bps / 1e9,
             gpu->short_name, gpu->hbm_Bps / 1e9, a);
    if (log) fprintf(log, "  %-34s %.4f: %3d collectives (residual %.1f%%)\n  %-34s %.4g\n", "staging_efficiency", eff, n,
                     100 * res, "staging_launch_us", a);
    if (set_num(c, "staging_efficiency", eff, src, res, n, err) || set_num(c, "staging_launch_us", a, src, res, n, err))
        return -1;
    return 0;
}

int calib_fit_trace(calib *c, const char *trace_path, const dm_gpu *gpu, const char *program_path, const dm_costs *costs,
                    int flags, FILE *log, dm_err *err)
{
    return calib_fit_traces(c, 1, &trace_path, &program_path, gpu, costs, flags, log, err);
}

/* The fixed part of every NS op: the gradient check and momentum it runs, priced as the
 * simulator will price them (costs.h's dm_ns_op_prep_us) on the cluster this calibration
 * makes: the Muon update's fitted bandwidth and launch when it fits them (x, a, cnt of
 * fit_rates; not when the kernel table's rows price the update, table_upd). ns_time_scale is
 * then fitted on the rest. */
static void ns_prep(fit_op *ops, int n, const dm_gpu *gpu, const dm_costs *costs, int table_upd, const double *x,
                    const double *a, const int *cnt)
{
    dm_cluster as_fitted = {0};
    as_fitted.gpu = gpu;
    if (!table_upd && cnt[FK_UPD] > 0 && x[FK_UPD] > 0)
        as_fitted.elem_efficiency[0] = 1 / x[FK_UPD], as_fitted.elem_launch_us[0] = a[FK_UPD];
    for (int i = 0; i < n; i++)
        if (ops[i].kind == FK_NS) ops[i].launch_us = dm_ns_op_prep_us(costs, &as_fitted, ops[i].tensors, ops[i].elems);
}

/* Median of |(table + add) / measured - 1| over the ops of kind k (their table time, 0 where
 * none; add: a time per op beside it). */
static double table_miss(const fit_op *ops, int n, int k, double add, int *cnt)
{
    double *v = malloc(((size_t)n + 1) * sizeof *v), m = -1;
    int nv = 0;
    for (int i = 0; i < n && v; i++)
        if (ops[i].kind == k && ops[i].table_us > 0) v[nv++] = fabs((ops[i].table_us + add) / ops[i].d_us - 1);
    if (nv) m = cmp_quantile(v, nv, 0.5);
    free(v);
    *cnt = nv;
    return m;
}

/* Key = the median of the n samples v (sorted in place; nothing when n is 0), its residual the
 * interquartile half-width relative to the median; the source says what they are (`what`, over
 * n `noun`, when given) after desc, the log line the same with `log_noun`. */
static int set_median(calib *c, const char *key, double *v, int n, const char *desc, const char *what,
                      const char *noun, const char *log_noun, FILE *log, dm_err *err)
{
    if (!n) return 0;
    char src[1400]; /* as calib_fit_traces's own */
    double m = cmp_quantile(v, n, 0.5), q1 = cmp_quantile(v, n, 0.25), q3 = cmp_quantile(v, n, 0.75);
    snprintf(src, sizeof src, "%s: %s, median over %d%s%s (quartiles %.3g and %.3g us)", desc, what, n, noun ? " " : "",
             noun ? noun : "", q1, q3);
    if (log) fprintf(log, "  %-34s %.4g: %3d %s (quartiles %.3g, %.3g)\n", key, m, n, log_noun, q1, q3);
    return set_num(c, key, m, src, m > 0 ? (q3 - q1) / (2 * m) : 0, n, err);
}

int calib_fit_traces(calib *c, int n_traces, const char *const *trace_paths, const char *const *program_paths,
                     const dm_gpu *gpu, const dm_costs *costs, int flags, FILE *log, dm_err *err)
{
    int fit_slowdown = flags & CALIB_FIT_COMM_SLOWDOWN, fit_gap = (flags & CALIB_FIT_KERNEL_GAP) != 0;
    int rc = -1, n = 0, n_ov = 0, n_first = 0, n_gaps = 0, n_solo = 0, n_ggaps = 0, n_cov = 0, n_unc = 0;
    fit_op *ops = NULL;
    double *first = NULL, *gaps = NULL, *solo = NULL, *ggaps = NULL;
    stage_pt *stg = NULL;
    int n_stg = 0;
    char desc[1024] = "", model[128] = "";
    dm_cluster pwc; /* the power model, when this calibration fitted one (calib_fit_power) */
    memset(&pwc, 0, sizeof pwc);
    calib_apply_entries(c, &pwc);
    const dm_power *pw = dm_power_on(&pwc.power) ? &pwc.power : NULL;
    if (pw && log) fprintf(log, "  (each op's clock from the power model along its trace)\n");
    for (int i = 0; i < n_traces; i++) {
        const char *pp = program_paths ? program_paths[i] : NULL;
        if (collect_ops(trace_paths[i], pp, gpu, costs, pw, &ops, &n, &n_ov, &first, &n_first, &gaps, &n_gaps, &solo, &n_solo, &ggaps, &n_ggaps, &n_cov, &n_unc,
                        i == 0, i, model, sizeof model, desc, sizeof desc, &stg, &n_stg, err))
            goto out;
    }
    const char *trace_path = n_traces == 1 ? trace_paths[0] : "the traces";
    if (!n_cov && !n_unc) {
        dm_err_set(err, "%s: no forward or backward ops with FLOPs and a duration", trace_path);
        goto out;
    }
    snprintf(c->fitted_on, sizeof c->fitted_on, "%s", model[0] ? model : "-");
    /* comm_slowdown is seen only in the compute time that collectives overlap: under
     * CALIB_MIN_OVERLAP of the ops' time (one-GPU traces whose collectives run in place and move
     * nothing) the objective is flat in f and its minimum lands anywhere, the grid's edge too */
    double ov_t = 0, all_t = 0;
    for (int i = 0; i < n; i++) ov_t += ops[i].overlap * ops[i].share * ops[i].d_us, all_t += ops[i].d_us;
    double ov_share = all_t > 0 ? ov_t / all_t : 0;
    int slow_fit = fit_slowdown && n_ov && ov_share >= CALIB_MIN_OVERLAP;
    /* Elementwise updates the kernel table's rows describe (within 10%, median) are the table's:
     * their time is fixed, no rate is fitted for them; a kind the table has no rows of, or rows
     * that miss the executor's ops by more, gets a bandwidth and a launch term. */
    static const char *const what[FK__N] = {"forward", "backward", "muon-update", "adamw", "ns", "kernel"};
    /* The executor's time per op beyond its tensors' rows (the rows time its kernels back to
     * back, tensor by tensor; the op adds its own launches and events): the table plus that
     * per-op time (elementwise_op_us) wherever it brings the ops closer, within 10%. */
    double miss[FK__N] = {0}, op_us[FK__N] = {0}, miss0[FK__N] = {0};
    int miss_n[FK__N] = {0}, table_kind[FK__N] = {0};
    for (int k = FK_UPD; k <= FK_ADAMW; k++) {
        miss[k] = table_miss(ops, n, k, 0, &miss_n[k]);
        if (miss_n[k]) { /* least squares of relative residuals: ((t + a) / q - 1)^2 */
            double s1 = 0, s2 = 0;
            for (int i = 0; i < n; i++)
                if (ops[i].kind == k && ops[i].table_us > 0)
                    s1 += (ops[i].d_us - ops[i].table_us) / (ops[i].d_us * ops[i].d_us), s2 += 1 / (ops[i].d_us * ops[i].d_us);
            double a = s2 > 0 && s1 > 0 ? s1 / s2 : 0;
            int m2;
            double miss2 = table_miss(ops, n, k, a, &m2);
            if (a > 0 && miss2 <= 0.10 && miss2 < miss[k]) op_us[k] = a, miss0[k] = miss[k], miss[k] = miss2;
        }
        if (miss_n[k] && miss[k] <= 0.10) {
            table_kind[k] = 1;
            for (int i = 0; i < n; i++)
                if (ops[i].kind == k)
                    ops[i].kind = FK_KERN, ops[i].launch_us = ops[i].table_us + op_us[k], ops[i].work_us = 0;
        }
    }
    double x[FK__N], a[FK__N], ss[FK__N], f = 0;
    int cnt[FK__N];
    int *ix = pw ? dm_malloc(((size_t)n + 1) * sizeof *ix, err) : NULL;
    dm_power_op *po = pw ? dm_malloc(((size_t)n + 1) * sizeof *po, err) : NULL;
    if (pw && (!ix || !po)) {
        free(ix), free(po);
        goto out;
    }
    if (pw) power_clock_ops(pw, ops, n, ix, po);
    double best = fit_rates(ops, n, 0, fit_gap, x, a, ss, cnt);
    ns_prep(ops, n, gpu, costs, table_kind[FK_UPD], x, a, cnt);
    best = fit_rates(ops, n, 0, fit_gap, x, a, ss, cnt);
    double gam = 0, gam_ss = 0, tfall = 0, thold = 0;
    int gam_n = 0;
    /* the falling demand's time constants tried (0: the probe's tau, symmetric); without
       CALIB_FIT_TAU_FALL only the one the calibration already holds */
    static const double falls[] = {0, 50, 100, 200, 400, 800, 1600};
    int fit_fall = (flags & CALIB_FIT_TAU_FALL) != 0, n_falls = fit_fall ? (int)(sizeof falls / sizeof falls[0]) : 1;
    double fall0 = pwc.power.tau_fall_ms;
    /* the holds tried (traces/device/clockprobe-2026-12-05: 15-25 ms after the NS phase); without
       CALIB_FIT_HOLD only the calibration's own */
    static const double holds[] = {0, 5, 10, 15, 20, 30};
    int fit_hold = (flags & CALIB_FIT_HOLD) != 0, n_holds = fit_hold ? (int)(sizeof holds / sizeof holds[0]) : 1;
    double hold0 = pwc.power.hold_ms;
    if (pw) { /* the demand's activity exponent, with its falling time constant and its hold where
                 asked: the set whose clocks fit the table-priced forward and backward ops best (the
                 ops the clock slows; each set with its best f). A step's forward runs after its optimizer phase: how fast the
                 clock comes back after heavy NS is seen there, not in the probe's rising phases */
        double gbest = INFINITY;
        for (int hi = 0; hi < n_holds; hi++)
            for (int fi = 0; fi < n_falls; fi++)
                for (int gi = 2; gi <= 20; gi++) {
                    pwc.power.activity_exp = gi / 20.0;
                    pwc.power.tau_fall_ms = fit_fall ? falls[fi] : fall0;
                    pwc.power.hold_ms = fit_hold ? holds[hi] : hold0;
                    power_clock_ops(pw, ops, n, ix, po);
                    double fb;
                    best_slowdown(ops, n, fit_gap, slow_fit, fit_rates(ops, n, 0, fit_gap, x, a, ss, cnt), &fb);
                    fit_rates(ops, n, fb, fit_gap, x, a, ss, cnt);
                    if (ss[FK_KERN] < gbest)
                        gbest = ss[FK_KERN], gam = gi / 20.0, tfall = pwc.power.tau_fall_ms, thold = pwc.power.hold_ms,
                        gam_n = cnt[FK_KERN];
                }
        pwc.power.activity_exp = gam;
        pwc.power.tau_fall_ms = tfall;
        pwc.power.hold_ms = thold;
        power_clock_ops(pw, ops, n, ix, po);
        best = fit_rates(ops, n, 0, fit_gap, x, a, ss, cnt);
        gam_ss = gam_n ? sqrt(gbest / gam_n) : 0;
    }
    free(ix), free(po);
    best = best_slowdown(ops, n, fit_gap, slow_fit, best, &f);
    fit_rates(ops, n, f, fit_gap, x, a, ss, cnt);
    if (f > 0) { /* the momentum's rate at this f, and the NS scale with it */
        ns_prep(ops, n, gpu, costs, table_kind[FK_UPD], x, a, cnt);
        best = fit_rates(ops, n, f, fit_gap, x, a, ss, cnt);
    }
    static const char *const keys[FK__N] = {"fwd_efficiency", "bwd_efficiency", "elementwise_efficiency.muon_update",
                                            "elementwise_efficiency.adamw", "ns_time_scale", "kernel_gap_us"};
    char src[1400], fsrc[64] = "";
    if (f > 0) snprintf(fsrc, sizeof fsrc, ", with comm_slowdown %.3g", f);
    /* what priced the forward and backward ops: the note the file carries */
    size_t nl = strlen(c->notes);
    if (n_cov)
        nl += (size_t)snprintf(c->notes + nl, sizeof c->notes - nl, "%sforward/backward: %d ops priced by the kernel table "
                               "(every GEMM of them has rows): no fwd/bwd efficiency fitted for them", nl ? "; " : "", n_cov);
    if (n_unc && nl < sizeof c->notes)
        nl += (size_t)snprintf(c->notes + nl, sizeof c->notes - nl, "%sforward/backward: %d ops with GEMMs the kernel table "
                               "has no rows of: fwd/bwd efficiency fitted on those GEMMs (the fallback)", nl ? "; " : "", n_unc);
    if (log) {
        if (n_cov) fprintf(log, "  forward/backward: %d ops priced by the kernel table: fwd/bwd efficiency not fitted for them\n", n_cov);
        if (n_unc) fprintf(log, "  forward/backward: %d ops with GEMMs the table has no rows of (or no plan): fwd/bwd "
                                "efficiency fitted (the fallback)\n", n_unc);
    }
    for (int k = FK_UPD; k <= FK_ADAMW; k++) {
        if (!miss_n[k]) continue;
        if (table_kind[k] && op_us[k] > 0) {
            static const char *const okeys[2] = {"elementwise_op_us.muon_update", "elementwise_op_us.adamw"};
            if (log) fprintf(log, "  %-34s %.3f: the kernel table's rows per tensor miss %d %s ops by %.1f%% (median), "
                                  "%.1f%% with this per op\n", okeys[k - FK_UPD], op_us[k], miss_n[k], what[k], 100 * miss0[k],
                             100 * miss[k]);
            snprintf(src, sizeof src, "%s: %d %s ops, their measured time less %s's rows per tensor: least squares of "
                     "relative residuals (the rows miss them by %.1f%% median, %.1f%% with it)", desc, miss_n[k], what[k],
                     dm_costs_describe(costs), 100 * miss0[k], 100 * miss[k]);
            if (set_num(c, okeys[k - FK_UPD], op_us[k], src, miss[k], miss_n[k], err)) goto out;
        } else if (table_kind[k]) {
            if (log) fprintf(log, "  %-34s not fitted: the kernel table's rows are within %.1f%% (median) of %d %s ops\n",
                             keys[k], 100 * miss[k], miss_n[k], what[k]);
            if (nl < sizeof c->notes)
                nl += (size_t)snprintf(c->notes + nl, sizeof c->notes - nl, "%s%s: the kernel table's rows (within %.1f%% "
                                       "of %d ops): not fitted", nl ? "; " : "", what[k], 100 * miss[k], miss_n[k]);
        } else if (log) {
            fprintf(log, "  (%s: the kernel table's rows miss the %d traced ops by %.1f%% (median): fitted)\n", what[k],
                    miss_n[k], 100 * miss[k]);
        }
    }
    for (int k = 0; k < FK__N; k++) {
        if (!cnt[k]) continue;
        double eff = x[k] > 0 ? 1 / x[k] : 0, res = sqrt(ss[k] / cnt[k]);
        if (k == FK_KERN) { /* the gap between kernels inside an op, where the traces show one */
            int with_gaps = 0;
            for (int i = 0; i < n; i++) with_gaps += ops[i].kind == FK_KERN && ops[i].gaps > 0;
            if (!fit_gap) {
                if (log) fprintf(log, "  %-34s not fitted (--kernel-gap fits it): %d ops priced by the kernel table "
                                      "(residual %.1f%% without a gap)\n", keys[k], with_gaps, 100 * res);
                continue;
            }
            if (log) fprintf(log, "  %-34s %.4g: %3d ops priced by the kernel table (residual %.1f%%)%s\n", keys[k], x[k],
                             with_gaps, 100 * res, x[k] > 0 ? "" : ": no gap, not written");
            if (!(x[k] > 0) || !with_gaps) continue;
            snprintf(src, sizeof src, "%s: %d forward/backward ops priced by %s, their measured time less the kernels' "
                     "over their launches less one: least squares of relative residuals%s", desc, with_gaps,
                     dm_costs_describe(costs), fsrc);
            if (set_num(c, keys[k], x[k] > 1e3 ? 1e3 : x[k], src, res, with_gaps, err)) goto out;
            continue;
        }
        if (k == FK_NS) { /* a time scale, not a rate */
            if (!(x[k] >= 0.1 && x[k] <= 10)) {
                dm_err_set(err, "%s: NS ops take %g x the kernel table's time, outside [0.1, 10]", trace_path, x[k]);
                goto out;
            }
            snprintf(src, sizeof src, "%s: %d NS ops against %s for the shapes of the traced plans, each op's "
                     "gradient check and momentum priced apart (dm_ns_prep_us)%s", desc, cnt[k], dm_costs_describe(costs), fsrc);
            if (log) fprintf(log, "  %-34s %.4f: %3d ops (residual %.1f%%)\n", keys[k], x[k], cnt[k], 100 * res);
            if (set_num(c, keys[k], x[k], src, res, cnt[k], err)) goto out;
            continue;
        }
        if (!(eff >= 0.001 && eff <= 1)) {
            dm_err_set(err, "%s: the %s ops give an efficiency of %g, outside [0.001, 1]", trace_path, what[k], eff);
            goto out;
        }
        if (k < FK_UPD)
            snprintf(src, sizeof src, "%s: %d %s ops, %.4g TFLOP/s over the %s peak %.4g%s (the fallback for GEMMs the "
                     "kernel table has no rows of)", desc, cnt[k], what[k], eff * gpu->bf16_flops / 1e12, gpu->short_name,
                     gpu->bf16_flops / 1e12, fsrc);
        else
            snprintf(src, sizeof src, "%s: %d %s ops, %.4g GB/s over the %s HBM %.4g GB/s + %.3g us per tensor%s%s", desc,
                     cnt[k], what[k], eff * gpu->hbm_Bps / 1e9, gpu->short_name, gpu->hbm_Bps / 1e9, a[k], fsrc,
                     miss_n[k] ? " (the kernel table's rows miss these ops)" : " (no kernel table rows)");
        if (log) fprintf(log, "  %-34s %.4f: %3d ops (residual %.1f%%)\n", keys[k], eff, cnt[k], 100 * res);
        if (set_num(c, keys[k], eff, src, res, cnt[k], err)) goto out;
        if (k == FK_UPD || k == FK_ADAMW) {
            char key[48];
            snprintf(key, sizeof key, "elementwise_launch_us.%s", keys[k] + 23);
            if (log) fprintf(log, "  %-34s %.4g\n", key, a[k]);
            if (set_num(c, key, a[k], src, res, cnt[k], err)) goto out;
        }
    }
    if (fit_slowdown && !slow_fit) {
        if (log)
            fprintf(log, "  %-34s not fitted: collectives overlap %.2f%% of the compute ops' time (%.0f%% needed)\n",
                    "comm_slowdown", 100 * ov_share, 100 * CALIB_MIN_OVERLAP);
    } else if (fit_slowdown) {
        int nk = 0;
        for (int k = 0; k < FK__N; k++) nk += cnt[k] > 0;
        snprintf(src, sizeof src, "%s: %d compute ops of %d kinds, %d overlapping collectives on their rank: least "
                 "squares of relative residuals over f on a 0.001 grid, a rate per kind", desc, n, nk, n_ov);
        if (log) fprintf(log, "  %-34s %.4f: %3d ops, %d overlapping (residual %.1f%%)\n", "comm_slowdown", f, n, n_ov,
                         100 * sqrt(best / n));
        if (set_num(c, "comm_slowdown", f, src, sqrt(best / n), n_ov, err)) goto out;
    }
    if (pw) {
        int tf = fit_fall, th = fit_hold;
        snprintf(src, sizeof src, "%s: %d forward/backward ops priced by the kernel table, each op's clock from the "
                 "power model along its trace: the exponent (0.1 to 1 by 0.05)%s%s whose clocks fit them best%s", desc,
                 gam_n, tf ? ", the falling time constant (tau, 50, 100, 200, 400, 800 or 1600 ms)" : "",
                 th ? ", the hold (0, 5, 10, 15, 20 or 30 ms)" : "", fsrc);
        if (log) {
            fprintf(log, "  %-34s %.4g: %3d forward/backward ops (residual %.1f%%)\n", "power.activity_exp", gam, gam_n,
                    100 * gam_ss);
            if (tf) fprintf(log, "  %-34s %.4g: with it\n", "power.tau_fall_ms", tfall > 0 ? tfall : pwc.power.tau_ms);
            if (th) fprintf(log, "  %-34s %.4g: with it\n", "power.hold_ms", thold);
        }
        if (set_num(c, "power.activity_exp", gam, src, gam_ss, gam_n, err) ||
            (tf && set_num(c, "power.tau_fall_ms", tfall > 0 ? tfall : pwc.power.tau_ms, src, gam_ss, gam_n, err)) ||
            (th && set_num(c, "power.hold_ms", thold, src, gam_ss, gam_n, err)))
            goto out;
    }
    if (n_first) { /* the median over ranks and traces of the first op's start */
        double m = cmp_quantile(first, n_first, 0.5), ss0 = 0; /* sorts first[] */
        for (int i = 0; i < n_first; i++) ss0 += m > 0 ? (first[i] - m) * (first[i] - m) / (m * m) : 0;
        snprintf(src, sizeof src, "%s: the first op's start after the step's start, median over %d ranks (%.4g to %.4g us)",
                 desc, n_first, first[0], first[n_first - 1]);
        if (log) fprintf(log, "  %-34s %.4g: %3d ranks\n", "step_start_us", m, n_first);
        if (set_num(c, "step_start_us", m, src, sqrt(ss0 / n_first), n_first, err)) goto out;
    }
    /* the median gap: most compute ops follow the previous one at once; the few that wait for a
     * collective or a peer are far out and leave the median alone */
    if (set_median(c, "op_gap_us", gaps, n_gaps, desc, "the GPU's idle time between consecutive compute ops of a rank",
                   "gaps", "gaps", log, err) ||
        set_median(c, "graph_gap_us", ggaps, n_ggaps, desc,
                   "the GPU's idle time after an NS op launched as a CUDA graph (not eager)", "gaps",
                   "gaps after graph-launched NS ops", log, err) ||
        set_median(c, "solo_coll_us", solo, n_solo, desc,
                   "a one-rank collective's time on the compute stream with the idle before it", NULL,
                   "one-rank collectives", log, err))
        goto out;
    if (fit_staging(c, stg, n_stg, gpu, desc, log, err)) goto out;
    rc = 0;
out:
    free(ops);
    free(first);
    free(gaps);
    free(solo);
    free(ggaps);
    free(stg);
    return rc;
}

int calib_fit_power(calib *c, const char *probe_json, FILE *log, dm_err *err)
{
    dm_power p;
    double res[3];
    char desc[1200];
    if (dm_power_fit(probe_json, &p, res, desc, sizeof desc, log, err)) return -1;
    struct {
        const char *key;
        double v, res;
    } kv[] = {{"power.limit_w", p.limit_w, 0},          {"power.idle_w", p.idle_w, 0},
              {"power.copy_w", p.copy_w, 0},            {"power.gemm_w", p.gemm_w, res[0]},
              {"power.slope", p.slope, res[1]},         {"power.tau_ms", p.tau_ms, res[2]},
              {"power.ref_tflops", p.ref_flops / 1e12, 0}, {"power.ref_GBps", p.ref_Bps / 1e9, 0}};
    for (size_t i = 0; i < sizeof kv / sizeof kv[0]; i++)
        if (set_num(c, kv[i].key, kv[i].v, desc, kv[i].res, 1, err)) return -1;
    return 0;
}

/* One measured collective for the coll_slowdown fit: its duration, the model's latency and
 * transfer time alone on the calibrated cluster, and the fraction of it with compute running on
 * a member rank. */
typedef struct coll_obs {
    double d_us, lat_us, xfer_us, overlap;
} coll_obs;

static int collect_colls(const char *trace_path, const dm_cluster *cl, double min_bytes, coll_obs **obs, int *n,
                         dm_err *err)
{
    dm_trace *t = NULL;
    if (dm_trace_read(trace_path, &t, err)) return -1;
    int rc = -1, R = t->nranks > 0 ? t->nranks : 1;
    double *iv = dm_malloc(((size_t)t->n + 1) * 2 * sizeof *iv, err);
    int *iv_off = dm_calloc((size_t)R + 2, sizeof *iv_off, err);
    int *ranks = dm_malloc((size_t)R * sizeof *ranks, err);
    coll_obs *grown = dm_realloc(*obs, ((size_t)*n + (size_t)t->n + 1) * sizeof *grown, err);
    if (grown) *obs = grown;
    if (!iv || !iv_off || !ranks || !grown) goto out;
    rank_intervals(t, R, 0, iv, iv_off); /* per rank, the union of its compute ops' intervals */
    for (int i = 0; i < t->n; i++) {
        const dm_trace_event *e = &t->ev[i];
        if (!dm_op_is_collective(e->kind) || e->bytes < min_bytes || !(e->dur_us > 0) || e->rank < 0 || e->rank >= R)
            continue;
        int nm = 0; /* the members: the ranks holding this collective */
        for (int j = 0; j < t->n && nm < R; j++)
            if (t->ev[j].coll == e->coll && dm_op_is_collective(t->ev[j].kind)) {
                int seen = 0;
                for (int k = 0; k < nm; k++) seen |= ranks[k] == t->ev[j].rank;
                if (!seen && t->ev[j].rank >= 0 && t->ev[j].rank < R) ranks[nm++] = t->ev[j].rank;
            }
        if (nm < 2) continue;
        if (nm > 1) qsort(ranks, (size_t)nm, sizeof *ranks, cmp_int);
        coll_topo topo;
        if (collcost_topo(cl, ranks, nm, &topo, err)) goto out;
        coll_algo a = collcost_pick(e->kind, COLL_ALGO_AUTO, e->bytes, &topo);
        coll_obs o = {e->dur_us, collcost_latency_us(e->kind, a, &topo), 0, 0};
        o.xfer_us = collcost_time_us(e->kind, a, e->bytes, &topo) - o.lat_us;
        /* the part of the transfer with some member computing: the union over members */
        double a0 = e->ts_us, b0 = e->ts_us + e->dur_us, best = 0;
        for (int k = 0; k < nm; k++) {
            double f = calib_overlap_fraction(iv + 2 * iv_off[ranks[k]], iv_off[ranks[k] + 1] - iv_off[ranks[k]], a0, b0);
            if (f > best) best = f;
        }
        o.overlap = best;
        if (o.xfer_us > 0) (*obs)[(*n)++] = o;
    }
    rc = 0;
out:
    free(iv);
    free(iv_off);
    free(ranks);
    dm_trace_free(t);
    return rc;
}

/* Sum of squared relative residuals of d = L + T / (1 - g o) over the observations. */
static double coll_ss(const coll_obs *o, int n, double g)
{
    double ss = 0;
    for (int i = 0; i < n; i++) {
        double r = (o[i].lat_us + o[i].xfer_us / (1 - g * o[i].overlap)) / o[i].d_us - 1;
        ss += r * r;
    }
    return ss;
}

int calib_fit_coll_slowdown(calib *c, int n_traces, const char *const *trace_paths, const dm_cluster *cl,
                            double min_bytes, FILE *log, dm_err *err)
{
    coll_obs *obs = NULL;
    int n = 0, rc = -1, n_ov = 0;
    char desc[1024] = "";
    for (int i = 0; i < n_traces; i++) {
        if (collect_colls(trace_paths[i], cl, min_bytes, &obs, &n, err)) goto out;
        size_t used = strlen(desc);
        snprintf(desc + used, sizeof desc - used, "%s%s", used ? ", " : "", trace_paths[i]);
    }
    for (int i = 0; i < n; i++) n_ov += obs[i].overlap > 0;
    if (!n_ov) {
        dm_err_set(err, "%s: no collective of at least %.0f bytes overlaps compute: coll_slowdown cannot be fitted", desc,
                   min_bytes);
        goto out;
    }
    double g = 0, best = coll_ss(obs, n, 0);
    for (int i = 1; i < 950; i++) { /* g on a 0.001 grid, as comm_slowdown */
        double v = coll_ss(obs, n, i / 1000.0);
        if (v < best) best = v, g = i / 1000.0;
    }
    double res = sqrt(best / n), res0 = sqrt(coll_ss(obs, n, 0) / n);
    char src[1400];
    snprintf(src, sizeof src, "%s: %d collectives of >= %.0f bytes, %d overlapping compute on a member rank, against the "
             "calibrated collective model: least squares of relative residuals of L + T / (1 - g o) over g on a 0.001 "
             "grid (residual at g = 0: %.1f%%)", desc, n, min_bytes, n_ov, 100 * res0);
    if (log) fprintf(log, "  %-34s %.4f: %3d collectives, %d overlapping compute (residual %.1f%%, at 0: %.1f%%)\n",
                     "coll_slowdown", g, n, n_ov, 100 * res, 100 * res0);
    rc = set_num(c, "coll_slowdown", g, src, res, n, err);
out:
    free(obs);
    return rc;
}

/* ---- the two compute streams' sharing (calib_fit_lo_stream) -------------------------------- */

/* A rank-0 compute op of a trace: its match key (kind, layer, bytes, FLOPs, occurrence), its
 * stream, start and duration. */
typedef struct lo_op {
    int kind, layer, occ, lo;
    double bytes, flops, t0, d;
} lo_op;

static int lo_key(const lo_op *x, const lo_op *y)
{
    if (x->kind != y->kind) return x->kind - y->kind;
    if (x->layer != y->layer) return x->layer - y->layer;
    if (x->bytes != y->bytes) return x->bytes < y->bytes ? -1 : 1;
    if (x->flops != y->flops) return x->flops < y->flops ? -1 : 1;
    return 0;
}

/* by key, then start: the order that numbers each key's occurrences */
static int lo_by_key_start(const void *a, const void *b)
{
    const lo_op *x = a, *y = b;
    int c = lo_key(x, y);
    return c ? c : (x->t0 > y->t0) - (x->t0 < y->t0);
}

/* by key, then occurrence: the twin of an op in the other trace */
static int lo_cmp(const void *a, const void *b)
{
    const lo_op *x = a, *y = b;
    int c = lo_key(x, y);
    return c ? c : x->occ - y->occ;
}

/* Rank 0's compute ops of trace `path`, sorted by key and numbered by occurrence of their key
 * in time order; *n_lo: how many ran on compute-lo. */
static int lo_ops(const char *path, lo_op **out, int *n, int *n_lo, dm_err *err)
{
    dm_trace *t = NULL;
    if (dm_trace_read(path, &t, err)) return -1;
    lo_op *v = dm_malloc(((size_t)t->n + 1) * sizeof *v, err);
    int k = 0;
    *n_lo = 0;
    for (int i = 0; v && i < t->n; i++) {
        const dm_trace_event *e = &t->ev[i];
        if (e->rank != 0 || !dm_op_is_compute(e->kind) || !(e->dur_us > 0)) continue;
        v[k] = (lo_op){(int)e->kind, e->layer, 0, e->stream == DM_STREAM_COMPUTE_LO, e->bytes, e->flops, e->ts_us, e->dur_us};
        *n_lo += v[k].lo;
        k++;
    }
    dm_trace_free(t);
    if (!v) return -1;
    qsort(v, (size_t)k, sizeof *v, lo_by_key_start);
    for (int i = 1; i < k; i++) v[i].occ = lo_key(&v[i], &v[i - 1]) ? 0 : v[i - 1].occ + 1;
    *out = v, *n = k;
    return 0;
}

/* One op beside the other stream: its stream (1: compute-lo), its time d there, the share f of
 * it beside the other stream's ops, its time alone a (its twin's in the one-stream trace). */
typedef struct lo_obs {
    int lo;
    double d, f, a;
} lo_obs;

/* Appends to *obs (*n of them, room *cap) the ops of one pair of traces that ran beside the
 * other stream (f > 1%). */
static int lo_pair(const char *one, const char *stream, lo_obs **obs, int *n, int *cap, dm_err *err)
{
    lo_op *a = NULL, *b = NULL;
    double *iv = NULL;
    int na, nb, la, lb, rc = -1;
    if (lo_ops(one, &a, &na, &la, err) || lo_ops(stream, &b, &nb, &lb, err)) goto out;
    if (!lb) {
        dm_err_set(err, "%s: no op on compute-lo (a trace of a run with --ns-under-backward stream expected)", stream);
        goto out;
    }
    if (la) {
        dm_err_set(err, "%s: ops on compute-lo (the trace of the optimizer after the backward expected)", one);
        goto out;
    }
    /* each stream's busy time as disjoint intervals: iv[0 .. m0) compute's, then compute-lo's */
    if (!(iv = dm_malloc(((size_t)nb + 1) * 2 * sizeof *iv, err))) goto out;
    int m[2] = {0, 0};
    for (int s = 0; s < 2; s++) {
        double *w = iv + 2 * m[0];
        for (int i = 0; i < nb; i++)
            if (b[i].lo == s) w[2 * m[s]] = b[i].t0, w[2 * m[s] + 1] = b[i].t0 + b[i].d, m[s]++;
        m[s] = dm_iv_merge(w, m[s]);
    }
    for (int i = 0; i < nb; i++) {
        const lo_op *o = &b[i], *t = bsearch(o, a, (size_t)na, sizeof *a, lo_cmp);
        if (!t) continue;
        const double *other = o->lo ? iv : iv + 2 * m[0];
        double f = calib_overlap_fraction(other, m[!o->lo], o->t0, o->t0 + o->d);
        if (f <= 0.01) continue;
        if (*n == *cap) {
            int c2 = *cap ? 2 * *cap : 256;
            lo_obs *g = dm_realloc(*obs, (size_t)c2 * sizeof *g, err);
            if (!g) goto out;
            *obs = g, *cap = c2;
        }
        (*obs)[(*n)++] = (lo_obs){o->lo, o->d, f, t->d};
    }
    rc = 0;
out:
    free(a), free(b), free(iv);
    return rc;
}

int calib_fit_lo_stream(calib *c, int n_pairs, const char *const *one, const char *const *stream, FILE *log, dm_err *err)
{
    double num[2] = {0, 0}, den[2] = {0, 0}, ss[2] = {0, 0}, x[2];
    int cnt[2] = {0, 0}, n = 0, cap = 0, rc = -1;
    lo_obs *obs = NULL;
    char desc[1024] = "";
    for (int p = 0; p < n_pairs; p++) {
        if (lo_pair(one[p], stream[p], &obs, &n, &cap, err)) goto out;
        size_t used = strlen(desc);
        snprintf(desc + used, sizeof desc - used, "%s%s against %s", used ? ", " : "", stream[p], one[p]);
    }
    for (int i = 0; i < n; i++) { /* a - d (1 - f) = u x, u = d f */
        const lo_obs *o = &obs[i];
        double u = o->d * o->f;
        num[o->lo] += u * (o->a - o->d * (1 - o->f)), den[o->lo] += u * u, cnt[o->lo]++;
    }
    static const char *const key[2] = {"lo_main_rate", "lo_rate"};
    static const char *const what[2] = {"compute", "compute-lo"};
    for (int s = 0; s < 2; s++) {
        if (!cnt[s] || !(den[s] > 0)) {
            dm_err_set(err, "%s: no op of %s overlapped the other stream: %s cannot be fitted", desc, what[s], key[s]);
            goto out;
        }
        x[s] = num[s] / den[s];
        x[s] = x[s] < 0.01 ? 0.01 : x[s] > 1 ? 1 : x[s];
    }
    for (int i = 0; i < n; i++) { /* each op's time alone against the model's, relative */
        const lo_obs *o = &obs[i];
        double r = (o->d * (1 - o->f) + o->d * o->f * x[o->lo]) / o->a - 1;
        ss[o->lo] += r * r;
    }
    for (int s = 0; s < 2; s++) {
        double res = sqrt(ss[s] / cnt[s]);
        char src[1400];
        snprintf(src, sizeof src, "%s: %d %s ops beside the other stream, each one's time alone (its twin in the run "
                 "with one compute stream) = d (1 - o) + d o x: least squares", desc, cnt[s], what[s]);
        if (log) fprintf(log, "  %-34s %.4f: %3d %s ops beside the other stream (residual %.1f%%)\n", key[s], x[s], cnt[s],
                         what[s], 100 * res);
        if (set_num(c, key[s], x[s], src, res, cnt[s], err)) goto out;
    }
    rc = 0;
out:
    free(obs);
    return rc;
}

int calib_add_costs(calib *c, const char *costs_path, const char *out_path, FILE *log, dm_err *err)
{
    dm_costs *k = NULL;
    if (dm_costs_load(costs_path, &k, err)) return -1;
    char src[512], dir[4096], rel[1024];
    snprintf(src, sizeof src, "%s", dm_costs_describe(k));
    const dm_gpu *g = dm_costs_gpu(k);
    if (!c->gpu[0] && g) snprintf(c->gpu, sizeof c->gpu, "%s", g->name);
    if (log) fprintf(log, "  kernel table: %s\n", src);
    dm_costs_free(k);
    /* as the file holds it: relative to its folder (calib_apply reads it from there, so the file
     * works from any working folder); absolute when the file goes to stdout */
    dm_path_dir(out_path, dir, sizeof dir);
    /* a joined table (A,B: costs.h) piece by piece */
    char list[1024], *save = NULL;
    size_t rl = 0;
    snprintf(list, sizeof list, "%s", costs_path);
    rel[0] = 0;
    for (char *f = strtok_r(list, ",", &save); f; f = strtok_r(NULL, ",", &save)) {
        char one[1024];
        if (dm_path_relative(f, strcmp(out_path, "-") ? dir : NULL, one, sizeof one, err)) return -1;
        rl += (size_t)snprintf(rel + rl, rl < sizeof rel ? sizeof rel - rl : 0, "%s%s", rl ? "," : "", one);
    }
    return calib_set(c, "costs", rel, src, -1, 0, err);
}

/* ---- the file ----------------------------------------------------------------------------- */

int calib_write(const calib *c, const char *path, dm_err *err)
{
    dm_out *o = dm_out_open(path, err);
    if (!o) return -1;
    FILE *f = dm_out_file(o);
    fprintf(f, "# " FORMAT "\n# gpu: %s\n# date: %s\n# command: %s\n", c->gpu[0] ? c->gpu : "-", c->date,
            c->command[0] ? c->command : "-");
    if (c->fitted_on[0]) fprintf(f, "# fitted-on: %s\n", c->fitted_on);
    if (c->notes[0]) fprintf(f, "# note: %s\n", c->notes); /* one line: the notes hold no newline */
    fprintf(f, "# Each value: key = value   # source; date; gpu; residual (relative RMS of its fit); points.\n"
               "# Use: dmuon sim --calibration FILE (keys as in a cluster file, see core/cluster.h and core/calib.h).\n");
    for (int i = 0; i < c->n; i++) {
        const calib_entry *e = &c->e[i];
        char res[32];
        if (e->residual >= 0) snprintf(res, sizeof res, "%.2f%%", 100 * e->residual);
        else snprintf(res, sizeof res, "-");
        fprintf(f, "%s = %s   # source: %s; date: %s; gpu: %s; residual: %s; points: %d\n", e->key, e->value,
                e->source, e->date, e->gpu, res, e->points);
    }
    return dm_out_commit(o, err);
}

void calib_print_json(FILE *f, const calib *c, const dm_cluster *cl, const char *path)
{
    fputs("{\"format\": \"dmuon-calibrate-1\", \"cluster\": ", f);
    json_write_string(f, cl->name);
    fputs(", \"gpu\": ", f);
    json_write_string(f, c->gpu);
    fprintf(f, ", \"gpus_per_node\": %d, \"date\": ", cl->gpus_per_node);
    json_write_string(f, c->date);
    fputs(", \"command\": ", f);
    json_write_string(f, c->command);
    fputs(",\n \"fitted_on\": ", f);
    if (c->fitted_on[0]) json_write_string(f, c->fitted_on);
    else fputs("null", f);
    fputs(", \"note\": ", f);
    if (c->notes[0]) json_write_string(f, c->notes);
    else fputs("null", f);
    fputs(", \"file\": ", f);
    if (path && strcmp(path, "-")) json_write_string(f, path);
    else fputs("null", f);
    fprintf(f, ", \"n_values\": %d,\n \"values\": [", c->n);
    for (int i = 0; i < c->n; i++) {
        const calib_entry *e = &c->e[i];
        char *end;
        double v = strtod(e->value, &end);
        fprintf(f, "%s\n  {\"key\": ", i ? "," : "");
        json_write_string(f, e->key);
        fputs(", \"value\": ", f);
        if (e->value[0] && !*end && isfinite(v)) fprintf(f, "%.10g", v); /* numbers as numbers, "costs" a path */
        else json_write_string(f, e->value);
        fputs(", \"source\": ", f);
        json_write_string(f, e->source);
        fputs(", \"date\": ", f);
        json_write_string(f, e->date);
        fputs(", \"gpu\": ", f);
        json_write_string(f, e->gpu);
        fputs(", ", f);
        json_write_member(f, "residual_pct", e->residual >= 0 ? 100 * e->residual : NAN, 6, "");
        fprintf(f, ", \"points\": %d}", e->points);
    }
    fputs("\n]}\n", f);
}

static char *trim(char *s)
{
    while (*s == ' ' || *s == '\t') s++;
    char *e = s + strlen(s);
    while (e > s && (e[-1] == ' ' || e[-1] == '\t')) *--e = 0;
    return s;
}

int calib_read(const char *path, calib *out, dm_err *err)
{
    memset(out, 0, sizeof *out);
    dm_lines *in = dm_lines_open(path, 8192, 1 << 20, err);
    if (!in) return -1;
    char *line;
    int ln = 0, rc = 0, k, seen[CALIB_MAX_ENTRIES];
    while ((k = dm_lines_next(in, &line, NULL, err)) != 0) {
        if (k < 0) {
            rc = -1;
            break;
        }
        ln = dm_lines_number(in);
        if (ln == 1) {
            if (strcmp(line, "# " FORMAT)) {
                rc = dm_err_set(err, "%s:1:1: expected '# " FORMAT "'", path);
                break;
            }
            continue;
        }
        char *s = trim(line);
        if (!*s) continue;
        if (*s == '#') {
            if (!strncmp(s, "# gpu: ", 7)) snprintf(out->gpu, sizeof out->gpu, "%s", s + 7);
            else if (!strncmp(s, "# date: ", 8)) snprintf(out->date, sizeof out->date, "%s", s + 8);
            else if (!strncmp(s, "# command: ", 11)) snprintf(out->command, sizeof out->command, "%s", s + 11);
            else if (!strncmp(s, "# fitted-on: ", 13)) snprintf(out->fitted_on, sizeof out->fitted_on, "%s", s + 13);
            else if (!strncmp(s, "# note: ", 8)) snprintf(out->notes, sizeof out->notes, "%s", s + 8);
            continue;
        }
        char *eq = strchr(s, '=');
        if (!eq) {
            rc = dm_err_set(err, "%s:%d:%d: expected 'key = value'", path, ln, (int)(s - line) + 1);
            break;
        }
        *eq = 0;
        char *key = trim(s), *val = eq + 1, *hash = strchr(val, '#');
        if (hash) *hash = 0;
        val = trim(val);
        const dm_param *p = calib_param(key);
        if (!p && strcmp(key, "costs")) {
            char list[1024];
            rc = dm_err_set(err, "%s:%d:%d: unknown key '%s' (expected %s or costs)", path, ln, (int)(key - line) + 1, key,
                            dm_param_list(DM_PARAM_CALIB, list, sizeof list));
            break;
        }
        if (!*val) {
            rc = dm_err_set(err, "%s:%d:%d: expected a value after '='", path, ln, (int)(eq - line) + 2);
            break;
        }
        if (strlen(val) >= sizeof out->e[0].value || strlen(key) >= sizeof out->e[0].key) { /* never cut silently */
            rc = dm_err_set(err, "%s:%d:%d: %s longer than %zu bytes", path, ln, (int)(val - line) + 1,
                            strlen(key) >= sizeof out->e[0].key ? "key" : "value",
                            (strlen(key) >= sizeof out->e[0].key ? sizeof out->e[0].key : sizeof out->e[0].value) - 1);
            break;
        }
        double v;
        if (p && dm_param_parse(p, val, &v, path, ln, (int)(val - line) + 1, err)) {
            rc = -1;
            break;
        }
        const calib_entry *dup = calib_get(out, key);
        if (dup) {
            rc = dm_err_set(err, "%s:%d:%d: key '%s' given twice (first on line %d)", path, ln, (int)(key - line) + 1,
                            key, seen[dup - out->e]);
            break;
        }
        if (out->n == CALIB_MAX_ENTRIES) {
            rc = dm_err_set(err, "%s:%d:1: more than %d values", path, ln, CALIB_MAX_ENTRIES);
            break;
        }
        seen[out->n] = ln;
        calib_entry *e = &out->e[out->n++];
        memset(e, 0, sizeof *e);
        snprintf(e->key, sizeof e->key, "%s", key);
        snprintf(e->value, sizeof e->value, "%s", val);
        e->residual = -1;
        if (hash) { /* provenance fields, each "name: text" separated by "; " */
            char *save = NULL;
            for (char *tok = strtok_r(hash + 1, ";", &save); tok; tok = strtok_r(NULL, ";", &save)) {
                tok = trim(tok);
                if (!strncmp(tok, "source: ", 8)) snprintf(e->source, sizeof e->source, "%s", tok + 8);
                else if (!strncmp(tok, "date: ", 6)) snprintf(e->date, sizeof e->date, "%s", tok + 6);
                else if (!strncmp(tok, "gpu: ", 5)) snprintf(e->gpu, sizeof e->gpu, "%s", tok + 5);
                else if (!strncmp(tok, "residual: ", 10)) e->residual = strtod(tok + 10, NULL) / 100;
                else if (!strncmp(tok, "points: ", 8)) e->points = atoi(tok + 8);
            }
        }
    }
    dm_lines_close(in);
    if (!rc && ln == 0) rc = dm_err_set(err, "%s:1:1: empty file, expected '# " FORMAT "'", path);
    return rc;
}

/* Sets one calibrated value on the cluster (keys other than costs). */
static void apply_entry(const calib_entry *e, dm_cluster *c)
{
    const dm_param *p = calib_param(e->key);
    if (p) dm_param_set(p, c, strtod(e->value, NULL));
}

void calib_apply_entries(const calib *k, dm_cluster *c)
{
    for (int i = 0; i < k->n; i++)
        if (strcmp(k->e[i].key, "costs")) apply_entry(&k->e[i], c);
}

int calib_apply(const char *file, dm_cluster *c, calib_info *info, dm_err *err)
{
    calib k;
    if (calib_read(file, &k, err)) return -1;
    calib_info local;
    if (!info) info = &local;
    memset(info, 0, sizeof *info);
    size_t len = (size_t)snprintf(info->describe, sizeof info->describe, "%s (%s, %s):", file, k.date[0] ? k.date : "undated",
                                  k.gpu[0] ? k.gpu : "GPU not stated");
    for (int i = 0; i < k.n; i++) {
        const calib_entry *e = &k.e[i];
        if (!strcmp(e->key, "costs")) { /* beside the calibration file, as calib_write wrote it */
            char list[1024], *save = NULL;
            size_t cl = 0;
            snprintf(list, sizeof list, "%s", e->value);
            info->costs[0] = 0;
            for (char *f = strtok_r(list, ",", &save); f; f = strtok_r(NULL, ",", &save)) { /* a joined table */
                char one[1024];
                if (dm_path_beside(file, f, one, sizeof one, err)) return -1;
                cl += (size_t)snprintf(info->costs + cl, sizeof info->costs - cl, "%s%s", cl ? "," : "", one);
                if (cl >= sizeof info->costs) /* a list cut short would name other tables */
                    return dm_err_set(err, "%s: the costs list resolves to more than %zu characters", file,
                                      sizeof info->costs - 1);
            }
        } else {
            apply_entry(e, c);
        }
        if (len < sizeof info->describe)
            len += (size_t)snprintf(info->describe + len, sizeof info->describe - len, " %s=%s", e->key,
                                    strcmp(e->key, "costs") ? e->value : base_name(e->value));
        info->n_applied++;
    }
    snprintf(info->fitted_on, sizeof info->fitted_on, "%s", k.fitted_on);
    for (int i = 0; i < k.n && !info->fitted_on[0]; i++) { /* older files: the model their traces name */
        const char *t = strstr(k.e[i].source, " trace of ");
        if (t) sscanf(t + 10, "%127s", info->fitted_on);
    }
    int any_power = 0;
    for (int i = 0; i < k.n; i++) any_power |= !strncmp(k.e[i].key, "power.", 6);
    if (any_power && dm_power_check(&c->power, file, err)) return -1;
    if (!strcmp(info->fitted_on, "-")) info->fitted_on[0] = 0;
    if (info->fitted_on[0] && len < sizeof info->describe)
        snprintf(info->describe + len, sizeof info->describe - len, "; fitted on %s's traces", info->fitted_on);
    size_t sl = strlen(c->source);
    snprintf(c->source + sl, sizeof c->source - sl, "%scalibrated by %s", sl ? "; " : "", base_name(file));
    return 0;
}
