/* test_ns_gpu.c: the GPU kernels against the CPU reference in float64 (ns_ref): direct and Gram
 * NS plans (full and lower-block symmetric products, batched, graph replay, wide and tall,
 * bf16/fp32 input), single products, the Muon update chain and AdamW, and the elementwise
 * kernels out of place against in place (bit for bit). Skips when the build has no CUDA or no
 * GPU is present.
 *
 * Tolerances (relative Frobenius error against float64 on the same input and coefficients):
 *   full NS, bf16 direct or fp16 Gram:  NS_TOL = 2e-2 (bf16 keeps 8 bits: ~4e-3 per product,
 *                                        amplified by the first polynomial's slope; measured
 *                                        ~1e-2 direct, 2e-3..4e-3 Gram on wide matrices);
 *   Gram on square matrices (m == n):   GRAM_SQ_TOL = 3.5e-2 (R = X X^T then holds the
 *                                        smallest singular values squared, at the edge of
 *                                        fp16's resolution: measured 2.0e-2..2.5e-2 at 384^2);
 *   single products (bf16 operands, fp32 accumulation, bf16 result): PROD_TOL = 8e-3;
 *   block-symmetric vs full cuBLAS on the same operands: BLOCK_TOL = 4e-3;
 *   AdamW (fp32 both sides): weight change 2e-4 (the change is ~1e-3 of w, so w's own fp32
 *   rounding, 6e-8 relative, is ~6e-5 of it), moments 1e-6; Muon weight change: NS_TOL.
 *   our kernels (ns_config.kernel: symmetric products, fused NS): the same bounds against float64,
 *   and against the cuBLASLt plan on the same input twice that bound (each is within it of the
 *   exact result: the triangle inequality), where float64 is too slow (64 x 256x1536, 1024^2,
 *   2048x512) the latter alone; their single products PROD_TOL and BLOCK_TOL as above (the
 *   engine's D = alpha S1 S2 + beta C + gamma I also on operands that are not symmetric, the
 *   check run 9's engine would have failed); a fused plan run
 *   twice (and by graph and by launches) gives the same bits (its split-K sums are in a fixed
 *   order: a difference is a race).
 * Every output is poisoned (NaN) before its run; a non-finite value fails the check.
 * The autotune cache's file format (per-GEMM picks, older 17-field lines, bad fields) is checked
 * first and needs no GPU.
 * Environment: DM_TEST_SEED=N repeats a run's inputs; DM_TEST_NO_GRAPH=1 launches kernels one
 * by one instead of replaying graphs; DM_TEST_ELEMENTWISE_ONLY=1 runs only the tests without
 * cuBLASLt (compute-sanitizer's racecheck fails to launch cuBLASLt's Hopper kernels);
 * DM_TEST_OWN=1 runs only the checks of our kernels, on fewer and smaller shapes (for
 * compute-sanitizer), and DM_TEST_NO_LT=1 with it leaves out their cuBLASLt comparisons too
 * (racecheck: the float64 checks remain); DM_TEST_QUICK=1 with it: fewer still (two whole-NS
 * shapes, batches of at most 2: racecheck in about a minute). */
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
#include "autotune.h"
#include "ns_cuda.h"
#include "ns_mma.h"
#include "ns_ref.h"

#define NS_TOL 2e-2
#define GRAM_SQ_TOL 3.5e-2
#define PROD_TOL 8e-3
#define BLOCK_TOL 4e-3

static int own_only, no_lt, quick; /* DM_TEST_OWN, DM_TEST_NO_LT, DM_TEST_QUICK */

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
static double check_plan(int64_t rows, int64_t cols, int batch, dm_dtype io, const ns_config *cfg,
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
    o.algo = DM_NS_DIRECT;
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
        {64, 256, 1}, {256, 64, 1}, {200, 330, 2}, {384, 384, 1}, {96, 1000, 5}, {1000, 304, 1},
    };
    for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++)
        for (int algo = 0; algo < 2; algo++)
            for (int kb = 1; kb <= 8; kb = kb == 1 ? 4 : kb * 2)
                for (int flat = 0; flat <= (kb > 1); flat++) { /* both schemes of the blocks */
                    ns_config cfg;
                    ns_config_default(&cfg, (dm_ns_algo)algo);
                    cfg.sym_blocks = cfg.sym_blocks_mm = kb;
                    cfg.sym_flat = flat;
                    dm_dtype io = (i % 2) ? DM_DT_FP32 : DM_DT_BF16;
                    int graph = getenv("DM_TEST_NO_GRAPH") ? 0 : (int)(i + kb + flat) % 2;
                    double r = check_plan(shapes[i].r, shapes[i].c, shapes[i].batch, io, &cfg, graph,
                                          s, NULL);
                    double tol = algo == DM_NS_GRAM && shapes[i].r == shapes[i].c ? GRAM_SQ_TOL : NS_TOL;
                    ok(r <= tol, "NS %s %lldx%lld batch %d io %s sym_blocks %d%s graph %d: rel err %.3g <= %g",
                       dm_ns_algo_name((dm_ns_algo)algo), (long long)shapes[i].r, (long long)shapes[i].c,
                       shapes[i].batch, dm_dtype_name(io), kb, flat ? " flat" : "", graph, r, tol);
                }
}

