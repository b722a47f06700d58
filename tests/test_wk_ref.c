/* test_wk_ref.c: the CPU statements of the attention softmax (kernels/wk_ref.h) checked
 * independently of their own code: every row of P sums to 1 and is positive, P does not move when
 * a row's scores shift by a constant, the score scale a divides as softmax(a S) should, and
 * softmax-bwd equals the derivative of L = sum dP . softmax(a S) taken by central differences in
 * double (so dS = a x softmax-bwd(P, dP) within 1e-4 of it). The layer passes: gelu and silu
 * against their formulas in double, their backward against central differences, glu over a fused
 * projection (row stride 2 n) equal to glu over the two halves, rope keeping each pair's length
 * and rope-bwd undoing it, the residual add. */
#include "config.h"

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "tap.h"
#include "wk_ref.h"

static uint64_t rs = 99;
static float urand(void)
{
    rs = rs * 6364136223846793005ull + 1442695040888963407ull;
    return (float)((double)(rs >> 40) / 8388608.0 - 1.0);
}

/* softmax of one row in double: the reference of the differences */
static void dsoftmax(const double *s, double *p, int n, double a)
{
    double mx = -INFINITY, sum = 0;
    for (int c = 0; c < n; c++) mx = fmax(mx, a * s[c]);
    for (int c = 0; c < n; c++) sum += (p[c] = exp(a * s[c] - mx));
    for (int c = 0; c < n; c++) p[c] /= sum;
}

static double dgelu(double x) { return 0.5 * x * (1 + tanh(sqrt(2 / M_PI) * (x + 0.044715 * x * x * x))); }
static double dsilu(double x) { return x / (1 + exp(-x)); }

static void passes(void)
{
    enum { R = 3, N = 24 };
    float G[R * 2 * N], dH[R * N], E[2 * R * N], E2[2 * R * N];
    for (int i = 0; i < R * 2 * N; i++) G[i] = 3 * urand();
    for (int i = 0; i < R * N; i++) dH[i] = urand();
    double e1 = 0, e2 = 0, g1 = 0, g2 = 0;
    for (int i = 0; i < R * N; i++) {
        double x = G[i], h = 1e-3;
        e1 = fmax(e1, fabs(wk_gelu(G[i]) - dgelu(x)));
        e2 = fmax(e2, fabs(wk_silu(G[i]) - dsilu(x)));
        g1 = fmax(g1, fabs(wk_gelu_grad(G[i]) - (dgelu(x + h) - dgelu(x - h)) / (2 * h)));
        g2 = fmax(g2, fabs(wk_silu_grad(G[i]) - (dsilu(x + h) - dsilu(x - h)) / (2 * h)));
    }
    ok(e1 < 1e-5 && e2 < 1e-5, "gelu (tanh form) and silu as their formulas (%.1e, %.1e)", e1, e2);
    ok(g1 < 1e-3 && g2 < 1e-3, "their derivatives by differences (%.1e, %.1e)", g1, g2);
    /* glu over one fused projection [G | U] (stride 2 N) against glu over two (stride N) */
    float Gs[R * N], Us[R * N];
    for (int r = 0; r < R; r++)
        for (int c = 0; c < N; c++) Gs[r * N + c] = G[r * 2 * N + c], Us[r * N + c] = G[r * 2 * N + N + c];
    wk_ref_glu(G, G + N, 2 * N, E, R, N);
    wk_ref_glu(Gs, Us, N, E2, R, N);
    ok(!memcmp(E, E2, sizeof(float) * R * N), "glu over a fused gate/up equals glu over the two");
    double worst = 0;
    for (int i = 0; i < R * N; i++) worst = fmax(worst, fabs(E2[i] - dsilu(Gs[i]) * Us[i]));
    ok(worst < 1e-5, "glu = silu(gate) x up (%.1e)", worst);
    wk_ref_glu_bwd(Gs, Us, N, dH, E, E + R * N, R, N);
    worst = 0;
    for (int i = 0; i < R * N; i++) {
        double h = 1e-3, dg = (dsilu(Gs[i] + h) - dsilu(Gs[i] - h)) / (2 * h) * Us[i] * dH[i];
        worst = fmax(worst, fabs(E[i] - dg) + fabs(E[R * N + i] - dH[i] * dsilu(Gs[i])));
    }
    ok(worst < 1e-3, "glu-bwd: dgate and dup by differences (%.1e)", worst);
    wk_ref_act_bwd(Gs, N, dH, E, R, N);
    worst = 0;
    for (int i = 0; i < R * N; i++) worst = fmax(worst, fabs(E[i] - dH[i] * (dgelu(Gs[i] + 1e-3) - dgelu(Gs[i] - 1e-3)) / 2e-3));
    ok(worst < 1e-3, "act-bwd = dH gelu' (%.1e)", worst);
    /* rope: each pair keeps its length; the backward turns it back */
    memcpy(E, Gs, sizeof Gs);
    wk_ref_rope(E, R, N, 8, 0);
    double len = 0, moved = 0;
    for (int i = 0; i < R * N; i += 2) {
        len = fmax(len, fabs(hypot(E[i], E[i + 1]) - hypot(Gs[i], Gs[i + 1])));
        moved = fmax(moved, fabs(E[i] - Gs[i]));
    }
    wk_ref_rope(E, R, N, 8, 1);
    double back = 0;
    for (int i = 0; i < R * N; i++) back = fmax(back, fabs(E[i] - Gs[i]));
    ok(len < 1e-5 && moved > 0.1 && back < 1e-5, "rope turns pairs (moved %.2f), keeps their length (%.1e), rope-bwd "
       "undoes it (%.1e)", moved, len, back);
    wk_ref_add(Gs, Us, E, R * N);
    worst = 0;
    for (int i = 0; i < R * N; i++) worst = fmax(worst, fabs(E[i] - (Gs[i] + Us[i])));
    ok(worst == 0, "resid: the sum");
}

