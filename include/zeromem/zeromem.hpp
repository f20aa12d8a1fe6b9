// zeromem: how many bytes an LLM training, inference or RLHF job puts on each GPU, host and NVMe.
// The umbrella header: includes every public layer, from the bottom up.
#pragma once

// core: units, dtypes, parsing, formatting, parallel degrees, the GPU table (no model knowledge)
#include "zeromem/core/version.hpp"
#include "zeromem/core/error.hpp"
#include "zeromem/core/units.hpp"
#include "zeromem/core/dtype.hpp"
#include "zeromem/core/format.hpp"
#include "zeromem/core/parse.hpp"
#include "zeromem/core/parallel.hpp"
#include "zeromem/core/gpus.hpp"
// model: architectures, presets, parameter counts, adapters (config.json: zeromem/model/hf_config.hpp, optional)
#include "zeromem/model/model.hpp"
#include "zeromem/model/adapters.hpp"
// training: precision recipes, ZeRO/FSDP sharding, model states, activations
#include "zeromem/training/recipe.hpp"
#include "zeromem/training/sharding.hpp"
#include "zeromem/training/model_states.hpp"
#include "zeromem/training/activations.hpp"
// inference: KV caches, vLLM engines, forward-only passes
#include "zeromem/inference/kv_cache.hpp"
#include "zeromem/inference/vllm.hpp"
#include "zeromem/inference/sglang.hpp"
#include "zeromem/inference/forward.hpp"
// engines: DeepSpeed's own estimators, reproduced
#include "zeromem/engines/deepspeed.hpp"
// jobs: whole jobs and a training step's peak, RLHF jobs and their launch files, the planner
#include "zeromem/jobs/job.hpp"
#include "zeromem/jobs/step.hpp"
#include "zeromem/jobs/rlhf.hpp"
#include "zeromem/jobs/rlhf_config.hpp"
#include "zeromem/jobs/plan.hpp"
// report: text and SVG
#include "zeromem/report/report.hpp"
#include "zeromem/report/svg.hpp"
