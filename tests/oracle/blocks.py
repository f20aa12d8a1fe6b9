"""Transformer blocks written op by op, and PyTorch's own accounting of what autograd keeps for backward.

Two block types:
  gpt   - the block of Korthikanti et al. 2022 §4.1: LayerNorm, one attention projection per q/k/v with biases,
          eager softmax attention in the activation dtype, GELU MLP, dropout on probabilities and both residual
          branches. zeromem profile: --implementation eager.
  llama - Hugging Face's eager Llama/Qwen2 block (modeling_llama.py): RMSNorm upcast to fp32, RoPE, GQA with
          repeat_kv, softmax in fp32, SwiGLU MLP, optional qkv bias. zeromem profile: --implementation hf.
          fused: Phi-3's layout (modeling_phi3.py): one qkv_proj sliced into q, k, v views and one gate_up_proj
          chunked into gate and up. cache: a training forward's DynamicCache (cache_utils.py DynamicLayer.update)
          copies K and V with torch.cat before attention. gemma_norm: Gemma's RMSNorm (modeling_gemma.py), which
          scales by (1 + weight) in fp32 before its cast. sandwich: Gemma-2's post-attention and post-feedforward norms;
          softcap: Gemma-2's tanh soft-cap on the eager scores. olmo2: OLMo-2's layer (modeling_olmo2.py): no pre-norms,
          q_norm / k_norm over the whole projections, post-branch norms, Olmo2RMSNorm (weight multiply in fp32).
  neox  - Hugging Face's GPT-NeoX layer (modeling_gpt_neox.py): LayerNorms with biases, one query_key_value laid out per
          head as [q | k | v] and chunked, RoPE on the first `rotary` dims of each head (rotated and passed parts
          concatenated), eager attention with the softmax in fp32, exact GELU (or gelu_new's or gelu_fast's tensor ops) MLP with biases,
          attention and MLP in parallel behind two LayerNorms or in sequence. shared: Phi's layer (modeling_phi.py),
          separate q, k, v with biases and one input_layernorm feeding both parallel branches. family opt: OPT's layer
          (modeling_opt.py): separate q, k, v with q scaled before attention, no RoPE (learned positions), two
          LayerNorms in sequence (OPT-350M's after each residual add), ReLU MLP. family starcoder2: StarCoder2's layer (modeling_starcoder2.py): Llama's
          pre-norm layer with LayerNorms, separate q, k, v (GQA) with biases, full RoPE, a biased GELU MLP. family
          stablelm: StableLM's layer (modeling_stablelm.py): LayerNorms, separate q, k, v (optional biases), o without
          bias, partial RoPE, a SwiGLU MLP without biases, in parallel behind one norm or in sequence.
  llama with olmo: OLMo's layer (modular_olmo.py): Llama's, every norm an OlmoLayerNorm (layer_norm over an fp32 copy,
          no weight or bias), RoPE with fp32 tables rotating in fp32 and casting back.

Saved tensors are counted once per storage (views share storage); parameters and the constant inputs built
outside the block (RoPE tables, the causal mask) are left out: they are not activations of the layer.
"""
import math
import os
import weakref

# oneDNN picks AMX tiles for bf16 where the CPU lists them, but a sandbox that does not grant the tile state
# (arch_prctl ARCH_REQ_XCOMP_PERM) kills the process with SIGILL. AVX-512 BF16 gives the same tensors.
os.environ.setdefault("ONEDNN_MAX_CPU_ISA", "AVX512_CORE_BF16")
os.environ.setdefault("DNNL_MAX_CPU_ISA", "AVX512_CORE_BF16")

import torch  # noqa: E402 (after the ISA cap)
import torch.nn.functional as F  # noqa: E402
from torch.utils.checkpoint import checkpoint  # noqa: E402


class _StopRecomputation(Exception):
    pass


class _Holder:
    pass


