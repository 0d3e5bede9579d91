"""Self-tests of memonger_ref.py: the pure-planning scenarios of memonger_test.py (section 11 of
/work/shared/reference/memonger-algorithms.md), the section 7 counterexample, libstdc++'s heap
steps and std::unordered_set<std::string> order, the port's real_devices,
keep_until_last_write and count_down_own_version options, parity.py's deviation classifiers,
and the generator of caffe2_nets.py.

Run: python3 tests/reference/memonger_ref_test.py
"""

import math
import os
import random
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import caffe2_nets  # noqa: E402
import memonger_ref as m  # noqa: E402
import parity  # noqa: E402
from memonger_ref import LiveRange  # noqa: E402


def net_of(ops, external_input=(), external_output=(), type_=""):
    """A net from (type, inputs, outputs[, device]) tuples."""
    return {"name": "t", "type": type_, "external_input": list(external_input),
            "external_output": list(external_output),
            "op": [{"type": o[0], "input": list(o[1]), "output": list(o[2]),
                    "device": o[3] if len(o) > 3 else m.CPU, "arg": {}} for o in ops]}


def chain_names(chains):
    return [[name for name, _ in chain] for chain in chains]


def byte_sizes(case):
    return {b: 4 * math.prod(d) for b, d in case["shapes"].items()}


class HeapTest(unittest.TestCase):
    """std::push_heap / std::pop_heap with std::greater, worked by hand."""

    def test_pop_layout(self):
        heap = []
        for v in [1, 2, 3, 4, 5]:
            m.push_heap(heap, v)
        self.assertEqual(heap, [1, 2, 3, 4, 5])
        self.assertEqual(m.pop_heap(heap), 1)
        self.assertEqual(heap, [2, 4, 3, 5])

    def test_push_after_erase_from_middle(self):
        heap = [1, 2, 3, 4, 5]
        del heap[1]  # vector::erase: [1, 3, 4, 5] is not a heap any more
        m.push_heap(heap, 0)
        self.assertEqual(heap, [0, 1, 4, 5, 3])

    def test_pops_in_order(self):
        rng = random.Random(3)
        heap = []
        values = [(rng.randint(-3, 0), rng.choice("abcdef")) for _ in range(40)]
        for v in values:
            m.push_heap(heap, v)
        self.assertEqual([m.pop_heap(heap) for _ in values], sorted(values))


class SizeAwareChoiceTest(unittest.TestCase):
    """The size-aware get_free_blob rule (section 2) on a pool in array order."""

    def choose(self, sizes, required):
        rec = m._DagRecycler(net_of([]), [], [], set(), "", set(), {"out": [required]})
        pool = [(0, name) for name in sizes]
        rec.blob_sizes = dict(sizes)
        return rec.get_free_blob("out", {1}, pool, m.CPU), [n for _, n in pool]

    def test_first_that_fits_not_smallest(self):
        self.assertEqual(self.choose({"a": 8, "b": 4, "c": 6}, 5), ("a", ["b", "c"]))

    def test_none_fits_takes_largest(self):
        self.assertEqual(self.choose({"a": 4, "b": 8, "c": 6}, 10)[0], "b")

    def test_equal_size_replaces(self):
        self.assertEqual(self.choose({"a": 4, "b": 8, "c": 8}, 6)[0], "c")


class AssignmentTest(unittest.TestCase):
    """Tests 17-19 and the section 7 counterexample."""

    R17 = {"b1": LiveRange(1, 3, 10), "b2": LiveRange(3, 4, 1), "b3": LiveRange(5, 6, 1),
           "b4": LiveRange(5, 7, 10)}

    def test_17_greedy(self):
        chains = m.compute_assignments(self.R17, set(), m.GREEDY)
        self.assertEqual(chain_names(chains), [["b1", "b4"], ["b2", "b3"]])
        self.assertEqual(m.get_memory_usage(chains), 11)

    def test_18_dp(self):
        chains = m.compute_assignments(self.R17, set(), m.DYNAMIC_PROGRAMMING)
        self.assertEqual(chain_names(chains), [["b2", "b3"], ["b1", "b4"]])
        self.assertEqual(m.get_memory_usage(chains), 11)

    def test_19_dp_beats_greedy(self):
        ranges = {"b1": LiveRange(1, 2, 10), "b2": LiveRange(4, 6, 1),
                  "b3": LiveRange(5, 6, 10)}
        dp = m.compute_assignments(ranges, set(), m.DYNAMIC_PROGRAMMING)
        self.assertEqual(sorted(chain_names(dp)), [["b1", "b3"], ["b2"]])
        self.assertEqual(m.get_memory_usage(dp), 11)
        greedy = m.compute_assignments(ranges, set(), m.GREEDY)
        self.assertEqual(chain_names(greedy), [["b1", "b2"], ["b3"]])
        self.assertEqual(m.get_memory_usage(greedy), 20)

    def test_section7_dp_is_not_optimal(self):
        ranges = {"b0": LiveRange(0, 1, 7), "b1": LiveRange(1, 3, 5), "b2": LiveRange(2, 3, 5),
                  "b3": LiveRange(3, 5, 6), "b4": LiveRange(4, 5, 5)}
        greedy = m.compute_assignments(ranges, set(), m.GREEDY)
        self.assertEqual(chain_names(greedy), [["b0", "b2"], ["b1", "b4"], ["b3"]])
        self.assertEqual(m.get_memory_usage(greedy), 18)
        dp = m.compute_assignments(ranges, set(), m.DYNAMIC_PROGRAMMING)
        self.assertEqual(m.get_memory_usage(dp), 18)  # the optimum is 17

    def test_blob_assignments_take_last_name(self):
        # b2 static: b3 joins b1's chain, then b4 cannot follow b3 (5 > 6 fails).
        chains = m.compute_assignments(self.R17, {"b2"}, m.GREEDY)
        self.assertEqual(chain_names(chains), [["b1", "b3"], ["b4"], ["b2"]])
        self.assertEqual(m.compute_blob_assignments(chains), {"b1": "b3", "b3": "b3"})

    def test_unknown_algorithm_shares_nothing(self):
        chains = m.compute_assignments(self.R17, set(), "none")
        self.assertEqual(chains, [])

    def test_updated_ranges(self):
        ranges = [("x", LiveRange(None, 2, None)), ("y", LiveRange(1, None, 3)),
                  ("z", LiveRange(0, 0, 1))]
        self.assertEqual(m.get_updated_ranges(ranges),
                         [("x", LiveRange(-1, 2, 1)), ("y", LiveRange(1, 3, 3)),
                          ("z", LiveRange(0, 0, 1))])


