#!/usr/bin/env python3
"""gen_models.py: build the bundled model descriptions (models/*.json, format "dmuon-model-1")
from the reference tensor list (reference/model-shapes.json).

Usage: tools/gen_models.py PATH/TO/model-shapes.json [OUTDIR]   (OUTDIR defaults to models/)

The reference lists tensors by name, shape, rep (how many tensors the name stands for) and a
class (M: Muon, A: AdamW, P: policy choice, -: not trained). Its quirks are mapped here by hand:
  - "layers.[a..b].x" entries get first_layer = a, layer_span = b - a + 1;
  - "a/b" names (gate_proj/up_proj, w1/w3) become two entries with half the rep each;
  - "{e}" (expert) entries keep the name and have count = experts x MoE layers;
  - 1-D aggregate entries ("{scale,bias}", "MTP ... total", "ffn biases") are expanded into the
    real tensors, and the script asserts that the expansion adds up to the aggregate;
  - P: routers and other 2-D mixing projections -> muon (Moonlight's ndim >= 2 rule), conv patch
    embeddings -> adamw; small output heads (action_out_proj, action_proj_back) stay muon as the
    reference marks them (M), with a note: a role override moves them to adamw like lm_head;
  - "-" (frozen) entries are left out; they are counted in published_params.
published_params is the sum over all reference entries (the README table gives rounded totals).
Output is deterministic: models in reference order, tensors in forward order.
"""
import json
import math
import os
import re
import sys

ROUTER_NOTE = "router: muon under Moonlight's ndim>=2 rule (many stacks keep routers on AdamW/fp32)"
CONV_NOTE = "conv patch embedding, flattened to 2-D: adamw by policy"
HEAD_NOTE = "output head: muon as the reference classes it (M); often treated like lm_head (override to adamw)"


def numel(shape):
    return math.prod(shape)


class Model:
    def __init__(self, key, ref, stacks, source):
        self.key = key
        self.ref = ref
        self.stacks = stacks  # [(name, layers)] in forward order
        self.layers = dict(stacks)
        self.tensors = []
        self.source = source
        self.used = set()
        self.pending_final = []  # pi0.5: adaRMS tensors of the expert's final norm (head stack)

    def add(self, name, shape, count, stack, role, first=None, span=None, note=""):
        n = self.layers[stack]
        first = 0 if first is None else first
        span = n - first if span is None else span
        assert role in ("muon", "adamw"), role
        assert all(isinstance(d, int) and d > 0 for d in shape), (name, shape)
        assert 1 <= len(shape) <= 2, (name, shape)
        assert 0 <= first and span >= 1 and first + span <= n, (self.key, name, first, span, n)
        assert count % span == 0, (self.key, name, count, span)
        # key order as dm_model_write() writes it, so that load + write reproduces the file
        t = {"name": name, "shape": list(shape), "count": count, "stack": stack}
        if first != 0 or span != n:
            t["first_layer"] = first
            t["layer_span"] = span
        t["role"] = role
        note = note.strip().rstrip(";").strip()
        if note:
            t["note"] = note
        self.tensors.append(t)

    def entry(self, name):
        for i, e in enumerate(self.ref):
            if e["name"] == name:
                self.used.add(i)
                return e
        raise KeyError("%s: no reference entry %r" % (self.key, name))

    def published(self):
        return sum(numel(e["shape"]) * e["rep"] for e in self.ref)

    def check_all_used(self):
        missing = [e["name"] for i, e in enumerate(self.ref) if i not in self.used]
        assert not missing, (self.key, missing)

    def params(self):
        return sum(numel(t["shape"]) * t["count"] for t in self.tensors)


def role_of(e, name):
    """Role for a reference entry without a policy decision of its own."""
    c = e["cls"]
    if c == "M":
        return "muon"
    if c == "A":
        return "adamw"
    raise ValueError("policy entry %r needs an explicit role" % name)


LAYER_RE = re.compile(r"^(layers|visual\.blocks|blocks)\.(\*|\[(\d+)\.\.(\d+)\])\.(.*)$")
SPLIT_RE = re.compile(r"^(.*?)([A-Za-z0-9_]+)/([A-Za-z0-9_]+)(\.weight)$")


def add_layer_entry(m, e, moe=None, rename=None):
    """A "layers.*" / "layers.[a..b]" / "visual.blocks.*" entry. moe = (first, span) of the layers
    whose tensors have a rep different from the stack's layer count."""
    mt = LAYER_RE.match(e["name"])
    assert mt, e["name"]
    stack, rest = mt.group(1), mt.group(5)
    n = m.layers[stack]
    rest = rest.replace(" (router)", "")
    note = e["note"]
    role = None
    if e["cls"] == "P":
        assert ".gate.weight" in rest, e["name"]
        role, note = "muon", ROUTER_NOTE
    parts = [rest]
    sm = SPLIT_RE.match(rest)
    if sm:
        parts = [sm.group(1) + sm.group(2) + sm.group(4), sm.group(1) + sm.group(3) + sm.group(4)]
    count = e["rep"] // len(parts)
    assert count * len(parts) == e["rep"], e
    if mt.group(3) is not None:
        first, span = int(mt.group(3)), int(mt.group(4)) - int(mt.group(3)) + 1
    elif count % n == 0 and "{e}" not in rest:
        first, span = 0, n
    else:
        assert moe is not None, (m.key, e["name"])
        first, span = moe
    for p in parts:
        name = "%s.*.%s" % (stack, p)
        if rename:
            name = rename(name)
        m.add(name, e["shape"], count, stack, role or role_of(e, name), first, span, note)


