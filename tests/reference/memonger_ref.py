"""Reference port of Caffe2's memonger, for differential tests of our C++ planners.

Written from /work/shared/reference/memonger-algorithms.md ("the notes"; section numbers below
are the notes' sections). Standard library only. Blobs are names, as in Caffe2.

A net is a plain dict:

    {"name": str, "type": "" | "simple" | "dag",
     "external_input": [names], "external_output": [names],
     "op": [{"type": str, "input": [names], "output": [names],
             "device": (device_type, gpu_id), "arg": {name: value}}, ...]}

An op may leave out "device" (CPU 0, i.e. (0, 0)) and "arg"; "engine" and "is_gradient_op" are
read when present. Every planner deep-copies the net and returns (optimized_net, renames), where
renames maps each blob name that changed to its new name.

Three options model documented rules of optimize-net that are not Caffe2's; all default to
False, which is Caffe2 exactly: `real_devices` (DAG planners: the device of a blob no traversed
op writes is its writer's, not CPU 0), `keep_until_last_write` (every planner: a blob is not
free before the last write of its name as well as its last read; see compute_ranges,
optimize_inference_fast and compute_blob_recycling_for_dag for each planner's form) and
`count_down_own_version` (DAG planners: a write counts down only the consumers whose in-degree
counted it; see compute_blob_recycling_for_dag).

What is left out: the schema check of the pytorch versions, RecurrentNetwork step nets and AsyncIf
subnets (our nets have none), logging, timings, and `networkx` orderings (optimize_interference
keeps the net's own op order, see there).
"""

import collections
import copy
import sys

CPU = (0, 0)

# ---------------------------------------------------------------------------------------------
# Helpers on the net dict


def op_device(op):
    """(device_type, gpu_id) of an op; CPU 0 when the op has none."""
    return tuple(op.get("device", CPU))


def blob_names(net):
    """Distinct names over op inputs and outputs, in order of first appearance."""
    seen = {}
    for op in net["op"]:
        for b in list(op["input"]) + list(op["output"]):
            seen.setdefault(b, None)
    return list(seen)


def count_blobs(net):
    """memonger_test.py's count_blobs: distinct names over op inputs and outputs (section 11)."""
    return len(blob_names(net))


def _rename_ops(net, rename):
    """Renames every op's inputs and outputs through `rename` (external I/O untouched)."""
    for op in net["op"]:
        op["input"] = [rename(b) for b in op["input"]]
        op["output"] = [rename(b) for b in op["output"]]


# ---------------------------------------------------------------------------------------------
# libstdc++'s heap algorithms with std::greater<std::pair<int, std::string>>
#
# ComputeBlobRecyclingForDag keeps its free pool in a std::vector handled by std::push_heap and
# std::pop_heap, and erases from its middle; the size-aware choice scans the vector in array
# order, so the exact layout matters. Python's (int, str) tuples order like std::pair<int,
# std::string> for ASCII names. comp(a, b) = a > b (std::greater): a min-heap.


def _heap_sift_up(heap, hole, top, value):
    """std::__push_heap: moves `value` up from `hole` while its parent compares greater."""
    parent = (hole - 1) // 2
    while hole > top and heap[parent] > value:
        heap[hole] = heap[parent]
        hole = parent
        parent = (hole - 1) // 2
    heap[hole] = value


def _heap_adjust(heap, hole, length, value):
    """std::__adjust_heap: sinks the hole to a leaf along the child that should come first
    (the right one unless it compares greater than the left), then sifts `value` up."""
    top = hole
    child = hole
    while child < (length - 1) // 2:
        child = 2 * (child + 1)
        if heap[child] > heap[child - 1]:
            child -= 1
        heap[hole] = heap[child]
        hole = child
    if (length & 1) == 0 and child == (length - 2) // 2:
        child = 2 * (child + 1)
        heap[hole] = heap[child - 1]
        hole = child - 1
    _heap_sift_up(heap, hole, top, value)


def push_heap(heap, value):
    """vector.push_back(value); std::push_heap(begin, end, greater)."""
    heap.append(value)
    _heap_sift_up(heap, len(heap) - 1, 0, value)


def pop_heap(heap):
    """std::pop_heap(begin, end, greater); back(); pop_back(). Returns the popped element."""
    if len(heap) > 1:
        last = len(heap) - 1
        value = heap[last]
        heap[last] = heap[0]
        _heap_adjust(heap, 0, last, value)
    return heap.pop()


