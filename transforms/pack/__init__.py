"""Sequence packing: several whole instances a row, planned from their lengths."""
