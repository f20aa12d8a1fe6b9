"""Forward-only (no autograd) peaks of a Hugging Face Llama-style decoder layer, measured op by op on the CPU.

The layer is written as transformers' modeling_llama.py structures it, one Python frame per module (decoder layer,
RMSNorm, attention with its eager attention function and rotary embedding, MLP), because under torch.no_grad a
tensor lives exactly as long as a Python name or an argument refers to it: the frames decide the peak.
`LiveBytes` counts the bytes of every storage an aten op creates while it is alive (a TorchDispatchMode sees
each op's outputs; a finalizer on each output tensor sees it go), so its peak is what the layer adds above its
input.
"""
import functools
import math
import weakref

import blocks  # first: it caps oneDNN's ISA before torch loads
import torch
import torch.nn.functional as F
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_flatten


class LiveBytes(TorchDispatchMode):
    def __init__(self, existing):
        super().__init__()
        self.size, self.refs, self.current, self.peak = {}, {}, 0, 0
        self.existing = {t.storage().data_ptr() for t in existing}  # parameters and inputs: views of them are not new

    def _gone(self, key):
        self.refs[key] -= 1
        if self.refs[key] == 0:
            self.current -= self.size.pop(key)
            del self.refs[key]

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        for t in tree_flatten(out)[0]:
            if isinstance(t, torch.Tensor) and t.dim() > 0:
                key = t.storage().data_ptr()
                if key in self.existing:
                    continue
                if key not in self.size:
                    self.size[key] = t.storage().size() * t.element_size()
                    self.refs[key] = 0
                    self.current += self.size[key]
                    self.peak = max(self.peak, self.current)
                self.refs[key] += 1
                weakref.finalize(t, self._gone, key)
        return out


# The norm, rotate_half and repeat_kv are transformers' as blocks.py writes them for the autograd oracle: the same ops
# in the same frames.
RMSNorm = blocks.LlamaRMSNorm
rotate_half = blocks.rotate_half
repeat_kv = blocks.repeat_kv


def apply_rotary(q, k, cos, sin):
    q_embed = (q * cos) + (rotate_half(q) * sin)
    k_embed = (k * cos) + (rotate_half(k) * sin)
    return q_embed, k_embed


def apply_rotary_olmo(q, k, cos, sin):
    """modeling_olmo.py apply_rotary_pos_emb: fp32 cos and sin (OlmoRotaryEmbedding), the results cast back."""
    q_type, k_type = q.dtype, k.dtype
    q_embed = (q * cos) + (rotate_half(q) * sin)
    k_embed = (k * cos) + (rotate_half(k) * sin)
    return q_embed.to(q_type), k_embed.to(k_type)


def apply_rotary_cat(q, k, cos, sin):
    """modeling_phi3.py apply_rotary_pos_emb: the first rotary_dim values of each head rotated (rotary_dim = the tables'
    width, partial_rotary_factor x head_dim), then torch.cat with the passed part, at any factor (a new tensor)."""
    rotary_dim = cos.shape[-1]
    q_rot, q_pass = q[..., :rotary_dim], q[..., rotary_dim:]
    k_rot, k_pass = k[..., :rotary_dim], k[..., rotary_dim:]
    q_embed = torch.cat([(q_rot * cos) + (rotate_half(q_rot) * sin), q_pass], dim=-1)
    k_embed = torch.cat([(k_rot * cos) + (rotate_half(k_rot) * sin), k_pass], dim=-1)
    return q_embed, k_embed


def cache_update(cache, key_states, value_states):
    """DynamicCache.update for one layer, as transformers 5's DynamicLayer.update runs it: torch.cat onto the empty
    tensors of lazy_initialization copies K and V, the cache keeps the copies and attention reads them (4.x's first
    update kept the tensors themselves). The H200's OLMo-1B eager step at b = 2, every head a KV head, reads it exactly."""
    empty = key_states.new_empty(0)
    key_states, value_states = torch.cat([empty, key_states], dim=-2), torch.cat([empty, value_states], dim=-2)
    cache.append((key_states, value_states))
    return key_states, value_states


def eager_attention(query, key, value, mask, scaling, n_rep, softcap=0.0):
    key_states = repeat_kv(key, n_rep)
    value_states = repeat_kv(value, n_rep)
    attn_weights = torch.matmul(query, key_states.transpose(2, 3)) * scaling
    if softcap:  # Gemma-2's eager_attention_forward
        attn_weights = attn_weights / softcap
        attn_weights = torch.tanh(attn_weights)
        attn_weights = attn_weights * softcap
    attn_weights = attn_weights + mask
    attn_weights = F.softmax(attn_weights, dim=-1, dtype=torch.float32).to(query.dtype)
    attn_output = torch.matmul(attn_weights, value_states)
    attn_output = attn_output.transpose(1, 2).contiguous()
    return attn_output, attn_weights


