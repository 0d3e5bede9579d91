#!/usr/bin/env python3
"""Writes fuzz/corpus/netdef_binary/caffe2_fc_relu.pb: a binary Caffe2 NetDef in raw protobuf
wire format, with the field numbers of Caffe2's caffe2.proto (including ones our proto does not
declare), as tests/graph/net_def_test.cc's BinaryCaffe2NetDefLoads builds it.

  python3 fuzz/corpus/sources/caffe2_fc_relu.py fuzz/corpus/netdef_binary/caffe2_fc_relu.pb
"""
import struct
import sys


def varint(v):
    out = b''
    while v >= 0x80:
        out += bytes([(v & 0x7F) | 0x80])
        v >>= 7
    return out + bytes([v])


class Wire:
    def __init__(self):
        self.b = b''

    def key(self, field, wire_type):
        self.b += varint((field << 3) | wire_type)

    def string(self, field, s):
        if isinstance(s, str):
            s = s.encode()
        self.key(field, 2)
        self.b += varint(len(s)) + s
        return self

    def int(self, field, v):
        self.key(field, 0)
        self.b += varint(v)
        return self

    def float(self, field, v):
        self.key(field, 5)
        self.b += struct.pack('<f', v)
        return self

    def message(self, field, m):
        return self.string(field, m.b)


# NetDef{name=1, op=2, type=3, num_workers=4, device_option=5, arg=6, external_input=7,
# external_output=8}; OperatorDef{input=1, output=2, name=3, type=4, arg=5, device_option=6,
# engine=7, control_input=8, is_gradient_op=9}; Argument{name=1, f=2, i=3, t=10};
# DeviceOption{device_type=1, device_id=2}.
tensor = Wire().int(1, 2).int(2, 1)
fc = (Wire().string(1, 'data').string(1, 'fc1_w').string(1, 'fc1_b').string(2, 'fc1')
      .string(3, 'fc1').string(4, 'FC')
      .message(5, Wire().string(1, 'axis').int(3, 1))
      .message(5, Wire().string(1, 'init').message(10, tensor))
      .message(6, Wire().int(1, 1).int(2, 3)).string(7, 'CUDNN'))
relu = Wire().string(1, 'fc1').string(2, 'fc1').string(4, 'Relu').string(8, 'data')
grad = Wire().string(1, 'fc1').string(2, 'fc1_grad').string(4, 'ReluGradient').int(9, 1)
net = (Wire().string(1, 'caffe2_net').message(2, fc).message(2, relu).message(2, grad)
       .string(3, 'dag').int(4, 4).message(6, Wire().string(1, 'scale').float(2, 0.5))
       .string(7, 'data').string(7, 'fc1_w').string(7, 'fc1_b').string(8, 'fc1_grad'))
with open(sys.argv[1], 'wb') as f:
    f.write(net.b)
