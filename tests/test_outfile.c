/* test_outfile.c: atomic output files (core/outfile.c). A committed file appears whole under
 * its name and leaves no temporary behind; an aborted or failed one leaves nothing; a process
 * interrupted while writing (SIGINT, SIGTERM, SIGHUP) removes its temporary file and dies of the
 * signal; SIGKILL leaves only the temporary, never a file under the final name; a program's own
 * signal handler is left alone; a forked child does not remove its parent's files. */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "outfile.h"
#include "tap.h"

static char dir[256];

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

static void tmp_name(char *out, size_t n, const char *path, pid_t pid)
{
    snprintf(out, n, "%s.tmp.%ld", path, (long)pid);
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
    char path[512], tmp[600];
    dm_err err = {{0}};
    snprintf(path, sizeof path, "%s/out.txt", dir);
    tmp_name(tmp, sizeof tmp, path, getpid());

    dm_out *o = dm_out_open(path, &err);
    ok(o != NULL, "open %s", path);
    if (!o) return;
    fputs("hello\n", dm_out_file(o));
    ok(exists(tmp) && !exists(path), "while writing, only the temporary file exists");
    ok(dm_out_commit(o, &err) == 0, "commit");
    ok(file_is(path, "hello\n") && !exists(tmp), "after commit: the whole file under its name, no temporary");

    o = dm_out_open(path, &err);
    fputs("second version, never committed\n", dm_out_file(o));
    dm_out_abort(o);
    ok(file_is(path, "hello\n") && !exists(tmp), "abort keeps the previous file and removes the temporary");
    dm_out_abort(NULL);
    unlink(path);

    /* rename fails: the final name is a non-empty folder */
    snprintf(path, sizeof path, "%s/folder", dir);
    tmp_name(tmp, sizeof tmp, path, getpid());
    char inner[600];
    snprintf(inner, sizeof inner, "%s/x", path);
    mkdir(path, 0700);
    fclose(fopen(inner, "w"));
    o = dm_out_open(path, &err);
    ok(o != NULL, "open over a folder's name");
    if (o) {
        fputs("data", dm_out_file(o));
        err.msg[0] = 0;
        ok(dm_out_commit(o, &err) == -1 && strstr(err.msg, "cannot rename"), "commit fails: %s", err.msg);
        ok(!exists(tmp), "no temporary left after a failed rename");
    }
    unlink(inner);
    rmdir(path);

    snprintf(path, sizeof path, "%s/no/such/folder/out.txt", dir);
    err.msg[0] = 0;
    ok(dm_out_open(path, &err) == NULL && strstr(err.msg, "cannot create"), "open in a missing folder fails: %s",
       err.msg);

    err.msg[0] = 0;
    o = dm_out_open("-", &err);
    ok(o && dm_out_file(o) == stdout && dm_out_commit(o, &err) == 0, "\"-\" is stdout");
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
    char path[512], tmp[600];
    snprintf(path, sizeof path, "%s/result0.csv", dir);
    tmp_name(tmp, sizeof tmp, path, pid);
    ok(st != -1 && WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL, "SIGKILL: the writer dies");
    ok(!exists(path), "SIGKILL: nothing under the final name");
    ok(exists(tmp), "SIGKILL: the temporary file is what remains");
    unlink(tmp);

}

/* Runs first, before this process opens any file (and so installs any handler): a program that
 * ignores SIGINT keeps ignoring it. */
static void test_ignored_signal(void)
{
    char path[512], tmp[600];
    pid_t pid;
    snprintf(path, sizeof path, "%s/result0.csv", dir);
    int st = interrupt_writer(SIGINT, 1, 1, &pid);
    tmp_name(tmp, sizeof tmp, path, pid);
    ok(st != -1 && WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL,
       "a program that ignores SIGINT keeps ignoring it (the handler is not forced on it)");
    ok(!exists(path) && exists(tmp), "... and its temporary file is left, nothing under the final name");
    unlink(tmp);
}

/* A forked child (e.g. a helper process) that is interrupted must not remove the parent's
 * pending file. */
static void test_fork(void)
{
    char path[512], tmp[600];
    dm_err err;
    snprintf(path, sizeof path, "%s/parent.json", dir);
    tmp_name(tmp, sizeof tmp, path, getpid());
    struct sigaction old;
    sigaction(SIGTERM, NULL, &old);
    dm_out *o = dm_out_open(path, &err);
    if (!o) {
        ok(0, "open %s: %s", path, err.msg);
        return;
    }
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
    test_interrupts();
    test_fork();
    ok(count_files() == 0, "nothing left in the test folder");
    rmdir(dir);
    return tap_done();
}
