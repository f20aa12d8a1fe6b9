"""The benchmark's training estimate (bench_estimate.cpp, raw_estimate) in plain Python, as a user of the Python
estimators would run it: Llama-2-7B, mixed bf16 AdamW, ZeRO-3 over 8 GPUs, flash attention, fused kernels.
Prints the bytes (which must equal zeromem's) and the time per call.

usage: python3 python_estimate.py [SEQ_LEN]
"""
import math
import sys
import timeit


def estimate(h=4096, layers=32, heads=32, kv=32, ffn=11008, vocab=32000, seq=4096, dp=8):
    d = h // heads
    attention = h * heads * d + 2 * h * kv * d + heads * d * h
    layer = attention + 3 * h * ffn + 2 * h
    params = vocab * h + layers * layer + h + vocab * h
    largest = max(vocab * h, h * ffn)
    states = 2 * math.ceil(2 * params / dp) + math.ceil(4 * params / dp) + math.ceil(8 * params / dp) + 4 * largest
    s = sb = seq
    sbh, a = s * h, 2
    norm = a * sbh + 4 * sb
    per_layer = 2 * norm + a * sbh + a * sb * heads * d + 2 * a * sb * kv * d + 4 * heads * s + a * sb * heads * d + a * sbh + 3 * a * sb * ffn
    activations = per_layer * layers + 8 * sb + 2 * a * sbh + 4 * sb * vocab
    buffers = 500_000_000 * 2 * 2 + 50_000_000 * 2
    context = 322_122_547
    return states + activations + buffers + context


if __name__ == "__main__":
    seq = int(sys.argv[1]) if len(sys.argv) > 1 else 4096
    n = 200_000
    seconds = min(timeit.repeat(lambda: estimate(seq=seq), number=n, repeat=5))
    print(f"python estimate: {estimate(seq=seq)} B; {1e9 * seconds / n:.0f} ns per call ({sys.version.split()[0]})")
