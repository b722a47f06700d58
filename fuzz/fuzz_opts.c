/* fuzz_opts.c: libFuzzer harness for command-line numbers, sizes and lists (cli/opts.c).
 * The first input byte picks the parser and its range, the rest is the argument text. On
 * success the value must lie in the requested range (and a size must be what the text says:
 * digits times the suffix's power of 1024); on failure the parser has printed a message (to a
 * muted stderr here) and left *out alone. */
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz_util.h"
#include "opts.h"

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    FILE *null = fopen("/dev/null", "w"); /* the parsers' messages; libFuzzer kept its own */
    if (null) stderr = null;
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *d, size_t n)
{
    if (n < 1 || n > 1024) return 0;
    unsigned sel = d[0];
    char *s = fuzz_cstr(d + 1, n - 1);
    static const long lranges[4][2] = {{LONG_MIN, LONG_MAX}, {0, 100}, {1, 1 << 20}, {-5, 5}};
    const long lo = lranges[(sel >> 2) & 3][0], hi = lranges[(sel >> 2) & 3][1];
    switch (sel & 3) {
    case 0: {
        long v = 12345;
        if (opt_parse_long("fuzz", "--n", s, lo, hi, &v) == 0) FUZZ_CHECK(v >= lo && v <= hi);
        else FUZZ_CHECK(v == 12345);
        break;
    }
    case 1: {
        double v = 0.5, dlo = (double)lo, dhi = (double)hi;
        if (opt_parse_double("fuzz", "--x", s, dlo, dhi, &v) == 0) FUZZ_CHECK(v >= dlo && v <= dhi);
        else FUZZ_CHECK(v == 0.5);
        break;
    }
    case 2: {
        int64_t v = -7, slo = lo < 0 ? 0 : lo, shi = hi;
        if (opt_parse_size("fuzz", "--size", s, slo, shi, &v) == 0) {
            FUZZ_CHECK(v >= slo && v <= shi);
            /* Independent reading: leading digits, then at most one of kKmMgGtT. */
            char *end;
            unsigned long long digits = strtoull(s, &end, 10);
            int shift = 0;
            switch (*end) {
            case 'k': case 'K': shift = 10; break;
            case 'm': case 'M': shift = 20; break;
            case 'g': case 'G': shift = 30; break;
            case 't': case 'T': shift = 40; break;
            default: break;
            }
            FUZZ_CHECK((uint64_t)v == (uint64_t)digits << shift);
        } else {
            FUZZ_CHECK(v == -7);
        }
        break;
    }
    case 3: {
        long vals[8];
        int k = -1;
        if (opt_parse_int_list("fuzz", "--list", s, lo, hi, vals, 8, &k) == 0) {
            FUZZ_CHECK(k >= 1 && k <= 8);
            int commas = 0;
            for (const char *p = s; *p; p++) commas += *p == ',';
            FUZZ_CHECK(commas == k - 1);
            for (int i = 0; i < k; i++) FUZZ_CHECK(vals[i] >= lo && vals[i] <= hi);
        } else {
            FUZZ_CHECK(k == -1);
        }
        break;
    }
    }
    free(s);
    return 0;
}
