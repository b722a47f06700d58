/* ns_ref.c: reference Muon math on the CPU (see ns_ref.h): coefficient sets, direct and Gram
 * Newton-Schulz in double and float, FLOP counts, Muon and AdamW updates.
 *
 * The typed part (a blocked GEMM and the two NS loops) is written once, below the #else, and
 * compiled twice by including this file into itself with T = double and T = float. The GEMM
 * packs panels and runs a 6 x (2 vectors) register-tile kernel written with GCC vector types;
 * on x86-64 a copy built for AVX2+FMA is chosen at run time when the CPU has them (about 30-50
 * GFLOP/s double on one core; the generic copy, on CPUs without AVX2, is ~15x slower). */
#ifndef NS_REF_TEMPLATE

#include "ns_ref.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#define NS_HAVE_AVX2_CLONE 1
#else
#define NS_HAVE_AVX2_CLONE 0
#endif

/* Blocking: a KC x NC panel of B and an MC x KC block of A are packed; MC is a multiple of
 * NS_MR and NC of every NR (NR is 8 doubles or 16 floats). */
#define NS_MR 6
#define NS_KC 256
#define NS_MC 96
#define NS_NC 2048

static int64_t min64(int64_t a, int64_t b) { return a < b ? a : b; }

#if NS_HAVE_AVX2_CLONE
static int ns_avx2_ok(void)
{
    static int cached = -1;
    if (cached < 0) {
        __builtin_cpu_init();
        cached = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
    }
    return cached;
}
#endif

/* Checks shared by both NS precisions; fills *o_out and *c_out with the resolved options. */
static int ns_check_args(int64_t m, int64_t n, const ns_opts *o, ns_opts *o_out,
                         ns_coeffs *dflt, const ns_coeffs **c_out, dm_err *err)
{
    if (m < 1 || n < 1)
        return dm_err_set(err, "ns_ref: matrix size %lld x %lld: both must be >= 1",
                          (long long)m, (long long)n);
    if (o) *o_out = *o;
    else ns_opts_default(o_out);
    if (o_out->algo != DM_NS_DIRECT && o_out->algo != DM_NS_GRAM)
        return dm_err_set(err, "ns_ref: unknown NS algorithm %d", (int)o_out->algo);
    if (!(o_out->eps >= 0) || !isfinite(o_out->eps))
        return dm_err_set(err, "ns_ref: eps %g must be finite and >= 0", o_out->eps);
    if (o_out->coeffs) {
        *c_out = o_out->coeffs;
    } else {
        ns_coeffs_default(dflt);
        *c_out = dflt;
    }
    if ((*c_out)->n < 0 || (*c_out)->n > NS_MAX_ITERS)
        return dm_err_set(err, "ns_ref: %d iterations (0 to %d allowed)", (*c_out)->n,
                          NS_MAX_ITERS);
    if ((size_t)m > SIZE_MAX / 8 / (size_t)n)
        return dm_err_set(err, "ns_ref: matrix %lld x %lld too large", (long long)m,
                          (long long)n);
    return 0;
}

static int ns_restart_before(uint32_t restarts, int k) { return dm_ns_restart_before(restarts, k); }

#define NS_REF_TEMPLATE 1
#define T double
#define SFX(name) name##_d
#include "ns_ref.c"
#undef T
#undef SFX
#define T float
#define SFX(name) name##_f
#include "ns_ref.c"
#undef T
#undef SFX

/* ---- coefficient sets ------------------------------------------------------------------- */

void ns_coeffs_jordan(ns_coeffs *c)
{
    memset(c, 0, sizeof *c);
    c->n = 5;
    for (int k = 0; k < 5; k++) {
        c->a[k] = 3.4445;
        c->b[k] = -4.7750;
        c->c[k] = 2.0315;
    }
}

