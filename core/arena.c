/* arena.c: the GPU executor's arena layout and which collectives run in place on it (arena.h). */
#include "arena.h"

#include <stdlib.h>
#include <string.h>

/* reduce, broadcast, all-reduce: placed first (they may span alignment gaps) */
static int spanning_kind(dm_op_kind k)
{
    return k == DM_OP_REDUCE || k == DM_OP_BROADCAST || k == DM_OP_ALLREDUCE;
}

int64_t dm_arena_layout(const dm_model *m, const dm_matrix *mx, int64_t n, const dm_program *p, int64_t *off,
                        dm_err *err)
{
    /* groups: runs of one tensor in one layer (consecutive ids); grp[i] = matrix i's group,
     * first[g] its first matrix; order[] the groups in arena order */
    int64_t ng = 0, no = 0, at = 0;
    int64_t *grp = dm_malloc((size_t)(n ? n : 1) * sizeof *grp, err);
    int64_t *first = dm_malloc((size_t)(n + 1) * sizeof *first, err);
    int64_t *order = dm_malloc((size_t)(n ? n : 1) * sizeof *order, err);
    unsigned char *placed = dm_calloc((size_t)(n ? n : 1), 1, err);
    if (!grp || !first || !order || !placed) {
        free(grp), free(first), free(order), free(placed);
        return -1;
    }
    for (int64_t i = 0; i < n; i++) {
        if (i == 0 || mx[i].tensor != mx[i - 1].tensor || mx[i].layer != mx[i - 1].layer) first[ng++] = i;
        grp[i] = ng - 1;
    }
    first[ng] = n;
    /* first touch: the spanning collectives of every rank in list order, then the others (a
     * rank on another's list, program.h, touches nothing that rank, before it, did not) */
    /* every member's op of a collective names the same params (program.h): its first member's
     * op places them, the others are skipped (a 1024-rank group's were walked 1024 times) */
    unsigned char *seen = p ? dm_calloc((size_t)p->n_colls + 1, 1, err) : NULL;
    if (p && !seen) {
        free(grp), free(first), free(order), free(placed);
        return -1;
    }
    for (int pass = 0; p && pass < 2; pass++)
        for (int r = 0; r < p->nranks; r++)
            for (int k = 0; k < p->ranks[r].n_ops && p->ranks[r].share == r; k++) {
                const dm_op *op = &p->ranks[r].ops[k];
                if (!dm_op_is_collective(op->kind) || spanning_kind(op->kind) != !pass) continue;
                if (op->coll >= 0 && op->coll < p->n_colls) {
                    if (seen[op->coll]) continue;
                    seen[op->coll] = 1;
                }
                for (int a = 0; a < op->n_params; a++) {
                    int64_t q = op->params[a];
                    if (q < 0 || q >= n || placed[grp[q]]) continue;
                    placed[grp[q]] = 1;
                    order[no++] = grp[q];
                }
            }
    for (int64_t g = 0; g < ng; g++)
        if (!placed[g]) order[no++] = g;
    for (int64_t o = 0; o < no; o++)
        for (int64_t i = first[order[o]]; i < first[order[o] + 1]; i++) {
            if (i == first[order[o]]) at = (at + 7) / 8 * 8;
            if (off) off[i] = at;
            at += dm_matrix_elems(m, &mx[i]);
        }
    free(grp), free(first), free(order), free(placed), free(seen);
    return at;
}

dm_arena_fit dm_arena_fit_of(const dm_model *m, const dm_matrix *mx, const int64_t *off, const dm_op *op,
                             int64_t *start, int64_t *span)
{
    int exact = 1;
    int64_t end = 0;
    *start = *span = 0;
    if (op->n_params < 1) return DM_ARENA_EXACT;
    for (int a = 0; a < op->n_params; a++) {
        int64_t q = op->params[a], at = off[q];
        if (a > 0 && at != end) {
            if (at != (end + 7) / 8 * 8) return DM_ARENA_SCATTERED;
            exact = 0;
        }
        end = at + dm_matrix_elems(m, &mx[q]);
    }
    *start = off[op->params[0]];
    *span = end - *start;
    return exact ? DM_ARENA_EXACT : DM_ARENA_SPAN;
}

int dm_arena_fits_in_place(const dm_op *op, dm_arena_fit f, int64_t span, int n)
{
    switch (op->kind) {
    case DM_OP_REDUCE:
    case DM_OP_BROADCAST:
    case DM_OP_ALLREDUCE: return f == DM_ARENA_EXACT || (f == DM_ARENA_SPAN && op->parts <= 1);
    case DM_OP_REDUCESCATTER: return (f == DM_ARENA_EXACT && n > 0 && span % n == 0) || (f == DM_ARENA_SPAN && n == 1);
    case DM_OP_ALLGATHER: return f != DM_ARENA_SCATTERED && n == 1;
    default: return 0;
    }
}

int dm_arena_in_place(const dm_model *m, const dm_matrix *mx, const int64_t *off, const dm_op *op, int n)
{
    int64_t start, span;
    dm_arena_fit f = dm_arena_fit_of(m, mx, off, op, &start, &span);
    return dm_arena_fits_in_place(op, f, span, n);
}

int dm_arena_mark(const dm_model *m, dm_program *p, dm_err *err)
{
    dm_matrix *mx = NULL;
    int64_t n = 0, *off = NULL;
    const char *env = getenv("DM_COLL_STAGE");
    int all = env && strcmp(env, "1") == 0;
    if (dm_model_matrices(m, -1, &mx, &n, err) < 0) return -1;
    if (!(off = dm_malloc((size_t)(n ? n : 1) * sizeof *off, err)) || dm_arena_layout(m, mx, n, p, off, err) < 0) {
        free(off), free(mx);
        return -1;
    }
    /* a collective's members name the same params, group and kind: decided for its first
     * member's op, the others take that op's decision unless theirs differs */
    const dm_op **first = dm_calloc((size_t)p->n_colls + 1, sizeof *first, err);
    if (!first) {
        free(off), free(mx);
        return -1;
    }
    for (int r = 0; r < p->nranks; r++)
        for (int k = 0; k < p->ranks[r].n_ops && p->ranks[r].share == r; k++) { /* a shared list once */
            dm_op *op = &p->ranks[r].ops[k];
            if (!dm_op_is_collective(op->kind) || op->payload == DM_PAYLOAD_GRAM) { /* a Gram: its own buffer */
                op->staged = 0;
                continue;
            }
            int c = op->coll >= 0 && op->coll < p->n_colls ? op->coll : -1;
            const dm_op *f = c >= 0 ? first[c] : NULL;
            if (f && f->kind == op->kind && f->group == op->group && f->parts == op->parts && f->params == op->params &&
                f->n_params == op->n_params) {
                op->staged = f->staged;
                continue;
            }
            int bad = 0;
            for (int a = 0; a < op->n_params; a++) bad |= op->params[a] < 0 || op->params[a] >= n;
            if (bad || op->group < 0 || op->group >= p->n_groups) op->staged = 1;
            else op->staged = all || !dm_arena_in_place(m, mx, off, op, p->groups[op->group].n);
            if (c >= 0 && !f) first[c] = op;
        }
    free(off), free(mx), free(first);
    return 0;
}