# ---------------------------------------------------------------------------------------------
# libstdc++'s std::unordered_set<std::string> iteration order
#
# optimize_inference_net collects the blobs an op frees in a std::unordered_set<std::string> and
# pushes them in the set's iteration order, so the order is the standard library's. This models
# libstdc++ (GCC 12, Debian 12; 64-bit size_t) for a set that only grows by insertion from empty:
#
#   hash      std::hash<std::string> is std::_Hash_bytes(data, len, 0xc70f6907), a 64-bit
#             MurmurHash2 variant (libsupc++/hash_bytes.cc), over the name's bytes (UTF-8, as
#             the text NetDef holds them);
#   bucket    hash % bucket_count;
#   insert    a new node goes first in its bucket when the bucket has nodes (the buckets' nodes
#             are contiguous in one singly linked list that starts at _M_before_begin), else at
#             the head of the whole list; an equal name already there is not inserted again;
#   rehash    before inserting into a set of n names with n + 1 > bucket_count (max load factor
#             1.0), the bucket count grows along _GROWING_SET_BUCKET_COUNTS and the old list is
#             re-inserted node by node, in its order, by the same rule; iteration walks the list.
#
# _Prime_rehash_policy grows an empty set (1 bucket, _M_next_resize 0) to 13 buckets at the first
# insert (_M_next_bkt(12) from its small table), then to the first prime of __prime_list not
# below twice the count each time the size would pass it. The counts below were printed by that
# policy in the real library (its _M_need_rehash, and bucket_count() of a real set up to 5,087).
_MASK64 = (1 << 64) - 1
_MURMUR_MUL = 0xc6a4a7935bd1e995
_STRING_HASH_SEED = 0xc70f6907
_GROWING_SET_BUCKET_COUNTS = (
    13, 29, 59, 127, 257, 541, 1109, 2357, 5087, 10273, 20753, 42043, 85229, 172933, 351061,
    712697, 1447153, 2938679, 5967347, 12117689, 24607243, 49969847, 101473717, 206062531,
    418451333, 849749479, 1725587117, 3504151727, 8589934583)


def _shift_mix(v):
    return v ^ (v >> 47)


def std_string_hash(name):
    """std::hash<std::string>()(name) of libstdc++ on a 64-bit target: std::_Hash_bytes."""
    data = name.encode("utf-8")
    length = len(data)
    aligned = length & ~7
    h = _STRING_HASH_SEED ^ ((length * _MURMUR_MUL) & _MASK64)
    for p in range(0, aligned, 8):
        word = int.from_bytes(data[p:p + 8], "little")  # unaligned_load
        h ^= (_shift_mix((word * _MURMUR_MUL) & _MASK64) * _MURMUR_MUL) & _MASK64
        h = (h * _MURMUR_MUL) & _MASK64
    if length & 7:
        h ^= int.from_bytes(data[aligned:], "little")  # load_bytes
        h = (h * _MURMUR_MUL) & _MASK64
    h = (_shift_mix(h) * _MURMUR_MUL) & _MASK64
    return _shift_mix(h)


def _hashtable_insert(nodes, bucket_count, name, hash_code):
    """_M_insert_bucket_begin: `name` first in its bucket, or at the head of the list."""
    bucket = hash_code % bucket_count
    for k, (_, other_hash) in enumerate(nodes):
        if other_hash % bucket_count == bucket:
            nodes.insert(k, (name, hash_code))
            return
    nodes.insert(0, (name, hash_code))


def unordered_set_order(names):
    """The iteration order of a std::unordered_set<std::string> into which `names` were
    inserted in order (repeats ignored), as libstdc++ iterates it. O(n^2) for n names."""
    nodes = []  # (name, hash) in list order
    present = set()
    bucket_count = 1
    growth = iter(_GROWING_SET_BUCKET_COUNTS)
    for name in names:
        if name in present:
            continue
        present.add(name)
        if len(nodes) + 1 > bucket_count:
            bucket_count = next(growth)
            old, nodes = nodes, []
            for node in old:  # _M_rehash_aux: the old list in its order
                _hashtable_insert(nodes, bucket_count, *node)
        _hashtable_insert(nodes, bucket_count, name, std_string_hash(name))
    return [name for name, _ in nodes]


# ---------------------------------------------------------------------------------------------
# Section 2: the DAG token algorithm (memonger.cc, ComputeBlobRecyclingForDag)


class MemongerError(Exception):
    """A CAFFE_ENFORCE or Python assertion of memonger failed."""


def _int32(x):
    """Wraps to a 32-bit signed int, as memonger's `int` sizes do."""
    x &= 0xFFFFFFFF
    return x - (1 << 32) if x >= (1 << 31) else x


def infer_blob_size(name, blob_shapes):
    """Element count of a blob as a 32-bit int; 0 when its shape is unknown (section 2)."""
    if name not in blob_shapes:
        return 0
    size = 1
    for d in blob_shapes[name]:
        size = _int32(size * d)
    return size


