/* program.c: building and freeing step programs (program.h); I/O lives in program_io.c. */
#include "program.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "json.h" /* json_write_string: the header strings hashed as written */

static char *dup_or_empty(const char *s, dm_err *err) { return dm_strdup(s ? s : "", err); }

dm_program *dm_program_new(int nranks, int gpus_per_node, const char *model, const char *strategy,
                           const char *cluster, const char *options, int64_t tokens, dm_err *err)
{
    if (nranks < 1 || gpus_per_node < 1) {
        dm_err_set(err, "program: expected at least one rank and one GPU per node");
        return NULL;
    }
    dm_program *p = dm_calloc(1, sizeof *p, err);
    if (!p) return NULL;
    p->nranks = nranks;
    p->gpus_per_node = gpus_per_node;
    p->tokens = tokens;
    if (!(p->model = dup_or_empty(model, err)) || !(p->strategy = dup_or_empty(strategy, err)) ||
        !(p->cluster = dup_or_empty(cluster, err)) || !(p->options = dup_or_empty(options, err)) ||
        !(p->ranks = dm_calloc((size_t)nranks, sizeof *p->ranks, err))) {
        dm_program_free(p);
        return NULL;
    }
    p->ranks[0].followers = nranks - 1; /* every rank starts on rank 0's (empty) list */
    for (int r = 0; r < nranks; r++) p->ranks[r].prod_lo = INT64_MAX, p->ranks[r].prod_hi = INT64_MIN;
    return p;
}

/* A block of a rank's arena (dm_rank_prog.arena): the newest first. */
struct dm_arena_blk {
    struct dm_arena_blk *next;
    size_t used, cap; /* bytes of data[] */
    int64_t data[];   /* 8-byte aligned: int64 params and int deps alike */
};

#define ARENA_BLOCK ((size_t)64 << 10)

/* Slab blocks of the largest size that freed programs left, kept for the next program to take
 * (at most SLAB_KEEP, 1 GiB): --balance auto builds its candidates one after another, and memory
 * taken back costs neither page faults nor the kernel's clearing of fresh pages. The library is
 * single-threaded (dmuon scale runs its points in processes). */
#define SLAB_BLOCK ((size_t)32 << 20)
#define SLAB_KEEP 32
static struct dm_arena_blk *slab_kept;
static int n_slab_kept;

static void slab_release(struct dm_arena_blk *b)
{
    for (struct dm_arena_blk *nx; b; b = nx) {
        nx = b->next;
        if (b->cap == SLAB_BLOCK && n_slab_kept < SLAB_KEEP) {
            b->next = slab_kept;
            slab_kept = b;
            n_slab_kept++;
        } else {
            free(b);
        }
    }
}

/* `bytes` (64-byte aligned) carved from the program's slab (dm_program.slab), freed with the
 * program: its blocks grow with what they hold (from 256 KiB to SLAB_BLOCK, or one request's
 * size), so that a small program takes little and a large one large blocks, which dm_malloc
 * advises as huge pages. */
static void *slab_take(dm_program *p, size_t bytes, dm_err *err)
{
    bytes = (bytes + 63) & ~(size_t)63;
    struct dm_arena_blk *b = p->slab;
    if (!b || b->cap - b->used < bytes + 64) {
        size_t size = b ? 2 * b->cap : (size_t)256 << 10;
        if (size > SLAB_BLOCK) size = SLAB_BLOCK;
        if (size < bytes + 64) size = bytes + 64;
        if (size == SLAB_BLOCK && slab_kept) {
            b = slab_kept;
            slab_kept = b->next;
            n_slab_kept--;
        } else if (!(b = dm_malloc(sizeof *b + size, err))) {
            return NULL;
        }
        b->cap = size, b->used = 0;
        b->next = p->slab;
        p->slab = b;
    }
    uintptr_t at = ((uintptr_t)((char *)b->data + b->used) + 63) & ~(uintptr_t)63;
    b->used = (size_t)(at - (uintptr_t)b->data) + bytes;
    return (void *)at;
}

static dm_op *slab_ops(dm_program *p, int cap, dm_err *err) { return slab_take(p, (size_t)cap * sizeof(dm_op), err); }

/* `bytes` (rounded up to 8) from the arena *head (a rank's deps, or the params lists'): its blocks
 * come from the program's slab, from 1 KiB and doubling to ARENA_BLOCK (a rank's deps are often a
 * few KiB: in huge pages, a block's unused room is memory held); NULL with err when out of memory */
static void *arena_alloc(dm_program *p, struct dm_arena_blk **head, size_t bytes, dm_err *err)
{
    bytes = (bytes + 7) & ~(size_t)7;
    struct dm_arena_blk *b = *head;
    if (!b || b->cap - b->used < bytes) {
        size_t cap = b ? 2 * b->cap : 1024;
        if (cap > ARENA_BLOCK) cap = ARENA_BLOCK;
        if (cap < bytes) cap = bytes;
        if (!(b = slab_take(p, sizeof *b + cap, err))) return NULL;
        b->cap = cap, b->used = 0;
        b->next = *head; /* (a block that had room left keeps it unused) */
        *head = b;
    }
    void *q = (char *)b->data + b->used;
    b->used += bytes;
    return q;
}

/* The distinct params lists (dm_program.plists): open addressing on the lists' contents, the
 * lists in an arena of their own (carved from the program's slab). */
typedef struct plist_slot {
    uint64_t hash;
    const int64_t *v; /* NULL: empty */
    int n;
} plist_slot;

struct dm_plist_tab {
    size_t n, cap; /* lists held, slots (a power of 2) */
    int64_t ids;   /* their lengths summed */
    plist_slot *slot;
    struct dm_arena_blk *arena;
    const int64_t *last; /* the list interned last (NULL: none): the members of a collective add
                            one list after another, and a compare costs less than a hash */
    int last_n;
};

/* The interned works (dm_program.wtab): open addressing on their kernels' integer fields, each
 * slot a work index (-1: empty). */
struct dm_work_tab {
    size_t n, cap; /* works held, slots (a power of 2) */
    int *slot;
};

/* h mixed with v[0..n) */
static uint64_t plist_hash_more(uint64_t h, const int64_t *v, int n)
{
    for (int i = 0; i < n; i++) {
        h ^= (uint64_t)v[i];
        h *= UINT64_C(0xff51afd7ed558ccd);
        h ^= h >> 32;
    }
    return h;
}

