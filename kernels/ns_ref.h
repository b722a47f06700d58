/* ns_ref.h: reference Muon math on the CPU -- Newton-Schulz (NS) orthogonalization, direct and
 * Gram variants, in double and float, plus the Muon and AdamW parameter updates.
 *
 * This is the independent reference every GPU kernel is checked against (STYLE habit 16) and
 * the math of the CPU backend of the real executor. It is plain C with simple blocked loops:
 * 1024x4096 in double takes a few seconds on one core.
 *
 * Conventions: matrices are row-major, m rows x n columns, leading dimension n. Sizes are in
 * elements. Functions that can fail return 0 or -1 and fill *err (err may be NULL); input
 * pointers are borrowed and never kept. All NS functions accept an output that aliases the
 * input.
 *
 * The NS math. With X0 = G / (||G||_F + eps) (on G^T when m > n, so X is short and wide) and
 * coefficient triples (a_k, b_k, c_k), k = 0..iters-1:
 *   direct:  A = X X^T,  B = b_k A + c_k A A,  X <- a_k X + B X.
 *   Gram:    iterate on R = X X^T (min(m,n) square): P = a_k I + b_k R + c_k R R, Q <- P Q,
 *            R <- P R P; at a restart and at the end X <- Q X (and R = X X^T, Q = I after a
 *            restart). Same result as direct in exact arithmetic, fewer FLOPs when the matrix
 *            is far from square; restarts bound the rounding error that builds up in R.
 * Each singular value s of X0 is mapped by the scalar composition
 *   f(s) = p_{iters-1}(...p_0(s)), p_k(x) = a_k x + b_k x^3 + c_k x^5,
 * so the result is U diag(f(s)) V^T for G = U diag(s) V^T. */
#ifndef DM_NS_REF_H
#define DM_NS_REF_H
#include <stddef.h>
#include <stdint.h>

#include "dm_error.h"
#include "program.h" /* dm_ns_algo, dm_dtype */

/* ---- coefficient sets ------------------------------------------------------------------- */

#define NS_MAX_ITERS 16

/* One (a, b, c) triple per iteration; n iterations (0 <= n <= NS_MAX_ITERS). A plain value. */
typedef struct ns_coeffs {
    int n;
    double a[NS_MAX_ITERS], b[NS_MAX_ITERS], c[NS_MAX_ITERS];
} ns_coeffs;

/* Keller Jordan's quintic (3.4445, -4.7750, 2.0315), 5 iterations. It maps normalized singular
 * values in [0.01, 1] into about [0.68, 1.13] (not to 1: it trades accuracy for speed). */
void ns_coeffs_jordan(ns_coeffs *c);

/* The five degree-5 Polar Express steps (Amsel, Persson, Musco, Gower 2025, arXiv:2505.16932,
 * designed for singular values in [1e-3, 1]), each divided by the safety factor s as
 * (a/s, b/s^3, c/s^5), i.e. p(x/s): it keeps rounding from pushing values past the interval
 * the polynomials were designed for. NS_PE_SAFETY_DEFAULT = 1.05. With 1.05, normalized
 * singular values in [0.01, 1] map into [0.846, 1.124] ([0.729, 1.124] from 1e-3): tighter than
 * Jordan's, not equal to 1 (five steps leave about 12%). -1 if s is not in [1, 2]. */
#define NS_PE_SAFETY_DEFAULT 1.05
int ns_coeffs_polar_express(ns_coeffs *c, double safety, dm_err *err);

/* The default set, everywhere a set is not given: the CPU reference (ns_opts coeffs NULL), the
 * GPU plans (ns_config_default), both executor backends and `dmuon run --ns-coeffs`: Polar
 * Express with safety NS_PE_SAFETY_DEFAULT, DM_NS_ITERS_DEFAULT (5) iterations, the set the
 * kernels were tuned and checked with. NS_COEFFS_DEFAULT_SPEC is its ns_coeffs_from_spec name. */
#define NS_COEFFS_DEFAULT_SPEC "polar-express"
void ns_coeffs_default(ns_coeffs *c);

