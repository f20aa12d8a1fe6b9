"""The training-step oracle for the families outside Llama's frames: GPT-NeoX (Pythia), Phi, StarCoder2 and StableLM,
whole causal LMs around blocks.py's layers (the embedding, every layer, the final LayerNorm, the family's output
layer and transformers' ForCausalLMLoss), and GPT-2 and OPT whole in forward.py's frames (learned positions, OPT's
projected embedding, tied output layers), taking a real training step on the CPU under PyTorch's profiler with
profile_memory=True, as run_step_oracle.py does for Llama's. The highest bytes above the resting states in forward
(with the loss) and backward are compared with `zeromem estimate --json` (run_oracle.py's flags for the family; GPT-2's
and OPT's config.json files, and Phi's where it has residual dropout, written out, so that their mapping is checked too). The
step uses plain SGD (no temporaries), so its optimizer phase is the gradients alone: these models' parameter order
is blocks.py's, not transformers', and the for-loop optimizers' order is run_step_oracle.py's to check.
Target: within 0.1% each phase.

The step runs without oneDNN (its bf16 matmuls allocate scratch through the allocator on this CPU, which cuBLAS does
not) and checkpoints layers as PyTorch 2 does (blocks.checkpoint_early_stop: recomputation stops at the layer's last
saved tensor; torch 1.13's own checkpoint reruns the layer to its end, GPT-NeoX's backward then reads +1.5 c sbh).

With --random N --seed S, N shapes drawn over the six families (widths, heads, GQA where the family has it, rotary
widths, learned positions up to 4,096 beyond the tokens, OPT's embedding widths, ffn 1-8 x hidden, 16-256 tokens x 1-3,
1-3 layers, recompute or not; GPT-2 and OPT since 2026-11-29, so earlier seeds draw other shapes now). Seeds 1-20 (600 steps, 2026-11-28) found
the two moments now in CASES; what they still miss is named in docs/validation.md: behind Phi's shared norm without
recompute the forward can peak at the last layer's branches' sum, below the step's backward. (The last layer's eager
softmax, found there too, is modelled since seed 31.)

GPT-NeoX's, Phi's, StarCoder2's and StableLM's layers are forward.NeoXLayer, forward.PhiLayer, forward.DecoderLayer and
forward.StableLmLayer, transformers' frames (modular_gpt_neox.py, modeling_phi.py, modular_starcoder2.py,
modeling_stablelm.py), whose checkpointed forward zeromem models. StableLM's were blocks.py's until 2026-11-29, whose
locals outlive transformers' names: its checkpointed layer's forward and the recomputation in backward were left out
of the list then; in transformers' frames both read within 0.04% (seeds 1-6, 60 StableLM steps).

usage: python3 run_family_step_oracle.py ZEROMEM_BINARY [--random N --seed S]
"""
import functools
import json
import os
import subprocess
import sys
import tempfile

import blocks  # first: it caps oneDNN's ISA before torch loads
import forward
import run_oracle
import run_step_oracle
import torch
import torch.nn.functional as F

# oneDNN's bf16 matmuls allocate scratch tensors through the allocator on this CPU (an addmm's backward about 82 KB
# at 128 tokens, up to 1.3 c sbh at 256); cuBLAS takes transposed operands as they are, so zeromem models none. The
# native kernels allocate only their results. Set here only: the larger Llama-family oracle takes 20 times as long
# without oneDNN and its cases peak where no matmul runs.
torch.backends.mkldnn.enabled = False

BASE = {"hidden": 256, "heads": 4, "ffn": 1024, "vocab": 1000, "seq_len": 64, "micro_batch": 2, "layers": 2, "dropout": 0.0,
        "gelu_new": False, "recompute": "none"}