class GraphEqualityTest(unittest.TestCase):
    """Tests 20-23."""

    def fc_net(self, spec):
        return net_of([("FC" if len(i) == 1 else "Sum", i, [o]) for i, o in spec])

    def test_20_equal(self):
        a = self.fc_net([(["data"], "x"), (["x"], "y"), (["x"], "z"), (["y", "z"], "out")])
        b = self.fc_net([(["data"], "other_x"), (["other_x"], "other_y"),
                         (["other_x"], "other_z"), (["other_y", "other_z"], "out")])
        self.assertTrue(m.verify_graph_equality(a, b))

    def test_21_equal_harder(self):
        a = self.fc_net([(["data"], "x"), (["x"], "y"), (["x"], "z"), (["y"], "u"),
                         (["z"], "v"), (["u", "v"], "out")])
        b = self.fc_net([(["data"], "x"), (["x"], "y"), (["x"], "z"), (["y"], "y"),
                         (["z"], "z"), (["y", "z"], "out")])
        self.assertTrue(m.verify_graph_equality(a, b))

    def test_22_unequal(self):
        a = self.fc_net([(["data"], "x"), (["x"], "y"), (["x"], "z"), (["y", "z"], "out")])
        b = self.fc_net([(["data"], "x"), (["x"], "y"), (["x"], "y"), (["y", "y"], "out")])
        self.assertFalse(m.verify_graph_equality(a, b))

    def test_23_unequal_harder(self):
        a = self.fc_net([(["data"], "x"), (["x"], "y"), (["x"], "z"), (["y"], "u"),
                         (["z"], "v"), (["u", "v"], "out")])
        b = self.fc_net([(["data"], "x"), (["x"], "y"), (["x"], "y"), (["y"], "u"),
                         (["y"], "v"), (["u", "v"], "out")])
        self.assertFalse(m.verify_graph_equality(a, b))

    def test_device_and_inplace(self):
        a = net_of([("Relu", ["x"], ["y"])])
        self.assertFalse(m.verify_graph_equality(a, net_of([("Relu", ["x"], ["y"], (1, 0))])))
        self.assertFalse(m.verify_inplace_blobs(a, net_of([("Relu", ["x"], ["x"])])))
        self.assertTrue(m.verify_inplace_blobs(a, net_of([("Relu", ["x"], ["z"])])))


class ReleaseTest(unittest.TestCase):
    def test_24_release_blobs_when_used(self):
        net = net_of([("FC", ["data"], ["x"]), ("FC", ["x"], ["y"]), ("FC", ["x"], ["z"]),
                      ("FC", ["y"], ["u"]), ("Alias", ["u"], ["u_alias"]),
                      ("Sum", ["z", "u"], ["out"])], external_input=["data"])
        out = m.release_blobs_when_used(net, set("data"))  # the test's slip: a set of chars
        self.assertEqual([(op["type"], op["input"][0]) for op in out["op"]],
                         [("FC", "data"), ("FC", "x"), ("FC", "x"), ("Free", "x"),
                          ("FC", "y"), ("Free", "y"), ("Alias", "u"), ("Sum", "z"),
                          ("Free", "z")])
        shapes = {b: [2, 3] for b in m.blob_names(net)}
        types = {b: "FLOAT" for b in shapes}
        total, high, by_type = m.estimate_memory_usage(net, shapes, types)
        total2, high2, _ = m.estimate_memory_usage(out, shapes, types)
        # Alias outputs are never allocated; after the Free ops at most three blobs are live.
        self.assertEqual((total, high, by_type), (5 * 24, 5 * 24, {"FC": 96, "Sum": 24}))
        self.assertEqual((total2, high2), (5 * 24, 3 * 24))


class UnorderedSetOrderTest(unittest.TestCase):
    """libstdc++'s std::unordered_set<std::string> order (unordered_set_order). The expected
    values were printed by a C++ program built with g++ 12 (Debian 12; clang++ 14 on the same
    libstdc++ prints the same) that inserts each list into a std::unordered_set<std::string> in
    order and prints its iteration order, and std::hash<std::string>()(name); they are the real
    library's, not this port's."""

    HASHES = {"": 6142509188972423790, "conv1": 14279741244453256772,
              "res2a_branch1": 8278377300339252397, "__m0_shared": 17992377319552484736,
              "name_x/fc1_grad": 6263410216898308970}

    # (inserted in this order, iteration order)
    ORDERS = [
        (["conv1", "res2a_branch1"], ["res2a_branch1", "conv1"]),
        (["pool1", "res2a_branch2a", "__m0_shared"], ["__m0_shared", "res2a_branch2a", "pool1"]),
        # 14 names: the 14th insert rehashes the 13 buckets to 29.
        (["conv1", "conv1_bn", "res2a_branch1", "res2a_branch1_bn", "res2a_branch2a",
          "res2a_branch2a_bn", "res2a_branch2b", "res2a_branch2b_bn", "res2a_branch2c",
          "res2a_branch2c_bn", "res2a", "res2b_branch2a", "res2b_branch2b", "__m0_shared"],
         ["__m0_shared", "conv1", "res2a_branch2b_bn", "conv1_bn", "res2b_branch2a",
          "res2a_branch1", "res2a_branch1_bn", "res2a_branch2b", "res2a_branch2c",
          "res2a_branch2a", "res2a_branch2c_bn", "res2a", "res2a_branch2a_bn",
          "res2b_branch2b"]),
        # 30 names: rehashes at the 14th (29 buckets) and the 30th (59).
        (["data", "conv1", "pool1", "res2a_branch1", "res2a_branch2a", "res2a_branch2b",
          "res2a_branch2c", "res2a", "res2b_branch2a", "res2b_branch2b", "res2b_branch2c",
          "res2b", "res2c_branch2a", "res2c_branch2b", "res2c_branch2c", "res2c",
          "res3a_branch1", "res3a_branch2a", "res3a_branch2b", "res3a_branch2c", "res3a",
          "fc1000", "pred", "__m0_shared", "__m1_shared", "__m2_shared", "__m3_shared",
          "name_x/fc1", "name_x/fc1_grad", "fc3_w_grad"],
         ["fc3_w_grad", "res2b_branch2c", "res2c_branch2a", "res2a", "fc1000", "pool1",
          "res2a_branch2c", "res2b_branch2b", "res2a_branch2b", "res2a_branch2a", "__m3_shared",
          "res2a_branch1", "res2c_branch2c", "conv1", "res3a_branch2b", "name_x/fc1",
          "name_x/fc1_grad", "res2b", "res2c_branch2b", "res2c", "res3a_branch1",
          "res3a_branch2a", "res2b_branch2a", "__m2_shared", "res3a_branch2c", "data", "res3a",
          "pred", "__m0_shared", "__m1_shared"]),
    ]

    def test_std_hash_of_strings(self):
        for name, h in self.HASHES.items():
            self.assertEqual(m.std_string_hash(name), h, name)

    def test_orders_of_real_sets(self):
        for names, order in self.ORDERS:
            self.assertEqual(m.unordered_set_order(names), order, len(names))

    def test_repeats_do_not_move_a_name(self):
        names, order = self.ORDERS[2]
        self.assertEqual(m.unordered_set_order(names + names[::-1] + names[:3]), order)

    def test_fast_pushes_in_set_order(self):
        # Sum frees the first k names at once (its output takes nothing: the stack is empty);
        # Split's outputs then pop the stack, o0 first: o_j takes the (k-1-j)-th name of the
        # set's order. The input order (the old port) fails each k. (No "__m<k>_shared" name
        # here: optimize_inference_net returns a net that has one unchanged.) The same nets as
        # tests/memonger/sharing/memonger_fast_test.cc's MemongerFastFreedSetTest.
        names = ["conv1", "res2a_branch1", "res2a_branch2a", "res2a_branch2b", "res2a_branch2c",
                 "res2a", "res2b_branch2a", "res2b_branch2b", "res2b_branch2c", "res2b",
                 "res2c_branch2a", "res2c_branch2b", "res2c_branch2c", "res2c", "res3a_branch1",
                 "res3a_branch2a", "res3a_branch2b", "res3a_branch2c", "res3a", "res3b_branch2a",
                 "res3b_branch2b", "res3b_branch2c", "res3b", "res3c_branch2a", "res3c_branch2b",
                 "res3c_branch2c", "res3c", "res3d_branch2a", "res3d_branch2b", "res3d_branch2c"]
        for k in (2, 3, 13, 14, 30):
            freed = names[:k]
            ops = [("Relu", ["x"], [b]) for b in freed]
            ops += [("Sum", freed, ["s"]), ("Split", ["s"], ["o%d" % j for j in range(k)]),
                    ("Sum", ["o%d" % j for j in range(k)], ["y"])]
            net = net_of(ops, external_input=["x"], external_output=["y"])
            _, renames = m.optimize_inference_fast(net, {"x", "y"})
            taken = [renames["o%d" % j] for j in range(k)]
            expected = [renames[b] for b in reversed(m.unordered_set_order(freed))]
            self.assertEqual(taken, expected, k)
            self.assertNotEqual(taken, [renames[b] for b in reversed(freed)], k)


