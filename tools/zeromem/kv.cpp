// `zeromem kv`: KV cache bytes per token, per paged block and for whole sequences.
#include <cstdio>
#include <memory>
#include <ostream>

#include "common.hpp"

namespace zeromem::cli {
namespace {

struct kv_args {
  model_flags model;
  std::int64_t tokens = 0;
  std::int64_t sequences = 1;
  std::string dtype_name = "bf16";
  std::int64_t tp = 1;
  std::int64_t block_size = 16;
  bool json = false;
};

void add_kv_flags(CLI::App& app, kv_args& a) {
  add_model_flags(app, a.model, true);
  tokens_option(app, "--tokens", a.tokens, "tokens per sequence: 4096, 32K (= 32,768)")->required();
  integer_option(app, "--sequences", a.sequences, "sequences held at once")->capture_default_str();
  text_option(app, "--dtype", a.dtype_name, "KV cache dtype: bf16, fp16, fp8_e4m3, fp8_e5m2, fp32")->capture_default_str();
  integer_option(app, "--tp", a.tp, "tensor-parallel degree")->capture_default_str();
  integer_option(app, "--block-size", a.block_size, "tokens per paged block (vLLM: 16; some RLHF stacks 256)")->capture_default_str();
  app.add_flag("--json", a.json, "print JSON with exact byte counts");
}

// The attention shape from a preset or the flags, checked like a model: heads divisible by KV heads, and by tp.
attention_shape shape_of(const kv_args& a) {
  transformer_config m{};
  if (!a.model.preset.empty() || !a.model.hf_config.empty()) {
    m = model_of(a.model);
  } else {
    if (a.model.hidden == 0 || a.model.layers == 0 || a.model.heads == 0)
      detail::fail("kv needs --model, or --hidden, --layers and --heads (and --kv-heads for GQA)");
    m.hidden = a.model.hidden;
    m.layers = a.model.layers;
    m.heads = a.model.heads;
    m.kv_heads = a.model.kv_heads != 0 ? a.model.kv_heads : a.model.heads;
    m.head_dim = a.model.head_dim;
    m.ffn = m.vocab = 1;  // not part of the KV cache; validate() needs them positive
    validate(m);
  }
  detail::require_heads_split(m.heads, a.tp);
  return attention_shape_of(m);
}

int run_kv(const kv_args& a, std::ostream& out) {
  const attention_shape shape = shape_of(a);
  kv_cache_config c{};
  c.kv_dtype = parse_dtype(a.dtype_name);
  c.tp = a.tp;
  c.block_size = a.block_size;
  const bytes per_token = kv_bytes_per_token(shape, c);
  const bytes per_block = kv_bytes_per_block(shape, c);
  const std::int64_t blocks = detail::checked_mul(kv_blocks_for(a.tokens, c), a.sequences);
  const bytes total = kv_cache_bytes(shape, c, a.sequences, a.tokens);
  if (a.json) {
    json j;
    j["inputs"] = {{"layers", shape.layers}, {"kv_heads", shape.kv_heads}, {"head_dim", shape.head_dim},
                   {"kv_heads_per_gpu", kv_heads_per_rank(shape, c.tp)}, {"tp", c.tp}, {"dtype", std::string(name(c.kv_dtype))},
                   {"block_size", c.block_size}, {"tokens", a.tokens}, {"sequences", a.sequences}};
    j["kv_cache"] = {{"bytes_per_token", per_token.count()}, {"bytes_per_block", per_block.count()},
                     {"blocks", blocks}, {"total_bytes", total.count()}};
    out << j.dump(2) << "\n";
    return 0;
  }
  out << "zeromem kv: " << shape.layers << " layers x " << kv_heads_per_rank(shape, c.tp) << " KV heads per GPU (tp " << c.tp
      << ") x head dim " << shape.head_dim << ", " << name(c.kv_dtype) << "\n";
  out << table_head("per GPU") << bytes_row("per token", per_token) << "\n" << bytes_row("per block", per_block) << "\n";
  out << bytes_row(format_count(a.sequences) + " x " + format_count(a.tokens) + " tokens", total) << "\n";
  out << "  (" << format_count(blocks) << " blocks of " << c.block_size << " tokens; the last block of each sequence is allocated whole)\n";
  return 0;
}

}  // namespace

command add_kv_command(CLI::App& parent) {
  return make_command<kv_args>(parent, "kv", "KV cache bytes per token, per block and for whole sequences",
                                     "zeromem kv --model llama-2-7b --tokens 32K --dtype fp16", add_kv_flags, run_kv);
}

}  // namespace zeromem::cli
