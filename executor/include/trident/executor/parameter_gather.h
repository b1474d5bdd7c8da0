#pragma once
// Reassembles the full model from every rank's shards on world rank 0 — undoing tensor,
// pipeline and expert parallelism — so two layouts' parameters can be compared (and, later,
// saved in a layout-independent form).
#include "trident/executor/gpt_chunk.h"

#include <map>
#include <string>

namespace trident::executor {

// Collective over MPI_COMM_WORLD; the full tensors by name on rank 0, empty elsewhere.
std::map<std::string, Vec> gather_parameters(const ParameterStore& store);

// `TRIDENT-PARAMS 1` binary: for each tensor by name, its name, length and fp32 values.
std::string serialize_parameters(const std::map<std::string, Vec>& parameters);

} // namespace trident::executor
