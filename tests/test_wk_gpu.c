/* test_wk_gpu.c: the step's work kernels on the GPU (kernels/wk_cuda.h's wk_run, what the executor
 * and `dmuon bench work` run) against the CPU reference of wk_ref.h on the same bf16 inputs:
 * products of every pass (a gemm of count 2 over one shared X, a strided batch of experts),
 * the six attention products with grouped-query pointer arrays and strided, the loss with its
 * targets hashed on the fly, vector and table (a period the positions do not divide), their
 * two-pass reductions (several groups; two runs bit-identical), the embedding gather and
 * zero-and-scatter-add (and its accumulating form), the dispatch and combine, the attention
 * softmax and its backward (two runs bit-identical), the layer passes (activations over a fused
 * and a split gate/up, rotary embedding and back, residual add); rows of 8k and
 * not (both access widths). Then the 1-D backward's bandwidth at 4096 and 16384 tokens x 4096
 * against the GPU's datasheet HBM rate: at least half (issue 13). Tolerance: relative
 * Frobenius error 1e-2 (bf16 results of fp32 sums: ~4e-3); losses 1e-3. Skips without a GPU. */
#include "config.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tap.h"

#ifndef DM_HAVE_CUDA
int main(void) { return tap_skip_all("built without CUDA"); }
#else
#include "cluster.h"
#include "ns_bench.h"
#include "ns_cuda.h"
#include "wk_cuda.h"
#include "wk_ref.h"

#define TOL 1e-2

static ns_stream S;
static wk_blas H;
static dm_err E;
static uint64_t rs = 12345;

static float bf16_round(float x)
{
    uint32_t u;
    memcpy(&u, &x, 4);
    u = (u + 0x7fff + ((u >> 16) & 1)) & 0xffff0000u;
    memcpy(&x, &u, 4);
    return x;
}

static float urand(void)
{
    rs = rs * 6364136223846793005ull + 1442695040888963407ull;
    return (float)((double)(rs >> 40) / 8388608.0 - 1.0);
}

/* n random bf16 values (host floats rounded) and their device copy */
static float *host_rand(int64_t n, float scale)
{
    float *h = malloc((size_t)(n ? n : 1) * sizeof *h);
    for (int64_t i = 0; i < n; i++) h[i] = bf16_round(scale * urand());
    return h;
}

static void *dev_of(const float *h, int64_t n)
{
    double *d = malloc((size_t)(n ? n : 1) * sizeof *d);
    void *p = NULL;
    for (int64_t i = 0; i < n; i++) d[i] = h[i];
    if (ns_dev_alloc(&p, (size_t)(n ? n : 1) * 2, &E) || ns_upload(p, DM_DT_BF16, d, n, &E)) p = NULL;
    free(d);
    return p;
}

static void *dev_zero(int64_t n)
{
    float *z = calloc((size_t)(n ? n : 1), sizeof *z);
    void *p = dev_of(z, n);
    free(z);
    return p;
}

static int32_t *dev_ints(const int32_t *h, int64_t n)
{
    void *p = NULL;
    if (ns_dev_alloc(&p, (size_t)(n ? n : 1) * 4, &E) || ns_copy_h2d(p, h, (size_t)n * 4, &E)) return NULL;
    return p;
}

/* relative Frobenius error of device bf16 buffer d (n) against host ref; NaN on a download error */
static double rel_err(const void *d, const float *ref, int64_t n)
{
    double *h = malloc((size_t)(n ? n : 1) * sizeof *h), num = 0, den = 0;
    if (ns_download(h, d, DM_DT_BF16, n, &E)) {
        free(h);
        return NAN;
    }
    for (int64_t i = 0; i < n; i++) {
        double x = h[i] - ref[i];
        num += x * x;
        den += (double)ref[i] * ref[i];
        if (!isfinite(h[i])) num = NAN;
    }
    free(h);
    return den > 0 ? sqrt(num / den) : sqrt(num);
}

static int same_bits(const void *a, const void *b, int64_t n)
{
    uint16_t *x = malloc((size_t)n * 2), *y = malloc((size_t)n * 2);
    int same = ns_copy_d2h(x, a, (size_t)n * 2, &E) == 0 && ns_copy_d2h(y, b, (size_t)n * 2, &E) == 0 &&
               memcmp(x, y, (size_t)n * 2) == 0;
    free(x), free(y);
    return same;
}

static float dev_float(const float *d)
{
    float v = NAN;
    ns_copy_d2h(&v, d, 4, &E);
    return v;
}