def add_decoder(m, moe=None, special=None, skip=()):
    """Walk the reference in order; layer entries by rule, others through `special`
    (reference name -> callable(m, e) or stack name)."""
    special = special or {}
    for i, e in enumerate(m.ref):
        name = e["name"]
        if name in skip:
            continue
        m.used.add(i)
        if name in special:
            s = special[name]
            if callable(s):
                s(m, e)
            else:
                m.add(name, e["shape"], e["rep"], s, role_of(e, name), note=e["note"])
        else:
            add_layer_entry(m, e, moe)


def conv(newname, stack):
    def f(m, e):
        m.add(newname, e["shape"], e["rep"], stack, "adamw", note=e["note"] + "; " + CONV_NOTE)
    return f


def head_adamw(newname, stack):
    def f(m, e):
        m.add(newname, e["shape"], e["rep"], stack, "muon", note=HEAD_NOTE)
    return f


def split1d(names_dims, stack, note=""):
    """Expand a 1-D aggregate into named 1-D tensors; dims must add up to the aggregate."""
    def f(m, e):
        assert len(e["shape"]) == 1 and sum(d for _, d in names_dims) == e["shape"][0], \
            (m.key, e["name"], names_dims)
        for n, d in names_dims:
            m.add(n, [d], e["rep"], stack, role_of(e, n), note=note)
    return f


# ---------------------------------------------------------------------------------------------
def qwen_like(key, ref, hp):
    layers = ref[1]["rep"]
    m = Model(key, ref, [("embed", 1), ("layers", layers), ("head", 1)], hp)
    add_decoder(m, special={"model.embed_tokens.weight": "embed", "model.norm.weight": "head",
                            "lm_head.weight": "head"})
    return m


def qwen_vl(key, ref, hp, wall=False):
    stacks = [("embed", 1), ("visual.blocks", 32), ("visual.merger", 1)]
    if wall:
        stacks.append(("action_in", 1))
    stacks += [("layers", 36), ("head", 1)]
    m = Model(key, ref, stacks, hp)
    special = {"model.embed_tokens.weight": "embed", "model.norm.weight": "head",
               "visual.patch_embed.proj.weight (Conv3d)":
                   conv("visual.patch_embed.proj.weight", "embed")}
    for e in ref:
        if e["name"].startswith("visual.merger."):
            special[e["name"]] = "visual.merger"
        if e["name"].startswith("action_preprocessor."):
            special[e["name"]] = "action_in"
    if wall:
        special["action_preprocessor.action_proj_back.weight"] = \
            head_adamw("action_preprocessor.action_proj_back.weight", "head")
    # The visual tower runs before the language model: emit its entries first.
    order = sorted(range(len(ref)), key=lambda i: stack_rank(m, ref[i]["name"], special))
    m.ref = [ref[i] for i in order]
    add_decoder(m, special=special)
    return m


def stack_rank(m, name, special):
    s = special.get(name)
    if s is None:
        s = LAYER_RE.match(name).group(1)
    elif callable(s):
        s = "embed" if "patch_embed" in name else "head"
    return [k for k, _ in m.stacks].index(s)


def mla(key, ref, hp, layers, dense, mtp=False):
    """DeepSeek-V3 / Kimi-K2 / Moonlight: MLA attention, `dense` leading dense FFN layers."""
    stacks = [("embed", 1), ("layers", layers), ("head", 1)]
    if mtp:
        stacks.append(("mtp", 1))
    m = Model(key, ref, stacks, hp)
    mtp_names = [e["name"] for e in ref if e["name"].startswith("MTP ")]
    add_decoder(m, moe=(dense, layers - dense),
                special={"model.embed_tokens.weight": "embed", "model.norm.weight": "head",
                         "lm_head.weight": "head"}, skip=mtp_names)
    if mtp:
        add_mtp_v3(m)
    return m


def add_mtp_v3(m):
    """DeepSeek-V3's multi-token-prediction layer 61: one layer with the main MoE layer's shapes,
    plus eh_proj and three norms. Its embed_tokens and shared_head.head are stored copies of the
    main model's (shared): left out, so they are counted once."""
    for n in ("MTP layers.61.embed_tokens.weight", "MTP layers.61.shared_head.head.weight"):
        m.entry(n)
    e = m.entry("MTP layers.61.eh_proj.weight")
    m.add("mtp.*.eh_proj.weight", e["shape"], 1, "mtp", "muon", note="[embedding; hidden] -> hidden")
    e = m.entry("MTP layers.61.{enorm,hnorm,shared_head.norm}")
    split1d([("mtp.*.enorm.weight", 7168), ("mtp.*.hnorm.weight", 7168),
             ("mtp.*.shared_head.norm.weight", 7168)], "mtp")(m, e)
    main = [t for t in m.tensors if t["stack"] == "layers"]

    def copy(pred, agg_name):
        tot = 0
        for t in main:
            if not pred(t["name"]):
                continue
            per_layer = t["count"] // t.get("layer_span", m.layers["layers"])
            m.add(t["name"].replace("layers.*.", "mtp.*.", 1), t["shape"], per_layer, "mtp",
                  t["role"], note="as in the main MoE layers")
            tot += numel(t["shape"]) * per_layer
        e = m.entry(agg_name)
        assert tot == numel(e["shape"]) * e["rep"], (agg_name, tot, numel(e["shape"]))

    norms = ("self_attn.q_a_layernorm.", "self_attn.kv_a_layernorm.", "input_layernorm.",
             "post_attention_layernorm.")
    copy(lambda n: ".self_attn." in n and n.endswith("proj.weight") or "_mqa.weight" in n,
         "MTP layers.61 attention (q_a,q_b,kv_a,kv_b,o) total")
    copy(lambda n: any(("." + k) in n for k in norms), "MTP layers.61 norms (q_a,kv_a,in,post)")
    copy(lambda n: ".mlp.gate.weight" in n or ".mlp.experts." in n or ".mlp.shared_experts." in n,
         "MTP layers.61 MoE (router+experts+shared)")
    e = m.entry("MTP layers.61 gate bias")
    m.add("mtp.*.mlp.gate.e_score_correction_bias", e["shape"], 1, "mtp", "adamw",
          note="aux-loss-free bias (not gradient-trained)")


