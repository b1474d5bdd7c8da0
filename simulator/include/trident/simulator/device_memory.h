#pragma once
// What a GPU rank holds besides the tensors PyTorch's caching allocator hands out, and the
// allocator's own reserve: the terms that make "fits" mean fits on the device (nvidia-smi's
// figure), where memory.h's StageMemory fields are what Megatron's report_memory prints as
// "allocated". Each size comes from the code that allocates it (NCCL, DeepEP, Transformer
// Engine, PyTorch), cited beside it; none is fitted to a measured training run.
#include "trident/core/job.h"
#include "trident/core/units.h"

#include <cstdint>

namespace trident::simulator {

// The caching allocator's reserve over what it has handed out (memory_reserved − memory_
// allocated), as a fraction of the allocated peak: a stated allowance, not a measurement of the
// job. PyTorch pads requests (512 B below 1 MiB, 2 MiB above, 1–10 MiB ones carved from 20 MiB
// segments: c10/cuda/CUDACachingAllocator.cpp kMinBlockSize, kRoundLarge, kLargeBuffer) and
// leaves slivers between blocks of changing sizes. Measured: 1.83 GiB reserved-but-unallocated
// beside 75.31 GiB allocated, 2.4 % (vllm-project/compressed-tensors PR #587, 80 GB device,
// whose authors then reserve 5 %); tens of percent where shapes change step to step, fixed by
// expandable segments (torchtune #1185; SkyRL PR #1768: ~20 GiB reserved-but-unallocated
// training a dropless MoE with Megatron on B200), which Megatron's MoE README sets. Trident
// reserves 5 %, and 10 % for dropless MoE, whose expert inputs change size every step.
inline constexpr double kAllocatorReserveFraction = 0.05;
inline constexpr double kDroplessMoeAllocatorReserveFraction = 0.10;
// The reserve fraction for `job`'s model and routing; none on a CPU device.
double allocator_reserve_fraction(const core::JobSpec& job);

// Bytes of one NCCL connection between two ranks over NVLink on one channel: the receiver's
// LL (512 KiB), LL128 (4.6875 MiB) and SIMPLE (4 MiB) buffers plus its 4 KiB header, aligned to
// CUDA_IPC_MIN (2 MiB) — 10 MiB — and the sender's 2 MiB (NCCL 2.30 src/transport/p2p.cc,
// src/include/device.h; the two sizes NVIDIA/nccl#1685 saw allocated on 8×H100).
inline constexpr double kNcclConnectionBytes = 12.0 * core::kMiB;
// Channels NCCL opens per ring collective and per NVLink peer of point-to-point traffic on an
// NVSwitch node ("as many as 32 channels are created, per pair of GPUs": NVIDIA/nccl#1685,
// 8×H100, an all-to-all growing each GPU's memory by 3.28 GB; NCCL's "32 coll channels, 32 p2p
// channels per peer" on DGX H100).
inline constexpr double kNcclChannels = 32.0;
// Channels per peer across the network for point-to-point traffic (NCCL_NCHANNELS_PER_NET_PEER,
// default 2 in NCCL's environment documentation).
inline constexpr double kNcclNetChannelsPerPeer = 2.0;
// The CUDA context of a process with lazy module loading (CUDA ≥ 11.7): 426 MiB measured with
// torch 2.10 + CUDA 13.0 (unslothai/unsloth-zoo PR #1053); ptrblck quotes "around 400MB"
// (pytorch/pytorch#109888). Outside PyTorch's allocator.
inline constexpr double kCudaContextBytes = 426.0 * core::kMiB;
// Transformer Engine's cuBLAS workspace on sm ≥ 90: 32 MiB + 1 KiB per stream, three more for
// the userbuffer streams of --tp-comm-overlap (transformer_engine/pytorch/cpp_extensions/
// gemm.py, _NUM_MAX_UB_STREAMS = 3). Allocated through PyTorch once and kept: counted with the
// allocated buffers (StageMemory::buffers_bytes), none on a CPU device.
inline constexpr double kCublasWorkspaceBytes = 32.0 * core::kMiB + 1024;
double cublas_workspace_bytes(const core::JobSpec& job);

// One rank's memory outside PyTorch's allocator, for a rank of pipeline stage `stage`: what
// nvidia-smi shows beyond torch.cuda.memory_reserved().
struct RuntimeMemory {
    double cuda_context_bytes = 0.0;
    double nccl_bytes = 0.0;   // communicator buffers of every group the rank talks in
    double deepep_bytes = 0.0; // the flex dispatcher's DeepEP buffer (cudaMalloc, NVSHMEM)
    double total() const { return cuda_context_bytes + nccl_bytes + deepep_bytes; }
};
// None on a CPU device (the localhost cluster): no context, no NCCL.
RuntimeMemory runtime_memory(const core::JobSpec& job, std::int32_t stage);

// NCCL's buffers on one rank of `stage`: a ring's one connection pair per channel for each
// group that runs ring collectives (tensor, data(-context), expert-data, the tied embedding's
// first–last pair, the allgather dispatcher's tp·ep), one per channel per peer for
// point-to-point groups (pipeline neighbours, context ring, the alltoall dispatcher's ep peers),
// fewer channels for peers across the network. NCCL ≥ 2.22 connects only what is used
// (NCCL_RUNTIME_CONNECT); NVLS buffers are not counted (Megatron's MoE README sets
// NCCL_NVLS_ENABLE=0 to save them).
double nccl_buffer_bytes(const core::JobSpec& job, std::int32_t stage);

// DeepEP's buffer as Megatron-Core's fused_a2a.get_buffer sizes it for `ranks` (tp·ep) ranks
// and hidden rows of `hidden_bytes` (hidden · max(element size, 2)): the larger of the dispatch
// and combine configs' NVLink and RDMA size hints (deep_ep/buffer.py default configs, 20 SMs =
// 10 channels; csrc/config.hpp get_nvl_buffer_size_hint / get_rdma_buffer_size_hint), plus the
// 32 MiB workspace (csrc/kernels/configs.cuh NUM_WORKSPACE_BYTES).
double deepep_buffer_bytes(double hidden_bytes, std::int64_t ranks);

} // namespace trident::simulator
