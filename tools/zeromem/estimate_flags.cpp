// `zeromem estimate`: its flags, each with its help text and range; estimate_args.cpp builds the job they describe.
#include "estimate.hpp"

namespace zeromem::cli {

void add_estimate_flags(CLI::App& app, estimate_args& a) {
  text_option(app, "--params", a.params, "parameter count: 7.5e9, 7.5B, 350M, 1T (or give a model)");
  text_option(app, "--precision", a.precision_name, "mixed-bf16 | mixed-fp16 | bf16 | fp16 | fp32 | amp-bf16 | amp-fp16")->capture_default_str();
  text_option(app, "--optimizer", a.optimizer_name, optimizer_names())->capture_default_str();
  real_option(app, "--weight-decay", a.weight_decay,
              "torch.optim weight_decay: coupled decay (sgd, adam, rmsprop, nadam, ...) adds the update's decayed-gradient "
              "temporaries; AdamW's and Adafactor's decoupled decay adds none",
              0.0, 1e300, false);
  app.add_flag("--amsgrad", a.amsgrad, "Adam / AdamW amsgrad=True: a third state, max_exp_avg_sq");
  app.add_flag("--rmsprop-centered", a.rmsprop_centered, "RMSprop centered=True: one more state, grad_avg");
  app.add_flag("--rmsprop-momentum", a.rmsprop_momentum, "RMSprop momentum > 0: one more state, momentum_buffer");
  app.add_flag("--nesterov", a.nesterov, "SGD nesterov=True (with --optimizer sgd-momentum): the for-loop's grad.add(buf), one tensor");
  auto* stage = integer_option(app, "--zero-stage", a.zero_stage, "DeepSpeed ZeRO stage 0-3 (default 0)", 0, 3);
  auto* fsdp = text_option(app, "--fsdp", a.fsdp, "FSDP strategy: NO_SHARD | SHARD_GRAD_OP | FULL_SHARD | HYBRID_SHARD | _HYBRID_SHARD_ZERO2");
  stage->excludes(fsdp);
  integer_option(app, "--dp", a.dp, "data-parallel degree")->capture_default_str();
  integer_option(app, "--gpus-per-node", a.gpus_per_node, "GPUs (ranks) per node")->capture_default_str();
  integer_option(app, "--shard-group", a.shard_group, "ranks sharing one copy of sharded states (default: dp)");
  integer_option(app, "--hpz", a.hpz, "ZeRO++ hpZ secondary partition size (1 = off)")->capture_default_str();
  text_option(app, "--offload-optimizer", a.offload_optimizer, "none | cpu | nvme (ZeRO stage 1-3)")->capture_default_str();
  text_option(app, "--offload-params", a.offload_params, "none | cpu | nvme (ZeRO stage 3 only)")->capture_default_str();
  app.add_flag("--pin-memory", a.pin_memory, "offloaded states in pinned host memory");
  app.add_flag("--fp32-grad-copy", a.fp32_grad_copy, "optimizer keeps an fp32 copy of 16-bit gradients (DeepSpeed, Megatron fp16)");
  text_option(app, "--main-grads", a.main_grads, "gradient accumulation dtype, e.g. fp32 (Megatron main grads)");
  text_option(app, "--largest-layer-params", a.largest_layer,
              "parameters of the largest layer (ZeRO-3 gathers it whole; ZeRO-1/2 CPU offload stages gradients by it)");
  integer_option(app, "--grad-accum-steps", a.grad_accum_steps,
                 "micro-batches per optimizer step (ZeRO-1/2 CPU offload keeps a 16-bit host accumulation buffer when > 1)")
      ->capture_default_str();
  text_option(app, "--reduce-bucket", a.reduce_bucket,
              "ZeRO's reduce_bucket_size, in 16-bit gradient elements (default: DeepSpeed's 5e8; Hugging Face Trainer's \"auto\" "
              "is hidden x hidden)");
  text_option(app, "--prefetch-bucket", a.prefetch_bucket,
              "ZeRO-3's stage3_prefetch_bucket_size, in elements (default: DeepSpeed's 5e7; Hugging Face Trainer's \"auto\" is "
              "0.9 x hidden x hidden)");
  text_option(app, "--max-reuse-distance", a.max_reuse_distance,
              "ZeRO-3's stage3_max_reuse_distance, in elements: parameters used again within it stay gathered from the forward "
              "to the backward (default: DeepSpeed's 1e9)");
  text_option(app, "--param-persistence-threshold", a.param_persistence_threshold,
              "ZeRO-3's stage3_param_persistence_threshold, in elements: tensors of at most this many stay gathered on every rank "
              "(default: DeepSpeed's 1e5; Hugging Face Trainer's \"auto\" is 10 x hidden; 0: none)");
  text_option(app, "--deepspeed-version", a.deepspeed_version,
              "the DeepSpeed version, such as 0.16.4: 0.16.x under ZeRO-3 with --recompute releases nothing its backward "
              "gathers, the whole model by the embedding's backward (DeepSpeed issue #7116)");
  text_option(app, "--overlap-comm", a.overlap_comm,
              "on | off: ZeRO-1/2's overlap_comm, two reduce buckets instead of one (default: DeepSpeed's, off below stage 3)");
  text_option(app, "--deepspeed-config", a.deepspeed_config,
              "a DeepSpeed config (ds_config.json): its ZeRO stage, offload, buckets, bf16/fp16, batch and optimizer set the flags "
              "above; a flag it also sets must agree, and its \"auto\" takes the flag as Hugging Face Trainer does");
  add_model_flags(app, a.model, false);
  integer_option(app, "--lora-rank", a.lora_rank, "LoRA rank r (PEFT LoraConfig.r); the base model is frozen", 1, 1 << 20);
  text_option(app, "--lora-targets", a.lora_targets,
              "modules to adapt, comma-separated Hugging Face names: q_proj,k_proj,v_proj,o_proj,gate_proj,up_proj,down_proj,fc1,fc2,"
              "qkv,proj or all-linear");
  real_option(app, "--lora-dropout", a.lora_dropout, "LoRA dropout probability (0: none)", 0.0, 1.0, false)->capture_default_str();
  text_option(app, "--lora-dtype", a.lora_dtype, "dtype of the adapters (PEFT keeps them in fp32 beside a 16-bit base)")->capture_default_str();
  text_option(app, "--quantize", a.quantize, "the frozen base: none | nf4 (QLoRA, 4-bit NormalFloat) | int8 (LLM.int8())")->capture_default_str();
  app.add_flag("--no-double-quant", a.no_double_quant, "NF4 without double quantization (fp32 absmax per 64 weights)");
  app.add_flag("--paged-optimizer", a.paged_optimizer, "bitsandbytes paged 32-bit optimizer: states in unified memory, evicted to host RAM");
  text_option(app, "--freeze", a.freeze, "components that do not train, comma-separated: vision, embeddings, all-but-adapters (with LoRA)");

  tokens_option(app, "--seq-len", a.seq_len, "tokens per sequence: 4096, 32K (= 32,768); turns on the step's peak");
  integer_option(app, "--micro-batch", a.micro_batch, "sequences per micro-batch")->capture_default_str();
  tokens_option(app, "--image-tokens", a.image_tokens,
                "image tokens among each sequence's --seq-len tokens (Qwen2-VL, Qwen2.5-VL: spatial_merge^2 patches each run through the vision tower)");
  integer_option(app, "--tp", a.tp, "tensor-parallel degree")->capture_default_str();
  app.add_flag("--sp", a.sp, "sequence parallelism (with --tp)");
  integer_option(app, "--cp", a.cp, "context-parallel degree")->capture_default_str();
  integer_option(app, "--pp", a.pp, "pipeline-parallel degree")->capture_default_str();
  integer_option(app, "--virtual-stages", a.virtual_stages, "interleaved pipeline model chunks per rank")->capture_default_str();
  integer_option(app, "--microbatches", a.microbatches, "micro-batches per step (default: at least pp)");
  text_option(app, "--recompute", a.recompute_name, "none | selective (Megatron-LM's; transformers' gradient checkpointing is full) | full")->capture_default_str();
  text_option(app, "--attention", a.attention_name, attention_help)->capture_default_str();
  real_option(app, "--dropout", a.dropout, "dropout probability at the attention probabilities, both residual branches and the embeddings "
                                          "(0: none); replaces config.json's dropouts", 0.0, 1.0, false)
      ->capture_default_str()
      ->each([&a](const std::string&) { a.dropout_given = true; });
  text_option(app, "--implementation", a.implementation_name, "hf (transformers' modeling code) | eager | fused | paper (docs/activations.md)")
      ->capture_default_str();
  text_option(app, "--device", a.device_name, "cuda | cpu (dropout-mask and norm-statistics dtypes)")->capture_default_str();
  text_option(app, "--activation-dtype", a.activation_dtype, "dtype of activations (default: the precision's compute dtype)");
  integer_option(app, "--torch-version", a.torch_major, "PyTorch major version, 1 or 2 (under 1 transformers' RMSNorm keeps more; --implementation hf)", 1, 2)->capture_default_str();
  text_option(app, "--loss", a.loss, "hf (transformers ForCausalLMLoss: full logits, fp32 upcast) | fused (chunked linear-cross-entropy)")
      ->capture_default_str();
  text_option(app, "--optimizer-impl", a.optimizer_impl,
              "foreach | fused | forloop (default: PyTorch's for the optimizer: foreach on CUDA, the for-loop for Adafactor; "
              "with --zero-stage, DeepSpeed's: FusedAdam, in place, for adam and adamw)");
  text_option(app, "--allocator", a.allocator,
              "default | expandable (PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True): expandable segments split every block to "
              "512 B, so the allocated peak holds no allocator_blocks; reserved memory is not modelled (--reserve-fraction)")
      ->capture_default_str();
  app.add_flag("--forward-only", a.forward_only,
               "one forward without autograd (RLHF reference/reward model, log-prob pass): weights + one layer's live tensors + the output");
  text_option(app, "--forward-output", a.forward_output, "with --forward-only: hidden-states | logits | log-probs (log_softmax(logits.float()))")
      ->capture_default_str();
  app.add_flag("--no-cache", a.no_cache,
               "use_cache=False, in a training step or with --forward-only: no KV cache whatever config.json says (transformers "
               "keeps every layer's K and V by default; full recompute drops it anyway)");
  app.add_flag("--ddp", a.ddp, "PyTorch DistributedDataParallel: all-reduce buckets as large as the gradients, alive all step");
  app.add_flag("--keep-grads", a.keep_grads,
               "zero_grad(set_to_none=False): gradients stay allocated between steps, alive from the start of forward (as in every "
               "micro-batch after the first with --grad-accum-steps > 1)");
  app.add_flag("--gradient-as-bucket-view", a.gradient_as_bucket_view, "DDP(gradient_as_bucket_view=True): gradients are views into the buckets");
  text_option(app, "--cuda-context", a.cuda_context, "driver memory outside PyTorch's allocator (default: 650,969,088 B, H100 + torch 2.11)");
  text_option(app, "--cuda-modules", a.cuda_modules,
              "kernel modules and library handles a training step adds outside the allocator (default: 146 MiB, H100/H200 + torch 2.11)");
  text_option(app, "--blas-workspaces", a.blas_workspaces,
              "cuBLAS workspaces in PyTorch's allocator, two handles (forward, backward) x 32 MiB on compute capability 9.x/10.x/12.x, "
              "else x 8,519,680 B (default: from --gpu, else H100's 64 MiB; CUBLAS_WORKSPACE_CONFIG changes it)");
  real_option(app, "--reserve-fraction", a.reserve_fraction,
              "reserved above allocated at the peak, measured on your job (max_memory_reserved / max_memory_allocated - 1)", 0.0, 10.0, false)
      ->capture_default_str();
  add_device_flags(app, a.gpu, a.gpu_memory, "the verdict against its capacity");
  text_option(app, "--host-memory", a.host_memory,
              "one node's host RAM, such as 1TB: the host RAM a node needs held against it, and --explain's fixes (offload) kept within it");
  text_option(app, "--nvme-capacity", a.nvme_capacity,
              "one node's NVMe, such as 3.84TB: the NVMe a node needs (ZeRO-Infinity) held against it, and --explain's fixes kept within it");
  app.add_flag("--explain", a.explain, "the dominant terms, and the smallest change that makes it fit (with --gpu)");
  text_option(app, "--svg", a.svg, "write a stacked-bar chart of the per-GPU terms to this file");
  app.add_flag("--json", a.json, "print JSON with exact byte counts");
  app.parse_complete_callback([&app, &a] {
    a.given_flags.clear();
    for (const CLI::Option* o : app.get_options())
      if (o->count() > 0) a.given_flags.insert(o->get_name());
  });
}

}  // namespace zeromem::cli
