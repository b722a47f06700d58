/* fuzz_ns_coeffs.c: libFuzzer harness for Newton-Schulz coefficient lists
 * (kernels/ns_ref.c: ns_coeffs_from_spec, hence ns_coeffs_parse and "polar-express:S").
 * A rejected list must come with a message; an accepted one holds 1..NS_MAX_ITERS finite
 * triples, and printing them back with %.17g and parsing again gives the same numbers. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz_util.h"
#include "ns_ref.h"

int LLVMFuzzerTestOneInput(const uint8_t *d, size_t n)
{
    if (n > 4096) return 0;
    char *s = fuzz_cstr(d, n);
    ns_coeffs c, r;
    dm_err err = {{0}};
    if (ns_coeffs_from_spec(s, "--ns-coeffs", &c, &err) != 0) {
        FUZZ_CHECK(err.msg[0]);
        free(s);
        return 0;
    }
    FUZZ_CHECK(c.n >= 1 && c.n <= NS_MAX_ITERS);
    char buf[NS_MAX_ITERS * 3 * 32 + 16], *p = buf;
    for (int k = 0; k < c.n; k++) {
        FUZZ_CHECK(isfinite(c.a[k]) && isfinite(c.b[k]) && isfinite(c.c[k]));
        p += sprintf(p, "%s%.17g,%.17g,%.17g", k ? ";" : "", c.a[k], c.b[k], c.c[k]);
    }
    if (ns_coeffs_parse(buf, "round trip", &r, &err) != 0) fprintf(stderr, "%s\n", err.msg);
    FUZZ_CHECK(r.n == c.n);
    for (int k = 0; k < c.n; k++)
        FUZZ_CHECK(r.a[k] == c.a[k] && r.b[k] == c.b[k] && r.c[k] == c.c[k]);
    (void)ns_scalar_map(&c, 0.5);
    free(s);
    return 0;
}
