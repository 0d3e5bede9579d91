#include "graph/op_schema.h"

namespace memonger::graph {

void AddNnSchemas(OpSchemaTable& table) { (void)table; }

}  // namespace memonger::graph