static uint64_t plist_hash(const int64_t *v, int n)
{
    return plist_hash_more(UINT64_C(0x9e3779b97f4a7c15) ^ (uint64_t)n, v, n);
}

static int plist_grow(struct dm_plist_tab *t, dm_err *err)
{
    size_t cap = t->cap ? 2 * t->cap : 1024;
    plist_slot *s = dm_calloc(cap, sizeof *s, err);
    if (!s) return -1;
    for (size_t i = 0; i < t->cap; i++) {
        if (!t->slot[i].v) continue;
        size_t j = t->slot[i].hash & (cap - 1);
        while (s[j].v) j = (j + 1) & (cap - 1);
        s[j] = t->slot[i];
    }
    free(t->slot);
    t->slot = s;
    t->cap = cap;
    return 0;
}

/* The program's copy of the list v[0..n) (n > 0), made the first time it is seen. */
static int64_t *plist_intern(dm_program *p, const int64_t *v, int n, dm_err *err)
{
    struct dm_plist_tab *t = p->plists;
    if (!t && !(t = p->plists = dm_calloc(1, sizeof *t, err))) return NULL;
    if (t->last && t->last_n == n && !memcmp(t->last, v, (size_t)n * sizeof *v)) return (int64_t *)t->last;
    if (2 * (t->n + 1) > t->cap && plist_grow(t, err)) return NULL;
    uint64_t h = plist_hash(v, n);
    size_t j = h & (t->cap - 1);
    for (; t->slot[j].v; j = (j + 1) & (t->cap - 1))
        if (t->slot[j].hash == h && t->slot[j].n == n && !memcmp(t->slot[j].v, v, (size_t)n * sizeof *v)) {
            t->last = t->slot[j].v, t->last_n = n;
            return (int64_t *)t->last;
        }
    int64_t *q = arena_alloc(p, &t->arena, (size_t)n * sizeof *q, err);
    if (!q) return NULL;
    memcpy(q, v, (size_t)n * sizeof *q);
    t->slot[j] = (plist_slot){h, q, n};
    t->last = q, t->last_n = n;
    t->n++;
    t->ids += n;
    return q;
}

/* The gradient memory (dm_rank_prog.grad_*) of the first n ops of owner's list, as the last
 * unshare replayed it: ranks that leave one list at the same op (each rank's own optimizer ops
 * after a common forward and backward) copy it instead of replaying the list again (1024 ranks
 * replayed an MoE model's backward each). The owner's first n ops never change (lists only
 * grow), so the memory stays true for (owner, n). */
struct dm_unshare_memo {
    int owner, n;
    unsigned char *param, *layer;
    int64_t n_param;
    int n_layer;
    int marked; /* (dm_rank_prog's) */
    int64_t prod_lo, prod_hi;  /* (dm_rank_prog's) */
};

int64_t dm_program_params_held(const dm_program *p) { return p->plists ? p->plists->ids : 0; }

void dm_program_free(dm_program *p)
{
    if (!p) return;
    if (p->ranks)
        for (int r = 0; r < p->nranks; r++) {
            if (p->ranks[r].share == r && !p->ranks[r].in_slab) free(p->ranks[r].ops);
            free(p->ranks[r].grad_param);
            free(p->ranks[r].grad_layer);
        }
    for (int g = 0; g < p->n_groups; g++) free(p->groups[g].ranks);
    free(p->groups);
    for (int w = 0; w < p->n_works; w++) free(p->works[w].k);
    free(p->works);
    free(p->ranks);
    free(p->model);
    free(p->strategy);
    free(p->cluster);
    free(p->options);
    if (p->wtab) {
        free(p->wtab->slot);
        free(p->wtab);
    }
    if (p->umemo) {
        free(p->umemo->param);
        free(p->umemo->layer);
        free(p->umemo);
    }
    if (p->plists) {
        free(p->plists->slot);
        free(p->plists);
    }
    free(p->prange);
    slab_release(p->slab);
    free(p->ns_coeffs);
    free(p);
}

static int same_op(const dm_op *x, const dm_op *y)
{
    return x->kind == y->kind && x->stream == y->stream && x->layer == y->layer && x->n_deps == y->n_deps &&
           x->coll == y->coll && x->group == y->group && x->root == y->root && x->bytes == y->bytes &&
           x->flops == y->flops && x->m == y->m && x->n == y->n && x->batch == y->batch && x->algo == y->algo &&
           x->iters == y->iters && x->dtype == y->dtype && x->payload == y->payload && x->n_params == y->n_params &&
           x->work == y->work && x->part == y->part && x->parts == y->parts && x->eager == y->eager && x->publish == y->publish && x->tall == y->tall &&
           x->stage == y->stage &&
           x->staged == y->staged &&
           (!x->n_deps || !memcmp(x->deps, y->deps, (size_t)x->n_deps * sizeof *x->deps)) &&
           (!x->n_params || !memcmp(x->params, y->params, (size_t)x->n_params * sizeof *x->params));
}

static int same_kernel(const dm_kernel *x, const dm_kernel *y)
{
    return x->kind == y->kind && x->op == y->op && x->m == y->m && x->n == y->n && x->k == y->k && x->batch == y->batch &&
           x->count == y->count && x->param == y->param && x->slot == y->slot && x->flops == y->flops &&
           x->bytes == y->bytes && x->elems == y->elems;
}

int64_t dm_program_ops(const dm_program *p)
{
    int64_t n = 0;
    for (int r = 0; r < p->nranks; r++) n += p->ranks[r].n_ops;
    return n;
}

int dm_program_same_ops(const dm_program *a, const dm_program *b)
{
    if (a->nranks != b->nranks || a->gpus_per_node != b->gpus_per_node || a->tokens != b->tokens ||
        a->seq_len != b->seq_len || a->causal_tile != b->causal_tile || a->layer_passes != b->layer_passes || a->n_colls != b->n_colls ||
        a->n_groups != b->n_groups || a->n_works != b->n_works)
        return 0;
    if ((a->ns_coeffs == NULL) != (b->ns_coeffs == NULL) || (a->ns_coeffs && strcmp(a->ns_coeffs, b->ns_coeffs)))
        return 0;
    for (int g = 0; g < a->n_groups; g++)
        if (a->groups[g].n != b->groups[g].n ||
            memcmp(a->groups[g].ranks, b->groups[g].ranks, (size_t)a->groups[g].n * sizeof *a->groups[g].ranks))
            return 0;
    for (int w = 0; w < a->n_works; w++) {
        if (a->works[w].n != b->works[w].n) return 0;
        for (int i = 0; i < a->works[w].n; i++)
            if (!same_kernel(&a->works[w].k[i], &b->works[w].k[i])) return 0;
    }
    for (int r = 0; r < a->nranks; r++) {
        if (a->ranks[r].n_ops != b->ranks[r].n_ops) return 0;
        for (int i = 0; i < a->ranks[r].n_ops; i++)
            if (!same_op(&a->ranks[r].ops[i], &b->ranks[r].ops[i])) return 0;
    }
    return 1;
}

