/* real_ckpt.c: checkpoints of the executor's state (real.h): per rank its master weights,
 * Muon momentum, AdamW moments, the ranges it owns, and the step and AdamW counters.
 *
 * Layout: DIR/step-K/rank-R.bin (one per rank) and DIR/latest, a small text file naming K,
 * the program hash, ranks, tokens and seed. Every file is written to a temporary name,
 * fsync'ed and renamed; `latest` is replaced only after every rank's file of step K is in
 * place, and the previous step's folder is removed after that. A crash at any point leaves
 * either the old or the new checkpoint complete. Both backends write and read the same files
 * through the state accessors of real_priv.h (the GPU's device arrays are copied through host
 * buffers, one matrix at a time, and streamed to the file).
 *
 * Also the weights files of `dmuon run --save-weights/--check-weights`. */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "outfile.h"
#include "real.h"
#include "real_priv.h"

#define CK_MAGIC "dmuon-ckpt-rank-1\n"

static int write_all(int fd, const void *p, size_t n)
{
    const char *c = p;
    while (n) {
        ssize_t w = write(fd, c, n);
        if (w < 0) {
            if (errno == EINTR) continue;
            return -1;
        }
        c += w;
        n -= (size_t)w;
    }
    return 0;
}

static int read_all(FILE *f, void *p, size_t n) { return fread(p, 1, n, f) == n ? 0 : -1; }

/* A file written atomically in pieces: path.tmp, then fsync, rename, fsync of the folder. */
typedef struct ck_file {
    int fd;
    char path[8448], tmp[8464];
} ck_file;

