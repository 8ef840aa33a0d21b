"""Arrays a compiled kernel borrows from its caller, without reference counts.

numba counts references to every array it holds with an atomic add on the
array's memory record: each time an array is passed to a function that is not
inlined, taken out of a tuple, or sliced, and again when that use ends. The
instance kernel made ~510 such atomic adds an instance, a third of its time,
the row writer ~250 a row (docs/design-notes.md, transforms.handoff.borrowed). A
kernel calls `borrowed` on its arguments once, on entry: the same arrays,
with no memory record, whose counts numba then skips (as for arrays made by
`numba.carray`). The caller's references keep the memory alive for the call;
a kernel must not return a borrowed array, or keep one past its return.

numba still calls `NRT_incref`/`NRT_decref` for each of those uses, to find
no record and return: it marks them `noinline` so that its pruning pass can
pair them up. In a kernel that borrows, they are made inlinable before numba
optimizes it (`_inline_reference_counts`), so the compiler drops the calls
on records it knows are absent and keeps a test for the rest.
"""

from __future__ import annotations

import re
import weakref

import llvmlite.binding as llvm
from numba.core import cgutils, types
from numba.core.codegen import CPUCodeLibrary
from numba.core.errors import TypingError
from numba.extending import intrinsic

# The code libraries of functions that borrow: their reference-count calls
# are inlined (`_inline_reference_counts`).
_BORROWING: weakref.WeakSet[CPUCodeLibrary] = weakref.WeakSet()
# numba's definitions of the two calls, with the attribute group that holds
# their `noinline`.
_COUNT_DEFINITION = re.compile(r"^(define [^\n]*@NRT_(?:incref|decref)\([^\n]*?)( #\d+)( \{)$",
                               re.MULTILINE)


def _refused(typ) -> list:
    """The types inside `typ` other than arrays, numbers and booleans (a
    string's or a list's memory record would be counted once less than its
    uses)."""
    if isinstance(typ, types.BaseTuple):
        return [inner for member in typ for inner in _refused(member)]
    return [] if isinstance(typ, (types.Array, types.Number, types.Boolean)) else [typ]


def _borrow(context, builder, typ, value):
    """`value` of numba type `typ`: arrays (also inside tuples, at any depth)
    without their memory record, numbers and booleans as they are."""
    if isinstance(typ, types.Array):
        array = context.make_array(typ)(context, builder, value=value)
        array.meminfo = cgutils.get_null_value(array.meminfo.type)
        array.parent = cgutils.get_null_value(array.parent.type)
        return array._getvalue()
    if isinstance(typ, types.BaseTuple):
        result = cgutils.get_null_value(context.get_value_type(typ))
        for index, member in enumerate(typ):
            item = _borrow(context, builder, member, builder.extract_value(value, index))
            result = builder.insert_value(result, item, index)
        return result
    return value


@intrinsic
def borrowed(typingctx, value):
    """`value` (an array, or a tuple of arrays, numbers, booleans and such
    tuples) with every array borrowed: its element accesses, slices and calls
    as before, with no reference counting. Only in compiled code."""
    refused = _refused(value)
    if refused:
        raise TypingError(f"borrowed takes arrays, numbers, booleans and tuples of them, "
                          f"not {refused[0]}")

    def codegen(context, builder, signature, args):
        _BORROWING.add(context.active_code_library)
        return _borrow(context, builder, signature.args[0], args[0])

    return value(value), codegen


_optimize_final_module = CPUCodeLibrary._optimize_final_module


def _inline_reference_counts(library: CPUCodeLibrary) -> None:
    """numba's optimization of a library, after `NRT_incref`/`NRT_decref`
    lose `noinline` if the library borrows. numba's pruning pass then finds
    no pairs to prune in it: the ~470 calls an instance that find no record
    cost more than the ~46 counts the pruning could pair."""
    if library not in _BORROWING:
        return _optimize_final_module(library)
    module = library._final_module
    text, stripped = _COUNT_DEFINITION.subn(r"\1\3", str(module))
    if stripped:
        inlinable = llvm.parse_assembly(text)
        inlinable.name = module.name
        library._final_module = inlinable
    return _optimize_final_module(library)


CPUCodeLibrary._optimize_final_module = _inline_reference_counts
