/* program_io.c: the step program's JSON form (deterministic writer, positioned reader), its
 * stable hash, and the validator (program.h).
 *
 * Format "dmuon-program-1": an object with format, model, strategy, cluster, options, nranks,
 * gpus_per_node, tokens, n_colls, groups (arrays of ranks) and ranks (one object per rank with
 * its ops). Each op is written on one line with its fields in a fixed order; fields at their
 * default (deps/params empty, coll/group/root/layer -1, bytes/flops/m/n 0, batch 1, algo direct,
 * dtype bf16) are left out, and the reader applies the same defaults. */
#define _GNU_SOURCE
#include "program.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "json.h"

/* ---- writing ------------------------------------------------------------------------------- */

static void write_num(FILE *f, double v) { fprintf(f, "%.17g", v); }

static void write_op(FILE *f, const dm_op *o)
{
    fprintf(f, "{\"id\":%d,\"kind\":\"%s\",\"stream\":\"%s\"", o->id, dm_op_kind_name(o->kind),
            dm_stream_name(o->stream));
    if (o->layer >= 0) fprintf(f, ",\"layer\":%d", o->layer);
    if (o->n_deps) {
        fputs(",\"deps\":[", f);
        for (int i = 0; i < o->n_deps; i++) fprintf(f, "%s%d", i ? "," : "", o->deps[i]);
        fputc(']', f);
    }
    if (o->coll >= 0) fprintf(f, ",\"coll\":%d", o->coll);
    if (o->group >= 0) fprintf(f, ",\"group\":%d", o->group);
    if (o->root >= 0) fprintf(f, ",\"root\":%d", o->root);
    if (o->bytes != 0) {
        fputs(",\"bytes\":", f);
        write_num(f, o->bytes);
    }
    if (o->flops != 0) {
        fputs(",\"flops\":", f);
        write_num(f, o->flops);
    }
    if (o->m) fprintf(f, ",\"m\":%lld", (long long)o->m);
    if (o->n) fprintf(f, ",\"n\":%lld", (long long)o->n);
    if (o->batch != 1) fprintf(f, ",\"batch\":%d", o->batch);
    if (o->algo != DM_NS_DIRECT) fprintf(f, ",\"algo\":\"%s\"", dm_ns_algo_name(o->algo));
    if (o->dtype != DM_DT_BF16) fprintf(f, ",\"dtype\":\"%s\"", dm_dtype_name(o->dtype));
    if (o->n_params) {
        fputs(",\"params\":[", f);
        for (int i = 0; i < o->n_params; i++) fprintf(f, "%s%lld", i ? "," : "", (long long)o->params[i]);
        fputc(']', f);
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
    fprintf(f, ",\n  \"nranks\": %d,\n  \"gpus_per_node\": %d,\n  \"tokens\": %lld,\n  \"n_colls\": %d,\n",
            p->nranks, p->gpus_per_node, (long long)p->tokens, p->n_colls);
    fputs("  \"groups\": [", f);
    for (int g = 0; g < p->n_groups; g++) {
        fputs(g ? ",\n    [" : "\n    [", f);
        for (int i = 0; i < p->groups[g].n; i++) fprintf(f, "%s%d", i ? "," : "", p->groups[g].ranks[i]);
        fputc(']', f);
    }
    fputs(p->n_groups ? "\n  ],\n  \"ranks\": [" : "],\n  \"ranks\": [", f);
    for (int r = 0; r < p->nranks; r++) {
        const dm_rank_prog *rp = &p->ranks[r];
        fprintf(f, "%s    {\"rank\": %d, \"ops\": [", r ? ",\n" : "\n", r);
        for (int i = 0; i < rp->n_ops; i++) {
            fputs(i ? ",\n      " : "\n      ", f);
            write_op(f, &rp->ops[i]);
        }
        fputs(rp->n_ops ? "\n    ]}" : "]}", f);
    }
    fputs("\n  ]\n}\n", f);
    if (ferror(f)) return dm_err_set(err, "program: write error");
    return 0;
}

int dm_program_save(const dm_program *p, const char *path, dm_err *err)
{
    size_t len = strlen(path) + 32;
    char *tmp = dm_malloc(len, err);
    if (!tmp) return -1;
    snprintf(tmp, len, "%s.tmp.%ld", path, (long)getpid());
    FILE *f = fopen(tmp, "w");
    if (!f) {
        dm_err_set(err, "%s: cannot write: %s", tmp, strerror(errno));
        free(tmp);
        return -1;
    }
    int rc = dm_program_write_json(p, f, err);
    if (fclose(f) && rc == 0) rc = dm_err_set(err, "%s: write error: %s", tmp, strerror(errno));
    if (rc == 0 && rename(tmp, path)) rc = dm_err_set(err, "%s: cannot rename into place: %s", path, strerror(errno));
    if (rc) unlink(tmp);
    free(tmp);
    return rc;
}

/* FNV-1a over the canonical JSON, streamed through a cookie FILE (no copy of the text). */
static ssize_t hash_write(void *cookie, const char *buf, size_t size)
{
    uint64_t h = *(uint64_t *)cookie;
    for (size_t i = 0; i < size; i++) {
        h ^= (unsigned char)buf[i];
        h *= UINT64_C(0x100000001b3);
    }
    *(uint64_t *)cookie = h;
    return (ssize_t)size;
}

uint64_t dm_program_hash(const dm_program *p)
{
    uint64_t h = UINT64_C(0xcbf29ce484222325);
    cookie_io_functions_t io = {NULL, hash_write, NULL, NULL};
    FILE *f = fopencookie(&h, "w", io);
    if (!f) return 0;
    setvbuf(f, NULL, _IOFBF, 1 << 16);
    dm_program_write_json(p, f, NULL);
    fclose(f);
    return h;
}

/* ---- reading ------------------------------------------------------------------------------- */

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

static int opt_enum(const jv *o, const char *key, const char *(*namer)(int), int n, const char *file,
                    int *out, dm_err *err)
{
    const char *s = NULL;
    if (jv_opt_str(o, key, file, &s, err)) return -1;
    if (!s) return 0;
    int i = name_index(s, namer, n);
    if (i < 0) {
        const jv *v = jv_get(o, key);
        return dm_err_set(err, "%s:%d:%d: expected a known %s, found \"%s\"", file, v->line, v->col, key, s);
    }
    *out = i;
    return 0;
}

static int read_int_array(const jv *o, const char *key, int64_t lo, int64_t hi, const char *file,
                          int64_t **out, int *n, dm_err *err)
{
    const jv *a = jv_get(o, key);
    *out = NULL;
    *n = 0;
    if (!a) return 0;
    if (a->type != JV_ARRAY)
        return dm_err_set(err, "%s:%d:%d: expected %s to be an array of integers", file, a->line, a->col, key);
    if (!a->n) return 0;
    int64_t *v = dm_malloc((size_t)a->n * sizeof *v, err);
    if (!v) return -1;
    for (int i = 0; i < a->n; i++)
        if (jv_as_int(a->items[i], lo, hi, file, key, &v[i], err)) {
            free(v);
            return -1;
        }
    *out = v;
    *n = a->n;
    return 0;
}

static int read_op(dm_program *p, int rank, int index, const jv *o, const char *file, dm_err *err)
{
    if (o->type != JV_OBJECT) return dm_err_set(err, "%s:%d:%d: expected an op object", file, o->line, o->col);
    int64_t id, v;
    int kind = -1, stream = -1;
    if (jv_req_int(o, "id", 0, INT32_MAX, file, &id, err)) return -1;
    if (id != index) {
        const jv *iv = jv_get(o, "id");
        return dm_err_set(err, "%s:%d:%d: expected id %d (ops are listed in id order)", file, iv->line, iv->col, index);
    }
    if (opt_enum(o, "kind", kind_namer, DM_OP__COUNT, file, &kind, err) ||
        opt_enum(o, "stream", stream_namer, DM_STREAM__COUNT, file, &stream, err))
        return -1;
    if (kind < 0 || stream < 0)
        return dm_err_set(err, "%s:%d:%d: expected fields kind and stream", file, o->line, o->col);
    dm_op op = dm_op_init((dm_op_kind)kind, (dm_stream)stream);
    int algo = DM_NS_DIRECT, dtype = DM_DT_BF16;
    v = -1;
    if (jv_opt_int(o, "layer", -1, INT32_MAX, file, &v, err)) return -1;
    op.layer = (int)v;
    v = -1;
    if (jv_opt_int(o, "coll", -1, INT32_MAX, file, &v, err)) return -1;
    op.coll = (int)v;
    v = -1;
    if (jv_opt_int(o, "group", -1, INT32_MAX, file, &v, err)) return -1;
    op.group = (int)v;
    v = -1;
    if (jv_opt_int(o, "root", -1, INT32_MAX, file, &v, err)) return -1;
    op.root = (int)v;
    if (jv_opt_num(o, "bytes", 0, 1e300, file, &op.bytes, err) ||
        jv_opt_num(o, "flops", 0, 1e300, file, &op.flops, err) ||
        jv_opt_int(o, "m", 0, INT64_MAX, file, &op.m, err) || jv_opt_int(o, "n", 0, INT64_MAX, file, &op.n, err))
        return -1;
    v = 1;
    if (jv_opt_int(o, "batch", 1, INT32_MAX, file, &v, err)) return -1;
    op.batch = (int)v;
    if (opt_enum(o, "algo", algo_namer, 2, file, &algo, err) ||
        opt_enum(o, "dtype", dtype_namer, 3, file, &dtype, err))
        return -1;
    op.algo = (dm_ns_algo)algo;
    op.dtype = (dm_dtype)dtype;
    int64_t *deps64 = NULL, *params = NULL;
    int nd = 0, np = 0, rc = -1;
    int *deps = NULL;
    if (read_int_array(o, "deps", 0, INT32_MAX, file, &deps64, &nd, err) ||
        read_int_array(o, "params", 0, INT64_MAX, file, &params, &np, err))
        goto done;
    if (nd && !(deps = dm_malloc((size_t)nd * sizeof *deps, err))) goto done;
    for (int i = 0; i < nd; i++) deps[i] = (int)deps64[i];
    rc = dm_program_add_op(p, rank, &op, deps, nd, params, np, err) < 0 ? -1 : 0;
done:
    free(deps64);
    free(params);
    free(deps);
    return rc;
}

int dm_program_load(const char *path, dm_program **out, dm_err *err)
{
    jv *doc = jv_parse_file(path, err);
    dm_program *p = NULL;
    if (!doc) return -1;
    const char *fmt, *model = "", *strategy = "", *cluster = "", *options = "";
    int64_t nranks, gpn, tokens = 0, ncolls = 0;
    const jv *groups, *ranks;
    if (doc->type != JV_OBJECT) {
        dm_err_set(err, "%s:%d:%d: expected a program object", path, doc->line, doc->col);
        goto fail;
    }
    if (jv_req_str(doc, "format", path, &fmt, err)) goto fail;
    if (strcmp(fmt, "dmuon-program-1")) {
        const jv *f = jv_get(doc, "format");
        dm_err_set(err, "%s:%d:%d: expected format \"dmuon-program-1\"", path, f->line, f->col);
        goto fail;
    }
    if (jv_opt_str(doc, "model", path, &model, err) || jv_opt_str(doc, "strategy", path, &strategy, err) ||
        jv_opt_str(doc, "cluster", path, &cluster, err) || jv_opt_str(doc, "options", path, &options, err) ||
        jv_req_int(doc, "nranks", 1, 1 << 24, path, &nranks, err) ||
        jv_req_int(doc, "gpus_per_node", 1, 1 << 24, path, &gpn, err) ||
        jv_opt_int(doc, "tokens", 0, INT64_MAX, path, &tokens, err) ||
        jv_opt_int(doc, "n_colls", 0, INT32_MAX, path, &ncolls, err) ||
        jv_req(doc, "groups", JV_ARRAY, path, &groups, err) || jv_req(doc, "ranks", JV_ARRAY, path, &ranks, err))
        goto fail;
    if (!(p = dm_program_new((int)nranks, (int)gpn, model, strategy, cluster, options, tokens, err))) goto fail;
    p->n_colls = (int)ncolls;
    for (int g = 0; g < groups->n; g++) {
        const jv *a = groups->items[g];
        if (a->type != JV_ARRAY || !a->n) {
            dm_err_set(err, "%s:%d:%d: expected a group: a non-empty array of ranks", path, a->line, a->col);
            goto fail;
        }
        int *rk = dm_malloc((size_t)a->n * sizeof *rk, err);
        if (!rk) goto fail;
        for (int i = 0; i < a->n; i++) {
            int64_t v;
            if (jv_as_int(a->items[i], 0, nranks - 1, path, "group rank", &v, err)) {
                free(rk);
                goto fail;
            }
            rk[i] = (int)v;
        }
        int gi = dm_program_group(p, rk, a->n, err);
        free(rk);
        if (gi < 0) goto fail;
        if (gi != g) {
            dm_err_set(err, "%s:%d:%d: expected distinct groups (this one repeats group %d)", path, a->line, a->col, gi);
            goto fail;
        }
    }
    if (ranks->n != nranks) {
        dm_err_set(err, "%s:%d:%d: expected %lld rank entries, found %d", path, ranks->line, ranks->col,
                   (long long)nranks, ranks->n);
        goto fail;
    }
    for (int r = 0; r < ranks->n; r++) {
        const jv *ro = ranks->items[r], *ops;
        int64_t rv;
        if (ro->type != JV_OBJECT) {
            dm_err_set(err, "%s:%d:%d: expected a rank object", path, ro->line, ro->col);
            goto fail;
        }
        if (jv_req_int(ro, "rank", r, r, path, &rv, err) || jv_req(ro, "ops", JV_ARRAY, path, &ops, err)) goto fail;
        for (int i = 0; i < ops->n; i++)
            if (read_op(p, r, i, ops->items[i], path, err)) goto fail;
    }
    jv_free(doc);
    *out = p;
    return 0;
fail:
    jv_free(doc);
    dm_program_free(p);
    return -1;
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
    for (int r = 0; r < p->nranks; r++)
        for (int i = 0; i < p->ranks[r].n_ops; i++) {
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
        for (int i = 0; i < p->ranks[r].n_ops; i++)
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

int dm_program_validate(const dm_program *p, dm_err *err)
{
    int rc = -1;
    coll_info *ci = NULL;
    int *cnt = NULL, *base = NULL;
    int64_t total = 0;
    if (!(ci = dm_malloc((size_t)(p->n_colls ? p->n_colls : 1) * sizeof *ci, err)) ||
        !(cnt = dm_malloc((size_t)(p->n_groups ? p->n_groups : 1) * sizeof *cnt, err)) ||
        !(base = dm_malloc((size_t)p->nranks * sizeof *base, err)))
        goto done;
    for (int c = 0; c < p->n_colls; c++) {
        ci[c].count = 0;
        ci[c].last_rank = -1;
        ci[c].first_rank = -1;
    }
    for (int r = 0; r < p->nranks; r++) {
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
            if (!is_coll) {
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
            if (f->kind != o->kind || f->group != o->group || f->root != o->root || f->bytes != o->bytes) {
                dm_err_set(err, "program: rank %d op %d: collective %d is %s (group %d, root %d, %.0f bytes) but "
                           "%s (group %d, root %d, %.0f bytes) on rank %d", r, i, o->coll, dm_op_kind_name(o->kind),
                           o->group, o->root, o->bytes, dm_op_kind_name(f->kind), f->group, f->root, f->bytes,
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
    free(base);
    return rc;
}