class Attention(torch.nn.Module):
    def __init__(self, h, heads, kv_heads, d, qk_norm=False, norm=RMSNorm, softcap=0.0, olmo2=False, rope=True, olmo=False,
                 fused=False, bias=False):
        super().__init__()
        self.heads, self.kv, self.d, self.softcap, self.olmo2, self.olmo = heads, kv_heads, d, softcap, olmo2, olmo
        self.rope = rope  # SmolLM3Attention: use_rope = config.no_rope_layers[layer_idx]
        self.fused = fused  # Phi3Attention (modeling_phi3.py): one qkv_proj, q, k and v sliced out of its output
        # Qwen3Attention (transformers modeling_qwen3.py): an RMSNorm over each head's query and key; Olmo2Attention
        # (modeling_olmo2.py): over each token's whole q_proj and k_proj outputs.
        if fused:
            self.qkv_proj = torch.nn.Linear(h, (heads + 2 * kv_heads) * d, bias=False)
        else:
            # StarCoder2's use_bias: q, k, v and o with biases (an addmm's one output, as without)
            self.q_proj = torch.nn.Linear(h, heads * d, bias=bias)
            self.k_proj = torch.nn.Linear(h, kv_heads * d, bias=bias)
            self.v_proj = torch.nn.Linear(h, kv_heads * d, bias=bias)
        self.o_proj = torch.nn.Linear(heads * d, h, bias=bias)
        self.q_norm = norm(heads * d if olmo2 else d) if qk_norm or olmo2 else None
        self.k_norm = norm(kv_heads * d if olmo2 else d) if qk_norm or olmo2 else None
        # Gemma3Attention (modeling_gemma3.py) runs q_proj, k_proj and v_proj first and then q_norm and k_norm over their
        # transposed heads; Qwen3Attention norms each projection's heads before the next projection runs. The order
        # autograd's nodes are created in, and so the order backward runs them in.
        self.norms_after_projections = qk_norm and norm is blocks.GemmaRMSNorm

    def forward(self, hidden_states, cos, sin, mask, cache):
        input_shape = hidden_states.shape[:-1]
        hidden_shape = (*input_shape, -1, self.d)
        if self.olmo2:
            return self.forward_olmo2(hidden_states, cos, sin, mask, cache)
        if self.fused:
            return self.forward_phi3(hidden_states, cos, sin, mask, cache)
        if self.q_norm is not None and not self.norms_after_projections:
            query_states = self.q_norm(self.q_proj(hidden_states).view(hidden_shape)).transpose(1, 2)
            key_states = self.k_norm(self.k_proj(hidden_states).view(hidden_shape)).transpose(1, 2)
        else:
            query_states = self.q_proj(hidden_states).view(hidden_shape).transpose(1, 2)
            key_states = self.k_proj(hidden_states).view(hidden_shape).transpose(1, 2)
        value_states = self.v_proj(hidden_states).view(hidden_shape).transpose(1, 2)
        if self.norms_after_projections:
            query_states, key_states = self.q_norm(query_states), self.k_norm(key_states)
        if self.rope:  # OlmoAttention (modular_olmo.py): fp32 tables, the rotated q and k cast back
            query_states, key_states = (apply_rotary_olmo if self.olmo else apply_rotary)(query_states, key_states, cos, sin)
        if cache is not None:  # past_key_values.update, rebinding key_states and value_states in this frame
            key_states, value_states = cache_update(cache, key_states, value_states)
        return self.attend(query_states, key_states, value_states, mask, input_shape)

    def attend(self, query_states, key_states, value_states, mask, input_shape):
        """The attention forward's tail, the caller's q, k and v alive throughout as in transformers' frame."""
        attn_output, attn_weights = eager_attention(query_states, key_states, value_states, mask, 1.0 / math.sqrt(self.d),
                                                    self.heads // self.kv, self.softcap)
        attn_output = attn_output.reshape(*input_shape, -1).contiguous()
        attn_output = self.o_proj(attn_output)
        return attn_output, attn_weights

    def forward_phi3(self, hidden_states, cos, sin, mask, cache):  # Phi3Attention.forward
        input_shape = hidden_states.shape[:-1]
        hidden_shape = (*input_shape, -1, self.d)
        qkv = self.qkv_proj(hidden_states)
        query_pos = self.heads * self.d
        query_states = qkv[..., :query_pos]
        key_states = qkv[..., query_pos:query_pos + self.kv * self.d]
        value_states = qkv[..., query_pos + self.kv * self.d:]
        query_states = query_states.view(hidden_shape).transpose(1, 2)
        key_states = key_states.view(hidden_shape).transpose(1, 2)
        value_states = value_states.view(hidden_shape).transpose(1, 2)
        query_states, key_states = apply_rotary_cat(query_states, key_states, cos, sin)
        if cache is not None:
            key_states, value_states = cache_update(cache, key_states, value_states)
        return self.attend(query_states, key_states, value_states, mask, input_shape)

    def forward_olmo2(self, hidden_states, cos, sin, mask, cache):  # Olmo2Attention.forward
        input_shape = hidden_states.shape[:-1]
        hidden_shape = (*input_shape, -1, self.d)
        query_states = self.q_norm(self.q_proj(hidden_states))
        key_states = self.k_norm(self.k_proj(hidden_states))
        value_states = self.v_proj(hidden_states)
        query_states = query_states.view(hidden_shape).transpose(1, 2)
        key_states = key_states.view(hidden_shape).transpose(1, 2)
        value_states = value_states.view(hidden_shape).transpose(1, 2)
        if self.rope:
            query_states, key_states = apply_rotary_olmo(query_states, key_states, cos, sin)
        if cache is not None:
            key_states, value_states = cache_update(cache, key_states, value_states)
        return self.attend(query_states, key_states, value_states, mask, input_shape)


ACT2FN = {"gelu": F.gelu, "gelu_new": blocks.gelu_new, "gelu_fast": blocks.gelu_fast, "relu": F.relu,
          "gelu_pytorch_tanh": lambda x: F.gelu(x, approximate="tanh")}  # transformers activations.py, op for op


class TwoLinearMLP(torch.nn.Module):
    """GPTNeoXMLP, PhiMLP, Starcoder2MLP and GPT2MLP.forward alike: the first linear (dense_h_to_4h, fc1, c_fc), act
    (ACT2FN[hidden_act]), the second (dense_4h_to_h, fc2, c_proj), each rebinding hidden_states; dropout with p = 0
    returns its input. Biases throughout (an addmm's one output, as without)."""

    def __init__(self, h, ffn, act):
        super().__init__()
        self.fc1 = torch.nn.Linear(h, ffn)
        self.fc2 = torch.nn.Linear(ffn, h)
        self.act = ACT2FN[act]

    def forward(self, hidden_states):
        hidden_states = self.fc1(hidden_states)
        hidden_states = self.act(hidden_states)
        hidden_states = self.fc2(hidden_states)
        return hidden_states


class MLP(torch.nn.Module):
    def __init__(self, h, ffn, gemma=False, fused=False):
        super().__init__()
        self.fused = fused  # Phi3MLP (modeling_phi3.py): one gate_up_proj, chunked into gate and up
        if fused:
            self.gate_up_proj = torch.nn.Linear(h, 2 * ffn, bias=False)
        else:
            self.gate_proj = torch.nn.Linear(h, ffn, bias=False)
            self.up_proj = torch.nn.Linear(h, ffn, bias=False)
        self.down_proj = torch.nn.Linear(ffn, h, bias=False)
        # GemmaMLP: gelu_pytorch_tanh (activations.py PytorchGELUTanh); LlamaMLP: SiLU.
        self.act_fn = (lambda x: F.gelu(x, approximate="tanh")) if gemma else F.silu

    def forward(self, x):
        if self.fused:  # Phi3MLP.forward
            up_states = self.gate_up_proj(x)
            gate, up_states = up_states.chunk(2, dim=-1)
            up_states = up_states * self.act_fn(gate)
            return self.down_proj(up_states)
        return self.down_proj(self.act_fn(self.gate_proj(x)) * self.up_proj(x))


class DecoderLayer(torch.nn.Module):
    def __init__(self, h, heads, kv_heads, ffn, qk_norm=False, gemma=False, sandwich=False, softcap=0.0, olmo2=False, rope=True,
                 residual_multiplier=None, d=None, olmo=False, fused=False, starcoder2=None):
        super().__init__()
        # OlmoDecoderLayer (modular_olmo.py): Llama's layer with OlmoLayerNorm as both norms. Starcoder2DecoderLayer
        # (modular_starcoder2.py): Llama's with nn.LayerNorm, biased projections and Starcoder2MLP (starcoder2: its act).
        norm = (torch.nn.LayerNorm if starcoder2 else blocks.OlmoLayerNorm if olmo else blocks.Olmo2RMSNorm if olmo2
                else blocks.GemmaRMSNorm if gemma else RMSNorm)
        self.olmo2 = olmo2
        self.residual_multiplier = residual_multiplier  # GraniteDecoderLayer: residual + hidden_states * residual_multiplier
        # Registered in transformers' order (LlamaDecoderLayer.__init__: self_attn, mlp, then the norms), which is
        # model.parameters()' order and so the for-loop optimizer's.
        self.self_attn = Attention(h, heads, kv_heads, d or h // heads, qk_norm, norm, softcap, olmo2, rope, olmo, fused, bool(starcoder2))
        self.mlp = TwoLinearMLP(h, ffn, starcoder2) if starcoder2 else MLP(h, ffn, gemma, fused)
        if not olmo2:  # Olmo2DecoderLayer deletes input_layernorm
            self.input_layernorm = norm(h)
        self.post_attention_layernorm = norm(h)
        # Gemma2DecoderLayer: input_layernorm, attention, post_attention_layernorm, residual; pre_feedforward_layernorm,
        # MLP, post_feedforward_layernorm, residual (its post_attention_layernorm is the branch norm).
        self.sandwich = sandwich
        if sandwich:
            self.pre_feedforward_layernorm = norm(h)
        if sandwich or olmo2:
            self.post_feedforward_layernorm = norm(h)

    def forward(self, hidden_states, cos, sin, mask, cache, position_ids=None):
        if self.sandwich or self.olmo2:
            return self.forward_sandwich(hidden_states, cos, sin, mask, cache)
        residual = hidden_states
        hidden_states = self.input_layernorm(hidden_states)
        hidden_states, _ = self.self_attn(hidden_states, cos, sin, mask, cache)
        if self.residual_multiplier is not None:
            hidden_states = residual + hidden_states * self.residual_multiplier
        else:
            hidden_states = residual + hidden_states
        residual = hidden_states
        hidden_states = self.post_attention_layernorm(hidden_states)
        hidden_states = self.mlp(hidden_states)
        if self.residual_multiplier is not None:
            hidden_states = residual + hidden_states * self.residual_multiplier
        else:
            hidden_states = residual + hidden_states
        return hidden_states

    def forward_sandwich(self, hidden_states, cos, sin, mask, cache):
        """Gemma2DecoderLayer.forward, and Olmo2DecoderLayer.forward without its pre-norms (norms after each branch only)."""
        residual = hidden_states
        if not self.olmo2:
            hidden_states = self.input_layernorm(hidden_states)
        hidden_states, _ = self.self_attn(hidden_states, cos, sin, mask, cache)
        hidden_states = self.post_attention_layernorm(hidden_states)
        hidden_states = residual + hidden_states
        residual = hidden_states
        if not self.olmo2:
            hidden_states = self.pre_feedforward_layernorm(hidden_states)
        hidden_states = self.mlp(hidden_states)
        hidden_states = self.post_feedforward_layernorm(hidden_states)
        hidden_states = residual + hidden_states
        return hidden_states


def apply_rotary_partial(q, k, cos, sin):
    """modular_gpt_neox.py apply_rotary_pos_emb: the first rotary_dim values of each head of q, then of k, rotated (the
    tables' width); only then each joined to its passed part by torch.cat (Phi-3's joins q before rotating k)."""
    rotary_dim = cos.shape[-1]
    q_rot, q_pass = q[..., :rotary_dim], q[..., rotary_dim:]
    k_rot, k_pass = k[..., :rotary_dim], k[..., rotary_dim:]
    q_embed = (q_rot * cos) + (rotate_half(q_rot) * sin)
    k_embed = (k_rot * cos) + (rotate_half(k_rot) * sin)
    q_embed = torch.cat([q_embed, q_pass], dim=-1)
    k_embed = torch.cat([k_embed, k_pass], dim=-1)
    return q_embed, k_embed


class NeoXAttention(torch.nn.Module):
    """GPTNeoXAttention.forward (modular_gpt_neox.py): one query_key_value viewed per head as [q | k | v] and chunked,
    partial RoPE, the cache's copies, eager_attention_forward, dense."""

    def __init__(self, h, heads):
        super().__init__()
        self.heads, self.d = heads, h // heads
        self.query_key_value = torch.nn.Linear(h, 3 * h)
        self.dense = torch.nn.Linear(h, h)

    def forward(self, hidden_states, cos, sin, mask, cache):
        input_shape = hidden_states.shape[:-1]
        hidden_shape = (*input_shape, -1, 3 * self.d)
        qkv = self.query_key_value(hidden_states).view(hidden_shape).transpose(1, 2)
        query_states, key_states, value_states = qkv.chunk(3, dim=-1)
        query_states, key_states = apply_rotary_partial(query_states, key_states, cos, sin)
        if cache is not None:
            key_states, value_states = cache_update(cache, key_states, value_states)
        attn_output, attn_weights = eager_attention(query_states, key_states, value_states, mask, self.d ** -0.5, 1)
        attn_output = attn_output.reshape(*input_shape, -1).contiguous()
        attn_output = self.dense(attn_output)
        return attn_output, attn_weights


class NeoXLayer(torch.nn.Module):
    """GPTNeoXLayer.forward: attention over input_layernorm's output (an argument, alive until attention returns), then
    x + attn + mlp(post_attention_layernorm(x)) (use_parallel_residual) or R1 = attn + x, R1 + mlp(ln2(R1)); the
    attention weights stay bound to the layer's end. Dropout with p = 0 returns its input."""

    def __init__(self, h, heads, ffn, act, parallel):
        super().__init__()
        self.parallel = parallel
        self.input_layernorm = torch.nn.LayerNorm(h)
        self.post_attention_layernorm = torch.nn.LayerNorm(h)
        self.attention = NeoXAttention(h, heads)
        self.mlp = TwoLinearMLP(h, ffn, act)

    def forward(self, hidden_states, cos, sin, mask, cache, position_ids=None):
        attn_output, attn_weights = self.attention(self.input_layernorm(hidden_states), cos, sin, mask, cache)
        if self.parallel:
            mlp_output = self.mlp(self.post_attention_layernorm(hidden_states))
            hidden_states = mlp_output + attn_output + hidden_states
        else:
            attn_output = attn_output + hidden_states
            mlp_output = self.mlp(self.post_attention_layernorm(attn_output))
            hidden_states = mlp_output + attn_output
        return hidden_states


class PhiAttention(torch.nn.Module):
    """PhiAttention.forward (modeling_phi.py): q_proj, k_proj, v_proj with biases; query_rot / query_pass and key_rot /
    key_pass sliced, both rotated by Llama's apply_rotary_pos_emb and kept by the frame's names, then each joined by
    torch.cat; the cache's copies; eager_attention_forward with repeat_kv; dense."""

    def __init__(self, h, heads, kv_heads, rotary):
        super().__init__()
        self.heads, self.kv, self.d, self.rotary_ndims = heads, kv_heads, h // heads, rotary
        self.q_proj = torch.nn.Linear(h, heads * self.d)
        self.k_proj = torch.nn.Linear(h, kv_heads * self.d)
        self.v_proj = torch.nn.Linear(h, kv_heads * self.d)
        self.dense = torch.nn.Linear(heads * self.d, h)

    def forward(self, hidden_states, cos, sin, mask, cache):
        input_shape = hidden_states.shape[:-1]
        hidden_shape = (*input_shape, -1, self.d)
        query_states = self.q_proj(hidden_states).view(hidden_shape).transpose(1, 2)
        key_states = self.k_proj(hidden_states).view(hidden_shape).transpose(1, 2)
        value_states = self.v_proj(hidden_states).view(hidden_shape).transpose(1, 2)
        query_rot, query_pass = query_states[..., :self.rotary_ndims], query_states[..., self.rotary_ndims:]
        key_rot, key_pass = key_states[..., :self.rotary_ndims], key_states[..., self.rotary_ndims:]
        query_rot, key_rot = apply_rotary(query_rot, key_rot, cos, sin)
        query_states = torch.cat((query_rot, query_pass), dim=-1)
        key_states = torch.cat((key_rot, key_pass), dim=-1)
        if cache is not None:
            key_states, value_states = cache_update(cache, key_states, value_states)
        attn_output, attn_weights = eager_attention(query_states, key_states, value_states, mask, self.d ** -0.5, self.heads // self.kv)
        attn_output = attn_output.reshape(*input_shape, -1).contiguous()
        attn_output = self.dense(attn_output)
        return attn_output, attn_weights


class PhiLayer(torch.nn.Module):
    """PhiDecoderLayer.forward: residual = x; hidden_states = input_layernorm(x), bound through both branches;
    attention, the MLP (PhiMLP: fc1, act, fc2, as GPTNeoXMLP's frame) over the same normed input, then
    attn + mlp + residual; resid_dropout (config.json resid_pdrop) over each branch's output, which with p = 0
    returns its input."""

    def __init__(self, h, heads, kv_heads, ffn, act, rotary, dropout=0.0):
        super().__init__()
        self.self_attn = PhiAttention(h, heads, kv_heads, rotary)
        self.mlp = TwoLinearMLP(h, ffn, act)
        self.input_layernorm = torch.nn.LayerNorm(h)
        self.dropout = dropout

    def forward(self, hidden_states, cos, sin, mask, cache, position_ids=None):
        residual = hidden_states
        hidden_states = self.input_layernorm(hidden_states)
        attn_outputs, self_attn_weights = self.self_attn(hidden_states, cos, sin, mask, cache)
        attn_outputs = F.dropout(attn_outputs, p=self.dropout, training=self.training)
        feed_forward_hidden_states = F.dropout(self.mlp(hidden_states), p=self.dropout, training=self.training)
        hidden_states = attn_outputs + feed_forward_hidden_states + residual
        return hidden_states


class StableLmAttention(torch.nn.Module):
    """StableLmAttention.forward (modeling_stablelm.py, eager): q_proj, k_proj and v_proj (use_qkv_bias) viewed per
    head and transposed; query_rot / query_pass and key_rot / key_pass sliced, the rotated parts by Llama's
    apply_rotary_pos_emb, each joined to its passed part by torch.cat; the cache's copies; QK^T / sqrt(d), the mask
    added in place, softmax in fp32 and the cast back (attention_dropout with p = 0 returns its input), P @ V,
    transpose(1, 2).contiguous(), reshape, o_proj without bias; attn_weights set to None before the return."""

    def __init__(self, h, heads, rotary, bias):
        super().__init__()
        self.heads, self.d, self.rotary_ndims = heads, h // heads, rotary
        self.q_proj = torch.nn.Linear(h, h, bias=bias)
        self.k_proj = torch.nn.Linear(h, h, bias=bias)
        self.v_proj = torch.nn.Linear(h, h, bias=bias)
        self.o_proj = torch.nn.Linear(h, h, bias=False)

    def forward(self, hidden_states, cos, sin, mask, cache):
        bsz, q_len, _ = hidden_states.size()
        query_states = self.q_proj(hidden_states)
        key_states = self.k_proj(hidden_states)
        value_states = self.v_proj(hidden_states)
        query_states = query_states.view(bsz, q_len, self.heads, self.d).transpose(1, 2)
        key_states = key_states.view(bsz, q_len, self.heads, self.d).transpose(1, 2)
        value_states = value_states.view(bsz, q_len, self.heads, self.d).transpose(1, 2)
        query_rot, query_pass = query_states[..., :self.rotary_ndims], query_states[..., self.rotary_ndims:]
        key_rot, key_pass = key_states[..., :self.rotary_ndims], key_states[..., self.rotary_ndims:]
        query_rot, key_rot = apply_rotary(query_rot, key_rot, cos, sin)
        query_states = torch.cat((query_rot, query_pass), dim=-1)
        key_states = torch.cat((key_rot, key_pass), dim=-1)
        if cache is not None:
            key_states, value_states = cache_update(cache, key_states, value_states)
        attn_weights = torch.matmul(query_states, key_states.transpose(2, 3)) / math.sqrt(self.d)
        attn_weights += mask
        attn_weights = F.softmax(attn_weights, dtype=torch.float32, dim=-1).to(query_states.dtype)
        attn_output = torch.matmul(attn_weights, value_states)
        attn_output = attn_output.transpose(1, 2).contiguous()
        attn_output = attn_output.reshape(bsz, q_len, -1)
        attn_output = self.o_proj(attn_output)
        attn_weights = None
        return attn_output, attn_weights


class StableLmLayer(torch.nn.Module):
    """StableLmDecoderLayer.forward: residual = x; hidden_states = input_layernorm(x), never rebound before the layer's
    last line; the attention output bound as self_attn_output; use_parallel_residual: the MLP (StableLmMLP, LlamaMLP's
    frame) over the same normed input, then residual + self_attn_output + mlp_output; in sequence: residual = residual
    + self_attn_output, the MLP over post_attention_layernorm(residual), residual + mlp_output. hidden_dropout with
    p = 0 returns its input."""

    def __init__(self, h, heads, ffn, rotary, parallel, bias):
        super().__init__()
        self.parallel = parallel
        self.self_attn = StableLmAttention(h, heads, rotary, bias)
        self.mlp = MLP(h, ffn)
        self.input_layernorm = torch.nn.LayerNorm(h)
        self.post_attention_layernorm = None if parallel else torch.nn.LayerNorm(h)

    def forward(self, hidden_states, cos, sin, mask, cache, position_ids=None):
        residual = hidden_states
        hidden_states = self.input_layernorm(hidden_states)
        self_attn_output, self_attn_weights = self.self_attn(hidden_states, cos, sin, mask, cache)
        if self.parallel:
            mlp_output = self.mlp(hidden_states)
            hidden_states = residual + self_attn_output + mlp_output
        else:
            residual = residual + self_attn_output
            mlp_output = self.mlp(self.post_attention_layernorm(residual))
            hidden_states = residual + mlp_output
        return hidden_states


def gpt2_eager_attention(query, key, value, mask):
    """modeling_gpt2.py eager_attention_forward (transformers 5): QK^T, divided by a 0-dim sqrt(d), the additive mask,
    softmax in the scores' dtype, .type(value.dtype) (itself), P @ V, transpose(1, 2) as a view."""
    attn_weights = torch.matmul(query, key.transpose(-1, -2))
    attn_weights = attn_weights / torch.full([], value.size(-1) ** 0.5, dtype=attn_weights.dtype)
    attn_weights = attn_weights + mask
    attn_weights = F.softmax(attn_weights, dim=-1)
    attn_weights = attn_weights.type(value.dtype)
    attn_output = torch.matmul(attn_weights, value)
    attn_output = attn_output.transpose(1, 2)
    return attn_output, attn_weights


class GPT2Attention(torch.nn.Module):
    """GPT2Attention.forward: c_attn's output split into q, k, v views (kept by the three names to the frame's end),
    the cache's copies, eager attention, reshape(...).contiguous() (a copy of the transposed view), c_proj (Conv1D:
    addmm, one output, as nn.Linear)."""

    def __init__(self, h, heads):
        super().__init__()
        self.h, self.d = h, h // heads
        self.c_attn = torch.nn.Linear(h, 3 * h)
        self.c_proj = torch.nn.Linear(h, h)

    def forward(self, hidden_states, mask, cache):
        query_states, key_states, value_states = self.c_attn(hidden_states).split(self.h, dim=2)
        shape_kv = (*key_states.shape[:-1], -1, self.d)
        key_states = key_states.view(shape_kv).transpose(1, 2)
        value_states = value_states.view(shape_kv).transpose(1, 2)
        shape_q = (*query_states.shape[:-1], -1, self.d)
        query_states = query_states.view(shape_q).transpose(1, 2)
        if cache is not None:
            key_states, value_states = cache_update(cache, key_states, value_states)
        attn_output, attn_weights = gpt2_eager_attention(query_states, key_states, value_states, mask)
        attn_output = attn_output.reshape(*attn_output.shape[:-2], -1).contiguous()
        attn_output = self.c_proj(attn_output)
        return attn_output, attn_weights


class GPT2Block(torch.nn.Module):
    """GPT2Block.forward: residual = x; ln_1; `attn_output, _ = self.attn(...)` (the output and the probabilities bound
    to the block's end); R1 = attn_output + residual; ln_2; the MLP; residual + mlp."""

    def __init__(self, h, heads, ffn, act):
        super().__init__()
        self.ln_1 = torch.nn.LayerNorm(h)
        self.attn = GPT2Attention(h, heads)
        self.ln_2 = torch.nn.LayerNorm(h)
        self.mlp = TwoLinearMLP(h, ffn, act)

    def forward(self, hidden_states, mask, cache):
        residual = hidden_states
        hidden_states = self.ln_1(hidden_states)
        attn_output, _ = self.attn(hidden_states, mask, cache)
        hidden_states = attn_output + residual
        residual = hidden_states
        hidden_states = self.ln_2(hidden_states)
        feed_forward_hidden_states = self.mlp(hidden_states)
        hidden_states = residual + feed_forward_hidden_states
        return hidden_states


class GPT2LM(torch.nn.Module):
    """GPT2LMHeadModel's frames: GPT2Model.forward (wte, the int64 cache_position, wpe over one row of positions,
    their sum, the additive causal mask, the blocks, ln_f) with inputs_embeds and position_embeds bound to its end;
    the tied lm_head."""

    def __init__(self, cfg):
        super().__init__()
        h = cfg["hidden"]
        self.wte = torch.nn.Embedding(cfg["vocab"], h)
        self.wpe = torch.nn.Embedding(cfg["max_positions"], h)
        self.h = torch.nn.ModuleList(GPT2Block(h, cfg["heads"], cfg["ffn"], cfg["act"]) for _ in range(cfg["layers"]))
        self.ln_f = torch.nn.LayerNorm(h)

    def transformer(self, input_ids, cache):
        inputs_embeds = self.wte(input_ids)
        b, s = input_ids.shape
        cache_position = torch.arange(s)
        position_ids = cache_position.unsqueeze(0)
        position_embeds = self.wpe(position_ids)
        hidden_states = inputs_embeds + position_embeds
        mask = torch.full((b, 1, s, s), float("-inf"), dtype=inputs_embeds.dtype).triu(1)
        for block in self.h:
            hidden_states = block(hidden_states, mask, cache)
        hidden_states = self.ln_f(hidden_states)
        return hidden_states

    def forward(self, input_ids, cache, output):
        hidden_states = self.transformer(input_ids, cache)
        if output == "hidden-states":
            return hidden_states
        return F.linear(hidden_states, self.wte.weight)  # lm_head tied to wte


class OPTAttention(torch.nn.Module):
    """OPTAttention.forward: q_proj's output times head_dim ** -0.5, viewed per head and transposed; k_proj's and v_proj's
    likewise; the cache's copies; eager attention with scaling 1.0; reshape(...).contiguous() (a view of the contiguous
    output), out_proj; the attention weights set to None before the return."""

    def __init__(self, h, heads, bias):
        super().__init__()
        self.heads, self.d = heads, h // heads
        self.scaling = self.d ** -0.5
        self.k_proj = torch.nn.Linear(h, h, bias=bias)
        self.v_proj = torch.nn.Linear(h, h, bias=bias)
        self.q_proj = torch.nn.Linear(h, h, bias=bias)
        self.out_proj = torch.nn.Linear(h, h, bias=bias)

    def forward(self, hidden_states, mask, cache):
        bsz, tgt_len, _ = hidden_states.size()
        query_states = self.q_proj(hidden_states) * self.scaling
        query_states = query_states.view(bsz, -1, self.heads, self.d).transpose(1, 2)
        key_states = self.k_proj(hidden_states)
        value_states = self.v_proj(hidden_states)
        key_states = key_states.view(bsz, -1, self.heads, self.d).transpose(1, 2)
        value_states = value_states.view(bsz, -1, self.heads, self.d).transpose(1, 2)
        if cache is not None:
            key_states, value_states = cache_update(cache, key_states, value_states)
        # modeling_opt.py's eager_attention_forward: eager_attention's ops without repeat_kv (n_rep 1 returns K and V);
        # times scaling 1.0 is a new tensor still.
        attn_output, attn_weights = eager_attention(query_states, key_states, value_states, mask, 1.0, 1)
        attn_output = attn_output.reshape(bsz, tgt_len, -1).contiguous()
        attn_output = self.out_proj(attn_output)
        attn_weights = None
        return attn_output, attn_weights


class OPTLayer(torch.nn.Module):
    """OPTDecoderLayer.forward: self_attn_layer_norm before attention (do_layer_norm_before) or after its residual add
    (OPT-350M), hidden_states rebound at each step; the MLP's residual bound to the layer's end, final_layer_norm before
    fc1 or after the last add; ReLU; config.json's dropout after the attention and after fc2 (with p = 0 it returns its
    input)."""

    def __init__(self, h, heads, ffn, before, bias, dropout=0.0):
        super().__init__()
        self.dropout = dropout
        self.self_attn = OPTAttention(h, heads, bias)
        self.do_layer_norm_before = before
        self.self_attn_layer_norm = torch.nn.LayerNorm(h)
        self.fc1 = torch.nn.Linear(h, ffn, bias=bias)
        self.fc2 = torch.nn.Linear(ffn, h, bias=bias)
        self.final_layer_norm = torch.nn.LayerNorm(h)

    def forward(self, hidden_states, mask, cache, position_ids=None, cache_position=None):
        # position_ids and cache_position: passed by OPTDecoder, read by no op here (held by a checkpointed call)
        residual = hidden_states
        if self.do_layer_norm_before:
            hidden_states = self.self_attn_layer_norm(hidden_states)
        hidden_states, self_attn_weights = self.self_attn(hidden_states, mask, cache)
        hidden_states = F.dropout(hidden_states, p=self.dropout, training=self.training)
        hidden_states = residual + hidden_states
        if not self.do_layer_norm_before:
            hidden_states = self.self_attn_layer_norm(hidden_states)
        hidden_states_shape = hidden_states.shape
        hidden_states = hidden_states.reshape(-1, hidden_states.size(-1))
        residual = hidden_states
        if self.do_layer_norm_before:
            hidden_states = self.final_layer_norm(hidden_states)
        hidden_states = self.fc1(hidden_states)
        hidden_states = F.relu(hidden_states)
        hidden_states = self.fc2(hidden_states)
        hidden_states = F.dropout(hidden_states, p=self.dropout, training=self.training)
        hidden_states = (residual + hidden_states).view(hidden_states_shape)
        if not self.do_layer_norm_before:
            hidden_states = self.final_layer_norm(hidden_states)
        return hidden_states


class OPTLM(torch.nn.Module):
    """OPTForCausalLM's frames: OPTDecoder.forward (embed_tokens, the int64 cache_position, the fp32 attention mask of
    ones it makes, the additive causal mask, position_ids by cumsum (one row a sequence), embed_positions at offset 2,
    project_in where word_embed_proj_dim is narrower, the sum, the layers, final_layer_norm (do_layer_norm_before),
    project_out) with inputs_embeds, pos_embeds and the masks bound to its end; lm_head tied to embed_tokens."""

    def __init__(self, cfg):
        super().__init__()
        h, w = cfg["hidden"], cfg["embed_width"]
        before = cfg["before"]
        self.embed_tokens = torch.nn.Embedding(cfg["vocab"], w)
        self.embed_positions = torch.nn.Embedding(cfg["max_positions"] + 2, h)
        self.project_in = torch.nn.Linear(w, h, bias=False) if w != h else None
        self.project_out = torch.nn.Linear(h, w, bias=False) if w != h else None
        self.final_layer_norm = torch.nn.LayerNorm(h) if before else None
        self.layers = torch.nn.ModuleList(OPTLayer(h, cfg["heads"], cfg["ffn"], before, cfg["bias"], cfg.get("dropout", 0.0))
                                          for _ in range(cfg["layers"]))

    def decoder(self, input_ids, cache):
        inputs_embeds = self.embed_tokens(input_ids)
        b, s = input_ids.shape
        cache_position = torch.arange(s)
        attention_mask = torch.ones(b, s)
        mask = torch.full((b, 1, s, s), float("-inf"), dtype=inputs_embeds.dtype).triu(1)
        position_ids = torch.cumsum(attention_mask, dim=1)
        position_ids = (position_ids * attention_mask - 1).long()
        position_ids = position_ids[:, 0:]
        pos_embeds = self.embed_positions(position_ids + 2)  # OPTLearnedPositionalEmbedding.forward's offset
        if self.project_in is not None:
            inputs_embeds = self.project_in(inputs_embeds)
        hidden_states = inputs_embeds + pos_embeds
        for layer in self.layers:  # OPTDecoder.forward: decoder_layer(..., position_ids=position_ids, cache_position=cache_position)
            hidden_states = layer(hidden_states, mask, cache, position_ids=position_ids, cache_position=cache_position)
        if self.final_layer_norm is not None:
            hidden_states = self.final_layer_norm(hidden_states)
        if self.project_out is not None:
            hidden_states = self.project_out(hidden_states)
        return hidden_states

    def forward(self, input_ids, cache, output):
        hidden_states = self.decoder(input_ids, cache)
        if output == "hidden-states":
            return hidden_states
        return F.linear(hidden_states, self.embed_tokens.weight).contiguous()  # lm_head tied to embed_tokens


def measure_forward_layer(cfg, dtype=torch.bfloat16):
    """Bytes one layer adds above its input at its peak under torch.no_grad, eager attention."""
    b, s, h, heads = cfg["micro_batch"], cfg["seq_len"], cfg["hidden"], cfg["heads"]
    torch.manual_seed(cfg.get("seed", 0))
    layer = DecoderLayer(h, heads, cfg["kv_heads"], cfg["ffn"], cfg.get("qk_norm", False), cfg.get("gemma", False),
                         cfg.get("sandwich", False), cfg.get("softcap", 0.0)).to(dtype)
    d = h // heads
    x = torch.randn(b, s, h, dtype=dtype)
    mask = torch.full((s, s), float("-inf"), dtype=dtype).triu(1)
    inv = 1.0 / (10000 ** (torch.arange(0, d, 2, dtype=torch.float32) / d))
    emb = torch.cat((torch.outer(torch.arange(s, dtype=torch.float32), inv),) * 2, dim=-1)
    cos, sin = emb.cos().to(dtype)[None, None], emb.sin().to(dtype)[None, None]
    cache = [] if cfg.get("use_cache") else None
    with torch.no_grad():
        live = LiveBytes(list(layer.parameters()) + [x, cos, sin, mask])
        with live:
            out = layer(x, cos, sin, mask, cache)
        del out
    return live.peak


class ScaledEmbedding(torch.nn.Embedding):
    """modular_gemma3.py Gemma3TextScaledWordEmbedding: the lookup times embed_scale (an fp32 buffer cast to the weight's
    dtype), returned by the module; the lookup itself is freed inside it."""

    def __init__(self, vocab, h, scale):
        super().__init__(vocab, h)
        self.register_buffer("embed_scale", torch.tensor(scale), persistent=False)

    def forward(self, input_ids):
        return super().forward(input_ids) * self.embed_scale.to(self.weight.dtype)


class CausalLM(torch.nn.Module):
    """LlamaForCausalLM's frames: LlamaModel.forward (embedding, causal mask, rotary tables, layers, final norm) and
    the output head. olmo2: Olmo2ForCausalLM's (LlamaModel's frames with fp32 rotary tables, Olmo2DecoderLayer, Olmo2RMSNorm). gemma: GemmaModel's frames (modeling_gemma.py): GemmaRMSNorm, the gated GELU, and the embedding
    output scaled by sqrt(hidden) into a new tensor while inputs_embeds stays referenced; Gemma-3 (gemma with local_rope)
    scales inside its embedding module instead (ScaledEmbedding), so inputs_embeds is the scaled tensor."""

    def __init__(self, cfg):
        super().__init__()
        h, heads = cfg["hidden"], cfg["heads"]
        self.d = cfg.get("head_dim") or h // heads  # config.json head_dim (Gemma, Qwen3: heads x d need not be hidden)
        self.gemma, self.h = cfg.get("gemma", False), h
        # Gemma-3 scales inside its embedding module, so a forward hook there (enable_input_require_grads) sees the product
        self.embed_tokens = (ScaledEmbedding(cfg["vocab"], h, h ** 0.5) if self.gemma and cfg.get("local_rope")
                             else torch.nn.Embedding(cfg["vocab"], h))
        self.olmo2 = cfg.get("olmo2", False)
        self.olmo = cfg.get("olmo", False)  # OlmoForCausalLM (modular_olmo.py): OlmoLayerNorm everywhere, fp32 rotary tables
        # GradientCheckpointingLayer.__call__ (transformers 5): under gradient_checkpointing_enable(use_reentrant=False, preserve_rng_state=False)
        # each layer runs in torch.utils.checkpoint over partial(layer, **kwargs)(hidden_states).
        self.checkpointing = cfg.get("checkpointing", False)
        self.granite = cfg.get("granite", False)  # GraniteModel / GraniteForCausalLM (modular_granite.py): the multipliers
        # SmolLM3Config.no_rope_layers: layer i rotates unless (i + 1) % no_rope_layer_interval == 0.
        nope = cfg.get("nope_period", 0)
        # GPTNeoXForCausalLM (modular_gpt_neox.py): GPTNeoXModel runs LlamaModel's frames with embed_in, GPTNeoXLayer and
        # final_layer_norm; embed_out. Its rotary tables are rotary_pct of a head wide.
        self.neox = cfg.get("neox", False)
        self.phi = cfg.get("phi", False)  # PhiForCausalLM: PhiModel (LlamaModel's frames, final_layernorm), lm_head with a bias
        # StableLmForCausalLM: StableLmModel (LlamaModel's frames, a final LayerNorm), lm_head without a bias.
        self.stablelm = cfg.get("stablelm", False)
        if self.stablelm:
            self.layers = torch.nn.ModuleList(StableLmLayer(h, heads, cfg["ffn"], cfg["rotary_dims"], cfg.get("parallel", False),
                                                            cfg.get("qkv_bias", False)) for _ in range(cfg["layers"]))
        elif self.phi:
            self.layers = torch.nn.ModuleList(PhiLayer(h, heads, cfg["kv_heads"], cfg["ffn"], cfg.get("act", "gelu_new"), cfg["rotary_dims"])
                                              for _ in range(cfg["layers"]))
        elif self.neox:
            self.layers = torch.nn.ModuleList(NeoXLayer(h, heads, cfg["ffn"], cfg.get("act", "gelu"), cfg.get("parallel", True))
                                              for _ in range(cfg["layers"]))
        else:
            self.layers = torch.nn.ModuleList(DecoderLayer(h, heads, cfg["kv_heads"], cfg["ffn"], cfg.get("qk_norm", False), self.gemma,
                                                           cfg.get("sandwich", False), cfg.get("softcap", 0.0), self.olmo2,
                                                           not nope or (i + 1) % nope != 0, 0.22 if self.granite else None, self.d,
                                                           self.olmo, cfg.get("fused", False), cfg.get("starcoder2"))
                                              for i in range(cfg["layers"]))
        self.final_softcap = cfg.get("final_softcap", 0.0)
        # Gemma-2 / Gemma-3: layer i has full attention when (i + 1) % pattern == 0, the others slide over `window`
        # tokens; the model holds both masks (causal_mask_mapping) and, for Gemma-3, a second (local) rotary pair.
        self.pattern, self.window, self.local_rope = cfg.get("pattern", 0), cfg.get("window", 0), cfg.get("local_rope", False)
        self.norm = torch.nn.LayerNorm(h) if self.neox or self.phi or self.stablelm or cfg.get("starcoder2") else blocks.OlmoLayerNorm(h) if self.olmo else blocks.Olmo2RMSNorm(h) if self.olmo2 else blocks.GemmaRMSNorm(h) if self.gemma else RMSNorm(h)
        self.lm_head = torch.nn.Linear(h, cfg["vocab"], bias=self.phi)
        # Phi3RotaryEmbedding with partial_rotary_factor (Phi-4-mini): tables of rotary_dims = factor x head_dim.
        r = cfg.get("rotary_dims") or self.d
        self.register_buffer("inv_freq", 1.0 / (10000 ** (torch.arange(0, r, 2, dtype=torch.float32) / r)))

    def rotary(self, x, position_ids):  # LlamaRotaryEmbedding.forward
        inv_freq_expanded = self.inv_freq[None, :, None].float().expand(position_ids.shape[0], -1, 1)
        position_ids_expanded = position_ids[:, None, :].float()
        freqs = (inv_freq_expanded.float() @ position_ids_expanded.float()).transpose(1, 2)
        emb = torch.cat((freqs, freqs), dim=-1)
        cos = emb.cos()
        sin = emb.sin()
        if self.olmo2 or self.olmo:  # OlmoRotaryEmbedding: cos and sin stay fp32
            return cos, sin
        return cos.to(dtype=x.dtype), sin.to(dtype=x.dtype)

    def model(self, input_ids, cache):  # LlamaModel.forward
        inputs_embeds = self.embed_tokens(input_ids)
        gemma3 = isinstance(self.embed_tokens, ScaledEmbedding)
        if self.granite:  # GraniteModel: inputs_embeds = inputs_embeds * self.embedding_multiplier
            inputs_embeds = inputs_embeds * 12.0
        b, s = input_ids.shape
        position_ids = torch.arange(s).unsqueeze(0)  # cache_position.unsqueeze(0): one row for the whole batch
        # create_causal_mask for eager attention: a (b, 1, s, s) additive mask in the model's dtype
        mask = torch.full((b, 1, s, s), float("-inf"), dtype=inputs_embeds.dtype).triu(1)
        masks = [mask]
        if self.pattern:  # create_sliding_window_causal_mask: also -inf further back than the window
            sliding = torch.full((b, 1, s, s), float("-inf"), dtype=inputs_embeds.dtype).triu(1)
            sliding = sliding + torch.full((b, 1, s, s), float("-inf"), dtype=inputs_embeds.dtype).tril(-self.window)
            masks.append(sliding)
        # transformers 5 makes one rotary pair per kind of layer present, after both masks (modular_gemma3.py
        # Gemma3TextModel.forward, modular_olmo3.py Olmo3Model.forward: `for layer_type in set(self.config.layer_types)`)
        # and passes each layer its own kind's
        kinds = [not self.pattern or (i + 1) % self.pattern == 0 for i in range(len(self.layers))]
        cos = sin = None
        if not self.local_rope or any(kinds):
            cos, sin = self.rotary(inputs_embeds, position_ids)
            cos, sin = cos.unsqueeze(1), sin.unsqueeze(1)
        if self.local_rope and not all(kinds):  # Gemma3RotaryEmbedding for the sliding layers
            cos_local, sin_local = self.rotary(inputs_embeds, position_ids)
            cos_local, sin_local = cos_local.unsqueeze(1), sin_local.unsqueeze(1)
        hidden_states = inputs_embeds
        if self.gemma and not gemma3:  # GemmaModel.forward, Gemma2Model.forward: hidden_states * normalizer
            hidden_states = hidden_states * torch.tensor(self.h ** 0.5, dtype=hidden_states.dtype)
        for i, layer in enumerate(self.layers):
            full = kinds[i]
            if self.local_rope and not full:
                kwargs = dict(cos=cos_local, sin=sin_local, mask=masks[-1])
            else:
                kwargs = dict(cos=cos, sin=sin, mask=masks[0] if full else masks[-1])
            if self.checkpointing and torch.is_grad_enabled():
                # non-reentrant, as PyTorch 2 runs it (blocks.checkpoint_early_stop)
                hidden_states = blocks.checkpoint_early_stop(functools.partial(layer, cache=None, position_ids=position_ids, **kwargs),
                                                             hidden_states)
            else:
                hidden_states = layer(hidden_states, cache=cache, **kwargs)
        hidden_states = self.norm(hidden_states)
        return hidden_states

    def forward(self, input_ids, cache, output):  # LlamaForCausalLM.forward
        hidden_states = self.model(input_ids, cache)
        if output == "hidden-states":
            return hidden_states
        logits = self.lm_head(hidden_states)
        if self.granite:  # GraniteForCausalLM: logits = logits / self.config.logits_scaling
            logits = logits / 8.0
        if self.final_softcap:  # Gemma2ForCausalLM's final_logit_softcapping
            logits = logits / self.final_softcap
            logits = torch.tanh(logits)
            logits = logits * self.final_softcap
        return logits


def measure_forward_model(cfg, dtype=torch.bfloat16):
    """Bytes a whole forward adds above the weights and the token ids at its peak (no_grad, eager attention), with
    the caller's log_softmax(logits.float()) for the log-probs output."""
    torch.manual_seed(cfg.get("seed", 0))
    model = (GPT2LM(cfg) if cfg.get("gpt2") else OPTLM(cfg) if cfg.get("opt") else CausalLM(cfg)).to(dtype)
    # from_pretrained(torch_dtype=...) builds the model in that dtype, but LlamaRotaryEmbedding computes inv_freq as
    # float explicitly, so it stays fp32 (.to(dtype) would have cast it).
    if not cfg.get("gpt2") and not cfg.get("opt"):
        model.inv_freq = model.inv_freq.float()
    ids = torch.randint(0, cfg["vocab"], (cfg["micro_batch"], cfg["seq_len"]))
    cache = [] if cfg["use_cache"] else None
    with torch.no_grad():
        live = LiveBytes(list(model.parameters()) + list(model.buffers()) + [ids])
        with live:
            out = model(ids, cache, cfg["output"])
            if cfg["output"] == "log-probs":
                log_probs = torch.log_softmax(out.float(), dim=-1)
                del log_probs
        del out, cache
    return live.peak
