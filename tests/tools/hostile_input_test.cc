// The hostile-input suite: optimize-net on inputs built to break it. Each case is a row of the
// table below: the files it writes, the command line, and what must happen. For every case:
// no signal, the expected exit code (1 bad input, 2 usage, 0 where the input is odd but
// valid), stderr one line "optimize-net: ..." naming the file, flag, value or op and what is
// wrong (the expected substring), no output file left behind, resident memory under a cap.
//
// The tool runs as a child with a CPU-time limit (a hang is killed and fails the case) and,
// outside sanitizer builds, an address-space limit (a runaway allocation fails the case with
// a signal or bad_alloc instead of exhausting the machine).
//
// New bugs found by hand or by fuzz/ become new rows.
#include <fcntl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cctype>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <set>
#include <string>
#include <vector>

#include <google/protobuf/text_format.h>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "gtest/gtest.h"
#include "onnx/onnx_pb.h"
#include "proto/memonger.pb.h"
#include "tests/test_support.h"

#if defined(__SANITIZE_ADDRESS__)
#define MEMONGER_HOSTILE_UNDER_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define MEMONGER_HOSTILE_UNDER_ASAN 1
#endif
#endif

namespace memonger::testing {
namespace {

constexpr int kOk = 0;
constexpr int kBad = 1;
constexpr int kUsage = 2;

struct File {
  std::string name;
  std::string contents;
};

struct HostileCase {
  std::string name;
  std::vector<File> files;
  std::string args;  // split on spaces; "{dir}" is the case's directory
  int exit_code;
  std::string message;  // a substring of the one stderr line ("" for exit 0)
  std::vector<std::string> must_not_exist = {};  // outputs that must not be left behind
  std::function<void(const std::string& dir)> setup = nullptr;  // symlinks, special files
  int64_t rss_cap_mb = 512;
};

// ---------------------------------------------------------------------------------------------
// Inputs.

std::string Onnx(const std::string& text) {
  onnx::ModelProto model;
  if (!google::protobuf::TextFormat::ParseFromString(text, &model)) {
    ADD_FAILURE() << "bad ONNX text in the table: " << text;
  }
  return model.SerializeAsString();
}

std::string OnnxTensor(const std::string& name, int elem, const std::vector<std::string>& dims) {
  std::string d;
  for (const std::string& x : dims) {
    d += (!x.empty() && std::isdigit(static_cast<unsigned char>(x[0])))
             ? absl::StrCat(" dim { dim_value: ", x, " }")
             : absl::StrCat(" dim { dim_param: \"", x, "\" }");
  }
  return absl::StrCat("{ name: \"", name, "\" type { tensor_type { elem_type: ", elem,
                      " shape {", d, " } } } }");
}

// A model of one graph: nodes, inputs, outputs (a bare name declares nothing), initializers.
std::string OnnxModel(const std::string& nodes, const std::vector<std::string>& inputs,
                      const std::vector<std::string>& outputs, const std::string& inits = "",
                      int opset = 17) {
  std::string g = absl::StrCat("name: \"g\" ", nodes, " ", inits);
  for (const std::string& i : inputs) absl::StrAppend(&g, " input ", i);
  for (const std::string& o : outputs) {
    absl::StrAppend(&g, " output ", absl::StartsWith(o, "{") ? o : absl::StrCat("{ name: \"", o, "\" }"));
  }
  return Onnx(absl::StrCat("ir_version: 8 opset_import { domain: \"\" version: ", opset,
                           " } graph { ", g, " }"));
}

std::string Conv(const std::string& attrs, int in_channels, int out_channels, int w_in) {
  std::string w = absl::StrCat("initializer { name: \"w\" data_type: 1 dims: ", out_channels,
                               " dims: ", w_in, " dims: 3 dims: 3");
  for (int i = 0; i < out_channels * w_in * 9; ++i) w += " float_data: 0";
  w += " }";
  return OnnxModel(absl::StrCat("node { op_type: \"Conv\" input: \"x\" input: \"w\" output: \"y\" ",
                                attrs, " }"),
                   {OnnxTensor("x", 1, {"1", absl::StrCat(in_channels), "8", "8"})}, {"y"}, w);
}

std::string OneOp(const std::string& node, const std::vector<std::string>& inputs,
                  const std::string& inits = "") {
  return OnnxModel(absl::StrCat("node { ", node, " }"), inputs, {"y"}, inits);
}

// A small valid NetDef: two Relus on a [4, N] float input.
constexpr const char* kTinyNet = R"pb(
name: "tiny"
external_input: "x"
external_output: "y"
op { name: "r1" type: "Relu" input: "x" output: "h" }
op { name: "r2" type: "Relu" input: "h" output: "y" }
value_info { name: "x" dtype: FLOAT has_shape: true dim { size: 4 } dim { symbol: "N" } }
)pb";

std::string Net(const std::string& ops, const std::string& decls,
                const std::string& inputs = "external_input: \"x\"\n") {
  return absl::StrCat("name: \"n\"\n", inputs, ops, decls);
}

std::string NestedText(int depth) {
  std::string s = "name: \"deep\" op { type: \"Relu\" input: \"x\" output: \"y\" ";
  for (int i = 0; i < depth; ++i) s += "arg { name: \"a\" n { op { ";
  for (int i = 0; i < depth; ++i) s += "} } } ";
  return s + "}";
}

// A binary NetDef whose ops nest nets in their arguments `depth` levels deep.
std::string NestedBinary(int depth) {
  proto::NetDef net;
  net.set_name("deep");
  proto::NetDef* level = &net;
  for (int i = 0; i < depth; ++i) {
    proto::OperatorDef* op = level->add_op();
    op->set_type("Relu");
    op->add_input("x");
    op->add_output("y");
    proto::Argument* arg = op->add_arg();
    arg->set_name("body");
    level = arg->mutable_n();
  }
  return net.SerializeAsString();
}

std::string Nested(char open, char close, int depth) {
  return std::string(depth, open) + std::string(depth, close);
}

constexpr const char* kCsvHeader = "id,lower,upper,size\n";

std::string Records(const std::string& records) {
  return absl::StrCat(R"({"schema": "memonger.records/v1", "records": [)", records, "]}");
}

// A plan for kTinyNet at N=8, as the tool writes it (made with --recycle-inputs: y reuses x), with
// `edit` applied to its text.
std::string TinyPlan(const std::string& alignment, const std::string& h_offset,
                     const std::string& h_bytes = "128", const std::string& arena = "") {
  return absl::StrCat(
      R"({"schema": "memonger.plan/v1", "model": "tiny", "planner": "best-fit", "order": "given",
          "execution": "serial", "recycle_inputs": true, "alignment": )",
      alignment, arena.empty() ? "" : absl::StrCat(R"(, "arena_bytes": )", arena),
      R"(, "steps": [{"op": "r1", "op_index": 0}, {"op": "r2", "op_index": 1}],
          "values": [{"name": "x", "offset": 0, "buffer": 0, "bytes": 128},
                     {"name": "h", "offset": )",
      h_offset, R"(, "buffer": 1, "bytes": )", h_bytes, R"(},
                     {"name": "y", "offset": 0, "buffer": 0}]})");
}

