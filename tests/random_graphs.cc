#include "tests/random_graphs.h"

#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "util/check.h"

namespace memonger::testing {
namespace {

// Deterministic everywhere: mt19937_64's sequence is fixed by the standard, and the helpers
// below avoid the library-specific distributions.
class Rng {
 public:
  explicit Rng(uint64_t seed) : engine_(seed) {}
  int Uniform(int n) { return static_cast<int>(engine_() % static_cast<uint64_t>(n)); }
  double Unit() { return static_cast<double>(engine_() >> 11) * 0x1.0p-53; }
  bool Bernoulli(double p) { return Unit() < p; }

 private:
  std::mt19937_64 engine_;
};

graph::Device DeviceNumber(int d) {
  return d == 0 ? graph::Device{} : graph::Device{1, static_cast<int16_t>(d - 1)};
}

graph::TensorType Bytes(int64_t bytes) { return {graph::DataType::kUInt8, {bytes}}; }

}  // namespace

graph::Graph NasNetLikeGraph(uint64_t seed, int cells, int blocks) {
  Rng rng(seed);
  graph::GraphBuilder b(absl::StrCat("nasnet_like_", seed));
  b.AddExternalInput("data");
  std::map<std::string, int64_t> bytes;
  auto size = [&]() { return int64_t{1} << (6 + rng.Uniform(11)); };  // 64 B .. 64 KiB
  bytes["data"] = size();
  auto op = [&](const std::string& out, std::vector<std::string> in, int64_t out_bytes) {
    graph::OpSpec spec;
    spec.type = "Rand";
    spec.name = out;
    spec.inputs = std::move(in);
    spec.outputs = {out};
    b.AddOp(std::move(spec));
    bytes[out] = out_bytes;
  };
  std::string prev2 = "data", prev1 = "data";
  for (int c = 0; c < cells; ++c) {
    const int64_t cell_bytes = size();
    std::vector<std::string> outs;
    std::vector<bool> used(blocks, false);
    for (int k = 0; k < blocks; ++k) {
      std::vector<std::string> branch;
      for (int side = 0; side < 2; ++side) {
        const int pick = rng.Uniform(2 + k);
        const std::string in = pick == 0 ? prev2 : pick == 1 ? prev1 : outs[pick - 2];
        if (pick >= 2) used[pick - 2] = true;
        const std::string name = absl::StrCat("c", c, "_b", k, "_", side);
        op(name, {in}, size());
        branch.push_back(name);
      }
      const std::string out = absl::StrCat("c", c, "_b", k);
      op(out, branch, cell_bytes);
      outs.push_back(out);
    }
    std::vector<std::string> loose;
    for (int k = 0; k < blocks; ++k) {
      if (!used[k]) loose.push_back(outs[k]);
    }
    const std::string cell = absl::StrCat("c", c);
    op(cell, loose, cell_bytes * static_cast<int64_t>(loose.size()));
    prev2 = prev1;
    prev1 = cell;
  }
  b.AddExternalOutput(prev1);
  absl::StatusOr<graph::Graph> g = std::move(b).Build();
  MG_CHECK(g.ok());
  AssignByteTypes(*g, bytes, 1);
  return *std::move(g);
}

graph::Graph RandomGraph(uint64_t seed, const RandomGraphOptions& options) {
  Rng rng(seed);
  graph::GraphBuilder b(absl::StrCat("random_", seed));

  // Names readable by later ops, and the device that produced each (-1: a graph input).
  std::vector<std::string> pool;
  std::vector<int> pool_device;
  std::map<std::string, size_t> pool_index;
  auto add_to_pool = [&](const std::string& name, int device) {
    auto [it, fresh] = pool_index.emplace(name, pool.size());
    if (!fresh) {
      pool_device[it->second] = device;
      return;
    }
    pool.push_back(name);
    pool_device.push_back(device);
  };
  for (int i = 0; i < options.num_inputs; ++i) {
    b.AddExternalInput(absl::StrCat("in", i));
    add_to_pool(absl::StrCat("in", i), -1);
  }
  for (int i = 0; i < options.num_params; ++i) {
    b.AddExternalInput(absl::StrCat("w", i));
    b.DeclareRole(absl::StrCat("w", i), graph::Role::kParam);
  }
  if (pool.empty()) {  // every op needs something to read
    b.AddExternalInput("in0");
    add_to_pool("in0", -1);
  }

  // Mostly recent values (chains), sometimes any (long lifetimes, joins of distant branches).
  auto pick = [&]() -> int {
    const int n = static_cast<int>(pool.size());
    if (rng.Bernoulli(0.6)) return n - 1 - rng.Uniform(std::min(n, 4));
    return rng.Uniform(n);
  };

  int next_name = 0;
  std::string last_output;
  for (int i = 0; i < options.num_ops; ++i) {
    graph::OpSpec op;
    op.name = absl::StrCat("op", i);
    const int device = options.num_devices > 1 ? rng.Uniform(options.num_devices) : 0;
    op.device = DeviceNumber(device);
    if (rng.Bernoulli(options.view_probability)) {
      op.type = "Identity";
      op.view = true;
      op.inputs.push_back(pool[pick()]);
      op.outputs.push_back(absl::StrCat("v", next_name++));
      add_to_pool(op.outputs[0], device);
      last_output = op.outputs[0];
      b.AddOp(std::move(op));
      continue;
    }
    op.type = "Rand";
    std::vector<int> picked;
    const int num_inputs = 1 + rng.Uniform(std::max(options.max_op_inputs, 1));
    for (int k = 0; k < num_inputs; ++k) {
      picked.push_back(pick());
      op.inputs.push_back(pool[picked.back()]);
    }
    if (options.num_params > 0 && rng.Bernoulli(options.param_input_probability)) {
      op.inputs.push_back(absl::StrCat("w", rng.Uniform(options.num_params)));
    }
    if (rng.Bernoulli(options.control_input_probability)) {
      op.control_inputs.push_back(pool[pick()]);
    }
    const int num_outputs = rng.Bernoulli(options.multi_output_probability)
                                ? 2 + rng.Uniform(std::max(options.max_op_outputs - 1, 1))
                                : 1;
    std::string inplace;
    if (rng.Bernoulli(options.inplace_probability)) {
      // Overwrite the first input. Across devices only a value this op's device produced.
      const int source = picked.front();
      if (options.num_devices <= 1) {
        inplace = pool[source];
      } else if (pool_device[source] >= 0) {
        inplace = pool[source];
        op.device = DeviceNumber(pool_device[source]);
      }
    }
    const int op_device = op.device == graph::Device{} ? 0 : op.device.id + 1;
    for (int k = 0; k < num_outputs; ++k) {
      op.outputs.push_back(k == 0 && !inplace.empty() ? inplace
                                                       : absl::StrCat("v", next_name++));
    }
    for (const std::string& out : op.outputs) add_to_pool(out, op_device);
    last_output = op.outputs.front();
    b.AddOp(std::move(op));
  }

  if (!last_output.empty()) b.AddExternalOutput(last_output);
  for (int k = 0; k < options.num_outputs && !pool.empty(); ++k) {
    b.AddExternalOutput(pool[rng.Uniform(static_cast<int>(pool.size()))]);
  }

  absl::StatusOr<graph::Graph> built = std::move(b).Build();
  MG_CHECK(built.ok());
  graph::Graph g = *std::move(built);

  const double log_max = std::log(static_cast<double>(std::max<int64_t>(options.max_bytes, 1)));
  for (graph::ValueId id = 0; id < g.num_values(); ++id) {
    graph::Value& v = g.mutable_value(id);
    if (v.inplace_of != graph::kNone) {
      v.type = g.value(v.inplace_of).type;
      continue;
    }
    if (v.producer != graph::kNone && g.op(v.producer).view) {
      v.type = g.value(g.op(v.producer).inputs[0]).type;
      continue;
    }
    if (rng.Bernoulli(options.zero_bytes_probability)) {
      v.type = Bytes(0);
      continue;
    }
    v.type = Bytes(std::max<int64_t>(1, static_cast<int64_t>(std::exp(rng.Unit() * log_max))));
  }
  return g;
}

void AssignByteTypes(graph::Graph& graph, const std::map<std::string, int64_t>& bytes_by_name,
                     int64_t default_bytes) {
  for (graph::ValueId id = 0; id < graph.num_values(); ++id) {
    graph::Value& v = graph.mutable_value(id);
    if (v.inplace_of != graph::kNone) {
      v.type = graph.value(v.inplace_of).type;
      continue;
    }
    auto it = bytes_by_name.find(v.name);
    v.type = Bytes(it != bytes_by_name.end() ? it->second : default_bytes);
  }
}

}  // namespace memonger::testing
