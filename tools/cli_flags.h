// optimize-net's command line: the flags, their parsing and every check that needs no model. A
// usage error is found here, before any file is read or any work is done.
//
//   std::variant<Flags, int> parsed = ParseCommandLine(argc, argv, std::cout, std::cerr);
//   if (const int* exit_code = std::get_if<int>(&parsed)) return *exit_code;
//
// Separate from the tool's main so that the command-line fuzzer (fuzz/) drives the same code.
#ifndef MEMONGER_TOOLS_CLI_FLAGS_H_
#define MEMONGER_TOOLS_CLI_FLAGS_H_

#include <cstdint>
#include <ostream>
#include <string>
#include <variant>
#include <vector>

#include "absl/status/status.h"

#include "graph/shape_inference.h"
#include "graph/symbol_box.h"
#include "memonger/device_bytes.h"
#include "util/file_io.h"
#include "util/limits.h"

namespace memonger::tools {

inline constexpr int kExitOk = 0;
inline constexpr int kExitFailed = 1;
inline constexpr int kExitUsage = 2;
inline constexpr int kExitOverBudget = 3;

struct Flags {
  std::string model;
  std::string workload;                 // instead of a model file
  std::vector<std::string> compare;     // what-if: KEY=V1,V2,... over the workload
  std::vector<std::string> variants;    // what-if: KEY=V,KEY=V (one variant each)
  std::vector<std::string> store_fp16;  // values kept in float16 between uses
  std::vector<std::string> input_shapes;
  std::vector<std::string> input_types;
  std::vector<std::string> dims;
  std::string format = "text";
  std::string planner = "auto";
  std::string order = "given";
  std::string execution;  // empty: the net's hint, else serial
  std::string mode = "inference";
  std::vector<std::string> losses;
  std::vector<std::string> dont_share;
  std::vector<std::string> heads;
  bool share_activations = false;
  bool share_all_activations = false;
  std::string namescope;
  std::vector<std::string> param_grads;
  std::vector<std::string> static_names;
  bool recycle_inputs = false;
  bool size_blind = false;
  bool insert_free = false;
  bool caffe2_bugs = false;  // Caffe2's memonger exactly (memonger/caffe2_exact.h)
  int64_t alignment = 256;
  double time_limit = 2;
  int threads = 1;  // --threads (default: every core)
  std::string execute = "none";
  bool verify = false;
  std::string outputs_out;
  std::string inputs;        // --inputs DIR|FILE.npz|FILE.npy: the graph inputs' data
  std::string expect;        // --expect DIR|FILE.npz: reference outputs
  double tolerance = 1e-4;   // --tolerance: the largest relative error --expect accepts
  bool seed_missing = false; // --seed-missing: seed weights the model holds no data for
  uint64_t seed = 0;
  bool plan_static = false;
  bool views = true;     // --no-views: view ops copy their input
  bool in_place = true;  // --no-in-place: no output takes a dying input's bytes
  int64_t budget = -1;  // -1: none, else device bytes (memonger/device_bytes.h)
  Optimizer optimizer = Optimizer::kNone;  // --optimizer: its state counts in device bytes
  std::string fit;      // a dim symbol or workload key: the largest value that fits --budget
  std::string recompute = "none";  // none, sqrt, auto: rerun forward ops in the backward pass
  // --update-in-backward LR: SGD applied as each gradient completes (graph/update_in_backward.h);
  // 0: none.
  double update_in_backward = 0;
  bool cuda_graphs = false;        // report the graphable sections (also with --execute cuda)
  std::string plan_json;
  std::string plan_csv;
  std::string plan_in;
  // With --plan-in: the flags given that the saved plan decides instead (its planner, order,
  // alignment), for a note: ignoring them without a word would mislead.
  std::vector<std::string> plan_in_overrides;
  std::string net_out;
  std::string html;
  bool ascii = false;
  int top = 10;
  bool timings = false;  // the wall time of each phase, on stderr
  util::InputLimits limits;
  // --dim, --input-shape and --input-type, parsed (each symbol and input once).
  graph::ShapeBindings bindings;
  // --dim SYMBOL=LO..HI: plan once for the whole box (docs/symbolic-plans.md).
  graph::SymbolBox ranges;
};

// The first flag given that needs a plan with byte offsets ("--plan-json", "--execute", ...), or
// "" when none does: a size-blind plan and a --caffe2-bugs answer have no offsets.
std::string FlagNeedingOffsets(const Flags& flags);

// Declares the output files the flags name (--plan-json, --plan-csv, --html, --net-out) in
// `outputs`: each is checked (writable directory, not a directory, not named twice, not the
// MODEL or --plan-in file).
absl::Status DeclareOutputs(const Flags& flags, util::OutputFiles& outputs);

// The flags, or the exit code to end with: 0 after --help or --version (printed to `out`), 2 after
// a usage error (printed to `err`, one line starting "optimize-net: ").
std::variant<Flags, int> ParseCommandLine(int argc, const char* const* argv, std::ostream& out,
                                          std::ostream& err);

}  // namespace memonger::tools

#endif  // MEMONGER_TOOLS_CLI_FLAGS_H_