class FastTest(unittest.TestCase):
    def test_lifo_and_names(self):
        net = net_of([("FC", ["data"], ["a"]), ("FC", ["a"], ["b"]), ("FC", ["b"], ["c"]),
                      ("FC", ["c"], ["d"])], external_input=["data"])
        out, renames = m.optimize_inference_fast(net, {"data", "d"})
        self.assertEqual([op["output"][0] for op in out["op"]],
                         ["__m0_shared", "__m1_shared", "__m0_shared", "d"])
        self.assertEqual(renames, {"a": "__m0_shared", "b": "__m1_shared", "c": "__m0_shared"})

    def test_dag_nets_and_optimized_nets_unchanged(self):
        net = net_of([("FC", ["data"], ["a"]), ("FC", ["a"], ["b"])], type_="dag")
        self.assertEqual(m.optimize_inference_fast(net, set()), (net, {}))
        net = net_of([("FC", ["data"], ["__m0_shared"]), ("FC", ["__m0_shared"], ["b"]),
                      ("FC", ["b"], ["c"])])
        self.assertEqual(m.optimize_inference_fast(net, set()), (net, {}))


class MemongerTestNets(unittest.TestCase):
    """Structural checks of memonger_test.py's scenarios on the generator's nets."""

    def test_n1_training_groups(self):
        # Traced by hand: the gradients alternate between two buffers.
        case = caffe2_nets.mlp_case()
        for share_activations in (False, True):
            out, renames = m.share_grad_blobs(case["net"], case["losses"],
                                              case["param_grads"], "", None,
                                              share_activations)
            groups = {}
            for b, new in renames.items():
                groups.setdefault(new, set()).add(b)
            self.assertEqual(sorted(map(sorted, groups.values())),
                             [["data_grad", "fc2_grad", "loss_autogen_grad", "pred_grad"],
                              ["fc1_grad", "fc3_grad", "xent_grad"]])

    def n1_statics(self, case):
        net = case["net"]
        return set(net["external_input"]) | {"loss", "fc1_w_grad"}

    def test_1_simple_memonger(self):
        case = caffe2_nets.mlp_case(batch=3, dims=(5, 4, 6, 3))
        static = self.n1_statics(case)
        sizes = byte_sizes(case)
        for algo in (m.GREEDY, m.DYNAMIC_PROGRAMMING):
            for blob_sizes in (None, sizes):
                out, assignments, chains = m.optimize_interference_full(
                    case["net"], static, blob_sizes, algo)
                self.assertNotIn("loss", assignments)
                self.assertNotIn("fc1_w_grad", assignments)
                self.assertTrue(m.verify_graph_equality(case["net"], out))
                baseline, optimized = m.compute_statistics(chains, sizes)
                self.assertLess(optimized, baseline)

    def test_2_fast_memonger(self):
        case = caffe2_nets.mlp_case()
        out, renames = m.optimize_inference_fast(case["net"], self.n1_statics(case))
        self.assertLess(m.count_blobs(out), m.count_blobs(case["net"]))
        self.assertNotIn("loss", renames)
        self.assertNotIn("fc1_w_grad", renames)
        self.assertTrue(m.verify_graph_equality(case["net"], out))

    def test_4_gradient_optim(self):
        case = caffe2_nets.mlp_case("name_x/", n_fc=5, dims=(1, 2, 3, 4, 1, 2))
        net = case["net"]
        a, _ = m.share_grad_blobs(net, case["losses"], case["param_grads"], "name_x/")
        b, _ = m.share_grad_blobs(net, case["losses"], case["param_grads"], "name_x/",
                                  {"name_x/fc1_w_grad"}, True)
        self.assertLess(m.count_blobs(a), m.count_blobs(net))
        self.assertLessEqual(m.count_blobs(b), m.count_blobs(a))
        self.assertIn("name_x/fc5", m.blob_names(a))
        self.assertIn("name_x/fc5", m.blob_names(b))

    def test_5_mix_cpu_gpu(self):
        case = caffe2_nets.mix_cpu_gpu_case()
        net = case["net"]
        out, _ = m.share_grad_blobs(net, case["losses"], case["param_grads"], "", None, True)
        self.assertLess(m.count_blobs(out), m.count_blobs(net))
        devices = {}
        for op in out["op"]:
            if op["type"].startswith("Copy"):
                continue
            for b in op["input"] + op["output"]:
                devices.setdefault(b, set()).add(m.op_device(op)[0])
        self.assertEqual({b for b, d in devices.items() if len(d) > 1}, set())

    def test_6_gradient_optim_tree(self):
        case = caffe2_nets.tree_case()
        net = case["net"]
        out, renames = m.share_grad_blobs(net, case["losses"], case["param_grads"],
                                          case["namescope"], set(case["dont_share"]), True)
        self.assertLess(m.count_blobs(out), m.count_blobs(net))
        self.assertIn("name_x/fc6", m.blob_names(out))
        for b in ("name_x/loss1", "name_x/loss2", "name_x/fc1_w_grad"):
            self.assertNotIn(b, renames)
        self.assertTrue(any(v.startswith("name_x/__m") for v in renames.values()))

    def test_7_forward_optim_tree_daggy(self):
        case = caffe2_nets.daggy_case()
        net = case["net"]
        self.assertEqual(len(net["op"]), 18)
        self.assertEqual(m.count_blobs(net), 36)
        out, _ = m.optimize_inference_for_dag(net, ["name_x/data"], "name_x")
        self.assertLess(m.count_blobs(out), m.count_blobs(net))

    def test_8_forward_optim_tree_harder(self):
        case = caffe2_nets.daggy_case(harder=True)
        net = case["net"]
        a, _ = m.optimize_inference_for_dag(net, ["name_x/data"], "name_x/")
        b, _ = m.optimize_inference_for_dag(net, ["name_x/data", "name_x/fc1_w"], "name_x/")
        self.assertLess(m.count_blobs(a), m.count_blobs(net))
        self.assertEqual(m.count_blobs(a), m.count_blobs(b))

    def test_9_dag_traversal_from_a_non_root(self):
        case = caffe2_nets.daggy_case()
        net = case["net"]
        out, _ = m.optimize_inference_for_dag(net, ["name_x/fc5_w", "name_x/data"], "name_x")
        self.assertLess(m.count_blobs(out), m.count_blobs(net))

    def test_11_inplace_op_as_head(self):
        net = net_of([("IndexFreeze", ["A"], ["A"]), ("Sum", ["A", "A"], ["B"]),
                      ("Relu", ["B"], ["C"]), ("Relu", ["C"], ["D"]),
                      ("Sum", ["D", "D"], ["E"])], external_input=["A"])
        out, renames = m.optimize_inference_for_dag(net, ["A"])
        self.assertLess(m.count_blobs(out), m.count_blobs(net))
        self.assertEqual(renames, {"B": "__m0_shared", "D": "__m0_shared",
                                   "C": "__m1_shared", "E": "__m1_shared"})

    def test_inference_refuses_unproduced_input(self):
        net = net_of([("Relu", ["x"], ["y"])])
        with self.assertRaises(m.MemongerError):
            m.optimize_inference_for_dag(net, ["x"])


