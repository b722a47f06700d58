/* real_ckpt.c: checkpoints of the executor's state (real.h): per rank its master weights, Muon
 * momentum, AdamW moments, the ranges it owns, and the step and AdamW counters; also the weights
 * files of `dmuon run --save-weights/--check-weights`.
 *
 * Layout: DIR/step-K/rank-R.bin (one per rank) and DIR/latest, a text line naming K, the program
 * hash, ranks, tokens, seed, gradient chunks, learning rates and the NS coefficients' hash. Every
 * file is written through outfile.h (a temporary in the target's folder, fsync, rename); `latest`
 * is replaced only after every rank's file of step K is in place, and the previous step's folder
 * is removed after that. A crash at any point leaves either the old or the new checkpoint
 * complete; a failed save removes the files it wrote and the step folder it made.
 *
 * A rank file ("dmuon-ckpt-rank-2"): the magic, int64 step, AdamW steps, matrices, plan hash,
 * rank and ranks; per matrix int64 size, owned range [lo, hi), has-momentum, has-moments and its
 * arrays (weights, momentum, two moments: floats); then the CRC32C of everything before it. A
 * load checks, before anything is installed, the file's exact size (truncation, trailing
 * garbage), every header field against this run (a file of another rank or step is refused by
 * name), every owned range against its matrix, and the checksum (bit flips); then it reads the
 * file again to install it. Both backends write and read the same files through the state
 * accessors of real_priv.h (the GPU's device arrays through host buffers, one matrix at a time). */
#include "config.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "outfile.h"
#include "real.h"
#include "real_priv.h"

#define CK_MAGIC "dmuon-ckpt-rank-2\n"
#define CK_LATEST "dmuon-checkpoint-2"

/* ---- CRC32C (Castagnoli, reflected 0x82f63b78), table-driven ------------------------------- */

static uint32_t crc_table[256];

static void crc_init(void)
{
    if (crc_table[1]) return;
    for (uint32_t i = 0; i < 256; i++) {
        uint32_t c = i;
        for (int k = 0; k < 8; k++) c = c & 1 ? (c >> 1) ^ 0x82f63b78u : c >> 1;
        crc_table[i] = c;
    }
}

/* Running CRC: start from 0, feed every piece, the result is the CRC32C of their concatenation. */
static uint32_t crc32c(uint32_t crc, const void *p, size_t n)
{
    const unsigned char *b = p;
    crc = ~crc;
    while (n--) crc = crc_table[(crc ^ *b++) & 0xff] ^ (crc >> 8);
    return ~crc;
}

/* ---- the run a checkpoint belongs to ----------------------------------------------------- */

/* FNV-1a of the NS coefficients: the set a checkpoint's momentum was made with. */
static uint64_t coeffs_hash(const ns_coeffs *c)
{
    uint64_t h = UINT64_C(0xcbf29ce484222325);
    double v[3 * NS_MAX_ITERS];
    for (int k = 0; k < c->n; k++) v[3 * k] = c->a[k], v[3 * k + 1] = c->b[k], v[3 * k + 2] = c->c[k];
    const unsigned char *b = (const unsigned char *)v;
    for (size_t i = 0; i < (size_t)c->n * 3 * sizeof *v; i++) h = (h ^ b[i]) * UINT64_C(0x100000001b3);
    return h ^ (uint64_t)c->n;
}

typedef struct ck_run {
    int step, ranks, chunks;
    unsigned long long hash, seed, coeffs;
    long long tokens;
    double lr_muon, lr_adamw;
} ck_run;

static ck_run this_run(const real_exec *ex)
{
    return (ck_run){ex->step, ex->nranks, ex->o.grad_chunks, (unsigned long long)dm_program_hash(ex->prog),
                    (unsigned long long)ex->o.seed, (unsigned long long)coeffs_hash(&ex->coeffs),
                    (long long)ex->o.tokens, ex->o.muon.lr, ex->o.adamw.lr};
}

static int latest_line(const ck_run *r, char *buf, size_t n)
{
    return snprintf(buf, n, CK_LATEST " step %d hash %016llx ranks %d tokens %lld seed %llu grad-chunks %d "
                    "lr-muon %.17g lr-adamw %.17g ns-coeffs %016llx\n", r->step, r->hash, r->ranks, r->tokens, r->seed,
                    r->chunks, r->lr_muon, r->lr_adamw, r->coeffs);
}

