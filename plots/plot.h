/* plot.h: running gnuplot for the commands' plots (`dmuon scale`, `dmuon compare --plot`,
 * `dmuon validate`). Every string that reaches gnuplot goes into a single-quoted literal through
 * plot_quote (in a single-quoted string gnuplot substitutes nothing: no backquoted commands, no
 * macros, no escapes); gnuplot runs by fork/exec with no shell; its PNGs are drawn into a private
 * temporary folder (the script's `outdir`) and renamed into place, so a failed or interrupted run
 * never leaves a 0-byte or partial PNG under the final name. */
#ifndef DM_PLOT_H
#define DM_PLOT_H
#include <stddef.h>

#include "dm_error.h"

/* s as the inside of a single-quoted gnuplot string: a quote doubled, control characters (a
 * newline would end the command) as spaces; cut to fit size. Returns buf. */
char *plot_quote(const char *s, char *buf, size_t size);

/* 1 when gnuplot is on PATH. */
int plot_available(void);

/* gnuplot -e "outdir='TMP'; EXPR" SCRIPT, TMP a new folder inside dir; then each of the n pngs
 * (file names) that TMP holds is renamed to dir/NAME, and TMP removed. expr may be NULL; its
 * strings must come from plot_quote. log: gnuplot's output goes there (NULL: to this process's
 * stdout and stderr). 0 when gnuplot exited with status 0 (a png it did not draw is no error). */
int plot_run(const char *script, const char *expr, const char *dir, const char *const *pngs, int n, const char *log,
             dm_err *err);

#endif
