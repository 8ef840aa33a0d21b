"""Dedup: documents that repeat (exactly, or nearly) are kept once (`--dedup`).

The stage sits right after ReadDocuments, so nothing downstream sees a
document twice. `normalise` defines the text two documents are compared on,
`minhash` the word n-gram shingles, MinHash signatures and LSH bands of a
batch of documents, `clusters` and `decisions` the decisions (exact groups,
candidate pairs, transitive clusters, the keys to drop) as plain functions on
plain data; `beam` is the thin Beam shell around them.
"""