static int run(const dm_kernel *k, const wk_args *a)
{
    if (wk_run(H, k, a, S, &E)) {
        tap_diag("wk_run %s %s: %s", dm_kern_kind_name(k->kind), dm_kern_op_name(k->op), E.msg);
        return -1;
    }
    return 0;
}

static dm_kernel kern(dm_kern_kind kind, dm_kern_op op, int64_t m, int64_t n, int64_t k, int64_t batch, int64_t count)
{
    dm_kernel x;
    memset(&x, 0, sizeof x);
    x.kind = kind, x.op = op, x.m = m, x.n = n, x.k = k, x.batch = batch, x.count = count, x.param = 0, x.slot = -1;
    return x;
}

/* ---- products ----------------------------------------------------------------------------- */

static void check_products(void)
{
    static const dm_kern_op ops[] = {DM_KOP_FWD, DM_KOP_DGRAD, DM_KOP_WGRAD};
    const int64_t m = 48, n = 40, k = 24;
    for (int o = 0; o < 3; o++) {
        /* a gemm of count 2: A shared (the slot's X) for fwd and wgrad's B, per matrix otherwise */
        int shareA = ops[o] == DM_KOP_FWD, shareB = ops[o] == DM_KOP_WGRAD;
        float *A = host_rand(2 * m * k, 1), *B = host_rand(2 * n * k, 1), *C = malloc(2 * m * n * sizeof *C);
        void *dA = dev_of(A, 2 * m * k), *dB = dev_of(B, 2 * n * k), *dC = dev_zero(2 * m * n);
        dm_kernel g = kern(DM_KERN_GEMM, ops[o], m, n, k, 1, 2);
        wk_args a;
        memset(&a, 0, sizeof a);
        a.a = dA, a.b = dB, a.c = dC, a.sa = shareA ? 0 : m * k, a.sb = shareB ? 0 : n * k, a.sc = m * n, a.alpha = 0.5f;
        for (int i = 0; i < 2; i++)
            wk_ref_gemm((wk_form)wk_form_of(ops[o]), m, n, k, 0.5f, A + (shareA ? 0 : i * m * k),
                        B + (shareB ? 0 : i * n * k), C + i * m * n);
        double e = run(&g, &a) ? NAN : rel_err(dC, C, 2 * m * n);
        ok(e <= TOL, "gemm %s %lldx%lldx%lld count 2 (shared operand): rel err %.2e", dm_kern_op_name(ops[o]),
           (long long)m, (long long)n, (long long)k, e);
        /* experts: one strided batch of 2 */
        dm_kernel b = kern(DM_KERN_BGEMM, ops[o], m, n, k, 2, 1);
        a.sa = m * k, a.sb = n * k, a.sc = m * n;
        for (int i = 0; i < 2; i++)
            wk_ref_gemm((wk_form)wk_form_of(ops[o]), m, n, k, 0.5f, A + i * m * k, B + i * n * k, C + i * m * n);
        e = run(&b, &a) ? NAN : rel_err(dC, C, 2 * m * n);
        ok(e <= TOL, "bgemm %s (experts) batch 2: rel err %.2e", dm_kern_op_name(ops[o]), e);
        free(A), free(B), free(C);
        ns_dev_free(dA), ns_dev_free(dB), ns_dev_free(dC);
    }
}

