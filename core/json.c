/* json.c: recursive-descent JSON reader with positions (see json.h). Depth is bounded so a
 * hostile file cannot overflow the stack. */
#include "json.h"

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#define JV_MAX_DEPTH 256

typedef struct {
    const char *s, *end, *name;
    int line, col;
    dm_err *err;
} jp;

static int jp_fail(jp *p, const char *what)
{
    if (p->s >= p->end)
        return dm_err_set(p->err, "%s:%d:%d: expected %s, found end of file", p->name, p->line,
                          p->col, what);
    unsigned char c = (unsigned char)*p->s;
    if (c >= 32 && c < 127)
        return dm_err_set(p->err, "%s:%d:%d: expected %s, found '%c'", p->name, p->line, p->col,
                          what, c);
    return dm_err_set(p->err, "%s:%d:%d: expected %s, found byte 0x%02x", p->name, p->line,
                      p->col, what, c);
}

static void jp_adv(jp *p)
{
    if (*p->s == '\n') {
        p->line++;
        p->col = 1;
    } else {
        p->col++;
    }
    p->s++;
}

static void jp_ws(jp *p)
{
    while (p->s < p->end && (*p->s == ' ' || *p->s == '\t' || *p->s == '\n' || *p->s == '\r'))
        jp_adv(p);
}

static jv *jv_new(jp *p, jv_type t)
{
    jv *v = dm_calloc(1, sizeof *v, p->err);
    if (!v) return NULL;
    v->type = t;
    v->line = p->line;
    v->col = p->col;
    return v;
}

static int jv_push(jv *v, jv *item, char *key, dm_err *err)
{
    if ((v->n & (v->n - 1)) == 0) { /* grow at powers of two */
        int cap = v->n ? 2 * v->n : 1;
        jv **ni = dm_realloc(v->items, (size_t)cap * sizeof *ni, err);
        if (!ni) return -1;
        v->items = ni;
        if (v->type == JV_OBJECT) {
            char **nk = dm_realloc(v->keys, (size_t)cap * sizeof *nk, err);
            if (!nk) return -1;
            v->keys = nk;
        }
    }
    v->items[v->n] = item;
    if (v->type == JV_OBJECT) v->keys[v->n] = key;
    v->n++;
    return 0;
}

