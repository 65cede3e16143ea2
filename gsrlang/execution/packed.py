"""What a run's summary keeps per item, packed: its ids (`PackedIds`) and its (prediction, label) pairs
(`PackedColumn`), so that a summary of a million items holds megabytes, not the hundreds a Python set and
two lists of Python objects take (issue 22: `gsr replay`'s peak memory flat in the trace's length).

`PackedIds` counts repeated ids exactly as a Python set of them would: the same equality (1 == 1.0 == True,
the str "1" another id), the same first examples in the same order, the same sample of ids as text. An id is
a key of bytes (`id_key`): a str its UTF-8 (lone surrogates passed through), a number equal to an integer a
tag byte and that integer in decimal, any other float a tag byte and its repr: two ids have the same key
exactly when they are equal. Keys of one length sit in one sorted numpy array of fixed-width bytes, and
membership is a binary search there (`np.searchsorted`); an id with no key (NaN, an integer too long to write
in decimal, a value of another type) is kept in a plain set. New ids wait in a list, in order, and are
folded into the arrays a chunk at a time, each chunk's repeats counted in order: every count is read after a
fold (`flush`).

`PackedColumn` keeps a sequence of None, ints (up to 2**53), floats and the pairwise verdicts as a tag byte
each (a small int is its tag), and a float each once a float or a larger int came; a value of any other kind
turns it into a plain list from then on. It gives the same
values back (`tolist`), and the metrics their array (`numbers`) without making a Python object per item.
"""

from __future__ import annotations

import itertools
import math
from array import array

import numpy as np

__all__ = ["FOLD", "PackedColumn", "PackedIds", "id_key"]

FOLD = 65536  # new ids waiting before they are folded into the sorted arrays

_INT, _FLOAT = b"\xff", b"\xfe"  # never the first byte of UTF-8 text
_EXAMPLES = 5


def id_key(item_id) -> bytes | None:
    """The bytes that stand for an id: equal exactly when the ids are equal (as a Python set compares them);
    None for an id that has none (it is kept as it is)."""
    t = type(item_id)
    if t is str:
        return item_id.encode("utf-8", "surrogatepass")
    if t is int or t is bool:
        try:
            return _INT + str(int(item_id)).encode("ascii")
        except ValueError:  # more digits than Python writes in decimal
            return None
    if t is float:
        if item_id.is_integer():
            return _INT + str(int(item_id)).encode("ascii")
        if item_id != item_id:  # NaN: equal to no other id, as in a set
            return None
        return _FLOAT + repr(item_id).encode("ascii")
    return None