def checkpoint_early_stop(fn, *args):
    """torch.utils.checkpoint(fn, *args, use_reentrant=False) as PyTorch 2 runs it, for this torch 1.13: the forward
    keeps a holder per saved tensor; the first unpack in backward recomputes fn under hooks that fill the holders and
    stop at the last one (torch/utils/checkpoint.py _recomputation_hook: raise _StopRecomputationError once
    recomp_counter reaches len(weak_holders); early_stop defaults to True), so the ops after the layer's last saved
    tensor are not rerun; each recomputed tensor leaves the frame once unpacked (unpack_hook: holder.handles[gid] =
    None). torch 1.13's own non-reentrant checkpoint reruns the whole function and frees its tail only at the end."""
    holders = []  # weak references to the forward's holders, in the order the tensors were saved
    recomputed = weakref.WeakKeyDictionary()
    state = {"recomputed": False}

    def pack(_):
        holder = _Holder()
        holders.append(weakref.ref(holder))
        return holder

    def recompute():
        count = [0]

        def recompute_pack(x):
            holder = holders[count[0]]()
            count[0] += 1
            if holder is not None:
                recomputed[holder] = x.detach()
            if count[0] == len(holders):
                raise _StopRecomputation()
            return x.detach()

        with torch.autograd.graph.saved_tensors_hooks(recompute_pack, lambda x: x), torch.enable_grad():
            try:
                fn(*args)
            except RuntimeError as e:  # torch 1.13 hands a hook's exception back through C++ as a RuntimeError
                if "_StopRecomputation" not in str(e):
                    raise

    def unpack(holder):
        if not state["recomputed"]:
            state["recomputed"] = True
            recompute()
        return recomputed.pop(holder)

    with torch.autograd.graph.saved_tensors_hooks(pack, unpack):
        return fn(*args)


def saved_bytes(fn, constants):
    """Runs fn() and returns the bytes of every distinct storage autograd saved for backward."""
    excluded = {c.storage().data_ptr() for c in constants}
    storages = {}

    def pack(t):
        st = t.storage()
        if st.data_ptr() not in excluded and t.dim() > 0:  # 0-dim wrapped scalars are not activations
            storages[st.data_ptr()] = st.size() * t.element_size()
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        out = fn()
    return sum(storages.values()), out


class GPTBlock(torch.nn.Module):
    def __init__(self, h, heads, ffn, dropout):
        super().__init__()
        self.h, self.heads, self.p = h, heads, dropout
        self.ln1 = torch.nn.LayerNorm(h)
        self.q = torch.nn.Linear(h, h)
        self.k = torch.nn.Linear(h, h)
        self.v = torch.nn.Linear(h, h)
        self.o = torch.nn.Linear(h, h)
        self.ln2 = torch.nn.LayerNorm(h)
        self.fc1 = torch.nn.Linear(h, ffn)
        self.fc2 = torch.nn.Linear(ffn, h)

    def core(self, q, k, v, mask):
        scores = torch.matmul(q, k.transpose(-1, -2)) * (1.0 / math.sqrt(q.shape[-1])) + mask
        probs = torch.softmax(scores, dim=-1)
        if self.p > 0:
            probs = F.dropout(probs, self.p, True)
        return torch.matmul(probs, v)

    def forward(self, x, mask, selective=False):
        b, s, h = x.shape
        d = h // self.heads
        y = self.ln1(x)
        q = self.q(y).view(b, s, self.heads, d).transpose(1, 2)
        k = self.k(y).view(b, s, self.heads, d).transpose(1, 2)
        v = self.v(y).view(b, s, self.heads, d).transpose(1, 2)
        # Selective recompute (Korthikanti §5): keep q, k, v; recompute QK^T, softmax, dropout, P @ V.
        ctx = checkpoint(self.core, q, k, v, mask, use_reentrant=True) if selective else self.core(q, k, v, mask)
        ctx = ctx.transpose(1, 2).reshape(b, s, h)
        attn = self.o(ctx)
        if self.p > 0:
            attn = F.dropout(attn, self.p, True)
        x = x + attn
        z = self.fc2(F.gelu(self.fc1(self.ln2(x))))
        if self.p > 0:
            z = F.dropout(z, self.p, True)
        return x + z


class LlamaRMSNorm(torch.nn.Module):
    def __init__(self, h, eps=1e-6):
        super().__init__()
        self.weight = torch.nn.Parameter(torch.ones(h))
        self.eps = eps

    def forward(self, x):
        dtype = x.dtype
        x = x.to(torch.float32)
        var = x.pow(2).mean(-1, keepdim=True)
        x = x * torch.rsqrt(var + self.eps)
        return self.weight * x.to(dtype)