int ns_coeffs_polar_express(ns_coeffs *c, double safety, dm_err *err)
{
    /* arXiv:2505.16932, degree 5, l = 1e-3: the first five steps, before any safety factor. */
    static const double pe[5][3] = {
        {8.28721201814563, -23.595886519098837, 17.300387312530933},
        {4.107059111542203, -2.9478499167379106, 0.5448431082926601},
        {3.9486908534822946, -2.908902115962949, 0.5518191394370137},
        {3.3184196573706015, -2.488488024314874, 0.51004894012372},
        {2.300652019954817, -1.6689039845747493, 0.4188073119525673},
    };
    if (!(safety >= 1.0 && safety <= 2.0))
        return dm_err_set(err, "Polar Express safety factor %g: expected a number in [1, 2]",
                          safety);
    memset(c, 0, sizeof *c);
    c->n = 5;
    for (int k = 0; k < 5; k++) {
        c->a[k] = pe[k][0] / safety;
        c->b[k] = pe[k][1] / (safety * safety * safety);
        c->c[k] = pe[k][2] / (safety * safety * safety * safety * safety);
    }
    return 0;
}

void ns_coeffs_default(ns_coeffs *c) { ns_coeffs_polar_express(c, NS_PE_SAFETY_DEFAULT, NULL); }

/* "ORIGIN:LINE:COL: " for byte offset pos of text. */
static int parse_fail(dm_err *err, const char *origin, const char *text, const char *pos,
                      const char *what)
{
    int line = 1, col = 1;
    for (const char *p = text; p < pos; p++) {
        if (*p == '\n') {
            line++;
            col = 1;
        } else {
            col++;
        }
    }
    return dm_err_set(err, "%s:%d:%d: %s", origin ? origin : "coefficients", line, col, what);
}

static const char *skip_space(const char *p)
{
    while (*p && isspace((unsigned char)*p)) p++;
    return p;
}

int ns_coeffs_parse(const char *text, const char *origin, ns_coeffs *c, dm_err *err)
{
    static const char *const names[3] = {"a", "b", "c"};
    ns_coeffs out;
    char what[128];
    const char *p = skip_space(text);

    memset(&out, 0, sizeof out);
    if (!*p) return parse_fail(err, origin, text, p, "expected a list of a,b,c triples");
    for (;;) {
        if (out.n == NS_MAX_ITERS) {
            snprintf(what, sizeof what, "more than %d triples (one per iteration)",
                     NS_MAX_ITERS);
            return parse_fail(err, origin, text, p, what);
        }
        for (int j = 0; j < 3; j++) {
            char *end;
            double v;
            p = skip_space(p);
            if (j > 0) {
                if (*p != ',') {
                    snprintf(what, sizeof what, "expected ',' before coefficient %s of triple %d",
                             names[j], out.n + 1);
                    return parse_fail(err, origin, text, p, what);
                }
                p = skip_space(p + 1);
            }
            errno = 0;
            v = strtod(p, &end);
            if (end == p || *p == '+' || isspace((unsigned char)*p)) {
                snprintf(what, sizeof what, "expected a number for coefficient %s of triple %d",
                         names[j], out.n + 1);
                return parse_fail(err, origin, text, p, what);
            }
            if (!isfinite(v) || errno == ERANGE) {
                snprintf(what, sizeof what, "coefficient %s of triple %d is not a finite number",
                         names[j], out.n + 1);
                return parse_fail(err, origin, text, p, what);
            }
            if (j == 0) out.a[out.n] = v;
            else if (j == 1) out.b[out.n] = v;
            else out.c[out.n] = v;
            p = end;
        }
        out.n++;
        p = skip_space(p);
        if (!*p) break;
        if (*p != ';') {
            snprintf(what, sizeof what, "expected ';' or the end after triple %d", out.n);
            return parse_fail(err, origin, text, p, what);
        }
        p = skip_space(p + 1);
        if (!*p) break; /* a trailing ';' is allowed */
    }
    *c = out;
    return 0;
}

