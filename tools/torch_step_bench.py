#!/usr/bin/env python3
"""torch_step_bench.py: what a real training step of a bundled model's architecture costs in
PyTorch (transformers), forward and backward per decoder layer, on one GPU: the reference the
executor's proxy step (dmuon run) is held against (issue 13: per layer within 20%).

The model is built from its published hyper-parameters (the same as models/*.json, written
out below), randomly initialised in bf16, attention through SDPA, and trained on random tokens
with the language-model loss. Each decoder layer is timed with CUDA events recorded by forward
and backward hooks (forward: pre-hook to hook; backward: full-backward pre-hook to hook), over
--steps timed steps after --warmup steps; the table gives medians over steps of the mean over
layers, and the whole forward (embedding to loss) and backward.

Usage (on the GPU machine):
  python3 tools/torch_step_bench.py --model llama-3.2-3b [--tokens 4096] [--seq-len 4096]
      [--steps 5] [--warmup 2] [--json OUT.json] [--experts grouped_mm] [--profile N] [--parts]
(--experts: transformers' MoE experts backend; its eager default loops over the experts;
--profile N: one more step under torch.profiler, its N costliest CUDA kernels printed, and the
kernels' busy time and launch count against the step's wall time)
--parts: each layer's attention (self_attn) and MLP or MoE block (mlp) timed the same way as the
layers, forward and backward, so that a layer's time can be split between the two.
Models: llama-3.2-3b, qwen2.5-1.5b, qwen2.5-0.5b, llama-3.1-8b, qwen2.5-7b, moonlight-16b-a3b-6l
(DeepseekV3 layout, 6 layers), qwen3-30b-a3b-6l (Qwen3-MoE, 6 layers: models/extra/), and the VLM
qwen2.5-vl-3b (Qwen2.5-3B + its 32-block vision tower), fed as models/qwen2.5-vl-3b.json assumes:
one 448 x 448 image per sample (a 32 x 32 grid of 14 px patches, 1024 patches, 256 merged tokens
in the sample's text, after a vision-start token); its decoder layers are the language model's,
and the tower's blocks are timed the same way (the table's second line, JSON "vision").
Prints one table; --json writes every number; tools/trace_layers.py
--torch JSON prints it beside the executor's per-layer times from a `dmuon run --trace` CSV
(--torch-part vision: the tower's blocks, with --stack visual.blocks).
Written for PyTorch 2.x and transformers 4.5x/5.x (`dtype` or `torch_dtype`).
"""
import argparse
import json
import statistics
import sys
import time


def configs():
    import transformers as tf
    llama = lambda **k: tf.LlamaConfig(rope_theta=500000.0, max_position_embeddings=131072, **k)
    qwen = lambda **k: tf.Qwen2Config(rope_theta=1000000.0, max_position_embeddings=32768, **k)
    return {
        "llama-3.2-3b": lambda: llama(hidden_size=3072, intermediate_size=8192, num_hidden_layers=28,
                                      num_attention_heads=24, num_key_value_heads=8, head_dim=128,
                                      vocab_size=128256, tie_word_embeddings=True),
        "llama-3.1-8b": lambda: llama(hidden_size=4096, intermediate_size=14336, num_hidden_layers=32,
                                      num_attention_heads=32, num_key_value_heads=8, head_dim=128,
                                      vocab_size=128256, tie_word_embeddings=False),
        "qwen2.5-0.5b": lambda: qwen(hidden_size=896, intermediate_size=4864, num_hidden_layers=24,
                                     num_attention_heads=14, num_key_value_heads=2, vocab_size=151936,
                                     tie_word_embeddings=True),
        "qwen2.5-1.5b": lambda: qwen(hidden_size=1536, intermediate_size=8960, num_hidden_layers=28,
                                     num_attention_heads=12, num_key_value_heads=2, vocab_size=151936,
                                     tie_word_embeddings=True),
        "qwen2.5-7b": lambda: qwen(hidden_size=3584, intermediate_size=18944, num_hidden_layers=28,
                                   num_attention_heads=28, num_key_value_heads=4, vocab_size=152064,
                                   tie_word_embeddings=False),
        "qwen3-30b-a3b-6l": lambda: tf.Qwen3MoeConfig(
            hidden_size=2048, intermediate_size=6144, moe_intermediate_size=768, num_hidden_layers=6,
            num_attention_heads=32, num_key_value_heads=4, head_dim=128, num_experts=128, num_experts_per_tok=8,
            norm_topk_prob=True, decoder_sparse_step=1, mlp_only_layers=[], vocab_size=151936,
            tie_word_embeddings=False, rope_theta=1000000.0, max_position_embeddings=40960),
        "moonlight-16b-a3b-6l": lambda: tf.DeepseekV3Config(
            hidden_size=2048, intermediate_size=11264, moe_intermediate_size=1408, num_hidden_layers=6,
            num_attention_heads=16, num_key_value_heads=16, n_routed_experts=64, n_shared_experts=2,
            num_experts_per_tok=6, first_k_dense_replace=1, q_lora_rank=None, kv_lora_rank=512,
            qk_nope_head_dim=128, qk_rope_head_dim=64, v_head_dim=128, vocab_size=163840,
            n_group=1, topk_group=1, tie_word_embeddings=False, max_position_embeddings=8192),
        "qwen2.5-vl-3b": qwen25_vl_3b,
    }


