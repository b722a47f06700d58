/* test_json.c: the positioned JSON reader: values, positions, and syntax errors with
 * FILE:LINE:COL messages; duplicate keys among 200k found in linear time; UTF-8 required of
 * raw string bytes; the one string writer (json_write_string) always writes JSON. */
#include <string.h>
#include <time.h>

#include "json.h"
#include "tap.h"

static jv *parse(const char *s, dm_err *e) { return jv_parse(s, strlen(s), "t.json", e); }

static void bad(const char *text, const char *want)
{
    dm_err e = {{0}};
    jv *v = parse(text, &e);
    ok(v == NULL && strstr(e.msg, want) != NULL, "reject %-24s -> %s", text, e.msg);
    jv_free(v);
}

/* 200k keys: the duplicate check is hashed (it was a linear scan per key: 141 s). */
static void test_many_keys(void)
{
    enum { N = 200000 };
    char *text = malloc((size_t)N * 24 + 64);
    if (!text) return;
    size_t k = 0;
    text[k++] = '{';
    for (int i = 0; i < N; i++) k += (size_t)sprintf(text + k, "%s\n\"key%d\": %d", i ? "," : "", i, i);
    size_t body = k;
    strcpy(text + k, "}");
    struct timespec t0, t1;
    dm_err e;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    jv *v = jv_parse(text, strlen(text), "many.json", &e);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    double s = (double)(t1.tv_sec - t0.tv_sec) + (t1.tv_nsec - t0.tv_nsec) * 1e-9;
    ok(v && v->n == N && jv_get(v, "key199999")->num == 199999, "200000 keys read");
    ok(s < 10, "in %.3f s (under 10 s; a scan per key took 141 s)", s);
    jv_free(v);
    /* a duplicate deep in the object, found by the hashed check, with its position */
    sprintf(text + body, ",\n\"key123456\": 0}");
    v = jv_parse(text, strlen(text), "many.json", &e);
    char want[128];
    snprintf(want, sizeof want, "many.json:%d:12: expected unique keys, \"key123456\" appears twice", N + 2);
    ok(!v && strcmp(e.msg, want) == 0, "a duplicate among 200000 keys: %s", v ? "accepted" : e.msg);
    jv_free(v);
    /* near the switch from the scan to the table */
    for (int n = 6; n <= 40; n++) {
        char small[1024];
        size_t m = 0;
        small[m++] = '{';
        for (int i = 0; i < n; i++) m += (size_t)sprintf(small + m, "\"k%d\":%d,", i, i);
        sprintf(small + m, "\"k%d\":0}", n / 2);
        v = jv_parse(small, strlen(small), "t.json", &e);
        if (v || !strstr(e.msg, "appears twice")) ok(0, "duplicate k%d among %d keys missed", n / 2, n);
        jv_free(v);
        sprintf(small + m, "\"k%d\":0}", n);
        v = jv_parse(small, strlen(small), "t.json", &e);
        if (!v || v->n != n + 1) ok(0, "%d distinct keys refused: %s", n + 1, e.msg);
        jv_free(v);
    }
    ok(1, "duplicates found and distinct keys accepted for 6 to 41 keys");
    free(text);
}

/* JSON text is UTF-8: raw bytes that are not are refused with their position. */
static void test_utf8(void)
{
    dm_err e;
    bad("{\"a\xff\": 1}", "t.json:1:4: expected UTF-8 text in the string, found byte 0xff");
    bad("\"\x80\"", "t.json:1:2: expected UTF-8 text in the string, found byte 0x80");   /* stray continuation */
    bad("\"\xc0\x80\"", "found byte 0xc0");          /* overlong NUL */
    bad("\"\xe0\x80\xaf\"", "found byte 0xe0");     /* overlong '/' */
    bad("\"\xed\xa0\x80\"", "found byte 0xed");     /* a surrogate */
    bad("\"\xf4\x90\x80\x80\"", "found byte 0xf4"); /* past U+10FFFF */
    bad("\"ab\xe2\x82\"", "t.json:1:4: expected UTF-8"); /* truncated */
    jv *v = parse("[\"caf\xc3\xa9\", \"\xe2\x82\xac\", \"\xf0\x9f\x98\x80\", \"\\ud83d\\ude00\", \"a\\ud800b\", \"\\udc00\"]", &e);
    ok(v && v->n == 6, "two-, three- and four-byte characters accepted: %s", v ? "" : e.msg);
    if (v && v->n == 6) {
        ok(strcmp(v->items[2]->str, "\xf0\x9f\x98\x80") == 0 && strcmp(v->items[3]->str, v->items[2]->str) == 0,
           "a \\u surrogate pair is one four-byte character");
        ok(strcmp(v->items[4]->str, "a\xef\xbf\xbd" "b") == 0 && strcmp(v->items[5]->str, "\xef\xbf\xbd") == 0,
           "a lone \\u surrogate becomes U+FFFD");
    }
    jv_free(v);
    /* an error after a surrogate pair still has its message (the pair's look-ahead once lost it) */
    bad("\"\\ud83d\\ude00", "t.json:1:14: expected '\"' closing the string, found end of file");
    bad("[\"\\ud83d\\ude00\", \"\\u12\"]", "four hex digits after \\u");
}