static int read_latest(const char *path, ck_run *r, dm_err *err)
{
    FILE *f = fopen(path, "r");
    if (!f) return dm_err_set(err, "%s: %s (no checkpoint to resume from)", path, strerror(errno));
    char line[512] = "";
    int ok = fgets(line, sizeof line, f) != NULL;
    fclose(f);
    if (ok && !strncmp(line, "dmuon-checkpoint-1 ", 19))
        return dm_err_set(err, "%s: a checkpoint of an older dmuon (format 1: no checksums, no run options); "
                          "start without --resume", path);
    char tail;
    if (!ok || sscanf(line, CK_LATEST " step %d hash %llx ranks %d tokens %lld seed %llu grad-chunks %d lr-muon %lf "
                      "lr-adamw %lf ns-coeffs %llx%c", &r->step, &r->hash, &r->ranks, &r->tokens, &r->seed, &r->chunks,
                      &r->lr_muon, &r->lr_adamw, &r->coeffs, &tail) != 10 || tail != '\n' || r->step < 0)
        return dm_err_set(err, "%s:1:1: expected '" CK_LATEST " step K hash H ranks N tokens T seed S grad-chunks C "
                          "lr-muon X lr-adamw Y ns-coeffs H'", path);
    return 0;
}

/* The checkpoint against this run: another program, ranks, tokens or seed is another run; other
 * learning rates, NS coefficients or gradient chunks would resume differently: each is named. */
static int check_run(const char *path, const ck_run *c, const ck_run *me, dm_err *err)
{
    if (c->hash != me->hash || c->ranks != me->ranks || c->tokens != me->tokens || c->seed != me->seed)
        return dm_err_set(err, "%s: the checkpoint is of another run (program %016llx, %d ranks, %lld tokens, seed %llu; "
                          "this run: %016llx, %d, %lld, %llu)", path, c->hash, c->ranks, c->tokens, c->seed, me->hash,
                          me->ranks, me->tokens, me->seed);
    char what[512] = "";
    size_t k = 0;
    if (c->lr_muon != me->lr_muon)
        k += (size_t)snprintf(what + k, sizeof what - k, "; --lr-muon %g (this run: %g)", c->lr_muon, me->lr_muon);
    if (c->lr_adamw != me->lr_adamw && k < sizeof what)
        k += (size_t)snprintf(what + k, sizeof what - k, "; --lr-adamw %g (this run: %g)", c->lr_adamw, me->lr_adamw);
    if (c->chunks != me->chunks && k < sizeof what)
        k += (size_t)snprintf(what + k, sizeof what - k, "; --grad-chunks %d (this run: %d)", c->chunks, me->chunks);
    if (c->coeffs != me->coeffs && k < sizeof what)
        k += (size_t)snprintf(what + k, sizeof what - k, "; other --ns-coeffs (hash %016llx; this run: %016llx)",
                              c->coeffs, me->coeffs);
    if (k)
        return dm_err_set(err, "%s: the checkpoint was written with other options%s; resume with the same ones or "
                          "start afresh", path, what);
    return 0;
}

/* ---- rank files ---------------------------------------------------------------------------- */

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

/* The bytes of this rank's file for this run. */
static long long rank_file_bytes(real_exec *ex)
{
    long long n = (long long)(sizeof CK_MAGIC - 1) + 6 * 8 + 4;
    for (int64_t i = 0; i < ex->n_mx; i++) {
        real_pinfo pi;
        real_param_info(ex, i, &pi);
        n += 5 * 8 + 4LL * pi.size * (1 + pi.has_mom + 2 * pi.has_adam);
    }
    return n;
}

typedef struct ck_out {
    FILE *f;
    uint32_t crc;
} ck_out;

static void put(ck_out *o, const void *p, size_t n)
{
    o->crc = crc32c(o->crc, p, n);
    fwrite(p, 1, n, o->f); /* write errors: dm_out_commit */
}

static int write_rank(real_exec *ex, const char *path, int *committed, dm_err *err)
{
    float *b[4], *mem = state_bufs(ex, b, err);
    dm_out *out = mem ? dm_out_open(path, err) : NULL;
    int rc = out ? 0 : -1;
    ck_out o = {out ? dm_out_file(out) : NULL, 0};
    int64_t hdr[6] = {ex->step, ex->adam_t, ex->n_mx, (int64_t)dm_program_hash(ex->prog), ex->rank, ex->nranks};
    if (rc == 0) put(&o, CK_MAGIC, sizeof CK_MAGIC - 1), put(&o, hdr, sizeof hdr);
    for (int64_t i = 0; i < ex->n_mx && rc == 0; i++) {
        real_pinfo pi;
        real_param_info(ex, i, &pi);
        int64_t ph[5] = {pi.size, pi.own_lo, pi.own_hi, pi.has_mom, pi.has_adam};
        size_t sz = (size_t)pi.size * 4;
        if (real_param_get(ex, i, b[0], pi.has_mom ? b[1] : NULL, pi.has_adam ? b[2] : NULL, pi.has_adam ? b[3] : NULL,
                           err) < 0) {
            rc = -1;
            break;
        }
        put(&o, ph, sizeof ph);
        put(&o, b[0], sz);
        if (pi.has_mom) put(&o, b[1], sz);
        if (pi.has_adam) put(&o, b[2], sz), put(&o, b[3], sz);
    }
    if (rc == 0) {
        uint32_t crc = o.crc;
        fwrite(&crc, sizeof crc, 1, o.f);
        rc = dm_out_commit(out, err);
        *committed = rc == 0;
    } else {
        dm_out_abort(out);
    }
    free(mem);
    return rc;
}

