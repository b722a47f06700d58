/* test_ns_ref.c: checks the CPU reference Muon math (kernels/ns_ref.c) against independent
 * references: scalar polynomial maps on diagonal and rank-1 inputs, GSL SVDs (singular values,
 * the exact polar factor U V^T), hand-computed Muon and AdamW steps, FLOP formulas by hand.
 *
 * Tolerances and why:
 * - Gram vs direct in double: 1e-12 relative Frobenius. Same math; the inputs' normalized
 *   singular values stay above ~1e-3, where rounding in R = X X^T (relative 1e-16 of ||R||)
 *   changes a singular value's image by far less than 1e-12 after 5 steps.
 * - Output singular values vs the scalar map f(s) of the input's: 1e-10 absolute (double).
 * - Bands: inputs built with normalized singular values in [0.01, 1]; over that interval the
 *   scalar maps stay within Jordan [0.6818, 1.1344] and Polar Express (safety 1.05)
 *   [0.8460, 1.1236] (dense sampling of f; asserted here too). The Polar Express band is
 *   tighter but not "near 1": five degree-5 steps designed for [1e-3, 1] leave +-12%.
 * - float vs double: 1e-4 relative Frobenius. Float has 6e-8 unit roundoff; the steps amplify
 *   it (most for small singular values and for Gram on square matrices, where R = X X^T squares
 *   their range). Measured: ~2e-6 for direct and wide Gram up to 1024x4096, 1.6e-5 for Gram on
 *   512x512 without restarts, 7e-6 with the default restart.
 * - Muon and AdamW against hand values: 1e-6 relative (float storage). */
#include <gsl/gsl_linalg.h>
#include <gsl/gsl_matrix.h>
#include <gsl/gsl_randist.h>
#include <gsl/gsl_rng.h>
#include <gsl/gsl_vector.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "ns_ref.h"
#include "tap.h"

static gsl_rng *rng;

static double *randn(int64_t m, int64_t n)
{
    double *a = malloc(sizeof *a * (size_t)(m * n));
    for (int64_t i = 0; i < m * n; i++) a[i] = gsl_ran_gaussian(rng, 1.0);
    return a;
}

/* SVD of the m x n row-major matrix A: s (min(m,n), descending); if U, Vt are non-NULL they
 * receive the thin factors U (m x r) and V^T (r x n) so that A = U diag(s) V^T. */
static void svd(const double *A, int64_t m, int64_t n, double *s, double *U, double *Vt)
{
    int tr = m < n; /* GSL wants rows >= cols: decompose A^T = V S U^T instead */
    int64_t M = tr ? n : m, N = tr ? m : n;
    gsl_matrix *a = gsl_matrix_alloc((size_t)M, (size_t)N);
    gsl_matrix *v = gsl_matrix_alloc((size_t)N, (size_t)N);
    gsl_vector *sv = gsl_vector_alloc((size_t)N), *work = gsl_vector_alloc((size_t)N);
    for (int64_t i = 0; i < m; i++)
        for (int64_t j = 0; j < n; j++)
            gsl_matrix_set(a, (size_t)(tr ? j : i), (size_t)(tr ? i : j), A[i * n + j]);
    gsl_linalg_SV_decomp(a, v, sv, work);
    for (int64_t k = 0; k < N; k++) s[k] = gsl_vector_get(sv, (size_t)k);
    /* A (or A^T) = a diag(s) v^T with a M x N, v N x N */
    if (U && Vt) {
        int64_t r = N;
        for (int64_t i = 0; i < m; i++)
            for (int64_t k = 0; k < r; k++)
                U[i * r + k] = tr ? gsl_matrix_get(v, (size_t)i, (size_t)k)
                                  : gsl_matrix_get(a, (size_t)i, (size_t)k);
        for (int64_t k = 0; k < r; k++)
            for (int64_t j = 0; j < n; j++)
                Vt[k * n + j] = tr ? gsl_matrix_get(a, (size_t)j, (size_t)k)
                                   : gsl_matrix_get(v, (size_t)j, (size_t)k);
    }
    gsl_matrix_free(a);
    gsl_matrix_free(v);
    gsl_vector_free(sv);
    gsl_vector_free(work);
}

/* C (m x n) = U (m x r) diag(d) Vt (r x n); d NULL means the identity. */
static void usv(const double *U, const double *d, const double *Vt, int64_t m, int64_t r,
                int64_t n, double *C)
{
    for (int64_t i = 0; i < m; i++)
        for (int64_t j = 0; j < n; j++) {
            double acc = 0;
            for (int64_t k = 0; k < r; k++) acc += U[i * r + k] * (d ? d[k] : 1) * Vt[k * n + j];
            C[i * n + j] = acc;
        }
}

static double fro(const double *a, size_t n)
{
    double s = 0;
    for (size_t i = 0; i < n; i++) s += a[i] * a[i];
    return sqrt(s);
}

