/* wk_ref.c: the work kernels on the CPU in float (wk_ref.h): products through CBLAS, the
 * elementwise kernels and reductions in token order, and the counter hash of the proxy data. */
#include "config.h"

#include "wk_ref.h"

#include "wk_hash.h"

#include <gsl/gsl_cblas.h>
#include <math.h>
#include <string.h>

uint64_t wk_mix64(uint64_t z) { return wk_mix64_(z); }

uint64_t wk_hash_kind(uint64_t seed, int kind) { return wk_mix64(seed ^ wk_mix64((uint64_t)kind * 0x100000001b3ull)); }
uint64_t wk_hash_param(uint64_t hk, int64_t param) { return wk_mix64(hk ^ (uint64_t)param); }
uint64_t wk_hash_prefix(uint64_t seed, int kind, int64_t param) { return wk_hash_param(wk_hash_kind(seed, kind), param); }

uint32_t wk_hash_row(uint64_t prefix, int64_t a) { return wk_row_(prefix, a); }
float wk_hash_col(uint32_t row, int64_t b) { return wk_col_(row, b); }
float wk_hash_finish(uint64_t prefix, int64_t a, int64_t b) { return wk_hash_col(wk_hash_row(prefix, a), b); }

float wk_hash_uniform(uint64_t seed, int kind, int64_t param, int64_t a, int64_t b)
{
    return wk_hash_finish(wk_hash_prefix(seed, kind, param), a, b);
}

int32_t wk_token_id(uint64_t seed, int64_t param, int64_t global_token, int64_t rows)
{
    double u = 0.5 * ((double)wk_hash_uniform(seed, WK_H_TOKEN, param, global_token, 0) + 1.0);
    int64_t id = (int64_t)(u * (double)rows);
    return (int32_t)(id < 0 ? 0 : id >= rows ? rows - 1 : id);
}

int wk_form_of(dm_kern_op op)
{
    switch (op) {
    case DM_KOP_FWD:
    case DM_KOP_ATTN_SCORE:
    case DM_KOP_ATTN_DSCORE: return WK_NT;
    case DM_KOP_DGRAD:
    case DM_KOP_ATTN_VALUE:
    case DM_KOP_ATTN_DQUERY: return WK_NN;
    case DM_KOP_WGRAD:
    case DM_KOP_ATTN_DVALUE:
    case DM_KOP_ATTN_DKEY: return WK_TN;
    default: return -1;
    }
}

static void gemm(wk_form f, int64_t m, int64_t n, int64_t k, float alpha, const float *A, const float *B, float beta,
                 float *C)
{
    if (f == WK_NT)
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)m, (int)n, (int)k, alpha, A, (int)k, B, (int)k, beta,
                    C, (int)n);
    else if (f == WK_NN)
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)m, (int)n, (int)k, alpha, A, (int)k, B, (int)n,
                    beta, C, (int)n);
    else
        cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, (int)m, (int)n, (int)k, alpha, A, (int)m, B, (int)n, beta,
                    C, (int)n);
}

void wk_ref_gemm(wk_form f, int64_t m, int64_t n, int64_t k, float alpha, const float *A, const float *B, float *C)
{
    gemm(f, m, n, k, alpha, A, B, 0.0f, C);
}

void wk_ref_gemm_acc(wk_form f, int64_t m, int64_t n, int64_t k, float alpha, const float *A, const float *B, float *C)
{
    gemm(f, m, n, k, alpha, A, B, 1.0f, C);
}

double wk_ref_loss(float *R, int64_t rows, int64_t n, uint64_t seed, int64_t param, int64_t row0, double scale)
{
    uint64_t h = wk_hash_prefix(seed, WK_H_TARGET, param);
    double acc = 0;
    for (int64_t r = 0; r < rows; r++) {
        uint32_t hr = wk_hash_row(h, row0 + r);
        for (int64_t c = 0; c < n; c++) {
            float v = R[r * n + c] - wk_hash_col(hr, c);
            R[r * n + c] = v;
            acc += (double)v * v;
        }
    }
    return acc * scale;
}