int real_exec_save(real_exec *ex, const char *dir, dm_err *err)
{
    char path[8448], sdir[4200];
    int rc = 0, made = 0, committed = 0;
    crc_init();
    snprintf(sdir, sizeof sdir, "%s/step-%d", dir, ex->step);
    if (ex->rank == 0) {
        struct stat st;
        if (mkdir(dir, 0755) < 0 && errno != EEXIST) rc = dm_err_set(err, "%s: %s", dir, strerror(errno));
        else if (mkdir(sdir, 0755) == 0) made = 1;
        else if (errno != EEXIST || stat(sdir, &st) < 0 || !S_ISDIR(st.st_mode))
            rc = dm_err_set(err, "%s: %s", sdir, errno == EEXIST ? "exists and is not a folder" : strerror(errno));
    }
    if (real_agree(ex->comm, rc, err) < 0) return -1;
    snprintf(path, sizeof path, "%s/rank-%d.bin", sdir, ex->rank);
    rc = write_rank(ex, path, &committed, err);
    if (real_agree(ex->comm, rc, err) < 0) {
        /* leave nothing of this save: the files written, then the folder made for them */
        if (committed) unlink(path);
        MPI_Barrier(ex->comm);
        if (made) rmdir(sdir);
        return -1;
    }
    if (ex->rank == 0) { /* every rank's file is in place: move `latest`, drop the older step */
        char text[512], old[8448] = "";
        ck_run prev, me = this_run(ex);
        snprintf(path, sizeof path, "%s/latest", dir);
        dm_err e2;
        if (read_latest(path, &prev, &e2) == 0 && prev.step != ex->step)
            snprintf(old, sizeof old, "%s/step-%d", dir, prev.step);
        int n = latest_line(&me, text, sizeof text);
        dm_out *o = dm_out_open(path, err);
        if (!o) rc = -1;
        else {
            fwrite(text, 1, (size_t)n, dm_out_file(o));
            rc = dm_out_commit(o, err);
        }
        if (rc == 0 && old[0]) {
            for (int r = 0; r < ex->nranks; r++) {
                snprintf(path, sizeof path, "%s/rank-%d.bin", old, r);
                unlink(path);
            }
            rmdir(old);
        }
    }
    return real_agree(ex->comm, rc, err);
}

static int read_all(FILE *f, void *p, size_t n) { return fread(p, 1, n, f) == n ? 0 : -1; }

/* Read n bytes into p and add them to the CRC. */
static int take(FILE *f, void *p, size_t n, uint32_t *crc)
{
    if (read_all(f, p, n) < 0) return -1;
    *crc = crc32c(*crc, p, n);
    return 0;
}

/* Pass 1 (install 0): check the file against this run (its header, then its size: bytes, this
 * run's file size) and its checksum, installing nothing. Pass 2 (install 1): read it again and
 * install it. */
