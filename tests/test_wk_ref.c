/* test_wk_ref.c: the CPU statements of the attention softmax (kernels/wk_ref.h) checked
 * independently of their own code: every row of P sums to 1 and is positive, P does not move when
 * a row's scores shift by a constant, the score scale a divides as softmax(a S) should, and
 * softmax-bwd equals the derivative of L = sum dP . softmax(a S) taken by central differences in
 * double (so dS = a x softmax-bwd(P, dP) within 1e-4 of it). */
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
    return tap_done();
}
