/* test_json.c: the positioned JSON reader: values, positions, and syntax errors with
 * FILE:LINE:COL messages. */
#include <string.h>

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
    return tap_done();
}
