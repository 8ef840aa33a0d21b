"""Subword tokenization beside BERT's WordPiece: SentencePiece, as ALBERT and the
TF Model Garden use it, behind the one tokenizer interface the pipeline calls.

    tokenizers.py            which tokenizer the flags ask for (TokenizerSpec), loaded
                             the same way by the pipeline, the loaders and the tools
    word_starts.py           where a word starts among pieces: each anchor's rule, once
    sentencepiece_model.py   a SentencePiece model as a vocabulary (pieces, special ids)
    sentencepiece_text.py    the anchors' text handling: preprocess_text, encode_pieces
    sentencepiece_training.py  learning a model on Beam (create-vocab), ALBERT's settings

WordPiece itself stays in transforms.tokenization and transforms.vocabulary.
"""
