/* test_ns_gpu.c: the GPU kernels against the CPU reference in float64 (ns_ref): direct and Gram
 * NS plans (full and lower-block symmetric products, batched, graph replay, wide and tall,
 * bf16/fp32 input), single products, the Muon update chain and AdamW. Skips when the build has
 * no CUDA or no GPU is present.
 *
 * Tolerances (relative Frobenius error against float64 on the same input and coefficients):
 *   full NS, bf16 direct or fp16 Gram:  NS_TOL = 2e-2 (bf16 keeps 8 bits: ~4e-3 per product,
 *                                        amplified by the first polynomial's slope);
 *   single products (bf16 operands, fp32 accumulation, bf16 result): PROD_TOL = 8e-3;
 *   block-symmetric vs full cuBLAS on the same operands: BLOCK_TOL = 4e-3;
 *   AdamW (fp32 both sides): 1e-5; Muon weight change (NS in bf16): NS_TOL.
 * Every output is poisoned (NaN) before its run; a non-finite value fails the check. */
#include "config.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "tap.h"

#ifndef DM_HAVE_CUDA
int main(void) { return tap_skip_all("built without CUDA"); }
#else
#include "ns_cuda.h"
#include "ns_ref.h"

#define NS_TOL 2e-2
#define PROD_TOL 8e-3
#define BLOCK_TOL 4e-3

static uint64_t rng_state;
static double randn(void)
{
    /* xorshift64* then Box-Muller */
    double u[2];
    for (int k = 0; k < 2; k++) {
        rng_state ^= rng_state >> 12;
        rng_state ^= rng_state << 25;
        rng_state ^= rng_state >> 27;
        u[k] = ((rng_state * 2685821657736338717ull) >> 11) * (1.0 / 9007199254740992.0);
    }
    return sqrt(-2.0 * log(u[0] + 1e-300)) * cos(6.283185307179586 * u[1]);
}
static void fill_randn(double *x, size_t n, double scale)
{
    for (size_t i = 0; i < n; i++) x[i] = scale * randn();
}

/* rel Frobenius error; NaN (fails every comparison) when got has a non-finite value */
static double rel_err(const double *got, const double *want, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (!isfinite(got[i])) return NAN;
    return ns_rel_fro_err_d(got, want, n);
}

static int bail(const char *what, dm_err *e)
{
    ok(0, "%s: %s", what, e->msg);
    return -1;
}

/* One NS plan against ns_ref_d on fresh input; returns the worst error over the batch (NaN on
 * a non-finite output) and leaves the output in got. */
static double check_plan(int64_t rows, int64_t cols, int batch, ns_dtype io, const ns_config *cfg,
                         int use_graph, ns_stream s, double *got_out)
{
    dm_err e = {{0}};
    size_t per = (size_t)(rows * cols), n = per * batch;
    double *g = malloc(n * sizeof *g), *ref = malloc(n * sizeof *ref), *got = malloc(n * sizeof *got);
    double worst = NAN;
    ns_plan *p = NULL;
    ns_opts o;
    ns_opts_default(&o);
    o.coeffs = &cfg->coeffs;
    o.algo = NS_ALGO_DIRECT;
    if (!g || !ref || !got) goto out;
    fill_randn(g, n, 1.0);
    for (int b = 0; b < batch; b++)
        if (ns_ref_d(g + b * per, ref + b * per, rows, cols, &o, &e)) {
            bail("ns_ref_d", &e);
            goto out;
        }
    if (ns_plan_create(rows, cols, batch, io, cfg, &p, &e) ||
        ns_upload(ns_plan_input(p), io, g, (int64_t)n, &e) ||
        ns_fill_poison(ns_plan_output(p), io, (int64_t)n, s, &e) ||
        ns_plan_run(p, s, use_graph, &e) || ns_sync(s, &e) ||
        ns_download(got, ns_plan_output(p), io, (int64_t)n, &e)) {
        bail("plan run", &e);
        goto out;
    }
    worst = 0;
    for (int b = 0; b < batch; b++) {
        double r = rel_err(got + b * per, ref + b * per, per);
        if (!(r <= worst)) worst = r; /* NaN sticks */
    }
    if (got_out) memcpy(got_out, got, n * sizeof *got);
out:
    ns_plan_destroy(p);
    free(g);
    free(ref);
    free(got);
    return worst;
}

