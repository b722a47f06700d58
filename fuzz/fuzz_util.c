/* fuzz_util.c: helpers shared by the fuzz harnesses (see fuzz_util.h). */
#include "fuzz_util.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define MAX_TMP 8
static char tmp_paths[MAX_TMP][512];
static int n_tmp;

static void remove_tmp(void)
{
    for (int i = 0; i < n_tmp; i++) unlink(tmp_paths[i]);
}

const char *fuzz_tmp_path(const char *tag)
{
    for (int i = 0; i < n_tmp; i++) {
        size_t a = strlen(tmp_paths[i]), b = strlen(tag);
        if (a >= b && strcmp(tmp_paths[i] + a - b, tag) == 0) return tmp_paths[i];
    }
    if (n_tmp == MAX_TMP) fuzz_fail(__FILE__, __LINE__, "too many scratch paths");
    const char *dir = getenv("TMPDIR");
    struct stat st;
    if (!dir || !*dir) dir = stat("/dev/shm", &st) == 0 && S_ISDIR(st.st_mode) ? "/dev/shm" : "/tmp";
    snprintf(tmp_paths[n_tmp], sizeof tmp_paths[n_tmp], "%s/dmuon-fuzz-%ld-%s", dir, (long)getpid(), tag);
    if (n_tmp == 0) atexit(remove_tmp);
    return tmp_paths[n_tmp++];
}

void fuzz_write_file(const char *path, const uint8_t *d, size_t n)
{
    FILE *f = fopen(path, "wb");
    if (!f || (n && fwrite(d, 1, n, f) != n) || fclose(f) != 0)
        fuzz_fail(__FILE__, __LINE__, "cannot write the scratch file");
}

char *fuzz_cstr(const uint8_t *d, size_t n)
{
    char *s = malloc(n + 1);
    if (!s) fuzz_fail(__FILE__, __LINE__, "out of memory");
    if (n) memcpy(s, d, n);
    s[n] = 0;
    return s;
}

static char *slurp(const char *path, size_t *n)
{
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    size_t cap = 4096, len = 0;
    char *b = malloc(cap);
    size_t got;
    while (b && (got = fread(b + len, 1, cap - len, f)) > 0) {
        len += got;
        if (len == cap) b = realloc(b, cap *= 2);
    }
    fclose(f);
    *n = len;
    return b;
}

int fuzz_files_equal(const char *a, const char *b)
{
    size_t na = 0, nb = 0;
    char *x = slurp(a, &na), *y = slurp(b, &nb);
    int eq = x && y && na == nb && memcmp(x, y, na) == 0;
    free(x);
    free(y);
    return eq;
}

void fuzz_fail(const char *file, int line, const char *what)
{
    fprintf(stderr, "%s:%d: fuzz check failed: %s\n", file, line, what);
    abort();
}
