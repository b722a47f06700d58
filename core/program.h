/* program.h: the step program, the contract between the scheduler (which writes it) and the two
 * interpreters, the simulator and the real executor (which run it). See DESIGN.md.
 *
 * Per rank an ordered list of ops. An op's id is its index in its rank's list; dependencies
 * name earlier ops of the same rank. Ops on one stream run in list order; an op starts when its
 * stream is free and all its dependencies are done. A collective op carries a collective id
 * shared by every member of its group; members hold their ops of one group in the same order.
 *
 * Units: bytes in bytes, flops in floating-point operations, times (elsewhere) in microseconds.
 * For collectives `bytes` is the nccl-tests "size": all-reduce/broadcast/reduce: the buffer;
 * all-gather: the gathered output; reduce-scatter: the input before scattering. */
#ifndef DM_PROGRAM_H
#define DM_PROGRAM_H
#include <stdint.h>
#include <stdio.h>

#include "dm_error.h"
#include "workload.h"

typedef enum {
    DM_OP_FORWARD,
    DM_OP_BACKWARD,
    DM_OP_BROADCAST,
    DM_OP_REDUCE,
    DM_OP_ALLREDUCE,
    DM_OP_ALLGATHER,
    DM_OP_REDUCESCATTER,
    DM_OP_NS,          /* Newton-Schulz of `batch` matrices of m x n (m <= n) */
    DM_OP_MUON_UPDATE, /* momentum + scaled update of the params (elementwise) */
    DM_OP_ADAMW,       /* AdamW of the params (elementwise) */
    DM_OP_WAIT,        /* no work: a join point for dependencies */
    DM_OP__COUNT
} dm_op_kind;

/* Streams of a rank. compute-lo: a second compute stream at the lowest priority, beside
 * `compute` on the same GPU (the optimizer's ops under the backward, --ns-under-backward stream:
 * they take what the backward leaves of the GPU; the simulator shares the GPU between the two by
 * the cluster's lo_main_rate and lo_rate). */
typedef enum { DM_STREAM_COMPUTE, DM_STREAM_COMM_HI, DM_STREAM_COMM_LO, DM_STREAM_COMPUTE_LO, DM_STREAM__COUNT } dm_stream;
/* The stream an op of a program of `nranks` ranks runs on, in both interpreters: its own, except
 * that with one rank the collectives' streams (comm-hi, comm-lo) are the compute stream. A group
 * of one has nothing to overlap (every collective is the identity, or a local copy when staged),
 * and on one H200 the compute stream waiting on the collective streams' events cost every kernel
 * queued behind them ~1.4 us (a 1024-token backward 12-17% slower under dmuon and adamw than
 * under muon-ddp; all on one stream, the same kernel speed: traces/device/queueprobe-2026-12-04).
 * compute-lo stays its own. */
static inline int dm_run_stream(int nranks, int stream)
{
    return nranks == 1 && (stream == DM_STREAM_COMM_HI || stream == DM_STREAM_COMM_LO) ? DM_STREAM_COMPUTE : stream;
}
/* The streams that may run collectives (compute, comm-hi, comm-lo: the first three; compute-lo
 * runs none): the executor's packing buffer per stream (core/memory.h counts them). */
#define DM_STREAM_COLL_COUNT 3

/* The NS algorithm and the element types: the one definition, used by the scheduler, both
 * interpreters and the kernels (kernels/ns_cuda.h, ns_ref.h). */
typedef enum { DM_NS_DIRECT = 0, DM_NS_GRAM = 1 } dm_ns_algo;

typedef enum { DM_DT_BF16 = 0, DM_DT_FP16 = 1, DM_DT_FP32 = 2 } dm_dtype;

/* What a collective's buffer holds: the weights of its params (fetches: broadcast, weight
 * all-gathers) or their gradients (reduce, all-reduce, reduce-scatter, gradient all-gathers), or
 * (gram: an all-reduce of one param) the n x n Gram of a split NS's iteration (below: an NS op
 * with parts > 1), summed over the split's ranks: symmetric, so its upper triangle moves,
 * dm_gram_elems(n) elements packed row by row. Compute ops carry none. */
