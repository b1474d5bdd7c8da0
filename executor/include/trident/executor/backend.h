#pragma once
// Which backend `trident run` trains on, and what the CUDA backend runs. Pure functions of the
// request, the build and the machine, so the CPU tests cover every refusal.
#include "trident/core/job.h"

#include <string>

namespace trident::executor {

enum class Backend { cpu, cuda };

// `requested` is "auto", "cpu" or "cuda"; "auto" means cuda when this build has the CUDA
// backend and a GPU is visible, cpu otherwise. Throws SpecError("--backend", reason) for an
// unknown name and for cuda without the CUDA build or without a visible GPU.
Backend choose_backend(const std::string& requested, bool cuda_built, int visible_devices);

// The checks that say what the CUDA backend cannot run yet (on top of require_supported);
// throws SpecError naming the field.
void require_supported_on_cuda(const core::JobSpec& job);

} // namespace trident::executor