double wk_ref_vector(const float *x, const float *w, float *R, int64_t rows, int64_t n, uint64_t seed,
                     int64_t param, int64_t row0, double scale)
{
    for (int64_t t = 0; t < rows; t++)
        for (int64_t c = 0; c < n; c++) R[t * n + c] = x[t * n + c] * w[c];
    return wk_ref_loss(R, rows, n, seed, param, row0, scale);
}

void wk_ref_vector_bwd(const float *R, const float *x, const float *w, float *g, float *dx, int64_t t0, int64_t t1,
                       int64_t n, float scale)
{
    wk_ref_table_bwd(R, x, w, g, dx, t0, t1, n, 1, 1, scale);
}

static int64_t pos_of(int64_t t, int64_t period, int64_t positions) { return (t % period) % positions; }

double wk_ref_table(const float *x, const float *W, float *R, int64_t rows, int64_t n, int64_t period,
                    int64_t positions, uint64_t seed, int64_t param, int64_t row0, double scale)
{
    for (int64_t t = 0; t < rows; t++) {
        const float *wp = W + pos_of(t, period, positions) * n;
        for (int64_t c = 0; c < n; c++) R[t * n + c] = x[t * n + c] * wp[c];
    }
    return wk_ref_loss(R, rows, n, seed, param, row0, scale);
}

void wk_ref_table_bwd(const float *R, const float *x, const float *W, float *G, float *dx, int64_t t0, int64_t t1,
                      int64_t n, int64_t period, int64_t positions, float scale)
{
    int64_t np = positions < period ? positions : period;
    /* each element's sum in token order, then scaled: what the GPU's grouped reduction sums */
    memset(G, 0, (size_t)(positions * n) * sizeof *G);
    for (int64_t t = t0; t < t1; t++) {
        int64_t p = pos_of(t, period, positions);
        for (int64_t c = 0; c < n; c++) G[p * n + c] += R[t * n + c] * x[t * n + c];
    }
    for (int64_t e = 0; e < np * n; e++) G[e] *= scale;
    if (dx)
        for (int64_t t = t0; t < t1; t++) {
            const float *wp = W + pos_of(t, period, positions) * n;
            for (int64_t c = 0; c < n; c++) dx[t * n + c] = R[t * n + c] * wp[c];
        }
}

void wk_ref_embed(const float *E, const int32_t *id, float *R, int64_t rows, int64_t n)
{
    for (int64_t t = 0; t < rows; t++) memcpy(R + t * n, E + (int64_t)id[t] * n, (size_t)n * sizeof *R);
}

void wk_ref_embed_bwd(const float *R, const int32_t *id, float *G, int64_t t0, int64_t t1, int64_t n, float scale)
{
    for (int64_t t = t0; t < t1; t++) {
        float *g = G + (int64_t)id[t] * n;
        for (int64_t c = 0; c < n; c++) g[c] += scale * R[t * n + c];
    }
}

void wk_ref_route(const float *X, const int32_t *src, float *D, int64_t rows, int64_t n)
{
    for (int64_t q = 0; q < rows; q++) {
        if (src[q] >= 0) memcpy(D + q * n, X + (int64_t)src[q] * n, (size_t)n * sizeof *D);
        else memset(D + q * n, 0, (size_t)n * sizeof *D);
    }
}

void wk_ref_route_bwd(const float *dD, const int32_t *inv, float *dX, int64_t tokens, int64_t top_k, int64_t n)
{
    for (int64_t t = 0; t < tokens; t++) {
        float *d = dX + t * n;
        memset(d, 0, (size_t)n * sizeof *d);
        for (int64_t k = 0; k < top_k; k++) {
            int32_t q = inv[t * top_k + k];
            if (q < 0) continue;
            for (int64_t c = 0; c < n; c++) d[c] += dD[(int64_t)q * n + c];
        }
    }
}

/* ---- the layer passes ---------------------------------------------------------------------- */

float wk_gelu(float x) { return 0.5f * x * (1.0f + tanhf(0.7978845608f * (x + 0.044715f * x * x * x))); }

