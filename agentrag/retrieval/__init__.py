"""Retrieval: the vector leg, the lexical (BM25) leg, fusion and filters."""