int main(void)
{
    enum { R = 5, N = 33 };
    float a = wk_softmax_scale(64);
    ok(fabsf(a - 0.125f) < 1e-7f, "score scale of head width 64: 1/8 (%g)", a);
    float S[R * N], P[R * N], Q[R * N];
    for (int i = 0; i < R * N; i++) S[i] = 20 * urand();
    memcpy(P, S, sizeof S);
    wk_ref_softmax(P, R, N, a);
    double worst = 0, minp = 1;
    for (int r = 0; r < R; r++) {
        double sum = 0;
        for (int c = 0; c < N; c++) sum += P[r * N + c], minp = fmin(minp, P[r * N + c]);
        worst = fmax(worst, fabs(sum - 1));
    }
    ok(worst < 1e-6 && minp > 0, "rows of P sum to 1 (worst %.1e) and are positive (min %.2e)", worst, minp);
    for (int i = 0; i < R * N; i++) Q[i] = S[i] + 16.0f * (float)(i / N); /* a constant per row */
    wk_ref_softmax(Q, R, N, a);
    double shift = 0;
    for (int i = 0; i < R * N; i++) shift = fmax(shift, fabs(Q[i] - P[i]));
    ok(shift < 1e-6, "a row's scores shifted by a constant leave P (max change %.1e)", shift);
    /* the scale: softmax(S) with a = 1 equals softmax(a S) with a = 0.125 on S / 0.125 */
    for (int i = 0; i < R * N; i++) Q[i] = S[i] * a;
    wk_ref_softmax(Q, R, N, 1.0f);
    double sc = 0;
    for (int i = 0; i < R * N; i++) sc = fmax(sc, fabs(Q[i] - P[i]));
    ok(sc < 1e-6, "the scale is applied to the scores (max diff %.1e)", sc);
    /* softmax-bwd against central differences of L(S) = sum_c dP[c] softmax(a S)[c], per row */
    float dP[R * N], dS[R * N];
    for (int i = 0; i < R * N; i++) dP[i] = urand();
    memcpy(dS, dP, sizeof dS);
    wk_ref_softmax_bwd(P, dS, R, N);
    double err = 0, ref_norm = 0;
    for (int r = 0; r < R; r++)
        for (int c = 0; c < N; c++) {
            double s[N], p[N], h = 1e-4, lp = 0, lm = 0;
            for (int j = 0; j < N; j++) s[j] = S[r * N + j];
            s[c] += h;
            dsoftmax(s, p, N, a);
            for (int j = 0; j < N; j++) lp += dP[r * N + j] * p[j];
            s[c] -= 2 * h;
            dsoftmax(s, p, N, a);
            for (int j = 0; j < N; j++) lm += dP[r * N + j] * p[j];
            double fd = (lp - lm) / (2 * h), got = a * dS[r * N + c];
            err = fmax(err, fabs(fd - got));
            ref_norm = fmax(ref_norm, fabs(fd));
        }
    ok(err < 1e-4 * fmax(1, ref_norm), "softmax-bwd x scale = the derivative by differences (max err %.1e of %.2e)", err,
       ref_norm);
    passes();
    return tap_done();
}