static char *written(const char *s)
{
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    json_write_string(f, s);
    fclose(f);
    return buf;
}

/* The one JSON string writer: control bytes escaped, bytes that are not UTF-8 replaced by
 * U+FFFD, so its output is always JSON whatever the string came from (a CSV, a flag). */
static void test_writer(void)
{
    dm_err e;
    char *w = written("a\"b\\c\n\t\x01\x1f\x7f");
    ok(strcmp(w, "\"a\\\"b\\\\c\\n\\t\\u0001\\u001f\\u007f\"") == 0, "escapes: %s", w);
    free(w);
    w = written("ok \xc3\xa9 bad \xff\xfe \xc3 \xed\xa0\x80 \xf0\x9f\x98\x80");
    ok(strcmp(w, "\"ok \xc3\xa9 bad \xef\xbf\xbd\xef\xbf\xbd \xef\xbf\xbd \xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd "
                 "\xf0\x9f\x98\x80\"") == 0,
       "UTF-8 kept, each other byte U+FFFD");
    jv *v = jv_parse(w, strlen(w), "w.json", &e);
    ok(v && v->type == JV_STRING, "and the result reads back as a JSON string");
    jv_free(v);
    free(w);
    /* every byte value, in every position of a short string: always valid JSON */
    int bad_out = 0;
    for (int b = 1; b < 256 && !bad_out; b++) {
        char s[4] = {(char)b, 'x', (char)b, 0};
        w = written(s);
        v = jv_parse(w, strlen(w), "w.json", &e);
        bad_out = !v || v->type != JV_STRING;
        jv_free(v);
        free(w);
    }
    ok(!bad_out, "strings of any bytes come out as JSON that reads back");
    char buf[8];
    ok(json_utf8_clean("ab\xff", buf, sizeof buf) == 5 && strcmp(buf, "ab\xef\xbf\xbd") == 0, "clean: U+FFFD");
    ok(json_utf8_clean("abcd\xc3\xa9x", buf, 6) == 4 && strcmp(buf, "abcd") == 0, "clean: cut at a character boundary");
    ok(json_utf8_clean("abcd\xc3\xa9x", buf, 7) == 6 && strcmp(buf, "abcd\xc3\xa9") == 0, "clean: a whole character fits");
}

int main(void)
{
    dm_err e;
    jv *v = parse("{\n  \"a\": [1, 2.5, -3e2],\n  \"b\": \"x\\u00e9\\n\",\n  \"c\": true, \"d\": null\n}", &e);
    ok(v && v->type == JV_OBJECT && v->n == 4, "object with four keys");
    const jv *a = jv_get(v, "a");
    ok(a && a->type == JV_ARRAY && a->n == 3, "array of three");
    ok(a && a->line == 2 && a->col == 8, "array position 2:8 (got %d:%d)", a ? a->line : 0, a ? a->col : 0);
    ok(a && a->items[0]->is_int && !a->items[1]->is_int && a->items[2]->num == -300, "numbers and int flags");
    ok(strcmp(jv_get(v, "b")->str, "x\xc3\xa9\n") == 0, "string escapes and \\u to UTF-8");
    ok(jv_get(v, "c")->b == 1 && jv_get(v, "d")->type == JV_NULL, "true and null");
    int64_t x;
    ok(jv_req_int(v, "a", 0, 10, "t.json", &x, &e) == -1 && strstr(e.msg, "t.json:2:8: expected \"a\" to be a number"),
       "typed getter names position: %s", e.msg);
    ok(jv_req_int(v, "zz", 0, 10, "t.json", &x, &e) == -1 && strstr(e.msg, "t.json:1:1: expected field \"zz\""),
       "missing field names the object: %s", e.msg);
    ok(jv_as_int(a->items[0], 5, 10, "t.json", "n", &x, &e) == -1 && strstr(e.msg, "2:9: expected n in [5, 10], found 1"),
       "range error names the value: %s", e.msg);
    jv_free(v);

    bad("{\"a\": 1,}", "t.json:1:9: expected a string key");
    bad("[1 2]", "t.json:1:4: expected ',' or ']'");
    bad("{\"a\" 1}", "expected ':'");
    bad("{\"a\": 1, \"a\": 2}", "unique keys");
    bad("[01]", "expected ',' or ']'");
    bad("\"abc", "end of file");
    bad("[1.]", "a digit after '.'");
    bad("tru", "expected a value");
    bad("{} x", "end of file after the top-level value");
    bad("\"\\u0000\"", "non-NUL");
    bad("1e999", "finite number");
    bad("", "expected a value, found end of file");
    bad("\n\n  @", "t.json:3:3:");

    /* Deep nesting is refused, not a stack overflow. */
    char deep[2000];
    memset(deep, '[', sizeof deep - 1);
    deep[sizeof deep - 1] = 0;
    bad(deep, "nesting");

    test_many_keys();
    test_utf8();
    test_writer();
    return tap_done();
}
