"""A persisted, incrementally updated BM25 index over postings (R21, R12).

Documents are addressed by *slot*: the chunk store's integer row id, so filter masks and the
store line up without translation. Postings live in immutable segments (term-major, like Lucene);
adding documents writes a new small segment and retiring them clears a ``live`` bit, so one
document costs a tiny fraction of a rebuild. Collection statistics (document frequencies, lengths)
are kept exact on every change, so scores never depend on the order in which documents arrived.
A query touches only the postings of its terms, never the whole corpus.
"""

from __future__ import annotations

import itertools
import json
import os
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NamedTuple, TypeVar

import numpy as np
import numpy.typing as npt

from ragspine.retrieval.lexical.bm25 import DEFAULT_BM25_B, DEFAULT_BM25_K1
from ragspine.retrieval.lexical.tokenizer import Tokenizer, dominant_script
from ragspine.retrieval.masks import first_per_group, narrow

IntArray = npt.NDArray[np.int64]
FloatArray = npt.NDArray[np.float64]
BoolArray = npt.NDArray[np.bool_]
ScriptArray = npt.NDArray[np.int8]

INDEX_FORMAT = 2
_MAX_SEGMENTS = 8


@dataclass(frozen=True)
class Segment:
    """Term-major postings: the documents of ``terms[i]`` are ``docs[indptr[i]:indptr[i+1]]``."""

    name: str
    terms: IntArray
    indptr: IntArray
    docs: IntArray
    tfs: npt.NDArray[np.float32]

    @property
    def n_postings(self) -> int:
        return int(self.docs.shape[0])


class LexicalHit(NamedTuple):
    slot: int
    key: str
    score: float


@dataclass(frozen=True)
class _State:
    """One consistent snapshot; searches read it while a writer builds the next one."""

    segments: tuple[Segment, ...]
    doc_freq: IntArray
    doc_len: IntArray
    live: BoolArray
    script: ScriptArray  # dominant_script of each slot's text
    n_live: int
    total_len: int
    generation: int
    dead_postings: int = 0  # retired slots whose postings still sit in a segment


ArrayT = TypeVar("ArrayT", IntArray, BoolArray, ScriptArray)


def _grow(array: ArrayT, size: int) -> ArrayT:
    """A writable copy with room for ``size`` entries (doubling, so appends stay amortised)."""
    length = array.shape[0]
    grown = np.zeros(length if length >= size else max(size, 2 * length), array.dtype)
    grown[: array.shape[0]] = array
    return grown


def _build_segment(name: str, slots: IntArray, term_ids: IntArray) -> Segment:
    """Postings from parallel (slot, term) occurrence arrays, sorted by term then slot."""
    if slots.size == 0:
        empty = np.zeros(0, dtype=np.int64)
        return Segment(name, empty, np.zeros(1, dtype=np.int64), empty, np.zeros(0, np.float32))
    width = int(slots.max()) + 1
    pairs, tfs = np.unique(term_ids * width + slots, return_counts=True)
    pair_terms, pair_docs = pairs // width, pairs % width
    new_term = np.empty(pair_terms.shape[0], dtype=bool)
    new_term[0] = True
    new_term[1:] = pair_terms[1:] != pair_terms[:-1]
    term_starts = np.flatnonzero(new_term)
    indptr = np.append(term_starts, pair_terms.shape[0]).astype(np.int64)
    return Segment(name, pair_terms[term_starts], indptr, pair_docs, tfs.astype(np.float32))


def _merge_segments(name: str, segments: Sequence[Segment], live: BoolArray) -> Segment:
    """One segment holding the live postings of ``segments``."""
    terms = np.concatenate([np.repeat(s.terms, np.diff(s.indptr)) for s in segments])
    docs = np.concatenate([s.docs for s in segments])
    tfs = np.concatenate([s.tfs for s in segments])
    keep = live[docs]
    terms, docs, tfs = terms[keep], docs[keep], tfs[keep]
    if docs.size == 0:
        return _build_segment(name, docs, terms)
    order = np.lexsort((docs, terms))
    terms, docs, tfs = terms[order], docs[order], tfs[order]
    new_term = np.empty(terms.shape[0], dtype=bool)
    new_term[0] = True
    new_term[1:] = terms[1:] != terms[:-1]
    starts = np.flatnonzero(new_term)
    return Segment(name, terms[starts], np.append(starts, terms.shape[0]), docs, tfs)


