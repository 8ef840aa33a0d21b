"""Tokenizing documents: WordPiece (FullTokenizer-exact), SentencePiece, Chinese whole words, sentences."""