CASES = [
    # GPT-NeoX (Pythia): one query_key_value, rotary on a quarter of each head, two LayerNorms, parallel or in sequence
    {"family": "neox", "shared": False, "parallel": True, "kv_heads": 4, "rotary": 16, "lm_head_bias": False, "seq_len": 256},
    {"family": "neox", "shared": False, "parallel": False, "kv_heads": 4, "rotary": 16, "lm_head_bias": False, "seq_len": 256},
    {"family": "neox", "shared": False, "parallel": True, "kv_heads": 4, "rotary": 16, "lm_head_bias": False, "gelu_new": True},
    # Phi: separate q, k, v with biases, one LayerNorm for both parallel branches, lm_head with a bias
    {"family": "phi", "shared": True, "parallel": True, "kv_heads": 4, "rotary": 32, "lm_head_bias": True},
    {"family": "phi", "shared": True, "parallel": True, "kv_heads": 2, "rotary": 32, "lm_head_bias": True, "seq_len": 256},
    # StarCoder2: Llama's pre-norm layer with LayerNorms and biases, GQA, full RoPE, a biased GELU MLP, tied embeddings
    {"family": "starcoder2", "shared": False, "parallel": False, "kv_heads": 2, "rotary": 64, "lm_head_bias": False, "tied": True,
     "seq_len": 256},
    # StableLM: LayerNorms, partial RoPE, a SwiGLU MLP, in sequence (also weight-heavy) or in parallel behind one norm
    {"family": "stablelm", "shared": False, "parallel": False, "kv_heads": 4, "rotary": 16, "lm_head_bias": False, "qkv_bias": False},
    {"family": "stablelm", "shared": False, "parallel": False, "kv_heads": 4, "rotary": 16, "lm_head_bias": False, "qkv_bias": False,
     "ffn": 2048},
    {"family": "stablelm", "shared": True, "parallel": True, "kv_heads": 4, "rotary": 16, "lm_head_bias": False, "qkv_bias": True},
    # full recompute (GradientCheckpointingLayer): the LayerNorm keeps the layer's input itself, the checkpoint counted once
    {"family": "phi", "shared": True, "parallel": True, "kv_heads": 4, "rotary": 32, "lm_head_bias": True, "recompute": "full"},
    {"family": "stablelm", "shared": True, "parallel": True, "kv_heads": 4, "rotary": 16, "lm_head_bias": False, "qkv_bias": True,
     "recompute": "full"},
    # 128 tokens of hidden 256, where a layer's weights are large beside its tokens (oneDNN's scratch had hidden them)
    {"family": "neox", "shared": False, "parallel": True, "kv_heads": 4, "rotary": 16, "lm_head_bias": False, "seq_len": 128},
    {"family": "neox", "shared": False, "parallel": False, "kv_heads": 4, "rotary": 16, "lm_head_bias": False, "seq_len": 128},
    {"family": "starcoder2", "shared": False, "parallel": False, "kv_heads": 2, "rotary": 64, "lm_head_bias": False, "tied": True,
     "seq_len": 128},
    # eager attention at 512 tokens without recompute, in parallel, behind one shared norm, in sequence (the core's new
    # moment stays below the step's peak here: it must not overstate it)
    {"family": "neox", "shared": False, "parallel": True, "kv_heads": 4, "rotary": 16, "lm_head_bias": False, "seq_len": 512},
    {"family": "phi", "shared": True, "parallel": True, "kv_heads": 2, "rotary": 32, "lm_head_bias": True, "seq_len": 512},
    {"family": "stablelm", "shared": False, "parallel": False, "kv_heads": 4, "rotary": 16, "lm_head_bias": False, "qkv_bias": False,
     "seq_len": 512},
    # under full recompute: the non-gated MLP's fc2 differentiated beside the recomputed layer (StarCoder2, GPT-NeoX in
    # sequence), the attention core (GPT-NeoX in parallel, Phi); the checkpointed layer's forward (modelled for GPT-NeoX)
    {"family": "starcoder2", "shared": False, "parallel": False, "kv_heads": 2, "rotary": 64, "lm_head_bias": False, "tied": True,
     "seq_len": 256, "recompute": "full"},
    {"family": "neox", "shared": False, "parallel": False, "kv_heads": 4, "rotary": 16, "lm_head_bias": False, "seq_len": 256,
     "recompute": "full"},
    {"family": "neox", "shared": False, "parallel": True, "kv_heads": 4, "rotary": 16, "lm_head_bias": False, "seq_len": 256,
     "recompute": "full"},
    {"family": "phi", "shared": True, "parallel": True, "kv_heads": 2, "rotary": 32, "lm_head_bias": True, "seq_len": 256,
     "recompute": "full"},
    # GELU as tensor ops under recompute: its last product, (0.5 x) * (1 + tanh(...)), differentiated
    {"family": "neox", "shared": False, "parallel": True, "kv_heads": 4, "rotary": 16, "lm_head_bias": False, "gelu_new": True,
     "recompute": "full"},
    {"family": "neox", "shared": False, "parallel": True, "kv_heads": 4, "rotary": 16, "lm_head_bias": False, "gelu_fast": True,
     "seq_len": 128, "recompute": "full"},
    # found by --random (2026-11-28): query_key_value's node making its weight's gradient with its input still kept
    # (seed 6), and the MLP's first linear behind StableLM's shared norm (seed 4)
    {"family": "neox", "shared": False, "parallel": True, "kv_heads": 4, "rotary": 64, "lm_head_bias": False, "ffn": 256, "seq_len": 32,
     "micro_batch": 3, "recompute": "full", "vocab": 500},
    {"family": "stablelm", "shared": True, "parallel": True, "kv_heads": 8, "heads": 8, "hidden": 512, "rotary": 16, "lm_head_bias": False,
     "qkv_bias": True, "ffn": 4096, "micro_batch": 3, "vocab": 500},
    # without recompute, the last layer's eager softmax above the loss's moment at a 500-token vocabulary, beside what
    # each attention frame's names still hold: GPT-NeoX's whole query_key_value output (-1.43% before, seed 31), StarCoder2's
    # rotated q and k beside matmul's copies and repeat_kv's, Phi's and StableLM's projections and rotated parts
    {"family": "neox", "shared": False, "parallel": True, "kv_heads": 8, "heads": 8, "hidden": 128, "rotary": 16, "lm_head_bias": False,
     "ffn": 256, "seq_len": 256, "micro_batch": 3, "vocab": 500},
    {"family": "starcoder2", "shared": False, "parallel": False, "kv_heads": 4, "heads": 8, "hidden": 128, "rotary": 16, "lm_head_bias": False,
     "tied": True, "ffn": 256, "seq_len": 256, "micro_batch": 2, "vocab": 500},
    {"family": "phi", "shared": True, "parallel": True, "kv_heads": 4, "heads": 8, "hidden": 128, "rotary": 16, "lm_head_bias": True,
     "ffn": 256, "seq_len": 256, "micro_batch": 2, "vocab": 500},
    {"family": "stablelm", "shared": False, "parallel": False, "kv_heads": 8, "heads": 8, "hidden": 128, "rotary": 8, "lm_head_bias": False,
     "qkv_bias": True, "ffn": 256, "seq_len": 256, "micro_batch": 2, "vocab": 500},
    # StableLM's checkpointed layer run in transformers' frames (forward.StableLmLayer): at 8 x hidden of MLP and at 512
    # tokens its forward tops the loss's moment (-35% and -49% before it was modelled), in sequence and in parallel
    {"family": "stablelm", "shared": False, "parallel": False, "kv_heads": 4, "rotary": 16, "lm_head_bias": False, "qkv_bias": False,
     "ffn": 2048, "recompute": "full"},
    {"family": "stablelm", "shared": True, "parallel": True, "kv_heads": 4, "rotary": 16, "lm_head_bias": False, "qkv_bias": True,
     "seq_len": 512, "recompute": "full"},
    # c_fc's node making its weight's gradient with its input kept, before its bias's (seed 17, +0.19% before)
    {"family": "starcoder2", "shared": False, "parallel": False, "kv_heads": 2, "heads": 4, "hidden": 128, "rotary": 32, "lm_head_bias": False,
     "tied": True, "ffn": 1024, "seq_len": 64, "micro_batch": 1, "layers": 1, "vocab": 500, "recompute": "full"},
    # GPT-2 and OPT whole (forward.GPT2LM, forward.OPTLM: learned positions, OPT's project_in / project_out, the tied output
    # layer), read through their config.json files (2026-11-29). The tied tables at the end of backward are the token
    # table's alone, where wpe and embed_positions have their own gradients: with the positions counted in them, backward
    # read +0.8% at 61 positions beside 4,000 tokens of vocabulary (the first case) and +7.5% to +87% at 1,056 to 4,128
    # positions beside small models (the others); OPT's project_out, where the embedding is projected, was left off the
    # rank (the fourth's and sixth's optimizer steps -1.8% and -1.4%).
    {"family": "gpt2", "act": "gelu", "hidden": 256, "heads": 4, "ffn": 256, "layers": 2, "vocab": 4000, "max_positions": 61,
     "seq_len": 32},
    {"family": "gpt2", "act": "gelu_new", "hidden": 128, "heads": 8, "ffn": 256, "layers": 1, "vocab": 4000, "max_positions": 4128,
     "seq_len": 32, "micro_batch": 3, "recompute": "full"},
    {"family": "gpt2", "act": "relu", "hidden": 256, "heads": 4, "ffn": 640, "layers": 4, "vocab": 8192, "max_positions": 2048,
     "seq_len": 128, "micro_batch": 1},
    {"family": "opt", "before": True, "bias": True, "embed_width": 512, "hidden": 256, "heads": 4, "ffn": 640, "layers": 4,
     "vocab": 8192, "max_positions": 2048, "seq_len": 128, "micro_batch": 1},
    {"family": "opt", "before": True, "bias": True, "embed_width": 64, "hidden": 64, "heads": 2, "ffn": 256, "layers": 3, "vocab": 1000,
     "max_positions": 4112, "seq_len": 16, "micro_batch": 3, "recompute": "full"},
    {"family": "opt", "before": False, "bias": True, "embed_width": 64, "hidden": 128, "heads": 2, "ffn": 256, "layers": 3, "vocab": 500,
     "max_positions": 1056, "seq_len": 32, "recompute": "full"},
    # GPT-2's eager core differentiated at softmax's node (P, dL/dP and dL/d(scores) in bf16; c_attn's output alive through
    # the Q and K views QK^T kept, b = 1; batch-folded copies, b = 3), where the scores are large beside the model
    # (a scratch random draw of these shapes: -28.8% before)
    {"family": "gpt2", "act": "relu", "hidden": 128, "heads": 8, "ffn": 128, "layers": 2, "vocab": 500, "max_positions": 145,
     "seq_len": 128, "micro_batch": 1, "recompute": "full"},
    {"family": "gpt2", "act": "gelu_new", "hidden": 128, "heads": 8, "ffn": 128, "layers": 2, "vocab": 500, "max_positions": 145,
     "seq_len": 128, "micro_batch": 3, "recompute": "full"},
    # A ReLU MLP wide beside a small vocabulary (2026-11-29, seed 81: forward -3.83%, backward -7.48% before): in forward
    # fc1's output, which relu does not keep, beside relu's in the last layer; in backward ReLU's node, after fc2's, with
    # relu's output still kept (the tensor fc2 read) and dL/d(fc1's output) made; pre-norm without biases, post-norm
    # with biases under recompute (final_layer_norm differentiated first), and GPT-2's c_fc and c_proj
    {"family": "opt", "before": True, "bias": False, "embed_width": 256, "hidden": 256, "heads": 4, "ffn": 4096, "layers": 2,
     "vocab": 500, "max_positions": 192, "seq_len": 128},
    {"family": "opt", "before": False, "bias": True, "embed_width": 256, "hidden": 256, "heads": 4, "ffn": 2048, "layers": 2,
     "vocab": 500, "max_positions": 192, "seq_len": 128, "recompute": "full"},
    {"family": "gpt2", "act": "relu", "hidden": 256, "heads": 4, "ffn": 4096, "layers": 2, "vocab": 500, "max_positions": 128,
     "seq_len": 128},
    # Post-norm OPT's fc1 differentiated (final_layer_norm, after the MLP, went first), few tokens beside wide layers under
    # recompute: layer 0's fc1 node with every MLP weight gradient made (a scratch ReLU draw: backward -4.64% before)
    {"family": "opt", "before": False, "bias": True, "embed_width": 256, "hidden": 512, "heads": 8, "ffn": 4096, "layers": 2,
     "vocab": 500, "max_positions": 81, "seq_len": 64, "micro_batch": 3, "recompute": "full"},
    # Gradients kept (zero_grad(set_to_none=False)): post-norm OPT's fc2 node with its new weight gradient waiting to be
    # added in (-8.39% before), and GPT-2's wpe making its new table first, beside lm_head's tied gradient waiting, where
    # 1,040 positions outweigh 500 tokens (-3.73% before)
    {"family": "opt", "before": False, "bias": True, "embed_width": 512, "hidden": 512, "heads": 8, "ffn": 8192, "layers": 1,
     "vocab": 500, "max_positions": 128, "seq_len": 64, "micro_batch": 1, "recompute": "full", "keep_grads": True},
    {"family": "gpt2", "act": "gelu", "hidden": 64, "heads": 2, "ffn": 256, "layers": 1, "vocab": 500, "max_positions": 1040,
     "seq_len": 16, "micro_batch": 1, "recompute": "full", "keep_grads": True},
    # The int64 position ids OPT's embed_positions keeps (position_ids + 2, b x s) from forward to its node, and under
    # recompute OPTDecoder's position_ids and cache_position each checkpointed call holds (seed 86: forward -0.1004%
    # before, 768 tokens of a 128-wide model)
    {"family": "opt", "before": True, "bias": False, "embed_width": 128, "hidden": 128, "heads": 2, "ffn": 128, "layers": 3,
     "vocab": 500, "max_positions": 1280, "seq_len": 256, "micro_batch": 3, "recompute": "full"},
    # config.json's dropout (OPTDecoderLayer: after the attention and after fc2; a CPU mask is the noise in the input's
    # dtype): the MLP's dropout node runs before fc2's and frees its mask (backward +2.42% and +1.65% before), projected
    # or not, with recompute or without
    {"family": "opt", "before": True, "bias": True, "embed_width": 64, "hidden": 256, "heads": 4, "ffn": 512, "layers": 3,
     "vocab": 128, "max_positions": 256, "seq_len": 128, "micro_batch": 2, "recompute": "full", "dropout": 0.1},
    {"family": "opt", "before": True, "bias": True, "embed_width": 256, "hidden": 256, "heads": 4, "ffn": 512, "layers": 3,
     "vocab": 128, "max_positions": 256, "seq_len": 128, "micro_batch": 2, "recompute": "full", "dropout": 0.1},
    {"family": "opt", "before": True, "bias": True, "embed_width": 64, "hidden": 256, "heads": 4, "ffn": 512, "layers": 3,
     "vocab": 128, "max_positions": 256, "seq_len": 128, "micro_batch": 2, "recompute": "none", "dropout": 0.1},
    # Phi's resid_pdrop (PhiDecoderLayer: resid_dropout over the attention's and the MLP's outputs; read from its config.json,
    # phi_config), one key/value head and gelu_new, as an H200 Phi step that reads -1.23% (random-20261127-032): the CPU
    # step is exact with recompute and without, so what that step misses is not in these frames (2026-11-29)
    {"family": "phi", "shared": True, "parallel": True, "kv_heads": 1, "rotary": 16, "lm_head_bias": True, "gelu_new": True,
     "resid_dropout": 0.1, "micro_batch": 4},
    {"family": "phi", "shared": True, "parallel": True, "kv_heads": 1, "rotary": 16, "lm_head_bias": True, "gelu_new": True,
     "resid_dropout": 0.1, "micro_batch": 4, "recompute": "full"},
    # PEFT's LoRA on OPT's q_proj and v_proj (run_step_oracle.add_lora; OPTForCausalLM's outputs held through the loss,
    # which a frozen lm_head does not keep). Under checkpointing the frozen embedding's output, a leaf
    # (enable_input_require_grads), is kept by the AccumulateGrad its sum with the positions reaches (backward -3.48%
    # before); OPT-350M's frame holds project_out's output (forward -2.01%); without checkpointing layer 0's scaled query
    # is kept by nothing, k_proj not adapted (+1.57%)
    {"family": "opt", "before": True, "bias": True, "embed_width": 256, "hidden": 256, "heads": 4, "ffn": 640, "layers": 3,
     "vocab": 1000, "max_positions": 512, "recompute": "full", "lora": {"rank": 8, "targets": "q_proj,v_proj"}},
    {"family": "opt", "before": True, "bias": True, "embed_width": 128, "hidden": 256, "heads": 4, "ffn": 640, "layers": 3,
     "vocab": 1000, "max_positions": 512, "recompute": "full", "lora": {"rank": 8, "targets": "q_proj,v_proj"}},
    {"family": "opt", "before": True, "bias": True, "embed_width": 256, "hidden": 256, "heads": 4, "ffn": 640, "layers": 3,
     "vocab": 1000, "max_positions": 512, "lora": {"rank": 8, "targets": "q_proj,v_proj"}},
]


