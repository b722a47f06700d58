/* test_plumbing.c: the shared plumbing at the bottom of core/ and plots/: the bounded line reader
 * (positions, CRLF, a line over the cap refused with FILE:LINE:COL and never split, NUL bytes,
 * the file-size cap, /dev/zero), paths (mkdir -p, a path beside a file, relative paths, removing
 * a tree), spawning without a shell, and the gnuplot quoting. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "lines.h"
#include "paths.h"
#include "plot.h"
#include "spawn.h"
#include "tap.h"

static char dir[64];

static const char *at(const char *name)
{
    static char buf[4][256];
    static int k;
    k = (k + 1) % 4;
    snprintf(buf[k], sizeof buf[k], "%s/%s", dir, name);
    return buf[k];
}

/* Reads every line of path; returns the status of the last dm_lines_next; *n the lines read. */
static int read_all(const char *path, size_t max_line, long long max_bytes, int *n, char *last, size_t last_size,
                    dm_err *err)
{
    dm_lines *in = dm_lines_open(path, max_line, max_bytes, err);
    if (!in) return -2;
    char *line;
    int k;
    *n = 0;
    while ((k = dm_lines_next(in, &line, NULL, err)) > 0) {
        (*n)++;
        snprintf(last, last_size, "%s", line);
    }
    dm_lines_close(in);
    return k;
}

static void test_lines(void)
{
    dm_err err = {{0}};
    char last[256];
    int n;
    tap_write_file("lines", at("a.txt"), "one\r\ntwo\n\nthree");
    dm_lines *in = dm_lines_open(at("a.txt"), 0, 0, &err);
    char *line;
    size_t len;
    ok(in != NULL, "a text file opens");
    ok(dm_lines_next(in, &line, &len, &err) == 1 && !strcmp(line, "one") && len == 3 && dm_lines_number(in) == 1,
       "line 1 without its \\r\\n");
    ok(dm_lines_next(in, &line, &len, &err) == 1 && !strcmp(line, "two") && dm_lines_number(in) == 2, "line 2");
    ok(dm_lines_next(in, &line, &len, &err) == 1 && !strcmp(line, "") && len == 0, "an empty line 3");
    ok(dm_lines_next(in, &line, &len, &err) == 1 && !strcmp(line, "three") && dm_lines_number(in) == 4,
       "a last line without a newline");
    ok(dm_lines_next(in, &line, &len, &err) == 0, "then the end");
    dm_lines_close(in);

    /* a long line: refused with its line and the first column over the cap, not split in two */
    char big[300];
    memset(big, 'k', sizeof big - 1);
    big[sizeof big - 1] = 0;
    char text[400];
    snprintf(text, sizeof text, "key = 1\n%s\nnext = 2\n", big);
    tap_write_file("lines", at("long.txt"), text);
    int k = read_all(at("long.txt"), 100, 0, &n, last, sizeof last, &err);
    ok(k == -1 && n == 1 && strstr(err.msg, "long.txt:2:101: expected a line of at most 100 bytes"),
       "a 299-byte line under a 100-byte cap: %s", err.msg);
    k = read_all(at("long.txt"), 299, 0, &n, last, sizeof last, &err);
    ok(k == 0 && n == 3 && !strcmp(last, "next = 2"), "the same line under a 299-byte cap reads whole");

    tap_write_file("lines", at("nul.txt"), "ab");
    FILE *f = fopen(at("nul.txt"), "a");
    fputc(0, f);
    fputs("cd\n", f);
    fclose(f);
    k = read_all(at("nul.txt"), 0, 0, &n, last, sizeof last, &err);
    ok(k == -1 && strstr(err.msg, "nul.txt:1:3: expected text, found a NUL byte"), "a NUL byte: %s", err.msg);

    f = fopen(at("many.txt"), "w");
    for (int i = 0; i < 10000; i++) fprintf(f, "line %d\n", i);
    fclose(f);
    k = read_all(at("many.txt"), 0, 1000, &n, last, sizeof last, &err);
    ok(k == -1 && strstr(err.msg, "many.txt: expected a file of at most 1000 bytes"), "the file-size cap: %s", err.msg);
    k = read_all(at("many.txt"), 0, 0, &n, last, sizeof last, &err);
    ok(k == 0 && n == 10000 && !strcmp(last, "line 9999"), "10000 lines across the reader's buffer boundaries");

    clock_t t0 = clock();
    k = read_all("/dev/zero", 0, 0, &n, last, sizeof last, &err);
    ok(k == -1 && strstr(err.msg, "/dev/zero:1:1"), "/dev/zero ends with an error: %s", err.msg);
    ok((double)(clock() - t0) / CLOCKS_PER_SEC < 1, "at once");
    ok(dm_lines_open(at("missing.txt"), 0, 0, &err) == NULL && strstr(err.msg, "missing.txt: No such file"),
       "a missing file: %s", err.msg);
}