# The vision-language models: their input carries images (vl_inputs) and their tower is timed too.
VL = {"qwen2.5-vl-3b": {"grid": 32, "merge": 2, "patch": 14, "tpatch": 2,
                        "image": 151655, "start": 151652, "end": 151653, "text_vocab": 151643}}


def qwen25_vl_3b():
    """Qwen2.5-VL-3B's published config (Qwen/Qwen2.5-VL-3B-Instruct config.json)."""
    import transformers as tf
    rope = {"type": "mrope", "rope_type": "default", "mrope_section": [16, 24, 24], "rope_theta": 1000000.0}
    text = dict(hidden_size=2048, intermediate_size=11008, num_hidden_layers=36, num_attention_heads=16,
                num_key_value_heads=2, vocab_size=151936, rope_theta=1000000.0, max_position_embeddings=128000,
                rope_scaling=rope, tie_word_embeddings=True)
    vision = dict(depth=32, hidden_size=1280, intermediate_size=3420, num_heads=16, out_hidden_size=2048,
                  patch_size=14, spatial_merge_size=2, temporal_patch_size=2, window_size=112,
                  fullatt_block_indexes=[7, 15, 23, 31], in_channels=3, hidden_act="silu")
    ids = dict(image_token_id=151655, video_token_id=151656, vision_start_token_id=151652,
               vision_end_token_id=151653, tie_word_embeddings=True)
    try:  # transformers 5 (and late 4.x): the language model's keys in text_config
        return tf.Qwen2_5_VLConfig(text_config=text, vision_config=vision, **ids)
    except TypeError:
        return tf.Qwen2_5_VLConfig(vision_config=vision, **text, **{k: v for k, v in ids.items()
                                                                   if k != "tie_word_embeddings"})


def vl_inputs(torch, v, B, seq):
    """Random text ids with one image per sample (vision start, the merged image tokens, vision
    end after the first text token), its patches and grid (1 x grid x grid)."""
    n_img = v["grid"] * v["grid"] // (v["merge"] * v["merge"])
    if seq < n_img + 3:
        raise ValueError("a sample of %d tokens cannot hold an image of %d tokens" % (seq, n_img))
    ids = torch.randint(0, v["text_vocab"], (B, seq), device="cuda")
    ids[:, 1] = v["start"]
    ids[:, 2:2 + n_img] = v["image"]
    ids[:, 2 + n_img] = v["end"]
    patches = v["grid"] * v["grid"]
    width = 3 * v["tpatch"] * v["patch"] * v["patch"]
    pix = torch.randn(B * patches, width, device="cuda", dtype=torch.bfloat16)
    thw = torch.tensor([[1, v["grid"], v["grid"]]] * B, device="cuda")
    return {"input_ids": ids, "labels": ids, "pixel_values": pix, "image_grid_thw": thw}


