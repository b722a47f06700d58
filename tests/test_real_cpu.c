/* test_real_cpu.c: the real executor's CPU backend under MPI (run by tests/real_cpu.sh with
 * mpirun -np 1..4). For every strategy, programs of the shapes sched.h describes are built by
 * hand here (independently of the scheduler) and run for K steps on a tiny model written by the
 * test; then, on rank 0:
 *  - the parameters equal bit for bit those of a one-rank run over the union of all ranks'
 *    tokens that accumulates the weight gradient over the ranks' token chunks in rank order
 *    (the order the executor's collectives sum in); hierarchical dmuon on more than one node
 *    sums per node first, so there only the bound below holds; HSDP sums per shard group first,
 *    and its one-rank run does the same (grad_chunk_group), bit for bit again;
 *  - against a one-rank run with one GEMM over all tokens they agree within a relative
 *    Frobenius error of 1e-5 per matrix (only the order of float sums differs);
 * The same for the scheduler's programs (sched_build) over strategies and options, against
 * its own one-rank programs.
 *  - two identical runs give bit-identical parameters and losses;
 *  - a NaN injected into one rank's gradient skips the step on every rank, names the
 *    parameter, and leaves every parameter as it was;
 *  - the data-hazard check finds a gradient collective and a weight all-gather that lost their
 *    dependencies; a checkpoint save that fails on one rank leaves nothing behind.
 * Only rank 0 prints TAP. */
#include "config.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "model.h"
#include "program.h"
#include "real.h"
#include "real_work.h"
#include "sched.h"
#include "tap.h"

static int g_rank, g_size;

#define K_STEPS 3
#define TOKENS 16

static const char *MODEL_JSON =
    "{\"format\": \"dmuon-model-1\", \"name\": \"tiny\", \"source\": \"test_real_cpu\",\n"
    " \"stacks\": [{\"name\": \"embed\", \"layers\": 1}, {\"name\": \"layers\", \"layers\": 3}],\n"
    " \"tensors\": [\n"
    "  {\"name\": \"embed.weight\", \"shape\": [40, 12], \"count\": 1, \"stack\": \"embed\", \"role\": \"adamw\"},\n"
    "  {\"name\": \"layers.*.q.weight\", \"shape\": [12, 12], \"count\": 3, \"stack\": \"layers\", \"role\": \"muon\"},\n"
    "  {\"name\": \"layers.*.k.weight\", \"shape\": [4, 12], \"count\": 3, \"stack\": \"layers\", \"role\": \"muon\"},\n"
    "  {\"name\": \"layers.*.up.weight\", \"shape\": [20, 12], \"count\": 3, \"stack\": \"layers\", \"role\": \"muon\"},\n"
    "  {\"name\": \"layers.*.down.weight\", \"shape\": [12, 20], \"count\": 3, \"stack\": \"layers\", \"role\": \"muon\"},\n"
    "  {\"name\": \"layers.*.norm.weight\", \"shape\": [12], \"count\": 3, \"stack\": \"layers\", \"role\": \"adamw\"}\n"
    " ]}\n";

/* ---- hand-built programs --------------------------------------------------------------- */

typedef enum { S_SINGLE, S_DDP, S_DMUON, S_DMUON_NONE, S_ADAMW, S_FSDP, S_RR } strat;
static const char *strat_name[] = {"single", "muon-ddp", "dmuon", "dmuon-overlap-none", "adamw",
                                   "muon-fsdp", "muon-rr"};

typedef struct bld {
    dm_program *p;
    const dm_matrix *mx;
    int64_t n;
    int world;
    int grads;          /* the next collectives carry gradients (all-gathers say so) */
    dm_err err;
    int fail;
} bld;

static int add(bld *b, int rank, dm_op op, const int *deps, int nd, const int64_t *par, int np)
{
    int id = dm_program_add_op(b->p, rank, &op, deps, nd, par, np, &b->err);
    if (id < 0) b->fail = 1;
    return id;
}

static int coll_all(bld *b, dm_op_kind k, dm_stream s, int root, const int64_t *par, int np,
                    int *ids, int **deps, int *nd)
{
    dm_op op = dm_op_init(k, s);
    if (b->grads) op.payload = DM_PAYLOAD_GRADS; /* the gradient all-gather of muon-fsdp */
    op.coll = dm_program_new_coll(b->p);
    op.group = b->world;
    op.root = root;
    for (int r = 0; r < b->p->nranks; r++) ids[r] = add(b, r, op, deps ? deps[r] : NULL, nd ? nd[r] : 0, par, np);
    return op.coll;
}