static void check_attention(const wk_attn_geom *g, const char *what)
{
    int64_t sz[WK_A__N];
    float *h[WK_A__N];
    void *d[WK_A__N];
    wk_attn_sizes(g, sz);
    for (int i = 0; i < WK_A__N; i++) h[i] = host_rand(sz[i], 1), d[i] = dev_of(h[i], sz[i]);
    int64_t b = wk_attn_entries(g);
    void **ptr = malloc((size_t)(3 * b) * sizeof *ptr), *dptr = NULL;
    ns_dev_alloc(&dptr, (size_t)(3 * b) * sizeof *ptr, &E);
    for (dm_kern_op op = DM_KOP_ATTN_SCORE; op <= DM_KOP_ATTN_DKEY; op++) {
        dm_kernel k;
        switch (op) {
        case DM_KOP_ATTN_SCORE: k = kern(DM_KERN_BGEMM, op, g->lq, g->lk, g->hd, b, 1); break;
        case DM_KOP_ATTN_VALUE: k = kern(DM_KERN_BGEMM, op, g->lq, g->vd, g->lk, b, 1); break;
        case DM_KOP_ATTN_DVALUE: k = kern(DM_KERN_BGEMM, op, g->lk, g->vd, g->lq, b, 1); break;
        case DM_KOP_ATTN_DSCORE: k = kern(DM_KERN_BGEMM, op, g->lq, g->lk, g->vd, b, 1); break;
        case DM_KOP_ATTN_DQUERY: k = kern(DM_KERN_BGEMM, op, g->lq, g->hd, g->lk, b, 1); break;
        default: k = kern(DM_KERN_BGEMM, op, g->lk, g->hd, g->lq, b, 1); break;
        }
        wk_args a;
        memset(&a, 0, sizeof a);
        wk_attn_bind(g, d, op, ptr, &a);
        if (!wk_attn_strided(g)) {
            ns_copy_h2d(dptr, ptr, (size_t)(3 * b) * sizeof *ptr, &E);
            a.pa = (const void *const *)dptr, a.pb = (const void *const *)dptr + b, a.pc = (void *const *)dptr + 2 * b;
        }
        int which[3];
        int64_t off[3];
        wk_attn_entry(g, op, 0, which, off);
        float *ref = malloc((size_t)sz[which[2]] * sizeof *ref);
        memcpy(ref, h[which[2]], (size_t)sz[which[2]] * sizeof *ref);
        for (int64_t e = 0; e < b; e++) {
            wk_attn_entry(g, op, e, which, off);
            wk_ref_gemm((wk_form)wk_form_of(op), k.m, k.n, k.k, 1.0f, h[which[0]] + off[0], h[which[1]] + off[1],
                        ref + off[2]);
        }
        /* the entries written (C's of every product) against the reference over the same span */
        wk_attn_entry(g, op, b - 1, which, off);
        int64_t span = off[2] + k.m * k.n;
        double er = run(&k, &a) ? NAN : rel_err(d[which[2]], ref, span);
        ok(er <= TOL, "attention %s (%s): rel err %.2e", dm_kern_op_name(op), what, er);
        /* products read what earlier ones wrote (S, dS): keep the device's result as the input */
        double *tmp = malloc((size_t)sz[which[2]] * sizeof *tmp);
        ns_download(tmp, d[which[2]], DM_DT_BF16, sz[which[2]], &E);
        for (int64_t i = 0; i < sz[which[2]]; i++) h[which[2]][i] = (float)tmp[i];
        free(tmp);
        free(ref);
    }
    free(ptr);
    ns_dev_free(dptr);
    for (int i = 0; i < WK_A__N; i++) free(h[i]), ns_dev_free(d[i]);
}

/* ---- elementwise ---------------------------------------------------------------------------- */