/* ---- the program's hash ------------------------------------------------------------------- */

static uint64_t hash_dbl(double v)
{
    uint64_t u = 0;
    if (v != 0) memcpy(&u, &v, sizeof u); /* -0 as 0: a file leaves both out */
    return u;
}

/* A header string as the JSON form writes it (json_write_string: a string read from a file
 * with bytes the writer escapes or replaces reads back as the written form, and must hash as
 * it will) */
static uint64_t hash_str(uint64_t h, const char *str)
{
    char *buf = NULL, *s = NULL;
    size_t len = 0;
    FILE *f = str ? open_memstream(&buf, &len) : NULL;
    if (f) {
        json_write_string(f, str);
        if (fclose(f) == 0) s = buf;
    }
    if (str && !s) s = (char *)str; /* out of memory: the raw bytes */
    int64_t v = 0;
    size_t n = s ? strlen(s) : 0;
    h = plist_hash_more(h, (int64_t[]){s ? (int64_t)n : -1}, 1);
    for (size_t i = 0; i < n; i += 8) {
        size_t k = n - i < 8 ? n - i : 8;
        v = 0;
        memcpy(&v, s + i, k);
        h = plist_hash_more(h, &v, 1);
    }
    free(buf);
    return h;
}

/* One op: the fields its JSON form carries, as it carries them (program_io.c write_op: layer,
 * coll, group, root and work only when >= 0, `part` only with parts > 1; the payload as read
 * back, not the implied one it is compared with there). */
static uint64_t hash_op(uint64_t h, const dm_op *o)
{
#define NONNEG(x) ((x) >= 0 ? (int64_t)(x) : -1)
    int64_t v[22] = {o->id, o->kind, o->stream, NONNEG(o->layer), o->n_deps, NONNEG(o->coll), NONNEG(o->group), NONNEG(o->root),
                     (int64_t)hash_dbl(o->bytes), (int64_t)hash_dbl(o->flops), o->m, o->n, o->batch, o->algo,
                     o->iters, o->dtype, o->payload, o->n_params, NONNEG(o->work), o->parts > 1 ? o->part : 0,
                     o->parts > 1 ? o->parts : 0, (int64_t)o->staged * 4 + o->eager * 2};
#undef NONNEG
    h = plist_hash_more(h, v, 22);
    h = plist_hash_more(h, (int64_t[]){o->tall}, 1);
    if (o->stage) h = plist_hash_more(h, (int64_t[]){o->stage + (INT64_C(1) << 40)}, 1);
    if (o->publish) h = plist_hash_more(h, (int64_t[]){INT64_C(1) << 41}, 1);
    for (int i = 0; i < o->n_deps; i++) h = plist_hash_more(h, (int64_t[]){o->deps[i]}, 1);
    return plist_hash_more(h, o->params, o->n_params);
}

uint64_t dm_program_hash(const dm_program *p)
{
    uint64_t h = UINT64_C(0x646d756f6e2d7031); /* "dmuon-p1" */
    h = hash_str(h, p->model);
    h = hash_str(h, p->strategy);
    h = hash_str(h, p->cluster);
    h = hash_str(h, p->options);
    h = hash_str(h, p->ns_coeffs);
    int64_t hdr[7] = {p->nranks, p->gpus_per_node, p->tokens, p->seq_len, p->n_colls, p->n_groups, p->n_works};
    h = plist_hash_more(h, hdr, 7);
    /* only when set: a whole-attention program hashes as it did before the field existed */
    if (p->causal_tile) h = plist_hash_more(h, (int64_t[]){-1, p->causal_tile}, 2);
    if (p->layer_passes) h = plist_hash_more(h, (int64_t[]){-2, p->layer_passes}, 2);
    for (int g = 0; g < p->n_groups; g++) {
        h = plist_hash_more(h, (int64_t[]){p->groups[g].n}, 1);
        for (int i = 0; i < p->groups[g].n; i++) h = plist_hash_more(h, (int64_t[]){p->groups[g].ranks[i]}, 1);
    }
    for (int w = 0; w < p->n_works; w++) {
        h = plist_hash_more(h, (int64_t[]){p->works[w].n}, 1);
        for (int i = 0; i < p->works[w].n; i++) {
            const dm_kernel *k = &p->works[w].k[i];
            int64_t v[12] = {k->kind, k->op, k->m, k->n, k->k, k->batch, k->count, k->param >= 0 ? k->param : -1,
                             k->slot >= 0 ? k->slot : -1, /* as program_io.c writes them */
                             (int64_t)hash_dbl(k->flops), (int64_t)hash_dbl(k->bytes), (int64_t)hash_dbl(k->elems)};
            h = plist_hash_more(h, v, 12);
        }
    }
    /* each rank's list once: a rank that shares another's array has its hash */
    uint64_t *lh = malloc((size_t)p->nranks * sizeof *lh);
    for (int r = 0; r < p->nranks; r++) {
        const dm_rank_prog *rp = &p->ranks[r];
        uint64_t x;
        if (lh && rp->share >= 0 && rp->share < r && p->ranks[rp->share].ops == rp->ops &&
            p->ranks[rp->share].n_ops == rp->n_ops) {
            x = lh[rp->share];
        } else {
            x = plist_hash_more(UINT64_C(0x9e3779b97f4a7c15), (int64_t[]){rp->n_ops}, 1);
            for (int i = 0; i < rp->n_ops; i++) x = hash_op(x, &rp->ops[i]);
        }
        if (lh) lh[r] = x;
        h = plist_hash_more(h, (int64_t[]){r, (int64_t)x}, 2);
    }
    free(lh);
    return h;
}

static int cmp_int(const void *a, const void *b)
{
    int x = *(const int *)a, y = *(const int *)b;
    return (x > y) - (x < y);
}

