// Google Benchmark: one full training estimate through the typed library against the same formulas written
// by hand with plain doubles, and a plan sweep. Run: build/.../bench/zeromem_bench (Release build).
#include <benchmark/benchmark.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>

#include "zeromem/zeromem.hpp"

namespace {
using namespace zeromem;

// The job: Llama-2-7B, mixed bf16 AdamW, ZeRO-3 over 8 GPUs, s tokens, micro-batch 1, fused kernels, flash
// attention, no recompute, with DeepSpeed buffers and a CUDA context.
training_states job_states() {
  training_states t{};
  t.zero.stage = 3;
  t.dp = 8;
  return t;
}
activation_config job_activations(std::int64_t seq) {
  activation_config a{};
  a.seq_len = seq;
  a.attention = attention_kind::flash;
  a.impl = implementation::fused;
  return a;
}

std::int64_t typed_estimate(const transformer_config& m, std::int64_t seq) {
  return training_gpu_bytes(m, job_states(), job_activations(seq)).count();
}

// The same formulas, hand-written with plain doubles (what a units-free implementation would do). Every
// number the typed version takes as a run-time input is a run-time input here too, so the compiler cannot fold
// the raw version's sizes, degrees and dtype widths into constants the typed version has to compute.
struct raw_inputs {
  double h = 4096, layers = 32, heads = 32, kv = 32, ffn = 11008, vocab = 32000;  // Llama-2-7B
  double seq = 4096, micro_batch = 1, dp = 8;
  double weight_bytes = 2, grad_bytes = 2, master_bytes = 4, moment_bytes = 8, activation_bytes = 2;
  double reduce_bucket = 5e8, prefetch_bucket = 5e7, overlap = 2, context = 322122547;
};

double raw_estimate(const raw_inputs& in) {
  const double h = in.h, heads = in.heads, kv = in.kv, ffn = in.ffn, vocab = in.vocab, dp = in.dp;
  const double d = h / heads;
  const double attention = h * heads * d + 2 * h * kv * d + heads * d * h;
  const double layer = attention + 3 * h * ffn + 2 * h;
  const double params = vocab * h + in.layers * layer + h + vocab * h;
  const double largest = std::max(vocab * h, std::max(h * ffn, ffn * h));
  const double states = std::ceil(in.weight_bytes * params / dp) + std::ceil(in.grad_bytes * params / dp) +
                        std::ceil(in.master_bytes * params / dp) + std::ceil(in.moment_bytes * params / dp) +
                        (in.weight_bytes + in.grad_bytes) * largest;
  const double a = in.activation_bytes, sb = in.seq * in.micro_batch, sbh = sb * h;
  const double norm = a * sbh + 4 * sb;
  const double per_layer = 2 * norm + a * sbh + a * sb * heads * d + 2 * a * sb * kv * d + 4 * heads * sb + a * sb * heads * d +
                           a * sbh + 3 * a * sb * ffn;
  const double activations = per_layer * in.layers + 8 * sb + 2 * a * sbh + 4 * sb * vocab;
  const double buffers = in.reduce_bucket * in.weight_bytes * in.overlap + in.prefetch_bucket * in.weight_bytes;
  return states + activations + buffers + in.context;
}

const transformer_config& llama() {
  static const transformer_config m = find_preset("llama-2-7b").config;
  return m;
}

std::int64_t typed_states(elements n, std::int64_t dp);
std::int64_t raw_states(std::int64_t n, std::int64_t dp);

void check_agreement() {  // the comparisons are only fair if both sides compute the same number
  if (typed_states(elements_of(6'738'415'616LL), 8) != raw_states(6'738'415'616LL, 8)) {
    std::fprintf(stderr, "zeromem_bench: typed and raw model states disagree\n");
    std::exit(1);
  }
  for (std::int64_t seq : {1024, 4096, 8192}) {
    raw_inputs in{};
    in.seq = static_cast<double>(seq);
    const double raw = raw_estimate(in);
    const std::int64_t typed = typed_estimate(llama(), seq);
    if (static_cast<double>(typed) != raw) {
      std::fprintf(stderr, "zeromem_bench: typed %lld B and raw %.0f B disagree at seq %lld\n", static_cast<long long>(typed), raw,
                   static_cast<long long>(seq));
      std::exit(1);
    }
  }
  std::printf("zeromem_bench: typed and raw agree; Llama-2-7B ZeRO-3 dp 8 at 4096 tokens: %lld B per GPU\n",
              static_cast<long long>(typed_estimate(llama(), 4096)));
}

void BM_TrainingEstimate(benchmark::State& state) {
  transformer_config m = llama();
  std::int64_t seq = 4096;
  for (auto _ : state) {
    benchmark::DoNotOptimize(m);
    benchmark::DoNotOptimize(seq);
    benchmark::DoNotOptimize(typed_estimate(m, seq));
  }
}
BENCHMARK(BM_TrainingEstimate);

// Times estimate_step for Llama-2-7B with these states and activations; the model and the sequence length are
// re-read every iteration, so the compiler folds nothing of the job into the loop.
void time_step(benchmark::State& state, const training_states& t, activation_config a) {
  transformer_config m = llama();
  const step_config s{};
  for (auto _ : state) {
    benchmark::DoNotOptimize(m);
    benchmark::DoNotOptimize(a.seq_len);
    benchmark::DoNotOptimize(estimate_step(m, t, a, s).peak);
  }
}

// The full step estimate: every term of the forward, backward (walked layer by layer) and optimizer-step phases
// of the same job, with the loss, AdamW's foreach buffer and DeepSpeed's buckets.
void BM_StepEstimate(benchmark::State& state) { time_step(state, job_states(), job_activations(4096)); }
BENCHMARK(BM_StepEstimate);

// The same model as transformers runs it (the calibrated path): SDPA, full recompute, AdamW foreach on one GPU. The
// backward walks inside a layer (its MLP's product, first linear and norm) and recomputes its breakdown.
void BM_StepEstimateTransformers(benchmark::State& state) {
  activation_config a = job_activations(4096);
  a.impl = implementation::hf;
  a.recomputation = recompute::full;
  time_step(state, training_states{}, a);
}
BENCHMARK(BM_StepEstimateTransformers);

// The same in pure bf16 (torch.optim's states in bf16, one tensor per parameter): the step also replays the caching
// allocator over the parameters for the blocks above them (allocator_blocks), once for the weights, states and
// gradients alike.
void BM_StepEstimateTransformersBf16(benchmark::State& state) {
  activation_config a = job_activations(4096);
  a.impl = implementation::hf;
  a.recomputation = recompute::full;
  training_states t{};
  t.recipe = recipe_of(precision::bf16);
  time_step(state, t, a);
}
BENCHMARK(BM_StepEstimateTransformersBf16);

void BM_TrainingEstimateRaw(benchmark::State& state) {
  raw_inputs in{};
  for (auto _ : state) {
    benchmark::DoNotOptimize(in);
    benchmark::DoNotOptimize(raw_estimate(in));
  }
}
BENCHMARK(BM_TrainingEstimateRaw);

// The input checks training_gpu_bytes runs once per call (model, sizes, degrees, ZeRO combination), alone:
// the part of BM_TrainingEstimate that the raw formula does not do at all.
void BM_Validation(benchmark::State& state) {
  transformer_config m = llama();
  training_states t = job_states();
  t.params = elements_of(6'738'415'616LL);
  activation_config a = job_activations(4096);
  const pipeline_config p{};
  for (auto _ : state) {
    benchmark::DoNotOptimize(m);
    benchmark::DoNotOptimize(t);
    benchmark::DoNotOptimize(a);
    validate(a, m);
    validate(p, m);
    validate(t);
    benchmark::ClobberMemory();
  }
}
BENCHMARK(BM_Validation);

// The units alone: the model-state terms of one rank through the typed API, and the identical checked integer
// arithmetic on plain int64 (same overflow checks, same rounding). Equal times mean the units vanish.
std::int64_t typed_states(elements n, std::int64_t dp) {
  const bytes w = largest_share(n * size_of(dtype::bf16), dp);
  const bytes g = largest_share(n * size_of(dtype::bf16), dp);
  const bytes m = largest_share(n * size_of(dtype::fp32), dp);
  const bytes o = largest_share(n * (size_of(dtype::fp32) * 2), dp);
  return (w + g + m + o).count();
}
std::int64_t raw_states(std::int64_t n, std::int64_t dp) {
  const auto storage = [](std::int64_t count, std::int64_t bits) { return detail::ceil_div(detail::checked_mul(count, bits), 8); };
  const auto share = [&](std::int64_t total) { return detail::ceil_div(total, detail::require_positive(dp, "the number of shards")); };
  const std::int64_t w = share(storage(n, 16)), g = share(storage(n, 16)), m = share(storage(n, 32)), o = share(storage(n, 64));
  return detail::checked_add(detail::checked_add(detail::checked_add(w, g), m), o);
}

void BM_UnitsTyped(benchmark::State& state) {
  elements n = elements_of(6'738'415'616LL);
  std::int64_t dp = 8;
  for (auto _ : state) {
    benchmark::DoNotOptimize(n);
    benchmark::DoNotOptimize(dp);
    benchmark::DoNotOptimize(typed_states(n, dp));
  }
}
BENCHMARK(BM_UnitsTyped);

void BM_UnitsRawInt64(benchmark::State& state) {
  std::int64_t n = 6'738'415'616LL;
  std::int64_t dp = 8;
  for (auto _ : state) {
    benchmark::DoNotOptimize(n);
    benchmark::DoNotOptimize(dp);
    benchmark::DoNotOptimize(raw_states(n, dp));
  }
}
BENCHMARK(BM_UnitsRawInt64);

// Llama-3-70B on 4 nodes of 8 A100-80GB at 4096 tokens: the request both sweeps start from.
plan_request seventy_b_request() {
  plan_request r{};
  r.model = find_preset("llama-3-70b").config;
  r.gpu_capacity = find_gpu("a100-80gb").capacity;
  r.nodes = 4;
  r.seq_len = 4096;
  return r;
}

// Times whole plan sweeps of `r`, counting the configurations each evaluates.
void time_plan(benchmark::State& state, const plan_request& r) {
  std::int64_t evaluated = 0;
  for (auto _ : state) {
    const plan_result p = plan(r);
    evaluated += p.evaluated;
    benchmark::DoNotOptimize(p.configs.data());
  }
  state.counters["configs_per_second"] = benchmark::Counter(static_cast<double>(evaluated), benchmark::Counter::kIsRate);
}

// state.range(0): the global batch (0: none, so no configuration accumulates gradients; 512: most do, and their
// steps take the accumulating path, which walks the layer's modules for its largest one).
void BM_PlanSweep(benchmark::State& state) {
  plan_request r = seventy_b_request();
  r.global_batch = state.range(0);
  time_plan(state, r);
}
BENCHMARK(BM_PlanSweep)->Arg(0)->Arg(512);

// The same sweep on nodes with 512 GB of host RAM and 3.84 TB of NVMe: ZeRO-Infinity's three placements join it.
void BM_PlanSweepNvme(benchmark::State& state) {
  plan_request r = seventy_b_request();
  r.host_memory = bytes_of(512'000'000'000LL);
  r.nvme_capacity = bytes_of(3'840'000'000'000LL);
  time_plan(state, r);
}
BENCHMARK(BM_PlanSweepNvme);
}  // namespace

int main(int argc, char** argv) {
  check_agreement();
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
