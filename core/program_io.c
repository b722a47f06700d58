/* program_io.c: the step program's JSON form (deterministic writer, positioned reader), its
 * stable hash, and the validator (program.h).
 *
 * Format "dmuon-program-1": an object with format, model, strategy, cluster, options, nranks,
 * gpus_per_node, tokens, n_colls, groups (arrays of ranks) and ranks (one object per rank with
 * its ops). Each op is written on one line with its fields in a fixed order; fields at their
 * default (deps/params empty, coll/group/root/layer -1, bytes/flops/m/n 0, batch 1, algo direct,
 * iters DM_NS_ITERS_DEFAULT for ns and 0 elsewhere, dtype bf16, payload the implied one of
 * program.h, launch graph, publish 0, tall 0, staged dm_op_staged_default; the header's seq_len 0 and
 * ns_coeffs unset) are left out, and the
 * reader applies the same defaults: so
 * files written before ops carried iters and payload read back as those ops were run, and
 * their hashes do not change.
 *
 * Counts read from a file are checked against the data before anything is sized by them:
 * nranks against the bytes left for the rank entries, n_colls against the collective ops read
 * (every collective appears on a rank), groups for duplicates by sorting, not pairwise. */
#define _GNU_SOURCE
#include "outfile.h"
#include "program.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "json.h" /* json_write_string */
#include "model.h" /* DM_MODEL_MAX_COUNT, DM_MODEL_MAX_LAYERS: the ids a program can name */

/* ---- writing ------------------------------------------------------------------------------- */

static void write_num(FILE *f, double v) { fprintf(f, "%.17g", v); }

/* An op's line is formatted into a buffer and written at once: the ops are most of a program's
 * text, and fprintf per field and per param id
 * was most of `dmuon plan`'s time on a large program. The text is fprintf's, byte for byte. */
typedef struct txt {
    char *s;
    size_t n, cap;
    int oom; /* a growth failed (the write fails) */
} txt;

static void txt_put(txt *t, const char *s, size_t len)
{
    if (t->oom) return;
    if (t->n + len > t->cap) {
        size_t cap = t->cap ? t->cap : 4096;
        while (cap < t->n + len) cap *= 2;
        char *ns = realloc(t->s, cap);
        if (!ns) {
            t->oom = 1;
            return;
        }
        t->s = ns, t->cap = cap;
    }
    memcpy(t->s + t->n, s, len);
    t->n += len;
}

static void txt_str(txt *t, const char *s) { txt_put(t, s, strlen(s)); }

static void txt_i64(txt *t, long long v) /* as "%lld" */
{
    char b[24], *e = b + sizeof b, *p = e;
    unsigned long long u = v < 0 ? 0ull - (unsigned long long)v : (unsigned long long)v;
    do *--p = (char)('0' + u % 10); while (u /= 10);
    if (v < 0) *--p = '-';
    txt_put(t, p, (size_t)(e - p));
}

static void txt_num(txt *t, double v) /* as "%.17g": an integer below 1e15 prints its digits */
{
    if (fabs(v) < 1e15 && v == (double)(long long)v && !(v == 0 && signbit(v))) { /* range first: the cast */
        txt_i64(t, (long long)v);
        return;
    }
    char b[40];
    int k = snprintf(b, sizeof b, "%.17g", v);
    txt_put(t, b, k > 0 ? (size_t)k : 0);
}

/* ,"key":v */
static void txt_field(txt *t, const char *key, long long v)
{
    txt_str(t, key);
    txt_i64(t, v);
}

/* 0, or -1 when out of memory */
static int write_op(FILE *f, txt *t, const dm_op *o)
{
    t->n = 0;
    txt_field(t, "{\"id\":", o->id);
    txt_str(t, ",\"kind\":\"");
    txt_str(t, dm_op_kind_name(o->kind));
    txt_str(t, "\",\"stream\":\"");
    txt_str(t, dm_stream_name(o->stream));
    txt_str(t, "\"");
    if (o->layer >= 0) txt_field(t, ",\"layer\":", o->layer);
    if (o->n_deps) {
        txt_str(t, ",\"deps\":[");
        for (int i = 0; i < o->n_deps; i++) {
            if (i) txt_put(t, ",", 1);
            txt_i64(t, o->deps[i]);
        }
        txt_put(t, "]", 1);
    }
    if (o->coll >= 0) txt_field(t, ",\"coll\":", o->coll);
    if (o->group >= 0) txt_field(t, ",\"group\":", o->group);
    if (o->root >= 0) txt_field(t, ",\"root\":", o->root);
    if (o->bytes != 0) {
        txt_str(t, ",\"bytes\":");
        txt_num(t, o->bytes);
    }
    if (o->flops != 0) {
        txt_str(t, ",\"flops\":");
        txt_num(t, o->flops);
    }
    if (o->m) txt_field(t, ",\"m\":", (long long)o->m);
    if (o->n) txt_field(t, ",\"n\":", (long long)o->n);
    if (o->batch != 1) txt_field(t, ",\"batch\":", o->batch);
    if (o->algo != DM_NS_DIRECT) {
        txt_str(t, ",\"algo\":\"");
        txt_str(t, dm_ns_algo_name(o->algo));
        txt_str(t, "\"");
    }
    if (o->iters != (o->kind == DM_OP_NS ? DM_NS_ITERS_DEFAULT : 0)) txt_field(t, ",\"iters\":", o->iters);
    if (o->dtype != DM_DT_BF16) {
        txt_str(t, ",\"dtype\":\"");
        txt_str(t, dm_dtype_name(o->dtype));
        txt_str(t, "\"");
    }
    if (o->payload != o->implied) {
        txt_str(t, ",\"payload\":\"");
        txt_str(t, dm_payload_name(o->payload));
        txt_str(t, "\"");
    }
    if (o->n_params) {
        txt_str(t, ",\"params\":[");
        for (int i = 0; i < o->n_params; i++) {
            if (i) txt_put(t, ",", 1);
            txt_i64(t, (long long)o->params[i]);
        }
        txt_put(t, "]", 1);
    }
    if (o->work >= 0) txt_field(t, ",\"work\":", o->work);
    if (o->parts > 1) {
        txt_field(t, ",\"part\":", o->part);
        txt_field(t, ",\"parts\":", o->parts);
    }
    if (o->eager) txt_str(t, ",\"launch\":\"eager\"");
    if (o->publish) txt_field(t, ",\"publish\":", o->publish);
    if (o->tall) txt_field(t, ",\"tall\":", o->tall);
    if (o->stage) txt_field(t, ",\"stage\":", o->stage);
    if (o->staged != dm_op_staged_default(o->kind)) txt_field(t, ",\"staged\":", o->staged);
    txt_put(t, "}", 1);
    if (t->oom) return -1;
    fwrite(t->s, 1, t->n, f);
    return 0;
}

/* One kernel of a work: its fields in a fixed order, defaults (batch and count 1, param and
 * slot -1, elems 0) left out. */
static void write_kernel(FILE *f, const dm_kernel *k)
{
    fprintf(f, "{\"kind\":\"%s\",\"op\":\"%s\",\"m\":%lld,\"n\":%lld,\"k\":%lld", dm_kern_kind_name(k->kind),
            dm_kern_op_name(k->op), (long long)k->m, (long long)k->n, (long long)k->k);
    if (k->batch != 1) fprintf(f, ",\"batch\":%lld", (long long)k->batch);
    if (k->count != 1) fprintf(f, ",\"count\":%lld", (long long)k->count);
    if (k->param >= 0) fprintf(f, ",\"param\":%lld", (long long)k->param);
    if (k->slot >= 0) fprintf(f, ",\"slot\":%d", k->slot);
    fputs(",\"flops\":", f);
    write_num(f, k->flops);
    fputs(",\"bytes\":", f);
    write_num(f, k->bytes);
    if (k->elems != 0) {
        fputs(",\"elems\":", f);
        write_num(f, k->elems);
    }
    fputc('}', f);
}

