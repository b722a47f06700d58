/* opts.c: range-checked number parsing and the usage errors of option parsing for the command
 * line (see opts.h). */
#include "opts.h"

#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h> /* optind */

#include "csvjson.h"

static int g_quiet; /* opt_set_quiet: a rank other than 0 of an MPI command */

void opt_set_quiet(int quiet) { g_quiet = quiet; }

void opt_usage_error(const char *cmd, const char *fmt, ...)
{
    va_list ap;
    if (g_quiet) return;
    fprintf(stderr, "dmuon%s%s: ", cmd && *cmd ? " " : "", cmd ? cmd : "");
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fprintf(stderr, " (try 'dmuon%s%s --help')\n", cmd && *cmd ? " " : "", cmd ? cmd : "");
}

int opt_getopt_error(const char *cmd, int c, char **argv)
{
    if (c == ':') opt_usage_error(cmd, "option '%s' needs an argument", argv[optind - 1]);
    else opt_usage_error(cmd, "unknown option '%s'", argv[optind - 1]);
    return 2;
}

int opt_wants_help(int argc, char **argv)
{
    for (int i = 1; i < argc && strcmp(argv[i], "--"); i++)
        if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) return 1;
    return 0;
}

int opt_no_operands(const char *cmd, int argc, char **argv)
{
    if (optind >= argc) return 0;
    opt_usage_error(cmd, "unexpected argument '%s'", argv[optind]);
    return 2;
}

int opt_parse_long(const char *cmd, const char *opt, const char *s, long lo, long hi, long *out)
{
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno || end == s || *end) {
        opt_usage_error(cmd, "%s: expected an integer, found '%s'", opt, s);
        return -1;
    }
    if (v < lo || v > hi) {
        opt_usage_error(cmd, "%s: expected a value in [%ld, %ld], found %ld", opt, lo, hi, v);
        return -1;
    }
    *out = v;
    return 0;
}

int opt_parse_double(const char *cmd, const char *opt, const char *s, double lo, double hi, double *out)
{
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (errno || end == s || *end || !isfinite(v)) {
        opt_usage_error(cmd, "%s: expected a number, found '%s'", opt, s);
        return -1;
    }
    if (v < lo || v > hi) {
        opt_usage_error(cmd, "%s: expected a value in [%g, %g], found %g", opt, lo, hi, v);
        return -1;
    }
    *out = v;
    return 0;
}

int opt_parse_size(const char *cmd, const char *opt, const char *s, int64_t lo, int64_t hi, int64_t *out)
{
    char *end;
    errno = 0;
    long long v = strtoll(s, &end, 10);
    int64_t mul = 1;
    if (!errno && end != s) {
        switch (*end) {
        case 'k': case 'K': mul = (int64_t)1 << 10; end++; break;
        case 'm': case 'M': mul = (int64_t)1 << 20; end++; break;
        case 'g': case 'G': mul = (int64_t)1 << 30; end++; break;
        case 't': case 'T': mul = (int64_t)1 << 40; end++; break;
        default: break;
        }
        if (*end == 'i' && mul > 1) end++;
        if ((*end == 'B' || *end == 'b') && end[1] == 0) end++;
    }
    if (errno || end == s || *end || v < 0 || (v > 0 && mul > INT64_MAX / v)) {
        opt_usage_error(cmd, "%s: expected a size like 4096, 64K, 64M or 1G, found '%s'", opt, s);
        return -1;
    }
    int64_t x = (int64_t)v * mul;
    if (x < lo || x > hi) {
        opt_usage_error(cmd, "%s: expected a size in [%lld, %lld], found %s", opt, (long long)lo,
                        (long long)hi, s);
        return -1;
    }
    *out = x;
    return 0;
}

