/* outfile.c: atomic output files (see outfile.h). */
#include "outfile.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

struct dm_out {
    FILE *f;
    char *path, *tmp;
    int is_stdout;
};

dm_out *dm_out_open(const char *path, dm_err *err)
{
    dm_out *o = dm_calloc(1, sizeof *o, err);
    if (!o) return NULL;
    if (strcmp(path, "-") == 0) {
        o->f = stdout;
        o->is_stdout = 1;
        return o;
    }
    size_t n = strlen(path) + 32;
    o->path = dm_strdup(path, err);
    o->tmp = dm_malloc(n, err);
    if (!o->path || !o->tmp) goto fail;
    snprintf(o->tmp, n, "%s.tmp.%ld", path, (long)getpid());
    o->f = fopen(o->tmp, "w");
    if (!o->f) {
        dm_err_set(err, "%s: cannot create: %s", o->tmp, strerror(errno));
        goto fail;
    }
    return o;
fail:
    free(o->path);
    free(o->tmp);
    free(o);
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
    if (fflush(o->f) != 0) bad = 1;
    if (fsync(fileno(o->f)) != 0 && errno != EINVAL) bad = 1;
    int saved = errno;
    if (fclose(o->f) != 0) bad = 1;
    if (bad) {
        rc = dm_err_set(err, "%s: write error: %s", o->path, strerror(saved ? saved : EIO));
        unlink(o->tmp);
    } else if (rename(o->tmp, o->path) != 0) {
        rc = dm_err_set(err, "%s: cannot rename into place: %s", o->path, strerror(errno));
        unlink(o->tmp);
    }
    free(o->path);
    free(o->tmp);
    free(o);
    return rc;
}

void dm_out_abort(dm_out *o)
{
    if (!o) return;
    if (!o->is_stdout) {
        fclose(o->f);
        unlink(o->tmp);
    }
    free(o->path);
    free(o->tmp);
    free(o);
}