class FamilyLM(torch.nn.Module):
    """embed_tokens, the layers, the final LayerNorm and the output layer (GPTNeoXForCausalLM's embed_out, Phi's biased
    lm_head, StarCoder2's tied head)."""

    def __init__(self, cfg):
        super().__init__()
        h, vocab = cfg["hidden"], cfg["vocab"]
        self.cfg = cfg
        self.embed = torch.nn.Embedding(vocab, h)
        # GPT-NeoX's layers in transformers' frames (forward.NeoXLayer: the same ops, so the same saved tensors, with the
        # lifetimes of modular_gpt_neox.py's names), so that a checkpointed layer's forward is measured as it runs.
        if cfg["family"] == "neox":
            act = "gelu_new" if cfg["gelu_new"] else "gelu_fast" if cfg.get("gelu_fast") else "gelu"
            self.layers = torch.nn.ModuleList(forward.NeoXLayer(h, cfg["heads"], cfg["ffn"], act, cfg["parallel"])
                                              for _ in range(cfg["layers"]))
        elif cfg["family"] == "phi":  # PhiDecoderLayer's frames (modeling_phi.py)
            act = "gelu_new" if cfg["gelu_new"] else "gelu"
            self.layers = torch.nn.ModuleList(forward.PhiLayer(h, cfg["heads"], cfg["kv_heads"], cfg["ffn"], act, cfg["rotary"],
                                                               cfg.get("resid_dropout", 0.0)) for _ in range(cfg["layers"]))
        elif cfg["family"] == "starcoder2":  # Starcoder2DecoderLayer's frames (modular_starcoder2.py)
            act = "gelu_new" if cfg["gelu_new"] else "gelu_pytorch_tanh"
            self.layers = torch.nn.ModuleList(forward.DecoderLayer(h, cfg["heads"], cfg["kv_heads"], cfg["ffn"], starcoder2=act)
                                              for _ in range(cfg["layers"]))
        elif cfg["family"] == "stablelm":  # StableLmDecoderLayer's frames (modeling_stablelm.py)
            self.layers = torch.nn.ModuleList(forward.StableLmLayer(h, cfg["heads"], cfg["ffn"], cfg["rotary"], cfg["parallel"],
                                                                    cfg.get("qkv_bias", True)) for _ in range(cfg["layers"]))
        else:
            self.layers = torch.nn.ModuleList(blocks.neox_block(cfg) for _ in range(cfg["layers"]))
        self.norm = torch.nn.LayerNorm(h)
        self.head = torch.nn.Linear(h, vocab, bias=cfg["lm_head_bias"])
        inv = 1.0 / (10000 ** (torch.arange(0, cfg["rotary"], 2, dtype=torch.float32) / cfg["rotary"]))
        self.register_buffer("inv_freq", inv)

    def forward(self, ids):
        b, s = ids.shape
        x = self.embed(ids)
        # The rotary tables: one row for the batch (position_ids = cache_position.unsqueeze(0)), in the model's dtype.
        position_ids = torch.arange(s).unsqueeze(0)
        cos, sin = self.rotary(x, position_ids)
        mask = torch.full((b, 1, s, s), float("-inf"), dtype=x.dtype).triu(1)  # eager's additive causal mask
        for layer in self.layers:
            if self.cfg["recompute"] == "full":
                # GradientCheckpointingLayer.__call__ (transformers 5): checkpoint(partial(layer, **kwargs), hidden_states),
                # non-reentrant, as PyTorch 2 runs it (blocks.checkpoint_early_stop)
                call = functools.partial(checkpointed_call, layer, mask=mask, cos=cos, sin=sin, position_ids=position_ids)
                x = blocks.checkpoint_early_stop(call, x)
            else:
                x = call_layer(layer, x, mask, cos, sin)
        return self.head(self.norm(x))


    def rotary(self, x, position_ids):
        """The rotary embedding's own frame (LlamaRotaryEmbedding.forward): its fp32 freqs and emb go as it returns."""
        freqs = torch.outer(position_ids[0].float(), self.inv_freq.float())
        emb = torch.cat((freqs, freqs), dim=-1)
        return emb.cos().to(x.dtype)[None, None], emb.sin().to(x.dtype)[None, None]


