/* lines.c: the bounded, positioned line reader (lines.h). */
#include "lines.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

struct dm_lines {
    FILE *f;
    char *path;
    size_t max_line;
    int64_t max_bytes, total;
    char *line;              /* the line being assembled; cap bytes */
    size_t cap;
    int number, eof;
    size_t io_n, io_pos;     /* unread bytes are io[io_pos .. io_n) */
    char io[64 * 1024];
};

dm_lines *dm_lines_open(const char *path, size_t max_line, int64_t max_bytes, dm_err *err)
{
    FILE *f = fopen(path, "r");
    if (!f) {
        dm_err_set(err, "%s: %s", path, strerror(errno));
        return NULL;
    }
    dm_lines *r = dm_calloc(1, sizeof *r, err);
    if (!r || !(r->path = dm_strdup(path, err))) {
        free(r);
        fclose(f);
        return NULL;
    }
    r->f = f;
    r->max_line = max_line ? max_line : DM_LINE_MAX;
    r->max_bytes = max_bytes > 0 ? max_bytes : DM_FILE_MAX;
    return r;
}

void dm_lines_close(dm_lines *r)
{
    if (!r) return;
    fclose(r->f);
    free(r->path);
    free(r->line);
    free(r);
}

int dm_lines_number(const dm_lines *r) { return r->number; }

/* Refill io; 0 at the end of the file. */
static int refill(dm_lines *r, dm_err *err)
{
    r->io_pos = 0;
    r->io_n = fread(r->io, 1, sizeof r->io, r->f);
    if (r->io_n == 0) {
        if (ferror(r->f)) return dm_err_set(err, "%s: read error: %s", r->path, strerror(errno));
        r->eof = 1;
        return 0;
    }
    r->total += (int64_t)r->io_n;
    if (r->total > r->max_bytes)
        return dm_err_set(err, "%s: expected a file of at most %lld bytes", r->path, (long long)r->max_bytes);
    return 1;
}

int dm_lines_next(dm_lines *r, char **line, size_t *len, dm_err *err)
{
    size_t n = 0;
    int got_newline = 0, got_any = 0;
    while (!got_newline) {
        if (r->io_pos == r->io_n) {
            if (r->eof) break;
            int k = refill(r, err);
            if (k < 0) return -1;
            if (k == 0) break;
        }
        const char *s = r->io + r->io_pos;
        size_t avail = r->io_n - r->io_pos;
        const char *nl = memchr(s, '\n', avail);
        size_t take = nl ? (size_t)(nl - s) : avail;
        const char *nul = memchr(s, 0, take);
        got_any = 1;
        if (nul)
            return dm_err_set(err, "%s:%d:%zu: expected text, found a NUL byte", r->path, r->number + 1,
                              n + (size_t)(nul - s) + 1);
        if (n + take > r->max_line + 1) /* + 1: room for the '\r' of a "\r\n" ending */
            return dm_err_set(err, "%s:%d:%zu: expected a line of at most %zu bytes", r->path, r->number + 1,
                              r->max_line + 1, r->max_line);
        if (n + take + 1 > r->cap) {
            size_t cap = r->cap ? r->cap : 256;
            while (cap < n + take + 1) cap *= 2;
            char *grown = dm_realloc(r->line, cap, err);
            if (!grown) return -1;
            r->line = grown;
            r->cap = cap;
        }
        memcpy(r->line + n, s, take);
        n += take;
        r->io_pos += take + (nl ? 1 : 0);
        got_newline = nl != NULL;
    }
    if (!got_any) return 0;
    if (n && r->line[n - 1] == '\r') n--;
    if (n > r->max_line)
        return dm_err_set(err, "%s:%d:%zu: expected a line of at most %zu bytes", r->path, r->number + 1,
                          r->max_line + 1, r->max_line);
    if (!r->line) { /* an empty last line before the first allocation */
        if (!(r->line = dm_malloc(1, err))) return -1;
        r->cap = 1;
    }
    r->line[n] = 0;
    r->number++;
    *line = r->line;
    if (len) *len = n;
    return 1;
}
