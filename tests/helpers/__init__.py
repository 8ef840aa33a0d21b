"""What the tests share: oracles, statistics, golden data, GCS and anchor helpers."""