class ParityClassifierTest(unittest.TestCase):
    """parity.py's classification of documented deviations, on hand-made nets."""

    GPU0 = (caffe2_nets.GPU_TYPE, 0)

    def mixed_net(self):
        # x (external, read on GPU 0) -> a (GPU) -> CopyGPUToCPU -> c (CPU 0) -> d -> e (CPU).
        g = self.GPU0
        return net_of([("Relu", ["x"], ["a"], g), ("Relu", ["a"], ["b"], g),
                       ("CopyGPUToCPU", ["b"], ["c"], g), ("Relu", ["c"], ["d"]),
                       ("Relu", ["d"], ["e"])], external_input=["x"], external_output=["e"])

    def test_blob_devices(self):
        self.assertEqual(parity.blob_devices(self.mixed_net()),
                         {"a": self.GPU0, "b": self.GPU0, "c": m.CPU, "d": m.CPU,
                          "e": m.CPU, "x": self.GPU0})

    def test_greedy_shares_across_devices(self):
        net = self.mixed_net()
        out, renames = m.optimize_interference(net, {"x", "e"})
        # Caffe2's greedy ignores devices: a (GPU) and c (CPU) end up in one chain.
        self.assertEqual(renames, {"a": "c", "b": "d"})
        self.assertEqual(parity.cross_device_groups(net, out),
                         {"c": {self.GPU0: ["a"], m.CPU: ["c"]},
                          "d": {self.GPU0: ["b"], m.CPU: ["d"]}})
        kind, note = parity.classify_deviation("greedy", {"net": net}, out, False, None,
                                               "exit 1: x", False)
        self.assertEqual(kind, "cross-device")
        self.assertEqual(note,
                         "c holds c on cpu, a on cuda:0; d holds d on cpu, b on cuda:0")

    def test_copy_output_is_cpu(self):
        # c = CopyGPUToCPU(b) runs on GPU 0 but is CPU memory: sharing it with CPU d is fine.
        net = self.mixed_net()
        out = net_of([("Relu", ["x"], ["a"], self.GPU0), ("Relu", ["a"], ["b"], self.GPU0),
                      ("CopyGPUToCPU", ["b"], ["c"], self.GPU0), ("Relu", ["c"], ["d"]),
                      ("Relu", ["d"], ["c"])], external_input=["x"], external_output=["e"])
        self.assertEqual(parity.cross_device_groups(net, out), {})
        self.assertIsNone(parity.classify_deviation("greedy", {"net": net}, out, False, None,
                                                    "exit 1: x", False))

    def test_single_device_nets_never_cross(self):
        for i in range(100):
            case = caffe2_nets.random_case(random.Random(i), str(i), single_device=True)
            out, _ = m.optimize_interference(case["net"], set(case["net"]["external_input"]))
            self.assertEqual(parity.cross_device_groups(case["net"], out), {})

    def test_linear_planners_run_serial(self):
        # optimize_interference plans one serial order: greedy and dp runs ask the tool for
        # the serial model whatever the net's type; the others keep the net's default.
        case = caffe2_nets.mlp_case()
        case["net"]["type"] = "dag"
        flags = {run.label: run.flags for run in parity.runs_for(case, 100)}
        for label in ("greedy", "greedy+shapes", "dp", "dp+shapes"):
            self.assertEqual(flags[label][2:4], ["--execution", "serial"], label)
        for label in ("fast", "dag-inference", "dag-training", "dag-training+act+shapes"):
            self.assertNotIn("--execution", flags[label], label)

    def test_dag_net_fast(self):
        net = net_of([("Relu", ["x"], ["a"]), ("Relu", ["a"], ["b"]), ("Relu", ["b"], ["c"])],
                     external_input=["x"], type_="dag")
        out, _ = m.optimize_inference_fast(net, {"x"})
        kind, _ = parity.classify_deviation(
            "fast", {"net": net}, out, False, None,
            "exit 1: optimize-net: memonger-fast needs the serial execution model, "
            "not parallel", False)
        self.assertEqual(kind, "dag-net-fast")