class _DagRecycler:
    """One run of ComputeBlobRecyclingForDag::OptimizeNet (section 2), per-name bookkeeping."""

    def __init__(self, net, heads, op_indices, shareable, namescope, dont_share, blob_shapes,
                 real_devices=False, keep_until_last_write=False, count_down_own_version=False):
        self.net = net
        self.count_down_own_version = count_down_own_version
        # count_down_own_version: each traversed op's position in op_indices (in-degrees count
        # the writes of earlier positions).
        self.position = {}
        for k, i in enumerate(op_indices):
            self.position.setdefault(i, k)
        self.real_devices = real_devices
        self.keep_until_last_write = keep_until_last_write
        self.heads = list(heads)
        self.op_indices = list(op_indices)
        self.shareable = set(shareable)
        self.namescope = namescope
        self.dont_share = set(dont_share)
        self.blob_shapes = dict(blob_shapes)
        n = len(net["op"])
        self.op_inputs = [0] * n  # required in-degree
        self.op_visited_count = [0] * n
        self.op_token_deposit = [set() for _ in range(n)]
        self.op_visited = [False] * n
        self.tokens_counter = 1
        self.blob_to_ops = collections.defaultdict(list)  # consumers, one per input occurrence
        self.blob_input_count = collections.defaultdict(int)  # seen count
        self.share_counts = collections.defaultdict(int)
        self.blob_sizes = {}
        self.req_tokens = collections.defaultdict(set)
        self.optim_op_outputs = set()
        self.mapping = {}  # blob -> canonical blob, in order of assignment
        self.blob_device = {}
        self.processed_output_blobs = set()
        # keep_until_last_write: the (op index, name) writes that write a name again (a
        # traversed op, not in place, after an earlier version of the name), how many each
        # name has, and how many the traversal has visited.
        self.rewrites = set()
        self.later_writers = collections.defaultdict(int)
        self.later_seen = collections.defaultdict(int)

    def blob_or_mapped(self, name):
        return self.mapping.get(name, name)

    def device_of(self, name):
        return self.blob_device.get(name, CPU)  # heads and external blobs: CPU 0

    def setup(self):
        """Setup steps 2 and 3."""
        ops = self.net["op"]
        heads = set(self.heads)
        # Step 2 (PR #48021): only shareable outputs not in dont_share are optimizable.
        for i in self.op_indices:
            for out in ops[i]["output"]:
                if out in self.shareable and out not in self.dont_share:
                    self.optim_op_outputs.add(out)
        # Step 3: in-degrees (writes so far of each read name), consumers, devices.
        blob_seen = {}
        for i in self.op_indices:
            op = ops[i]
            for inp in op["input"]:
                if inp in self.shareable or inp in heads:
                    if inp in self.optim_op_outputs:
                        if inp not in blob_seen:
                            raise MemongerError(
                                "Input %s was not output by an op before" % inp)
                        self.op_inputs[i] += blob_seen[inp]
                    else:
                        self.share_counts[inp] = 1
                    self.blob_to_ops[inp].append(i)
            for out in op["output"]:
                blob_seen[out] = blob_seen.get(out, 0) + 1
                # CopyGPUToCPU runs under a GPU device option but writes CPU memory.
                self.blob_device[out] = CPU if op["type"] == "CopyGPUToCPU" else op_device(op)
        if self.real_devices:
            self.blob_device = dict(real_blob_devices(ops), **self.blob_device)
        if self.keep_until_last_write:
            traversed = set(self.op_indices)
            written = set(self.net["external_input"])  # names with an earlier version
            for i, op in enumerate(ops):
                for out in op["output"]:
                    if (i in traversed and out in written and out not in op["input"]
                            and (i, out) not in self.rewrites):
                        self.rewrites.add((i, out))
                        self.later_writers[out] += 1
                written.update(op["output"])

    def run(self):
        self.setup()
        # Step 4 (PR #47718): roots are unvisited consumers of a head with in-degree 0; each
        # gets a fresh empty pool and one new token.
        for head in self.heads:
            for i in list(self.blob_to_ops[head]):
                if not self.op_visited[i] and not self.op_inputs[i]:
                    pool = []
                    tokens = {self.tokens_counter}
                    self.tokens_counter += 1
                    self.process_op(i, pool, tokens)
        return self.rename()

    def can_use_blob(self, name, tokens, device):
        """Same device type and GPU id, and every token stamped on the blob is held."""
        if self.device_of(name) != device:
            return False
        return self.req_tokens[name] <= tokens

    def get_free_blob(self, name, tokens, pool, device):
        """Section 2, get_free_blob: size-blind when no shapes were given, else size-aware."""
        if not self.blob_shapes:
            # Pop until a usable candidate appears; push the rejected ones back.
            rejected = []
            found = ""
            while pool:
                cand = pop_heap(pool)
                if self.can_use_blob(cand[1], tokens, device):
                    found = cand[1]
                    break
                rejected.append(cand)
            for cand in rejected:
                push_heap(pool, cand)
            return found
        # Scan the heap array in array order; a usable candidate replaces the best when it is
        # at least as large and the best is still too small or no smaller than it.
        required = infer_blob_size(name, self.blob_shapes)
        best_size = -1
        best_index = -1
        for i, (_, cand) in enumerate(pool):
            if self.can_use_blob(cand, tokens, device):
                cand_size = self.blob_sizes[cand]
                if cand_size >= best_size and (best_size < required or best_size >= cand_size):
                    best_size = cand_size
                    best_index = i
        if best_index == -1:
            return ""
        found = pool[best_index][1]
        del pool[best_index]  # vector::erase: the array is no longer a heap
        return found

    def process_op(self, op_index, pool, tokens):
        """Section 2, process_op. `tokens` is this call's own set (the caller's copy)."""
        tokens |= self.op_token_deposit[op_index]
        self.op_token_deposit[op_index] = set()
        if self.op_visited[op_index]:
            raise MemongerError("op %d visited twice" % op_index)
        self.op_visited[op_index] = True
        op = self.net["op"][op_index]

        # Stamp the tokens on every blob touched (and on its canonical blob).
        for b in list(op["input"]) + list(op["output"]):
            actual = self.blob_or_mapped(b)
            self.req_tokens[actual] |= tokens
            if actual != b:
                self.req_tokens[b] |= tokens

        # Release: a shareable input whose consumer entries have all been seen (and, with
        # keep_until_last_write, whose name's later writers have all been visited).
        new_free = []
        new_free_set = set()
        lw = self.keep_until_last_write
        for inp in op["input"]:
            if inp in self.shareable:
                self.blob_input_count[inp] += 1
                if (self.blob_input_count[inp] == len(self.blob_to_ops.get(inp, ()))
                        and (not lw or self.later_seen[inp] == self.later_writers[inp])):
                    actual = self.blob_or_mapped(inp)
                    if actual not in self.dont_share:
                        new_free.append((-self.share_counts[actual], actual))
                        new_free_set.add(actual)
        # keep_until_last_write: a later writer of a name releases it when it is the last one
        # and every consumer has been seen (pushed with the input releases, after the outputs).
        for out in op["output"] if lw else ():
            if (op_index, out) in self.rewrites and out in self.shareable:
                self.later_seen[out] += 1
                if (self.later_seen[out] == self.later_writers[out]
                        and self.blob_input_count[out] == len(self.blob_to_ops.get(out, ()))):
                    actual = self.blob_or_mapped(out)
                    if actual not in self.dont_share and actual not in new_free_set:
                        new_free.append((-self.share_counts[actual], actual))
                        new_free_set.add(actual)

        # Assign: shareable outputs written here for the first time, not freed here.
        for out in op["output"]:
            if (out in self.shareable and out not in self.processed_output_blobs
                    and out not in new_free_set):
                freed = self.get_free_blob(out, tokens, pool, self.device_of(out))
                if freed:
                    self.req_tokens[freed] |= tokens
                    self.share_counts[freed] += 1
                    self.mapping[out] = freed
                self.processed_output_blobs.add(out)

        # Push the newly freed blobs; the duplicate check is against the pool as it was
        # before this loop (memonger builds that set once).
        in_pool = {name for _, name in pool}
        for entry in new_free:
            if entry[1] not in in_pool:
                if self.blob_shapes and entry[1] not in self.blob_sizes:
                    self.blob_sizes[entry[1]] = infer_blob_size(entry[1], self.blob_shapes)
                push_heap(pool, entry)

        # Descend: count every consumer of every output down; visit those that reach their
        # in-degree, with a fresh token when the outputs have several consumer entries.
        # count_down_own_version: only the consumer entries whose in-degree counted this write.
        counted = {out: self.counted_consumers(op_index, out) for out in op["output"]}
        branches = sum(len(counted[out]) for out in op["output"])
        for out in op["output"]:
            for consumer in counted[out]:
                self.op_visited_count[consumer] += 1
                if self.op_visited_count[consumer] == self.op_inputs[consumer]:
                    new_tokens = set(tokens)
                    if branches > 1:
                        new_tokens.add(self.tokens_counter)
                        self.tokens_counter += 1
                    self.process_op(consumer, pool, new_tokens)
                elif not self.op_visited[consumer]:
                    self.op_token_deposit[consumer] |= tokens

    def counted_consumers(self, op_index, out):
        """The consumer entries of `out` that op `op_index`'s write of it counts down: all of
        them (Caffe2), or with count_down_own_version only those whose in-degree counted this
        write: `out` optimizable (else no in-degree counted a write of it) and the reader after
        the writer in op_indices (a reader of this version or of a later one; an in-place
        writer's own read, and earlier readers, read an earlier version)."""
        consumers = list(self.blob_to_ops.get(out, ()))
        if not self.count_down_own_version:
            return consumers
        if out not in self.optim_op_outputs:
            return []
        here = self.position[op_index]
        return [c for c in consumers if self.position[c] > here]

    def rename(self):
        """Section 2, Renaming. Caffe2 iterates an unordered_map here, so its __m<idx> numbers
        are arbitrary; we number canonical blobs in the order they were first assigned, and
        callers compare names up to a renumbering."""
        renamed = {}
        idx = 0
        for canonical in list(self.mapping.values()):
            if canonical in self.optim_op_outputs:
                if canonical not in renamed:
                    renamed[canonical] = "%s__m%d_shared" % (self.namescope, idx)
                    idx += 1
            else:
                renamed.setdefault(canonical, canonical)
        for k, v in renamed.items():
            self.mapping.setdefault(k, v)
        # memonger's fix-point loop never sets its flag: exactly one pass.
        for k, v in list(self.mapping.items()):
            if v in renamed and renamed[v] != v:
                renamed[k] = renamed[v]
                self.mapping[k] = renamed[k]
        out = copy.deepcopy(self.net)
        _rename_ops(out, self.blob_or_mapped)
        renames = {k: v for k, v in self.mapping.items() if k != v}
        return out, renames


