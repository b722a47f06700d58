/* costs.c: the kernel cost model (costs.h): reading dmuon-costs-2 (and -1) tables, exact
 * lookups, interpolation between measured shapes (NS, the optimizer's elementwise updates and
 * every workload kernel), projection to other GPUs, and the roofline fallback (also used to
 * generate traces/costs/roofline.csv). */
#define _GNU_SOURCE
#include "costs.h"
#include "datadir.h"
#include "lines.h"
#include "outfile.h"
#include "wk_hash.h" /* wk_mix64_: the NS memo's hash */

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#include <gsl/gsl_errno.h>
#include <gsl/gsl_interp.h>


#define NS_ITERS DM_NS_ITERS_DEFAULT
#define BF16_BYTES 2.0

typedef enum { OP_NS, OP_GEMM, OP_SYRK, OP_MUON_UPDATE, OP_ADAMW, OP_BGEMM, OP_ELEM, OP__COUNT } row_op;
static const char *op_names[OP__COUNT] = {"ns", "gemm", "syrk", "muon_update", "adamw", "bgemm", "elem"};
/* algo: the NS benchmark's names, then the workload kernels' ops (ALGO_KERN + dm_kern_op) */
static const char *algo_base[] = {"direct", "gram", "cublas", "sym", "-", "direct-eager", "gram-eager", "apply", "prep"};
#define ALGO_EAGER 5 /* + dm_ns_algo: an NS measured with its kernels launched one by one */
#define ALGO_LEGACY 4 /* "-": an elementwise row (muon_update: momentum and apply together, the old rows) */
#define ALGO_APPLY 7  /* muon_update apply: the executor's muon-update op alone */
#define ALGO_PREP 8   /* muon_update prep: the gradient check and momentum its NS op runs per matrix */
#define ALGO_KERN 9
#define N_ALGOS (ALGO_KERN + DM_KOP__COUNT)

static const char *algo_name(int a) { return a < ALGO_KERN ? algo_base[a] : dm_kern_op_name((dm_kern_op)(a - ALGO_KERN)); }

typedef struct row {
    row_op op;
    int algo; /* ALGO_KERN + dm_kern_op for kernel rows, else an index into algo_base */
    int64_t m, n, k;      /* ns rows: m <= n (a tall row's m and n swapped on reading) */
    int batch;
    int tall;             /* ns: the matrices are stored tall (the file's m > n): the NS runs on their
                             transposes, its products with transposed operands */
    double elt;           /* bytes per element of its dtype */
    double median_us, min_us, max_us;
    double mhz; /* the SM clock the row held while it was timed (column mhz; 0: not read). When
                   every NS row has one, the table's twin holds them at full clock
                   (set_ns_full_clock) */
    int align; /* a workload GEMM's alignment class (gemm_align), 8 for every other row */
    int line; /* in its file, for messages */
    int file; /* index into dm_costs.files */
} row;

#define MAX_FILES 8
#define CLASSES 24 /* gemm_align's values: 1, 2, 4, 8, 17, 18, 20 */
#define GROUP_ODD 0
#define GROUP_PART 1
#define BUCKETS (DM_KOP__COUNT * (CLASSES + 2) + 1) /* set_class_ratios */
#define BUCKET_ELEM_POOL (BUCKETS - 1)
struct dm_costs {
    char *path;           /* as given: one file, or several joined by commas */
    char *files[MAX_FILES];
    int n_files;
    int roofline;         /* "# source: roofline" (or no table at all) */
    const dm_gpu *gpu;    /* the GPU the table was measured on */
    char gpu_name[128];
    int n_rows, cap;
    row *rows;
    int op_rows[OP__COUNT][N_ALGOS]; /* rows per (op, algo) */
    int tall_rows[N_ALGOS];          /* ns rows of tall matrices per algo */
    char describe[512];
    int file_cool[MAX_FILES];        /* "# power_state: cool": rows at full clock (bench work --cool) */
    int clock_rows[3][2];            /* [workload kernel rows, ns rows, others][at full clock?]: rows by state */
    int ns_rows, ns_clock_rows;      /* NS rows, and those with a measured clock (set_ns_full_clock) */
    /* ln of what an unaligned kernel takes over the aligned rows' price of its shape, per bucket
     * (set_class_ratios: per op and alignment class, per GEMM op and group, GROUP_ODD classes 1
     * and 17, GROUP_PART 2, 4, 18, 20, and one pool of the elementwise ops); ratio_n rows behind each */
    double ratio_lr[BUCKETS];
    int ratio_n[BUCKETS];
    /* the table's own best rates (set_best_rates): its fastest streaming read (bytes / time over
     * its grad-check rows: a read-only pass whose bytes are exact) and its fastest GEMM (FLOPs /
     * time over its GEMM rows); the datasheet's where it has no such rows. What project_us
     * measures a kernel's use of HBM or the tensor cores against. */
    double stream_Bps, tensor_flops;
    /* the same table with its NS rows brought to full clock by the clock each was timed at
     * (set_ns_full_clock; its own rows, the rest shared with this one), NULL unless every NS row
     * has a clock */
    struct dm_costs *ns_full;
    /* dm_costs_ns_launch_us's answers so far (a table's answers never change once it is read; a
     * plan asks the same few shapes thousands of times: each sched_build prices every matrix,
     * each answer a scan of every row); allocated with the table, grown on use */
    struct ns_memo *memo;
};

/* ---- the NS answers' memo ------------------------------------------------------------------ */

typedef struct ns_memo_e {
    const dm_gpu *target; /* (the price depends on the pointer too: target == the table's GPU) */
    double g[5];          /* and on these numbers of it (a caller's GPU may be a struct it reuses) */
    int64_t m, n;
    int batch, algo, eager, used;
    dm_cost_source src;
    double us;
} ns_memo_e;

typedef struct ns_memo {
    ns_memo_e *e;
    int cap, n; /* cap a power of two (0: empty) */
} ns_memo;

static uint64_t memo_hash(const dm_gpu *t, int64_t m, int64_t n, int batch, int algo, int eager)
{
    /* SplitMix64's finalizer (the workload's, kernels/wk_hash.h) over each field in turn */
    uint64_t h = wk_mix64_((uint64_t)(uintptr_t)t);
    h = wk_mix64_(h + (uint64_t)m);
    h = wk_mix64_(h + (uint64_t)n);
    return wk_mix64_(h + (((uint64_t)(uint32_t)batch << 8) | (uint64_t)(algo << 2) | (uint64_t)eager));
}

static void memo_gpu(const dm_gpu *t, double g[5])
{
    g[0] = t->bf16_flops, g[1] = t->hbm_Bps, g[2] = t->launch_us, g[3] = t->sms, g[4] = t->sm_mhz;
}

/* The entry of the query, else NULL (*slot: the empty one where it would go; -1 when the memo
 * has no slots). At most half the slots are taken (memo_grow), so a probe always ends. */
static ns_memo_e *memo_find(const ns_memo *mo, const dm_gpu *t, int64_t m, int64_t n, int batch, int algo, int eager,
                            int *slot)
{
    *slot = -1;
    if (!mo || !mo->cap) return NULL;
    double g[5];
    memo_gpu(t, g);
    for (int i = (int)(memo_hash(t, m, n, batch, algo, eager) & (uint64_t)(mo->cap - 1));; i = (i + 1) & (mo->cap - 1)) {
        ns_memo_e *e = &mo->e[i];
        if (!e->used) {
            *slot = i;
            return NULL;
        }
        if (e->target == t && e->m == m && e->n == n && e->batch == batch && e->algo == algo && e->eager == eager &&
            !memcmp(e->g, g, sizeof g))
            return e;
    }
}

/* Room for one more entry (rehashed into twice the slots); 0 when that allocation failed (the
 * memo then stays as it is: answers computed each time). */
static int memo_grow(ns_memo *mo)
{
    if (2 * (mo->n + 1) <= mo->cap) return 1;
    int cap = mo->cap ? 2 * mo->cap : 256;
    ns_memo_e *e = calloc((size_t)cap, sizeof *e);
    if (!e) return 0;
    for (int i = 0; i < mo->cap; i++) {
        const ns_memo_e *x = &mo->e[i];
        if (!x->used) continue;
        int j = (int)(memo_hash(x->target, x->m, x->n, x->batch, x->algo, x->eager) & (uint64_t)(cap - 1));
        while (e[j].used) j = (j + 1) & (cap - 1);
        e[j] = *x;
    }
    free(mo->e);
    mo->e = e;
    mo->cap = cap;
    return 1;
}

static void memo_free(ns_memo *mo)
{
    if (!mo) return;
    free(mo->e);
    free(mo);
}

/* ---- roofline terms ------------------------------------------------------------------------ */

double dm_ns_flops(int64_t m, int64_t n, dm_ns_algo algo)
{
    return dm_ns_flops_ex(m, n, NS_ITERS, algo, DM_NS_RESTARTS_DEFAULT, 0);
}

/* Operands read and results written once per product, in bf16; normalization reads X twice and
 * writes it once. r = min(m,n), l = max(m,n). */
double dm_ns_bytes(int64_t m, int64_t n, dm_ns_algo algo)
{
    double r = (double)(m < n ? m : n), l = (double)(m < n ? n : m);
    double norm = 3 * r * l;
    double elems;
    if (algo == DM_NS_DIRECT) /* per iteration: X X^T (rl + r^2), A A (3 r^2), B X (r^2 + 2rl) */
        elems = norm + NS_ITERS * (3 * r * l + 5 * r * r);
    else /* R = X X^T, per iteration R R, P Q, P R P (about 9 r^2), one restart and the end X = Q X */
        elems = norm + 2 * (r * l + r * r) + NS_ITERS * 9 * r * r + 2 * (r * r + 2 * r * l);
    return elems * BF16_BYTES;
}

static int ns_launches(dm_ns_algo algo) { return algo == DM_NS_DIRECT ? 2 + 3 * NS_ITERS : 2 + 4 * NS_ITERS + 2; }

/* One NS of m x n takes longer on the roofline's tensor cores than its kernel launches. */
static int ns_compute_bound(const dm_gpu *gpu, int64_t m, int64_t n, dm_ns_algo algo)
{
    return dm_ns_flops(m, n, algo) / gpu->bf16_flops * 1e6 >= ns_launches(algo) * gpu->launch_us;
}

double dm_elementwise_bytes_per_param(const char *op)
{
    /* The bytes model of an op (the roofline, and a calibrated efficiency fitted on executor
     * traces). muon_update: master fp32 read+write (8), NS output read (2), bf16 weight write
     * (2), as the GPU executor's apply kernel does it; the executor runs the momentum (gradient
     * read, momentum read+write, NS input write) inside its NS op, priced there (dm_ns_prep_us;
     * muon_prep: those 20 bytes, the roofline of the table's muon_update prep rows). The table's
     * muon_update apply rows time the executor's op itself; its old muon_update "-" rows timed
     * momentum and apply together, so a cost from such rows keeps the momentum in this op instead
     * (and the NS op adds none of it). adamw:
     * grad (2), two fp32 moments read and written (16), master (8), bf16 weight (2). */
    if (!strcmp(op, "muon_update")) return 12;
    if (!strcmp(op, "muon_prep")) return DM_NS_PREP_BYTES;
    if (!strcmp(op, "adamw")) return 28;
    return 0;
}