class BM25Index:
    """BM25 over slots. ``add``/``retire`` change it in place; ``save`` persists it."""

    def __init__(
        self,
        tokenizer: Tokenizer | None = None,
        *,
        k1: float = DEFAULT_BM25_K1,
        b: float = DEFAULT_BM25_B,
    ) -> None:
        if k1 < 0 or not 0.0 <= b <= 1.0:
            raise ValueError(f"BM25 needs k1 >= 0 and 0 <= b <= 1, got k1={k1}, b={b}")
        self.tokenizer = tokenizer or Tokenizer()
        self.k1 = k1
        self.b = b
        self._vocab: dict[str, int] = {}
        self._terms: list[str] = []
        self._keys: list[str | None] = []
        self._saved = {"vocab": (0, 0), "keys": (0, 0)}  # (entries, bytes) already on disk
        self._segment_counter = 0
        self._lock = threading.Lock()
        self._norm_cache: tuple[_State, FloatArray] | None = None
        self._group_cache: tuple[_State, IntArray, tuple[FloatArray, int, float]] | None = None
        self._state = _State(
            segments=(),
            doc_freq=np.zeros(0, dtype=np.int64),
            doc_len=np.zeros(0, dtype=np.int64),
            live=np.zeros(0, dtype=bool),
            script=np.zeros(0, dtype=np.int8),
            n_live=0,
            total_len=0,
            generation=0,
        )

    # ----------------------------------------------------------------- reading
    @property
    def generation(self) -> int:
        return self._state.generation

    def __len__(self) -> int:
        return self._state.n_live

    @property
    def n_segments(self) -> int:
        return len(self._state.segments)

    @property
    def vocabulary_size(self) -> int:
        return len(self._terms)

    def nbytes(self) -> int:
        """Memory held by the index arrays (postings and statistics)."""
        state = self._state
        arrays: list[npt.NDArray[np.generic]] = [
            state.doc_freq, state.doc_len, state.live, state.script
        ]  # fmt: skip
        for s in state.segments:
            arrays.extend([s.terms, s.indptr, s.docs, s.tfs])
        return int(sum(a.nbytes for a in arrays))

    def _norms(self, state: _State) -> FloatArray:
        cached = self._norm_cache
        if cached is not None and cached[0] is state:
            return cached[1]
        avg_len = state.total_len / state.n_live if state.total_len else 1.0
        norm = self.k1 * (1.0 - self.b + self.b * state.doc_len.astype(np.float64) / avg_len)
        self._norm_cache = (state, norm)
        return norm

    @property
    def keys(self) -> list[str | None]:
        """The key (chunk id) of every slot ever indexed."""
        return self._keys

    def scripts(self, slots: Sequence[int]) -> ScriptArray:
        """The dominant script of each slot's text (``SCRIPT_NEUTRAL`` for unknown slots)."""
        script = self._state.script
        index = np.asarray(slots, dtype=np.int64)
        known = index < script.shape[0]
        out = np.zeros(index.shape[0], dtype=np.int8)
        out[known] = script[index[known]]
        return out

    def live_mask(self, allowed: BoolArray | None = None) -> BoolArray:
        """Live slots, narrowed by ``allowed`` when given."""
        return narrow(self._state.live, allowed)

    def _query_terms(self, state: _State, query: str) -> tuple[IntArray, FloatArray]:
        """The query's indexed terms and their counts; none when the index is empty.

        Terms come in string order: the summation order, hence every bit of a score, is then
        independent of the order in which the vocabulary grew.
        """
        counts: dict[str, int] = {}
        if state.n_live:
            for token in self.tokenizer(query):
                counts[token] = counts.get(token, 0) + 1
        vocab, n_terms = self._vocab, state.doc_freq.shape[0]
        known = [
            (vocab[t], c) for t, c in sorted(counts.items()) if vocab.get(t, n_terms) < n_terms
        ]
        term_ids = np.fromiter((t for t, _ in known), dtype=np.int64, count=len(known))
        weights = np.fromiter((c for _, c in known), dtype=np.float64, count=len(known))
        return term_ids, weights

    def score_slots(
        self, query: str, allowed: BoolArray | None = None
    ) -> tuple[IntArray, FloatArray]:
        """BM25 of every live slot that holds a query term, slots ascending.

        A term in more than half the documents weighs 0 (Robertson idf floored at 0). Such terms
        are consulted only when no weighted term matches, so that in a small knowledge base a
        query of common words returns their documents at score 0 rather than nothing.
        """
        state = self._state
        term_ids, weights = self._query_terms(state, query)
        if term_ids.size == 0:
            return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.float64)
        df = state.doc_freq[term_ids].astype(np.float64)
        ratio = (state.n_live - df + 0.5) / (df + 0.5)
        term_weight = weights * np.log(np.maximum(ratio, 1.0)) * (self.k1 + 1.0)
        live = narrow(state.live, allowed)
        every_posting_live = allowed is None and state.dead_postings == 0
        positive = term_weight > 0.0
        docs, contributions = self._gather(
            state, live, every_posting_live, term_ids[positive], term_weight[positive]
        )
        if docs.size:
            scores = np.bincount(docs, weights=contributions, minlength=live.shape[0])
            slots = np.flatnonzero(scores).astype(np.int64)
            return slots, scores[slots].astype(np.float64)
        docs, _ = self._gather(
            state, live, every_posting_live, term_ids[~positive], term_weight[~positive]
        )
        slots = np.unique(docs).astype(np.int64)
        return slots, np.zeros(slots.shape[0], dtype=np.float64)

    def _gather(
        self,
        state: _State,
        live: BoolArray,
        every_posting_live: bool,
        term_ids: IntArray,
        term_weight: FloatArray,
    ) -> tuple[IntArray, FloatArray]:
        """The live postings of ``term_ids`` and their BM25 contributions, in term order."""
        docs, tf, which = self._postings(state, live, every_posting_live, term_ids)
        norm = self._norms(state)
        return docs, term_weight[which] * tf / (tf + norm[docs])

    def _postings(
        self, state: _State, live: BoolArray, every_posting_live: bool, term_ids: IntArray
    ) -> tuple[IntArray, FloatArray, IntArray]:
        """The live postings of ``term_ids``: slots, term frequencies and each posting's index
        into ``term_ids``, in term order.

        Vectorised over terms (one pass per segment), so a query costs a fixed number of numpy
        calls per segment rather than per term.
        """
        doc_parts: list[IntArray] = []
        tf_parts: list[FloatArray] = []
        term_parts: list[IntArray] = []
        for seg in state.segments:
            if seg.terms.shape[0] == 0 or term_ids.shape[0] == 0:
                continue
            pos = np.searchsorted(seg.terms, term_ids)
            found = pos < seg.terms.shape[0]
            found[found] = seg.terms[pos[found]] == term_ids[found]
            if not found.any():
                continue
            lo, hi = seg.indptr[pos[found]], seg.indptr[pos[found] + 1]
            lengths = hi - lo
            ends = np.cumsum(lengths)
            index = np.arange(ends[-1]) + np.repeat(lo - (ends - lengths), lengths)
            docs = seg.docs[index]
            tf = seg.tfs[index].astype(np.float64)
            which = np.repeat(np.flatnonzero(found), lengths)
            if not every_posting_live:
                keep = live[docs]
                docs, tf, which = docs[keep], tf[keep], which[keep]
            doc_parts.append(docs)
            tf_parts.append(tf)
            term_parts.append(which)
        if not doc_parts:
            empty = np.zeros(0, dtype=np.int64)
            return empty, np.zeros(0, dtype=np.float64), empty
        if len(doc_parts) == 1:
            return doc_parts[0], tf_parts[0], term_parts[0]
        return np.concatenate(doc_parts), np.concatenate(tf_parts), np.concatenate(term_parts)

    def _group_statistics(self, state: _State, groups: IntArray) -> tuple[FloatArray, int, float]:
        """Length per group, number of groups and their mean length, over live slots (cached
        for one state and one groups array)."""
        cached = self._group_cache
        if cached is not None and cached[0] is state and cached[1] is groups:
            return cached[2]
        n_groups = int(groups.max()) + 1 if groups.size else 0
        live_slots = np.flatnonzero(state.live[: groups.shape[0]])
        live_groups = groups[live_slots]
        live_slots, live_groups = live_slots[live_groups >= 0], live_groups[live_groups >= 0]
        doc_len = np.bincount(live_groups, weights=state.doc_len[live_slots], minlength=n_groups)
        n_docs = int(np.count_nonzero(np.bincount(live_groups, minlength=n_groups)))
        avg_len = float(doc_len.sum()) / n_docs if n_docs else 1.0
        stats = (doc_len.astype(np.float64), n_docs, avg_len)
        self._group_cache = (state, groups, stats)
        return stats

    def ranked_groups(
        self,
        query: str,
        top_k: int,
        groups: IntArray,
        allowed: BoolArray | None = None,
    ) -> tuple[list[int], list[float]]:
        """The ``top_k`` best groups (documents) scored as documents: BM25 over the union of
        each group's chunks, with document-level frequencies, lengths and average length.

        Why: ranking a document by its best chunk loses terms spread over several chunks and
        BM25's length normalisation of the whole text. Term counts come from the chunks that
        ``allowed`` keeps; collection statistics from every live chunk (text shared by two
        overlapping chunks counts twice). Each group is named by its chunk with the most query
        term occurrences (ties: the earlier chunk); groups are ordered by ``(-score, key)``.
        """
        state = self._state
        term_ids, weights = self._query_terms(state, query)
        if top_k <= 0 or term_ids.size == 0:
            return [], []
        n_known = term_ids.shape[0]
        docs, tf, terms = self._postings(state, state.live, state.dead_postings == 0, term_ids)
        inside = docs < groups.shape[0]
        docs, tf, terms = docs[inside], tf[inside], terms[inside]
        member = groups[docs]
        grouped = member >= 0
        docs, tf, terms, member = docs[grouped], tf[grouped], terms[grouped], member[grouped]
        if docs.size == 0:
            return [], []
        doc_len, n_docs, avg_len = self._group_statistics(state, groups)
        n_groups = doc_len.shape[0]
        pairs, inverse = np.unique(terms * n_groups + member, return_inverse=True)
        pair_terms, pair_groups = pairs // n_groups, pairs % n_groups
        df = np.bincount(pair_terms, minlength=n_known).astype(np.float64)
        idf = np.log(np.maximum((n_docs - df + 0.5) / (df + 0.5), 1.0))
        keep = narrow(state.live, allowed)[docs]
        pair_tf = np.bincount(inverse[keep], weights=tf[keep], minlength=pairs.shape[0])
        norm = self.k1 * (1.0 - self.b + self.b * doc_len[pair_groups] / avg_len)
        contribution = weights[pair_terms] * idf[pair_terms] * (self.k1 + 1.0)
        contribution = contribution * pair_tf / (pair_tf + norm)
        scores = np.bincount(pair_groups, weights=contribution, minlength=n_groups)
        # name each group by its kept chunk with the most query-term occurrences (ties: the
        # earlier chunk; a document's chunks take slots in chunk order)
        slot_tf = np.bincount(docs[keep], weights=tf[keep], minlength=state.live.shape[0])
        matched = np.flatnonzero(slot_tf)
        by_group = np.lexsort((matched, -slot_tf[matched], groups[matched]))
        ordered = matched[by_group]
        _, firsts = np.unique(groups[ordered], return_index=True)
        named = ordered[firsts]
        named_scores = np.asarray(scores, dtype=np.float64)[groups[named]]
        positive = named_scores > 0.0
        return self._order(named[positive].astype(np.int64), named_scores[positive], top_k)

    def ranked(
        self,
        query: str,
        top_k: int,
        allowed: BoolArray | None = None,
        groups: IntArray | None = None,
    ) -> tuple[list[int], list[str], list[float]]:
        """The ``top_k`` best live slots as columns (slots, keys, scores), ordered by
        ``(-score, key)`` (R3). Columns stay cheap at any depth.

        With ``groups`` (a group number per slot, e.g. its document), only the best slot of
        each group counts and ``top_k`` groups come back.
        """
        if top_k <= 0:
            return [], [], []
        slots, scores = self.score_slots(query, allowed)
        if groups is None:
            ranked_slots, ranked_scores = self._order(slots, scores, top_k)
        else:
            depth = top_k * 4
            while True:  # deepen until top_k groups are in hand or every match was ranked
                ranked_slots, ranked_scores = self._order(slots, scores, depth)
                firsts = first_per_group(ranked_slots, groups)
                if len(firsts) >= top_k or depth >= slots.shape[0]:
                    break
                depth *= 4
            best = firsts[:top_k]
            ranked_slots = [ranked_slots[i] for i in best]
            ranked_scores = [ranked_scores[i] for i in best]
        ranked_slots, ranked_scores = ranked_slots[:top_k], ranked_scores[:top_k]
        return ranked_slots, [self._keys[s] or "" for s in ranked_slots], ranked_scores

    def _order(
        self, slots: IntArray, scores: FloatArray, depth: int
    ) -> tuple[list[int], list[float]]:
        """The best ``depth`` of the scored slots, ties broken by key."""
        if slots.shape[0] > depth:
            cut = slots.shape[0] - depth
            kth = np.partition(scores, cut)[cut]
            at_least = scores >= kth  # keeps every tie at the cut, so the order below decides
            slots, scores = slots[at_least], scores[at_least]
        order = np.argsort(-scores, kind="stable")
        scores = scores[order]
        ranked_slots = slots[order].tolist()
        same = scores[1:] == scores[:-1]
        if same.any():
            keys = self._keys
            starts = np.flatnonzero(np.concatenate(([True], ~same)))
            ends = np.append(starts[1:], scores.shape[0])
            tied = ends - starts > 1
            for start, end in zip(starts[tied].tolist(), ends[tied].tolist()):
                ranked_slots[start:end] = sorted(
                    ranked_slots[start:end], key=lambda slot: keys[slot] or ""
                )
        return ranked_slots[:depth], scores[:depth].tolist()

    def search(self, query: str, top_k: int, allowed: BoolArray | None = None) -> list[LexicalHit]:
        """The ``top_k`` best live slots, ordered by ``(-score, key)`` (R3)."""
        return [LexicalHit(*hit) for hit in zip(*self.ranked(query, top_k, allowed))]

    # ----------------------------------------------------------------- writing
    def _term_ids(self, tokens: list[str]) -> IntArray:
        """Vocabulary ids of ``tokens``; new terms get ids in order of first appearance."""
        vocab, terms = self._vocab, self._terms
        new_terms = [t for t in dict.fromkeys(tokens) if t not in vocab]
        if new_terms:
            vocab.update(zip(new_terms, range(len(terms), len(terms) + len(new_terms))))
            terms.extend(new_terms)
        return np.fromiter(map(vocab.__getitem__, tokens), dtype=np.int64, count=len(tokens))

    def apply(
        self,
        added: Sequence[tuple[int, str, str]],
        retired: Sequence[tuple[int, str]],
        generation: int,
    ) -> None:
        """Add ``(slot, key, text)`` documents and retire ``(slot, text)`` ones, atomically."""
        with self._lock:
            state = self._state
            max_slot = max([s for s, _, _ in added] + [s for s, _ in retired] + [-1])
            size = max(max_slot + 1, state.live.shape[0])
            live = _grow(state.live, size)
            doc_len = _grow(state.doc_len, size)
            script = _grow(state.script, size)
            n_live, total_len = state.n_live, state.total_len
            dead_postings = state.dead_postings
            gone: list[IntArray] = []
            for slot, text in retired:
                if slot < state.live.shape[0] and live[slot]:
                    live[slot] = False
                    n_live -= 1
                    dead_postings += 1
                    total_len -= int(doc_len[slot])
                    doc_len[slot] = 0
                    gone.append(np.unique(self._term_ids(self.tokenizer(text))))
            new_docs = [(s, k, t) for s, k, t in added if not (s < live.shape[0] and live[s])]
            token_lists = [self.tokenizer(text) for _, _, text in new_docs]
            lengths = np.fromiter(map(len, token_lists), dtype=np.int64, count=len(token_lists))
            occ_terms = self._term_ids(list(itertools.chain.from_iterable(token_lists)))
            new_slots = np.fromiter(
                (s for s, _, _ in new_docs), dtype=np.int64, count=len(new_docs)
            )
            occ_slots = np.repeat(new_slots, lengths)
            if new_docs:
                live[new_slots] = True
                doc_len[new_slots] = lengths
                script[new_slots] = [dominant_script(text) for _, _, text in new_docs]
                n_live += len(new_docs)
                total_len += int(lengths.sum())
                self._keys.extend([None] * (int(new_slots.max()) + 1 - len(self._keys)))
                for slot, key, _ in new_docs:
                    self._keys[slot] = key
            doc_freq = _grow(state.doc_freq, len(self._terms))
            if gone:
                np.subtract.at(doc_freq, np.concatenate(gone), 1)
            segments = state.segments
            if occ_terms.size:
                self._segment_counter += 1
                segment = _build_segment(
                    f"seg-{generation:010d}-{self._segment_counter:06d}", occ_slots, occ_terms
                )
                doc_freq[segment.terms] += np.diff(segment.indptr)
                segments = (*segments, segment)
            merged = self._maybe_merge(segments, live, generation)
            if len(merged) == 1 and merged != segments:
                dead_postings = 0  # a full merge keeps live postings only
            self._state = _State(
                merged,
                doc_freq,
                doc_len,
                live,
                script,
                n_live,
                total_len,
                generation,
                dead_postings,
            )

    def _maybe_merge(
        self, segments: tuple[Segment, ...], live: BoolArray, generation: int
    ) -> tuple[Segment, ...]:
        """Tiered merging: small segments merge together; the base only once they grow large."""
        if len(segments) <= _MAX_SEGMENTS:
            return segments
        base, rest = segments[0], segments[1:]
        self._segment_counter += 1
        name = f"seg-{generation:010d}-{self._segment_counter:06d}"
        if sum(s.n_postings for s in rest) * 4 > base.n_postings:
            return (_merge_segments(name, segments, live),)
        return (base, _merge_segments(name, rest, live))

    # ------------------------------------------------------------- persistence
    def save(self, directory: Path) -> None:
        """Write new segments and a new statistics file, then switch ``meta.json`` atomically.

        Vocabulary and keys are append-only files; ``meta.json`` records how many lines are valid,
        so a crash mid-save leaves the previous index intact.
        """
        directory.mkdir(parents=True, exist_ok=True)
        state = self._state
        for seg in state.segments:
            if not (directory / f"{seg.name}.docs.npy").exists():
                for part in ("terms", "indptr", "docs", "tfs"):
                    _save_array(directory / f"{seg.name}.{part}.npy", getattr(seg, part))
        saved = {
            "vocab": _append_lines(directory / "vocab.jsonl", self._terms, self._saved["vocab"]),
            "keys": _append_lines(directory / "keys.jsonl", self._keys, self._saved["keys"]),
        }
        stats_name = f"stats-{state.generation:010d}-{self._segment_counter:06d}.npz"
        tmp = directory / f".{stats_name}.tmp"
        with open(tmp, "wb") as fh:
            np.savez(
                fh,
                doc_freq=state.doc_freq,
                doc_len=state.doc_len,
                live=state.live,
                script=state.script,
            )
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, directory / stats_name)
        meta = {
            "format": INDEX_FORMAT,
            "generation": state.generation,
            "tokenizer": self.tokenizer.describe(),
            "k1": self.k1,
            "b": self.b,
            "segments": [s.name for s in state.segments],
            "stats": stats_name,
            "vocab": list(saved["vocab"]),
            "keys": list(saved["keys"]),
            "n_live": state.n_live,
            "total_len": state.total_len,
            "dead_postings": state.dead_postings,
            "segment_counter": self._segment_counter,
        }
        _write_json_atomic(directory / "meta.json", meta)
        self._saved = saved
        keep = {
            f"{s.name}.{p}.npy" for s in state.segments for p in ("terms", "indptr", "docs", "tfs")
        }
        keep |= {"meta.json", "vocab.jsonl", "keys.jsonl", stats_name}
        for path in directory.iterdir():
            if path.name not in keep and not path.name.startswith("."):
                path.unlink(missing_ok=True)

    @classmethod
    def load(cls, directory: Path, tokenizer: Tokenizer) -> BM25Index:
        """Open a saved index (arrays memory-mapped); raises ``ValueError`` if it is unusable."""
        try:
            meta = json.loads((directory / "meta.json").read_text(encoding="utf-8"))
        except (OSError, json.JSONDecodeError) as exc:
            raise ValueError(f"no readable index in {directory}: {exc}") from exc
        if meta.get("format") != INDEX_FORMAT or meta.get("tokenizer") != tokenizer.describe():
            raise ValueError(f"index in {directory} was built with other settings")
        index = cls(tokenizer, k1=float(meta["k1"]), b=float(meta["b"]))
        try:
            index._saved = {
                name: (int(meta[name][0]), int(meta[name][1])) for name in ("vocab", "keys")
            }
            index._terms = _read_lines(directory / "vocab.jsonl", index._saved["vocab"])
            index._keys = _read_lines(directory / "keys.jsonl", index._saved["keys"])
            index._vocab = {t: i for i, t in enumerate(index._terms)}
            segments = tuple(
                Segment(
                    name,
                    *(
                        np.load(directory / f"{name}.{part}.npy", mmap_mode="r")
                        for part in ("terms", "indptr", "docs", "tfs")
                    ),
                )
                for name in meta["segments"]
            )
            with np.load(directory / meta["stats"]) as stats:
                index._state = _State(
                    segments=segments,
                    doc_freq=stats["doc_freq"],
                    doc_len=stats["doc_len"],
                    live=stats["live"],
                    script=stats["script"],
                    n_live=int(meta["n_live"]),
                    total_len=int(meta["total_len"]),
                    generation=int(meta["generation"]),
                    dead_postings=int(meta["dead_postings"]),
                )
        except (OSError, KeyError, ValueError) as exc:
            raise ValueError(f"index in {directory} is damaged: {exc}") from exc
        index._segment_counter = int(meta["segment_counter"])
        return index