static int64_t layer_list(bld *b, int layer, int role, int owner, int nr, int64_t *out)
{
    int64_t k = 0;
    for (int64_t i = 0; i < b->n; i++)
        if (b->mx[i].layer == layer && (role < 0 || (int)b->mx[i].role == role) &&
            (owner < 0 || i % nr == owner))
            out[k++] = i;
    return k;
}

/* The hand-built program of strategy s for nr ranks (see the file comment in sched.h). */
static dm_program *build(strat s, const dm_model *m, const dm_matrix *mx, int64_t n, int nr)
{
    bld b = {0};
    b.mx = mx;
    b.n = n;
    b.p = dm_program_new(nr, nr, m->name, strat_name[s], "test", "", TOKENS, &b.err);
    if (!b.p) return NULL;
    int *all = malloc(sizeof(int) * (size_t)nr);
    for (int r = 0; r < nr; r++) all[r] = r;
    b.world = dm_program_group(b.p, all, nr, &b.err);
    int L = m->n_layers;
    int64_t *par = malloc(sizeof(int64_t) * (size_t)(n + 1));
    int **fetch = calloc((size_t)L, sizeof(int *)); /* per layer, per rank: fetch ops */
    int **nfetch = calloc((size_t)L, sizeof(int *));
    int *ids = malloc(sizeof(int) * (size_t)nr);
    int *fwd = malloc(sizeof(int) * (size_t)nr * (size_t)L), *bwd = malloc(sizeof(int) * (size_t)nr * (size_t)L);
    int **gcol = calloc((size_t)L, sizeof(int *)); /* per layer, per rank: last grad collective */
    for (int l = 0; l < L; l++) {
        fetch[l] = calloc((size_t)nr * (size_t)(nr + 1), sizeof(int));
        nfetch[l] = calloc((size_t)nr, sizeof(int));
        gcol[l] = malloc(sizeof(int) * (size_t)nr);
        for (int r = 0; r < nr; r++) gcol[l][r] = -1;
    }
    int is_dmuon = s == S_DMUON || s == S_DMUON_NONE;
    /* 1. parameter fetch */
    for (int l = 0; l < L && nr > 1; l++) {
        if (is_dmuon) {
            for (int o = 0; o < nr; o++) {
                int64_t k = layer_list(&b, l, -1, o, nr, par);
                if (!k) continue;
                coll_all(&b, DM_OP_BROADCAST, DM_STREAM_COMM_LO, o, par, (int)k, ids, NULL, NULL);
                for (int r = 0; r < nr; r++) fetch[l][r * (nr + 1) + nfetch[l][r]++] = ids[r];
            }
        } else if (s == S_ADAMW || s == S_FSDP || s == S_RR) {
            int64_t k = layer_list(&b, l, -1, -1, nr, par);
            if (s == S_RR) { /* the owners' updated matrices (uneven sizes: one broadcast each) */
                for (int o = 0; o < nr; o++) {
                    k = layer_list(&b, l, -1, o, nr, par);
                    if (!k) continue;
                    coll_all(&b, DM_OP_BROADCAST, DM_STREAM_COMM_LO, o, par, (int)k, ids, NULL, NULL);
                    for (int r = 0; r < nr; r++) fetch[l][r * (nr + 1) + nfetch[l][r]++] = ids[r];
                }
            } else {
                coll_all(&b, DM_OP_ALLGATHER, DM_STREAM_COMM_LO, -1, par, (int)k, ids, NULL, NULL);
                for (int r = 0; r < nr; r++) fetch[l][r * (nr + 1) + nfetch[l][r]++] = ids[r];
            }
        }
    }
    /* 2. forward; with overlap none, every forward waits for every fetch */
    for (int l = 0; l < L; l++) {
        dm_op op = dm_op_init(DM_OP_FORWARD, DM_STREAM_COMPUTE);
        op.layer = l;
        for (int r = 0; r < nr; r++) {
            int deps[64], nd = 0;
            for (int ll = 0; ll < L; ll++) {
                if (s != S_DMUON_NONE && ll != l) continue;
                for (int j = 0; j < nfetch[ll][r]; j++) deps[nd++] = fetch[ll][r * (nr + 1) + j];
            }
            fwd[r * L + l] = add(&b, r, op, deps, nd, NULL, 0);
        }
    }
    /* 3./4. backward, reverse order, gradient collective after each */
    for (int l = L - 1; l >= 0; l--) {
        int64_t k = layer_list(&b, l, -1, -1, nr, par);
        dm_op op = dm_op_init(DM_OP_BACKWARD, DM_STREAM_COMPUTE);
        op.layer = l;
        for (int r = 0; r < nr; r++) bwd[r * L + l] = add(&b, r, op, NULL, 0, par, (int)k);
        if (nr == 1) continue;
        int *dp[64], one[64];
        int bd[64];
        for (int r = 0; r < nr; r++) bd[r] = bwd[r * L + l], dp[r] = &bd[r], one[r] = 1;
        if (s == S_DDP || s == S_RR) {
            coll_all(&b, DM_OP_ALLREDUCE, DM_STREAM_COMM_HI, -1, par, (int)k, ids, dp, one);
            for (int r = 0; r < nr; r++) gcol[l][r] = ids[r];
        } else if (is_dmuon) {
            for (int o = 0; o < nr; o++) {
                int64_t ko = layer_list(&b, l, -1, o, nr, par);
                if (!ko) continue;
                coll_all(&b, DM_OP_REDUCE, DM_STREAM_COMM_HI, o, par, (int)ko, ids, dp, one);
                gcol[l][o] = ids[o];
            }
        } else { /* adamw, fsdp: reduce-scatter (fsdp: then all-gather the full gradients) */
            coll_all(&b, DM_OP_REDUCESCATTER, DM_STREAM_COMM_HI, -1, par, (int)k, ids, dp, one);
            if (s == S_FSDP) {
                int rs[64];
                for (int r = 0; r < nr; r++) rs[r] = ids[r], dp[r] = &rs[r];
                b.grads = 1;
                coll_all(&b, DM_OP_ALLGATHER, DM_STREAM_COMM_HI, -1, par, (int)k, ids, dp, one);
                b.grads = 0;
            }
            for (int r = 0; r < nr; r++) gcol[l][r] = ids[r];
        }
    }
    /* 5. optimizer */
    for (int l = L - 1; l >= 0; l--)
        for (int r = 0; r < nr; r++) {
            int dep = gcol[l][r] >= 0 ? gcol[l][r] : bwd[r * L + l];
            if (nr > 1 && gcol[l][r] < 0) continue; /* dmuon: not an owner in this layer */
            int own = is_dmuon || s == S_RR ? r : -1;
            int64_t km = layer_list(&b, l, DM_ROLE_MUON, own, nr, par);
            if (s == S_ADAMW) km = 0;
            for (int64_t j = 0; j < km; j++) {
                dm_op ns = dm_op_init(DM_OP_NS, DM_STREAM_COMPUTE);
                ns.algo = par[j] % 2 ? DM_NS_GRAM : DM_NS_DIRECT; /* both kinds, per matrix */
                int id = add(&b, r, ns, &dep, 1, &par[j], 1);
                dm_op up = dm_op_init(DM_OP_MUON_UPDATE, DM_STREAM_COMPUTE);
                add(&b, r, up, &id, 1, &par[j], 1);
            }
            int64_t ka = s == S_ADAMW ? layer_list(&b, l, -1, -1, nr, par) : layer_list(&b, l, DM_ROLE_ADAMW, own, nr, par);
            if (ka) {
                dm_op ad = dm_op_init(DM_OP_ADAMW, DM_STREAM_COMPUTE);
                add(&b, r, ad, &dep, 1, par, (int)ka);
            }
        }
    for (int l = 0; l < L; l++) free(fetch[l]), free(nfetch[l]), free(gcol[l]);
    free(fetch), free(nfetch), free(gcol), free(ids), free(fwd), free(bwd), free(par), free(all);
    if (b.fail || dm_program_validate(b.p, &b.err) < 0) {
        fprintf(stderr, "build %s: %s\n", strat_name[s], b.err.msg);
        dm_program_free(b.p);
        return NULL;
    }
    return b.p;
}

