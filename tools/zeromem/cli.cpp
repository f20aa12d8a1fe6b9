// zeromem command-line program: thin parsing and printing over the headers. Every number comes from them.
#include "cli.hpp"
#include "hf_config.hpp"

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include <cstdio>
#include <fstream>
#include <iomanip>
#include <ostream>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "zeromem/zeromem.hpp"

namespace zeromem::cli {
namespace {

using json = nlohmann::ordered_json;

// One line of text: CLI11 and exceptions may carry newlines.
std::string one_line(std::string s) {
  for (char& c : s)
    if (c == '\n' || c == '\r') c = ' ';
  while (!s.empty() && s.back() == ' ') s.pop_back();
  return s;
}

std::string bytes_row(const std::string& label, bytes b) {
  char buf[160];
  std::snprintf(buf, sizeof buf, "  %-22s %24s %14s %14s", label.c_str(), format_exact(b).c_str(),
                format_bytes(b, size_unit::GB, 3).c_str(), format_bytes(b, size_unit::GiB, 3).c_str());
  return buf;
}

// ---- estimate -------------------------------------------------------------------------------------

struct estimate_args {
  // model states
  std::string params;
  std::string precision_name = "mixed-bf16";
  std::string optimizer_name = "adamw";
  int zero_stage = -1;
  std::string fsdp;
  std::int64_t dp = 1;
  std::int64_t gpus_per_node = 8;
  std::int64_t shard_group = 0;
  std::int64_t hpz = 1;
  std::string offload_optimizer = "none";
  std::string offload_params = "none";
  bool pin_memory = false;
  bool fp32_grad_copy = false;
  std::string main_grads;
  std::string largest_layer;
  std::int64_t grad_accum_steps = 1;
  // model
  std::string model;
  std::string hf_config;
  std::int64_t hidden = 0, layers = 0, heads = 0, kv_heads = 0, head_dim = 0, ffn = 0, vocab = 0, max_positions = 0;
  std::string mlp = "swiglu";
  std::string norm = "rmsnorm";
  bool tied = false;
  bool qkv_bias = false;
  // activations
  std::int64_t seq_len = 0;
  std::int64_t micro_batch = 1;
  std::int64_t tp = 1, cp = 1, pp = 1, virtual_stages = 1, microbatches = 0;
  bool sp = false;
  std::string recompute_name = "none";
  std::string attention_name = "eager";
  double dropout = 0.0;
  std::string implementation_name = "eager";
  std::string device_name = "cuda";
  std::string activation_dtype;  // default: the precision's compute dtype
  int torch_major = 2;
  // the step model
  std::string loss = "hf";
  std::string optimizer_impl = "foreach";
  std::string allocator = "default";
  std::string cuda_context;
  double reserve_fraction = 0.0;
  std::string gpu;
  bool explain = false;
  std::string svg;
  bool json = false;
};

void add_estimate(CLI::App& app, estimate_args& a) {
  app.add_option("--params", a.params, "parameter count: 7.5e9, 7.5B, 350M, 1T (or give a model)");
  app.add_option("--precision", a.precision_name, "mixed-bf16 | mixed-fp16 | bf16 | fp16 | fp32 | amp-bf16 | amp-fp16")->capture_default_str();
  app.add_option("--optimizer", a.optimizer_name, "adam | adamw | sgd | sgd-momentum | adam-8bit | adafactor | lion")
      ->capture_default_str();
  auto* stage = app.add_option("--zero-stage", a.zero_stage, "DeepSpeed ZeRO stage 0-3 (default 0)");
  auto* fsdp = app.add_option("--fsdp", a.fsdp, "FSDP strategy: NO_SHARD | SHARD_GRAD_OP | FULL_SHARD | HYBRID_SHARD | _HYBRID_SHARD_ZERO2");
  stage->excludes(fsdp);
  app.add_option("--dp", a.dp, "data-parallel degree")->capture_default_str();
  app.add_option("--gpus-per-node", a.gpus_per_node, "GPUs (ranks) per node")->capture_default_str();
  app.add_option("--shard-group", a.shard_group, "ranks sharing one copy of sharded states (default: dp)");
  app.add_option("--hpz", a.hpz, "ZeRO++ hpZ secondary partition size (1 = off)")->capture_default_str();
  app.add_option("--offload-optimizer", a.offload_optimizer, "none | cpu | nvme")->capture_default_str();
  app.add_option("--offload-params", a.offload_params, "none | cpu | nvme (ZeRO stage 3 only)")->capture_default_str();
  app.add_flag("--pin-memory", a.pin_memory, "offloaded states in pinned host memory");
  app.add_flag("--fp32-grad-copy", a.fp32_grad_copy, "optimizer keeps an fp32 copy of 16-bit gradients (DeepSpeed, Megatron fp16)");
  app.add_option("--main-grads", a.main_grads, "gradient accumulation dtype, e.g. fp32 (Megatron main grads)");
  app.add_option("--largest-layer-params", a.largest_layer,
                 "parameters of the largest layer (ZeRO-3 gathers it whole; ZeRO-1/2 CPU offload stages gradients by it)");
  app.add_option("--grad-accum-steps", a.grad_accum_steps,
                 "micro-batches per optimizer step (ZeRO-1/2 CPU offload keeps a 16-bit host accumulation buffer when > 1)")
      ->capture_default_str();

  auto* model = app.add_option("--model", a.model, "preset: qwen2.5-1.5b, qwen2.5-7b, llama-3-70b, qwen2.5-vl-7b, llama-2-7b, gpt3-175b");
  auto* hf = app.add_option("--hf-config", a.hf_config, "a Hugging Face config.json (llama, mistral, qwen2, qwen2_vl, qwen2_5_vl, gpt2)");
  auto* hidden = app.add_option("--hidden", a.hidden, "hidden size (with --layers --heads --ffn --vocab)");
  model->excludes(hf)->excludes(hidden);
  hf->excludes(hidden);
  app.add_option("--layers", a.layers, "decoder layers");
  app.add_option("--heads", a.heads, "attention heads");
  app.add_option("--kv-heads", a.kv_heads, "key/value heads (default: heads)");
  app.add_option("--head-dim", a.head_dim, "head dimension (default: hidden / heads)");
  app.add_option("--ffn", a.ffn, "MLP intermediate size");
  app.add_option("--vocab", a.vocab, "vocabulary size");
  app.add_option("--mlp", a.mlp, "gelu | swiglu")->capture_default_str();
  app.add_option("--norm", a.norm, "layernorm | rmsnorm")->capture_default_str();
  app.add_option("--max-positions", a.max_positions, "learned position embeddings of this many positions");
  app.add_flag("--tied-embeddings", a.tied, "output layer shares the embedding matrix");
  app.add_flag("--qkv-bias", a.qkv_bias, "q, k, v projections with bias");

  app.add_option("--seq-len", a.seq_len, "tokens per sequence (turns on activation memory)");
  app.add_option("--micro-batch", a.micro_batch, "sequences per micro-batch")->capture_default_str();
  app.add_option("--tp", a.tp, "tensor-parallel degree")->capture_default_str();
  app.add_flag("--sp", a.sp, "sequence parallelism (with --tp)");
  app.add_option("--cp", a.cp, "context-parallel degree")->capture_default_str();
  app.add_option("--pp", a.pp, "pipeline-parallel degree")->capture_default_str();
  app.add_option("--virtual-stages", a.virtual_stages, "interleaved pipeline model chunks per rank")->capture_default_str();
  app.add_option("--microbatches", a.microbatches, "micro-batches per step (default: at least pp)");
  app.add_option("--recompute", a.recompute_name, "none | selective | full")->capture_default_str();
  app.add_option("--attention", a.attention_name, "eager | flash")->capture_default_str();
  app.add_option("--dropout", a.dropout, "dropout probability (0: none)")->capture_default_str();
  app.add_option("--implementation", a.implementation_name, "paper | eager | fused | hf-eager (see docs/activations.md)")
      ->capture_default_str();
  app.add_option("--device", a.device_name, "cuda | cpu (dropout-mask and norm-statistics dtypes)")->capture_default_str();
  app.add_option("--activation-dtype", a.activation_dtype, "dtype of activations (default: the precision's compute dtype)");
  app.add_option("--torch-version", a.torch_major, "PyTorch major version, 1 or 2")->capture_default_str();
  app.add_option("--loss", a.loss, "hf (transformers ForCausalLMLoss: full logits, fp32 upcast) | fused (chunked linear-cross-entropy)")
      ->capture_default_str();
  app.add_option("--optimizer-impl", a.optimizer_impl, "foreach (PyTorch's default on CUDA) | fused | forloop")->capture_default_str();
  app.add_option("--allocator", a.allocator, "default | expandable (PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True)")
      ->capture_default_str();
  app.add_option("--cuda-context", a.cuda_context, "driver memory outside PyTorch's allocator (default: 650,969,088 B, H100 + torch 2.11)");
  app.add_option("--reserve-fraction", a.reserve_fraction,
                 "reserved above allocated at the peak, measured on your job (max_memory_reserved / max_memory_allocated - 1)")
      ->capture_default_str();
  app.add_option("--gpu", a.gpu, "a100-40gb | a100-80gb | a800-80gb | h100-80gb | h200 | l40s: verdict against its capacity");
  app.add_flag("--explain", a.explain, "the dominant terms, and the smallest change that makes it fit (with --gpu)");
  app.add_option("--svg", a.svg, "write a stacked-bar chart of the per-GPU terms to this file");
  app.add_flag("--json", a.json, "print JSON with exact byte counts");
}

struct estimate_inputs {
  training_states states{};
  bool has_model = false;
  transformer_config model{};
  parameter_counts counts{};
  bool has_activations = false;
  activation_config act{};
  pipeline_config pipe{};
  step_config step{};
};

bool hand_model_given(const estimate_args& a) {
  return a.hidden != 0 || a.layers != 0 || a.heads != 0 || a.kv_heads != 0 || a.head_dim != 0 || a.ffn != 0 || a.vocab != 0;
}

transformer_config model_from_flags(const estimate_args& a) {
  if (a.hidden == 0 || a.layers == 0 || a.heads == 0 || a.ffn == 0 || a.vocab == 0)
    detail::fail("a model given by flags needs --hidden, --layers, --heads, --ffn and --vocab");
  transformer_config m{};
  m.hidden = a.hidden;
  m.layers = a.layers;
  m.heads = a.heads;
  m.kv_heads = a.kv_heads != 0 ? a.kv_heads : a.heads;
  m.head_dim = a.head_dim;
  m.ffn = a.ffn;
  m.vocab = a.vocab;
  if (a.mlp == "gelu") m.mlp = mlp_kind::gelu;
  else if (a.mlp == "swiglu") m.mlp = mlp_kind::swiglu;
  else detail::fail("unknown --mlp '" + a.mlp + "'; expected gelu or swiglu");
  if (a.norm == "layernorm") m.norm = norm_kind::layernorm;
  else if (a.norm == "rmsnorm") m.norm = norm_kind::rmsnorm;
  else detail::fail("unknown --norm '" + a.norm + "'; expected layernorm or rmsnorm");
  if (a.max_positions != 0) {
    m.positions = position_kind::learned;
    m.max_positions = a.max_positions;
  }
  m.tied_embeddings = a.tied;
  // A GELU/LayerNorm model is GPT-style: biases on every linear (Korthikanti's block, GPT-2).
  m.qkv_bias = a.qkv_bias || m.mlp == mlp_kind::gelu;
  m.attention_out_bias = m.mlp_bias = m.mlp == mlp_kind::gelu;
  return m;
}

estimate_inputs to_inputs(const estimate_args& a) {
  estimate_inputs in{};
  training_states& t = in.states;
  const bool any_model = !a.model.empty() || !a.hf_config.empty() || hand_model_given(a);
  if (any_model && !a.params.empty()) detail::fail("give either --params or a model (--model, --hf-config, --hidden ...), not both");
  if (!any_model && a.params.empty()) detail::fail("give --params (such as 7.5B) or a model (--model, --hf-config, --hidden ...)");
  if (!a.model.empty()) in.model = find_preset(a.model).config;
  else if (!a.hf_config.empty()) in.model = read_hf_config(a.hf_config);
  else if (any_model) in.model = model_from_flags(a);
  in.has_model = any_model;

  if (in.has_model) {
    in.counts = count_parameters(in.model);
    // Model states are those of the most loaded tensor/pipeline-parallel rank.
    t.params = parameters_per_rank(in.model, a.tp, a.pp).most_loaded;
  } else {
    if (a.tp != 1 || a.pp != 1) detail::fail("--tp and --pp split a model's layers; give the model (--model, --hf-config or --hidden ...)");
    t.params = elements_of(parse_count(a.params, "the parameter count (--params)"));
  }
  t.recipe = recipe_of(parse_precision(a.precision_name));
  t.recipe.fp32_gradient_copy = a.fp32_grad_copy;
  if (!a.main_grads.empty()) t.recipe.gradients = parse_dtype(a.main_grads);
  t.optimizer.kind = parse_optimizer(a.optimizer_name);
  if (in.has_model && t.optimizer.kind == optimizer_kind::adafactor) {
    // The model's own tensor shapes, split like the parameters over tensor and pipeline ranks.
    const elements factored = adafactor_second_moment_elements(in.model);
    t.optimizer.adafactor_factored = elements_of(detail::ceil_div(
        detail::checked_mul(factored.count(), t.params.count()), in.counts.total.count()));
  }
  t.dp = a.dp;
  t.gpus_per_node = a.gpus_per_node;
  if (!a.fsdp.empty()) {
    t.zero = fsdp_config(parse_fsdp_strategy(a.fsdp), a.shard_group > 0 ? a.shard_group : a.gpus_per_node);
    if (a.fsdp != "HYBRID_SHARD" && a.fsdp != "_HYBRID_SHARD_ZERO2") t.zero.shard_group = a.shard_group;
  } else {
    t.zero.stage = a.zero_stage < 0 ? 0 : a.zero_stage;
    t.zero.shard_group = a.shard_group;
  }
  t.zero.hpz_partition = a.hpz;
  t.zero.optimizer = {parse_offload_device(a.offload_optimizer), a.pin_memory};
  t.zero.params = {parse_offload_device(a.offload_params), a.pin_memory};
  if (!a.largest_layer.empty())
    t.largest_layer = elements_of(parse_count(a.largest_layer, "the largest layer (--largest-layer-params)"));
  else if (in.has_model && needs_largest_layer(t.zero))
    t.largest_layer = largest_share(in.counts.largest_layer, a.tp);
  t.gradient_accumulation_steps = a.grad_accum_steps;
  validate(t);

  const bool activation_flags = a.seq_len != 0 || a.sp || a.cp != 1 || a.recompute_name != "none" || a.dropout != 0.0 ||
                                a.attention_name != "eager";
  if (activation_flags && !in.has_model)
    detail::fail("activation memory needs a model: pass --model, --hf-config or --hidden ... with --seq-len");
  if (activation_flags && a.seq_len == 0) detail::fail("activation memory needs --seq-len");
  if (a.seq_len != 0) {
    in.has_activations = true;
    activation_config& c = in.act;
    c.seq_len = a.seq_len;
    c.micro_batch = a.micro_batch;
    const precision prec = parse_precision(a.precision_name);
    c.activation_dtype = a.activation_dtype.empty() ? compute_dtype_of(prec) : parse_dtype(a.activation_dtype);
    c.autocast = t.recipe.autocast;
    c.tp = a.tp;
    c.sequence_parallel = a.sp;
    c.cp = a.cp;
    c.recomputation = parse_recompute(a.recompute_name);
    c.attention = parse_attention(a.attention_name);
    c.dropout = a.dropout;
    c.impl = parse_implementation(a.implementation_name);
    if (a.device_name == "cuda") c.device = device_kind::cuda;
    else if (a.device_name == "cpu") c.device = device_kind::cpu;
    else detail::fail("unknown --device '" + a.device_name + "'; expected cuda or cpu");
    c.torch_major = a.torch_major;
    in.pipe = {a.pp, a.virtual_stages, a.microbatches};
    validate(c, in.model);
    step_config& st = in.step;
    st.loss = parse_loss(a.loss);
    st.optimizer = parse_optimizer_impl(a.optimizer_impl);
    st.allocator = parse_allocator(a.allocator);
    if (!a.cuda_context.empty()) st.cuda_context = bytes_of(parse_size(a.cuda_context, "the CUDA context (--cuda-context)"));
    st.reserve_fraction = a.reserve_fraction;
    if (!a.fsdp.empty()) {
      // FSDP2 fully_shard: FULL_SHARD and HYBRID_SHARD reshard after forward; SHARD_GRAD_OP keeps layers unsharded.
      const fsdp_strategy f = parse_fsdp_strategy(a.fsdp);
      if (f != fsdp_strategy::no_shard) st.fsdp_world = shard_group_of(t);
      st.reshard_after_forward = f == fsdp_strategy::full_shard || f == fsdp_strategy::hybrid_shard;
    }
    validate(st);
  }
  return in;
}


void write_file(const std::string& path, const std::string& text) {
  std::ofstream f(path, std::ios::binary);
  if (!f || !(f << text)) detail::fail("cannot write '" + path + "'");
}

// The per-GPU terms of an estimate as a breakdown (model states, activations), for --explain and --svg.
job_breakdown estimate_breakdown(const model_state_estimate& e, const stage_activations* act, bytes capacity) {
  job_breakdown job{};
  job.gpu_capacity = capacity;
  e.per_rank.for_each([&](const char* term, const placement& p) {
    if (p.gpu.count() != 0) job.add("model", term, p.gpu);
  });
  if (act != nullptr) {
    job.add("model", "activations", act->layers + act->input_ids + act->embedding_dropout + act->output_layer);
    if (act->logits.count() != 0) job.add("model", "fp32 logits", act->logits);
  }
  return job;
}

svg_bar bar_of(const std::string& label, const job_breakdown& job) {
  svg_bar b{label, {}};
  for (const memory_term& t : job.terms)
    if (t.gpu.count() != 0) b.segments.push_back({t.role + ": " + t.term, t.gpu});
  return b;
}

void print_dominant(std::ostream& out, const job_breakdown& job) {
  const bytes total = job.gpu_total();
  for (const named_bytes& d : dominant_terms(job))
    out << "    " << d.name << ": " << format_bytes(d.value, size_unit::GiB) << " ("
        << static_cast<int>(100.0 * (total.count() > 0 ? d.value / total : 0.0) + 0.5) << "% of the GPU total)\n";
}

step_estimate step_of(const estimate_inputs& in) { return estimate_step(in.model, in.states, in.act, in.step, in.pipe); }

json step_terms_json(const step_terms& t) {
  json terms = json::object();
  t.for_each([&](const char* name, bytes b) { terms[std::string(name) + "_bytes"] = b.count(); });
  return {{"peak_bytes", t.total().count()}, {"largest_term", std::string(t.largest())}, {"terms", terms}};
}

void add_step_json(json& j, const step_estimate& e) {
  j["per_gpu"]["peak_bytes"] = e.peak.count();
  j["per_gpu"]["peak_phase"] = std::string(name(e.peak_phase));
  j["per_gpu"]["peak_term"] = std::string(e.phase(e.peak_phase).largest());
  j["per_gpu"]["reserved_bytes"] = e.reserved.count();
  j["per_gpu"]["cuda_context_bytes"] = e.cuda_context.count();
  j["per_gpu"]["device_used_bytes"] = e.device_used().count();
  j["phases"] = {{"forward", step_terms_json(e.forward)},
                 {"backward", step_terms_json(e.backward)},
                 {"optimizer_step", step_terms_json(e.optimizer_step)}};
}

// The step's peak first: what the GPU reaches, in which phase, set by which term, and the verdict.
void print_peak(std::ostream& out, const estimate_inputs& in, const step_estimate& e, const std::string& gpu) {
  const auto both = [](bytes b) { return format_bytes(b, size_unit::GiB) + " (" + format_bytes(b, size_unit::GB) + ")"; };
  out << "  peak per GPU " << both(e.peak) << " in " << name(e.peak_phase) << ", set by "
      << e.phase(e.peak_phase).largest() << "\n";
  out << "  device used  " << both(e.device_used()) << " = reserved " << format_bytes(e.reserved, size_unit::GiB) << " + CUDA context "
      << format_bytes(e.cuda_context, size_unit::GiB) << (in.step.reserve_fraction > 0.0 ? "" : " (fragmentation not included: --reserve-fraction)")
      << "\n";
  out << "  step         loss " << name(in.step.loss) << ", optimizer " << name(in.step.optimizer) << ", allocator " << name(in.step.allocator)
      << (in.step.fsdp_world > 0 ? ", FSDP2 over " + std::to_string(in.step.fsdp_world) + " ranks" +
                                       (in.step.reshard_after_forward ? "" : " (no reshard after forward)")
                                 : std::string())
      << "\n";
  if (!gpu.empty()) {
    const gpu_model& g = find_gpu(gpu);
    const step_verdict v = verdict_of(e, g.capacity);
    out << "  verdict      " << (v.fits() ? "fits " : "DOES NOT FIT ") << g.name << ": " << format_bytes(v.needed, size_unit::GiB) << " of "
        << format_bytes(v.capacity, size_unit::GiB) << ", margin " << format_bytes(v.margin(), size_unit::GiB) << "\n";
  }
}

void print_phases(std::ostream& out, const step_estimate& e) {
  char head[160];
  std::snprintf(head, sizeof head, "  %-22s %24s %14s %14s\n", "term", "exact", "GB (1e9 B)", "GiB (2^30 B)");
  for (step_phase ph : {step_phase::forward, step_phase::backward, step_phase::optimizer_step}) {
    const step_terms& t = e.phase(ph);
    out << "\nPhase " << name(ph) << " at its high-water mark" << (ph == e.peak_phase ? " (the peak)" : "") << "\n" << head;
    t.for_each([&](const char* term, bytes b) {
      if (b.count() != 0) out << bytes_row(term, b) << "\n";
    });
    out << bytes_row("total", t.total()) << "\n";
  }
}

// The smallest change that makes the step fit, tried from the least disruptive: each evaluates the same inputs
// with one field changed.
void explain_step(std::ostream& out, const estimate_inputs& in, const step_estimate& e, const std::string& gpu) {
  out << "\nExplain\n  the peak (" << name(e.peak_phase) << ") by term:\n";
  const step_terms& t = e.phase(e.peak_phase);
  t.for_each([&](const char* term, bytes b) {
    if (b.count() != 0)
      out << "    " << term << ": " << format_bytes(b, size_unit::GiB) << " ("
          << static_cast<int>(100.0 * (b / e.peak) + 0.5) << "% of the peak)\n";
  });
  if (gpu.empty()) {
    out << "  give --gpu for a verdict and the smallest change that makes it fit\n";
    return;
  }
  const gpu_model& g = find_gpu(gpu);
  const step_verdict v = verdict_of(e, g.capacity);
  out << "  verdict: " << format_bytes(v.needed, size_unit::GiB) << " of " << format_bytes(v.capacity, size_unit::GiB) << " on " << g.name
      << (v.fits() ? " -> fits" : " -> OUT OF MEMORY") << "\n";
  if (v.fits()) return;
  struct change {
    std::string what;
    estimate_inputs in;
  };
  std::vector<change> changes;
  const auto with = [&](std::string what, auto&& edit) {
    estimate_inputs c = in;
    edit(c);
    changes.push_back({std::move(what), std::move(c)});
  };
  if (in.step.optimizer == optimizer_impl::foreach_kernels) with("--optimizer-impl fused", [](estimate_inputs& c) { c.step.optimizer = optimizer_impl::fused; });
  if (in.step.loss == loss_impl::hf) with("--loss fused", [](estimate_inputs& c) { c.step.loss = loss_impl::fused; });
  if (in.act.recomputation == recompute::none) with("--recompute selective", [](estimate_inputs& c) { c.act.recomputation = recompute::selective; });
  if (in.act.recomputation != recompute::full) with("--recompute full", [](estimate_inputs& c) { c.act.recomputation = recompute::full; });
  if (in.act.micro_batch > 1)
    with("--micro-batch " + std::to_string(in.act.micro_batch / 2), [](estimate_inputs& c) { c.act.micro_batch /= 2; });
  if (in.step.fsdp_world > 0 || in.states.zero.stage == 3)
    with("--dp " + std::to_string(in.states.dp * 2) + " (twice the GPUs)", [](estimate_inputs& c) {
      c.states.dp *= 2;
      if (c.step.fsdp_world > 0) c.step.fsdp_world *= 2;
      if (c.states.zero.shard_group > 0) c.states.zero.shard_group *= 2;
    });
  for (const change& c : changes) {
    try {
      const step_estimate changed = step_of(c.in);
      const step_verdict cv = verdict_of(changed, g.capacity);
      if (!cv.fits()) continue;
      out << "  smallest change that fits: " << c.what << " -> " << format_bytes(cv.needed, size_unit::GiB) << " (margin "
          << format_bytes(cv.margin(), size_unit::GiB) << ")\n";
      return;
    } catch (const std::invalid_argument&) {
      continue;  // the change is not valid for this job (e.g. dp no longer divides)
    }
  }
  out << "  no single change fits; try `zeromem plan` for combinations\n";
}

void explain_estimate(std::ostream& out, const estimate_inputs& in, const job_breakdown& job, const std::string& gpu) {
  out << "\nExplain\n  dominant terms per GPU:\n";
  print_dominant(out, job);
  if (gpu.empty()) {
    out << "  give --gpu for a verdict and the smallest change that makes it fit\n";
    return;
  }
  const gpu_model& g = find_gpu(gpu);
  if (!in.has_activations) {
    out << "  verdict: model states " << format_bytes(job.gpu_total(), size_unit::GiB) << " of " << format_bytes(g.capacity, size_unit::GiB)
        << (job.gpu_total() <= g.capacity ? " -> fits" : " -> OUT OF MEMORY") << " (give a model and --seq-len to include activations)\n";
    return;
  }
  plan_request r{};
  r.model = in.model;
  r.gpu_capacity = g.capacity;
  r.gpus_per_node = in.states.gpus_per_node;
  r.seq_len = in.act.seq_len;
  r.recipe = in.states.recipe;
  r.optimizer = in.states.optimizer;
  r.impl = in.act.impl;
  r.attention = in.act.attention;
  plan_config c{};
  c.stage = in.states.zero.stage;
  c.optimizer_offload = in.states.zero.optimizer.device;
  c.params_offload = in.states.zero.params.device;
  c.dp = in.states.dp;
  c.tp = in.act.tp;
  c.pp = in.pipe.pp;
  c.micro_batch = in.act.micro_batch;
  c.recomputation = in.act.recomputation;
  c = evaluate(r, c);
  out << "  with DeepSpeed buffers and a CUDA context: " << format_bytes(c.gpu, size_unit::GiB) << " of "
      << format_bytes(g.capacity, size_unit::GiB) << " on " << g.name << (c.headroom.count() >= 0 ? " -> fits" : " -> OUT OF MEMORY") << "\n";
  if (c.headroom.count() >= 0) return;
  for (const suggestion& sg : single_changes(r, c)) {
    if (!sg.fits) continue;
    out << "  smallest change that fits: " << sg.change << " -> " << format_bytes(sg.gpu, size_unit::GiB) << "\n";
    return;
  }
  out << "  no single change fits; try `zeromem plan` for combinations\n";
}

json placement_json(const placement& p) {
  return {{"gpu_bytes", p.gpu.count()}, {"host_bytes", p.host.count()}, {"host_pinned_bytes", p.host_pinned.count()},
          {"nvme_bytes", p.nvme.count()}};
}

json estimate_json(const estimate_inputs& in, const model_state_estimate& e, const stage_activations* act) {
  const training_states& t = in.states;
  const model_state_terms& m = e.per_rank;
  json j;
  j["inputs"] = {{"params_per_rank", t.params.count()},
                 {"weights_dtype", std::string(name(t.recipe.weights))},
                 {"gradients_dtype", std::string(name(t.recipe.gradients))},
                 {"fp32_master", t.recipe.fp32_master},
                 {"fp32_gradient_copy", t.recipe.fp32_gradient_copy},
                 {"optimizer", std::string(name(t.optimizer.kind))},
                 {"zero_stage", t.zero.stage},
                 {"dp", t.dp},
                 {"shard_group", e.shard_group},
                 {"gpus_per_node", t.gpus_per_node},
                 {"ranks_per_node", e.ranks_per_node},
                 {"offload_optimizer", std::string(name(t.zero.optimizer.device))},
                 {"offload_params", std::string(name(t.zero.params.device))},
                 {"hpz_partition", t.zero.hpz_partition},
                 {"largest_layer_params", t.largest_layer.count()},
                 {"gradient_accumulation_steps", t.gradient_accumulation_steps}};
  if (in.has_model) {
    j["model"] = {{"params", in.counts.total.count()},
                  {"language_model_params", in.counts.language_model.count()},
                  {"vision_params", in.counts.vision.count()},
                  {"params_per_layer", in.counts.layer.count()},
                  {"embedding_params", in.counts.embedding.count()},
                  {"lm_head_params", in.counts.lm_head.count()},
                  {"largest_layer_params", in.counts.largest_layer.count()}};
  }
  const bytes act_bytes = act != nullptr ? act->total : bytes{};
  j["per_gpu"] = {{"weights_bytes", (m.weights.gpu + m.hpz_secondary.gpu).count()},
                  {"gradients_bytes", (m.gradients.gpu + m.fp32_gradients.gpu).count()},
                  {"optimizer_states_bytes", (m.master_weights.gpu + m.optimizer_moments.gpu).count()},
                  {"gathered_layer_bytes", m.gathered_layer.gpu.count()},
                  {"offload_staging_bytes", m.offload_staging.gpu.count()},
                  {"model_states_bytes", e.gpu().count()},
                  {"activations_bytes", act_bytes.count()},
                  {"total_bytes", (e.gpu() + act_bytes).count()}};
  if (act != nullptr) {
    json terms = json::object();
    act->per_layer.for_each([&](const char* term, bytes b) { terms[term] = b.count(); });
    j["activations"] = {{"per_layer_bytes", act->per_layer.total().count()},
                        {"per_layer_terms", terms},
                        {"layers_on_stage", act->layers_on_stage},
                        {"microbatches_in_flight", act->microbatches_in_flight},
                        {"layers_bytes", act->layers.count()},
                        {"input_ids_bytes", act->input_ids.count()},
                        {"embedding_dropout_bytes", act->embedding_dropout.count()},
                        {"output_layer_bytes", act->output_layer.count()},
                        {"logits_bytes", act->logits.count()},
                        {"total_bytes", act->total.count()}};
  }
  j["per_rank_host"] = {{"total_bytes", e.host_per_rank().count()},
                        {"pinned_bytes", e.total_per_rank().host_pinned.count()}};
  j["per_node_host"] = {{"ranks", e.ranks_per_node},
                        {"total_bytes", e.host_per_node().count()},
                        {"pinned_bytes", e.host_pinned_per_node().count()}};
  j["per_node_nvme"] = {{"total_bytes", e.nvme_per_node().count()}};
  json terms = json::object();
  m.for_each([&](const char* term, const placement& p) { terms[term] = placement_json(p); });
  j["terms_per_rank"] = terms;
  return j;
}

void print_estimate(std::ostream& out, const estimate_inputs& in, const model_state_estimate& e,
                    const stage_activations* act, const step_estimate* step, const std::string& gpu) {
  const training_states& t = in.states;
  const model_state_terms& m = e.per_rank;
  out << "zeromem estimate\n";
  if (step != nullptr) print_peak(out, in, *step, gpu);
  if (in.has_model) {
    out << "  model        " << format_count(in.counts.total.count()) << " parameters";
    if (in.counts.vision.count() > 0) out << " (vision tower " << format_count(in.counts.vision.count()) << ")";
    out << "; largest layer " << format_count(in.counts.largest_layer.count()) << "\n";
  }
  out << "  per rank     " << format_count(t.params.count()) << " parameters\n";
  out << "  recipe       weights " << name(t.recipe.weights) << ", gradients " << name(t.recipe.gradients)
      << (t.recipe.fp32_master ? ", fp32 master weights" : ", no master copy")
      << (t.recipe.fp32_gradient_copy ? ", fp32 gradient copy" : "") << "; optimizer " << name(t.optimizer.kind)
      << " (states in " << name(t.recipe.optimizer_dtype()) << ")\n";
  out << "  sharding     ZeRO stage " << t.zero.stage << " over " << e.shard_group << " ranks (dp " << t.dp << "), "
      << e.ranks_per_node << " ranks per node\n";
  out << "  offload      optimizer " << name(t.zero.optimizer.device) << ", parameters " << name(t.zero.params.device)
      << (t.zero.optimizer.pin_memory ? " (pinned)" : "")
      << (t.gradient_accumulation_steps > 1 ? "; " + std::to_string(t.gradient_accumulation_steps) + " micro-batches per step" : "")
      << "\n";
  if (act != nullptr) {
    const activation_config& c = in.act;
    out << "  activations  seq " << c.seq_len << " x micro-batch " << c.micro_batch << ", " << name(c.activation_dtype)
        << ", tp " << c.tp << (c.sequence_parallel ? " + sp" : "") << ", cp " << c.cp << ", pp " << in.pipe.pp
        << ", recompute " << name(c.recomputation) << ", attention " << name(c.attention) << ", dropout " << c.dropout
        << ", profile " << name(c.impl) << "\n";
  }
  if (t.optimizer.kind == optimizer_kind::adafactor)
    out << (in.has_model ? "  note         Adafactor's factored state from the model's tensor shapes, split in proportion to the parameters\n"
                         : "  note         Adafactor without tensor shapes: its factored state is a lower bound\n");
  if (t.zero.stage == 3 && t.largest_layer.count() == 0)
    out << "  note         ZeRO-3 gathers each layer whole; pass --largest-layer-params or a model to count it\n";
  if (t.zero.stage != 3 && needs_largest_layer(t.zero) && t.largest_layer.count() == 0)
    out << "  note         CPU offload stages gradients in buffers of the largest layer; pass --largest-layer-params or a "
           "model to count them\n";

  char head[160];
  std::snprintf(head, sizeof head, "  %-22s %24s %14s %14s\n", "term", "exact", "GB (1e9 B)", "GiB (2^30 B)");
  out << "\nPer GPU (most loaded rank)\n" << head;
  m.for_each([&](const char* term, const placement& p) {
    if (p.gpu.count() != 0) out << bytes_row(term, p.gpu) << "\n";
  });
  if (act != nullptr) {
    out << bytes_row("activations", act->total) << "\n";
  }
  out << bytes_row("total", e.gpu() + (act != nullptr ? act->total : bytes{})) << "\n";
  if (act != nullptr) {
    out << "\nActivations of the first pipeline stage (" << act->layers_on_stage << " layers x " << act->microbatches_in_flight
        << " micro-batches in flight)\n" << head;
    act->per_layer.for_each([&](const char* term, bytes b) {
      if (b.count() != 0) out << bytes_row(std::string("1 layer: ") + term, b) << "\n";
    });
    out << bytes_row("1 layer: total", act->per_layer.total()) << "\n";
    out << bytes_row("all layers in flight", act->layers) << "\n";
    if (act->input_ids.count() != 0) out << bytes_row("input token ids", act->input_ids) << "\n";
    if (act->embedding_dropout.count() != 0) out << bytes_row("embedding dropout", act->embedding_dropout) << "\n";
    if (act->output_layer.count() != 0) out << bytes_row("output layer inputs", act->output_layer) << "\n";
    if (act->logits.count() != 0) out << bytes_row("fp32 logits", act->logits) << "\n";
    out << bytes_row("total", act->total) << "\n";
  }

  out << "\nPer node host RAM (" << e.ranks_per_node << " ranks x per-rank bytes)\n" << head;
  m.for_each([&](const char* term, const placement& p) {
    if (p.host.count() != 0) out << bytes_row(term, p.host * e.ranks_per_node) << "\n";
  });
  out << bytes_row("total", e.host_per_node()) << "\n";
  out << bytes_row("of which pinned", e.host_pinned_per_node()) << "\n";

  out << "\nPer node NVMe\n" << head;
  m.for_each([&](const char* term, const placement& p) {
    if (p.nvme.count() != 0) out << bytes_row(term, p.nvme * e.ranks_per_node) << "\n";
  });
  out << bytes_row("total", e.nvme_per_node()) << "\n";
  if (step != nullptr) print_phases(out, *step);
  out << (act != nullptr ? "\nThe per-GPU table sums model states and saved activations; the phases above add what a real step "
                           "holds at each high-water mark.\n"
                         : "\nModel states only (give a model and --seq-len for the step's peak); buffers and framework "
                           "overheads are not included.\n");
}

// ---- kv -------------------------------------------------------------------------------------------

struct kv_args {
  std::string model;
  std::int64_t hidden = 0, layers = 0, heads = 0, kv_heads = 0, head_dim = 0;
  std::string tokens;
  std::int64_t sequences = 1;
  std::string dtype_name = "bf16";
  std::int64_t tp = 1;
  std::int64_t block_size = 16;
  bool json = false;
};

void add_kv(CLI::App& app, kv_args& a) {
  auto* model = app.add_option("--model", a.model, "preset (see zeromem estimate --help)");
  auto* hidden = app.add_option("--hidden", a.hidden, "hidden size (with --layers --heads [--kv-heads])");
  model->excludes(hidden);
  app.add_option("--layers", a.layers, "decoder layers");
  app.add_option("--heads", a.heads, "attention heads");
  app.add_option("--kv-heads", a.kv_heads, "key/value heads (default: heads)");
  app.add_option("--head-dim", a.head_dim, "head dimension (default: hidden / heads)");
  app.add_option("--tokens", a.tokens, "tokens per sequence: 4096, 32K")->required();
  app.add_option("--sequences", a.sequences, "sequences held at once")->capture_default_str();
  app.add_option("--dtype", a.dtype_name, "KV cache dtype: bf16, fp16, fp8_e4m3, fp8_e5m2, fp32")->capture_default_str();
  app.add_option("--tp", a.tp, "tensor-parallel degree")->capture_default_str();
  app.add_option("--block-size", a.block_size, "tokens per paged block (vLLM: 16; some RLHF stacks 256)")->capture_default_str();
  app.add_flag("--json", a.json, "print JSON with exact byte counts");
}

int run_kv(const kv_args& a, std::ostream& out) {
  attention_shape shape{};
  if (!a.model.empty()) {
    shape = attention_shape_of(find_preset(a.model).config);
  } else {
    if (a.hidden == 0 || a.layers == 0 || a.heads == 0)
      detail::fail("kv needs --model, or --hidden, --layers and --heads (and --kv-heads for GQA)");
    if (a.hidden < 0 || a.heads < 0) detail::fail("--hidden and --heads must be positive");
    if (a.head_dim == 0 && a.hidden % a.heads != 0) detail::fail("--hidden must be a multiple of --heads, or give --head-dim");
    shape = {a.layers, a.kv_heads != 0 ? a.kv_heads : a.heads, a.head_dim != 0 ? a.head_dim : a.hidden / a.heads};
    if (shape.kv_heads > a.heads) detail::fail("--kv-heads cannot exceed --heads");
  }
  kv_cache_config c{};
  c.kv_dtype = parse_dtype(a.dtype_name);
  c.tp = a.tp;
  c.block_size = a.block_size;
  const std::int64_t tokens = parse_count(a.tokens, "the token count (--tokens)");
  const bytes per_token = kv_bytes_per_token(shape, c);
  const bytes per_block = kv_bytes_per_block(shape, c);
  if (a.sequences < 0) detail::fail("--sequences cannot be negative; pass the number of sequences held at once");
  const std::int64_t blocks = detail::checked_mul(kv_blocks_for(tokens, c), a.sequences);
  const bytes total = kv_cache_bytes(shape, c, a.sequences, tokens);
  if (a.json) {
    json j;
    j["inputs"] = {{"layers", shape.layers}, {"kv_heads", shape.kv_heads}, {"head_dim", shape.head_dim},
                   {"kv_heads_per_gpu", kv_heads_per_rank(shape, c.tp)}, {"tp", c.tp}, {"dtype", std::string(name(c.kv_dtype))},
                   {"block_size", c.block_size}, {"tokens", tokens}, {"sequences", a.sequences}};
    j["kv_cache"] = {{"bytes_per_token", per_token.count()}, {"bytes_per_block", per_block.count()},
                     {"blocks", blocks}, {"total_bytes", total.count()}};
    out << j.dump(2) << "\n";
    return 0;
  }
  out << "zeromem kv: " << shape.layers << " layers x " << kv_heads_per_rank(shape, c.tp) << " KV heads per GPU (tp "
      << c.tp << ") x head dim " << shape.head_dim << ", " << name(c.kv_dtype) << "\n";
  char head[160];
  std::snprintf(head, sizeof head, "  %-22s %24s %14s %14s\n", "per GPU", "exact", "GB (1e9 B)", "GiB (2^30 B)");
  out << head << bytes_row("per token", per_token) << "\n" << bytes_row("per block", per_block) << "\n";
  out << bytes_row(std::to_string(a.sequences) + " x " + std::to_string(tokens) + " tokens", total) << "\n";
  out << "  (" << blocks << " blocks of " << c.block_size << " tokens; the last block of each sequence is allocated whole)\n";
  return 0;
}

// ---- scenario -------------------------------------------------------------------------------------

json breakdown_json(const job_breakdown& job) {
  json terms = json::array();
  for (const memory_term& t : job.terms)
    terms.push_back({{"role", t.role}, {"term", t.term}, {"gpu_bytes", t.gpu.count()}, {"host_bytes", t.host.count()}});
  return {{"per_gpu", {{"total_bytes", job.gpu_total().count()}, {"capacity_bytes", job.gpu_capacity.count()},
                       {"headroom_bytes", job.gpu_headroom().count()}, {"fits", job.gpu_fits()}}},
          {"per_node_host",
           {{"total_bytes", job.host_total().count()}, {"capacity_bytes", job.host_capacity.count()},
            {"limit_bytes", job.host_capacity.count() != 0 ? job.host_limit().count() : 0},
            {"unexplained_bytes", job.unexplained_host.count()}, {"fits", job.host_fits()}}},
          {"terms", terms}};
}

void explain_scenario(std::ostream& out, const scenario& s) {
  out << "\nExplain\n";
  const scenario_case* fixed = nullptr;
  for (const scenario_case& c : s.cases)
    if (c.job.fits()) fixed = &c;
  for (const scenario_case& c : s.cases) {
    if (c.job.fits()) continue;
    out << "  " << c.label << ": dominant terms\n";
    print_dominant(out, c.job);
    if (fixed == nullptr || c.job.terms.size() == 0) continue;
    // What the fix changed, term by term (matched by role and name).
    out << "  what \"" << fixed->label << "\" changes:\n";
    for (const memory_term& t : c.job.terms) {
      bytes after{};
      for (const memory_term& f : fixed->job.terms)
        if (f.role == t.role && f.term == t.term) after = f.gpu;
      const bytes delta = after - t.gpu;
      if (delta.count() != 0 && (delta.count() > (1LL << 28) || delta.count() < -(1LL << 28)))
        out << "    " << t.role << " " << t.term << ": " << format_bytes(t.gpu, size_unit::GiB) << " -> "
            << format_bytes(after, size_unit::GiB) << "\n";
    }
  }
}

int run_scenario(const std::string& which, bool as_json, bool explain, const std::string& svg, std::ostream& out) {
  const scenario s = find_scenario(which);
  if (!svg.empty()) {
    std::vector<svg_bar> bars;
    for (const scenario_case& c : s.cases) bars.push_back(bar_of(c.label, c.job));
    write_file(svg, svg_stacked_bars("zeromem scenario " + s.name + ": per-GPU memory", bars, s.cases.front().job.gpu_capacity));
  }
  if (!as_json) {
    out << render_scenario(s);
    if (explain) explain_scenario(out, s);
    return 0;
  }
  json j{{"scenario", s.name}, {"title", s.title}, {"configuration", s.configuration}, {"findings", s.findings}};
  j["cases"] = json::array();
  for (const scenario_case& c : s.cases) {
    json item = breakdown_json(c.job);
    item["label"] = c.label;
    item["fits"] = c.job.fits();
    item["reported"] = c.reported;
    if (c.reported) item["reported_fits"] = c.reported_fits;
    j["cases"].push_back(item);
  }
  out << j.dump(2) << "\n";
  return 0;
}

// ---- plan -----------------------------------------------------------------------------------------

struct plan_args {
  std::string model;
  std::string hf_config;
  std::string gpu;
  std::int64_t gpus = 8;
  std::int64_t nodes = 1;
  std::string host_memory;
  std::int64_t seq_len = 0;
  std::int64_t global_batch = 0;
  std::string precision_name = "mixed-bf16";
  std::string optimizer_name = "adamw";
  std::string implementation_name = "fused";
  std::string attention_name = "flash";
  std::string min_headroom = "0GiB";
  std::int64_t max_micro_batch = 16;
  std::size_t top = 10;
  std::string svg;
  bool json = false;
};

void add_plan(CLI::App& app, plan_args& a) {
  auto* model = app.add_option("--model", a.model, "preset (see zeromem estimate --help)");
  auto* hf = app.add_option("--hf-config", a.hf_config, "a Hugging Face config.json");
  model->excludes(hf);
  app.add_option("--gpu", a.gpu, "a100-40gb | a100-80gb | a800-80gb | h100-80gb | h200 | l40s")->required();
  app.add_option("--gpus", a.gpus, "GPUs per node")->capture_default_str();
  app.add_option("--nodes", a.nodes, "nodes")->capture_default_str();
  app.add_option("--host-memory", a.host_memory, "host RAM per node, e.g. 1TB or 760GB (offload must fit in it)");
  app.add_option("--seq-len", a.seq_len, "tokens per sequence")->required();
  app.add_option("--global-batch", a.global_batch, "sequences per step (dp x micro-batch must divide it)");
  app.add_option("--precision", a.precision_name, "mixed-bf16 | mixed-fp16 | bf16 | fp16 | fp32 | amp-bf16 | amp-fp16")->capture_default_str();
  app.add_option("--optimizer", a.optimizer_name, "adamw, adam, sgd, ...")->capture_default_str();
  app.add_option("--implementation", a.implementation_name, "paper | eager | fused | hf-eager")->capture_default_str();
  app.add_option("--attention", a.attention_name, "eager | flash")->capture_default_str();
  app.add_option("--min-headroom", a.min_headroom, "keep at least this much free per GPU, e.g. 4GiB")->capture_default_str();
  app.add_option("--max-micro-batch", a.max_micro_batch, "largest micro-batch tried (powers of 2)")->capture_default_str();
  app.add_option("--top", a.top, "configurations to print")->capture_default_str();
  app.add_option("--svg", a.svg, "write memory against micro-batch for the best configuration to this file");
  app.add_flag("--json", a.json, "print JSON with a configs array");
}

json plan_config_json(const plan_config& c) {
  return {{"zero_stage", c.stage},
          {"offload_optimizer", std::string(name(c.optimizer_offload))},
          {"offload_params", std::string(name(c.params_offload))},
          {"dp", c.dp},
          {"tp", c.tp},
          {"pp", c.pp},
          {"sequence_parallel", c.tp > 1},
          {"micro_batch", c.micro_batch},
          {"recompute", std::string(name(c.recomputation))},
          {"per_gpu_bytes", c.gpu.count()},
          {"headroom_bytes", c.headroom.count()},
          {"offloaded_host_bytes_per_node", c.offloaded_per_node.count()}};
}

int run_plan(const plan_args& a, std::ostream& out) {
  if (a.model.empty() == a.hf_config.empty()) detail::fail("plan needs a model: --model PRESET or --hf-config FILE");
  plan_request r{};
  r.model = !a.model.empty() ? find_preset(a.model).config : read_hf_config(a.hf_config);
  const gpu_model& g = find_gpu(a.gpu);
  r.gpu_capacity = g.capacity;
  r.gpus_per_node = a.gpus;
  r.nodes = a.nodes;
  if (!a.host_memory.empty()) r.host_memory = bytes_of(parse_size(a.host_memory, "the host memory (--host-memory)"));
  r.seq_len = a.seq_len;
  r.global_batch = a.global_batch;
  r.recipe = recipe_of(parse_precision(a.precision_name));
  r.optimizer.kind = parse_optimizer(a.optimizer_name);
  r.impl = parse_implementation(a.implementation_name);
  r.attention = parse_attention(a.attention_name);
  r.min_headroom = bytes_of(parse_size(a.min_headroom, "the minimum headroom (--min-headroom)"));
  r.max_micro_batch = a.max_micro_batch;
  r.max_results = a.top;
  const plan_result p = plan(r);
  if (!a.svg.empty() && !p.configs.empty()) {
    std::vector<svg_point> points;
    for (std::int64_t mb = 1; mb <= r.max_micro_batch; mb *= 2) {
      plan_config c = p.configs.front();
      c.micro_batch = mb;
      points.push_back({std::to_string(mb), evaluate(r, c).gpu});
    }
    const plan_config& best = p.configs.front();
    write_file(a.svg, svg_line("zeromem plan: per-GPU memory of the best configuration (ZeRO " + std::to_string(best.stage) + ", dp " +
                                   std::to_string(best.dp) + ", tp " + std::to_string(best.tp) + ", pp " + std::to_string(best.pp) +
                                   ", recompute " + std::string(name(best.recomputation)) + ")",
                               "micro-batch", points, g.capacity));
  }
  if (a.json) {
    json j{{"gpu", std::string(g.name)}, {"capacity_bytes", g.capacity.count()}, {"gpus", r.gpus_per_node * r.nodes},
           {"objective", p.objective}, {"evaluated", p.evaluated}, {"fitting", p.fitting}};
    j["configs"] = json::array();
    for (const plan_config& c : p.configs) j["configs"].push_back(plan_config_json(c));
    out << j.dump(2) << "\n";
    return 0;
  }
  out << "zeromem plan: " << format_count(count_parameters(r.model).total.count()) << " parameters on " << r.nodes << " x "
      << r.gpus_per_node << " " << g.name << " (" << format_bytes(g.capacity, size_unit::GiB) << " each), " << r.seq_len
      << " tokens per sequence\n";
  out << "  evaluated " << p.evaluated << " configurations; " << p.fitting << " fit\n";
  out << "  ranked by: " << p.objective << "\n";
  out << "  per GPU: the step's peak (forward, backward or optimizer step; activations " << name(r.impl) << ", " << name(r.attention)
      << " attention; loss " << name(r.step.loss) << ", optimizer " << name(r.step.optimizer)
      << ") + DeepSpeed buffers + the CUDA context\n\n";
  char line[256];
  std::snprintf(line, sizeof line, "  %4s %-5s %-14s %4s %4s %4s %6s %-9s %12s %12s %14s\n", "rank", "ZeRO", "offload", "dp", "tp", "pp",
                "micro", "recompute", "per GPU", "headroom", "host per node");
  out << line;
  int rank = 1;
  for (const plan_config& c : p.configs) {
    const std::string offload = c.params_offload != offload_device::none ? "params+optim" : c.optimizer_offload != offload_device::none ? "optimizer" : "none";
    std::snprintf(line, sizeof line, "  %4d %-5d %-14s %4lld %4lld %4lld %6lld %-9s %12s %12s %14s\n", rank++, c.stage, offload.c_str(),
                  static_cast<long long>(c.dp), static_cast<long long>(c.tp), static_cast<long long>(c.pp),
                  static_cast<long long>(c.micro_batch), std::string(name(c.recomputation)).c_str(),
                  format_bytes(c.gpu, size_unit::GiB).c_str(), format_bytes(c.headroom, size_unit::GiB).c_str(),
                  format_bytes(c.offloaded_per_node, size_unit::GB).c_str());
    out << line;
  }
  if (p.configs.empty()) out << "  nothing fits: add GPUs, shorten sequences, or allow more host memory\n";
  return 0;
}

// ---- deepspeed ------------------------------------------------------------------------------------

struct deepspeed_args {
  std::string params;
  std::string largest_layer;
  std::int64_t gpus_per_node = 1;
  std::int64_t nodes = 1;
  double factor = 1.5;
  bool pre_2024 = false;
  bool json = false;
};

void add_deepspeed(CLI::App& app, deepspeed_args& a) {
  app.add_option("--params", a.params, "total parameters: 2783959040, 2.8B")->required();
  app.add_option("--largest-layer-params", a.largest_layer, "parameters of the largest layer (zero3)");
  app.add_option("--gpus-per-node", a.gpus_per_node, "GPUs per node")->capture_default_str();
  app.add_option("--nodes", a.nodes, "nodes")->capture_default_str();
  app.add_option("--additional-buffer-factor", a.factor, "DeepSpeed's CPU buffer factor")->capture_default_str();
  app.add_flag("--pre-2024", a.pre_2024, "zero2: the GPU formula before DeepSpeed PR #5099 (4P + 16P/N)");
  app.add_flag("--json", a.json, "print JSON with the exact bytes of each row");
}

std::string ds_options(bool zero3, const deepspeed::estimator_row& r) {
  if (!zero3) return std::string("cpu_offload=") + (r.offload_optimizer ? "1" : "0");
  // DeepSpeed pads the device name to four characters: f'{OFFLOAD_CPU_DEVICE:4}' == "cpu ".
  return std::string("offload_param=") + (r.offload_param ? "cpu " : "none") +
         ", offload_optimizer=" + (r.offload_optimizer ? "cpu " : "none") + ", zero_init=" + (r.zero_init ? "1" : "0");
}

int run_deepspeed(const std::string& which, const deepspeed_args& a, std::ostream& out) {
  const bool zero3 = which == "zero3";
  if (!zero3 && which != "zero2") detail::fail("unknown estimator '" + which + "'; expected zero2 or zero3");
  const std::int64_t P = parse_count(a.params, "the parameter count (--params)");
  const deepspeed::cluster c{a.gpus_per_node, a.nodes, a.factor};
  std::vector<deepspeed::estimator_row> rows;
  std::int64_t L = 0;
  if (zero3) {
    if (a.largest_layer.empty()) detail::fail("zero3 needs --largest-layer-params (DeepSpeed's largest_layer_params)");
    L = parse_count(a.largest_layer, "the largest layer (--largest-layer-params)");
    for (const auto& r : deepspeed::zero3_table(P, L, c)) rows.push_back(r);
  } else {
    if (!a.largest_layer.empty()) detail::fail("zero2 takes no --largest-layer-params; drop it or use zero3");
    for (const auto& r : deepspeed::zero2_table(P, c, a.pre_2024 ? deepspeed::zero2_formula::pre_2024
                                                                  : deepspeed::zero2_formula::current))
      rows.push_back(r);
  }
  if (a.json) {
    json j;
    j["estimator"] = zero3 ? "estimate_zero3_model_states_mem_needs" : "estimate_zero2_model_states_mem_needs";
    j["params"] = P;
    if (zero3) j["largest_layer_params"] = L;
    j["gpus_per_node"] = a.gpus_per_node;
    j["nodes"] = a.nodes;
    j["additional_buffer_factor"] = a.factor;
    if (!zero3) j["formula"] = a.pre_2024 ? "pre-2024" : "current";
    j["rows"] = json::array();
    for (const auto& r : rows) {
      json row{{"offload_optimizer", r.offload_optimizer ? "cpu" : "none"}};
      if (zero3) {
        row["offload_param"] = r.offload_param ? "cpu" : "none";
        row["zero_init"] = r.zero_init;
      }
      row["cpu_bytes_per_node"] = r.cpu.count();
      row["gpu_bytes_per_gpu"] = r.gpu.count();
      j["rows"].push_back(row);
    }
    out << j.dump(2) << "\n";
    return 0;
  }
  // DeepSpeed's own text (estimate_zero{2,3}_model_states_mem_needs_all_cold), line for line.
  out << "Estimated memory needed for params, optim states and gradients for a:\n";
  out << "HW: Setup with " << a.nodes << (a.nodes > 1 ? " nodes, " : " node, ") << a.gpus_per_node
      << (a.gpus_per_node > 1 ? " GPUs" : " GPU") << " per node.\n";
  out << "SW: Model with " << P / 1'000'000 << "M total params";
  if (zero3) out << ", " << L / 1'000'000 << "M largest layer params";
  out << ".\n";
  out << "  per CPU  |  per GPU |   Options\n";
  for (const auto& r : rows) {
    char buf[200];
    std::snprintf(buf, sizeof buf, " %7.2fGB | %6.2fGB | %s", to_gib(r.cpu), to_gib(r.gpu), ds_options(zero3, r).c_str());
    out << buf << "\n";
  }
  out << "(DeepSpeed's \"GB\" is GiB = 2^30 B; exact bytes with --json)\n";
  return 0;
}

}  // namespace

int run(const std::vector<std::string>& args, std::ostream& out, std::ostream& err) {
  CLI::App app{"zeromem: bytes per GPU, host and NVMe of LLM jobs, before launch", "zeromem"};
  app.require_subcommand(1);
  app.set_version_flag("--version", std::string(version_string));

  estimate_args est;
  CLI::App* estimate = app.add_subcommand("estimate", "model-state memory per GPU, per node's host RAM and NVMe");
  add_estimate(*estimate, est);

  kv_args kv;
  CLI::App* kvapp = app.add_subcommand("kv", "KV cache bytes per token, per block and for whole sequences");
  add_kv(*kvapp, kv);

  std::string scenario_name;
  bool scenario_json = false;
  CLI::App* scapp = app.add_subcommand("scenario", "a reported out-of-memory case, rebuilt and explained");
  scapp->add_option("name", scenario_name, "orz-1.5b-ppo | logic-rl-7b-grpo | openrlhf-70b-ppo | openrlhf-zero2-vs-zero3 | easyr1-vl-7b-grpo")
      ->required();
  scapp->add_flag("--json", scenario_json, "print JSON: a cases array with label, fits, per_gpu and per_node_host");
  bool scenario_explain = false;
  std::string scenario_svg;
  scapp->add_flag("--explain", scenario_explain, "the dominant terms of each failing case and what the fix changes");
  scapp->add_option("--svg", scenario_svg, "write a stacked bar per case to this file");

  plan_args pl;
  CLI::App* planapp = app.add_subcommand("plan", "search parallelism, ZeRO stage, offload, micro-batch and recompute for configurations that fit");
  add_plan(*planapp, pl);

  deepspeed_args ds;
  std::string which;
  CLI::App* dsapp = app.add_subcommand("deepspeed", "DeepSpeed's own estimate_zero{2,3}_model_states_mem_needs table");
  dsapp->add_option("estimator", which, "zero2 | zero3")->required();
  add_deepspeed(*dsapp, ds);

  try {
    std::vector<std::string> reversed(args.rbegin(), args.rend());  // CLI11 takes arguments in reverse order
    app.parse(reversed);
  } catch (const CLI::CallForHelp&) {
    out << (app.got_subcommand(estimate) ? estimate->help()
            : app.got_subcommand(dsapp)  ? dsapp->help()
            : app.got_subcommand(kvapp)  ? kvapp->help()
            : app.got_subcommand(scapp)  ? scapp->help()
            : app.got_subcommand(planapp) ? planapp->help()
                                         : app.help());
    return 0;
  } catch (const CLI::CallForAllHelp&) {
    out << app.help("", CLI::AppFormatMode::All);
    return 0;
  } catch (const CLI::CallForVersion&) {
    out << version_string << "\n";
    return 0;
  } catch (const CLI::ParseError& e) {
    err << "zeromem: " << one_line(e.what()) << " (see zeromem --help)\n";
    return 2;
  }

  try {
    if (app.got_subcommand(estimate)) {
      const estimate_inputs in = to_inputs(est);
      const model_state_estimate e = estimate_model_states(in.states);
      stage_activations act{};
      if (in.has_activations) act = first_stage_activations(in.model, in.act, in.pipe);
      const stage_activations* a = in.has_activations ? &act : nullptr;
      step_estimate step_value{};
      if (in.has_activations) step_value = step_of(in);
      const step_estimate* step = in.has_activations ? &step_value : nullptr;
      const bytes capacity = est.gpu.empty() ? bytes{} : find_gpu(est.gpu).capacity;
      const job_breakdown job = estimate_breakdown(e, a, capacity);
      if (!est.svg.empty())
        write_file(est.svg, svg_stacked_bars("zeromem estimate: per-GPU memory", {bar_of("most loaded GPU", job)}, capacity));
      if (est.json) {
        json j = estimate_json(in, e, a);
        if (step != nullptr) add_step_json(j, *step);
        if (!est.gpu.empty()) {
          if (step != nullptr) {
            const step_verdict v = verdict_of(*step, capacity);
            j["verdict"] = {{"gpu", est.gpu}, {"capacity_bytes", capacity.count()}, {"needed_bytes", v.needed.count()},
                            {"margin_bytes", v.margin().count()}, {"fits", v.fits()}, {"compares", "device_used_bytes"}};
          } else {
            j["verdict"] = {{"gpu", est.gpu}, {"capacity_bytes", capacity.count()}, {"needed_bytes", job.gpu_total().count()},
                            {"margin_bytes", job.gpu_headroom().count()}, {"fits", job.gpu_fits()}, {"compares", "model_states_bytes"}};
          }
        }
        out << j.dump(2) << "\n";
      } else {
        print_estimate(out, in, e, a, step, est.gpu);
        if (est.explain) {
          if (step != nullptr) explain_step(out, in, *step, est.gpu);
          else explain_estimate(out, in, job, est.gpu);
        }
      }
      return 0;
    }
    if (app.got_subcommand(kvapp)) return run_kv(kv, out);
    if (app.got_subcommand(planapp)) return run_plan(pl, out);
    if (app.got_subcommand(scapp)) return run_scenario(scenario_name, scenario_json, scenario_explain, scenario_svg, out);
    return run_deepspeed(which, ds, out);
  } catch (const std::exception& e) {  // invalid_argument and overflow_error carry "zeromem: ..." already
    err << one_line(e.what()) << "\n";
    return 2;
  }
}

}  // namespace zeromem::cli