int ns_coeffs_from_spec(const char *spec, const char *origin, ns_coeffs *c, dm_err *err)
{
    static const char pe[] = "polar-express";
    if (!strcmp(spec, "jordan")) {
        ns_coeffs_jordan(c);
        return 0;
    }
    if (!strcmp(spec, pe)) return ns_coeffs_polar_express(c, NS_PE_SAFETY_DEFAULT, err);
    if (!strncmp(spec, pe, sizeof pe - 1) && spec[sizeof pe - 1] == ':') {
        const char *s = spec + sizeof pe;
        char *end;
        double v = strtod(s, &end);
        if (end == s || *end)
            return dm_err_set(err, "%s:1:%d: expected a safety factor after 'polar-express:'",
                              origin ? origin : "coefficients", (int)(s - spec) + 1);
        return ns_coeffs_polar_express(c, v, err);
    }
    return ns_coeffs_parse(spec, origin, c, err);
}

double ns_scalar_map(const ns_coeffs *c, double s)
{
    for (int k = 0; k < c->n; k++) {
        double s2 = s * s;
        s = s * (c->a[k] + s2 * (c->b[k] + s2 * c->c[k]));
    }
    return s;
}

/* ---- options, names ---------------------------------------------------------------------- */

void ns_opts_default(ns_opts *o)
{
    o->algo = DM_NS_DIRECT;
    o->coeffs = NULL;
    o->restarts = NS_RESTARTS_DEFAULT;
    o->eps = 1e-7;
}

/* ---- FLOPs -------------------------------------------------------------------------------- */

double ns_ref_flops_ex(int64_t m, int64_t n, int iters, dm_ns_algo algo, uint32_t restarts,
                       int symmetric)
{
    return dm_ns_flops_ex(m, n, iters, algo, restarts, symmetric);
}

double ns_ref_flops(int64_t m, int64_t n, int iters, dm_ns_algo algo)
{
    return ns_ref_flops_ex(m, n, iters, algo, NS_RESTARTS_DEFAULT, 0);
}

/* ---- comparisons, conversions -------------------------------------------------------------- */

double ns_rel_fro_err_d(const double *got, const double *want, size_t count)
{
    double num = 0, den = 0;
    for (size_t i = 0; i < count; i++) {
        double d = got[i] - want[i];
        num += d * d;
        den += want[i] * want[i];
    }
    return den > 0 ? sqrt(num / den) : sqrt(num);
}

double ns_rel_fro_err_fd(const float *got, const double *want, size_t count)
{
    double num = 0, den = 0;
    for (size_t i = 0; i < count; i++) {
        double d = (double)got[i] - want[i];
        num += d * d;
        den += want[i] * want[i];
    }
    return den > 0 ? sqrt(num / den) : sqrt(num);
}

void ns_d2f(const double *src, float *dst, size_t count)
{
    for (size_t i = 0; i < count; i++) dst[i] = (float)src[i];
}

void ns_f2d(const float *src, double *dst, size_t count)
{
    for (size_t i = 0; i < count; i++) dst[i] = src[i];
}

/* ---- updates ------------------------------------------------------------------------------ */

void ns_muon_params_default(ns_muon_params *p)
{
    p->lr = 1e-3;
    p->momentum = 0.95;
    p->nesterov = 1;
    p->weight_decay = 0.1;
    p->scale_coef = 0.2;
    p->ns_in_double = 0;
    ns_opts_default(&p->ns);
}

void ns_muon_momentum_f(const float *g, const float *buf_in, float *buf_out, float *u, size_t count, double mu,
                        int nesterov)
{
    for (size_t i = 0; i < count; i++) {
        float b = (float)(mu * buf_in[i] + g[i]);
        buf_out[i] = b;
        u[i] = nesterov ? (float)(g[i] + mu * b) : b;
    }
}

double ns_muon_scale(const ns_muon_params *p, int64_t m, int64_t n)
{
    return p->scale_coef * sqrt((double)(m > n ? m : n));
}

void ns_muon_apply_f(const float *W_in, float *W_out, const float *O, size_t count, double lr, double wd,
                     double scale)
{
    double decay = 1.0 - lr * wd, step = lr * scale;
    for (size_t i = 0; i < count; i++) W_out[i] = (float)(W_in[i] * decay - step * O[i]);
}

