"""Decontaminate: documents holding a word n-gram of a benchmark are dropped (`--decontaminate`)."""