int dm_program_write_json(const dm_program *p, FILE *f, dm_err *err)
{
    fputs("{\n  \"format\": \"dmuon-program-1\",\n  \"model\": ", f);
    json_write_string(f, p->model);
    fputs(",\n  \"strategy\": ", f);
    json_write_string(f, p->strategy);
    fputs(",\n  \"cluster\": ", f);
    json_write_string(f, p->cluster);
    fputs(",\n  \"options\": ", f);
    json_write_string(f, p->options);
    fprintf(f, ",\n  \"nranks\": %d,\n  \"gpus_per_node\": %d,\n  \"tokens\": %lld,\n", p->nranks,
            p->gpus_per_node, (long long)p->tokens);
    if (p->seq_len) fprintf(f, "  \"seq_len\": %lld,\n", (long long)p->seq_len);
    if (p->causal_tile) fprintf(f, "  \"causal_tile\": %lld,\n", (long long)p->causal_tile);
    if (p->layer_passes) fprintf(f, "  \"layer_passes\": 1,\n");
    if (p->ns_coeffs) {
        fputs("  \"ns_coeffs\": ", f);
        json_write_string(f, p->ns_coeffs);
        fputs(",\n", f);
    }
    fprintf(f, "  \"n_colls\": %d,\n", p->n_colls);
    fputs("  \"groups\": [", f);
    for (int g = 0; g < p->n_groups; g++) {
        fputs(g ? ",\n    [" : "\n    [", f);
        for (int i = 0; i < p->groups[g].n; i++) fprintf(f, "%s%d", i ? "," : "", p->groups[g].ranks[i]);
        fputc(']', f);
    }
    fputs(p->n_groups ? "\n  ],\n" : "],\n", f);
    if (p->n_works) { /* programs without works (older files) keep their text and hash */
        fputs("  \"works\": [", f);
        for (int w = 0; w < p->n_works; w++) {
            fputs(w ? ",\n    [" : "\n    [", f);
            for (int i = 0; i < p->works[w].n; i++) {
                fputs(i ? ",\n      " : "\n      ", f);
                write_kernel(f, &p->works[w].k[i]);
            }
            fputs(p->works[w].n ? "\n    ]" : "]", f);
        }
        fputs("\n  ],\n", f);
    }
    fputs("  \"ranks\": [", f);
    txt line = {NULL, 0, 0, 0};
    for (int r = 0; r < p->nranks; r++) {
        const dm_rank_prog *rp = &p->ranks[r];
        fprintf(f, "%s    {\"rank\": %d, \"ops\": [", r ? ",\n" : "\n", r);
        for (int i = 0; i < rp->n_ops; i++) {
            fputs(i ? ",\n      " : "\n      ", f);
            if (write_op(f, &line, &rp->ops[i])) {
                free(line.s);
                return dm_err_set(err, "program: out of memory");
            }
        }
        fputs(rp->n_ops ? "\n    ]}" : "]}", f);
    }
    free(line.s);
    fputs("\n  ]\n}\n", f);
    if (ferror(f)) return dm_err_set(err, "program: write error");
    return 0;
}

int dm_program_save(const dm_program *p, const char *path, dm_err *err)
{
    dm_out *o = dm_out_open(path, err);
    if (!o) return -1;
    if (dm_program_write_json(p, dm_out_file(o), err)) {
        dm_out_abort(o);
        return -1;
    }
    return dm_out_commit(o, err);
}

/* ---- reading ------------------------------------------------------------------------------- */

/* The largest program file read (a device such as /dev/zero is refused at its first byte). */
#define DM_PROGRAM_MAX_BYTES ((size_t)4 << 30)

/* A streaming reader for this format: the whole file in memory, one pass, no tree (a program
 * for hundreds of ranks has hundreds of thousands of ops). Values are checked where they stand,
 * so errors name FILE:LINE:COL as the generic JSON reader does. Header fields (nranks,
 * gpus_per_node, ...) must come before "groups" and "ranks", as the writer puts them. */
typedef struct rd {
    const char *file;
    const char *s, *end;
    const char *line_start;
    int line;
    dm_err *err;
    char *str;   /* last string read (owned, grown) */
    size_t str_cap;
} rd;

static int rd_col(const rd *r, const char *at) { return (int)(at - r->line_start) + 1; }

/* `at` is always on the current line: tokens never span lines and errors are raised before any
 * whitespace after them is skipped. */
static int rd_fail(rd *r, const char *at, const char *what)
{
    return dm_err_set(r->err, "%s:%d:%d: expected %s", r->file, r->line, rd_col(r, at), what);
}

static void rd_ws(rd *r)
{
    while (r->s < r->end) {
        char c = *r->s;
        if (c == '\n') {
            r->line++;
            r->line_start = ++r->s;
        } else if (c == ' ' || c == '\t' || c == '\r') {
            r->s++;
        } else {
            break;
        }
    }
}

static int rd_peek(rd *r)
{
    rd_ws(r);
    return r->s < r->end ? (unsigned char)*r->s : -1;
}

static int rd_char(rd *r, char c, const char *what)
{
    if (rd_peek(r) != (unsigned char)c) return rd_fail(r, r->s, what);
    r->s++;
    return 0;
}

/* A string into r->str (escapes decoded; \u only for ASCII and Latin-1 as UTF-8). */
static int rd_string(rd *r)
{
    if (rd_peek(r) != '"') return rd_fail(r, r->s, "a string");
    const char *start = r->s++;
    size_t n = 0;
    for (;;) {
        if (r->s >= r->end || *r->s == '\n') return rd_fail(r, start, "a closing quote for this string");
        char c = *r->s++;
        if (c == '"') break;
        if (n + 4 >= r->str_cap) {
            size_t cap = r->str_cap ? 2 * r->str_cap : 256;
            char *ns = dm_realloc(r->str, cap, r->err);
            if (!ns) return -1;
            r->str = ns;
            r->str_cap = cap;
        }
        if (c != '\\') {
            r->str[n++] = c;
            continue;
        }
        if (r->s >= r->end) return rd_fail(r, r->s, "an escape");
        char e = *r->s++;
        switch (e) {
        case '"': case '\\': case '/': r->str[n++] = e; break;
        case 'b': r->str[n++] = '\b'; break;
        case 'f': r->str[n++] = '\f'; break;
        case 'n': r->str[n++] = '\n'; break;
        case 'r': r->str[n++] = '\r'; break;
        case 't': r->str[n++] = '\t'; break;
        case 'u': {
            unsigned v = 0;
            for (int k = 0; k < 4; k++) {
                char h = r->s < r->end ? *r->s++ : 0;
                int d = h >= '0' && h <= '9' ? h - '0' : h >= 'a' && h <= 'f' ? h - 'a' + 10 : h >= 'A' && h <= 'F' ? h - 'A' + 10 : -1;
                if (d < 0) return rd_fail(r, r->s - 1, "four hex digits after \\u");
                v = v * 16 + (unsigned)d;
            }
            if (v == 0 || v > 0xff) return rd_fail(r, r->s - 6, "a \\u escape of a character below U+0100");
            if (v < 0x80) r->str[n++] = (char)v;
            else {
                r->str[n++] = (char)(0xc0 | (v >> 6));
                r->str[n++] = (char)(0x80 | (v & 0x3f));
            }
            break;
        }
        default: return rd_fail(r, r->s - 2, "a valid escape");
        }
    }
    if (!r->str) {
        if (!(r->str = dm_malloc(1, r->err))) return -1;
        r->str_cap = 1;
    }
    r->str[n] = 0;
    return 0;
}

static int rd_number(rd *r, double *out, int *is_int)
{
    rd_ws(r);
    const char *start = r->s;
    char *endp;
    errno = 0;
    double v = strtod(start, &endp);
    if (endp == start || endp > r->end || errno) return rd_fail(r, start, "a number");
    *is_int = 1;
    for (const char *q = start; q < endp; q++)
        if (*q == '.' || *q == 'e' || *q == 'E') *is_int = 0;
    r->s = endp;
    *out = v;
    return 0;
}

static int rd_int(rd *r, int64_t lo, int64_t hi, const char *what, int64_t *out)
{
    rd_ws(r);
    const char *at = r->s;
    double v;
    int is_int;
    if (rd_number(r, &v, &is_int)) return -1;
    if (!is_int || v < (double)lo || v > (double)hi) {
        char msg[160];
        snprintf(msg, sizeof msg, "%s: an integer in [%lld, %lld]", what, (long long)lo, (long long)hi);
        return rd_fail(r, at, msg);
    }
    *out = (int64_t)v;
    return 0;
}

