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
/* Under MPI every rank parses the same arguments; ranks other than 0 call opt_set_quiet(1)
 * first, so that a usage error is printed once (by rank 0), then opt_set_quiet(0). While quiet,
 * the functions here print nothing and return as they would otherwise. */
void opt_set_quiet(int quiet);
/* Unknown option / missing argument message in the GNU form, then "Try 'dmuon SUB --help'". */
void opt_usage_error(const char *cmd, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* After getopt_long returned c for the option at argv[optind - 1]: ':' is a missing argument,
 * anything else an unknown option; prints that usage error and returns 2 (the exit status). */
int opt_getopt_error(const char *cmd, int c, char **argv);
/* 1 when an argument before "--" is exactly -h or --help: commands that start MPI check it
 * first and print their help without MPI_Init (its components are never loaded for a help). */
int opt_wants_help(int argc, char **argv);
/* Operands left after the options (optind < argc): the usage error for the first, 2; else 0. */
int opt_no_operands(const char *cmd, int argc, char **argv);

/* A short option that stands for a long one taking an argument: -LETTER VALUE (or -LETTERVALUE)
 * means --NAME VALUE (--NAME=VALUE). The one table of short options that commands parsing only
 * long names accept the same way as `dmuon plan` (cli/dmuon.c applies it before dispatch). */
typedef struct opt_short {
    char letter;
    const char *name;
} opt_short;

/* argv (argc entries) with every argument that is exactly -LETTER, or -LETTER followed by its
 * value, of one of the n shorts rewritten as the long option, up to a "--"; the other arguments
 * unchanged. A value of another option that itself begins with such a -LETTER must then be given
 * as --OPTION=VALUE. Returns a new argv (NULL-terminated, owned by the caller: opt_shorts_free),
 * or NULL when out of memory. */
char **opt_expand_shorts(int argc, char **argv, const opt_short *shorts, int n);
/* Frees what opt_expand_shorts(argc, ...) returned (NULL is fine), also after getopt permuted it. */
void opt_shorts_free(char **expanded, int argc);

/* A benchmark's --json (bench kernels, work, comm: the same mechanism over the table each
 * writes, core/csvjson.h): opt_json_begin points *csv at a temporary file when the command was
 * given none (tmp holds its name) and sends stdout's lines (the human table) to stderr;
 * opt_json_end puts stdout back and, when ok, prints the table as JSON there (the one document on
 * stdout); it removes the temporary. Returns -1 with the reason printed as "dmuon CMD: ...". */
typedef struct opt_json {
    int saved_stdout;
    char tmp[64];
} opt_json;
int opt_json_begin(opt_json *j, const char *cmd, const char **csv);
int opt_json_end(opt_json *j, const char *cmd, const char *benchmark, const char *csv, int ok);

#endif
