/* test_outfile.c: atomic output files (core/outfile.c). A committed file appears whole under
 * its name and leaves no temporary behind; an aborted or failed one leaves nothing; a process
 * interrupted while writing (SIGINT, SIGTERM, SIGHUP) removes its temporary file and dies of the
 * signal; SIGKILL leaves only the temporary, never a file under the final name; a program's own
 * signal handler is left alone; a forked child does not remove its parent's files.
 * Hostile folders: symlinks planted at the temporary names (forced through getrandom, which this
 * program defines over libc's) are skipped, never followed or removed; a symlink at the target
 * is replaced, its pointee untouched; folders are refused; /dev/null stays a device and
 * /dev/full, a FIFO and a file size limit give write errors naming the path and errno. Files
 * written by another program go through dm_out_reserve. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <glob.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>
#include <unistd.h>

#include "outfile.h"
#include "tap.h"

static char dir[256];

/* getrandom over libc's (the library is linked statically into this program, so its calls come
 * here): with forced_byte >= 0 every byte is forced_byte + the call's index, so the temporary
 * names are known ("AAAAAAAA", then "BBBBBBBB", ...); else the real system call. */
static int forced_byte = -1, forced_calls;
ssize_t getrandom(void *buf, size_t n, unsigned int flags)
{
    if (forced_byte < 0) return syscall(SYS_getrandom, buf, n, flags);
    memset(buf, forced_byte + forced_calls++, n);
    return (ssize_t)n;
}

static int exists(const char *p)
{
    struct stat st;
    return stat(p, &st) == 0;
}

static int file_is(const char *p, const char *want)
{
    char buf[256] = "";
    FILE *f = fopen(p, "r");
    if (!f) return 0;
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = 0;
    return strcmp(buf, want) == 0;
}

/* The one temporary file "PATH.tmp.PID.*" of process pid into out ("" when none or several). */
static int tmp_name(char *out, size_t n, const char *path, pid_t pid)
{
    char pat[700];
    glob_t g;
    snprintf(pat, sizeof pat, "%s.tmp.%ld.*", path, (long)pid);
    out[0] = 0;
    int found = glob(pat, 0, NULL, &g) == 0 ? (int)g.gl_pathc : 0;
    if (found == 1) snprintf(out, n, "%s", g.gl_pathv[0]);
    if (found) globfree(&g);
    return found;
}

/* Files left in the test folder (to catch stray temporaries). */
static int count_files(void)
{
    char cmd[512];
    snprintf(cmd, sizeof cmd, "ls -A '%s' | wc -l", dir);
    FILE *p = popen(cmd, "r");
    int n = -1;
    if (p && fscanf(p, "%d", &n) != 1) n = -1;
    if (p) pclose(p);
    return n;
}

static void test_commit_abort(void)
{
    char path[512], tmp[700], tmp2[700];
    dm_err err = {{0}};
    snprintf(path, sizeof path, "%s/out.txt", dir);

    mode_t um = umask(022);
    dm_out *o = dm_out_open(path, &err);
    ok(o != NULL, "open %s", path);
    if (!o) return;
    fputs("hello\n", dm_out_file(o));
    ok(tmp_name(tmp, sizeof tmp, path, getpid()) == 1 && !exists(path),
       "while writing, only the temporary file exists (%s)", tmp);
    ok(strlen(tmp) == strlen(path) + strlen(".tmp.") + (size_t)snprintf(NULL, 0, "%ld", (long)getpid()) + 9,
       "its name is PATH.tmp.PID. and 8 random characters");
    ok(strcmp(dm_out_path(o), tmp) == 0, "dm_out_path names it");
    ok(dm_out_commit(o, &err) == 0, "commit");
    ok(file_is(path, "hello\n") && !exists(tmp), "after commit: the whole file under its name, no temporary");
    struct stat st;
    ok(stat(path, &st) == 0 && (st.st_mode & 0777) == 0644, "mode 0666 less the umask (0644), as fopen gives");
    umask(um);

    o = dm_out_open(path, &err);
    tmp_name(tmp, sizeof tmp, path, getpid());
    fputs("second version, never committed\n", dm_out_file(o));
    dm_out_abort(o);
    ok(file_is(path, "hello\n") && !exists(tmp), "abort keeps the previous file and removes the temporary");
    dm_out_abort(NULL);

    /* two open at once: different temporaries */
    dm_out *a = dm_out_open(path, &err), *b = dm_out_open(path, &err);
    ok(a && b && strcmp(dm_out_path(a), dm_out_path(b)) != 0, "two pending outputs of one path: two temporaries");
    snprintf(tmp2, sizeof tmp2, "%s", b ? dm_out_path(b) : "");
    dm_out_abort(a);
    dm_out_abort(b);
    ok(!exists(tmp2), "both removed");
    unlink(path);

    /* a folder under the final name is refused at open, before anything is written */
    snprintf(path, sizeof path, "%s/folder", dir);
    char inner[600];
    snprintf(inner, sizeof inner, "%s/x", path);
    mkdir(path, 0700);
    fclose(fopen(inner, "w"));
    err.msg[0] = 0;
    o = dm_out_open(path, &err);
    ok(o == NULL && strstr(err.msg, "not a regular file (a folder); refusing to replace it"), "a folder is refused: %s",
       err.msg);
    ok(tmp_name(tmp, sizeof tmp, path, getpid()) == 0, "no temporary made");
    dm_out_abort(o);
    unlink(inner);
    rmdir(path);

    snprintf(path, sizeof path, "%s/no/such/folder/out.txt", dir);
    err.msg[0] = 0;
    ok(dm_out_open(path, &err) == NULL && strstr(err.msg, "cannot create a temporary file") &&
           strstr(err.msg, "No such file or directory"),
       "open in a missing folder fails: %s", err.msg);

    err.msg[0] = 0;
    o = dm_out_open("-", &err);
    ok(o && dm_out_file(o) == stdout && strcmp(dm_out_path(o), "-") == 0 && dm_out_commit(o, &err) == 0,
       "\"-\" is stdout");
    ok(count_files() == 0, "test folder empty again");
}