class SerialClobberTest(unittest.TestCase):
    """parity.serial_clobbers and the caffe2-unsafe classifier."""

    # a is read last at op 1 and written again at op 3: Caffe2's greedy gives a the range
    # [0, 1] (its last read), chains a -> c -> e and names the chain e, so op 3's write of a
    # lands in e while c, also in e, is still to be read at op 4.
    REWRITE = [("Relu", ["x"], ["a"]), ("Relu", ["a"], ["b"]), ("Relu", ["b"], ["c"]),
               ("Relu", ["c"], ["a"]), ("Relu", ["c"], ["d"]), ("Relu", ["d"], ["e"])]

    def test_clobbered_read(self):
        net = net_of(self.REWRITE, external_input=["x"])
        out, renames = m.optimize_interference(net, {"x"})
        self.assertEqual(renames, {"a": "e", "b": "d", "c": "e"})
        self.assertEqual(parity.serial_clobbers(net, out),
                         ["op 4 (Relu) reads c through e, which holds a (written by op 3)"])
        self.assertEqual(parity.serial_clobbers(net, net), [])

    def test_versions_and_external_outputs(self):
        # r reads the first version of a; a second write of a before it clobbers it even
        # though the name still holds "a". The caller reads external outputs at the end.
        net = net_of([("Relu", ["x"], ["a"]), ("Relu", ["x"], ["a"]), ("Relu", ["a"], ["r"])],
                     external_input=["x"], external_output=["r"])
        moved = net_of([("Relu", ["x"], ["a"]), ("Relu", ["x"], ["a"]), ("Relu", ["a"], ["r"])])
        self.assertEqual(parity.serial_clobbers(net, moved), [])
        early = net_of([("Relu", ["x"], ["b"]), ("Relu", ["x"], ["b"]), ("Relu", ["b"], ["s"])])
        self.assertEqual(parity.serial_clobbers(net, early),
                         ["external output r ends holding its initial value"])
        net2 = net_of([("Relu", ["x"], ["a"]), ("Relu", ["a"], ["r"]), ("Relu", ["x"], ["a"]),
                       ("Relu", ["a"], ["s"])], external_input=["x"])
        swapped = net_of([("Relu", ["x"], ["a"]), ("Relu", ["a"], ["r"]),
                          ("Relu", ["x"], ["b"]), ("Relu", ["a"], ["s"])])
        self.assertEqual(parity.serial_clobbers(net2, swapped),
                         ["op 3 (Relu) reads a through a, which holds a (written by op 0)"])
        self.assertIsNone(parity.serial_clobbers(net2, net_of(self.REWRITE)))

    def test_caffe2_unsafe(self):
        net = net_of(self.REWRITE, external_input=["x"])
        oracle, _ = m.optimize_interference(net, {"x"})
        # The tool's answer (a's range runs to its last write): a -> e, b -> d, c alone.
        tool = net_of([("Relu", ["x"], ["e"]), ("Relu", ["e"], ["d"]), ("Relu", ["d"], ["c"]),
                       ("Relu", ["c"], ["e"]), ("Relu", ["c"], ["d"]), ("Relu", ["d"], ["e"])])
        self.assertEqual(parity.serial_clobbers(net, tool), [])
        kind, note = parity.classify_deviation("greedy", {"net": net}, oracle, False, tool, "",
                                               False)
        self.assertEqual(kind, "caffe2-unsafe")
        self.assertIn("op 4 (Relu) reads c through e", note)
        # Not when the tool's net is unsafe too, when it failed, or when the oracle is safe.
        self.assertIsNone(parity.classify_deviation("greedy", {"net": net}, oracle, False,
                                                    oracle, "", False))
        self.assertIsNone(parity.classify_deviation("greedy", {"net": net}, oracle, False,
                                                    None, "exit 1: x", False))
        safe_net = net_of(self.REWRITE[:3], external_input=["x"])
        safe, _ = m.optimize_interference(safe_net, {"x"})
        self.assertIsNone(parity.classify_deviation("greedy", {"net": safe_net}, safe, False,
                                                    safe_net, "", False))


class TrainingDeviationTest(unittest.TestCase):
    """The activation-device, dont-share and combined classifiers on an MLP of four FCs
    (activations fc1 and fc2) planned with shapes (size-blind, the two gradient buffers always
    come first and no activation is ever reused), the tool emulated with the port:
    real_devices=True for its device rule; a dont_share gradient passed as a parameter
    gradient (never shareable) for its dont-share rule."""

    GPU0 = (caffe2_nets.GPU_TYPE, 0)

    def case(self, gpu, dont_share=()):
        case = caffe2_nets.mlp_case(n_fc=4)
        case["dont_share"] = list(dont_share)
        if gpu:
            for op in case["net"]["op"]:
                op["device"] = self.GPU0
        return case

    def plan(self, case, dont_share=(), real_devices=False, never_share=()):
        out, _ = m.share_grad_blobs(case["net"], case["losses"],
                                    list(case["param_grads"]) + list(never_share), "",
                                    list(dont_share), True, case["shapes"], verify=False,
                                    real_devices=real_devices)
        return out

    def classify(self, case, oracle, tool, real_devices=None, no_dont_share=None):
        self.assertEqual(parity.cross_device_groups(case["net"], oracle), {})
        return parity.classify_deviation("dag-training+act+shapes", case, oracle, False, tool,
                                         "", True, real_devices, no_dont_share)

    def test_real_devices_option(self):
        gpu = self.case(True)
        caffe2 = self.plan(gpu)
        real = self.plan(gpu, real_devices=True)
        # Caffe2 takes the GPU activations for CPU 0: no GPU gradient reuses them.
        grad_outputs = lambda net: {b for op in net["op"]  # noqa: E731
                                    if op["type"].endswith("Gradient") for b in op["output"]}
        self.assertFalse({"fc1", "fc2"} & grad_outputs(caffe2))
        self.assertEqual({"fc1", "fc2"} & grad_outputs(real), {"fc1", "fc2"})
        self.assertIsNotNone(parity.first_difference(caffe2, real))
        cpu = self.case(False)
        self.assertIsNone(parity.first_difference(self.plan(cpu),
                                                  self.plan(cpu, real_devices=True)))
        self.assertEqual(m.real_blob_devices(gpu["net"]["op"])["fc1"], self.GPU0)

    def test_activation_device(self):
        gpu = self.case(True)
        oracle, tool = self.plan(gpu), self.plan(gpu, real_devices=True)
        kind, note = self.classify(gpu, oracle, tool,
                                   real_devices=lambda: (self.plan(gpu, real_devices=True),
                                                         {}))
        self.assertEqual(kind, "activation-device")
        self.assertIn("fc1 on cuda:0", note)
        # On the CPU the rule changes nothing: a different tool net is no such deviation.
        cpu = self.case(False)
        self.assertIsNone(self.classify(cpu, self.plan(cpu), cpu["net"],
                                        real_devices=lambda: (self.plan(cpu, real_devices=True),
                                                              {})))

    def no_dont_share(self, case, tool_net):
        return lambda: (self.plan(case), tool_net, "",
                        lambda: self.plan(case, real_devices=True))

    def test_dont_share(self):
        cpu = self.case(False, ["fc2_grad"])
        oracle = self.plan(cpu, dont_share=["fc2_grad"])
        tool = self.plan(cpu, never_share=["fc2_grad"])
        self.assertIn("fc2_grad", m.blob_names(tool))
        self.assertNotIn("fc2_grad", m.blob_names(oracle))  # Caffe2 still maps it
        kind, note = self.classify(cpu, oracle, tool,
                                   real_devices=lambda: (self.plan(cpu, ["fc2_grad"], True), {}),
                                   no_dont_share=self.no_dont_share(cpu, self.plan(cpu)))
        self.assertEqual(kind, "dont-share")
        self.assertIn("the oracle renames fc2_grad -> ", note)
        # Without dont_share the tool still differs (here: it shares nothing at all).
        self.assertIsNone(self.classify(cpu, oracle, tool,
                                        no_dont_share=self.no_dont_share(cpu, cpu["net"])))

    def test_dont_share_and_activation_device(self):
        gpu = self.case(True, ["fc2_grad"])
        oracle = self.plan(gpu, dont_share=["fc2_grad"])
        tool = self.plan(gpu, real_devices=True, never_share=["fc2_grad"])
        real_devices = lambda: (self.plan(gpu, ["fc2_grad"], True), {})  # noqa: E731
        kind, _ = self.classify(gpu, oracle, tool, real_devices=real_devices,
                                no_dont_share=self.no_dont_share(
                                    gpu, self.plan(gpu, real_devices=True)))
        self.assertEqual(kind, "dont-share+activation-device")
        # Each alone does not explain it.
        self.assertIsNotNone(parity.first_difference(real_devices()[0], tool))
        self.assertIsNotNone(parity.first_difference(self.plan(gpu),
                                                     self.plan(gpu, real_devices=True)))
        # Nor both when the tool without dont_share is not the real-devices plan.
        self.assertIsNone(self.classify(gpu, oracle, tool, real_devices=real_devices,
                                        no_dont_share=self.no_dont_share(gpu, gpu["net"])))


