// Training recipe: which dtype holds the working weights, the gradients, the master weights and the
// optimizer states, and how many bytes the optimizer keeps per parameter.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "zeromem/core/dtype.hpp"
#include "zeromem/core/error.hpp"
#include "zeromem/core/units.hpp"

namespace zeromem {

/// mixed_*: 16-bit weights and gradients, fp32 master weights in the optimizer (Micikevicius et al. 2018,
/// "Mixed Precision Training", §3.1). bf16 / fp16: pure 16-bit, no master copy. fp32: everything fp32.
/// amp_*: torch.autocast (torch/amp/autocast_mode.py): fp32 weights, gradients and optimizer states, 16-bit
/// compute; autocast casts each op's inputs, keeping a cache of the 16-bit weights for the forward pass.
enum class precision { mixed_bf16, mixed_fp16, bf16, fp16, fp32, amp_bf16, amp_fp16 };

struct precision_recipe {
  dtype weights = dtype::bf16;    // working copy used by forward and backward
  dtype gradients = dtype::bf16;  // gradients as accumulated (fp32 when main grads are fp32)
  bool fp32_master = true;        // optimizer updates an fp32 master copy
  // The optimizer keeps an fp32 copy of 16-bit gradients: Megatron-LM with fp16 main grads
  // (docs/source/api-guide/dist_optimizer.md: 20 = 2 + 2 + 16 bytes) and DeepSpeed's ZeRO estimator
  // ("18 = 2_grads_16bit + 4_grads_32bit + 4_params_32bit + 8_optimizer_states_32bit", stage_1_and_2.py).
  bool fp32_gradient_copy = false;
  /// Weights stay in their dtype and torch.autocast runs the forward in 16 bits (amp_bf16, amp_fp16).
  bool autocast = false;
  /// The dtype the forward computes in: autocast's dtype under AMP, else the weights'.
  dtype compute = dtype::bf16;

