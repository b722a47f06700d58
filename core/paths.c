/* paths.c: mkdir -p, paths beside a file, relative paths, removing a folder (paths.h). */
#define _XOPEN_SOURCE 700
#include "paths.h"

#include <errno.h>
#include <ftw.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

int dm_mkdir_p(const char *dir, dm_err *err)
{
    char buf[4096];
    if (snprintf(buf, sizeof buf, "%s", dir) >= (int)sizeof buf) return dm_err_set(err, "%.200s...: path too long", dir);
    for (char *s = buf + 1; *s; s++)
        if (*s == '/') {
            *s = 0;
            if (mkdir(buf, 0777) && errno != EEXIST) return dm_err_set(err, "%s: cannot create: %s", buf, strerror(errno));
            *s = '/';
        }
    if (mkdir(buf, 0777) && errno != EEXIST) return dm_err_set(err, "%s: cannot create: %s", buf, strerror(errno));
    return 0;
}

void dm_path_dir(const char *path, char *buf, size_t size)
{
    const char *slash = strrchr(path, '/');
    if (!slash) snprintf(buf, size, ".");
    else if (slash == path) snprintf(buf, size, "/");
    else snprintf(buf, size, "%.*s", (int)(slash - path), path);
}

int dm_path_beside(const char *file, const char *rel, char *buf, size_t size, dm_err *err)
{
    const char *slash = strrchr(file, '/');
    int n = rel[0] == '/' || !slash ? snprintf(buf, size, "%s", rel)
                                    : snprintf(buf, size, "%.*s/%s", (int)(slash - file), file, rel);
    if (n < 0 || (size_t)n >= size) return dm_err_set(err, "%.200s: path too long", rel);
    return 0;
}

/* Split an absolute path in place into its components; returns their count (at most max). */
static int components(char *p, char **out, int max)
{
    int n = 0;
    for (char *save = NULL, *c = strtok_r(p, "/", &save); c && n < max; c = strtok_r(NULL, "/", &save)) out[n++] = c;
    return n;
}

int dm_path_relative(const char *target, const char *dir, char *buf, size_t size, dm_err *err)
{
    char t[PATH_MAX], d[PATH_MAX], *tc[PATH_MAX / 2], *dc[PATH_MAX / 2];
    if (!realpath(target, t)) return dm_err_set(err, "%s: %s", target, strerror(errno));
    if (!dir) {
        if (snprintf(buf, size, "%s", t) >= (int)size) return dm_err_set(err, "%s: path too long", t);
        return 0;
    }
    if (!realpath(dir, d)) return dm_err_set(err, "%s: %s", dir, strerror(errno));
    int nt = components(t, tc, PATH_MAX / 2), nd = components(d, dc, PATH_MAX / 2), common = 0;
    while (common < nt - 1 && common < nd && !strcmp(tc[common], dc[common])) common++;
    size_t k = 0;
    buf[0] = 0;
    for (int i = common; i < nd; i++) k += (size_t)snprintf(buf + k, k < size ? size - k : 0, "../");
    for (int i = common; i < nt; i++) k += (size_t)snprintf(buf + k, k < size ? size - k : 0, "%s%s", tc[i], i + 1 < nt ? "/" : "");
    if (k >= size) return dm_err_set(err, "%s: relative path too long", target);
    return 0;
}

static int remove_one(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
    (void)st;
    (void)flag;
    (void)ftw;
    return remove(path);
}

int dm_remove_tree(const char *dir, dm_err *err)
{
    if (nftw(dir, remove_one, 16, FTW_DEPTH | FTW_PHYS) != 0)
        return dm_err_set(err, "%s: cannot remove: %s", dir, strerror(errno));
    return 0;
}
