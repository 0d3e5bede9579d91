#include "graph/net_def.h"

#include <utility>

#include <google/protobuf/io/coded_stream.h>
#include <google/protobuf/io/tokenizer.h>
#include <google/protobuf/text_format.h>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "graph/dim_expr.h"
#include "graph/op_schema.h"
#include "graph/rebuild.h"
#include "graph/shape_inference.h"
#include "util/file_io.h"
#include "util/limits.h"
#include "util/status_macros.h"

namespace memonger::graph {
namespace {

class CollectTextErrors : public google::protobuf::io::ErrorCollector {
 public:
  void AddError(int line, google::protobuf::io::ColumnNumber column,
                const std::string& message) override {
    if (first_.empty()) first_ = absl::StrCat("line ", line + 1, ", column ", column + 1, ": ", message);
  }
  void AddWarning(int, google::protobuf::io::ColumnNumber, const std::string&) override {}
  const std::string& first() const { return first_; }

 private:
  std::string first_;
};

// Why a name is refused: "" when it is fine. Control bytes (a newline, ...) would break every
// line-based output (the text report, CSV rows read by hand, error messages).
std::string NameProblem(absl::string_view s) {
  size_t i = 0;
  while (i < s.size()) {
    const unsigned char c = static_cast<unsigned char>(s[i]);
    int extra = 0;
    if (c < 0x80) {
      if ((c < 0x20 && c != '\t') || c == 0x7f) return "holds a control character";
      ++i;
      continue;
    }
    if ((c & 0xE0) == 0xC0) extra = 1;
    else if ((c & 0xF0) == 0xE0) extra = 2;
    else if ((c & 0xF8) == 0xF0) extra = 3;
    else return "is not valid UTF-8 text: the file is probably not a NetDef";
    if (i + extra >= s.size()) return "is not valid UTF-8 text: the file is probably not a NetDef";
    for (int k = 1; k <= extra; ++k) {
      if ((static_cast<unsigned char>(s[i + k]) & 0xC0) != 0x80) {
        return "is not valid UTF-8 text: the file is probably not a NetDef";
      }
    }
    i += extra + 1;
  }
  return "";
}

absl::Status CheckName(absl::string_view name, absl::string_view what,
                       const std::string& source_name) {
  const std::string problem = NameProblem(name);
  if (!problem.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat(source_name, ": ", what, " '", util::Quote(name), "' ", problem));
  }
  return absl::OkStatus();
}

// Bytes that happen to parse as a NetDef (protobuf is lenient) must still look like one.
absl::Status CheckLooksLikeNetDef(const proto::NetDef& net, const std::string& source_name) {
  const auto& unknown = net.GetReflection()->GetUnknownFields(net);
  if (unknown.field_count() > 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        source_name, ": not a NetDef (it holds field number ", unknown.field(0).number(),
        ", which NetDef does not have); an ONNX model must have the .onnx extension"));
  }
  if (net.op_size() == 0) {
    return absl::InvalidArgumentError(absl::StrCat(source_name, ": the net has no ops"));
  }
  MG_RETURN_IF_ERROR(CheckName(net.name(), "the net name", source_name));
  for (const auto& name : net.external_input()) {
    MG_RETURN_IF_ERROR(CheckName(name, "an external input name", source_name));
  }
  for (const auto& name : net.external_output()) {
    MG_RETURN_IF_ERROR(CheckName(name, "an external output name", source_name));
  }
  for (int i = 0; i < net.op_size(); ++i) {
    const proto::OperatorDef& op = net.op(i);
    const std::string what = absl::StrCat("op #", i);
    if (op.GetReflection()->GetUnknownFields(op).field_count() > 0 && !op.has_type()) {
      return absl::InvalidArgumentError(
          absl::StrCat(source_name, ": ", what, " is not an OperatorDef: the file is not a NetDef"));
    }
    MG_RETURN_IF_ERROR(CheckName(op.type(), absl::StrCat(what, "'s type"), source_name));
    MG_RETURN_IF_ERROR(CheckName(op.name(), absl::StrCat(what, "'s name"), source_name));
    for (const auto& n : op.input()) MG_RETURN_IF_ERROR(CheckName(n, what + "'s input", source_name));
    for (const auto& n : op.output()) MG_RETURN_IF_ERROR(CheckName(n, what + "'s output", source_name));
  }
  return absl::OkStatus();
}