static void check_loss_vector_table(int64_t n)
{
    const uint64_t seed = 7;
    float *dloss = NULL;
    ns_dev_alloc((void **)&dloss, 4, &E);
    /* loss over 2 matrices of 10 rows */
    int64_t rows = 10, cnt = 2;
    float *R = host_rand(cnt * rows * n, 1);
    void *dR = dev_of(R, cnt * rows * n);
    float z = 0;
    ns_copy_h2d(dloss, &z, 4, &E);
    dm_kernel k = kern(DM_KERN_ELEM, DM_KOP_LOSS, rows, n, 0, 1, cnt);
    wk_args a;
    memset(&a, 0, sizeof a);
    a.r = dR, a.loss = dloss, a.scale = 0.25f, a.seed = seed, a.param = 5, a.row0 = 100;
    double want = 0;
    for (int64_t i = 0; i < cnt; i++) want += wk_ref_loss(R + i * rows * n, rows, n, seed, 5 + i, 100, 0.25);
    double er = run(&k, &a) ? NAN : rel_err(dR, R, cnt * rows * n);
    double got = dev_float(dloss);
    ok(er <= TOL && fabs(got - want) <= 1e-3 * want, "loss n=%lld: residuals rel err %.2e, loss %.6g (CPU %.6g)",
       (long long)n, er, got, want);
    free(R), ns_dev_free(dR);
    /* vector (count 2) and table: forward, then the two-pass reductions */
    for (int tab = 0; tab < 2; tab++) {
        int64_t T = tab ? 24 * 13 : 300, period = tab ? 24 : 1, pos = tab ? 5 : 1, c2 = tab ? 1 : 2;
        float *x = host_rand(T * n, 1), *W = host_rand(c2 * pos * n, 1), *Rv = malloc(c2 * T * n * sizeof *Rv);
        void *dx_ = dev_of(x, T * n), *dW = dev_of(W, c2 * pos * n), *dRv = dev_zero(c2 * T * n);
        ns_copy_h2d(dloss, &z, 4, &E);
        dm_kernel f = kern(DM_KERN_ELEM, tab ? DM_KOP_TABLE : DM_KOP_VECTOR, T, n, 0, 1, c2);
        memset(&a, 0, sizeof a);
        a.x = dx_, a.w = dW, a.r = dRv, a.loss = dloss, a.scale = 0.5f, a.seed = seed, a.param = 9, a.row0 = 3;
        a.period = period, a.positions = pos;
        want = 0;
        for (int64_t i = 0; i < c2; i++)
            want += wk_ref_table(x, W + i * pos * n, Rv + i * T * n, T, n, period, pos, seed, 9 + i, 3, 0.5);
        er = run(&f, &a) ? NAN : rel_err(dRv, Rv, c2 * T * n);
        got = dev_float(dloss);
        ok(er <= TOL && fabs(got - want) <= 1e-3 * want, "%s n=%lld: R rel err %.2e, loss %.6g (CPU %.6g)",
           tab ? "table (period 24, 5 positions)" : "vector (count 2)", (long long)n, er, got, want);
        /* backward from the device's R (bf16), as the executor reads it */
        double *tmp = malloc((size_t)(c2 * T * n) * sizeof *tmp);
        ns_download(tmp, dRv, DM_DT_BF16, c2 * T * n, &E);
        for (int64_t i = 0; i < c2 * T * n; i++) Rv[i] = (float)tmp[i];
        free(tmp);
        float *G = malloc((size_t)(c2 * pos * n) * sizeof *G), *DX = malloc((size_t)(c2 * T * n) * sizeof *DX);
        for (int64_t i = 0; i < c2; i++)
            wk_ref_table_bwd(Rv + i * T * n, x, W + i * pos * n, G + i * pos * n, DX + i * T * n, 0, T, n, period, pos,
                             0.125f);
        void *dG = dev_zero(c2 * pos * n), *dG2 = dev_zero(c2 * pos * n), *dDX = dev_zero(c2 * T * n);
        float *ws = NULL;
        ns_dev_alloc((void **)&ws, (size_t)wk_ws_floats(c2, T, n, period, pos) * 4, &E);
        dm_kernel bk = kern(DM_KERN_ELEM, tab ? DM_KOP_TABLE_BWD : DM_KOP_VECTOR_BWD, T, n, 0, 1, c2);
        memset(&a, 0, sizeof a);
        a.r = dRv, a.x = dx_, a.w = dW, a.g = dG, a.dx = dDX, a.ws = ws, a.scale = 0.125f, a.period = period,
        a.positions = pos;
        er = run(&bk, &a) ? NAN : rel_err(dG, G, c2 * pos * n);
        double ed = rel_err(dDX, DX, c2 * T * n);
        ok(er <= TOL && ed <= TOL, "%s-bwd n=%lld over %lld rows: gradient rel err %.2e, dx %.2e",
           tab ? "table" : "vector", (long long)n, (long long)T, er, ed);
        a.g = dG2;
        ok(run(&bk, &a) == 0 && same_bits(dG, dG2, c2 * pos * n), "%s-bwd n=%lld: two runs bit-identical",
           tab ? "table" : "vector", (long long)n);
        free(x), free(W), free(Rv), free(G), free(DX);
        ns_dev_free(dx_), ns_dev_free(dW), ns_dev_free(dRv), ns_dev_free(dG), ns_dev_free(dG2), ns_dev_free(dDX);
        ns_dev_free(ws);
    }
    ns_dev_free(dloss);
}

static int cmp_pair(const void *a, const void *b)
{
    const int32_t *x = a, *y = b;
    return x[0] != y[0] ? (x[0] > y[0]) - (x[0] < y[0]) : (x[1] > y[1]) - (x[1] < y[1]);
}