/* Gram equals direct within the bound on the same input; both against float64 too. */
static void test_gram_vs_direct(ns_stream s)
{
    int64_t r = 256, c = 1536;
    size_t n = (size_t)(r * c);
    double *xd = malloc(n * sizeof *xd), *xg = malloc(n * sizeof *xg);
    ns_config cd, cg;
    ns_config_default(&cd, DM_NS_DIRECT);
    ns_config_default(&cg, DM_NS_GRAM);
    cg.sym_blocks = 2;
    cg.sym_blocks_mm = 4;
    uint64_t seed = rng_state;
    double ed = check_plan(r, c, 1, DM_DT_FP32, &cd, 1, s, xd);
    rng_state = seed; /* same input */
    double eg = check_plan(r, c, 1, DM_DT_FP32, &cg, 1, s, xg);
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
    ns_config_default(&cfg, DM_NS_GRAM);
    ns_plan *p = NULL;
    ns_opts o;
    ns_opts_default(&o);
    o.coeffs = &cfg.coeffs;
    double worst = 0;
    if (ns_plan_create(r, c, 1, DM_DT_FP32, &cfg, &p, &e)) {
        bail("plan", &e);
        goto out;
    }
    for (int rep = 0; rep < 3; rep++) {
        fill_randn(g, n, 0.01 + rep);
        if (ns_ref_d(g, ref, r, c, &o, &e) || ns_upload(ns_plan_input(p), DM_DT_FP32, g, (int64_t)n, &e) ||
            ns_fill_poison(ns_plan_output(p), DM_DT_FP32, (int64_t)n, s, &e) ||
            ns_plan_run(p, s, !getenv("DM_TEST_NO_GRAPH"), &e) || ns_sync(s, &e) ||
            ns_download(got, ns_plan_output(p), DM_DT_FP32, (int64_t)n, &e)) {
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
    ns_config_default(&cfg, DM_NS_DIRECT);
    ns_plan *p = NULL;
    fill_randn(g, n, 1);
    memcpy(ref, g, n * sizeof *g);
    g[17] = NAN;
    if (ns_plan_create(r, c, 1, DM_DT_FP32, &cfg, &p, &e) ||
        ns_upload(ns_plan_input(p), DM_DT_FP32, g, (int64_t)n, &e) || ns_plan_run(p, s, 0, &e) ||
        ns_sync(s, &e) || ns_download(got, ns_plan_output(p), DM_DT_FP32, (int64_t)n, &e)) {
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
            if (ns_prod_create((ns_prod_kind)kind, m, nn, batch, DM_DT_BF16, kb, &p, &e) ||
                (ns_prod_buffers(p, &x, &sm, &d), 0) || ns_fill_poison(d, DM_DT_BF16, (int64_t)nd, NULL, &e) ||
                ns_prod_run(p, NULL, &e) || ns_sync(NULL, &e) ||
                ns_download(hx, x, DM_DT_BF16, (int64_t)nx, &e) ||
                ns_download(hs, sm, DM_DT_BF16, (int64_t)ns, &e) ||
                ns_download(hd, d, DM_DT_BF16, (int64_t)nd, &e) || ns_prod_check(p, &blk, &e)) {
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
 * ns_muon_update_f with the NS in double. */
static void test_updates(ns_stream s)
{
    dm_err e = {{0}};
    int64_t r = 320, c = 192;
    size_t n = (size_t)(r * c);
    float *w = malloc(n * 4), *buf = malloc(n * 4), *g = malloc(n * 4), *w0 = malloc(n * 4),
          *wg = malloc(n * 4), *hm = malloc(n * 4);
    void *dw = NULL, *dg = NULL, *dbuf = NULL;
    ns_plan *p = NULL;
    ns_config cfg;
    ns_config_default(&cfg, DM_NS_DIRECT);
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
        ns_plan_create(r, c, 1, DM_DT_BF16, &cfg, &p, &e) ||
        ns_muon_momentum(dg, dbuf, dbuf, ns_plan_input(p), DM_DT_BF16, (int64_t)n, (float)mp.momentum, 1, s,
                         &e) ||
        ns_plan_run(p, s, !getenv("DM_TEST_NO_GRAPH"), &e) ||
        ns_muon_apply(dw, dw, NULL, ns_plan_output(p), DM_DT_BF16, (int64_t)n, (float)mp.lr, (float)mp.weight_decay, scale,
                      s, &e) ||
        ns_sync(s, &e) || ns_copy_d2h(wg, dw, n * 4, &e) || ns_copy_d2h(hm, dbuf, n * 4, &e) ||
        ns_muon_update_f(w, buf, g, r, c, &mp, &e)) {
        bail("muon chain", &e);
        goto out;
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
out:
    ns_plan_destroy(p);
    free(w), free(buf), free(g), free(w0), free(wg), free(hm);
    ns_dev_free(dw);
    ns_dev_free(dg);
    ns_dev_free(dbuf);
}

/* AdamW against ns_adamw_update_f, over an odd count (vector body and scalar tail). */
static void test_adamw(ns_stream s)
{
    dm_err e = {{0}};
    size_t n = 320 * 192;
    float *w = malloc(n * 4), *g = malloc(n * 4), *w0 = malloc(n * 4), *wg = malloc(n * 4),
          *m1 = malloc(n * 4), *m2 = malloc(n * 4), *hm = malloc(n * 4), *hv = malloc(n * 4);
    void *dw = NULL, *dg = NULL, *dm = NULL, *dv = NULL;
    for (size_t i = 0; i < n; i++) w[i] = w0[i] = (float)randn();
    if (ns_dev_alloc(&dw, n * 4, &e) || ns_dev_alloc(&dg, n * 4, &e)) {
        bail("adamw alloc", &e);
        goto done;
    }
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
            ns_adamw(dw, dw, NULL, dg, dm, dm, dv, dv, (int64_t)na, (float)ap.lr, (float)ap.beta1,
                     (float)ap.beta2, (float)ap.eps, (float)ap.weight_decay, 7, s, &e) ||
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
            ok(finite && tail_untouched && sqrt(d2 / r2) <= 2e-4 && sqrt(md / mr) <= 1e-6,
               "AdamW %zu elements, step 7: weight change rel err %.3g, moments %.3g, past-the-end untouched %d",
               na, sqrt(d2 / r2), sqrt(md / mr), tail_untouched);
        }
    }
done:
    ns_dev_free(dw);
    ns_dev_free(dg);
    ns_dev_free(dm);
    ns_dev_free(dv);
    free(w), free(g), free(w0), free(wg), free(m1), free(m2), free(hm), free(hv);
}

/* The elementwise kernels out of place (the GPU executor's ping-pong state: read the committed
 * buffer, write the other one) against the same kernels in place on the same input, over an odd
 * count (AdamW's vector body and scalar tail): the results equal bit for bit, and the inputs
 * read out of place are left unchanged; the bf16 working copy written in the same pass equals the
 * new fp32 weights rounded to nearest even. Pass 2 repeats AdamW one element off 16-byte
 * alignment (every element through the scalar kernel). */
static uint16_t bf16_rne(float f)
{
    uint32_t b;
    memcpy(&b, &f, 4);
    return (uint16_t)((b + 0x7fffu + ((b >> 16) & 1u)) >> 16);
}

static void test_out_of_place(ns_stream s)
{
    enum { N = 320 * 192 - 3 };
    const size_t b4 = (size_t)N * 4;
    dm_err e = {{0}};
    /* host: [0] w, [1] m (AdamW first moment, then Muon momentum), [2] v, [3] g */
    float *h0[4] = {0}, *in[3] = {0}, *oop[3] = {0}, *kept[3] = {0}, *d[10] = {0};
    void *u[2] = {0}, *wb = NULL;
    uint16_t *hu[2] = {malloc((size_t)N * 2), malloc((size_t)N * 2)}, *hwb = malloc((size_t)N * 2);
    int bad = !hu[0] || !hu[1] || !hwb;
    for (int k = 0; k < 4; k++) bad |= !(h0[k] = malloc(b4));
    for (int k = 0; k < 3; k++) bad |= !(in[k] = malloc(b4)) | !(oop[k] = malloc(b4)) | !(kept[k] = malloc(b4));
    if (bad) {
        ok(0, "out of place: host memory");
        goto done;
    }
    for (size_t i = 0; i < (size_t)N; i++) {
        h0[0][i] = (float)randn();
        h0[1][i] = (float)(0.1 * randn());
        h0[2][i] = (float)fabs(0.01 * randn());
        h0[3][i] = (float)randn();
    }
    /* device: d[0..2] in place, d[3..5] the inputs read out of place, d[6..8] the outputs, d[9] g */
    for (int k = 0; k < 10 && !bad; k++) bad = ns_dev_alloc((void **)&d[k], b4, &e) != 0;
    for (int k = 0; k < 2 && !bad; k++) bad = ns_dev_alloc(&u[k], (size_t)N * 2, &e) != 0;
    if (!bad) bad = ns_dev_alloc(&wb, (size_t)N * 2, &e) != 0;
    for (int pass = 0; pass < 3 && !bad; pass++) { /* 0, 2: AdamW on w, m, v; 1: Muon on w (m the momentum) */
        int ns = pass == 1 ? 2 : 3, o = pass == 2; /* o: elements off alignment */
        for (int k = 0; k < ns && !bad; k++)
            bad = ns_copy_h2d(d[k], h0[k], b4, &e) || ns_copy_h2d(d[k + 3], h0[k], b4, &e) ||
                  ns_fill_poison(d[k + 6], DM_DT_FP32, N, s, &e);
        if (!bad && ns_copy_h2d(d[9], h0[3], b4, &e)) bad = 1;
        if (bad) break;
        float **f = d;
        uint16_t *wbo = (uint16_t *)wb + o;
        if (!bad) bad = ns_fill_poison(wb, DM_DT_BF16, N, s, &e) != 0;
        if (bad) break;
        if (pass != 1)
            bad = ns_adamw(f[0] + o, f[0] + o, NULL, f[9] + o, f[1] + o, f[1] + o, f[2] + o, f[2] + o, N - o, 1e-3f,
                           0.9f, 0.95f, 1e-8f, 0.1f, 3, s, &e) ||
                  ns_adamw(f[3] + o, f[6] + o, wbo, f[9] + o, f[4] + o, f[7] + o, f[5] + o, f[8] + o, N - o, 1e-3f,
                           0.9f, 0.95f, 1e-8f, 0.1f, 3, s, &e);
        else
            bad = ns_muon_momentum(f[9], f[1], f[1], u[0], DM_DT_BF16, N, 0.95f, 1, s, &e) ||
                  ns_muon_momentum(f[9], f[4], f[7], u[1], DM_DT_BF16, N, 0.95f, 1, s, &e) ||
                  ns_muon_apply(f[0], f[0], NULL, u[0], DM_DT_BF16, N, 0.02f, 0.1f, 0.2f, s, &e) ||
                  ns_muon_apply(f[3], f[6], wb, u[1], DM_DT_BF16, N, 0.02f, 0.1f, 0.2f, s, &e);
        if (!bad) bad = ns_sync(s, &e) != 0;
        for (int k = 0; k < ns && !bad; k++)
            bad = ns_copy_d2h(in[k], d[k], b4, &e) || ns_copy_d2h(oop[k], d[k + 6], b4, &e) ||
                  ns_copy_d2h(kept[k], d[k + 3], b4, &e);
        if (!bad && pass == 1)
            bad = ns_copy_d2h(hu[0], u[0], (size_t)N * 2, &e) || ns_copy_d2h(hu[1], u[1], (size_t)N * 2, &e);
        if (!bad) bad = ns_copy_d2h(hwb, wb, (size_t)N * 2, &e) != 0;
        if (bad) break;
        int same = 1, unchanged = 1, finite = 1, wb_ok = 1;
        for (int k = 0; k < ns; k++) {
            same &= !memcmp(in[k] + o, oop[k] + o, b4 - 4 * (size_t)o);
            unchanged &= !memcmp(kept[k], h0[k], b4);
            for (size_t i = (size_t)o; i < (size_t)N; i++) finite &= isfinite(oop[k][i]);
        }
        for (size_t i = (size_t)o; i < (size_t)N; i++) wb_ok &= hwb[i] == bf16_rne(oop[0][i]);
        if (pass == 1) same &= !memcmp(hu[0], hu[1], (size_t)N * 2);
        ok(same && unchanged && finite && wb_ok,
           "%s out of place equals in place bit for bit (%d elements%s): same %d, inputs unchanged %d, finite %d, "
           "bf16 copy of the new weights %d",
           pass == 1 ? "Muon momentum, NS input and apply" : "AdamW (w, m, v)", N - o,
           o ? ", 4 bytes off alignment" : "", same, unchanged, finite, wb_ok);
    }
    if (bad) bail("out of place", &e);
done:
    for (int k = 0; k < 10; k++) ns_dev_free(d[k]);
    for (int k = 0; k < 2; k++) ns_dev_free(u[k]), free(hu[k]);
    ns_dev_free(wb);
    free(hwb);
    for (int k = 0; k < 4; k++) free(h0[k]);
    for (int k = 0; k < 3; k++) free(in[k]), free(oop[k]), free(kept[k]);
}

/* Normalization against the CPU (vector path: per-matrix count a multiple of 8; scalar path
 * otherwise), and the mirror kernel (a symmetric operand is made by mirroring with 1-element
 * blocks: it must be exactly symmetric). */
static void test_normalize_mirror(ns_stream s)
{
    static const int64_t per[] = {64 * 100, 63 * 101};
    for (int k = 0; k < 2; k++) {
        dm_err e = {{0}};
        int batch = 3;
        size_t n = (size_t)per[k] * batch;
        double *x = malloc(n * 8), *want = malloc(n * 8), *got = malloc(n * 8);
        void *dx = NULL, *dy = NULL;
        double rel = NAN;
        fill_randn(x, n, 3.0);
        for (int b = 0; b < batch; b++) {
            double ss = 0;
            for (int64_t i = 0; i < per[k]; i++) ss += x[b * per[k] + i] * x[b * per[k] + i];
            for (int64_t i = 0; i < per[k]; i++) want[b * per[k] + i] = x[b * per[k] + i] / (sqrt(ss) + 1e-7);
        }
        if (ns_dev_alloc(&dx, n * 4, &e) || ns_dev_alloc(&dy, n * 2, &e) ||
            ns_upload(dx, DM_DT_FP32, x, (int64_t)n, &e) || ns_fill_poison(dy, DM_DT_BF16, (int64_t)n, s, &e) ||
            ns_normalize(dx, DM_DT_FP32, dy, DM_DT_BF16, per[k], batch, 1e-7f, s, &e) ||
            ns_download(got, dy, DM_DT_BF16, (int64_t)n, &e))
            bail("normalize", &e);
        else
            rel = rel_err(got, want, n);
        ok(rel <= 4e-3, "normalize fp32 -> bf16, %d x %lld elements: rel err %.3g <= 4e-3", batch,
           (long long)per[k], rel);
        ns_dev_free(dx);
        ns_dev_free(dy);
        free(x), free(want), free(got);
    }
    {
        dm_err e = {{0}};
        ns_prod *p = NULL;
        void *x, *sm, *d;
        int64_t m = 200;
        double *h = malloc((size_t)(m * m) * 2 * 8);
        int sym = 0;
        if (ns_prod_create(NS_PROD_SYMM, m, m, 2, DM_DT_FP16, 1, &p, &e) ||
            (ns_prod_buffers(p, &x, &sm, &d), 0) || ns_download(h, sm, DM_DT_FP16, 2 * m * m, &e)) {
            bail("mirror", &e);
        } else {
            sym = 1;
            for (int b = 0; b < 2; b++)
                for (int64_t i = 0; i < m; i++)
                    for (int64_t j = 0; j < m; j++)
                        sym &= h[b * m * m + i + j * m] == h[b * m * m + j + i * m] && isfinite(h[b * m * m + i + j * m]);
        }
        ok(sym, "mirror: 2 x 200x200 fp16 exactly symmetric and finite after mirroring");
        ns_prod_destroy(p);
        free(h);
    }
}

/* Per-GEMM picks: a plan tuned GEMM by GEMM still computes NS within the bound; a plan made
 * from the picked configuration (the same io dtype, so the same structure) keeps the picks and
 * runs the same algorithms (graph and launch-by-launch runs bit-identical); a plan of another
 * structure (fp32 io: no folded normalization) drops them. */
static void test_gemm_picks(ns_stream s)
{
    static const struct { int64_t r, c; int algo, kb; } cases[] = {
        {1024, 1024, DM_NS_DIRECT, 1}, {512, 2048, DM_NS_GRAM, 4}, {2048, 512, DM_NS_GRAM, 1},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        dm_err e = {{0}};
        ns_config cfg;
        ns_config_default(&cfg, (dm_ns_algo)cases[i].algo);
        cfg.sym_blocks = cfg.sym_blocks_mm = cases[i].kb;
        ns_plan *p = NULL;
        if (ns_plan_create(cases[i].r, cases[i].c, 1, cfg.work, &cfg, &p, &e) || ns_plan_tune_gemms(p, s, &e)) {
            bail("tune gemms", &e);
            ns_plan_destroy(p);
            continue;
        }
        ns_plan_config(p, &cfg);
        ns_plan_stats st;
        ns_plan_get_stats(p, &st);
        ns_plan_destroy(p);
        size_t np = strlen(cfg.gemm_picks), n = (size_t)(cases[i].r * cases[i].c);
        int hex = np > 0 && strspn(cfg.gemm_picks, "0123456789abcdef") == np && (int)np <= st.n_gemms;
        double *a = malloc(n * sizeof *a), *b = malloc(n * sizeof *b);
        uint64_t seed = rng_state;
        double ea = check_plan(cases[i].r, cases[i].c, 1, cfg.work, &cfg, 1, s, a);
        rng_state = seed;
        double eb = check_plan(cases[i].r, cases[i].c, 1, cfg.work, &cfg, 0, s, b);
        int same = a && b && memcmp(a, b, n * sizeof *a) == 0;
        ns_config kept, dropped;
        memset(&kept, 0, sizeof kept);
        memset(&dropped, 0, sizeof dropped);
        if (!ns_plan_create(cases[i].r, cases[i].c, 1, cfg.work, &cfg, &p, &e)) ns_plan_config(p, &kept);
        ns_plan_destroy(p);
        p = NULL;
        if (!ns_plan_create(cases[i].r, cases[i].c, 1, DM_DT_FP32, &cfg, &p, &e)) ns_plan_config(p, &dropped);
        ns_plan_destroy(p);
        p = NULL;
        same &= !strcmp(kept.gemm_picks, cfg.gemm_picks) && dropped.gemm_picks[0] == 0;
        double tol = cases[i].r == cases[i].c && cases[i].algo == DM_NS_GRAM ? GRAM_SQ_TOL : NS_TOL;
        ok(hex && ea <= tol && same,
           "GEMM picks %s %lldx%lld k%d: picks '%s' (%d GEMM launches); rel err %.3g <= %g; "
           "graph and launch-by-launch runs of a plan made from the picks bit-identical, picks kept "
           "by a plan of the same structure and dropped by an fp32-io plan: %s",
           dm_ns_algo_name((dm_ns_algo)cases[i].algo), (long long)cases[i].r, (long long)cases[i].c, cases[i].kb,
           cfg.gemm_picks, st.n_gemms, ea, tol, same ? "yes" : "no");
        (void)eb;
        free(a);
        free(b);
    }
}

/* Folded normalization (one matrix, input in the iteration dtype): within the bound against
 * float64, close to the plan with a normalization pass, and unaffected by NaN in the plan's
 * work buffers (the products that read G with device scalars and beta zero must not read C). */
static void test_norm_fold(ns_stream s)
{
    static const struct { int64_t r, c; int algo, kb; } cases[] = {
        {256, 1536, DM_NS_DIRECT, 1}, {1536, 256, DM_NS_GRAM, 1}, {384, 384, DM_NS_DIRECT, 4},
        {512, 1024, DM_NS_GRAM, 4},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        dm_err e = {{0}};
        int64_t r = cases[i].r, c = cases[i].c;
        size_t n = (size_t)(r * c);
        ns_config cf, cu;
        ns_config_default(&cf, (dm_ns_algo)cases[i].algo);
        cf.sym_blocks = cf.sym_blocks_mm = cases[i].kb;
        cu = cf;
        cu.norm_fold = 0;
        double *g = malloc(n * 8), *ref = malloc(n * 8), *a = malloc(n * 8), *b = malloc(n * 8);
        double ea = NAN, eb = NAN, dab = NAN;
        ns_plan *pf = NULL, *pu = NULL;
        ns_opts o;
        ns_opts_default(&o);
        o.coeffs = &cf.coeffs;
        fill_randn(g, n, 0.3);
        if (ns_ref_d(g, ref, r, c, &o, &e) || ns_plan_create(r, c, 1, cf.work, &cf, &pf, &e) ||
            ns_plan_create(r, c, 1, cu.work, &cu, &pu, &e) || ns_plan_poison_work(pf, &e) ||
            ns_upload(ns_plan_input(pf), cf.work, g, (int64_t)n, &e) ||
            ns_upload(ns_plan_input(pu), cu.work, g, (int64_t)n, &e) ||
            ns_fill_poison(ns_plan_output(pf), cf.work, (int64_t)n, s, &e) ||
            ns_plan_run(pf, s, 1, &e) || ns_plan_run(pu, s, 1, &e) || ns_sync(s, &e) ||
            ns_download(a, ns_plan_output(pf), cf.work, (int64_t)n, &e) ||
            ns_download(b, ns_plan_output(pu), cu.work, (int64_t)n, &e)) {
            bail("norm fold", &e);
        } else {
            ea = rel_err(a, ref, n);
            eb = rel_err(b, ref, n);
            dab = rel_err(a, b, n);
        }
        double tol = r == c && cases[i].algo == DM_NS_GRAM ? GRAM_SQ_TOL : NS_TOL;
        ok(ea <= tol && dab <= tol, "folded normalization %s %lldx%lld k%d (work buffers NaN first): rel err %.3g "
           "(with a normalization pass %.3g) <= %g; folded vs pass %.3g",
           dm_ns_algo_name((dm_ns_algo)cases[i].algo), (long long)r, (long long)c, cases[i].kb, ea, eb, tol, dab);
        ns_plan_destroy(pf);
        ns_plan_destroy(pu);
        free(g), free(ref), free(a), free(b);
    }
}

/* A batch's output a (batch entries of per elements) after a NaN in entry bad of its input:
 * *nan_bad 1 when that entry holds a non-finite value, *fin_ok 1 when every other is finite. */
static void entries_finite(const double *a, size_t per, int batch, int bad, int *fin_ok, int *nan_bad)
{
    *fin_ok = 1, *nan_bad = 0;
    for (int k = 0; k < batch; k++) {
        int finite = 1;
        for (size_t i = 0; i < per; i++) finite &= isfinite(a[k * per + i]);
        if (k == bad) *nan_bad = !finite;
        else *fin_ok &= finite;
    }
}

/* Run a plan of batch x rows x cols on input g (host doubles) with its work buffers and output
 * poisoned first; the output to got, the plan's configuration (after any fallback) to used. */
static int run_plan_on(int64_t rows, int64_t cols, int batch, dm_dtype io, const ns_config *cfg, int graph,
                       ns_stream s, const double *g, double *got, ns_config *used, dm_err *e)
{
    ns_plan *p = NULL;
    int64_t n = rows * cols * batch;
    int rc = ns_plan_create(rows, cols, batch, io, cfg, &p, e) || ns_plan_poison_work(p, e) ||
             ns_upload(ns_plan_input(p), io, g, n, e) || ns_fill_poison(ns_plan_output(p), io, n, s, e) ||
             ns_plan_run(p, s, graph, e) || ns_sync(s, e) || ns_download(got, ns_plan_output(p), io, n, e);
    if (!rc && used) ns_plan_config(p, used);
    ns_plan_destroy(p);
    return rc ? -1 : 0;
}

/* Our kernels in whole NS plans: against float64 and against the cuBLASLt plan on the same
 * input, wide and tall, edges that are not whole tiles, batches, io dtypes. */
static void test_own_plans(ns_stream s)
{
    static const struct { int64_t r, c; int batch; dm_dtype io; } shapes[] = {
        {128, 128, 1, DM_DT_BF16}, {64, 256, 1, DM_DT_FP32}, {256, 64, 1, DM_DT_BF16}, {200, 328, 2, DM_DT_BF16},
        {384, 384, 1, DM_DT_FP32}, {96, 1000, 5, DM_DT_BF16}, {1000, 304, 1, DM_DT_FP16}, {256, 1536, 1, DM_DT_BF16},
    };
    static const ns_kernel kernels[] = {NS_KERNEL_SYM64, NS_KERNEL_SYM128, NS_KERNEL_FUSED32, NS_KERNEL_FUSED64,
                                        NS_KERNEL_FUSED128};
    for (size_t i = 0; i < (quick ? 2 : own_only ? 4 : sizeof shapes / sizeof shapes[0]); i++) {
        int64_t r = shapes[i].r, c = shapes[i].c;
        int batch = shapes[i].batch;
        dm_dtype io = shapes[i].io;
        size_t per = (size_t)(r * c), n = per * batch;
        double *g = malloc(n * 8), *ref = malloc(n * 8), *lt = malloc(n * 8), *got = malloc(n * 8);
        fill_randn(g, n, 1.0);
        dm_err e0 = {{0}};
        ns_opts o; /* the default coefficients, as the plans' */
        ns_opts_default(&o);
        int bad = 0;
        for (int b = 0; b < batch && !bad; b++) bad = ns_ref_d(g + b * per, ref + b * per, r, c, &o, &e0) != 0;
        for (int algo = 0; algo < 2; algo++) {
            dm_err e = {{0}};
            ns_config cfg;
            ns_config_default(&cfg, (dm_ns_algo)algo);
            if (bad) e = e0;
            if (bad || (!no_lt && run_plan_on(r, c, batch, io, &cfg, 0, s, g, lt, NULL, &e))) {
                bail("own plans: reference", &e);
                continue;
            }
            double tol = algo == DM_NS_GRAM && r == c ? GRAM_SQ_TOL : NS_TOL;
            for (size_t k = 0; k < sizeof kernels / sizeof kernels[0]; k++) {
                ns_config used;
                cfg.kernel = kernels[k];
                int graph = getenv("DM_TEST_NO_GRAPH") ? 0 : (int)(i + k) % 2;
                if (run_plan_on(r, c, batch, io, &cfg, graph, s, g, got, &used, &e)) {
                    bail("own plans", &e);
                    continue;
                }
                double worst = 0, vs_lt = no_lt ? 0 : rel_err(got, lt, n);
                for (int b = 0; b < batch; b++) {
                    double x = rel_err(got + b * per, ref + b * per, per);
                    if (!(x <= worst)) worst = x;
                }
                ok(used.kernel == kernels[k] && worst <= tol && vs_lt <= 2 * tol,
                   "NS %s %lldx%lld batch %d io %s kernel %s (ran %s, graph %d; work buffers NaN first): rel err %.3g <= %g, "
                   "vs the cuBLASLt plan %.3g <= %g%s",
                   dm_ns_algo_name((dm_ns_algo)algo), (long long)r, (long long)c, batch, dm_dtype_name(io),
                   ns_kernel_name(kernels[k]), ns_kernel_name(used.kernel), graph, worst, tol, vs_lt, 2 * tol,
                   no_lt ? " (not compared: DM_TEST_NO_LT)" : "");
            }
        }
        free(g), free(ref), free(lt), free(got);
    }
}

/* The fused kernel on the batched goal shape (64 x 256x1536) and on single matrices whose
 * m x m products are split along K (1024^2, 512x2048: two split products share a phase),
 * Gram and direct, against the cuBLASLt plan (float64 would take minutes here), twice: the same
 * bits both times; a shape ours cannot take (63 x 101) falls back to cuBLASLt and is right; a
 * NaN in one matrix of a batch fails that matrix only. */
static void test_fused_batch(ns_stream s)
{
    static const struct { int64_t r, c; int batch; } shapes[] = {{256, 1536, 64}, {1024, 1024, 1}, {2048, 512, 1}};
    size_t cap = (size_t)256 * 1536 * 64;
    double *g = malloc(cap * 8), *lt = malloc(cap * 8), *a = malloc(cap * 8), *b = malloc(cap * 8);
    fill_randn(g, cap, 1.0);
    /* quick (racecheck, which sees shared memory only: the same code at any size): the first */
    for (size_t i = 0; i < (quick ? 1 : sizeof shapes / sizeof shapes[0]); i++) {
        int64_t r = shapes[i].r, c = shapes[i].c;
        int batch = own_only && shapes[i].batch > (quick ? 2 : 8) ? (quick ? 2 : 8) : shapes[i].batch;
        size_t n = (size_t)(r * c) * batch;
        for (int algo = 0; algo < (r == c ? 1 : 2); algo++) /* square: direct (Gram is not used there) */
            for (int kk = 0; kk < 3; kk++) {
                dm_err e = {{0}};
                ns_config cfg, used;
                ns_config_default(&cfg, (dm_ns_algo)algo);
                double vs = NAN;
                int same = 0;
                if (no_lt || !run_plan_on(r, c, batch, cfg.work, &cfg, 0, s, g, lt, NULL, &e)) {
                    cfg.kernel = kk == 2 ? NS_KERNEL_FUSED128 : kk ? NS_KERNEL_FUSED64 : NS_KERNEL_FUSED32;
                    if (!run_plan_on(r, c, batch, cfg.work, &cfg, 0, s, g, a, &used, &e) &&
                        !run_plan_on(r, c, batch, cfg.work, &cfg, 1, s, g, b, NULL, &e)) {
                        vs = no_lt ? 0 : rel_err(a, lt, n);
                        same = !memcmp(a, b, n * 8) && used.kernel == cfg.kernel;
                    }
                }
                if (e.msg[0]) bail("fused", &e);
                double tol = 2 * NS_TOL;
                ok(vs <= tol && same, "fused %s %d x %lldx%lld %s: vs the cuBLASLt plan %.3g <= %g%s; two runs bit-identical: %s",
                   dm_ns_algo_name((dm_ns_algo)algo), batch, (long long)r, (long long)c, ns_kernel_name(cfg.kernel), vs, tol,
                   no_lt ? " (not compared)" : "", same ? "yes" : "no");
            }
    }
    if (!no_lt) { /* fallback */
        dm_err e = {{0}};
        int64_t fr = 63, fc = 101;
        size_t fn = (size_t)(fr * fc);
        ns_config cfg, used;
        ns_config_default(&cfg, DM_NS_DIRECT);
        ns_opts o;
        ns_opts_default(&o);
        o.coeffs = &cfg.coeffs;
        cfg.kernel = NS_KERNEL_FUSED32;
        memset(&used, 0, sizeof used);
        double err_ = NAN;
        if (!ns_ref_d(g, lt, fr, fc, &o, &e) && !run_plan_on(fr, fc, 1, DM_DT_FP32, &cfg, 1, s, g, a, &used, &e))
            err_ = rel_err(a, lt, fn);
        ok(used.kernel == NS_KERNEL_LT && err_ <= NS_TOL && !ns_kernel_supported(NS_KERNEL_FUSED32, fr, fc, 1),
           "63x101 asked for fused32: ran %s (not a multiple of 8), rel err %.3g <= %g", ns_kernel_name(used.kernel), err_,
           NS_TOL);
    }
    { /* a NaN in entry 3 of 5 */
        dm_err e = {{0}};
        int64_t br = 96, bc = 256;
        size_t bp = (size_t)(br * bc);
        ns_config cfg;
        ns_config_default(&cfg, DM_NS_GRAM);
        cfg.kernel = NS_KERNEL_FUSED32;
        memcpy(b, g, 5 * bp * 8);
        b[3 * bp + 17] = NAN;
        int fin_ok = 0, nan_bad = 0;
        if (!run_plan_on(br, bc, 5, DM_DT_FP32, &cfg, 0, s, b, a, NULL, &e)) {
            entries_finite(a, bp, 5, 3, &fin_ok, &nan_bad);
        } else {
            bail("fused nan", &e);
        }
        ok(fin_ok && nan_bad, "fused32 gram 5 x 96x256 with a NaN in entry 3: that entry's output is not finite (%d), the others are (%d)",
           nan_bad, fin_ok);
    }
    free(g), free(lt), free(a), free(b);
}

/* The one-CTA-per-matrix kernels (ns_block.cu: "block", and "block16", every product whole in
 * 16 x 16 tiles) in whole direct plans: against float64 and the cuBLASLt plan on the same
 * input, wide and tall, sizes that are not multiples of 8 or 32, the longest side each takes at
 * m = 128, batches, io dtypes, an fp16 iteration dtype; two runs bit-identical; a NaN in one
 * entry of a batch fails that entry only; a Gram plan and a shape too long for the shared memory
 * asked for either run cuBLASLt. */
static void test_block(ns_stream s)
{
    static const ns_kernel kinds[] = {NS_KERNEL_BLOCK, NS_KERNEL_BLOCK16};
    static const struct { int64_t r, c; int batch; dm_dtype io, work; } shapes[] = {
        {128, 128, 1, DM_DT_BF16, DM_DT_BF16}, {64, 256, 1, DM_DT_FP32, DM_DT_BF16}, {256, 64, 1, DM_DT_BF16, DM_DT_BF16},
        {63, 101, 1, DM_DT_FP32, DM_DT_BF16},  {8, 8, 3, DM_DT_BF16, DM_DT_BF16},   {500, 100, 4, DM_DT_BF16, DM_DT_BF16},
        {128, 576, 2, DM_DT_FP16, DM_DT_FP16}, {96, 40, 2, DM_DT_FP32, DM_DT_FP16},
        /* a cluster of CTAs per matrix on sm_90 (cuBLASLt on sm_80: too long for one CTA) */
        {24, 16384, 1, DM_DT_BF16, DM_DT_BF16}, {64, 2048, 3, DM_DT_BF16, DM_DT_BF16}, {2048, 64, 2, DM_DT_FP32, DM_DT_BF16},
        {100, 3001, 1, DM_DT_FP32, DM_DT_BF16}, {128, 896, 2, DM_DT_BF16, DM_DT_BF16}, {5, 9000, 2, DM_DT_FP16, DM_DT_FP16},
        /* the longest sides block16 takes at 64 and 32 rows */
        {64, 800, 2, DM_DT_BF16, DM_DT_BF16}, {1000, 30, 1, DM_DT_FP32, DM_DT_FP16},
    };
    for (size_t i = 0; i < (quick ? 2 : sizeof shapes / sizeof shapes[0]); i++) {
        int64_t r = shapes[i].r, c = shapes[i].c;
        int batch = shapes[i].batch;
        dm_dtype io = shapes[i].io;
        size_t per = (size_t)(r * c), n = per * batch;
        double *g = malloc(n * 8), *ref = malloc(n * 8), *lt = malloc(n * 8), *a = malloc(n * 8), *b = malloc(n * 8);
        fill_randn(g, n, 1.0);
        dm_err e = {{0}};
        ns_opts o;
        ns_opts_default(&o);
        ns_config cfg, used;
        ns_config_default(&cfg, DM_NS_DIRECT);
        cfg.work = shapes[i].work;
        o.coeffs = &cfg.coeffs;
        int bad = 0;
        for (int k = 0; k < batch && !bad; k++) bad = ns_ref_d(g + k * per, ref + k * per, r, c, &o, &e) != 0;
        if (bad || (!no_lt && run_plan_on(r, c, batch, io, &cfg, 0, s, g, lt, NULL, &e))) {
            bail("block: reference", &e);
        } else for (size_t kk = 0; kk < 2; kk++) {
            const ns_kernel kind = kinds[kk];
            cfg.kernel = kind;
            memset(&used, 0, sizeof used);
            if (run_plan_on(r, c, batch, io, &cfg, 1, s, g, a, &used, &e) || run_plan_on(r, c, batch, io, &cfg, 0, s, g, b, NULL, &e)) {
                bail("block", &e);
            } else {
                /* against float64: NS_TOL, or 1.5 x the cuBLASLt plan's own error where the iteration
                 * dtype's rounding is larger than that (8 x 8: 0.036 for both) */
                double worst = 0, lt_worst = 0, vs_lt = no_lt ? 0 : rel_err(a, lt, n);
                for (int k = 0; k < batch; k++) {
                    double x = rel_err(a + k * per, ref + k * per, per), y = no_lt ? 0 : rel_err(lt + k * per, ref + k * per, per);
                    if (!(x <= worst)) worst = x;
                    if (!(y <= lt_worst)) lt_worst = y;
                }
                double tol = fmax(NS_TOL, 1.5 * lt_worst);
                ns_kernel want = ns_kernel_supported(kind, r, c, batch) ? kind : NS_KERNEL_LT;
                ok(used.kernel == want && worst <= tol && vs_lt <= 2 * NS_TOL && !memcmp(a, b, n * 8),
                   "%s direct %lldx%lld batch %d io %s work %s (ran %s, %lld B shared): rel err %.3g <= %.3g (the cuBLASLt plan's %.3g), "
                   "vs the cuBLASLt plan %.3g <= %g; two runs bit-identical: %s",
                   ns_kernel_name(kind), (long long)r, (long long)c, batch, dm_dtype_name(io), dm_dtype_name(cfg.work),
                   ns_kernel_name(used.kernel), (long long)nsm_block_smem(r, c, batch, kind == NS_KERNEL_BLOCK16), worst, tol,
                   lt_worst, vs_lt, 2 * NS_TOL, !memcmp(a, b, n * 8) ? "yes" : "no");
            }
        }
        free(g), free(ref), free(lt), free(a), free(b);
    }
    if (quick) return;
    { /* a NaN in entry 2 of 4 */
        dm_err e = {{0}};
        int64_t br = 100, bc = 120;
        size_t bp = (size_t)(br * bc);
        double *g = malloc(4 * bp * 8), *a = malloc(4 * bp * 8);
        fill_randn(g, 4 * bp, 1.0);
        g[2 * bp + 77] = NAN;
        ns_config cfg;
        ns_config_default(&cfg, DM_NS_DIRECT);
        for (size_t kk = 0; kk < 2; kk++) {
            cfg.kernel = kinds[kk];
            int fin_ok = 0, nan_bad = 0;
            if (!run_plan_on(br, bc, 4, DM_DT_BF16, &cfg, 0, s, g, a, NULL, &e)) {
                entries_finite(a, bp, 4, 2, &fin_ok, &nan_bad);
            } else {
                bail("block nan", &e);
            }
            ok(fin_ok && nan_bad, "%s 4 x 100x120 with a NaN in entry 2: that entry's output is not finite (%d), the others are (%d)",
               ns_kernel_name(kinds[kk]), nan_bad, fin_ok);
        }
        free(g), free(a);
    }
    { /* what it does not take runs cuBLASLt */
        static const struct { int64_t r, c; dm_ns_algo algo; ns_kernel k; } no[] = {
            {128, 256, DM_NS_GRAM, NS_KERNEL_BLOCK}, {128, 65536, DM_NS_DIRECT, NS_KERNEL_BLOCK}, {129, 129, DM_NS_DIRECT, NS_KERNEL_BLOCK},
            {128, 256, DM_NS_GRAM, NS_KERNEL_BLOCK16}, {128, 8192, DM_NS_DIRECT, NS_KERNEL_BLOCK16}, {129, 129, DM_NS_DIRECT, NS_KERNEL_BLOCK16}};
        for (size_t i = 0; i < sizeof no / sizeof no[0]; i++) {
            dm_err e = {{0}};
            ns_config cfg, used;
            ns_config_default(&cfg, no[i].algo);
            cfg.kernel = no[i].k;
            ns_plan *p = NULL;
            memset(&used, 0, sizeof used);
            int rc = ns_plan_create(no[i].r, no[i].c, 1, cfg.work, &cfg, &p, &e);
            if (!rc) ns_plan_config(p, &used);
            ns_plan_destroy(p);
            ok(!rc && used.kernel == NS_KERNEL_LT, "%s asked for %s %lldx%lld: the plan runs %s%s%s", ns_kernel_name(no[i].k), dm_ns_algo_name(no[i].algo),
               (long long)no[i].r, (long long)no[i].c, ns_kernel_name(used.kernel), rc ? ": " : "", rc ? e.msg : "");
        }
    }
}

/* Our product engine on operands that are NOT symmetric (nsm_op_mm, one launch per product):
 * D = alpha S1 S2 + beta C + gamma I with S2 read by rows, for every tile shape, bf16 and fp16,
 * edges that are not whole tiles, a batch, split-K pieces; sym = 0 against the float64 product
 * on the operands the GPU used, sym = 1 against its lower tiles mirrored (a tile on the
 * diagonal whole). Run 9's products read S2 transposed ("S2 is symmetric"): exact for the
 * symmetric operands the other product tests use, and wrong for the Gram NS's R Z and Q, which
 * are symmetric only in exact arithmetic (its whole-NS tests missed by 0.03-0.34); this check
 * fails on that engine by O(1). */
static void test_own_mm(void)
{
    static const struct { int m, batch, splits; } shapes[] = {{136, 1, 1}, {200, 2, 3}};
    static const nsm_tile tiles[] = {NSM_T32, NSM_T64, NSM_T128, NSM_T128S3};
    static const dm_dtype dts[] = {DM_DT_FP16, DM_DT_BF16};
    const float alpha = 1.7f, beta = -0.6f, gamma = 0.3f;
    for (size_t i = 0; i < (own_only ? 1 : sizeof shapes / sizeof shapes[0]); i++)
        for (size_t di = 0; di < 2; di++) {
            int m = shapes[i].m, batch = shapes[i].batch;
            dm_dtype dt = dts[di];
            size_t per = (size_t)m * m, n = per * batch;
            double *h1 = malloc(n * 8), *h2 = malloc(n * 8), *hc = malloc(n * 8), *hd = malloc(n * 8),
                   *w = malloc(n * 8), *zero = calloc(n, 8);
            void *s1 = NULL, *s2 = NULL, *c = NULL, *d = NULL, *ws = NULL, *cnt = NULL;
            dm_err e = {{0}};
            fill_randn(h1, n, 1.0 / sqrt((double)m));
            fill_randn(h2, n, 1.0 / sqrt((double)m));
            fill_randn(hc, n, 1.0);
            size_t wsb = (size_t)batch * shapes[i].splits * (m + 128) * (m + 128) * 4; /* split-K pieces, any tile */
            if (ns_dev_alloc(&s1, n * 2, &e) || ns_dev_alloc(&s2, n * 2, &e) || ns_dev_alloc(&c, n * 2, &e) ||
                ns_dev_alloc(&d, n * 2, &e) || ns_dev_alloc(&ws, wsb, &e) || ns_dev_alloc(&cnt, n * 4, &e) ||
                ns_upload(s1, dt, h1, (int64_t)n, &e) || ns_upload(s2, dt, h2, (int64_t)n, &e) ||
                ns_upload(c, dt, hc, (int64_t)n, &e) || ns_upload(cnt, DM_DT_FP32, zero, (int64_t)n, &e) ||
                ns_download(h1, s1, dt, (int64_t)n, &e) || ns_download(h2, s2, dt, (int64_t)n, &e) ||
                ns_download(hc, c, dt, (int64_t)n, &e)) { /* the rounded operands, as the GPU has them */
                bail("own mm: buffers", &e);
                goto next;
            }
            for (int b = 0; b < batch; b++) /* W = alpha S1 S2 + beta C + gamma I, row-major */
                for (int r = 0; r < m; r++)
                    for (int q = 0; q < m; q++) {
                        double acc = 0;
                        for (int k = 0; k < m; k++) acc += h1[b * per + (size_t)r * m + k] * h2[b * per + (size_t)k * m + q];
                        w[b * per + (size_t)r * m + q] = alpha * acc + beta * hc[b * per + (size_t)r * m + q] + (r == q ? gamma : 0);
                    }
            for (size_t ti = 0; ti < sizeof tiles / sizeof tiles[0]; ti++)
                for (int sym = 0; sym < 2; sym++) {
                    nsm_geom g = {m, m, 1, batch, dt};
                    nsm_op op;
                    nsm_op_mm(&op, &g, s1, s2, alpha, beta, c, gamma, d, sym);
                    op.splits = shapes[i].splits;
                    nsm_op_finish(&op, tiles[ti]);
                    if (op.splits > 1) {
                        op.ws = ws;
                        op.cnt = cnt;
                    }
                    int edge = nsm_tile_edge(tiles[ti]);
                    double rel = NAN;
                    if (ns_fill_poison(d, dt, (int64_t)n, NULL, &e) || nsm_gemm_setup(tiles[ti], dt, &e) ||
                        nsm_gemm(&op, tiles[ti], NULL, &e) || ns_sync(NULL, &e) || ns_download(hd, d, dt, (int64_t)n, &e)) {
                        bail("own mm: run", &e);
                    } else {
                        double *want = malloc(n * 8);
                        for (int b = 0; b < batch; b++)
                            for (int r = 0; r < m; r++)
                                for (int q = 0; q < m; q++) {
                                    int lower = !sym || r / edge >= q / edge;
                                    want[b * per + (size_t)r * m + q] =
                                        lower ? w[b * per + (size_t)r * m + q] : w[b * per + (size_t)q * m + r];
                                }
                        rel = rel_err(hd, want, n);
                        free(want);
                    }
                    ok(rel <= PROD_TOL, "mm D = a S1 S2 + b C + g I, S1 S2 C not symmetric, %s %dx%d batch %d tile %d splits %d%s: "
                       "rel err vs float64 %.3g <= %g", dm_dtype_name(dt), m, m, batch, edge, op.splits,
                       sym ? " sym (lower tiles mirrored)" : "", rel, PROD_TOL);
                }
        next:
            ns_dev_free(s1), ns_dev_free(s2), ns_dev_free(c), ns_dev_free(d), ns_dev_free(ws), ns_dev_free(cnt);
            free(h1), free(h2), free(hc), free(hd), free(w), free(zero);
        }
}

/* Our symmetric kernels alone (X X^T and S S, batches, edges that are not whole tiles):
 * against float64 on the operands the GPU used, against the full cuBLAS product, exactly
 * symmetric and finite (the output poisoned first). */
static void test_own_products(void)
{
    static const struct { int64_t m, n; int batch; } shapes[] = {{200, 328, 3}, {136, 136, 1}, {448, 1280, 2}};
    static const ns_kernel kernels[] = {NS_KERNEL_SYM64, NS_KERNEL_SYM128, NS_KERNEL_SYM128S3};
    for (size_t i = 0; i < (quick ? 1 : own_only ? 2 : sizeof shapes / sizeof shapes[0]); i++)
        for (int kind = NS_PROD_SYRK; kind <= NS_PROD_SYMM; kind++)
            for (size_t k = 0; k < sizeof kernels / sizeof kernels[0]; k++) {
                dm_err e = {{0}};
                ns_prod *p = NULL;
                void *x, *sm, *d;
                int64_t m = shapes[i].m, nn = kind == NS_PROD_SYMM ? m : shapes[i].n;
                int batch = shapes[i].batch;
                size_t nx = (size_t)(m * nn) * batch, ns = (size_t)(m * m) * batch;
                double *hx = malloc(nx * 8), *hs = malloc(ns * 8), *hd = malloc(ns * 8), *want = malloc(ns * 8);
                double rel = NAN, vs = NAN;
                int sym = 0;
                if (ns_prod_create_kernel((ns_prod_kind)kind, m, nn, batch, kind == NS_PROD_SYRK ? DM_DT_BF16 : DM_DT_FP16, 1,
                                          kernels[k], &p, &e) ||
                    (ns_prod_buffers(p, &x, &sm, &d), 0)) {
                    bail("own product", &e);
                } else {
                    dm_dtype dt = kind == NS_PROD_SYRK ? DM_DT_BF16 : DM_DT_FP16;
                    if (ns_fill_poison(d, dt, (int64_t)ns, NULL, &e) || ns_prod_run(p, NULL, &e) || ns_sync(NULL, &e) ||
                        ns_download(hx, x, dt, (int64_t)nx, &e) || ns_download(hs, sm, dt, (int64_t)ns, &e) ||
                        ns_download(hd, d, dt, (int64_t)ns, &e) || (no_lt ? (vs = 0, 0) : ns_prod_check(p, &vs, &e))) {
                        bail("own product run", &e);
                    } else {
                        sym = 1;
                        for (int b = 0; b < batch; b++) {
                            const double *X = hx + (size_t)b * m * nn, *S = hs + (size_t)b * m * m;
                            double *W = want + (size_t)b * m * m;
                            const double *D = hd + (size_t)b * m * m;
                            for (int64_t r = 0; r < m; r++)
                                for (int64_t c = 0; c < m; c++) {
                                    double acc = 0;
                                    if (kind == NS_PROD_SYRK)
                                        for (int64_t q = 0; q < nn; q++) acc += X[r * nn + q] * X[c * nn + q];
                                    else
                                        for (int64_t q = 0; q < m; q++) acc += S[r + q * m] * S[q + c * m];
                                    W[r + c * m] = acc;
                                    sym &= D[r + c * m] == D[c + r * m];
                                }
                        }
                        rel = rel_err(hd, want, ns);
                    }
                }
                ok(rel <= PROD_TOL && vs <= BLOCK_TOL && sym,
                   "%s %lldx%lld batch %d kernel %s: rel err vs float64 %.3g <= %g, vs full cuBLAS %.3g <= %g, exactly symmetric %d",
                   kind == NS_PROD_SYRK ? "syrk X X^T bf16" : "symm S S fp16", (long long)m, (long long)nn, batch,
                   ns_kernel_name(kernels[k]), rel, PROD_TOL, vs, BLOCK_TOL, sym);
                ns_prod_destroy(p);
                free(hx), free(hs), free(hd), free(want);
            }
}

/* The cache file: picks survive a save and a reopen; a 17-field line (before picks) reads as
 * no picks; a bad picks field is an error naming file:line:col. No GPU needed. */
static void test_cache_format(void)
{
    dm_err e = {{0}};
    char path[] = "/tmp/dm_at_testXXXXXX";
    int fd = mkstemp(path);
    if (fd < 0) {
        ok(0, "mkstemp");
        return;
    }
    close(fd);
    unlink(path);
    ns_device_info dev;
    memset(&dev, 0, sizeof dev);
    snprintf(dev.name, sizeof dev.name, "Test GPU");
    dev.cuda_runtime = 13000;
    dev.cublaslt_version = 130100;
    at_cache *c = NULL;
    at_key k = {1024, 3072, 2, DM_NS_GRAM, DM_DT_FP16};
    at_result r;
    memset(&r, 0, sizeof r);
    r.sym_blocks = 4;
    r.sym_blocks_mm = 8;
    r.sym_flat = 1;
    r.heuristic = 1;
    snprintf(r.gemm_picks, sizeof r.gemm_picks, "%s", "03a1");
    r.kernel = NS_KERNEL_SYM128S3;
    r.median_us = 100;
    ns_config cfg;
    int got = 0;
    if (!at_cache_open(path, &dev, &c, &e) && !at_cache_store(c, &k, &r, &e) && !at_cache_save(c, &e)) {
        at_cache_close(c);
        c = NULL;
        if (!at_cache_open(path, &dev, &c, &e)) got = at_config_for(c, 3072, 1024, 2, DM_NS_GRAM, &cfg);
    }
    at_cache_close(c);
    c = NULL;
    ok(got == 1 && cfg.sym_blocks == 4 && cfg.sym_blocks_mm == 8 && cfg.heuristic == 1 &&
           !strcmp(cfg.gemm_picks, "03a1") && cfg.kernel == NS_KERNEL_SYM128S3 && cfg.sym_flat == 1,
       "autotune cache: per-GEMM picks '%s', kernel %s and the flat scheme read back after save and reopen (%s)", got ? cfg.gemm_picks : "-",
       got ? ns_kernel_name(cfg.kernel) : "-", e.msg[0] ? e.msg : "ok");
    at_cache_close(c);
    c = NULL;
    { /* batch 5 was never tuned: batch 2's block counts, without its picks; batch 1 not borrowed */
        ns_config c5, c1;
        int g5 = -1, g1 = -1;
        if (!at_cache_open(path, &dev, &c, &e)) {
            g5 = at_config_for(c, 1024, 3072, 5, DM_NS_GRAM, &c5);
            g1 = at_config_for(c, 1024, 3072, 1, DM_NS_GRAM, &c1);
        }
        at_cache_close(c);
        c = NULL;
        ok(g5 == 2 && c5.sym_blocks == 4 && c5.sym_blocks_mm == 8 && c5.gemm_picks[0] == 0 && g1 == 0 &&
               c1.sym_blocks == 1,
           "autotune cache: an untuned batch borrows a smaller tuned batch's block counts (%d), batch 1 does not (%d)",
           g5, g1);
    }
    { /* a shape never tuned: the nearest tuned shape's block counts (cuBLASLt entries only) */
        FILE *nf = fopen(path, "w");
        if (nf) {
            fputs("Test GPU\t13000\t130100\t1024\t4096\t8\tgram\tfp16\t4\t2\t1\t60\t59\t61\t0\t1e9\t1e9\t01\tlt\tflat\n"
                  "Test GPU\t13000\t130100\t4096\t14336\t1\tgram\tfp16\t16\t8\t1\t60\t59\t61\t0\t1e9\t1e9\t-\tlt\tlevels\n"
                  "Test GPU\t13000\t130100\t4096\t12800\t1\tgram\tfp16\t2\t2\t0\t60\t59\t61\t0\t1e9\t1e9\t-\tsym128\tlevels\n",
                  nf);
            fclose(nf);
        }
        ns_config a, b, d, w, b14;
        int ga = -1, gb = -1, gd = -1, gw = -1, g14 = -1;
        if (!at_cache_open(path, &dev, &c, &e)) {
            ga = at_config_for(c, 12288, 4096, 18, DM_NS_GRAM, &a); /* near 4096x14336 (not the sym128 entry) */
            gb = at_config_for(c, 1024, 3072, 1, DM_NS_GRAM, &b);   /* near 1024x4096 */
            gd = at_config_for(c, 1024, 4096, 1, DM_NS_GRAM, &d);   /* the shape tuned at batch 8 only */
            gw = at_config_for(c, 4096, 12288, 2, DM_NS_DIRECT, &w); /* nothing direct tuned */
            g14 = at_config_for(c, 4096, 14336, 16, DM_NS_GRAM, &b14); /* its own batch 1 */
        }
        at_cache_close(c);
        c = NULL;
        ok(ga == 3 && a.sym_blocks == 16 && a.sym_blocks_mm == 8 && !a.sym_flat && a.kernel == NS_KERNEL_LT &&
               gb == 3 && b.sym_blocks == 4 && b.sym_blocks_mm == 2 && b.sym_flat && b.heuristic == 0 &&
               b.gemm_picks[0] == 0 && gd == 0 && d.sym_blocks == 1 && gw == 0 && w.sym_blocks == 1 && g14 == 3 &&
               b14.sym_blocks == 16 && b14.heuristic == 0,
           "autotune cache: an untuned shape borrows the nearest tuned shape's block counts (%d %d/%d, %d %d/%d), a "
           "batch its shape's batch 1 (%d %d); batch 1 of a shape tuned at other batches and an untuned algorithm do "
           "not (%d, %d)",
           ga, a.sym_blocks, a.sym_blocks_mm, gb, b.sym_blocks, b.sym_blocks_mm, g14, b14.sym_blocks, gd, gw);
    }
    { /* a GPU with no entry of its own: what the rules give the GPU with the most entries, without
         its heuristic index and picks (block counts, scheme, kernel); its own entry of an algorithm
         ends the borrowing for that algorithm */
        FILE *nf = fopen(path, "w");
        if (nf) {
            fputs("Test GPU\t13000\t130100\t1024\t4096\t8\tgram\tfp16\t4\t2\t1\t60\t59\t61\t0\t1e9\t1e9\t01\tsym128\tflat\n"
                  "Test GPU\t13000\t130100\t4096\t14336\t1\tgram\tfp16\t16\t8\t1\t60\t59\t61\t0\t1e9\t1e9\t-\tlt\tlevels\n"
                  "Lone GPU\t13000\t130100\t512\t512\t1\tgram\tfp16\t2\t2\t0\t60\t59\t61\t0\t1e9\t1e9\t-\tlt\tlevels\n"
                  "Other GPU\t12000\t120000\t2048\t2048\t1\tdirect\tbf16\t2\t2\t1\t60\t59\t61\t0\t1e9\t1e9\t-\tlt\tlevels\n",
                  nf);
            fclose(nf);
        }
        ns_device_info od = dev;
        snprintf(od.name, sizeof od.name, "Other GPU");
        od.cuda_runtime = 12000;
        od.cublaslt_version = 120000;
        ns_config x, n, y, z;
        int gx = -1, gn = -1, gy = -1, gz = -1;
        if (!at_cache_open(path, &od, &c, &e)) {
            gx = at_config_for(c, 4096, 1024, 8, DM_NS_GRAM, &x);    /* Test GPU's own key */
            gn = at_config_for(c, 12288, 4096, 18, DM_NS_GRAM, &n);  /* Test GPU's nearest shape */
            gy = at_config_for(c, 1024, 4096, 1, DM_NS_GRAM, &y);    /* Test GPU's rules give defaults */
            gz = at_config_for(c, 2048, 2048, 1, DM_NS_DIRECT, &z);  /* its own direct entry */
        }
        at_cache_close(c);
        c = NULL;
        ok(gx == 4 && x.sym_blocks == 4 && x.sym_blocks_mm == 2 && x.sym_flat && x.kernel == NS_KERNEL_SYM128 &&
               x.heuristic == 0 && x.gemm_picks[0] == 0 && gn == 4 && n.sym_blocks == 16 && n.sym_blocks_mm == 8 &&
               gy == 0 && y.sym_blocks == 1 && gz == 1 && z.sym_blocks == 2 && z.heuristic == 1,
           "autotune cache: a GPU with no entry of an algorithm takes the configuration the most-tuned GPU's rules "
           "give (%d: %d/%d %s, heuristic %d; %d: %d/%d), not its defaults (%d), and its own entries where it "
           "has them (%d)",
           gx, x.sym_blocks, x.sym_blocks_mm, ns_kernel_name(x.kernel), x.heuristic, gn, n.sym_blocks,
           n.sym_blocks_mm, gy, gz);
    }
    static const char *old_line = "Test GPU\t13000\t130100\t256\t1536\t1\tdirect\tbf16\t1\t1\t0\t60\t59\t61\t0\t1e9\t1e9\n";
    FILE *f = fopen(path, "w");
    if (f) fputs(old_line, f), fclose(f);
    got = !at_cache_open(path, &dev, &c, &e) ? at_config_for(c, 256, 1536, 1, DM_NS_DIRECT, &cfg) : -1;
    at_cache_close(c);
    c = NULL;
    ok(got == 1 && cfg.gemm_picks[0] == 0 && cfg.kernel == NS_KERNEL_LT,
       "autotune cache: a 17-field line (no picks field) reads as no picks, kernel lt");
    f = fopen(path, "w");
    if (f) fputs("Test GPU\t13000\t130100\t256\t1536\t1\tdirect\tbf16\t1\t1\t0\t60\t59\t61\t0\t1e9\t1e9\t0a\n", f), fclose(f);
    got = !at_cache_open(path, &dev, &c, &e) ? at_config_for(c, 256, 1536, 1, DM_NS_DIRECT, &cfg) : -1;
    at_cache_close(c);
    c = NULL;
    ok(got == 1 && !strcmp(cfg.gemm_picks, "0a") && cfg.kernel == NS_KERNEL_LT,
       "autotune cache: an 18-field line (before the kernel field) reads as kernel lt, picks kept");
    f = fopen(path, "w");
    if (f) fputs("Test GPU\t13000\t130100\t256\t1536\t1\tdirect\tbf16\t1\t1\t0\t60\t59\t61\t0\t1e9\t1e9\t-\tfused9\n", f), fclose(f);
    memset(&e, 0, sizeof e);
    int rk = at_cache_open(path, &dev, &c, &e);
    at_cache_close(c);
    c = NULL;
    ok(rk < 0 && strstr(e.msg, ":1:") && strstr(e.msg, "'fused9'"), "autotune cache: an unknown kernel name is refused: %s", e.msg);
    f = fopen(path, "w");
    if (f) fputs("Test GPU\t13000\t130100\t256\t1536\t1\tdirect\tbf16\t4\t4\t0\t60\t59\t61\t0\t1e9\t1e9\t-\tlt\n", f), fclose(f);
    got = !at_cache_open(path, &dev, &c, &e) ? at_config_for(c, 256, 1536, 1, DM_NS_DIRECT, &cfg) : -1;
    at_cache_close(c);
    c = NULL;
    ok(got == 1 && cfg.sym_blocks == 4 && cfg.sym_flat == 0,
       "autotune cache: a 19-field line (before the scheme field) reads as the recursive levels");
    f = fopen(path, "w");
    if (f) fputs("Test GPU\t13000\t130100\t256\t1536\t1\tdirect\tbf16\t4\t4\t0\t60\t59\t61\t0\t1e9\t1e9\t-\tlt\tdiag\n", f), fclose(f);
    memset(&e, 0, sizeof e);
    rk = at_cache_open(path, &dev, &c, &e);
    at_cache_close(c);
    c = NULL;
    ok(rk < 0 && strstr(e.msg, ":1:") && strstr(e.msg, "'diag'"), "autotune cache: an unknown scheme is refused: %s", e.msg);
    f = fopen(path, "w");
    if (f) fprintf(f, "# comment\nTest GPU\t13000\t130100\t256\t1536\t1\tdirect\tbf16\t1\t1\t0\t60\t59\t61\t0\t1e9\t1e9\tzz\n"), fclose(f);
    memset(&e, 0, sizeof e);
    int rc = at_cache_open(path, &dev, &c, &e);
    at_cache_close(c);
    char want[64];
    snprintf(want, sizeof want, "%s:2:", path);
    ok(rc < 0 && strstr(e.msg, want) && strstr(e.msg, "'zz'"), "autotune cache: a bad picks field is refused: %s", e.msg);
    unlink(path);
}

int main(void)
{
    dm_err e = {{0}};
    ns_device_info info;
    ns_stream s = NULL;
    test_cache_format();
    if (ns_device_query(&info, &e)) {
        tap_diag("no usable CUDA device: the GPU tests are skipped");
        return tap_done();
    }
    rng_state = ((uint64_t)time(NULL) << 20) ^ (uint64_t)getpid() ^ 0x9e3779b97f4a7c15ull;
    if (getenv("DM_TEST_SEED")) rng_state = strtoull(getenv("DM_TEST_SEED"), NULL, 0);
    tap_diag("device %s (sm_%d%d, %d SMs), seed 0x%llx", info.name, info.sm_major, info.sm_minor,
             info.n_sms, (unsigned long long)rng_state);
    if (ns_stream_create(&s, &e)) {
        ok(0, "stream: %s", e.msg);
        return tap_done();
    }
    own_only = getenv("DM_TEST_OWN") != NULL;
    no_lt = own_only && getenv("DM_TEST_NO_LT") != NULL;
    quick = own_only && getenv("DM_TEST_QUICK") != NULL;
    if (getenv("DM_TEST_ONLY") && !strcmp(getenv("DM_TEST_ONLY"), "block")) { /* the block kernel alone */
        test_block(s);
        ns_stream_destroy(s);
        return tap_done();
    }
    if (own_only) { /* compute-sanitizer on our kernels */
        test_own_mm();
        test_own_products();
        test_own_plans(s);
        test_fused_batch(s);
        test_block(s);
        ns_stream_destroy(s);
        return tap_done();
    }
    test_normalize_mirror(s);
    test_adamw(s);
    test_out_of_place(s);
    if (!getenv("DM_TEST_ELEMENTWISE_ONLY")) { /* racecheck runs the elementwise kernels alone */
        test_ns_plans(s);
        test_gram_vs_direct(s);
        test_graph_replay(s);
        test_nan_fails(s);
        test_products();
        test_updates(s);
        test_gemm_picks(s);
        test_norm_fold(s);
        test_own_mm();
        test_own_products();
        test_own_plans(s);
        test_fused_batch(s);
        test_block(s);
    }
    ns_stream_destroy(s);
    return tap_done();
}
#endif