double dm_roofline_ns_us(const dm_gpu *gpu, int64_t m, int64_t n, int batch, dm_ns_algo algo)
{
    double flops = batch * dm_ns_flops(m, n, algo), bytes = batch * dm_ns_bytes(m, n, algo);
    double t = fmax(flops / gpu->bf16_flops, bytes / gpu->hbm_Bps) * 1e6;
    return t + ns_launches(algo) * gpu->launch_us;
}

double dm_roofline_elementwise_us(const dm_gpu *gpu, const char *op, int64_t elems)
{
    return dm_hbm_pass_us(gpu, 1, (double)elems * dm_elementwise_bytes_per_param(op));
}

double dm_elem_launch_bytes(dm_kern_op op, int64_t m, int64_t n, int64_t k, double elt)
{
    double b = dm_elem_passes(op) * (double)m * (double)n * elt;
    if (op == DM_KOP_EMBED_BWD) b += (double)k * (double)n * elt; /* the zeroed table's rows */
    return b;
}

double dm_hbm_pass_at_us(const dm_gpu *gpu, double efficiency, double launch_us, double launches, double bytes)
{
    double eff = efficiency > 0 ? efficiency : 1, launch = launch_us > 0 ? launch_us : gpu->launch_us;
    return bytes / (eff * gpu->hbm_Bps) * 1e6 + launches * launch;
}

double dm_hbm_pass_us(const dm_gpu *gpu, double launches, double bytes)
{
    return dm_hbm_pass_at_us(gpu, 1, 0, launches, bytes);
}

double dm_ns_prep_us(const dm_gpu *gpu, double efficiency, double launch_us, double tensors, double elems)
{
    return dm_hbm_pass_at_us(gpu, efficiency, launch_us, tensors * DM_NS_PREP_LAUNCHES, elems * DM_NS_PREP_BYTES);
}

double dm_ns_op_prep_us(const dm_costs *c, const dm_cluster *cl, double tensors, double elems)
{
    if (cl->elem_efficiency[0] > 0)
        return dm_ns_prep_us(cl->gpu, cl->elem_efficiency[0], cl->elem_launch_us[0], tensors, elems);
    if (c && !c->roofline && c->op_rows[OP_MUON_UPDATE][ALGO_PREP] && tensors > 0) /* per matrix, from its rows */
        return tensors * dm_costs_elementwise_us(c, cl->gpu, "muon_prep", (int64_t)llround(elems / tensors), NULL);
    if (c && !c->roofline && c->op_rows[OP_MUON_UPDATE][ALGO_LEGACY] && !c->op_rows[OP_MUON_UPDATE][ALGO_APPLY])
        return 0; /* the old rows time the momentum with the update: priced there */
    return dm_ns_prep_us(cl->gpu, 1, 0, tensors, elems);
}

double dm_costs_ns_op_kernels_us(const dm_costs *c, const dm_gpu *gpu, const dm_op *op, dm_cost_source *src)
{
    int batch = op->batch > 0 ? op->batch : 1, tall = op->tall > 0 ? (op->tall < batch ? op->tall : batch) : 0;
    int64_t m = op->m < op->n ? op->m : op->n, n = op->m < op->n ? op->n : op->m;
    double us = 0;
    dm_cost_source s = DM_COST_MEASURED, s1;
    for (int part = 0; part < 2; part++) { /* the wide matrices, then the tall ones: a plan each */
        int b = part ? tall : batch - tall;
        if (b < 1) continue;
        if (c) {
            us += dm_costs_ns_launch_us(c, gpu, part ? n : m, part ? m : n, b, op->algo, op->eager, &s1);
        } else {
            us += dm_roofline_ns_us(gpu, m, n, b, op->algo);
            s1 = DM_COST_ROOFLINE;
        }
        if (s1 > s) s = s1; /* the less direct of the two answers */
    }
    if (src) *src = s;
    return us;
}

static void shape_work(dm_kern_kind kind, dm_kern_op op, int64_t m, int64_t n, int64_t k, int64_t batch, double elt,
                       double *flops, double *bytes);

void dm_ns_split_stage_kernels(const dm_op *op, dm_kernel *k, int *n, double *elem_bytes)
{
    int64_t r = op->m < op->n ? op->m : op->n, s = dm_ns_split_rows(op);
    dm_kernel g = {.kind = DM_KERN_GEMM, .batch = 1, .count = 1, .param = -1, .slot = -1};
    double elt = (double)dm_dtype_size(op->dtype);
    *n = 0;
    if (op->stage % 2 == 0) { /* H_j = S_j^T S_j: dW = dY^T X's form (workload.h), m = n = r, k = s */
        g.op = DM_KOP_WGRAD, g.m = r, g.n = r, g.k = s;
        k[(*n)++] = g;
        *elem_bytes = 0;
    } else { /* Y = S_j H, Z = Y H (Y = X W^T's form: m = s, n = r, k = r, twice) */
        g.op = DM_KOP_FWD, g.m = s, g.n = r, g.k = r;
        k[(*n)++] = g;
        k[(*n)++] = g;
        /* S = a S + b Y + c Z (three reads, a write); stage 1 also scales S and H by the norm */
        *elem_bytes = 4.0 * (double)s * r * elt + (op->stage == 1 ? 2.0 * ((double)r * r + (double)s * r) * elt : 0);
    }
    for (int i = 0; i < *n; i++) shape_work(k[i].kind, k[i].op, k[i].m, k[i].n, k[i].k, 1, elt, &k[i].flops, &k[i].bytes);
}

/* One stage of a split NS op (program.h: parts > 1): its GEMMs from the kernel table's GEMM rows
 * (the products a split runs are plain GEMMs, not NS kernels), its elementwise passes at the HBM
 * roofline with a launch each; stage 0 adds the gradient check and momentum of the slice. */
static double ns_split_us(const dm_costs *c, const dm_cluster *cl, const dm_op *op, int full, dm_cost_source *src)
{
    dm_kernel k[2];
    int n;
    double eb, us = 0;
    dm_cost_source s = DM_COST_MEASURED, si = DM_COST_ROOFLINE;
    dm_ns_split_stage_kernels(op, k, &n, &eb);
    for (int i = 0; i < n; i++) {
        us += c ? dm_costs_kernel_us(c, cl->gpu, &k[i], &si) : dm_roofline_kernel_us(cl->gpu, &k[i]);
        if (!c) si = DM_COST_ROOFLINE;
        if (si > s) s = si;
    }
    if (full && dm_power_on(&cl->power) && !dm_costs_full_clock(c, 0))
        us = dm_power_full_us_held(&cl->power, op->flops, op->bytes, us);
    if (eb > 0) us += dm_hbm_pass_us(cl->gpu, 2, eb);
    if (src) *src = s;
    if (op->stage == 0) /* the slice's check and momentum */
        us += dm_ns_op_prep_us(c, cl, 1, (double)dm_ns_split_rows(op) * (double)(op->m < op->n ? op->m : op->n));
    return us;
}

double dm_costs_ns_op_kernels_full_us(const dm_costs *c, const dm_gpu *gpu, const dm_op *op, const dm_power *pw,
                                      dm_cost_source *src)
{
    if (!pw || !dm_power_on(pw)) return dm_costs_ns_op_kernels_us(c, gpu, op, src);
    if (c && c->ns_full) return dm_costs_ns_op_kernels_us(c->ns_full, gpu, op, src);
    double us = dm_costs_ns_op_kernels_us(c, gpu, op, src);
    return dm_costs_full_clock(c, 1) ? us : dm_power_full_us_held(pw, op->flops, op->bytes, us);
}

/* dm_ns_op_us and dm_ns_op_full_us: full: the kernels' time at full clock under the power model
 * (dm_costs_ns_op_kernels_full_us) */
static double ns_op_us(const dm_costs *c, const dm_cluster *cl, const dm_op *op, int full, dm_cost_source *src)
{
    if (op->parts > 1) return ns_split_us(c, cl, op, full, src);
    double us = full ? dm_costs_ns_op_kernels_full_us(c, cl->gpu, op, &cl->power, src)
                     : dm_costs_ns_op_kernels_us(c, cl->gpu, op, src);
    if (cl->ns_time_scale > 0) us *= cl->ns_time_scale;
    double batch = op->batch > 0 ? op->batch : 1;
    return us + dm_ns_op_prep_us(c, cl, batch, (double)op->m * (double)op->n * batch);
}

double dm_ns_op_us(const dm_costs *c, const dm_cluster *cl, const dm_op *op, dm_cost_source *src)
{
    return ns_op_us(c, cl, op, 0, src);
}

double dm_ns_op_full_us(const dm_costs *c, const dm_cluster *cl, const dm_op *op, dm_cost_source *src)
{
    return ns_op_us(c, cl, op, 1, src);
}

double dm_grad_check_us(const dm_gpu *gpu, double tensors, double elems)
{
    return dm_hbm_pass_us(gpu, tensors, 2.0 * elems); /* one bf16 read per element */
}

double dm_work_grad_check_us(const dm_costs *c, const dm_gpu *gpu, const dm_kernel *k, int n, double *launches,
                             dm_cost_source *src)
{
    double t = 0, l = 0;
    dm_cost_source s = DM_COST_ROOFLINE;
    for (int i = 0; i < n; i++) {
        dm_kernel chk;
        if (!dm_grad_check_kernel(&k[i], &chk)) continue;
        dm_cost_source si = DM_COST_ROOFLINE;
        t += c ? dm_costs_kernel_us(c, gpu, &chk, &si) : dm_grad_check_us(gpu, (double)chk.count, chk.elems);
        if (si != DM_COST_ROOFLINE) s = si; /* a measured (or interpolated, projected) row answered */
        l += (double)chk.count;
    }
    if (launches) *launches = l;
    if (src) *src = s;
    return t;
}

/* One launch: FLOPs over the bf16 rate or bytes over HBM, the larger, plus the launch floor. */
static double roof_launch_us(const dm_gpu *gpu, double flops, double bytes)
{
    return fmax(flops / gpu->bf16_flops, bytes / gpu->hbm_Bps) * 1e6 + gpu->launch_us;
}

static int is_product(dm_kern_kind kind) { return kind == DM_KERN_GEMM || kind == DM_KERN_BGEMM; }

/* FLOPs and bytes of one launch of a kernel of this shape (products: 2 m n k and the three
 * operands per batch entry; elementwise: dm_elem_launch_bytes). */
static void shape_work(dm_kern_kind kind, dm_kern_op op, int64_t m, int64_t n, int64_t k, int64_t batch, double elt,
                       double *flops, double *bytes)
{
    double M = (double)m, N = (double)n, K = (double)k, B = (double)(batch > 0 ? batch : 1);
    if (is_product(kind)) {
        *flops = 2 * M * N * K * B;
        *bytes = (M * K + K * N + M * N) * elt * B;
    } else {
        *flops = 0;
        *bytes = dm_elem_launch_bytes(op, m, n, k, elt);
    }
}

/* FLOPs and bytes of one launch of a workload kernel (its own counts where it has them). */
static void kernel_work(const dm_kernel *k, double *f, double *b)
{
    double count = (double)(k->count > 0 ? k->count : 1);
    shape_work(k->kind, k->op, k->m, k->n, k->k, k->batch, BF16_BYTES, f, b);
    if (k->flops > 0) *f = k->flops / count;
    if (k->bytes > 0) *b = k->bytes / count;
}

double dm_roofline_kernel_us(const dm_gpu *gpu, const dm_kernel *k)
{
    double f, b;
    kernel_work(k, &f, &b);
    return roof_launch_us(gpu, f, b);
}

