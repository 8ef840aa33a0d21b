"""What stages hand to later ones, owned by none: tokenized documents (Tokenize to
CreateInstances), the shuffle's bytes (`shuffle`: entries, instances and frames,
CreateInstances to WriteShards), the words Deduplicate, Decontaminate, Tokenize and
create-vocab all split text into and the hashes of their n-grams, files read
without Beam (the tokenizers' outside the pipeline, the loaders'), and how the
compiled kernels borrow their callers' arrays (`borrowed`). Importing no stage
folder, they let data flow one way: a stage imports only earlier stages and these,
and the loaders import the core, which imports no loader."""