/* Parse "a,b,c;a,b,c;..." (one triple per iteration, spaces allowed, at most NS_MAX_ITERS).
 * origin names the text in error messages ("--ns-coeffs", a file name; NULL: "coefficients"):
 * "ORIGIN:1:COL: expected ...". On error *c is left unchanged. */
int ns_coeffs_parse(const char *text, const char *origin, ns_coeffs *c, dm_err *err);

/* A set by name, for command lines: "jordan", "polar-express" (safety 1.05),
 * "polar-express:S" (safety S), or else a triple list as for ns_coeffs_parse. */
int ns_coeffs_from_spec(const char *spec, const char *origin, ns_coeffs *c, dm_err *err);

/* ---- NS --------------------------------------------------------------------------------- */

/* The algorithm is program.h's dm_ns_algo (DM_NS_DIRECT, DM_NS_GRAM; dm_ns_algo_name and
 * dm_ns_algo_parse there), and so are the Gram restarts (DM_NS_RESTART_BIT: bit k set = restart
 * before iteration k; the default restarts once, before iteration 2). */
#define NS_RESTART_BIT(k) DM_NS_RESTART_BIT(k)
#define NS_RESTARTS_DEFAULT DM_NS_RESTARTS_DEFAULT

typedef struct ns_opts {
    dm_ns_algo algo;            /* default DM_NS_DIRECT */
    const ns_coeffs *coeffs; /* borrowed; NULL means ns_coeffs_default */
    uint32_t restarts;       /* Gram only; default NS_RESTARTS_DEFAULT */
    double eps;              /* X0 = G / (||G||_F + eps); default 1e-7 */
} ns_opts;

void ns_opts_default(ns_opts *o);

/* O = NS(G), G and O m x n (O may be G). o may be NULL (defaults). The double version is the
 * reference; the float version runs the same loops in float (the norm in double) and is what
 * the Muon update uses. -1 on bad sizes (m, n < 1) or out of memory. */
int ns_ref_d(const double *G, double *O, int64_t m, int64_t n, const ns_opts *o, dm_err *err);
int ns_ref_f(const float *G, float *O, int64_t m, int64_t n, const ns_opts *o, dm_err *err);

/* The NS of one matrix split by rows over P ranks (dmuon's --ns-split; program.h: an NS op with
 * parts > 1): for an m x n matrix with m >= n (tall or square, so that n is its short side), rank j
 * holds rows slice S_j (rows_j x n) of G. Direct NS on X = G^T runs as, per iteration k:
 *   gram:  H_j = S_j^T S_j (n x n), summed over the ranks (an all-reduce): H = G^T G, scaled;
 *   step:  (k = 0: s = 1 / (sqrt(trace H) + eps), the Frobenius norm from the summed Gram:
 *          S_j *= s, H *= s^2), Y = S_j H, Z = Y H, S_j <- a_k S_j + b_k Y + c_k Z
 *          (= a S_j + S_j (b H + c H H) without the n^3 product H H: every product of a step
 *          has the slice's rows, so a rank's work is 1/P of the whole's).
 * The slices stacked are ns_ref's direct result (m > n: on G^T, as ns_ref transposes) up to
 * rounding: the Gram is summed in another order and the norm comes from its trace.
 * ns_split_gram writes H_j (n x n); ns_split_step updates S and H in place (H: the summed Gram
 * of iteration k). -1 on bad sizes, k outside the coefficient set, or out of memory. */
int ns_split_gram_d(const double *S, int64_t rows, int64_t n, double *H, dm_err *err);
int ns_split_gram_f(const float *S, int64_t rows, int64_t n, float *H, dm_err *err);
int ns_split_step_d(double *S, int64_t rows, int64_t n, double *H, int k, const ns_opts *o, dm_err *err);
int ns_split_step_f(float *S, int64_t rows, int64_t n, float *H, int k, const ns_opts *o, dm_err *err);

/* The scalar map f(s) above, for one normalized singular value s: what NS does to it. */
double ns_scalar_map(const ns_coeffs *c, double s);

/* FLOPs of one NS on an m x n matrix: program.h's dm_ns_flops_ex (the one formula).
 * ns_ref_flops uses the default restarts and symmetric = 0. iters = 0 gives 0. */
