/* fuzz_model_check.c: invariants and round trip of an accepted model (fuzz_model_check.h). */
#include "fuzz_model_check.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz_util.h"

/* Expansion allocates one record per matrix: keep it to models of sane size. */
#define MAX_EXPAND ((int64_t)1 << 20)

static void check_invariants(const dm_model *m)
{
    FUZZ_CHECK(m->name && m->source && m->path);
    FUZZ_CHECK(m->n_stacks >= 1 && m->n_tensors >= 1);
    int layers = 0;
    for (int i = 0; i < m->n_stacks; i++) {
        FUZZ_CHECK(m->stacks[i].layers >= 1);
        FUZZ_CHECK(m->stacks[i].first_global == layers);
        layers += m->stacks[i].layers;
    }
    FUZZ_CHECK(m->n_layers == layers);
    for (int i = 0; i < m->n_tensors; i++) {
        const dm_tensor *t = &m->tensors[i];
        FUZZ_CHECK(t->name && t->note);
        FUZZ_CHECK(t->ndim == 1 || t->ndim == 2);
        FUZZ_CHECK(t->rows >= 1 && t->cols >= 1 && (t->ndim == 2 || t->cols == 1));
        FUZZ_CHECK(t->stack >= 0 && t->stack < m->n_stacks);
        FUZZ_CHECK(t->first_layer >= 0 && t->layer_span >= 1);
        FUZZ_CHECK(t->first_layer + t->layer_span <= m->stacks[t->stack].layers);
        FUZZ_CHECK(t->count >= 1 && t->count % t->layer_span == 0);
        FUZZ_CHECK(t->role == DM_ROLE_MUON || t->role == DM_ROLE_ADAMW);
    }
}

static void check_expansion(const dm_model *m)
{
    int64_t total = 0;
    for (int i = 0; i < m->n_tensors; i++) total += m->tensors[i].count;
    if (total > MAX_EXPAND) return;
    (void)dm_model_params(m);
    FUZZ_CHECK(dm_model_count_role(m, DM_ROLE_MUON) + dm_model_count_role(m, DM_ROLE_ADAMW) == total);
    dm_matrix *mx = NULL;
    int64_t n = -1;
    dm_err err = {{0}};
    FUZZ_CHECK(dm_model_matrices(m, -1, &mx, &n, &err) == 0);
    FUZZ_CHECK(n == total);
    int64_t *seen = calloc((size_t)m->n_tensors, sizeof *seen);
    FUZZ_CHECK(seen != NULL);
    for (int64_t k = 0; k < n; k++) {
        FUZZ_CHECK(mx[k].id == k);
        FUZZ_CHECK(mx[k].tensor >= 0 && mx[k].tensor < m->n_tensors);
        const dm_tensor *t = &m->tensors[mx[k].tensor];
        FUZZ_CHECK(mx[k].index >= 0 && mx[k].index < t->count);
        FUZZ_CHECK(mx[k].layer >= 0 && mx[k].layer < m->n_layers);
        FUZZ_CHECK(k == 0 || mx[k].layer >= mx[k - 1].layer);
        seen[mx[k].tensor]++;
    }
    for (int i = 0; i < m->n_tensors; i++) FUZZ_CHECK(seen[i] == m->tensors[i].count);
    free(seen);
    free(mx);
}

static void check_roundtrip(const dm_model *m)
{
    const char *p2 = fuzz_tmp_path("written.json");
    dm_err err = {{0}};
    FUZZ_CHECK(dm_model_write(m, p2, &err) == 0);
    dm_model *r = NULL;
    if (dm_model_load_file(p2, &r, &err) != 0) fprintf(stderr, "reload failed: %s\n", err.msg);
    FUZZ_CHECK(r != NULL);
    FUZZ_CHECK(strcmp(r->name, m->name) == 0 && strcmp(r->source, m->source) == 0);
    FUZZ_CHECK(r->published_params == m->published_params);
    FUZZ_CHECK(r->n_stacks == m->n_stacks && r->n_tensors == m->n_tensors);
    for (int i = 0; i < m->n_stacks; i++) {
        FUZZ_CHECK(strcmp(r->stacks[i].name, m->stacks[i].name) == 0);
        FUZZ_CHECK(r->stacks[i].layers == m->stacks[i].layers);
    }
    for (int i = 0; i < m->n_tensors; i++) {
        const dm_tensor *a = &m->tensors[i], *b = &r->tensors[i];
        FUZZ_CHECK(strcmp(a->name, b->name) == 0 && strcmp(a->note, b->note) == 0);
        FUZZ_CHECK(a->ndim == b->ndim && a->rows == b->rows && a->cols == b->cols);
        FUZZ_CHECK(a->count == b->count && a->stack == b->stack && a->role == b->role);
        FUZZ_CHECK(a->first_layer == b->first_layer && a->layer_span == b->layer_span);
    }
    dm_model_free(r);
}

void fuzz_check_model(const dm_model *m)
{
    check_invariants(m);
    check_expansion(m);
    check_roundtrip(m);
}