typedef enum { DM_PAYLOAD_NONE = 0, DM_PAYLOAD_WEIGHTS = 1, DM_PAYLOAD_GRADS = 2, DM_PAYLOAD_GRAM = 3 } dm_payload;
/* Elements of a gram payload of an n x n Gram: its upper triangle, n (n + 1) / 2. */
static inline double dm_gram_elems(int64_t n) { return (double)n * (double)(n + 1) / 2; }

/* NS iterations of an op that does not say (the cost model's count; program files written
 * before ops carried it). */
#define DM_NS_ITERS_DEFAULT 5

/* Gram restarts: bit k set = restart before iteration k (bits 0 and >= iters have no effect);
 * the default restarts once, before iteration 2: iterations {0, 1}, restart, {2, ...}. */
#define DM_NS_RESTART_BIT(k) (UINT32_C(1) << (k))
#define DM_NS_RESTARTS_DEFAULT DM_NS_RESTART_BIT(2)
static inline int dm_ns_restart_before(uint32_t restarts, int k)
{
    return k > 0 && k < 32 && (restarts & DM_NS_RESTART_BIT(k));
}
/* FLOPs of one NS of `iters` iterations on an m x n matrix: matrix products only, 2 M N K each,
 * r = min(m, n), l = max(m, n). direct, per iteration: X X^T 2 r^2 l, A A 2 r^3, B X 2 r^2 l.
 * Gram: R = X X^T at the start and at each restart; per iteration R R 2 r^3, Q <- P Q 2 r^3 (not
 * on a segment's first iteration), R <- P R P 4 r^3 (not on a segment's last); X <- Q X 2 r^2 l
 * at each restart and at the end. Not counted: normalization, the elementwise polynomial sums
 * (O(r l)). symmetric = 1 counts the products whose result is symmetric (X X^T, A A, R R, the
 * second product of P R P) at half, as kernels that compute one triangle do. The one formula of
 * the cost model, the kernels and their benchmarks. */
double dm_ns_flops_ex(int64_t m, int64_t n, int iters, dm_ns_algo algo, uint32_t restarts, int symmetric);

