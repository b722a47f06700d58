/* opts.h: command-line parsing shared by the subcommands: strtol/strtod with range
 * checks, sizes with suffixes (64K, 64M, 1G; powers of 1024), comma lists. On a bad value each
 * prints "dmuon SUB: --OPT: expected ..." to stderr and returns -1 (callers exit 2). */
#ifndef DM_OPTS_H
#define DM_OPTS_H
#include <stdint.h>

int opt_parse_long(const char *cmd, const char *opt, const char *s, long lo, long hi, long *out);
int opt_parse_double(const char *cmd, const char *opt, const char *s, double lo, double hi, double *out);
int opt_parse_size(const char *cmd, const char *opt, const char *s, int64_t lo, int64_t hi, int64_t *out);
/* "1,2,4,8" -> values (at most max); each in [lo, hi]. */
int opt_parse_int_list(const char *cmd, const char *opt, const char *s, long lo, long hi,
                       long *out, int max, int *n);
/* Unknown option / missing argument message in the GNU form, then "Try 'dmuon SUB --help'". */
void opt_usage_error(const char *cmd, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* After getopt_long returned c for the option at argv[optind - 1]: ':' is a missing argument,
 * anything else an unknown option; prints that usage error and returns 2 (the exit status). */
int opt_getopt_error(const char *cmd, int c, char **argv);
/* Operands left after the options (optind < argc): the usage error for the first, 2; else 0. */
int opt_no_operands(const char *cmd, int argc, char **argv);

#endif
