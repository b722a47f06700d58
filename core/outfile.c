/* outfile.c: atomic output files (see outfile.h), and removal of pending temporary files when
 * the process is interrupted. */
#include "outfile.h"

#include <errno.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

struct dm_out {
    FILE *f;
    char *path, *tmp;
    int is_stdout;
    int slot; /* index in pending[], -1 when not registered */
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

static void track(dm_out *o)
{
    sigset_t old;
    install_handlers();
    block(&old);
    pending_pid = getpid();
    o->slot = -1;
    for (int i = 0; i < DM_OUT_MAX_PENDING; i++)
        if (!pending[i]) {
            pending[i] = o->tmp;
            o->slot = i;
            break;
        }
    sigprocmask(SIG_SETMASK, &old, NULL);
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

/* ---- the file ----------------------------------------------------------------------------- */

static void out_free(dm_out *o)
{
    free(o->path);
    free(o->tmp);
    free(o);
}

dm_out *dm_out_open(const char *path, dm_err *err)
{
    dm_out *o = dm_calloc(1, sizeof *o, err);
    if (!o) return NULL;
    o->slot = -1;
    if (strcmp(path, "-") == 0) {
        o->f = stdout;
        o->is_stdout = 1;
        return o;
    }
    size_t n = strlen(path) + 32;
    o->path = dm_strdup(path, err);
    o->tmp = o->path ? dm_malloc(n, err) : NULL;
    if (!o->path || !o->tmp) goto fail;
    snprintf(o->tmp, n, "%s.tmp.%ld", path, (long)getpid());
    /* Registered before it exists: a signal that arrives once the file is visible finds the
     * handler installed and the name pending (unlinking a name not yet created is harmless). */
    track(o);
    o->f = fopen(o->tmp, "w");
    if (!o->f) {
        int e = errno;
        untrack(o, 0);
        dm_err_set(err, "%s: cannot create (as %s): %s", path, o->tmp, strerror(e));
        goto fail;
    }
    return o;
fail:
    out_free(o);
    return NULL;
}

FILE *dm_out_file(dm_out *o) { return o->f; }

int dm_out_commit(dm_out *o, dm_err *err)
{
    int rc = 0;
    if (o->is_stdout) {
        if (fflush(stdout) || ferror(stdout)) rc = dm_err_set(err, "stdout: write error");
        free(o);
        return rc;
    }
    int bad = ferror(o->f) != 0;
    errno = 0;
    if (fflush(o->f) != 0) bad = 1;
    if (fsync(fileno(o->f)) != 0 && errno != EINVAL) bad = 1;
    int saved = errno;
    if (fclose(o->f) != 0) bad = 1;
    if (bad) {
        rc = dm_err_set(err, "%s: write error: %s", o->path, strerror(saved ? saved : EIO));
        untrack(o, 1);
    } else if (rename(o->tmp, o->path) != 0) {
        rc = dm_err_set(err, "%s: cannot rename into place: %s", o->path, strerror(errno));
        untrack(o, 1);
    } else {
        untrack(o, 0);
    }
    out_free(o);
    return rc;
}

void dm_out_abort(dm_out *o)
{
    if (!o) return;
    if (!o->is_stdout) {
        fclose(o->f);
        untrack(o, 1);
    }
    out_free(o);
}