class LastWriteTest(unittest.TestCase):
    """memonger_ref's keep_until_last_write option and the last-write classifier."""

    # a is read last at op 1 and written again (not in place) at op 4, when e, which Caffe2
    # puts in a's buffer, is already dead: Caffe2's answer is safe but differs from the rule
    # that keeps a until its last write.
    SAFE_REWRITE = [("Relu", ["x"], ["a"]), ("Relu", ["a"], ["b"]), ("Relu", ["b"], ["e"]),
                    ("Relu", ["e"], ["g"]), ("Relu", ["x"], ["a"]), ("Relu", ["g"], ["h"])]

    def net(self):
        return net_of(self.SAFE_REWRITE, external_input=["x"], external_output=["h"])

    def test_ranges(self):
        plain = m.compute_ranges(self.net()["op"])
        kept = m.compute_ranges(self.net()["op"], keep_until_last_write=True)
        self.assertEqual((plain["a"].defined, plain["a"].used), (0, 1))
        self.assertEqual((kept["a"].defined, kept["a"].used), (0, 4))
        self.assertEqual({b: r for b, r in kept.items() if b != "a"},
                         {b: r for b, r in plain.items() if b != "a"})
        # A blob no one reads stays "used after every other" (used None), rewritten or not.
        twice = m.compute_ranges([{"input": ["x"], "output": ["z"]},
                                  {"input": ["x"], "output": ["z"]}],
                                 keep_until_last_write=True)
        self.assertEqual(twice["z"], LiveRange(0, None, None))

    def test_every_planner(self):
        # The renames optimize-net writes for this net (memonger-greedy --execution serial,
        # memonger-fast, memonger-dag --head x) are the keep_until_last_write ones.
        net, static = self.net(), {"x", "h"}
        self.assertEqual(m.optimize_interference(net, static)[1], {"a": "e", "b": "g"})
        self.assertEqual(m.optimize_interference(net, static, keep_until_last_write=True)[1],
                         {"b": "g"})
        self.assertEqual(m.optimize_inference_fast(net, static)[1],
                         {"a": "__m0_shared", "b": "__m1_shared", "e": "__m0_shared",
                          "g": "__m1_shared"})
        self.assertEqual(m.optimize_inference_fast(net, static, keep_until_last_write=True)[1],
                         {"b": "__m0_shared", "e": "__m1_shared", "g": "__m0_shared"})
        self.assertEqual(m.optimize_inference_for_dag(net, ["x"])[1],
                         {"a": "__m0_shared", "b": "__m1_shared", "e": "__m0_shared",
                          "g": "__m1_shared"})
        self.assertEqual(m.optimize_inference_for_dag(net, ["x"], keep_until_last_write=True)[1],
                         {"b": "__m0_shared", "g": "__m0_shared"})
        for planner in (lambda n: m.optimize_interference(n, static)[0],
                        lambda n: m.optimize_inference_fast(n, static)[0],
                        lambda n: m.optimize_inference_for_dag(n, ["x"])[0]):
            self.assertEqual(parity.serial_clobbers(net, planner(net)), [])

    def test_dag_release_at_last_writer(self):
        # op 2 writes a again (not in place) after its only read (op 1). Caffe2 frees a at op 1
        # and hands its buffer to f, written by op 2 beside a: one op writes two outputs into
        # one buffer. With the rule a is released by op 2 itself, pushed after op 2's outputs
        # are served (f gets nothing), and g takes it at op 3 (a before b in the pool's order).
        # optimize-net --planner memonger-dag --head x answers the same.
        net = net_of([("Relu", ["x"], ["a"]), ("Relu", ["a"], ["b"]),
                      ("Split", ["b"], ["a", "f"]), ("Relu", ["f"], ["g"]),
                      ("Relu", ["g"], ["h"])], external_input=["x"], external_output=["h"])
        plain, renames = m.optimize_inference_for_dag(net, ["x"])
        self.assertEqual(renames, {"f": "__m0_shared", "a": "__m0_shared",
                                   "g": "__m1_shared", "b": "__m1_shared"})
        self.assertEqual(plain["op"][2]["output"], ["__m0_shared", "__m0_shared"])
        kept, renames = m.optimize_inference_for_dag(net, ["x"], keep_until_last_write=True)
        self.assertEqual(renames, {"g": "__m0_shared", "a": "__m0_shared"})
        self.assertEqual([op["output"] for op in kept["op"]],
                         [["__m0_shared"], ["b"], ["__m0_shared", "f"], ["__m0_shared"], ["h"]])
        # The rule does not change a net whose names are each written once.
        once = net_of(self.SAFE_REWRITE[:4], external_input=["x"], external_output=["g"])
        self.assertEqual(m.optimize_inference_for_dag(once, ["x"])[1],
                         m.optimize_inference_for_dag(once, ["x"],
                                                      keep_until_last_write=True)[1])

    def test_classifier(self):
        net = self.net()
        case = {"net": net}
        oracle = m.optimize_interference(net, {"x", "h"})[0]
        tool = m.optimize_interference(net, {"x", "h"}, keep_until_last_write=True)[0]
        last_write = lambda real_devices=False, no_dont_share=False: tool  # noqa: E731
        kind, note = parity.classify_deviation("greedy", case, oracle, False, tool, "", False,
                                               last_write=last_write)
        self.assertEqual(kind, "last-write")
        self.assertIn("(alone)", note)
        self.assertIn("written again after their last read: a", note)
        # Not when the tool's net is another one (here: no sharing at all), nor without the
        # variant.
        self.assertIsNone(parity.classify_deviation("greedy", case, oracle, False, net, "",
                                                    False, last_write=last_write))
        self.assertIsNone(parity.classify_deviation("greedy", case, oracle, False, tool, "",
                                                    False))
        # Against the serial re-run of a parallel plan (where parallel-model does not hold:
        # the serial net is not the oracle's).
        kind, note = parity.classify_deviation("greedy", case, oracle, False, net, "", False,
                                               serial=lambda: (tool, ""),
                                               last_write=last_write)
        self.assertEqual(kind, "last-write")
        self.assertIn("against the tool re-run with --execution serial", note)

    def test_parity_runs_have_the_variant(self):
        case = caffe2_nets.mlp_case()
        for run in parity.runs_for(case, 100):
            self.assertIsNotNone(run.last_write, run.label)
            self.assertIsNone(parity.first_difference(run.last_write()()[0], run.oracle()[0]),
                              run.label)  # the MLP writes no name twice