/* A sorted copy of ranks, checked (members of the program, each once); NULL on error. */
static int *sorted_members(const dm_program *p, const int *ranks, int n, dm_err *err)
{
    if (n < 1) {
        dm_err_set(err, "program: empty group");
        return NULL;
    }
    int *s = dm_malloc((size_t)n * sizeof *s, err);
    if (!s) return NULL;
    memcpy(s, ranks, (size_t)n * sizeof *s);
    if (n > 1) qsort(s, (size_t)n, sizeof *s, cmp_int);
    for (int i = 0; i < n; i++)
        if (s[i] < 0 || s[i] >= p->nranks || (i && s[i] == s[i - 1])) {
            int bad = s[i];
            free(s);
            dm_err_set(err, "program: bad group member %d (ranks 0..%d, each once)", bad, p->nranks - 1);
            return NULL;
        }
    return s;
}

static int append_group(dm_program *p, int *s, int n, dm_err *err);

int dm_program_group(dm_program *p, const int *ranks, int n, dm_err *err)
{
    int *s = sorted_members(p, ranks, n, err);
    if (!s) return -1;
    /* Linear search is fine for the few hundred groups a program has; the common groups
     * (world, node, cross-node) are created first. */
    for (int g = 0; g < p->n_groups; g++)
        if (p->groups[g].n == n && memcmp(p->groups[g].ranks, s, (size_t)n * sizeof *s) == 0) {
            free(s);
            return g;
        }
    return append_group(p, s, n, err);
}

int dm_program_add_group(dm_program *p, const int *ranks, int n, dm_err *err)
{
    int *s = sorted_members(p, ranks, n, err);
    return s ? append_group(p, s, n, err) : -1;
}

/* Takes s over (freed on failure). */
static int append_group(dm_program *p, int *s, int n, dm_err *err)
{
    if (p->n_groups == p->cap_groups) {
        int cap = p->cap_groups ? 2 * p->cap_groups : 8;
        dm_group *ng = dm_realloc(p->groups, (size_t)cap * sizeof *ng, err);
        if (!ng) {
            free(s);
            return -1;
        }
        p->groups = ng;
        p->cap_groups = cap;
    }
    p->groups[p->n_groups].n = n;
    p->groups[p->n_groups].ranks = s;
    return p->n_groups++;
}

int dm_program_new_coll(dm_program *p) { return p->n_colls++; }

dm_op dm_op_init(dm_op_kind kind, dm_stream stream)
{
    dm_op o;
    memset(&o, 0, sizeof o);
    o.kind = kind;
    o.stream = stream;
    o.layer = o.coll = o.group = o.root = -1;
    o.batch = 1;
    o.iters = kind == DM_OP_NS ? DM_NS_ITERS_DEFAULT : 0;
    o.payload = dm_op_payload_default(kind);
    o.staged = dm_op_staged_default(kind);
    o.work = -1;
    return o;
}

int dm_op_staged_default(dm_op_kind kind)
{
    return kind == DM_OP_REDUCESCATTER || kind == DM_OP_ALLGATHER;
}

int dm_program_add_work(dm_program *p, const dm_kernel *k, int n, dm_err *err)
{
    if (n < 0) return dm_err_set(err, "program: a work of %d kernels", n);
    if (p->n_works == p->cap_works) {
        int cap = p->cap_works ? 2 * p->cap_works : 16;
        dm_work *w = dm_realloc(p->works, (size_t)cap * sizeof *w, err);
        if (!w) return -1;
        p->works = w;
        p->cap_works = cap;
    }
    dm_work *w = &p->works[p->n_works];
    w->n = n;
    w->k = NULL;
    if (n && !(w->k = dm_malloc((size_t)n * sizeof *w->k, err))) return -1;
    if (n) memcpy(w->k, k, (size_t)n * sizeof *k);
    return p->n_works++;
}

static uint64_t work_hash(const dm_kernel *k, int n)
{
    uint64_t h = UINT64_C(0x9e3779b97f4a7c15) ^ (uint64_t)n;
    for (int i = 0; i < n; i++) {
        int64_t v[9] = {k[i].kind, k[i].op, k[i].m, k[i].n, k[i].k, k[i].batch, k[i].count, k[i].param, k[i].slot};
        h = plist_hash_more(h, v, 9);
    }
    return h;
}

int dm_program_intern_work(dm_program *p, const dm_kernel *k, int n, dm_err *err)
{
    struct dm_work_tab *t = p->wtab;
    if (!t && !(t = p->wtab = dm_calloc(1, sizeof *t, err))) return -1;
    if (2 * (t->n + 1) > t->cap) { /* grow (load under 1/2) and re-place */
        size_t cap = t->cap ? 2 * t->cap : 256;
        int *s = dm_malloc(cap * sizeof *s, err);
        if (!s) return -1;
        for (size_t i = 0; i < cap; i++) s[i] = -1;
        for (size_t i = 0; i < t->cap; i++) {
            if (t->slot[i] < 0) continue;
            size_t j = work_hash(p->works[t->slot[i]].k, p->works[t->slot[i]].n) & (cap - 1);
            while (s[j] >= 0) j = (j + 1) & (cap - 1);
            s[j] = t->slot[i];
        }
        free(t->slot);
        t->slot = s, t->cap = cap;
    }
    size_t j = work_hash(k, n) & (t->cap - 1);
    for (; t->slot[j] >= 0; j = (j + 1) & (t->cap - 1)) {
        const dm_work *w = &p->works[t->slot[j]];
        int same = w->n == n;
        for (int i = 0; same && i < n; i++) same = same_kernel(&w->k[i], &k[i]);
        if (same) return t->slot[j];
    }
    int w = dm_program_add_work(p, k, n, err);
    if (w < 0) return -1;
    t->slot[j] = w;
    t->n++;
    return w;
}

dm_payload dm_op_payload_default(dm_op_kind kind)
{
    switch (kind) {
    case DM_OP_BROADCAST:
    case DM_OP_ALLGATHER: return DM_PAYLOAD_WEIGHTS;
    case DM_OP_REDUCE:
    case DM_OP_ALLREDUCE:
    case DM_OP_REDUCESCATTER: return DM_PAYLOAD_GRADS;
    default: return DM_PAYLOAD_NONE;
    }
}

static int is_grad_producer(dm_op_kind k)
{
    return k == DM_OP_BACKWARD || k == DM_OP_REDUCE || k == DM_OP_ALLREDUCE || k == DM_OP_REDUCESCATTER;
}

