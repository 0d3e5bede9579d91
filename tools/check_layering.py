#!/usr/bin/env python3
"""Checks that every project #include follows the layering of the source folders.

Each top-level folder is one layer and may include only the layers listed for it in LAYERS
(the same order as the add_subdirectory calls of the top CMakeLists.txt). Inside a layer, a
subfolder (memonger/sharing/, kernels/cpu/, ...) never includes a sibling subfolder, and the
layer's top files include a subfolder only where ENTRY_POINTS says so (the registry that
dispatches to the planners, the loader that dispatches to the ONNX importer). A header named
*_internal.h is included only from its own folder. Every included project header must exist,
is included with quotes (not <...>) by its path from the root (not ../ or ./), and lives in a
known folder: a new top-level folder with sources must be added to LAYERS first.

Where a layer is built as several libraries (memonger/: plan, sharing, offsets, core), each file
belongs to the library whose memonger_library(...) call in the folder's CMakeLists.txt lists it
(a header to the library of its .cc, or of the other files of its folder), and it includes
headers only of its own library and of the libraries that library depends on (DEPS, followed
transitively): memonger/sharing/ and memonger/offsets/ never include the planner registry.

Only direct includes are checked: a header may pass on what it includes (memonger/planner.h
includes memonger/offsets/exact_offsets.h).

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
    # The libFuzzer harnesses: a top layer like tools/ (the CLI harness links tools/' library).
    'fuzz': {'tools', 'allocator', 'report', 'kernels', 'memonger', 'workloads', 'graph', 'util',
             'proto'},
}
# Folders above every layer: they may include anything (tests/ also its own helpers).
CLIENTS = {'tests', 'bench', 'examples', 'python'}
# Files allowed to include a subfolder of their own layer: the tops of layers that dispatch to
# their subfolders, and a subfolder's file that drives a sibling's planners.
ENTRY_POINTS = {
    'memonger/planner.h': {'memonger/offsets', 'memonger/sharing'},
    'memonger/planner.cc': {'memonger/sharing', 'memonger/offsets'},
    'graph/model_loader.cc': {'graph/onnx'},
    # The symbolic planner runs the offset planners at its planning bindings, as PlanMemory does.
    'memonger/symbolic/symbolic_planner.cc': {'memonger/offsets'},
}
GENERATED = {'proto/memonger.pb.h'}
SOURCE_SUFFIXES = ('.h', '.cc', '.cu', '.hpp', '.cuh', '.inc')
INCLUDE = re.compile(r'^\s*#\s*include\s+(["<])([^">]+)[">]', re.M)
LIBRARY = re.compile(r'memonger_library\(\s*(\w+)(.*?)\)', re.S)
SKIPPED_DIRS = {'.git', 'cmake', 'docs'}


def subfolder(path):
    """'memonger/sharing' for memonger/sharing/x.h; None for a file at the top of its layer."""
    parts = path.split('/')
    return '/'.join(parts[:2]) if len(parts) > 2 else None


def is_project_path(header, root):
    return os.path.isdir(os.path.join(root, header.split('/')[0]))


def check_include(src, header, root, quoted=True):
    """The reason `src` may not include `header`, or None."""
    if header.startswith(('../', './')):
        return 'use the path from the project root, not a relative one'
    layer = src.split('/')[0]
    target = header.split('/')[0]
    if not quoted:
        if target in LAYERS or target in CLIENTS:
            return 'a project header is included with quotes, not <...>'
        return None
    if target not in LAYERS and target not in CLIENTS and is_project_path(header, root) \
            and header not in GENERATED:
        return f'{target}/ is not a known layer (add it to LAYERS in tools/check_layering.py)'
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
        if header_sub in ENTRY_POINTS.get(src, set()):
            return None
        return f'{src_sub}/ may not include its sibling {header_sub}/'
    if header_sub not in ENTRY_POINTS.get(src, set()):
        return f'the top of {layer}/ may not include {header_sub}/ (only its entry points may)'
    return None


def source_folders(root):
    """Every top-level folder holding sources, known or not (build trees left out)."""
    folders = []
    for name in sorted(os.listdir(root)):
        path = os.path.join(root, name)
        if not os.path.isdir(path) or name in SKIPPED_DIRS or name.startswith(('build', '.')):
            continue
        for _, _, filenames in os.walk(path):
            if any(f.endswith(SOURCE_SUFFIXES) for f in filenames):
                folders.append(name)
                break
    return folders


def libraries(root, layer):
    """{file: library} and {library: the libraries it may include} of a layer built as several
    memonger_library targets; empty for a layer of one library."""
    path = os.path.join(root, layer, 'CMakeLists.txt')
    if not os.path.isfile(path):
        return {}, {}
    with open(path, encoding='utf-8') as f:
        text = re.sub(r'#[^\n]*', '', f.read())
    owner, deps = {}, {}
    for match in LIBRARY.finditer(text):
        name, body = match.group(1), match.group(2)
        words = body.split()
        sources = words[words.index('SOURCES') + 1:] if 'SOURCES' in words else []
        if 'DEPS' in sources:
            sources = sources[:sources.index('DEPS')]
        deps[name] = {w.split('::')[1] for w in (words[words.index('DEPS') + 1:]
                                                  if 'DEPS' in words else [])
                      if w.startswith('memonger::')}
        for source in sources:
            owner[f'{layer}/{source}'] = name
    if len(deps) < 2:
        return {}, {}
    # A header belongs to the library of its .cc; a header without one to the library of the
    # other files of its folder, where they all belong to one.
    by_folder = {}
    for source, name in owner.items():
        by_folder.setdefault(os.path.dirname(source), set()).add(name)
    for dirpath, _, filenames in os.walk(os.path.join(root, layer)):
        for filename in filenames:
            if not filename.endswith('.h'):
                continue
            header = os.path.relpath(os.path.join(dirpath, filename), root).replace(os.sep, '/')
            stem = header[:-2]
            for suffix in ('.cc', '.cu'):
                if stem + suffix in owner:
                    owner[header] = owner[stem + suffix]
                    break
            else:
                folder = by_folder.get(os.path.dirname(header), set())
                if len(folder) == 1:
                    owner[header] = next(iter(folder))
    # What each library may include: itself and its dependencies, transitively.
    reach = {}
    for name in deps:
        seen, todo = {name}, [name]
        while todo:
            for d in deps.get(todo.pop(), set()):
                if d in deps and d not in seen:
                    seen.add(d)
                    todo.append(d)
        reach[name] = seen
    return owner, reach


def check_library(src, header, owner, reach):
    """The reason a file of one library may not include `header`, or None."""
    have, want = owner.get(src), owner.get(header)
    if have is None or want is None or want in reach[have]:
        return None
    return (f'library memonger_{have} may not include memonger_{want}\'s headers (it depends on: '
            + ', '.join(sorted(f'memonger_{d}' for d in reach[have] if d != have)) + ')')


def check_tree(root):
    errors = []
    for top in source_folders(root):
        if top not in LAYERS and top not in CLIENTS:
            errors.append(f'{top}/: sources in a folder that is not a known layer '
                          '(add it to LAYERS in tools/check_layering.py)')
            continue
        owner, reach = libraries(root, top) if top in LAYERS else ({}, {})
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
                    quoted = match.group(1) == '"'
                    header = match.group(2)
                    reason = check_include(src, header, root, quoted)
                    if not reason and quoted and owner:
                        reason = check_library(src, header, owner, reach)
                    if reason:
                        line = text.count('\n', 0, match.start()) + 1
                        shown = f'"{header}"' if quoted else f'<{header}>'
                        errors.append(f'{src}:{line}: #include {shown}: {reason}')
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
        'memonger/planner.cc': '#include "memonger/sharing/s.h"\n',         # entry point: fine
        'bench/b.cc': '#include "tests/helper.h"\n',                        # client -> tests
        'kernels/rel.cc': '#include "../graph/g.h"\n',                      # relative path
        'kernels/angle.cc': '#include <report/r.h>\n',                      # angle brackets
        'newlayer/n.cc': '#include "util/a.h"\n',                           # unknown folder
        'tests/helper.h': '',
        'fuzz/f.cc': '#include "tools/t.h"\n#include "tests/helper.h"\n',  # a layer: no tests/
        'tools/t.h': '#include "report/r.h"\n',
        # Two libraries in one layer: base before top; base may not include top's headers.
        'workloads/CMakeLists.txt': 'memonger_library(base SOURCES base.cc DEPS memonger::graph)\n'
                                    'memonger_library(top SOURCES top.cc DEPS memonger::base)\n',
        'workloads/base.h': '',
        'workloads/base.cc': '#include "workloads/top.h"\n',                # base -> top
        'workloads/top.h': '#include "workloads/base.h"\n',                 # top -> base: fine
        'workloads/top.cc': '#include "workloads/top.h"\n',
    }
    with tempfile.TemporaryDirectory() as root:
        for rel, text in files.items():
            os.makedirs(os.path.dirname(os.path.join(root, rel)), exist_ok=True)
            with open(os.path.join(root, rel), 'w') as f:
                f.write(text)
        errors = check_tree(root)
    expected = ['memonger/offsets/o.h', 'kernels/k.h', 'graph/bad.h', 'memonger/core.h',
                'allocator/x.cc', 'graph/loader.cc', 'bench/b.cc', 'kernels/rel.cc',
                'kernels/angle.cc', 'newlayer/', 'fuzz/f.cc', 'workloads/base.cc']
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