static void test_ns_plans(ns_stream s)
{
    static const struct { int64_t r, c; int batch; } shapes[] = {
        {64, 256, 1}, {256, 64, 1}, {200, 330, 2}, {384, 384, 1}, {96, 1000, 5}, {1000, 300, 1},
    };
    for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++)
        for (int algo = 0; algo < 2; algo++)
            for (int kb = 1; kb <= 3; kb += 2) {
                ns_config cfg;
                ns_config_default(&cfg, (ns_algo)algo);
                cfg.sym_blocks = kb;
                ns_dtype io = (i % 2) ? NS_FP32 : NS_BF16;
                int graph = (int)(i + kb) % 2;
                double r = check_plan(shapes[i].r, shapes[i].c, shapes[i].batch, io, &cfg, graph,
                                      s, NULL);
                ok(r <= NS_TOL, "NS %s %lldx%lld batch %d io %s sym_blocks %d graph %d: rel err %.3g <= %g",
                   ns_algo_name((ns_algo)algo), (long long)shapes[i].r, (long long)shapes[i].c,
                   shapes[i].batch, ns_dtype_name(io), kb, graph, r, NS_TOL);
            }
}

/* Gram equals direct within the bound on the same input; both against float64 too. */
static void test_gram_vs_direct(ns_stream s)
{
    int64_t r = 256, c = 1536;
    size_t n = (size_t)(r * c);
    double *xd = malloc(n * sizeof *xd), *xg = malloc(n * sizeof *xg);
    ns_config cd, cg;
    ns_config_default(&cd, NS_ALGO_DIRECT);
    ns_config_default(&cg, NS_ALGO_GRAM);
    cg.sym_blocks = 2;
    uint64_t seed = rng_state;
    double ed = check_plan(r, c, 1, NS_FP32, &cd, 1, s, xd);
    rng_state = seed; /* same input */
    double eg = check_plan(r, c, 1, NS_FP32, &cg, 1, s, xg);
    double dg = rel_err(xg, xd, n);
    ok(ed <= NS_TOL && eg <= NS_TOL && dg <= NS_TOL,
       "gram vs direct 256x1536: direct %.3g, gram %.3g vs float64; gram vs direct %.3g <= %g",
       ed, eg, dg, NS_TOL);
    free(xd);
    free(xg);
}

/* Replaying a captured graph picks up new input written into the plan's input buffer. */
static void test_graph_replay(ns_stream s)
{
    dm_err e = {{0}};
    int64_t r = 128, c = 512;
    size_t n = (size_t)(r * c);
    double *g = malloc(n * sizeof *g), *ref = malloc(n * sizeof *ref), *got = malloc(n * sizeof *got);
    ns_config cfg;
    ns_config_default(&cfg, NS_ALGO_GRAM);
    ns_plan *p = NULL;
    ns_opts o;
    ns_opts_default(&o);
    o.coeffs = &cfg.coeffs;
    double worst = 0;
    if (ns_plan_create(r, c, 1, NS_FP32, &cfg, &p, &e)) {
        bail("plan", &e);
        goto out;
    }
    for (int rep = 0; rep < 3; rep++) {
        fill_randn(g, n, 0.01 + rep);
        if (ns_ref_d(g, ref, r, c, &o, &e) || ns_upload(ns_plan_input(p), NS_FP32, g, (int64_t)n, &e) ||
            ns_fill_poison(ns_plan_output(p), NS_FP32, (int64_t)n, s, &e) ||
            ns_plan_run(p, s, 1, &e) || ns_sync(s, &e) ||
            ns_download(got, ns_plan_output(p), NS_FP32, (int64_t)n, &e)) {
            bail("graph replay", &e);
            goto out;
        }
        double er = rel_err(got, ref, n);
        if (!(er <= worst)) worst = er;
    }
    ok(worst <= NS_TOL, "graph replay on 3 fresh inputs (scales 0.01..2): worst rel err %.3g", worst);
out:
    ns_plan_destroy(p);
    free(g);
    free(ref);
    free(got);
}