/* Skip any value (unknown keys). */
static int rd_skip(rd *r, int depth)
{
    int c = rd_peek(r);
    if (depth > 64) return rd_fail(r, r->s, "nesting at most 64 deep");
    if (c == '"') return rd_string(r);
    if (c == '{' || c == '[') {
        char close = c == '{' ? '}' : ']';
        r->s++;
        if (rd_peek(r) == close) {
            r->s++;
            return 0;
        }
        for (;;) {
            if (c == '{' && (rd_string(r) || rd_char(r, ':', "':'"))) return -1;
            if (rd_skip(r, depth + 1)) return -1;
            int d = rd_peek(r);
            r->s++;
            if (d == close) return 0;
            if (d != ',') return rd_fail(r, r->s - 1, "',' or the end of the list");
        }
    }
    static const char *words[] = {"true", "false", "null"};
    for (int k = 0; k < 3; k++) {
        size_t l = strlen(words[k]);
        if ((size_t)(r->end - r->s) >= l && !memcmp(r->s, words[k], l)) {
            r->s += l;
            return 0;
        }
    }
    double v;
    int is_int;
    return rd_number(r, &v, &is_int);
}

/* Iterate an object: calls field(r, key, ctx) for each key with the value next. */
static int rd_object(rd *r, int (*field)(rd *, const char *, void *), void *ctx, const char *what)
{
    if (rd_char(r, '{', what)) return -1;
    if (rd_peek(r) == '}') {
        r->s++;
        return 0;
    }
    char key[64];
    for (;;) {
        if (rd_string(r)) return -1;
        snprintf(key, sizeof key, "%s", r->str);
        if (rd_char(r, ':', "':' after a key") || field(r, key, ctx)) return -1;
        int d = rd_peek(r);
        if (d == '}') {
            r->s++;
            return 0;
        }
        if (d != ',') return rd_fail(r, r->s, "',' or '}'");
        r->s++;
    }
}

/* Iterate an array: calls item(r, index, ctx) for each element. */
static int rd_array(rd *r, int (*item)(rd *, int, void *), void *ctx, const char *what)
{
    if (rd_char(r, '[', what)) return -1;
    if (rd_peek(r) == ']') {
        r->s++;
        return 0;
    }
    for (int i = 0;; i++) {
        if (item(r, i, ctx)) return -1;
        int d = rd_peek(r);
        if (d == ']') {
            r->s++;
            return 0;
        }
        if (d != ',') return rd_fail(r, r->s, "',' or ']'");
        r->s++;
    }
}

static int name_index(const char *s, const char *(*namer)(int), int n)
{
    for (int i = 0; i < n; i++)
        if (!strcmp(s, namer(i))) return i;
    return -1;
}
static const char *kind_namer(int i) { return dm_op_kind_name((dm_op_kind)i); }
static const char *stream_namer(int i) { return dm_stream_name((dm_stream)i); }
static const char *algo_namer(int i) { return dm_ns_algo_name((dm_ns_algo)i); }
static const char *dtype_namer(int i) { return dm_dtype_name((dm_dtype)i); }
static const char *payload_namer(int i) { return dm_payload_name((dm_payload)i); }
static const char *kkind_namer(int i) { return dm_kern_kind_name((dm_kern_kind)i); }
static const char *kop_namer(int i) { return dm_kern_op_name((dm_kern_op)i); }

static int rd_enum(rd *r, const char *(*namer)(int), int n, const char *what, int *out)
{
    rd_ws(r);
    const char *at = r->s;
    if (rd_string(r)) return -1;
    int i = name_index(r->str, namer, n);
    if (i < 0) {
        return dm_err_set(r->err, "%s:%d:%d: expected a known %s, found \"%s\"", r->file, r->line, rd_col(r, at), what,
                          r->str);
    }
    *out = i;
    return 0;
}

/* integer arrays (deps, params, group ranks) into a growable buffer */
typedef struct ibuf {
    int64_t *v;
    int n, cap;
    int64_t lo, hi;
    const char *what;
} ibuf;

static int ibuf_item(rd *r, int i, void *ctx)
{
    ibuf *b = ctx;
    (void)i;
    if (b->n == b->cap) {
        int cap = b->cap ? 2 * b->cap : 16;
        int64_t *nv = dm_realloc(b->v, (size_t)cap * sizeof *nv, r->err);
        if (!nv) return -1;
        b->v = nv;
        b->cap = cap;
    }
    return rd_int(r, b->lo, b->hi, b->what, &b->v[b->n++]);
}

typedef struct load_ctx {
    dm_program *p;
    int have_format;
    int64_t nranks, gpn, tokens, ncolls, seq_len, causal_tile, layer_passes;
    char *model, *strategy, *cluster, *options, *ns_coeffs;
    int rank;            /* rank being read */
    int ranks_seen, ranks_line, ranks_col;
    int nranks_line, nranks_col, ncolls_line, ncolls_col;
    int *group_pos;      /* per group read: line, column (for the duplicate check) */
    int group_pos_cap;
    /* current op */
    dm_op op;
    int have_id, have_kind, have_stream, have_iters, have_payload, have_staged;
    unsigned char *unstated; /* per op of the current rank: 1 when its payload is not stated */
    int unstated_cap;
    int64_t n_coll_ops;  /* collective ops read (bounds n_colls) */
    int64_t id;
    int index;
    ibuf deps, params;
    int *deps32;
    int deps32_cap;
} load_ctx;