/* Symlinks planted by someone else in the output folder. */
static void test_planted(void)
{
    char path[512], victim[512], link[700], tmp[700];
    dm_err err = {{0}};
    snprintf(path, sizeof path, "%s/result.json", dir);
    snprintf(victim, sizeof victim, "%s/victim", dir);
    tap_write_file("victim", victim, "precious\n");

    /* the old predictable name, and the target itself, as symlinks to the victim */
    snprintf(link, sizeof link, "%s.tmp.%ld", path, (long)getpid());
    ok(symlink(victim, link) == 0 && symlink(victim, path) == 0, "planted %s and %s -> victim", link, path);
    dm_out *o = dm_out_open(path, &err);
    if (o) fputs("new\n", dm_out_file(o));
    ok(o && dm_out_commit(o, &err) == 0, "written over a symlinked target: %s", o ? "" : err.msg);
    struct stat st;
    ok(lstat(path, &st) == 0 && S_ISREG(st.st_mode) && file_is(path, "new\n"), "the symlink is replaced by the file");
    ok(file_is(victim, "precious\n"), "what it pointed to is untouched");
    ok(lstat(link, &st) == 0 && S_ISLNK(st.st_mode), "the planted PATH.tmp.PID symlink is left alone");
    unlink(link);
    unlink(path);

    /* the exact next random names, planted: skipped, never followed, never removed */
    forced_byte = 0;
    forced_calls = 0;
    snprintf(link, sizeof link, "%s.tmp.%ld.AAAAAAAA", path, (long)getpid());
    ok(symlink(victim, link) == 0, "planted the next temporary name as a symlink");
    o = dm_out_open(path, &err);
    ok(o && strstr(dm_out_path(o), ".BBBBBBBB"), "the taken name is skipped: %s", o ? dm_out_path(o) : err.msg);
    if (o) fputs("new\n", dm_out_file(o));
    ok(o && dm_out_commit(o, &err) == 0 && file_is(path, "new\n"), "and the output committed");
    ok(file_is(victim, "precious\n") && lstat(link, &st) == 0 && S_ISLNK(st.st_mode),
       "the victim is untouched and the planted link still there");
    unlink(path);

    /* every name taken (62 distinct names cycle through the 100 tries): a clear error */
    for (int i = 1; i < 62; i++) {
        char name[700];
        snprintf(name, sizeof name, "%s.tmp.%ld.%c%c%c%c%c%c%c%c", path, (long)getpid(),
                 "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789"[i],
                 "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789"[i],
                 "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789"[i],
                 "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789"[i],
                 "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789"[i],
                 "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789"[i],
                 "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789"[i],
                 "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789"[i]);
        if (symlink(victim, name) != 0) ok(0, "plant %s", name);
    }
    forced_calls = 0;
    err.msg[0] = 0;
    o = dm_out_open(path, &err);
    ok(o == NULL && strstr(err.msg, "random names were all taken"), "all names taken: %s", err.msg);
    ok(!exists(path) && file_is(victim, "precious\n"), "nothing written anywhere");
    forced_byte = -1;
    char pat[700];
    glob_t g;
    snprintf(pat, sizeof pat, "%s.tmp.*", path);
    if (glob(pat, 0, NULL, &g) == 0) {
        ok(g.gl_pathc == 62, "the 62 planted links are all still there");
        for (size_t i = 0; i < g.gl_pathc; i++) unlink(g.gl_pathv[i]);
        globfree(&g);
    }

    /* a reserved temporary replaced by a symlink before commit: not renamed, target untouched */
    o = dm_out_reserve(path, &err);
    ok(o != NULL, "reserve %s", path);
    if (o) {
        snprintf(tmp, sizeof tmp, "%s", dm_out_path(o));
        unlink(tmp);
        if (symlink(victim, tmp) != 0) ok(0, "replace %s by a symlink", tmp);
        err.msg[0] = 0;
        ok(dm_out_commit(o, &err) == -1 && strstr(err.msg, "not renamed"), "commit refuses: %s", err.msg);
        ok(!exists(path) && lstat(tmp, &st) != 0 && file_is(victim, "precious\n"),
           "no file under the name, the link removed, the victim untouched");
    }
    unlink(victim);
    ok(count_files() == 0, "test folder empty again");
}