static void check_embed_route(int64_t n)
{
    /* a lookup of 40 tokens in a 30-row table, its gradient zeroed and scattered, or added */
    const int64_t V = 30, T = 40;
    int32_t id[40], pairs[80], uniq[40], off[41], tok[40];
    for (int64_t t = 0; t < T; t++) id[t] = wk_token_id(3, 11, 200 + t, V), pairs[2 * t] = id[t], pairs[2 * t + 1] = (int32_t)t;
    qsort(pairs, (size_t)T, 2 * sizeof *pairs, cmp_pair);
    int nu = 0;
    for (int64_t t = 0; t < T; t++) {
        if (t == 0 || pairs[2 * t] != pairs[2 * t - 2]) uniq[nu] = pairs[2 * t], off[nu++] = (int32_t)t;
        tok[t] = pairs[2 * t + 1];
    }
    off[nu] = (int32_t)T;
    float *Et = host_rand(V * n, 1), *R = malloc((size_t)(T * n) * sizeof *R);
    void *dE = dev_of(Et, V * n), *dR = dev_zero(T * n);
    int32_t *did = dev_ints(id, T), *du = dev_ints(uniq, nu), *doff = dev_ints(off, nu + 1), *dtok = dev_ints(tok, T);
    wk_ref_embed(Et, id, R, T, n);
    dm_kernel k = kern(DM_KERN_ELEM, DM_KOP_EMBED, T, n, V, 1, 1);
    wk_args a;
    memset(&a, 0, sizeof a);
    a.w = dE, a.idx = did, a.r = dR;
    double er = run(&k, &a) ? NAN : rel_err(dR, R, T * n);
    ok(er == 0, "embed n=%lld: the gathered rows are the table's (rel err %.2e)", (long long)n, er);
    for (int acc = 0; acc < 2; acc++) {
        float *G = host_rand(V * n, 1), *Gr = malloc((size_t)(V * n) * sizeof *Gr);
        void *dG = dev_of(G, V * n);
        memcpy(Gr, G, (size_t)(V * n) * sizeof *Gr);
        if (!acc) memset(Gr, 0, (size_t)(V * n) * sizeof *Gr);
        wk_ref_embed_bwd(R, id, Gr, 0, T, n, 0.5f);
        dm_kernel kb = kern(DM_KERN_ELEM, DM_KOP_EMBED_BWD, T, n, 0, 1, 1);
        memset(&a, 0, sizeof a);
        a.r = dR, a.g = dG, a.csr_id = du, a.csr_off = doff, a.csr_tok = dtok, a.csr_n = nu, a.table_rows = V;
        a.scale = 0.5f, a.accumulate = acc;
        er = run(&kb, &a) ? NAN : rel_err(dG, Gr, V * n);
        ok(er <= TOL, "embed-bwd n=%lld (%s): rel err %.2e", (long long)n, acc ? "added to a tied head's part" : "zeroed first",
           er);
        free(G), free(Gr), ns_dev_free(dG);
    }
    free(Et), free(R);
    ns_dev_free(dE), ns_dev_free(dR), ns_dev_free(did), ns_dev_free(du), ns_dev_free(doff), ns_dev_free(dtok);
    /* dispatch of 12 tokens, top-2 of 4 experts (6 rows each), and its combine */
    const int64_t Tk = 12, K = 2, Ex = 4, te = 6, rows = Ex * te;
    int32_t src[24], inv[24];
    for (int64_t e = 0; e < Ex; e++)
        for (int64_t j = 0; j < te; j++) {
            int64_t rho = j * Ex + e;
            src[e * te + j] = (int32_t)(rho / K < Tk ? rho / K : -1);
        }
    for (int64_t t = 0; t < Tk; t++)
        for (int64_t q = 0; q < K; q++) {
            int64_t rho = t * K + q;
            inv[t * K + q] = (int32_t)((rho % Ex) * te + rho / Ex);
        }
    float *X = host_rand(Tk * n, 1), *D = malloc((size_t)(rows * n) * sizeof *D), *dX = malloc((size_t)(Tk * n) * sizeof *dX);
    void *dXs = dev_of(X, Tk * n), *dD = dev_zero(rows * n), *ddX = dev_zero(Tk * n);
    int32_t *dsrc = dev_ints(src, rows), *dinv = dev_ints(inv, Tk * K);
    wk_ref_route(X, src, D, rows, n);
    dm_kernel kr = kern(DM_KERN_ELEM, DM_KOP_ROUTE, Tk * K, n, 0, 1, 1);
    memset(&a, 0, sizeof a);
    a.x = dXs, a.idx = dsrc, a.g = dD, a.rows = rows;
    er = run(&kr, &a) ? NAN : rel_err(dD, D, rows * n);
    ok(er == 0, "route n=%lld: every routed row is its token's (rel err %.2e)", (long long)n, er);
    wk_ref_route_bwd(D, inv, dX, Tk, K, n);
    dm_kernel kc = kern(DM_KERN_ELEM, DM_KOP_ROUTE_BWD, Tk * K, n, 0, 1, 1);
    memset(&a, 0, sizeof a);
    a.r = dD, a.idx = dinv, a.dx = ddX, a.rows = Tk, a.top_k = K;
    er = run(&kc, &a) ? NAN : rel_err(ddX, dX, Tk * n);
    ok(er <= TOL, "route-bwd n=%lld: each token the sum of its rows (rel err %.2e)", (long long)n, er);
    free(X), free(D), free(dX);
    ns_dev_free(dXs), ns_dev_free(dD), ns_dev_free(ddX), ns_dev_free(dsrc), ns_dev_free(dinv);
}