/* ---- running ------------------------------------------------------------------------------ */

/* Run K steps; on rank 0 returns the weights (else NULL). losses: K entries. */
static float **run(const dm_model *m, dm_program *p, MPI_Comm comm, const real_opts *o, int steps,
                   double *losses, real_step_stats *last, int *rc_out)
{
    dm_err err = {{0}};
    real_exec *ex = NULL;
    float **w = NULL;
    *rc_out = -1;
    if (real_exec_create(m, p, comm, o, &ex, &err) < 0) {
        fprintf(stderr, "create: %s\n", err.msg);
        return NULL;
    }
    for (int s = 0; s < steps; s++) {
        real_step_stats st;
        if (real_exec_step(ex, &st, &err) < 0) {
            fprintf(stderr, "step %d: %s\n", s, err.msg);
            MPI_Abort(MPI_COMM_WORLD, 1);
        }
        if (losses) losses[s] = st.loss;
        if (last) *last = st;
    }
    if (real_exec_weights(ex, &w, &err) < 0) fprintf(stderr, "weights: %s\n", err.msg);
    else *rc_out = 0;
    real_exec_destroy(ex);
    return w;
}

static double max_rel(float **a, float **b, const dm_matrix *mx, int64_t n, int *bitexact)
{
    double worst = 0;
    *bitexact = 1;
    for (int64_t i = 0; i < n; i++) {
        int64_t sz = mx[i].rows * mx[i].cols;
        double d = 0, r = 0;
        for (int64_t e = 0; e < sz; e++) {
            double x = a[i][e], y = b[i][e];
            d += (x - y) * (x - y);
            r += y * y;
            if (memcmp(&a[i][e], &b[i][e], 4) != 0) *bitexact = 0;
        }
        double e = r > 0 ? sqrt(d / r) : sqrt(d);
        if (!(e <= worst)) worst = e;
    }
    return worst;
}