def real_blob_devices(ops):
    """The device of every blob the ops touch, as optimize-net sees it: the device of the op
    that writes it (the last writer, as Caffe2's setup loop keeps), except that CopyGPUToCPU
    outputs are CPU 0; a blob no op writes takes the device of its first reader."""
    devices = {}
    for op in ops:
        for b in op["output"]:
            devices[b] = CPU if op["type"] == "CopyGPUToCPU" else op_device(op)
    for op in ops:
        for b in op["input"]:
            devices.setdefault(b, op_device(op))
    return devices


def compute_blob_recycling_for_dag(net, heads, op_indices, shareable_blobs, namescope,
                                   dont_share_blobs, blob_shapes, real_devices=False,
                                   keep_until_last_write=False, count_down_own_version=False):
    """memonger::compute_blob_recycling_for_dag (section 2). `blob_shapes` maps names to dims;
    an empty dict plans size-blind. Returns (net, renames).

    real_devices=False (the default) is Caffe2 exactly: a blob's device is recorded only when
    an op of `op_indices` writes it, and every other blob (a forward activation in training,
    a head, an external input) counts as CPU 0 whatever the device of the op that wrote it,
    so a GPU forward activation can be lent to a CPU gradient but never to a GPU one.
    real_devices=True is optimize-net's rule (not Caffe2's): a blob that no op of
    `op_indices` writes takes the device of the op of the whole net that writes it (see
    real_blob_devices); the devices of blobs written by `op_indices` ops are unchanged.

    keep_until_last_write=False (the default) is Caffe2 exactly: a blob is released once all
    its consumer entries have been seen, even when an op of `op_indices` writes the name again
    later (that write then lands in a buffer already handed on). keep_until_last_write=True is
    optimize-net's safety rule (not Caffe2's): a blob is also kept until every op of
    `op_indices` that writes its name again has been visited, a second, non-in-place write of
    the name (an earlier version exists: written by any op of the net, or an external input);
    when the last such writer is visited after every consumer, the blob is released there, in
    the same newly freed list as that op's input releases (after them, without duplicates),
    pushed after the op's outputs are served. A name no one reads is then released at its last
    rewrite.

    count_down_own_version=False (the default) is Caffe2 exactly: an op writing a blob counts
    down every consumer entry of the name, although a consumer's in-degree counts only the
    writes of the name before it (an in-place writer also counts down the earlier readers of
    the version it overwrites, and a writer of a head or other non-optimizable name counts
    down readers whose in-degree never counted it). count_down_own_version=True is
    optimize-net's rule (docs/memonger.md, "Which consumers a write counts down"; not
    Caffe2's): a write counts down exactly the consumers whose in-degree counted it, the
    readers of the version it writes and of later versions (later in-place writes and later
    rewrites of the name), i.e. the consumer entries after the writer in op_indices, and only
    for an optimizable name; the fresh-token fork counts those entries only. For a net without
    in-place ops or rewrites of a name (and no traversed writer of a head) the two agree."""
    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(max(limit, 10 * len(net["op"]) + 1000))  # memonger recursed too
    try:
        return _DagRecycler(copy.deepcopy(net), heads, op_indices, shareable_blobs, namescope,
                            dont_share_blobs, blob_shapes or {}, real_devices,
                            keep_until_last_write, count_down_own_version).run()
    finally:
        sys.setrecursionlimit(limit)


