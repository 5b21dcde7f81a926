"""Bit and flag scans over 64-bit words: rows of booleans packed as bits (the bitset proposals'
candidate matrices), rows of byte flags read eight at a time (the windowed pointers), and bit
planes read and written at scattered places (the windowed scan's per-(rank, chunk) state)."""

from __future__ import annotations

import numpy as np

#: position of the first set bit of a byte, counting from the most significant (packbits order)
FIRST_BIT = np.array([0] + [8 - b.bit_length() for b in range(1, 256)], dtype=np.int64)


def pack_words(bools: np.ndarray) -> np.ndarray:
    """Rows of booleans as bits (numpy's packbits order: element 0 is the top bit of byte 0), in
    64-bit words, so that bitwise work touches 64 chunks per operation."""
    packed = np.packbits(bools, axis=1)
    pad = (-packed.shape[1]) % 8
    if pad:
        packed = np.concatenate([packed, np.zeros((packed.shape[0], pad), dtype=np.uint8)], axis=1)
    return np.ascontiguousarray(packed).view(np.uint64)


def bit_masks(at: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(word index, mask) of bit positions ``at`` in `pack_words` layout."""
    byte = at >> 3
    shift = ((byte & 7) * 8 + (7 - (at & 7))).astype(np.uint64)
    return byte >> 3, np.left_shift(np.uint64(1), shift)


def first_bits(words: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """For each row of a `pack_words` matrix: whether any bit is set, and the first one's index."""
    nonzero = words != 0
    has = nonzero.any(axis=1)
    first = nonzero.argmax(axis=1)
    rows = np.arange(words.shape[0])
    octets = words[rows, first].view(np.uint8).reshape(-1, 8)  # little-endian: byte 0 first
    byte = (octets != 0).argmax(axis=1)
    return has, (first * 8 + byte) * 8 + FIRST_BIT[octets[rows, byte]]


def first_true(flags: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """For each row of a C-contiguous boolean matrix whose width is a multiple of 8: whether any
    entry is true, and the first one's column. Eight flags make one 64-bit word, so this is a few
    passes over the words instead of numpy's slow row-by-row reductions over short rows."""
    words = flags.view(np.dtype("<u8"))  # little-endian: flag 8w + b is byte b, bit 8b of word w
    word = words[:, -1].copy()
    at = np.full(words.shape[0], words.shape[1] - 1, dtype=np.int64)
    for w in range(words.shape[1] - 2, -1, -1):
        hit = words[:, w] != 0
        np.putmask(word, hit, words[:, w])
        np.putmask(at, hit, w)
    lowest = word & (~word + np.uint64(1))  # a power of two: log2 is exact
    byte = np.log2(np.maximum(lowest, np.uint64(1)).astype(np.float64)).astype(np.int64) >> 3
    return word != 0, at * 8 + byte


def bit_plane(bools: np.ndarray, row_bits: int) -> np.ndarray:
    """A [rows, columns] boolean matrix as one flat bit array, ``row_bits`` (a multiple of 8, at
    least the columns) bits per row, bit ``row * row_bits + column`` being bit ``column % 8`` of
    its byte: eight times smaller than the booleans, so scattered reads stay in the cache."""
    rows, columns = bools.shape
    padded = np.zeros((rows, row_bits), dtype=bool)
    padded[:, :columns] = bools
    return np.packbits(padded, axis=1, bitorder="little").reshape(-1)


def read_bits(plane: np.ndarray, index: np.ndarray, *, invert: bool = False) -> np.ndarray:
    """The bits of a `bit_plane` at the bit indices ``index`` (any shape), as booleans (their
    negation with ``invert``), C-contiguous."""
    shift = (index & 7).astype(np.uint8)
    bits = (np.take(plane, index >> 3) >> shift) & np.uint8(1)
    if invert:
        bits ^= np.uint8(1)
    return bits.view(bool)


def write_bits(plane: np.ndarray, index: np.ndarray, value: bool) -> None:
    """Set (``value``) or clear the bits of a `bit_plane` at the distinct bit indices ``index``.
    Bits sharing a byte are written by one read-modify-write each; where several land in one
    byte only one write sticks, so the others are written again until every bit holds."""
    byte = index >> 3
    mask = np.left_shift(np.uint8(1), (index & 7).astype(np.uint8))
    while byte.size:
        if value:
            plane[byte] = plane[byte] | mask
            lost = (plane[byte] & mask) == 0
        else:
            plane[byte] = plane[byte] & ~mask
            lost = (plane[byte] & mask) != 0
        byte, mask = byte[lost], mask[lost]