/* ---- attention softmax ------------------------------------------------------------------------ */

/* softmax and its backward over rows x n scores (in place) against wk_ref.h on the same bf16
 * inputs; two runs bit-identical (the row reductions have a fixed order) */
static void check_softmax(int64_t rows, int64_t n)
{
    float a = wk_softmax_scale(64);
    float *S = host_rand(rows * n, 8), *P = malloc((size_t)(rows * n) * sizeof *P);
    float *dP = host_rand(rows * n, 1), *dS = malloc((size_t)(rows * n) * sizeof *dS);
    memcpy(P, S, (size_t)(rows * n) * sizeof *P);
    wk_ref_softmax(P, rows, n, a);
    void *d1 = dev_of(S, rows * n), *d2 = dev_of(S, rows * n);
    dm_kernel k = kern(DM_KERN_ELEM, DM_KOP_SOFTMAX, rows, n, 0, 1, 1);
    wk_args x;
    memset(&x, 0, sizeof x);
    x.r = d1, x.scale = a;
    double er = run(&k, &x) ? NAN : rel_err(d1, P, rows * n);
    x.r = d2;
    int same = run(&k, &x) == 0 && same_bits(d1, d2, rows * n);
    ok(er <= TOL && same, "softmax %lld x %lld: rel err %.2e, two runs %s", (long long)rows, (long long)n, er,
       same ? "bit-identical" : "DIFFER");
    /* the backward from the GPU's own P (rounded to bf16 as it stored it) */
    double *ph = malloc((size_t)(rows * n) * sizeof *ph);
    int bad = ns_download(ph, d1, DM_DT_BF16, rows * n, &E);
    for (int64_t i = 0; i < rows * n; i++) P[i] = (float)ph[i];
    free(ph);
    memcpy(dS, dP, (size_t)(rows * n) * sizeof *dS);
    wk_ref_softmax_bwd(P, dS, rows, n);
    void *dd = dev_of(dP, rows * n);
    dm_kernel kb = kern(DM_KERN_ELEM, DM_KOP_SOFTMAX_BWD, rows, n, 0, 1, 1);
    memset(&x, 0, sizeof x);
    x.x = d1, x.r = dd;
    er = bad || run(&kb, &x) ? NAN : rel_err(dd, dS, rows * n);
    ok(er <= TOL, "softmax-bwd %lld x %lld: rel err %.2e", (long long)rows, (long long)n, er);
    free(S), free(P), free(dP), free(dS);
    ns_dev_free(d1), ns_dev_free(d2), ns_dev_free(dd);
}

/* The layer passes (wk_ref.h) against the CPU on the same bf16 inputs: act and glu (a fused gate/up
 * at row stride 2 n, and two buffers at n), their backward, rope and its inverse, the residual add;
 * n a multiple of 8 (16-byte accesses) or not. */