Attribute AttributeFromProto(const proto::Argument& arg) {
  Attribute a;
  a.name = arg.name();
  if (arg.has_n() || arg.nets_size() > 0) {
    Subnets nets;
    nets.repeated = !arg.has_n();
    if (arg.has_n()) nets.serialized.push_back(arg.n().SerializeAsString());
    for (const proto::NetDef& n : arg.nets()) nets.serialized.push_back(n.SerializeAsString());
    a.data = std::move(nets);
  } else if (arg.ints_size() > 0) {
    a.data = std::vector<int64_t>(arg.ints().begin(), arg.ints().end());
  } else if (arg.floats_size() > 0) {
    a.data = std::vector<double>(arg.floats().begin(), arg.floats().end());
  } else if (arg.strings_size() > 0) {
    a.data = std::vector<std::string>(arg.strings().begin(), arg.strings().end());
  } else if (arg.has_i()) {
    a.data = arg.i();
  } else if (arg.has_f()) {
    a.data = static_cast<double>(arg.f());
  } else if (arg.has_s()) {
    a.data = arg.s();
  }
  return a;
}

void AttributeToProto(const Attribute& a, proto::Argument& arg) {
  arg.set_name(a.name);
  std::visit(
      [&](const auto& v) {
        using T = std::decay_t<decltype(v)>;
        if constexpr (std::is_same_v<T, int64_t>) arg.set_i(v);
        else if constexpr (std::is_same_v<T, double>) arg.set_f(static_cast<float>(v));
        else if constexpr (std::is_same_v<T, std::string>) arg.set_s(v);
        else if constexpr (std::is_same_v<T, std::vector<int64_t>>) {
          for (int64_t x : v) arg.add_ints(x);
        } else if constexpr (std::is_same_v<T, std::vector<double>>) {
          for (double x : v) arg.add_floats(static_cast<float>(x));
        } else if constexpr (std::is_same_v<T, std::vector<std::string>>) {
          for (const auto& x : v) arg.add_strings(x);
        } else if constexpr (std::is_same_v<T, Subnets>) {
          // Parsed when the net was read, so they parse again.
          for (const std::string& bytes : v.serialized) {
            proto::NetDef* net = v.repeated ? arg.add_nets() : arg.mutable_n();
            net->ParseFromString(bytes);
          }
        }
      },
      a.data);
}

Role RoleFromProto(proto::ValueRole role) {
  switch (role) {
    case proto::ROLE_INPUT: return Role::kInput;
    case proto::ROLE_OUTPUT: return Role::kOutput;
    case proto::ROLE_PARAM: return Role::kParam;
    case proto::ROLE_GRADIENT: return Role::kGradient;
    case proto::ROLE_WORKSPACE: return Role::kWorkspace;
    case proto::ROLE_CONSTANT: return Role::kConstant;
    default: return Role::kActivation;
  }
}

proto::ValueRole RoleToProto(Role role) {
  switch (role) {
    case Role::kInput: return proto::ROLE_INPUT;
    case Role::kOutput: return proto::ROLE_OUTPUT;
    case Role::kParam: return proto::ROLE_PARAM;
    case Role::kActivation: return proto::ROLE_ACTIVATION;
    case Role::kGradient: return proto::ROLE_GRADIENT;
    case Role::kWorkspace: return proto::ROLE_WORKSPACE;
    case Role::kConstant: return proto::ROLE_CONSTANT;
  }
  return proto::ROLE_UNSPECIFIED;
}