typedef struct dm_op {
    /* (ordered by size, the enums and flags in 8-bit fields: a 4096-rank plan holds millions of ops,
     * and every pass over them reads whole ones; 112 bytes where they were 152) */
    int id;             /* index in the rank's list (set by dm_program_add_op) */
    int layer;          /* global layer index, -1 if none */
    int n_deps;
    int coll;           /* collective id, -1 if not a collective */
    int group;          /* index into dm_program.groups, -1 if not a collective */
    int root;           /* global root rank for broadcast/reduce, else -1 */
    int batch;          /* NS: matrices in the batch */
    int iters;          /* NS: Newton-Schulz iterations (DM_NS_ITERS_DEFAULT); other ops 0 */
    int n_params;
    int work;           /* forward/backward: index into dm_program.works, the kernels the op
                           computes (workload.h); adamw/muon-update: its update kernels, one per
                           tensor (DM_KOP_ADAMW / DM_KOP_MUON_UPDATE: what prices it tensor by
                           tensor); -1 for none (then flops/bytes alone describe it) */
    int part, parts;    /* broadcast/reduce/all-reduce: parts > 1: the op moves only flat part `part` of
                           `parts` of its params' flat buffer (the params in order, each whole;
                           the reduce-scatter layout: part k is [k ceil(T/n), (k+1) ceil(T/n))
                           of T elements, core/holds.h's dm_flat_shard); bytes are that part's.
                           0 (default): the whole buffer */
    int tall;           /* NS: how many of its matrices are stored tall (rows > cols: the executor
                           runs their NS on the transpose, a plan of its own); 0 .. batch */
    int stage;          /* a split NS (--ns-split): an NS op with parts > 1 runs the direct NS of
                           its one matrix (stored tall or square: m x n with m <= n is its
                           transpose or itself, so `part` is the flat part of rows, the stored
                           rows split into parts, each a contiguous slice) over the ranks of a
                           group, each rank its slice (kernels/ns_ref.h ns_split_*): stage 2k
                           the slice's Gram of iteration k (k = 0: after the momentum), then a
                           gram all-reduce in the split's group, then stage 2k + 1 the step of
                           iteration k; 0 .. 2 iters - 1. A muon-update with parts > 1 updates
                           that part. Other ops 0 */
    dm_op_kind kind : 8;
    dm_stream stream : 8;
    dm_ns_algo algo : 8;     /* NS algorithm */
    dm_dtype dtype : 8;      /* element type of the payload */
    dm_payload payload : 8;  /* collectives: weights or gradients; compute ops: none */
    dm_payload implied : 8;  /* the payload the ops before it imply (set by dm_program_add_op; see
                                the implied payload's rule below): what a file that does not say means */
    unsigned staged : 8;     /* collectives: 1 when the GPU executor packs the op's params into its
                                collective buffer around the call (and unpacks), 0 when the call
                                runs in place on its arenas (core/arena.h: dm_arena_mark sets it
                                from the arenas' layout; the simulator and the calibration price
                                the copies of staged ops only, core/coll.h). Default (a file that
                                does not say): dm_op_staged_default, what the executor did before
                                the layout followed the program; compute ops 0 */
    unsigned eager : 4;      /* NS: 1 when its kernels are launched one by one, as PyTorch's eager
                                mode runs them (no CUDA graph; the PyTorch forms of muon-ddp and
                                muon-fsdp); 0 (default): one graph replay. JSON "launch": "eager" */
    unsigned publish : 4;    /* weight fetches (broadcast, all-gather of weights): 1 when the fetch
                                runs after this step's updates of its params and carries the new
                                weights to the next step's forward (--publish: the first layers'
                                fetch at the step's end; the CPU executor writes them to its
                                staged weights, committed with the step, the GPU executor in
                                place and runs them again on a skipped step: a skipped step
                                keeps the committed weights either way);
                                0 (default): the fetch carries the weights committed before the
                                step. JSON "publish": 1 */
    int *deps;          /* ids of earlier ops of this rank */
    int64_t *params;    /* matrix ids (dm_matrix.id over all roles) the op reads or writes; shared
                           with the other ops that carry the same list (dm_program.plists) */
    double bytes;       /* collective size (see above); compute ops: HBM bytes moved */
    double flops;       /* compute ops: floating-point operations */
    int64_t m, n;       /* NS: matrix shape, m <= n */
} dm_op;

/* Rows of a split NS op's slice (parts > 1): its long side over parts, rounded up. */
static inline int64_t dm_ns_split_rows(const dm_op *o)
{
    int64_t l = o->m < o->n ? o->n : o->m, P = o->parts > 1 ? o->parts : 1;
    return (l + P - 1) / P;
}

/* What a compute op computes, kernel by kernel (workload.h: GEMMs with their pass, batched
 * attention and expert GEMMs, elementwise passes). Shared by every rank that runs such an op;
 * the simulator prices exactly these kernels and the executor runs exactly these. */
typedef struct dm_work {
    int n;
    dm_kernel *k;
} dm_work;

typedef struct dm_group {
    int n;
    int *ranks;         /* ascending global ranks */
} dm_group;