/* Devices and FIFOs are written straight into; write errors name the path and errno. As root
 * a regression would replace the real /dev/null and /dev/full by regular files (the bug this
 * checks), so root gets private device nodes in the test folder; without root the real ones
 * are safe (their folder is not writable). */
static void test_devices(void)
{
    dm_err err = {{0}};
    struct stat st;
    char null_path[512] = "/dev/null", full_path[512] = "/dev/full";
    if (geteuid() == 0) {
        snprintf(null_path, sizeof null_path, "%s/null", dir);
        snprintf(full_path, sizeof full_path, "%s/full", dir);
        if (mknod(null_path, S_IFCHR | 0666, makedev(1, 3)) != 0 || mknod(full_path, S_IFCHR | 0666, makedev(1, 7)) != 0) {
            unlink(null_path);
            ok(1, "# SKIP root without mknod: the real /dev/null is not risked");
            return;
        }
    }
    dm_out *o = dm_out_open(null_path, &err);
    ok(o && strcmp(dm_out_path(o), null_path) == 0, "/dev/null opens, written in place: %s", o ? "" : err.msg);
    if (o) {
        fputs("discarded\n", dm_out_file(o));
        ok(dm_out_commit(o, &err) == 0, "and commits");
    }
    ok(stat(null_path, &st) == 0 && S_ISCHR(st.st_mode), "/dev/null is still a character device");

    if (stat(full_path, &st) == 0 && S_ISCHR(st.st_mode)) {
        o = dm_out_open(full_path, &err);
        ok(o != NULL, "/dev/full opens");
        if (o) {
            for (int i = 0; i < 100000; i++) fprintf(dm_out_file(o), "row %d\n", i);
            ok(!ferror(dm_out_file(o)), "the writer sees no error while writing");
            err.msg[0] = 0;
            char want[600];
            snprintf(want, sizeof want, "%s: write error: No space left on device", full_path);
            ok(dm_out_commit(o, &err) == -1 && strcmp(err.msg, want) == 0, "commit names the path and errno: %s",
               err.msg);
        }
        ok(stat(full_path, &st) == 0 && S_ISCHR(st.st_mode), "/dev/full is still a character device");
    } else {
        ok(1, "# SKIP no /dev/full");
    }
    if (geteuid() == 0) {
        unlink(null_path);
        unlink(full_path);
    }

    /* a FIFO: a reader child gets the bytes */
    char fifo[512];
    snprintf(fifo, sizeof fifo, "%s/pipe", dir);
    if (mkfifo(fifo, 0600) == 0) {
        int fds[2];
        if (pipe(fds)) return;
        pid_t pid = fork();
        if (pid == 0) {
            close(fds[0]);
            char buf[64] = "";
            FILE *f = fopen(fifo, "r");
            size_t n = f ? fread(buf, 1, sizeof buf - 1, f) : 0;
            if (write(fds[1], buf, n) < 0) _exit(1);
            _exit(0);
        }
        close(fds[1]);
        o = dm_out_open(fifo, &err);
        if (o) fputs("through the pipe", dm_out_file(o));
        ok(o && dm_out_commit(o, &err) == 0, "a FIFO is written into");
        char got[64] = "";
        ssize_t n = read(fds[0], got, sizeof got - 1);
        got[n > 0 ? n : 0] = 0;
        close(fds[0]);
        waitpid(pid, NULL, 0);
        ok(strcmp(got, "through the pipe") == 0 && lstat(fifo, &st) == 0 && S_ISFIFO(st.st_mode),
           "the reader got the bytes; the FIFO is still a FIFO");
        unlink(fifo);
    }

    /* a file size limit (EFBIG): the old file stays, no temporary left */
    char path[512];
    snprintf(path, sizeof path, "%s/big.csv", dir);
    tap_write_file("old", path, "old\n");
    pid_t pid = fork();
    if (pid == 0) {
        struct rlimit rl = {4096, 4096};
        signal(SIGXFSZ, SIG_IGN);
        setrlimit(RLIMIT_FSIZE, &rl);
        dm_err e = {{0}};
        dm_out *w = dm_out_open(path, &e);
        if (!w) _exit(3);
        for (int i = 0; i < 10000; i++) fprintf(dm_out_file(w), "%d,%d\n", i, i * i);
        int rc = dm_out_commit(w, &e);
        _exit(rc == -1 && strstr(e.msg, "big.csv: write error: File too large (nothing replaced)") ? 0 : 4);
    }
    int status = 0;
    waitpid(pid, &status, 0);
    ok(WIFEXITED(status) && WEXITSTATUS(status) == 0, "over RLIMIT_FSIZE: commit fails with EFBIG and the path");
    ok(file_is(path, "old\n") && count_files() == 1, "the old file is unchanged and no temporary is left");
    unlink(path);
}