static int op_field(rd *r, const char *key, void *vctx)
{
    load_ctx *c = vctx;
    int64_t v;
    int e = 0;
    rd_ws(r);
    const char *at = r->s;
    if (!strcmp(key, "id")) {
        if (rd_int(r, 0, INT32_MAX, "id", &c->id)) return -1;
        if (c->id != c->index) {
            char msg[96];
            snprintf(msg, sizeof msg, "id %d (ops are listed in id order)", c->index);
            return rd_fail(r, at, msg);
        }
        c->have_id = 1;
    } else if (!strcmp(key, "kind")) {
        if (rd_enum(r, kind_namer, DM_OP__COUNT, "kind", &e)) return -1;
        c->op.kind = (dm_op_kind)e;
        c->have_kind = 1;
    } else if (!strcmp(key, "stream")) {
        if (rd_enum(r, stream_namer, DM_STREAM__COUNT, "stream", &e)) return -1;
        c->op.stream = (dm_stream)e;
        c->have_stream = 1;
    } else if (!strcmp(key, "algo")) {
        if (rd_enum(r, algo_namer, 2, "algo", &e)) return -1;
        c->op.algo = (dm_ns_algo)e;
    } else if (!strcmp(key, "dtype")) {
        if (rd_enum(r, dtype_namer, 3, "dtype", &e)) return -1;
        c->op.dtype = (dm_dtype)e;
    } else if (!strcmp(key, "payload")) {
        if (rd_enum(r, payload_namer, 4, "payload", &e)) return -1;
        c->op.payload = (dm_payload)e;
        c->have_payload = 1;
    } else if (!strcmp(key, "iters")) {
        if (rd_int(r, 0, 64, key, &v)) return -1;
        c->op.iters = (int)v;
        c->have_iters = 1;
    } else if (!strcmp(key, "layer") || !strcmp(key, "coll") || !strcmp(key, "group") || !strcmp(key, "root") ||
               !strcmp(key, "batch")) {
        /* a layer no model has is refused here (the readers' per-layer tables stay bounded) */
        if (rd_int(r, key[0] == 'b' ? 1 : -1, key[0] == 'l' ? DM_MODEL_MAX_LAYERS - 1 : INT32_MAX, key, &v)) return -1;
        if (key[0] == 'l') c->op.layer = (int)v;
        else if (key[0] == 'c') c->op.coll = (int)v;
        else if (key[0] == 'g') c->op.group = (int)v;
        else if (key[0] == 'r') c->op.root = (int)v;
        else c->op.batch = (int)v;
    } else if (!strcmp(key, "tall") || !strcmp(key, "stage")) {
        if (rd_int(r, 0, INT32_MAX, key, &v)) return -1;
        if (key[1] == 'a') c->op.tall = (int)v;
        else c->op.stage = (int)v;
    } else if (!strcmp(key, "publish")) {
        if (rd_int(r, 0, 1, key, &v)) return -1;
        c->op.publish = (unsigned)v;
    } else if (!strcmp(key, "staged")) {
        if (rd_int(r, 0, 1, key, &v)) return -1;
        c->op.staged = (int)v;
        c->have_staged = 1;
    } else if (!strcmp(key, "launch")) {
        if (rd_string(r)) return -1;
        if (strcmp(r->str, "eager") && strcmp(r->str, "graph")) return rd_fail(r, at, "launch \"eager\" or \"graph\"");
        c->op.eager = !strcmp(r->str, "eager");
    } else if (!strcmp(key, "part") || !strcmp(key, "parts")) {
        if (rd_int(r, 0, 1 << 20, key, &v)) return -1;
        if (!strcmp(key, "part")) c->op.part = (int)v;
        else c->op.parts = (int)v;
    } else if (!strcmp(key, "m") || !strcmp(key, "n")) {
        if (rd_int(r, 0, INT64_MAX, key, &v)) return -1;
        if (key[0] == 'm') c->op.m = v;
        else c->op.n = v;
    } else if (!strcmp(key, "bytes") || !strcmp(key, "flops")) {
        double d;
        int is_int;
        if (rd_number(r, &d, &is_int)) return -1;
        if (!(d >= 0)) return rd_fail(r, at, "a non-negative number");
        if (key[0] == 'b') c->op.bytes = d;
        else c->op.flops = d;
    } else if (!strcmp(key, "deps")) {
        c->deps.n = 0;
        c->deps.lo = 0;
        c->deps.hi = INT32_MAX;
        c->deps.what = "a dependency (op id)";
        return rd_array(r, ibuf_item, &c->deps, "deps, an array of op ids");
    } else if (!strcmp(key, "params")) {
        c->params.n = 0;
        c->params.lo = 0;
        c->params.hi = DM_MODEL_MAX_COUNT - 1; /* a model's matrices: the per-id tables stay bounded */
        c->params.what = "a parameter id";
        return rd_array(r, ibuf_item, &c->params, "params, an array of ids");
    } else if (!strcmp(key, "work")) {
        /* the works come before the ranks: an index past them names nothing */
        if (rd_int(r, 0, (int64_t)c->p->n_works - 1, "a work index (works are listed before the ranks)", &v)) return -1;
        c->op.work = (int)v;
    } else {
        return rd_skip(r, 0);
    }
    return 0;
}

static int op_item(rd *r, int i, void *vctx)
{
    load_ctx *c = vctx;
    c->index = i;
    c->op = dm_op_init(DM_OP_WAIT, DM_STREAM_COMPUTE);
    c->have_id = c->have_kind = c->have_stream = c->have_iters = c->have_payload = c->have_staged = 0;
    c->deps.n = c->params.n = 0;
    rd_ws(r);
    int line = r->line, col = rd_col(r, r->s);
    if (rd_object(r, op_field, c, "an op object")) return -1;
    if (!c->have_id || !c->have_kind || !c->have_stream)
        return dm_err_set(r->err, "%s:%d:%d: expected fields id, kind and stream in an op", r->file, line, col);
    if (!c->have_iters) c->op.iters = c->op.kind == DM_OP_NS ? DM_NS_ITERS_DEFAULT : 0;
    if (!c->have_payload) c->op.payload = dm_op_payload_default(c->op.kind);
    if (!c->have_staged) c->op.staged = dm_op_staged_default(c->op.kind);
    if (dm_op_is_collective(c->op.kind)) c->n_coll_ops++;
    int at = c->p->ranks[c->rank].n_ops;
    if (at >= c->unstated_cap) {
        int cap = c->unstated_cap ? 2 * c->unstated_cap : 256;
        unsigned char *nu = dm_realloc(c->unstated, (size_t)cap, r->err);
        if (!nu) return -1;
        c->unstated = nu;
        c->unstated_cap = cap;
    }
    c->unstated[at] = !c->have_payload;
    if (c->deps.n > c->deps32_cap) {
        int *nd = dm_realloc(c->deps32, (size_t)c->deps.n * sizeof *nd, r->err);
        if (!nd) return -1;
        c->deps32 = nd;
        c->deps32_cap = c->deps.n;
    }
    for (int k = 0; k < c->deps.n; k++) c->deps32[k] = (int)c->deps.v[k];
    return dm_program_add_op(c->p, c->rank, &c->op, c->deps32, c->deps.n, c->params.v, c->params.n, r->err) < 0 ? -1 : 0;
}

/* ---- works: arrays of kernel objects ---- */
typedef struct kernel_ctx {
    dm_kernel k;
    int have_kind, have_op;
    dm_kernel *v; /* the work being read */
    int n, cap;
} kernel_ctx;

static int kernel_field(rd *r, const char *key, void *vctx)
{
    kernel_ctx *c = vctx;
    int e = 0;
    int64_t v;
    rd_ws(r);
    const char *at = r->s;
    if (!strcmp(key, "kind")) {
        if (rd_enum(r, kkind_namer, DM_KERN__COUNT, "kernel kind (gemm, bgemm, elem)", &e)) return -1;
        c->k.kind = (dm_kern_kind)e;
        c->have_kind = 1;
    } else if (!strcmp(key, "op")) {
        if (rd_enum(r, kop_namer, DM_KOP__COUNT, "kernel op (fwd, dgrad, wgrad, attn-score, ..., loss, vector, ...)", &e))
            return -1;
        c->k.op = (dm_kern_op)e;
        c->have_op = 1;
    } else if (!strcmp(key, "m") || !strcmp(key, "n") || !strcmp(key, "k") || !strcmp(key, "batch") ||
               !strcmp(key, "count")) {
        int one = !strcmp(key, "batch") || !strcmp(key, "count");
        if (rd_int(r, one ? 1 : 0, (int64_t)1 << 40, key, &v)) return -1;
        if (key[0] == 'm') c->k.m = v;
        else if (key[0] == 'n') c->k.n = v;
        else if (key[0] == 'k') c->k.k = v;
        else if (key[0] == 'b') c->k.batch = v;
        else c->k.count = v;
    } else if (!strcmp(key, "param")) {
        if (rd_int(r, -1, DM_MODEL_MAX_COUNT - 1, key, &c->k.param)) return -1;
    } else if (!strcmp(key, "slot")) {
        if (rd_int(r, -1, INT32_MAX, key, &v)) return -1;
        c->k.slot = (int)v;
    } else if (!strcmp(key, "flops") || !strcmp(key, "bytes") || !strcmp(key, "elems")) {
        double d;
        int is_int;
        if (rd_number(r, &d, &is_int)) return -1;
        if (!(d >= 0)) return rd_fail(r, at, "a non-negative number");
        if (key[0] == 'f') c->k.flops = d;
        else if (key[0] == 'b') c->k.bytes = d;
        else c->k.elems = d;
    } else {
        return rd_skip(r, 0);
    }
    return 0;
}

static int kernel_item(rd *r, int i, void *vctx)
{
    kernel_ctx *c = vctx;
    (void)i;
    memset(&c->k, 0, sizeof c->k);
    c->k.batch = c->k.count = 1;
    c->k.param = -1;
    c->k.slot = -1;
    c->have_kind = c->have_op = 0;
    rd_ws(r);
    int line = r->line, col = rd_col(r, r->s);
    if (rd_object(r, kernel_field, c, "a kernel object")) return -1;
    if (!c->have_kind || !c->have_op)
        return dm_err_set(r->err, "%s:%d:%d: expected fields kind and op in a kernel", r->file, line, col);
    if (c->n == c->cap) {
        int cap = c->cap ? 2 * c->cap : 32;
        dm_kernel *nv = dm_realloc(c->v, (size_t)cap * sizeof *nv, r->err);
        if (!nv) return -1;
        c->v = nv;
        c->cap = cap;
    }
    c->v[c->n++] = c->k;
    return 0;
}

