"""Measured CUDA memory of real training steps vs zeromem's prediction (not run in CI: it needs a CUDA GPU).

For each case, a small random-weight model (the oracle's GPT-style or Hugging Face-style Llama blocks, with
embedding, final norm and output layer) trains in bf16 with torch.optim.AdamW (pure bf16: states in bf16):
  resting states = memory allocated after a warm-up step (weights and optimizer states; grads set to None),
                   against zeromem's per_gpu.weights_bytes + per_gpu.optimizer_states_bytes
  activations   = memory allocated after the forward pass and loss, minus before it
  peak          = torch.cuda.max_memory_allocated() over forward, backward and step
and prints them beside `zeromem estimate --json` (and activations.total_bytes).

usage: python3 validate_step.py ZEROMEM_BINARY [--markdown FILE] [--list]
"""
import argparse
import json
import os
import subprocess
import sys

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "..", "tests", "oracle"))

CASES = [
    # name, kind, hidden, layers, heads, kv_heads, ffn, vocab, seq_len, micro_batch
    ("gpt-small", "gpt", 768, 4, 12, 12, 3072, 50257, 1024, 4),
    ("gpt-wide", "gpt", 2048, 2, 16, 16, 8192, 32000, 2048, 2),
    ("llama-gqa", "llama", 2048, 4, 16, 4, 5632, 32000, 2048, 2),
    ("qwen-like", "llama", 1536, 4, 12, 2, 8960, 151936, 1024, 2),
]


def zeromem_prediction(binary, case):
    name, kind, h, layers, heads, kv, ffn, vocab, s, b = case
    args = [binary, "estimate", "--json", "--hidden", str(h), "--layers", str(layers), "--heads", str(heads),
            "--ffn", str(ffn), "--vocab", str(vocab), "--seq-len", str(s), "--micro-batch", str(b),
            "--precision", "bf16", "--optimizer", "adamw", "--device", "cuda", "--torch-version", "2"]
    if kind == "gpt":
        args += ["--mlp", "gelu", "--norm", "layernorm", "--tied-embeddings", "--max-positions", str(s),
                 "--implementation", "eager"]
    else:
        args += ["--kv-heads", str(kv), "--implementation", "hf"]
    return json.loads(subprocess.run(args, check=True, capture_output=True, text=True).stdout)


def measure(case):
    import torch
    import blocks

    name, kind, h, layers, heads, kv, ffn, vocab, s, b = case
    dev, dt = torch.device("cuda"), torch.bfloat16
    torch.manual_seed(0)
    if kind == "gpt":
        body = [blocks.GPTBlock(h, heads, ffn, 0.0) for _ in range(layers)]
        emb, pos, norm = torch.nn.Embedding(vocab, h), torch.nn.Embedding(s, h), torch.nn.LayerNorm(h)
        head = None
    else:
        body = [blocks.LlamaBlock(h, heads, kv, ffn, False) for _ in range(layers)]
        emb, pos, norm = torch.nn.Embedding(vocab, h), None, blocks.LlamaRMSNorm(h)
        head = torch.nn.Linear(h, vocab, bias=False)
    modules = torch.nn.ModuleList([m for m in [emb, pos, norm, head] if m is not None] + body).to(dev, dt)
    mask = torch.full((s, s), float("-inf"), device=dev, dtype=dt).triu(1)
    cos, sin = blocks.rope_tables(b, s, h // heads, dt)
    cos, sin = cos.to(dev), sin.to(dev)
    ids = torch.randint(0, vocab, (b, s), device=dev)

    def step_loss():
        x = emb(ids) + (pos(torch.arange(s, device=dev)) if pos is not None else 0)
        for blk in body:
            x = blk(x, mask) if kind == "gpt" else blk(x, mask, cos, sin)
        y = norm(x)
        logits = y @ emb.weight.t() if head is None else head(y)
        return torch.nn.functional.cross_entropy(logits.float().view(-1, vocab), ids.view(-1))

    opt = torch.optim.AdamW(modules.parameters(), lr=1e-4)
    step_loss().backward()
    opt.step()
    opt.zero_grad(set_to_none=True)
    torch.cuda.synchronize()
    states = torch.cuda.memory_allocated()
    torch.cuda.reset_peak_memory_stats()
    loss = step_loss()
    activations = torch.cuda.memory_allocated() - states
    loss.backward()
    opt.step()
    opt.zero_grad(set_to_none=True)
    torch.cuda.synchronize()
    return states, activations, torch.cuda.max_memory_allocated()


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("binary")
    parser.add_argument("--markdown")
    parser.add_argument("--list", action="store_true", help="print the cases and zeromem's predictions only")
    opts = parser.parse_args()
    rows = []
    for case in CASES:
        j = zeromem_prediction(opts.binary, case)
        # Gradients are set to None between steps, so the resting states are weights and optimizer states.
        predicted_states = j["per_gpu"]["weights_bytes"] + j["per_gpu"]["optimizer_states_bytes"]
        predicted_act = j["activations"]["total_bytes"]
        if opts.list:
            print(f"{case[0]}: zeromem predicts model states {predicted_states} B, activations {predicted_act} B")
            continue
        states, act, peak = measure(case)
        rows.append((case[0], predicted_states, states, predicted_act, act, peak))
        print(rows[-1], flush=True)
    if opts.list:
        return 0
    lines = ["| case | states predicted | states measured | activations predicted | activations measured | error | peak |",
             "|---|---|---|---|---|---|---|"]
    for name, ps, ms, pa, ma, peak in rows:
        lines.append(f"| {name} | {ps:,} B | {ms:,} B | {pa:,} B | {ma:,} B | {100 * (pa - ma) / ma:+.2f}% | {peak:,} B |")
    text = "\n".join(lines)
    print(text)
    if opts.markdown:
        with open(opts.markdown, "w") as f:
            f.write(text + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