void Symlink(const std::string& target, const std::string& link) {
  std::error_code e;
  std::filesystem::remove(link, e);
  std::filesystem::create_symlink(target, link, e);
  ASSERT_FALSE(e) << e.message();
}

void Sparse(const std::string& path, int64_t bytes) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(::ftruncate(fd, bytes), 0);
  ::close(fd);
}

// ---------------------------------------------------------------------------------------------
// The table.

std::vector<HostileCase> Cases() {
  std::vector<HostileCase> c;
  const std::string tiny = kTinyNet;

  // Files that are not files, or not what their extension says: every format.
  for (const std::string ext : {"onnx", "pb", "pbtxt", "json", "csv"}) {
    const std::string m = "m." + ext;
    c.push_back({"missing_" + ext, {}, "{dir}/nosuch." + ext, kBad, "no such file"});
    c.push_back({"directory_" + ext, {}, "{dir}/d." + ext, kBad, "is a directory", {},
                 [ext](const std::string& dir) {
                   std::filesystem::create_directory(dir + "/d." + ext);
                 }});
    c.push_back({"empty_" + ext, {{m, ""}}, "{dir}/" + m, kBad, m});
    c.push_back({"symlink_loop_" + ext, {}, "{dir}/a." + ext, kBad, "a loop of symbolic links", {},
                 [ext](const std::string& dir) {
                   Symlink(dir + "/b." + ext, dir + "/a." + ext);
                   Symlink(dir + "/a." + ext, dir + "/b." + ext);
                 }});
    c.push_back({"dangling_symlink_" + ext, {}, "{dir}/a." + ext, kBad, "no such file", {},
                 [ext](const std::string& dir) { Symlink(dir + "/gone", dir + "/a." + ext); }});
    c.push_back({"dev_zero_" + ext, {}, "{dir}/z." + ext + " --max-input-bytes 4MiB", kBad,
                 "z." + ext, {},
                 [ext](const std::string& dir) { Symlink("/dev/zero", dir + "/z." + ext); }});
    c.push_back({"dev_urandom_" + ext, {}, "{dir}/u." + ext + " --max-input-bytes 4MiB", kBad,
                 "u." + ext, {},
                 [ext](const std::string& dir) { Symlink("/dev/urandom", dir + "/u." + ext); }});
    c.push_back({"sparse_20GiB_" + ext, {}, "{dir}/s." + ext, kBad,
                 "20.00 GiB, more than the input limit of 2.00 GiB", {},
                 [ext](const std::string& dir) { Sparse(dir + "/s." + ext, int64_t{20} << 30); }});
    c.push_back({"over_max_input_bytes_" + ext, {{m, std::string(5000, 'x')}},
                 "{dir}/" + m + " --max-input-bytes 4KiB", kBad,
                 "more than the input limit of 4.00 KiB"});
    c.push_back({"garbage_" + ext, {{m, "\x01\x02garbage\xff\xfe not a model at all"}},
                 "{dir}/" + m, kBad, m});
  }
  c.push_back({"unknown_extension", {{"m.txt", tiny}}, "{dir}/m.txt", kBad,
               "unknown model extension '.txt'"});
  c.push_back({"truncated_onnx",
               {{"m.onnx", OneOp(R"(op_type: "Relu" input: "x" output: "y")",
                                 {OnnxTensor("x", 1, {"4"})})
                               .substr(0, 20)}},
               "{dir}/m.onnx", kBad, "m.onnx"});
  c.push_back({"binary_bytes_in_pbtxt", {{"m.pbtxt", std::string("name: \"x\"\0\0\0", 12)}},
               "{dir}/m.pbtxt", kBad, "binary data"});

  // Nesting built to exhaust the stack.
  c.push_back({"pbtxt_nested_10000", {{"m.pbtxt", NestedText(10000)}}, "{dir}/m.pbtxt", kBad,
               "recursion limit of 64"});
  c.push_back({"pbtxt_nested_65", {{"m.pbtxt", NestedText(65)}}, "{dir}/m.pbtxt", kBad,
               "recursion limit"});
  c.push_back({"pb_nested_2000", {{"m.pb", NestedBinary(2000)}}, "{dir}/m.pb", kBad,
               "not a binary NetDef"});
  c.push_back({"records_json_nested_100000", {{"m.json", Nested('[', ']', 100000)}},
               "{dir}/m.json", kBad, "nested more than 64 levels"});
  c.push_back({"records_json_nested_object",
               {{"m.json", absl::StrCat(R"({"schema": "memonger.records/v1", "records": [{"bytes": )",
                                        Nested('[', ']', 100000), "}]}")}},
               "{dir}/m.json", kBad, "nested more than 64 levels"});
  c.push_back({"plan_in_nested_100000",
               {{"m.pbtxt", tiny}, {"p.json", absl::StrCat(R"({"schema": )", Nested('{', '}', 1), "", Nested('[', ']', 100000), "}")}},
               "{dir}/m.pbtxt --dim N=8 --plan-in {dir}/p.json", kBad, "nested more than 64 levels"});

  // Flags.
  const std::string t = "{dir}/m.pbtxt --dim N=8";
  const std::vector<File> tf = {{"m.pbtxt", tiny}};
  auto flag = [&](const std::string& name, const std::string& args, int code,
                  const std::string& message) {
    c.push_back({"flag_" + name, tf, t + " " + args, code, message});
  };
  flag("alignment_0", "--alignment 0", kUsage, "--alignment 0 is not a power of two");
  flag("alignment_negative", "--alignment -8", kUsage, "--alignment -8 is not a power of two");
  flag("alignment_3", "--alignment 3", kUsage, "--alignment 3 is not a power of two");
  flag("alignment_2_31", "--alignment 2147483648", kUsage, "between 1 and 2^30");
  flag("alignment_2_62", "--alignment 4611686018427387904", kUsage, "between 1 and 2^30");
  flag("alignment_2_64", "--alignment 18446744073709551616", kUsage,
       "--alignment 18446744073709551616: not an integer that fits in 64 bits");
  flag("alignment_text", "--alignment abc", kUsage, "--alignment abc: not an integer");
  flag("time_limit_negative", "--time-limit -1", kUsage, "--time-limit -1: give seconds");
  flag("time_limit_zero", "--time-limit 0", kUsage, "--time-limit 0: give seconds");
  flag("time_limit_nan", "--time-limit nan", kUsage, "--time-limit nan");
  flag("time_limit_inf", "--time-limit inf", kUsage, "--time-limit inf");
  flag("time_limit_huge", "--time-limit 1e308", kUsage, "--time-limit 1e+308: give seconds");
  flag("time_limit_text", "--time-limit soon", kUsage, "--time-limit soon: not a number");
  flag("threads_zero", "--threads 0", kUsage, "--threads 0: give a thread count from 1 to 256");
  flag("threads_huge", "--threads 100000", kUsage, "--threads 100000: give a thread count");
  flag("threads_text", "--threads many", kUsage, "--threads many: not an integer");
  flag("budget_text", "--budget lots", kUsage, "--budget");
  flag("budget_negative", "--budget -5", kUsage, "--budget");
  flag("budget_overflow", "--budget 99999999999TiB", kUsage, "--budget");
  flag("max_input_bytes_zero", "--max-input-bytes 0", kUsage, "--max-input-bytes");
  flag("max_input_bytes_text", "--max-input-bytes big", kUsage, "--max-input-bytes");
  flag("dim_twice", "--dim N=9", kUsage, "--dim N is given twice (8 and 9)");
  flag("dim_unused", "--dim Q=3", kBad, "the model has no symbolic dimension 'Q' (its symbols: N)");
  // --fit binds its symbol at trial sizes: the message must not name a --dim the user never gave.
  flag("fit_symbol_unknown", "--fit Q --budget 1MiB", kBad,
       "symbol 'Q' (--dim or --fit): the model has no symbolic dimension 'Q'");
  flag("dim_negative", "--dim M=-1", kUsage, "M=-1");
  flag("dim_text", "--dim M=abc", kUsage, "M=abc");
  flag("dim_overflow", "--dim M=99999999999999999999", kUsage, "M=99999999999999999999");
  flag("dim_no_equals", "--dim M", kUsage, "SYMBOL=VALUE");
  flag("input_shape_twice", "--input-shape x=4,8 --input-shape x=4,9", kUsage,
       "--input-shape x is given twice");
  flag("input_shape_not_input", "--input-shape h=4,8", kBad, "'h', which is not a graph input");
  flag("input_shape_negative", "--input-shape x=4,-8", kUsage, "x=4,-8");
  // A NetDef input's --input-shape keeps its declared rank, and a symbolic dim it sizes agrees
  // with --dim, as for ONNX (both were taken silently: found by a black-box sweep).
  flag("input_shape_against_dim", "--input-shape x=4,9", kBad,
       "--input-shape x gives symbolic dimension 'N' (dim 1 of graph input 'x') the size 9, but "
       "--dim N=8 gives 8");
  flag("input_shape_rank", "--input-shape x=32", kBad,
       "--input-shape x=32 has rank 1 but graph input 'x' is declared with rank 2");
  flag("dont_share_unknown", "--dont-share nosuch", kBad, "--dont-share nosuch: the net has no value");
  flag("head_unknown", "--head nosuch", kBad, "--head nosuch: the net has no value");
  flag("planner_unknown", "--planner magic", kUsage, "--planner");
  flag("seed_overflow", "--seed 99999999999999999999", kUsage,
       "--seed 99999999999999999999: not an integer in [0, 2^64)");
  flag("seed_negative", "--seed -1", kUsage, "--seed -1: not an integer");
  flag("option_without_value", "--time-limit", kUsage, "--time-limit");
  // Decided by the flags alone, whatever the model: a usage error (it was exit 1).
  flag("planner_not_for_parallel", "--planner best-fit --execution parallel", kUsage,
       "--planner best-fit --execution parallel: best-fit places offsets over serial lifetimes");
  flag("memonger_greedy_not_for_parallel", "--planner memonger-greedy --execution parallel",
       kUsage, "shares along one serial op order");
  flag("order_unknown", "--order random", kUsage, "--order");
  flag("format_unknown", "--format xml", kUsage, "--format");
  flag("execute_unknown", "--execute gpu", kUsage, "--execute");
  flag("mode_unknown", "--mode eval", kUsage, "--mode");
  flag("top_negative", "--top -1", kUsage, "--top");
  flag("recompute_inference", "--recompute sqrt", kBad, "--recompute is for training nets");
  flag("recompute_auto_no_budget", "--recompute auto", kUsage, "--recompute auto needs --budget");
  flag("fit_no_budget", "--fit N", kUsage, "--fit needs --budget");
  // A workload key that does not exist would be refused at every size: a usage error, not
  // "nothing fits" (exit 3, as it was).
  c.push_back({"flag_fit_unknown_key", {}, "--workload attention:n=64 --fit zz --budget 1MiB",
               kUsage, "--fit: attention workload: no key 'zz' (known: n, cls, batch,"});
  flag("fit_with_execute", "--fit N --budget 1MiB --execute host", kUsage, "--fit plans many sizes");
  // (`t` binds N=8: the search binds N at every trial size, and the --dim was dropped unsaid.)
  flag("fit_with_its_dim", "--fit N --budget 1MiB", kUsage,
       "--fit N searches its size: it does not go with --dim N=8");
  flag("outputs_out_without_execute", "--outputs-out {dir}/o", kUsage, "--outputs-out needs --execute");
  flag("loss_in_inference", "--loss y", kBad, "--loss needs --mode training");
  flag("unknown_flag", "--frobnicate", kUsage, "frobnicate");
  flag("net_out_extension", "--net-out {dir}/out.txt", kUsage,
       "--net-out {dir}/out.txt: use the extension .pb");
  flag("plan_json_missing_dir", "--plan-json {dir}/no/such/dir/p.json", kUsage,
       "the directory {dir}/no/such/dir does not exist");
  flag("plan_json_is_directory", "--plan-json {dir}", kUsage, "is a directory");
  flag("plan_csv_missing_dir", "--plan-csv {dir}/nope/p.csv", kUsage, "does not exist");
  flag("html_missing_dir", "--html {dir}/nope/p.html", kUsage, "does not exist");
  flag("same_file_twice", "--plan-json {dir}/p.out --plan-csv {dir}/p.out", kUsage,
       "already the file of --plan-json");
  flag("same_file_by_two_paths", "--plan-json {dir}/p.out --plan-csv {dir}/./p.out", kUsage,
       "already the file of --plan-json");
  // A plan written over the model destroyed the user's input (found by a black-box sweep).
  flag("output_is_the_model", "--plan-csv {dir}/m.pbtxt", kUsage,
       "is the MODEL file this run reads");
  flag("output_is_the_model_by_another_path", "--net-out {dir}/./m.pbtxt", kUsage,
       "is the MODEL file this run reads");
  flag("output_is_the_plan_read", "--plan-in {dir}/p.json --plan-json {dir}/p.json", kUsage,
       "is the --plan-in file this run reads");
  c.push_back({"model_and_workload", tf, "{dir}/m.pbtxt --workload mlp:layers=2", kUsage, "excludes"});
  c.push_back({"no_model", {}, "--planner auto", kUsage, "give a MODEL file or --workload"});
  c.push_back({"dim_with_workload", {}, "--workload mlp:layers=2 --dim N=3", kUsage,
               "a --workload takes its sizes in its spec"});
  c.push_back({"outputs_not_left_when_input_bad",
               {{"m.pbtxt", "name: \"broken\" op { type: }"}},
               "{dir}/m.pbtxt --plan-json {dir}/p.json --html {dir}/p.html", kBad, "m.pbtxt",
               {"p.json", "p.html"}});
  c.push_back({"outputs_not_left_when_execution_fails",
               {{"m.pbtxt", Net(R"(op { name: "c" type: "NoKernelOp" input: "x" output: "y" })",
                                R"(value_info { name: "x" dtype: FLOAT has_shape: true dim { size: 4 } }
                                   value_info { name: "y" dtype: FLOAT has_shape: true dim { size: 4 } })",
                                "external_input: \"x\" external_output: \"y\"\n")}},
               "{dir}/m.pbtxt --plan-json {dir}/p.json --plan-csv {dir}/p.csv --execute host",
               kBad, "NoKernelOp", {"p.json", "p.csv"}});

  // Workload specs.
  auto workload = [&](const std::string& name, const std::string& spec, const std::string& message) {
    c.push_back({"workload_" + name, {}, "--workload " + spec, kBad, message});
  };
  workload("unknown", "nosuch:x=1", "nosuch");
  workload("unknown_key", "mlp:colour=blue", "colour");
  workload("value_text", "mlp:layers=many", "layers");
  workload("value_negative", "mlp:layers=-3", "layers");
  workload("value_overflow", "mlp:layers=99999999999999999999", "layers");
  workload("random_ops_zero", "random:ops=0", "ops");
  workload("random_ops_over_max", "random:ops=99999999999", "ops");
  // One over the documented maximum (2^22 ops, about 2.9 GB to plan): refused before any work.
  workload("random_ops_4194305", "random:ops=4194305", "ops=4194305 is out of range (3 to 4194304)");
  workload("attention_n_zero", "attention:n=0", "n");
  workload("attention_n_text", "attention:n=big", "n");
  workload("attention_kernel_unknown", "attention:kernel=quantum", "kernel");
  workload("key_twice", "mlp:layers=2,layers=3", "layers");
  // Legal once, minutes of work: refused with the product that is too large.
  workload("randwire_dense", "randwire:nodes=4096,k=4094",
           "8384512 edges a stage, more than 524288");
  workload("empty_value", "mlp:layers=", "layers");

  // Usage records: CSV.
  auto csv = [&](const std::string& name, const std::string& text, int code,
                 const std::string& message) {
    c.push_back({"csv_" + name, {{"r.csv", text}}, "{dir}/r.csv", code, message});
  };
  csv("bom", "\xEF\xBB\xBFid,lower,upper,size\na,0,2,64\n", kOk, "");
  csv("crlf", "id,lower,upper,size\r\na,0,2,64\r\nb,1,3,64\r\n", kOk, "");
  csv("quoted_names", "id,lower,upper,size\n\"a,b\",0,2,64\n\"say \"\"hi\"\"\",1,3,64\n"
                      "\" spaced \",1,2,8\n\"line\nbreak\",0,1,8\n", kOk, "");
  csv("missing_column", "id,lower,size\na,0,64\n", kBad, "the header lacks column 'upper'");
  // An offset is a byte position: a negative one was taken for "no offset" without a word.
  csv("negative_offset", "id,lower,upper,size,offset\na,0,2,64,-7\n", kBad,
      "offset -7 is negative");
  // A name that is not UTF-8 is shown escaped, whatever message quotes it.
  csv("name_not_utf8", "id,lower,upper,size\nb\xb1,-1,1,8\n", kBad, "('b\\xb1')");
  csv("unknown_column", "id,lower,upper,size,colour\na,0,2,64,red\n", kBad, "unknown column 'colour'");
  csv("column_twice", "id,lower,upper,size,size\na,0,2,64,64\n", kBad, "appears twice");
  csv("not_integer", "id,lower,upper,size\na,0,2,big\n", kBad, "size 'big' is not an integer");
  csv("overflow", "id,lower,upper,size\na,0,2,99999999999999999999\n", kBad, "fits in 64 bits");
  csv("upper_not_after_lower", "id,lower,upper,size\na,5,5,64\n", kBad, "upper 5 <= lower 5");
  csv("negative_size", "id,lower,upper,size\na,0,2,-64\n", kBad, "negative size -64");
  csv("negative_step", "id,lower,upper,size\na,-4,2,64\n", kBad, "out of range");
  csv("step_too_large", "id,lower,upper,size\na,0,4611686018427387904,64\n", kBad, "out of range");
  csv("duplicate_id", "id,lower,upper,size\na,0,2,64\na,1,3,64\n", kBad, "the name is used twice");
  csv("too_many_cells", "id,lower,upper,size\na,0,2,64,9\n", kBad, "5 cells, the header has 4");
  csv("too_few_cells", "id,lower,upper,size\na,0,2\n", kBad, "3 cells, the header has 4");
  csv("unclosed_quote", "id,lower,upper,size\n\"a,0,2,64\n", kBad, "not closed");
  csv("text_after_quote", "id,lower,upper,size\n\"a\"b,0,2,64\n", kBad, "after the closing quote");
  csv("alignment_3", "id,lower,upper,size,alignment\na,0,2,64,3\n", kBad, "alignment 3 is not a power of two");
  csv("alignment_2_62", "id,lower,upper,size,alignment\na,0,2,64,4611686018427387904\n", kBad,
      "between 1 and 2^30");
  csv("header_only", kCsvHeader, kBad, "no records");
  csv("empty_id", "id,lower,upper,size\n,0,2,64\n", kBad, "empty name");
  csv("huge_sizes", "id,lower,upper,size\na,0,2,4611686018427387904\nb,1,3,4611686018427387904\n",
      kBad, "more than 2^60 bytes");

  // Usage records: JSON.
  auto json = [&](const std::string& name, const std::string& text, int code,
                  const std::string& message) {
    c.push_back({"json_" + name, {{"r.json", text}}, "{dir}/r.json", code, message});
  };
  json("not_json", "{records: [}", kBad, "not valid JSON");
  json("wrong_schema", R"({"schema": "x", "records": []})", kBad, "not a usage-record file");
  json("records_not_array", R"({"schema": "memonger.records/v1", "records": 3})", kBad,
       "\"records\" must be an array");
  json("record_not_object", Records("3"), kBad, "record 0: not an object");
  // nlohmann keeps the last of a repeated key without a word: 9000 bytes, or 7?
  json("repeated_key",
       Records(R"({"name": "a", "bytes": 7, "first_step": 0, "last_step": 1, "bytes": 9000})"),
       kBad, "the key \"bytes\" appears twice in one object");
  json("negative_offset",
       Records(R"({"name": "a", "bytes": 8, "first_step": 0, "last_step": 1, "offset": -5})"),
       kBad, "record 0: negative \"offset\" -5");
  json("missing_bytes", Records(R"({"first_step": 0, "last_step": 1})"), kBad, "missing \"bytes\"");
  json("bytes_string", Records(R"({"bytes": "64", "first_step": 0, "last_step": 1})"), kBad,
       "must be an integer, not \"64\"");
  json("bytes_2_64", Records(R"({"bytes": 18446744073709551615, "first_step": 0, "last_step": 1})"),
       kBad, "does not fit in 64 bits");
  json("bytes_float", Records(R"({"bytes": 1.5, "first_step": 0, "last_step": 1})"), kBad,
       "must be an integer, not 1.5");
  json("negative_bytes", Records(R"({"bytes": -1, "first_step": 0, "last_step": 1})"), kBad,
       "negative size");
  json("ends_before_start", Records(R"({"bytes": 8, "first_step": 5, "last_step": 1})"), kBad,
       "ends (step 1) before it starts (step 5)");
  json("duplicate_names",
       Records(R"({"name": "a", "bytes": 8, "first_step": 0, "last_step": 1},
                  {"name": "a", "bytes": 8, "first_step": 0, "last_step": 1})"),
       kBad, "the name is used twice");
  json("name_not_string", Records(R"({"name": 7, "bytes": 8, "first_step": 0, "last_step": 1})"),
       kBad, "\"name\" must be a string");
  json("empty_records", Records(""), kBad, "no records");
  json("long_name_is_cut",
       Records(absl::StrCat(R"({"name": ")", std::string(100000, 'n'),
                            R"(", "bytes": -1, "first_step": 0, "last_step": 1})")),
       kBad, "(100000 characters)");
  json("huge_value_dump_is_cut",
       Records(absl::StrCat(R"({"bytes": ")", std::string(50000, '1'), R"(", "first_step": 0, "last_step": 1})")),
       kBad, "characters)");
  json("newline_in_name", Records(R"({"name": "a\nb", "bytes": -1, "first_step": 0, "last_step": 1})"),
       kBad, "a\\nb");

  // NetDefs.
  auto net = [&](const std::string& name, const std::string& text, const std::string& args,
                 int code, const std::string& message) {
    c.push_back({"netdef_" + name, {{"m.pbtxt", text}}, "{dir}/m.pbtxt " + args, code, message});
  };
  const std::string x4 = R"(value_info { name: "x" dtype: FLOAT has_shape: true dim { size: 4 } })";
  net("unbound_symbol", tiny, "", kBad, "symbolic dimension 'N' is unbound; pass --dim N=VALUE");
  net("declared_output_contradicts",
      Net(R"(op { name: "r" type: "Relu" input: "x" output: "y" } external_output: "y")",
          x4 + R"( value_info { name: "y" dtype: FLOAT has_shape: true dim { size: 9 } })"),
      "", kBad, "output 'y' is declared float32[9] but the op produces float32[4]");
  net("declared_dtype_contradicts",
      Net(R"(op { name: "r" type: "Relu" input: "x" output: "y" } external_output: "y")",
          x4 + R"( value_info { name: "y" dtype: INT64 has_shape: true dim { size: 4 } })"),
      "", kBad, "is declared int64[4] but the op produces float32[4]");
  net("unknown_op_undeclared",
      Net(R"(op { name: "q" type: "MysteryOp" input: "x" output: "y" } external_output: "y")", x4),
      "", kBad, "op type 'MysteryOp' has no shape function");
  net("negative_dim", Net(R"(op { type: "Relu" input: "x" output: "y" })",
                          R"(value_info { name: "x" dtype: FLOAT has_shape: true dim { size: -4 } })"),
      "", kBad, "negative dimension -4");
  net("bytes_overflow",
      Net(R"(op { type: "Relu" input: "x" output: "y" })",
          R"(value_info { name: "x" dtype: FLOAT has_shape: true dim { size: 4294967296 } dim { size: 4294967296 } })"),
      "", kBad, "'x'");
  net("total_over_2_60",
      Net(R"(op { type: "Relu" input: "x" output: "y" } op { type: "Relu" input: "y" output: "z" })",
          R"(value_info { name: "x" dtype: FLOAT has_shape: true dim { size: 1073741824 } dim { size: 268435456 } })"),
      "", kBad, "more than 2^60 bytes");
  net("undefined_input",
      Net(R"(op { type: "Relu" input: "ghost" output: "y" })", x4), "", kBad, "ghost");
  net("no_ops", "name: \"empty\" external_input: \"x\"", "", kBad, "m.pbtxt");
  net("unknown_field", "name: \"n\" colour: \"red\"", "", kBad, "colour");
  net("dtype_unknown_number",
      Net(R"(op { type: "Relu" input: "x" output: "y" })",
          R"(value_info { name: "x" dtype: 99 has_shape: true dim { size: 4 } })"),
      "", kBad, "m.pbtxt");
  net("relu_two_inputs",
      Net(R"(op { name: "r" type: "Relu" input: "x" input: "x" output: "y" })", x4), "", kBad,
      "Relu takes 1..1 inputs");
  net("matmul_mismatch",
      Net(R"(op { name: "mm" type: "MatMul" input: "x" input: "w" output: "y" })",
          R"(value_info { name: "x" dtype: FLOAT has_shape: true dim { size: 2 } dim { size: 3 } }
             value_info { name: "w" dtype: FLOAT has_shape: true dim { size: 7 } dim { size: 4 } })",
          "external_input: \"x\" external_input: \"w\"\n"),
      "", kBad, "mm");
  net("inplace_size_change",
      Net(R"(op { name: "t" type: "Transpose" input: "x" output: "x" })",
          R"(value_info { name: "x" dtype: FLOAT has_shape: true dim { size: 2 } dim { size: 3 } })"),
      "", kBad, "is declared float32[2,3] but the op produces float32[3,2]");
  net("cycle",
      "name: \"c\" op { name: \"a\" type: \"Relu\" input: \"q\" output: \"p\" } "
      "op { name: \"b\" type: \"Relu\" input: \"p\" output: \"q\" }",
      "", kBad, "the net has a cycle: value 'q'");
  net("nul_in_name", std::string("name: \"n\\000x\" op { type: \"Relu\" input: \"x\" output: \"y\" }") + x4,
      "", kBad, "m.pbtxt");
  net("binary_as_pb", "", "", kBad, "m.pbtxt");
  net("newline_in_value_name",
      "name: \"n\" external_input: \"x\\nq\" op { type: \"Relu\" input: \"x\\nq\" output: \"y\" }",
      "", kBad, "an external input name 'x\\nq' holds a control character");
  net("markup_and_commas_in_names",
      Net(R"(op { name: "r" type: "Relu" input: "x</script>,\"q" output: "y" } external_output: "y")",
          R"(value_info { name: "x</script>,\"q" dtype: FLOAT has_shape: true dim { size: 4 } })",
          "external_input: \"x</script>,\\\"q\"\n"),
      "--html {dir}/p.html --plan-csv {dir}/p.csv --net-out {dir}/o.pbtxt", kOk, "");
  c.push_back({"netdef_text_named_pb", {{"m.pb", tiny}}, "{dir}/m.pb --dim N=8", kBad,
               "not a binary NetDef"});

  // ONNX: what an exporter would never write, and what libonnx lets through.
  auto onnx = [&](const std::string& name, const std::string& bytes, const std::string& args,
                  int code, const std::string& message) {
    c.push_back({"onnx_" + name, {{"m.onnx", bytes}}, "{dir}/m.onnx " + args, code, message});
  };
  const std::string in23 = OnnxTensor("a", 1, {"2", "3"});
  onnx("matmul_mismatch_declared_output",
       OnnxModel(R"(node { op_type: "MatMul" input: "a" input: "b" output: "c" name: "mm" })",
                 {in23, OnnxTensor("b", 1, {"7", "4"})}, {OnnxTensor("c", 1, {"9", "9"})}),
       "", kBad, "mm");
  onnx("matmul_mismatch_undeclared",
       OnnxModel(R"(node { op_type: "MatMul" input: "a" input: "b" output: "c" name: "mm" })",
                 {in23, OnnxTensor("b", 1, {"7", "4"})}, {"c"}),
       "", kBad, "mm");
  onnx("relu_declared_output_contradicts",
       OnnxModel(R"(node { op_type: "Relu" input: "a" output: "c" name: "r" })", {in23},
                 {OnnxTensor("c", 1, {"9", "9"})}),
       "", kBad, "differ in dimension 0: (2) vs (9)");
  onnx("range_delta_zero",
       OneOp(R"(op_type: "Range" input: "s" input: "l" input: "d" output: "y" name: "range")", {},
             R"(initializer { name: "s" data_type: 7 int64_data: 0 }
                initializer { name: "l" data_type: 7 int64_data: 10 }
                initializer { name: "d" data_type: 7 int64_data: 0 })"),
       "", kBad, "delta");
  onnx("conv_dilation_zero",
       Conv(R"(name: "conv" attribute { name: "dilations" type: INTS ints: 0 ints: 0 })", 4, 4, 4), "",
       kBad, "dilation");
  onnx("conv_group_zero", Conv(R"(name: "conv" attribute { name: "group" type: INT i: 0 })", 4, 4, 4),
       "", kBad, "group");
  onnx("conv_group_negative",
       Conv(R"(name: "conv" attribute { name: "group" type: INT i: -2 })", 4, 4, 4), "", kBad,
       "group");
  onnx("conv_group_channels_mismatch",
       Conv(R"(name: "conv" attribute { name: "group" type: INT i: 2 })", 4, 4, 4), "", kBad,
       "group");
  onnx("conv_stride_zero",
       Conv(R"(name: "conv" attribute { name: "strides" type: INTS ints: 0 ints: 0 })", 4, 4, 4), "",
       kBad, "stride");
  onnx("conv_channels_mismatch", Conv(R"(name: "conv")", 4, 4, 3), "", kBad, "conv");
  onnx("layernorm_axis_out_of_range",
       OneOp(R"(op_type: "LayerNormalization" input: "x" input: "s" output: "y" name: "ln"
                attribute { name: "axis" type: INT i: 5 })",
             {OnnxTensor("x", 1, {"2", "8"}), OnnxTensor("s", 1, {"8"})}),
       "", kBad, "axis");
  onnx("einsum_malformed_arrow",
       OneOp(R"(op_type: "Einsum" input: "a" input: "b" output: "y" name: "es"
                attribute { name: "equation" type: STRING s: "ij,jk->>q" })",
             {in23, OnnxTensor("b", 1, {"3", "4"})}),
       "", kBad, "equation");
  onnx("einsum_operand_count",
       OneOp(R"(op_type: "Einsum" input: "a" input: "b" output: "y" name: "es"
                attribute { name: "equation" type: STRING s: "ij->j" })",
             {in23, OnnxTensor("b", 1, {"3", "4"})}),
       "", kBad, "equation");
  onnx("einsum_rank_mismatch",
       OneOp(R"(op_type: "Einsum" input: "a" input: "b" output: "y" name: "es"
                attribute { name: "equation" type: STRING s: "ijk,jk->ik" })",
             {in23, OnnxTensor("b", 1, {"3", "4"})}),
       "", kBad, "equation");
  onnx("raw_data_length_mismatch",
       OneOp(R"(op_type: "Add" input: "x" input: "w" output: "y")", {OnnxTensor("x", 1, {"4"})},
             R"(initializer { name: "w" data_type: 1 dims: 4 raw_data: "\000\000\000\000\000\000" })"),
       "", kBad, "'w'");
  onnx("raw_data_length_mismatch_execute",
       OneOp(R"(op_type: "Add" input: "x" input: "w" output: "y")", {OnnxTensor("x", 1, {"4"})},
             R"(initializer { name: "w" data_type: 1 dims: 4 raw_data: "\000\000\000\000\000\000" })"),
       "--execute host", kBad, "'w'");
  onnx("float_data_count_mismatch",
       OneOp(R"(op_type: "Add" input: "x" input: "w" output: "y")", {OnnxTensor("x", 1, {"4"})},
             R"(initializer { name: "w" data_type: 1 dims: 4 float_data: 1 float_data: 2 })"),
       "", kBad, "'w'");
  onnx("element_type_99_input",
       OneOp(R"(op_type: "Relu" input: "x" output: "y")", {OnnxTensor("x", 99, {"4"})}), "", kBad,
       "99");
  onnx("element_type_99_initializer",
       OneOp(R"(op_type: "Add" input: "x" input: "w" output: "y")", {OnnxTensor("x", 1, {"4"})},
             R"(initializer { name: "w" data_type: 99 dims: 4 raw_data: "\000\000\000\000" })"),
       "", kBad, "99");
  onnx("negative_initializer_dim",
       OneOp(R"(op_type: "Add" input: "x" input: "w" output: "y")", {OnnxTensor("x", 1, {"4"})},
             R"(initializer { name: "w" data_type: 1 dims: -4 })"),
       "", kBad, "'w'");
  onnx("no_graph", Onnx("ir_version: 8 opset_import { domain: \"\" version: 17 }"), "", kBad,
       "m.onnx");
  onnx("no_opset",
       Onnx(R"(ir_version: 8 graph { name: "g" node { op_type: "Relu" input: "x" output: "y" }
               input { name: "x" type { tensor_type { elem_type: 1 shape { dim { dim_value: 4 } } } } }
               output { name: "y" } })"),
       "", kBad, "m.onnx");
  onnx("unbound_symbol",
       OneOp(R"(op_type: "Relu" input: "x" output: "y")", {OnnxTensor("x", 1, {"B", "4"})}), "",
       kBad, "'B'");
  onnx("dim_not_in_model",
       OneOp(R"(op_type: "Relu" input: "x" output: "y")", {OnnxTensor("x", 1, {"B", "4"})}),
       "--dim B=2 --dim C=3", kBad, "no symbolic dimension 'C' (its symbols: B)");
  onnx("control_flow",
       OneOp(R"(op_type: "If" input: "x" output: "y" name: "branch")", {OnnxTensor("x", 9, {})}), "",
       kBad, "If");
  onnx("input_shape_rank_mismatch",
       OneOp(R"(op_type: "Relu" input: "x" output: "y")", {OnnxTensor("x", 1, {"B", "4"})}),
       "--input-shape x=1,2,3", kBad, "has rank 3");

  // Saved plans (--plan-in): the file's facts are checked, never trusted.
  auto plan = [&](const std::string& name, const std::string& text, int code,
                  const std::string& message) {
    c.push_back({"plan_in_" + name, {{"m.pbtxt", tiny}, {"p.json", text}},
                 "{dir}/m.pbtxt --dim N=8 --planner none --alignment 64 --plan-in {dir}/p.json",
                 code, message});
  };
  plan("valid", TinyPlan("64", "128"), kOk, "");
  plan("not_json", "{", kBad, "not valid JSON");
  plan("wrong_schema", R"({"schema": "other"})", kBad, "not a plan");
  plan("alignment_2_62_huge_offset", TinyPlan("4611686018427387904", "9223372036854775000"), kBad,
       "between 1 and 2^30");
  plan("offset_overflow", TinyPlan("64", "9223372036854775807"), kBad, "ends beyond 2^60 bytes");
  // Found by the plan_json fuzzer: the end fits int64, the arena's aligned end did not (abort).
  plan("offset_near_2_63", TinyPlan("256", "9223372036854775508"), kBad, "ends beyond 2^60 bytes");
  plan("offset_2_64", TinyPlan("64", "18446744073709551615"), kBad, "too large");
  plan("negative_offset", TinyPlan("64", "-64"), kBad, "negative offset");
  plan("overlap", TinyPlan("64", "64"), kBad, "not valid for this model");
  plan("bytes_wrong", TinyPlan("64", "128", "999"), kBad,
       "'h' has 999 bytes in the plan but 128 in the model");
  plan("arena_wrong", TinyPlan("64", "128", "128", "12345"), kBad,
       "\"arena_bytes\" is 12345 but the plan's buffers end at 256");
  plan("offset_string", TinyPlan("64", "\"128\""), kBad, "must be an integer");
  plan("value_missing",
       R"({"schema": "memonger.plan/v1", "model": "tiny", "planner": "x", "order": "given",
           "execution": "serial", "alignment": 64, "steps": [{"op": "r1"}, {"op": "r2"}],
           "values": [{"name": "x", "offset": 0, "buffer": 0}]})",
       kBad, "the plan does not place 'h'");
  plan("unknown_op",
       R"({"schema": "memonger.plan/v1", "planner": "x", "order": "given", "execution": "serial",
           "alignment": 64, "steps": [{"op": "zz"}], "values": []})",
       kBad, "the model has no op 'zz'");
  c.push_back({"plan_in_missing", tf, t + " --plan-in {dir}/none.json", kBad, "no such file"});
  c.push_back({"plan_in_dev_zero", tf, t + " --plan-in {dir}/z.json --max-input-bytes 1MiB", kBad,
               "z.json", {}, [](const std::string& dir) { Symlink("/dev/zero", dir + "/z.json"); }});

  // Names that break writers: they must round-trip.
  c.push_back({"csv_names_round_trip",
               {{"r.csv", "id,lower,upper,size\n\"a,b\",0,2,64\n\" x \",1,3,64\n\"q\"\"\",0,3,8\n"}},
               "{dir}/r.csv --plan-csv {dir}/out.csv", kOk, ""});

  // An existing output file is untouched when the run fails.
  c.push_back({"existing_output_untouched_on_failure",
               {{"m.pbtxt", tiny}, {"p.json", "previous contents"}},
               "{dir}/m.pbtxt --plan-json {dir}/p.json", kBad, "unbound", {}, nullptr});
  return c;
}