# ---------------------------------------------------------------------------------------------
# Section 3: share_grad_blobs


def grad_blob_predicate(namescope, param_grads):
    """Section 3 step 1, with the namescope already ending in '/' (or empty)."""
    param_grads = set(param_grads)

    def is_grad_blob(b):
        return (b.endswith("_grad")
                and (b.startswith(namescope) or b.startswith("_" + namescope))
                and b not in param_grads)
    return is_grad_blob


def activation_blobs(net):
    """Section 3 step 3: output b of an op that reads b + "_w", not an external output; the
    last two entries (in op order, repeats included) are dropped."""
    external_output = set(net["external_output"])
    found = []
    for op in net["op"]:
        for b in op["output"]:
            if b + "_w" in op["input"] and b not in external_output:
                found.append(b)
    return set(found[:-2])


def share_grad_blobs(net, losses, param_grads, namescope, dont_share_blobs=None,
                     share_activations=False, blob_shapes=None, verify=True,
                     real_devices=False, keep_until_last_write=False,
                     count_down_own_version=False):
    """memonger.share_grad_blobs (section 3). With verify=False the result is returned even
    when Caffe2's verify_graph_equality / verify_inplace_blobs assertions would fail.
    real_devices=True replaces Caffe2's device rule (forward activations and other blobs no
    gradient op writes count as CPU 0) by optimize-net's (the device of their writer); see
    compute_blob_recycling_for_dag. The default, False, is Caffe2 exactly. So is
    keep_until_last_write=False; True keeps a blob until the last gradient op that writes its
    name again (see compute_blob_recycling_for_dag). count_down_own_version: see
    compute_blob_recycling_for_dag (False: Caffe2 exactly)."""
    if namescope != "" and not namescope.endswith("/"):
        namescope += "/"
    is_grad_blob = grad_blob_predicate(namescope, param_grads)
    activations = activation_blobs(net)
    grad_op_indices = [i for i, op in enumerate(net["op"])
                       if any(is_grad_blob(b) for b in list(op["input"]) + list(op["output"]))]
    shareable = set()
    for op in net["op"]:
        for b in list(op["input"]) + list(op["output"]):
            if is_grad_blob(b) or (share_activations and b in activations):
                shareable.add(b)
    optim, renames = compute_blob_recycling_for_dag(
        net, losses, grad_op_indices, shareable, namescope,
        set(dont_share_blobs or ()), blob_shapes or {}, real_devices, keep_until_last_write,
        count_down_own_version)
    if verify:
        _assert_verified(net, optim)
    return optim, renames


def _assert_verified(net, optim):
    if not verify_graph_equality(net, optim):
        raise MemongerError("Memonger graph is not equal to original.")
    if not verify_inplace_blobs(net, optim):
        raise MemongerError("Inplace assignments differ in memonger net.")