class VersionCountdownTest(unittest.TestCase):
    """memonger_ref's count_down_own_version option and the version-countdown classifier (the
    tool's rule of docs/memonger.md, "Which consumers a write counts down"). The tool nets
    below are optimize-net's answers, --planner memonger-dag --mode inference --head .. on a
    net of type dag (parallel) and with --execution serial."""

    # Heads [a, b]: memonger visits op 3 (a -> q, a rewrite of q) first, from head a, and its
    # write of q counts down op 2, whose in-degree counted only op 1's write: op 2 reaches
    # its in-degree early, inside a's traversal, and nothing is shared. The tool counts op 2
    # down only for op 1's write (op 2 reads the version op 1 writes) and shares p and r.
    REWRITE = [("Relu", ["b"], ["p"]), ("Relu", ["p"], ["q"]), ("Relu", ["q"], ["r"]),
               ("Relu", ["a"], ["q"])]
    # The case00166 shape: op 5 rewrites s; memonger's count-down of op 2 (a reader of op 0's
    # version) visits op 2 inside op 5's traversal, with its tokens, and g takes h's buffer.
    CASE00166 = [("Relu", ["x"], ["s"]), ("Relu", ["s"], ["f"]), ("Relu", ["s"], ["g"]),
                 ("Sum", ["f", "f"], ["h"]), ("Relu", ["h"], ["k"]), ("Relu", ["k"], ["s"]),
                 ("Relu", ["f"], ["z"])]

    def renames(self, net, heads, **options):
        return m.optimize_inference_for_dag(net, heads, verify=False, **options)[1]

    def classify(self, net, heads, tool, serial):
        oracle = m.optimize_inference_for_dag(net, heads, verify=False)[0]
        verifier_fails = not (m.verify_graph_equality(net, oracle)
                              and m.verify_inplace_blobs(net, oracle))
        last_write = lambda: m.optimize_inference_for_dag(  # noqa: E731
            net, heads, verify=False, keep_until_last_write=True)[0]
        version_countdown = lambda last_write=False: m.optimize_inference_for_dag(  # noqa
            net, heads, verify=False, keep_until_last_write=last_write,
            count_down_own_version=True)[0]
        return parity.classify_deviation(
            "dag-inference", {"net": net}, oracle, verifier_fails, tool, "", True,
            serial=lambda: (serial, ""), last_write=last_write,
            version_countdown=version_countdown)

    def test_rewrite_of_a_read_name(self):
        net = net_of(self.REWRITE, external_input=["a", "b"], type_="dag")
        self.assertEqual(self.renames(net, ["a", "b"]), {})
        self.assertEqual(self.renames(net, ["a", "b"], keep_until_last_write=True), {})
        shared = {"p": "__m0_shared", "r": "__m0_shared"}
        self.assertEqual(self.renames(net, ["a", "b"], count_down_own_version=True), shared)
        # Heads [b, a]: op 2 is visited before op 3 either way; the rules agree.
        self.assertEqual(self.renames(net, ["b", "a"]), shared)
        self.assertEqual(self.renames(net, ["b", "a"], count_down_own_version=True), shared)
        # The tool: serially the count_down_own_version net; in parallel the same with op 3's
        # unordered rewrite of q kept apart.
        serial = m.optimize_inference_for_dag(net, ["a", "b"], verify=False,
                                              count_down_own_version=True)[0]
        tool = net_of([("Relu", ["b"], ["__m0_shared"]), ("Relu", ["__m0_shared"], ["q"]),
                       ("Relu", ["q"], ["__m0_shared"]), ("Relu", ["a"], ["q__v1"])],
                      external_input=["a", "b"], type_="dag")
        kind, note = self.classify(net, ["a", "b"], tool, serial)
        self.assertEqual(kind, "version-countdown")
        self.assertIn("(against the tool re-run with --execution serial)", note)
        self.assertIn("op 3 Relu writes q", note)
        # Not when the serial re-run is another net, nor without the variant.
        self.assertIsNone(self.classify(net, ["a", "b"], tool, tool))
        self.assertIsNone(parity.classify_deviation("dag-inference", {"net": net}, net, False,
                                                    serial, "", True))

    def test_case00166_shape(self):
        net = net_of(self.CASE00166, external_input=["x"], type_="dag")
        self.assertEqual(self.renames(net, ["x"]), {"g": "__m0_shared", "h": "__m0_shared"})
        self.assertEqual(self.renames(net, ["x"], count_down_own_version=True), {})
        self.assertEqual(self.renames(net, ["x"], count_down_own_version=True,
                                      keep_until_last_write=True), {})
        tool = net_of([("Relu", ["x"], ["s"]), ("Relu", ["s"], ["f"]), ("Relu", ["s"], ["g"]),
                       ("Sum", ["f", "f"], ["__m0_shared"]), ("Relu", ["__m0_shared"], ["k"]),
                       ("Relu", ["k"], ["__m0_shared"]), ("Relu", ["f"], ["z"])],
                      external_input=["x"], type_="dag")
        kind, note = self.classify(net, ["x"], tool, net)  # serially: nothing shared
        self.assertEqual(kind, "version-countdown")
        self.assertIn("against the tool re-run with --execution serial", note)
        # The tool's net alone (parallel) is not explained by the rule.
        self.assertIsNone(self.classify(net, ["x"], tool, tool))

    def test_does_not_apply(self):
        # No in-place op, no rewrite of a name, no traversed writer of a head: the two rules
        # are identical, so a tool net that differs from Caffe2's is not excused.
        net = net_of(LastWriteTest.SAFE_REWRITE[:4], external_input=["x"],
                     external_output=["g"], type_="dag")
        plain, renames = m.optimize_inference_for_dag(net, ["x"])
        self.assertEqual(renames, {"a": "__m0_shared", "e": "__m0_shared"})
        self.assertEqual(self.renames(net, ["x"], count_down_own_version=True), renames)
        self.assertIsNone(self.classify(net, ["x"], net, net))
        # Training: the MLP writes no name twice.
        case = caffe2_nets.mlp_case()
        for run in parity.runs_for(case, 100):
            if run.is_dag:
                self.assertIsNone(parity.first_difference(run.version_countdown()()[0],
                                                          run.oracle()[0]), run.label)
            else:
                self.assertIsNone(run.version_countdown, run.label)


