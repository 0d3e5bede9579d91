#include "graph/op_schema.h"

namespace memonger::graph {

void AddTensorSchemas(OpSchemaTable& table) { (void)table; }

}  // namespace memonger::graph