# ---------------------------------------------------------------------------------------------
# Section 4: optimize_inference_for_dag


def optimize_inference_for_dag(net, input_blobs, namescope="", verify=True,
                               keep_until_last_write=False, count_down_own_version=False):
    """memonger.optimize_inference_for_dag (section 4): all ops, activations (neither external
    input nor external output) shareable, no dont_share, never size-aware.
    keep_until_last_write, count_down_own_version: see compute_blob_recycling_for_dag (False:
    Caffe2 exactly)."""
    external = set(net["external_input"]) | set(net["external_output"])
    activations = set()
    seen_as_output = set()
    for op in net["op"]:
        for b in op["input"]:
            if b not in external:
                activations.add(b)
                if b not in seen_as_output:
                    raise MemongerError("%s not in external input" % b)
        for b in op["output"]:
            if b not in external:
                activations.add(b)
        seen_as_output |= set(op["output"])
        if op.get("is_gradient_op", False):
            raise MemongerError(
                "You can only pass inference-only nets to optimize_inference_for_dag")
    optim, renames = compute_blob_recycling_for_dag(
        net, input_blobs, range(len(net["op"])), activations, namescope, set(), {},
        keep_until_last_write=keep_until_last_write,
        count_down_own_version=count_down_own_version)
    if verify:
        _assert_verified(net, optim)
    return optim, renames


# ---------------------------------------------------------------------------------------------
# Section 5: optimize_inference_fast (memonger::optimize_inference_net)


def optimize_inference_fast(net, static_blobs, keep_until_last_write=False):
    """Single pass with a LIFO stack of free names (section 5). The blobs an op frees go into a
    std::unordered_set<std::string> (each freed input's name, or the name of the buffer it took),
    and are pushed in that set's iteration order (unordered_set_order), after the op's outputs
    are served.

    keep_until_last_write=False (the default) is Caffe2 exactly: a range ends at the blob's last
    read. True is optimize-net's safety rule (not Caffe2's): a later write of a name extends its
    range to that step (a name is still only freed by a reader, at the step its range ends)."""
    if net.get("type", "") not in ("", "simple"):
        return copy.deepcopy(net), {}
    if any(op["type"] == "RecurrentNetwork" for op in net["op"]):
        return copy.deepcopy(net), {}
    static_blobs = set(static_blobs)
    ops = net["op"]

    # Step 1: ranges. External inputs never get one; static blobs never do.
    all_blobs = set()
    ranges = {}
    for i, op in enumerate(ops):
        for inp in op["input"]:
            if inp in ranges:
                ranges[inp][1] = i
            all_blobs.add(inp)
        for out in op["output"]:
            all_blobs.add(out)
            if out in static_blobs:
                continue
            if out not in ranges:
                ranges[out] = [i, i]
            elif keep_until_last_write:
                ranges[out][1] = max(ranges[out][1], i)

    # Step 2: one pass.
    free = []  # LIFO stack
    renaming = {}  # canonical -> __m<k>_shared
    mapping = {}  # blob -> canonical
    for i, op in enumerate(ops):
        new_free = []  # inserted into new_free_blobs, in order
        for inp in op["input"]:
            r = ranges.get(inp)
            if r is not None and r[1] == i:
                if inp not in mapping:
                    freed = inp
                    mapping[inp] = inp
                    shared = "__m%d_shared" % len(renaming)
                    if shared in all_blobs:  # already optimized
                        return copy.deepcopy(net), {}
                    renaming[inp] = shared
                else:
                    freed = mapping[inp]
                new_free.append(freed)
        for out in op["output"]:
            if free:
                r = ranges.get(out)
                if r is not None and r[0] == i:
                    mapping[out] = free.pop()
        free.extend(unordered_set_order(new_free))

    # Step 3: rename.
    out_net = copy.deepcopy(net)
    _rename_ops(out_net, lambda b: renaming[mapping[b]] if b in mapping else b)
    renames = {b: renaming[c] for b, c in mapping.items() if renaming[c] != b}
    return out_net, renames


# ---------------------------------------------------------------------------------------------
# Section 6: optimize_interference (linear order, greedy and DP)

LiveRange = collections.namedtuple("LiveRange", ["defined", "used", "size"])


def compute_ranges(linearized_ops, blob_sizes=None, keep_until_last_write=False):
    """Section 6 compute_ranges: blobs in order of first appearance (inputs before outputs).

    keep_until_last_write=False (the default) is Caffe2 exactly: `used` is the last read.
    True is optimize-net's safety rule (not Caffe2's): the range of a blob that is read ends at
    max(last read, last write), so a name written again after its last read stays live until
    that write; a blob never read keeps used=None (used after every other, max_live)."""
    blobs = {}
    for i, op in enumerate(linearized_ops):
        for b in op["input"]:
            r = blobs.get(b, LiveRange(None, None, None))
            used = i if r.used is None else max(r.used, i)
            blobs[b] = r._replace(used=used, size=blob_sizes[b] if blob_sizes else None)
        for b in op["output"]:
            r = blobs.get(b, LiveRange(None, None, None))
            defined = i if r.defined is None else min(r.defined, i)
            blobs[b] = r._replace(defined=defined, size=blob_sizes[b] if blob_sizes else None)
    if keep_until_last_write:
        last_write = {}
        for i, op in enumerate(linearized_ops):
            for b in op["output"]:
                last_write[b] = i
        for b, r in blobs.items():
            if r.used is not None and b in last_write:
                blobs[b] = r._replace(used=max(r.used, last_write[b]))
    return blobs