/* dm_out_reserve: another program writes the temporary, commit renames it. */
static void test_reserve(void)
{
    char path[512], tmp[700];
    dm_err err = {{0}};
    struct stat st;
    snprintf(path, sizeof path, "%s/plot.png", dir);
    dm_out *o = dm_out_reserve(path, &err);
    ok(o && dm_out_file(o) == NULL, "reserve %s", path);
    if (!o) return;
    snprintf(tmp, sizeof tmp, "%s", dm_out_path(o));
    ok(strncmp(tmp, path, strlen(path)) == 0 && lstat(tmp, &st) == 0 && S_ISREG(st.st_mode) && st.st_size == 0,
       "an empty regular temporary file beside the target: %s", tmp);
    ok(!exists(path), "nothing under the name yet");
    tap_write_file("the other program", tmp, "PNG");
    ok(dm_out_commit(o, &err) == 0 && file_is(path, "PNG") && !exists(tmp), "commit renames it into place");

    o = dm_out_reserve(path, &err);
    if (o) snprintf(tmp, sizeof tmp, "%s", dm_out_path(o));
    if (o) tap_write_file("the other program", tmp, "half a PNG");
    dm_out_abort(o);
    ok(o && file_is(path, "PNG") && !exists(tmp), "abort removes it and keeps the old file");
    unlink(path);

    err.msg[0] = 0;
    ok(dm_out_reserve("-", &err) == NULL && strstr(err.msg, "expected a file name"), "\"-\" is refused: %s", err.msg);
    char fifo[512];
    snprintf(fifo, sizeof fifo, "%s/plot.fifo", dir);
    mkfifo(fifo, 0600);
    o = dm_out_reserve(fifo, &err);
    ok(o && strcmp(dm_out_path(o), fifo) == 0 && dm_out_commit(o, &err) == 0, "a FIFO is handed out as itself");
    unlink(fifo);
    ok(count_files() == 0, "test folder empty again");
}

/* Child: open the files, write part of them, report ready on fd, wait for the signal. */
static void child_writer(int fd, int nfiles, int ignore_sigint)
{
    dm_err err;
    if (ignore_sigint) signal(SIGINT, SIG_IGN);
    for (int i = 0; i < nfiles; i++) {
        char path[512];
        snprintf(path, sizeof path, "%s/result%d.csv", dir, i);
        dm_out *o = dm_out_open(path, &err);
        if (!o) _exit(3);
        fputs("# half of a table\n1,2,3\n", dm_out_file(o));
        fflush(dm_out_file(o));
    }
    if (write(fd, "r", 1) != 1) _exit(4);
    for (;;) pause();
}

