// Debug dump of the forward pass's intermediate tensors, for locating where trine and another
// runtime (llama.cpp's cb_eval, tests/model/ref_dumper) first depart on the same prompt.
//
// TRINE_DUMP_TENSORS=PREFIX turns it on: the first forward pass of the process (the prompt's
// first n_batch chunk) writes each named point as raw little-endian fp32, row-major
// (n_tokens rows), to PREFIX<NNNN>_<name>.bin, and one line "NNNN name n_tokens row_len" per
// tensor to PREFIX index.txt. Names follow llama.cpp's graph names (attn_norm-L, Qcur-L, ...,
// l_out-L, result_norm, result_output) so the two dumps pair up by name.
// Off (the variable unset), each point costs one load of a cached flag.
#pragma once

#include <cstdint>

namespace trine {

// Whether the current forward pass dumps (TRINE_DUMP_TENSORS set and this is the first pass).
bool TensorDumpActive();
// Called once per forward pass by the driver: the first call arms the dump, later ones disarm it.
void TensorDumpBeginPass();
// Inside a team region: one thread writes `rows` x `row_len` floats under name (with "-layer"
// appended when layer >= 0), then the team syncs (the next step may overwrite `data`).
void TensorDumpTeam(const char* name, int layer, const float* data, int64_t rows, int64_t row_len);

}  // namespace trine