int dm_kernel_memory_bound(const dm_gpu *gpu, const dm_kernel *k)
{
    double f, b;
    kernel_work(k, &f, &b);
    return b / gpu->hbm_Bps > f / gpu->bf16_flops;
}

/* A time `us` measured on the table's GPU (`launches` launches of `flops` FLOPs and `bytes` HBM
 * bytes in all) moved to GPU t. The launch floors are exchanged (a time under its floor is all
 * launch). Of the rest (the body), h = the part that the kernel's limiting resource on the table's
 * GPU (HBM bytes or tensor FLOPs, the roofline's choice) needs at the table's best rate for it (its
 * fastest streaming read, its fastest GEMM: set_best_rates) moves with that resource's datasheet
 * ratio, and the remainder o (latency, issue, too little work in flight, L2: what neither HBM nor
 * the tensor cores limit) with the ratio of SMs x clock. How the two parts add:
 *  - `overlap` 0, in series (body = h + o): the optimizer's updates and NS, flat streaming passes
 *    and products whose shortfall from the best rate is the resource's own (an AdamW pass that
 *    writes as much as it reads runs at 0.64 of the read rate on the H200 and slowed 1.38x on the
 *    H100, more than its share h alone would say);
 *  - `overlap` 1, a memory-bound workload kernel (norms, softmax, loss, embeddings, attention
 *    batches): its memory traffic overlaps its per-row work, body^2 = h^2 + o^2. A kernel far below
 *    the streaming rate is held by its own issue and latency and hardly slows where HBM is slower
 *    (the norm rows, `vector`, of 4096 x 6144-8192 ran 0.99x the H200's time on an H100, whose HBM
 *    is 1.43x slower); one at the rate moves with HBM. On 59 elementwise and 12 attention rows measured on an H100
 *    (traces/device/h100rows-2026-12-05) the projected time over the measured, time-weighted:
 *    1.053 and 1.029 in series, 1.019 and 0.998 with the squares adding, 0.929 and 0.913 as the
 *    larger of the two parts alone (traces/costs/projection-2026-12-07).
 * A kernel at the best rate moves with the resource's ratio in every form. Where either GPU's SMs
 * or clock are not known, the whole body scales by the resource ratio (the datasheet ratio alone). */
static double project_us(const dm_costs *c, const dm_gpu *t, double us, double flops, double bytes, double launches,
                         int overlap)
{
    const dm_gpu *s = c->gpu;
    int mem = bytes / s->hbm_Bps > flops / s->bf16_flops;
    double launch = fmin(us, launches * s->launch_us), body = us - launch;
    double u = body > 0 ? fmin(1, (mem ? bytes / c->stream_Bps : flops / c->tensor_flops) * 1e6 / body) : 1;
    double res = mem ? s->hbm_Bps / t->hbm_Bps : s->bf16_flops / t->bf16_flops;
    double sm = dm_gpu_sm_rate(s) > 0 && dm_gpu_sm_rate(t) > 0 ? dm_gpu_sm_rate(s) / dm_gpu_sm_rate(t) : res;
    double moved = overlap && mem ? sqrt(u * u * res * res + (1 - u * u) * sm * sm) : u * res + (1 - u) * sm;
    return launch * (s->launch_us > 0 ? t->launch_us / s->launch_us : 1) + body * moved;
}

/* The FLOPs and HBM bytes of a row, by the models its prices are made with (the roofline terms
 * of its kind); SYRK rows (0, 0): not priced by kind. */
static void row_work(const row *r, double *f, double *b)
{
    *f = *b = 0;
    switch (r->op) {
    case OP_NS: {
        dm_ns_algo a = (dm_ns_algo)(r->algo >= ALGO_EAGER ? r->algo - ALGO_EAGER : r->algo);
        *f = r->batch * dm_ns_flops(r->m, r->n, a);
        *b = r->batch * dm_ns_bytes(r->m, r->n, a);
        return;
    }
    case OP_ADAMW: *b = (double)r->n * dm_elementwise_bytes_per_param("adamw"); return;
    case OP_MUON_UPDATE:
        *b = (double)r->n * dm_elementwise_bytes_per_param(r->algo == ALGO_PREP ? "muon_prep" : "muon_update");
        return;
    case OP_GEMM:
    case OP_BGEMM:
    case OP_ELEM:
        shape_work(r->op == OP_ELEM ? DM_KERN_ELEM : DM_KERN_GEMM, (dm_kern_op)(r->algo >= ALGO_KERN ? r->algo - ALGO_KERN : 0),
                   r->m, r->n, r->k, r->batch, r->elt, f, b);
        return;
    default: return;
    }
}

static double row_roofline_us(const dm_gpu *gpu, const row *r)
{
    double f, b;
    row_work(r, &f, &b);
    int launches = r->op == OP_NS ? ns_launches((dm_ns_algo)(r->algo >= ALGO_EAGER ? r->algo - ALGO_EAGER : r->algo)) : 1;
    return fmax(f / gpu->bf16_flops, b / gpu->hbm_Bps) * 1e6 + launches * gpu->launch_us;
}

/* ---- reading ------------------------------------------------------------------------------- */

const char *dm_cost_source_name(dm_cost_source s)
{
    static const char *n[] = {"measured", "interpolated", "projected", "roofline"};
    return (unsigned)s <= DM_COST_ROOFLINE ? n[s] : "?";
}

void dm_costs_free(dm_costs *c)
{
    if (!c) return;
    free(c->path);
    for (int i = 0; i < c->n_files; i++) free(c->files[i]);
    free(c->rows);
    if (c->ns_full) free(c->ns_full->rows), memo_free(c->ns_full->memo);
    free(c->ns_full);
    memo_free(c->memo);
    free(c);
}

static void set_describe(dm_costs *c)
{
    if (!c->n_rows)
        snprintf(c->describe, sizeof c->describe, "roofline for %s (no table: FLOPs over peak, bytes over HBM, launch floor)",
                 c->gpu->name);
    else
        snprintf(c->describe, sizeof c->describe, "%s %s (%s, %d rows)",
                 c->roofline ? "roofline for" : "measured on", c->gpu_name, c->path, c->n_rows);
}

dm_costs *dm_costs_roofline(const dm_gpu *gpu, dm_err *err)
{
    dm_costs *c = dm_calloc(1, sizeof *c, err);
    if (!c) return NULL;
    if (!(c->memo = dm_calloc(1, sizeof *c->memo, err)) || !(c->path = dm_strdup("", err))) {
        free(c->memo);
        free(c);
        return NULL;
    }
    c->roofline = 1;
    c->gpu = gpu ? gpu : dm_gpu_find("H200");
    snprintf(c->gpu_name, sizeof c->gpu_name, "%s", c->gpu->name);
    set_describe(c);
    return c;
}

/* Split one CSV line in place into at most max fields; returns the count and each field's
 * column (1-based). */
static int split_csv(char *s, char **f, int *col, int max)
{
    int n = 0;
    char *start = s;
    for (;;) {
        if (n < max) {
            f[n] = s;
            col[n] = (int)(s - start) + 1;
        }
        n++;
        char *c = strchr(s, ',');
        if (!c) break;
        *c = 0;
        s = c + 1;
    }
    return n;
}

static int parse_i64(const char *s, int64_t lo, int64_t hi, int64_t *out)
{
    char *end;
    errno = 0;
    long long v = strtoll(s, &end, 10);
    if (errno || end == s || *end || v < lo || v > hi) return -1;
    *out = v;
    return 0;
}

static int parse_dbl(const char *s, double *out)
{
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (errno || end == s || *end || !isfinite(v) || v < 0) return -1;
    *out = v;
    return 0;
}

static int find_name(const char *s, const char *const *names, int n)
{
    for (int i = 0; i < n; i++)
        if (!strcmp(s, names[i])) return i;
    return -1;
}

static char *rstrip(char *s)
{
    size_t l = strlen(s);
    while (l && (s[l - 1] == '\n' || s[l - 1] == '\r' || s[l - 1] == ' ')) s[--l] = 0;
    return s;
}

static int by_identity(const void *a, const void *b)
{
    const row *x = a, *y = b;
    if (x->op != y->op) return (x->op > y->op) - (x->op < y->op);
    if (x->algo != y->algo) return (x->algo > y->algo) - (x->algo < y->algo);
    if (x->m != y->m) return (x->m > y->m) - (x->m < y->m);
    if (x->n != y->n) return (x->n > y->n) - (x->n < y->n);
    if (x->k != y->k) return (x->k > y->k) - (x->k < y->k);
    if (x->batch != y->batch) return (x->batch > y->batch) - (x->batch < y->batch);
    if (x->tall != y->tall) return (x->tall > y->tall) - (x->tall < y->tall);
    if (x->file != y->file) return (x->file > y->file) - (x->file < y->file);
    return (x->line > y->line) - (x->line < y->line);
}

/* A second row with the identity a lookup answers by (op, algo, m, n, k, batch) would be silently
 * shadowed by the first: refused, naming the earliest such line and the row it repeats. */
static int duplicate_row(const dm_costs *c, dm_err *err)
{
    if (c->n_rows < 2) return 0;
    row *s = dm_malloc((size_t)c->n_rows * sizeof *s, err);
    if (!s) return -1;
    memcpy(s, c->rows, (size_t)c->n_rows * sizeof *s);
    if (c->n_rows > 1) qsort(s, (size_t)c->n_rows, sizeof *s, by_identity);
    int at = -1;
    for (int i = 1; i < c->n_rows; i++) {
        row a = s[i - 1], b = s[i];
        a.line = b.line = a.file = b.file = 0;
        if (!by_identity(&a, &b) &&
            (at < 0 || s[i].file < s[at].file || (s[i].file == s[at].file && s[i].line < s[at].line)))
            at = i;
    }
    int rc = 0;
    if (at >= 0) {
        const row *r = &s[at];
        const row *q = &s[at - 1];
        char where[640] = "";
        if (q->file != r->file) snprintf(where, sizeof where, "%s ", c->files[q->file]);
        rc = dm_err_set(err, "%s:%d:1: duplicate row: %s %s %lld x %lld x %lld batch %d is already on %sline %d",
                        c->files[r->file], r->line, op_names[r->op], algo_name(r->algo), (long long)(r->tall ? r->n : r->m),
                        (long long)(r->tall ? r->m : r->n),
                        (long long)r->k, r->batch, where, q->line);
    }
    free(s);
    return rc;
}

/* Which algos an op's rows may name, for the check and its message. */
static int algo_allowed(row_op op, int algo)
{
    switch (op) {
    case OP_NS: return algo == DM_NS_DIRECT || algo == DM_NS_GRAM || algo == ALGO_EAGER + DM_NS_DIRECT ||
                       algo == ALGO_EAGER + DM_NS_GRAM;
    case OP_GEMM: return algo == 2 || algo == ALGO_KERN + DM_KOP_FWD || algo == ALGO_KERN + DM_KOP_DGRAD ||
                         algo == ALGO_KERN + DM_KOP_WGRAD;
    case OP_SYRK: return algo == 2 || algo == 3;
    case OP_MUON_UPDATE: return algo == ALGO_LEGACY || algo == ALGO_APPLY || algo == ALGO_PREP;
    case OP_ADAMW: return algo == ALGO_LEGACY;
    case OP_BGEMM: return algo >= ALGO_KERN && algo <= ALGO_KERN + DM_KOP_ATTN_DKEY;
    case OP_ELEM: return algo >= ALGO_KERN + DM_KOP_LOSS && algo < N_ALGOS;
    default: return 0;
    }
}

