/* outfile.c: atomic output files (see outfile.h): exclusive temporaries under unpredictable
 * names, write errors kept with their errno, rename and folder sync at commit, and removal of
 * pending temporary files when the process is interrupted. */
#define _GNU_SOURCE
#include "outfile.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

enum { OUT_STDOUT, OUT_TEMP, OUT_DIRECT, OUT_RESERVED };

struct dm_out {
    int mode;
    FILE *f;     /* OUT_TEMP, OUT_DIRECT: a stream over fd (write errors kept in err_no) */
    int fd;      /* -1 when closed */
    int dir_fd;  /* OUT_TEMP, OUT_RESERVED: PATH's folder, synced after the rename; -1 if unreadable */
    int err_no;  /* first write or close error, 0 if none */
    char *path;
    char *tmp;   /* OUT_TEMP, OUT_RESERVED: the temporary file; NULL otherwise */
    int slot;    /* index in pending[], -1 when not registered */
};

/* ---- pending temporary files, removed by the signal handler ------------------------------- */

/* Beyond this many files open at once the extra ones are simply not cleaned up on a signal
 * (they still never appear under their final names). */
#define DM_OUT_MAX_PENDING 64

static const char *volatile pending[DM_OUT_MAX_PENDING];
static volatile pid_t pending_pid; /* a forked child must not remove its parent's files */
static const int cleanup_signals[] = {SIGINT, SIGTERM, SIGHUP};
#define N_CLEANUP_SIGNALS (int)(sizeof cleanup_signals / sizeof cleanup_signals[0])

static void on_signal(int sig)
{
    int saved = errno;
    if (getpid() == pending_pid)
        for (int i = 0; i < DM_OUT_MAX_PENDING; i++)
            if (pending[i]) unlink(pending[i]);
    errno = saved;
    raise(sig); /* SA_RESETHAND restored the default: die of the signal once we return */
}

static void install_handlers(void)
{
    static int installed;
    if (installed) return;
    installed = 1;
    for (int i = 0; i < N_CLEANUP_SIGNALS; i++) {
        struct sigaction old, sa;
        if (sigaction(cleanup_signals[i], NULL, &old) != 0) continue;
        if (old.sa_handler != SIG_DFL) continue; /* ignored, or the program's own handler */
        memset(&sa, 0, sizeof sa);
        sa.sa_handler = on_signal;
        sigemptyset(&sa.sa_mask);
        sa.sa_flags = SA_RESETHAND;
        sigaction(cleanup_signals[i], &sa, NULL);
    }
}

/* Changes to pending[] happen with the cleanup signals blocked, so the handler never sees a
 * slot half-updated or a name already freed. */
static void block(sigset_t *old)
{
    sigset_t s;
    sigemptyset(&s);
    for (int i = 0; i < N_CLEANUP_SIGNALS; i++) sigaddset(&s, cleanup_signals[i]);
    sigprocmask(SIG_BLOCK, &s, old);
}

/* Called with the signals blocked, right after the file was created: a signal that arrived
 * meanwhile is delivered once they are unblocked, and finds the name pending. */
static void track_blocked(dm_out *o)
{
    pending_pid = getpid();
    o->slot = -1;
    for (int i = 0; i < DM_OUT_MAX_PENDING; i++)
        if (!pending[i]) {
            pending[i] = o->tmp;
            o->slot = i;
            break;
        }
}

/* Remove the temporary file (unless it was renamed: pass 0) and forget it. */
static void untrack(dm_out *o, int remove_tmp)
{
    sigset_t old;
    block(&old);
    if (remove_tmp) unlink(o->tmp);
    if (o->slot >= 0) pending[o->slot] = NULL;
    o->slot = -1;
    sigprocmask(SIG_SETMASK, &old, NULL);
}

/* ---- the stream: write errors are kept, not reported to the writer ------------------------ */