  /// dtype in which the optimizer keeps its states: fp32 beside a master copy, else the weights' dtype
  /// (torch.optim keeps exp_avg / momentum_buffer in the parameter's dtype).
  constexpr dtype optimizer_dtype() const { return fp32_master ? dtype::fp32 : weights; }
};

constexpr precision_recipe recipe_of(precision p) {
  switch (p) {
    case precision::mixed_bf16: return {dtype::bf16, dtype::bf16, true, false, false, dtype::bf16};
    case precision::mixed_fp16: return {dtype::fp16, dtype::fp16, true, false, false, dtype::fp16};
    case precision::bf16: return {dtype::bf16, dtype::bf16, false, false, false, dtype::bf16};
    case precision::fp16: return {dtype::fp16, dtype::fp16, false, false, false, dtype::fp16};
    case precision::fp32: return {dtype::fp32, dtype::fp32, false, false, false, dtype::fp32};
    case precision::amp_bf16: return {dtype::fp32, dtype::fp32, false, false, true, dtype::bf16};
    case precision::amp_fp16: return {dtype::fp32, dtype::fp32, false, false, true, dtype::fp16};
  }
  detail::fail("unknown precision");
}

/// The dtype activations are computed in: the autocast dtype under AMP, else the weights' dtype.
constexpr dtype compute_dtype_of(precision p) { return recipe_of(p).compute; }

constexpr std::string_view name(precision p) {
  switch (p) {
    case precision::mixed_bf16: return "mixed-bf16";
    case precision::mixed_fp16: return "mixed-fp16";
    case precision::bf16: return "bf16";
    case precision::fp16: return "fp16";
    case precision::fp32: return "fp32";
    case precision::amp_bf16: return "amp-bf16";
    case precision::amp_fp16: return "amp-fp16";
  }
  detail::fail("unknown precision");
}

inline precision parse_precision(std::string_view s) {
  static constexpr precision all[] = {precision::mixed_bf16, precision::mixed_fp16, precision::bf16,    precision::fp16,
                                      precision::fp32,       precision::amp_bf16,   precision::amp_fp16};
  return detail::parse_named(s, all, "precision");
}

enum class optimizer_kind { adam, adamw, sgd, sgd_momentum, adam_8bit, adafactor, lion, rmsprop, adagrad, nadam, radam, adamax, adadelta, asgd, rprop };

/// One row per optimizer: everything else (names, parsing, help, state bytes, reports, the step's temporaries)
/// reads this table. A new optimizer is a value above and a row here.
struct optimizer_traits {
  optimizer_kind kind;
  std::string_view name;
  /// Parameter-sized state tensors in the recipe's optimizer dtype; -1: a formula of its own (optimizer_state_bytes).
  int moments;
  std::string_view keeps;  // what it keeps, in words, for reports
  /// Temporaries of its update (torch.optim, default arguments): foreach_temporaries lists of every parameter's size
  /// alive at once under foreach (torch/optim/adam.py _multi_tensor_adam: torch._foreach_sqrt of the second moments),
  /// forloop_temporaries tensors of the largest parameter's size under the for-loop (_single_tensor_adam:
  /// exp_avg_sq.sqrt() and its quotient). A fused kernel allocates none.
  int foreach_temporaries;
  int forloop_temporaries;
  /// What a weight_decay != 0 adds to them, in lists (foreach) and tensors (for-loop) of the same sizes; -1: not read
  /// for this optimizer, refused; -2: the optimizer takes no weight decay, refused. Coupled decay makes grads +
  /// weight_decay x params a new tensor (sgd.py _multi_tensor_sgd: torch._foreach_add(grads, params)); AdamW's
  /// decoupled decay multiplies the parameters in place.
  int decay_foreach;
  int decay_forloop;
  bool cuda_fused;  // torch.optim has a fused CUDA implementation (fused=True)
  std::string_view source;
  /// Beside foreach's lists, per-tensor temporaries of the largest parameter's size: tensors in the state dtype and
  /// bool masks (1 B per element), alive at once (rprop.py _multi_tensor_rprop: torch.where(sign.eq(etaminus), 0, grad)).
  int foreach_largest = 0;
  int foreach_largest_masks = 0;
  /// The for-loop's tensors of the previous parameter still alive while the next one's are built: a local name
  /// (Adam's `denom`, RMSprop's `avg`) holds its tensor until it is reassigned in the next iteration. forloop_carried
  /// of them beside all forloop_temporaries of the current parameter; an earlier moment of forloop_early_carried of them
  /// beside forloop_early current tensors (Adadelta's old std and delta beside the new std). A decayed gradient
  /// (decay_forloop) is made first in an iteration and is alive at both moments.
  int forloop_carried = 0;
  int forloop_early_carried = 0;
  int forloop_early = 0;
};

// clang-format off
inline constexpr optimizer_traits optimizer_table[] = {
    // torch/optim/adam.py with weight_decay (Adam's coupled decay): _multi_tensor_adam deletes the decayed gradients
    // (del device_grads) before its sqrt list, so the peak stays one list; _single_tensor_adam's grad.add(param) lives
    // beside the denominator's two tensors. AdamW decays the parameters in place (torch._foreach_mul_, param.mul_).
    // The for-loop's `denom` of the previous parameter lives until `denom = (exp_avg_sq.sqrt() / ...)` is reassigned,
    // beside that sqrt and its quotient (carried 1).
    {optimizer_kind::adam,         "adam",         2,  "two moments",     1, 2, 0, 1, true,  "Kingma & Ba 2015, Alg. 1; ZeRO paper (arXiv 1910.02054) §3.1: K = 12 B with the fp32 master", 0, 0, 1},
    {optimizer_kind::adamw,        "adamw",        2,  "two moments",     1, 2, 0, 0, true,  "Loshchilov & Hutter 2019; torch.optim.AdamW keeps exp_avg and exp_avg_sq", 0, 0, 1},
    // torch/optim/sgd.py: the update adds in place (_foreach_add_, param.add_); the first step's momentum buffer is a
    // clone of the gradient that stays as the state. weight_decay != 0: device_grads = torch._foreach_add(device_grads,
    // device_params) (_single_tensor_sgd: grad.add(param)), a new list alive through the momentum or parameter update.
    {optimizer_kind::sgd,          "sgd",          0,  "no state",        0, 0, 1, 1, true,  "torch.optim.SGD with momentum=0 keeps no state"},
    {optimizer_kind::sgd_momentum, "sgd-momentum", 1,  "one momentum",    0, 0, 1, 1, true,  "torch.optim.SGD momentum_buffer; TM101: 8 B with the master"},
    {optimizer_kind::adam_8bit,    "adam-8bit",    -1, "two 8-bit moments with an fp32 scale per 2048 values", 0, 0, -1, -1, true,
     "Dettmers et al. 2022, 8-bit Optimizers via Block-wise Quantization, §2.1"},
    // torch/optim/_adafactor.py: a matrix's var_estimate = row_var @ col_var, one tensor of its size; no fused kernel.
    // The previous parameter's `update` (var_estimate, rescaled in place) lives until it is reassigned (carried 1).
    // Its weight decay is decoupled, in place ("Perform stepweight decay": param.mul_(1 - lr * weight_decay)).
    {optimizer_kind::adafactor,    "adafactor",    -1, "factored second moment in fp32", 1, 1, 0, 0, false, "Shazeer & Stern 2018, §3, Alg. 3-4", 0, 0, 1},
    {optimizer_kind::lion,         "lion",         1,  "one momentum",    0, 0, -1, -1, true,  "Chen et al. 2023, Symbolic Discovery of Optimization Algorithms, Alg. 2"},
    // torch/optim/rmsprop.py: square_avg; _multi_tensor_rmsprop's avg = torch._foreach_sqrt(square_avgs), then in-place
    // add and addcdiv; _single_tensor_rmsprop's square_avg.sqrt() per parameter; no fused implementation. A decay makes
    // grads = torch._foreach_add(grads, params) (for-loop: grad.add(param)), read again by the addcdiv beside avg. The
    // previous parameter's `avg` lives until the next square_avg.sqrt() is assigned to it (carried 1).
    {optimizer_kind::rmsprop,      "rmsprop",      1,  "one running mean of squared gradients", 1, 1, 1, 1, false,
     "Tieleman & Hinton 2012, Lecture 6.5; torch.optim.RMSprop keeps square_avg (momentum=0, centered=False)", 0, 0, 1},
    // torch/optim/adagrad.py: sum; _multi_tensor_adagrad's std = torch._foreach_sqrt(state_sums) and numerator =
    // torch._foreach_mul(grads, minus_clr), both alive for _foreach_addcdiv_; _single_tensor_adagrad's
    // state_sum.sqrt().add_(eps) per parameter; fused=True runs on the CPU only. With a decay the decayed list
    // (torch._foreach_add(grads, params)) becomes the numerator in place ("re-use the intermediate memory"): still two
    // lists; the for-loop's grad.add(param) lives beside std, and the previous parameter's `std` beside the next
    // state_sum.sqrt() (carried 1).
    {optimizer_kind::adagrad,      "adagrad",      1,  "one sum of squared gradients", 2, 1, 0, 1, false,
     "Duchi et al. 2011, Adaptive Subgradient Methods, §1; torch.optim.Adagrad keeps state['sum']", 0, 0, 1},
    // torch/optim/nadam.py: exp_avg and exp_avg_sq (mu_product and step are scalars); _multi_tensor_nadam's
    // exp_avg_sq_sqrt = torch._foreach_sqrt(exp_avg_sqs), then in place; _single_tensor_nadam's
    // exp_avg_sq.div(bias_correction2).sqrt(), two tensors at once; no fused implementation. Coupled decay (the default,
    // decoupled_weight_decay=False): grouped_grads = torch._foreach_add(grouped_grads, grouped_params) is read again by
    // the last addcdiv, beside the sqrt list; the for-loop's grad.add(param) beside denom, the previous parameter's
    // `denom` beside the next div and sqrt (carried 1).
    {optimizer_kind::nadam,        "nadam",        2,  "two moments",     1, 2, 1, 1, false,
     "Dozat 2016, Incorporating Nesterov Momentum into Adam; torch.optim.NAdam keeps exp_avg and exp_avg_sq", 0, 0, 1},
    // torch/optim/radam.py: exp_avg and exp_avg_sq; _multi_tensor_radam's buffer = torch._foreach_sqrt(exp_avg_sqs)
    // (grads deleted first), then in place. _single_tensor_radam keeps exp_avg / bias_correction1 for the step and,
    // once the rectification applies (rho_t > 5: the 6th step on with beta2 0.999), builds (that * lr) * adaptive_lr
    // with adaptive_lr = sqrt(bc2) / exp_avg_sq.sqrt(): four tensors of the parameter's size at once (two before).
    // Coupled decay: the decayed list dies with `del grouped_grads` before the buffer, so foreach stays one list; the
    // for-loop's grad.add(param) lives to the end of its iteration, beside those four. The previous parameter's
    // bias_corrected_exp_avg lives until the next one is assigned (1 beside 1), freed before the four.
    {optimizer_kind::radam,        "radam",        2,  "two moments",     1, 4, 0, 1, false,
     "Liu et al. 2020, On the Variance of the Adaptive Learning Rate and Beyond (arXiv 1908.03265), Alg. 2", 0, 0, 0, 1, 1},
    // torch/optim/adamax.py: exp_avg and exp_inf; _multi_tensor_adamax's grads = torch._foreach_abs(grads) (a copy when
    // weight_decay is 0), then in place; _single_tensor_adamax's grad.abs() into torch.maximum(out=exp_inf). A decay's
    // list (torch._foreach_add(grouped_grads, grouped_params)) takes the abs in place (torch._foreach_abs_): still one
    // list; the for-loop's grad.add(param) lives beside grad.abs().
    {optimizer_kind::adamax,       "adamax",       2,  "a moment and an infinity norm", 1, 1, 0, 1, false,
     "Kingma & Ba 2015, Adam, §7.1 (AdaMax); torch.optim.Adamax keeps exp_avg and exp_inf"},
    // torch/optim/adadelta.py: square_avg and acc_delta; _multi_tensor_adadelta's std = torch._foreach_add(square_avgs,
    // eps) and deltas = torch._foreach_add(acc_deltas, eps), both alive to the update; _single_tensor_adadelta's
    // square_avg.add(eps).sqrt_() and acc_delta.add(eps).sqrt_() per parameter; no fused implementation. A decay's
    // device_grads = torch._foreach_add(device_grads, device_params) is read by _foreach_mul_(deltas, device_grads),
    // beside std and deltas; the for-loop's grad.add(param) beside std and delta. The previous parameter's std and
    // delta live until reassigned: both beside the new std, then the old delta beside the new std and delta.
    {optimizer_kind::adadelta,     "adadelta",     2,  "a running mean of squared gradients and of squared updates", 2, 2, 1, 1, false,
     "Zeiler 2012, ADADELTA: An Adaptive Learning Rate Method (arXiv 1212.5701), Alg. 1", 0, 0, 1, 2, 1},
    // torch/optim/asgd.py: ax (the average; eta, mu and step are scalars); _multi_tensor_asgd's intermediate =
    // torch._foreach_add(grads, params, alpha=lambd), deleted before torch._foreach_sub(params, axs); _single_tensor_asgd
    // updates in place and, while mu is 1 (until step t0 = 1e6 by default), averages by ax.copy_(param): no temporary.
    // A decay makes the intermediate torch._foreach_add(grouped_grads, grouped_params) and adds lambd x params into it
    // in place: still one list; the for-loop's grad.add(param) is its one tensor.
    {optimizer_kind::asgd,         "asgd",         1,  "the averaged parameters", 1, 0, 0, 1, false,
     "Polyak & Juditsky 1992, Acceleration of Stochastic Approximation by Averaging; torch.optim.ASGD keeps ax"},
    // torch/optim/rprop.py: prev (zeros_like) and step_size (full_like); no weight_decay argument, no fused kernel.
    // _multi_tensor_rprop: signs = torch._foreach_mul(grads, prevs), one list; per tensor, its bool masks
    // (sign[sign.gt(0)] = etaplus runs masked_fill_ in place) and grads[i].copy_(torch.where(signs[i].eq(etaminus), 0,
    // grads[i])), a mask and a tensor beside the list; `del signs` before grad_signs = [grad.sign() ...], one list.
    // _single_tensor_rprop: sign = grad.mul(prev).sign(), grad = grad.clone() and grad.sign() for the addcmul_: three
    // tensors of one parameter; the previous parameter's sign is alive beside grad.mul(prev) and its sign() until the
    // name is reassigned (carried 1 beside 2).
    {optimizer_kind::rprop,        "rprop",        2,  "the previous gradient and a step size per element", 1, 3, -2, -2, false,
     "Riedmiller & Braun 1993, A Direct Adaptive Method for Faster Backpropagation Learning: The RPROP Algorithm", 1, 1, 0, 1, 2},
};
// clang-format on

constexpr const optimizer_traits& traits_of(optimizer_kind o) {
  for (const optimizer_traits& t : optimizer_table)
    if (t.kind == o) return t;
  detail::fail("unknown optimizer; add its row to optimizer_table");
}

constexpr std::string_view name(optimizer_kind o) { return traits_of(o).name; }

/// torch.optim optimizers zeromem knows by name and does not model, each with why (torch/optim/_muon.py,
/// torch/optim/lbfgs.py): named in any case or punctuation (L-BFGS), they get that reason rather than a guess at a typo.
struct unmodelled_optimizer {
  std::string_view name, why;
};
inline constexpr unmodelled_optimizer unmodelled_optimizers[] = {
    {"muon", "torch.optim.Muon steps 2D matrices only (one momentum each, a Newton-Schulz orthogonalization in bf16), "
             "run beside another optimizer for the embeddings, norms and biases; that pair is not modelled"},
    {"lbfgs", "torch.optim.LBFGS keeps up to history_size (100) pairs of flat parameter-sized vectors and reruns a closure; "
              "it is not modelled"},
};

inline optimizer_kind parse_optimizer(std::string_view s) {
  for (const optimizer_traits& t : optimizer_table)
    if (t.name == s) return t.kind;
  const auto name_of = [](const optimizer_traits& t) { return t.name; };
  const std::string loose = detail::folded(s, true);
  for (const unmodelled_optimizer& u : unmodelled_optimizers)
    if (u.name == loose)
      detail::fail("optimizer " + detail::quoted(s) + ": " + std::string(u.why) + "; choose one of " +
                   detail::join_names(optimizer_table, ", ", name_of));
  detail::fail("unknown optimizer " + detail::quoted(s) + detail::did_you_mean(optimizer_table, name_of, s) + "; expected one of " +
               detail::join_names(optimizer_table, ", ", name_of));
}

/// "adam | adamw | ...": the names, for help text.
inline std::string optimizer_names(const char* separator = " | ") {
  return detail::join_names(optimizer_table, separator, [](const optimizer_traits& t) { return t.name; });
}

/// The optimizers whose weight decay's temporaries are read (decay_foreach and decay_forloop >= 0), for messages.
inline std::string optimizers_with_decay() {
  std::string out;
  for (const optimizer_traits& t : optimizer_table)
    if (t.decay_foreach >= 0 && t.decay_forloop >= 0) out += (out.empty() ? "" : ", ") + std::string(t.name);
  return out;
}

struct optimizer_spec {
  optimizer_kind kind = optimizer_kind::adamw;
  /// Adafactor only: elements of its factored second moment (sum of rows + columns over matrices plus the
  /// full size of vectors; see adafactor_factored_elements). Zero means unknown: a lower bound is used.
  elements adafactor_factored = elements_of(0);
  bool adafactor_momentum = false;  // Adafactor with beta1 keeps a full first moment too
  /// torch.optim's weight_decay (0 by default for SGD and Adam; AdamW's 0.01 is decoupled and adds nothing): coupled
  /// decay adds the temporaries optimizer_traits::decay_foreach / decay_forloop name.
  double weight_decay = 0.0;
  /// torch.optim options that keep one more parameter-sized state and leave the update's temporaries as they were:
  /// Adam/AdamW amsgrad=True, max_exp_avg_sq (adam.py: _foreach_maximum_ in place, then the sqrt of the maxima);
  /// RMSprop centered=True, grad_avg (rmsprop.py: avg = _foreach_addcmul(square_avgs, grad_avgs, grad_avgs) replaces
  /// the sqrt list), and momentum > 0, momentum_buffer (_foreach_addcdiv_ into it in place).
  bool amsgrad = false;
  bool centered = false;
  bool momentum_buffer = false;
  /// SGD nesterov=True (with momentum): no state of its own; _multi_tensor_sgd adds the buffers into the gradients
  /// in place (torch._foreach_add_(device_grads, bufs)), _single_tensor_sgd makes grad.add(buf) per parameter, one
  /// tensor of the largest parameter's size beside the for-loop's others.
  bool nesterov = false;
};

/// The parameter-sized states optimizer_spec's options add to the optimizer's own.
constexpr int extra_states(const optimizer_spec& o) { return (o.amsgrad ? 1 : 0) + (o.centered ? 1 : 0) + (o.momentum_buffer ? 1 : 0); }

/// Adafactor's factored second moment of one r x c matrix: r + c values (Shazeer & Stern 2018, Alg. 4);
/// a vector (c == 0 or r == 1) keeps its full n values (Alg. 3 unfactored case).
constexpr elements adafactor_factored_elements(std::int64_t rows, std::int64_t cols) {
  if (rows <= 0 || cols < 0) detail::fail("a tensor shape must have positive sizes; pass rows >= 1, cols >= 0");
  if (cols == 0 || rows == 1 || cols == 1) return elements_of(cols == 0 ? rows : detail::checked_mul(rows, cols));
  return elements_of(detail::checked_add(rows, cols));
}

namespace detail {
constexpr std::int64_t isqrt_ceil(std::int64_t n) {
  std::int64_t lo = 0, hi = 3'037'000'500;  // sqrt(2^63) < hi
  while (lo < hi) {
    const std::int64_t mid = lo + (hi - lo) / 2;
    if (mid * mid >= n) hi = mid;
    else lo = mid + 1;
  }
  return lo;
}
}  // namespace detail

/// Bytes of optimizer state (master weights excluded) for n parameters.
constexpr bytes optimizer_state_bytes(const optimizer_spec& o, const precision_recipe& r, elements n) {
  const bytes_per_element state = size_of(r.optimizer_dtype());
  const bytes_per_element fp32 = size_of(dtype::fp32);
  const optimizer_traits& t = traits_of(o.kind);
  if (t.moments >= 0) return n * (state * (t.moments + extra_states(o)));  // the table's moments (its source per row)
  switch (o.kind) {
    case optimizer_kind::adam_8bit: {
      // Two 8-bit moments plus one fp32 absmax per block of 2048 per moment (Dettmers et al. 2022,
      // "8-bit Optimizers via Block-wise Quantization", §2.1); TM101: 6 B/param with the fp32 master.
      const elements blocks = elements_of(detail::ceil_div(n.count(), 2048));
      return n * bytes_per_element_of(2) + blocks * (fp32 * 2);
    }
    case optimizer_kind::adafactor: {
      // Factored second moment in fp32 (Shazeer & Stern 2018, §3; Hugging Face Adafactor upcasts to fp32).
      // Without tensor shapes: the lower bound of one square matrix, 2 * ceil(sqrt(n)) values.
      const elements factored =
          o.adafactor_factored.count() > 0 ? o.adafactor_factored : elements_of(2 * detail::isqrt_ceil(n.count()));
      const bytes second = factored * fp32;
      return o.adafactor_momentum ? second + n * state : second;
    }
    default: break;
  }
  detail::fail("optimizer " + std::string(t.name) + " has moments -1 in optimizer_table but no formula in optimizer_state_bytes");
}

}  // namespace zeromem