float wk_gelu_grad(float x)
{
    float t = tanhf(0.7978845608f * (x + 0.044715f * x * x * x));
    return 0.5f * (1.0f + t) + 0.5f * x * (1.0f - t * t) * 0.7978845608f * (1.0f + 3.0f * 0.044715f * x * x);
}

float wk_silu(float x) { return x / (1.0f + expf(-x)); }

float wk_silu_grad(float x)
{
    float s = 1.0f / (1.0f + expf(-x));
    return s * (1.0f + x * (1.0f - s));
}

void wk_ref_act(const float *A, int64_t ld, float *E, int64_t rows, int64_t n)
{
    for (int64_t r = 0; r < rows; r++)
        for (int64_t c = 0; c < n; c++) E[r * n + c] = wk_gelu(A[r * ld + c]);
}

void wk_ref_act_bwd(const float *A, int64_t ld, const float *dH, float *E, int64_t rows, int64_t n)
{
    for (int64_t r = 0; r < rows; r++)
        for (int64_t c = 0; c < n; c++) E[r * n + c] = dH[r * n + c] * wk_gelu_grad(A[r * ld + c]);
}

void wk_ref_glu(const float *G, const float *U, int64_t ld, float *E, int64_t rows, int64_t n)
{
    for (int64_t r = 0; r < rows; r++)
        for (int64_t c = 0; c < n; c++) E[r * n + c] = wk_silu(G[r * ld + c]) * U[r * ld + c];
}

void wk_ref_glu_bwd(const float *G, const float *U, int64_t ld, const float *dH, float *dG, float *dU, int64_t rows,
                    int64_t n)
{
    for (int64_t r = 0; r < rows; r++)
        for (int64_t c = 0; c < n; c++) {
            float g = G[r * ld + c], u = U[r * ld + c], dh = dH[r * n + c];
            dG[r * n + c] = dh * u * wk_silu_grad(g);
            dU[r * n + c] = dh * wk_silu(g);
        }
}

void wk_ref_rope(float *E, int64_t rows, int64_t n, int64_t d, int inverse)
{
    int64_t half = d >= 2 ? d / 2 : 1;
    for (int64_t r = 0; r < rows; r++)
        for (int64_t i = 0; 2 * i + 1 < n; i++) {
            float f = expf(-(float)(i % half) * (9.210340372f / (float)half)); /* 10000^(-j / half) */
            float a = (float)r * f, cs = cosf(a), sn = inverse ? -sinf(a) : sinf(a);
            float x = E[r * n + 2 * i], y = E[r * n + 2 * i + 1];
            E[r * n + 2 * i] = x * cs - y * sn;
            E[r * n + 2 * i + 1] = x * sn + y * cs;
        }
}

void wk_ref_add(const float *X, const float *Y, float *E, int64_t elems)
{
    for (int64_t i = 0; i < elems; i++) E[i] = X[i] + Y[i];
}

float wk_softmax_scale(int64_t hd) { return hd > 0 ? (float)(1.0 / sqrt((double)hd)) : 1.0f; }

void wk_ref_softmax(float *S, int64_t rows, int64_t n, float a)
{
    for (int64_t r = 0; r < rows; r++) {
        float *s = S + r * n, mx = -INFINITY;
        for (int64_t c = 0; c < n; c++) mx = fmaxf(mx, a * s[c]);
        double sum = 0;
        for (int64_t c = 0; c < n; c++) sum += (s[c] = expf(a * s[c] - mx));
        float inv = (float)(1.0 / sum);
        for (int64_t c = 0; c < n; c++) s[c] *= inv;
    }
}

void wk_ref_softmax_bwd(const float *P, float *dP, int64_t rows, int64_t n)
{
    for (int64_t r = 0; r < rows; r++) {
        const float *p = P + r * n;
        float *d = dP + r * n;
        double dot = 0;
        for (int64_t c = 0; c < n; c++) dot += (double)p[c] * d[c];
        for (int64_t c = 0; c < n; c++) d[c] = p[c] * (d[c] - (float)dot);
    }
}