static ssize_t cookie_write(void *c, const char *buf, size_t n)
{
    dm_out *o = c;
    size_t done = 0;
    while (!o->err_no && done < n) {
        ssize_t w = write(o->fd, buf + done, n - done);
        if (w > 0) done += (size_t)w;
        else if (w < 0 && errno == EINTR) continue;
        else o->err_no = w < 0 ? errno : EIO;
    }
    return (ssize_t)n; /* dropped after an error: dm_out_commit reports it */
}

static int cookie_close(void *c)
{
    dm_out *o = c;
    if (o->fd >= 0 && close(o->fd) != 0 && !o->err_no && errno != EINTR) o->err_no = errno;
    o->fd = -1;
    return 0;
}

static int open_stream(dm_out *o, dm_err *err)
{
    static const cookie_io_functions_t io = {NULL, cookie_write, NULL, cookie_close};
    o->f = fopencookie(o, "w", io);
    if (!o->f) return dm_err_set(err, "%s: cannot open a stream: %s", o->path, strerror(errno));
    setvbuf(o->f, NULL, _IOFBF, 1 << 16);
    return 0;
}

/* ---- the temporary file ------------------------------------------------------------------- */

/* n random name characters; getrandom, else a clock and counter mix (O_EXCL keeps a guessed
 * name harmless either way: it only costs a retry). */
static void random_chars(char *out, size_t n)
{
    static const char abc[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";
    static uint64_t counter;
    unsigned char r[32];
    if (n > sizeof r) n = sizeof r;
    if (getrandom(r, n, GRND_NONBLOCK) != (ssize_t)n) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        uint64_t x = (uint64_t)ts.tv_nsec ^ ((uint64_t)ts.tv_sec << 30) ^ ((uint64_t)getpid() << 16) ^ ++counter;
        for (size_t i = 0; i < n; i++) { /* splitmix64 */
            uint64_t z = (x += 0x9e3779b97f4a7c15u);
            z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9u;
            z = (z ^ (z >> 27)) * 0x94d049bb133111ebu;
            r[i] = (unsigned char)(z ^ (z >> 31));
        }
    }
    for (size_t i = 0; i < n; i++) out[i] = abc[r[i] % (sizeof abc - 1)];
    out[n] = 0;
}

#define TMP_RANDOM 8
#define TMP_TRIES 100

/* Create PATH.tmp.PID.XXXXXXXX exclusively (never through a symlink) and register it. */
static int create_tmp(dm_out *o, dm_err *err)
{
    size_t n = strlen(o->path) + 48;
    if (!(o->tmp = dm_malloc(n, err))) return -1;
    install_handlers();
    for (int i = 0; i < TMP_TRIES; i++) {
        char rnd[TMP_RANDOM + 1];
        random_chars(rnd, TMP_RANDOM);
        snprintf(o->tmp, n, "%s.tmp.%ld.%s", o->path, (long)getpid(), rnd);
        sigset_t old;
        block(&old);
        o->fd = open(o->tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC | O_NOCTTY, 0666);
        int e = errno;
        if (o->fd >= 0) track_blocked(o);
        sigprocmask(SIG_SETMASK, &old, NULL);
        if (o->fd >= 0) return 0;
        if (e != EEXIST)
            return dm_err_set(err, "%s: cannot create a temporary file beside it (%s): %s", o->path, o->tmp,
                              strerror(e));
    }
    return dm_err_set(err, "%s: cannot create a temporary file beside it: %d random names were all taken", o->path,
                      TMP_TRIES);
}

/* ---- open --------------------------------------------------------------------------------- */

static const char *kind_name(mode_t m)
{
    if (S_ISDIR(m)) return "a folder";
    if (S_ISBLK(m)) return "a block device";
    if (S_ISSOCK(m)) return "a socket";
    return "an unusual file type";
}

/* Open the folder holding PATH, to fsync it after the rename (opened before the temporary is
 * made, so the commit allocates nothing and resolves no name again). A folder we may not read
 * is not synced. */
static int open_folder(dm_out *o, dm_err *err)
{
    const char *slash = strrchr(o->path, '/');
    char *dir = dm_strdup(slash ? o->path : ".", err);
    if (!dir) return -1;
    if (slash) dir[slash == o->path ? 1 : slash - o->path] = 0;
    o->dir_fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    free(dir);
    return 0;
}