def checkpointed_call(layer, x, mask, cos, sin, position_ids):
    """The layer's call with transformers' keyword arguments (the position row is held, not read)."""
    return call_layer(layer, x, mask, cos, sin)


def call_layer(layer, x, mask, cos, sin):
    if isinstance(layer, (forward.NeoXLayer, forward.PhiLayer, forward.DecoderLayer, forward.StableLmLayer)):
        return layer(x, cos, sin, mask, None)
    return layer(x, mask, cos, sin)


def gpt_lm(cfg):
    """GPT-2's and OPT's whole models in transformers' frames (forward.GPT2LM, forward.OPTLM), each layer checkpointed
    as FamilyLM's are under full recompute; called as FamilyLM is, for the logits."""
    model = forward.GPT2LM(cfg) if cfg["family"] == "gpt2" else forward.OPTLM(cfg)
    if cfg["recompute"] == "full":
        # GradientCheckpointingLayer: partial(layer, **kwargs) holds every keyword argument until the layer's backward
        # (OPT's position_ids and cache_position among them)
        for layer in model.h if cfg["family"] == "gpt2" else model.layers:
            call = layer.forward
            layer.forward = lambda x, mask, cache, call=call, **kw: blocks.checkpoint_early_stop(
                functools.partial(call, mask=mask, cache=cache, **kw), x)
    model = model.to(torch.bfloat16)
    return lambda ids: model(ids, None, "logits"), model