static int work_item(rd *r, int i, void *vctx)
{
    load_ctx *c = vctx;
    kernel_ctx kc;
    (void)i;
    memset(&kc, 0, sizeof kc);
    int rc = rd_array(r, kernel_item, &kc, "a work: an array of kernel objects");
    if (rc == 0 && dm_program_add_work(c->p, kc.v, kc.n, r->err) < 0) rc = -1;
    free(kc.v);
    return rc;
}

static int rank_field(rd *r, const char *key, void *vctx)
{
    load_ctx *c = vctx;
    if (!strcmp(key, "rank")) {
        int64_t v;
        rd_ws(r);
        const char *at = r->s;
        if (rd_int(r, 0, INT32_MAX, "rank", &v)) return -1;
        if (v != c->rank) {
            char msg[64];
            snprintf(msg, sizeof msg, "rank %d (ranks are listed in order)", c->rank);
            return rd_fail(r, at, msg);
        }
        return 0;
    }
    if (!strcmp(key, "ops")) return rd_array(r, op_item, c, "ops, an array of op objects");
    return rd_skip(r, 0);
}

static int rank_item(rd *r, int i, void *vctx)
{
    load_ctx *c = vctx;
    rd_ws(r);
    if (i >= c->nranks) {
        char msg[96];
        snprintf(msg, sizeof msg, "at most %lld rank entries (nranks)", (long long)c->nranks);
        return rd_fail(r, r->s, msg);
    }
    c->rank = i;
    c->ranks_seen = i + 1;
    if (rd_object(r, rank_field, c, "a rank object")) return -1;
    /* payloads the file does not state: what the rank's list implies */
    const dm_rank_prog *rp = &c->p->ranks[i];
    for (int k = 0; k < rp->n_ops; k++)
        if (c->unstated[k] && rp->ops[k].payload != rp->ops[k].implied) {
            if (rp->share != i && dm_program_own_rank(c->p, i, r->err)) return -1; /* not the owner's op */
            rp->ops[k].payload = rp->ops[k].implied;
        }
    return 0;
}

static int cmp_i64(const void *a, const void *b);

static int group_item(rd *r, int i, void *vctx)
{
    load_ctx *c = vctx;
    ibuf b = {NULL, 0, 0, 0, c->nranks - 1, "a group rank"};
    rd_ws(r);
    const char *at = r->s;
    int line = r->line, col = rd_col(r, at);
    if (rd_array(r, ibuf_item, &b, "a group: an array of ranks")) {
        free(b.v);
        return -1;
    }
    int *rk = b.n ? dm_malloc((size_t)b.n * sizeof *rk, r->err) : NULL;
    int gi = -1;
    if (!b.n) {
        free(b.v);
        return dm_err_set(r->err, "%s:%d:%d: expected a non-empty group", r->file, line, col);
    }
    if (rk) {
        for (int k = 0; k < b.n; k++) rk[k] = (int)b.v[k];
        if (b.n > 1) qsort(b.v, (size_t)b.n, sizeof *b.v, cmp_i64);
        for (int k = 1; k < b.n; k++)
            if (b.v[k] == b.v[k - 1]) {
                int dup = (int)b.v[k];
                free(rk);
                free(b.v);
                return dm_err_set(r->err, "%s:%d:%d: expected distinct ranks in a group (rank %d repeats)", r->file, line,
                                  col, dup);
            }
        gi = dm_program_add_group(c->p, rk, b.n, r->err);
    }
    free(rk);
    free(b.v);
    if (gi < 0) return -1;
    if (i >= c->group_pos_cap) {
        int cap = c->group_pos_cap ? 2 * c->group_pos_cap : 64;
        int *np = dm_realloc(c->group_pos, (size_t)cap * 2 * sizeof *np, r->err);
        if (!np) return -1;
        c->group_pos = np;
        c->group_pos_cap = cap;
    }
    c->group_pos[2 * i] = line, c->group_pos[2 * i + 1] = col;
    return 0;
}

