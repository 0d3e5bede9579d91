#include "graph/op_schema.h"

namespace memonger::graph {

void AddGradientSchemas(OpSchemaTable& table) { (void)table; }

}  // namespace memonger::graph