int ns_muon_update_f(float *W, float *buf, const float *g, int64_t m, int64_t n,
                     const ns_muon_params *p, dm_err *err)
{
    ns_muon_params def;
    size_t count;
    float *u;
    int rc;

    if (!p) {
        ns_muon_params_default(&def);
        p = &def;
    }
    if (m < 1 || n < 1 || (size_t)m > SIZE_MAX / 8 / (size_t)n)
        return dm_err_set(err, "muon update: bad matrix size %lld x %lld", (long long)m,
                          (long long)n);
    count = (size_t)m * (size_t)n;
    /* buf and W are written only after NS succeeds, so a failure leaves them as they were. */
    u = dm_malloc(2 * count * sizeof *u, err);
    if (!u) return -1;
    float *bnew = u + count;
    ns_muon_momentum_f(g, buf, bnew, u, count, p->momentum, p->nesterov);
    if (p->ns_in_double) {
        double *ud = dm_malloc(count * sizeof *ud, err);
        rc = -1;
        if (ud) {
            ns_f2d(u, ud, count);
            rc = ns_ref_d(ud, ud, m, n, &p->ns, err);
            if (rc == 0) ns_d2f(ud, u, count);
            free(ud);
        }
    } else {
        rc = ns_ref_f(u, u, m, n, &p->ns, err);
    }
    if (rc == 0) {
        memcpy(buf, bnew, count * sizeof *buf);
        ns_muon_apply_f(W, W, u, count, p->lr, p->weight_decay, ns_muon_scale(p, m, n));
    }
    free(u);
    return rc;
}

void ns_adamw_params_default(ns_adamw_params *p)
{
    p->lr = 1e-3;
    p->beta1 = 0.9;
    p->beta2 = 0.95;
    p->eps = 1e-8;
    p->weight_decay = 0.1;
}

int ns_adamw_f(const float *W_in, float *W_out, const float *m1_in, float *m1_out, const float *m2_in, float *m2_out,
               const float *g, size_t count, int64_t t, const ns_adamw_params *p, dm_err *err)
{
    ns_adamw_params def;
    double b1, b2, bc1, bc2, decay;

    if (!p) {
        ns_adamw_params_default(&def);
        p = &def;
    }
    if (t < 1) return dm_err_set(err, "adamw update: step %lld must be >= 1", (long long)t);
    b1 = p->beta1;
    b2 = p->beta2;
    if (!(b1 >= 0 && b1 < 1) || !(b2 >= 0 && b2 < 1))
        return dm_err_set(err, "adamw update: betas (%g, %g) must lie in [0, 1)", b1, b2);
    bc1 = 1.0 - pow(b1, (double)t);
    bc2 = 1.0 - pow(b2, (double)t);
    decay = 1.0 - p->lr * p->weight_decay;
    for (size_t i = 0; i < count; i++) {
        double gi = g[i];
        double a = b1 * m1_in[i] + (1 - b1) * gi;
        double v = b2 * m2_in[i] + (1 - b2) * gi * gi;
        m1_out[i] = (float)a;
        m2_out[i] = (float)v;
        W_out[i] = (float)(W_in[i] * decay - p->lr * (a / bc1) / (sqrt(v / bc2) + p->eps));
    }
    return 0;
}

int ns_adamw_update_f(float *W, float *m1, float *m2, const float *g, size_t count, int64_t t,
                      const ns_adamw_params *p, dm_err *err)
{
    return ns_adamw_f(W, W, m1, m1, m2, m2, g, count, t, p, err);
}

#else /* NS_REF_TEMPLATE: the typed part, T = double or float, SFX(x) = x_d or x_f */

#define NS_VL ((int)(32 / sizeof(T))) /* elements per 32-byte vector */
#define NS_NR (2 * NS_VL)

typedef T SFX(vec) __attribute__((vector_size(32)));

typedef struct SFX(ws) {
    T *pa; /* NS_MC x NS_KC packed block of A */
    T *pb; /* NS_KC x NS_NC packed panel of B */
} SFX(ws);

static int SFX(ws_init)(SFX(ws) *w, dm_err *err)
{
    w->pa = dm_malloc(sizeof(T) * NS_MC * NS_KC, err);
    w->pb = w->pa ? dm_malloc(sizeof(T) * NS_KC * NS_NC, err) : NULL;
    if (!w->pb) {
        free(w->pa);
        w->pa = NULL;
        return -1;
    }
    return 0;
}