/* Bit arrays (dm_rank_prog.grad_param, grad_layer): bytes of n bits; bit i of an array of n
 * bits (0 past its end); bit i set. */
static size_t bit_bytes(int64_t n) { return (size_t)((n + 7) / 8); }
static int bit_get(const unsigned char *a, int64_t n, int64_t i) { return i >= 0 && i < n && (a[i >> 3] >> (i & 7) & 1); }
static void bit_set(unsigned char *a, int64_t i) { a[i >> 3] |= (unsigned char)(1u << (i & 7)); }

/* Grow a bit array of *n bits (a multiple of 8) to hold bit i, the new bits 0. */
static int bits_grow(unsigned char **a, int64_t *n, int64_t i, dm_err *err)
{
    if (i < *n) return 0;
    int64_t m = *n ? *n : 512;
    while (m <= i) m *= 2;
    unsigned char *na = dm_realloc(*a, bit_bytes(m), err);
    if (!na) return -1;
    memset(na + bit_bytes(*n), 0, bit_bytes(m) - bit_bytes(*n));
    *a = na;
    *n = m;
    return 0;
}

/* The params of rp's gradient-producing ops before op `upto` not marked yet (dm_rank_prog.marked)
 * marked in its grad_param bits. */
static int mark_pending(dm_rank_prog *rp, int upto, dm_err *err)
{
    for (int k = rp->marked; k < upto; k++) {
        if (!is_grad_producer(rp->ops[k].kind)) continue;
        const int64_t *v = rp->ops[k].params;
        int n = rp->ops[k].n_params;
        int64_t most = -1; /* (the array grown once for the list: an MoE op carries hundreds of ids) */
        for (int a = 0; a < n; a++)
            if (v[a] > most) most = v[a];
        if (most >= 0 && bits_grow(&rp->grad_param, &rp->n_grad_param, most, err) < 0) return -1;
        for (int a = 0; a < n; a++)
            if (v[a] >= 0) bit_set(rp->grad_param, v[a]);
    }
    rp->marked = upto;
    return 0;
}

/* The smallest and the largest id of the program's list v[0..n) (interned, or a rank's copy: it
 * lives as long as the program), remembered in a table keyed by the list's address: the ranks of
 * a plan ask about the same few lists (a layer's all-gather and gradient lists) over and over, and
 * an MoE layer's hold hundreds of ids. 0, or -1 with err. */
#define PRANGE_SLOTS 1024
struct dm_prange_tab {
    const int64_t *v[PRANGE_SLOTS];
    int n[PRANGE_SLOTS];
    int64_t lo[PRANGE_SLOTS], hi[PRANGE_SLOTS];
};

static int plist_range(dm_program *p, const int64_t *v, int n, int64_t *lo, int64_t *hi, dm_err *err)
{
    struct dm_prange_tab *t = p->prange;
    if (!t && !(t = p->prange = dm_calloc(1, sizeof *t, err))) return -1;
    size_t j = (size_t)(((uintptr_t)v >> 3) * UINT64_C(0x9e3779b97f4a7c15) >> 54) & (PRANGE_SLOTS - 1);
    if (t->v[j] != v || t->n[j] != n) {
        int64_t a = n ? v[0] : 0, b = a;
        for (int i = 1; i < n; i++) {
            if (v[i] < a) a = v[i];
            if (v[i] > b) b = v[i];
        }
        t->v[j] = v, t->n[j] = n, t->lo[j] = a, t->hi[j] = b;
    }
    *lo = t->lo[j], *hi = t->hi[j];
    return 0;
}

/* o->implied for op `at` of rp (the implied payload's rule, program.h; the ops before it in
 * place), and the rank's memory of produced gradients updated; params: the op's list as the
 * program holds it (interned: it lives as long as the program). */
static int implied_payload(dm_program *p, dm_rank_prog *rp, int at, dm_op *o, const int64_t *params, int n_params,
                           dm_err *err)
{
    int64_t lo, hi;
    o->implied = dm_op_payload_default(o->kind);
    if (o->kind == DM_OP_ALLGATHER) {
        int g = bit_get(rp->grad_layer, rp->n_grad_layer, o->layer);
        if (g) o->implied = DM_PAYLOAD_GRADS;
        if (g || !n_params || rp->prod_lo > rp->prod_hi) return 0; /* (prod_hi < prod_lo: none produced) */
        /* its params asked one by one only where their range meets the produced ones' (a zero-3
         * plan's all-gathers of a layer come before that layer's gradients: none) */
        if (plist_range(p, params, n_params, &lo, &hi, err) < 0) return -1;
        if (lo > rp->prod_hi || hi < rp->prod_lo) return 0;
        if (rp->marked < at && mark_pending(rp, at, err) < 0) return -1;
        for (int a = 0; a < n_params && !g; a++) g = bit_get(rp->grad_param, rp->n_grad_param, params[a]);
        if (g) o->implied = DM_PAYLOAD_GRADS;
        return 0;
    }
    if (!is_grad_producer(o->kind)) return 0;
    if (n_params) { /* (its ids marked in the bits when an all-gather asks: mark_pending) */
        if (plist_range(p, params, n_params, &lo, &hi, err) < 0) return -1;
        if (lo < rp->prod_lo) rp->prod_lo = lo;
        if (hi > rp->prod_hi) rp->prod_hi = hi;
    }
    if (o->kind == DM_OP_BACKWARD && n_params == 0 && o->layer >= 0) {
        int64_t nl = rp->n_grad_layer;
        if (bits_grow(&rp->grad_layer, &nl, o->layer, err) < 0) return -1;
        rp->n_grad_layer = (int)nl;
        bit_set(rp->grad_layer, o->layer);
    }
    return 0;
}

/* Rank `owner`'s array moved (or was made): its followers see it. */
static void repoint_followers(dm_program *p, int owner)
{
    dm_rank_prog *o = &p->ranks[owner];
    for (int r = owner + 1, left = o->followers; r < p->nranks && left > 0; r++)
        if (p->ranks[r].share == owner && r != owner) p->ranks[r].ops = o->ops, left--;
}

/* Grow an owned list to hold cap ops: a list reserved before its first op (reserve 1) from the
 * slab, one growing op by op (or past what was reserved) by realloc. */
