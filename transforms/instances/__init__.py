"""Training instances: the sentence-pair and full-sequence objectives, masking, the random-document sample."""