def _save_array(path: Path, array: npt.NDArray[np.generic]) -> None:
    tmp = path.with_name(f".{path.name}.tmp")
    with open(tmp, "wb") as fh:
        np.save(fh, np.ascontiguousarray(array))
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(tmp, path)


def _write_json_atomic(path: Path, payload: object) -> None:
    tmp = path.with_name(f".{path.name}.tmp")
    with open(tmp, "w", encoding="utf-8") as fh:
        json.dump(payload, fh, ensure_ascii=False, indent=1)
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(tmp, path)


def _append_lines(
    path: Path, items: Sequence[str | None], saved: tuple[int, int]
) -> tuple[int, int]:
    """Append ``items`` past ``saved`` (entries, bytes), first cutting what a crashed save left."""
    count, size = saved
    payload = "".join(json.dumps(x, ensure_ascii=False) + "\n" for x in items[count:]).encode()
    with open(path, "r+b" if path.exists() else "wb") as fh:
        fh.seek(size)
        fh.truncate()
        fh.write(payload)
        fh.flush()
        os.fsync(fh.fileno())
    return len(items), size + len(payload)


def _read_lines(path: Path, saved: tuple[int, int]) -> list[Any]:
    count, size = saved
    if count == 0:
        return []
    with open(path, "rb") as fh:
        data = fh.read(size)
    if len(data) != size:
        raise ValueError(f"{path} is shorter than the {size} bytes the index expects")
    items = json.loads(b"[" + data.rstrip(b"\n").replace(b"\n", b",") + b"]")
    if not isinstance(items, list) or len(items) != count:
        raise ValueError(f"{path} does not hold the {count} entries the index expects")
    return items