absl::StatusOr<Device> DeviceFromProto(const proto::DeviceOption& d) {
  auto field = [](const char* name, int32_t number) -> absl::StatusOr<int16_t> {
    if (number < 0 || number > util::kMaxDeviceField) {
      return absl::InvalidArgumentError(absl::StrCat("device_option ", name, " ", number,
                                                     " is out of range [0, ",
                                                     util::kMaxDeviceField, "]"));
    }
    return static_cast<int16_t>(number);
  };
  Device device;
  MG_ASSIGN_OR_RETURN(device.type, field("device_type", d.device_type()));
  MG_ASSIGN_OR_RETURN(device.id, field("device_id", d.device_id()));
  return device;
}

// The roles GraphBuilder::Build gives the values when the net declares none (graph.cc): an
// external output with a producer > a parameter gradient > an output of a gradient op >
// activation; input without a producer. O(values + outputs + param grads).
std::vector<Role> DerivedRoles(const Graph& graph) {
  std::vector<Role> roles(graph.num_values(), Role::kActivation);
  for (ValueId id = 0; id < graph.num_values(); ++id) {
    const Value& v = graph.value(id);
    if (v.producer == kNone) {
      roles[id] = Role::kInput;
      continue;
    }
    const Op& op = graph.op(v.producer);
    if (op.is_gradient_op || absl::EndsWith(op.type, "Gradient")) roles[id] = Role::kGradient;
  }
  for (const auto& [param, grad] : graph.param_grads()) roles[grad] = Role::kGradient;
  for (ValueId id : graph.outputs()) {
    if (graph.value(id).producer != kNone) roles[id] = Role::kOutput;
  }
  return roles;
}

}  // namespace

absl::StatusOr<proto::NetDef> ParseNetDef(const std::string& bytes, NetFileFormat format,
                                          const std::string& source_name,
                                          const util::InputLimits& limits) {
  if (bytes.empty()) return absl::InvalidArgumentError(absl::StrCat(source_name, ": the file is empty"));
  MG_RETURN_IF_ERROR(util::CheckInputSize(static_cast<int64_t>(bytes.size()), limits, source_name));
  MG_RETURN_IF_ERROR(util::CheckProtobufSize(static_cast<int64_t>(bytes.size()), source_name));
  proto::NetDef net;
  if (format == NetFileFormat::kBinary) {
    google::protobuf::io::CodedInputStream in(reinterpret_cast<const uint8_t*>(bytes.data()),
                                              static_cast<int>(bytes.size()));
    in.SetRecursionLimit(limits.max_nesting_depth);
    if (!net.ParseFromCodedStream(&in)) {
      return absl::InvalidArgumentError(absl::StrCat(
          source_name, ": not a binary NetDef (the protobuf does not parse: truncated or not a "
                       "protobuf; text nets need the .pbtxt extension)"));
    }
  } else {
    google::protobuf::TextFormat::Parser parser;
    CollectTextErrors errors;
    parser.RecordErrorsTo(&errors);
    // Without a limit the parser recurses once per nested message: a file nested ten thousand
    // levels deep would overflow the stack.
    parser.SetRecursionLimit(limits.max_nesting_depth);
    if (!parser.ParseFromString(bytes, &net)) {
      return absl::InvalidArgumentError(
          absl::StrCat(source_name, ": not a text NetDef: ", errors.first()));
    }
  }
  MG_RETURN_IF_ERROR(CheckLooksLikeNetDef(net, source_name));
  return net;
}

absl::StatusOr<proto::NetDef> ReadNetDef(const std::string& path, NetFileFormat format,
                                         const util::InputLimits& limits) {
  MG_ASSIGN_OR_RETURN(std::string bytes, util::ReadInputFile(path, limits));
  return ParseNetDef(bytes, format, path, limits);
}