static const char *algo_expected(row_op op)
{
    switch (op) {
    case OP_NS: return "direct, gram, direct-eager or gram-eager for an ns row";
    case OP_GEMM: return "cublas, fwd, dgrad or wgrad for a gemm row";
    case OP_SYRK: return "cublas or sym for a syrk row";
    case OP_MUON_UPDATE: return "apply, prep or - for a muon_update row";
    case OP_ADAMW: return "- for an adamw row";
    case OP_BGEMM: return "fwd, dgrad, wgrad or attn-score, attn-value, attn-dvalue, attn-dscore, attn-dquery, attn-dkey "
                          "for a bgemm row";
    default: return "loss, vector, vector-bwd, embed, embed-bwd, table, table-bwd, route, route-bwd, softmax, softmax-bwd, "
                    "grad-check, act, act-bwd, glu, glu-bwd, rope, rope-bwd, resid or resid-bwd for an elem row";
    }
}

/* A workload kernel row (gemm fwd|dgrad|wgrad, bgemm, elem), as opposed to the NS benchmark's. */
static int kernel_row(row_op op, int algo) { return algo >= ALGO_KERN && (op == OP_GEMM || op == OP_BGEMM || op == OP_ELEM); }
static int kernel_gemm(row_op op, int algo) { return algo >= ALGO_KERN && (op == OP_GEMM || op == OP_BGEMM); }

/* A workload GEMM's alignment class: the largest of 8, 4, 2, 1 elements that divides both of its
 * weight dimensions (fwd and dgrad: n and k; wgrad: m and n; the token dimension, which is no
 * operand's leading dimension, left out; any other product: all three). cuBLAS(Lt) runs bf16
 * products whose leading dimensions are multiples of 8 elements (16 bytes) on its vectorized
 * tensor-core kernels; a weight dimension off that (a vocabulary of 49155, 50257 or 32001) takes
 * the product to kernels with narrower loads, at 96-131 TFLOP/s when odd and 258-282 when
 * aligned to 2 or 4 on an H200 (776 aligned, 4096 tokens), while an odd token count costs
 * nothing (traces/device/aligngrid-2026-12-05; Granite-3.1-8B's LM head ran 8x its price from
 * aligned rows, traces/validate/h200-40). A product with more than one unaligned dimension is a
 * class of its own (16 + the smallest alignment). Rows price only queries of their own class
 * (nearest_rows); 8 is aligned. */
static int gemm_align(int algo, int64_t m, int64_t n, int64_t k)
{
    int op = algo - ALGO_KERN;
    int64_t d[3] = {m, n, k};
    if (op == DM_KOP_FWD || op == DM_KOP_DGRAD) d[0] = 8; /* m: the tokens */
    if (op == DM_KOP_WGRAD) d[2] = 8;                      /* k: the tokens */
    int a = 8, odd = 0;
    for (int i = 0; i < 3; i++) {
        int x = 8;
        while (x > 1 && d[i] > 0 && d[i] % x) x /= 2;
        odd += x < 8;
        if (x < a) a = x;
    }
    return odd > 1 ? a + 16 : a; /* two unaligned dimensions run otherwise than one (faster: 12.6 ms
                                    for 4096 x 50257 x 4095 against 17.0 for x 4096) */
}

/* A workload elementwise pass's alignment class: 8 when its width n is a multiple of 8 (the
 * executor's kernels then load 8 elements at a time, kernels/wk_cuda.cu vec8), else 1; the
 * gradient check (flat over its elements) always 8. */
static int elem_align(int algo, int64_t n)
{
    return algo - ALGO_KERN == DM_KOP_GRAD_CHECK || n % 8 == 0 ? 8 : 1;
}

/* The alignment class of a row or query of (op, algo): gemm_align, elem_align, else 8. */
static int kernel_align(row_op op, int algo, int64_t m, int64_t n, int64_t k)
{
    if (kernel_gemm(op, algo)) return gemm_align(algo, m, n, k);
    if (kernel_row(op, algo) && op == OP_ELEM) return elem_align(algo, n);
    return 8;
}

/* An NS shape's alignment class: the largest of 8, 4, 2, 1 elements that divides both m and n.
 * Every product of an NS has its dimensions among m and n, so a side off 8 elements puts all of
 * them on cuBLAS's narrower-load kernels (gemm_align): the table's 1280 x 3420 (Qwen2.5-VL's
 * vision MLP) runs its direct NS at 830.9 us against 272.0 for 1280 x 3840, 3.1x its FLOPs'
 * share. The compute-bound interpolation (table_ns_shapes) takes rows of the query's class only
 * (priced left out of the table, such a row poisoned its aligned neighbours' prices by up to
 * +80%, tools/ns_loo). */
static int ns_align(int64_t m, int64_t n)
{
    int a = 8;
    while (a > 1 && (m % a || n % a)) a /= 2;
    return a;
}

/* One file's rows appended to c (file index fi); its source (0 measured, 1 roofline) and GPU
 * name into *source and gpu_name. */
static int load_one(const char *path, dm_costs *c, int fi, int *source_out, char *gpu_name, size_t gpu_size, dm_err *err)
{
    static const char *headers[2] = {"gpu,op,algo,m,n,batch,dtype,median_us,min_us,max_us",
                                     "gpu,op,algo,m,n,k,batch,dtype,median_us,min_us,max_us"};
    dm_lines *in = dm_lines_open(path, 4096, (int64_t)64 << 20, err);
    if (!in) return -1;
    char *line;
    int lineno = 0, version = 0, seen_header = 0, source = -1, k, has_mhz = 0;
    gpu_name[0] = 0;
    while ((k = dm_lines_next(in, &line, NULL, err)) != 0) {
        if (k < 0) goto fail;
        lineno = dm_lines_number(in);
        rstrip(line);
        if (!line[0]) continue;
        if (line[0] == '#') {
            if (seen_header) {
                dm_err_set(err, "%s:%d:1: expected a data row (comments come before the header)", path, lineno);
                goto fail;
            }
            const char *s = line + 1;
            while (*s == ' ') s++;
            if (!strncmp(s, "dmuon-costs-", 12)) {
                if (strcmp(s, "dmuon-costs-1") && strcmp(s, "dmuon-costs-2")) {
                    dm_err_set(err, "%s:%d:%d: expected format dmuon-costs-2 (or dmuon-costs-1), found '%s'", path,
                               lineno, (int)(s - line) + 1, s);
                    goto fail;
                }
                version = s[12] - '0';
            } else if (!strncmp(s, "source:", 7)) {
                const char *v = s + 7;
                while (*v == ' ') v++;
                if (!strcmp(v, "measured")) source = 0;
                else if (!strcmp(v, "roofline")) source = 1;
                else {
                    dm_err_set(err, "%s:%d:%d: expected source measured or roofline, found '%s'", path,
                               lineno, (int)(v - line) + 1, v);
                    goto fail;
                }
            } else if (!strncmp(s, "power_state:", 12)) {
                const char *v = s + 12;
                while (*v == ' ') v++;
                c->file_cool[fi] = !strncmp(v, "cool", 4);
            } else if (!strncmp(s, "gpu:", 4)) {
                const char *v = s + 4;
                while (*v == ' ') v++;
                snprintf(gpu_name, gpu_size, "%s", v);
            }
            continue;
        }
        const char *header = version ? headers[version - 1] : headers[1];
        if (!seen_header) {
            if (!version) {
                dm_err_set(err, "%s:1:1: expected a '# dmuon-costs-2' line before the header", path);
                goto fail;
            }
            size_t hl = strlen(header);
            if (strncmp(line, header, hl) || (line[hl] && strcmp(line + hl, ",mhz"))) {
                dm_err_set(err, "%s:%d:1: expected the header '%s' (or it and ',mhz')", path, lineno, header);
                goto fail;
            }
            has_mhz = line[hl] != 0;
            seen_header = 1;
            continue;
        }
        /* fields by name: version 1 has no k column; mhz last when the header has it */
        int nf_want = (version == 1 ? 10 : 11) + has_mhz, K = version == 1 ? -1 : 5, B = version == 1 ? 5 : 6, D = B + 1,
            T = B + 2;
        char *fld[12];
        int col[12];
        int nf = split_csv(line, fld, col, 12);
        if (nf != nf_want) {
            dm_err_set(err, "%s:%d:1: expected %d comma-separated fields, found %d", path, lineno, nf_want, nf);
            goto fail;
        }
        row r;
        int64_t v;
        memset(&r, 0, sizeof r);
        r.line = lineno;
        r.file = fi;
        int op = find_name(fld[1], op_names, OP__COUNT);
        if (op < 0) {
            dm_err_set(err, "%s:%d:%d: expected op ns, gemm, syrk, muon_update, adamw, bgemm or elem, found '%s'", path,
                       lineno, col[1], fld[1]);
            goto fail;
        }
        r.op = (row_op)op;
        r.algo = find_name(fld[2], algo_base, ALGO_KERN);
        if (r.algo < 0 && dm_kern_op_from_name(fld[2]) >= 0) r.algo = ALGO_KERN + dm_kern_op_from_name(fld[2]);
        if (r.algo < 0 || !algo_allowed(r.op, r.algo)) {
            dm_err_set(err, "%s:%d:%d: expected algo %s, found '%s'", path, lineno, col[2], algo_expected(r.op), fld[2]);
            goto fail;
        }
        int kern = kernel_row(r.op, r.algo);
        if (parse_i64(fld[3], 1, INT64_C(1) << 40, &r.m)) {
            dm_err_set(err, "%s:%d:%d: expected m, a positive integer", path, lineno, col[3]);
            goto fail;
        }
        if (parse_i64(fld[4], 1, INT64_C(1) << 40, &r.n) || (!kern && r.op != OP_NS && r.n < r.m)) {
            dm_err_set(err, "%s:%d:%d: expected n, %s", path, lineno, col[4],
                       kern || r.op == OP_NS ? "a positive integer" : "an integer >= m");
            goto fail;
        }
        if (r.op == OP_NS && r.n < r.m) { /* a tall matrix: kept apart, in the canonical m <= n */
            int64_t t = r.m;
            r.m = r.n, r.n = t, r.tall = 1;
        }
        if (K >= 0) {
            int64_t lo = kern && r.op != OP_ELEM ? 1 : 0, hi = kern ? INT64_C(1) << 40 : 0;
            if (parse_i64(fld[K], lo, hi, &r.k)) {
                dm_err_set(err, "%s:%d:%d: expected k, %s", path, lineno, col[K],
                           !kern ? "0 for this op" : lo ? "a positive integer (the product's inner dimension)"
                                                        : "a non-negative integer");
                goto fail;
            }
        } else if (kern && r.op != OP_ELEM) {
            dm_err_set(err, "%s:%d:%d: expected a dmuon-costs-2 table for a %s %s row (it needs k)", path, lineno, col[1],
                       op_names[r.op], fld[2]);
            goto fail;
        }
        if (parse_i64(fld[B], 1, 1 << 20, &v) || (kern && r.op != OP_BGEMM && v != 1)) {
            dm_err_set(err, "%s:%d:%d: expected batch, %s", path, lineno, col[B],
                       kern && r.op != OP_BGEMM ? "1 for a gemm or elem row (one matrix per call)" : "a positive integer");
            goto fail;
        }
        r.batch = (int)v;
        if (strcmp(fld[D], "bf16") && strcmp(fld[D], "fp16") && strcmp(fld[D], "fp32")) {
            dm_err_set(err, "%s:%d:%d: expected dtype bf16, fp16 or fp32", path, lineno, col[D]);
            goto fail;
        }
        r.elt = strcmp(fld[D], "fp32") ? 2 : 4;
        double *d[3] = {&r.median_us, &r.min_us, &r.max_us};
        for (int q = 0; q < 3; q++)
            if (parse_dbl(fld[T + q], d[q])) {
                dm_err_set(err, "%s:%d:%d: expected %s, a non-negative number", path, lineno, col[T + q],
                           q == 0 ? "median_us" : q == 1 ? "min_us" : "max_us");
                goto fail;
            }
        /* a nanosecond to days: keeps every derived answer (efficiencies, projections) finite */
        for (int q = 0; q < 3; q++)
            if (*d[q] < 1e-3 || *d[q] > 1e11) {
                dm_err_set(err, "%s:%d:%d: expected %s between 0.001 and 1e11 microseconds", path, lineno, col[T + q],
                           q == 0 ? "median_us" : q == 1 ? "min_us" : "max_us");
                goto fail;
            }
        if (has_mhz && fld[T + 3][0] && (parse_dbl(fld[T + 3], &r.mhz) || r.mhz > 1e5)) {
            dm_err_set(err, "%s:%d:%d: expected mhz, the SM clock the row was timed at (MHz, up to 1e5), or nothing", path,
                       lineno, col[T + 3]);
            goto fail;
        }
        if (!gpu_name[0]) snprintf(gpu_name, gpu_size, "%s", fld[0]);
        if (c->n_rows == c->cap) {
            int nc = c->cap ? 2 * c->cap : 256;
            row *nr = dm_realloc(c->rows, (size_t)nc * sizeof *nr, err);
            if (!nr) goto fail;
            c->rows = nr;
            c->cap = nc;
        }
        r.align = r.op == OP_NS ? ns_align(r.m, r.n) : kernel_align(r.op, r.algo, r.m, r.n, r.k);
        c->rows[c->n_rows++] = r;
        c->clock_rows[kernel_row(r.op, r.algo) ? 0 : r.op == OP_NS ? 1 : 2][c->file_cool[fi]]++;
        c->op_rows[r.op][r.algo]++;
        if (r.tall) c->tall_rows[r.algo]++;
        if (r.op == OP_NS) c->ns_rows++, c->ns_clock_rows += r.mhz > 0;
    }
    if (!seen_header) {
        dm_err_set(err, "%s:%d:1: expected the header '%s'", path, lineno + 1, headers[version == 1 ? 0 : 1]);
        goto fail;
    }
    if (source < 0) {
        dm_err_set(err, "%s:1:1: expected a '# source: measured|roofline' line", path);
        goto fail;
    }
    if (!gpu_name[0] || !dm_gpu_find(gpu_name)) {
        dm_err_set(err, "%s:1:1: expected a '# gpu:' line naming a catalogued GPU (A800, H100, H200), found '%s'", path,
                   gpu_name);
        goto fail;
    }
    dm_lines_close(in);
    *source_out = source;
    return 0;
fail:
    dm_lines_close(in);
    return -1;
}

