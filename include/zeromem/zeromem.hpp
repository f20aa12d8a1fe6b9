// zeromem: how many bytes an LLM training, inference or RLHF job puts on each GPU, host and NVMe.
// The umbrella header: includes every public layer.
#pragma once

#include "zeromem/version.hpp"
#include "zeromem/error.hpp"
#include "zeromem/units.hpp"
#include "zeromem/dtype.hpp"
#include "zeromem/format.hpp"
#include "zeromem/parse.hpp"
#include "zeromem/recipe.hpp"
#include "zeromem/sharding.hpp"
#include "zeromem/model_states.hpp"
#include "zeromem/deepspeed.hpp"
#include "zeromem/model.hpp"
#include "zeromem/activations.hpp"
#include "zeromem/kv_cache.hpp"
#include "zeromem/vllm.hpp"
#include "zeromem/job.hpp"
#include "zeromem/scenarios.hpp"
#include "zeromem/report.hpp"
#include "zeromem/gpus.hpp"
#include "zeromem/plan.hpp"
#include "zeromem/svg.hpp"
