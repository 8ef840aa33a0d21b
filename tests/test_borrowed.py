"""`borrowed`: the same arrays, without the memory record numba counts
references on, at any depth of a tuple; numbers and booleans passed through;
values with a record of their own refused."""

from __future__ import annotations

import re
from typing import NamedTuple

import numpy as np
import pytest
from numba import njit, types
from numba.core.errors import TypingError
from numba.extending import intrinsic

from bert_pretraining_data.transforms.handoff.borrowed import borrowed


@intrinsic
def _record_address(typingctx, array):
    """The address of `array`'s memory record (0: none, as numba.carray's)."""
    def codegen(context, builder, signature, args):
        record = context.make_array(signature.args[0])(context, builder, value=args[0]).meminfo
        return builder.ptrtoint(record, context.get_value_type(types.intp))

    return types.intp(array), codegen


class _Scratch(NamedTuple):
    ids: np.ndarray
    flag: bool
    inner: tuple


@njit
def _borrow_all(array, scratch):
    view = borrowed(array)
    held = borrowed(scratch)
    view[0] = 7  # the caller's memory, through the borrowed views
    held.inner[0][1] = 9
    held.ids[2] = held.inner[1]
    return (_record_address(array), _record_address(view), _record_address(held.ids),
            _record_address(held.inner[0]), _record_address(held.ids[1:]), held.flag,
            held.inner[1])


def test_arrays_at_any_depth_are_borrowed_and_the_rest_passed_through():
    array = np.zeros(4, dtype=np.int64)
    scratch = _Scratch(np.zeros(3, dtype=np.int32), True, (np.zeros(2, dtype=np.uint8), 5))
    own, view, ids, inner, sliced, flag, number = _borrow_all(array, scratch)
    assert own != 0  # numba's own reference to the caller's array
    assert view == ids == inner == sliced == 0  # borrowed: no record, so nothing counted
    assert flag is True and number == 5
    assert array.tolist() == [7, 0, 0, 0]
    assert scratch.inner[0].tolist() == [0, 9] and scratch.ids.tolist() == [0, 0, 5]


@njit
def _borrow_pair(pair):
    return borrowed(pair)[1]


def test_a_value_with_a_record_of_its_own_is_refused():
    # A string's record would be counted once less than its uses: refused
    # when the kernel is compiled, naming the type.
    with pytest.raises(TypingError, match="borrowed takes arrays, numbers, booleans and "
                                          "tuples of them, not unicode_type"):
        _borrow_pair((np.zeros(2), "name"))


@njit
def _sum_from(values, start):
    """Recursive: a function of its own in every kernel, whose calls to itself
    numba resolves by name once it is loaded."""
    if start >= len(values):
        return 0
    return values[start] + _sum_from(values, start + 1)


@njit
def _suffix_sums(values):
    total = 0
    for start in range(len(values)):
        total += _sum_from(values[start:], start % 2)
    return total


@njit
def _suffix_sums_borrowed(values):
    values = borrowed(values)
    total = 0
    for start in range(len(values)):
        total += _sum_from(values[start:], start % 2)
    return total


def _count_calls(kernel) -> int:
    """Calls to numba's reference counting left in a compiled kernel."""
    (signature,) = kernel.signatures
    return len(re.findall(r"call void @NRT_(?:incref|decref)\(", kernel.inspect_llvm(signature)))


def test_a_kernel_that_borrows_makes_no_reference_count_calls():
    # numba keeps NRT_incref/NRT_decref out of line; where a kernel borrows,
    # they are inlined (a test of a record known to be absent, then nothing).
    # The borrowing kernel compiles first: what it links in still serves the
    # next kernel that calls it.
    values = np.arange(40, dtype=np.int64)
    assert _suffix_sums_borrowed(values) == _suffix_sums(values) == sum(
        int(values[s:][s % 2:].sum()) for s in range(40))
    assert _count_calls(_suffix_sums) > 0  # numba's calls, where nothing borrows
    assert _count_calls(_suffix_sums_borrowed) == 0
