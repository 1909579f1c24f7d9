"""Exact and near-duplicate images: one fingerprint per image, and the groups they form.

- Exact: the same decoded pixels (a SHA-1 of the RGB array and its shape), whatever the file
  name, format or metadata.
- Near: perceptual hashes (pHash: the signs of the lowest frequencies of the image's
  greyscale DCT, from the `imagehash` package) within `THRESHOLD` of 64 bits, confirmed by
  the finer 256-bit pHash within `FINE_THRESHOLD`.

Why these thresholds: `THRESHOLD` is as far as a copy moves the 64-bit pHash when it is
resized, re-compressed, colour-cast, saturated, brightened or cropped by a few percent a side
(dHash, aHash and wavelet hashes are no more robust and let distinct photos closer). That far,
distinct photos of a similar scene (flowers on similar backgrounds) come within it too; the
256-bit pHash tells them apart: `FINE_THRESHOLD` lies between where such copies stay and where
different photos start. Larger crops are not found: a near-duplicate here is the same picture,
not the same scene (`python benchmarks/duplicates.py --hashes 300` measures both hashes on real
photos; figures: docs/benchmarks.md#figures-behind-the-defaults). An image without detail
(one colour: its 32x32 greyscale varies by less than `FLAT` levels) has no perceptual hash
worth comparing (any two flat images would match): only its exact copies are found.

The search is not all-pairs: multi-index hashing splits the hash into THRESHOLD + 1 chunks;
two hashes within THRESHOLD bits agree exactly on at least one chunk (pigeonhole), so only
images that share a chunk's value are compared. Groups are the connected components of the
pairs found (a chain A~B~C is one group even when A and C are further apart: for keeping
copies in one split, that errs on the safe side).
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

import imagehash
import numpy as np

THRESHOLD = 10  # bits of the 64-bit pHash (see the module)
FINE_THRESHOLD = 80  # bits of the 256-bit pHash that confirms a pair (see the module)
FLAT = 1.0  # standard deviation (of 255 levels) below which an image has no detail
BITS = 64
_BLOCK = 1 << 22  # hash comparisons per step of the search (32 MB of uint64)


@dataclass(frozen=True)
class Fingerprint:
    exact: str  # SHA-1 (hex) of the decoded RGB pixels and their shape
    phash: int | None  # 64-bit perceptual hash: indexed (None: a flat image, see the module)
    fine: int | None  # 256-bit perceptual hash: confirms


def fingerprint(image) -> Fingerprint:
    """The fingerprint of an RGB Pillow image."""
    pixels = np.asarray(image, dtype=np.uint8)
    digest = hashlib.sha1(f"{pixels.shape}".encode())
    digest.update(np.ascontiguousarray(pixels).data)
    grey = image.convert("L")
    if np.asarray(grey.resize((32, 32)), np.float32).std() < FLAT:
        return Fingerprint(digest.hexdigest(), None, None)
    return Fingerprint(digest.hexdigest(), _int(imagehash.phash(grey)),
                       _int(imagehash.phash(grey, hash_size=16)))


def _int(h) -> int:
    """An imagehash as an integer (its bits row-major)."""
    return int.from_bytes(np.packbits(h.hash.reshape(-1)).tobytes(), "big")


def _words(values: list[int], bits: int) -> np.ndarray:
    """Integers of `bits` bits as [N, bits / 64] uint64 words."""
    n = bits // 64
    return np.array([[(v >> (64 * (n - 1 - k))) & (2**64 - 1) for k in range(n)]
                     for v in values], dtype=np.uint64).reshape(len(values), n)


def _popcount(x: np.ndarray) -> np.ndarray:
    if hasattr(np, "bitwise_count"):  # NumPy 2
        return np.bitwise_count(x)
    return np.unpackbits(x.view(np.uint8).reshape(*x.shape, 8), axis=-1).sum(-1)


def near_pairs(hashes, threshold: int = THRESHOLD) -> np.ndarray:
    """[P, 2] index pairs (i < j) of hashes within `threshold` bits of each other, by
    multi-index hashing (see the module); each pair once, sorted."""
    h = np.asarray(hashes, dtype=np.uint64).reshape(-1)
    if len(h) < 2:
        return np.zeros((0, 2), np.int64)
    edges = np.linspace(0, BITS, min(threshold + 1, BITS) + 1).astype(np.uint64)
    found = []
    for low, high in zip(edges[:-1], edges[1:]):
        key = (h >> low) & ((np.uint64(1) << (high - low)) - np.uint64(1))
        order = np.argsort(key, kind="stable")
        starts = np.flatnonzero(np.r_[True, key[order][1:] != key[order][:-1]])
        for run in np.split(order, starts[1:]):
            if len(run) > 1:
                found.append(_close_in(h, np.sort(run), threshold))
    if not found:
        return np.zeros((0, 2), np.int64)
    return np.unique(np.concatenate(found), axis=0)


def _close_in(h: np.ndarray, members: np.ndarray, threshold: int) -> np.ndarray:
    """Pairs of `members` (sorted indices sharing a chunk) within `threshold`, in blocks of
    rows so that a large bucket never needs a square matrix at once."""
    out = []
    step = max(1, _BLOCK // len(members))
    for start in range(0, len(members), step):
        rows = members[start:start + step]
        distance = _popcount(h[rows][:, None] ^ h[members][None, :])
        i, j = np.nonzero((distance <= threshold) & (rows[:, None] < members[None, :]))
        out.append(np.stack([rows[i], members[j]], axis=1))
    return np.concatenate(out)


@dataclass(frozen=True)
class Group:
    members: tuple[int, ...]  # indices into the fingerprints, sorted
    exact: bool  # every member has the same pixels


def groups(fingerprints: list[Fingerprint | None], threshold: int = THRESHOLD,
           fine_threshold: int = FINE_THRESHOLD) -> list[Group]:
    """The groups of two or more images that are exact or near copies of each other (None:
    an image that could not be read, in no group), ordered by their first member."""
    from scipy.sparse import coo_matrix
    from scipy.sparse.csgraph import connected_components

    known = [i for i, f in enumerate(fingerprints) if f is not None]
    if len(known) < 2:
        return []
    hashed = np.array([k for k, i in enumerate(known) if fingerprints[i].phash is not None],
                      dtype=np.int64)
    hashes = np.array([fingerprints[known[k]].phash for k in hashed], dtype=np.uint64)
    pairs = near_pairs(hashes, threshold)
    if len(pairs):
        fine = _words([fingerprints[known[k]].fine for k in hashed], 256)
        distance = _popcount(fine[pairs[:, 0]] ^ fine[pairs[:, 1]]).sum(axis=1)
        pairs = pairs[distance <= fine_threshold]
    pairs = [hashed[pairs].reshape(-1, 2)]
    first: dict[str, int] = {}
    for k, i in enumerate(known):  # exact copies are near ones too; said for any threshold
        pairs.append(np.array([[first.setdefault(fingerprints[i].exact, k), k]]))
    pairs = np.concatenate(pairs)
    n = len(known)
    graph = coo_matrix((np.ones(len(pairs)), (pairs[:, 0], pairs[:, 1])), shape=(n, n))
    _, component = connected_components(graph, directed=False)
    sizes = np.bincount(component)
    found: dict[int, list[int]] = {}
    for k in np.flatnonzero(sizes[component] > 1):
        found.setdefault(int(component[k]), []).append(known[k])
    out = [Group(tuple(m), len({fingerprints[i].exact for i in m}) == 1)
           for m in found.values()]
    return sorted(out, key=lambda g: g.members)