/* Rank 0's program (or its failure) to every rank through JSON. */
static int share(dm_program **p, int fail)
{
    char *buf = NULL;
    size_t len = 0;
    long long n = -1;
    dm_err err = {{0}};
    if (g_rank == 0 && !fail) {
        FILE *f = open_memstream(&buf, &len);
        if (f && dm_program_write_json(*p, f, &err) == 0) n = 0;
        if (f) fclose(f);
        if (n == 0) n = (long long)len;
    }
    MPI_Bcast(&n, 1, MPI_LONG_LONG, 0, MPI_COMM_WORLD);
    if (n < 0) return -1;
    if (g_rank != 0) buf = malloc((size_t)n + 1);
    MPI_Bcast(buf, (int)n, MPI_CHAR, 0, MPI_COMM_WORLD);
    int rc = 0;
    if (g_rank != 0) {
        char path[64];
        snprintf(path, sizeof path, "/tmp/dmuon-test-prog-%d-%d.json", (int)getpid(), g_rank);
        FILE *f = fopen(path, "w");
        rc = f && fwrite(buf, 1, (size_t)n, f) == (size_t)n && fclose(f) == 0 ? dm_program_load(path, p, &err) : -1;
        if (rc < 0) fprintf(stderr, "rank %d: %s\n", g_rank, err.msg);
        remove(path);
    }
    free(buf);
    return rc;
}

/* Run p twice for K steps on all ranks; on rank 0 compare with the references. */
static void check(const dm_model *m, const dm_matrix *mx, int64_t n, dm_program *p, const real_opts *o,
                  const char *name, float **ref_chunk, float **ref_one, double ref_loss, int exact)
{
    double loss[K_STEPS], loss2[K_STEPS];
    int rc, rc2;
    float **w = run(m, p, MPI_COMM_WORLD, o, K_STEPS, loss, NULL, &rc);
    float **w2 = run(m, p, MPI_COMM_WORLD, o, K_STEPS, loss2, NULL, &rc2);
    if (g_rank == 0) {
        ok(rc == 0 && w, "%s: %d steps on %d ranks", name, K_STEPS, g_size);
        if (w && w2 && ref_chunk && ref_one) {
            int bx, bx2, bx1;
            double e = max_rel(w, ref_chunk, mx, n, &bx);
            if (exact)
                ok(bx, "%s: parameters bit-identical to the chunked one-rank run (max rel err %.3g)", name, e);
            double e1 = max_rel(w, ref_one, mx, n, &bx1);
            ok(e1 <= 1e-5, "%s: within 1e-5 of the one-GEMM one-rank run (max rel Frobenius err %.3g)", name, e1);
            max_rel(w, w2, mx, n, &bx2);
            ok(bx2 && memcmp(loss, loss2, sizeof loss) == 0, "%s: two runs bit-identical", name);
            ok(fabs(loss[K_STEPS - 1] - ref_loss) <= (exact ? 1e-12 : 1e-6) * ref_loss, "%s: loss %.9g equals the reference's %.9g",
               name, loss[K_STEPS - 1], ref_loss);
        }
    }
    real_weights_free(w, n);
    real_weights_free(w2, n);
}