# ---------------------------------------------------------------------------------------------
def pi0(key, ref, hp):
    stacks = [("embed", 1), ("img.blocks", 27), ("img.head", 1), ("action_in", 1),
              ("llm.layers", 18), ("head", 1)]
    m = Model(key, ref, stacks, hp)
    pali = "llm.layers(PaliGemma Gemma-2B)."
    expert = "llm.layers(action expert gemma_300m, *_1)."

    def llm_name(rest, suffix):
        if "->" in rest:
            mod = "attn" if "einsum" in rest and "mlp" not in rest else "mlp"
            leaf = rest.split("->")[1]
            return "llm.layers.*.%s%s.%s" % (mod, suffix, leaf)
        mod, leaf = rest.split(".", 1)
        return "llm.layers.*.%s%s.%s" % (mod, suffix, leaf)

    out = {s: [] for s, _ in stacks}  # entries per stack, in reference order
    for e in ref:
        n = e["name"]
        if n.startswith(pali):
            out["llm.layers"].append((e, llm_name(n[len(pali):], "")))
        elif n.startswith(expert):
            out["llm.layers"].append((e, llm_name(n[len(expert):], "_1")))
        elif n.startswith("expert adaRMS Dense"):
            kind = "kernel" if n.endswith("kernel") else "bias"
            out["llm.layers"].append((e, "adarms:" + kind))
        elif n == "llm.embedder.input_embedding" or n.startswith("img.embedding") \
                or n == "img.pos_embedding":
            out["embed"].append((e, n))
        elif n.startswith("img.Transformer.encoderblock") or n.startswith("img.MHA") \
                or n.startswith("img.MlpBlock"):
            out["img.blocks"].append((e, n))
        elif n.startswith("img."):
            out["img.head"].append((e, n))
        elif n.startswith("llm.final_norm") or n.startswith("action_out_proj"):
            out["head"].append((e, n))
        else:
            out["action_in"].append((e, n))
    for s, _ in stacks:
        for e, n in out[s]:
            m.entry(e["name"])
            pi0_entry(m, e, n, s)
    return m