double ns_ref_flops(int64_t m, int64_t n, int iters, dm_ns_algo algo);
double ns_ref_flops_ex(int64_t m, int64_t n, int iters, dm_ns_algo algo, uint32_t restarts,
                       int symmetric);

/* ||got - want||_F / ||want||_F over count elements (||got - want||_F when want is all zero),
 * accumulated in double. */
double ns_rel_fro_err_d(const double *got, const double *want, size_t count);
double ns_rel_fro_err_fd(const float *got, const double *want, size_t count);

void ns_d2f(const double *src, float *dst, size_t count);
void ns_f2d(const float *src, double *dst, size_t count);

/* ---- parameter updates (float master weights) ------------------------------------------- */

/* Muon for one m x n matrix W with momentum buffer buf (both m x n, updated in place):
 *   buf = mu buf + g;  u = g + mu buf (nesterov) or buf;  O = NS(u);
 *   W *= 1 - lr wd;  W -= lr * scale * O,  scale = scale_coef * sqrt(max(m, n)).
 * With scale_coef 0.2 the update's RMS matches AdamW's (about 0.2), so lr and wd are on
 * AdamW's scale (Moonlight's convention). Elementwise math in double, stored as float. */
typedef struct ns_muon_params {
    double lr;           /* default 1e-3 */
    double momentum;     /* mu; default 0.95 */
    int nesterov;        /* default 1 */
    double weight_decay; /* decoupled; default 0.1 */
    double scale_coef;   /* default 0.2 */
    int ns_in_double;    /* 1: ns_ref_d on the (float) input, rounded back; 0: ns_ref_f */
    ns_opts ns;          /* default ns_opts_default() */
} ns_muon_params;

void ns_muon_params_default(ns_muon_params *p);
int ns_muon_update_f(float *W, float *buf, const float *g, int64_t m, int64_t n,
                     const ns_muon_params *p, dm_err *err);

/* The update in its parts, out of place (the CPU executor backend runs these on staged copies
 * and on parts of a matrix; ns_muon_update_f is momentum, NS, apply). Each *_out may equal its
 * *_in (in place); count elements.
 *   momentum: buf_out = mu buf_in + g (stored as float), u = nesterov ? g + mu buf_out : buf_out;
 *   apply:    W_out = W_in (1 - lr wd) - lr scale O, O the NS output of u;
 *   scale:    scale_coef sqrt(max(m, n)) of an m x n matrix. */
void ns_muon_momentum_f(const float *g, const float *buf_in, float *buf_out, float *u, size_t count, double mu,
                        int nesterov);
void ns_muon_apply_f(const float *W_in, float *W_out, const float *O, size_t count, double lr, double wd,
                     double scale);
double ns_muon_scale(const ns_muon_params *p, int64_t m, int64_t n);

/* AdamW over count elements with moments m1, m2 (updated in place) at step t >= 1:
 *   m1 = b1 m1 + (1-b1) g;  m2 = b2 m2 + (1-b2) g^2;
 *   W *= 1 - lr wd;  W -= lr * (m1 / (1-b1^t)) / (sqrt(m2 / (1-b2^t)) + eps).
 * -1 if t < 1. Elementwise math in double, stored as float. */
typedef struct ns_adamw_params {
    double lr;           /* default 1e-3 */
    double beta1;        /* default 0.9 */
    double beta2;        /* default 0.95 (LLM pretraining; PyTorch's default is 0.999) */
    double eps;          /* default 1e-8 */
    double weight_decay; /* decoupled; default 0.1 */
} ns_adamw_params;

void ns_adamw_params_default(ns_adamw_params *p);
int ns_adamw_update_f(float *W, float *m1, float *m2, const float *g, size_t count, int64_t t,
                      const ns_adamw_params *p, dm_err *err);
/* The same out of place: W, m1, m2 read from *_in and written to *_out (each may equal its
 * *_in). ns_adamw_update_f is this in place. */
int ns_adamw_f(const float *W_in, float *W_out, const float *m1_in, float *m1_out, const float *m2_in, float *m2_out,
               const float *g, size_t count, int64_t t, const ns_adamw_params *p, dm_err *err);

#endif
