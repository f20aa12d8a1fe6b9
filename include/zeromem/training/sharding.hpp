// ZeRO stages 0-3 (as types and as run-time values), FSDP strategies mapped onto them, ZeRO++ hpZ,
// and where states are offloaded (CPU or NVMe).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <type_traits>

#include "zeromem/core/error.hpp"

namespace zeromem {

enum class offload_device { none, cpu, nvme };

constexpr std::string_view name(offload_device d) {
  switch (d) {
    case offload_device::none: return "none";
    case offload_device::cpu: return "cpu";
    case offload_device::nvme: return "nvme";
  }
  detail::fail("unknown offload device");
}

inline offload_device parse_offload_device(std::string_view s) {
  static constexpr offload_device all[] = {offload_device::none, offload_device::cpu, offload_device::nvme};
  return detail::parse_named(s, all, "offload device");
}

/// DeepSpeed `offload_optimizer` / `offload_param` sections (docs/_pages/config-json.md).
struct offload_config {
  offload_device device = offload_device::none;
  bool pin_memory = false;  // DeepSpeed's default before v0.19.5; true since (PR #8207, zero/offload_config.py)
};

/// What a ZeRO optimizer shards and offloads. Defaults are DeepSpeed's config defaults.
struct zero_config {
  int stage = 0;
  /// Ranks that share one copy of the sharded states; 0 means the whole data-parallel group.
  /// FSDP HYBRID_SHARD and DeepSpeed MiCS shard within a smaller group and replicate across groups.
  std::int64_t shard_group = 0;
  offload_config optimizer{};
  offload_config params{};
  /// ZeRO++ hpZ: a secondary copy of the 16-bit weights sharded over this many ranks (1 = off;
  /// DeepSpeed `zero_hpz_partition_size`, arXiv 2306.10209 §3.2).
  std::int64_t hpz_partition = 1;
  /// NVMe swap buffers pinned in host RAM (DeepSpeed offload config defaults).
  std::int64_t sub_group_size = 1'000'000'000;     // zero_optimization.sub_group_size (0: a parameter a sub-group)
  std::int64_t optimizer_buffer_count = 4;          // offload_optimizer.buffer_count
  std::int64_t param_buffer_count = 5;              // offload_param.buffer_count
  std::int64_t param_buffer_size = 100'000'000;     // offload_param.buffer_size (elements)
};

/// Rejects what DeepSpeed rejects, with the fix. Same words as the compile-time checks below.
constexpr void validate(const zero_config& z) {
  for (offload_device d : {z.optimizer.device, z.params.device})
    if (d != offload_device::none && d != offload_device::cpu && d != offload_device::nvme)
      detail::fail_value("an offload device must be none, cpu or nvme", static_cast<int>(d),
                         "use offload_device::none, ::cpu or ::nvme");
  if (z.stage < 0 || z.stage > 3)
    detail::fail_value("ZeRO stage must be 0, 1, 2 or 3", z.stage, "use stage 3 for full sharding");
  if (z.params.device != offload_device::none && z.stage != 3)
    detail::fail_value("parameter offload needs ZeRO stage 3", z.stage,
                       "set stage 3 or turn parameter offload off");
  // DeepSpeed engine.py _do_optimizer_sanity_check: at stage 0 no ZeRO optimizer runs, so offload_optimizer is
  // never read and the states stay on the GPU; accepting it would report host bytes that never exist.
  if (z.optimizer.device != offload_device::none && z.stage == 0)
    detail::fail("optimizer offload needs ZeRO stage 1, 2 or 3 (at stage 0 DeepSpeed ignores offload_optimizer); "
                 "set a stage or turn optimizer offload off");
  if (z.optimizer.device == offload_device::nvme && z.stage != 3)
    detail::fail_value("optimizer offload to NVMe needs ZeRO stage 3 (ZeRO-Infinity)", z.stage,
                       "set stage 3 or offload the optimizer to cpu");
  if (z.shard_group < 0)
    detail::fail_value("the shard group size cannot be negative", z.shard_group,
                       "pass 0 for the whole data-parallel group");
  detail::require_positive(z.hpz_partition, "the hpZ partition size");
  if (z.hpz_partition > 1 && z.stage != 3)
    detail::fail_value("ZeRO++ hpZ needs ZeRO stage 3", z.stage, "set stage 3 or hpZ partition size 1");
  if (z.hpz_partition > 1 && z.params.device != offload_device::none)
    detail::fail("ZeRO++ hpZ cannot be combined with parameter offload; turn one of them off");
  if (z.sub_group_size < 0)  // DeepSpeed's Field(ge=0): 0 closes a sub-group after each parameter
    detail::fail_value("sub_group_size cannot be negative", z.sub_group_size, "pass 0 for a parameter a sub-group, or DeepSpeed's 1e9");
  detail::require_positive(z.optimizer_buffer_count, "offload_optimizer.buffer_count");
  detail::require_positive(z.param_buffer_count, "offload_param.buffer_count");
  detail::require_positive(z.param_buffer_size, "offload_param.buffer_size");
}

/// A ZeRO stage as a type: zero_stage<4> does not compile.
template <int S>
struct zero_stage {
  static_assert(S >= 0 && S <= 3, "zeromem: ZeRO stage must be 0, 1, 2 or 3; use zero_stage<3> for full sharding");
  static constexpr int value = S;
};

/// Where a ZeRO state is offloaded, named: offload_optimizer<cpu> (DeepSpeed `offload_optimizer`) and
/// offload_params<nvme> (`offload_param`). Values of one enum, so that zero<> can take them and say what is wrong
/// with anything else (C++17 takes no class-type template arguments).
enum class offload_placement { optimizer_cpu, optimizer_nvme, params_cpu, params_nvme };

/// The devices by their short names, for `using namespace zeromem::devices;` and then offload_optimizer<cpu>.
/// In a namespace of their own: `cpu` is a common name (device_kind::cpu, users' own variables).
namespace devices {
inline constexpr offload_device cpu = offload_device::cpu;
inline constexpr offload_device nvme = offload_device::nvme;
}  // namespace devices

namespace detail {
template <offload_device D, bool Params>
struct placement_of {
  static_assert(D != offload_device::none,
                "zeromem: offload_optimizer<none> / offload_params<none> is no offload; leave the placement out");
  static constexpr offload_placement value = Params ? (D == offload_device::nvme ? offload_placement::params_nvme : offload_placement::params_cpu)
                                                    : (D == offload_device::nvme ? offload_placement::optimizer_nvme : offload_placement::optimizer_cpu);
};

template <class T>
constexpr bool is_placement_v = std::is_same_v<T, offload_placement>;

/// The device a placement puts the parameters (Params) or the optimizer states (!Params) on; none if it is the other's.
template <bool Params>
constexpr offload_device device_for(offload_placement x) {
  switch (x) {
    case offload_placement::optimizer_cpu: return Params ? offload_device::none : offload_device::cpu;
    case offload_placement::optimizer_nvme: return Params ? offload_device::none : offload_device::nvme;
    case offload_placement::params_cpu: return Params ? offload_device::cpu : offload_device::none;
    case offload_placement::params_nvme: return Params ? offload_device::nvme : offload_device::none;
  }
  return offload_device::none;
}

template <bool Params, class... P>
constexpr offload_device placed(P... p) {
  offload_device d = offload_device::none;
  ((d = device_for<Params>(offload_placement(p)) != offload_device::none ? device_for<Params>(offload_placement(p)) : d), ...);
  return d;
}

template <bool Params, class... P>
constexpr int placements_of(P... p) {
  return (0 + ... + (device_for<Params>(offload_placement(p)) != offload_device::none ? 1 : 0));
}
}  // namespace detail

template <offload_device D>
inline constexpr offload_placement offload_optimizer = detail::placement_of<D, false>::value;
template <offload_device D>
inline constexpr offload_placement offload_params = detail::placement_of<D, true>::value;

/// A ZeRO configuration fixed at compile time: zero<3, offload_optimizer<cpu>, offload_params<nvme>> (with
/// `using namespace zeromem::devices`). Invalid
/// combinations do not compile, each with a message naming the fix.
template <int S, auto... Placements>
struct zero {
  // In the class body, so that every use of zero<S> (config() included) checks the stage, not only ::stage.
  static_assert(S >= 0 && S <= 3, "zeromem: ZeRO stage must be 0, 1, 2 or 3; use zero<3> for full sharding");
  static_assert((detail::is_placement_v<decltype(Placements)> && ...),
                "zeromem: say which state is offloaded: zero<3, offload_optimizer<cpu>> or zero<3, offload_params<nvme>>, "
                "not a bare offload_device");
  static constexpr int stage = S;
  static constexpr offload_device params = detail::placed<true>(Placements...);
  static constexpr offload_device optimizer = detail::placed<false>(Placements...);
  static_assert(detail::placements_of<true>(Placements...) <= 1 && detail::placements_of<false>(Placements...) <= 1,
                "zeromem: each state has one place; name offload_optimizer<...> and offload_params<...> at most once each");
  static_assert(params == offload_device::none || S == 3,
                "zeromem: parameter offload needs ZeRO stage 3; set stage 3 or turn parameter offload off");
  static_assert(optimizer == offload_device::none || S != 0,
                "zeromem: optimizer offload needs ZeRO stage 1, 2 or 3 (at stage 0 DeepSpeed ignores offload_optimizer); "
                "set a stage or turn optimizer offload off");
  static_assert(optimizer != offload_device::nvme || S == 3,
                "zeromem: optimizer offload to NVMe needs ZeRO stage 3 (ZeRO-Infinity); set stage 3 or offload the "
                "optimizer to cpu");
  static constexpr zero_config config() {
    zero_config z{};
    z.stage = S;
    z.params.device = params;
    z.optimizer.device = optimizer;
    return z;
  }
};

/// PyTorch FSDP sharding strategies (torch.distributed.fsdp.ShardingStrategy) mapped onto ZeRO stages:
/// NO_SHARD = DDP (stage 0), SHARD_GRAD_OP = stage 2, FULL_SHARD = stage 3; the hybrid strategies shard
/// within a group of `shard_group` ranks (a node by default) and replicate across groups.
enum class fsdp_strategy { no_shard, shard_grad_op, full_shard, hybrid_shard, hybrid_shard_zero2 };

constexpr zero_config fsdp_config(fsdp_strategy s, std::int64_t hybrid_shard_group = 0) {
  zero_config z{};
  switch (s) {
    case fsdp_strategy::no_shard: z.stage = 0; break;
    case fsdp_strategy::shard_grad_op: z.stage = 2; break;
    case fsdp_strategy::full_shard: z.stage = 3; break;
    case fsdp_strategy::hybrid_shard:
      z.stage = 3;
      z.shard_group = detail::require_positive(hybrid_shard_group, "the HYBRID_SHARD group size (GPUs per node)");
      break;
    case fsdp_strategy::hybrid_shard_zero2:
      z.stage = 2;
      z.shard_group = detail::require_positive(hybrid_shard_group, "the _HYBRID_SHARD_ZERO2 group size (GPUs per node)");
      break;
  }
  return z;
}

inline fsdp_strategy parse_fsdp_strategy(std::string_view s) {
  if (s == "NO_SHARD") return fsdp_strategy::no_shard;
  if (s == "SHARD_GRAD_OP") return fsdp_strategy::shard_grad_op;
  if (s == "FULL_SHARD") return fsdp_strategy::full_shard;
  if (s == "HYBRID_SHARD") return fsdp_strategy::hybrid_shard;
  if (s == "_HYBRID_SHARD_ZERO2") return fsdp_strategy::hybrid_shard_zero2;
  detail::fail("unknown FSDP strategy " + detail::quoted(s) +
               "; expected one of NO_SHARD, SHARD_GRAD_OP, FULL_SHARD, HYBRID_SHARD, _HYBRID_SHARD_ZERO2");
}

}  // namespace zeromem
