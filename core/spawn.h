/* spawn.h: child processes without a shell in between: this program (or mpirun around it) for
 * the commands that drive other subcommands (`dmuon regress`, `dmuon validate`), and gnuplot for
 * the plots (`dmuon scale`, `dmuon compare --plot`). Arguments go to execvp as they are, so
 * nothing in them (a path, a trace's text) is ever read by a shell. */
#ifndef DM_SPAWN_H
#define DM_SPAWN_H
#include <stddef.h>

#include "dm_error.h"

/* The path of the running executable (/proc/self/exe) into buf. */
int dm_self_exe(char *buf, size_t size, dm_err *err);

/* Run argv (argv[0] looked up on PATH unless it has a '/') and wait for it. log: its stdout and
 * stderr go to that file (created or truncated); NULL: they stay this process's. 0 when it
 * exited with status 0; otherwise -1 with the status (and the log's path) in err. */
int dm_spawn(char *const argv[], const char *log, dm_err *err);

/* Split s in place at spaces into out[0..max-1] (a launcher given as one string, e.g.
 * "mpirun --bind-to none"); returns the count. */
int dm_split_words(char *s, char **out, int max);

/* 1 when prog is an executable on PATH. */
int dm_on_path(const char *prog);

#endif