static void check_passes(int64_t rows, int64_t n)
{
    int64_t e = rows * n;
    float *G2 = host_rand(2 * e, 3), *dH = host_rand(e, 1), *X = host_rand(e, 1), *ref = malloc((size_t)(2 * e) * 4);
    void *dG2 = dev_of(G2, 2 * e), *ddH = dev_of(dH, e), *dX = dev_of(X, e), *out = dev_zero(2 * e);
    static const dm_kern_op ops[] = {DM_KOP_ACT, DM_KOP_ACT_BWD, DM_KOP_GLU, DM_KOP_GLU_BWD, DM_KOP_RESID};
    for (int q = 0; q < 5; q++) {
        dm_kern_op op = ops[q];
        dm_kernel k = kern(DM_KERN_ELEM, op, rows, n, 0, 1, 1);
        wk_args x;
        memset(&x, 0, sizeof x);
        x.x = dG2, x.w = (const uint16_t *)dG2 + n, x.dx = ddH, x.r = out, x.ld = 2 * n;
        int64_t outn = op == DM_KOP_GLU_BWD ? 2 * e : e;
        switch (op) {
        case DM_KOP_ACT: wk_ref_act(G2, 2 * n, ref, rows, n); break;
        case DM_KOP_ACT_BWD: wk_ref_act_bwd(G2, 2 * n, dH, ref, rows, n); break;
        case DM_KOP_GLU: wk_ref_glu(G2, G2 + n, 2 * n, ref, rows, n); break;
        case DM_KOP_GLU_BWD: wk_ref_glu_bwd(G2, G2 + n, 2 * n, dH, ref, ref + e, rows, n); break;
        default: /* resid: X + the first e of G2 (read as n-wide rows) */
            x.x = dX, x.w = dG2, x.ld = 0;
            wk_ref_add(X, G2, ref, e);
        }
        double er = run(&k, &x) ? NAN : rel_err(out, ref, outn);
        ok(er <= TOL, "%s %lld x %lld%s: rel err %.2e", dm_kern_op_name(op), (long long)rows, (long long)n,
           op == DM_KOP_RESID ? "" : " (fused gate/up, row stride 2n)", er);
    }
    /* rope, then rope-bwd: the CPU's turn of the same bf16 values, and back near the start; rotated
     * dims whose pairs a vector of 8 values holds whole (8, 128), splits (6: the pair index wraps
     * inside a vector) and the fewest (2) */
    static const int64_t dims[] = {8, 6, 2, 128};
    for (int q = 0; q < 4; q++) {
        memcpy(ref, X, (size_t)e * 4);
        wk_ref_rope(ref, rows, n, dims[q], 0);
        void *d = dev_of(X, e);
        dm_kernel k = kern(DM_KERN_ELEM, DM_KOP_ROPE, rows, n, dims[q], 1, 1),
                  kb = kern(DM_KERN_ELEM, DM_KOP_ROPE_BWD, rows, n, dims[q], 1, 1);
        wk_args x;
        memset(&x, 0, sizeof x);
        x.r = d;
        double er = run(&k, &x) ? NAN : rel_err(d, ref, e), back = run(&kb, &x) ? NAN : rel_err(d, X, e);
        ok(er <= TOL && back <= 2 * TOL,
           "rope %lld x %lld (%lld dims a head): rel err %.2e; rope-bwd back to the input %.2e", (long long)rows,
           (long long)n, (long long)dims[q], er, back);
        ns_dev_free(d);
    }
    free(G2), free(dH), free(X), free(ref);
    ns_dev_free(dG2), ns_dev_free(ddH), ns_dev_free(dX), ns_dev_free(out);
}

/* ---- the 1-D backward's bandwidth ------------------------------------------------------------- */

typedef struct bw_call {
    dm_kernel k;
    wk_args a;
} bw_call;
static int bw_run(void *p, ns_stream s, dm_err *err)
{
    bw_call *c = p;
    return wk_run(H, &c->k, &c->a, s, err);
}

static void check_bandwidth(const dm_gpu *gpu)
{
    const int64_t n = 4096, toks[] = {4096, 16384};
    for (int i = 0; i < 2; i++) {
        int64_t T = toks[i];
        bw_call c;
        memset(&c, 0, sizeof c);
        c.k = kern(DM_KERN_ELEM, DM_KOP_VECTOR_BWD, T, n, 0, 1, 1);
        void *x = NULL, *r = NULL, *w = NULL, *g = NULL, *dx = NULL, *ws = NULL;
        int bad = ns_dev_alloc(&x, (size_t)(T * n) * 2, &E) || ns_dev_alloc(&r, (size_t)(T * n) * 2, &E) ||
                  ns_dev_alloc(&dx, (size_t)(T * n) * 2, &E) || ns_dev_alloc(&w, (size_t)n * 2, &E) ||
                  ns_dev_alloc(&g, (size_t)n * 2, &E) || ns_dev_alloc(&ws, (size_t)wk_ws_floats(1, T, n, 1, 1) * 4, &E) ||
                  ns_fill_random(x, DM_DT_BF16, T * n, 1, 1.f, S, &E) || ns_fill_random(r, DM_DT_BF16, T * n, 2, 1.f, S, &E) ||
                  ns_fill_random(w, DM_DT_BF16, n, 3, 1.f, S, &E);
        c.a.x = x, c.a.r = r, c.a.w = w, c.a.g = g, c.a.dx = dx, c.a.ws = (float *)ws, c.a.scale = 1e-4f;
        double t[50], med = 0, mn = 0, mx = 0;
        if (!bad) bad = ns_time_events(bw_run, &c, S, 20, 50, t, &E);
        if (!bad) ns_bench_stats(t, 50, &med, &mn, &mx);
        /* the workload's bytes: dy and x read, dx written (the partial sums are 1/16 of a row each) */
        double bytes = 3.0 * 2.0 * (double)T * (double)n, rate = med > 0 ? bytes / (med * 1e-6) : 0;
        ok(!bad && gpu && rate >= 0.5 * gpu->hbm_Bps, "vector-bwd %lld x %lld: %.1f us, %.0f GB/s = %.0f%% of the %s's "
           "%.0f GB/s (at least 50%%)", (long long)T, (long long)n, med, rate / 1e9,
           gpu ? 100 * rate / gpu->hbm_Bps : 0, gpu ? gpu->short_name : "?", gpu ? gpu->hbm_Bps / 1e9 : 0);
        ns_dev_free(x), ns_dev_free(r), ns_dev_free(w), ns_dev_free(g), ns_dev_free(dx), ns_dev_free(ws);
    }
}