def measure(cfg):
    torch.manual_seed(0)
    if cfg["family"] in ("gpt2", "opt"):
        run_model, model = gpt_lm(cfg)
    else:
        model = FamilyLM(cfg).to(torch.bfloat16)
        model.inv_freq = model.inv_freq.float()
        if cfg.get("tied"):
            model.head.weight = model.embed.weight
        run_model = model
    vocab = cfg["vocab"]
    ids = torch.randint(0, vocab, (cfg["micro_batch"], cfg["seq_len"]))
    params = model.parameters()
    if cfg.get("lora"):  # OPT's linears only (GPT-2's c_attn is one module): every base parameter frozen, SGD over the adapters
        assert cfg["family"] == "opt"
        params = run_step_oracle.add_lora(model, cfg["lora"])
        if cfg["recompute"] == "full":  # enable_input_require_grads, as PEFT's recipes call it with checkpointing
            model.embed_tokens.register_forward_hook(lambda module, inputs, output: output.requires_grad_(True))

        def run_model(ids):  # OPTForCausalLM.forward: outputs[0] stays bound beside the logits through the loss
            hidden_states = model(ids, None, "hidden-states")
            return hidden_states, F.linear(hidden_states, model.embed_tokens.weight).contiguous()
    opt = torch.optim.SGD(params, lr=1e-4, foreach=False)

    def causal_lm_loss(logits, labels):  # transformers loss_utils.py ForCausalLMLoss
        logits = logits.float()
        labels = F.pad(labels, (0, 1), value=-100)
        shift_labels = labels[..., 1:].contiguous()
        return F.cross_entropy(logits.view(-1, vocab), shift_labels.view(-1), ignore_index=-100, reduction="mean")

    def loss_fn():  # *ForCausalLM.forward: the 16-bit logits stay referenced through the loss
        logits = run_model(ids)
        if cfg.get("lora"):
            hidden_states, logits = logits
        return causal_lm_loss(logits, ids)

    # keep_grads: zero_grad(set_to_none=False), the gradients kept from one step to the next (zeromem --keep-grads)
    set_to_none = not cfg.get("keep_grads", False)
    loss_fn().backward()
    opt.step()
    opt.zero_grad(set_to_none=set_to_none)
    return run_step_oracle.phase_peaks(loss_fn, opt, ids, set_to_none)