/* A NaN in the input must show up as a failed check, never as a pass. */
static void test_nan_fails(ns_stream s)
{
    dm_err e = {{0}};
    int64_t r = 64, c = 128;
    size_t n = (size_t)(r * c);
    double *g = malloc(n * sizeof *g), *got = malloc(n * sizeof *got), *ref = malloc(n * sizeof *ref);
    ns_config cfg;
    ns_config_default(&cfg, NS_ALGO_DIRECT);
    ns_plan *p = NULL;
    fill_randn(g, n, 1);
    memcpy(ref, g, n * sizeof *g);
    g[17] = NAN;
    if (ns_plan_create(r, c, 1, NS_FP32, &cfg, &p, &e) ||
        ns_upload(ns_plan_input(p), NS_FP32, g, (int64_t)n, &e) || ns_plan_run(p, s, 0, &e) ||
        ns_sync(s, &e) || ns_download(got, ns_plan_output(p), NS_FP32, (int64_t)n, &e)) {
        bail("nan plan", &e);
    } else {
        double er = rel_err(got, ref, n);
        ok(!(er <= NS_TOL), "a NaN input gives a failing check (rel err %g)", er);
    }
    ns_plan_destroy(p);
    free(g);
    free(got);
    free(ref);
}

/* Single products against float64 on the operands the GPU used, and block vs full. */
static void test_products(void)
{
    static const char *names[] = {"gemm S X", "syrk X X^T", "symm S S"};
    int64_t m = 448, n = 1280;
    int batch = 2;
    for (int kind = 0; kind < 3; kind++)
        for (int kb = 1; kb <= 4; kb += 3) {
            dm_err e = {{0}};
            ns_prod *p = NULL;
            void *x, *sm, *d;
            int64_t nn = kind == NS_PROD_SYMM ? m : n;
            size_t nx = (size_t)(m * nn) * batch, ns = (size_t)(m * m) * batch;
            size_t nd = kind == NS_PROD_GEMM ? nx : ns;
            double *hx = malloc(nx * 8), *hs = malloc(ns * 8), *hd = malloc(nd * 8), *want = malloc(nd * 8);
            double rel = NAN, blk = 0;
            if (ns_prod_create((ns_prod_kind)kind, m, nn, batch, NS_BF16, kb, &p, &e) ||
                (ns_prod_buffers(p, &x, &sm, &d), 0) || ns_fill_poison(d, NS_BF16, (int64_t)nd, NULL, &e) ||
                ns_prod_run(p, NULL, &e) || ns_sync(NULL, &e) ||
                ns_download(hx, x, NS_BF16, (int64_t)nx, &e) ||
                ns_download(hs, sm, NS_BF16, (int64_t)ns, &e) ||
                ns_download(hd, d, NS_BF16, (int64_t)nd, &e) || ns_prod_check(p, &blk, &e)) {
                bail(names[kind], &e);
            } else {
                for (int b = 0; b < batch; b++) {
                    const double *X = hx + (size_t)b * m * nn, *S = hs + (size_t)b * m * m;
                    double *W = want + (size_t)b * (nd / batch);
                    if (kind == NS_PROD_GEMM) /* row-major m x n: W = S X */
                        for (int64_t i = 0; i < m; i++)
                            for (int64_t j = 0; j < nn; j++) {
                                double acc = 0;
                                for (int64_t k = 0; k < m; k++) acc += S[i + k * m] * X[k * nn + j];
                                W[i * nn + j] = acc;
                            }
                    else if (kind == NS_PROD_SYRK) /* column-major m x m: W = X X^T */
                        for (int64_t i = 0; i < m; i++)
                            for (int64_t j = 0; j < m; j++) {
                                double acc = 0;
                                for (int64_t k = 0; k < nn; k++) acc += X[i * nn + k] * X[j * nn + k];
                                W[i + j * m] = acc;
                            }
                    else
                        for (int64_t i = 0; i < m; i++)
                            for (int64_t j = 0; j < m; j++) {
                                double acc = 0;
                                for (int64_t k = 0; k < m; k++) acc += S[i + k * m] * S[k + j * m];
                                W[i + j * m] = acc;
                            }
                }
                rel = rel_err(hd, want, nd);
            }
            ok(rel <= PROD_TOL && blk <= BLOCK_TOL,
               "%s %lldx%lld batch %d sym_blocks %d: rel err vs float64 %.3g <= %g, vs full cuBLAS %.3g <= %g",
               names[kind], (long long)m, (long long)nn, batch, kb, rel, PROD_TOL, blk, BLOCK_TOL);
            ns_prod_destroy(p);
            free(hx);
            free(hs);
            free(hd);
            free(want);
        }
}