class PackedIds:
    """The distinct ids of a run and how many items repeated an earlier one (see the module docstring)."""

    def __init__(self) -> None:
        self._sorted: dict[int, np.ndarray] = {}  # key length -> the keys of that length, sorted
        self._other: set = set()  # ids with no key
        self._texts: dict[bytes, str] = {}  # key -> the id's text, where it is not what the key reads as
        self._pending: list = []  # ids noted since the last fold, in order
        self._none = False  # whether ids noted all at once held None
        self._duplicates = 0
        self._examples: list = []

    @property
    def duplicates(self) -> int:
        """Items whose id an earlier item already had."""
        self.flush()
        return self._duplicates

    @property
    def examples(self) -> list:
        """The first few such ids (each equal to no earlier example), in order."""
        self.flush()
        return self._examples

    def __len__(self) -> int:
        self.flush()
        return sum(map(len, self._sorted.values())) + len(self._other)

    def add(self, item_id) -> None:
        """Note an item's id (not None); a repeat is counted when the ids are next folded."""
        if id_key(item_id) is None:
            hash(item_id)  # an id that cannot be in a set fails here, as a set would
        self._pending.append(item_id)
        if len(self._pending) >= FOLD:
            self.flush()

    def add_distinct(self, ids) -> bool:
        """Note ids distinct among themselves, all at once, when none was noted before; False, noting nothing,
        when one was. None counts as noted once such ids held it (as a set of them would hold it)."""
        self.flush()
        ids = list(ids)
        none = None in ids
        if none:
            if self._none:
                return False
            ids.remove(None)
        keys, plain = _keys(ids)
        groups = _by_length(keys)
        if self._found(groups, len(keys)).any() or \
                not plain and any(i in self._other for i, k in zip(ids, keys) if k is None):
            return False
        self._merge(ids, keys, plain, groups)
        self._none = self._none or none
        return True

    def flush(self) -> None:
        """Fold the ids noted since the last fold: count, in order, each one that an earlier item had."""
        pending = self._pending
        if not pending:
            return
        self._pending = []
        keys, plain = _keys(pending)
        groups = _by_length(keys)
        found = self._found(groups, len(keys))
        if plain and not found.any() and len(set(pending)) == len(pending):  # all new: nothing to count
            self._merge(pending, keys, plain, groups)
            return
        seen: set = set()
        fresh = np.zeros(len(pending), bool)
        other = self._other
        for k, (item_id, key, old) in enumerate(zip(pending, keys, found.tolist())):
            if old or item_id in seen or (key is None and item_id in other):
                self._duplicates += 1
                if len(self._examples) < _EXAMPLES and item_id not in self._examples:
                    self._examples.append(item_id)
            else:
                seen.add(item_id)
                fresh[k] = True
        picked = fresh.tolist()
        self._merge([i for i, f in zip(pending, picked) if f], [k for k, f in zip(keys, picked) if f], plain,
                    groups, fresh)

    def sample(self, k: int) -> list[str]:
        """The first k of the ids' texts (`str`), sorted."""
        self.flush()
        texts = self._texts
        take = k + len(texts)  # the k smallest of a run of keys whose text reads as the key are among these
        out = list(texts.values())
        out.extend(str(i) for i in self._other if i is not None)
        for length, keys in self._sorted.items():
            cuts = [0, *np.searchsorted(keys, [_FLOAT, _INT]).tolist(), len(keys)]
            for text, lo, hi in zip((True, False, False), cuts, cuts[1:]):  # the str keys, the floats, the ints
                for raw in keys[lo:min(hi, lo + take)].tolist():
                    key = raw.ljust(length, b"\x00")  # numpy drops trailing NULs: they are part of the key
                    if key not in texts:
                        out.append(key.decode("utf-8", "surrogatepass") if text else key[1:].decode("ascii"))
        return sorted(out)[:k]

    def _found(self, groups: dict, n: int) -> np.ndarray:
        """Per key of `groups` (`_by_length` of n keys), whether it is in the arrays."""
        found = np.zeros(n, bool)
        for length, (where, group) in groups.items():
            keys_of = self._sorted.get(length)
            if keys_of is None:
                continue
            at = np.searchsorted(keys_of, group)
            found[where] = keys_of[np.minimum(at, len(keys_of) - 1)] == group
        return found

    def _merge(self, ids: list, keys: list, plain: bool, groups: dict, fresh: np.ndarray | None = None) -> None:
        """Add ids that are new and distinct among themselves (`plain`: all str), given their keys; `groups` is
        `_by_length` of those keys, or (with `fresh`, a mask) of more keys, those at `fresh` being theirs."""
        if not plain:
            for item_id, key in zip(ids, keys):
                if key is None:
                    self._other.add(item_id)
                elif type(item_id) is not int and key.startswith(_INT):  # a bool, or a float equal to an integer:
                    self._texts[key] = str(item_id)  # its text is not what the key reads as
        for length, (where, group) in groups.items():
            if fresh is not None:
                group = group[fresh[where]]
            if not len(group):
                continue
            group = np.sort(group)
            old = self._sorted.get(length)
            self._sorted[length] = group if old is None else np.insert(old, np.searchsorted(old, group), group)


def _keys(ids: list) -> tuple[list, bool]:
    """The ids' keys (None: no key), and whether every id is a str."""
    if set(map(type, ids)) <= {str}:
        try:
            return list(map(str.encode, ids)), True
        except UnicodeEncodeError:  # a lone surrogate
            return [i.encode("utf-8", "surrogatepass") for i in ids], True
    return list(map(id_key, ids)), False


_WIDE = 64  # keys up to this long are sorted into their lengths from one array of them all


def _by_length(keys: list) -> dict[int, tuple[np.ndarray, np.ndarray]]:
    """Key length -> (the positions of the keys of that length, those keys as fixed-width bytes)."""
    n = len(keys)
    some = None in keys
    lengths = np.fromiter((-1 if k is None else len(k) for k in keys) if some else map(len, keys), np.int64, n)
    distinct = sorted(set(lengths.tolist()))  # (not np.unique: it imports numpy.ma, 10-20 ms at start-up)
    whole = None
    if not some and distinct and distinct[-1] <= _WIDE:
        whole = np.array(keys, dtype=f"S{max(distinct[-1], 1)}")
    groups = {}
    for length in distinct:
        if length < 0:
            continue
        dtype = f"S{max(length, 1)}"
        if len(distinct) == 1:
            where = np.arange(n)
            group = whole if whole is not None else np.array(keys, dtype=dtype)
        else:
            where = np.flatnonzero(lengths == length)
            group = whole[where].astype(dtype) if whole is not None else \
                np.array([keys[i] for i in where.tolist()], dtype=dtype)
        groups[length] = where, group
    return groups


