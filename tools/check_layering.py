#!/usr/bin/env python3
"""Checks that every project #include follows the layering of the source folders.

Each top-level folder is one layer and may include only the layers listed for it in LAYERS
(the same order as the add_subdirectory calls of the top CMakeLists.txt). Inside a layer, a
subfolder (memonger/sharing/, kernels/cpu/, ...) never includes a sibling subfolder, and the
layer's top files include a subfolder only where ENTRY_POINTS says so (the registry that
dispatches to the planners, the loader that dispatches to the ONNX importer). A header named
*_internal.h is included only from its own folder. Every included project header must exist.

  tools/check_layering.py [--root DIR]   exit 0 when the tree follows the rules, else 1 with
                                         one line per offending #include
  tools/check_layering.py --self-test    checks that a tree with wrong includes is refused
"""
import argparse
import os
import re
import sys
import tempfile

# layer -> the layers its files may include (besides itself).
LAYERS = {
    'proto': set(),
    'util': set(),
    'graph': {'util', 'proto'},
    'workloads': {'graph', 'util', 'proto'},
    'memonger': {'graph', 'util', 'proto'},
    'kernels': {'graph', 'util', 'proto'},
    'report': {'memonger', 'workloads', 'graph', 'util', 'proto'},
    'allocator': {'kernels', 'memonger', 'graph', 'util', 'proto'},
    'tools': {'allocator', 'report', 'kernels', 'memonger', 'workloads', 'graph', 'util', 'proto'},
}
# Folders above every layer: they may include anything (tests/ also its own helpers).
CLIENTS = {'tests', 'bench', 'examples'}
# Top-of-layer files allowed to include a subfolder of their own layer.
ENTRY_POINTS = {
    'memonger/planner.h': {'memonger/offsets'},
    'memonger/planner.cc': {'memonger/sharing', 'memonger/offsets'},
    'graph/model_loader.cc': {'graph/onnx'},
}
GENERATED = {'proto/memonger.pb.h'}
SOURCE_SUFFIXES = ('.h', '.cc', '.cu')
INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)


def subfolder(path):
    """'memonger/sharing' for memonger/sharing/x.h; None for a file at the top of its layer."""
    parts = path.split('/')
    return '/'.join(parts[:2]) if len(parts) > 2 else None


def check_include(src, header, root):
    """The reason `src` may not include `header`, or None."""
    layer = src.split('/')[0]
    target = header.split('/')[0]
    if header.endswith('_internal.h') and os.path.dirname(header) != os.path.dirname(src):
        return f'{header} is internal to {os.path.dirname(header)}/'

    if target not in LAYERS and target not in CLIENTS:
        return None  # a system or third-party header (absl/, onnx/, gtest/, ...)
    if header not in GENERATED and not os.path.isfile(os.path.join(root, header)):
        return 'includes a header that does not exist'
    if layer in CLIENTS:
        if target in CLIENTS and target != layer:
            return f'{layer}/ may not include {target}/'
        return None
    if target in CLIENTS:
        return f'a library layer ({layer}/) may not include {target}/'
    if target != layer:
        if target not in LAYERS[layer]:
            return f'layer {layer}/ may not include layer {target}/ (allowed: ' + \
                ', '.join(sorted(LAYERS[layer])) + ')'
        return None
    src_sub, header_sub = subfolder(src), subfolder(header)
    if header_sub is None or header_sub == src_sub:
        return None
    if src_sub is not None:
        return f'{src_sub}/ may not include its sibling {header_sub}/'
    if header_sub not in ENTRY_POINTS.get(src, set()):
        return f'the top of {layer}/ may not include {header_sub}/ (only its entry points may)'
    return None


def check_tree(root):
    errors = []
    for top in sorted(set(LAYERS) | CLIENTS):
        for dirpath, dirnames, filenames in os.walk(os.path.join(root, top)):
            dirnames.sort()
            for name in sorted(filenames):
                if not name.endswith(SOURCE_SUFFIXES):
                    continue
                path = os.path.join(dirpath, name)
                src = os.path.relpath(path, root).replace(os.sep, '/')
                with open(path, encoding='utf-8', errors='replace') as f:
                    text = f.read()
                for match in INCLUDE.finditer(text):
                    reason = check_include(src, match.group(1), root)
                    if reason:
                        line = text.count('\n', 0, match.start()) + 1
                        errors.append(f'{src}:{line}: #include "{match.group(1)}": {reason}')
    return errors


def self_test():
    files = {
        'util/a.h': '',
        'graph/g.h': '#include "util/a.h"\n',
        'memonger/plan.h': '#include "graph/g.h"\n',
        'memonger/sharing/s.h': '#include "memonger/plan.h"\n',
        'memonger/offsets/o.h': '#include "memonger/sharing/s.h"\n',  # sibling
        'kernels/k.h': '#include "memonger/plan.h"\n',                # kernels -> memonger
        'graph/bad.h': '#include "report/r.h"\n',                     # upward
        'report/r.h': '#include "memonger/offsets/o.h"\n',
        'memonger/core.h': '#include "memonger/sharing/s.h"\n',       # top -> sub, no entry
        'allocator/x.cc': '#include "allocator/missing.h"\n',         # missing header
        'tests/t.cc': '#include "report/r.h"\n#include "tests/helper.h"\n',
        'graph/onnx/x_internal.h': '',
        'graph/onnx/x.cc': '#include "graph/onnx/x_internal.h"\n',
        'graph/loader.cc': '#include "graph/onnx/x_internal.h"\n',         # internal header
        'tests/helper.h': '',
    }
    with tempfile.TemporaryDirectory() as root:
        for rel, text in files.items():
            os.makedirs(os.path.dirname(os.path.join(root, rel)), exist_ok=True)
            with open(os.path.join(root, rel), 'w') as f:
                f.write(text)
        errors = check_tree(root)
    expected = ['memonger/offsets/o.h', 'kernels/k.h', 'graph/bad.h', 'memonger/core.h',
                'allocator/x.cc', 'graph/loader.cc']
    found = sorted(e.split(':')[0] for e in errors)
    if found != sorted(expected):
        print('self-test: expected errors in', sorted(expected), 'got:', *errors, sep='\n  ')
        return 1
    print(f'self-test: OK ({len(errors)} wrong includes refused, the rest accepted)')
    return 0


def main():
    parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    here = os.path.dirname(os.path.abspath(__file__))
    parser.add_argument('--root', default=os.path.dirname(here))
    parser.add_argument('--self-test', action='store_true')
    args = parser.parse_args()
    if args.self_test:
        return self_test()
    errors = check_tree(args.root)
    for e in errors:
        print(e)
    if errors:
        print(f'layering: {len(errors)} include(s) against the layering')
        return 1
    print('layering: OK')
    return 0


if __name__ == '__main__':
    sys.exit(main())