/* Start a writer, signal it once it is mid-write, and return its wait status. */
static int interrupt_writer(int sig, int nfiles, int ignore_sigint, pid_t *pid_out)
{
    int fds[2];
    if (pipe(fds)) return -1;
    pid_t pid = fork();
    if (pid == 0) {
        close(fds[0]);
        child_writer(fds[1], nfiles, ignore_sigint);
    }
    close(fds[1]);
    char c;
    int ready = read(fds[0], &c, 1) == 1;
    close(fds[0]);
    *pid_out = pid;
    if (!ready) {
        kill(pid, SIGKILL);
    } else {
        kill(pid, sig);
        if (ignore_sigint) {
            usleep(100 * 1000);
            kill(pid, SIGKILL); /* it ignored SIGINT, as its own disposition said */
        }
    }
    /* never hang: a writer still alive after 10 s (a signal it did not act on) is killed, and
     * the check that follows fails on its SIGKILL status */
    int status = 0;
    for (int i = 0; i < 1000 && waitpid(pid, &status, WNOHANG) == 0; i++) usleep(10 * 1000);
    if (waitpid(pid, &status, WNOHANG) == 0) {
        kill(pid, SIGKILL);
        waitpid(pid, &status, 0);
    }
    return ready ? status : -1;
}

static void test_interrupts(void)
{
    static const int sigs[] = {SIGINT, SIGTERM, SIGHUP};
    static const char *names[] = {"SIGINT", "SIGTERM", "SIGHUP"};
    for (int i = 0; i < 3; i++) {
        pid_t pid;
        int st = interrupt_writer(sigs[i], 3, 0, &pid);
        ok(st != -1 && WIFSIGNALED(st) && WTERMSIG(st) == sigs[i], "%s: the writer dies of the signal", names[i]);
        ok(count_files() == 0, "%s: no result and no temporary file left (3 files pending)", names[i]);
    }

    pid_t pid;
    int st = interrupt_writer(SIGKILL, 1, 0, &pid);
    char path[512], tmp[700];
    snprintf(path, sizeof path, "%s/result0.csv", dir);
    ok(st != -1 && WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL, "SIGKILL: the writer dies");
    ok(!exists(path), "SIGKILL: nothing under the final name");
    ok(tmp_name(tmp, sizeof tmp, path, pid) == 1, "SIGKILL: the temporary file is what remains");
    unlink(tmp);

}

/* Runs first, before this process opens any file (and so installs any handler): a program that
 * ignores SIGINT keeps ignoring it. */
static void test_ignored_signal(void)
{
    char path[512], tmp[700];
    pid_t pid;
    snprintf(path, sizeof path, "%s/result0.csv", dir);
    int st = interrupt_writer(SIGINT, 1, 1, &pid);
    ok(st != -1 && WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL,
       "a program that ignores SIGINT keeps ignoring it (the handler is not forced on it)");
    ok(!exists(path) && tmp_name(tmp, sizeof tmp, path, pid) == 1,
       "... and its temporary file is left, nothing under the final name");
    unlink(tmp);
}

/* A forked child (e.g. a helper process) that is interrupted must not remove the parent's
 * pending file. */
static void test_fork(void)
{
    char path[512], tmp[700];
    dm_err err;
    snprintf(path, sizeof path, "%s/parent.json", dir);
    struct sigaction old;
    sigaction(SIGTERM, NULL, &old);
    dm_out *o = dm_out_open(path, &err);
    if (!o) {
        ok(0, "open %s: %s", path, err.msg);
        return;
    }
    snprintf(tmp, sizeof tmp, "%s", dm_out_path(o));
    fputs("{}", dm_out_file(o));
    fflush(dm_out_file(o));
    pid_t pid = fork();
    if (pid == 0) {
        raise(SIGTERM);
        _exit(0);
    }
    int st;
    waitpid(pid, &st, 0);
    ok(WIFSIGNALED(st) && WTERMSIG(st) == SIGTERM, "child died of SIGTERM");
    ok(exists(tmp), "the parent's temporary file survives the child's signal");
    ok(dm_out_commit(o, &err) == 0 && file_is(path, "{}"), "and the parent commits it");
    unlink(path);
    sigaction(SIGTERM, &old, NULL);
}

int main(void)
{
    const char *base = getenv("TMPDIR");
    snprintf(dir, sizeof dir, "%s/dmuon-outfile-XXXXXX", base && *base ? base : "/tmp");
    if (!mkdtemp(dir)) {
        printf("Bail out! mkdtemp: %s\n", strerror(errno));
        return 1;
    }
    /* Started under nohup, or as a background job of a shell without job control, this process
     * inherits SIGHUP or SIGINT ignored, and dm_out rightly leaves ignored signals alone; the
     * tests below set the dispositions they test, starting from the defaults. */
    for (int i = 0; i < 3; i++) signal((int[]){SIGINT, SIGTERM, SIGHUP}[i], SIG_DFL);
    test_ignored_signal();
    test_commit_abort();
    test_planted();
    test_devices();
    test_reserve();
    test_interrupts();
    test_fork();
    ok(count_files() == 0, "nothing left in the test folder");
    rmdir(dir);
    return tap_done();
}