absl::StatusOr<std::string> SerializeNetDef(const proto::NetDef& net, NetFileFormat format) {
  std::string bytes;
  if (format == NetFileFormat::kBinary) {
    if (!net.SerializeToString(&bytes)) {
      return absl::InternalError("the net does not serialize");
    }
  } else if (!google::protobuf::TextFormat::PrintToString(net, &bytes)) {
    return absl::InternalError("the net does not print as text");
  }
  return bytes;
}

absl::Status WriteNetDef(const proto::NetDef& net, const std::string& path, NetFileFormat format) {
  absl::StatusOr<std::string> bytes = SerializeNetDef(net, format);
  if (!bytes.ok()) return absl::InternalError(absl::StrCat(path, ": ", bytes.status().message()));
  util::OutputFiles out;
  MG_RETURN_IF_ERROR(out.Add("net", path));
  out.Set(path, *std::move(bytes));
  return out.Commit();
}

absl::StatusOr<Graph> GraphFromNetDef(const proto::NetDef& net) {
  GraphBuilder builder(net.name());
  builder.ReserveOps(static_cast<size_t>(net.op_size()));
  for (const auto& name : net.external_input()) builder.AddExternalInput(name);
  for (const auto& name : net.external_output()) builder.AddExternalOutput(name);
  // The net's device option (every op without its own runs there) is checked once, first.
  absl::StatusOr<Device> net_device = DeviceFromProto(net.device_option());
  if (!net_device.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("the net's ", net_device.status().message()));
  }
  for (const proto::OperatorDef& op_def : net.op()) {
    OpSpec op;
    op.name = op_def.name();
    op.type = op_def.type();
    op.domain = op_def.domain();
    op.inputs.assign(op_def.input().begin(), op_def.input().end());
    op.outputs.assign(op_def.output().begin(), op_def.output().end());
    op.control_inputs.assign(op_def.control_input().begin(), op_def.control_input().end());
    for (const proto::Argument& arg : op_def.arg()) op.attrs.push_back(AttributeFromProto(arg));
    // An op without its own device option runs where the net says.
    absl::StatusOr<Device> device =
        op_def.has_device_option() ? DeviceFromProto(op_def.device_option()) : net_device;
    if (!device.ok()) {
      return absl::InvalidArgumentError(absl::StrCat(
          util::Quote(op_def.type()), " op '", util::Quote(op_def.name()),
          "': ", device.status().message()));
    }
    op.device = *device;
    op.engine = op_def.engine();
    op.is_gradient_op = op_def.is_gradient_op();
    op.view = op_def.view();
    builder.AddOp(std::move(op));
  }
  absl::flat_hash_set<std::string> declared_names;
  for (const proto::ValueInfo& info : net.value_info()) {
    if (info.name().empty()) return absl::InvalidArgumentError("a value_info has an empty name");
    // Two declarations of one name: which one holds would be a guess.
    if (!declared_names.insert(info.name()).second) {
      return absl::InvalidArgumentError(
          absl::StrCat("value_info '", info.name(), "' is given twice"));
    }
    Declaration d;
    MG_ASSIGN_OR_RETURN(d.dtype, DataTypeFromProtoNumber(info.dtype()));
    if (info.has_shape() || info.dim_size() > 0) {
      DeclaredDims dims;
      for (const proto::Dim& dim : info.dim()) {
        if (dim.has_symbol()) {
          if (dim.symbol().empty()) {
            return absl::InvalidArgumentError(
                absl::StrCat("value_info '", info.name(), "': a symbolic dim has an empty name"));
          }
          dims.push_back({0, dim.symbol()});
        } else {
          if (dim.size() < 0) {
            return absl::InvalidArgumentError(absl::StrCat(
                "value_info '", info.name(), "': negative dimension ", dim.size()));
          }
          dims.push_back({dim.size(), ""});
        }
      }
      d.dims = std::move(dims);
    }
    if (info.alignment() < 0 || (info.alignment() & (info.alignment() - 1)) != 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          "value_info '", info.name(), "': alignment ", info.alignment(), " is not a power of two"));
    }
    builder.Declare(info.name(), std::move(d), info.alignment());
    if (info.role() != proto::ROLE_UNSPECIFIED) {
      builder.DeclareRole(info.name(), RoleFromProto(info.role()));
    }
  }
  for (const auto& loss : net.loss()) builder.AddLoss(loss);
  for (const auto& pg : net.param_grad()) builder.AddParamGrad(pg.param(), pg.grad());
  // Caffe2's executors: the DAG nets run ops in parallel as their dependencies allow. An
  // explicit `execution` wins over the type.
  const bool parallel_type = net.type() == "dag" || net.type() == "async_dag" ||
                             net.type() == "async_scheduling" || net.type() == "async_polling" ||
                             net.type() == "prof_dag";
  builder.SetPrefersParallel(net.execution() == proto::EXECUTION_PARALLEL ||
                             (net.execution() == proto::EXECUTION_UNSPECIFIED && parallel_type));
  builder.SetNetType(net.type());
  return std::move(builder).Build();
}