def get_updated_ranges(ranges, max_live=None):
    """Section 6: defined None -> -1, used None -> largest non-zero used + 1, size None -> 1.
    Like Caffe2, raises ValueError when no blob has a non-zero `used`."""
    if max_live is None:
        max_live = max(r.used for _, r in ranges if r.used) + 1
    out = []
    for name, r in ranges:
        if r.defined is None:
            r = r._replace(defined=-1)
        if r.used is None:
            r = r._replace(used=max_live)
        if r.size is None:
            r = r._replace(size=1)
        out.append((name, r))
    return out


def is_compatible(candidate, chain, static_blobs):
    """Section 6: only the chain's last member matters; strict `>` (no new in-place pair)."""
    name, last = chain[-1]
    if name in static_blobs:
        return False
    if candidate.defined is None or last.defined is None or last.used is None:
        return False
    return candidate.defined > last.used


def _chain_max_size(chain):
    if not chain:
        return 0
    m = max(r.size for _, r in chain)
    return 0 if m is None else m


def get_memory_usage(chains):
    """Plan cost: the sum over chains of the largest member size (section 1)."""
    return sum(_chain_max_size(c) for c in chains)


def compute_assignments_greedy(ranges_sorted, init_assignments=None):
    """Section 6 Greedy: the compatible chain whose max size is nearest (first wins ties)."""
    chains = init_assignments or []
    visited = {name for c in chains for name, _ in c}
    for name, r in ranges_sorted:
        if name in visited:
            continue
        best = None
        min_dist = float("inf")
        size = r.size or 0
        for idx, chain in enumerate(chains):
            if is_compatible(r, chain, []):
                dist = abs(_chain_max_size(chain) - size)
                if dist < min_dist:
                    min_dist = dist
                    best = idx
        if best is not None:
            chains[best].append((name, r))
        else:
            chains.append([(name, r)])
    return chains


def _copy_chains(chains):
    return [list(c) for c in chains]


def compute_assignments_dp(ranges_sorted, init_assignment):
    """Section 6 DP (compute_assignments_dp): exponential, for small inputs only."""

    def compatible_prev(cur, best, cur_idx):
        for k in range(cur_idx - 1, -1, -1):
            if all(is_compatible(cur[1], c, []) for c in best[k]):
                return k
        return -1

    def find_best(window, init, prev_best):
        target = window[-1]
        assert all(not is_compatible(x[1], [target], []) for x in window[:-1])
        candidates = []
        for ii in range(len(init)):
            if not is_compatible(target[1], init[ii], []):
                continue
            cur = _copy_chains(init)
            cur[ii].append(target)
            if len(window) > 1:
                others = [c for i, c in enumerate(cur) if i != ii]
                cur = compute_assignments_dp(window[:-1], others) + [cur[ii]]
            candidates.append(cur)
        candidates.append(list(prev_best) + [[target]])
        return min(candidates, key=get_memory_usage)  # first minimum wins

    init_assignment = init_assignment or []
    best = []
    for ii, cur in enumerate(ranges_sorted):
        prev = compatible_prev(cur, best, ii)
        prev_best = _copy_chains(init_assignment if prev < 0 else best[prev])
        window = ranges_sorted[prev + 1:ii + 1]
        cur_best = find_best(window, prev_best, best[-1] if best else init_assignment)
        assert sum(map(len, cur_best)) == sum(map(len, prev_best)) + len(window)
        best.append(_copy_chains(cur_best))
    return best[-1] if best else []  # Caffe2 raises IndexError on an empty input


GREEDY = "greedy"
DYNAMIC_PROGRAMMING = "dp"


def compute_assignments(ranges, static_blobs, algo=GREEDY):
    """Section 6 compute_assignments: sort by (used is None, used) (stable), update ranges,
    assign the non-static blobs, then each static blob as a singleton chain."""
    items = sorted(ranges.items(), key=lambda p: (p[1].used is None, p[1].used or 0))
    items = get_updated_ranges(items)
    sharable = [x for x in items if x[0] not in static_blobs]
    static = [x for x in items if x[0] in static_blobs]
    if algo == DYNAMIC_PROGRAMMING:
        chains = compute_assignments_dp(sharable, [])
    elif algo == GREEDY:
        chains = compute_assignments_greedy(sharable, [])
    else:
        chains = []  # Caffe2's always-true assertion: no sharing at all
    return chains + [[x] for x in static]


def compute_blob_assignments(chains):
    """Every member of a chain of two or more maps to the chain's last member's name."""
    out = {}
    for chain in chains:
        if len(chain) == 1:
            continue
        last = chain[-1][0]
        for name, _ in chain:
            out[name] = last
    return out


def apply_assignments(net, blob_assignments):
    """Renames op inputs and outputs in place (never external_input / external_output)."""
    _rename_ops(net, lambda b: blob_assignments.get(b, b))


