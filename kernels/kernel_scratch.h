// Scratch memory a run's CPU kernels keep from one op to the next: the matrix product's packing
// buffers and Conv's column matrix, per worker and per use. Without it each call allocated its
// own, and buffers of hundreds of kilobytes go back to the kernel when freed (glibc maps them
// anew), so every call paid a page fault per 4 KiB touched: a tenth of a ResNet forward.
//
//   KernelScratch scratch(threads);              // the executor, once per run
//   args.scratch = &scratch;
//   ScratchFloats col(args.scratch, worker, ScratchUse::kConvColumns, floats);  // a kernel
//   float* p = col.data();                       // contents: whatever the last user left
//
// Worker w's buffers are used only by the thread that acts as worker w of the kernel now
// running (kernel_threads.h numbers them 0..threads-1; the caller is worker 0), so no locking:
// a kernel nesting one of its workers' calls into another (Conv's chunks into GemmCpu) passes
// that worker's index on. Buffers only grow, to the largest any op asked for, and are freed
// with the scratch (outside the arena: the plan gives these ops no workspace). Where no scratch
// is given (a kernel called outside the executor) or the worker is beyond it, ScratchFloats
// allocates memory of its own, as before.
#ifndef MEMONGER_KERNELS_KERNEL_SCRATCH_H_
#define MEMONGER_KERNELS_KERNEL_SCRATCH_H_

#include <array>
#include <cstddef>
#include <memory>
#include <vector>

namespace memonger::alloc {

// What a buffer is for: one buffer per use and worker, so uses nested in one call (Conv's
// columns and the product's packs) never share one.
enum class ScratchUse { kConvColumns, kGemmA, kGemmB, kGemmTile, kCount };

class KernelScratch {
 public:
  explicit KernelScratch(int workers) : buffers_(static_cast<size_t>(workers > 0 ? workers : 1)) {}
  KernelScratch(const KernelScratch&) = delete;
  KernelScratch& operator=(const KernelScratch&) = delete;

  int workers() const { return static_cast<int>(buffers_.size()); }

  // Worker `worker`'s buffer for `use`, with room for at least `floats` floats.
  // REQUIRES: 0 <= worker < workers().
  float* Floats(int worker, ScratchUse use, size_t floats) {
    Buffer& buffer = buffers_[static_cast<size_t>(worker)][static_cast<size_t>(use)];
    if (buffer.data == nullptr || buffer.size < floats) {
      buffer.size = floats > 0 ? floats : 1;
      buffer.data.reset(new float[buffer.size]);
    }
    return buffer.data.get();
  }

 private:
  struct Buffer {
    std::unique_ptr<float[]> data;
    size_t size = 0;
  };
  std::vector<std::array<Buffer, static_cast<size_t>(ScratchUse::kCount)>> buffers_;
};

// A kernel's buffer of `floats` floats: worker `worker`'s of `scratch`, or its own when scratch
// is null or has no such worker.
class ScratchFloats {
 public:
  ScratchFloats(KernelScratch* scratch, int worker, ScratchUse use, size_t floats) {
    if (scratch != nullptr && worker >= 0 && worker < scratch->workers()) {
      data_ = scratch->Floats(worker, use, floats);
    } else {
      own_.reset(new float[floats > 0 ? floats : 1]);
      data_ = own_.get();
    }
  }
  float* data() const { return data_; }

 private:
  std::unique_ptr<float[]> own_;
  float* data_ = nullptr;
};

}  // namespace memonger::alloc

#endif  // MEMONGER_KERNELS_KERNEL_SCRATCH_H_
