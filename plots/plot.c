/* plot.c: quoting for gnuplot, and running it with atomically renamed PNGs (plot.h). */
#define _XOPEN_SOURCE 700
#include "plot.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "paths.h"
#include "spawn.h"

char *plot_quote(const char *s, char *buf, size_t size)
{
    size_t k = 0;
    for (; *s && k + 3 < size; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '\'') buf[k++] = '\'';
        buf[k++] = c < 0x20 || c == 0x7f ? ' ' : (char)c;
    }
    buf[k] = 0;
    return buf;
}

int plot_available(void) { return dm_on_path("gnuplot"); }

int plot_run(const char *script, const char *expr, const char *dir, const char *const *pngs, int n, const char *log,
             dm_err *err)
{
    char tmp[4200], qtmp[8500], e[16384], from[4400], to[4400];
    if (snprintf(tmp, sizeof tmp, "%s/.plot.XXXXXX", dir) >= (int)sizeof tmp) return dm_err_set(err, "%s: path too long", dir);
    if (!mkdtemp(tmp)) return dm_err_set(err, "%s: cannot create a temporary folder: %s", tmp, strerror(errno));
    if (snprintf(e, sizeof e, "outdir='%s'%s%s", plot_quote(tmp, qtmp, sizeof qtmp), expr ? "; " : "", expr ? expr : "") >=
        (int)sizeof e) {
        dm_remove_tree(tmp, NULL);
        return dm_err_set(err, "gnuplot expression too long");
    }
    char *const argv[] = {"gnuplot", "-e", e, (char *)script, NULL};
    int rc = dm_spawn(argv, log, err);
    for (int i = 0; i < n && rc == 0; i++) {
        snprintf(from, sizeof from, "%s/%s", tmp, pngs[i]);
        snprintf(to, sizeof to, "%s/%s", dir, pngs[i]);
        if (access(from, F_OK) == 0 && rename(from, to) != 0)
            rc = dm_err_set(err, "%s -> %s: %s", from, to, strerror(errno));
    }
    dm_err ignored;
    dm_remove_tree(tmp, &ignored);
    return rc;
}