/* The Muon chain on the GPU (momentum + Nesterov kernel, NS plan, apply kernel) against
 * ns_muon_update_f with the NS in double; then AdamW against ns_adamw_update_f. */
static void test_updates(ns_stream s)
{
    dm_err e = {{0}};
    int64_t r = 320, c = 192;
    size_t n = (size_t)(r * c);
    float *w = malloc(n * 4), *buf = malloc(n * 4), *g = malloc(n * 4), *w0 = malloc(n * 4),
          *wg = malloc(n * 4), *m1 = malloc(n * 4), *m2 = malloc(n * 4), *hm = malloc(n * 4),
          *hv = malloc(n * 4);
    double *tmp = malloc(n * 8);
    void *dw = NULL, *dg = NULL, *dbuf = NULL, *dm = NULL, *dv = NULL;
    ns_plan *p = NULL;
    ns_config cfg;
    ns_config_default(&cfg, NS_ALGO_DIRECT);
    ns_muon_params mp;
    ns_muon_params_default(&mp);
    mp.ns_in_double = 1;
    mp.ns.coeffs = &cfg.coeffs;
    mp.lr = 0.02;
    for (size_t i = 0; i < n; i++) {
        w[i] = w0[i] = (float)randn();
        buf[i] = (float)(0.1 * randn());
        g[i] = (float)randn();
    }
    float scale = (float)(mp.scale_coef * sqrt((double)(r > c ? r : c)));
    if (ns_dev_alloc(&dw, n * 4, &e) || ns_dev_alloc(&dg, n * 4, &e) || ns_dev_alloc(&dbuf, n * 4, &e) ||
        ns_copy_h2d(dw, w, n * 4, &e) || ns_copy_h2d(dg, g, n * 4, &e) || ns_copy_h2d(dbuf, buf, n * 4, &e) ||
        ns_plan_create(r, c, 1, NS_BF16, &cfg, &p, &e) ||
        ns_muon_momentum(dg, dbuf, ns_plan_input(p), NS_BF16, (int64_t)n, (float)mp.momentum, 1, s, &e) ||
        ns_plan_run(p, s, 1, &e) ||
        ns_muon_apply(dw, ns_plan_output(p), NS_BF16, (int64_t)n, (float)mp.lr, (float)mp.weight_decay, scale, s, &e) ||
        ns_sync(s, &e) || ns_copy_d2h(wg, dw, n * 4, &e) || ns_copy_d2h(hm, dbuf, n * 4, &e) ||
        ns_muon_update_f(w, buf, g, r, c, &mp, &e)) {
        bail("muon chain", &e);
        goto adamw;
    }
    {
        double d2 = 0, r2 = 0, bd = 0, br = 0;
        int finite = 1;
        for (size_t i = 0; i < n; i++) {
            double dg_ = (double)wg[i] - w0[i], dr = (double)w[i] - w0[i];
            finite &= isfinite(wg[i]) && isfinite(hm[i]);
            d2 += (dg_ - dr) * (dg_ - dr);
            r2 += dr * dr;
            bd += ((double)hm[i] - buf[i]) * ((double)hm[i] - buf[i]);
            br += (double)buf[i] * buf[i];
        }
        ok(finite && sqrt(d2 / r2) <= NS_TOL && sqrt(bd / br) <= 1e-6,
           "Muon update 320x192 (tall): weight change rel err %.3g <= %g, momentum rel err %.3g",
           sqrt(d2 / r2), NS_TOL, sqrt(bd / br));
    }
adamw:
    for (size_t i = 0; i < n; i++) {
        w[i] = w0[i];
        m1[i] = (float)(0.1 * randn());
        m2[i] = (float)fabs(0.01 * randn());
        g[i] = (float)randn();
    }
    {
        ns_adamw_params ap;
        ns_adamw_params_default(&ap);
        size_t na = n - 3; /* odd count: the vector body and the scalar tail */
        if (ns_dev_alloc(&dm, n * 4, &e) || ns_dev_alloc(&dv, n * 4, &e) ||
            ns_copy_h2d(dw, w, n * 4, &e) || ns_copy_h2d(dg, g, n * 4, &e) ||
            ns_copy_h2d(dm, m1, n * 4, &e) || ns_copy_h2d(dv, m2, n * 4, &e) ||
            ns_adamw(dw, dg, dm, dv, (int64_t)na, (float)ap.lr, (float)ap.beta1, (float)ap.beta2,
                     (float)ap.eps, (float)ap.weight_decay, 7, s, &e) ||
            ns_sync(s, &e) || ns_copy_d2h(wg, dw, n * 4, &e) || ns_copy_d2h(hm, dm, n * 4, &e) ||
            ns_copy_d2h(hv, dv, n * 4, &e) || ns_adamw_update_f(w, m1, m2, g, na, 7, &ap, &e)) {
            bail("adamw", &e);
        } else {
            double d2 = 0, r2 = 0, md = 0, mr = 0;
            int finite = 1, tail_untouched = 1;
            for (size_t i = 0; i < na; i++) {
                double dg_ = (double)wg[i] - w0[i], dr = (double)w[i] - w0[i];
                finite &= isfinite(wg[i]) && isfinite(hm[i]) && isfinite(hv[i]);
                d2 += (dg_ - dr) * (dg_ - dr);
                r2 += dr * dr;
                md += ((double)hm[i] - m1[i]) * ((double)hm[i] - m1[i]) + ((double)hv[i] - m2[i]) * ((double)hv[i] - m2[i]);
                mr += (double)m1[i] * m1[i] + (double)m2[i] * m2[i];
            }
            for (size_t i = na; i < n; i++) tail_untouched &= wg[i] == w0[i];
            ok(finite && tail_untouched && sqrt(d2 / r2) <= 1e-5 && sqrt(md / mr) <= 1e-6,
               "AdamW %zu elements, step 7: weight change rel err %.3g, moments %.3g, past-the-end untouched %d",
               na, sqrt(d2 / r2), sqrt(md / mr), tail_untouched);
        }
    }
    ns_plan_destroy(p);
    ns_dev_free(dw);
    ns_dev_free(dg);
    ns_dev_free(dbuf);
    ns_dev_free(dm);
    ns_dev_free(dv);
    free(w), free(buf), free(g), free(w0), free(wg), free(m1), free(m2), free(hm), free(hv), free(tmp);
}

int main(void)
{
    dm_err e = {{0}};
    ns_device_info info;
    ns_stream s = NULL;
    if (ns_device_query(&info, &e)) return tap_skip_all("no usable CUDA device");
    rng_state = ((uint64_t)time(NULL) << 20) ^ (uint64_t)getpid() ^ 0x9e3779b97f4a7c15ull;
    if (getenv("DM_TEST_SEED")) rng_state = strtoull(getenv("DM_TEST_SEED"), NULL, 0);
    tap_diag("device %s (sm_%d%d, %d SMs), seed 0x%llx", info.name, info.sm_major, info.sm_minor,
             info.n_sms, (unsigned long long)rng_state);
    if (ns_stream_create(&s, &e)) {
        ok(0, "stream: %s", e.msg);
        return tap_done();
    }
    test_ns_plans(s);
    test_gram_vs_direct(s);
    test_graph_replay(s);
    test_nan_fails(s);
    test_products();
    test_updates(s);
    ns_stream_destroy(s);
    return tap_done();
}
#endif