int main(void)
{
    ns_device_info info;
    if (ns_device_query(&info, &E)) return tap_skip_all("no GPU");
    if (ns_stream_create(&S, &E) || wk_blas_create(&H, &E)) {
        ok(0, "stream and cuBLAS handle: %s", E.msg);
        return tap_done();
    }
    tap_diag("%s", info.name);
    check_products();
    wk_attn_geom gqa = {8, 12, 8, 16, 4, 2, 2, 1, 1, 0, 0, 0}; /* 2 query windows on one key window (cross), 2 heads per key head */
    wk_attn_geom mha = {8, 8, 16, 16, 2, 2, 3, 3, 1, 0, 0, 0};
    check_attention(&gqa, "grouped-query cross attention, pointer arrays");
    check_attention(&mha, "strided");
    /* --attention causal's products of 16-row windows (workload.h dm_attn_block_geoms, K 2):
     * the 8-row rectangle, the two 4-row ones, the four diagonal tiles */
    wk_attn_geom c0 = {8, 8, 16, 16, 2, 2, 3, 3, 1, 16, 8, 16}, c1 = {4, 4, 16, 16, 2, 2, 3, 3, 2, 8, 4, 16};
    wk_attn_geom cd = {4, 4, 16, 16, 2, 2, 3, 3, 4, 4, 0, 16}, cg = {4, 4, 8, 16, 4, 2, 2, 2, 2, 8, 4, 16};
    /* a sliding window's band over 20-row windows in tiles of 4 (window 9: each tile against the
     * two before it and itself): the first 8 rows' square, then 3 rectangles of 4 x 12 */
    wk_attn_geom bs = {8, 8, 16, 16, 2, 2, 3, 3, 1, 0, 0, 20}, bb = {4, 12, 16, 16, 2, 2, 3, 3, 3, 4, 8, 20};
    wk_attn_geom bg = {4, 12, 8, 16, 4, 2, 2, 2, 3, 4, 8, 20};
    check_attention(&c0, "causal, the first rectangle, strided");
    check_attention(&c1, "causal, 2 rectangles per head, strided");
    check_attention(&cd, "causal, the diagonal tiles, strided");
    check_attention(&cg, "causal grouped-query rectangles, pointer arrays");
    check_attention(&bs, "sliding window, the first tiles' square in a longer window, strided");
    check_attention(&bb, "sliding window, the band's rectangles, pointer arrays");
    check_attention(&bg, "sliding window, grouped-query band, pointer arrays");
    for (int v = 0; v < 2; v++) {
        check_loss_vector_table(v ? 13 : 24);
        check_embed_route(v ? 10 : 16);
    }
    check_passes(37, 96);  /* 8 per access */
    check_passes(5, 1000); /* 8 per access, 125 vectors a row */
    check_passes(9, 30);   /* one element per access */
    check_softmax(37, 1000);  /* one element per access */
    check_softmax(64, 4096);  /* 8 per access, the row in registers */
    check_softmax(5, 2056);   /* in registers (2 chunks), the last chunk partial */
    check_softmax(7, 1024);   /* in registers, 1 chunk of 2048 partly used */
    check_softmax(3, 6144);   /* in registers, 512 x 2 (DM_SMX_NT=128: 128 x 6 of 8) */
    check_softmax(4, 8200);   /* 8 per access, two passes (backward: in registers, 512 x 3 of 4) */
    check_softmax(3, 8192);   /* in registers, 512 x 2 (backward 512 x 2) */
    check_softmax(2, 16384);  /* two passes (backward in registers, 512 x 4: its longest; DM_SMX_NT=256: 256 x 8) */
    check_softmax(2, 16392);  /* 8 per access, two passes both ways */
    check_softmax(3, 20000);  /* rows longer than a block's stride */
    check_bandwidth(dm_gpu_find(info.name));
    wk_blas_destroy(H);
    ns_stream_destroy(S);
    return tap_done();
}
#endif