/* One of the scheduler's programs for this rank count against its own one-rank programs over
 * the same tokens (chunked in rank order, and in one GEMM): x = strategy, overlap, zero, balance,
 * ns-algo, gpus-per-node ("0": the cluster's), then --attention or NULL; seq: --seq-len (NULL: none). */
static void sched_case(const dm_model *m, const dm_matrix *mx, int64_t n, const dm_cluster *clp, const dm_costs *costs,
                       const char *const *x, const char *seq, const real_opts *op, int exact)
{
    dm_err err = {{0}};
    real_opts o = *op;
    dm_cluster cl = *clp;
    sched_opts so;
    sched_opts_default(&so);
    /* x[5]: "0" flat, "G" hierarchical with G GPUs per node, "hS" HSDP with shard groups of S */
    int hsdp = x[5][0] == 'h', shard = hsdp ? atoi(x[5] + 1) : 0;
    int hier = !hsdp && strcmp(x[5], "0") != 0;
    if (hier && g_size % atoi(x[5])) return;
    if (hsdp && (g_size % shard || g_size == shard)) return; /* one replica group: the flat plan */
    if (sched_opts_parse(&so, "strategy", x[0], &err) || sched_opts_parse(&so, "overlap", x[1], &err) ||
        sched_opts_parse(&so, "zero", x[2], &err) || sched_opts_parse(&so, "balance", x[3], &err) ||
        sched_opts_parse(&so, "ns-algo", x[4], &err) || sched_opts_parse(&so, "tokens", "16", &err) ||
        (seq && sched_opts_parse(&so, "seq-len", seq, &err)) ||
        (x[6] && sched_opts_parse(&so, "attention", x[6], &err)) ||
        (hier && (sched_opts_parse(&so, "gpus-per-node", x[5], &err) ||
                  sched_opts_parse(&so, "hierarchical", "yes", &err))) ||
        (hsdp && sched_opts_parse(&so, "shard", x[5] + 1, &err))) {
        fprintf(stderr, "%s\n", err.msg);
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    /* the chunked one-rank reference sums every gradient in the shard groups' order: HSDP's
     * AdamW parameters in the shard groups too (sharded over all ranks they are summed flat,
     * which tests/real_cpu.sh checks to rounding) */
    if (hsdp) so.hsdp_adamw = SCHED_HSDP_ADAMW_REPLICAS;
    so.milp_time_s = 0.5;
    char desc[600];
    sched_opts_describe(&so, desc, sizeof desc);
    dm_program *p = NULL, *p1 = NULL;
    /* rank 0 plans (the MILP's answer may depend on timing); the others get its JSON */
    int fail = 0;
    if (g_rank == 0) {
        fail = sched_build(m, &cl, g_size, costs, &so, &p, NULL, &err) < 0;
        if (fail) fprintf(stderr, "sched_build %s: %s\n", desc, err.msg);
    }
    if (share(&p, fail) < 0) MPI_Abort(MPI_COMM_WORLD, 1);
    float **rc1 = NULL, **ro1 = NULL;
    double rl[K_STEPS];
    if (g_rank == 0) {
        sched_opts s1 = so;
        s1.hierarchical = 0;
        s1.hsdp = 0, s1.shard = 0;
        s1.gpus_per_node = 0;
        s1.tokens = TOKENS * g_size; /* its works are for the tokens it runs */
        if (sched_build(m, &cl, 1, costs, &s1, &p1, NULL, &err) < 0) MPI_Abort(MPI_COMM_WORLD, 1);
        real_opts r = o;
        r.tokens = TOKENS * g_size;
        r.grad_chunks = g_size;
        r.grad_chunk_group = shard; /* HSDP sums each shard group first (0: plain) */
        int rc;
        rc1 = run(m, p1, MPI_COMM_SELF, &r, K_STEPS, rl, NULL, &rc);
        r.grad_chunks = 1;
        r.grad_chunk_group = 0;
        ro1 = run(m, p1, MPI_COMM_SELF, &r, K_STEPS, NULL, NULL, &rc);
    }
    /* hierarchical sums inside each node, then across: (g0+g1)+(g2+g3), not in rank order */
    if (g_rank == 0) {
        int clean = 1;
        for (int r = 0; r < g_size && clean; r++) clean = real_check_hazards(p, r, mx, n, &err) == 0;
        ok(clean, "%s: no data hazards%s%s", desc, clean ? "" : ": ", clean ? "" : err.msg);
    }
    char name[700];
    snprintf(name, sizeof name, "%s%s%s", m->name, desc[0] ? " " : "", desc);
    check(m, mx, n, p, &o, name, rc1, ro1, rl[K_STEPS - 1], exact && (!hier || g_size == atoi(x[5])));
    real_weights_free(rc1, n);
    real_weights_free(ro1, n);
    dm_program_free(p);
    dm_program_free(p1);
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &g_rank);
    MPI_Comm_size(MPI_COMM_WORLD, &g_size);
    char path[256];
    snprintf(path, sizeof path, "/tmp/dmuon-test-real-%d.json", (int)getpid());
    MPI_Bcast(path, sizeof path, MPI_CHAR, 0, MPI_COMM_WORLD);
    if (g_rank == 0) {
        FILE *f = fopen(path, "w");
        if (!f || fputs(MODEL_JSON, f) < 0 || fclose(f) != 0) {
            perror(path);
            MPI_Abort(MPI_COMM_WORLD, 1);
        }
    }
    MPI_Barrier(MPI_COMM_WORLD);
    dm_model *m = NULL;
    dm_err err = {{0}};
    if (dm_model_load_file(path, &m, &err) < 0) {
        fprintf(stderr, "%s\n", err.msg);
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    MPI_Barrier(MPI_COMM_WORLD);
    if (g_rank == 0) remove(path);
    dm_matrix *mx = NULL;
    int64_t n = 0;
    if (dm_model_matrices(m, -1, &mx, &n, &err) < 0) MPI_Abort(MPI_COMM_WORLD, 1);
    if (g_rank == 0) tap_diag("%d ranks, %lld matrices, %d tokens per rank, %d steps", g_size, (long long)n, TOKENS, K_STEPS);

    /* references on rank 0: one rank over all tokens, chunked in rank order and in one GEMM,
     * for Muon (S_SINGLE) and for AdamW everywhere (S_ADAMW on one rank) */
    real_opts o;
    real_opts_default(&o);
    o.tokens = TOKENS;
    o.muon.lr = 0.02;
    o.adamw.lr = 0.01;
    float **ref_chunk[2] = {NULL, NULL}, **ref_one[2] = {NULL, NULL};
    double ref_loss[2][K_STEPS];
    for (int a = 0; a < 2 && g_rank == 0; a++) {
        dm_program *p1 = build(a ? S_ADAMW : S_SINGLE, m, mx, n, 1);
        real_opts r = o;
        r.tokens = TOKENS * g_size;
        r.grad_chunks = g_size;
        int rc;
        ref_chunk[a] = run(m, p1, MPI_COMM_SELF, &r, K_STEPS, ref_loss[a], NULL, &rc);
        ok(rc == 0 && ref_chunk[a], "one-rank %s reference (chunked) runs", a ? "AdamW" : "Muon");
        r.grad_chunks = 1;
        ref_one[a] = run(m, p1, MPI_COMM_SELF, &r, K_STEPS, NULL, NULL, &rc);
        ok(rc == 0 && ref_one[a], "one-rank %s reference (one GEMM) runs", a ? "AdamW" : "Muon");
        tap_diag("%s reference loss %.6f -> %.6f", a ? "AdamW" : "Muon", ref_loss[a][0], ref_loss[a][K_STEPS - 1]);
        ok(ref_loss[a][K_STEPS - 1] < ref_loss[a][0], "the loss falls");
        dm_program_free(p1);
    }
    for (strat s = S_DDP; s <= S_RR; s++) {
        dm_program *p = build(s, m, mx, n, g_size);
        if (!p) MPI_Abort(MPI_COMM_WORLD, 1);
        int a = s == S_ADAMW;
        check(m, mx, n, p, &o, strat_name[s], ref_chunk[a], ref_one[a], ref_loss[a][K_STEPS - 1], 1);
        dm_program_free(p);
    }

    /* the scheduler's programs (NS algorithm forced, so every rank count picks the same per
     * matrix): references are its own one-rank programs */
    dm_cluster cl;
    dm_costs *costs = NULL;
    if (dm_cluster_load("h200", &cl, &err) < 0 || !(costs = dm_costs_roofline(cl.gpu, &err))) {
        fprintf(stderr, "%s\n", err.msg);
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    static const char *variants[][7] = {
        /* strategy, overlap, zero, balance, ns-algo, gpus-per-node ("0": the cluster's) */
        {"muon-ddp", "interleave", "2", "lpt", "direct", "0"},
        {"muon-fsdp", "interleave", "2", "lpt", "gram", "0"},
        {"muon-fsdp", "prefetch", "3", "lpt", "direct", "0"},
        {"muon-rr", "interleave", "2", "lpt", "direct", "0"},
        {"adamw", "interleave", "2", "lpt", "direct", "0"},
        {"adamw", "none", "3", "lpt", "direct", "0"},
        {"dmuon", "interleave", "2", "lpt", "direct", "0"},
        {"dmuon", "prefetch:2", "2", "milp", "gram", "0"},
        {"dmuon", "none", "3", "rr", "direct", "0"},
        {"dmuon", "interleave", "2", "lpt", "direct", "2"}, /* hierarchical when it divides */
        {"dmuon", "interleave", "2", "lpt", "direct", "h2"}, /* HSDP, shard groups of 2 (4 ranks) */
        {"dmuon", "prefetch", "3", "lpt", "gram", "h2"},
    };
    for (size_t v = 0; v < sizeof variants / sizeof variants[0]; v++)
        sched_case(m, mx, n, &cl, costs, variants[v], NULL, &o, 1);
    /* the workload's every kernel kind (a second stream with its table, grouped-query and
     * cross attention, MoE routing, an embedding lookup): bit-identical too; with a tied head
     * (its gradient added to the lookup's) within the bound only */
    static const char *arch_variants[][7] = {
        {"dmuon", "interleave", "2", "lpt", "direct", "0"},
        {"muon-fsdp", "prefetch", "3", "lpt", "gram", "0"},
        {"muon-ddp", "none", "2", "lpt", "direct", "0"},
        {"adamw", "interleave", "2", "lpt", "direct", "0"},
        {"dmuon", "interleave", "3", "lpt", "direct", "h2"},
        /* causal self-attention as its triangle (tiles of 2 of the 8-token windows: 3 products),
         * in layer 0 as its 3-token sliding window's band (a 2 x 2 square, 3 rectangles of 2 x 4) */
        {"dmuon", "interleave", "2", "lpt", "direct", "0", "causal:2"},
        {"muon-fsdp", "prefetch", "3", "lpt", "gram", "0", "causal:2"},
    };
    for (int tied = 0; tied < 2; tied++) {
        char ap[512];
        snprintf(ap, sizeof ap, "%s/tests/data/%s.json", DM_SRCDIR, tied ? "arch_tied_cpu" : "arch_cpu");
        dm_model *am = NULL;
        dm_matrix *amx = NULL;
        int64_t an = 0;
        if (dm_model_load_file(ap, &am, &err) < 0 || dm_model_matrices(am, -1, &amx, &an, &err) < 0) {
            fprintf(stderr, "%s\n", err.msg);
            MPI_Abort(MPI_COMM_WORLD, 1);
        }
        for (size_t v = 0; v < sizeof arch_variants / sizeof arch_variants[0]; v++)
            sched_case(am, amx, an, &cl, costs, arch_variants[v], "8", &o, !tied);
        free(amx);
        dm_model_free(am);
    }
    dm_costs_free(costs);

    /* data hazards: the scheduler's and the hand-built programs have none; a gradient
     * all-reduce on another stream without its dependency on the backward is found */
    if (g_rank == 0) {
        dm_program *p = build(S_DDP, m, mx, n, 2);
        int clean = 1;
        for (int r = 0; r < 2; r++) clean &= real_check_hazards(p, r, mx, n, &err) == 0;
        ok(clean, "hand-built muon-ddp program: no data hazards");
        dm_program_own_rank(p, 1, NULL); /* rank 1's list alone */
        for (int i = 0; i < p->ranks[1].n_ops; i++)
            if (p->ranks[1].ops[i].kind == DM_OP_ALLREDUCE) {
                p->ranks[1].ops[i].n_deps = 0;
                break;
            }
        int rc = real_check_hazards(p, 1, mx, n, &err);
        ok(rc < 0 && strstr(err.msg, "all-reduce") && strstr(err.msg, "gradient"),
           "a dependency removed: hazard found (%s)", err.msg);
        dm_program_free(p);
        /* an all-gather writes what it gathers: a forward that no longer waits for its weight
         * fetch reads weights the all-gather writes (it used to run "ok" on other values) */
        p = build(S_ADAMW, m, mx, n, 2);
        dm_program_own_rank(p, 1, NULL);
        for (int i = 0; i < p->ranks[1].n_ops; i++)
            if (p->ranks[1].ops[i].kind == DM_OP_FORWARD) {
                p->ranks[1].ops[i].n_deps = 0;
                break;
            }
        rc = real_check_hazards(p, 1, mx, n, &err);
        ok(rc < 0 && strstr(err.msg, "(forward) reads the weights") && strstr(err.msg, "(all-gather) wrote"),
           "a forward's dependency on its all-gather removed: hazard found (%s)", err.msg);
        dm_program_free(p);
    }

    /* a checkpoint save that fails on one rank (its allocations fail) leaves no step folder and
     * no `latest` behind, on every rank count (one rank: the folder used to stay, empty) */
    {
        dm_program *p = build(g_size > 1 ? S_DDP : S_SINGLE, m, mx, n, g_size);
        char ck[160];
        snprintf(ck, sizeof ck, "/tmp/dmuon-test-ck-%d", (int)getpid());
        MPI_Bcast(ck, sizeof ck, MPI_CHAR, 0, MPI_COMM_WORLD);
        real_exec *ex = NULL;
        real_step_stats st;
        int rc = real_exec_create(m, p, MPI_COMM_WORLD, &o, &ex, &err);
        if (rc == 0) rc = real_exec_step(ex, &st, &err);
        if (rc == 0) {
            if (g_rank == g_size - 1) dm_fault_alloc_arm(1, 1);
            rc = real_exec_save(ex, ck, &err);
            dm_fault_alloc_arm(0, 0);
        }
        int all_failed = 0, mine = rc < 0;
        MPI_Allreduce(&mine, &all_failed, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
        if (g_rank == 0) {
            char sdir[200], latest[200];
            snprintf(sdir, sizeof sdir, "%s/step-1", ck);
            snprintf(latest, sizeof latest, "%s/latest", ck);
            ok(all_failed && strstr(err.msg, "out of memory"), "a failed checkpoint save fails on every rank (%s)",
               err.msg);
            ok(access(sdir, F_OK) != 0 && access(latest, F_OK) != 0,
               "a failed checkpoint save leaves no step folder and no latest");
            rmdir(sdir);
            rmdir(ck);
        }
        real_exec_destroy(ex);
        dm_program_free(p);
    }

    /* a program that differs on one rank is refused on every rank, before any collective */
    if (g_size > 1) {
        dm_program *p = build(S_DDP, m, mx, n, g_size);
        if (g_rank == g_size - 1) p->tokens++;
        real_exec *ex = NULL;
        dm_err e2 = {{0}};
        int rc = real_exec_create(m, p, MPI_COMM_WORLD, &o, &ex, &e2);
        int all_refused = 0, mine = rc < 0;
        MPI_Allreduce(&mine, &all_refused, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
        if (g_rank == 0) {
            ok(all_refused, "a program differing on rank %d is refused on every rank", g_size - 1);
            ok(strstr(e2.msg, "differs from rank 0") || strstr(e2.msg, "another rank's program"),
               "refusal message: %s", e2.msg);
        }
        real_exec_destroy(ex);
        dm_program_free(p);
    }

    /* non-finite gradient: step 1 on the last rank, a Muon matrix (id 2) */
    {
        dm_program *p = build(g_size > 1 ? S_DMUON : S_SINGLE, m, mx, n, g_size);
        real_opts f = o;
        int rc;
        real_step_stats last;
        float **w1 = run(m, p, MPI_COMM_WORLD, &o, 1, NULL, NULL, &rc);
        f.inject_step = 1;
        f.inject_rank = g_size - 1;
        f.inject_param = 2;
        float **wf = run(m, p, MPI_COMM_WORLD, &f, 2, NULL, &last, &rc);
        if (g_rank == 0) {
            int bx;
            ok(last.skipped && last.bad_param == 2 && last.bad_rank == g_size - 1,
               "NaN gradient: step skipped, param %lld on rank %d named", (long long)last.bad_param, last.bad_rank);
            max_rel(wf, w1, mx, n, &bx);
            ok(wf && w1 && bx, "NaN gradient: parameters unchanged by the skipped step");
        }
        real_weights_free(w1, n);
        real_weights_free(wf, n);
        dm_program_free(p);
    }
    for (int a = 0; a < 2; a++) real_weights_free(ref_chunk[a], n), real_weights_free(ref_one[a], n);
    free(mx);
    dm_model_free(m);
    int fail = 0;
    if (g_rank == 0) fail = tap_done();
    MPI_Finalize();
    return fail;
}