static void out_free(dm_out *o)
{
    if (!o) return;
    if (o->dir_fd >= 0) close(o->dir_fd);
    free(o->path);
    free(o->tmp);
    free(o);
}

/* Decide the mode from what PATH is now; for a device or FIFO open it (checked again on the
 * opened file, so a path swapped in between is refused, never written). */
static int open_target(dm_out *o, int reserve, dm_err *err)
{
    struct stat st;
    if (stat(o->path, &st) != 0) {
        if (errno != ENOENT) return dm_err_set(err, "%s: cannot look at it: %s", o->path, strerror(errno));
        o->mode = reserve ? OUT_RESERVED : OUT_TEMP; /* absent (or a dangling symlink, replaced) */
        return 0;
    }
    if (S_ISREG(st.st_mode)) {
        o->mode = reserve ? OUT_RESERVED : OUT_TEMP;
        return 0;
    }
    if (!S_ISCHR(st.st_mode) && !S_ISFIFO(st.st_mode))
        return dm_err_set(err, "%s: not a regular file (%s); refusing to replace it", o->path, kind_name(st.st_mode));
    o->mode = OUT_DIRECT;
    if (reserve) return 0; /* the other program opens it */
    o->fd = open(o->path, O_WRONLY | O_NOCTTY | O_CLOEXEC);
    if (o->fd < 0) return dm_err_set(err, "%s: cannot open for writing: %s", o->path, strerror(errno));
    if (fstat(o->fd, &st) != 0 || !(S_ISCHR(st.st_mode) || S_ISFIFO(st.st_mode))) {
        close(o->fd);
        o->fd = -1;
        return dm_err_set(err, "%s: changed while being opened (no longer a device or FIFO); not written", o->path);
    }
    return 0;
}

static dm_out *out_new(const char *path, int reserve, dm_err *err)
{
    dm_out *o = dm_calloc(1, sizeof *o, err);
    if (!o) return NULL;
    o->slot = -1;
    o->fd = -1;
    o->dir_fd = -1;
    if (strcmp(path, "-") == 0) {
        if (reserve) {
            dm_err_set(err, "\"-\": expected a file name (this output is written by another program)");
            free(o);
            return NULL;
        }
        o->mode = OUT_STDOUT;
        o->f = stdout;
        return o;
    }
    if (!(o->path = dm_strdup(path, err)) || open_target(o, reserve, err)) goto fail;
    if (o->mode != OUT_DIRECT && (open_folder(o, err) || create_tmp(o, err))) goto fail;
    if (o->mode == OUT_RESERVED) {
        close(o->fd);
        o->fd = -1;
    } else if (open_stream(o, err)) {
        if (o->fd >= 0) close(o->fd);
        if (o->tmp) untrack(o, 1);
        goto fail;
    }
    return o;
fail:
    out_free(o);
    return NULL;
}

dm_out *dm_out_open(const char *path, dm_err *err) { return out_new(path, 0, err); }
dm_out *dm_out_reserve(const char *path, dm_err *err) { return out_new(path, 1, err); }

FILE *dm_out_file(dm_out *o) { return o->f; }

const char *dm_out_path(const dm_out *o)
{
    if (o->mode == OUT_STDOUT) return "-";
    return o->tmp ? o->tmp : o->path;
}

/* ---- commit ------------------------------------------------------------------------------- */

/* fsync the folder, so the rename survives a crash. Filesystems that cannot sync a folder
 * (EINVAL, ENOTSUP, EROFS) are left as they are. */
static int sync_folder(dm_out *o, dm_err *err)
{
    if (o->dir_fd < 0) return 0;
    int rc = 0;
    if (fsync(o->dir_fd) != 0 && errno != EINVAL && errno != ENOTSUP && errno != EROFS && errno != EBADF)
        rc = dm_err_set(err, "%s: written, but its folder could not be synced: %s", o->path, strerror(errno));
    return rc;
}