_NONE, _INT_TAG, _FLOAT_TAG = 0, 1, 2
CODES = ("first", "second", "tie", "abstain")  # a pairwise verdict's tag: 3 + its position
_CODE_OF = {c: 3 + k for k, c in enumerate(CODES)}
_LIMIT = 2 ** 53  # ints up to this are floats exactly
_ZERO, _LOW, _HIGH = 64, -56, 63  # an int from _LOW to _HIGH is the tag _ZERO + it, with no float
_FZERO = -64  # a float equal to an int from -64 to 63 (not -0.0) is the tag _FZERO + it: -128 to -1


class PackedColumn:
    """A list of None, numbers and pairwise verdicts, a tag byte (and, for a float or a large int, a float) per
    value (see the module docstring): `append`, `extend`, `len`, iteration, `tolist`, equality with any
    sequence."""

    def __init__(self, values=()) -> None:
        self._tags = array("b")
        self._values: array | None = None  # made when a value needs it: then one float per value
        self._list: list | None = None  # once a value of another kind came: every value, as it is
        self.extend(values)

    def __len__(self) -> int:
        return len(self._list) if self._list is not None else len(self._tags)

    def __iter__(self):
        return iter(self.tolist())

    def __eq__(self, other) -> bool:
        if isinstance(other, PackedColumn):
            other = other.tolist()
        return self.tolist() == list(other) if isinstance(other, (list, tuple)) else NotImplemented

    __hash__ = None

    def __repr__(self) -> str:
        return f"PackedColumn({self.tolist()!r})"

    def _floats(self) -> array:
        if self._values is None:
            self._values = array("d", bytes(8 * len(self._tags)))
        return self._values

    def append(self, value) -> None:
        if self._list is not None:
            self._list.append(value)
            return
        t = type(value)
        if t is int and _LOW <= value <= _HIGH:
            tag = _ZERO + value
        elif t is float and value.is_integer() and -64 <= value <= 63 and (value or math.copysign(1.0, value) > 0):
            tag = _FZERO + int(value)
        elif t is float or t is int and -_LIMIT <= value <= _LIMIT:
            self._floats().append(value)
            self._tags.append(_FLOAT_TAG if t is float else _INT_TAG)
            return
        elif value is None:
            tag = _NONE
        elif t is str and value in _CODE_OF:
            tag = _CODE_OF[value]
        else:
            self._list = self.tolist()
            self._list.append(value)
            self._tags = self._values = None
            return
        self._tags.append(tag)
        if self._values is not None:
            self._values.append(0.0)

    def extend(self, values) -> None:
        values = values if isinstance(values, list) else list(values)
        types = set(map(type, values)) if self._list is None else None
        if types == {int} and _LOW <= min(values) and max(values) <= _HIGH:
            tags = (np.array(values, np.int64) + _ZERO).astype(np.int8).tobytes()
        elif types == {str} and set(values) <= _CODE_OF.keys():
            tags = bytes(map(_CODE_OF.__getitem__, values))
        elif types == {float}:
            floats = np.array(values, np.float64)
            if not ((floats == np.floor(floats)) & (floats >= -64) & (floats <= 63)
                    & ~((floats == 0) & np.signbit(floats))).all():  # -0.0 keeps its sign as a float
                self._floats().extend(values)  # before the tags: made, it has a float for each value before these
                self._tags.frombytes(bytes([_FLOAT_TAG]) * len(values))
                return
            tags = (floats + _FZERO).astype(np.int8).tobytes()
        else:
            for value in values:
                self.append(value)
            return
        self._tags.frombytes(tags)
        if self._values is not None:
            self._values.frombytes(bytes(8 * len(values)))

    def tolist(self) -> list:
        if self._list is not None:
            return list(self._list)
        values = self._values if self._values is not None else itertools.repeat(0.0)
        return [tag - _ZERO if tag > 6 else float(tag - _FZERO) if tag < 0 else value if tag == _FLOAT_TAG
                else int(value) if tag == _INT_TAG else None if tag == _NONE else CODES[tag - 3]
                for tag, value in zip(self._tags, values)]

    def numbers(self) -> np.ndarray | None:
        """The values as float64, NaN for None; None when one is not a finite number or None."""
        if self._list is not None:
            return None
        tags = np.frombuffer(self._tags, np.int8) if len(self._tags) else np.zeros(0, np.int8)
        if ((tags > _FLOAT_TAG) & (tags <= 6)).any():
            return None
        values = np.array(self._values, np.float64) if self._values is not None else np.zeros(len(tags))
        small = tags > 6
        values[small] = tags[small] - _ZERO
        small = tags < 0
        values[small] = tags[small].astype(np.int64) - _FZERO
        none = tags == _NONE
        if not np.isfinite(values[~none]).all():  # NaN would read as None: such values go as they are
            return None
        values[none] = np.nan
        return values
