"""Writing shards: a shard's rows as tf.train.Example or Parquet, TFRecord framing."""
