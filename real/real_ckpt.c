/* real_ckpt.c: checkpoints of the executor's state (real.h): per rank its master weights,
 * Muon momentum, AdamW moments, the ranges it owns, and the step and AdamW counters.
 *
 * Layout: DIR/step-K/rank-R.bin (one per rank) and DIR/latest, a small text file naming K,
 * the program hash, ranks, tokens and seed. Every file is written to a temporary name,
 * fsync'ed and renamed; `latest` is replaced only after every rank's file of step K is in
 * place, and the previous step's folder is removed after that. A crash at any point leaves
 * either the old or the new checkpoint complete. CPU backend only for now. */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

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

/* Write buf to path atomically: path.tmp, fsync, rename, fsync of the folder. */
static int atomic_write(const char *path, const void *buf, size_t n, dm_err *err)
{
    char tmp[8464];
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd < 0) return dm_err_set(err, "%s: %s", tmp, strerror(errno));
    if (write_all(fd, buf, n) < 0 || fsync(fd) < 0) {
        int e = errno;
        close(fd);
        unlink(tmp);
        return dm_err_set(err, "%s: %s", tmp, strerror(e));
    }
    if (close(fd) < 0 || rename(tmp, path) < 0) {
        int e = errno;
        unlink(tmp);
        return dm_err_set(err, "%s: %s", path, strerror(e));
    }
    char dir[8464];
    snprintf(dir, sizeof dir, "%s", path);
    char *slash = strrchr(dir, '/');
    if (slash) *slash = 0;
    int dfd = open(slash ? dir : ".", O_RDONLY);
    if (dfd >= 0) fsync(dfd), close(dfd);
    return 0;
}

/* Agree on failure: returns -1 on every rank if any rank failed (its own message kept). */
static int agree(real_exec *ex, int rc, dm_err *err)
{
    int bad = rc < 0, any = 0;
    MPI_Allreduce(&bad, &any, 1, MPI_INT, MPI_MAX, ex->comm);
    if (any && !bad) dm_err_set(err, "rank %d: another rank failed with the checkpoint", ex->rank);
    return any ? -1 : 0;
}

typedef struct membuf {
    char *p;
    size_t n, cap;
} membuf;

static int mb_put(membuf *b, const void *src, size_t n, dm_err *err)
{
    if (b->n + n > b->cap) {
        size_t cap = b->cap ? b->cap : 4096;
        while (cap < b->n + n) cap *= 2;
        char *np = dm_realloc(b->p, cap, err);
        if (!np) return -1;
        b->p = np;
        b->cap = cap;
    }
    memcpy(b->p + b->n, src, n);
    b->n += n;
    return 0;
}

int real_exec_save(real_exec *ex, const char *dir, dm_err *err)
{
    if (ex->gpu) return agree(ex, dm_err_set(err, "--checkpoint: not implemented for the GPU backend yet"), err);
    char path[8448], sdir[4200];
    int rc = 0;
    snprintf(sdir, sizeof sdir, "%s/step-%d", dir, ex->step);
    if (ex->rank == 0) {
        if ((mkdir(dir, 0755) < 0 && errno != EEXIST) || (mkdir(sdir, 0755) < 0 && errno != EEXIST))
            rc = dm_err_set(err, "%s: %s", sdir, strerror(errno));
    }
    if (agree(ex, rc, err) < 0) return -1;
    membuf b = {0};
    int64_t hdr[4] = {ex->step, ex->adam_t, ex->n_mx, (int64_t)dm_program_hash(ex->prog)};
    rc = mb_put(&b, CK_MAGIC, sizeof CK_MAGIC - 1, err) < 0 || mb_put(&b, hdr, sizeof hdr, err) < 0 ? -1 : 0;
    for (int64_t i = 0; i < ex->n_mx && rc == 0; i++) {
        rparam *q = &ex->p[i];
        int64_t ph[5] = {q->size, q->own_lo, q->own_hi, q->mom != NULL, q->m1 != NULL};
        size_t sz = (size_t)q->size * 4;
        if (mb_put(&b, ph, sizeof ph, err) < 0 || mb_put(&b, q->W, sz, err) < 0 ||
            (q->mom && mb_put(&b, q->mom, sz, err) < 0) ||
            (q->m1 && (mb_put(&b, q->m1, sz, err) < 0 || mb_put(&b, q->m2, sz, err) < 0)))
            rc = -1;
    }
    snprintf(path, sizeof path, "%s/rank-%d.bin", sdir, ex->rank);
    if (rc == 0) rc = atomic_write(path, b.p, b.n, err);
    free(b.p);
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
    if (ex->gpu) return agree(ex, dm_err_set(err, "--resume: not implemented for the GPU backend yet"), err);
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
    int64_t hdr[4];
    if (!f) rc = dm_err_set(err, "%s: %s", path, strerror(errno));
    else if (read_all(f, magic, sizeof magic) < 0 || memcmp(magic, CK_MAGIC, sizeof magic) != 0 ||
             read_all(f, hdr, sizeof hdr) < 0)
        rc = dm_err_set(err, "%s: not a dmuon rank checkpoint", path);
    else if (hdr[0] != step || hdr[2] != ex->n_mx || (uint64_t)hdr[3] != dm_program_hash(ex->prog))
        rc = dm_err_set(err, "%s: step %lld of %lld matrices, expected step %d of %lld", path, (long long)hdr[0],
                        (long long)hdr[2], step, (long long)ex->n_mx);
    for (int64_t i = 0; i < ex->n_mx && rc == 0; i++) {
        rparam *q = &ex->p[i];
        int64_t ph[5];
        size_t sz = (size_t)q->size * 4;
        if (read_all(f, ph, sizeof ph) < 0 || ph[0] != q->size || ph[3] != (q->mom != NULL) || ph[4] != (q->m1 != NULL)) {
            rc = dm_err_set(err, "%s: matrix %lld does not match this run", path, (long long)i);
            break;
        }
        if (read_all(f, q->W, sz) < 0 || (q->mom && read_all(f, q->mom, sz) < 0) ||
            (q->m1 && (read_all(f, q->m1, sz) < 0 || read_all(f, q->m2, sz) < 0)))
            rc = dm_err_set(err, "%s: truncated at matrix %lld", path, (long long)i);
        q->own_lo = ph[1];
        q->own_hi = ph[2];
    }
    if (f) fclose(f);
    if (agree(ex, rc, err) < 0) return -1;
    ex->step = (int)hdr[0];
    ex->adam_t = hdr[1];
    return 0;
}

int real_exec_steps_done(const real_exec *ex) { return ex->step; }