class GemmaRMSNorm(torch.nn.Module):
    """transformers modeling_gemma.py: normalises in fp32 and scales by (1 + weight) before casting back."""

    def __init__(self, h, eps=1e-6):
        super().__init__()
        self.weight = torch.nn.Parameter(torch.zeros(h))
        self.eps = eps

    # transformers' frames and names, op for op: the forward-only oracle (forward.py) sees tensors die with them.
    def _norm(self, x):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps)

    def forward(self, x):
        output = self._norm(x.float())
        output = output * (1.0 + self.weight.float())
        return output.type_as(x)


class Olmo2RMSNorm(LlamaRMSNorm):
    """transformers modeling_olmo2.py: the weight multiply in fp32, then the cast back."""

    def forward(self, x):
        dtype = x.dtype
        x = x.to(torch.float32)
        var = x.pow(2).mean(-1, keepdim=True)
        x = x * torch.rsqrt(var + self.eps)
        return (self.weight * x).to(dtype)


class OlmoLayerNorm(torch.nn.Module):
    """transformers modular_olmo.py: LayerNorm without weight or bias over an fp32 copy of the input, cast back."""

    def __init__(self, h):
        super().__init__()
        self.normalized_shape = (h,)

    def forward(self, x):
        return F.layer_norm(x.to(dtype=torch.float32), self.normalized_shape, None, None, eps=1e-5).to(x.dtype)


def rotate_half(x):
    half = x.shape[-1] // 2
    return torch.cat((-x[..., half:], x[..., :half]), dim=-1)


def repeat_kv(x, n_rep):
    b, kv, s, d = x.shape
    if n_rep == 1:
        return x
    return x[:, :, None, :, :].expand(b, kv, n_rep, s, d).reshape(b, kv * n_rep, s, d)