int64_t wk_ws_floats(int64_t count, int64_t rows, int64_t n, int64_t period, int64_t positions)
{
    if (period < 1) period = 1;
    if (positions < 1) positions = 1;
    int64_t np = positions < period ? positions : period;
    int64_t cnt0 = (period + positions - 1) / positions, samples = (rows + period - 1) / period;
    int64_t ng = (samples * cnt0 + WK_GROUP - 1) / WK_GROUP;
    return count * (ng < 1 ? 1 : ng) * np * n;
}

int64_t wk_attn_entries(const wk_attn_geom *g) { return dm_attn_geom_entries(g); }

/* Rows of a window's queries and keys in the operand buffers. */
static int64_t rows_q(const wk_attn_geom *g)
{
    int64_t q, k;
    dm_attn_geom_rows(g, &q, &k);
    return q;
}
static int64_t rows_k(const wk_attn_geom *g)
{
    int64_t q, k;
    dm_attn_geom_rows(g, &q, &k);
    return k;
}

void wk_attn_sizes(const wk_attn_geom *g, int64_t size[WK_A__N])
{
    dm_attn_geom_elems(g, &size[WK_AQ], &size[WK_AK], &size[WK_AV], &size[WK_ADO], &size[WK_AS], &size[WK_AOUT]);
    size[WK_ADS] = size[WK_AS];
}

int wk_attn_strided(const wk_attn_geom *g)
{
    return g->kv_heads == g->heads && g->kv_win == g->win && (g->rects <= 1 || rows_q(g) == g->rects * g->step);
}

void wk_attn_entry(const wk_attn_geom *g, dm_kern_op op, int64_t x, int which[3], int64_t off[3])
{
    /* entry x: product r of window-head e; its query rows start at qr, its key rows at kr */
    int64_t rects = g->rects > 1 ? g->rects : 1, e = x / rects, r = x % rects;
    int64_t qr = r * g->step + g->qoff, kr = r * g->step, rq = rows_q(g), rk = rows_k(g);
    int64_t group = g->kv_heads > 0 ? g->heads / g->kv_heads : 1, wpk = g->kv_win > 0 ? g->win / g->kv_win : 1;
    int64_t w = e / g->heads, h = e % g->heads, kv = (w / wpk) * g->kv_heads + h / (group > 0 ? group : 1);
    /* rows: q the queries (and the query-side outputs O, dQ), k the keys, ko the key-side outputs
     * dV, dK (per query head: the output buffer is cost only; each rectangle's own rows when the
     * rectangles' keys overlap) */
    int64_t q = e * rq + qr, k = kv * rk + kr;
    int64_t ko = dm_attn_geom_key_overlap(g) ? (e * rects + r) * g->lk : e * rk + kr;
    int64_t ss = x * g->lq * g->lk;
    int a, b, c;
    int64_t oa, ob, oc;
    switch (op) {
    case DM_KOP_ATTN_SCORE: a = WK_AQ, oa = q * g->hd, b = WK_AK, ob = k * g->hd, c = WK_AS, oc = ss; break;
    case DM_KOP_ATTN_VALUE: a = WK_AS, oa = ss, b = WK_AV, ob = k * g->vd, c = WK_AOUT, oc = q * g->vd; break;
    case DM_KOP_ATTN_DVALUE: a = WK_AS, oa = ss, b = WK_ADO, ob = q * g->vd, c = WK_AOUT, oc = ko * g->vd; break;
    case DM_KOP_ATTN_DSCORE: a = WK_ADO, oa = q * g->vd, b = WK_AV, ob = k * g->vd, c = WK_ADS, oc = ss; break;
    case DM_KOP_ATTN_DQUERY: a = WK_ADS, oa = ss, b = WK_AK, ob = k * g->hd, c = WK_AOUT, oc = q * g->hd; break;
    default: a = WK_ADS, oa = ss, b = WK_AQ, ob = q * g->hd, c = WK_AOUT, oc = ko * g->hd; break; /* dkey */
    }
    which[0] = a, which[1] = b, which[2] = c;
    off[0] = oa, off[1] = ob, off[2] = oc;
}