static int ck_open(ck_file *c, const char *path, dm_err *err)
{
    snprintf(c->path, sizeof c->path, "%s", path);
    snprintf(c->tmp, sizeof c->tmp, "%s.tmp", path);
    c->fd = open(c->tmp, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (c->fd < 0) return dm_err_set(err, "%s: %s", c->tmp, strerror(errno));
    return 0;
}

static int ck_put(ck_file *c, const void *p, size_t n, dm_err *err)
{
    if (c->fd < 0) return -1;
    if (write_all(c->fd, p, n) < 0) {
        int e = errno;
        close(c->fd);
        c->fd = -1;
        unlink(c->tmp);
        return dm_err_set(err, "%s: %s", c->tmp, strerror(e));
    }
    return 0;
}

static void ck_abort(ck_file *c)
{
    if (c->fd < 0) return;
    close(c->fd);
    c->fd = -1;
    unlink(c->tmp);
}

static int ck_commit(ck_file *c, dm_err *err)
{
    if (c->fd < 0) return -1;
    if (fsync(c->fd) < 0) {
        int e = errno;
        ck_abort(c);
        return dm_err_set(err, "%s: %s", c->tmp, strerror(e));
    }
    int fd = c->fd;
    c->fd = -1;
    if (close(fd) < 0 || rename(c->tmp, c->path) < 0) {
        int e = errno;
        unlink(c->tmp);
        return dm_err_set(err, "%s: %s", c->path, strerror(e));
    }
    char dir[8448];
    snprintf(dir, sizeof dir, "%s", c->path);
    char *slash = strrchr(dir, '/');
    if (slash) *slash = 0;
    int dfd = open(slash ? dir : ".", O_RDONLY);
    if (dfd >= 0) fsync(dfd), close(dfd);
    return 0;
}

static int atomic_write(const char *path, const void *buf, size_t n, dm_err *err)
{
    ck_file c;
    if (ck_open(&c, path, err) < 0 || ck_put(&c, buf, n, err) < 0) return -1;
    return ck_commit(&c, err);
}

/* Agree on failure: returns -1 on every rank if any rank failed (its own message kept). */
static int agree(real_exec *ex, int rc, dm_err *err)
{
    int bad = rc < 0, any = 0;
    MPI_Allreduce(&bad, &any, 1, MPI_INT, MPI_MAX, ex->comm);
    if (any && !bad) dm_err_set(err, "rank %d: another rank failed with the checkpoint", ex->rank);
    return any ? -1 : 0;
}

/* Host arrays for one matrix's state (the largest matrix's size). */
static float *state_bufs(real_exec *ex, float *b[4], dm_err *err)
{
    int64_t mx = 1;
    for (int64_t i = 0; i < ex->n_mx; i++) {
        real_pinfo pi;
        real_param_info(ex, i, &pi);
        if (pi.size > mx) mx = pi.size;
    }
    float *p = dm_malloc((size_t)mx * 16, err);
    for (int k = 0; k < 4; k++) b[k] = p ? p + (size_t)k * (size_t)mx : NULL;
    return p;
}

int real_exec_save(real_exec *ex, const char *dir, dm_err *err)
{
    char path[8448], sdir[4200];
    int rc = 0;
    snprintf(sdir, sizeof sdir, "%s/step-%d", dir, ex->step);
    if (ex->rank == 0) {
        if ((mkdir(dir, 0755) < 0 && errno != EEXIST) || (mkdir(sdir, 0755) < 0 && errno != EEXIST))
            rc = dm_err_set(err, "%s: %s", sdir, strerror(errno));
    }
    if (agree(ex, rc, err) < 0) return -1;
    float *b[4], *mem = state_bufs(ex, b, err);
    ck_file c = {.fd = -1};
    snprintf(path, sizeof path, "%s/rank-%d.bin", sdir, ex->rank);
    int64_t hdr[4] = {ex->step, ex->adam_t, ex->n_mx, (int64_t)dm_program_hash(ex->prog)};
    rc = !mem || ck_open(&c, path, err) < 0 || ck_put(&c, CK_MAGIC, sizeof CK_MAGIC - 1, err) < 0 ||
                 ck_put(&c, hdr, sizeof hdr, err) < 0
             ? -1
             : 0;
    for (int64_t i = 0; i < ex->n_mx && rc == 0; i++) {
        real_pinfo pi;
        real_param_info(ex, i, &pi);
        int64_t ph[5] = {pi.size, pi.own_lo, pi.own_hi, pi.has_mom, pi.has_adam};
        size_t sz = (size_t)pi.size * 4;
        if (real_param_get(ex, i, b[0], pi.has_mom ? b[1] : NULL, pi.has_adam ? b[2] : NULL,
                           pi.has_adam ? b[3] : NULL, err) < 0 ||
            ck_put(&c, ph, sizeof ph, err) < 0 || ck_put(&c, b[0], sz, err) < 0 ||
            (pi.has_mom && ck_put(&c, b[1], sz, err) < 0) ||
            (pi.has_adam && (ck_put(&c, b[2], sz, err) < 0 || ck_put(&c, b[3], sz, err) < 0)))
            rc = -1;
    }
    if (rc == 0) rc = ck_commit(&c, err);
    else ck_abort(&c);
    free(mem);
    if (agree(ex, rc, err) < 0) return -1;
    if (ex->rank == 0) { /* every rank's file is in place: move `latest`, drop the older step */
        char text[512], old[8448] = "";
        FILE *f;
        snprintf(path, sizeof path, "%s/latest", dir);
        if ((f = fopen(path, "r"))) {
            int k;
            if (fscanf(f, "dmuon-checkpoint-1 step %d", &k) == 1 && k != ex->step)
                snprintf(old, sizeof old, "%s/step-%d", dir, k);
            fclose(f);
        }
        int n = snprintf(text, sizeof text, "dmuon-checkpoint-1 step %d hash %016llx ranks %d tokens %lld seed %llu\n",
                         ex->step, (unsigned long long)dm_program_hash(ex->prog), ex->nranks, (long long)ex->o.tokens,
                         (unsigned long long)ex->o.seed);
        rc = atomic_write(path, text, (size_t)n, err);
        if (rc == 0 && old[0]) {
            for (int r = 0; r < ex->nranks; r++) {
                snprintf(path, sizeof path, "%s/rank-%d.bin", old, r);
                unlink(path);
            }
            rmdir(old);
        }
    }
    return agree(ex, rc, err);
}

int real_exec_load(real_exec *ex, const char *dir, dm_err *err)
{
    char path[8448];
    int step = -1, ranks = 0, rc = 0;
    unsigned long long hash = 0, seed = 0;
    long long tokens = 0;
    snprintf(path, sizeof path, "%s/latest", dir);
    FILE *f = fopen(path, "r");
    if (!f) rc = dm_err_set(err, "%s: %s (no checkpoint to resume from)", path, strerror(errno));
    else {
        if (fscanf(f, "dmuon-checkpoint-1 step %d hash %llx ranks %d tokens %lld seed %llu", &step, &hash, &ranks,
                   &tokens, &seed) != 5)
            rc = dm_err_set(err, "%s:1:1: expected 'dmuon-checkpoint-1 step K hash H ranks N tokens T seed S'", path);
        fclose(f);
    }
    if (rc == 0 && (hash != (unsigned long long)dm_program_hash(ex->prog) || ranks != ex->nranks ||
                    tokens != (long long)ex->o.tokens || seed != (unsigned long long)ex->o.seed))
        rc = dm_err_set(err, "%s: the checkpoint is of another run (program %016llx, %d ranks, %lld tokens, seed %llu; "
                        "this run: %016llx, %d, %lld, %llu)", path, hash, ranks, tokens, seed,
                        (unsigned long long)dm_program_hash(ex->prog), ex->nranks, (long long)ex->o.tokens,
                        (unsigned long long)ex->o.seed);
    if (agree(ex, rc, err) < 0) return -1;
    snprintf(path, sizeof path, "%s/step-%d/rank-%d.bin", dir, step, ex->rank);
    f = fopen(path, "rb");
    char magic[sizeof CK_MAGIC - 1];
    int64_t hdr[4] = {0};
    float *b[4], *mem = state_bufs(ex, b, err);
    if (!mem) rc = -1;
    else if (!f) rc = dm_err_set(err, "%s: %s", path, strerror(errno));
    else if (read_all(f, magic, sizeof magic) < 0 || memcmp(magic, CK_MAGIC, sizeof magic) != 0 ||
             read_all(f, hdr, sizeof hdr) < 0)
        rc = dm_err_set(err, "%s: not a dmuon rank checkpoint", path);
    else if (hdr[0] != step || hdr[2] != ex->n_mx || (uint64_t)hdr[3] != dm_program_hash(ex->prog))
        rc = dm_err_set(err, "%s: step %lld of %lld matrices, expected step %d of %lld", path, (long long)hdr[0],
                        (long long)hdr[2], step, (long long)ex->n_mx);
    /* read everything first, then install it: a truncated file changes nothing */
    for (int64_t i = 0; i < ex->n_mx && rc == 0; i++) {
        real_pinfo pi;
        real_param_info(ex, i, &pi);
        int64_t ph[5];
        size_t sz = (size_t)pi.size * 4;
        if (read_all(f, ph, sizeof ph) < 0 || ph[0] != pi.size || ph[3] != pi.has_mom || ph[4] != pi.has_adam) {
            rc = dm_err_set(err, "%s: matrix %lld does not match this run", path, (long long)i);
            break;
        }
        if (read_all(f, b[0], sz) < 0 || (pi.has_mom && read_all(f, b[1], sz) < 0) ||
            (pi.has_adam && (read_all(f, b[2], sz) < 0 || read_all(f, b[3], sz) < 0)))
            rc = dm_err_set(err, "%s: truncated at matrix %lld", path, (long long)i);
        else if (real_param_put(ex, i, b[0], pi.has_mom ? b[1] : NULL, pi.has_adam ? b[2] : NULL,
                                pi.has_adam ? b[3] : NULL, ph[1], ph[2], err) < 0)
            rc = -1;
    }
    if (f) fclose(f);
    free(mem);
    if (agree(ex, rc, err) < 0) return -1;
    ex->step = (int)hdr[0];
    ex->adam_t = hdr[1];
    return 0;
}

/* ---- weights files --------------------------------------------------------------------- */

#define W_MAGIC "dmuon-weights-1\n"

int real_weights_write(const char *path, const real_exec *ex, float *const *w, dm_err *err)
{
    dm_out *o = dm_out_open(path, err);
    if (!o) return -1;
    FILE *f = dm_out_file(o);
    int64_t n = ex->n_mx;
    fwrite(W_MAGIC, 1, sizeof W_MAGIC - 1, f);
    fwrite(&n, sizeof n, 1, f);
    for (int64_t i = 0; i < n; i++) {
        real_pinfo pi;
        real_param_info(ex, i, &pi);
        fwrite(&pi.size, sizeof pi.size, 1, f);
        fwrite(w[i], 4, (size_t)pi.size, f);
    }
    return dm_out_commit(o, err); /* checks the write errors */
}

int real_weights_compare(const char *path, const real_exec *ex, float *const *w, double *max_rel, int64_t *worst,
                         dm_err *err)
{
    *max_rel = 0;
    *worst = -1;
    FILE *f = fopen(path, "rb");
    if (!f) return dm_err_set(err, "%s: %s", path, strerror(errno));
    char magic[sizeof W_MAGIC - 1];
    int64_t n = -1, rc = 0;
    float *ref = NULL;
    if (read_all(f, magic, sizeof magic) < 0 || memcmp(magic, W_MAGIC, sizeof magic) != 0 || read_all(f, &n, sizeof n) < 0)
        rc = dm_err_set(err, "%s: not a dmuon weights file", path);
    else if (n != ex->n_mx)
        rc = dm_err_set(err, "%s: %lld matrices, this run has %lld", path, (long long)n, (long long)ex->n_mx);
    for (int64_t i = 0; i < n && rc == 0; i++) {
        real_pinfo pi;
        real_param_info(ex, i, &pi);
        int64_t sz = -1;
        float *nr;
        if (read_all(f, &sz, sizeof sz) < 0 || sz != pi.size) {
            rc = dm_err_set(err, "%s: matrix %lld: %lld elements, this run's has %lld", path, (long long)i,
                            (long long)sz, (long long)pi.size);
            break;
        }
        if (!(nr = dm_realloc(ref, (size_t)(sz ? sz : 1) * 4, err))) {
            rc = -1;
            break;
        }
        ref = nr;
        if (read_all(f, ref, (size_t)sz * 4) < 0) {
            rc = dm_err_set(err, "%s: truncated at matrix %lld", path, (long long)i);
            break;
        }
        double d2 = 0, r2 = 0;
        for (int64_t e = 0; e < sz; e++) {
            double d = (double)w[i][e] - (double)ref[e];
            d2 += d * d;
            r2 += (double)ref[e] * ref[e];
        }
        double rel = r2 > 0 ? sqrt(d2 / r2) : sqrt(d2);
        if (!isnan(*max_rel) && !(rel <= *max_rel)) *max_rel = rel, *worst = i; /* a NaN sticks */
    }
    free(ref);
    fclose(f);
    return rc < 0 ? -1 : 0;
}

int real_exec_steps_done(const real_exec *ex) { return ex->step; }