def pi0_entry(m, e, n, stack):
    shape, rep, note = e["shape"], e["rep"], e["note"]
    w = shape[-1]
    if n == "img.embedding (Conv 14x14x3->1152)":
        m.add("img.embedding.kernel", shape, rep, stack, "adamw", note=note + "; " + CONV_NOTE)
    elif n.startswith("adarms:"):
        # 37 = 18 layers x (pre_attention, pre_ffw) + final norm of the action expert
        assert rep == 37
        leaf = "kernel" if n.endswith("kernel") else "bias"
        for mod in ("pre_attention_norm_1", "pre_ffw_norm_1"):
            m.add("llm.layers.*.%s.dense.%s" % (mod, leaf), shape, 18, stack, role_of(e, n),
                  note=note)
        m.pending_final.append((leaf, shape, e))
    elif n.endswith("{scale,bias}"):
        base = n[:-len("{scale,bias}")]
        base = base.replace("img.Transformer.encoderblock.", "img.blocks.*.")
        base = base.replace("img.Transformer.", "img.")
        split1d([(base + "scale", w // 2), (base + "bias", w // 2)], stack)(m, e)
    elif n == "img.MHA.{q,k,v,out}.bias":
        split1d([("img.blocks.*.MHA.%s.bias" % p, w // 4) for p in ("query", "key", "value", "out")],
                stack)(m, e)
    elif stack == "img.blocks":
        m.add(n.replace("img.", "img.blocks.*.", 1), shape, rep, stack, role_of(e, n), note=note)
    elif n == "img.head.kernel (multimodal projector)":
        m.add("img.head.kernel", shape, rep, stack, role_of(e, n), note=note)
    elif n == "action_out_proj.kernel":
        m.add(n, shape, rep, stack, "muon", note=HEAD_NOTE)
    else:
        m.add(n, shape, rep, stack, role_of(e, n), note=note)
    if n == "llm.final_norm.scale":
        for leaf, shp, ee in m.pending_final:
            m.add("llm.final_norm_1.dense.%s" % leaf, shp, 1, stack, role_of(ee, leaf),
                  note="adaRMS of the action expert's final norm")


# ---------------------------------------------------------------------------------------------
def wan(key, ref, hp, dim, ffn, layers):
    m = Model(key, ref, [("embed", 1), ("blocks", layers), ("head", 1)], hp)
    for i, e in enumerate(ref):
        m.used.add(i)
        n, shape, rep, note = e["name"], e["shape"], e["rep"], e["note"]
        if n == "patch_embedding (Conv3d)":
            m.add("patch_embedding.weight", shape, rep, "embed", "adamw", note=note + "; " + CONV_NOTE)
        elif n == "text/time embedding biases":
            split1d([("text_embedding.0.bias", dim), ("text_embedding.2.bias", dim),
                     ("time_embedding.0.bias", dim), ("time_embedding.2.bias", dim),
                     ("time_projection.1.bias", 6 * dim)], "embed")(m, e)
        elif not n.startswith("blocks.") and not n.startswith("head."):
            m.add(n, shape, rep, "embed", role_of(e, n), note=note)
        elif n.startswith("head."):
            m.add(n, shape, rep, "head", role_of(e, n), note=note)
        elif n.endswith("attn.{q,k,v,o}.weight"):
            base = n[:-len("{q,k,v,o}.weight")]
            for p in "qkvo":
                m.add(base + p + ".weight", shape, rep // 4, "blocks", role_of(e, n), note=note)
        elif n == "blocks.*.{self,cross}_attn.{q,k,v,o}.bias":
            split1d([("blocks.*.%s_attn.%s.bias" % (a, p), dim) for a in ("self", "cross")
                     for p in "qkvo"], "blocks")(m, e)
        elif n == "blocks.*.{self,cross}_attn.norm_{q,k}.weight":
            split1d([("blocks.*.%s_attn.norm_%s.weight" % (a, p), dim) for a in ("self", "cross")
                     for p in "qk"], "blocks")(m, e)
        elif n == "blocks.*.norm3 (affine LN weight+bias)":
            split1d([("blocks.*.norm3.weight", dim), ("blocks.*.norm3.bias", dim)], "blocks")(m, e)
        elif n == "blocks.*.ffn biases":
            split1d([("blocks.*.ffn.0.bias", ffn), ("blocks.*.ffn.2.bias", dim)], "blocks")(m, e)
        else:
            assert n.startswith("blocks.*.") and rep == layers, n
            m.add(n, shape, rep, "blocks", role_of(e, n), note=note)
    return m


# ---------------------------------------------------------------------------------------------
def deepseek_v4(key, ref, hp, layers, dim, ratios):
    """DeepSeek-V4: hybrid compressed attention (cr 0 / 4 / 128 per layer), mHC mixing, hash-routed
    first layers. ratios: per-layer compress ratio list used only to place compressor entries;
    the format allows one contiguous layer range per entry, so each kind is given the range of its
    layers when they are contiguous, otherwise it is spread over a contiguous range of the right
    length and the note says so."""
    m = Model(key, ref, [("embed", 1), ("layers", layers), ("head", 1), ("mtp", 1)], hp)
    n4 = sum(1 for r in ratios if r == 4)
    n128 = sum(1 for r in ratios if r == 128)
    n0 = layers - n4 - n128
    # contiguous approximation: cr=0 layers first, then cr=4, then cr=128
    rng = {"4": (n0, n4), "128": (n0 + n4, n128), "c": (n0, n4 + n128)}
    approx = "placed on a contiguous layer range; the real model interleaves cr=4 and cr=128 layers"
    hash_layers = 3
    for i, e in enumerate(ref):
        n, shape, rep, note = e["name"], e["shape"], e["rep"], e["note"]
        if n.startswith("mtp.0"):
            continue
        m.used.add(i)
        if e["cls"] == "-":
            continue  # frozen hash-routing table: counted in published_params only
        if n == "embed.weight":
            m.add(n, shape, rep, "embed", "adamw", note=note)
            continue
        if n in ("norm.weight", "head.weight"):
            m.add(n, shape, rep, "head", "adamw", note=note)
            continue
        if n == "hc_head_fn":
            m.add(n, shape, rep, "head", "muon", note="mHC mixing projection: muon by the ndim>=2 rule")
            continue
        if n == "hc_head_{base,scale}":
            split1d([("hc_head_base", 4), ("hc_head_scale", 1)], "head")(m, e)
            continue
        assert n.startswith("layers.*."), n
        rest = n[len("layers.*."):]
        first, span = 0, layers
        cr = re.search(r" \[cr=(\d+)\]$", rest)
        if cr:
            rest = rest[:cr.start()]
            first, span = rng[cr.group(1)]
            note = (note + "; " if note else "") + "cr=%s layers, %s" % (cr.group(1), approx)
        elif rest.startswith("attn.compressor.norm"):
            assert rep == n4 + n128
            first, span = rng["c"]
            note = "layers with a compressor (cr=4 and cr=128)"
        elif rest.startswith("attn.indexer.compressor.norm"):
            first, span = rng["4"]
            note = "cr=4 layers (indexer), " + approx
        elif rest == "ffn.gate.bias":
            first, span = hash_layers, layers - hash_layers
        if rest == "ffn.gate.weight (router)":
            m.add("layers.*.ffn.gate.weight", shape, rep, "layers", "muon", note=ROUTER_NOTE)
        elif rest.startswith("ffn.experts.{e}.w1/w3") or rest.startswith("ffn.shared_experts.w1/w3"):
            base = rest.split("w1/w3")[0]
            for w in ("w1", "w3"):
                m.add("layers.*." + base + w + ".weight", shape, rep // 2, "layers", "muon",
                      note=note)
        elif rest == "hc_attn_fn / hc_ffn_fn":
            for w in ("hc_attn_fn", "hc_ffn_fn"):
                m.add("layers.*." + w, shape, rep // 2, "layers", "muon",
                      note=note + "; muon by the ndim>=2 rule")
        elif rest == "{attn_norm,ffn_norm}.weight":
            split1d([("layers.*.attn_norm.weight", dim), ("layers.*.ffn_norm.weight", dim)],
                    "layers")(m, e)
        elif rest == "hc_{attn,ffn}_{base,scale}":
            split1d([("layers.*.hc_attn_base", 24), ("layers.*.hc_attn_scale", 3),
                     ("layers.*.hc_ffn_base", 24), ("layers.*.hc_ffn_scale", 3)], "layers")(m, e)
        else:
            m.add("layers.*." + rest, shape, rep, "layers", role_of(e, n), first, span, note)
    add_mtp_v4(m, dim)
    return m


def add_mtp_v4(m, dim):
    """mtp.0: a cr=0 block (attention without compressor, MoE) plus e_proj/h_proj and norms."""
    main = [t for t in m.tensors if t["stack"] == "layers"]
    e = m.entry("mtp.0 Block (cr=0) matrices")
    tot = 0
    for t in main:
        if t["role"] != "muon" or "compressor" in t["name"] or "indexer" in t["name"] \
                or "hc_" in t["name"] or t["name"] == "layers.*.ffn.gate.weight":
            continue
        per = t["count"] // t.get("layer_span", m.layers["layers"])
        m.add(t["name"].replace("layers.*.", "mtp.*.", 1), t["shape"], per, "mtp", "muon",
              note="as in a cr=0 main layer")
        tot += numel(t["shape"]) * per
    assert tot == e["shape"][0], (tot, e["shape"])
    e = m.entry("mtp.0 router")
    m.add("mtp.*.ffn.gate.weight", e["shape"], 1, "mtp", "muon", note=ROUTER_NOTE)
    e = m.entry("mtp.0 hc_attn_fn/hc_ffn_fn + hc_head_fn")
    hc = [t for t in main if t["name"] == "layers.*.hc_attn_fn"][0]["shape"]
    hh = [t for t in m.tensors if t["name"] == "hc_head_fn"][0]["shape"]
    assert 2 * numel(hc) + numel(hh) == e["shape"][0]
    for w in ("hc_attn_fn", "hc_ffn_fn"):
        m.add("mtp.*." + w, hc, 1, "mtp", "muon", note="mHC mixing projection: muon by the ndim>=2 rule")
    m.add("mtp.*.hc_head_fn", hh, 1, "mtp", "muon", note="mHC mixing projection: muon by the ndim>=2 rule")
    e = m.entry("mtp.0 e_proj / h_proj")
    for w in ("e_proj", "h_proj"):
        m.add("mtp.*.%s.weight" % w, e["shape"], 1, "mtp", "muon")
    e = m.entry("mtp.0 norms, sink, gate bias, hc base/scale")
    ones = {}
    for t in main:
        if len(t["shape"]) == 1 and "compressor" not in t["name"] and "indexer" not in t["name"]:
            ones[t["name"].replace("layers.*.", "mtp.*.", 1)] = t["shape"][0]
    ones["mtp.*.hc_head_base"] = 4
    ones["mtp.*.hc_head_scale"] = 1
    for w in ("enorm", "hnorm", "norm"):
        ones["mtp.*.%s.weight" % w] = dim
    split1d(list(ones.items()), "mtp")(m, e)


# ---------------------------------------------------------------------------------------------
def build(ref):
    R = "reference/model-shapes.json"
    out = []

    def src(key, hp):
        return "%s entry \"%s\"; hyper-parameters: %s; published_params: sum of the reference " \
               "entries" % (R, key, hp)

    qwen_hp = "Qwen2.5 config.json (q/k/v carry a bias; tied embeddings up to 3B)"
    for k in ("Qwen2.5-0.5B", "Qwen2.5-1.5B", "Qwen2.5-3B", "Qwen2.5-7B", "Qwen2.5-14B",
              "Qwen2.5-32B", "Qwen2.5-72B"):
        out.append((k, qwen_like(k, ref[k], src(k, qwen_hp))))
    out.append(("Llama-3.2-3B", qwen_like("Llama-3.2-3B", ref["Llama-3.2-3B"],
                src("Llama-3.2-3B", "Llama 3.2 config.json (tied embeddings)"))))
    out.append(("Llama-3.1-8B", qwen_like("Llama-3.1-8B", ref["Llama-3.1-8B"],
                src("Llama-3.1-8B", "Llama 3.1 config.json"))))
    out.append(("Qwen2.5-VL-3B", qwen_vl("Qwen2.5-VL-3B", ref["Qwen2.5-VL-3B"],
                src("Qwen2.5-VL-3B", "Qwen2.5-VL-3B config.json (Qwen2.5-3B language model, "
                    "32-block vision tower, 2x2 patch merger)"))))
    # Named "WALL-OSS" (what the DMuon work calls it), file stem wall-oss-flow (the config).
    out.append(("WALL-OSS", qwen_vl("WALL-OSS-flow", ref["WALL-OSS-flow"],
                src("WALL-OSS-flow", "wall-x qwen2_5_moe_flash.json (Qwen2.5-VL-3B plus an action "
                    "FFN expert per layer and a flow head; the public WALL-OSS is consistent with "
                    "it)"), wall=True)))
    out.append(("pi0", pi0("pi0", ref["pi0"], src("pi0", "openpi gemma.py / siglip.py "
                "(PaliGemma Gemma-2B + SigLIP So400m/14 + gemma_300m action expert)"))))
    out.append(("pi0.5", pi0("pi0.5", ref["pi0.5"], src("pi0.5", "openpi gemma.py / siglip.py "
                "(pi0 with adaRMS conditioning in the action expert, no state_proj)"))))
    out.append(("Moonlight-16B-A3B", mla("Moonlight-16B-A3B", ref["Moonlight-16B-A3B"],
                src("Moonlight-16B-A3B", "Moonlight config.json (27 layers, 1 dense; 64 routed + "
                    "2 shared experts; MLA with q_lora_rank null)"), 27, 1)))
    out.append(("DeepSeek-V3", mla("DeepSeek-V3", ref["DeepSeek-V3"],
                src("DeepSeek-V3", "DeepSeek-V3 config.json (61 layers, 3 dense, 256 routed + "
                    "1 shared expert, 1 MTP layer)") + "; the MTP layer's stored copies of "
                "embed_tokens and shared_head.head (2 x 0.93 B) are shared with the main model and "
                "left out, so the file totals 0.27% less", 61, 3, mtp=True)))
    out.append(("Kimi-K2", mla("Kimi-K2", ref["Kimi-K2"],
                src("Kimi-K2", "Kimi-K2 config.json (DeepSeek-V3 layout, 384 experts, 64 heads, "
                    "1 dense layer, no MTP)"), 61, 1)))
    # DeepSeek-V4 compress ratios: leading cr=0 (Flash) / cr=128 (Pro) layers, then 4/128
    # alternating; only the counts matter here (see deepseek_v4()).
    for k, layers, dim in (("DeepSeek-V4-Flash", 43, 4096), ("DeepSeek-V4-Pro", 61, 7168)):
        e4 = [e for e in ref[k] if e["name"] == "layers.*.attn.compressor.wkv.weight [cr=4]"][0]
        e128 = [e for e in ref[k] if e["name"] == "layers.*.attn.compressor.wkv.weight [cr=128]"][0]
        ratios = [4] * e4["rep"] + [128] * e128["rep"] + [0] * (layers - e4["rep"] - e128["rep"])
        out.append((k, deepseek_v4(k, ref[k], src(k, "DeepSeek-V4 inference/model.py and "
                    "published config (hybrid compressed attention, mHC, 3 hash-routed layers, "
                    "1 MTP layer)") + "; the frozen hash-routing tables tid2eid (3 x %d, int32) "
                    "are not trained: counted in published_params, left out of the tensors" %
                    (129280 * 6), layers, dim, ratios)))
    out.append(("Wan2.2-TI2V-5B", wan("Wan2.2-TI2V-5B", ref["Wan2.2-TI2V-5B"],
                src("Wan2.2-TI2V-5B", "Wan2.2 TI2V-5B DiT (dim 3072, 30 blocks, ffn 14336); "
                    "stands in for WALL-WM, whose config is not public"), 3072, 14336, 30)))
    out.append(("Wan2.1-T2V-14B", wan("Wan2.1-T2V-14B", ref["Wan2.1-T2V-14B"],
                src("Wan2.1-T2V-14B", "Wan2.1 T2V-14B DiT (dim 5120, 40 blocks, ffn 13824)"),
                5120, 13824, 40)))
    return out


# ---------------------------------------------------------------------------------------------
# Architecture: token streams, attention per stack, MoE routing, tensor uses (models/README.md
# "Architecture"). Hyper-parameters from the public config.json files named in each model's
# source; tokens per sample of the towers are stated assumptions (see ASSUMED below).
ASSUMED = {
    "vl": "vision tokens per sample 1024 (one 448x448 image, 14 px patches; 256 after the 2x2 merger), an "
          "assumption; the vision blocks' window attention is modelled as full attention over the image",
    "wall": "action chunk of 32 tokens and 1 proprio token per sample, an assumption",
    "pi0": "3 camera images of 256 patches (224 px, 14 px patches) and 50 action tokens per sample (pi0: plus 1 "
           "state token), as openpi's defaults; the prefix/suffix block mask is modelled as the action "
           "queries attending to the prefix; no LM-head logits (flow-matching loss only)",
    "wan": "text 512 tokens per sample (umT5), time 1 token per sample",
    "v4": "hybrid compressed attention modelled as full single-KV-head attention over the sequence",
}


def attn(heads, head_dim, kv=None, vd=None, causal=True, stream=None, kv_stream=None, length=None, rope=None):
    """rope: the rotated dims of each query and key head (None: every one; 0: no rotary embedding)."""
    a = {"heads": heads}
    if kv is not None and kv != heads:
        a["kv_heads"] = kv
    a["head_dim"] = head_dim
    if vd is not None and vd != head_dim:
        a["v_head_dim"] = vd
    if rope is None:
        rope = head_dim
    if rope:
        a["rope"] = rope
    if not causal:
        a["causal"] = False
    if stream:
        a["stream"] = stream
    if kv_stream:
        a["kv_stream"] = kv_stream
    if length:
        a["length"] = length
    return a


def set_arch(m, streams, stacks, uses=(), tensor_streams=()):
    """streams: [(name, tokens or None)], main first; stacks: {stack: {field: value}};
    uses / tensor_streams: [(fnmatch glob, value)], first match wins."""
    import fnmatch
    m.streams = streams
    m.stack_arch = stacks
    for t in m.tensors:
        for g, u in uses:
            if fnmatch.fnmatchcase(t["name"], g):
                t["use"] = u
                break
        st = stacks.get(t["stack"], {}).get("stream")
        for g, sname in tensor_streams:
            if fnmatch.fnmatchcase(t["name"], g):
                if sname != st:
                    t["stream"] = sname
                break
    # key order as dm_model_write() writes it
    for i, t in enumerate(m.tensors):
        order = ["name", "shape", "count", "stack", "first_layer", "layer_span", "role", "use", "stream", "note"]
        m.tensors[i] = {k: t[k] for k in order if k in t}


LM_HP = {  # name: (heads, kv heads, head dim, tied)
    "Qwen2.5-0.5B": (14, 2, 64, True), "Qwen2.5-1.5B": (12, 2, 128, True), "Qwen2.5-3B": (16, 2, 128, True),
    "Qwen2.5-7B": (28, 4, 128, False), "Qwen2.5-14B": (40, 8, 128, False), "Qwen2.5-32B": (40, 8, 128, False),
    "Qwen2.5-72B": (64, 8, 128, False), "Llama-3.2-3B": (24, 8, 128, True), "Llama-3.1-8B": (32, 8, 128, False),
}


def arch_lm(m, name):
    h, kv, d, tied = LM_HP[name]
    stacks = {"layers": {"attention": [attn(h, d, kv)]}}
    if tied:
        stacks["head"] = {"tied_head": "model.embed_tokens.weight"}
    set_arch(m, [("text", None)], stacks, uses=[("model.embed_tokens.weight", "embedding")])


def arch_vl(m, wall):
    streams = [("text", None), ("vision", 1024), ("merged", 256)]
    if wall:
        streams += [("action", 32), ("state", 1)]
    stacks = {"visual.blocks": {"stream": "vision", "attention": [attn(16, 80, causal=False)]},
              "visual.merger": {"stream": "merged"},
              "layers": {"attention": [attn(16, 128, 2)]},
              "head": {"tied_head": "model.embed_tokens.weight"}}
    if wall:
        stacks["action_in"] = {"stream": "action"}
    ts = [("visual.patch_embed.*", "vision"), ("visual.merger.ln_q.*", "vision"),
          ("layers.*.moe.experts.1.*", "action"), ("action_preprocessor.propri_proj.*", "state"),
          ("action_preprocessor.action_proj_back.*", "action")]
    set_arch(m, streams, stacks, uses=[("model.embed_tokens.weight", "embedding")], tensor_streams=ts)


def arch_pi0(m, with_state):
    streams = [("prefix", None), ("image", 768), ("action", 50)]
    if with_state:
        streams.append(("state", 1))
    # SigLIP's image blocks: learned positions, no rotary embedding
    stacks = {"img.blocks": {"stream": "image", "attention": [attn(16, 72, causal=False, length=256, rope=0)]},
              "img.head": {"stream": "image"},
              "action_in": {"stream": "action"},
              "llm.layers": {"attention": [attn(8, 256, 1, causal=False),
                                           attn(8, 256, 1, stream="action", kv_stream="prefix")]}}
    ts = [("img.*", "image"), ("state_proj.*", "state"), ("llm.layers.*_1.*", "action"),
          ("llm.final_norm_1*", "action"), ("action_out_proj*", "action")]
    set_arch(m, streams, stacks, uses=[("llm.embedder.input_embedding", "embedding"), ("img.pos_embedding", "table")],
             tensor_streams=ts)


def arch_mla(m, heads, experts, top_k, mtp):
    a = [attn(heads, 192, vd=128, rope=64)]  # MLA: qk_rope_head_dim 64 of the 192
    stacks = {"layers": {"attention": a, "moe": {"experts": experts, "top_k": top_k}}}
    if mtp:
        stacks["mtp"] = {"attention": a, "moe": {"experts": experts, "top_k": top_k},
                         "tied_head": "lm_head.weight"}
    set_arch(m, [("text", None)], stacks,
             uses=[("model.embed_tokens.weight", "embedding"), ("*.mlp.experts.*", "expert")])


def arch_v4(m, heads, experts, top_k):
    a = [attn(heads, 512, 1, rope=64)]  # qk_rope_head_dim 64 of the 512
    moe = {"experts": experts, "top_k": top_k}
    stacks = {"layers": {"attention": a, "moe": moe}, "mtp": {"attention": a, "moe": moe, "tied_head": "head.weight"}}
    set_arch(m, [("text", None)], stacks,
             uses=[("embed.weight", "embedding"), ("*.ffn.experts.*", "expert"), ("*.compressor.ape", "table")])


def arch_wan(m, heads):
    # 3-D rotary embedding in the self-attention, none in the cross-attention over the text
    stacks = {"blocks": {"attention": [attn(heads, 128, causal=False),
                                        attn(heads, 128, causal=False, kv_stream="text", rope=0)]}}
    ts = [("text_embedding.*", "text"), ("time_embedding.*", "time"), ("time_projection.*", "time"),
          ("blocks.*.cross_attn.k.*", "text"), ("blocks.*.cross_attn.v.*", "text"),
          ("blocks.*.cross_attn.norm_k.*", "text")]
    set_arch(m, [("video", None), ("text", 512), ("time", 1)], stacks,
             uses=[("*modulation", "table")], tensor_streams=ts)


def add_arch(name, m):
    if name in LM_HP:
        arch_lm(m, name)
    elif name in ("Qwen2.5-VL-3B", "WALL-OSS"):
        arch_vl(m, name == "WALL-OSS")
        m.source += "; " + ASSUMED["vl"] + ("; " + ASSUMED["wall"] if name == "WALL-OSS" else "")
    elif name in ("pi0", "pi0.5"):
        arch_pi0(m, name == "pi0")
        m.source += "; " + ASSUMED["pi0"]
    elif name == "Moonlight-16B-A3B":
        arch_mla(m, 16, 64, 6, False)
    elif name == "DeepSeek-V3":
        arch_mla(m, 128, 256, 8, True)
    elif name == "Kimi-K2":
        arch_mla(m, 64, 384, 8, False)
    elif name == "DeepSeek-V4-Flash":
        arch_v4(m, 64, 256, 6)
        m.source += "; " + ASSUMED["v4"]
    elif name == "DeepSeek-V4-Pro":
        arch_v4(m, 128, 384, 6)
        m.source += "; " + ASSUMED["v4"]
    elif name.startswith("Wan"):
        arch_wan(m, 24 if "5B" in name else 40)
        m.source += "; " + ASSUMED["wan"]
    else:
        raise KeyError("no architecture for %s" % name)


def truncated(m, name, layers):
    """A copy of model m with its "layers" stack cut to `layers` layers (the first dense layers
    kept, the rest shortened): a real architecture small enough for one GPU, for validation."""
    import copy
    t = copy.deepcopy(m)
    old = t.layers["layers"]
    t.stacks = [(sn, layers if sn == "layers" else n) for sn, n in t.stacks]
    t.layers = dict(t.stacks)
    for x in t.tensors:
        if x["stack"] != "layers":
            continue
        first, span = x.get("first_layer", 0), x.get("layer_span", old)
        per = x["count"] // span
        if first + span == old:  # runs to the end: shortened
            span = layers - first
        x["count"] = per * span
        if first == 0 and span == layers:
            x.pop("first_layer", None)
            x.pop("layer_span", None)
        else:
            x["first_layer"], x["layer_span"] = first, span
    t.source = ("%s cut to its first %d of %d layers (dense and MoE layers as in the full model), so that it "
                "fits one GPU for validation; not a published model; " % (name, layers, old)) + t.source
    total = t.params()
    t.published = lambda: total
    return t


def q(s):
    return json.dumps(s, ensure_ascii=False)


def render(name, m):
    lines = ["{",
             '  "format": "dmuon-model-1",',
             '  "name": %s,' % q(name),
             '  "source": %s,' % q(m.source),
             '  "published_params": %d,' % m.published()]
    lines.append('  "streams": [' + ", ".join(
        '{"name": %s%s}' % (q(sn), ', "tokens": %d' % tk if tk else "") for sn, tk in m.streams) + "],")
    lines.append('  "stacks": [')
    for i, (sn, n) in enumerate(m.stacks):
        a = m.stack_arch.get(sn, {})
        parts = ['"name": %s' % q(sn), '"layers": %d' % n]
        if "stream" in a:
            parts.append('"stream": %s' % q(a["stream"]))
        if "attention" in a:
            parts.append('"attention": [' + ", ".join(
                "{" + ", ".join('"%s": %s' % (k, json.dumps(v)) for k, v in b.items()) + "}"
                for b in a["attention"]) + "]")
        if "moe" in a:
            parts.append('"moe": {"experts": %d, "top_k": %d}' % (a["moe"]["experts"], a["moe"]["top_k"]))
        if "tied_head" in a:
            parts.append('"tied_head": %s' % q(a["tied_head"]))
        lines.append("    {" + ", ".join(parts) + "}" + ("," if i + 1 < len(m.stacks) else ""))
    lines.append("  ],")
    lines.append('  "tensors": [')
    for i, t in enumerate(m.tensors):
        parts = ['"%s": %s' % (k, q(v) if not isinstance(v, list) else
                               "[" + ", ".join(str(d) for d in v) + "]") for k, v in t.items()]
        lines.append("    {" + ", ".join(parts) + "}" + ("," if i + 1 < len(m.tensors) else ""))
    lines.append("  ]")
    lines.append("}")
    return "\n".join(lines) + "\n"


def main():
    if len(sys.argv) not in (2, 3):
        sys.stderr.write("usage: %s model-shapes.json [OUTDIR]\n" % sys.argv[0])
        return 2
    with open(sys.argv[1]) as f:
        ref = json.load(f)
    outdir = sys.argv[2] if len(sys.argv) == 3 else os.path.normpath(os.path.join(
        os.path.dirname(os.path.abspath(__file__)), "..", "models"))
    models = []
    for name, m in build(ref):
        m.check_all_used()
        add_arch(name, m)
        models.append((name, m))
        if name == "Moonlight-16B-A3B":
            models.append(("Moonlight-16B-A3B-6L", truncated(m, name, 6)))
    for name, m in models:
        muon = sum(t["count"] for t in m.tensors if t["role"] == "muon")
        p, pub = m.params(), m.published()
        assert abs(p - pub) <= 0.005 * pub, (name, p, pub)
        stem = {"WALL-OSS": "wall-oss-flow"}.get(name, name.lower())
        path = os.path.join(outdir, stem + ".json")
        tmp = path + ".tmp"
        with open(tmp, "w") as f:
            f.write(render(name, m))
        os.replace(tmp, path)
        print("%-20s %16d params (published %16d, %+.3f%%) %6d muon matrices -> %s" %
              (name, p, pub, 100.0 * (p - pub) / pub, muon, path))
    return 0


if __name__ == "__main__":
    sys.exit(main())