typedef struct dm_rank_prog {
    int n_ops, cap;
    dm_op *ops;
    /* dm_program_add_op's memory of the gradients the list produced so far, one bit each: per
     * param id (n_grad_param bits; a 4096-rank MoE plan holds 4096 of them) and per layer (a
     * backward without params; n_grad_layer bits), 1 when produced */
    unsigned char *grad_param, *grad_layer;
    int64_t n_grad_param;
    int n_grad_layer;
    /* the gradient-producing ops before op `marked` have their params marked in grad_param; the
     * later ones' are marked when an all-gather asks, and then only when its list's ids meet the
     * range of the produced ones, prod_lo .. prod_hi (prod_hi < prod_lo: none): a plan's
     * all-gathers mostly come before any gradient or (ZeRO-3's in backward) before their layer's,
     * and a 4096-rank MoE plan's lists hold ~150,000 ids a rank */
    int marked;
    int64_t prod_lo, prod_hi;
    /* the ops' deps arrays (params: dm_program.plists), carved from blocks that never move (1 KiB
     * doubling to 64 KiB, carved from the program's slab; not two allocations per op: a 4096-rank
     * program has millions of ops); freed with the program */
    struct dm_arena_blk *arena;
    /* Ranks whose lists are equal share one (data-parallel ranks run the same ops): `share` is
     * the rank whose array `ops` is (this rank's own index when it owns it; 0, rank 0's, when the
     * program is new). A rank follows its owner while every op added to it equals the owner's op
     * at that index; the first that differs gives it a copy of its own (dm_program_add_op).
     * Readers see no difference: ops[0 .. n_ops) is the rank's list either way, and must not be
     * written through a rank that does not own it (dm_program_own_rank first). `followers`:
     * how many ranks share this rank's array. */
    int share, followers;
    /* 1 when `ops` was carved from the program's slab (dm_program.slab: freed with the program,
     * never alone); 0 when it is its own allocation */
    int in_slab;
} dm_rank_prog;

typedef struct dm_program {
    char *model;        /* model name */
    char *strategy;     /* adamw, muon-ddp, muon-fsdp, muon-rr, dmuon */
    char *cluster;      /* cluster name */
    char *options;      /* human-readable option summary, e.g. "balance=lpt overlap=prefetch:1 zero=2" */
    int nranks;
    int gpus_per_node;
    int64_t tokens;     /* tokens per rank per step */
    int64_t seq_len;    /* tokens per sample of the main stream (0: tokens, one sample) */
    int64_t causal_tile; /* 0: attention products whole; > 0: causal self-attention as its lower
                            triangle down to tiles of this many rows (workload.h) */
    int layer_passes;    /* 1: the layers' kernels include the passes between projections (rotary
                            embeddings, activations, residual adds: workload.h); 0: a program
                            written before them (the field absent) or planned --layer-passes off */
    int n_groups, cap_groups;
    dm_group *groups;
    int n_colls;        /* collective ids are 0 .. n_colls-1 */
    int n_works, cap_works;
    dm_work *works;     /* the compute ops' kernel lists (dm_op.work) */
    /* The ops' params lists, each distinct list stored once (dm_program_add_op interns them:
     * every member's op of a collective, every rank's forward of a layer, carry the same ids;
     * an MoE op carries hundreds). The lists are shared: never written through an op. */
    struct dm_plist_tab *plists;
    struct dm_prange_tab *prange; /* the lists' id ranges, as implied_payload last asked (program.c) */
    struct dm_work_tab *wtab; /* the works dm_program_intern_work added, by content */
    struct dm_unshare_memo *umemo; /* the last unshared rank's replayed gradient memory (program.c) */
    /* the ranks' op arrays made at their reserved or copied size (dm_program_reserve, a rank's
     * first op that differs from its owner's), carved one after another from large blocks: at
     * 4096 ranks they are hundreds of MB, and in large blocks they take huge pages (dm_error.h) */
    struct dm_arena_blk *slab;
    char *ns_coeffs;    /* the NS coefficient set the program's NS ops run (kernels/ns_ref.h's
                           ns_coeffs_from_spec name, e.g. "jordan" for the PyTorch forms); NULL:
                           the executors' default. `run --ns-coeffs` overrides it */
    dm_rank_prog *ranks; /* nranks entries */
} dm_program;

/* 1 when a and b hold the same groups, works and ops on every rank (every field of every op,
 * its deps and params): the same step to both interpreters, whatever their header strings
 * (options, strategy label) say. A comparison in memory, no serialization (cf. dm_program_hash). */
int dm_program_same_ops(const dm_program *a, const dm_program *b);
/* The ops of every rank's list, summed (a shared list counted once per rank that runs it). */
int64_t dm_program_ops(const dm_program *p);

/* 1 when rank r (> 0) runs the very list of rank r - 1: the same shared array and length
 * (dm_rank_prog.share), so whatever depends on the list alone is that rank's again. */