static void SFX(ws_free)(SFX(ws) *w)
{
    free(w->pa);
    free(w->pb);
}

/* out[NS_MR][NS_NR] = a-panel (kc x NS_MR, packed by k) times b-panel (kc x NS_NR). */
static inline __attribute__((always_inline)) void
SFX(ukern_body)(int64_t kc, const T *restrict a, const T *restrict b, T *restrict out)
{
    typedef SFX(vec) V;
    V c00 = {0}, c01 = {0}, c10 = {0}, c11 = {0}, c20 = {0}, c21 = {0};
    V c30 = {0}, c31 = {0}, c40 = {0}, c41 = {0}, c50 = {0}, c51 = {0};
    for (int64_t k = 0; k < kc; k++) {
        V b0, b1;
        memcpy(&b0, b, sizeof b0);
        memcpy(&b1, b + NS_VL, sizeof b1);
        c00 += a[0] * b0;
        c01 += a[0] * b1;
        c10 += a[1] * b0;
        c11 += a[1] * b1;
        c20 += a[2] * b0;
        c21 += a[2] * b1;
        c30 += a[3] * b0;
        c31 += a[3] * b1;
        c40 += a[4] * b0;
        c41 += a[4] * b1;
        c50 += a[5] * b0;
        c51 += a[5] * b1;
        a += NS_MR;
        b += NS_NR;
    }
#define NS_STORE_ROW(i, x0, x1)                                                            \
    do {                                                                                   \
        memcpy(out + (i) * NS_NR, &(x0), sizeof(x0));                                      \
        memcpy(out + (i) * NS_NR + NS_VL, &(x1), sizeof(x1));                              \
    } while (0)
    NS_STORE_ROW(0, c00, c01);
    NS_STORE_ROW(1, c10, c11);
    NS_STORE_ROW(2, c20, c21);
    NS_STORE_ROW(3, c30, c31);
    NS_STORE_ROW(4, c40, c41);
    NS_STORE_ROW(5, c50, c51);
#undef NS_STORE_ROW
}

static void SFX(ukern_base)(int64_t kc, const T *restrict a, const T *restrict b,
                            T *restrict out)
{
    SFX(ukern_body)(kc, a, b, out);
}

#if NS_HAVE_AVX2_CLONE
__attribute__((target("avx2,fma"))) static void
SFX(ukern_avx2)(int64_t kc, const T *restrict a, const T *restrict b, T *restrict out)
{
    SFX(ukern_body)(kc, a, b, out);
}
#endif

/* pa[ir*kc + k*MR + r] = A(i0 + ir + r, p0 + k), zero past row mc. */
static void SFX(pack_a)(T *pa, const T *A, int64_t lda, int64_t i0, int64_t mc, int64_t p0,
                        int64_t kc)
{
    for (int64_t ir = 0; ir < mc; ir += NS_MR) {
        T *dst = pa + ir * kc;
        for (int r = 0; r < NS_MR; r++) {
            if (ir + r < mc) {
                const T *src = A + (i0 + ir + r) * lda + p0;
                for (int64_t k = 0; k < kc; k++) dst[k * NS_MR + r] = src[k];
            } else {
                for (int64_t k = 0; k < kc; k++) dst[k * NS_MR + r] = 0;
            }
        }
    }
}

/* pb[jr*kc + k*NR + j] = B(p0 + k, j0 + jr + j) (B stored K x N, or N x K when transB),
 * zero past column nc. */
static void SFX(pack_b)(T *pb, const T *B, int64_t ldb, int transB, int64_t p0, int64_t kc,
                        int64_t j0, int64_t nc)
{
    for (int64_t jr = 0; jr < nc; jr += NS_NR) {
        T *dst = pb + jr * kc;
        int64_t nr = min64(NS_NR, nc - jr);
        if (transB) {
            for (int j = 0; j < NS_NR; j++) {
                if (j < nr) {
                    const T *src = B + (j0 + jr + j) * ldb + p0;
                    for (int64_t k = 0; k < kc; k++) dst[k * NS_NR + j] = src[k];
                } else {
                    for (int64_t k = 0; k < kc; k++) dst[k * NS_NR + j] = 0;
                }
            }
        } else {
            for (int64_t k = 0; k < kc; k++) {
                const T *src = B + (p0 + k) * ldb + j0 + jr;
                int j = 0;
                for (; j < nr; j++) dst[k * NS_NR + j] = src[j];
                for (; j < NS_NR; j++) dst[k * NS_NR + j] = 0;
            }
        }
    }
}