class ParallelModelTest(unittest.TestCase):
    """parity's parallel-model classifier: ops 1 and 3 both write c and nothing orders them
    but the name, so optimize-net's parallel model keeps the first write apart (the names
    below are its answer for this net, --planner memonger-dag --head x); serially it agrees
    with Caffe2."""

    OPS = [("Relu", ["x"], ["a"]), ("Copy", ["a"], ["c"]), ("Relu", ["x"], ["r"]),
           ("Relu", ["r"], ["c"]), ("Sum", ["c", "a"], ["c"])]

    def test_plans_parallel(self):
        dag, simple = {"type": "dag"}, {"type": "simple"}
        self.assertTrue(parity.plans_parallel(dag, ["--planner", "memonger-dag"]))
        self.assertTrue(parity.plans_parallel({"type": "async_scheduling"}, []))
        self.assertFalse(parity.plans_parallel(simple, []))
        self.assertFalse(parity.plans_parallel({}, []))
        self.assertFalse(parity.plans_parallel(dag, ["--execution", "serial"]))
        self.assertTrue(parity.plans_parallel(simple, ["--execution", "parallel"]))
        self.assertEqual(parity.serial_flags(["--planner", "p", "--execution", "parallel"]),
                         ["--planner", "p", "--execution", "serial"])
        case = caffe2_nets.mlp_case()
        case["net"]["type"] = "dag"
        parallel = {run.label for run in parity.runs_for(case, 100)
                    if parity.plans_parallel(case["net"], run.flags)}
        self.assertEqual(parallel, {"dag-inference", "fast", "dag-training", "dag-training+act",
                                    "dag-training+shapes", "dag-training+act+shapes"})

    def test_classifier(self):
        net = net_of(self.OPS, external_input=["x"], external_output=["c"], type_="dag")
        case = {"net": net}
        oracle, renames = m.optimize_inference_for_dag(net, ["x"])
        self.assertEqual(renames, {})
        tool = net_of([("Relu", ["x"], ["a"]), ("Copy", ["a"], ["c__mg2"]),
                       ("Relu", ["x"], ["r"]), ("Relu", ["r"], ["c"]),
                       ("Sum", ["c", "a"], ["c"])])
        kind, note = parity.classify_deviation("dag-inference", case, oracle, False, tool, "",
                                               True, serial=lambda: (oracle, ""))
        self.assertEqual(kind, "parallel-model")
        self.assertEqual(note, "the tool re-run with --execution serial equals the oracle's net")
        # Not when the serial re-run differs too, or failed.
        self.assertIsNone(parity.classify_deviation("dag-inference", case, oracle, False, tool,
                                                    "", True, serial=lambda: (tool, "")))
        self.assertIsNone(parity.classify_deviation("dag-inference", case, oracle, False, tool,
                                                    "", True,
                                                    serial=lambda: (None, "exit 1: x")))

    def test_real_devices_in_training(self):
        # DAG training: the serial re-run may equal the oracle with real_devices=True.
        t = TrainingDeviationTest()
        gpu = t.case(True)
        gpu["net"]["type"] = "dag"
        oracle, real = t.plan(gpu), t.plan(gpu, real_devices=True)
        kind, note = parity.classify_deviation(
            "dag-training+act+shapes", gpu, oracle, False, gpu["net"], "", True,
            real_devices=lambda: (real, {}), serial=lambda: (real, ""))
        self.assertEqual(kind, "parallel-model")
        self.assertIn("real_devices=True", note)


class GeneratorTest(unittest.TestCase):
    def test_random_cases_are_well_formed_and_round_trip(self):
        for i in range(300):
            case = caffe2_nets.random_case(random.Random(i), str(i))
            caffe2_nets.check_well_formed(case)
            text = caffe2_nets.write_pbtxt(case["net"])
            self.assertEqual(caffe2_nets.parse_pbtxt(text), case["net"])

    def test_memonger_test_nets_are_well_formed(self):
        for case in (caffe2_nets.mlp_case(), caffe2_nets.mlp_case("name_x/", n_fc=5),
                     caffe2_nets.mix_cpu_gpu_case(), caffe2_nets.tree_case(),
                     caffe2_nets.daggy_case(), caffe2_nets.daggy_case(harder=True)):
            caffe2_nets.check_well_formed(case)

    def test_autosplit_in_tree(self):
        net = caffe2_nets.tree_case()["net"]
        sums = [op for op in net["op"] if op["type"] == "Sum"]
        self.assertEqual([(op["input"], op["output"]) for op in sums],
                         [(["name_x/fc5_grad", "_name_x/fc5_grad_autosplit_0"],
                           ["name_x/fc5_grad"])])

    def test_text_format_parser(self):
        net = caffe2_nets.parse_pbtxt(
            "# comment\nname: 'n\\'1' op < input: \"a\\001\" \"b\" output: [\"c\"]\n"
            " type: 'T' arg: { name: 'v' f: 1.5f } arg { name: 'l' ints: [1, -2] }\n"
            " device_option { device_type: 1 cuda_gpu_id: 1 } >; external_input: \"a\\001b\"")
        self.assertEqual(net, {"name": "n'1", "type": "", "external_input": ["a\x01b"],
                               "external_output": [],
                               "op": [{"type": "T", "input": ["a\x01b"], "output": ["c"],
                                       "device": (1, 1), "arg": {"v": 1.5, "l": [1, -2]}}]})


if __name__ == "__main__":
    unittest.main()