def find_modules(model, paths):
    """The first attribute path of `paths` that `model` has (transformers moved modules between versions)."""
    for p in paths:
        obj = model
        for part in p.split("."):
            obj = getattr(obj, part, None)
            if obj is None:
                break
        if obj is not None:
            return obj, p
    return None, None


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--model", required=True)
    ap.add_argument("--tokens", type=int, default=4096)
    ap.add_argument("--seq-len", type=int, default=0)
    ap.add_argument("--steps", type=int, default=5)
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("--json")
    ap.add_argument("--experts", default="",
                    help="transformers' experts backend of MoE models (eager, grouped_mm, batched_mm; default: its own)")
    ap.add_argument("--profile", type=int, default=0,
                    help="after the timed steps, one step under torch.profiler: print its N costliest CUDA kernels")
    ap.add_argument("--parts", action="store_true",
                    help="time each layer's self_attn and mlp too (forward and backward hooks)")
    a = ap.parse_args()
    import torch
    cf = configs()
    if a.model not in cf:
        sys.stderr.write("torch_step_bench: unknown model %s (known: %s)\n" % (a.model, ", ".join(sorted(cf))))
        return 2
    seq = a.seq_len or a.tokens
    if a.tokens % seq:
        sys.stderr.write("torch_step_bench: --tokens must be a multiple of --seq-len\n")
        return 2
    import transformers as tf
    torch.manual_seed(0)
    cfg = cf[a.model]()
    vl = VL.get(a.model)
    auto = tf.AutoModelForImageTextToText if vl else tf.AutoModelForCausalLM
    t0 = time.time()
    with torch.device("cuda"):
        # transformers 5 takes `dtype` (4.x `torch_dtype`, deprecated in 4.56 and later removed)
        kw = {"attn_implementation": "sdpa"}
        if a.experts:
            kw["experts_implementation"] = a.experts
        try:
            model = auto.from_config(cfg, dtype=torch.bfloat16, **kw)
        except TypeError as e:
            if "experts_implementation" in str(e):
                sys.stderr.write("torch_step_bench: this transformers has no experts_implementation (%s)\n" % e)
                return 2
            model = auto.from_config(cfg, torch_dtype=torch.bfloat16, **kw)
    model.to(torch.bfloat16)
    model.train()
    attn_impl = getattr(model.config, "_attn_implementation", None) or getattr(model.config, "attn_implementation", "?")
    experts_impl = getattr(model.config, "_experts_implementation", None) or a.experts or "default"
    layers, where = find_modules(model, ["model.layers", "model.language_model.layers", "language_model.model.layers",
                                         "language_model.layers"])
    blocks, vwhere = find_modules(model, ["model.visual.blocks", "visual.blocks"]) if vl else (None, None)
    if layers is None or (vl and blocks is None):
        sys.stderr.write("torch_step_bench: %s: no decoder layers%s in %s\n" % (
            a.model, " or vision blocks" if vl else "", type(model).__name__))
        return 2
    vocab = getattr(cfg, "vocab_size", None) or cfg.text_config.vocab_size
    n_params = sum(p.numel() for p in model.parameters())
    ev = {}

    def mark(key):
        e = torch.cuda.Event(enable_timing=True)
        e.record()
        ev[key] = e

    for i, layer in enumerate(layers):
        layer.register_forward_pre_hook(lambda m, inp, i=i: mark(("f0", i)))
        layer.register_forward_hook(lambda m, inp, out, i=i: mark(("f1", i)))
        layer.register_full_backward_pre_hook(lambda m, g, i=i: mark(("b0", i)))
        layer.register_full_backward_hook(lambda m, gi, go, i=i: mark(("b1", i)))
        for part in ("self_attn", "mlp"):
            sub = getattr(layer, part, None) if a.parts else None
            if sub is None:
                continue
            sub.register_forward_pre_hook(lambda m, inp, i=i, p=part: mark((p, "f0", i)))
            sub.register_forward_hook(lambda m, inp, out, i=i, p=part: mark((p, "f1", i)))
            sub.register_full_backward_pre_hook(lambda m, g, i=i, p=part: mark((p, "b0", i)))
            sub.register_full_backward_hook(lambda m, gi, go, i=i, p=part: mark((p, "b1", i)))
    for i, blk in enumerate(blocks if blocks is not None else []):
        blk.register_forward_pre_hook(lambda m, inp, i=i: mark(("vf0", i)))
        blk.register_forward_hook(lambda m, inp, out, i=i: mark(("vf1", i)))
        blk.register_full_backward_pre_hook(lambda m, g, i=i: mark(("vb0", i)))
        blk.register_full_backward_hook(lambda m, gi, go, i=i: mark(("vb1", i)))
    B = a.tokens // seq
    opt = torch.optim.SGD(model.parameters(), lr=0.0)  # the step's optimizer is not what is timed
    rows = []

    def inputs():
        if vl:
            return vl_inputs(torch, vl, B, seq)
        ids = torch.randint(0, vocab, (B, seq), device="cuda")
        return {"input_ids": ids, "labels": ids}

    for step in range(a.warmup + a.steps):
        batch = inputs()
        ev.clear()
        mark("start")
        loss = model(**batch).loss
        mark("fwd_end")
        loss.backward()
        mark("bwd_end")
        torch.cuda.synchronize()
        opt.zero_grad(set_to_none=True)
        if step < a.warmup:
            continue
        L = len(layers)
        fw = [ev[("f0", i)].elapsed_time(ev[("f1", i)]) for i in range(L)]
        bw = [ev[("b0", i)].elapsed_time(ev[("b1", i)]) for i in range(L)]
        parts = {}
        for p in ("self_attn", "mlp"):
            for d, (a0, a1) in (("forward", ("f0", "f1")), ("backward", ("b0", "b1"))):
                each = [ev[(p, a0, i)].elapsed_time(ev[(p, a1, i)]) if (p, a0, i) in ev and (p, a1, i) in ev
                        else None for i in range(L)]
                parts["%s_%s_each" % (p, d)] = each
        if blocks is not None:
            vf = [ev[("vf0", i)].elapsed_time(ev[("vf1", i)]) for i in range(len(blocks))]
            vb = [ev[("vb0", i)].elapsed_time(ev[("vb1", i)]) for i in range(len(blocks))]
            parts["vision"] = {"forward_each": vf, "backward_each": vb}
        rows.append({"forward_ms": ev["start"].elapsed_time(ev["fwd_end"]), "parts": parts,
                     "backward_ms": ev["fwd_end"].elapsed_time(ev["bwd_end"]),
                     "layer_forward_ms": statistics.mean(fw), "layer_backward_ms": statistics.mean(bw),
                     "layer_forward_each": fw, "layer_backward_each": bw, "loss": float(loss)})
    med = {k: statistics.median(r[k] for r in rows) for k in
           ("forward_ms", "backward_ms", "layer_forward_ms", "layer_backward_ms")}
    out = {"model": a.model, "tokens": a.tokens, "seq_len": seq, "params": n_params, "attn": attn_impl,
           "experts": experts_impl,
           "torch": torch.__version__, "transformers": tf.__version__, "gpu": torch.cuda.get_device_name(),
           "layers": len(layers), "steps": a.steps, "warmup": a.warmup, "setup_s": time.time() - t0,
           "median": med, "steps_detail": rows, "layers_at": where,
           "peak_mem_gib": torch.cuda.max_memory_allocated() / 2 ** 30}
    print("# torch_step_bench %s: %d tokens (%d x %d), %.3f B params, torch %s, transformers %s, %s, attention %s, "
          "experts %s" % (a.model, a.tokens, B, seq, n_params / 1e9, torch.__version__, tf.__version__, out["gpu"],
                          attn_impl, experts_impl))
    print("# %-22s %12s %12s %14s %14s %10s" % ("model", "forward_ms", "backward_ms", "layer_fwd_ms", "layer_bwd_ms",
                                                "peak_GiB"))
    print("  %-22s %12.3f %12.3f %14.3f %14.3f %10.2f" % (a.model, med["forward_ms"], med["backward_ms"],
                                                          med["layer_forward_ms"], med["layer_backward_ms"],
                                                          out["peak_mem_gib"]))
    if blocks is not None:  # the tower's blocks: medians over steps of the mean over blocks
        vmed = {"layer_forward_ms": statistics.median(statistics.mean(r["parts"]["vision"]["forward_each"])
                                                      for r in rows),
                "layer_backward_ms": statistics.median(statistics.mean(r["parts"]["vision"]["backward_each"])
                                                       for r in rows)}
        out["vision"] = {"blocks": len(blocks), "at": vwhere, "median": vmed}
        print("  %-22s %12s %12s %14.3f %14.3f   (%d vision blocks, %s)" % (
            "  vision tower", "", "", vmed["layer_forward_ms"], vmed["layer_backward_ms"], len(blocks), vwhere))
    # the parts per layer (medians over steps): attention and MLP/MoE, forward and backward
    if a.parts:
        print("# per layer (median over steps, ms): layer forward/backward, self_attn forward/backward, mlp forward/backward")
    for i in range(len(layers) if a.parts else 0):
        def md(key):
            v = [r["parts"][key][i] for r in rows if r["parts"][key][i] is not None]
            return statistics.median(v) if v else float("nan")
        print("  layer %2d %8.3f %8.3f   attn %8.3f %8.3f   mlp %8.3f %8.3f   (%s)" % (
            i, statistics.median(r["layer_forward_each"][i] for r in rows),
            statistics.median(r["layer_backward_each"][i] for r in rows), md("self_attn_forward_each"),
            md("self_attn_backward_each"), md("mlp_forward_each"), md("mlp_backward_each"),
            type(getattr(layers[i], "mlp", None)).__name__))
    if a.profile > 0:
        from torch.profiler import profile, ProfilerActivity
        batch = inputs()
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        with profile(activities=[ProfilerActivity.CUDA]) as prof:
            loss = model(**batch).loss
            loss.backward()
            torch.cuda.synchronize()
        wall = (time.perf_counter() - t0) * 1e3
        opt.zero_grad(set_to_none=True)
        key = "device_time_total"
        ka = prof.key_averages()
        if not ka or not hasattr(ka[0], key):
            key = "cuda_time_total"
        # the GPU's busy time against the step's wall time: far below it, the step waits on the host
        self_key = "self_" + key
        busy = sum(getattr(e, self_key, 0) for e in ka) / 1e3
        launches = sum(e.count for e in ka if getattr(e, self_key, 0) > 0)
        print("# profile of one step: wall %.3f ms (profiler on), CUDA kernels %.3f ms busy over %d launches"
              % (wall, busy, launches))
        print("# profile of one step: the %d costliest CUDA kernels (%s)" % (a.profile, key))
        print(ka.table(sort_by=key, row_limit=a.profile, max_name_column_width=70))
    if a.json:
        with open(a.json, "w") as f:
            json.dump(out, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