class LlamaBlock(torch.nn.Module):
    def __init__(self, h, heads, kv_heads, ffn, qkv_bias, qk_norm=False, fused=False, cache=False, gemma_norm=False,
                 sandwich=False, softcap=0.0, olmo2=False, rope=True, residual_multiplier=None, olmo=False, clip=0.0,
                 qk_whole=False):
        super().__init__()
        self.h, self.heads, self.kv, self.fused, self.cache, self.softcap = h, heads, kv_heads, fused, cache, softcap
        self.olmo2 = olmo2
        # OLMoE (modular_olmoe.py OlmoeAttention): Llama's pre-norm layer with q_norm and k_norm (LlamaRMSNorm) over the
        # whole projections, as OLMo-2's, before clip_qkv's clamps.
        self.qk_whole = olmo2 or qk_whole
        self.clip = clip  # OlmoAttention's clip_qkv: q, k, v clamped in place
        self.rope = rope  # SmolLM3Attention (modular_smollm3.py): NoPE layers skip apply_rotary_pos_emb
        self.rm = residual_multiplier  # GraniteDecoderLayer: residual + branch * residual_multiplier
        d = h // heads
        norm = OlmoLayerNorm if olmo else Olmo2RMSNorm if olmo2 else GemmaRMSNorm if gemma_norm else LlamaRMSNorm
        # OLMo-2 (modeling_olmo2.py Olmo2DecoderLayer): no input_layernorm; q_norm and k_norm over the whole projections.
        self.norm1 = None if olmo2 else norm(h)
        # Qwen3 (transformers modeling_qwen3.py Qwen3Attention): q_norm and k_norm over each head's d values.
        self.q_norm = norm(heads * d if self.qk_whole else d) if qk_norm or self.qk_whole else None
        self.k_norm = norm(kv_heads * d if self.qk_whole else d) if qk_norm or self.qk_whole else None
        if fused:
            self.qkv = torch.nn.Linear(h, (heads + 2 * kv_heads) * d, bias=qkv_bias)
        else:
            self.q = torch.nn.Linear(h, heads * d, bias=qkv_bias)
            self.k = torch.nn.Linear(h, kv_heads * d, bias=qkv_bias)
            self.v = torch.nn.Linear(h, kv_heads * d, bias=qkv_bias)
        self.o = torch.nn.Linear(heads * d, h, bias=False)
        self.norm2 = None if olmo2 else norm(h)
        # Gemma-2 (modeling_gemma2.py Gemma2DecoderLayer): post_attention_layernorm and post_feedforward_layernorm; OLMo-2's
        # only norms.
        self.post_attn_norm = norm(h) if sandwich or olmo2 else None
        self.post_ff_norm = norm(h) if sandwich or olmo2 else None
        if fused:
            self.gate_up = torch.nn.Linear(h, 2 * ffn, bias=False)
        else:
            self.gate = torch.nn.Linear(h, ffn, bias=False)
            self.up = torch.nn.Linear(h, ffn, bias=False)
        self.down = torch.nn.Linear(ffn, h, bias=False)

    def core(self, q, k, v, mask):
        scores = torch.matmul(q, k.transpose(2, 3)) * (1.0 / math.sqrt(q.shape[-1]))
        if self.softcap:  # Gemma-2's eager_attention_forward with attn_logit_softcapping
            scores = scores / self.softcap
            scores = torch.tanh(scores)
            scores = scores * self.softcap
        scores = scores + mask
        probs = F.softmax(scores, dim=-1, dtype=torch.float32).to(q.dtype)
        return torch.matmul(probs, v)

    def forward(self, x, mask, cos, sin, selective=False):
        b, s, h = x.shape
        d = h // self.heads
        y = x if self.olmo2 else self.norm1(x)
        if self.fused:
            qkv = self.qkv(y)
            q_end, k_end = self.heads * d, (self.heads + self.kv) * d
            q, k, v = qkv[..., :q_end], qkv[..., q_end:k_end], qkv[..., k_end:]
        elif self.qk_whole:
            q, k, v = self.q_norm(self.q(y)), self.k_norm(self.k(y)), self.v(y)
        else:
            q, k, v = self.q(y), self.k(y), self.v(y)
        if self.clip:
            for t in (q, k, v):
                t.clamp_(min=-self.clip, max=self.clip)
        q = q.view(b, s, self.heads, d)
        k = k.view(b, s, self.kv, d)
        if self.q_norm is not None and not self.qk_whole:
            q, k = self.q_norm(q), self.k_norm(k)
        q, k = q.transpose(1, 2), k.transpose(1, 2)
        v = v.view(b, s, self.kv, d).transpose(1, 2)
        if self.rope:  # with OLMo's fp32 tables the products are fp32 and cast back (.to(q.dtype))
            q = (q * cos + rotate_half(q) * sin).to(x.dtype)
            k = (k * cos + rotate_half(k) * sin).to(x.dtype)
        if self.cache:
            empty = torch.zeros(b, self.kv, 0, d, dtype=k.dtype)
            k, v = torch.cat([empty, k], dim=-2), torch.cat([empty, v], dim=-2)
        k = repeat_kv(k, self.heads // self.kv)
        v = repeat_kv(v, self.heads // self.kv)
        ctx = checkpoint(self.core, q, k, v, mask, use_reentrant=True) if selective else self.core(q, k, v, mask)
        ctx = ctx.transpose(1, 2).reshape(b, s, h)
        attn = self.o(ctx)
        if self.post_attn_norm is not None:
            attn = self.post_attn_norm(attn)
        x = x + attn if self.rm is None else x + attn * self.rm
        y = x if self.olmo2 else self.norm2(x)
        if self.fused:
            gate, up = self.gate_up(y).chunk(2, dim=-1)
            mlp = self.down(up * F.silu(gate))
        else:
            mlp = self.down(F.silu(self.gate(y)) * self.up(y))
        if self.post_ff_norm is not None:
            mlp = self.post_ff_norm(mlp)
        return x + mlp if self.rm is None else x + mlp * self.rm


def gelu_new(x):
    """transformers activations.py NewGELUActivation, op for op."""
    return 0.5 * x * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * torch.pow(x, 3.0))))


def gelu_fast(x):
    """transformers activations.py FastGELUActivation, op for op (GPT-NeoX-20B's hidden_act)."""
    return 0.5 * x * (1.0 + torch.tanh(x * 0.7978845608 * (1.0 + 0.044715 * x * x)))


