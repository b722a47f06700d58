/* fuzz_util.h: helpers shared by the libFuzzer harnesses in fuzz/ (scratch files for parsers
 * that take a path, NUL-terminated copies, and a check that aborts so libFuzzer records the
 * input when a harness-level invariant breaks). */
#ifndef DM_FUZZ_UTIL_H
#define DM_FUZZ_UTIL_H
#include <stddef.h>
#include <stdint.h>

/* A per-process scratch path ending in `tag` (under $TMPDIR, else /dev/shm or /tmp); the
 * string is static and stays valid. The file is removed at exit. */
const char *fuzz_tmp_path(const char *tag);
/* Write the bytes to path (aborts on an I/O error: the harness, not the parser, is broken). */
void fuzz_write_file(const char *path, const uint8_t *d, size_t n);
/* A malloc'd NUL-terminated copy (owned by the caller). */
char *fuzz_cstr(const uint8_t *d, size_t n);
/* 1 when the two files hold the same bytes. */
int fuzz_files_equal(const char *a, const char *b);

void fuzz_fail(const char *file, int line, const char *what) __attribute__((noreturn));
#define FUZZ_CHECK(c) do { if (!(c)) fuzz_fail(__FILE__, __LINE__, #c); } while (0)

#endif