def gpt_config(cfg):
    """The model's config.json (modeling_gpt2.py's GPT2Config, modeling_opt.py's OPTConfig fields): GPT-2's without dropout, OPT's
    with the case's dropout (0 unless given)."""
    if cfg["family"] == "gpt2":
        return {"model_type": "gpt2", "n_embd": cfg["hidden"], "n_layer": cfg["layers"], "n_head": cfg["heads"], "n_inner": cfg["ffn"],
                "vocab_size": cfg["vocab"], "n_positions": cfg["max_positions"], "activation_function": cfg["act"], "use_cache": False,
                "attn_pdrop": 0.0, "resid_pdrop": 0.0, "embd_pdrop": 0.0}
    return {"model_type": "opt", "hidden_size": cfg["hidden"], "num_hidden_layers": cfg["layers"], "num_attention_heads": cfg["heads"],
            "ffn_dim": cfg["ffn"], "vocab_size": cfg["vocab"], "max_position_embeddings": cfg["max_positions"],
            "do_layer_norm_before": cfg["before"], "enable_bias": cfg["bias"], "word_embed_proj_dim": cfg["embed_width"],
            "use_cache": False, "dropout": cfg.get("dropout", 0.0)}


def phi_config(cfg):
    """Phi's config.json (modeling_phi.py's PhiConfig fields) for a step with residual dropout (resid_pdrop), which the
    model flags do not set apart from the attention's."""
    return {"model_type": "phi", "hidden_size": cfg["hidden"], "intermediate_size": cfg["ffn"], "num_attention_heads": cfg["heads"],
            "num_key_value_heads": cfg["kv_heads"], "num_hidden_layers": cfg["layers"], "vocab_size": cfg["vocab"],
            "partial_rotary_factor": cfg["rotary"] / (cfg["hidden"] // cfg["heads"]), "hidden_act": "gelu_new" if cfg["gelu_new"] else "gelu",
            "resid_pdrop": cfg["resid_dropout"], "embd_pdrop": 0.0, "attention_dropout": 0.0, "qk_layernorm": False,
            "tie_word_embeddings": False, "max_position_embeddings": 4096, "use_cache": False}


def predict(binary, cfg):
    if cfg["family"] in ("gpt2", "opt") or cfg.get("resid_dropout"):
        path = os.path.join(tempfile.gettempdir(), f"zeromem-family-step-oracle-{os.getpid()}.json")
        with open(path, "w") as out:
            json.dump(phi_config(cfg) if cfg["family"] == "phi" else gpt_config(cfg), out)
        args = [binary, "estimate", "--json", "--hf-config", path, "--seq-len", str(cfg["seq_len"]), "--micro-batch", str(cfg["micro_batch"]),
                "--recompute", cfg["recompute"], "--attention", "eager", "--device", "cpu", "--torch-version", "1",
                "--precision", "bf16", "--blas-workspaces", "0B", "--optimizer", "sgd", "--optimizer-impl", "forloop"]
        return phases_above_resting(args, cfg)
    args = run_oracle.estimate_args(binary, "neox", cfg, cfg["layers"], cfg["vocab"])
    args += ["--precision", "bf16", "--blas-workspaces", "0B", "--optimizer", "sgd",
             "--optimizer-impl", "forloop", "--rotary-dims", str(cfg["rotary"])]
    if cfg["family"] == "neox" and not cfg.get("tied"):
        args = [a for a in args if a != "--tied-embeddings"]
    if cfg["family"] in ("neox", "phi", "stablelm"):  # the rotated and passed parts joined by torch.cat (as --hf-config sets)
        args.append("--rope-concat")
    return phases_above_resting(args, cfg)


def phases_above_resting(args, cfg):
    """zeromem's phases above what was allocated before the profile: the resting states, and with --keep-grads the
    gradients (run_step_oracle.predict)."""
    if cfg.get("keep_grads"):
        args = args + ["--keep-grads"]
    if cfg.get("lora"):
        args = args + ["--lora-rank", str(cfg["lora"]["rank"]), "--lora-targets", cfg["lora"]["targets"], "--lora-dtype", "fp32"]
    phases = json.loads(subprocess.run(args, check=True, capture_output=True, text=True).stdout)["phases"]
    resting = phases["forward"]["terms"]["resting_states_bytes"] + phases["forward"]["terms"]["gradients_bytes"]
    return {k: v["peak_bytes"] - resting for k, v in phases.items()}


def random_shape(rng):
    """A random step of one of the six families, in the layouts CASES reads them (eager attention, SGD)."""
    family = rng.choice(["neox", "neox", "phi", "starcoder2", "stablelm", "gpt2", "opt"])
    heads, d = rng.choice([2, 4, 8]), rng.choice([32, 64])
    h = heads * d
    divisors = [k for k in (1, 2, 4, 8) if heads % k == 0]
    cfg = {"family": family, "hidden": h, "heads": heads, "kv_heads": heads, "ffn": rng.choice([h, 2 * h, 4 * h, 8 * h]),
           "vocab": rng.choice([500, 1000, 4000]), "seq_len": rng.choice([16, 32, 64, 128, 256]), "micro_batch": rng.choice([1, 2, 3]),
           "layers": rng.choice([1, 2, 3]), "recompute": "full" if rng.random() < 0.4 else "none", "shared": False, "parallel": False,
           "lm_head_bias": False}
    if family == "neox":
        cfg.update(parallel=rng.random() < 0.5, rotary=rng.choice([d // 4, d // 2, d]))
        act = rng.choice(["gelu", "gelu", "gelu_new", "gelu_fast"])
        cfg.update(gelu_new=act == "gelu_new", gelu_fast=act == "gelu_fast")
    elif family == "phi":
        cfg.update(shared=True, parallel=True, lm_head_bias=True, kv_heads=rng.choice(divisors), rotary=rng.choice([d // 4, d // 2]))
    elif family == "starcoder2":
        cfg.update(kv_heads=rng.choice(divisors), rotary=d, tied=True)
    elif family in ("gpt2", "opt"):  # learned positions from as many as the tokens to far more (a large wpe beside the layers)
        cfg["max_positions"] = cfg["seq_len"] + rng.choice([0, 17, 64, 1024, 4096])
        if family == "gpt2":
            cfg["act"] = rng.choice(["gelu_new", "gelu", "relu"])
        else:
            cfg.update(before=rng.random() < 0.7, bias=rng.random() < 0.8, embed_width=rng.choice([h, h, h // 2, 2 * h]))
    else:
        shared = rng.random() < 0.5
        cfg.update(shared=shared, parallel=shared, rotary=d // 4, qkv_bias=rng.random() < 0.5)
    # Not modelled (named, still printed): without recompute, the last layer's own moments in forward behind Phi's
    # shared norm.
    if family == "phi" and cfg["recompute"] == "none":
        cfg["unmodelled"] = ["forward"]
    return cfg


def main():
    if "--random" in sys.argv:
        import random
        count, seed = int(sys.argv[sys.argv.index("--random") + 1]), int(sys.argv[sys.argv.index("--seed") + 1])
        rng = random.Random(seed)
        cases = [random_shape(rng) for _ in range(count)]
        return run_step_oracle.check(sys.argv[1], BASE, cases, measure, predict, f"family step oracle, {count} random shapes, seed {seed}")
    return run_step_oracle.check(sys.argv[1], BASE, CASES, measure, predict, "family step oracle")

if __name__ == "__main__":
    sys.exit(main())
