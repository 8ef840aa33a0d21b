"""The bytes that cross the shuffle from CreateInstances to WriteShards, one
module a layer: a shuffle entry's header and batches of entries (`entries`),
the layout of the instance an entry carries (`instances`), and the frames a
shard's entries travel in through the runner's shuffle (`frames`), which walk
the entries and instances through those two modules' own functions."""