/* C = alpha A op(B) + beta C, A M x K, op(B) K x N (B itself N x K when transB).
 * upper (M == N, result symmetric): only tiles touching the upper triangle are computed and
 * the lower triangle is then copied from the upper one. */
static void SFX(gemm)(int64_t M, int64_t N, int64_t K, T alpha, const T *A, int64_t lda,
                      const T *B, int64_t ldb, int transB, T beta, T *C, int64_t ldc,
                      int upper, SFX(ws) *w)
{
    void (*ukern)(int64_t, const T *restrict, const T *restrict, T *restrict) =
        SFX(ukern_base);
    T tile[NS_MR * 2 * NS_VL];

#if NS_HAVE_AVX2_CLONE
    if (ns_avx2_ok()) ukern = SFX(ukern_avx2);
#endif
    if (beta != 1) {
        for (int64_t i = 0; i < M; i++)
            for (int64_t j = 0; j < N; j++) C[i * ldc + j] = beta == 0 ? 0 : beta * C[i * ldc + j];
    }
    for (int64_t jc = 0; jc < N; jc += NS_NC) {
        int64_t nc = min64(NS_NC, N - jc);
        for (int64_t pc = 0; pc < K; pc += NS_KC) {
            int64_t kc = min64(NS_KC, K - pc);
            SFX(pack_b)(w->pb, B, ldb, transB, pc, kc, jc, nc);
            for (int64_t ic = 0; ic < M; ic += NS_MC) {
                int64_t mc = min64(NS_MC, M - ic);
                if (upper && ic > jc + nc - 1) continue;
                SFX(pack_a)(w->pa, A, lda, ic, mc, pc, kc);
                for (int64_t jr = 0; jr < nc; jr += NS_NR) {
                    int64_t nr = min64(NS_NR, nc - jr);
                    for (int64_t ir = 0; ir < mc; ir += NS_MR) {
                        int64_t mr = min64(NS_MR, mc - ir);
                        int64_t i0 = ic + ir, j0 = jc + jr;
                        if (upper && i0 > j0 + nr - 1) continue;
                        ukern(kc, w->pa + ir * kc, w->pb + jr * kc, tile);
                        for (int64_t i = 0; i < mr; i++) {
                            T *c = C + (i0 + i) * ldc + j0;
                            const T *t = tile + i * NS_NR;
                            for (int64_t j = 0; j < nr; j++) c[j] += alpha * t[j];
                        }
                    }
                }
            }
        }
    }
    if (upper)
        for (int64_t i = 1; i < M; i++)
            for (int64_t j = 0; j < i; j++) C[i * ldc + j] = C[j * ldc + i];
}

/* X = (r x l) with r <= l; direct NS in place, Y (r x l), A, B (r x r) scratch. */
static void SFX(ns_direct)(T **Xp, T **Yp, T *A, T *B, int64_t r, int64_t l,
                           const ns_coeffs *c, SFX(ws) *w)
{
    T *X = *Xp, *Y = *Yp;
    size_t rr = (size_t)r * (size_t)r, rl = (size_t)r * (size_t)l;
    for (int k = 0; k < c->n; k++) {
        T a = (T)c->a[k], b = (T)c->b[k], cc = (T)c->c[k];
        SFX(gemm)(r, r, l, 1, X, l, X, l, 1, 0, A, r, 1, w);          /* A = X X^T */
        for (size_t i = 0; i < rr; i++) B[i] = b * A[i];
        SFX(gemm)(r, r, r, cc, A, r, A, r, 0, 1, B, r, 1, w);         /* B += c A A */
        for (size_t i = 0; i < rl; i++) Y[i] = a * X[i];
        SFX(gemm)(r, l, r, 1, B, r, X, l, 0, 1, Y, l, 0, w);          /* Y = a X + B X */
        T *t = X;
        X = Y;
        Y = t;
    }
    *Xp = X;
    *Yp = Y;
}

