/* json.h: a small JSON reader that remembers where each value stood (line, column), so that
 * semantic errors in input files (a negative dimension, a missing field) can name the place.
 * Syntax errors are reported as FILE:LINE:COL: expected ... ; raw bytes in strings must be
 * UTF-8 (others are refused with their position); duplicate keys are refused (hashed, linear
 * time). Writing JSON is done by callers with fprintf (deterministic output), every string
 * through json_write_string. */
#ifndef DM_JSON_H
#define DM_JSON_H
#include <stdint.h>
#include <stdio.h>

#include "dm_error.h"

typedef enum { JV_NULL, JV_BOOL, JV_NUMBER, JV_STRING, JV_ARRAY, JV_OBJECT } jv_type;

typedef struct jv jv;
struct jv {
    jv_type type;
    int line, col;      /* 1-based position of the value's first character */
    int b;              /* JV_BOOL */
    double num;         /* JV_NUMBER */
    int is_int;         /* number written without fraction or exponent */
    char *str;          /* JV_STRING (NUL-terminated, may not contain NUL) */
    int n;              /* JV_ARRAY / JV_OBJECT: number of elements */
    jv **items;         /* elements */
    char **keys;        /* JV_OBJECT: keys, parallel to items */
};

/* Parse a whole document. `name` is used in messages. Returns NULL and fills err on failure.
 * The tree is owned by the caller (jv_free). */
jv *jv_parse(const char *text, size_t len, const char *name, dm_err *err);
jv *jv_parse_file(const char *path, dm_err *err);
void jv_free(jv *v); /* accepts NULL */

jv *jv_get(const jv *obj, const char *key);     /* NULL if absent or obj not an object */
const char *jv_type_name(jv_type t);

/* Typed field access with messages "FILE:LINE:COL: expected ..."; `file` names the document.
 * Required getters fail when absent; optional ones leave *out unchanged when absent. */
int jv_req(const jv *obj, const char *key, jv_type t, const char *file, const jv **out, dm_err *err);
int jv_req_str(const jv *obj, const char *key, const char *file, const char **out, dm_err *err);
int jv_req_int(const jv *obj, const char *key, int64_t lo, int64_t hi, const char *file,
               int64_t *out, dm_err *err);
int jv_opt_int(const jv *obj, const char *key, int64_t lo, int64_t hi, const char *file,
               int64_t *out, dm_err *err);
int jv_opt_str(const jv *obj, const char *key, const char *file, const char **out, dm_err *err);
int jv_req_num(const jv *obj, const char *key, double lo, double hi, const char *file,
               double *out, dm_err *err);
int jv_opt_num(const jv *obj, const char *key, double lo, double hi, const char *file,
               double *out, dm_err *err);
/* Check a value is an integer in [lo, hi]. */
int jv_as_int(const jv *v, int64_t lo, int64_t hi, const char *file, const char *what,
              int64_t *out, dm_err *err);

/* Write s as a JSON string literal: quotes, backslash and control bytes (< 0x20, 0x7f)
 * escaped, well-formed UTF-8 kept, every byte that is not replaced by U+FFFD; so the output
 * is JSON whatever s came from (a CSV header, a command-line flag, a file name). The one
 * string writer for every JSON output. */
void json_write_string(FILE *f, const char *s);

/* Write v as a JSON number with `digits` significant digits (%.*g), or null when it is not
 * finite (no value: a skipped step, an error against a measured 0). The one number writer of
 * the reports' --json; json_write_member writes it as `"key": v` followed by sep. */
void json_write_number(FILE *f, double v, int digits);
void json_write_member(FILE *f, const char *key, double v, int digits, const char *sep);

/* s as well-formed UTF-8 (each byte that is not: U+FFFD) into out, cut at a character boundary
 * to fit `size` bytes with the NUL; returns the length. For a string a reader will keep in a
 * buffer of that size, so what is written is what is read back. */
size_t json_utf8_clean(const char *s, char *out, size_t size);

#endif