static inline int dm_rank_same_list_as_prev(const dm_program *p, int r)
{
    return r > 0 && p->ranks[r].ops == p->ranks[r - 1].ops && p->ranks[r].n_ops == p->ranks[r - 1].n_ops;
}

/* Construction. Strings are copied. Returned program owned by the caller (dm_program_free). */
dm_program *dm_program_new(int nranks, int gpus_per_node, const char *model, const char *strategy,
                           const char *cluster, const char *options, int64_t tokens, dm_err *err);
void dm_program_free(dm_program *p); /* accepts NULL */

/* Returns the index of the group with these ranks (sorted copy; identical groups are shared),
 * or -1 on error. */
int dm_program_group(dm_program *p, const int *ranks, int n, dm_err *err);

/* The same without looking for an equal group first (readers, which check for duplicates once
 * over all groups): the new group's index, or -1. */
int dm_program_add_group(dm_program *p, const int *ranks, int n, dm_err *err);

/* Add a work of n kernels (copied); returns its index, or -1 on error. */
int dm_program_add_work(dm_program *p, const dm_kernel *k, int n, dm_err *err);
/* The same, once per content: the index of the work an earlier call added with kernels equal to
 * k[0..n), else a new one (the update ops' works, which many ops share). */
int dm_program_intern_work(dm_program *p, const dm_kernel *k, int n, dm_err *err);

/* A fresh collective id (the caller adds one op with it to every member rank). */
int dm_program_new_coll(dm_program *p);

/* Append a copy of *op (its id, deps and params fields are ignored) with the given deps and
 * params to rank's list. Returns the new op's id, or -1 on error. deps/params are copied. */
int dm_program_add_op(dm_program *p, int rank, const dm_op *op, const int *deps, int n_deps,
                      const int64_t *params, int n_params, dm_err *err);

/* Make room for cap ops in rank's list (a hint only while the rank shares its owner's list).
 * 0, or -1 on error. */
int dm_program_reserve(dm_program *p, int rank, int cap, dm_err *err);

/* Give rank a list of its own, ops, deps and params copied (no longer shared with any other
 * rank or op), so that it can be changed in place. 0, or -1 on error. */
int dm_program_own_rank(dm_program *p, int rank, dm_err *err);

/* Every rank's list becomes rank 0's whole list: for a builder that emitted rank 0's ops alone
 * because every rank runs the same (the other ranks must hold no op and follow rank 0, as a new
 * program's do). 0, or -1 (err set) when a rank does not. */
int dm_program_replicate(dm_program *p, dm_err *err);

/* K steps of program p back to back in one program (*out, owned by the caller): step k's ops
 * follow step k-1's on every stream (list order), its collectives get ids of their own, and
 * what carries over between steps becomes dependencies on the same rank: an op that reads a
 * parameter's weights (forward, backward, a weight fetch) waits on the previous step's last
 * write of them (muon-update, adamw, or a fetch that publishes them: dm_op.publish), and a backward that writes a parameter's gradient waits on the
 * previous step's last reader of that gradient (its gradient collectives, NS, AdamW). Nothing
 * else orders the steps: no barrier between them (`sim --steps`). 0, or -1 with err. */
int dm_program_unroll(const dm_program *p, int K, dm_program **out, dm_err *err);

/* Ranks that own their op list (the distinct lists held in memory; dm_rank_prog.share). */
int dm_program_distinct_lists(const dm_program *p);
/* Parameter ids the program holds: its distinct params lists' lengths summed. */
int64_t dm_program_params_held(const dm_program *p);

/* An op template with everything "none": layer/coll/group/root -1, batch 1, the kind's
 * payload (dm_op_payload_default), NS ops DM_NS_ITERS_DEFAULT iterations. */
dm_op dm_op_init(dm_op_kind kind, dm_stream stream);
/* broadcast and all-gather: weights; reduce, all-reduce, reduce-scatter: gradients; compute
 * ops: none. A gradient all-gather (muon-fsdp) says so in its payload. */