static int grow_ops(dm_program *p, int rank, int cap, int reserve, dm_err *err)
{
    dm_rank_prog *rp = &p->ranks[rank];
    if (cap <= rp->cap) return 0;
    dm_op *n;
    if (reserve && !rp->n_ops && (!rp->ops || rp->in_slab)) {
        if (!(n = slab_ops(p, cap, err))) return -1;
        rp->in_slab = 1;
    } else if (rp->in_slab) { /* out of the slab (its place there stays unused) */
        if (!(n = dm_malloc((size_t)cap * sizeof *n, err))) return -1;
        memcpy(n, rp->ops, (size_t)rp->n_ops * sizeof *n);
        rp->in_slab = 0;
    } else if (!(n = dm_realloc(rp->ops, (size_t)cap * sizeof *n, err)))
        return -1;
    rp->ops = n;
    rp->cap = cap;
    if (rp->followers) repoint_followers(p, rank);
    return 0;
}

int dm_program_reserve(dm_program *p, int rank, int cap, dm_err *err)
{
    if (rank < 0 || rank >= p->nranks) return dm_err_set(err, "program: rank %d out of range", rank);
    dm_rank_prog *rp = &p->ranks[rank];
    if (rp->share != rank) { /* followers hold no array: the hint sizes the copy they may make */
        if (cap > rp->cap) rp->cap = cap;
        return 0;
    }
    return grow_ops(p, rank, cap, 1, err);
}

static int memo_copy(unsigned char **dst, const unsigned char *src, int64_t n, dm_err *err)
{
    *dst = NULL;
    if (n <= 0) return 0;
    if (!(*dst = dm_malloc((size_t)n, err))) return -1;
    memcpy(*dst, src, (size_t)n);
    return 0;
}

/* Rank stops following its owner: its own array with the n_ops it had (the ops' deps and params
 * stay where they are, in the owner's arena and the program's lists, which live as long as the
 * program), and its memory
 * of produced gradients replayed over them (or copied from the memo). */
static int unshare(dm_program *p, int rank, dm_err *err)
{
    dm_rank_prog *rp = &p->ranks[rank];
    if (rp->share == rank) return 0;
    dm_rank_prog *o = &p->ranks[rp->share];
    int n = rp->n_ops, cap = rp->cap > n ? rp->cap : n + 1;
    if (cap < 64) cap = 64;
    dm_op *ops = slab_ops(p, cap, err);
    if (!ops) return -1;
    rp->in_slab = 1;
    if (n) memcpy(ops, o->ops, (size_t)n * sizeof *ops);
    o->followers--;
    rp->share = rank;
    rp->followers = 0;
    rp->ops = ops;
    rp->cap = cap;
    int owner = (int)(o - p->ranks);
    struct dm_unshare_memo *u = p->umemo;
    if (u && u->owner == owner && u->n == n && !rp->grad_param && !rp->grad_layer) {
        if (memo_copy(&rp->grad_param, u->param, (int64_t)bit_bytes(u->n_param), err) ||
            memo_copy(&rp->grad_layer, u->layer, (int64_t)bit_bytes(u->n_layer), err))
            return -1;
        rp->n_grad_param = rp->grad_param ? u->n_param : 0;
        rp->n_grad_layer = rp->grad_layer ? u->n_layer : 0;
        rp->marked = u->marked;
        rp->prod_lo = u->prod_lo, rp->prod_hi = u->prod_hi;
        return 0;
    }
    for (int i = 0; i < n; i++) {
        dm_op tmp = ops[i];
        if (implied_payload(p, rp, i, &tmp, ops[i].params, ops[i].n_params, err) < 0) return -1;
    }
    if (!u && !(u = p->umemo = dm_calloc(1, sizeof *u, err))) return -1;
    free(u->param), free(u->layer);
    u->param = u->layer = NULL;
    u->owner = -1;
    if (memo_copy(&u->param, rp->grad_param, (int64_t)bit_bytes(rp->n_grad_param), err) ||
        memo_copy(&u->layer, rp->grad_layer, (int64_t)bit_bytes(rp->n_grad_layer), err))
        return -1;
    u->n_param = rp->n_grad_param, u->n_layer = rp->n_grad_layer, u->marked = rp->marked;
    u->prod_lo = rp->prod_lo, u->prod_hi = rp->prod_hi;
    u->owner = owner, u->n = n;
    return 0;
}

int dm_program_own_rank(dm_program *p, int rank, dm_err *err)
{
    if (rank < 0 || rank >= p->nranks) return dm_err_set(err, "program: rank %d out of range", rank);
    dm_rank_prog *rp = &p->ranks[rank];
    if (rp->followers) { /* its followers take a copy: then nobody else reads this array */
        for (int r = rank + 1; r < p->nranks && rp->followers; r++)
            if (p->ranks[r].share == rank && unshare(p, r, err)) return -1;
    }
    if (unshare(p, rank, err)) return -1;
    for (int i = 0; i < rp->n_ops; i++) { /* deps and params copied out of shared storage */
        dm_op *o = &rp->ops[i];
        if (o->n_deps) {
            int *d = arena_alloc(p, &rp->arena, (size_t)o->n_deps * sizeof *d, err);
            if (!d) return -1;
            memcpy(d, o->deps, (size_t)o->n_deps * sizeof *d);
            o->deps = d;
        }
        if (o->n_params) {
            int64_t *q = arena_alloc(p, &rp->arena, (size_t)o->n_params * sizeof *q, err);
            if (!q) return -1;
            memcpy(q, o->params, (size_t)o->n_params * sizeof *q);
            o->params = q;
        }
    }
    return 0;
}

int dm_program_replicate(dm_program *p, dm_err *err)
{
    for (int r = 1; r < p->nranks; r++)
        if (p->ranks[r].share != 0 || p->ranks[r].n_ops != 0)
            return dm_err_set(err, "program: rank %d has ops of its own: not a copy of rank 0", r);
    for (int r = 1; r < p->nranks; r++) p->ranks[r].n_ops = p->ranks[0].n_ops;
    return 0;
}

