#include "graph/op_schema.h"

namespace memonger::graph {

void AddLossSchemas(OpSchemaTable& table) { (void)table; }

}  // namespace memonger::graph
