// A small time x address map of a plan for the text report (--ascii):
//
//   address
//   52.6 MiB |
//            |BBBBBB      DDDD
//            |AAAA  CCCCCCCCCC
//        0 B +----------------> step
//   A x (1.50 MiB)  B ln1 (1.50 MiB)  ...
//
// Each placed alias class gets a letter (A-Z, a-z, 0-9, then '#'); a cell shows the class
// covering most of it. Steps and addresses are bucketed to fit `width` x `height` characters.
#ifndef MEMONGER_REPORT_PLAN_ASCII_H_
#define MEMONGER_REPORT_PLAN_ASCII_H_

#include <string>

#include "graph/graph.h"
#include "memonger/plan.h"

namespace memonger {

std::string PlanToAscii(const graph::Graph& graph, const Plan& plan, int width = 64,
                        int height = 16);

}  // namespace memonger

#endif  // MEMONGER_REPORT_PLAN_ASCII_H_