int dm_program_unroll(const dm_program *p, int K, dm_program **out, dm_err *err)
{
    *out = NULL;
    if (K < 1 || K > 64) return dm_err_set(err, "program: %d steps (expected 1 to 64)", K);
    dm_program *q = dm_program_new(p->nranks, p->gpus_per_node, p->model, p->strategy, p->cluster, p->options, p->tokens,
                                   err);
    if (!q) return -1;
    q->seq_len = p->seq_len;
    q->causal_tile = p->causal_tile;
    q->layer_passes = p->layer_passes;
    int rc = -1, *upd = NULL, *grd = NULL, *pupd = NULL, *pgrd = NULL, *deps = NULL, cap = 0;
    if (p->ns_coeffs && !(q->ns_coeffs = dm_strdup(p->ns_coeffs, err))) goto out;
    for (int g = 0; g < p->n_groups; g++)
        if (dm_program_add_group(q, p->groups[g].ranks, p->groups[g].n, err) != g) goto out;
    for (int w = 0; w < p->n_works; w++)
        if (dm_program_add_work(q, p->works[w].k, p->works[w].n, err) != w) goto out;
    q->n_colls = K * p->n_colls;
    int64_t np = 0; /* parameter ids 0 .. np-1 */
    for (int r = 0; r < p->nranks; r++)
        for (int i = 0; i < p->ranks[r].n_ops; i++)
            for (int a = 0; a < p->ranks[r].ops[i].n_params; a++)
                if (p->ranks[r].ops[i].params[a] >= np) np = p->ranks[r].ops[i].params[a] + 1;
    size_t nn = (size_t)(np ? np : 1);
    if (!(upd = dm_malloc(nn * sizeof *upd, err)) || !(grd = dm_malloc(nn * sizeof *grd, err)) ||
        !(pupd = dm_malloc(nn * sizeof *pupd, err)) || !(pgrd = dm_malloc(nn * sizeof *pgrd, err)))
        goto out;
    for (int r = 0; r < p->nranks; r++) {
        const dm_rank_prog *rp = &p->ranks[r];
        int n = rp->n_ops;
        for (int64_t x = 0; x < np; x++) upd[x] = grd[x] = -1;
        for (int k = 0; k < K; k++) {
            memcpy(pupd, upd, nn * sizeof *upd); /* the previous step's, on this rank */
            memcpy(pgrd, grd, nn * sizeof *grd);
            for (int i = 0; i < n; i++) {
                const dm_op *op = &rp->ops[i];
                int nd = 0, need = op->n_deps + 2 * op->n_params;
                if (need > cap) {
                    int *d = dm_realloc(deps, (size_t)need * sizeof *d, err);
                    if (!d) goto out;
                    deps = d, cap = need;
                }
                for (int d = 0; d < op->n_deps; d++) deps[nd++] = op->deps[d] + k * n;
                dm_payload pl = op->payload != DM_PAYLOAD_NONE ? op->payload : op->implied;
                int reads_w = op->kind == DM_OP_FORWARD || op->kind == DM_OP_BACKWARD ||
                              (dm_op_is_collective(op->kind) && pl == DM_PAYLOAD_WEIGHTS);
                for (int a = 0; k > 0 && a < op->n_params; a++) {
                    int64_t x = op->params[a];
                    if (reads_w && pupd[x] >= 0) deps[nd++] = pupd[x];
                    if (op->kind == DM_OP_BACKWARD && pgrd[x] >= 0) deps[nd++] = pgrd[x];
                }
                if (nd > 1) { /* sorted, each once */
                    qsort(deps, (size_t)nd, sizeof *deps, cmp_int);
                    int m = 1;
                    for (int d = 1; d < nd; d++)
                        if (deps[d] != deps[m - 1]) deps[m++] = deps[d];
                    nd = m;
                }
                dm_op o = *op;
                if (o.coll >= 0) o.coll += k * p->n_colls;
                int id = dm_program_add_op(q, r, &o, deps, nd, op->params, op->n_params, err);
                if (id < 0) goto out;
                int reads_g = op->kind == DM_OP_NS || op->kind == DM_OP_ADAMW ||
                              (dm_op_is_collective(op->kind) && pl == DM_PAYLOAD_GRADS);
                for (int a = 0; a < op->n_params; a++) {
                    int64_t x = op->params[a];
                    /* the last writer of x's weights: its update, or a fetch that publishes it
                     * (which the next step's forward reads in place of a fetch of its own) */
                    if (op->kind == DM_OP_MUON_UPDATE || op->kind == DM_OP_ADAMW || op->publish) upd[x] = id;
                    if (reads_g) grd[x] = id;
                }
            }
        }
    }
    *out = q;
    rc = 0;
out:
    free(upd), free(grd), free(pupd), free(pgrd), free(deps);
    if (rc) dm_program_free(q);
    return rc;
}

int dm_op_check_params(const dm_op *op, int r, int i, int64_t n, dm_err *err)
{
    for (int k = 0; k < op->n_params; k++)
        if (op->params[k] < 0 || op->params[k] >= n)
            return dm_err_set(err, "program: rank %d op %d (%s) names param %lld; the model has %lld", r, i,
                              dm_op_kind_name(op->kind), (long long)op->params[k], (long long)n);
    return 0;
}

int dm_program_check_params(const dm_program *p, int64_t n, dm_err *err)
{
    for (int r = 0; r < p->nranks; r++)
        for (int i = 0; p->ranks[r].share == r && i < p->ranks[r].n_ops; i++)
            if (dm_op_check_params(&p->ranks[r].ops[i], r, i, n, err)) return -1;
    return 0;
}

int dm_program_distinct_lists(const dm_program *p)
{
    int n = 0;
    for (int r = 0; r < p->nranks; r++) n += p->ranks[r].share == r;
    return n;
}

/* The op a follower would add equals its owner's op at that index (every field the caller
 * sets; id and implied follow from the equal lists before it). */
static int matches(const dm_op *x, const dm_op *op, const int *deps, int n_deps, const int64_t *params, int n_params)
{
    dm_op y = *op;
    y.n_deps = n_deps, y.deps = (int *)deps;
    y.n_params = n_params, y.params = (int64_t *)params;
    return same_op(x, &y);
}

int dm_program_add_op(dm_program *p, int rank, const dm_op *op, const int *deps, int n_deps,
                      const int64_t *params, int n_params, dm_err *err)
{
    if (rank < 0 || rank >= p->nranks) return dm_err_set(err, "program: rank %d out of range", rank);
    dm_rank_prog *rp = &p->ranks[rank];
    if (rp->share != rank) {
        const dm_rank_prog *o = &p->ranks[rp->share];
        if (rp->n_ops < o->n_ops && matches(&o->ops[rp->n_ops], op, deps, n_deps, params, n_params))
            return rp->n_ops++;
        if (unshare(p, rank, err)) return -1;
    }
    if (rp->n_ops == rp->cap && grow_ops(p, rank, rp->cap ? 2 * rp->cap : 64, 0, err)) return -1;
    dm_op o = *op;
    o.id = rp->n_ops;
    o.deps = NULL;
    o.params = NULL;
    o.n_deps = n_deps;
    o.n_params = n_params;
    if (n_deps) {
        if (!(o.deps = arena_alloc(p, &rp->arena, (size_t)n_deps * sizeof *o.deps, err))) return -1;
        memcpy(o.deps, deps, (size_t)n_deps * sizeof *o.deps);
    }
    if (n_params && !(o.params = plist_intern(p, params, n_params, err))) return -1;
    if (implied_payload(p, rp, rp->n_ops, &o, o.params, n_params, err) < 0) return -1;
    rp->ops[rp->n_ops] = o;
    return rp->n_ops++;
}

