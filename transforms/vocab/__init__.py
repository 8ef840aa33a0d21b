"""Learning vocabularies: WordPiece from word counts, SentencePiece from a sentence sample."""
