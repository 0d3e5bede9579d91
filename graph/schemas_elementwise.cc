#include "graph/op_schema.h"

namespace memonger::graph {

void AddElementwiseSchemas(OpSchemaTable& table) { (void)table; }

}  // namespace memonger::graph
