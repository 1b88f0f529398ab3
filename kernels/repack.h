// Load-time repacking of weights into the layouts the kernels read. Ternary rows go to TQ2_0
// blocks where the kernel needs them: TQ1_0 (base-3 trits) converts losslessly, keeping each
// block's fp16 scale; I2_S (bitnet.cpp) gets d = 1 in every block and keeps its fp32 per-tensor
// scale in WeightView::tensor_scale. On AVX-512 and AVX2 the rows (and Q4_0 / Q4_K / Q6_K rows)
// are then interleaved 16 at a time (x16);
// with VBMI, TQ1_0 is interleaved as it is, without the TQ2_0 step (22 % fewer bytes). For the
// lookup-table kernels (AVX2, NEON; TRINE_TERNARY=lut) TQ2_0 rows get their own 16-row layout.
// The file's pages are never touched again, so repacked memory replaces, not duplicates, them.
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "core/page_buffer.h"
#include "core/status.h"
#include "kernels.h"
#include "ref/matmul_ref.h"

namespace trine::kernels {

// True when `w` must be repacked to TQ2_0 before a kernel can read its plain rows (TQ1_0, I2_S).
// A TQ1_0 tensor that gets the x16 layout (WantsX16) skips that step.
bool NeedsTernaryRepack(const WeightView& w);

// Writes the TQ2_0 form of `src` into *storage and points *dst at it (type kTQ2_0). Fails with
// kUnsupported for I2_S rows that are not a multiple of 256 elements.
Status RepackToTq2(const WeightView& src, PageBuffer* storage, WeightView* dst);

// True when the kernel `isa` / `variant` selects for `type` reads the 16-row interleaved layout
// (WeightView::interleave = 16): the AVX-512 and AVX2 TQ2_0 int8-dot, Q4_0, Q4_K and Q6_K kernels,
// and TQ1_0 where Tq1X16Enabled() (AVX-512 VBMI).
bool WantsX16(TypeId type, Isa isa, TernaryVariant variant);

// TQ1_0 is read in place (x16, kernels/x86/tq1_x16.h) rather than repacked to TQ2_0: the build
// has the AVX-512 kernels, the CPU has AVX-512 VBMI (the decode's vpermi2b) and TRINE_TQ1_X16 is
// not 0 (set it to measure the TQ2_0 repack instead).
bool Tq1X16Enabled();

// Bytes of the x16 interleaved form of `w` (0 when it has none).
size_t X16Bytes(const WeightView& w);

// Writes the x16 interleaved form (WeightView::interleave) of the TQ1_0, TQ2_0, Q4_0 or Q4_K weight
// `src` into *storage and points *dst at it: into *storage as it is when it holds exactly
// X16Bytes(src) bytes (a PageArena slice), else into a new PageBuffer.
// With `step_done`, the groups go in steps of about 16 MiB of `src` and step_done(offset, n) is
// called (on the calling thread) once a step's source bytes [offset, offset + n) of src.data have
// all been read: a caller copying from a file mapping releases those pages there, so the resident
// set grows by one step over the copy instead of by the whole source (the ~0.27 GB LM head).
using X16StepDone = std::function<void(size_t offset, size_t n)>;
Status InterleaveX16(const WeightView& src, PageBuffer* storage, WeightView* dst,
                     const X16StepDone& step_done = nullptr);

// The same layout built group by group from rows a caller produces: fill(row0, n, rows) writes the
// plain rows row0 .. row0 + n - 1 (n <= 16, shaped as `shape`: type, rows, cols, row_bytes) into
// `rows`; called from the OpenMP threads, one group at a time. For a requantization that would
// otherwise write the whole plain tensor first (Model::SetOutputType). Same bytes as InterleaveX16
// of those rows.
using X16RowSource = std::function<void(int64_t row0, int n_rows, uint8_t* rows)>;
Status InterleaveX16Rows(const WeightView& shape, const X16RowSource& fill, PageBuffer* storage,
                         WeightView* dst);

// True when the kernel `isa` / `variant` selects for `type` reads the lookup-table layout
// (WeightView::interleave = kInterleaveLut): the lookup variant where the ISA has a tq2_lut kernel
// (AVX2, NEON), for TQ2_0 rows (TQ1_0 and I2_S once repacked to TQ2_0).
bool WantsLutLayout(TypeId type, Isa isa, TernaryVariant variant);

// Bytes of the lookup-table layout of `w` (0 when it has none: plain TQ2_0 rows only).
size_t LutBytes(const WeightView& w);

// Writes the lookup-table layout of the plain TQ2_0 weight `src` into *storage (used as it is when
// it holds exactly LutBytes(src) bytes, else a new PageBuffer) and points *dst at it.
Status InterleaveLut(const WeightView& src, PageBuffer* storage, WeightView* dst);

}  // namespace trine::kernels
