/* lines.h: the one line reader of the text formats (cluster and calibration files, cost tables,
 * trace CSVs, stored result tables, baselines): each line with its number, a cap on a line's
 * length (an overlong line is an error naming FILE:LINE:COL, never split and read as two) and on
 * the file's size (/dev/zero or an endless pipe ends with an error instead of a hang), and NUL
 * bytes refused (a C string would silently end there). */
#ifndef DM_LINES_H
#define DM_LINES_H
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "dm_error.h"

typedef struct dm_lines dm_lines; /* opaque */

#define DM_LINE_MAX ((size_t)64 * 1024)   /* default cap on a line, bytes before its newline */
#define DM_FILE_MAX ((int64_t)1 << 30)    /* default cap on a file's size (the JSON reader's) */

/* Open path for reading. max_line and max_bytes 0: the defaults above. Owned by the caller
 * (dm_lines_close); NULL with "PATH: STRERROR" in err when it cannot be opened. */
dm_lines *dm_lines_open(const char *path, size_t max_line, int64_t max_bytes, dm_err *err);

/* The next line, without its "\n" or "\r\n", NUL-terminated, in a buffer the reader owns; valid
 * (and writable in place) until the next call. Returns 1 with *line (and *len, which may be
 * NULL) set, 0 at the end of the file, -1 on an error:
 *   "FILE:LINE:COL: expected a line of at most N bytes"
 *   "FILE:LINE:COL: expected text, found a NUL byte"
 *   "FILE: expected a file of at most N bytes"      and read errors. */
int dm_lines_next(dm_lines *r, char **line, size_t *len, dm_err *err);

/* The number (1-based) of the line last returned; 0 before the first. */
int dm_lines_number(const dm_lines *r);

void dm_lines_close(dm_lines *r); /* accepts NULL */

#endif