dm_payload dm_op_payload_default(dm_op_kind kind);
/* dm_op.staged when a program does not say: 1 for reduce-scatter and all-gather, 0 otherwise. */
int dm_op_staged_default(dm_op_kind kind);

const char *dm_op_kind_name(dm_op_kind k);   /* "forward", "all-reduce", "ns", ... */
const char *dm_stream_name(dm_stream s);     /* "compute", "comm-hi", "comm-lo", "compute-lo" */
const char *dm_ns_algo_name(dm_ns_algo a);   /* "direct", "gram" */
const char *dm_dtype_name(dm_dtype d);       /* "bf16", "fp16", "fp32" */
const char *dm_payload_name(dm_payload p);   /* "none", "weights", "grads" */
size_t dm_dtype_size(dm_dtype d);            /* bytes: 2, 2, 4 */
/* Names back to values; -1 (and err set, "unknown NS algorithm 'x' (expected direct or gram)")
 * on an unknown name. */
int dm_ns_algo_parse(const char *name, dm_ns_algo *out, dm_err *err);
int dm_dtype_parse(const char *name, dm_dtype *out, dm_err *err);
int dm_op_is_collective(dm_op_kind k);
/* forward, backward, ns, muon-update, adamw: the kinds that run on a rank's GPU, one at a time */
int dm_op_is_compute(dm_op_kind k);

/* The implied payload (dm_op.implied): for an all-gather, gradients when an earlier op of its
 * rank produced or reduced a gradient of one of its params (a backward, reduce, all-reduce or
 * reduce-scatter naming it; a backward without params, of the all-gather's layer), else weights;
 * for other kinds, dm_op_payload_default. It is the rule of program files that do not state a
 * payload (written before ops carried one) and the default the writer leaves out. dm_program_add_op
 * computes it as ops are added (an op's kind and params must not change after). */

/* Bytes a step moves across node boundaries (nodes of gpus_per_node consecutive ranks), by the
 * ring algorithm NCCL runs collectives with: a collective over members on m > 1 nodes crosses m
 * boundaries, each carrying its size times nccl-tests' bus factor over n members (broadcast and
 * reduce 1, all-reduce 2(n-1)/n, all-gather and reduce-scatter (n-1)/n); within a node, 0.
 * *spanning (when not NULL): the collectives that span nodes. */
double dm_program_internode_bytes(const dm_program *p, long *spanning);

/* Serialization (program_io.c): deterministic JSON; read back with positioned errors. */
int dm_program_write_json(const dm_program *p, FILE *f, dm_err *err);
int dm_program_save(const dm_program *p, const char *path, dm_err *err); /* atomic */
int dm_program_load(const char *path, dm_program **out, dm_err *err);
/* A 64-bit hash of the program's content (program.c): its header strings and numbers, groups,
 * works and every rank's ops, field by field as the JSON form carries them (a program and its file
 * read back hash alike; so do equal programs on every rank). Each shared op list is hashed once,
 * so it costs one pass over the distinct lists, not a serialization of every rank's. (Before
 * 2026-12-03 it was FNV-1a of the JSON text: older notes' hashes are of that form.) */
uint64_t dm_program_hash(const dm_program *p);
/* Reject: a collective missing on a member rank or on a non-member, collectives of one group in
 * different orders across ranks or differing between members (kind, group, root, bytes,
 * payload), dependencies on later/unknown ops (a cycle), bad groups/roots, a collective without
 * a payload or a compute op with one, NS iterations outside 1..64 (0 elsewhere).
 * The message names the rank, op id and collective. */
int dm_program_validate(const dm_program *p, dm_err *err);
/* Reject an op naming a param outside [0, n) (n: the model's matrices, dm_model_matrices), each
 * shared op list read once: for a program read from a file, beside dm_program_validate, which
 * does not know the model. "program: rank R op I (KIND) names param Q; the model has N". */
int dm_program_check_params(const dm_program *p, int64_t n, dm_err *err);
/* The same for one op, rank r's op i (the walks that check only the ops they read). */
int dm_op_check_params(const dm_op *op, int r, int i, int64_t n, dm_err *err);

#endif
