/* datadir.c: the one lookup order of the data folders (datadir.h). */
#define _XOPEN_SOURCE 700
#include "datadir.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#ifndef DM_BUILDDIR
#define DM_BUILDDIR DM_SRCDIR
#endif
#ifndef DM_BINDIR
#define DM_BINDIR "/usr/local/bin"
#endif
#ifndef DM_PKGLIBDIR
#define DM_PKGLIBDIR "/usr/local/lib/dmuon"
#endif

static const struct {
    const char *env, *installed, *source;
} kinds[DM_DATA__COUNT] = {
    [DM_DATA_MODELS] = {"DMUON_MODELS", "models", "models"},
    [DM_DATA_COSTS] = {"DMUON_COSTS", "costs", "traces/costs"},
    [DM_DATA_CALIB] = {NULL, "calib", "traces/calib"},
    [DM_DATA_BASELINES] = {NULL, "baselines", "traces/baselines"},
    [DM_DATA_PLOTS] = {"DMUON_PLOTS", "plots", "plots"},
    [DM_DATA_KERNELS] = {NULL, "kernels", "traces/kernels"},
};

static int is_dir(const char *p)
{
    struct stat st;
    return p && stat(p, &st) == 0 && S_ISDIR(st.st_mode);
}

/* The executable's folder (through /proc/self/exe, symbolic links resolved); "" when unknown. */
static const char *exe_dir(void)
{
    static char dir[PATH_MAX];
    static int done;
    if (!done) {
        char buf[PATH_MAX];
        done = 1;
        if (realpath("/proc/self/exe", buf)) {
            char *slash = strrchr(buf, '/');
            if (slash && slash != buf) {
                *slash = 0;
                snprintf(dir, sizeof dir, "%s", buf);
            }
        }
    }
    return dir;
}

int dm_data_in_build_tree(void)
{
    static int cached = -1;
    if (cached < 0) {
        char b[PATH_MAX], sub[PATH_MAX + 8];
        const char *e = exe_dir();
        cached = 0;
        if (*e && realpath(DM_BUILDDIR, b)) {
            static const char *const dirs[] = {"", "/tests", "/fuzz"};
            for (int i = 0; i < 3 && !cached; i++) {
                snprintf(sub, sizeof sub, "%s%s", b, dirs[i]);
                cached = strcmp(sub, e) == 0;
            }
        }
    }
    return cached;
}

/* The path from bindir to an installation folder ("../share/dmuon" for pkgdatadir in the
 * default layout): the components after their common leading ones, bindir's replaced by "..". */
static void bindir_to(const char *to, char *buf, size_t size)
{
    const char *a = DM_BINDIR, *b = to;
    for (;;) { /* skip equal leading components */
        while (*a == '/') a++;
        while (*b == '/') b++;
        size_t la = strcspn(a, "/"), lb = strcspn(b, "/");
        if (!la || la != lb || strncmp(a, b, la)) break;
        a += la;
        b += lb;
    }
    size_t n = 0;
    buf[0] = 0;
    while (*a) {
        while (*a == '/') a++;
        size_t la = strcspn(a, "/");
        if (la && !(la == 1 && *a == '.') && n + 4 < size) n += (size_t)snprintf(buf + n, size - n, "../");
        a += la;
    }
    snprintf(buf + n, size - n, "%s", b);
}

/* The folders after the environment variable's, computed once per kind. */
static struct {
    int n;
    char dir[DM_DATA_MAX_DIRS - 1][PATH_MAX];
} fixed[DM_DATA__COUNT];
static int fixed_done[DM_DATA__COUNT];

static void add_fixed(dm_data_kind k, const char *dir, const char *sub)
{
    char path[PATH_MAX];
    if (fixed[k].n == DM_DATA_MAX_DIRS - 1 ||
        snprintf(path, sizeof path, "%s%s%s", dir, *sub ? "/" : "", sub) >= (int)sizeof path)
        return;
    for (int i = 0; i < fixed[k].n; i++)
        if (!strcmp(fixed[k].dir[i], path)) return;
    snprintf(fixed[k].dir[fixed[k].n++], PATH_MAX, "%s", path);
}