// ---------------------------------------------------------------------------------------------
// Running one case.

struct ToolRun {
  int exit_code = -1;
  int signal = 0;
  int64_t max_rss_mb = 0;
  std::string out;
  std::string err;
};

std::string ReplaceDir(std::string text, const std::string& dir) {
  size_t at;
  while ((at = text.find("{dir}")) != std::string::npos) text.replace(at, 5, dir);
  return text;
}

ToolRun RunTool(const std::vector<std::string>& args, const std::string& dir) {
  const std::string path = OptimizeNetPath();
  ToolRun run;
  const std::string out_path = dir + "/.stdout";
  const std::string err_path = dir + "/.stderr";
  const pid_t pid = ::fork();
  if (pid == 0) {
    const int out = ::open(out_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    const int err = ::open(err_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    const int in = ::open("/dev/null", O_RDONLY);
    ::dup2(out, 1);
    ::dup2(err, 2);
    ::dup2(in, 0);
    rlimit cpu{30, 30};  // a hang is killed by SIGXCPU
    ::setrlimit(RLIMIT_CPU, &cpu);
#if !defined(MEMONGER_HOSTILE_UNDER_ASAN)
    rlimit memory{size_t{6} << 30, size_t{6} << 30};
    ::setrlimit(RLIMIT_AS, &memory);
#endif
    std::vector<char*> argv;
    argv.push_back(const_cast<char*>(path.c_str()));
    for (const std::string& a : args) argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    ::execv(path.c_str(), argv.data());
    ::_exit(127);
  }
  int status = 0;
  rusage usage{};
  ::wait4(pid, &status, 0, &usage);
  if (WIFEXITED(status)) run.exit_code = WEXITSTATUS(status);
  if (WIFSIGNALED(status)) run.signal = WTERMSIG(status);
  run.max_rss_mb = usage.ru_maxrss / 1024;
  run.out = ReadFile(out_path);
  run.err = ReadFile(err_path);
  std::filesystem::remove(out_path);
  std::filesystem::remove(err_path);
  return run;
}

void PrintTo(const HostileCase& c, std::ostream* os) { *os << c.name; }

class HostileInputTest : public ::testing::TestWithParam<HostileCase> {};

TEST_P(HostileInputTest, ClearErrorNoSignalNothingLeftBehind) {
  const HostileCase& hc = GetParam();
  const std::string dir = TempDir();
  for (const File& f : hc.files) {
    std::ofstream(dir + "/" + f.name, std::ios::binary) << f.contents;
  }
  if (hc.setup) hc.setup(dir);
  const bool existing_untouched = hc.name == "existing_output_untouched_on_failure";
  std::vector<std::string> args;
  for (absl::string_view a : absl::StrSplit(ReplaceDir(hc.args, dir), ' ', absl::SkipEmpty())) {
    args.emplace_back(a);
  }
  const ToolRun run = RunTool(args, dir);
  SCOPED_TRACE(absl::StrCat("optimize-net ", ReplaceDir(hc.args, dir), "\nstderr: ", run.err));
  ASSERT_EQ(run.signal, 0) << "killed by signal " << run.signal;
  EXPECT_EQ(run.exit_code, hc.exit_code);
  if (hc.exit_code != kOk) {
    std::vector<std::string> lines = absl::StrSplit(run.err, '\n', absl::SkipEmpty());
    // One line, prefixed, CLI11's own parse errors included (they used to add a second line
    // and no prefix).
    ASSERT_EQ(lines.size(), 1u) << "the error must be one line";
    EXPECT_TRUE(absl::StartsWith(lines[0], "optimize-net: ")) << lines[0];
    EXPECT_TRUE(absl::StrContains(lines[0], ReplaceDir(hc.message, dir)))
        << "expected '" << ReplaceDir(hc.message, dir) << "' in: " << lines[0];
    EXPECT_LT(lines[0].size(), 1200u) << "messages stay short whatever the input";
  }
#if !defined(MEMONGER_HOSTILE_UNDER_ASAN)
  EXPECT_LT(run.max_rss_mb, hc.rss_cap_mb);
#endif
  for (const std::string& f : hc.must_not_exist) {
    EXPECT_FALSE(std::filesystem::exists(dir + "/" + f)) << f << " was left behind";
  }
  if (existing_untouched) {
    EXPECT_EQ(ReadFile(dir + "/p.json"), "previous contents");
  }
  // No temporary file of an output is left either.
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    EXPECT_FALSE(absl::StrContains(entry.path().filename().string(), ".tmp-"))
        << entry.path() << " was left behind";
  }
}

INSTANTIATE_TEST_SUITE_P(Table, HostileInputTest, ::testing::ValuesIn(Cases()),
                         [](const ::testing::TestParamInfo<HostileCase>& info) {
                           return info.param.name;
                         });

TEST(HostileInputSuiteTest, HasAtLeast150Cases) { EXPECT_GE(Cases().size(), 150u); }

TEST(HostileInputSuiteTest, CaseNamesAreUnique) {
  std::set<std::string> names;
  for (const HostileCase& c : Cases()) EXPECT_TRUE(names.insert(c.name).second) << c.name;
}

// Names with commas, quotes, outer spaces and line breaks survive --plan-csv and read back.
TEST(HostileInputSuiteTest, CsvNamesRoundTrip) {
  const std::string dir = TempDir();
  const std::string in = dir + "/r.csv";
  std::ofstream(in) << "id,lower,upper,size\n\"a,b\",0,2,64\n\" x \",1,3,64\n\"q\"\"\",0,3,8\n"
                       "\"two\nlines\",2,3,8\n";
  const ToolRun first = RunTool({in, "--plan-csv", dir + "/out.csv"}, dir);
  ASSERT_EQ(first.exit_code, 0) << first.err;
  const std::string written = ReadFile(dir + "/out.csv");
  EXPECT_TRUE(absl::StrContains(written, "\"a,b\",")) << written;
  EXPECT_TRUE(absl::StrContains(written, "\" x \",")) << written;
  EXPECT_TRUE(absl::StrContains(written, "\"q\"\"\",")) << written;
  EXPECT_TRUE(absl::StrContains(written, "\"two\nlines\",")) << written;
  // The written plan reads back as records with the same names.
  const ToolRun second = RunTool({dir + "/out.csv", "--format", "json"}, dir);
  ASSERT_EQ(second.exit_code, 0) << second.err;
  for (const char* name : {"\"a,b\"", "\" x \"", "\"q\\\"\"", "\"two\\nlines\""}) {
    EXPECT_TRUE(absl::StrContains(second.out, absl::StrCat("\"name\": ", name))) << name;
  }
}

}  // namespace
}  // namespace memonger::testing