const char *dm_op_kind_name(dm_op_kind k)
{
    static const char *n[] = {"forward", "backward", "broadcast", "reduce", "all-reduce", "all-gather",
                              "reduce-scatter", "ns", "muon-update", "adamw", "wait"};
    return (unsigned)k < DM_OP__COUNT ? n[k] : "?";
}

const char *dm_stream_name(dm_stream s)
{
    static const char *n[] = {"compute", "comm-hi", "comm-lo", "compute-lo"};
    return (unsigned)s < DM_STREAM__COUNT ? n[s] : "?";
}

const char *dm_ns_algo_name(dm_ns_algo a) { return a == DM_NS_GRAM ? "gram" : "direct"; }

const char *dm_dtype_name(dm_dtype d)
{
    return d == DM_DT_FP16 ? "fp16" : d == DM_DT_FP32 ? "fp32" : "bf16";
}

const char *dm_payload_name(dm_payload p)
{
    return p == DM_PAYLOAD_WEIGHTS ? "weights" : p == DM_PAYLOAD_GRADS ? "grads" : p == DM_PAYLOAD_GRAM ? "gram" : "none";
}

size_t dm_dtype_size(dm_dtype d) { return d == DM_DT_FP32 ? 4 : 2; }

int dm_ns_algo_parse(const char *name, dm_ns_algo *out, dm_err *err)
{
    if (!strcmp(name, "direct")) *out = DM_NS_DIRECT;
    else if (!strcmp(name, "gram")) *out = DM_NS_GRAM;
    else return dm_err_set(err, "unknown NS algorithm '%s' (expected direct or gram)", name);
    return 0;
}

int dm_dtype_parse(const char *name, dm_dtype *out, dm_err *err)
{
    static const dm_dtype all[] = {DM_DT_BF16, DM_DT_FP16, DM_DT_FP32};
    for (int i = 0; i < 3; i++)
        if (!strcmp(name, dm_dtype_name(all[i]))) {
            *out = all[i];
            return 0;
        }
    return dm_err_set(err, "unknown dtype '%s' (expected bf16, fp16 or fp32)", name);
}


int dm_op_is_collective(dm_op_kind k) { return k >= DM_OP_BROADCAST && k <= DM_OP_REDUCESCATTER; }

int dm_op_is_compute(dm_op_kind k)
{
    return k == DM_OP_FORWARD || k == DM_OP_BACKWARD || k == DM_OP_NS || k == DM_OP_MUON_UPDATE || k == DM_OP_ADAMW;
}

double dm_ns_flops_ex(int64_t m, int64_t n, int iters, dm_ns_algo algo, uint32_t restarts, int symmetric)
{
    double r = (double)(m < n ? m : n), l = (double)(m < n ? n : m);
    double gemm_rl = 2 * r * r * l;          /* (r x r)(r x l) or (r x l)(l x r) */
    double gemm_rr = 2 * r * r * r;
    double sym = symmetric ? 0.5 : 1.0;      /* share of a symmetric product computed */
    double f = 0;

    if (iters <= 0 || m < 1 || n < 1) return 0;
    if (algo == DM_NS_DIRECT) return iters * (gemm_rl * sym + gemm_rr * sym + gemm_rl);
    f = gemm_rl * sym; /* R = X X^T */
    for (int k = 0; k < iters; k++) {
        int first = k == 0 || dm_ns_restart_before(restarts, k);
        int last = k == iters - 1 || dm_ns_restart_before(restarts, k + 1);
        if (k > 0 && first) f += gemm_rl + gemm_rl * sym; /* X = Q X, R = X X^T */
        f += gemm_rr * sym;                                 /* R R */
        if (!first) f += gemm_rr;                           /* Q = P Q */
        if (!last) f += gemm_rr + gemm_rr * sym;            /* R = P (R P) */
    }
    return f + gemm_rl; /* X = Q X */
}

double dm_program_internode_bytes(const dm_program *p, long *spanning)
{
    double total = 0;
    long span = 0;
    int gpn = p->gpus_per_node > 0 ? p->gpus_per_node : p->nranks;
    unsigned char *seen = calloc((size_t)(p->n_colls > 0 ? p->n_colls : 1), 1);
    int *nodes = malloc((size_t)(p->n_groups > 0 ? p->n_groups : 1) * sizeof *nodes); /* per group, -1: not yet */
    if (!seen || !nodes) {
        free(seen);
        free(nodes);
        return -1;
    }
    for (int g = 0; g < p->n_groups; g++) nodes[g] = -1;
    for (int r = 0; r < p->nranks; r++)
        for (int i = 0; p->ranks[r].share == r && i < p->ranks[r].n_ops; i++) { /* a follower's ops are its owner's */
            const dm_op *op = &p->ranks[r].ops[i];
            if (op->coll < 0 || op->coll >= p->n_colls || seen[op->coll]) continue;
            seen[op->coll] = 1;
            const dm_group *g = &p->groups[op->group];
            if (nodes[op->group] < 0) {
                int m = 0;
                for (int k = 0; k < g->n; k++) /* members ascending: count distinct nodes */
                    if (k == 0 || g->ranks[k] / gpn != g->ranks[k - 1] / gpn) m++;
                nodes[op->group] = m;
            }
            int m = nodes[op->group];
            if (m < 2) continue;
            double n = g->n, f = op->kind == DM_OP_ALLREDUCE ? 2 * (n - 1) / n
                                 : op->kind == DM_OP_ALLGATHER || op->kind == DM_OP_REDUCESCATTER ? (n - 1) / n
                                                                                                   : 1;
            total += op->bytes * f * m;
            span++;
        }
    free(seen);
    free(nodes);
    if (spanning) *spanning = span;
    return total;
}