static void list_fixed(dm_data_kind k)
{
    int build = dm_data_in_build_tree();
    const char *sub = kinds[k].installed;
    if (build) add_fixed(k, DM_SRCDIR, kinds[k].source);
    if (*exe_dir()) { /* beside the executable, when that is not the configured folder */
        char rel[PATH_MAX], beside[PATH_MAX * 2 + 64], canon[PATH_MAX], cfg[PATH_MAX + 64], cfg_canon[PATH_MAX];
        bindir_to(DM_PKGDATADIR, rel, sizeof rel);
        snprintf(beside, sizeof beside, "%s/%s/%s", exe_dir(), rel, sub);
        snprintf(cfg, sizeof cfg, "%s/%s", DM_PKGDATADIR, sub);
        if (realpath(beside, canon) && !(realpath(cfg, cfg_canon) && !strcmp(canon, cfg_canon)))
            add_fixed(k, canon, "");
    }
    add_fixed(k, DM_PKGDATADIR, sub);
    if (!build) add_fixed(k, DM_SRCDIR, kinds[k].source);
    fixed_done[k] = 1;
}

int dm_data_dirs(dm_data_kind kind, const char **dirs)
{
    if ((unsigned)kind >= DM_DATA__COUNT) return 0;
    if (!fixed_done[kind]) list_fixed(kind);
    int n = 0;
    const char *env = kinds[kind].env ? getenv(kinds[kind].env) : NULL; /* read on every call */
    if (env && *env && is_dir(env)) dirs[n++] = env;
    for (int i = 0; i < fixed[kind].n; i++) dirs[n++] = fixed[kind].dir[i];
    return n;
}

const char *dm_data_dir(dm_data_kind kind)
{
    const char *dirs[DM_DATA_MAX_DIRS];
    int n = dm_data_dirs(kind, dirs);
    for (int i = 0; i < n; i++)
        if (is_dir(dirs[i])) return dirs[i];
    return NULL;
}

const char *dm_data_file(dm_data_kind kind, const char *name, char *buf, size_t size)
{
    const char *dirs[DM_DATA_MAX_DIRS];
    int n = dm_data_dirs(kind, dirs);
    for (int i = 0; i < n; i++) {
        struct stat st;
        if (snprintf(buf, size, "%s/%s", dirs[i], name) >= (int)size) continue;
        if (stat(buf, &st) == 0 && S_ISREG(st.st_mode) && access(buf, R_OK) == 0) return buf;
    }
    return NULL;
}

const char *dm_data_env(dm_data_kind kind) { return (unsigned)kind < DM_DATA__COUNT ? kinds[kind].env : NULL; }
const char *dm_data_installed_name(dm_data_kind kind)
{
    return (unsigned)kind < DM_DATA__COUNT ? kinds[kind].installed : NULL;
}
const char *dm_data_source_name(dm_data_kind kind) { return (unsigned)kind < DM_DATA__COUNT ? kinds[kind].source : NULL; }

int dm_gpu_plugin_paths(char paths[][PATH_MAX], int max)
{
    int n = 0;
    const char *env = getenv("DMUON_GPU");
    if (env && *env) {
        if (max > 0) snprintf(paths[n++], PATH_MAX, "%s", env);
        return n;
    }
    char rel[PATH_MAX], cand[4][PATH_MAX * 2 + 64];
    int nc = 0;
    if (dm_data_in_build_tree()) snprintf(cand[nc++], sizeof cand[0], "%s/%s", DM_BUILDDIR, DM_GPU_PLUGIN_NAME);
    if (*exe_dir()) {
        snprintf(cand[nc++], sizeof cand[0], "%s/%s", exe_dir(), DM_GPU_PLUGIN_NAME);
        bindir_to(DM_PKGLIBDIR, rel, sizeof rel);
        snprintf(cand[nc++], sizeof cand[0], "%s/%s/%s", exe_dir(), rel, DM_GPU_PLUGIN_NAME);
    }
    snprintf(cand[nc++], sizeof cand[0], "%s/%s", DM_PKGLIBDIR, DM_GPU_PLUGIN_NAME);
    for (int i = 0; i < nc && n < max; i++) {
        char canon[PATH_MAX];
        const char *p = realpath(cand[i], canon) ? canon : cand[i];
        int dup = 0;
        for (int j = 0; j < n && !dup; j++) dup = !strcmp(paths[j], p);
        if (!dup && strlen(p) < PATH_MAX) snprintf(paths[n++], PATH_MAX, "%s", p);
    }
    return n;
}