static int cmp_i64(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

/* Groups equal as sorted rank lists, by index (qsort_r context: the program). */
static int cmp_group(const void *a, const void *b, void *ctx)
{
    const dm_program *p = ctx;
    const dm_group *x = &p->groups[*(const int *)a], *y = &p->groups[*(const int *)b];
    if (x->n != y->n) return (x->n > y->n) - (x->n < y->n);
    int c = memcmp(x->ranks, y->ranks, (size_t)x->n * sizeof *x->ranks);
    if (c) return c;
    return (*(const int *)a > *(const int *)b) - (*(const int *)a < *(const int *)b);
}

/* After the groups: none repeats another (sorting, not pairwise: a file may hold many). */
static int groups_distinct(rd *r, load_ctx *c)
{
    int n = c->p->n_groups;
    if (n < 2) return 0;
    int *ix = dm_malloc((size_t)n * sizeof *ix, r->err);
    if (!ix) return -1;
    for (int g = 0; g < n; g++) ix[g] = g;
    qsort_r(ix, (size_t)n, sizeof *ix, cmp_group, c->p);
    int rc = 0;
    for (int k = 1; k < n && rc == 0; k++) {
        const dm_group *x = &c->p->groups[ix[k - 1]], *y = &c->p->groups[ix[k]];
        if (x->n == y->n && !memcmp(x->ranks, y->ranks, (size_t)x->n * sizeof *x->ranks))
            rc = dm_err_set(r->err, "%s:%d:%d: expected distinct groups (this one repeats group %d)", r->file,
                            c->group_pos[2 * ix[k]], c->group_pos[2 * ix[k] + 1], ix[k - 1]);
    }
    free(ix);
    return rc;
}

static int need_header(rd *r, load_ctx *c, const char *at)
{
    if (!c->have_format) return rd_fail(r, at, "\"format\": \"dmuon-program-1\" before the groups and ranks");
    if (c->p) return 0;
    if (c->nranks < 1 || c->gpn < 1) return rd_fail(r, at, "nranks and gpus_per_node before the groups and ranks");
    /* a rank entry takes at least 3 bytes ("{}," ): refuse a count the file cannot hold before
     * the ranks are allocated */
    if (c->nranks > (int64_t)(r->end - r->s) / 3 + 1)
        return dm_err_set(r->err, "%s:%d:%d: expected at most %lld ranks: nranks is %lld but %lld bytes are left "
                          "for their entries", r->file, c->nranks_line, c->nranks_col,
                          (long long)((r->end - r->s) / 3 + 1), (long long)c->nranks, (long long)(r->end - r->s));
    c->p = dm_program_new((int)c->nranks, (int)c->gpn, c->model, c->strategy, c->cluster, c->options, c->tokens, r->err);
    if (!c->p) return -1;
    c->p->n_colls = (int)c->ncolls;
    c->p->seq_len = c->seq_len;
    c->p->causal_tile = c->causal_tile;
    c->p->layer_passes = (int)c->layer_passes;
    if (c->ns_coeffs) c->p->ns_coeffs = c->ns_coeffs, c->ns_coeffs = NULL;
    return 0;
}

static int top_field(rd *r, const char *key, void *vctx)
{
    load_ctx *c = vctx;
    rd_ws(r);
    const char *at = r->s;
    char **str = !strcmp(key, "model") ? &c->model : !strcmp(key, "strategy") ? &c->strategy :
                 !strcmp(key, "cluster") ? &c->cluster : !strcmp(key, "options") ? &c->options :
                 !strcmp(key, "ns_coeffs") ? &c->ns_coeffs : NULL;
    if (str || !strcmp(key, "format")) {
        if (c->p) return rd_fail(r, at, "header fields before the groups and ranks");
        if (rd_string(r)) return -1;
        if (!str) {
            if (strcmp(r->str, "dmuon-program-1")) return rd_fail(r, at, "format \"dmuon-program-1\"");
            c->have_format = 1;
            return 0;
        }
        free(*str);
        return (*str = dm_strdup(r->str, r->err)) ? 0 : -1;
    }
    int64_t *num = !strcmp(key, "nranks") ? &c->nranks : !strcmp(key, "gpus_per_node") ? &c->gpn :
                   !strcmp(key, "tokens") ? &c->tokens : !strcmp(key, "n_colls") ? &c->ncolls :
                   !strcmp(key, "seq_len") ? &c->seq_len : !strcmp(key, "causal_tile") ? &c->causal_tile :
                   !strcmp(key, "layer_passes") ? &c->layer_passes : NULL;
    if (num) {
        if (c->p) return rd_fail(r, at, "header fields before the groups and ranks");
        int64_t hi = num == &c->tokens || num == &c->seq_len ? INT64_MAX : num == &c->ncolls ? INT32_MAX :
                     num == &c->layer_passes ? 1 : 1 << 24;
        if (num == &c->nranks) c->nranks_line = r->line, c->nranks_col = rd_col(r, at);
        if (num == &c->ncolls) c->ncolls_line = r->line, c->ncolls_col = rd_col(r, at);
        return rd_int(r, num == &c->tokens || num == &c->ncolls || num == &c->seq_len || num == &c->causal_tile ||
                                 num == &c->layer_passes ? 0 : 1,
                      hi, key, num);
    }
    if (!strcmp(key, "groups"))
        return need_header(r, c, at) || rd_array(r, group_item, c, "groups, an array of rank arrays") ||
               groups_distinct(r, c);
    if (!strcmp(key, "works"))
        return need_header(r, c, at) || rd_array(r, work_item, c, "works, an array of kernel arrays");
    if (!strcmp(key, "ranks")) {
        c->ranks_line = r->line;
        c->ranks_col = rd_col(r, at);
        if (need_header(r, c, at) || rd_array(r, rank_item, c, "ranks, an array of rank objects")) return -1;
        if (c->ranks_seen != c->nranks)
            return dm_err_set(r->err, "%s:%d:%d: expected %lld rank entries, found %d", r->file, c->ranks_line,
                              c->ranks_col, (long long)c->nranks, c->ranks_seen);
        return 0;
    }
    return rd_skip(r, 0);
}

int dm_program_load(const char *path, dm_program **out, dm_err *err)
{
    FILE *f = fopen(path, "r");
    char *buf = NULL;
    size_t len = 0, cap = 0;
    int rc = -1;
    load_ctx c;
    memset(&c, 0, sizeof c);
    *out = NULL;
    if (!f) return dm_err_set(err, "%s: cannot open: %s", path, strerror(errno));
    for (;;) { /* read it all (works for pipes too), up to the cap */
        if (len > DM_PROGRAM_MAX_BYTES) {
            dm_err_set(err, "%s: larger than %.0f GiB: not a program file", path, DM_PROGRAM_MAX_BYTES / 1073741824.0);
            goto done;
        }
        if (len > 0) { /* a program is a JSON object: do not read a device or binary to its end */
            size_t k = 0;
            while (k < len && (buf[k] == ' ' || buf[k] == '\t' || buf[k] == '\n' || buf[k] == '\r')) k++;
            if (k < len && buf[k] != '{') break;
        }
        if (len + 65536 + 1 > cap) {
            size_t nc = cap ? 2 * cap : 1 << 20;
            char *nb = dm_realloc(buf, nc, err);
            if (!nb) goto done;
            buf = nb;
            cap = nc;
        }
        size_t got = fread(buf + len, 1, cap - len - 1, f);
        len += got;
        if (got == 0) break;
    }
    if (ferror(f)) {
        dm_err_set(err, "%s: read error", path);
        goto done;
    }
    buf[len] = 0;
    rd r = {path, buf, buf + len, buf, 1, err, NULL, 0};
    rc = rd_object(&r, top_field, &c, "a program object");
    if (rc == 0 && rd_peek(&r) != -1) rc = rd_fail(&r, r.s, "the end of the file after the program");
    if (rc == 0 && !c.p) rc = dm_err_set(err, "%s:1:1: expected groups and ranks", path);
    if (rc == 0 && c.ranks_seen != c.nranks)
        rc = dm_err_set(err, "%s:1:1: expected %lld rank entries, found %d", path, (long long)c.nranks, c.ranks_seen);
    /* every collective id appears on some rank: more ids than collective ops cannot be */
    if (rc == 0 && c.ncolls > c.n_coll_ops)
        rc = dm_err_set(err, "%s:%d:%d: expected n_colls at most %lld, the collective ops in the file (found %lld)",
                        path, c.ncolls_line, c.ncolls_col, (long long)c.n_coll_ops, (long long)c.ncolls);
    free(r.str);
done:
    fclose(f);
    free(buf);
    free(c.model);
    free(c.strategy);
    free(c.cluster);
    free(c.options);
    free(c.ns_coeffs);
    free(c.deps.v);
    free(c.params.v);
    free(c.deps32);
    free(c.unstated);
    free(c.group_pos);
    if (rc) dm_program_free(c.p);
    else *out = c.p;
    return rc;
}

/* ---- validation ---------------------------------------------------------------------------- */

static int in_group(const dm_group *g, int r)
{
    int lo = 0, hi = g->n - 1;
    while (lo <= hi) {
        int mid = (lo + hi) / 2;
        if (g->ranks[mid] == r) return 1;
        if (g->ranks[mid] < r) lo = mid + 1;
        else hi = mid - 1;
    }
    return 0;
}

typedef struct coll_info {
    int count;       /* occurrences */
    int first_rank, first_op;
    int pos;         /* position within its group's sequence on first_rank */
    int last_rank;
    int node;        /* global node of the merged collective */
} coll_info;

/* Global order check: every op is a node, the ops of one collective are one node; edges are
 * dependencies and stream order. A cycle means the ranks would wait on each other forever. */
static int check_deadlock(const dm_program *p, const coll_info *ci, const int *base, int64_t total, dm_err *err)
{
    int rc = -1;
    int *rep = NULL, *indeg = NULL, *start = NULL, *adj = NULL, *queue = NULL, *fill = NULL;
    int64_t n_edges = 0;
    if (!(rep = dm_malloc((size_t)total * sizeof *rep, err))) goto done;
    /* the owners' lists alone: a follower runs its owner's ops in the same order, and its
     * collectives are the same nodes, so a cycle through it is one through its owner's list */
    for (int r = 0; r < p->nranks; r++)
        for (int i = 0; base[r] >= 0 && i < p->ranks[r].n_ops; i++) {
            const dm_op *o = &p->ranks[r].ops[i];
            rep[base[r] + i] = o->coll >= 0 ? ci[o->coll].node : base[r] + i;
            n_edges += o->n_deps + 1;
        }
    if (!(indeg = dm_calloc((size_t)total, sizeof *indeg, err)) ||
        !(start = dm_calloc((size_t)total + 1, sizeof *start, err)) ||
        !(adj = dm_malloc((size_t)(n_edges ? n_edges : 1) * sizeof *adj, err)) ||
        !(fill = dm_calloc((size_t)total, sizeof *fill, err)) ||
        !(queue = dm_malloc((size_t)total * sizeof *queue, err)))
        goto done;
    for (int pass = 0; pass < 2; pass++) {
        for (int r = 0; r < p->nranks; r++) {
            if (base[r] < 0) continue; /* a follower */
            int last[DM_STREAM__COUNT];
            for (int s = 0; s < DM_STREAM__COUNT; s++) last[s] = -1;
            for (int i = 0; i < p->ranks[r].n_ops; i++) {
                const dm_op *o = &p->ranks[r].ops[i];
                int v = rep[base[r] + i];
                for (int d = -1; d < o->n_deps; d++) {
                    int u = d < 0 ? last[o->stream] : o->deps[d];
                    if (u < 0) continue;
                    u = rep[base[r] + u];
                    if (pass == 0) {
                        start[u + 1]++;
                        indeg[v]++;
                    } else {
                        adj[start[u] + fill[u]++] = v;
                    }
                }
                last[o->stream] = i;
            }
        }
        if (pass == 0)
            for (int64_t k = 0; k < total; k++) start[k + 1] += start[k];
    }
    int64_t head = 0, tail = 0, live = 0;
    for (int64_t k = 0; k < total; k++)
        if (rep[k] == k) {
            live++;
            if (!indeg[k]) queue[tail++] = (int)k;
        }
    while (head < tail) {
        int u = queue[head++];
        for (int e = start[u]; e < start[u + 1]; e++)
            if (--indeg[adj[e]] == 0) queue[tail++] = adj[e];
    }
    if (tail == live) {
        rc = 0;
        goto done;
    }
    for (int r = 0; r < p->nranks; r++)
        for (int i = 0; base[r] >= 0 && i < p->ranks[r].n_ops; i++)
            if (indeg[rep[base[r] + i]] > 0) {
                const dm_op *o = &p->ranks[r].ops[i];
                if (o->coll >= 0)
                    dm_err_set(err, "program: rank %d op %d (%s, collective %d) can never start: the ranks' "
                               "collective orders and dependencies form a cycle (deadlock)", r, i,
                               dm_op_kind_name(o->kind), o->coll);
                else
                    dm_err_set(err, "program: rank %d op %d (%s) can never start: the ranks' collective "
                               "orders and dependencies form a cycle (deadlock)", r, i, dm_op_kind_name(o->kind));
                goto done;
            }
    dm_err_set(err, "program: dependency cycle");
done:
    free(rep);
    free(indeg);
    free(start);
    free(adj);
    free(fill);
    free(queue);
    return rc;
}

/* Ranks that share an owner's list (dm_rank_prog.share) run a prefix of it (ops[0 .. their
 * n_ops)): the owner's checks hold for those ops but for membership (the group of every
 * collective in its prefix must hold the follower) and the counts (each collective of the list
 * runs once more per follower whose prefix reaches it). Per owner with followers: where each
 * group first appears in its list (gfirst, n_groups ints) and, by a difference array over the
 * list (over, n_ops + 1 ints), how many followers reach each op. */
static int shared_ranks(const dm_program *p, coll_info *ci, int *gfirst, dm_err *err)
{
    for (int o = 0; o < p->nranks; o++) {
        const dm_rank_prog *op = &p->ranks[o];
        if (op->share != o || op->followers <= 0) continue;
        int *over = dm_calloc((size_t)op->n_ops + 1, sizeof *over, err);
        if (!over) return -1;
        for (int g = 0; g < p->n_groups; g++) gfirst[g] = INT32_MAX;
        for (int i = 0; i < op->n_ops; i++) {
            const dm_op *x = &op->ops[i];
            if (dm_op_is_collective(x->kind) && gfirst[x->group] == INT32_MAX) gfirst[x->group] = i;
        }
        for (int r = o + 1, left = op->followers; r < p->nranks && left > 0; r++) {
            const dm_rank_prog *fp = &p->ranks[r];
            if (fp->share != o) continue;
            left--;
            int n = fp->n_ops < op->n_ops ? fp->n_ops : op->n_ops;
            over[0]++, over[n]--;
            for (int g = 0; g < p->n_groups; g++)
                if (gfirst[g] < n && !in_group(&p->groups[g], r)) {
                    int i = gfirst[g];
                    free(over);
                    return dm_err_set(err, "program: rank %d op %d (%s): collective %d on rank %d, which is not in its "
                                      "group %d (the list rank %d runs too)", r, i, dm_op_kind_name(op->ops[i].kind),
                                      op->ops[i].coll, r, g, o);
                }
        }
        for (int i = 0, k = 0; i < op->n_ops; i++) {
            k += over[i];
            if (dm_op_is_collective(op->ops[i].kind)) ci[op->ops[i].coll].count += k;
        }
        free(over);
    }
    return 0;
}

int dm_program_validate(const dm_program *p, dm_err *err)
{
    int rc = -1;
    coll_info *ci = NULL;
    int *cnt = NULL, *base = NULL;
    int *gfirst = NULL;
    int64_t total = 0;
    if (!(ci = dm_malloc((size_t)(p->n_colls ? p->n_colls : 1) * sizeof *ci, err)) ||
        !(cnt = dm_malloc((size_t)(p->n_groups ? p->n_groups : 1) * sizeof *cnt, err)) ||
        !(gfirst = dm_malloc((size_t)(p->n_groups ? p->n_groups : 1) * sizeof *gfirst, err)) ||
        !(base = dm_malloc((size_t)p->nranks * sizeof *base, err)))
        goto done;
    for (int c = 0; c < p->n_colls; c++) {
        ci[c].count = 0;
        ci[c].last_rank = -1;
        ci[c].first_rank = -1;
    }
    for (int r = 0; r < p->nranks; r++) {
        const dm_rank_prog *rp = &p->ranks[r];
        if (rp->share != r) { /* a follower runs its owner's list: checked there (shared_ranks) */
            base[r] = -1;
            continue;
        }
        base[r] = (int)total;
        total += p->ranks[r].n_ops;
        memset(cnt, 0, (size_t)(p->n_groups ? p->n_groups : 1) * sizeof *cnt);
        for (int i = 0; i < p->ranks[r].n_ops; i++) {
            const dm_op *o = &p->ranks[r].ops[i];
            if (o->id != i) {
                dm_err_set(err, "program: rank %d op %d: id is %d", r, i, o->id);
                goto done;
            }
            if ((unsigned)o->kind >= DM_OP__COUNT || (unsigned)o->stream >= DM_STREAM__COUNT) {
                dm_err_set(err, "program: rank %d op %d: bad kind or stream", r, i);
                goto done;
            }
            for (int d = 0; d < o->n_deps; d++)
                if (o->deps[d] < 0 || o->deps[d] >= i) {
                    dm_err_set(err, "program: rank %d op %d (%s): dependency on op %d, which is not an earlier "
                               "op of the rank (a dependency cycle)", r, i, dm_op_kind_name(o->kind), o->deps[d]);
                    goto done;
                }
            int is_coll = dm_op_is_collective(o->kind);
            if (is_coll && o->stream == DM_STREAM_COMPUTE_LO) {
                dm_err_set(err, "program: rank %d op %d (%s): a collective on compute-lo (it runs compute ops only)", r, i,
                           dm_op_kind_name(o->kind));
                goto done;
            }
            if (o->work >= 0) {
                /* forward and backward: layer kernels; adamw and muon-update: their update kernels
                 * (one per tensor); no other op has a work */
                int upd = o->kind == DM_OP_ADAMW || o->kind == DM_OP_MUON_UPDATE;
                const char *why = o->work >= p->n_works ? "past the program's works"
                                  : !upd && o->kind != DM_OP_FORWARD && o->kind != DM_OP_BACKWARD
                                      ? "only forward, backward, adamw and muon-update ops have a work"
                                      : NULL;
                dm_kern_op want = o->kind == DM_OP_ADAMW ? DM_KOP_ADAMW : DM_KOP_MUON_UPDATE;
                for (int k = 0; !why && k < p->works[o->work].n; k++) {
                    dm_kern_op kop = p->works[o->work].k[k].op;
                    if (upd && kop != want) why = "an update op's work holds its update kernels only";
                    else if (!upd && (kop == DM_KOP_ADAMW || kop == DM_KOP_MUON_UPDATE))
                        why = "update kernels in a forward or backward work";
                }
                if (why) {
                    dm_err_set(err, "program: rank %d op %d (%s): work %d (%s)", r, i, dm_op_kind_name(o->kind), o->work, why);
                    goto done;
                }
            }
            if (o->kind == DM_OP_NS ? o->iters < 1 || o->iters > 64 : o->iters != 0) {
                dm_err_set(err, "program: rank %d op %d (%s): %d NS iterations (%s)", r, i, dm_op_kind_name(o->kind),
                           o->iters, o->kind == DM_OP_NS ? "1 to 64" : "only ns ops have iterations");
                goto done;
            }
            if (o->kind == DM_OP_NS ? o->tall < 0 || o->tall > o->batch : o->tall != 0) {
                dm_err_set(err, "program: rank %d op %d (%s): %d tall matrices (%s)", r, i, dm_op_kind_name(o->kind),
                           o->tall, o->kind == DM_OP_NS ? "0 to the batch" : "only ns ops have matrices");
                goto done;
            }
            if (o->staged && !is_coll) {
                dm_err_set(err, "program: rank %d op %d (%s): staged (only collectives are staged)", r, i,
                           dm_op_kind_name(o->kind));
                goto done;
            }
            if (o->publish &&
                !((o->kind == DM_OP_BROADCAST || o->kind == DM_OP_ALLGATHER) && o->payload == DM_PAYLOAD_WEIGHTS)) {
                dm_err_set(err, "program: rank %d op %d (%s): publish (only fetches of weights, broadcasts and "
                           "all-gathers, publish)", r, i, dm_op_kind_name(o->kind));
                goto done;
            }
            if (o->eager && o->kind != DM_OP_NS) {
                dm_err_set(err, "program: rank %d op %d (%s): launch eager (only ns ops are launched eagerly)", r, i,
                           dm_op_kind_name(o->kind));
                goto done;
            }
            int gram_ok = o->kind == DM_OP_ALLREDUCE && o->n_params == 1 && o->parts <= 1;
            if (is_coll ? o->payload != DM_PAYLOAD_WEIGHTS && o->payload != DM_PAYLOAD_GRADS &&
                              !(o->payload == DM_PAYLOAD_GRAM && gram_ok)
                        : o->payload != DM_PAYLOAD_NONE) {
                dm_err_set(err, "program: rank %d op %d (%s): payload %s (%s)", r, i, dm_op_kind_name(o->kind),
                           dm_payload_name(o->payload),
                           !is_coll ? "only collectives carry a payload"
                           : o->payload == DM_PAYLOAD_GRAM ? "a gram is the all-reduce of one param, whole"
                                                           : "a collective moves weights, grads or a gram");
                goto done;
            }
            if (o->stage && !(o->kind == DM_OP_NS && o->parts > 1)) {
                dm_err_set(err, "program: rank %d op %d (%s): stage %d (only a split NS op, parts > 1, has stages)", r,
                           i, dm_op_kind_name(o->kind), o->stage);
                goto done;
            }
            if (!is_coll) {
                const char *why = NULL;
                if (o->parts > 1 && o->kind != DM_OP_NS && o->kind != DM_OP_MUON_UPDATE)
                    why = "only a broadcast, a reduce, an all-reduce, a split ns or its muon-update has parts";
                else if (o->parts > 1 ? o->part < 0 || o->part >= o->parts : o->part != 0)
                    why = "expected part in [0, parts) with parts > 1";
                else if (o->parts > 1 && o->kind == DM_OP_NS &&
                         (o->n_params != 1 || o->batch != 1 || o->algo != DM_NS_DIRECT || o->eager ||
                          (o->tall != 1 && o->m != o->n) || o->stage < 0 || o->stage >= 2 * o->iters))
                    why = "a split ns is the direct NS of one matrix stored tall or square, launched as a graph, "
                          "stage 0 to 2 iters - 1";
                else if (o->parts > 1 && o->kind == DM_OP_MUON_UPDATE && o->n_params != 1)
                    why = "a muon-update of a part updates one matrix";
                if (why) {
                    dm_err_set(err, "program: rank %d op %d (%s): part %d of %d, stage %d: %s", r, i,
                               dm_op_kind_name(o->kind), o->part, o->parts, o->stage, why);
                    goto done;
                }
                if (o->coll >= 0 || o->group >= 0) {
                    dm_err_set(err, "program: rank %d op %d (%s) is not a collective but has a collective id", r, i,
                               dm_op_kind_name(o->kind));
                    goto done;
                }
                continue;
            }
            if (o->coll < 0 || o->coll >= p->n_colls || o->group < 0 || o->group >= p->n_groups) {
                dm_err_set(err, "program: rank %d op %d (%s): collective id %d or group %d out of range", r, i,
                           dm_op_kind_name(o->kind), o->coll, o->group);
                goto done;
            }
            const dm_group *g = &p->groups[o->group];
            if (!in_group(g, r)) {
                dm_err_set(err, "program: rank %d op %d (%s): collective %d on rank %d, which is not in its group %d",
                           r, i, dm_op_kind_name(o->kind), o->coll, r, o->group);
                goto done;
            }
            int needs_root = o->kind == DM_OP_BROADCAST || o->kind == DM_OP_REDUCE;
            if (needs_root ? !in_group(g, o->root) : o->root >= 0) {
                dm_err_set(err, "program: rank %d op %d (%s): collective %d: root %d %s", r, i,
                           dm_op_kind_name(o->kind), o->coll, o->root,
                           needs_root ? "is not a member of the group" : "given to a rootless collective");
                goto done;
            }
            int partable = needs_root || o->kind == DM_OP_ALLREDUCE;
            if (o->parts > 1 ? !partable || o->part < 0 || o->part >= o->parts : o->part != 0) {
                dm_err_set(err, "program: rank %d op %d (%s): part %d of %d: %s", r, i, dm_op_kind_name(o->kind),
                           o->part, o->parts,
                           o->parts > 1 && !partable ? "only a broadcast, a reduce or an all-reduce moves a part"
                                                       : "expected part in [0, parts) with parts > 1");
                goto done;
            }
            coll_info *c = &ci[o->coll];
            int pos = cnt[o->group]++;
            if (c->last_rank == r) {
                dm_err_set(err, "program: rank %d op %d: collective %d appears twice on the rank", r, i, o->coll);
                goto done;
            }
            c->last_rank = r;
            if (c->count++ == 0) {
                c->first_rank = r;
                c->first_op = i;
                c->pos = pos;
                c->node = base[r] + i;
                continue;
            }
            const dm_op *f = &p->ranks[c->first_rank].ops[c->first_op];
            if (f->kind != o->kind || f->group != o->group || f->root != o->root || f->bytes != o->bytes ||
                f->payload != o->payload || f->part != o->part || f->parts != o->parts) {
                char po[40] = "", pf[40] = ""; /* parts only where one side has them */
                if (o->parts > 1 || f->parts > 1) {
                    snprintf(po, sizeof po, ", part %d of %d", o->part, o->parts);
                    snprintf(pf, sizeof pf, ", part %d of %d", f->part, f->parts);
                }
                dm_err_set(err, "program: rank %d op %d: collective %d is %s (group %d, root %d, %.0f bytes, %s%s) but "
                           "%s (group %d, root %d, %.0f bytes, %s%s) on rank %d", r, i, o->coll,
                           dm_op_kind_name(o->kind), o->group, o->root, o->bytes, dm_payload_name(o->payload), po,
                           dm_op_kind_name(f->kind), f->group, f->root, f->bytes, dm_payload_name(f->payload), pf,
                           c->first_rank);
                goto done;
            }
            if (c->pos != pos) {
                dm_err_set(err, "program: rank %d op %d: collective %d (%s) is number %d of group %d here but number "
                           "%d on rank %d: members order the group's collectives differently", r, i, o->coll,
                           dm_op_kind_name(o->kind), pos, o->group, c->pos, c->first_rank);
                goto done;
            }
        }
    }
    if (shared_ranks(p, ci, gfirst, err)) goto done;
    for (int k = 0; k < p->n_colls; k++) {
        if (ci[k].count == 0) {
            dm_err_set(err, "program: collective %d appears on no rank", k);
            goto done;
        }
        const dm_op *f = &p->ranks[ci[k].first_rank].ops[ci[k].first_op];
        const dm_group *g = &p->groups[f->group];
        if (ci[k].count == g->n) continue;
        for (int m = 0; m < g->n; m++) { /* name the member that lacks it */
            int r = g->ranks[m], found = 0;
            for (int i = 0; i < p->ranks[r].n_ops && !found; i++) found = p->ranks[r].ops[i].coll == k;
            if (!found) {
                dm_err_set(err, "program: collective %d (%s, group %d) is missing on member rank %d (present on rank %d "
                           "op %d)", k, dm_op_kind_name(f->kind), f->group, r, ci[k].first_rank, ci[k].first_op);
                goto done;
            }
        }
    }
    if (total > INT32_MAX) {
        dm_err_set(err, "program: too many ops (%lld)", (long long)total);
        goto done;
    }
    rc = check_deadlock(p, ci, base, total, err);
done:
    free(ci);
    free(cnt);
    free(gfirst);
    free(base);
    return rc;
}
