/* outfile.h: output files written atomically. Open writes to "PATH.tmp.PID"; commit checks for
 * write errors, flushes, and renames over PATH; abort removes the temporary file. So a crash or
 * an error never leaves a half-written file under the final name. "-" means stdout.
 *
 * Interrupts: while a temporary file is pending, SIGINT, SIGTERM and SIGHUP remove it before the
 * process dies of the signal (the handler is installed at the first open, and only for signals
 * whose disposition is still the default, so a program's own handlers win). SIGKILL cannot be
 * caught: it leaves PATH.tmp.PID behind, but still nothing under PATH. */
#ifndef DM_OUTFILE_H
#define DM_OUTFILE_H
#include <stdio.h>

#include "dm_error.h"

typedef struct dm_out dm_out;

dm_out *dm_out_open(const char *path, dm_err *err); /* NULL on failure */
FILE *dm_out_file(dm_out *o);                      /* borrowed */
int dm_out_commit(dm_out *o, dm_err *err);         /* frees o; -1 (and no file) on write error */
void dm_out_abort(dm_out *o);                      /* frees o, removes the temp file; NULL ok */

#endif
