#include "kernels/fp16_census.h"

#include <cmath>
#include <cstring>
#include <utility>

#include "absl/strings/str_cat.h"
#include "kernels/float16.h"

namespace memonger::alloc {
namespace {

// Classifies one float32 (the Cast kernel's intermediate) by its float16 rounding.
void CountOne(float f, Fp16Counts& counts) {
  if (!std::isfinite(f)) return;
  const uint16_t h = FloatToHalfBits(f);
  const uint16_t exponent = (h >> 10) & 0x1fu;
  const uint16_t mantissa = h & 0x3ffu;
  if (exponent == 0x1f) {
    ++counts.overflowed;
  } else if (exponent == 0 && mantissa == 0) {
    if (f != 0.0f) ++counts.flushed_to_zero;
  } else if (exponent == 0) {
    ++counts.subnormal;
  }
}

}  // namespace

Fp16Counts CountFp16Rounding(graph::DataType from, const std::byte* data, int64_t count) {
  Fp16Counts counts;
  counts.elements = count;
  for (int64_t i = 0; i < count; ++i) {
    switch (from) {
      case graph::DataType::kFloat32: {
        float f;
        std::memcpy(&f, data + i * 4, 4);
        CountOne(f, counts);
        break;
      }
      case graph::DataType::kBFloat16: {
        uint16_t b;
        std::memcpy(&b, data + i * 2, 2);
        CountOne(BFloat16BitsToFloat(b), counts);
        break;
      }
      case graph::DataType::kFloat64: {
        double d;
        std::memcpy(&d, data + i * 8, 8);
        // The Cast kernel rounds float64 through float32 (a finite double beyond float32's
        // range becomes infinity there, and is counted as overflowed).
        if (std::isfinite(d)) {
          const float f = static_cast<float>(d);
          if (std::isinf(f)) {
            ++counts.overflowed;
          } else {
            CountOne(f, counts);
            if (f == 0.0f && d != 0.0) ++counts.flushed_to_zero;
          }
        }
        break;
      }
      default: return counts;
    }
  }
  return counts;
}

void Fp16Census::Record(graph::ValueId value, graph::DataType from, const Fp16Counts& counts) {
  Fp16CensusEntry* entry = nullptr;
  for (Fp16CensusEntry& e : entries_) {
    if (e.value == value) entry = &e;
  }
  if (entry == nullptr) {
    Fp16CensusEntry e;
    e.value = value;
    e.value_name = graph_->value(value).DisplayName();
    e.from = from;
    entries_.push_back(std::move(e));
    entry = &entries_.back();
  }
  ++entry->casts;
  entry->counts.elements += counts.elements;
  entry->counts.overflowed += counts.overflowed;
  entry->counts.flushed_to_zero += counts.flushed_to_zero;
  entry->counts.subnormal += counts.subnormal;
}

std::string Fp16Census::ToText() const {
  std::string text;
  for (const Fp16CensusEntry& e : entries_) {
    absl::StrAppend(&text, "fp16 census     '", e.value_name, "': ", e.counts.overflowed, " of ",
                    e.counts.elements, " overflowed, ", e.counts.flushed_to_zero,
                    " flushed to zero, ", e.counts.subnormal, " subnormal",
                    e.casts > 1 ? absl::StrCat(" (", e.casts, " casts)") : "", "\n");
  }
  return text;
}

KernelTable WithFp16Census(KernelTable table, Fp16Census* census) {
  const Kernel* cast = table.Find("Cast");
  if (cast == nullptr) return table;
  Kernel inner = *cast;
  return std::move(table).With(
      "Cast", [inner = std::move(inner), census](const KernelArgs& args) -> absl::Status {
        const bool counted = args.op != nullptr && args.device == Device::kHost &&
                             args.inputs.size() == 1 && args.outputs.size() == 1 &&
                             args.input_types[0] != nullptr && args.output_types[0] != nullptr &&
                             args.output_types[0]->dtype == graph::DataType::kFloat16 &&
                             (args.input_types[0]->dtype == graph::DataType::kFloat32 ||
                              args.input_types[0]->dtype == graph::DataType::kBFloat16 ||
                              args.input_types[0]->dtype == graph::DataType::kFloat64);
        Fp16Counts counts;
        if (counted) {
          int64_t n = 1;
          for (int64_t d : args.input_types[0]->dims) n *= d;
          counts = CountFp16Rounding(args.input_types[0]->dtype, args.inputs[0], n);
        }
        const absl::Status status = inner(args);
        if (status.ok() && counted) {
          census->Record(args.op->inputs[0], args.input_types[0]->dtype, counts);
        }
        return status;
      });
}

}  // namespace memonger::alloc
