"""What stages hand to later ones, owned by none: tokenized documents (Tokenize to
CreateInstances), the shuffle's bytes (`shuffle`: entries, instances and frames,
CreateInstances to WriteShards) and the words Deduplicate, Tokenize and create-vocab
all split text into. Importing no stage folder, they let data flow one way: a stage
imports only earlier stages and these."""