def optimize_interference_full(net, static_blobs, blob_sizes=None, algo=GREEDY,
                               keep_until_last_write=False):
    """optimize_interference (section 6) returning (net, blob_assignments, chains).

    The ordering function is the identity: the net's own op order is kept. Caffe2's default,
    networkx's plain topological sort, gives a version-dependent order, so it is not a
    reference; the interference graph (only used to order) is therefore not built.
    keep_until_last_write: see compute_ranges (False: Caffe2 exactly)."""
    out = copy.deepcopy(net)
    ranges = compute_ranges(out["op"], blob_sizes, keep_until_last_write)
    chains = compute_assignments(ranges, set(static_blobs), algo)
    blob_assignments = compute_blob_assignments(chains)
    apply_assignments(out, blob_assignments)
    return out, blob_assignments, chains


def optimize_interference(net, static_blobs, blob_sizes=None, algo=GREEDY,
                          keep_until_last_write=False):
    """optimize_interference (section 6) in the net's own op order. Returns (net, renames).
    keep_until_last_write: see compute_ranges (False: Caffe2 exactly)."""
    out, blob_assignments, _ = optimize_interference_full(net, static_blobs, blob_sizes, algo,
                                                          keep_until_last_write)
    return out, {k: v for k, v in blob_assignments.items() if k != v}


# ---------------------------------------------------------------------------------------------
# Section 8: verifiers


def verify_graph_equality(net_a, net_b):
    """Equal op counts; per op equal type, device and engine; equal lists of each input's last
    writer index (unwritten inputs skipped)."""

    def parent_list(ops):
        parents = [[] for _ in ops]
        owner = {}
        for i, op in enumerate(ops):
            for b in op["input"]:
                if b in owner:
                    parents[i].append(owner[b])
            for b in op["output"]:
                owner[b] = i
        return parents

    if len(net_a["op"]) != len(net_b["op"]):
        return False
    for a, b in zip(net_a["op"], net_b["op"]):
        if (a["type"] != b["type"] or op_device(a) != op_device(b)
                or a.get("engine", "") != b.get("engine", "")):
            return False
    return parent_list(net_a["op"]) == parent_list(net_b["op"])


def verify_inplace_blobs(net_a, net_b):
    """Zipped ops: equal types and equal (input index, first output index) pairs of inputs
    whose name is also an output."""

    def inplaces(op):
        out = list(op["output"])
        return [[j, out.index(b)] for j, b in enumerate(op["input"]) if b in out]

    for a, b in zip(net_a["op"], net_b["op"]):
        if a["type"] != b["type"] or inplaces(a) != inplaces(b):
            return False
    return True


# ---------------------------------------------------------------------------------------------
# Section 9: release_blobs_when_used, estimate_memory_usage


def release_blobs_when_used(net, dont_free_blobs, selector=None):
    """Inserts Free(b) -> b right after the last reader of each releasable blob (section 9).
    Returns the new net."""
    net = copy.deepcopy(net)
    input_blobs = set()
    can_release = set()
    alias_blobs = set()
    for op in net["op"]:
        if op["type"] == "Alias":
            alias_blobs.add(op["input"][0])
            continue
        input_blobs.update(op["input"])
        for b in op["output"]:
            if b not in input_blobs and (selector is None or selector(b)):
                can_release.add(b)
    can_release -= set(net["external_output"])
    can_release &= input_blobs
    can_release -= set(dont_free_blobs)
    can_release -= alias_blobs
    ops = list(net["op"])
    for j in reversed(range(len(net["op"]))):
        for b in net["op"][j]["input"]:
            if b in can_release:
                can_release.remove(b)
                ops.insert(j + 1, {"type": "Free", "input": [b], "output": [b],
                                   "device": CPU, "arg": {}})
    net["op"] = ops
    return net


def compute_statistics(chains, blob_bytes):
    """Section 9 compute_statistics with given byte sizes: (baseline, optimized), baseline the
    sum of every blob's size, optimized the sum over chains of the largest member."""
    baseline = sum(blob_bytes[name] for chain in chains for name, _ in chain)
    optimized = sum(max(blob_bytes[name] for name, _ in chain) for chain in chains)
    return baseline, optimized


DTYPE_BYTES = {"DOUBLE": 8, "INT64": 8, "FLOAT": 4, "INT32": 4, "FLOAT16": 2, "INT16": 2,
               "UINT16": 2, "INT8": 1, "UINT8": 1, "BOOL": 1}


def estimate_memory_usage(net, shapes, types, device=CPU):
    """Section 9: (total, high water, bytes by op type) for the ops on `device` plus Free and
    Alias, executed in order with final sizes. `types` maps blobs to dtype names (FLOAT, ...);
    a blob without shape or type counts 0 bytes."""

    def nbytes(b):
        if b not in shapes or b not in types:
            return 0
        n = DTYPE_BYTES[types[b]]
        for d in shapes[b]:
            n *= d
        return n

    by_type = collections.defaultdict(int)
    current = high = total = 0
    allocated = set()
    for op in net["op"]:
        if op["type"] in ("Free", "Alias"):
            for b in op["output"]:
                if b in allocated:
                    current -= nbytes(b)
                    allocated.remove(b)
        elif op_device(op) == tuple(device):
            for b in op["output"]:
                if b not in allocated:
                    n = nbytes(b)
                    total += n
                    current += n
                    high = max(high, current)
                    allocated.add(b)
                    by_type[op["type"]] += n
    return total, high, dict(by_type)