static int hexval(char c)
{
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

/* Length of the well-formed UTF-8 sequence at s (at most n bytes), 0 when it is not one
 * (a stray continuation byte, a truncated or overlong sequence, a surrogate, past U+10FFFF). */
static size_t utf8_len(const unsigned char *s, size_t n)
{
    unsigned c = s[0];
    if (c < 0x80) return 1;
    size_t k = c >= 0xC2 && c <= 0xDF ? 2 : c >= 0xE0 && c <= 0xEF ? 3 : c >= 0xF0 && c <= 0xF4 ? 4 : 0;
    if (!k || n < k) return 0;
    for (size_t i = 1; i < k; i++)
        if ((s[i] & 0xC0) != 0x80) return 0;
    if (c == 0xE0 && s[1] < 0xA0) return 0; /* overlong */
    if (c == 0xED && s[1] > 0x9F) return 0; /* surrogates */
    if (c == 0xF0 && s[1] < 0x90) return 0; /* overlong */
    if (c == 0xF4 && s[1] > 0x8F) return 0; /* past U+10FFFF */
    return k;
}

static size_t utf8_put(unsigned cp, char *buf)
{
    if (cp < 0x80) {
        buf[0] = (char)cp;
        return 1;
    }
    if (cp < 0x800) {
        buf[0] = (char)(0xC0 | (cp >> 6));
        buf[1] = (char)(0x80 | (cp & 0x3F));
        return 2;
    }
    if (cp < 0x10000) {
        buf[0] = (char)(0xE0 | (cp >> 12));
        buf[1] = (char)(0x80 | ((cp >> 6) & 0x3F));
        buf[2] = (char)(0x80 | (cp & 0x3F));
        return 3;
    }
    buf[0] = (char)(0xF0 | (cp >> 18));
    buf[1] = (char)(0x80 | ((cp >> 12) & 0x3F));
    buf[2] = (char)(0x80 | ((cp >> 6) & 0x3F));
    buf[3] = (char)(0x80 | (cp & 0x3F));
    return 4;
}

/* The four hex digits after "\\u" (p->s at the 'u'); leaves p->s on the last digit. */
static int jp_hex4(jp *p, unsigned *cp)
{
    *cp = 0;
    for (int i = 0; i < 4; i++) {
        jp_adv(p);
        int h = p->s < p->end ? hexval(*p->s) : -1;
        if (h < 0) return jp_fail(p, "four hex digits after \\u");
        *cp = *cp * 16 + (unsigned)h;
    }
    return 0;
}

/* Parses a string literal at p->s (which is '"'); returns a malloc'd UTF-8 string. Raw bytes
 * must be UTF-8 (JSON text is): anything else is refused with its position, so no invalid
 * byte reaches a name, a message or an output. */
static char *jp_string(jp *p)
{
    size_t cap = 16, n = 0;
    char *out = dm_malloc(cap, p->err);
    if (!out) return NULL;
    jp_adv(p); /* opening quote */
    for (;;) {
        if (p->s >= p->end) { jp_fail(p, "'\"' closing the string"); goto fail; }
        unsigned char c = (unsigned char)*p->s;
        if (c == '"') { jp_adv(p); break; }
        if (c < 32) { jp_fail(p, "a string character (control characters must be escaped)"); goto fail; }
        char buf[4];
        size_t k = 1;
        if (c == '\\') {
            jp_adv(p);
            if (p->s >= p->end) { jp_fail(p, "an escape character"); goto fail; }
            char e = *p->s;
            switch (e) {
            case '"': buf[0] = '"'; break;
            case '\\': buf[0] = '\\'; break;
            case '/': buf[0] = '/'; break;
            case 'b': buf[0] = '\b'; break;
            case 'f': buf[0] = '\f'; break;
            case 'n': buf[0] = '\n'; break;
            case 'r': buf[0] = '\r'; break;
            case 't': buf[0] = '\t'; break;
            case 'u': {
                unsigned cp;
                if (jp_hex4(p, &cp)) goto fail;
                if (cp == 0) { jp_fail(p, "a non-NUL character (\\u0000 is not accepted)"); goto fail; }
                if (cp >= 0xD800 && cp <= 0xDBFF && p->end - p->s >= 7 && p->s[1] == '\\' && p->s[2] == 'u') {
                    jp lo = *p; /* a surrogate pair: high, then low */
                    unsigned c2;
                    lo.err = NULL;
                    jp_adv(&lo);
                    jp_adv(&lo);
                    if (jp_hex4(&lo, &c2) == 0 && c2 >= 0xDC00 && c2 <= 0xDFFF) {
                        lo.err = p->err;
                        *p = lo;
                        cp = 0x10000 + ((cp - 0xD800) << 10) + (c2 - 0xDC00);
                    }
                }
                if (cp >= 0xD800 && cp <= 0xDFFF) cp = 0xFFFD; /* a lone surrogate: replaced */
                k = utf8_put(cp, buf);
                break;
            }
            default: jp_fail(p, "a valid escape (\\\" \\\\ \\/ \\b \\f \\n \\r \\t \\uXXXX)"); goto fail;
            }
            jp_adv(p);
        } else if (c < 0x80) {
            buf[0] = (char)c;
            jp_adv(p);
        } else {
            k = utf8_len((const unsigned char *)p->s, (size_t)(p->end - p->s));
            if (!k) { jp_fail(p, "UTF-8 text in the string"); goto fail; }
            memcpy(buf, p->s, k);
            for (size_t i = 0; i < k; i++) jp_adv(p);
        }
        if (n + k + 1 > cap) {
            cap *= 2;
            char *q = dm_realloc(out, cap, p->err);
            if (!q) goto fail;
            out = q;
        }
        memcpy(out + n, buf, k);
        n += k;
    }
    out[n] = 0;
    return out;
fail:
    free(out);
    return NULL;
}

static jv *jp_value(jp *p, int depth);

/* ---- duplicate keys: an open-addressing set of key indexes per object, built once an object
 * has more than a few keys (a linear scan below that), so 200k keys parse in linear time. */

typedef struct keyset {
    int *slot; /* key index + 1; 0: empty */
    size_t cap; /* power of two, 0 while scanning */
} keyset;

#define KEYSET_SCAN 8

static uint64_t key_hash(const char *k)
{
    uint64_t h = UINT64_C(0xcbf29ce484222325);
    for (const unsigned char *c = (const unsigned char *)k; *c; c++) h = (h ^ *c) * UINT64_C(0x100000001b3);
    return h;
}

/* 1 when key is among v's keys (and not added), 0 when it is new (the set then holds index
 * v->n, the one it will get), -1 out of memory. */
static int keyset_seen(keyset *ks, const jv *v, const char *key, dm_err *err)
{
    if (v->n < KEYSET_SCAN) {
        for (int i = 0; i < v->n; i++)
            if (strcmp(v->keys[i], key) == 0) return 1;
        return 0;
    }
    if ((size_t)v->n + 1 > ks->cap / 2) { /* (re)build at twice the size, load at most 1/2 */
        size_t cap = ks->cap ? 2 * ks->cap : 4 * KEYSET_SCAN;
        int *slot = dm_calloc(cap, sizeof *slot, err);
        if (!slot) return -1;
        for (int i = 0; i < v->n; i++) {
            size_t h = (size_t)key_hash(v->keys[i]) & (cap - 1);
            while (slot[h]) h = (h + 1) & (cap - 1);
            slot[h] = i + 1;
        }
        free(ks->slot);
        ks->slot = slot;
        ks->cap = cap;
    }
    size_t h = (size_t)key_hash(key) & (ks->cap - 1);
    for (; ks->slot[h]; h = (h + 1) & (ks->cap - 1))
        if (strcmp(v->keys[ks->slot[h] - 1], key) == 0) return 1;
    ks->slot[h] = v->n + 1;
    return 0;
}

static jv *jp_number(jp *p)
{
    jv *v = jv_new(p, JV_NUMBER);
    if (!v) return NULL;
    const char *st = p->s;
    int is_int = 1;
    if (p->s < p->end && *p->s == '-') jp_adv(p);
    if (p->s >= p->end || !(*p->s >= '0' && *p->s <= '9')) { jp_fail(p, "a digit"); goto fail; }
    if (*p->s == '0') jp_adv(p);
    else while (p->s < p->end && *p->s >= '0' && *p->s <= '9') jp_adv(p);
    if (p->s < p->end && *p->s == '.') {
        is_int = 0;
        jp_adv(p);
        if (p->s >= p->end || !(*p->s >= '0' && *p->s <= '9')) { jp_fail(p, "a digit after '.'"); goto fail; }
        while (p->s < p->end && *p->s >= '0' && *p->s <= '9') jp_adv(p);
    }
    if (p->s < p->end && (*p->s == 'e' || *p->s == 'E')) {
        is_int = 0;
        jp_adv(p);
        if (p->s < p->end && (*p->s == '+' || *p->s == '-')) jp_adv(p);
        if (p->s >= p->end || !(*p->s >= '0' && *p->s <= '9')) { jp_fail(p, "a digit in the exponent"); goto fail; }
        while (p->s < p->end && *p->s >= '0' && *p->s <= '9') jp_adv(p);
    }
    char buf[64];
    size_t len = (size_t)(p->s - st);
    if (len >= sizeof buf) {
        dm_err_set(p->err, "%s:%d:%d: expected a number of at most 63 characters", p->name, v->line, v->col);
        goto fail;
    }
    memcpy(buf, st, len);
    buf[len] = 0;
    v->num = strtod(buf, NULL);
    v->is_int = is_int;
    if (!isfinite(v->num)) {
        dm_err_set(p->err, "%s:%d:%d: expected a finite number, found %s", p->name, v->line, v->col, buf);
        goto fail;
    }
    return v;
fail:
    free(v);
    return NULL;
}

static int jp_lit(jp *p, const char *w)
{
    size_t n = strlen(w);
    if ((size_t)(p->end - p->s) < n || memcmp(p->s, w, n) != 0) return 0;
    for (size_t i = 0; i < n; i++) jp_adv(p);
    return 1;
}

static jv *jp_value(jp *p, int depth)
{
    jp_ws(p);
    if (depth > JV_MAX_DEPTH) {
        dm_err_set(p->err, "%s:%d:%d: expected nesting at most %d deep", p->name, p->line, p->col, JV_MAX_DEPTH);
        return NULL;
    }
    if (p->s >= p->end) { jp_fail(p, "a value"); return NULL; }
    char c = *p->s;
    jv *v = NULL;
    keyset ks = {NULL, 0};
    if (c == '{' || c == '[') {
        int obj = c == '{';
        v = jv_new(p, obj ? JV_OBJECT : JV_ARRAY);
        if (!v) return NULL;
        jp_adv(p);
        jp_ws(p);
        if (p->s < p->end && *p->s == (obj ? '}' : ']')) { jp_adv(p); return v; }
        for (;;) {
            char *key = NULL;
            jp_ws(p);
            if (obj) {
                if (p->s >= p->end || *p->s != '"') { jp_fail(p, "a string key"); goto fail; }
                key = jp_string(p);
                if (!key) goto fail;
                int seen = keyset_seen(&ks, v, key, p->err);
                if (seen) {
                    if (seen > 0)
                        dm_err_set(p->err, "%s:%d:%d: expected unique keys, \"%s\" appears twice",
                                   p->name, p->line, p->col, key);
                    free(key);
                    goto fail;
                }
                jp_ws(p);
                if (p->s >= p->end || *p->s != ':') { free(key); jp_fail(p, "':' after the key"); goto fail; }
                jp_adv(p);
            }
            jv *item = jp_value(p, depth + 1);
            if (!item) { free(key); goto fail; }
            if (jv_push(v, item, key, p->err)) { free(key); jv_free(item); goto fail; }
            jp_ws(p);
            if (p->s < p->end && *p->s == ',') { jp_adv(p); continue; }
            if (p->s < p->end && *p->s == (obj ? '}' : ']')) {
                jp_adv(p);
                free(ks.slot);
                return v;
            }
            jp_fail(p, obj ? "',' or '}'" : "',' or ']'");
            goto fail;
        }
    }
    if (c == '"') {
        v = jv_new(p, JV_STRING);
        if (!v) return NULL;
        v->str = jp_string(p);
        if (!v->str) goto fail;
        return v;
    }
    if (c == '-' || (c >= '0' && c <= '9')) return jp_number(p);
    v = jv_new(p, JV_NULL);
    if (!v) return NULL;
    if (jp_lit(p, "null")) return v;
    v->type = JV_BOOL;
    if (jp_lit(p, "true")) { v->b = 1; return v; }
    if (jp_lit(p, "false")) { v->b = 0; return v; }
    jp_fail(p, "a value (object, array, string, number, true, false or null)");
fail:
    free(ks.slot);
    jv_free(v);
    return NULL;
}

jv *jv_parse(const char *text, size_t len, const char *name, dm_err *err)
{
    jp p = {text, text + len, name, 1, 1, err};
    jv *v = jp_value(&p, 0);
    if (!v) return NULL;
    jp_ws(&p);
    if (p.s < p.end) {
        jp_fail(&p, "end of file after the top-level value");
        jv_free(v);
        return NULL;
    }
    return v;
}

jv *jv_parse_file(const char *path, dm_err *err)
{
    FILE *f = fopen(path, "rb");
    if (!f) {
        dm_err_set(err, "%s: cannot open: %s", path, strerror(errno));
        return NULL;
    }
    size_t cap = 1 << 16, n = 0;
    char *buf = dm_malloc(cap, err);
    jv *v = NULL;
    if (!buf) goto out;
    for (;;) {
        size_t got = fread(buf + n, 1, cap - n, f);
        n += got;
        if (n < cap) break;
        if (cap > ((size_t)1 << 30)) {
            dm_err_set(err, "%s: expected a file under 1 GiB", path);
            goto out;
        }
        cap *= 2;
        char *q = dm_realloc(buf, cap, err);
        if (!q) goto out;
        buf = q;
    }
    if (ferror(f)) {
        dm_err_set(err, "%s: read error: %s", path, strerror(errno));
        goto out;
    }
    v = jv_parse(buf, n, path, err);
out:
    free(buf);
    fclose(f);
    return v;
}

void jv_free(jv *v)
{
    if (!v) return;
    for (int i = 0; i < v->n; i++) {
        jv_free(v->items[i]);
        if (v->keys) free(v->keys[i]);
    }
    free(v->items);
    free(v->keys);
    free(v->str);
    free(v);
}

jv *jv_get(const jv *obj, const char *key)
{
    if (!obj || obj->type != JV_OBJECT) return NULL;
    for (int i = 0; i < obj->n; i++)
        if (strcmp(obj->keys[i], key) == 0) return obj->items[i];
    return NULL;
}

const char *jv_type_name(jv_type t)
{
    static const char *names[] = {"null", "a boolean", "a number", "a string", "an array", "an object"};
    return names[t];
}

int jv_req(const jv *obj, const char *key, jv_type t, const char *file, const jv **out, dm_err *err)
{
    const jv *v = jv_get(obj, key);
    if (!v)
        return dm_err_set(err, "%s:%d:%d: expected field \"%s\" (%s) in this object", file,
                          obj->line, obj->col, key, jv_type_name(t));
    if (v->type != t)
        return dm_err_set(err, "%s:%d:%d: expected \"%s\" to be %s, found %s", file, v->line,
                          v->col, key, jv_type_name(t), jv_type_name(v->type));
    *out = v;
    return 0;
}

int jv_req_str(const jv *obj, const char *key, const char *file, const char **out, dm_err *err)
{
    const jv *v = NULL;
    if (jv_req(obj, key, JV_STRING, file, &v, err)) return -1;
    *out = v->str;
    return 0;
}

int jv_opt_str(const jv *obj, const char *key, const char *file, const char **out, dm_err *err)
{
    if (!jv_get(obj, key)) return 0;
    return jv_req_str(obj, key, file, out, err);
}

int jv_as_int(const jv *v, int64_t lo, int64_t hi, const char *file, const char *what,
              int64_t *out, dm_err *err)
{
    if (v->type != JV_NUMBER || !v->is_int || v->num < -9.2e18 || v->num > 9.2e18)
        return dm_err_set(err, "%s:%d:%d: expected %s to be an integer, found %s", file, v->line,
                          v->col, what, v->type == JV_NUMBER ? "a non-integer number" : jv_type_name(v->type));
    int64_t x = (int64_t)v->num;
    if (x < lo || x > hi)
        return dm_err_set(err, "%s:%d:%d: expected %s in [%" PRId64 ", %" PRId64 "], found %" PRId64,
                          file, v->line, v->col, what, lo, hi, x);
    *out = x;
    return 0;
}

int jv_req_int(const jv *obj, const char *key, int64_t lo, int64_t hi, const char *file,
               int64_t *out, dm_err *err)
{
    const jv *v = NULL;
    if (jv_req(obj, key, JV_NUMBER, file, &v, err)) return -1;
    char what[128];
    snprintf(what, sizeof what, "\"%s\"", key);
    return jv_as_int(v, lo, hi, file, what, out, err);
}

int jv_opt_int(const jv *obj, const char *key, int64_t lo, int64_t hi, const char *file,
               int64_t *out, dm_err *err)
{
    if (!jv_get(obj, key)) return 0;
    return jv_req_int(obj, key, lo, hi, file, out, err);
}

int jv_req_num(const jv *obj, const char *key, double lo, double hi, const char *file,
               double *out, dm_err *err)
{
    const jv *v = NULL;
    if (jv_req(obj, key, JV_NUMBER, file, &v, err)) return -1;
    if (v->num < lo || v->num > hi)
        return dm_err_set(err, "%s:%d:%d: expected \"%s\" in [%g, %g], found %g", file, v->line,
                          v->col, key, lo, hi, v->num);
    *out = v->num;
    return 0;
}

int jv_opt_num(const jv *obj, const char *key, double lo, double hi, const char *file,
               double *out, dm_err *err)
{
    if (!jv_get(obj, key)) return 0;
    return jv_req_num(obj, key, lo, hi, file, out, err);
}

size_t json_utf8_clean(const char *s, char *out, size_t size)
{
    size_t k = 0;
    if (!size) return 0;
    for (const unsigned char *c = (const unsigned char *)s; *c;) {
        size_t n = *c < 0x80 ? 1 : utf8_len(c, strnlen((const char *)c, 4));
        const char *from = n ? (const char *)c : "\xEF\xBF\xBD";
        size_t w = n ? n : 3;
        if (k + w + 1 > size) break; /* cut at a character boundary */
        memcpy(out + k, from, w);
        k += w;
        c += n ? n : 1;
    }
    out[k] = 0;
    return k;
}

void json_write_string(FILE *f, const char *s)
{
    fputc('"', f);
    const unsigned char *c = (const unsigned char *)s;
    while (*c) {
        switch (*c) {
        case '"': fputs("\\\"", f); break;
        case '\\': fputs("\\\\", f); break;
        case '\n': fputs("\\n", f); break;
        case '\r': fputs("\\r", f); break;
        case '\t': fputs("\\t", f); break;
        default:
            if (*c < 32 || *c == 127) {
                fprintf(f, "\\u%04x", *c);
            } else if (*c >= 0x80) {
                size_t k = utf8_len(c, strnlen((const char *)c, 4));
                if (k) fwrite(c, 1, k, f);
                else fputs("\xEF\xBF\xBD", f); /* U+FFFD for each byte that is not UTF-8 */
                c += k ? k : 1;
                continue;
            } else {
                fputc(*c, f);
            }
        }
        c++;
    }
    fputc('"', f);
}

void json_write_number(FILE *f, double v, int digits)
{
    if (isfinite(v)) fprintf(f, "%.*g", digits, v);
    else fputs("null", f);
}

void json_write_member(FILE *f, const char *key, double v, int digits, const char *sep)
{
    fprintf(f, "\"%s\": ", key);
    json_write_number(f, v, digits);
    fputs(sep, f);
}