static int set_class_ratios(dm_costs *c, dm_err *err);

/* dm_costs.stream_Bps and tensor_flops from the rows (project_us). */
static void set_best_rates(dm_costs *c)
{
    c->stream_Bps = c->tensor_flops = 0;
    for (int i = 0; i < c->n_rows; i++) {
        const row *r = &c->rows[i];
        double f, b;
        if (r->median_us <= 0) continue;
        row_work(r, &f, &b);
        if (r->op == OP_ELEM && r->algo == ALGO_KERN + DM_KOP_GRAD_CHECK) c->stream_Bps = fmax(c->stream_Bps, b / (r->median_us * 1e-6));
        if (r->op == OP_GEMM) c->tensor_flops = fmax(c->tensor_flops, f / (r->median_us * 1e-6));
    }
    if (!c->gpu) return;
    if (c->stream_Bps <= 0 || c->stream_Bps > c->gpu->hbm_Bps) c->stream_Bps = c->gpu->hbm_Bps;
    if (c->tensor_flops <= 0 || c->tensor_flops > c->gpu->bf16_flops) c->tensor_flops = c->gpu->bf16_flops;
}

/* NS rows timed back to back hold the clock their own load left the card at, which differs
 * from row to row (a 1 ms NS timed 18 times in a row heats the card less than a 30 ms one:
 * traces/device/nsop-2026-12-05). Where every NS row says the clock it was timed at (column mhz,
 * bench kernels' ns_time_last_mhz) and the GPU's top clock is known, c->ns_full is the table
 * with each NS row brought to full clock, its whole time by the clock ratio (the simulator slows
 * an NS op from full-clock rows likewise, all of it: sim.c compute_share), which a step under the
 * power model prices its NS ops from (dm_costs_ns_op_kernels_full_us). A table where some NS rows
 * lack a clock has none: dm_power_full_us_held brings its NS ops to full clock by the clock the
 * model says their rows' demand holds. */
static int set_ns_full_clock(dm_costs *c, dm_err *err)
{
    if (!c->ns_rows || c->ns_clock_rows < c->ns_rows || !c->gpu || !(c->gpu->sm_mhz > 0)) return 0;
    dm_costs *f = dm_malloc(sizeof *f, err);
    if (!f) return -1;
    *f = *c;
    f->ns_full = NULL;
    if (!(f->memo = dm_calloc(1, sizeof *f->memo, err))) { /* its own answers */
        free(f);
        return -1;
    }
    if (!(f->rows = dm_malloc((size_t)c->n_rows * sizeof *f->rows, err))) {
        free(f->memo);
        free(f);
        return -1;
    }
    memcpy(f->rows, c->rows, (size_t)c->n_rows * sizeof *f->rows);
    f->cap = c->n_rows;
    for (int i = 0; i < f->n_rows; i++) {
        row *r = &f->rows[i];
        if (r->op != OP_NS) continue;
        double s = r->mhz / c->gpu->sm_mhz;
        if (s > 1) s = 1;
        r->median_us *= s, r->min_us *= s, r->max_us *= s;
    }
    c->ns_full = f;
    return 0;
}

int dm_costs_load(const char *path, dm_costs **out, dm_err *err)
{
    dm_costs *c = dm_calloc(1, sizeof *c, err);
    char *list = NULL, *save = NULL, gname[128];
    if (!c || !(c->memo = dm_calloc(1, sizeof *c->memo, err)) || !(c->path = dm_strdup(path, err)) ||
        !(list = dm_strdup(path, err)))
        goto fail;
    for (char *f = strtok_r(list, ",", &save); f; f = strtok_r(NULL, ",", &save)) {
        int source;
        if (c->n_files == MAX_FILES) {
            dm_err_set(err, "%s: more than %d tables joined", path, MAX_FILES);
            goto fail;
        }
        if (!(c->files[c->n_files] = dm_strdup(f, err))) goto fail;
        c->n_files++;
        if (load_one(f, c, c->n_files - 1, &source, gname, sizeof gname, err)) goto fail;
        if (c->n_files == 1) {
            c->roofline = source == 1;
            c->gpu = dm_gpu_find(gname);
            snprintf(c->gpu_name, sizeof c->gpu_name, "%s", gname);
        } else if ((source == 1) != c->roofline || dm_gpu_find(gname) != c->gpu) {
            dm_err_set(err, "%s:1:1: expected a table of the first one's GPU and source (%s, %s) to join it, found %s, %s", f,
                       c->gpu_name, c->roofline ? "roofline" : "measured", gname, source ? "roofline" : "measured");
            goto fail;
        }
    }
    if (!c->n_files) {
        dm_err_set(err, "%s: expected a cost table file", path);
        goto fail;
    }
    if (duplicate_row(c, err)) goto fail;
    if (set_class_ratios(c, err)) goto fail;
    set_best_rates(c);
    free(list);
    list = NULL;
    set_describe(c);
    if (set_ns_full_clock(c, err)) goto fail; /* (a copy of c: last, its description made) */
    *out = c;
    return 0;
fail:
    free(list);
    dm_costs_free(c);
    return -1;
}

static int is_file(const char *p) { return access(p, R_OK) == 0; }

int dm_costs_load_default(dm_costs **out, dm_err *err)
{
    char buf[4096];
    const char *env = getenv("DMUON_COSTS");
    if (env && *env) {
        struct stat st;
        if (strchr(env, ',') || (stat(env, &st) == 0 && !S_ISDIR(st.st_mode))) return dm_costs_load(env, out, err);
    }
    /* the data folders in their one lookup order (datadir.h: $DMUON_COSTS, the build tree's,
     * the installed ones, the source tree's): the measured H200 table, with bench work's rows
     * beside it when its folder has them; else the roofline table */
    const char *dirs[DM_DATA_MAX_DIRS];
    int nd = dm_data_dirs(DM_DATA_COSTS, dirs);
    static const char *files[] = {"h200.csv", "roofline.csv"};
    for (int fi = 0; fi < 2; fi++)
        for (int d = 0; d < nd; d++) {
            snprintf(buf, sizeof buf, "%s/%s", dirs[d], files[fi]);
            if (!is_file(buf)) continue;
            char work[4096];
            snprintf(work, sizeof work, "%s/h200-work.csv", dirs[d]);
            if (fi == 0 && is_file(work) && strlen(buf) + strlen(work) + 2 < sizeof buf)
                snprintf(buf + strlen(buf), sizeof buf - strlen(buf), ",%s", work); /* bench work's rows beside it */
            return dm_costs_load(buf, out, err);
        }
    *out = dm_costs_roofline(NULL, err);
    return *out ? 0 : -1;
}

const char *dm_costs_describe(const dm_costs *c) { return c->describe; }
const char *dm_costs_path(const dm_costs *c) { return c->path; }
const dm_gpu *dm_costs_gpu(const dm_costs *c) { return c->gpu; }
int dm_costs_is_roofline(const dm_costs *c) { return c->roofline; }

/* ---- queries ------------------------------------------------------------------------------- */

/* The rows of (op, algo) nearest to a query in log2(m, n, k, batch) (0 counts as 1), at most
 * K_MAX of them, with their log-efficiency (ln of measured over roofline on the table's GPU).
 * Ties are broken by row order (deterministic). Returns 1 and *exact_us when a row has the
 * query's shape. Only rows of the alignment class `align` count (gemm_align, ns_align; 8 for
 * the other rows; 0: rows of every class). */
#define K_MAX 8
typedef struct near_rows {
    int n;
    double d[K_MAX], e[K_MAX], p[K_MAX][4]; /* squared distance, log-efficiency, position */
} near_rows;

static double lg(int64_t x) { return log2((double)(x > 1 ? x : 1)); }

/* A neighbour at squared distance d with value e (a log-efficiency or log-ratio) and position p
 * into nr, which keeps the K nearest in order of distance. */
static void near_add(near_rows *nr, int K, double d, double e, const double p[4])
{
    int pos = nr->n < K ? nr->n++ : K;
    while (pos > 0 && nr->d[pos - 1] > d) {
        if (pos < K) {
            nr->d[pos] = nr->d[pos - 1];
            nr->e[pos] = nr->e[pos - 1];
            memcpy(nr->p[pos], nr->p[pos - 1], sizeof nr->p[pos]);
        }
        pos--;
    }
    if (pos < K) {
        nr->d[pos] = d;
        nr->e[pos] = e;
        memcpy(nr->p[pos], p, sizeof nr->p[pos]);
    }
}