class NeoXBlock(torch.nn.Module):
    def __init__(self, h, heads, kv_heads, ffn, rotary, parallel=True, shared=False, act="gelu", dropout=0.0, separate=False,
                 full_rope=False, stablelm=False, qkv_bias=True, post_ln=False):
        super().__init__()
        self.post_ln = post_ln  # OPT-350M (do_layer_norm_before false): each LayerNorm after its residual add
        self.h, self.heads, self.kv, self.rotary, self.p, self.full_rope = h, heads, kv_heads, rotary, dropout, full_rope
        self.parallel, self.shared, self.act, self.separate = parallel, shared, act, separate or shared or stablelm
        self.stablelm = stablelm
        d = h // heads
        self.ln1 = torch.nn.LayerNorm(h)
        self.ln2 = None if shared else torch.nn.LayerNorm(h)
        if self.separate:  # Phi's and OPT's q_proj, k_proj, v_proj with biases (StableLM's: use_qkv_bias)
            self.q = torch.nn.Linear(h, heads * d, bias=qkv_bias)
            self.k = torch.nn.Linear(h, kv_heads * d, bias=qkv_bias)
            self.v = torch.nn.Linear(h, kv_heads * d, bias=qkv_bias)
        else:  # GPT-NeoX: query_key_value
            self.qkv = torch.nn.Linear(h, 3 * h)
        self.o = torch.nn.Linear(heads * d, h, bias=not stablelm)  # GPT-NeoX's and Phi's `dense`; StableLM's o_proj
        if stablelm:  # StableLmMLP: gate_proj, up_proj, down_proj without bias, SiLU
            self.gate = torch.nn.Linear(h, ffn, bias=False)
            self.up = torch.nn.Linear(h, ffn, bias=False)
            self.down = torch.nn.Linear(ffn, h, bias=False)
        else:
            self.fc1 = torch.nn.Linear(h, ffn)      # dense_h_to_4h
            self.fc2 = torch.nn.Linear(ffn, h)      # dense_4h_to_h

    def core(self, q, k, v, mask):
        scores = torch.matmul(q, k.transpose(2, 3)) * (1.0 / math.sqrt(q.shape[-1]))
        scores = scores + mask
        probs = F.softmax(scores, dim=-1, dtype=torch.float32).to(q.dtype)
        if self.p > 0:
            probs = F.dropout(probs, self.p, True)
        return torch.matmul(probs, v)

    def mlp(self, y):
        if self.stablelm:
            return self.down(F.silu(self.gate(y)) * self.up(y))
        z = self.fc1(y)
        z = (gelu_new(z) if self.act == "gelu_new" else gelu_fast(z) if self.act == "gelu_fast" else F.relu(z) if self.act == "relu"
             else F.gelu(z))
        z = self.fc2(z)
        return F.dropout(z, self.p, True) if self.p > 0 else z

    def forward(self, x, mask, cos, sin, selective=False):
        b, s, h = x.shape
        d = h // self.heads
        y = x if self.post_ln else self.ln1(x)
        if self.separate:
            # OPT (no rotary) scales q_proj's output before attention (modeling_opt.py OPTAttention); the kernel then
            # scales by 1. Scaling after QK^T instead keeps the same tensors.
            q = self.q(y) * (1.0 / math.sqrt(d)) if not self.rotary else self.q(y)
            q = q.view(b, s, -1, d).transpose(1, 2)
            k = self.k(y).view(b, s, -1, d).transpose(1, 2)
            v = self.v(y).view(b, s, -1, d).transpose(1, 2)
        else:
            q, k, v = self.qkv(y).view(b, s, -1, 3 * d).transpose(1, 2).chunk(3, dim=-1)
        r = self.rotary
        if self.full_rope:  # Llama's apply_rotary_pos_emb (StarCoder2): every dim rotated, no concatenation
            q = q * cos + rotate_half(q) * sin
            k = k * cos + rotate_half(k) * sin
        elif r:
            q_rot, q_pass, k_rot, k_pass = q[..., :r], q[..., r:], k[..., :r], k[..., r:]
            q_rot = q_rot * cos + rotate_half(q_rot) * sin
            k_rot = k_rot * cos + rotate_half(k_rot) * sin
            q, k = torch.cat([q_rot, q_pass], dim=-1), torch.cat([k_rot, k_pass], dim=-1)
        k = repeat_kv(k, self.heads // self.kv)
        v = repeat_kv(v, self.heads // self.kv)
        ctx = checkpoint(self.core, q, k, v, mask, use_reentrant=True) if selective else self.core(q, k, v, mask)
        attn = self.o(ctx.transpose(1, 2).contiguous().reshape(b, s, h))
        if self.p > 0:
            attn = F.dropout(attn, self.p, True)
        if self.parallel:
            return self.mlp(y if self.shared else self.ln2(x)) + attn + x
        x = attn + x
        if self.post_ln:  # OPTDecoderLayer without do_layer_norm_before
            x = self.ln1(x)
            return self.ln2(self.mlp(x) + x)
        return self.mlp(self.ln2(x)) + x


def rope_tables(b, s, d, dtype):
    inv = 1.0 / (10000 ** (torch.arange(0, d, 2, dtype=torch.float32) / d))
    freqs = torch.outer(torch.arange(s, dtype=torch.float32), inv)
    emb = torch.cat((freqs, freqs), dim=-1)
    cos = emb.cos().to(dtype)[None, None].expand(b, 1, s, d).contiguous()
    sin = emb.sin().to(dtype)[None, None].expand(b, 1, s, d).contiguous()
    return cos, sin


# zeromem's LoRA target names for the blocks' linear modules (Hugging Face module names).
HF_NAMES = {"q": "q_proj", "k": "k_proj", "v": "v_proj", "o": "o_proj", "gate": "gate_proj", "up": "up_proj",
            "down": "down_proj", "fc1": "fc1", "fc2": "fc2", "qkv": "qkv_proj", "gate_up": "gate_up_proj"}


def add_lora(block, lora, dtype):
    """Freezes the block and adapts the named linears as PEFT's lora.Linear does (tuners/lora/layer.py Linear.forward):
    result = base(x); x cast to the adapter's dtype where it differs (tuners_utils.py _cast_input_dtype);
    result + lora_B(lora_A(dropout(x))) * scaling, cast back to result's dtype. The adapters are fp32 beside a 16-bit
    base where lora["adapter_dtype"] is "fp32" (get_peft_model's autocast_adapter_dtype), else in the block's dtype.
    Returns the adapters' parameters."""
    for p in block.parameters():
        p.requires_grad_(False)
    params = []
    adapter_dtype = torch.float32 if lora.get("adapter_dtype") == "fp32" else dtype
    for attr in lora["targets"]:
        base = getattr(block, attr)
        a = torch.nn.Linear(base.in_features, lora["rank"], bias=False).to(adapter_dtype)
        b = torch.nn.Linear(lora["rank"], base.out_features, bias=False).to(adapter_dtype)
        p_drop = lora["dropout"]

        def forward(x, base=base, a=a, b=b, p_drop=p_drop):
            result = F.linear(x, base.weight, base.bias)
            x = x if x.dtype == a.weight.dtype else x.to(a.weight.dtype)
            dropped = F.dropout(x, p_drop, True) if p_drop > 0 else x
            return (result + b(a(dropped)) * 2.0).to(result.dtype)

        base.forward = forward
        params += list(a.parameters()) + list(b.parameters())
    return params


def neox_block(cfg):
    family = cfg.get("family")
    act = "relu" if family == "opt" else "gelu_new" if cfg["gelu_new"] else "gelu_fast" if cfg.get("gelu_fast") else "gelu"
    return NeoXBlock(cfg["hidden"], cfg["heads"], cfg["kv_heads"], cfg["ffn"], cfg["rotary"], cfg["parallel"], cfg["shared"],
                     act, cfg["dropout"], family in ("opt", "starcoder2"), family == "starcoder2", family == "stablelm",
                     cfg.get("qkv_bias", True), cfg.get("post_ln", False))


def measure_layer(kind, cfg, dtype=torch.bfloat16):
    """Bytes one layer keeps for backward, and its parameter count (without adapters)."""
    b, s, h = cfg["micro_batch"], cfg["seq_len"], cfg["hidden"]
    torch.manual_seed(cfg.get("seed", 0))
    if kind == "gpt":
        block = GPTBlock(h, cfg["heads"], cfg["ffn"], cfg["dropout"]).to(dtype)
    elif kind == "neox":
        block = neox_block(cfg).to(dtype)
    else:
        block = LlamaBlock(h, cfg["heads"], cfg["kv_heads"], cfg["ffn"], cfg["qkv_bias"], cfg.get("qk_norm", False),
                           cfg.get("fused", False), cfg.get("cache", False), cfg.get("gemma_norm", False),
                           cfg.get("sandwich", False), cfg.get("softcap", 0.0), cfg.get("olmo2", False),
                           not cfg.get("nope", False), 0.22 if cfg.get("granite") else None, cfg.get("olmo", False),
                           cfg.get("clip", 0.0), cfg.get("qk_whole", False)).to(dtype)
    params = sum(p.numel() for p in block.parameters())
    adapters = add_lora(block, cfg["lora"], dtype) if cfg.get("lora") else []
    x = torch.randn(b, s, h, dtype=dtype, requires_grad=True)
    mask = torch.full((s, s), float("-inf"), dtype=dtype).triu(1)
    constants = [mask] + list(block.parameters()) + adapters
    recompute = cfg.get("recompute", "none")
    selective = recompute == "selective"
    if kind == "gpt":
        layer = lambda x_: block(x_, mask, selective)
    else:
        # OLMo's OlmoRotaryEmbedding keeps its tables in fp32.
        cos, sin = rope_tables(b, s, (cfg["rotary"] or 2) if kind == "neox" else h // cfg["heads"],
                               torch.float32 if cfg.get("olmo") else dtype)
        constants += [cos, sin]
        layer = lambda x_: block(x_, mask, cos, sin, selective)
    # Full recompute: checkpoint the whole layer, which keeps only its input.
    fn = (lambda: checkpoint(layer, x, use_reentrant=True)) if recompute == "full" else (lambda: layer(x))
    saved, out = saved_bytes(fn, constants)
    out.float().sum().backward()  # the graph is complete: backward runs with what was saved
    return saved, params


def count_model_parameters(kind, cfg):
    """Parameters of a whole model: embedding, layers, final norm, untied output layer."""
    h, v, layers = cfg["hidden"], cfg["vocab"], cfg["layers"]
    if kind == "gpt":
        blocks = [GPTBlock(h, cfg["heads"], cfg["ffn"], 0.0) for _ in range(layers)]
        extra = torch.nn.ModuleList([torch.nn.Embedding(v, h), torch.nn.Embedding(cfg["max_positions"], h),
                                     torch.nn.LayerNorm(h)])  # tied output layer: no extra matrix
    elif kind == "neox" and cfg.get("family") == "starcoder2":  # a final LayerNorm, tied
        blocks = [neox_block(cfg) for _ in range(layers)]
        extra = torch.nn.ModuleList([torch.nn.Embedding(v, h), torch.nn.LayerNorm(h)])
    elif kind == "neox" and cfg.get("family") == "opt":  # learned positions (max + 2 rows), a final LayerNorm, tied
        # OPT-350M: the embedding word_embed_proj_dim wide with project_in / project_out (no bias); no final LayerNorm
        # after post-residual norms.
        blocks = [neox_block(cfg) for _ in range(layers)]
        w = cfg.get("embed_width") or h
        extra = [torch.nn.Embedding(v, w), torch.nn.Embedding(cfg["max_positions"] + 2, h)]
        if w != h:
            extra += [torch.nn.Linear(w, h, bias=False), torch.nn.Linear(h, w, bias=False)]
        if not cfg.get("post_ln"):
            extra.append(torch.nn.LayerNorm(h))
        extra = torch.nn.ModuleList(extra)
    elif kind == "neox" and cfg.get("family") == "stablelm":  # a final LayerNorm, an untied lm_head without bias
        blocks = [neox_block(cfg) for _ in range(layers)]
        extra = torch.nn.ModuleList([torch.nn.Embedding(v, h), torch.nn.LayerNorm(h), torch.nn.Linear(h, v, bias=False)])
    elif kind == "neox":  # untied embed_out (Phi's lm_head with a bias), a final LayerNorm
        blocks = [neox_block(cfg) for _ in range(layers)]
        extra = torch.nn.ModuleList([torch.nn.Embedding(v, h), torch.nn.LayerNorm(h),
                                     torch.nn.Linear(h, v, bias=cfg["lm_head_bias"])])
    else:
        olmo = cfg.get("olmo", False)
        blocks = [LlamaBlock(h, cfg["heads"], cfg["kv_heads"], cfg["ffn"], cfg["qkv_bias"], cfg.get("qk_norm", False),
                             cfg.get("fused", False), sandwich=cfg.get("sandwich", False), olmo2=cfg.get("olmo2", False),
                             olmo=olmo, qk_whole=cfg.get("qk_whole", False))
                  for _ in range(layers)]
        extra = torch.nn.ModuleList([torch.nn.Embedding(v, h), OlmoLayerNorm(h) if olmo else LlamaRMSNorm(h),
                                     torch.nn.Linear(h, v, bias=False)])
    model = torch.nn.ModuleList(blocks + [extra])
    return sum(p.numel() for p in model.parameters())