static int read_rank(real_exec *ex, FILE *f, const char *path, int step, float *b[4], int install, long long bytes,
                     int64_t *adam_t, dm_err *err)
{
    uint32_t crc = 0, want = 0;
    char magic[sizeof CK_MAGIC - 1];
    int64_t hdr[6];
    if (fseek(f, 0, SEEK_SET) != 0 || take(f, magic, sizeof magic, &crc) < 0 ||
        memcmp(magic, CK_MAGIC, sizeof magic) != 0 || take(f, hdr, sizeof hdr, &crc) < 0)
        return dm_err_set(err, "%s: not a dmuon rank checkpoint (format 2)", path);
    if (hdr[4] != ex->rank || hdr[5] != ex->nranks)
        return dm_err_set(err, "%s: holds rank %lld of %lld ranks' state; this is rank %d of %d", path,
                          (long long)hdr[4], (long long)hdr[5], ex->rank, ex->nranks);
    if (hdr[0] != step || hdr[2] != ex->n_mx || (uint64_t)hdr[3] != dm_program_hash(ex->prog) || hdr[1] < 0 ||
        hdr[1] > hdr[0])
        return dm_err_set(err, "%s: step %lld (%lld AdamW steps) of %lld matrices, program %016llx; expected step %d "
                          "of %lld, program %016llx", path, (long long)hdr[0], (long long)hdr[1], (long long)hdr[2],
                          (unsigned long long)hdr[3], step, (long long)ex->n_mx,
                          (unsigned long long)dm_program_hash(ex->prog));
    long long fsize = rank_file_bytes(ex); /* ranks' files differ in size: after the rank's check */
    if (bytes != fsize)
        return dm_err_set(err, "%s: %lld bytes; a rank file of this run has %lld (truncated, or data after its end)", path,
                          bytes, fsize);
    for (int64_t i = 0; i < ex->n_mx; i++) {
        real_pinfo pi;
        real_param_info(ex, i, &pi);
        int64_t ph[5];
        size_t sz = (size_t)pi.size * 4;
        if (take(f, ph, sizeof ph, &crc) < 0) return dm_err_set(err, "%s: truncated at matrix %lld", path, (long long)i);
        if (ph[0] != pi.size || ph[3] != pi.has_mom || ph[4] != pi.has_adam)
            return dm_err_set(err, "%s: matrix %lld (%s): %lld elements%s%s; this run's has %lld%s%s", path, (long long)i,
                              real_matrix_name(ex, i), (long long)ph[0], ph[3] ? ", momentum" : "",
                              ph[4] ? ", AdamW moments" : "", (long long)pi.size, pi.has_mom ? ", momentum" : "",
                              pi.has_adam ? ", AdamW moments" : "");
        if (ph[1] < 0 || ph[1] > ph[2] || ph[2] > pi.size)
            return dm_err_set(err, "%s: matrix %lld (%s): owned range [%lld, %lld) outside its %lld elements", path,
                              (long long)i, real_matrix_name(ex, i), (long long)ph[1], (long long)ph[2],
                              (long long)pi.size);
        if (take(f, b[0], sz, &crc) < 0 || (pi.has_mom && take(f, b[1], sz, &crc) < 0) ||
            (pi.has_adam && (take(f, b[2], sz, &crc) < 0 || take(f, b[3], sz, &crc) < 0)))
            return dm_err_set(err, "%s: truncated at matrix %lld", path, (long long)i);
        if (install && real_param_put(ex, i, b[0], pi.has_mom ? b[1] : NULL, pi.has_adam ? b[2] : NULL,
                                      pi.has_adam ? b[3] : NULL, ph[1], ph[2], err) < 0)
            return -1;
    }
    if (read_all(f, &want, sizeof want) < 0 || fgetc(f) != EOF)
        return dm_err_set(err, "%s: its checksum is missing, or data follows it", path);
    if (want != crc)
        return dm_err_set(err, "%s: checksum mismatch (CRC32C %08x, stored %08x): the file is damaged", path, crc, want);
    *adam_t = hdr[1];
    return 0;
}

int real_exec_load(real_exec *ex, const char *dir, dm_err *err)
{
    char path[8448];
    ck_run c = {0}, me = this_run(ex);
    crc_init();
    snprintf(path, sizeof path, "%s/latest", dir);
    int rc = read_latest(path, &c, err);
    if (rc == 0) rc = check_run(path, &c, &me, err);
    if (real_agree(ex->comm, rc, err) < 0) return -1;
    snprintf(path, sizeof path, "%s/step-%d/rank-%d.bin", dir, c.step, ex->rank);
    float *b[4], *mem = state_bufs(ex, b, err);
    FILE *f = mem ? fopen(path, "rb") : NULL;
    struct stat st;
    int64_t adam_t = 0;
    if (!mem) rc = -1;
    else if (!f) rc = dm_err_set(err, "%s: %s", path, strerror(errno));
    else if (fstat(fileno(f), &st) < 0) rc = dm_err_set(err, "%s: %s", path, strerror(errno));
    else rc = read_rank(ex, f, path, c.step, b, 0, (long long)st.st_size, &adam_t, err);
    /* everything checked on every rank: now install it */
    if (real_agree(ex->comm, rc, err) == 0) rc = read_rank(ex, f, path, c.step, b, 1, (long long)st.st_size, &adam_t, err);
    else rc = -2;
    if (f) fclose(f);
    free(mem);
    if (rc == -2 || real_agree(ex->comm, rc, err) < 0) return -1;
    ex->step = c.step;
    ex->adam_t = adam_t;
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