static int nearest_rows(const dm_costs *c, row_op op, int algo, int tall, int align, int64_t m, int64_t n, int64_t k,
                        int64_t batch, int K, near_rows *nr, double *exact_us)
{
    double q[4] = {lg(m), lg(n), lg(k), lg(batch)};
    nr->n = 0;
    for (int i = 0; i < c->n_rows; i++) {
        const row *r = &c->rows[i];
        if (r->op != op || r->algo != algo || r->tall != tall || (align > 0 && r->align != align)) continue;
        if (r->m == m && r->n == n && r->k == k && r->batch == batch) {
            *exact_us = r->median_us;
            return 1;
        }
        double p[4] = {lg(r->m), lg(r->n), lg(r->k), lg(r->batch)};
        double d = (p[0] - q[0]) * (p[0] - q[0]) + (p[1] - q[1]) * (p[1] - q[1]) + (p[2] - q[2]) * (p[2] - q[2]) +
                   (p[3] - q[3]) * (p[3] - q[3]);
        near_add(nr, K, d, log(r->median_us / row_roofline_us(c->gpu, r)), p);
    }
    return 0;
}

/* Inverse-distance weighted (1 / d^2) mean of the neighbours' values (log-efficiencies). */
static double idw_log_eff(const near_rows *nr)
{
    double wsum = 0, esum = 0;
    for (int j = 0; j < nr->n; j++) {
        double w = 1.0 / (nr->d[j] + 1e-12);
        wsum += w;
        esum += w * nr->e[j];
    }
    return esum / wsum;
}

/* NS time on the table's GPU, off the table's rows (exact ones answered before): the
 * efficiency of the 6 nearest rows in log2(m, n, batch) times the roofline: INTERPOLATED when
 * those rows bracket the query in every dimension, else ROOFLINE scaled by the nearest row's
 * efficiency (extrapolation). No rows at all: the pure roofline. */
static dm_cost_source table_ns_rows(const dm_costs *c, int64_t m, int64_t n, int batch, int a, int tall, double roof,
                                    double *us)
{
    double q[4] = {lg(m), lg(n), 0, lg(batch)};
    near_rows nr;
    if (nearest_rows(c, OP_NS, a, tall, 0, m, n, 0, batch, 6, &nr, us)) return DM_COST_MEASURED;
    if (!nr.n) {
        *us = roof;
        return DM_COST_ROOFLINE;
    }
    int inside = 1;
    for (int d = 0; d < 4; d++) {
        int below = 0, above = 0;
        for (int j = 0; j < nr.n; j++) {
            below |= nr.p[j][d] <= q[d] + 1e-9;
            above |= nr.p[j][d] >= q[d] - 1e-9;
        }
        inside &= below && above;
    }
    *us = roof * exp(inside ? idw_log_eff(&nr) : nr.e[0]);
    return inside ? DM_COST_INTERPOLATED : DM_COST_ROOFLINE;
}

/* The same for a matrix whose one NS is compute-bound on the roofline (its FLOPs take longer
 * than its launches): the NS_NEAR shapes (m, n) with rows of the query's orientation nearest it
 * in log2(m, n) each give their efficiency at the query's batch, interpolated along their own
 * rows' batches (linear in log2 batch, held at the ends), averaged with inverse squared distance
 * weights. Shape and batch kept apart because a matrix that fills the GPU runs at nearly one
 * efficiency per matrix at any batch (the table's 3072 x 8192 Gram: 1646, 1588 and 1594 us a
 * matrix at batches 1, 20 and 32), so its own size measured at batch 1 says more than shapes of
 * its batch but half its size, which the distance in batch let outvote it
 * (traces/validate/h200-33-unseen: 4096 x 12288 and 4096 x 14336 Gram priced from 2048-sized
 * rows, 14-20% short). A launch-bound matrix's batch does change its efficiency (the launches
 * are shared), and the rows of other shapes at its batch say how: table_ns_rows. INTERPOLATED
 * when the shapes bracket the query in m and in n, else ROOFLINE (the nearest shape's
 * efficiency alone). Only compute-bound shapes of the query's alignment class (ns_align) count
 * when the table has such, else the aligned shapes. */
#define NS_NEAR 6
static dm_cost_source table_ns_shapes(const dm_costs *c, int64_t m, int64_t n, int batch, dm_ns_algo algo, int a,
                                      int tall, double roof, double *us)
{
    int ns = 0, al = ns_align(m, n), have = 0;
    double qm = lg(m), qn = lg(n), qb = lg(batch);
    for (int i = 0; i < c->n_rows && !have && al < 8; i++) /* compute-bound rows of the query's alignment class,
                                                               else the aligned rows */
        have = c->rows[i].op == OP_NS && c->rows[i].algo == a && c->rows[i].tall == tall && c->rows[i].align == al &&
               ns_compute_bound(c->gpu, c->rows[i].m, c->rows[i].n, algo);
    if (!have) al = 8;
    struct {
        int64_t m, n;
        double d;
    } sh[NS_NEAR];
    for (int i = 0; i < c->n_rows; i++) { /* the nearest shapes */
        const row *r = &c->rows[i];
        if (r->op != OP_NS || r->algo != a || r->tall != tall || r->align != al) continue;
        if (al < 8 && !ns_compute_bound(c->gpu, r->m, r->n, algo)) continue; /* a class's few launch-bound rows */
        int seen = 0;
        for (int j = 0; j < ns && !seen; j++) seen = sh[j].m == r->m && sh[j].n == r->n;
        if (seen) continue;
        double d = (lg(r->m) - qm) * (lg(r->m) - qm) + (lg(r->n) - qn) * (lg(r->n) - qn);
        int pos = ns < NS_NEAR ? ns++ : NS_NEAR;
        while (pos > 0 && sh[pos - 1].d > d) {
            if (pos < NS_NEAR) sh[pos] = sh[pos - 1];
            pos--;
        }
        if (pos < NS_NEAR) sh[pos].m = r->m, sh[pos].n = r->n, sh[pos].d = d;
    }
    if (!ns) {
        *us = roof;
        return DM_COST_ROOFLINE;
    }
    double wsum = 0, esum = 0, e0 = 0;
    int below_m = 0, above_m = 0, below_n = 0, above_n = 0;
    for (int j = 0; j < ns; j++) {
        /* this shape's efficiency at the query's batch: its rows nearest below and above it */
        double lo_b = -1, hi_b = -1, lo_e = 0, hi_e = 0;
        const row *top = NULL; /* its row of the largest batch */
        for (int i = 0; i < c->n_rows; i++) {
            const row *r = &c->rows[i];
            if (r->op != OP_NS || r->algo != a || r->m != sh[j].m || r->n != sh[j].n || r->tall != tall) continue;
            double b = lg(r->batch), e = log(r->median_us / row_roofline_us(c->gpu, r));
            if (b <= qb && (lo_b < 0 || b > lo_b)) lo_b = b, lo_e = e;
            if (b >= qb && (hi_b < 0 || b < hi_b)) hi_b = b, hi_e = e;
            if (!top || r->batch > top->batch) top = r;
        }
        double e = lo_b < 0 ? hi_e : hi_b < 0 || hi_b - lo_b < 1e-9 ? lo_e : lo_e + (hi_e - lo_e) * (qb - lo_b) / (hi_b - lo_b);
        if (hi_b < 0 && top->batch < batch) /* past its largest batch: that batch's time per matrix, no more
                                               launches shared (held efficiency would share them further:
                                               Moonlight's 1408 x 2048 Gram at 32 priced 168 us a matrix
                                               from 181 at 8, and chosen over direct; it ran 218,
                                               traces/validate/h200-37) */
            e = log(top->median_us / top->batch * batch / dm_roofline_ns_us(c->gpu, top->m, top->n, batch, algo));
        if (j == 0) e0 = e;
        double w = 1.0 / (sh[j].d + 1e-12);
        wsum += w;
        esum += w * e;
        below_m |= lg(sh[j].m) <= qm + 1e-9, above_m |= lg(sh[j].m) >= qm - 1e-9;
        below_n |= lg(sh[j].n) <= qn + 1e-9, above_n |= lg(sh[j].n) >= qn - 1e-9;
    }
    int inside = below_m && above_m && below_n && above_n;
    *us = roof * exp(inside ? esum / wsum : e0);
    return inside ? DM_COST_INTERPOLATED : DM_COST_ROOFLINE;
}

/* 1 and *us when the table has an NS row of (algo column a, orientation, m, n, batch). */
static int ns_exact(const dm_costs *c, int a, int tall, int64_t m, int64_t n, int batch, double *us)
{
    for (int i = 0; i < c->n_rows; i++) {
        const row *r = &c->rows[i];
        if (r->op == OP_NS && r->algo == a && r->tall == tall && r->m == m && r->n == n && r->batch == batch) {
            *us = r->median_us;
            return 1;
        }
    }
    return 0;
}

/* NS time on the table's GPU: the row of the query's shape, orientation and batch when there is
 * one, else table_ns_shapes for a compute-bound matrix, table_ns_rows for a launch-bound one. */
static dm_cost_source table_ns(const dm_costs *c, int64_t m, int64_t n, int batch, dm_ns_algo algo, int eager,
                               int tall, double *us)
{
    double roof = dm_roofline_ns_us(c->gpu, m, n, batch, algo);
    int a = (eager ? ALGO_EAGER : 0) + (int)algo;
    if (ns_exact(c, a, tall, m, n, batch, us)) return DM_COST_MEASURED;
    return ns_compute_bound(c->gpu, m, n, algo) ? table_ns_shapes(c, m, n, batch, algo, a, tall, roof, us)
                         : table_ns_rows(c, m, n, batch, a, tall, roof, us);
}

#define NEAR_LOG2 3.0
/* Rows of (op, algo, alignment class a) that price a kernel at `batch` (1 for an expert batch
 * priced from single GEMMs): 1 and *us from the row of its shape (*src MEASURED) or from the IDW
 * efficiency of the K_MAX nearest when the nearest lies within NEAR_LOG2 (INTERPOLATED); else 0,
 * with the nearest rows in *nr. A batch priced from single GEMMs takes `batch` times one's time. */