static int cmp_desc(const void *x, const void *y)
{
    double a = *(const double *)x, b = *(const double *)y;
    return a < b ? 1 : a > b ? -1 : 0;
}

/* min and max of f over [lo, hi], sampled densely on a log scale. */
static void map_band(const ns_coeffs *c, double lo, double hi, double *fmin, double *fmax)
{
    *fmin = INFINITY;
    *fmax = -INFINITY;
    for (int i = 0; i <= 200000; i++) {
        double s = lo * pow(hi / lo, i / 200000.0), f = ns_scalar_map(c, s);
        if (f < *fmin) *fmin = f;
        if (f > *fmax) *fmax = f;
    }
}

static ns_opts opts(dm_ns_algo algo, const ns_coeffs *c, uint32_t restarts)
{
    ns_opts o;
    ns_opts_default(&o);
    o.algo = algo;
    o.coeffs = c;
    o.restarts = restarts;
    return o;
}

static void test_coeffs(void)
{
    ns_coeffs c, keep;
    dm_err err = {{0}};
    ns_coeffs_jordan(&c);
    ok(c.n == 5 && c.a[4] == 3.4445 && c.b[0] == -4.7750 && c.c[2] == 2.0315, "jordan x5");
    ok(ns_coeffs_polar_express(&c, 1.0, &err) == 0 && c.n == 5 &&
           c.a[0] == 8.28721201814563 && c.c[4] == 0.4188073119525673,
       "polar express, safety 1: the paper's numbers");
    ok(ns_coeffs_polar_express(&c, 1.05, &err) == 0, "polar express, safety 1.05");
    ok_near(c.a[0], 8.28721201814563 / 1.05, 1e-15, "a / s");
    ok_near(c.b[1], -2.9478499167379106 / (1.05 * 1.05 * 1.05), 1e-15, "b / s^3");
    ok_near(c.c[3], 0.51004894012372 / pow(1.05, 5), 1e-15, "c / s^5");
    {
        /* the safety factor evaluates each raw polynomial at x / s */
        ns_coeffs raw;
        double x = 0.5;
        ns_coeffs_polar_express(&raw, 1.0, NULL);
        for (int k = 0; k < 5; k++) {
            double y = x / 1.05;
            x = raw.a[k] * y + raw.b[k] * y * y * y + raw.c[k] * y * y * y * y * y;
        }
        ok_near(ns_scalar_map(&c, 0.5), x, 1e-13, "scalar map = raw p_k(x / s) chained (%.15f)",
                x);
    }
    ok(ns_coeffs_polar_express(&c, 0.9, &err) == -1 && strstr(err.msg, "[1, 2]"),
       "safety < 1 rejected: %s", err.msg);

    ok(ns_coeffs_parse(" 3, -4.5,2 ;1.5,-0.5,0e0;", NULL, &c, &err) == 0 && c.n == 2 &&
           c.a[0] == 3 && c.b[0] == -4.5 && c.c[0] == 2 && c.a[1] == 1.5 && c.c[1] == 0,
       "parse two triples, spaces and a trailing ';'");
    keep = c;
    struct {
        const char *text, *want;
    } bad[] = {
        {"", "coefficients:1:1: expected a list"},
        {"1,2", "coefficients:1:4: expected ',' before coefficient c of triple 1"},
        {"1,2,x", "coefficients:1:5: expected a number for coefficient c of triple 1"},
        {"1,2,3 4", "coefficients:1:7: expected ';' or the end after triple 1"},
        {"1,2,3;;", "coefficients:1:7: expected a number for coefficient a of triple 2"},
        {"1,2,3;\n 1,inf,3", "coefficients:2:4: coefficient b of triple 2 is not a finite"},
        {"1,2,3;1e999,1,1", "coefficients:1:7: coefficient a of triple 2 is not a finite"},
        {"1,+2,3", "coefficients:1:3: expected a number for coefficient b"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        int rc = ns_coeffs_parse(bad[i].text, NULL, &c, &err);
        char shown[64];
        size_t k = 0;
        for (const char *q = bad[i].text; *q && k + 3 < sizeof shown; q++) {
            if (*q == '\n') {
                shown[k++] = '\\';
                shown[k++] = 'n';
            } else {
                shown[k++] = *q;
            }
        }
        shown[k] = 0;
        ok(rc == -1 && strstr(err.msg, bad[i].want) && !memcmp(&c, &keep, sizeof c),
           "parse error for \"%s\": %s", shown, err.msg);
    }
    {
        char big[17 * 8 + 1] = "";
        for (int i = 0; i < 17; i++) strcat(big, "1,2,3;");
        ok(ns_coeffs_parse(big, "--ns-coeffs", &c, &err) == -1 &&
               strstr(err.msg, "--ns-coeffs:1:97: more than 16 triples"),
           "17 triples rejected: %s", err.msg);
    }
    ok(ns_coeffs_from_spec("jordan", NULL, &c, &err) == 0 && c.a[0] == 3.4445, "spec jordan");
    ok(ns_coeffs_from_spec("polar-express", NULL, &c, &err) == 0 &&
           c.a[0] == 8.28721201814563 / 1.05,
       "spec polar-express uses safety 1.05");
    ok(ns_coeffs_from_spec("polar-express:1.01", NULL, &c, &err) == 0 &&
           c.a[0] == 8.28721201814563 / 1.01,
       "spec polar-express:1.01");
    ok(ns_coeffs_from_spec("polar-express:x", "--ns", &c, &err) == -1 &&
           strstr(err.msg, "--ns:1:15: expected a safety factor"),
       "bad safety spec: %s", err.msg);
    ok(ns_coeffs_from_spec("1,2,3", NULL, &c, &err) == 0 && c.n == 1, "spec as a list");
}

/* A 2 x 3 diagonal input: each singular value follows the scalar map on its own. */
static void test_diagonal(void)
{
    const double G[6] = {3, 0, 0, 0, -1, 0};
    double O[6], s0 = 3 / (sqrt(10.0) + 1e-7), s1 = 1 / (sqrt(10.0) + 1e-7);
    ns_coeffs j, pe;
    ns_coeffs_jordan(&j);
    ns_coeffs_polar_express(&pe, NS_PE_SAFETY_DEFAULT, NULL);
    for (int algo = 0; algo < 2; algo++) {
        for (int ci = 0; ci < 2; ci++) {
            ns_opts o = opts((dm_ns_algo)algo, ci ? &pe : &j, NS_RESTARTS_DEFAULT);
            const ns_coeffs *c = ci ? &pe : &j;
            int rc = ns_ref_d(G, O, 2, 3, &o, NULL);
            ok(rc == 0 && fabs(O[0] - ns_scalar_map(c, s0)) < 1e-14 &&
                   fabs(O[4] + ns_scalar_map(c, s1)) < 1e-14 && O[1] == 0 && O[2] == 0 &&
                   O[3] == 0 && O[5] == 0,
               "%s %s on diag(3,-1): %.15f %.15f", dm_ns_algo_name((dm_ns_algo)algo),
               ci ? "polar-express" : "jordan", O[0], O[4]);
        }
    }
}

static void test_gram_equals_direct(void)
{
    static const int64_t shapes[][2] = {{7, 13}, {13, 7}, {32, 96}, {64, 64}, {96, 32}, {1, 9}};
    static const uint32_t restart_sets[] = {0, NS_RESTARTS_DEFAULT,
                                            NS_RESTART_BIT(1) | NS_RESTART_BIT(3),
                                            0xffffffffu};
    ns_coeffs cs[2];
    ns_coeffs_jordan(&cs[0]);
    ns_coeffs_polar_express(&cs[1], NS_PE_SAFETY_DEFAULT, NULL);
    for (size_t si = 0; si < sizeof shapes / sizeof shapes[0]; si++) {
        int64_t m = shapes[si][0], n = shapes[si][1];
        double *G = randn(m, n), *D = malloc(sizeof *D * (size_t)(m * n));
        double *R = malloc(sizeof *R * (size_t)(m * n)), worst = 0;
        int bad = 0;
        for (int ci = 0; ci < 2; ci++) {
            ns_opts od = opts(DM_NS_DIRECT, &cs[ci], 0);
            bad |= ns_ref_d(G, D, m, n, &od, NULL);
            for (size_t ri = 0; ri < sizeof restart_sets / sizeof restart_sets[0]; ri++) {
                ns_opts og = opts(DM_NS_GRAM, &cs[ci], restart_sets[ri]);
                double e;
                bad |= ns_ref_d(G, R, m, n, &og, NULL);
                e = ns_rel_fro_err_d(R, D, (size_t)(m * n));
                if (e > worst) worst = e;
            }
        }
        ok(!bad && worst <= 1e-12, "gram = direct, %lldx%lld, 2 coefficient sets x 4 restart "
                                   "sets: worst relative error %.2e",
           (long long)m, (long long)n, worst);
        free(G);
        free(D);
        free(R);
    }
}

/* Inputs with a chosen spectrum: output singular values must be f of the input's, and lie in
 * the band f promises over the input's range. */
static void test_spectrum(void)
{
    static const int64_t shapes[][2] = {{48, 80}, {80, 48}};
    ns_coeffs cs[2];
    const char *names[2] = {"jordan", "polar-express(1.05)"};
    const double band[2][2] = {{0.6818, 1.1344}, {0.8460, 1.1236}};
    ns_coeffs_jordan(&cs[0]);
    ns_coeffs_polar_express(&cs[1], NS_PE_SAFETY_DEFAULT, NULL);
    for (int ci = 0; ci < 2; ci++) {
        double lo, hi;
        map_band(&cs[ci], 0.01, 1.0, &lo, &hi);
        ok(lo >= band[ci][0] && hi <= band[ci][1] && lo < band[ci][0] + 1e-4 &&
               hi > band[ci][1] - 1e-4,
           "%s maps [0.01, 1] into [%.6f, %.6f] (asserted band [%.4f, %.4f])", names[ci], lo,
           hi, band[ci][0], band[ci][1]);
    }
    for (size_t si = 0; si < 2; si++) {
        int64_t m = shapes[si][0], n = shapes[si][1], r = m < n ? m : n;
        double *A = randn(m, m), *B = randn(n, n), s[96], d[96], sn[96], fs[96], so[96];
        double *Ua = malloc(sizeof(double) * (size_t)(m * m)), *Vb = malloc(sizeof(double) * (size_t)(n * n));
        double *Ut = malloc(sizeof(double) * (size_t)(m * m)), *Vt = malloc(sizeof(double) * (size_t)(n * n));
        double *G = malloc(sizeof(double) * (size_t)(m * n)), *O = malloc(sizeof(double) * (size_t)(m * n));
        double *Gr = malloc(sizeof(double) * (size_t)(r * n)), *P = malloc(sizeof(double) * (size_t)(m * n));
        double norm = 0;
        /* random orthogonal factors from SVDs of Gaussian square matrices */
        svd(A, m, m, s, Ua, Ut);
        svd(B, n, n, s, Vb, Vt);
        for (int64_t k = 0; k < r; k++) {
            d[k] = pow(0.05, (double)k / (double)(r - 1)); /* 1 .. 0.05, geometric */
            norm += d[k] * d[k];
        }
        norm = sqrt(norm);
        for (int64_t k = 0; k < r; k++) sn[k] = d[k] / (norm + 1e-7);
        /* G = Ua[:, :r] diag(d) Vt[:r, :] */
        for (int64_t i = 0; i < m; i++)
            for (int64_t k = 0; k < r; k++) Ut[i * r + k] = Ua[i * m + k];
        usv(Ut, d, Vt, m, r, n, G);
        usv(Ut, NULL, Vt, m, r, n, P); /* exact polar factor */
        ok(sn[r - 1] >= 0.01 && sn[0] <= 1, "%lldx%lld input: normalized singular values in "
                                            "[%.4f, %.4f]",
           (long long)m, (long long)n, sn[r - 1], sn[0]);
        for (int ci = 0; ci < 2; ci++) {
            double dist_pred = 0;
            for (int64_t k = 0; k < r; k++) {
                fs[k] = ns_scalar_map(&cs[ci], sn[k]);
                dist_pred += (fs[k] - 1) * (fs[k] - 1);
            }
            dist_pred = sqrt(dist_pred / (double)r);
            qsort(fs, (size_t)r, sizeof fs[0], cmp_desc);
            for (int algo = 0; algo < 2; algo++) {
                ns_opts o = opts((dm_ns_algo)algo, &cs[ci], NS_RESTARTS_DEFAULT);
                double worst = 0, smin, smax, dist;
                ns_ref_d(G, O, m, n, &o, NULL);
                svd(O, m, n, so, NULL, NULL);
                for (int64_t k = 0; k < r; k++)
                    if (fabs(so[k] - fs[k]) > worst) worst = fabs(so[k] - fs[k]);
                smax = so[0];
                smin = so[r - 1];
                dist = ns_rel_fro_err_d(O, P, (size_t)(m * n));
                ok(worst <= 1e-10, "%s %s %lldx%lld: singular values = f(input's), worst %.1e",
                   names[ci], dm_ns_algo_name((dm_ns_algo)algo), (long long)m, (long long)n, worst);
                ok(smin >= band[ci][0] && smax <= band[ci][1],
                   "%s %s %lldx%lld: singular values in [%.4f, %.4f] within the band",
                   names[ci], dm_ns_algo_name((dm_ns_algo)algo), (long long)m, (long long)n, smin,
                   smax);
                ok(fabs(dist - dist_pred) <= 1e-10,
                   "%s %s %lldx%lld: ||O - UV^T||/||UV^T|| = %.6f (predicted from f: %.6f)",
                   names[ci], dm_ns_algo_name((dm_ns_algo)algo), (long long)m, (long long)n, dist,
                   dist_pred);
            }
        }
        free(A); free(B); free(Ua); free(Vb); free(Ut); free(Vt);
        free(G); free(O); free(Gr); free(P);
    }
}

/* Gaussian inputs: distance to the exact polar factor, reported and bounded by the band. */
static void test_random_polar(void)
{
    static const int64_t shapes[][2] = {{32, 96}, {96, 32}, {64, 64}};
    ns_coeffs cs[2];
    const char *names[2] = {"jordan", "polar-express(1.05)"};
    ns_coeffs_jordan(&cs[0]);
    ns_coeffs_polar_express(&cs[1], NS_PE_SAFETY_DEFAULT, NULL);
    for (size_t si = 0; si < 3; si++) {
        int64_t m = shapes[si][0], n = shapes[si][1], r = m < n ? m : n;
        double *G = randn(m, n), *O = malloc(sizeof(double) * (size_t)(m * n));
        double *U = malloc(sizeof(double) * (size_t)(m * r)), *Vt = malloc(sizeof(double) * (size_t)(r * n));
        double *P = malloc(sizeof(double) * (size_t)(m * n)), s[96], norm = fro(G, (size_t)(m * n));
        svd(G, m, n, s, U, Vt);
        usv(U, NULL, Vt, m, r, n, P);
        for (int ci = 0; ci < 2; ci++) {
            double lo, hi, dist, bound;
            ns_opts o = opts(DM_NS_GRAM, &cs[ci], NS_RESTARTS_DEFAULT);
            map_band(&cs[ci], s[r - 1] / norm, s[0] / norm, &lo, &hi);
            bound = fmax(1 - lo, hi - 1);
            ns_ref_d(G, O, m, n, &o, NULL);
            dist = ns_rel_fro_err_d(O, P, (size_t)(m * n));
            tap_diag("%s %lldx%lld: normalized singular values [%.2e, %.3f], f maps them into "
                     "[%.4f, %.4f]; ||O - UV^T||/||UV^T|| = %.4f",
                     names[ci], (long long)m, (long long)n, s[r - 1] / norm, s[0] / norm, lo, hi,
                     dist);
            ok(dist <= bound, "%s %lldx%lld: distance to the polar factor %.4f <= %.4f",
               names[ci], (long long)m, (long long)n, dist, bound);
        }
        free(G); free(O); free(U); free(Vt); free(P);
    }
}

static void test_float(void)
{
    static const int64_t shapes[][2] = {{32, 96}, {96, 32}, {64, 64}, {100, 300}};
    ns_coeffs cs[2];
    ns_coeffs_jordan(&cs[0]);
    ns_coeffs_polar_express(&cs[1], NS_PE_SAFETY_DEFAULT, NULL);
    for (size_t si = 0; si < sizeof shapes / sizeof shapes[0]; si++) {
        int64_t m = shapes[si][0], n = shapes[si][1];
        size_t cnt = (size_t)(m * n);
        double *G = randn(m, n), *D = malloc(sizeof *D * cnt), worst = 0;
        float *Gf = malloc(sizeof *Gf * cnt), *Of = malloc(sizeof *Of * cnt);
        int bad = 0;
        ns_d2f(G, Gf, cnt);
        ns_f2d(Gf, G, cnt); /* both precisions start from the same numbers */
        for (int ci = 0; ci < 2; ci++)
            for (int algo = 0; algo < 2; algo++) {
                ns_opts o = opts((dm_ns_algo)algo, &cs[ci], NS_RESTARTS_DEFAULT);
                double e;
                bad |= ns_ref_d(G, D, m, n, &o, NULL);
                bad |= ns_ref_f(Gf, Of, m, n, &o, NULL);
                e = ns_rel_fro_err_fd(Of, D, cnt);
                if (e > worst) worst = e;
            }
        ok(!bad && worst <= 1e-4, "float = double within 1e-4, %lldx%lld: worst %.2e",
           (long long)m, (long long)n, worst);
        free(G); free(D); free(Gf); free(Of);
    }
}

/* Muon on a 1 x 2 and a 2 x 1 matrix: a rank-1 input, whose one singular value follows f. */
static void test_muon(void)
{
    for (int shape = 0; shape < 2; shape++)
        for (int nesterov = 0; nesterov < 2; nesterov++) {
            float W[2] = {1, -1}, buf[2] = {1, 2}, g[2] = {3, 4};
            ns_muon_params p;
            ns_coeffs j;
            double b[2], u[2], nu, sig, w[2];
            int rc;
            ns_muon_params_default(&p);
            ns_coeffs_default(&j);
            p.lr = 0.1;
            p.weight_decay = 0.5;
            p.nesterov = nesterov;
            for (int i = 0; i < 2; i++) {
                b[i] = 0.95 * buf[i] + g[i];                 /* 3.95, 5.9 */
                u[i] = nesterov ? g[i] + 0.95 * b[i] : b[i]; /* 6.7525, 9.605 */
            }
            nu = sqrt(u[0] * u[0] + u[1] * u[1]);
            sig = ns_scalar_map(&j, nu / (nu + 1e-7));
            for (int i = 0; i < 2; i++)
                w[i] = W[i] * (1 - 0.1 * 0.5) - 0.1 * 0.2 * sqrt(2.0) * sig * u[i] / nu;
            rc = shape ? ns_muon_update_f(W, buf, g, 2, 1, &p, NULL)
                       : ns_muon_update_f(W, buf, g, 1, 2, &p, NULL);
            ok(rc == 0 && fabs(buf[0] - b[0]) <= 1e-6 * fabs(b[0]) &&
                   fabs(buf[1] - b[1]) <= 1e-6 * fabs(b[1]) &&
                   fabs(W[0] - w[0]) <= 1e-6 && fabs(W[1] - w[1]) <= 1e-6,
               "muon %s nesterov=%d: buf (%.4f, %.4f), W (%.7f, %.7f) want (%.7f, %.7f)",
               shape ? "2x1" : "1x2", nesterov, buf[0], buf[1], W[0], W[1], w[0], w[1]);
        }
    {
        /* 2 x 3 diagonal gradient, NS in double: O = diag(f(s0), f(s1)) exactly */
        float W[6] = {0}, buf[6] = {0}, g[6] = {3, 0, 0, 0, 1, 0};
        ns_muon_params p;
        ns_coeffs j;
        double un = 1.95 * sqrt(10.0), f0, f1, step;
        ns_muon_params_default(&p);
        ns_coeffs_default(&j); /* the defaults' coefficients (ns_opts coeffs NULL) */
        p.ns_in_double = 1;
        p.ns.algo = DM_NS_GRAM;
        f0 = ns_scalar_map(&j, 1.95 * 3 / (un + 1e-7));
        f1 = ns_scalar_map(&j, 1.95 * 1 / (un + 1e-7));
        step = 1e-3 * 0.2 * sqrt(3.0);
        int rc = ns_muon_update_f(W, buf, g, 2, 3, &p, NULL);
        ok(rc == 0 && fabs(W[0] + step * f0) < 1e-9 && fabs(W[4] + step * f1) < 1e-9 && W[1] == 0 &&
               buf[0] == 3 && buf[4] == 1,
           "muon 2x3 defaults (lr 1e-3, scale 0.2 sqrt(3)): W00 %.8f W11 %.8f", W[0], W[4]);
    }
}

static void test_adamw(void)
{
    float W[2] = {1, 2}, m1[2] = {0, 0}, m2[2] = {0, 0}, g1[2] = {0.5f, -2}, g2[2] = {1, 1};
    ns_adamw_params p;
    dm_err err = {{0}};
    double w0, w1, a0, a1, v0, v1;
    ns_adamw_params_default(&p);
    p.lr = 0.01;
    /* step 1: m1 = 0.1 g, m2 = 0.05 g^2, bias-corrected to g and g^2: W -= lr g/(|g| + eps) */
    ok(ns_adamw_update_f(W, m1, m2, g1, 2, 1, &p, NULL) == 0, "adamw step 1");
    w0 = 1 * (1 - 0.01 * 0.1) - 0.01 * 0.5 / (0.5 + 1e-8);
    w1 = 2 * (1 - 0.01 * 0.1) + 0.01 * 2 / (2 + 1e-8);
    ok(fabs(W[0] - w0) < 1e-6 && fabs(W[1] - w1) < 1e-6 && fabs(m1[0] - 0.05) < 1e-8 &&
           fabs(m2[1] - 0.2) < 1e-8,
       "adamw step 1: W (%.7f, %.7f) want (%.7f, %.7f)", W[0], W[1], w0, w1);
    /* step 2 with g = (1, 1): m1 = (0.9*0.05 + 0.1, 0.9*-0.2 + 0.1) = (0.145, -0.08),
     * m2 = (0.95*0.0125 + 0.05, 0.95*0.2 + 0.05) = (0.061875, 0.24); corrections 0.19, 0.0975 */
    ok(ns_adamw_update_f(W, m1, m2, g2, 2, 2, &p, NULL) == 0, "adamw step 2");
    a0 = 0.145 / 0.19;
    a1 = -0.08 / 0.19;
    v0 = sqrt(0.061875 / 0.0975);
    v1 = sqrt(0.24 / 0.0975);
    w0 = w0 * 0.999 - 0.01 * a0 / (v0 + 1e-8);
    w1 = w1 * 0.999 - 0.01 * a1 / (v1 + 1e-8);
    ok(fabs(W[0] - w0) < 1e-6 && fabs(W[1] - w1) < 1e-6 && fabs(m1[0] - 0.145) < 1e-7 &&
           fabs(m2[0] - 0.061875) < 1e-7,
       "adamw step 2: W (%.7f, %.7f) want (%.7f, %.7f)", W[0], W[1], w0, w1);
    ok(ns_adamw_update_f(W, m1, m2, g2, 2, 0, &p, &err) == -1 && strstr(err.msg, "step 0"),
       "adamw step 0 rejected: %s", err.msg);
}

static void test_flops(void)
{
    /* by hand, r = 1024, l = 4096: rl = 2 r^2 l = 2^33, rr = 2 r^3 = 2^31.
     * direct: 5 (2 rl + rr); Gram with a restart before 2: 4 rl + 14 rr (see ns_ref.h). */
    ok(ns_ref_flops(1024, 4096, 5, DM_NS_DIRECT) == 96636764160.0, "direct FLOPs 1024x4096");
    ok(ns_ref_flops(4096, 1024, 5, DM_NS_DIRECT) == 96636764160.0, "direct FLOPs 4096x1024");
    ok(ns_ref_flops(1024, 4096, 5, DM_NS_GRAM) == 64424509440.0, "gram FLOPs 1024x4096: %.0f",
       ns_ref_flops(1024, 4096, 5, DM_NS_GRAM));
    /* no restart: rl + rr(2 + 4x4 + ... ) : 2 rl + rr (3 + 4 + 4 + 4 + 2) = 2 rl + 17 rr */
    ok(ns_ref_flops_ex(1024, 4096, 5, DM_NS_GRAM, 0, 0) == 2 * 8589934592.0 + 17 * 2147483648.0,
       "gram FLOPs without restarts");
    /* symmetric: direct 5 (rl/2 + rr/2 + rl) */
    ok(ns_ref_flops_ex(1024, 4096, 5, DM_NS_DIRECT, 0, 1) == 5 * (1.5 * 8589934592.0 + 0.5 * 2147483648.0),
       "direct FLOPs, symmetric products at half");
    ok(ns_ref_flops(64, 64, 0, DM_NS_GRAM) == 0, "0 iterations: 0 FLOPs");
}

static void test_errors(void)
{
    dm_err err = {{0}};
    double g[4] = {1, 2, 3, 4};
    ns_coeffs c;
    ns_opts o;
    dm_ns_algo a;
    ok(ns_ref_d(g, g, 0, 4, NULL, &err) == -1 && strstr(err.msg, "0 x 4"), "0 rows rejected: %s",
       err.msg);
    ns_coeffs_jordan(&c);
    c.n = 17;
    o = opts(DM_NS_GRAM, &c, 0);
    ok(ns_ref_d(g, g, 2, 2, &o, &err) == -1 && strstr(err.msg, "17 iterations"),
       "17 iterations rejected: %s", err.msg);
    ok(dm_ns_algo_parse("gram", &a, &err) == 0 && a == DM_NS_GRAM &&
           dm_ns_algo_parse("sym", &a, &err) == -1,
       "algo names: %s", err.msg);
    c.n = 0;
    o = opts(DM_NS_GRAM, &c, 0);
    ok(ns_ref_d(g, g, 2, 2, &o, &err) == 0 && fabs(g[3] - 4 / (sqrt(30.0) + 1e-7)) < 1e-15,
       "0 iterations: normalization only");
}

/* A zero gradient gives a zero update (eps keeps the normalization finite); the output may
 * alias the input. */
static void test_zero_and_alias(void)
{
    double Z[12] = {0}, *G = randn(5, 11), O[55], G2[55];
    for (int algo = 0; algo < 2; algo++) {
        ns_opts o = opts((dm_ns_algo)algo, NULL, NS_RESTARTS_DEFAULT);
        int zero = 1;
        ok(ns_ref_d(Z, Z, 3, 4, &o, NULL) == 0, "%s on a zero matrix", dm_ns_algo_name(o.algo));
        for (int i = 0; i < 12; i++) zero &= Z[i] == 0;
        ok(zero, "%s: zero in, zero out", dm_ns_algo_name(o.algo));
        memcpy(G2, G, sizeof G2);
        ns_ref_d(G, O, 11, 5, &o, NULL);
        ns_ref_d(G2, G2, 11, 5, &o, NULL);
        ok(!memcmp(O, G2, sizeof O), "%s: in place (O == G) gives the same bits",
           dm_ns_algo_name(o.algo));
    }
    free(G);
}

/* Timing: a quick size always; DM_NS_BIG=1 adds 1024x4096 (a few seconds per call). */
static void test_speed(void)
{
    int64_t m = 256, n = 1024;
    const char *big = getenv("DM_NS_BIG");
    for (int pass = 0; pass < (big && *big == '1' ? 2 : 1); pass++) {
        double *G, *O;
        float *Gf, *Of;
        if (pass) m = 1024, n = 4096;
        G = randn(m, n);
        O = malloc(sizeof *O * (size_t)(m * n));
        Gf = malloc(sizeof *Gf * (size_t)(m * n));
        Of = malloc(sizeof *Of * (size_t)(m * n));
        ns_d2f(G, Gf, (size_t)(m * n));
        for (int algo = 0; algo < 2; algo++)
            for (int prec = 0; prec < 2; prec++) {
                ns_opts o = opts((dm_ns_algo)algo, NULL, NS_RESTARTS_DEFAULT);
                struct timespec t0, t1;
                double s, fl = ns_ref_flops(m, n, 5, (dm_ns_algo)algo);
                clock_gettime(CLOCK_MONOTONIC, &t0);
                if (prec) ns_ref_f(Gf, Of, m, n, &o, NULL);
                else ns_ref_d(G, O, m, n, &o, NULL);
                clock_gettime(CLOCK_MONOTONIC, &t1);
                s = (double)(t1.tv_sec - t0.tv_sec) + 1e-9 * (double)(t1.tv_nsec - t0.tv_nsec);
                tap_diag("%-6s %-6s %4lldx%-4lld %8.3f s  %6.2f GFLOP/s (model FLOPs %.3g)",
                         dm_ns_algo_name((dm_ns_algo)algo), prec ? "float" : "double", (long long)m,
                         (long long)n, s, fl / s * 1e-9, fl);
            }
        free(G); free(O); free(Gf); free(Of);
    }
}

/* The split NS (ns_split_gram, ns_split_step): P row slices, their Grams summed as the
 * all-reduce would, stacked back = the whole matrix's direct NS. Double 1e-10 (the same math in
 * another summation order), float against the double whole 1e-4 (as test_float). Slices of
 * unequal rows too (the math does not need equal ones). */
static void test_split(void)
{
    static const int64_t shapes[][2] = {{64, 64}, {96, 32}, {120, 40}, {97, 31}};
    static const int parts[] = {1, 2, 3, 4};
    ns_coeffs pe;
    ns_coeffs_polar_express(&pe, NS_PE_SAFETY_DEFAULT, NULL);
    ns_opts o = opts(DM_NS_DIRECT, &pe, NS_RESTARTS_DEFAULT);
    for (size_t si = 0; si < sizeof shapes / sizeof shapes[0]; si++)
        for (size_t pi = 0; pi < sizeof parts / sizeof parts[0]; pi++) {
            int64_t m = shapes[si][0], n = shapes[si][1], P = parts[pi];
            size_t cnt = (size_t)(m * n), nn = (size_t)(n * n);
            double *G = randn(m, n), *want = malloc(sizeof *want * cnt), *Sd = malloc(sizeof *Sd * cnt);
            double *H = calloc(nn, sizeof *H), *Hj = malloc(sizeof *Hj * nn);
            float *Sf = malloc(sizeof *Sf * cnt), *Hf = calloc(nn, sizeof *Hf), *Hjf = malloc(sizeof *Hjf * nn);
            int bad = ns_ref_d(G, want, m, n, &o, NULL);
            memcpy(Sd, G, sizeof *Sd * cnt);
            ns_d2f(G, Sf, cnt);
            for (int k = 0; k < pe.n && !bad; k++) {
                memset(H, 0, sizeof *H * nn);
                memset(Hf, 0, sizeof *Hf * nn);
                for (int64_t j = 0; j < P; j++) { /* rows [lo, hi) of part j */
                    int64_t lo = m * j / P, hi = m * (j + 1) / P;
                    bad |= ns_split_gram_d(Sd + lo * n, hi - lo, n, Hj, NULL);
                    bad |= ns_split_gram_f(Sf + lo * n, hi - lo, n, Hjf, NULL);
                    for (size_t e = 0; e < nn; e++) H[e] += Hj[e], Hf[e] += Hjf[e];
                }
                for (int64_t j = 0; j < P; j++) {
                    int64_t lo = m * j / P, hi = m * (j + 1) / P;
                    memcpy(Hj, H, sizeof *H * nn); /* every rank its own copy of the sum */
                    memcpy(Hjf, Hf, sizeof *Hf * nn);
                    bad |= ns_split_step_d(Sd + lo * n, hi - lo, n, Hj, k, &o, NULL);
                    bad |= ns_split_step_f(Sf + lo * n, hi - lo, n, Hjf, k, &o, NULL);
                }
            }
            double ed = ns_rel_fro_err_d(Sd, want, cnt), ef = ns_rel_fro_err_fd(Sf, want, cnt);
            ok(!bad && ed <= 1e-10 && ef <= 1e-4, "split NS %lldx%lld over %lld parts = direct NS: double %.1e, float %.1e",
               (long long)m, (long long)n, (long long)P, ed, ef);
            free(G); free(want); free(Sd); free(H); free(Hj); free(Sf); free(Hf); free(Hjf);
        }
    double S[4] = {1, 2, 3, 4}, H[4];
    ok(ns_split_step_d(S, 2, 2, H, 5, &o, NULL) < 0 && ns_split_gram_d(S, 0, 2, H, NULL) < 0,
       "split NS: an iteration outside the set and an empty slice refused");
}

int main(void)
{
    gsl_rng_env_setup();
    rng = gsl_rng_alloc(gsl_rng_mt19937);
    gsl_rng_set(rng, 12345);
    test_coeffs();
    test_diagonal();
    test_gram_equals_direct();
    test_spectrum();
    test_random_polar();
    test_float();
    test_split();
    test_muon();
    test_adamw();
    test_flops();
    test_errors();
    test_zero_and_alias();
    test_speed();
    gsl_rng_free(rng);
    return tap_done();
}
