/* spawn.c: child processes by fork and execvp, PATH lookup (spawn.h). */
#define _POSIX_C_SOURCE 200809L
#include "spawn.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

int dm_self_exe(char *buf, size_t size, dm_err *err)
{
    ssize_t n = readlink("/proc/self/exe", buf, size - 1);
    if (n <= 0 || (size_t)n >= size - 1) return dm_err_set(err, "cannot find this program's path (/proc/self/exe)");
    buf[n] = 0;
    return 0;
}

int dm_spawn(char *const argv[], const char *log, dm_err *err)
{
    int fd = log ? open(log, O_WRONLY | O_CREAT | O_TRUNC, 0666) : -1;
    if (log && fd < 0) return dm_err_set(err, "%s: %s", log, strerror(errno));
    fflush(stdout);
    fflush(stderr);
    pid_t pid = fork();
    if (pid < 0) {
        if (fd >= 0) close(fd);
        return dm_err_set(err, "fork: %s", strerror(errno));
    }
    if (pid == 0) {
        if (fd >= 0) {
            dup2(fd, 1);
            dup2(fd, 2);
            close(fd);
        }
        execvp(argv[0], argv);
        fprintf(stderr, "exec %s: %s\n", argv[0], strerror(errno));
        _exit(127);
    }
    if (fd >= 0) close(fd);
    int st;
    while (waitpid(pid, &st, 0) < 0)
        if (errno != EINTR) return dm_err_set(err, "waitpid: %s", strerror(errno));
    if (WIFEXITED(st) && WEXITSTATUS(st) == 0) return 0;
    char where[4200] = "";
    if (log) snprintf(where, sizeof where, "; its output is in %s", log);
    if (WIFSIGNALED(st))
        return dm_err_set(err, "%s %s died of signal %d%s", argv[0], argv[1] ? argv[1] : "", WTERMSIG(st), where);
    return dm_err_set(err, "%s %s exited with status %d%s", argv[0], argv[1] ? argv[1] : "", WEXITSTATUS(st), where);
}

int dm_on_path(const char *prog)
{
    const char *p = getenv("PATH");
    char buf[4096];
    while (p && *p) {
        size_t n = strcspn(p, ":");
        snprintf(buf, sizeof buf, "%.*s/%s", (int)n, p, prog);
        if (access(buf, X_OK) == 0) return 1;
        p += n + (p[n] == ':');
    }
    return 0;
}

int dm_split_words(char *s, char **out, int max)
{
    int n = 0;
    for (char *save = NULL, *t = strtok_r(s, " \t", &save); t && n < max; t = strtok_r(NULL, " \t", &save)) out[n++] = t;
    return n;
}
