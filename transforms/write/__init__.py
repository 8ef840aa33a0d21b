"""Writing shards: shuffle entries, a shard's rows as tf.train.Example, TFRecord framing."""