static void test_paths(void)
{
    dm_err err;
    char buf[4096];
    ok(dm_mkdir_p(at("x/y/z"), &err) == 0 && access(at("x/y/z"), F_OK) == 0, "mkdir -p makes the parents");
    ok(dm_mkdir_p(at("x/y/z"), &err) == 0, "and accepts an existing folder");
    ok(dm_path_beside("traces/calib/h.calib", "../costs/t.csv", buf, sizeof buf, &err) == 0 &&
           !strcmp(buf, "traces/calib/../costs/t.csv"), "beside a file: %s", buf);
    ok(dm_path_beside("h.calib", "t.csv", buf, sizeof buf, &err) == 0 && !strcmp(buf, "t.csv"), "beside a bare name");
    ok(dm_path_beside("a/h.calib", "/abs/t.csv", buf, sizeof buf, &err) == 0 && !strcmp(buf, "/abs/t.csv"),
       "an absolute path stays");
    tap_write_file("paths", at("x/t.csv"), "t\n");
    ok(dm_path_relative(at("x/t.csv"), at("x/y/z"), buf, sizeof buf, &err) == 0 && !strcmp(buf, "../../t.csv"),
       "relative path up: %s", buf);
    ok(dm_path_relative(at("x/t.csv"), dir, buf, sizeof buf, &err) == 0 && !strcmp(buf, "x/t.csv"),
       "relative path down: %s", buf);
    char back[4096];
    snprintf(back, sizeof back, "%s/file", at("x/y/z"));
    dm_path_relative(at("x/t.csv"), at("x/y/z"), buf, sizeof buf, &err);
    char again[4096];
    dm_path_beside(back, buf, again, sizeof again, &err);
    ok(access(again, R_OK) == 0, "beside(relative(...)) finds the file again: %s", again);
    ok(dm_path_relative(at("x/t.csv"), NULL, buf, sizeof buf, &err) == 0 && buf[0] == '/', "absolute: %s", buf);
    ok(dm_remove_tree(at("x"), &err) == 0 && access(at("x"), F_OK) != 0, "remove a tree");
}

static void test_spawn_and_quote(void)
{
    dm_err err;
    char *const t[] = {"true", NULL};
    ok(dm_spawn(t, NULL, &err) == 0, "spawn true, output inherited");
    char marker[100];
    snprintf(marker, sizeof marker, "%s/pwned", dir);
    char arg[400];
    snprintf(arg, sizeof arg, "x; touch %s; `touch %s`", marker, marker);
    char *const e[] = {"echo", arg, NULL};
    ok(dm_spawn(e, at("echo.log"), &err) == 0 && access(marker, F_OK) != 0, "an argument with ; and ` runs nothing");
    char *const f[] = {"false", NULL};
    ok(dm_spawn(f, at("f.log"), &err) == -1 && strstr(err.msg, "exited with status 1") && strstr(err.msg, "f.log"),
       "a failing child: %s", err.msg);
    ok(dm_on_path("sh") && !dm_on_path("no-such-program-here"), "PATH lookup");
    char q[64];
    ok(!strcmp(plot_quote("it's\nx", q, sizeof q), "it''s x"), "plot_quote doubles quotes, blanks newlines: %s", q);
    ok(strlen(plot_quote("''''''''''''''''''''''''''''''''''''''''", q, 16)) < 16, "and stays inside its buffer");
}

int main(void)
{
    snprintf(dir, sizeof dir, "/tmp/dmuon-test-plumbing-XXXXXX");
    if (!mkdtemp(dir)) return 1;
    test_lines();
    test_paths();
    test_spawn_and_quote();
    dm_err err;
    dm_remove_tree(dir, &err);
    return tap_done();
}