static int commit_reserved(dm_out *o, dm_err *err)
{
    struct stat st;
    int fd = open(o->tmp, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NOCTTY), e = errno;
    if (fd < 0) {
        untrack(o, 1);
        return dm_err_set(err, "%s: its temporary file %s: %s; not renamed", o->path, o->tmp, strerror(e));
    }
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        close(fd);
        untrack(o, 1);
        return dm_err_set(err, "%s: its temporary file %s is no longer a regular file; not renamed", o->path, o->tmp);
    }
    e = fsync(fd) != 0 && errno != EINVAL ? errno : 0;
    close(fd);
    if (e) {
        untrack(o, 1);
        return dm_err_set(err, "%s: write error: %s (nothing replaced)", o->path, strerror(e));
    }
    if (rename(o->tmp, o->path) != 0) {
        e = errno;
        untrack(o, 1);
        return dm_err_set(err, "%s: cannot rename %s into place: %s", o->path, o->tmp, strerror(e));
    }
    untrack(o, 0);
    return sync_folder(o, err);
}

int dm_out_commit(dm_out *o, dm_err *err)
{
    int rc = 0;
    switch (o->mode) {
    case OUT_STDOUT:
        errno = 0;
        if (fflush(stdout) != 0 || ferror(stdout))
            rc = dm_err_set(err, "stdout: write error: %s", strerror(errno ? errno : EIO));
        break;
    case OUT_RESERVED: rc = commit_reserved(o, err); break;
    case OUT_DIRECT:
        fclose(o->f); /* flushes; cookie_close keeps a close error */
        if (o->err_no) rc = dm_err_set(err, "%s: write error: %s", o->path, strerror(o->err_no));
        break;
    case OUT_TEMP:
        fflush(o->f);
        if (!o->err_no && fsync(o->fd) != 0 && errno != EINVAL) o->err_no = errno;
        fclose(o->f);
        if (o->err_no) {
            rc = dm_err_set(err, "%s: write error: %s (nothing replaced)", o->path, strerror(o->err_no));
            untrack(o, 1);
        } else if (rename(o->tmp, o->path) != 0) {
            int e = errno;
            rc = dm_err_set(err, "%s: cannot rename %s into place: %s", o->path, o->tmp, strerror(e));
            untrack(o, 1);
        } else {
            untrack(o, 0);
            rc = sync_folder(o, err);
        }
        break;
    }
    out_free(o);
    return rc;
}

void dm_out_abort(dm_out *o)
{
    if (!o) return;
    if (o->mode == OUT_TEMP || o->mode == OUT_DIRECT) fclose(o->f);
    if (o->tmp && (o->mode == OUT_TEMP || o->mode == OUT_RESERVED)) untrack(o, 1);
    out_free(o);
}

/* ---- before the work ------------------------------------------------------------------------ */

int dm_out_check(const char *path, dm_err *err)
{
    if (!path || !strcmp(path, "-")) return 0;
    if (!*path) return dm_err_set(err, "an empty output file name");
    struct stat st;
    if (stat(path, &st) == 0 && !S_ISREG(st.st_mode) && !S_ISCHR(st.st_mode) && !S_ISFIFO(st.st_mode))
        return dm_err_set(err, "%s: not a regular file (%s); refusing to replace it", path, kind_name(st.st_mode));
    if (stat(path, &st) == 0 && (S_ISCHR(st.st_mode) || S_ISFIFO(st.st_mode))) return 0;
    const char *slash = strrchr(path, '/');
    char *dir = dm_strdup(slash ? path : ".", err);
    if (!dir) return -1;
    if (slash) dir[slash == path ? 1 : slash - path] = 0;
    int rc = 0;
    if (stat(dir, &st) != 0 || !S_ISDIR(st.st_mode))
        rc = dm_err_set(err, "%s: cannot be written: the folder %s does not exist", path, dir);
    else if (access(dir, W_OK | X_OK) != 0)
        rc = dm_err_set(err, "%s: cannot be written: the folder %s: %s", path, dir, strerror(errno));
    free(dir);
    return rc;
}