static int kernel_rows_near(const dm_costs *c, row_op op, int algo, int a, const dm_kernel *k, int64_t batch, double roof,
                            near_rows *nr, double *us, dm_cost_source *src)
{
    double one;
    nr->n = 0;
    if (!c->op_rows[op][algo]) return 0;
    if (nearest_rows(c, op, algo, 0, a, k->m, k->n, k->k, batch, K_MAX, nr, &one)) {
        if (batch == k->batch) {
            *us = one;
            *src = DM_COST_MEASURED;
        } else { /* one GEMM of an expert batch measured: the batch at its efficiency */
            dm_kernel g = *k;
            g.kind = DM_KERN_GEMM, g.batch = 1, g.count = 1;
            *us = roof * one / dm_roofline_kernel_us(c->gpu, &g);
            *src = DM_COST_INTERPOLATED;
        }
        return 1;
    }
    if (nr->n && nr->d[0] <= NEAR_LOG2 * NEAR_LOG2) {
        *us = roof * exp(idw_log_eff(nr));
        *src = DM_COST_INTERPOLATED;
        return 1;
    }
    return 0;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* A kernel whose alignment shows in its time: a GEMM whose FLOPs take at least one launch on the
 * roofline (the table's unaligned GEMM rows of 32 tokens run at their aligned price, x0.7-1.2), an
 * elementwise pass whose bytes take at least 1 us at the HBM rate (5 MB on an H200; the table's
 * passes of 32 tokens take 2-3 us whatever their width, Qwen2.5-VL's 3420-wide ones at 1024
 * tokens, 14-21 MB, 1.5-2x their aligned neighbours). */
static int align_shows(const dm_gpu *gpu, const dm_kernel *k)
{
    double f, b;
    shape_work(k->kind, k->op, k->m, k->n, k->k, 1, BF16_BYTES, &f, &b);
    return k->kind == DM_KERN_ELEM ? b / gpu->hbm_Bps * 1e6 >= 1.0 : f / gpu->bf16_flops * 1e6 >= gpu->launch_us;
}

static int class_group(int a) { return (a & 15) == 1 ? GROUP_ODD : GROUP_PART; }

/* The bucket of a class ratio: per kernel op and class, per GEMM op and group, and one pool of
 * every elementwise op's (their one unaligned class). */
static int bucket_class(int op, int a) { return op * (CLASSES + 2) + a; }
static int bucket_group(int op, int g) { return op * (CLASSES + 2) + CLASSES + g; }

/* The measured ratio of unaligned kernels to the aligned rows' price of their own shapes: for
 * every row of an unaligned class whose alignment shows (align_shows), ln(its time / the aligned
 * rows' IDW price there), the median per op and class, per GEMM op and group, and over every
 * elementwise op. The table's GEMM rows (traces/costs/h200-work-cool.csv: the LM-head grids of
 * traces/device/aligngrid-2026-12-05 and Qwen2.5-VL's 3420) hold it within a narrow band per
 * class: odd (class 1) 5.6x fwd, 5.6x dgrad, 5.2x wgrad (58-62 rows, each within 0.85-1.25 of its
 * median); two odd dimensions (17) 6.1x, 5.4x; aligned to 2 or 4 (2, 4, 18, 20) 2.7-3.0x. The
 * executor's elementwise kernels load 8 elements at a time only when the width is a multiple of 8
 * (kernels/wk_cuda.cu vec8): Qwen2.5-VL's 3420-wide passes at 1024 tokens take 1.5-2.0x their
 * aligned price. table_kernel prices an unaligned kernel with no row of its class near it
 * (NEAR_LOG2) as the aligned price times this ratio, where the aligned price alone was 1.5-7x short
 * (tools/ns_loo --gemm and --rows elem: 3420's rows left out priced -31% to -76%). */
static int set_class_ratios(dm_costs *c, dm_err *err)
{
    if (c->roofline || !c->gpu) return 0;
    double *lr = dm_malloc((size_t)(c->n_rows ? c->n_rows : 1) * sizeof *lr, err), *v = NULL;
    int *bk = dm_malloc((size_t)(c->n_rows ? c->n_rows : 1) * 2 * sizeof *bk, err), n_lr = 0; /* its two buckets */
    if (!lr || !bk || !(v = dm_malloc((size_t)(c->n_rows ? c->n_rows : 1) * sizeof *v, err))) {
        free(lr), free(bk);
        return -1;
    }
    for (int i = 0; i < c->n_rows; i++) {
        const row *r = &c->rows[i];
        if (!kernel_row(r->op, r->algo) || r->op == OP_BGEMM || r->align == 8) continue;
        dm_kernel k;
        memset(&k, 0, sizeof k);
        k.kind = r->op == OP_GEMM ? DM_KERN_GEMM : DM_KERN_ELEM, k.op = (dm_kern_op)(r->algo - ALGO_KERN);
        k.m = r->m, k.n = r->n, k.k = r->k, k.batch = 1, k.count = 1, k.param = -1, k.slot = -1;
        if (!align_shows(c->gpu, &k)) continue;
        near_rows nr;
        double us;
        dm_cost_source src;
        if (!kernel_rows_near(c, r->op, r->algo, 8, &k, 1, dm_roofline_kernel_us(c->gpu, &k), &nr, &us, &src)) continue;
        lr[n_lr] = log(r->median_us / us);
        bk[2 * n_lr] = bucket_class(k.op, r->align);
        bk[2 * n_lr + 1] = r->op == OP_GEMM ? bucket_group(k.op, class_group(r->align)) : BUCKET_ELEM_POOL;
        n_lr++;
    }
    for (int b = 0; b < BUCKETS; b++) {
        int n = 0;
        for (int j = 0; j < n_lr; j++)
            if (bk[2 * j] == b || bk[2 * j + 1] == b) v[n++] = lr[j];
        if (!n) continue;
        qsort(v, (size_t)n, sizeof *v, cmp_double);
        c->ratio_lr[b] = n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
        c->ratio_n[b] = n;
    }
    free(lr), free(bk), free(v);
    return 0;
}

/* A workload kernel's one launch on the table's GPU: the row of its shape, else the IDW efficiency
 * of its kind's K_MAX nearest rows when the nearest is within NEAR_LOG2; an expert batch (a
 * batched fwd, dgrad or wgrad) without such rows takes the GEMM rows of its op at its (m, n, k):
 * it is `batch` GEMMs of one shape, and the GEMM grid covers shapes the expert rows of the
 * bundled MoE models do not (traces/validate/h200-33-unseen: Mixtral's 8 experts of 14336 x 4096
 * at 512 routed tokens, priced at the roofline, 13-26% short). Else the nearest row's efficiency
 * (an extrapolation, as for NS; the roofline alone ran such kernels at the tensor cores' peak),
 * and the roofline when the kind has no rows. Both of the last are reported as the roofline.
 * A GEMM or elementwise pass whose alignment class is not 8 (gemm_align, elem_align) is priced
 * that way from rows of its own class near it, else at the aligned price times its class's
 * measured ratio (set_class_ratios; a table without such rows prices it as aligned); an aligned
 * one from aligned rows only. */
static dm_cost_source table_kernel(const dm_costs *c, const dm_kernel *k, double roof, double *us)
{
    row_op op = k->kind == DM_KERN_GEMM ? OP_GEMM : k->kind == DM_KERN_BGEMM ? OP_BGEMM : OP_ELEM;
    int algo = ALGO_KERN + (int)k->op;
    near_rows nr, ng;
    dm_cost_source src;
    if ((unsigned)k->op >= DM_KOP__COUNT) {
        *us = roof;
        return DM_COST_ROOFLINE;
    }
    int a = kernel_align(op, algo, k->m, k->n, k->k);
    int experts = op == OP_BGEMM && k->op <= DM_KOP_WGRAD; /* may fall back on single GEMMs of its shape */
    if (a != 8 && (kernel_rows_near(c, op, algo, a, k, k->batch, roof, &nr, us, &src) ||
                  (experts && kernel_rows_near(c, OP_GEMM, algo, a, k, 1, roof, &ng, us, &src))))
        return src;
    dm_cost_source s = DM_COST_ROOFLINE;
    if (!kernel_rows_near(c, op, algo, 8, k, k->batch, roof, &nr, us, &src) &&
        !(experts && kernel_rows_near(c, OP_GEMM, algo, 8, k, 1, roof, &ng, us, &src)))
        *us = nr.n ? roof * exp(nr.e[0]) : roof;
    else
        s = src;
    if (a != 8 && (k->kind == DM_KERN_ELEM || k->op <= DM_KOP_WGRAD) && align_shows(c->gpu, k)) {
        /* no row of its class near: the aligned price times its class's measured ratio (set_class_ratios) */
        int b = bucket_class(k->op, a), p = k->kind == DM_KERN_ELEM ? BUCKET_ELEM_POOL : bucket_group(k->op, class_group(a));
        if (c->ratio_n[b])
            *us *= exp(c->ratio_lr[b]);
        else if (c->ratio_n[p])
            *us *= exp(c->ratio_lr[p]);
    }
    return s;
}

int dm_costs_kernel_rows(const dm_costs *c, dm_kern_kind kind, dm_kern_op op)
{
    if ((unsigned)op >= DM_KOP__COUNT || (unsigned)kind >= DM_KERN__COUNT) return 0;
    row_op o = kind == DM_KERN_GEMM ? OP_GEMM : kind == DM_KERN_BGEMM ? OP_BGEMM : OP_ELEM;
    return c->op_rows[o][ALGO_KERN + (int)op];
}

int dm_costs_op_rows(const dm_costs *c, const char *op, const char *algo)
{
    int o = find_name(op, op_names, OP__COUNT), n = 0;
    if (o < 0) return 0;
    for (int a = 0; a < N_ALGOS; a++)
        if (!algo || !strcmp(algo, algo_name(a))) n += c->op_rows[o][a];
    return n;
}

double dm_costs_kernel_us(const dm_costs *c, const dm_gpu *target, const dm_kernel *k, dm_cost_source *src)
{
    if (!target) target = c->gpu;
    double count = (double)(k->count > 0 ? k->count : 1), us;
    dm_cost_source s;
    if (c->roofline) {
        us = dm_roofline_kernel_us(target, k);
        s = DM_COST_ROOFLINE;
    } else {
        double roof = dm_roofline_kernel_us(c->gpu, k), f, b;
        s = table_kernel(c, k, roof, &us);
        if (target != c->gpu) {
            kernel_work(k, &f, &b);
            us = project_us(c, target, us, f, b, 1, 1);
            if (s != DM_COST_ROOFLINE) s = DM_COST_PROJECTED;
        }
    }
    if (src) *src = s;
    return us * count;
}

double dm_costs_ns_us(const dm_costs *c, const dm_gpu *target, int64_t m, int64_t n, int batch,
                      dm_ns_algo algo, dm_cost_source *src)
{
    return dm_costs_ns_launch_us(c, target, m, n, batch, algo, 0, src);
}

/* An eager NS (kernels launched one by one) of a shape whose graph row the table holds but whose
 * eager row it does not: that graph row times the eager-to-graph ratio of the nearest shapes that
 * have both rows at this batch and orientation (inverse squared distance weights in log2(m, n) over
 * the NS_NEAR nearest, in logs). The ratio is smooth over shapes (0.89-1.22 on the H200 table,
 * higher for small matrices, whose launches weigh more) where the eager rows themselves are not:
 * each shape left out of the table, its eager row priced this way 3.9% off on average against 7.4%
 * interpolated from the other eager rows (28 shapes). 1 and *us when it applies. */
static int ns_eager_from_graph(const dm_costs *c, int64_t m, int64_t n, int batch, dm_ns_algo algo, int tall, double *us)
{
    int ga = (int)algo, ea = ALGO_EAGER + (int)algo;
    double graph, pair, q[4] = {lg(m), lg(n), 0, 0};
    near_rows nr;
    nr.n = 0;
    if (!ns_exact(c, ga, tall, m, n, batch, &graph)) return 0;
    for (int i = 0; i < c->n_rows; i++) { /* every eager row of this batch and orientation with its graph row */
        const row *e = &c->rows[i];
        if (e->op != OP_NS || e->algo != ea || e->tall != tall || e->batch != batch ||
            !ns_exact(c, ga, tall, e->m, e->n, batch, &pair))
            continue;
        double p[4] = {lg(e->m), lg(e->n), 0, 0};
        near_add(&nr, NS_NEAR, (p[0] - q[0]) * (p[0] - q[0]) + (p[1] - q[1]) * (p[1] - q[1]), log(e->median_us / pair), p);
    }
    if (!nr.n) return 0;
    *us = graph * exp(idw_log_eff(&nr));
    return 1;
}

double dm_costs_ns_launch_us(const dm_costs *c, const dm_gpu *target, int64_t m, int64_t n, int batch,
                             dm_ns_algo algo, int eager, dm_cost_source *src)
{
    int want_tall = m > n;
    if (m > n) {
        int64_t t = m;
        m = n;
        n = t;
    }
    if (batch < 1) batch = 1;
    if (!target) target = c->gpu;
    int slot, ek = want_tall ? 2 | (eager != 0) : eager != 0; /* (the orientation asked kept in the key) */
    const ns_memo_e *hit = memo_find(c->memo, target, m, n, batch, (int)algo, ek, &slot);
    if (hit) {
        if (src) *src = hit->src;
        return hit->us;
    }
    dm_cost_source s;
    double us;
    if (c->roofline) {
        us = dm_roofline_ns_us(target, m, n, batch, algo);
        s = DM_COST_ROOFLINE;
    } else {
        int ea = ALGO_EAGER + (int)algo, e = eager && c->op_rows[OP_NS][ea];
        /* tall rows where the table has them for this launch mode, else the wide ones */
        int tall = want_tall && c->tall_rows[e ? ea : (int)algo];
        s = table_ns(c, m, n, batch, algo, e, tall, &us);
        if (e && s != DM_COST_MEASURED && ns_eager_from_graph(c, m, n, batch, algo, tall, &us)) s = DM_COST_INTERPOLATED;
        if (eager && !e) { /* no eager rows: the graph's time, and at least a launch floor per kernel launch */
            double floor = (double)batch * ns_launches(algo) * c->gpu->launch_us;
            if (us < floor) us = floor;
        }
        if (target != c->gpu) {
            us = project_us(c, target, us, batch * dm_ns_flops(m, n, algo), batch * dm_ns_bytes(m, n, algo),
                            eager ? (double)batch * ns_launches(algo) : ns_launches(algo), 0);
            if (s != DM_COST_ROOFLINE) s = DM_COST_PROJECTED;
        }
    }
    if (c->memo && memo_grow(c->memo)) {
        memo_find(c->memo, target, m, n, batch, (int)algo, ek, &slot);
        if (slot >= 0) {
            ns_memo_e *e = &c->memo->e[slot];
            *e = (ns_memo_e){target, {0}, m, n, batch, (int)algo, ek, 1, s, us};
            memo_gpu(target, e->g);
            c->memo->n++;
        }
    }
    if (src) *src = s;
    return us;
}

double dm_costs_update_op_us(const dm_costs *c, const dm_gpu *target, const dm_program *p, const dm_op *op,
                             dm_cost_source *src)
{
    const char *name = op->kind == DM_OP_ADAMW ? "adamw" : "muon_update";
    dm_kern_op kop = op->kind == DM_OP_ADAMW ? DM_KOP_ADAMW : DM_KOP_MUON_UPDATE;
    dm_cost_source s = DM_COST_MEASURED, one;
    double us = 0;
    const dm_work *w = p && op->work >= 0 && op->work < p->n_works ? &p->works[op->work] : NULL;
    for (int i = 0; w && i < w->n; i++)
        if (w->k[i].op != kop) w = NULL; /* not a work of update kernels: priced as without one */
    if (w && w->n) {
        for (int i = 0; i < w->n; i++) {
            double cnt = (double)(w->k[i].count > 0 ? w->k[i].count : 1);
            us += cnt * dm_costs_elementwise_us(c, target, name, w->k[i].m, &one);
            if (one > s) s = one; /* the least direct source of its tensors' */
        }
    } else {
        double bpp = dm_elementwise_bytes_per_param(name);
        us = dm_costs_elementwise_us(c, target, name, bpp > 0 ? (int64_t)llround(op->bytes / bpp) : 1, &s);
    }
    if (src) *src = s;
    return us;
}

dm_ns_algo dm_costs_best_algo(const dm_costs *c, const dm_gpu *target, int64_t m, int64_t n,
                              int batch, double *us)
{
    double d = dm_costs_ns_us(c, target, m, n, batch, DM_NS_DIRECT, NULL);
    double g = dm_costs_ns_us(c, target, m, n, batch, DM_NS_GRAM, NULL);
    if (us) *us = g < d ? g : d;
    return g < d ? DM_NS_GRAM : DM_NS_DIRECT;
}

double dm_costs_elementwise_us(const dm_costs *c, const dm_gpu *target, const char *op,
                               int64_t elems, dm_cost_source *src)
{
    if (!target) target = c->gpu;
    if (elems < 1) elems = 1;
    /* adamw: its rows; muon_update: the apply rows (the executor's op), else the old rows that
     * time momentum and apply together; muon_prep: the prep rows */
    row_op want = !strcmp(op, "adamw") ? OP_ADAMW : OP_MUON_UPDATE;
    int want_algo = !strcmp(op, "muon_prep")                                        ? ALGO_PREP
                    : want == OP_MUON_UPDATE && c->op_rows[OP_MUON_UPDATE][ALGO_APPLY] ? ALGO_APPLY
                                                                                     : ALGO_LEGACY;
    double us = 0;
    dm_cost_source s = DM_COST_ROOFLINE;
    if (c->roofline) {
        us = dm_roofline_elementwise_us(target, op, elems);
    } else {
        /* efficiency over log(elements), linear (GSL) between rows, clamped outside */
        int np = 0;
        double xs[256], ys[256];
        for (int i = 0; i < c->n_rows && np < 256; i++) {
            const row *r = &c->rows[i];
            if (r->op != want || r->algo != want_algo) continue;
            if (r->n == elems) {
                us = r->median_us;
                s = DM_COST_MEASURED;
                np = -1;
                break;
            }
            double x = log((double)r->n);
            int pos = np;
            while (pos > 0 && xs[pos - 1] > x) {
                xs[pos] = xs[pos - 1];
                ys[pos] = ys[pos - 1];
                pos--;
            }
            if (pos > 0 && xs[pos - 1] == x) { /* duplicate size: keep the first */
                for (int k = pos; k < np; k++) {
                    xs[k] = xs[k + 1];
                    ys[k] = ys[k + 1];
                }
                continue;
            }
            xs[pos] = x;
            ys[pos] = log(r->median_us / dm_roofline_elementwise_us(c->gpu, op, r->n));
            np++;
        }
        double roof = dm_roofline_elementwise_us(c->gpu, op, elems), x = log((double)elems);
        if (np == 0) {
            us = roof;
        } else if (np > 0 && (x < xs[0] || x > xs[np - 1] || np == 1)) {
            us = roof * exp(x < xs[0] ? ys[0] : ys[np - 1]);
        } else if (np > 0) {
            gsl_interp *gi = gsl_interp_alloc(gsl_interp_linear, (size_t)np);
            if (gi && gsl_interp_init(gi, xs, ys, (size_t)np) == GSL_SUCCESS) {
                us = roof * exp(gsl_interp_eval(gi, xs, ys, x, NULL));
                s = DM_COST_INTERPOLATED;
            } else {
                us = roof;
            }
            gsl_interp_free(gi);
        }
        if (target != c->gpu) {
            us = project_us(c, target, us, 0, (double)elems * dm_elementwise_bytes_per_param(op), 1, 0);
            if (s != DM_COST_ROOFLINE) s = DM_COST_PROJECTED;
        }
    }
    if (src) *src = s;
    return us;
}

/* ---- the roofline table -------------------------------------------------------------------- */

static int cmp_shape(const void *a, const void *b)
{
    const int64_t *x = a, *y = b;
    if (x[0] != y[0]) return x[0] < y[0] ? -1 : 1;
    return (x[1] > y[1]) - (x[1] < y[1]);
}

int dm_costs_write_roofline(const char *path, const dm_gpu *gpu, const int64_t (*extra)[2],
                            int n_extra, const char *command, dm_err *err)
{
    int cap = 64 + n_extra, ns = 0;
    int64_t(*shapes)[2] = dm_malloc((size_t)cap * sizeof *shapes, err);
    if (!shapes) return -1;
    for (int64_t a = 128; a <= 32768; a *= 2)
        for (int64_t b = a; b <= 32768; b *= 2) {
            if (ns == cap) break;
            shapes[ns][0] = a;
            shapes[ns++][1] = b;
        }
    for (int i = 0; i < n_extra && ns < cap; i++) {
        int64_t m = extra[i][0] < extra[i][1] ? extra[i][0] : extra[i][1];
        int64_t n = extra[i][0] < extra[i][1] ? extra[i][1] : extra[i][0];
        shapes[ns][0] = m;
        shapes[ns++][1] = n;
    }
    if (ns > 1) qsort(shapes, (size_t)ns, sizeof *shapes, cmp_shape);
    dm_out *o = dm_out_open(path, err);
    if (!o) {
        free(shapes);
        return -1;
    }
    FILE *f = dm_out_file(o);
    fprintf(f, "# dmuon-costs-2\n# source: roofline\n# gpu: %s\n", gpu->name);
    fprintf(f, "# note: NOT MEASURED. Roofline: FLOPs (dm_ns_flops_ex, 5 iterations) over the dense bf16 "
               "peak %.4g FLOP/s, HBM bytes over %.4g B/s, plus %.1f us launch floor per kernel\n",
            gpu->bf16_flops, gpu->hbm_Bps, gpu->launch_us);
    fprintf(f, "# cuda: -\n# cublas: -\n# date: -\n# command: %s\n", command ? command : "-");
    fprintf(f, "gpu,op,algo,m,n,k,batch,dtype,median_us,min_us,max_us\n");
    static const int batches[] = {1, 2, 4, 8, 16, 32};
    for (int i = 0; i < ns; i++) {
        if (i && shapes[i][0] == shapes[i - 1][0] && shapes[i][1] == shapes[i - 1][1]) continue;
        for (int a = 0; a < 2; a++)
            for (int b = 0; b < 6; b++) {
                double us = dm_roofline_ns_us(gpu, shapes[i][0], shapes[i][1], batches[b], (dm_ns_algo)a);
                fprintf(f, "%s,ns,%s,%lld,%lld,0,%d,bf16,%.3f,%.3f,%.3f\n", gpu->name, algo_base[a],
                        (long long)shapes[i][0], (long long)shapes[i][1], batches[b], us, us, us);
            }
    }
    static const char *elem_ops[] = {"muon_update", "adamw"};
    for (int o = 0; o < 2; o++)
        for (int e = 10; e <= 32; e += 2) {
            double us = dm_roofline_elementwise_us(gpu, elem_ops[o], INT64_C(1) << e);
            fprintf(f, "%s,%s,-,1,%lld,0,1,fp32,%.3f,%.3f,%.3f\n", gpu->name, elem_ops[o],
                    (long long)(INT64_C(1) << e), us, us, us);
        }
    free(shapes);
    return dm_out_commit(o, err);
}

int dm_costs_ns_clocked(const dm_costs *c) { return c && c->ns_full; }

int dm_costs_full_clock(const dm_costs *c, int ns)
{
    if (!c || c->roofline) return 1; /* the roofline is the datasheet's full clock */
    if (ns && c->ns_full) return 1;  /* the NS rows' own clocks bring them there */
    return c->clock_rows[ns != 0][1] > 0 && c->clock_rows[ns != 0][0] == 0;
}