/* Gram NS on X (r x l, r <= l) in place; Y (r x l) and R, S, P, Q, Z (r x r) scratch. */
static void SFX(ns_gram)(T **Xp, T **Yp, T *R, T *S, T *P, T *Q, T *Z, int64_t r, int64_t l,
                         const ns_coeffs *c, uint32_t restarts, SFX(ws) *w)
{
    T *X = *Xp, *Y = *Yp;
    size_t rr = (size_t)r * (size_t)r;
    int have_q = 0;

    if (c->n == 0) return;
    SFX(gemm)(r, r, l, 1, X, l, X, l, 1, 0, R, r, 1, w);              /* R = X X^T */
    for (int k = 0; k < c->n; k++) {
        T a = (T)c->a[k], b = (T)c->b[k], cc = (T)c->c[k];
        if (have_q && ns_restart_before(restarts, k)) {
            SFX(gemm)(r, l, r, 1, Q, r, X, l, 0, 0, Y, l, 0, w);      /* X = Q X */
            T *t = X;
            X = Y;
            Y = t;
            SFX(gemm)(r, r, l, 1, X, l, X, l, 1, 0, R, r, 1, w);      /* R = X X^T */
            have_q = 0;
        }
        SFX(gemm)(r, r, r, 1, R, r, R, r, 0, 0, S, r, 1, w);          /* S = R R */
        for (size_t i = 0; i < rr; i++) P[i] = b * R[i] + cc * S[i];
        for (int64_t i = 0; i < r; i++) P[i * r + i] += a;             /* P = aI + bR + cRR */
        if (!have_q) {
            memcpy(Q, P, rr * sizeof *Q);
            have_q = 1;
        } else {
            SFX(gemm)(r, r, r, 1, P, r, Q, r, 0, 0, Z, r, 0, w);      /* Q = P Q */
            memcpy(Q, Z, rr * sizeof *Q);
        }
        if (k + 1 < c->n && !ns_restart_before(restarts, k + 1)) {
            SFX(gemm)(r, r, r, 1, R, r, P, r, 0, 0, Z, r, 0, w);      /* Z = R P */
            SFX(gemm)(r, r, r, 1, P, r, Z, r, 0, 0, R, r, 1, w);      /* R = P R P */
        }
    }
    SFX(gemm)(r, l, r, 1, Q, r, X, l, 0, 0, Y, l, 0, w);              /* X = Q X */
    *Xp = Y;
    *Yp = X;
}

int SFX(ns_ref)(const T *G, T *O, int64_t m, int64_t n, const ns_opts *o_in, dm_err *err)
{
    ns_opts o;
    ns_coeffs dflt;
    const ns_coeffs *c;
    SFX(ws) w = {NULL, NULL};
    T *buf = NULL, *X, *Y, *M[5];
    int64_t r, l;
    int tr, nm;
    size_t rl, rr, total;
    double norm = 0, scale;

    if (ns_check_args(m, n, o_in, &o, &dflt, &c, err)) return -1;
    tr = m > n;
    r = tr ? n : m;
    l = tr ? m : n;
    rl = (size_t)r * (size_t)l;
    rr = (size_t)r * (size_t)r;
    nm = o.algo == DM_NS_GRAM ? 5 : 2;
    total = 2 * rl + (size_t)nm * rr;
    buf = dm_malloc(total * sizeof(T), err);
    if (!buf) goto fail;
    if (SFX(ws_init)(&w, err)) goto fail;
    X = buf;
    Y = buf + rl;
    for (int i = 0; i < nm; i++) M[i] = buf + 2 * rl + (size_t)i * rr;

    for (size_t i = 0; i < rl; i++) norm += (double)G[i] * (double)G[i];
    scale = 1.0 / (sqrt(norm) + o.eps);
    if (tr) {
        for (int64_t i = 0; i < m; i++)
            for (int64_t j = 0; j < n; j++) X[j * m + i] = (T)(G[i * n + j] * scale);
    } else {
        for (size_t i = 0; i < rl; i++) X[i] = (T)(G[i] * scale);
    }

    if (o.algo == DM_NS_DIRECT)
        SFX(ns_direct)(&X, &Y, M[0], M[1], r, l, c, &w);
    else
        SFX(ns_gram)(&X, &Y, M[0], M[1], M[2], M[3], M[4], r, l, c, o.restarts, &w);

    if (tr) {
        for (int64_t i = 0; i < m; i++)
            for (int64_t j = 0; j < n; j++) O[i * n + j] = X[j * m + i];
    } else {
        memcpy(O, X, rl * sizeof(T));
    }
    SFX(ws_free)(&w);
    free(buf);
    return 0;
fail:
    SFX(ws_free)(&w);
    free(buf);
    return -1;
}

