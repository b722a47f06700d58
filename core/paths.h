/* paths.h: file-system paths the commands share: mkdir -p, a path written inside a file that
 * means "beside this file" (a calibration's `costs =`), the relative path that says so, and
 * removing a scratch folder, all without a shell. */
#ifndef DM_PATHS_H
#define DM_PATHS_H
#include <stddef.h>

#include "dm_error.h"

/* Create dir and its missing parents (0777 before umask); an existing folder is fine. */
int dm_mkdir_p(const char *dir, dm_err *err);

/* rel as seen from the folder of `file`: rel itself when it is absolute (or file has no
 * folder part), else DIR(file)/rel. Into buf; -1 when it does not fit. */
int dm_path_beside(const char *file, const char *rel, char *buf, size_t size, dm_err *err);

/* The path of the existing file `target` relative to the existing folder `dir` (both resolved
 * through realpath, e.g. "../costs/h200.csv"), so that dm_path_beside(a file in dir, it) finds
 * target again from any working folder; dir NULL: target's absolute path. */
int dm_path_relative(const char *target, const char *dir, char *buf, size_t size, dm_err *err);

/* The folder part of path ("." when it has none) into buf. */
void dm_path_dir(const char *path, char *buf, size_t size);

/* Remove dir and everything under it (not following symbolic links). */
int dm_remove_tree(const char *dir, dm_err *err);

#endif
