#!/usr/bin/env python3
"""Writes a text NetDef as Caffe2 itself would hold it, and the flags that give its inputs' shapes.

optimize-net's own nets (--net-out of a --workload ... mode=training) carry what Caffe2 never
wrote: value_info (dtypes and shapes), param_grad and loss declarations, is_gradient_op flags,
and graph outputs for the parameter gradients. This drops all of them, keeping the ops (with
Caffe2's gradient names: X_autogen_grad, X_grad, _X_grad_autosplit_k) and the external inputs,
and prints one `--input-shape NAME=D0,...` per external input (from the value_info it dropped)
so that the net can be planned with sizes, as Caffe2 did with blob shapes.

    optimize-net --workload resnet50:batch=32,mode=training --planner none --net-out r50.pbtxt
    bench/caffe2_style.py r50.pbtxt r50_caffe2.pbtxt > r50.shapes
    optimize-net r50_caffe2.pbtxt --mode training --planner memonger-dag $(cat r50.shapes)
"""
import re
import sys


def top_level_blocks(text):
    """(kind, text) for each top-level field: 'op {...}', 'value_info {...}', or a line."""
    depth, start, kind = 0, None, None
    for line in text.splitlines(keepends=True):
        stripped = line.strip()
        if depth == 0:
            m = re.match(r"(\w+) \{$", stripped)
            if m:
                kind, start, depth = m.group(1), [line], 1
                continue
            yield stripped.split(":")[0], line
            continue
        start.append(line)
        depth += stripped.count("{") - stripped.count("}")
        if depth == 0:
            yield kind, "".join(start)


def main(argv):
    if len(argv) != 3:
        sys.exit(__doc__)
    text = open(argv[1]).read()
    out, shapes, inputs = [], {}, []
    for kind, block in top_level_blocks(text):
        if kind == "value_info":
            name = re.search(r'name: "([^"]*)"', block).group(1)
            shapes[name] = re.findall(r"size: (\d+)", block)
        elif kind == "op":
            out.append(re.sub(r"\n\s*is_gradient_op: true", "", block))
        elif kind == "external_input":
            inputs.append(re.search(r'"([^"]*)"', block).group(1))
            out.append(block)
        elif kind in ("name", "type"):
            out.append(block)
        # param_grad, loss, external_output: not Caffe2's
    with open(argv[2], "w") as f:
        f.write("".join(out))
    for name in inputs:
        print("--input-shape %s=%s" % (name, ",".join(shapes.get(name, []))))


if __name__ == "__main__":
    main(sys.argv)