/* The NS of one matrix split by rows over ranks (ns_ref.h: ns_split_gram, ns_split_step). */
int SFX(ns_split_gram)(const T *S, int64_t rows, int64_t n, T *H, dm_err *err)
{
    SFX(ws) w = {NULL, NULL};
    if (rows < 1 || n < 1)
        return dm_err_set(err, "ns_split_gram: slice %lld x %lld: both must be >= 1", (long long)rows, (long long)n);
    T *Xt = dm_malloc((size_t)rows * (size_t)n * sizeof(T), err);
    if (!Xt || SFX(ws_init)(&w, err)) {
        free(Xt);
        return -1;
    }
    for (int64_t i = 0; i < rows; i++) /* X = S^T (n x rows): ns_direct's orientation */
        for (int64_t j = 0; j < n; j++) Xt[j * rows + i] = S[i * n + j];
    SFX(gemm)(n, n, rows, 1, Xt, rows, Xt, rows, 1, 0, H, n, 1, &w); /* H = X X^T = S^T S */
    SFX(ws_free)(&w);
    free(Xt);
    return 0;
}

int SFX(ns_split_step)(T *S, int64_t rows, int64_t n, T *H, int k, const ns_opts *o_in, dm_err *err)
{
    ns_opts o;
    ns_coeffs dflt;
    const ns_coeffs *c;
    SFX(ws) w = {NULL, NULL};
    if (ns_check_args(rows, n, o_in, &o, &dflt, &c, err)) return -1;
    if (k < 0 || k >= c->n)
        return dm_err_set(err, "ns_split_step: iteration %d of %d", k, c->n);
    size_t nn = (size_t)n * (size_t)n, rl = (size_t)rows * (size_t)n;
    if (k == 0) { /* ||G||_F^2 = trace(G^T G): the sum of the slices' Gram diagonals */
        double tr = 0;
        for (int64_t i = 0; i < n; i++) tr += (double)H[i * n + i];
        double scale = 1.0 / (sqrt(tr > 0 ? tr : 0) + o.eps);
        for (size_t i = 0; i < rl; i++) S[i] = (T)(S[i] * scale);
        for (size_t i = 0; i < nn; i++) H[i] = (T)(H[i] * scale * scale);
    }
    T *Y = dm_malloc(2 * rl * sizeof(T), err), *Z = Y ? Y + rl : NULL;
    if (!Y || SFX(ws_init)(&w, err)) {
        free(Y);
        return -1;
    }
    T a = (T)c->a[k], b = (T)c->b[k], cc = (T)c->c[k];
    SFX(gemm)(rows, n, n, 1, S, n, H, n, 1, 0, Y, n, 0, &w); /* Y = S H (H symmetric) */
    SFX(gemm)(rows, n, n, 1, Y, n, H, n, 1, 0, Z, n, 0, &w); /* Z = S H H */
    for (size_t i = 0; i < rl; i++) S[i] = a * S[i] + b * Y[i] + cc * Z[i];
    SFX(ws_free)(&w);
    free(Y);
    return 0;
}

#undef NS_VL
#undef NS_NR

#endif /* NS_REF_TEMPLATE */
