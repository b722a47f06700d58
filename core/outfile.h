/* outfile.h: output files written atomically. Open creates a temporary file beside PATH, named
 * "PATH.tmp.PID.XXXXXXXX" (eight random characters), with O_CREAT|O_EXCL|O_NOFOLLOW: a file or
 * symlink planted at any name is never followed, written or removed (a taken name is skipped).
 * Commit flushes, fsyncs, renames the temporary over PATH and fsyncs PATH's folder; abort
 * removes the temporary. So a crash or an error never leaves a half-written file under the
 * final name. "-" means stdout.
 *
 * What PATH may be: absent, a regular file, or a symlink (replaced by the new file; what it
 * pointed to is left alone). A character device or a FIFO (`-o /dev/null`, `-o /dev/stdout`, a
 * named pipe) is written straight into, with no temporary and no rename, so /dev/null stays a
 * device. Anything else (a folder, a block device, a socket) is refused at open:
 * "PATH: not a regular file (a folder); refusing to replace it".
 *
 * Write errors: the stream never reports them to its writer (fprintf succeeds); the first one
 * is kept, later output is dropped, and dm_out_commit fails with "PATH: write error: ERRNO"
 * (ENOSPC on a full disk or /dev/full, EFBIG over a file size limit, EIO), leaving the old PATH
 * in place.
 *
 * Interrupts: while a temporary file is pending, SIGINT, SIGTERM and SIGHUP remove it before the
 * process dies of the signal (the handler is installed at the first open, and only for signals
 * whose disposition is still the default, so a program's own handlers win). SIGKILL cannot be
 * caught: it leaves PATH.tmp.PID.XXXXXXXX behind, but still nothing under PATH. */
#ifndef DM_OUTFILE_H
#define DM_OUTFILE_H
#include <stdio.h>

#include "dm_error.h"

typedef struct dm_out dm_out;

dm_out *dm_out_open(const char *path, dm_err *err); /* NULL on failure; owned by the caller */
FILE *dm_out_file(dm_out *o);                      /* borrowed; NULL for dm_out_reserve's */
/* Frees o. 0: PATH holds the whole file. -1 with "PATH: ..." in err: a write, sync or rename
 * error (PATH unchanged), or, after the rename, a failed sync of PATH's folder. */
int dm_out_commit(dm_out *o, dm_err *err);
void dm_out_abort(dm_out *o); /* frees o, removes the temporary file; NULL ok */

/* For a file that another program writes (gnuplot's PNGs): creates the empty temporary file as
 * dm_out_open does and hands out its name (dm_out_path), for the other program to write; then
 * dm_out_commit (which checks that the temporary is still a regular file, fsyncs and renames it
 * into place) or dm_out_abort. For a character device or FIFO, dm_out_path is PATH itself and
 * commit does nothing. "-" is refused. Returned o owned by the caller. */
dm_out *dm_out_reserve(const char *path, dm_err *err);
/* The name to write under until commit: the temporary file's (PATH itself for a device or FIFO,
 * "-" for stdout). Borrowed, valid until commit or abort. */
const char *dm_out_path(const dm_out *o);

/* Before long work: would dm_out_open(path) succeed as far as can be told now? 0 for "-", a
 * regular file or its absence in a writable folder, a device or FIFO; -1 with "PATH: ..." for a
 * folder (or another refused kind) at PATH, a missing folder, a folder we may not write. The
 * open itself still checks everything (this creates nothing). */
int dm_out_check(const char *path, dm_err *err);

#endif