int opt_parse_int_list(const char *cmd, const char *opt, const char *s, long lo, long hi,
                       long *out, int max, int *n)
{
    int k = 0;
    const char *p = s;
    char buf[64];
    while (*p) {
        const char *c = strchr(p, ',');
        size_t len = c ? (size_t)(c - p) : strlen(p);
        if (len == 0 || len >= sizeof buf) {
            opt_usage_error(cmd, "%s: expected a comma-separated list of integers, found '%s'", opt, s);
            return -1;
        }
        if (k >= max) {
            opt_usage_error(cmd, "%s: expected at most %d values", opt, max);
            return -1;
        }
        memcpy(buf, p, len);
        buf[len] = 0;
        if (opt_parse_long(cmd, opt, buf, lo, hi, &out[k])) return -1;
        k++;
        p = c ? c + 1 : p + len;
        if (c && !*p) {
            opt_usage_error(cmd, "%s: expected a value after the last ','", opt);
            return -1;
        }
    }
    if (k == 0) {
        opt_usage_error(cmd, "%s: expected at least one value", opt);
        return -1;
    }
    *n = k;
    return 0;
}

char **opt_expand_shorts(int argc, char **argv, const opt_short *shorts, int n)
{
    /* out[0..argc-1] the arguments, out[argc] NULL, then the new strings (NULL-terminated): they
     * are freed from there, wherever getopt may have moved them among the arguments */
    char **out = calloc(2 * (size_t)argc + 2, sizeof *out);
    if (!out) return NULL;
    int done = 0, n_new = 0;
    for (int i = 0; i < argc; i++) {
        const char *a = argv[i];
        out[i] = argv[i];
        if (done || i == 0 || a[0] != '-' || !a[1] || a[1] == '-') {
            done = done || (i > 0 && !strcmp(a, "--"));
            continue;
        }
        for (int k = 0; k < n; k++) {
            if (a[1] != shorts[k].letter) continue;
            size_t len = strlen(shorts[k].name) + strlen(a) + 4;
            char *s = malloc(len);
            if (!s) {
                opt_shorts_free(out, argc);
                return NULL;
            }
            if (a[2]) snprintf(s, len, "--%s=%s", shorts[k].name, a + 2);
            else snprintf(s, len, "--%s", shorts[k].name);
            out[i] = out[argc + 1 + n_new++] = s;
            break;
        }
    }
    return out;
}

void opt_shorts_free(char **expanded, int argc)
{
    if (!expanded) return;
    for (char **s = expanded + argc + 1; *s; s++) free(*s);
    free(expanded);
}

int opt_json_begin(opt_json *j, const char *cmd, const char **csv)
{
    j->saved_stdout = -1;
    j->tmp[0] = 0;
    if (!*csv) {
        snprintf(j->tmp, sizeof j->tmp, "/tmp/dmuon-bench-%d-XXXXXX.csv", (int)getpid());
        int fd = mkstemps(j->tmp, 4);
        if (fd < 0) {
            fprintf(stderr, "dmuon %s: --json: cannot make a temporary file: %s\n", cmd, strerror(errno));
            j->tmp[0] = 0;
            return -1;
        }
        close(fd);
        *csv = j->tmp;
    }
    fflush(stdout);
    j->saved_stdout = dup(1);
    if (j->saved_stdout < 0 || dup2(2, 1) < 0) {
        fprintf(stderr, "dmuon %s: --json: cannot set stdout aside: %s\n", cmd, strerror(errno));
        return -1;
    }
    return 0;
}

int opt_json_end(opt_json *j, const char *cmd, const char *benchmark, const char *csv, int ok)
{
    int rc = 0;
    fflush(stdout);
    if (j->saved_stdout >= 0) {
        dup2(j->saved_stdout, 1);
        close(j->saved_stdout);
        j->saved_stdout = -1;
    }
    if (ok && csv) {
        dm_err err;
        if (dm_csv_json(csv, benchmark, stdout, &err) < 0) {
            fprintf(stderr, "dmuon %s: --json: %s\n", cmd, err.msg);
            rc = -1;
        }
        fflush(stdout);
    }
    if (j->tmp[0]) unlink(j->tmp);
    return rc;
}
