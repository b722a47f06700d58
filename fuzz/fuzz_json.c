/* fuzz_json.c: libFuzzer harness for the positioned JSON reader (core/json.c).
 * Any input: parse must either succeed or fail with a message naming a position. On success the
 * tree is written back (json_write_string for strings and keys, %.17g for numbers), parsed
 * again, and must be the same tree: a silent misread of strings, escapes or numbers shows up
 * as a difference. The typed getters run on every object. Strings read are valid UTF-8; the
 * input itself, taken as one C string, goes through json_write_string and must read back as a
 * JSON string (control bytes escaped, bytes that are not UTF-8 replaced). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz_util.h"
#include "json.h"

static void write_tree(FILE *f, const jv *v)
{
    switch (v->type) {
    case JV_NULL: fputs("null", f); break;
    case JV_BOOL: fputs(v->b ? "true" : "false", f); break;
    case JV_NUMBER: fprintf(f, "%.17g", v->num); break;
    case JV_STRING: json_write_string(f, v->str); break;
    case JV_ARRAY:
    case JV_OBJECT:
        fputc(v->type == JV_ARRAY ? '[' : '{', f);
        for (int i = 0; i < v->n; i++) {
            if (i) fputc(',', f);
            if (v->type == JV_OBJECT) {
                json_write_string(f, v->keys[i]);
                fputc(':', f);
            }
            write_tree(f, v->items[i]);
        }
        fputc(v->type == JV_ARRAY ? ']' : '}', f);
        break;
    }
}

static int same_tree(const jv *a, const jv *b)
{
    if (a->type != b->type) return 0;
    switch (a->type) {
    case JV_NULL: return 1;
    case JV_BOOL: return a->b == b->b;
    case JV_NUMBER: return a->num == b->num || (a->num == 0 && b->num == 0);
    case JV_STRING: return strcmp(a->str, b->str) == 0;
    default:
        if (a->n != b->n) return 0;
        for (int i = 0; i < a->n; i++) {
            if (a->type == JV_OBJECT && strcmp(a->keys[i], b->keys[i]) != 0) return 0;
            if (!same_tree(a->items[i], b->items[i])) return 0;
        }
        return 1;
    }
}

/* Well-formed UTF-8 (no overlongs, surrogates or code points past U+10FFFF). */
static int valid_utf8(const unsigned char *s)
{
    while (*s) {
        unsigned c = *s, cp;
        int k = c < 0x80 ? 0 : (c & 0xE0) == 0xC0 ? 1 : (c & 0xF0) == 0xE0 ? 2 : (c & 0xF8) == 0xF0 ? 3 : -1;
        if (k < 0) return 0;
        cp = k == 0 ? c : k == 1 ? c & 0x1F : k == 2 ? c & 0x0F : c & 0x07;
        for (int i = 1; i <= k; i++) {
            if ((s[i] & 0xC0) != 0x80) return 0;
            cp = cp << 6 | (s[i] & 0x3F);
        }
        if ((k == 1 && cp < 0x80) || (k == 2 && cp < 0x800) || (k == 3 && cp < 0x10000) || cp > 0x10FFFF ||
            (cp >= 0xD800 && cp <= 0xDFFF))
            return 0;
        s += k + 1;
    }
    return 1;
}

static void use_getters(const jv *v, int depth)
{
    FUZZ_CHECK(v->line >= 1 && v->col >= 1);
    if (v->type == JV_NUMBER) FUZZ_CHECK(isfinite(v->num));
    if (v->type == JV_STRING) FUZZ_CHECK(v->str != NULL && valid_utf8((const unsigned char *)v->str));
    if (v->type == JV_OBJECT) {
        dm_err err = {{0}};
        const char *s;
        int64_t i64;
        double d;
        for (int i = 0; i < v->n; i++) {
            FUZZ_CHECK(jv_get(v, v->keys[i]) != NULL && valid_utf8((const unsigned char *)v->keys[i]));
            err.msg[0] = 0;
            if (jv_req_str(v, v->keys[i], "f", &s, &err)) FUZZ_CHECK(err.msg[0]);
            err.msg[0] = 0;
            if (jv_opt_int(v, v->keys[i], -1000, 1000, "f", &i64, &err)) FUZZ_CHECK(err.msg[0]);
            else if (v->items[i]->type == JV_NUMBER) FUZZ_CHECK(i64 >= -1000 && i64 <= 1000);
            err.msg[0] = 0;
            if (jv_opt_num(v, v->keys[i], -1e9, 1e9, "f", &d, &err)) FUZZ_CHECK(err.msg[0]);
        }
        err.msg[0] = 0;
        FUZZ_CHECK(jv_req_int(v, "\x01missing", 0, 1, "f", &i64, &err) == -1 && err.msg[0]);
    }
    if (depth < 64 && (v->type == JV_ARRAY || v->type == JV_OBJECT))
        for (int i = 0; i < v->n; i++) use_getters(v->items[i], depth + 1);
}

/* Any bytes through the string writer: always a JSON string. */
static void check_writer(const uint8_t *d, size_t n)
{
    char *s = malloc(n + 1), *buf = NULL;
    size_t len = 0;
    FUZZ_CHECK(s != NULL);
    memcpy(s, d, n);
    s[n] = 0;
    FILE *f = open_memstream(&buf, &len);
    FUZZ_CHECK(f != NULL);
    json_write_string(f, s);
    FUZZ_CHECK(fclose(f) == 0);
    dm_err err = {{0}};
    jv *v = jv_parse(buf, len, "written.json", &err);
    if (!v) fprintf(stderr, "json_write_string output refused: %s\n", err.msg);
    FUZZ_CHECK(v != NULL && v->type == JV_STRING);
    if (valid_utf8((const unsigned char *)s)) FUZZ_CHECK(strcmp(v->str, s) == 0); /* UTF-8 is kept as is */
    jv_free(v);
    free(buf);
    free(s);
}

int LLVMFuzzerTestOneInput(const uint8_t *d, size_t n)
{
    dm_err err = {{0}};
    check_writer(d, n);
    jv *v = jv_parse((const char *)d, n, "fuzz.json", &err);
    if (!v) {
        FUZZ_CHECK(strncmp(err.msg, "fuzz.json:", 10) == 0);
        return 0;
    }
    use_getters(v, 0);
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    FUZZ_CHECK(f != NULL);
    write_tree(f, v);
    FUZZ_CHECK(fclose(f) == 0);
    jv *w = jv_parse(buf, len, "roundtrip.json", &err);
    if (!w) fprintf(stderr, "re-parse failed: %s\n", err.msg);
    FUZZ_CHECK(w != NULL);
    FUZZ_CHECK(same_tree(v, w));
    jv_free(w);
    jv_free(v);
    free(buf);
    return 0;
}
