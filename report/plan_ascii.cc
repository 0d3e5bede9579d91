#include "report/plan_ascii.h"

#include <algorithm>
#include <map>
#include <tuple>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "util/bytes.h"

namespace memonger {
namespace {

constexpr char kLetters[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";
constexpr int kNumLetters = sizeof(kLetters) - 1;
constexpr int kLegendEntries = 24;

struct Block {
  int first_step;
  int last_step;
  int64_t offset;
  int64_t bytes;
  graph::ValueId first_member;
};

}  // namespace

std::string PlanToAscii(const graph::Graph& graph, const Plan& plan, int width, int height) {
  width = std::max(width, 8);
  height = std::max(height, 2);
  std::map<std::tuple<int32_t, int, int>, Block> by_key;
  for (graph::ValueId v = 0; v < graph.num_values(); ++v) {
    if (plan.buffer_of_value[v] < 0) continue;
    const Lifetime& l = plan.lifetime[v];
    const auto& type = graph.value(v).type;
    const int64_t bytes = type ? graph::ByteSize(*type, "").value_or(0) : 0;
    auto key = std::make_tuple(plan.buffer_of_value[v], l.first_step, l.last_step);
    auto [it, fresh] =
        by_key.emplace(key, Block{l.first_step, l.last_step, plan.offset_of_value[v], bytes, v});
    if (!fresh) it->second.bytes = std::max(it->second.bytes, bytes);
  }
  std::vector<Block> blocks;
  for (const auto& [key, b] : by_key) blocks.push_back(b);
  std::sort(blocks.begin(), blocks.end(),
            [](const Block& a, const Block& b) { return a.first_member < b.first_member; });

  const int steps = std::max<int>(1, static_cast<int>(plan.steps.size()));
  const int columns = std::min(width, steps);
  const int64_t top = std::max<int64_t>(1, plan.arena_bytes);
  // coverage[row][column][block] would be large; keep the best block per cell instead.
  std::vector<std::string> grid(height, std::string(columns, ' '));
  std::vector<std::vector<double>> best(height, std::vector<double>(columns, 0.0));
  for (size_t k = 0; k < blocks.size(); ++k) {
    const Block& b = blocks[k];
    const char letter = k < static_cast<size_t>(kNumLetters) ? kLetters[k] : '#';
    const int c0 = static_cast<int>(static_cast<int64_t>(b.first_step) * columns / steps);
    const int c1 = static_cast<int>(static_cast<int64_t>(b.last_step) * columns / steps);
    for (int row = 0; row < height; ++row) {
      // Row 0 is the top of the arena.
      const double lo = static_cast<double>(top) * (height - 1 - row) / height;
      const double hi = static_cast<double>(top) * (height - row) / height;
      const double overlap = std::min<double>(hi, b.offset + b.bytes) - std::max<double>(lo, b.offset);
      if (overlap <= 0) continue;
      for (int c = c0; c <= c1 && c < columns; ++c) {
        if (overlap > best[row][c]) {
          best[row][c] = overlap;
          grid[row][c] = letter;
        }
      }
    }
  }
  std::string out;
  const std::string top_label = util::FormatBytes(plan.arena_bytes);
  const int label_width = std::max<int>(10, static_cast<int>(top_label.size()));
  for (int row = 0; row < height; ++row) {
    const std::string label = row == 0 ? top_label : "";
    absl::StrAppendFormat(&out, "%*s |%s\n", label_width, label, grid[row]);
  }
  absl::StrAppendFormat(&out, "%*s +%s> step (%d steps)\n", label_width, "0 B",
                        std::string(columns, '-'), steps);
  std::string legend;
  for (size_t k = 0; k < blocks.size() && k < static_cast<size_t>(kLegendEntries); ++k) {
    absl::StrAppend(&legend, k == 0 ? "" : "  ", std::string(1, kLetters[k]), " ",
                    graph.value(blocks[k].first_member).DisplayName(), " (",
                    util::FormatBytes(blocks[k].bytes), ")");
  }
  if (blocks.size() > static_cast<size_t>(kLegendEntries)) {
    absl::StrAppend(&legend, "  ... ", blocks.size() - kLegendEntries, " more");
  }
  absl::StrAppend(&out, legend, "\n");
  return out;
}

}  // namespace memonger
