/* spawn.h: running this program (or mpirun around it) as a child process, for the commands that
 * drive other subcommands: `dmuon regress` (GPU benchmarks) and `dmuon validate` (the executor). */
#ifndef DM_SPAWN_H
#define DM_SPAWN_H
#include <stddef.h>

#include "dm_error.h"

/* The path of the running executable (/proc/self/exe) into buf. */
int dm_self_exe(char *buf, size_t size, dm_err *err);

/* Run argv (argv[0] looked up on PATH unless it has a '/'), stdout and stderr to the file log
 * (created or truncated); waits. 0 when it exited with status 0; otherwise -1 with the status and
 * the log's path in err. */
int dm_spawn(char *const argv[], const char *log, dm_err *err);

/* Split s in place at spaces into out[0..max-1] (a launcher given as one string, e.g.
 * "mpirun --bind-to none"); returns the count. */
int dm_split_words(char *s, char **out, int max);

/* 1 when prog is an executable on PATH. */
int dm_on_path(const char *prog);

#endif