proto::NetDef GraphToNetDef(const Graph& graph) {
  proto::NetDef net;
  net.set_name(graph.name());
  for (ValueId id : graph.inputs()) net.add_external_input(graph.value(id).name);
  for (ValueId id : graph.outputs()) net.add_external_output(graph.value(id).name);
  for (const Op& op : graph.ops()) {
    proto::OperatorDef* def = net.add_op();
    def->set_name(op.name);
    def->set_type(op.type);
    if (!op.domain.empty()) def->set_domain(op.domain.str());
    for (ValueId in : op.inputs) def->add_input(graph.value(in).name);
    for (ValueId out : op.outputs) def->add_output(graph.value(out).name);
    for (ValueId c : op.control_inputs) def->add_control_input(graph.value(c).name);
    for (const Attribute& a : op.attrs) AttributeToProto(a, *def->add_arg());
    if (op.device != Device{}) {
      def->mutable_device_option()->set_device_type(op.device.type);
      def->mutable_device_option()->set_device_id(op.device.id);
    }
    if (!op.engine.empty()) def->set_engine(op.engine.str());
    if (op.is_gradient_op) def->set_is_gradient_op(true);
    if (op.view) def->set_view(true);
  }

  // One value_info per name: the declaration and any role that derivation would not give.
  const std::vector<Role> derived = DerivedRoles(graph);
  const OpSchemaTable& schemas = OpSchemaTable::Builtin();
  std::vector<int8_t> typeable(graph.num_ops(), -1);  // per op: 1 yes, 0 no, -1 not asked yet
  auto Typeable = [&](OpId id) {
    if (typeable[id] < 0) {
      const Op& op = graph.op(id);
      const OpSchema* schema = schemas.Find(op.type);
      bool yes = schema != nullptr && static_cast<bool>(schema->infer);
      std::vector<TensorType> inputs;
      for (ValueId in : op.inputs) {
        if (!graph.value(in).type.has_value()) {
          yes = false;
          break;
        }
        inputs.push_back(*graph.value(in).type);
      }
      yes = yes && RunShapeFunction(graph, op, *schema, std::move(inputs)).ok();
      typeable[id] = yes ? 1 : 0;
    }
    return typeable[id] == 1;
  };
  // The symbols graph inputs declare: the ones a binding of the written net sizes.
  absl::flat_hash_set<std::string> input_symbols;
  for (ValueId id : graph.inputs()) {
    const Value& in = graph.value(id);
    if (!in.declared.dims.has_value()) continue;
    for (const DeclaredDim& d : *in.declared.dims) {
      if (d.symbol.empty()) continue;
      absl::StatusOr<DimExpr> expr = ParseDimExpr(d.symbol.str());
      if (expr.ok()) {
        for (std::string& s : expr->Symbols()) input_symbols.insert(std::move(s));
      }
      input_symbols.insert(d.symbol.str());
    }
  }
  absl::flat_hash_map<std::string, bool> written;
  for (const Value& v : graph.values()) {
    if (written.contains(v.name)) continue;
    written[v.name] = true;
    const absl::Span<const ValueId> versions = graph.Versions(v.name);
    proto::ValueInfo info;
    info.set_name(v.name);
    bool useful = false;
    // A graph input the model typed without declaring it (an ONNX initializer: its type is its
    // data's, which a net does not carry) is declared at that type: the net must load back on
    // its own ("graph input '1' has no shape" for every ONNX Conv's weights).
    // So is an output of an op our shape inference cannot type from its inputs' types (no
    // shape function, or a shape read from tensor values: typed by libonnx's inference): on
    // reading the net back, only a declaration can type it.
    Declaration declared = v.declared;
    // (The shape function runs only for a typed value the net does not declare fully.)
    const bool undeclared =
        declared.dtype == DataType::kUndefined || !declared.dims.has_value();
    if (undeclared && v.type.has_value() && (v.producer == kNone || !Typeable(v.producer))) {
      if (declared.dtype == DataType::kUndefined) declared.dtype = v.type->dtype;
      if (!declared.dims.has_value()) declared.dims = DeclarationOf(*v.type).dims;
    }
    // A dim the file named without any graph input sizing it (an exporter's 'Resizeout_dim_0')
    // was a name for what inference computed. Where only the declaration can type the value on
    // reading back (an op we cannot type), it is written as that size: the net is then exact at
    // the binding it was written for.
    if (!undeclared && v.type.has_value() && v.producer != kNone && !Typeable(v.producer) &&
        declared.dims->size() == v.type->dims.size()) {
      for (size_t k = 0; k < declared.dims->size(); ++k) {
        DeclaredDim& d = (*declared.dims)[k];
        if (!d.symbol.empty() && !input_symbols.contains(d.symbol.str())) {
          d = DeclaredDim(v.type->dims[k], "");
        }
      }
    }
    if (declared.dtype != DataType::kUndefined) {
      info.set_dtype(static_cast<proto::DataType>(static_cast<int>(declared.dtype)));
      useful = true;
    }
    if (declared.dims.has_value()) {
      info.set_has_shape(true);
      for (const DeclaredDim& d : *declared.dims) {
        proto::Dim* dim = info.add_dim();
        if (d.symbol.empty()) dim->set_size(d.size);
        else dim->set_symbol(d.symbol);
      }
      useful = true;
    }
    if (v.alignment > 0) {
      info.set_alignment(v.alignment);
      useful = true;
    }
    // Roles that hold for every version and that derivation does not produce (e.g. a parameter
    // gradient that is also a graph output: derived as output, declared gradient).
    const Role role = v.role;
    bool same_role = true;
    bool derivable = true;
    for (ValueId id : versions) {
      same_role = same_role && graph.value(id).role == role;
      derivable = derivable && graph.value(id).role == derived[id];
    }
    if (same_role && !derivable) {
      info.set_role(RoleToProto(role));
      useful = true;
    }
    if (useful) *net.add_value_info() = std::move(info);
  }
  for (ValueId id : graph.losses()) net.add_loss(graph.value(id).name);
  for (const auto& [param, grad] : graph.param_grads()) {
    proto::ParamGrad* pg = net.add_param_grad();
    pg->set_param(graph.value(param).name);
    pg->set_grad(graph.value(grad).name);
  }
  if (graph.prefers_parallel()) net.set_execution(proto::EXECUTION_PARALLEL);
  if (!graph.net_type().empty()) net.set_type(graph.net_type());
  return net;
}

}  // namespace memonger::graph
